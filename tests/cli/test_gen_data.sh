#!/usr/bin/env bash
# test_gen_data.sh: `ssmtrade gen-data` end to end ($1 = the ssmtrade binary):
# --help, flag errors (non-zero exit, one-line reason), the files it writes,
# same seed -> same bytes, --config FILE equals the flags, another seed ->
# other bytes.
set -u
bin="$1"
tmp="$(mktemp -d /tmp/st_test_gen_data_XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
check() { # check DESCRIPTION COMMAND...
    local what="$1"
    shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what"; fi
}

check "--help exits 0 and shows usage" bash -c "'$bin' gen-data --help | grep -q 'usage: ssmtrade gen-data'"
check "no --out fails" bash -c "! '$bin' gen-data >/dev/null 2>&1"
check "no --out says why" bash -c "'$bin' gen-data 2>&1 | grep -q -- '--out DIR is required'"
check "bad --bars fails" bash -c "! '$bin' gen-data --out '$tmp/x' --bars 12abc >/dev/null 2>&1"
check "unknown flag fails" bash -c "'$bin' gen-data --out '$tmp/x' --colour red 2>&1 | grep -q \"unknown flag '--colour'\""

check "writes a market" "$bin" gen-data --out "$tmp/a" --seed 5 --instruments 3 --bars 400
check "three CSVs and a README" test -f "$tmp/a/syn0.csv" -a -f "$tmp/a/syn1.csv" -a -f "$tmp/a/syn2.csv" -a -f "$tmp/a/README.md" -a ! -e "$tmp/a/syn3.csv"
check "header" test "$(head -1 "$tmp/a/syn0.csv")" = "timestamp,open,high,low,close,volume"
check "400 bars + header" test "$(wc -l <"$tmp/a/syn1.csv")" -eq 401
check "README names the seed" grep -q -- "--seed 5 " "$tmp/a/README.md"
check "high >= max(open, close) >= min(open, close) >= low > 0" awk -F, 'NR > 1 { if (!($3 >= $2 && $3 >= $5 && $4 <= $2 && $4 <= $5 && $4 > 0 && $6 >= 0)) bad++ } END { exit bad > 0 }' "$tmp/a/syn2.csv"

check "same seed again" "$bin" gen-data --out "$tmp/b" --seed=5 --instruments=3 --bars=400
check "same seed, same bytes" cmp -s "$tmp/a/syn2.csv" "$tmp/b/syn2.csv"
printf '{"seed": 5, "instruments": 3, "bars": 400}\n' >"$tmp/gen.json"
check "--config file" "$bin" gen-data --config "$tmp/gen.json" --out "$tmp/d"
check "--config gives the same market" cmp -s "$tmp/a/syn1.csv" "$tmp/d/syn1.csv"
check "another seed" "$bin" gen-data --out "$tmp/c" --seed 6 --instruments 3 --bars 400
check "another seed, other bytes" bash -c "! cmp -s '$tmp/a/syn0.csv' '$tmp/c/syn0.csv'"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
