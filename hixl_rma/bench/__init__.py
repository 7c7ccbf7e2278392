"""``python -m hixl_rma.bench WORKLOAD`` / ``hixl-rma-bench WORKLOAD``: benchmarks.

Each workload is a module of this package listed in :data:`WORKLOADS` with

* ``NAME``, ``HELP`` and its docstring (the subcommand's description),
* ``add_arguments(parser)`` for its own options (``--json``, ``--reps`` and
  ``--quick`` are added for every workload),
* ``run(args) -> dict``: the measurement, a JSON-serialisable dict; a false
  ``"ok"`` key makes the command exit with status 1,
* ``report(result)``: prints it (tables through :mod:`hixl_rma.bench.report`).

A workload run by several MPI ranks reports once: ``run`` returns
``{"quiet": True, "ok": ...}`` on the other ranks, which then print and
write nothing.

Workload modules are imported to build the command line, so they import
nothing heavy at module level: ``hixl_rma`` (which loads UCX) and ``mpi4py``
are imported inside ``run``, in the order the workload needs (one UCX per
process: see the engine page of the documentation).
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand name -> module implementing it
WORKLOADS = {
    "engine": "hixl_rma.bench.engine",
    "rma": "hixl_rma.bench.rma",
    "queue": "hixl_rma.bench.queue",
    "merge": "hixl_rma.bench.merge",
    "nixl": "hixl_rma.bench.nixl",
    "prio": "hixl_rma.bench.prio",
    "osu": "hixl_rma.bench.osu",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hixl-rma-bench", description="hixl_rma benchmarks against raw UCX and MPI RMA.")
    sub = parser.add_subparsers(dest="workload", metavar="WORKLOAD")
    for name, modname in WORKLOADS.items():
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=mod.HELP, description=mod.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--json", metavar="FILE", help="also write all numbers and the machine info to FILE")
        p.add_argument("--reps", type=int, default=None,
                       help="measured repetitions per figure (default 5; --quick: 3)")
        p.add_argument("--quick", action="store_true", help="tiny iteration counts: a smoke test, not a measurement")
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.workload:
        parser.print_help(sys.stderr)
        return 2
    mod = args._module
    result = mod.run(args)
    if result.get("quiet"):  # another MPI rank reports
        return 0 if result.get("ok", True) else 1
    mod.report(result)
    if args.json:
        from .report import write_json

        write_json(args.json, result)
    return 0 if result.get("ok", True) else 1
