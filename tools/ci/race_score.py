#!/usr/bin/env python3
"""Score hixl_rma's race detector on the Python versions of RMARaceBench's
MPI RMA cases (tests/races/cases), like the benchmark's own harness:
TP/TN/FP/FN, precision, recall and accuracy per group and in all.

    python tools/ci/race_score.py [--jobs N] [--check] [--only PATTERN] [--json FILE]

Each case runs under ``mpiexec -n <its nprocs> python -m hixl_rma
--check-races --races-json <tmp>`` with a timeout; a case counts as
"race reported" when the report lists a race or a polling warning. A case
that fails to run (non-zero exit, timeout) is an error: it is shown, and
``--check`` fails on it. ``--check`` exits non-zero when precision < 1.0
or recall < 0.97 or any case errored (for CI).
"""
import argparse
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CASES = os.path.join(ROOT, "tests", "races", "cases")
GROUPS = ("conflict", "sync", "atomic", "hybrid")


def cases(pattern=None):
    out = []
    for path in sorted(glob.glob(os.path.join(CASES, "*", "[0-9]*.py"))):
        group = os.path.basename(os.path.dirname(path))
        text = open(path).read()
        race = re.search(r"^# race: (yes|no)$", text, re.M).group(1) == "yes"
        nprocs = int(re.search(r"^# nprocs: (\d+)$", text, re.M).group(1))
        pair = [i + 1 for i, line in enumerate(text.splitlines()) if line.rstrip().endswith("# CONFLICT")]
        name = f"{group}/{os.path.basename(path)[:-3]}"
        if pattern and not re.search(pattern, name):
            continue
        out.append({"path": path, "group": group, "name": name, "race": race, "nprocs": nprocs, "pair": pair})
    return out


def run(case, timeout, mpiexec):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "races.json")
        env = dict(os.environ)
        env["PYTHONPATH"] = CASES + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("HIXL_RMA_TIMEOUT_MS", "20000")
        cmd = [mpiexec, "-n", str(case["nprocs"]), sys.executable, "-m", "hixl_rma", "--check-races",
               "--races-json", report, case["path"]]
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            text = b"".join(x for x in (exc.stdout, exc.stderr) if x).decode(errors="replace")
            return dict(case, error=f"timeout after {timeout} s", output=text, seconds=time.monotonic() - t0)
        out = dict(case, seconds=time.monotonic() - t0, output=p.stdout + p.stderr)
        if p.returncode != 0 or not os.path.exists(report):
            out["error"] = f"exit status {p.returncode}"
            return out
        with open(report) as f:
            rep = json.load(f)
        out["reports"] = rep["reports"]
        out["reported"] = bool(rep["reports"])
        lines = set()
        for r in rep["reports"]:
            for side in (r["a"], r["b"]):
                if side["where"].startswith(case["path"] + ":"):
                    lines.add(int(side["where"].rsplit(":", 1)[1]))
        out["pair_seen"] = bool(case["pair"]) and set(case["pair"]) <= lines
        return out


def score(results):
    def stats(rs):
        tp = sum(1 for r in rs if r["race"] and r.get("reported"))
        fn = sum(1 for r in rs if r["race"] and not r.get("reported"))
        fp = sum(1 for r in rs if not r["race"] and r.get("reported"))
        tn = sum(1 for r in rs if not r["race"] and not r.get("reported"))
        prec = tp / (tp + fp) if tp + fp else 1.0
        rec = tp / (tp + fn) if tp + fn else 1.0
        acc = (tp + tn) / len(rs) if rs else 1.0
        return dict(n=len(rs), tp=tp, tn=tn, fp=fp, fn=fn, precision=prec, recall=rec, accuracy=acc,
                    errors=sum(1 for r in rs if "error" in r))
    table = {g: stats([r for r in results if r["group"] == g]) for g in GROUPS}
    table["all"] = stats(results)
    return table


def _watch_kind():
    """How the cases' line watch runs with this Python (lines.start's choice)."""
    try:
        from hixl_rma.races import _linetrace
    except ImportError:
        return "sys.settrace (no C extension)"
    if _linetrace.monitoring():
        return "sys.monitoring"
    return "C trace function" + (", unwatched frames untraced" if _linetrace.hooks() else "")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--check", action="store_true", help="exit 1 unless precision 1.0, recall >= 0.97, no errors")
    p.add_argument("--only", help="regular expression on group/name")
    p.add_argument("--timeout", type=int, default=90, help="seconds per case")
    p.add_argument("--json", help="write every case's result here")
    p.add_argument("--verbose", "-v", action="store_true", help="print each case's reports")
    args = p.parse_args(argv)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(mpiexec):
        mpiexec = "mpiexec"
    todo = cases(args.only)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: run(c, args.timeout, mpiexec), todo))
    wall = time.monotonic() - t0
    for r in results:
        if "error" in r:
            verdict = "ERROR " + r["error"]
        else:
            verdict = {(True, True): "TP", (False, False): "TN", (False, True): "FP",
                       (True, False): "FN"}[(r["race"], r["reported"])]
            if verdict == "TP" and not r["pair_seen"]:
                verdict += " (other pair)"
        print(f"{r['name']:55s} {'race' if r['race'] else 'no  '}  {verdict:18s} {r['seconds']:5.1f} s")
        if "error" in r or args.verbose or verdict in ("FP", "FN"):
            for line in r.get("output", "").strip().splitlines()[-12:]:
                print("    | " + line)
    table = score(results)
    print()
    print(f"{'group':10s} {'cases':>5s} {'TP':>4s} {'TN':>4s} {'FP':>4s} {'FN':>4s} {'err':>4s} "
          f"{'precision':>9s} {'recall':>7s} {'accuracy':>8s}")
    for g, s in table.items():
        print(f"{g:10s} {s['n']:5d} {s['tp']:4d} {s['tn']:4d} {s['fp']:4d} {s['fn']:4d} {s['errors']:4d} "
              f"{s['precision']:9.3f} {s['recall']:7.3f} {s['accuracy']:8.3f}")
    print(f"\n{len(results)} cases in {wall:.0f} s with {args.jobs} jobs; Python {sys.version.split()[0]}, "
          f"line watch: {_watch_kind()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"table": table, "cases": results, "seconds": wall}, f, indent=1)
    if args.check:
        s = table["all"]
        if s["errors"] or s["precision"] < 1.0 or s["recall"] < 0.97:
            print("race_score --check: FAILED (needs precision 1.0, recall >= 0.97, no errors)")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
