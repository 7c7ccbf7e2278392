"""The detector's state on one rank: clock, accesses, pending completions,
the races this rank saw itself, and the end-of-run check.

Where accesses meet: every rank keeps its own records and sends them to
rank 0 once, at the end of the run (Finalize or interpreter exit), where
the pairs of every (window, target) are compared. Nothing is exchanged
while the program runs except the vector clocks the synchronizations
carry, so an access costs a dictionary update and the check costs one
gather; the price is that a race is reported at the end, not when it
happens. Origin-buffer misuse is seen locally, as it happens (it needs no
other rank's knowledge).
"""
import os
import struct
import sys
import threading
import zlib

import numpy as np

from . import _ext
from ._ext import storage
from .clock import Clock, counters
from .log import Access, Log

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BENCH = os.path.join(_PKG, "bench")


def _own(filename):
    return filename.startswith(_PKG) and not filename.startswith(_BENCH)


_UNSYNC_MOST = 4096  # pending loads and stores under no lock before the ones no longer kept are let go

_OWN = {}  # code object -> whether it is hixl_rma's own


def site_of(f):
    """(code, lineno) of frame f or the innermost frame outside it that is
    not hixl_rma's own code (the program's line that made the call)."""
    last = f
    while f is not None:
        code = f.f_code
        own = _OWN.get(code)
        if own is None:
            own = _OWN[code] = _own(code.co_filename)
        if not own:
            return code, f.f_lineno
        last = f
        f = f.f_back
    return last.f_code, last.f_lineno


def site(depth=2):
    """(code, lineno) of the innermost frame outside hixl_rma's own code."""
    return site_of(sys._getframe(depth))


def where(code_line):
    code, line = code_line
    return f"{code.co_filename}:{line}"


_PACKED = struct.Struct("=QIQ")  # native order: the C record's _pack_sum writes the same bytes


def checksum(obj):
    """A checksum of a buffer's bytes: up to 256 bytes the bytes themselves
    (exact, and a copy is faster to take than a crc32 of them), beyond that
    the 64-bit wrapping sum of its words, the crc32 of its tail and its
    size, packed in 20 bytes (a store that changes a word changes it; one
    object, which the C record compares without making another)."""
    if type(obj) is np.ndarray and obj.nbytes <= 256 and obj.flags.c_contiguous:
        return obj.tobytes()
    try:
        mv = memoryview(obj)
        if not mv.contiguous:
            mv = memoryview(np.ascontiguousarray(obj))
        mv = mv.cast("B")
    except (TypeError, BufferError, ValueError):
        return None  # not a buffer we can read: no checksum
    n = mv.nbytes
    if n <= 256:
        return mv.tobytes()
    words = n // 8
    return _PACKED.pack(int(np.frombuffer(mv, np.uint64, words).sum()), zlib.crc32(mv[words * 8:]), n)


def _sum(obj):
    """checksum(obj), in C where the record's extension is built."""
    return checksum(obj)


if _ext.record is not None:
    def _sum(obj, _fast=_ext.record.fast_checksum):  # the C one where built
        return _fast(obj, checksum)


_UseBase, _USE_SLOTS = storage("UseFields", ("win", "target", "lo", "hi", "writes", "obj", "crc", "rec", "req", "call",
                                             "site"))


class LocalUse(_UseBase):
    """An origin or result buffer in use by an RMA call until local completion."""

    __slots__ = _USE_SLOTS

    def __init__(self, win, target, lo, hi, writes, obj, crc, rec, call, site_):
        self.win, self.target, self.lo, self.hi = win, target, lo, hi
        self.writes, self.obj, self.crc, self.rec = writes, obj, crc, rec
        self.call, self.site = call, site_
        self.req = None


class _PyUses(list):
    """Detector.local where the C record is missing: a list."""

    def replace(self, items):
        """Keep only ``items`` (in their order)."""
        self[:] = items


_Uses = _ext.record.Uses if _ext.record is not None else _PyUses


class WinInfo:
    """What the detector knows of a window: key, label, its communicator's
    world ranks, this rank's local memory range, its clock window."""

    def __init__(self, key, label, world_ranks, me, base, size):
        self.key, self.label, self.world, self.me = key, label, world_ranks, me
        self.base, self.size = base, size
        self.clocks = None  # races.sync.ClockWindow


class Detector:
    """One per process. Clocks are per thread: a rank has ``threads`` slots
    (the main thread is slot 0, others get the next slot when they first
    touch the detector; beyond the last, threads share it), and an MPI or
    window synchronization carries the clock of the thread that calls it."""

    def __init__(self, rank, size, keep, keep_going, json_path, out=None, threads=8):
        self.rank, self.size, self.threads = rank, size, threads
        self.width = size * threads
        self._tl = threading.local()
        self._slots = {}
        self._main = self._tl.clock = Clock(rank * threads, self.width)
        self._slots[threading.main_thread().ident] = self._main
        self.log = Log(keep)
        self.keep_going, self.json_path = keep_going, json_path
        self.out = out or sys.stderr
        self.pend = {}  # (win key, target) -> [Access] not remotely complete; a list, once made, stays
        self.local = _Uses()  # [LocalUse], in order
        self.races = []  # races this rank saw itself (dicts, see _race)
        self._pairs = set()
        self.windows = {}  # key -> WinInfo of a live window
        self.freed = {}  # key -> label of a freed one
        self.ranges = []  # (lo, hi, WinInfo, target world rank) of memory this process can load/store
        self.mutex = threading.RLock()
        self.finished = None
        self.watch = None  # report._Watch: failure notices heard while running (made by report.look)
        # Loads and stores of window memory made under no lock of it (see touch): pending until
        # their thread's next synchronization that does not depend on an order of locks or atomics
        # (a barrier, a message, a Fence, PSCW, a notification), which completes them.
        self.unsync = []
        self._dsnaps = {}  # clock slot -> its clock after its last such synchronization's acquire
        self._mixed = {}  # clock slot -> (its snapshot, its _dsnaps entry, what a load or store under no lock takes)
        self._unsync_most = _UNSYNC_MOST
        # the C record's, where it records: a window freed; a thread started
        self.forget = lambda key: None
        self.threads_started = lambda: None

    @property
    def clock(self):
        """The calling thread's clock."""
        c = getattr(self._tl, "clock", None)
        if c is None:
            c = self._new_thread_clock()
        return c

    def _new_thread_clock(self):
        with self.mutex:
            t = threading.current_thread()
            slot = min(len(self._slots), self.threads - 1)
            c = Clock(self.rank * self.threads + slot, self.width)
            parent = getattr(t, "_race_parent", None)
            # a thread started before the detector: as if started now by the main thread
            c.merge(parent if parent is not None else self._main.array())
            self._dsnaps[c.me] = c.snap()  # what its starter knew (see _unlocked)
            self._slots[t.ident] = c
            t._race_clock = c
            self._tl.clock = c
            return c

    # ----------------------------------------------------------- accesses

    def access(self, win, target, blocks, call, op, dtype, where_, pending=True, grows=False):
        """Record an access of ``blocks`` of ``target``'s memory of window
        ``win`` (``grows``: its record may grow over intervals, Log.add)."""
        with self.mutex:
            clock = self.clock
            snap = clock.snap()
            th = clock.me
            key = (win.key, target, call, op, dtype, where_[0], where_[1], blocks, th)
            rec, new = self.log.add(key, snap, lambda: Access(win.key, target, blocks, call, op, dtype,
                                                              self.rank, snap, where_, th),
                                    clock.fe if grows else None)
            if not pending:
                rec.done, rec.done_actor = clock.now(), th
            elif new:
                self.pend.setdefault((win.key, target), []).append(rec)
            return rec

    def done_at(self, rec, tick, actor):
        """rec completed at an event already past (the notification it rode on)."""
        with self.mutex:
            rec.done, rec.done_actor, rec.done_call = tick, actor, "notification"
            lst = self.pend.get((rec.win, rec.target))
            if lst and rec in lst:
                lst.remove(rec)

    def use(self, win, target, lo, hi, writes, obj, rec, call, where_, crc=True):
        """An origin (``writes`` False) or result buffer at [lo, hi) in use by
        ``call`` until local completion; a conflict with another use is a race."""
        with self.mutex:
            for u in self.local:
                if u.lo < hi and lo < u.hi and (writes or u.writes):
                    self._local_race(u, call, where_, writes, "both use the buffer before either completed "
                                                              "locally")
            c = _sum(obj) if crc and not writes and obj is not None else None
            u = LocalUse(win.key, target, lo, hi, writes, obj if c is not None else None, c, rec, call, where_)
            self.local.append(u)
            return u

    def touch(self, lo, hi, store, where_, what, exact=True):
        """A load or store (seen by the line watch) of process memory [lo, hi);
        not ``exact``: somewhere in it (checked against buffers in use only)."""
        with self.mutex:
            for u in self.local:
                if u.lo < hi and lo < u.hi and (store or u.writes):
                    self._local_race(u, "store" if store else "load", where_, store,
                                     f"{what} before {u.call} completed locally")
            for rlo, rhi, wi, target in (self.ranges if exact else ()):
                if rlo < hi and lo < rhi:
                    a, b = max(lo, rlo) - rlo, min(hi, rhi) - rlo
                    call = "store" if store else "load"
                    if self._locked(wi, target):
                        self.access(wi, target, ((a, b),), call, None, None, where_, pending=False)
                    else:
                        self._unlocked(wi, target, ((a, b),), call, where_)

    @staticmethod
    def _locked(wi, target):
        """This process holds a lock (Lock, Lock_all) of window wi that covers target's memory."""
        locks = getattr(wi, "locks", None)
        if not locks:
            return False
        return "all" in locks or (target in wi.world and wi.world.index(target) in locks)

    def _unlocked(self, wi, target, blocks, call, where_):
        """A load or store of window memory under no lock of it. Which of
        two lock (or atomic) holders came first is chance: an order that
        only such a chain gives it with another rank's access is not one the
        program has (nxtval's counter stored by its owner while the others
        Get_accumulate it under locks was ordered in some runs, not in
        others). So it knows of other ranks what its thread knew at its last
        synchronization of another kind (_dsnaps), and it is pending until
        its thread's next one (release, ordered)."""
        clock = self.clock
        th = clock.me
        snap = clock.snap()
        dsnap = self._dsnaps.get(th)
        m = self._mixed.get(th)
        if m is None or m[0] is not snap or m[1] is not dsnap:
            own = counters(snap)
            lo, hi = self.rank * self.threads, (self.rank + 1) * self.threads
            known = counters(dsnap) if dsnap is not None else (0,) * len(own)
            mixed = known[:lo] + own[lo:hi] + known[hi:]
            if type(snap) is bytes:
                mixed = np.array(mixed, np.int64).tobytes()
            m = self._mixed[th] = (snap, dsnap, mixed)
        key = (wi.key, target, call, None, None, where_[0], where_[1], blocks, th)
        rec, new = self.log.add(key, m[2], lambda: Access(wi.key, target, blocks, call, None, None, self.rank, m[2],
                                                           where_, th))
        if new:
            self.unsync.append(rec)
            if len(self.unsync) > self._unsync_most:
                self._prune_unsync()

    def _prune_unsync(self):
        """Keep of the pending loads and stores only those the log still keeps
        (a loop's records in the middle of a site's are not reported)."""
        kept = {id(r) for r in self.log.records()}
        self.unsync[:] = [r for r in self.unsync if id(r) in kept]
        self._unsync_most = max(_UNSYNC_MOST, 2 * len(self.unsync))  # not a scan per access where most are kept

    def _sync_unsync(self, clock):
        """The calling thread's loads and stores under no lock are ordered from now on."""
        if self.unsync:
            now, me = clock.now(), clock.me
            keep = []
            for r in self.unsync:
                if r.thread == me:
                    r.done, r.done_actor, r.done_call = now, me, "synchronization"
                else:
                    keep.append(r)
            self.unsync[:] = keep

    def synced_out(self):
        """A synchronization recorded elsewhere (the C record's Fence) is about to send this thread's clock."""
        with self.mutex:
            self._sync_unsync(self.clock)

    def synced_in(self):
        """... and has taken in the others' clocks."""
        with self.mutex:
            clock = self.clock
            self._dsnaps[clock.me] = clock.snap()

    # ----------------------------------------------------- synchronization

    def acquire(self, *clocks, ordered=True):
        """Merge clocks received from others, then tick. ``ordered`` False:
        a lock's or an atomic's (which holder came first is chance; see _unlocked)."""
        with self.mutex:
            clock = self.clock
            for c in clocks:
                clock.merge(c)
            t = clock.tick()
            if clocks and ordered:
                self._dsnaps[clock.me] = clock.snap()
            return t

    def release(self, ordered=True):
        """The clock to send (then tick, so later accesses are not in it).
        ``ordered`` False: to a lock's or an atomic's record (see _unlocked)."""
        with self.mutex:
            clock = self.clock
            if ordered and self.unsync:
                self._sync_unsync(clock)
            c = clock.array()
            clock.tick()
            return c

    def complete(self, win, targets, call, remote=True, local=True, reads_only=False, where_=None):
        """Accesses of ``win`` to ``targets`` (None: all) are complete at the
        current tick: remotely (Flush, Unlock, Fence, Complete), or only
        locally (Flush_local: origin buffers free, Gets have their data)."""
        with self.mutex:
            clock = self.clock
            now, me = clock.now(), clock.me
            if remote or reads_only:
                for (key, t), recs in list(self.pend.items()):
                    if key != win.key or (targets is not None and t not in targets):
                        continue
                    keep = []
                    for r in recs:
                        if remote or not r.writes:
                            r.done, r.done_call, r.done_actor = now, call, me
                        else:
                            keep.append(r)
                    recs[:] = keep  # the list stays (the C record keeps it with its target)
            if local:
                self._release_local(lambda u: u.win == win.key and (targets is None or u.target in targets)
                                    and u.req is None, call, where_)

    def complete_request(self, req_uses, recs, call, where_):
        """A request's Wait/Test returned true: its buffers are free; a Get's data is there."""
        with self.mutex:
            clock = self.clock
            now = clock.now()
            for r in recs:
                if not r.writes and r.done is None:
                    r.done, r.done_call, r.done_actor = now, call, clock.me
                    lst = self.pend.get((r.win, r.target))
                    if lst and r in lst:
                        lst.remove(r)
            ids = {id(u) for u in req_uses}
            self._release_local(lambda u: id(u) in ids, call, where_)

    def _release_local(self, match, call, where_):
        keep = []
        for u in self.local:
            if not match(u):
                keep.append(u)
                continue
            if u.crc is not None and _sum(u.obj) != u.crc:
                self._changed(u, call, where_)
        self.local.replace(keep)

    def _changed(self, u, call, where_):
        """u's origin buffer is not what it was when u's call was issued (its checksum)."""
        self._local_race(u, "store", where_, True,
                         f"the origin buffer of {u.call} changed before {call} completed it locally "
                         f"(seen by its checksum; the store is somewhere between the two lines)")

    def _local_race(self, u, call, where_, writes, why):
        a = {"call": u.call, "rank": self.rank, "where": where(u.site)}
        b = {"call": call, "rank": self.rank, "where": where(where_ or site(1))}
        pair = (u.call, a["where"], call, b["where"])
        if pair in self._pairs:
            return
        self._pairs.add(pair)
        self.races.append({"kind": "race", "scope": "origin buffer", "window": self._label(u.win),
                           "target": u.target, "bytes": [0, u.hi - u.lo], "address": hex(u.lo), "a": a,
                           "b": b, "why": why, "seen_by": self.rank})

    def _label(self, key):
        wi = self.windows.get(key)
        return wi.label if wi else self.freed.get(key, key)

    # ------------------------------------------------------------- the end

    def plain_records(self):
        with self.mutex:
            return [r.plain() for r in self.log.records()]
