#!/bin/bash
# GPU machine run: build with the carried Debian packages (.deps, fetched by
# ../shared/tools/device-deps.sh; the machine has no package registry), then
# run the whole test suite there, GPU parity tests included, and keep the
# logs under $OUT. Usage on the device: bash scripts/gpu-check.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
R=$PWD/.deps/root
if [ ! -d "$R" ]; then
  for f in .deps/*.deb; do dpkg -x "$f" "$R"; done
fi
U=$R/usr
A=$U/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$A:$A/openblas-pthread:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
nvcc --version | tail -1 | tee -a "$OUT/gpu.txt"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$U" \
  -DCBLAS_INCLUDE_DIR="$U/include/x86_64-linux-gnu/openblas-pthread" \
  -DOPENBLAS_LIB="$A/openblas-pthread/libopenblas.so" \
  -DCJSON_INCLUDE_DIR="$U/include" -DCJSON_LIB="$A/libcjson.so" >"$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build build-gpu -j16 >"$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -40; exit 1; }
cd build-gpu
ctest -j8 --output-on-failure ${CTEST_ARGS:-} >"$OUT/ctest.log" 2>&1
rc=$?
grep -E "tests passed|tests failed|Failed|Skipped|\*\*\*" "$OUT/ctest.log" | head -40
for t in $(ls test_cuda_* 2>/dev/null); do
  echo "== $t"; ./$t 2>&1 | tail -60
done >"$OUT/cuda_tests.log" 2>&1
grep -E "FAIL|passed|skipped" "$OUT/cuda_tests.log" | head -40
# Whole-model parity with PyTorch autograd (float64), three presets.
if [ -z "${SKIP_TORCH:-}" ]; then
  for p in tiny odd default; do
    ./model_io --preset $p --windows 3 --seed 7 --out /tmp/mio_$p >/dev/null && ./model_io_f32 /tmp/mio_$p >/dev/null
  done
  python3 ../scripts/torch_parity.py /tmp/mio_tiny /tmp/mio_odd /tmp/mio_default >"$OUT/torch_parity.log" 2>&1
  prc=$?
  tail -15 "$OUT/torch_parity.log"
  [ $prc = 0 ] || rc=$prc
fi
exit $rc
