#!/usr/bin/env python3
"""A loop of Put + Flush of one size from rank 0 into rank 1's Create window,
with hixl_rma.Win or (--mpi) mpi4py's MPI.Win, each library alone in its
processes: the per-call figure the benchmark's ``--compare mpi`` cannot give
where two libraries sharing a process disturb each other (docs/performance.md,
"Across hosts"). Rank 0 prints the median, p10 and p90.

    mpiexec -n 2 python tools/measure/put_flush_loop.py [--mpi] [--size BYTES] [--iters N]
"""
import argparse
import time

import numpy as np
from mpi4py import MPI


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mpi", action="store_true", help="mpi4py's MPI.Win instead of hixl_rma.Win")
    ap.add_argument("--size", type=int, default=65536, help="bytes per Put (default 65536)")
    ap.add_argument("--iters", type=int, default=2000, help="Put + Flush pairs (default 2000)")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    if comm.size != 2:
        raise SystemExit("run with mpiexec -n 2")
    if a.mpi:
        Win = MPI.Win
    else:
        import hixl_rma
        Win = hixl_rma.Win
    mem = np.zeros(a.size, np.uint8)
    win = Win.Create(mem, comm=comm)
    src = np.full(a.size, 7, np.uint8)
    comm.Barrier()
    if comm.rank == 0:
        ts = np.empty(a.iters)
        win.Lock(1)
        for i in range(a.iters):
            t0 = time.perf_counter()
            win.Put(src, 1, 0)
            win.Flush(1)
            ts[i] = time.perf_counter() - t0
        win.Unlock(1)
        p10, p50, p90 = np.percentile(ts, [10, 50, 90]) * 1e6
        name = "MPI.Win" if a.mpi else "hixl_rma.Win"
        print(f"{name} {a.size} B Put + Flush: median {p50:.1f} us, p10 {p10:.1f}, p90 {p90:.1f} "
              f"({a.size / p50 / 1e3:.2f} GB/s)")
    win.Free()
    if comm.rank == 1 and not (mem == 7).all():
        raise SystemExit("the data did not arrive")


if __name__ == "__main__":
    main()
