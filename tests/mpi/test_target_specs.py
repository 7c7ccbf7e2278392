"""Target specs the hot path resolves itself: (disp,), (disp, count) and
(disp, count, basic datatype), as a tuple or a list, where the target
describes exactly the origin's bytes. They must move what the general path
moves (the data checked on the target and the origin), and every other spec
must still reach the general path, which parses and checks it.

Each rank writes to and reads from its ring neighbour ``right``.
"""
import numpy as np
import pytest
from mpi4py import MPI

from hixl_rma import BoundsError, Win
from hixl_rma.window import core

from support.mpiutil import barrier, pattern

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

N = 16  # int32 elements per window, disp_unit 4
FILL = -3


def _window(comm, kind):
    if kind == "create":
        buf = np.full(N, FILL, np.int32)
        return Win.Create(buf, 4, comm=comm), buf
    win = Win.Allocate(4 * N, 4, comm=comm)
    buf = np.frombuffer(win.tomemory(), np.int32)
    buf[:] = FILL
    barrier(comm)  # filled before a neighbour's Put
    return win, buf


# (target spec, the window elements it covers) for a 3-element int32 origin
HOT_SPECS = [
    ((5,), slice(5, 8)),
    ([5], slice(5, 8)),
    ((5, 3), slice(5, 8)),
    ([6, 3, MPI.INT32_T], slice(6, 9)),
    ((6, 3, MPI.INT), slice(6, 9)),
    ((2, 12, MPI.BYTE), slice(2, 5)),     # bytes of the same length: MPI's count in the type given
    ((13, 3, MPI.INT32_T), slice(13, 16)),  # up to the window's end
]


@pytest.fixture
def forbid_general_path(monkeypatch):
    """From its call on, fail a Put/Get that leaves the hot path (a
    target's first call takes the general path, which readies it)."""
    def refuse(self, op, what, origin, target_rank, target):
        raise AssertionError(f"{what} with target {target!r} took the general path")
    return lambda: monkeypatch.setattr(core.WindowCore, "transfer", refuse)


@pytest.mark.core
@pytest.mark.parametrize("kind", ["create", "allocate"])
@pytest.mark.parametrize("spec, covers", HOT_SPECS, ids=[repr(s[0]) for s in HOT_SPECS])
def test_hot_target_specs_move_the_data(comm, rank, left, right, kind, spec, covers, forbid_general_path):
    win, buf = _window(comm, kind)
    win.Lock_all()
    win.Put(np.full(1, FILL, np.int32), right)  # readies right (element 0 keeps FILL)
    forbid_general_path()
    win.Put(pattern(3, rank, np.int32), right, spec)
    win.Flush(right)
    barrier(comm)
    got = buf.copy()
    barrier(comm)
    buf[:] = pattern(N, rank, np.int32, salt=1)
    barrier(comm)
    out = np.full(3, FILL, np.int32)
    win.Get(out, right, spec)
    win.Flush(right)
    win.Unlock_all()
    barrier(comm)
    win.Free()
    expect = np.full(N, FILL, np.int32)
    expect[covers] = pattern(3, left, np.int32)
    np.testing.assert_array_equal(got, expect)
    np.testing.assert_array_equal(out, pattern(N, right, np.int32, salt=1)[covers])


# Specs the hot path leaves to the general path: each is legal and moves
# data there (a larger receiving side, a derived datatype), or is refused
# there with its message.
def test_other_specs_still_reach_the_general_path(comm, rank, left, right):
    win, buf = _window(comm, "create")
    vec = MPI.INT32_T.Create_vector(3, 1, 2).Commit()  # elements 0, 2, 4
    win.Fence()
    win.Put(pattern(3, rank, np.int32), right, (0, 5, MPI.INT32_T))   # the target the larger side
    win.Put(pattern(3, rank, np.int32, salt=2), right, (8, 1, vec))
    win.Fence()
    got = buf.copy()
    win.Fence()
    with pytest.raises(BoundsError, match=r"target describes 8 bytes, fewer than the 12 bytes the origin sends"):
        win.Put(pattern(3, rank, np.int32), right, (0, 2, MPI.INT32_T))
    with pytest.raises(BoundsError, match=r"exceeds the window size 64 bytes"):
        win.Put(pattern(3, rank, np.int32), right, (14, 3, MPI.INT32_T))
    with pytest.raises(BoundsError, match=r"target displacement -1 is negative"):
        win.Put(pattern(3, rank, np.int32), right, (-1, 3, MPI.INT32_T))
    with pytest.raises(TypeError, match=r"target displacement must be an integer"):
        win.Put(pattern(3, rank, np.int32), right, (1.0, 3, MPI.INT32_T))
    win.Fence()
    after = buf.copy()
    win.Free()
    vec.Free()
    expect = np.full(N, FILL, np.int32)
    expect[0:3] = pattern(3, left, np.int32)
    expect[[8, 10, 12]] = pattern(3, left, np.int32, salt=2)
    np.testing.assert_array_equal(got, expect)
    np.testing.assert_array_equal(after, got)  # the refused calls wrote nothing
