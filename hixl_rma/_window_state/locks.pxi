# The passive-target locks (MPI 12.5.3, Lock/Unlock) of a window's state
# (included by _engine.pyx): the lock word's encoding, written here only
# (epochs.py reads it through the functions below), and the part that owns
# the lock words of the control blocks mapped here.

# The lock word (ctrl.LOCK): bit 62 while a writer holds it, the writer's
# window rank + 1 in bits 32..61, the count of shared holders in the low bits.
cdef uint64_t _LOCK_EXCL = 1ULL << 62
cdef int _OWNER_SHIFT = 32
cdef uint64_t _OWNER_MASK = (1ULL << 30) - 1
LOCK_EXCL = _LOCK_EXCL


cdef inline uint64_t _lock_exclusive(Py_ssize_t rank) noexcept nogil:
    """The lock word while window rank ``rank`` holds it exclusively."""
    return _LOCK_EXCL | (<uint64_t>(rank + 1)) << _OWNER_SHIFT


cdef inline Py_ssize_t _lock_writer(uint64_t word) noexcept nogil:
    """The window rank holding ``word`` exclusively, or -1 (free or shared)."""
    if not word & _LOCK_EXCL:
        return -1
    return <Py_ssize_t>((word >> _OWNER_SHIFT) & _OWNER_MASK) - 1


def lock_word_exclusive(Py_ssize_t rank):
    """The lock word while window rank ``rank`` holds it exclusively (what
    its CAS from 0 writes, and what its Unlock takes off)."""
    if not 0 <= rank < <Py_ssize_t>_OWNER_MASK:
        raise ParamError(f"lock_word_exclusive: rank {rank} out of range")
    return _lock_exclusive(rank)


def lock_word_writer(uint64_t word):
    """The window rank that holds lock word ``word`` exclusively, or -1."""
    return _lock_writer(word)


cdef inline Py_ssize_t _reader_word(Py_ssize_t comm_size, Py_ssize_t rank) noexcept nogil:
    """Index (in words) of ``rank``'s reader slot in a control block (ctrl.reader_offset)."""
    return (_CTRL_SIZE + 8 * comm_size + 8 * rank) // 8


cdef extern from *:
    """
    #include <limits.h>
    #include <linux/futex.h>
    #include <sched.h>
    #include <sys/syscall.h>
    #include <time.h>
    #include <unistd.h>

    /* A lock word's halves as futex words (the kernel waits on 32 bits):
       the owner's half changes when a writer lets go, the count's half
       when a reader does. */
    static inline uint32_t *hixl_lock_half(uint64_t *word, int writer_half) {
    #if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      return (uint32_t *)word + (writer_half ? 1 : 0);
    #else
      return (uint32_t *)word + (writer_half ? 0 : 1);
    #endif
    }

    /* Until a passive-target lock word looks free to take (exclusive: 0,
       or already this rank's `mine`; shared: no writer bit), or budget_ns
       passed. Loads only, so the holder's cache line is not fought over.
       A brief spin and a few yields catch a holder that lets go within
       microseconds; then the waiter sleeps in the kernel on the half of
       the word that a release changes, counted in `waiters` so that a
       release on this node wakes it at once (hixl_lock_wake). A release
       by a rank that does not map the word wakes nobody: the sleep is cut
       at 1 ms. The counter is bumped before the word is read again and the
       releaser reads the counter after its release (both sequentially
       consistent), so a waiter either sees the release or is woken by it.
       1: it looks free; 0: the budget ran out. */
    static inline int hixl_lock_wait(uint64_t *word, uint64_t *waiters, int exclusive, uint64_t mine,
                                     uint64_t writer, long long budget_ns) {
      double end = hixl_now_s() + 1e-9 * (double)budget_ns;
      for (unsigned idle = 0;; ++idle) {
        uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        if (exclusive ? (w == 0 || w == mine) : !(w & writer)) return 1;
        if (idle < 64) {
          hixl_relax(0);
          continue;
        }
        double left = end - hixl_now_s();
        if (left <= 0) return 0;
        if (idle < 128) {
          sched_yield();
          continue;
        }
        __atomic_fetch_add(waiters, 1, __ATOMIC_SEQ_CST);
        w = __atomic_load_n(word, __ATOMIC_SEQ_CST);
        if (!(exclusive ? (w == 0 || w == mine) : !(w & writer))) {
          int writer_half = (w & writer) != 0;
          uint32_t seen = writer_half ? (uint32_t)(w >> 32) : (uint32_t)w;
          long ns = left < 1e-3 ? (long)(left * 1e9) + 1 : 1000000L;
          struct timespec ts = {0, ns};
          syscall(SYS_futex, hixl_lock_half(word, writer_half), FUTEX_WAIT, seen, &ts, NULL, 0);
        }
        __atomic_fetch_sub(waiters, 1, __ATOMIC_SEQ_CST);
      }
    }

    /* After a release of a lock word mapped here: wake its sleepers (a
       load, and system calls only where some sleep). */
    static inline void hixl_lock_wake(uint64_t *word, uint64_t *waiters) {
      __atomic_thread_fence(__ATOMIC_SEQ_CST);
      if (__atomic_load_n(waiters, __ATOMIC_SEQ_CST) == 0) return;
      syscall(SYS_futex, hixl_lock_half(word, 1), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
      syscall(SYS_futex, hixl_lock_half(word, 0), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
    """
    int hixl_lock_wait(uint64_t *word, uint64_t *waiters, int exclusive, uint64_t mine, uint64_t writer,
                       long long budget_ns) nogil
    void hixl_lock_wake(uint64_t *word, uint64_t *waiters) nogil


@cython.final
cdef class _LockWords:
    """Each rank's control block where it is mapped here (its lock words:
    ctrl.py's layout), or NULL, and what keeps it mapped; the tries at a
    passive-target lock word in it with CPU atomics, as epochs.Sync makes
    them with the engine's. Whether a mapping is stale is the window
    state's to decide (it also owns the table the staleness touches)."""
    cdef vector[uint64_t *] word
    cdef vector[uint64_t] gen   # the mapping generation when word[r] was taken
    cdef list pins
    cdef Py_ssize_t me          # this rank's window rank: its holds' owner
    cdef Py_ssize_t size        # the window's ranks: where the reader slots are

    def __cinit__(self):
        self.pins = []

    cdef void resize(self, Py_ssize_t n, Py_ssize_t me):
        self.size, self.me = n, me
        self.word.resize(n, NULL)
        self.gen.resize(n, 0)
        self.pins = [None] * n

    cdef void set(self, Py_ssize_t r, uintptr_t addr, keep, uint64_t generation):
        self.word[r] = <uint64_t *>addr
        self.pins[r] = keep
        self.gen[r] = generation

    cdef void forget(self, Py_ssize_t r):
        self.word[r] = NULL
        self.pins[r] = None

    cdef void clear(self):
        self.word.clear()
        self.pins = None

    cdef bint try_word(self, Py_ssize_t r, bint exclusive):
        """One attempt at r's lock word (mapped here): exclusive CAS 0 ->
        this rank's exclusive word, shared fetch-add 1 (backed out while a
        writer holds it) and this rank's reader slot set. False: taken by
        another, nothing held."""
        cdef uint64_t *w = self.word[r]
        cdef uint64_t mine = _lock_exclusive(self.me)
        cdef uint64_t expected = 0
        if exclusive:
            if __atomic_compare_exchange_n(w, &expected, mine, False, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED):
                return True
            return expected == mine  # (a CAS of the Python path that timed out but landed)
        if __atomic_fetch_add(w, 1, __ATOMIC_ACQUIRE) & _LOCK_EXCL:
            __atomic_fetch_add(w, <uint64_t>-1, __ATOMIC_RELEASE)
            return False
        __atomic_exchange_n(w + _reader_word(self.size, self.me), 1, __ATOMIC_SEQ_CST)
        return True

    cdef bint release_word(self, Py_ssize_t r, bint exclusive):
        """Give r's lock word back, taking only this rank's own bits. False:
        the exclusive hold was not this rank's any more (broken by another
        rank), nothing released."""
        cdef uint64_t *w = self.word[r]
        cdef uint64_t mine = _lock_exclusive(self.me)
        cdef uint64_t word = mine
        cdef uint64_t one = 1
        if not exclusive:
            # Only the one who clears the slot takes the count back.
            if __atomic_compare_exchange_n(w + _reader_word(self.size, self.me), &one, 0, False,
                                           __ATOMIC_SEQ_CST, __ATOMIC_RELAXED):
                __atomic_fetch_add(w, <uint64_t>-1, __ATOMIC_RELEASE)
                hixl_lock_wake(w, w + _LOCK_WAITERS_WORD)
            return True
        while not __atomic_compare_exchange_n(w, &word, word - mine, False, __ATOMIC_RELEASE, __ATOMIC_RELAXED):
            if _lock_writer(word) != self.me:
                return False
        hixl_lock_wake(w, w + _LOCK_WAITERS_WORD)
        return True

    cdef void wait_free(self, uint64_t *w, bint exclusive, double seconds):
        """Without the GIL, until lock word w looks free to take or ``seconds`` passed."""
        cdef uint64_t mine = _lock_exclusive(self.me)
        cdef long long budget = <long long>(max(seconds, 0.0) * 1e9)
        with nogil:
            hixl_lock_wait(w, w + _LOCK_WAITERS_WORD, exclusive, mine, _LOCK_EXCL, budget)
