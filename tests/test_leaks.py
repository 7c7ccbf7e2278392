"""Resource leaks of the engine: many register/deregister (and connect/
disconnect) cycles with a connected peer in the same process, so every
deregistration is an invalidation over the wire and every table refresh
unpacks (and later retires) remote keys. RSS (from /proc/self/statm) and the
engine's counters must come back to where they started.

``tools/measure/leakcheck.sh`` runs this module (and tests/test_engine.py) under
valgrind for leaks that RSS cannot see.
"""

import os
import resource
import subprocess
import sys
import time

import numpy as np
import pytest

import hixl_rma
from hixl_rma import READ, WRITE

pytestmark = pytest.mark.timeout(120)

CYCLES = int(os.environ.get("HIXL_RMA_LEAK_CYCLES", "10000"))
# 0 turns the RSS checks off (tools/measure/leakcheck.sh: valgrind holds freed memory back)
RSS_LIMIT = int(os.environ.get("HIXL_RMA_LEAK_RSS_MB", "20")) << 20


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


@pytest.fixture
def served():
    """(server, client): the client is connected to the server."""
    server = hixl_rma.Engine(options={"JobToken": "leak"})
    client = hixl_rma.Engine(options={"JobToken": "leak"})
    client.connect(server.address)
    yield server, client
    client.finalize()
    server.finalize()


def _cycle(server, client, buf, dst, i):
    # alternate user memory and engine-allocated (peer-mappable) memory
    h = server.register_mem(buf) if i % 2 == 0 else server.alloc_mem(buf.nbytes)
    if i % 10 == 0:
        # the client looks the new region up (table refresh, rkey unpacked,
        # mapping made for allocated memory) and moves bytes both ways
        client.transfer_sync(server.address, WRITE, [(dst.ctypes.data, h.addr, 64)])
        client.transfer_sync(server.address, READ, [(dst.ctypes.data, h.addr + 64, 64)])
    server.deregister_mem(h)  # invalidates the client's cached entry first


def test_register_deregister_cycles(served):
    server, client = served
    buf = np.zeros(4096, np.uint8)
    dst = np.arange(64, dtype=np.uint8)
    client.register_mem(dst)
    s0, c0 = server.stats(), client.stats()
    for i in range(200):  # warm up allocator pools, UCX memory caches
        _cycle(server, client, buf, dst, i)
    rss0 = rss_bytes()
    for i in range(CYCLES):
        _cycle(server, client, buf, dst, i)
    grown = rss_bytes() - rss0
    s1, c1 = server.stats(), client.stats()
    assert not RSS_LIMIT or grown < RSS_LIMIT, f"RSS grew by {grown / 2**20:.1f} MiB over {CYCLES} cycles"
    assert s1["regions"] == s0["regions"] == 0
    assert c1["regions"] == c0["regions"] == 1
    assert s1["accepted"] == 1 and c1["endpoints"] == 1
    assert c1["table_refreshes"] - c0["table_refreshes"] >= (CYCLES + 200) // 10
    # a withdrawn region stays withdrawn
    h = server.register_mem(buf)
    client.transfer_sync(server.address, READ, [(dst.ctypes.data, h.addr, 64)])
    addr = h.addr
    server.deregister_mem(h)
    with pytest.raises(hixl_rma.ParamError, match="not registered"):
        client.transfer_sync(server.address, READ, [(dst.ctypes.data, addr, 64)])


CLIENT = r"""
import resource, sys
import numpy as np
import hixl_rma
addr, base, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
e = hixl_rma.Engine(options={"JobToken": "leak"})
src = np.full(64, 9, np.uint8)
e.register_mem(src)
def cycle(i):
    e.connect(addr)
    if i % 5 == 0:
        e.transfer_sync(addr, hixl_rma.WRITE, [(src.ctypes.data, base, 64)])
    e.disconnect(addr)
def shm_maps():
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if "SYSV" in line or "/dev/shm/" in line)
for i in range(50):
    cycle(i)
r0, m0 = rss(), shm_maps()
for i in range(n):
    cycle(i)
print("GROWN", rss() - r0, e.stats()["endpoints"], shm_maps() - m0, flush=True)
e.finalize()
"""


MM_LEAK = ("UCX's shared-memory transports (posix, sysv; UCX 1.20.1 and 1.22.0) map the peer's FIFO "
           "segment again at every Connect to an engine that has registered regions and never unmap it "
           "before the worker is destroyed: 10-30 KB of RSS per connect/disconnect cycle in the connecting "
           "process (UCX_TLS=tcp: none). Engine connections are cached for the process's lifetime, so "
           "only repeated Disconnect/Connect pays it")


@pytest.mark.parametrize("tls", ["tcp", None])
def test_connect_disconnect_cycles(served, tmp_path, tls):
    """A client process connects, transfers, disconnects again and again:
    neither side may keep anything per connection."""
    server, _ = served
    target = np.zeros(4096, np.uint8)
    th = server.register_mem(target)
    n = 1000
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    env = dict(os.environ)
    if tls:
        env["UCX_TLS"] = tls
    rss0 = rss_bytes()
    out = subprocess.run([sys.executable, str(script), server.address, str(th.addr), str(n)],
                         capture_output=True, text=True, timeout=100, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    grown_client, endpoints, new_maps = (int(x) for x in out.stdout.split("GROWN")[1].split()[:3])
    grown_server = rss_bytes() - rss0
    assert endpoints == 0
    for _ in range(500):
        if server.stats()["accepted"] == 1:  # only the fixture's client is left
            break
        time.sleep(0.01)
    assert server.stats()["accepted"] == 1, server.stats()
    assert (target[:64] == 9).all()
    limit = min(RSS_LIMIT, 4 << 20)  # < 4 KB per connection: nothing kept per connection
    if RSS_LIMIT:
        assert grown_server < limit, f"server RSS grew by {grown_server / 2**20:.1f} MiB over {n} connections"
    # The client side is where UCX's own shared-memory leak shows, on hosts where
    # its posix/sysv transports are usable (a CI host without a large /dev/shm
    # may not use them): there it is an expected failure, elsewhere it must pass.
    if tls is None and new_maps >= 50:
        pytest.xfail(f"{MM_LEAK} (this run: {new_maps} mappings kept, client RSS +{grown_client >> 10} KiB)")
    assert new_maps < 50, f"the client kept {new_maps} more shared-memory mappings after {n} connections"
    if RSS_LIMIT:
        assert grown_client < limit, f"client RSS grew by {grown_client / 2**20:.1f} MiB over {n} connections"
