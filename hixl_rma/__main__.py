"""``python -m hixl_rma prog.py [args]`` / ``python -m hixl_rma -m module [args]``:
run an unmodified mpi4py program with ``MPI.Win`` served by hixl_rma."""
import os
import runpy
import sys

USAGE = "usage: python -m hixl_rma [--version | -m module | script.py] [args ...]"


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
    from . import dropin
    dropin.install()
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
