#!/bin/bash
# The README's main job: train the agent on the built-in synthetic market,
# backtest it on the held-out test split against the baselines and write the
# HTML report. On the CPU it uses the tiny preset and a budget that finishes
# within 10 minutes on 2 cores; the GPU run (default preset) joins when the
# CUDA backend can train (issue 6).
set -euo pipefail
# Many small OpenMP regions: threads that sleep while waiting keep a shared
# or busy machine usable (spinning threads made training 4x slower there).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
bin=${1:-build/ssmtrade}
out=${SSMTRADE_RUN:-runs/main}
updates=${SSMTRADE_UPDATES:-150}
echo "== $("$bin" info --preset tiny | tail -1 | sed 's/^ *//')"
echo "== training: ssmtrade train --preset tiny --updates $updates --out $out"
"$bin" train --preset tiny --updates "$updates" --out "$out"
echo
echo "== evaluation on the test split: ssmtrade eval --ckpt $out/last.safetensors --report $out/report.html"
"$bin" eval --ckpt "$out/last.safetensors" --split test --report "$out/report.html"
echo
echo "== done. The report is at $(cd "$(dirname "$out/report.html")" && pwd)/report.html"
