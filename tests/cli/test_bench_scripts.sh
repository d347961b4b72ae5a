#!/usr/bin/env bash
# test_bench_scripts.sh: the benchmark's Python tools on this machine ($1, the
# binary, unused): kernel_roofline.py's self-test (its hand-checked counts
# of the current kernels), and compare.py on fixtures of ours and PyTorch's
# JSON: the ratio column is PyTorch over ours, and a target's PASS / FAIL.
# Exit 77 (ctest: skipped) where there is no python3.
set -u
command -v python3 >/dev/null || { echo "skipped: no python3 on this machine"; exit 77; }
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 bench/kernel_roofline.py --selftest >"$tmp/roof" 2>&1 && ok || { bad "kernel_roofline.py --selftest"; tail -5 "$tmp/roof" >&2; }

# the fixtures: `ssmtrade bench --json` and `torch_bench.py --quick --json` of
# two H200 runs (2026-12-02 and 2026-12-01): training 2,048 bf16 15.98 vs
# 30.22 ms, action 4,096 bf16 5.791 (with the table's share) vs 17.09 ms
D=tests/cli/data
if python3 bench/compare.py $D/bench_ours.json $D/bench_torch.json >"$tmp/cmp" 2>&1; then
  grep -qE '^\| 2048 \| bf16 \| 15\.98 \|.*\| 1\.89x \| >= 5x \| FAIL \|' "$tmp/cmp" && ok || bad "compare.py: training 1.89x FAIL row"
  grep -qE '^\| 4096 \| bf16 \| 5\.791 \|.*\| 2\.95x \| >= 5x \| FAIL \|' "$tmp/cmp" && ok || bad "compare.py: action 2.95x FAIL row"
else
  bad "compare.py exited non-zero"
  tail -5 "$tmp/cmp" >&2
fi
# the same with ours 3x faster at 4,096 envs: 17.09 / 1.930 = 8.86x (printed 1.93), a PASS
python3 - "$D/bench_ours.json" "$tmp/fast.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["act"]:
    if r["envs"] == 4096 and r["precision"] == "bf16":
        r["median_ms"] /= 3.0
        r["median_with_build_ms"] /= 3.0
json.dump(d, open(sys.argv[2], "w"))
PY
python3 bench/compare.py "$tmp/fast.json" $D/bench_torch.json >"$tmp/cmp2" 2>&1
grep -qE '^\| 4096 \| bf16 \| 1\.93 \|.*\| 8\.86x \| >= 5x \| PASS \|' "$tmp/cmp2" && ok || bad "compare.py: action 8.86x PASS row"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
