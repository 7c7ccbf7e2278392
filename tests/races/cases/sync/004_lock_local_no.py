"""RMARaceBench MPIRMA/sync/004-MPI-sync-lock-local-no, in Python.

A store into a Put's origin after Unlock.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)
    win.Unlock(1)
    value[0] = 3
done(win)
