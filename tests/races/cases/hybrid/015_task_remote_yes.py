"""RMARaceBench MPIRMA/hybrid/015-MPI-hybrid-task-remote-yes, in Python.

Rank 1: one thread (task) meets rank 0 in a Barrier after its Put, another loads the element without waiting for it.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
import threading
import time

win, mem = window()
value = ints(42)
if rank == 0:
    time.sleep(0.2)
    win.Lock(1, MPI.LOCK_EXCLUSIVE)
    win.Put(value, 1, 0)  # CONFLICT
    win.Unlock(1)
    comm.Barrier()
if rank == 1:
    ordered = threading.Event() if False else None

    def synced():  # the task thread
        comm.Barrier()
        if ordered is not None:
            ordered.set()

    def other():
        pass
        print('mem[0] is', mem[0])  # CONFLICT

    threads = [threading.Thread(target=synced), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
done(win)
