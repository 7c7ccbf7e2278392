"""Counts MPI allows: RMA data moves as a send from one side into a receive
on the other, so the receiving side may be the larger one (the target of a
Put, the origin of a Get, and of their request forms); the data then fills
its start and the rest stays as it was. What does not fit is refused before
a byte moves, and accumulates, which MPI defines element for element, still
need equal counts.

Each rank writes to and reads from its ring neighbour ``right``.
"""
import numpy as np
import pytest
from mpi4py import MPI

from hixl_rma import BoundsError, DatatypeError, Win

from support.mpiutil import barrier, pattern

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

N = 12        # float64 elements per window, disp_unit 8
FILL = -5.0   # what a window and an origin start with


def _window(comm, kind):
    if kind == "create":
        buf = np.full(N, FILL)
        return Win.Create(buf, 8, comm=comm), buf
    win = Win.Allocate(8 * N, 8, comm=comm)
    buf = np.frombuffer(win.tomemory(), np.float64)
    buf[:] = FILL
    return win, buf


def _remote(rank):
    return pattern(N, rank, np.float64)


@pytest.mark.core
@pytest.mark.parametrize("kind", ["create", "allocate"])
@pytest.mark.parametrize("request_based", [False, True])
def test_get_into_a_larger_origin_fills_its_start(comm, rank, right, kind, request_based):
    win, buf = _window(comm, kind)
    buf[:] = _remote(rank)
    barrier(comm)
    out = np.full(3, FILL)
    win.Lock(right, MPI.LOCK_SHARED)
    if request_based:
        win.Rget(out, right, (4, 2, MPI.DOUBLE)).Wait()
    else:
        win.Get(out, right, (4, 2, MPI.DOUBLE))
    win.Unlock(right)
    barrier(comm)
    win.Free()
    np.testing.assert_array_equal(out, [_remote(right)[4], _remote(right)[5], FILL])


@pytest.mark.core
@pytest.mark.parametrize("kind", ["create", "allocate"])
@pytest.mark.parametrize("request_based", [False, True])
def test_put_to_a_larger_target_fills_its_start(comm, rank, left, right, kind, request_based):
    win, buf = _window(comm, kind)
    win.Fence()
    origin = pattern(2, rank, np.float64)
    if request_based:
        win.Rput(origin, right, (4, 3, MPI.DOUBLE)).Wait()
    else:
        win.Put(origin, right, (4, 3, MPI.DOUBLE))
    win.Fence()
    got = buf.copy()
    win.Free()
    expect = np.full(N, FILL)
    expect[4:6] = pattern(2, left, np.float64)
    np.testing.assert_array_equal(got, expect)


def test_larger_sides_with_derived_datatypes(comm, rank, left, right):
    """A vector target type of 3 blocks takes a 2-element origin into its
    first two blocks; a 4-element origin spec takes a 2-element Get."""
    vec = MPI.DOUBLE.Create_vector(3, 1, 3).Commit()   # elements 0, 3, 6
    win, buf = _window(comm, "create")
    win.Fence()
    win.Put(pattern(2, rank, np.float64), right, (1, 1, vec))
    win.Fence()
    after_put = buf.copy()
    barrier(comm)
    buf[:] = _remote(rank)
    barrier(comm)
    out = np.full(6, FILL)
    win.Fence()
    win.Get([out, 4, MPI.DOUBLE], right, (2, 2, MPI.DOUBLE))
    win.Fence()
    win.Free()
    vec.Free()
    expect = np.full(N, FILL)
    expect[[1, 4]] = pattern(2, left, np.float64)
    np.testing.assert_array_equal(after_put, expect)
    np.testing.assert_array_equal(out, np.r_[_remote(right)[2:4], [FILL] * 4])


def test_a_huge_target_count_receives_what_the_origin_sends(comm, rank, left, right):
    """The target's count only bounds what it receives: a count past 64 bits
    of bytes takes the origin's 16 bytes (computed without wrapping)."""
    win, buf = _window(comm, "create")
    win.Fence()
    win.Put(pattern(2, rank, np.float64), right, (0, 2 ** 62, np.float64))
    win.Fence()
    got = buf.copy()
    win.Free()
    np.testing.assert_array_equal(got, np.r_[pattern(2, left, np.float64), [FILL] * (N - 2)])


@pytest.mark.core
@pytest.mark.parametrize("call, exc, match", [
    (lambda w, r: w.Put(np.ones(3), r, (0, 2, MPI.DOUBLE)), BoundsError,
     r"Put to rank \d+ of window \S+ \(24 bytes from the origin\): target describes 16 bytes, "
     r"fewer than the 24 bytes the origin sends"),
    (lambda w, r: w.Get(np.zeros(2), r, (0, 3, MPI.DOUBLE)), BoundsError,
     r"Get to rank \d+ of window \S+ \(16 bytes from the origin\): origin holds 16 bytes, "
     r"fewer than the 24 bytes the target describes"),
    (lambda w, r: w.Put(np.ones(2), r, (N - 1, 3, MPI.DOUBLE)), BoundsError,
     r"Put to rank \d+ of window \S+: target offset 88 length 16 bytes exceeds the window size 96"),
    (lambda w, r: w.Accumulate(np.ones(2), r, (0, 3, MPI.DOUBLE), MPI.SUM), BoundsError,
     r"target describes 24 bytes but origin has 16 bytes"),
    (lambda w, r: w.Accumulate(np.ones(3), r, (0, 2, MPI.DOUBLE), MPI.SUM), DatatypeError,
     r"target describes 16 bytes but origin has 24 bytes"),
], ids=["put_target_too_small", "get_origin_too_small", "put_moved_bytes_past_end",
        "accumulate_target_larger", "accumulate_target_smaller"])
def test_what_does_not_fit_is_refused_and_nothing_moves(comm, rank, right, call, exc, match):
    win, buf = _window(comm, "create")
    before = buf.copy()
    win.Fence()
    with pytest.raises(exc, match=match):
        call(win, right)
    win.Fence()
    after = buf.copy()
    win.Free()
    np.testing.assert_array_equal(after, before)
