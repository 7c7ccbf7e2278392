"""1-D halo exchange with MPI_Put under MPI_Win_fence, ported from mpi4py.

The original uses ``from mpi4py import MPI`` and ``MPI.Win``; this port
differs only in the line marked PORT. Each rank owns N interior cells plus
one ghost cell on each side, puts its edge cells into its neighbours'
ghost cells, and runs a few Jacobi steps; the result is compared with a
serial computation.

Run: mpiexec -n 2 python examples/halo_exchange.py   (any number of ranks)
"""
import sys

import numpy as np
from mpi4py import MPI

import hixl_rma

Win = hixl_rma.Win  # PORT: was MPI.Win

N, STEPS = 1000, 20


def serial(size):
    u = np.arange(size * N, dtype=np.float64) % 17
    for _ in range(STEPS):
        padded = np.concatenate(([u[-1]], u, [u[0]]))
        u = (padded[:-2] + padded[1:-1] + padded[2:]) / 3.0
    return u


def main():
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    left, right = (rank - 1) % size, (rank + 1) % size
    u = np.zeros(N + 2, dtype=np.float64)
    u[1:-1] = np.arange(rank * N, (rank + 1) * N, dtype=np.float64) % 17
    win = Win.Create(u, disp_unit=u.itemsize, comm=comm)
    for _ in range(STEPS):
        win.Fence()
        win.Put(u[1:2], left, N + 1)   # my first cell -> left's right ghost
        win.Put(u[N:N + 1], right, 0)  # my last cell -> right's left ghost
        win.Fence()
        u[1:-1] = (u[:-2] + u[1:-1] + u[2:]) / 3.0
    win.Free()
    full = comm.gather(u[1:-1].copy(), root=0)
    ok = True
    if rank == 0:
        ok = bool(np.allclose(np.concatenate(full), serial(size)))
        print(f"halo exchange on {size} ranks, {STEPS} steps: {'verified' if ok else 'MISMATCH'}")
    ok = comm.bcast(ok, root=0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
