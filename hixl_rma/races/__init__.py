"""The race detector for RMA programs (off unless asked for).

On by ``python -m hixl_rma --check-races prog.py``, by
``HIXL_RMA_CHECK=races``, or by pytest's ``--hixl-races``. Off, nothing of
it runs: ``Win`` and its hot path are as they are, and the runtime's hooks
(``hixl_rma.runtime.hooks``) are empty. On, it fills them: window creation hands
out the checked subclass (``checked.py``), the program's barriers carry
clocks, ``MPI.COMM_WORLD`` becomes a
communicator whose calls carry clocks (``mpiclock.py``), the line watch
looks at the program's own lines (``lines.py``), and at the end every
rank's accesses meet at rank 0 (``check.py``), which prints each race
once; the job then exits non-zero unless told to keep going.
"""
import os
import sys

from hixl_rma.runtime import hooks

from . import state
from .settings import race_json, race_keep

#: the detector of this process while on (races.detector.Detector; state.ACTIVE)
ACTIVE = None
_classes = {}
_plain = state.plain
_options = state.options


def requested():
    """True when the environment asks for the detector (HIXL_RMA_CHECK=races)."""
    return "races" in hooks.requested()


def checked_class(cls):
    """The checked subclass of window class ``cls`` while the detector is on, else None."""
    if ACTIVE is None or _plain.on:
        return None
    if getattr(cls, "_race_checked", False):
        return cls
    sub = _classes.get(cls)
    if sub is None:
        from .checked import make_class
        sub = _classes[cls] = make_class(cls, ACTIVE)
        sub._race_checked = True
    return sub


def configure(keep_going=None, json_path=None):
    if keep_going is not None:
        _options["keep_going"] = keep_going
    if json_path is not None:
        _options["json"] = json_path


def enable(keep_going=None, json_path=None, at_exit=True):
    """Turn the detector on in this process, now if mpi4py.MPI is imported,
    else as soon as the program imports it (before MPI is used)."""
    configure(keep_going, json_path)
    if "mpi4py.MPI" in sys.modules or _hook[0] is None or _hook[0] not in sys.meta_path:
        _hook[0] = hooks.when_mpi_imported(lambda MPI: _start(MPI, at_exit))


_hook = [None]  # the finder that starts the detector when mpi4py.MPI is imported, while it waits


def _start(MPI, at_exit):
    global ACTIVE
    if ACTIVE is not None:
        return
    if not MPI.Is_initialized() or MPI.Is_finalized():
        return
    from .detector import Detector
    from .mpiclock import make_class
    world = MPI.COMM_WORLD
    det = Detector(world.Get_rank(), world.Get_size(), race_keep(), _options["keep_going"],
                   _options["json"] or race_json())
    ACTIVE = state.ACTIVE = det
    ClockComm = make_class(det)
    det.ClockComm = ClockComm
    det.plain_world = world if type(world) is MPI.Intracomm else MPI.Intracomm(world)
    det.report_comm = MPI.Intracomm.Dup(world)
    cw = ClockComm.wrap(world)
    MPI.COMM_WORLD = cw
    hooks.hand_out_world(cw)
    hooks.window_class = checked_class
    hooks.program_barrier = barrier
    from . import lines, threads
    threads.install(det)
    lines.start(det)
    if at_exit:
        import atexit
        atexit.register(_at_exit)


def _at_exit():
    from .report import finish
    found = finish()
    if found and not _options["keep_going"]:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_options["exit_code"])


def barrier(comm, wait=None):
    """A barrier over mpi4py communicator ``comm`` that carries the clocks:
    an Allreduce(MAX) of them on comm's shadow (made on first use: a
    barrier is collective). ``wait(start)`` completes the nonblocking
    Iallreduce that ``start()`` begins (hixl_rma's bounded wait), else it
    blocks."""
    from mpi4py import MPI
    shadow = ACTIVE.ClockComm.shadow_of(comm)
    c = ACTIVE.release()
    if wait is None:
        shadow.Allreduce(MPI.IN_PLACE, c, op=MPI.MAX)
    else:
        wait(lambda: shadow.Iallreduce(MPI.IN_PLACE, c, op=MPI.MAX))
    ACTIVE.acquire(c)


def finish():
    """Gather, check and print (collective); the number of races found."""
    from .report import finish as _finish
    return _finish()
