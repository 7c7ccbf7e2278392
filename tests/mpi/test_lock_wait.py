"""A Lock that finds the lock word taken waits in C where the word is mapped
here: it sleeps in the kernel on the word, counted in the target's control
block (ctrl.LOCK_WAITERS), and the release wakes it. The count is proven
while the waiters wait, the data the holder wrote before its release is
what every waiter finds, and nothing stays counted once all are done.
"""
import time

import numpy as np
import pytest

from hixl_rma import LOCK_EXCLUSIVE, LOCK_SHARED, Win
from hixl_rma.window import ctrl as CTRL

from support.mpiutil import barrier, one_node

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

HOLDER, TARGET = 0, 1


def _ctrl_word(win, offset):
    """A word of TARGET's control block, read with an engine atomic (as any rank may)."""
    w = win._core
    t = w.targets[TARGET]
    return w.ctrl_atomic(t, "ADD", 0, offset=offset)


@pytest.mark.parametrize("lock_type", [LOCK_EXCLUSIVE, LOCK_SHARED])
def test_waiters_sleep_counted_on_the_word_and_find_what_the_holder_wrote(comm, rank, size, lock_type):
    if not one_node():
        pytest.skip("the lock word is mapped (and slept on) only by ranks of its own node")
    win = Win.Allocate(8, disp_unit=8, comm=comm)
    np.frombuffer(win.tomemory(), np.int64)[:] = 0
    barrier(comm)
    if rank == HOLDER:
        win.Lock(TARGET, LOCK_EXCLUSIVE)
    barrier(comm)  # held
    seen = got = None
    if rank == HOLDER:
        waiters = size - 1
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            seen = _ctrl_word(win, CTRL.LOCK_WAITERS)
            if seen == waiters:
                break
            time.sleep(0.01)
        win.Put(np.full(1, 4242, np.int64), TARGET, 0)
        win.Unlock(TARGET)
    else:
        win.Lock(TARGET, lock_type)
        got = np.zeros(1, np.int64)
        win.Get(got, TARGET, 0)
        win.Flush(TARGET)
        win.Unlock(TARGET)
    barrier(comm)
    left = (_ctrl_word(win, CTRL.LOCK_WAITERS), _ctrl_word(win, CTRL.LOCK))
    barrier(comm)
    win.Free()
    if rank == HOLDER:
        assert seen == size - 1, f"{seen} of {size - 1} waiters were asleep on the word while it was held"
    else:
        assert got[0] == 4242, got
    assert left == (0, 0), f"(waiters, lock word) after every rank was done: {left}"
