"""What code written for mpi4py's MPI.Win relies on, at any size: the buffer
forms mpi4py parses, Fortran order, MPI.PROC_NULL, single-element atomics,
dynamic windows with many (and empty) regions, requests, errors."""
import array
import time

import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import BoundsError, DatatypeError, ParamError, Win

from support.mpiutil import barrier, pattern

pytestmark = [pytest.mark.mpi(min_size=1), pytest.mark.timeout(120)]


class HostCAI:
    """Host memory behind a ``__cuda_array_interface__`` (as mpi4py's own tests
    make): with no CUDA driver loaded it moves as the host memory it is."""

    def __init__(self, arr):
        self.arr = arr
        self.__cuda_array_interface__ = {"version": 3, "data": (arr.ctypes.data, False),
                                         "shape": arr.shape, "typestr": arr.dtype.str, "strides": None}


@pytest.mark.core
def test_origins_in_every_form_mpi4py_parses(comm, rank, left, right):
    buf = np.full(32, -1, np.int64)
    win = Win.Create(buf, 8, MPI.INFO_NULL, comm)
    src = pattern(8, rank)
    win.Fence()
    win.Put([src, MPI.INT64_T], right, 0)                    # [buf, datatype]
    win.Put([src, (2, 3), MPI.INT64_T], right, 8)            # [buf, (count, displ), datatype]
    win.Put([src, 2, 5, MPI.INT64_T], right, 10)             # [buf, count, displ, datatype]
    win.Put(HostCAI(src[:2]), right, 12)                     # host memory behind a CUDA interface
    win.Put([HostCAI(src), 1, MPI.INT64_T], right, 14)       # ... inside a spec
    win.Put(array.array("q", src[:2].tolist()), right, 15)   # the buffer protocol
    win.Put([None, MPI.INT64_T], right, 20)                  # an empty message
    win.Put([MPI.BOTTOM, 1, _absolute(src[7:])], right, (17, 1, MPI.INT64_T))  # absolute addresses
    win.Fence()
    got = buf.copy()
    win.Free()
    theirs = pattern(8, left)
    want = np.full(32, -1, np.int64)
    want[0:8] = theirs
    want[8:10] = theirs[3:5]
    want[10:12] = theirs[5:7]
    want[12:14] = theirs[:2]
    want[14] = theirs[0]
    want[15:17] = theirs[:2]
    want[17] = theirs[7]
    np.testing.assert_array_equal(got, want)


def _absolute(region):
    """A datatype of one int64 at the absolute address of region[0]."""
    dt = MPI.INT64_T.Create_hindexed([1], [MPI.Get_address(region)]).Commit()
    _keep.append(dt)
    return dt


_keep = []


def test_fortran_arrays_move_their_memory_order(comm, rank, left, right):
    """As mpi4py: a Fortran-contiguous array is its raw memory, as window
    memory too."""
    mem = np.asfortranarray(np.zeros((3, 4), np.int64))
    win = Win.Create(mem, 8, comm=comm)
    origin = np.asfortranarray(pattern(12, rank).reshape(3, 4))
    win.Fence()
    win.Put(origin, right, 0)
    win.Fence()
    out = np.asfortranarray(np.zeros((3, 4), np.int64))
    win.Get(out, right, 0)
    win.Fence()
    got = mem.tobytes(order="A")  # the window's raw memory
    win.Free()
    theirs = np.asfortranarray(pattern(12, left).reshape(3, 4))
    assert got == theirs.tobytes(order="A") != theirs.tobytes(order="C")  # memory order, not logical
    np.testing.assert_array_equal(out, origin)


def test_proc_null_is_a_no_op_before_parsing(comm, rank):
    buf = np.arange(4, dtype=np.int64)
    win = Win.Create(buf, 8, comm=comm)
    win.Fence()
    for call in (lambda: win.Put(None, MPI.PROC_NULL, None), lambda: win.Get(None, MPI.PROC_NULL),
                 lambda: win.Put(object(), MPI.PROC_NULL, "not a target"),
                 lambda: win.Accumulate([None, MPI.INT], MPI.PROC_NULL, None, MPI.SUM),
                 lambda: win.Get_accumulate([bytearray(8), 0, MPI.INT], [bytearray(8), 0, MPI.INT],
                                            MPI.PROC_NULL),
                 lambda: win.Fetch_and_op(None, None, MPI.PROC_NULL),
                 lambda: win.Compare_and_swap(None, None, None, MPI.PROC_NULL)):
        call()
    reqs = [win.Rput(None, MPI.PROC_NULL), win.Rget(MPI.BOTTOM, MPI.PROC_NULL)]
    assert not any(reqs) and hixl_rma.Request.Waitall(reqs)
    win.Fence()
    win.Free()
    np.testing.assert_array_equal(buf, np.arange(4))


@pytest.mark.core
def test_fetch_and_op_and_cas_take_exactly_one_element(comm, rank, right):
    buf = np.zeros(4, np.int64)
    win = Win.Create(buf, 8, comm=comm)
    win.Lock(right, MPI.LOCK_SHARED)
    errs = []
    for call in (lambda: win.Fetch_and_op(np.ones(2, np.int64), np.zeros(1, np.int64), right),
                 lambda: win.Fetch_and_op(np.ones(1, np.int64), np.zeros(2, np.int64), right),
                 lambda: win.Fetch_and_op(np.ones(1, np.int64), np.zeros(1, np.int32), right),
                 lambda: win.Fetch_and_op(bytearray(1), [bytearray(4), MPI.INT], right),
                 lambda: win.Compare_and_swap(np.ones(2, np.int64), np.zeros(1, np.int64),
                                              np.zeros(1, np.int64), right),
                 lambda: win.Compare_and_swap(np.ones(1, np.int64), np.zeros(1, np.int32),
                                              np.zeros(1, np.int64), right)):
        with pytest.raises(ValueError) as err:
            call()
        assert isinstance(err.value, DatatypeError) and isinstance(err.value, MPI.Exception)
        errs.append(str(err.value))
    with pytest.raises(DatatypeError, match="not an integer, logical or byte element"):
        win.Compare_and_swap(np.ones(1), np.zeros(1), np.zeros(1), right)  # MPI: no floats
    old = np.zeros(1, np.float64)
    win.Fetch_and_op(np.ones(1, np.float64), old, right, 3, MPI.NO_OP)  # FAO takes any predefined type
    win.Unlock(right)
    barrier(comm)
    got = buf.copy()
    win.Free()
    assert "origin: expecting a single element, got 2" in errs[0]
    assert "result: expecting a single element, got 2" in errs[1]
    assert "mismatch in origin and result datatypes" in errs[2]
    np.testing.assert_array_equal(got, np.zeros(4))  # nothing landed


def test_dynamic_window_with_many_and_empty_regions(comm, rank, left, right):
    n = 300  # more than a 4 KiB control block could list
    regions = [np.zeros(2, np.int64) for _ in range(n)]
    empty = bytearray()
    win = Win.Create_dynamic(comm=comm)
    win.Attach(empty)                                  # empty regions are fine (MPI allows them)
    for r in regions:
        win.Attach(r)
    addrs = comm.allgather([MPI.Get_address(r) for r in regions])[right]
    win.Fence()
    for i in (0, 150, n - 1):
        win.Put(pattern(2, rank, salt=i), right, addrs[i])
    win.Fence()
    with pytest.raises(BoundsError, match="not in an attached region"):
        win.Put(np.ones(3, np.int64), right, addrs[7])  # past the end of region 7
    win.Fence()
    got = [regions[i].copy() for i in (0, 150, n - 1)]
    win.Detach(empty)
    for r in regions:
        win.Detach(r)
    win.Fence()
    with pytest.raises(BoundsError, match="not in an attached region"):
        win.Put(np.ones(1, np.int64), right, addrs[0])
    win.Free()
    for k, i in enumerate((0, 150, n - 1)):
        np.testing.assert_array_equal(got[k], pattern(2, left, salt=i))


def test_requests_wait_test_and_the_list_forms(comm, rank, left, right):
    buf = np.zeros(8, np.int64)
    win = Win.Create(buf, 8, comm=comm)
    win.Lock_all()
    reqs = [win.Rput(pattern(1, rank, salt=i), right, i) for i in range(4)]
    assert hixl_rma.Request.Waitall(reqs) is True and not any(reqs)
    idx = hixl_rma.Request.Waitany([win.Rput(pattern(1, rank, salt=4), right, 4)])
    assert idx == 0
    assert hixl_rma.Request.Testany(reqs) == (MPI.UNDEFINED, True)  # none pending
    req = win.Rget(np.zeros(1, np.int64), right, 0)
    assert req.Wait() is True and not req
    # mpi4py's own requests and ours in one list
    other = comm.Isend(np.zeros(1), rank) if comm.Get_size() >= 1 else None
    recv = comm.Irecv(np.zeros(1), rank)
    assert hixl_rma.Request.Waitall([win.Rput(pattern(1, rank, salt=5), right, 5), other, recv])
    win.Unlock_all()
    assert win.Wait is not None
    barrier(comm)
    got = buf.copy()
    win.Free()
    np.testing.assert_array_equal(got[:6], np.concatenate([pattern(1, left, salt=i) for i in range(6)]))


def test_errors_are_what_mpi4py_raises(comm, rank, right):
    buf = np.zeros(4, np.int64)
    win = Win.Create(buf, 8, comm=comm)
    win.Fence()
    cases = [
        (lambda: win.Put(np.ones(1, np.int64), right, 4), MPI.ERR_RMA_RANGE, BoundsError, None),
        (lambda: win.Put(np.ones(1, np.int64), comm.Get_size()), MPI.ERR_RANK, ParamError, None),
        (lambda: win.Put("abc", right), MPI.ERR_BUFFER, ParamError, TypeError),
        (lambda: win.Get(b"12345678", right), MPI.ERR_BUFFER, ParamError, BufferError),
        (lambda: win.Put(np.ones(1, np.int64), right, {}), MPI.ERR_ARG, ParamError, ValueError),
        (lambda: win.Put(np.ones(1, np.int64), right, (1.5,)), MPI.ERR_DISP, ParamError, TypeError),
        (lambda: win.Put([np.ones(3, np.int64), 1, 2, 3, 4], right), MPI.ERR_ARG, ParamError, ValueError),
    ]
    for call, error_class, cls, builtin in cases:
        with pytest.raises(MPI.Exception) as err:
            call()
        assert isinstance(err.value, cls) and err.value.Get_error_class() == error_class, repr(err.value)
        if builtin is not None:
            assert isinstance(err.value, builtin), repr(err.value)
    win.Fence(MPI.MODE_NOSUCCEED)
    with pytest.raises(MPI.Exception) as err:
        win.Put(np.ones(1, np.int64), right)  # no epoch
    assert err.value.Get_error_class() == MPI.ERR_RMA_SYNC
    barrier(comm)
    win.Free()
    np.testing.assert_array_equal(buf, np.zeros(4))


def test_sync_makes_remote_writes_visible_to_a_spinning_reader(comm, rank, left, right):
    """mpi4py.util.sync's pattern: spin on memoryview(win) with Sync between loads."""
    win = Win.Allocate(8, 8, comm=comm)
    flag = memoryview(win).cast("q")
    flag[0] = 0
    barrier(comm)
    win.Lock(right, MPI.LOCK_SHARED)
    win.Accumulate(np.array([rank + 1], np.int64), right, 0, MPI.REPLACE)
    win.Unlock(right)
    # Until a deadline, not a count of loads: with three ranks on two cores
    # the writer may not have run yet when a fixed count is used up; past the
    # first loads the reader yields its core, as mpi4py.util.sync's spin does.
    deadline, spins = time.monotonic() + 20, 0
    while time.monotonic() < deadline:
        win.Sync()
        if flag[0]:
            break
        spins += 1
        if spins > 1000:
            time.sleep(1e-4)
    seen = flag[0]
    del flag
    barrier(comm)
    win.Free()
    assert seen == left + 1
