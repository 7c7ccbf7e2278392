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
# work) and slower when it must be woken first or waits for a core.
#
# A run of such operations to one target coming close together (each within
# _BURST_NS of the last) is what keeps the thread polling: after _FIRST_TRY
# of them this rank tries the target's way. Meanwhile it times its own way
# (a running mean, ``mine``). The target's way then gets a budget of
# _WINDOW times that mean for _WINDOW answers: it stays while the answers
# keep within it, window after window, and goes back as soon as a window's
# answers have spent more (a target that answers slowly, or now and then
# after a scheduler time slice, costs more than it saves); the next try then
# waits for a run twice as long (at most _MAX_TRY). A wrong guess costs at
# most one window's budget: what _WINDOW operations this rank's way cost.
cdef int64_t _BURST_NS = 100000
cdef uint32_t _FIRST_TRY = 32
cdef uint32_t _MAX_TRY = 65536
cdef uint32_t _WINDOW = 256
cdef size_t _TARGET_MOVE = 4096


@cython.final
cdef class _TargetPath:
    """Per target: which way its small operations go (see above)."""
    cdef vector[uint8_t] mode     # _BY_ORIGIN, _BY_TARGET, _ALWAYS (by the target, chosen), _NEVER (by the origin)
    cdef vector[uint32_t] run     # operations this rank's way in the current run
    cdef vector[uint32_t] need    # the run that makes the next try
    cdef vector[int64_t] last     # when the last operation this rank's way started
    cdef vector[int64_t] mine     # running mean of this rank's way, ns (0: not timed yet)
    cdef vector[int64_t] spent    # the target's answers in the current window, ns
    cdef vector[uint32_t] answers  # the target's answers in the current window

    cdef void resize(self, Py_ssize_t n, uint8_t first):
        self.mode.assign(n, first)
        self.run.assign(n, 0)
        self.need.assign(n, _FIRST_TRY)
        self.last.assign(n, 0)
        self.mine.assign(n, 0)
        self.spent.assign(n, 0)
        self.answers.assign(n, 0)

    cdef inline bint by_target(self, Py_ssize_t r) noexcept nogil:
        """Whether the next operation to r goes the target's way (else this
        rank's, which then reports with mine_done)."""
        cdef int64_t now
        if self.mode[r] != _BY_ORIGIN:
            return self.mode[r] == _BY_TARGET or self.mode[r] == _ALWAYS
        now = hixl_now_ns()
        self.run[r] = self.run[r] + 1 if now - self.last[r] < _BURST_NS else 1
        self.last[r] = now
        if self.run[r] < self.need[r] or self.mine[r] == 0:
            return False
        self.mode[r] = _BY_TARGET
        self.spent[r] = 0
        self.answers[r] = 0
        return True

    cdef inline void mine_done(self, Py_ssize_t r) noexcept nogil:
        """An operation to r made this rank's way (by_target said so) ended."""
        cdef int64_t ns
        if self.mode[r] != _BY_ORIGIN:
            return
        ns = hixl_now_ns() - self.last[r]
        self.mine[r] = ns if self.mine[r] == 0 else self.mine[r] + (ns - self.mine[r]) // 8

    cdef inline void answered(self, Py_ssize_t r, int64_t ns) noexcept nogil:
        """The target's engine answered after ``ns``."""
        if self.mode[r] != _BY_TARGET:
            return
        self.spent[r] += ns
        self.answers[r] += 1
        if self.spent[r] > <int64_t>_WINDOW * self.mine[r]:
            self.mode[r] = _BY_ORIGIN
            self.run[r] = 0
            self.need[r] = min(2 * self.need[r], _MAX_TRY)
        elif self.answers[r] == _WINDOW:
            self.spent[r] = 0
            self.answers[r] = 0
            self.need[r] = _FIRST_TRY

    cdef inline void never(self, Py_ssize_t r) noexcept nogil:
        self.mode[r] = _NEVER


cdef uint8_t _BY_ORIGIN = 0
cdef uint8_t _BY_TARGET = 1
cdef uint8_t _NEVER = 2
cdef uint8_t _ALWAYS = 3
_TARGET_PATHS = {"auto": _BY_ORIGIN, "origin": _NEVER, "target": _ALWAYS}
