# What the window state's parts share (included by _engine.pyx before them):
# the Python modules and constants they read, the C helpers for waiting and
# the CPU atomics on mapped words.

from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBUF_FORMAT
from cpython.exc cimport PyErr_Clear
from libc.string cimport memcpy, strchr
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t, uint8_t

cdef size_t _NOGIL_COPY = 1 << 16  # copies this large release the GIL
from mpi4py import MPI as _MPI
from mpi4py.util import dtlib as _dtlib
from .ground import constants as _constants
from .ground.errors import EpochError
cdef long _PROC_NULL = _MPI.PROC_NULL
# A target's declared access mode (constants.ACCESS_*), as its metadata carries it.
cdef uint8_t _READ_WRITE = _constants.ACCESS_READ_WRITE
cdef uint8_t _READ_ONLY = _constants.ACCESS_READ_ONLY
cdef uint8_t _WRITE_ONLY = _constants.ACCESS_WRITE_ONLY
cdef extern from "_engine_compat.h" namespace "hixl::ext" nogil:
    const size_t kShareMinBytes  # copies this large go to the engine, whose threads share them out
cdef size_t _SHARED_COPY = kShareMinBytes
from .window import ctrl as _ctrl
cdef uint64_t _CTRL_ACC = _ctrl.ACC
cdef uint64_t _CTRL_SIZE = _ctrl.SIZE
cdef Py_ssize_t _LOCK_WAITERS_WORD = _ctrl.LOCK_WAITERS // 8  # ranks of this node asleep on the lock word
cdef long _LOCK_EXCLUSIVE_C = _MPI.LOCK_EXCLUSIVE
cdef long _LOCK_SHARED_C = _MPI.LOCK_SHARED
from .ground.errors import PEER_FAILURE as _PEER_FAILURE
cdef Status PEER_FAILURE_STATUS = _PEER_FAILURE

cdef extern from "<mutex>" nogil:
    cdef cppclass cpp_mutex "std::mutex":
        void lock()
        void unlock()

cdef extern from "Python.h":
    # Plain status return: a refused buffer means "not the common case".
    int _get_buffer "PyObject_GetBuffer"(object, Py_buffer *, int) noexcept
    # -1 with an OverflowError set past Py_ssize_t (the caller clears it)
    Py_ssize_t _long_as_ssize "PyLong_AsSsize_t"(object) noexcept

cdef extern from *:
    bint _mul_overflow "__builtin_mul_overflow"(size_t, size_t, size_t *) noexcept nogil

cdef extern from *:
    """
    #include <sched.h>
    #include <time.h>

    static inline int64_t hixl_now_ns(void) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }

    static inline double hixl_now_s(void) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }

    /* Between tries at a lock word another rank holds for a few
       microseconds: spin, then give the core away (the holder may need it). */
    static inline void hixl_relax(int tries) {
      if (tries < 16) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #elif defined(__aarch64__)
        __asm__ __volatile__("yield");
    #endif
      } else {
        sched_yield();
      }
    }

    static inline void hixl_pause_ms(int ms) {
      struct timespec ts = {0, ms * 1000000L};
      nanosleep(&ts, NULL);
    }
    """
    double hixl_now_s() nogil
    int64_t hixl_now_ns() nogil
    void hixl_pause_ms(int ms) nogil
    void hixl_relax(int tries) nogil


cdef extern from *:
    uint64_t __atomic_fetch_add(uint64_t *, uint64_t, int) nogil
    uint64_t __atomic_fetch_and(uint64_t *, uint64_t, int) nogil
    uint64_t __atomic_fetch_or(uint64_t *, uint64_t, int) nogil
    uint64_t __atomic_fetch_xor(uint64_t *, uint64_t, int) nogil
    uint64_t __atomic_exchange_n(uint64_t *, uint64_t, int) nogil
    bint __atomic_compare_exchange_n(uint64_t *, uint64_t *, uint64_t, bint, int, int) nogil
    uint64_t __atomic_load_n(uint64_t *, int) nogil
    void __atomic_store_n(uint64_t *, uint64_t, int) nogil
    int __ATOMIC_SEQ_CST
    int __ATOMIC_ACQUIRE
    int __ATOMIC_RELEASE
    int __ATOMIC_RELAXED
