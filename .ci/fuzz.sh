#!/bin/sh
# Fuzzes the file readers: configures a clang build with REPRISE_FUZZ=ON
# (libFuzzer + ASan + UBSan), builds the targets and runs each from its
# seed corpus for a bounded time, one after another: the graph-file
# loader for FUZZ_TIME seconds, then the readers of `reprise train` and
# `reprise train --model gpt` (data files, IDX pairs, MLP and GPT checkpoints, text
# corpora), of `reprise dump --trace` (replay traces), of `reprise dump
# --diff` (two graph files), of `reprise dump --schedule --stats --lint`
# (the command's own load: the file's machine, placeholders) and of
# `reprise plot` (bench rows, train timings), and the strict JSON parse
# they share against cJSON and a reference validator, for
# FUZZ_TIME_READERS seconds each. Exits non-zero at the first
# target that finds a crash, a leak, undefined behaviour or a timeout (the
# input is left in $BUILD/fuzz-artifacts/NAME/, the target's name
# without fuzz_).
#
# Environment: CC (default clang-14, else clang), FUZZ_TIME seconds
# (default 60), FUZZ_TIME_READERS seconds (default 18), BUILD directory
# (default build-fuzz), JOBS (default 2, the build's).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-fuzz}
time=${FUZZ_TIME:-60}
time_readers=${FUZZ_TIME_READERS:-18}
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

# target, seconds, seed corpus, dictionary (- for none)
targets="fuzz_graph_load $time corpus graph.dict
fuzz_data_load $time_readers corpus_data_load data.dict
fuzz_data_idx $time_readers corpus_data_idx data.dict
fuzz_mlp_ckpt $time_readers corpus_mlp_ckpt ckpt.dict
fuzz_gpt_ckpt $time_readers corpus_gpt_ckpt ckpt.dict
fuzz_text $time_readers corpus_text -
fuzz_trace $time_readers corpus_trace -
fuzz_diff $time_readers corpus_diff graph.dict
fuzz_dump $time_readers corpus_dump graph.dict
fuzz_plot $time_readers corpus_plot -
fuzz_json $time_readers corpus json.dict"

cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPRISE_FUZZ=ON -DREPRISE_TESTS=OFF \
  -DREPRISE_BENCH=OFF -DREPRISE_CUDA=OFF -DREPRISE_MPI=OFF >/dev/null
# shellcheck disable=SC2046
cmake --build "$build" -j "$jobs" \
  --target $(echo "$targets" | awk '{ print $1 }')

echo "$targets" | while read -r target secs seeds dict; do
  # New inputs go to a work corpus; the checked-in seeds stay as they are.
  name=${target#fuzz_}
  work=$build/fuzz-corpus/$name
  artifacts=$build/fuzz-artifacts/$name
  mkdir -p "$work" "$artifacts"
  echo "fuzz.sh: $target for ${secs}s"
  # shellcheck disable=SC2046
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$build/test/fuzz/$target" \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20 \
    $([ "$dict" = - ] || echo "-dict=$root/test/fuzz/$dict") \
    -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$work" "$root/test/fuzz/$seeds" </dev/null
done
