"""RMARaceBench MPIRMA/sync/018-MPI-sync-fence-3procs-remote-yes, in Python.

Rank 0 Puts and rank 2 Gets rank 1's element in one fence epoch.
"""
# race: yes
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Fence()
if rank == 0:
    win.Put(value, 1, 0)  # CONFLICT
if rank == 2:
    win.Get(value2, 1, 0)  # CONFLICT
win.Fence()
done(win)
