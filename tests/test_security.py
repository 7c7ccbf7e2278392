"""The engine's front door: the job token, and strangers speaking garbage.

A serving engine holds a registered buffer filled with a recognizable
pattern. Engines with the wrong token or none, and raw TCP clients sending
malformed frames, must be refused: the connection is closed, they receive at
most a REJECT frame header and never a byte of the memory table or of the
memory, nothing is written, and the engine keeps serving its real peer.

Frame format (src/engine/wire.h), little-endian: u32 magic 0x4d525848
("HXRM"), u16 version 1, u16 type, u32 payload length, u32 reserved, u64
request id; a HELLO payload is u32-length-prefixed token, then client name.
"""

import os
import resource
import socket
import struct
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hixl_rma
from hixl_rma import READ, WRITE
from hixl_rma.errors import HixlError, NotConnectedError

pytestmark = pytest.mark.timeout(120)

MAGIC, VERSION = 0x4D525848, 1
HELLO, HELLO_OK, REJECT, TABLE_REQ, TABLE_RESP, INVALIDATE, INVALIDATE_ACK, BYE = range(1, 9)
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


def hello(token=b"", name=b"stranger:1"):
    return frame(HELLO, field(token) + field(name))


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
        except (BrokenPipeError, ConnectionResetError):
            pass
        s.settimeout(read_timeout)
        while True:
            try:
                got = s.recv(65536)
            except ConnectionResetError:
                break
            except socket.timeout:
                pytest.fail(f"the engine kept a stranger's connection open for {read_timeout} s")
            if not got:
                break
            received += got
    finally:
        s.close()
    return received, time.monotonic() - t0


def assert_learned_nothing(server, received):
    # at most the header of a REJECT frame, never a table or memory
    assert received in (b"", REJECT_FRAME), received[:64]
    for k in range(0, len(PATTERN) - 4):
        assert PATTERN[k:k + 4] not in received
    assert server.untouched()


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


# ---------------------------------------------------------- raw strangers

def _cases():
    rng = np.random.default_rng(7)
    return {
        "random_bytes": rng.bytes(4096),
        "random_prefix_then_hello": rng.bytes(7) + hello(TOKEN.encode()),
        "huge_length_header": frame(HELLO, length=0xFFFFFFFF),
        "length_just_over_hello_limit": frame(HELLO, b"\0" * 4097),
        "wrong_magic": frame(HELLO, field(TOKEN.encode()) + field(b"x"), magic=0x58524D48),
        "wrong_version": frame(HELLO, field(TOKEN.encode()) + field(b"x"), version=2),
        "truncated_hello_payload": frame(HELLO, length=100) + b"\x05\0\0\0ab",
        "truncated_header": hello(b"x")[:10],
        "oversized_token_field": hello(b"T" * 300),
        "token_length_past_payload": frame(HELLO, field(b"abc", length=0x7FFFFFF0)),
        "name_missing": frame(HELLO, field(TOKEN.encode())),
        "wrong_token": hello(b"z" * 32),
        "empty_token": hello(b""),
        "table_request_before_hello": frame(TABLE_REQ),
        "invalidate_ack_before_hello": frame(INVALIDATE_ACK, req_id=1),
        "hello_ok_from_client": frame(HELLO_OK, field(b"addr")),
        "bye_before_hello": frame(BYE),
        "wrong_token_then_table_request": hello(b"z" * 32) + frame(TABLE_REQ),
        "empty": b"",
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_stranger_sending_garbage_learns_nothing(server, name):
    received, _ = stranger(server, CASES[name])
    assert_learned_nothing(server, received)
    if name.startswith("wrong_token") or name == "empty_token":
        assert received == REJECT_FRAME  # a well-formed refusal, nothing more
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
            except socket.timeout:
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
    assert_learned_nothing(server, received)


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
