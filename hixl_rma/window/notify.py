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
window, or when it waits for or tests notifications on it, and at the
latest ``notify_hold_us`` (info key, default 1000: 1 ms) after the first of
them was held: a program that answers a notification through MPI (or
computes) before its next synchronization then completes as it would
without batching. The message
leaves after every earlier operation to the target completed there, as a
single notification does: the guarantee is unchanged, and the origin
flushes and the target wakes once per batch instead of once per tag.
"""
import heapq
import struct
import threading
import time
import weakref

import numpy as np

from hixl_rma import _engine
from hixl_rma.ground import config as _config
from hixl_rma.ground.constants import PROC_NULL
from hixl_rma.ground.errors import HixlError, HixlTimeoutError, ParamError
from hixl_rma.runtime import process as _rt

from . import ctrl as CTRL

DEFAULT_NOTIFY_LIMIT = 1024
DEFAULT_HOLD_US = 1000  # the longest a held notification waits for its batch (info notify_hold_us)
_MAX_HOLD_US = 60_000_000
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

    __slots__ = ("__weakref__", "_world_to_rank", "credit", "lock", "since", "w")

    def __init__(self, core):
        self.w = core
        n = len(core.targets)
        # The tags held for a batch, and how many were sent, are the
        # window state's (WindowState.hold / send_held / sent_count): pending
        # work of each target, which its Flush, Fence and Unlock send in C.
        self.credit = [0] * n  # what each target had consumed of this rank's notifications when last read
        self._world_to_rank = {t.world: t.rank for t in core.targets}
        # What this class decides across several steps (the limit, the
        # batch, the hold's start) is also the pacer's (_Pacer): one at a time.
        self.lock = threading.RLock()
        self.since = [0.0] * n  # per target: when its first held tag was held

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

    def _hold_s(self):
        value = self.w.info.get("notify_hold_us", DEFAULT_HOLD_US)
        try:
            us = int(value)
        except ValueError:
            us = 0
        if not 0 < us <= _MAX_HOLD_US:
            raise ParamError(f"info notify_hold_us of window {self.w.label()} must be an int from 1 to "
                             f"{_MAX_HOLD_US}, got {value!r}")
        return us * 1e-6

    def _send(self, t, tag, what):
        with self.lock:
            self._hold(t, tag, what)

    def _hold(self, t, tag, what):
        w = self.w
        r = t.rank
        limit, hold, batch = self._limit(), self._hold_s(), self._batch()  # checked before anything is held
        if w.sent_count(r) + w.held_count(r) - self.credit[r] >= limit:
            if w.held_count(r):
                w.send_held(r, what)  # the target cannot consume what is still held here
            if w.sent_count(r) - self.credit[r] >= limit:
                self._wait_credit(t, limit, what)
        held = w.hold(r, tag)
        if held >= min(batch, limit):
            w.send_held(r, what)
        elif held == 1:
            self.since[r] = time.monotonic()
            _pacer.due(self, self.since[r] + hold)

    def release(self, rank, what):
        """Send the notifications held for ``rank`` (None: for every rank);
        raise what the pacer could not send."""
        w = self.w
        with self.lock:
            late, w.notify_late = w.notify_late, None
            for r in w.held_ranks(rank):
                w.send_held(r, what)
        if late is not None:
            raise late

    def release_late(self):
        """The pacer's call: send what has been held long enough; a failure is
        the window's next synchronization's to raise."""
        w = self.w
        with self.lock:
            if w.freed:
                return
            hold, now = self._hold_s(), time.monotonic()
            try:
                for r in w.held_ranks(None):
                    if now - self.since[r] >= hold:
                        w.send_held(r, "a held notification's delay", False)
                    else:  # held again since the pacer was called for it
                        _pacer.due(self, self.since[r] + hold)
            except HixlError as exc:
                w.notify_late = w.notify_late or exc

    def _wait_credit(self, t, limit, what):
        w = self.w
        word = np.zeros(1, np.uint64)

        def credited():
            w.transfer_at(t.rank, _engine.READ, [(word.ctypes.data, t.ctrl + CTRL.consumed_offset(w.comm.rank), 8)],
                          w.rt.timeout_ms, f"{what} (reading the target's notification credit)")
            self.credit[t.rank] = int(word[0])
            return w.sent_count(t.rank) - self.credit[t.rank] < limit

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


class _Pacer:
    """Sends the notifications held longer than notify_hold_us: one thread per
    process, started at the first hold, asleep while nothing is held. It
    is never waited for: at worst a busy machine runs it late, and the tags
    leave at the origin's next synchronization as they would without it."""

    def __init__(self):
        self._cv = threading.Condition()
        self._queue = []  # (deadline, seq, weakref to Notifications)
        self._seq = 0
        self._thread = None

    def due(self, ntf, deadline):
        with self._cv:
            self._seq += 1
            heapq.heappush(self._queue, (deadline, self._seq, weakref.ref(ntf)))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hixl_rma-notify-pacer", daemon=True)
                self._thread.start()
            self._cv.notify()

    def _run(self):
        while True:
            with self._cv:
                while not self._queue:
                    self._cv.wait()
                deadline, _, ref = self._queue[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                heapq.heappop(self._queue)
            ntf = ref()
            if ntf is not None:
                ntf.release_late()


_pacer = _Pacer()
