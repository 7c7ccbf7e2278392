"""hixl_rma's own case (not RMARaceBench): mpi4py's demo nxtval-mpi3.py.

The counter's owner stores its initial 0 right after window creation while
the other ranks already Get_accumulate it under exclusive locks: nothing
orders the store with them (whichever lock holder came first is chance).
The others wait a moment, so that the owner's own lock epoch, after its
store, comes first: the order in which the detector once missed it.
"""
# race: yes
# nprocs: 3
import time

from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win = MPI.Win.Allocate(4 if rank == 0 else 0, 4, comm=comm)
if rank == 0:
    mem = np.frombuffer(win.tomemory(), np.int32)
    mem[0] = 0  # CONFLICT
else:
    time.sleep(0.3)
one, got = ints(1), ints(0)
for _ in range(3):
    win.Lock(0, MPI.LOCK_EXCLUSIVE)
    win.Get_accumulate(one, got, 0, 0, MPI.SUM)  # CONFLICT
    win.Unlock(0)
done(win)
