"""RMARaceBench MPIRMA/atomic/010-MPI-atomic-int-int-sameorigin-remote-no, in Python.

One origin Accumulates SUM of an int twice on one element.
"""
# race: no
# nprocs: 2
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(2)
win, mem = window(unit=1, count=40, dtype=np.uint8) if 4 == 1 else window()
win.Fence()
if rank == 0:
    win.Accumulate(np.array([1], np.int32), 1, (0, 1, MPI.INT), MPI.SUM)
    win.Accumulate(np.array([2], np.int32), 1, (0, 1, MPI.INT), MPI.SUM)
win.Fence()
done(win)
