# The extension-type part of hixl_rma.Win (included by _engine.pyx).
#
# mpi4py's MPI.Win exports the local window memory through the buffer
# protocol (``memoryview(win)``; mpi4py.util.sync spins on it), which on
# CPython < 3.12 only an extension type can offer. The hot calls (Put, Get,
# Flush, Fence, the one-element atomics) are methods of this type, in mpi4py's
# pattern: arguments into C values, one engine call, no Python frame on the
# way; anything beyond the common case goes on to the Python class Win,
# which derives from this one and hands it to the window's core and parts
# (core.py: the rest of the window's state).

from cpython.buffer cimport PyBuffer_FillInfo

from .buffers import ops as _ops

# Op -> the C atomic of the hot path; MPI.Op by handle (MPI.Op is not hashable).
cdef dict _OP_CODES = {_ops.SUM: C_ADD, _ops.BAND: C_AND, _ops.BOR: C_OR, _ops.BXOR: C_XOR,
                       _ops.REPLACE: C_SWAP, _ops.NO_OP: C_NOOP}
cdef dict _MPI_OP_CODES = {_MPI.SUM.handle: C_ADD, _MPI.BAND.handle: C_AND, _MPI.BOR.handle: C_OR,
                           _MPI.BXOR.handle: C_XOR, _MPI.REPLACE.handle: C_SWAP, _MPI.NO_OP.handle: C_NOOP}
# Op -> the element-wise op of accumulate_small (HX_SUM ...).
cdef dict _ACC_CODES = {_ops.SUM: HX_SUM, _ops.PROD: HX_PROD, _ops.MAX: HX_MAX, _ops.MIN: HX_MIN,
                        _ops.LAND: HX_LAND, _ops.LOR: HX_LOR, _ops.LXOR: HX_LXOR, _ops.BAND: HX_BAND,
                        _ops.BOR: HX_BOR, _ops.BXOR: HX_BXOR, _ops.REPLACE: HX_REPLACE, _ops.NO_OP: HX_NOOP}
cdef dict _MPI_ACC_CODES = {_MPI.SUM.handle: HX_SUM, _MPI.PROD.handle: HX_PROD, _MPI.MAX.handle: HX_MAX,
                            _MPI.MIN.handle: HX_MIN, _MPI.LAND.handle: HX_LAND, _MPI.LOR.handle: HX_LOR,
                            _MPI.LXOR.handle: HX_LXOR, _MPI.BAND.handle: HX_BAND, _MPI.BOR.handle: HX_BOR,
                            _MPI.BXOR.handle: HX_BXOR, _MPI.REPLACE.handle: HX_REPLACE,
                            _MPI.NO_OP.handle: HX_NOOP}
# accumulate_small's ops by name (for tests that call it directly).
ACC_OPS = {"SUM": HX_SUM, "PROD": HX_PROD, "MAX": HX_MAX, "MIN": HX_MIN, "LAND": HX_LAND, "LOR": HX_LOR,
           "LXOR": HX_LXOR, "BAND": HX_BAND, "BOR": HX_BOR, "BXOR": HX_BXOR, "REPLACE": HX_REPLACE,
           "NO_OP": HX_NOOP}
cdef object _OpType = _ops.Op
cdef object _MPIOpType = _MPI.Op


cdef inline int _op_code(object op):
    """The hot path's atomic for a predefined op, -1 for any other."""
    if type(op) is _OpType:
        return _OP_CODES.get(op, -1)
    if type(op) is _MPIOpType:
        return _MPI_OP_CODES.get(op.handle, -1)
    return -1


cdef inline int _acc_code(object op):
    """accumulate_small's op for a predefined op, -1 for any other."""
    if type(op) is _OpType:
        return _ACC_CODES.get(op, -1)
    if type(op) is _MPIOpType:
        return _MPI_ACC_CODES.get(op.handle, -1)
    return -1


from .window.request import Request as _Request
# One 8-byte integer element, as a target spec names it: signed, unsigned.
cdef set _INT64_TYPES = {_MPI.INT64_T.handle, _MPI.LONG.handle, _MPI.LONG_LONG.handle}
cdef set _UINT64_TYPES = {_MPI.UINT64_T.handle, _MPI.UNSIGNED_LONG.handle, _MPI.UNSIGNED_LONG_LONG.handle}
cdef object _NP_INT64 = np.dtype(np.int64)
cdef object _NP_UINT64 = np.dtype(np.uint64)


cdef object _one_element(object target, object origin):
    """The displacement of a target spec of one 8-byte integer element --
    None, a displacement, (disp,), (disp, 1), (disp, 1, int64 type of the
    origin's signedness) -- or -1 (not the hot path's: the Python layer
    parses it)."""
    cdef object dt
    cdef bint unsigned = False, origin_unsigned = False
    if target is None or type(target) is int:
        return target
    if type(target) is not tuple and type(target) is not list:
        return -1
    n = len(target)
    if n == 0 or n > 3 or type(target[0]) is not int:
        return -1
    if n >= 2 and not (type(target[1]) is int and target[1] == 1):
        return -1
    if n == 3:
        dt = target[2]
        if isinstance(dt, _MPI.Datatype):
            unsigned = dt.handle in _UINT64_TYPES
            if not unsigned and dt.handle not in _INT64_TYPES:
                return -1
        elif dt is np.int64 or dt is np.uint64 or (type(dt) is type(_NP_INT64)
                                                    and (dt == _NP_INT64 or dt == _NP_UINT64)):
            unsigned = dt is np.uint64 or dt == _NP_UINT64
        else:
            return -1
        if _int64_ptr(origin, False, &origin_unsigned) == NULL or origin_unsigned != unsigned:
            return -1  # int64 and uint64 are two types: a mix is the Python layer's to refuse
    return target[0]


def fast_op_code(op):
    """The hot path's atomic code of an op (FAST_ADD ...), or -1."""
    return _op_code(op)


cdef class WinBase:
    """Base of hixl_rma.Win: the buffer protocol over the local window
    memory, and the hot calls."""

    # The window's state, under this one name everywhere: its core (window/core.py's WindowCore,
    # which is a WindowState), read here as a C attribute by the hot calls; aliases share it.
    cdef readonly WindowState _core

    def _set_core(self, WindowState core):
        self._core = core

    def _share_core(self, WinBase other not None):
        """Make this handle an alias of ``other`` (Win(win))."""
        self._core = other._core

    def _local_span(self):
        """(address, nbytes, readonly) of the local window memory; (0, 0,
        False) for a window without memory. Win defines it."""
        return 0, 0, False

    def __getbuffer__(self, Py_buffer *view, int flags):
        cdef uintptr_t addr
        cdef Py_ssize_t nbytes
        cdef bint readonly
        a, n, ro = self._local_span()
        addr, nbytes, readonly = a, n, ro
        # view.obj is this window, which holds the memory's owner (and, for
        # engine memory, the mapping) for as long as the view lives.
        PyBuffer_FillInfo(view, self, <void *>addr, nbytes, readonly, flags)

    # ------------------------------------------------------------ hot calls

    def Put(self, origin, target_rank, target=None):
        """Write origin into the target window (completes at the next sync)."""
        if self._core is None or self._core._move(origin, target_rank, target, True) == 0:
            self._transfer(WRITE, "Put", origin, target_rank, target)

    def Get(self, origin, target_rank, target=None):
        """Read the target window into origin (valid after the next sync)."""
        if self._core is None or self._core._move(origin, target_rank, target, False) == 0:
            self._transfer(READ, "Get", origin, target_rank, target)

    def Flush(self, rank):
        """Remote completion of all RMA to ``rank`` (inside a passive epoch)."""
        if self._core is None or not self._core.flush(rank):
            self._flush(rank)

    def Fence(self, assertion=0):
        """Complete this rank's RMA, then barrier; opens the next fence epoch."""
        if self._core is None or not self._core.fence(assertion):
            self._fence(assertion)

    def Accumulate(self, origin, target_rank, target=None, op=_ops.SUM):
        """Element-wise atomic ``target = op(target, origin)``."""
        cdef int code = _op_code(op)
        if self._core is None or not (
                code >= 0 and self._core.atomic(origin, None, None, target_rank, target, code)
                or self._core.accumulate_small(origin, None, target_rank, target, _acc_code(op))):
            self._accumulate(origin, target_rank, target, op)

    def Fetch_and_op(self, origin, result, target_rank, target_disp=0, op=_ops.SUM):
        """Get_accumulate of one element."""
        cdef int code = _op_code(op)
        if (code < 0 or self._core is None
                or not self._core.atomic(origin, None, result, target_rank, target_disp, code)):
            self._fetch_and_op(origin, result, target_rank, target_disp, op)

    def Get_accumulate(self, origin, result, target_rank, target=None, op=_ops.SUM):
        """Accumulate that also returns the previous target values in result."""
        cdef int code = _op_code(op)
        if result is None or self._core is None or not (
                code >= 0 and self._core.atomic(origin, None, result, target_rank, _one_element(target, origin), code)
                or self._core.accumulate_small(origin, result, target_rank, target, _acc_code(op))):
            self._get_accumulate(origin, result, target_rank, target, op)

    def Rget_accumulate(self, origin, result, target_rank, target=None, op=_ops.SUM):
        """Request-based Get_accumulate (complete when it returns here)."""
        cdef int code = _op_code(op)
        if result is not None and self._core is not None and (
                code >= 0 and self._core.atomic(origin, None, result, target_rank, _one_element(target, origin), code)
                or self._core.accumulate_small(origin, result, target_rank, target, _acc_code(op))):
            return _Request.completed()
        return self._rget_accumulate(origin, result, target_rank, target, op)

    def Lock(self, rank, lock_type=_MPI.LOCK_EXCLUSIVE, assertion=0):
        """Open a passive-target epoch to ``rank`` (shared or exclusive lock)."""
        if self._core is None or not self._core.lock(rank, lock_type, assertion):
            self._lock(rank, lock_type, assertion)

    def Unlock(self, rank):
        """Complete all RMA to ``rank`` and release its lock."""
        if self._core is None or not self._core.unlock(rank):
            self._unlock(rank)

    def Compare_and_swap(self, origin, compare, result, target_rank, target_disp=0):
        """Store origin at the target if it equals compare; result gets the old value."""
        if self._core is None or not self._core.atomic(origin, compare, result, target_rank, target_disp, C_CSWAP):
            self._compare_and_swap(origin, compare, result, target_rank, target_disp)
