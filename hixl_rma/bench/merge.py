"""Workload ``merge``: one table from several ``rma`` JSON files.

``python -m hixl_rma.bench merge A.json B.json ... [--json OUT] [--plot OUT.png]``

Typically the ``rma`` benchmark run under mpi4py over MPICH and over Open MPI
(``tools/measure/bench_both_mpis.sh``), possibly several times each. Figures are
matched by id; the repetitions of one implementation in several files are
pooled (median, min and max over all of them: hixl and ucx_perftest appear
in every file, each MPI in its own). An MPI is compared with the hixl
repetitions of its own runs (``hixl@mpich``, ``hixl@openmpi`` in the JSON:
same conditions, interleaved), so load that differs between runs does not
tilt the ratios; ucx_perftest and memcpy, measured in every run, are
compared with all of hixl's. A "best MPI" target must hold against each
MPI. Nothing is measured: this runs without MPI.
"""
from __future__ import annotations

import json

from . import report as rp
from . import rma

NAME = "merge"
HELP = "merge rma JSON files (e.g. an MPICH and an Open MPI run) into one table"


def add_arguments(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE.json", help="JSON files written by 'rma --json'")
    p.add_argument("--plot", metavar="FILE.png", help="bandwidth vs message size of the merged numbers")


def merge(results: list) -> dict:
    if not results:
        raise ValueError("nothing to merge")
    for r in results:
        if r.get("workload") != rma.NAME:
            raise ValueError(f"not an rma result (workload {r.get('workload')!r})")
    impls: dict = {}
    for r in results:
        for k, v in r["impls"].items():
            if k not in impls:
                impls[k] = dict(v)
    # column order: hixl, the MPIs, ucx_perftest, memcpy
    rank = {"hixl": 0, "mpi": 1, "ucx": 2, "memcpy": 3}
    impls = dict(sorted(impls.items(), key=lambda kv: rank.get(kv[1].get("kind"), 9)))

    figs: dict = {}
    samples: dict = {}
    for r in results:
        mpi_key = (r.get("machine", {}).get("mpi") or {}).get("key")
        mpi_measured = any(v.get("kind") == "mpi" for v in r["impls"].values())
        for f in r["figures"]:
            fid = f["id"]
            if fid not in figs:
                figs[fid] = {k: v for k, v in f.items() if k not in ("results", "iters")}
                figs[fid]["iters"] = {}
                samples[fid] = {}
            for k, s in f["results"].items():
                if s and s.get("samples"):
                    samples[fid].setdefault(k, []).extend(s["samples"])
                    if k == "hixl" and mpi_key and mpi_measured:
                        # hixl as measured beside this MPI (same runs, interleaved):
                        # what the hixl/MPI ratios and targets compare with
                        samples[fid].setdefault(f"hixl@{mpi_key}", []).extend(s["samples"])
            for k, n in (f.get("iters") or {}).items():
                figs[fid]["iters"].setdefault(k, []).append(n)
            hits = f.get("deadline_hits")
            if hits:
                acc = figs[fid].setdefault("deadline_hits", {})
                for k, v in hits.items():
                    acc[k] = acc.get(k, 0) + v
    for fid, f in figs.items():
        f["results"] = {k: rp.summarize(v) for k, v in samples[fid].items()}
        f["by_file"] = [{k: (s or {}).get("median") for k, s in g["results"].items()}
                        for r in results for g in r["figures"] if g["id"] == fid]

    first = results[0]
    runs = [run for r in results for run in r.get("runs", [])]
    verified: dict = {}
    for i, r in enumerate(results):
        for k, v in (r.get("verified") or {}).items():
            verified[f"{k}#{i}"] = v
    perf = [r.get("ucx_perftest") for r in results if r.get("ucx_perftest")]
    merged = {
        "workload": rma.NAME,
        "merged_from": len(results),
        "machine": dict(first.get("machine", {}),
                        mpis=[r.get("machine", {}).get("mpi") for r in results]),
        "config": dict(first.get("config", {}),
                       reps=f"{'+'.join(str(r.get('config', {}).get('reps')) for r in results)} (pooled)"),
        "impls": impls,
        "figures": list(figs.values()),
        "verified": verified,
        "ucx_perftest": {"version": perf[0].get("version") if perf else None,
                         "error": next((p["error"] for p in perf if p.get("error")), None)} if perf else None,
        "runs": runs,
    }
    merged["targets"] = rma.compute_targets(merged)
    merged["ok"] = all(v is not False for v in verified.values())
    return merged


def run(args) -> dict:
    results = []
    for path in args.files:
        with open(path) as f:
            results.append(json.load(f))
    merged = merge(results)
    merged["files"] = list(args.files)
    if args.plot:
        rma.plot(merged, args.plot)
    return merged


report = rma.report
