"""RMARaceBench MPIRMA/conflict/039-MPI-conflict-cas-cas-remote-no, in Python.

Cas by rank 0 and cas by rank 2 of rank 1's element 0 in one fence epoch.
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Compare_and_swap(value, compare, result, 1, 0)
if rank == 2:
    win.Compare_and_swap(value2, compare, result, 1, 0)
win.Fence()
done(win)
