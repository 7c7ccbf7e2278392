"""The attached regions of a dynamic window (``Win.Create_dynamic``).

One owner for both sides: this rank's attached regions, published for the
others, and what this rank last read of each target's. A rank publishes a
sorted ``(address, length)`` table in engine memory of its own (grown as
regions are attached, so there is no fixed limit), under a seqlock in its
control block: ``DYN_SEQ`` (odd while it changes), ``DYN_COUNT`` and
``DYN_TABLE_ADDR``. A reader takes a snapshot with two small reads and the
table, and retries when the sequence moved or the table it named was
withdrawn meanwhile.
"""
import numpy as np

from hixl_rma import _engine
from hixl_rma.buffers.datatypes import as_buffer
from hixl_rma.ground.errors import BoundsError, HixlError, ParamError
from hixl_rma.runtime import process as _rt

from . import ctrl as CTRL

_READ = _engine.READ
_HEADER = CTRL.DYN_TABLE_ADDR + 8 - CTRL.DYN_SEQ  # seq, count, table address
_RETRIES = 1000
_WHAT = "reading the attached regions"  # what a failed read of a target's region table names


class Regions:
    """Attached regions of one dynamic window: this rank's, and the cached
    tables of its targets."""

    def __init__(self, engine, ctrl64, alloc, label):
        self._engine = engine
        self._ctrl64 = ctrl64          # this rank's control block (uint64 view)
        self._alloc = alloc            # nbytes -> (handle, uint8 array) of engine memory
        self._label = label            # () -> the window's name for messages
        self._mine = []                # [handle or None (empty region), owner, address, length]
        self._table = None             # (handle, uint64 array) of the published table
        self._cached = {}              # target rank -> (n, 2) uint64 table as last read

    # ---------------------------------------------------------- this rank

    def attach(self, memory):
        """Expose ``memory`` (any writable contiguous buffer; empty is allowed)."""
        buf = as_buffer(memory, writable=True, name="attached memory")
        if len(buf.blocks) > 1 or (len(buf.blocks) == 1 and buf.blocks[0, 0] != 0):
            raise ParamError("attached memory must be contiguous (C or Fortran order)")
        handle = self._engine.register_mem(buf.obj) if buf.nbytes else None
        self._mine.append([handle, memory, buf.address, buf.nbytes])
        try:
            self._publish()
        except BaseException:
            self._mine.pop()
            if handle is not None:
                self._engine.deregister_mem(handle)
            raise

    def detach(self, memory):
        """Withdraw a region attached before (the last one attached at that
        address, when several were)."""
        buf = as_buffer(memory, writable=False, name="detached memory")
        for i in range(len(self._mine) - 1, -1, -1):
            if self._mine[i][2] == buf.address and self._mine[i][3] == buf.nbytes:
                break
        else:
            raise ParamError(f"Detach: no region of {buf.nbytes} bytes is attached at address "
                             f"{buf.address} in window {self._label()}")
        handle = self._mine.pop(i)[0]
        self._publish()
        if handle is not None:
            self._engine.deregister_mem(handle)

    def handles(self):
        """Every engine registration this object holds (for teardown)."""
        hs = [m[0] for m in self._mine if m[0] is not None]
        return hs + ([self._table[0]] if self._table is not None else [])

    def forget(self):
        self._mine, self._table, self._cached = [], None, {}

    def _publish(self):
        regions = sorted((m[2], m[3]) for m in self._mine if m[3])
        old = None
        if regions and (self._table is None or len(self._table[1]) < 2 * len(regions)):
            capacity = max(16, 1 << (len(regions) - 1).bit_length())
            handle, raw = self._alloc(16 * capacity)
            old, self._table = self._table, (handle, raw.view(np.uint64))
        c = self._ctrl64
        seq = CTRL.DYN_SEQ // 8
        c[seq] += 1  # odd: readers retry
        _engine.memory_fence()
        if regions:
            self._table[1][:2 * len(regions)] = np.array(regions, np.uint64).ravel()
        c[CTRL.DYN_COUNT // 8] = len(regions)
        c[CTRL.DYN_TABLE_ADDR // 8] = self._table[0].addr if self._table is not None else 0
        _engine.memory_fence()
        c[seq] += 1
        if old is not None:
            # Withdrawn at every peer before it returns: a reader still
            # naming it is refused and reads the header again.
            self._engine.deregister_mem(old[0])

    # ------------------------------------------------------------ targets

    def fetch(self, t):
        """Read target t's table (a consistent snapshot) and cache it."""
        hdr = np.zeros(_HEADER // 8, np.uint64)
        check = np.zeros(1, np.uint64)
        for idle in range(_RETRIES):
            t.core.transfer_at(t.rank, _READ, [(hdr.ctypes.data, t.ctrl + CTRL.DYN_SEQ, _HEADER)], None, _WHAT)
            seq, n, addr = (int(x) for x in hdr)
            if seq % 2 == 0:
                table = np.zeros((n, 2), np.uint64)
                try:
                    if n:
                        t.core.transfer_at(t.rank, _READ, [(table.ctypes.data, addr, 16 * n)], None, _WHAT)
                    t.core.transfer_at(t.rank, _READ, [(check.ctypes.data, t.ctrl + CTRL.DYN_SEQ, 8)], None, _WHAT)
                except ParamError:
                    pass  # the table was replaced meanwhile: read the header again
                else:
                    if int(check[0]) == seq:
                        self._cached[t.rank] = table
                        return table
            _rt.sleep_backoff(idle)
        raise HixlError(f"window {self._label()}: rank {t.rank} kept changing its attached regions")

    def invalidate(self, t):
        """Forget t's cached table (the engine refused a transfer into it)."""
        self._cached.pop(t.rank, None)

    def check(self, t, blocks, what):
        """Raise BoundsError unless every (address, length) block lies in one
        region attached at t; the cached table is read again once on a miss."""
        if not len(blocks):
            return
        lo = blocks[:, 0]
        hi = lo + blocks[:, 1]
        cached = self._cached.get(t.rank)
        for regions in ([cached] if cached is not None else []) + [None]:
            if regions is None:
                regions = self.fetch(t)
            ok = np.zeros(len(lo), bool)
            if len(regions):
                idx = np.searchsorted(regions[:, 0], lo.astype(np.uint64), side="right") - 1
                ok = idx >= 0
                safe = np.where(ok, idx, 0)
                ok &= hi <= (regions[safe, 0] + regions[safe, 1]).astype(np.int64)
            if ok.all():
                return
        bad = int(np.argmin(ok))
        raise BoundsError(f"{what} to rank {t.rank} of dynamic window {self._label()}: address "
                          f"{int(lo[bad])} length {int(blocks[bad, 1])} is not in an attached region")
