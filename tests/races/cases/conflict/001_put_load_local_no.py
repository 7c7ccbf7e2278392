"""RMARaceBench MPIRMA/conflict/001-MPI-conflict-put-load-local-no, in Python.

A load of a Put's origin buffer before the Fence (reading is allowed).
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2, result, compare = ints(1), ints(2), ints(0), ints(0)
win.Fence()
if rank == 0:
    win.Put(value, 1, 0)
    print('value is', value[0])
win.Fence()
done(win)
