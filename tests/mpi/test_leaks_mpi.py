"""Window create/free cycles do not leak (run under mpiexec with pytest-mpi).

Each cycle creates a window (alternately over user memory and engine-
allocated memory, which same-node peers map), moves a few bytes on every
10th cycle (so peers cache, then must drop, its regions and mappings), and
frees it. RSS and the engine's counters must come back to where they were.

Measured here (2 cores): ~0.7 ms per cycle with 2 ranks, ~2.2 ms with 3.
``HIXL_RMA_LEAK_CYCLES`` sets the count; the default is 10000 with 2 ranks
and 10000 // (size - 1) beyond, to stay within a minute.
``tools/measure/leakcheck.sh`` runs the full 10000 at every size.
"""
import os
import resource

import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import Win

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(180, method="thread")]

RSS_LIMIT = 20 << 20


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def cycles(size):
    env = os.environ.get("HIXL_RMA_LEAK_CYCLES")
    return int(env) if env else 10000 // max(1, size - 1)


def _cycle(comm, i, right, left, buf):
    rank = comm.Get_rank()
    if i % 2 == 0:
        win = Win.Create(buf, disp_unit=8, comm=comm)
        mem = buf
    else:
        win = Win.Allocate(buf.nbytes, disp_unit=8, comm=comm)
        mem = np.frombuffer(win.tomemory(), np.int64)
    if i % 10 == 0:
        win.Fence()
        win.Put(np.array([rank * 100000 + i], np.int64), right, 1)
        win.Fence()
        got = np.zeros(1, np.int64)
        win.Get(got, right, 1)
        win.Fence()
        ok = mem[1] == left * 100000 + i and got[0] == rank * 100000 + i
    else:
        ok = True
    win.Free()
    return ok


def test_win_create_free_cycles(comm, rank, size, right, left):
    hixl_rma.Init()
    eng = hixl_rma.runtime.runtime().engine
    buf = np.zeros(16, np.int64)
    bad = 0
    for i in range(200):  # warm-up: connections, pools, caches
        bad += not _cycle(comm, i, right, left, buf)
    barrier(comm)
    s0, rss0 = eng.stats(), rss_bytes()
    live = set(hixl_rma.runtime.runtime().windows)
    n = cycles(size)
    for i in range(n):
        bad += not _cycle(comm, i, right, left, buf)
    barrier(comm)
    s1, grown = eng.stats(), rss_bytes() - rss0
    worst = comm.allreduce(grown, op=MPI.MAX)
    bad = comm.allreduce(bad)
    assert bad == 0, f"{bad} cycles moved wrong data"
    assert worst < RSS_LIMIT, f"RSS grew by up to {worst / 2**20:.1f} MiB over {n} cycles"
    assert s1["regions"] == s0["regions"], (s0, s1)
    assert s1["endpoints"] == s0["endpoints"], (s0, s1)
    assert s1["accepted"] == s0["accepted"], (s0, s1)
    assert set(hixl_rma.runtime.runtime().windows) == live
