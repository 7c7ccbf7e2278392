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
import sys
import threading
import time

import numpy as np

from hixl_rma import _engine
from hixl_rma.ground import config, log
from hixl_rma.ground.errors import (
    ALREADY_CONNECTED,
    HixlError,
    HixlTimeoutError,
    NotConnectedError,
    ParamError,
    PeerFailure,
    ResourceError,
    UnsupportedError,
)

from . import hooks, netif

_lock = threading.RLock()
_state = None


_log = log.get("runtime")  # the documented logger name, hixl_rma.runtime


class _Runtime:
    """Everything Init() sets up, torn down by Finalize()."""

    def __init__(self, domain=None):
        from mpi4py import MPI

        self.MPI = MPI
        self.world = hooks.world if hooks.world is not None else MPI.COMM_WORLD
        self.rank = self.world.Get_rank()
        self.size = self.world.Get_size()
        self.timeout_ms = _engine.default_timeout_ms()
        # Init is collective over COMM_WORLD; a rank that never joins must
        # turn into an error here, not a hang.
        token = np.frombuffer(secrets.token_hex(16).encode(), np.uint8).copy()
        _wait(self.world, lambda: self.world.Ibcast(token, root=0), self.timeout_ms, "Init (job token)", token)
        token = token.tobytes().decode()
        # The runtime's own communicator: Finalize's barrier and the notices
        # of ranks that reached it, apart from whatever the program does on
        # COMM_WORLD.
        made = []
        _wait(self.world, lambda: idup(self.world, made), self.timeout_ms, "Init (communicator)", made)
        self.ctl = made[0]
        # Where every rank runs decides what this one advertises (netif.py).
        mine = _record(netif.node_key())
        every = np.zeros((self.size, _RECORD_BYTES), np.uint8)
        _wait(self.world, lambda: self.world.Iallgather(mine, every), self.timeout_ms, "Init (hosts)",
              (mine, every))
        nodes = [_unrecord(row) for row in every]
        self.node = [nodes.index(n) for n in nodes]  # world rank -> index of its host
        listen, advertised, ifnames = netif.choose(config.host(), config.ifname(),
                                                   len(set(nodes)) == 1)
        # Observers (telemetry's exporter) start before the engine: one that
        # fails (a port in use) fails Init with no engine running.
        hooks.started(self.rank, listen)
        devices = netif.ucx_net_devices(ifnames)
        if devices and "UCX_NET_DEVICES" not in os.environ:
            os.environ["UCX_NET_DEVICES"] = devices  # this engine's UCX context only: MPI's is made
        options = {_engine.OPTION_JOB_TOKEN: token, _engine.OPTION_TIMEOUT_MS: str(self.timeout_ms),
                   # proven in every handshake: a rank connecting to "rank N" gets rank N's engine, not
                   # another of the job's that answers at an address advertised for it
                   _engine.OPTION_ENGINE_ID: _engine_id(self.rank)}
        self.domain = domain
        if domain is not None:
            options[_engine.OPTION_DOMAIN] = domain
        self.engine = _engine.Engine(f"{listen}:{0 if _engine.has('listen_any') else _free_port(listen)}", options)
        port = self.engine.address.rsplit(":", 1)[1]
        # host name, pid and pid namespace (a same-host peer's process can
        # be checked for), and the engine's addresses
        mine = _record(f"{socket.gethostname()} {os.getpid()} {_pid_namespace()} "
                       + ",".join(f"{_bracket(a)}:{port}" for a in advertised))
        _wait(self.world, lambda: self.world.Iallgather(mine, every), self.timeout_ms, "Init (engine addresses)",
              (mine, every))
        records = [_unrecord(row).split(" ", 3) for row in every]
        self.hostnames = [r[0] for r in records]
        self.pids = [int(r[1]) for r in records]
        self.pid_namespaces = [r[2] for r in records]
        self.candidates = [r[3].split(",") for r in records]  # world rank -> its engine's addresses
        self.addresses = [c[0] for c in self.candidates]      # the one connected to (first until then)
        _engine.set_default_timeout(self.timeout_ms)
        self.connected = set()
        # world rank -> why it is known dead: its connection to this rank was
        # lost. A refused connection is not a death (a peer short of file
        # descriptors, or one that dropped unauthenticated connections in a
        # flood, refuses too): the next call connects again.
        self.dead = {}
        self.refused = {}  # world rank -> why its last connection attempt failed (for messages)
        # Every other rank tells this one when it reaches Finalize (or the
        # end of its program): a wait for it in a collective then ends at
        # once, naming it, instead of running into the timeout.
        self.finalizing = {}  # world rank -> when its notice was heard (time.monotonic())
        self._fin_in = np.zeros(self.size, np.int64)
        self._fin_recvs = [self.ctl.Irecv(self._fin_in[r:r + 1], source=r, tag=_FIN_TAG)
                           for r in range(self.size) if r != self.rank]
        self._fin_out = None  # this rank's notices, once sent
        self.notify_queues = collections.defaultdict(collections.deque)  # "<window key>:<kind>" -> (src, msg)
        self.next_window_id = 0
        self.windows = set()  # live windows' cores (core.WindowCore; teardown removes them)
        # Which windows a notification may still be for (see poll_notifies):
        # the keys of the live ones; per world rank r, the newest id of the
        # windows made here whose rank 0 is r; how many creations are under way.
        self.live_keys = set()
        self.newest_id = {}
        self.making = 0
        self.strays = False  # a queue of a freed window may have been made while one was under way
        _log.info("rank %d of %d on %s: engine %s, advertised %s, timeout %d ms", self.rank, self.size,
                  self.hostnames[self.rank], self.engine.address, ",".join(self.candidates[self.rank]),
                  self.timeout_ms)

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
                self.engine.connect(addr, self.timeout_ms if last else min(self.timeout_ms, _TRY_MS),
                                    expect=_engine_id(world_rank))
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
            self.refused.pop(world_rank, None)
            _log.info("rank %d connected to rank %d at %s", self.rank, world_rank, addr)
            return addr
        same = self.node[world_rank] == self.node[self.rank]
        self.hear_finalizing()
        if world_rank in self.finalizing:
            why = "it has finalized: its program ended"
        elif same:
            why = "it is on this host: the process died, or it is out of file descriptors?"
        else:
            why = (f"on host {self.hostnames[world_rank]}, from {self.hostnames[self.rank]}: set HIXL_RMA_IFNAME "
                   f"to the interface that joins the hosts (or HIXL_RMA_HOST on each), or the process died")
        # Its engine listened before its addresses were published, so this
        # is a failure of this call; the next one tries again.
        self.refused[world_rank] = "; ".join(tried)
        raise PeerFailure(f"world rank {world_rank} cannot be reached ({why}); tried " + "; ".join(tried))

    def same_node(self, world_ranks):
        """Every one of these world ranks runs on this rank's host."""
        return all(self.node[w] == self.node[self.rank] for w in world_ranks)

    def poll_notifies(self):
        """Move engine notifications into their (window, kind) queues; those
        of a window freed here are dropped."""
        for name, msg in self.engine.get_notifies():
            key, _, src = name.rpartition("/")
            try:
                src = int(src)
                if key.partition(":")[0] not in self.live_keys:
                    if self._freed(key):
                        continue  # sent before its sender's Free: no queue comes back for it
                    self.strays = self.strays or bool(self.making)
            except ValueError:
                continue  # not ours: ignore a malformed name
            self.notify_queues[key].append((src, msg))

    def _freed(self, key):
        """The window of queue ``key`` ("w<r>.<id>:<kind>", not live here) was
        freed here. A window made on another rank first, not here yet, is
        not: its notifications wait for it. Windows whose rank 0 is world
        rank r are made here in the order of r's ids, so an id at or below
        the newest one made here is a window freed (unless a creation under
        way in another thread may be of it); raises ValueError for a key
        that is not a window's."""
        r, _, seq = key.partition(":")[0].partition(".")
        if r[:1] != "w":
            raise ValueError(key)
        return not self.making and int(seq) <= self.newest_id.get(int(r[1:]), -1)

    def window_making(self, step):
        """A window's creation begins (``step`` 1) or ends (-1) here."""
        self.making += step

    def window_made(self, core):
        """A window made here: live, and its notifications queued from now on."""
        self.windows.add(core)
        self.live_keys.add(core.key)
        r, _, seq = core.key[1:].partition(".")
        self.newest_id[int(r)] = max(int(seq), self.newest_id.get(int(r), -1))

    def window_freed(self, core):
        """A window freed here: its notification queues go (and any other
        freed window's, queued while a creation was under way)."""
        self.windows.discard(core)
        if core.key not in self.live_keys:
            return  # never made, or freed already
        self.live_keys.discard(core.key)
        for kind in _NOTIFY_KINDS:
            self.notify_queues.pop(f"{core.key}:{kind}", None)
        if self.strays and not self.making:
            self.strays = False
            for key in list(self.notify_queues):
                try:
                    if key.partition(":")[0] not in self.live_keys and self._freed(key):
                        self.notify_queues.pop(key, None)
                except ValueError:
                    pass

    def block_for_notifies(self, seconds):
        """poll()'s ``block`` for waits on notifications: sleep until the
        engine has one (or ``seconds`` passed); False if it cannot."""
        return self.engine.wait_notifies(max(1, int(seconds * 1000.0 + 0.5)))

    def check_peers(self, world_ranks, what, finalizing_ok=False, settle=0.0):
        """Raise PeerFailure if one of these world ranks is known dead (its
        connection to this rank was lost) or, unless ``finalizing_ok``, has
        reached Finalize (its notice heard ``settle`` seconds ago or more:
        what it sent before may still be on its way), so that it will not
        take part in what this rank waits for; a live peer costs one engine
        query."""
        self.hear_finalizing()
        now = time.monotonic()
        for w in world_ranks:
            self.check_dead((w,), what)
            if not finalizing_ok and now - self.finalizing.get(w, now + 1) >= settle:
                raise PeerFailure(f"{what}: world rank {w} has finalized (its program ended; it waits in "
                                  f"Finalize for the other ranks) and will not take part")

    def check_dead(self, world_ranks, what):
        """Raise PeerFailure if one of these world ranks is known dead, with
        no MPI call: MPICH over tcp may not survive progress on, or a
        collective started with, a member whose connection the kernel reset."""
        for w in world_ranks:
            if self.is_dead(w):
                raise PeerFailure(f"{what}: world rank {w} failed ({self.dead[w]})")

    def is_dead(self, world_rank):
        """``world_rank`` is known dead: its established connection to this
        rank was lost, or (on this host, never connected) its process is
        gone. A connection never made, or refused, proves nothing."""
        if world_rank in self.dead:
            return True
        if world_rank == self.rank:
            return False
        if world_rank not in self.connected:
            if self._process_gone(world_rank):
                self.dead[world_rank] = f"its process (pid {self.pids[world_rank]} on this host) is gone"
                _log.warning("rank %d: world rank %d declared dead: %s", self.rank, world_rank, self.dead[world_rank])
                return True
            return False
        addr = self.addresses[world_rank]
        if _engine.has("peer_state"):
            # Asks nothing of the peer and consumes nothing (a failure the
            # next Flush is to raise stays for it).
            if not self.engine.peer_dead(addr):
                return False
        else:  # vendor HIXL: an empty flush tells
            try:
                self.engine.flush(addr, 100)
                return False
            except PeerFailure:
                pass
            except HixlError:
                return False  # busy or slow is not dead: the caller's timeout decides
        self.hear_finalizing()
        self.dead[world_rank] = (f"it has finalized (its engine {addr} closed)" if world_rank in self.finalizing
                                 else f"its connection to this rank (engine {addr}) was lost")
        _log.warning("rank %d: world rank %d declared dead: %s", self.rank, world_rank, self.dead[world_rank])
        return True

    def _process_gone(self, world_rank):
        """A rank of this host and pid namespace whose process has ended (a
        zombie has ended too; a pid reused since reads as alive, which errs
        on the safe side)."""
        if (self.node[world_rank] != self.node[self.rank] or self.pid_namespaces[self.rank] == "?"
                or self.pid_namespaces[world_rank] != self.pid_namespaces[self.rank]):
            return False
        try:
            with open(f"/proc/{self.pids[world_rank]}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[:1]
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return state in ([b"Z"], [b"X"])

    def hear_finalizing(self):
        """Take the notices of ranks that reached Finalize."""
        if self._fin_recvs:
            for i in self.MPI.Request.Testsome(self._fin_recvs) or ():
                self.finalizing[i if i < self.rank else i + 1] = time.monotonic()  # the list skips this rank

    def finalize_barrier(self, what):
        """Finalize's collective: tell every rank this one has reached it,
        then wait (serving this rank's windows all along: the engine is up
        and nothing is deregistered) until every rank has, or one is known
        dead, or the timeout passed."""
        # A peer known dead: no MPI call at all, which cannot complete and
        # which MPI may not survive (MPICH over tcp does not). One whose
        # engine refused this rank's last attempt to connect is asked once
        # more: if it refuses again it is not waited for either.
        self.check_peers(range(self.size), what, finalizing_ok=True)
        for w in sorted(self.refused):
            try:
                self.connect(w)
            except PeerFailure as exc:
                raise exc.again(f"{what}: {exc}") from None
            self.refused.pop(w, None)
        if self._fin_out is None:
            note = np.array([self.rank], np.int64)
            self._fin_out = ([self.ctl.Isend(note, dest=r, tag=_FIN_TAG)
                              for r in range(self.size) if r != self.rank], note)
        collective(self.ctl, self.ctl.Ibarrier, what, self.timeout_ms, range(self.size), finalizing_ok=True)

    def release_mpi(self):
        """After Finalize's barrier: the notices delivered, the runtime's
        communicator freed (what is still pending stays MPI's: see
        _GivenUp)."""
        sends, _ = self._fin_out or ([], None)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not (self.MPI.Request.Testall(self._fin_recvs)
                                                  and self.MPI.Request.Testall(sends)):
            time.sleep(1e-4)
        for r in self._fin_recvs:
            if r:
                r.Cancel()  # a rank that died before its notice
                _given_up.keep(self.ctl, r, self._fin_in, "Finalize (notices)")
        if all(not r for r in sends) and not any(g.key == _comm_key(self.ctl) for g in _given_up.pending):
            self.ctl.Free()

    def close_connections(self, what):
        """After Finalize's barrier, before the engine stops: close this
        rank's connections (each endpoint flushed, the peer told), then wait
        until every rank has. Otherwise a rank's engine may go while a peer
        still flushes its endpoint to it: over tcp that flush fails and UCX
        prints an error, though every operation had completed. A rank lost
        in this wait costs nothing of the program's: it is logged, not
        raised. All of it within one timeout; a peer's flush within what the
        engine's own teardown allows it (_CLOSE_MS)."""
        deadline = time.monotonic() + self.timeout_ms / 1000

        def left_ms():
            return max(1, int((deadline - time.monotonic()) * 1000))
        for w in sorted(self.connected):
            try:
                self.engine.disconnect(self.addresses[w], min(_CLOSE_MS, left_ms()))
            except HixlError as exc:  # the engine closes what is left when it stops
                _log.debug("rank %d: %s: disconnecting from rank %d: %s", self.rank, what, w, exc)
        self.connected.clear()
        try:
            collective(self.ctl, self.ctl.Ibarrier, what, left_ms(), range(self.size), finalizing_ok=True)
        except HixlError as exc:
            _log.warning("rank %d: %s: %s (this rank's operations had completed; its engine stops now)",
                         self.rank, what, exc)

    def finalize(self):
        self.engine.finalize()


# The kinds of a window's notification queues: PSCW's notices (epochs.py)
# and Notify's tags (notify.py, the hot path's notify_name).
_NOTIFY_KINDS = ("post", "complete", "n")
_RECORD_BYTES = 1024  # a host name and its addresses as "ip:port,..." fit
_TRY_MS = 3000        # connect timeout of an advertised address but the last
_CLOSE_MS = 2000      # Finalize's flush of one connection (the engine's teardown allows as much)


def _record(text):
    raw = text.encode()
    if len(raw) >= _RECORD_BYTES:
        raise ResourceError(f"Init: {len(raw)} bytes of host name and addresses do not fit in {_RECORD_BYTES} "
                            f"(set HIXL_RMA_IFNAME or HIXL_RMA_HOST to advertise fewer)")
    out = np.zeros(_RECORD_BYTES, np.uint8)
    out[:len(raw)] = np.frombuffer(raw, np.uint8)
    return out


def _engine_id(world_rank):
    """The engine id of a rank (option EngineId), unique in the job."""
    return f"rank{world_rank}"


def _pid_namespace():
    """This process's pid namespace (its inode), or "?" where it cannot be read."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "?"


def _unrecord(row):
    return bytes(row).rstrip(b"\0").decode()


def _bracket(addr):
    return f"[{addr}]" if ":" in addr else addr


def _wait(comm, start, timeout_ms, what, keep):
    """Start (``start()``) and complete one of Init's collectives on comm
    within timeout_ms."""
    collective(comm, start, what, timeout_ms, keep=keep, message=lambda: (
        f"{what}: not every rank of COMM_WORLD joined within {timeout_ms} ms. Init() is "
        f"collective over COMM_WORLD: call hixl_rma.Init() on every rank (or create the "
        f"first window on a communicator of all ranks)"))


def idup(comm, made):
    """Start MPI_Comm_idup of comm; the new communicator goes into ``made``."""
    newcomm, req = comm.Idup()
    made.append(newcomm)
    return req


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


def Init(domain=None):
    """Initialize MPI (through mpi4py) and this rank's engine; idempotent.
    ``domain``: the tenant domain of the job's engines (default
    ``HIXL_RMA_DOMAIN``, else none): engines of different domains never
    complete a handshake. Every rank of the job names the same one."""
    global _state
    want = config.domain(domain)
    if want is not None and not _engine.has("domain"):
        raise UnsupportedError(f"Init: domain {want!r} asked for, but the vendor HIXL engine has no domains "
                               "(build the built-in engine)")
    with _lock:
        if _state is None:
            config.telemetry()  # a malformed setting fails Init before any collective
            try:
                _state = _Runtime(want)
            except BaseException:
                hooks.stopped()  # (_Runtime started the observers before the engine)
                raise
        elif domain is not None and want != _state.domain:
            raise ParamError(f"Init(domain={domain!r}): this rank's engine was started in domain "
                             f"{_state.domain!r}; Finalize first")
        return _state


def runtime():
    """The runtime, initializing it on first use."""
    return _state if _state is not None else Init()


def current():
    """The runtime between Init() and Finalize(), else None; never
    initializes it (for observers such as the telemetry exporter)."""
    return _state


def Is_initialized():
    """True between Init() and Finalize()."""
    return _state is not None


def Finalize():
    """Free what is left and stop the engine, once every rank has reached
    Finalize (or the end of its program): until then this rank keeps serving
    its windows. Collective over COMM_WORLD; a rank known dead, or the
    timeout, ends the wait with PeerFailure / HixlTimeoutError after
    everything was released here."""
    _shutdown(collective=True)


_uncaught = []  # set by the exception hook: this process is ending on an error


def _note_uncaught(hook):
    def excepthook(*exc_info):
        _uncaught.append(exc_info[0])
        hook(*exc_info)
    return excepthook


sys.excepthook = _note_uncaught(sys.excepthook)


@atexit.register
def _finalize_at_exit():
    # The end of the program is Finalize, as MPI_Finalize (run after this by
    # mpi4py) is collective: a rank that ends first keeps serving its
    # windows until every rank has reached it. A rank ending on an uncaught
    # exception does not wait: its peers then learn of its end at once.
    try:
        _shutdown(collective=not _uncaught)
    except HixlError as exc:
        print(f"hixl_rma: at the end of the program, {type(exc).__name__}: {exc}", file=sys.stderr)


def _shutdown(collective):
    global _state
    with _lock:
        st = _state
        if st is None:
            return
        error = None
        try:
            if collective and not st.MPI.Is_finalized():
                st.finalize_barrier("Finalize")
                if st.size > 1:
                    st.close_connections("Finalize (connections closed)")
        except HixlError as exc:
            error = exc
        # The engine first: its peers hear that it finalized (not that its
        # regions went away one by one), then the windows go here without a
        # word to anyone.
        try:
            st.finalize()
            for core in list(st.windows):
                core.teardown_local()
            if error is None and not st.MPI.Is_finalized():
                st.release_mpi()
        finally:
            _state = None
            hooks.stopped()
        if error is not None:
            raise error.again(f"rank {st.rank}: {error}")


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


def barrier(comm, timeout_ms, world_ranks=None, program=True):
    """A barrier that neither spins a core nor waits forever. With the world
    ranks of ``comm``, a member known dead (or finalized) ends the wait
    early with PeerFailure instead of HixlTimeoutError. ``program``: the
    program's barrier (``Communicator.Barrier``, the HIXL face's Fence), which
    a tool may observe (``hooks.program_barrier``: the race detector's clocks
    travel in it); the library's own pass False."""
    if comm.Get_size() > 1:
        if program and hooks.program_barrier is not None:
            return hooks.program_barrier(
                comm, lambda start: collective(comm, start, "barrier", timeout_ms, world_ranks))
        collective(comm, comm.Ibarrier, "barrier", timeout_ms, world_ranks)


def allreduce_and(comm, flag, timeout_ms, world_ranks=None):
    """Logical AND of ``flag`` over comm (a barrier too), with barrier()'s
    guarantees."""
    if comm.Get_size() == 1:
        return bool(flag)
    from mpi4py import MPI
    inp, out = np.array([1 if flag else 0], np.int32), np.zeros(1, np.int32)
    collective(comm, lambda: comm.Iallreduce(inp, out, op=MPI.LAND), "allreduce", timeout_ms, world_ranks,
               keep=(inp, out))
    return bool(out[0])


def collective(comm, start, what, timeout_ms, world_ranks=None, keep=(), message=None, finalizing_ok=False):
    """Start the non-blocking collective ``start()`` on comm and complete it
    within timeout_ms (HixlTimeoutError), ending early with PeerFailure when
    a member of ``world_ranks`` is known dead (or, unless ``finalizing_ok``,
    has finalized). A collective given up on (a timeout, a dead peer, an
    interruption) stays MPI's, with ``keep`` (the buffers it reads and
    writes), until it completes (_GivenUp); meanwhile hixl_rma starts no
    other collective on comm."""
    _given_up.check(comm, what)
    check = None
    if world_ranks is not None and _state is not None:
        st, ranks = _state, list(world_ranks)
        check = lambda: st.check_peers(ranks, what, finalizing_ok)  # noqa: E731
        # A member already known dead fails here, before MPI is asked: MPICH
        # can crash starting a collective whose member's connection the
        # kernel reset (a peer killed on another host).
        st.check_dead(ranks, what)
    if _state is not None:
        _state.engine.wake_progress()  # peers' requests to this rank are served while it waits in MPI
    req = start()
    try:
        wait_request(req, timeout_ms, message or (lambda: (
            f"{what} on a communicator of {comm.Get_size()} ranks did not complete within "
            f"{timeout_ms} ms (a peer is dead or not calling the collective)")), check)
    except BaseException:
        _given_up.keep(comm, req, keep, what)
        raise


class _GivenUp:
    """Non-blocking collectives this process stopped waiting for while MPI
    still owns them. Freeing a live request is erroneous, and a late rank's
    data would land in memory Python already freed: each is kept, with its
    buffers, until it completes. While one is pending on a communicator, the
    ranks' collectives on it are out of step (this rank went on, a late one
    has not come yet), so hixl_rma refuses to start another there."""

    def __init__(self):
        self.pending = []  # _Pending, oldest first

    def keep(self, comm, req, buffers, what):
        if not req.Test():
            self.pending.append(_Pending(_comm_key(comm), req, buffers, what, time.monotonic()))

    def check(self, comm, what):
        """Raise if a collective given up on comm is still pending."""
        if not self.pending:
            return
        self.pending = [g for g in self.pending if not g.req.Test()]
        key = _comm_key(comm)
        for g in self.pending:
            if g.key == key:
                raise HixlTimeoutError(
                    f"{what}: an earlier hixl_rma collective on this communicator ({g.what}, given up "
                    f"{time.monotonic() - g.since:.1f} s ago) has not completed at every rank; until it has, "
                    f"hixl_rma's collectives there would be out of step with the other ranks' (a rank is late, "
                    f"hung or dead): wait for it, or use another communicator")


_Pending = collections.namedtuple("_Pending", "key req buffers what since")
_given_up = _GivenUp()  # outlives Finalize: MPI owns what it holds until MPI_Finalize
_FIN_TAG = 0x4846  # on the runtime's own communicator: "this rank reached Finalize"
# A notification sent before its sender reached Finalize may arrive after the
# sender's notice (they travel apart): a wait for it gives that long.
_NOTIFY_SETTLE_S = 1.0


def _comm_key(comm):
    """What identifies a communicator to MPI (its handle): the same for every
    mpi4py object of it, and not reused while a request on it is pending."""
    return comm.handle


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
         check=lambda: st.check_peers(list(+need), what, settle=_NOTIFY_SETTLE_S), block=st.block_for_notifies)
    return got


__all__ = [
    "Finalize",
    "Init",
    "Is_initialized",
    "allreduce_and",
    "barrier",
    "collective",
    "runtime",
    "wait_notifies",
]
