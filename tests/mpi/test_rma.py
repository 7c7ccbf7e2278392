"""Put, Get, Rput, Rget: every target form, dtypes, counts, non-contiguous
origins, derived target datatypes, requests and one transfer over 64 MiB.

Each rank writes to and reads from its ring neighbour ``right``, so every
test means the same at any number of ranks.
"""
import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import Request, Win

from support.mpiutil import barrier, pattern

# "thread": a rank stuck in a collective is stopped (and mpiexec ends the job)
# rather than left out of step with the others.
pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

# numpy dtype -> the mpi4py predefined datatype of the same layout
MPI_TYPES = {
    "int8": MPI.INT8_T, "int16": MPI.SHORT, "int32": MPI.INT, "int64": MPI.INT64_T,
    "uint8": MPI.UINT8_T, "uint16": MPI.UNSIGNED_SHORT, "uint32": MPI.UNSIGNED,
    "uint64": MPI.UINT64_T, "float32": MPI.FLOAT, "float64": MPI.DOUBLE,
    "complex128": MPI.C_DOUBLE_COMPLEX,
}
DTYPES = list(MPI_TYPES)
COUNTS = range(10)
WIN_LEN = 16   # elements per rank
DISP = 3       # where the forms with a displacement write


def _forms():
    """(name, origin(arr, n, dt), target(n, dt), displacement written)."""
    return {
        "none": (lambda a, n, dt: a, lambda n, dt: None, 0),
        "int": (lambda a, n, dt: a, lambda n, dt: DISP, DISP),
        "disp1": (lambda a, n, dt: a, lambda n, dt: (DISP,), DISP),
        "disp_count": (lambda a, n, dt: a, lambda n, dt: (DISP, n), DISP),
        "disp_count_dtype": (lambda a, n, dt: a, lambda n, dt: (DISP, n, np.dtype(dt)), DISP),
        "disp_count_mpitype": (lambda a, n, dt: a, lambda n, dt: (DISP, n, MPI_TYPES[dt]), DISP),
        "spec2_mpitype": (lambda a, n, dt: [a, MPI_TYPES[dt]],
                          lambda n, dt: (DISP, n, MPI_TYPES[dt]), DISP),
        # [buf, count, datatype] naming only the first n of a longer buffer
        "spec3_count": (lambda a, n, dt: [np.concatenate([a, a]), n, MPI_TYPES[dt]],
                        lambda n, dt: DISP, DISP),
    }


FORMS = _forms()


def _fill(dt):
    """The sentinel a window starts with (pattern() never produces it)."""
    return 0 if np.dtype(dt).kind == "u" else -5


@pytest.mark.core
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("dt", DTYPES)
def test_put_get_target_forms(comm, rank, left, right, dt, form):
    make_origin, make_target, disp = FORMS[form]
    buf = np.full(WIN_LEN, _fill(dt), dtype=dt)
    win = Win.Create(buf, disp_unit=buf.itemsize, comm=comm)
    failures = []
    for n in COUNTS:
        buf[:] = _fill(dt)
        mine = pattern(n, rank, dt, salt=n)
        back = np.zeros(n, dtype=dt)
        win.Fence()
        win.Put(make_origin(mine, n, dt), right, make_target(n, dt))
        win.Fence()
        want = np.full(WIN_LEN, _fill(dt), dtype=dt)
        want[disp:disp + n] = pattern(n, left, dt, salt=n)
        if not np.array_equal(buf, want):
            failures.append(f"Put count {n}: window {buf.tolist()} != {want.tolist()}")
        win.Get(make_origin(back, n, dt) if form != "spec3_count" else [back, n, MPI_TYPES[dt]],
                right, make_target(n, dt))
        win.Fence()
        if not np.array_equal(back, mine):
            failures.append(f"Get count {n}: {back.tolist()} != {mine.tolist()}")
    win.Free()
    assert not failures


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "bytes_origin"])
def test_buffer_protocol_origins(comm, rank, left, right, kind):
    buf = np.zeros(32, np.uint8)
    win = Win.Create(buf, comm=comm)
    data = bytes(pattern(10, rank, np.uint8))
    origin = {"bytearray": bytearray(data), "memoryview": memoryview(bytearray(data)),
              "bytes_origin": data}[kind]
    win.Fence()
    win.Put(origin, right, 5)
    win.Fence()
    got = bytearray(10)
    win.Get(got if kind != "memoryview" else memoryview(got), right, 5)
    win.Fence()
    win.Free()
    assert bytes(buf[5:15]) == bytes(pattern(10, left, np.uint8))
    assert not buf[:5].any() and not buf[15:].any()
    assert bytes(got) == data


@pytest.mark.core
def test_put_get_self_and_proc_null(comm, rank):
    buf = np.zeros(8, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Fence()
    win.Put(pattern(4, rank), rank, 2)
    win.Put(pattern(4, rank), MPI.PROC_NULL, 0)    # no-op, as in MPI
    win.Fence()
    out = np.zeros(4, np.int64)
    win.Get(out, rank, 2)
    win.Get(out[:2], hixl_rma.PROC_NULL, 0)
    win.Fence()
    win.Free()
    np.testing.assert_array_equal(buf, np.r_[0, 0, pattern(4, rank), 0, 0])
    np.testing.assert_array_equal(out, pattern(4, rank))


@pytest.mark.core
def test_put_holds_the_origin_export_while_the_engine_reads_it(comm, rank, left, right):
    """A Put the engine completes at the flush (UCX's) keeps its origin's
    buffer export until then, on the hot path as on the slow one: a
    bytearray cannot resize (BufferError) and so cannot leave the engine
    reading freed memory. A Put the engine completed within the call (a
    same-node system call) keeps nothing: the origin is the user's again at
    once and the target already has the bytes. Either way, after the Flush
    the origin can resize and the target has the Put's bytes
    (tests/test_origin_hold.py runs both engine paths)."""
    mem = np.zeros(1 << 16, np.uint8)
    win = Win.Create(mem, comm=comm)  # user memory: not mapped, every Put goes to the engine
    origin = bytearray(b"\x07" * (1 << 16))
    win.Lock(right)
    win.Put(bytes(1), right)  # the first Put to a target readies the hot path
    win.Flush(right)
    win.Put(origin, right)    # the hot path's
    in_flight = win._core.is_dirty(right)
    try:
        origin.extend(b"\x01" * (1 << 20))
        resized_before_flush = True
    except BufferError:
        resized_before_flush = False
    win.Flush(right)
    origin.extend(b"\x01" * (1 << 20))  # completed: the export is gone
    win.Unlock(right)
    barrier(comm)
    win.Free()
    assert resized_before_flush is not in_flight
    assert (mem == 7).all()


# ------------------------------------------------------- non-contiguous origins

VIEWS = {
    "strided_1d": lambda a: a.ravel()[::3],
    "columns": lambda m: m[:, ::2],
    "transposed": lambda m: m.T,
    "reversed_rows": lambda m: m[::-1, 1:5],
    "sub_block": lambda m: m[1:3, 2:5],
    "negative_1d": lambda a: a.ravel()[::-2],
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_noncontiguous_origin_put(comm, rank, left, right, view):
    buf = np.full(32, -1, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    mine = (np.arange(24, dtype=np.int64) + 100 * rank).reshape(4, 6)
    origin = VIEWS[view](mine)
    assert not origin.flags.c_contiguous
    # A Fortran-contiguous view (the transpose) moves its raw memory, as
    # mpi4py; the others move in logical C order. order="A" is exactly that.
    n = origin.size
    win.Fence()
    win.Put(origin, right, 1)
    win.Fence()
    win.Free()
    theirs = VIEWS[view]((np.arange(24, dtype=np.int64) + 100 * left).reshape(4, 6))
    want = np.full(32, -1, np.int64)
    want[1:1 + n] = theirs.ravel(order="A")
    np.testing.assert_array_equal(buf, want)


@pytest.mark.parametrize("view", list(VIEWS))
def test_noncontiguous_origin_get(comm, rank, right, view):
    buf = np.arange(32, dtype=np.int64) + 1000 * rank
    win = Win.Create(buf, disp_unit=8, comm=comm)
    dest = np.full((4, 6), -1, np.int64)
    target_view = VIEWS[view](dest)
    n = target_view.size
    win.Fence()
    win.Get(target_view, right, 2)
    win.Fence()
    win.Free()
    want = np.full((4, 6), -1, np.int64)
    order = "F" if target_view.flags.f_contiguous else "C"  # raw memory for a Fortran-contiguous view
    VIEWS[view](want)[...] = (np.arange(2, 2 + n, dtype=np.int64) + 1000 * right).reshape(
        target_view.shape, order=order)
    np.testing.assert_array_equal(dest, want)


# ----------------------------------------------------- derived target datatypes

def _vector():
    dt = MPI.DOUBLE.Create_vector(3, 2, 5).Commit()
    idx = (np.arange(3)[:, None] * 5 + np.arange(2)).ravel()
    return dt, idx, 12  # extent in elements


def _indexed():
    dt = MPI.DOUBLE.Create_indexed([2, 1, 3], [0, 5, 9]).Commit()
    return dt, np.array([0, 1, 5, 9, 10, 11]), 12


def _subarray():
    dt = MPI.DOUBLE.Create_subarray([4, 6], [2, 3], [1, 2]).Commit()
    return dt, np.arange(24).reshape(4, 6)[1:3, 2:5].ravel(), 24


DERIVED = {"vector": _vector, "indexed": _indexed, "subarray": _subarray}


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("disp", [0, 5])
@pytest.mark.parametrize("kind", list(DERIVED))
def test_derived_target_datatype(comm, rank, left, right, kind, disp, count):
    dt, idx, extent = DERIVED[kind]()
    positions = np.concatenate([idx + k * extent for k in range(count)]) + disp
    buf = np.full(64, -1.0)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    mine = pattern(len(positions), rank, np.float64, salt=count)
    back = np.zeros(len(positions))
    win.Fence()
    win.Put(mine, right, (disp, count, dt))
    win.Fence()
    got = buf.copy()
    win.Get(back, right, (disp, count, dt))
    win.Fence()
    win.Free()
    dt.Free()
    want = np.full(64, -1.0)
    want[positions] = pattern(len(positions), left, np.float64, salt=count)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(back, mine)


def test_derived_origin_datatype(comm, rank, left, right):
    """A vector on the origin side, a contiguous run at the target."""
    dt, idx, _ = _vector()
    src = np.arange(20, dtype=np.float64) + 100 * rank
    buf = np.full(16, -1.0)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Fence()
    win.Put([src, 1, dt], right, (2, 6, MPI.DOUBLE))
    win.Fence()
    dest = np.full(20, -1.0)
    win.Get([dest, 1, dt], right, (2, 6, MPI.DOUBLE))
    win.Fence()
    win.Free()
    dt.Free()
    want = np.full(16, -1.0)
    want[2:8] = (np.arange(20, dtype=np.float64) + 100 * left)[idx]
    np.testing.assert_array_equal(buf, want)
    want_dest = np.full(20, -1.0)
    want_dest[idx] = src[idx]
    np.testing.assert_array_equal(dest, want_dest)


# ------------------------------------------------------------------- requests

@pytest.mark.core
def test_rput_rget_waitall_test(comm, rank, left, right):
    buf = np.zeros(12, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Lock(right, hixl_rma.LOCK_SHARED)
    reqs = [win.Rput(pattern(4, rank, salt=i), right, (4 * i, 4)) for i in range(3)]
    assert all(isinstance(r, Request) for r in reqs)
    assert Request.Waitall(reqs)
    assert all(r.Test() for r in reqs)
    win.Unlock(right)
    barrier(comm)
    got_put = buf.copy()
    barrier(comm)
    outs = [np.zeros(4, np.int64) for _ in range(3)]
    win.Lock(right, hixl_rma.LOCK_SHARED)
    reqs = [win.Rget(outs[i], right, 4 * i) for i in range(3)]
    reqs[0].Wait()
    while not reqs[1].Test():
        pass
    Request.Waitall(reqs[2:])
    win.Unlock(right)
    win.Free()
    np.testing.assert_array_equal(got_put, np.concatenate([pattern(4, left, salt=i) for i in range(3)]))
    for i in range(3):
        np.testing.assert_array_equal(outs[i], pattern(4, rank, salt=i))


def test_rput_rget_in_fence_epoch(comm, rank, left, right):
    buf = np.zeros(6, np.float64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Fence()
    req = win.Rput(pattern(6, rank, np.float64), right)
    req.Wait()
    win.Fence()
    got = buf.copy()
    out = np.zeros(3)
    req = win.Rget(out, right, (3, 3, MPI.DOUBLE))
    req.Wait()
    win.Fence()
    zero = win.Rget(np.zeros(0), right)    # zero count: complete at once
    assert zero.Test()
    win.Fence()
    win.Free()
    np.testing.assert_array_equal(got, pattern(6, left, np.float64))
    np.testing.assert_array_equal(out, pattern(6, rank, np.float64)[3:])


def test_requests_with_noncontiguous_origins(comm, rank, left, right):
    """Rput from and Rget into strided views: one batch of blocks each."""
    buf = np.full(24, -1, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    src = (np.arange(24, dtype=np.int64) + 100 * rank).reshape(4, 6)
    dest = np.full((4, 6), -2, np.int64)
    win.Fence()
    req = win.Rput(src[:, ::2], right, 0)
    assert req.Wait()
    win.Fence()
    got = buf.copy()
    req = win.Rget(dest.T[::2], right, 0)     # 3 x 4 view, strides (16, 48)
    Request.Waitall([req])
    win.Fence()
    win.Free()
    want = np.full(24, -1, np.int64)
    want[:12] = ((np.arange(24, dtype=np.int64) + 100 * left).reshape(4, 6))[:, ::2].ravel()
    np.testing.assert_array_equal(got, want)
    want_dest = np.full((4, 6), -2, np.int64)
    want_dest.T[::2] = (np.arange(24, dtype=np.int64) + 100 * rank).reshape(4, 6)[:, ::2] \
        .ravel().reshape(3, 4)
    np.testing.assert_array_equal(dest, want_dest)


# -------------------------------------------------------------- large transfer

def test_put_over_64_mib(comm, rank, left, right):
    n = (65 << 20) + 8
    buf = np.zeros(n, np.uint8)
    win = Win.Create(buf, comm=comm)
    src = np.resize(np.arange(251, dtype=np.uint8) + rank, n)  # 251: prime, so no 2^k period
    barrier(comm)
    win.Lock(right, hixl_rma.LOCK_EXCLUSIVE)
    win.Put(src, right)
    win.Unlock(right)
    barrier(comm)
    win.Free()
    want = np.resize(np.arange(251, dtype=np.uint8) + left, n)
    assert np.array_equal(buf, want)
