"""RMARaceBench MPIRMA/sync/014-MPI-sync-lockall-flushall-remote-yes, in Python.

Put and Flush_all; the target loads with no synchronization.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Lock_all()
comm.Barrier()
if rank == 0:
    win.Put(value, 1, 0)  # CONFLICT
    win.Flush_all()
if rank == 1:
    print('mem[0] is', mem[0])  # CONFLICT
win.Unlock_all()
done(win)
