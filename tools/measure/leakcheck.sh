#!/usr/bin/env bash
# Leak check of the engine -- slow (tens of minutes), not part of CI.
#
#   bash tools/measure/leakcheck.sh            # from anywhere; needs valgrind
#
# 1. Runs the single-process engine tests (tests/test_engine.py and
#    tests/test_leaks.py: 10,000 register/deregister cycles with a connected
#    peer) under valgrind --leak-check=full, with PYTHONMALLOC=malloc so that
#    Python's own allocator does not hide or fake leaks.
# 2. Sorts valgrind's findings: "definitely lost" blocks and invalid
#    reads/writes/uninitialised uses whose stack passes through our code
#    (hixl_rma/_engine*.so, hixl::) are failures; the rest (CPython, numpy,
#    the dynamic loader, UCX's own one-time allocations) is counted and
#    listed, not failed on.
# 3. Runs the full 10,000 Win.Create/Free cycles of tests/mpi/test_leaks_mpi.py
#    at 2 and 3 ranks (RSS and engine counters; no valgrind).
#
# Logs go to ${LEAKCHECK_OUT:-build/leakcheck}. Exit status 0 when none of
# the findings involves our code and every step passed.
set -u
cd "$(dirname "$0")/../.."
OUT=${LEAKCHECK_OUT:-build/leakcheck}
PYTEST=${PYTEST:-$(command -v pytest)}
PYTHON=${PYTHON:-$(command -v python3)}
MPIEXEC=${MPIEXEC:-mpiexec}
mkdir -p "$OUT"
rm -f "$OUT"/valgrind.*.log
status=0

if ! command -v valgrind >/dev/null; then
  echo "valgrind is not installed (apt-get install valgrind)" >&2
  exit 2
fi

echo "== valgrind: tests/test_engine.py tests/test_leaks.py (logs in $OUT)"
PYTHONMALLOC=malloc HIXL_RMA_LEAK_CYCLES=${HIXL_RMA_LEAK_CYCLES:-10000} HIXL_RMA_LEAK_RSS_MB=0 \
  valgrind --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite \
  --num-callers=40 --log-file="$OUT/valgrind.%p.log" \
  "$PYTEST" -q -p no:cacheprovider -p no:timeout tests/test_engine.py tests/test_leaks.py \
  || { echo "the tests failed under valgrind"; status=1; }

"$PYTHON" - "$OUT" <<'EOF' || status=1
import collections, glob, re, sys
out = sys.argv[1]
ours_pat = re.compile(r"_engine\.cpython|hixl::|HixlImpl|hixl_rma/")
kinds, ours, lost = collections.Counter(), [], 0
for path in sorted(glob.glob(f"{out}/valgrind.*.log")):
    text = open(path).read()
    m = re.findall(r"definitely lost: ([\d,]+) bytes", text)
    lost += sum(int(x.replace(",", "")) for x in m)
    for rec in re.split(r"\n==\d+== \n", text):
        lines = [re.sub(r"^==\d+== ", "", l) for l in rec.strip().splitlines()]
        if not lines:
            continue
        head = lines[0]
        if not re.search(r"Invalid (read|write|free)|uninitialised|definitely lost|Conditional jump|"
                         r"Syscall param|Mismatched|overlap", head):
            continue
        kinds[re.sub(r"\d[\d,]*", "N", head)[:90]] += 1
        if ours_pat.search(rec):
            ours.append(f"{path}:\n  " + "\n  ".join(lines[:30]))
print(f"valgrind findings (all libraries): {sum(kinds.values())}; definitely lost in total: {lost} bytes")
for k, v in kinds.most_common():
    print(f"  {v:5d}  {k}")
if ours:
    print(f"\n{len(ours)} finding(s) in hixl_rma's own code:")
    for r in ours:
        print(r)
    sys.exit(1)
print("none of them in hixl_rma's own code (hixl_rma/_engine*.so, hixl::)")
EOF

for n in 2 3; do
  echo "== $n ranks: 10000 Win.Create/Free cycles"
  HIXL_RMA_LEAK_CYCLES=10000 timeout --kill-after=10 900 "$MPIEXEC" -n "$n" "$PYTEST" -q -p no:cacheprovider \
    --with-mpi -o timeout=600 tests/mpi/test_leaks_mpi.py || status=1
done

[ $status -eq 0 ] && echo "leakcheck: OK" || echo "leakcheck: FAILED"
exit $status
