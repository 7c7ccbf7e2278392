"""RMARaceBench MPIRMA/atomic/002-MPI-atomic-customdatatype-remote-yes, in Python.

Accumulate SUM of 4 ints and of one contiguous type of 4 floats.
"""
# race: yes
# nprocs: 3
from _rrb import MPI, comm, done, ints, need, np, rank, window  # noqa: F401

need(3)
win, mem = window(unit=1, count=40, dtype=np.uint8) if 4 == 1 else window()
win.Fence()
if rank == 0:
    win.Accumulate(np.array([1, 1, 1, 1], np.int32), 1, (0, 4, MPI.INT), MPI.SUM)  # CONFLICT
if rank == 2:
    four = MPI.FLOAT.Create_contiguous(4).Commit()
    win.Accumulate(np.array([1, 2, 3, 4], np.float32), 1, (0, 1, four), MPI.SUM)  # CONFLICT
win.Fence()
done(win)
