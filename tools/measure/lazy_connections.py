#!/usr/bin/env python3
"""What lazy connections save: per rank, the engine connections, the memory
and the Init time of a job whose ranks talk to their ring neighbours only,
against one where every rank talks to every rank.

Run (any size; docs/performance.md's figures: 6 ranks on 3 simulated hosts)::

    python tests/support/simhosts.py up 3
    python tests/support/simhosts.py mpiexec -n 6 -- python tools/measure/lazy_connections.py ring
    python tests/support/simhosts.py mpiexec -n 6 -- python tools/measure/lazy_connections.py all
    python tests/support/simhosts.py down

Rank 0 prints one line per figure: median and max over the ranks.
"""
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI


def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    pattern = sys.argv[1] if len(sys.argv) > 1 else "ring"
    if pattern not in ("ring", "all"):
        raise SystemExit("usage: lazy_connections.py ring|all")
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    comm.Barrier()
    rss0 = _rss_kib()
    t0 = time.perf_counter()
    import hixl_rma
    st = hixl_rma.Init()
    init_ms = (time.perf_counter() - t0) * 1e3
    buf = np.zeros(size, np.int64)
    win = hixl_rma.Win.Create(buf, 8, comm=comm)
    peers = [(rank + 1) % size, (rank - 1) % size] if pattern == "ring" else range(size)
    t0 = time.perf_counter()
    win.Fence()
    for p in peers:
        win.Put(np.array([rank + 1], np.int64), p, rank)
    win.Fence()
    exchange_ms = (time.perf_counter() - t0) * 1e3
    ok = all(buf[q] == q + 1 for q in ([(rank - 1) % size, (rank + 1) % size] if pattern == "ring" else range(size)))
    stats = st.engine.stats()
    row = {"connections (this rank's outgoing)": len(st.connected - {rank}),
           "engine endpoints": stats["endpoints"], "accepted control connections": stats["accepted"],
           "RSS growth from Init on (MiB)": (_rss_kib() - rss0) / 1024, "Init (ms)": init_ms,
           "first exchange, connects included (ms)": exchange_ms}
    every = comm.gather((row, ok, st.hostnames[rank]), root=0)
    win.Free()
    if rank == 0:
        hosts = len({h for _, _, h in every})
        print(f"pattern {pattern}: {size} ranks on {hosts} host(s); data verified: {all(ok for _, ok, _ in every)}")
        for key in row:
            values = [r[key] for r, _, _ in every]
            print(f"  {key:42s} median {statistics.median(values):8.1f}   max {max(values):8.1f}")
    hixl_rma.Finalize()


if __name__ == "__main__":
    main()
