# The table of a window's targets (MPI 12.2, window creation) in its state
# (included by _engine.pyx): what each rank told the others at creation,
# and what this rank learnt of each since (connected at, its engine handle,
# mapped here, ready for the hot path, work awaiting a flush).

@cython.final
cdef class _Table:
    """One entry per rank of the window, the only copy. size is the real
    size; the hot path stays off dynamic windows (absolute addresses)."""
    cdef Py_ssize_t n
    cdef bint dynamic
    cdef vector[uint64_t] base, size, unit, ctrl_addr
    cdef vector[int64_t] world
    cdef vector[uint8_t] access, mem_type, acc_locked
    cdef vector[uintptr_t] mapped
    cdef vector[uint64_t] generation  # per rank: the engine's mapping generation when mapped[r] was taken
    cdef list pins         # per rank: the RemotePin that keeps mapped[r] mapped, or None
    cdef vector[uint8_t] dirty, ready
    cdef list pending      # per rank: what lives until its next flush
    cdef list posted       # per rank: the op of non-fetching atomics posted since its last flush, or None
    cdef object connector  # world rank -> engine address, connecting on first use (the runtime's)
    cdef vector[string] addr  # the engine address each rank is connected at ("" until then)
    # per rank: the engine's handle of that connection (AcquirePeer), taken at
    # the first call to it, so that posts, flushes, atomics and notifications
    # name no address; NULL until then, after a failed call (the next one
    # resolves the address again), or where the engine has no handles (the
    # vendor build)
    cdef vector[PeerRef *] peer_ref
    # handles dropped while another thread's call may still use them
    # (without the GIL): released with the window state, never before
    cdef vector[PeerRef *] peer_retired

    def __cinit__(self):
        self.pins = []
        self.pending = []
        self.posted = []

    def __dealloc__(self):
        self.release_peers()

    cdef int fill(self, object connector, metas, world_ranks, bint dynamic) except -1:
        cdef Py_ssize_t i
        self.connector = connector
        self.n = len(metas)
        self.dynamic = dynamic
        for i in range(self.n):
            m = metas[i]
            self.base.push_back(m.base)
            self.size.push_back(m.size)
            self.unit.push_back(m.disp_unit)
            self.ctrl_addr.push_back(m.ctrl)
            self.access.push_back(m.access)
            self.mem_type.push_back(m.mem_type)
            self.acc_locked.push_back(m.acc_locked)
            self.world.push_back(world_ranks[i])
        self.mapped.resize(self.n, 0)
        self.generation.resize(self.n, 0)
        self.pins = [None] * self.n
        self.dirty.resize(self.n, 0)
        self.ready.resize(self.n, 0)
        self.addr.resize(self.n)
        self.peer_ref.resize(self.n, NULL)
        self.pending = [[] for _ in range(self.n)]
        self.posted = [None] * self.n
        return 0

    cdef void release_peers(self):
        """At the end of the window state, when no call can be using them
        (a call holds the state alive while it runs)."""
        cdef size_t i
        for i in range(self.peer_ref.size()):
            ReleasePeer(self.peer_ref[i])
        for i in range(self.peer_retired.size()):
            ReleasePeer(self.peer_retired[i])
        self.peer_ref.clear()
        self.peer_retired.clear()

    cdef inline int connect(self, Py_ssize_t r) except -1:
        """Connect to target r on first use (its engine address in addr[r])."""
        if self.addr[r].empty():
            self.addr[r] = (<str>self.connector(self.world[r])).encode()
        return 0

    cdef inline AscendString name(self, Py_ssize_t r) noexcept nogil:
        """r's engine address, for the calls that take one."""
        return AscendString(self.addr[r].c_str(), self.addr[r].size())

    cdef inline PeerRef *peer(self, Engine engine, Py_ssize_t r, int priority):
        """r's connection handle (after connect), or NULL: call by name."""
        cdef PeerRef *p = self.peer_ref[r]
        if p == NULL and _HAS_PEER_HANDLES:
            if AcquirePeer(engine._h[0], self.name(r), p, <Priority>priority) != 0:
                p = NULL
            self.peer_ref[r] = p
        return p

    cdef void drop_peer(self, Py_ssize_t r):
        """The next call resolves r's address again; this handle may still be
        in another thread's call, so it is retired, not released."""
        if self.peer_ref[r] != NULL:
            self.peer_retired.push_back(self.peer_ref[r])
            self.peer_ref[r] = NULL

    cdef void set_ready(self, Py_ssize_t r, uintptr_t mapped, keep, uint64_t generation):
        self.pins[r] = keep
        self.mapped[r] = mapped
        self.generation[r] = generation
        self.ready[r] = not self.dynamic

    cdef inline char *direct(self, Engine engine, Py_ssize_t r):
        """r's window memory mapped here, or NULL. A mapping older than the
        engine's mapping generation is forgotten: the Python layer looks it
        up again."""
        if self.mapped[r] == 0:
            return NULL
        if MappingGeneration(engine._h[0]) != self.generation[r]:
            self.mapped[r] = 0
            self.pins[r] = None
            self.ready[r] = 0
            return NULL
        return <char *>self.mapped[r]

    cdef inline void completed(self, Py_ssize_t r):
        self.dirty[r] = 0
        del self.pending[r][:]
        self.posted[r] = None

    cdef inline void keep(self, Py_ssize_t r, object keep):
        """r has work awaiting a flush; ``keep`` lives until that flush."""
        self.dirty[r] = 1
        if keep is not None:
            (<list>self.pending[r]).append(keep)

    cdef inline bint offset(self, object target, Py_ssize_t r, size_t nbytes, uint64_t *off):
        cdef long long d
        if target is None:
            d = 0
        elif type(target) is int:
            # Past the window (or past 64 bits, where d * unit would wrap
            # around to a valid offset): the slow path raises BoundsError.
            if target < 0 or target > self.size[r] // self.unit[r]:
                return False
            d = target
        else:
            return False
        off[0] = <uint64_t>d * self.unit[r]
        return off[0] + nbytes <= self.size[r] and off[0] <= self.size[r]

    cdef inline bint target_offset(self, object target, Py_ssize_t r, const Py_buffer *view, uint64_t *off):
        """offset for every target spec the hot path takes: also (disp,),
        (disp, count) and (disp, count, basic datatype) as a tuple or list,
        where the target describes exactly the origin's bytes. Anything else
        (a derived or unknown datatype, a count the origin does not fill, a
        wrong type) is the Python layer's, which parses and checks it."""
        cdef Py_ssize_t n, count
        cdef size_t size, described
        cdef size_t nbytes = <size_t>view.len
        if target is None or type(target) is int:
            return self.offset(target, r, nbytes, off)
        if type(target) is not tuple and type(target) is not list:
            return False
        n = len(target)
        if n == 0 or n > 3:
            return False
        if n >= 2:
            if type(target[1]) is not int:
                return False
            if n == 3:
                size = _basic_size(target[2], view)
                if size == 0:
                    return False
            elif _one_char_format(view.format):
                # (disp, count) counts the origin's elements, as the Python
                # layer reads a buffer of one basic element.
                size = <size_t>view.itemsize
            else:
                return False
            count = _long_as_ssize(target[1])
            if count < 0:
                PyErr_Clear()  # (past Py_ssize_t: set an OverflowError)
                return False  # negative or huge: the Python layer's to refuse
            if _mul_overflow(<size_t>count, size, &described) or described != nbytes:
                return False
        return self.offset(target[0], r, nbytes, off)

