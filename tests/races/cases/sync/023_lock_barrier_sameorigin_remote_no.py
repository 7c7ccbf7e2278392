"""RMARaceBench MPIRMA/sync/023-MPI-sync-lock-barrier-sameorigin-remote-no, in Python.

Put, Flush, then Get of the same element by the same origin.
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
    win.Put(value, 1, 0)
    win.Flush(1)
    win.Get(value2, 1, 0)
    win.Unlock(1)
comm.Barrier()
done(win)
