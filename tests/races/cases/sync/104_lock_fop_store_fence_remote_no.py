"""hixl_rma's own case (not RMARaceBench): the owner's store, a Fence, then Fetch_and_ops under locks.

The Fence that ends the store's epoch orders it before every rank's
Fetch_and_op (each under an exclusive lock).
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
win.Fence()
if rank == 0:
    mem[0] = 7
win.Fence(MPI.MODE_NOSUCCEED)
one, got = ints(1), ints(0)
win.Lock(0, MPI.LOCK_EXCLUSIVE)
win.Fetch_and_op(one, got, 0, 0, MPI.SUM)
win.Unlock(0)
done(win)
