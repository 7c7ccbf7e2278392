"""The checked window: a subclass of ``hixl_rma.Win`` whose calls record,
then call the base class (RMA), or carry clocks around the base call
(synchronization). Window creation hands it out only while the detector
is on, so ``Win`` itself, and its Cython hot path, are untouched.

A call made by another checked call (``Flush_local`` calls ``Flush``,
``Put_notify`` calls ``Put``) is not recorded again: the outer call says
what it is.
"""
import sys
import threading

import numpy as np
from mpi4py import MPI

from hixl_rma import Request  # the face's
from hixl_rma.buffers.datatypes import as_buffer, target_blocks, typemap
from hixl_rma.ground import constants as C

from . import report
from ._ext import record as _crecord
from .clockwin import ClockWindow
from .detector import LocalUse, WinInfo, _sum, site, site_of
from .log import Access


class _Busy(threading.local):
    on = False  # inside a checked call: calls it makes are the base class's


_tls = _crecord.Busy() if _crecord is not None else _Busy()
_ATOMICS = frozenset(("Accumulate", "Raccumulate", "Get_accumulate", "Rget_accumulate", "Fetch_and_op",
                      "Compare_and_swap"))
# calls whose record may grow over intervals (Log.add): those completed by a
# flush or synchronization, not by a request or a notification
_GROWS = frozenset(("Put", "Get", "Accumulate", "Get_accumulate", "Fetch_and_op", "Compare_and_swap"))
_ndarray = np.ndarray
_getframe = sys._getframe


def _opname(op):
    name = getattr(op, "name", None)
    if isinstance(name, str):
        return name.upper().replace("MPI_", "")
    if isinstance(op, MPI.Op):
        for n in ("SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR", "REPLACE", "NO_OP",
                  "MAXLOC", "MINLOC"):
            if op == getattr(MPI, n):
                return n
    return str(op)


def _type_info(datatype):
    """(size, base dtype str) of a contiguous datatype, else None (what the
    C record asks of a (disp, count, datatype) target)."""
    tm = typemap(datatype)
    if not tm.contiguous:
        return None
    return tm.size, (tm.base.str if tm.base is not None else None)


_MERGED = {}  # the bytes of an int64 array of byte ranges -> _merge's answer (a loop's datatype target again)
_MERGED_MOST, _MERGED_BLOCKS = 8, 16384  # at most 8 answers kept, each of at most 16,384 ranges


def _merge(tblk):
    """((lo, hi), ...) of the byte ranges (offset, length) in tblk, sorted,
    overlapping or touching ones merged, empty ones left out. The answer for
    the same ranges is kept, keyed by their bytes: a loop's Put of 4,096
    blocks sorted and merged them, and made 4,096 pairs, on every call."""
    a = np.asarray(tblk if isinstance(tblk, np.ndarray) else list(tblk), dtype=np.int64).reshape(-1, 2)
    if len(a) <= 16 or len(a) > _MERGED_BLOCKS:
        return _merged(a)
    key = a.tobytes()
    out = _MERGED.get(key)
    if out is None:
        if len(_MERGED) >= _MERGED_MOST:
            _MERGED.clear()
        out = _MERGED[key] = _merged(a)
    return out


def _merged(a):
    """_merge of an (n, 2) int64 array."""
    a = a[a[:, 1] > 0]
    if not len(a):
        return ()
    a = a[np.argsort(a[:, 0], kind="stable")]
    lo, hi = a[:, 0], a[:, 0] + a[:, 1]
    # a range starts a new run where it begins past every range before it
    first = np.ones(len(lo), bool)
    first[1:] = lo[1:] > np.maximum.accumulate(hi)[:-1]
    at = np.flatnonzero(first)
    return tuple(zip(lo[at].tolist(), np.maximum.reduceat(hi, at).tolist(), strict=True))


def _addr(arr):
    return arr.__array_interface__["data"][0]


def _shape(disp_unit, origin, target, receives):
    """(target blocks, basic datatype, origin lo, origin hi, origin object)."""
    if (target is None or type(target) is int) and type(origin) is np.ndarray and origin.flags.c_contiguous:
        n = origin.nbytes
        lo = (target or 0) * disp_unit
        a = _addr(origin)
        return ((lo, lo + n),) if n else (), origin.dtype.str, a, a + n, origin
    ob = as_buffer(origin, writable=receives, name="origin", allow_device=True)
    _, tblk, dtype, _size = target_blocks(target, ob, disp_unit, "origin" if receives else "target")
    if ob.device:
        return _merge(tblk), (dtype.str if dtype is not None else None), 0, 0, None
    if len(ob.blocks):
        lo = ob.address + int(min(o for o, _ in ob.blocks))
        hi = ob.address + int(max(o + n for o, n in ob.blocks))
    else:
        lo = hi = ob.address
    return _merge(tblk), (dtype.str if dtype is not None else None), lo, hi, _kept(origin, ob)


def _kept(user, ob):
    """What a buffer in use keeps for its checksum at completion: the
    program's own object where it is one whole buffer (a bytearray, an
    array.array), not as_buffer's view of it, whose export would keep the
    program from resizing it (that store is the race to report, not a
    BufferError the program would not otherwise see)."""
    if not isinstance(user, (np.ndarray, list, tuple)) and ob.obj is not user:
        return user
    return ob.obj


def _span(buf, writable):
    """(lo, hi, object) of a result or compare buffer."""
    if type(buf) is np.ndarray and buf.flags.c_contiguous:
        a = _addr(buf)
        return a, a + buf.nbytes, buf
    ob = as_buffer(buf, writable=writable, name="result")
    return ob.address, ob.address + ob.nbytes, _kept(buf, ob)


class CheckedRequest(Request):
    """A request whose completion the detector sees."""

    __slots__ = ("_seen",)

    def _check(self):
        if self._done and self._seen is not None:
            seen, self._seen = self._seen, None
            seen()

    def Wait(self, status=None):
        r = Request.Wait(self, status)
        self._check()
        return r

    def Test(self, status=None):
        r = Request.Test(self, status)
        self._check()
        return r


def make_class(Win, det):
    """The checked subclass of ``Win`` for detector ``det``."""
    if getattr(det, "ClockComm", None) is not None:
        # a program that made a window may race: its Abort reports first
        from .report import wrap_abort
        wrap_abort(det.ClockComm)

    def info_of(win):
        return det.windows[win.view().key]

    def world(win, rank):
        return info_of(win).world[rank]

    def rma(win, call, origin, target_rank, target, op=None, result=None, compare=None, where_=None):
        if target_rank == C.PROC_NULL:
            return [], []
        info = info_of(win)
        du = win.view().disp_unit_of(target_rank)
        tw = info.world[target_rank]
        receives = call in ("Get", "Rget")
        blocks, dtype, lo, hi, obj = _shape(du, origin, target, receives)
        where_ = where_ or site(3)
        rec = det.access(info, tw, blocks, call, op, dtype, where_, grows=call in _GROWS)
        if call in _ATOMICS:
            info.atomics.add(target_rank)
        uses = []
        if hi > lo and not (call in ("Get_accumulate", "Rget_accumulate") and op == "NO_OP"):
            uses.append(det.use(info, tw, lo, hi, receives, obj, rec, call, where_))
        for buf, writes in ((result, True), (compare, False)):
            if buf is not None:
                rlo, rhi, robj = _span(buf, writes)
                if rhi > rlo:
                    uses.append(det.use(info, tw, rlo, rhi, writes, robj, rec, call, where_))
        return uses, [rec]

    _Put, _Get, _Flush = Win.Put, Win.Get, Win.Flush
    windows, log_sites = det.windows, det.log.sites

    def fast(win, call, origin, target_rank, target, receives):
        """Put/Get of a contiguous ndarray at an int displacement: record inline."""
        w = win.view()
        key = w.key
        info = windows[key]
        tw = info.world[target_rank]
        n = origin.nbytes
        lo = (target or 0) * w.disp_unit_of(target_rank)
        blocks = ((lo, lo + n),) if n else ()
        where_ = site_of(_getframe(1))
        with det.mutex:
            clock = det.clock
            snap = clock._snap or clock.snap()
            th = clock.me
            k = (key, tw, call, None, None, where_[0], where_[1], blocks, th)
            st = log_sites.get(k)
            last = st.newest if st is not None else None
            if last is not None and last.snap is snap and last.done is None:
                last.count += 1
                det.log.touch(last)
                rec = last
            else:
                if det.log.regrow(last, clock.fe):
                    rec = last
                else:
                    rec = Access(key, tw, blocks, call, None, None, det.rank, snap, where_, th)
                    rec.epoch = clock.fe
                    det.log.put(k, rec)
                p = det.pend.get((key, tw))
                if p is None:
                    det.pend[(key, tw)] = [rec]
                else:
                    p.append(rec)
            if n:
                a = origin.__array_interface__["data"][0]
                b = a + n
                for u in det.local:
                    if u.lo < b and a < u.hi and (receives or u.writes):
                        det._local_race(u, call, where_, receives, "both use the buffer before either "
                                                                      "completed locally")
                crc = None if receives else _sum(origin)
                det.local.append(LocalUse(key, tw, a, b, receives, None if receives else origin, crc, rec, call,
                                          where_))

    def slow(win, call, origin, target_rank, target):
        """Record a Put or Get of anything else: the general record."""
        _tls.on = True
        try:
            rma(win, call, origin, target_rank, target)
        finally:
            _tls.on = False

    def flushed(win, rank):
        """Flush(rank): what this rank did to rank is complete, remotely and locally."""
        info = windows[win.view().key]
        tw = info.world[rank]
        with det.mutex:
            clock = det.clock
            now = clock.tick()
            me = clock.me
            recs = det.pend.get((info.key, tw))
            if recs:
                for r in recs:
                    r.done, r.done_call, r.done_actor = now, "Flush", me
                recs.clear()
            if det.local:
                det.complete(info, {tw}, "Flush", remote=False)
        if rank in info.atomics:
            atomics_done(info, {tw})

    def track(req, uses, recs, call):
        out = CheckedRequest.__new__(CheckedRequest)
        for s in ("_wait", "_test", "_keep", "_done", "_after"):
            setattr(out, s, getattr(req, s))
        out._seen = None
        if uses or recs:
            def seen():
                det.complete_request(uses, recs, f"{call}'s request", site(4))
            out._seen = seen
        return out

    def sync(win, targets, call, remote=True, local=True, reads_only=False):
        """This rank's accesses of win to ``targets`` (world ranks; None: all) complete now."""
        det.acquire()
        info = info_of(win)
        det.complete(info, targets, call, remote, local, reads_only, None)
        if info.atomics:
            atomics_done(info, targets)

    def atomics_done(info, targets):
        """Atomics completed at these targets synchronize with the others' there
        (beyond MPI, which orders nothing by atomics: the spin-lock pattern)."""
        ranks = [r for r in info.atomics if targets is None or info.world[r] in targets]
        for r in ranks:
            info.atomics.discard(r)
            det.acquire(info.clocks.atomic_read(r), ordered=False)

    def atomic_issue(win, target_rank, call):
        """Before an atomic: this rank's clock goes to the target's atomic record."""
        # a bad rank or a freed window is the window's error, not its clock window's
        if win.view().check_target(target_rank, call):
            det.acquire()
            info_of(win).clocks.atomic_publish(det.release(ordered=False), target_rank)

    def guarded(fn):
        base = getattr(Win, fn.__name__)

        def method(self, *args, **kwargs):
            if _tls.on:
                return base(self, *args, **kwargs)
            report.look(det)  # a failed rank's report gets this rank's records even if it never ends
            _tls.on = True
            try:
                return fn(self, base, *args, **kwargs)
            finally:
                _tls.on = False

        method.__name__ = fn.__name__
        method.__doc__ = base.__doc__
        return method

    class CheckedWin(Win):
        """hixl_rma.Win with the race detector watching."""

        @classmethod
        def _new(cls, comm, memory, flavor, disp_unit, info, access=C.ACCESS_READ_WRITE, mem_type=None):
            if mem_type is None:
                mem_type = C.MEMORY_HOST
            self = super()._new(comm, memory, flavor, disp_unit, info, access, mem_type)
            w = self.view()
            base, size = w.base, w.size
            wi = WinInfo(w.key, w.label(), list(w.world_ranks), w.rank, base, size)
            wi.clocks = ClockWindow(Win, w.comm, det.width, w.rank)
            wi.locks, wi.start, wi.post, wi.atomics = {}, [], [], set()
            with det.mutex:
                det.windows[w.key] = wi
                if size:
                    det.ranges.append((base, base + size, wi, det.rank))
            return self

        # ------------------------------------------------------------ RMA

        def _moved(self, call, origin, target_rank, target, receives):
            """Record a Put or Get the base class has just made."""
            if _tls.on or target_rank == C.PROC_NULL:
                return
            if type(origin) is _ndarray and (target is None or type(target) is int) and origin.flags.c_contiguous:
                fast(self, call, origin, target_rank, target, receives)
            else:
                slow(self, call, origin, target_rank, target)

        def Put(self, origin, target_rank, target=None):
            """Write origin into the target window (recorded by the race detector)."""
            _Put(self, origin, target_rank, target)
            self._moved("Put", origin, target_rank, target, False)

        def Get(self, origin, target_rank, target=None):
            """Read the target window into origin (recorded by the race detector)."""
            _Get(self, origin, target_rank, target)
            self._moved("Get", origin, target_rank, target, True)

        @guarded
        def Accumulate(self, base, origin, target_rank, target=None, op=MPI.SUM):
            atomic_issue(self, target_rank, "Accumulate")
            base(self, origin, target_rank, target, op)
            rma(self, "Accumulate", origin, target_rank, target, _opname(op))

        @guarded
        def Get_accumulate(self, base, origin, result, target_rank, target=None, op=MPI.SUM):
            atomic_issue(self, target_rank, "Get_accumulate")
            base(self, origin, result, target_rank, target, op)
            rma(self, "Get_accumulate", origin if origin is not None else result, target_rank, target,
                _opname(op), result)

        @guarded
        def Fetch_and_op(self, base, origin, result, target_rank, target_disp=0, op=MPI.SUM):
            atomic_issue(self, target_rank, "Fetch_and_op")
            base(self, origin, result, target_rank, target_disp, op)
            rma(self, "Fetch_and_op", origin if origin is not None else result, target_rank, target_disp,
                _opname(op), result)

        @guarded
        def Compare_and_swap(self, base, origin, compare, result, target_rank, target_disp=0):
            atomic_issue(self, target_rank, "Compare_and_swap")
            base(self, origin, compare, result, target_rank, target_disp)
            rma(self, "Compare_and_swap", origin, target_rank, target_disp, "CAS", result, compare)

        @guarded
        def Rput(self, base, origin, target_rank, target=None):
            req = base(self, origin, target_rank, target)
            return track(req, *rma(self, "Rput", origin, target_rank, target), "Rput")

        @guarded
        def Rget(self, base, origin, target_rank, target=None):
            req = base(self, origin, target_rank, target)
            return track(req, *rma(self, "Rget", origin, target_rank, target), "Rget")

        @guarded
        def Raccumulate(self, base, origin, target_rank, target=None, op=MPI.SUM):
            atomic_issue(self, target_rank, "Raccumulate")
            req = base(self, origin, target_rank, target, op)
            return track(req, *rma(self, "Raccumulate", origin, target_rank, target, _opname(op)), "Raccumulate")

        @guarded
        def Rget_accumulate(self, base, origin, result, target_rank, target=None, op=MPI.SUM):
            atomic_issue(self, target_rank, "Rget_accumulate")
            req = base(self, origin, result, target_rank, target, op)
            return track(req, *rma(self, "Rget_accumulate", origin if origin is not None else result, target_rank,
                                   target, _opname(op), result), "Rget_accumulate")

        @guarded
        def Put_batch(self, base, origin_blocks, target_rank, target_disps, tag=None):
            if target_rank == C.PROC_NULL:
                return base(self, origin_blocks, target_rank, target_disps, tag)
            info, tw, where_ = info_of(self), world(self, target_rank), site(2)
            blocks = _batch_blocks(origin_blocks, target_disps, self.view().disp_unit_of(target_rank))
            # the notification's clock must be there before the notification is sent
            at = notified(self, target_rank) if tag is not None else None
            base(self, origin_blocks, target_rank, target_disps, tag)
            rec = det.access(info, tw, blocks, "Put_batch", None, None, where_)
            if at is not None:
                det.done_at(rec, *at)

        @guarded
        def Get_batch(self, base, origin_blocks, target_rank, target_disps):
            base(self, origin_blocks, target_rank, target_disps)
            if target_rank == C.PROC_NULL:
                return
            du = self.view().disp_unit_of(target_rank)
            det.access(info_of(self), world(self, target_rank), _batch_blocks(origin_blocks, target_disps, du),
                       "Get_batch", None, None, site(2))

        # ------------------------------------------------ synchronization

        @guarded
        def Fence(self, base, assertion=0):
            self.view().check_live("Fence")  # a freed window says so, not its clock window
            sync(self, None, "Fence")
            cw = info_of(self).clocks
            cw.fence_out(det.release())
            base(self, assertion)
            det.acquire(cw.fence_in())

        @guarded
        def Lock(self, base, rank, lock_type=MPI.LOCK_EXCLUSIVE, assertion=0):
            base(self, rank, lock_type, assertion)
            if rank == C.PROC_NULL:
                return
            info = info_of(self)
            excl = lock_type == MPI.LOCK_EXCLUSIVE
            info.locks[rank] = None if assertion & MPI.MODE_NOCHECK else excl
            if info.locks[rank] is None:
                det.acquire()
            else:
                det.acquire(info.clocks.lock_in(rank, excl), ordered=False)

        @guarded
        def Unlock(self, base, rank):
            self.view().check_live("Unlock")  # a freed window says so, not its clock window
            if rank == C.PROC_NULL:
                return base(self, rank)
            info = info_of(self)
            sync(self, {world(self, rank)}, "Unlock")
            c = det.release(ordered=False)
            excl = info.locks.pop(rank, None)
            if excl is not None:
                info.clocks.unlock_out(c, rank, excl)
            base(self, rank)

        @guarded
        def Lock_all(self, base, assertion=0):
            self.view().check_live("Lock_all")  # a freed window says so, not its clock window
            base(self, assertion)
            info = info_of(self)
            if assertion & MPI.MODE_NOCHECK:
                info.locks["all"] = None
                det.acquire()
                return
            info.locks["all"] = False
            det.acquire(*[info.clocks.lock_in(q, False) for q in range(len(info.world))], ordered=False)

        @guarded
        def Unlock_all(self, base):
            self.view().check_live("Unlock_all")  # a freed window says so, not its clock window
            info = info_of(self)
            sync(self, None, "Unlock_all")
            c = det.release(ordered=False)
            if info.locks.pop("all", None) is not None:
                for q in range(len(info.world)):
                    info.clocks.unlock_out(c, q, False)
            base(self)

        def Flush(self, rank):
            """Remote completion of all RMA to ``rank`` (seen by the race detector)."""
            _Flush(self, rank)
            if not _tls.on and rank != C.PROC_NULL:
                flushed(self, rank)

        @guarded
        def Flush_all(self, base):
            base(self)
            sync(self, None, "Flush_all")

        @guarded
        def Flush_local(self, base, rank):
            base(self, rank)
            if rank != C.PROC_NULL:
                sync(self, {world(self, rank)}, "Flush_local", remote=False, reads_only=True)

        @guarded
        def Flush_local_all(self, base):
            base(self)
            sync(self, None, "Flush_local_all", remote=False, reads_only=True)

        @guarded
        def Post(self, base, group, assertion=0):
            self.view().check_live("Post")  # a freed window says so, not its clock window
            info = info_of(self)
            ranks = self.view().group_ranks(group, "Post")
            info.post = list(ranks)
            det.acquire()
            info.clocks.post_out(det.release(), ranks)
            base(self, group, assertion)

        @guarded
        def Start(self, base, group, assertion=0):
            base(self, group, assertion)
            info = info_of(self)
            info.start = list(self.view().group_ranks(group, "Start"))
            det.acquire(*info.clocks.start_in(info.start))

        @guarded
        def Complete(self, base):
            self.view().check_live("Complete")  # a freed window says so, not its clock window
            info = info_of(self)
            sync(self, None, "Complete")
            info.clocks.complete_out(det.release(), info.start)
            base(self)

        @guarded
        def Wait(self, base):
            base(self)
            info = info_of(self)
            det.acquire(*info.clocks.wait_in(info.post))

        @guarded
        def Test(self, base):
            done = base(self)
            if done:
                info = info_of(self)
                det.acquire(*info.clocks.wait_in(info.post))
            return done

        @guarded
        def Put_notify(self, base, origin, target_rank, target=None, tag=0):
            if target_rank == C.PROC_NULL:
                return base(self, origin, target_rank, target, tag)
            where_ = site(2)
            at = notified(self, target_rank)
            base(self, origin, target_rank, target, tag)
            for rec in rma(self, "Put_notify", origin, target_rank, target, where_=where_)[1]:
                det.done_at(rec, *at)

        @guarded
        def Rput_notify(self, base, origin, target_rank, target=None, tag=0):
            if target_rank == C.PROC_NULL:
                return base(self, origin, target_rank, target, tag)
            where_ = site(2)
            at = notified(self, target_rank)
            req = base(self, origin, target_rank, target, tag)
            for rec in rma(self, "Put_notify", origin, target_rank, target, where_=where_)[1]:
                det.done_at(rec, *at)
            return req

        @guarded
        def Notify(self, base, target_rank, tag=0):
            if target_rank != C.PROC_NULL:
                notified(self, target_rank)
            base(self, target_rank, tag)

        @guarded
        def Wait_notify(self, base, tag=None, source=None, timeout=None):
            got = base(self, tag, source, timeout)
            det.acquire(info_of(self).clocks.notify_in(got[0]))
            return got

        @guarded
        def Wait_notify_all(self, base, count, tag=None, source=None, timeout=None):
            got = base(self, count, tag, source, timeout)
            cw = info_of(self).clocks
            det.acquire(*[cw.notify_in(s) for s, _ in got])
            return got

        @guarded
        def Test_notify(self, base, tag=None, source=None):
            got = base(self, tag, source)
            if got is not None:
                det.acquire(info_of(self).clocks.notify_in(got[0]))
            return got

        @guarded
        def Shared_query(self, base, rank):
            buf, unit = base(self, rank)
            if rank != C.PROC_NULL and len(buf):
                info = info_of(self)
                lo = buf.address
                with det.mutex:
                    span = (lo, lo + len(buf), info, world(self, rank))
                    if span not in det.ranges:
                        det.ranges.append(span)
            return buf, unit

        @guarded
        def Free(self, base):
            self.view().check_live("Free")  # a freed window says so, not its clock window
            info = info_of(self)
            sync(self, None, "Free")
            base(self)
            det.forget(info.key)  # the C record's views of the clock window's mappings go first
            info.clocks.free()
            with det.mutex:
                det.log.touched.forget(info.key)
                for k in [k for k in det.pend if k[0] == info.key]:
                    del det.pend[k]
                det.ranges = [r for r in det.ranges if r[2] is not info]
                det.freed[info.key] = info.label  # its records keep only the name
                del det.windows[info.key]

    def notified(win, target_rank):
        """The notification to target_rank orders what this rank did before it;
        (tick, clock slot) of the event that completed it."""
        sync(win, {world(win, target_rank)}, "Notify")
        clock = det.clock
        at = (clock.now(), clock.me)
        info_of(win).clocks.notify_out(det.release(), target_rank)
        return at

    def _complete_all(self):
        """The HIXL face's Fence: every operation of this rank on the window completes."""
        Win._complete_all(self)
        sync(self, None, "Fence")

    CheckedWin._complete_all = _complete_all
    if _crecord is not None:  # the hot calls record in C: no Python frame of the detector's
        rec = _crecord.Recorder(det, _tls, slow, atomics_done, C.PROC_NULL, _opname, _type_info)
        det.forget, det.threads_started = rec.forget, rec.threads_started
        # make_calls takes CheckedWin's Python methods (for what C leaves to them) before they are replaced
        for name, fn in _crecord.make_calls(Win, rec, _tls, CheckedWin).items():
            setattr(CheckedWin, name, fn)
        CheckedWin.Fence = _fence_orders(CheckedWin.Fence, det)
    # what errors and reprs call it (type(win).__name__): it is a Win
    CheckedWin.__name__ = CheckedWin.__qualname__ = Win.__name__
    return CheckedWin


def _fence_orders(c_fence, det):
    """The C record's Fence, which sends and takes in clocks without
    Detector.release and acquire: a Fence orders the loads and stores made
    under no lock (Detector._unlocked) as those do."""
    def Fence(self, assertion=0):
        if _tls.on:
            return c_fence(self, assertion)
        if det.unsync:
            det.synced_out()
        c_fence(self, assertion)
        det.synced_in()

    Fence.__doc__ = c_fence.__doc__
    return Fence


def _batch_blocks(origin_blocks, target_disps, disp_unit):
    disps = np.asarray(target_disps, np.int64).reshape(-1)
    lens = []
    for b in origin_blocks:
        if isinstance(b, tuple) and len(b) == 2:
            lens.append(np.asarray(b[1], np.int64).reshape(-1, 2)[:, 1])
        else:
            lens.append(np.array([memoryview(b).nbytes], np.int64))
    lens = np.concatenate(lens) if lens else np.zeros(0, np.int64)
    if len(lens) != len(disps):
        lens = np.concatenate([lens[:len(disps)], np.zeros(max(0, len(disps) - len(lens)), np.int64)])
    return _merge(np.stack([disps * disp_unit, lens], axis=1))
