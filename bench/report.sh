#!/usr/bin/env bash
# bench/report.sh — measures reprise and writes docs/performance.md.
#
#   bash bench/report.sh [-n N] [--quick] [-o FILE] [-b REPRISE] [-w LIST]
#
#   -n N        invocations of each benchmark (default 5; --quick: 3); each
#               table shows min, median and max over them
#   --quick     the benchmarks' --quick (few repetitions, fewer training
#               iterations; --build, which has no --quick, runs as it is):
#               checks the script end to end in about a minute; its
#               figures are not measurements (the tables say so)
#   -o FILE     the markdown file to write (default docs/performance.md),
#               replaced whole once every benchmark has run
#   -b REPRISE  the reprise binary (default build-rel/reprise, then
#               build/reprise); it must answer `REPRISE version`
#   -w LIST     worker counts for the DAG workloads, comma-separated, each
#               1..128 (default 2)
#
# What runs: on every machine the CPU benchmarks (`reprise bench`: the DAG
# workloads replayed, eager and as a hand-written static schedule; --hop;
# --xfer; --build; and `reprise train --compare` on the CPU backend); with
# mpiexec and an MPI build, `reprise bench --dist` on 2 ranks; with
# 10 or more CPUs, the DAG workloads at 2 and 8 workers as well; when a CUDA
# device answers, `reprise bench --gpu` and the training step on the GPU
# (replayed, replayed back to back, eager); and when `import torch` works
# with CUDA, the same step in PyTorch (bench/torch_ref.py).
#
# Every table sits in a section (<!-- section: NAME --> ... <!-- end
# section: NAME -->) headed by the binary's commit (`REPRISE version`),
# the date, the CPU model and count, the GPU, its driver and CUDA version,
# and the exact commands. A section is replaced only by a fresh measurement
# of itself: the sections this machine cannot measure (the GPU ones without
# a device) keep what FILE (or, for a new FILE, docs/performance.md) had,
# with their own stamps. So does a section one of whose benchmarks fails
# or writes no JSON rows: the failure is printed, the section's other runs
# are skipped, the other sections are still measured and FILE written, and
# the exit status is 1. Needs bash and python3 (standard library). Exit 0
# written, 1 a benchmark failed (its section kept), 2 usage.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/args.sh" # posint, worker_count, need_reprise
runs=
quick=0
out=$root/docs/performance.md
bin=
workers=2
usage() {
  echo "usage: $0 [-n N] [--quick] [-o FILE] [-b REPRISE] [-w LIST]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
  -n) [ $# -ge 2 ] || usage; runs=$2; shift 2 ;;
  --quick) quick=1; shift ;;
  -o) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
  -b) [ $# -ge 2 ] || usage; bin=$2; bin_given=1; shift 2 ;;
  -w) [ $# -ge 2 ] || usage; workers=$2; shift 2 ;;
  -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;
  *) usage ;;
  esac
done
# '' (an unset variable) would read as the option left out
[ -n "$out" ] || { echo "$0: -o: an empty file name" >&2; exit 2; }
[ -n "$bin" ] || [ -z "${bin_given:-}" ] ||
  { echo "$0: -b: an empty file name" >&2; exit 2; }
[ -n "$runs" ] || runs=$([ "$quick" = 1 ] && echo 3 || echo 5)
posint "$runs" || { echo "$0: -n wants a positive count, not '$runs'" >&2; exit 2; }
IFS=, read -r -a wlist <<<"$workers"
[ ${#wlist[@]} -gt 0 ] || { echo "$0: -w wants worker counts, e.g. 2,8" >&2; exit 2; }
# read drops a trailing empty field: "2," would pass as "2"
case $workers in *,) wlist+=("") ;; esac
for w in "${wlist[@]}"; do
  worker_count "$w" || { echo "$0: -w wants worker counts in 1..128, not '$workers'" >&2; exit 2; }
done
# FILE is replaced (a temporary file in its folder, then a rename)
if [ -d "$out" ]; then
  echo "$0: -o $out is a directory" >&2
  exit 2
fi
odir=$(dirname -- "$out")
case $out in /dev/* | /proc/*) odir= ;; esac # written in place (report.py)
if [ -e "$out" ] && [ ! -f "$out" ]; then odir=; fi
if [ -n "$odir" ] && { [ ! -d "$odir" ] || [ ! -w "$odir" ]; }; then
  echo "$0: -o $out: $odir is not a writable directory" >&2
  exit 2
fi
if [ -z "$bin" ]; then
  for b in "$root/build-rel/reprise" "$root/build/reprise"; do
    if [ -x "$b" ]; then bin=$b; break; fi
  done
fi
need_reprise "$bin"
# the binary's own commit: the checkout may have moved on since the build
commit=$(sed -n 's/.*(commit \([^)]*\)).*/\1/p' <<<"$reprise_version")
command -v python3 >/dev/null || { echo "$0: needs python3" >&2; exit 2; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/rp_report.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
q=()
[ "$quick" = 1 ] && q=(--quick)
# the binary as the tables show it: relative to the repository when inside
shown=${bin#"$root"/}

# ---- the machine ----
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')
cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
[ -n "$cpu" ] || cpu=$(uname -m)
btype=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$(dirname "$bin")/CMakeCache.txt" 2>/dev/null || true)
gpu=none
if command -v nvidia-smi >/dev/null 2>&1 &&
  g=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) &&
  [ -n "$g" ]; then
  cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
  gpu="${g%%,*}, driver ${g#*, }, CUDA ${cuda:-?}"
fi
{
  echo "commit=${commit:-unknown}"
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu=$cpu, $cpus CPUs"
  echo "gpu=$gpu"
  echo "build=${btype:-unknown}"
  echo "load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)"
  echo "runs=$runs"
  echo "quick=$quick"
} >"$dir/machine"
echo "reprise: $shown (${btype:-unknown}); $cpu, $cpus CPUs; GPU: $gpu; $runs invocation$([ "$runs" = 1 ] || echo s) each"

# failed SECTION: the section keeps FILE's text (its rows are dropped
# before report.py), its other runs are skipped, and the exit status is 1.
failed() {
  grep -qxF -- "$1" "$dir/failed" 2>/dev/null || echo "$1" >>"$dir/failed"
}

# run SECTION OUTFILE COMMAND...: runs it (JSON to OUTFILE) and records the
# command once per section; when it fails or leaves no JSON rows in
# OUTFILE, says so and marks the section failed (nothing runs for a
# section already failed).
run() {
  local sec=$1 json=$2
  shift 2
  ! grep -qxF -- "$sec" "$dir/failed" 2>/dev/null || return 0
  local shown_cmd="${*//$bin/$shown}"
  shown_cmd=${shown_cmd//$json/FILE}
  shown_cmd=${shown_cmd//$root\//}
  grep -qxF -- "$shown_cmd" "$dir/$sec.cmd" 2>/dev/null || echo "$shown_cmd" >>"$dir/$sec.cmd"
  if ! "$@" >"$json.out" 2>"$json.err"; then
    echo "$0: section $sec: failed: $*" >&2
    cat "$json.err" >&2
    failed "$sec"
  elif ! python3 -c 'import json, sys
rows = json.load(open(sys.argv[1]))
if not isinstance(rows, (list, dict)) or not rows:
    sys.exit("no rows")' "$json" 2>"$json.check"; then
    echo "$0: section $sec: no JSON rows in $json from: $*" >&2
    tail -1 "$json.check" >&2
    failed "$sec"
  fi
}

# ---- CPU ----
if [ "$cpus" != '?' ] && [ "$cpus" -ge 10 ]; then
  wbig=(2 8)
else
  wbig=()
fi
iters_small=$([ "$quick" = 1 ] && echo 300 || echo 3000)
iters_big=$([ "$quick" = 1 ] && echo 20 || echo 100)
for i in $(seq 1 "$runs"); do
  echo "round $i of $runs: CPU"
  for w in "${wlist[@]}"; do
    run dag "$dir/dag.w$w.$i.json" "$bin" bench "${q[@]}" --backend cpu \
      --workers "$w" --json "$dir/dag.w$w.$i.json"
  done
  for w in "${wbig[@]}"; do
    run dag-many-cores "$dir/dag-many-cores.w$w.$i.json" "$bin" bench "${q[@]}" \
      --mode replay --backend cpu --workers "$w" --json "$dir/dag-many-cores.w$w.$i.json"
  done
  run hop "$dir/hop.$i.json" "$bin" bench "${q[@]}" --hop --backend cpu --json "$dir/hop.$i.json"
  run xfer "$dir/xfer.$i.json" "$bin" bench "${q[@]}" --xfer --json "$dir/xfer.$i.json"
  # --build has no --quick (it takes about a second as it is)
  run build "$dir/build.$i.json" "$bin" bench --build --json "$dir/build.$i.json"
  run train-cpu "$dir/train-cpu.small.$i.json" "$bin" train --backend cpu --compare \
    --procs 1 --hidden 16,16 --batch 32 --iters "$iters_small" --json "$dir/train-cpu.small.$i.json"
  run train-cpu "$dir/train-cpu.big.$i.json" "$bin" train --backend cpu --compare \
    --procs 1 --dataset blobs --features 128 --classes 10 --hidden 512,512 \
    --batch 512 --iters "$iters_big" --json "$dir/train-cpu.big.$i.json"
done

# ---- several processes: where mpiexec runs the MPI build ----
if command -v mpiexec >/dev/null 2>&1 &&
  mpiexec -n 2 "$bin" bench --dist --quick --json "$dir/probe-dist.json" \
    >"$dir/probe-dist.out" 2>&1; then
  for i in $(seq 1 "$runs"); do
    echo "round $i of $runs: MPI"
    run dist "$dir/dist.$i.json" mpiexec -n 2 "$bin" bench "${q[@]}" --dist \
      --json "$dir/dist.$i.json"
  done
else
  echo "note: no mpiexec, or this build has no MPI: the dist section is kept"
fi

# ---- GPU: only when a device answers ----
gpu_ok=0
if [ "$gpu" != none ]; then
  if ! "$bin" bench --gpu --quick --json "$dir/probe.json" >"$dir/probe.out" 2>&1; then
    echo "$0: reprise bench --gpu failed on a machine with a GPU:" >&2
    cat "$dir/probe.out" >&2
    failed gpu-bench
    failed gpu-train
  elif grep -q '"case"' "$dir/probe.json"; then
    gpu_ok=1
  else
    echo "note: a GPU is listed but reprise found none: $(head -1 "$dir/probe.out")"
  fi
fi
if [ "$gpu_ok" = 1 ]; then
  giters=$([ "$quick" = 1 ] && echo 200 || echo 2000)
  torch=0
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    torch=1
  fi
  for i in $(seq 1 "$runs"); do
    echo "round $i of $runs: GPU"
    run gpu-bench "$dir/gpu-bench.$i.json" "$bin" bench "${q[@]}" --gpu --json "$dir/gpu-bench.$i.json"
    for m in small big; do
      if [ $m = small ]; then model=(--hidden 64,64 --batch 256); else model=(--hidden 256,256 --batch 1024); fi
      run gpu-train "$dir/gpu-train.$m.lat.$i.json" "$bin" train --backend cuda --procs 1 \
        "${model[@]}" --iters "$giters" --json "$dir/gpu-train.$m.lat.$i.json"
      run gpu-train "$dir/gpu-train.$m.b2b.$i.json" "$bin" train --backend cuda --procs 1 \
        "${model[@]}" --iters "$giters" --inflight 16 --json "$dir/gpu-train.$m.b2b.$i.json"
      run gpu-train "$dir/gpu-train.$m.eager.$i.json" "$bin" train --backend cuda --procs 1 \
        "${model[@]}" --iters "$giters" --compare --json "$dir/gpu-train.$m.eager.$i.json"
      if [ "$torch" = 1 ]; then
        run gpu-train "$dir/gpu-train.$m.torch.$i.json" python3 "$root/bench/torch_ref.py" \
          "${model[@]}" --iters "$([ "$quick" = 1 ] && echo 50 || echo 500)" \
          --json "$dir/gpu-train.$m.torch.$i.json"
      fi
    done
  done
fi

# a failed section's rows go: report.py keeps FILE's text for it
fails=$(cat "$dir/failed" 2>/dev/null || true)
for sec in $fails; do
  rm -f "$dir/$sec".*.json
done
base=$out
[ -f "$base" ] || base=$root/docs/performance.md
python3 "$root/bench/report.py" --dir "$dir" --base "$base" --out "$out"
echo "wrote $out"
if [ -n "$fails" ]; then
  echo "$0: failed, kept as they were: $(echo "$fails" | paste -sd ' ' -)" >&2
  exit 1
fi
