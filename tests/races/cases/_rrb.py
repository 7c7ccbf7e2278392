"""What every case shares: RMARaceBench's setup (a window of 10 ints per
rank, zeroed, an origin value and a result), in Python."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()


def need(n):
    if size != n:
        raise SystemExit(f"this case needs {n} processes, got {size}")


def window(unit=4, count=10, dtype=np.int32):
    """Win.Allocate of ``count`` elements; its memory as a numpy view, zeroed."""
    win = MPI.Win.Allocate(count * unit, unit, comm=comm)
    mem = np.frombuffer(win.tomemory(), dtype)
    mem[:] = 0
    comm.Barrier()
    return win, mem


def ints(*v):
    return np.array(v, np.int32)


def done(win):
    comm.Barrier()
    win.Free()
