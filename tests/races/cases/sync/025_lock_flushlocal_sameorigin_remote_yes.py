"""RMARaceBench MPIRMA/sync/025-MPI-sync-lock-flushlocal-sameorigin-remote-yes, in Python.

Flush_local between a Put and a Get of the same element completes the Put only locally.
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
    win.Flush_local(1)
    win.Get(value, 1, 0)  # CONFLICT
    win.Unlock(1)
comm.Barrier()
done(win)
