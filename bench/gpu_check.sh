#!/usr/bin/env bash
# bench/gpu_check.sh BUILD_DIR — the GPU checks, pass or fail, on a machine
# with an NVIDIA GPU and its driver, for a build configured with the CUDA
# backend (e.g. `cmake -S . -B build -DREPRISE_CUDA=ON && cmake --build
# build -j`), however it got there. Run from anywhere:
#
#   bash bench/gpu_check.sh build        (logs under $OUT, default a new
#                                         folder in /tmp, named at the end)
#
# 1. the device (nvidia-smi);
# 2. the GPU tests: REPRISE_REQUIRE_GPU=1 ctest -L gpu (a test that would
#    skip for want of a device fails instead) within CTEST_TIMEOUT seconds
#    (default 900; a test still running 10 s before that is stopped and
#    named);
# 3. reprise bench --gpu --quick, which must write rows;
# 4. reprise train --backend cuda (--procs 1, --inflight 4, --procs 2, and
#    a larger model), each of which must finish and report its rows.
# Exits 1 when any step fails or writes no rows, 0 when all passed, 2 on
# bad usage (CTEST_TIMEOUT not a positive whole number: nothing run).
# DRY=1 prints each command instead of running it (no GPU needed), exit 0.
# Measurements for docs/performance.md come from bench/report.sh instead.
set -u
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
. "$(dirname "$0")/dry.sh"  # DRY, x
. "$(dirname "$0")/args.sh" # die, posint, ctest_stop
CTEST_TIMEOUT=${CTEST_TIMEOUT:-900}
posint "$CTEST_TIMEOUT" ||
  die "CTEST_TIMEOUT=$CTEST_TIMEOUT: want a positive whole number of seconds"
B=$(cd "$1" && pwd)
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/rp_gpu_check.XXXXXX")}
mkdir -p "$OUT"
failed=0
step() { # step NAME RC [WHY]
  [ "$DRY" = 1 ] && return 0
  if [ "$2" -eq 0 ]; then
    echo "ok    $1"
  else
    echo "FAIL  $1${3:+: $3}"
    failed=1
  fi
}

if [ "$DRY" = 1 ]; then
  :
elif nvidia-smi --query-gpu=name,driver_version --format=csv,noheader \
  >"$OUT/device.txt" 2>&1 && [ -s "$OUT/device.txt" ]; then
  step "device: $(head -1 "$OUT/device.txt")" 0
else
  step "device" 1 "nvidia-smi lists no GPU ($(head -1 "$OUT/device.txt"))"
fi

if [ ! -x "$B/reprise" ]; then
  step "build" 1 "$B/reprise is missing"
  echo "logs: $OUT"
  exit 1
fi

# a stop time 10 s before the limit: ctest itself ends a test that hangs,
# names it and prints the summary (ctest_stop, args.sh)
at=$(ctest_stop "$CTEST_TIMEOUT")
(cd "$B" && x env TZ=UTC REPRISE_REQUIRE_GPU=1 timeout "$CTEST_TIMEOUT" \
  ctest -L gpu --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" \
  ${at:+--stop-time "$at"}) >"$OUT/ctest.log" 2>&1
rc=$?
ntests=$(sed -n 's/.* tests passed, .* out of \([0-9]*\)$/\1/p' "$OUT/ctest.log")
if [ "$rc" -eq 0 ] && [ "${ntests:-0}" -eq 0 ]; then
  rc=1 # no gpu tests at all: a build without the tests
fi
step "ctest -L gpu (REPRISE_REQUIRE_GPU=1): $(grep -E 'tests passed' "$OUT/ctest.log" || echo 'no summary')" \
  "$rc" "see $OUT/ctest.log"

x timeout 300 "$B/reprise" bench --gpu --quick --json "$OUT/bench-gpu.json" \
  >"$OUT/bench-gpu.txt" 2>&1
rc=$?
rows=$(grep -c '"case"' "$OUT/bench-gpu.json" 2>/dev/null)
[ "$rc" -ne 0 ] || [ "${rows:-0}" -gt 0 ] || rc=1
step "reprise bench --gpu --quick: ${rows:-0} rows" "$rc" \
  "$(grep -v 'is a smoke test' "$OUT/bench-gpu.txt" | head -2 | tr '\n' ' ')"

i=0
for cfg in "--procs 1" "--procs 1 --inflight 4" "--procs 2" \
  "--procs 1 --hidden 256,256 --batch 1024"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  x timeout 120 "$B/reprise" train --backend cuda --iters 2000 $cfg \
    --json "$OUT/train$i.json" >"$OUT/train$i.txt" 2>&1
  rc=$?
  grep -q '"replay_iter_us_median"' "$OUT/train$i.json" 2>/dev/null || rc=1
  grep -q '^gpu: ' "$OUT/train$i.txt" || rc=1
  step "reprise train --backend cuda $cfg: $(grep -E 'per iteration' "$OUT/train$i.txt" | head -1)" \
    "$rc" "$(grep -m1 -iE 'error|reprise train:' "$OUT/train$i.txt"); see $OUT/train$i.txt"
done

[ "$DRY" = 1 ] && exit 0
echo "logs: $OUT"
exit "$failed"
