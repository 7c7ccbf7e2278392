"""RMARaceBench MPIRMA/atomic/004-MPI-atomic-disp-remote-no, in Python.

Accumulates of 4 ints at byte 0 and at byte 4 (disp_unit 1): the ints coincide.
"""
# race: no
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window(unit=1, count=40, dtype=np.uint8) if 1 == 1 else window()
win.Fence()
if rank == 0:
    win.Accumulate(np.array([1, 1, 1, 1], np.int32), 1, (0, 4, MPI.INT), MPI.SUM)
if rank == 2:
    win.Accumulate(np.array([1, 1, 1, 1], np.int32), 1, (4, 4, MPI.INT), MPI.SUM)
win.Fence()
done(win)
