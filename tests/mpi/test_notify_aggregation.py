"""Notification aggregation (info ``notify_batch``, HIXL_RMA_NOTIFY_BATCH):
notifications held per target and sent as one message, at N or at the
origin's next synchronization, with data still visible before each tag.
"""
import time

import numpy as np
import pytest

import hixl_rma
from hixl_rma import ParamError, Win
from hixl_rma import runtime as _rt

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

BLOCK = 4096
# Tests of what the origin's own calls send hold tags longer than they run,
# so that the hold's delay (notify_hold_us) does not send them first.
LONG_HOLD = "30000000"


def _messages():
    """Notification messages this rank's engine sent so far."""
    return _rt.runtime().engine.stats()["notifies_sent"]


def _block(i, src):
    return ((np.arange(BLOCK, dtype=np.int64) + 13 * i + 101 * src + 1) % 251).astype(np.uint8)


@pytest.mark.core
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_batched_tags_arrive_in_order_after_their_data(comm, rank, left, right, flavor):
    """128 Put_notify per round, batched by 32: each tag is seen only with
    its block in place, the tags in order, and 4 messages leave per round."""
    n, batch = 128, 32
    info = {"notify_batch": str(batch), "notify_hold_us": LONG_HOLD}
    if flavor == "create":
        mem = np.zeros(n * BLOCK, np.uint8)
        win = Win.Create(mem, disp_unit=1, comm=comm, info=info)
    else:
        win = Win.Allocate(n * BLOCK, disp_unit=1, comm=comm, info=info)
        mem = np.frombuffer(win.tomemory(), np.uint8)
        mem[:] = 0
    barrier(comm)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    before = _messages()
    for i in range(n):
        win.Put_notify(_block(i, rank), right, i * BLOCK, tag=1000 + i)
    sent = _messages() - before
    bad, tags = [], []
    for i in range(n):
        src, tag = win.Wait_notify(source=left)
        tags.append(tag)
        k = tag - 1000
        if src != left or not np.array_equal(mem[k * BLOCK:(k + 1) * BLOCK], _block(k, left)):
            bad.append((i, src, tag))
    win.Unlock_all()
    barrier(comm)
    win.Free()
    assert sent == n // batch, f"{n} notifications batched by {batch} left as {sent} messages"
    assert tags == [1000 + i for i in range(n)]
    assert not bad, bad[:5]


def _open(win, rank, sync):
    if sync == "Fence":
        win.Fence()
    elif sync == "Unlock":
        if rank == 0:
            win.Lock(1, hixl_rma.LOCK_SHARED)
    else:
        win.Lock_all(hixl_rma.MODE_NOCHECK)


def _close(win, rank, sync):
    """End the epoch; on rank 0 the first call is the synchronization tested."""
    if sync == "Fence":
        win.Fence()
    elif sync == "Unlock":
        if rank == 0:
            win.Unlock(1)
    elif sync == "Flush" and rank == 0:
        win.Flush(1)
    elif sync == "Flush_all" and rank == 0:
        win.Flush_all()
    elif sync == "Unlock_all":
        win.Unlock_all()


@pytest.mark.core
@pytest.mark.parametrize("sync", ["Flush", "Flush_all", "Unlock", "Unlock_all", "Fence"])
def test_held_notifications_leave_at_the_next_synchronization(comm, rank, sync):
    """Below the batch size nothing leaves until the origin synchronizes;
    then all of it does, in one message, after its data."""
    win = Win.Allocate(8 * 8, disp_unit=8, comm=comm, info={"notify_batch": "64", "notify_hold_us": LONG_HOLD})
    mem = np.frombuffer(win.tomemory(), np.int64)
    mem[:] = 0
    barrier(comm)
    _open(win, rank, sync)
    held = sent = seen_before = got = data = None
    if rank == 0:
        before = _messages()
        for k in range(3):
            win.Put_notify(np.full(1, 7 + k, np.int64), 1, k, tag=k)
        held = _messages() - before
    barrier(comm)
    if rank == 1:
        seen_before = win.Test_notify(source=0)
    barrier(comm)
    _close(win, rank, sync)
    if rank == 0:
        sent = _messages() - before
    if rank == 1:
        got = win.Wait_notify_all(3, source=0, timeout=10)
        data = mem[:3].copy()
    if sync in ("Flush", "Flush_all"):
        win.Unlock_all()
    elif sync == "Fence":
        win.Fence(hixl_rma.MODE_NOSUCCEED)
    barrier(comm)
    win.Free()
    if rank == 0:
        assert held == 0, "a notification left before the batch was full or the origin synchronized"
        assert sent == 1, f"{sync} sent the 3 held notifications as {sent} messages"
    if rank == 1:
        assert seen_before is None, f"a held notification arrived before {sync}: {seen_before}"
        assert got == [(0, 0), (0, 1), (0, 2)]
        assert data.tolist() == [7, 8, 9]


def test_waiting_sends_what_this_rank_holds(comm, rank, size):
    """Ping-pong with notify_batch: each rank waits for the other's answer
    while holding its own notification, which the wait sends first; without
    that both would wait until the timeout."""
    win = Win.Allocate(8, comm=comm, info={"notify_batch": "16", "notify_hold_us": LONG_HOLD})
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    got = []
    if rank < 2:
        peer = 1 - rank
        for k in range(5):
            if rank == 0:
                win.Notify(peer, tag=k)
                got.append(win.Wait_notify(source=peer, timeout=5))
            else:
                got.append(win.Wait_notify(source=peer, timeout=5))
                win.Notify(peer, tag=k)
    win.Unlock_all()
    barrier(comm)
    win.Free()
    if rank < 2:
        assert got == [(1 - rank, k) for k in range(5)]


def test_batch_within_notify_limit_loses_nothing(comm, rank):
    """notify_batch above notify_limit: a batch is at most notify_limit, so
    back-pressure still works and every tag arrives once."""
    win = Win.Allocate(8, comm=comm, info={"notify_batch": "64", "notify_limit": "4"})
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    got = None
    if rank == 0:
        for k in range(40):
            win.Notify(1, tag=k)
        win.Flush(1)
    elif rank == 1:
        got = win.Wait_notify_all(40, source=0, timeout=20)
    win.Unlock_all()
    barrier(comm)
    leftover = win.Test_notify()
    win.Free()
    if rank == 1:
        assert got == [(0, k) for k in range(40)]
    assert leftover is None


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_bad_notify_batch_is_a_param_error_naming_the_window(comm, rank, value):
    win = Win.Allocate(8, comm=comm, info={"notify_batch": value})
    win.Set_name("kv")
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    with pytest.raises(ParamError) as err:
        win.Notify((rank + 1) % comm.Get_size(), tag=1)
    win.Unlock_all()
    barrier(comm)
    leftover = win.Test_notify()
    win.Free()
    assert "notify_batch" in str(err.value) and "kv" in str(err.value) and repr(value) in str(err.value)
    assert leftover is None


@pytest.mark.core
def test_complete_sends_what_is_held(comm, rank):
    """PSCW: Complete sends the access epoch's held notifications after its data."""
    mem = np.zeros(4, np.int64)
    win = Win.Create(mem, disp_unit=8, comm=comm, info={"notify_batch": "32", "notify_hold_us": LONG_HOLD})
    got = None
    if rank == 1:
        win.Post(MPI_group(comm, [0]))
        win.Wait()
        got = win.Wait_notify_all(3, source=0, timeout=10)
        data = mem[:3].tolist()
    elif rank == 0:
        win.Start(MPI_group(comm, [1]))
        for k in range(3):
            win.Put_notify(np.full(1, 40 + k, np.int64), 1, k, tag=k)
        win.Complete()
    barrier(comm)
    win.Free()
    if rank == 1:
        assert got == [(0, 0), (0, 1), (0, 2)]
        assert data == [40, 41, 42]


def MPI_group(comm, ranks):
    return comm.Get_group().Incl(ranks)


@pytest.mark.core
def test_held_tags_leave_after_the_hold_when_the_origin_answers_through_mpi(comm, rank, left, right, monkeypatch):
    """HIXL_RMA_NOTIFY_BATCH set process-wide, and a correct program: each
    rank notifies its right neighbour, then waits in MPI for an answer the
    neighbour sends only once it saw the tag. The held tag leaves after the
    hold (1 ms by default) without any synchronization of the origin."""
    monkeypatch.setenv("HIXL_RMA_NOTIFY_BATCH", "8")
    win = Win.Allocate(8, comm=comm)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    answers = []
    for k in range(3):
        win.Put_notify(np.full(1, k, np.int64), right, 0, tag=k)
        _src, tag = win.Wait_notify(source=left, timeout=10)
        req = comm.Isend(np.full(1, tag, np.int64), dest=left, tag=77)
        got = np.zeros(1, np.int64)
        comm.Recv(got, source=right, tag=77)   # MPI's own wait: nothing of hixl_rma runs meanwhile
        req.Wait()
        answers.append(int(got[0]))
    win.Unlock_all()
    barrier(comm)
    win.Free()
    assert answers == [0, 1, 2]


def test_a_held_tag_leaves_within_its_hold(comm, rank):
    """No synchronization at all: the tag arrives about notify_hold_us after
    it was held, long before the origin's next call."""
    win = Win.Allocate(8, comm=comm, info={"notify_batch": "64", "notify_hold_us": "20000"})
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    elapsed = None
    barrier(comm)
    if rank == 0:
        t0 = time.monotonic()
        win.Notify(1, tag=5)
        time.sleep(3.0)   # no hixl_rma call: the pacer sends it
    elif rank == 1:
        t0 = time.monotonic()
        got = win.Wait_notify(source=0, timeout=10)
        elapsed = time.monotonic() - t0
        assert got == (0, 5)
    win.Unlock_all()
    barrier(comm)
    win.Free()
    if rank == 1:
        assert 0.015 <= elapsed < 2.5, f"the held tag arrived after {elapsed:.3f} s (hold 20 ms)"


@pytest.mark.parametrize("value", ["0", "-1", "soon", "60000001"])
def test_bad_notify_hold_is_a_param_error_naming_the_window(comm, rank, value):
    win = Win.Allocate(8, comm=comm, info={"notify_batch": "4", "notify_hold_us": value})
    win.Set_name("held")
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    with pytest.raises(ParamError) as err:
        win.Notify((rank + 1) % comm.Get_size(), tag=1)
    win.Unlock_all()
    barrier(comm)
    leftover = win.Test_notify()  # nothing was held, so nothing left at Unlock_all
    win.Free()
    assert leftover is None
    assert "notify_hold_us" in str(err.value) and "held" in str(err.value) and repr(value) in str(err.value)
