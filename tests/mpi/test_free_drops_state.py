"""Free leaves nothing of a window in the process-wide runtime.

Each window's notification queues (its PSCW ``post`` and ``complete``
notices, its ``Notify`` tags) live in the runtime, keyed by the window.
Free drops them, for every kind of window and for the HIXL face's
RegisterMemory / DeregisterMemory; a notification that arrives for a freed
window is dropped too (it must not bring the queue back), while one that
arrives before its window was made here is kept for it.
"""
import struct

import numpy as np
import pytest
from mpi4py import MPI

from hixl_rma import Win
from hixl_rma import hixl_api as H
from hixl_rma import runtime as _rt

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(300, method="thread")]

KINDS = ("create", "allocate", "shared", "dynamic", "register")
_TAG = struct.Struct("<q")


def _make(kind, comm):
    """A window of ``kind`` on comm; (the Win, what frees it)."""
    if kind == "create":
        win = Win.Create(np.zeros(64, np.uint8), 1, None, comm)
    elif kind == "allocate":
        win = Win.Allocate(64, 1, None, comm)
    elif kind == "shared":
        win = Win.Allocate_shared(64, 1, None, comm)
    elif kind == "dynamic":
        win = Win.Create_dynamic(None, comm)
    else:
        handle = H.RegisterMemory(np.zeros(64, np.uint8), comm=comm)
        return handle.win, lambda: H.DeregisterMemory(handle)
    return win, win.Free


def _use(win, kind, ring, group, tag):
    """What fills a window's queues: a PSCW epoch (post, complete) and a tag."""
    if kind == "register":  # the HIXL face's epoch is always open
        win.Notify(ring.right, tag)
    else:
        win.Post(group)
        win.Start(group)
        win.Notify(ring.right, tag)
        win.Complete()
        win.Wait()
    assert win.Wait_notify(tag, ring.left) == (ring.left, tag)


@pytest.mark.parametrize("count", [300])
def test_free_drops_notify_queues(comm, ring, count):
    """300 windows of every kind, each with PSCW and notifications, freed:
    the runtime holds as many queues as before."""
    st = _rt.runtime()
    group = comm.Get_group()
    barrier(comm)
    start = len(st.notify_queues)
    try:
        for i in range(count):
            kind = KINDS[i % len(KINDS)]
            win, free = _make(kind, comm)
            _use(win, kind, ring, group, i)
            assert len(st.notify_queues) > start, "the window's use queued nothing: the test proves nothing"
            free()
            assert len(st.notify_queues) == start, (
                f"after Free of window {i} ({kind}): {len(st.notify_queues) - start} queue(s) left: "
                f"{sorted(st.notify_queues)[:6]}")
    finally:
        group.Free()


def _stray(st, world, name, tag):
    """An engine notification named ``name`` to world rank ``world``."""
    st.engine.send_notify(st.connect(world), f"{name}/{st.rank}", _TAG.pack(tag), st.timeout_ms)


def _notify(win, rank, tag):
    win.Lock_all()
    win.Notify(rank, tag)
    win.Unlock_all()


def _world(comm, rank):
    return MPI.Group.Translate_ranks(comm.Get_group(), [rank], MPI.COMM_WORLD.Get_group())[0]


def test_late_notify_for_freed_window_is_dropped(comm, ring):
    """Notifications sent to a window after its Free (its tags, its PSCW
    notices) leave no queue behind and break nothing."""
    st = _rt.runtime()
    barrier(comm)
    start = len(st.notify_queues)
    gone = Win.Allocate(64, 1, None, comm)
    key = gone._core.key
    gone.Free()
    live = Win.Allocate(64, 1, None, comm)
    right = _world(comm, ring.right)
    for kind in ("n", "post", "complete"):
        _stray(st, right, f"{key}:{kind}", 7)
    # The engine keeps one peer's notifications in order: once this one is
    # here, the strays were taken before it.
    _notify(live, ring.right, 8)
    assert live.Wait_notify(8, ring.left) == (ring.left, 8)
    st.poll_notifies()
    left = [k for k in st.notify_queues if k.startswith(f"{key}:")]
    assert not left, f"notifications for freed window {key} queued again: {left}"
    live.Free()
    assert len(st.notify_queues) == start


def test_notify_before_window_is_made_here_is_kept(comm, ring):
    """A notification for a window its sender made before this rank did
    (its key not known here yet) waits for the window."""
    st = _rt.runtime()
    barrier(comm)
    start = len(st.notify_queues)
    live = Win.Allocate(64, 1, None, comm)
    # The next window's key: comm rank 0's next window id.
    seq = np.array([st.next_window_id], np.int64)
    _rt.collective(comm, lambda: comm.Ibcast(seq, root=0), "Ibcast", st.timeout_ms, keep=seq)
    key = f"w{_world(comm, 0)}.{int(seq[0])}"
    _stray(st, _world(comm, ring.right), f"{key}:n", 42)
    _notify(live, ring.right, 1)
    assert live.Wait_notify(1, ring.left) == (ring.left, 1)
    st.poll_notifies()
    barrier(comm)
    early = Win.Allocate(64, 1, None, comm)
    try:
        assert early._core.key == key
        assert early.Wait_notify(42, ring.left, timeout=30) == (ring.left, 42)
    finally:
        early.Free()
        live.Free()
    assert len(st.notify_queues) == start

