"""RMARaceBench MPIRMA/hybrid/021-MPI-hybrid-section-barrier-origin-remote-yes, in Python.

Rank 0: one thread Puts, the other meets rank 1 in a Barrier without waiting for the first.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
import threading
import time

win, mem = window()
token = ints(42)
if rank == 0:
    def rma():
        value = ints(42)
        win.Lock(1, MPI.LOCK_EXCLUSIVE)
        win.Put(value, 1, 0)  # CONFLICT
        win.Unlock(1)

    def synced():
        time.sleep(0.3)  # the Put goes first
        comm.Barrier()

    threads = [threading.Thread(target=rma), threading.Thread(target=synced)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
if rank == 1:
    comm.Barrier()
    print('mem[0] is', mem[0])  # CONFLICT
done(win)
