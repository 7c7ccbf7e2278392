"""RMARaceBench MPIRMA/conflict/005-MPI-conflict-get-store-local-yes, in Python.

A store into a Get's result buffer before the Fence.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Get(value, 1, 0)  # CONFLICT
    value[0] = 2  # CONFLICT
win.Fence()
done(win)
