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
    try:
        if argv[0] == "-m":
            if len(argv) < 2:
                print(USAGE, file=sys.stderr)
                return 2
            sys.argv = argv[1:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = argv
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    finally:
        if races:
            from . import races as _races
            found = _races.finish()
    if races and found and not (keep_going or json_path):
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
