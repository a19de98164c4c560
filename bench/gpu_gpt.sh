#!/usr/bin/env bash
# bench/gpu_gpt.sh BUILD_DIR [STEPS] — the GPT's GPU checks and figures in one
# call, on a machine with an NVIDIA GPU and a CUDA build, each step under its
# own time limit so that a slow one cannot take the others' time:
#
#   check    bench/gpu_check.sh BUILD_DIR (REPRISE_REQUIRE_GPU=1 ctest -L gpu,
#            bench --gpu, the MLP train runs)
#   ctest    REPRISE_REQUIRE_GPU=1 ctest -L gpu alone (CHECK_TIMEOUT, 240 s;
#            a test still running 10 s before it is stopped and named)
#   train    reprise train --model gpt --backend cuda, nanoGPT's config, a
#            short run (loss, validation loss, bigram baseline, tokens/s)
#   launch   bench/torch_gpt.py --preset launch (reprise and every PyTorch mode)
#   nanogpt  bench/torch_gpt.py --preset nanogpt
#            (before either, once: torch_gpt.py --check --device cuda, the
#            PyTorch step the rows time against reprise's test references)
#   tp       bench/gpt_tp.sh -B cuda: tensor and data parallelism on logical
#            GPUs of the device against one (step time, kernels, copies,
#            bytes per processor)
#   cputp    bench/gpt_tp.sh on the CPU backend over 1, 2, 4 and 8 workers
#            (the lent machine's cores: tensor parallelism's scaling past
#            the 2-core CI machine)
#   knobs    the replayed step of the launch and nanoGPT configs under each
#            setting of KNOBS (default: the defaults, REPRISE_GPT_ATTN=gemm,
#            REPRISE_GPT_ATTN_GEMM=direct, both together,
#            REPRISE_GPT_COLSUM=serial and REPRISE_CUBLAS_WS_MIB=4; a space
#            list of VAR=VALUE, several joined by '+', or "default"),
#            alternating, KNOB_RUNS rounds (default 3): the median step
#            time and the final loss of each run
#   profile  Nsight Compute's device time (clocks as found) of each kernel
#            of the replays (graph nodes one by one) and of each whole
#            graph, for the launch and the nanoGPT configs (ncu_*.csv;
#            bench/ncu_step.py reads them: per-kernel times of one step,
#            and the device's idle share of a replayed step, 1 - sum(nodes)
#            / graph)
#
# STEPS is a comma list (default check,train,launch; an unknown step is a
# usage error); MODES and ATTN pass --modes and --attn to torch_gpt.py,
# which runs with --device cuda (a PyTorch without CUDA fails the step);
# stopped by its step's limit (LAUNCH_TIMEOUT, default 300 s;
# NANOGPT_TIMEOUT, 400 s) it still writes the rows it measured, the last
# one "interrupted", and the step fails.
# CHECK_TIMEOUT, TRAIN_TIMEOUT, LAUNCH_TIMEOUT, NANOGPT_TIMEOUT, TP_TIMEOUT,
# CPUTP_TIMEOUT, KNOB_TIMEOUT and PROFILE_TIMEOUT (seconds), MODE_TIMEOUT
# (torch_gpt.py's --mode-timeout), TRAIN_ITERS, BENCH_ITERS, TP_RUNS and
# KNOB_RUNS replace the defaults: positive whole numbers, and KNOBS its
# items, and TEXT a readable file, checked before any step runs (a usage
# error otherwise).
# TEXT names the corpus (default reprise's own default); logs go under $OUT
# (default a new folder in /tmp). The stamp a figure needs (the build's
# `reprise version`, the date, the GPU, its driver and CUDA version, the
# CPU) is printed first, and again last above every step's ok/FAIL line
# (and gpu_check.sh's), so that the end of the output alone says what ran
# where. DRY=1 prints each command the steps would run, one a line, instead
# of running it (no GPU needed), and exits 0.
# Exits 1 when a step fails, 2 on bad usage.
set -u
ALL=check,ctest,train,launch,nanogpt,tp,cputp,knobs,profile
case ${1:-} in
-h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;
esac
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BUILD_DIR [$ALL]" >&2
  exit 2
fi
IFS=, read -r -a steps <<<"${2:-check,train,launch}"
for s in "${steps[@]}"; do
  [[ ,$ALL, == *",$s,"* ]] || {
    echo "$0: unknown step '$s' (steps: $ALL)" >&2
    exit 2
  }
done
if [ ! -x "$1/reprise" ]; then
  echo "$0: no $1/reprise (BUILD_DIR: a build folder)" >&2
  exit 2
fi
# the environment, before any step runs: a typo would otherwise end the
# script halfway (set -u), skip a step, or fail every run of every step
for v in CHECK_TIMEOUT TRAIN_TIMEOUT TRAIN_ITERS MODE_TIMEOUT BENCH_ITERS \
  LAUNCH_TIMEOUT NANOGPT_TIMEOUT TP_TIMEOUT TP_RUNS CPUTP_TIMEOUT KNOB_RUNS \
  KNOB_TIMEOUT PROFILE_TIMEOUT; do
  val=${!v:-}
  if [ -n "$val" ] && ! [[ $val =~ ^[1-9][0-9]{0,8}$ ]]; then
    echo "$0: $v=$val: want a positive whole number" >&2
    exit 2
  fi
done
read -r -a knobs <<<"${KNOBS:-}"
for k in "${knobs[@]}"; do
  [[ $k == default || $k =~ ^[A-Za-z_][A-Za-z0-9_]*=[^+]*(\+[A-Za-z_][A-Za-z0-9_]*=[^+]*)*$ ]] || {
    echo "$0: KNOBS: '$k' is not VAR=VALUE (several joined by '+') or default" >&2
    exit 2
  }
done
. "$(dirname "$0")/dry.sh"  # DRY, x
. "$(dirname "$0")/args.sh" # ctest_stop
if [ -n "${TEXT:-}" ] && { [ ! -f "$TEXT" ] || [ ! -r "$TEXT" ]; }; then
  echo "$0: TEXT=$TEXT: not a readable file" >&2
  exit 2
fi
B=$(cd "$1" && pwd)
STEPS=,${2:-check,train,launch},
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/rp_gpu_gpt.XXXXXX")}
mkdir -p "$OUT"
TEXTARG=()
[ -n "${TEXT:-}" ] && TEXTARG=(--text "$TEXT")
failed=0
has() { [[ $STEPS == *",$1,"* ]]; }
note() { # note NAME RC, also kept for the summary
  [ "$DRY" = 1 ] && return 0
  local line="ok    $1"
  if [ "$2" -ne 0 ]; then
    line="FAIL  $1 (rc $2)"
    failed=1
  fi
  echo "$line" | tee -a "$OUT/summary.txt"
}
: >"$OUT/summary.txt"
ver=$("$B/reprise" version 2>/dev/null | grep -m1 '^reprise ' || true)
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null)
stamp="${ver:-$B/reprise: no version line}; $(date -u '+%Y-%m-%d %H:%M UTC')"
stamp+="; GPU: ${gpu:-none (nvidia-smi)}${cuda:+, CUDA $cuda}"
stamp+="; CPU: ${cpu:-$(uname -m)}, $(nproc) cores"
[ "$DRY" = 1 ] && printf '# ' # DRY=1: commands alone are not comments
echo "gpu_gpt.sh ${STEPS:1:-1}: $stamp"
NANO=(--layers 6 --heads 6 --width 384 --context 256 --batch 64)

if has check; then
  if [ "$DRY" = 1 ]; then # gpu_check.sh prints its own commands
    OUT=$OUT/check CTEST_TIMEOUT=${CHECK_TIMEOUT:-240} DRY=1 \
      bash "$SRC/bench/gpu_check.sh" "$B"
  else
    OUT=$OUT/check CTEST_TIMEOUT=${CHECK_TIMEOUT:-240} bash "$SRC/bench/gpu_check.sh" "$B" \
      >"$OUT/check.txt" 2>&1
    note "gpu_check.sh" $?
    cat "$OUT/check.txt"
    grep -E '^(ok|FAIL) ' "$OUT/check.txt" | sed 's/^/  /' >>"$OUT/summary.txt"
  fi
fi

if has ctest; then
  # a stop time 10 s before the limit: ctest itself ends a test that
  # hangs, names it and prints the summary (ctest_stop, args.sh)
  at=$(ctest_stop "${CHECK_TIMEOUT:-240}")
  (cd "$B" && x env TZ=UTC REPRISE_REQUIRE_GPU=1 timeout "${CHECK_TIMEOUT:-240}" \
    ctest -L gpu --output-on-failure -j 8 ${at:+--stop-time "$at"}) >"$OUT/ctest.log" 2>&1
  rc=$? # before the command substitution below sets $?
  # no summary: no GPU test ran (a build folder without tests says "No
  # tests were found!!!" and exits 0)
  grep -q 'tests passed' "$OUT/ctest.log" || [ "$rc" -ne 0 ] || rc=1
  note "REPRISE_REQUIRE_GPU=1 ctest -L gpu: $(grep -E 'tests passed' "$OUT/ctest.log" ||
    tail -1 "$OUT/ctest.log")" $rc
  grep -E '^\[FAIL\]|Assertion|^\[----\]   [^ ]' "$OUT/ctest.log" | head -40
fi

if has train; then
  train_iters=${TRAIN_ITERS:-400}
  train_warmup=$((train_iters / 10 < 100 ? train_iters / 10 : 100)) # < iters
  x timeout "${TRAIN_TIMEOUT:-120}" "$B/reprise" train --model gpt --backend cuda \
    "${NANO[@]}" --iters "$train_iters" --lr 1e-3 --warmup "$train_warmup" \
    --log-every 100 "${TEXTARG[@]}" --json "$OUT/train_gpt.json" \
    >"$OUT/train_gpt.txt" 2>&1
  note "reprise train --model gpt --backend cuda (nanoGPT config)" $?
  tail -25 "$OUT/train_gpt.txt"
fi

bench() { # bench PRESET TIMEOUT
  # SIGTERM at the limit: torch_gpt.py writes its rows so far (-k: a kill
  # if it has not exited 30 s later)
  x timeout -k 30 "$2" python3 "$SRC/bench/torch_gpt.py" --preset "$1" --device cuda \
    --reprise "$B/reprise" \
    --mode-timeout "${MODE_TIMEOUT:-150}" --repeats 3 --invocations 3 \
    --reprise-iters "${BENCH_ITERS:-300}" --instantiate-procs 1 \
    --trace-replays 0 ${MODES:+--modes "$MODES"} ${ATTN:+--attn "$ATTN"} \
    "${TEXTARG[@]}" --json "$OUT/gpt_$1.json" \
    --markdown "$OUT/gpt_$1.md" >"$OUT/gpt_$1.log" 2>&1
  note "torch_gpt.py --preset $1" $?
  [ -f "$OUT/gpt_$1.md" ] && cat "$OUT/gpt_$1.md"
}
if has launch || has nanogpt; then
  x timeout "${MODE_TIMEOUT:-150}" python3 "$SRC/bench/torch_gpt.py" --check \
    --device cuda >"$OUT/torch_check.txt" 2>&1
  note "torch_gpt.py --check --device cuda (PyTorch's step is the reference's)" $?
  grep -E '^(ok|FAIL) ' "$OUT/torch_check.txt"
fi
has launch && bench launch "${LAUNCH_TIMEOUT:-300}"
has nanogpt && bench nanogpt "${NANOGPT_TIMEOUT:-400}"

if has tp; then
  x timeout "${TP_TIMEOUT:-120}" sh "$SRC/bench/gpt_tp.sh" -n "${TP_RUNS:-2}" \
    -B cuda -b "$B/reprise" >"$OUT/gpt_tp.txt" 2>&1
  note "bench/gpt_tp.sh -B cuda" $?
  cat "$OUT/gpt_tp.txt"
fi

if has cputp; then
  x timeout "${CPUTP_TIMEOUT:-150}" sh "$SRC/bench/gpt_tp.sh" -n "${TP_RUNS:-2}" \
    -B cpu -b "$B/reprise" 1/1 2/2 4/4 8/8 >"$OUT/gpt_tp_cpu.txt" 2>&1
  rc=$?
  note "bench/gpt_tp.sh -B cpu 1/1 2/2 4/4 8/8 ($(nproc) cores)" $rc
  cat "$OUT/gpt_tp_cpu.txt"
fi

if has knobs; then
  LAUNCH=(--layers 4 --heads 4 --width 128 --context 64 --batch 16)
  # a knob is VAR=value, or several joined by '+' (set together: the
  # direct layout is the GEMM path's, which the launch config's heads
  # take only with REPRISE_GPT_ATTN=gemm)
  read -r -a knobs <<<"${KNOBS:-default REPRISE_GPT_ATTN=gemm REPRISE_GPT_ATTN_GEMM=direct REPRISE_GPT_ATTN=gemm+REPRISE_GPT_ATTN_GEMM=direct REPRISE_GPT_COLSUM=serial REPRISE_CUBLAS_WS_MIB=4}"
  for cfg in launch nano; do
    if [ $cfg = launch ]; then args=("${LAUNCH[@]}") it=300; else
      args=("${NANO[@]}") it=60
    fi
    for round in $(seq "${KNOB_RUNS:-3}"); do
      for k in "${knobs[@]}"; do
        set_env=()
        [ "$k" != default ] && IFS='+' read -r -a set_env <<<"$k"
        base="$OUT/knob_${cfg}_${k//[^A-Za-z0-9]/_}_$round"
        x env "${set_env[@]}" timeout "${KNOB_TIMEOUT:-60}" \
          "$B/reprise" train --model gpt --backend cuda "${args[@]}" \
          --iters $it --log-every 100000 --sample 0 "${TEXTARG[@]}" \
          --json "$base.json" >"$base.txt" 2>&1
        rc=$?
        note "knobs $cfg $k round $round: $(sed -n \
          -e 's/^ *"iter_us_median": \(.*\),$/\1 us per step (median)/p' \
          -e 's/^ *"final_loss": \(.*\),$/final loss \1/p' \
          "$base.json" 2>/dev/null | paste -sd ' ' -)" $rc
      done
    done
  done
fi

NCU=
if has profile; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  [ "$DRY" = 1 ] && NCU=${NCU:-ncu}
  [ -n "$NCU" ] ||
    note "profile: no ncu (Nsight Compute) on PATH or in /usr/local/cuda*/bin" 1
fi
if has profile && [ -n "$NCU" ]; then
  LAUNCH=(--layers 4 --heads 4 --width 128 --context 64 --batch 16)
  for cfg in launch nano; do
    # The kernels of the replays alone: REPRISE_NVTX=1 puts each rp_replay
    # in the NVTX range "reprise.replay" (a thread's range), and ncu keeps
    # what that thread launches inside it: the graph launches of a step on
    # one GPU, which rp_replay issues itself. Where that finds no kernel (a
    # worker thread launching), a window of kernels by count: --iters 3
    # runs an eager evaluation (8 forward batches of F kernels), step 0,
    # the log point's evaluation, then steps 1 and 2; skipping 16 F kernels
    # leaves the end of the second evaluation and steps 1 and 2 (F, counted
    # by Nsight Compute at 6b4cee4: 55 for the launch config, 97 for
    # nanoGPT's; 71 with REPRISE_GPT_ATTN=gemm, 4 more a layer; ncu_step.py
    # finds the step as the longest run that repeats at once).
    if [ $cfg = launch ]; then
      args=("${LAUNCH[@]}") F=55
      [ "${REPRISE_GPT_ATTN:-}" = gemm ] && F=71
    else
      args=("${NANO[@]}") F=97
    fi
    for mode in node graph; do
      csv=$OUT/ncu_${cfg}_$mode.csv
      for how in nvtx count; do
        if [ $how = nvtx ]; then
          lim=(--nvtx --nvtx-include "reprise.replay/")
        else
          lim=(-s $((16 * F)) -c 1200)
          [ $mode = graph ] && lim=() # graph launches: replays alone
        fi
        x env REPRISE_NVTX=1 timeout "${PROFILE_TIMEOUT:-120}" "$NCU" \
          --metrics gpu__time_duration.sum --clock-control none --csv \
          --graph-profiling $mode "${lim[@]}" "$B/reprise" train --model gpt \
          --backend cuda "${args[@]}" --iters 3 --log-every 1000 --sample 0 \
          "${TEXTARG[@]}" >"$csv" 2>"$OUT/ncu_${cfg}_$mode.err"
        rc=$?
        grep -q gpu__time_duration "$csv" && break
      done
      if grep -q gpu__time_duration "$csv"; then
        note "ncu --graph-profiling $mode ($cfg, kernels chosen by $how)" "$rc"
      else # ncu exits 0 when it profiled no kernel
        note "ncu --graph-profiling $mode ($cfg): no kernel times (see $OUT/ncu_${cfg}_$mode.err)" 1
      fi
    done
    x python3 "$SRC/bench/ncu_step.py" "$OUT/ncu_${cfg}_node.csv" \
      "$OUT/ncu_${cfg}_graph.csv" || true
  done
fi
[ "$DRY" = 1 ] && exit 0
echo
echo "== gpu_gpt.sh ${STEPS:1:-1}: $stamp"
cat "$OUT/summary.txt"
echo "logs: $OUT"
exit "$failed"
