#!/usr/bin/env bash
# test_mpirun.sh: OpenMPI's mpirun as the launcher of several hosts'
# training (dist/launch.h) without GPUs ($1 = the binary): under
# `mpirun -np 2` each process knows its rank, the world and its local rank
# from OpenMPI's variables (`ssmtrade info` says so); a malformed variable
# is named; `mpirun -np 1 ssmtrade train` is a plain run, and -np 2 with a
# --gpus that does not match is refused by each rank, naming the fix.
# Skipped (77) when mpirun is not installed.
set -u
BIN=${1:?usage: test_mpirun.sh path/to/ssmtrade}
command -v mpirun >/dev/null || { echo "skipped: no mpirun (Debian: openmpi-bin)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2" >&2; fi; }
# each rank's info into its own file (mpirun interleaves output lines)
mpirun --allow-run-as-root --oversubscribe -np 2 bash -c "'$BIN' info > '$tmp'/info.\$OMPI_COMM_WORLD_RANK 2>&1"
st=$?
check '[ $st = 0 ]' "mpirun -np 2 ssmtrade info: exit $st"
for r in 0 1; do
  line=$(grep "^multi-GPU:" "$tmp/info.$r")
  echo "rank $r: $line"
  check '[[ $line == *"this process: rank $r of 2, local rank $r, started by mpirun"* ]]' "rank $r: '$line'"
done
line=$(OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 "$BIN" info | grep "^multi-GPU:")
check '[[ $line == *"OMPI_COMM_WORLD_RANK='"'"'2'"'"': expected a whole number in [0, 1] (set by mpirun)"* ]]' "bad rank: '$line'"
# train under mpirun: -np 1 is a plain run; -np 2 with --gpus 1 is refused by every rank, naming the fix
small="--device cpu --batch 8 --rollout 8 --minibatches 2 --epochs 1 --updates 1 --instruments 2 --bars 1500 --quiet"
mpirun --allow-run-as-root --oversubscribe -np 1 "$BIN" train $small --out "$tmp/run1" >"$tmp/o1" 2>&1
st=$?
check '[ $st = 0 ] && [ -f "$tmp/run1/last.safetensors" ]' "mpirun -np 1 train: exit $st: $(cat "$tmp/o1")"
mpirun --allow-run-as-root --oversubscribe -np 2 bash -c \
  "'$BIN' train $small --out '$tmp'/run2 > '$tmp'/t.\$OMPI_COMM_WORLD_RANK 2>&1; echo \$? >> '$tmp'/t.\$OMPI_COMM_WORLD_RANK"
for r in 0 1; do
  check 'grep -q "this process is rank $r of 2 (mpirun) but --gpus is 1: pass --gpus 2" "$tmp/t.$r"' \
    "rank $r of mpirun -np 2 train: $(cat "$tmp/t.$r")"
  check '[ "$(tail -1 "$tmp/t.$r")" != 0 ]' "rank $r of mpirun -np 2 train with --gpus 1 exited 0"
done
line=$("$BIN" info | grep "^multi-GPU:")
check '[[ $line != *"this process"* ]]' "not under mpirun, yet: '$line'"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
