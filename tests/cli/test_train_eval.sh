#!/usr/bin/env bash
# test_train_eval.sh: `ssmtrade train` and `eval` end to end ($1 = the binary),
# on a small synthetic market with small sizes: the run folder's files, a
# --config file whose keys are flag names (flags win), --stop-after then
# --resume continuing the metrics, eval's table, JSON and HTML report, and
# one-line errors for bad input.
set -u
BIN=${1:?usage: test_train_eval.sh path/to/ssmtrade}
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small="--batch 8 --rollout 8 --minibatches 2 --epochs 1 --instruments 2 --bars 1500 --episode-length 16 --quiet"

"$BIN" train --help >"$tmp/help" 2>&1 && grep -q -- "--ent-coef" "$tmp/help" && grep -q -- "--resume" "$tmp/help" \
    && ok || bad "train --help lists the hyper-parameters"

# A config file sets the run length and lr; the flag --updates wins over it.
printf '{"updates": 9, "lr": 0.0005, "seed": 3}\n' >"$tmp/cfg.json"
if "$BIN" train $small --config "$tmp/cfg.json" --updates 3 --stop-after 2 --out "$tmp/run" >"$tmp/out" 2>&1; then
    ok
else
    bad "train failed: $(cat "$tmp/out")"
fi
[ -f "$tmp/run/last.safetensors" ] && ok || bad "no last.safetensors"
[ -f "$tmp/run/checkpoints/ckpt_000002.safetensors" ] && ok || bad "no periodic checkpoint"
[ "$(wc -l <"$tmp/run/metrics.jsonl")" = 2 ] && ok || bad "metrics.jsonl should have 2 lines after --stop-after 2"
ls "$tmp/run"/events.out.tfevents.* >/dev/null 2>&1 && ok || bad "no TensorBoard event file"
python3 -c "
import json; c = json.load(open('$tmp/run/config.json'))
assert c['updates'] == 3 and c['lr'] == 0.0005 and c['seed'] == 3 and c['batch'] == 8, c" \
    && ok || bad "config.json: flags over file: $(cat "$tmp/run/config.json")"

# A seed of 2^53 + 1 (a string in the config file, or a flag) keeps every
# digit into config.json and the checkpoint's config.
printf '{"seed": "9007199254740993"}\n' >"$tmp/seed.json"
if "$BIN" train $small --config "$tmp/seed.json" --updates 1 --out "$tmp/seed" >"$tmp/out" 2>&1; then
    python3 -c "
import json; c = json.load(open('$tmp/seed/config.json'))
assert int(c['seed']) == 9007199254740993, c['seed']" && ok || bad "seed 2^53+1 in config.json: $(grep seed "$tmp/seed/config.json")"
else
    bad "train with seed 2^53+1 failed: $(cat "$tmp/out")"
fi

# Resume continues from update 2 to the end (3).
if "$BIN" train --resume "$tmp/run/last.safetensors" --out "$tmp/run" --quiet >"$tmp/out2" 2>&1; then
    ok
else
    bad "resume failed: $(cat "$tmp/out2")"
fi
[ "$(wc -l <"$tmp/run/metrics.jsonl")" = 3 ] && ok || bad "resume should append one update"
tail -1 "$tmp/run/metrics.jsonl" | grep -q '"update": 3' && ok || bad "resumed update is not 3"

# Evaluation: table with greedy/sampled and baselines, JSON, report.
if "$BIN" eval --ckpt "$tmp/run/last.safetensors" --split validation --report "$tmp/r.html" >"$tmp/eval" 2>&1; then
    ok
else
    bad "eval failed: $(cat "$tmp/eval")"
fi
grep -q "greedy *sampled *flat *buyhold *random *oracle" "$tmp/eval" && ok || bad "eval table header"
[ "$(grep -o '<svg' "$tmp/r.html" | wc -l)" -ge 6 ] && ok || bad "report has too few charts"
grep -qi 'nan' <(grep -o '<svg.*</svg>' "$tmp/r.html") && bad "NaN inside an SVG" || ok
"$BIN" eval --ckpt "$tmp/run/last.safetensors" --json >"$tmp/eval.json" 2>&1 \
    && python3 -c "import json,sys; d=json.load(open('$tmp/eval.json')); assert 'greedy' in d['policies']" \
    && ok || bad "eval --json"

# The real close-only file (DJIA daily) trains and backtests; the short MSFT
# file stops with the too-few-rows message naming the rows it needs.
djia=""
for d in ../shared/data /work/shared/data; do
    [ -f "$d/djia_daily_1980_2012.csv" ] && djia="$d/djia_daily_1980_2012.csv" && msft="$d/msft_daily_ohlcv.csv" && break
done
if [ -n "$djia" ]; then
    "$BIN" train --data "$djia" --batch 8 --rollout 8 --minibatches 2 --epochs 1 --updates 1 --quiet --out "$tmp/djia" \
        >"$tmp/dj" 2>&1 && "$BIN" eval --ckpt "$tmp/djia/last.safetensors" >"$tmp/dje" 2>&1 \
        && grep -q "^total_R" "$tmp/dje" && ok || bad "DJIA train + eval: $(cat "$tmp/dj" "$tmp/dje")"
    check_err_early() { if "$@" >"$tmp/o" 2>"$tmp/e"; then bad "should fail: $*"; else grep -q "needs at least" "$tmp/e" && ok || bad "msft message: $(cat "$tmp/e")"; fi; }
    check_err_early "$BIN" train --data "$msft" --quiet --out "$tmp/msft"
else
    echo "note: ../shared/data not found, real-data checks skipped"
fi

# A safetensors file that is not a checkpoint.
python3 -c "
import json, struct
h = json.dumps({'x': {'dtype': 'F32', 'shape': [1], 'data_offsets': [0, 4]}}).encode()
h += b' ' * (-len(h) % 8)
open('$tmp/run/events.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + b'\0' * 4)"

# Bad input: one line on stderr, non-zero status.
check_err() { # expected-substring command...
    local want=$1
    shift
    if "$@" >"$tmp/o" 2>"$tmp/e"; then bad "should fail: $*"; return; fi
    [ "$(wc -l <"$tmp/e")" -le 2 ] && grep -q -- "$want" "$tmp/e" && ok || bad "message for '$*': $(cat "$tmp/e")"
}
check_err "unknown flag" "$BIN" train --no-such-flag 1
check_err "--lr" "$BIN" train $small --lr abc --out "$tmp/x"
check_err "minibatches" "$BIN" train $small --minibatches 7 --out "$tmp/x"
check_err "not a safetensors file" "$BIN" eval --ckpt "$tmp/cfg.json"
check_err "not an ssmtrade checkpoint" "$BIN" eval --ckpt "$tmp/run/events.safetensors"
# --device cuda: a one-line error without a GPU; with one, the same run on the GPU.
if "$BIN" info --json | grep -Eq '"cuda_devices":[[:space:]]*[1-9]'; then
    if "$BIN" train $small --device cuda --updates 2 --out "$tmp/gpu" >"$tmp/gpu.out" 2>&1 \
        && [ "$(wc -l <"$tmp/gpu/metrics.jsonl")" = 2 ]; then
        ok
    else
        bad "train --device cuda: $(cat "$tmp/gpu.out")"
    fi
else
    check_err "cuda" "$BIN" train $small --device cuda --out "$tmp/x"
fi
check_err "poison-padding" "$BIN" train $small --device cuda --poison-padding --out "$tmp/x"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
