#!/usr/bin/env bash
# test_signals.sh: SIGINT and SIGTERM during `ssmtrade train` ($1 = the binary).
# A small run is signalled after its second update: it must end that update,
# write the checkpoint (periodic and last; --checkpoint-every 0, so the
# interrupt's is the only one), print one line on stderr, "interrupted by
# SIGINT after update N: checkpoint RUNDIR/last.safetensors (resume with
# --resume RUNDIR/last.safetensors)", and exit 130 (SIGTERM: 143). The
# checkpoint must be whole, hold update N, the metrics file N lines, and
# --resume must continue at N+1. Then signals sent again while the
# checkpoint is being written (SSMTRADE_TEST_SLOW_CHECKPOINT_MS widens the
# write) change nothing. With a GPU the same run on --device cuda.
set -u
BIN=${1:?usage: test_signals.sh path/to/ssmtrade}
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
small="--batch 8 --rollout 8 --minibatches 2 --epochs 1 --instruments 2 --bars 1500 --episode-length 16"

# The update stored in a checkpoint, after checking the whole file (prints the update;
# exit 1 with the reason otherwise).
check="$(cd "$(dirname "$0")" && pwd)/checkpoint_check.py"

# wait_for FILE REGEX SECONDS: 0 once a line of FILE matches.
wait_for() {
    local end=$((SECONDS + $3))
    while [ $SECONDS -lt $end ]; do
        grep -Eq "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# signal_run NAME SIGNAL STATUS SECOND_SIGNALS DEVICE: a run in $tmp/NAME
# signalled after update 2; SECOND_SIGNALS (e.g. "INT TERM") are sent while
# its checkpoint is written.
signal_run() {
    local name=$1 sig=$2 want=$3 more=$4 device=$5 out=$tmp/$1
    local slow=0
    [ -n "$more" ] && slow=400
    SSMTRADE_TEST_SLOW_CHECKPOINT_MS=$slow "$BIN" train $small --updates 100000 --checkpoint-every 0 \
        --device "$device" --out "$out" >"$out.log" 2>"$out.err" &
    local pid=$!
    pids+=("$pid")
    if ! wait_for "$out.log" '^update +2/' 300; then
        bad "$name: no second update within 300 s: $(cat "$out.log" "$out.err")"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return
    fi
    kill -"$sig" "$pid"
    if [ -n "$more" ]; then
        wait_for "$out.log" '^stopping on SIG' 120 || bad "$name: no 'stopping on' line"
        for s in $more; do
            sleep 0.3 # inside the slow checkpoint write (2 x 400 ms)
            kill -"$s" "$pid" 2>/dev/null
        done
    fi
    wait "$pid"
    local rc=$?
    [ "$rc" = "$want" ] && ok || bad "$name: exit status $rc, expected $want: $(cat "$out.err")"
    [ "$(wc -l <"$out.err")" = 1 ] && ok || bad "$name: stderr should be one line: $(cat "$out.err")"
    local n
    n=$(sed -n "s/^ssmtrade train: interrupted by SIG$sig after update \([0-9]*\): checkpoint .*/\1/p" "$out.err")
    if [ -z "$n" ]; then
        bad "$name: message: $(cat "$out.err")"
        return
    fi
    grep -qF "interrupted by SIG$sig after update $n: checkpoint $out/last.safetensors (resume with --resume $out/last.safetensors)" \
        "$out.err" && ok || bad "$name: message names the checkpoint: $(cat "$out.err")"
    [ "$n" -ge 2 ] && ok || bad "$name: stopped after update $n, before the signal"
    local u
    u=$(python3 "$check" update "$out/last.safetensors" 2>&1)
    [ "$u" = "$n" ] && ok || bad "$name: last.safetensors: $u (expected update $n)"
    u=$(python3 "$check" update "$out/checkpoints/ckpt_$(printf %06d "$n").safetensors" 2>&1)
    [ "$u" = "$n" ] && ok || bad "$name: periodic checkpoint of update $n: $u"
    [ "$(wc -l <"$out/metrics.jsonl")" = "$n" ] && ok || bad "$name: metrics.jsonl should have $n lines"
    ls "$out" "$out/checkpoints" | grep -q '\.tmp\.' && bad "$name: temporary files left: $(ls "$out" "$out/checkpoints")" || ok
    # The run continues from the checkpoint.
    if "$BIN" train --resume "$out/last.safetensors" --out "$out" --device "$device" --stop-after 1 --quiet \
        >"$out.r.log" 2>&1; then
        ok
    else
        bad "$name: resume: $(cat "$out.r.log")"
    fi
    [ "$(wc -l <"$out/metrics.jsonl")" = $((n + 1)) ] && tail -1 "$out/metrics.jsonl" | grep -q "\"update\": $((n + 1))," \
        && ok || bad "$name: resume should add update $((n + 1)): $(tail -2 "$out/metrics.jsonl")"
}

signal_run int INT 130 "" cpu
signal_run term TERM 143 "" cpu
# Two more signals while the checkpoint is written: the first one's status, a whole checkpoint.
signal_run int_twice INT 130 "INT TERM" cpu

if "$BIN" info --json | grep -Eq '"cuda_devices":[[:space:]]*[1-9]'; then
    signal_run gpu_int INT 130 "" cuda
    signal_run gpu_term_twice TERM 143 "TERM INT" cuda
else
    echo "note: no CUDA device, the --device cuda runs are skipped"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
