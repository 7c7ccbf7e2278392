"""RMARaceBench MPIRMA/sync/024-MPI-sync-lock-barrier-sameorigin-remote-yes, in Python.

Put then Get of the same element with no Flush between.
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
    win.Get(value2, 1, 0)  # CONFLICT
    win.Unlock(1)
comm.Barrier()
if rank == 1:
    print('mem[0] is', mem[0])
done(win)
