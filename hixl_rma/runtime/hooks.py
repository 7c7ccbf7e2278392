"""Where tools attach to the library: the one place (DESIGN.md, "Layers").

The library consults these hooks and never imports a tool; a tool (the
race detector, telemetry's exporter) fills them. Off, each is None or an
empty list, and what consults it costs one check, at window creation or
in a barrier, never in a data call.

- ``window_class(cls)``: the class window creation makes instead of
  ``cls``, or None for ``cls`` itself (the race detector's checked window);
- ``program_barrier(comm, wait)``: the program's barriers go through it
  (the runtime's ``barrier(..., program=True)``: the HIXL face's
  ``Fence``, ``Communicator.Barrier``), the library's own do not; ``wait(start)``
  completes the nonblocking collective ``start()`` begins, with the
  runtime's deadline;
- ``on_start(fn)`` / ``on_stop(fn)``: observers of Init, called as
  ``fn(rank, listen)`` before the engine starts (``listen``: the address
  it will listen on), and of Finalize, called as ``fn()`` once the runtime
  is gone (or Init failed);
- ``hand_out_world(comm)``: the world communicator a tool hands out in the
  place of mpi4py's (``hixl_rma.COMM_WORLD``, the runtime's world);
- ``TOOLS`` and ``requested()``: the tools ``HIXL_RMA_CHECK`` names, which
  the faces load by module name (``hixl_rma/__init__``);
- ``when_mpi_imported(after)``: ``after(MPI)`` once the program imports
  ``mpi4py.MPI`` (the drop-in's replacement, a tool's start).
"""
import importlib.abc
import importlib.util
import sys

from hixl_rma.ground import config

#: tool name in HIXL_RMA_CHECK -> its module, which has ``enable()``
TOOLS = {"races": "hixl_rma.races"}

window_class = None
program_barrier = None
#: the world communicator a tool hands out, or None (mpi4py's)
world = None
_started = []
_stopped = []


def requested():
    """The names of the tools ``HIXL_RMA_CHECK`` asks for (of ``TOOLS``)."""
    return [name for name in config.check_tools() if name in TOOLS]


def on_start(fn):
    """Call ``fn(rank, listen)`` at every Init, before the engine starts."""
    if fn not in _started:
        _started.append(fn)
    return fn


def on_stop(fn):
    """Call ``fn()`` at every Finalize (and after an Init that failed)."""
    if fn not in _stopped:
        _stopped.append(fn)
    return fn


def started(rank, listen):
    """The runtime's part: Init is about to start the engine."""
    for fn in list(_started):
        fn(rank, listen)


def stopped():
    """The runtime's part: Finalize is done (or Init failed)."""
    for fn in list(_stopped):
        fn()


def hand_out_world(comm):
    """Make ``comm`` the world communicator the library hands out."""
    global world
    world = comm
    constants = sys.modules.get(__package__ + ".constants")
    if constants is not None:
        constants.COMM_WORLD = comm
    package = sys.modules.get(__package__)
    if package is not None and "COMM_WORLD" in vars(package):
        package.COMM_WORLD = comm  # the package's copy of a name read before


def when_mpi_imported(after):
    """Run ``after(mpi4py.MPI)`` now if it is imported, else as the
    program's import of it completes (before that import returns). The
    finder, to take it out again while it waits (``sys.meta_path``), or None."""
    if "mpi4py.MPI" in sys.modules:
        after(sys.modules["mpi4py.MPI"])
        return None
    finder = OnMPIImport(after)
    sys.meta_path.insert(0, finder)
    return finder


class OnMPIImport(importlib.abc.MetaPathFinder):
    """Finds ``mpi4py.MPI`` as the import system would, and runs
    ``after(module)`` once its module has run (so MPI is initialized, or
    not, as the program's ``mpi4py.rc`` says): the drop-in's replacement,
    the race detector's start."""

    def __init__(self, after):
        self.after = after

    def find_spec(self, name, path=None, target=None):
        if name != "mpi4py.MPI":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _Then(spec.loader, self.after)
        return spec


class _Then(importlib.abc.Loader):
    """A loader that runs ``after(module)`` once ``loader`` executed it."""

    def __init__(self, loader, after):
        self.loader, self.after = loader, after

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.after(module)
