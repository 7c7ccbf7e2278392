"""The race detector on mpi4py's nxtval demo's race (the owner stores the
counter's initial value while the others already Get_accumulate it under
locks), whichever rank gets there first, and its report when the program
fails on a rank (an uncaught exception under ``python -m hixl_rma``, or
the program's own ``Abort``).

Single-process tests: the programs run under an mpiexec these tests start.
"""
import json
import time

import pytest

from support import procutil
from test_races import _run

pytestmark = pytest.mark.timeout(300)

# The counter of nxtval-mpi3.py: rank 0 stores 0 into it right after
# Allocate, the others Get_accumulate it under exclusive locks. ``late``:
# the ranks that wait a moment first, so that either the owner's own lock
# epoch (after its store) comes first, or the others' do.
NXTVAL = """
import sys, time
from array import array
from mpi4py import MPI
import numpy as np

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
late = sys.argv[1]
win = MPI.Win.Allocate(4 if rank == 0 else 0, 4, MPI.INFO_NULL, comm)
if rank == 0:
    if late == "owner":
        time.sleep(0.3)
    mem = np.frombuffer(win.tomemory(), np.int32)
    mem[0] = 0  # the store
elif late == "others":
    time.sleep(0.3)
for _ in range(3):
    one, got = array("i", [1]), array("i", [0])
    win.Lock(0)
    win.Get_accumulate([one, 1, MPI.INT], [got, 1, MPI.INT], 0, op=MPI.SUM)  # the counter
    win.Unlock(0)
{end}
"""


def _program(tmp_path, end="win.Free()"):
    prog = tmp_path / "nxtval_like.py"
    prog.write_text(NXTVAL.replace("{end}", end))
    return prog


def _lines(prog):
    text = prog.read_text().splitlines()
    return (next(i for i, s in enumerate(text, 1) if "# the store" in s),
            next(i for i, s in enumerate(text, 1) if "# the counter" in s))


def _pairs(report):
    return {(r["a"]["call"], r["a"]["rank"], r["b"]["call"], r["b"]["rank"]) for r in report["reports"]
            if r["kind"] == "race"}


@pytest.mark.parametrize("late", ["others", "owner"])
def test_owner_store_racing_the_counter_is_reported_every_run(tmp_path, late):
    """Whichever lock holder comes first, the store under no lock is unordered
    with each other rank's Get_accumulate (before: missed whenever the owner's
    own lock epoch, after its store, came before the others')."""
    prog = _program(tmp_path)
    store, counter = _lines(prog)
    for run in range(3):
        report = tmp_path / f"races{run}.json"
        p = _run(["-m", "hixl_rma", "--check-races", "--races-json", str(report), str(prog), late], n=3)
        out = p.stdout + p.stderr
        assert p.returncode == 0, out
        rep = json.loads(report.read_text())
        assert _pairs(rep) >= {("store", 0, "Get_accumulate", 1), ("store", 0, "Get_accumulate", 2)}, (run, out)
        assert f"store by rank 0 at {prog}:{store}" in out, out
        assert f"Get_accumulate op=SUM dtype=<i4 by rank 1 at {prog}:{counter}" in out, out
        assert "ran under no lock of the window" in out, out
        # its own Get_accumulates follow the store in program order: not a race
        assert ("store", 0, "Get_accumulate", 0) not in _pairs(rep), out


def test_barrier_after_the_store_orders_it(tmp_path):
    prog = tmp_path / "fixed.py"
    prog.write_text(NXTVAL.replace("{end}", "win.Free()").replace(
        "elif late == \"others\":", "comm.Barrier()\nif rank and late == \"others\":"))
    p = _run(["-m", "hixl_rma", "--check-races", str(prog), "others"], n=3)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "0 race(s), 0 warning(s)" in out, out


def test_report_printed_when_rank_0_raises(tmp_path):
    """Rank 0 fails after the race; ranks 1 and 2 reach the end and join the report."""
    prog = _program(tmp_path, end="if rank == 0:\n    raise RuntimeError('counter went wrong')")
    store, counter = _lines(prog)
    t0 = time.monotonic()
    p = _run(["-m", "hixl_rma", "--check-races", str(prog), "others"], n=3)
    took = time.monotonic() - t0
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "RuntimeError: counter went wrong" in out, out
    assert "the program failed on rank(s) 0; the report covers rank(s) 0, 1, 2" in out, out
    assert f"store by rank 0 at {prog}:{store}" in out, out
    assert f"Get_accumulate op=SUM dtype=<i4 by rank 2 at {prog}:{counter}" in out, out
    assert "2 race(s)" in out, out
    assert took < 60, (took, out)


def test_report_names_the_rank_that_never_joins(tmp_path):
    """Rank 2 waits in a Barrier rank 0 never makes: the report comes from
    ranks 0 and 1 after the failing rank's deadline, and names rank 2."""
    prog = _program(tmp_path, end="if rank == 0:\n    raise RuntimeError('counter went wrong')\n"
                                  "if rank == 2:\n    comm.Barrier()")
    t0 = time.monotonic()
    p = _run(["-m", "hixl_rma", "--check-races", str(prog), "others"], n=3)
    took = time.monotonic() - t0
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert ("the program failed on rank(s) 0; the report covers rank(s) 0, 1; rank(s) 2 did not join it "
            "within 5 s, their accesses are not in it") in out, out
    assert "store by rank 0" in out and "Get_accumulate op=SUM dtype=<i4 by rank 1" in out, out
    assert took < 60, (took, out)


def test_report_covers_a_rank_that_loops_on_window_calls(tmp_path):
    """Ranks 1 and 2 fail; rank 0 never reaches its end in time, looping on
    Lock/Get/Unlock (as nxtval-mpi3.py's mutex spins on a lock word the
    failed ranks would have cleared): its window calls send its records to
    the report (before: "the report covers rank(s) 1, 2", its store
    missing)."""
    prog = _program(tmp_path, end=(
        "if rank:\n    raise RuntimeError('counter went wrong')\n"
        "spins, end = 0, time.monotonic() + 12\n"
        "while time.monotonic() < end:\n"
        "    win.Lock(0)\n    win.Get([got, 1, MPI.INT], 0)\n    win.Unlock(0)\n    spins += 1\n"
        "print('rank 0 spun', spins, 'times', flush=True)\n"
        "raise SystemExit(3)"))
    store, _ = _lines(prog)
    p = _run(["-m", "hixl_rma", "--check-races", str(prog), "others"], n=3)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "the program failed on rank(s) 1, 2; the report covers rank(s) 0, 1, 2" in out, out
    assert f"store by rank 0 at {prog}:{store}" in out, out
    assert "2 race(s)" in out, out


def test_report_printed_when_the_program_aborts(tmp_path):
    """The program's own Abort (rank 1) reports first; the others join at their end."""
    prog = _program(tmp_path, end="comm.Barrier()\nif rank == 1:\n    comm.Abort(5)")
    t0 = time.monotonic()
    p = _run(["-m", "hixl_rma", "--check-races", str(prog), "owner"], n=3)
    took = time.monotonic() - t0
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "the program failed on rank(s) 1; the report covers rank(s) 0, 1, 2" in out, out
    assert "store by rank 0" in out and "RACE" in out, out
    assert took < 60, (took, out)


def _suite():
    return procutil.script("tools/ci/mpi4py_suite.py")


def test_suite_counts_the_racy_demos_race_as_its_outcome(tmp_path, monkeypatch):
    """tools/ci/mpi4py_suite.py runs nxtval-mpi3.py under the detector on 3
    ranks: its race reported is the pass, even when the demo's own check
    then fails (here it always does)."""
    from test_examples import _clean_env
    suite = _suite()
    monkeypatch.setattr(suite.os, "environ", _clean_env())
    demo = tmp_path / "demo" / "nxtval"
    demo.mkdir(parents=True)
    (demo / "nxtval-mpi3.py").write_text(
        NXTVAL.replace("{end}", "assert False, 'counter values repeated'").replace(
            "late = sys.argv[1]", "late = 'others'"))
    logs = tmp_path / "logs"
    logs.mkdir()
    problems, summary, names = suite.run_demo(str(tmp_path), 3, "nxtval/nxtval-mpi3.py", str(logs), 120)
    assert problems == [], (problems, summary)
    assert summary.startswith("race reported (2 pair(s); the demo then failed its own check), rc "), summary
    log = (logs / f"{names[0]}.0").read_text()
    assert "RACE on window" in log and "store by rank 0 at nxtval-mpi3.py" in log, log


def test_suite_keeps_every_ranks_log_of_a_failed_run(tmp_path, monkeypatch, capsys):
    from test_examples import _clean_env
    suite = _suite()
    monkeypatch.setattr(suite.os, "environ", _clean_env())
    logs = tmp_path / "logs"
    logs.mkdir()
    rc, got, _ = suite.mpiexec(2, '{ echo "rank $PMI_RANK was here"; test "$PMI_RANK" != 1; }', str(tmp_path),
                               str(logs), "job", 60)
    assert rc != 0 and "rank 1 was here" in got[1]
    kept = tmp_path / "kept"
    suite.keep_logs(str(logs), ["job"], 2, str(kept))
    assert (kept / "job.0").read_text() == "rank 0 was here\n"
    assert (kept / "job.1").read_text() == "rank 1 was here\n"
    out = capsys.readouterr().out
    assert f"--- {kept / 'job.0'}" in out and f"--- {kept / 'job.1'}" in out, out
    assert "| rank 1 was here" in out, out
