# The origin side of the epoch state machine (MPI 12.5, synchronization
# calls) of a window's state (included by _engine.pyx). epochs.py changes it
# only through the window state's methods, so the hot path reads the one
# truth: epoch[r] / passive[r] say an access epoch is open to r.

@cython.final
cdef class _Epochs:
    """Which access epochs are open, to which targets."""
    cdef vector[uint8_t] epoch, passive
    cdef bint open_all      # Lock_all or the HIXL face: every target, passive
    cdef bint fence_open    # a fence epoch: every target, active
    cdef bint fence_used    # an RMA call went through the fence epoch since it opened
    cdef dict locks         # rank -> (lock_type, acquired) of Lock
    cdef object access      # the PSCW access group (a frozenset) after Start, else None
    cdef object lock_all    # False, or (True, acquired) inside Lock_all
    cdef bint always_open   # the HIXL-style face: no epochs to open

    def __cinit__(self):
        self.locks = {}
        self.access = None
        self.lock_all = False

    cdef void resize(self, Py_ssize_t n):
        self.epoch.resize(n, 0)
        self.passive.resize(n, 0)

    cdef inline bint access_ok(self, Py_ssize_t r):
        """An access epoch is open to r (a fence epoch counts as used)."""
        if self.open_all or self.epoch[r]:
            return True
        if self.fence_open:
            self.fence_used = True
            return True
        return False

    cdef inline bint in_passive(self, Py_ssize_t r):
        return self.open_all or self.passive[r]

    cdef inline bint lock_may_open(self):
        """Lock may open here: no other epoch in the way."""
        return (not self.lock_all and not self.always_open and self.access is None
                and not (self.fence_open and self.fence_used))

    cdef void set_bits(self, Py_ssize_t r):
        cdef bint locked = r in self.locks
        self.passive[r] = locked
        self.epoch[r] = locked or (self.access is not None and r in self.access)

    cdef void add_lock(self, Py_ssize_t r, lock_type, bint acquired):
        self.locks[r] = (lock_type, acquired)
        self.set_bits(r)

    cdef object pop_lock(self, Py_ssize_t r):
        out = self.locks.pop(r)
        self.set_bits(r)
        return out

    cdef int set_access(self, ranks) except -1:
        old, self.access = self.access, (None if ranks is None else frozenset(ranks))
        for r in set(old or ()) | set(self.access or ()):
            self.set_bits(r)
        return 0

    cdef int set_lock_all(self, value) except -1:
        self.lock_all = value
        self.open_all = bool(value) or self.always_open
        return 0

    cdef void set_always_open(self, bint value):
        self.always_open = value
        self.open_all = bool(self.lock_all) or value
