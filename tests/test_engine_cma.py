"""The engine's own vectored cma path (process_vm_writev/readv, up to 1,024
blocks per call) for same-node peers, and its fallback to UCX.

Registered (not engine-allocated) memory of a peer in this pid namespace
is moved by the engine itself; ``HIXL_RMA_CMA=0`` turns that off (UCX moves
every block) and ``HIXL_RMA_CMA=short`` makes every call stop half-way
through a block, so that the rest of each batch takes the UCX fallback.
Every mode must move exactly the same bytes. The engine reads the switch at
Initialize, so each test makes its engines after setting it.
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import hixl_rma
from hixl_rma import READ, WRITE
from hixl_rma.ground.errors import HixlError, ParamError, PeerFailure

pytestmark = pytest.mark.timeout(120)

KiB = 1 << 10
PAGE = 4 * KiB
MODES = ["on", "short", "off"]


def _tls_allows_cma():
    tls = os.environ.get("UCX_TLS", "")
    if not tls:
        return True
    names = tls.lstrip("^").split(",")
    return any(n in ("cma", "sm", "shm", "all") for n in names) != tls.startswith("^")


VECTORED = _tls_allows_cma()


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    if request.param == "on":
        monkeypatch.delenv("HIXL_RMA_CMA", raising=False)
    else:
        monkeypatch.setenv("HIXL_RMA_CMA", "0" if request.param == "off" else "short")
    return request.param


@pytest.fixture
def pair(mode):
    """(origin, target) engines made under ``mode``; origin connected to target."""
    a = hixl_rma.Engine()
    b = hixl_rma.Engine()
    a.connect(b.address)
    yield a, b
    a.finalize()
    b.finalize()


def pattern(seed, n):
    return np.frombuffer(np.random.default_rng(seed).bytes(n), dtype=np.uint8).copy()


def scattered(rng, sizes, gap_max):
    """Non-overlapping target offsets for blocks of ``sizes``, in random order,
    with gaps between them: (offsets, total span)."""
    order = rng.permutation(len(sizes))
    offs = np.empty(len(sizes), dtype=np.uint64)
    pos = 0
    for i in order:
        pos += int(rng.integers(1, gap_max))
        offs[i] = pos
        pos += int(sizes[i])
    return offs, pos + gap_max


def scattered_write(a, b, rng, sizes, gap_max, seed):
    """Registered memory for a WRITE of blocks of ``sizes`` from a packed
    source (a) to scattered places in a target (b): (target, src, source
    offsets, target offsets, descriptors, the target expected afterwards)."""
    toffs, span = scattered(rng, sizes, gap_max)
    target = np.zeros(span, dtype=np.uint8)
    b.register_mem(target)
    src = pattern(seed, int(sizes.sum()))
    a.register_mem(src)
    loffs = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.uint64)
    descs = np.stack([src.ctypes.data + loffs, target.ctypes.data + toffs, sizes], axis=1)
    ref = np.zeros(span, dtype=np.uint8)
    for lo, to, ln in zip(loffs.tolist(), toffs.tolist(), sizes.tolist(), strict=True):
        ref[to:to + ln] = src[lo:lo + ln]
    return target, src, loffs, toffs, descs, ref


def check_vectored(mode, before, after, n):
    """The stats show which path moved the n blocks."""
    moved = after["vectored_ops"] - before["vectored_ops"]
    if mode == "off" or not VECTORED:
        assert moved == 0, (before, after)
    elif mode == "on":
        assert moved == n, (before, after)
        # 1,024 blocks a call; threads sharing a large batch claim runs of
        # ~512 KiB, each its own call
        calls = after["vectored_calls"] - before["vectored_calls"]
        moved_bytes = sum(after[k] - before[k] for k in ("bytes_written", "bytes_read"))
        assert -(-n // 1024) <= calls <= -(-n // 1024) + moved_bytes // (512 << 10) + 1, (before, after)
    else:
        assert 0 < moved < n or n == 1, (before, after)


SIZE_MIXES = {
    "below_page": lambda rng, n: rng.integers(1, PAGE, n),
    "page": lambda rng, n: np.full(n, PAGE),
    "above_page": lambda rng, n: rng.integers(PAGE + 1, 5 * PAGE, n),
    "mixed": lambda rng, n: rng.choice([1, 8, 100, PAGE - 1, PAGE, PAGE + 1, 3 * PAGE + 5, 64 * KiB], n),
}


@pytest.mark.parametrize("mix", sorted(SIZE_MIXES))
@pytest.mark.parametrize("n", [1, 3000])
def test_scattered_write_then_read(pair, mode, mix, n):
    """n non-adjacent blocks (3000: three system calls) to registered memory
    and back; bytes around every block stay untouched."""
    a, b = pair
    rng = np.random.default_rng(len(mix) * 7 + n)
    sizes = SIZE_MIXES[mix](rng, n).astype(np.uint64)
    target, src, loffs, toffs, descs, ref = scattered_write(a, b, rng, sizes, 512, n)
    span = len(target)
    before = a.stats()
    a.transfer_sync(b.address, WRITE, descs)
    np.testing.assert_array_equal(target, ref)
    check_vectored(mode, before, a.stats(), n)
    # READ the blocks back into a fresh buffer, after changing the target.
    target[:] = pattern(n + 1, span)
    back = np.zeros_like(src)
    a.register_mem(back)
    descs[:, 0] = back.ctypes.data + loffs
    before = a.stats()
    a.transfer_sync(b.address, READ, descs)
    expect = np.zeros_like(src)
    for lo, to, ln in zip(loffs.tolist(), toffs.tolist(), sizes.tolist(), strict=True):
        expect[lo:lo + ln] = target[to:to + ln]
    np.testing.assert_array_equal(back, expect)
    check_vectored(mode, before, a.stats(), n)


@pytest.fixture
def threads_pair(mode, threads):
    """Like ``pair``, the origin made with option CmaThreads=``threads``."""
    a = hixl_rma.Engine(options={"CmaThreads": threads})
    b = hixl_rma.Engine()
    a.connect(b.address)
    yield a, b
    a.finalize()
    b.finalize()


@pytest.mark.parametrize("threads", ["1", "2"])
def test_large_blocks_are_shared_out(threads_pair, mode, threads):
    """Blocks of several MiB are cut into 512 KiB pieces that the engine's
    threads claim one run at a time (and that the fallback resumes from the
    exact byte): the bytes land as they would with one call per block."""
    a, b = threads_pair
    MiB = 1 << 20
    sizes = np.array([5 * MiB + 3, 100, 2 * MiB, 7 * MiB - 1], dtype=np.uint64)
    rng = np.random.default_rng(11)
    target, src, loffs, _, descs, ref = scattered_write(a, b, rng, sizes, 4096, 5)
    before = a.stats()
    a.transfer_sync(b.address, WRITE, descs)
    np.testing.assert_array_equal(target, ref)
    after = a.stats()
    if mode == "on" and VECTORED:
        assert after["vectored_ops"] - before["vectored_ops"] == len(sizes), (before, after)
        # one thread: one system call; two: one call per run of ~512 KiB claimed
        calls = after["vectored_calls"] - before["vectored_calls"]
        if threads == "1" or len(os.sched_getaffinity(0)) == 1:
            assert calls == 1, (before, after)
        else:
            assert calls == sum(sizes) // (512 << 10), (before, after)
    back = np.zeros_like(src)
    a.register_mem(back)
    descs[:, 0] = back.ctypes.data + loffs
    a.transfer_sync(b.address, READ, descs)
    np.testing.assert_array_equal(back, src)


@pytest.mark.skipif(not VECTORED or (os.cpu_count() or 1) > 8, reason="needs the cma path; hogs every core")
def test_default_helper_only_on_an_idle_core(monkeypatch):
    """By default a large transfer takes a second (idle-priority) thread only
    while a core is idle: with every core busy it moves on the caller's
    thread alone (one system call), since a helper starved on a busy core
    would hold the transfer up; the bytes land either way."""
    monkeypatch.delenv("HIXL_RMA_CMA", raising=False)
    monkeypatch.delenv("HIXL_RMA_CMA_THREADS", raising=False)
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    hog = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(os.cpu_count() or 1)]
    try:
        a.connect(b.address)
        n = 8 << 20
        target = np.zeros(n, np.uint8)
        b.register_mem(target)
        src = pattern(5, n)
        a.register_mem(src)
        time.sleep(0.3)  # the hogs are running
        before = a.stats()
        a.transfer_sync(b.address, WRITE, [(src.ctypes.data, target.ctypes.data, n)])
        after = a.stats()
        np.testing.assert_array_equal(target, src)
        assert after["vectored_calls"] - before["vectored_calls"] == 1, (before, after)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        a.finalize()
        b.finalize()


def test_post_then_flush_and_async(pair, mode):
    """post + flush and transfer_async move the same bytes (the vectored path
    is synchronous; the UCX rest completes at the flush)."""
    a, b = pair
    n, blk = 2100, 1000
    target = np.zeros(2 * n * blk, dtype=np.uint8)
    b.register_mem(target)
    src = pattern(3, n * blk)
    a.register_mem(src)
    descs = np.stack([src.ctypes.data + np.arange(n, dtype=np.uint64) * blk,
                      target.ctypes.data + np.arange(n, dtype=np.uint64)[::-1] * 2 * blk,
                      np.full(n, blk, dtype=np.uint64)], axis=1)
    ref = np.zeros_like(target).reshape(n, 2 * blk)
    ref[::-1, :blk] = src.reshape(n, blk)
    a.post(b.address, WRITE, descs)
    a.flush(b.address)
    np.testing.assert_array_equal(target, ref.reshape(-1))
    target[:] = 0
    req = a.transfer_async(b.address, WRITE, descs)
    req.wait(10000)
    np.testing.assert_array_equal(target, ref.reshape(-1))


def test_mixed_mapped_and_registered_batch(pair, mode):
    """One batch over an engine-allocated (mapped: memcpy) and a registered
    (vectored or UCX) region: both land."""
    a, b = pair
    n, blk = 1500, 700
    reg = np.zeros(n * blk, dtype=np.uint8)
    b.register_mem(reg)
    h = b.alloc_mem(n * blk)
    alloc = np.frombuffer(h, dtype=np.uint8)
    alloc[:] = 0
    src = pattern(5, 2 * n * blk)
    a.register_mem(src)
    idx = np.arange(n, dtype=np.uint64)
    descs = np.concatenate([
        np.stack([src.ctypes.data + 2 * idx * blk, reg.ctypes.data + idx * blk, np.full(n, blk, np.uint64)], 1),
        np.stack([src.ctypes.data + (2 * idx + 1) * blk, h.addr + idx * blk, np.full(n, blk, np.uint64)], 1),
    ])[np.random.default_rng(0).permutation(2 * n)]
    a.transfer_sync(b.address, WRITE, descs)
    pairs = src.reshape(n, 2, blk)
    np.testing.assert_array_equal(reg.reshape(n, blk), pairs[:, 0])
    np.testing.assert_array_equal(alloc.reshape(n, blk), pairs[:, 1])


@pytest.mark.parametrize("bad", [5, 1500])
def test_batch_with_bad_block_moves_nothing(pair, mode, bad):
    """A block past the registered region (in the first or the second
    system call's share) refuses the whole batch before any byte moves."""
    a, b = pair
    n, blk = 2048, 256
    target = np.full(n * blk + 4096, 0x33, dtype=np.uint8)
    b.register_mem(target[:n * blk])  # the tail is not registered
    snapshot = target.copy()
    src = np.full(n * blk, 0xC5, dtype=np.uint8)
    a.register_mem(src)
    descs = np.stack([src.ctypes.data + np.arange(n, dtype=np.uint64) * blk,
                      target.ctypes.data + np.arange(n, dtype=np.uint64) * blk,
                      np.full(n, blk, dtype=np.uint64)], axis=1)
    descs[bad, 1] = target.ctypes.data + n * blk - blk // 2  # straddles the end
    before = a.stats()
    for op in (WRITE, READ):
        with pytest.raises(ParamError, match=f"block {bad}"):
            a.transfer_sync(b.address, op, descs)
        with pytest.raises(ParamError, match=f"block {bad}"):
            a.post(b.address, op, descs)
    a.flush(b.address)
    np.testing.assert_array_equal(target, snapshot)
    assert (src == 0xC5).all()
    assert a.stats()["vectored_ops"] == before["vectored_ops"]


def test_tcp_only_never_vectored(monkeypatch):
    """UCX_TLS without cma: the engine honours it and lets UCX move every block."""
    monkeypatch.setenv("UCX_TLS", "tcp")
    monkeypatch.delenv("HIXL_RMA_CMA", raising=False)
    with hixl_rma.Engine() as a, hixl_rma.Engine() as b:
        a.connect(b.address)
        target = np.zeros(64 * KiB, dtype=np.uint8)
        b.register_mem(target)
        src = pattern(9, 32 * KiB)
        a.register_mem(src)
        idx = np.arange(32, dtype=np.uint64)
        descs = np.stack([src.ctypes.data + idx * KiB, target.ctypes.data + 2 * idx * KiB,
                          np.full(32, KiB, np.uint64)], 1)
        a.transfer_sync(b.address, WRITE, descs)
        np.testing.assert_array_equal(target.reshape(32, 2, KiB)[:, 0], src.reshape(32, KiB))
        assert a.stats()["vectored_ops"] == 0


# ------------------------------------------------------ between processes

TARGET = textwrap.dedent(r'''
    import json, os, sys
    import numpy as np
    import hixl_rma
    e = hixl_rma.Engine(options={"JobToken": "cma"})
    mem = np.zeros(int(sys.argv[2]), dtype=np.uint8)
    e.register_mem(mem)
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump(dict(address=e.address, base=mem.ctypes.data), f)
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    cmd = sys.stdin.readline().strip()  # sleeps until the test speaks (or kills us)
    if cmd == "dump":
        sys.stdout.write(mem.tobytes().hex())
        sys.stdout.flush()
    e.finalize()
''')


def _start_target(tmp_path, size, mode):
    script = tmp_path / "cma_target.py"
    script.write_text(TARGET)
    info = tmp_path / "target.json"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen([sys.executable, str(script), str(info), str(size)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 30
    while not info.exists():
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            pytest.fail(f"target did not start: {p.communicate(timeout=10)}")
        time.sleep(0.01)
    return p, json.loads(info.read_text())


@pytest.mark.parametrize("death", ["exit", "kill"])
def test_two_procs_vectored_then_peer_death(tmp_path, mode, death):
    """Between two processes: 4,096 non-adjacent blocks land exactly (checked
    by the target itself), read back exactly; then the target exits or is
    killed and the next transfer is PeerFailure, not a crash."""
    n, blk = 4096, 3000
    size = 2 * n * blk
    p, info = _start_target(tmp_path, size, mode)
    try:
        with hixl_rma.Engine(options={"JobToken": "cma"}) as a:
            r = info["address"]
            a.connect(r)
            src = pattern(11, n * blk)
            a.register_mem(src)
            idx = np.arange(n, dtype=np.uint64)
            descs = np.stack([src.ctypes.data + idx * blk, info["base"] + 2 * idx[::-1] * blk,
                              np.full(n, blk, np.uint64)], 1)
            before = a.stats()
            a.transfer_sync(r, WRITE, descs)
            check_vectored(mode, before, a.stats(), n)
            back = np.zeros_like(src)
            a.register_mem(back)
            descs[:, 0] = back.ctypes.data + idx * blk
            a.transfer_sync(r, READ, descs)
            np.testing.assert_array_equal(back, src)
            if death == "kill":
                p.kill()
                p.communicate(timeout=10)
            else:
                out, err = p.communicate("dump\n", timeout=60)
                assert p.returncode == 0, err
                got = np.frombuffer(bytes.fromhex(out), dtype=np.uint8).reshape(n, 2, blk)
                np.testing.assert_array_equal(got[::-1, 0], src.reshape(n, blk))
                assert not got[:, 1].any(), "bytes between the blocks were written"
            # The target is gone now: a transfer fails with PeerFailure.
            err = None
            deadline = time.monotonic() + 10
            while err is None and time.monotonic() < deadline:
                try:
                    a.transfer_sync(r, WRITE, descs[:8], timeout_ms=2000)
                    time.sleep(0.01)
                except HixlError as exc:
                    err = exc
            assert isinstance(err, PeerFailure), repr(err)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=10)


def test_floor_cma_moves_the_bytes_it_times():
    """The benchmark's floor peer (hixl_rma.bench._floor.floor_cma, the
    benchmark's extension, not the engine's) makes the real system calls:
    here into this process's own memory, every block lands at its stride;
    bad arguments are refused before any call."""
    from hixl_rma.bench._floor import floor_cma

    src = np.arange(64, dtype=np.uint8)
    dst = np.zeros(256, np.uint8)
    ns = floor_cma(os.getpid(), dst.ctypes.data, src, 16, 4, 64, 3)
    assert len(ns) == 3 and all(t > 0 for t in ns)
    for i in range(4):
        assert (dst[i * 64:i * 64 + 16] == src[i * 16:(i + 1) * 16]).all()
        assert not dst[i * 64 + 16:(i + 1) * 64].any()
    back = np.zeros(16, np.uint8)
    floor_cma(os.getpid(), dst.ctypes.data, back, 16, 1, 0, 1, write=False)
    assert (back == src[:16]).all()
    with pytest.raises(ValueError, match="64 bytes, 128 needed"):
        floor_cma(os.getpid(), dst.ctypes.data, src, 32, 4, 64, 1)
    with pytest.raises(ValueError, match="positive"):
        floor_cma(os.getpid(), dst.ctypes.data, src, 0, 4, 64, 1)
    with pytest.raises(OSError, match="moved -1 of 16 bytes"):
        floor_cma(os.getpid(), 8, src, 16, 1, 0, 1)  # an unmapped address
    with pytest.raises(TypeError):
        floor_cma(os.getpid(), dst.ctypes.data, bytes(64), 16, 1, 0, 1)  # not writable
