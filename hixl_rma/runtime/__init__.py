"""The runtime layer: the process (``process``: Init/Finalize, this rank's
engine, collectives with deadlines), communicators (``comm``), addresses
(``netif``), the UCX loader (``ucx``) and ``hooks``, where tools attach.

``hixl_rma.runtime.Init`` and the process's other names are read through
this package, so ``hixl_rma.runtime`` keeps its import path. They come from
``process`` on first use: importing the package alone (which the UCX loader
needs before the engine is linked) must not load the engine.
"""
import importlib

_PARTS = frozenset(("process", "comm", "netif", "ucx", "hooks"))  # submodules: the import system loads those


def __getattr__(name):
    """One of the process's names (``Init``, ``current``, ...) on first use."""
    if name.startswith("__") or name in _PARTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    process = importlib.import_module(f"{__name__}.process")
    try:
        value = getattr(process, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value  # once: later reads are plain attribute reads
    return value


def __dir__():
    return sorted(set(globals()) | set(dir(importlib.import_module(f"{__name__}.process"))))
