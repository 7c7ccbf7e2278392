"""A halo exchange with a race in it, for hixl_rma's race detector.

Each rank Puts its last cell into its right neighbour's ghost cell inside
a fence epoch, and -- the bug -- reads its own ghost cell before the Fence
that ends the epoch, when the left neighbour's Put may not have landed.
It usually prints the right numbers anyway, which is why such bugs live.

    mpiexec -n 2 python -m hixl_rma --check-races examples/racy_halo.py

reports the race (window, rank, bytes, both lines, why they are unordered)
and exits 3. ``--fixed`` reads the ghost cell after the Fence: no race.
"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right = (rank + 1) % size
fixed = "--fixed" in sys.argv

cells = np.arange(4, dtype=np.float64) + 10 * rank
ghost = np.zeros(1, np.float64)  # the left neighbour writes its last cell here
win = MPI.Win.Create(ghost, disp_unit=8, comm=comm)

win.Fence()
win.Put(cells[-1:], right, 0)
if not fixed:
    left_cell = ghost[0]  # the race: read before the Fence that completes the Put
win.Fence()
if fixed:
    left_cell = ghost[0]

print(f"rank {rank}: left neighbour's last cell is {left_cell}")
win.Free()
