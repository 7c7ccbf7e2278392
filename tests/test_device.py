"""Device-memory support that needs no GPU: detection, error paths, skip logic."""
import subprocess
import sys

import numpy as np
import pytest

import hixl_rma
from hixl_rma.buffers import device

pytestmark = pytest.mark.timeout(60)


class FakeCAI:
    """Looks like a CUDA array to the interface checks, points at host memory."""

    def __init__(self, host):
        self._host = host
        self.__cuda_array_interface__ = {
            "shape": host.shape, "typestr": host.dtype.str, "data": (host.ctypes.data, False),
            "version": 3, "strides": None}


class FakeDLPack:
    def __init__(self, kind):
        self.kind = kind

    def __dlpack_device__(self):
        return (self.kind, 0)


class BrokenDLPack:
    def __dlpack_device__(self):
        raise RuntimeError("boom")


@pytest.mark.parametrize("obj", [np.zeros(4), bytearray(8), b"abc", memoryview(bytearray(3)),
                                 np.zeros((3, 3))[:, 1], FakeDLPack(1), BrokenDLPack(), 5, None,
                                 FakeCAI(np.zeros(4))])
def test_host_objects_are_not_device(obj):
    # With no CUDA driver loaded no pointer is device memory, whatever
    # interface describes it (mpi4py's tests hand over such objects).
    assert device.is_device(obj) is False


def test_host_memory_behind_a_cuda_interface_moves_as_host_memory():
    host = np.arange(16, dtype=np.float32)
    buf = hixl_rma.buffers.datatypes.as_buffer(FakeCAI(host), writable=True)
    assert buf.device is False and buf.address == host.ctypes.data and buf.size == host.nbytes
    assert buf.dtype == np.float32 and buf.count == 16
    buf.obj[3] = 42  # a host view of the same memory, no copy
    assert host[3] == 42


def test_the_pointer_decides_not_the_interface(fake_cuda):
    host = np.zeros(4)
    fake = FakeCAI(host)
    assert device.is_device(fake) is False  # the driver calls it host memory
    fake_cuda.device_addresses.add(host.ctypes.data)
    assert device.is_device(fake) is True and device.is_device_pointer(host.ctypes.data)
    assert not device.is_device_pointer(0) and not device.is_device_pointer(host.ctypes.data + 8)


@pytest.mark.parametrize("obj", [FakeCAI(np.zeros(4)), FakeDLPack(2), FakeDLPack(13)])
def test_device_objects_are_recognised(obj, fake_cuda):
    if hasattr(obj, "__cuda_array_interface__"):
        fake_cuda.device_addresses.add(obj.__cuda_array_interface__["data"][0])
    assert device.is_device(obj) is True


def test_device_buffer_is_described_without_copy(fake_cuda):
    host = np.arange(16, dtype=np.float32)
    fake_cuda.device_addresses.add(host.ctypes.data)
    buf = hixl_rma.buffers.datatypes.as_buffer(FakeCAI(host), writable=True, allow_device=True)
    assert buf.device is True
    assert buf.address == host.ctypes.data and buf.size == host.nbytes


def test_device_buffer_refused_where_host_only(fake_cuda):
    fake = FakeCAI(np.zeros(4))
    fake_cuda.device_addresses.add(fake.__cuda_array_interface__["data"][0])
    with pytest.raises(hixl_rma.ParamError, match="device"):
        hixl_rma.buffers.datatypes.as_buffer(fake, writable=False)
    buf = hixl_rma.buffers.datatypes.as_buffer(fake, writable=False, allow_device=True)
    with pytest.raises(hixl_rma.ParamError, match="device memory is not supported here"):
        device.require_host(buf, "Put_batch")


def test_dlpack_only_array_needs_cupy():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed: the DLPack route works")
    except ImportError:
        pass
    with pytest.raises(hixl_rma.UnsupportedError, match="CuPy"):
        device.with_cai(FakeDLPack(2))


def test_device_registration_without_gpu_is_a_clear_error():
    """On a machine without CUDA, registering device memory fails cleanly."""
    if _gpu_present():
        pytest.skip("a GPU is present")
    host = np.zeros(1024, np.uint8)
    with hixl_rma.Engine() as eng:
        with pytest.raises(hixl_rma.HixlError, match="RegisterMem"):
            eng.register_mem_addr(host.ctypes.data, host.nbytes, hixl_rma.MEM_DEVICE)
        assert eng.stats()["regions"] == 0


def test_host_only_import_loads_no_cuda():
    """Importing hixl_rma and moving host bytes never loads libcuda."""
    code = ("import hixl_rma, numpy as np\n"
            "e = hixl_rma.Engine(); f = hixl_rma.Engine(); b = np.zeros(64, np.uint8)\n"
            "h = f.register_mem(b); e.connect(f.address)\n"
            "e.transfer_sync(f.address, hixl_rma.WRITE, [(np.ones(64, np.uint8).ctypes.data, h.addr, 64)])\n"
            "print(int(b.sum()))\n"
            "print(any('libcuda.so' in l for l in open('/proc/self/maps')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["64", "False"]


def _gpu_present():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def test_gpu_module_skips_with_reason_without_gpu():
    if _gpu_present():
        pytest.skip("a GPU is present: the GPU module runs for real")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                          "tests/gpu/test_gpu.py"], capture_output=True, text=True, timeout=120,
                         cwd=__file__.rsplit("/tests/", 1)[0])
    assert "skipped" in out.stdout and "GPU" in out.stdout, out.stdout + out.stderr
