# cython: language_level=3
"""The benchmark's floor peer (``python -m hixl_rma.bench rma``): the system
call a same-node Put or Get into a Win.Create window comes down to, timed
in C with nothing around it, so that a figure says how far above that floor
the whole call is. The benchmark's own extension, not the engine's."""
from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uintptr_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

cdef extern from "<sys/uio.h>" nogil:
    cdef struct iovec:
        void *iov_base
        size_t iov_len
    ssize_t process_vm_writev(int pid, const iovec *local, unsigned long liovcnt, const iovec *remote,
                              unsigned long riovcnt, unsigned long flags)
    ssize_t process_vm_readv(int pid, const iovec *local, unsigned long liovcnt, const iovec *remote,
                             unsigned long riovcnt, unsigned long flags)

cdef extern from "<time.h>" nogil:
    cdef struct timespec:
        long tv_sec
        long tv_nsec
    int clock_gettime(int clk, timespec *ts)
    int CLOCK_MONOTONIC

cdef extern from "<errno.h>" nogil:
    int errno


cdef inline long long _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000LL + ts.tv_nsec


def floor_cma(int pid, uintptr_t remote, local, size_t block, size_t count, size_t stride, size_t rounds,
              bint write=True):
    """``rounds`` rounds of ``count`` process_vm_writev (readv unless
    ``write``) calls of ``block`` bytes each, between ``local`` (a writable
    buffer of at least count x block bytes) and process ``pid``'s memory at
    ``remote`` (the i-th call at remote + i x stride): a list of each
    round's nanoseconds. OSError when the kernel refuses."""
    cdef Py_buffer view
    cdef iovec lv, rv
    cdef size_t i, k
    cdef long long t0
    cdef ssize_t got = 0
    cdef int err = 0
    cdef vector[long long] ns
    if block == 0 or count == 0:
        raise ValueError("floor_cma: block and count must be positive")
    try:
        PyObject_GetBuffer(local, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
    except (TypeError, BufferError, ValueError):
        raise TypeError("floor_cma: local must be a writable C-contiguous buffer") from None
    try:
        if <size_t>view.len < block * count:
            raise ValueError(f"floor_cma: local buffer has {view.len} bytes, {block * count} needed")
        ns.resize(rounds)
        with nogil:
            for k in range(rounds):
                t0 = _now_ns()
                for i in range(count):
                    lv.iov_base = <char *>view.buf + i * block
                    lv.iov_len = block
                    rv.iov_base = <void *>(remote + i * stride)
                    rv.iov_len = block
                    if write:
                        got = process_vm_writev(pid, &lv, 1, &rv, 1, 0)
                    else:
                        got = process_vm_readv(pid, &lv, 1, &rv, 1, 0)
                    if got != <ssize_t>block:
                        err = errno if got < 0 else 0
                        break
                ns[k] = _now_ns() - t0
                if got != <ssize_t>block:
                    break
    finally:
        PyBuffer_Release(&view)
    if got != <ssize_t>block:
        raise OSError(err, f"floor_cma: process_vm_{'writev' if write else 'readv'} to pid {pid} moved {got} "
                           f"of {block} bytes")
    return [ns[k] for k in range(rounds)]


def floor_scatter(dst, src, dst_slots, src_slots, size_t block, size_t rounds):
    """``rounds`` rounds of one memcpy of ``block`` bytes per slot pair,
    from block ``src_slots[i]`` of ``src`` to block ``dst_slots[i]`` of
    ``dst`` (writable C-contiguous buffers; the slots int64 arrays of one
    length, each slot inside its buffer): a list of each round's
    nanoseconds. The least a scatter of those blocks costs in one process."""
    cdef Py_buffer d, s, dv, sv
    cdef size_t i, k, n
    cdef long long t0
    cdef vector[long long] ns
    cdef const long long *di
    cdef const long long *si
    if block == 0:
        raise ValueError("floor_scatter: block must be positive")
    PyObject_GetBuffer(dst, &d, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
    try:
        PyObject_GetBuffer(src, &s, PyBUF_C_CONTIGUOUS)
        try:
            PyObject_GetBuffer(dst_slots, &dv, PyBUF_C_CONTIGUOUS)
            try:
                PyObject_GetBuffer(src_slots, &sv, PyBUF_C_CONTIGUOUS)
                try:
                    n = <size_t>dv.len // 8
                    if <size_t>sv.len != <size_t>dv.len or dv.itemsize != 8 or sv.itemsize != 8:
                        raise ValueError("floor_scatter: the slots must be int64 arrays of one length")
                    di, si = <const long long *>dv.buf, <const long long *>sv.buf
                    for i in range(n):
                        if di[i] < 0 or si[i] < 0 or <size_t>(di[i] + 1) * block > <size_t>d.len \
                                or <size_t>(si[i] + 1) * block > <size_t>s.len:
                            raise ValueError(f"floor_scatter: slot pair {i} is outside its buffer")
                    ns.resize(rounds)
                    with nogil:
                        for k in range(rounds):
                            t0 = _now_ns()
                            for i in range(n):
                                memcpy(<char *>d.buf + di[i] * block, <const char *>s.buf + si[i] * block, block)
                            ns[k] = _now_ns() - t0
                finally:
                    PyBuffer_Release(&sv)
            finally:
                PyBuffer_Release(&dv)
        finally:
            PyBuffer_Release(&s)
    finally:
        PyBuffer_Release(&d)
    return list(ns)
