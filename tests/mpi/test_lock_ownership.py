"""Only a death breaks a hold (issue 23, item 5): a rank that could not be
connected once is not dead, its locks are not broken by waiters, the next
call connects again; and a release never takes from a lock word bits it
does not own.
"""
import time

import numpy as np
import pytest

from hixl_rma import LOCK_EXCLUSIVE, PeerFailure, Win
from hixl_rma import runtime as _rt
from hixl_rma._engine import lock_word_exclusive
from hixl_rma.window import ctrl as CTRL

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=3), pytest.mark.timeout(60, method="thread")]

HOLDER, TARGET, WAITER = 0, 1, 2
HOLD_S = 2.0


def _refuse_once(st, world_rank):
    """The next connection to world_rank fails (as one to a peer out of file
    descriptors would); then it is reachable again."""
    saved, was = st.candidates[world_rank], world_rank in st.connected
    st.candidates[world_rank] = ["127.0.0.1:1"]   # nothing listens there
    st.connected.discard(world_rank)
    try:
        with pytest.raises(PeerFailure, match=f"world rank {world_rank} cannot be reached"):
            st.connect(world_rank)
    finally:
        st.candidates[world_rank] = saved
        if was:
            st.connected.add(world_rank)


def test_a_refused_connection_is_not_a_death_and_breaks_no_lock(comm, rank):
    st = _rt.runtime()
    assert comm.Get_size() == st.size  # the test's communicator is all of the world, in order
    win = Win.Allocate(8, comm=comm)
    mem = np.frombuffer(win.tomemory(), np.int64)
    mem[:] = 0
    waited = word = None
    barrier(comm)
    if rank == HOLDER:
        win.Lock(TARGET, LOCK_EXCLUSIVE)
    barrier(comm)  # the holder holds
    if rank == HOLDER:
        time.sleep(HOLD_S)
        win.Put(np.full(1, 11, np.int64), TARGET, 0)
        win.Unlock(TARGET)
    elif rank == WAITER:
        _refuse_once(st, HOLDER)
        assert not st.is_dead(HOLDER)
        t0 = time.monotonic()
        win.Lock(TARGET, LOCK_EXCLUSIVE)   # checks for dead holders every 0.1 s while it waits
        waited = time.monotonic() - t0
        got = np.zeros(1, np.int64)
        win.Get(got, TARGET, 0)
        win.Unlock(TARGET)
        assert got[0] == 11  # the holder's Put came first: the waiter had to wait for it
        st.connect(HOLDER)   # the next call connects again
    barrier(comm)
    if rank == TARGET:
        word = int(win._core.ctrl64[CTRL.LOCK // 8])
    barrier(comm)
    win.Free()
    if rank == WAITER:
        assert waited > HOLD_S / 2, f"the waiter took the lock after {waited:.2f} s: it broke a live hold"
    if rank == TARGET:
        assert word == 0, f"the lock word is {word:#x} after every lock was released"


def test_a_release_takes_only_its_own_bits(comm, rank):
    """An exclusive holder whose hold is no longer in the word (another rank
    broke it and took the lock) gets PeerFailure from Unlock, and the new
    holder's bits stay."""
    win = Win.Allocate(8, comm=comm)
    barrier(comm)
    error = word = None
    if rank == HOLDER:
        win.Lock(TARGET, LOCK_EXCLUSIVE)
    barrier(comm)
    if rank == WAITER:
        # What a rank that (wrongly) believed the holder dead would do:
        # break its hold, then take the lock itself.
        t = win._core.targets[TARGET]
        holder = lock_word_exclusive(HOLDER)
        assert win._core.ctrl_atomic(t, "CSWAP", 0, compare=holder) == holder
        mine = lock_word_exclusive(WAITER)
        assert win._core.ctrl_atomic(t, "CSWAP", mine, compare=0) == 0
    barrier(comm)
    if rank == HOLDER:
        with pytest.raises(PeerFailure, match="was not this rank's any more") as err:
            win.Unlock(TARGET)
        error = str(err.value)
    barrier(comm)
    if rank == TARGET:
        word = int(win._core.ctrl64[CTRL.LOCK // 8])
    barrier(comm)
    if rank == WAITER:
        t = win._core.targets[TARGET]
        win._core.ctrl_atomic(t, "CSWAP", 0, compare=lock_word_exclusive(WAITER))
    barrier(comm)
    win.Free()
    if rank == TARGET:
        assert word == lock_word_exclusive(WAITER), f"the new holder's word became {word:#x}"
    if rank == HOLDER:
        assert "nothing was released" in error
