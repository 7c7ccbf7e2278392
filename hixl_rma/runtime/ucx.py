"""Make exactly one UCX live in this process before the engine loads.

The MPI wheels bundle their own UCX under the same sonames as the libucx
wheel, and two UCX builds cannot share a process. So: if a libucp is
already loaded (e.g. ``from mpi4py import MPI`` ran first), reuse it when its
version is supported; otherwise load the UCX this package was built for.
The extension then binds to whichever libucp is in the process by soname.
"""
import ctypes
import os

#: UCX versions the built-in engine supports (inclusive range of (major, minor)).
SUPPORTED = ((1, 15), (1, 22))

_loaded = None  # (version tuple, origin) once done


class UCXVersionError(ImportError):
    """The UCX found in the process is one the engine does not support."""


def _version(lib):
    major, minor, release = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    lib.ucp_get_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(release))
    return (major.value, minor.value, release.value)


def _check(version, origin):
    if not SUPPORTED[0] <= version[:2] <= SUPPORTED[1]:
        lo, hi = SUPPORTED
        raise UCXVersionError(
            f"UCX {'.'.join(map(str, version))} ({origin}) is loaded in this process, but hixl_rma "
            f"supports UCX {lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}; import hixl_rma before the library that "
            f"loaded it, or use an MPI built on a supported UCX")


def _already_loaded():
    try:
        return ctypes.CDLL("libucp.so.0", mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
    except OSError:
        return None


def load():
    """Ensure one supported libucp is loaded; returns (version, origin)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    try:
        from hixl_rma import _build_config as cfg
    except ImportError:  # a source tree that was never built
        cfg = None
    source = getattr(cfg, "UCX_SOURCE", "wheel")
    if source == "vendor":
        _loaded = ((0, 0, 0), "vendor libhixl")
        return _loaded
    lib = _already_loaded()
    origin = "already in the process"
    if lib is None:
        if source == "system":
            prefix = os.path.join(cfg.UCX_HOME, "lib")
            for name in ("libucs.so.0", "libuct.so.0", "libucp.so.0"):
                ctypes.CDLL(os.path.join(prefix, name), mode=ctypes.RTLD_GLOBAL)
            origin = f"UCX_HOME {cfg.UCX_HOME}"
        else:
            import libucx

            libucx.load_library()
            origin = f"libucx wheel {libucx.__version__}"
        lib = _already_loaded()
        if lib is None:
            raise ImportError("could not load libucp.so.0 (UCX)")
    version = _version(lib)
    _check(version, origin)
    _loaded = (version, origin)
    return _loaded
