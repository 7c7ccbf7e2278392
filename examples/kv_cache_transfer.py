"""Prefill -> decode KV-cache transfer, layer by layer, over hixl_rma.

Rank 0 (prefill) produces a paged KV cache one layer at a time and pushes
each layer's K and V blocks into rank 1's (decode) cache window, at the
slots a block table assigns, with one notification per layer; rank 1 waits
per layer (no fence, no lock on its side), verifies the layer as soon as it
lands and records when. ``--mode get`` has decode pull each layer instead,
once prefill notifies that it is ready. ``--compare mpi`` runs the same
transfer over mpi4py's MPI.Win (a Put loop and a Fence per layer).

``--offload MIB`` streams MIB MiB from prefill to decode on a window of
its own, queued ahead of the first layer (an offload of older KV blocks,
say), and runs the transfer three times: alone, beside it with both windows
at priority normal, and beside it with the KV window high and the offload
bulk: the first/last layer times show what the priorities give the KV.

``--notify per-block`` notifies every block (128 per layer by default)
instead of every layer, once as is and once aggregated (info
``notify_batch``), to show what coalescing saves the receiver.

Run: mpiexec -n 2 python examples/kv_cache_transfer.py [--layers 32 --blocks 64
     --block-kib 64 --mode put|get --compare mpi --notify per-layer|per-block --offload MIB]
With more ranks, even ranks are prefill and send to the next odd rank.
Exit code 1 on any mismatch.
"""
import argparse
import os
import sys
import time

# Prefill's compute (--compute-ms) stands for its accelerator's: it keeps to
# this rank's own core instead of taking the other rank's with BLAS threads
# (set before numpy loads its BLAS; a value given in the environment wins).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def _leave_out_osc_ucx(environ=os.environ):
    """Open MPI 5.0's osc/ucx declines a machine without the devices it
    wants (InfiniBand/RoCE, GPU IPC) with an "Error: OSC UCX component ...
    failed" line per window, then MPI.Win runs over osc/rdma: a good run's
    false alarm in --compare mpi. There, before MPI starts, leave osc/ucx out
    (Open MPI's choice is the same); an osc setting of the user's (environment,
    --mca, mca-params.conf) wins. True where it was left out."""
    if "OMPI_COMM_WORLD_SIZE" not in environ or any(
            k.startswith(("OMPI_MCA_osc", "OMPI_MCA_opal_common_ucx")) for k in environ):
        return False
    prefix = environ.get("OPAL_PREFIX", "")
    for conf in (os.path.expanduser("~/.openmpi/mca-params.conf"),
                 os.path.join(prefix, "etc", "openmpi-mca-params.conf") if prefix else ""):
        if conf and os.path.isfile(conf):
            with open(conf) as f:
                if any(line.lstrip().startswith(("osc", "opal_common_ucx")) for line in f):
                    return False
    import glob
    if glob.glob("/sys/class/infiniband/*") or glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd"):
        return False
    environ["OMPI_MCA_osc"] = "^ucx"
    return True


OSC_UCX_LEFT_OUT = _leave_out_osc_ucx()

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import hixl_rma  # noqa: E402


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=None, help="layers (default 32)")
    p.add_argument("--blocks", type=int, default=None,
                   help="KV blocks per layer, each with a K and a V part (default 64; seed: 32)")
    p.add_argument("--block-kib", type=int, default=None, help="bytes of a block in KiB (default 64; seed: 256)")
    p.add_argument("--mode", choices=("put", "get"), default="put")
    p.add_argument("--compare", choices=("mpi", "nixl"), default=None,
                   help="mpi: mpi4py's MPI.Win beside hixl_rma; "
                        "nixl: NVIDIA NIXL on its UCX backend and on HIXL_RMA (when installed)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--notify", choices=("per-layer", "per-block"), default="per-layer",
                   help="per-block: a Put_notify per block (hixl_rma, put), run without and with "
                        "notify_batch (one message per layer)")
    p.add_argument("--offload", type=int, default=0, metavar="MIB",
                   help="a bulk stream of MIB MiB to the same decode rank beside the KV transfer (hixl_rma, put, "
                        "pairs), run once with both windows at priority normal and once with the offload "
                        "window bulk and the KV window high")
    p.add_argument("--compute-ms", type=float, default=0.0,
                   help="prefill computes this long per layer (a numpy kernel) before it sends the layer")
    p.add_argument("--fan", choices=("pairs", "1to2", "2to1"), default="pairs",
                   help="pairs: (0,1), (2,3), ...; 1to2: rank 0 fills the caches of ranks 1 and 2; 2to1: "
                        "ranks 0 and 1 fill rank 2's cache, each with half of the layers (hixl_rma, put)")
    p.add_argument("--preset", choices=("seed",), default=None,
                   help="seed: the HIXL material's experiment (512 tokens x 32 layers x 32 heads x 128 dims, "
                        "K and V, 4 bytes) on every implementation, as one table")
    args = p.parse_args(argv)
    if args.notify == "per-block" and (args.mode != "put" or args.preset or args.fan != "pairs"):
        p.error("--notify per-block is a variant of hixl_rma's put mode (pairs, no preset)")
    if args.offload and (args.mode != "put" or args.preset or args.fan != "pairs" or args.notify != "per-layer"):
        p.error("--offload is a variant of hixl_rma's put mode (pairs, per-layer notifications, no preset)")
    if args.offload < 0:
        p.error("--offload must be a number of MiB >= 0")
    args.notify_batch = 1
    args.priorities = None
    # seed: K (or V) of one layer is 32 heads x (512 tokens x 128 dims x 4 bytes) = 32 blocks of 256 KiB.
    defaults = (32, 32, 256) if args.preset == "seed" else (32, 64, 64)
    for name, value in zip(("layers", "blocks", "block_kib"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def compute(ms):
    """Prefill's work on a layer: ``ms`` of real computation (float32
    matrix products), not a sleep."""
    if ms <= 0:
        return
    a = np.full((128, 128), 1.0 / 128, np.float32)
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        a = a @ a + np.float32(1.0 / 128)
        a *= np.float32(0.5)


class Clock:
    """Wall time and this process's CPU time (every thread: progress and
    helper threads count) since the timed part began."""

    def __init__(self):
        self.wall, self.cpu = time.monotonic(), time.process_time()

    def share(self):
        """CPU time over wall time: the fraction of one core used."""
        return (time.process_time() - self.cpu) / max(time.monotonic() - self.wall, 1e-9)


class Layout:
    """Shapes, the block table and the deterministic content of the cache."""

    def __init__(self, args):
        self.layers, self.blocks = args.layers, args.blocks
        self.block_bytes = args.block_kib * 1024
        self.per_layer = 2 * self.blocks  # K and V blocks
        self.slots = self.layers * self.per_layer
        rng = np.random.default_rng(args.seed)
        # Decode's paged cache: block (layer, kv, b) lives at slot table[layer, kv*blocks + b].
        self.table = rng.permutation(self.slots).reshape(self.layers, self.per_layer)
        self._pattern = rng.integers(0, 256, self.block_bytes, dtype=np.uint8)

    def layer(self, i):
        """Prefill's K/V blocks of layer i: (2*blocks, block_bytes) uint8, deterministic."""
        salt = ((np.arange(self.per_layer) * 31 + i * 7) % 256).astype(np.uint8)
        return self._pattern[None, :] + salt[:, None]

    def produce(self):
        """The whole cache prefill computed: (layers, 2*blocks, block_bytes)."""
        return np.stack([self.layer(i) for i in range(self.layers)])

    @property
    def nbytes(self):
        return self.slots * self.block_bytes


_SAMPLES = 9  # words checked per block on arrival, first and last included


def checksum(blocks, rows=None):
    """The on-arrival check of a layer: a wrapping uint64 sum over 9 words
    spread over each block, its first and last among them (the rows of the
    2-D uint8 array ``blocks``, or the given rows of it), gathered without
    copying the layer. A block copied in order shows its last word last, so
    this catches a block seen before it landed, at a cost the receiver does
    not notice; every byte is compared after the run (verify)."""
    words = blocks.view(np.uint64)
    n = words.shape[-1]
    cols = np.arange(_SAMPLES) * (n - 1) // (_SAMPLES - 1)
    rows = np.arange(words.shape[0]) if rows is None else np.asarray(rows)
    return int(words[rows[:, None], cols[None, :]].sum(dtype=np.uint64))


def verify(lay, layer_data):
    """Full comparison against freshly generated content, after the timed run."""
    return all(np.array_equal(layer_data(i), lay.layer(i)) for i in range(lay.layers))


def run_hixl(args, lay, comm, peer, prefill, sums):
    """One transfer over hixl_rma.Win; returns decode's (arrivals, ok)."""
    Win = hixl_rma.Win
    nb = lay.block_bytes
    per_block = args.notify == "per-block"
    info = {"notify_batch": str(args.notify_batch)}
    offload = None
    if args.offload:
        # The offload stream's own window, at bulk priority (or normal, to compare), the KV cache's high.
        kv_prio, off_prio = args.priorities
        info["priority"] = kv_prio
        chunk = min(args.offload, 64) << 20
        offload = Win.Allocate(0 if prefill else chunk, comm=comm, info={"priority": off_prio})
        offload.Lock_all(hixl_rma.MODE_NOCHECK)
        if prefill:
            off_src = np.full(chunk, 0x5A, np.uint8)
            off_offs = np.array([[0, chunk]], np.int64)
    if prefill:
        kv = lay.produce()
        # get mode: prefill's own cache is the window decode reads from.
        win = Win.Allocate(lay.nbytes if args.mode == "get" else 0, comm=comm, info=info)
        if args.mode == "get":
            # Its compute writes each layer there (the loop's compute() stands
            # for that): the bytes are in place before the timed part, as
            # put mode's source is.
            src = np.frombuffer(win.tomemory(), np.uint8).reshape(kv.shape)
            src[:] = kv
    else:
        win = Win.Allocate(lay.nbytes, comm=comm, info=info)
        cache = np.frombuffer(win.tomemory(), np.uint8).reshape(lay.slots, nb)
        pulled = np.ones((lay.layers, lay.per_layer, nb), np.uint8)  # touched: no page faults timed
    offsets = np.stack([np.arange(lay.per_layer) * nb, np.full(lay.per_layer, nb)], axis=1)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    # What a server does once at start-up: connect to the peer (handshake,
    # endpoint, its memory table with the cache window, mapped when it can
    # be). No transfer before the timed part.
    hixl_rma.Connect([peer], comm)
    comm.Barrier()
    clock = Clock()
    t0 = clock.wall
    arrivals, ok = [], True
    if offload is not None and prefill:
        # Queued ahead of the first layer: the engine's queues must let the layers pass it.
        for _ in range(max(1, (args.offload << 20) // chunk)):
            offload.Put_batch((off_src, off_offs), peer, np.zeros(1, np.int64))
    for i in range(lay.layers):
        if prefill:
            compute(args.compute_ms)
        if prefill and args.mode == "put" and per_block:
            # A notification per block: the receiver can start on each block as it lands.
            for j, slot in enumerate(lay.table[i]):
                win.Put_notify(kv[i, j], peer, int(slot) * nb, tag=i * lay.per_layer + j)
        elif prefill and args.mode == "put":
            # One batch per layer into decode's slots, notified once it landed.
            win.Put_batch((kv[i], offsets), peer, lay.table[i] * nb, tag=i)
        elif prefill:
            win.Notify(peer, tag=i)  # the layer is computed into the exposed cache
        elif per_block:
            tags = win.Wait_notify_all(lay.per_layer, source=peer)  # a sender's tags come in order
            arrivals.append(time.monotonic() - t0)
            ok &= [t for _, t in tags] == list(range(i * lay.per_layer, (i + 1) * lay.per_layer))
            ok &= checksum(cache, lay.table[i]) == sums[i]
        else:
            win.Wait_notify(tag=i, source=peer)
            if args.mode == "put":
                arrivals.append(time.monotonic() - t0)
                ok &= checksum(cache, lay.table[i]) == sums[i]
            else:
                win.Get_batch((pulled[i], offsets), peer, (i * lay.per_layer + np.arange(lay.per_layer)) * nb)
                win.Flush(peer)
                arrivals.append(time.monotonic() - t0)
                ok &= checksum(pulled[i]) == sums[i]
    cpu = clock.share() if not prefill else None
    if prefill:
        win.Flush(peer)  # the last layer landed: prefill's part is done
        cpu = clock.share()
    win.Unlock_all()
    if offload is not None:
        if prefill:
            offload.Flush(peer)
        offload.Unlock_all()
    comm.Barrier()
    if not prefill:
        ok &= verify(lay, (lambda i: cache[lay.table[i]]) if args.mode == "put" else (lambda i: pulled[i]))
    if offload is not None:
        if not prefill:
            ok &= bool(np.all(np.frombuffer(offload.tomemory(), np.uint8) == 0x5A))
        offload.Free()
    win.Free()
    return arrivals, ok, cpu


def run_mpi(args, lay, comm, peer, prefill, sums):
    """The same transfer over mpi4py's MPI.Win: a Put (or Get) loop and a Fence per layer."""
    nb = lay.block_bytes
    if prefill:
        kv = lay.produce()
    mem = MPI.Alloc_mem(lay.nbytes if (not prefill or args.mode == "get") else 1)
    win = MPI.Win.Create(mem, 1, comm=comm)
    if prefill and args.mode == "get":
        np.frombuffer(mem, np.uint8).reshape(kv.shape)[:] = kv  # computed in place, as in run_hixl
    if not prefill:
        cache = np.frombuffer(mem, np.uint8).reshape(lay.slots, nb)
        pulled = np.ones((lay.layers, lay.per_layer, nb), np.uint8)
    win.Fence()
    comm.Barrier()
    clock = Clock()
    t0 = clock.wall
    arrivals, ok = [], True
    for i in range(lay.layers):
        if prefill:
            compute(args.compute_ms)
        if prefill and args.mode == "put":
            for j, slot in enumerate(lay.table[i]):
                win.Put(kv[i, j], peer, int(slot) * nb)
        if args.mode == "get":
            win.Fence()  # prefill's layer is ready
            if not prefill:
                for j in range(lay.per_layer):
                    win.Get(pulled[i, j], peer, (i * lay.per_layer + j) * nb)
        win.Fence()
        if not prefill:
            arrivals.append(time.monotonic() - t0)
            ok &= (checksum(cache, lay.table[i]) if args.mode == "put" else checksum(pulled[i])) == sums[i]
    cpu = clock.share()
    win.Fence(MPI.MODE_NOSUCCEED)
    if not prefill:
        ok &= verify(lay, (lambda i: cache[lay.table[i]]) if args.mode == "put" else (lambda i: pulled[i]))
    win.Free()
    MPI.Free_mem(mem)
    return arrivals, ok, cpu


def run_sendrecv(args, lay, comm, peer, prefill, sums):
    """mpi4py two-sided: prefill sends each layer (K and V blocks in one
    message), decode receives it and places the blocks at their slots."""
    nb = lay.block_bytes
    if prefill:
        kv = lay.produce()
    else:
        cache = np.zeros((lay.slots, nb), np.uint8)
        layer = np.ones((lay.per_layer, nb), np.uint8)
    comm.Barrier()
    clock = Clock()
    t0 = clock.wall
    arrivals, ok, reqs = [], True, []
    for i in range(lay.layers):
        if prefill:
            compute(args.compute_ms)
            reqs.append(comm.Isend(kv[i], dest=peer, tag=i))
        else:
            comm.Recv(layer, source=peer, tag=i)
            cache[lay.table[i]] = layer  # into the paged cache
            arrivals.append(time.monotonic() - t0)
            ok &= checksum(cache, lay.table[i]) == sums[i]
    MPI.Request.Waitall(reqs)
    cpu = clock.share()
    comm.Barrier()
    if not prefill:
        ok &= verify(lay, lambda i: cache[lay.table[i]])
    return arrivals, ok, cpu


def run_fan(args, lay, comm, sums):
    """One prefill into two decodes (1to2), or two prefills into one decode's
    cache, alternate layers each (2to1), over hixl_rma.Win: Put_batch per
    layer, notified; each decode verifies what it receives. Returns this
    rank's {(prefill, decode): (arrivals, bytes)} and whether all it got is right."""
    rank = comm.Get_rank()
    prefills, decodes = ([0], [1, 2]) if args.fan == "1to2" else ([0, 1], [2])
    owner = {i: prefills[i % len(prefills)] for i in range(lay.layers)}  # who sends layer i
    nb = lay.block_bytes
    offsets = np.stack([np.arange(lay.per_layer) * nb, np.full(lay.per_layer, nb)], axis=1)
    win = hixl_rma.Win.Allocate(lay.nbytes if rank in decodes else 0, comm=comm)
    if rank in prefills:
        kv = lay.produce()
    if rank in decodes:
        cache = np.frombuffer(win.tomemory(), np.uint8).reshape(lay.slots, nb)
    win.Lock_all(hixl_rma.MODE_NOCHECK)
    hixl_rma.Connect(decodes if rank in prefills else prefills, comm)
    comm.Barrier()
    t0 = time.monotonic()
    got, ok = {}, True
    for i in range(lay.layers):
        if rank == owner[i]:
            for d in decodes:
                win.Put_batch((kv[i], offsets), d, lay.table[i] * nb, tag=i)
        elif rank in decodes:
            win.Wait_notify(tag=i, source=owner[i])
            arrivals, nbytes = got.setdefault((owner[i], rank), ([], 0))
            arrivals.append(time.monotonic() - t0)
            got[(owner[i], rank)] = (arrivals, nbytes + lay.per_layer * nb)
            ok &= checksum(cache, lay.table[i]) == sums[i]
    win.Unlock_all()
    comm.Barrier()
    if rank in decodes:
        ok &= verify(lay, lambda i: cache[lay.table[i]])
    win.Free()
    return got, ok


def report_fan(args, lay, every):
    """Per pair and in total, from every decode's {(prefill, decode): (arrivals, bytes)}."""
    total, last = 0, 0.0
    for pairs, ok in every:
        for (p, d), (arrivals, nbytes) in sorted(pairs.items()):
            total, last = total + nbytes, max(last, arrivals[-1])
            print(f" hixl_rma  fan={args.fan}  rank {p} -> rank {d}  {len(arrivals)} layers  "
                  f"{nbytes / 2**20:.1f} MiB  {nbytes / arrivals[-1] / 1e9:6.2f} GB/s  "
                  f"first layer {arrivals[0] * 1e3:7.2f} ms  last layer {arrivals[-1] * 1e3:7.2f} ms  "
                  f"verification: {'PASSED' if ok else 'FAILED'}")
    print(f" hixl_rma  fan={args.fan}  total  {total / 2**20:.1f} MiB  {total / last / 1e9:6.2f} GB/s  "
          f"last layer {last * 1e3:7.2f} ms")


def report(name, mode, args, lay, arrivals, ok, cpus):
    total = lay.nbytes
    last = arrivals[-1]
    extra = ""
    if args.notify == "per-block" and name == "hixl_rma":
        extra = f"  {lay.per_layer} notifies/layer, notify_batch {args.notify_batch}"
    if args.offload and name == "hixl_rma":
        extra = (f"  offload {args.offload} MiB beside, priorities kv={args.priorities[0]} "
                 f"offload={args.priorities[1]}" if args.priorities else "  no offload")
    if args.compute_ms > 0:
        alone = lay.layers * args.compute_ms
        extra = (f"  compute alone {alone:7.2f} ms ({(last * 1e3) / alone:4.2f}x)")
    print(f"{name:>9}  mode={mode}  {lay.layers} layers x {lay.per_layer} blocks x {args.block_kib} KiB = "
          f"{total / 2**20:.1f} MiB  {total / last / 1e9:6.2f} GB/s  first layer {arrivals[0] * 1e3:7.2f} ms  "
          f"last layer {last * 1e3:7.2f} ms  CPU prefill {100 * cpus[0]:5.1f} % decode {100 * cpus[1]:5.1f} %"
          f"{extra}  verification: {'PASSED' if ok else 'FAILED'}")


# What each row of report() says, in its order: printed once above the rows.
HEADER = ("  backend  mode       layers x blocks x block = total   GB/s   first layer / last layer arrived (ms)   "
          "CPU of prefill and decode ranks   verification")


def _runs(args):
    """What one invocation runs: (name, mode, function, argument overrides)."""
    if args.preset == "seed":
        return [("hixl_rma", "put", run_hixl, {}), ("hixl_rma", "get", run_hixl, {}),
                ("mpi4py", "send", run_sendrecv, {}), ("mpi4py", "put", run_mpi, {}),
                *_nixl_runs(("put", "get"))]
    if args.notify == "per-block":
        # The same per-block notifications sent one by one, then one message per layer.
        return [("hixl_rma", "put", run_hixl, {"notify_batch": 1}),
                ("hixl_rma", "put", run_hixl, {"notify_batch": 2 * args.blocks})]
    if args.offload:
        # Alone, then beside the offload stream without and with priorities.
        return [("hixl_rma", "put", run_hixl, {"offload": 0}),
                ("hixl_rma", "put", run_hixl, {"priorities": ("normal", "normal")}),
                ("hixl_rma", "put", run_hixl, {"priorities": ("high", "bulk")})]
    beside = {"mpi": [("mpi4py", args.mode, run_mpi, {})], "nixl": _nixl_runs((args.mode,))}
    return [("hixl_rma", args.mode, run_hixl, {}), *beside.get(args.compare, [])]


# NIXL on its own UCX backend and on HIXL_RMA (hixl_rma's engine as a NIXL
# plugin): the same script, only the backend differs.
NIXL_BACKENDS = ("UCX", "HIXL_RMA")


def _nixl_runs(modes):
    return [(f"nixl/{b}", mode, run_nixl, {"backend": b}) for mode in modes for b in NIXL_BACKENDS]


def run_nixl(args, lay, comm, peer, prefill, sums):
    """The same transfer over NVIDIA NIXL (kv_nixl.py: backend args.backend, DRAM)."""
    import kv_nixl
    return kv_nixl.run_nixl(args, lay, comm, peer, prefill, sums)


def nixl_missing(comm, backend):
    """Why NIXL on `backend` cannot run here (the same answer on every rank of comm), or None."""
    try:
        import kv_nixl
    except ImportError as exc:
        return f"examples/kv_nixl.py cannot be imported: {exc}"
    ok, why = kv_nixl.available(comm, backend)
    return None if ok else why


def main(argv=None):
    args = parse(argv)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        print("kv_cache_transfer needs at least 2 ranks (mpiexec -n 2 ...)", file=sys.stderr)
        return 2
    lay = Layout(args)
    hixl_rma.Init()  # collective over COMM_WORLD, before the pairs split off
    if args.fan != "pairs":
        if size < 3:
            print(f"--fan {args.fan} needs 3 ranks (mpiexec -n 3 ...)", file=sys.stderr)
            return 2
        three = comm.Split(0 if rank < 3 else MPI.UNDEFINED, rank)  # ranks past the third sit out
        ok = True
        if three != MPI.COMM_NULL:
            sums = three.bcast([checksum(lay.layer(i)) for i in range(lay.layers)], root=0)
            got, ok = run_fan(args, lay, three, sums)
            every = three.gather((got, ok), root=0)
            if rank == 0:
                report_fan(args, lay, [e for e in every if e[0]])
            three.Free()
        return 0 if comm.allreduce(ok, op=MPI.LAND) else 1
    # Pairs (0,1), (2,3), ...; an odd rank left over sits out (color UNDEFINED).
    pair = rank // 2 if rank < size - size % 2 else MPI.UNDEFINED
    sub = comm.Split(pair, rank)
    results = {}
    if sub != MPI.COMM_NULL:
        prefill = sub.Get_rank() == 0
        peer = 1 - sub.Get_rank()
        # Decode checks each layer on arrival against prefill's checksums.
        sums = sub.bcast([checksum(lay.layer(i)) for i in range(lay.layers)] if prefill else None, root=0)
        runs = _runs(args)
        for backend in NIXL_BACKENDS:
            name = f"nixl/{backend}"
            if any(r[0] == name for r in runs):
                why = nixl_missing(sub, backend)
                if why is not None:
                    runs = [r for r in runs if r[0] != name]
                    if not prefill:
                        print(f"{name:>9}  skipped: {why}", flush=True)
        if not prefill and runs:
            print(HEADER, flush=True)
        for name, mode, fn, extra in runs:
            run_args = argparse.Namespace(**{**vars(args), "mode": mode, **extra})
            arrivals, ok, cpu = fn(run_args, lay, sub, peer, prefill, sums)
            cpus = sub.gather(cpu, root=1)  # [prefill's, decode's]
            results[(name, mode, tuple(extra.items()))] = ok
            if not prefill:
                report(name, mode, run_args, lay, arrivals, ok, cpus)
        if rank == 1 and OSC_UCX_LEFT_OUT and any(fn is run_mpi for _, _, fn, _ in runs):
            print("   (MPI.Win: Open MPI's osc/ucx left out, as it declines a machine without "
                  "InfiniBand or GPU devices; docs: guide/failures)", flush=True)
        sub.Free()
    ok = all(results.values())
    return 0 if comm.allreduce(ok, op=MPI.LAND) else 1


if __name__ == "__main__":
    sys.exit(main())
