"""RMARaceBench MPIRMA/sync/015-MPI-sync-lockall-barrier-remote-no, in Python.

Put inside Lock_all, Unlock_all, Barrier, then the target loads.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

comm.Barrier()
win.Lock_all()
if rank == 0:
    win.Put(value, 1, 0)
win.Unlock_all()
comm.Barrier()
if rank == 1:
    print('mem[0] is', mem[0])
done(win)
