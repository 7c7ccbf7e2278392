"""RMARaceBench MPIRMA/sync/013-MPI-sync-lockall-flushall-remote-no, in Python.

Put, Flush_all, Barrier; the target loads after the Barrier.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Lock_all()
comm.Barrier()
if rank == 0:
    win.Put(value, 1, 0)
    win.Flush_all()
    comm.Barrier()
if rank == 1:
    comm.Barrier()
    print('mem[0] is', mem[0])
win.Unlock_all()
done(win)
