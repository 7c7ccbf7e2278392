"""The example programs run as users run them: ``mpiexec -n N python example.py``.

A single-process test: it launches mpiexec itself, so it must not run under
mpiexec (the launcher's environment is stripped from the child's).
"""
import pathlib
import re
import subprocess
import sys

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(150)

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


_mpiexec = procutil.mpiexec
_clean_env = procutil.clean_env


@pytest.mark.parametrize("script, ranks", [
    ("hixl_write.py", 2),
    ("hixl_read.py", 2),
    ("halo_exchange.py", 2),
    ("halo_exchange.py", 3),
])
def test_example_runs_and_verifies(script, ranks):
    cmd = [_mpiexec(), "-n", str(ranks), sys.executable, str(EXAMPLES / script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_clean_env(),
                          cwd=EXAMPLES.parent)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{out}"
    assert "verified" in proc.stdout, out
    assert "MISMATCH" not in proc.stdout, out


def _nixl_installed():
    import importlib.util
    return any(importlib.util.find_spec(m) is not None for m in ("nixl", "nixl_cu12"))


NIXL = _nixl_installed()


@pytest.mark.parametrize("ranks, extra, lines", [
    (2, ["--mode", "put"], 1),
    (2, ["--mode", "get"], 1),
    (2, ["--mode", "put", "--compare", "mpi"], 2),
    (3, ["--mode", "get"], 1),  # the odd rank sits out
    (2, ["--mode", "put", "--compare", "mpi", "--compute-ms", "1"], 2),  # prefill computes per layer
    # hixl put and get, mpi4py Send/Recv and MPI.Win, NIXL put and get on its UCX backend and on
    # HIXL_RMA where installed (small sizes given)
    (2, ["--preset", "seed"], 8 if NIXL else 4),
    (2, ["--mode", "get", "--compare", "nixl"], 3 if NIXL else 1),
    (2, ["--notify", "per-block"], 2),  # a notification per block, without and with notify_batch
    (2, ["--offload", "16"], 3),  # alone, beside a bulk stream at normal, and with priorities
    (3, ["--fan", "1to2"], 2),  # one prefill into two decodes: a line per pair (and a total)
    (4, ["--fan", "2to1"], 2),  # two prefills into one decode's cache; rank 3 sits out
])
def test_kv_cache_transfer_small(ranks, extra, lines):
    cmd = [_mpiexec(), "-n", str(ranks), sys.executable, str(EXAMPLES / "kv_cache_transfer.py"),
           "--layers", "4", "--blocks", "8", "--block-kib", "16", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_clean_env(),
                          cwd=EXAMPLES.parent)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{out}"
    assert proc.stdout.count("verification: PASSED") == lines, out
    assert "FAILED" not in proc.stdout, out
    if "mpi" in extra:
        assert "hixl_rma" in proc.stdout and "mpi4py" in proc.stdout, out
    if "--fan" in extra:
        assert proc.stdout.count(f"fan={extra[1]}  total") == 1, out
        pairs = ("rank 0 -> rank 1", "rank 0 -> rank 2") if extra[1] == "1to2" else ("rank 0 -> rank 2",
                                                                                    "rank 1 -> rank 2")
        assert all(p in proc.stdout for p in pairs), out
    else:
        assert proc.stdout.count("CPU prefill") == lines, out
        assert proc.stdout.count("  backend  mode ") == 1, out  # the rows' header, once
    if "--compute-ms" in extra:
        assert proc.stdout.count("compute alone    4.00 ms") == lines, out
    if "--preset" in extra:
        for name_mode in ("hixl_rma  mode=put", "hixl_rma  mode=get", "mpi4py  mode=send", "mpi4py  mode=put"):
            assert name_mode in proc.stdout, out
    if "--preset" in extra or "nixl" in extra:
        modes = ("put", "get") if "--preset" in extra else ("get",)
        for backend in ("UCX", "HIXL_RMA"):  # NIXL on both backends, each row verified
            if NIXL:
                for mode in modes:
                    row = re.search(rf"^ *nixl/{backend}  mode={mode} .*verification: (\w+)$", proc.stdout, re.M)
                    assert row and row.group(1) == "PASSED", out
            else:
                assert re.search(rf"nixl/{backend}  skipped: (rank \d: )?NIXL not installed", proc.stdout), out
        assert "skipped" not in proc.stdout or not NIXL, out
    if "--offload" in extra:
        assert "priorities kv=normal offload=normal" in proc.stdout, out
        assert "priorities kv=high offload=bulk" in proc.stdout, out
    if "per-block" in extra:
        assert "16 notifies/layer, notify_batch 1 " in proc.stdout, out
        assert "16 notifies/layer, notify_batch 16 " in proc.stdout, out


@pytest.mark.parametrize("extra", [["--notify", "per-block", "--mode", "get"],
                                   ["--notify", "per-block", "--preset", "seed"],
                                   ["--offload", "8", "--mode", "get"]])
def test_kv_cache_transfer_refuses_what_it_does_not_run(extra):
    cmd = [sys.executable, str(EXAMPLES / "kv_cache_transfer.py"), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=_clean_env(), cwd=EXAMPLES.parent)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is a variant of hixl_rma's put mode" in proc.stderr


def test_first_contact_script_reports_every_op():
    script = EXAMPLES.parent / "tools" / "measure" / "first_contact.py"
    proc = subprocess.run([sys.executable, str(script), "--reps", "1", "--sizes", "1", "--ops", "put,notify,fop"],
                          capture_output=True, text=True, timeout=120, env=_clean_env(), cwd=EXAMPLES.parent)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    rows = {tuple(line.split()[:2]): float(line.split()[4]) for line in proc.stdout.splitlines()[1:]}
    assert set(rows) == {("hixl_rma", "put"), ("hixl_rma", "notify"), ("hixl_rma", "fop"), ("mpi4py", "put")}, out
    assert all(0 < ms < 10_000 for ms in rows.values()), out
