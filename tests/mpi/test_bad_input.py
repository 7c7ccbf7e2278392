"""A catalogue of misuse across both API faces and the engine.

Every case names the exact exception class and a message that names the
offending value; after it, a barrier, every rank checks that its target
memory is unchanged, and the window (and the HIXL-style handle, and the
engine pair) still moves data. The catalogue is the table CASES below: one
small function per case, registered with ``@case(face, class, regex)``.

Plus: use after Finalize (in a subprocess), a window on a Split
sub-communicator targeted outside it, and a hypothesis property test that
throws random argument combinations at Put/Get/Accumulate inside a fence
epoch: each call either succeeds and the target matches a numpy model, or
raises a HixlError subclass and nothing moved; never anything else.
"""
import contextlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, event, given, seed, settings
from hypothesis import strategies as st
from mpi4py import MPI
from mpi4py.util import dtlib

import hixl_rma
from hixl_rma import (
    AccessError,
    BoundsError,
    DatatypeError,
    EpochError,
    HixlError,
    NotConnectedError,
    ParamError,
    UnsupportedError,
    Win,
)
from hixl_rma.ground.errors import kind

from support.mpiutil import barrier

# "thread": a rank stuck in a collective is stopped rather than left out of step.
pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(120, method="thread")]

N = 16          # int64 elements per window, disp_unit 8 -> 128 bytes
HN = 128        # bytes of the HIXL-style region
W = r"\S+"      # a window label


def pattern_win(rank):
    return np.arange(N, dtype=np.int64) * 3 + 1000 * (rank + 1)


def pattern_hixl(rank):
    return ((np.arange(HN) * 7 + 31 * (rank + 1)) % 251).astype(np.uint8)


def readonly(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


class Ctx:
    """Everything a case may use; ``bad(fn)`` runs the misuse."""

    def __init__(self, comm):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.right, self.left = (self.rank + 1) % self.size, (self.rank - 1) % self.size
        self.buf = np.zeros(N, np.int64)
        self.win = Win.Create(self.buf, disp_unit=8, comm=comm)
        self.hbuf = np.zeros(HN, np.uint8)
        world = hixl_rma.GetWorldCommunicator()
        self.hcomm = world
        self.handle = hixl_rma.RegisterMemory(self.hbuf, hixl_rma.MEMORY_HOST, hixl_rma.ACCESS_READ_WRITE, world)
        self.robuf = np.zeros(HN, np.uint8)
        self.ro = hixl_rma.RegisterMemory(self.robuf, hixl_rma.MEMORY_HOST, hixl_rma.ACCESS_READ_ONLY, world)
        self.wobuf = np.zeros(HN, np.uint8)
        self.wo = hixl_rma.RegisterMemory(self.wobuf, hixl_rma.MEMORY_HOST, hixl_rma.ACCESS_WRITE_ONLY, world)
        # an engine pair of this rank's own: a -> b
        self.ea = hixl_rma.Engine()
        self.eb = hixl_rma.Engine()
        self.ea.connect(self.eb.address)
        self.ebuf = np.zeros(256, np.uint8)
        self.eh = self.eb.register_mem(self.ebuf)
        self.esrc = np.arange(256, dtype=np.uint8)
        self.ea.register_mem(self.esrc)
        self.err = None

    def reset(self):
        self.buf[:] = pattern_win(self.rank)
        self.hbuf[:] = pattern_hixl(self.rank)
        self.robuf[:] = pattern_hixl(self.rank)
        self.wobuf[:] = pattern_hixl(self.rank)
        self.ebuf[:] = 0xA5

    def unchanged(self):
        bad = []
        if not np.array_equal(self.buf, pattern_win(self.rank)):
            bad.append(f"window memory changed: {self.buf.tolist()}")
        for name, b in (("hixl", self.hbuf), ("read-only", self.robuf), ("write-only", self.wobuf)):
            if not np.array_equal(b, pattern_hixl(self.rank)):
                bad.append(f"{name} region changed")
        if not (self.ebuf == 0xA5).all():
            bad.append("engine target memory changed")
        return bad

    def bad(self, fn):
        """Run the misuse; the harness checks what it raised."""
        try:
            fn()
        except BaseException as exc:  # judged by the harness
            self.err = exc
            return
        self.err = None

    @contextlib.contextmanager
    def fence(self):
        self.win.Fence()
        try:
            yield
        finally:
            self.win.Fence(hixl_rma.MODE_NOSUCCEED)

    def still_works(self, salt):
        """Collective: a fence Put on the window, a HIXL-style Put, an engine transfer."""
        problems = []
        val = np.array([salt * 100 + self.rank], np.int64)
        self.win.Fence()
        self.win.Put(val, self.right, N - 1)
        self.win.Fence(hixl_rma.MODE_NOSUCCEED)
        if self.buf[N - 1] != salt * 100 + self.left:
            problems.append(f"window broken: got {self.buf[N - 1]}")
        hixl_rma.Put(np.full(4, salt % 250, np.uint8), self.right, HN - 4, self.handle, self.hcomm)
        hixl_rma.Fence(self.hcomm)
        if not (self.hbuf[-4:] == salt % 250).all():
            problems.append(f"HIXL-style handle broken: got {self.hbuf[-4:].tolist()}")
        self.ea.transfer_sync(self.eb.address, hixl_rma.WRITE, [(self.esrc.ctypes.data, self.eh.addr, 16)])
        if not np.array_equal(self.ebuf[:16], self.esrc[:16]):
            problems.append("engine pair broken")
        return problems

    def close(self):
        self.win.Free()
        for h in (self.handle, self.ro, self.wo):
            hixl_rma.DeregisterMemory(h)
        self.ea.finalize()
        self.eb.finalize()


CASES = {}


def case(face, exc, match):
    """Register a misuse case: face ('win', 'hixl', 'engine'), the exact
    exception class, and a regex (a function of ctx) the message must match."""
    def deco(fn):
        CASES[f"{face}:{fn.__name__}"] = (fn, exc, match)
        return fn
    return deco


ones = lambda n=2: np.ones(n, np.int64)  # noqa: E731

# ------------------------------------------------------------ bounds, counts


@case("win", BoundsError, lambda c: rf"Put to rank {c.right} of window {W}.* target offset 112 length 32 "
                                    rf"bytes exceeds the window size 128 bytes")
def put_past_end(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(4), c.right, 14))


@case("win", BoundsError, lambda c: rf"Get to rank {c.right} of window {W}.* target offset 128 length 8 bytes")
def get_at_end(c):
    out = np.full(1, -1, np.int64)
    with c.fence():
        c.bad(lambda: c.win.Get(out, c.right, N))
    assert out[0] == -1


@case("win", BoundsError, lambda c: r"target displacement -1 is negative")
def negative_displacement(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(), c.right, -1))


@case("win", BoundsError, lambda c: r"target displacement 2305843009213693952 is out of range")
def huge_displacement(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(), c.right, 2 ** 61))


@case("win", BoundsError, lambda c: r"too small for count 5 of MPI.INT64_T \(needs 40 bytes\)")
def origin_count_larger_than_origin(c):
    with c.fence():
        c.bad(lambda: c.win.Put([ones(2), 5, MPI.INT64_T], c.right, 0))


@case("win", BoundsError, lambda c: r"origin count -1 is negative")
def negative_origin_count(c):
    with c.fence():
        c.bad(lambda: c.win.Put([ones(2), -1, MPI.INT64_T], c.right, 0))


@case("win", BoundsError, lambda c: r"target count -3 is negative")
def negative_target_count(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(3), c.right, (0, -3, MPI.INT64_T)))


@case("win", BoundsError, lambda c: r"target describes 16 bytes, fewer than the 24 bytes the origin sends")
def undersized_target_count(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(3), c.right, (0, 2, np.int64)))


@case("win", BoundsError, lambda c: r"target offset 96 length 64 bytes exceeds the window size 128")
def accumulate_past_end(c):
    with c.fence():
        c.bad(lambda: c.win.Accumulate(ones(8), c.right, 12, op=hixl_rma.SUM))


@case("win", BoundsError, lambda c: r"block 1 at target offset 120 length 16 exceeds the window size 128")
def put_batch_block_past_end(c):
    with c.fence():
        c.bad(lambda: c.win.Put_batch([ones(1), ones(2)], c.right, [0, 15]))


# ---------------------------------------------------------------- types


@case("win", ParamError, lambda c: rf"rank {c.size} is out of range for a communicator of {c.size} ranks")
def rank_out_of_range(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(), c.size, 0))


@case("win", ParamError, lambda c: r"rank -7 is out of range")
def negative_rank(c):
    with c.fence():
        c.bad(lambda: c.win.Get(np.zeros(2, np.int64), -7, 0))


@case("win", ParamError, lambda c: r"rank must be an int, got str")
def rank_of_wrong_type(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(), "1", 0))


@case("win", ParamError, lambda c: r"origin must be a buffer .*not object")
def origin_not_a_buffer(c):
    with c.fence():
        c.bad(lambda: c.win.Put(object(), c.right, 0))


@case("win", ParamError, lambda c: r"origin must be a buffer .*not int")
def origin_python_list(c):
    with c.fence():
        c.bad(lambda: c.win.Put([1, 2, 3], c.right, 0))


@case("win", ParamError, lambda c: r"origin buffer is read-only")
def get_into_readonly_array(c):
    target = readonly(np.zeros(2, np.int64))
    with c.fence():
        c.bad(lambda: c.win.Get(target, c.right, 0))


@case("win", ParamError, lambda c: r"origin buffer is read-only")
def get_into_bytes(c):
    with c.fence():
        c.bad(lambda: c.win.Get(b"\0" * 16, c.right, 0))


@case("win", ParamError, lambda c: r"result buffer is read-only")
def fetch_into_readonly_result(c):
    with c.fence():
        c.bad(lambda: c.win.Fetch_and_op(ones(1), readonly(np.zeros(1, np.int64)), c.right, 0))


@case("win", ParamError, lambda c: r"target must be None, a displacement, or \(disp, count, datatype\), not str")
def target_of_wrong_type(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(), c.right, "0"))


@case("win", ParamError, lambda c: r"target displacement must be an integer, not float")
def float_displacement(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(), c.right, (1.5, 2)))


@case("win", DatatypeError, lambda c: r"'bogus' is not a datatype")
def target_datatype_not_a_datatype(c):
    with c.fence():
        c.bad(lambda: c.win.Put(ones(), c.right, (0, 2, "bogus")))


@case("win", DatatypeError, lambda c: r"Python objects")
def origin_of_python_objects(c):
    with c.fence():
        c.bad(lambda: c.win.Put(np.array([object(), object()]), c.right, 0))


@case("win", ParamError, lambda c: r"target_disps must be 2 integer displacements")
def put_batch_disps_mismatch(c):
    with c.fence():
        c.bad(lambda: c.win.Put_batch([ones(1), ones(1)], c.right, [0, 1, 2]))


@case("win", ParamError, lambda c: r"tag must be a 64-bit int, got 18446744073709551616")
def notify_tag_too_big(c):
    with c.fence():
        c.bad(lambda: c.win.Put_notify(ones(1), c.right, 0, tag=2 ** 64))


# ------------------------------------------------------------ ops x dtypes


@case("win", DatatypeError, lambda c: r"op BAND is not defined for datatype float64")
def bitwise_op_on_floats(c):
    with c.fence():
        c.bad(lambda: c.win.Accumulate(np.ones(2), c.right, (0, 2, np.float64), op=hixl_rma.BAND))


@case("win", DatatypeError, lambda c: r"op MAX is not defined for datatype complex128")
def max_on_complex(c):
    with c.fence():
        c.bad(lambda: c.win.Accumulate(np.ones(2, np.complex128), c.right, 0, op=hixl_rma.MAX))


@case("win", DatatypeError, lambda c: r"op SUM is not defined for datatype raw bytes|op SUM is not defined")
def sum_on_structured(c):
    rec = np.zeros(2, dtype=[("a", np.int32), ("b", np.float32)])
    with c.fence():
        c.bad(lambda: c.win.Accumulate(rec, c.right, 0, op=hixl_rma.SUM))


@case("win", ParamError, lambda c: r"op must be a hixl_rma op \(SUM, MAX, ...\) or an mpi4py MPI.Op, got str")
def op_of_wrong_type(c):
    with c.fence():
        c.bad(lambda: c.win.Accumulate(ones(), c.right, 0, op="SUM"))


@case("win", UnsupportedError, lambda c: r"only predefined ops are supported")
def user_defined_op(c):
    op = MPI.Op.Create(lambda a, b, t: None, commute=True)
    try:
        with c.fence():
            c.bad(lambda: c.win.Accumulate(ones(), c.right, 0, op=op))
    finally:
        op.Free()


@case("win", DatatypeError, lambda c: r"Fetch_and_op: origin: expecting a single element, got 0")
def fetch_and_op_empty_origin(c):
    with c.fence():
        c.bad(lambda: c.win.Fetch_and_op(np.zeros(0, np.int64), np.zeros(1, np.int64), c.right, 0))


@case("win", DatatypeError, lambda c: r"result buffer has 8 bytes but origin has 16 bytes")
def get_accumulate_result_too_small(c):
    with c.fence():
        c.bad(lambda: c.win.Get_accumulate(ones(2), np.zeros(1, np.int64), c.right, 0))


@case("win", DatatypeError, lambda c: r"target type float64 differs from origin type int64")
def accumulate_target_type_differs(c):
    with c.fence():
        c.bad(lambda: c.win.Accumulate(ones(2), c.right, (0, 2, np.float64)))


@case("win", DatatypeError, lambda c: r"mismatch in origin and compare datatypes \(int64 and float64\)")
def compare_and_swap_type_mismatch(c):
    with c.fence():
        c.bad(lambda: c.win.Compare_and_swap(ones(1), np.ones(1), np.zeros(1, np.int64), c.right, 0))


# ------------------------------------------------------------------ epochs


@case("win", EpochError, lambda c: rf"Put to rank {c.right} of window {W}.*no access epoch is open")
def put_outside_any_epoch(c):
    c.bad(lambda: c.win.Put(ones(), c.right, 0))


@case("win", EpochError, lambda c: rf"Unlock: rank {c.right} of window {W} is not locked by this rank")
def unlock_without_lock(c):
    c.bad(lambda: c.win.Unlock(c.right))


@case("win", EpochError, lambda c: rf"Lock: rank {c.right} of window {W} is already locked")
def lock_twice(c):
    c.win.Lock(c.right, hixl_rma.LOCK_SHARED)
    try:
        c.bad(lambda: c.win.Lock(c.right, hixl_rma.LOCK_SHARED))
    finally:
        c.win.Unlock(c.right)


@case("win", EpochError, lambda c: rf"Lock: window {W} is inside Lock_all")
def lock_inside_lock_all(c):
    c.win.Lock_all()
    try:
        c.bad(lambda: c.win.Lock(c.right))
    finally:
        c.win.Unlock_all()


@case("win", EpochError, lambda c: rf"Lock_all on window {W}: a passive-target epoch is already open")
def lock_all_twice(c):
    c.win.Lock_all()
    try:
        c.bad(lambda: c.win.Lock_all())
    finally:
        c.win.Unlock_all()


@case("win", EpochError, lambda c: rf"Unlock_all on window {W} without Lock_all")
def unlock_all_without_lock_all(c):
    c.bad(lambda: c.win.Unlock_all())


@case("win", EpochError, lambda c: rf"Flush: no passive-target epoch to rank {c.right}")
def flush_outside_passive_epoch(c):
    with c.fence():
        c.bad(lambda: c.win.Flush(c.right))


@case("win", EpochError, lambda c: rf"Fence on window {W}: a passive-target epoch is open \(ranks \[{c.right}\]\)")
def fence_inside_lock(c):
    c.win.Lock(c.right, hixl_rma.LOCK_SHARED)
    try:
        c.bad(lambda: c.win.Fence())
    finally:
        c.win.Unlock(c.right)


@case("win", EpochError, lambda c: rf"Lock on window {W}: a fence epoch with RMA is open")
def lock_inside_fence_epoch_with_rma(c):
    c.win.Fence()
    c.win.Put(pattern_win(c.right)[:1], c.right, 0)  # rewrites what is there
    c.bad(lambda: c.win.Lock(c.right))
    c.win.Fence(hixl_rma.MODE_NOSUCCEED)


@case("win", EpochError, lambda c: rf"Complete on window {W} without Start")
def complete_without_start(c):
    c.bad(lambda: c.win.Complete())


@case("win", EpochError, lambda c: rf"Wait on window {W} without Post")
def wait_without_post(c):
    c.bad(lambda: c.win.Wait())


@case("win", EpochError, lambda c: rf"Post on window {W}: an exposure epoch is already open")
def post_twice(c):
    c.win.Post([c.left])
    c.win.Start([c.right])
    try:
        c.bad(lambda: c.win.Post([c.left]))
    finally:
        c.win.Complete()
        c.win.Wait()


@case("win", EpochError, lambda c: rf"Put to rank {c.rank} of window {W}.*no access epoch is open to that rank")
def put_outside_start_group(c):
    c.win.Post([c.left])
    c.win.Start([c.right])
    try:
        c.bad(lambda: c.win.Put(ones(), c.rank, 0))  # myself: not in the access group
    finally:
        c.win.Complete()
        c.win.Wait()


@case("win", EpochError, lambda c: rf"Free on window {W}: a passive-target epoch is open")
def free_inside_lock(c):
    c.win.Lock(c.right, hixl_rma.LOCK_SHARED)
    try:
        c.bad(lambda: c.win.Free())
    finally:
        c.win.Unlock(c.right)


@case("win", ParamError, lambda c: r"Lock: lock_type must be LOCK_EXCLUSIVE or LOCK_SHARED, got 99")
def lock_with_bad_lock_type(c):
    c.bad(lambda: c.win.Lock(c.right, 99))


@case("win", ParamError, lambda c: r"Fence: invalid assertion 1048576")
def fence_with_bad_assertion(c):
    c.bad(lambda: c.win.Fence(1 << 20))


# --------------------------------------------------------- window objects


@case("win", ParamError, lambda c: r"disp_unit must be a positive int, got 0")
def create_with_zero_disp_unit(c):
    c.bad(lambda: Win.Create(np.zeros(4, np.int64), disp_unit=0, comm=c.comm))


@case("win", ParamError, lambda c: r"window memory buffer is read-only|window memory.*read-only")
def create_over_readonly_memory(c):
    c.bad(lambda: Win.Create(readonly(np.zeros(4, np.int64)), disp_unit=8, comm=c.comm))


@case("win", ParamError, lambda c: r"window size must be a non-negative int, got -8")
def allocate_negative_size(c):
    c.bad(lambda: Win.Allocate(-8, comm=c.comm))


@case("win", ParamError, lambda c: rf"Shared_query on window {W}: rank {c.size} is out of range")
def shared_query_of_a_rank_out_of_range(c):
    c.bad(lambda: c.win.Shared_query(c.size))


@case("win", ParamError, lambda c: r"Attach needs a window made by Create_dynamic")
def attach_to_created_window(c):
    c.bad(lambda: c.win.Attach(np.zeros(4, np.int64)))


@case("win", ParamError, lambda c: rf"Put: window {W} has been freed")
def put_after_free(c):
    w = Win.Create(np.zeros(4, np.int64), disp_unit=8, comm=c.comm)
    w.Free()
    c.bad(lambda: w.Put(ones(), c.right, 0))


# ------------------------------------------------------ the HIXL-style face


@case("hixl", BoundsError, lambda c: rf"to rank {c.right} of window {W}.* target offset 124 length 8 bytes "
                                     rf"exceeds the window size 128 bytes")
def hixl_put_past_end(c):
    c.bad(lambda: hixl_rma.Put(np.ones(8, np.uint8), c.right, 124, c.handle, c.hcomm))


@case("hixl", BoundsError, lambda c: r"target displacement -8 is negative")
def hixl_get_negative_offset(c):
    c.bad(lambda: hixl_rma.Get(np.zeros(8, np.uint8), c.right, -8, c.handle, c.hcomm))


@case("hixl", ParamError, lambda c: r"Put: target_offset must be an int number of bytes, got 1.5")
def hixl_float_offset(c):
    c.bad(lambda: hixl_rma.Put(np.ones(8, np.uint8), c.right, 1.5, c.handle, c.hcomm))


@case("hixl", AccessError, lambda c: rf"Put to rank {c.right} of window {W}: the region is read-only")
def hixl_put_into_read_only(c):
    c.bad(lambda: hixl_rma.Put(np.ones(8, np.uint8), c.right, 0, c.ro, c.hcomm))


@case("hixl", AccessError, lambda c: rf"Get from rank {c.right} of window {W}: the region is write-only")
def hixl_get_from_write_only(c):
    c.bad(lambda: hixl_rma.Get(np.zeros(8, np.uint8), c.right, 0, c.wo, c.hcomm))


@case("hixl", ParamError, lambda c: r"Put: expected a MemoryHandle from RegisterMemory, got Win")
def hixl_window_as_handle(c):
    c.bad(lambda: hixl_rma.Put(np.ones(8, np.uint8), c.right, 0, c.win, c.hcomm))


@case("hixl", ParamError, lambda c: rf"rank {c.size + 3} is out of range for a communicator of {c.size} ranks")
def hixl_rank_out_of_range(c):
    c.bad(lambda: hixl_rma.Put(np.ones(8, np.uint8), c.size + 3, 0, c.handle, c.hcomm))


@case("hixl", ParamError, lambda c: r"RegisterMemory: access must be ACCESS_READ_WRITE, ACCESS_READ_ONLY or "
                                    r"ACCESS_WRITE_ONLY, got 7")
def hixl_register_bad_access(c):
    c.bad(lambda: hixl_rma.RegisterMemory(np.zeros(8, np.uint8), hixl_rma.MEMORY_HOST, 7, c.hcomm))


@case("hixl", ParamError, lambda c: r"RegisterMemory: mem_type must be MEMORY_HOST or MEMORY_DEVICE, got 'gpu'")
def hixl_register_bad_mem_type(c):
    c.bad(lambda: hixl_rma.RegisterMemory(np.zeros(8, np.uint8), "gpu", hixl_rma.ACCESS_READ_WRITE, c.hcomm))


@case("hixl", ParamError, lambda c: r"Put: the memory handle has been deregistered")
def hixl_put_after_deregister(c):
    h = hixl_rma.RegisterMemory(np.zeros(HN, np.uint8), hixl_rma.MEMORY_HOST, hixl_rma.ACCESS_READ_WRITE,
                                c.hcomm)
    hixl_rma.DeregisterMemory(h)
    c.bad(lambda: hixl_rma.Put(np.ones(8, np.uint8), c.right, 0, h, c.hcomm))


@case("hixl", ParamError, lambda c: r"DeregisterMemory: the memory handle has been deregistered")
def hixl_deregister_twice(c):
    h = hixl_rma.RegisterMemory(np.zeros(HN, np.uint8), hixl_rma.MEMORY_HOST, hixl_rma.ACCESS_READ_WRITE,
                                c.hcomm)
    hixl_rma.DeregisterMemory(h)
    c.bad(lambda: hixl_rma.DeregisterMemory(h))


# ------------------------------------------------------------------ engine


@case("engine", ParamError, lambda c: r"block 1: remote address \d+ length 8 is not registered")
def engine_last_block_unregistered(c):
    a = c.eh.addr
    c.bad(lambda: c.ea.transfer_sync(c.eb.address, hixl_rma.WRITE,
                                     [(c.esrc.ctypes.data, a, 16), (c.esrc.ctypes.data, a + 252, 8)]))


@case("engine", ParamError, lambda c: r"descs must have shape \(n, 3\), got \(2, 2\)")
def engine_descs_wrong_shape(c):
    c.bad(lambda: c.ea.transfer_sync(c.eb.address, hixl_rma.WRITE, [(1, 2), (3, 4)]))


@case("engine", ParamError, lambda c: r"descs hold a negative address or length")
def engine_negative_length(c):
    d = np.array([[c.esrc.ctypes.data, c.eh.addr, -8]], np.int64)
    c.bad(lambda: c.ea.transfer_sync(c.eb.address, hixl_rma.WRITE, d))


@case("engine", ParamError, lambda c: r"op must be READ or WRITE, got 5")
def engine_bad_op(c):
    c.bad(lambda: c.ea.transfer_sync(c.eb.address, 5, [(c.esrc.ctypes.data, c.eh.addr, 8)]))


@case("engine", ParamError, lambda c: r"register_mem needs a writable contiguous buffer, got bytes")
def engine_register_readonly(c):
    c.bad(lambda: c.ea.register_mem(b"\0" * 64))


@case("engine", ParamError, lambda c: r"memory handle at addr=\d+ is already deregistered")
def engine_deregister_twice(c):
    h = c.ea.register_mem(np.zeros(64, np.uint8))
    c.ea.deregister_mem(h)
    c.bad(lambda: c.ea.deregister_mem(h))


@case("engine", ParamError, lambda c: r"remote address \d+ length 8 is not 8-byte aligned")
def engine_unaligned_atomic(c):
    c.bad(lambda: c.ea.atomic_fetch_add(c.eb.address, c.eh.addr + 3, 1))


@case("engine", ParamError, lambda c: r"timeout_ms out of range: -1")
def engine_negative_timeout(c):
    c.bad(lambda: c.ea.flush(c.eb.address, timeout_ms=-1))


@case("engine", ParamError, lambda c: r"engine is finalized")
def engine_use_after_finalize(c):
    e = hixl_rma.Engine()
    e.finalize()
    c.bad(lambda: e.register_mem(np.zeros(8, np.uint8)))


@case("engine", ParamError, lambda c: r"remote engine 'nonsense' is not \"ip:port\" with a port > 0")
def engine_connect_malformed_address(c):
    c.bad(lambda: c.ea.connect("nonsense"))


@case("engine", NotConnectedError, lambda c: r"not connected to 127\.0\.0\.1:1\b")
def engine_transfer_to_unknown_peer(c):
    c.bad(lambda: c.ea.transfer_sync("127.0.0.1:1", hixl_rma.WRITE, [(c.esrc.ctypes.data, c.eh.addr, 8)]))


# ------------------------------------------------------------------ harness


@pytest.fixture(scope="module")
def ctx():
    hixl_rma.Init()
    c = Ctx(MPI.COMM_WORLD)
    yield c
    c.close()


def test_catalogue_size():
    assert len(CASES) >= 30
    faces = {k.split(":")[0] for k in CASES}
    assert faces == {"win", "hixl", "engine"}


# What mpi4py raises in these cases besides MPI.Exception: ours is that too.
MPI4PY_BUILTIN = {"rank_of_wrong_type": TypeError, "origin_not_a_buffer": TypeError,
                  "origin_python_list": TypeError, "get_into_readonly_array": BufferError,
                  "get_into_bytes": BufferError, "fetch_into_readonly_result": BufferError,
                  "fetch_and_op_empty_origin": ValueError, "compare_and_swap_type_mismatch": ValueError,
                  "create_over_readonly_memory": BufferError}


@pytest.mark.parametrize("name", list(CASES))
def test_misuse(ctx, name):
    fn, exc_class, match = CASES[name]
    c = ctx
    c.reset()
    barrier(c.comm)
    problems = []
    try:
        fn(c)
    except BaseException as exc:  # the case's own setup or cleanup failed
        problems.append(f"case code raised {type(exc).__name__}: {exc}")
    err = c.err
    c.err = None
    if err is None:
        problems.append("no exception")
    elif kind(err) is not exc_class:
        problems.append(f"raised {type(err).__name__} ({err}), expected {exc_class.__name__}")
    elif not (isinstance(err, MPI.Exception) and isinstance(err, MPI4PY_BUILTIN.get(name, MPI.Exception))):
        problems.append(f"raised {type(err).__name__} ({err}), which is not what mpi4py raises "
                        f"({MPI4PY_BUILTIN.get(name, MPI.Exception).__name__})")
    else:
        import re
        if not re.search(match(c), str(err)):
            problems.append(f"message {str(err)!r} does not match {match(c)!r}")
    barrier(c.comm)  # every rank's misuse is over: nothing may have landed
    problems += c.unchanged()
    barrier(c.comm)
    problems += c.still_works(salt=list(CASES).index(name) + 1)
    problems = [f"rank {c.rank}: {p}" for p in problems]
    problems = [p for part in c.comm.allgather(problems) for p in part]
    assert not problems, "\n".join(problems)


# ------------------------------------------------------ sub-communicators


def test_window_on_split_communicator(comm, rank, size):
    """A window on a Split half cannot be targeted with a rank outside it,
    nor synchronized with a group that reaches outside it."""
    hixl_rma.Init()
    sub = comm.Split(rank % 2, rank)
    buf = np.full(4, 7, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=sub)
    problems = []
    win.Fence()
    try:
        win.Put(np.ones(1, np.int64), sub.Get_size(), 0)
        problems.append("Put to a rank outside the sub-communicator was accepted")
    except ParamError as exc:
        if kind(exc) is not ParamError or f"rank {sub.Get_size()} is out of range for a communicator of " \
                                           f"{sub.Get_size()} ranks" not in str(exc):
            problems.append(f"wrong error: {type(exc).__name__}: {exc}")
    win.Fence(hixl_rma.MODE_NOSUCCEED)
    world_group = comm.Get_group()
    try:
        win.Start(world_group)
        problems.append("Start with a group reaching outside the window was accepted")
    except ParamError as exc:
        if "the group has ranks outside the window's communicator" not in str(exc):
            problems.append(f"wrong error: {type(exc).__name__}: {exc}")
    finally:
        world_group.Free()
    barrier(comm)
    if not (buf == 7).all():
        problems.append(f"window memory changed: {buf.tolist()}")
    # still works inside the sub-communicator
    r, s = sub.Get_rank(), sub.Get_size()
    win.Fence()
    win.Put(np.array([100 + r], np.int64), (r + 1) % s, 0)
    win.Fence()
    if buf[0] != 100 + (r - 1) % s:
        problems.append(f"sub-window broken: {buf.tolist()}")
    win.Free()
    sub.Free()
    problems = [p for part in comm.allgather(problems) for p in part]
    assert not problems, problems


# ----------------------------------------------------- after Finalize


FINALIZED = textwrap.dedent(r'''
    import numpy as np
    from mpi4py import MPI
    import hixl_rma
    from hixl_rma import ParamError, Win
    from hixl_rma.ground.errors import kind

    def expect(name, fn, exc, text):
        try:
            fn()
        except exc as e:
            ok = kind(e) is exc and text in str(e)
            print(("OK " if ok else "BAD ") + name + ": " + type(e).__name__ + ": " + str(e), flush=True)
            return
        except BaseException as e:
            print(f"BAD {name}: {type(e).__name__}: {e}", flush=True)
            return
        print(f"BAD {name}: no exception", flush=True)

    buf = np.zeros(4, np.int64)
    win = Win.Create(buf, disp_unit=8, comm=MPI.COMM_SELF)
    self_comm = hixl_rma.Communicator(MPI.COMM_SELF)
    region = np.zeros(16, np.uint8)
    handle = hixl_rma.RegisterMemory(region, hixl_rma.MEMORY_HOST, hixl_rma.ACCESS_READ_WRITE, self_comm)
    eng = hixl_rma.runtime.runtime().engine
    win.Fence()
    win.Put(np.ones(1, np.int64), 0, 0)
    win.Fence()
    assert buf[0] == 1
    hixl_rma.Finalize()
    expect("Put", lambda: win.Put(np.ones(1, np.int64), 0, 0), ParamError, "has been freed")
    expect("Fence", lambda: win.Fence(), ParamError, "has been freed")
    expect("Lock", lambda: win.Lock(0), ParamError, "has been freed")
    expect("hixl Put", lambda: hixl_rma.Put(np.ones(4, np.uint8), 0, 0, handle, self_comm), ParamError,
           "deregistered")
    expect("engine register", lambda: eng.register_mem(np.zeros(8, np.uint8)), ParamError, "engine is finalized")
    expect("engine transfer", lambda: eng.transfer_sync("127.0.0.1:1", hixl_rma.WRITE, []), ParamError,
           "engine is finalized")
    hixl_rma.Finalize()  # idempotent
    print("OK Finalize twice", flush=True)
    print("OK memory", buf.tolist() == [1, 0, 0, 0], flush=True)
    print("DONE", flush=True)
''')


def test_use_after_finalize(tmp_path, rank):
    """In a subprocess (a singleton MPI process): every call after Finalize
    raises ParamError and names why."""
    if rank != 0:
        return
    script = tmp_path / "finalized.py"
    script.write_text(FINALIZED)
    # a clean environment: not a rank of this job
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "MPIR_", "MPI_LOCALNRANKS", "MPI_LOCALRANKID"))}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "DONE" in out.stdout, text
    assert "BAD" not in out.stdout, text
    assert out.stdout.count("OK ") == 8, text


# ------------------------------------------------------------- property


DTYPES = [np.int8, np.uint16, np.int32, np.int64, np.uint64, np.float32, np.float64, np.complex64, np.bool_]
OPS = ["SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR", "REPLACE", "NO_OP"]
PWIN = 256  # bytes per window of the property test, disp_unit 1 or 8


def _pattern_bytes():
    return ((np.arange(PWIN) * 37 + 11) % 256).astype(np.uint8)


@pytest.fixture(scope="module")
def pwins():
    hixl_rma.Init()
    bufs = [np.zeros(PWIN, np.uint8), np.zeros(PWIN, np.uint8)]
    wins = [Win.Create(bufs[0], disp_unit=1, comm=MPI.COMM_WORLD),
            Win.Create(bufs[1], disp_unit=8, comm=MPI.COMM_WORLD)]
    yield wins, bufs
    for w in wins:
        w.Free()


_counts = st.one_of(st.integers(0, 40), st.sampled_from([-1, -100, 2 ** 31, 2 ** 62, 2 ** 64]))
_disps = st.one_of(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40),
                   st.sampled_from([-1, -8, 31, 32, 255, 256, 2 ** 40, 2 ** 61, 2 ** 63]))
_tdtypes = st.sampled_from([*DTYPES, "int64", MPI.INT64_T, MPI.DOUBLE, MPI.INT, "bogus"])
_args = st.fixed_dictionaries({
    "kind": st.sampled_from(["Put", "Get", "Accumulate"]),
    "win": st.integers(0, 1),
    "dtype": st.sampled_from(DTYPES),
    "n": st.integers(0, 24),
    "spec": st.sampled_from(["plain", "plain", "strided", "count", "count_dtype", "readonly"]),
    "spec_count": st.one_of(st.integers(0, 24), _counts),
    # the target: its form, displacement, count (or the origin's) and datatype (or the origin's)
    "tform": st.sampled_from(["none", "disp", "disp", "tuple1", "tuple2", "tuple3", "tuple3", "junk"]),
    "disp": _disps,
    "tcount": st.one_of(st.none(), st.none(), _counts),
    "tdtype": st.one_of(st.none(), st.none(), _tdtypes),
    "junk": st.sampled_from([1.5, "0", (0, 1, 2, 3), [], (), {"disp": 0}, np.float64(2.0)]),
    "rank": st.sampled_from(["right"] * 8 + ["size", -3, "str"]),
    "op": st.sampled_from([*OPS, "bogus"]),
})


def _target(a):
    """The target argument described by the drawn fields."""
    n = a["n"] if a["spec"] not in ("count", "count_dtype") else a["spec_count"]
    count = n if a["tcount"] is None else a["tcount"]
    dtype = a["dtype"] if a["tdtype"] is None else a["tdtype"]
    return {"none": None, "disp": a["disp"], "tuple1": (a["disp"],), "tuple2": (a["disp"], count),
            "tuple3": (a["disp"], count, dtype), "junk": a["junk"]}[a["tform"]]


def _np_dtype(dt):
    if isinstance(dt, MPI.Datatype):
        return dtlib.to_numpy_dtype(dt)
    return np.dtype(dt)


def _origin(a):
    """(what is passed as origin, the array holding its data, everything that
    must stay unchanged if the call fails)."""
    dt = np.dtype(a["dtype"])
    n = a["n"]
    raw = ((np.arange(2 * n * dt.itemsize) * 13 + 5) % 256).astype(np.uint8)
    base = (raw % 2).astype(np.bool_) if dt == np.bool_ else raw.view(dt)
    if a["spec"] == "strided":
        view = base[::2]
        return view, view, base
    arr = base[:n].copy()
    if a["spec"] == "readonly":
        arr.flags.writeable = False
    if a["spec"] == "count":
        return [arr, a["spec_count"]], arr, arr
    if a["spec"] == "count_dtype":
        return [arr, a["spec_count"], dt], arr, arr
    return arr, arr, arr


def _model(a, before_target, data, disp_unit):
    """Expected (target bytes, origin data bytes or None) if the call succeeded."""
    target = before_target.copy()
    o = np.ascontiguousarray(data)
    if a["spec"] in ("count", "count_dtype"):
        o = o[:a["spec_count"]]
    nbytes = o.nbytes
    t = a["target"]
    disp = 0 if t is None else (t if isinstance(t, int) else t[0])  # success: a plain displacement
    lo = disp * disp_unit
    if a["kind"] == "Get" and isinstance(t, (tuple, list)) and len(t) > 1:
        # MPI's rule: a Get's origin may be larger than the target describes;
        # what the target describes moves, into the origin's start.
        item = (_np_dtype(t[2]) if len(t) > 2 else o.dtype).itemsize
        nbytes = min(nbytes, t[1] * item)
    if nbytes == 0:
        return target, (np.zeros(0, np.uint8) if a["kind"] == "Get" else None)
    if lo + nbytes > len(target):
        raise AssertionError(f"succeeded although {nbytes} bytes at {lo} pass the window end")
    seg = target[lo:lo + nbytes]
    obytes = o.view(np.uint8).reshape(-1)
    if a["kind"] == "Put":
        seg[:] = obytes
        return target, None
    if a["kind"] == "Get":
        return target, seg.copy()
    op = getattr(hixl_rma, a["op"])
    tv = seg.view(o.dtype).copy()
    with np.errstate(all="ignore"):
        new = np.asarray(op.apply(tv, o), dtype=o.dtype)
    seg[:] = np.ascontiguousarray(new).view(np.uint8).reshape(-1)
    return target, None


@seed(1234)
@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
@given(a=_args)
def test_random_arguments_raise_only_hixl_errors(pwins, a):
    wins, bufs = pwins
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    right = (rank + 1) % size
    win, buf = wins[a["win"]], bufs[a["win"]]
    disp_unit = 8 if a["win"] else 1
    buf[:] = _pattern_bytes()
    target_rank = {"right": right, "size": size, "str": "1"}.get(a["rank"], a["rank"])
    a = dict(a, target=_target(a))
    origin, data, keep = _origin(a)
    keep_before = np.array(keep, copy=True)
    win.Fence()
    outcome, problem = "ok", None
    try:
        if a["kind"] == "Put":
            win.Put(origin, target_rank, a["target"])
        elif a["kind"] == "Get":
            win.Get(origin, target_rank, a["target"])
        else:
            op = getattr(hixl_rma, a["op"], a["op"])
            win.Accumulate(origin, target_rank, a["target"], op=op)
    except HixlError as exc:
        outcome = type(exc).__name__
    except BaseException as exc:  # anything but a HixlError is a bug
        outcome = "bug"
        problem = f"{type(exc).__name__}: {exc}"
    win.Fence(hixl_rma.MODE_NOSUCCEED)
    event(f"{a['kind']}: {outcome}")
    # the left neighbour made the same call on this rank's window
    outcomes = comm.allgather(outcome)
    if problem is None and len(set(outcomes)) != 1:
        problem = f"ranks disagree: {outcomes}"
    if problem is None and outcome == "ok":
        try:
            want_target, want_origin = _model(a, _pattern_bytes(), data, disp_unit)
            if not np.array_equal(buf, want_target):
                problem = f"target {buf.tolist()} != model {want_target.tolist()}"
            elif want_origin is not None:
                got = np.ascontiguousarray(data).view(np.uint8).reshape(-1)[:len(want_origin)]
                if not np.array_equal(got, want_origin):
                    problem = f"Get result {got.tolist()} != model {want_origin.tolist()}"
        except Exception as exc:  # a model failure is a finding too
            problem = f"model: {type(exc).__name__}: {exc}"
    elif problem is None:
        if not np.array_equal(buf, _pattern_bytes()):
            problem = f"{outcome} raised but the target changed"
        elif not np.array_equal(np.asarray(keep), keep_before):
            problem = f"{outcome} raised but the origin changed"
    problems = [p for p in comm.allgather(problem) if p]
    assert not problems, f"{a}: {problems}"
