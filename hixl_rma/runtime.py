"""The process-wide runtime: MPI bootstrap, this rank's engine, the job
token, the world's engine addresses, lazy connections and notify routing.

``Init()`` is idempotent and implied by first use; ``Finalize()`` tears
everything down, and an atexit hook does it (locally, without collectives)
if the user forgets.
"""
import atexit
import collections
import os
import secrets
import socket
import threading
import time

import numpy as np

from . import _engine
from . import config
from . import netif
from .errors import (ALREADY_CONNECTED, HixlError, HixlTimeoutError, NotConnectedError, PeerFailure,
                     ResourceError)

_lock = threading.RLock()
_state = None


class _Runtime:
    """Everything Init() sets up, torn down by Finalize()."""

    def __init__(self):
        from mpi4py import MPI

        self.MPI = MPI
        self.world = MPI.COMM_WORLD
        self.rank = self.world.Get_rank()
        self.size = self.world.Get_size()
        self.timeout_ms = _engine.default_timeout_ms()
        # Init is collective over COMM_WORLD; a rank that never joins must
        # turn into an error here, not a hang.
        token = np.frombuffer(secrets.token_hex(16).encode(), np.uint8).copy()
        _wait(self.world.Ibcast(token, root=0), self.timeout_ms, "Init (job token)")
        token = token.tobytes().decode()
        # Where every rank runs decides what this one advertises (netif.py).
        mine = _record(netif.node_key())
        every = np.zeros((self.size, _RECORD_BYTES), np.uint8)
        _wait(self.world.Iallgather(mine, every), self.timeout_ms, "Init (hosts)")
        nodes = [_unrecord(row) for row in every]
        self.node = [nodes.index(n) for n in nodes]  # world rank -> index of its host
        listen, advertised, ifnames = netif.choose(config.host(), config.ifname(),
                                                   len(set(nodes)) == 1)
        devices = netif.ucx_net_devices(ifnames)
        if devices and "UCX_NET_DEVICES" not in os.environ:
            os.environ["UCX_NET_DEVICES"] = devices  # this engine's UCX context only: MPI's is made
        self.engine = _engine.Engine(
            f"{listen}:{0 if _engine.HAS_EXTENSIONS else _free_port(listen)}",
            {_engine.OPTION_JOB_TOKEN: token, _engine.OPTION_TIMEOUT_MS: str(self.timeout_ms)})
        port = self.engine.address.rsplit(":", 1)[1]
        mine = _record(socket.gethostname() + " " + ",".join(f"{_bracket(a)}:{port}" for a in advertised))
        _wait(self.world.Iallgather(mine, every), self.timeout_ms, "Init (engine addresses)")
        records = [_unrecord(row).split(" ", 1) for row in every]
        self.hostnames = [r[0] for r in records]
        self.candidates = [r[1].split(",") for r in records]  # world rank -> its engine's addresses
        self.addresses = [c[0] for c in self.candidates]      # the one connected to (first until then)
        _engine.set_default_timeout(self.timeout_ms)
        self.connected = set()
        self.unreachable = {}  # world rank -> why it is known dead (refused a connection, lost its)
        self.notify_queues = collections.defaultdict(collections.deque)
        self.next_window_id = 0
        self.windows = set()  # live windows' cores (core.WindowCore; teardown removes them)

    def connect(self, world_rank):
        """The engine address of world_rank, connecting on first use to the
        first of its advertised addresses that reaches it."""
        if world_rank in self.connected:
            return self.addresses[world_rank]
        tried = []
        candidates = self.candidates[world_rank]
        for i, addr in enumerate(candidates):
            # An address on a network this host is not on may not even refuse:
            # all but the last get a share of the timeout.
            last = i == len(candidates) - 1
            try:
                self.engine.connect(addr, self.timeout_ms if last else min(self.timeout_ms, _TRY_MS))
            except NotConnectedError as exc:
                tried.append(f"{addr}: {exc}")
                continue
            except HixlError as exc:
                if exc.status != ALREADY_CONNECTED:
                    if last:
                        raise  # a timeout or a refusal by the peer: the caller's to report
                    tried.append(f"{addr}: {exc}")
                    continue
            self.addresses[world_rank] = addr
            self.connected.add(world_rank)
            return addr
        same = self.node[world_rank] == self.node[self.rank]
        why = ("it is on this host: the process died?" if same else
               f"on host {self.hostnames[world_rank]}, from {self.hostnames[self.rank]}: set HIXL_RMA_IFNAME "
               f"to the interface that joins the hosts (or HIXL_RMA_HOST on each), or the process died")
        # Its engine listened before its addresses were published: a refused
        # connection means the process is gone or the network does not join us.
        self.unreachable[world_rank] = "; ".join(tried)
        raise PeerFailure(f"world rank {world_rank} cannot be reached ({why}); tried " + "; ".join(tried))

    def same_node(self, world_ranks):
        """Every one of these world ranks runs on this rank's host."""
        return all(self.node[w] == self.node[self.rank] for w in world_ranks)

    def poll_notifies(self):
        """Move engine notifications into their (window, kind) queues."""
        for name, msg in self.engine.get_notifies():
            key, _, src = name.rpartition("/")
            try:
                self.notify_queues[key].append((int(src), msg))
            except ValueError:
                continue  # not ours: ignore a malformed name

    def block_for_notifies(self, seconds):
        """poll()'s ``block`` for waits on notifications: sleep until the
        engine has one (or ``seconds`` passed); False if it cannot."""
        return self.engine.wait_notifies(max(1, int(seconds * 1000.0 + 0.5)))

    def check_peers(self, world_ranks, what):
        """Raise PeerFailure if the engine already knows that one of these
        (connected) world ranks died; a live peer costs one empty flush."""
        for w in world_ranks:
            known = w in self.unreachable
            if self.is_dead(w):
                how = "cannot be reached" if known else "failed"
                raise PeerFailure(f"{what}: world rank {w} {how} ({self.unreachable[w]})")

    def is_dead(self, world_rank):
        """``world_rank`` is known dead: its engine refused a connection, or
        (connected) its connection is lost, which an empty flush tells."""
        if world_rank in self.unreachable:
            return True
        if world_rank == self.rank or world_rank not in self.connected:
            return False
        try:
            self.engine.flush(self.addresses[world_rank], 100)
        except PeerFailure as exc:
            self.unreachable[world_rank] = str(exc)
            return True
        except HixlError:
            pass  # busy or slow is not dead: the caller's timeout decides
        return False

    def finalize(self):
        self.engine.finalize()


_RECORD_BYTES = 1024  # a host name and its addresses as "ip:port,..." fit
_TRY_MS = 3000        # connect timeout of an advertised address but the last


def _record(text):
    raw = text.encode()
    if len(raw) >= _RECORD_BYTES:
        raise ResourceError(f"Init: {len(raw)} bytes of host name and addresses do not fit in {_RECORD_BYTES} "
                            f"(set HIXL_RMA_IFNAME or HIXL_RMA_HOST to advertise fewer)")
    out = np.zeros(_RECORD_BYTES, np.uint8)
    out[:len(raw)] = np.frombuffer(raw, np.uint8)
    return out


def _unrecord(row):
    return bytes(row).rstrip(b"\0").decode()


def _bracket(addr):
    return f"[{addr}]" if ":" in addr else addr


def _wait(req, timeout_ms, what):
    """Complete Init's non-blocking collective within timeout_ms."""
    wait_request(req, timeout_ms, lambda: (
        f"{what}: not every rank of COMM_WORLD joined within {timeout_ms} ms. Init() is "
        f"collective over COMM_WORLD: call hixl_rma.Init() on every rank (or create the "
        f"first window on a communicator of all ranks)"))


def poll(ready, timeout_s, timed_out, check=None, block=None):
    """The one wait loop of the Python layer: call ``ready()`` until it
    returns something true (which is returned), backing off between calls
    (``sleep_backoff``: no core is spun for long). Past ``timeout_s`` raise
    ``timed_out()`` (an exception). ``check()``, called every 0.1 s, may
    raise to give up early (a peer known to be dead). ``block(s)``, when
    given, replaces the backoff after a short spin: it sleeps up to ``s``
    seconds until ``ready()`` may have changed (an engine event), or returns
    False where it cannot (the loop then backs off)."""
    now = time.monotonic()
    deadline = now + timeout_s
    next_check = now + 0.1
    idle = 0
    while True:
        got = ready()
        if got:
            return got
        idle += 1
        blocking = block is not None and idle > _BLOCK_AFTER
        if blocking or idle % 64 == 0 or idle > 1024:
            now = time.monotonic()
            if now > deadline:
                raise timed_out()
            if now > next_check:
                next_check = now + 0.1
                interruption()
                if check is not None:
                    check()
        if not blocking:
            sleep_backoff(idle)
        elif not block(min(0.1, deadline - now, next_check - now + 1e-3)):
            block = None


_interrupt = None  # set_interrupt's hook


def set_interrupt(hook):
    """``hook()`` is called about every 0.1 s by every blocking wait of the
    Python layer (and Fence's C wait) and may raise to end it: the pytest
    plugin's way to stop a rank waiting for one that failed its test. None
    removes it."""
    global _interrupt
    _interrupt = hook


def interruption():
    """Call the interrupt hook, if any (it raises to end the wait)."""
    if _interrupt is not None:
        _interrupt()


def wait_request(req, timeout_ms, message, check=None):
    """Complete a non-blocking MPI request without spinning a core; on timeout
    raise HixlTimeoutError(message()). ``check()``, called every 0.1 s while
    waiting, may raise to give up early (a peer known to be dead)."""
    def check_request():
        try:
            check()
        except HixlError:
            if not req.Test():  # not completed after all (the peer left after it did)
                raise
    poll(req.Test, timeout_ms / 1000.0, lambda: HixlTimeoutError(message()),
         None if check is None else check_request)


def _free_port(host):
    """A port to listen on, for engines that cannot pick one themselves
    (vendor HIXL: port 0 means "do not listen" there)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def Init():
    """Initialize MPI (through mpi4py) and this rank's engine; idempotent."""
    global _state
    with _lock:
        if _state is None:
            _state = _Runtime()
        return _state


def runtime():
    """The runtime, initializing it on first use."""
    return _state if _state is not None else Init()


def Is_initialized():
    """True between Init() and Finalize()."""
    return _state is not None


def Finalize():
    """Free what is left and stop the engine (collective over COMM_WORLD)."""
    _shutdown(collective=True)


@atexit.register
def _finalize_at_exit():
    # No collectives here: peers may already be gone.
    _shutdown(collective=False)


def _shutdown(collective):
    global _state
    with _lock:
        st = _state
        if st is None:
            return
        for core in list(st.windows):
            core.teardown_local()
        try:
            if collective and not st.MPI.Is_finalized():
                # A peer known dead: no MPI collective (see WindowCore.free).
                st.check_peers(range(st.size), "Finalize")
                barrier(st.world, st.timeout_ms, range(st.size))
        finally:
            # A dead or hung peer must not keep this rank's engine alive:
            # tear it down, then let the barrier's error propagate.
            st.finalize()
            _state = None


_SPIN = 64  # polls before a wait loop backs off
# Polls before a wait that can block does: each poll progresses the UCX
# worker, which costs more than the thread hand-off a block adds.
_BLOCK_AFTER = 4


def sleep_backoff(idle):
    """Back off in a wait loop: spin briefly (a sleep costs at least the
    kernel's 50 us timer slack), then yield the core, then sleep in growing
    steps up to 1 ms so a long wait costs almost no CPU."""
    if idle < _SPIN:
        return
    if idle < 1024:
        os.sched_yield()
        return
    time.sleep(min(1e-3, (idle - 1023) * 2e-5))


def barrier(comm, timeout_ms, world_ranks=None):
    """A barrier that neither spins a core nor waits forever. With the world
    ranks of ``comm``, a member whose engine is known dead ends the wait
    early with PeerFailure instead of HixlTimeoutError."""
    if comm.Get_size() > 1:
        collective(comm, comm.Ibarrier(), "barrier", timeout_ms, world_ranks)


def allreduce_and(comm, flag, timeout_ms, world_ranks=None):
    """Logical AND of ``flag`` over comm (a barrier too), with barrier()'s
    guarantees."""
    if comm.Get_size() == 1:
        return bool(flag)
    from mpi4py import MPI
    out = np.zeros(1, np.int32)
    req = comm.Iallreduce(np.array([1 if flag else 0], np.int32), out, op=MPI.LAND)
    collective(comm, req, "allreduce", timeout_ms, world_ranks)
    return bool(out[0])


def collective(comm, req, what, timeout_ms, world_ranks=None):
    """Complete the non-blocking collective ``req`` on comm within
    timeout_ms (HixlTimeoutError), ending early with PeerFailure when a
    member's engine is known dead."""
    check = None
    if world_ranks is not None and _state is not None:
        st, ranks = _state, list(world_ranks)
        check = lambda: st.check_peers(ranks, what)  # noqa: E731
    wait_request(req, timeout_ms, lambda: (
        f"{what} on a communicator of {comm.Get_size()} ranks did not complete within "
        f"{timeout_ms} ms (a peer is dead or not calling the collective)"), check)


def wait_notifies(key, sources, timeout_ms, what):
    """Take one notification from each rank in ``sources`` (a multiset) on key."""
    st = runtime()
    need = collections.Counter(sources)
    got = []
    q = st.notify_queues[key]

    def take():
        for _ in range(2):  # what is queued, then what the engine has
            for _ in range(len(q)):
                src, msg = q.popleft()
                if need[src] > 0:
                    need[src] -= 1
                    got.append((src, msg))
                else:
                    q.append((src, msg))
            if not +need:
                return True
            st.poll_notifies()
        return False

    poll(take, timeout_ms / 1000.0, lambda: HixlTimeoutError(
        f"{what}: no notification from world rank(s) {sorted((+need).elements())} within {timeout_ms} ms"),
         block=st.block_for_notifies)
    return got


__all__ = ["Init", "Finalize", "Is_initialized", "runtime", "barrier", "allreduce_and", "collective",
           "wait_notifies"]
