"""Type matching, as MPI defines it for RMA: where the origin and the target
both carry typed basic datatypes they must be the same basic type; untyped
bytes move into any target.

A mismatch (INT32 into INT64, FLOAT into DOUBLE, ...) is a DatatypeError
(an ``MPI.Exception`` of class ``ERR_TYPE``, as MPICH raises for the
accumulates) that names both types, the rank, the window, the target offset
and the bytes, raised by the call itself before any byte moves: every rank
then finds its window (and a Get's origin) unchanged. Each case runs after
a first transfer to the target, so that the hot path (mapped targets) sees
it as well as the Python layer; on every window kind the hot path takes.

Untyped origins (bytes, bytearray, ``MPI.BYTE``, and numpy uint8, which
mpi4py cannot tell from bytes: all three are format "B", MPI's
UNSIGNED_CHAR) move into a target of any type as raw bytes, a typed origin
into an ``MPI.BYTE`` target likewise, and the receiving side may be the
larger one.
"""
import re

import numpy as np
import pytest
from mpi4py import MPI

from hixl_rma import DatatypeError, HixlError, Win

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(120, method="thread")]

N = 8  # int64 elements per window (disp_unit 8)


def initial(rank):
    return np.arange(N, dtype=np.int64) * 10 + 1000 * (rank + 1)


def _window(kind, comm):
    if kind == "create":
        win = Win.Create(initial(comm.Get_rank()), 8, None, comm)
    else:
        win = Win.Allocate(N * 8, 8, None, comm)
        np.frombuffer(win.tomemory(), np.int64)[:] = initial(comm.Get_rank())
    barrier(comm)
    return win


def local(win):
    return np.frombuffer(win.tomemory(), np.int64)


def _warm(win, right):
    """A first legal transfer to ``right`` (rewriting what it holds): the
    target is connected and mapped, so the next calls take the hot path."""
    win.Put(initial(right), right, (0, N, MPI.INT64_T))
    win.Flush(right)


# (name, call(win, right) -> the operation, origin types named in the message, target type named)
def _arr(n, dtype):
    return np.arange(1, n + 1).astype(dtype)


MISMATCHES = [
    ("Put int32 into a larger INT64 target",
     lambda win, r: win.Put(_arr(4, np.int32), r, (0, 4, MPI.INT64_T)), "int32", "INT64_T", 16),
    ("Put int32 into INT64 of the same bytes",
     lambda win, r: win.Put(_arr(4, np.int32), r, (0, 2, MPI.INT64_T)), "int32", "INT64_T", 16),
    ("Put float32 into DOUBLE",
     lambda win, r: win.Put(_arr(2, np.float32), r, (1, 1, MPI.DOUBLE)), "float32", "DOUBLE", 8),
    ("Put float64 into FLOAT",
     lambda win, r: win.Put(_arr(2, np.float64), r, [2, 4, MPI.FLOAT]), "float64", "FLOAT", 16),
    ("Put int64 into DOUBLE",
     lambda win, r: win.Put(_arr(2, np.int64), r, (0, 2, MPI.DOUBLE)), "int64", "DOUBLE", 16),
    ("Put [int32 buffer, MPI.INT32_T] into INT64",
     lambda win, r: win.Put([_arr(4, np.int32), MPI.INT32_T], r, (0, 2, MPI.INT64_T)), "int32", "INT64_T", 16),
    ("Put a strided int32 view into INT64",
     lambda win, r: win.Put(_arr(8, np.int32)[::2], r, (0, 2, MPI.INT64_T)), "int32", "INT64_T", 16),
    ("Rput int32 into INT64",
     lambda win, r: win.Rput(_arr(4, np.int32), r, (0, 2, MPI.INT64_T)).Wait(), "int32", "INT64_T", 16),
    ("Accumulate int32 into INT64",
     lambda win, r: win.Accumulate(_arr(4, np.int32), r, (0, 2, MPI.INT64_T), MPI.SUM), "int32", "INT64_T", 16),
    ("Accumulate float64 into INT64",
     lambda win, r: win.Accumulate(_arr(2, np.float64), r, (0, 2, MPI.INT64_T), MPI.SUM), "float64", "INT64_T",
     16),
    ("Accumulate one int64 into UINT64",
     lambda win, r: win.Accumulate(_arr(1, np.int64), r, (0, 1, MPI.UINT64_T), MPI.SUM), "int64", "UINT64_T", 8),
    ("Get_accumulate int32 into INT64",
     lambda win, r: win.Get_accumulate(_arr(4, np.int32), np.zeros(4, np.int32), r, (0, 2, MPI.INT64_T),
                                       MPI.SUM), "int32", "INT64_T", 16),
    ("Get_accumulate one int64 into UINT64",
     lambda win, r: win.Get_accumulate(_arr(1, np.int64), np.zeros(1, np.int64), r, (0, 1, MPI.UINT64_T),
                                       MPI.SUM), "int64", "UINT64_T", 8),
    ("Get_accumulate int64 with a uint64 result",
     lambda win, r: win.Get_accumulate(_arr(1, np.int64), np.zeros(1, np.uint64), r, (0, 1, MPI.INT64_T),
                                       MPI.SUM), "int64", "uint64", 8),
    ("Rget_accumulate int64 with a float64 result",
     lambda win, r: win.Rget_accumulate(_arr(2, np.int64), np.zeros(2, np.float64), r, (0, 2, MPI.INT64_T),
                                        MPI.SUM).Wait(), "int64", "float64", 16),
    ("Fetch_and_op int64 with a uint64 result",
     lambda win, r: win.Fetch_and_op(_arr(1, np.int64), np.zeros(1, np.uint64), r, 0, MPI.SUM), "int64",
     "uint64", 8),
    ("Compare_and_swap int64 with a uint64 compare",
     lambda win, r: win.Compare_and_swap(_arr(1, np.int64), np.ones(1, np.uint64), np.zeros(1, np.int64), r, 0),
     "int64", "uint64", 8),
]

# A Get's origin receives: it must stay as it was.
GET_MISMATCHES = [
    ("Get int32 from INT64", lambda r, o: r.Get(o, r.right, (0, 2, MPI.INT64_T)), np.int32, 4, "int32", "INT64_T"),
    ("Get int32 into a larger origin", lambda r, o: r.Get(o, r.right, (0, 1, MPI.INT64_T)), np.int32, 4, "int32",
     "INT64_T"),
    ("Get float32 from DOUBLE", lambda r, o: r.Get(o, r.right, (0, 1, MPI.DOUBLE)), np.float32, 2, "float32",
     "DOUBLE"),
    ("Rget float64 from FLOAT", lambda r, o: r.Rget(o, r.right, (0, 4, MPI.FLOAT)).Wait(), np.float64, 2,
     "float64", "FLOAT"),
]


class _Get:
    def __init__(self, win, right):
        self.win, self.right = win, right

    def Get(self, *args):
        return self.win.Get(*args)

    def Rget(self, *args):
        return self.win.Rget(*args)


def _expect_mismatch(call, names, rank, nbytes):
    with pytest.raises(DatatypeError) as info:
        call()
    exc = info.value
    msg = str(exc)
    assert isinstance(exc, MPI.Exception) and exc.Get_error_class() == MPI.ERR_TYPE, repr(exc)
    for name in names:
        assert name in msg, f"{name!r} not named: {msg}"
    assert re.search(rf"\brank {rank}\b", msg), msg
    assert "window " in msg and f"{nbytes} bytes" in msg, msg
    if names[1].isupper():  # the target's type: where at the target
        assert "target offset" in msg, msg


@pytest.mark.parametrize("kind", ["create", "allocate"])
@pytest.mark.parametrize("case", MISMATCHES, ids=[c[0] for c in MISMATCHES])
def test_mismatch_raises_and_moves_nothing(comm, ring, kind, case):
    _, call, oname, tname, nbytes = case
    win = _window(kind, comm)
    try:
        win.Lock_all()
        try:
            _warm(win, ring.right)
            _expect_mismatch(lambda: call(win, ring.right), (oname, tname), ring.right, nbytes)
            win.Flush_all()
        finally:
            win.Unlock_all()
        barrier(comm)
        assert local(win).tolist() == initial(comm.Get_rank()).tolist(), "a refused call wrote to the target"
    finally:
        win.Free()


@pytest.mark.parametrize("kind", ["create", "allocate"])
@pytest.mark.parametrize("case", GET_MISMATCHES, ids=[c[0] for c in GET_MISMATCHES])
def test_get_mismatch_leaves_the_origin(comm, ring, kind, case):
    _, call, dtype, n, oname, tname = case
    win = _window(kind, comm)
    origin = np.full(n, 77, dtype)
    try:
        win.Lock_all()
        try:
            _warm(win, ring.right)
            with pytest.raises(DatatypeError) as info:
                call(_Get(win, ring.right), origin)
            for name in (oname, tname):
                assert name in str(info.value), str(info.value)
            assert re.search(rf"\brank {ring.right}\b", str(info.value)), str(info.value)
            win.Flush_all()
        finally:
            win.Unlock_all()
        assert origin.tolist() == [77] * n, "a refused Get wrote into its origin"
        barrier(comm)
        assert local(win).tolist() == initial(comm.Get_rank()).tolist()
    finally:
        win.Free()


def _raw(values):
    return np.asarray(values, np.int64).tobytes()


# (name, call(win, right), expected right's window afterwards from its initial values)
def _expect_first(values, start=0):
    def after(before):
        out = before.copy()
        out[start:start + len(values)] = values
        return out
    return after


LEGAL = [
    ("same type", lambda win, r: win.Put(np.array([5, 6], np.int64), r, (0, 2, MPI.INT64_T)),
     _expect_first([5, 6])),
    ("INT64_T and LONG are one type here", lambda win, r: win.Put(np.array([5, 6], np.int64), r, (1, 2, MPI.LONG)),
     _expect_first([5, 6], 1)),
    ("bytes into INT64", lambda win, r: win.Put(_raw([7, 8]), r, (0, 2, MPI.INT64_T)), _expect_first([7, 8])),
    ("bytearray into INT64", lambda win, r: win.Put(bytearray(_raw([9])), r, (3, 1, MPI.INT64_T)),
     _expect_first([9], 3)),
    ("[bytearray, MPI.BYTE] into INT64",
     lambda win, r: win.Put([bytearray(_raw([11, 12])), MPI.BYTE], r, (2, 2, MPI.INT64_T)), _expect_first([11, 12], 2)),
    ("numpy uint8 into INT64",
     lambda win, r: win.Put(np.frombuffer(_raw([13]), np.uint8).copy(), r, (4, 1, MPI.INT64_T)),
     _expect_first([13], 4)),
    ("int32 into an MPI.BYTE target",
     lambda win, r: win.Put(np.array([14, 0, 15, 0], np.int32), r, (0, 16, MPI.BYTE)), _expect_first([14, 15])),
    ("a larger receiving target", lambda win, r: win.Put(np.array([16, 17], np.int64), r, (5, 3, MPI.INT64_T)),
     _expect_first([16, 17], 5)),
    ("bytes into a larger INT64 target", lambda win, r: win.Put(_raw([18]), r, (6, 2, MPI.INT64_T)),
     _expect_first([18], 6)),
    ("Accumulate of the same type", lambda win, r: win.Accumulate(np.array([0, 0], np.int64), r, (0, 2, MPI.INT64_T),
                                                                  MPI.REPLACE), _expect_first([0, 0])),
]


@pytest.mark.parametrize("kind", ["create", "allocate"])
@pytest.mark.parametrize("case", LEGAL, ids=[c[0] for c in LEGAL])
def test_legal_moves_the_right_bytes(comm, ring, kind, case):
    _, call, after = case
    win = _window(kind, comm)
    try:
        win.Lock_all()
        try:
            _warm(win, ring.right)
            call(win, ring.right)
            win.Flush_all()
        finally:
            win.Unlock_all()
        barrier(comm)
        assert local(win).tolist() == after(initial(comm.Get_rank())).tolist()
    finally:
        win.Free()


@pytest.mark.parametrize("kind", ["create", "allocate"])
def test_legal_gets(comm, ring, kind):
    """Get of raw bytes from a typed target, and into a larger origin."""
    win = _window(kind, comm)
    try:
        want = initial(ring.right)
        raw = bytearray(16)
        larger = np.full(4, -1, np.int64)
        u8 = np.zeros(8, np.uint8)
        win.Lock_all()
        try:
            _warm(win, ring.right)
            win.Get(raw, ring.right, (1, 2, MPI.INT64_T))
            win.Get(larger, ring.right, (2, 2, MPI.INT64_T))
            win.Get(u8, ring.right, (3, 1, MPI.INT64_T))
            win.Flush_all()
        finally:
            win.Unlock_all()
        assert np.frombuffer(raw, np.int64).tolist() == want[1:3].tolist()
        assert larger.tolist() == [*want[2:4].tolist(), -1, -1]
        assert u8.view(np.int64).tolist() == want[3:4].tolist()
        barrier(comm)
    finally:
        win.Free()


def test_error_is_the_hixl_class(comm):
    """DatatypeError is a HixlError and mpi4py's MPI.Exception (ERR_TYPE), not
    a ValueError: mpi4py over MPICH raises MPI.Exception for a signature
    mismatch (its accumulates), and moves a mismatched Put silently."""
    assert issubclass(DatatypeError, HixlError) and issubclass(DatatypeError, MPI.Exception)
    assert not issubclass(DatatypeError, ValueError)
