#!/bin/bash
# gpu-land.sh: a landing candidate checked in one device call when device
# time is short: the build, every GPU test program in quick mode, ours'
# benchmark (no PyTorch: bench/NOTES.md says which call's PyTorch figures
# the ratios use), the training step and e2e with minibatches of segments,
# compute-sanitizer over the programs named in LAND_SANITIZE, then ncu's
# per-kernel times of one training step and one action step, each stage
# with what is left of LAND_BUDGET seconds (default 380).
# Usage on the device (carry the .deps packages and the variant's folder):
#   cd variants/NAME && ln -sfn ../../.deps .deps && bash scripts/gpu-land.sh
# Writes $OUT/land.txt (every stage's summary) and the stages' logs.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((${LAND_BUDGET:-380} - ($(date +%s) - T0))); }
log=$OUT/land.txt
STAGES="build test" SKIP_CUDA_TESTS=test_cuda_learning CTEST_EXCLUDE=".*" SSMTRADE_TEST_QUICK=1 \
  bash scripts/gpu-check.sh >"$OUT/check.txt" 2>&1
grep -E "^test_cuda|^FAIL|error" "$OUT/check.txt" | head -60 | tee "$log"
. scripts/device-env.sh "$PWD"
bin=build-gpu/ssmtrade
[ -x "$bin" ] || exit 1
rows() { grep -E "^ +[0-9]+ +(fp32|bf16)|^== |GRNs"; }
{
  echo "== bench, default minibatches ($(( $(date +%s) - T0 )) s)"
  timeout 120 $bin bench --what train,act --windows 2048,8192 --envs 128,4096 --precision bf16 --repeats 20 \
    --warmup 5 --sets 2 2>&1 | rows
  echo "== bench, --segment 16 ($(( $(date +%s) - T0 )) s)"
  timeout 120 $bin bench --what train,e2e --windows 2048,8192 --e2e-envs 4096 --e2e-updates 1 --precision bf16 \
    --repeats 20 --warmup 5 --sets 2 --segment 16 2>&1 | rows
  echo "== e2e, default minibatches ($(( $(date +%s) - T0 )) s)"
  timeout 60 $bin bench --what e2e --e2e-envs 4096 --e2e-updates 1 --precision bf16 2>&1 | rows
} | tee -a "$log"
if [ -n "${LAND_SANITIZE:-}" ] && [ "$(left)" -gt 90 ]; then
  echo "== sanitize ($(( $(date +%s) - T0 )) s)" | tee -a "$log"
  STAGES=sanitize SANITIZE_ONLY="$LAND_SANITIZE" SANITIZE_BUDGET=$(( $(left) - 70 )) SANITIZE_JOBS=${SANITIZE_JOBS:-12} \
    bash scripts/gpu-check.sh >/dev/null 2>&1
  cat "$OUT/sanitize.txt" | tee -a "$log"
  rm -f "$OUT/sanitize_logs.txt"
fi
if [ "$(left)" -gt 40 ]; then
  echo "== profile ($(( $(date +%s) - T0 )) s)" | tee -a "$log"
  STAGES=profile PROFILE_PRECISION=bf16 PROFILE_WHAT="${LAND_PROFILE:-train --windows 2048|act --envs 128}" \
    timeout $(( $(left) - 5 )) bash scripts/gpu-check.sh >/dev/null 2>&1
fi
echo "gpu-land.sh: done at $(( $(date +%s) - T0 )) s" | tee -a "$log"
