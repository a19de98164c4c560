#!/bin/sh
# Fuzzes the graph-file loader: configures a clang build with
# REPRISE_FUZZ=ON (libFuzzer + ASan + UBSan), builds the target and runs it
# from the seed corpus for a bounded time. Exits non-zero when the fuzzer
# finds a crash, a leak, undefined behaviour or a timeout (the input is
# left in $BUILD/fuzz-artifacts/).
#
# Environment: CC (default clang-14, else clang), FUZZ_TIME seconds
# (default 60), BUILD directory (default build-fuzz), JOBS (default 2).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-fuzz}
time=${FUZZ_TIME:-60}
jobs=${JOBS:-2}
cc=${CC:-}
if [ -z "$cc" ]; then
  for c in clang-14 clang; do
    if command -v "$c" >/dev/null 2>&1; then
      cc=$c
      break
    fi
  done
fi
if [ -z "$cc" ]; then
  echo "fuzz.sh: no clang found (set CC)" >&2
  exit 2
fi

cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_FUZZ=ON -DREPRISE_TESTS=OFF \
  -DREPRISE_BENCH=OFF -DREPRISE_CUDA=OFF -DREPRISE_MPI=OFF >/dev/null
cmake --build "$build" --target fuzz_graph_load -j "$jobs"

# New inputs go to a work corpus; the checked-in seeds stay as they are.
work=$build/fuzz-corpus
artifacts=$build/fuzz-artifacts
mkdir -p "$work" "$artifacts"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "$build/test/fuzz/fuzz_graph_load" \
  -max_total_time="$time" -rss_limit_mb=2048 -timeout=20 \
  -dict="$root/test/fuzz/graph.dict" -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$work" "$root/test/fuzz/corpus"
