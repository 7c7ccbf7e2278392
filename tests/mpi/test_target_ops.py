"""Small Puts and Gets on a same-node Create window made by the target's
engine (HIXL_RMA_TARGET_OPS; docs: The engine, "Operations made by the
target"): the bytes land and come back, each call is complete when it
returns, and the way each rank asked for is the one taken; larger ones
and every other rank's keep the system-call way.
"""
import numpy as np
import pytest

import hixl_rma
from hixl_rma import Win

from support.mpiutil import barrier, pattern

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

SIZES = (1, 7, 8, 100, 4096, 4097)  # 4097: past what the target's engine moves
SLOT = 8192
ROUNDS = 40


@pytest.mark.core
@pytest.mark.parametrize("by", ["target", "origin", "auto"])
def test_small_puts_and_gets_made_either_way(comm, rank, size, monkeypatch, by):
    """Every rank Puts a pattern into its slot at the next rank and Gets it
    back, ROUNDS times for each size, under Lock_all; the last round stays
    for the owner to read. With ``target`` every move of at most 4 KiB went
    to the target's engine (its count) but the first, with ``origin`` none
    did."""
    monkeypatch.setenv("HIXL_RMA_TARGET_OPS", by)
    mem = np.zeros(size * SLOT, np.uint8)
    win = Win.Create(mem, 1, comm=comm)
    if not win._core.targets[(rank + 1) % size].acc_locked:
        win.Free()
        pytest.skip("the window is not under its ranks' accumulate lock (ranks on several hosts)")
    right, left = (rank + 1) % size, (rank - 1) % size
    before = win._core.engine.stats()["target_moves_asked"]
    win.Lock_all()
    for rnd in range(ROUNDS):
        for n in SIZES:
            data = pattern(n, rank, np.uint8, salt=rnd)
            win.Put(data, right, rank * SLOT)
            win.Flush(right)  # a Put past 4 KiB may still be in flight (UCX over tcp)
            back = np.zeros(n, np.uint8)
            win.Get(back, right, rank * SLOT)
            win.Flush(right)
            np.testing.assert_array_equal(back, data, err_msg=f"rank {rank}: {n} B, round {rnd}")
    win.Flush(right)
    win.Unlock_all()
    made = win._core.engine.stats()["target_moves_asked"] - before
    barrier(comm)
    last = pattern(SIZES[-1], left, np.uint8, salt=ROUNDS - 1)
    np.testing.assert_array_equal(mem[left * SLOT:left * SLOT + SIZES[-1]], last)
    small = 2 * ROUNDS * sum(1 for n in SIZES if n <= 4096)
    win.Free()
    if by == "target":  # but the first, which goes through the Python layer (it connects)
        assert small - 1 <= made <= small, f"rank {rank}: {made} of {small} small moves made by the target's engine"
    elif by == "origin":
        assert made == 0, f"rank {rank}: {made} moves made by the target's engine"
    else:
        assert made <= small


@pytest.mark.core
def test_a_put_out_of_bounds_is_refused_either_way(comm, rank, size, monkeypatch):
    """A Put or Get past the end of the target's window is refused before
    anything moves, whoever would have made it; the target's memory is
    unchanged."""
    monkeypatch.setenv("HIXL_RMA_TARGET_OPS", "target")
    mem = np.full(64, 5, np.uint8)
    win = Win.Create(mem, 1, comm=comm)
    right = (rank + 1) % size
    win.Lock(right, hixl_rma.LOCK_SHARED)
    with pytest.raises(hixl_rma.ParamError, match=f"rank {right}"):
        win.Put(np.ones(8, np.uint8), right, 60)
    with pytest.raises(hixl_rma.ParamError, match=f"rank {right}"):
        win.Get(np.ones(8, np.uint8), right, 64)
    win.Unlock(right)
    barrier(comm)
    snapshot = mem.copy()
    win.Free()
    assert (snapshot == 5).all()
