#!/bin/bash
# Installs the Debian packages the build needs, when they are missing:
#   cmake, gcc, make     the build
#   libopenblas-dev      BLAS for CPU matrix products
#   libcjson-dev         JSON (config files, safetensors headers)
#   libomp-dev/libgomp   OpenMP (gcc's libgomp ships with gcc)
#   openmpi-bin          mpirun, the launcher of multi-host training (tests/cli/test_mpirun.sh)
# Runs apt-get only when something is missing; needs root for that.
set -euo pipefail
need=()
[ -f /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || [ -f /usr/include/cblas.h ] || need+=(libopenblas-dev)
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
command -v cmake >/dev/null || need+=(cmake)
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v mpirun >/dev/null || need+=(openmpi-bin)
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
