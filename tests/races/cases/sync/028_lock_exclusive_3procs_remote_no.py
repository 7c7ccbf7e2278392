"""RMARaceBench MPIRMA/sync/028-MPI-sync-lock-exclusive-3procs-remote-no, in Python.

A Put by rank 0 and a Get by rank 2, each under an exclusive lock of rank 1.
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2 = ints(1), ints(2)

comm.Barrier()
if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)
    win.Unlock(1)
if rank == 2:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Get(value2, 1, 0)
    win.Unlock(1)
comm.Barrier()
done(win)
