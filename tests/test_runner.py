"""``python -m hixl_rma prog.py``: an unmodified mpi4py program runs on
hixl_rma.Win; ``hixl_rma.dropin.install()`` does the same in-process.

The programs here are written for mpi4py alone (they never import hixl_rma)
and run under ``mpiexec -n 2``."""
import os
import sys
import textwrap

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(120)

MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
RUN_TIMEOUT_S = 60

# A small "library" written against MPI.Win only, as third-party code is.
PROGRAM = textwrap.dedent(r'''
    import sys
    import numpy as np
    from mpi4py import MPI
    from mpi4py.util import sync

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    buf = np.zeros(4, np.int64)
    win = MPI.Win.Create(buf, True, MPI.INFO_NULL, comm)  # disp_unit given as a bool, as some code does
    assert type(win).__module__ == "hixl_rma.win", type(win)
    assert isinstance(win, MPI.Win) and MPI.WIN_NULL == MPI.Win()
    win.Lock((rank + 1) % size)
    win.Put(np.full(1, 10 + rank, np.int64), (rank + 1) % size, 8)
    win.Unlock((rank + 1) % size)
    comm.Barrier()
    win.Lock_all()
    reqs = [win.Rget(np.zeros(1, np.int64), (rank + 1) % size, 8), comm.Isend(b"x", rank, 7),
            comm.Irecv(bytearray(1), rank, 7)]
    MPI.Request.Waitall(reqs)  # the window's requests and mpi4py's, mixed
    assert all(isinstance(r, MPI.Request) for r in reqs)
    win.Unlock_all()
    counter = sync.Counter(comm=comm)  # mpi4py.util.sync builds on MPI.Win.Allocate
    got = sorted(comm.allgather(counter.next()))
    counter.free()
    with sync.Mutex(comm=comm) as mutex:
        assert mutex.locked()
    comm.Barrier()
    win.Free()
    print(f"rank {rank} argv={sys.argv[1:]} name={__name__} value={buf[1]} counter={got}", flush=True)
''')


def _run(cmd, env=None, timeout=RUN_TIMEOUT_S):
    return procutil.run(cmd, env, timeout)


def test_runner_runs_an_unmodified_mpi4py_program(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    rc, out = _run([MPIEXEC, "-n", "2", sys.executable, "-m", "hixl_rma", str(prog), "a", "--b"])
    assert rc == 0, out
    for rank in (0, 1):
        assert f"rank {rank} argv=['a', '--b'] name=__main__ value={10 + 1 - rank} counter=[0, 1]" in out, out


def test_runner_runs_a_module(tmp_path):
    (tmp_path / "mymod.py").write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    rc, out = _run([MPIEXEC, "-n", "2", sys.executable, "-m", "hixl_rma", "-m", "mymod", "x"], env=env)
    assert rc == 0, out
    assert "rank 1 argv=['x'] name=__main__ value=10 counter=[0, 1]" in out, out


# A program after HIXL's examples: hixl_rma's own lazy import (Init -> runtime -> errors) is what
# brings mpi4py.MPI in, and the runner's hook then fires inside it.
HIXL_FACE_PROGRAM = textwrap.dedent(r'''
    import numpy as np
    import hixl_rma as hixl
    hixl.Init()
    comm = hixl.GetWorldCommunicator()
    rank, size = hixl.GetRank(comm), hixl.GetSize(comm)
    buf = np.zeros(8, np.uint8)
    handle = hixl.RegisterMemory(buf, hixl.MEMORY_HOST, hixl.ACCESS_READ_WRITE, comm)
    hixl.Put(np.full(8, 40 + rank, np.uint8), (rank + 1) % size, 0, handle, comm)
    hixl.Fence(comm)
    from mpi4py import MPI
    assert MPI.Win.__module__ == "hixl_rma.win", MPI.Win  # replaced once hixl_rma's import was done
    win = MPI.Win.Create(np.zeros(1, np.int64), comm=MPI.COMM_WORLD)
    win.Free()
    hixl.DeregisterMemory(handle)
    print(f"rank {rank} got {buf[0]}", flush=True)
''')


def test_runner_runs_a_program_whose_hixl_import_brings_mpi_in(tmp_path):
    prog = tmp_path / "hixl_prog.py"
    prog.write_text(HIXL_FACE_PROGRAM)
    rc, out = _run([MPIEXEC, "-n", "2", sys.executable, "-m", "hixl_rma", str(prog)])
    assert rc == 0, out
    assert "rank 0 got 41" in out and "rank 1 got 40" in out, out


def test_plain_mpi4py_is_untouched_without_the_runner(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("from mpi4py import MPI\nimport hixl_rma\nprint(MPI.Win.__module__)\n")
    rc, out = _run([sys.executable, str(prog)])
    assert rc == 0 and out.split()[-1] == "mpi4py.MPI", out


def test_runner_usage():
    rc, out = _run([sys.executable, "-m", "hixl_rma"])
    assert rc == 2 and "usage: python -m hixl_rma" in out
    rc, out = _run([sys.executable, "-m", "hixl_rma", "-m"])
    assert rc == 2 and "usage" in out
    rc, out = _run([sys.executable, "-m", "hixl_rma", "--help"])
    assert rc == 0 and "usage" in out
    for option in ("--version", "--check-races", "--keep-going", "--races-json FILE", "-m MODULE", "script"):
        assert option in out, (option, out)
    assert "exit 3 if any" in out and "Exit status" in out


@pytest.mark.parametrize("argv, message", [
    (["--check-race", "prog.py"], "unrecognized arguments: --check-race"),
    (["--check", "prog.py"], "unrecognized arguments: --check"),  # no abbreviations
    (["--keep-going", "prog.py"], "--keep-going and --races-json go with --check-races"),
    (["--check-races", "--races-json"], "argument --races-json: expected one argument"),
    (["no_such_program.py"], "can't open file 'no_such_program.py'"),
])
def test_runner_refuses_a_bad_command_line(tmp_path, argv, message):
    """A mistyped option is an error naming it, never taken for the program."""
    (tmp_path / "prog.py").write_text("print('ran')\n")
    rc, out = procutil.run([sys.executable, "-m", "hixl_rma", *argv], None, RUN_TIMEOUT_S, cwd=str(tmp_path))
    assert rc == 2, out
    assert message in out and "usage: python -m hixl_rma" in out and "Traceback" not in out
    assert "ran" not in out


def test_runner_version():
    rc, out = _run([sys.executable, "-m", "hixl_rma", "--version"])
    assert rc == 0 and out.startswith("hixl_rma ") and "UCX" in out and "NIXL" in out, out


def test_runner_passes_the_programs_own_options_through(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import sys\nprint('argv', sys.argv[1:])\n")
    rc, out = _run([sys.executable, "-m", "hixl_rma", str(prog), "--check-races", "-m", "x"])
    assert rc == 0 and "argv ['--check-races', '-m', 'x']" in out, out


def test_install_and_uninstall_in_process():
    code = textwrap.dedent('''
        from mpi4py import MPI
        import hixl_rma, hixl_rma.dropin as d
        orig_win, orig_req = MPI.Win, MPI.Request
        d.install(); d.install()  # idempotent
        assert MPI.Win is hixl_rma.Win and MPI.WIN_NULL is hixl_rma.win.WIN_NULL and d.installed()
        req = MPI.COMM_WORLD.Ibarrier()
        assert isinstance(req, MPI.Request) and issubclass(MPI.Prequest, MPI.Request)
        assert MPI.Request.Waitall([req])
        assert d.original("Win") is orig_win
        d.uninstall()
        assert MPI.Win is orig_win and MPI.Request is orig_req and not d.installed()
        print("ok")
    ''')
    rc, out = _run([sys.executable, "-c", code])
    assert rc == 0 and out.split()[-1] == "ok", out


def test_a_rank_that_never_joins_creation_is_a_timeout(tmp_path):
    """Window creation is collective and bounded: a rank that never calls
    Create leaves the others with HixlTimeoutError within the timeout."""
    prog = tmp_path / "late.py"
    prog.write_text(textwrap.dedent('''
        import os, time
        import numpy as np
        from mpi4py import MPI
        import hixl_rma
        hixl_rma.Init()
        if MPI.COMM_WORLD.Get_rank() == 1:
            time.sleep(6)   # never joins the creation in time
            os._exit(0)
        t0 = time.monotonic()
        try:
            MPI.Win.Create(np.zeros(4), 8, MPI.INFO_NULL, MPI.COMM_WORLD)
        except hixl_rma.HixlTimeoutError as exc:
            print(f"TIMEOUT after {time.monotonic() - t0:.1f} s: {exc}", flush=True)
        os._exit(0)
    '''))
    env = dict(os.environ, HIXL_RMA_TIMEOUT_MS="2000")
    _rc, out = _run([MPIEXEC, "-n", "2", sys.executable, "-m", "hixl_rma", str(prog)], env=env)
    line = next((ln for ln in out.splitlines() if ln.startswith("TIMEOUT after")), None)
    assert line is not None, out
    assert float(line.split()[2]) < 2.0 + 2.0 and "window creation" in line, out


@pytest.mark.parametrize("how", ["raise", "exit"])
def test_a_rank_whose_program_fails_ends_the_job(tmp_path, how):
    """As under ``python -m mpi4py``: a rank whose program raises (or calls
    sys.exit(5)) prints why and aborts the job, where the other rank would
    wait in its Barrier for it; a program's sys.exit(0) is its normal end."""
    prog = tmp_path / "fails.py"
    fail = "raise ValueError('rank 1 gives up')" if how == "raise" else "sys.exit(5)"
    prog.write_text(textwrap.dedent(f'''
        import sys
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        comm.Barrier()
        if comm.rank == 1:
            {fail}
        comm.Barrier()
        print("rank 0 past the barrier", flush=True)
    '''))
    rc, out = _run([MPIEXEC, "-n", "2", sys.executable, "-m", "hixl_rma", str(prog)], timeout=40)
    assert rc != 0, out  # (a hang fails the test in procutil.run)
    assert "rank 0 past the barrier" not in out, out
    if how == "raise":
        assert "ValueError: rank 1 gives up" in out, out
    ok = tmp_path / "ok.py"
    ok.write_text("import sys\nfrom mpi4py import MPI\nMPI.COMM_WORLD.Barrier()\nprint('done', flush=True)\n"
                  "sys.exit(0)\n")
    rc, out = _run([MPIEXEC, "-n", "2", sys.executable, "-m", "hixl_rma", str(ok)])
    assert rc == 0 and out.count("done") == 2, out


def test_a_source_tree_without_the_engine_says_so(tmp_path):
    """A checkout first on sys.path shadows the installed package: the
    import names that cause and the fix, not a bare "cannot import _engine"."""
    import shutil

    import hixl_rma
    src = os.path.dirname(hixl_rma.__file__)
    shutil.copytree(src, tmp_path / "hixl_rma", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    code = ("import sys\n"
            "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
            "import hixl_rma\n")
    rc, out = procutil.run([sys.executable, "-c", code], None, RUN_TIMEOUT_S, cwd=str(tmp_path))
    assert rc == 1, out
    assert f"hixl_rma was imported from {tmp_path / 'hixl_rma'}, which has no compiled engine" in out, out
    assert "Run from another directory, or build the checkout in place (pip install -e .)" in out
