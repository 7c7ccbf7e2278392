"""The core of a hixl_rma window: the one owner of its state.

``WindowCore`` holds everything a window is (its communicator, memory and
registrations; by deriving from the extension type ``WindowState``, the
table of targets and the origin's epochs) and the services its parts share: the checks every call makes (window
alive, rank, epoch, access mode, bounds), descriptors, posting, completion.
The parts -- ``epochs.Sync``, ``accumulate.Accumulates``,
``notify.Notifications``, ``batch.Batches``, ``attributes.Attributes`` --
each get the core and keep only their own state; ``win.Win`` is the face
that composes them. Aliases (``Win(win)``) share one core.
"""
import ctypes
import operator

import numpy as np
from mpi4py import MPI

from hixl_rma import _engine
from hixl_rma.buffers.datatypes import as_buffer, clip_blocks, target_blocks
from hixl_rma.buffers.device import is_device, with_cai
from hixl_rma.ground import config
from hixl_rma.ground import constants as C
from hixl_rma.ground import priority as _priority
from hixl_rma.ground.errors import (
    PARAM_INVALID,
    AccessError,
    BoundsError,
    HixlError,
    ParamError,
    UnsupportedError,
    also,
)
from hixl_rma.runtime import process as _rt
from hixl_rma.runtime.comm import as_communicator

from . import ctrl as CTRL
from . import meta as winmeta
from . import shared
from .dynamic import Regions
from .request import Request

_READ, _WRITE = _engine.READ, _engine.WRITE
NULL_KEY = "MPI_WIN_NULL"  # the key of a null window (WindowState's until create())


class WindowCore(_engine.WindowState):
    """All of one window's state (see the module doc): the table of its
    targets, its epochs and what the hot path reads per call are the
    extension type's (WindowState); what only the Python layer reads is
    here."""

    __slots__ = (
        "__weakref__",
        "comm",
        "ctrl",
        "ctrl64",
        "ctrl_handle",
        "device",
        "disp_unit",
        "flavor",
        "handle",
        "info",
        "memory",
        "regions",
        "rt",
        "segment",
    )

    def __init__(self):
        # A null window until create() fills it in.
        self.rt = self.comm = None
        self.flavor = self.disp_unit = None
        self.info = {}
        self.memory = None       # the object whose memory the window exposes (kept alive)
        self.handle = None       # engine registration of the window memory
        self.regions = None      # dynamic: the attached regions (dynamic.Regions)
        self.segment = None      # Allocate_shared: the segment of all ranks (shared.Segment)
        self.device = False      # the local window memory is device memory
        self.ctrl_handle = self.ctrl = self.ctrl64 = None  # this rank's control block (ctrl.py)

    # ----------------------------------------------------------- creation

    def create(self, comm, memory, flavor, disp_unit, info, access, mem_type):
        """Collective: expose ``memory`` and learn every rank's record."""
        st = _rt.runtime()
        self.rt, self.engine = st, st.engine
        self.comm = as_communicator(comm).dup(st.timeout_ms, "window creation")
        self.flavor = flavor
        self.freed = False
        try:
            error = None
            try:
                self.disp_unit = _check_disp_unit(disp_unit)
                self.info = info_dict(info)
                self.priority = _priority.from_info(self.info, self.label())
                if flavor in (C.WIN_FLAVOR_ALLOCATE, C.WIN_FLAVOR_SHARED):
                    memory = _check_size(memory)
            except HixlError as exc:
                error = exc
            if flavor == C.WIN_FLAVOR_SHARED:
                # Collective even where the arguments failed (size -1).
                self.segment = shared.allocate(self.comm, st, -1 if error else memory,
                                               self.info.get("alloc_shared_noncontig") == "true")
            if error is not None:
                raise error
            ops_by = config.target_ops()  # a bad value fails here, where creation reports it to all
            base, size = self._expose(memory)
            self.ctrl_handle, self.ctrl = _alloc(self.engine, CTRL.nbytes(self.comm.size))
            self.ctrl64 = self.ctrl.view(np.uint64)
            self.ctrl64[:] = 0
            if flavor == C.WIN_FLAVOR_DYNAMIC:
                self.regions = Regions(self.engine, self.ctrl64, lambda n: _alloc(self.engine, n), self.label)
            if self.device:
                mem_type = _engine.MEM_DEVICE
            mine = winmeta.pack(winmeta.Meta(base, size, self.disp_unit, self.ctrl_handle.addr, access,
                                             mem_type, st.next_window_id, self._acc_locked(mem_type)))
            st.next_window_id += 1
        except HixlError as exc:
            # Creation is collective: the other ranks learn of a local failure
            # through the allgather instead of waiting in it forever.
            error, mine = exc, winmeta.pack_failure(exc)
        except BaseException:
            self.teardown_local()
            raise
        # From here a peer may make the window first and notify this rank:
        # the runtime keeps what comes for a window it does not know yet.
        st.window_making(1)
        try:
            every = np.zeros((self.comm.size, winmeta.RECORD_BYTES), np.uint8)
            _rt.collective(self.comm.comm, lambda: self.comm.comm.Iallgather(mine, every), "window creation",
                           st.timeout_ms, self.comm.world_ranks, keep=(mine, every))
        except BaseException:
            st.window_making(-1)
            self.teardown_local()
            raise
        try:
            metas = [winmeta.unpack(rec, r) for r, rec in enumerate(every)]
            failed = [m for m in metas if isinstance(m, BaseException)]
            if failed:
                self.teardown_local()
                raise error if error is not None else failed[0]
            self.key = f"w{self.comm.world_ranks[0]}.{metas[0].seq}"
            # dynamic: absolute displacements, never the hot path
            self.set_targets(self.engine, st.connect, metas, self.comm.world_ranks, self.comm.rank, st.rank + 1,
                             flavor == C.WIN_FLAVOR_DYNAMIC, ops_by)
            self.set_ctrl(self.comm.rank, self.ctrl.ctypes.data, self.ctrl)
            st.window_made(self)
        finally:
            st.window_making(-1)

    def _acc_locked(self, mem_type):
        """Whether accumulates on this rank's memory are to be made under its
        accumulate lock (get, op, put) rather than with UCX's atomics: host
        memory that UCX did not allocate (UCX's atomics on it need this
        rank's CPU, which a busy rank gives late) of a window whose ranks all
        share this host (each can take the lock word, mapped, in
        nanoseconds). Every origin follows what the target said, so that all
        of its accumulates take one path."""
        return int(self.flavor in (C.WIN_FLAVOR_CREATE, C.WIN_FLAVOR_DYNAMIC) and mem_type == _engine.MEM_HOST
                   and not self.device and _engine.has("remote_ptr") and self.rt.same_node(self.comm.world_ranks))

    def _expose(self, memory):
        """Register the window memory; returns (base, size)."""
        if memory is None or memory is MPI.BOTTOM:
            return 0, 0
        if self.segment is not None:  # Allocate_shared: this rank's part of the segment
            ptr = self.segment.pointer(self.comm.rank)
            self.memory = _mapped_array(ptr, memory)
            return (ptr, memory) if memory else (0, 0)
        if self.flavor in (C.WIN_FLAVOR_ALLOCATE, C.WIN_FLAVOR_SHARED):  # engine-owned memory
            if memory == 0:
                self.memory = np.zeros(0, np.uint8)
                return 0, 0
            self.handle, self.memory = _alloc(self.engine, memory)
            return self.handle.addr, memory
        device = is_device(memory)
        buf = as_buffer(with_cai(memory) if device else memory, writable=True, name="window memory",
                        allow_device=device)
        if len(buf.blocks) > 1 or (len(buf.blocks) == 1 and buf.blocks[0, 0] != 0):
            raise ParamError("window memory must be contiguous (C or Fortran order)")
        self.memory = memory
        if buf.nbytes == 0:
            return 0, 0
        if device:
            # The window keeps the device array alive (self.memory).
            self.handle = self.engine.register_mem_addr(buf.address, buf.nbytes, _engine.MEM_DEVICE)
            self.device = True
        else:
            self.handle = self.engine.register_mem(buf.obj)
        return self.handle.addr, buf.nbytes

    # ------------------------------------------------------------ teardown

    def teardown_local(self, keep_comm=False):
        """Release this rank's registrations and, unless ``keep_comm`` (Free
        between its barriers), the window's communicator and the shared
        segment (no collective, no waiting)."""
        self.disable()
        eng = self.engine
        regions = self.regions.handles() if self.regions is not None else []
        regions += self.segment.handles() if self.segment is not None else []
        for h in [self.handle, self.ctrl_handle, *regions]:
            if h is not None and h.registered and not eng.finalized:
                try:
                    eng.deregister_mem(h)
                except Exception:  # teardown goes on: the engine may be failing
                    pass
        self.handle = None
        if self.regions is not None:
            self.regions.forget()
        self.freed = True
        if self.rt is not None:
            self.rt.window_freed(self)
        if not keep_comm:
            self.free_last()

    def free_last(self):
        """What goes once every rank has released its part: the shared
        segment (rank 0 allocated it) and the window's communicator."""
        for release in ((self.segment.release if self.segment is not None else None), self.comm.free):
            try:
                if release is not None:
                    release()
            except Exception:  # teardown goes on: the engine or MPI may be failing
                pass

    def free(self):
        """Collective Free once the parts allowed it: complete, barrier,
        release, barrier (peers must not see a region vanish while they
        could still use it)."""
        try:
            self.complete_all()
            # A peer known dead: no MPI collective, which cannot complete and
            # which MPI may not survive (MPICH over tcp does not).
            self.rt.check_peers(self.comm.world_ranks, f"Free on window {self.label()}")
            _rt.barrier(self.comm.comm, self.rt.timeout_ms, self.comm.world_ranks, program=False)
        except HixlError:
            # A peer died or hung: release this rank's part anyway (the window
            # is freed here), then report the failure.
            self.teardown_local()
            raise
        self.teardown_local(keep_comm=True)
        try:
            _rt.barrier(self.comm.comm, self.rt.timeout_ms, self.comm.world_ranks, program=False)
        finally:
            self.free_last()

    # ------------------------------------------------------------- checks

    def check_live(self, what):
        if self.freed:
            raise ParamError(f"{what}: window {self.label()} " +
                             ("is the null window" if self.key == NULL_KEY else "has been freed"),
                             error_class=MPI.ERR_WIN)

    def target(self, target_rank, what):
        """Validate target rank and epoch; None for PROC_NULL."""
        self.check_live(what)
        if target_rank == C.PROC_NULL:
            return None
        rank = self.comm.check_rank(target_rank, f"{what} on window {self.label()}")
        self.check_access(rank, what)
        return self.targets[rank]

    def check_mode(self, t, op, what):
        if t.access == C.ACCESS_READ_ONLY and op == _WRITE:
            raise AccessError(f"{what} to rank {t.rank} of window {self.label()}: the region is read-only")
        if t.access == C.ACCESS_WRITE_ONLY and op == _READ:
            raise AccessError(f"{what} from rank {t.rank} of window {self.label()}: the region is write-only")

    def need_atomics(self):
        if not _engine.has("atomics"):
            raise UnsupportedError(f"window {self.label()}: passive-target locks and accumulates need "
                                   f"remote atomics, which vendor HIXL does not provide (use Fence or PSCW "
                                   f"with Put/Get)")

    def ctrl_atomic(self, t, op, value, compare=0, offset=CTRL.LOCK):
        """An engine atomic (ADD, SWAP, CSWAP) on a word of t's control block,
        on t's handle; returns the old value."""
        self.need_atomics()
        what = "accumulate lock" if offset == CTRL.ACC else "lock word"
        return self.atomic_at(t.rank, op, t.ctrl + offset, value, compare, True, self.rt.timeout_ms, what)

    def in_context(self, exc, what, t, detail=""):
        """``exc`` again (same class and status), its message naming the call,
        the target rank and the window: errors of the argument parsers do not
        know them."""
        where = f"to rank {t.rank} of" if t is not None else "on"
        return exc.again(f"{what} {where} window {self.label()}{detail}: {exc}")

    # -------------------------------------------------------- descriptors

    def origin(self, spec, writable, t, what):
        """The origin buffer of an RMA call (host memory, or device memory at
        any level of a spec); its errors name the call."""
        try:
            return as_buffer(spec, writable=writable, allow_device=True)
        except ParamError as exc:
            raise self.in_context(exc, what, t) from None

    def descs(self, t, ob, target, what, op):
        """Engine descriptors for origin buffer ``ob`` at ``target`` of t; a
        receiving side larger than the data (the target of a Put, the origin
        of a Get) takes the data into its start, as in MPI."""
        try:
            _, tblk, _, size = target_blocks(target, ob, t.disp_unit, "target" if op == _WRITE else "origin")
        except ParamError as exc:
            raise self.in_context(exc, what, t, f" ({ob.size} bytes from the origin)") from None
        if not len(tblk):
            return None
        oblk = ob.blocks if size == ob.size else clip_blocks(ob.blocks, size)
        return pair_blocks(oblk, ob.address, tblk, self.target_base(t, tblk, what))

    def target_base(self, t, tblk, what):
        """Check target blocks against t's window; the address offsets count from."""
        if self.regions is not None:
            self.regions.check(t, tblk, what)
            return 0
        lo = int(tblk[:, 0].min()) if len(tblk) > 1 else int(tblk[0, 0])
        hi = int((tblk[:, 0] + tblk[:, 1]).max()) if len(tblk) > 1 else lo + int(tblk[0, 1])
        if lo < 0 or hi > t.size:
            raise BoundsError(f"{what} to rank {t.rank} of window {self.label()}: target offset {lo} "
                              f"length {hi - lo} bytes exceeds the window size {t.size} bytes")
        return t.base

    # ------------------------------------------------------ moving, completing

    def post(self, t, op, descs, keep, local_device=False):
        """Post descriptors to t; the target is dirty until flushed."""
        if _engine.has("post"):
            super().post(t.rank, op, descs, keep, local_device)  # the hot path's own post
        else:
            self.transfer_at(t.rank, op, descs, self.rt.timeout_ms, "Put" if op == _WRITE else "Get")

    def refused(self, t, descs, what, exc):
        """The engine refused a transfer (before any byte moved). In a dynamic
        window the cached region table may predate a Detach at the target:
        re-check with a fresh table, so that a detached region is reported as
        the BoundsError it is."""
        if self.regions is not None and exc.status == PARAM_INVALID:
            self.regions.invalidate(t)
            self.regions.check(t, np.asarray(descs, np.int64)[:, 1:3], what)

    def make_ready(self, t):
        """After a first successful transfer to t (connected, its table known),
        hand t to the hot path, with a direct pointer when t is mapped here."""
        if self.is_ready(t.rank) or self.flavor == C.WIN_FLAVOR_DYNAMIC or not _engine.has("peer_handles"):
            return  # (the hot path posts with the engine's extensions; vendor HIXL has none)
        addr = t.addr  # connects first: a new peer changes the generation
        generation = self.engine.mapping_generation()  # before the pointer: a change after it shows
        ptr, keep = self.mapped(t)
        self.set_ready(t.rank, ptr, keep, generation)
        if not self.has_ctrl(t.rank):
            try:  # its lock words, for the hot Lock/Unlock and locked accumulates
                pin = self.engine.pin_remote(addr, t.ctrl, CTRL.nbytes(self.comm.size))
                self.set_ctrl(t.rank, pin.addr, pin, generation)
            except HixlError:
                pass  # not on this node (or not mapped): the engine's atomics take them

    def mapped(self, t):
        """(address, keeper) where t's window memory is mapped into this
        process -- its part of the shared segment, or same-node engine
        memory -- or (0, None). While the keeper (a RemotePin, or the
        segment's owner) lives, the address stays mapped: views and cached
        pointers never fault, whatever happens to t."""
        if not t.size or t.mem_type != _engine.MEM_HOST or self.flavor == C.WIN_FLAVOR_DYNAMIC:
            return 0, None
        if self.segment is not None:
            return self.segment.pointer(t.rank), self.segment.keeper
        if not _engine.has("remote_ptr"):
            return 0, None
        try:
            pin = self.engine.pin_remote(t.addr, t.base, t.size)
        except HixlError:
            return 0, None  # not on this node, or not UCX-allocated: the engine moves it
        return pin.addr, pin

    def flush_target(self, t):
        """Complete what was posted to t (on its handle); the kept buffers may go."""
        self.flush_rank(t.rank, self.rt.timeout_ms)

    def complete_all(self):
        for t in self.targets:
            self.flush_target(t)

    # ----------------------------------------- Put/Get beyond the hot path

    def transfer(self, op, what, origin, target_rank, target):
        """Put/Get beyond the hot path: every origin and target form, full checks."""
        t = self.target(target_rank, what)
        if t is None:
            return  # MPI.PROC_NULL: the origin is not even parsed
        ob = self.origin(origin, op == _READ, t, what)
        self.check_mode(t, op, what)
        descs = self.descs(t, ob, target, what, op)
        if descs is not None:
            try:
                self.post(t, op, descs, ob.obj, ob.device)
            except ParamError as exc:
                self.refused(t, descs, what, exc)
                raise
            self.make_ready(t)

    def request_transfer(self, op, origin, target_rank, target, what):
        """Rput/Rget: a Request whose Wait gives remote completion."""
        t = self.target(target_rank, what)
        if t is None:
            return Request.completed()  # MPI.PROC_NULL
        ob = self.origin(origin, op == _READ, t, what)
        self.check_mode(t, op, what)
        descs = self.descs(t, ob, target, what, op)
        if descs is None:
            return Request.completed()
        if ob.device:
            # TransferAsync (vendor API) cannot say the origin is device memory.
            self.post(t, op, descs, ob.obj, True)
            return Request(lambda: self.flush_target(t), keep=ob.obj)
        if not _engine.has("post"):
            self.transfer_at(t.rank, op, descs, self.rt.timeout_ms, what)
            return Request.completed()
        try:
            tr = self.transfer_async_at(t.rank, op, descs, ob.obj, what)
        except ParamError as exc:
            self.refused(t, descs, what, exc)
            raise
        timeout = self.rt.timeout_ms
        return Request(lambda: tr.wait(timeout), lambda: tr.status() != _engine.TRANSFER_WAITING
                       and (tr.wait(timeout) is None), keep=ob.obj)


def pair_blocks(oblk, obase, tblk, tbase):
    """Zip origin and target block lists of the same byte stream into (n, 3)
    engine descriptors (local address, remote address, length)."""
    if len(oblk) == 1 and len(tblk) == 1:
        return np.array([[obase + int(oblk[0, 0]), tbase + int(tblk[0, 0]), int(oblk[0, 1])]], np.uint64)
    if len(oblk) == 0:
        return np.zeros((0, 3), np.uint64)
    if len(oblk) == 1 or len(tblk) == 1:
        # One side contiguous (the common datatype Put/Get): the other side's
        # blocks are the cuts, so no union of both cut lists is needed.
        many, mbase, one, obase1 = (tblk, tbase, oblk, obase) if len(oblk) == 1 else (oblk, obase, tblk, tbase)
        if not many[:, 1].all():
            many = many[many[:, 1] != 0]  # empty blocks make no descriptor (as the cut path)
        out = np.empty((len(many), 3), np.uint64)
        col_many, col_one = (1, 0) if len(oblk) == 1 else (0, 1)
        out[:, col_many] = mbase + many[:, 0]
        out[0, col_one] = obase1 + int(one[0, 0])
        np.cumsum(many[:-1, 1], out=out[1:, col_one])
        out[1:, col_one] += out[0, col_one]
        out[:, 2] = many[:, 1]
        return out
    oc = np.concatenate(([0], np.cumsum(oblk[:, 1])))
    tc = np.concatenate(([0], np.cumsum(tblk[:, 1])))
    cuts = np.union1d(oc, tc)
    starts, lens = cuts[:-1], np.diff(cuts)
    oi = np.searchsorted(oc, starts, side="right") - 1
    ti = np.searchsorted(tc, starts, side="right") - 1
    out = np.empty((len(starts), 3), np.uint64)
    out[:, 0] = obase + oblk[oi, 0] + (starts - oc[oi])
    out[:, 1] = tbase + tblk[ti, 0] + (starts - tc[ti])
    out[:, 2] = lens
    return out


def info_dict(info):
    """mpi4py Info, INFO_NULL, None or a dict -> dict of str."""
    if info is None or info == MPI.INFO_NULL:
        return {}
    if isinstance(info, dict):
        return {str(k): str(v) for k, v in info.items()}
    if isinstance(info, MPI.Info):
        return {k: info.Get(k) for k in info.keys()}
    raise also(ParamError, TypeError)(
        f"info must be an mpi4py Info, INFO_NULL, None or a dict, got {type(info).__name__}",
        error_class=MPI.ERR_INFO)


def _integral(value, what, error_class):
    """``value`` as an int where mpi4py takes it (any integral, bool included:
    ``Win.Create(buf, True)`` is disp_unit 1); a TypeError otherwise."""
    try:
        return operator.index(value)
    except TypeError:
        raise also(ParamError, TypeError)(f"{what} must be an integer, got {type(value).__name__}",
                                          error_class=error_class) from None


def _check_disp_unit(disp_unit):
    unit = _integral(disp_unit, "disp_unit", MPI.ERR_DISP)
    if unit <= 0:
        raise ParamError(f"disp_unit must be a positive int, got {disp_unit!r}", error_class=MPI.ERR_DISP)
    return unit


def _check_size(size):
    size = _integral(size, "window size", MPI.ERR_SIZE)
    if size < 0:
        raise ParamError(f"window size must be a non-negative int, got {size!r}", error_class=MPI.ERR_SIZE)
    return size


def _alloc(engine, nbytes):
    """Engine-allocated memory (mappable by peers), or registered numpy memory
    where the engine cannot allocate (vendor HIXL)."""
    if _engine.has("alloc_mem"):
        h = engine.alloc_mem(max(nbytes, 1))
        return h, np.frombuffer(h, np.uint8, count=nbytes)
    arr = np.zeros(max(nbytes, 1), np.uint8)
    return engine.register_mem(arr), arr[:nbytes]


def _mapped_array(address, nbytes):
    """A uint8 array over memory mapped into this process (its owner keeps it)."""
    if not nbytes:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(address))
