"""NVIDIA NIXL as a peer implementation of the KV-cache demo (kv_cache_transfer.py).

``run_nixl`` moves the same paged KV cache as ``run_hixl``, layer by layer, with
NIXL's Python API over DRAM (numpy arrays), on one NIXL backend per run
(``args.backend``: NIXL's own ``UCX``, or ``HIXL_RMA``, hixl_rma's engine as a
NIXL plugin, see hixl_rma.nixl): in put mode
prefill WRITEs each layer's blocks to decode's cache slots in one transfer
request that carries the layer's notification; in get mode prefill fills its
registered cache layer, notifies decode, and decode READs the layer in one
request. Descriptor lists are prepared once before the timed part, one
transfer request is made per layer inside it.

``available(comm=None, backend="UCX")`` says whether NIXL with that backend
can be used here, ``(True, "")`` or ``(False, reason)``; given a
communicator, every rank gets the same answer.

Install, beside libucx-cu12:
    pip install --no-deps nixl-cu12 nixl
nixl-cu12 carries NIXL, its plugins and its own UCX; --no-deps because it
declares torch, which DRAM transfers do not use. ``nixl`` is the small meta
package behind ``import nixl``; without it this module loads ``nixl_cu12``
itself.

Use, from the demo beside run_hixl (every rank of the 2-rank communicator):
    import kv_nixl
    ok, why = kv_nixl.available(comm, "HIXL_RMA")  # collective: the same answer on each rank
    if ok:  # args.backend == "HIXL_RMA"
        arrivals, ok, cpu = kv_nixl.run_nixl(args, lay, comm, peer, prefill, sums)
then, e.g., mpiexec -n 2 python examples/kv_cache_transfer.py --preset seed
"""
import ctypes
import glob
import logging
import os
import sys
import time

import numpy as np

_api = None       # NIXL's _api module once imported
BACKENDS = ("UCX", "HIXL_RMA")  # NIXL's own, then hixl_rma's plugin
_probed = {}      # this process's (ok, reason) per backend
_runs = 0         # agents made by this process: each run gets a fresh name
_clash = None     # why NIXL's UCX cannot be its own here ("" when it can), once looked at

_INSTALL = "pip install --no-deps nixl-cu12 nixl beside libucx-cu12"
_HELLO = b"hello"  # the start-up handshake's notification; layers are sent as their number
_PATIENCE_S = 120.0  # a single wait longer than this means the peer is gone


def _own_ucx(api):
    """Keep NIXL's UCX apart from another UCX in this process; returns why it
    cannot be, else None. Must run before the first agent loads NIXL's UCX
    plugin; choices already made in the environment are kept.

    The UCX inside the NIXL wheel differs from libucx-cu12's (or MPI's) only
    by its file names, not its symbols. Once another UCX is in the global
    symbol scope (hixl_rma promotes the one it uses there), NIXL's plugin,
    loaded without RTLD_DEEPBIND, binds its ucp_* calls to that one: a
    version mismatch under which agent creation allocates without bound
    before it fails. NIXL_UCX_DEEPBIND=1 makes NIXL load the plugin with
    RTLD_DEEPBIND."""
    try:
        foreign = hasattr(ctypes.CDLL(None), "ucp_init_version")
    except OSError:
        return None
    if not foreign:
        return None
    choice = os.environ.get("NIXL_UCX_DEEPBIND")
    if choice is None:
        os.environ["NIXL_UCX_DEEPBIND"] = "1"
    elif choice.strip().lower() in ("0", "false", "no", "off", "disable", "disabled"):
        return ("another UCX is loaded globally in this process and NIXL_UCX_DEEPBIND is off, "
                "so NIXL's UCX plugin would bind to it")
    # Under RTLD_DEEPBIND the wheel's libucs reads libc's own `environ`. An
    # executable with a copy relocation of `environ` (a Python linked with a
    # static libpython) leaves that one empty, and UCS's walk over the
    # environment for unused UCX_* variables then crashes; it can be turned off.
    try:
        moved = (ctypes.addressof(ctypes.c_void_p.in_dll(ctypes.CDLL(None), "environ"))
                 != ctypes.addressof(ctypes.c_void_p.in_dll(ctypes.CDLL("libc.so.6"), "environ")))
    except (OSError, ValueError):
        moved = False
    if moved:
        os.environ.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")
    # UCX loads its transports (cma, ib) as modules with plain dlopen, so
    # they would register with the other UCX and NIXL's would be left with
    # TCP alone, even between processes on one host. Loaded first here with
    # RTLD_DEEPBIND, they register with the wheel's UCX, which then finds
    # them already loaded.
    package = api.__name__.rpartition(".")[0]  # nixl_cu12 or nixl_cu13, also behind `nixl`
    root = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules[package].__file__)))
    for path in sorted(glob.glob(os.path.join(root, package + ".libs", "ucx", "libuct_*.so*"))):
        try:
            ctypes.CDLL(path, mode=os.RTLD_LOCAL | getattr(os, "RTLD_DEEPBIND", 0))
        except OSError:
            pass  # its driver library is absent (CUDA, EFA): UCX would skip it as well
    return None


_plugin_why = None  # why HIXL_RMA's plugin folder could not be set up ("" when it was)


def _prepare_plugins():
    """Point NIXL at a plugin folder holding both its UCX plugin and
    HIXL_RMA's, before the first agent (NIXL reads NIXL_PLUGIN_DIR then, once);
    without hixl_rma's plugin, NIXL keeps its own folder and only UCX runs."""
    global _plugin_why
    if _plugin_why is None:
        try:
            import hixl_rma.nixl
            hixl_rma.nixl.prepare()
            _plugin_why = ""
        except Exception as e:
            _plugin_why = _line(e) or type(e).__name__
    return _plugin_why


def _import():
    """NIXL's _api module: the ``nixl`` meta package when installed (it picks
    the CUDA flavour), else a flavoured wheel itself, which is all the meta
    package would load."""
    global _api
    if _api is None:
        _prepare_plugins()
        broken = None
        for name in ("nixl._api", "nixl_cu12._api", "nixl_cu13._api"):
            try:
                module = __import__(name, fromlist=["nixl_agent"])
                break
            except ModuleNotFoundError:
                pass
            except ImportError as e:  # installed, but it does not load
                broken = broken or f"{name}: {e}"
        else:
            raise ImportError(broken or "")
        # NIXL logs at INFO to stdout, which would interleave with the
        # demo's table; its own variable still wins when set.
        if not os.environ.get("NIXL_LOG_LEVEL"):
            logging.getLogger("nixl").setLevel(logging.WARNING)
        _api = module
    return _api


def _agent(name, backend="UCX"):
    """An agent with one backend (NIXL's UCX or HIXL_RMA), and without NIXL's
    progress thread: the Python API starts that thread with no delay between
    its polls, so it keeps a core busy for the agent's whole life. Progress is
    made instead by this process's own polls (check_xfer_state,
    get_new_notifs); HIXL_RMA's engine has its own progress thread."""
    global _clash
    if backend not in BACKENDS:
        raise ValueError(f"NIXL backend {backend!r}: one of {', '.join(BACKENDS)}")
    api = _import()
    if _clash is None:
        _clash = _own_ucx(api) or ""
    if _clash:
        raise RuntimeError(_clash)
    if backend == "HIXL_RMA":
        if _plugin_why:
            raise RuntimeError(f"hixl_rma's NIXL plugin folder: {_plugin_why}")
        import hixl_rma.nixl  # checks that the backend is there, and why not
        return hixl_rma.nixl.agent(name, backends=("HIXL_RMA",), enable_prog_thread=False)
    agent = api.nixl_agent(name, api.nixl_agent_config(enable_prog_thread=False, backends=["UCX"]))
    if "UCX" not in agent.backends:
        # NIXL only warns when a configured backend's plugin is missing.
        raise RuntimeError(f"no UCX plugin among NIXL's plugins {agent.get_plugin_list()}")
    return agent


def _probe(backend):
    if backend not in _probed:
        try:
            _import()
        except Exception as e:
            why = _line(e)
            _probed[backend] = (False, f"NIXL not installed ({_INSTALL})" if not why
                                else f"NIXL does not load: {why}")
        else:
            try:
                _agent(f"kv-probe-{backend}-{os.getpid()}", backend)  # dropped at once: its creation is the test
                _probed[backend] = (True, "")
            except Exception as e:
                _probed[backend] = (False, f"NIXL agent with {backend} backend failed: "
                                           f"{_line(e) or type(e).__name__}")
    return _probed[backend]


def _line(e):
    text = " ".join(str(e).split())
    return text if len(text) <= 200 else text[:197] + "..."


def available(comm=None, backend="UCX"):
    """(True, "") when NIXL with `backend` works here, else (False, reason),
    never raising. With ``comm`` the answer is agreed over all its ranks (it
    is collective then): False on every rank if any rank lacks it, with the
    first such rank's reason."""
    ok, reason = _probe(backend)
    if comm is None:
        return ok, reason
    every = comm.allgather((ok, reason))
    for rank, (ok_r, reason_r) in enumerate(every):
        if not ok_r:
            return False, reason_r if rank == comm.Get_rank() else f"rank {rank}: {reason_r}"
    return True, ""


def _helpers(lay):
    """compute, checksum, verify and Clock from the module that defined the
    caller's Layout: that is ``__main__`` when the demo runs as a script and
    ``kv_cache_transfer`` when it is imported, so no second copy of the demo
    is imported and there is no import cycle at load time."""
    demo = sys.modules.get(type(lay).__module__)
    if demo is None or not all(hasattr(demo, n) for n in ("compute", "checksum", "verify", "Clock")):
        import kv_cache_transfer as demo
    return demo.compute, demo.checksum, demo.verify, demo.Clock


def _backoff(idle):
    """Waiting means polling NIXL (it has no blocking wait), but two ranks
    share the cores: spin briefly, then yield, then nap in short steps; the
    cap bounds what a nap adds to a wait's latency."""
    if idle < 64:
        return
    if idle < 1024:
        os.sched_yield()
        return
    time.sleep(min(1e-4, (idle - 1023) * 2e-5))


def _wait(ready, what):
    idle, deadline = 0, time.monotonic() + _PATIENCE_S
    while not ready():
        idle += 1
        _backoff(idle)
        if idle % 1024 == 0 and time.monotonic() > deadline:
            raise TimeoutError(f"NIXL: no {what} within {_PATIENCE_S:.0f} s")


class _Inbox:
    """Notifications from the peer, kept across polls: any poll may return
    several, and polling for progress must not lose them."""

    def __init__(self, agent):
        self.agent, self.layers, self.hello = agent, set(), False

    def poll(self):
        for msgs in self.agent.get_new_notifs().values():
            for m in msgs:
                if m == _HELLO:
                    self.hello = True
                else:
                    self.layers.add(int(m))


def _barrier(comm, inbox):
    """A barrier that keeps polling NIXL: without a progress thread, a rank
    blocked in MPI would stall what its peer still needs from it (wire-up
    replies, a notification still queued)."""
    req = comm.Ibarrier()
    _wait(lambda: inbox.poll() or req.Test(), "barrier")


def _descs(base, count, nbytes):
    """count blocks of nbytes from address base as NIXL's Nx3 (address, length, device) list."""
    d = np.zeros((count, 3), np.uint64)
    d[:, 0] = base + np.arange(count, dtype=np.uint64) * np.uint64(nbytes)
    d[:, 1] = nbytes
    return d


def _finish(agent, handle):
    state = agent.check_xfer_state(handle)
    if state == "ERR":
        raise RuntimeError("NIXL transfer failed")
    return state == "DONE"


def run_nixl(args, lay, comm, peer, prefill, sums):
    """One transfer over NIXL (backend ``args.backend``, DRAM); returns (arrivals, ok, cpu)
    like run_hixl: decode's arrival time of each layer since t0, whether every
    checksum and the full comparison passed, this side's CPU share of the timed part."""
    global _runs
    compute, checksum, verify, Clock = _helpers(lay)
    nb, n = lay.block_bytes, lay.per_layer
    get = args.mode == "get"
    _runs += 1
    backend = getattr(args, "backend", "UCX")
    agent = _agent(f"kv-{backend}-{'prefill' if prefill else 'decode'}-{comm.Get_rank()}-{os.getpid()}-{_runs}",
                   backend)
    inbox = _Inbox(agent)

    # Every buffer is written once here: a server's cache is resident, so no
    # page faults are timed.
    if prefill:
        kv = lay.produce()
        # get: the exposed cache decode reads, computed in place (as in run_hixl)
        src = kv.copy() if get else None
        local, exposed = (None, src) if get else (kv, None)
    else:
        cache = None if get else np.full((lay.slots, nb), 0, np.uint8)
        pulled = np.ones((lay.layers, n, nb), np.uint8) if get else None
        local, exposed = pulled, cache
    regs = [agent.register_memory([(a.ctypes.data, a.nbytes, 0, "")], "DRAM")
            for a in (local, exposed) if a is not None]

    # Metadata (connection info and registered memory) after registration, and
    # the address of the exposed cache, through MPI.
    mine = (agent.get_agent_metadata(), exposed.ctypes.data if exposed is not None else None)
    theirs, their_base = comm.sendrecv(mine, dest=peer, source=peer)
    remote = agent.add_remote_agent(theirs)

    # The initiator (prefill in put mode, decode in get mode) prepares both
    # sides once; per layer only indices into them are chosen.
    initiator = prefill != get
    if initiator:
        mine_d = agent.prep_xfer_dlist("NIXL_INIT_AGENT", _descs(local.ctypes.data, lay.slots, nb), "DRAM")
        theirs_d = agent.prep_xfer_dlist(remote, _descs(their_base, lay.slots, nb), "DRAM")
        own = [np.arange(i * n, (i + 1) * n, dtype=np.int32) for i in range(lay.layers)]
        # The remote side: decode's cache slots (put), prefill's own layout (get).
        slots = own if get else [lay.table[i].astype(np.int32) for i in range(lay.layers)]
    # What a server does at start-up: the endpoint to the peer, and one
    # notification each way, so that the lanes notifications travel on are
    # wired up (that takes both sides' progress). No data moves before the
    # timed part.
    agent.make_connection(remote)
    agent.send_notif(remote, _HELLO)
    _wait(lambda: inbox.poll() or inbox.hello, "handshake from the peer")
    _barrier(comm, inbox)

    clock = Clock()
    t0 = clock.wall
    arrivals, ok, pending = [], True, []
    for i in range(lay.layers):
        if prefill:
            compute(args.compute_ms)
        if prefill and not get:
            h = agent.make_prepped_xfer("WRITE", mine_d, own[i], theirs_d, slots[i], notif_msg=b"%d" % i)
            if agent.transfer(h) == "ERR":
                raise RuntimeError(f"NIXL WRITE of layer {i} failed to post")
            pending.append(h)
            # One pass over what is in flight: it makes progress, and frees
            # the handles that finished.
            still = []
            for p in pending:
                if _finish(agent, p):
                    p.release()
                else:
                    still.append(p)
            pending = still
        elif prefill:
            agent.send_notif(remote, b"%d" % i)  # the layer is computed into the exposed cache
            inbox.poll()  # progress: a notification may wait in the queue for it
        else:
            _wait(lambda i=i: inbox.poll() or i in inbox.layers, f"notification of layer {i}")
            if not get:
                arrivals.append(time.monotonic() - t0)
                ok &= checksum(cache, lay.table[i]) == sums[i]
            else:
                h = agent.make_prepped_xfer("READ", mine_d, own[i], theirs_d, slots[i])
                if agent.transfer(h) == "ERR":
                    raise RuntimeError(f"NIXL READ of layer {i} failed to post")
                _wait(lambda h=h: _finish(agent, h), f"end of the READ of layer {i}")
                h.release()
                arrivals.append(time.monotonic() - t0)
                ok &= checksum(pulled[i]) == sums[i]
    if prefill:
        # Put: prefill's part is done once its last write completed.
        for p in pending:
            _wait(lambda p=p: _finish(agent, p), "end of a WRITE")
            p.release()
    cpu = clock.share()
    _barrier(comm, inbox)
    if not prefill:
        ok &= verify(lay, (lambda i: cache[lay.table[i]]) if not get else (lambda i: pulled[i]))

    if initiator:
        mine_d.release()
        theirs_d.release()
    agent.remove_remote_agent(remote)
    _barrier(comm, inbox)  # neither side deregisters what the other may still touch
    for r in regs:
        agent.deregister_memory(r)
    return arrivals, ok, cpu
