"""RMARaceBench MPIRMA/sync/008-MPI-sync-lockall-flushlocalall-local-no, in Python.

A store into a Put's origin after Flush_local_all.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Lock_all()
if rank == 0:
    win.Put(value, 1, 0)
    win.Flush_local_all()
    value[0] = 3
win.Unlock_all()
done(win)
