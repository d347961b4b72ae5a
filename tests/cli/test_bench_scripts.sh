#!/usr/bin/env bash
# test_bench_scripts.sh: the benchmark's Python tools on this machine ($1, the
# binary, unused): kernel_roofline.py's self-test (its hand-checked counts
# of the current kernels), its table of a capture of two steps with the
# last block's last-row tail (the step count, the lr_* rows), and compare.py
# on fixtures of ours and PyTorch's JSON: the ratio column is PyTorch over
# ours, and a target's PASS / FAIL.
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

# a synthetic ncu CSV of 2 training steps with the tail (2,048 windows, bf16; per-call times the
# 2026-12-02 profile's): scan_backward_kernel runs L - 1 = 1 a step, so its 2 calls are 2 steps;
# the lr_* rows' FLOP and bytes a call are the hand counts of the self-test (192 M / 380 MB, 90.2 M /
# 175 MB, 32.8 k / 131 kB); the RMSNorms 2 a step, one over R rows and one over the 2,048 last rows
D=tests/cli/data
# (the profiles here are of builds before the quad SSD scans and the VSN fill's tensor cores: --quad 0 --vsn-tc 0)
roof() { python3 bench/kernel_roofline.py "$@" --precision bf16 --windows 2048 --quad 0 --vsn-tc 0 2>&1; }
has() { grep -qE "$2" "$1" && ok || bad "kernel_roofline.py $3"; }
roof $D/ncu_train_tail_2steps.csv >"$tmp/tail"
has "$tmp/tail" '; 2 steps, from scan_backward_kernel: 2 calls, 1 a step \(L - 1' "--tail 1: 2 steps from 2 scan_backward calls"
has "$tmp/tail" '^\| scan_backward_kernel \| 1 \| 2\.754 \| 20\.5 G \| 1\.02 GB \|' "--tail 1: scan_backward 1 a step"
has "$tmp/tail" '^\| lr_backward_kernel \| 1 \| 0\.371 \| 192 M \| 380 MB \|' "--tail 1: lr_backward row"
has "$tmp/tail" '^\| lr_forward_kernel \| 1 \| 0\.084 \| 90\.2 M \| 175 MB \|' "--tail 1: lr_forward row"
has "$tmp/tail" '^\| lr_reduce_kernel \| 1 \| 0\.004 \| 32\.8 k \| 131 kB \|' "--tail 1: lr_reduce row"
has "$tmp/tail" '^\| rms_backward_regs_kernel \| 2 \| 0\.364 \| 358 M \|' "--tail 1: rms_backward over R and Bsz rows"
has "$tmp/tail" '^\| ln_forward_kernel \| 3 \| 0\.150 \| 90\.5 M \| 113 MB \|' "--tail 1: ln_forward, the tail's without the copy"
grep -qE 'a step expected|WARNING' "$tmp/tail" && bad "kernel_roofline.py --tail 1: a count or tail warning" || ok
# the same capture read as the old path: 1 step, and the warning that says why
python3 bench/kernel_roofline.py $D/ncu_train_tail_2steps.csv --precision bf16 --windows 2048 >"$tmp/quad1" 2>&1
has "$tmp/quad1" 'WARNING: the profile has scan_backward / reduce_group but the model counts the quad SSD scans' \
  "--quad 1 on an older build's profile: the warning"
roof $D/ncu_train_tail_2steps.csv --tail 0 >"$tmp/tail0"
has "$tmp/tail0" '; 1 steps, from scan_backward_kernel: 2 calls, 2 a step;' "--tail 0: the old reading"
has "$tmp/tail0" "WARNING: the profile has the last-row tail's kernels" "--tail 0: the warning"
# the 2026-12-02 profile (ncu_summary.py's tables of three runs and the old model's roofline): its
# first table, 2 steps, about 12 ms a step
roof --summary bench/results/2026-12-02-profile-merged.txt >"$tmp/real"
has "$tmp/real" '^\| whole step \(all kernels\) \| 182 \| 11\.950 \|' "--summary 2026-12-02: the whole step"
has "$tmp/real" '^\| scan_backward_kernel \| 1 \| 2\.754 \|' "--summary 2026-12-02: scan_backward"

# the fixtures: `ssmtrade bench --json` and `torch_bench.py --quick --json` of
# two H200 runs (2026-12-02 and 2026-12-01): training 2,048 bf16 15.98 vs
# 30.22 ms, action 4,096 bf16 5.791 (with the table's share) vs 17.09 ms
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
