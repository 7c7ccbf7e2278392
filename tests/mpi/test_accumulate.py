"""Accumulate operations: every predefined op on representative dtypes under
fence and lock (Accumulate, Get_accumulate), contention under Lock_all
(Fetch_and_op counters, float sums, MAX/MIN races, a Compare_and_swap spin
lock), element-wise atomic snapshots with NO_OP, bad input, and the
request-based forms.
"""
import itertools
import time

import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import DatatypeError, ParamError, Win
from hixl_rma import runtime as _rt

from support.mpiutil import barrier, pattern

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(60, method="thread")]

N = 7  # elements of the op-by-dtype accumulates

OPS = {
    "SUM": (hixl_rma.SUM, MPI.SUM), "PROD": (hixl_rma.PROD, MPI.PROD),
    "MAX": (hixl_rma.MAX, MPI.MAX), "MIN": (hixl_rma.MIN, MPI.MIN),
    "LAND": (hixl_rma.LAND, MPI.LAND), "LOR": (hixl_rma.LOR, MPI.LOR),
    "LXOR": (hixl_rma.LXOR, MPI.LXOR), "BAND": (hixl_rma.BAND, MPI.BAND),
    "BOR": (hixl_rma.BOR, MPI.BOR), "BXOR": (hixl_rma.BXOR, MPI.BXOR),
    "REPLACE": (hixl_rma.REPLACE, MPI.REPLACE), "NO_OP": (hixl_rma.NO_OP, MPI.NO_OP),
}
INT_ONLY = {"LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"}
NO_COMPLEX = {"MAX", "MIN"}
DTYPES = ["int32", "int64", "uint64", "float64", "complex128"]


def _defined(name, dt):
    kind = np.dtype(dt).kind
    if name in INT_ONLY:
        return kind in "iu"
    if name in NO_COMPLEX:
        return kind != "c"
    return True


def _ref(name, target, origin):
    """numpy reference of ``op(target, origin)``."""
    t, o = target, origin
    fn = {
        "SUM": lambda: t + o, "PROD": lambda: t * o,
        "MAX": lambda: np.maximum(t, o), "MIN": lambda: np.minimum(t, o),
        "LAND": lambda: np.logical_and(t != 0, o != 0), "LOR": lambda: np.logical_or(t != 0, o != 0),
        "LXOR": lambda: np.logical_xor(t != 0, o != 0),
        "BAND": lambda: t & o, "BOR": lambda: t | o, "BXOR": lambda: t ^ o,
        "REPLACE": lambda: o, "NO_OP": lambda: t,
    }[name]
    return np.asarray(fn()).astype(t.dtype)


def _init(rank, dt):
    """Window contents of ``rank`` (with zeros, for the logical ops)."""
    v = pattern(N, rank, dt, salt=3)
    v[0] = 0
    v[3] = 0
    return v


def _origin(rank, dt, salt):
    v = pattern(N, rank, dt, salt=salt)
    v[1] = 0
    v[3] = 0
    if np.dtype(dt).kind in "iu":
        v[5] = 5 + rank  # smaller than the target's there: MIN/MAX both matter
    return v


def _epoch(win, mode, peer):
    if mode == "fence":
        win.Fence()
    else:
        win.Lock(peer, hixl_rma.LOCK_SHARED)


def _end(win, mode, peer, comm):
    if mode == "fence":
        win.Fence()
    else:
        win.Unlock(peer)
        barrier(comm)


def _op_cases():
    out = []
    for name in OPS:
        for dt in DTYPES:
            if not _defined(name, dt):
                continue
            marks = [pytest.mark.core] if dt in ("int64", "float64") else []
            out.append(pytest.param(name, dt, marks=marks, id=f"{name}-{dt}"))
    return out


def _run_op(comm, rank, left, right, name, dt, mode, op):
    buf = _init(rank, dt)
    win = Win.Create(buf, disp_unit=buf.itemsize, comm=comm)
    win.Fence() if mode == "fence" else barrier(comm)
    _epoch(win, mode, right)
    win.Accumulate(_origin(rank, dt, 1), right, None, op)
    _end(win, mode, right, comm)
    after_acc = buf.copy()
    barrier(comm)  # read before the next epoch's writes arrive
    res = np.full(N, 99, dt)
    _epoch(win, mode, right)
    win.Get_accumulate(_origin(rank, dt, 2), res, right, None, op)
    _end(win, mode, right, comm)
    if mode == "fence":
        win.Fence(hixl_rma.MODE_NOSUCCEED)
    final = buf.copy()
    win.Free()
    ref1 = _ref(name, _init(rank, dt), _origin(left, dt, 1))
    np.testing.assert_array_equal(after_acc, ref1)
    right_ref1 = _ref(name, _init(right, dt), _origin(rank, dt, 1))
    np.testing.assert_array_equal(res, right_ref1)
    np.testing.assert_array_equal(final, _ref(name, ref1, _origin(left, dt, 2)))


@pytest.mark.parametrize("mode", ["fence", "lock"])
@pytest.mark.parametrize("name,dt", _op_cases())
def test_op_dtype(comm, rank, left, right, name, dt, mode):
    _run_op(comm, rank, left, right, name, dt, mode, OPS[name][0])


C_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"]


@pytest.mark.core
def test_small_accumulates_made_in_c_agree_with_numpy(comm, rank, left, right):
    """Every predefined op on every type the C path of a small accumulate
    takes (a Create window under its ranks' accumulate lock): the result and
    the target agree with numpy, and, where the lock word is mapped here
    (not over UCX_TLS=tcp), the C path took each case but MAX and MIN on
    floats (numpy's NaN rules: the Python layer's)."""
    from hixl_rma import _engine
    for dt in C_DTYPES:
        buf = _init(rank, dt)
        win = Win.Create(buf, disp_unit=buf.itemsize, comm=comm)
        if not win._core.targets[right].acc_locked:
            win.Free()
            pytest.skip("the window is not under its ranks' accumulate lock (ranks on several hosts)")
        for name in OPS:
            if not _defined(name, dt):
                continue
            barrier(comm)
            win.Lock(right, hixl_rma.LOCK_EXCLUSIVE)
            win.Put(_init(right, dt), right, 0)
            win.Flush(right)
            res = np.full(N, 99, dt)
            win.Get_accumulate(_origin(rank, dt, 1), res, right, 0, OPS[name][0])
            back = np.zeros(N, dt)
            win.Get(back, right, 0)
            win.Flush(right)
            took = win._core.accumulate_small(_origin(rank, dt, 1), np.zeros(N, dt), right, 0, _engine.ACC_OPS[name])
            mapped = win._core.wait_lock_free(right, False, 0.0)  # False where the word is not mapped here
            win.Unlock(right)
            np.testing.assert_array_equal(res, _init(right, dt), err_msg=f"{name} {dt}: result")
            np.testing.assert_array_equal(back, _ref(name, _init(right, dt), _origin(rank, dt, 1)),
                                          err_msg=f"{name} {dt}: target")
            assert took == (mapped and (dt[0] != "f" or name not in ("MAX", "MIN"))), \
                f"{name} {dt}: C path took it: {took} (lock word mapped here: {mapped})"
        barrier(comm)
        win.Free()


@pytest.mark.parametrize("name", list(OPS))
def test_mpi4py_ops_accepted(comm, rank, left, right, name):
    _run_op(comm, rank, left, right, name, "int64", "fence", OPS[name][1])


@pytest.mark.core
@pytest.mark.parametrize("name,dt", [("BAND", "float64"), ("LAND", "float64"), ("BXOR", "complex128"),
                                     ("MAX", "complex128"), ("MIN", "complex128")])
def test_undefined_op_raises(comm, rank, right, name, dt):
    buf = _init(rank, dt)
    win = Win.Create(buf, disp_unit=buf.itemsize, comm=comm)
    win.Lock(right, hixl_rma.LOCK_SHARED)
    errs = []
    for call in (lambda: win.Accumulate(_origin(rank, dt, 1), right, None, OPS[name][0]),
                 lambda: win.Accumulate(_origin(rank, dt, 1), right, None, OPS[name][1]),
                 lambda: win.Get_accumulate(_origin(rank, dt, 1), np.zeros(N, dt), right, None,
                                            OPS[name][0]),
                 lambda: win.Fetch_and_op(_origin(rank, dt, 1)[:1], np.zeros(1, dt), right, 0,
                                          OPS[name][0])):
        with pytest.raises(DatatypeError) as err:
            call()
        errs.append(str(err.value))
    win.Unlock(right)
    barrier(comm)
    got = buf.copy()
    win.Free()
    for msg in errs:
        assert name in msg
    np.testing.assert_array_equal(got, _init(rank, dt))


# ------------------------------------------------------------------ contention

K = 200


def _window(flavor, nelem, dtype, comm):
    dt = np.dtype(dtype)
    if flavor == "create":
        mem = np.zeros(nelem, dt)
        win = Win.Create(mem, disp_unit=dt.itemsize, comm=comm)
    else:
        win = Win.Allocate(nelem * dt.itemsize, disp_unit=dt.itemsize, comm=comm)
        mem = np.frombuffer(win.tomemory(), dt)
        mem[:] = 0
    barrier(comm)
    return win, mem


@pytest.mark.core
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_every_path_of_an_accumulate_is_atomic_with_the_others(comm, rank, size, flavor):
    """Every rank, rank 0 on its own memory included, adds to the same two
    counters by the hot path (one element: Fetch_and_op, Rget_accumulate,
    Accumulate, Compare_and_swap's retry loop), by the C path of a small
    accumulate and by the Python layer's (two elements at once): nothing is
    lost. On a Create window of one host
    they all take the target's accumulate lock (acc_locked), without its CPU."""
    win, mem = _window(flavor, 2, np.int64, comm)
    if flavor == "create" and _rt.runtime().same_node(range(size)):
        assert win._core.targets[0].acc_locked
    elif flavor == "allocate":
        assert not win._core.targets[0].acc_locked
    one, two, res, cur = np.ones(1, np.int64), np.ones(2, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)
    win.Lock_all()
    for _ in range(K // 4):
        win.Fetch_and_op(one, res, 0, 0, hixl_rma.SUM)
        win.Rget_accumulate(one, res, 0, (1, 1, MPI.INT64_T), MPI.SUM).wait()
        win.Accumulate(two, 0, (0, 2, MPI.INT64_T), hixl_rma.SUM)
        win.Accumulate(two, 0, 0, hixl_rma.SUM)  # a small accumulate: in C under the lock
        while True:  # +1 on counter 0 by compare-and-swap
            win.Fetch_and_op(one, cur, 0, 0, hixl_rma.NO_OP)
            win.Compare_and_swap(cur + 1, cur, res, 0, 0)
            if res[0] == cur[0]:
                break
    win.Flush(0)
    win.Unlock_all()
    barrier(comm)
    final = comm.bcast(mem[:2].tolist() if rank == 0 else None, root=0)
    win.Free()
    assert final == [4 * size * (K // 4), 3 * size * (K // 4)]


@pytest.mark.core
def test_atomics_by_the_target_and_by_the_origin_mix(comm, rank, size, monkeypatch):
    """Each rank picks its own way (HIXL_RMA_TARGET_OPS) for its 8-byte
    atomics on rank 0's Create window: rank 1 has rank 0's engine make them
    under rank 0's accumulate lock word, rank 0 makes its own under that
    word, rank 2 lets each run of atomics choose; every rank also adds two
    elements at once (the Python layer, under the same word). Nothing is
    lost, each origin's fetches increase, and rank 0's engine made the
    atomics of the rank that asked it to (all but those that found the word
    held, which that rank then made itself), none of rank 0's, and as many
    as its origins counted."""
    way = {0: "origin", 1: "target"}.get(rank, "auto")
    monkeypatch.setenv("HIXL_RMA_TARGET_OPS", way)
    win, mem = _window("create", 2, np.int64, comm)
    if not win._core.targets[0].acc_locked:
        win.Free()
        pytest.skip("rank 0's window is not under its accumulate lock (ranks on several hosts)")
    one, two, res = np.ones(1, np.int64), np.ones(2, np.int64), np.zeros(1, np.int64)
    rounds = 4 * K
    fetched = np.empty(rounds, np.int64)
    stats = win._core.engine.stats
    before = stats()["target_atomics_asked"], stats()["target_atomics_served"]
    # Every rank's baseline before any rank's first atomic: rank 0 may still
    # be leaving the window's creation while the others are asking its engine.
    barrier(comm)
    win.Lock_all()
    for i in range(rounds):
        win.Fetch_and_op(one, res, 0, 0, hixl_rma.SUM)
        fetched[i] = res[0]
        if i % 8 == 0:
            win.Accumulate(two, 0, (0, 2, MPI.INT64_T), hixl_rma.SUM)
    win.Unlock_all()
    barrier(comm)
    made = stats()["target_atomics_asked"] - before[0]
    served = stats()["target_atomics_served"] - before[1]
    made_all = comm.allreduce(made)
    final = comm.bcast(mem[:2].tolist() if rank == 0 else None, root=0)
    win.Free()
    assert final == [size * (rounds + rounds // 8), size * (rounds // 8)]
    assert (np.diff(fetched) > 0).all()
    if rank == 0:
        assert served == made_all, f"rank 0 made {served} atomics, its origins counted {made_all}"
    if way == "target":
        assert rounds // 2 < made <= rounds, f"rank {rank}: {made} of {rounds} atomics made by the target's engine"
    elif way == "origin":
        assert made == 0, f"rank {rank}: {made} atomics made by the target's engine"


@pytest.mark.core
@pytest.mark.parametrize("by", ["target", "auto"])
def test_a_sleeping_target_serves_atomics(comm, rank, size, monkeypatch, by):
    """Rank 0's engine makes the atomics of the other ranks while rank 0
    sleeps, in no library call (its progress thread answers them); a bad
    setting is refused at creation by every rank, the window not made."""
    monkeypatch.setenv("HIXL_RMA_TARGET_OPS", "sometimes")
    with pytest.raises(ParamError, match="HIXL_RMA_TARGET_OPS must be auto, target or origin"):
        Win.Create(np.zeros(2, np.int64), 8, comm=comm)
    monkeypatch.setenv("HIXL_RMA_TARGET_OPS", by)
    win, mem = _window("create", 2, np.int64, comm)
    rounds = 2 * K
    if rank == 0:
        time.sleep(0.5)
    else:
        one, res = np.ones(1, np.int64), np.zeros(1, np.int64)
        win.Lock(0, hixl_rma.LOCK_SHARED)
        for _ in range(rounds):
            win.Fetch_and_op(one, res, 0, 0, hixl_rma.SUM)
        win.Unlock(0)
    barrier(comm)
    final = comm.bcast(int(mem[0]) if rank == 0 else None, root=0)
    win.Free()
    assert final == (size - 1) * rounds


@pytest.mark.core
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_fetch_and_op_counter(comm, rank, size, flavor):
    win, mem = _window(flavor, 2, np.int64, comm)
    one, res = np.ones(1, np.int64), np.zeros(1, np.int64)
    fetched = np.empty(K, np.int64)
    win.Lock_all()
    for i in range(K):
        win.Fetch_and_op(one, res, 0, 0, hixl_rma.SUM)
        fetched[i] = res[0]
    win.Unlock_all()
    barrier(comm)
    final = comm.bcast(int(mem[0]) if rank == 0 else None, root=0)
    allf = np.concatenate(comm.allgather(fetched))
    win.Free()
    assert final == size * K
    np.testing.assert_array_equal(np.sort(allf), np.arange(size * K))
    # one origin's fetches are increasing (its own earlier adds are visible)
    assert (np.diff(fetched) > 0).all()


@pytest.mark.core
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_accumulate_float_sum_everywhere(comm, rank, size, flavor):
    win, mem = _window(flavor, 1000, np.float64, comm)
    ones = np.ones(1000, np.float64)
    win.Lock_all()
    for _ in range(50):
        for t in range(size):
            win.Accumulate(ones, (rank + t) % size, None, hixl_rma.SUM)
    win.Unlock_all()
    barrier(comm)
    got = mem.copy()
    win.Free()
    np.testing.assert_array_equal(got, np.full(1000, 50.0 * size))


@pytest.mark.core
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_max_min_races(comm, rank, size, flavor):
    n, iters = 64, 10
    wmax, mmax = _window(flavor, n, np.int64, comm)
    wmin, mmin = _window(flavor, n, np.int64, comm)
    mmax[:] = np.iinfo(np.int64).min
    mmin[:] = np.iinfo(np.int64).max
    barrier(comm)
    rng = np.random.default_rng(1234 + rank)
    mine = rng.integers(-(1 << 62), 1 << 62, size=(iters, n), dtype=np.int64)
    wmax.Lock_all()
    wmin.Lock_all()
    for i in range(iters):
        for t in range(size):
            tgt = (rank + t + i) % size
            wmax.Accumulate(mine[i], tgt, None, hixl_rma.MAX)
            wmin.Accumulate(mine[i], tgt, None, MPI.MIN)
    wmax.Unlock_all()
    wmin.Unlock_all()
    barrier(comm)
    gmax, gmin = mmax.copy(), mmin.copy()
    wmax.Free()
    wmin.Free()
    every = np.concatenate(comm.allgather(mine))
    np.testing.assert_array_equal(gmax, every.max(axis=0))
    np.testing.assert_array_equal(gmin, every.min(axis=0))


@pytest.mark.core
@pytest.mark.parametrize("release", ["cas", "replace"])
@pytest.mark.parametrize("flavor", ["create", "allocate"])
def test_cas_spin_lock(comm, rank, size, flavor, release):
    kk = 50
    win, mem = _window(flavor, 2, np.int64, comm)  # [lock word, counter] at rank 0
    me, zero = np.array([rank + 1], np.int64), np.zeros(1, np.int64)
    res, cnt = np.zeros(1, np.int64), np.zeros(1, np.int64)
    bad_release = []
    win.Lock_all()
    for _ in range(kk):
        while True:
            win.Compare_and_swap(me, zero, res, 0, 0)
            win.Flush(0)
            if res[0] == 0:
                break
        win.Get(cnt, 0, 1)
        win.Flush(0)
        cnt[0] += 1
        win.Put(cnt, 0, 1)
        win.Flush(0)
        if release == "cas":
            win.Compare_and_swap(zero, me, res, 0, 0)
            if res[0] != rank + 1:
                bad_release.append(int(res[0]))
        else:
            win.Accumulate(zero, 0, 0, hixl_rma.REPLACE)
        win.Flush(0)
    win.Unlock_all()
    barrier(comm)
    final = comm.bcast((int(mem[0]), int(mem[1])) if rank == 0 else None, root=0)
    win.Free()
    assert bad_release == []
    assert final == (0, kk * size)


# ------------------------------------------------------------ NO_OP snapshots

BASE = (1 << 40) + 12345
INC = (1 << 32) + 1  # a torn 8-byte value would not be BASE + k*INC
NSNAP = 512


@pytest.mark.core
@pytest.mark.parametrize("dt", ["int64", "float64"])
def test_no_op_snapshot_is_elementwise_atomic(comm, rank, size, dt):
    dt = np.dtype(dt)
    adds, reads = 100, 100
    base = dt.type(BASE if dt.kind == "i" else 1024.0)
    inc = dt.type(INC if dt.kind == "i" else 0.5)  # exact in float64
    win, mem = _window("create", NSNAP, dt, comm)
    if rank == 0:
        mem[:] = base
    barrier(comm)
    total = (size - 1) * adds
    snaps, own = [], []
    dummy = np.zeros(NSNAP, dt)
    win.Lock_all()
    if rank == 0:
        for _ in range(reads):
            res = np.empty(NSNAP, dt)
            win.Get_accumulate(dummy, res, 0, None, hixl_rma.NO_OP)
            snaps.append(res)
    else:
        incs = np.full(NSNAP, inc, dt)
        for j in range(adds):
            win.Accumulate(incs, 0, None, hixl_rma.SUM)
            if j % 10 == 9:
                res = np.empty(NSNAP, dt)
                win.Get_accumulate(dummy, res, 0, None, MPI.NO_OP)
                own.append((j + 1, res))
    win.Unlock_all()
    barrier(comm)
    final = mem.copy() if rank == 0 else None
    win.Free()
    for res in snaps + [r for _, r in own]:
        k = (res - base) / inc if dt.kind == "f" else (res - base) // inc
        assert ((res - base) % inc == 0).all(), "torn or invalid value"
        assert ((k >= 0) & (k <= total)).all()
    for a, b in itertools.pairwise(snaps):
        assert (b >= a).all(), "a later snapshot went backwards"
    for done, res in own:  # this origin's own earlier adds are visible (ordering)
        assert (res >= base + done * inc).all()
    if rank == 0:
        np.testing.assert_array_equal(final, np.full(NSNAP, base + total * inc, dt))


# ------------------------------------------------------------------ bad input

@pytest.mark.core
def test_bad_input_leaves_target_unchanged(comm, rank, right):
    buf = _init(rank, "int64")
    win = Win.Create(buf, disp_unit=8, comm=comm)
    win.Lock(right, hixl_rma.LOCK_SHARED)
    origin = _origin(rank, "int64", 1)
    with pytest.raises(DatatypeError):  # result too small
        win.Get_accumulate(origin, np.zeros(3, np.int64), right, None, hixl_rma.SUM)
    with pytest.raises(DatatypeError):  # result too small, locked path
        win.Get_accumulate(origin, np.zeros(3, np.int64), right, None, hixl_rma.MAX)
    with pytest.raises(DatatypeError):  # result of another dtype
        win.Get_accumulate(origin, np.zeros(N, np.float64), right, None, hixl_rma.SUM)
    ro = np.zeros(N, np.int64)
    ro.flags.writeable = False
    with pytest.raises(ParamError):
        win.Get_accumulate(origin, ro, right, None, hixl_rma.SUM)
    ro1 = np.zeros(1, np.int64)
    ro1.flags.writeable = False
    with pytest.raises(ParamError):
        win.Fetch_and_op(origin[:1], ro1, right, 0, hixl_rma.SUM)
    with pytest.raises(ParamError):
        win.Compare_and_swap(origin[:1], origin[:1], ro1, right, 0)
    with pytest.raises(DatatypeError):
        win.Compare_and_swap(np.array([5], np.int64), np.array([0], np.int32),
                             np.zeros(1, np.int64), right, 0)
    with pytest.raises(DatatypeError):
        win.Compare_and_swap(np.array([5], np.int64), np.array([0], np.float64),
                             np.zeros(1, np.int64), right, 0)
    win.Unlock(right)
    barrier(comm)
    got = buf.copy()
    win.Free()
    np.testing.assert_array_equal(got, _init(rank, "int64"))


# ------------------------------------------------------------------- requests

@pytest.mark.parametrize("dt", ["int64", "float64"])
def test_request_based(comm, rank, left, right, dt):
    buf = _init(rank, dt)
    win = Win.Create(buf, disp_unit=buf.itemsize, comm=comm)
    barrier(comm)
    win.Lock(right, hixl_rma.LOCK_SHARED)
    req = win.Raccumulate(_origin(rank, dt, 1), right, None, hixl_rma.SUM)
    req.Wait()
    res = np.zeros(N, dt)
    req2 = win.Rget_accumulate(_origin(rank, dt, 2), res, right, None, hixl_rma.SUM)
    req2.Wait()
    got_res = res.copy()
    win.Unlock(right)
    barrier(comm)
    final = buf.copy()
    win.Free()
    r1 = _init(right, dt) + _origin(rank, dt, 1)
    np.testing.assert_array_equal(got_res, r1)
    np.testing.assert_array_equal(final, _init(rank, dt) + _origin(left, dt, 1) + _origin(left, dt, 2))


# ------------------------------------------------------------ MAXLOC / MINLOC

@pytest.mark.parametrize("op, pick", [(MPI.MAXLOC, max), (MPI.MINLOC, min)])
def test_maxloc_minloc_on_pair_types(comm, rank, size, op, pick):
    """Every rank accumulates (value, its rank) pairs into rank 0's window;
    MPI's rule: the better value wins, a tie goes to the smaller index."""
    pair = np.dtype([("value", "f8"), ("index", "i4")], align=True)  # MPI.DOUBLE_INT's layout
    assert pair.itemsize == MPI.DOUBLE_INT.Get_extent()[1]
    buf = np.zeros(3, pair)
    buf["value"] = [0.5, -1e9 if op == MPI.MAXLOC else 1e9, 7.0]
    buf["index"] = [99, 99, 99]
    win = Win.Create(buf, disp_unit=pair.itemsize, comm=comm)
    mine = np.zeros(3, pair)
    mine["value"] = [rank % 2, rank, 7.0]  # slot 0: ties between ranks; slot 2: ties with the target
    mine["index"] = rank
    win.Lock(0, hixl_rma.LOCK_SHARED)
    win.Accumulate([mine, 3, MPI.DOUBLE_INT], 0, (0, 3, MPI.DOUBLE_INT), op)
    win.Unlock(0)
    barrier(comm)
    got = buf.copy()
    if rank == 0:
        old = np.zeros(1, pair)
        win.Lock(0, hixl_rma.LOCK_SHARED)
        win.Get_accumulate([mine[:1], 1, MPI.DOUBLE_INT], [old, 1, MPI.DOUBLE_INT], 0,
                           (0, 1, MPI.DOUBLE_INT), MPI.NO_OP)
        win.Unlock(0)
        assert old[0] == got[0]
    win.Lock(0, hixl_rma.LOCK_SHARED)
    with pytest.raises(DatatypeError, match="takes \\(value, index\\) pair types"):
        win.Accumulate(np.zeros(2), 0, None, op)  # not a pair type
    win.Unlock(0)
    barrier(comm)
    win.Free()
    if rank == 0:
        candidates = [(0.5, 99)] + [(r % 2, r) for r in range(size)]
        best = pick(v for v, _ in candidates)
        assert (got[0]["value"], got[0]["index"]) == (best, min(i for v, i in candidates if v == best))
        best1 = pick(range(size))
        assert (got[1]["value"], got[1]["index"]) == (best1, best1)
        assert (got[2]["value"], got[2]["index"]) == (7.0, 0)  # a tie with the target's 99: index 0 wins
