"""Helpers shared by the multi-rank tests."""
import numpy as np

from hixl_rma import runtime as _rt


def barrier(comm):
    """A barrier with hixl_rma's timeout (interruptible, never spins a core)."""
    _rt.barrier(comm, _rt.runtime().timeout_ms)


def one_node(world_ranks=None):
    """Every rank (or these world ranks) runs on this rank's host, as
    hixl_rma sees it: the shared-memory fence, cma and mapped windows are
    possible only then; across hosts the network paths are taken instead."""
    st = _rt.runtime()
    return st.same_node(range(st.size) if world_ranks is None else world_ranks)


def pattern(n, rank, dtype=np.int64, salt=0):
    """Values that tell the writing rank, the element and the test apart."""
    dt = np.dtype(dtype)
    base = np.arange(n, dtype=np.int64) * 3 + 7 * rank + 11 * salt + 1
    if dt.kind == "c":
        return (base + 1j * (rank + 1)).astype(dt)
    if dt.kind in "iu":
        return (base % min(100, np.iinfo(dt).max)).astype(dt)
    return base.astype(dt)
