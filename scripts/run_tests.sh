#!/usr/bin/env bash
# The project's test command (README, .ci/run): single-process tests, the
# multi-rank suite under mpiexec with 2 and 3 ranks, its core part again
# over UCX_TLS=tcp, mpi4py's own RMA suites on hixl_rma.Win, and the race
# detector (scored, and silent on the multi-rank suite). Every step has a hard time limit, so a hung rank fails
# the run instead of stalling it; pytest-timeout bounds every test.
set -u
cd "$(dirname "$0")/.."
# Run the installed package: `pytest` (not `python -m pytest`) keeps the
# source tree, which has no compiled extension, off sys.path.
PYTEST=${PYTEST:-pytest}
MPIEXEC=${MPIEXEC:-mpiexec}
LIMIT=${STEP_TIMEOUT:-900}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=()
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
step() {
  local name=$1; shift
  echo "== $name: $*"
  # A copy of the output for the summary; through a process substitution,
  # which the step does not wait for (a stray rank holding a pipe would
  # otherwise stall it past its time limit).
  local rc=0
  timeout --kill-after=10 "$LIMIT" "$@" > >(tee "$logs/$name.log") 2>&1 || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "step $name timed out after $LIMIT s" >> "$logs/$name.timeout"; fi
  if [ "$rc" -ne 0 ]; then failed+=("$name"); fi
}
step single "$PYTEST" -q -p no:cacheprovider tests --ignore=tests/mpi
step mpi-2 "$MPIEXEC" -n 2 "$PYTEST" -q -p no:cacheprovider --with-mpi tests/mpi
step mpi-3 "$MPIEXEC" -n 3 "$PYTEST" -q -p no:cacheprovider --with-mpi tests/mpi
step mpi-2-tcp env UCX_TLS=tcp "$MPIEXEC" -n 2 "$PYTEST" -q -p no:cacheprovider --with-mpi -m core tests/mpi
# mpi4py's own RMA test suites and demos (from the sdist of the installed
# mpi4py) on hixl_rma.Win, at -n 1, 2 and 3, beside plain mpi4py.
step mpi4py-suite python scripts/mpi4py_suite.py --sizes 1,2,3
# The race detector: scored on the RMARaceBench cases (precision 1.0,
# recall >= 0.97), and the multi-rank suite passing under it (its report
# kept in the step's JSON, not failing the step: the suite reads atomics'
# results before a Flush, which MPI calls a race and hixl_rma allows --
# README, "Finding races"; the leak tests measure hixl_rma's memory, which
# the detector's records would add to).
step races-score python scripts/race_score.py --jobs 2 --check
step races-mpi-2 env HIXL_RMA_RACE_JSON="$logs/races-mpi-2.json" "$MPIEXEC" -n 2 "$PYTEST" -q \
  -p no:cacheprovider --with-mpi --hixl-races --ignore=tests/mpi/test_leaks_mpi.py tests/mpi
if [ ${#failed[@]} -ne 0 ]; then
  # Last, so that a CI log's tail names what failed: each failed step's
  # failing tests (one line each, not once per rank) or its last lines.
  for name in "${failed[@]}"; do
    echo "-- $name:"
    cat "$logs/$name.timeout" 2>/dev/null
    { grep -aE '^(FAILED|ERROR) |^failed on rank|Timeout|timed out|Segmentation|Aborted|BAD TERMINATION' \
        "$logs/$name.log" || tail -n 5 "$logs/$name.log"; } | cut -c1-300 | sort -u | head -n 15
  done
  echo "FAILED steps: ${failed[*]}"
  exit 1
fi
echo "all test steps passed"
