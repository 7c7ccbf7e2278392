"""RMARaceBench MPIRMA/sync/002-MPI-sync-fence-local-no, in Python.

A store into a Put's origin after the Fence that completes it.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Fence()
if rank == 0:
    win.Put(value, 1, 0)
win.Fence()
if rank == 0:
    value[0] = 3
done(win)
