#!/bin/bash
# The README's main job. Until `ssmtrade train` lands (issue 4), this runs
# what exists end to end on the built-in synthetic market: the model's
# parameter table, the float64 gradient check of every op and of the whole
# model, and the baseline policies' backtest metrics on the test split.
set -euo pipefail
bin=${1:-build/ssmtrade}
echo "== ssmtrade info --preset tiny"
"$bin" info --preset tiny | tail -4
echo
echo "== ssmtrade gradcheck --preset tiny"
"$bin" gradcheck --preset tiny | tail -3
echo
echo "== ssmtrade baseline --split test --policy all   (built-in synthetic market)"
"$bin" baseline --split test --policy all
