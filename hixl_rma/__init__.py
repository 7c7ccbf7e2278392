"""hixl_rma: one-sided RMA with MPI's semantics, moved by a HIXL engine on UCX.

Importing the package loads UCX (one per process: see ``_ucx``) and
nothing else: the names below come from their modules on first use (PEP
562), because every one of those imports ``mpi4py.MPI``, which initializes
MPI, and ``python -m hixl_rma prog.py`` must leave that to the program (it
may set ``mpi4py.rc.initialize = False`` and call ``MPI.Init_thread``).
"""
import importlib
import importlib.util
import os
import sys

from .ground import log as _log
from .runtime.ucx import load as _load_ucx

if importlib.util.find_spec(__name__ + "._engine") is None:
    # A checkout of the sources first on sys.path (the current directory
    # under ``python -m``, a script's own directory) shadows the installed
    # package; what it lacks is the compiled engine, which would otherwise
    # surface later as a bare "cannot import name '_engine'".
    raise ImportError(
        f"hixl_rma was imported from {os.path.dirname(os.path.abspath(__file__))}, which has no compiled engine "
        f"(hixl_rma._engine): a source checkout shadows the installed package when Python runs from it or from a "
        f"script inside it. Run from another directory, or build the checkout in place (pip install -e .)",
        name=__name__ + "._engine")

_log.configure()  # HIXL_RMA_LOG_LEVEL, before anything could log
UCX_VERSION, UCX_ORIGIN = _load_ucx()
__version__ = "0.1.0"

# module -> the names the package exports from it
_EXPORTS = {
    "_engine": ("MEM_DEVICE", "MEM_HOST", "OPTION_JOB_TOKEN", "OPTION_TIMEOUT_MS", "READ", "TRANSFER_COMPLETED",
                "TRANSFER_FAILED", "TRANSFER_WAITING", "WRITE", "Engine", "MemHandle", "TransferRequest",
                "default_timeout_ms"),
    "ground.errors": ("ALREADY_CONNECTED", "FAILED", "NOT_CONNECTED", "NOTIFY_FAILED", "PARAM_INVALID", "PEER_FAILURE",
                      "RESOURCE_EXHAUSTED", "SUCCESS", "TIMEOUT", "UNSUPPORTED", "AccessError", "BoundsError",
                      "DatatypeError", "EpochError", "HixlError", "HixlTimeoutError", "NotConnectedError", "ParamError",
                      "PeerFailure", "ResourceError", "UnsupportedError"),
    "runtime.comm": ("Communicator",),
    "ground.constants": ("LOCK_EXCLUSIVE", "LOCK_SHARED", "MODE_NOCHECK", "MODE_NOSTORE", "MODE_NOPUT",
                         "MODE_NOPRECEDE", "MODE_NOSUCCEED", "PROC_NULL", "INFO_NULL", "COMM_SELF", "COMM_WORLD",
                         "WIN_FLAVOR_CREATE", "WIN_FLAVOR_ALLOCATE", "WIN_FLAVOR_SHARED", "WIN_FLAVOR_DYNAMIC",
                         "WIN_UNIFIED", "ACCESS_READ_WRITE", "ACCESS_READ_ONLY", "ACCESS_WRITE_ONLY", "MEMORY_HOST",
                         "MEMORY_DEVICE"),
    "window.request": ("Request",),
    "runtime.process": ("Init", "Is_initialized"),
    "win": ("Get_address", "Win"),
    # Finalize: the HIXL face's, which also deregisters HIXL-style handles
    "hixl_api": ("Connect", "DeregisterMemory", "Fence", "Get", "GetRank", "GetSize", "GetWorldCommunicator",
                 "MemoryHandle", "Put", "RegisterMemory", "TransferAsync", "Finalize"),
    "buffers.ops": ("BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "MAX", "MAXLOC", "MIN", "MINLOC", "NO_OP", "PROD",
            "REPLACE", "SUM", "Op"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = [*sorted(_WHERE), "UCX_VERSION", "UCX_ORIGIN", "__version__"]


def _attach_tools():
    # Tools attach through the hooks (hooks.py); the package, a face, is
    # what loads them: telemetry's exporter watches Init (it serves only
    # when HIXL_RMA_TELEMETRY asks), and the tools HIXL_RMA_CHECK names
    # (races) are on before the program uses MPI.
    from . import telemetry
    from .runtime import hooks

    telemetry.attach()
    for name in hooks.requested():
        importlib.import_module(hooks.TOOLS[name]).enable()


_attach_tools()


_importing = 0  # this package's own lazy imports under way (the drop-in waits for the outermost: dropin._replace)


def _import(module):
    global _importing
    _importing += 1
    try:
        return importlib.import_module(f"{__name__}.{module}")
    finally:
        _importing -= 1
        dropin = sys.modules.get(f"{__name__}.dropin")
        if not _importing and dropin is not None:
            dropin.replace_deferred()


def __getattr__(name):
    """A name of the package from its module, or a submodule, on first use."""
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(_import(module), name)
        globals()[name] = value  # once: later reads are plain attribute reads
        return value
    if not name.startswith("__"):
        try:
            return _import(name)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return __all__
