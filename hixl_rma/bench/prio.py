"""Workload ``prio``: transfer priorities under load, two ranks::

    mpiexec -n 2 python -m hixl_rma.bench prio [--bulk-mib 1024] [--chunk-mib 256] [--window Allocate|Create]

Rank 0 sends rank 1 a 64 KiB ``Put_batch`` with a notification on a
latency window and waits for rank 1's answer (a ``Notify`` back): the round
trip is the latency. Meanwhile a thread of rank 0 streams ``--bulk-mib`` to
rank 1 on a bulk window (``Put_batch`` of ``--chunk-mib`` blocks, all
posted before the first ping, then one ``Flush`` in a thread; pings go on
until that flush returns). Each repetition runs, interleaved:

* ``solo``: the bulk stream alone (its throughput);
* ``idle``: the pings alone (the idle latency);
* ``normal``: both, both windows at ``priority=normal``;
* ``prio``: both, the latency window ``high`` and the bulk window ``bulk``.

Reported: the median round trip of each repetition (median and range over
repetitions), its ratio to the idle one, and the bulk throughput with and
without the pings. Every byte of the bulk windows is checked at the end.
"""
from __future__ import annotations

import threading
import time

NAME = "prio"
HELP = "latency of high-priority batches beside a bulk stream (mpiexec -n 2)"

PING = 64 << 10
STOP = 1 << 30  # the tag that ends rank 1's answering loop
IDLE_PINGS = 100


def add_arguments(p) -> None:
    p.add_argument("--bulk-mib", type=int, default=None, help="MiB streamed per run (default 1024; --quick 64)")
    p.add_argument("--chunk-mib", type=int, default=None,
                   help="MiB of one bulk Put_batch, also the bulk window's size (default 256; --quick 32)")
    p.add_argument("--gap-us", type=int, default=0,
                   help="rank 0 sleeps this long between two pings (default 0: back to back, a saturating "
                        "load of both cores on a 2-core machine)")
    p.add_argument("--window", default="Allocate", choices=("Allocate", "Create"),
                   help="how the windows are made (Allocate: same-node mapped memory, the copy thread; "
                        "Create: numpy memory, the engine's cma or UCX)")


def _make(Win, np, comm, size, priority, flavor):
    info = {"priority": priority}
    if flavor == "Allocate":
        win = Win.Allocate(size, disp_unit=1, info=info, comm=comm)
        mem = np.frombuffer(win.tomemory(), np.uint8) if size else None
    else:
        mem = np.zeros(size, np.uint8)
        win = Win.Create(mem, disp_unit=1, info=info, comm=comm)
    if mem is not None:
        mem[:] = 0
    return win, mem


def _pings(lat, np, rank, until, gap_s=0.0):
    """Rank 0: ping until ``until()`` (at least one); rank 1: answer until STOP. Round trips in s."""
    out = []
    if rank == 0:
        buf = np.ones(PING, np.uint8)
        offs = np.array([[0, PING]], np.int64)
        zero = np.zeros(1, np.int64)
        i = 0
        while True:
            t0 = time.perf_counter()
            lat.Put_batch((buf, offs), 1, zero, tag=i % STOP)
            lat.Wait_notify(tag=i % STOP, source=1, timeout=120)
            out.append(time.perf_counter() - t0)
            i += 1
            if until(i):
                break
            if gap_s:
                time.sleep(gap_s)
        lat.Notify(1, tag=STOP)
    else:
        while True:
            _, tag = lat.Wait_notify(source=0, timeout=120)
            if tag == STOP:
                break
            lat.Notify(0, tag=tag)
    return out


def _bulk_post(win, np, total, chunk):
    """Rank 0's stream, posted: every chunk queued at once (all of it ahead of the first ping)."""
    src = np.full(chunk, 7, np.uint8)
    offs = np.array([[0, chunk]], np.int64)
    zero = np.zeros(1, np.int64)
    t0 = time.perf_counter()
    for _ in range(total // chunk):
        win.Put_batch((src, offs), 1, zero)
    return t0, src


def _bulk_flush(win, t0, done):
    """The stream's flush, in a thread beside the pings; done[0]: the stream's seconds."""
    win.Flush(1)
    done[0] = time.perf_counter() - t0


def run(args) -> dict:
    import numpy as np
    from mpi4py import MPI

    import hixl_rma
    from hixl_rma import Win
    from hixl_rma.bench import report as rp

    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        raise SystemExit("prio: run it with mpiexec -n 2")
    hixl_rma.Init()
    rank = comm.Get_rank()
    total = (args.bulk_mib or (64 if args.quick else 1024)) << 20
    chunk = min((args.chunk_mib or (32 if args.quick else 256)) << 20, total)
    reps = args.reps or (1 if args.quick else 5)
    size = chunk if rank == 1 else 0
    gap = args.gap_us / 1e6
    timeout = hixl_rma.runtime.runtime().timeout_ms

    def wait():
        hixl_rma.runtime.barrier(comm, timeout)
    wins = {
        "normal": (_make(Win, np, comm, PING if rank == 1 else 0, "normal", args.window)[0],
                   _make(Win, np, comm, size, "normal", args.window)),
        "prio": (_make(Win, np, comm, PING if rank == 1 else 0, "high", args.window)[0],
                 _make(Win, np, comm, size, "bulk", args.window)),
    }
    for lat, (bulk, _) in wins.values():
        lat.Lock_all(hixl_rma.MODE_NOCHECK)
        bulk.Lock_all(hixl_rma.MODE_NOCHECK)
    samples = {k: [] for k in ("idle", "normal", "prio")}
    tput = {k: [] for k in ("solo", "normal", "prio")}
    counts = {k: [] for k in ("normal", "prio")}
    ok = True
    for rep in range(reps + 1):  # the first round warms up (connections, first faults)
        for mode in ("solo", "idle", "normal", "prio"):
            lat, (bulk, _) = wins["prio" if mode in ("solo", "prio") else "normal"]
            wait()  # sleeping, not MPI's polling barrier: in solo, rank 1 must leave the cores to the stream
            if mode == "idle":
                rtt = _pings(lat, np, rank, lambda i: i >= IDLE_PINGS, gap)
            elif rank == 1:
                rtt = [] if mode == "solo" else _pings(lat, np, rank, None)
            else:
                done = [None]
                t0, _src = _bulk_post(bulk, np, total, chunk)
                t = threading.Thread(target=_bulk_flush, args=(bulk, t0, done))
                t.start()
                rtt = [] if mode == "solo" else _pings(lat, np, rank, lambda i, done=done: done[0] is not None, gap)
                t.join()
                if rep:
                    tput[mode].append(total / done[0] / 1e9)
            if rank == 0 and rep and rtt:
                samples[mode].append(float(np.median(rtt)))
                if mode in counts:
                    counts[mode].append(len(rtt))
    wait()
    for _, (_bulk, mem) in wins.values():
        if rank == 1:
            ok &= bool(np.all(mem == 7))
    ok = comm.allreduce(ok, op=MPI.LAND)
    for lat, (bulk, _) in wins.values():
        lat.Unlock_all()
        bulk.Unlock_all()
        lat.Free()
        bulk.Free()
    hixl_rma.Finalize()
    if rank != 0:
        return {"ok": ok, "quiet": True}
    lat_s = {k: rp.summarize(v) for k, v in samples.items()}
    tp_s = {k: rp.summarize(v) for k, v in tput.items()}
    return {"workload": NAME, "ok": ok, "bulk_bytes": total, "chunk_bytes": chunk, "window": args.window,
            "gap_us": args.gap_us, "reps": reps, "latency_s": lat_s, "bulk_gbs": tp_s,
            "pings_under_load": {k: rp.summarize(v) for k, v in counts.items()},
            "machine": rp.machine_info()}


def report(result) -> None:
    from hixl_rma.bench import report as rp

    lat, tp = result["latency_s"], result["bulk_gbs"]
    idle = lat["idle"]["median"]
    rows = []
    for mode, what in (("idle", "idle (no bulk)"), ("normal", "bulk beside, both normal"),
                       ("prio", "bulk beside, high + bulk")):
        s = lat[mode]
        us = {k: (v * 1e6 if v is not None else None) for k, v in s.items() if k in ("median", "min", "max")}
        rows.append([what, rp.fmt_stat(us, 0), rp.fmt_num(rp.ratio(s, lat["idle"]) if idle else None),
                     rp.fmt_stat(tp.get("solo" if mode == "idle" else mode), 2)])
    rp.print_table(
        f"prio: 64 KiB Put_batch + notify round trip beside a {rp.fmt_size(result['bulk_bytes'])} bulk stream "
        f"({rp.fmt_size(result['chunk_bytes'])} batches, {result['window']} windows, {result['gap_us']} us between "
        f"pings), median of "
        f"{result['reps']} (verified: {result['ok']})",
        ["case", "round trip us", "x idle", "bulk GB/s"], rows,
        notes=["bulk GB/s of the idle row: the stream alone (solo)",
               f"bulk within 10 % of solo: prio {rp.fmt_num(rp.ratio(tp['prio'], tp['solo']))}, "
               f"normal {rp.fmt_num(rp.ratio(tp['normal'], tp['solo']))}"])
