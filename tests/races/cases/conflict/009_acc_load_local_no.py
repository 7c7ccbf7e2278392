"""RMARaceBench MPIRMA/conflict/009-MPI-conflict-acc-load-local-no, in Python.

A load of an Accumulate's origin (reading is allowed).
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Accumulate(value, 1, 0, MPI.SUM)
    print('value is', value[0])
win.Fence()
done(win)
