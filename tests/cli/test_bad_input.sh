#!/usr/bin/env bash
# test_bad_input.sh: bad input to `ssmtrade train` and `eval` ($1 = the
# binary): flags, config files, CSV files and checkpoints. Each case asserts
# a non-zero exit status and its message: stderr is one line (the case with
# several problems: one line each and a count), and that line, without the
# "ssmtrade CMD: " prefix, the source location and the temp folder, matches
# the expected text (a … stands for any text: numbers that depend on the
# machine, parts of other files' messages; <br> separates the lines of the
# case with several problems).
#
# The README's "Bad input" table is made from these cases and from the ones
# other tests check (the list at the end): the test fails when a row of it
# is missing from README.md. `bash test_bad_input.sh BIN --table` prints the
# table to paste there.
set -u
BIN=${1:?usage: test_bad_input.sh path/to/ssmtrade [--table]}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
TABLE=${2:-}
readme=$(cd "$(dirname "$0")/../.." && pwd)/README.md
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SSMTRADE_CACHE=$tmp/cache
cd "$tmp" || exit 1 # messages name the files as given: relative paths keep them short
small="--batch 8 --rollout 8 --minibatches 2 --epochs 1 --instruments 2 --bars 1500 --episode-length 16 --device cpu --quiet"
rows=()

# expect INPUT EXPECTED COMMAND...: INPUT is the table's description of the case.
expect() {
    local what=$1 want=$2
    shift 2
    if "$@" >"$tmp/o" 2>"$tmp/e"; then
        bad "should fail: $what"
        return
    fi
    local lines msg
    lines=$(wc -l <"$tmp/e")
    # without "ssmtrade CMD: " and "src/dir/file.c:LINE: "; lines joined by " / "
    msg=$(sed -E 's/^ssmtrade [a-z-]+: //; s/^src\/[a-z_/]+\.(c|cu):[0-9]+: //' "$tmp/e" | awk 'NR > 1 { printf "<br>" } { printf "%s", $0 }')
    local glob
    glob=$(printf '%s' "$want" | sed 's/[][?*\\]/\\&/g; s/…/*/g')
    local want_lines=1
    case "$want" in *"<br>"*) want_lines=$(($(printf '%s' "$want" | grep -o '<br>' | wc -l) + 1)) ;; esac
    if [ "$lines" != "$want_lines" ]; then
        bad "$what: $lines lines on stderr, expected $want_lines: $(cat "$tmp/e")"
    elif [[ $msg == $glob ]]; then
        ok
    else
        bad "$what: message
    got:  $msg
    want: $want"
    fi
    # a | inside a cell would end it (even in code): escaped
    local w=${want//|/\\|} x=${what//|/\\|}
    rows+=("| \`$x\` | \`${w//<br>/\`<br>\`}\` |")
}

T="$BIN train $small"

# ---- flags -------------------------------------------------------------------------------
expect "train --window 3" "--window 3 is smaller than the causal conv width 4 (--conv-width)" $T --window 3
expect "train --d-model 100 --headdim 48" "d_inner = expand*D = 200 must be a multiple of --headdim 48" \
    $T --d-model 100 --headdim 48
expect "train --headdim 8 --groups 3" "heads H = d_inner/headdim = 64/8 = 8 must be a multiple of --groups 3" \
    $T --headdim 8 --groups 3
expect "train --batch 0" "--batch 0: a size must be a whole number from 1 to 16777215" $T --batch 0
expect "train --rollout -4" "--rollout -4: a size must be a whole number from 1 to 16777215" $T --rollout -4
expect "train --features 37" \
    "training needs F = 40 snapshot and C = 16 context features (--features 37, --context 16)" $T --features 37
expect "train --minibatches 0" "--minibatches 0 must be positive" $T --minibatches 0
expect "train --segment 3" \
    "--segment 3: segments of S steps of one environment need T = 8 and the minibatch's T*B/M = 32 samples to divide by S" \
    $T --segment 3
expect "train --epochs 0" "--epochs 0 must be positive" $T --epochs 0
expect "train --updates 0" "--updates 0 must be positive" $T --updates 0
expect "train --gpus 0" "--gpus 0: expected 1 to 1024" $T --gpus 0
expect "train --gpus 2 --device cpu" "--gpus 2: multi-GPU training runs on the CUDA backend (--device cuda)" \
    $T --gpus 2
expect "train --gpus 3 --batch 8 --device cpu" \
    "--gpus 3: multi-GPU training runs on the CUDA backend (--device cuda)<br>--batch 8 does not split over 3 GPUs: make it a multiple of 3 (each GPU steps B / GPUs environments)<br>2 problems: nothing was started" \
    $T --gpus 3
expect "train --gpus 4 --batch 8 --rollout 8 --minibatches 32 --device cpu" \
    "--gpus 4: multi-GPU training runs on the CUDA backend (--device cuda)<br>the minibatch of 2 windows (--rollout 8 x --batch 8 / --minibatches 32) does not split over 4 GPUs: each GPU trains on minibatch / GPUs windows<br>2 problems: nothing was started" \
    $T --gpus 4 --minibatches 32
expect "train --stop-after -1" "--stop-after -1 must be >= 0 (0: run to the end)" $T --stop-after -1
expect "train --lr 2" "--lr 2 is outside (0, 1)" $T --lr 2
expect "train --lr nan" "--lr: 'nan' is not a finite number" $T --lr nan
expect "train --clip inf" "--clip: 'inf' is not a finite number" $T --clip inf
expect "train --seed 1.5" "--seed: '1.5' is not a whole number" $T --seed 1.5
# found by fuzz/fuzz_config.c: a number beyond long long was converted before the check (undefined behaviour)
expect "train --epochs 3666666666666666666666" \
    "--epochs: '3666666666666666666666' is out of range (at most 9223372036854775807)" $T --epochs 3666666666666666666666
expect "train --seed 1e16" \
    "--seed: '1e16' is 2^53 or more written as a double (1e16, or a number in a JSON file), which may have lost its last digits: write the digits (in a JSON file, as a string)" \
    $T --seed 1e16
expect "train --seed inf" "--seed: 'inf' is not a whole number" $T --seed inf
expect "train --gamma 1.5" "--gamma 1.5 is outside (0, 1]" $T --gamma 1.5
expect "train --gae-lambda -0.1" "--gae-lambda -0.1 is outside [0, 1]" $T --gae-lambda -0.1
expect "train --max-grad-norm 0" "--max-grad-norm 0 must be positive" $T --max-grad-norm 0
expect "train --adam-beta2 1" "--adam-beta2 1 is outside [0, 1)" $T --adam-beta2 1
expect "train --risk-fraction 0" "--risk-fraction 0 is outside (0, 1)" $T --risk-fraction 0
expect "train --slippage-bps -1" "--slippage-bps -1 must be >= 0" $T --slippage-bps -1
expect "train --episode-length 1" "--episode-length 1 must be at least 2" $T --episode-length 1
expect "train --bars 1500 --episode-length 2000" \
    "--episode-length 2000 is longer than the training split: 938 bars per instrument (--bars 1500, --window 32)" \
    $T --episode-length 2000
expect "train --checkpoint-every -1" "--checkpoint-every -1 must be >= 0 (0: only at the end)" $T --checkpoint-every -1
expect "train --schedule step" "--schedule step: expected cosine, linear or constant" $T --schedule step
expect "train --precision fp8" "--precision fp8: expected fp32 or bf16" $T --precision fp8
expect "train --device tpu" "--device tpu: expected cpu or cuda" $T --device tpu
expect "train --trace loud" "--trace 'loud': expected off, sentinel or full" $T --trace loud
expect "train --inject garbage" "--inject garbage: expected LABEL:STEP:INDEX[:nan|inf|-inf]" $T --inject garbage
expect "train --inject train_vsn_out:x:1" "--inject train_vsn_out:x:1: bad step 'x'" $T --inject train_vsn_out:x:1
expect "train --inject train_vsn_out:1:1:zero" "--inject train_vsn_out:1:1:zero: kind 'zero' (nan, inf or -inf)" \
    $T --inject train_vsn_out:1:1:zero
expect "train --inject nolabel:1:1" "--inject nolabel:1:1: no label named 'nolabel' (ssmtrade labels lists them)" \
    $T --inject nolabel:1:1
expect "train --preset huge" "unknown preset 'huge' (expected tiny, default, large or odd)" $T --preset huge
expect "train --bars 200" "--bars 200 is too few for --window 32: a synthetic instrument needs at least 266 bars (64 of feature warm-up, the first window, 2 gaps of K bars and three splits)" \
    $T --bars 200
expect "train --instruments 0" "--instruments 0 is outside 1 .. 65536" $T --instruments 0
expect "train --data nowhere" "--data nowhere: No such file or directory" $T --data nowhere
echo x >afile
expect "train --out afile (a file)" "--out afile exists and is not a folder" $T --out afile
expect "train --resume missing.safetensors" "--resume missing.safetensors: No such file or directory" \
    $T --resume missing.safetensors
expect "train --batch 1000000 --minibatches 32 --layers 60 (memory)" \
    "the CPU trainer needs about … GiB of memory (model activations for max(B, T*B/M) = 1000000 windows: … GiB, rollout of T*B = 8000000 samples: … GiB, parameters and AdamW state … GiB, market … GiB) but … GiB is available: lower --batch (now 1000000: the action step runs B windows at once)" \
    $T --batch 1000000 --minibatches 32 --layers 60
expect "train --batch 16000000 --window 200" \
    "the model would see 12800000000 rows at once (max(B, T*B/M) = 64000000 windows x K = 200), more than 2^31 - 1: lower --batch or --window, or raise --minibatches" \
    $T --batch 16000000 --window 200
expect "train --batch 16000000 --rollout 200" \
    "--rollout 200 x --batch 16000000 = 3200000000 samples per update is more than 2147483647" \
    $T --batch 16000000 --rollout 200
expect "train --window 3 --lr 2 --schedule step --no-such-flag 1" \
    "unknown flag '--no-such-flag' (see train --help)<br>--window 3 is smaller than the causal conv width 4 (--conv-width)<br>--lr 2 is outside (0, 1)<br>--schedule step: expected cosine, linear or constant<br>4 problems: nothing was started" \
    $T --window 3 --lr 2 --schedule step --no-such-flag 1
expect "train --lr (no value)" "flag --lr needs a value (V)" $T --lr
expect "train --quiet=yes" "flag --quiet takes no value" $T --quiet=yes
expect "train extra" "unexpected argument 'extra' (flags look like --name value)" $T extra

# ---- config files ------------------------------------------------------------------------
printf '{"lr": 0.1,}\n' >comma.json
expect "--config comma.json: {\"lr\": 0.1,}" "--config comma.json: not valid JSON (it stops at byte …, after '{\"lr\": 0.1,…')" $T --config comma.json
printf '[1, 2]\n' >array.json
expect "--config array.json: [1, 2]" "--config array.json: not a JSON object (expected {\"flag-name\": value, ...})" \
    $T --config array.json
printf '{"learning-rate": 0.1}\n' >key.json
expect "--config key.json: {\"learning-rate\": 0.1}" \
    "--config key.json: unknown key 'learning-rate' (keys are the command's flag names)" $T --config key.json
printf '{"lr": [0.1]}\n' >list.json
expect "--config list.json: {\"lr\": [0.1]}" "--config list.json: key 'lr' must be a string, number or boolean" \
    $T --config list.json
printf '{"lr": 5}\n' >lr.json
expect "--config lr.json: {\"lr\": 5}" "--lr 5 is outside (0, 1)" $T --config lr.json
# JSON numbers are doubles: 2^53 + 1 arrives as 2^53, so whole numbers that large must be strings
printf '{"seed": 9007199254740993}\n' >seed.json
expect "--config seed.json: {\"seed\": 9007199254740993}" \
    "--seed: '9.0071992547409920e+15' is 2^53 or more written as a double (1e16, or a number in a JSON file), which may have lost its last digits: write the digits (in a JSON file, as a string)" \
    $T --config seed.json
expect "--config none.json (missing)" "--config none.json: cannot open: No such file or directory" $T --config none.json

# ---- CSV files (train --data FILE) ------------------------------------------------------
# 400 valid daily bars, then one bad cell; a close-only file and unix seconds too.
python3 - <<'EOF'
import math
def rows(n):
    out, c = [], 100.0
    for i in range(n):
        o = c
        c = o * math.exp(0.01 * math.sin(i * 0.7) + 0.002 * math.cos(i * 1.3))
        out.append([86400 * (10957 + i), o, max(o, c) * 1.004, min(o, c) * 0.996, c, 1000 + 37 * (i % 11)])
    return out
def write(name, header, data, edit=None):
    with open(name, 'w') as f:
        f.write(header + '\n')
        for i, r in enumerate(data):
            cells = ['%d' % r[0]] + ['%.6f' % v for v in r[1:5]] + ['%d' % r[5]]
            if header == 'timestamp,close': cells = [cells[0], cells[4]]
            if edit and edit[0] == i: cells[edit[1]] = edit[2]
            f.write(','.join(cells) + '\n')
full = 'timestamp,open,high,low,close,volume'
d = rows(400)
write('number.csv', 'timestamp,close', d, (41, 1, '10.5.2'))
write('order.csv', full, d, (99, 0, '%d' % d[97][0]))
write('high.csv', 'timestamp,close', d)
with open('high.csv') as f: lines = f.read().split('\n')
lines[0] = 'timestamp,high,close'
lines = [lines[0]] + ['%s,%s,%s' % (l.split(',')[0], l.split(',')[1], l.split(',')[1]) for l in lines[1:] if l]
t, c, _ = lines[201].split(','); lines[201] = '%s,%.6f,%s' % (t, float(c) * 0.99, c)
open('high.csv', 'w').write('\n'.join(lines) + '\n')
write('negative.csv', full, d, (7, 1, '-3.25'))
write('nan.csv', full, d, (300, 5, 'NaN'))
write('short.csv', full, rows(120))
open('empty.csv', 'w').close()
open('notime.csv', 'w').write('open,close\n1,2\n')
EOF
expect "number.csv: close '10.5.2' on line 43" "number.csv:43: column 'close': '10.5.2' is not a number" \
    $T --data number.csv
expect "order.csv: unix seconds, line 101 repeats line 99's time" \
    "order.csv:101: column 'timestamp': '955065600' is not after the previous row's 2000-04-08T00:00:00Z (times must increase)" \
    $T --data order.csv
expect "high.csv: high < close (no open column), line 202" "high.csv:202: column 'high': … is below close = …" \
    $T --data high.csv
expect "negative.csv: open -3.25 on line 9" \
    "negative.csv:9: column 'open': price -3.25 must be positive (log returns need it)" $T --data negative.csv
expect "nan.csv: volume NaN on line 302" \
    "nan.csv:302: column 'volume': 'NaN' is not finite (NaN and Inf are not allowed)" $T --data nan.csv
expect "short.csv: 120 rows with --window 32" \
    "short.csv: 120 rows, too few: K = 32 needs at least 266 rows (64 of feature warm-up, K - 1 = 31 more for the first window, 2 gaps of K bars between the splits, and 107 for train / validation / test of at least 16 bars each with train_frac 0.70, val_frac 0.15)" \
    $T --data short.csv
expect "empty.csv: an empty file" "empty.csv:1: column 1: the file is empty (no header)" $T --data empty.csv
expect "notime.csv: header open,close" \
    "notime.csv:1: column 'timestamp': no time column (timestamp, date, time or datetime) in the header" \
    $T --data notime.csv

# ---- checkpoints -------------------------------------------------------------------------
if "$BIN" train $small --updates 1 --out run >"$tmp/o" 2>&1; then
    python3 - <<'EOF'
import json, struct
b = open('run/last.safetensors', 'rb').read()
open('truncated.safetensors', 'wb').write(b[:len(b) // 2])
open('header_cut.safetensors', 'wb').write(b[:100])
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
cfg = json.loads(h['__metadata__']['config'])
cfg['d-model'] = 64  # the config no longer matches the tensors
h['__metadata__']['config'] = json.dumps(cfg)
hb = json.dumps(h).encode()
hb += b' ' * (-len(hb) % 8)
open('mismatch.safetensors', 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])
EOF
    expect "train --resume truncated.safetensors (half the file)" \
        "truncated.safetensors: tensor '…' has data offsets […] outside the file…" \
        $T --resume truncated.safetensors
    expect "train --resume number.csv (not safetensors)" \
        "number.csv is not a safetensors file: its header length … exceeds the file size" $T --resume number.csv
    expect "train --resume last.safetensors --preset default" \
        "--resume run/last.safetensors: the flags change the checkpoint's model sizes (batch 8 -> 128, window 32 -> 64, vsn-hidden 8 -> 32, d-model 32 -> 128, layers 1 -> 2, headdim 16 -> 32, d-state 16 -> 64, chunk 16 -> 32, head-hidden 32 -> 128, rollout 8 -> 64; its preset is tiny): a resumed run keeps the sizes it was trained with" \
        "$BIN" train --resume run/last.safetensors --preset default --out run --device cpu --quiet
    expect "train --resume last.safetensors --bars 1600" \
        "--resume run/last.safetensors: the flags change the checkpoint's data (bars 1500 -> 1600): a resumed run needs the data it was trained on" \
        "$BIN" train --resume run/last.safetensors --bars 1600 --out run --device cpu --quiet
    expect "eval --ckpt truncated.safetensors" "truncated.safetensors: tensor '…' has data offsets […] outside the file…" \
        "$BIN" eval --ckpt truncated.safetensors
    expect "eval --ckpt header_cut.safetensors (100 bytes)" \
        "header_cut.safetensors is not a safetensors file: its header length … exceeds the file size" \
        "$BIN" eval --ckpt header_cut.safetensors
    expect "eval --ckpt mismatch.safetensors (config d-model 64, tensors 32)" \
        "mismatch.safetensors: tensor '…' has shape […], expected […]" "$BIN" eval --ckpt mismatch.safetensors
    expect "eval --ckpt missing.safetensors" "cannot open missing.safetensors: No such file or directory" \
        "$BIN" eval --ckpt missing.safetensors
else
    bad "the checkpoint for the checkpoint cases: $(cat "$tmp/o")"
fi

# ---- checked by other tests (listed in the README table, not run here) -------------------
elsewhere=(
    "| \`train --no-such-flag 1\` | \`unknown flag '--no-such-flag' (see train --help)\` (tests/cli/test_train_eval.sh) |"
    "| \`train --lr abc\` | \`--lr: 'abc' is not a number\` (tests/cli/test_train_eval.sh) |"
    "| \`train --batch 8 --rollout 8 --minibatches 7\` | \`rollout T*B = 8*8 = 64 samples do not split into 7 equal minibatches (--minibatches)\` (tests/cli/test_train_eval.sh) |"
    "| \`eval --ckpt cfg.json\` (a JSON file) | \`cfg.json is not a safetensors file: its header length … exceeds the file size\` (tests/cli/test_train_eval.sh) |"
    "| \`eval --ckpt events.safetensors\` (safetensors, not a checkpoint) | \`events.safetensors is not an ssmtrade checkpoint (metadata format '(none)', expected 'ssmtrade-checkpoint-1')\` (tests/cli/test_train_eval.sh) |"
    "| \`train --device cuda\` without a GPU | \`--device cuda: …\` (why there is none; tests/cli/test_train_eval.sh) |"
    "| \`train --device cuda --poison-padding\` | \`--poison-padding is a debug mode of the cpu backend (the GPU's activations are contiguous): use --device cpu\` (tests/cli/test_train_eval.sh) |"
    "| \`train --data msft_daily_ohlcv.csv\` (249 rows, K = 64) | \`…msft_daily_ohlcv.csv: 249 rows, too few: K = 64 needs at least 362 rows (…)\` (tests/cli/test_train_eval.sh) |"
    "| CSV cell \`12.3.4\` (high) | \`FILE:LINE: column 'high': '12.3.4' is not a number\` (tests/data/test_csv.c, and each case below) |"
    "| CSV empty field (close) | \`FILE:LINE: column 'close': empty field\` (tests/data/test_csv.c) |"
    "| CSV row without its volume field | \`FILE:LINE: column 'volume': missing (the row has 5 fields, the header 6)\` (tests/data/test_csv.c) |"
    "| CSV \`nan\` (low), \`inf\` (open), \`1e999\` (volume) | \`FILE:LINE: column 'low': 'nan' is not finite (NaN and Inf are not allowed)\` (tests/data/test_csv.c) |"
    "| CSV repeated and decreasing timestamps | \`FILE:LINE: column 'timestamp': '1999-12-31' is not after the previous row's … (times must increase)\` (tests/data/test_csv.c) |"
    "| CSV date \`2001-02-30\` | \`FILE:LINE: column 'timestamp': '2001-02-30' is not an ISO-8601 date or date-time nor unix seconds\` (tests/data/test_csv.c) |"
    "| CSV high < max(open, close), low > min(open, close) | \`FILE:LINE: column 'high': … is below max(open, close) = …\` (tests/data/test_csv.c) |"
    "| CSV negative or zero price, negative volume | \`FILE:LINE: column 'volume': volume -100 is negative\` (tests/data/test_csv.c) |"
    "| CSV header without close | \`FILE:1: column 'close': no close column in the header\` (tests/data/test_csv.c) |"
    "| checkpoint of other data on \`--resume\` | \`CKPT: the data's feature normalisation differs from the checkpoint's: resume needs the same data (--data, --instruments, --bars, --market-seed) as the run that wrote it\` (tests/train/test_resume.c) |"
)

# ---- the README table --------------------------------------------------------------------
if [ "$TABLE" = --table ]; then
    echo "| input tried | message (stderr, after \`ssmtrade CMD: \` and the source location) |"
    echo "|---|---|"
    printf '%s\n' "${rows[@]}" "${elsewhere[@]}"
fi
missing=0
for r in "${rows[@]}" "${elsewhere[@]}"; do
    grep -qF -- "$r" "$readme" || { missing=$((missing + 1)); [ "$missing" -le 3 ] && echo "README lacks: $r" >&2; }
done
[ "$missing" = 0 ] && ok || bad "$missing rows of the bad-input table are missing from README.md (regenerate: bash tests/cli/test_bad_input.sh BIN --table)"

# --table prints the table alone (the counts go to stderr), ready to paste into README.md
if [ "$TABLE" = --table ]; then echo "$pass passed, $fail failed" >&2; else echo "$pass passed, $fail failed"; fi
[ "$fail" = 0 ]
