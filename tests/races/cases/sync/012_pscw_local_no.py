"""RMARaceBench MPIRMA/sync/012-MPI-sync-pscw-local-no, in Python.

A store into a Put's origin after Complete.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

group = comm.Get_group()
if rank == 0:
    peer = group.Incl([1])
    win.Start(peer)
    win.Put(value, 1, 0)
    pass
    win.Complete()
    value[0] = 3
if rank == 1:
    peer = group.Incl([0])
    win.Post(peer)
    win.Wait()
done(win)
