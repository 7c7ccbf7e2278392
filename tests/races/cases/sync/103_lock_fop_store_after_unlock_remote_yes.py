"""hixl_rma's own case (not RMARaceBench): a store after the owner's own lock epoch.

The owner takes and gives back an exclusive lock of its own memory, then
stores into it under no lock, while rank 1 Fetch_and_ops it under an
exclusive lock: whichever lock came first, nothing orders the store with
the Fetch_and_op.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
one, got = ints(1), ints(0)
win.Lock(0, MPI.LOCK_EXCLUSIVE)
if rank == 1:
    win.Fetch_and_op(one, got, 0, 0, MPI.SUM)  # CONFLICT
win.Unlock(0)
if rank == 0:
    mem[0] = 7  # CONFLICT
done(win)
