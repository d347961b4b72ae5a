#!/bin/bash
# gpu-final.sh: a session's closing measurement in one device call: the
# whole build, the side-by-side benchmark (bench/gpu-bench.sh: ssmtrade bench
# and torch_bench.py --quick in the same run, bench.md the table), the
# environment and full-PPO throughput (--what envwin,e2e), then with
# whatever time is left before FINAL_BUDGET seconds (default 560) have
# passed: ncu per-kernel times of the runs in FINAL_PROFILE (gpu-check.sh's
# PROFILE_WHAT, bf16) and compute-sanitizer over the programs named in
# FINAL_SANITIZE (gpu-check.sh's SANITIZE_ONLY: PROGRAM, TOOL:PROGRAM or
# TOOL:PROGRAM:PART). The training step and e2e are run once more with
# minibatches of segments (FINAL_SEGMENT, default 16; "" none) into e2e.txt.
# Usage on the device (carry [".deps"]): bash scripts/gpu-final.sh
# Writes under $OUT: build.txt, bench.txt (both benchmarks' output),
# ours.json, torch.json, bench.md, e2e.txt, profile.txt, sanitize.txt (at most 8 files
# come back from the GPU machine).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((${FINAL_BUDGET:-560} - ($(date +%s) - T0))); }
STAGES=build bash scripts/gpu-check.sh >"$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
if [ -z "${FINAL_SKIP_BENCH:-}" ]; then # FINAL_SKIP_BENCH=1: no side-by-side benchmark (a call for the rest)
  SKIP_CHECK=1 OURS_ARGS="--what train,act --windows 2048,8192 --envs 128,4096 --precision fp32,bf16 --repeats 20 --warmup 5 --sets 2" \
    timeout 330 bash bench/gpu-bench.sh >"$OUT/bench.txt" 2>&1
  echo "gpu-bench.sh: exit $? at $(( $(date +%s) - T0 )) s" >>"$OUT/bench.txt"
fi
rm -f "$OUT/gpu.txt" "$OUT/ours.log" "$OUT/torch.log" # their text is in bench.txt
# its JSON off $OUT (8 files come back at most): compare.py merges it into bench.md (the Throughput table and
# the 1e9 / 2e5 targets; bench.md had none when only the train,act JSON reached it)
E2E_JSON=/tmp/e2e.json
rm -f "$E2E_JSON"
timeout 90 build-gpu/ssmtrade bench --what envwin,e2e --e2e-envs 4096 --e2e-updates 1 --precision bf16 \
  --json "$E2E_JSON" >"$OUT/e2e.txt" 2>&1
echo "envwin,e2e: exit $? at $(( $(date +%s) - T0 )) s" >>"$OUT/e2e.txt"
# the training step and e2e with the minibatches as segments (--segment; FINAL_SEGMENT="" skips it), into e2e.txt
if [ -n "${FINAL_SEGMENT-16}" ]; then
  timeout 120 build-gpu/ssmtrade bench --what train,e2e --windows 2048,8192 --e2e-envs 4096 --e2e-updates 1 \
    --precision bf16 --repeats 20 --warmup 5 --sets 2 --segment "${FINAL_SEGMENT-16}" >>"$OUT/e2e.txt" 2>&1
  echo "train,e2e --segment ${FINAL_SEGMENT-16}: exit $? at $(( $(date +%s) - T0 )) s" >>"$OUT/e2e.txt"
fi
if [ -f "$OUT/ours.json" ] && [ -f "$E2E_JSON" ]; then
  python3 bench/compare.py "$OUT/ours.json" "$OUT/torch.json" --more "$E2E_JSON" --md "$OUT/bench.md" >/dev/null 2>>"$OUT/e2e.txt" ||
    echo "compare.py with the envwin,e2e JSON: exit $?" >>"$OUT/e2e.txt"
fi
if [ -n "${FINAL_PROFILE:-}" ] && [ "$(left)" -gt 120 ]; then
  STAGES=profile PROFILE_WHAT="$FINAL_PROFILE" PROFILE_PRECISION=bf16 timeout $(( $(left) - 20 )) \
    bash scripts/gpu-check.sh >/dev/null 2>&1
fi
if [ -n "${FINAL_SANITIZE:-}" ] && [ "$(left)" -gt 60 ]; then
  STAGES=sanitize SANITIZE_ONLY="$FINAL_SANITIZE" SANITIZE_BUDGET=$(( $(left) - 10 )) SANITIZE_JOBS=${SANITIZE_JOBS:-10} \
    bash scripts/gpu-check.sh >/dev/null 2>&1
  rm -f "$OUT/sanitize_logs.txt"
fi
echo "gpu-final.sh: done at $(( $(date +%s) - T0 )) s"
