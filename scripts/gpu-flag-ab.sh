#!/bin/bash
# gpu-flag-ab.sh: one build, several `ssmtrade bench` runs that differ by
# switch flags (--scan-quad 0, --vsn-bwd-tc 0, ...), so that each change
# behind a switch is timed against the others in the same call, and
# optionally ncu's per-kernel times of a step under two flag sets.
# On the device (carry [".deps", "variants"], the variant made here with
# `bash scripts/gpu-ab.sh --make NAME=BRANCH`):
#   FLAG_VARIANT=all FLAG_TESTS="test_cuda_ssd" \
#   FLAG_SETS="on:;noquad:--scan-quad 0" FLAG_BENCH="--what train --windows 2048 --precision bf16" \
#   bash scripts/gpu-flag-ab.sh
# Environment:
#   FLAG_VARIANT  the variant (variants/NAME), built by gpu-ab.sh with its tests
#   FLAG_TESTS    GPU test programs run first (gpu-ab.sh's AB_TESTS; "" none)
#   FLAG_SETS     "name:flags;name:flags;...", each a bench run with FLAG_BENCH plus its flags
#   FLAG_BENCH    the flags every run shares
#   FLAG_NCU      "KERNEL_REGEX@BENCH FLAGS": ncu's time of the matching kernels under each
#                 flag set named in FLAG_NCU_SETS (default: the first)
# Writes $OUT/flags.txt (every run's table) and $OUT/NAME.txt; prints flags.txt.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
v=${FLAG_VARIANT:?FLAG_VARIANT: the variant to build}
AB_VARIANTS=$v AB_TESTS=${FLAG_TESTS:-} AB_BENCH=none bash "$ROOT/scripts/gpu-ab.sh" >"$OUT/ab.log" 2>&1
rc=$?
. "$ROOT/scripts/device-env.sh" "$ROOT"
bin=$ROOT/build-ab/$v/ssmtrade
: >"$OUT/flags.txt"
cat "$OUT/ab.txt" >>"$OUT/flags.txt" 2>/dev/null
[ -x "$bin" ] || { echo "no build of $v" | tee -a "$OUT/flags.txt"; exit 1; }
IFS=';' read -r -a sets <<<"${FLAG_SETS:-on:}"
for s in "${sets[@]}"; do
  name=${s%%:*} flags=${s#*:}
  echo "==== $name: ${FLAG_BENCH:-} $flags" | tee -a "$OUT/flags.txt"
  # shellcheck disable=SC2086
  "$bin" bench ${FLAG_BENCH:-} $flags >"$OUT/$name.txt" 2>&1 || rc=1
  grep -E "^ +[0-9]+ +(fp32|bf16)|^== " "$OUT/$name.txt" | tee -a "$OUT/flags.txt"
done
if [ -n "${FLAG_NCU:-}" ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  re=${FLAG_NCU%%@*} what=${FLAG_NCU#*@}
  for s in "${sets[@]}"; do
    name=${s%%:*} flags=${s#*:}
    case " ${FLAG_NCU_SETS:-${sets[0]%%:*}} " in *" $name "*) ;; *) continue ;; esac
    # shellcheck disable=SC2086
    timeout 120 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv -k "regex:$re" \
      "$bin" bench $what $flags --repeats 1 --warmup 0 --sets 1 >"$OUT/ncu_$name.csv" 2>/dev/null
    echo "-- ncu $name: $re" | tee -a "$OUT/flags.txt"
    python3 "$ROOT/bench/ncu_summary.py" "$OUT/ncu_$name.csv" 12 2>&1 | tee -a "$OUT/flags.txt"
  done
fi
exit $rc
