"""``python -m hixl_rma [--check-races [--keep-going] [--races-json FILE]] prog.py [args]``
(or ``-m module``): run an unmodified mpi4py program with ``MPI.Win`` served
by hixl_rma; ``--check-races`` runs it under the race detector, which
prints the races found at the end and exits non-zero (3) when there was
one, unless ``--keep-going`` (or ``--races-json``, which writes the report)."""
import os
import runpy
import sys

USAGE = ("usage: python -m hixl_rma [--version | [--check-races [--keep-going] [--races-json FILE]] "
         "-m module | script.py] [args ...]")


def version_lines():
    """hixl_rma's version, its UCX, and the NIXL versions its NIXL backend takes."""
    from . import __version__, _ucx, nixl

    ucx, origin = _ucx.load()
    return [f"hixl_rma {__version__} (UCX {'.'.join(map(str, ucx))}, {origin})", nixl.supported_line()]


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    if argv[0] == "--version":
        print("\n".join(version_lines()))
        return 0
    races, keep_going, json_path = False, False, None
    while argv and argv[0] in ("--check-races", "--keep-going", "--races-json"):
        opt = argv.pop(0)
        if opt == "--check-races":
            races = True
        elif opt == "--keep-going":
            keep_going = True
        else:
            if not argv:
                print(USAGE, file=sys.stderr)
                return 2
            json_path = argv.pop(0)
    if (keep_going or json_path) and not races:
        print("--keep-going and --races-json go with --check-races", file=sys.stderr)
        return 2
    if not argv:
        print(USAGE, file=sys.stderr)
        return 2
    from . import dropin
    dropin.install()
    if races:
        from . import races as _races
        _races.enable(keep_going=keep_going or bool(json_path), json_path=json_path, at_exit=False)
    if argv[0] == "-m" and len(argv) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        if argv[0] == "-m":
            sys.argv = argv[1:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = argv
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
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
    if live and (trace or races is not None and races.ACTIVE is not None):
        import time
        time.sleep(0.2)  # the forwarder's turn to read it before the abort
    if live:
        MPI.COMM_WORLD.Abort(status)
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
