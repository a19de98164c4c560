#!/usr/bin/env bash
# bench/gpu_day.sh BUILD_DIR — the essentials of a short lease of a GPU in
# one call, most important first, within DAY_BUDGET seconds of wall time
# (default 470): each step runs under min(its own limit, what is left of
# the budget), and a step that no longer fits is skipped and named, so the
# call ends in time and what finished is kept. In order:
#
#   device     nvidia-smi must list a GPU (else: exit 1 at once, nothing
#              run); whether PyTorch with CUDA imports (else its rows are
#              not measured, and the summary says which)
#   ctest      REPRISE_REQUIRE_GPU=1 ctest -L gpu (CTEST_LIMIT, 180 s; a
#              test still running 10 s before it is stopped and named)
#   torchcheck torch_gpt.py --check --device cuda: PyTorch's step is the
#              one test_gpt.c holds reprise to (90 s)
#   nanogpt    torch_gpt.py --preset nanogpt: reprise replay and eager
#              (default attention layout), the record/instantiate row
#              (gpt_instantiate, 1 processor), PyTorch eager with fused
#              attention (sdpa) (160 s)
#   direct     the same reprise rows with REPRISE_GPT_ATTN=gemm
#              REPRISE_GPT_ATTN_GEMM=direct (the rows carry them) (90 s)
#   compile    PyTorch torch.compile of the nanoGPT step (COMPILE_MODES,
#              default compile-reduce-overhead) (170 s)
#   launch     torch_gpt.py --preset launch: reprise replay and eager,
#              PyTorch eager (sdpa) and its whole-step CUDA graph (100 s)
#   profile    bench/gpu_gpt.sh BUILD_DIR profile: Nsight Compute's kernel
#              and graph times, the device's idle share of a replayed step
#              (launch, then nanoGPT; ncu_*.csv, ncu_step.py) (what is left)
#
# Every log, JSON row file and markdown table goes under $OUT (default a
# new folder in /tmp) as its step ends; a torch_gpt.py stopped by its limit
# still writes its rows so far. At the end: the stamp (build, date, GPU,
# driver, CPU), one ok/FAIL/SKIP line per step, and the nanoGPT goal's
# ratios from whatever rows exist (final.txt). STEPS (a comma list of the
# steps above but device) runs some only. DRY=1 prints each command instead
# of running it (no GPU needed) and exits 0. TEXT names the corpus of
# every step (default /usr/share/games/fortunes/cookie, the corpus of the
# figures in docs/gpt_bench.md, where it exists, else the repository's
# docs repeated to 1 MiB, written to $OUT/corpus.txt).
# Exits 1 when a step failed or was skipped, 2 on bad usage.
set -u
ALL=ctest,torchcheck,nanogpt,direct,compile,launch,profile
case ${1:-} in
-h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;
esac
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR (DAY_BUDGET, STEPS, DRY, TEXT, OUT: see --help)" >&2
  exit 2
fi
if [ ! -x "$1/reprise" ]; then
  echo "$0: no $1/reprise (BUILD_DIR: a build folder with the CUDA backend)" >&2
  exit 2
fi
BUDGET=${DAY_BUDGET:-470}
if ! [[ $BUDGET =~ ^[1-9][0-9]{0,5}$ ]]; then
  echo "$0: DAY_BUDGET=$BUDGET: want a positive whole number of seconds" >&2
  exit 2
fi
if [ -n "${CTEST_LIMIT:-}" ] && ! [[ $CTEST_LIMIT =~ ^[1-9][0-9]{0,5}$ ]]; then
  echo "$0: CTEST_LIMIT=$CTEST_LIMIT: want a positive whole number of seconds" >&2
  exit 2
fi
. "$(dirname "$0")/dry.sh"  # DRY, x
. "$(dirname "$0")/args.sh" # ctest_stop
IFS=, read -r -a steps <<<"${STEPS:-$ALL}"
for s in "${steps[@]}"; do
  [[ ,$ALL, == *",$s,"* ]] || {
    echo "$0: STEPS: unknown step '$s' (steps: $ALL)" >&2
    exit 2
  }
done
COMPILE_MODES=${COMPILE_MODES:-compile-reduce-overhead}
[[ $COMPILE_MODES =~ ^compile-[a-z-]+(,compile-[a-z-]+)*$ ]] || {
  echo "$0: COMPILE_MODES=$COMPILE_MODES: want a comma list of torch_gpt.py's compile-* modes" >&2
  exit 2
}
if [ -n "${TEXT:-}" ] && { [ ! -f "$TEXT" ] || [ ! -r "$TEXT" ]; }; then
  echo "$0: TEXT=$TEXT: not a readable file" >&2
  exit 2
fi
B=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
STEPS=,${STEPS:-$ALL},
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/rp_gpu_day.XXXXXX")}
mkdir -p "$OUT"
# one corpus for every step (the same vocabulary, so the same LM head, in
# every row): TEXT, else reprise's default where this machine has it (the
# corpus of the figures in docs/gpt_bench.md), else the repository's docs
# repeated to 1 MiB (a machine without the Debian package fortunes)
if [ -z "${TEXT:-}" ]; then
  TEXT=/usr/share/games/fortunes/cookie
  if [ ! -r "$TEXT" ]; then
    TEXT=$OUT/corpus.txt
    for f in "$SRC"/docs/*.md "$SRC"/*.md; do cat "$f" && echo; done >"$TEXT.1"
    while [ "$(wc -c <"$TEXT.1")" -lt 1048576 ]; do cat "$TEXT.1" "$TEXT.1" >"$TEXT.2" &&
      mv "$TEXT.2" "$TEXT.1"; done
    mv "$TEXT.1" "$TEXT"
  fi
fi
TEXTARG=(--text "$TEXT")
T=$SRC/bench/torch_gpt.py
start=$SECONDS
failed=0
has() { [[ $STEPS == *",$1,"* ]]; }
left() { echo $((BUDGET - (SECONDS - start))); }
note() { # note ok|FAIL|SKIP TEXT
  [ "$1" = ok ] || failed=1
  printf '%-5s %s\n' "$1" "$2" | tee -a "$OUT/summary.txt"
}
# fits WANT NAME: sets lim to min(WANT, the budget left); false (and the
# step named as skipped) when under 20 s are left
fits() {
  lim=$(left)
  [ "$lim" -gt "$1" ] && lim=$1
  [ "$lim" -ge 20 ] && return 0
  note SKIP "$2: the budget is spent (DAY_BUDGET=$BUDGET)"
  return 1
}
# run LIMIT LOG CMD...: CMD under `timeout -k 15 LIMIT`, its output in LOG
# (appended); DRY=1 prints CMD instead
run() {
  local limit=$1 log=$2
  shift 2
  if [ "$DRY" = 1 ]; then
    printf '%q ' "$@" | sed 's/ $//'
    echo
    return 0
  fi
  echo "\$ $*" >>"$log"
  timeout -k 15 "$limit" "$@" >>"$log" 2>&1
}
: >"$OUT/summary.txt"
ver=$("$B/reprise" version 2>/dev/null | grep -m1 '^reprise ' || true)
stamp="${ver:-$B/reprise: no version line}; $(date -u '+%Y-%m-%d %H:%M UTC'); corpus $TEXT"

# ---- device (and PyTorch): nothing else runs without a GPU
TORCH=1
if [ "$DRY" = 0 ]; then
  if ! timeout 30 nvidia-smi -L >"$OUT/device.txt" 2>&1 || ! grep -q '^GPU ' "$OUT/device.txt"; then
    echo "$0: no GPU: nvidia-smi lists none ($(head -1 "$OUT/device.txt")); nothing run" |
      tee -a "$OUT/summary.txt"
    exit 1
  fi
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
  cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
  cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null)
  stamp+="; GPU: $gpu${cuda:+, CUDA $cuda}; CPU: ${cpu:-$(uname -m)}, $(nproc) cores"
  echo "gpu_day.sh: $stamp" | tee "$OUT/stamp.txt"
  tv=$(timeout 90 python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())' 2>&1 | tail -1)
  echo "PyTorch: $tv" >>"$OUT/stamp.txt"
  if [[ $tv != *" True" ]]; then
    TORCH=0
    note SKIP "PyTorch with CUDA not importable ($tv): not measured: torchcheck, the PyTorch eager, compile and cudagraph rows"
  fi
fi
MODES_NANO=eager MODES_LAUNCH=eager,cudagraph
[ $TORCH = 1 ] || MODES_NANO=none MODES_LAUNCH=none
common=(--device cuda --reprise "$B/reprise" --trace-replays 0 --repeats 2 "${TEXTARG[@]}")

# ---- the GPU tests
if has ctest && fits "${CTEST_LIMIT:-180}" "ctest -L gpu"; then
  if [ "$DRY" = 0 ] && ! command -v ctest >/dev/null; then
    note FAIL "ctest -L gpu: no ctest on PATH (the GPU tests did not run)"
  else
    # a stop time 10 s before the limit: ctest itself ends a test that
    # hangs, names it and prints the summary (ctest_stop, args.sh)
    at=$(ctest_stop "$lim")
    (cd "$B" && run "$lim" "$OUT/ctest.log" env TZ=UTC REPRISE_REQUIRE_GPU=1 \
      ctest -L gpu --output-on-failure -j 8 ${at:+--stop-time "$at"})
    rc=$?
    got=$(grep -E 'tests passed' "$OUT/ctest.log" 2>/dev/null || tail -1 "$OUT/ctest.log" 2>/dev/null)
    # no summary: no GPU test ran (a build without tests exits 0)
    [ "$DRY" = 1 ] || grep -q 'tests passed' "$OUT/ctest.log" || [ $rc -ne 0 ] || rc=1
    [ "$DRY" = 1 ] || note "$([ $rc = 0 ] && echo ok || echo FAIL)" \
      "REPRISE_REQUIRE_GPU=1 ctest -L gpu: ${got:-no output} (ctest.log)"
  fi
fi

# torch STEP LIMIT LOG [ENV...] -- ARGS...: torch_gpt.py's run, noted
torch() {
  local name=$1 limit=$2 log=$3 envs=()
  shift 3
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  run "$limit" "$log" env "${envs[@]}" python3 "$T" "$@"
  local rc=$?
  [ "$DRY" = 1 ] && return 0
  local how=ok
  [ $rc -eq 0 ] || how=FAIL
  [ $rc -eq 124 ] || [ $rc -eq 143 ] && how="FAIL" name+=" (stopped at its ${limit} s limit: the rows so far kept)"
  note $how "$name (rc $rc; $(basename "$log"))"
}

if has torchcheck; then
  if [ $TORCH = 0 ]; then
    note SKIP "torch_gpt.py --check --device cuda: no PyTorch with CUDA"
  elif fits 90 "torch_gpt.py --check"; then
    torch "torch_gpt.py --check --device cuda" "$lim" "$OUT/torch_check.txt" -- \
      --check --device cuda
  fi
fi

if has nanogpt && fits 160 "nanoGPT rows"; then
  torch "nanoGPT: reprise replay, eager, instantiate; PyTorch $MODES_NANO (sdpa)" \
    "$lim" "$OUT/nanogpt.log" -- --preset nanogpt "${common[@]}" \
    --invocations 2 --reprise-iters 80 --instantiate-procs 1 --modes "$MODES_NANO" \
    --attn sdpa --profile-steps 3 --mode-timeout $((lim > 60 ? lim - 30 : 30)) \
    --json "$OUT/nanogpt.json" --markdown "$OUT/nanogpt.md"
fi

if has direct && fits 90 "nanoGPT rows, REPRISE_GPT_ATTN_GEMM=direct"; then
  torch "nanoGPT: reprise replay, eager with REPRISE_GPT_ATTN=gemm REPRISE_GPT_ATTN_GEMM=direct" \
    "$lim" "$OUT/nanogpt_direct.log" REPRISE_GPT_ATTN=gemm REPRISE_GPT_ATTN_GEMM=direct -- \
    --preset nanogpt "${common[@]}" --invocations 2 --reprise-iters 80 \
    --instantiate-procs '' --modes none --mode-timeout $((lim > 60 ? lim - 30 : 30)) \
    --json "$OUT/nanogpt_direct.json" --markdown "$OUT/nanogpt_direct.md"
fi

if has compile; then
  if [ $TORCH = 0 ]; then
    note SKIP "nanoGPT torch.compile ($COMPILE_MODES): no PyTorch with CUDA"
  elif fits 170 "nanoGPT torch.compile"; then
    torch "nanoGPT: PyTorch $COMPILE_MODES" "$lim" "$OUT/nanogpt_compile.log" -- \
      --preset nanogpt "${common[@]}" --invocations 0 --instantiate-procs '' \
      --modes "$COMPILE_MODES" --profile-steps 0 --mode-timeout $((lim - 15)) \
      --json "$OUT/nanogpt_compile.json" --markdown "$OUT/nanogpt_compile.md"
  fi
fi

if has launch && fits 100 "launch rows"; then
  torch "launch: reprise replay, eager; PyTorch $MODES_LAUNCH (sdpa)" "$lim" \
    "$OUT/launch.log" -- --preset launch "${common[@]}" --invocations 2 \
    --reprise-iters 300 --instantiate-procs '' --modes "$MODES_LAUNCH" --attn sdpa \
    --profile-steps 3 --mode-timeout 60 \
    --json "$OUT/launch.json" --markdown "$OUT/launch.md"
fi

if has profile && fits 600 "profile (ncu)"; then
  # each ncu run at most a quarter of what is left (4 runs: launch and
  # nanoGPT, nodes and graphs)
  per=$((lim / 4 > 20 ? lim / 4 : 20))
  textenv=(TEXT="$TEXT")
  if [ "$DRY" = 1 ]; then # its commands, as gpu_gpt.sh prints them
    env OUT="$OUT/profile" PROFILE_TIMEOUT=$per "${textenv[@]}" DRY=1 \
      bash "$SRC/bench/gpu_gpt.sh" "$B" profile | grep -v '^#'
  else
    run "$lim" "$OUT/profile.log" env OUT="$OUT/profile" PROFILE_TIMEOUT=$per \
      "${textenv[@]}" bash "$SRC/bench/gpu_gpt.sh" "$B" profile
    rc=$?
    note "$([ $rc = 0 ] && echo ok || echo FAIL)" \
      "profile: Nsight Compute, idle share (rc $rc; profile.log, profile/)"
    grep -E '^(ok|FAIL) ' "$OUT/profile/summary.txt" 2>/dev/null | sed 's/^/      /' |
      tee -a "$OUT/summary.txt"
  fi
fi

[ "$DRY" = 1 ] && exit 0
{
  echo
  echo "== gpu_day.sh: $stamp ($((SECONDS - start)) s of DAY_BUDGET=$BUDGET)"
  cat "$OUT/summary.txt"
  # the goal's figures from whatever rows exist
  python3 - "$OUT" <<'PY' || true
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        rows += [dict(r, _file=os.path.basename(f)) for r in json.load(open(f))]
    except (OSError, ValueError, TypeError):
        pass
def med(r, k):
    v = r.get(k) or {}
    return v.get("median") if isinstance(v, dict) else None
for preset in ("nanogpt", "launch"):
    rs = [r for r in rows if r.get("_file", "").startswith(preset) and r.get("status") == "ok"]
    reps = [r for r in rs if r.get("side") == "reprise" and r.get("mode") == "replay"]
    others = [r for r in rs if r.get("side") == "pytorch"]
    for r in rs:
        if r.get("mode") == "instantiate":
            print(f"{preset}: instantiate {r.get('instantiate_ms', '?')} ms ({r.get('procs', 1)} processor)")
    for rep in reps:
        env = " ".join(f"{k}={v}" for k, v in sorted((rep.get("reprise_env") or {}).items()))
        for o in others:
            what = o["mode"] + (f" ({o.get('attention')})" if o["mode"] == "eager" else "")
            q = [f"{med(rep, k) / med(o, k):.3f} ({n})" for k, n in
                 (("latency_us", "latency"), ("b2b_us", "back to back"))
                 if med(rep, k) and med(o, k)]
            if q:
                print(f"{preset}: replay{' [' + env + ']' if env else ''} / pytorch {what}: "
                      + ", ".join(q))
        if not others:
            print(f"{preset}: replay{' [' + env + ']' if env else ''}: latency "
                  f"{med(rep, 'latency_us')} us, back to back {med(rep, 'b2b_us')} us "
                  "(no PyTorch row to compare)")
PY
  echo "logs: $OUT"
} | tee "$OUT/final.txt"
exit "$failed"
