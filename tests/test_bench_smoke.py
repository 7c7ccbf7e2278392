"""Smoke tests of ``python -m hixl_rma.bench engine --quick`` and of
``mpiexec -n 2 python -m hixl_rma.bench rma --quick`` (+ ``merge``): they run
and write sane JSON (and a PNG).

No timing assertions: the numbers only have to exist and be positive.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)


def _positive(stat):
    return stat is not None and stat["median"] > 0 and 0 < stat["min"] <= stat["median"] <= stat["max"]


def test_engine_quick(tmp_path):
    out = tmp_path / "engine.json"
    env = dict(os.environ)
    env.pop("UCX_TLS", None)  # the default transports, as a user would run it
    proc = subprocess.run([sys.executable, "-m", "hixl_rma.bench", "engine", "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=100, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "engine/ucx" in proc.stdout  # the table was printed
    res = json.loads(out.read_text())

    for key in ("workload", "machine", "config", "bandwidth", "latency", "diagnostics", "ucx_perftest",
                "verified", "elapsed_s"):
        assert key in res, key
    assert res["workload"] == "engine"
    assert res["verified"] is True
    m = res["machine"]
    for key in ("cpu_model", "nproc", "ucx_version"):
        assert m[key], key
    assert m["nproc"] >= 1

    assert [r["size"] for r in res["bandwidth"]] == [64 << 10, 1 << 20, 16 << 20]
    for r in res["bandwidth"]:
        assert r["iters"] >= 1
        assert _positive(r["engine_gbps"]), r
    assert res["latency"]["size"] == 8
    assert _positive(res["latency"]["engine_us"])
    assert _positive(res["diagnostics"]["call_overhead_us"])

    perf = res["ucx_perftest"]
    if not perf["available"]:
        pytest.skip("ucx_perftest not found: only the engine side was checked")
    assert perf["error"] is None, perf["error"]
    for r in res["bandwidth"]:
        assert _positive(r["ucx_perftest_gbps"]), r
        assert r["ratio"] > 0
    assert _positive(res["latency"]["ucx_perftest_us"])
    assert res["latency"]["ratio"] > 0


def test_help_lists_engine():
    proc = subprocess.run([sys.executable, "-m", "hixl_rma.bench", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    for name in ("engine", "rma", "merge", "prio"):
        assert name in proc.stdout


# --------------------------------------------------------------------------- rma (under mpiexec)

def _mpiexec():
    """The mpiexec of this interpreter's environment (the MPI mpi4py uses), else PATH's."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.access(here, os.X_OK) else shutil.which("mpiexec")


@pytest.mark.timeout(330)
def test_rma_quick(tmp_path):
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    out, png = tmp_path / "rma.json", tmp_path / "rma.png"
    env = dict(os.environ)
    env.pop("UCX_TLS", None)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", TERM="dumb")
    proc = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "hixl_rma.bench", "rma", "--quick",
                           "--compare", "mpi,ucx", "--json", str(out), "--plot", str(png), "--no-progress"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "targets" in proc.stdout and "hixl/" in proc.stdout  # the tables were printed, once
    assert proc.stdout.count("W1: median") == 1
    res = json.loads(out.read_text())
    for key in ("workload", "machine", "config", "impls", "figures", "targets", "verified", "ucx_perftest",
                "elapsed_s"):
        assert key in res, key
    assert res["workload"] == "rma" and res["ok"] is True
    m = res["machine"]
    for key in ("cpu_model", "nproc", "ucx_version"):
        assert m[key], key
    assert m["mpi"]["library_version"] and m["mpi"]["osc"]
    kinds = {v["kind"] for v in res["impls"].values()}
    assert {"hixl", "mpi", "memcpy", "floor"} <= kinds
    mpi_key = next(k for k, v in res["impls"].items() if v["kind"] == "mpi")

    figs = {f["id"]: f for f in res["figures"]}
    assert {f["workload"] for f in res["figures"]} == {"W1", "W2", "W3", "W4", "W5", "W6", "W7"}
    assert sorted(f for f in figs if f.startswith("W7/")) == [
        f"W7/{fl}/{name}" for fl in ("allocate", "create") for name in ("empty_flush", "put_proc_null")]
    assert len([f for f in figs if f.startswith("W1/")]) == 2 * 2 * 2 * 6  # flavor x op x mode x size
    for fid, f in figs.items():
        if fid.startswith("W6/"):
            assert _positive(f["results"]["memcpy"]), fid
            continue
        assert _positive(f["results"]["hixl"]) or fid.endswith("target_cpu"), fid
        if not fid.endswith("/batch"):  # Put_batch has no MPI counterpart
            assert mpi_key in f["results"], fid
    # The floor peer (issue 24) beside the Create rows it stands for, one host.
    for fid in ("W2/create/put_flush", "W3/create/loop"):
        assert _positive(figs[fid]["results"]["floor"]), fid
    assert "floor" not in figs["W2/allocate/put_flush"]["results"]
    assert res["verified"] and all(res["verified"].values()), res["verified"]
    assert len(res["targets"]) == 31
    assert all(t["pass"] in (True, False, None) for t in res["targets"])
    if res["ucx_perftest"]["available"] and not res["ucx_perftest"]["error"]:
        assert _positive(figs[f"W1/create/put/flush/{16 << 20}"]["results"]["ucx"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # merge: the same file twice pools the repetitions
    merged, mpng = tmp_path / "merged.json", tmp_path / "merged.png"
    proc = subprocess.run([sys.executable, "-m", "hixl_rma.bench", "merge", str(out), str(out), "--json",
                           str(merged), "--plot", str(mpng)], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    mres = json.loads(merged.read_text())
    f0, f1 = figs["W2/create/put_flush"], {f["id"]: f for f in mres["figures"]}["W2/create/put_flush"]
    assert f1["results"]["hixl"]["n"] == 2 * f0["results"]["hixl"]["n"]
    assert len(mres["targets"]) == 31
    assert mpng.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(120)
def test_prio_quick(tmp_path):
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    out = tmp_path / "prio.json"
    env = dict(os.environ)
    env.pop("UCX_TLS", None)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", TERM="dumb")
    proc = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "hixl_rma.bench", "prio", "--quick",
                           "--bulk-mib", "16", "--chunk-mib", "8", "--json", str(out)],
                          capture_output=True, text=True, timeout=100, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    res = json.loads(out.read_text())
    assert res["workload"] == "prio" and res["ok"] is True
    for case in ("idle", "normal", "prio"):
        assert res["latency_s"][case]["n"] == 1 and res["latency_s"][case]["median"] > 0, case
    assert res["bulk_gbs"]["solo"]["median"] > 0
