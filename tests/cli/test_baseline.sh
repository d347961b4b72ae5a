#!/usr/bin/env bash
# test_baseline.sh: `ssmtrade baseline` end to end ($1 = the binary).
# Real data (DJIA daily closes, no oracle): every metric of flat, buyhold and
# random is a finite number and the oracle column is n/a; the synthetic
# market: the oracle's total R beats random's and flat's, --json parses;
# bad flags fail with a one-line reason and a non-zero status.
set -u
BIN=${1:?usage: test_baseline.sh path/to/ssmtrade}
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$BIN" baseline --help >"$tmp/help" 2>&1 && grep -q -- "--policy" "$tmp/help" && ok || bad "--help"

# Metric rows: name, one cell per policy, then the definition. Checks that the
# first n cells after the name are finite numbers (or n/a in column $2).
check_cells() { # file n na_col
    awk -v n="$2" -v na="$3" '
        /^metric / { table = 1; next }
        table && NF > n {
            rows++
            for (i = 2; i <= n + 1; i++) {
                if (i - 1 == na) { if ($i != "n/a") { print "cell " $1 " " i ": " $i " (want n/a)"; badc++ } }
                else if ($i !~ /^-?[0-9]+(\.[0-9]+)?$/) { print "cell " $1 " " i ": " $i; badc++ }
            }
        }
        END { if (rows < 16) { print "only " rows " metric rows"; badc++ } exit badc > 0 }' "$1"
}

data=""
for d in ../shared/data /work/shared/data; do
    [ -f "$d/djia_daily_1980_2012.csv" ] && data="$d/djia_daily_1980_2012.csv" && break
done
if [ -n "$data" ]; then
    if "$BIN" baseline --data "$data" --split test --policy all >"$tmp/djia" 2>"$tmp/djia.err"; then
        ok
        check_cells "$tmp/djia" 4 4 && ok || bad "djia: metrics not finite or oracle not n/a: $(cat "$tmp/djia")"
    else
        bad "baseline on $data failed: $(cat "$tmp/djia.err")"
    fi
    "$BIN" baseline --data "$data" --policy oracle >/dev/null 2>"$tmp/err" && bad "oracle on real data accepted" || ok
    grep -q "oracle" "$tmp/err" && ok || bad "oracle error message: $(cat "$tmp/err")"
else
    echo "SKIP: djia_daily_1980_2012.csv not found beside the repository"
fi

# Synthetic market (the default data): oracle > random and flat in total R.
if "$BIN" baseline --split test --policy all >"$tmp/syn" 2>"$tmp/syn.err"; then
    ok
    check_cells "$tmp/syn" 4 0 && ok || bad "synthetic: metrics not finite: $(cat "$tmp/syn")"
    awk '$1 == "total_R" { exit !($5 > $4 + 100 && $5 > $2 + 100) }' "$tmp/syn" && ok ||
        bad "oracle does not beat random and flat: $(grep total_R "$tmp/syn")"
else
    bad "baseline on the synthetic market failed: $(cat "$tmp/syn.err")"
fi
if "$BIN" baseline --policy random --seed 3 --instruments 2 --bars 3000 --json >"$tmp/json" 2>"$tmp/json.err"; then
    if command -v python3 >/dev/null; then
        python3 -c '
import json, math, sys
d = json.load(open(sys.argv[1]))
m = d["policies"]["random"]
assert len(m) == 16 and all(math.isfinite(v) for v in m.values()), m
assert set(d["policies"]) == {"random"} and d["split"] == "test"
' "$tmp/json" && ok || bad "--json output: $(head -c 400 "$tmp/json")"
    else
        grep -q '"random"' "$tmp/json" && ok || bad "--json output"
    fi
else
    bad "--json run failed: $(cat "$tmp/json.err")"
fi

for args in "--policy nope" "--split later" "--window 0" "--bogus 1"; do
    # shellcheck disable=SC2086
    if "$BIN" baseline $args >/dev/null 2>"$tmp/err"; then bad "accepted: $args"; else
        [ "$(wc -l <"$tmp/err")" -ge 1 ] && ok || bad "no reason printed for: $args"
    fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
