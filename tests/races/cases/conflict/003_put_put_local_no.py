"""RMARaceBench MPIRMA/conflict/003-MPI-conflict-put-put-local-no, in Python.

Two Puts from one origin buffer (both read it).
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
    win.Put(value, 1, 1)
win.Fence()
done(win)
