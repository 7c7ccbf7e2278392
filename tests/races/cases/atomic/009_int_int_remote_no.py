"""RMARaceBench MPIRMA/atomic/009-MPI-atomic-int-int-remote-no, in Python.

Two Accumulates SUM of an int on the same element.
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window(unit=1, count=40, dtype=np.uint8) if 4 == 1 else window()
win.Fence()
if rank == 0:
    win.Accumulate(np.array([1], np.int32), 1, (0, 1, MPI.INT), MPI.SUM)
if rank == 2:
    win.Accumulate(np.array([2], np.int32), 1, (0, 1, MPI.INT), MPI.SUM)
win.Fence()
done(win)
