"""Fixtures shared by the single-process tests."""
import pytest

from hixl_rma.buffers import device


class _FakeDriver:
    """Stands in for a loaded CUDA driver that calls the given addresses
    device memory (``cuPointerGetAttribute``), so the device paths can be
    tested without a GPU; every other address is host memory to it."""

    def __init__(self):
        self.device_addresses = set()

    def cuPointerGetAttribute(self, ref, attribute, address):  # the driver's name
        if address not in self.device_addresses:
            return 1  # CUDA_ERROR_INVALID_VALUE: not a CUDA pointer
        ref._obj.value = device._CU_MEMORYTYPE_DEVICE
        return 0


@pytest.fixture
def fake_cuda(monkeypatch):
    """A 'loaded CUDA driver'; add addresses to ``.device_addresses``."""
    drv = _FakeDriver()
    monkeypatch.setattr(device, "_cuda_driver", lambda: drv)
    return drv
