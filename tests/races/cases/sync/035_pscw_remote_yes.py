"""RMARaceBench MPIRMA/sync/035-MPI-sync-pscw-remote-yes, in Python.

Rank 0's Put and rank 1's Get in one exposure epoch of rank 2.
"""
# race: yes
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2 = ints(1), ints(2)

group = comm.Get_group()
if rank == 0:
    win.Start(group.Incl([2]))
    win.Put(value, 2, 0)  # CONFLICT
    win.Complete()
elif rank == 1:
    win.Start(group.Incl([2]))
    win.Get(value2, 2, 0)  # CONFLICT
    win.Complete()
else:
    win.Post(group.Incl([0, 1]))
    win.Wait()
done(win)
