"""This rank's vector clock: one counter per world rank.

Every synchronization is two local events: ``acquire`` (merge what the
others knew, then tick: accesses completed by this synchronization are
done at that tick) and ``release`` (what is sent carries the clock, then
tick again, so that accesses after the call are not taken to precede what
was sent). An access records the clock snapshot current when it is issued
(one shared tuple per interval between two synchronizations) and the tick
at which it completes; access ``a`` of rank p happens before access ``b``
when ``b``'s snapshot knows p's tick at which ``a`` completed.
"""
import numpy as np

from . import _ext


class _PyClock:
    """The clock where the C record is missing (_record.Clock is the same in C)."""

    __slots__ = ("_snap", "c", "fe", "me", "n")

    def __init__(self, me, n):
        self.me, self.n = me, n
        self.c = [0] * n
        self.c[me] = 1
        self._snap = None
        self.fe = 0  # how many times another slot's counter grew (log.py merges records while it stays)

    def snap(self):
        """The clock as a tuple (shared by every access until the next tick)."""
        s = self._snap
        if s is None:
            s = self._snap = tuple(self.c)
        return s

    def now(self):
        """This thread's own counter."""
        return self.c[self.me]

    def tick(self):
        self.c[self.me] += 1
        self._snap = None
        return self.c[self.me]

    def merge(self, other):
        """Take in another clock (a sequence of n counters, or an array of rows of them)."""
        if isinstance(other, np.ndarray):
            if other.ndim > 1:
                other = other.max(axis=0) if len(other) else ()
            other = other.tolist()
        c, me = self.c, self.me
        for i, v in enumerate(other):
            if v > c[i]:
                c[i] = v
                if i != me:
                    self.fe += 1
        self._snap = None

    def array(self):
        """The counters as an int64 array (what a message carries)."""
        return np.array(self.c, np.int64)


Clock = _ext.record.Clock if _ext.record is not None else _PyClock


def counters(snap):
    """A snapshot's counters as a tuple of ints (the C clock's snapshot is
    their int64 bytes)."""
    if type(snap) is bytes:
        return tuple(memoryview(snap).cast("q"))
    return snap


def happens_before(a_rank, a_done, b_snap):
    """True when an access completed at tick ``a_done`` of ``a_rank`` is
    known to an access issued with clock ``b_snap`` (a_done None: never
    completed, so it precedes nothing)."""
    return a_done is not None and b_snap[a_rank] >= a_done
