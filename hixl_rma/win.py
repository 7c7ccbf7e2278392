"""hixl_rma.Win: mpi4py's ``MPI.Win`` on a HIXL engine.

``Win`` is the face: creation, teardown, queries, and every call of
mpi4py's ``MPI.Win``, each handed to the part that does it. A window's
state is its core (``core.WindowCore``) and the parts the core composes,
found by name: ``epochs.Sync`` (fence, PSCW, passive target, flush),
``accumulate.Accumulates``, ``notify.Notifications``, ``batch.Batches``,
``attributes.Attributes``. The hot calls (Put, Get, Flush, Fence, the
one-element atomics) are methods of the extension type (``WinBase``,
``_winbase.pxi``) that this class derives from; what they do not take comes
to the underscore methods below.
"""
from mpi4py import MPI

from . import _engine
from .buffers.datatypes import as_buffer
from .buffers.device import device_view
from .buffers.ops import SUM
from .ground import constants as C
from .ground.errors import ParamError, UnsupportedError, also
from .runtime import hooks
from .window import attributes
from .window.accumulate import Accumulates
from .window.attributes import Attributes
from .window.batch import Batches
from .window.core import NULL_KEY, WindowCore
from .window.epochs import Sync
from .window.notify import Notifications
from .window.request import Request
from .window.view import WindowView

_READ, _WRITE = _engine.READ, _engine.WRITE

_NULL = WindowCore()


class Win(_engine.WinBase):
    """A window of memory exposed for one-sided access (mpi4py's ``MPI.Win``).

    ``Win()`` is a null window (``WIN_NULL``); ``Win(win)`` is another
    handle to the same window, sharing all of its state.
    """

    # A null window's parts (every call on it raises); its core is _NULL (__new__).
    _sync = Sync(_NULL)
    _acc = Accumulates(_NULL)
    _ntf = Notifications(_NULL)
    _batch = Batches(_NULL, _ntf)
    _attr = Attributes(_NULL)

    # ----------------------------------------------------------- creation

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        self._set_core(_NULL)  # a null window until made or aliased
        return self

    def __init__(self, win=None):
        if win is None:
            return
        if not isinstance(win, Win):
            raise also(ParamError, TypeError)(f"Win(win): win must be a hixl_rma.Win, got {type(win).__name__}",
                                              error_class=MPI.ERR_WIN)
        self.__dict__ = win.__dict__  # an alias: one window, two handles
        self._share_core(win)
        if type(win) is not type(self) and issubclass(type(win), type(self)):
            self.__class__ = type(win)  # an alias of a checked window is checked too

    @classmethod
    def _new(cls, comm, memory, flavor, disp_unit, info, access=C.ACCESS_READ_WRITE,
             mem_type=_engine.MEM_HOST):
        make = hooks.window_class
        checked = make(cls) if make is not None else None  # None unless a tool (the race detector) is on
        if checked is not None and checked is not cls:
            return checked._new(comm, memory, flavor, disp_unit, info, access, mem_type)
        core = WindowCore()
        core.create(comm, memory, flavor, disp_unit, info, access, mem_type)
        self = cls.__new__(cls)
        self._set_core(core)
        self._made_as = id(self)
        self._sync = Sync(core)
        self._acc = Accumulates(core)
        self._ntf = Notifications(core)
        self._batch = Batches(core, self._ntf)
        self._attr = Attributes(core)
        return self

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

    def view(self):
        """A read-only view of this window for tools (``hixl_rma.window.view.WindowView``):
        its id, name, flavor, communicator, ranks, memory range and
        displacement units, and its checks."""
        view = self.__dict__.get("_view")
        if view is None:
            view = self._view = WindowView(self._core)
        return view

    def _complete_all(self):
        """Complete every operation of this rank on the window (the HIXL face's Fence)."""
        self._core.complete_all()

    def Free(self):
        """Free the window (collective); no epoch may be open."""
        self._core.check_live("Free")
        self._ntf.release(None, "Free")
        self._sync.check_free_allowed()
        self._attr.delete_all(self)
        self._core.free()

    def free(self):
        """Free the window if it is not null (mpi4py's ``free``; idempotent)."""
        if self:
            self.Free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._core.freed:
            return
        if exc[0] is None:
            self.Free()
        else:
            self._core.teardown_local()

    def __del__(self):
        # Only the handle Create made warns: an alias (Win(win)) may go first.
        if not self._core.freed and self.__dict__.get("_made_as") == id(self):
            import warnings
            warnings.warn(f"{self!r} was not freed; call Free() (collective)", ResourceWarning, 2)

    # -------------------------------------------------------------- identity

    def __bool__(self):
        return not self._core.freed

    def __eq__(self, other):
        if not isinstance(other, Win):
            return NotImplemented
        return self._core is other._core or (self._core.freed and other._core.freed)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return id(self._core)

    def __reduce__(self):
        raise also(ParamError, ValueError)(f"cannot pickle {type(self).__name__} (a window lives in one process)")

    def __repr__(self):
        w = self._core
        if w.key == NULL_KEY:
            return "<hixl_rma.Win MPI_WIN_NULL>"
        state = "freed" if w.freed else f"rank {w.comm.rank} of {w.comm.size}"
        return f"<hixl_rma.Win {w.label()} {state}>"

    # -------------------------------------------------------------- queries

    def _local_span(self):
        """(address, nbytes, readonly) of the local window memory, for the
        buffer protocol (``memoryview(win)``); empty at address 0 for a
        window without memory, a dynamic, freed or null one."""
        w = self._core
        if w.freed or w.flavor == C.WIN_FLAVOR_DYNAMIC:
            return 0, 0, False
        if w.device:
            raise also(ParamError, BufferError)(f"window {w.label()} is device memory: use "
                                                f"tomemory() (a device array), not the buffer protocol")
        return w.me.base, w.me.size, False

    def tomemory(self):
        """The local window memory as an ``MPI.buffer`` (no copy); a device
        window gives a device array."""
        self._core.check_live("tomemory")
        if self._core.device:
            return device_view(self._core.memory)
        return MPI.buffer(self)

    def Shared_query(self, rank):
        """(buffer, disp_unit) of ``rank``'s window memory where this process
        can load and store it (every rank of an ``Allocate_shared`` window on
        this node, this rank's own memory, a same-node ``Allocate`` window);
        an empty buffer and the disp_unit where it cannot, as MPI 4.1 says."""
        w = self._core
        w.check_live("Shared_query")
        if rank == C.PROC_NULL:
            rank = next((t.rank for t in w.targets if t.size), 0)
        rank = w.comm.check_rank(rank, f"Shared_query on window {w.label()}")
        t = w.targets[rank]
        if rank == w.comm.rank:
            return self.tomemory(), t.disp_unit
        ptr, keep = w.mapped(t)
        if not ptr:
            if w.flavor == C.WIN_FLAVOR_SHARED and t.size:
                raise UnsupportedError(
                    f"Shared_query on window {w.label()}: rank {rank}'s memory is not mapped into "
                    f"this process (Allocate_shared needs every rank on one node and a shared-memory "
                    f"transport)", error_class=MPI.ERR_RMA_SHARED)
            return MPI.buffer.fromaddress(0, 0), t.disp_unit
        # A view of the keeper (the mapping lives as long as the view).
        start = ptr - keep.addr
        return MPI.buffer(memoryview(keep)[start:start + t.size]), t.disp_unit

    @property
    def group(self):
        """The group of the window's communicator."""
        self._core.check_live("group")
        return self._core.comm.comm.Get_group()

    def Get_group(self):
        """The group of the window's communicator."""
        return self.group

    @property
    def group_size(self):
        """The number of ranks of the window's group."""
        self._core.check_live("group_size")
        return self._core.comm.size

    @property
    def group_rank(self):
        """This process's rank in the window's group."""
        self._core.check_live("group_rank")
        return self._core.comm.rank

    @property
    def attrs(self):
        """(base address, size, disp_unit) of the local window, as mpi4py."""
        return self._attr.local()

    @property
    def flavor(self):
        """How the window was created (WIN_FLAVOR_*)."""
        self._core.check_live("flavor")
        return self._core.flavor

    @property
    def model(self):
        """The memory model: always WIN_UNIFIED."""
        self._core.check_live("model")
        return C.WIN_UNIFIED

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
        self._need_dynamic("Attach").attach(memory)

    def Detach(self, memory):
        """Withdraw a region attached before."""
        self._need_dynamic("Detach").detach(memory)

    def _need_dynamic(self, what):
        w = self._core
        w.check_live(what)
        if w.regions is None:
            raise ParamError(f"{what} needs a window made by Create_dynamic (window {w.label()})",
                             error_class=MPI.ERR_RMA_FLAVOR)
        return w.regions

    # ---------------------------------------------------- RMA (WinBase: hot)

    def _transfer(self, op, what, origin, target_rank, target):
        self._core.transfer(op, what, origin, target_rank, target)

    def Rput(self, origin, target_rank, target=None):
        """Request-based Put: Wait gives local (here: remote) completion."""
        return self._core.request_transfer(_WRITE, origin, target_rank, target, "Rput")

    def Rget(self, origin, target_rank, target=None):
        """Request-based Get: Wait gives the data."""
        return self._core.request_transfer(_READ, origin, target_rank, target, "Rget")

    # ---------------------------------------------------------- accumulates

    def _accumulate(self, origin, target_rank, target, op):
        self._acc.accumulate(origin, target_rank, target, op)

    def _fetch_and_op(self, origin, result, target_rank, target_disp, op):
        self._acc.fetch_and_op(origin, result, target_rank, target_disp, op)

    def _compare_and_swap(self, origin, compare, result, target_rank, target_disp):
        self._acc.compare_and_swap(origin, compare, result, target_rank, target_disp)

    def _get_accumulate(self, origin, result, target_rank, target, op):
        self._acc.get_accumulate(origin, result, target_rank, target, op)

    def Raccumulate(self, origin, target_rank, target=None, op=SUM):
        """Request-based Accumulate (complete when it returns, or at Wait)."""
        self.Accumulate(origin, target_rank, target, op)
        return self._acc.request(target_rank)

    def _rget_accumulate(self, origin, result, target_rank, target, op):
        self._acc.get_accumulate(origin, result, target_rank, target, op)
        return self._acc.request(target_rank)

    # ------------------------------------------------------ synchronization

    def _fence(self, assertion):
        self._ntf.release(None, "Fence")
        self._sync.fence(assertion)

    def _flush(self, rank):
        self._ntf.release(rank, "Flush")
        self._sync.flush(rank)

    def Post(self, group, assertion=0):
        """Open an exposure epoch for the origins in ``group``."""
        self._sync.post(group, assertion)

    def Start(self, group, assertion=0):
        """Open an access epoch to the targets in ``group`` (waits for their Post)."""
        self._sync.start(group, assertion)

    def Complete(self):
        """End the access epoch: complete all RMA, tell each target."""
        self._ntf.release(None, "Complete")
        self._sync.complete()

    def Wait(self):
        """End the exposure epoch: wait for Complete from every origin."""
        self._sync.wait()

    def Test(self):
        """Non-blocking Wait: True (and the epoch closed) once every origin completed."""
        return self._sync.test()

    def _lock(self, rank, lock_type, assertion):
        self._sync.lock(rank, lock_type, assertion)

    def _unlock(self, rank):
        try:
            self._ntf.release(rank, "Unlock")
        finally:
            self._sync.unlock(rank)  # the epoch ends even where the held notifications failed

    def Lock_all(self, assertion=0):
        """Shared locks on every rank of the window."""
        self._sync.lock_all(assertion)

    def Unlock_all(self):
        """Complete all RMA and release the shared locks of Lock_all."""
        try:
            self._ntf.release(None, "Unlock_all")
        finally:
            self._sync.unlock_all()

    def Flush_all(self):
        """Remote completion of all RMA (inside a passive epoch)."""
        self._ntf.release(None, "Flush_all")
        self._sync.flush_all()

    def Flush_local(self, rank):
        """Local completion of RMA to ``rank`` (here: remote completion)."""
        self.Flush(rank)

    def Flush_local_all(self):
        """Local completion of all RMA (here: remote completion)."""
        self.Flush_all()

    def Sync(self):
        """Synchronize the public and private copies of the window (one copy
        in the unified model): a memory fence, so that loads after it see
        what peers wrote before it."""
        self._sync.sync()

    # ---------------------------------------------------------- notified RMA

    def Notify(self, target_rank, tag=0):
        """Deliver ``tag`` to target_rank after all earlier RMA to it completed."""
        self._ntf.notify(target_rank, tag)

    def Put_notify(self, origin, target_rank, target=None, tag=0):
        """Put, then a notification the target sees only once the data is there."""
        self._ntf.put_notify(self.Put, origin, target_rank, target, tag)

    def Rput_notify(self, origin, target_rank, target=None, tag=0):
        """Request-based Put_notify (complete when it returns)."""
        self._ntf.put_notify(self.Put, origin, target_rank, target, tag)
        return Request.completed()

    def Test_notify(self, tag=None, source=None):
        """A matching notification ``(source, tag)`` if one arrived, else None."""
        return self._ntf.test(tag, source)

    def Wait_notify(self, tag=None, source=None, timeout=None):
        """Wait for a matching notification; returns ``(source, tag)``."""
        return self._ntf.wait_all(1, tag, source, timeout)[0]

    def Wait_notify_all(self, count, tag=None, source=None, timeout=None):
        """Wait for ``count`` matching notifications; returns [(source, tag)]."""
        return self._ntf.wait_all(count, tag, source, timeout)

    # --------------------------------------------------------------- batches

    def Put_batch(self, origin_blocks, target_rank, target_disps, tag=None):
        """Put many blocks at once; ``origin_blocks`` is a list of buffers or
        ``(buffer, offsets)`` with offsets an (n, 2) array of (offset, length).
        With ``tag``, the target is notified once the whole batch landed."""
        self._batch.run("Put_batch", _WRITE, origin_blocks, target_rank, target_disps, tag)

    def Get_batch(self, origin_blocks, target_rank, target_disps):
        """Get many blocks at once into the origin blocks (see Put_batch)."""
        self._batch.run("Get_batch", _READ, origin_blocks, target_rank, target_disps, None)

    # ------------------------------------------------- attributes, info, name

    @classmethod
    def Create_keyval(cls, copy_fn=None, delete_fn=None, nopython=False):
        """A new attribute key for windows; ``delete_fn(win, keyval, value)``
        runs when the attribute is deleted or its window freed."""
        return attributes.create_keyval(copy_fn, delete_fn, nopython)

    @classmethod
    def Free_keyval(cls, keyval):
        """Free a key made by Create_keyval; returns KEYVAL_INVALID."""
        return attributes.free_keyval(keyval)

    def Get_attr(self, keyval):
        """The value of an attribute: WIN_BASE, WIN_SIZE, WIN_DISP_UNIT,
        WIN_CREATE_FLAVOR, WIN_MODEL, or a user keyval's (None if unset)."""
        return self._attr.get(keyval)

    def Set_attr(self, keyval, attrval):
        """Set a user attribute (an old value is deleted first, as in MPI)."""
        self._attr.set(self, keyval, attrval)

    def Delete_attr(self, keyval):
        """Delete a user attribute (its keyval's delete_fn runs)."""
        self._attr.delete(self, keyval)

    def Get_info(self):
        """The window's info hints, as a new ``MPI.Info`` (the caller frees it)."""
        return self._attr.get_info()

    def Set_info(self, info):
        """Set info hints (keys not given keep their values)."""
        self._attr.set_info(info)

    @property
    def info(self):
        """The info hints (``MPI.Info``); settable."""
        return self._attr.get_info()

    @info.setter
    def info(self, info):
        self._attr.set_info(info)

    def Get_name(self):
        """The window's name ("" until set; MPI_WIN_NULL for the null window)."""
        return self._attr.get_name()

    def Set_name(self, name):
        """Name the window (errors name it)."""
        self._attr.set_name(name)

    @property
    def name(self):
        """The window's name; settable."""
        return self._attr.get_name()

    @name.setter
    def name(self, value):
        self._attr.set_name(value)

    def Set_errhandler(self, errhandler):
        """Record the error handler. Errors raise exceptions whichever it is
        (ERRORS_ARE_FATAL does not abort the job)."""
        self._attr.set_errhandler(errhandler)

    def Get_errhandler(self):
        """The error handler last set (ERRORS_RETURN by default), as a new handle."""
        return self._attr.get_errhandler()

    def Call_errhandler(self, errorcode):
        """Raise the MPI error ``errorcode`` as this window's error handler
        would (hixl_rma reports errors as exceptions)."""
        raise MPI.Exception(errorcode)

    @classmethod
    def Create_errhandler(cls, errhandler_fn):
        """Create an error handler for windows: unsupported (errors raise exceptions)."""
        raise UnsupportedError("Create_errhandler: errors are Python exceptions (HixlError); catch them instead")


def Get_address(memory):
    """The address of a buffer (MPI_Get_address): a target displacement in a
    dynamic window."""
    return as_buffer(memory, writable=False, name="memory").address


WIN_NULL = Win()
"""The null window (``MPI.WIN_NULL``): ``Win() == WIN_NULL``, and a freed window equals it."""
