"""RMARaceBench MPIRMA/conflict/019-MPI-conflict-get-put-remote-yes, in Python.

Get by rank 0 and put by rank 2 of rank 1's element 0 in one fence epoch.
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
    win.Put(value2, 1, 0)  # CONFLICT
win.Fence()
done(win)
