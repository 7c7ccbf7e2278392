"""RMARaceBench MPIRMA/conflict/008-MPI-conflict-acc-store-local-yes, in Python.

A store into an Accumulate's origin before the Fence.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Accumulate(value, 1, 0, MPI.SUM)  # CONFLICT
    value[0] = 2  # CONFLICT
win.Fence()
done(win)
