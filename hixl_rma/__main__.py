"""``python -m hixl_rma [options] (script.py | -m module) [args ...]``: run an
unmodified mpi4py program with ``MPI.Win`` served by hixl_rma;
``--check-races`` runs it under the race detector, which prints the races
found at the end and exits non-zero (3) when there was one, unless
``--keep-going`` (or ``--races-json``, which writes the report)."""
import argparse
import os
import runpy
import sys

DESCRIPTION = ("Run an unmodified mpi4py program with MPI.Win served by hixl_rma (one-sided RMA moved by a "
               "HIXL engine on UCX). Launch it on every rank: mpiexec -n 2 python -m hixl_rma prog.py")
EPILOG = ("Options go before the program; everything after it is the program's own argv. "
          "Exit status: the program's, 3 when --check-races found a race, 2 for a bad command line. "
          "Settings are HIXL_RMA_* environment variables (see the documentation's Settings page).")


def version_lines():
    """hixl_rma's version, its UCX, and the NIXL versions its NIXL backend takes."""
    from . import __version__, nixl
    from .runtime import ucx as _ucx

    ucx, origin = _ucx.load()
    return [f"hixl_rma {__version__} (UCX {'.'.join(map(str, ucx))}, {origin})", nixl.supported_line()]


class _Version(argparse.Action):
    """--version: printed when asked, so the UCX library is loaded only then."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print("\n".join(version_lines()))
        parser.exit(0)


def parser():
    """The command line (argparse): abbreviations off, so a mistyped option
    is an error rather than a prefix of another or a script's name."""
    ap = argparse.ArgumentParser(prog="python -m hixl_rma", description=DESCRIPTION, epilog=EPILOG,
                                 allow_abbrev=False)
    ap.add_argument("--version", action=_Version, help="print hixl_rma's, UCX's and the NIXL backend's versions")
    races = ap.add_argument_group("race detector")
    races.add_argument("--check-races", action="store_true",
                       help="run under the race detector: report conflicting RMA and local accesses not ordered "
                            "by MPI synchronization, and exit 3 if any")
    races.add_argument("--keep-going", action="store_true",
                       help="with --check-races: report races but exit with the program's own status")
    races.add_argument("--races-json", metavar="FILE",
                       help="with --check-races: also write the report to FILE as JSON (implies --keep-going)")
    ap.add_argument("-m", dest="module", metavar="MODULE", help="run library module MODULE as a script (as python -m)")
    ap.add_argument("script", nargs="?", help="the program to run (a path)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="the program's own arguments")
    return ap


def parse(argv):
    """(options, the program's argv): argparse's namespace and sys.argv for the program."""
    ap = parser()
    # Up to the program (the first word not an option nor an option's value),
    # argparse's; from it on, the program's, options included.
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":
        i += 2 if argv[i] == "--races-json" else 1
    head = argv[:i]
    if i < len(argv) and argv[i] == "-m":
        if i + 1 >= len(argv):
            ap.error("argument -m: expected one argument (the module to run)")
        opts = ap.parse_args([*head, "-m", argv[i + 1]])
        prog = argv[i + 1:]
    else:
        opts = ap.parse_args(head + argv[i:i + 1])
        if opts.script is None:
            ap.error("a program to run is required: script.py or -m module")
        if not os.path.isfile(opts.script):
            ap.error(f"can't open file {opts.script!r}: no such file (options go before the program)")
        prog = argv[i:]
    if (opts.keep_going or opts.races_json) and not opts.check_races:
        ap.error("--keep-going and --races-json go with --check-races")
    return opts, prog


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    opts, prog = parse(argv)
    races, keep_going, json_path = opts.check_races, opts.keep_going, opts.races_json
    from . import dropin
    dropin.install()
    if races:
        from . import races as _races
        _races.enable(keep_going=keep_going or bool(json_path), json_path=json_path, at_exit=False)
    try:
        if opts.module is not None:
            sys.argv = prog
            runpy.run_module(opts.module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = prog
            sys.path[0] = os.path.dirname(os.path.abspath(prog[0]))
            runpy.run_path(prog[0], run_name="__main__")
    except SystemExit as exc:  # sys.exit(0) is the program's normal end
        if _status(exc.code):
            if not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
            _abort(_status(exc.code), trace=False)
    except BaseException:
        _abort(1)
    found = 0
    if races:
        from . import races as _races
        found = _races.finish()
    if races and found and not (keep_going or json_path):
        return 3
    return 0


def _status(code):
    """The exit status of SystemExit(code), as Python gives it."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _abort(status, trace=True):
    """The program failed on this rank: its traceback, then the whole job
    ends (``MPI.COMM_WORLD.Abort``), as under ``python -m mpi4py``, rather
    than the other ranks waiting in their next collective for this one.
    Under the race detector, the report comes first, from the ranks that
    join it within a deadline (races/report.py's failed())."""
    sys.stdout.flush()
    sys.stderr.flush()
    MPI = sys.modules.get("mpi4py.MPI")
    live = MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized()
    if trace:
        import traceback
        # one write: mpiexec forwards a rank's stderr as it reads it, and an
        # abort that reaches it first ends the job with the rest unread (a
        # traceback printed line by line arrived as its first line alone)
        text = traceback.format_exc().encode(errors="replace")
        while text:
            text = text[os.write(2, text):]
    races = sys.modules.get("hixl_rma.races")
    if live and races is not None and races.ACTIVE is not None:
        from .races.report import failed
        failed()
        sys.stdout.flush()
        sys.stderr.flush()
    if live and (trace or (races is not None and races.ACTIVE is not None)):
        import time
        time.sleep(0.2)  # the forwarder's turn to read it before the abort
    if live:
        MPI.COMM_WORLD.Abort(status)
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
