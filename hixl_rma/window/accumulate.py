"""Accumulate operations of hixl_rma.Win with MPI's atomicity.

Two paths, chosen by (op, datatype) and what the target said at the
window's creation alone, so that every accumulate with the same op on a
location takes the same one:
- native: one 8-byte integer element per engine atomic (SUM, BAND, BOR,
  BXOR, REPLACE, NO_OP on int64/uint64; Compare_and_swap on any 8-byte type);
- locked: the target's accumulate lock (a control-block word taken with
  remote CAS, with back-off) around get -> numpy ufunc at the origin -> put,
  chunked so one large accumulate does not hold the lock throughout. Every
  accumulate takes it on a target that asked for it (``acc_locked``: host
  memory UCX did not allocate, of a window on one host), whose memory UCX's
  atomics reach only with the target's CPU; the hot path
  (WindowState._locked_atomic) takes the same lock for one 8-byte element.
"""
import ctypes

import numpy as np
from mpi4py import MPI

from hixl_rma import _engine
from hixl_rma.buffers.datatypes import as_buffer, target_blocks
from hixl_rma.buffers.device import copy_to_device, is_device, to_host
from hixl_rma.buffers.ops import NO_OP, REPLACE, as_op, native_atomic
from hixl_rma.ground.constants import PROC_NULL
from hixl_rma.ground.errors import DatatypeError, HixlTimeoutError, ParamError, PeerFailure, also
from hixl_rma.runtime import process as _rt

from . import ctrl as CTRL
from .core import pair_blocks
from .request import Request

CHUNK_BYTES = 64 * 1024
_READ, _WRITE = _engine.READ, _engine.WRITE


def _byte_index(blocks, step=1):
    """Offsets of every ``step``-th byte of the blocks, in block order."""
    if len(blocks) == 0:
        return np.zeros(0, np.int64)
    lens = blocks[:, 1] // step
    firsts = np.repeat(blocks[:, 0] - np.concatenate(([0], np.cumsum(lens)[:-1])) * step, lens)
    return firsts + np.arange(int(lens.sum()), dtype=np.int64) * step


def _span_view(buf):
    """A uint8 array over the whole memory span of a Buffer (no copy)."""
    if buf.nbytes == 0:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_ubyte * buf.nbytes).from_address(buf.address))


def gather(buf, dtype):
    """The data of a Buffer as a contiguous array of dtype (a copy)."""
    if len(buf.blocks) == 1:
        off, n = int(buf.blocks[0, 0]), int(buf.blocks[0, 1])
        return _span_view(buf)[off:off + n].view(dtype).copy()
    return _span_view(buf)[_byte_index(buf.blocks)].view(dtype)


def scatter(buf, values):
    """Write contiguous values into the blocks of a Buffer."""
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(-1)
    if len(buf.blocks) == 1:
        off = int(buf.blocks[0, 0])
        _span_view(buf)[off:off + raw.size] = raw
    else:
        _span_view(buf)[_byte_index(buf.blocks)] = raw


def _slice_descs(descs, lo, hi):
    """Rows of descs (ascending contiguous local addresses) within [lo, hi)."""
    local = descs[:, 0].astype(np.int64)
    end = local + descs[:, 2].astype(np.int64)
    sel = (local < hi) & (end > lo)
    out = descs[sel].copy()
    if len(out):
        cut_lo = np.maximum(lo - out[:, 0].astype(np.int64), 0)
        cut_hi = np.maximum(out[:, 0].astype(np.int64) + out[:, 2].astype(np.int64) - hi, 0)
        out[:, 0] += cut_lo.astype(np.uint64)
        out[:, 1] += cut_lo.astype(np.uint64)
        out[:, 2] -= (cut_lo + cut_hi).astype(np.uint64)
    return out


# what a failed transfer under a target's accumulate lock names (raised, never redone)
_GET_LOCKED = "(get under the target's accumulate lock)"
_PUT_LOCKED = "(put under the target's accumulate lock)"


class _Acc:
    """One parsed accumulate: target, op, element type and target blocks."""

    __slots__ = ("count", "device_result", "dtype", "op", "origin", "result", "t", "tbase", "tblk", "what")


class Accumulates:
    """Accumulate, Get_accumulate, Fetch_and_op, Compare_and_swap and their
    R- forms beyond the hot path (a part of the window's core; no state of
    its own)."""

    __slots__ = ("w",)

    def __init__(self, core):
        self.w = core

    def _parse(self, what, origin, result, target_rank, target, op, count1=False):
        w = self.w
        w.need_atomics()
        a = _Acc()
        a.what = what
        a.op = as_op(op, what)
        a.t = w.target(target_rank, what)
        if a.t is None:
            return None  # MPI.PROC_NULL: nothing is parsed, nothing moves
        # The op runs at the origin on the host: device origins are copied there.
        ob = as_buffer(to_host(origin) if is_device(origin) else origin, writable=False)
        a.device_result = result if result is not None and is_device(result) else None
        if a.device_result is not None:
            result = to_host(result)  # filled on the host, then copied back (_put_result)
        rb = as_buffer(result, writable=True, name="result") if result is not None else None
        where = f"{what} to rank {a.t.rank} of window {w.label()} ({ob.size} bytes from the origin)"
        if count1:  # Fetch_and_op / Compare_and_swap: exactly one element, one datatype
            _single_element(ob, what, "origin")
            _single_element(rb, what, "result")
            _same_type(ob, rb, where, "result")
        dtype = ob.dtype
        a.op.check(dtype, what)
        if rb is not None:
            if rb.size != ob.size:
                raise DatatypeError(f"{what}: result buffer has {rb.size} bytes but origin has {ob.size} bytes")
            if rb.dtype is not None and rb.dtype != dtype:
                raise DatatypeError(f"{where}: result type {rb.dtype} differs from origin type {dtype}")
        try:
            _, tblk, tdtype, _ = target_blocks(target, ob, a.t.disp_unit)
        except ParamError as exc:
            raise w.in_context(exc, what, a.t, f" ({ob.size} bytes from the origin)") from None
        if tdtype is not None and tdtype != dtype:
            raise DatatypeError(f"{what}: target type {tdtype} differs from origin type {dtype}")
        a.dtype, a.tblk, a.origin, a.result = dtype, tblk, ob, rb
        a.count = ob.size // dtype.itemsize
        a.tbase = w.target_base(a.t, tblk, what) if len(tblk) else 0
        if a.op is not NO_OP:
            w.check_mode(a.t, _WRITE, what)
        if rb is not None or a.op is NO_OP:
            w.check_mode(a.t, _READ, what)
        return a

    # ------------------------------------------------------------ paths

    def _run(self, a, fetch):
        """Apply a parsed accumulate; returns old values when fetch."""
        if a.count == 0:
            return np.zeros(0, a.dtype) if fetch else None
        values = gather(a.origin, a.dtype) if a.op is not NO_OP else None
        native = native_atomic(a.op, a.dtype)
        # UCX has no atomics on device memory: device windows take the locked
        # path, as targets whose memory takes accumulates under its lock do.
        if native is not None and a.t.mem_type != _engine.MEM_DEVICE and not a.t.acc_locked:
            addrs = a.tbase + _byte_index(a.tblk, 8)
            if not (addrs % 8).any():
                return self._native(a, native, addrs, values, fetch)
        return self._locked(a, values, fetch)

    def _native(self, a, native, addrs, values, fetch):
        w = self.w
        t = a.t
        u64 = (np.zeros(a.count, np.uint64) if values is None else values.view(np.uint64))
        if native == "NOOP":
            old = w.atomic_many_at(t.rank, "ADD", addrs, u64, True, w.rt.timeout_ms, a.what)
        elif native == "SWAP" or fetch:
            old = w.atomic_many_at(t.rank, native, addrs, u64, True, w.rt.timeout_ms, a.what)
        else:
            if w.posted_atomic(t.rank) not in (None, native):
                w.flush_target(t)  # keep this origin's accumulates in order
            w.atomic_many_at(t.rank, native, addrs, u64, False, None, a.what)
            w.note_posted_atomic(t.rank, native)
            return None
        return old.view(a.dtype) if fetch else None

    def _locked(self, a, values, fetch):
        w = self.w
        t = a.t
        if w.is_dirty(t.rank) and w.info.get("accumulate_ordering") != "none":
            w.flush_target(t)  # posted atomics first: accumulates are ordered
        isz = a.dtype.itemsize
        tmp = np.empty(a.count, a.dtype)
        base = tmp.ctypes.data
        descs = _pair_one(base, a.count * isz, a.tblk, a.tbase)
        old = np.empty(a.count, a.dtype) if fetch else None
        step = max(1, CHUNK_BYTES // isz)
        for lo in range(0, a.count, step):
            hi = min(a.count, lo + step)
            d = _slice_descs(descs, base + lo * isz, base + hi * isz)
            self._lock(t)
            try:
                w.transfer_at(t.rank, _READ, d, w.rt.timeout_ms, "accumulate " + _GET_LOCKED)
                if fetch:
                    old[lo:hi] = tmp[lo:hi]
                if a.op is not NO_OP:
                    with np.errstate(all="ignore"):
                        tmp[lo:hi] = a.op.apply(tmp[lo:hi], values[lo:hi])
                    w.transfer_at(t.rank, _WRITE, d, w.rt.timeout_ms, "accumulate " + _PUT_LOCKED)
            finally:
                self._unlock(t)
        return old

    def _lock(self, t):
        """The target's accumulate lock (a control-block word), with back-off."""
        w = self.w
        me = w.rt.rank + 1
        _rt.poll(lambda: w.ctrl_atomic(t, "CSWAP", me, compare=0, offset=CTRL.ACC) in (0, me),
                 w.rt.timeout_ms / 1000.0, lambda: HixlTimeoutError(
                     f"accumulate lock of rank {t.rank} of window {w.label()} not acquired within "
                     f"{w.rt.timeout_ms} ms"), check=lambda: self._break_dead(t))

    def _break_dead(self, t):
        """Free t's accumulate lock when its owner is known dead (what that
        owner was writing is undefined, as after any failure)."""
        w = self.w
        owner = w.ctrl_atomic(t, "ADD", 0, offset=CTRL.ACC)
        if owner and w.rt.is_dead(owner - 1) and not w.rt.is_dead(t.world):
            w.ctrl_atomic(t, "CSWAP", 0, compare=owner, offset=CTRL.ACC)

    def _unlock(self, t):
        # A CAS, not a store: a hold broken meanwhile (its owner believed
        # dead) is another rank's now, and stays so.
        w = self.w
        me = w.rt.rank + 1
        if w.ctrl_atomic(t, "CSWAP", 0, compare=me, offset=CTRL.ACC) != me:
            raise PeerFailure(f"accumulate lock of rank {t.rank} of window {w.label()} was not this rank's any "
                              f"more (another rank broke it, believing this rank dead); the accumulate may have "
                              f"been interleaved with another")

    # ------------------------------------------------------------- API

    # Accumulate, Fetch_and_op and Compare_and_swap come here from the
    # extension type (WinBase) when the hot path did not take them.

    def _fast_atomic(self, code, origin, compare, result, target_rank, target):
        """The hot path once more for a target it did not know yet: atomics
        may be the first operation to a target (native atomics only, so it
        agrees with _run's choice of path)."""
        w = self.w
        if code < 0 or type(target_rank) is not int or not 0 <= target_rank < len(w.targets):
            return False
        if w.is_ready(target_rank) or w.freed:
            return False  # the hot path already declined it
        w.make_ready(w.targets[target_rank])
        return w.atomic(origin, compare, result, target_rank, target, code)

    def accumulate(self, origin, target_rank, target, op):
        if self._fast_atomic(_engine.fast_op_code(op), origin, None, None, target_rank, target):
            return
        a = self._parse("Accumulate", origin, None, target_rank, target, op)
        if a is not None:
            self._run(a, False)

    def get_accumulate(self, origin, result, target_rank, target, op):
        """Accumulate that also returns the previous target values in result."""
        a = self._parse("Get_accumulate", origin, result, target_rank, target, op)
        if a is not None:
            _put_result(a, self._run(a, True))

    def fetch_and_op(self, origin, result, target_rank, target_disp, op):
        if self._fast_atomic(_engine.fast_op_code(op), origin, None, result, target_rank, target_disp):
            return
        a = self._parse("Fetch_and_op", origin, result, target_rank, _disp(target_disp), op, count1=True)
        if a is not None:
            _put_result(a, self._run(a, True))

    def compare_and_swap(self, origin, compare, result, target_rank, target_disp):
        if self._fast_atomic(_engine.FAST_CSWAP, origin, compare, result, target_rank, target_disp):
            return
        a = self._parse("Compare_and_swap", origin, result, target_rank, _disp(target_disp), REPLACE,
                        count1=True)
        if a is None:
            return
        cb = as_buffer(compare, writable=False, name="compare")
        _single_element(cb, "Compare_and_swap", "compare")
        _same_type(a.origin, cb, f"Compare_and_swap to rank {a.t.rank} of window {self.w.label()} "
                                 f"({a.origin.size} bytes from the origin)", "compare")
        if a.dtype.kind not in "iubV" or a.dtype.itemsize > 8:
            # MPI defines it for integer, logical and byte types only.
            raise DatatypeError(f"Compare_and_swap: datatype {a.dtype} is not an integer, logical or "
                                f"byte element of at most 8 bytes")
        new, cmp = gather(a.origin, a.dtype), gather(cb, a.dtype)
        addr = a.tbase + int(a.tblk[0, 0])
        if a.dtype.itemsize == 8 and addr % 8 == 0 and not a.t.acc_locked:
            old = self.w.atomic_at(a.t.rank, "CSWAP", addr, int(new.view(np.uint64)[0]), int(cmp.view(np.uint64)[0]),
                                   True, self.w.rt.timeout_ms, "Compare_and_swap")
            _put_result(a, np.array([old], np.uint64).view(a.dtype))
            return
        _put_result(a, self._cas_locked(a, new, cmp))

    def _cas_locked(self, a, new, cmp):
        t, w = a.t, self.w
        tmp = np.empty(1, a.dtype)
        d = _pair_one(tmp.ctypes.data, a.dtype.itemsize, a.tblk, a.tbase)
        self._lock(t)
        try:
            w.transfer_at(t.rank, _READ, d, w.rt.timeout_ms, "Compare_and_swap " + _GET_LOCKED)
            old = tmp.copy()
            if old.view(np.uint8).tobytes() == cmp.view(np.uint8).tobytes():
                tmp[:] = new
                w.transfer_at(t.rank, _WRITE, d, w.rt.timeout_ms, "Compare_and_swap " + _PUT_LOCKED)
        finally:
            self._unlock(t)
        return old

    def request(self, target_rank):
        """The Request of Raccumulate/Rget_accumulate issued to target_rank:
        complete at once unless something is left to flush there."""
        w = self.w
        t = None if target_rank == PROC_NULL else w.targets[target_rank]
        if t is None or not w.is_dirty(t.rank):
            return Request.completed()
        return Request(lambda: w.flush_target(t))


def _put_result(a, values):
    scatter(a.result, values)
    if a.device_result is not None:
        copy_to_device(a.device_result, a.result.obj)


def _pair_one(local, nbytes, tblk, tbase):
    return pair_blocks(np.array([[0, nbytes]], np.int64), local, tblk, tbase)


def _disp(target_disp):
    if isinstance(target_disp, bool) or not isinstance(target_disp, (int, np.integer)):
        raise ParamError(f"target_disp must be an int, got {type(target_disp).__name__}")
    return int(target_disp)


def _single_element(buf, what, name):
    """Fetch_and_op / Compare_and_swap take exactly one element per buffer
    (a ValueError otherwise, as mpi4py raises)."""
    if buf is None:
        return
    count = buf.count if buf.dtype is not None and buf.dtype.itemsize else buf.size
    if count != 1 or buf.dtype is None:
        raise also(DatatypeError, ValueError)(f"{what}: {name}: expecting a single element, got {count}",
                                              error_class=MPI.ERR_COUNT)


def _same_type(origin, other, what, name):
    if other is not None and other.dtype != origin.dtype:
        raise also(DatatypeError, ValueError)(
            f"{what}: mismatch in origin and {name} datatypes ({origin.dtype} and {other.dtype})")
