"""RMARaceBench MPIRMA/sync/001-MPI-sync-fence-local-yes, in Python.

A store into a Put's origin inside the fence epoch.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Fence()
if rank == 0:
    win.Put(value, 1, 0)  # CONFLICT
    value[0] = 3  # CONFLICT
win.Fence()
done(win)
