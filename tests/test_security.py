"""The engine's front door: the job token, and strangers speaking garbage.

A serving engine holds a registered buffer filled with a recognizable
pattern. Engines with the wrong token or none, and raw TCP clients sending
malformed frames, must be refused: the connection is closed, they receive at
most the server's CHALLENGE (a nonce and the server's proof) and a REJECT
frame header, never a byte of the memory table or of the memory, nothing is
written, and the engine keeps serving its real peer.

Frame format (src/engine/common/wire.h), little-endian: u32 magic 0x4d525848
("HXRM"), u16 version 4, u16 type, u32 payload length, u32 reserved, u64
request id; a field is u32-length-prefixed bytes. Handshake (auth.h): HELLO
(client nonce, client name, client id) -> CHALLENGE (server nonce, server id,
server proof) -> PROOF (client proof) -> HELLO_OK or REJECT; a proof is
HMAC-SHA-256 under the token of "hixl-rma control v3 <role>\0" + u32 id
length + id (the prover's engine id, option EngineId) + client nonce + server
nonce + u32 port (the server's listening port). The token itself is never sent.
"""

import hashlib
import hmac
import os
import resource
import socket
import struct
import textwrap
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hixl_rma
from hixl_rma import READ, WRITE
from hixl_rma.ground.errors import HixlError, NotConnectedError

from support import procutil

pytestmark = pytest.mark.timeout(120)

MAGIC, VERSION = 0x4D525848, 5
HELLO, HELLO_OK, REJECT, TABLE_REQ, TABLE_RESP, INVALIDATE, INVALIDATE_ACK, BYE, CHALLENGE, PROOF = range(1, 11)
HEADER = struct.Struct("<IHHIIQ")
TOKEN = "a3f9c2d1e8b7a6f5a3f9c2d1e8b7a6f5"
PATTERN = b"HIXL-SECRET-PATTERN:"
SIZE = 64 * 1024
REJECT_FRAME = HEADER.pack(MAGIC, VERSION, REJECT, 0, 0, 0)


def frame(type_, payload=b"", *, magic=MAGIC, version=VERSION, length=None, reserved=0, req_id=0):
    return HEADER.pack(magic, version, type_, len(payload) if length is None else length, reserved,
                       req_id) + payload


def field(b, length=None):
    return struct.pack("<I", len(b) if length is None else length) + b


NONCE = b"N" * 32


def hello(nonce=NONCE, name=b"stranger:1", id_=b""):
    return frame(HELLO, field(nonce) + field(name) + field(id_))


def proof(token, role, id_, client_nonce, server_nonce, port):
    msg = (b"hixl-rma control v3 " + role + b"\0" + struct.pack("<I", len(id_)) + id_ + client_nonce + server_nonce
           + struct.pack("<I", port))
    return hmac.new(token, msg, hashlib.sha256).digest()


def frames(data):
    """[(type, payload)] of a byte stream; raises on a malformed one."""
    out = []
    while data:
        magic, version, type_, length, _, _ = HEADER.unpack_from(data)
        assert (magic, version) == (MAGIC, VERSION), data[:24]
        out.append((type_, data[HEADER.size:HEADER.size + length]))
        data = data[HEADER.size + length:]
    return out


def fields(payload):
    out = []
    while payload:
        (n,) = struct.unpack_from("<I", payload)
        out.append(payload[4:4 + n])
        payload = payload[4 + n:]
    return out


def wait_until(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


class Server:
    """A serving engine with a patterned registered buffer and a real peer."""

    def __init__(self):
        self.engine = hixl_rma.Engine(options={"JobToken": TOKEN})
        self.mem = np.frombuffer((PATTERN * (SIZE // len(PATTERN) + 1))[:SIZE], np.uint8).copy()
        self.expect = self.mem.copy()
        self.handle = self.engine.register_mem(self.mem)
        host, port = self.engine.address.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.peer = hixl_rma.Engine(options={"JobToken": TOKEN})
        self.peer.connect(self.engine.address)
        self.scratch = np.zeros(SIZE, np.uint8)
        self.peer.register_mem(self.scratch)
        self.round = 0

    def serves(self):
        """The real peer reads the pattern and writes (then restores) a block."""
        addr = self.engine.address
        self.scratch[:] = 0
        self.peer.transfer_sync(addr, READ, [(self.scratch.ctypes.data, self.handle.addr, SIZE)])
        assert np.array_equal(self.scratch, self.expect)
        self.round += 1
        marker = np.full(16, self.round % 251, np.uint8)
        self.scratch[:16] = marker
        self.peer.transfer_sync(addr, WRITE, [(self.scratch.ctypes.data, self.handle.addr + SIZE - 16, 16)])
        assert np.array_equal(self.mem[-16:], marker)
        self.mem[-16:] = self.expect[-16:]
        return True

    def untouched(self):
        return np.array_equal(self.mem, self.expect)

    def close(self):
        self.peer.finalize()
        self.engine.finalize()


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.close()


def stranger(server, data, *, half_close=True, read_timeout=8.0, chunks=None):
    """Connect, send ``data`` (optionally in timed chunks), then read until
    the server closes; returns (bytes received, seconds until closed)."""
    s = socket.create_connection((server.host, server.port), timeout=5)
    received = b""
    t0 = time.monotonic()
    try:
        try:
            for part in (chunks or [data]):
                s.sendall(part)
                if chunks:
                    time.sleep(0.05)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError, OSError):  # OSError: already closed by the engine
            pass
        s.settimeout(read_timeout)
        while True:
            try:
                got = s.recv(65536)
            except ConnectionResetError:
                break
            except TimeoutError:
                pytest.fail(f"the engine kept a stranger's connection open for {read_timeout} s")
            if not got:
                break
            received += got
    finally:
        s.close()
    return received, time.monotonic() - t0


def assert_learned_nothing(server, received, client_nonce=NONCE):
    # at most the server's challenge and a REJECT header, never a table or memory
    got = frames(received)
    assert [t for t, _ in got] in ([], [CHALLENGE], [REJECT], [CHALLENGE, REJECT]), got
    for type_, payload in got:
        if type_ == CHALLENGE:
            server_nonce, server_id, server_proof = fields(payload)
            assert len(server_nonce) == 32 and server_id == b"" and len(payload) == 76
            # the server proves the token over both nonces, and shows nothing else
            if client_nonce is not None:
                assert server_proof == proof(TOKEN.encode(), b"server", b"", client_nonce, server_nonce, server.port)
        else:
            assert payload == b""
    for k in range(0, len(PATTERN) - 4):
        assert PATTERN[k:k + 4] not in received
    assert TOKEN.encode() not in received
    assert server.untouched()


def read_frame(s):
    """One whole frame from a socket, or None when it closed first."""
    data = b""
    while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack_from(data)[3]:
        got = s.recv(65536)
        if not got:
            return None
        data += got
    (got,) = frames(data)
    return got


def handshake(server, token, client_nonce=NONCE):
    """The handshake by hand with ``token``: (challenge payload, the answer to our proof or None if closed)."""
    s = socket.create_connection((server.host, server.port), timeout=8)
    try:
        s.sendall(hello(client_nonce))
        type_, challenge = read_frame(s)
        assert type_ == CHALLENGE
        server_nonce = fields(challenge)[0]
        s.sendall(frame(PROOF, field(proof(token, b"client", b"", client_nonce, server_nonce, server.port))))
        answer = read_frame(s)
        if answer is not None and answer[0] == REJECT:
            assert read_frame(s) is None  # and then it closes
        return challenge, answer
    finally:
        s.close()


# ---------------------------------------------------------------- job token

def test_foreign_and_missing_token_refused_while_serving(server):
    assert server.serves()
    base_accepted = server.engine.stats()["accepted"]
    others = [hixl_rma.Engine(options={"JobToken": "b" * 32}),
              hixl_rma.Engine(options={"JobToken": TOKEN[:-1]}),  # a prefix of the token
              hixl_rma.Engine(options={"JobToken": TOKEN + "x"}),  # the token plus a byte
              hixl_rma.Engine()]  # none at all
    try:
        for other in others:
            src = np.zeros(64, np.uint8)
            other.register_mem(src)
            with pytest.raises(HixlError, match="token") as ei:
                other.connect(server.engine.address, timeout_ms=3000)
            assert ei.value.status == hixl_rma.FAILED
            assert other.stats()["endpoints"] == 0
            # refused means no connection: it cannot read or write anything
            with pytest.raises(NotConnectedError, match="not connected"):
                other.transfer_sync(server.engine.address, READ, [(src.ctypes.data, server.handle.addr, 64)])
            assert not src.any()
            assert server.serves()
        assert wait_until(lambda: server.engine.stats()["accepted"] == base_accepted)
        assert server.untouched()
    finally:
        for other in others:
            other.finalize()
    assert server.serves()


@pytest.mark.parametrize("token", [b"b" * 32, TOKEN.encode()[:-1], TOKEN.encode() + b"x", b""])
def test_wrong_proof_gets_a_refusal_only(server, token):
    """A client proving another token (or none) gets REJECT and the close, nothing else."""
    _challenge, answer = handshake(server, token)
    assert answer == (REJECT, b"")
    assert server.untouched() and server.serves()


def test_right_proof_is_let_in(server):
    """The same handshake with the token is answered with HELLO_OK: the proofs are what the docstring says."""
    _challenge, answer = handshake(server, TOKEN.encode())
    assert answer is not None and answer[0] == HELLO_OK
    assert server.serves()


def test_server_proof_is_bound_to_the_nonces(server):
    """The challenge's proof covers the client's nonce: two nonces, two proofs, each checkable."""
    seen = set()
    for nonce in (b"A" * 32, b"B" * 32):
        received, _ = stranger(server, hello(nonce))
        assert_learned_nothing(server, received, client_nonce=nonce)
        (_, payload), = frames(received)
        seen.add(fields(payload)[2])
    assert len(seen) == 2


class FakeServer:
    """A listening socket that records what a connecting engine sends, answering with ``reply(hello)``."""

    def __init__(self, reply, port=0):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.received = b""
        self.conns = []
        import threading
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.sock.settimeout(10)
        try:
            c, _ = self.sock.accept()
        except OSError:
            return
        self.conns.append(c)
        c.settimeout(10)
        try:
            got = read_frame(c)
            self.received += frame(*got) if got else b""
            if got is None:
                return
            for part in self.reply(got, c):
                c.sendall(part)
            while True:
                more = c.recv(65536)
                if not more:
                    break
                self.received += more
        except OSError:
            pass

    def close(self):
        self.thread.join(timeout=15)
        for c in self.conns:
            c.close()
        self.sock.close()


def _bogus_challenge(hello_frame, conn):
    return [frame(CHALLENGE, field(b"S" * 32) + field(b"") + field(b"\0" * 32))]


def test_client_checks_the_server_first_and_never_sends_the_token():
    """A process on the port that cannot prove the token learns no proof and no token."""
    fake = FakeServer(_bogus_challenge)
    client = hixl_rma.Engine(options={"JobToken": TOKEN})
    try:
        with pytest.raises(HixlError, match="does not prove this job token"):
            client.connect(f"127.0.0.1:{fake.port}", timeout_ms=3000)
    finally:
        client.finalize()
        fake.close()
    (type_, payload), = frames(fake.received)  # the HELLO, and nothing after it
    assert type_ == HELLO and len(fields(payload)[0]) == 32
    assert TOKEN.encode() not in fake.received


def test_impostor_on_a_dead_engines_port_learns_nothing():
    """An engine goes; a stranger binds its port; a peer connecting lazily there is refused."""
    gone = hixl_rma.Engine(options={"JobToken": TOKEN})
    port = int(gone.address.rsplit(":", 1)[1])
    gone.finalize()
    fake = FakeServer(_bogus_challenge, port=port)
    client = hixl_rma.Engine(options={"JobToken": TOKEN})
    try:
        with pytest.raises(HixlError, match="token"):
            client.connect(f"127.0.0.1:{port}", timeout_ms=3000)
        assert client.stats()["endpoints"] == 0
    finally:
        client.finalize()
        fake.close()
    assert [t for t, _ in frames(fake.received)] == [HELLO]
    assert TOKEN.encode() not in fake.received


def _identity(pid):
    st_ = os.stat("/proc/self/ns/pid")
    boot = open("/proc/sys/kernel/random/boot_id").read().strip().encode()
    return struct.pack("<Q", pid) + field(boot) + struct.pack("<QQ", st_.st_dev, st_.st_ino)


def test_claimed_pid_must_hold_the_connection():
    """Even with the token, a server claiming another process's pid (to steer cma at it) is refused."""
    import subprocess
    bystander = subprocess.Popen(["sleep", "60"])
    port_box = {}

    def reply(hello_frame, conn):
        _, payload = hello_frame
        client_nonce = fields(payload)[0]
        server_nonce = b"S" * 32
        yield frame(CHALLENGE, field(server_nonce) + field(b"") +
                    field(proof(TOKEN.encode(), b"server", b"", client_nonce, server_nonce, port_box["port"])))
        read_frame(conn)  # the client's proof
        yield frame(HELLO_OK, field(b"not-a-worker-address") + _identity(bystander.pid) + struct.pack("<I", 0))

    fake = FakeServer(reply)
    port_box["port"] = fake.port
    client = hixl_rma.Engine(options={"JobToken": TOKEN})
    try:
        with pytest.raises(HixlError, match=f"pid {bystander.pid}.*does not hold"):
            client.connect(f"127.0.0.1:{fake.port}", timeout_ms=3000)
    finally:
        client.finalize()
        fake.close()
        bystander.kill()
        bystander.wait()


def test_binary_token_is_taken_whole():
    """Tokens that differ only after a NUL byte are different tokens."""
    a = hixl_rma.Engine(options={"JobToken": b"same-prefix\0" + b"A" * 20})
    b = hixl_rma.Engine(options={"JobToken": b"same-prefix\0" + b"B" * 20})
    c = hixl_rma.Engine(options={"JobToken": b"same-prefix\0" + b"A" * 20})
    try:
        with pytest.raises(HixlError, match="token"):
            b.connect(a.address, timeout_ms=3000)
        c.connect(a.address, timeout_ms=3000)
    finally:
        for e in (a, b, c):
            e.finalize()


@pytest.mark.parametrize("token", [None, "", "short-token", b"\0" * 15])
def test_no_network_listener_without_a_real_token(token):
    """Beyond loopback an engine listens only with a token of 16 bytes or more."""
    opts = {} if token is None else {"JobToken": token}
    with pytest.raises(HixlError, match="at least 16 bytes"):
        hixl_rma.Engine("0.0.0.0:0", options=opts)
    hixl_rma.Engine("127.0.0.1:0", options=opts).finalize()  # this host only: allowed
    hixl_rma.Engine("0.0.0.0:0", options={"JobToken": "x" * 16}).finalize()


# ---------------------------------------------------------- raw strangers

def _cases():
    rng = np.random.default_rng(7)
    return {
        "random_bytes": rng.bytes(4096),
        "random_prefix_then_hello": rng.bytes(7) + hello(),
        "huge_length_header": frame(HELLO, length=0xFFFFFFFF),
        "length_just_over_hello_limit": frame(HELLO, b"\0" * 4097),
        "wrong_magic": frame(HELLO, field(NONCE) + field(b"x"), magic=0x58524D48),
        "wrong_version": frame(HELLO, field(NONCE) + field(b"x"), version=VERSION + 1),
        "version_1_hello_with_token": frame(HELLO, field(TOKEN.encode()) + field(b"x"), version=1),
        "truncated_hello_payload": frame(HELLO, length=100) + b"\x05\0\0\0ab",
        "truncated_header": hello(b"x")[:10],
        "oversized_nonce_field": hello(b"T" * 300),
        "short_nonce": hello(b"T" * 31),
        "nonce_length_past_payload": frame(HELLO, field(b"abc", length=0x7FFFFFF0)),
        "name_missing": frame(HELLO, field(NONCE)),
        "proof_before_hello": frame(PROOF, field(b"p" * 32)),
        "garbage_proof": hello() + frame(PROOF, field(b"p" * 32)),
        "empty_proof": hello() + frame(PROOF, field(b"")),
        "table_request_instead_of_proof": hello() + frame(TABLE_REQ),
        "table_request_before_hello": frame(TABLE_REQ),
        "invalidate_ack_before_hello": frame(INVALIDATE_ACK, req_id=1),
        "hello_ok_from_client": frame(HELLO_OK, field(b"addr")),
        "bye_before_hello": frame(BYE),
        "garbage_proof_then_table_request": hello() + frame(PROOF, field(b"p" * 32)) + frame(TABLE_REQ),
        "empty": b"",
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_stranger_sending_garbage_learns_nothing(server, name):
    received, _ = stranger(server, CASES[name])
    assert_learned_nothing(server, received)
    if name.startswith(("garbage_proof", "empty_proof")):
        # a well-formed refusal after the challenge, nothing more
        assert [t for t, _ in frames(received)] == [CHALLENGE, REJECT]
    assert server.serves()


def test_stranger_stalling_mid_hello_is_dropped(server):
    """A partial HELLO and then silence: dropped after the handshake grace
    period (5 s), with nothing sent."""
    data = hello(b"q" * 32)
    received, closed_after = stranger(server, data[:30], half_close=False, read_timeout=15)
    assert_learned_nothing(server, received)
    assert 4.0 <= closed_after <= 12.0
    assert server.serves()


def test_stranger_trickling_garbage(server):
    received, _ = stranger(server, None, chunks=[b"\x48", b"\x58\x52", b"\x4d\x01\x00", b"\xff" * 40])
    assert_learned_nothing(server, received)
    assert server.serves()


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def test_stranger_flooding_is_cut_off(server):
    """Megabytes of garbage as fast as loopback goes: the engine must drop the
    connection after a bad header, not buffer the flood."""
    rss0 = _rss_bytes()
    s = socket.create_connection((server.host, server.port), timeout=5)
    chunk = os.urandom(1 << 20)
    sent = 0
    try:
        s.settimeout(5)
        while sent < (256 << 20):
            try:
                sent += s.send(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            except TimeoutError:
                pytest.fail("the engine stopped reading without closing the connection")
    finally:
        s.close()
    assert sent < (256 << 20), "the engine swallowed 256 MiB of garbage without closing"
    assert _rss_bytes() - rss0 < (64 << 20)
    assert server.untouched()
    assert server.serves()


# -------------------------------------------------------------------- fuzz

_raw = st.binary(min_size=0, max_size=2048)
_hello_frames = st.builds(
    lambda magic, version, type_, length, reserved, req_id, token, name, tlen, trailer: (
        HEADER.pack(magic, version, type_, length if length is not None else
                    len(field(token, tlen) + field(name) + trailer), reserved, req_id)
        + field(token, tlen) + field(name) + trailer),
    magic=st.sampled_from([MAGIC, MAGIC ^ 1, 0]) | st.integers(0, 2**32 - 1),
    version=st.sampled_from([VERSION, 0, 2, 0xFFFF]),
    type_=st.sampled_from([HELLO, HELLO_OK, REJECT, TABLE_REQ, INVALIDATE, BYE]) | st.integers(0, 0xFFFF),
    length=st.none() | st.integers(0, 2**32 - 1),
    reserved=st.integers(0, 2**32 - 1),
    req_id=st.integers(0, 2**64 - 1),
    token=st.binary(max_size=300) | st.sampled_from([TOKEN.encode()[:-1], b""]),
    name=st.binary(max_size=300),
    tlen=st.none() | st.integers(0, 2**32 - 1),
    trailer=st.binary(max_size=64),
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=_raw | _hello_frames | st.lists(_hello_frames, min_size=2, max_size=3).map(b"".join))
def test_fuzz_handshake(server, data):
    received, _ = stranger(server, data, read_timeout=8.0)
    assert_learned_nothing(server, received, client_nonce=None)


def test_engine_alive_after_fuzz(server):
    assert server.serves()
    # and a brand-new legitimate peer can still connect and transfer
    fresh = hixl_rma.Engine(options={"JobToken": TOKEN})
    try:
        fresh.connect(server.engine.address)
        got = np.zeros(SIZE, np.uint8)
        fresh.register_mem(got)
        fresh.transfer_sync(server.engine.address, READ, [(got.ctypes.data, server.handle.addr, SIZE)])
        assert np.array_equal(got, server.expect)
    finally:
        fresh.finalize()
    # no stranger is left among the accepted (authenticated) connections
    assert wait_until(lambda: server.engine.stats()["accepted"] == 1)


def test_connect_gets_the_engine_it_names_not_another_of_the_job():
    """Issue 23.9: two engines of one job (same token) answer at the
    addresses a rank advertised; the connector names the engine it wants
    (its EngineId, the rank) and is refused by the other one -- told nothing,
    connected to nothing -- then connects to the right one, as the runtime
    tries a rank's addresses in turn."""
    def mk(i):
        return hixl_rma.Engine(options={"JobToken": TOKEN, "EngineId": f"rank {i}"})

    a, b, c = mk(0), mk(1), mk(2)
    try:
        with pytest.raises(HixlError, match="is 'rank 1' of this job, not 'rank 2'") as exc:
            a.connect(b.address, 3000, expect="rank 2")
        assert exc.value.status == hixl_rma.ground.errors.FAILED
        assert a.stats()["endpoints"] == 0
        assert wait_until(lambda: b.stats()["accepted"] == 0)
        for addr in (b.address, c.address):  # the runtime's loop over rank 2's candidates
            try:
                a.connect(addr, 3000, expect="rank 2")
                break
            except HixlError:
                continue
        assert a.stats()["endpoints"] == 1
        a.peer_stats(c.address)  # connected there, and only there
        with pytest.raises(NotConnectedError):
            a.peer_stats(b.address)
        a.connect(b.address, 3000, expect=b"rank 1")  # the refusal left nothing behind
        assert a.stats()["endpoints"] == 2
    finally:
        for e in (a, b, c):
            e.finalize()


def test_the_server_proof_covers_its_engine_id():
    """The challenge names the server's id, and its proof is over that id: a
    proof made for another id does not check."""
    e = hixl_rma.Engine(options={"JobToken": TOKEN, "EngineId": "rank 7"})
    try:
        host, port = e.address.rsplit(":", 1)
        s = socket.create_connection((host, int(port)), timeout=8)
        try:
            s.sendall(hello(NONCE))
            type_, challenge = read_frame(s)
        finally:
            s.close()
        server_nonce, server_id, server_proof = fields(challenge)
        assert type_ == CHALLENGE and server_id == b"rank 7"
        assert server_proof == proof(TOKEN.encode(), b"server", b"rank 7", NONCE, server_nonce, int(port))
        assert server_proof != proof(TOKEN.encode(), b"server", b"rank 6", NONCE, server_nonce, int(port))
    finally:
        e.finalize()


def test_engine_id_is_checked():
    with pytest.raises(hixl_rma.ground.errors.ParamError, match="EngineId"):
        hixl_rma.Engine(options={"JobToken": TOKEN, "EngineId": "x" * 300})


EXPOSED = textwrap.dedent(r'''
    import json, sys
''') + procutil.LISTENERS + textwrap.dedent(r'''
    import hixl_rma
    from mpi4py import MPI  # (MPI is initialized at its first use: its listeners come first)
    before = set(listeners())  # MPI's own, if it made any: not this engine's
    e = hixl_rma.Engine("127.0.0.1:0")
    print(json.dumps(sorted(set(listeners()) - before)))
    e.finalize()
''')


@pytest.mark.parametrize("tls", [None, "tcp"])
def test_a_loopback_engine_listens_on_loopback_only(tmp_path, tls):
    """Issue 23.6: an engine asked to listen on 127.0.0.1 (every rank on this
    host) opens UCX's own tcp listeners on loopback too, not on every
    interface: its data plane is reachable from this host only."""
    import json
    import subprocess
    import sys
    script = tmp_path / "exposed.py"
    script.write_text(EXPOSED)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UCX_", "HIXL_RMA_"))}
    if tls:
        env["UCX_TLS"] = tls
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    opened = json.loads(p.stdout.splitlines()[-1])
    assert opened, "the engine listens at least on its control port"
    assert all(addr in ("127.0.0.1", "::1") for addr, _ in opened), opened
