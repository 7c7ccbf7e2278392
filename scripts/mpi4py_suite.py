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
own reason), and every demo exits 0 with the output it should. A table of
the results is printed; the exit status is 0 only on a pass.

    python scripts/mpi4py_suite.py [--sizes 1,2,3] [--sdist DIR_OR_TARBALL]
"""
import argparse
import os
import re
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
    logdir/name.RANK; returns (exit status, [rank logs], seconds)."""
    launcher = os.environ.get("MPIEXEC", "mpiexec")
    wrapped = f'{command} > "{logdir}/{name}.{RANK}" 2>&1'
    t0 = time.monotonic()
    try:
        rc = subprocess.run([launcher, "-n", str(n), "sh", "-c", wrapped], cwd=cwd, timeout=timeout,
                            input=stdin, text=True, capture_output=True).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
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
    """Problems of one suite at size n (empty: pass), and a summary."""
    test_dir = os.path.join(root, "test")
    py = f'"{sys.executable}"'
    rc0, plain, _ = mpiexec(n, f"{py} {suite} -v", test_dir, logdir, f"plain-{suite}-{n}", timeout)
    rc1, ours, secs = mpiexec(n, f"{py} -m hixl_rma {suite} -v", test_dir, logdir, f"hixl-{suite}-{n}", timeout)
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
    return problems, summary


def run_demo(root, n, demo, logdir, timeout):
    demo_dir = os.path.join(root, "demo", os.path.dirname(demo))
    script = os.path.basename(demo)
    stdin = "1000\n0\n" if "cpi" in script else None  # cpi asks for intervals, 0 quits
    rc, logs, secs = mpiexec(n, f'"{sys.executable}" -m hixl_rma {script}', demo_dir, logdir,
                             f"demo-{script}-{n}", timeout, stdin=stdin)
    problems = [] if rc == 0 else [f"exit status {rc}: {logs[0][-400:]!r}"]
    if "cpi" in script and not re.search(r"pi is approximately 3\.1415", logs[0]):
        problems.append(f"no value of pi in {logs[0][-200:]!r}")
    return problems, f"rc {rc}, {secs:.1f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,2,3")
    ap.add_argument("--sdist", help="an unpacked mpi4py sdist, or its .tar.gz (default: download it)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per mpiexec run")
    args = ap.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    failed = []
    with tempfile.TemporaryDirectory(prefix="mpi4py-suite-") as work:
        root = fetch(args.sdist, work)
        logdir = os.path.join(work, "logs")
        os.makedirs(logdir)
        for n in [int(x) for x in args.sizes.split(",")]:
            for suite in SUITES:
                problems, summary = run_suite(root, n, suite, logdir, args.timeout)
                print(f"-n {n}  {suite:<20} {'PASS' if not problems else 'FAIL'}  {summary}", flush=True)
                failed += [f"-n {n} {suite}: {p}" for p in problems]
            for demo in DEMOS:
                problems, summary = run_demo(root, n, demo, logdir, args.timeout)
                print(f"-n {n}  {demo:<28} {'PASS' if not problems else 'FAIL'}  {summary}", flush=True)
                failed += [f"-n {n} {demo}: {p}" for p in problems]
    if failed:
        print(f"\n{len(failed)} problems:")
        for p in failed[:60]:
            print("  " + p)
        return 1
    print("mpi4py's RMA suites and demos: all passed on hixl_rma.Win")
    return 0


if __name__ == "__main__":
    sys.exit(main())
