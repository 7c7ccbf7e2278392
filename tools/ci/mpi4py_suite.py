"""Run mpi4py's own RMA test suites and RMA demos on hixl_rma.Win.

Fetches the sdist of the installed mpi4py (its ``test/`` and ``demo/``; never
copied into this repository), then, at each size of ``--sizes``:

- runs ``test_rma.py``, ``test_rma_nb.py``, ``test_win.py`` and
  ``test_util_sync.py`` with plain mpi4py and through ``python -m hixl_rma``
  (``MPI.Win`` is hixl_rma's), each rank writing its own log;
- runs the demos ``demo/nxtval/*.py`` (but the threads and dynproc ones) and
  ``demo/compute-pi/cpi-rma.py`` through ``python -m hixl_rma``.

Pass: on hixl_rma every rank's run ends in OK, every test that plain mpi4py
passes passes, a test is skipped only where plain mpi4py skips it too (its
own reason), and every demo exits 0 with the output it should.

``nxtval-mpi3.py`` has a race of its own (RACY_DEMOS): rank 0 stores the
counter's initial 0 right after window creation while the other ranks may
already Get_accumulate it, so on two ranks or more its counter values, and
whether its assertion holds, depend on timing. There it runs under the race
detector (``--check-races``), and the expected outcome is that race reported
(the report is in its log), whether the demo ends or its assertion aborts
it; its run without the detector is skipped, with the reason printed. On
one rank it runs as the other demos do.

A table of the results is printed; the exit status is 0 only on a pass. The
logs of every rank of a run that failed are kept (``--logs``), and the
tail of each is printed.

    python tools/ci/mpi4py_suite.py [--sizes 1,2,3] [--sdist DIR_OR_TARBALL] [--logs DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

SUITES = ["test_rma.py", "test_rma_nb.py", "test_win.py", "test_util_sync.py"]
DEMOS = ["nxtval/nxtval-mpi3.py", "nxtval/nxtval-onesided.py", "nxtval/nxtval-scalable.py",
         "compute-pi/cpi-rma.py"]
RESULT = re.compile(r"^(test\w+) \(([\w.]+)\)(?: \((.*)\))? \.\.\. (ok|FAIL|ERROR|skipped|expected failure)"
                    r"(?: '(.*)')?", re.M)
SUMMARY = re.compile(r"^(OK|FAILED)\b.*$", re.M)
# demo -> (the race it has, on two ranks or more: (call, rank) of each side; why its plain run is skipped)
RACY_DEMOS = {"nxtval/nxtval-mpi3.py": (
    (("store", 0), ("Get_accumulate", None)),
    "rank 0 stores the counter's initial 0 right after Win.Allocate while the other ranks may already "
    "Get_accumulate it (a race of the demo's own): its values, and its assertion, depend on timing")}
TAIL_LINES = 15
RANK = "${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}}"


def fetch(sdist, workdir):
    """The unpacked sdist of the installed mpi4py: its root folder."""
    import mpi4py
    if sdist and os.path.isdir(sdist):
        return sdist
    if not sdist:
        # --no-binary for mpi4py alone: with ":all:" pip also builds the sdist's
        # build dependencies from source to read its metadata (Cython's C
        # compiled on a busy 2-core machine took more than 10 minutes).
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", "mpi4py",
                        f"mpi4py=={mpi4py.__version__}", "-d", workdir], check=True, timeout=600)
        sdist = next(os.path.join(workdir, f) for f in os.listdir(workdir) if f.endswith(".tar.gz"))
    with tarfile.open(sdist) as tar:
        tar.extractall(workdir, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(workdir)
    return os.path.join(workdir, f"mpi4py-{mpi4py.__version__}")


def mpiexec(n, command, cwd, logdir, name, timeout, stdin=None):
    """Run ``command`` (a shell string) on n ranks, each rank's output in
    logdir/name.RANK; returns (exit status, [rank logs], seconds). What
    mpiexec itself printed (an abort's note) is in logdir/name.mpiexec."""
    launcher = os.environ.get("MPIEXEC", "mpiexec")
    wrapped = f'{command} > "{logdir}/{name}.{RANK}" 2>&1'
    t0 = time.monotonic()
    try:
        p = subprocess.run([launcher, "-n", str(n), "sh", "-c", wrapped], cwd=cwd, timeout=timeout,
                           input=stdin, text=True, capture_output=True)
        rc, said = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as exc:
        rc = "timeout"
        said = b"".join(x if isinstance(x, bytes) else x.encode() for x in (exc.stdout, exc.stderr) if x).decode(
            errors="replace")
    with open(f"{logdir}/{name}.mpiexec", "w") as f:
        f.write(said)
    logs = []
    for r in range(n):
        try:
            with open(f"{logdir}/{name}.{r}", errors="replace") as f:
                logs.append(f.read())
        except OSError:
            logs.append("")
    return rc, logs, time.monotonic() - t0


def outcomes(log):
    """{(class.test, subtest): outcome} of a verbose unittest log."""
    out = {}
    for m in RESULT.finditer(log):
        key = (m.group(2), m.group(3) or "")
        out[key] = m.group(4) if m.group(4) != "skipped" else f"skipped: {m.group(5) or ''}"
    return out


def run_suite(root, n, suite, logdir, timeout):
    """Problems of one suite at size n (empty: pass), a summary, and the names of its runs' logs."""
    test_dir = os.path.join(root, "test")
    py = f'"{sys.executable}"'
    names = [f"plain-{suite}-{n}", f"hixl-{suite}-{n}"]
    rc0, plain, _ = mpiexec(n, f"{py} {suite} -v", test_dir, logdir, names[0], timeout)
    rc1, ours, secs = mpiexec(n, f"{py} -m hixl_rma {suite} -v", test_dir, logdir, names[1], timeout)
    problems = []
    if rc1 != 0:
        problems.append(f"exit status {rc1}")
    for r, log in enumerate(ours):
        m = SUMMARY.findall(log)
        if not m or m[-1] != "OK":
            problems.append(f"rank {r} did not end in OK")
    base, got = outcomes(plain[0]), outcomes(ours[0])
    for key, outcome in base.items():
        if outcome == "ok" and got.get(key) != "ok":
            problems.append(f"{key[0]} {key[1]}: {got.get(key, 'not run')} (plain mpi4py: ok)")
        if outcome.startswith("skipped") and got.get(key, outcome) != outcome:
            problems.append(f"{key[0]}: {got.get(key)} (plain mpi4py: {outcome})")
    for key, outcome in got.items():
        if outcome.startswith("skipped") and base.get(key) != outcome:
            problems.append(f"{key[0]}: {outcome} on hixl_rma only")
    n_ok = sum(1 for o in got.values() if o == "ok")
    n_skip = sum(1 for o in got.values() if o.startswith("skipped"))
    summary = (f"{n_ok} passed, {n_skip} skipped (plain mpi4py: "
               f"{sum(1 for o in base.values() if o == 'ok')} passed, rc {rc0}), {secs:.1f} s")
    return problems, summary, names


def run_demo(root, n, demo, logdir, timeout):
    """Problems of one demo at size n, a summary, the names of its run's logs."""
    demo_dir = os.path.join(root, "demo", os.path.dirname(demo))
    script = os.path.basename(demo)
    if demo in RACY_DEMOS and n > 1:
        return run_racy_demo(demo_dir, script, n, RACY_DEMOS[demo][0], logdir, timeout)
    stdin = "1000\n0\n" if "cpi" in script else None  # cpi asks for intervals, 0 quits
    name = f"demo-{script}-{n}"
    rc, logs, secs = mpiexec(n, f'"{sys.executable}" -m hixl_rma {script}', demo_dir, logdir, name, timeout,
                             stdin=stdin)
    problems = [] if rc == 0 else [f"exit status {rc}"]
    if "cpi" in script and not re.search(r"pi is approximately 3\.1415", logs[0]):
        problems.append(f"no value of pi in {logs[0][-200:]!r}")
    return problems, f"rc {rc}, {secs:.1f} s", [name]


def run_racy_demo(demo_dir, script, n, race, logdir, timeout):
    """A demo with a race of its own, under the race detector: the race
    reported is the pass, whether the demo then ends (status 0: the report
    is written, --races-json keeps going) or its own check aborts it
    (non-zero: the report comes first)."""
    name = f"races-{script}-{n}"
    report = os.path.join(logdir, f"{name}.json")
    rc, _logs, secs = mpiexec(n, f'"{sys.executable}" -m hixl_rma --check-races --races-json "{report}" {script}',
                             demo_dir, logdir, name, timeout)
    problems = []
    try:
        with open(report) as f:
            rep = json.load(f)
    except (OSError, ValueError) as exc:
        return [f"exit status {rc}, no race report ({exc})"], f"rc {rc}, {secs:.1f} s", [name]
    (call_a, rank_a), (call_b, rank_b) = race
    seen = [r for r in rep["reports"] if r["kind"] == "race" and any(
        x["call"] == call_a and x["rank"] == rank_a and y["call"] == call_b and (rank_b is None or y["rank"] == rank_b)
        and y["rank"] != x["rank"] for x, y in ((r["a"], r["b"]), (r["b"], r["a"])))]
    if not seen:
        problems.append(f"exit status {rc}: the demo's race ({call_a} by rank {rank_a}, {call_b}) not reported "
                        f"({rep['races']} race(s) reported)")
    if rc not in (0, "timeout") and not rep.get("failed"):
        problems.append(f"exit status {rc} without a failing rank in the report")
    if rc == "timeout":
        problems.append("timeout")
    how = "the demo then failed its own check" if rc != 0 else "the demo ran to its end"
    return problems, f"race reported ({len(seen)} pair(s); {how}), rc {rc}, {secs:.1f} s", [name]


def keep_logs(logdir, names, n, keep):
    """Copy every rank's log of the runs ``names`` (and mpiexec's own output)
    into ``keep``; print the tail of each."""
    os.makedirs(keep, exist_ok=True)
    for name in names:
        for suffix in [str(r) for r in range(n)] + ["mpiexec"]:
            src = os.path.join(logdir, f"{name}.{suffix}")
            if not os.path.exists(src):
                continue
            dst = os.path.join(keep, os.path.basename(src))
            shutil.copyfile(src, dst)
            with open(dst, errors="replace") as f:
                tail = f.read().splitlines()[-TAIL_LINES:]
            if not tail:
                continue
            print(f"    --- {dst} (last {len(tail)} lines)")
            for line in tail:
                print("    | " + line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,2,3")
    ap.add_argument("--sdist", help="an unpacked mpi4py sdist, or its .tar.gz (default: download it)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per mpiexec run")
    ap.add_argument("--logs", help="where every rank's log of a failed run is kept (default: a new folder in the "
                                   "temporary directory, printed)")
    args = ap.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    failed = []
    keep = args.logs
    with tempfile.TemporaryDirectory(prefix="mpi4py-suite-") as work:
        root = fetch(args.sdist, work)
        logdir = os.path.join(work, "logs")
        os.makedirs(logdir)
        for n in [int(x) for x in args.sizes.split(",")]:
            runs = [(suite, run_suite) for suite in SUITES] + [(demo, run_demo) for demo in DEMOS]
            for what, fn in runs:
                problems, summary, names = fn(root, n, what, logdir, args.timeout)
                verdict = "PASS" if not problems else "FAIL"
                print(f"-n {n}  {what:<28} {verdict}  {summary}", flush=True)
                if what in RACY_DEMOS and n > 1:
                    print(f"-n {n}  {what:<28} SKIP  without the race detector: {RACY_DEMOS[what][1]}", flush=True)
                if problems:
                    keep = keep or tempfile.mkdtemp(prefix="mpi4py-suite-failed-")
                    keep_logs(logdir, names, n, keep)
                failed += [f"-n {n} {what}: {p}" for p in problems]
    if failed:
        print(f"\n{len(failed)} problems (every rank's log of the failed runs: {keep}):")
        for p in failed[:60]:
            print("  " + p)
        return 1
    print("mpi4py's RMA suites and demos: all passed on hixl_rma.Win")
    return 0


if __name__ == "__main__":
    sys.exit(main())
