"""Stress: random mixes of Put/Get/Accumulate/Fetch_and_op on the ring
neighbours' windows under every synchronization mode, for a bounded time
(``HIXL_RMA_STRESS_SECONDS``, default 8 s per test, split between the window
flavours), with zero corrupted blocks and zero lost updates.

Window layout (int64 elements): ``NCOUNT`` shared counters, then one section
per world rank; only rank w writes section w (of its left and right
neighbours' windows). A block written by w carries ``(w, seq, block)`` and a
body derived from them, so a torn or misplaced block is detected by anyone.
Each origin keeps a model of what it wrote; Gets of completed blocks are
checked against it at the next completion point, each target checks its
whole window at every round end, and at the end the writers' models are
gathered and compared block by block. Counters: every Accumulate(SUM) and
Fetch_and_op(SUM) increment is tallied at the origin; the tallies are
summed with allreduce and must equal the targets' counters exactly; every
fetched value must be at least what this origin saw and added before.

MPI's rules are kept: a block is not Put twice, nor Put and Get, in one
epoch without a flush in between; accumulates to a counter all use SUM.
"""
import os
import time

import numpy as np
import pytest
from mpi4py import MPI

import hixl_rma
from hixl_rma import Win

from support.mpiutil import barrier

pytestmark = [pytest.mark.mpi(min_size=2), pytest.mark.timeout(120, method="thread")]

SECONDS = float(os.environ.get("HIXL_RMA_STRESS_SECONDS", "8"))
NCOUNT = 8
NBLK = 12          # small blocks per section
BL = 24            # elements per small block
BIG = 8192         # one big block (64 KiB) per section
SEC = NBLK * BL + BIG
MODES = ["fence", "lock_excl", "lock_shared", "lock_all", "pscw"]


def content(w, seq, blk, n):
    out = np.empty(n, np.int64)
    out[0], out[1], out[2] = w, seq, blk
    out[3:] = ((w * 7919 + seq * 104729 + blk * 31 + np.arange(3, n, dtype=np.int64)) * 2654435761) % (1 << 40)
    return out


def block_span(w, blk):
    """(element offset, length) of block blk of writer w's section."""
    base = NCOUNT + w * SEC
    return (base + blk * BL, BL) if blk < NBLK else (base + NBLK * BL, BIG)


class Origin:
    """What this rank wrote, read and added, and the checks it owes."""

    def __init__(self, rank, size, targets, seed):
        self.rank, self.size, self.targets = rank, size, targets
        self.rng = np.random.default_rng(seed)
        self.seq = 0
        self.model = {t: np.zeros(NBLK + 1, np.int64) for t in targets}  # last seq written, 0 = never
        self.dirty = {t: set() for t in targets}  # blocks touched since the last completion
        self.pending_gets = []  # (buffer view, expected array)
        self.tally = np.zeros((size, NCOUNT), np.int64)
        self.seen = np.zeros((size, NCOUNT), np.int64)
        self.bad = []
        self.ops = 0

    def completed(self, t=None):
        """Everything to t (or to all) is complete: check the Gets."""
        for t2 in ([t] if t is not None else self.targets):
            self.dirty[t2].clear()
        keep = []
        for target, view, expect in self.pending_gets:
            if t is not None and target != t:
                keep.append((target, view, expect))
            elif not np.array_equal(np.asarray(view), expect):
                self.bad.append(f"Get from {target}: got {np.asarray(view)[:4]}... expected {expect[:4]}...")
        self.pending_gets = keep

    def one_op(self, win, t):
        rng = self.rng
        kind = rng.choice(["put", "put", "get", "acc", "fao"])
        self.ops += 1
        if kind in ("put", "get"):
            free = [b for b in range(NBLK + 1) if b not in self.dirty[t]]
            if not free:
                kind = "acc"
            else:
                blk = int(rng.choice(free))
                off, n = block_span(self.rank, blk)
                self.dirty[t].add(blk)
                strided = bool(rng.integers(2))
                if kind == "put":
                    self.seq += 1
                    data = content(self.rank, self.seq, blk, n)
                    if strided:
                        buf = np.zeros(2 * n, np.int64)
                        buf[::2] = data
                        origin = buf[::2]
                    else:
                        origin = data
                    win.Put(origin, t, off)
                    self.model[t][blk] = self.seq
                    return
                expect = (content(self.rank, int(self.model[t][blk]), blk, n) if self.model[t][blk]
                          else np.zeros(n, np.int64))
                buf = np.full(2 * n if strided else n, -1, np.int64)
                view = buf[::2] if strided else buf
                win.Get(view, t, off)
                self.pending_gets.append((t, view, expect))
                return
        c = int(rng.integers(NCOUNT))
        v = int(rng.integers(1, 1000))
        self.tally[t, c] += v
        if kind == "acc":
            win.Accumulate(np.array([v], np.int64), t, c, op=hixl_rma.SUM)
        else:
            old = np.zeros(1, np.int64)
            win.Fetch_and_op(np.array([v], np.int64), old, t, c, op=hixl_rma.SUM)
            if old[0] < self.seen[t, c]:
                self.bad.append(f"Fetch_and_op on {t}[{c}] went back: {old[0]} < {self.seen[t, c]}")
            self.seen[t, c] = old[0] + v


def check_window(mem, size, models=None):
    """Every block of every section is zero or intact (and, with the writers'
    models, exactly the last one written). Returns a list of problems."""
    bad = []
    for w in range(size):
        for blk in range(NBLK + 1):
            off, n = block_span(w, blk)
            got = mem[off:off + n]
            want_seq = None if models is None else int(models[w][blk]) if models[w] is not None else 0
            if not got.any():
                if want_seq:
                    bad.append(f"block {blk} of writer {w}: empty, expected seq {want_seq}")
                continue
            seq = int(got[1])
            if got[0] != w or got[2] != blk or not np.array_equal(got, content(w, seq, blk, n)):
                bad.append(f"block {blk} of writer {w}: corrupt header {got[:3].tolist()}")
            elif want_seq is not None and seq != want_seq:
                bad.append(f"block {blk} of writer {w}: seq {seq}, expected {want_seq}")
    return bad


def run_stress(comm, flavor, seconds):
    rank, size = comm.Get_rank(), comm.Get_size()
    right, left = (rank + 1) % size, (rank - 1) % size
    targets = sorted({right, left})
    nelem = NCOUNT + size * SEC
    if flavor == "create":
        mem = np.zeros(nelem, np.int64)
        win = Win.Create(mem, disp_unit=8, comm=comm)
    else:
        win = Win.Allocate(nelem * 8, disp_unit=8, comm=comm)
        mem = np.frombuffer(win.tomemory(), np.int64)
        mem[:] = 0
    barrier(comm)
    me = Origin(rank, size, targets, seed=1000 + rank)
    modes = np.random.default_rng(42)  # the same sequence of modes on every rank
    order = []
    local_bad = []
    rounds = {m: 0 for m in MODES}
    start = time.monotonic()
    go = True
    while go:
        if not order:  # every mode once per cycle, in a shuffled order
            order = list(modes.permutation(MODES))
        mode = order.pop()
        rounds[mode] += 1
        nops = int(me.rng.integers(1, 24))
        if mode == "fence":
            win.Fence()
            for _ in range(nops):
                me.one_op(win, targets[int(me.rng.integers(len(targets)))])
            win.Fence(hixl_rma.MODE_NOSUCCEED)
            me.completed()
        elif mode in ("lock_excl", "lock_shared"):
            lt = hixl_rma.LOCK_EXCLUSIVE if mode == "lock_excl" else hixl_rma.LOCK_SHARED
            for t in targets:
                win.Lock(t, lt)
                for _ in range(max(1, nops // len(targets))):
                    me.one_op(win, t)
                    if me.rng.integers(4) == 0:
                        win.Flush(t)
                        me.completed(t)
                win.Unlock(t)
                me.completed(t)
        elif mode == "lock_all":
            win.Lock_all()
            for _ in range(nops):
                t = targets[int(me.rng.integers(len(targets)))]
                me.one_op(win, t)
                r = me.rng.integers(6)
                if r == 0:
                    win.Flush(t)
                    me.completed(t)
                elif r == 1:
                    win.Flush_all()
                    me.completed()
            win.Unlock_all()
            me.completed()
        else:  # pscw: every rank exposes to and accesses its ring neighbours
            win.Post(targets)
            win.Start(targets)
            for _ in range(nops):
                me.one_op(win, targets[int(me.rng.integers(len(targets)))])
            win.Complete()
            win.Wait()
            me.completed()
        barrier(comm)  # every origin's epoch to me is over: check my window
        local_bad += check_window(mem, size)
        # rank 0 decides whether to go on; the allreduce also keeps everyone
        # from writing again before every target finished checking
        more = time.monotonic() - start < seconds or sum(rounds.values()) < len(MODES)
        go = bool(comm.allreduce(int(more) if rank == 0 else 1, op=MPI.MIN))
    # final exact comparison: the writers' models and the counter tallies
    models = comm.allgather({t: me.model[t] for t in targets})
    mine = [m.get(rank) for m in models]
    local_bad += check_window(mem, size, mine)
    expected = comm.allreduce(me.tally, op=MPI.SUM)
    counters = mem[:NCOUNT].copy()
    lost = int(np.abs(expected[rank] - counters).sum())
    win.Free()
    return me, local_bad, lost, expected[rank], counters, rounds


@pytest.mark.core
def test_stress_all_sync_modes(comm):
    hixl_rma.Init()
    size = comm.Get_size()
    problems, lost_total, ops = [], 0, 0
    for flavor in ("create", "allocate"):
        me, bad, lost, expected, counters, rounds = run_stress(comm, flavor, SECONDS / 2)
        problems += [f"{flavor}: {p}" for p in me.bad + bad]
        lost_total += lost
        ops += me.ops
        assert all(rounds.values()), f"{flavor}: a sync mode never ran: {rounds}"
        if lost:
            problems.append(f"{flavor}: counters {counters.tolist()} != expected {expected.tolist()}")
    problems = [p for part in comm.allgather(problems) for p in part]
    lost_total = comm.allreduce(lost_total)
    ops = comm.allreduce(ops)
    assert ops > 100 * size, f"only {ops} operations in {SECONDS} s"
    assert lost_total == 0, problems
    assert not problems, problems[:20]
