"""RMARaceBench MPIRMA/sync/036-MPI-sync-polling-remote-yes, in Python.

The target polls its window memory for a flag a Put sets (a warning).
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

import time

comm.Barrier()
if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)  # CONFLICT
    win.Unlock(1)
else:
    while mem[0] != 1:  # CONFLICT
        time.sleep(0.01)
        win.Lock(1, MPI.LOCK_EXCLUSIVE)
        win.Unlock(1)
comm.Barrier()
done(win)
