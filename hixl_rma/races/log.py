"""What one rank records: its accesses to windows, bounded in memory.

An access is an ``Access`` (target window memory: an RMA call, or a load
or store of the local window memory seen by the line watch). Accesses of
one call site (window, target, call, op, datatype, byte ranges, source
line) within one interval between two synchronizations are one record;
across intervals a site keeps its first ``KEEP`` and its last ``KEEP``
records (``HIXL_RMA_RACE_KEEP``), so a loop of a million epochs costs what
a loop of 2*KEEP does. A race only among the records a site dropped in the
middle of a long run is missed; README says so.
"""
import bisect
import collections

from . import _ext
from ._ext import storage
from .clock import counters

# call -> (kind, for accumulates whether the op is what decides)
READS = frozenset(("Get", "Rget", "Get_batch", "load"))
WRITES = frozenset(("Put", "Rput", "Put_notify", "Put_batch", "store"))
ACCS = frozenset(("Accumulate", "Raccumulate", "Get_accumulate", "Rget_accumulate", "Fetch_and_op",
                  "Compare_and_swap"))


_AccessBase, _ACCESS_SLOTS = storage("AccessFields", (
    "win", "target", "blocks", "call", "op", "dtype", "rank", "snap", "done", "site", "done_call", "thread", "count",
    "done_actor", "epoch", "touched"))
_SiteBase, _SITE_SLOTS = storage("SiteFields", ("first", "last", "seen", "newest"))


class Access(_AccessBase):
    """One access to ``blocks`` (byte ranges [lo, hi) of ``target``'s
    window memory) by ``rank`` (from the thread whose clock slot is
    ``thread``), issued with clock ``snap``, completed at tick ``done`` of
    clock slot ``done_actor`` (None while pending)."""

    __slots__ = _ACCESS_SLOTS

    def __init__(self, win, target, blocks, call, op, dtype, rank, snap, site, thread):
        self.win, self.target, self.blocks = win, target, blocks
        self.call, self.op, self.dtype = call, op, dtype
        self.rank, self.snap, self.site, self.thread = rank, snap, site, thread
        self.done = None
        self.done_actor = thread  # the clock slot of the thread whose event completed it
        self.done_call = None
        self.count = 1
        self.epoch = -1  # the clock's foreign epoch when it was made, for a record that may grow (Log.add)
        self.touched = 0  # when it last took an access (Log.touch)

    @property
    def writes(self):
        if self.call in WRITES:
            return True
        if self.call in READS:
            return False
        return self.op != "NO_OP"

    @property
    def atomic(self):
        return self.call in ACCS

    def plain(self):
        """A picklable dict (the code object becomes file, line and function)."""
        code, line = self.site
        return {"win": self.win, "target": self.target, "blocks": self.blocks, "call": self.call,
                "op": self.op, "dtype": self.dtype, "rank": self.rank, "snap": counters(self.snap), "done": self.done,
                "file": code.co_filename, "line": line, "func": code.co_name, "done_call": self.done_call,
                "thread": self.thread, "count": self.count, "done_actor": self.done_actor}


class _Site(_SiteBase):
    __slots__ = _SITE_SLOTS

    def __init__(self, keep):
        self.first = []
        self.last = collections.deque(maxlen=keep)
        self.seen = 0
        self.newest = None  # the last record put


class _PyTouched:
    """Log.touched where the C record is missing: for each (window, target),
    the span (first byte to last) of each record that took an access, and
    when the last one did (Log.touch's count), by size class, as the C one
    keeps them (a span of class c is shorter than 2**(c+1))."""

    def __init__(self):
        self.seq = 0
        self.last = None  # the record the last access touched
        self.targets = {}  # (win, target) -> ({class: sorted spans}, {span: seq})

    @staticmethod
    def _hull(rec):
        spans = [b for b in rec.blocks if b[1] > b[0]]
        return (min(b[0] for b in spans), max(b[1] for b in spans)) if spans else None

    def touch(self, rec):
        """rec took an access now."""
        self.last = rec
        self.seq += 1
        rec.touched = self.seq
        t = self.targets.get((rec.win, rec.target))
        if t is None:
            t = self.targets[(rec.win, rec.target)] = ({}, {})
        b = self._hull(rec)
        if b is not None:
            if b not in t[1]:
                bisect.insort(t[0].setdefault((b[1] - b[0]).bit_length() - 1, []), b)
            t[1][b] = self.seq

    def since(self, rec):
        """Whether a span overlapping rec's took an access of another record
        after rec's last one."""
        t = self.targets.get((rec.win, rec.target))
        span = self._hull(rec)
        if t is None or span is None:
            return False
        classes, seqs = t
        lo, hi = span
        for c, spans in classes.items():
            i = bisect.bisect_left(spans, (lo + 1 - (2 << c),))
            while i < len(spans) and spans[i][0] < hi:
                if spans[i][1] > lo and seqs[spans[i]] > rec.touched:
                    return True
                i += 1
        return False

    def forget(self, win):
        """Window ``win`` is freed."""
        for k in [k for k in self.targets if k[0] == win]:
            del self.targets[k]


_Touched = _ext.record.Touched if _ext.record is not None else _PyTouched


class Log:
    """This rank's accesses, by site."""

    def __init__(self, keep):
        self.keep = keep
        self.sites = {}
        self.touched = _Touched()  # which bytes the records touched, and when: what a growth asks

    @property
    def last(self):
        """The record the last access touched."""
        return self.touched.last

    def touch(self, rec):
        """rec took an access: the last record touched, its span last touched now."""
        self.touched.touch(rec)

    def add(self, key, snap, make, epoch=None):
        """The record for ``key`` in this interval: the last one when it is
        still pending with the same clock snapshot ``snap``, else a new one
        from ``make()`` (returned, and also whether it is new).

        ``epoch``: the clock's foreign epoch (Clock.fe), for an RMA call
        whose record may grow over intervals: the last record, completed,
        takes this access too while no access this process recorded since
        its last one touched its bytes (of its window and target) and no
        other slot's counter grew since it was made (its snapshot's other
        counters are the clock's), and is pending again (returned as new).
        Such a record is one interval [first issued, last completed]: an
        access of another thread or rank ordered after one of its accesses
        and before the next would need a counter of its own in between,
        which would end the record, and an access of this thread in between
        (a load, another call) of the same bytes ends it too; one of other
        bytes cannot race with it."""
        s = self.sites.get(key)
        if s is None:
            s = self.sites[key] = _Site(self.keep)
        last = s.newest
        if last is not None and last.snap is snap and (last.done is None or last.call in ("load", "store")):
            last.count += 1
            self.touch(last)
            return last, False
        if epoch is not None and self.regrow(last, epoch):
            return last, True
        rec = make()
        if epoch is not None:
            rec.epoch = epoch
        self.put(key, rec, s)
        return rec, True

    def regrow(self, last, epoch):
        """add's growth: ``last`` (a site's last record) takes one more
        access and is pending again, if it is complete, the last record
        touched or no record touched its bytes since it did, and made at
        foreign epoch ``epoch``; whether it did."""
        if last is None or last.epoch != epoch or last.done is None:
            return False
        if last is not self.last and self.touched.since(last):
            return False
        last.done = last.done_call = None
        last.done_actor = last.thread
        last.count += 1
        self.touch(last)
        return True

    def put(self, key, rec, s=None):
        """Add a new record (the caller checked it is not the last one again, nor one to grow)."""
        if s is None:
            s = self.sites.get(key)
            if s is None:
                s = self.sites[key] = _Site(self.keep)
        self.touch(rec)
        s.seen += 1
        if len(s.first) < self.keep:
            s.first.append(rec)
        else:
            s.last.append(rec)
        s.newest = rec

    def records(self):
        for s in self.sites.values():
            yield from s.first
            yield from s.last

    def dropped(self):
        return sum(s.seen - len(s.first) - len(s.last) for s in self.sites.values())
