"""RMARaceBench MPIRMA/conflict/011-MPI-conflict-gacc-load-local-yes, in Python.

A load of Get_accumulate's result before the Fence.
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
    print('result is', result[0])  # CONFLICT
win.Fence()
done(win)
