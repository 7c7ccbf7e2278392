"""Notified RMA (GASPI's write_notify, NIXL's notifications) on hixl_rma.Win.

A notification leaves only after the origin's earlier operations to that
target completed there (the engine flushes first), so a target that sees
the tag sees the data, with no epoch on its side.

Bound: each (origin, target) pair may have at most ``notify_limit``
(info key, default 1024) notifications the target has not consumed. Past
that the origin waits (back-pressure) for the target to consume, and raises
HixlTimeoutError after the window's timeout: nothing is ever dropped. The
target publishes what it consumed per source in its control block, which
origins read only when they reach the bound.
"""
import struct

import numpy as np

from . import _engine
from . import ctrl as CTRL
from . import runtime as _rt
from .errors import HixlTimeoutError, ParamError
from .request import Request

DEFAULT_NOTIFY_LIMIT = 1024
_TAG = struct.Struct("<q")


def _check_tag(tag, what):
    if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)) or not -(1 << 63) <= tag < (1 << 63):
        raise ParamError(f"{what}: tag must be a 64-bit int, got {tag!r}")
    return int(tag)


class NotifyMixin:
    """Put_notify, Notify, Wait_notify, Test_notify, Wait_notify_all."""

    def _notify_limit(self):
        try:
            return max(1, int(self._info.get("notify_limit", DEFAULT_NOTIFY_LIMIT)))
        except ValueError:
            raise ParamError(f"info notify_limit must be an int, got {self._info['notify_limit']!r}") from None

    def _send_tagged(self, t, tag, what):
        limit = self._notify_limit()
        if t.notified - t.credit >= limit:
            self._wait_credit(t, limit, what)
        self._engine.send_notify(t.addr, f"{self._key}:n/{self._rt.rank}", _TAG.pack(tag), self._rt.timeout_ms)
        t.notified += 1
        self._fast.take_dirty(t.rank)  # send_notify flushed everything before it

    def _wait_credit(self, t, limit, what):
        word = np.zeros(1, np.uint64)

        def credited():
            self._engine.transfer_sync(t.addr, _engine.READ,
                                       [(word.ctypes.data, t.ctrl + CTRL.consumed_offset(self._comm.rank), 8)],
                                       self._rt.timeout_ms)
            t.credit = int(word[0])
            return t.notified - t.credit < limit

        _rt.poll(credited, self._rt.timeout_ms / 1000.0, lambda: HixlTimeoutError(
            f"{what} to rank {t.rank} of window {self._label()}: the target has {limit} unconsumed "
            f"notifications from this rank (notify_limit) and consumed none within {self._rt.timeout_ms} ms"))

    def Notify(self, target_rank, tag=0):
        """Deliver ``tag`` to target_rank after all earlier RMA to it completed."""
        tag = _check_tag(tag, "Notify")
        t = self._target(target_rank, "Notify")
        if t is not None:
            self._send_tagged(t, tag, "Notify")

    def Put_notify(self, origin, target_rank, target=None, tag=0):
        """Put, then a notification the target sees only once the data is there."""
        tag = _check_tag(tag, "Put_notify")
        self.Put(origin, target_rank, target)
        if target_rank != _rt.runtime().MPI.PROC_NULL:
            self._send_tagged(self._targets[target_rank], tag, "Put_notify")

    def Rput_notify(self, origin, target_rank, target=None, tag=0):
        """Request-based Put_notify (complete when it returns)."""
        self.Put_notify(origin, target_rank, target, tag)
        return Request.completed()

    # ------------------------------------------------------------ target

    def _take(self, tag, source, limit):
        """Up to ``limit`` matching notifications from the queue: [(rank, tag)]."""
        st = self._rt
        st.poll_notifies()
        q = st.notify_queues[f"{self._key}:n"]
        world_to_rank = self._world_to_rank()
        out, keep = [], []
        while q:
            world, msg = q.popleft()
            rank, value = world_to_rank.get(world), _TAG.unpack(msg)[0]
            if len(out) < limit and (tag is None or value == tag) and (source is None or rank == source):
                out.append((rank, value))
                self._ctrl64[CTRL.consumed_offset(rank) // 8] += 1  # frees a credit of that origin
            else:
                keep.append((world, msg))
        q.extend(keep)
        return out

    def _world_to_rank(self):
        m = getattr(self, "_w2r", None)
        if m is None:
            m = self._w2r = {t.world: t.rank for t in self._targets}
        return m

    def Test_notify(self, tag=None, source=None):
        """A matching notification ``(source, tag)`` if one arrived, else None."""
        self._check_live("Test_notify")
        got = self._take(self._match_tag(tag), self._match_source(source), 1)
        return got[0] if got else None

    def Wait_notify(self, tag=None, source=None, timeout=None):
        """Wait for a matching notification; returns ``(source, tag)``."""
        return self.Wait_notify_all(1, tag, source, timeout)[0]

    def Wait_notify_all(self, count, tag=None, source=None, timeout=None):
        """Wait for ``count`` matching notifications; returns [(source, tag)]."""
        self._check_live("Wait_notify_all")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ParamError(f"Wait_notify_all: count must be a non-negative int, got {count!r}")
        tag, source = self._match_tag(tag), self._match_source(source)
        timeout_s = self._rt.timeout_ms / 1000.0 if timeout is None else float(timeout)
        got = []

        def enough():
            while len(got) < count:
                new = self._take(tag, source, count - len(got))
                if not new:
                    return False
                got.extend(new)
            return True

        _rt.poll(enough, timeout_s, lambda: HixlTimeoutError(
            f"Wait_notify on window {self._label()}: {len(got)} of {count} notification(s) "
            f"(tag={tag}, source={source}) within {timeout_s:g} s"))
        return got

    def _match_tag(self, tag):
        return None if tag is None else _check_tag(tag, "Wait_notify")

    def _match_source(self, source):
        return None if source is None else self._comm.check_rank(source, "Wait_notify source")
