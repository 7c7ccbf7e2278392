"""The race detector's cost in a loop of the program's own, which its line
watch watches (the benchmark's loops are hixl_rma's code, which it does not).

    mpiexec -n 2 python tools/measure/race_loop.py [--n N] [--reps R]
    HIXL_RMA_CHECK=races mpiexec -n 2 python tools/measure/race_loop.py

Rank 0 times loops of 8 B and 4 KiB Put + Flush and of Fetch_and_op +
Flush on an Allocate window at rank 1, inside one Lock; it prints each
loop's median over the repetitions, in ns per iteration.
"""
import argparse
import time

import numpy as np
from mpi4py import MPI

import hixl_rma


def put_loop(win, origin, n):
    t = time.perf_counter_ns()
    for _ in range(n):
        win.Put(origin, 1, 0)
        win.Flush(1)
    return (time.perf_counter_ns() - t) / n


def fetch_loop(win, one, result, n):
    t = time.perf_counter_ns()
    for _ in range(n):
        win.Fetch_and_op(one, result, 1, 0, MPI.SUM)
        win.Flush(1)
    return (time.perf_counter_ns() - t) / n


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="iterations per repetition")
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    win = hixl_rma.Win.Allocate(1 << 16, 8, comm=comm)
    small, page = np.ones(1, np.int64), np.ones(512, np.int64)
    one, result = np.ones(1, np.int64), np.zeros(1, np.int64)
    loops = {"8 B Put + Flush": lambda n: put_loop(win, small, n),
             "4 KiB Put + Flush": lambda n: put_loop(win, page, n),
             "Fetch_and_op + Flush": lambda n: fetch_loop(win, one, result, n)}
    if comm.rank == 0:
        win.Lock(1, hixl_rma.LOCK_EXCLUSIVE)
        for name, loop in loops.items():
            loop(1000)  # warm-up
            ns = sorted(loop(args.n) for _ in range(args.reps))
            print(f"{name:22s} {ns[len(ns) // 2]:8.0f} ns per iteration (min {ns[0]:.0f})", flush=True)
        win.Unlock(1)
    comm.Barrier()
    win.Free()


if __name__ == "__main__":
    main()
