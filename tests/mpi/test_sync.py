"""Synchronization: fence (with assertions), PSCW (groups as mpi4py Groups
and rank lists, Wait and Test), passive target (exclusive and shared locks,
Lock_all, Flush*), and every epoch misuse raising EpochError.
"""
import time

import numpy as np
import pytest

import hixl_rma
from hixl_rma import EpochError, Win

from support.mpiutil import barrier, pattern

# "thread": a rank stuck in a collective is stopped (and mpiexec ends the job)
# rather than left out of step with the others.
pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

K = 50  # read-modify-write increments per rank under the exclusive lock


def _group(comm, ranks, kind):
    """``ranks`` as the kind of group argument under test."""
    if kind == "list":
        return list(ranks)
    world = comm.Get_group()
    try:
        return world.Incl(list(ranks))
    finally:
        world.Free()


# ---------------------------------------------------------------------- fence

@pytest.mark.core
def test_fence_put_get_with_assertions(comm, rank, left, right):
    buf = np.zeros(8, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Fence(hixl_rma.MODE_NOPRECEDE)
    win.Put(pattern(4, rank), right, 4)
    win.Fence()
    got_put = buf.copy()
    out = np.zeros(4, np.int64)
    win.Get(out, right, 4)
    win.Fence(hixl_rma.MODE_NOSUCCEED | hixl_rma.MODE_NOSTORE | hixl_rma.MODE_NOPUT)
    # NOSUCCEED ended the fence epoch: RMA now needs a new epoch ...
    with pytest.raises(EpochError, match=f"to rank {right} .*no access epoch") as err:
        win.Put(pattern(4, rank), right, 0)
    # ... and a passive-target epoch may follow at once.
    win.Lock(right, hixl_rma.LOCK_SHARED)
    win.Put(pattern(2, rank, salt=1), right, 0)
    win.Unlock(right)
    barrier(comm)
    got_lock = buf.copy()
    win.Free()
    assert err.value.status == hixl_rma.FAILED
    np.testing.assert_array_equal(got_put, np.r_[np.zeros(4, np.int64), pattern(4, left)])
    np.testing.assert_array_equal(out, pattern(4, rank))
    np.testing.assert_array_equal(got_lock, np.r_[pattern(2, left, salt=1), [0, 0],
                                                  pattern(4, left)])


def test_fence_many_epochs_ring_shift(comm, rank, size, right):
    """A token moved around the ring one hop per fence epoch returns home."""
    buf = np.array([rank], np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Fence()
    for _ in range(size):
        value = buf.copy()
        win.Fence()          # everyone has read before anyone overwrites
        win.Put(value, right)
        win.Fence()
    win.Fence(hixl_rma.MODE_NOSUCCEED)
    win.Free()
    assert buf[0] == rank


# ----------------------------------------------------------------------- PSCW

@pytest.mark.core
@pytest.mark.parametrize("kind", ["list", "group"])
@pytest.mark.parametrize("direction", [1, -1])
def test_pscw_ring(comm, rank, size, kind, direction):
    """Each rank exposes its window to one neighbour and accesses the other."""
    target = (rank + direction) % size
    origin = (rank - direction) % size
    buf = np.zeros(6, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    post_group, start_group = _group(comm, [origin], kind), _group(comm, [target], kind)
    win.Post(post_group)
    win.Start(start_group)
    win.Put(pattern(3, rank), target, 0)
    first = np.full(3, -1, np.int64)
    win.Get(first, target, 3)     # the target's untouched half
    win.Complete()
    win.Wait()
    got = buf.copy()
    barrier(comm)
    buf[3:] = pattern(3, rank, salt=5)
    barrier(comm)
    out = np.zeros(3, np.int64)
    win.Post(post_group)
    win.Start(start_group)
    win.Get(out, target, 3)
    win.Complete()
    win.Wait()
    win.Free()
    if kind == "group":
        post_group.Free()
        start_group.Free()
    np.testing.assert_array_equal(got, np.r_[pattern(3, origin), [0, 0, 0]])
    np.testing.assert_array_equal(first, [0, 0, 0])
    np.testing.assert_array_equal(out, pattern(3, target, salt=5))


@pytest.mark.core
@pytest.mark.parametrize("kind", ["list", "group"])
def test_pscw_gather_to_root_with_test(comm, rank, size, kind):
    """Rank 0 exposes to all others at once; it polls Test() until they completed."""
    buf = np.zeros(4 * size, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    others = list(range(1, size))
    if rank == 0:
        group = _group(comm, others, kind)
        win.Post(group)
        deadline = time.monotonic() + 30
        polls = 0
        while not win.Test():
            polls += 1
            assert time.monotonic() < deadline, "Test() never returned True"
        with pytest.raises(EpochError, match=r"Test on window .* without Post"):
            win.Test()     # the exposure epoch is closed
    else:
        group = _group(comm, [0], kind)
        win.Start(group)
        win.Put(pattern(4, rank), 0, 4 * rank)
        win.Complete()
    barrier(comm)
    win.Free()
    if kind == "group":
        group.Free()
    if rank == 0:
        want = np.concatenate([np.zeros(4, np.int64)] + [pattern(4, r) for r in others])
        np.testing.assert_array_equal(buf, want)


def test_pscw_access_outside_group(comm, rank, size, right):
    """RMA to a rank that is not in the Start group raises EpochError."""
    buf = np.zeros(2, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    left = (rank - 1) % size
    win.Post([left])
    win.Start([right])
    with pytest.raises(EpochError, match=f"to rank {rank} of window .*no access epoch"):
        win.Put(np.ones(1, np.int64), rank, 0)   # self is not in [right] (size >= 2)
    win.Complete()
    win.Wait()
    win.Free()


# ------------------------------------------------------------- passive target

@pytest.mark.core
def test_exclusive_lock_mutual_exclusion(comm, size):
    """K unprotected read-modify-write increments per rank under LOCK_EXCLUSIVE."""
    counter = np.zeros(1, np.int64)
    win = Win.Create(counter, disp_unit=8, comm=comm)
    value = np.zeros(1, np.int64)
    barrier(comm)
    for _ in range(K):
        win.Lock(0, hixl_rma.LOCK_EXCLUSIVE)
        win.Get(value, 0)
        win.Flush(0)
        value += 1
        win.Put(value, 0)
        win.Unlock(0)
    barrier(comm)
    final = comm.bcast(int(counter[0]) if comm.Get_rank() == 0 else None, root=0)
    win.Free()
    assert final == size * K


@pytest.mark.core
def test_shared_locks_coexist(comm, rank, size):
    """Every rank holds a shared lock on rank 0 at the same time (the barrier
    inside the epoch would never complete if one of them excluded another)."""
    buf = np.zeros(size, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    if rank == 0:
        buf[:] = -1
    barrier(comm)
    win.Lock(0, hixl_rma.LOCK_SHARED)
    barrier(comm)                      # all ranks are inside their shared epoch now
    win.Put(np.array([100 + rank], np.int64), 0, rank)
    win.Flush(0)
    barrier(comm)                      # every Put is remotely complete
    seen = np.zeros(size, np.int64)
    win.Get(seen, 0)
    win.Unlock(0)
    barrier(comm)
    win.Free()
    np.testing.assert_array_equal(seen, 100 + np.arange(size))


def test_exclusive_lock_waits_for_shared(comm, rank, size):
    """An exclusive lock is granted only after every shared holder unlocked:
    each shared holder writes its slot just before Unlock, and the exclusive
    holder must see all of them."""
    buf = np.zeros(size, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    if rank != 0:
        win.Lock(0, hixl_rma.LOCK_SHARED)
    barrier(comm)                      # all shared locks are held
    if rank == 0:
        seen = np.zeros(size, np.int64)
        win.Lock(0, hixl_rma.LOCK_EXCLUSIVE)   # waits for the shared holders
        win.Get(seen, 0)
        win.Unlock(0)
    else:
        win.Put(np.array([rank], np.int64), 0, rank)
        win.Unlock(0)
    barrier(comm)
    win.Free()
    if rank == 0:
        np.testing.assert_array_equal(seen, np.arange(size))


@pytest.mark.core
def test_lock_words_name_their_holders(comm, rank, left, right):
    """The lock word carries an exclusive holder's window rank and each
    shared holder has its reader slot, so a survivor can break what a dead
    rank held; and an exclusive CAS that landed but whose reply was lost is
    this rank's own on the next try (here: the word already names the left
    neighbour, which then takes the lock at once instead of waiting)."""
    from hixl_rma._engine import lock_word_exclusive
    from hixl_rma.window import ctrl as CTRL
    buf = np.zeros(4, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    words = win._core.ctrl64
    lock, slot = CTRL.LOCK // 8, CTRL.reader_offset(comm.size, left) // 8
    barrier(comm)
    win.Lock(right, hixl_rma.LOCK_SHARED)
    barrier(comm)
    shared_seen = (int(words[lock]), int(words[slot]))  # the left neighbour's shared hold
    barrier(comm)  # every rank has looked before any lets go
    win.Unlock(right)
    barrier(comm)
    released = (int(words[lock]), int(words[slot]))
    words[lock] = lock_word_exclusive(left)  # as if left's CAS had landed unanswered
    barrier(comm)
    t0 = time.monotonic()
    win.Lock(right, hixl_rma.LOCK_EXCLUSIVE)
    took = time.monotonic() - t0
    win.Put(np.array([rank], np.int64), right, 1)
    win.Unlock(right)
    barrier(comm)
    after = int(words[lock])
    win.Free()
    assert shared_seen == (1, 1) and released == (0, 0), (rank, shared_seen, released)
    assert took < 3.0 and after == 0 and buf[1] == left


@pytest.mark.core
def test_lock_all_unlock_all(comm, rank, left, right):
    buf = np.zeros(4, np.float64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    barrier(comm)
    win.Lock_all()
    win.Put(pattern(2, rank, np.float64), right, 2)
    win.Flush(right)
    out = np.zeros(2)
    win.Get(out, right, 2)
    win.Flush_all()
    win.Unlock_all()
    barrier(comm)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    win.Put(pattern(2, rank, np.float64, salt=1), right, 0)
    win.Unlock_all()
    barrier(comm)
    win.Free()
    np.testing.assert_array_equal(out, pattern(2, rank, np.float64))
    np.testing.assert_array_equal(buf, np.r_[pattern(2, left, np.float64, salt=1),
                                             pattern(2, left, np.float64)])


@pytest.mark.core
def test_flush_variants(comm, rank, left, right):
    buf = np.zeros(12, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    barrier(comm)
    win.Lock(right, hixl_rma.LOCK_SHARED)
    src = pattern(3, rank)
    win.Put(src, right, 0)
    win.Flush(right)
    a = np.zeros(3, np.int64)
    win.Get(a, right, 0)
    win.Flush(right)
    win.Put(pattern(3, rank, salt=1), right, 3)
    win.Flush_all()
    b = np.zeros(3, np.int64)
    win.Get(b, right, 3)
    win.Flush_local(right)       # local completion: the result buffer is ready
    src2 = pattern(3, rank, salt=2)
    win.Put(src2, right, 6)
    win.Flush_local(right)       # local completion: the origin may be reused
    src2[:] = -7
    win.Put(pattern(3, rank, salt=3), right, 9)
    win.Flush_local_all()
    win.Unlock(right)
    barrier(comm)
    win.Free()
    np.testing.assert_array_equal(a, src)
    np.testing.assert_array_equal(b, pattern(3, rank, salt=1))
    np.testing.assert_array_equal(
        buf, np.concatenate([pattern(3, left, salt=s) for s in range(4)]))


def test_lock_nocheck_and_lock_self(comm, rank, left, right):
    buf = np.zeros(4, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    barrier(comm)
    win.Lock(right, hixl_rma.LOCK_EXCLUSIVE, hixl_rma.MODE_NOCHECK)
    win.Put(pattern(2, rank), right, 0)
    win.Unlock(right)
    win.Lock(rank, hixl_rma.LOCK_EXCLUSIVE)   # local window through the same path
    win.Put(pattern(2, rank, salt=1), rank, 2)
    win.Unlock(rank)
    barrier(comm)
    win.Free()
    np.testing.assert_array_equal(buf, np.r_[pattern(2, left), pattern(2, rank, salt=1)])


def test_locks_on_two_targets_at_once(comm, rank, left, right):
    """Passive epochs to different targets may overlap (unlocked in any order)."""
    buf = np.zeros(2, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    barrier(comm)
    win.Lock(right, hixl_rma.LOCK_SHARED)
    win.Lock(rank, hixl_rma.LOCK_SHARED)
    win.Put(pattern(1, rank), right, 0)
    win.Put(pattern(1, rank, salt=1), rank, 1)
    win.Unlock(right)
    win.Unlock(rank)
    barrier(comm)
    win.Free()
    np.testing.assert_array_equal(buf, np.r_[pattern(1, left), pattern(1, rank, salt=1)])


def test_sync_is_harmless(comm, rank):
    buf = np.zeros(1, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Lock(rank)
    win.Sync()
    win.Unlock(rank)
    win.Free()
    assert buf[0] == 0


# ------------------------------------------------------------- epoch misuse

def _expect_epoch_error(fn, match):
    with pytest.raises(EpochError, match=match) as err:
        fn()
    assert err.value.status == hixl_rma.FAILED
    assert isinstance(err.value, hixl_rma.HixlError)


@pytest.mark.core
def test_rma_outside_epoch(comm, rank, right):
    buf = np.arange(4, dtype=np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    for call in (lambda: win.Put(np.ones(2, np.int64), right, 0),
                 lambda: win.Get(np.zeros(2, np.int64), right, 0),
                 lambda: win.Rput(np.ones(2, np.int64), right, 0),
                 lambda: win.Rget(np.zeros(2, np.int64), right, 0)):
        _expect_epoch_error(call, f"to rank {right} of window .*no access epoch is open")
    barrier(comm)
    win.Free()
    np.testing.assert_array_equal(buf, np.arange(4))


@pytest.mark.core
def test_sync_call_misuse(comm, rank, right):
    buf = np.zeros(2, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    _expect_epoch_error(lambda: win.Unlock(right), f"Unlock: rank {right} .* is not locked")
    _expect_epoch_error(lambda: win.Unlock_all(), "Unlock_all .* without Lock_all")
    _expect_epoch_error(lambda: win.Complete(), "Complete on window .* without Start")
    _expect_epoch_error(lambda: win.Wait(), "Wait on window .* without Post")
    _expect_epoch_error(lambda: win.Test(), "Test on window .* without Post")
    _expect_epoch_error(lambda: win.Flush(right), f"Flush: no passive-target epoch to rank {right}")
    _expect_epoch_error(lambda: win.Flush_all(), "Flush_all .* no passive-target epoch")
    _expect_epoch_error(lambda: win.Flush_local(right), f"no passive-target epoch to rank {right}")
    _expect_epoch_error(lambda: win.Flush_local_all(), "no passive-target epoch")
    win.Lock(right, hixl_rma.LOCK_SHARED)
    _expect_epoch_error(lambda: win.Lock(right, hixl_rma.LOCK_SHARED),
                        f"Lock: rank {right} .* already locked")
    _expect_epoch_error(lambda: win.Lock_all(), "Lock_all .* already open")
    _expect_epoch_error(lambda: win.Free(), "Free on window .* passive-target epoch is open")
    _expect_epoch_error(lambda: win.Fence(), "Fence on window .* passive-target epoch is open")
    _expect_epoch_error(lambda: win.Start([right]), "Start on window .* passive-target epoch")
    win.Put(np.array([rank + 1], np.int64), right, 0)   # the epoch still works
    win.Unlock(right)
    barrier(comm)
    win.Lock_all()
    _expect_epoch_error(lambda: win.Lock(right), "inside Lock_all")
    win.Unlock_all()
    barrier(comm)
    win.Free()
    assert buf[0] == (rank - 1) % comm.Get_size() + 1


@pytest.mark.core
def test_epoch_misuse_pscw_and_fence(comm, rank, size, right):
    left = (rank - 1) % size
    buf = np.zeros(2, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Post([left])
    _expect_epoch_error(lambda: win.Post([left]), "exposure epoch is already open")
    _expect_epoch_error(lambda: win.Free(), "Free on window .* exposure epoch is open")
    win.Start([right])
    _expect_epoch_error(lambda: win.Start([right]), "PSCW access epoch is open")
    _expect_epoch_error(lambda: win.Lock(right), "PSCW access epoch is open")
    _expect_epoch_error(lambda: win.Fence(), "PSCW access epoch is open")
    win.Complete()
    win.Wait()
    # A fence epoch in which RMA was issued must end with a Fence before Lock.
    win.Fence()
    win.Put(np.array([7], np.int64), right, 1)
    _expect_epoch_error(lambda: win.Lock(right), "fence epoch with RMA is open")
    win.Fence(hixl_rma.MODE_NOSUCCEED)
    win.Lock(right)
    win.Unlock(right)
    barrier(comm)
    win.Free()
    assert buf[1] == 7
