# device-env.sh, sourced by the GPU machine's scripts (gpu-check.sh,
# gpu-ab.sh, bench/gpu-bench.sh) with the repository root as $1: the
# carried Debian packages (.deps/*.deb, fetched by
# ../shared/tools/device-deps.sh; that machine has no package registry)
# unpacked once into .deps/root, their libraries on LD_LIBRARY_PATH, and
# DEPS_CMAKE: the cmake arguments that build against them. Without .deps
# it does nothing (DEPS_CMAKE empty: the system's packages).
DEPS_CMAKE=()
if [ -d "$1/.deps" ]; then
  _r=$1/.deps/root
  if [ ! -d "$_r" ]; then
    for _f in "$1"/.deps/*.deb; do dpkg -x "$_f" "$_r"; done
  fi
  _u=$_r/usr
  _a=$_u/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH=$_a:$_a/openblas-pthread:${LD_LIBRARY_PATH:-}
  DEPS_CMAKE=(-DCMAKE_PREFIX_PATH="$_u" -DCBLAS_INCLUDE_DIR="$_u/include/x86_64-linux-gnu/openblas-pthread"
    -DOPENBLAS_LIB="$_a/openblas-pthread/libopenblas.so" -DCJSON_INCLUDE_DIR="$_u/include"
    -DCJSON_LIB="$_a/libcjson.so")
  unset _r _u _a _f
fi
