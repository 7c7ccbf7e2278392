"""The engine between processes: plain subprocesses (no mpiexec), addresses
exchanged through a file, every wait bounded so a hung child fails the test.

Each two-process test runs twice: with UCX's default transports (shared
memory, cma, direct mapping of engine-allocated memory) and with
``UCX_TLS=tcp`` (the network path; the engine must not map peer memory).
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(120)

CHILD_TIMEOUT = 60  # seconds any child may take

HELPER = textwrap.dedent(r'''
    import json, os, sys, time
    import numpy as np
    import hixl_rma

    MiB = 1 << 20

    def pattern(seed, size):
        return np.frombuffer(np.random.default_rng(seed).bytes(size), dtype=np.uint8)

''') + procutil.FILES + textwrap.dedent(r'''

    def plan(n_iter, region):
        """(i, kind, offset, size, seed) for every iteration: no slot is reused."""
        rng = np.random.default_rng(1234)
        offs = {"reg": 0, "alloc": 0}
        out = []
        for i in range(n_iter):
            kind = ("reg", "alloc")[i % 2]
            size = 4 * MiB if i % 8 < 2 else int(rng.integers(1, 8192))
            off = offs[kind]
            assert off + size <= region
            offs[kind] = off + size + int(rng.integers(0, 64))
            out.append((i, kind, off, size, 1000 + i))
        return out

    def target(info_path, n_origins, n_iter, region, hammer):
        e = hixl_rma.Engine(options={"JobToken": "procs"})
        reg = np.zeros(region, dtype=np.uint8)
        e.register_mem(reg)
        ha = e.alloc_mem(region)
        alloc = np.frombuffer(ha, dtype=np.uint8)
        alloc[:] = 0
        counters = np.zeros(4, dtype=np.uint64)  # [0] hammered, others must stay 0
        e.register_mem(counters)
        hc = e.alloc_mem(32)
        acount = np.frombuffer(hc, dtype=np.uint64)
        acount[:] = 0
        publish(info_path, dict(address=e.address, reg=reg.ctypes.data, alloc=ha.addr,
                                counter_reg=counters.ctypes.data, counter_alloc=hc.addr))
        regions = {"reg": reg, "alloc": alloc}
        expected = {p[0]: p for p in plan(n_iter, region)} if not hammer else {}
        bad, checked, done = [], 0, 0
        deadline = time.monotonic() + 50
        while done < n_origins:
            got = e.get_notifies()
            if not got:
                if time.monotonic() > deadline:
                    bad.append("timed out waiting for notifies")
                    break
                time.sleep(0.0001)
                continue
            for name, msg in got:
                if name == "data":
                    i = int(msg)
                    _, kind, off, size, seed = expected[i]
                    # the check comes first: the data must be complete now
                    ok = np.array_equal(regions[kind][off:off + size], pattern(seed, size))
                    checked += 1
                    if not ok:
                        bad.append([i, kind, size])
                elif name == "done":
                    done += 1
                else:
                    bad.append(["unexpected notify", name])
        res = dict(bad=bad, checked=checked, counter_reg=[int(x) for x in counters],
                   counter_alloc=[int(x) for x in acount], stats=e.stats())
        e.finalize()
        print(json.dumps(res), flush=True)

    def origin(info_path, n_iter, region):
        info = read_json(info_path)
        e = hixl_rma.Engine(options={"JobToken": "procs"})
        r = info["address"]
        e.connect(r)
        src = np.empty(4 * MiB, dtype=np.uint8)
        e.register_mem(src)
        reqs = []
        t0 = time.monotonic()
        for i, kind, off, size, seed in plan(n_iter, region):
            src[:size] = pattern(seed, size)
            d = [(src.ctypes.data, info[kind] + off, size)]
            how = i % 3
            if how == 0:
                e.transfer_sync(r, hixl_rma.WRITE, d)
            elif how == 1:
                e.post(r, hixl_rma.WRITE, d)  # no flush: the notify must complete it
            else:
                reqs.append(e.transfer_async(r, hixl_rma.WRITE, d))
            e.send_notify(r, "data", str(i).encode())
            # the source buffer is reused: every transfer must be complete by now
        for q in reqs:
            q.wait(10000)
        statuses = sorted(set(q.status() for q in reqs))
        e.send_notify(r, "done", b"")
        res = dict(stats=e.stats(), peer=e.peer_stats(r), statuses=statuses,
                   seconds=time.monotonic() - t0)
        e.finalize()
        print(json.dumps(res), flush=True)

    def hammer(info_path, n):
        info = read_json(info_path)
        e = hixl_rma.Engine(options={"JobToken": "procs"})
        r = info["address"]
        e.connect(r)
        olds_reg, olds_alloc = [], []
        for _ in range(n):
            olds_reg.append(e.atomic_fetch_add(r, info["counter_reg"], 1))
            olds_alloc.append(e.atomic_fetch_add(r, info["counter_alloc"] + 8, 3))
        e.send_notify(r, "done", b"")
        res = dict(olds_reg=olds_reg, olds_alloc=olds_alloc, stats=e.stats())
        e.finalize()
        print(json.dumps(res), flush=True)

    if __name__ == "__main__":
        role, info_path = sys.argv[1], sys.argv[2]
        args = [int(x) for x in sys.argv[3:]]
        if role == "target":
            target(info_path, args[0], args[1], args[2], bool(args[3]))
        elif role == "origin":
            origin(info_path, args[0], args[1])
        elif role == "hammer":
            hammer(info_path, args[0])
''')


def child_env(tls):
    env = dict(os.environ)
    env.pop("UCX_TLS", None)
    env.pop("HIXL_RMA_DIRECT", None)
    if tls is not None:
        env["UCX_TLS"] = tls
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_children(tmp_path, specs, tls):
    """Start one child per (role, args); return their parsed last stdout lines (in order)."""
    script = tmp_path / "helper.py"
    script.write_text(HELPER)
    info = str(tmp_path / "target.json")
    if os.path.exists(info):
        os.remove(info)
    procs = []
    try:
        for role, args in specs:
            procs.append(subprocess.Popen(
                [sys.executable, str(script), role, info, *map(str, args)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(tls),
                cwd=str(tmp_path)))
        outs = []
        deadline = time.monotonic() + CHILD_TIMEOUT
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"a child hung (UCX_TLS={tls}); roles: {[s[0] for s in specs]}")
            assert p.returncode == 0, f"child failed rc={p.returncode}\nstdout:\n{out}\nstderr:\n{err}"
            lines = [ln for ln in out.splitlines() if ln.strip()]
            assert lines, f"child printed nothing\nstderr:\n{err}"
            assert "WARN" not in err and "Traceback" not in err, err
            outs.append((json.loads(lines[-1]), err))
        return outs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=10)


TLS = [pytest.param(None, id="default-tls"), pytest.param("tcp", id="UCX_TLS=tcp")]


@pytest.mark.parametrize("tls", TLS)
def test_two_procs_notify_implies_data(tmp_path, tls):
    """The target polls get_notifies() and checks the bytes the moment a notify shows up."""
    n_iter, region = 80, 48 << 20
    (tgt, _terr), (org, _oerr) = run_children(
        tmp_path, [("target", [1, n_iter, region, 0]), ("origin", [n_iter, region])], tls)
    assert tgt["bad"] == [], tgt["bad"][:10]
    assert tgt["checked"] == n_iter
    assert org["statuses"] == [1]  # every async request ended COMPLETED
    st = org["stats"]
    assert st["transfer_ops"] == n_iter
    assert st["notifies_sent"] == n_iter + 1
    assert tgt["stats"]["notifies_received"] == n_iter + 1
    assert org["peer"]["ops"] == n_iter
    if tls == "tcp":
        assert st["direct_ops"] == 0, st  # UCX_TLS excludes shared memory: never map
    else:
        assert st["direct_ops"] == n_iter // 2, st  # the "alloc" half went through the mapping


@pytest.mark.parametrize("tls", TLS)
def test_two_procs_hammer_one_counter(tmp_path, tls):
    """Two origin processes x 2000 fetch-adds on a registered and an allocated counter."""
    n = 2000
    (tgt, _), (h1, _), (h2, _) = run_children(
        tmp_path, [("target", [2, 0, 4096, 1]), ("hammer", [n]), ("hammer", [n])], tls)
    assert tgt["bad"] == []
    assert tgt["counter_reg"] == [2 * n, 0, 0, 0]
    assert tgt["counter_alloc"] == [0, 3 * 2 * n, 0, 0]
    # every fetched old value is seen exactly once: the adds were atomic
    assert sorted(h1["olds_reg"] + h2["olds_reg"]) == list(range(2 * n))
    assert sorted(h1["olds_alloc"] + h2["olds_alloc"]) == list(range(0, 6 * n, 3))
    for h in (h1, h2):
        assert h["stats"]["atomic_ops"] == 2 * n
        if tls == "tcp":
            assert h["stats"]["direct_ops"] == 0


# ------------------------------------------------------ single-process suite under tcp

def test_engine_suite_under_tcp():
    """tests/test_engine.py (the data-moving part) again with UCX_TLS=tcp set before UCX starts."""
    here = os.path.dirname(os.path.abspath(__file__))
    select = ("write_read_sizes or unaligned or (batch_10000 and registered) or post_and_flush "
              "or transfer_async_status or notify_implies_data or atomics_vs_model "
              "or unregistered_remote or writes_nothing or stats_return")
    env = child_env("tcp")
    p = subprocess.run(
        [sys.executable, "-m", "pytest", os.path.join(here, "test_engine.py"), "-q", "-p", "no:cacheprovider",
         "-x", "-k", select],
        env=env, capture_output=True, text=True, timeout=90, cwd=os.path.dirname(here))
    tail = (p.stdout + p.stderr)[-4000:]
    assert p.returncode == 0, tail
    assert " passed" in p.stdout and "failed" not in p.stdout, tail


# ------------------------------------------------------------------ import order

IMPORT_SCRIPT = textwrap.dedent(r'''
    import json, sys
    if sys.argv[1] == "mpi-first":
        from mpi4py import MPI
        import hixl_rma
    else:
        import hixl_rma
        from mpi4py import MPI
    import numpy as np
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    a.connect(b.address)
    src = np.arange(1 << 16, dtype=np.uint32).view(np.uint8)
    dst = np.zeros_like(src)
    a.register_mem(src)
    b.register_mem(dst)
    a.transfer_sync(b.address, hixl_rma.WRITE, [(src.ctypes.data, dst.ctypes.data, src.nbytes)])
    ok = bool(np.array_equal(src, dst))
    h = b.alloc_mem(8)
    np.frombuffer(h, dtype=np.uint64)[0] = 40
    old = a.atomic_fetch_add(b.address, h.addr, 2)
    ok = ok and old == 40 and int(np.frombuffer(h, dtype=np.uint64)[0]) == 42
    a.finalize(); b.finalize()
    print(json.dumps(dict(version=list(hixl_rma.UCX_VERSION), origin=hixl_rma.UCX_ORIGIN, ok=ok,
                          mpi=MPI.Get_library_version().splitlines()[0], size=MPI.COMM_WORLD.Get_size())))
''')


@pytest.mark.parametrize("order", ["mpi-first", "hixl-first"])
def test_import_order(tmp_path, order):
    script = tmp_path / "imp.py"
    script.write_text(IMPORT_SCRIPT)
    p = subprocess.run([sys.executable, str(script), order], env=child_env(None), capture_output=True,
                       text=True, timeout=CHILD_TIMEOUT, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    print(order, res["version"], res["origin"], res["mpi"])
    assert res["ok"]
    assert res["size"] == 1
    assert "WARN" not in p.stderr, p.stderr
    assert 1 <= res["version"][0] and (1, 15) <= tuple(res["version"][:2]) <= (1, 22)
    if order == "mpi-first":
        # MPICH's bundled UCX was loaded first and is reused, not a second UCX
        assert res["origin"] == "already in the process", res
    else:
        assert res["origin"].startswith("libucx wheel"), res
