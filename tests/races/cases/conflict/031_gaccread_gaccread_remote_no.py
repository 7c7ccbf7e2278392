"""RMARaceBench MPIRMA/conflict/031-MPI-conflict-gaccread-gaccread-remote-no, in Python.

Gaccread by rank 0 and gaccread by rank 2 of rank 1's element 0 in one fence epoch.
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Get_accumulate(value, result, 1, 0, MPI.NO_OP)
if rank == 2:
    win.Get_accumulate(value2, result, 1, 0, MPI.NO_OP)
win.Fence()
done(win)
