"""Batch transfers: many (origin block, target displacement) pairs moved as
one engine batch, bounds-checked as a whole before any byte moves."""
import numpy as np

from hixl_rma import _engine
from hixl_rma.buffers.datatypes import as_buffer
from hixl_rma.ground.constants import WIN_FLAVOR_DYNAMIC as _FLAVOR_DYNAMIC
from hixl_rma.ground.errors import BoundsError, ParamError


class Batches:
    """Put_batch and Get_batch (a part of the window's core; a tagged batch
    notifies through the window's Notifications)."""

    __slots__ = ("notifications", "w")

    def __init__(self, core, notifications):
        self.w = core
        self.notifications = notifications

    def run(self, what, op, origin_blocks, target_rank, target_disps, tag):
        w = self.w
        t = w.target(target_rank, what)
        if (t is not None and _engine.has("peer_handles") and w.flavor != _FLAVOR_DYNAMIC
                and type(origin_blocks) is tuple and len(origin_blocks) == 2):
            # The common case, checked and posted in C; anything out of the
            # ordinary is left to the full checks below.
            w.check_mode(t, op, what)
            # Posted: the origin's export, held until the flush (the engine
            # reads the origin until then; a resize would move it away).
            if w.post_batch_at(t.rank, op, origin_blocks[0], origin_blocks[1], target_disps, what):
                if tag is not None:
                    self.notifications.notify(target_rank, tag)
                return
        local, lens, keep = _origin_blocks(origin_blocks, op == _engine.READ, what)
        disps = np.asarray(target_disps)
        if disps.ndim != 1 or len(disps) != len(lens) or (disps.size and disps.dtype.kind not in "iu"):
            raise ParamError(f"{what}: target_disps must be {len(lens)} integer displacements, "
                             f"got shape {disps.shape} of {disps.dtype}")
        if t is None:
            return
        w.check_mode(t, op, what)
        disps = disps.astype(np.int64)
        if len(disps) and disps.min() < 0:
            bad = int(np.argmin(disps))
            raise BoundsError(f"{what} to rank {t.rank} of window {w.label()}: block {bad} has negative "
                              f"displacement {int(disps[bad])}")
        tblk = np.stack([disps * t.disp_unit, lens], axis=1) if len(lens) else np.zeros((0, 2), np.int64)
        if len(tblk):
            if w.flavor != _FLAVOR_DYNAMIC:
                ends = tblk[:, 0] + tblk[:, 1]
                if ends.max() > t.size:
                    bad = int(np.argmax(ends > t.size))
                    raise BoundsError(f"{what} to rank {t.rank} of window {w.label()}: block {bad} at target "
                                      f"offset {int(tblk[bad, 0])} length {int(tblk[bad, 1])} exceeds the "
                                      f"window size {t.size} bytes; nothing was moved")
            base = w.target_base(t, tblk, what)
            descs = np.empty((len(lens), 3), np.uint64)
            descs[:, 0] = local
            descs[:, 1] = base + tblk[:, 0]
            descs[:, 2] = lens
            w.post(t, op, descs, keep)
        if tag is not None:
            self.notifications.notify(target_rank, tag)


def _origin_blocks(spec, writable, what):
    """(local addresses, lengths, keep-alive) of the origin blocks."""
    if isinstance(spec, tuple) and len(spec) == 2 and not isinstance(spec[1], (int, np.integer)):
        buf = as_buffer(spec[0], writable=writable, name=f"{what} origin")
        if len(buf.blocks) > 1 or (len(buf.blocks) == 1 and buf.blocks[0, 0] != 0):
            raise ParamError(f"{what}: the origin buffer of an (buffer, offsets) batch must be contiguous")
        offs = np.asarray(spec[1])
        if offs.ndim != 2 or offs.shape[1] != 2 or (offs.size and offs.dtype.kind not in "iu"):
            raise ParamError(f"{what}: offsets must be an (n, 2) integer array, got shape {offs.shape}")
        offs = offs.astype(np.int64)
        if len(offs) and (offs.min() < 0 or (offs[:, 0] + offs[:, 1]).max() > buf.nbytes):
            raise BoundsError(f"{what}: an origin block lies outside the {buf.nbytes}-byte origin buffer")
        return buf.address + offs[:, 0], offs[:, 1], buf.obj
    if not isinstance(spec, (list, tuple)):
        raise ParamError(f"{what}: origin_blocks must be a list of buffers or (buffer, offsets), "
                         f"got {type(spec).__name__}")
    bufs = [as_buffer(b, writable=writable, name=f"{what} origin block {i}") for i, b in enumerate(spec)]
    for i, b in enumerate(bufs):
        if len(b.blocks) > 1:
            raise ParamError(f"{what}: origin block {i} is not contiguous")
    local = np.array([b.address + (int(b.blocks[0, 0]) if len(b.blocks) else 0) for b in bufs], np.int64)
    lens = np.array([b.size for b in bufs], np.int64)
    return local, lens, [b.obj for b in bufs]

