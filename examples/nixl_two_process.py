"""A NIXL user's two-process transfer on hixl_rma's engine (backend HIXL_RMA):

    python examples/nixl_two_process.py target DIR &
    python examples/nixl_two_process.py initiator DIR

The initiator WRITEs 1 MiB into the target's buffer with a notification;
the target, woken by it, checks the bytes and answers; the initiator READs
them back. Metadata go through files in DIR. Only ``backends=["HIXL_RMA"]``
and ``hixl_rma.nixl.agent`` (which makes NIXL find the plugin) differ from a
script on NIXL's UCX backend: pass ``UCX`` as a third argument to compare.
"""
import os
import sys
import time

import numpy as np

from hixl_rma import nixl as hn

if len(sys.argv) < 3 or sys.argv[1] not in ("target", "initiator"):
    sys.exit(__doc__)
role, folder = sys.argv[1], sys.argv[2]
os.makedirs(folder, exist_ok=True)  # either side may start first
backend = sys.argv[3] if len(sys.argv) > 3 else "HIXL_RMA"
me, other = ("target", "initiator") if role == "target" else ("initiator", "target")
agent = hn.agent(me, [backend])  # raises if the backend is not there
buf = np.zeros(1 << 20, np.uint8) if role == "target" else np.arange(1 << 20, dtype=np.uint32).astype(np.uint8)
agent.register_memory(agent.get_reg_descs([(buf.ctypes.data, buf.nbytes, 0, "")], "DRAM"))
with open(f"{folder}/{me}.tmp", "wb") as f:
    f.write(agent.get_agent_metadata() + b"\n" + str(buf.ctypes.data).encode())
os.rename(f"{folder}/{me}.tmp", f"{folder}/{me}.md")
end = time.monotonic() + 60
while not os.path.exists(f"{folder}/{other}.md"):
    assert time.monotonic() < end, f"no {other} after 60 s"
    time.sleep(0.01)
metadata, _, addr = open(f"{folder}/{other}.md", "rb").read().rpartition(b"\n")
agent.add_remote_agent(metadata)


def notified(msg):
    end = time.monotonic() + 60
    while not agent.check_remote_xfer_done(other, msg):
        assert time.monotonic() < end, f"no {msg!r} from {other}"
        time.sleep(0.001)


def move(op, notif=b""):
    local = agent.get_xfer_descs([(buf.ctypes.data, buf.nbytes, 0)], "DRAM")
    remote = agent.get_xfer_descs([(int(addr), buf.nbytes, 0)], "DRAM")
    h = agent.initialize_xfer(op, local, remote, other, notif)
    agent.transfer(h)
    while agent.check_xfer_state(h) == "PROC":
        time.sleep(0.0001)
    assert agent.check_xfer_state(h) == "DONE", agent.check_xfer_state(h)
    agent.release_xfer_handle(h)


if role == "target":
    notified(b"written")  # seen only after the data
    assert np.array_equal(buf, np.arange(1 << 20, dtype=np.uint32).astype(np.uint8))
    agent.send_notif(other, b"checked")
    notified(b"bye")
    print(f"target: 1 MiB received over {backend} and checked")
else:
    move("WRITE", b"written")
    notified(b"checked")
    want = buf.copy()
    buf[:] = 0
    move("READ")
    assert np.array_equal(buf, want)
    agent.send_notif(other, b"bye")
    print(f"initiator: 1 MiB written and read back over {backend}")
