#!/usr/bin/env bash
# The distribution's checks, one subcommand per step of tools/ci/run_tests.sh.
# Everything lives under DIST_WORK (a directory the caller makes and removes):
#
#   ci_dist.sh build                         sdist + repaired wheel (tools/build/build_wheel.sh) into DIST_WORK/dist
#   ci_dist.sh wheel-venv NAME MPI           a fresh virtualenv DIST_WORK/NAME of the wheel's Python, with no
#                                            compiler on PATH, the wheel installed with [test,MPI] from binaries only
#   ci_dist.sh sdist-venv NAME PYTHON MPI    a fresh virtualenv of PYTHON ("second": see below) with the sdist
#                                            alone built and installed in it, with [test,MPI], from an empty directory
#   ci_dist.sh demo NAME                     README's demo (examples/kv_cache_transfer.py --compare mpi, 2 ranks)
#   ci_dist.sh core NAME N [VAR=VALUE ...]   the core multi-rank suite at -n N, from a copy of tests/mpi (and
#                                            tests/support) outside the repository (so the tests import the
#                                            installed package)
#   ci_dist.sh races NAME                    the race detector's scorer (tools/ci/race_score.py --check)
#
# Every command in a venv runs with PATH = that venv's bin and a directory of
# links to the rest of PATH less the compilers (gcc, g++, cc, c++, clang and
# target-prefixed ones), and from a directory outside the repository; each
# checks first that hixl_rma, its pytest plugin and libucp come from the venv.
# "second" for PYTHON: SECOND_PYTHON, else python3.13 on PATH, else pyenv's
# newest 3.13.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
: "${DIST_WORK:?set DIST_WORK to a directory that the steps share}"
DIST=$DIST_WORK/dist

die() { echo "ci_dist.sh: $*" >&2; exit 1; }

nocc_bin() {  # the directory of links to PATH's programs, compilers left out
  local dir=$DIST_WORK/bin-nocc
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir.tmp"
    local d f name
    IFS=: read -r -a dirs <<< "$PATH"
    for d in "${dirs[@]}"; do
      [ -d "$d" ] || continue
      for f in "$d"/*; do
        name=${f##*/}
        case $name in
          cc | c++ | c89* | c99* | gcc* | g++* | *-gcc* | *-g++* | *-cc | *-c++ | clang* | *-clang* | icc | icx | icpx | tcc) continue ;;
        esac
        [ -x "$f" ] && [ ! -d "$f" ] && [ ! -e "$dir.tmp/$name" ] && ln -s "$f" "$dir.tmp/$name"
      done
    done
    mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

in_venv() {  # in_venv NAME CMD...: CMD with the venv's PATH (no compilers), from RUN_IN or a scratch directory
  local v=$DIST_WORK/$1; shift
  [ -x "$v/bin/python" ] || die "no virtualenv $v (made by the step before)"
  local run=${RUN_IN:-$DIST_WORK/run-${v##*/}}
  mkdir -p "$run"
  (cd "$run" && env -u CC -u CXX PATH="$v/bin:$(nocc_bin)" VIRTUAL_ENV="$v" "$@")
}

check_import() {  # check_import NAME: what the venv's imports resolve to
  in_venv "$1" python - <<'EOF'
import shutil
import sys

import hixl_rma
import hixl_rma._engine
import hixl_rma_pytest

for compiler in ("gcc", "g++", "cc", "c++"):
    assert shutil.which(compiler) is None, f"{compiler} is on PATH: {shutil.which(compiler)}"
for mod in (hixl_rma, hixl_rma._engine, hixl_rma_pytest):
    assert mod.__file__.startswith(sys.prefix + "/"), f"{mod.__name__} from {mod.__file__}, not from {sys.prefix}"
ucp = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libucp.so" in line})
assert ucp and all(p.startswith(sys.prefix + "/") for p in ucp), f"libucp from {ucp}"
print(f"Python {sys.version.split()[0]}; {hixl_rma.__file__}; UCX {'.'.join(map(str, hixl_rma.UCX_VERSION))} "
      f"({hixl_rma.UCX_ORIGIN}) from {ucp[0]}; no compiler on PATH")
EOF
}

wheel_file() {
  local w
  w=$(ls "$DIST"/hixl_rma-*.whl 2>/dev/null | head -n 1) || true
  [ -n "$w" ] || die "no wheel in $DIST (made by the build step)"
  echo "$w"
}

second_python() {
  if [ -n "${SECOND_PYTHON:-}" ]; then echo "$SECOND_PYTHON"; return; fi
  if python3.13 -c "" 2>/dev/null; then command -v python3.13; return; fi
  if command -v pyenv > /dev/null; then
    local v
    v=$(pyenv latest 3.13 2>/dev/null) && [ -x "$(pyenv root)/versions/$v/bin/python3.13" ] &&
      { echo "$(pyenv root)/versions/$v/bin/python3.13"; return; }
  fi
  die "no Python 3.13 found: set SECOND_PYTHON"
}

quiet() {  # CMD...: its output less the pip configuration's notes on absent local indexes
  "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}

new_venv() {  # new_venv NAME PYTHON
  local v=$DIST_WORK/$1
  rm -rf "$v"
  "$2" -m venv "$v"
}

# mpiexec of venv $1, as its MPI wants it: Open MPI's for more ranks than
# cores, and as root only when told (sets the array launcher)
mpi_launcher() {
  launcher=(mpiexec)
  if in_venv "$1" mpiexec --version 2>&1 | grep -qi "open mpi\|open-mpi\|openrte\|prrte"; then
    launcher+=(--oversubscribe)
    [ "$(id -u)" = 0 ] && launcher+=(--allow-run-as-root)
  fi
}

cmd=${1:-}; shift || true
case $cmd in
  build)
    PYTHON=${PYTHON:-python} bash "$REPO/tools/build/build_wheel.sh" "$DIST"
    ;;
  wheel-venv)
    name=$1 mpi=$2 wheel=$(wheel_file)
    # the Python that built the wheel (its tag is that Python's)
    new_venv "$name" "$(python -c 'import sys; print(sys.executable)')"
    quiet in_venv "$name" python -m pip install -q --only-binary=:all: "$wheel[test,$mpi]"
    check_import "$name"
    ;;
  sdist-venv)
    name=$1 py=$2 mpi=$3
    [ "$py" = second ] && py=$(second_python)
    sdist=$(ls "$DIST"/hixl_rma-*.tar.gz 2>/dev/null | head -n 1) || true
    [ -n "$sdist" ] || die "no sdist in $DIST (made by the build step)"
    new_venv "$name" "$py"
    # the compiler is needed here: PATH as it is, and the sdist the only input
    src=$DIST_WORK/sdist-$name
    rm -rf "$src" && mkdir -p "$src"
    (cd "$src" && quiet "$DIST_WORK/$name/bin/python" -m pip install -q "$sdist[test,$mpi]")
    check_import "$name"
    ;;
  demo)
    name=$1
    # the example as a user has it: a script beside no package source
    mkdir -p "$DIST_WORK/run-$name"
    cp "$REPO"/examples/*.py "$DIST_WORK/run-$name/"
    check_import "$name"
    log=$DIST_WORK/run-$name/demo.log
    rc=0
    mpi_launcher "$name"
    in_venv "$name" "${launcher[@]}" -n 2 python kv_cache_transfer.py --compare mpi 2>&1 | tee "$log" || rc=$?
    [ "$rc" -eq 0 ] || die "the demo exited $rc"
    [ "$(grep -c "verification: PASSED" "$log")" -eq 2 ] || die "the demo did not report two verified runs"
    # a good run prints no error line (Open MPI's osc/ucx one: docs/guide/failures.md)
    ! grep -n "Error" "$log" || die "the demo printed an error line on a good run"
    ;;
  core)
    name=$1 n=$2; shift 2
    tests=$DIST_WORK/run-$name/tests-$n
    rm -rf "$tests" && mkdir -p "$tests"
    cp -r "$REPO/tests/mpi" "$tests/mpi"
    cp -r "$REPO/tests/support" "$tests/support"  # its helpers (support.mpiutil)
    # the repository's pytest settings (pyproject.toml) that the suite needs;
    # pythonpath: its folder on sys.path, as tests/ is in the repository
    printf '[pytest]\ntimeout = 120\npythonpath = .\nmarkers =\n    slow: long-running checks\n' > "$tests/pytest.ini"
    mpi_launcher "$name"
    export RUN_IN=$tests
    check_import "$name"
    in_venv "$name" python -c "from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])"
    in_venv "$name" env "$@" "${launcher[@]}" -n "$n" pytest -q -p no:cacheprovider --color=no --with-mpi -m core mpi
    ;;
  races)
    # the race detector scored on its cases with this venv's Python (3.13: its
    # line watch is a sys.monitoring tool, where 3.11's is a trace function)
    name=$1
    check_import "$name"
    in_venv "$name" python "$REPO/tools/ci/race_score.py" --jobs 2 --check
    ;;
  *)
    die "usage: ci_dist.sh build | wheel-venv NAME MPI | sdist-venv NAME PYTHON MPI | demo NAME | core NAME N [VAR=VALUE ...] | races NAME"
    ;;
esac
