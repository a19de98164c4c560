#!/usr/bin/env bash
# bench/gpu_check.sh — the GPU checks in one call, for a lent GPU machine
# where time is short. Run from the repository root on that machine after
# `tar xJf .gpu/carry.tar.xz -C /tmp` (../shared/tools/gpu-pack made it):
#   bash bench/gpu_check.sh            (logs and JSON under $OUT)
# 1. ctest -L gpu; 2. reprise bench --gpu; 3. reprise train on CUDA (both
# model sizes, --procs 1 and 2, --inflight 4); 4. when .gpu/reprise-orig
# exists (an older build, packed beside), the same bench and train rows
# for it, on the same card; 5. the PyTorch whole-step reference
# (bench/torch_ref.py). Prints a short summary last.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
B=/tmp/reprise-gpu/build
E=/tmp/gpu-env
root=$(pwd)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader |
  tee "$OUT/device.txt"
(cd "$B" && timeout "${CTEST_S:-240}" "$E" ctest -L gpu -j4 \
  --output-on-failure) >"$OUT/ctest.log" 2>&1
echo "ctest rc=$?"
grep -E "tests passed|\*\*\*|FAIL\]|Assertion|Passed|Failed" "$OUT/ctest.log" |
  grep -v "^\[----\]   $" | head -40
train_rows() { # $1: binary, $2: label
  for cfg in "--procs 1" "--procs 1 --inflight 4" "--procs 2" \
    "--procs 1 --hidden 256,256 --batch 1024"; do
    echo "== $2 train $cfg"
    timeout 60 "$E" "$1" train --backend cuda --iters 2000 $cfg 2>&1 |
      grep -E "per iteration|final loss|error|usage|throughput|gpu:" | head -4
  done
}
timeout 200 "$E" "$B/reprise" bench --gpu --json "$OUT/bench.json" \
  >"$OUT/bench.txt" 2>&1
echo "bench rc=$?"
train_rows "$B/reprise" new >"$OUT/train.txt" 2>&1
if [ -x "$root/.gpu/reprise-orig" ] && [ -z "${NO_ORIG:-}" ]; then
  timeout 200 "$E" "$root/.gpu/reprise-orig" bench --gpu \
    >"$OUT/bench-orig.txt" 2>&1
  train_rows "$root/.gpu/reprise-orig" orig >"$OUT/train-orig.txt" 2>&1
fi
if [ -z "${NO_TORCH:-}" ]; then # NO_TORCH=1: skip the PyTorch reference
  timeout 120 python3 "$root/bench/torch_ref.py"
  timeout 120 python3 "$root/bench/torch_ref.py" --hidden 256,256 --batch 1024
fi >"$OUT/torch.txt" 2>&1
echo "==== bench (new)"; cat "$OUT/bench.txt"
[ -f "$OUT/bench-orig.txt" ] && { echo "==== bench (orig)"; cat "$OUT/bench-orig.txt"; }
cat "$OUT/train.txt" "$OUT/train-orig.txt" 2>/dev/null
cat "$OUT/torch.txt"
