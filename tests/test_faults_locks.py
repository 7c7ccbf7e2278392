"""Passive-target epochs outlive a dead rank: three ranks in Lock_all, the
victim (rank 2) dies holding its shared locks on the others. The survivors'
Unlock_all releases what it can and reports the death, the epoch is closed
either way, the victim's shared holds are broken so the survivors can take
exclusive locks on each other, and Free tears the window down. Over shared
memory and over UCX_TLS=tcp. (Same launch as test_faults: each rank under a
wrapper, hydra's -disable-auto-cleanup.)"""
import sys
import textwrap

import pytest

from support import procutil
from test_faults import MPIEXEC, TIMEOUT_MS, WRAPPER, _env, _results, needs_hydra

pytestmark = pytest.mark.timeout(120)

SCRIPT = textwrap.dedent(r'''
    import os, signal, sys, time
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    from hixl_rma import Win

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    VICTIM = 2
    hixl_rma.Init()

    log = open(f"{sys.argv[1]}.{rank}", "w")  # one file per rank: stdout lines would interleave

    def out(name, *words):
        print("RESULT", f"{name}@{rank}", *words, file=log, flush=True)

''') + procutil.ATTEMPT + textwrap.dedent(r'''

    buf = np.zeros(8, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Lock_all()
    win.Put(np.full(1, 10 + rank, np.int64), VICTIM, rank)
    win.Flush(VICTIM)
    comm.Barrier()
    if rank == VICTIM:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.3)
    attempt("Unlock_all", win.Unlock_all)
    out("epoch_closed", str(not win._core.lock_all), "0")
    other = 1 - rank

    def exclusive():
        # the victim's shared hold on `other` is broken: the exclusive lock is taken
        win.Lock(other, hixl_rma.LOCK_EXCLUSIVE)
        win.Put(np.full(1, 20 + rank, np.int64), other, 4)
        win.Notify(other, 7)  # after the Put has landed
        win.Unlock(other)
        win.Wait_notify(7, source=other)

    attempt("Lock_exclusive", exclusive)
    out("data", "OK" if buf[4] == 20 + other else f"BAD:{buf.tolist()}", "0")
    attempt("Free", win.Free)
    out("freed", str(win._core.freed), "0")
    attempt("Finalize", hixl_rma.Finalize)
    print("DONE", rank, file=log, flush=True)
    os._exit(0)  # MPICH's MPI_Finalize would wait for the dead rank forever
''')


@needs_hydra
@pytest.mark.parametrize("tls", [None, "tcp"])
def test_dead_rank_in_lock_all(tmp_path, tls):
    script = tmp_path / "locks.py"
    script.write_text(SCRIPT)
    env = _env(**({"UCX_TLS": tls} if tls else {}))
    rc, out = procutil.run([MPIEXEC, "-disable-auto-cleanup", "-n", "3", "bash", "-c", WRAPPER, "wrapper",
                            sys.executable, str(script), str(tmp_path / "out")], env, 60)
    out += "".join((tmp_path / f"out.{r}").read_text() for r in (0, 1) if (tmp_path / f"out.{r}").exists())
    assert "DONE 0" in out and "DONE 1" in out, f"a survivor did not finish (rc {rc}):\n{out}"
    res = _results(out)
    assert not [k for k, v in res.items() if v[0].startswith(("UNEXPECTED", "BAD"))], out
    slack = TIMEOUT_MS / 1000 + 2
    for r in (0, 1):
        got = {k.split("@")[0]: v for k, v in res.items() if k.endswith(f"@{r}")}
        # Unlock_all released the live ranks' locks and reports the dead one, at once
        assert got["Unlock_all"][0] == "PeerFailure" and "world rank 2" in got["Unlock_all"][2], out
        assert got["Unlock_all"][1] < 1.5, out
        assert got["epoch_closed"][0] == "True", out
        # an exclusive lock between the survivors, past the victim's shared hold
        assert got["Lock_exclusive"][0] == "OK" and got["Lock_exclusive"][1] < slack, out
        assert got["data"][0] == "OK", out
        # Free tears the window down (and says a rank is dead), Finalize returns
        assert got["Free"][0] == "PeerFailure" and got["Free"][1] < 1.5 and got["freed"][0] == "True", out
        assert got["Finalize"][0] in ("PeerFailure", "OK") and got["Finalize"][1] < slack, out
