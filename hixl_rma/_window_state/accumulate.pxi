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
