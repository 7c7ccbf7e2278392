"""RMARaceBench MPIRMA/sync/032-MPI-sync-lock-sendrecv-3procs-remote-no, in Python.

Unlock, Send to rank 2, rank 2 Sends to rank 1, which loads (transitive order).
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2 = ints(1), ints(2)

token = ints(42)
comm.Barrier()
if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)
    win.Unlock(1)
    comm.Send(token, 2, 0)
if rank == 1:
    comm.Recv(token, 2, 0)
    print('mem[0] is', mem[0])
    pass
if rank == 2:
    comm.Recv(token, 0, 0)
    comm.Send(token, 1, 0)
comm.Barrier()
done(win)
