"""HIXL tutorial 2, one-sided read: rank 1 reads 1 MiB from rank 0's memory.

Run: mpiexec -n 2 python examples/hixl_read.py
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
    expected = (np.arange(SIZE) * 7 % 256).astype(np.uint8)
    buf = expected.copy() if rank == 0 else np.zeros(SIZE, dtype=np.uint8)
    # Rank 0 only serves reads: its region is registered read-only.
    access = hixl.ACCESS_READ_ONLY if rank == 0 else hixl.ACCESS_READ_WRITE
    handle = hixl.RegisterMemory(buf, hixl.MEMORY_HOST, access, comm)
    ok = True
    if rank == 1:
        out = np.zeros(SIZE, dtype=np.uint8)
        hixl.Get(out, 0, 0, handle, comm)
        hixl.Fence(comm)
        ok = bool(np.array_equal(out, expected))
        print(f"rank 1: read {SIZE} bytes from rank 0: {'verified' if ok else 'MISMATCH'}")
    else:
        hixl.Fence(comm)
    hixl.DeregisterMemory(handle)
    hixl.Finalize()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
