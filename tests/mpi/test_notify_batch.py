"""Notified RMA (Put_notify / Notify / Wait_notify / Test_notify, the
notify_limit back-pressure) and batch transfers (Put_batch / Get_batch,
checked against a numpy reference, bounds-checked as a whole).
"""
import collections
import time

import numpy as np
import pytest

import hixl_rma
from hixl_rma import BoundsError, HixlTimeoutError, ParamError, Win
from hixl_rma.ground.errors import kind

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

N_NOTIFY = 200
BIG = 1 << 20


def _slots():
    """(offset, length) of N_NOTIFY distinct slots, sizes alternating 8 B / 1 MiB."""
    out, off = [], 0
    for i in range(N_NOTIFY):
        n = 8 if i % 2 == 0 else BIG
        out.append((off, n))
        off += n
    return out, off


def _payload(i, src, n):
    """Bytes that tell slot, sender and position apart."""
    return ((np.arange(n, dtype=np.int64) * 7 + i * 31 + src * 101 + 1) % 251).astype(np.uint8)


# --------------------------------------------------------- notify after data

@pytest.mark.core
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_put_notify_data_visible_on_notification(comm, rank, left, right, flavor):
    slots, total = _slots()
    if flavor == "create":
        mem = np.zeros(total, np.uint8)
        win = Win.Create(mem, disp_unit=1, comm=comm)
    else:
        win = Win.Allocate(total, disp_unit=1, comm=comm)
        mem = np.frombuffer(win.tomemory(), np.uint8)
        mem[:] = 0
    barrier(comm)
    sends = [_payload(i, rank, n) for i, (_, n) in enumerate(slots)]
    bad = []
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    for i, (off, n) in enumerate(slots):
        win.Put_notify(sends[i], right, off, tag=i)
        src, tag = win.Wait_notify(tag=i, source=left)
        # Checked the moment the notification is seen: no flush on this side.
        if (src, tag) != (left, i) or not np.array_equal(mem[off:off + n], _payload(i, left, n)):
            bad.append((i, src, tag))
    win.Unlock_all()
    barrier(comm)
    leftover = win.Test_notify()
    win.Free()
    assert bad == []
    assert leftover is None


# ------------------------------------------------ tags from several sources

def test_tags_from_several_sources(comm, rank, size):
    win = Win.Allocate(8, comm=comm)
    empty_before = win.Test_notify()
    barrier(comm)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    for dst in range(size):
        if dst != rank:
            for k in range(5):
                win.Notify(dst, tag=1000 * rank + k)
    got = win.Wait_notify_all(5 * (size - 1))
    empty_after = win.Test_notify()
    win.Unlock_all()
    barrier(comm)
    win.Free()
    expect = collections.Counter((s, 1000 * s + k) for s in range(size) if s != rank for k in range(5))
    assert empty_before is None
    assert collections.Counter(got) == expect
    assert empty_after is None


def test_wait_notify_filters_queued_notifications(comm, rank, size):
    """Rank 0 queues other tags/sources first; the filter picks the right one
    and leaves the others in the queue."""
    win = Win.Allocate(8, comm=comm)
    barrier(comm)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    if rank != 0:
        # Decoys first, then the wanted tag, from every other rank.
        win.Notify(0, tag=1)
        win.Notify(0, tag=2)
        win.Notify(0, tag=10 + rank)
    results = {}
    if rank == 0:
        # Each sender's decoys precede its wanted tag, so by the time the
        # wanted one is taken the decoys of that source are queued ahead.
        n_expect = 3 * (size - 1)
        last = size - 1
        results["wanted"] = win.Wait_notify(source=last, tag=10 + last, timeout=10)
        results["none_other_source"] = win.Test_notify(source=last, tag=10 + last)
        results["none_unknown_tag"] = win.Test_notify(tag=999)
        results["tag2_from_1"] = win.Wait_notify(source=1, tag=2, timeout=10)
        rest = win.Wait_notify_all(n_expect - 2, timeout=10)
        results["rest"] = collections.Counter(rest)
        results["empty"] = win.Test_notify()
    win.Unlock_all()
    barrier(comm)
    win.Free()
    if rank == 0:
        last = size - 1
        assert results["wanted"] == (last, 10 + last)
        assert results["none_other_source"] is None
        assert results["none_unknown_tag"] is None
        assert results["tag2_from_1"] == (1, 2)
        expect = collections.Counter()
        for s in range(1, size):
            expect[(s, 1)] += 1
            expect[(s, 2)] += 1
            expect[(s, 10 + s)] += 1
        expect[(last, 10 + last)] -= 1
        expect[(1, 2)] -= 1
        assert results["rest"] == +expect
        assert results["empty"] is None


def test_wait_notify_timeout(comm):
    win = Win.Allocate(8, comm=comm)
    barrier(comm)
    t0 = time.monotonic()
    with pytest.raises(HixlTimeoutError) as err:
        win.Wait_notify(timeout=0.2)
    elapsed = time.monotonic() - t0
    barrier(comm)
    win.Free()
    assert isinstance(err.value, TimeoutError)
    assert issubclass(HixlTimeoutError, TimeoutError)
    assert 0.19 <= elapsed < 3.0, elapsed  # the upper bound leaves room for a loaded machine


# ----------------------------------------------------- notification bound

def test_notify_limit_back_pressure_loses_nothing(comm, rank):
    win = Win.Allocate(8, comm=comm, info={"notify_limit": "4"})
    barrier(comm)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    elapsed, got = None, None
    if rank == 0:
        t0 = time.monotonic()
        for k in range(12):
            win.Notify(1, tag=k)
        elapsed = time.monotonic() - t0
    elif rank == 1:
        time.sleep(0.6)  # well past the 0.25 s asserted: the ranks leave the barrier at different times
        got = win.Wait_notify_all(12, source=0, timeout=20)
    win.Unlock_all()
    barrier(comm)
    leftover = win.Test_notify()
    win.Free()
    if rank == 0:
        assert elapsed >= 0.25, f"12 notifies past notify_limit=4 took only {elapsed:.3f} s"
    if rank == 1:
        assert sorted(got) == [(0, k) for k in range(12)]
    assert leftover is None


# ------------------------------------------------------------------- batch

NBLK = 10_000
BLK = 64


def _batch_setup(comm, rank, nbytes):
    mem = np.zeros(nbytes, np.uint8)
    win = Win.Create(mem, disp_unit=1, comm=comm)
    return mem, win


def test_batch_list_and_offsets_roundtrip(comm, rank, left, right):
    nblk, win_bytes = 64, 64 * 1024
    rng = np.random.default_rng(1234 + rank)
    # Distinct, non-overlapping block starts (multiples of 64 here, random order).
    sizes = rng.integers(1, 257, nblk)
    disps = rng.permutation(win_bytes // 512)[:nblk] * 512
    blocks = [rng.integers(0, 256, int(n), dtype=np.uint8) for n in sizes]
    mem, win = _batch_setup(comm, rank, win_bytes)
    ref = np.zeros(win_bytes, np.uint8)
    for b, d in zip(blocks, disps, strict=True):
        ref[d:d + len(b)] = b
    # The same blocks as one contiguous buffer with (offset, length) rows, put
    # at a second region of the window.
    flat = np.concatenate(blocks)
    offs = np.stack([np.r_[0, np.cumsum(sizes)[:-1]], sizes], axis=1).astype(np.int64)
    disps2 = disps + 256  # the second half of every 512-byte cell
    ref2 = ref.copy()
    for (o, n), d in zip(offs, disps2, strict=True):
        ref2[d:d + n] = flat[o:o + n]
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    win.Put_batch(blocks, right, disps)
    win.Flush(right)
    back = [np.zeros_like(b) for b in blocks]
    win.Get_batch(back, right, disps)
    win.Flush(right)
    win.Put_batch((flat, offs), right, disps2)
    win.Flush(right)
    back2 = np.zeros_like(flat)
    win.Get_batch((back2, offs), right, disps2)
    win.Flush(right)
    win.Unlock_all()
    barrier(comm)
    # What the left neighbour wrote here: rebuild its reference.
    lrng = np.random.default_rng(1234 + left)
    lsizes = lrng.integers(1, 257, nblk)
    ldisps = lrng.permutation(win_bytes // 512)[:nblk] * 512
    lblocks = [lrng.integers(0, 256, int(n), dtype=np.uint8) for n in lsizes]
    lref = np.zeros(win_bytes, np.uint8)
    for b, d in zip(lblocks, ldisps, strict=True):
        lref[d:d + len(b)] = b
        lref[d + 256:d + 256 + len(b)] = b
    got = mem.copy()
    win.Free()
    for i, (a, b) in enumerate(zip(back, blocks, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"Get_batch block {i}")
    np.testing.assert_array_equal(back2, flat)
    np.testing.assert_array_equal(got, lref)


def test_batch_ten_thousand_blocks(comm, rank, left, right):
    win_bytes = NBLK * BLK * 4
    mem, win = _batch_setup(comm, rank, win_bytes)

    def make(r):
        rng = np.random.default_rng(99 + r)
        disps = rng.choice(win_bytes // BLK, NBLK, replace=False).astype(np.int64) * BLK
        data = rng.integers(0, 256, NBLK * BLK, dtype=np.uint8)
        return disps, data

    disps, data = make(rank)
    offs = np.stack([np.arange(NBLK) * BLK, np.full(NBLK, BLK)], axis=1).astype(np.int64)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    win.Put_batch((data, offs), right, disps)
    win.Flush(right)
    back = np.zeros_like(data)
    win.Get_batch((back, offs), right, disps)
    win.Flush(right)
    win.Unlock_all()
    barrier(comm)
    got = mem.copy()
    win.Free()
    ldisps, ldata = make(left)
    ref = np.zeros(win_bytes, np.uint8)
    ref.reshape(-1, BLK)[ldisps // BLK] = ldata.reshape(-1, BLK)
    np.testing.assert_array_equal(back, data)
    np.testing.assert_array_equal(got, ref)


def test_batch_bounds_and_params(comm, rank, right):
    win_bytes = 4096
    mem, win = _batch_setup(comm, rank, win_bytes)
    mem[:] = (np.arange(win_bytes) % 253).astype(np.uint8)
    before = mem.copy()
    blocks = [np.full(64, 0xAB, np.uint8) for _ in range(8)]
    barrier(comm)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    with pytest.raises(BoundsError) as last_oob:
        win.Put_batch(blocks, right, [0, 64, 128, 192, 256, 320, 384, win_bytes - 32])
    with pytest.raises(BoundsError) as neg:
        win.Put_batch(blocks, right, [0, 64, -64, 192, 256, 320, 384, 448])
    with pytest.raises(ParamError) as short:
        win.Put_batch(blocks, right, [0, 64, 128])
    with pytest.raises(ParamError):
        win.Get_batch(blocks, right, [0] * 9)
    win.Flush_all()
    win.Unlock_all()
    barrier(comm)
    after = mem.copy()
    win.Free()
    assert "block 7" in str(last_oob.value), str(last_oob.value)
    assert "block 2" in str(neg.value), str(neg.value)
    assert kind(short.value) is ParamError, repr(short.value)
    np.testing.assert_array_equal(after, before)


@pytest.mark.core
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_large_put_batches_land_before_their_tags_and_by_the_flush(comm, rank, left, right, flavor):
    """Put_batch of 8 MiB per call (on one node into an Allocate window the
    engine's copy thread makes the copies while the origin goes on): each
    tag is seen with its batch in place, and once Flush returned the origin
    may reuse its buffer without the target seeing it."""
    nblk, blk, rounds = 16, 512 * 1024, 4
    per = nblk * blk
    if flavor == "create":
        mem = np.zeros(rounds * per, np.uint8)
        win = Win.Create(mem, disp_unit=1, comm=comm)
    else:
        win = Win.Allocate(rounds * per, disp_unit=1, comm=comm)
        mem = np.frombuffer(win.tomemory(), np.uint8)
        mem[:] = 0
    src = np.stack([_payload(r, rank, per) for r in range(rounds)])
    offsets = np.stack([np.arange(nblk) * blk, np.full(nblk, blk)], axis=1)
    order = np.random.default_rng(5).permutation(nblk)  # blocks land at shuffled slots
    barrier(comm)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    for r in range(rounds):
        win.Put_batch((src[r], offsets), right, r * per + order * blk, tag=r)
    win.Flush(right)
    src[:] = 0  # at once after the flush: none of this may reach the target
    bad = []
    for r in range(rounds):
        win.Wait_notify(tag=r, source=left)
        want = _payload(r, left, per).reshape(nblk, blk)
        got = mem[r * per:(r + 1) * per].reshape(nblk, blk)[order]
        if not np.array_equal(got, want):
            bad.append(r)
    win.Unlock_all()
    barrier(comm)
    final = [np.array_equal(mem[r * per:(r + 1) * per].reshape(nblk, blk)[order],
                            _payload(r, left, per).reshape(nblk, blk)) for r in range(rounds)]
    win.Free()
    assert not bad, f"rounds {bad} were not in place when their tag was seen"
    assert all(final), f"the target's window changed after the origin's Flush: {final}"
