"""hixl_rma's own case (not RMARaceBench): mpi4py's demo nxtval-mpi3.py, fixed.

The counter's owner stores its initial 0, then a Barrier, then every rank
Get_accumulates it under exclusive locks.
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win = MPI.Win.Allocate(4 if rank == 0 else 0, 4, comm=comm)
if rank == 0:
    mem = np.frombuffer(win.tomemory(), np.int32)
    mem[0] = 0
comm.Barrier()
one, got = ints(1), ints(0)
for _ in range(3):
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    win.Get_accumulate(one, got, 0, 0, MPI.SUM)
    win.Unlock(0)
done(win)
