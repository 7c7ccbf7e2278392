"""The engine binding (hixl_rma.Engine) in one process: two or three engines.

Each engine has its own UCX context and worker, so even in one process the
bytes go through UCX (cma for registered memory) or through the direct
mapping of engine-allocated memory, exactly as between two processes.
"""

import ctypes
import os
import re
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import hixl_rma
from hixl_rma import READ, WRITE
from hixl_rma.ground.errors import (
    HixlError,
    HixlTimeoutError,
    NotConnectedError,
    ParamError,
    PeerFailure,
    UnsupportedError,
)

from support import racing

pytestmark = pytest.mark.timeout(120)

def _direct_expected():
    """The engine maps peer memory unless UCX_TLS leaves out shared memory (same rule as the engine)."""
    if os.environ.get("HIXL_RMA_DIRECT") == "0":
        return False
    tls = os.environ.get("UCX_TLS", "")
    if not tls:
        return True
    neg = tls.startswith("^")
    names = tls.lstrip("^").split(",")
    listed = any(n in ("sm", "shm", "posix", "sysv", "all", "mm") for n in names)
    return listed != neg


DIRECT = _direct_expected()  # test_engine_procs.py runs this module again under UCX_TLS=tcp

KiB = 1 << 10
MiB = 1 << 20
MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------- helpers

def rand_bytes(rng, n):
    return np.frombuffer(rng.bytes(n), dtype=np.uint8).copy()


def addr(a):
    return a.ctypes.data


def wait_until(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.005)
    return pred()


class Target:
    """A target buffer with guard bytes: registered numpy memory or engine-allocated."""

    GUARD = 64

    def __init__(self, engine, size, kind):
        self.kind = kind
        self.size = size
        total = size + 2 * self.GUARD
        if kind == "registered":
            self.array = np.zeros(total, dtype=np.uint8)
            self.handle = engine.register_mem(self.array)
        else:
            self.handle = engine.alloc_mem(total)
            self.array = np.frombuffer(self.handle, dtype=np.uint8)
            self.array[:] = 0
        self.base = self.handle.addr + self.GUARD  # remote address of the payload

    @property
    def payload(self):
        return self.array[self.GUARD:self.GUARD + self.size]

    def guards_intact(self):
        g = self.GUARD
        return not self.array[:g].any() and not self.array[g + self.size:].any()


@pytest.fixture
def pair():
    """(origin, target) engines, origin connected to target."""
    a = hixl_rma.Engine()
    b = hixl_rma.Engine()
    a.connect(b.address)
    yield a, b
    a.finalize()
    b.finalize()


# ------------------------------------------------------- data correctness

SIZES = [1, 7, 4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB]


@pytest.mark.parametrize("kind", ["registered", "allocated"])
def test_write_read_sizes(pair, kind):
    a, b = pair
    rng = np.random.default_rng(1)
    for size in SIZES:
        t = Target(b, size, kind)
        src = rand_bytes(rng, size)
        back = np.zeros(size, dtype=np.uint8)
        hs, hb = a.register_mem(src), a.register_mem(back)
        before = a.stats()
        a.transfer_sync(b.address, WRITE, [(addr(src), t.base, size)])
        assert np.array_equal(t.payload, src), (kind, size)
        assert t.guards_intact(), (kind, size)
        # READ into a fresh buffer, after changing the target under the engine
        t.payload[:] = rand_bytes(rng, size)
        expect = t.payload.copy()
        a.transfer_sync(b.address, READ, [(addr(back), t.base, size)])
        assert np.array_equal(back, expect), (kind, size)
        after = a.stats()
        assert after["bytes_written"] - before["bytes_written"] == size
        assert after["bytes_read"] - before["bytes_read"] == size
        assert after["transfer_ops"] - before["transfer_ops"] == 2
        if kind == "allocated" and DIRECT:
            assert after["direct_ops"] - before["direct_ops"] == 2, (size, before, after)
        else:
            assert after["direct_ops"] == before["direct_ops"]
        for h in (hs, hb):
            a.deregister_mem(h)
        del t


def test_unaligned_offsets_and_lengths(pair):
    """Odd offsets on both sides; bytes around the block are untouched."""
    a, b = pair
    rng = np.random.default_rng(2)
    for kind in ("registered", "allocated"):
        t = Target(b, 10000, kind)
        src = rand_bytes(rng, 10000)
        a.register_mem(src)
        ref = np.zeros(10000, dtype=np.uint8)
        for off, ln, loff in [(3, 13, 5), (1001, 4093, 17), (9999, 1, 0), (0, 10000, 0)]:
            ref[off:off + ln] = src[loff:loff + ln]
            a.transfer_sync(b.address, WRITE, [(addr(src) + loff, t.base + off, ln)])
            assert np.array_equal(t.payload, ref), (kind, off, ln)
        assert t.guards_intact()


def test_256mib_both_directions(pair):
    a, b = pair
    n = 256 * MiB
    # every 8-byte word distinct (a misplaced or missing chunk shows), and cheap to make
    src = (np.arange(n // 8, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)).view(np.uint8)
    dst = np.zeros(n, dtype=np.uint8)
    a.register_mem(src)
    b.register_mem(dst)
    a.transfer_sync(b.address, WRITE, [(addr(src), addr(dst), n)])
    assert np.array_equal(src, dst)
    dst[: n // 2] ^= 0x5A  # make READ bring back something different from src
    back = np.zeros(n, dtype=np.uint8)
    a.register_mem(back)
    a.transfer_sync(b.address, READ, [(addr(back), addr(dst), n)])
    assert np.array_equal(back, dst)
    assert not np.array_equal(back, src)


@pytest.mark.parametrize("kind", ["registered", "allocated"])
def test_batch_10000_scattered_blocks(pair, kind):
    a, b = pair
    n, blk = 10000, 4 * KiB
    rng = np.random.default_rng(4)
    t = Target(b, n * blk, kind)
    src = rand_bytes(rng, n * blk)
    a.register_mem(src)
    perm = rng.permutation(n)
    descs = np.empty((n, 3), dtype=np.uint64)
    descs[:, 0] = addr(src) + np.arange(n, dtype=np.uint64) * blk
    descs[:, 1] = t.base + perm.astype(np.uint64) * blk
    descs[:, 2] = blk
    before = a.stats()
    a.transfer_sync(b.address, WRITE, descs)
    ref = np.empty((n, blk), dtype=np.uint8)
    ref[perm] = src.reshape(n, blk)
    assert np.array_equal(t.payload.reshape(n, blk), ref)
    assert t.guards_intact()
    after = a.stats()
    assert after["transfer_ops"] - before["transfer_ops"] == n
    assert after["bytes_written"] - before["bytes_written"] == n * blk
    assert after["direct_ops"] - before["direct_ops"] == (n if kind == "allocated" and DIRECT else 0)
    # gather back with another permutation
    perm2 = rng.permutation(n)
    back = np.zeros(n * blk, dtype=np.uint8)
    a.register_mem(back)
    descs[:, 0] = addr(back) + np.arange(n, dtype=np.uint64) * blk
    descs[:, 1] = t.base + perm2.astype(np.uint64) * blk
    a.transfer_sync(b.address, READ, descs)
    assert np.array_equal(back.reshape(n, blk), ref[perm2])


@pytest.mark.parametrize("kind", ["registered", "allocated"])
def test_post_and_flush(pair, kind):
    a, b = pair
    rng = np.random.default_rng(5)
    t = Target(b, 64 * KiB, kind)
    src = rand_bytes(rng, 64 * KiB)
    a.register_mem(src)
    # 16 blocks of 4 KiB, half through post (a batch), half through post1
    order = rng.permutation(16)
    batch = [(addr(src) + i * 4096, t.base + int(order[i]) * 4096, 4096) for i in range(8)]
    a.post(b.address, WRITE, batch)
    for i in range(8, 16):
        a.post1(b.address, WRITE, addr(src) + i * 4096, t.base + int(order[i]) * 4096, 4096)
    a.flush(b.address)
    ref = np.empty((16, 4096), dtype=np.uint8)
    ref[order] = src.reshape(16, 4096)
    assert np.array_equal(t.payload.reshape(16, 4096), ref)
    # posted READs are complete after flush
    back = np.zeros(64 * KiB, dtype=np.uint8)
    a.register_mem(back)
    a.post(b.address, READ, [(addr(back), t.base, 32 * KiB)])
    a.post1(b.address, READ, addr(back) + 32 * KiB, t.base + 32 * KiB, 32 * KiB)
    a.flush(b.address)
    assert np.array_equal(back, t.payload)
    # flush with nothing outstanding is fine
    a.flush(b.address, timeout_ms=1000)


@pytest.mark.parametrize("kind", ["registered", "allocated"])
def test_transfer_async_status(pair, kind):
    a, b = pair
    rng = np.random.default_rng(6)
    size = 16 * MiB
    t = Target(b, size, kind)
    src = rand_bytes(rng, size)
    a.register_mem(src)
    req = a.transfer_async(b.address, WRITE, [(addr(src), t.base, size)], keep=src)
    seen = []
    deadline = time.monotonic() + 30
    while True:
        s = req.status()
        seen.append(s)
        if s != hixl_rma.TRANSFER_WAITING or time.monotonic() > deadline:
            break
    assert set(seen) <= {hixl_rma.TRANSFER_WAITING, hixl_rma.TRANSFER_COMPLETED}
    assert seen[-1] == hixl_rma.TRANSFER_COMPLETED, seen[-5:]
    # WAITING only ever before COMPLETED
    assert seen.index(hixl_rma.TRANSFER_COMPLETED) == len(seen) - 1
    assert np.array_equal(t.payload, src)
    for _ in range(3):
        assert req.status() == hixl_rma.TRANSFER_COMPLETED
    assert req.done
    assert req.wait(1000) is None  # waiting on a finished request returns at once

    # wait(): READ back into a fresh buffer
    back = np.zeros(size, dtype=np.uint8)
    a.register_mem(back)
    t.payload[: size // 2] = 0xEE
    expect = t.payload.copy()
    req2 = a.transfer_async(b.address, READ, np.array([[addr(back), t.base, size]], dtype=np.uint64))
    assert req2.wait(30000) is None
    assert np.array_equal(back, expect)
    assert req2.status() == hixl_rma.TRANSFER_COMPLETED
    assert req2.done


def test_transfer_async_many_outstanding(pair):
    a, b = pair
    rng = np.random.default_rng(7)
    n = 64
    t = Target(b, n * 4096, "registered")
    src = rand_bytes(rng, n * 4096)
    a.register_mem(src)
    reqs = [a.transfer_async(b.address, WRITE, [(addr(src) + i * 4096, t.base + i * 4096, 4096)])
            for i in range(n)]
    for r in reversed(reqs):
        r.wait(10000)
    assert all(r.status() == hixl_rma.TRANSFER_COMPLETED for r in reqs)
    assert np.array_equal(t.payload, src)


def test_empty_batch_and_zero_length(pair):
    a, b = pair
    t = Target(b, 16, "registered")
    a.transfer_sync(b.address, WRITE, [])
    a.transfer_sync(b.address, WRITE, np.zeros((0, 3), dtype=np.uint64))
    src = np.full(16, 9, dtype=np.uint8)
    a.register_mem(src)
    a.transfer_sync(b.address, WRITE, [(addr(src), t.base, 0)])
    assert not t.array.any()
    req = a.transfer_async(b.address, WRITE, [])
    assert req.wait(1000) is None
    assert req.status() == hixl_rma.TRANSFER_COMPLETED


# ------------------------------------------------------------- notifies

def _poll_notify(engine, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = engine.get_notifies()
        if got:
            return got
    raise AssertionError("no notify arrived")


@pytest.mark.parametrize("kind", ["registered", "allocated"])
def test_notify_implies_data(pair, kind):
    """The target sees the bytes the moment it sees the notify (sync, post and async writes)."""
    a, b = pair
    rng = np.random.default_rng(8)
    big = 4 * MiB
    t = Target(b, big, kind)
    src = rand_bytes(rng, big)
    a.register_mem(src)
    for i in range(60):
        size = big if i % 6 == 0 else int(rng.integers(1, 8192))
        off = int(rng.integers(0, big - size + 1))
        loff = int(rng.integers(0, big - size + 1))
        how = ("post", "async", "sync")[i % 3]
        d = [(addr(src) + loff, t.base + off, size)]
        t.payload[off:off + size] = ~src[loff:loff + size]  # differs everywhere
        if how == "post":
            a.post(b.address, WRITE, d)  # no flush: send_notify must complete it
        elif how == "async":
            a.transfer_async(b.address, WRITE, d)
        else:
            a.transfer_sync(b.address, WRITE, d)
        a.send_notify(b.address, f"n{i}", f"{off},{size}".encode())
        got = _poll_notify(b)
        # check the bytes first, before anything else can happen
        ok = np.array_equal(t.payload[off:off + size], src[loff:loff + size])
        assert got == [(f"n{i}", f"{off},{size}".encode())]
        assert ok, (i, how, size)


def test_notify_order_and_content(pair):
    a, b = pair
    msgs = [(f"tag{i}", bytes([i % 256]) * (i * 37 % 3000)) for i in range(200)]
    msgs.append(("", b""))
    msgs.append(("\u00e9t\u00e9", b"\x00\xff\x00"))
    for name, msg in msgs:
        a.send_notify(b.address, name, msg)
    got = []
    deadline = time.monotonic() + 10
    while len(got) < len(msgs) and time.monotonic() < deadline:
        got += b.get_notifies()
    assert got == msgs
    assert b.get_notifies() == []
    assert a.stats()["notifies_sent"] == len(msgs)
    assert b.stats()["notifies_received"] == len(msgs)


def test_notify_too_large_refused(pair):
    a, b = pair
    with pytest.raises(ParamError, match="65536"):
        a.send_notify(b.address, "x", b"\0" * (64 * KiB + 1))
    with pytest.raises(ParamError, match="1024"):
        a.send_notify(b.address, "n" * 1025, b"")
    assert b.get_notifies() == []


# --------------------------------------------------------------- atomics

def _atomic_model_run(a, remote, words, base_addr, rng):
    """Run a random mix of atomics on 4 words; check every result against a Python model."""
    model = [int(rng.integers(0, 1 << 63)) | (int(rng.integers(0, 2)) << 63) for _ in range(4)]
    words[:4] = np.array(model, dtype=np.uint64)
    for step in range(400):
        k = int(rng.integers(0, 4))
        ad = base_addr + 8 * k
        v = int(rng.integers(0, 1 << 63)) | (int(rng.integers(0, 2)) << 63)
        kind = ("add", "neg", "cas_hit", "cas_miss", "swap", "AND", "OR", "XOR", "ADD", "SWAP")[step % 10]
        old = model[k]
        if kind == "add":
            got = a.atomic_fetch_add(remote, ad, v)
            model[k] = (old + v) & MASK64
        elif kind == "neg":  # negative values wrap mod 2**64
            got = a.atomic_fetch_add(remote, ad, -3)
            model[k] = (old - 3) & MASK64
        elif kind == "cas_hit":
            got = a.atomic_cas(remote, ad, old, v)
            model[k] = v
        elif kind == "cas_miss":
            got = a.atomic_cas(remote, ad, old ^ 1, v)
        elif kind == "swap":
            got = a.atomic_swap(remote, ad, v)
            model[k] = v
        else:
            got = a.atomic_fetch_op(remote, ad, kind, v)
            model[k] = {"AND": old & v, "OR": old | v, "XOR": old ^ v, "ADD": (old + v) & MASK64,
                        "SWAP": v}[kind]
        assert got == old, (step, kind, k)
        assert [int(x) for x in words[:4]] == model, (step, kind)
    # non-fetching atomics complete with flush
    a.atomic_post(remote, base_addr, "ADD", 5)
    a.atomic_post(remote, base_addr + 8, "XOR", 0xFF)
    a.atomic_post(remote, base_addr + 16, "or", 1 << 40)
    a.atomic_post(remote, base_addr + 24, "AND", 0xF0F0)
    a.flush(remote)
    model = [(model[0] + 5) & MASK64, model[1] ^ 0xFF, model[2] | (1 << 40), model[3] & 0xF0F0]
    assert [int(x) for x in words[:4]] == model
    assert not words[4:].any()


@pytest.mark.parametrize("kind", ["registered", "allocated"])
def test_atomics_vs_model(pair, kind):
    a, b = pair
    if kind == "registered":
        words = np.zeros(8, dtype=np.uint64)
        b.register_mem(words)
        base = addr(words)
    else:
        h = b.alloc_mem(64)
        words = np.frombuffer(h, dtype=np.uint64)
        words[:] = 0
        base = h.addr
    before = a.stats()["atomic_ops"]
    _atomic_model_run(a, b.address, words, base, np.random.default_rng(9))
    assert a.stats()["atomic_ops"] - before == 404


def test_atomics_fetch_add_exact_from_two_engines():
    """Two origin engines (two threads) hammer one counter on each kind of memory."""
    t = hixl_rma.Engine()
    o1, o2 = hixl_rma.Engine(), hixl_rma.Engine()
    try:
        reg = np.zeros(2, dtype=np.uint64)
        t.register_mem(reg)
        h = t.alloc_mem(16)
        alloc = np.frombuffer(h, dtype=np.uint64)
        alloc[:] = 0
        n = 1000
        results = {}

        def run(e, key):
            e.connect(t.address)
            olds = []
            for _ in range(n):
                olds.append(e.atomic_fetch_add(t.address, addr(reg), 1))
                olds.append(e.atomic_fetch_add(t.address, h.addr + 8, 2))
            results[key] = olds

        th = [threading.Thread(target=run, args=(e, i)) for i, e in enumerate((o1, o2))]
        for x in th:
            x.start()
        for x in th:
            x.join(60)
        assert len(results) == 2
        assert int(reg[0]) == 2 * n and int(reg[1]) == 0
        assert int(alloc[1]) == 4 * n and int(alloc[0]) == 0
        reg_olds = sorted(results[0][0::2] + results[1][0::2])
        alloc_olds = sorted(results[0][1::2] + results[1][1::2])
        assert reg_olds == list(range(2 * n))  # every old value seen exactly once
        assert alloc_olds == list(range(0, 4 * n, 2))
    finally:
        for e in (o1, o2, t):
            e.finalize()


def test_atomic_unaligned_and_unregistered(pair):
    a, b = pair
    words = np.zeros(4, dtype=np.uint64)
    b.register_mem(words)
    with pytest.raises(ParamError, match="aligned") as ei:
        a.atomic_fetch_add(b.address, addr(words) + 4, 1)
    assert str(addr(words) + 4) in str(ei.value)
    with pytest.raises(ParamError, match="not registered") as ei:
        a.atomic_cas(b.address, addr(words) + 32, 0, 1)  # just past the end
    assert str(addr(words) + 32) in str(ei.value)
    with pytest.raises(ParamError, match="unknown atomic op"):
        a.atomic_fetch_op(b.address, addr(words), "NAND", 1)
    with pytest.raises(ParamError, match="atomic_post"):
        a.atomic_post(b.address, addr(words), "SWAP", 1)
    with pytest.raises(ParamError, match="64 bits"):
        a.atomic_fetch_add(b.address, addr(words), 1 << 64)
    assert not words.any()


# ------------------------------------------------------------- security

def test_token_match_and_mismatch():
    good = hixl_rma.Engine(options={"JobToken": "s3cret"})
    same = hixl_rma.Engine(options={"JobToken": "s3cret"})
    other = hixl_rma.Engine(options={"JobToken": "other"})
    none = hixl_rma.Engine()
    try:
        buf = np.zeros(64, dtype=np.uint8)
        good.register_mem(buf)
        for who in (other, none):
            with pytest.raises(HixlError, match="token") as ei:
                who.connect(good.address, timeout_ms=3000)
            assert ei.value.status == hixl_rma.FAILED
            assert not isinstance(ei.value, (ParamError, NotConnectedError))
            assert who.stats()["endpoints"] == 0
            with pytest.raises(NotConnectedError, match="not connected"):
                who.transfer_sync(good.address, WRITE, [(addr(buf), addr(buf), 1)])
        # a token holder is refused by an engine without one
        with pytest.raises(HixlError, match="token"):
            same.connect(none.address, timeout_ms=3000)
        # nobody was let in
        assert wait_until(lambda: good.stats()["accepted"] == 0)
        assert not buf.any()
        # the right token works
        same.connect(good.address)
        src = np.arange(64, dtype=np.uint8)
        same.register_mem(src)
        same.transfer_sync(good.address, WRITE, [(addr(src), addr(buf), 64)])
        assert np.array_equal(buf, src)
        assert wait_until(lambda: good.stats()["accepted"] == 1)
    finally:
        for e in (good, same, other, none):
            e.finalize()


def test_bad_options():
    with pytest.raises(ParamError, match="TimeoutMs"):
        hixl_rma.Engine(options={"TimeoutMs": "-5"})
    with pytest.raises(ParamError, match="256"):
        hixl_rma.Engine(options={"JobToken": "x" * 300})
    with pytest.raises(ParamError, match="ip:port"):
        hixl_rma.Engine("127.0.0.1:99999")
    with pytest.raises(ParamError, match="ip:port"):
        hixl_rma.Engine("127.0.0.1:http")
    with pytest.raises(ParamError, match="ip:port"):
        hixl_rma.Engine("::1:5000")  # a bare IPv6 address needs brackets


# ------------------------------------------------- refused addresses

@pytest.mark.parametrize("kind", ["registered", "allocated"])
def test_unregistered_remote_address_refused(pair, kind):
    a, b = pair
    t = Target(b, 4096, kind)
    t.payload[:] = 0xAB
    snapshot = t.array.copy()
    src = np.full(8192, 0x11, dtype=np.uint8)
    local = np.full(8192, 0x22, dtype=np.uint8)
    a.register_mem(src)
    a.register_mem(local)
    end = t.handle.addr + len(t.array)
    cases = [
        (end, 1),                # first byte past the region
        (end - 4, 8),            # straddles the end
        (t.handle.addr - 1, 2),  # straddles the start
        (t.handle.addr, len(t.array) + 1),
        (8, 8),                  # nowhere
    ]
    for raddr, ln in cases:
        for op, buf in ((WRITE, src), (READ, local)):
            with pytest.raises(ParamError) as ei:
                a.transfer_sync(b.address, op, [(addr(buf), raddr, ln)])
            msg = str(ei.value)
            assert f"remote address {raddr} " in msg and f"length {ln}" in msg, msg
            assert "not registered" in msg
            assert ei.value.status == hixl_rma.PARAM_INVALID
        with pytest.raises(ParamError, match=str(raddr)):
            a.post(b.address, WRITE, [(addr(src), raddr, ln)])
        with pytest.raises(ParamError, match=str(raddr)):
            a.transfer_async(b.address, WRITE, [(addr(src), raddr, ln)])
    a.flush(b.address)
    assert np.array_equal(t.array, snapshot)
    assert (local == 0x22).all()


@pytest.mark.parametrize("kind", ["registered", "allocated"])
def test_batch_with_bad_last_block_writes_nothing(pair, kind):
    a, b = pair
    n = 64
    t = Target(b, n * 1024, kind)
    snapshot = t.array.copy()
    src = np.full(n * 1024, 0x5C, dtype=np.uint8)
    a.register_mem(src)
    descs = np.array([[addr(src) + i * 1024, t.base + i * 1024, 1024] for i in range(n)], dtype=np.uint64)
    bad_addr = t.handle.addr + len(t.array) - 512
    descs[-1, 1] = bad_addr  # 512 bytes inside, 512 past the end
    for call in (lambda: a.transfer_sync(b.address, WRITE, descs),
                 lambda: a.post(b.address, WRITE, descs),
                 lambda: a.transfer_async(b.address, WRITE, descs)):
        with pytest.raises(ParamError) as ei:
            call()
        assert f"block {n - 1}" in str(ei.value) and str(bad_addr) in str(ei.value), str(ei.value)
    a.flush(b.address)
    assert np.array_equal(t.array, snapshot), "good blocks of a refused batch were written"
    # the same for READ: nothing lands locally
    local = np.full(n * 1024, 0x77, dtype=np.uint8)
    a.register_mem(local)
    descs[:, 0] = addr(local) + np.arange(n, dtype=np.uint64) * 1024
    with pytest.raises(ParamError, match=str(bad_addr)):
        a.transfer_sync(b.address, READ, descs)
    assert (local == 0x77).all()


def test_deregistered_region_refused(pair):
    a, b = pair
    buf = np.full(4096, 0x3C, dtype=np.uint8)
    h = b.register_mem(buf)
    src = np.zeros(4096, dtype=np.uint8)
    local = np.full(4096, 0x99, dtype=np.uint8)
    a.register_mem(src)
    a.register_mem(local)
    a.transfer_sync(b.address, READ, [(addr(local), addr(buf), 4096)])  # caches the table
    assert (local == 0x3C).all()
    local[:] = 0x99
    b.deregister_mem(h)
    assert not h.registered
    for op, lb in ((WRITE, src), (READ, local)):
        with pytest.raises(ParamError) as ei:
            a.transfer_sync(b.address, op, [(addr(lb), addr(buf) + 100, 10)])
        assert f"remote address {addr(buf) + 100} length 10" in str(ei.value)
    with pytest.raises(ParamError, match=str(addr(buf))):
        a.atomic_fetch_add(b.address, addr(buf), 1)
    assert (buf == 0x3C).all()
    assert (local == 0x99).all()


def test_deregistered_allocated_region_refused(pair):
    a, b = pair
    h = b.alloc_mem(4096)
    region = h.addr
    a.register_mem(src := np.full(4096, 1, dtype=np.uint8))
    a.transfer_sync(b.address, WRITE, [(addr(src), region, 4096)])  # table cached, mapped
    b.deregister_mem(h)
    with pytest.raises(ParamError, match=str(region)):
        a.transfer_sync(b.address, WRITE, [(addr(src), region, 4096)])
    with pytest.raises(ParamError, match=str(region)):
        a.atomic_swap(b.address, region, 1)
    with pytest.raises(ParamError, match="deregistered"):
        np.frombuffer(h, dtype=np.uint8)


def test_deregister_allocated_with_live_view_refuses_peers(pair):
    """Peers lose access at deregister_mem even while a local view keeps the memory mapped."""
    a, b = pair
    h = b.alloc_mem(4096)
    view = np.frombuffer(h, dtype=np.uint8)
    view[:] = 0
    src = np.full(4096, 7, dtype=np.uint8)
    a.register_mem(src)
    a.transfer_sync(b.address, WRITE, [(addr(src), h.addr, 4096)])
    assert (view == 7).all()
    start = b.stats()["regions"]
    b.deregister_mem(h)
    assert not h.registered
    assert b.stats()["regions"] == start - 1
    src[:] = 9
    with pytest.raises(ParamError, match=str(h.addr)):
        a.transfer_sync(b.address, WRITE, [(addr(src), h.addr, 4096)])
    assert (view == 7).all()
    del view  # the last view goes: now the memory is released
    with pytest.raises(ParamError, match="already deregistered"):
        b.deregister_mem(h)


@pytest.mark.skipif(not DIRECT, reason="UCX_TLS excludes shared memory: nothing is mapped")
def test_finalize_with_live_view_does_not_crash(tmp_path):
    script = tmp_path / "fin.py"
    script.write_text(
        "import numpy as np, hixl_rma\n"
        "e = hixl_rma.Engine()\n"
        "h = e.alloc_mem(1 << 20)\n"
        "a = np.frombuffer(h, dtype=np.uint8)\n"
        "a[:] = 3\n"
        "e.finalize()\n"
        "assert not h.registered\n"
        "assert int(a.sum()) == 3 << 20\n"
        "a[:] = 5\n"
        "print('ok')\n")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", (p.returncode, p.stderr[-2000:])


def test_dropped_handle_keeps_region_alive(pair):
    """A handle the caller does not keep stays registered (and its buffer alive) until deregistered."""
    _a, b = pair
    b.register_mem(np.zeros(1 << 20, dtype=np.uint8))  # handle and array dropped at once
    assert b.stats()["regions"] == 1
    fresh = np.zeros(1 << 20, dtype=np.uint8)
    fresh_h = b.register_mem(fresh)
    assert b.stats()["regions"] == 2
    b.deregister_mem(fresh_h)


@pytest.mark.skipif(not DIRECT, reason="UCX_TLS excludes shared memory: nothing is mapped")
def test_overlapping_regions_serve_until_each_is_withdrawn(pair):
    a, b = pair
    buf = np.zeros(8192, dtype=np.uint8)
    outer = b.register_mem(buf)
    inner = b.register_mem(buf[4096:])
    src = np.full(8192, 5, dtype=np.uint8)
    a.transfer_sync(b.address, WRITE, [(addr(src), outer.addr, 8192)])
    assert (buf == 5).all()
    b.deregister_mem(outer)
    src[:] = 6
    a.transfer_sync(b.address, WRITE, [(addr(src), inner.addr, 4096)])  # still covered by inner
    assert (buf[4096:] == 6).all() and (buf[:4096] == 5).all()
    with pytest.raises(ParamError, match="not registered"):
        a.transfer_sync(b.address, WRITE, [(addr(src), outer.addr, 4096)])
    assert (buf[:4096] == 5).all()
    b.deregister_mem(inner)


@pytest.mark.skipif(not DIRECT, reason="UCX_TLS excludes shared memory: nothing is mapped")
def test_remote_ptr(pair):
    a, b = pair
    h = b.alloc_mem(4096)
    view = np.frombuffer(h, dtype=np.uint8)
    view[:] = 0
    p = a.remote_ptr(b.address, h.addr + 16, 32)
    ctypes.memmove(p, b"x" * 32, 32)
    assert bytes(view[16:48]) == b"x" * 32 and not view[:16].any() and not view[48:].any()
    reg = np.zeros(4096, dtype=np.uint8)
    b.register_mem(reg)
    with pytest.raises(UnsupportedError, match="not mapped"):
        a.remote_ptr(b.address, addr(reg), 8)
    with pytest.raises(ParamError, match="not registered"):
        a.remote_ptr(b.address, h.addr + 4090, 8)


@pytest.mark.skipif(not DIRECT, reason="UCX_TLS excludes shared memory: nothing is mapped")
def test_pinned_mapping_outlives_the_region_and_the_connection(pair):
    """A RemotePin keeps its mapping: after the owner deregistered the
    region, the origin flushed (which releases withdrawn keys) and even
    disconnected, loads and stores through the pin still work (into memory
    nobody uses any more) instead of faulting; an unmapped range is refused."""
    a, b = pair
    h = b.alloc_mem(4096)
    np.frombuffer(h, dtype=np.uint8)[:] = 7
    pin = a.pin_remote(b.address, h.addr, 4096)
    view = np.frombuffer(pin, dtype=np.uint8)
    assert pin.length == 4096 and view[100] == 7
    view[0] = 9
    assert np.frombuffer(h, dtype=np.uint8)[0] == 9  # the same memory while it is registered
    b.deregister_mem(h)
    a.flush(b.address, 2000)
    a.disconnect(b.address)
    view[1] = 3  # no fault: the pin holds the mapping
    assert view[1] == 3 and view[100] == 7
    del view, pin
    reg = np.zeros(64, dtype=np.uint8)
    b.register_mem(reg)
    a.connect(b.address)
    with pytest.raises(UnsupportedError, match="not mapped"):
        a.pin_remote(b.address, addr(reg), 8)


# -------------------------------------------------------- connections

def test_connect_closed_port_fails_fast():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with hixl_rma.Engine() as e:
        t0 = time.monotonic()
        with pytest.raises(NotConnectedError) as ei:
            e.connect(f"127.0.0.1:{port}", timeout_ms=5000)
        assert time.monotonic() - t0 < 2.0
        assert f"127.0.0.1:{port}" in str(ei.value)
        assert ei.value.status == hixl_rma.NOT_CONNECTED
        assert e.stats()["endpoints"] == 0


def test_connect_silent_server_times_out():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    held = []
    stop = threading.Event()

    def accept_and_stay_silent():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                held.append(conn)
            except OSError:
                pass

    th = threading.Thread(target=accept_and_stay_silent, daemon=True)
    th.start()
    try:
        with hixl_rma.Engine() as e:
            t0 = time.monotonic()
            with pytest.raises(HixlTimeoutError) as ei:
                e.connect(f"127.0.0.1:{port}", timeout_ms=1000)
            dt = time.monotonic() - t0
            assert 0.9 <= dt <= 2.0, dt
            assert isinstance(ei.value, TimeoutError)
            assert ei.value.status == hixl_rma.TIMEOUT
            assert f"127.0.0.1:{port}" in str(ei.value)
            assert e.stats()["endpoints"] == 0
        assert held, "the silent server never saw the connection"
    finally:
        stop.set()
        th.join(2)
        for c in held:
            c.close()
        srv.close()


def test_connection_errors(pair):
    a, b = pair
    with pytest.raises(HixlError, match="already connected") as ei:
        a.connect(b.address)
    assert ei.value.status == hixl_rma.ALREADY_CONNECTED
    c = hixl_rma.Engine()
    try:
        buf = np.zeros(8, dtype=np.uint8)
        with pytest.raises(NotConnectedError, match=c.address):
            a.transfer_sync(c.address, WRITE, [(addr(buf), addr(buf), 8)])
        with pytest.raises(NotConnectedError, match=c.address):
            a.disconnect(c.address)
        with pytest.raises(NotConnectedError):
            a.atomic_fetch_add(c.address, addr(buf), 1)
        with pytest.raises(NotConnectedError):
            a.send_notify(c.address, "x")
        with pytest.raises(NotConnectedError):
            a.flush(c.address)
        with pytest.raises(ParamError, match="ip:port"):
            a.connect("nonsense")
        with pytest.raises(ParamError, match="ip:port"):
            a.connect("127.0.0.1:0")
    finally:
        c.finalize()


def test_peer_finalized_is_peer_failure(pair):
    a, b = pair
    buf = np.zeros(64, dtype=np.uint8)
    b.register_mem(buf)
    src = np.ones(64, dtype=np.uint8)
    a.register_mem(src)
    a.transfer_sync(b.address, WRITE, [(addr(src), addr(buf), 64)])
    b.finalize()
    # it tells its clients it goes: the origin learns of it without hanging
    t0 = time.monotonic()
    err = None
    while time.monotonic() - t0 < 5:
        try:
            a.transfer_sync(b.address, WRITE, [(addr(src), addr(buf), 64)], timeout_ms=2000)
        except HixlError as exc:
            err = exc
            break
        time.sleep(0.01)
    assert isinstance(err, PeerFailure), err
    assert "finalized" in str(err)  # it said so (BYE) before its connection dropped


def test_a_flush_beside_another_threads_flush_still_completes_its_own_transfers():
    """Two threads flush one peer (MPI_THREAD_MULTIPLE): a thread whose
    operations another thread's flush took (that flush began after they were
    posted and has not ended) must not return before they are complete
    there. Every block through UCX (cma off), each round's bytes checked the
    moment its writer's flush returns, while the other thread flushes in a
    loop."""
    a = hixl_rma.Engine(options={"Cma": "0"})
    b = hixl_rma.Engine()
    dst = np.zeros(32 << 20, np.uint8)
    b.register_mem(dst)
    a.connect(b.address)
    stop, errors = threading.Event(), []

    def flusher():
        try:
            while not stop.is_set():
                a.flush(b.address, 10000)
        except Exception as exc:  # reported below
            errors.append(exc)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for k in range(1, 9):
            src = np.full(dst.size, k, np.uint8)
            a.register_mem(src)
            a.post(b.address, WRITE, [(addr(src), addr(dst), dst.size)])
            a.flush(b.address, 10000)
            assert dst[0] == k and dst[-1] == k and np.all(dst == k), f"round {k}: flush returned early"
    finally:
        stop.set()
        t.join()
        a.finalize()
        b.finalize()
    assert not errors, errors


def test_disconnect_under_running_transfers_is_a_clean_error():
    """Disconnect while other threads transfer to the peer, fetch its table
    again (each transfer names a region registered after the last one) and
    post atomics to it: the peer's remote keys keep its endpoint alive, so a
    call that raced the teardown ends in an error, never a crash or a hang;
    a request started before it finishes; after it, every call is
    NotConnectedError; a reconnect works."""
    a = hixl_rma.Engine(options={"Cma": "0"})  # every block through UCX, on the endpoint
    b = hixl_rma.Engine()
    src = np.arange(4096, dtype=np.uint8)
    a.register_mem(src)
    word = np.zeros(1, dtype=np.uint64)
    b.register_mem(word)
    outcomes = []

    def transfers(stop):
        while not stop.is_set():
            dst = np.zeros(4096, dtype=np.uint8)
            h = b.register_mem(dst)  # not in a's cached table: the transfer fetches it again

            def one(dst=dst):
                a.transfer_sync(b.address, WRITE, [(addr(src), addr(dst), 4096)], timeout_ms=5000)
                assert np.array_equal(dst, src), "wrong bytes"
            try:
                racing.attempt(outcomes, one)
            finally:
                b.deregister_mem(h)

    def atomics(stop):
        while not stop.is_set():
            racing.attempt(outcomes, lambda: a.atomic_fetch_add(b.address, addr(word), 1, timeout_ms=5000))

    try:
        for _ in range(10):
            a.connect(b.address)
            a.transfer_sync(b.address, WRITE, [(addr(src), addr(word), 8)])
            req = a.transfer_async(b.address, WRITE, [(addr(src), addr(word), 8)], keep=src)
            racing.disconnect_under(a, b.address, (transfers, atomics))
            assert req.status() in (hixl_rma.TRANSFER_COMPLETED, hixl_rma.TRANSFER_FAILED)
            with pytest.raises(NotConnectedError):
                a.transfer_sync(b.address, WRITE, [(addr(src), addr(word), 8)])
            with pytest.raises(NotConnectedError):
                a.atomic_fetch_add(b.address, addr(word), 1)
            assert a.stats()["endpoints"] == 0
        assert set(outcomes) <= {"ok", "NotConnectedError", "PeerFailure"}, set(outcomes)
        assert "ok" in outcomes
        a.connect(b.address)
        a.transfer_sync(b.address, WRITE, [(addr(src), addr(word), 8)])
        assert word.tobytes() == src[:8].tobytes()
    finally:
        a.finalize()
        b.finalize()


# ---------------------------------------------------- argument checking

def test_wrong_argument_types(pair):
    a, b = pair
    buf = np.zeros(64, dtype=np.uint8)
    b.register_mem(buf)
    src = np.zeros(64, dtype=np.uint8)
    a.register_mem(src)
    r = b.address
    with pytest.raises(ParamError, match="triples"):
        a.transfer_sync(r, WRITE, [("0x10", addr(buf), 8)])
    with pytest.raises(ParamError, match="triples"):
        a.transfer_sync(r, WRITE, [(addr(src), addr(buf), -8)])
    with pytest.raises(ParamError, match="negative"):
        a.transfer_sync(r, WRITE, np.array([[addr(src), addr(buf), -8]], dtype=np.int64))
    with pytest.raises(ParamError, match="shape"):
        a.transfer_sync(r, WRITE, np.zeros((4, 2), dtype=np.uint64))
    with pytest.raises(ParamError, match="shape"):
        a.transfer_sync(r, WRITE, [addr(src), addr(buf), 8])
    with pytest.raises(ParamError, match="dtype"):
        a.transfer_sync(r, WRITE, np.zeros((1, 3), dtype=np.float64))
    with pytest.raises(ParamError, match="op must be READ or WRITE"):
        a.transfer_sync(r, 7, [(addr(src), addr(buf), 8)])
    with pytest.raises(ParamError, match="timeout_ms"):
        a.transfer_sync(r, WRITE, [(addr(src), addr(buf), 8)], timeout_ms="soon")
    with pytest.raises(ParamError, match="remote"):
        a.connect(12345)
    # typed scalar arguments: a str or negative value is a ParamError, not a TypeError
    with pytest.raises(ParamError, match="addr"):
        a.atomic_fetch_add(r, str(addr(buf)), 1)
    with pytest.raises(ParamError, match="addr"):
        a.atomic_cas(r, -8, 0, 1)
    with pytest.raises(ParamError):
        a.post1(r, WRITE, "x", addr(buf), 8)
    with pytest.raises(ParamError):
        a.post1(r, WRITE, addr(src), addr(buf), -1)
    with pytest.raises(ParamError):
        a.transfer_sync(r, "WRITE", [(addr(src), addr(buf), 8)])
    with pytest.raises(ParamError):
        a.register_mem_addr("0x1000", 10)
    with pytest.raises(ParamError):
        a.alloc_mem(-1)
    with pytest.raises(ParamError):
        a.remote_ptr(r, None, 8)
    assert not buf.any()


def test_register_errors():
    with hixl_rma.Engine() as e:
        with pytest.raises(ParamError, match="writable"):
            e.register_mem(b"read-only bytes")
        with pytest.raises(ParamError, match="writable"):
            e.register_mem(memoryview(b"abc"))
        ro = np.zeros(16, dtype=np.uint8)
        ro.flags.writeable = False
        with pytest.raises(ParamError, match="writable"):
            e.register_mem(ro)
        with pytest.raises(ParamError, match="contiguous"):
            e.register_mem(np.zeros((8, 8), dtype=np.uint8)[:, ::2])
        with pytest.raises(ParamError, match="zero length"):
            e.register_mem(bytearray())
        with pytest.raises(ParamError, match="zero length"):
            e.alloc_mem(0)
        with pytest.raises(ParamError, match="mem_type"):
            e.register_mem(bytearray(8), 99)
        buf = np.zeros(4096, dtype=np.uint8)
        h = e.register_mem(buf)
        inner = e.register_mem(buf[100:200])  # overlapping registrations are allowed (MPI windows)
        assert e.stats()["regions"] == 2
        e.deregister_mem(inner)
        e.deregister_mem(h)
        with pytest.raises(ParamError, match="already deregistered"):
            e.deregister_mem(h)
        h2 = e.alloc_mem(64)
        e.deregister_mem(h2)
        with pytest.raises(ParamError, match="already deregistered"):
            e.deregister_mem(h2)
        with hixl_rma.Engine() as other:
            h3 = other.register_mem(bytearray(8))
            with pytest.raises(ParamError, match="another engine"):
                e.deregister_mem(h3)
        assert e.stats()["regions"] == 0


def test_calls_after_finalize():
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    a.connect(b.address)
    buf = np.zeros(64, dtype=np.uint8)
    h = a.register_mem(buf)
    b.finalize()
    a.finalize()
    a.finalize()  # idempotent
    assert a.finalized
    assert not h.registered
    calls = [
        lambda: a.connect(b.address),
        lambda: a.disconnect(b.address),
        lambda: a.register_mem(np.zeros(8, dtype=np.uint8)),
        lambda: a.register_mem_addr(addr(buf), 8),
        lambda: a.alloc_mem(64),
        lambda: a.deregister_mem(h),
        lambda: a.transfer_sync(b.address, WRITE, [(addr(buf), addr(buf), 8)]),
        lambda: a.transfer_async(b.address, WRITE, [(addr(buf), addr(buf), 8)]),
        lambda: a.post(b.address, WRITE, [(addr(buf), addr(buf), 8)]),
        lambda: a.post1(b.address, WRITE, addr(buf), addr(buf), 8),
        lambda: a.flush(b.address),
        lambda: a.send_notify(b.address, "x"),
        lambda: a.get_notifies(),
        lambda: a.atomic_fetch_add(b.address, addr(buf), 1),
        lambda: a.atomic_post(b.address, addr(buf), "ADD", 1),
        lambda: a.remote_ptr(b.address, addr(buf), 8),
        lambda: a.stats(),
        lambda: a.peer_stats(b.address),
    ]
    for call in calls:
        with pytest.raises(ParamError, match="finalized"):
            call()
    assert "finalized" in repr(a)


def test_context_manager_finalizes():
    with hixl_rma.Engine() as e:
        assert not e.finalized
        addr_ = e.address
        assert addr_.startswith("127.0.0.1:") and int(addr_.rsplit(":", 1)[1]) > 0
    assert e.finalized
    with pytest.raises(ParamError, match="finalized"):
        e.stats()


# ---------------------------------------------------------------- stats

def test_stats_return_to_start():
    a, b, c = hixl_rma.Engine(), hixl_rma.Engine(), hixl_rma.Engine()
    try:
        sa, sb = a.stats(), b.stats()
        assert sa["regions"] == 0 and sa["endpoints"] == 0 and sb["accepted"] == 0
        bufs = [np.zeros(4096, dtype=np.uint8) for _ in range(3)]
        hs = [a.register_mem(x) for x in bufs] + [a.alloc_mem(8192)]
        assert a.stats()["regions"] == 4
        a.connect(b.address)
        a.connect(c.address)
        assert a.stats()["endpoints"] == 2
        assert wait_until(lambda: b.stats()["accepted"] == 1 and c.stats()["accepted"] == 1)
        tb = np.zeros(64, dtype=np.uint8)
        b.register_mem(tb)
        a.transfer_sync(b.address, WRITE, [(hs[0].addr, addr(tb), 64)])
        ps = a.peer_stats(b.address)
        assert ps["bytes_written"] == 64 and ps["ops"] == 1
        assert a.peer_stats(c.address) == {"bytes_written": 0, "bytes_read": 0, "ops": 0, "answers_held": 0,
                                           "detached": 0, "bulk_lane": False, "bulk_peak_bytes": 0}
        for h in hs:
            a.deregister_mem(h)
        a.disconnect(b.address)
        a.disconnect(c.address)
        assert a.stats()["regions"] == sa["regions"]
        assert a.stats()["endpoints"] == sa["endpoints"]
        assert wait_until(lambda: b.stats()["accepted"] == 0 and c.stats()["accepted"] == 0)
        with pytest.raises(NotConnectedError):
            a.peer_stats(b.address)
        # reconnect after disconnect works and sees the current table
        a.connect(b.address)
        src = np.full(64, 3, dtype=np.uint8)
        a.register_mem(src)
        a.transfer_sync(b.address, WRITE, [(addr(src), addr(tb), 64)])
        assert (tb == 3).all()
    finally:
        for e in (a, b, c):
            e.finalize()


def test_table_refresh_on_new_region(pair):
    """A region registered after connect is found by refreshing the cached table."""
    a, b = pair
    src = np.arange(256, dtype=np.uint8)
    a.register_mem(src)
    before = a.stats()["table_refreshes"]
    late = np.zeros(256, dtype=np.uint8)
    b.register_mem(late)
    a.transfer_sync(b.address, WRITE, [(addr(src), addr(late), 256)])
    assert np.array_equal(late, src)
    assert a.stats()["table_refreshes"] == before + 1
    a.transfer_sync(b.address, WRITE, [(addr(src), addr(late), 256)])
    assert a.stats()["table_refreshes"] == before + 1  # cached now


def test_views_registered_one_by_one_reach_their_peer_and_withdrawals_hold(pair):
    """A target registers 4 KiB views of one buffer one at a time, each
    written by the origin right after (a table miss each: the refresh
    fetches only the regions after the highest id the origin knows), and
    withdraws every third view along the way, registering a new view over
    the same bytes at once: every write lands in its view, and a write to a
    withdrawn range that no view covers any more is refused with the
    target's memory unchanged."""
    a, b = pair
    n, size = 300, 4096
    mem = np.zeros(n * size, np.uint8)
    src = np.zeros(n * size, np.uint8)
    for i in range(n):
        src[i * size:(i + 1) * size] = i % 251 + 1
    a.register_mem(src)
    before = a.stats()["table_refreshes"]
    views = []
    for i in range(n):
        views.append(b.register_mem(mem[i * size:(i + 1) * size]))
        a.transfer_sync(b.address, WRITE, [(addr(src) + i * size, addr(mem) + i * size, size)])
        if i % 3 == 2:  # withdraw one, then cover the same bytes with a new view
            b.deregister_mem(views[i - 1])
            views[i - 1] = b.register_mem(mem[(i - 1) * size:i * size])
            a.transfer_sync(b.address, WRITE, [(addr(src) + (i - 1) * size, addr(mem) + (i - 1) * size, size)])
    assert a.stats()["table_refreshes"] - before >= n  # a miss per new view, as before
    np.testing.assert_array_equal(mem, src)
    gone = 7
    b.deregister_mem(views[gone])
    mem[:] = 0
    with pytest.raises(ParamError, match="not registered"):
        a.transfer_sync(b.address, WRITE, [(addr(src) + gone * size, addr(mem) + gone * size, size)])
    assert not mem.any()
    a.transfer_sync(b.address, WRITE, [(addr(src), addr(mem), size)])  # the others still there
    np.testing.assert_array_equal(mem[:size], src[:size])


@pytest.mark.parametrize("kind", ["registered", "allocated"])
def test_a_finalized_engine_tells_its_clients_why(kind):
    """Finalize sends BYE to the connected clients: their next calls on it
    fail with PeerFailure naming the finalize, not "not registered" or a
    lost connection, and a pointer cached into its mapped memory is dropped
    (the mapping generation moved)."""
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    try:
        t = Target(b, 4096, kind)
        src = np.full(64, 7, np.uint8)
        a.register_mem(src)
        a.connect(b.address)
        a.transfer_sync(b.address, WRITE, [(addr(src), t.base, 64)])
        generation = a.mapping_generation()
        where = b.address
        b.finalize()
        assert wait_until(lambda: a.peer_dead(where))
        assert a.mapping_generation() != generation
        with pytest.raises(PeerFailure, match=f"the engine at {re.escape(where)} finalized"):
            a.transfer_sync(where, WRITE, [(addr(src), t.base, 64)])
        with pytest.raises(PeerFailure, match="finalized"):
            a.flush(where)
    finally:
        a.finalize()
        b.finalize()
