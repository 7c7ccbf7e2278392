"""RMARaceBench MPIRMA/conflict/029-MPI-conflict-acc-acc-remote-no, in Python.

Acc by rank 0 and acc by rank 2 of rank 1's element 0 in one fence epoch.
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Accumulate(value, 1, 0, MPI.SUM)
if rank == 2:
    win.Accumulate(value2, 1, 0, MPI.SUM)
win.Fence()
done(win)
