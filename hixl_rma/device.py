"""Device (GPU) memory: detection without CUDA at build or import time.

A device array is recognised by its interface alone (``__cuda_array_interface__``
as CuPy arrays and PyTorch CUDA tensors expose it, or a DLPack CUDA device),
so host-only paths never query the CUDA driver. The engine registers device
windows as MEM_DEVICE; UCX moves them (cuda_ipc / cuda_copy).
"""
from .errors import ParamError, UnsupportedError

_DLPACK_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged


def is_device(obj):
    """True when obj is a device array (cheap: attribute checks only)."""
    if hasattr(obj, "__cuda_array_interface__"):
        return True
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
