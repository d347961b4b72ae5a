#!/bin/bash
# Multi-GPU checks of issues 8 and 9, on a machine with N >= 2 GPUs (after
# `STAGES=build bash scripts/gpu-check.sh`, which builds build-gpu):
#   equal    N GPUs x B/N environments against 1 GPU x B, same seed, 20
#            updates of the default preset: last.safetensors' weights within
#            1e-5 relative, environments byte-identical
#            (tests/cli/checkpoint_check.py close)
#   scale    env steps/s of 1 GPU at per-GPU batch PB against N GPUs at N x PB
#            (median of the updates after the first two, from metrics.jsonl):
#            the ratio and the efficiency ratio / N
#   killed   an N-GPU run with a checkpoint every 2 updates; once the first is
#            written, rank N-1 is killed (SIGKILL): the seconds until the
#            launcher exits, its status (137) and message, the last
#            checkpoint whole, and a resume from it that trains 2 updates
# Usage: GPUS="2 4" PB=2048 bash scripts/gpu-multi.sh [BUILD]   (logs under $OUT;
# COMMON replaces the flags every run shares)
# Time: about 5 minutes for GPUS=2 on H200s (each run's size is below).
set -uo pipefail
BIN=${1:-build-gpu}/ssmtrade
OUT=${OUT:-/tmp/out}
GPUS=${GPUS:-2}
PB=${PB:-2048}
UPDATES=${UPDATES:-20}
CK="python3 tests/cli/checkpoint_check.py"
mkdir -p "$OUT"
rc=0
common=${COMMON:-"--preset default --rollout 64 --epochs 4 --seed 5 --quiet"}

# steps/s of a run folder: the median over updates 3.. of T*B / seconds
rate() {
  python3 - "$1/metrics.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [rows[i]['env_steps'] - (rows[i - 1]['env_steps'] if i else 0) for i in range(len(rows))]
r = [s / row['seconds'] for s, row in zip(steps, rows)][2:] or [0]
print('%.0f' % statistics.median(r))
EOF
}

for N in $GPUS; do
  echo "== $N GPUs ($(date +%T))"
  # equal: the same total batch
  B=$((256 * N)) # minibatches of 4,096 N windows
  "$BIN" train $common --batch $B --minibatches 4 --updates "$UPDATES" --out /tmp/m_one_$N >"$OUT/equal_one_$N.log" 2>&1 || rc=1
  "$BIN" train $common --batch $B --minibatches 4 --updates "$UPDATES" --gpus "$N" --out /tmp/m_n_$N >"$OUT/equal_n_$N.log" 2>&1 || rc=1
  echo -n "equal ($N x $((B / N)) vs 1 x $B, $UPDATES updates): "
  $CK close /tmp/m_n_$N/last.safetensors /tmp/m_one_$N/last.safetensors 1e-5 || rc=1
  # scale: the same per-GPU batch
  # the same M: minibatches of 64 PB / 16 windows per GPU in both
  "$BIN" train $common --batch "$PB" --minibatches 16 --updates 5 --out /tmp/s_one_$N >"$OUT/scale_one_$N.log" 2>&1 || rc=1
  "$BIN" train $common --batch $((PB * N)) --minibatches 16 --updates 5 --gpus "$N" --out /tmp/s_n_$N >"$OUT/scale_n_$N.log" 2>&1 || rc=1
  one=$(rate /tmp/s_one_$N) many=$(rate /tmp/s_n_$N)
  python3 -c "o, m, n = $one, $many, $N; print('scale: 1 GPU x $PB %d steps/s, %d GPUs x $PB %d steps/s: %.2fx, efficiency %.0f%%' % (o, n, m, m / o, 100 * m / o / n))"
  # killed: a rank dies, the others stop within seconds, the checkpoint resumes
  run=/tmp/k_$N
  rm -rf "$run"
  "$BIN" train $common --batch $((256 * N)) --minibatches 4 --updates 400 --checkpoint-every 2 --gpus "$N" --out "$run" \
    >"$OUT/killed_$N.log" 2>&1 &
  launcher=$!
  for _ in $(seq 600); do [ -f "$run/last.safetensors" ] && break; sleep 0.5; done
  victim=$(pgrep -P $launcher | tail -1)
  if [ -z "$victim" ]; then
    echo "killed: no rank process under the launcher (pid $launcher)"
    kill $launcher; wait $launcher; rc=1; continue
  fi
  t0=$(date +%s.%N)
  kill -9 "$victim"
  wait $launcher
  status=$?
  t1=$(date +%s.%N)
  echo "killed: rank $((N - 1)) (pid $victim) killed; launcher exit $status after $(python3 -c "print('%.1f' % ($t1 - $t0))") s"
  grep -E "rank .* killed|stopping" "$OUT/killed_$N.log" | head -3
  $CK whole "$run/last.safetensors" || rc=1
  up=$($CK update "$run/last.safetensors")
  "$BIN" train --resume "$run/last.safetensors" --updates $((up + 2)) --gpus "$N" --out "$run" --quiet >"$OUT/resume_$N.log" 2>&1
  echo "resume from update $up on $N GPUs: exit $? (checkpoint now at update $($CK update "$run/last.safetensors"))"
done
echo "== done, rc $rc"
exit $rc
