"""The priority settings, one process: the info key ``priority`` of every
window flavor and the HIXL face's ``TransferAsync(qos=)``; a bad value is a
ValueError naming the setting and the allowed values, raised before
anything moves. (tests/mpi/test_priority.py: the ordering between ranks.)"""
import numpy as np
import pytest

import hixl_rma
from hixl_rma import Win

pytestmark = pytest.mark.timeout(60)

ALLOWED = "'high', 'normal', 'bulk'"


def _make(flavor, info):
    if flavor == "create":
        return Win.Create(np.zeros(64, np.uint8), info=info)
    if flavor == "allocate":
        return Win.Allocate(64, info=info)
    if flavor == "shared":
        return Win.Allocate_shared(64, info=info)
    return Win.Create_dynamic(info=info)


@pytest.mark.parametrize("flavor", ["create", "allocate", "shared", "dynamic"])
def test_info_priority_values(flavor):
    hixl_rma.Init()
    for value, level in [("high", 0), ("normal", 1), ("bulk", 2), ("BULK", 2), (None, 1)]:
        info = {} if value is None else {"priority": value}
        with _make(flavor, info) as win:
            assert win._core.priority == level, (flavor, value)


@pytest.mark.parametrize("flavor", ["create", "allocate", "shared", "dynamic"])
@pytest.mark.parametrize("bad", ["urgent", "", "0"])
def test_info_priority_unknown_is_a_value_error(flavor, bad):
    hixl_rma.Init()
    with pytest.raises(ValueError) as err:
        _make(flavor, {"priority": bad})
    text = str(err.value)
    assert "info priority" in text and ALLOWED in text and repr(bad) in text, text
    assert isinstance(err.value, hixl_rma.ParamError)
    with _make(flavor, {"priority": "high"}) as win:  # nothing was left half made
        assert win._core.priority == 0


def test_transfer_async_qos():
    hixl_rma.Init()
    dst = np.zeros(1 << 16, np.uint8)
    h = hixl_rma.RegisterMemory(dst, comm=hixl_rma.COMM_SELF)
    try:
        for i, qos in enumerate(["high", "normal", "bulk"]):
            src = np.full(1 << 16, i + 1, np.uint8)
            hixl_rma.TransferAsync("WRITE", src, 0, 0, h, qos=qos).Wait()
            assert np.all(dst == i + 1), qos
        back = np.zeros(16, np.uint8)
        hixl_rma.TransferAsync("READ", back, 0, 0, h, qos="high").Wait()
        assert np.all(back == 3)
        src = np.full(1 << 16, 9, np.uint8)
        for bad in ["urgent", 7, None]:
            with pytest.raises(ValueError) as err:
                hixl_rma.TransferAsync("WRITE", src, 0, 0, h, qos=bad)
            assert "TransferAsync qos" in str(err.value) and ALLOWED in str(err.value)
        assert np.all(dst == 3)  # nothing moved
        hixl_rma.Fence(hixl_rma.COMM_SELF)
    finally:
        hixl_rma.DeregisterMemory(h)
