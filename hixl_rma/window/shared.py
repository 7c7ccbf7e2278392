"""Allocate_shared's memory: one segment for all ranks of the window,
contiguous across ranks in rank order (MPI's default), so that code may
address a neighbour's part from its own base.

Comm rank 0 allocates the segment in engine memory; every other rank maps it
(the engine's direct pointer to a same-node peer's memory) and registers its
own part with its own engine, so that RMA to it works as to any window
memory. Where some rank cannot map the segment (another node, no
shared-memory transport), or a rank's info says
``alloc_shared_noncontig=true``, every rank allocates its own part instead
(``None`` from :func:`allocate`). The creation's collectives run on every
rank, also one whose arguments failed (it takes part with size -1), so none
waits for another in vain.
"""
import numpy as np

from hixl_rma import _engine
from hixl_rma.ground.errors import HixlError
from hixl_rma.runtime import process as _rt

_FAILED = -1


class Segment:
    """The shared segment as this rank sees it."""

    def __init__(self, engine, base, offsets, sizes, own, segment, pin=None):
        self._engine = engine
        self.base = base            # the segment's address in this process
        # What keeps the segment mapped here (views of it hold it): rank 0's
        # allocation, or the other ranks' pin of it.
        self.keeper = pin if pin is not None else segment
        self.offsets = offsets      # byte offset of each rank's part
        self.sizes = sizes
        self.own = own              # this rank's registration of its part (None if empty)
        self.segment = segment      # rank 0: the allocation itself, kept to the very end

    def pointer(self, rank):
        """The address of ``rank``'s part in this process."""
        return self.base + int(self.offsets[rank])

    def handles(self):
        """This rank's registration of its part (the segment stays: see release)."""
        return [self.own] if self.own is not None and self.own is not self.segment else []

    def release(self):
        """Rank 0: free the segment, once every rank has withdrawn its part."""
        seg, self.segment = self.segment, None
        if seg is not None and seg.registered and not self._engine.finalized:
            self._engine.deregister_mem(seg)


def allocate(comm, st, size, noncontig):
    """The contiguous segment of a window over ``comm`` (a Communicator)
    with this rank's part of ``size`` bytes (``-1``: this rank's arguments
    failed); None where every rank is to allocate its own part. Collective
    over ``comm``; ``st`` is the runtime."""
    eng = st.engine
    mine = np.array([size, 1 if noncontig else 0], np.int64)
    every = np.zeros((comm.size, 2), np.int64)
    _rt.collective(comm.comm, lambda: comm.comm.Iallgather(mine, every), "Allocate_shared (sizes)", st.timeout_ms,
                   comm.world_ranks, keep=(mine, every))
    sizes = every[:, 0]
    if (sizes == _FAILED).any() or every[:, 1].any() or not _engine.has("alloc_mem"):
        return None
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    total = int(sizes.sum())
    segment = None
    where = np.zeros(1, np.uint64)
    if comm.rank == 0 and total:
        try:
            segment = eng.alloc_mem(total)
            where[0] = segment.addr
        except HixlError:
            segment = None  # every rank falls back to a part of its own
    _rt.collective(comm.comm, lambda: comm.comm.Ibcast(where, root=0), "Allocate_shared (segment)", st.timeout_ms,
                   comm.world_ranks, keep=where)
    base = int(where[0])
    ok = bool(base)
    pin = None
    if ok and comm.rank != 0:
        try:
            pin = eng.pin_remote(st.connect(comm.world_ranks[0]), int(where[0]), total)
            base = pin.addr
        except HixlError:
            ok = False  # not mapped here: another node, or no shared-memory transport
    if not _rt.allreduce_and(comm.comm, ok, st.timeout_ms, comm.world_ranks):
        if segment is not None:
            eng.deregister_mem(segment)
        return None
    own = segment
    if comm.rank != 0 and size:
        own = eng.register_mem_addr(base + int(offsets[comm.rank]), size, _engine.MEM_HOST)
    return Segment(eng, base, offsets, sizes, own, segment, pin)
