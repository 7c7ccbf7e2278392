"""RMARaceBench MPIRMA/conflict/006-MPI-conflict-get-put-local-yes, in Python.

A Put from the buffer a pending Get writes.
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
    win.Put(value, 1, 1)  # CONFLICT
win.Fence()
done(win)
