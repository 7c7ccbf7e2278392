"""RMARaceBench MPIRMA/conflict/034-MPI-conflict-gacc-store-remote-yes, in Python.

Gacc by rank 0 and store at rank 1 of rank 1's element 0 in one fence epoch.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Get_accumulate(value, result, 1, 0, MPI.SUM)  # CONFLICT
if rank == 1:
    mem[0] = 5  # CONFLICT
win.Fence()
done(win)
