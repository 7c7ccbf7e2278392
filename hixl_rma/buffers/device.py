"""Device (GPU) memory: detection without CUDA at build or import time.

Whether memory is on a device is decided from the pointer: the CUDA driver
is asked when this process has loaded it (CuPy, PyTorch and Numba load it),
and with no driver loaded no pointer can be device memory. An object's
interface alone does not decide: ``__cuda_array_interface__`` may describe
host memory (mpi4py's own tests do that), and such objects move as host
buffers. A DLPack tensor says its device. The engine registers device
windows as MEM_DEVICE; UCX moves them (cuda_ipc / cuda_copy).
"""
import ctypes
import os

from hixl_rma.ground.errors import ParamError, UnsupportedError

_DLPACK_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged
_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
_CU_MEMORYTYPE_DEVICE, _CU_MEMORYTYPE_UNIFIED = 2, 4
_driver = None


def _cuda_driver():
    """The CUDA driver library if this process has loaded it, else None
    (never loads it: a host-only program must not pay for CUDA)."""
    global _driver
    if _driver is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            return None
        lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        lib.cuPointerGetAttribute.restype = ctypes.c_int
        _driver = lib
    return _driver


def is_device_pointer(address):
    """True when ``address`` is device (or managed) memory by the CUDA driver."""
    drv = _cuda_driver() if address else None
    if drv is None:
        return False
    kind = ctypes.c_uint(0)
    rc = drv.cuPointerGetAttribute(ctypes.byref(kind), _CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address)
    return rc == 0 and kind.value in (_CU_MEMORYTYPE_DEVICE, _CU_MEMORYTYPE_UNIFIED)


def is_device(obj):
    """True when obj is device memory: a ``__cuda_array_interface__`` whose
    pointer the CUDA driver calls device memory, or a DLPack CUDA tensor."""
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        try:
            return is_device_pointer(int(cai["data"][0]))
        except (KeyError, TypeError, IndexError, ValueError):
            return False  # a malformed interface: the buffer parser names the problem
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None:
        return False
    try:
        return dev()[0] in _DLPACK_CUDA
    except Exception:  # a broken __dlpack_device__ is simply not a device array
        return False


def with_cai(obj):
    """obj, or a zero-copy CuPy view of a DLPack-only device array."""
    if hasattr(obj, "__cuda_array_interface__"):
        return obj
    try:
        import cupy
    except ImportError:
        raise UnsupportedError(f"{type(obj).__name__} is a DLPack device array without "
                               f"__cuda_array_interface__; install CuPy to use it") from None
    return cupy.from_dlpack(obj)


def device_view(obj):
    """What tomemory() returns for a device window: a CuPy view when CuPy is
    importable (no copy), else the registered device array itself."""
    try:
        import cupy
    except ImportError:
        return obj
    return cupy.asarray(obj)


def to_host(obj):
    """A numpy copy of a device array (accumulate computes at the origin, on the host)."""
    try:
        import cupy
        return cupy.asnumpy(cupy.asarray(with_cai(obj)))
    except ImportError:
        pass
    cpu = getattr(obj, "cpu", None)
    if cpu is not None:  # PyTorch
        return cpu().numpy()
    raise UnsupportedError(f"cannot copy {type(obj).__name__} to the host: install CuPy")


def copy_to_device(dst, host):
    """Copy a host array into a device array of the same size."""
    try:
        import cupy
    except ImportError:
        raise UnsupportedError("writing an accumulate result into device memory needs CuPy") from None
    view = cupy.asarray(with_cai(dst))
    view[...] = cupy.asarray(host).reshape(view.shape)


def require_host(buf, what):
    """Raise a clear error for a device buffer where only host memory works."""
    if getattr(buf, "device", False):
        raise ParamError(f"{what}: device memory is not supported here (pass a host buffer)")
