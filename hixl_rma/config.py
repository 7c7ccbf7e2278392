"""Every ``HIXL_RMA_*`` setting, its default, and when it is read.

The Python layer reads its settings through this module only; the engine
reads its own (marked "engine") from the environment when it starts or, for
``HIXL_RMA_CMA_THREADS``, at each large transfer. README, "Settings", lists
the same table.
"""
import os

from .errors import ParamError

#: name -> (default, who reads it and when, what it does)
SETTINGS = {
    "HIXL_RMA_TIMEOUT_MS": ("30000", "Init", "timeout of every blocking call, in ms"),
    "HIXL_RMA_HOST": ("", "Init", "the address this rank's engine listens on (default: the host "
                                  "name's address, loopback when it has none)"),
    "HIXL_RMA_SHARED_FENCE": ("1", "a window's first Fence", "0: Fence meets in an MPI barrier even when "
                                                               "every rank is on this node"),
    "HIXL_RMA_POLL_US": ("50", "engine, at start", "how long the progress thread polls after serving a peer"),
    "HIXL_RMA_CMA": ("1", "engine, at start", "0: UCX moves every same-node block (no engine cma)"),
    "HIXL_RMA_CMA_THREADS": ("", "engine, each transfer of 4 MiB or more",
                             "threads that share a large same-node copy (default: one helper where a "
                             "core is idle)"),
    "HIXL_RMA_DIRECT": ("1", "engine, at connect", "0: never map a peer's memory (no memcpy path)"),
}


def _get(name):
    return os.environ.get(name, "") or SETTINGS[name][0]


def timeout_ms():
    """``HIXL_RMA_TIMEOUT_MS`` as a positive int (ParamError otherwise)."""
    value = _get("HIXL_RMA_TIMEOUT_MS")
    try:
        ms = int(value)
    except ValueError:
        raise ParamError(f"HIXL_RMA_TIMEOUT_MS must be an integer number of milliseconds, got {value!r}") \
            from None
    if ms <= 0:
        raise ParamError(f"HIXL_RMA_TIMEOUT_MS must be positive, got {ms}")
    return ms


def host():
    """``HIXL_RMA_HOST``, or None to choose the address automatically."""
    return _get("HIXL_RMA_HOST") or None


def shared_fence():
    """False when ``HIXL_RMA_SHARED_FENCE=0``."""
    return _get("HIXL_RMA_SHARED_FENCE") != "0"
