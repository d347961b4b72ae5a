#!/bin/bash
# fuzz.sh: builds the libFuzzer harnesses of fuzz/ and runs each in turn.
#
#   bash scripts/fuzz.sh                 every harness for FUZZ_SECONDS (60) each
#   FUZZ_SECONDS=600 bash scripts/fuzz.sh
#   FUZZ_TARGETS="csv config" bash scripts/fuzz.sh
#   FUZZ_SECONDS=0 bash scripts/fuzz.sh  build, then replay the corpora once
#   FUZZ_OVERRIDE=DIR bash scripts/fuzz.sh
#       compiles DIR/src/X.c instead of src/X.c where it exists (to fuzz a
#       fix of a file before it lands in the tree)
#
# Everything lands in build-fuzz/ (the normal CMake build is untouched): the
# library compiled by clang with -fsanitize=fuzzer-no-link,address,undefined
# (float and double twins of the dual-precision files, no OpenMP, no CUDA),
# one binary per harness, the working corpora (seeded from fuzz/corpus/, which
# libFuzzer only reads) and crashes/ for the inputs that crashed, leaked or
# hung. Prints the executions of each harness; exits non-zero on any crash,
# leak, timeout or out-of-memory. Installs clang and its fuzzer runtime with
# apt-get when they are missing (root, or sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_TARGETS=${FUZZ_TARGETS:-"csv config safetensors"}
FUZZ_JOBS=${FUZZ_JOBS:-$(nproc)}
FUZZ_OVERRIDE=${FUZZ_OVERRIDE:-}
OUT=build-fuzz

# ---- tools -------------------------------------------------------------------
bash scripts/install-deps.sh # cJSON and OpenBLAS headers, as for the normal build
CC=""
for c in clang clang-14; do
    if command -v "$c" >/dev/null; then CC=$c; break; fi
done
probe() { # can $CC link a libFuzzer binary with the sanitizers?
    [ -n "$CC" ] || return 1
    local tmp
    tmp=$(mktemp -d)
    echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$tmp/p.c"
    "$CC" -fsanitize=fuzzer,address,undefined "$tmp/p.c" -o "$tmp/p" >/dev/null 2>&1
    local rc=$?
    rm -rf "$tmp"
    return $rc
}
if ! probe; then
    echo "fuzz: installing clang and libclang-rt-14-dev (libFuzzer)"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
    CC=clang
    probe || { echo "fuzz: $CC cannot link -fsanitize=fuzzer binaries" >&2; exit 1; }
fi
CBLAS_INC=/usr/include/x86_64-linux-gnu/openblas-pthread
[ -d "$CBLAS_INC" ] || CBLAS_INC=/usr/include

# ---- build -------------------------------------------------------------------
# The library: every src/**/*.c but the CLI, compiled as the normal build does
# (gnu11, no FMA contraction), warnings on but not fatal (this build must not
# break on another compiler's opinion of code in progress); the harnesses
# themselves are built with -Werror.
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-std=gnu11 -O1 -g -ffp-contract=off $SAN -Wall -Wextra -Wno-unknown-pragmas -Isrc -I$CBLAS_INC"
LIBS="-lopenblas -lcjson -lm"
mkdir -p "$OUT/obj" "$OUT/crashes"
stamp="$OUT/obj/.stamp" # the last complete build; a newer header rebuilds everything
all=0
if [ ! -f "$stamp" ] || [ -n "$(find src -name '*.h' -newer "$stamp" | head -1)" ]; then all=1; fi
jobs_file="$OUT/obj/jobs.txt"
: >"$jobs_file"
objs=()
while IFS= read -r src; do
    stem=${src#src/}
    stem=${stem%.c}
    stem=${stem//\//_}
    if grep -q '^#include "core/real.h"' "$src"; then variants="32 64"; else variants="single"; fi
    for v in $variants; do
        if [ "$v" = single ]; then
            obj="$OUT/obj/$stem.o" def="-DST_FUZZ_BUILD=1"
        else
            obj="$OUT/obj/${stem}_f$v.o" def="-DST_REAL_BITS=$v"
        fi
        objs+=("$obj")
        from=$src
        [ -n "$FUZZ_OVERRIDE" ] && [ -f "$FUZZ_OVERRIDE/$src" ] && from=$FUZZ_OVERRIDE/$src
        if [ "$all" = 1 ] || [ ! -f "$obj" ] || [ "$from" -nt "$obj" ] || [ "$from" != "$(cat "$obj.from" 2>/dev/null)" ]; then
            echo "$from $obj $def" >>"$jobs_file"
        fi
    done
done < <(find src -name '*.c' -not -path 'src/cli/*' | sort)
if [ -s "$jobs_file" ]; then
    echo "fuzz: compiling $(wc -l <"$jobs_file") library objects with $CC ($FUZZ_JOBS jobs)"
    export CC CFLAGS
    # shellcheck disable=SC2016
    xargs -n 3 -P "$FUZZ_JOBS" sh -c '$CC $CFLAGS -Wno-unused-function -fsanitize=fuzzer-no-link "$3" -c "$1" -o "$2" &&
        echo "$1" >"$2.from" || { echo "fuzz: cannot compile $1" >&2; exit 255; }' _ <"$jobs_file"
fi
touch "$stamp"
rm -f "$OUT/libst_fuzz.a"
ar rcs "$OUT/libst_fuzz.a" "${objs[@]}"
for t in $FUZZ_TARGETS; do
    [ -f "fuzz/fuzz_$t.c" ] || { echo "fuzz: no harness fuzz/fuzz_$t.c" >&2; exit 1; }
    # shellcheck disable=SC2086 # CFLAGS and LIBS are lists of words
    $CC $CFLAGS -Werror -fsanitize=fuzzer "fuzz/fuzz_$t.c" "$OUT/libst_fuzz.a" $LIBS -o "$OUT/fuzz_$t"
done

# ---- run ---------------------------------------------------------------------
max_len() {
    case $1 in
    csv) echo 16384 ;;
    config) echo 4096 ;;
    safetensors) echo 131072 ;; # the seed checkpoint of the harness's trainer is ~48 KB
    esac
}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The safetensors harness's temporary file lives here (an abort leaves it behind).
tmpdir=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo /tmp )/st_fuzz.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT
export ST_FUZZ_TMPDIR=$tmpdir
status=0
summary=()
for t in $FUZZ_TARGETS; do
    corpus="$OUT/corpus/$t"
    mkdir -p "$corpus"
    log="$OUT/fuzz_$t.log"
    if [ "$t" = safetensors ]; then
        # A checkpoint of the harness's own trainer, so that restore gets past
        # the parameter table even after the model's tensors change.
        ST_FUZZ_WRITE_SEED="$corpus/seed_checkpoint.safetensors" "$OUT/fuzz_$t" -runs=0 "$corpus" >/dev/null 2>&1 || true
    fi
    args=(-max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$OUT/crashes/$t-")
    [ -f "fuzz/$t.dict" ] && args+=(-dict="fuzz/$t.dict")
    if [ "$FUZZ_SECONDS" -gt 0 ]; then
        args+=(-max_total_time="$FUZZ_SECONDS")
        echo "fuzz: $t for $FUZZ_SECONDS s (log $log)"
    else
        args+=(-runs=0)
        echo "fuzz: $t: replaying the corpus (log $log)"
    fi
    rc=0
    seeds=()
    [ -d "fuzz/corpus/$t" ] && seeds=("fuzz/corpus/$t")
    "$OUT/fuzz_$t" "${args[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
    units=$(grep -c . <(find "$corpus" -type f) || true)
    if [ "$rc" -ne 0 ]; then
        status=1
        what=$(grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' "$log" || echo "exit $rc")
        summary+=("$t: FAILED (rc $rc) after ${execs:-?} executions: $what; see $log and $OUT/crashes/")
    else
        summary+=("$t: ok, ${execs:-?} executions in ${FUZZ_SECONDS} s, corpus $units inputs")
    fi
done
echo "fuzz summary:"
printf '  %s\n' "${summary[@]}"
exit $status
