"""RMARaceBench MPIRMA/atomic/006-MPI-atomic-float-int-remote-yes, in Python.

Accumulate of a float and of an int on the same bytes.
"""
# race: yes
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window(unit=1, count=40, dtype=np.uint8) if 4 == 1 else window()
win.Fence()
if rank == 0:
    win.Accumulate(np.array([1], np.float32), 1, (0, 1, MPI.FLOAT), MPI.SUM)  # CONFLICT
if rank == 2:
    win.Accumulate(np.array([1], np.int32), 1, (0, 1, MPI.INT), MPI.SUM)  # CONFLICT
win.Fence()
done(win)
