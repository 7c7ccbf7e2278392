"""The engine's helper threads never stand between a caller and its deadline.

The copy thread (detached Put_batch copies and the notifies behind them) and
the prefault helper take cores nobody else wants. Here they are starved on
purpose: each is pinned to a core that a busy process (at normal priority)
holds, while another busy process holds every other core, as on a loaded
server. A caller that needs their work done (Flush, RefreshPeer) must do it
itself within its deadline, the process's own mmap/munmap must not wait for
them, and the target-side progress of other peers must not depend on them.
"""

import contextlib
import json
import mmap
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import hixl_rma
from hixl_rma import WRITE, _engine
from hixl_rma.ground.errors import HixlTimeoutError

from support import procutil
from test_engine import DIRECT

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not DIRECT, reason="needs peer memory mapped into this process")]

MiB = 1 << 20


def threads_named(name):
    """The ids of this process's threads called ``name``."""
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    out.append(int(tid))
        except OSError:
            continue  # it ended meanwhile
    return out


@contextlib.contextmanager
def starved(*names, seconds=60):
    """Pin the threads called ``names`` to one core and keep every core busy
    with a process at normal priority (each ends by itself after ``seconds``,
    should this process die first)."""
    cores = sorted(os.sched_getaffinity(0))
    victim = cores[-1]
    deadline = time.monotonic() + 2  # a thread just started names itself first thing
    while not (tids := [t for n in names for t in threads_named(n)]) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert tids, f"no thread called {names}"
    spin = ("import os, time\nos.sched_setaffinity(0, {%d})\nend = time.monotonic() + %d\n"
            "while time.monotonic() < end: pass\n")
    busy = [subprocess.Popen([sys.executable, "-c", spin % (c, seconds)]) for c in cores]
    try:
        for t in tids:
            os.sched_setaffinity(t, {victim})
        time.sleep(0.05)  # the busy processes run
        yield tids
    finally:
        for p in busy:
            p.kill()
            p.wait()
        for t in tids:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(t, set(cores))


def blocks(n_bytes, block):
    n = n_bytes // block
    offsets = np.stack([np.arange(n, dtype=np.int64) * block, np.full(n, block, np.int64)], axis=1)
    return offsets, np.arange(n, dtype=np.int64) * block


def put_batch(a, remote, src, base, size, block=4 * MiB):
    """A Put_batch's post: its copies into the mapped target go to the copy thread."""
    offsets, disps = blocks(src.nbytes, block)
    assert _engine.post_batch(a, remote, WRITE, src, offsets, disps, 1, base, size)


def test_flush_takes_over_from_a_starved_copy_thread():
    """Issue 23.3: 64 MiB posted for the copy thread, which cannot run: the
    Flush makes the copies itself, at its own priority, within its deadline."""
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    try:
        n = 64 * MiB
        tgt = b.alloc_mem(n)
        dst = np.frombuffer(tgt, np.uint8)
        a.connect(b.address)
        src = (np.arange(n // 8, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).view(np.uint8)
        took = []
        with starved("hixl-copy"):
            for _ in range(3):
                dst[:] = 0
                t0 = time.monotonic()
                put_batch(a, b.address, src, tgt.addr, n)
                a.flush(b.address, 3000)
                took.append(time.monotonic() - t0)
                assert np.array_equal(dst, src)
        assert max(took) < 1.0, took
    finally:
        a.finalize()
        b.finalize()


def _mmap_stall(seconds):
    """The longest a 1 MiB anonymous mmap + munmap of this process took, tried for ``seconds``."""
    worst, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        m = mmap.mmap(-1, MiB)
        m.close()
        worst = max(worst, time.monotonic() - t0)
        time.sleep(0.002)
    return worst


def test_refresh_keeps_its_deadline_and_mmap_never_waits_for_a_starved_prefault_helper():
    """Issue 23.4: a 512 MiB peer window mapped at connect is populated by the
    prefault helper, which cannot run. The process's own mmap/munmap do not
    wait for it, and RefreshPeer (hixl_rma.Connect on a connected rank)
    finishes the population itself within its deadline."""
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    try:
        n = 512 * MiB
        b.alloc_mem(n)
        a.connect(b.address)  # maps it; the helper starts on it a little later
        with starved("hixl-prefault"):
            stall = _mmap_stall(1.0)
            t0 = time.monotonic()
            a.refresh(b.address, 3000)
            took = time.monotonic() - t0
        assert took < 3.5, took
        assert stall < 0.25, stall
    finally:
        a.finalize()
        b.finalize()


STALLED_PEER = textwrap.dedent(r'''
    import json, os, sys, time
    import numpy as np
    import hixl_rma
''') + procutil.FILES + textwrap.dedent(r'''
    e = hixl_rma.Engine()
    words = np.zeros(8, np.uint64)
    e.register_mem(words)
    mem = e.alloc_mem(16 << 20)
    publish(sys.argv[1], dict(address=e.address, words=words.ctypes.data, mem=mem.addr, size=16 << 20))
    while True:
        time.sleep(1)
''')


@pytest.fixture
def stalled_peer(tmp_path):
    """A peer engine in a process of its own: (info, popen); SIGSTOP it to stall it."""
    script = tmp_path / "peer.py"
    script.write_text(STALLED_PEER)
    info = str(tmp_path / "peer.json")
    p = subprocess.Popen([sys.executable, str(script), info], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(info):
            assert p.poll() is None and time.monotonic() < deadline, p.stdout.read() if p.poll() is not None else ""
            time.sleep(0.01)
        with open(info) as f:
            yield json.load(f), p
    finally:
        p.send_signal(signal.SIGCONT)
        p.kill()
        p.wait()


def _notify_stuck_behind_a_stalled_peer(a, peer, proc, timeout_ms):
    """A's copy thread ends up waiting for the stalled peer: a posted atomic
    the peer cannot answer, a detached copy, and the notify behind it, which
    must first complete that atomic (so it waits until ``timeout_ms``)."""
    r = peer["address"]
    a.connect(r)
    procutil.stop(proc.pid)
    a.atomic_post(r, peer["words"], "ADD", 1)  # software atomic: needs the stopped peer
    src = np.ones(8 * MiB, np.uint8)
    # Copies enough to still run when the notify is posted: one batch is done
    # in about a millisecond, which a busy machine's scheduler can take from
    # this thread between the two calls (the notify is then sent directly).
    for _ in range(8):
        put_batch(a, r, src, peer["mem"], peer["size"])
    assert a.post_notify(r, "tag", b"", timeout_ms)  # queued behind the copies
    return src


def test_progress_thread_serves_other_peers_while_the_copy_thread_waits(stalled_peer):
    """Issue 23.12: while A's copy thread waits in the worker for a stalled
    peer, A's progress thread does not step aside for it: C's atomics on A
    (which need A's progress) are served although the copy thread cannot run."""
    peer, proc = stalled_peer
    a, c = hixl_rma.Engine(), hixl_rma.Engine()
    try:
        words = np.zeros(8, np.uint64)
        a.register_mem(words)
        c.connect(a.address)
        keep = _notify_stuck_behind_a_stalled_peer(a, peer, proc, 5000)
        time.sleep(0.3)  # the copies are made; the notify's flush waits for the peer
        with starved("hixl-copy"):
            t0 = time.monotonic()
            for _ in range(50):
                c.atomic_fetch_add(a.address, words.ctypes.data, 1, 10000)
            took = time.monotonic() - t0
        assert words[0] == 50
        assert took < 2.0, took
        proc.send_signal(signal.SIGCONT)
        with contextlib.suppress(HixlTimeoutError):
            a.flush(peer["address"], 10000)  # the notify timed out meanwhile: reported once
        del keep
    finally:
        proc.send_signal(signal.SIGCONT)
        a.finalize()
        c.finalize()


def test_liveness_query_leaves_the_copy_threads_failure_to_the_next_flush(stalled_peer):
    """Issue 23.10: the notify queued behind detached copies fails (its peer
    stalled past the timeout). A liveness query of the peer (what the
    runtime's is_dead asks) says it is alive and consumes nothing: the next
    Flush raises that failure, once."""
    peer, proc = stalled_peer
    r = peer["address"]
    a = hixl_rma.Engine()
    try:
        keep = _notify_stuck_behind_a_stalled_peer(a, peer, proc, 300)
        deadline = time.monotonic() + 20
        while a.peer_stats(r)["detached"] and time.monotonic() < deadline:
            time.sleep(0.01)  # the notify's wait for the peer times out (in the copy thread)
        assert a.peer_stats(r)["detached"] == 0
        proc.send_signal(signal.SIGCONT)
        for _ in range(3):
            assert a.peer_dead(r) is False
        with pytest.raises(HixlTimeoutError, match="SendNotify"):
            a.flush(r, 5000)
        a.flush(r, 5000)  # reported once
        assert a.peer_dead(r) is False
        del keep
    finally:
        proc.send_signal(signal.SIGCONT)
        a.finalize()


def test_a_late_table_answer_is_dropped(stalled_peer):
    """Issue 23.11: a table refresh times out while its peer is stalled; the
    answer that arrives once the peer runs again is dropped, not kept."""
    peer, proc = stalled_peer
    r = peer["address"]
    a = hixl_rma.Engine()
    try:
        a.connect(r)
        for _ in range(3):
            procutil.stop(proc.pid)
            with pytest.raises(HixlTimeoutError, match="no answer"):
                a.refresh(r, 200)
            proc.send_signal(signal.SIGCONT)
            a.refresh(r, 10000)  # a later request gets its own answer
        time.sleep(0.2)  # any late answer has arrived by now
        assert a.peer_stats(r)["answers_held"] == 0
    finally:
        proc.send_signal(signal.SIGCONT)
        a.finalize()
