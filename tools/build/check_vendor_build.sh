#!/usr/bin/env bash
# Exercises the HIXL_HOME build path without Ascend hardware (not part of CI:
# it builds everything twice, a few minutes).
#
# It builds a stand-in "vendor" libhixl.so from the built-in engine, lays it
# out as a CANN-like prefix that exposes only include/hixl/hixl.h and
# hixl_types.h (no hixl_ext.h: the binding must build from the vendor API
# alone), installs a copy of this repository against it with
# HIXL_HOME=<prefix> in a throwaway virtualenv, and runs a 2-rank program:
# Put/Get/Fence, PSCW and notified Put work; Lock and Accumulate raise
# UnsupportedError (vendor HIXL has no remote atomics).
# Usage: bash tools/build/check_vendor_build.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
. "$tmp/venv/bin/activate"
pip install -q mpi4py mpich numpy cython "setuptools>=77" wheel libucx-cu12
ucx=$(python -c 'import libucx, os; print(os.path.dirname(libucx.__file__))')
mkdir -p "$tmp/cann/include/hixl" "$tmp/cann/lib"
cp "$repo/src/include/hixl/hixl.h" "$repo/src/include/hixl/hixl_types.h" "$tmp/cann/include/hixl/"
g++ -std=c++17 -O2 -shared -fPIC -I"$repo/src/include" -I"$repo/src/engine" -I"$ucx/include" "$repo"/src/engine/*/*.cc \
    -L"$ucx/lib" -lucp -lucs -Wl,-rpath,"$ucx/lib" -pthread -o "$tmp/cann/lib/libhixl.so"
cp -r "$repo" "$tmp/src"
rm -f "$tmp/src/hixl_rma/_build_config.py" "$tmp/src"/hixl_rma/*.so
HIXL_HOME="$tmp/cann" pip install -q --no-build-isolation "$tmp/src"
cat > "$tmp/check.py" <<'PY'
import numpy as np
from mpi4py import MPI
import hixl_rma
assert hixl_rma.UCX_ORIGIN == "vendor libhixl", hixl_rma.UCX_ORIGIN
assert not hixl_rma._engine.CAPABILITIES, hixl_rma._engine.CAPABILITIES
comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
right, left = (rank + 1) % size, (rank - 1) % size
buf = np.zeros(1024, np.int64)
win = hixl_rma.Win.Create(buf, disp_unit=8, comm=comm)
win.Fence()
win.Put(np.arange(1024, dtype=np.int64) + rank, right)
win.Fence()
assert np.array_equal(buf, np.arange(1024) + left), "Put under Fence"
got = np.zeros(1024, np.int64)
win.Get(got, right)
win.Fence(hixl_rma.MODE_NOSUCCEED)
assert np.array_equal(got, np.arange(1024) + rank), "Get under Fence"
g = [right] if size == 2 else [left, right]
win.Post(g); win.Start(g)
win.Put(np.full(4, 7, np.int64), right, 10)
win.Complete(); win.Wait()
assert (buf[10:14] == 7).all(), "PSCW"
win.Lock_all(hixl_rma.MODE_NOCHECK)
win.Put_notify(np.full(8, 9, np.int64), right, 100, tag=5)
src, tag = win.Wait_notify(tag=5)
assert src == left and (buf[100:108] == 9).all(), "notified Put"
win.Unlock_all()
for call in (lambda: win.Lock(right), lambda: win.Accumulate(np.ones(1, np.int64), right, 0)):
    win.Fence()
    try:
        call()
    except hixl_rma.UnsupportedError as exc:
        assert "atomics" in str(exc), exc
    else:
        raise AssertionError("expected UnsupportedError")
    win.Fence(hixl_rma.MODE_NOSUCCEED)
win.Free()
hixl_rma.Finalize()
print(f"rank {rank}: vendor build OK")
PY
cd "$tmp" && timeout 300 mpiexec -n 2 python check.py
