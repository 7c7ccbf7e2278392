"""The engine's memory lifecycle and its front door under abuse (issue 14).

Two engines in one process, and a token-holding proxy between them where a
test needs frames of the control stream to arrive together: what a target
withdrew is never reachable again, a region is named by its id, a failed
Connect closes its socket once.
"""

import hashlib
import hmac
import os
import resource
import socket
import struct
import threading
import time

import numpy as np
import pytest

import hixl_rma
from hixl_rma import WRITE
from hixl_rma.ground.errors import HixlError, ParamError, UnsupportedError

from test_security import HEADER, MAGIC, VERSION, fields  # the control protocol's frames and fields

pytestmark = pytest.mark.timeout(120)

TOKEN = b"lifecycle-token-0123456789abcdef"
HELLO, HELLO_OK, REJECT, TABLE_REQ, TABLE_RESP, INVALIDATE, INVALIDATE_ACK, BYE, CHALLENGE, PROOF = range(1, 11)


def _direct():
    tls = os.environ.get("UCX_TLS", "")
    return not tls or any(n in tls for n in ("sm", "shm", "posix", "sysv", "all", "mm"))


def frame(type_, payload=b"", req_id=0):
    return HEADER.pack(MAGIC, VERSION, type_, len(payload), 0, req_id) + payload


def field(b):
    return struct.pack("<I", len(b)) + b


def proof(role, client_nonce, server_nonce, port):
    # Engine ids (EngineId) are empty here: a u32 length of 0, no bytes.
    msg = (b"hixl-rma control v3 " + role + b"\0" + struct.pack("<I", 0) + client_nonce + server_nonce
           + struct.pack("<I", port))
    return hmac.new(TOKEN, msg, hashlib.sha256).digest()


def read_frame(s):
    data = b""
    while len(data) < HEADER.size:
        got = s.recv(HEADER.size - len(data))
        if not got:
            return None
        data += got
    _, _, type_, length, _, req_id = HEADER.unpack(data)
    payload = b""
    while len(payload) < length:
        got = s.recv(length - len(payload))
        if not got:
            return None
        payload += got
    return type_, payload, req_id


class Proxy:
    """Holds the job token and sits between a client engine and its server.

    It runs each handshake itself (so both proofs check), strips the host
    identity from HELLO_OK (the proxy, not the server, holds the client's
    connection), and forwards everything else. With ``hold_table`` set it
    keeps a TABLE_RESP until the next frame from the server arrives, then
    delivers both in one write: the order the stream guarantees, with no
    time between them.
    """

    def __init__(self, server_address):
        host, port = server_address.rsplit(":", 1)
        self.server = (host, int(port))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.hold_table = threading.Event()
        self.mangle_table = False
        self.held_pair = threading.Event()
        self.threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self):
        self.sock.settimeout(30)
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                self._join(c)
            except (OSError, AssertionError, TypeError):
                c.close()

    def _join(self, c):
        s = socket.create_connection(self.server, timeout=30)
        # client side: we are its server
        _, payload, _ = read_frame(c)
        client_nonce = fields(payload)[0]
        my_nonce = os.urandom(32)
        c.sendall(frame(CHALLENGE, field(my_nonce) + field(b"") +
                        field(proof(b"server", client_nonce, my_nonce, self.port))))
        read_frame(c)  # its proof (the engine checks it, we need not)
        # server side: we are its client
        nonce = os.urandom(32)
        s.sendall(frame(HELLO, field(nonce) + field(b"proxy") + field(b"")))
        _, challenge, _ = read_frame(s)
        server_nonce = fields(challenge)[0]
        s.sendall(frame(PROOF, field(proof(b"client", nonce, server_nonce, self.server[1]))))
        type_, ok, _ = read_frame(s)
        assert type_ == HELLO_OK
        # worker address, identity (u64 pid, boot id, u64, u64), table: empty the boot id
        (wlen,) = struct.unpack_from("<I", ok)
        pos = 4 + wlen + 8
        (blen,) = struct.unpack_from("<I", ok, pos)
        ok = ok[:pos] + struct.pack("<I", 0) + ok[pos + 4 + blen:]
        if self.mangle_table:
            ok = ok[:pos + 4 + 16] + struct.pack("<I", 0xFFFFFFFF)  # a table too large to be one
        c.sendall(frame(HELLO_OK, ok))
        if self.mangle_table:
            c.recv(1)
            c.close()
            s.close()
            return
        up = threading.Thread(target=self._pump, args=(c, s, False), daemon=True)
        down = threading.Thread(target=self._pump, args=(s, c, True), daemon=True)
        up.start()
        down.start()
        self.threads += [up, down]

    def _pump(self, src, dst, from_server):
        held = None
        try:
            while True:
                got = read_frame(src)
                if got is None:
                    break
                type_, payload, req_id = got
                data = frame(type_, payload, req_id)
                if from_server and type_ == TABLE_RESP and self.hold_table.is_set():
                    held = data
                    continue
                if held is not None:
                    data = held + data
                    held = None
                    self.held_pair.set()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.sock.close()


def test_table_refresh_does_not_bring_back_a_withdrawn_region():
    """Issue 14.1: TABLE_RESP (with the region) then INVALIDATE (of it), in one
    segment: after the target's deregistration returned, the origin refuses a
    transfer there instead of writing into the freed region."""
    target = hixl_rma.Engine(options={"JobToken": TOKEN})
    origin = hixl_rma.Engine(options={"JobToken": TOKEN})
    proxy = Proxy(target.address)
    try:
        origin.connect(proxy.address, timeout_ms=10000)
        # registered after the connect: the origin's table lacks it
        mem = np.zeros(4096, np.uint8)
        h = target.register_mem(mem)
        src = np.full(64, 7, np.uint8)
        origin.register_mem(src)
        proxy.hold_table.set()
        # The origin's transfer misses, asks for the table; the proxy keeps
        # the answer until the target's invalidation follows it.
        result = {}

        def transfer():
            try:
                origin.transfer_sync(proxy.address, WRITE, [(src.ctypes.data, h.addr, 64)], timeout_ms=10000)
                result["st"] = "written"
            except HixlError as exc:
                result["st"] = exc

        t = threading.Thread(target=transfer)
        t.start()
        deadline = time.monotonic() + 10
        while origin.stats()["table_refreshes"] == 0 and time.monotonic() < deadline and t.is_alive():
            time.sleep(0.001)
            # the request is out once the target answered it: withdraw now
            if target.stats()["regions"] == 1:
                break
        time.sleep(0.05)  # the table answer is held at the proxy by now
        target.deregister_mem(h)  # returns once the origin acknowledged
        t.join(timeout=30)
        assert proxy.held_pair.is_set(), "the proxy never held a table answer"
        # Refused, or written while the region was still registered (before
        # the origin acknowledged the withdrawal); never anything else.
        assert result.get("st") == "written" or (isinstance(result.get("st"), ParamError) and
                                                 "not registered" in str(result["st"])), result
        proxy.hold_table.clear()
        mem[:] = 0
        # after the withdrawal returned, the stale table is not installed: refused, nothing written
        for _ in range(3):
            with pytest.raises(ParamError, match="not registered"):
                origin.transfer_sync(proxy.address, WRITE, [(src.ctypes.data, h.addr, 64)])
        assert not mem.any()
    finally:
        origin.finalize()
        target.finalize()
        proxy.close()


@pytest.mark.skipif(not _direct(), reason="needs mapped engine memory (UCX_TLS leaves out shared memory)")
@pytest.mark.parametrize("withdrawn", ["allocated", "registered"])
def test_invalidation_names_the_region_not_its_range(withdrawn):
    """Issue 14.4: one buffer registered twice (engine memory, then the same
    range as plain memory); withdrawing one leaves the other at the peer."""
    target = hixl_rma.Engine(options={"JobToken": TOKEN})
    origin = hixl_rma.Engine(options={"JobToken": TOKEN})
    try:
        alloc = target.alloc_mem(1 << 16)
        view = np.frombuffer(alloc, np.uint8)
        again = target.register_mem(view)
        assert again.addr == alloc.addr
        origin.connect(target.address)
        local = np.full(8, 3, np.uint8)
        origin.register_mem(local)
        origin.remote_ptr(target.address, alloc.addr, 8)  # the allocated one is mapped here
        target.deregister_mem(alloc if withdrawn == "allocated" else again)
        if withdrawn == "registered":
            # the mapped (allocated) region is the one still there
            origin.remote_ptr(target.address, alloc.addr, 8)
        else:
            # only the plain registration is left: reachable, but not mapped
            with pytest.raises(UnsupportedError):
                origin.remote_ptr(target.address, alloc.addr, 8)
        origin.transfer_sync(target.address, WRITE, [(local.ctypes.data, alloc.addr, 8)])
        assert (view[:8] == 3).all()
        del view
    finally:
        origin.finalize()
        target.finalize()


def test_failed_connect_closes_its_socket_once():
    """Issue 14.7: a Connect that fails after the handshake, with its endpoint
    made (a malformed table), closes its socket exactly once: descriptors
    opened meanwhile stay open."""
    target = hixl_rma.Engine(options={"JobToken": TOKEN})
    proxy = Proxy(target.address)
    proxy.mangle_table = True
    client = hixl_rma.Engine(options={"JobToken": TOKEN})
    pipes = []
    try:
        for _ in range(20):
            with pytest.raises(HixlError, match="malformed"):
                client.connect(proxy.address, timeout_ms=5000)
            pipes.append(os.pipe())  # likely takes the number the failed connect freed
        time.sleep(0.3)  # the progress thread has run its pending closes
        for r, w in pipes:
            os.fstat(r)
            os.fstat(w)
            os.write(w, b"x")
            assert os.read(r, 1) == b"x"
        assert client.stats()["endpoints"] == 0
    finally:
        client.finalize()
        target.finalize()
        proxy.close()
        for r, w in pipes:
            os.close(r)
            os.close(w)


FINALIZE_RACE = r'''
import sys, threading, time
import numpy as np
import hixl_rma
from hixl_rma.ground.errors import ParamError

outcomes = {"refused": 0, "done": 0}
for round_ in range(int(sys.argv[1])):
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    mem = b.alloc_mem(1 << 20)
    a.connect(b.address)
    src = np.ones(1 << 20, np.uint8)
    a.register_mem(src)
    stop = False

    def hammer(kind):
        # Calls that run without the GIL while the main thread finalizes a.
        while not stop:
            try:
                if kind == 0:
                    a.get_notifies()
                elif kind == 1:
                    a.wait_notifies(20)
                elif kind == 2:
                    a.transfer_sync(b.address, hixl_rma.WRITE, [(src.ctypes.data, mem.addr, 1 << 20)])
                else:
                    a.flush(b.address)
                outcomes["done"] += 1
            except ParamError as exc:
                assert "finalize" in str(exc), exc
                outcomes["refused"] += 1
                return

    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.02)
    a.finalize()  # waits for the calls in flight, refuses new ones
    stop = True
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    b.finalize()
print("OK", outcomes)
'''


def test_finalize_waits_for_calls_in_flight_in_other_threads(tmp_path):
    """Issue 23.13: four threads keep calling the engine without the GIL
    (get_notifies, wait_notifies, transfer_sync, flush) while the main
    thread finalizes it: finalize waits for the calls in flight, later calls
    raise ParamError ("finalized"), and nothing crashes (20 rounds)."""
    import subprocess
    import sys
    script = tmp_path / "race.py"
    script.write_text(FINALIZE_RACE)
    p = subprocess.run([sys.executable, str(script), "20"], capture_output=True, text=True, timeout=100)
    assert p.returncode == 0, f"rc {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert p.stdout.startswith("OK"), p.stdout


def test_finalize_waits_only_as_long_as_it_is_told():
    """A call that outlasts finalize's bound: finalize raises HixlTimeoutError
    naming it, the engine stays usable, and a later finalize completes."""
    a = hixl_rma.Engine()
    t = threading.Thread(target=a.wait_notifies, args=(1500,))
    t.start()
    time.sleep(0.1)
    with pytest.raises(hixl_rma.ground.errors.HixlTimeoutError, match="1 engine call"):
        a.finalize(timeout_ms=200)
    assert not a.finalized
    a.stats()  # still usable
    t.join(10)
    a.finalize(timeout_ms=200)
    assert a.finalized


def _exchange(a, b):
    """One write from a to b, checked: the connection works."""
    dst = np.zeros(4096, np.uint8)
    b.register_mem(dst)
    src = np.arange(4096, dtype=np.uint32).astype(np.uint8)
    a.register_mem(src)
    a.transfer_sync(b.address, WRITE, [(src.ctypes.data, dst.ctypes.data, 4096)])
    assert np.array_equal(dst, src)


def test_a_refused_connect_is_retryable():
    """Issue 23.5 (engine part): a connect refused because nothing listened
    there yet leaves nothing behind; once the engine is up, the same connect
    works."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # free, nobody listens
    a = hixl_rma.Engine()
    b = None
    try:
        with pytest.raises(hixl_rma.ground.errors.NotConnectedError):
            a.connect(f"127.0.0.1:{port}", 500)
        assert a.stats()["endpoints"] == 0
        b = hixl_rma.Engine(f"127.0.0.1:{port}")
        a.connect(b.address, 5000)
        _exchange(a, b)
    finally:
        a.finalize()
        if b is not None:
            b.finalize()


def test_a_connect_failed_for_want_of_descriptors_is_retryable():
    """Issue 23.5 (engine part): with the process out of file descriptors a
    connect fails (both ends are this process: the client cannot open its
    socket, the server cannot accept); with descriptors back, the next
    connect works and so does the connection."""
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    fillers = []
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 4096), hard))
        try:
            while True:
                fillers.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass
        with pytest.raises(HixlError):
            a.connect(b.address, 500)
        for fd in fillers:
            os.close(fd)
        fillers = []
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert a.stats()["endpoints"] == 0
        a.connect(b.address, 5000)
        _exchange(a, b)
    finally:
        for fd in fillers:
            os.close(fd)
        a.finalize()
        b.finalize()
