"""HIXL_RMA (the NIXL plugin) with a peer that does not answer: a connect
to an unresponsive agent does not hold up transfers to the others, and a
deregistration whose acks timed out is finished by the engine once the slow
peer resumes or dies (issue 42, items 11 and 12). Three NIXL agents, each
in its own process; skipped, saying why, where NIXL is not installed."""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from support import procutil
from test_nixl import PEER, _env, pytestmark  # noqa: F401  (the same skip)

TIMEOUT_MS = 20000  # agent a's engine timeout: a connect to the stopped agent waits this long


def _spawn(role, d, *args, env):
    return subprocess.Popen([sys.executable, str(PEER), role, "HIXL_RMA", str(d), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _reap(procs):
    outs = []
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGCONT)
            os.killpg(p.pid, signal.SIGKILL)
        outs.append(p.communicate(timeout=60)[0])
    return outs


# What both programs below use: a file a peer publishes, and a peer stopped for sure.
PRELUDE = textwrap.dedent(r'''
    import json, os, signal, sys, threading, time
    import numpy as np
    from hixl_rma import nixl as hn

    def take(path):
        end = time.monotonic() + 60
        while not os.path.exists(path):
            assert time.monotonic() < end, f"no {path}"
            time.sleep(0.02)
        return open(path, "rb").read()
''') + procutil.STOP

ONE_SLOW_AGENT = PRELUDE + textwrap.dedent(r'''
    d, c_pid, timeout_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])


    a = hn.agent("a", ["HIXL_RMA"])
    src, back = np.zeros(1 << 20, np.uint8), np.zeros(1 << 20, np.uint8)
    a.register_memory(a.get_reg_descs([(src.ctypes.data, src.nbytes, 0, ""),
                                       (back.ctypes.data, back.nbytes, 0, "")], "DRAM"))
    b = a.add_remote_agent(take(f"{d}/b.md"))
    c = a.add_remote_agent(take(f"{d}/c.md"))
    b_base, b_len = json.loads(take(f"{d}/b.regions"))

    def xfer(op, local):
        h = a.initialize_xfer(op, a.get_xfer_descs([(local.ctypes.data, b_len, 0)], "DRAM"),
                              a.get_xfer_descs([(b_base, b_len, 0)], "DRAM"), "b")
        st = a.transfer(h)
        end = time.monotonic() + 3 * timeout_s
        while st == "PROC" and time.monotonic() < end:
            st = a.check_xfer_state(h)
            time.sleep(0.0005)
        a.release_xfer_handle(h)
        return st

    def round_trip(seed):
        src[:] = (np.arange(src.size) * 7 + seed) % 251
        back[:] = 0
        t0 = time.monotonic()
        assert xfer("WRITE", src) == "DONE" and xfer("READ", back) == "DONE", seed
        assert np.array_equal(back, src), f"round {seed}: the data read back differs"
        return time.monotonic() - t0

    round_trip(0)  # connected to b
    stop(c_pid)  # c published its metadata; its engine answers nothing now
    started, outcome = threading.Event(), {}

    def reach_c():
        started.set()
        t0 = time.monotonic()
        try:
            a.make_connection("c")
            outcome["result"] = "connected"
        except Exception as exc:
            outcome["result"] = f"raised {type(exc).__name__}"
        outcome["took"] = time.monotonic() - t0

    connector = threading.Thread(target=reach_c, daemon=True)
    connector.start()
    assert started.wait(30), "the connecting thread did not start"
    time.sleep(0.5)  # into the connect; whether it still runs is checked below
    times = [round_trip(seed) for seed in range(1, 21)]
    overlapped = connector.is_alive()
    print("ROUNDS", len(times), "max", round(max(times), 3), "s; connect still running:", overlapped, flush=True)
    assert overlapped, f"the connect to c ended before the transfers to b did ({outcome})"
    assert max(times) < timeout_s / 4, f"a round trip to b took {max(times):.1f} s while a connect to c ran"
    connector.join(timeout_s + 30)
    assert not connector.is_alive(), "the connect to the stopped agent did not end within its timeout"
    print("CONNECT", outcome, flush=True)
    assert outcome["result"] != "connected", outcome
    print("slow agent ok", flush=True)
''')


def test_connect_to_an_unresponsive_agent_does_not_stall_transfers_to_another(tmp_path):
    """Item 12: agent a is connected to b; c publishes its metadata and is
    stopped (SIGSTOP). While a's connect to c waits (up to a's 20 s
    timeout), a's WRITE + READ round trips to b complete promptly, with the
    data verified; the connect to c then fails within its timeout."""
    d = tmp_path / "rv"
    d.mkdir()
    env = _env(HIXL_RMA_TIMEOUT_MS=str(TIMEOUT_MS))
    peers = [_spawn("hold", d, "b", env=env), _spawn("hold", d, "c", env=env)]
    script = tmp_path / "a.py"
    script.write_text(ONE_SLOW_AGENT)
    try:
        rc, out = procutil.run([sys.executable, str(script), str(d), str(peers[1].pid), str(TIMEOUT_MS / 1000)],
                               env=env, timeout=240)
    finally:
        (d / "b.stop").touch()
        (d / "c.stop").touch()
        os.kill(peers[1].pid, signal.SIGCONT)
        try:
            peers[0].wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        outs = _reap(peers)
    assert rc == 0 and "slow agent ok" in out, out[-4000:] + "\n--- b:\n" + outs[0][-2000:]
    assert "b ok" in outs[0], outs[0][-2000:]


SLOW_ACKER = PRELUDE + textwrap.dedent(r'''
    d, p_pid, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]


    def put(path, data):
        open(path + ".tmp", "wb").write(data)
        os.rename(path + ".tmp", path)

    t = hn.agent("t", ["HIXL_RMA"])
    mem = np.full(1 << 20, 7, np.uint8)
    before = hn.engine_stats("t")["regions"]
    reg = t.register_memory(t.get_reg_descs([(mem.ctypes.data, mem.nbytes, 0, "")], "DRAM"))
    put(f"{d}/t.regions", json.dumps([mem.ctypes.data, mem.nbytes]).encode())
    put(f"{d}/t.md", t.get_agent_metadata())
    t.add_remote_agent(take(f"{d}/p.md"))
    take(f"{d}/p.read1")  # p read the region: its engine is a client that must acknowledge
    assert hn.engine_stats("t")["regions"] == before + 1
    stop(p_pid)
    t0 = time.monotonic()
    try:
        t.deregister_memory(reg)
        said = "returned"
    except Exception as exc:
        said = f"raised {type(exc).__name__}"
    took = time.monotonic() - t0
    left = hn.engine_stats("t")["regions"] - before
    print("DEREGISTER", said, "after", round(took, 2), "s; regions left", left, flush=True)
    assert took >= 1.5, "the deregistration did not wait for the stopped peer's ack"
    assert left == 1, "the region was unmapped while a peer had not acknowledged its withdrawal"
    mem[:] = 0x5A  # were the region still served, a read would return this
    os.kill(p_pid, signal.SIGCONT if mode == "resume" else signal.SIGKILL)
    end = time.monotonic() + 20
    while hn.engine_stats("t")["regions"] != before and time.monotonic() < end:
        time.sleep(0.01)
    left = hn.engine_stats("t")["regions"] - before
    print("AFTER", mode, "regions left", left, flush=True)
    assert left == 0, f"the region is still registered 20 s after the peer's {mode}"
    if mode == "resume":
        put(f"{d}/p.again", b"")
        got = take(f"{d}/p.read2").decode()
        print("READ2", got, flush=True)
        assert not got.startswith("DONE"), f"the peer read the withdrawn region: {got}"
        put(f"{d}/p.stop", b"")
    print("slow ack ok", flush=True)
''')


@pytest.mark.parametrize("mode", ["resume", "kill"])
def test_deregistration_whose_acks_timed_out_is_finished_later(tmp_path, mode):
    """Item 11: agent p read agent t's region; p is stopped (SIGSTOP) and t
    deregisters the region through NIXL, which gives up on p's ack after t's
    2 s timeout (and drops its record). The engine keeps the region mapped
    meanwhile, and withdraws it for good on its own once p resumes (p's READ
    of it is then an error, not data) or is killed."""
    d = tmp_path / "rv"
    d.mkdir()
    env = _env(HIXL_RMA_TIMEOUT_MS="2000")
    reader = _spawn("reader", d, env=env)
    script = tmp_path / "t.py"
    script.write_text(SLOW_ACKER)
    try:
        rc, out = procutil.run([sys.executable, str(script), str(d), str(reader.pid), mode], env=env, timeout=180)
    finally:
        (d / "p.stop").touch()
        if reader.poll() is None:
            os.kill(reader.pid, signal.SIGCONT)
        try:
            reader.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        p_out, = _reap([reader])
    assert rc == 0 and "slow ack ok" in out, out[-4000:] + "\n--- p:\n" + p_out[-2000:]
    if mode == "resume":
        assert "reader ok" in p_out, p_out[-2000:]
