"""RMARaceBench MPIRMA/atomic/003-MPI-atomic-disp-remote-yes, in Python.

Accumulates of 4 ints at byte 0 and at byte 1 (disp_unit 1): the ints overlap unaligned.
"""
# race: yes
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window(unit=1, count=40, dtype=np.uint8) if 1 == 1 else window()
win.Fence()
if rank == 0:
    win.Accumulate(np.array([1, 1, 1, 1], np.int32), 1, (0, 4, MPI.INT), MPI.SUM)  # CONFLICT
if rank == 2:
    win.Accumulate(np.array([1, 1, 1, 1], np.int32), 1, (1, 4, MPI.INT), MPI.SUM)  # CONFLICT
win.Fence()
done(win)
