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

Aggregation (HIXL's ``HIXL_NOTIFY_BATCH_SIZE``): with ``notify_batch`` N > 1
(info key; default ``HIXL_RMA_NOTIFY_BATCH``), notifications to a target are
held and leave as one engine message once N are held, or at the origin's
next Flush, Flush_all, Unlock, Unlock_all, Fence, Complete or Free of the
window, or when it waits for or tests notifications on it (so that two
ranks answering each other cannot both hold theirs). The message leaves
after every earlier operation to the target completed there, as a single
notification does: the guarantee is unchanged, and the origin flushes and
the target wakes once per batch instead of once per tag.
"""
import struct

import numpy as np

from . import _engine
from . import config as _config
from . import ctrl as CTRL
from . import runtime as _rt
from .constants import PROC_NULL
from .errors import HixlError, HixlTimeoutError, ParamError

DEFAULT_NOTIFY_LIMIT = 1024
_TAG = struct.Struct("<q")
_MAX_BATCH = 64 * 1024 // _TAG.size  # tags in the engine's largest message


def _check_tag(tag, what):
    if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)) or not -(1 << 63) <= tag < (1 << 63):
        raise ParamError(f"{what}: tag must be a 64-bit int, got {tag!r}")
    return int(tag)


class Notifications:
    """Notify, Put_notify, Wait_notify, Test_notify, Wait_notify_all (a part
    of the window's core). Its own state: per target, how many
    notifications this rank sent there, what the target had consumed of
    them when last read, and the tags held for a batch."""

    __slots__ = ("w", "sent", "credit", "held", "_world_to_rank")

    def __init__(self, core):
        self.w = core
        n = len(core.targets)
        self.sent = [0] * n    # notifications this rank sent to each target
        self.credit = [0] * n  # what each target had consumed of them when last read
        # Tags held for a batch, per target; FastWin.set_held marks the
        # targets with any, for the hot path and for release().
        self.held = [[] for _ in range(n)]
        self._world_to_rank = {t.world: t.rank for t in core.targets}

    def _limit(self):
        info = self.w.info
        try:
            return max(1, int(info.get("notify_limit", DEFAULT_NOTIFY_LIMIT)))
        except ValueError:
            raise ParamError(f"info notify_limit must be an int, got {info['notify_limit']!r}") from None

    def _batch(self):
        value = self.w.info.get("notify_batch")
        if value is None:
            return min(_config.notify_batch(), _MAX_BATCH)
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n <= 0:
            raise ParamError(f"info notify_batch of window {self.w.label()} must be a positive int, "
                             f"got {value!r}")
        return min(n, _MAX_BATCH)

    def _send(self, t, tag, what):
        r = t.rank
        limit = self._limit()
        held = self.held[r]
        if self.sent[r] + len(held) - self.credit[r] >= limit:
            if held:
                self._release(t, what)  # the target cannot consume what is still held here
            if self.sent[r] - self.credit[r] >= limit:
                self._wait_credit(t, limit, what)
        held.append(tag)
        if len(held) >= min(self._batch(), limit):
            self._release(t, what)
        elif len(held) == 1:
            self.w.fast.set_held(r, True)  # the hot Flush and Fence now come here first

    def _release(self, t, what):
        """Send the tags held for target t as one message (it leaves after
        every earlier operation to t completed there)."""
        w = self.w
        r = t.rank
        held = self.held[r]
        msg = _TAG.pack(held[0]) if len(held) == 1 else np.asarray(held, "<i8").tobytes()
        count = len(held)
        held.clear()
        w.fast.set_held(r, False)
        try:
            # Behind the engine's detached copies to t, if it has any (a
            # Put_batch's), so that this rank goes on while they are made.
            queued = w.engine.post_notify(t.addr, f"{w.key}:n/{w.rt.rank}", msg, w.rt.timeout_ms)
        except HixlError as exc:
            if count == 1:
                raise
            raise exc.again(f"{what} to rank {r} of window {w.label()}: a batch of {count} notifications "
                            f"was not delivered: {exc}") from exc
        self.sent[r] += count
        if not queued:
            w.fast.take_dirty(r)  # it flushed everything before it

    def release(self, rank, what):
        """Send the notifications held for ``rank`` (None: for every rank)."""
        for r in self.w.fast.held_ranks(rank):
            self._release(self.w.targets[r], what)

    def _wait_credit(self, t, limit, what):
        w = self.w
        word = np.zeros(1, np.uint64)

        def credited():
            w.engine.transfer_sync(t.addr, _engine.READ,
                                   [(word.ctypes.data, t.ctrl + CTRL.consumed_offset(w.comm.rank), 8)],
                                   w.rt.timeout_ms)
            self.credit[t.rank] = int(word[0])
            return self.sent[t.rank] - self.credit[t.rank] < limit

        _rt.poll(credited, w.rt.timeout_ms / 1000.0, lambda: HixlTimeoutError(
            f"{what} to rank {t.rank} of window {w.label()}: the target has {limit} unconsumed "
            f"notifications from this rank (notify_limit) and consumed none within {w.rt.timeout_ms} ms"))

    def notify(self, target_rank, tag):
        """Deliver ``tag`` to target_rank after all earlier RMA to it completed."""
        tag = _check_tag(tag, "Notify")
        t = self.w.target(target_rank, "Notify")
        if t is not None:
            self._send(t, tag, "Notify")

    def put_notify(self, put, origin, target_rank, target, tag):
        """``put(origin, target_rank, target)``, then a notification the
        target sees only once the data is there."""
        tag = _check_tag(tag, "Put_notify")
        put(origin, target_rank, target)
        if target_rank != PROC_NULL:
            self._send(self.w.targets[target_rank], tag, "Put_notify")

    # ------------------------------------------------------------ target

    def _take(self, tag, source, limit):
        """Up to ``limit`` matching notifications from the queue: [(rank, tag)]."""
        w = self.w
        st = w.rt
        st.poll_notifies()
        q = st.notify_queues[f"{w.key}:n"]
        world_to_rank = self._world_to_rank
        out, keep = [], []
        while q:
            world, msg = q.popleft()
            rank = world_to_rank.get(world)
            if len(msg) % _TAG.size:
                continue  # not a message of ours
            for (value,) in _TAG.iter_unpack(msg):  # one message may carry a batch, in order
                if len(out) < limit and (tag is None or value == tag) and (source is None or rank == source):
                    out.append((rank, value))
                    w.ctrl64[CTRL.consumed_offset(rank) // 8] += 1  # frees a credit of that origin
                else:
                    keep.append((world, _TAG.pack(value)))
        q.extend(keep)
        return out

    def test(self, tag, source):
        """A matching notification ``(source, tag)`` if one arrived, else None."""
        self.w.check_live("Test_notify")
        self.release(None, "Test_notify")
        got = self._take(self._match_tag(tag), self._match_source(source), 1)
        return got[0] if got else None

    def wait_all(self, count, tag, source, timeout):
        """Wait for ``count`` matching notifications; returns [(source, tag)]."""
        w = self.w
        w.check_live("Wait_notify_all")
        self.release(None, "Wait_notify")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ParamError(f"Wait_notify_all: count must be a non-negative int, got {count!r}")
        tag, source = self._match_tag(tag), self._match_source(source)
        timeout_s = w.rt.timeout_ms / 1000.0 if timeout is None else float(timeout)
        got = []

        def enough():
            while len(got) < count:
                new = self._take(tag, source, count - len(got))
                if not new:
                    return False
                got.extend(new)
            return True

        _rt.poll(enough, timeout_s, lambda: HixlTimeoutError(
            f"Wait_notify on window {w.label()}: {len(got)} of {count} notification(s) "
            f"(tag={tag}, source={source}) within {timeout_s:g} s"), block=w.rt.block_for_notifies)
        return got

    def _match_tag(self, tag):
        return None if tag is None else _check_tag(tag, "Wait_notify")

    def _match_source(self, source):
        return None if source is None else self.w.comm.check_rank(source, "Wait_notify source")
