"""RMARaceBench MPIRMA/atomic/007-MPI-atomic-float-int-sameorigin-remote-yes, in Python.

One origin Accumulates a float, then an int, on the same bytes in one epoch.
"""
# race: yes
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window(unit=1, count=40, dtype=np.uint8) if 4 == 1 else window()
win.Fence()
if rank == 0:
    win.Accumulate(np.array([1], np.float32), 1, (0, 1, MPI.FLOAT), MPI.SUM)  # CONFLICT
    win.Accumulate(np.array([1], np.int32), 1, (0, 1, MPI.INT), MPI.SUM)  # CONFLICT
win.Fence()
done(win)
