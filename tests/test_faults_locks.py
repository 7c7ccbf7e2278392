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


ACC_SCRIPT = textwrap.dedent(r'''
    import os, signal, sys, time
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    from hixl_rma import Win
    from hixl_rma.window import ctrl as CTRL

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    VICTIM, N = 2, 50
    hixl_rma.Init()

    log = open(f"{sys.argv[1]}.{rank}", "w")

    def out(name, *words):
        print("RESULT", f"{name}@{rank}", *words, file=log, flush=True)

''') + procutil.ATTEMPT + textwrap.dedent(r'''

    buf = np.zeros(8, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=comm)
    out("acc_locked", str(win._core.targets[0].acc_locked), "0")
    if rank == 0:  # the victim's hold of rank 0's accumulate lock word (its world rank + 1)
        win._core.ctrl64[CTRL.ACC // 8] = VICTIM + 1
    comm.Barrier()
    if rank == VICTIM:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.3)
    if rank == 1:
        def fops():
            one, res = np.ones(1, np.int64), np.zeros(1, np.int64)
            win.Lock(0, hixl_rma.LOCK_SHARED)
            for i in range(N):
                win.Fetch_and_op(one, res, 0, 0, hixl_rma.SUM)
                if res[0] != i:
                    raise AssertionError(f"fetched {res[0]}, not {i}")
            win.Notify(0, 7)
            win.Unlock(0)

        attempt("fetch_and_op", fops)
        out("asked", str(win._core.engine.stats()["target_atomics_asked"]), "0")
    else:
        attempt("wait", lambda: win.Wait_notify(7, source=1))
        out("data", "OK" if buf[0] == N and win._core.ctrl64[CTRL.ACC // 8] == 0 else
            f"BAD:{buf[0]},{win._core.ctrl64[CTRL.ACC // 8]}", "0")
    print("DONE", rank, file=log, flush=True)
    os._exit(0)
''')


@needs_hydra
@pytest.mark.parametrize("by", ["target", "origin"])
def test_dead_holder_of_an_accumulate_lock(tmp_path, by):
    """A rank dies holding rank 0's accumulate lock word: the atomics of a
    survivor still complete, exactly once each, whoever makes them
    (HIXL_RMA_TARGET_OPS): rank 0's engine finds the word held and
    answers BUSY, the origin then takes it the slow way, breaking the dead
    rank's hold."""
    script = tmp_path / "acc.py"
    script.write_text(ACC_SCRIPT)
    env = _env(HIXL_RMA_TARGET_OPS=by)
    rc, out = procutil.run([MPIEXEC, "-disable-auto-cleanup", "-n", "3", "bash", "-c", WRAPPER, "wrapper",
                            sys.executable, str(script), str(tmp_path / "out")], env, 60)
    out += "".join((tmp_path / f"out.{r}").read_text() for r in (0, 1) if (tmp_path / f"out.{r}").exists())
    assert "DONE 0" in out and "DONE 1" in out, f"a survivor did not finish (rc {rc}):\n{out}"
    res = _results(out)
    if res["acc_locked@0"][0] != "True":
        pytest.skip("Create windows are not under the accumulate lock here (no same-node mapping)")
    assert res["fetch_and_op@1"][0] == "OK", out
    assert res["fetch_and_op@1"][1] < TIMEOUT_MS / 1000 + 2, out
    assert res["wait@0"][0] == "OK" and res["data@0"][0] == "OK", out
    # the first found the word held (BUSY), the others went to rank 0's engine
    assert res["asked@1"][0] == ("49" if by == "target" else "0"), out


POSTED_SCRIPT = textwrap.dedent(r'''
    import os, signal, sys, time
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    from hixl_rma import Win

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    MODE = sys.argv[2]
    hixl_rma.Init()

    log = open(f"{sys.argv[1]}.{rank}", "w")

    def out(name, *words):
        print("RESULT", f"{name}@{rank}", *words, file=log, flush=True)

''') + procutil.ATTEMPT + textwrap.dedent(r'''

    buf = np.zeros(1 << 16, np.uint8)
    win = Win.Create(buf, disp_unit=1, comm=comm)
    out("acc_locked", str(win._core.targets[0].acc_locked), "0")
    pids = comm.allgather(os.getpid())
    src = np.ones(256, np.uint8)
    if rank == 1:  # a run under way: connected, Puts posted to rank 0's engine
        win.Lock(0, hixl_rma.LOCK_SHARED)
        for i in range(8):
            win.Put(src, 0, 256 * i)
    comm.Barrier()
    if rank == 0:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGSTOP if MODE == "stop" else signal.SIGKILL)
    else:
        time.sleep(0.3)

        def posted():
            for i in range(400):
                win.Put(src, 0, 256 * (i % 256))
            win.Flush(0)

        attempt("posted", posted)
        out("posts", str(win._core.engine.stats()["target_writes_posted"]), "0")
        if MODE == "stop":
            os.kill(pids[0], signal.SIGCONT)
    print("DONE", rank, file=log, flush=True)
    os._exit(0)
''')


@needs_hydra
@pytest.mark.parametrize("mode", ["kill", "stop"])
def test_puts_posted_to_a_dead_or_stopped_target(tmp_path, mode):
    """Small Puts posted to the target's engine (not answered each) while
    it is killed or stopped: a Put that finds no room, or the Flush that
    waits for them, raises (PeerFailure for a dead rank, HixlTimeoutError
    for a stopped one) within the timeout, never hangs."""
    script = tmp_path / "posted.py"
    script.write_text(POSTED_SCRIPT)
    env = _env(HIXL_RMA_TARGET_OPS="target")
    rc, out = procutil.run([MPIEXEC, "-disable-auto-cleanup", "-n", "2", "bash", "-c", WRAPPER, "wrapper",
                            sys.executable, str(script), str(tmp_path / "out"), mode], env, 60)
    out += "".join((tmp_path / f"out.{r}").read_text() for r in (0, 1) if (tmp_path / f"out.{r}").exists())
    assert "DONE 1" in out, f"the origin did not finish (rc {rc}):\n{out}"
    res = _results(out)
    if res["acc_locked@1"][0] != "True":
        pytest.skip("Create windows are not under the accumulate lock here (no same-node mapping)")
    assert int(res["posts@1"][0]) > 0, out  # the run was posted, not answered each
    want = "PeerFailure" if mode == "kill" else "HixlTimeoutError"
    assert res["posted@1"][0] == want and "rank 0" in res["posted@1"][2], out
    assert res["posted@1"][1] < TIMEOUT_MS / 1000 + 2, out
