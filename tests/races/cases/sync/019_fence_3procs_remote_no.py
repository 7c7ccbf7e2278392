"""RMARaceBench MPIRMA/sync/019-MPI-sync-fence-3procs-remote-no, in Python.

Rank 0 Puts, a Fence, then rank 2 Gets.
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Fence()
if rank == 0:
    win.Put(value, 1, 0)
win.Fence()
if rank == 2:
    win.Get(value2, 1, 0)
win.Fence()
done(win)
