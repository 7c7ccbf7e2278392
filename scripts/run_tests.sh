#!/usr/bin/env bash
# The project's test command (README, .ci/run): single-process tests, the
# multi-rank suite under mpiexec with 2 and 3 ranks, its core part again
# over UCX_TLS=tcp, and mpi4py's own RMA suites on hixl_rma.Win. Every step has a hard time limit, so a hung rank fails
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
step() {
  local name=$1; shift
  echo "== $name: $*"
  if ! timeout --kill-after=10 "$LIMIT" "$@"; then failed+=("$name"); fi
}
step single "$PYTEST" -q -p no:cacheprovider tests --ignore=tests/mpi
step mpi-2 "$MPIEXEC" -n 2 "$PYTEST" -q -p no:cacheprovider --with-mpi tests/mpi
step mpi-3 "$MPIEXEC" -n 3 "$PYTEST" -q -p no:cacheprovider --with-mpi tests/mpi
step mpi-2-tcp env UCX_TLS=tcp "$MPIEXEC" -n 2 "$PYTEST" -q -p no:cacheprovider --with-mpi -m core tests/mpi
# mpi4py's own RMA test suites and demos (from the sdist of the installed
# mpi4py) on hixl_rma.Win, at -n 1, 2 and 3, beside plain mpi4py.
step mpi4py-suite python scripts/mpi4py_suite.py --sizes 1,2,3
if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED steps: ${failed[*]}"
  exit 1
fi
echo "all test steps passed"
