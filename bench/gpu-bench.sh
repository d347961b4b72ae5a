#!/bin/bash
# gpu-bench.sh: the side-by-side benchmark on the GPU machine (issue 7), in
# one run: the PyTorch model's float64 self-check, `ssmtrade bench`, the
# PyTorch benchmark, and the comparison table. Everything is logged under
# $OUT (default /tmp/out): gpu.txt, torch_check.log, ours.log, ours.json,
# torch.log, torch.json, bench.md.
#
# Usage on the device, after scripts/gpu-check.sh built the binary:
#   bash bench/gpu-bench.sh [BUILD_DIR]        (default build-gpu)
# Environment:
#   BENCH_FULL=1     every PyTorch mode and size instead of --quick (compiles
#                    14 configurations: well over 5 minutes)
#   OURS_ARGS=...    extra flags for ssmtrade bench (e.g. --what train,act)
#   TORCH_ARGS=...   extra flags for bench/torch_bench.py
#   SKIP_OURS=1, SKIP_TORCH=1, SKIP_CHECK=1   leave a part out
# Exit status: 0 when every part ran, else the first failing part's status.
set -uo pipefail
BUILD=${1:-build-gpu}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/torchinductor_ssmtrade}
. scripts/device-env.sh "$PWD" # the carried Debian packages (OpenBLAS, cJSON) on LD_LIBRARY_PATH
export OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1
rc=0
fail() { [ "$rc" = 0 ] && rc=$1; }
stamp() { echo "[$(date +%H:%M:%S)] $*"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

if [ -z "${SKIP_CHECK:-}" ]; then
  stamp "torch_model.py --check (float64 parity with scripts/torch_reference.py)"
  python3 bench/torch_model.py --check --device cuda >"$OUT/torch_check.log" 2>&1
  c=$?
  grep -E "^-- |SUMMARY" "$OUT/torch_check.log"
  [ $c = 0 ] || { echo "torch self-check failed (status $c): see torch_check.log"; tail -20 "$OUT/torch_check.log"; fail $c; }
fi

if [ -z "${SKIP_OURS:-}" ]; then
  if [ -x "$BUILD/ssmtrade" ]; then
    stamp "ssmtrade bench ${OURS_ARGS:-}"
    # shellcheck disable=SC2086
    "$BUILD/ssmtrade" bench --json "$OUT/ours.json" ${OURS_ARGS:-} >"$OUT/ours.log" 2>&1
    c=$?
    cat "$OUT/ours.log"
    [ $c = 0 ] || { echo "ssmtrade bench exited $c"; fail $c; }
  else
    echo "no $BUILD/ssmtrade: build it first (bash scripts/gpu-check.sh)"
    fail 1
  fi
fi

if [ -z "${SKIP_TORCH:-}" ]; then
  Q=--quick
  [ -n "${BENCH_FULL:-}" ] && Q=
  stamp "torch_bench.py $Q ${TORCH_ARGS:-}"
  # shellcheck disable=SC2086
  python3 bench/torch_bench.py $Q --json "$OUT/torch.json" ${TORCH_ARGS:-} >"$OUT/torch.log" 2>&1
  c=$?
  grep -E "median|FAILED|done|torch " "$OUT/torch.log"
  [ $c = 0 ] || { echo "torch_bench.py exited $c: see torch.log"; tail -30 "$OUT/torch.log"; fail $c; }
fi

if [ -f "$OUT/ours.json" ]; then
  stamp "compare.py"
  python3 bench/compare.py "$OUT/ours.json" "$OUT/torch.json" --md "$OUT/bench.md" || fail $?
fi
stamp "done (status $rc); logs in $OUT"
exit "$rc"
