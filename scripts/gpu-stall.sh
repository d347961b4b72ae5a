#!/bin/bash
# gpu-stall.sh: where a kernel's warps wait, line by line (ncu's warp-state
# sampling joined to the CUDA source lines; the build has -lineinfo), for
# the kernels named in STALL_KERNELS, each in the run that launches it.
# Usage on the device (carry [".deps"]):
#   STALL_KERNELS="scan_backward_kernel=train --windows 2048|vsn_bwd_fused_kernel=train --windows 2048" \
#     bash scripts/gpu-stall.sh
# Each entry is NAME=ARGS of `ssmtrade bench --what ARGS` (bf16, one repeat);
# the first launch of NAME is profiled with the WarpStateStats, SourceCounters,
# Occupancy, LaunchStats and SpeedOfLight sections. Writes under $OUT, per
# kernel: NAME.details.txt (ncu's details page: the stall reasons of the
# kernel as a whole) and NAME.lines.txt (bench/ncu_stall_lines.py: the
# source lines that hold most of the samples, with each line's text);
# stall_csv.tar.gz: the source pages themselves.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
[ -x build-gpu/ssmtrade ] || STAGES=build BUILD_TARGETS=ssmtrade bash scripts/gpu-check.sh >"$OUT/build.txt" 2>&1 ||
  { tail -30 "$OUT/build.txt"; exit 1; }
. scripts/device-env.sh "$PWD"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
IFS='|' read -r -a runs <<<"${STALL_KERNELS:-scan_backward_kernel=train --windows 2048}"
for run in "${runs[@]}"; do
  name=${run%%=*} what=${run#*=}
  rep=/tmp/stall_$name
  rm -f "$rep.ncu-rep"
  # shellcheck disable=SC2086
  timeout 240 "$NCU" --clock-control none -k "regex:$name" --launch-count 1 --import-source yes \
    --section WarpStateStats --section SourceCounters --section Occupancy --section LaunchStats \
    --section SpeedOfLight --section SchedulerStats -o "$rep" \
    build-gpu/ssmtrade bench --what $what --precision bf16 --repeats 1 --warmup 0 --sets 1 >"/tmp/stall_$name.log" 2>&1 ||
    { echo "ncu on $name: exit $?"; tail -5 "/tmp/stall_$name.log"; continue; }
  "$NCU" -i "$rep.ncu-rep" --page details >"$OUT/$name.details.txt" 2>&1
  # the CUDA-source page of CUDA 13.0's ncu came back with the lines' text and no metric columns
  # (2026-12-02): the SASS page (an instruction a row, with its samples) is read first, the
  # CUDA page kept beside it for the lines' text
  "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source sass >"/tmp/stall_$name.sass.csv" 2>&1
  "$NCU" -i "$rep.ncu-rep" --page source --csv --print-source cuda,sass >"/tmp/stall_$name.cuda.csv" 2>&1
  : >"$OUT/$name.lines.txt"
  for page in sass cuda; do
    echo "-- the $page page" >>"$OUT/$name.lines.txt"
    python3 bench/ncu_stall_lines.py "/tmp/stall_$name.$page.csv" --top "${STALL_TOP:-60}" >>"$OUT/$name.lines.txt" 2>&1 ||
      { echo "ncu_stall_lines.py on $name ($page): exit $?"; head -c 2000 "/tmp/stall_$name.$page.csv" >>"$OUT/$name.lines.txt"; }
  done
  echo "== $name ($what)"
  grep -iE 'Duration|Warp Cycles Per Issued|Achieved Occupancy|Theoretical Occupancy|Registers Per|Issued Warp|No Eligible' \
    "$OUT/$name.details.txt" | head -12
  head -25 "$OUT/$name.lines.txt"
done
# the raw source pages, for a closer look here
tar -czf "$OUT/stall_csv.tar.gz" -C /tmp $(cd /tmp && ls stall_*.csv 2>/dev/null) 2>/dev/null
