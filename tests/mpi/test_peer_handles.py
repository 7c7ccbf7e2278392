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
    # accumulates take the target's lock are the Python layer's: on the handle too.
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
    assert lookups == 0, f"{lookups} peers resolved by name in {N} rounds of hot-path calls ({flavor})"


def _slow_round(win, dyn, addr, right, i, vec):
    """One round of calls the hot path declines: the Python layer's, on the
    window's ranks (never a name the user passed)."""
    src = np.full(4, i, np.int64)
    f = np.zeros(1, np.float64)
    res = np.zeros(2, np.int64)
    win.Lock(right)
    win.Put([src, 1, vec], right, 0)                          # a derived origin datatype
    win.Get([res, 1, MPI.INT64_T], right, 1)
    win.Accumulate(np.full(1, 1.5), right, (3, 1, MPI.DOUBLE), MPI.PROD)  # no native float64 PROD
    win.Accumulate(np.ones(2, np.int64), right, (0, 2, MPI.INT64_T), MPI.SUM)
    win.Get_accumulate(np.ones(2, np.int64), res, right, (0, 2, MPI.INT64_T), MPI.SUM)
    win.Fetch_and_op(np.ones(1, np.float64), f, right, 3, MPI.PROD)
    win.Rput(src[:2], right, (1, 2, MPI.INT64_T)).Wait()
    win.Flush(right)
    win.Unlock(right)
    win.Lock(right, MPI.LOCK_SHARED)
    win.Compare_and_swap(np.ones(1, np.int64), np.zeros(1, np.int64), res[:1], right, 2)
    win.Unlock(right)
    dyn.Lock(right)
    dyn.Put(src[:1], right, addr)
    dyn.Get(res[:1], right, addr + 8)
    dyn.Unlock(right)


@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_slow_path_resolves_no_name_per_call(comm, rank, right, left, flavor):
    """The Python layer's calls on a window's rank -- derived datatypes,
    accumulates the engine has no atomic for, Rput, lock words over the
    engine (without shared memory), a dynamic window -- use the target's
    handle too: after the first round (which connects), no lookups."""
    eng = hixl_rma.runtime.runtime().engine
    if flavor == "create":
        mem = np.zeros(8, np.int64)
        win = Win.Create(mem, disp_unit=8, comm=comm)
    else:
        win = Win.Allocate(64, disp_unit=8, comm=comm)
    dyn = Win.Create_dynamic(comm=comm)
    region = np.zeros(4, np.int64)
    dyn.Attach(region)
    addr = comm.allgather(MPI.Get_address(region))[right]
    vec = MPI.INT64_T.Create_vector(2, 1, 2).Commit()  # elements 0 and 2
    barrier(comm)
    try:
        _slow_round(win, dyn, addr, right, 0, vec)
        before = eng.stats()["peer_lookups"]
        for i in range(1, 6):
            _slow_round(win, dyn, addr, right, i, vec)
        lookups = eng.stats()["peer_lookups"] - before
    finally:
        vec.Free()
        barrier(comm)
        dyn.Detach(region)
        dyn.Free()
        win.Free()
    assert lookups == 0, f"{lookups} peers resolved by name in 5 rounds of slow-path calls ({flavor})"
