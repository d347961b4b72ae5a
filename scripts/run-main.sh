#!/bin/bash
# The README's main job: train the agent on the built-in synthetic market,
# backtest it on the held-out test split against the baselines and write the
# HTML report. With a GPU it trains the default preset with the whole step
# on the GPU (--device cuda); without one, the tiny preset on the CPU with a
# budget that finishes within 10 minutes on 2 cores. SSMTRADE_UPDATES
# changes the budget, SSMTRADE_RUN the run folder, SSMTRADE_DEVICE=cpu
# forces the CPU.
set -euo pipefail
# Many small OpenMP regions: threads that sleep while waiting keep a shared
# or busy machine usable (spinning threads made training 4x slower there).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
bin=${1:-build/ssmtrade}
out=${SSMTRADE_RUN:-runs/main}
device=${SSMTRADE_DEVICE:-}
if [ -z "$device" ]; then
    if "$bin" info --json | grep -Eq '"cuda_devices":[[:space:]]*[1-9]'; then device=cuda; else device=cpu; fi
fi
if [ "$device" = cuda ]; then
    preset=default
    updates=${SSMTRADE_UPDATES:-60}
else
    preset=tiny
    updates=${SSMTRADE_UPDATES:-150}
fi
echo "== $("$bin" info --preset "$preset" | grep -E '^ +activations' | sed 's/^ *//')"
echo "== $("$bin" info | grep '^device:')"
echo "== training: ssmtrade train --device $device --preset $preset --updates $updates --out $out"
"$bin" train --device "$device" --preset "$preset" --updates "$updates" --out "$out"
echo
echo "== evaluation on the test split: ssmtrade eval --ckpt $out/last.safetensors --report $out/report.html"
"$bin" eval --ckpt "$out/last.safetensors" --split test --report "$out/report.html"
echo
echo "== done. The report is at $(cd "$(dirname "$out/report.html")" && pwd)/report.html"
