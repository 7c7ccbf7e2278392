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


def _posted(win):
    return win._core.engine.stats()["target_writes_posted"]


@pytest.mark.core
@pytest.mark.parametrize("close", ["Flush", "Unlock", "Fence"])
def test_a_run_of_small_puts_is_complete_when_its_epoch_says(comm, rank, size, monkeypatch, close):
    """A run of small Puts to one target: the first waits for the target's
    answer, the rest are posted (not answered each) and the closing call
    waits until the target's engine made every one. Each rank writes 64
    Puts of 1 to 256 bytes into its slot at the next rank, closes, reads
    the slot back with one Get of its own way, and the owner checks its
    memory after a barrier: nothing is missing, nothing is written twice
    or elsewhere."""
    monkeypatch.setenv("HIXL_RMA_TARGET_OPS", "target")
    run, piece = 64, 256
    mem = np.full(size * run * piece, 0xEE, np.uint8)
    win = Win.Create(mem, 1, comm=comm)
    right, left = (rank + 1) % size, (rank - 1) % size
    if not win._core.targets[right].acc_locked:
        win.Free()
        pytest.skip("the window is not under its ranks' accumulate lock (ranks on several hosts)")
    data = pattern(run * piece, rank, np.uint8, salt=7)
    lens = [1 + (i * 37) % piece for i in range(run)]  # 1 .. 256 bytes, every Put its own length
    before = _posted(win)
    if close == "Fence":
        win.Fence()
    else:
        win.Lock(right, hixl_rma.LOCK_SHARED)
    for i, n in enumerate(lens):
        at = rank * run * piece + i * piece
        win.Put(data[i * piece:i * piece + n], right, at)
    if close == "Flush":
        win.Flush(right)
    made = _posted(win) - before
    if close == "Fence":
        win.Fence()
        win.Fence()  # an epoch for the Gets
    elif close == "Unlock":
        win.Unlock(right)
        win.Lock(right, hixl_rma.LOCK_SHARED)
    # One Get of the whole run (16 KiB): this rank's own way, a system call
    # that reads the target's memory without waiting behind the posts.
    back = np.zeros(run * piece, np.uint8)
    win.Get(back, right, rank * run * piece)
    if close == "Fence":
        win.Fence(hixl_rma.MODE_NOSUCCEED)
    else:
        win.Unlock(right)
    for i, n in enumerate(lens):
        np.testing.assert_array_equal(back[i * piece:i * piece + n], data[i * piece:i * piece + n],
                                      err_msg=f"rank {rank}: Put {i} ({n} B) read back from rank {right}")
        assert (back[i * piece + n:(i + 1) * piece] == 0xEE).all(), f"rank {rank}: past Put {i} at rank {right}"
    barrier(comm)
    mine = mem[left * run * piece:(left + 1) * run * piece].reshape(run, piece)
    theirs = pattern(run * piece, left, np.uint8, salt=7).reshape(run, piece)
    for i, n in enumerate(lens):
        np.testing.assert_array_equal(mine[i, :n], theirs[i, :n], err_msg=f"rank {rank}: Put {i} of rank {left}")
        assert (mine[i, n:] == 0xEE).all(), f"rank {rank}: bytes past Put {i} of rank {left} were written"
    others = np.delete(mem.reshape(size, -1), left, axis=0)
    win.Free()
    assert (others == 0xEE).all(), f"rank {rank}: a slot no rank wrote to was written"
    # the first Put connects (through the Python layer); the next waits for
    # its answer unless the first left the target dirty; the rest are posted
    assert run - 2 <= made <= run - 1, f"rank {rank}: {made} of {run} Puts posted to the target's engine"
