"""RMARaceBench MPIRMA/hybrid/001-MPI-hybrid-master-local-yes, in Python.

Rank 0: one thread (master) Gets into window memory under a lock, another loads it meanwhile.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
import threading
import time

win, mem = window()
if rank == 0:
    ordered = threading.Event() if False else None

    def rma():  # the master thread
        win.Lock(1, MPI.LOCK_EXCLUSIVE)
        win.Get(mem[0:1], 1, 0)  # CONFLICT
        time.sleep(0.3)
        win.Unlock(1)
        if ordered is not None:
            ordered.set()

    def other():
        time.sleep(0.1)  # inside the other thread's epoch
        print('mem[0] is', mem[0])  # CONFLICT

    threads = [threading.Thread(target=rma), threading.Thread(target=other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    comm.Barrier()
if rank == 1:
    comm.Barrier()
    print('mem[0] is', mem[0])
done(win)
