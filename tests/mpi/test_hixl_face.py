"""The HIXL-style face: Init, GetWorldCommunicator, GetRank/GetSize,
RegisterMemory (no epochs to open), Put/Get with byte offsets, Fence(comm),
access modes, DeregisterMemory, sub-communicators.
"""
import time

import numpy as np
import pytest

import hixl_rma
import hixl_rma as hixl
from hixl_rma import AccessError, BoundsError, ParamError
from hixl_rma.ground.errors import kind

from support.mpiutil import barrier, pattern

# "thread": a rank stuck in a collective is stopped (and mpiexec ends the job)
# rather than left out of step with the others.
pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]


@pytest.mark.core
def test_init_idempotent_and_world(comm, rank, size):
    first = hixl_rma.runtime.runtime()
    hixl.Init()
    hixl.Init()
    assert hixl.Is_initialized()
    assert hixl_rma.runtime.runtime() is first     # the same engine, not a new one
    world = hixl.GetWorldCommunicator()
    assert isinstance(world, hixl_rma.Communicator)
    assert (hixl.GetRank(world), hixl.GetSize(world)) == (rank, size)
    assert (hixl.GetRank(), hixl.GetSize()) == (rank, size)
    assert (hixl.GetRank(comm), hixl.GetSize(comm)) == (rank, size)
    assert (world.Get_rank(), world.Get_size()) == (rank, size)


@pytest.mark.core
def test_register_put_get_fence(comm, rank, left, right):
    """HIXL tutorial style: register, Put at a byte offset, Fence, Get, Fence."""
    world = hixl.GetWorldCommunicator()
    buf = np.zeros(64, np.uint8)
    handle = hixl.RegisterMemory(buf, hixl.MEMORY_HOST, hixl.ACCESS_READ_WRITE, world)
    assert handle.registered
    hixl.Put(pattern(5, rank, np.uint8), right, 3, handle, world)   # odd byte offset
    hixl.Fence(world)
    got = buf.copy()
    out = np.zeros(5, np.uint8)
    hixl.Get(out, right, 3, handle, world)
    hixl.Fence(world)
    hixl.DeregisterMemory(handle)
    assert not handle.registered
    want = np.zeros(64, np.uint8)
    want[3:8] = pattern(5, left, np.uint8)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(out, pattern(5, rank, np.uint8))


def test_fence_completes_every_handle_of_comm(comm, rank, left, right):
    a = np.zeros(4, np.int64)
    b = np.zeros(2, np.float64)
    ha = hixl.RegisterMemory(a, comm=comm)
    hb = hixl.RegisterMemory(b, comm=comm)
    hixl.Put(pattern(4, rank), right, 0, ha, comm)
    hixl.Put(pattern(1, rank, np.float64), right, 8, hb, comm)
    hixl.Fence(comm)
    got_a, got_b = a.copy(), b.copy()
    hixl.DeregisterMemory(hb)
    hixl.DeregisterMemory(ha)
    np.testing.assert_array_equal(got_a, pattern(4, left))
    np.testing.assert_array_equal(got_b, np.r_[0.0, pattern(1, left, np.float64)])


@pytest.mark.core
def test_read_only_region_refuses_put(comm, rank, right):
    buf = np.arange(16, dtype=np.uint8) + rank
    old = buf.copy()
    handle = hixl.RegisterMemory(buf, hixl.MEMORY_HOST, hixl.ACCESS_READ_ONLY, comm)
    with pytest.raises(AccessError, match=f"Put to rank {right} of window .*read-only") as err:
        hixl.Put(np.full(4, 200, np.uint8), right, 0, handle, comm)
    out = np.zeros(4, np.uint8)
    hixl.Get(out, right, 4, handle, comm)          # reading is allowed
    hixl.Fence(comm)
    unchanged = buf.copy()
    hixl.DeregisterMemory(handle)
    assert kind(err.value) is AccessError and err.value.status == hixl_rma.PARAM_INVALID
    np.testing.assert_array_equal(unchanged, old)
    np.testing.assert_array_equal(out, np.arange(4, 8, dtype=np.uint8) + right)


@pytest.mark.core
def test_write_only_region_refuses_get(comm, rank, left, right):
    buf = np.zeros(8, np.uint8)
    handle = hixl.RegisterMemory(buf, hixl.MEMORY_HOST, hixl.ACCESS_WRITE_ONLY, comm)
    out = np.full(4, 7, np.uint8)
    with pytest.raises(AccessError, match=f"Get from rank {right} of window .*write-only") as err:
        hixl.Get(out, right, 0, handle, comm)
    hixl.Put(pattern(4, rank, np.uint8), right, 4, handle, comm)   # writing is allowed
    hixl.Fence(comm)
    got = buf.copy()
    hixl.DeregisterMemory(handle)
    assert kind(err.value) is AccessError and err.value.status == hixl_rma.PARAM_INVALID
    np.testing.assert_array_equal(out, [7] * 4)                     # nothing was read
    np.testing.assert_array_equal(got, np.r_[np.zeros(4, np.uint8), pattern(4, left, np.uint8)])


def test_mixed_access_modes_like_hixl_read(comm, rank, size):
    """Rank 0 serves reads only (as examples/hixl_read.py); the others read it."""
    expected = (np.arange(4096) * 7 % 256).astype(np.uint8)
    buf = expected.copy() if rank == 0 else np.zeros(4096, np.uint8)
    access = hixl.ACCESS_READ_ONLY if rank == 0 else hixl.ACCESS_READ_WRITE
    handle = hixl.RegisterMemory(buf, hixl.MEMORY_HOST, access, comm)
    out = np.zeros(4096, np.uint8)
    if rank != 0:
        hixl.Get(out, 0, 0, handle, comm)
        with pytest.raises(AccessError, match=r"Put to rank 0 .*read-only"):
            hixl.Put(out, 0, 0, handle, comm)
    else:
        for r in range(1, size):                      # their regions are writable
            hixl.Put(expected[:8], r, 0, handle, comm)
    hixl.Fence(comm)
    got = buf.copy()
    hixl.DeregisterMemory(handle)
    if rank != 0:
        np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(got[:8], expected[:8])


@pytest.mark.core
def test_deregistered_handle(comm, rank, right):
    buf = np.zeros(8, np.uint8)
    handle = hixl.RegisterMemory(buf, comm=comm)
    hixl.Fence(comm)
    hixl.DeregisterMemory(handle)
    with pytest.raises(ParamError, match="Put: the memory handle has been deregistered") as err:
        hixl.Put(np.ones(4, np.uint8), right, 0, handle, comm)
    with pytest.raises(ParamError, match="Get: the memory handle has been deregistered"):
        hixl.Get(np.zeros(4, np.uint8), right, 0, handle, comm)
    with pytest.raises(ParamError, match="DeregisterMemory: the memory handle has been deregistered"):
        hixl.DeregisterMemory(handle)
    hixl.Fence(comm)                   # nothing left to complete: only the barrier
    assert kind(err.value) is ParamError and err.value.status == hixl_rma.PARAM_INVALID
    np.testing.assert_array_equal(buf, np.zeros(8, np.uint8))


@pytest.mark.core
def test_bad_arguments(comm, rank, size, right):
    buf = np.zeros(16, np.uint8)
    with pytest.raises(ParamError, match="mem_type must be MEMORY_HOST or MEMORY_DEVICE"):
        hixl.RegisterMemory(buf, 7, hixl.ACCESS_READ_WRITE, comm)
    with pytest.raises(ParamError, match="access must be ACCESS_READ_WRITE"):
        hixl.RegisterMemory(buf, hixl.MEMORY_HOST, 9, comm)
    handle = hixl.RegisterMemory(buf, comm=comm)
    with pytest.raises(BoundsError, match=f"Put to rank {right} of window .*target offset 12 "
                                          f"length 8 bytes exceeds the window size 16 bytes"):
        hixl.Put(np.ones(8, np.uint8), right, 12, handle, comm)
    with pytest.raises(ParamError, match=r"target_offset must be an int number of bytes, got 1\.5"):
        hixl.Put(np.ones(1, np.uint8), right, 1.5, handle, comm)
    with pytest.raises(ParamError, match=f"rank {size} is out of range"):
        hixl.Get(np.ones(1, np.uint8), size, 0, handle, comm)
    with pytest.raises(ParamError, match="expected a MemoryHandle from RegisterMemory, got Win"):
        hixl.Put(np.ones(1, np.uint8), right, 0, handle.win, comm)
    hixl.Fence(comm)
    got = buf.copy()
    hixl.DeregisterMemory(handle)
    np.testing.assert_array_equal(got, np.zeros(16, np.uint8))


@pytest.mark.core
def test_sub_communicator_from_split(comm, rank, size):
    """Two different splits: reversed ranks, and even/odd halves."""
    results = []
    for color, key in ((0, size - rank), (rank % 2, rank)):
        sub = comm.Split(color, key)
        me, n = hixl.GetRank(sub), hixl.GetSize(sub)
        buf = np.full(2, -1, np.int64)
        handle = hixl.RegisterMemory(buf, hixl.MEMORY_HOST, hixl.ACCESS_READ_WRITE, sub)
        hixl.Put(np.array([rank, me], np.int64), (me + 1) % n, 0, handle, sub)
        hixl.Fence(sub)
        members = sub.allgather(rank)             # world rank of each sub rank
        results.append((buf.copy(), members, me, n))
        hixl.DeregisterMemory(handle)
        sub.Free()
    barrier(comm)
    for got, members, me, n in results:
        writer = (me - 1) % n
        np.testing.assert_array_equal(got, [members[writer], writer])
    assert results[0][2] == size - 1 - rank


def test_connect_up_front(comm, rank, size, right):
    """Connect pays a peer's first contact at start-up: afterwards every rank
    is connected (no transfer made), a first Notify is quick, a second
    Connect does nothing, and a bad rank is refused naming the call."""
    st = hixl_rma.runtime.runtime()
    buf = np.zeros(8, np.int64)
    win = hixl_rma.Win.Create(buf, 8, comm=comm)
    hixl.Connect(comm=comm)
    connected = set(st.connected)
    hixl.Connect([right], comm)  # idempotent
    with pytest.raises(ParamError, match="Connect"):
        hixl.Connect([size], comm)
    win.Lock(right)
    t0 = time.monotonic()
    win.Notify(right, 3)
    first_notify = time.monotonic() - t0
    win.Unlock(right)
    got = win.Wait_notify(3)
    barrier(comm)
    win.Free()
    assert connected >= {r for r in range(size) if r != rank}
    assert got == ((rank - 1) % size, 3)
    assert first_notify < 0.5  # connected already: no handshake in the first RMA call


def test_connect_again_fetches_new_windows_up_front(comm, rank, size, right):
    """Connect to a rank connected already fetches its memory table again
    (the windows made since), so the first transfer into a new window does
    not: the engine counts the table fetches."""
    st = hixl_rma.runtime.runtime()
    hixl.Connect(comm=comm)
    buf = np.zeros(8, np.int64)
    win = hixl_rma.Win.Create(buf, 8, comm=comm)
    before = st.engine.stats()["table_refreshes"]
    hixl.Connect(comm=comm)
    fetched = st.engine.stats()["table_refreshes"] - before
    win.Lock(right)
    win.Put(np.full(1, rank, np.int64), right, 1)
    win.Unlock(right)
    after_put = st.engine.stats()["table_refreshes"] - before
    barrier(comm)
    win.Free()
    assert fetched == size - 1 and after_put == fetched
    assert buf[1] == (rank - 1) % size
