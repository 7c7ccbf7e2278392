"""Bad input to RMA calls: the exact exception class, its status, a message
naming the rank, offset and length, no byte written at the target, and a
window that still works afterwards.
"""
import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import BoundsError, DatatypeError, EpochError, ParamError, Win
from hixl_rma.ground.errors import kind

from support.mpiutil import barrier, pattern

# "thread": a rank stuck in a collective is stopped (and mpiexec ends the job)
# rather than left out of step with the others.
pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

N = 10  # int64 elements per window (80 bytes), disp_unit 8


def _readonly(n):
    a = np.zeros(n, np.int64)
    a.flags.writeable = False
    return a


def _vector():
    return MPI.INT64_T.Create_vector(3, 1, 5).Commit()   # extent 11 elements = 88 bytes


# name -> (call(win, right, size, vec), exception class, message regex(right, size))
CASES = {
    "put_past_end": (
        lambda w, r, s, v: w.Put(np.ones(3, np.int64), r, 8), BoundsError,
        lambda r, s: rf"Put to rank {r} of window \S+: target offset 64 length 24 bytes "
                     rf"exceeds the window size 80 bytes"),
    "get_past_end": (
        lambda w, r, s, v: w.Get(np.zeros(3, np.int64), r, (9, 3)), BoundsError,
        lambda r, s: rf"Get to rank {r} of window \S+: target offset 72 length 24 bytes"),
    "rput_past_end": (
        lambda w, r, s, v: w.Rput(np.ones(11, np.int64), r), BoundsError,
        lambda r, s: rf"Rput to rank {r} of window \S+: target offset 0 length 88 bytes"),
    "negative_disp": (
        lambda w, r, s, v: w.Put(np.ones(3, np.int64), r, -1), BoundsError,
        lambda r, s: rf"Put to rank {r} of window \S+ \(24 bytes from the origin\): "
                     rf"target displacement -1 is negative"),
    "negative_disp_tuple": (
        lambda w, r, s, v: w.Get(np.zeros(3, np.int64), r, (-2, 3)), BoundsError,
        lambda r, s: rf"Get to rank {r} of window \S+ \(24 bytes from the origin\): "
                     rf"target displacement -2 is negative"),
    "origin_count_too_large": (
        lambda w, r, s, v: w.Put([np.ones(3, np.int64), 5, MPI.INT64_T], r, 0), BoundsError,
        lambda r, s: rf"Put to rank {r} of window \S+: origin buffer of 24 bytes is too small "
                     rf"for count 5 of MPI.INT64_T \(needs 40 bytes\)"),
    "target_count_too_small": (
        lambda w, r, s, v: w.Put(np.ones(3, np.int64), r, (0, 2)), BoundsError,
        lambda r, s: rf"Put to rank {r} of window \S+ \(24 bytes from the origin\): "
                     rf"target describes 16 bytes, fewer than the 24 bytes the origin sends"),
    "get_origin_too_small": (
        lambda w, r, s, v: w.Get(np.zeros(2, np.int64), r, (0, 3)), BoundsError,
        lambda r, s: rf"Get to rank {r} of window \S+ \(16 bytes from the origin\): "
                     rf"origin holds 16 bytes, fewer than the 24 bytes the target describes"),
    "target_datatype_beyond_window": (
        lambda w, r, s, v: w.Put(np.ones(3, np.int64), r, (0, 1, v)), BoundsError,
        lambda r, s: rf"Put to rank {r} of window \S+: target offset 0 length 88 bytes "
                     rf"exceeds the window size 80 bytes"),
    "target_datatype_displaced": (
        lambda w, r, s, v: w.Get(np.zeros(3, np.int64), r, (2, 1, v)), BoundsError,
        lambda r, s: rf"Get to rank {r} of window \S+: target offset 16 length 88 bytes"),
    "target_type_too_small": (
        # the same basic type on both sides: a mismatch is refused first (test_type_match.py)
        lambda w, r, s, v: w.Put(np.ones(3, np.int32), r, (0, 2, MPI.INT)), BoundsError,
        lambda r, s: rf"Put to rank {r} of window \S+ \(12 bytes from the origin\): "
                     rf"target describes 8 bytes, fewer than the 12 bytes the origin sends"),
    "not_a_datatype": (
        lambda w, r, s, v: w.Put(np.ones(3, np.int64), r, (0, 3, "bogus")), DatatypeError,
        lambda r, s: rf"Put to rank {r} of window \S+ .*'bogus' is not a datatype"),
    "strided_origin_with_other_type": (
        lambda w, r, s, v: w.Put([np.ones(6, np.int64)[::2], MPI.INT], r, 0), DatatypeError,
        lambda r, s: rf"Put to rank {r} of window \S+: origin is a non-contiguous array of int64"),
    "rank_out_of_range": (
        lambda w, r, s, v: w.Put(np.ones(3, np.int64), s, 0), ParamError,
        lambda r, s: rf"Put on window \S+: rank {s} is out of range for a communicator of {s} ranks"),
    "negative_rank": (
        lambda w, r, s, v: w.Get(np.zeros(3, np.int64), -5, 0), ParamError,
        lambda r, s: r"Get on window \S+: rank -5 is out of range"),
    "str_origin": (
        lambda w, r, s, v: w.Put("abc", r, 0), ParamError,
        lambda r, s: rf"Put to rank {r} of window \S+: origin must be a buffer .*not str"),
    "float_disp": (
        lambda w, r, s, v: w.Put(np.ones(3, np.int64), r, 1.5), ParamError,
        lambda r, s: rf"Put to rank {r} of window \S+ \(24 bytes from the origin\): .*not float"),
    "float_disp_in_tuple": (
        lambda w, r, s, v: w.Put(np.ones(3, np.int64), r, (1.0, 3)), ParamError,
        lambda r, s: rf"Put to rank {r} .*target displacement must be an integer, not float"),
    "float_rank": (
        lambda w, r, s, v: w.Put(np.ones(3, np.int64), 1.0, 0), ParamError,
        lambda r, s: r"Put on window \S+: rank must be an int, got float"),
    "readonly_origin_for_get": (
        lambda w, r, s, v: w.Get(_readonly(3), r, 0), ParamError,
        lambda r, s: rf"Get to rank {r} of window \S+: origin buffer is read-only"),
    "bytes_origin_for_rget": (
        lambda w, r, s, v: w.Rget(b"\0" * 24, r, 0), ParamError,
        lambda r, s: rf"Rget to rank {r} of window \S+: origin buffer is read-only"),
}

CORE = {"put_past_end", "negative_disp", "target_count_too_small", "get_origin_too_small", "rank_out_of_range",
        "str_origin", "readonly_origin_for_get", "target_type_too_small"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.core) if c in CORE else c
                                  for c in CASES])
def test_bad_rma_is_refused(comm, rank, size, left, right, case):
    call, exc_class, match = CASES[case]
    buf = np.arange(N, dtype=np.int64) + 100 * rank
    old = buf.copy()
    vec = _vector()
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Fence()
    with pytest.raises(exc_class, match=match(right, size)) as err:
        call(win, right, size, vec)
    win.Fence()
    unchanged = buf.copy()
    barrier(comm)                 # copied everywhere before the next Put lands
    # The window still works after the error.
    win.Put(pattern(2, rank), right, N - 2)
    win.Fence()
    win.Free()
    vec.Free()
    assert kind(err.value) is exc_class
    assert err.value.status == hixl_rma.PARAM_INVALID
    np.testing.assert_array_equal(unchanged, old)
    np.testing.assert_array_equal(buf, np.r_[old[:N - 2], pattern(2, left)])


@pytest.mark.core
def test_get_error_leaves_origin_untouched(comm, rank, right):
    buf = np.arange(N, dtype=np.int64) + 100 * rank
    win = Win.Create(buf, disp_unit=8, comm=comm)
    out = np.full(4, -3, np.int64)
    win.Fence()
    with pytest.raises(BoundsError, match=f"Get to rank {right} .*offset 56 length 32 bytes"):
        win.Get(out, right, 7)
    win.Fence()
    win.Free()
    np.testing.assert_array_equal(out, [-3] * 4)


@pytest.mark.core
def test_error_inside_lock_epoch(comm, rank, left, right):
    buf = np.arange(N, dtype=np.int64) + 100 * rank
    old = buf.copy()
    win = Win.Create(buf, disp_unit=8, comm=comm)
    barrier(comm)
    win.Lock(right, hixl_rma.LOCK_EXCLUSIVE)
    with pytest.raises(BoundsError, match=f"Put to rank {right} .*offset 80 length 8 bytes"):
        win.Put(np.ones(1, np.int64), right, N)
    win.Put(pattern(1, rank), right, 0)      # the epoch is intact
    win.Unlock(right)
    barrier(comm)
    win.Free()
    np.testing.assert_array_equal(buf, np.r_[pattern(1, left), old[1:]])


@pytest.mark.core
def test_rma_outside_epoch_writes_nothing(comm, rank, right):
    buf = np.arange(N, dtype=np.int64) + 100 * rank
    old = buf.copy()
    win = Win.Create(buf, disp_unit=8, comm=comm)
    with pytest.raises(EpochError, match=f"Put to rank {right} of window .*no access epoch") as err:
        win.Put(np.ones(N, np.int64), right, 0)
    barrier(comm)
    unchanged = buf.copy()
    win.Fence()
    win.Put(pattern(1, rank), right, 0)
    win.Fence()
    win.Free()
    assert kind(err.value) is EpochError and err.value.status == hixl_rma.FAILED
    np.testing.assert_array_equal(unchanged, old)
    assert buf[0] == pattern(1, (rank - 1) % comm.Get_size())[0]


@pytest.mark.core
def test_use_after_free(comm, rank, right):
    buf = np.arange(N, dtype=np.int64) + 100 * rank
    old = buf.copy()
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Fence()
    win.Fence(hixl_rma.MODE_NOSUCCEED)
    win.Free()
    calls = {
        "Put": lambda: win.Put(np.ones(2, np.int64), right, 0),
        "Get": lambda: win.Get(np.zeros(2, np.int64), right, 0),
        "Rput": lambda: win.Rput(np.ones(2, np.int64), right, 0),
        "Rget": lambda: win.Rget(np.zeros(2, np.int64), right, 0),
        "Fence": lambda: win.Fence(),
        "Lock": lambda: win.Lock(right),
        "Lock_all": lambda: win.Lock_all(),
        "Post": lambda: win.Post([right]),
        "Flush": lambda: win.Flush(right),
        "tomemory": lambda: win.tomemory(),
    }
    errors = {}
    for name, call in calls.items():
        with pytest.raises(ParamError, match=f"{name}.*window \\S+ has been freed") as err:
            call()
        errors[name] = err.value
    barrier(comm)
    assert all(kind(e) is ParamError and e.status == hixl_rma.PARAM_INVALID
               for e in errors.values())
    np.testing.assert_array_equal(buf, old)


def test_errors_are_hixl_errors():
    """The hierarchy the design promises (checked once, on any rank)."""
    assert issubclass(BoundsError, ParamError) and issubclass(DatatypeError, ParamError)
    assert issubclass(hixl_rma.AccessError, ParamError)
    assert issubclass(ParamError, hixl_rma.HixlError) and issubclass(EpochError, hixl_rma.HixlError)
    assert issubclass(hixl_rma.HixlTimeoutError, TimeoutError)
    assert not issubclass(EpochError, ParamError)
