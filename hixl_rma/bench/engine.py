"""Workload ``engine``: the raw engine against raw UCX (``ucx_perftest``).

Two processes, no MPI: this process is the origin; it spawns the target with
:mod:`subprocess` and learns the target's engine address and buffer from the
target's stdout. The target registers one numpy buffer (or, with
``--target-mem alloc``, engine-allocated memory) and then blocks reading its
stdin until told to stop: it never busy-waits.

Measured, each as the median of ``--reps`` repetitions after a warm-up one,
with min and max:

* WRITE bandwidth of ``Engine.transfer_sync`` (one block per call, remote
  completion per call) at 64 KiB, 1 MiB and 16 MiB; the iteration count is
  calibrated so one repetition takes about ``--seconds`` (0.2 s).
* WRITE round-trip latency: ``transfer_sync`` of 8 bytes, median per call.
* Beside them, in the same run and interleaved with the engine's
  repetitions: ``ucx_perftest -t ucp_put_bw`` at the same sizes and
  iteration counts, and ``-t ucp_put_lat`` at 8 bytes.
* Diagnostics: the per-call cost of the binding and engine with nothing to
  move (a zero-length block), and the bandwidth of ``post1`` x N + one
  ``flush`` (no per-call flush, no descriptor array).

After the runs the target's buffer is checked (CRC) against what was sent.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable

from . import report as rp
from . import ucx_perftest as pt

NAME = "engine"
HELP = "engine WRITE bandwidth/latency between two processes vs ucx_perftest"

SIZES = (64 << 10, 1 << 20, 16 << 20)
LAT_SIZE = 8
_HEADER = "HIXL_RMA_BENCH_TARGET "


def add_arguments(p) -> None:
    p.add_argument("--seconds", type=float, default=None,
                   help="target duration of one repetition (default 0.2; --quick: 0.01)")
    p.add_argument("--target-mem", choices=("numpy", "alloc"), default="numpy",
                   help="target memory: a registered numpy buffer (default) or Engine.alloc_mem "
                        "(same-node direct-pointer path)")
    p.add_argument("--ucx-tls", default=None,
                   help="set UCX_TLS for the engine's two processes and for ucx_perftest "
                        "(default: the environment's, i.e. let UCX choose)")
    p.add_argument("--perftest-alloc", default=None, metavar="PRIO",
                   help="UCX_ALLOC_PRIO for ucx_perftest only (its buffers come from ucp_mem_map "
                        "ALLOCATE; e.g. 'thp,mmap,heap' makes them ordinary THP memory like numpy's)")
    p.add_argument("--no-perftest", action="store_true", help="skip the ucx_perftest reference")


# --------------------------------------------------------------------------- target process

def target_main(argv=None) -> int:
    """The target: register memory, print where it is, block on stdin until 'stop'."""
    argv = sys.argv[1:] if argv is None else argv
    mem, nbytes = argv[0], int(argv[1])
    import numpy as np

    import hixl_rma

    eng = hixl_rma.Engine("127.0.0.1:0")
    if mem == "alloc":
        handle = eng.alloc_mem(nbytes)
        buf = np.frombuffer(handle, dtype=np.uint8)
    else:
        buf = np.zeros(nbytes, dtype=np.uint8)
        handle = eng.register_mem(buf)
    buf[:] = 0xEE  # touch every page now, not during the first timed transfer
    sys.stdout.write(_HEADER + json.dumps({"address": eng.address, "addr": int(handle.addr),
                                           "length": int(handle.length), "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    while True:
        line = sys.stdin.readline()  # blocks in read(2): the target does nothing else
        cmd = line.split()
        if not cmd or cmd[0] == "stop":
            break
        if cmd[0] == "crc":
            off, n = int(cmd[1]), int(cmd[2])
            sys.stdout.write(f"{zlib.crc32(buf[off:off + n])}\n")
        else:
            sys.stdout.write(f"error unknown command {cmd[0]!r}\n")
        sys.stdout.flush()
    del buf
    eng.finalize()
    return 0


class _Target:
    """The target subprocess and a line reader on its stdout."""

    def __init__(self, mem: str, nbytes: int, env: dict, timeout: float = 60.0):
        code = "import sys; from hixl_rma.bench.engine import target_main; sys.exit(target_main())"
        self.proc = subprocess.Popen([sys.executable, "-c", code, mem, str(nbytes)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        try:
            while True:
                line = self.readline(timeout)
                if line.startswith(_HEADER):
                    self.info = json.loads(line[len(_HEADER):])
                    break
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise

    def _pump(self):
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def readline(self, timeout: float) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"benchmark target gave no answer within {timeout:.0f} s") from None
        if line is None:
            raise RuntimeError(f"benchmark target exited (status {self.proc.wait()})")
        return line

    def command(self, cmd: str, timeout: float = 60.0) -> str:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.readline(timeout).strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --------------------------------------------------------------------------- measurement

def _calibrate(timed: Callable[[int], float], seconds: float) -> int:
    """Iterations for one repetition of about ``seconds`` (``timed(n)`` returns seconds)."""
    n, floor = 1, min(0.05, seconds / 4)
    while True:
        t = timed(n)
        if t >= floor or n >= 10_000_000:
            return max(1, round(n * seconds / max(t, 1e-9)))
        n = n * 4 if t < floor / 16 else max(n + 1, int(n * floor * 1.5 / max(t, 1e-9)))


def run(args) -> dict:
    t_start = time.monotonic()
    quick = bool(args.quick)
    reps = args.reps if args.reps is not None else (3 if quick else 5)
    seconds = args.seconds if args.seconds is not None else (0.01 if quick else 0.2)
    if reps < 1:
        raise SystemExit("--reps must be at least 1")
    if args.ucx_tls:
        os.environ["UCX_TLS"] = args.ucx_tls  # read by UCX when the engines start
    import numpy as np

    import hixl_rma

    W = hixl_rma.WRITE
    max_size = max(SIZES)
    result: dict = {
        "workload": NAME,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": rp.machine_info(),
        "config": {"reps": reps, "quick": quick, "seconds_per_rep": seconds, "sizes": list(SIZES),
                   "latency_size": LAT_SIZE, "target_mem": args.target_mem, "ucx_tls": args.ucx_tls,
                   "perftest_alloc": args.perftest_alloc, "warmup_reps": 1},
    }

    exe = None if args.no_perftest else pt.find()
    perf: dict = {"available": exe is not None, "path": exe,
                  "version": pt.version(exe) if exe and not quick else None,  # ucx_info: 0.4 s
                  "error": None if exe or args.no_perftest else "ucx_perftest not found", "runs": []}
    result["ucx_perftest"] = perf
    perf_env = {"UCX_ALLOC_PRIO": args.perftest_alloc} if args.perftest_alloc else {}

    def perftest(test, size, iters, warmup, extra=()):
        if not perf["available"] or perf["error"]:
            return None
        try:
            r = pt.run(exe, test, size, iters, warmup, extra=extra, env=perf_env)
        except pt.PerftestError as exc:
            perf["error"] = str(exc)
            print(f"warning: ucx_perftest failed, the reference is left out: {exc}", file=sys.stderr)
            return None
        perf["runs"].append(r)
        return r

    target = _Target(args.target_mem, max_size, dict(os.environ))
    eng = None
    try:
        remote, raddr = target.info["address"], target.info["addr"]
        eng = hixl_rma.Engine("127.0.0.1:0")
        src = np.empty(max_size, dtype=np.uint8)
        src[:] = (np.arange(max_size, dtype=np.uint64) % 251).astype(np.uint8)
        hsrc = eng.register_mem(src)
        laddr = hsrc.addr
        t0 = time.perf_counter()
        eng.connect(remote)
        result["connect_ms"] = (time.perf_counter() - t0) * 1e3
        ts = eng.transfer_sync

        # ---- bandwidth, engine and ucx_perftest interleaved repetition by repetition
        bw_rows = []
        for size in SIZES:
            desc = np.array([[laddr, raddr, size]], dtype=np.uint64)

            def timed(n, desc=desc):
                t = time.perf_counter()
                for _ in range(n):
                    ts(remote, W, desc)
                return time.perf_counter() - t

            iters = _calibrate(timed, seconds)
            timed(iters)  # warm-up repetition
            eng_s, ucx_s, pairs = [], [], []
            for _ in range(reps):
                eng_s.append(size * iters / timed(iters) / 1e9)
                if not quick or not ucx_s:
                    r = perftest("ucp_put_bw", size, iters, max(2 if quick else 10, iters // 10), ("-o",))
                    if r is not None:
                        ucx_s.append(pt.bandwidth_gbps(r))
                        pairs.append(eng_s[-1] / ucx_s[-1])
            e, u = rp.summarize(eng_s), (rp.summarize(ucx_s) if ucx_s else None)
            bw_rows.append({"size": size, "iters": iters, "engine_gbps": e, "ucx_perftest_gbps": u,
                            "ratio": rp.ratio(e, u), "ratio_paired": rp.summarize(pairs) if pairs else None})
        result["bandwidth"] = bw_rows

        # ---- 8-byte WRITE round trip (transfer_sync = put + remote completion)
        desc8 = np.array([[laddr, raddr, LAT_SIZE]], dtype=np.uint64)
        pc = time.perf_counter_ns

        def lat_rep(n):
            times = [0] * n
            for i in range(n):
                t = pc()
                ts(remote, W, desc8)
                times[i] = pc() - t
            times.sort()
            return times[n // 2] / 1e3

        def lat_timed(n):
            t = time.perf_counter()
            lat_rep(n)
            return time.perf_counter() - t

        lat_iters = _calibrate(lat_timed, seconds)
        lat_rep(lat_iters)  # warm-up
        eng_l, ucx_l, pairs = [], [], []
        for _ in range(reps):
            eng_l.append(lat_rep(lat_iters))
            if not quick or not ucx_l:
                r = perftest("ucp_put_lat", LAT_SIZE, 2000 if quick else 100_000, 100 if quick else 1000)
                if r is not None:
                    ucx_l.append(r["lat_p50_us"])
                    pairs.append(eng_l[-1] / ucx_l[-1])
        e, u = rp.summarize(eng_l), (rp.summarize(ucx_l) if ucx_l else None)
        result["latency"] = {
            "size": LAT_SIZE, "iters": lat_iters, "engine_us": e, "ucx_perftest_us": u, "ratio": rp.ratio(e, u),
            "ratio_paired": rp.summarize(pairs) if pairs else None,
            "engine_metric": "transfer_sync of 8 B (put + remote completion), median per call",
            "ucx_perftest_metric": "ucp_put_lat 50th percentile: half a put ping-pong, both sides polling",
        }

        # ---- diagnostics: where the engine's time goes
        desc0 = np.array([[laddr, raddr, 0]], dtype=np.uint64)

        def zero_timed(n):
            t = time.perf_counter()
            for _ in range(n):
                ts(remote, W, desc0)
            return time.perf_counter() - t

        n0 = _calibrate(zero_timed, seconds / 2)
        zero_timed(n0)
        call_us = rp.summarize(zero_timed(n0) / n0 * 1e6 for _ in range(reps))
        post1, flush = eng.post1, eng.flush
        pipelined = []
        for row in bw_rows:
            size, iters = row["size"], row["iters"]

            def pf_timed(n, size=size):
                t = time.perf_counter()
                for _ in range(n):
                    post1(remote, W, laddr, raddr, size)
                flush(remote)
                return time.perf_counter() - t

            pf_timed(iters)
            s = rp.summarize(size * iters / pf_timed(iters) / 1e9 for _ in range(reps))
            pipelined.append({"size": size, "iters": iters, "gbps": s})
        result["diagnostics"] = {
            "call_overhead_us": call_us,
            "call_overhead_metric": "transfer_sync of one zero-length block: binding + peer lookup, no UCX op",
            "post1_flush_gbps": pipelined,
            "post1_flush_metric": "post1 x iters, then one flush (no per-call completion)",
        }

        # ---- the bytes really arrived
        want = zlib.crc32(src[:max_size])
        got = int(target.command(f"crc 0 {max_size}"))
        result["verified"] = got == want
        result["engine_stats"] = eng.stats()
    finally:
        if eng is not None:
            eng.finalize()
        target.stop()
    result["elapsed_s"] = time.monotonic() - t_start
    result["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    result["ok"] = bool(result.get("verified"))
    if not result["ok"]:
        print("error: the target's buffer does not hold the bytes written", file=sys.stderr)
    return result


# --------------------------------------------------------------------------- output

def report(result: dict, file=None) -> None:
    m = result["machine"]
    cfg = result["config"]
    headers = ["metric", "size", "engine med", "engine min", "engine max", "ucx_perftest med [min-max]",
               "engine/ucx", "paired"]

    def paired(r):
        return rp.fmt_num((r.get("ratio_paired") or {}).get("median"))

    rows = []
    for r in result["bandwidth"]:
        e = r["engine_gbps"]
        rows.append(["WRITE GB/s", rp.fmt_size(r["size"]), rp.fmt_num(e["median"]), rp.fmt_num(e["min"]),
                     rp.fmt_num(e["max"]), rp.fmt_stat(r["ucx_perftest_gbps"]), rp.fmt_num(r["ratio"]),
                     paired(r)])
    lat = result["latency"]
    e = lat["engine_us"]
    rows.append(["WRITE lat us", rp.fmt_size(lat["size"]), rp.fmt_num(e["median"]), rp.fmt_num(e["min"]),
                 rp.fmt_num(e["max"]), rp.fmt_stat(lat["ucx_perftest_us"]), rp.fmt_num(lat["ratio"]),
                 paired(lat)])
    perf = result["ucx_perftest"]
    notes = [
        f"{m['cpu_model']}, {m['nproc']} CPUs, UCX {m['ucx_version']} ({m['ucx_origin']}), "
        f"target memory: {cfg['target_mem']}, UCX_TLS={m['ucx_env'].get('UCX_TLS', '(UCX default)')}",
        f"median of {cfg['reps']} repetitions of ~{cfg['seconds_per_rep']} s after one warm-up; GB/s = 1e9 B/s; "
        "engine/ucx = ratio of the medians; paired = median of the per-repetition ratios (each ucx_perftest "
        "run follows the engine's repetition)",
        "latency: engine = " + lat["engine_metric"] + "; ucx_perftest = " + lat["ucx_perftest_metric"],
    ]
    if perf.get("available"):
        notes.append("ucx_perftest: -t ucp_put_bw -o (responder not progressed), buffers from ucp_mem_map ALLOCATE: "
                     + (f"UCX_ALLOC_PRIO={cfg['perftest_alloc']}" if cfg.get("perftest_alloc")
                        else "UCX default (sysv shared memory, 4 KiB pages); the engine's numpy buffers "
                             "are anonymous memory (THP from 4 MiB)"))
    load, end = m.get("loadavg"), result.get("loadavg_end")
    if load and end and m.get("nproc") and (load[0] > 0.5 * m["nproc"] or end[0] > m["nproc"]):
        # (the benchmark itself keeps about one CPU busy)
        notes.append(f"warning: the machine was busy (1-min load average {load[0]:.1f} at start, "
                     f"{end[0]:.1f} at end, {m['nproc']} CPUs): expect noisy numbers")
    if cfg.get("quick"):
        notes.append("--quick: smoke-test iteration counts, ucx_perftest run once per size; not a measurement")
    if perf.get("error"):
        notes.append("ucx_perftest: " + perf["error"].splitlines()[0])
    if not result.get("verified", False):
        notes.append("DATA CHECK FAILED: the target's buffer does not hold the bytes written")
    rp.print_table("hixl_rma engine vs ucx_perftest (2 processes, same node)", headers, rows, notes, file=file)

    d = result.get("diagnostics")
    if d:
        rows = [["call overhead us", "0 B", rp.fmt_stat(d["call_overhead_us"])]]
        for r in d["post1_flush_gbps"]:
            rows.append(["post1 x N + flush GB/s", rp.fmt_size(r["size"]), rp.fmt_stat(r["gbps"])])
        rp.print_table("engine diagnostics", ["metric", "size", "median [min-max]"], rows,
                       [d["call_overhead_metric"], d["post1_flush_metric"]], file=file)
