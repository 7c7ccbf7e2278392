"""RMARaceBench MPIRMA/sync/020-MPI-sync-lock-barrier-nonconsistent-remote-yes, in Python.

A Barrier before the Unlock: the Put is not complete when the target loads.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

comm.Barrier()
if rank == 0:
    win.Lock(1, MPI.LOCK_SHARED)
    win.Put(value, 1, 0)  # CONFLICT
comm.Barrier()
if rank == 1:
    print('mem[0] is', mem[0])  # CONFLICT
if rank == 0:
    win.Unlock(1)
done(win)
