"""RMARaceBench MPIRMA/sync/016-MPI-sync-lockall-barrier-remote-yes, in Python.

Put inside Lock_all; the target loads after its own Unlock_all, without a Barrier (shared locks order nothing).
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

comm.Barrier()
win.Lock_all()
if rank == 0:
    win.Put(value, 1, 0)  # CONFLICT
win.Unlock_all()
if rank == 1:
    print('mem[0] is', mem[0])  # CONFLICT
comm.Barrier()
done(win)
