"""RMARaceBench MPIRMA/sync/007-MPI-sync-lockall-flushlocalall-local-yes, in Python.

A store into a Put's origin before Flush_local_all.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Lock_all()
if rank == 0:
    win.Put(value, 1, 0)  # CONFLICT
    value[0] = 3  # CONFLICT
    win.Flush_local_all()
win.Unlock_all()
done(win)
