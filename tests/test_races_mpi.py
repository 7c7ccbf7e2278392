"""The race detector's clocks over MPI's own messages (races/mpiclock.py):
every send and receive form a program may use either carries the clock
or, where the detector cannot see the sender, costs a bounded wait and no
hang; a clock left behind is never taken as a newer one's stand-in; and
communicators the program frees free their shadows.

Single-process tests: each program runs under an mpiexec started here,
killed with its whole process group if it hangs (procutil.run).
"""
import sys

import pytest

from support.procutil import run
from test_examples import _clean_env, _mpiexec
from test_races import ROOT

pytestmark = pytest.mark.timeout(300)

# Rank 0 puts into rank 1's window under a lock, then tells rank 1 by
# SEND; rank 1 learns by RECV and then loads the word (sync/031 of
# RMARaceBench): ordered when the message carries rank 0's clock. "racy"
# loads before the receive: a race whatever carries the clock. A second
# round (a plain Send and blocking Recv of the same source and tag, the
# word after it) must be ordered too: it is wrong when it takes the
# first message's clock.
PROGRAM = r'''
import sys, time
from mpi4py import MPI
import numpy as np

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
send_how, recv_how, racy = sys.argv[1], sys.argv[2], sys.argv[3] == "racy"
win = MPI.Win.Allocate(40, 4, comm=comm)
mem = np.frombuffer(win.tomemory(), np.int32)
mem[:] = 0
comm.Barrier()
tok, back = np.zeros(1, np.int32), np.zeros(1, np.int32)


def send():
    if send_how == "Send":
        comm.Send(tok, 1, 5)
    elif send_how == "send":
        comm.send("token", 1, 5)
    elif send_how in ("Send_init", "Ssend_init"):
        p = getattr(comm, send_how)(tok, 1, 5)
        p.Start()
        p.Wait()
        p.Start()  # a persistent request, started twice: two messages, two clocks
        p.Wait()
        p.Free()
    elif send_how == "Startall":
        p = comm.Send_init(tok, 1, 5)
        p.Startall([p])
        p.Waitall([p])
        p.Free()
    elif send_how == "Sendrecv_replace":
        comm.Sendrecv_replace(tok, 1, 5, 1, 6)
    elif send_how == "Isendrecv":
        comm.Isendrecv(tok, 1, 5, back, 1, 6).Wait()
    elif send_how == "Isendrecv_replace":
        comm.Isendrecv_replace(tok, 1, 5, 1, 6).Wait()
    else:
        raise SystemExit(f"no send {send_how}")


def recv():
    if recv_how == "Recv":
        comm.Recv(tok, 0, 5)
    elif recv_how == "recv":
        assert comm.recv(None, 0, 5) == "token"
    elif recv_how == "Irecv":
        comm.Irecv(tok, 0, 5).Wait()
    elif recv_how == "irecv":
        assert comm.irecv(source=0, tag=5).wait() == "token"
    elif recv_how == "Irecv_any":
        st = MPI.Status()
        comm.Irecv(tok, MPI.ANY_SOURCE, MPI.ANY_TAG).Wait(st)
        assert (st.Get_source(), st.Get_tag()) == (0, 5)
    elif recv_how == "Irecv_test":
        r = comm.Irecv(tok, 0, 5)
        end = time.monotonic() + 60
        while not r.Test():
            assert time.monotonic() < end
            time.sleep(0.001)
    elif recv_how == "irecv_test":
        r = comm.irecv(source=0, tag=5)
        end = time.monotonic() + 60
        while True:
            flag, obj = r.test()
            if flag:
                break
            assert time.monotonic() < end
            time.sleep(0.001)
        assert obj == "token"
    elif recv_how == "Irecv_Waitall":
        r = comm.Irecv(tok, 0, 5)
        r.Waitall([r])
    elif recv_how == "Recv_init":
        r = comm.Recv_init(tok, 0, 5)
        r.Start()
        r.Wait()
        r.Free()
    elif recv_how == "Sendrecv":
        comm.Sendrecv(back, 0, 6, tok, 0, 5)
    elif recv_how == "Isendrecv":
        comm.Isendrecv(back, 0, 6, tok, 0, 5).Wait()
    elif recv_how == "unseen":  # a receive the detector does not see: the clock stays queued
        MPI.Intracomm(comm).Recv(tok, 0, 5)
    elif recv_how == "Mprobe":
        comm.Mprobe(0, 5).Recv(tok)
    elif recv_how == "mprobe":
        assert comm.mprobe(0, 5).recv() == "token"
    elif recv_how == "Improbe_Irecv":
        end = time.monotonic() + 60
        while (m := comm.Improbe(0, 5)) is None:
            assert time.monotonic() < end
            time.sleep(0.001)
        m.Irecv(tok).Wait()
    elif recv_how == "Irecv_mpi_Waitall":  # the drop-in's MPI.Request (python -m hixl_rma)
        MPI.Request.Waitall([comm.Isend(back, 0, 6), comm.Irecv(tok, 0, 5)])
    elif recv_how == "Irecv_mpi_Waitsome":
        reqs, st = [comm.Irecv(tok, 0, 5)], []
        assert MPI.Request.Waitsome(reqs, st) == [0] and st[0].Get_tag() == 5
    elif recv_how == "irecv_mpi_waitany":
        assert MPI.Request.waitany([comm.irecv(source=0, tag=5)]) == (0, "token")
    else:
        raise SystemExit(f"no receive {recv_how}")


persistent = send_how in ("Send_init", "Ssend_init")
if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(np.ones(1, np.int32), 1, 0)
    win.Unlock(1)
    send()
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(np.ones(1, np.int32), 1, 1)
    win.Unlock(1)
    comm.Send(tok, 1, 5)
elif rank == 1:
    if racy:
        sys.stdout.write(f"mem[0] is {mem[0]}\n")
    recv()
    if persistent:
        recv()
    if not racy and recv_how != "unseen":
        sys.stdout.write(f"mem[0] is {mem[0]}\n")
    comm.Recv(tok, 0, 5)
    sys.stdout.write(f"mem[1] is {mem[1]}\n")
comm.Barrier()
win.Free()
'''


def _env():
    e = _clean_env()
    e.pop("HIXL_RMA_CHECK", None)
    return e


def _checked(tmp_path, text, args=(), n=2, timeout=60):
    prog = tmp_path / "prog.py"
    prog.write_text(text)
    rc, out = run([_mpiexec(), "-n", str(n), sys.executable, "-m", "hixl_rma", "--check-races", str(prog),
                   *args], env=_env(), timeout=timeout, cwd=ROOT)
    return rc, out


@pytest.mark.parametrize("send_how, recv_how", [
    ("Send_init", "Recv"), ("Ssend_init", "Recv"), ("Startall", "Recv"),
    ("Sendrecv_replace", "Sendrecv"), ("Isendrecv", "Sendrecv"), ("Isendrecv_replace", "Sendrecv"),
])
def test_the_sends_it_did_not_wrap_carry_the_clock(tmp_path, send_how, recv_how):
    # Before: the receiver's blocking Recv waited forever for a clock these sends never gave.
    rc, out = _checked(tmp_path, PROGRAM, (send_how, recv_how, "fixed"))
    assert rc == 0, out
    assert "mem[0] is 1" in out and "mem[1] is 1" in out, out
    assert "0 race(s), 0 warning(s)" in out and "RACE" not in out, out


@pytest.mark.parametrize("send_how, recv_how", [("Send_init", "Recv"), ("Isendrecv", "Sendrecv")])
def test_a_race_around_those_sends_is_still_reported(tmp_path, send_how, recv_how):
    rc, out = _checked(tmp_path, PROGRAM, (send_how, recv_how, "racy"))
    assert rc == 3, out
    assert "RACE on window" in out and "load by rank 1" in out and "Put by rank 0" in out, out
    assert "1 race(s)" in out, out  # the load before the receive; the rest is ordered


@pytest.mark.parametrize("recv_how", ["Irecv", "irecv", "Irecv_any", "Irecv_test", "irecv_test", "Irecv_Waitall",
                                      "Irecv_mpi_Waitall", "Irecv_mpi_Waitsome", "irecv_mpi_waitany", "Recv_init",
                                      "Isendrecv", "Mprobe", "mprobe", "Improbe_Irecv"])
def test_a_nonblocking_or_persistent_receive_takes_the_clock(tmp_path, recv_how):
    # Before: the Wait took no clock (a false race on mem[0]), and the blocking
    # Recv after it took that message's clock instead of its own (one on mem[1]).
    send_how = {"irecv": "send", "irecv_test": "send", "irecv_mpi_waitany": "send", "mprobe": "send",
                "Isendrecv": "Isendrecv", "Irecv_mpi_Waitall": "Isendrecv"}.get(recv_how, "Send")
    rc, out = _checked(tmp_path, PROGRAM, (send_how, recv_how, "fixed"))
    assert rc == 0, out
    assert "mem[0] is 1" in out and "mem[1] is 1" in out, out
    assert "0 race(s), 0 warning(s)" in out and "RACE" not in out, out


@pytest.mark.parametrize("recv_how", ["Irecv", "Recv_init"])
def test_a_race_before_a_nonblocking_receive_is_still_reported(tmp_path, recv_how):
    rc, out = _checked(tmp_path, PROGRAM, ("Send", recv_how, "racy"))
    assert rc == 3, out
    assert "RACE on window" in out and "load by rank 1" in out and "1 race(s)" in out, out


def test_a_clock_left_behind_is_not_taken_for_a_newer_one(tmp_path):
    # The first message's clock is left queued (its receive carried no order:
    # the program loads nothing after it); the blocking Recv of the second
    # must order the load after it all the same. Before: that Recv took the
    # first message's clock, older than its own: a false race on mem[1].
    rc, out = _checked(tmp_path, PROGRAM, ("Send", "unseen", "fixed"))
    assert rc == 0, out
    assert "mem[1] is 1" in out, out
    assert "0 race(s), 0 warning(s)" in out and "RACE" not in out, out


# The sender's messages go by a communicator the detector does not see
# (a plain object over COMM_WORLD's handle, or COMM_WORLD taken before the
# detector started): no clock comes. Every rank but 0 sends ROUNDS
# messages to rank 0, which takes them by RECV (a wrapped receive). Rank 0
# reports how long its receives took: a missing clock costs one bounded
# wait per source, then brief ones per new tag, never one per message.
UNSEEN = r'''
import sys, time
from mpi4py import MPI
import numpy as np

early = MPI.COMM_WORLD
if sys.argv[1] == "captured":
    from hixl_rma import races
    races.enable()
comm = MPI.COMM_WORLD
assert type(comm) is not MPI.Intracomm  # the detector's
plain = early if sys.argv[1] == "captured" else MPI.Intracomm(comm)
rank, size = comm.Get_rank(), comm.Get_size()
recv_how, ROUNDS = sys.argv[2], 30
many = sys.argv[3:] == ["many_tags"]  # a tag per message: a channel each
TAG = MPI.ANY_TAG if many else 7
buf = np.zeros(1, np.int32)
comm.Barrier()
if rank == 0:
    t0 = time.monotonic()
    for i in range(ROUNDS * (size - 1)):
        st = MPI.Status()
        if recv_how == "Recv":
            comm.Recv(buf, MPI.ANY_SOURCE, TAG, st)
        elif recv_how == "recv":
            comm.recv(None, MPI.ANY_SOURCE, TAG, st)
        elif recv_how == "Sendrecv":
            comm.Sendrecv(buf, MPI.PROC_NULL, 0, buf, MPI.ANY_SOURCE, TAG, st)
        elif recv_how == "Irecv":
            comm.Irecv(buf, MPI.ANY_SOURCE, TAG).Wait(st)
        assert st.Get_tag() >= 100 if many else st.Get_tag() == 7
    sys.stdout.write(f"received in {time.monotonic() - t0:.2f} s\n")
else:
    for i in range(ROUNDS):
        tag = 100 + i if many else 7
        if rank == 2:  # a third rank sends by the wrapped communicator, with clocks
            comm.Send(np.full(1, i, np.int32), 0, tag)
        elif recv_how == "recv":
            plain.send(i, 0, tag)
        else:
            plain.Send(np.full(1, i, np.int32), 0, tag)
comm.Barrier()
sys.stdout.write(f"done {rank}\n")  # one write: the ranks' lines do not interleave
'''


@pytest.mark.parametrize("how, recv_how, n, tags", [
    ("plain", "Recv", 2, "one_tag"), ("plain", "recv", 2, "one_tag"), ("plain", "Sendrecv", 2, "one_tag"),
    ("plain", "Irecv", 2, "one_tag"), ("captured", "Recv", 2, "one_tag"), ("plain", "Recv", 3, "one_tag"),
    ("plain", "Recv", 2, "many_tags"), ("plain", "Recv", 3, "many_tags"),
])
def test_a_send_it_cannot_see_costs_a_bounded_wait_not_a_hang(tmp_path, how, recv_how, n, tags):
    prog = tmp_path / "prog.py"
    prog.write_text(UNSEEN)
    if how == "captured":  # the detector started by the program itself, after it took COMM_WORLD
        cmd = [_mpiexec(), "-n", str(n), sys.executable, str(prog), how, recv_how, tags]
    else:
        cmd = [_mpiexec(), "-n", str(n), sys.executable, "-m", "hixl_rma", "--check-races", str(prog), how,
               recv_how, tags]
    rc, out = run(cmd, env=_env(), timeout=60, cwd=ROOT)
    assert rc == 0, out
    assert all(f"done {r}" in out for r in range(n)), out
    assert "0 race(s), 0 warning(s)" in out and "RACE" not in out, out
    took = float(out.split("received in ")[1].split()[0])
    assert took < 20, out  # 30 missing clocks each waited for in full would be more (a second each)


SPLIT = r'''
from mpi4py import MPI
import numpy as np

comm = MPI.COMM_WORLD
x = np.ones(1, np.int64)
for step in range(3000):
    sub = comm.Split(comm.Get_rank() % 2, 0)
    sub.Allreduce(MPI.IN_PLACE, x, op=MPI.MAX)
    sub.Free()
    assert sub == MPI.COMM_NULL
dup = comm.Dup()
dup.Barrier()
dup.free()
print("steps done")
'''


def test_freed_communicators_free_their_shadows(tmp_path):
    # Before: each Split's shadow was never freed, and MPI ran out of
    # communicators ("Too many communicators") after about 2,000 steps.
    rc, out = _checked(tmp_path, SPLIT, n=2, timeout=240)
    assert rc == 0, out
    assert out.count("steps done") == 2, out
    assert "0 race(s), 0 warning(s)" in out, out

