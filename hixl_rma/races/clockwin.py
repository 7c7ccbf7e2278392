"""How a window's synchronizations carry vector clocks: a hidden window of
int64 slots beside each checked window (same communicator, created and
freed with it, in a Lock_all epoch of its own for its whole life).

- Fence: before the real Fence each rank Puts its clock into its row of
  every peer's fence slots (two sets, by the parity of the fence, so a
  fast rank's next Fence cannot overwrite a row a slow one has yet to
  read); after it, each rank merges the rows in its own memory. No
  collective beyond the Fence's own barrier.
- Lock/Unlock: Unlock writes the holder's clock at the target (exclusive:
  the X record; shared: the holder's own row of the S rows); Lock, once
  acquired, reads X (an exclusive one also every S row): a release orders
  the acquires that exclude it, and shared holders order nothing among
  themselves. MODE_NOCHECK takes no lock, so it carries nothing.
- PSCW: Post writes the target's clock into each origin's post row, Start
  reads it once the Post arrived; Complete writes the origin's clock into
  each target's complete row, Wait/Test read them.
- Notified RMA: Put_notify writes the origin's clock into the target's
  notify row before the notification; Wait_notify reads the source's row.
- Atomics: before an atomic, its origin writes its clock into its own
  row of the target's atomic rows; once an atomic completed there, the
  origin reads every row.

Every record that several ranks feed has one row per writer, written by
a plain Put: only that rank writes it and its clock only grows, so the
rows' maximum is what an Accumulate(MAX) into one record would hold,
without the accumulate's lock (an Accumulate on a datatype target locks
the target).

Writes go to the peer's memory and are flushed before the real call that
synchronizes, so a reader after that call sees them. On one node the
hidden window is mapped memory: a Put is a memcpy, and ``peers`` holds
each peer's memory (``Shared_query``), where the C record stores and
loads the Fence's and the atomics' clocks itself, slot by slot, with no
Put, Get or Flush.
"""
import numpy as np
from mpi4py import MPI


class ClockWindow:
    def __init__(self, Win, comm, nworld, me):
        nc = comm.Get_size()
        self.nc, self.nw, self.me = nc, nworld, me
        self.FENCE = 0
        self.LOCKX = 2 * nc * nworld
        self.LOCKS = self.LOCKX + nworld
        self.POST = self.LOCKS + nc * nworld
        self.COMPLETE = self.POST + nc * nworld
        self.NOTIFY = self.COMPLETE + nc * nworld
        self.ATOMIC = self.NOTIFY + nc * nworld
        self.total = self.ATOMIC + nc * nworld
        from .state import plain
        plain.on = True
        try:
            self.win = Win.Allocate(self.total * 8, 8, comm=comm)
        finally:
            plain.on = False
        self.mem = np.frombuffer(self.win.tomemory(), np.int64)
        self.mem[:] = 0
        MPI.Intracomm.Barrier(comm)  # the window's own communicator: no clocks
        self.win.Lock_all()
        self.fences = 0
        self._tmp = np.zeros(nworld, np.int64)
        self._rows = np.zeros(nc * nworld, np.int64)
        self.peers = [self._mapped(q) for q in range(nc)]

    def _mapped(self, q):
        """Peer q's memory as int64 where it is mapped here, else None."""
        if q == self.me:
            return None
        buf, _ = self.win.Shared_query(q)
        return np.frombuffer(buf, np.int64) if len(buf) else None

    def _put(self, clock, rank, off):
        # an int displacement (disp_unit 8) and an int64 origin: the window's hot path
        self.win.Put(clock, rank, off)

    # Fence
    def fence_out(self, clock):
        row = self.FENCE + ((self.fences & 1) * self.nc + self.me) * self.nw
        for q in range(self.nc):
            if q != self.me:
                self._put(clock, q, row)
                self.win.Flush(q)

    def fence_in(self):
        base = self.FENCE + (self.fences & 1) * self.nc * self.nw
        self.fences += 1
        if self.nc == 2:
            q = 1 - self.me
            return self.mem[base + q * self.nw:base + (q + 1) * self.nw].tolist()
        rows = self.mem[base:base + self.nc * self.nw].reshape(self.nc, self.nw)
        return rows.max(axis=0)

    # Lock / Unlock
    def _rows_max(self, rank, off):
        """The maximum of rank's nc rows at off."""
        self.win.Get(self._rows, rank, off)
        self.win.Flush(rank)
        return self._rows.reshape(self.nc, self.nw).max(axis=0)

    def lock_in(self, rank, exclusive):
        self.win.Get(self._tmp, rank, self.LOCKX)
        if exclusive:
            return np.maximum(self._tmp, self._rows_max(rank, self.LOCKS))  # its Flush completes both Gets
        self.win.Flush(rank)
        return self._tmp.copy()

    def unlock_out(self, clock, rank, exclusive):
        # exclusive holders follow one another, each knowing the last: a Put keeps X monotone
        self._put(clock, rank, self.LOCKX if exclusive else self.LOCKS + self.me * self.nw)
        self.win.Flush(rank)

    # PSCW
    def post_out(self, clock, origins):
        for q in origins:
            self._put(clock, q, self.POST + self.me * self.nw)
            self.win.Flush(q)

    def start_in(self, targets):
        return [self.mem[self.POST + q * self.nw:self.POST + (q + 1) * self.nw].copy() for q in targets]

    def complete_out(self, clock, targets):
        for q in targets:
            self._put(clock, q, self.COMPLETE + self.me * self.nw)
            self.win.Flush(q)

    def wait_in(self, origins):
        return [self.mem[self.COMPLETE + q * self.nw:self.COMPLETE + (q + 1) * self.nw].copy() for q in origins]

    # notified RMA
    def notify_out(self, clock, target):
        # only this rank writes its row there, and its clock only grows: a Put
        self._put(clock, target, self.NOTIFY + self.me * self.nw)
        self.win.Flush(target)

    def notify_in(self, source):
        return self.mem[self.NOTIFY + source * self.nw:self.NOTIFY + (source + 1) * self.nw].copy()

    # atomics: what completed atomics of several origins at one target order
    def atomic_publish(self, clock, rank):
        """Leave this clock at rank's atomic record before an atomic is issued
        there (a spin lock's release must carry it before the lock word changes)."""
        self._put(clock, rank, self.ATOMIC + self.me * self.nw)
        self.win.Flush(rank)

    def atomic_read(self, rank):
        """What the origins of atomics at rank left there (taken once an atomic completed)."""
        return self._rows_max(rank, self.ATOMIC)

    def free(self):
        self.peers = [None] * self.nc  # views of the peers' mappings: gone before the window
        self.win.Unlock_all()
        self.win.Free()

