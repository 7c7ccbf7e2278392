"""The end of a program is Finalize, and Finalize is collective (issue 29,
issue 23's collectives given up): programs written for mpi4py, run as
users run them under ``mpiexec``.

- A rank whose program ends (no ``Free``, no ``Finalize``) keeps serving its
  windows until every rank has reached the end of its program: the others'
  locks, Gets and atomics on its windows go on working.
- A rank that ends early in a Fence program is named by the others' next
  collective at once ("has finalized"), not after the timeout.
- A collective given up on (a rank late to window creation) stays MPI's with
  its buffers; hixl_rma's next collective on that communicator is refused
  while it is pending, and the ranks get back in step once it completed.
- ``python -m hixl_rma`` leaves MPI's initialization to the program.
"""
import os
import re
import sys
import textwrap
import time

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(180)

RUN_S = 90


# Each rank's results go to a file of its own (mpiexec interleaves the
# ranks' output even within a line): ``result(rank, *words)``, a line each.
RESULT = r'''
import os as _os, sys as _sys
def result(rank, *words):
    with open(_os.path.join(_sys.argv[1], f"result.{rank}"), "a") as f:
        f.write(" ".join(str(w) for w in words) + "\n")
'''


def _run(tmp_path, n, body, env=None, dropin=False):
    """(exit status, output, {rank: [result lines]}) of the program under mpiexec -n n."""
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(body).replace("# results\n", RESULT, 1))
    for old in tmp_path.glob("result.*"):
        old.unlink()
    launcher = [sys.executable, "-m", "hixl_rma"] if dropin else [sys.executable]
    rc, out = procutil.run(["mpiexec", "-n", str(n), *launcher, str(prog), str(tmp_path)], env, RUN_S)
    results = {int(p.suffix[1:]): p.read_text().splitlines() for p in tmp_path.glob("result.*")}
    return rc, out, results


# The program: rank 0 alone has memory, locks itself, writes, and
# its program ends after the barrier; every other rank then locks rank 0.
EXIT_WITHOUT_FREE = r'''
    # results
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    win = MPI.Win.Allocate(40 if rank == 0 else 0, 8, comm=comm)
    if rank == 0:
        win.Lock(0)
        win.Put(np.arange(5, dtype=np.int64) + 100, 0)
        win.Unlock(0)
    comm.Barrier()
    if rank != 0:
        for i in range(50):   # rank 0's program has ended meanwhile
            got = np.zeros(5, np.int64)
            win.Lock(0, MPI.LOCK_SHARED if i % 2 else MPI.LOCK_EXCLUSIVE)
            win.Get(got, 0)
            win.Unlock(0)
            assert got.tolist() == [100, 101, 102, 103, 104], got
        result(rank, "read", got.tolist())
'''


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_that_ends_keeps_serving_its_windows(tmp_path, n):
    for _ in range(3):
        rc, out, results = _run(tmp_path, n, EXIT_WITHOUT_FREE, dropin=True)
        assert rc == 0, out
        assert results == {r: ["read [100, 101, 102, 103, 104]"] for r in range(1, n)}, out
        assert "hixl_rma: at the end of the program" not in out, out


# A task counter on Fetch_and_op: rank 0 takes a few tasks and ends; the
# others take the rest from rank 0's counter.
TASK_COUNTER = r'''
    # results
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    TASKS = 300
    win = MPI.Win.Create(np.zeros(1, np.int64) if rank == 0 else None, 8, comm=comm)
    one, got, mine = np.ones(1, np.int64), np.zeros(1, np.int64), []
    limit = 3 if rank == 0 else TASKS
    while len(mine) < limit:
        win.Lock(0, MPI.LOCK_SHARED)
        win.Fetch_and_op(one, got, 0, 0, MPI.SUM)
        win.Unlock(0)
        if got[0] >= TASKS:
            break
        mine.append(int(got[0]))
    result(rank, *mine)
'''


def test_a_task_counter_whose_owner_ends_first(tmp_path):
    n = 3
    rc, out, results = _run(tmp_path, n, TASK_COUNTER, dropin=True)
    assert rc == 0, out
    assert sorted(results) == list(range(n)), out
    taken = [int(x) for lines in results.values() for ln in lines for x in ln.split()]
    assert sorted(taken) == list(range(300)), out


# A rank ends early in a Fence program (erroneous in MPI, where the others
# would wait forever): the others' next Fence and their Free name it at once.
EARLY_END = r'''
    # results
    import time
    import numpy as np
    from mpi4py import MPI
    import hixl_rma

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    buf = np.zeros(4, np.int64)
    win = hixl_rma.Win.Create(buf, 8, comm=comm)
    win.Fence()
    win.Put(np.full(1, rank, np.int64), (rank + 1) % size, 0)
    win.Fence()
    if rank == size - 1:
        raise SystemExit(0)   # ends here, without Free: waits in Finalize
    for call in ("Fence", "Free"):
        t0 = time.monotonic()
        try:
            getattr(win, call)()
            result(rank, call, "OK")
        except hixl_rma.PeerFailure as exc:
            result(rank, call, f"{time.monotonic() - t0:.1f}", exc)
'''


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_ending_early_is_named_by_the_others_at_once(tmp_path, n):
    env = dict(os.environ, HIXL_RMA_TIMEOUT_MS="30000")
    t0 = time.monotonic()
    rc, out, results = _run(tmp_path, n, EARLY_END, env=env)
    elapsed = time.monotonic() - t0
    assert rc == 0, out
    assert sorted(results) == list(range(n - 1)), out
    for r, lines in results.items():
        assert [ln.split()[0] for ln in lines] == ["Fence", "Free"], out
        for ln in lines:
            _, seconds, text = ln.split(" ", 2)
            assert float(seconds) < 5.0, out
            # the rank that ended (or, in a race, another that ended since)
            named = re.search(r"world rank (\d+) has finalized", text)
            assert named and int(named.group(1)) != r, out
    assert elapsed < 25, out   # far inside the 30 s timeout


# Rank 1 comes 1.5 s late to window creation on a 0.3 s timeout.
LATE_RANK = r'''
    # results
    import time
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    from hixl_rma import runtime as _rt

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    hixl_rma.Init()
    st = _rt.runtime()
    LATE = 1

    def out(*words):
        result(rank, *words)

    def create(timeout_ms):
        st.timeout_ms = timeout_ms
        return hixl_rma.Win.Create(np.zeros(4, np.int64), 8, comm=comm)

    if rank != LATE:
        try:
            create(300)
        except hixl_rma.HixlTimeoutError as exc:
            out("first", "HixlTimeoutError")
        # The given-up creation is still MPI's: the next is refused (no
        # collective started) until it has completed at every rank.
        refusals = 0
        while True:
            try:
                win = create(20000)
                break
            except hixl_rma.HixlTimeoutError as exc:
                assert "has not completed at every rank" in str(exc), exc
                refusals += 1
                time.sleep(0.05)
        out("refused", "yes" if refusals else "no")
    else:
        time.sleep(1.5)
        try:
            create(1000)  # its peers gave up: this one's exchange finds nobody
            out("first", "OK")
        except hixl_rma.HixlTimeoutError:
            out("first", "HixlTimeoutError")
        win = create(20000)
        out("refused", "n/a")
    win.Fence()
    win.Put(np.full(1, 7 + rank, np.int64), (rank + 1) % size, 1)
    win.Fence()
    mem = np.frombuffer(win.tomemory(), np.int64)
    out("data", int(mem[1]))
    win.Free()
'''


@pytest.mark.parametrize("n", [2, 3])
def test_a_collective_given_up_stays_mpis_and_the_ranks_get_back_in_step(tmp_path, n):
    rc, out, results = _run(tmp_path, n, LATE_RANK)
    assert rc == 0, out
    for r in range(n):
        assert results.get(r) == ["first HixlTimeoutError", "refused " + ("n/a" if r == 1 else "yes"),
                                  f"data {7 + (r - 1) % n}"], out
    # MPICH reports requests and communicators left behind at MPI_Finalize
    # ("leaked context IDs", "pending references"); none are.
    assert "leak" not in out.lower() and "pending" not in out.lower(), out


# The program initializes MPI itself (mpi4py.rc.initialize = False).
OWN_INIT = r'''
    # results
    import mpi4py
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    from mpi4py import MPI
    assert not MPI.Is_initialized()
    provided = MPI.Init_thread(MPI.THREAD_MULTIPLE)
    import numpy as np
    comm = MPI.COMM_WORLD
    buf = np.zeros(2, np.int64)
    win = MPI.Win.Create(buf, 8, comm=comm)
    assert type(win).__module__.startswith("hixl_rma"), type(win)
    win.Fence()
    win.Put(np.full(1, comm.rank + 1, np.int64), (comm.rank + 1) % comm.size)
    win.Fence()
    result(comm.rank, int(buf[0]), provided == MPI.THREAD_MULTIPLE)
    win.Free()
    import hixl_rma
    hixl_rma.Finalize()
    MPI.Finalize()
'''


def test_the_drop_in_leaves_mpi_initialization_to_the_program(tmp_path):
    rc, out, results = _run(tmp_path, 2, OWN_INIT, dropin=True)
    assert rc == 0, out
    assert results == {0: ["2 True"], 1: ["1 True"]}, out
