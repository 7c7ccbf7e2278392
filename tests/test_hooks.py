"""The runtime's hooks (hixl_rma.runtime.hooks): the one place tools attach, and the
window view the race detector reads instead of a window's state."""
import numpy as np
import pytest

import hixl_rma
from hixl_rma import runtime
from hixl_rma.ground.errors import ParamError
from hixl_rma.runtime import hooks


class _Done:
    def Test(self):
        return True


class _Comm:
    """Enough of an mpi4py communicator of two ranks for runtime.barrier."""
    handle = 0x4849584c

    def __init__(self):
        self.barriers = 0

    def Get_size(self):
        return 2

    def Ibarrier(self):
        self.barriers += 1
        return _Done()


def test_only_the_programs_barrier_goes_to_a_tool(monkeypatch):
    seen = []

    def observe(comm, wait):
        seen.append(comm)
        wait(comm.Ibarrier)

    monkeypatch.setattr(hooks, "program_barrier", observe)
    comm = _Comm()
    runtime.barrier(comm, 1000, program=False)  # the library's own: not the tool's to see
    assert seen == [] and comm.barriers == 1
    runtime.barrier(comm, 1000)  # the program's (Communicator.Barrier, the HIXL face's Fence)
    assert seen == [comm] and comm.barriers == 2
    monkeypatch.setattr(hooks, "program_barrier", None)
    runtime.barrier(comm, 1000)
    assert seen == [comm] and comm.barriers == 3


def test_the_environment_names_tools_the_hooks_know(monkeypatch):
    monkeypatch.setenv("HIXL_RMA_CHECK", " races , nosuch")
    assert hooks.requested() == ["races"]
    assert hooks.TOOLS["races"] == "hixl_rma.races"
    monkeypatch.delenv("HIXL_RMA_CHECK")
    assert hooks.requested() == []


def test_telemetry_exporter_is_attached_by_the_package():
    from hixl_rma import telemetry

    assert telemetry._on_start in hooks._started and telemetry._on_stop in hooks._stopped
    telemetry.attach()  # idempotent
    assert hooks._started.count(telemetry._on_start) == 1


def test_observers_run_at_start_and_stop(monkeypatch):
    calls = []
    monkeypatch.setattr(hooks, "_started", [])
    monkeypatch.setattr(hooks, "_stopped", [])
    hooks.on_start(lambda rank, listen: calls.append(("start", rank, listen)))
    hooks.on_stop(lambda: calls.append(("stop",)))
    hooks.started(3, "127.0.0.1")
    hooks.stopped()
    assert calls == [("start", 3, "127.0.0.1"), ("stop",)]


def test_window_view_says_what_a_tool_needs():
    from mpi4py import MPI

    win = hixl_rma.Win.Allocate(64, 8, comm=MPI.COMM_SELF)
    view = win.view()
    assert view is win.view() and view is hixl_rma.Win(win).view()  # an alias: the same view
    mem = np.frombuffer(win.tomemory(), np.uint8)
    assert (view.base, view.size, view.disp_unit, view.disp_unit_of(0)) == (mem.ctypes.data, 64, 8, 8)
    assert (view.rank, view.world_ranks, view.flavor) == (0, (MPI.COMM_WORLD.Get_rank(),), MPI.WIN_FLAVOR_ALLOCATE)
    assert isinstance(view.key, str) and view.label() and not view.device and not view.freed
    assert view.check_target(MPI.PROC_NULL, "Put") is False
    with pytest.raises(ParamError, match=r"target_rank|rank"):
        view.check_target(5, "Put")
    win.Free()
    assert view.freed
    with pytest.raises(ParamError, match="has been freed"):
        view.check_live("Put")
