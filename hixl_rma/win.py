"""hixl_rma.Win: mpi4py's ``MPI.Win`` on a HIXL engine.

One file per concern, as Open MPI's osc/ucx: this one holds window
creation, metadata and the communication calls; ``epochs.py`` the
synchronization state machine (fence, PSCW, passive target).
"""
import ctypes

import numpy as np
from mpi4py import MPI

from . import _engine
from . import constants as C
from . import ctrl as CTRL
from . import runtime as _rt
from ._datatypes import as_buffer, target_blocks
from .comm import as_communicator
from .device import device_view, is_device, with_cai
from .accumulate import AccumulateMixin
from .epochs import EpochMixin
from .batch import BatchMixin
from .notify import NotifyMixin
from . import errors as _errors
from .errors import PARAM_INVALID, AccessError, BoundsError, HixlError, ParamError, UnsupportedError
from .request import Request

_READ, _WRITE = _engine.READ, _engine.WRITE
_FAILED = "failed"  # first item of a rank's metadata when its part of a creation failed


def _info_dict(info):
    """mpi4py Info, INFO_NULL, None or a dict -> dict of str."""
    if info is None or info == MPI.INFO_NULL:
        return {}
    if isinstance(info, dict):
        return {str(k): str(v) for k, v in info.items()}
    if isinstance(info, MPI.Info):
        return {k: info.Get(k) for k in info.keys()}
    raise ParamError(f"info must be an mpi4py Info, INFO_NULL, None or a dict, got {type(info).__name__}")


def _check_disp_unit(disp_unit):
    if isinstance(disp_unit, bool) or not isinstance(disp_unit, (int, np.integer)) or disp_unit <= 0:
        raise ParamError(f"disp_unit must be a positive int, got {disp_unit!r}")
    return int(disp_unit)


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
                 "_addr", "regions", "last_atomic", "notified", "credit")

    def __init__(self, rank, world, meta):
        self.rank, self.world = rank, world
        self.base, self.size, self.disp_unit, self.ctrl, self.access, self.mem_type = meta
        self._addr = None
        self.regions = None  # dynamic windows: cached attached regions
        self.last_atomic = None  # op of the posted atomics (while the target is dirty in FastWin)
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


class Win(EpochMixin, AccumulateMixin, NotifyMixin, BatchMixin):
    """A window of memory exposed for one-sided access (mpi4py's ``MPI.Win``)."""

    # ----------------------------------------------------------- creation

    def __init__(self):
        raise ParamError("use Win.Create, Win.Allocate, Win.Allocate_shared or Win.Create_dynamic")

    @classmethod
    def _new(cls, comm, memory, flavor, disp_unit, info, access=C.ACCESS_READ_WRITE,
             mem_type=_engine.MEM_HOST):
        self = object.__new__(cls)
        st = _rt.runtime()
        self._rt = st
        self._engine = st.engine
        self._comm = as_communicator(comm)
        self._flavor = flavor
        self._disp_unit = None
        self._info = {}
        self._name = ""
        self._freed = False
        self._memory = None     # what tomemory() returns
        self._handle = None     # engine registration of the window memory
        self._attached = {}     # dynamic: addr -> (handle, owner)
        self._device = False    # the local window memory is device memory
        self._init_epochs()
        error = None
        try:
            self._disp_unit = _check_disp_unit(disp_unit)
            self._info = _info_dict(info)
            base, size = self._expose(memory)
            self._ctrl_handle, self._ctrl = _alloc(self._engine, CTRL.nbytes(self._comm.size))
            self._ctrl64 = self._ctrl.view(np.uint64)
            self._ctrl64[:] = 0
            proposal = f"{st.rank}.{st.next_window_id}"
            st.next_window_id += 1
            if self._device:
                mem_type = _engine.MEM_DEVICE
            meta = (base, size, self._disp_unit, self._ctrl_handle.addr, access, mem_type, proposal)
        except Exception as exc:
            # Creation is collective: the other ranks learn of a local failure
            # through the allgather instead of waiting in it forever.
            error = exc
            meta = (_FAILED, type(exc).__name__, str(exc), getattr(exc, "status", None))
        except BaseException:
            self._teardown_local()
            raise
        try:
            metas = self._comm.comm.allgather(meta)
        except BaseException:
            self._teardown_local()
            raise
        failed = [(r, m) for r, m in enumerate(metas) if m[0] == _FAILED]
        if failed:
            self._teardown_local()
            if error is not None:
                raise error
            r, (_, name, msg, status) = failed[0]
            exc_class = getattr(_errors, name, None)
            if not (isinstance(exc_class, type) and issubclass(exc_class, HixlError)):
                exc_class = HixlError
            raise exc_class(f"window creation failed at rank {r} of the communicator: {msg}", status)
        self._key = f"w{metas[0][6]}"
        self._targets = [_Target(r, self._comm.world_ranks[r], m[:6]) for r, m in enumerate(metas)]
        dynamic = flavor == C.WIN_FLAVOR_DYNAMIC  # absolute displacements: never the hot path
        self._fast = _engine.FastWin(self._engine, [t.base for t in self._targets],
                                     [0 if dynamic else t.size for t in self._targets],
                                     [t.disp_unit for t in self._targets],
                                     [t.access for t in self._targets],
                                     [t.mem_type == _engine.MEM_HOST for t in self._targets])
        self._me = self._targets[self._comm.rank]
        st.windows.add(self)
        return self

    def _expose(self, memory):
        """Register the window memory; returns (base, size)."""
        if memory is None:
            return 0, 0
        if isinstance(memory, int):  # Allocate: engine-owned memory
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
            raise ParamError("window memory must be contiguous")
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
        return cls._new(comm, _check_size(size), C.WIN_FLAVOR_ALLOCATE, disp_unit, info)

    @classmethod
    def Allocate_shared(cls, size, disp_unit=1, info=C.INFO_NULL, comm=C.COMM_SELF):
        """Allocate memory that same-node ranks map directly (Shared_query)."""
        return cls._new(comm, _check_size(size), C.WIN_FLAVOR_SHARED, disp_unit, info)

    @classmethod
    def Create_dynamic(cls, info=C.INFO_NULL, comm=C.COMM_SELF):
        """Create a window without memory; Attach adds regions (collective)."""
        return cls._new(comm, None, C.WIN_FLAVOR_DYNAMIC, 1, info)

    # ------------------------------------------------------------ teardown

    def _teardown_local(self):
        """Release this rank's registrations (no collective, no waiting)."""
        if getattr(self, "_fast", None) is not None:
            self._fast.disable()
        eng = self._engine
        for h in [self._handle, getattr(self, "_ctrl_handle", None)] + [a[0] for a in self._attached.values()]:
            if h is not None and h.registered and not eng.finalized:
                try:
                    eng.deregister_mem(h)
                except Exception:  # teardown goes on: the engine may be failing
                    pass
        self._handle = None
        self._attached = {}
        self._freed = True
        self._rt.windows.discard(self)

    def Free(self):
        """Free the window (collective); no epoch may be open."""
        if self._freed:
            return
        self._check_free_allowed()
        try:
            self._complete_all()
            _rt.barrier(self._comm.comm, self._rt.timeout_ms, self._comm.world_ranks)
        except HixlError:
            # A peer died or hung: release this rank's part anyway (the window
            # is freed here), then report the failure.
            self._teardown_local()
            raise
        self._teardown_local()
        # Peers must not see a region vanish while they could still use it.
        _rt.barrier(self._comm.comm, self._rt.timeout_ms, self._comm.world_ranks)

    free = Free

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.Free()
        elif not self._freed:
            self._teardown_local()

    def __del__(self):
        if not getattr(self, "_freed", True):
            import warnings
            warnings.warn(f"{self!r} was not freed; call Free() (collective)", ResourceWarning, 2)

    # -------------------------------------------------------------- queries

    def _check_live(self, what):
        if self._freed:
            raise ParamError(f"{what}: window {self._label()} has been freed")

    def _label(self):
        return self._name or self._key if hasattr(self, "_key") else "<unset>"

    def __repr__(self):
        state = "freed" if self._freed else f"rank {self._comm.rank} of {self._comm.size}"
        return f"<hixl_rma.Win {self._label()} {state}>"

    def tomemory(self):
        """The local window memory as a buffer (no copy)."""
        self._check_live("tomemory")
        if self._memory is None:
            return memoryview(b"").cast("B")
        if self._device:
            return device_view(self._memory)
        return memoryview(self._memory).cast("B") if not isinstance(self._memory, memoryview) \
            else self._memory

    def Shared_query(self, rank):
        """(buffer, disp_unit) of ``rank``'s memory mapped into this process."""
        self._check_live("Shared_query")
        if self._flavor != C.WIN_FLAVOR_SHARED:
            raise ParamError("Shared_query needs a window made by Allocate_shared")
        if rank == C.PROC_NULL:
            rank = next((t.rank for t in self._targets if t.size), 0)
        rank = self._comm.check_rank(rank, "Shared_query")
        t = self._targets[rank]
        if rank == self._comm.rank or t.size == 0:
            mem = self.tomemory() if rank == self._comm.rank else memoryview(b"").cast("B")
            return mem, t.disp_unit
        ptr = self._engine.remote_ptr(t.addr, t.base, t.size)
        raw = (ctypes.c_char * t.size).from_address(ptr)
        view = memoryview(raw).cast("B")
        return view, t.disp_unit

    @property
    def group(self):
        """The group of the window's communicator."""
        return self._comm.comm.Get_group()

    def Get_group(self):
        """The group of the window's communicator."""
        return self.group

    @property
    def group_size(self):
        return self._comm.size

    @property
    def group_rank(self):
        return self._comm.rank

    @property
    def flavor(self):
        return self._flavor

    @property
    def model(self):
        return C.WIN_UNIFIED

    @property
    def attrs(self):
        """(base address, size, disp_unit) of the local window, as mpi4py."""
        return (self._me.base, self._me.size, self._me.disp_unit)

    def Get_attr(self, keyval):
        """WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR or WIN_MODEL."""
        table = {MPI.WIN_BASE: self._me.base, MPI.WIN_SIZE: self._me.size,
                 MPI.WIN_DISP_UNIT: self._me.disp_unit, MPI.WIN_CREATE_FLAVOR: self._flavor,
                 MPI.WIN_MODEL: C.WIN_UNIFIED}
        if keyval not in table:
            raise UnsupportedError(f"Get_attr: keyval {keyval} (user attributes are not supported)")
        return table[keyval]

    @property
    def info(self):
        return self.Get_info()

    def Get_info(self):
        """The info hints given at creation, as a dict."""
        return dict(self._info)

    def Set_info(self, info):
        """Replace the info hints."""
        self._info = _info_dict(info)

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, value):
        self.Set_name(value)

    def Get_name(self):
        return self._name

    def Set_name(self, name):
        if not isinstance(name, str):
            raise ParamError(f"window name must be a str, got {type(name).__name__}")
        self._name = name

    def Set_errhandler(self, errhandler):
        """Errors always raise HixlError subclasses; ERRORS_RETURN is accepted."""
        if errhandler not in (MPI.ERRORS_RETURN, MPI.ERRORS_ARE_FATAL):
            raise UnsupportedError("Set_errhandler: only ERRORS_RETURN (errors raise exceptions)")

    def Get_errhandler(self):
        return MPI.ERRORS_RETURN

    # mpi4py methods with no meaning for a window that is not an MPI object:
    # each raises UnsupportedError with the reason instead of doing something else.
    def Call_errhandler(self, errorcode):
        raise UnsupportedError("Call_errhandler: errors are Python exceptions (HixlError), not MPI error codes")

    @classmethod
    def Create_errhandler(cls, errhandler_fn):
        raise UnsupportedError("Create_errhandler: errors are Python exceptions (HixlError); catch them instead")

    @classmethod
    def Create_keyval(cls, copy_fn=None, delete_fn=None, nopython=False):
        raise UnsupportedError("Create_keyval: user attributes are not supported; keep data on the Python object")

    @classmethod
    def Free_keyval(cls, keyval):
        raise UnsupportedError("Free_keyval: user attributes are not supported")

    def Set_attr(self, keyval, attrval):
        raise UnsupportedError("Set_attr: user attributes are not supported; keep data on the Python object")

    def Delete_attr(self, keyval):
        raise UnsupportedError("Delete_attr: user attributes are not supported")

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
        if self._flavor != C.WIN_FLAVOR_DYNAMIC:
            raise ParamError("Attach needs a window made by Create_dynamic")
        buf = as_buffer(memory, writable=True, name="attached memory")
        if len(buf.blocks) != 1 or buf.blocks[0, 0] != 0:
            raise ParamError("attached memory must be contiguous and non-empty")
        if len(self._attached) >= CTRL.DYN_MAX:
            raise ParamError(f"Attach: at most {CTRL.DYN_MAX} regions per dynamic window")
        handle = self._engine.register_mem(buf.obj)
        self._attached[handle.addr] = (handle, memory)
        self._publish_regions()

    def Detach(self, memory):
        """Withdraw a region attached before."""
        self._check_live("Detach")
        buf = as_buffer(memory, writable=False, name="detached memory")
        entry = self._attached.pop(buf.address, None)
        if entry is None:
            raise ParamError(f"Detach: no region attached at address {buf.address}")
        self._publish_regions()
        self._engine.deregister_mem(entry[0])

    def _publish_regions(self):
        c = self._ctrl64
        seq = CTRL.DYN_SEQ // 8
        c[seq] += 1  # odd: readers retry
        regions = sorted((h.addr, h.length) for h, _ in self._attached.values())
        c[CTRL.DYN_COUNT // 8] = len(regions)
        if regions:
            c[CTRL.DYN_TABLE // 8:CTRL.DYN_TABLE // 8 + 2 * len(regions)] = np.array(regions, np.uint64).ravel()
        c[seq] += 1

    def _fetch_regions(self, t):
        """Read a target's attached-region table (seqlock snapshot)."""
        buf = np.zeros(CTRL.SIZE // 8, np.uint64)
        for _ in range(1000):
            self._engine.transfer_sync(t.addr, _READ, [(buf.ctypes.data, t.ctrl, CTRL.SIZE)])
            seq = int(buf[CTRL.DYN_SEQ // 8])
            if seq % 2:
                continue
            n = int(buf[CTRL.DYN_COUNT // 8])
            table = buf[CTRL.DYN_TABLE // 8:CTRL.DYN_TABLE // 8 + 2 * n].reshape(n, 2).copy()
            check = np.zeros(1, np.uint64)
            self._engine.transfer_sync(t.addr, _READ, [(check.ctypes.data, t.ctrl + CTRL.DYN_SEQ, 8)])
            if int(check[0]) == seq:
                t.regions = table
                return table
        raise ParamError(f"window {self._label()}: rank {t.rank} kept changing its attached regions")

    def _check_dynamic(self, t, blocks, what):
        lo = blocks[:, 0]
        hi = lo + blocks[:, 1]
        for attempt in range(2):
            regions = t.regions if (attempt == 0 and t.regions is not None) else self._fetch_regions(t)
            if len(regions):
                idx = np.searchsorted(regions[:, 0], lo.astype(np.uint64), side="right") - 1
                ok = idx >= 0
                safe = np.where(ok, idx, 0)
                ok &= hi <= (regions[safe, 0] + regions[safe, 1]).astype(np.int64)
                if ok.all():
                    return
            elif not len(blocks):
                return
        bad = int(np.argmin(ok)) if len(regions) else 0
        raise BoundsError(f"{what} to rank {t.rank} of dynamic window {self._label()}: address "
                          f"{int(lo[bad])} length {int(blocks[bad, 1])} is not in an attached region")

    # --------------------------------------------------------- communication

    def _target(self, target_rank, what):
        """Validate target rank and epoch; None for PROC_NULL."""
        if self._freed:
            raise ParamError(f"{what}: window {self._label()} has been freed")
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
        return type(exc)(f"{what} {where} window {self._label()}{detail}: {exc}", exc.status)

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
        if self._flavor == C.WIN_FLAVOR_DYNAMIC:
            self._check_dynamic(t, tblk, what)
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
            self._fast.mark_dirty(t.rank, keep)
        else:
            eng.transfer_sync(t.addr, op, descs, self._rt.timeout_ms)

    def _refused(self, t, descs, what, exc):
        """The engine refused a transfer (before any byte moved). In a dynamic
        window the cached region table may predate a Detach at the target:
        re-check with a fresh table, so that a detached region is reported as
        the BoundsError it is."""
        if self._flavor == C.WIN_FLAVOR_DYNAMIC and exc.status == PARAM_INVALID:
            t.regions = None
            self._check_dynamic(t, np.asarray(descs, np.int64)[:, 1:3], what)

    def _make_ready(self, t):
        """After a first successful transfer to t (connected, its table known),
        hand t to the hot path, with a direct pointer when t is mapped here."""
        if self._fast.is_ready(t.rank) or self._flavor == C.WIN_FLAVOR_DYNAMIC:
            return
        mapped = 0
        if t.size and t.mem_type == _engine.MEM_HOST and _engine.HAS_EXTENSIONS:
            try:
                mapped = self._engine.remote_ptr(t.addr, t.base, t.size)
            except HixlError:
                mapped = 0  # not on this node, or not UCX-allocated: engine posts
        self._fast.set_ready(t.rank, t.addr, mapped)

    def _check_mode(self, t, op, what):
        if t.access == C.ACCESS_READ_ONLY and op == _WRITE:
            raise AccessError(f"{what} to rank {t.rank} of window {self._label()}: the region is read-only")
        if t.access == C.ACCESS_WRITE_ONLY and op == _READ:
            raise AccessError(f"{what} from rank {t.rank} of window {self._label()}: the region is write-only")

    def Put(self, origin, target_rank, target=None):
        """Write origin into the target window (completes at the next sync)."""
        if not self._fast.put(origin, target_rank, target):
            self._transfer(_WRITE, "Put", origin, target_rank, target)

    def Get(self, origin, target_rank, target=None):
        """Read the target window into origin (valid after the next sync)."""
        if not self._fast.get(origin, target_rank, target):
            self._transfer(_READ, "Get", origin, target_rank, target)

    def _transfer(self, op, what, origin, target_rank, target):
        """Put/Get beyond the hot path: every origin and target form, full checks."""
        t = self._target(target_rank, what)
        ob = self._origin(origin, op == _READ, t, what)
        if t is None:
            return
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
        ob = self._origin(origin, op == _READ, t, what)
        if t is None:
            return Request.completed()
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
    """An origin buffer; device arrays are recognised by interface only."""
    if type(spec) is not np.ndarray and is_device(spec):
        return as_buffer(with_cai(spec), writable=writable, allow_device=True)
    return as_buffer(spec, writable=writable)


def _check_size(size):
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise ParamError(f"window size must be a non-negative int, got {size!r}")
    return int(size)
