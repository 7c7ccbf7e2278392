"""RMARaceBench MPIRMA/conflict/004-MPI-conflict-get-load-local-yes, in Python.

A load of a Get's result buffer before the Fence.
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
    print('value is', value[0])  # CONFLICT
win.Fence()
done(win)
