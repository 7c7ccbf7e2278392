"""Workload ``nixl``: NIXL's agent API on the HIXL_RMA backend (hixl_rma's
engine, libplugin_HIXL_RMA.so) against NIXL's own UCX backend, in one run::

    python -m hixl_rma.bench nixl [--sizes 4K,64K,1M,16M,64M] [--batch 16] [--iters N]

Two processes on this host, each one NIXL agent holding both backends
(``hixl_rma.nixl.agent``): the target registers 64 MiB and waits for the
end, sleeping on NIXL's notifications (its UCX backend's progress thread
serves UCX's target side; HIXL_RMA's engine thread serves ours); the
initiator registers 64 MiB too and, for each size, operation (WRITE, READ)
and shape -- one descriptor of the size, or a batch of up to ``--batch``
descriptors of the size (at most 64 MiB in all) -- prepares one transfer per
backend, then times ``--iters`` post+complete rounds (``transfer`` and
``check_xfer_state`` polling, as NIXL users wait), the backends interleaved
within every repetition. Figures: GB/s and µs per transfer (median of
``--reps``; ``--iters`` rounds, by default as many as take the slower
backend about 0.2 s), the ratio HIXL_RMA / UCX in GB/s (above 1 favours HIXL_RMA), and
CPU time per transfer of each side. The data of the last round of every
figure is checked.

With ``--scatter 1024,16384,65536`` it measures instead what a KV-cache
server does: a WRITE of N 4 KiB blocks, scattered over both sides' regions
(which grow to hold them), with a notification, timed from the descriptor
lists' preparation (``get_xfer_descs`` of both lists and
``initialize_xfer``) to DONE, the backends interleaved, each repetition's
blocks read back and compared; beside it the floor, the same scatter done in
one process as one memcpy per block (in C, between buffers already touched);
and the cost per descriptor.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

NAME = "nixl"
HELP = "NIXL's agent on HIXL_RMA against NIXL on UCX, WRITE and READ, 4 KiB..64 MiB (two processes)"

MiB = 1 << 20
REGION = 64 * MiB
BACKENDS = ("HIXL_RMA", "UCX")
BLOCK = 4096  # a scattered block (--scatter)


def _size(text: str) -> int:
    text = text.strip().upper().rstrip("B").rstrip("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


def add_arguments(p) -> None:
    p.add_argument("--sizes", default="4K,64K,1M,16M,64M", help="transfer sizes (default 4K,64K,1M,16M,64M)")
    p.add_argument("--batch", type=int, default=16, help="descriptors in the batched shape (default 16)")
    p.add_argument("--iters", type=int, default=None, help="transfers per figure and repetition (default: by size)")
    p.add_argument("--scatter", default="", help="instead: WRITEs of N scattered 4 KiB blocks, prep included, "
                                                  "for each N given (e.g. 1024,16384,65536)")
    p.add_argument("--target-prefix", default="", help="command prefix that runs the target elsewhere (another "
                   "host: e.g. 'python tests/support/simhosts.py exec 1'); then --initiator-prefix runs the initiator")
    p.add_argument("--initiator-prefix", default="", help="command prefix of the initiator (with --target-prefix)")
    p.add_argument("--role", default="", choices=("", "initiator", "target"), help=argparse_suppress())
    p.add_argument("--dir", default="", help=argparse_suppress())


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


def _put(path, data: bytes):
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def _take(path, proc=None, timeout=60.0) -> bytes:
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the target process ended (status {proc.returncode}) before writing {path}")
        if time.monotonic() > end:
            raise TimeoutError(f"no {path} after {timeout} s")
        time.sleep(0.01)
    with open(path, "rb") as f:
        return f.read()


def _counts(text: str) -> list[int]:
    counts = [int(n) for n in text.split(",") if n.strip()]
    if any(n < 1 or n > 1 << 20 for n in counts):
        raise SystemExit("--scatter: each N between 1 and 1048576")
    return counts


def _region(args) -> int:
    """Bytes each side registers: 64 MiB, or what the largest --scatter needs."""
    return max([REGION] + [n * BLOCK for n in _counts(args.scatter)])


def _target(folder: str, region: int) -> None:
    """The target side: register, publish, then sleep on notifications until told to end."""
    import numpy as np

    from hixl_rma import nixl as hn

    agent = hn.agent("bench-target", BACKENDS)
    mem = np.zeros(region, np.uint8)
    agent.register_memory(agent.get_reg_descs([(mem.ctypes.data, mem.nbytes, 0, "")], "DRAM"))
    mem[:] = np.resize(np.arange(251, dtype=np.uint8), region)  # what READs fetch
    _put(f"{folder}/target.md", agent.get_agent_metadata())
    _put(f"{folder}/target.mem", json.dumps([mem.ctypes.data, mem.nbytes]).encode())
    agent.add_remote_agent(_take(f"{folder}/initiator.md"))
    peer = None
    end = time.monotonic() + 3600
    while time.monotonic() < end:
        got = agent.get_new_notifs()
        msgs = [m for ms in got.values() for m in ms]
        if b"stop" in msgs:
            break
        if b"cpu" in msgs:  # the initiator asks between figures: this process's CPU seconds so far
            peer = peer or next(iter(got))
            agent.send_notif(peer, b"cpu %.6f" % time.process_time())
        time.sleep(0.01)


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) of a process on this host."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _target_cpu(agent, peer, target) -> float:
    """The target's CPU seconds so far: from /proc when it is this process's
    child, else it answers a notification (across hosts; its polling of
    notifications every 10 ms is in the figure then)."""
    if target is not None:
        return _cpu_of(target.pid)
    agent.send_notif(peer, b"cpu")
    end = time.monotonic() + 30
    while time.monotonic() < end:
        for msg in agent.get_new_notifs().get(peer, []):
            if msg.startswith(b"cpu "):
                return float(msg[4:])
        time.sleep(0.001)
    raise TimeoutError("the target did not answer a CPU query in 30 s")


def _wait(agent, handle, timeout=60.0) -> str:
    end = time.monotonic() + timeout
    state = agent.check_xfer_state(handle)
    while state == "PROC":
        if time.monotonic() > end:
            return "TIMEOUT"
        state = agent.check_xfer_state(handle)
    return state


def run(args) -> dict:
    import numpy as np

    from hixl_rma import nixl as hn
    from hixl_rma.bench import report as rp

    sizes = [_size(s) for s in args.sizes.split(",") if s.strip()]
    if any(s <= 0 or s > REGION for s in sizes):
        raise SystemExit(f"--sizes: each between 1 B and {REGION} B")
    reps = args.reps or (2 if args.quick else 5)
    region = _region(args)
    if args.role == "target":
        _target(args.dir, region)
        return {"quiet": True, "ok": True}
    if args.target_prefix and args.role != "initiator":
        return _apart(args)
    folder = args.dir or tempfile.mkdtemp(prefix="hixl-bench-nixl-")
    target = None
    if args.role != "initiator":
        target = subprocess.Popen([sys.executable, "-m", "hixl_rma.bench", "nixl", "--role", "target", "--dir",
                                   folder, "--scatter", args.scatter], stdout=subprocess.DEVNULL, stderr=None)
    ok = True
    figures = []
    try:
        agent = hn.agent("bench-initiator", BACKENDS)
        expect = np.resize(np.arange(251, dtype=np.uint8), region)
        mem = expect.copy()  # WRITEs leave it at the target; READs bring it back
        agent.register_memory(agent.get_reg_descs([(mem.ctypes.data, mem.nbytes, 0, "")], "DRAM"))
        _put(f"{folder}/initiator.md", agent.get_agent_metadata())
        peer = agent.add_remote_agent(_take(f"{folder}/target.md", target))
        peer = peer.decode() if isinstance(peer, bytes) else peer
        base, _ = json.loads(_take(f"{folder}/target.mem", target))
        if args.scatter:
            sizes = []  # the scatter figures only
            ok &= _scatter(agent, peer, mem, base, _counts(args.scatter), reps, figures)
        for size in sizes:
            for shape in ("one", "batch"):
                count = 1 if shape == "one" else max(1, min(args.batch, REGION // size))
                if shape == "batch" and count == 1:
                    continue
                total = size * count
                loc = agent.get_xfer_descs([(mem.ctypes.data + i * size, size, 0) for i in range(count)], "DRAM")
                rem = agent.get_xfer_descs([(base + i * size, size, 0) for i in range(count)], "DRAM")
                for op in ("WRITE", "READ"):
                    handles = {b: agent.initialize_xfer(op, loc, rem, peer, backends=[b]) for b in BACKENDS}
                    slowest = 0.0
                    for b in BACKENDS:  # warm up (connections, first touches), and the slower one's time
                        for _ in range(3):
                            t0 = time.perf_counter()
                            agent.transfer(handles[b])
                            ok &= _wait(agent, handles[b]) == "DONE"
                        slowest = max(slowest, time.perf_counter() - t0)
                    # about 0.2 s per backend and repetition, the same count for both
                    iters = args.iters or max(3, min(2000, int(0.2 / max(slowest, 1e-6))))
                    times = {b: [] for b in BACKENDS}
                    cpu_i = {b: [] for b in BACKENDS}
                    cpu_t = {b: [] for b in BACKENDS}
                    for _ in range(reps):
                        for b in BACKENDS:
                            if op == "READ":
                                mem[:total] = 0
                            t0c = _target_cpu(agent, peer, target)
                            c0 = time.process_time()
                            t0 = time.perf_counter()
                            for _ in range(iters):
                                agent.transfer(handles[b])
                                if _wait(agent, handles[b]) != "DONE":
                                    ok = False
                                    break
                            el = time.perf_counter() - t0
                            times[b].append(el / iters)
                            cpu_i[b].append((time.process_time() - c0) / iters)
                            cpu_t[b].append((_target_cpu(agent, peer, target) - t0c) / iters)
                            if op == "READ" and not np.array_equal(mem[:total], expect[:total]):
                                ok = False
                    for h in handles.values():
                        agent.release_xfer_handle(h)
                    fig = {"size": size, "descs": count, "op": op, "iters": iters}
                    for b in BACKENDS:
                        s = rp.summarize(times[b])
                        fig[b] = {"us": s["median"] * 1e6, "gbps": total / s["median"] / 1e9, "samples": s["samples"],
                                  "cpu_initiator_us": rp.summarize(cpu_i[b])["median"] * 1e6,
                                  "cpu_target_us": rp.summarize(cpu_t[b])["median"] * 1e6}
                    fig["ratio"] = fig["HIXL_RMA"]["gbps"] / fig["UCX"]["gbps"]
                    figures.append(fig)
        agent.send_notif(peer, b"stop")
    finally:
        if target is not None:
            try:
                target.wait(timeout=30)
            except subprocess.TimeoutExpired:
                target.kill()
                target.wait()
    have = hn.installed()
    return {"workload": NAME, "ok": ok, "reps": reps, "figures": figures, "nixl": have[1] if have else None,
            "where": "one node", "machine": rp.machine_info(), "scatter": bool(args.scatter)}


def _scatter(agent, peer, mem, base, counts, reps, figures) -> bool:
    """The --scatter figures (appended to `figures`); False if any data read back differ."""
    import numpy as np

    from hixl_rma.bench import report as rp
    from hixl_rma.bench._floor import floor_scatter

    ok = True
    slots = mem.nbytes // BLOCK
    blocks = mem.reshape(slots, BLOCK)
    words = mem.view(np.uint64).reshape(slots, BLOCK // 8)
    for n in counts:
        rng = np.random.default_rng(n)
        mine, theirs = rng.permutation(slots)[:n], rng.permutation(slots)[:n]
        local = [(mem.ctypes.data + int(s) * BLOCK, BLOCK, 0) for s in mine]
        remote = [(base + int(s) * BLOCK, BLOCK, 0) for s in theirs]
        back = np.zeros(n * BLOCK, np.uint8)
        reg = agent.register_memory(agent.get_reg_descs([(back.ctypes.data, back.nbytes, 0, "")], "DRAM"))
        home = agent.get_xfer_descs([(back.ctypes.data + i * BLOCK, BLOCK, 0) for i in range(n)], "DRAM")
        prep = {b: [] for b in BACKENDS}
        total = {b: [] for b in BACKENDS}
        for rep in range(reps):
            for k, b in enumerate(BACKENDS):
                words[mine, 0] = np.arange(n, dtype=np.uint64) + ((rep * 2 + k + 1) << 32)  # this round's blocks
                t0 = time.perf_counter()
                h = agent.initialize_xfer("WRITE", agent.get_xfer_descs(local, "DRAM"),
                                          agent.get_xfer_descs(remote, "DRAM"), peer, b"scatter", backends=[b])
                t1 = time.perf_counter()
                agent.transfer(h)
                ok &= _wait(agent, h) == "DONE"
                t2 = time.perf_counter()
                agent.release_xfer_handle(h)
                prep[b].append(t1 - t0)
                total[b].append(t2 - t0)
                back[:] = 0  # read back through HIXL_RMA and compare, block by block
                r = agent.initialize_xfer("READ", home, agent.get_xfer_descs(remote, "DRAM"), peer,
                                          backends=["HIXL_RMA"])
                agent.transfer(r)
                ok &= _wait(agent, r) == "DONE" and np.array_equal(back.reshape(n, BLOCK), blocks[mine])
                agent.release_xfer_handle(r)
        agent.deregister_memory(reg)
        # The floor: one memcpy per block in one process, between buffers
        # already touched (the first round is a warm-up, left out).
        src, dst = np.resize(np.arange(251, dtype=np.uint8), mem.nbytes), np.ones(mem.nbytes, np.uint8)
        ns = floor_scatter(dst, src, theirs.astype(np.int64), mine.astype(np.int64), BLOCK, reps + 1)[1:]
        del src, dst
        fig = {"descs": n, "size": BLOCK, "op": "WRITE", "floor_ms": rp.summarize(ns)["median"] / 1e6}
        for b in BACKENDS:
            t, p = rp.summarize(total[b])["median"], rp.summarize(prep[b])["median"]
            fig[b] = {"ms": t * 1e3, "prep_ms": p * 1e3, "us_per_desc": t / n * 1e6, "samples": total[b]}
        fig["over_floor"] = fig["HIXL_RMA"]["ms"] / fig["floor_ms"]
        figures.append(fig)
    return ok


def _apart(args) -> dict:
    """Target and initiator each under its prefix (e.g. on two simulated
    hosts); this process only starts them and reads the initiator's JSON."""
    import shlex

    folder = tempfile.mkdtemp(prefix="hixl-bench-nixl-")
    out = os.path.join(folder, "result.json")
    common = [sys.executable, "-m", "hixl_rma.bench", "nixl", "--dir", folder]
    target = subprocess.Popen(shlex.split(args.target_prefix) + common + ["--role", "target", "--scatter",
                                                                           args.scatter], stdout=subprocess.DEVNULL)
    mine = ["--role", "initiator", "--sizes", args.sizes, "--batch", str(args.batch), "--json", out,
            "--scatter", args.scatter]
    mine += (["--iters", str(args.iters)] if args.iters else []) + (["--reps", str(args.reps)] if args.reps else [])
    mine += ["--quick"] if args.quick else []
    try:
        rc = subprocess.run(shlex.split(args.initiator_prefix) + common + mine, stdout=subprocess.DEVNULL).returncode
    finally:
        try:
            target.wait(timeout=60)
        except subprocess.TimeoutExpired:
            target.kill()
            target.wait()
    if rc != 0 or not os.path.exists(out):
        raise SystemExit(f"the initiator failed (status {rc})")
    with open(out) as f:
        result = json.load(f)
    result["where"] = f"target under {args.target_prefix!r}, initiator under {args.initiator_prefix!r}"
    return result


def report(result) -> None:
    from hixl_rma.bench import report as rp

    if result.get("scatter"):
        _report_scatter(result)
        return
    rows = []
    for f in result["figures"]:
        h, u = f["HIXL_RMA"], f["UCX"]
        rows.append([rp.fmt_size(f["size"]) + (f" x{f['descs']}" if f["descs"] > 1 else ""), f["op"],
                     rp.fmt_num(h["gbps"]), rp.fmt_num(u["gbps"]), rp.fmt_num(f["ratio"]),
                     rp.fmt_num(h["us"], 1), rp.fmt_num(u["us"], 1),
                     f"{rp.fmt_num(h['cpu_initiator_us'], 0)}/{rp.fmt_num(h['cpu_target_us'], 0)}",
                     f"{rp.fmt_num(u['cpu_initiator_us'], 0)}/{rp.fmt_num(u['cpu_target_us'], 0)}"])
    rp.print_table(f"NIXL {result['nixl']}: HIXL_RMA vs UCX backend, {result.get('where', 'one node')}, "
                   f"median of {result['reps']} "
                   f"(data checked: {result['ok']})",
                   ["transfer", "op", "HIXL_RMA GB/s", "UCX GB/s", "ratio", "HIXL_RMA µs", "UCX µs",
                    "CPU µs HIXL_RMA (init/target)", "CPU µs UCX (init/target)"], rows,
                   notes=["ratio: HIXL_RMA GB/s / UCX GB/s (above 1 favours HIXL_RMA); CPU: per transfer, each side"])


def _report_scatter(result) -> None:
    from hixl_rma.bench import report as rp

    rows = []
    for f in result["figures"]:
        h, u = f["HIXL_RMA"], f["UCX"]
        rows.append([f"{f['descs']:,}", rp.fmt_num(h["ms"], 2), rp.fmt_num(h["prep_ms"], 2), rp.fmt_num(u["ms"], 2),
                     rp.fmt_num(f["floor_ms"], 2), rp.fmt_num(f["over_floor"]), rp.fmt_num(h["us_per_desc"], 3),
                     rp.fmt_num(u["us_per_desc"], 3)])
    rp.print_table(f"NIXL {result['nixl']}: WRITE of N scattered 4 KiB blocks + notification, prep included, "
                   f"{result.get('where', 'one node')}, median of {result['reps']} (data checked: {result['ok']})",
                   ["N blocks", "HIXL_RMA ms", "of it prep ms", "UCX ms", "floor ms", "HIXL_RMA / floor",
                    "HIXL_RMA µs/desc", "UCX µs/desc"], rows,
                   notes=["floor: the same scatter in one process, one memcpy per block; "
                          "prep: get_xfer_descs of both lists + initialize_xfer"])
