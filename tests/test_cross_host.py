"""Across simulated hosts (tests/support/simhosts.py: namespaces joined by a
bridge, each its own hostname, /dev/shm and pids, as on a cluster whose
nodes resolve their own name to 127.0.1.1), with nothing set by hand: the
engines advertise their interface addresses, ranks of one host use shared
memory and ranks of two the network, and the multi-rank core suite, the
KV-cache demo and the address errors hold there. Needs root and ``ip``."""
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import time

import pytest

from support import procutil

simhosts = procutil.simhosts()
ROOT = pathlib.Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(simhosts.usable() is not None,
                                 reason=f"simulated hosts: {simhosts.usable()}")]


@pytest.fixture(scope="module")
def hosts():
    with simhosts.hosts(3) as h:  # the tests place ranks on the first two or all three
        yield h


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HIXL_RMA_", "UCX_", "PYTEST_"))}
    env.update(extra)
    return env


def _check(proc, what):
    assert proc.returncode == 0, f"{what}: rc {proc.returncode}\n{proc.stdout[-6000:]}"
    return proc.stdout


@pytest.mark.parametrize("n, per_host", [(3, "2,1"), (3, "1,1,1")], ids=["2+1", "1+1+1"])
def test_core_suite_across_hosts(hosts, n, per_host):
    """The multi-rank core suite: shared memory and the network in one job
    (2+1), and every pair across the network (1+1+1, which covers what
    two ranks on two hosts would: CI's time goes to the three-rank runs)."""
    out = _check(hosts.mpiexec([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--with-mpi",
                                "-m", "core", str(ROOT / "tests" / "mpi")], n, per_host, timeout=600,
                               env=_env(), cwd=ROOT), f"core suite at -n {n} ({per_host})")
    # The ranks share one stdout: one rank's summary may follow another's on the same line.
    summaries = re.findall(r"(\d+) passed([^\n]*?) in [\d.]+s", out)
    assert len(summaries) == n and all("failed" not in rest and "error" not in rest for _, rest in summaries), out


ADDRESSES = textwrap.dedent(r'''
    import os, socket, sys
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    comm = MPI.COMM_WORLD
    st = hixl_rma.Init()
    buf = np.zeros(comm.size, np.int64)
    win = hixl_rma.Win.Create(buf, 8, comm=comm)
    win.Fence()
    for r in range(comm.size):
        win.Put(np.array([100 + comm.rank], np.int64), r, comm.rank)
    win.Fence()
    with open(f"{sys.argv[1]}.{comm.rank}", "w") as f:  # one file per rank: stdout would interleave
        print("RANK", comm.rank, socket.gethostname(), ",".join(st.candidates[comm.rank]),
              os.environ.get("UCX_NET_DEVICES", "-"), win._sync.fence_mode, ",".join(map(str, buf)), file=f)
    win.Free()
''')


def test_engines_advertise_the_hosts_network(hosts, tmp_path):
    """Each engine advertises its host's interface address, not loopback;
    UCX's lanes are on the same interface; Fence meets in MPI across hosts;
    every rank reaches every rank."""
    script = tmp_path / "addr.py"
    script.write_text(ADDRESSES)
    _check(hosts.mpiexec([sys.executable, str(script), str(tmp_path / "out")], 3, "2,1", timeout=120,
                         env=_env()), "addresses")
    out = "".join((tmp_path / f"out.{r}").read_text() for r in range(3))
    rows = sorted(line.split()[1:] for line in out.splitlines() if line.startswith("RANK "))
    assert [r[:2] for r in rows] == [["0", "h0"], ["1", "h0"], ["2", "h1"]], out
    for _rank, host, advertised, devices, mode, seen in rows:
        ip = {"h0": "10.77.0.1", "h1": "10.77.0.2"}[host]
        assert advertised.startswith(ip + ":") and "," not in advertised, out
        assert devices == "eth0" and mode == "mpi", out
        assert seen == "100,101,102", out


BULK_LANE = textwrap.dedent(r'''
    import sys
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    comm = MPI.COMM_WORLD
    hixl_rma.Init()
    n = 8 << 20
    big, small = np.zeros(n, np.uint8), np.zeros(1 << 16, np.uint8)
    bulk = hixl_rma.Win.Create(big, 1, {"priority": "bulk"}, comm)
    high = hixl_rma.Win.Create(small, 1, {"priority": "high"}, comm)
    stream = (np.arange(n) % 251).astype(np.uint8)
    bulk.Lock_all()
    high.Lock_all()
    if comm.rank == 0:
        for r in (1, 2):
            bulk.Put(stream, r, 0)
            high.Put(np.full(small.size, 7, np.uint8), r, 0)
            high.Flush(r)  # the high window's own: not the bulk bytes before it
        bulk.Flush_all()
    high.Unlock_all()
    bulk.Unlock_all()
    comm.Barrier()
    rt = hixl_rma.runtime.runtime()
    lanes = [rt.engine.peer_stats(rt.addresses[r])["bulk_lane"] if r != comm.rank else None for r in range(3)]
    ok = comm.rank == 0 or (np.array_equal(big, stream) and np.all(small == 7))
    with open(f"{sys.argv[1]}.{comm.rank}", "w") as f:  # one file per rank: stdout would interleave
        print("RESULT", comm.rank, ",".join(map(str, lanes)), ok, file=f)
    high.Free()
    bulk.Free()
''')


def test_bulk_lane_across_hosts(hosts, tmp_path):
    """A bulk window's Puts to a rank on another host go over a connection
    of their own (the bulk lane), to a rank on the same host by memcpy or
    cma as before (no lane); the bytes of both windows arrive."""
    script = tmp_path / "lane.py"
    script.write_text(BULK_LANE)
    _check(hosts.mpiexec([sys.executable, str(script), str(tmp_path / "out")], 3, "2,1", timeout=120,
                         env=_env()), "bulk lane")
    rows = [(tmp_path / f"out.{r}").read_text().split() for r in range(3)]
    assert rows[0] == ["RESULT", "0", "None,False,True", "True"], rows  # rank 2 is on the other host
    assert [r[3] for r in rows] == ["True"] * 3, rows


TEARDOWN = textwrap.dedent(r'''
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    comm = MPI.COMM_WORLD
    hixl_rma.Init()
    mem = np.zeros(4 << 20, np.uint8)
    wins = [hixl_rma.Win.Create(mem[:1 << 20], 1, {"priority": "high"}, comm),
            hixl_rma.Win.Create(mem[1 << 20:], 1, {"priority": "bulk"}, comm)]
    for win in wins:
        win.Lock_all()
        for r in range(comm.size):
            if r != comm.rank:
                win.Put(np.full(1 << 16, comm.rank + 1, np.uint8), r, comm.rank << 16)
        win.Unlock_all()
    comm.Barrier()
    assert all(np.all(mem[r << 16:(r + 1) << 16] == r + 1) for r in range(comm.size) if r != comm.rank)
    for win in wins:
        win.Free()
    hixl_rma.Finalize()
    print("DONE", flush=True)
''')


def test_finalize_closes_every_connection_before_an_engine_stops(hosts, tmp_path):
    """Finalize across hosts: each rank closes its connections (endpoint
    flushed, the peer told) and waits for every rank to have done so before
    its engine stops. Were a rank's engine to go first, a peer's flush to it
    would fail over tcp (`Connection reset by remote peer`, which UCX prints
    as an error) though every operation had completed."""
    script = tmp_path / "teardown.py"
    script.write_text(TEARDOWN)
    for run in range(2):
        out = _check(hosts.mpiexec([sys.executable, str(script)], 3, "1,1,1", timeout=120,
                                   env=_env(HIXL_RMA_LOG_LEVEL="debug")), f"teardown, run {run}")
        assert out.count("DONE") == 3, out  # the ranks share stdout: lines may interleave
        flushed = re.findall(r"disconnecting from \S+( \(bulk lane\))?: endpoint flushed: (.*)", out)
        # Every rank from itself, from both others and from each one's bulk lane.
        assert len(flushed) == 15 and all(status == "Success" for _, status in flushed), out
        assert sum(1 for lane, _ in flushed if lane) == 6, out
        assert "UCX  ERROR" not in out and "error during flush" not in out, out
        assert "declared dead" not in out and "WARNING" not in out, out


UNREACHABLE = textwrap.dedent(r'''
    import os, sys
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    comm = MPI.COMM_WORLD
    hixl_rma.Init()
    f = open(f"{sys.argv[1]}.{comm.rank}", "w")  # one file per rank: stdout would interleave
    buf = np.zeros(4, np.int64)
    win = hixl_rma.Win.Create(buf, 8, comm=comm)
    try:
        win.Lock(1 - comm.rank)
        win.Put(np.ones(4, np.int64), 1 - comm.rank)
        win.Flush(1 - comm.rank)
        print("RESULT", comm.rank, "OK", file=f)
    except hixl_rma.HixlError as exc:
        print("RESULT", comm.rank, type(exc).__name__, exc, file=f)
    print("UNCHANGED", comm.rank, not buf.any(), file=f)
    f.close()
    os._exit(0)  # the peer is unreachable: MPICH's Finalize is not the point here
''')


def test_unreachable_peer_names_host_addresses_and_setting(hosts, tmp_path):
    """Engines told to advertise loopback across hosts cannot reach each
    other: a PeerFailure naming the peer's host, the address tried and the
    variable to set, within the timeout; no hang, no stray write."""
    script = tmp_path / "unreach.py"
    script.write_text(UNREACHABLE)
    t0 = time.monotonic()
    _check(hosts.mpiexec([sys.executable, str(script), str(tmp_path / "out")], 2, "1,1", timeout=120,
                         env=_env(HIXL_RMA_IFNAME="lo", HIXL_RMA_TIMEOUT_MS="3000")), "unreachable")
    assert time.monotonic() - t0 < 30
    out = "".join((tmp_path / f"out.{r}").read_text() for r in range(2))
    results = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 2, out
    for line in results:
        rank = int(line.split()[1])
        assert line.split()[2] == "PeerFailure", out
        assert f"on host h{1 - rank}, from h{rank}" in line and "127.0.0.1:" in line, out
        assert "HIXL_RMA_IFNAME" in line, out
    assert "UNCHANGED 0 True" in out and "UNCHANGED 1 True" in out, out


@pytest.mark.parametrize("mode", ["put", "get"])
def test_kv_cache_demo_across_hosts(hosts, mode):
    """Prefill on one host, decode on the other; the decode side verifies."""
    out = _check(hosts.mpiexec([sys.executable, str(ROOT / "examples" / "kv_cache_transfer.py"), "--layers", "4",
                                "--blocks", "8", "--block-kib", "64", "--mode", mode], 2, "1,1", timeout=180,
                               env=_env()), f"kv demo ({mode})")
    assert out.count("verification: PASSED") == 1 and "FAILED" not in out, out


EXPOSED_SERVER = textwrap.dedent(r'''
    import json, os, sys, time
''') + procutil.LISTENERS + textwrap.dedent(r'''
    import hixl_rma
    before = set(listeners())
    e = hixl_rma.Engine(sys.argv[2] + ":0", {"JobToken": "exposure-test-token-0123456789"})
    control = int(e.address.rsplit(":", 1)[1])
    ucx = sorted(set(listeners()) - before - {(sys.argv[2], control)})
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump(dict(control=control, ucx=ucx), f)
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[1] + ".done") and time.monotonic() < deadline:
        time.sleep(0.05)
    e.finalize()
''')

EXPOSED_STRANGER = textwrap.dedent(r'''
    import json, socket, sys
    info = json.load(open(sys.argv[1]))
    reached = []
    for addr, port in info["ucx"]:
        s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
        s.settimeout(3)
        try:
            s.connect((addr, port))
            reached.append([addr, port])
        except OSError:
            pass
        finally:
            s.close()
    print(json.dumps(reached))
''')


def test_ucx_listeners_across_hosts_are_reachable_by_strangers(hosts, tmp_path):
    """Issue 23.6, the residual exposure the README states: an engine that
    serves other hosts listens, besides its token-guarded control port, on
    UCX's own tcp ports on its interface; a process on another host reaches
    them with a plain TCP connect, which no job token guards (UCX has no
    authentication). Loopback stays out of it: only the chosen interface."""
    import json
    info = str(tmp_path / "exposed.json")
    (tmp_path / "server.py").write_text(EXPOSED_SERVER)
    (tmp_path / "stranger.py").write_text(EXPOSED_STRANGER)
    h0 = hosts.hosts[0]["ip"]
    server = subprocess.Popen([*simhosts.enter(hosts.hosts[0]), sys.executable, str(tmp_path / "server.py"), info, h0],
                              env=_env(UCX_NET_DEVICES="eth0"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(info):
            assert server.poll() is None and time.monotonic() < deadline, server.stdout.read()
            time.sleep(0.05)
        exposed = json.load(open(info))
        assert exposed["ucx"], "UCX opened no tcp listener (no tcp transport?)"
        assert all(addr == h0 for addr, _ in exposed["ucx"]), exposed
        p = hosts.run(1, [sys.executable, str(tmp_path / "stranger.py"), info], env=_env(), capture_output=True,
                      text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        assert json.loads(p.stdout.splitlines()[-1]) == exposed["ucx"]
    finally:
        procutil.finish(server, info + ".done")


@pytest.mark.parametrize("domains", [("tenant-a", "tenant-a"), ("tenant-a", "tenant-b")], ids=["same", "different"])
def test_domains_across_hosts(hosts, tmp_path, domains):
    """Tenant domains (issue 26) hold across hosts: one rank on each host, in
    one domain they move data, in two they refuse each other and nothing is
    written (tests/test_domains.py's job)."""
    import test_domains

    prog = tmp_path / "job.py"
    prog.write_text(test_domains.JOB)
    _check(hosts.mpiexec([sys.executable, str(prog), str(tmp_path), *domains], 2, "1,1", timeout=120, env=_env(),
                         cwd=ROOT), f"domains {domains}")
    test_domains.check_job(tmp_path, domains)
