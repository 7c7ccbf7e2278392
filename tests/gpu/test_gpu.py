"""Device-memory windows on a real GPU (skipped without one).

Run on a GPU machine: mpiexec -n 2 pytest -q --with-mpi tests/gpu
Covers device<->device, host->device and device->host Put/Get under fence and
lock from 1 B to 256 MiB, a non-contiguous batch, Accumulate SUM from every
rank, and notified Put.
"""
import numpy as np
import pytest

try:
    import cupy as cp
    _GPU = cp.cuda.runtime.getDeviceCount() > 0
except Exception:  # no CuPy or no driver
    cp, _GPU = None, False

pytestmark = [pytest.mark.skipif(not _GPU, reason="needs a CUDA GPU and CuPy"),
              pytest.mark.mpi(min_size=2), pytest.mark.timeout(300)]

SIZES = [1, 8, 4096, 1 << 20, 16 << 20, 256 << 20]


@pytest.fixture(scope="module")
def comm():
    from mpi4py import MPI

    import hixl_rma
    hixl_rma.Init()
    return MPI.COMM_WORLD


def _ring(comm):
    return (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("origin_kind", ["device", "host"])
def test_put_get_fence(comm, size, origin_kind):
    import hixl_rma
    nxt, prv = _ring(comm)
    mem = cp.zeros(size, cp.uint8)
    with hixl_rma.Win.Create(mem, comm=comm) as win:
        pattern = (np.arange(size) * 7 + comm.rank) % 251
        origin = cp.asarray(pattern, cp.uint8) if origin_kind == "device" else pattern.astype(np.uint8)
        win.Fence()
        win.Put(origin, nxt)
        win.Fence()
        expect = ((np.arange(size) * 7 + prv) % 251).astype(np.uint8)
        assert np.array_equal(cp.asnumpy(mem), expect)
        back = cp.zeros(size, cp.uint8) if origin_kind == "device" else np.zeros(size, np.uint8)
        win.Get(back, nxt)
        win.Fence(hixl_rma.MODE_NOSUCCEED)
        got = cp.asnumpy(back) if origin_kind == "device" else back
        assert np.array_equal(got, pattern.astype(np.uint8))


def test_put_lock_and_batch(comm):
    import hixl_rma
    nxt, prv = _ring(comm)
    mem = cp.zeros(1 << 20, cp.uint8)
    with hixl_rma.Win.Create(mem, comm=comm) as win:
        src = cp.arange(64 * 256, dtype=cp.uint8).reshape(64, 256) + comm.rank
        comm.Barrier()
        win.Lock(nxt)
        win.Put_batch([src[i] for i in range(64)], nxt, np.arange(64) * 1024)
        win.Unlock(nxt)
        comm.Barrier()
        host = cp.asnumpy(mem).reshape(-1, 1024)[:64, :256]
        assert np.array_equal(host, (np.arange(64 * 256).reshape(64, 256) + prv).astype(np.uint8))


def test_accumulate_sum_all_ranks(comm):
    import hixl_rma
    mem = cp.zeros(1000, cp.float64)
    with hixl_rma.Win.Create(mem, disp_unit=8, comm=comm) as win:
        win.Lock_all()
        for _ in range(5):
            win.Accumulate(cp.ones(1000, cp.float64), 0, 0, hixl_rma.SUM)
        win.Unlock_all()
        comm.Barrier()
        if comm.rank == 0:
            assert np.array_equal(cp.asnumpy(mem), np.full(1000, 5.0 * comm.size))


def test_put_notify(comm):
    import hixl_rma
    nxt, prv = _ring(comm)
    mem = cp.zeros(4 << 20, cp.uint8)
    with hixl_rma.Win.Create(mem, comm=comm) as win:
        win.Lock_all(hixl_rma.MODE_NOCHECK)
        for i in range(8):
            win.Put_notify(cp.full(1 << 19, i + 1, cp.uint8), nxt, i << 19, tag=i)
            win.Wait_notify(tag=i, source=prv)
            assert int(mem[i << 19:(i + 1) << 19].min()) == i + 1
        win.Unlock_all()
        comm.Barrier()


def test_tomemory_is_device_view(comm):
    import hixl_rma
    mem = cp.arange(10, dtype=cp.int32)
    with hixl_rma.Win.Create(mem, comm=comm) as win:
        view = win.tomemory()
        assert isinstance(view, cp.ndarray) and int(view.data.ptr) == int(mem.data.ptr)
