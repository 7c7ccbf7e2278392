"""RMARaceBench MPIRMA/sync/006-MPI-sync-lock-flush-local-no, in Python.

A store into a Put's origin after the Flush.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

if rank == 0:
    win.Lock(1, MPI.LOCK_SHARED)
    win.Put(value, 1, 0)
    win.Flush(1)
    value[0] = 3
    win.Unlock(1)
done(win)
