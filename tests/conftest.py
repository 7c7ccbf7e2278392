"""Fixtures shared by the single-process tests."""
import os

import pytest

from hixl_rma.buffers import device

# Under pytest-xdist each worker makes its simulated hosts under names of
# its own (tests/support/simhosts.py reads the prefix when imported, and the
# processes the tests start inherit it): two workers' hosts never meet.
if os.environ.get("PYTEST_XDIST_WORKER") and "HIXL_SIMHOSTS_PREFIX" not in os.environ:
    os.environ["HIXL_SIMHOSTS_PREFIX"] = f"hixl-sim-{os.environ['PYTEST_XDIST_WORKER']}"


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
