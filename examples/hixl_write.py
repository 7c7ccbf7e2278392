"""HIXL tutorial 1, one-sided write: rank 0 writes 1 MiB into rank 1's memory.

Run: mpiexec -n 2 python examples/hixl_write.py
"""
import sys

import numpy as np

import hixl_rma as hixl

SIZE = 1 << 20


def main():
    hixl.Init()
    comm = hixl.GetWorldCommunicator()
    rank, size = hixl.GetRank(comm), hixl.GetSize(comm)
    if size < 2:
        print("run with at least 2 ranks", file=sys.stderr)
        return 2
    buf = np.zeros(SIZE, dtype=np.uint8)
    handle = hixl.RegisterMemory(buf, hixl.MEMORY_HOST, hixl.ACCESS_READ_WRITE, comm)
    if rank == 0:
        data = (np.arange(SIZE) % 251).astype(np.uint8)
        hixl.Put(data, 1, 0, handle, comm)
    hixl.Fence(comm)
    ok = True
    if rank == 1:
        ok = bool(np.array_equal(buf, (np.arange(SIZE) % 251).astype(np.uint8)))
        print(f"rank 1: received {SIZE} bytes written by rank 0: {'verified' if ok else 'MISMATCH'}")
    hixl.DeregisterMemory(handle)
    hixl.Finalize()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
