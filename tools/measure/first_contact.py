"""Time of the first contact with a peer: the first Put + Flush, Get + Flush,
Notify, or Fetch_and_op + Flush from rank 0 to rank 1, connect included, in
a job that made nothing but the window before it (each repetition is a
fresh ``mpiexec -n 2``); mpi4py's ``MPI.Win`` first Put + Flush beside it.

    python tools/measure/first_contact.py [--reps 5] [--sizes 1,256] [--ops put,get,notify,fop]

Prints the median, min and max in ms of each (op, window size in MiB).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time


def child(op, mib, mpi):
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    nbytes = (mib << 20) if rank == 1 else 8
    if mpi:
        win = MPI.Win.Allocate(nbytes, comm=comm)
    else:
        import hixl_rma
        hixl_rma.Init()
        win = hixl_rma.Win.Allocate(nbytes, comm=comm)
    win.Lock_all(MPI.MODE_NOCHECK)
    comm.Barrier()
    if rank == 0:
        buf, res = np.ones(1, np.int64), np.zeros(1, np.int64)
        t = time.perf_counter()
        if op == "put":
            win.Put(buf, 1, 0)
            win.Flush(1)
        elif op == "get":
            win.Get(buf, 1, 0)
            win.Flush(1)
        elif op == "notify":
            win.Notify(1, tag=7)
        else:
            win.Fetch_and_op(buf, res, 1, 0)
            win.Flush(1)
        print(f"FIRST {1e3 * (time.perf_counter() - t):.3f}", flush=True)
    elif op == "notify":
        win.Wait_notify(tag=7, source=0)
    win.Unlock_all()
    comm.Barrier()
    win.Free()


def _mpiexec():
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


def measure(op, mib, mpi, reps):
    out = []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "HYDRA_", "OMPI_", "PMIX_"))}
    for _ in range(reps):
        cmd = [_mpiexec(), "-n", "2", sys.executable, os.path.abspath(__file__), "--child", op, str(mib)]
        if mpi:
            cmd.append("--mpi")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("FIRST ")]
        if proc.returncode != 0 or len(lines) != 1:
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
        out.append(float(lines[0].split()[1]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--sizes", default="1,256", help="window sizes of rank 1 in MiB")
    p.add_argument("--ops", default="put,get,notify,fop")
    p.add_argument("--child", nargs=2, metavar=("OP", "MIB"), help=argparse.SUPPRESS)
    p.add_argument("--mpi", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.mpi)
        return 0
    print(f"{'implementation':>14} {'first':>8} {'window':>8} {'median ms':>10} {'min':>8} {'max':>8}")
    for mib in (int(s) for s in args.sizes.split(",")):
        rows = [("hixl_rma", op, False) for op in args.ops.split(",")] + [("mpi4py", "put", True)]
        for name, op, mpi in rows:
            t = measure(op, mib, mpi, args.reps)
            print(f"{name:>14} {op:>8} {mib:>5} MiB {statistics.median(t):10.2f} {min(t):8.2f} {max(t):8.2f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
