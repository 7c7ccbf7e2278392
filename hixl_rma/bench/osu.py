"""Workload ``osu``: OSU Micro-Benchmarks' nine one-sided tests, in Python.

Run it under MPI with exactly two ranks, as OSU's C programs run::

    mpiexec -n 2 python -m hixl_rma.bench osu put_latency [-w create|allocate|dynamic]
        [-s flush|flush_local|lock|lock_all|fence|pscw] [-m [MIN:]MAX] [-i ITER] [-x SKIP]
        [-W WINDOW] [--impl hixl|mpi]

TEST is one of put_latency, get_latency, put_bw, get_bw, put_bibw,
acc_latency, fop_latency, cas_latency, get_acc_latency (``osu_`` in front
is accepted too). Each is written after OSU's method (OSU 7.4's
``c/mpi/one-sided`` and ``c/util``): the same window kinds, the same
synchronizations for each test (put_bibw takes only the active-target
ones, pscw by default; every other test takes all six, flush by default),
a fresh window per message size, OSU's warm-up and iteration counts
(latency tests 100 + 10,000, bandwidth tests 10 + 100, 10 + 1,000 and 2 + 20
above 8 KiB; ``-i``/``-x`` set both), 64 messages per synchronization in
the bandwidth tests (``-W``), sizes from 1 B to 4 MiB doubling (``-m``),
fetch-and-op and compare-and-swap on one 8-byte integer, and OSU's output:
the same header lines and the same columns, widths and precision, so a
row can be set beside the C OSU's row for the same test on the same
machine. One line more, ``# Implementation: ...``, says which window class
ran: ``hixl_rma.Win`` (the default) or, with ``--impl mpi``, mpi4py's
``MPI.Win``.

Not OSU's: after each size, outside the timed loop, the bytes are checked
(the target holds what was put, the origin what it got, an accumulate
target the sum of every call, a fetch-and-op target the number of calls);
a mismatch is reported and the command exits with status 1. ``--reps`` has
no effect: OSU measures each size once. The timed loops call the window's
methods directly with arguments made before the loop, so what is measured
beyond OSU's C is Python's cost per call (see the performance page).
"""
from __future__ import annotations

import sys
import time

NAME = "osu"
HELP = "OSU Micro-Benchmarks' one-sided tests in Python (mpiexec -n 2)"

#: the OSU release whose method and output these follow
OSU_VERSION = "7.4"

# OSU's defaults (c/util/osu_util.h)
MAX_MESSAGE_SIZE = 1 << 22
MIN_MESSAGE_SIZE = 1
LARGE_MESSAGE_SIZE = 8192
LAT_LOOP_SMALL, LAT_SKIP_SMALL, LAT_LOOP_LARGE, LAT_SKIP_LARGE = 10000, 100, 1000, 10
BW_LOOP_SMALL, BW_SKIP_SMALL, BW_LOOP_LARGE, BW_SKIP_LARGE = 100, 10, 20, 2
WINDOW_SIZE = 64
FIELD_WIDTH, FLOAT_PRECISION = 20, 2

WINDOWS = {"create": "MPI_Win_create", "allocate": "MPI_Win_allocate", "dynamic": "MPI_Win_create_dynamic"}
SYNCS = {"lock": "MPI_Win_lock/unlock", "pscw": "MPI_Win_post/start/complete/wait", "fence": "MPI_Win_fence",
         "flush": "MPI_Win_flush", "flush_local": "MPI_Win_flush_local", "lock_all": "MPI_Win_lock_all/unlock_all"}
ALL_SYNCS = ("flush", "flush_local", "lock", "lock_all", "fence", "pscw")
ACTIVE_SYNCS = ("pscw", "fence")


class Test:
    """One OSU test: its title, kind (lat, bw, bibw), operation, the
    synchronizations it takes and the lock types its flush and lock loops use."""

    def __init__(self, title, kind, op, syncs=ALL_SYNCS, default_sync="flush", flush_lock="shared",
                 lock_lock="shared"):
        self.title, self.kind, self.op = title, kind, op
        self.syncs, self.default_sync = syncs, default_sync
        self.flush_lock, self.lock_lock = flush_lock, lock_lock
        self.atomic = op in ("fop", "cas")  # one 8-byte integer, one row

    @property
    def unit(self):
        return "us" if self.kind == "lat" else "MB/s"


TESTS = {
    "osu_put_latency": Test("MPI_Put Latency Test", "lat", "put"),
    "osu_get_latency": Test("MPI_Get latency Test", "lat", "get"),
    "osu_put_bw": Test("MPI_Put Bandwidth Test", "bw", "put"),
    "osu_get_bw": Test("MPI_Get Bandwidth Test", "bw", "get"),
    "osu_put_bibw": Test("MPI_Put Bi-directional Bandwidth Test", "bibw", "put", ACTIVE_SYNCS, "pscw"),
    "osu_acc_latency": Test("MPI_Accumulate latency Test", "lat", "acc"),
    "osu_fop_latency": Test("MPI_Fetch_and_op latency Test", "lat", "fop", lock_lock="exclusive"),
    "osu_cas_latency": Test("MPI_Compare_and_swap latency Test", "lat", "cas", lock_lock="exclusive"),
    "osu_get_acc_latency": Test("MPI_Get_accumulate latency Test", "lat", "get_acc", flush_lock="exclusive",
                                lock_lock="exclusive"),
}


def _test_name(text: str) -> str:
    import argparse

    name = text if text.startswith("osu_") else "osu_" + text
    if name not in TESTS:
        raise argparse.ArgumentTypeError(
            f"unknown test {text!r} (choose from {', '.join(n[4:] for n in TESTS)}; an osu_ prefix is accepted)")
    return name


def add_arguments(p) -> None:
    p.add_argument("test", type=_test_name, metavar="TEST",
                   help="put_latency, get_latency, put_bw, get_bw, put_bibw, acc_latency, fop_latency, "
                        "cas_latency or get_acc_latency (osu_put_latency ... too)")
    p.add_argument("-w", "--win-option", dest="win", default="allocate", choices=tuple(WINDOWS),
                   help="how windows are made (OSU's default: allocate)")
    p.add_argument("-s", "--sync-option", dest="sync", default=None, choices=ALL_SYNCS,
                   help="synchronization (default: the test's own, as in OSU: flush; put_bibw: pscw)")
    p.add_argument("-m", "--message-size", dest="sizes", default=None, metavar="[MIN:]MAX",
                   help=f"message sizes from MIN to MAX bytes, doubling (default {MIN_MESSAGE_SIZE}:"
                        f"{MAX_MESSAGE_SIZE}); 'MAX', 'MIN:' and ':MAX' as in OSU")
    p.add_argument("-i", "--iterations", type=int, default=None, metavar="ITER",
                   help="timed iterations per size, small and large (default: OSU's)")
    p.add_argument("-x", "--warmup", type=int, default=None, metavar="SKIP",
                   help="warm-up iterations per size, small and large (default: OSU's)")
    p.add_argument("-W", "--window-size", type=int, default=WINDOW_SIZE, metavar="N",
                   help=f"bandwidth tests: messages per synchronization (default {WINDOW_SIZE})")
    p.add_argument("--impl", default="hixl", choices=("hixl", "mpi"),
                   help="hixl_rma.Win (default) or mpi4py's MPI.Win")


def parse_sizes(text: str | None) -> tuple[int, int]:
    """OSU's ``-m``: ``MAX``, ``MIN:MAX``, ``MIN:`` or ``:MAX`` -> (MIN, MAX)."""
    lo, hi = MIN_MESSAGE_SIZE, MAX_MESSAGE_SIZE
    if text is None:
        return lo, hi
    try:
        if ":" not in text:
            hi = int(text)
        else:
            a, b = text.split(":")
            if a:
                lo = int(a)
            if b:
                hi = int(b)
    except ValueError:
        raise SystemExit(f"osu: -m {text}: invalid message size (MAX, MIN:MAX, MIN: or :MAX, in bytes)") from None
    if lo <= 0 or hi < 0:
        raise SystemExit(f"osu: -m {text}: invalid message size (MIN must be at least 1, MAX at least 0)")
    if lo > hi:
        raise SystemExit(f"osu: -m {text}: MIN {lo} is above MAX {hi}, no size to measure")
    return lo, hi


def _settings(args):
    """The run's settings from the command line, checked before MPI starts work."""
    test = TESTS[args.test]
    sync = args.sync or test.default_sync
    if sync not in test.syncs:
        raise SystemExit(f"osu: {args.test} -s {sync}: this test takes -s {'|'.join(test.syncs)} (as OSU's)")
    lo, hi = parse_sizes(args.sizes)
    if args.iterations is not None and args.iterations < 1:
        raise SystemExit(f"osu: -i {args.iterations}: at least 1 iteration")
    if args.warmup is not None and args.warmup < 0:
        raise SystemExit(f"osu: -x {args.warmup}: warm-up iterations cannot be negative")
    if args.window_size < 1:
        raise SystemExit(f"osu: -W {args.window_size}: at least 1 message per synchronization")
    if test.kind == "lat":
        loops = [LAT_LOOP_SMALL, LAT_SKIP_SMALL, LAT_LOOP_LARGE, LAT_SKIP_LARGE]
    else:
        loops = [BW_LOOP_SMALL, BW_SKIP_SMALL, BW_LOOP_LARGE, BW_SKIP_LARGE]
    if args.quick:
        loops = [10, 2, 10, 2]
    if args.iterations is not None:
        loops[0] = loops[2] = args.iterations
    if args.warmup is not None:
        loops[1] = loops[3] = args.warmup
    if test.atomic:
        sizes = [8]
    else:
        sizes = []
        size = lo
        while size <= hi:
            sizes.append(size)
            size *= 2
    return test, sync, sizes, loops


# --------------------------------------------------------------------------- one implementation

def _sleeping_barrier(comm):
    """The idle rank's wait on hixl_rma: a barrier that sleeps between tests
    (up to 1 ms) rather than poll as MPI_Barrier does, so that it leaves the
    cores to the origin and to the engine's progress thread, and that has no
    deadline, so that a long timed loop of one size cannot outlast it."""
    req = comm.Ibarrier()
    pause = 1e-5
    while not req.Test():
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)


class _Impl:
    """The window class and what goes with it: constants, barrier, addresses."""

    def __init__(self, name, comm):
        from mpi4py import MPI

        self.name, self.comm = name, comm
        self.rank = comm.Get_rank()
        self.peer = 1 - self.rank
        if name == "hixl":
            import hixl_rma

            hixl_rma.Init()
            lib = hixl_rma
            self.label = "hixl_rma.Win"
            self.barrier = lambda: _sleeping_barrier(comm)
            self.finalize = hixl_rma.Finalize
        else:
            lib = MPI
            self.label = "mpi4py MPI.Win (" + MPI.Get_library_version().splitlines()[0].strip() + ")"
            self.barrier = comm.Barrier
            self.finalize = lambda: None
        self.Win, self.get_address = lib.Win, lib.Get_address
        self.SUM = lib.SUM
        self.locks = {"shared": lib.LOCK_SHARED, "exclusive": lib.LOCK_EXCLUSIVE}
        self.group = comm.Get_group().Incl([self.peer])

    def window(self, kind, nbytes, dtype):
        """A window of ``nbytes`` on every rank (zeros): (win, local array, target displacement, free)."""
        import numpy as np

        n = nbytes // np.dtype(dtype).itemsize
        comm, Win = self.comm, self.Win
        if kind == "create":
            local = np.zeros(n, dtype)
            win = Win.Create(local, 1, comm=comm)
            return win, local, 0, win.Free
        if kind == "allocate":
            win = Win.Allocate(nbytes, 1, comm=comm)
            local = np.frombuffer(win.tomemory(), dtype, n)
            local[:] = 0
            self.barrier()  # zeroed everywhere before any rank's first access
            return win, local, 0, win.Free
        local = np.zeros(n, dtype)
        win = Win.Create_dynamic(comm=comm)
        win.Attach(local)
        disp = comm.sendrecv(self.get_address(local), dest=self.peer, source=self.peer)

        def free():
            win.Detach(local)
            win.Free()
        return win, local, disp, free


def _pattern(nbytes, rank):
    """The bytes a rank's origin buffer holds (known to its peer, for the check)."""
    import numpy as np

    return ((np.arange(nbytes, dtype=np.int64) * 7 + 3 + 101 * rank) % 251 + 1).astype(np.uint8)


# --------------------------------------------------------------------------- the timed loops

def _latency(impl, test, sync, win, op, args, skip, iters):
    """One size of a latency test: the seconds of ``iters`` iterations on rank 0 (rank 1: 0)."""
    rank, peer, perf = impl.rank, impl.peer, time.perf_counter
    warm, timed = range(skip), range(iters)
    t0 = t1 = 0.0
    if sync in ("flush", "flush_local"):
        if rank == 0:
            done = win.Flush if sync == "flush" else win.Flush_local
            win.Lock(peer, impl.locks[test.flush_lock])
            for _ in warm:
                op(*args)
                done(peer)
            t0 = perf()
            for _ in timed:
                op(*args)
                done(peer)
            t1 = perf()
            win.Unlock(peer)
    elif sync == "lock":
        if rank == 0:
            lock, unlock, lt = win.Lock, win.Unlock, impl.locks[test.lock_lock]
            for _ in warm:
                lock(peer, lt)
                op(*args)
                unlock(peer)
            t0 = perf()
            for _ in timed:
                lock(peer, lt)
                op(*args)
                unlock(peer)
            t1 = perf()
    elif sync == "lock_all":
        if rank == 0:
            lock, unlock = win.Lock_all, win.Unlock_all
            for _ in warm:
                lock(0)
                op(*args)
                unlock()
            t0 = perf()
            for _ in timed:
                lock(0)
                op(*args)
                unlock()
            t1 = perf()
    elif sync == "fence":
        fence = win.Fence
        impl.barrier()
        if rank == 0:
            for _ in warm:
                fence(0)
                op(*args)
                fence(0)
                fence(0)
            t0 = perf()
            for _ in timed:
                fence(0)
                op(*args)
                fence(0)
                fence(0)
            t1 = perf()
        else:
            for _ in range(skip + iters):
                fence(0)
                fence(0)
                op(*args)
                fence(0)
    else:  # pscw: the clock starts after the first timed Start, as OSU's
        start, complete, post, wait, group = win.Start, win.Complete, win.Post, win.Wait, impl.group
        impl.barrier()
        if rank == 0:
            for i in range(skip + iters):
                start(group, 0)
                if i == skip:
                    t0 = perf()
                op(*args)
                complete()
                post(group, 0)
                wait()
            t1 = perf()
        else:
            for _ in range(skip + iters):
                post(group, 0)
                wait()
                start(group, 0)
                op(*args)
                complete()
    return t1 - t0


def _bandwidth(impl, test, sync, win, op, batch, skip, iters):
    """One size of a bandwidth test (``batch``: the argument tuples of one
    window of messages): the seconds of ``iters`` iterations on rank 0."""
    rank, peer, perf = impl.rank, impl.peer, time.perf_counter
    t0 = t1 = 0.0
    if sync in ("flush", "flush_local", "lock", "lock_all"):
        if rank == 0:
            if sync in ("flush", "flush_local"):
                done = win.Flush if sync == "flush" else win.Flush_local
                win.Lock(peer, impl.locks["shared"])
                for i in range(skip + iters):
                    if i == skip:
                        t0 = perf()
                    for a in batch:
                        op(*a)
                    done(peer)
                t1 = perf()
                win.Unlock(peer)
            elif sync == "lock":
                lock, unlock, lt = win.Lock, win.Unlock, impl.locks["shared"]
                for i in range(skip + iters):
                    if i == skip:
                        t0 = perf()
                    lock(peer, lt)
                    for a in batch:
                        op(*a)
                    unlock(peer)
                t1 = perf()
            else:
                lock, unlock = win.Lock_all, win.Unlock_all
                for i in range(skip + iters):
                    if i == skip:
                        t0 = perf()
                    lock(0)
                    for a in batch:
                        op(*a)
                    unlock()
                t1 = perf()
    elif sync == "fence":
        fence = win.Fence
        impl.barrier()
        if rank == 0 or test.kind == "bibw":
            for i in range(skip + iters):
                if i == skip:
                    t0 = perf()
                fence(0)
                for a in batch:
                    op(*a)
                fence(0)
            t1 = perf()
        else:
            for _ in range(skip + iters):
                fence(0)
                fence(0)
    else:  # pscw
        start, complete, post, wait, group = win.Start, win.Complete, win.Post, win.Wait, impl.group
        impl.barrier()
        if test.kind == "bibw":
            for i in range(skip + iters):
                if i == skip:
                    t0 = perf()
                post(group, 0)
                start(group, 0)
                for a in batch:
                    op(*a)
                complete()
                wait()
            t1 = perf()
        elif rank == 0:
            for i in range(skip + iters):
                start(group, 0)
                if i == skip:
                    t0 = perf()
                for a in batch:
                    op(*a)
                complete()
            t1 = perf()
        else:
            for _ in range(skip + iters):
                post(group, 0)
                wait()
    return t1 - t0


# --------------------------------------------------------------------------- one size

def _one_size(impl, test, sync, wkind, size, window_size, skip, iters):
    """Make the window, run the loop, check the bytes, free: (seconds on rank 0, verified here)."""
    import numpy as np

    rank, peer = impl.rank, impl.peer
    both = sync in ("fence", "pscw") and test.kind != "bw"  # both ranks are origins
    bw = test.kind in ("bw", "bibw")
    nbytes = size * window_size if bw else size
    calls = skip + iters
    if test.atomic:
        win, local, disp, free = impl.window(wkind, 8, np.int64)
        origin = np.ones(1, np.int64) if test.op == "fop" else np.full(1, rank + 1, np.int64)
        result = np.zeros(1, np.int64)
        if test.op == "fop":
            op, args = win.Fetch_and_op, (origin, result, peer, disp, impl.SUM)
        else:
            compare = np.zeros(1, np.int64)
            op, args = win.Compare_and_swap, (origin, compare, result, peer, disp)
    else:
        win, local, disp, free = impl.window(wkind, nbytes, np.uint8)
        if test.op == "get":
            local[:] = _pattern(nbytes, rank)
            origin = np.zeros(nbytes, np.uint8)
        elif test.op == "put":
            origin = _pattern(nbytes, rank)
        else:  # acc, get_acc: every call adds ones
            origin = np.ones(nbytes, np.uint8)
            result = np.zeros(nbytes, np.uint8)
        if test.op == "put":
            op = win.Put
        elif test.op == "get":
            op = win.Get
        elif test.op == "acc":
            op = win.Accumulate
        else:
            op = win.Get_accumulate

        def make(lo, hi, target):
            buf = origin[lo:hi]
            if test.op == "acc":
                return (buf, peer, target, impl.SUM)
            if test.op == "get_acc":
                return (buf, result[lo:hi], peer, target, impl.SUM)
            return (buf, peer, target)
        if bw:
            batch = tuple(make(j * size, (j + 1) * size, disp + j * size) for j in range(window_size))
        else:
            args = make(0, size, disp)
    if bw:
        impl.barrier()  # the windows' memory is set on both ranks before anyone writes
        seconds = _bandwidth(impl, test, sync, win, op, batch, skip, iters)
        calls *= window_size
    else:
        if both or test.op == "get":
            impl.barrier()
        seconds = _latency(impl, test, sync, win, op, args, skip, iters)
    impl.barrier()
    # the check: what this rank received as a target, and got as an origin
    received = calls if (both or rank == 1) else 0
    got = rank == 0 or both
    if test.kind == "bibw":
        received, got = calls, True
    if test.op == "fop":
        ok = int(local[0]) == received
    elif test.op == "cas":
        ok = int(local[0]) == (peer + 1 if received else 0)
    elif test.op == "put":
        ok = not received or bool((local == _pattern(nbytes, peer)).all())
    elif test.op == "get":
        ok = not got or bool((origin == _pattern(nbytes, peer)).all())
    else:
        ok = bool((local == received % 256).all())
    impl.barrier()  # every check read before the window goes
    free()
    return seconds, ok


# --------------------------------------------------------------------------- the workload

def _header(test, sync, wkind, impl_label):
    lines = [f"# OSU {test.title} v{OSU_VERSION}",
             f"# Window creation: {WINDOWS[wkind]}",
             f"# Synchronization: {SYNCS[sync]}",
             f"# Implementation: {impl_label} (Python, hixl_rma.bench osu)"]
    column = "Latency (us)" if test.kind == "lat" else "Bandwidth (MB/s)"
    lines.append(f"{'# Size':<10}{column:>{FIELD_WIDTH}}")
    return lines


def row(size: int, value: float) -> str:
    """One row of OSU's output: size left in 10 columns, the figure right in 20, 2 decimals."""
    return f"{size:<10d}{value:>{FIELD_WIDTH}.{FLOAT_PRECISION}f}"


def run(args) -> dict:
    test, sync, sizes, loops = _settings(args)  # bad options end here, on every rank, before MPI work
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() != 2:
        if rank == 0:
            print("osu: this test requires exactly two processes (mpiexec -n 2)", file=sys.stderr)
        return {"ok": False, "quiet": rank != 0}
    impl = _Impl(args.impl, comm)
    header = _header(test, sync, args.win, impl.label)
    if rank == 0:
        print("\n".join(header), flush=True)
    rows, ok = [], True
    iters, skip = loops[0], loops[1]
    for size in sizes:
        if size > LARGE_MESSAGE_SIZE:
            iters, skip = loops[2], loops[3]
        seconds, good = _one_size(impl, test, sync, args.win, size, args.window_size, skip, iters)
        good = comm.allreduce(good, op=MPI.LAND)
        ok &= good
        if rank == 0:
            if test.kind == "lat":
                value = seconds * 1e6 / iters / (2 if sync in ("fence", "pscw") else 1)
            else:
                value = size / 1e6 * iters * args.window_size / seconds * (2 if test.kind == "bibw" else 1)
            rows.append({"size": size, "value": value, "iterations": iters, "skip": skip, "verified": good})
            print(row(size, value), flush=True)
            if not good:
                print(f"# osu: size {size}: the data check failed (the bytes moved are not the expected ones)",
                      file=sys.stderr, flush=True)
    impl.group.Free()
    impl.finalize()
    if rank != 0:
        return {"ok": ok, "quiet": True}
    from hixl_rma.bench import report as rp

    return {"workload": NAME, "test": args.test, "ok": ok, "impl": args.impl, "impl_label": impl.label,
            "window": args.win, "sync": sync, "unit": test.unit, "window_size": args.window_size,
            "header": header, "rows": rows, "verified": ok, "osu_version": OSU_VERSION,
            "machine": rp.machine_info(), "mpi": MPI.Get_library_version().splitlines()[0].strip()}


def report(result) -> None:
    """Nothing more: the header and the rows were printed as they were measured, as OSU prints them."""
