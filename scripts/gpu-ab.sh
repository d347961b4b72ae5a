#!/bin/bash
# gpu-ab.sh: several source variants (branches) built, tested and timed in
# one device call, so that their benchmark numbers come from the same
# machine and the same session (bench/NOTES.md's before/after tables).
#
# Here, first: copy each branch's tracked files into variants/NAME (an
# ignored folder; the device tool's `carry` takes it there):
#   bash scripts/gpu-ab.sh --make main=main tiles=wip/ssd-backward-tiles
# On the device (carry [".deps", "variants"]):
#   AB_TESTS="test_cuda_ssd test_cuda_vsn" bash scripts/gpu-ab.sh
# Environment:
#   AB_VARIANTS   the variants, in order (default: every variants/*)
#   AB_TESTS      GPU test programs run in each (default: test_cuda_ssd
#                 test_cuda_vsn test_cuda_mamba2 test_cuda_model test_cuda_trainer);
#                 "all": each variant builds everything and runs every
#                 test_cuda_* it has but test_cuda_learning (so a variant's
#                 new test programs run too)
#   AB_BENCH      flags of `ssmtrade bench` (default: --what train,act
#                 --windows 2048,8192); AB_BENCH=none: no benchmark
#   AB_TIMEOUT    seconds for each test program (default 200)
#   AB_TORCH=1    also bench/torch_bench.py --quick once, after the variants
#                 (same call, same card), and each variant's bench/compare.py
#                 table (ratios, targets) added to ab.txt; torch.json kept
# Writes $OUT/ab.txt (each variant's test lines and benchmark tables) and
# $OUT/NAME.json (the benchmark's numbers); prints ab.txt. Exit status 0
# when every variant built and passed its tests.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = --make ]; then
  shift
  [ $# -gt 0 ] || { echo "usage: $0 --make NAME=BRANCH ..." >&2; exit 2; }
  for spec in "$@"; do
    name=${spec%%=*} ref=${spec#*=}
    case "$name" in "" | *[!A-Za-z0-9_-]*) echo "bad variant name '$name'" >&2; exit 2 ;; esac
    git -C "$ROOT" rev-parse --verify -q "$ref^{commit}" >/dev/null || { echo "no such branch or commit '$ref'" >&2; exit 2; }
    rm -rf "$ROOT/variants/$name" && mkdir -p "$ROOT/variants/$name"
    git -C "$ROOT" archive "$ref" | tar -x -C "$ROOT/variants/$name"
    git -C "$ROOT" rev-parse --short=12 "$ref" >"$ROOT/variants/$name/REVISION"
    echo "variants/$name: $ref ($(cat "$ROOT/variants/$name/REVISION"))"
  done
  du -sh "$ROOT/variants" | awk '{print "variants/ holds " $1 " (the device tool carries at most 64 MiB in all)"}'
  exit 0
fi

OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
. "$ROOT/scripts/device-env.sh" "$ROOT" # the carried packages: LD_LIBRARY_PATH, DEPS_CMAKE
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1
TESTS=${AB_TESTS:-test_cuda_ssd test_cuda_vsn test_cuda_mamba2 test_cuda_model test_cuda_trainer}
BENCH=${AB_BENCH:---what train,act --windows 2048,8192}
VARIANTS=${AB_VARIANTS:-$(cd "$ROOT/variants" 2>/dev/null && ls -d -- */ | tr -d /)}
[ -n "$VARIANTS" ] || { echo "no variants: make them with $0 --make NAME=BRANCH" >&2; exit 2; }
rc=0
: >"$OUT/ab.txt"
say() { echo "$*" | tee -a "$OUT/ab.txt"; }
# every build first, in parallel (the tests and benchmarks then run one at a time: they share the card)
for v in $VARIANTS; do
  src=$ROOT/variants/$v
  (cmake -S "$src" -B "$ROOT/build-ab/$v" -DCMAKE_BUILD_TYPE=Release "${DEPS_CMAKE[@]}" \
    >"/tmp/ab_configure_$v.log" 2>&1 &&
    if [ "$TESTS" = all ]; then
      cmake --build "$ROOT/build-ab/$v" -j8 >"/tmp/ab_build_$v.log" 2>&1
    else
      cmake --build "$ROOT/build-ab/$v" -j8 --target ssmtrade $TESTS >"/tmp/ab_build_$v.log" 2>&1
    fi) &
done
wait
for v in $VARIANTS; do
  b=$ROOT/build-ab/$v
  say "==== $v ($(cat "$ROOT/variants/$v/REVISION" 2>/dev/null || echo "no REVISION"))"
  if [ ! -x "$b/ssmtrade" ]; then
    say "build failed:"
    grep -hE "error" "/tmp/ab_configure_$v.log" "/tmp/ab_build_$v.log" | head -20 | tee -a "$OUT/ab.txt"
    rc=1
    continue
  fi
  tests=$TESTS
  [ "$TESTS" = all ] && tests=$(cd "$b" && ls test_cuda_* | grep -v '^test_cuda_learning$')
  for t in $tests; do
    s0=$(date +%s)
    timeout "${AB_TIMEOUT:-200}" "$b/$t" >"/tmp/ab_${v}_$t.log" 2>&1
    r=$?
    line=$(grep -E "passed, [0-9]+ failed|skipped" "/tmp/ab_${v}_$t.log" | tail -1)
    say "$(printf "%-20s exit %3d %4d s  %s" "$t" "$r" $(($(date +%s) - s0)) "$line")"
    grep -E "^FAIL" "/tmp/ab_${v}_$t.log" | head -10 | tee -a "$OUT/ab.txt"
    [ $r = 0 ] || rc=1
  done
  if [ "$BENCH" != none ]; then
    # shellcheck disable=SC2086
    timeout 240 "$b/ssmtrade" bench $BENCH --json "$OUT/$v.json" >"/tmp/ab_bench_$v.log" 2>&1 || rc=1
    grep -E "^ +(windows|envs) +prec|^ +[0-9]+ +(fp32|bf16)" "/tmp/ab_bench_$v.log" | tee -a "$OUT/ab.txt"
  fi
done
if [ -n "${AB_TORCH:-}" ] && [ "$BENCH" != none ]; then
  export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/torchinductor_ssmtrade}
  say "==== PyTorch (bench/torch_bench.py --quick, after the variants)"
  timeout "${AB_TORCH_TIMEOUT:-300}" python3 "$ROOT/bench/torch_bench.py" --quick --json "$OUT/torch.json" \
    >/tmp/ab_torch.log 2>&1 || { say "torch_bench.py failed: $(tail -3 /tmp/ab_torch.log)"; rc=1; }
  for v in $VARIANTS; do
    [ -f "$OUT/$v.json" ] && [ -f "$OUT/torch.json" ] || continue
    say "==== $v against PyTorch (bench/compare.py)"
    python3 "$ROOT/bench/compare.py" "$OUT/$v.json" "$OUT/torch.json" 2>&1 | grep -E '^\|' | tee -a "$OUT/ab.txt" >/dev/null
  done
fi
exit $rc
