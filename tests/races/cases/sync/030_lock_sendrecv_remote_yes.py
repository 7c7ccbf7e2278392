"""RMARaceBench MPIRMA/sync/030-MPI-sync-lock-sendrecv-remote-yes, in Python.

The target loads before the Recv that follows the Unlock.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

token = ints(42)
comm.Barrier()
if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)  # CONFLICT
    win.Unlock(1)
    comm.Send(token, 1, 0)
if rank == 1:
    print('mem[0] is', mem[0])  # CONFLICT
    comm.Recv(token, 0, 0)
    pass
comm.Barrier()
done(win)
