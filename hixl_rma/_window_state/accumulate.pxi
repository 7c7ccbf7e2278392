# The accumulate lock (MPI 12.7.1, the atomicity of accumulates) of a
# window's state (included by _engine.pyx): a target whose accumulates go
# under its lock word (ctrl.ACC) is updated by get, op, put while this rank
# holds that word, without the target's CPU.

cdef int _ACC_TRIES = 64  # tries at a taken accumulate lock before the Python layer waits for it


cdef inline uint64_t _acc_apply(int code, uint64_t cur, uint64_t value, uint64_t cmp) noexcept nogil:
    """What an 8-byte atomic of ``code`` (C_ADD ...) leaves in place of ``cur``."""
    if code == C_ADD:
        return cur + value
    if code == C_AND:
        return cur & value
    if code == C_OR:
        return cur | value
    if code == C_XOR:
        return cur ^ value
    if code == C_SWAP:
        return value
    if code == C_CSWAP:
        return value if cur == cmp else cur
    return cur


@cython.final
cdef class _AccLock:
    """This rank's hold of a target's accumulate lock word: the value it
    writes there (its world rank + 1, so that a rank that breaks the hold
    of a dead one knows whose it was)."""
    cdef uint64_t owner

    cdef bint take(self, uint64_t *lock):
        """A few tries at the lock word; False: another rank holds it."""
        cdef uint64_t expected
        cdef int tries
        for tries in range(_ACC_TRIES):
            expected = 0
            if __atomic_compare_exchange_n(lock, &expected, self.owner, False, __ATOMIC_ACQUIRE,
                                           __ATOMIC_RELAXED):
                return True
            hixl_relax(tries)
        return False

    cdef bint give(self, uint64_t *lock):
        """Let go; False: the hold was not this rank's any more (broken)."""
        cdef uint64_t expected = self.owner
        return __atomic_compare_exchange_n(lock, &expected, 0, False, __ATOMIC_RELEASE, __ATOMIC_RELAXED)


# Who makes a small operation on a same-node target whose memory this rank
# cannot map (a Create window: its accumulates go under its lock word): an
# 8-byte atomic, or a Put or Get of at most _TARGET_MOVE bytes. This rank,
# with system calls (one per Put or Get; get and put under the lock word for
# an atomic), which need nothing of the target; or the target's engine (an
# active message its progress thread answers: TargetMoveTo, TargetAtomicTo,
# the latter under the same lock word, so every mix is atomic), which is
# faster while that thread polls (it does for a while after each piece of
# work) and slower when it must be woken first or waits for a core. A run of
# such operations to one target coming close together (each within
# _BURST_NS of the last) is what keeps the thread polling: after _FIRST_TRY
# of them this rank tries the target's way, and keeps it while answers come
# within _FAST_NS; two slow answers in a row send it back, and the next try
# then waits for twice as long a run (at most _MAX_TRY). A wrong guess costs
# those two slow answers: a thread wake-up each, a scheduler time slice at
# worst.
cdef int64_t _BURST_NS = 100000
cdef int64_t _FAST_NS = 20000
cdef uint32_t _FIRST_TRY = 32
cdef uint32_t _MAX_TRY = 65536
cdef size_t _TARGET_MOVE = 4096


@cython.final
cdef class _TargetPath:
    """Per target: which way its small operations go (see above)."""
    cdef vector[uint8_t] mode     # _BY_ORIGIN, _BY_TARGET, _ALWAYS (by the target, chosen), _NEVER (by the origin)
    cdef vector[uint32_t] run     # atomics by lock in the current run
    cdef vector[uint32_t] need    # the run that makes the next try
    cdef vector[uint32_t] slow    # slow answers in a row
    cdef vector[int64_t] last     # when the last atomic by lock started

    cdef void resize(self, Py_ssize_t n, uint8_t first):
        self.mode.assign(n, first)
        self.run.assign(n, 0)
        self.need.assign(n, _FIRST_TRY)
        self.slow.assign(n, 0)
        self.last.assign(n, 0)

    cdef inline bint by_target(self, Py_ssize_t r) noexcept nogil:
        """Whether the next atomic to r goes the target's way (counts it in a run when it does not)."""
        cdef int64_t now
        if self.mode[r] != _BY_ORIGIN:
            return self.mode[r] == _BY_TARGET or self.mode[r] == _ALWAYS
        now = hixl_now_ns()
        self.run[r] = self.run[r] + 1 if now - self.last[r] < _BURST_NS else 1
        self.last[r] = now
        if self.run[r] < self.need[r]:
            return False
        self.mode[r] = _BY_TARGET
        self.slow[r] = 0
        return True

    cdef inline void answered(self, Py_ssize_t r, int64_t ns) noexcept nogil:
        """The target's engine answered after ``ns``."""
        if ns <= _FAST_NS or self.mode[r] == _ALWAYS:
            self.slow[r] = 0
            self.need[r] = _FIRST_TRY
            return
        self.slow[r] += 1
        if self.slow[r] >= 2:
            self.mode[r] = _BY_ORIGIN
            self.run[r] = 0
            self.need[r] = min(2 * self.need[r], _MAX_TRY)

    cdef inline void never(self, Py_ssize_t r) noexcept nogil:
        self.mode[r] = _NEVER


cdef uint8_t _BY_ORIGIN = 0
cdef uint8_t _BY_TARGET = 1
cdef uint8_t _NEVER = 2
cdef uint8_t _ALWAYS = 3
_TARGET_PATHS = {"auto": _BY_ORIGIN, "origin": _NEVER, "target": _ALWAYS}
