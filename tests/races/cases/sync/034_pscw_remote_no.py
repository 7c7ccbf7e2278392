"""RMARaceBench MPIRMA/sync/034-MPI-sync-pscw-remote-no, in Python.

Rank 0 then rank 1 access rank 2 in two exposure epochs, one after the other.
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window()
value, value2 = ints(1), ints(2)

group = comm.Get_group()
if rank == 0:
    win.Start(group.Incl([2]))
    win.Put(value, 2, 0)
    win.Complete()
elif rank == 1:
    win.Start(group.Incl([2]))
    win.Get(value2, 2, 0)
    win.Complete()
else:
    win.Post(group.Incl([0]))
    win.Wait()
    win.Post(group.Incl([1]))
    win.Wait()
done(win)
