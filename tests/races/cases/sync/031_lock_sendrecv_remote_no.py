"""RMARaceBench MPIRMA/sync/031-MPI-sync-lock-sendrecv-remote-no, in Python.

The target loads after the Recv that follows the Unlock.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

token = ints(42)
comm.Barrier()
if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)
    win.Unlock(1)
    comm.Send(token, 1, 0)
if rank == 1:
    pass
    comm.Recv(token, 0, 0)
    print('mem[0] is', mem[0])
comm.Barrier()
done(win)
