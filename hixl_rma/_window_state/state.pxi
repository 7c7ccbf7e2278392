# A window's state (included by _engine.pyx after its parts): the
# composition of the parts, one per chapter of MPI's RMA -- the table of
# targets, the epochs, the passive-target lock words, the accumulate lock,
# the held notifications, the fence barrier -- and the hot path of
# hixl_rma.Win that reads them.
#
# Put, Get and Flush of the common case -- a C-contiguous origin, a target
# that is None or an int displacement, an open epoch, a window whose target
# is already connected -- are parsed into C values here and done in one
# step: a memcpy into (or out of) a peer region mapped into this process, or
# one engine call on the target's handle. Anything else returns False and
# the Python layer (window/core.py and the parts) takes it, with its full
# checks and error messages.


cdef class WindowState:
    """All of one window's state that calls read per operation, in parts
    that each own theirs (table, epochs, locks, acc_lock, held, fence).
    ``core.WindowCore`` derives from it and adds what only the Python layer
    reads (communicator, memory, registrations, info): one object, one
    state.

    The hot path either completes an operation or raises: when the engine
    refuses or fails it, the error is raised here, naming the call, the
    rank, the window and the bytes; nothing is handed on to be done again.
    ``False``/``0`` from a method means only "not the common case, nothing
    done"."""
    cdef public Engine engine
    cdef public str key      # the window's id ("w<world rank of rank 0>.<seq>"), or MPI_WIN_NULL
    cdef public str name     # its name (Set_name), "" until set
    cdef public bint freed
    # the window's transfer priority (info key priority: 0 high, 1 normal, 2
    # bulk), set before its first post: its peer handles, batches and
    # notifications carry it into the engine's queues
    cdef public int priority
    cdef public list targets  # Target views, one per rank of the window
    cdef public object me     # targets[this rank]
    cdef Py_ssize_t comm_rank
    cdef _Table table
    cdef _Epochs epochs
    cdef _LockWords locks_
    cdef _AccLock acc_lock
    cdef _TargetPath tpath
    cdef _Held held
    cdef _FenceBarrier fence_

    def __cinit__(self, *args, **kwargs):
        # A null window until set_targets fills the table in.
        self.key = "MPI_WIN_NULL"
        self.name = ""
        self.priority = 1
        self.freed = True
        self.targets = []
        self.table = _Table.__new__(_Table)
        self.epochs = _Epochs.__new__(_Epochs)
        self.locks_ = _LockWords.__new__(_LockWords)
        self.acc_lock = _AccLock.__new__(_AccLock)
        self.tpath = _TargetPath.__new__(_TargetPath)
        self.held = _Held.__new__(_Held)
        self.fence_ = _FenceBarrier.__new__(_FenceBarrier)

    def set_targets(self, Engine engine, object connector, metas, world_ranks, Py_ssize_t comm_rank,
                    uint64_t acc_owner, bint dynamic, str by="auto"):
        """Fill the table from every rank's creation record (winmeta.Meta),
        the ranks' world ranks and this rank's place; ``connector(world
        rank)`` connects to a rank and gives its engine address. ``by``: who
        makes the small operations on same-node targets this rank cannot map
        (HIXL_RMA_TARGET_OPS: auto, origin or target)."""
        self.engine = engine
        self.comm_rank = comm_rank
        self.acc_lock.owner = acc_owner
        self.table.fill(connector, metas, world_ranks, dynamic)
        n = self.table.n
        self.epochs.resize(n)
        self.locks_.resize(n, comm_rank)
        self.tpath.resize(n, _TARGET_PATHS[by])
        self.held.resize(n, f"{self.key}:n/{acc_owner - 1}".encode())
        self.targets = [Target.view(self, i) for i in range(n)]
        self.me = self.targets[comm_rank]
        self.freed = False

    def label(self):
        """The window's name in messages: its name, else its key."""
        return self.name or self.key

    cdef inline int _enter(self) except -1:
        """Count a call into the engine made without the GIL (Engine.finalize
        waits for them); ParamError once the engine is finalized or closing."""
        if self.engine is None or not self.engine._usable():
            raise ParamError(f"window {self.label()}: its engine is finalized")
        self.engine._calls += 1
        return 0

    cdef inline void _wake_progress(self):
        """This thread is about to wait on something else than the engine
        (a lock word, the fence counters): peers' requests to this rank
        (operations made by the target, software atomics) are served by
        the progress thread meanwhile, not at its next park step."""
        if self._live():
            WakeProgress(self.engine._h[0])

    cdef inline bint _live(self):
        return self.table.n > 0 and self.engine is not None and self.engine._usable()

    cdef int _raise(self, Status st, str what, Py_ssize_t r, str detail) except -1:
        raise error_for(st, f"{what} to rank {r} of window {self.label()}{detail}: "
                            f"{LastError().decode(errors='replace')}")

    # ------------------------------------------------------------ the table

    def set_ready(self, Py_ssize_t rank, uintptr_t mapped=0, keep=None, uint64_t generation=0):
        """Target rank is connected, and mapped here at ``mapped`` (or 0);
        ``keep`` (a RemotePin, or the shared segment's owner) keeps that
        mapping while it is cached; ``generation`` is the engine's mapping
        generation read before the pointer was taken, so that a change in
        between shows as stale."""
        self.table.set_ready(rank, mapped, keep, generation)

    def is_ready(self, Py_ssize_t rank):
        return 0 <= rank < self.table.n and self.table.ready[rank] == 1

    def mark_dirty(self, Py_ssize_t rank, keep=None):
        """Engine operations to rank were posted; ``keep`` lives until the
        flush that completes them."""
        self.table.connect(rank)
        self.table.keep(rank, keep)

    def is_dirty(self, Py_ssize_t rank):
        return 0 <= rank < self.table.n and self.table.dirty[rank] == 1

    def take_dirty(self, Py_ssize_t rank):
        """True (and cleared) when engine operations to rank await a flush."""
        if rank >= self.table.n or not self.table.dirty[rank]:
            return False
        self.table.completed(rank)
        return True

    def posted_atomic(self, Py_ssize_t rank):
        """The op of the non-fetching atomics posted to rank and not yet
        flushed (None if none): an atomic of another op must flush first."""
        return self.table.posted[rank] if self.table.dirty[rank] else None

    def note_posted_atomic(self, Py_ssize_t rank, op):
        """Non-fetching atomics of ``op`` were posted to rank."""
        self.mark_dirty(rank)
        self.table.posted[rank] = op

    def disable(self):
        """The window is freed: nothing goes through here any more."""
        self.table.n = 0
        self.table.pins = None
        self.locks_.clear()
        self.epochs.fence_open = False
        self.fence_.clear()

    # ------------------------------------------------------------ epochs

    @property
    def fence_open(self):
        """A fence epoch is open: every target, active."""
        return self.epochs.fence_open

    @fence_open.setter
    def fence_open(self, bint value):
        self.epochs.fence_open = value

    @property
    def fence_used(self):
        """An RMA call went through the open fence epoch."""
        return self.epochs.fence_used

    @fence_used.setter
    def fence_used(self, bint value):
        self.epochs.fence_used = value

    def check_access(self, Py_ssize_t rank, str what):
        """Raise EpochError unless an access epoch is open to ``rank``: the
        one rule every path (the hot one in C) applies."""
        if not self.epochs.access_ok(rank):
            raise EpochError(f"{what} to rank {rank} of window {self.label()}: no access epoch is open "
                             f"to that rank (call Fence, Start, Lock or Lock_all first)")

    def in_passive(self, Py_ssize_t rank):
        """A passive-target epoch (or the HIXL face's) is open to ``rank``."""
        return self.epochs.in_passive(rank)

    @property
    def locks(self):
        """rank -> (lock_type, acquired) of the Lock epochs open (read only)."""
        return dict(self.epochs.locks)

    def is_locked(self, Py_ssize_t rank):
        return rank in self.epochs.locks

    @property
    def access(self):
        """The PSCW access group (a frozenset of ranks) after Start, or None."""
        return self.epochs.access

    @property
    def lock_all(self):
        """False, or (True, acquired) inside Lock_all."""
        return self.epochs.lock_all

    @property
    def always_open(self):
        """The HIXL-style face: every target is always accessible, passively."""
        return self.epochs.always_open

    def add_lock(self, Py_ssize_t rank, lock_type, bint acquired):
        self.epochs.add_lock(rank, lock_type, acquired)

    def pop_lock(self, Py_ssize_t rank):
        return self.epochs.pop_lock(rank)

    def set_access(self, ranks):
        self.epochs.set_access(ranks)

    def set_lock_all(self, value):
        self.epochs.set_lock_all(value)

    def set_always_open(self, bint value):
        self.epochs.set_always_open(value)

    # ------------------------------------------------------------ lock words

    def set_ctrl(self, Py_ssize_t rank, uintptr_t addr, keep=None, uint64_t generation=0):
        """rank's control block is mapped here at ``addr`` (``keep`` keeps
        it so; ``generation``: the engine's mapping generation read before
        the pointer, as for set_ready): its lock words are taken with CPU
        atomics."""
        if 0 <= rank < self.table.n:
            self.locks_.set(rank, addr, keep, generation)

    cdef inline uint64_t *_ctrl(self, Py_ssize_t r):
        """rank r's control block mapped here, or NULL. A mapping older than
        the engine's mapping generation (a region withdrawn, a peer dead or
        dropped) is not used: the Python layer takes the call, which finds
        out, and maps it again (r is made ready again)."""
        cdef uint64_t *w = self.locks_.word[r]
        if w == NULL or r == self.comm_rank:
            return w
        if MappingGeneration(self.engine._h[0]) != self.locks_.gen[r]:
            self.locks_.forget(r)
            self.table.ready[r] = 0
            return NULL
        return w

    def has_ctrl(self, Py_ssize_t rank):
        return 0 <= rank < self.table.n and self.locks_.word[rank] != NULL

    def try_lock(self, Py_ssize_t r, bint exclusive):
        """One try at r's lock word where it is mapped here: 1 taken, 0 held by another, -1 not mapped
        here (the engine's atomics take it)."""
        if r < 0 or r >= self.table.n or self._ctrl(r) == NULL:
            return -1
        return 1 if self.locks_.try_word(r, exclusive) else 0

    def wait_lock_free(self, Py_ssize_t r, bint exclusive, double seconds):
        """Wait without the GIL, and without spinning a core for long, until r's lock word (mapped here)
        looks free to take or ``seconds`` passed: True. False where it is not mapped here (the caller
        backs off instead). Taking it is try_lock's: another rank may be faster."""
        if r < 0 or r >= self.table.n:
            return False
        cdef uint64_t *w = self._ctrl(r)
        if w == NULL:
            return False
        keep = self.locks_.pins[r]  # holds the mapping while this thread reads it without the GIL
        self._wake_progress()
        self.locks_.wait_free(w, exclusive, seconds)
        del keep
        return True

    def wake_lock_waiters(self, Py_ssize_t r):
        """After the Python layer released r's lock word: wake this node's ranks sleeping on it, where it
        is mapped here (a released word mapped nowhere here has no sleepers here to wake)."""
        if 0 <= r < self.table.n:
            w = self._ctrl(r)
            if w != NULL:
                hixl_lock_wake(w, w + _LOCK_WAITERS_WORD)

    cpdef bint lock(self, object target_rank, object lock_type, object assertion) except *:
        """Lock of the common case: a mapped lock word taken at the first
        try, no other epoch in the way. False leaves it to the Python layer
        (every check, the waiting), having done nothing."""
        cdef Py_ssize_t r
        cdef bint exclusive
        if (type(target_rank) is not int or type(assertion) is not int or assertion != 0
                or type(lock_type) is not int or not self.epochs.lock_may_open()):
            return False
        r = <Py_ssize_t>target_rank
        if r < 0 or r >= self.table.n or r in self.epochs.locks or self._ctrl(r) == NULL:
            return False
        if lock_type == _LOCK_EXCLUSIVE_C:
            exclusive = True
        elif lock_type == _LOCK_SHARED_C:
            exclusive = False
        else:
            return False
        if not self.locks_.try_word(r, exclusive):
            return False
        self.epochs.fence_open = False
        self.epochs.add_lock(r, lock_type, True)
        return True

    cpdef bint unlock(self, object target_rank) except *:
        """Unlock of the common case: r locked here with its lock word taken
        (mapped), nothing held for a batch. The epoch ends even where the
        flush fails (a dead target), as in the Python layer."""
        cdef Py_ssize_t r
        if type(target_rank) is not int or not self._live():
            return False
        r = <Py_ssize_t>target_rank
        if r < 0 or r >= self.table.n or self._ctrl(r) == NULL:
            return False
        entry = self.epochs.locks.get(r)
        if entry is None or not entry[1]:
            return False
        try:
            if self.held.has(r):
                self._send_held(r, "Unlock", True)
            if self.table.dirty[r]:
                if self.table.addr[r].empty():
                    return False
                self._flush_dirty(r, _timeout(None), "Unlock")
        finally:
            if r < self.table.n and r in self.epochs.locks:
                self.epochs.pop_lock(r)
                if not self.locks_.release_word(r, entry[0] == _LOCK_EXCLUSIVE_C):
                    raise error_for(PEER_FAILURE_STATUS,
                                    f"Unlock: the exclusive lock of rank {r} of window {self.label()} was not "
                                    f"this rank's any more (another rank broke it, believing this rank dead); "
                                    f"nothing was released")
        self.held.raise_late()
        return True

    # ------------------------------------------------------------ held notifications

    @property
    def notify_late(self):
        """A failure of a send nobody waited for (the pacer's): the next sync raises it."""
        return self.held.late

    @notify_late.setter
    def notify_late(self, value):
        self.held.late = value

    def hold(self, Py_ssize_t rank, int64_t tag):
        """Hold a notification for rank's next batch; how many are held now."""
        if not 0 <= rank < self.table.n:
            raise ParamError(f"hold: rank {rank} out of range")
        return self.held.hold(rank, tag)

    def held_count(self, Py_ssize_t rank):
        return self.held.tags[rank].size() if 0 <= rank < self.table.n else 0

    def sent_count(self, Py_ssize_t rank):
        """Notifications sent to rank so far."""
        return self.held.sent[rank]

    def held_ranks(self, rank=None):
        """The ranks with held notifications, ascending (of ``rank`` only,
        when given: [rank] or [])."""
        cdef Py_ssize_t r
        if self.held.ranks == 0:
            return []
        if rank is not None:
            return [rank] if type(rank) is int and 0 <= rank < self.table.n and self.held.has(rank) else []
        return [r for r in range(self.table.n) if self.held.has(r)]

    def send_held(self, Py_ssize_t rank, str what, bint in_order=True):
        """Send the notifications held for rank as one message (it leaves
        after every earlier operation to rank completed there). ``in_order``:
        called in the program's thread, so that what the engine flushed first
        is everything the program posted to rank (another thread may run
        beside a post: it leaves the target's completion state alone)."""
        self._send_held(rank, what, in_order)

    cdef int _send_held(self, Py_ssize_t r, str what, bint in_order) except -1:
        cdef vector[int64_t] tags
        cdef bytes msg
        cdef NotifyDesc nd
        cdef Status st
        cdef cpp_bool queued = False
        cdef int32_t tmo = _timeout(None)
        cdef Py_ssize_t count
        cdef PeerRef *p = NULL
        cdef _Table t = self.table
        with nogil:
            self.held.mu.lock()  # (without the GIL: a sender in PostNotify may need it)
        try:
            count = self.held.take(r, tags)
            if count == 0:
                return 0
            msg = (<char *>tags.data())[:8 * count]  # little-endian int64s (x86, aarch64)
            t.connect(r)
            p = t.peer(self.engine, r, self.priority)
            nd = _notify_desc(self.held.name, msg)
            self._enter()
            with nogil:
                if p != NULL:
                    st = PostNotifyTo(self.engine._h[0], p, nd, tmo, queued)
                elif _HAS_POST:
                    st = PostNotify(self.engine._h[0], t.name(r), nd, tmo, queued, <Priority>self.priority)
                else:  # vendor HIXL: its own SendNotify (transfers there complete within their call)
                    st = self.engine._h[0].SendNotify(t.name(r), nd, tmo)
            self.engine._calls -= 1
        finally:
            self.held.mu.unlock()
        if st != 0:
            if p != NULL:
                t.drop_peer(r)  # the next call resolves r's address again
            if count == 1:
                self._raise(st, what, r, " (a notification)")
            self._raise(st, what, r, f": a batch of {count} notifications was not delivered")
        self.held.sent[r] += count
        if not queued and in_order:
            t.completed(r)  # it flushed everything before it
        return 0

    cdef int _send_all_held(self, str what) except -1:
        cdef Py_ssize_t r
        if self.held.ranks:
            for r in range(self.table.n):
                if self.held.has(r):
                    self._send_held(r, what, True)
        return 0

    # ------------------------------------------------------------ RMA

    cdef inline bint _target_ok(self, object target_rank, Py_ssize_t *r, bint write):
        if type(target_rank) is not int:
            return False
        r[0] = <Py_ssize_t>target_rank
        if (r[0] < 0 or r[0] >= self.table.n or not self.table.ready[r[0]]
                or not self.epochs.access_ok(r[0])):
            return False
        return self.table.access[r[0]] != (_READ_ONLY if write else _WRITE_ONLY)

    cdef int _post(self, Py_ssize_t r, int op, const TransferOpDesc *d, size_t count, MemType local, bint detach,
                   object keep, str what) except -1:
        """Post ``count`` blocks at d to r: the one way an operation reaches
        the engine, hot path or not. 1: work is left for r's next flush
        (r is dirty, ``keep`` held until then); 0: every block is complete
        at the target already (a same-node system call or copy), nothing is
        kept. A refusal is raised here, before anything is marked."""
        cdef Status st
        cdef cpp_bool in_flight = True
        cdef PeerRef *p
        cdef vector[TransferOpDesc] v
        cdef _Table t = self.table
        t.connect(r)
        p = t.peer(self.engine, r, self.priority)
        self._enter()
        if p != NULL:
            with nogil:
                st = PostTo(self.engine._h[0], p, <TransferOp>op, d, count, local, detach, in_flight)
        else:
            v.assign(d, d + count)
            with nogil:
                st = TransferPost(self.engine._h[0], t.name(r), <TransferOp>op, v, local, detach,
                                  <Priority>self.priority)
        self.engine._calls -= 1
        if st != 0:
            if p != NULL:
                t.drop_peer(r)  # the next call resolves r's address again
            if what is not None:
                self._raise(st, what, r, f" ({count} block(s))" if count != 1 else
                            f" ({d[0].len} bytes at target offset {d[0].remote_addr - t.base[r]})")
            _check(st, f"TransferPost({t.addr[r].decode()!r}, {count} blocks)")
        if not in_flight:
            return 0
        t.keep(r, keep)
        return 1

    def post(self, Py_ssize_t rank, object op, object descs, object keep=None, bint local_device=False):
        """Post engine descriptors ((n, 3) local, remote, length) to rank,
        as the hot path posts its own; ``keep`` lives until the flush."""
        cdef vector[TransferOpDesc] v
        _descs(descs, v)
        self._post(rank, _opcode(op), v.data(), v.size(), MEM_DEVICE if local_device else MEM_HOST, False, keep,
                   None)

    # ------------------------------------- the Python layer's calls on a rank
    #
    # What the Python layer (window/) does to one of the window's ranks beyond
    # the hot path -- the lock words and the accumulate lock in the control
    # block, accumulates the engine has no one atomic for, reads of a dynamic
    # window's region table, Rput/Rget -- goes on that rank's handle, as the
    # hot path does: no name resolved per call. A failure drops the handle
    # and is raised naming the call, the rank, the window and the bytes;
    # nothing is done again (it may have reached the target).

    cdef str _where(self, Py_ssize_t r, uintptr_t addr, size_t nbytes):
        """'n bytes at target offset o' for an address in r's window, else
        its offset in r's control block (or the address)."""
        cdef _Table t = self.table
        if t.size[r] and t.base[r] <= addr < t.base[r] + t.size[r]:
            return f"{nbytes} bytes at target offset {addr - t.base[r]}"
        if addr >= t.ctrl_addr[r]:
            return f"{nbytes} bytes at control-block offset {addr - t.ctrl_addr[r]}"
        return f"{nbytes} bytes at address {addr:#x}"

    cdef str _at(self, Py_ssize_t r, uintptr_t addr, size_t nbytes):
        return f" ({self._where(r, addr, nbytes)})"

    cdef inline Py_ssize_t _rank(self, Py_ssize_t r, str what) except -1:
        if not self._live():
            raise ParamError(f"{what}: window {self.label()} has no engine (freed, or its engine finalized)")
        if r < 0 or r >= self.table.n:
            raise ParamError(f"{what}: rank {r} is not a rank of window {self.label()}")
        self.table.connect(r)
        return r

    def atomic_at(self, Py_ssize_t rank, op, remote_addr, value, compare=0, bint fetch=True, timeout_ms=None,
                  str what="atomic"):
        """One 8-byte engine atomic (ADD, AND, OR, XOR, SWAP, CSWAP) at
        ``remote_addr`` of rank's memory (its window or its control block),
        on rank's handle; returns the old value (0 when not ``fetch``: posted,
        complete at rank's next flush)."""
        cdef AtomicOp aop = AtomicOp.CSWAP if op == "CSWAP" else _atomic_op(op)
        cdef uintptr_t addr = _uint(remote_addr, "remote_addr")
        cdef uint64_t v = _u64(value, "value"), c = _u64(compare, "compare"), old = 0
        cdef int32_t tmo = _timeout(timeout_ms)
        cdef Status st
        cdef Py_ssize_t r = self._rank(rank, what)
        cdef _Table t = self.table
        cdef PeerRef *p = t.peer(self.engine, r, self.priority)
        self._enter()
        with nogil:
            if p != NULL:
                st = AtomicTo(self.engine._h[0], p, aop, addr, v, c, &old if fetch else NULL, tmo)
            else:
                st = Atomic(self.engine._h[0], t.name(r), aop, addr, v, c, &old if fetch else NULL, tmo)
        self.engine._calls -= 1
        if st != 0:
            if p != NULL:
                t.drop_peer(r)
            self._raise(st, what, r, self._at(r, addr, 8))  # raised, never redone
        return old

    def atomic_many_at(self, Py_ssize_t rank, str op, addrs, values, bint fetch, timeout_ms=None,
                       str what="Accumulate"):
        """One 8-byte atomic per (addr, value) pair (uint64 arrays) on rank's
        handle; the old values as a uint64 array when ``fetch``, else posted
        (complete at rank's next flush) and None."""
        cdef AtomicOp aop = _atomic_op(op)
        if not fetch and (aop == AtomicOp.SWAP or aop == AtomicOp.CSWAP):
            raise ParamError(f"{what}: {op} must fetch")
        cdef const uint64_t[::1] a = np.ascontiguousarray(addrs, dtype=np.uint64)
        cdef const uint64_t[::1] v = np.ascontiguousarray(values, dtype=np.uint64)
        if a.shape[0] != v.shape[0]:
            raise ParamError(f"{what}: {a.shape[0]} addresses but {v.shape[0]} values")
        out = np.zeros(a.shape[0] if fetch else 0, np.uint64)
        cdef uint64_t[::1] o = out
        cdef int32_t tmo = _timeout(timeout_ms)
        cdef Status st = 0
        cdef Py_ssize_t i = 0, n = a.shape[0]
        cdef uint64_t bad = 0
        cdef Py_ssize_t r = self._rank(rank, what)
        cdef _Table t = self.table
        cdef PeerRef *p = t.peer(self.engine, r, self.priority)
        self._enter()
        with nogil:
            for i in range(n):
                if p != NULL:
                    st = AtomicTo(self.engine._h[0], p, aop, a[i], v[i], 0, &o[i] if fetch else NULL, tmo)
                else:
                    st = Atomic(self.engine._h[0], t.name(r), aop, a[i], v[i], 0, &o[i] if fetch else NULL, tmo)
                if st != 0:
                    bad = a[i]
                    break
        self.engine._calls -= 1
        if st != 0:
            if p != NULL:
                t.drop_peer(r)
            # Raised, never redone: the atomics before element i were made.
            self._raise(st, what, r, f" ({self._where(r, bad, 8)}, element {i} of {n}; those before it were made)")
        return out if fetch else None

    def transfer_at(self, Py_ssize_t rank, op, descs, timeout_ms=None, str what="transfer"):
        """Move (n, 3) descriptors (local, remote, length) to or from rank
        and wait for them: posted on rank's handle and flushed there (which
        also completes what was posted to rank before)."""
        cdef vector[TransferOpDesc] v
        cdef int cop = _opcode(op)
        cdef int32_t tmo = _timeout(timeout_ms)
        cdef Status st
        cdef cpp_bool in_flight = True
        _descs(descs, v)
        cdef Py_ssize_t r = self._rank(rank, what)
        cdef _Table t = self.table
        cdef PeerRef *p = t.peer(self.engine, r, self.priority)
        if v.empty():
            return
        self._enter()
        with nogil:
            if p != NULL:
                st = PostTo(self.engine._h[0], p, <TransferOp>cop, v.data(), v.size(), MEM_HOST, False, in_flight)
                if st == 0 and in_flight:
                    st = FlushPeer(self.engine._h[0], p, tmo)
            else:
                st = self.engine._h.TransferSync(t.name(r), <TransferOp>cop, v, tmo)
        self.engine._calls -= 1
        if st != 0:
            if p != NULL:
                t.drop_peer(r)
            self._raise(st, what, r, f" ({v.size()} block(s))" if v.size() != 1 else self._at(r, v[0].remote_addr,
                                                                                            v[0].len))

    def transfer_async_at(self, Py_ssize_t rank, op, descs, keep=None, str what="transfer"):
        """Post (n, 3) descriptors to or from rank on its handle; a
        TransferRequest (``keep`` held until it completes)."""
        cdef vector[TransferOpDesc] v
        cdef int cop = _opcode(op)
        cdef TransferArgs args
        cdef TransferReq req = NULL
        cdef Status st
        _descs(descs, v)
        cdef Py_ssize_t r = self._rank(rank, what)
        cdef _Table t = self.table
        cdef PeerRef *p = t.peer(self.engine, r, self.priority)
        cdef Engine eng = self.engine
        cdef int64_t t0 = time.monotonic_ns()
        self._enter()
        with nogil:
            if p != NULL:
                st = TransferAsyncTo(eng._h[0], p, <TransferOp>cop, v.data(), v.size(), req)
            else:
                st = eng._h.TransferAsync(t.name(r), <TransferOp>cop, v, args, req)
        eng._calls -= 1
        cdef int64_t t1 = time.monotonic_ns()
        if st != 0:
            if p != NULL:
                t.drop_peer(r)
            self._raise(st, what, r, f" ({v.size()} block(s))" if v.size() != 1 else self._at(r, v[0].remote_addr,
                                                                                            v[0].len))
        if eng._orphans:
            eng._reap_orphans()
        cdef TransferRequest tr = TransferRequest.__new__(TransferRequest)
        tr._req = req
        tr.engine = eng
        tr._keep = keep
        tr._t0 = t0
        tr._post_ns = t1 - t0
        return tr

    def post_batch_at(self, Py_ssize_t rank, object op, object origin, object offsets, object disps,
                      str what="Put_batch"):
        """post_batch to rank of this window, on its handle: the origin's
        export (rank is dirty, the export kept until its flush), or False
        with nothing moved (not the common case: the Python layer's)."""
        cdef Status st = 0
        cdef Py_ssize_t n = 0
        cdef Py_ssize_t r = self._rank(rank, what)
        cdef _Table t = self.table
        cdef PeerRef *p = t.peer(self.engine, r, self.priority)
        cdef AscendString cr = t.name(r)
        export = _post_batch(self.engine, &cr, p, op, origin, offsets, disps, t.unit[r], t.base[r], t.size[r],
                             self.priority, &st, &n)
        if st != 0:
            if p != NULL:
                t.drop_peer(r)
            self._raise(st, what, r, f" ({n} blocks)")
        if export:
            t.keep(r, export)
        return export

    def send_notify_at(self, Py_ssize_t rank, str name, timeout_ms=None, str what="notify"):
        """Deliver the notification ``name`` (no message) to rank after all
        earlier transfers to it completed, on its handle."""
        cdef bytes n = name.encode()
        cdef NotifyDesc nd = _notify_desc(n, b"")
        cdef int32_t tmo = _timeout(timeout_ms)
        cdef Status st
        cdef Py_ssize_t r = self._rank(rank, what)
        cdef _Table t = self.table
        cdef PeerRef *p = t.peer(self.engine, r, self.priority)
        self._enter()
        with nogil:
            if p != NULL:
                st = SendNotifyTo(self.engine._h[0], p, nd, tmo)
            else:
                st = self.engine._h.SendNotify(t.name(r), nd, tmo)
        self.engine._calls -= 1
        if st != 0:
            if p != NULL:
                t.drop_peer(r)
            self._raise(st, what, r, "")

    def flush_rank(self, Py_ssize_t rank, timeout_ms=None, str what="Flush"):
        """Complete what was posted to rank (on its handle), if anything:
        rank is clean after it, what it kept released."""
        if rank < 0 or rank >= self.table.n or not self.table.dirty[rank]:
            return
        self._rank(rank, what)
        self._flush_dirty(rank, _timeout(timeout_ms), what)

    cdef int _move(self, object origin, object target_rank, object target, bint write) except -1:
        """1 when done here, 0 when the Python layer must take it."""
        cdef Py_ssize_t r
        cdef uint64_t off
        cdef Py_buffer view
        cdef char *direct
        cdef char *buf
        cdef Py_ssize_t nbytes
        cdef TransferOpDesc one
        cdef _Export export = None
        cdef bint exported = False, timed
        if type(target_rank) is int and target_rank == _PROC_NULL and self.table.n:
            return 1  # MPI.PROC_NULL: nothing moves, the origin is not looked at
        if not self._live() or not self._target_ok(target_rank, &r, write):
            return 0
        if (target is None or type(target) is int) and _ndarray_span(origin, not write, &buf, &nbytes):
            # numpy's own array, a displacement: no export (the array is held instead when in flight)
            if not self.table.offset(target, r, <size_t>nbytes, &off):
                return 0
        else:
            if _get_buffer(origin, &view, PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (0 if write else PyBUF_WRITABLE)) != 0:
                PyErr_Clear()
                return 0
            exported = True
            buf, nbytes = <char *>view.buf, view.len
        try:
            if exported and (view.format != NULL and strchr(view.format, b'O') != NULL
                             or not self.table.target_offset(target, r, &view, &off)):
                return 0  # Python objects (the Python layer refuses them), or a target spec it parses
            if nbytes == 0:
                return 1
            direct = self.table.direct(self.engine, r)
            if direct != NULL and <size_t>nbytes < _SHARED_COPY:
                if <size_t>nbytes >= _NOGIL_COPY:
                    with nogil:
                        _copy(direct + off, buf, <size_t>nbytes, write)
                else:
                    _copy(direct + off, buf, <size_t>nbytes, write)
                return 1
            timed = <size_t>nbytes <= _TARGET_MOVE and self.table.acc_locked[r] and r != self.comm_rank
            if timed and self.tpath.by_target(r):
                # The first Put since r's flush waits for its answer: a lone
                # Put + Flush then costs one round trip, not a post and a
                # sync. It leaves r dirty (its flush finds nothing to wait
                # for), so later ones are posted, and pipeline with r's copies.
                if write and self.table.dirty[r]:
                    if self._target_post(r, off, buf, <size_t>nbytes, origin):
                        return 1  # r's flush proves it done, as for a transfer in flight
                elif self._target_move(r, off, buf, <size_t>nbytes, write):
                    if write:
                        self.table.keep(r, None)
                    return 1  # complete at the target, as the system call would be
            one.local_addr = <uintptr_t>buf
            one.remote_addr = self.table.base[r] + off
            one.len = <size_t>nbytes
            if self._post(r, WRITE if write else READ, &one, 1, MEM_HOST, False, None, "Put" if write else "Get"):
                # The engine still reads (or fills) the origin: the export (or
                # the array) moves into what r's flush releases.
                if exported:
                    export = _Export.__new__(_Export)
                    export.view = view
                    export.held = True
                    (<list>self.table.pending[r]).append(export)
                else:
                    (<list>self.table.pending[r]).append(origin)
            if timed:
                self.tpath.mine_done(r)
            return 1
        finally:
            if exported and export is None:
                PyBuffer_Release(&view)

    cpdef bint atomic(self, object origin, object compare, object result, object target_rank,
                      object target_disp, int code) except *:
        """One 8-byte integer atomic (Fetch_and_op, Compare_and_swap, or a
        one-element Accumulate when result is None) when the common case
        applies: every buffer is exactly one 8-byte integer. False leaves it
        to the Python layer. code: FAST_ADD ..."""
        cdef Py_ssize_t r
        cdef uint64_t off, value = 0, cmp = 0, old = 0
        cdef char *direct
        cdef Status st
        cdef AtomicOp aop
        cdef int32_t tmo
        cdef bint unsigned = False, other = False, timed
        cdef PeerRef *p
        if not self._live() or not self._target_ok(target_rank, &r, True):
            return False
        if self.table.access[r] != _READ_WRITE or self.table.mem_type[r] != MEM_HOST or (self.table.posted[r] is not None and self.table.dirty[r]):
            return False  # posted atomics first: this origin's accumulates stay ordered
        # int64 and uint64 are two types: a mix is the Python layer's to refuse.
        if not _int64_scalar(origin, &value, &unsigned):
            return False
        if compare is not None and not (_int64_scalar(compare, &cmp, &other) and other == unsigned):
            return False
        if result is not None and not (_int64_out(result, &other) and other == unsigned):
            return False
        if not self.table.offset(target_disp, r, 8, &off) or (self.table.base[r] + off) % 8:
            return False
        if self.table.acc_locked[r]:
            timed = r != self.comm_rank
            if not (timed and self.tpath.by_target(r) and self._target_atomic(r, off, code, value, cmp, &old)):
                if self._ctrl(r) == NULL or not self._locked_atomic(r, off, code, value, cmp, &old):
                    return False
                if timed:
                    self.tpath.mine_done(r)
            if result is not None:
                _int64_store(result, old)
            return True
        direct = self.table.direct(self.engine, r)
        if direct != NULL:
            old = AtomicApply(_FAST_OPS[code], <uint64_t *>(direct + off), 0 if code == C_NOOP else value, cmp)
        else:
            aop = _FAST_OPS[code]
            tmo = _timeout(None)
            self.table.connect(r)
            p = self.table.peer(self.engine, r, self.priority)
            self._enter()
            if p != NULL:
                with nogil:
                    st = AtomicTo(self.engine._h[0], p, aop, self.table.base[r] + off, 0 if code == C_NOOP else value, cmp,
                                  &old, tmo)
            else:
                with nogil:
                    st = Atomic(self.engine._h[0], self.table.name(r), aop, self.table.base[r] + off,
                                0 if code == C_NOOP else value, cmp, &old, tmo)
            self.engine._calls -= 1
            if st != 0:
                if p != NULL:
                    self.table.drop_peer(r)
                # Raised, never redone: the atomic may have reached the target.
                self._raise(st, "Compare_and_swap" if code == C_CSWAP else "Fetch_and_op" if result is not None
                            else "Accumulate", r, f" (8 bytes at target offset {off})")
        if result is not None:
            _int64_store(result, old)
        return True

    cpdef bint accumulate_small(self, object origin, object result, object target_rank, object target,
                                int op) except *:
        """An Accumulate (result None) or Get_accumulate of at most
        _ACC_SMALL bytes in the common case: origin (and result) numpy's own
        contiguous arrays of one basic type, the target a displacement on a
        rank whose accumulates go under its lock word. Get, op (HX_SUM ...)
        and put under that word, in C. False leaves it to the Python layer,
        with nothing done."""
        cdef Py_ssize_t r
        cdef uint64_t off
        cdef char *obuf
        cdef char *rbuf = NULL
        cdef Py_ssize_t n, rn
        cdef int kind
        cdef char stack[4096]
        cdef char *tmp = stack
        if not self._live() or not (target is None or type(target) is int) or not self._target_ok(target_rank, &r, True):
            return False
        if (not self.table.acc_locked[r] or self.table.access[r] != _READ_WRITE or self.table.mem_type[r] != MEM_HOST
                or (self.table.posted[r] is not None and self.table.dirty[r])):
            return False
        if not _ndarray_span(origin, False, &obuf, &n) or n == 0 or <size_t>n > _ACC_SMALL:
            return False
        kind = _acc_kind(<cnp.ndarray>origin)
        if kind < 0 or not hx_acc_ok(kind, op):
            return False
        if result is not None and not (_ndarray_span(result, True, &rbuf, &rn) and rn == n
                                       and cnp.PyArray_TYPE(<cnp.ndarray>result) == cnp.PyArray_TYPE(<cnp.ndarray>origin)
                                       and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>result)):
            return False
        if not self.table.offset(target, r, <size_t>n, &off) or self._ctrl(r) == NULL:
            return False
        if <size_t>n > _ACC_STACK:
            tmp = <char *>PyMem_Malloc(n)
            if tmp == NULL:
                raise MemoryError()
        try:
            return self._locked_update(r, off, tmp, <size_t>n, kind, op, obuf, rbuf)
        finally:
            if tmp != stack:
                PyMem_Free(tmp)

    cdef bint _locked_update(self, Py_ssize_t r, uint64_t off, char *tmp, size_t n, int kind, int op,
                             const char *origin, char *result, uint64_t cmp=0) except? 0:
        """r's n bytes at off = op(them, origin), the old ones into result
        (unless NULL), under r's accumulate lock (mapped here): get, op,
        put, without r's CPU. False, with nothing done, when the lock is
        taken (the Python layer waits for it). Word mode (kind _WORD_KIND):
        one 8-byte word, op a code (C_ADD ... C_CSWAP, compared with cmp),
        origin the operand, the old word left in tmp; the word is put back
        only when it changed (or for C_SWAP)."""
        cdef uint64_t *lock = self.locks_.word[r] + _CTRL_ACC // 8
        cdef int32_t tmo = _timeout(None)
        cdef bint local = r == self.comm_rank, changed = op != HX_NOOP
        cdef char *mem = <char *><uintptr_t>(self.table.base[r] + off)
        cdef uint64_t new = 0
        cdef char *out = tmp
        if not self.acc_lock.take(lock):
            return False
        try:
            if local:
                memcpy(tmp, mem, n)
            else:
                self.table.connect(r)
                self._sync_range(r, READ, tmp, off, n, tmo, "accumulate (get under the target's accumulate lock)")
            if kind == _WORD_KIND:
                new = _acc_apply(op, (<uint64_t *>tmp)[0], (<const uint64_t *>origin)[0], cmp)
                changed = new != (<uint64_t *>tmp)[0] or op == C_SWAP
                out = <char *>&new  # tmp keeps the old word: it is the caller's answer
            elif result != NULL:
                memcpy(result, tmp, n)
            if changed:
                if kind != _WORD_KIND:
                    hx_acc_apply(kind, op, tmp, origin, n)
                if local:
                    memcpy(mem, out, n)
                else:
                    # Raised, never redone: the put may have reached the target.
                    self._sync_range(r, WRITE, out, off, n, tmo, "accumulate (put under the target's accumulate lock)")
        finally:
            if not self.acc_lock.give(lock):
                raise error_for(PEER_FAILURE_STATUS,
                                f"accumulate lock of rank {r} of window {self.label()} was not this rank's any "
                                f"more (another rank broke it, believing this rank dead); the accumulate may "
                                f"have been interleaved with another")
        return True

    cdef int _sync_range(self, Py_ssize_t r, int op, char *local, uint64_t off, size_t n, int32_t tmo,
                         str what) except -1:
        """Read (READ) or write (WRITE) n bytes of r's memory at ``off`` and
        wait for them: on r's handle, or by name without one."""
        cdef Status st
        cdef cpp_bool in_flight = True
        cdef TransferOpDesc d
        cdef vector[TransferOpDesc] v
        cdef _Table t = self.table
        cdef PeerRef *p = t.peer(self.engine, r, self.priority)
        d.local_addr = <uintptr_t>local
        d.remote_addr = t.base[r] + off
        d.len = n
        self._enter()
        if p != NULL:
            with nogil:
                st = PostTo(self.engine._h[0], p, <TransferOp>op, &d, 1, MEM_HOST, False, in_flight)
                if st == 0 and in_flight:
                    st = FlushPeer(self.engine._h[0], p, tmo)
        else:
            v.push_back(d)
            with nogil:
                st = self.engine._h.TransferSync(t.name(r), <TransferOp>op, v, tmo)
        self.engine._calls -= 1
        if st != 0:
            if p != NULL:
                t.drop_peer(r)
            self._raise(st, what, r, f" ({n} bytes at target offset {off})")
        return 0

    cdef PeerRef *_target_peer(self, Py_ssize_t r) except? NULL:
        """r's handle for an operation made by r's engine (connecting on
        first use); NULL, and r's operations go this rank's way from now
        on, where the engine has no handles (vendor HIXL)."""
        cdef PeerRef *p
        self.table.connect(r)
        p = self.table.peer(self.engine, r, self.priority)
        if p == NULL:
            self.tpath.never(r)
        return p

    cdef bint _target_answered(self, Py_ssize_t r, Status st, int64_t t0, int64_t t1, str what, size_t n,
                               uint64_t off) except? 0:
        """After an operation made by r's engine, asked at t0 and answered
        at t1 (ns): True when it was made. False, nothing made, when the
        engine cannot make it (UNSUPPORTED) or r refused it (PARAM_INVALID):
        this rank's way then does it, and reports what is wrong with it.
        Raises the rest (never redone: the operation may have been made)."""
        if st == 103905U or st == 103900U:
            self.tpath.never(r)
            return False
        if st != 0:
            self.table.drop_peer(r)
            self._raise(st, what, r, f" ({n} bytes at target offset {off})")
        self.tpath.answered(r, t1 - t0, t1)
        return True

    cdef bint _target_move(self, Py_ssize_t r, uint64_t off, char *buf, size_t n, bint write) except? 0:
        """A Put (write) or Get of n bytes at r's offset off made by r's
        engine (_TargetPath), complete when this returns. False, with
        nothing done, when r's engine does not make them."""
        cdef Status st
        cdef int32_t tmo = _timeout(None)
        cdef int64_t t0, t1
        cdef uintptr_t remote = self.table.base[r] + off
        cdef PeerRef *p = self._target_peer(r)
        if p == NULL:
            return False
        self._enter()
        with nogil:
            t0 = hixl_now_ns()
            st = TargetMoveTo(self.engine._h[0], p, WRITE if write else READ, <uintptr_t>buf, remote, n, tmo)
            t1 = hixl_now_ns()
        self.engine._calls -= 1
        return self._target_answered(r, st, t0, t1, "Put (made by the target's engine)" if write else
                                     "Get (made by the target's engine)", n, off)

    cdef bint _target_post(self, Py_ssize_t r, uint64_t off, char *buf, size_t n, object origin) except? 0:
        """A Put of n bytes at r's offset off that r's engine makes, not
        waited for: r is dirty, its flush waits until it is done (runs of
        small Puts pipeline with r's copies). False, with nothing done,
        when r's engine does not make them."""
        cdef Status st
        cdef cpp_bool in_flight = False
        cdef int32_t tmo = _timeout(None)
        cdef int64_t t0, t1
        cdef uintptr_t remote = self.table.base[r] + off
        cdef PeerRef *p = self._target_peer(r)
        if p == NULL:
            return False
        self._enter()
        with nogil:
            t0 = hixl_now_ns()
            st = TargetPostTo(self.engine._h[0], p, <uintptr_t>buf, remote, n, tmo, in_flight)
            t1 = hixl_now_ns()
        self.engine._calls -= 1
        if st != 0 and in_flight:
            self.table.keep(r, origin)  # UCX may still read it: held until r's next flush
        if not self._target_answered(r, st, t0, t1, "Put (made by the target's engine)", n, off):
            return False
        self.table.keep(r, None)
        return True

    cdef bint _target_atomic(self, Py_ssize_t r, uint64_t off, int code, uint64_t value, uint64_t cmp,
                             uint64_t *old) except? 0:
        """One 8-byte atomic on r's memory made by r's engine under r's
        accumulate lock word (_TargetPath). False, with nothing done, when
        the word was held (the lock path waits its turn) or r's engine does
        not make atomics."""
        cdef Status st
        cdef cpp_bool busy = False
        cdef int32_t tmo = _timeout(None)
        cdef int64_t t0, t1
        cdef uintptr_t addr = self.table.base[r] + off, lock = self.table.ctrl_addr[r] + _CTRL_ACC
        cdef uint64_t v = 0 if code == C_NOOP else value
        cdef AtomicOp aop = _FAST_OPS[code]
        cdef PeerRef *p = self._target_peer(r)
        if p == NULL:
            return False
        self._enter()
        with nogil:
            t0 = hixl_now_ns()
            st = TargetAtomicTo(self.engine._h[0], p, aop, addr, v, cmp, lock, self.acc_lock.owner, old, busy, tmo)
            t1 = hixl_now_ns()
        self.engine._calls -= 1
        return self._target_answered(r, st, t0, t1, "accumulate (made by the target's engine under its accumulate lock)",
                                     8, off) and not busy

    cdef bint _locked_atomic(self, Py_ssize_t r, uint64_t off, int code, uint64_t value, uint64_t cmp,
                             uint64_t *old) except? 0:
        """One 8-byte atomic (code: C_ADD ...) on r's memory under r's
        accumulate lock, the old word into old: _locked_update's word mode."""
        return self._locked_update(r, off, <char *>old, 8, _WORD_KIND, code, <const char *>&value, NULL, cmp)

    # ------------------------------------------------------------ completion

    cpdef bint flush(self, object target_rank) except *:
        """Flush in a passive epoch; False leaves it to the Python layer."""
        cdef Py_ssize_t r
        if not self._live() or type(target_rank) is not int:
            return False
        r = <Py_ssize_t>target_rank
        if r == _PROC_NULL and self.table.n:
            return True
        if r < 0 or r >= self.table.n or not self.epochs.in_passive(r):
            return False
        if self.held.has(r):
            self._send_held(r, "Flush", True)
        if self.table.dirty[r]:
            if self.table.addr[r].empty():
                return False
            self._flush_dirty(r, _timeout(None), "Flush")
        self.held.raise_late()
        return True

    cdef int _flush_dirty(self, Py_ssize_t r, int32_t tmo, str what) except -1:
        """Complete the engine operations posted to r, or raise (the
        operations stay pending: a later flush may still complete them)."""
        cdef Status st
        cdef _Table t = self.table
        cdef PeerRef *p = t.peer(self.engine, r, self.priority)
        self._enter()
        if p != NULL:
            with nogil:
                st = FlushPeer(self.engine._h[0], p, tmo)
        else:
            with nogil:
                st = Flush(self.engine._h[0], t.name(r), tmo)
        self.engine._calls -= 1
        if st != 0:
            if p != NULL:
                t.drop_peer(r)
            self._raise(st, what, r, "")
        t.completed(r)
        return 0

    # ------------------------------------------------------------ fence

    def set_fence_barrier(self, Py_ssize_t me, words, stalled, long modes, keep=None):
        """Fence synchronizes through the mapped counters ``words`` (one
        address per rank, ``me`` this rank's) instead of an MPI barrier, and
        takes the assertions in ``modes`` in C. ``stalled(missing,
        timed_out)`` is called every 0.1 s of waiting and raises when a
        missing rank is dead or the timeout has passed."""
        self.fence_.set(words, stalled, modes, keep)

    cpdef bint fence(self, object assertion) except *:
        """Fence inside a run of fence epochs (the common case: the previous
        Fence opened one, its barrier is the mapped counters): complete this
        rank's RMA and meet the other ranks. False leaves it to the Python
        layer, which opens and closes fence epochs and raises the errors."""
        cdef Py_ssize_t r
        cdef int32_t tmo
        if not self._live() or not self.epochs.fence_open or not self.fence_.takes(assertion):
            return False
        tmo = _timeout(None)
        self._send_all_held("Fence")
        for r in range(self.table.n):
            if self.table.dirty[r]:
                self._flush_dirty(r, tmo, "Fence")
        self._wake_progress()
        self.fence_.meet(self.comm_rank, tmo)
        self.epochs.fence_used = False
        self.held.raise_late()
        return True

    cpdef fence_barrier(self):
        """Raise this rank's counter (release: its stores and completed RMA
        before it) and wait until every rank's counter has reached it."""
        self._wake_progress()
        self.fence_.meet(self.comm_rank, _timeout(None))
cdef class Target:
    """What the origin knows of one rank of the window: a view of its entry
    in the window's table, which is the only copy."""
    cdef readonly WindowState core
    cdef readonly Py_ssize_t rank

    @staticmethod
    cdef Target view(WindowState core, Py_ssize_t rank):
        cdef Target t = Target.__new__(Target)
        t.core, t.rank = core, rank
        return t

    @property
    def world(self):
        """Its world rank."""
        return self.core.table.world[self.rank]

    @property
    def base(self):
        """The address of its window memory (0 if none)."""
        return self.core.table.base[self.rank]

    @property
    def size(self):
        """Its window's size in bytes."""
        return self.core.table.size[self.rank]

    @property
    def disp_unit(self):
        return self.core.table.unit[self.rank]

    @property
    def ctrl(self):
        """The address of its control block (ctrl.py)."""
        return self.core.table.ctrl_addr[self.rank]

    @property
    def access(self):
        """Its declared access mode (constants.ACCESS_*)."""
        return self.core.table.access[self.rank]

    @property
    def mem_type(self):
        return self.core.table.mem_type[self.rank]

    @property
    def acc_locked(self):
        """Accumulates on its memory go under its accumulate lock (accumulate.py)."""
        return bool(self.core.table.acc_locked[self.rank])

    @property
    def addr(self):
        """Its engine address; connects on first use."""
        self.core.table.connect(self.rank)
        return self.core.table.addr[self.rank].decode()

    def __repr__(self):
        return f"<Target rank {self.rank} (world {self.world}) of window {self.core.label()}>"
