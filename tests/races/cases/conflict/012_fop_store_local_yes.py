"""RMARaceBench MPIRMA/conflict/012-MPI-conflict-fop-store-local-yes, in Python.

A store into Fetch_and_op's result before the Fence.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Fetch_and_op(value, result, 1, 0, MPI.SUM)  # CONFLICT
    result[0] = 2  # CONFLICT
win.Fence()
done(win)
