#!/usr/bin/env bash
# test_sigkill.sh: SIGKILL at 20 random moments of `ssmtrade train` ($1 = the
# binary), checkpointing every update, and a resume after each kill.
#
# Kills 1-20: a run (the first fresh, then --resume RUNDIR/last.safetensors)
# killed with SIGKILL after a random delay (50 ms to 3 times the time the
# first run took to its first checkpoint, so some land while it loads, some
# in an update, some between its two checkpoint files:
# SSMTRADE_TEST_SLOW_CHECKPOINT_MS=40 sleeps before each),
# every third one aimed instead: the moment a temp file of the run appears
# (of any checkpoint, or of last.safetensors), i.e. inside a checkpoint
# write. After each kill:
#   - every *.safetensors file of the run folder is whole (header length,
#     JSON, tensors exactly covering the data) and an ssmtrade checkpoint;
#   - any other file there is a NAME.tmp.PID of a killed process;
#   - metrics.jsonl holds updates 1..X in order, X = last's update or one
#     more (a kill between the metrics line and the checkpoint);
#   - a run that got going started from last.safetensors' update.
# Then: a last resume runs 2 updates to the end (exit 0), leaves no temp
# file, the metrics are 1..N once each, eval loads last.safetensors, and
# its weights, AdamW moments and environment state are bit-identical to an
# uninterrupted run of N updates. SIGKILL_SEED=S repeats a draw. On the
# CPU backend (what is tested is the files; a GPU's start-up time would
# only move where the random kills land).
set -u
BIN=${1:?usage: test_sigkill.sh path/to/ssmtrade}
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d)
pid=""
cleanup() {
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
seed=${SIGKILL_SEED:-$$}
RANDOM=$seed
echo "seed $seed (SIGKILL_SEED=$seed repeats this draw)"
small="--batch 8 --rollout 8 --minibatches 2 --epochs 1 --instruments 2 --bars 1500 --episode-length 16 --device cpu"
out=$tmp/run
export SSMTRADE_TEST_SLOW_CHECKPOINT_MS=40

check="$(cd "$(dirname "$0")" && pwd)/checkpoint_check.py" # whole, same, metrics, update

last_update() { python3 "$check" whole "$out/last.safetensors" | awk '{print $2}'; }

# After a kill: the folder's files, the metrics; sets L to last's update.
check_folder() {
    local k=$1 files
    files=$(ls "$out"/*.safetensors "$out"/checkpoints/*.safetensors 2>/dev/null)
    if python3 "$check" whole $files >"$tmp/whole" 2>&1; then ok; else bad "kill $k: $(grep BAD "$tmp/whole")"; fi
    local f
    for f in $(ls "$out") $(ls "$out/checkpoints"); do
        case "$f" in
        checkpoints | config.json | metrics.jsonl | last.safetensors | ckpt_[0-9][0-9][0-9][0-9][0-9][0-9].safetensors | events.out.tfevents.*) ;;
        *.tmp.[0-9]*)
            local p=${f##*.tmp.}
            kill -0 "$p" 2>/dev/null && bad "kill $k: $f belongs to a live process"
            ;;
        *) bad "kill $k: unexpected file $f" ;;
        esac
    done
    L=$(last_update)
    python3 "$check" metrics "$out/metrics.jsonl" "$L" >/dev/null 2>"$tmp/m" && ok || bad "kill $k: $(cat "$tmp/m")"
}

# spin_until_temp PID SECONDS [last]: 0 as soon as a temp file of PID
# exists (with "last": the one of last.safetensors).
spin_until_temp() {
    local end=$((SECONDS + $2)) f periodic="$out/checkpoints/*.tmp.$1"
    [ "${3:-}" = last ] && periodic=""
    while [ $SECONDS -lt $end ]; do
        for f in "$out/last.safetensors.tmp.$1" $periodic; do
            [ -e "$f" ] && return 0
        done
        kill -0 "$1" 2>/dev/null || return 1
    done
    return 1
}

now_ms() { date +%s%3N; }

# The first run, killed only once it has a checkpoint to resume from; the
# time that took (start-up, one update, two files) scales the delays, so
# that a loaded machine moves the kills no less into the updates.
t0=$(now_ms)
"$BIN" train $small --updates 100000 --checkpoint-every 1 --out "$out" >"$tmp/run0.log" 2>&1 &
pid=$!
end=$((SECONDS + 300))
until [ -f "$out/last.safetensors" ] || [ $SECONDS -ge $end ]; do sleep 0.02; done
first_ms=$(($(now_ms) - t0))
[ -f "$out/last.safetensors" ] || bad "no first checkpoint within 300 s: $(tail -3 "$tmp/run0.log")"
echo "first checkpoint after $first_ms ms; random delays 50 ms .. $((3 * first_ms + 50)) ms"
L=0
inside=0 between=0 started=0 advanced=0
for k in $(seq 1 20); do
    if [ "$k" -gt 1 ]; then
        "$BIN" train --resume "$out/last.safetensors" --out "$out" --device cpu >"$tmp/run$k.log" 2>&1 &
        pid=$!
    fi
    before=$L
    if [ $((k % 3)) = 0 ]; then
        spin_until_temp "$pid" 60 "$([ $((k % 2)) = 0 ] && echo last)" || bad "kill $k: the run wrote no checkpoint within 60 s: $(tail -3 "$tmp/run$k.log")"
    else
        sleep "$(awk -v r=$RANDOM -v t="$first_ms" 'BEGIN { printf "%.3f", 0.05 + 3 * t / 1000 * r / 32767 }')"
    fi
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    ls "$out" "$out/checkpoints" | grep -q "\.tmp\.$pid\$" && inside=$((inside + 1))
    check_folder "$k"
    newest=$(ls "$out"/checkpoints | grep -o '^ckpt_[0-9]*' | sort | tail -1 | sed 's/ckpt_0*//')
    [ -n "$newest" ] && [ "$newest" -gt "$L" ] && between=$((between + 1))
    # A run that got going started at the checkpoint it was given.
    if [ "$k" -gt 1 ] && grep -q '^training:' "$tmp/run$k.log"; then
        started=$((started + 1))
        grep -q "updates from update $before, " "$tmp/run$k.log" && ok \
            || bad "kill $k: resumed from $(grep -o 'from update [0-9]*' "$tmp/run$k.log"), last.safetensors was $before"
        first=$(grep -m1 -o '^update *[0-9]*' "$tmp/run$k.log" | grep -o '[0-9]*')
        [ -z "$first" ] || [ "$first" = $((before + 1)) ] && ok || bad "kill $k: first update $first after $before"
    fi
    [ "$L" -gt "$before" ] && advanced=$((advanced + 1))
done
pid=""
echo "20 kills: $inside inside a checkpoint write (a temp file left), $between between the periodic and the last file;" \
    "$started of 19 resumes got going, $advanced runs advanced last.safetensors, to update $L"
[ "$inside" -ge 1 ] && ok || bad "no kill landed inside a checkpoint write"
[ "$advanced" -ge 3 ] && ok || bad "only $advanced of 20 runs advanced the checkpoint"

# The last resume runs to its end.
unset SSMTRADE_TEST_SLOW_CHECKPOINT_MS
if "$BIN" train --resume "$out/last.safetensors" --out "$out" --device cpu --stop-after 2 --quiet >"$tmp/final.log" 2>&1; then
    ok
else
    bad "final resume: $(cat "$tmp/final.log")"
fi
N=$((L + 2))
[ "$(last_update)" = "$N" ] && ok || bad "final checkpoint is update $(last_update), expected $N"
[ "$(python3 "$check" metrics "$out/metrics.jsonl" "$N" 2>&1)" = "$N" ] && ok \
    || bad "final metrics: $(python3 "$check" metrics "$out/metrics.jsonl" "$N" 2>&1)"
ls "$out" "$out/checkpoints" | grep -q '\.tmp\.' && bad "temp files left after a clean run: $(ls "$out" "$out/checkpoints" | grep '\.tmp\.')" || ok
"$BIN" eval --ckpt "$out/last.safetensors" --split validation --device cpu --json >"$tmp/eval.json" 2>&1 \
    && python3 -c "import json; d = json.load(open('$tmp/eval.json')); assert 'greedy' in d['policies']" \
    && ok || bad "eval of the final checkpoint: $(head -c 400 "$tmp/eval.json")"

# The same N updates without kills: the same state, bit for bit.
"$BIN" train $small --updates 100000 --stop-after "$N" --checkpoint-every 0 --quiet --out "$tmp/ref" >"$tmp/ref.log" 2>&1 \
    || bad "reference run: $(cat "$tmp/ref.log")"
python3 "$check" same "$out/last.safetensors" "$tmp/ref/last.safetensors" >"$tmp/same" 2>&1 && ok \
    || bad "after 20 kills and resumes vs uninterrupted: $(cat "$tmp/same")"
cat "$tmp/same"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
