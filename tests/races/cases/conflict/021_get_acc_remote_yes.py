"""RMARaceBench MPIRMA/conflict/021-MPI-conflict-get-acc-remote-yes, in Python.

Get by rank 0 and acc by rank 2 of rank 1's element 0 in one fence epoch.
"""
# race: yes
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Get(value, 1, 0)  # CONFLICT
if rank == 2:
    win.Accumulate(value2, 1, 0, MPI.SUM)  # CONFLICT
win.Fence()
done(win)
