"""RMARaceBench MPIRMA/sync/027-MPI-sync-lock-exclusive-remote-no, in Python.

A Put and the target's load, each under an exclusive lock.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

comm.Barrier()
if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)
    win.Unlock(1)
if rank == 1:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    print('mem[0] is', mem[0])
    win.Unlock(1)
comm.Barrier()
done(win)
