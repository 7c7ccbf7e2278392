"""RMARaceBench MPIRMA/sync/010-MPI-sync-request-local-no, in Python.

A load of an Rget's result after its Wait.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

win.Lock_all()
if rank == 0:
    req = win.Rget(value, 1, 0)
    req.Wait()
    print('value is', value[0])
win.Unlock_all()
done(win)
