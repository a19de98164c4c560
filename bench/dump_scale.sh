#!/usr/bin/env bash
# bench/dump_scale.sh — the scale goals for `reprise dump` on a
# synthetic transformer-shaped step (test/synth_step.h): the text dump and
# the lint in <= 1 s, the grouped HTML page in <= 10 s, on a 2-core
# machine. Also times --group, --critical-path and --diff. Then the same
# views of a recorded GPT step of nanoGPT's small configuration (6 layers,
# 6 heads, width 384, context 256; `reprise train --model gpt --iters 1`
# on a generated corpus, batch GPT_BATCH, default 1: the step's ops do not
# depend on the batch; GPT_PROCS processors, default 1), the cases named
# gpt-*. One JSON row per case on stdout: the best of REPEAT runs' wall
# time, that run's CPU time (user + system, children included), the goal
# and whether it was met; the commit is the binary's (`reprise version`).
#
# usage: [GPT_BATCH=B] [GPT_PROCS=P] bench/dump_scale.sh [BUILD_DIR [OPS [REPEAT]]]
#        bench/dump_scale.sh -h | --help
#   BUILD_DIR  a configured and built tree (default: build) holding
#              ./reprise and ./test/synth_step (cmake --build BUILD_DIR
#              --target reprise-cli synth_step)
#   OPS        ops of the step (default 10000)
#   REPEAT     runs per case (default 3)
# Exit 0 every goal met, 1 a goal missed, 2 usage or a failed command.
set -euo pipefail
case ${1:-} in
-h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;
-*) echo "usage: $0 [BUILD_DIR [OPS [REPEAT]]] (or --help)" >&2; exit 2 ;;
esac
[ $# -le 3 ] || { echo "usage: $0 [BUILD_DIR [OPS [REPEAT]]] (or --help)" >&2; exit 2; }
[ $# -eq 0 ] || [ -n "$1" ] || { echo "dump_scale: BUILD_DIR is empty" >&2; exit 2; }
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OPS=${2:-10000}
REPEAT=${3:-3}
. bench/args.sh # posint
posint "$OPS" || { echo "dump_scale: OPS wants a positive count, not '$OPS'" >&2; exit 2; }
posint "$REPEAT" || { echo "dump_scale: REPEAT wants a positive count, not '$REPEAT'" >&2; exit 2; }
[ -d "$BUILD" ] || { echo "dump_scale: $BUILD is not a folder (BUILD_DIR: from the repository root)" >&2; exit 2; }
CLI=$BUILD/reprise
GEN=$BUILD/test/synth_step
for x in "$CLI" "$GEN"; do
  [ -x "$x" ] || { echo "dump_scale: $x is missing (build reprise-cli and synth_step)" >&2; exit 2; }
done
# the commit the binary was built from, not the checkout's
VERSION=$("$CLI" version 2>/dev/null | grep -m1 '^reprise ' || true)
[ -n "$VERSION" ] || { echo "dump_scale: $CLI is not reprise ('$CLI version')" >&2; exit 2; }
COMMIT=$(sed -n 's/.*(commit \([^)]*\)).*/\1/p' <<<"$VERSION")
COMMIT=${COMMIT:-unknown}
TMP=$(mktemp -d /tmp/reprise-dump-scale-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$GEN" "$OPS" "$TMP/a.json" || exit 2
"$GEN" "$OPS" "$TMP/b.json" 1 || exit 2
NOPS=$("$CLI" dump "$TMP/a.json" | sed -n 's/^graph: \([0-9]*\) ops.*/\1/p')
DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
CPUS=$(nproc)
MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
missed=0

# run CASE GOAL_S EXPECTED_STATUS CMD...: the row of CMD's best run
run() {
  local name=$1 goal=$2 want=$3
  shift 3
  local best="" cpu="" i t0 t1 c0 c1 st
  for ((i = 0; i < REPEAT; i++)); do
    c0=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
    t0=$(date +%s%N)
    set +e
    "$@" >"$TMP/out" 2>"$TMP/err"
    st=$?
    set -e
    t1=$(date +%s%N)
    if [ "$st" != "$want" ]; then
      echo "dump_scale: $name: exit $st (want $want): $(head -3 "$TMP/err")" >&2
      exit 2
    fi
    c1=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
    local wall=$(( (t1 - t0) / 1000 ))
    if [ -z "$best" ] || [ "$wall" -lt "$best" ]; then
      best=$wall
      cpu=$(( (c1 - c0) * 1000000 / $(getconf CLK_TCK) ))
    fi
  done
  local ok=true
  if [ "$goal" != null ] && [ "$best" -gt $(( goal * 1000000 )) ]; then
    ok=false
    missed=1
  fi
  printf '{"bench": "dump_scale", "case": "%s", "ops": %s, "wall_s": %s, "cpu_s": %s, "goal_s": %s, "met": %s, "repeat": %s, "load1": %s, "commit": "%s", "date": "%s", "cpus": %s, "cpu_model": "%s"}\n' \
    "$name" "$NOPS" "$(awk -v u="$best" 'BEGIN{printf "%.3f", u/1e6}')" \
    "$(awk -v u="$cpu" 'BEGIN{printf "%.3f", u/1e6}')" "$goal" \
    "$([ "$goal" = null ] && echo null || echo "$ok")" "$REPEAT" \
    "$(cut -d' ' -f1 /proc/loadavg)" "$COMMIT" "$DATE" "$CPUS" "$MODEL"
}

A=$TMP/a.json
run text 1 0 "$CLI" dump "$A"
run lint 1 0 "$CLI" dump "$A" --lint
run group null 0 "$CLI" dump "$A" --group
run critical-path null 0 "$CLI" dump "$A" --critical-path
run diff null 1 "$CLI" dump "$A" --diff "$TMP/b.json"
run html-grouped 10 0 "$CLI" dump "$A" --group 1 --format html -o "$TMP/a.html"

# the recorded GPT step (the recording itself is not timed)
awk 'BEGIN { srand(7); split("the quick brown fox jumps over a lazy dog and runs away", w);
  for (i = 0; i < 16000; i++) printf "%s%s", w[int(rand() * 12) + 1], (i % 12 == 11) ? "\n" : " " }' \
  >"$TMP/corpus.txt"
G=$TMP/gpt.json
"$CLI" train --model gpt --layers 6 --heads 6 --width 384 --context 256 \
  --batch "${GPT_BATCH:-1}" --procs "${GPT_PROCS:-1}" --iters 1 --sample 0 \
  --text "$TMP/corpus.txt" --save-graph "$G" >"$TMP/train.out" 2>&1 ||
  { echo "dump_scale: recording the GPT step failed: $(tail -3 "$TMP/train.out")" >&2; exit 2; }
NOPS=$("$CLI" dump "$G" | sed -n 's/^graph: \([0-9]*\) ops.*/\1/p')
run gpt-text 1 0 "$CLI" dump "$G"
run gpt-lint 1 0 "$CLI" dump "$G" --lint --strict
run gpt-group null 0 "$CLI" dump "$G" --group
run gpt-critical-path null 0 "$CLI" dump "$G" --critical-path
run gpt-html-grouped 10 0 "$CLI" dump "$G" --group 1 --format html -o "$TMP/gpt.html"
exit $missed
