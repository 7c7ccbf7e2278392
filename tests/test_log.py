"""HIXL_RMA_LOG_LEVEL: hixl_rma's log (Python's logging under "hixl_rma" and
the engine's own lines on stderr), silent by default."""
import os
import sys
import textwrap

import pytest

from support import procutil

pytestmark = pytest.mark.timeout(120)

# Two engines in one process: a connection made, one refused (another
# domain), and a peer that finalized under a transfer (declared dead).
ENGINES = textwrap.dedent(r'''
    import numpy as np
    import hixl_rma
    from hixl_rma import READ
    from hixl_rma.ground.errors import HixlError
    server = hixl_rma.Engine(options={"JobToken": b"t" * 16})
    mem = np.arange(4096, dtype=np.uint8)
    handle = server.register_mem(mem)
    client = hixl_rma.Engine(options={"JobToken": b"t" * 16})
    buf = np.zeros(4096, np.uint8)
    client.register_mem(buf)
    client.connect(server.address, timeout_ms=5000)
    client.transfer_sync(server.address, READ, [(buf.ctypes.data, handle.addr, 4096)])
    assert np.array_equal(buf, mem)
    stranger = hixl_rma.Engine(options={"JobToken": b"t" * 16, "Domain": "other"})
    try:
        stranger.connect(server.address, timeout_ms=3000)
    except HixlError:
        pass
    stranger.finalize()
    server.finalize()
    # The server's goodbye is heard by the client's engine thread; the
    # transfer below is to fail on a peer known to have ended (in this one
    # process its memory is still there, so a transfer made before would
    # succeed).
    import time
    deadline = time.monotonic() + 10
    while not client.peer_dead(server.address) and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        client.transfer_sync(server.address, READ, [(buf.ctypes.data, handle.addr, 4096)], timeout_ms=3000)
    except HixlError as exc:
        print("transfer after the server ended:", type(exc).__name__, flush=True)
    client.finalize()
    print("done", flush=True)
''')

# Init under mpiexec: the runtime's own lines.
RANKS = textwrap.dedent(r'''
    import numpy as np
    import hixl_rma
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    mem = np.zeros(8, np.int64)
    win = hixl_rma.Win.Create(mem, 8, comm=comm)
    win.Lock_all()
    win.Put(np.full(1, comm.rank, np.int64), (comm.rank + 1) % comm.size, 0)
    win.Unlock_all()
    comm.Barrier()
    win.Free()
    print("done", flush=True)
''')


def _run(tmp_path, code, level, ranks=None):
    prog = tmp_path / "prog.py"
    prog.write_text(code)
    env = procutil.clean_env()
    env.pop("HIXL_RMA_LOG_LEVEL", None)
    if level is not None:
        env["HIXL_RMA_LOG_LEVEL"] = level
    cmd = [sys.executable, str(prog)]
    if ranks:
        cmd = [procutil.mpiexec(), "-n", str(ranks), *cmd]
    return procutil.run(cmd, env, 90, cwd=str(tmp_path))


def test_silent_by_default(tmp_path):
    rc, out = _run(tmp_path, ENGINES, None)
    assert rc == 0 and "done" in out, out
    assert "hixl_rma engine[" not in out and "hixl_rma[" not in out, out


def test_engine_lines_at_info(tmp_path):
    rc, out = _run(tmp_path, ENGINES, "info")
    assert rc == 0 and "done" in out, out
    pid_lines = [line for line in out.splitlines() if line.startswith("hixl_rma engine[")]
    assert any(" INFO: connected to 127.0.0.1:" in line for line in pid_lines), out
    assert any(" INFO: accepted engine '" in line for line in pid_lines), out
    assert any(" INFO: Connect to 127.0.0.1:" in line and "refused: the engine there does not prove" in line
               for line in pid_lines), out
    assert any(" WARNING: " in line for line in pid_lines), out  # the transfer to the engine that ended
    assert "DEBUG" not in out, out


def test_warning_leaves_out_info(tmp_path):
    rc, out = _run(tmp_path, ENGINES, "WARNING")
    assert rc == 0 and "done" in out, out
    assert " INFO: " not in out, out
    assert " WARNING: " in out, out


def test_runtime_lines_under_mpiexec(tmp_path):
    rc, out = _run(tmp_path, RANKS, "info", ranks=2)
    assert rc == 0 and out.count("done") == 2, out
    for rank in (0, 1):
        assert f"INFO hixl_rma.runtime: rank {rank} of 2 on " in out, out
        assert f"INFO hixl_rma.runtime: rank {rank} connected to rank {1 - rank} at " in out, out
    # A good run warns of nothing: a peer that finalized at the end (if this
    # rank hears it before it ends too) is an info line.
    assert "WARNING" not in out, out


def test_a_bad_level_is_refused(tmp_path):
    rc, out = _run(tmp_path, "import hixl_rma\n", "loud")
    assert rc != 0
    assert "HIXL_RMA_LOG_LEVEL must be one of off, error, warning, info, debug, got 'loud'" in out, out


def test_the_setting_is_documented():
    from hixl_rma.ground import config
    assert "HIXL_RMA_LOG_LEVEL" in config.SETTINGS
    assert os.environ.get("HIXL_RMA_LOG_LEVEL") is None or config.log_level() is not None
