"""RMARaceBench MPIRMA/sync/009-MPI-sync-request-local-yes, in Python.

A load of an Rget's result before its Wait.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Lock_all()
if rank == 0:
    req = win.Rget(value, 1, 0)  # CONFLICT
    print('value is', value[0])  # CONFLICT
    req.Wait()
win.Unlock_all()
done(win)
