# The fence barrier (MPI 12.5.1, Fence) of a window's state (included by
# _engine.pyx): when every rank's control block is mapped here, Fence meets
# the other ranks on their fence counters instead of an MPI barrier.

cdef extern from *:
    """
    #include <sched.h>
    #include <time.h>

    /* Index of a rank whose fence counter is below seq after waiting up to
       budget_ns, or -1 once all have reached it. A barrier of same-node
       ranks ends within microseconds, so it spins first; a longer wait
       yields, then sleeps, so that a late rank gets the core it needs. */
    static inline Py_ssize_t hixl_fence_wait(uint64_t **words, size_t n, uint64_t seq, long long budget_ns) {
      double end = hixl_now_s() + 1e-9 * (double)budget_ns;
      for (unsigned idle = 0;; ++idle) {
        size_t i = 0;
        while (i < n && __atomic_load_n(words[i], __ATOMIC_ACQUIRE) >= seq) ++i;
        if (i == n) return -1;
        if (idle < 256) continue;
        if ((idle & 63) == 0 && hixl_now_s() > end) return (Py_ssize_t)i;
        if (idle < 4096) {
          sched_yield();
        } else {
          struct timespec ts = {0, idle < 8192 ? 50000L : 500000L};
          nanosleep(&ts, NULL);
        }
      }
    }
    """
    Py_ssize_t hixl_fence_wait(uint64_t **words, size_t n, uint64_t seq, long long budget_ns) nogil


cdef list hixl_fence_missing(uint64_t **words, size_t n, uint64_t seq):
    return [i for i in range(n) if __atomic_load_n(words[i], __ATOMIC_ACQUIRE) < seq]


@cython.final
cdef class _FenceBarrier:
    """Each rank's fence counter where it is mapped here (``word[rank]``),
    raised by one per Fence; empty until set (Fence then takes MPI's
    barrier, in the Python layer)."""
    cdef vector[uint64_t *] word
    cdef uint64_t seq
    cdef object stalled  # stalled(missing ranks, timed_out): raises
    cdef object pins     # what keeps the peers' fence counters mapped
    cdef long modes      # the assertions Fence takes here (all but MODE_NOSUCCEED)

    cdef void set(self, words, stalled, long modes, keep):
        self.modes = modes
        self.word.clear()
        for w in words:
            self.word.push_back(<uint64_t *><uintptr_t>w)
        self.stalled = stalled
        self.pins = keep  # the RemotePins under words: they stay mapped while Fence reads them

    cdef void clear(self):
        self.word.clear()
        self.stalled = None
        self.pins = None

    cdef inline bint takes(self, object assertion):
        """Fence with ``assertion`` can meet here."""
        return (not self.word.empty() and type(assertion) is int and 0 <= assertion <= self.modes
                and not (<long>assertion & ~self.modes))

    cdef int meet(self, Py_ssize_t me, int32_t tmo) except -1:
        """Raise this rank's counter (release: its stores and completed RMA
        before it) and wait until every rank's counter has reached it."""
        cdef uint64_t seq
        cdef Py_ssize_t missing
        cdef double deadline
        self.seq += 1
        seq = self.seq
        __atomic_store_n(self.word[me], seq, __ATOMIC_RELEASE)
        missing = hixl_fence_wait(self.word.data(), self.word.size(), seq, 0)
        if missing < 0:
            return 0
        deadline = hixl_now_s() + tmo / 1000.0
        while True:
            with nogil:
                missing = hixl_fence_wait(self.word.data(), self.word.size(), seq, 100000000)
            if missing < 0:
                return 0
            self.stalled(hixl_fence_missing(self.word.data(), self.word.size(), seq), hixl_now_s() > deadline)
