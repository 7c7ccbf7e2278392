"""RMARaceBench MPIRMA/sync/003-MPI-sync-lock-local-yes, in Python.

A store into a Put's origin inside the lock epoch.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)  # CONFLICT
    value[0] = 3  # CONFLICT
    win.Unlock(1)
done(win)
