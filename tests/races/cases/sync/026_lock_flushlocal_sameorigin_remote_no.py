"""RMARaceBench MPIRMA/sync/026-MPI-sync-lock-flushlocal-sameorigin-remote-no, in Python.

Two Gets into one buffer with Flush_local between.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

comm.Barrier()
if rank == 0:
    win.Lock(1, MPI.LOCK_SHARED)
    win.Get(value, 1, 0)
    win.Flush_local(1)
    win.Get(value, 1, 0)
    win.Unlock(1)
comm.Barrier()
done(win)
