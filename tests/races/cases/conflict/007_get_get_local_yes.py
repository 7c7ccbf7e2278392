"""RMARaceBench MPIRMA/conflict/007-MPI-conflict-get-get-local-yes, in Python.

Two Gets into one buffer in one epoch.
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
    win.Get(value, 1, 1)  # CONFLICT
win.Fence()
done(win)
