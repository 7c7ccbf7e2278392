"""``mpiexec -n 2 python -m hixl_rma.bench osu TEST``: OSU's nine one-sided
tests in Python. Tiny runs (``-m 1:64 -i 10 -x 2``) of each test, on
hixl_rma.Win and, for put and fetch-and-op latency, on mpi4py's MPI.Win:
OSU's header lines and columns, one row per size, positive figures, and
the data check the workload adds (a fetch-and-op target ends at the number
of calls made). Bad options end with a message and no traceback.

No timing assertions: the numbers only have to exist and be positive.
"""
import json
import re
import sys

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(120)

TINY = ["-m", "1:64", "-i", "10", "-x", "2"]
SIZES = [1, 2, 4, 8, 16, 32, 64]
ROW = re.compile(r"^(\d+) +(\d+\.\d\d)$")

TITLES = {
    "put_latency": "MPI_Put Latency Test", "get_latency": "MPI_Get latency Test",
    "put_bw": "MPI_Put Bandwidth Test", "get_bw": "MPI_Get Bandwidth Test",
    "put_bibw": "MPI_Put Bi-directional Bandwidth Test", "acc_latency": "MPI_Accumulate latency Test",
    "fop_latency": "MPI_Fetch_and_op latency Test", "cas_latency": "MPI_Compare_and_swap latency Test",
    "get_acc_latency": "MPI_Get_accumulate latency Test",
}
WINDOWS = {"create": "MPI_Win_create", "allocate": "MPI_Win_allocate", "dynamic": "MPI_Win_create_dynamic"}
SYNCS = {"flush": "MPI_Win_flush", "flush_local": "MPI_Win_flush_local", "lock": "MPI_Win_lock/unlock",
         "lock_all": "MPI_Win_lock_all/unlock_all", "fence": "MPI_Win_fence",
         "pscw": "MPI_Win_post/start/complete/wait"}

# (test as typed, impl, window, sync): every test once, several windows and
# synchronizations, both implementations for put and fetch-and-op latency
CASES = [
    ("osu_put_latency", "hixl", "create", "flush"),
    ("put_latency", "mpi", "create", "flush"),
    ("get_latency", "hixl", "allocate", "fence"),
    ("put_bw", "hixl", "dynamic", "flush"),
    ("get_bw", "hixl", "create", "pscw"),
    ("put_bibw", "hixl", None, None),  # OSU's defaults: allocate, pscw
    ("acc_latency", "hixl", "create", "lock"),
    ("fop_latency", "hixl", "create", "flush"),
    ("fop_latency", "mpi", "allocate", "flush"),
    ("cas_latency", "hixl", "allocate", "lock_all"),
    ("get_acc_latency", "hixl", "create", "flush_local"),
]


def _run(args, tmp_path, ranks=2, timeout=60):
    env = procutil.clean_env()
    env.pop("UCX_TLS", None)  # the default transports, as a user would run it
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [sys.executable, "-m", "hixl_rma.bench", "osu", *args]
    if ranks:
        cmd = [procutil.mpiexec(), "-n", str(ranks), *cmd]
    return procutil.run(cmd, env, timeout, cwd=str(tmp_path))


@pytest.mark.parametrize("test,impl,window,sync", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in CASES])
def test_osu_tiny_run(tmp_path, test, impl, window, sync):
    out_json = tmp_path / "osu.json"
    args = [test, *TINY, "--impl", impl, "--json", str(out_json)]
    if window:
        args += ["-w", window]
    if sync:
        args += ["-s", sync]
    rc, out = _run(args, tmp_path)
    assert rc == 0, out[-4000:]
    name = test[4:] if test.startswith("osu_") else test
    window = window or "allocate"
    sync = sync or ("pscw" if name == "put_bibw" else "flush")
    lines = [line for line in out.splitlines() if line.startswith("#") or ROW.match(line)]
    assert lines[:3] == [f"# OSU {TITLES[name]} v7.4", f"# Window creation: {WINDOWS[window]}",
                         f"# Synchronization: {SYNCS[sync]}"], out
    label = "hixl_rma.Win" if impl == "hixl" else "mpi4py MPI.Win"
    assert lines[3].startswith(f"# Implementation: {label}"), out
    column = "Latency (us)" if name.endswith("latency") else "Bandwidth (MB/s)"
    assert lines[4] == "# Size" + " " * 4 + column.rjust(20), out
    rows = [ROW.match(line) for line in lines[5:]]
    assert all(rows), out
    sizes = [int(m.group(1)) for m in rows]
    assert sizes == ([8] if name in ("fop_latency", "cas_latency") else SIZES), out
    # positive figures (a bandwidth of 1 B messages on a loaded machine may
    # print as 0.00 at OSU's precision: its unrounded value is in the JSON)
    assert all(float(m.group(2)) > 0 for m in rows) or column.startswith("Bandwidth"), out
    assert all(len(line) == 30 for line in lines[5:]), out  # OSU's widths: 10 + 20
    assert out.count("# Window creation") == 1, out  # one rank reports

    res = json.loads(out_json.read_text())
    assert res["workload"] == "osu" and res["ok"] is True and res["verified"] is True
    assert [r["size"] for r in res["rows"]] == sizes
    assert all(r["value"] > 0 and r["verified"] is True for r in res["rows"]), res["rows"]
    assert all(r["iterations"] == 10 and r["skip"] == 2 for r in res["rows"])


def test_fop_target_counts_the_calls(tmp_path):
    """The benchmark moves data: every Fetch_and_op(SUM, 1) of the run lands
    (the workload reads the target's integer back after the timed loop and
    compares it with the calls made: 2 + 10 per rank as origin here)."""
    out_json = tmp_path / "osu.json"
    rc, out = _run(["fop_latency", "-w", "create", "-s", "fence", "-i", "10", "-x", "2", "--json", str(out_json)],
                   tmp_path)
    assert rc == 0, out[-4000:]
    assert "data check failed" not in out
    res = json.loads(out_json.read_text())
    assert res["sync"] == "fence" and res["rows"][0]["verified"] is True


@pytest.mark.parametrize("args,message", [
    (["put_bibw", "-s", "lock"], "this test takes -s pscw|fence"),
    (["put_latency", "-w", "nonsense"], "invalid choice: 'nonsense'"),
    (["put_latency", "-m", "8:4"], "MIN 8 is above MAX 4"),
    (["put_latency", "-i", "0"], "at least 1 iteration"),
    (["nonsense_latency"], "unknown test 'nonsense_latency'"),
])
def test_bad_option(tmp_path, args, message):
    """Refused before any window is made, with a message and no traceback
    (one process is enough: the options are checked before MPI is used)."""
    rc, out = _run(args, tmp_path, ranks=0, timeout=60)
    assert rc != 0, out
    assert message in out, out
    assert "Traceback" not in out, out
