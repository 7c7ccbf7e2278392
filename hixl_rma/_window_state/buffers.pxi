# Reading a call's arguments into C values (included by _engine.pyx): the
# origin buffer and the target spec of the common case, an 8-byte integer
# of an atomic, the export an operation holds until its flush.

cdef object _MPIDatatype = _MPI.Datatype


cdef inline long _kind_code(char kind, Py_ssize_t itemsize) noexcept:
    """A basic type as the hot path compares types (MPI's type matching):
    numpy's kind and item size; 0 for raw bytes (unsigned bytes: bytes,
    bytearray, MPI.BYTE, and uint8 / MPI.UNSIGNED_CHAR, which mpi4py cannot
    tell from bytes), which match any type."""
    if kind == b'u' and itemsize == 1:
        return 0
    return (<long>kind << 8) | (itemsize & 0xFF)


cdef inline long _format_code(const char *fmt, Py_ssize_t itemsize) noexcept:
    """The _kind_code of a buffer's elements by its format, or -1 for a
    format the hot path does not read (another byte order, several fields):
    the Python layer decides on those."""
    cdef char c
    if fmt == NULL:
        return 0  # bytes
    if fmt[0] in b"@=<":  # native ('<' too: the hosts are little-endian)
        fmt += 1
    if fmt[0] == b'Z' and fmt[1] != 0 and fmt[2] == 0 and fmt[1] in b"efdg":
        return _kind_code(b'c', itemsize)
    if fmt[0] == 0 or fmt[1] != 0:
        return -1
    c = fmt[0]
    if c == b'B':
        return 0
    if c in b"bhilqn":
        return _kind_code(b'i', itemsize)
    if c in b"HILQN":
        return _kind_code(b'u', itemsize)
    if c in b"efdg":
        return _kind_code(b'f', itemsize)
    if c == b'?':
        return _kind_code(b'b', itemsize)
    if c == b'c':
        return _kind_code(b'S', itemsize)
    return -1


cdef dict _basic_sizes():
    """Size and type of each named, contiguous basic datatype of MPI by
    handle, as ``size | _kind_code << 16`` (the code 0 where numpy has no
    such type: nothing to match): the target datatypes whose (disp, count,
    datatype) the hot path resolves itself (count elements of that size, no
    holes, of the origin's type)."""
    cdef dict sizes = {}
    cdef long code
    for name in ("BYTE", "CHAR", "SIGNED_CHAR", "UNSIGNED_CHAR", "WCHAR", "SHORT", "UNSIGNED_SHORT", "INT",
                 "UNSIGNED", "LONG", "UNSIGNED_LONG", "LONG_LONG", "UNSIGNED_LONG_LONG", "FLOAT", "DOUBLE",
                 "LONG_DOUBLE", "C_BOOL", "INT8_T", "INT16_T", "INT32_T", "INT64_T", "UINT8_T", "UINT16_T",
                 "UINT32_T", "UINT64_T", "C_FLOAT_COMPLEX", "C_DOUBLE_COMPLEX", "C_LONG_DOUBLE_COMPLEX",
                 "AINT", "OFFSET", "COUNT"):
        dt = getattr(_MPI, name, None)
        if dt is None or dt == _MPI.DATATYPE_NULL:
            continue
        try:
            size = dt.Get_size()
            lb, extent = dt.Get_extent()
        except _MPI.Exception:
            continue  # not in this MPI
        if size > 0 and lb == 0 and extent == size:
            try:
                npdt = _dtlib.to_numpy_dtype(dt)
                code = _kind_code(ord(npdt.kind), npdt.itemsize) if npdt.itemsize == size else 0
            except (ValueError, TypeError, KeyError):
                code = 0
            sizes[dt.handle] = size | (code << 16)
    return sizes


# Filled at the first (disp, count, datatype) a window sees: asking MPI at
# import would use MPI before a program that initializes it itself has.
cdef dict _BASIC_SIZES = None


cdef Py_ssize_t _basic_size(object datatype, const Py_buffer *view) except -1:
    """The element size of a target datatype the hot path resolves itself:
    a named, contiguous basic type (_basic_sizes) of the origin's element
    type or of raw bytes (MPI's type matching); 0 for any other (a derived
    type, a mismatch, an origin format not read here): the Python layer's."""
    global _BASIC_SIZES
    cdef object basic
    cdef long packed, code
    if type(datatype) is not _MPIDatatype:
        return 0
    if _BASIC_SIZES is None:
        _BASIC_SIZES = _basic_sizes()
    basic = _BASIC_SIZES.get(datatype.handle)
    if basic is None:
        return 0
    packed = basic
    code = packed >> 16
    if code != 0 and _format_code(view.format, view.itemsize) not in (0, code):
        return 0
    return packed & 0xFFFF


cdef inline bint _one_char_format(const char *fmt) noexcept:
    """True for a buffer format of one basic element ("d", "<i", "=q"...)."""
    if fmt == NULL:
        return True  # bytes: unsigned bytes
    if fmt[0] in b"<>=!@":
        fmt += 1
    return fmt[0] != 0 and fmt[1] == 0 and strchr(b"bBhHiIlLqQnNefdg?c", fmt[0]) != NULL


@cython.freelist(64)
cdef class _Export:
    """A buffer export held until the flush that completes the operation
    reading or writing it: while it is held, the exporter cannot move its
    memory (a bytearray or array.array refuses to resize), as the slow
    path's buffers also hold theirs."""
    cdef Py_buffer view
    cdef bint held

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)


cdef enum:
    C_ADD, C_AND, C_OR, C_XOR, C_SWAP, C_CSWAP, C_NOOP
FAST_ADD, FAST_AND, FAST_OR, FAST_XOR, FAST_SWAP, FAST_CSWAP, FAST_NOOP = (
    C_ADD, C_AND, C_OR, C_XOR, C_SWAP, C_CSWAP, C_NOOP)
cdef AtomicOp _FAST_OPS[7]
_FAST_OPS[:] = [AtomicOp.ADD, AtomicOp.AND, AtomicOp.OR, AtomicOp.XOR, AtomicOp.SWAP, AtomicOp.CSWAP,
                AtomicOp.ADD]


cdef inline int _ndarray_span(object a, bint writable, char **buf, Py_ssize_t *nbytes) noexcept:
    """numpy's own arrays (the common origin), read from the array itself:
    a buffer export of one makes numpy format its type string each time.
    1 with the data and its size for a contiguous array of numbers or bools
    (writable when asked), which the buffer protocol would export as well;
    0 for anything else (the caller takes the buffer protocol's path). The
    caller's reference keeps the memory alive (and an array referenced
    elsewhere refuses to resize, as one exported does)."""
    cdef cnp.ndarray arr
    if not cnp.PyArray_CheckExact(a):
        return 0
    arr = <cnp.ndarray>a
    if cnp.PyArray_TYPE(arr) > cnp.NPY_CLONGDOUBLE:  # objects, strings, records, dates, halves: the protocol's
        return 0
    if not (cnp.PyArray_IS_C_CONTIGUOUS(arr) or cnp.PyArray_IS_F_CONTIGUOUS(arr)):
        return 0
    if writable and not cnp.PyArray_ISWRITEABLE(arr):
        return 0
    buf[0] = <char *>cnp.PyArray_DATA(arr)
    nbytes[0] = cnp.PyArray_NBYTES(arr)
    return 1


cdef inline char *_int64_ptr(object a, bint writable, bint *unsigned=NULL):
    """Address of a buffer of exactly one 8-byte integer, or NULL;
    ``unsigned`` tells its signedness (MPI's type matching tells them apart)."""
    cdef Py_buffer view
    cdef char *p = NULL
    cdef const char *fmt
    cdef Py_ssize_t n
    cdef cnp.ndarray arr
    if cnp.PyArray_CheckExact(a):
        arr = <cnp.ndarray>a
        # as the protocol's format would say: one native-order 8-byte integer (bools are not)
        if (cnp.PyArray_ITEMSIZE(arr) != 8 or not cnp.PyArray_ISINTEGER(arr) or not cnp.PyArray_ISNOTSWAPPED(arr)
                or not _ndarray_span(a, writable, &p, &n) or n != 8):
            return NULL
        if unsigned != NULL:
            unsigned[0] = cnp.PyArray_ISUNSIGNED(arr)
        return p
    if _get_buffer(a, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                          (PyBUF_WRITABLE if writable else 0)) != 0:
        PyErr_Clear()
        return NULL
    fmt = view.format
    if fmt != NULL and fmt[0] in b"@=<":
        fmt += 1
    if (view.itemsize == 8 and view.len == 8 and fmt != NULL and fmt[1] == 0
            and fmt[0] in b"lqLQ"):
        p = <char *>view.buf
        if unsigned != NULL:
            unsigned[0] = fmt[0] in b"LQ"
    # The caller holds a reference to ``a``, which keeps the memory alive.
    PyBuffer_Release(&view)
    return p


cdef inline bint _int64_scalar(object a, uint64_t *out, bint *unsigned):
    cdef char *p = _int64_ptr(a, False, unsigned)
    if p == NULL:
        return False
    out[0] = (<uint64_t *>p)[0]
    return True


cdef inline bint _int64_out(object a, bint *unsigned):
    return _int64_ptr(a, True, unsigned) != NULL


cdef inline void _int64_store(object a, uint64_t v):
    (<uint64_t *>_int64_ptr(a, True))[0] = v


cdef inline void _copy(char *remote, char *local, size_t n, bint write) noexcept nogil:
    if write:
        memcpy(remote, local, n)
    else:
        memcpy(local, remote, n)


cdef inline bint _int64_array(object a, int ndim):
    """A C-contiguous int64 numpy array of ``ndim`` dimensions (pairs when 2)."""
    return (type(a) is np.ndarray and (<object>a).dtype == np.int64 and (<object>a).ndim == ndim
            and (<object>a).flags.c_contiguous and (ndim == 1 or (<object>a).shape[1] == 2))

