"""Workload ``queue``: every rank contends for one exclusive lock with a
request-based atomic inside, as distributed queues and task counters on
``MPI.Win`` do; ``hixl_rma.Win`` against mpi4py's ``MPI.Win`` in one run.

Run it under MPI with any number of ranks::

    mpiexec -n 3 python -m hixl_rma.bench queue [--ops N] [--packet B] [--flavor create|allocate]

Rank 0 holds a queue: two int64 counters (pushed, popped) in one window and
``--slots`` packets of ``--packet`` bytes in another (``disp_unit`` = the
packet size); the other ranks expose nothing (``Win.Create(None)``). Every
rank, at once, repeats: ``Lock(0, LOCK_EXCLUSIVE)``; ``Rget_accumulate``
SUM 1 on the push counter (a push, every other operation) or NO_OP on it
(a peek); ``wait()``; under the data window's lock, ``Put`` of its packet at
the slot the counter gave, or ``Get`` of the newest packet; ``Unlock(0)``. The figure is the
wall time of ``--ops`` operations per rank (median of ``--reps`` runs,
hixl's and MPI's interleaved) and the ratio hixl / MPI (below 1 favours
hixl). Every packet is checked afterwards: each slot holds the packet its
pusher wrote there.
"""
from __future__ import annotations

import time

NAME = "queue"
HELP = "lock contention with request-based atomics inside (mpiexec -n 2 or more)"


def add_arguments(p) -> None:
    p.add_argument("--ops", type=int, default=None, help="operations per rank and repetition (default 400)")
    p.add_argument("--packet", type=int, default=64, help="bytes of one packet (default 64)")
    p.add_argument("--flavor", default="create", choices=("create", "allocate"),
                   help="how rank 0 makes its windows (default: create, on numpy memory)")
    p.add_argument("--compare", default="mpi", help="'mpi' (default) or '' for hixl_rma alone")


def _impl_run(MPI_like, Win, comm, ops, packet, flavor, wait):
    """One repetition on one implementation: (seconds, ok)."""
    import numpy as np
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    slots = ops * size
    sum_op, noop, excl = MPI_like.SUM, MPI_like.NO_OP, MPI_like.LOCK_EXCLUSIVE
    if flavor == "create":
        counters = np.zeros(2, np.int64) if rank == 0 else None
        data = np.zeros(slots * packet, np.uint8) if rank == 0 else None
        cwin = Win.Create(counters, 8, comm=comm)
        dwin = Win.Create(data, packet, comm=comm)
    else:
        cwin = Win.Allocate(16 if rank == 0 else 0, 8, comm=comm)
        dwin = Win.Allocate(slots * packet if rank == 0 else 0, packet, comm=comm)
        if rank == 0:
            np.frombuffer(cwin.tomemory(), np.int64)[:] = 0
    mine = np.full(packet, rank + 1, np.uint8)
    got = np.zeros(packet, np.uint8)
    one = np.ones(1, np.int64)
    res = np.zeros(1, np.int64)
    nothing = np.zeros(1, np.int64)
    wait()
    t0 = time.perf_counter()
    for i in range(ops):
        cwin.Lock(0, excl)
        if i % 2 == 0:
            cwin.Rget_accumulate(one, res, 0, (0, 1, MPI.INT64_T), sum_op).wait()
            dwin.Lock(0, excl)
            dwin.Put(mine, 0, int(res[0]))
            dwin.Unlock(0)
        else:
            cwin.Rget_accumulate(nothing, res, 0, (0, 1, MPI.INT64_T), noop).wait()
            if res[0] > 0:
                dwin.Lock(0, excl)
                dwin.Get(got, 0, int(res[0]) - 1)
                dwin.Unlock(0)
        cwin.Unlock(0)
    elapsed = time.perf_counter() - t0
    wait()
    ok = True
    if rank == 0:
        if flavor == "create":
            pushed = int(counters[0])
            mem = data
        else:
            pushed = int(np.frombuffer(cwin.tomemory(), np.int64)[0])
            mem = np.frombuffer(dwin.tomemory(), np.uint8)
        rows = mem[:pushed * packet].reshape(pushed, packet) if pushed else np.zeros((0, packet), np.uint8)
        # every slot filled by one pusher, whole, and as many pushes as made
        ok = pushed == size * ((ops + 1) // 2) and bool(((rows == rows[:, :1]) & (rows[:, :1] > 0)).all())
    ok = comm.allreduce(ok, op=MPI.LAND)
    dwin.Free()
    cwin.Free()
    return comm.allreduce(elapsed, op=MPI.MAX), ok


def run(args) -> dict:

    from mpi4py import MPI

    import hixl_rma
    from hixl_rma.bench import report as rp

    comm = MPI.COMM_WORLD
    hixl_rma.Init()
    ops = args.ops or (20 if args.quick else 400)
    reps = args.reps or (1 if args.quick else 5)
    timeout = hixl_rma.runtime.runtime().timeout_ms

    def hixl_wait():
        hixl_rma.runtime.barrier(comm, timeout)

    impls = [("hixl", hixl_rma, hixl_rma.Win, hixl_wait)]
    if "mpi" in args.compare:
        impls.append(("mpi", MPI, MPI.Win, comm.Barrier))
    samples = {k: [] for k, *_ in impls}
    ok = True
    for _ in range(reps + 1):  # the first round warms up (connections, first faults)
        for key, lib, Win, wait in impls:
            el, good = _impl_run(lib, Win, comm, ops, args.packet, args.flavor, wait)
            samples[key].append(el)
            ok &= good
    hixl_rma.Finalize()
    if comm.Get_rank() != 0:
        return {"ok": ok, "quiet": True}
    results = {k: rp.summarize(v[1:]) for k, v in samples.items()}
    return {"workload": NAME, "ok": ok, "ranks": comm.Get_size(), "ops": ops, "packet": args.packet,
            "flavor": args.flavor, "reps": reps, "results": results,
            "mpi": MPI.Get_library_version().splitlines()[0]}


def report(result) -> None:
    res = result["results"]
    h = res["hixl"]["median"]
    print(f"queue: {result['ranks']} ranks x {result['ops']} operations, {result['packet']} B packets, "
          f"{result['flavor']} windows, median of {result['reps']} (verified: {result['ok']})")
    for key, r in res.items():
        print(f"  {key:5s} {r['median'] * 1e3:9.1f} ms  (min {r['min'] * 1e3:.1f}, max {r['max'] * 1e3:.1f})"
              f"  {r['median'] / result['ops'] * 1e6:8.1f} us/op")
    if "mpi" in res:
        print(f"  hixl / MPI: {h / res['mpi']['median']:.2f}  ({result['mpi']})")
