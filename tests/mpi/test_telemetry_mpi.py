"""Telemetry across ranks: each rank's engine (option Telemetry on) moves a
known number of bytes, blocks and notifies to the next rank, serves its
metrics for Prometheus, and the previous rank scrapes them over HTTP while
the run goes on and checks them against what was moved."""
import re
import time
import urllib.request

import numpy as np
import pytest

import hixl_rma
from hixl_rma import telemetry

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

WRITES, WRITE_BLOCK, READS, READ_BLOCK, NOTIFIES = 11, 24, 3, 40, 4


def _scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        m = re.match(r'^(\w+)\{([^}]*)\} (\S+)$', line)
        if m:
            values[(m.group(1), m.group(2))] = float(m.group(3))
    return values


def test_scraped_counts_match_what_moved(comm, rank, size):
    eng = hixl_rma.Engine("127.0.0.1:0", {"Telemetry": "1"})
    server = None
    try:
        mem = eng.register_mem(np.zeros(4096, np.uint8))
        addrs = comm.allgather((eng.address, mem.addr))
        nxt, prev = (rank + 1) % size, (rank - 1) % size
        remote, base = addrs[nxt]
        eng.connect(remote)
        src = np.arange(256, dtype=np.uint8)
        dst = np.zeros(256, np.uint8)
        eng.register_mem(src)
        eng.register_mem(dst)
        server = telemetry.exporter("127.0.0.1", 0, source=lambda: telemetry.snapshot(eng))
        ports = comm.allgather(server.server_address[1])
        for i in range(WRITES):
            eng.post(remote, hixl_rma.WRITE, [(src.ctypes.data, base + WRITE_BLOCK * i, WRITE_BLOCK)])
        eng.flush(remote)
        for _ in range(READS):
            eng.transfer_sync(remote, hixl_rma.READ, [(dst.ctypes.data, base, READ_BLOCK)])
        for k in range(NOTIFIES):
            eng.send_notify(remote, f"n{k}")
        comm.Barrier()  # every rank moved its share; the servers still run
        try:
            got = _scrape(ports[prev])  # the previous rank's engine, which wrote to this one
            # A notify's sender returns once it is sent, not once this engine
            # took it in: receive them as a user would, within a deadline.
            names, deadline = [], time.monotonic() + 20
            while len(names) < NOTIFIES and time.monotonic() < deadline:
                eng.wait_notifies(500)
                names += [n for n, _ in eng.get_notifies()]
        finally:
            # Every rank's scrape is done before any server stops, and a rank
            # whose scrape failed leaves no other in this barrier.
            comm.Barrier()
        r = f'rank="{prev}"'
        assert got[("agent_tx_bytes_total", r)] == WRITES * WRITE_BLOCK, got
        assert got[("agent_rx_bytes_total", r)] == READS * READ_BLOCK
        assert got[("agent_tx_requests_num_total", r)] == WRITES
        assert got[("agent_rx_requests_num_total", r)] == READS
        assert got[("hixl_rma_notifies_sent_total", r)] == NOTIFIES
        # timed: one in 16 of a peer's posts (the first), every synchronous transfer
        assert got[("agent_xfer_post_time_us_count", r)] == (WRITES + 15) // 16 + READS
        assert got[("hixl_rma_connections_total", f'kind="made",{r}')] == 1
        peer = f'peer="{eng.address}",{r}'  # the previous rank's one peer is this rank's engine
        assert got[("hixl_rma_peer_tx_bytes_total", peer)] == WRITES * WRITE_BLOCK
        assert got[("hixl_rma_peer_rx_ops_total", peer)] == READS
        # its one peer's histograms are the engine's
        for h in ("post_time", "completion_time"):
            engine_h = "agent_xfer_post_time_us" if h == "post_time" else "agent_xfer_time_us"
            assert got[(f"hixl_rma_peer_{h}_us_count", peer)] == got[(f"{engine_h}_count", r)] > 0, (h, got)
        # and this rank's own, as a dict: what it wrote and received
        assert telemetry.snapshot(eng)["total"]["write_bytes"] == WRITES * WRITE_BLOCK
        assert sorted(names) == [f"n{k}" for k in range(NOTIFIES)], names
        assert eng.stats()["notifies_received"] == NOTIFIES
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        eng.finalize()
