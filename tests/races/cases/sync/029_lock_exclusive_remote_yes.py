"""RMARaceBench MPIRMA/sync/029-MPI-sync-lock-exclusive-remote-yes, in Python.

The exclusive locks of a second window order the target before the Put, not after.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window()
value, value2 = ints(1), ints(2)

import time

win2, mem2 = window()
if rank == 0:
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)  # CONFLICT
    win.Unlock(1)
    time.sleep(0.3)  # rank 1 takes win2's lock first
    win2.Lock(1, MPI.LOCK_EXCLUSIVE)
    win2.Unlock(1)
else:
    win2.Lock(1, MPI.LOCK_EXCLUSIVE)
    win2.Unlock(1)
    print('mem[0] is', mem[0])  # CONFLICT
done(win2)
done(win)
