"""The HIXL-style face: the names of the HIXL examples.

``RegisterMemory`` is a collective window whose epoch is always open, so
programs written after HIXL's tutorials (Init, GetWorldCommunicator,
RegisterMemory, Put, Get, Fence) run as written. ``target_offset`` is in
bytes. Access modes are enforced at the origin from the target's declared
mode.
"""
from . import _engine
from .ground import constants as C
from .ground import priority as _priority
from .ground.errors import ParamError
from .runtime import process as _rt
from .runtime.comm import Communicator, as_communicator
from .win import Win
from .window.request import Request

_handles = {}  # id(MPI comm) -> list of live MemoryHandles
_OPS = {"WRITE": _engine.WRITE, "READ": _engine.READ}


class MemoryHandle:
    """A registered region of every rank of a communicator (wraps a Win)."""

    def __init__(self, win, comm, access, mem_type):
        self.win = win
        self.comm = comm
        self.access = access
        self.mem_type = mem_type
        self.requests = []  # TransferAsync requests not yet waited for (Fence, DeregisterMemory wait them)

    @property
    def registered(self):
        return not self.win._core.freed

    def __repr__(self):
        return f"<hixl_rma.MemoryHandle {self.win!r}>"


def GetWorldCommunicator():
    """The communicator of all ranks (COMM_WORLD)."""
    return Communicator(_rt.runtime().world)


def GetRank(comm=None):
    """This rank in ``comm`` (world by default)."""
    return as_communicator(comm).rank


def GetSize(comm=None):
    """Number of ranks in ``comm`` (world by default)."""
    return as_communicator(comm).size


def Connect(ranks=None, comm=None):
    """Connect this rank's engine to those of ``ranks`` of ``comm`` (world
    by default; every other rank when ``ranks`` is None), as a server does
    once at start-up: the handshake, the UCX endpoint and the peer's memory
    table -- with the regions of every window made so far, mapped here when
    they can be -- are paid now instead of by the first transfer. Not
    collective; a rank connected already has its table fetched again (the
    windows made since); each call bounded by the timeout."""
    st = _rt.runtime()
    comm = as_communicator(comm)
    if ranks is None:
        ranks = [r for r in range(comm.size) if r != comm.rank]
    for r in ranks:
        world = comm.world_ranks[comm.check_rank(r, "Connect")]
        if world == st.rank:
            continue
        fresh = world not in st.connected
        if fresh:
            st.connect(world)
        if _engine.has("refresh_peer") and (not fresh or st.same_node([world])):
            # Windows made since the connection; and, on this node, the
            # mapped windows' page tables populated now, not by the first
            # transfers (a connect leaves that to a helper thread).
            st.engine.refresh(st.addresses[world], st.timeout_ms)


def RegisterMemory(buf, mem_type=C.MEMORY_HOST, access=C.ACCESS_READ_WRITE, comm=None):
    """Register ``buf`` on every rank of ``comm`` (collective); accessible at once."""
    comm = as_communicator(comm)
    if mem_type not in (C.MEMORY_HOST, C.MEMORY_DEVICE):
        raise ParamError(f"RegisterMemory: mem_type must be MEMORY_HOST or MEMORY_DEVICE, got {mem_type!r}")
    if access not in (C.ACCESS_READ_WRITE, C.ACCESS_READ_ONLY, C.ACCESS_WRITE_ONLY):
        raise ParamError(f"RegisterMemory: access must be ACCESS_READ_WRITE, ACCESS_READ_ONLY or "
                         f"ACCESS_WRITE_ONLY, got {access!r}")
    engine_type = _engine.MEM_DEVICE if mem_type == C.MEMORY_DEVICE else _engine.MEM_HOST
    win = Win._new(comm, buf, C.WIN_FLAVOR_CREATE, 1, None, access=access, mem_type=engine_type)
    win._core.set_always_open(True)
    handle = MemoryHandle(win, comm, access, mem_type)
    _handles.setdefault(id(comm.comm), []).append(handle)
    return handle


def DeregisterMemory(handle):
    """Complete outstanding operations and release the region (collective)."""
    _check_handle(handle, "DeregisterMemory")
    _wait_requests(handle)
    handle.win._core.set_always_open(False)
    handle.win.Free()
    lst = _handles.get(id(handle.comm.comm), [])
    if handle in lst:
        lst.remove(handle)


def _check_handle(handle, what):
    if not isinstance(handle, MemoryHandle):
        raise ParamError(f"{what}: expected a MemoryHandle from RegisterMemory, got {type(handle).__name__}")
    if not handle.registered:
        raise ParamError(f"{what}: the memory handle has been deregistered")


def Put(buf, target_rank, target_offset, handle, comm=None):
    """Write ``buf`` at byte ``target_offset`` of ``target_rank``'s region."""
    _check_handle(handle, "Put")
    handle.win.Put(buf, target_rank, _offset(target_offset, "Put"))


def Get(buf, target_rank, target_offset, handle, comm=None):
    """Read into ``buf`` from byte ``target_offset`` of ``target_rank``'s region."""
    _check_handle(handle, "Get")
    handle.win.Get(buf, target_rank, _offset(target_offset, "Get"))


def TransferAsync(operation, buf, target_rank, target_offset, handle, qos="normal", comm=None):
    """Start a ``"WRITE"`` (Put) or ``"READ"`` (Get) of ``buf`` at byte
    ``target_offset`` of ``target_rank``'s region, queued in the engine at
    priority ``qos`` (``"high"``, ``"normal"``, ``"bulk"``: HIXL's qos_level
    0, 1, 2); returns a Request whose Wait gives remote completion of this
    transfer (it waits for no less urgent work posted beside it). Fence and
    DeregisterMemory complete what was not waited for."""
    level = _priority.level(qos, "TransferAsync qos")
    if operation not in _OPS:
        raise ParamError(f"TransferAsync: operation must be 'WRITE' or 'READ', got {operation!r}")
    _check_handle(handle, "TransferAsync")
    op, what = _OPS[operation], "TransferAsync"
    w = handle.win._core
    if level == _priority.NAMES["normal"] or not _engine.has("priority") or handle.mem_type == C.MEMORY_DEVICE:
        req = w.request_transfer(op, buf, target_rank, _offset(target_offset, what), what)
    else:
        t = w.target(target_rank, what)
        if t is None:
            return Request.completed()
        ob = w.origin(buf, op == _engine.READ, t, what)
        w.check_mode(t, op, what)
        descs = w.descs(t, ob, _offset(target_offset, what), what, op)
        if descs is None:
            return Request.completed()
        _engine.post_at(w.engine, t.addr, op, descs, level)
        timeout = w.rt.timeout_ms
        req = Request(lambda: _engine.flush_at(w.engine, t.addr, level, timeout), keep=ob.obj)
    if len(handle.requests) >= 64:
        handle.requests = [r for r in handle.requests if not r._done]
    handle.requests.append(req)
    return req


def _wait_requests(handle):
    reqs, handle.requests = handle.requests, []
    for req in reqs:
        req.Wait()


def _offset(target_offset, what):
    # The window's disp_unit is 1, so a displacement is a byte offset.
    if isinstance(target_offset, bool) or not isinstance(target_offset, int):
        raise ParamError(f"{what}: target_offset must be an int number of bytes, got {target_offset!r}")
    return target_offset


def Fence(comm=None):
    """Complete every outstanding operation of this rank on every handle of comm, then barrier."""
    comm = as_communicator(comm)
    for h in list(_handles.get(id(comm.comm), [])):
        if h.registered:
            _wait_requests(h)
            h.win._complete_all()
    comm.Barrier()  # the program's barrier (a tool may observe it: hooks.program_barrier)


def Init(domain=None):
    """Initialize MPI and this rank's engine (idempotent); ``domain``: the
    tenant domain (default ``HIXL_RMA_DOMAIN``): engines of different
    domains never complete a handshake."""
    _rt.Init(domain)


def Finalize():
    """Deregister what is left and stop the engine (collective over the world)."""
    _handles.clear()
    _rt.Finalize()

