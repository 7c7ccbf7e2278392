"""Smoke test of ``python -m hixl_rma.bench engine --quick``: it runs and writes sane JSON.

No timing assertions: the numbers only have to exist and be positive.
"""
import json
import os
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
    assert "engine" in proc.stdout
