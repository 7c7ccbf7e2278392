"""Telemetry in one process: HIXL_RMA_TELEMETRY's parsing, the engine's
counts against what a test moved, and Init's refusals (a malformed value, a
port in use) with nothing left running."""
import json
import os
import socket
import sys
import textwrap

import numpy as np
import pytest

import hixl_rma
from hixl_rma.ground import config
from hixl_rma.ground.errors import ParamError

from support import procutil

READ, WRITE = hixl_rma.READ, hixl_rma.WRITE


@pytest.mark.parametrize("value, want", [
    ("", (False, None, None)), ("0", (False, None, None)), ("off", (False, None, None)),
    ("1", (True, None, None)), ("on", (True, None, None)),
    ("prometheus:9400", (True, None, 9400)), ("prometheus:127.0.0.1:0", (True, "127.0.0.1", 0)),
    ("prometheus:0.0.0.0:9400", (True, "0.0.0.0", 9400)),
    ("prometheus:[::1]:9400", (True, "::1", 9400)),
])
def test_setting_parsed(monkeypatch, value, want):
    monkeypatch.setenv("HIXL_RMA_TELEMETRY", value)
    assert config.telemetry() == want
    assert config.engine_options()["Telemetry"] == ("1" if want[0] else "0")


@pytest.mark.parametrize("value", ["prometheus:abc", "prometheus:", "prometheus:70000", "statsd:9400",
                                   "prometheus", "yes"])
def test_setting_malformed(monkeypatch, value):
    monkeypatch.setenv("HIXL_RMA_TELEMETRY", value)
    with pytest.raises(ParamError, match="HIXL_RMA_TELEMETRY"):
        config.telemetry()
    with pytest.raises(ParamError, match="HIXL_RMA_TELEMETRY"):
        hixl_rma.Engine()  # an engine started with the environment's settings refuses it too


def test_engine_option_checked():
    with pytest.raises(ParamError, match="option Telemetry"):
        hixl_rma.Engine("127.0.0.1:0", {"Telemetry": "yes"})


def _pair(on):
    a = hixl_rma.Engine("127.0.0.1:0", {"Telemetry": "1" if on else "0"})
    b = hixl_rma.Engine("127.0.0.1:0", {"Telemetry": "1" if on else "0"})
    a.connect(b.address)
    return a, b


def test_notifies_received_per_peer():
    """Each notification carries its sender's engine id: the receiver counts
    them per peer (a peer it is connected to, by the id that peer proved)."""
    a, b, c = (hixl_rma.Engine("127.0.0.1:0", {"Telemetry": "1", "EngineId": f"e{i}"}) for i in range(3))
    try:
        for sender, n in ((a, 3), (c, 2)):
            sender.connect(b.address)
            for k in range(n):
                sender.send_notify(b.address, f"n{k}")
        b.connect(a.address)
        b.connect(c.address)
        got = []
        for _ in range(200):
            if len(got) == 5:
                break
            b.wait_notifies(100)
            got += b.get_notifies()
        assert len(got) == 5, got
        peers = b.telemetry()["peers"]
        assert peers[a.address]["notifies_received"] == 3 and peers[c.address]["notifies_received"] == 2, peers
        assert b.stats()["notifies_received"] == 5
        assert a.telemetry()["peers"][b.address]["notifies_received"] == 0
    finally:
        for e in (a, b, c):
            e.finalize()


def test_counts_match_what_moved():
    a, b = _pair(True)
    try:
        target = b.register_mem(np.zeros(4096, np.uint8))
        src = np.arange(256, dtype=np.uint8)
        dst = np.zeros(256, np.uint8)
        a.register_mem(src)
        a.register_mem(dst)
        for i in range(7):  # 7 posts of 3 blocks of 16 bytes
            a.post(b.address, WRITE, [(src.ctypes.data + 16 * k, target.addr + 64 * i + 16 * k, 16)
                                      for k in range(3)])
        a.flush(b.address)
        a.transfer_sync(b.address, READ, [(dst.ctypes.data, target.addr, 100)])
        req = a.transfer_async(b.address, READ, [(dst.ctypes.data, target.addr, 50)], keep=dst)
        req.wait(10000)
        a.send_notify(b.address, "n1")
        a.send_notify(b.address, "n2")
        with pytest.raises(ParamError):  # an unregistered range: one PARAM_INVALID
            a.post(b.address, WRITE, [(src.ctypes.data, 1 << 40, 8)])
        t = a.telemetry()
        assert t["enabled"]
        want = dict(write_bytes=7 * 48, read_bytes=150, write_ops=21, read_ops=2, write_requests=7,
                    read_requests=2, notifies_sent=2, errors=1)
        assert t["total"] == want
        assert list(t["peers"]) == [b.address]
        peer = t["peers"][b.address]
        assert {k: peer[k] for k in want} == want
        # its one peer: every timed call named it
        assert peer["post_time"] == t["post_time"] and peer["completion_time"] == t["completion_time"]
        assert peer["notifies_received"] is None  # engines without ids (option EngineId): not attributable
        assert t["errors"] == {hixl_rma.ground.errors.PARAM_INVALID: 1}
        # timed: the first of the 7 posts (one in 16 per peer), the sync READ, the async request
        assert t["post_time"]["count"] == 3
        assert sum(t["post_time"]["buckets"]) == 3
        # the flush after the timed post, the READ, the request, and the first notify's flush (which a
        # TransferAsync's post starts as any post does)
        assert t["completion_time"]["count"] == 4
        assert t["connects"] == 1 and t["connect_failures"] == 0
        assert b.telemetry()["accepts"] == 1
        timing = req.timing()
        assert timing["post_us"] > 0 and timing["completion_us"] >= timing["post_us"]
        with pytest.raises(hixl_rma.HixlError):
            a.connect("127.0.0.1:1", 2000)
        assert a.telemetry()["connect_failures"] == 1
    finally:
        a.finalize()
        b.finalize()


def test_off_records_nothing_but_failures():
    a, b = _pair(False)
    try:
        target = b.register_mem(np.zeros(64, np.uint8))
        src = np.ones(8, np.uint8)
        a.register_mem(src)
        a.post(b.address, WRITE, [(src.ctypes.data, target.addr, 8)])
        a.flush(b.address)
        t = a.telemetry()
        assert not t["enabled"]
        assert t["total"]["write_bytes"] == 0 and t["post_time"]["count"] == 0
        assert t["completion_time"]["count"] == 0
        assert a.stats()["bytes_written"] == 8  # the engine's own counters stay on
        assert t["connects"] == 1
    finally:
        a.finalize()
        b.finalize()


PROG = textwrap.dedent("""
    import os, sys, threading, time
    import hixl_rma
    from hixl_rma import telemetry

    def engine_threads():
        names = []
        for t in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{t}/comm") as f:
                    names.append(f.read().strip())
            except FileNotFoundError:
                pass  # ended meanwhile
        return [n for n in names if n.startswith("hixl")]

    try:
        hixl_rma.Init()
    except hixl_rma.ground.errors.ParamError as exc:
        print("REFUSED", exc)
    else:
        print("STARTED")
    # nothing half-way: no engine thread (hixl-*), no exporter, no runtime
    threads = engine_threads()
    # A started engine's threads name themselves once they run, which a busy
    # machine may delay: wait for them (with a deadline), never assume it.
    deadline = time.monotonic() + 30
    while hixl_rma.runtime.Is_initialized() and not threads and time.monotonic() < deadline:
        time.sleep(0.01)
        threads = engine_threads()
    print("ENGINE_THREADS", threads)
    print("EXPORTER", telemetry.address(), [t.name for t in threading.enumerate() if t is not threading.main_thread()])
    print("INIT", hixl_rma.runtime.Is_initialized())
""")


def _init_with(tmp_path, value):
    prog = tmp_path / "prog.py"
    prog.write_text(PROG)
    env = dict(os.environ, HIXL_RMA_TELEMETRY=value)
    rc, out = procutil.run(["mpiexec", "-n", "1", sys.executable, str(prog)], env, 60)
    assert rc == 0, out
    return out


def test_port_in_use_refused_at_init(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = _init_with(tmp_path, f"prometheus:127.0.0.1:{port}")
    assert "REFUSED HIXL_RMA_TELEMETRY: cannot serve metrics on 127.0.0.1:" in out, out
    assert "ENGINE_THREADS []" in out and "EXPORTER None []" in out and "INIT False" in out, out


def test_malformed_refused_at_init(tmp_path):
    out = _init_with(tmp_path, "prometheus:abc")
    assert "REFUSED HIXL_RMA_TELEMETRY: the port of 'prometheus:abc'" in out, out
    assert "ENGINE_THREADS []" in out and "EXPORTER None []" in out and "INIT False" in out, out


def test_control_run_starts_the_engine(tmp_path):
    """The checks above can fail: a good value starts the engine's threads and the exporter."""
    out = _init_with(tmp_path, "prometheus:127.0.0.1:0")
    assert "STARTED" in out and "ENGINE_THREADS []" not in out and "EXPORTER None" not in out, out
    assert "INIT True" in out, out


JOB = textwrap.dedent("""
    import json, sys, urllib.request
    import numpy as np
    import hixl_rma as hixl
    from hixl_rma import telemetry

    hixl.Init()
    rank, size = hixl.GetRank(), hixl.GetSize()
    h = hixl.RegisterMemory(np.zeros(1024, np.uint8))
    for i in range(rank + 3):  # rank r writes r + 3 blocks of 32 B to the next rank
        hixl.Put(np.full(32, i, np.uint8), (rank + 1) % size, 32 * i, h)
    hixl.Fence()
    base = int(sys.argv[1])
    assert telemetry.address()[1] == base + rank, telemetry.address()
    seen = {}
    for r in range(size):  # every rank's endpoint, at PORT + its rank, while the job runs
        with urllib.request.urlopen(f"http://127.0.0.1:{base + r}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        line = next(l for l in text.splitlines() if l.startswith("agent_tx_bytes_total{"))
        seen[r] = line
    with open(f"{sys.argv[2]}/seen.{rank}", "w") as f:  # a file each: ranks' stdout lines can interleave
        json.dump(seen, f)
    hixl.Fence()
    hixl.DeregisterMemory(h)
    hixl.Finalize()
""")


def _free_run_below_ephemeral(n):
    """A base port whose n ports are free now and lie below the kernel's
    ephemeral range: the job's own listeners (engines, UCX) bind port 0,
    which the kernel picks from that range, so none of them can take one of
    these while the job starts (a port the kernel once picked could be)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for base in range(max(1024, low - 4000), low - n, 97):
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    pytest.fail(f"no {n} free ports below the ephemeral range ({low})")


@pytest.mark.parametrize("ranks", [2, 3])
def test_job_serves_each_rank_on_port_plus_rank(tmp_path, ranks):
    base = _free_run_below_ephemeral(ranks)
    prog = tmp_path / "job.py"
    prog.write_text(JOB)
    env = dict(os.environ, HIXL_RMA_TELEMETRY=f"prometheus:127.0.0.1:{base}")
    rc, out = procutil.run(["mpiexec", "-n", str(ranks), sys.executable, str(prog), str(base), str(tmp_path)],
                           env, 60)
    assert rc == 0, out
    files = sorted(tmp_path.glob("seen.*"))
    assert [f.name for f in files] == [f"seen.{r}" for r in range(ranks)], out
    for f in files:
        seen = json.loads(f.read_text())
        for r in range(ranks):
            assert seen[str(r)] == f'agent_tx_bytes_total{{rank="{r}"}} {float(32 * (r + 3))}', out


SCRAPE_FINALIZE = textwrap.dedent("""
    import threading, time, urllib.error, urllib.request
    import numpy as np
    import hixl_rma
    from hixl_rma import Win, runtime, telemetry

    hixl_rma.Init()
    host, port = telemetry.address()
    url = f"http://{host}:{port}/metrics"
    main = threading.main_thread()
    phase = ["running"]  # what Finalize is doing while a scrape is served
    foreign_inits, served = [], {}

    init = runtime.Init
    def watched_init(*args, **kwargs):
        if threading.current_thread() is not main:
            foreign_inits.append(threading.current_thread().name)
        return init(*args, **kwargs)
    runtime.Init = watched_init

    # Each delay widens one window in which a scrape races Finalize: a
    # check that the runtime is up passed just before Finalize cleared it;
    # the engine finalized while the runtime is not yet cleared; the
    # runtime cleared while the exporter still serves.
    is_initialized = runtime.Is_initialized
    def slow_is_initialized():
        up = is_initialized()
        if threading.current_thread() is not main:
            time.sleep(0.02)
        return up
    runtime.Is_initialized = slow_is_initialized
    release_mpi = runtime._Runtime.release_mpi
    def slow_release_mpi(self):
        phase[0] = "engine finalized"
        time.sleep(0.5)
        release_mpi(self)
    runtime._Runtime.release_mpi = slow_release_mpi
    stop = telemetry.stop
    def slow_stop():
        phase[0] = "runtime cleared"
        time.sleep(0.5)
        stop()
    telemetry.stop = slow_stop

    win = Win.Allocate(64, 1, None, hixl_rma.runtime.runtime().world)  # left for Finalize to tear down
    done = threading.Event()

    def scrape():
        while not done.is_set():
            at = phase[0]
            try:
                with urllib.request.urlopen(url, timeout=10) as resp:
                    resp.read()
                    served[(at, resp.status)] = served.get((at, resp.status), 0) + 1
            except urllib.error.HTTPError as exc:
                served[(at, exc.code)] = served.get((at, exc.code), 0) + 1
            except (urllib.error.URLError, ConnectionError):
                break  # the exporter stopped
            time.sleep(0.005)

    scrapers = [threading.Thread(target=scrape) for _ in range(3)]
    for t in scrapers:
        t.start()
    time.sleep(0.2)
    hixl_rma.Finalize()
    phase[0] = "finalized"
    done.set()
    for t in scrapers:
        t.join(30)
    print("ALIVE", [t.name for t in scrapers if t.is_alive()])
    print("SERVED", sorted(served.items()))
    print("FOREIGN_INITS", foreign_inits)
    print("INITIALIZED_AFTER", runtime.Is_initialized())
""")


def test_scrape_racing_finalize_never_initializes(tmp_path):
    """A scrape during Finalize serves what there is (an empty page once the
    engine is gone) silently: it never runs Init (a collective) from the
    exporter's thread, and nothing prints a traceback."""
    prog = tmp_path / "scrape.py"
    prog.write_text(SCRAPE_FINALIZE)
    env = dict(os.environ, HIXL_RMA_TELEMETRY="prometheus:127.0.0.1:0")
    rc, out = procutil.run(["mpiexec", "-n", "1", sys.executable, str(prog)], env, 120)
    assert rc == 0, out
    assert "Traceback" not in out, out
    assert "FOREIGN_INITS []" in out and "INITIALIZED_AFTER False" in out and "ALIVE []" in out, out
    served = dict(eval(next(line for line in out.splitlines() if line.startswith("SERVED "))[len("SERVED "):]))
    # the test proves something: scrapes came while Finalize was half way, and all were answered
    for phase in ("running", "engine finalized", "runtime cleared"):
        assert served.get((phase, 200)), out
    assert all(status == 200 for _, status in served), out


BIND = textwrap.dedent("""
    import sys
    import hixl_rma
    from hixl_rma import runtime, telemetry

    hixl_rma.Init()
    st = runtime.runtime()
    with open(f"{sys.argv[1]}/bind.{st.rank}", "w") as f:  # a file each: ranks' stdout lines can interleave
        f.write(f"{telemetry.address()[0]} {st.engine.address}")
    hixl_rma.Finalize()
""")


@pytest.mark.parametrize("value, want", [("prometheus:0", "127.0.0.1"), ("prometheus:0.0.0.0:0", "0.0.0.0")])
def test_exporter_bound_where_the_engine_is(tmp_path, value, want):
    """A job on one host keeps its engine to loopback, and by default its
    exporter too; an explicit HOST still wins."""
    prog = tmp_path / "bind.py"
    prog.write_text(BIND)
    env = dict(os.environ, HIXL_RMA_TELEMETRY=value)
    env.pop("HIXL_RMA_HOST", None)
    env.pop("HIXL_RMA_IFNAME", None)
    rc, out = procutil.run(["mpiexec", "-n", "2", sys.executable, str(prog), str(tmp_path)], env, 60)
    assert rc == 0, out
    binds = [(tmp_path / f"bind.{r}").read_text().split() for r in range(2)]
    for host, engine in binds:
        assert engine.startswith("127.0.0.1:"), binds  # the engine's own exposure on one host
        assert host == want, binds
