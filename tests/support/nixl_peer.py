"""One side of the two-process NIXL tests (tests/test_nixl.py), a NIXL
user's script: ``python nixl_peer.py ROLE BACKENDS DIR [...]``.

Metadata go through files in DIR (written whole, then renamed). Roles:

* ``target`` / ``initiator``: WRITE then READ of many descriptors (1 B to
  64 MiB, three regions) each with a notification, data verified byte for
  byte, the bytes around them checked untouched, notifications both ways;
  the initiator prints ``RESULT {json}`` (digests: the same for every
  backend).
* ``conn-target`` / ``conn-initiator``: the call sequence of a serving
  connector (prep_xfer_dlist, make_prepped_xfer reposted, remove_remote_agent,
  deregister_memory...).
* ``victim``: registers memory, publishes its metadata and waits to be killed.
* ``hold NAME``: agent NAME registers 1 MiB, publishes its metadata and the
  region, and stays until ``DIR/NAME.stop`` exists (a target, or an agent the
  test stops with SIGSTOP).
* ``reader``: agent ``p`` READs agent ``t``'s region (``DIR/t.md``,
  ``DIR/t.regions``) and checks it holds 7s; after ``DIR/p.again`` it READs
  once more and writes what that gave to ``DIR/p.read2``.
"""
import hashlib
import json
import os
import sys
import time

import numpy as np

from hixl_rma import nixl as hn

MiB = 1 << 20
REGIONS = (64 * MiB + MiB, 3 * MiB, 64 * 1024)
DEADLINE = float(os.environ.get("NIXL_PEER_TIMEOUT", "60"))


def descriptors():
    """(region, offset, length): sizes 1 B .. 64 MiB, none overlapping."""
    out = [(0, 0, 64 * MiB), (0, 64 * MiB + 5, 1), (0, 64 * MiB + 100, 4096), (0, 64 * MiB + 8192, 65537)]
    sizes = (1, 3, 64, 1000, 4096, 8191)
    out += [(1, i * 12288 + (i % 5), sizes[i % len(sizes)]) for i in range(200)]
    out += [(2, 0, 60000), (2, 60001, 1)]
    return out


def pattern(seed, region, n):
    """Bytes that differ between neighbours, regions and seeds (period 251)."""
    period = ((np.arange(251, dtype=np.uint32) * 7 + region * 13 + seed) % 251).astype(np.uint8)
    return np.resize(period, n)


def put(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def take(path):
    end = time.monotonic() + DEADLINE
    while not os.path.exists(path):
        if time.monotonic() > end:
            sys.exit(f"no {path} after {DEADLINE} s")
        time.sleep(0.02)
    with open(path, "rb") as f:
        return f.read()


def wait_notif(agent, sender, want):
    """The notifications from `sender` until one starts with `want`; returns it."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        for msg in agent.get_new_notifs().get(sender, []):
            if msg.startswith(want):
                return msg
        time.sleep(0.002)
    sys.exit(f"{agent.name}: no notification {want!r} from {sender} in {DEADLINE} s")


def wait_xfer(agent, handle):
    end = time.monotonic() + DEADLINE
    while True:
        state = agent.check_xfer_state(handle)
        if state != "PROC":
            return state
        if time.monotonic() > end:
            return "TIMEOUT"
        time.sleep(0.0005)


def add_peer(agent, metadata):
    name = agent.add_remote_agent(metadata)
    return name.decode() if isinstance(name, bytes) else name


def make(name, backends):
    agent = hn.agent(name, backends)
    assert set(backends) <= set(agent.backends), (backends, agent.backends)
    return agent


def register(agent, arrays):
    return agent.register_memory(agent.get_reg_descs([(a.ctypes.data, a.nbytes, 0, "") for a in arrays], "DRAM"))


def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def expected(seed, bufs):
    """What `bufs` (zeros, then every descriptor's span filled with pattern) should hold."""
    want = [np.zeros_like(b) for b in bufs]
    full = [pattern(seed, r, len(b)) for r, b in enumerate(bufs)]
    for r, off, n in descriptors():
        want[r][off:off + n] = full[r][off:off + n]
    return want


def check_equal(got, want, what):
    for r, (g, w) in enumerate(zip(got, want, strict=True)):
        if not np.array_equal(g, w):
            bad = np.flatnonzero(g != w)
            sys.exit(f"{what}: region {r} differs at {bad.size} bytes, first at offset {bad[0]}")


def target(backends, d):
    agent = make("target", backends)
    bufs = [np.zeros(n, np.uint8) for n in REGIONS]
    register(agent, bufs)
    put(f"{d}/target.md", agent.get_agent_metadata())
    put(f"{d}/target.regions", json.dumps([[b.ctypes.data, b.nbytes] for b in bufs]).encode())
    peer = add_peer(agent, take(f"{d}/initiator.md"))
    wait_notif(agent, peer, b"written")
    check_equal(bufs, expected(1, bufs), "target after WRITE")
    for r, b in enumerate(bufs):
        b[:] = pattern(2, r, len(b))
    agent.send_notif(peer, b"verified")  # no backend= (NIXL 1.5.1's raises TypeError)
    wait_notif(agent, peer, b"done")
    print("target ok", flush=True)


def initiator(backends, d):
    agent = make("initiator", backends)
    bufs = [np.zeros(n, np.uint8) for n in REGIONS]
    register(agent, bufs)
    put(f"{d}/initiator.md", agent.get_agent_metadata())
    peer = add_peer(agent, take(f"{d}/target.md"))
    remote = json.loads(take(f"{d}/target.regions"))
    for r, b in enumerate(bufs):
        b[:] = pattern(1, r, len(b))
    local = [(bufs[r].ctypes.data + off, n, 0) for r, off, n in descriptors()]
    far = [(remote[r][0] + off, n, 0) for r, off, n in descriptors()]
    t0 = time.monotonic()
    h = agent.initialize_xfer("WRITE", agent.get_xfer_descs(local, "DRAM"), agent.get_xfer_descs(far, "DRAM"),
                              peer, b"written", backends=[backends[0]])
    assert agent.transfer(h) in ("PROC", "DONE")
    assert wait_xfer(agent, h) == "DONE"
    agent.release_xfer_handle(h)
    wait_notif(agent, peer, b"verified")
    for b in bufs:
        b[:] = 0
    h = agent.initialize_xfer("READ", agent.get_xfer_descs(local, "DRAM"), agent.get_xfer_descs(far, "DRAM"),
                              peer, b"read", backends=[backends[0]])
    assert agent.transfer(h) in ("PROC", "DONE")
    assert wait_xfer(agent, h) == "DONE"
    agent.release_xfer_handle(h)
    check_equal(bufs, expected(2, bufs), "initiator after READ")
    agent.send_notif(peer, b"done")
    result = {"descriptors": len(descriptors()), "bytes": sum(n for _, _, n in descriptors()),
              "read_digest": digest(bufs), "seconds": round(time.monotonic() - t0, 3),
              "nixl": hn.installed()[1]}
    print("RESULT", json.dumps(result), flush=True)


def conn_target(backends, d):
    agent = make("server", backends)
    kv = np.zeros(8 * MiB, np.uint8)
    reg = register(agent, [kv])
    put(f"{d}/server.md", agent.get_agent_metadata())
    put(f"{d}/server.kv", json.dumps([kv.ctypes.data, kv.nbytes]).encode())
    peer = add_peer(agent, take(f"{d}/client.md"))
    # The client writes blocks 0..3 of 64 KiB (a prepped list, reposted)
    # and tells which round; the server answers each round.
    for rnd in range(3):
        wait_notif(agent, peer, b"round%d" % rnd)
        want = np.full(4 * 65536, rnd + 1, np.uint8)
        assert np.array_equal(kv[:4 * 65536], want), f"round {rnd}: {np.unique(kv[:4 * 65536])}"
        agent.send_notif(peer, b"ack%d" % rnd)
    wait_notif(agent, peer, b"bye")
    agent.remove_remote_agent(peer)
    agent.deregister_memory(reg)
    print("server ok", flush=True)


def conn_initiator(backends, d):
    agent = make("client", backends)
    blocks = np.zeros(4 * 65536, np.uint8)
    reg = register(agent, [blocks])
    put(f"{d}/client.md", agent.get_agent_metadata())
    peer = add_peer(agent, take(f"{d}/server.md"))
    base, _size = json.loads(take(f"{d}/server.kv"))
    local = agent.prep_xfer_dlist("", [(blocks.ctypes.data + i * 65536, 65536, 0) for i in range(4)], "DRAM",
                                  backends=[backends[0]])
    far = agent.prep_xfer_dlist(peer, [(base + i * 65536, 65536, 0) for i in range(4)], "DRAM",
                                backends=[backends[0]])
    for rnd in range(3):
        blocks[:] = rnd + 1
        h = agent.make_prepped_xfer("WRITE", local, [0, 1, 2, 3], far, [0, 1, 2, 3], b"round%d" % rnd,
                                    backends=[backends[0]])
        assert agent.transfer(h) in ("PROC", "DONE")
        assert wait_xfer(agent, h) == "DONE"
        agent.release_xfer_handle(h)
        wait_notif(agent, peer, b"ack%d" % rnd)
    # A read of the last round back, reposting one handle twice.
    back = np.zeros_like(blocks)
    reg2 = register(agent, [back])
    mine = agent.prep_xfer_dlist("", [(back.ctypes.data + i * 65536, 65536, 0) for i in range(4)], "DRAM",
                                 backends=[backends[0]])
    h = agent.make_prepped_xfer("READ", mine, [3, 2, 1, 0], far, [0, 1, 2, 3], backends=[backends[0]])
    for _ in range(2):
        assert agent.transfer(h) in ("PROC", "DONE")
        assert wait_xfer(agent, h) == "DONE"
    assert np.array_equal(back, np.full_like(back, 3))
    agent.release_xfer_handle(h)
    agent.release_dlist_handle(local)
    agent.release_dlist_handle(mine)
    agent.release_dlist_handle(far)
    agent.send_notif(peer, b"bye")
    agent.remove_remote_agent(peer)
    agent.deregister_memory(reg)
    agent.deregister_memory(reg2)
    print("client ok", flush=True)


def victim(backends, d):
    agent = make("victim", backends)
    mem = np.zeros(256 * MiB, np.uint8)
    register(agent, [mem])
    put(f"{d}/victim.regions", json.dumps([mem.ctypes.data, mem.nbytes]).encode())
    peer = add_peer(agent, take(f"{d}/killer.md"))
    put(f"{d}/victim.md", agent.get_agent_metadata())
    del peer
    time.sleep(DEADLINE)


def hold(backends, d):
    name = sys.argv[4]
    agent = make(name, backends)
    mem = np.zeros(MiB, np.uint8)
    register(agent, [mem])
    put(f"{d}/{name}.regions", json.dumps([mem.ctypes.data, mem.nbytes]).encode())
    put(f"{d}/{name}.md", agent.get_agent_metadata())
    take(f"{d}/{name}.stop")
    print(f"{name} ok", flush=True)


def reader(backends, d):
    agent = make("p", backends)
    mine = np.zeros(MiB, np.uint8)
    register(agent, [mine])
    put(f"{d}/p.md", agent.get_agent_metadata())
    peer = add_peer(agent, take(f"{d}/t.md"))
    base, size = json.loads(take(f"{d}/t.regions"))

    def read():
        try:
            h = agent.initialize_xfer("READ", agent.get_xfer_descs([(mine.ctypes.data, size, 0)], "DRAM"),
                                      agent.get_xfer_descs([(base, size, 0)], "DRAM"), peer)
            state = agent.transfer(h)
            state = wait_xfer(agent, h) if state == "PROC" else state
            agent.release_xfer_handle(h)
            return state
        except Exception as exc:
            return f"raised {type(exc).__name__}"

    assert read() == "DONE" and (mine[:size] == 7).all(), np.unique(mine[:size])
    put(f"{d}/p.read1", b"ok")
    take(f"{d}/p.again")
    mine[:] = 0
    state = read()
    put(f"{d}/p.read2", f"{state} {np.unique(mine[:size]).tolist()}".encode())
    take(f"{d}/p.stop")
    print("reader ok", flush=True)


ROLES = {"target": target, "initiator": initiator, "conn-target": conn_target, "conn-initiator": conn_initiator,
         "victim": victim, "hold": hold, "reader": reader}

if __name__ == "__main__":
    ROLES[sys.argv[1]](sys.argv[2].split(","), sys.argv[3])
