"""Tests for hixl_rma.buffers.datatypes: buffers, datatypes and targets as byte blocks."""

import array
import ctypes

import numpy as np
import pytest
from mpi4py import MPI

from hixl_rma.buffers.datatypes import (
    Buffer,
    Typemap,
    as_buffer,
    merge_adjacent,
    target_blocks,
    typemap,
)
from hixl_rma.ground.errors import BoundsError, DatatypeError, ParamError

pytestmark = pytest.mark.timeout(60)


def gather(buf):
    """The bytes a Buffer describes, in block order."""
    return b"".join(ctypes.string_at(buf.address + off, ln) for off, ln in buf.blocks.tolist())


def gather_from(data, blocks, base=0):
    """The bytes ``blocks`` select from ``data`` (bytes), offsets shifted by base."""
    return b"".join(data[base + off: base + off + ln] for off, ln in blocks.tolist())


def elem_blocks(indices, itemsize):
    """Reference blocks: one per element index, merged."""
    idx = np.asarray(indices, dtype=np.int64).ravel()
    return merge_adjacent(np.stack([idx * itemsize, np.full_like(idx, itemsize)], axis=1))


def byte_bounds(arr):
    """(lowest, one past highest) address an array touches."""
    try:
        return np.lib.array_utils.byte_bounds(arr)  # numpy >= 2
    except AttributeError:
        return np.byte_bounds(arr)


def committed(dt):
    dt.Commit()
    return dt


def mpi_pack(datatype, count, src):
    """What MPI itself packs from ``count`` elements at the start of ``src`` (uint8)."""
    out = bytearray(max(datatype.Pack_size(count, MPI.COMM_SELF), 1))
    # mpi4py takes the count from the input length: len // extent.
    n = datatype.Pack(src[: count * datatype.extent], out, 0, MPI.COMM_SELF)
    return bytes(out[:n])


@pytest.fixture
def freed():
    """Collects derived datatypes to free after the test."""
    types = []
    yield types
    for t in types:
        if t:
            t.Free()


# -- merge_adjacent -------------------------------------------------------------


def test_merge_adjacent_merges_in_order_and_drops_empty():
    got = merge_adjacent([[0, 4], [4, 4], [8, 0], [12, 4], [16, 4], [0, 8], [8, 8]])
    assert got.dtype == np.int64
    assert got.tolist() == [[0, 8], [12, 8], [0, 16]]


def test_merge_adjacent_edge_cases():
    assert merge_adjacent(np.zeros((0, 2), np.int64)).shape == (0, 2)
    assert merge_adjacent([[5, 0]]).shape == (0, 2)
    assert merge_adjacent([[5, 3]]).tolist() == [[5, 3]]
    # Not merged when a later block precedes the earlier one in memory.
    assert merge_adjacent([[8, 8], [0, 8]]).tolist() == [[8, 8], [0, 8]]


# -- numpy arrays as buffers -----------------------------------------------------

_f = np.arange(8000, dtype=np.float64).reshape(1000, 8)
_i3 = np.arange(4 * 6 * 5, dtype=np.int32).reshape(4, 6, 5)
_c = (np.arange(24) + 1j * np.arange(24)).reshape(4, 6)
_u8 = np.arange(200, dtype=np.uint8).reshape(10, 20)

VIEWS = {
    "c_contig": lambda: _f,
    "cols": lambda: _f[:, :3],
    "every_other_row": lambda: _f[::2],
    "reversed_rows": lambda: _f[::-1],
    "reversed_cols": lambda: _f[:5, ::-1],
    "both_reversed": lambda: _f[::-3, ::-2],
    "transpose": lambda: _f[:6].T,
    "fortran": lambda: np.asfortranarray(_f[:7, :5]),
    "single_col": lambda: _f[:, 2:3],
    "single_row": lambda: _f[3:4, :],
    "single_elem_2d": lambda: _f[3:4, 5:6],
    "row_of_2d": lambda: _f[5],
    "col_of_2d": lambda: _f[:, 5],
    "3d_slices": lambda: _i3[1:3, ::2, 1:4],
    "3d_transpose": lambda: _i3.transpose(2, 0, 1),
    "3d_negative": lambda: _i3[::-1, :, ::-2],
    "3d_mixed": lambda: _i3[:, ::-1, 1:],
    "3d_inner_contig_outer_neg": lambda: _i3[::-1, 2:5, :],
    "complex_cols": lambda: _c[:, 1::2],
    "bytes_view": lambda: _u8[::3, 2:17:5],
    "reinterpret_u1": lambda: _f[:2].view(np.uint8)[:, ::3],
    "int16_odd": lambda: np.arange(300, dtype=np.int16).reshape(15, 20)[1::4, 3:11:3],
    "zero_d": lambda: np.array(3.5),
    "zero_d_view": lambda: _f[2, 3, ...],
    "empty_rows": lambda: _f[:0],
    "empty_cols": lambda: _f[:, 2:2],
    "empty_3d": lambda: _i3[:, 3:3, ::2],
    "broadcast": lambda: np.broadcast_to(np.arange(3.0), (4, 3)),
}


@pytest.mark.parametrize("make", VIEWS.values(), ids=VIEWS.keys())
def test_array_blocks_gather_in_mpi4py_order(make):
    # A contiguous array (C or Fortran order) moves its raw memory, as mpi4py
    # does; any other view moves in logical C order. order="A" is exactly that.
    arr = make()
    buf = as_buffer(arr, writable=False)
    assert isinstance(buf, Buffer)
    assert buf.blocks.dtype == np.int64 and buf.blocks.shape[1] == 2
    assert gather(buf) == arr.tobytes(order="A")
    if arr.flags.f_contiguous and not arr.flags.c_contiguous:
        assert buf.blocks.tolist() == [[0, arr.nbytes]]
    assert buf.size == arr.nbytes == int(buf.blocks[:, 1].sum())
    assert buf.dtype == arr.dtype and buf.count == arr.size
    assert buf.obj is arr and buf.device is False
    if arr.size:
        lo, hi = byte_bounds(arr)
        assert buf.address == lo and buf.nbytes == hi - lo
        assert (buf.blocks[:, 1] > 0).all()
        assert (buf.blocks[:, 0] >= 0).all()
        assert ((buf.blocks[:, 0] + buf.blocks[:, 1]) <= buf.nbytes).all()
        # Merged: no block continues the previous one.
        ends = buf.blocks[:-1, 0] + buf.blocks[:-1, 1]
        assert not (ends == buf.blocks[1:, 0]).any()
    else:
        assert buf.blocks.shape == (0, 2) and buf.size == 0


def test_contiguous_array_is_one_block():
    buf = as_buffer(_f, writable=False)
    assert buf.blocks.tolist() == [[0, 64000]]
    assert buf.address == _f.__array_interface__["data"][0]
    assert buf.nbytes == 64000 and buf.count == 8000 and buf.dtype == np.float64


def test_column_slice_is_one_block_per_row():
    buf = as_buffer(_f[:, :3], writable=False)
    assert buf.blocks.shape == (1000, 2)
    assert (buf.blocks[:, 1] == 24).all()
    assert (buf.blocks[:, 0] == np.arange(1000) * 64).all()
    assert buf.nbytes == 999 * 64 + 24


def test_exact_blocks_for_negative_and_transposed_strides():
    a = np.arange(10.0)
    buf = as_buffer(a[::-1], writable=False)
    assert buf.address == a.__array_interface__["data"][0]
    assert buf.blocks.tolist() == [[72 - 8 * i, 8] for i in range(10)]

    m = np.arange(12.0).reshape(3, 4)
    # m.T is Fortran-contiguous: its raw memory, one block, as mpi4py moves it.
    assert as_buffer(m.T, writable=False).blocks.tolist() == [[0, 96]]
    assert as_buffer(m.T[::2], writable=False).blocks[:, 0].tolist() == [0, 32, 64, 16, 48, 80]
    # Reversed rows keep each row as one positive-stride block.
    assert as_buffer(m[::-1], writable=False).blocks.tolist() == [[64, 32], [32, 32], [0, 32]]

    b = _i3[1:3, ::2, 1:4]  # rows of 3 int32 at (i, j) for i in 1..2, j in 0,2,4
    base = _i3[1, 0, 1:].__array_interface__["data"][0]
    buf = as_buffer(b, writable=False)
    assert buf.address == base
    assert buf.blocks.tolist() == [[i * 120 + j * 20, 12] for i in range(2) for j in (0, 2, 4)]


def test_zero_d_and_broadcast_blocks():
    assert as_buffer(np.array(2.5), writable=False).blocks.tolist() == [[0, 8]]
    buf = as_buffer(np.broadcast_to(np.arange(3.0), (4, 3)), writable=False)
    assert buf.blocks.tolist() == [[0, 24]] * 4 and buf.nbytes == 24 and buf.readonly


def test_strided_array_is_not_copied():
    a = np.zeros((6, 4))
    buf = as_buffer(a[:, 1:3], writable=True)
    ctypes.memset(buf.address + int(buf.blocks[2, 0]), 0xFF, 16)
    assert np.isnan(a[2, 1:3]).all() and (a[2, [0, 3]] == 0).all()
    assert buf.obj.base is a


def test_structured_arrays():
    mixed = np.zeros(4, dtype=np.dtype([("a", "i1"), ("b", "i4")], align=True))
    buf = as_buffer(mixed, writable=False)
    assert buf.dtype is None and buf.count == buf.size == 32
    gappy = np.zeros(2, dtype={"names": ["a", "b"], "formats": ["f4", "f4"],
                                "offsets": [0, 8], "itemsize": 12})
    buf = as_buffer(gappy, writable=False)
    assert buf.dtype is None and buf.count == 24
    pair = np.zeros(3, dtype=[("x", "f8"), ("y", "f8")])
    buf = as_buffer(pair[::2], writable=False)
    assert buf.dtype == np.float64 and buf.count == 4
    assert buf.blocks.tolist() == [[0, 16], [32, 16]]


def test_other_buffer_protocol_objects():
    ba = bytearray(range(10))
    buf = as_buffer(ba, writable=True)
    assert buf.dtype == np.uint8 and buf.count == 10 and buf.blocks.tolist() == [[0, 10]]
    assert gather(buf) == bytes(ba) and not buf.readonly

    b = bytes(range(7))
    buf = as_buffer(b, writable=False)
    assert buf.readonly and gather(buf) == b and buf.count == 7

    arr = array.array("i", range(6))
    buf = as_buffer(arr, writable=True)
    assert buf.dtype == np.int32 and buf.count == 6 and gather(buf) == arr.tobytes()

    a = np.arange(10.0)
    buf = as_buffer(memoryview(a)[::3], writable=False)
    assert buf.blocks.tolist() == [[0, 8], [24, 8], [48, 8], [72, 8]]
    assert gather(buf) == a[::3].tobytes()

    cd = (ctypes.c_double * 4)(1, 2, 3, 4)
    buf = as_buffer(cd, writable=True)
    assert buf.dtype == np.float64 and gather(buf) == bytes(cd)

    # A format numpy does not understand is moved as raw bytes.
    raw = memoryview(bytearray(range(16))).cast("P")
    buf = as_buffer(raw, writable=True)
    assert buf.dtype == np.uint8 and buf.size == 16 and gather(buf) == bytes(range(16))


def test_bytearray_export_is_held():
    ba = bytearray(8)
    buf = as_buffer(ba, writable=True)
    with pytest.raises(BufferError):
        ba.extend(b"xx")
    del buf


# -- read-only and invalid origins ---------------------------------------------


def test_readonly_buffers_rejected_when_writable():
    ro = np.arange(4.0)
    ro.flags.writeable = False
    for obj in (b"abcd", ro, memoryview(b"abcd"), [ro, MPI.DOUBLE], ro[::2]):
        with pytest.raises(ParamError, match="result buffer is read-only"):
            as_buffer(obj, writable=True, name="result")
        assert as_buffer(obj, writable=False).readonly


def test_zero_stride_rejected_when_writable():
    a = np.zeros(3)
    over = np.lib.stride_tricks.as_strided(a, shape=(4, 3), strides=(0, 8))
    with pytest.raises(ParamError, match="overlapping"):
        as_buffer(over, writable=True)
    assert as_buffer(over, writable=False).size == 96


@pytest.mark.parametrize(
    "obj, tname",
    [(5, "int"), ("abc", "str"), (None, "NoneType"), ({"a": 1}, "dict"), (object(), "object"),
     (3.5, "float")],
)
def test_non_buffers_rejected(obj, tname):
    with pytest.raises(ParamError, match=f"not {tname}"):
        as_buffer(obj, writable=False)


@pytest.mark.parametrize("spec, builtin, match", [
    ([1, 2, 3], TypeError, "origin must be a buffer .* not int"),
    ([1, MPI.INT], TypeError, "origin must be a buffer .* not int"),
    ([1.0, 2.0], TypeError, "origin must be a buffer .* not float"),
    ((), ValueError, r"2 to 4 items\), not a tuple of 0 items"),
    ([np.zeros(2)], ValueError, r"2 to 4 items\), not a list of 1 items"),
    ([np.zeros(2), 1, 2, 3, 4], ValueError, r"2 to 4 items\), not a list of 5 items"),
    ([np.zeros(2), 1, MPI.DOUBLE, 0], TypeError, "origin displacement must be an integer"),
    ([np.zeros(2), (1, 2, 3), MPI.DOUBLE], ValueError, r"\(count, displ\) must have 2 items"),
])
def test_lists_that_are_not_buffer_specs(spec, builtin, match):
    # mpi4py's message grammar, and its exception types.
    with pytest.raises(ParamError, match=match) as err:
        as_buffer(spec, writable=False)
    assert isinstance(err.value, builtin) and isinstance(err.value, MPI.Exception)


def test_object_arrays_rejected():
    with pytest.raises(DatatypeError, match="Python objects"):
        as_buffer(np.array([1, "a"], dtype=object), writable=False)


# -- buffer specs with counts and datatypes ------------------------------------


@pytest.mark.parametrize("dt", [MPI.DOUBLE, "f8", "d", np.float64, np.dtype("f8")])
def test_buf_datatype_infers_count(dt):
    x = np.arange(10.0)
    for spec in ([x, dt], (x, dt), [x, None, dt]):
        buf = as_buffer(spec, writable=False)
        assert buf.blocks.tolist() == [[0, 80]]
        assert buf.count == 10 and buf.dtype == np.float64 and buf.size == 80
        assert buf.type_count == 10 and buf.typemap.extent == 8


def test_buf_count_forms():
    x = np.arange(10.0)
    for spec in ([x, 4], (x, 4), [x, 4, MPI.DOUBLE], [x, 4, None], [x, np.int32(4), "f8"]):
        buf = as_buffer(spec, writable=False)
        assert buf.blocks.tolist() == [[0, 32]] and buf.count == 4 and buf.size == 32
    assert as_buffer([x, None], writable=False).size == 80
    assert as_buffer([x, 0], writable=False).blocks.shape == (0, 2)


def test_other_basic_type_reinterprets_memory():
    x = np.arange(10.0)
    buf = as_buffer([x, MPI.INT], writable=False)
    assert buf.dtype == np.int32 and buf.count == 20 and buf.blocks.tolist() == [[0, 80]]
    buf = as_buffer([x, 3, MPI.BYTE], writable=False)
    assert buf.dtype == np.uint8 and buf.count == 3 and buf.blocks.tolist() == [[0, 3]]


def test_derived_origin_replicates_typemap(freed):
    vec = committed(MPI.DOUBLE.Create_vector(3, 2, 4))  # extent 80
    freed.append(vec)
    x = np.arange(20.0)
    buf = as_buffer([x, vec], writable=False)
    assert buf.type_count == 2 and buf.size == 96 and buf.count == 12
    assert buf.dtype == np.float64 and buf.typemap is typemap(vec)
    assert buf.blocks.tolist() == [[0, 16], [32, 16], [64, 32], [112, 16], [144, 16]]
    assert gather(buf) == mpi_pack(vec, 2, x.view(np.uint8))
    assert gather(buf) == x[[0, 1, 4, 5, 8, 9, 10, 11, 14, 15, 18, 19]].tobytes()


def test_resized_origin_bounds_use_true_extent(freed):
    r = committed(MPI.DOUBLE.Create_resized(0, 32))
    freed.append(r)
    x = np.arange(5.0)
    buf = as_buffer([x, 2, r], writable=False)  # elements 0 and 4: fits 40 bytes
    assert buf.blocks.tolist() == [[0, 8], [32, 8]]
    assert gather(buf) == x[[0, 4]].tobytes()
    with pytest.raises(DatatypeError, match="40 bytes is not a multiple of the extent 32"):
        as_buffer([x, r], writable=False)


def test_origin_too_small():
    x = np.arange(10.0)
    with pytest.raises(BoundsError, match=r"origin buffer of 80 bytes is too small for count 11 "
                                          r"of MPI\.DOUBLE \(needs 88 bytes\)"):
        as_buffer([x, 11, MPI.DOUBLE], writable=False)
    with pytest.raises(BoundsError, match="too small for count 11 of numpy dtype float64"):
        as_buffer([x, 11], writable=False)
    with pytest.raises(BoundsError, match=r"80 bytes is too small for count 6 of "
                                          r"MPI\.C_DOUBLE_COMPLEX \(needs 96 bytes\)"):
        as_buffer([x, 6, MPI.C_DOUBLE_COMPLEX], writable=False)


def test_derived_origin_too_small_or_before_start(freed):
    vec = committed(MPI.DOUBLE.Create_vector(3, 2, 4))
    neg = committed(MPI.DOUBLE.Create_hindexed([1], [-8]))
    freed += [vec, neg]
    x = np.arange(20.0)
    with pytest.raises(BoundsError, match=r"160 bytes is too small for count 3 of derived "
                                          r"datatype \(VECTOR.*needs 240 bytes"):
        as_buffer([x, 3, vec], writable=False)
    with pytest.raises(BoundsError, match="reaches 8 bytes before the start of the origin"):
        as_buffer([x, 1, neg], writable=False)


def test_count_inference_must_divide():
    with pytest.raises(DatatypeError,
                       match=r"12 bytes is not a multiple of the extent 8 of MPI\.DOUBLE"):
        as_buffer([bytearray(12), MPI.DOUBLE], writable=False)


def test_bad_counts():
    x = np.arange(4.0)
    with pytest.raises(BoundsError, match="origin count -1 is negative"):
        as_buffer([x, -1, MPI.DOUBLE], writable=False)
    with pytest.raises(ParamError, match="origin count must be an integer, not float"):
        as_buffer([x, 2.0, MPI.DOUBLE], writable=False)
    with pytest.raises(ParamError, match="origin count must be an integer, not tuple"):
        as_buffer([x, ((2,), 0), MPI.DOUBLE], writable=False)
    with pytest.raises(BoundsError, match="origin displacement -1 is negative"):
        as_buffer([x, (2, -1), MPI.DOUBLE], writable=False)
    with pytest.raises(BoundsError, match=r"displacement 5 of .* is past the end of the 32-byte"):
        as_buffer([x, (0, 5), MPI.DOUBLE], writable=False)
    with pytest.raises(BoundsError, match="too small for count 3"):
        as_buffer([x, 3, 2, MPI.DOUBLE], writable=False)
    with pytest.raises(DatatypeError, match="'bogus' is not a datatype"):
        as_buffer([x, "bogus"], writable=False)


def test_strided_array_with_datatypes(freed):
    a = _f[:, :3]
    same = as_buffer([a, MPI.DOUBLE], writable=False)
    assert np.array_equal(same.blocks, as_buffer(a, writable=False).blocks)
    assert same.count == 3000
    first5 = as_buffer([a, 5, MPI.DOUBLE], writable=False)
    assert first5.blocks.tolist() == [[0, 24], [64, 16]]
    assert gather(first5) == a.ravel()[:5].tobytes()
    assert as_buffer((a, 4, "f8"), writable=False).blocks.tolist() == [[0, 24], [64, 8]]

    vec = committed(MPI.DOUBLE.Create_vector(2, 1, 2))
    pair = committed(MPI.DOUBLE.Create_contiguous(2))
    freed += [vec, pair]
    # A contiguous derived type counts whole pairs in raw memory.
    assert as_buffer([_f, 3, pair], writable=False).blocks.tolist() == [[0, 48]]
    for dt in (vec, pair, MPI.INT, MPI.BYTE, "f4", "2f8"):
        with pytest.raises(DatatypeError, match="non-contiguous array of float64"):
            as_buffer([a, dt], writable=False)


def test_fortran_array_with_datatypes():
    f = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    # Its own element type: the raw memory too, as without a datatype (mpi4py).
    assert gather(as_buffer([f, MPI.DOUBLE], writable=False)) == f.tobytes(order="F")
    assert gather(as_buffer(f, writable=False)) == f.tobytes(order="F")
    # Any other datatype sees the raw memory, as MPI does.
    raw = as_buffer([f, MPI.BYTE], writable=False)
    assert raw.blocks.tolist() == [[0, 48]] and gather(raw) == f.tobytes(order="F")


# -- device arrays ----------------------------------------------------------------


class FakeDeviceArray:
    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000001000, readonly=False):
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": typestr, "strides": strides,
            "data": (ptr, readonly), "version": 3,
        }


def test_device_arrays(fake_cuda):
    fake_cuda.device_addresses.add(0x7F0000001000)
    dev = FakeDeviceArray((4, 8))
    with pytest.raises(ParamError, match="device memory is not supported"):
        as_buffer(dev, writable=False)
    buf = as_buffer(dev, writable=True, allow_device=True)
    assert buf.device is True and buf.obj is dev
    assert buf.address == 0x7F0000001000 and buf.nbytes == 128
    assert buf.blocks.tolist() == [[0, 128]] and buf.dtype == np.float32 and buf.count == 32
    c_strides = FakeDeviceArray((4, 8), strides=(32, 4))
    assert as_buffer(c_strides, writable=False, allow_device=True).size == 128
    buf = as_buffer([dev, 3, MPI.DOUBLE], writable=False, allow_device=True)
    assert buf.blocks.tolist() == [[0, 24]] and buf.dtype == np.float64
    with pytest.raises(ParamError, match="non-contiguous device array"):
        as_buffer(FakeDeviceArray((4, 8), strides=(64, 4)), writable=False, allow_device=True)
    with pytest.raises(ParamError, match="read-only"):
        as_buffer(FakeDeviceArray((2,), readonly=True), writable=True, allow_device=True)


# -- typemaps: numpy dtypes --------------------------------------------------------


def test_numpy_dtype_typemaps():
    tm = typemap("f8")
    assert isinstance(tm, Typemap)
    assert tm.blocks.tolist() == [[0, 8]] and tm.extent == 8 and tm.size == 8
    assert tm.base == np.float64 and tm.contiguous
    assert typemap(np.float64) is typemap(np.float64)

    padded = typemap(np.dtype([("a", "i1"), ("b", "i4")], align=True))
    assert padded.blocks.tolist() == [[0, 1], [4, 4]]
    assert (padded.extent, padded.size, padded.base, padded.contiguous) == (8, 5, None, False)

    nested = typemap(np.dtype([("x", "f8"), ("y", "f8", (2,))]))
    assert nested.blocks.tolist() == [[0, 24]] and nested.base == np.float64 and nested.contiguous

    swapped = typemap(np.dtype({"names": ["a", "b"], "formats": ["f4", "f4"], "offsets": [4, 0]}))
    assert swapped.blocks.tolist() == [[4, 4], [0, 4]] and swapped.base == np.float32

    with pytest.raises(ValueError):
        tm.blocks[0, 0] = 1  # cached typemaps are immutable


def test_bad_numpy_dtypes():
    with pytest.raises(DatatypeError, match="Python objects"):
        typemap(object)
    with pytest.raises(DatatypeError, match="None is not a datatype"):
        typemap(None)
    with pytest.raises(DatatypeError, match="'nope' is not a datatype"):
        typemap("nope")
    with pytest.raises(DatatypeError, match="has no size"):
        typemap("S0")


# -- typemaps: predefined MPI datatypes --------------------------------------------

PREDEFINED = [
    (MPI.BYTE, "u1"), (MPI.CHAR, "S1"), (MPI.SIGNED_CHAR, "i1"), (MPI.UINT8_T, "u1"),
    (MPI.BOOL, "?"), (MPI.C_BOOL, "?"), (MPI.SHORT, "i2"), (MPI.INT, "i4"),
    (MPI.LONG, "l"), (MPI.LONG_LONG, "q"), (MPI.INT64_T, "i8"), (MPI.UNSIGNED, "u4"),
    (MPI.FLOAT, "f4"), (MPI.DOUBLE, "f8"), (MPI.C_FLOAT_COMPLEX, "c8"),
    (MPI.C_DOUBLE_COMPLEX, "c16"), (MPI.AINT, "i8"),
    # (value, index) pair types: packed records of their data bytes (MAXLOC / MINLOC).
    (MPI.TWOINT, {"names": ["value", "index"], "formats": ["i4", "i4"], "offsets": [0, 4], "itemsize": 8}),
]


@pytest.mark.parametrize("dt, npdt", PREDEFINED, ids=[d.Get_name() for d, _ in PREDEFINED])
def test_predefined_typemaps(dt, npdt):
    tm = typemap(dt)
    assert tm.blocks.tolist() == [[0, dt.size]]
    assert tm.extent == dt.extent and tm.size == dt.size and tm.contiguous
    assert tm.base == np.dtype(npdt)
    assert typemap(dt) is tm


def test_pair_and_unmapped_predefined_types():
    # A pair type's element is the packed record of its data bytes, in order.
    short_int = typemap(MPI.SHORT_INT)
    assert short_int.blocks.tolist() == [[0, 2], [4, 4]] and short_int.extent == 8
    assert not short_int.contiguous and short_int.base.names == ("value", "index")
    assert short_int.base.itemsize == 6 and short_int.base.fields["index"][1] == 2
    double_int = typemap(MPI.DOUBLE_INT)
    assert double_int.blocks.tolist() == [[0, 12]] and double_int.extent == 16
    assert double_int.size == MPI.DOUBLE_INT.size and double_int.base.itemsize == 12
    assert double_int.base["value"] == np.float64 and double_int.base["index"] == np.intc
    wchar = typemap(MPI.WCHAR)
    assert wchar.blocks.tolist() == [[0, MPI.WCHAR.size]] and wchar.base is None


# -- typemaps: derived MPI datatypes ------------------------------------------------


def _derived_cases():
    D, INT = MPI.DOUBLE, MPI.INT
    sub_c = np.arange(120).reshape(4, 5, 6)[1:3, 1:4, 3:5].ravel()
    sub_f = np.arange(120).reshape((4, 5, 6), order="F")[1:3, 1:4, 3:5].ravel(order="F")
    vec = D.Create_vector(3, 2, 4)
    r24 = D.Create_resized(0, 24)
    cases = {
        # name: (datatype, element indices in units of 8 bytes, itemsize) or exact blocks
        "contiguous": (D.Create_contiguous(5), range(5), 8, 40),
        "vector": (D.Create_vector(3, 2, 4), [0, 1, 4, 5, 8, 9], 8, 80),
        "hvector": (INT.Create_hvector(3, 1, 20), [0, 5, 10], 4, 44),
        "indexed": (D.Create_indexed([2, 1, 3], [5, 0, 9]), [5, 6, 0, 9, 10, 11], 8, 96),
        # lb is the lowest offset (4 bytes), so these extents are ub - 4.
        "hindexed": (INT.Create_hindexed([1, 2], [4, 16]), [1, 4, 5], 4, 20),
        "indexed_block": (INT.Create_indexed_block(2, [6, 1, 3]), [6, 7, 1, 2, 3, 4], 4, 28),
        "hindexed_block": (D.Create_hindexed_block(1, [16, 0, 8]), [2, 0, 1], 8, 24),
        "subarray_c": (D.Create_subarray([4, 5, 6], [2, 3, 2], [1, 1, 3]), sub_c, 8, 960),
        "subarray_f": (D.Create_subarray([4, 5, 6], [2, 3, 2], [1, 1, 3],
                                         order=MPI.ORDER_FORTRAN), sub_f, 8, 960),
        "contig_of_vector": (vec.Create_contiguous(2), [0, 1, 4, 5, 8, 9, 10, 11, 14, 15, 18, 19],
                             8, 160),
        "vector_of_resized": (r24.Create_contiguous(3), [0, 3, 6], 8, 72),
        "resized_vector": (vec.Create_resized(0, 120), [0, 1, 4, 5, 8, 9], 8, 120),
        "struct_one_base": (MPI.Datatype.Create_struct([2, 1], [0, 32], [D, D]), [0, 1, 4], 8, 40),
        "dup_vector": (vec.Dup(), [0, 1, 4, 5, 8, 9], 8, 80),
        "vector_of_indexed": (D.Create_indexed([1, 1], [0, 2]).Create_vector(2, 1, 2),
                              [0, 2, 6, 8], 8, 72),
    }
    vec.Free()
    r24.Free()
    return cases


@pytest.fixture(scope="module")
def derived():
    cases = _derived_cases()
    for dt, *_ in cases.values():
        dt.Commit()
    yield cases
    for dt, *_ in cases.values():
        dt.Free()


DERIVED_NAMES = [
    "contiguous", "vector", "hvector", "indexed", "hindexed", "indexed_block", "hindexed_block",
    "subarray_c", "subarray_f", "contig_of_vector", "vector_of_resized", "resized_vector",
    "struct_one_base", "dup_vector", "vector_of_indexed",
]


@pytest.mark.parametrize("name", DERIVED_NAMES)
def test_derived_typemap_matches_reference(derived, name):
    dt, indices, itemsize, extent = derived[name]
    tm = typemap(dt)
    assert np.array_equal(tm.blocks, elem_blocks(indices, itemsize))
    assert tm.extent == extent == dt.extent
    assert tm.size == dt.size == len(list(indices)) * itemsize
    assert tm.base == (np.float64 if itemsize == 8 else np.int32)
    assert typemap(dt) is tm


@pytest.mark.parametrize("name", DERIVED_NAMES)
@pytest.mark.parametrize("count", [1, 3])
def test_derived_blocks_match_mpi_pack(derived, name, count):
    dt = derived[name][0]
    src = np.random.default_rng(7).integers(0, 1 << 62, size=4096).view(np.uint8)
    blocks = typemap(dt).replicate(count)
    assert gather_from(src.tobytes(), blocks) == mpi_pack(dt, count, src)


def test_mixed_struct_and_negative_offsets(freed):
    s = committed(MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]))
    v = committed(MPI.DOUBLE.Create_vector(3, 1, -2))
    nested = committed(MPI.Datatype.Create_struct([2, 1], [0, 40], [s, MPI.SHORT]))
    freed += [s, v, nested]
    tm = typemap(s)
    assert tm.blocks.tolist() == [[0, 4], [8, 8]] and tm.extent == 16 and tm.base is None
    src = np.arange(100, dtype=np.uint8)
    assert gather_from(src.tobytes(), tm.replicate(2)) == mpi_pack(s, 2, src)
    assert typemap(v).blocks.tolist() == [[0, 8], [-16, 8], [-32, 8]]
    assert typemap(nested).blocks.tolist() == [[0, 4], [8, 12], [24, 8], [40, 2]]
    assert typemap(nested).size == nested.size


def test_derived_errors(freed):
    with pytest.raises(DatatypeError, match="DATATYPE_NULL"):
        typemap(MPI.DATATYPE_NULL)
    raw = MPI.DOUBLE.Create_vector(2, 1, 2)
    freed.append(raw)
    # The commit check relies on MPICH validating it in MPI_Pack_size.
    if MPI.get_vendor()[0] == "MPICH":
        with pytest.raises(DatatypeError, match=r"derived datatype \(VECTOR, handle "
                                                r"0x[0-9a-f]+\) is not committed"):
            typemap(raw)
    raw.Commit()
    assert typemap(raw).size == 16
    darray = committed(MPI.DOUBLE.Create_darray(1, 0, [8], [MPI.DISTRIBUTE_BLOCK],
                                                [MPI.DISTRIBUTE_DFLT_DARG], [1]))
    freed.append(darray)
    with pytest.raises(DatatypeError, match="DARRAY datatypes are not supported"):
        typemap(darray)
    bad_child = committed(MPI.Datatype.Create_struct([1], [0], [darray]))
    freed.append(bad_child)
    with pytest.raises(DatatypeError, match="DARRAY"):
        typemap(bad_child)


def test_cache_survives_handle_reuse():
    # MPICH hands out freed handles again: a cache keyed by handle alone
    # would return the previous type's layout.
    for n in range(1, 6):
        t = committed(MPI.DOUBLE.Create_vector(n, 1, 2))
        try:
            assert typemap(t).blocks.tolist() == [[16 * i, 8] for i in range(n)]
        finally:
            t.Free()


# -- targets ---------------------------------------------------------------------


def test_target_plain_forms():
    origin = as_buffer(np.arange(10.0), writable=False)
    start, blocks, dtype, size = target_blocks(None, origin, 8)
    assert (start, blocks.tolist(), dtype, size) == (0, [[0, 80]], np.float64, 80)
    for target in (3, np.int64(3), np.uint16(3), (3,), [3], (3, 10), [3, 10], (3, None, None)):
        start, blocks, dtype, size = target_blocks(target, origin, 8)
        assert (start, blocks.tolist(), dtype, size) == (24, [[24, 80]], np.float64, 80)
    assert target_blocks(5, origin, 1)[1].tolist() == [[5, 80]]


def test_target_with_datatype(freed):
    origin = as_buffer(np.arange(10.0), writable=False)
    ints = as_buffer(np.arange(20, dtype=np.int32), writable=False)  # MPI.INT takes int32 (type matching)
    start, blocks, dtype, size = target_blocks((2, 20, MPI.INT), ints, 4)
    assert (start, blocks.tolist(), dtype, size) == (8, [[8, 80]], np.int32, 80)
    assert target_blocks((0, None, MPI.INT), ints, 1)[3] == 80
    assert target_blocks((0, 10, "f8"), origin, 1)[1].tolist() == [[0, 80]]

    vec = committed(MPI.DOUBLE.Create_vector(3, 2, 4))
    freed.append(vec)
    small = as_buffer(np.arange(6.0), writable=False)
    start, blocks, dtype, size = target_blocks((2, 1, vec), small, 8)
    assert start == 16 and dtype == np.float64 and size == 48
    assert blocks.tolist() == [[16, 16], [48, 16], [80, 16]]
    start, blocks, _, _ = target_blocks([0, 2, vec], as_buffer(np.arange(12.0), writable=False), 1)
    assert blocks.tolist() == [[0, 16], [32, 16], [64, 32], [112, 16], [144, 16]]


def test_target_reuses_origin_datatype(freed):
    vec = committed(MPI.DOUBLE.Create_vector(3, 2, 4))
    freed.append(vec)
    origin = as_buffer([np.arange(20.0), 2, vec], writable=False)
    assert target_blocks(None, origin, 8)[1].tolist() == [
        [0, 16], [32, 16], [64, 32], [112, 16], [144, 16]]
    assert target_blocks(1, origin, 8)[1].tolist() == [
        [8, 16], [40, 16], [72, 32], [120, 16], [152, 16]]
    with pytest.raises(DatatypeError, match="target describes 48 bytes but origin has 96 bytes"):
        target_blocks((0, 1), origin, 8)


def test_target_size_mismatch():
    origin = as_buffer(np.arange(10.0), writable=False)
    with pytest.raises(DatatypeError, match="target describes 40 bytes but origin has 80 bytes"):
        target_blocks((0, 5), origin, 8)
    with pytest.raises(DatatypeError, match="target describes 44 bytes but origin has 80 bytes"):
        target_blocks((0, 11, MPI.INT), as_buffer(np.arange(20, dtype=np.int32), writable=False), 8)
    with pytest.raises(DatatypeError, match="cannot infer target count"):
        target_blocks((0, None, "c16"), as_buffer(bytes(24), writable=False), 8)  # raw bytes: any type


@pytest.mark.parametrize(
    "target, exc, match",
    [(-1, BoundsError, "target displacement -1 is negative"),
     ((-4, 10), BoundsError, "target displacement -4 is negative"),
     ((0, -1), BoundsError, "target count -1 is negative"),
     (1.5, ParamError, "not float"),
     ("3", ParamError, "not str"),
     ((1.0, 10), ParamError, "displacement must be an integer, not float"),
     (True, ParamError, "not bool"),
     ((0, 2.0), ParamError, "target count must be an integer, not float"),
     ((0, 1, 2, 3), ParamError, "not tuple"),
     ((), ParamError, "not tuple"),
     ((0, 10, "bogus"), DatatypeError, "'bogus' is not a datatype"),
     ((0, 1, MPI.DATATYPE_NULL), DatatypeError, "DATATYPE_NULL")],
)
def test_target_errors(target, exc, match):
    origin = as_buffer(np.arange(10.0), writable=False)
    with pytest.raises(exc, match=match):
        target_blocks(target, origin, 8)


def test_target_before_window_start(freed):
    neg = committed(MPI.DOUBLE.Create_hindexed([1], [-8]))
    freed.append(neg)
    origin = as_buffer(np.arange(1.0), writable=False)
    with pytest.raises(BoundsError, match="reaches 8 bytes before the window start"):
        target_blocks((0, 1, neg), origin, 8)
    assert target_blocks((1, 1, neg), origin, 8)[1].tolist() == [[0, 8]]


def test_empty_origin_target():
    origin = as_buffer(np.zeros(0), writable=False)
    start, blocks, _, size = target_blocks(4, origin, 8)
    assert start == 32 and blocks.shape == (0, 2) and size == 0


# -- origin and target blocks paired into engine descriptors -------------------

def _byte_pairs(descs):
    """(origin address, target address) of every byte the descriptors move."""
    return [(lo + k, ro + k) for lo, ro, ln in descs.astype(np.int64).tolist() for k in range(ln)]


def _stream(blocks, base):
    return [base + off + k for off, ln in blocks.tolist() for k in range(ln)]


@pytest.mark.parametrize("oblocks,tblocks", [
    ([[0, 12]], [[0, 4], [8, 4], [20, 4]]),            # contiguous origin, scattered target
    ([[3, 2], [9, 6], [30, 4]], [[100, 12]]),         # scattered origin, contiguous target
    ([[0, 12]], [[0, 0], [8, 6], [20, 0], [40, 6]]),  # empty target blocks make no descriptor
    ([[0, 5], [10, 7]], [[0, 3], [6, 9]]),            # both scattered: cut where either ends
])
def test_pair_blocks_moves_byte_i_to_byte_i(oblocks, tblocks):
    from hixl_rma.window.core import pair_blocks
    ob, tb = np.array(oblocks, np.int64), np.array(tblocks, np.int64)
    descs = pair_blocks(ob, 1000, tb, 50_000)
    assert descs.dtype == np.uint64 and descs.shape[1] == 3
    assert (descs[:, 2] > 0).all()
    assert _byte_pairs(descs) == list(zip(_stream(ob, 1000), _stream(tb, 50_000), strict=True))
