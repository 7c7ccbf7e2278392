"""Fence's barrier: same-node ranks meet on counters in their mapped control
blocks (the C path of Win.Fence), others on an MPI barrier. Data written in
one fence epoch must be visible to every rank in the next, whichever path a
Fence takes, and a rank that never arrives is a timeout naming it.
"""
import os
import time

import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import HixlTimeoutError, ParamError, Win, _engine
from hixl_rma import runtime as _rt

from support.mpiutil import barrier, one_node, pattern

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

N = 64  # int64 elements per window
EPOCHS = 300


def _mapping_allowed():
    """The engine maps same-node peers' memory (control blocks included)
    unless HIXL_RMA_DIRECT=0 or UCX_TLS leaves out shared memory; across
    hosts Fence meets in an MPI barrier."""
    if os.environ.get("HIXL_RMA_DIRECT") == "0" or not one_node():
        return False
    tls = os.environ.get("UCX_TLS", "")
    if not tls:
        return True
    named = any(w in ("sm", "shm", "posix", "sysv", "all", "mm") for w in tls.lstrip("^").split(","))
    return named != tls.startswith("^")


def _window(flavor, comm):
    if flavor == "create":
        mem = np.zeros(N, np.int64)
        return Win.Create(mem, disp_unit=8, comm=comm), mem
    win = Win.Allocate(8 * N, disp_unit=8, comm=comm)
    return win, np.frombuffer(win.tomemory(), np.int64)


@pytest.mark.core
@pytest.mark.parametrize("flavor", ["create", "allocate"])
@pytest.mark.parametrize("shared", ["1", "0"])
def test_fence_orders_every_epoch(comm, rank, size, left, right, flavor, shared, monkeypatch):
    monkeypatch.setenv("HIXL_RMA_SHARED_FENCE", shared)
    win, mem = _window(flavor, comm)
    got = np.zeros(N, np.int64)
    bad = []
    try:
        win.Fence()
        mode = win._sync.fence_mode
        for e in range(EPOCHS):
            if e % 17 == rank:
                time.sleep(0.002)  # a late writer: a barrier that does not wait shows here
            win.Put(pattern(N, rank, salt=e), right)
            win.Fence(hixl_rma.MODE_NOPRECEDE if e == 0 else 0)
            if not np.array_equal(mem, pattern(N, left, salt=e)):
                bad.append(("put", e))
            win.Get(got, left)
            win.Fence(hixl_rma.MODE_NOSTORE | hixl_rma.MODE_NOPUT)
            if not np.array_equal(got, pattern(N, (left - 1) % size, salt=e)):  # what left holds
                bad.append(("get", e))
        win.Fence(hixl_rma.MODE_NOSUCCEED)
    finally:
        win.Free()
    assert mode == ("shared" if shared == "1" and _mapping_allowed() else "mpi")
    assert bad == []


@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_fence_runs_between_other_epochs(comm, rank, size, left, right, flavor):
    """Fence epochs closed by MODE_NOSUCCEED, a lock epoch and PSCW in
    between, accumulates inside: the counters stay in step."""
    win, mem = _window(flavor, comm)
    try:
        expected = 0
        for _ in range(20):
            win.Fence()
            win.Accumulate(np.ones(N, np.int64), right)
            win.Fence()
            win.Fence(hixl_rma.MODE_NOSUCCEED)
            expected += 1
            win.Lock(right, hixl_rma.LOCK_SHARED)
            win.Accumulate(np.ones(N, np.int64), right)
            win.Unlock(right)
            expected += 1
            barrier(comm)
            grp = comm.Get_group()
            win.Post(grp.Incl([left]))
            win.Start(grp.Incl([right]))
            win.Accumulate(np.ones(N, np.int64), right)
            win.Complete()
            win.Wait()
            grp.Free()
            expected += 1
        win.Fence()
        total = mem.copy()
        win.Fence(hixl_rma.MODE_NOSUCCEED)
    finally:
        win.Free()
    assert (total == expected).all(), total[:4]


def test_fence_bad_assertions(comm, rank):
    win, _mem = _window("allocate", comm)
    try:
        win.Fence()
        for bad in (1 << 40, 1 << 70, -1, True, "x", 1.0):
            with pytest.raises(ParamError, match="Fence: invalid assertion"):
                win.Fence(bad)
        win.Fence(hixl_rma.MODE_NOSUCCEED)
    finally:
        win.Free()
    with pytest.raises(ParamError, match="freed"):
        win.Fence()


def test_fence_on_self_and_split(comm, rank, size):
    """One-rank windows (COMM_SELF) and windows on a sub-communicator."""
    buf = np.zeros(4, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=MPI.COMM_SELF)
    try:
        win.Fence()
        win.Put(np.full(4, 5 + rank, np.int64), 0)
        win.Fence()
        assert win._sync.fence_mode == "shared"  # one rank: its own counter, nothing to map
        assert (buf == 5 + rank).all()
        win.Fence(hixl_rma.MODE_NOSUCCEED)
    finally:
        win.Free()
    sub = comm.Split(rank % 2, rank)
    try:
        win, mem = _window("create", sub)
        try:
            win.Fence()
            for e in range(50):
                win.Put(np.full(N, e * 10 + sub.rank, np.int64), (sub.rank + 1) % sub.size)
                win.Fence()
                assert (mem == e * 10 + (sub.rank - 1) % sub.size).all(), (e, mem[:2])
                win.Fence()  # the next epoch's Put must not race with the read above
            win.Fence(hixl_rma.MODE_NOSUCCEED)
        finally:
            win.Free()
    finally:
        sub.Free()


def test_fence_timeout_names_the_missing_rank(comm, rank, size, monkeypatch):
    """Rank 0 fences alone: within the timeout it gets HixlTimeoutError
    naming the ranks that did not arrive (no hang). Only on the mapped
    counters: an MPI barrier abandoned after its timeout would still be
    matched by the other ranks' next collective."""
    if not _mapping_allowed():
        pytest.skip("Fence meets on an MPI barrier here")
    monkeypatch.delenv("HIXL_RMA_SHARED_FENCE", raising=False)
    st = _rt.runtime()
    win, _mem = _window("allocate", comm)
    win.Fence()
    assert win._sync.fence_mode == "shared"
    saved = st.timeout_ms
    err, seconds = None, 0.0
    try:
        if rank == 0:
            st.timeout_ms = 300
            _engine.set_default_timeout(300)
            t0 = time.monotonic()
            try:
                win.Fence()
            except HixlTimeoutError as exc:
                err = exc
            seconds = time.monotonic() - t0
    finally:
        st.timeout_ms = saved
        _engine.set_default_timeout(saved)
        barrier(comm)
        win.Free()
    if rank == 0:
        assert win is not None and err is not None, "Fence returned without the other ranks"
        assert 0.25 <= seconds < 5, seconds
        missing = list(range(1, size))
        assert f"barrier did not complete within 300 ms; rank(s) {missing}" in str(err), str(err)
