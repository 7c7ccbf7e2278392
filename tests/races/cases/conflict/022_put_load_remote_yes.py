"""RMARaceBench MPIRMA/conflict/022-MPI-conflict-put-load-remote-yes, in Python.

Put by rank 0 and load at rank 1 of rank 1's element 0 in one fence epoch.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Put(value2, 1, 0)  # CONFLICT
if rank == 1:
    print('mem[0] is', mem[0])  # CONFLICT
win.Fence()
done(win)
