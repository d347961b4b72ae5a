#!/bin/bash
# gpu-learn.sh: the default preset's learning check (test_cuda_learning: 60
# updates of B = 128, T = 64, then the held-out test split) under several
# train configs side by side on one GPU (each run is small: the card holds
# them at once), one summary a config. For settings that change how PPO
# learns (e.g. --segment), against the same seeds with them off.
# Usage on the device (carry [".deps"]):
#   LEARN_CONFIGS='{"segment":1}|{"segment":16}|{"segment":1,"seed":2}' bash scripts/gpu-learn.sh
# LEARN_CONFIGS: "|"-separated JSON objects of train flags (SSMTRADE_GPU_LEARN_CONFIG);
# LEARN_UPDATES: the budget (default the test's 60). Writes $OUT/learn.txt.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -x build-gpu/test_cuda_learning ] || STAGES=build BUILD_TARGETS=test_cuda_learning bash scripts/gpu-check.sh >"$OUT/build.txt" 2>&1 ||
  { tail -30 "$OUT/build.txt"; exit 1; }
. scripts/device-env.sh "$PWD"
[ -n "${LEARN_UPDATES:-}" ] && export SSMTRADE_GPU_LEARN_UPDATES=$LEARN_UPDATES
def='{"segment":1}'
IFS='|' read -r -a cfgs <<<"${LEARN_CONFIGS:-$def}"
for i in "${!cfgs[@]}"; do
  SSMTRADE_GPU_LEARN_CONFIG="${cfgs[$i]}" OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1 \
    timeout "${LEARN_TIMEOUT:-400}" build-gpu/test_cuda_learning >"/tmp/learn_$i.log" 2>&1 &
done
wait
for i in "${!cfgs[@]}"; do
  echo "== ${cfgs[$i]}"
  grep -E "env steps/s|mean episode R|explained variance|R/bar|margin|passed, [0-9]+ failed|^FAIL" "/tmp/learn_$i.log"
done | tee "$OUT/learn.txt"
