"""Telemetry scraped during a run (README, "Telemetry").

    HIXL_RMA_TELEMETRY=prometheus:127.0.0.1:9400 mpiexec -n 2 python examples/telemetry_demo.py

Rank 0 writes 100 blocks of 64 B to rank 1 and reads 4 KiB back, then reads
its own metrics endpoint (port 9400 + rank 0) over HTTP and prints them.
"""
import urllib.request

import numpy as np

import hixl_rma as hixl
from hixl_rma import telemetry

hixl.Init()
h = hixl.RegisterMemory(np.zeros(4096, np.uint8))
if hixl.GetRank() == 0:
    for i in range(100):
        hixl.Put(np.full(64, i, np.uint8), 1, 64 * (i % 64), h)
    hixl.Get(np.zeros(4096, np.uint8), 1, 0, h)
hixl.Fence()
if hixl.GetRank() == 0:
    where = telemetry.address()
    if where is None:
        raise SystemExit("set HIXL_RMA_TELEMETRY=prometheus:PORT to serve the metrics")
    with urllib.request.urlopen(f"http://127.0.0.1:{where[1]}/metrics", timeout=10) as r:
        print(r.read().decode())
hixl.Fence()
hixl.DeregisterMemory(h)
hixl.Finalize()
