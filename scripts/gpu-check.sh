#!/bin/bash
# GPU machine run: build with the carried Debian packages (.deps, fetched by
# ../shared/tools/device-deps.sh; the machine has no package registry), then
# the stages named in STAGES (default: build test torch), each logged under
# $OUT and summarised on stdout:
#   build     configure and build into build-gpu (sm_90 + PTX; BUILD_TARGETS: only those)
#   test      the CPU tests through ctest (CTEST_EXCLUDE: a regex of tests to
#             leave out, e.g. "test_learning|test_csv"), then every
#             test_cuda_* one at a time with its full output (SKIP_CUDA_TESTS)
#   torch     whole-model parity with PyTorch autograd in float64 (3 presets)
#   learning  test_cuda_learning alone (the default preset trains on the GPU
#             and passes the CPU's learning check), its log in learning.log
#   sanitize  compute-sanitizer memcheck and racecheck over every GPU test
#             (SSMTRADE_TEST_QUICK=1 shrinks the long loops; SANITIZE_ONLY:
#             only the programs it lists; SANITIZE_TOOLS: memcheck racecheck;
#             SANITIZE_PARTS: slow programs split over parallel processes;
#             RACECHECK_FILTER: racecheck's kernel filter, default ours only;
#             SANITIZE_BUDGET: seconds for the whole stage, default 480, so
#             that it ends, and its summary comes back, inside one device call)
#   profile   per-kernel times (ncu) of one training step and one action step
#             (PROFILE_WHAT, PROFILE_PRECISION: which, see the stage)
#   main      the README's main job on the GPU (SSMTRADE_UPDATES, default 40 here)
#   bench     bench/gpu-bench.sh (ours vs PyTorch side by side)
# Usage on the device: STAGES="build test" bash scripts/gpu-check.sh
# BUNDLE=1: every log of the run packed into $OUT/logs.tar.gz (what comes
# back from the GPU machine is limited to a few files).
set -uo pipefail
OUT=${OUT:-/tmp/out}
STAGES=${STAGES:-build test torch}
mkdir -p "$OUT"
. scripts/device-env.sh "$PWD" # the carried packages: LD_LIBRARY_PATH, DEPS_CMAKE
rc=0
has() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }
stamp() { echo "== $1 ($(date +%T))"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
nvcc --version | tail -1

if has build; then
  stamp build
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release "${DEPS_CMAKE[@]}" >"$OUT/configure.log" 2>&1 \
    || { tail -30 "$OUT/configure.log"; exit 1; }
  # BUILD_TARGETS: only these targets (e.g. "ssmtrade test_cuda_dist"; default: all)
  cmake --build build-gpu -j16 ${BUILD_TARGETS:+--target $BUILD_TARGETS} >"$OUT/build.log" 2>&1 \
    || { grep -E "error" "$OUT/build.log" | head -40; exit 1; }
  rm -f "$OUT/configure.log" "$OUT/build.log" # at most 8 files come back
fi

if has test; then
  stamp test
  # CPU tests through ctest in parallel; the GPU tests one at a time (they
  # share the card), each with its exit code, time and pass/fail counts.
  (cd build-gpu && ctest -j12 --timeout 900 --output-on-failure -E "test_cuda_${CTEST_EXCLUDE:+|$CTEST_EXCLUDE}" >"$OUT/ctest.log" 2>&1) || rc=1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.log" | head -20
  : >"$OUT/cuda_tests.log"
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1
  for t in build-gpu/test_cuda_*; do
    n=$(basename "$t")
    case " ${SKIP_CUDA_TESTS:-} " in *" $n "*) continue ;; esac
    s0=$(date +%s.%N)
    echo "==== $n" >>"$OUT/cuda_tests.log"
    timeout ${CUDA_TEST_TIMEOUT:-600} "$t" >>"$OUT/cuda_tests.log" 2>&1
    r=$?
    s1=$(date +%s.%N)
    line=$(awk -v n="==== $n" '$0 == n {f=1; next} /^==== / {f=0} f' "$OUT/cuda_tests.log" | grep -E "passed, [0-9]+ failed|skipped" | tail -1)
    printf "%-22s exit %3d  %6.1f s  %s\n" "$n" "$r" "$(awk -v a="$s0" -v b="$s1" 'BEGIN{print b-a}')" "$line"
    [ $r = 0 ] || rc=1
  done | tee "$OUT/cuda_summary.txt"
  grep -E "^FAIL" "$OUT/cuda_tests.log" | head -40
fi

if has torch; then
  stamp torch
  for p in tiny odd default; do
    build-gpu/model_io --preset $p --windows 3 --seed 7 --out /tmp/mio_$p >/dev/null && build-gpu/model_io_f32 /tmp/mio_$p >/dev/null
  done
  python3 scripts/torch_parity.py /tmp/mio_tiny /tmp/mio_odd /tmp/mio_default >"$OUT/torch_parity.log" 2>&1 || rc=1
  tail -15 "$OUT/torch_parity.log"
fi

if has learning; then
  stamp learning
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1
  timeout ${LEARNING_TIMEOUT:-600} build-gpu/test_cuda_learning >"$OUT/learning.log" 2>&1 || rc=1
  grep -E "updates, |passed, [0-9]+ failed|^FAIL|expectancy|oracle|random|explained" "$OUT/learning.log" | tail -20
fi

if has sanitize; then
  stamp sanitize
  # Each GPU test under memcheck and racecheck, SANITIZE_JOBS at a time
  # (they are slow, and small: the card takes several at once).
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  # Under the tools test_cuda_trainer and test_cuda_evaluate (both tools), test_cuda_vsn,
  # test_cuda_model, test_cuda_ssd and test_cuda_dist (racecheck) ran past 170-240 s on
  # 2026-12-01: SANITIZE_SLOW names them.
  export SSMTRADE_TEST_QUICK=1 CS OUT SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-240} OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1
  # Every run stops by SAN_END (a run that starts late gets what is left, none
  # under 20 s); the per-run logs stay in SAN_LOGS, off $OUT (at most 8 files
  # come back), and each run's line is added to $OUT/sanitize.txt as it ends.
  export SAN_END=$(( $(date +%s) + ${SANITIZE_BUDGET:-480} )) SAN_LOGS=/tmp/sanitize_logs
  rm -rf "$SAN_LOGS" && mkdir -p "$SAN_LOGS"
  : >"$OUT/sanitize.txt"
  export SANITIZE_SLOW=${SANITIZE_SLOW:-"test_cuda_trainer test_cuda_evaluate test_cuda_vsn test_cuda_model test_cuda_ssd test_cuda_dist"}
  export SANITIZE_SLOW_TIMEOUT=${SANITIZE_SLOW_TIMEOUT:-600}
  # SANITIZE_PARTS: "PROGRAM:N ...": PROGRAM runs as N processes in parallel,
  # SSMTRADE_TEST_PART=k/N each (its cases k, k+N, ...; tests/test.h)
  export SANITIZE_PARTS=${SANITIZE_PARTS:-"test_cuda_trainer:6 test_cuda_model:7 test_cuda_dist:4 test_cuda_evaluate:4 test_cuda_ssd:6"}
  san_one() {
    tool=$1 t=$2 part=${3:--} n=$(basename "$2")
    # the slow programs get SANITIZE_SLOW_TIMEOUT (the tests' stdout is line-buffered: a timed-out log shows how far it got)
    lim=$SANITIZE_TIMEOUT
    case " $SANITIZE_SLOW " in *" $n "*) lim=$SANITIZE_SLOW_TIMEOUT ;; esac
    left=$((SAN_END - $(date +%s)))
    [ "$left" -lt "$lim" ] && lim=$left
    if [ "$lim" -lt 20 ]; then
      echo "$tool $n${part/-/}: not run (SANITIZE_BUDGET spent)" | tee -a "$OUT/sanitize.txt"
      return
    fi
    log="$SAN_LOGS/san_${tool}_$n${part/\//of}.log"
    [ "$part" = - ] && log="$SAN_LOGS/san_${tool}_$n.log"
    if [ "$part" = - ]; then unset SSMTRADE_TEST_PART; else export SSMTRADE_TEST_PART=$part; fi
    filt=""
    [ "$tool" = racecheck ] && filt=$RACECHECK_FILTER
    case " $SANITIZE_NO_API_ERRORS " in *" $n "*) [ "$tool" = memcheck ] && filt="--report-api-errors no" ;; esac
    # shellcheck disable=SC2086
    timeout "$lim" "$CS" --tool "$tool" $filt --error-exitcode 99 "$t" >"$log" 2>&1
    r=$?
    s=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    res=$(grep -E "passed, [0-9]+ failed" "$log" | tail -1)
    echo "$tool $n${part/-/}: exit $r (limit ${lim} s) ${res:+$res, }${s:-no summary; last line: $(grep -v '^=====' "$log" | tail -1)}" | tee -a "$OUT/sanitize.txt"
  }
  # racecheck checks our kernels (every name ends in _kernel) and not
  # cuBLAS's (their names say cublas): a test under it ran 23 s whole, 3 s so
  # filtered (H200, 2026-12-01). RACECHECK_FILTER="" checks every kernel.
  export RACECHECK_FILTER=${RACECHECK_FILTER---kernel-name kns=_kernel --kernel-name-exclude kns=cublas}
  # memcheck of these programs leaves CUDA API errors unreported (memory errors still count):
  # test_cuda_nccl's 16 (2026-12-02, NCCL 2.28.3) are all cudaErrorNoKernelImageForDevice from
  # cudaFuncGetAttributes inside ncclCommInitRank (NCCL probing its own kernels; 4 an init), none
  # from our calls, which the code checks itself (a failed call fails the test)
  export SANITIZE_NO_API_ERRORS=${SANITIZE_NO_API_ERRORS-test_cuda_nccl}
  export -f san_one
  # SANITIZE_ONLY: a space-separated list of what to run (default: all):
  # PROGRAM (every tool, every part), TOOL:PROGRAM, or TOOL:PROGRAM:k (part
  # k of its SANITIZE_PARTS), e.g. "test_cuda_env racecheck:test_cuda_ssd:5"
  wanted() { # tool program part-index (- when unsplit)
    [ -z "${SANITIZE_ONLY:-}" ] && return 0
    case " $SANITIZE_ONLY " in *" $2 "* | *" $1:$2 "* | *" $1:$2:$3 "*) return 0 ;; esac
    return 1
  }
  runs=$(for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    for t in build-gpu/test_cuda_*; do
      n=$(basename "$t")
      case "$n" in test_cuda_learning|${SANITIZE_SKIP:-none}) continue ;; esac
      parts=$(for p in $SANITIZE_PARTS; do [ "${p%%:*}" = "$n" ] && echo "${p#*:}"; done)
      if [ -n "$parts" ]; then
        for k in $(seq 0 $((parts - 1))); do wanted "$tool" "$n" "$k" && echo "$tool $t $k/$parts"; done
      else
        wanted "$tool" "$n" - && echo "$tool $t"
      fi
    done
  done)
  # the slow programs start first (started last, they ran out of the budget on 2026-12-02)
  slow_re="/($(echo $SANITIZE_SLOW | tr ' ' '|'))( |$)"
  { echo "$runs" | grep -E "$slow_re"; echo "$runs" | grep -vE "$slow_re"; } | grep . |
    xargs -P "${SANITIZE_JOBS:-6}" -L 1 bash -c 'san_one "$0" "$1" "${2:--}"'
  grep -qvE "exit 0 " "$OUT/sanitize.txt" && rc=1
  # the logs in one file (what comes back is limited to a few files)
  for f in "$SAN_LOGS"/san_*.log; do echo "==== $f"; tail -40 "$f"; done >"$OUT/sanitize_logs.txt" 2>/dev/null
fi

if has profile; then
  stamp profile
  # Per-kernel times of one eager training step (2,048 windows) and one
  # action step (128 environments) of the default preset, through ncu.
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  # PROFILE_WHAT: the runs, "|"-separated; PROFILE_PRECISION: fp32 or bf16
  IFS='|' read -r -a whats <<<"${PROFILE_WHAT:-train --windows 2048|act --envs 128}"
  for what in "${whats[@]}"; do
    # shellcheck disable=SC2086
    timeout 240 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --launch-count ${NCU_LAUNCHES:-700} \
      build-gpu/ssmtrade bench --what $what --precision ${PROFILE_PRECISION:-fp32} --repeats 1 --warmup 0 --sets 1 \
      >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
    echo "-- ncu: ssmtrade bench --what $what"
    python3 bench/ncu_summary.py "$OUT/ncu.csv" 25 | tee -a "$OUT/profile.txt"
    # the training step's kernels against their hand-counted floors (bench/kernel_roofline.py)
    if [ "${what%% *}" = train ]; then
      ceil=""
      [ -f "$OUT/ours.json" ] && ceil="--ceilings $OUT/ours.json"
      win=$(echo "$what" | sed -n 's/.*--windows \([0-9]*\).*/\1/p')
      # the last-row tail as the run had it (a PROFILE_WHAT with --last-row-tail 0: the full last block)
      tail=$(echo "$what" | sed -n 's/.*--last-row-tail \([01]\).*/\1/p')
      # and the quad scans and the VSN fill's tensor cores (bf16) as it had them
      quad=$(echo "$what" | sed -n 's/.*--scan-quad \([01]\).*/\1/p')
      vtc=$(echo "$what" | sed -n 's/.*--vsn-tc \([01]\).*/\1/p')
      # shellcheck disable=SC2086
      python3 bench/kernel_roofline.py "$OUT/ncu.csv" --precision ${PROFILE_PRECISION:-fp32} --windows "${win:-2048}" \
        --tail "${tail:-1}" --quad "${quad:-1}" --vsn-tc "${vtc:-1}" $ceil | tee -a "$OUT/profile.txt"
    fi
  done
  rm -f "$OUT/ncu.csv" "$OUT/ncu.err"
fi

if has main; then
  stamp main
  SSMTRADE_UPDATES=${SSMTRADE_UPDATES:-40} SSMTRADE_RUN=/tmp/run_main bash scripts/run-main.sh build-gpu/ssmtrade \
    >"$OUT/main.log" 2>&1 || rc=1
  grep -E "^==|update +[0-9]+/|greedy|sampled|buy|random|oracle|flat" "$OUT/main.log" | awk 'NR<=6 || /update/ && NR%10==0 || !/update/' | tail -40
fi

if has bench; then
  stamp bench
  bash bench/gpu-bench.sh build-gpu || rc=1
fi
# At most 8 files come back from the GPU machine: BUNDLE=1 packs every log
# into logs.tar.gz beside summary.txt (this run's stdout is the summary).
if [ -n "${BUNDLE:-}" ]; then
  (cd "$OUT" && tar czf /tmp/logs.tar.gz --exclude=logs.tar.gz . && rm -rf ./* && mv /tmp/logs.tar.gz .)
fi
stamp "done, rc $rc"
exit $rc
