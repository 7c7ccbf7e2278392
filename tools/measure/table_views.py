#!/usr/bin/env python3
"""Many views of one buffer, registered one by one at a target and each
written by a peer right after (a table miss each): the time per view, and
the withdrawal of every view with the peer connected (a round trip each).

Run (two engines in one process)::

    python tools/measure/table_views.py 512 2048 8192

One line per N: the whole run, the median and the last 100 transfers'
mean (the first write to a new view, its table refresh included), the
refreshes counted, then the withdrawals. The data is checked.
"""
import sys
import time

import numpy as np

import hixl_rma
from hixl_rma import WRITE

BLOCK = 4096


def run(n):
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    try:
        mem = np.zeros(n * BLOCK, np.uint8)
        src = np.ones(BLOCK, np.uint8)
        a.register_mem(src)
        views = [b.register_mem(mem[:BLOCK])]
        a.connect(b.address)
        one = np.array([[src.ctypes.data, mem.ctypes.data, BLOCK]], np.uint64)
        a.transfer_sync(b.address, WRITE, one)
        first = []
        t0 = time.perf_counter()
        for i in range(1, n):
            views.append(b.register_mem(mem[i * BLOCK:(i + 1) * BLOCK]))
            one[0, 1] = mem.ctypes.data + i * BLOCK
            t1 = time.perf_counter()
            a.transfer_sync(b.address, WRITE, one)
            first.append(time.perf_counter() - t1)
        total = time.perf_counter() - t0
        if not (mem == 1).all():
            raise SystemExit(f"N={n}: a view was not written")
        t0 = time.perf_counter()
        for h in views[1:]:
            b.deregister_mem(h)
        withdraw = time.perf_counter() - t0
        print(f"N={n}: {total * 1e3:.1f} ms; first write to a view: median {np.median(first) * 1e6:.0f} us, "
              f"last 100 {np.mean(first[-100:]) * 1e6:.0f} us; refreshes {a.stats()['table_refreshes']}; "
              f"withdrawing each with the peer connected: {withdraw * 1e3:.1f} ms", flush=True)
    finally:
        a.finalize()
        b.finalize()


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["512", "2048"]:
        run(int(arg))
