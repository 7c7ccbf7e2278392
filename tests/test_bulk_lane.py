"""The bulk lane: where a peer's bytes go by UCX (another host; here one
process with cma off, so every block goes through UCX), bulk-priority
transfers go over a second connection of their own, so that a high or
normal flush does not wait for the bulk bytes posted before it (UCX's
endpoint flush covers everything posted on the endpoint). What a full
flush, a notify and a teardown promise still holds with the lane in use.
(Across simulated hosts: tests/test_cross_host.py; the latency it buys:
``python -m hixl_rma.bench prio``.)"""
import itertools
import time

import numpy as np
import pytest

import hixl_rma
from hixl_rma import READ, WRITE, _engine
from hixl_rma.ground.errors import NotConnectedError, PeerFailure

from support import racing

pytestmark = pytest.mark.timeout(60)

MiB = 1 << 20
HIGH, NORMAL, BULK = 0, 1, 2


def _ptr(a):
    return a.ctypes.data


@pytest.fixture
def pair():
    """(a, b, big, small): a (cma off) connected to b; b's two zeroed targets, registered there."""
    a, b = hixl_rma.Engine(options={"Cma": "0"}), hixl_rma.Engine()
    big, small = np.zeros(16 * MiB, np.uint8), np.zeros(64 << 10, np.uint8)
    b.register_mem(big)
    b.register_mem(small)
    a.connect(b.address)
    try:
        yield a, b, big, small
    finally:
        a.finalize()
        b.finalize()


def _post(a, b, src, dst, priority):
    a.register_mem(src)
    remote = b if isinstance(b, str) else b.address
    _engine.post_at(a, remote, WRITE, np.array([[_ptr(src), _ptr(dst), src.nbytes]], np.uint64), priority)


def _until(pred, seconds=20):
    deadline = time.monotonic() + seconds
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.005)
    return pred()


def test_bulk_goes_over_its_own_lane_and_each_flush_completes_its_priority(pair):
    a, b, big, small = pair
    stream = (np.arange(big.size) % 251).astype(np.uint8)
    assert a.peer_stats(b.address)["bulk_lane"] is False  # made by the first bulk transfer
    assert b.stats()["accepted"] == 1
    _post(a, b, stream, big, BULK)
    assert a.peer_stats(b.address)["bulk_lane"] is True
    assert b.stats()["accepted"] == 2  # the lane is a connection of its own, authenticated like the first
    ping = np.full(small.size, 5, np.uint8)
    _post(a, b, ping, small, HIGH)
    _engine.flush_at(a, b.address, HIGH)  # its own endpoint's flush: the ping, not the stream
    assert np.all(small == 5)
    _engine.flush_at(a, b.address, BULK)  # bulk and everything more urgent
    assert np.array_equal(big, stream)
    # the peer's counters take in what went over its lane
    assert a.peer_stats(b.address)["bytes_written"] == big.nbytes + small.nbytes


def test_a_flush_by_name_and_a_notify_follow_the_lanes_bytes(pair):
    a, b, big, _small = pair
    for k, make_complete in enumerate(["flush", "notify"]):
        stream = np.full(big.size, k + 1, np.uint8)
        _post(a, b, stream, big, BULK)
        if make_complete == "flush":
            a.flush(b.address)  # what every flush without a priority is: all of it
            assert np.all(big == k + 1), make_complete
        else:
            a.send_notify(b.address, "done")  # a notify follows every transfer before it
            names = []
            assert _until(lambda names=names: names.extend(n for n, _ in b.get_notifies()) or names), "no notify"
            assert np.all(big == k + 1), make_complete  # the data was there before the notify


@pytest.mark.parametrize("in_flight", [256 << 10, 1 * MiB, 0])
def test_the_lane_is_paced_and_its_bytes_arrive(in_flight):
    """Option BulkInFlight bounds what the lane has posted and not yet
    completed (the rest queued, posted as its flushes complete): the most
    it ever had in flight is that bound (0: not paced, nothing counted);
    WRITE then READ of 16 MiB in blocks of several sizes arrive whole,
    and a high flush in between completes while bulk is queued."""
    a, b = hixl_rma.Engine(options={"Cma": "0", "BulkInFlight": str(in_flight)}), hixl_rma.Engine()
    try:
        big, small = np.zeros(16 * MiB, np.uint8), np.zeros(64 << 10, np.uint8)
        b.register_mem(big)
        b.register_mem(small)
        a.connect(b.address)
        stream = (np.arange(big.size) % 253).astype(np.uint8)
        a.register_mem(stream)
        cuts = [0, 1, 4096, 300_000, 5 * MiB + 7, big.size]  # one block of each size, one past a piece
        blocks = np.array([[_ptr(stream) + lo, _ptr(big) + lo, hi - lo] for lo, hi in itertools.pairwise(cuts)],
                          np.uint64)
        _engine.post_at(a, b.address, WRITE, blocks, BULK)
        ping = np.full(small.size, 5, np.uint8)
        _post(a, b, ping, small, HIGH)
        _engine.flush_at(a, b.address, HIGH)
        assert np.all(small == 5)
        _engine.flush_at(a, b.address, BULK)
        assert np.array_equal(big, stream)
        back = np.zeros_like(stream)
        a.register_mem(back)
        _engine.post_at(a, b.address, READ, np.array([[_ptr(back), _ptr(big), big.nbytes]], np.uint64), BULK)
        _engine.flush_at(a, b.address, BULK)
        assert np.array_equal(back, stream)
        peak = a.peer_stats(b.address)["bulk_peak_bytes"]
        if in_flight:
            assert 0 < peak <= in_flight, (peak, in_flight)
        else:
            assert peak == 0
    finally:
        a.finalize()
        b.finalize()


def test_a_same_node_peer_takes_no_lane():
    """With cma (the default) a same-node peer's bytes are memcpy or cma,
    which the copy thread already orders by priority: no second connection."""
    a, b = hixl_rma.Engine(), hixl_rma.Engine()
    try:
        dst = np.zeros(4 * MiB, np.uint8)
        b.register_mem(dst)
        a.connect(b.address)
        _post(a, b, np.full(dst.size, 3, np.uint8), dst, BULK)
        _engine.flush_at(a, b.address, BULK)
        assert np.all(dst == 3)
        assert a.peer_stats(b.address)["bulk_lane"] is False
        assert b.stats()["accepted"] == 1
    finally:
        a.finalize()
        b.finalize()


def test_disconnect_takes_the_lane_down_and_a_reconnect_makes_a_new_one(pair):
    a, b, big, _small = pair
    _post(a, b, np.full(big.size, 1, np.uint8), big, BULK)
    assert b.stats()["accepted"] == 2
    a.disconnect(b.address)  # completes the lane's bulk bytes first, as it does the peer's own
    assert np.all(big == 1)
    assert _until(lambda: b.stats()["accepted"] == 0), b.stats()
    a.connect(b.address)
    assert a.peer_stats(b.address)["bulk_lane"] is False
    _post(a, b, np.full(big.size, 2, np.uint8), big, BULK)
    _engine.flush_at(a, b.address, BULK)
    assert np.all(big == 2)
    assert a.peer_stats(b.address)["bulk_lane"] is True and b.stats()["accepted"] == 2


def test_a_finalized_peer_fails_the_lanes_transfers_naming_it(pair):
    a, b, big, small = pair
    _post(a, b, np.full(big.size, 1, np.uint8), big, BULK)
    _engine.flush_at(a, b.address, BULK)
    address = b.address
    b.finalize()  # says BYE on both connections
    with pytest.raises(PeerFailure) as err:
        assert _until(lambda: a.peer_dead(address)), "the peer's end was not noticed"
        _post(a, address, np.full(small.size, 2, np.uint8), small, BULK)
        _engine.flush_at(a, address, BULK, timeout_ms=5000)
    assert address in str(err.value)


@pytest.mark.parametrize("in_flight", ["", "262144"], ids=["default", "paced-256k"])
def test_disconnect_under_running_bulk_transfers_is_a_clean_error(in_flight):
    """Threads post bulk transfers (over the lane, fetching the peer's table
    again for each new region) and flush at each priority while the peer is
    disconnected: every call ends in success or a clean error, never a crash
    or a hang; the bytes of every flush that succeeded are there; after it no
    connection of a's is left at b, and a reconnect makes a lane again."""
    a, b = hixl_rma.Engine(options={"Cma": "0", "BulkInFlight": in_flight}), hixl_rma.Engine()
    src = np.full(1 << 20, 9, np.uint8)
    a.register_mem(src)
    outcomes = []

    def bulk(stop):
        while not stop.is_set():
            dst = np.zeros(src.size, np.uint8)
            h = b.register_mem(dst)  # not in the lane's cached table: fetched again

            def one(dst=dst):
                _engine.post_at(a, b.address, WRITE, np.array([[_ptr(src), _ptr(dst), src.size]], np.uint64), BULK)
                _engine.flush_at(a, b.address, BULK, timeout_ms=5000)
                assert np.all(dst == 9), "wrong bytes"
            try:
                racing.attempt(outcomes, one)
            finally:
                b.deregister_mem(h)

    def flushes(stop):
        while not stop.is_set():
            for p in (HIGH, NORMAL, BULK):
                racing.attempt(outcomes, lambda p=p: _engine.flush_at(a, b.address, p, timeout_ms=5000))

    try:
        for _ in range(6):
            a.connect(b.address)
            racing.disconnect_under(a, b.address, (bulk, bulk, flushes), settle=0.05)
            with pytest.raises(NotConnectedError):
                _engine.flush_at(a, b.address, BULK)
            assert _until(lambda: b.stats()["accepted"] == 0), b.stats()  # the lane went with the peer
        assert set(outcomes) <= {"ok", "NotConnectedError", "PeerFailure"}, set(outcomes)
        assert "ok" in outcomes
        a.connect(b.address)
        dst = np.zeros(src.size, np.uint8)
        b.register_mem(dst)
        _engine.post_at(a, b.address, WRITE, np.array([[_ptr(src), _ptr(dst), src.size]], np.uint64), BULK)
        _engine.flush_at(a, b.address, BULK)
        assert np.all(dst == 9) and a.peer_stats(b.address)["bulk_lane"] is True
    finally:
        a.finalize()
        b.finalize()
