"""Put_batch / Get_batch of thousands of non-adjacent blocks, the W3 pattern:
on a Create window the engine moves them with vectored cma (1,024 blocks per
system call), on an Allocate window with one memcpy loop. Blocks smaller and
larger than a page, more than 1,024 of them, checked byte for byte at the
target, including the gaps between blocks; a batch with one block out of
bounds moves nothing.
"""
import numpy as np
import pytest

import hixl_rma
from hixl_rma import BoundsError, Win

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(120, method="thread")]

PAGE = 4096


def _window(comm, flavor, nbytes):
    if flavor == "create":
        mem = np.zeros(nbytes, np.uint8)
        return mem, Win.Create(mem, disp_unit=1, comm=comm)
    win = Win.Allocate(nbytes, disp_unit=1, comm=comm)
    mem = np.frombuffer(win.tomemory(), np.uint8)
    mem[:] = 0
    return mem, win


def _plan(r, nblk, sizes):
    """Rank r's blocks: (source data, (offset, length) rows, target displacements, window size).
    Every block starts on a fresh 'cell' twice its maximum size, at a random
    offset inside it: non-adjacent, unaligned, in random order."""
    rng = np.random.default_rng(4242 + r)
    lens = rng.choice(sizes, nblk).astype(np.int64)
    cell = 2 * int(max(sizes))
    disps = rng.permutation(nblk).astype(np.int64) * cell + rng.integers(0, cell // 2, nblk)
    offs = np.stack([np.r_[0, np.cumsum(lens)[:-1]], lens], axis=1).astype(np.int64)
    data = rng.integers(0, 256, int(lens.sum()), dtype=np.uint8)
    return data, offs, disps, nblk * cell


def _expected(r, nblk, sizes):
    data, offs, disps, nbytes = _plan(r, nblk, sizes)
    ref = np.zeros(nbytes, np.uint8)
    for (o, n), d in zip(offs.tolist(), disps.tolist(), strict=True):
        ref[d:d + n] = data[o:o + n]
    return ref


SIZES = {"below_page": [1, 8, 100, 1000, PAGE - 1], "page": [PAGE],
         "above_page": [PAGE + 1, 3 * PAGE + 5, 16 * PAGE], "mixed": [1, 100, PAGE - 1, PAGE, PAGE + 1, 9000]}


@pytest.mark.parametrize("sizes", sorted(SIZES))
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_many_scattered_blocks_put_and_get(comm, rank, left, right, flavor, sizes):
    nblk = 2500  # three vectored system calls' worth
    sz = SIZES[sizes]
    data, offs, disps, nbytes = _plan(rank, nblk, sz)
    # every rank's window must hold every rank's plan: the same size for all
    mem, win = _window(comm, flavor, nbytes)
    barrier(comm)
    win.Lock(right, hixl_rma.LOCK_EXCLUSIVE)
    win.Put_batch((data, offs), right, disps)
    win.Flush(right)
    back = np.zeros_like(data)
    win.Get_batch((back, offs), right, disps)
    win.Unlock(right)
    barrier(comm)
    got = mem.copy()
    win.Free()
    np.testing.assert_array_equal(back, data)
    np.testing.assert_array_equal(got, _expected(left, nblk, sz))


@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_out_of_bounds_batch_moves_nothing(comm, rank, right, flavor):
    nblk, blk = 3000, 512
    nbytes = 2 * nblk * blk
    mem, win = _window(comm, flavor, nbytes)
    mem[:] = (np.arange(nbytes) % 251).astype(np.uint8)
    before = mem.copy()
    src = np.full(nblk * blk, 0xA5, np.uint8)
    offs = np.stack([np.arange(nblk) * blk, np.full(nblk, blk)], axis=1).astype(np.int64)
    disps = np.arange(nblk, dtype=np.int64) * 2 * blk
    disps[2000] = nbytes - blk // 2  # in the second system call's share, straddling the end
    barrier(comm)
    win.Lock(right, hixl_rma.LOCK_EXCLUSIVE)
    with pytest.raises(BoundsError) as put_err:
        win.Put_batch((src, offs), right, disps)
    with pytest.raises(BoundsError):
        win.Get_batch((src, offs), right, disps)
    win.Flush(right)
    win.Unlock(right)
    barrier(comm)
    after = mem.copy()
    win.Free()
    assert "block 2000" in str(put_err.value), str(put_err.value)
    assert (src == 0xA5).all()
    np.testing.assert_array_equal(after, before)


@pytest.fixture
def cma_threads(threads, monkeypatch):
    """Every rank's engine restarted with HIXL_RMA_CMA_THREADS=``threads``
    (option CmaThreads, taken when an engine starts); the usual one after."""
    hixl_rma.Finalize()
    monkeypatch.setenv("HIXL_RMA_CMA_THREADS", threads)
    hixl_rma.Init()
    yield threads
    hixl_rma.Finalize()
    monkeypatch.undo()
    hixl_rma.Init()


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_large_put_and_get_shared_out(comm, rank, left, right, flavor, cma_threads):
    """One Put / Get of several MiB at an odd displacement: the engine cuts it
    into pieces that its threads copy (mapped memory) or move (cma) side by
    side; every byte lands where it should and nothing around it moves."""
    nbytes, disp, n = 12 << 20, 4093, (9 << 20) + 7
    mem, win = _window(comm, flavor, nbytes)
    src = np.random.default_rng(rank).integers(0, 256, n, dtype=np.uint8)
    back = np.zeros(n, np.uint8)
    try:
        win.Lock(right)
        win.Put(src, right, disp)
        win.Flush(right)
        win.Get(back, right, disp)
        win.Unlock(right)
        barrier(comm)
        expect = np.zeros(nbytes, np.uint8)
        expect[disp:disp + n] = np.random.default_rng(left).integers(0, 256, n, dtype=np.uint8)
        landed = np.array_equal(mem, expect)
        barrier(comm)
    finally:
        win.Free()
    assert landed
    np.testing.assert_array_equal(back, src)


@pytest.mark.parametrize("flavor", ["create", "allocate"])
@pytest.mark.parametrize("nbytes", [64 << 10, 8 << 20])
def test_put_batch_holds_its_origin_until_the_flush(comm, rank, left, right, flavor, nbytes):
    """Issue 23.2: a Put_batch's origin is read after the call returns (the
    engine's copy thread, into a mapped window, from 4 MiB; UCX, elsewhere):
    a bytearray origin refuses to resize (BufferError) until the Flush that
    completes it, as a single Put's does, and the bytes land whole."""
    block = 4096
    mem, win = _window(comm, flavor, nbytes)
    barrier(comm)  # every window is zeroed before any rank writes
    origin = bytearray(np.full(nbytes, rank + 1, np.uint8).tobytes())
    offs = np.stack([np.arange(nbytes // block) * block, np.full(nbytes // block, block)], 1).astype(np.int64)
    win.Lock_all()
    win.Put_batch((origin, offs), right, offs[:, 0].copy())
    with pytest.raises(BufferError):
        origin.extend(b"x" * nbytes)  # would move the memory under the copy
    with pytest.raises(BufferError):
        del origin[: nbytes // 2]
    win.Flush(right)
    origin.extend(b"x")  # completed: the origin is the user's again
    win.Unlock_all()
    barrier(comm)
    assert (mem == left + 1).all()
    win.Free()
