"""Flatten mpi4py-style buffers, datatypes and targets into byte blocks.

Put/Get/Accumulate hand the engine one batch of ``(offset, length)`` blocks
per side.  This module computes those blocks from numpy arrays (any strides),
other buffer-protocol objects, mpi4py buffer specs ``[buf, count, datatype]``
and target specs ``(disp, count, datatype)``, and checks that the two sides
describe the same number of bytes.  Everything proportional to the number of
elements or blocks is done with numpy; Python loops only run over array
dimensions or over the entries of a datatype's decoded description.
"""

from __future__ import annotations

import math
import operator

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from hixl_rma.ground.errors import BoundsError, DatatypeError, ParamError, also

from .device import is_device, is_device_pointer, with_cai
from .ops import is_pair

__all__ = [
    "Buffer",
    "Typemap",
    "as_buffer",
    "clip_blocks",
    "merge_adjacent",
    "target_blocks",
    "typemap",
]

_EMPTY = np.zeros((0, 2), dtype=np.int64)
_EMPTY.flags.writeable = False


def _span(offset, length):
    """A one-block array, or no block for an empty span."""
    if length == 0:
        return _EMPTY
    return np.array([[offset, length]], dtype=np.int64)


def merge_adjacent(blocks):
    """Merge blocks that continue each other and drop zero-length ones.

    ``blocks`` is an ``(n, 2)`` array of ``(offset, length)``; the order is
    kept (it is the data order), only neighbours with
    ``offset[i] + length[i] == offset[i + 1]`` are fused.
    """
    b = np.asarray(blocks, dtype=np.int64).reshape(-1, 2)
    b = b[b[:, 1] != 0]
    if len(b) < 2:
        return b
    off, ln = b[:, 0], b[:, 1]
    starts = np.empty(len(b), dtype=bool)
    starts[0] = True
    np.not_equal(off[1:], off[:-1] + ln[:-1], out=starts[1:])
    if starts.all():
        return b
    idx = np.flatnonzero(starts)
    out = np.empty((len(idx), 2), dtype=np.int64)
    out[:, 0] = off[idx]
    out[:, 1] = np.add.reduceat(ln, idx)
    return out


def _replicate(blocks, disps):
    """``blocks`` shifted by each displacement in turn, in that order."""
    disps = np.asarray(disps, dtype=np.int64).ravel()
    out = np.empty((len(disps) * len(blocks), 2), dtype=np.int64)
    out[:, 0] = np.add.outer(disps, blocks[:, 0]).ravel()
    out[:, 1] = np.tile(blocks[:, 1], len(disps))
    return out


class Typemap:
    """A datatype flattened to byte blocks, relative to the element start.

    ``blocks`` keep the datatype's own order (MPI data order; accumulate
    pairs elements in that order), merged where adjacent.  Offsets may be
    negative (resized or hindexed types may reach before the start).
    """

    __slots__ = ("base", "blocks", "contiguous", "extent", "size")

    def __init__(self, blocks, extent, base):
        blocks = merge_adjacent(blocks)
        # Typemaps are cached and shared: nobody may edit them in place.
        blocks.flags.writeable = False
        self.blocks = blocks
        self.extent = int(extent)
        self.size = int(blocks[:, 1].sum())
        self.base = base
        self.contiguous = bool(
            len(blocks) == 1 and blocks[0, 0] == 0 and blocks[0, 1] == self.extent
        )

    def replicate(self, count, start=0):
        """Blocks of ``count`` consecutive elements, the first at ``start``."""
        if self.contiguous:
            return _span(start, count * self.extent)
        if count == 1:  # already merged: one element adds no adjacency
            out = self.blocks.copy()
            out[:, 0] += start
            return out
        disps = start + np.arange(count, dtype=np.int64) * self.extent
        return merge_adjacent(_replicate(self.blocks, disps))

    def __repr__(self):
        return (
            f"Typemap(blocks={self.blocks.tolist()}, extent={self.extent}, "
            f"size={self.size}, base={self.base})"
        )


def _common_base(bases):
    """The one dtype all parts share, or None if they are mixed or unknown."""
    first = bases[0] if bases else None
    if first is None or any(b is None or b != first for b in bases):
        return None
    return first


# -- numpy dtypes --------------------------------------------------------------

_NP_CACHE = {}
_NP_CACHE_MAX = 1024


def _numpy_typemap(dt):
    if dt.hasobject:
        raise DatatypeError(
            f"numpy dtype {dt} holds Python objects, which cannot be moved as bytes"
        )
    if dt.itemsize == 0:
        raise DatatypeError(f"numpy dtype {dt!r} has no size")
    if dt.names is not None:
        parts, bases = [], []
        for name in dt.names:
            fdt, off = dt.fields[name][:2]
            sub = _numpy_typemap(fdt)
            parts.append(sub.blocks + np.array([off, 0], dtype=np.int64))
            bases.append(sub.base)
        return Typemap(np.concatenate(parts), dt.itemsize, _common_base(bases))
    if dt.subdtype is not None:
        sub_dt, shape = dt.subdtype
        sub = _numpy_typemap(sub_dt)
        disps = np.arange(math.prod(shape), dtype=np.int64) * sub_dt.itemsize
        return Typemap(_replicate(sub.blocks, disps), dt.itemsize, sub.base)
    return Typemap(_span(0, dt.itemsize), dt.itemsize, dt)


# -- mpi4py datatypes ----------------------------------------------------------

_COMBINERS = {
    getattr(MPI, n): n[len("COMBINER_"):] for n in dir(MPI) if n.startswith("COMBINER_")
}
# Over Open MPI (no MPI-4.1 COMBINER_VALUE_INDEX) mpi4py gives VALUE_INDEX
# NAMED's value; NAMED must win or no predefined type decodes.
_COMBINERS[MPI.COMBINER_NAMED] = "NAMED"
# Predefined handles are never freed, so a plain dict is a safe cache.
_PREDEFINED = {}
# Derived handles are reused after Free(), so their typemap is cached as an
# MPI attribute, which dies with the datatype.
_keyval = None


def _describe(datatype):
    """Name a datatype for error messages."""
    if isinstance(datatype, MPI.Datatype):
        if not datatype:
            return "MPI.DATATYPE_NULL"
        name = datatype.Get_name()
        if datatype.is_predefined and name.startswith("MPI_"):
            return "MPI." + name[4:]
        kind = _COMBINERS.get(datatype.combiner, "unknown")
        label = f" {name!r}" if name else ""
        return f"derived datatype{label} ({kind}, handle {datatype.handle:#x})"
    try:
        return f"numpy dtype {np.dtype(datatype)}"
    except (TypeError, ValueError):
        return repr(datatype)


def _named_typemap(datatype):
    lb, extent = datatype.Get_extent()
    try:
        tm = _numpy_typemap(dtlib.to_numpy_dtype(datatype))
    except (ValueError, TypeError, KeyError, DatatypeError):
        tm = None
    # Only trust the numpy mapping when it has MPI's own size and layout
    # (MPI.WCHAR maps to an unsized '<U', for instance).
    if tm is not None and lb == 0 and tm.size == datatype.size and tm.extent == extent:
        return tm
    if lb == 0 and datatype.size == extent:
        return Typemap(_span(0, extent), extent, None)
    raise DatatypeError(f"{_describe(datatype)} has no known memory layout")


def _child_typemap(datatype):
    if datatype.is_predefined:
        return _mpi_typemap(datatype)
    return _build_typemap(datatype)


def _indexed_disps(blocklengths, displacements, unit, extent):
    """Element displacements of an (h)indexed type, in typemap order."""
    bl = np.asarray(blocklengths, dtype=np.int64)
    first = np.asarray(displacements, dtype=np.int64) * unit
    block = np.repeat(np.arange(len(bl)), bl)
    within = np.arange(bl.sum(), dtype=np.int64) - np.repeat(np.cumsum(bl) - bl, bl)
    return first[block] + within * extent


def _subarray_disps(info, extent):
    sizes, subsizes, starts = info["sizes"], info["subsizes"], info["starts"]
    if info["order"] == MPI.ORDER_FORTRAN:
        # Fortran order is C order over the reversed dimensions.
        sizes, subsizes, starts = sizes[::-1], subsizes[::-1], starts[::-1]
    disps = np.zeros(1, dtype=np.int64)
    stride = extent
    strides = []
    for n in reversed(sizes):
        strides.append(stride)
        stride *= n
    for sub, start, step in zip(subsizes, starts, reversed(strides), strict=True):
        idx = np.arange(start, start + sub, dtype=np.int64) * step
        disps = np.add.outer(disps, idx).ravel()
    return disps


_SUPPORTED = {
    "DUP",
    "CONTIGUOUS",
    "VECTOR",
    "HVECTOR",
    "INDEXED",
    "HINDEXED",
    "INDEXED_BLOCK",
    "HINDEXED_BLOCK",
    "SUBARRAY",
    "STRUCT",
    "RESIZED",
}


def _build_typemap(datatype):
    """Decode ``datatype`` recursively (no cache, no commit check)."""
    kind = _COMBINERS.get(datatype.combiner, "unknown")
    if kind == "NAMED":
        return _named_typemap(datatype)
    if kind not in _SUPPORTED:
        raise DatatypeError(f"{_describe(datatype)}: {kind} datatypes are not supported")
    basetype, kind, info = datatype.decode()
    children = info.get("datatypes", [basetype])
    try:
        extent = datatype.Get_extent()[1]
        if kind == "STRUCT":
            parts, bases = [], []
            for bl, disp, child in zip(info["blocklengths"], info["displacements"], children, strict=True):
                tm = _child_typemap(child)
                disps = disp + np.arange(bl, dtype=np.int64) * tm.extent
                parts.append(_replicate(tm.blocks, disps))
                if bl and tm.size:
                    bases.append(tm.base)
            blocks = np.concatenate(parts) if parts else _EMPTY
            return Typemap(blocks, extent, _common_base(bases))
        tm = _child_typemap(basetype)
        ce = tm.extent
        if kind in ("DUP", "RESIZED"):
            disps = [0]
        elif kind == "CONTIGUOUS":
            disps = np.arange(info["count"], dtype=np.int64) * ce
        elif kind in ("VECTOR", "HVECTOR"):
            stride = info["stride"] * (ce if kind == "VECTOR" else 1)
            disps = np.add.outer(
                np.arange(info["count"], dtype=np.int64) * stride,
                np.arange(info["blocklength"], dtype=np.int64) * ce,
            )
        elif kind in ("INDEXED", "HINDEXED"):
            unit = ce if kind == "INDEXED" else 1
            disps = _indexed_disps(info["blocklengths"], info["displacements"], unit, ce)
        elif kind in ("INDEXED_BLOCK", "HINDEXED_BLOCK"):
            unit = ce if kind == "INDEXED_BLOCK" else 1
            disps = np.add.outer(
                np.asarray(info["displacements"], dtype=np.int64) * unit,
                np.arange(info["blocklength"], dtype=np.int64) * ce,
            )
        else:  # SUBARRAY
            disps = _subarray_disps(info, ce)
        return Typemap(_replicate(tm.blocks, disps), extent, tm.base)
    finally:
        # decode() hands out new references to derived constituents.
        for child in children:
            if child and not child.is_predefined:
                child.Free()


def _mpi_typemap(datatype):
    global _keyval
    tm = _PREDEFINED.get(datatype.handle)
    if tm is not None:
        return tm
    if not datatype:
        raise DatatypeError("MPI.DATATYPE_NULL cannot describe data")
    if datatype.is_predefined:
        tm = _build_typemap(datatype)
        pair = _pair_dtype(datatype, tm)
        if pair is not None:
            tm = Typemap(tm.blocks, tm.extent, pair)
        _PREDEFINED[datatype.handle] = tm
        return tm
    if _keyval is None:
        _keyval = MPI.Datatype.Create_keyval()
    tm = datatype.Get_attr(_keyval)
    if tm is None:
        try:
            # MPI has no "is committed" query; MPICH's Pack_size checks it.
            datatype.Pack_size(1, MPI.COMM_SELF)
        except MPI.Exception:
            raise DatatypeError(
                f"{_describe(datatype)} is not committed (call Commit() first)"
            ) from None
        tm = _build_typemap(datatype)
        datatype.Set_attr(_keyval, tm)
    return tm


def typemap(datatype):
    """The :class:`Typemap` of an mpi4py datatype or a numpy dtype (cached)."""
    if isinstance(datatype, MPI.Datatype):
        return _mpi_typemap(datatype)
    if datatype is None:
        raise DatatypeError("None is not a datatype")
    try:
        return _NP_CACHE[datatype]
    except (KeyError, TypeError):
        pass
    try:
        dt = np.dtype(datatype)
    except (TypeError, ValueError):
        raise DatatypeError(
            f"{datatype!r} is not a datatype (expected an mpi4py Datatype or a numpy dtype)"
        ) from None
    tm = _numpy_typemap(dt)
    try:
        if len(_NP_CACHE) >= _NP_CACHE_MAX:
            _NP_CACHE.clear()
        _NP_CACHE[datatype] = tm
    except TypeError:  # unhashable spec, e.g. a list of fields
        pass
    return tm


# -- origin buffers ------------------------------------------------------------


class Buffer:
    """An origin/result buffer resolved to memory.

    ``blocks`` are ``(offset, length)`` from ``address`` in data order.
    ``typemap``/``type_count`` record the datatype the spec named (None if
    none), so that a target without a datatype can reuse it as MPI does.
    """

    __slots__ = (
        "address",
        "blocks",
        "count",
        "device",
        "dtype",
        "nbytes",
        "obj",
        "readonly",
        "size",
        "type_count",
        "typemap",
    )

    def __init__(self, obj, address, nbytes, readonly, blocks, dtype, size,
                 typemap=None, type_count=0, device=False):
        self.obj = obj
        self.address = address
        self.nbytes = nbytes
        self.readonly = readonly
        self.blocks = blocks
        self.dtype = dtype
        self.size = size
        self.count = size // dtype.itemsize if dtype is not None and dtype.itemsize else size
        self.typemap = typemap
        self.type_count = type_count
        self.device = device

    def __repr__(self):
        return (
            f"Buffer(address={self.address:#x}, nbytes={self.nbytes}, "
            f"blocks={len(self.blocks)}, dtype={self.dtype}, count={self.count}, "
            f"size={self.size}, readonly={self.readonly}, device={self.device})"
        )


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _split_spec(spec, name):
    """``(buf, count, displ, datatype)`` of an mpi4py message spec, by
    mpi4py's rules: ``buf``, ``[buf, datatype]``, ``[buf, count]``,
    ``[buf, (count, displ)]``, ``[buf, count, datatype]``, ``[buf, (count,
    displ), datatype]`` or ``[buf, count, displ, datatype]`` (lists or
    tuples); ``displ`` counts datatype extents from the buffer start."""
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    n = len(spec)
    if n == 2:
        buf, second = spec
        if second is None or _is_int(second):
            return buf, second, None, None
        if isinstance(second, (list, tuple)):
            return (buf, *_count_displ(second, name), None)
        return buf, None, None, second
    if n == 3:
        buf, count, datatype = spec
        if isinstance(count, (list, tuple)):
            return (buf, *_count_displ(count, name), datatype)
        return buf, count, None, datatype
    if n == 4:
        return tuple(spec)
    raise also(ParamError, ValueError)(
        f"{name} must be a buffer or [buffer, datatype] / [buffer, count, datatype] / "
        f"[buffer, (count, displ), datatype] / [buffer, count, displ, datatype] (2 to 4 items), "
        f"not a {type(spec).__name__} of {n} items")


def _count_displ(pair, name):
    if len(pair) != 2:
        raise also(ParamError, ValueError)(f"{name}: (count, displ) must have 2 items, not {len(pair)}")
    return pair[0], pair[1]


def _check_count(count, what):
    if not _is_int(count):
        raise also(ParamError, TypeError)(f"{what} must be an integer, not {type(count).__name__}",
                                          error_class=MPI.ERR_COUNT)
    count = int(count)
    if count < 0:
        raise BoundsError(f"{what} {count} is negative")
    return count


class _Interface:
    """An ``__array_interface__`` holder whose array keeps ``owner`` alive."""

    __slots__ = ("__array_interface__", "owner")


def _array_at(address, shape, strides, typestr, readonly, owner):
    """A numpy array over host memory described by an array interface; it
    keeps ``owner`` alive."""
    iface = _Interface()
    iface.owner = owner
    iface.__array_interface__ = {"version": 3, "data": (address, bool(readonly)), "shape": tuple(shape),
                                 "strides": None if strides is None else tuple(strides),
                                 "typestr": typestr}
    return np.asarray(iface)


_DLPACK_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}  # DLDataTypeCode -> numpy kind
_DLPACK_HOST = (1, 3)  # kDLCPU, kDLCUDAHost


def _dlpack_array(buf):
    """A numpy view of a DLPack tensor in host memory (None on a device).

    mpi4py exports it (``MPI.buffer``: contiguous tensors, the producer's
    read-only flag); the element type is read from the capsule. numpy's own
    ``from_dlpack`` is not used: it marks arrays of unversioned capsules
    read-only and consumes the capsule by its own rules."""
    from hixl_rma._engine import dlpack_dtype
    try:
        capsule = buf.__dlpack__()
    except TypeError:
        capsule = buf.__dlpack__(stream=None)
    device, code, bits, lanes = dlpack_dtype(capsule)
    del capsule  # unconsumed: the producer's deleter runs
    if device not in _DLPACK_HOST:
        return None
    try:
        mem = MPI.buffer(buf)
    except (BufferError, TypeError, ValueError) as exc:
        raise also(ParamError, BufferError)(f"DLPack tensor {type(buf).__name__}: {exc}") from None
    kind = _DLPACK_KINDS.get(code)
    if kind is None or lanes != 1 or bits % 8 or not bits or mem.nbytes % (bits // 8):
        typestr, n = "|u1", mem.nbytes  # no numpy element type: raw bytes
    else:
        typestr, n = ("|b1" if kind == "b" else f"={kind}{bits // 8}"), mem.nbytes // (bits // 8)
    return _array_at(mem.address, (n,), None, typestr, mem.readonly, mem)


def _host_array(buf):
    """A numpy view of a host buffer: buffer-protocol objects, DLPack tensors
    on the CPU and ``__cuda_array_interface__`` objects whose memory is host
    memory (the pointer decides, not the interface). None when ``buf`` is
    none of them, or is device memory."""
    try:
        mv = memoryview(buf)
    except TypeError:
        mv = None
    if mv is not None:
        try:
            return np.asarray(mv)
        except (TypeError, ValueError, NotImplementedError):
            # A format numpy cannot parse: move it as raw bytes.
            if not (mv.c_contiguous or mv.f_contiguous):
                raise ParamError(
                    f"{type(buf).__name__} buffer of format {mv.format!r} is neither "
                    "understood by numpy nor contiguous"
                ) from None
            return np.asarray(mv.cast("B"))
    cai = getattr(buf, "__cuda_array_interface__", None)
    if cai is not None:
        address, readonly = cai["data"]
        if is_device_pointer(address):
            return None
        return _array_at(address, cai["shape"], cai.get("strides"), cai["typestr"], readonly, buf)
    if hasattr(buf, "__dlpack__"):
        return _dlpack_array(buf)
    return None


def _device_span(buf, name):
    """``(address, nbytes, readonly, dtype)`` of a CUDA-array-interface object."""
    cai = buf.__cuda_array_interface__
    dtype = np.dtype(cai["typestr"])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is not None:
        expect = dtype.itemsize
        for n, s in zip(reversed(shape), reversed(strides), strict=True):
            if n > 1 and s != expect:
                raise ParamError(
                    f"{name} is a non-contiguous device array, which is not supported"
                )
            expect *= n
    address, readonly = cai["data"]
    return address, math.prod(shape) * dtype.itemsize, bool(readonly), dtype


def _array_layout(arr):
    """``(address, nbytes, blocks)`` of a numpy array.

    A contiguous array (C or Fortran order) is its raw memory, one block, as
    mpi4py moves it; any other view is walked in logical C order, one block
    per contiguous run. ``address`` is the lowest byte the view touches, so
    negative strides give non-negative offsets; ``nbytes`` is the span it
    touches.
    """
    ptr = arr.__array_interface__["data"][0]
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        return ptr, arr.nbytes, _span(0, arr.nbytes)
    if arr.size == 0:
        return ptr, 0, _EMPTY
    item = arr.itemsize
    dims = [(n, s) for n, s in zip(arr.shape, arr.strides, strict=True) if n != 1]
    lo = sum((n - 1) * s for n, s in dims if s < 0)
    hi = sum((n - 1) * s for n, s in dims if s > 0) + item
    # Innermost dimensions that continue each other form one block each.
    run = item
    while dims and dims[-1][1] == run:
        run *= dims.pop()[0]
    offsets = np.full(1, -lo, dtype=np.int64)
    for n, s in dims:
        offsets = np.add.outer(offsets, np.arange(n, dtype=np.int64) * s).ravel()
    blocks = np.empty((len(offsets), 2), dtype=np.int64)
    blocks[:, 0] = offsets
    blocks[:, 1] = run
    return ptr + lo, hi - lo, merge_adjacent(blocks)


def clip_blocks(blocks, nbytes):
    """The leading blocks holding the first ``nbytes`` data bytes."""
    if nbytes == 0:
        return _EMPTY
    ends = np.cumsum(blocks[:, 1])
    k = int(np.searchsorted(ends, nbytes))
    out = blocks[: k + 1].copy()
    out[-1, 1] -= ends[k] - nbytes
    return out


_PAIRS = ("FLOAT_INT", "DOUBLE_INT", "LONG_INT", "TWOINT", "SHORT_INT", "LONG_DOUBLE_INT")


def _pair_dtype(datatype, tm):
    """For MPI's (value, index) pair types (MPI.DOUBLE_INT, ...): the packed
    numpy dtype of their data bytes in order, fields "value" and "index"
    (MAXLOC / MINLOC compute on it); None for any other datatype."""
    for name in _PAIRS:
        if datatype == getattr(MPI, name, None):
            break
    else:
        return None
    value = np.dtype(np.intc) if name == "TWOINT" else dtlib.to_numpy_dtype(datatype)["f0"]
    pair = np.dtype({"names": ["value", "index"], "formats": [value, np.intc],
                     "offsets": [0, value.itemsize], "itemsize": value.itemsize + np.dtype(np.intc).itemsize})
    return pair if pair.itemsize == tm.size else None


def _element_dtype(dt):
    """The homogeneous element type of an array dtype, None if mixed; a
    (value, index) pair dtype is its own element type (MAXLOC, MINLOC)."""
    if dt.names is None or is_pair(dt):
        return dt
    tm = typemap(dt)
    return tm.base if tm.contiguous else None


def _too_small(name, nbytes, count, datatype, needs):
    return BoundsError(
        f"{name} buffer of {nbytes} bytes is too small for count {count} of "
        f"{_describe(datatype)} (needs {needs} bytes)"
    )


def as_buffer(spec, *, writable, name="origin", allow_device=False):
    """Resolve an origin/result spec to a :class:`Buffer`.

    ``spec`` is a buffer (buffer protocol, DLPack on the CPU, or a
    ``__cuda_array_interface__`` object; numpy arrays that are neither C-
    nor Fortran-contiguous are described as blocks, never copied), or an
    mpi4py message spec (see :func:`_split_spec`); the buffer may be None
    for an empty message and ``MPI.BOTTOM`` with a datatype of absolute
    addresses. ``writable`` asks for memory the operation may write into.
    ``allow_device`` accepts device memory (contiguous only).
    """
    if type(spec) is np.ndarray:
        flags, dt = spec.flags, spec.dtype
        if flags.c_contiguous and dt.names is None and not dt.hasobject:
            # Hot path (a plain contiguous array): one block, no general checks.
            if writable and not flags.writeable:
                raise _read_only(name)
            n = spec.nbytes
            return Buffer(spec, spec.__array_interface__["data"][0], n,
                          not flags.writeable, _span(0, n), dt, n)
        buf, count, displ, datatype = spec, None, None, None
    else:
        buf, count, displ, datatype = _split_spec(spec, name)
    if count is not None:
        count = _check_count(count, f"{name} count")
    if displ is not None:
        displ = _check_count(displ, f"{name} displacement")
    if (buf is None and spec is not None) or buf is MPI.BOTTOM:
        # None only inside a spec, as mpi4py: [None, datatype] is an empty message.
        return _no_buffer(buf, count, displ, datatype, None if datatype is None else typemap(datatype), name)

    arr = buf if isinstance(buf, np.ndarray) else _host_array(buf)
    if arr is None and allow_device and is_device(buf):
        buf = with_cai(buf)  # a DLPack-only device tensor: a CuPy view of it
    if arr is None:
        if not hasattr(buf, "__cuda_array_interface__"):
            raise also(ParamError, TypeError)(
                f"{name} must be a buffer (numpy array, bytearray, memoryview, DLPack, ...), "
                f"not {type(buf).__name__}", error_class=MPI.ERR_BUFFER)
        if not allow_device:
            raise ParamError(
                f"{name} is a device array ({type(buf).__name__}); device memory is "
                "not supported here"
            )
        keep, device = buf, True
        address, nbytes, readonly, elem = _device_span(buf, name)
        dense = True
    else:
        if arr.dtype.hasobject:
            raise also(DatatypeError, TypeError)(
                f"{name} is an array of Python objects, which cannot be moved")
        # Keep the array: it holds the buffer export, so e.g. a bytearray
        # cannot be resized while the transfer is in flight.
        keep, device = arr, False
        readonly = not arr.flags.writeable
        elem = arr.dtype
        dense = arr.flags.c_contiguous or arr.flags.f_contiguous
    if writable and readonly:
        raise _read_only(name)
    tm = None if datatype is None else typemap(datatype)

    # A strided numpy array is walked element by element in logical order,
    # which is only meaningful for its own element type.
    elementwise = not device and not displ and (
        tm is None
        or (
            tm.contiguous
            and tm.extent == arr.itemsize
            and tm.base is not None
            and tm.base == arr.dtype
        )
    )
    if elementwise:
        address, nbytes, blocks = _array_layout(arr)
        if writable and not dense and any(
            s == 0 and n > 1 for n, s in zip(arr.shape, arr.strides, strict=True)
        ):
            raise ParamError(
                f"{name} has overlapping elements (a zero stride) and cannot receive data"
            )
        size = arr.nbytes
        if count is not None:
            if count > arr.size:
                raise _too_small(name, nbytes, count, arr.dtype if tm is None else datatype,
                                 count * arr.itemsize)
            size = count * arr.itemsize
            blocks = clip_blocks(blocks, size)
        dtype = _element_dtype(arr.dtype)
        return Buffer(keep, address, nbytes, readonly, blocks, dtype, size,
                      typemap=tm, type_count=arr.size if count is None else count)

    if not dense:
        raise DatatypeError(
            f"{name} is a non-contiguous array of {arr.dtype}; with a datatype or a "
            f"displacement it must be contiguous, or the datatype must be its element type, "
            f"not {_describe(datatype)}"
        )
    if not device:
        address, nbytes = arr.__array_interface__["data"][0], arr.nbytes
    unit = tm if tm is not None else typemap(elem)
    described = datatype if datatype is not None else elem
    if displ:
        if unit.extent <= 0 or displ * unit.extent > nbytes:
            raise also(BoundsError, ValueError)(
                f"{name} displacement {displ} of {_describe(described)} is past the end of the "
                f"{nbytes}-byte buffer")
        address, nbytes = address + displ * unit.extent, nbytes - displ * unit.extent
    if count is None:
        if unit.extent <= 0 or nbytes % unit.extent:
            raise also(DatatypeError, ValueError)(
                f"cannot infer count: {name} buffer of {nbytes} bytes is not a "
                f"multiple of the extent {unit.extent} of {_describe(described)}"
            )
        count = nbytes // unit.extent
    blocks = unit.replicate(count)
    if len(blocks):
        lo = int(blocks[:, 0].min())
        hi = int((blocks[:, 0] + blocks[:, 1]).max())
        if lo < 0:
            raise BoundsError(
                f"count {count} of {_describe(described)} reaches {-lo} bytes "
                f"before the start of the {name} buffer"
            )
        if hi > nbytes:
            raise _too_small(name, nbytes, count, described, hi)
    return Buffer(keep, address, nbytes, readonly, blocks, unit.base, count * unit.size,
                  typemap=tm, type_count=count, device=device)


def _read_only(name):
    return also(ParamError, BufferError)(f"{name} buffer is read-only", error_class=MPI.ERR_BUFFER)


def _no_buffer(buf, count, displ, datatype, tm, name):
    """The Buffer of a spec without memory of its own: None (an empty
    message, as mpi4py allows) or MPI.BOTTOM (the datatype holds absolute
    addresses)."""
    if buf is None:
        if count:
            raise also(ParamError, ValueError)(f"{name}: buffer is None but count is {count}")
        dtype = tm.base if tm is not None else None
        return Buffer(None, 0, 0, False, _EMPTY, dtype, 0, typemap=tm, type_count=0)
    if tm is None or count is None:
        raise also(ParamError, ValueError)(
            f"{name}: MPI.BOTTOM needs a count and a datatype of absolute addresses, "
            f"as [MPI.BOTTOM, count, datatype]")
    if displ:
        raise also(ParamError, ValueError)(f"{name}: MPI.BOTTOM takes no displacement")
    blocks = tm.replicate(count)
    if len(blocks) and int(blocks[:, 0].min()) <= 0:
        raise BoundsError(f"{name}: {_describe(datatype)} at MPI.BOTTOM reaches address "
                          f"{int(blocks[:, 0].min())}, which is not memory")
    hi = int((blocks[:, 0] + blocks[:, 1]).max()) if len(blocks) else 0
    return Buffer(buf, 0, hi, False, blocks, tm.base, count * tm.size, typemap=tm, type_count=count)


# -- targets -------------------------------------------------------------------


def target_blocks(target, origin, disp_unit, receiver=None):
    """Blocks of the target window a transfer with ``origin`` touches.

    ``target`` is ``None``, a displacement (in ``disp_unit``s), or
    ``(disp,)``, ``(disp, count)``, ``(disp, count, datatype)`` as a tuple or
    list.  Without a datatype the origin's datatype is used (its element
    type for plain buffers), as in MPI.  Returns ``(start_byte, blocks,
    dtype, size)`` with block offsets in bytes from the window start and
    ``size`` the bytes that move.

    ``receiver`` says which side receives, as MPI moves RMA data as a send
    into a receive: ``"target"`` (Put) may describe more than the origin
    holds, ``"origin"`` (Get) may hold more than the target describes; the
    data then fills the start of the larger side (its blocks are cut to
    ``size`` here for the target; the caller cuts the origin's). ``None``
    (accumulates, which MPI defines element for element) needs both equal.
    """
    count = datatype = None
    if target is None:
        disp = 0
    elif _is_int(target):
        disp = target
    elif isinstance(target, (tuple, list)) and 1 <= len(target) <= 3:
        disp = target[0]
        if len(target) > 1:
            count = target[1]
        if len(target) > 2:
            datatype = target[2]
    else:
        raise also(ParamError, ValueError)(
            "target must be None, a displacement, or (disp, count, datatype), "
            f"not {type(target).__name__}" + (f" of {len(target)} items" if isinstance(target, (tuple, list))
                                               else ""))
    if not _is_int(disp):
        raise also(ParamError, TypeError)(f"target displacement must be an integer, not {type(disp).__name__}",
                                          error_class=MPI.ERR_DISP)
    disp = operator.index(disp)
    if disp < 0:
        raise BoundsError(f"target displacement {disp} is negative")
    if count is not None:
        count = _check_count(count, "target count")
    start = disp * disp_unit
    if start >= 1 << 63:
        raise BoundsError(f"target displacement {disp} is out of range")

    if datatype is not None:
        tm, label = typemap(datatype), _describe(datatype)
        _match_types(origin, tm.base, datatype, start)
        if count is None:
            if tm.size == 0 or origin.size % tm.size:
                raise DatatypeError(
                    f"cannot infer target count: origin has {origin.size} bytes, not a "
                    f"multiple of the {tm.size} bytes of {label}"
                )
            count = origin.size // tm.size
    elif origin.typemap is not None:
        tm, label = origin.typemap, "the origin datatype"
        if count is None:
            count = origin.type_count
    else:
        item = origin.dtype.itemsize if origin.dtype is not None else 1
        size = _moved(origin.size if count is None else count * item, origin.size, receiver)
        return start, _span(start, size), origin.dtype, size

    size = _moved(count * tm.size, origin.size, receiver)
    if size < count * tm.size:
        # Only the elements the data reaches: a target count far past what
        # moves costs nothing.
        blocks = clip_blocks(tm.replicate(-(-size // tm.size), start), size) if size else _EMPTY
    else:
        blocks = tm.replicate(count, start)
    if not tm.contiguous and len(blocks):
        lo = int(blocks[:, 0].min())
        if lo < 0:
            raise BoundsError(
                f"target {label} at displacement {disp} reaches "
                f"{-lo} bytes before the window start"
            )
    return start, blocks, tm.base, size


def untyped(dtype):
    """Raw bytes, which match any type: no known element type, unsigned
    bytes (bytes, bytearray, MPI.BYTE; and numpy uint8, MPI.UNSIGNED_CHAR
    and UINT8_T, which mpi4py cannot tell from bytes: all are buffer format
    "B") or numpy void."""
    return dtype is None or (dtype.kind == "u" and dtype.itemsize == 1) or (dtype.kind == "V"
                                                                              and dtype.names is None)


# The MPI names of numpy's native basic types, for messages.
_MPI_NAMES = {"b1": "C_BOOL", "S1": "CHAR", "i1": "INT8_T", "i2": "INT16_T", "i4": "INT32_T", "i8": "INT64_T",
              "u2": "UINT16_T", "u4": "UINT32_T", "u8": "UINT64_T", "f4": "FLOAT", "f8": "DOUBLE",
              "c8": "C_FLOAT_COMPLEX", "c16": "C_DOUBLE_COMPLEX"}


def _type_name(dtype):
    """A numpy element type and, where there is one, its MPI name."""
    name = _MPI_NAMES.get(f"{dtype.kind}{dtype.itemsize}") if dtype.isnative else None
    return f"{dtype} (MPI.{name})" if name else str(dtype)


def _match_types(origin, target_base, datatype, start):
    """MPI's type matching: an origin and a target that both carry typed
    basic types must carry the same one (raw bytes match any)."""
    have = origin.dtype
    if have is None or target_base is None or have == target_base or untyped(have) or untyped(target_base):
        return
    named = f" ({_describe(datatype)})" if isinstance(datatype, MPI.Datatype) else ""
    raise DatatypeError(
        f"type mismatch at target offset {start}: target type {target_base}{named} differs from origin type "
        f"{_type_name(have)}; MPI moves typed data only between the same basic type (untyped bytes -- bytes, "
        f"bytearray, MPI.BYTE -- move into any)")


def _moved(described, held, receiver):
    """The bytes a transfer moves: the target describes ``described``, the
    origin holds ``held``. The receiving side may be the larger one (MPI's
    send/receive rule); a receiving side too small is a BoundsError, and
    where both must agree (``receiver`` None) a difference is refused as
    before: more than the origin holds would run past it (BoundsError),
    fewer is a type mismatch (DatatypeError)."""
    if described == held:
        return held
    if receiver == "target":
        if described > held:
            return held
        raise BoundsError(f"target describes {described} bytes, fewer than the {held} bytes the origin sends")
    if receiver == "origin":
        if held > described:
            return described
        raise BoundsError(f"origin holds {held} bytes, fewer than the {described} bytes the target describes")
    cls = BoundsError if described > held else DatatypeError
    raise cls(f"target describes {described} bytes but origin has {held} bytes")
