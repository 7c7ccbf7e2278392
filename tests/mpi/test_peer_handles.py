"""A window's hot path holds an engine handle per target (a PeerRef, taken
at its first call there): its atomics, notifications, puts and flushes name
no address, so the engine resolves no name per call. The engine counts the
calls that named their peer (``stats()["peer_lookups"]``)."""
import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import Win

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

N = 40


@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_hot_path_resolves_no_name_per_call(comm, rank, right, left, flavor):
    eng = hixl_rma.runtime.runtime().engine
    if flavor == "create":
        mem = np.zeros(4, np.int64)
        win = Win.Create(mem, disp_unit=8, comm=comm)  # user memory: atomics go by the engine
    else:
        win = Win.Allocate(32, disp_unit=8, comm=comm)
    one, out, cmp = np.ones(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)
    barrier(comm)
    win.Lock(right)
    # The first calls connect and take the handle (one lookup each at most).
    win.Fetch_and_op(one, out, right, 0)
    win.Put_notify(one, right, 1, tag=0)
    win.Flush(right)
    assert win.Wait_notify(tag=0, source=left) == (left, 0)
    # Without the target's control block mapped here (over UCX_TLS=tcp), atomics on a window whose
    # accumulates take the target's lock are the Python layer's, which still names the peer.
    hot = comm.allreduce(int(win._core.has_ctrl(right) or not win._core.targets[right].acc_locked), op=MPI.MIN)
    before = eng.stats()["peer_lookups"]
    for i in range(1, N + 1):
        win.Fetch_and_op(one, out, right, 0)
        win.Compare_and_swap(one, cmp, out, right, 2)
        win.Put(one, right, 3)
        win.Put_notify(one, right, 1, tag=i)
        win.Flush(right)
        assert win.Wait_notify(tag=i, source=left) == (left, i)
    lookups = eng.stats()["peer_lookups"] - before
    win.Unlock(right)
    barrier(comm)
    win.Free()
    if not hot:
        pytest.skip("the target's control block is not mapped here: its atomics are not the hot path's")
    assert lookups == 0, f"{lookups} peers resolved by name in {N} rounds of hot-path calls ({flavor})"
