"""hixl_rma.Win: mpi4py's ``MPI.Win`` on a HIXL engine.

One file per concern, as Open MPI's osc/ucx: this one holds window
creation, metadata and the communication calls; ``epochs.py`` the
synchronization state machine (fence, PSCW, passive target).
"""
import ctypes
import operator

import numpy as np
from mpi4py import MPI

from . import _engine
from . import constants as C
from . import ctrl as CTRL
from . import runtime as _rt
from . import winmeta
from ._datatypes import as_buffer, target_blocks
from .attributes import AttributeMixin
from .comm import as_communicator
from .device import device_view, is_device, with_cai
from .dynamic import Regions
from . import shared
from .accumulate import AccumulateMixin
from .epochs import EpochMixin
from .batch import BatchMixin
from .notify import NotifyMixin
from .errors import (PARAM_INVALID, AccessError, BoundsError, HixlError, ParamError, UnsupportedError,
                     also)
from .request import Request

_READ, _WRITE = _engine.READ, _engine.WRITE


def _info_dict(info):
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


class _Target:
    """What an origin knows of one rank of the window."""

    __slots__ = ("rank", "world", "base", "size", "disp_unit", "ctrl", "access", "mem_type",
                 "_addr", "notified", "credit")

    def __init__(self, rank, world, meta):
        self.rank, self.world = rank, world
        self.base, self.size, self.disp_unit = meta.base, meta.size, meta.disp_unit
        self.ctrl, self.access, self.mem_type = meta.ctrl, meta.access, meta.mem_type
        self._addr = None
        self.notified = 0  # notifications this rank sent to t
        self.credit = 0    # what t had consumed of them when last read

    @property
    def addr(self):
        if self._addr is None:
            self._addr = _rt.runtime().connect(self.world)
        return self._addr


def _alloc(engine, nbytes):
    """Engine-allocated memory (mappable by peers), or registered numpy memory
    where the engine cannot allocate (vendor HIXL)."""
    try:
        h = engine.alloc_mem(max(nbytes, 1))
        return h, np.frombuffer(h, np.uint8, count=nbytes)
    except UnsupportedError:
        arr = np.zeros(max(nbytes, 1), np.uint8)
        return engine.register_mem(arr), arr[:nbytes]


class _NoHotPath:
    """The hot path of a null window: it takes nothing, so every call goes on
    to the checks that raise (the window is null or freed)."""

    fence_used = False

    def fence(self, *args):
        return False

    atomic = fence

    def is_dirty(self, rank):
        return False

    is_ready = is_dirty

    def disable(self):
        pass


class Win(_engine.WinBase, EpochMixin, AccumulateMixin, NotifyMixin, BatchMixin, AttributeMixin):
    """A window of memory exposed for one-sided access (mpi4py's ``MPI.Win``).

    ``Win()`` is a null window (``WIN_NULL``); ``Win(win)`` is another
    handle to the same window, sharing all of its state.
    """

    # A null window, and what a freed one falls back to.
    _freed = True
    _name = ""
    _key = "MPI_WIN_NULL"
    _fast = _NoHotPath()
    _targets = ()

    # ----------------------------------------------------------- creation

    def __init__(self, win=None):
        if win is None:
            return
        if not isinstance(win, Win):
            raise also(ParamError, TypeError)(f"Win(win): win must be a hixl_rma.Win, got {type(win).__name__}",
                                              error_class=MPI.ERR_WIN)
        self.__dict__ = win.__dict__  # an alias: one window, two handles
        self._share_core(win)

    def __bool__(self):
        return not self._freed

    def __eq__(self, other):
        if not isinstance(other, Win):
            return NotImplemented
        return self.__dict__ is other.__dict__ or (self._freed and other._freed)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return id(self.__dict__)

    def __reduce__(self):
        raise also(ParamError, ValueError)(f"cannot pickle {type(self).__name__} (a window lives in one process)")

    @classmethod
    def _new(cls, comm, memory, flavor, disp_unit, info, access=C.ACCESS_READ_WRITE,
             mem_type=_engine.MEM_HOST):
        self = cls.__new__(cls)
        st = _rt.runtime()
        self._rt = st
        self._engine = st.engine
        self._comm = as_communicator(comm).dup(st.timeout_ms, "window creation")
        self._flavor = flavor
        self._disp_unit = None
        self._info = {}
        self._name = ""
        self._freed = False
        self._made_as = id(self)
        self._memory = None     # the object whose memory the window exposes (kept alive)
        self._handle = None     # engine registration of the window memory
        self._regions = None    # dynamic: the attached regions (dynamic.Regions)
        self._segment = None    # Allocate_shared: the segment of all ranks (shared.Segment)
        self._device = False    # the local window memory is device memory
        self._init_epochs()
        self._init_attributes()
        try:
            error = None
            try:
                self._disp_unit = _check_disp_unit(disp_unit)
                self._info = _info_dict(info)
                if flavor in (C.WIN_FLAVOR_ALLOCATE, C.WIN_FLAVOR_SHARED):
                    memory = _check_size(memory)
            except HixlError as exc:
                error = exc
            if flavor == C.WIN_FLAVOR_SHARED:
                # Collective even where the arguments failed (size -1).
                self._segment = shared.allocate(self, -1 if error else memory,
                                                self._info.get("alloc_shared_noncontig") == "true")
            if error is not None:
                raise error
            base, size = self._expose(memory)
            self._ctrl_handle, self._ctrl = _alloc(self._engine, CTRL.nbytes(self._comm.size))
            self._ctrl64 = self._ctrl.view(np.uint64)
            self._ctrl64[:] = 0
            if flavor == C.WIN_FLAVOR_DYNAMIC:
                self._regions = Regions(self._engine, self._ctrl64, lambda n: _alloc(self._engine, n),
                                        self._label)
            if self._device:
                mem_type = _engine.MEM_DEVICE
            mine = winmeta.pack(winmeta.Meta(base, size, self._disp_unit, self._ctrl_handle.addr, access,
                                             mem_type, st.next_window_id))
            st.next_window_id += 1
        except HixlError as exc:
            # Creation is collective: the other ranks learn of a local failure
            # through the allgather instead of waiting in it forever.
            error, mine = exc, winmeta.pack_failure(exc)
        except BaseException:
            self._teardown_local()
            raise
        try:
            every = np.zeros((self._comm.size, winmeta.RECORD_BYTES), np.uint8)
            _rt.collective(self._comm.comm, self._comm.comm.Iallgather(mine, every), "window creation",
                           st.timeout_ms, self._comm.world_ranks)
        except BaseException:
            self._teardown_local()
            raise
        metas = [winmeta.unpack(rec, r) for r, rec in enumerate(every)]
        failed = [m for m in metas if isinstance(m, BaseException)]
        if failed:
            self._teardown_local()
            raise error if error is not None else failed[0]
        self._key = f"w{self._comm.world_ranks[0]}.{metas[0].seq}"
        self._targets = [_Target(r, self._comm.world_ranks[r], m) for r, m in enumerate(metas)]
        dynamic = flavor == C.WIN_FLAVOR_DYNAMIC  # absolute displacements: never the hot path
        self._fast = _engine.FastWin(self._engine, [t.base for t in self._targets],
                                     [0 if dynamic else t.size for t in self._targets],
                                     [t.disp_unit for t in self._targets],
                                     [t.access for t in self._targets],
                                     [t.mem_type == _engine.MEM_HOST for t in self._targets])
        self._fast.label = self._key
        self._set_core(self._fast)
        self._me = self._targets[self._comm.rank]
        st.windows.add(self)
        return self

    def _expose(self, memory):
        """Register the window memory; returns (base, size)."""
        if memory is None or memory is MPI.BOTTOM:
            return 0, 0
        if self._segment is not None:  # Allocate_shared: this rank's part of the segment
            ptr = self._segment.pointer(self._comm.rank)
            self._memory = _mapped_array(ptr, memory)
            return (ptr, memory) if memory else (0, 0)
        if self._flavor in (C.WIN_FLAVOR_ALLOCATE, C.WIN_FLAVOR_SHARED):  # engine-owned memory
            if memory == 0:
                self._memory = np.zeros(0, np.uint8)
                return 0, 0
            self._handle, arr = _alloc(self._engine, memory)
            self._memory = arr
            return self._handle.addr, memory
        device = is_device(memory)
        buf = as_buffer(with_cai(memory) if device else memory, writable=True, name="window memory",
                        allow_device=device)
        if len(buf.blocks) > 1 or (len(buf.blocks) == 1 and buf.blocks[0, 0] != 0):
            raise ParamError("window memory must be contiguous (C or Fortran order)")
        self._memory = memory
        if buf.nbytes == 0:
            return 0, 0
        if device:
            # The window keeps the device array alive (self._memory).
            self._handle = self._engine.register_mem_addr(buf.address, buf.nbytes, _engine.MEM_DEVICE)
            self._device = True
        else:
            self._handle = self._engine.register_mem(buf.obj)
        return self._handle.addr, buf.nbytes

    @classmethod
    def Create(cls, memory, disp_unit=1, info=C.INFO_NULL, comm=C.COMM_SELF):
        """Create a window over existing memory (collective)."""
        return cls._new(comm, memory, C.WIN_FLAVOR_CREATE, disp_unit, info)

    @classmethod
    def Allocate(cls, size, disp_unit=1, info=C.INFO_NULL, comm=C.COMM_SELF):
        """Create a window over engine-allocated memory (collective)."""
        return cls._new(comm, size, C.WIN_FLAVOR_ALLOCATE, disp_unit, info)

    @classmethod
    def Allocate_shared(cls, size, disp_unit=1, info=C.INFO_NULL, comm=C.COMM_SELF):
        """Allocate memory that same-node ranks map directly (Shared_query):
        one segment, contiguous across ranks in rank order, unless info
        ``alloc_shared_noncontig`` is "true"."""
        return cls._new(comm, size, C.WIN_FLAVOR_SHARED, disp_unit, info)

    @classmethod
    def Create_dynamic(cls, info=C.INFO_NULL, comm=C.COMM_SELF):
        """Create a window without memory; Attach adds regions (collective)."""
        return cls._new(comm, None, C.WIN_FLAVOR_DYNAMIC, 1, info)

    # ------------------------------------------------------------ teardown

    def _teardown_local(self, keep_comm=False):
        """Release this rank's registrations and, unless ``keep_comm`` (Free
        between its barriers), the window's communicator and the shared
        segment (no collective, no waiting)."""
        self._fast.disable()
        eng = self._engine
        regions = self._regions.handles() if self._regions is not None else []
        regions += self._segment.handles() if self._segment is not None else []
        for h in [self._handle, getattr(self, "_ctrl_handle", None)] + regions:
            if h is not None and h.registered and not eng.finalized:
                try:
                    eng.deregister_mem(h)
                except Exception:  # teardown goes on: the engine may be failing
                    pass
        self._handle = None
        if self._regions is not None:
            self._regions.forget()
        self._freed = True
        self._rt.windows.discard(self)
        if not keep_comm:
            self._free_last()

    def _free_last(self):
        """What goes once every rank has released its part: the shared
        segment (rank 0 allocated it) and the window's communicator."""
        for release in ((self._segment.release if self._segment is not None else None), self._comm.free):
            try:
                if release is not None:
                    release()
            except Exception:  # teardown goes on: the engine or MPI may be failing
                pass

    def Free(self):
        """Free the window (collective); no epoch may be open."""
        self._check_live("Free")
        self._check_free_allowed()
        self._delete_attributes()
        try:
            self._complete_all()
            _rt.barrier(self._comm.comm, self._rt.timeout_ms, self._comm.world_ranks)
        except HixlError:
            # A peer died or hung: release this rank's part anyway (the window
            # is freed here), then report the failure.
            self._teardown_local()
            raise
        self._teardown_local(keep_comm=True)
        try:
            # Peers must not see a region vanish while they could still use it.
            _rt.barrier(self._comm.comm, self._rt.timeout_ms, self._comm.world_ranks)
        finally:
            self._free_last()

    def free(self):
        """Free the window if it is not null (mpi4py's ``free``; idempotent)."""
        if self:
            self.Free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._freed:
            return
        if exc[0] is None:
            self.Free()
        elif not self._freed:
            self._teardown_local()

    def __del__(self):
        # Only the handle Create made warns: an alias (Win(win)) may go first.
        if not self._freed and self.__dict__.get("_made_as") == id(self):
            import warnings
            warnings.warn(f"{self!r} was not freed; call Free() (collective)", ResourceWarning, 2)

    # -------------------------------------------------------------- queries

    def _check_live(self, what):
        if self._freed:
            raise ParamError(f"{what}: window {self._label()} " +
                             ("is the null window" if self._key == Win._key else "has been freed"),
                             error_class=MPI.ERR_WIN)

    def _label(self):
        return self._name or self._key

    def __repr__(self):
        if self._key == Win._key:
            return "<hixl_rma.Win MPI_WIN_NULL>"
        state = "freed" if self._freed else f"rank {self._comm.rank} of {self._comm.size}"
        return f"<hixl_rma.Win {self._label()} {state}>"

    def _local_span(self):
        """(address, nbytes, readonly) of the local window memory, for the
        buffer protocol (``memoryview(win)``); empty at address 0 for a
        window without memory, a dynamic, freed or null one."""
        if self._freed or self._flavor == C.WIN_FLAVOR_DYNAMIC:
            return 0, 0, False
        if self._device:
            raise also(ParamError, BufferError)(f"window {self._label()} is device memory: use "
                                                f"tomemory() (a device array), not the buffer protocol")
        return self._me.base, self._me.size, False

    def tomemory(self):
        """The local window memory as an ``MPI.buffer`` (no copy); a device
        window gives a device array."""
        self._check_live("tomemory")
        if self._device:
            return device_view(self._memory)
        return MPI.buffer(self)

    def Shared_query(self, rank):
        """(buffer, disp_unit) of ``rank``'s window memory where this process
        can load and store it (every rank of an ``Allocate_shared`` window on
        this node, this rank's own memory, a same-node ``Allocate`` window);
        an empty buffer and the disp_unit where it cannot, as MPI 4.1 says."""
        self._check_live("Shared_query")
        if rank == C.PROC_NULL:
            rank = next((t.rank for t in self._targets if t.size), 0)
        rank = self._comm.check_rank(rank, f"Shared_query on window {self._label()}")
        t = self._targets[rank]
        if rank == self._comm.rank:
            return self.tomemory(), t.disp_unit
        ptr = self._mapped(t)
        if not ptr:
            if self._flavor == C.WIN_FLAVOR_SHARED and t.size:
                raise UnsupportedError(
                    f"Shared_query on window {self._label()}: rank {rank}'s memory is not mapped into "
                    f"this process (Allocate_shared needs every rank on one node and a shared-memory "
                    f"transport)", error_class=MPI.ERR_RMA_SHARED)
            return MPI.buffer.fromaddress(0, 0), t.disp_unit
        return MPI.buffer.fromaddress(ptr, t.size), t.disp_unit

    @property
    def group(self):
        """The group of the window's communicator."""
        self._check_live("group")
        return self._comm.comm.Get_group()

    def Get_group(self):
        """The group of the window's communicator."""
        return self.group

    @property
    def group_size(self):
        """The number of ranks of the window's group."""
        self._check_live("group_size")
        return self._comm.size

    @property
    def group_rank(self):
        """This process's rank in the window's group."""
        self._check_live("group_rank")
        return self._comm.rank

    def py2f(self):
        raise UnsupportedError("py2f: a hixl_rma.Win has no MPI (Fortran) handle")

    @classmethod
    def f2py(cls, arg):
        raise UnsupportedError("f2py: a hixl_rma.Win cannot be made from an MPI handle")

    @classmethod
    def fromhandle(cls, handle):
        raise UnsupportedError("fromhandle: a hixl_rma.Win cannot be made from an MPI handle")

    @property
    def handle(self):
        raise UnsupportedError("handle: a hixl_rma.Win has no MPI handle")

    def toint(self):
        raise UnsupportedError("toint: a hixl_rma.Win has no MPI handle")

    @classmethod
    def fromint(cls, arg):
        raise UnsupportedError("fromint: a hixl_rma.Win cannot be made from an MPI handle")

    # --------------------------------------------------------- dynamic windows

    def Attach(self, memory):
        """Expose a region in a dynamic window; targets use its absolute address."""
        self._check_live("Attach")
        self._need_dynamic("Attach").attach(memory)

    def Detach(self, memory):
        """Withdraw a region attached before."""
        self._check_live("Detach")
        self._need_dynamic("Detach").detach(memory)

    def _need_dynamic(self, what):
        if self._regions is None:
            raise ParamError(f"{what} needs a window made by Create_dynamic (window {self._label()})",
                             error_class=MPI.ERR_RMA_FLAVOR)
        return self._regions

    # --------------------------------------------------------- communication

    def _target(self, target_rank, what):
        """Validate target rank and epoch; None for PROC_NULL."""
        self._check_live(what)
        if target_rank == C.PROC_NULL:
            return None
        rank = self._comm.check_rank(target_rank, f"{what} on window {self._label()}")
        self._check_access(rank, what)
        return self._targets[rank]

    def _in_context(self, exc, what, t, detail=""):
        """``exc`` again (same class and status), its message naming the call,
        the target rank and the window: errors of the argument parsers do not
        know them."""
        where = f"to rank {t.rank} of" if t is not None else "on"
        return exc.again(f"{what} {where} window {self._label()}{detail}: {exc}")

    def _origin(self, spec, writable, t, what):
        """The origin buffer of an RMA call; its errors name the call."""
        try:
            return _origin(spec, writable)
        except ParamError as exc:
            raise self._in_context(exc, what, t) from None

    def _descs(self, t, ob, target, what):
        """Engine descriptors for origin buffer ``ob`` at ``target`` of t."""
        try:
            _, tblk, _, _ = target_blocks(target, ob, t.disp_unit)
        except ParamError as exc:
            raise self._in_context(exc, what, t, f" ({ob.size} bytes from the origin)") from None
        if not len(tblk):
            return None
        return pair_blocks(ob.blocks, ob.address, tblk, self._target_base(t, tblk, what))

    def _target_base(self, t, tblk, what):
        """Check target blocks against t's window; the address offsets count from."""
        if self._regions is not None:
            self._regions.check(t, tblk, what)
            return 0
        lo = int(tblk[:, 0].min()) if len(tblk) > 1 else int(tblk[0, 0])
        hi = int((tblk[:, 0] + tblk[:, 1]).max()) if len(tblk) > 1 else lo + int(tblk[0, 1])
        if lo < 0 or hi > t.size:
            raise BoundsError(f"{what} to rank {t.rank} of window {self._label()}: target offset {lo} "
                              f"length {hi - lo} bytes exceeds the window size {t.size} bytes")
        return t.base

    def _post(self, t, op, descs, keep, local_device=False):
        eng = self._engine
        if _engine.HAS_EXTENSIONS:
            if len(descs) == 1:
                d = descs[0]
                eng.post1(t.addr, op, int(d[0]), int(d[1]), int(d[2]), local_device)
            else:
                eng.post(t.addr, op, descs, local_device)
            self._fast.mark_dirty(t.rank, t.addr, keep)
        else:
            eng.transfer_sync(t.addr, op, descs, self._rt.timeout_ms)

    def _refused(self, t, descs, what, exc):
        """The engine refused a transfer (before any byte moved). In a dynamic
        window the cached region table may predate a Detach at the target:
        re-check with a fresh table, so that a detached region is reported as
        the BoundsError it is."""
        if self._regions is not None and exc.status == PARAM_INVALID:
            self._regions.invalidate(t)
            self._regions.check(t, np.asarray(descs, np.int64)[:, 1:3], what)

    def _make_ready(self, t):
        """After a first successful transfer to t (connected, its table known),
        hand t to the hot path, with a direct pointer when t is mapped here."""
        if self._fast.is_ready(t.rank) or self._flavor == C.WIN_FLAVOR_DYNAMIC or not _engine.HAS_EXTENSIONS:
            return  # (the hot path posts with the engine's extensions; vendor HIXL has none)
        self._fast.set_ready(t.rank, t.addr, self._mapped(t))

    def _mapped(self, t):
        """Where t's window memory is mapped into this process, or 0: its
        part of the shared segment, or same-node engine memory."""
        if not t.size or t.mem_type != _engine.MEM_HOST or self._flavor == C.WIN_FLAVOR_DYNAMIC:
            return 0
        if self._segment is not None:
            return self._segment.pointer(t.rank)
        if not _engine.HAS_EXTENSIONS:
            return 0
        try:
            return self._engine.remote_ptr(t.addr, t.base, t.size)
        except HixlError:
            return 0  # not on this node, or not UCX-allocated: the engine moves it

    def _check_mode(self, t, op, what):
        if t.access == C.ACCESS_READ_ONLY and op == _WRITE:
            raise AccessError(f"{what} to rank {t.rank} of window {self._label()}: the region is read-only")
        if t.access == C.ACCESS_WRITE_ONLY and op == _READ:
            raise AccessError(f"{what} from rank {t.rank} of window {self._label()}: the region is write-only")

    # Put and Get are the extension type's (WinBase): the common case in C,
    # everything else here.

    def _transfer(self, op, what, origin, target_rank, target):
        """Put/Get beyond the hot path: every origin and target form, full checks."""
        t = self._target(target_rank, what)
        if t is None:
            return  # MPI.PROC_NULL: the origin is not even parsed
        ob = self._origin(origin, op == _READ, t, what)
        self._check_mode(t, op, what)
        descs = self._descs(t, ob, target, what)
        if descs is not None:
            try:
                self._post(t, op, descs, ob.obj, ob.device)
            except ParamError as exc:
                self._refused(t, descs, what, exc)
                raise
            self._make_ready(t)

    def _rop(self, op, origin, target_rank, target, what):
        t = self._target(target_rank, what)
        if t is None:
            return Request.completed()  # MPI.PROC_NULL
        ob = self._origin(origin, op == _READ, t, what)
        self._check_mode(t, op, what)
        descs = self._descs(t, ob, target, what)
        if descs is None:
            return Request.completed()
        if ob.device:
            # TransferAsync (vendor API) cannot say the origin is device memory.
            self._post(t, op, descs, ob.obj, True)
            return Request(lambda: self._flush_target(t), keep=ob.obj)
        if not _engine.HAS_EXTENSIONS:
            self._engine.transfer_sync(t.addr, op, descs, self._rt.timeout_ms)
            return Request.completed()
        try:
            tr = self._engine.transfer_async(t.addr, op, descs, keep=ob.obj)
        except ParamError as exc:
            self._refused(t, descs, what, exc)
            raise
        timeout = self._rt.timeout_ms
        return Request(lambda: tr.wait(timeout), lambda: tr.status() != _engine.TRANSFER_WAITING
                       and (tr.wait(timeout) is None), keep=ob.obj)

    def Rput(self, origin, target_rank, target=None):
        """Request-based Put: Wait gives local (here: remote) completion."""
        return self._rop(_WRITE, origin, target_rank, target, "Rput")

    def Rget(self, origin, target_rank, target=None):
        """Request-based Get: Wait gives the data."""
        return self._rop(_READ, origin, target_rank, target, "Rget")


def Get_address(memory):
    """The address of a buffer (MPI_Get_address): a target displacement in a
    dynamic window."""
    return as_buffer(memory, writable=False, name="memory").address


def _origin(spec, writable):
    """An origin buffer: host memory, or device memory at any level of a spec."""
    return as_buffer(spec, writable=writable, allow_device=True)


def _mapped_array(address, nbytes):
    """A uint8 array over memory mapped into this process (its owner keeps it)."""
    if not nbytes:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(address))


def _check_size(size):
    size = _integral(size, "window size", MPI.ERR_SIZE)
    if size < 0:
        raise ParamError(f"window size must be a non-negative int, got {size!r}", error_class=MPI.ERR_SIZE)
    return size


WIN_NULL = Win()
"""The null window (``MPI.WIN_NULL``): ``Win() == WIN_NULL``, and a freed window equals it."""
