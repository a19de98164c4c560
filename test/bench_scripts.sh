#!/bin/sh
# test/bench_scripts.sh — the bench scripts' argument checks: each usage
# error exits 2 before anything runs, --help exits 0 (the shell scripts
# print their whole header comment), and torch_gpt.py refuses bad options
# before it imports torch (a fake torch on PYTHONPATH exits 99 if it is
# imported) and reads --from-json rows safely. Their failure paths run
# against fakes (a reprise, gpt_instantiate, ncu or Criterion binary that
# fails, sleeps or prints canned lines): a failed run costs only its own
# figures, a stop by SIGTERM keeps the rows so far, the outputs carry their
# stamp, test/gpu_test.sh's verdicts. Only report.sh's --quick run of the
# real reprise measures anything (a few seconds); PyTorch is not needed:
# where it is installed, torch_gpt.py --check holds the benchmark's PyTorch
# step to the references test_gpt.c holds reprise to (seconds) and
# torch_decode.py compares reprise generate's greedy bytes with PyTorch's
# decoding of the same checkpoint, and without it those parts are
# skipped; without python3 the Python part is skipped.
# Run by ctest (label unit):
#   bench_scripts.sh REPRISE SOURCE_DIR
set -u
REPRISE=$1 SRC=$2
ASRC=$(cd "$SRC" && pwd)
BUILD=$(dirname "$REPRISE")
dir=$(mktemp -d "${TMPDIR:-/tmp}/rp_bench_scripts.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
failed=0

# want STATUS WHAT COMMAND...: COMMAND exits with STATUS, and without a
# Python traceback
want() {
  st=$1 what=$2
  shift 2
  "$@" >"$dir/out" 2>&1
  got=$?
  if [ "$got" != "$st" ]; then
    echo "FAIL $what: exit $got, want $st: $*"
    head -5 "$dir/out" | sed 's/^/     /'
    failed=1
  elif grep -q '^Traceback' "$dir/out"; then
    echo "FAIL $what: a traceback: $*"
    tail -3 "$dir/out" | sed 's/^/     /'
    failed=1
  else
    echo "ok   $what"
  fi
}

# help SHELL SCRIPT: --help exits 0 and prints the header comment whole
# (line 2 up to the first line that is not a comment)
help() {
  want 0 "$2 --help" "$1" "$SRC/bench/$2" --help
  n=$(sed -n '/^[^#]/{=;q;}' "$SRC/bench/$2")
  sed -n "2,$((n - 1))p" "$SRC/bench/$2" >"$dir/header"
  if ! cmp -s "$dir/out" "$dir/header"; then
    echo "FAIL $2 --help: not the whole header comment"
    diff "$dir/header" "$dir/out" | head -5 | sed 's/^/     /'
    failed=1
  fi
}

# a program that is not reprise: exit 0, prints nothing
printf '#!/bin/sh\nexit 0\n' >"$dir/notreprise"
chmod +x "$dir/notreprise"
mkdir "$dir/ro"

# ---- report.sh
help bash report.sh
R="$SRC/bench/report.sh"
want 2 "report.sh -n 0" bash "$R" -n 0 -b "$REPRISE" -o "$dir/p.md"
want 2 "report.sh -n x" bash "$R" -n x -b "$REPRISE" -o "$dir/p.md"
want 2 "report.sh -w 2,x" bash "$R" -w 2,x -b "$REPRISE" -o "$dir/p.md"
want 2 "report.sh -b missing" bash "$R" -b "$dir/missing" -o "$dir/p.md"
want 2 "report.sh -b a folder" bash "$R" -b "$dir" -o "$dir/p.md"
want 2 "report.sh -b not reprise" bash "$R" -b "$dir/notreprise" -o "$dir/p.md"
want 2 "report.sh -o in a missing folder" bash "$R" -b "$REPRISE" -o "$dir/none/p.md"
want 2 "report.sh -o a folder" bash "$R" -b "$REPRISE" -o "$dir"
if [ "$(id -u)" != 0 ]; then # root writes anywhere
  chmod 555 "$dir/ro"
  want 2 "report.sh -o in a read-only folder" bash "$R" -b "$REPRISE" -o "$dir/ro/p.md"
  chmod 755 "$dir/ro"
fi
want 2 "report.sh --bogus" bash "$R" --bogus
want 2 "report.sh -b ''" bash "$R" -b '' -o "$dir/p.md"
want 2 "report.sh -o ''" bash "$R" -b "$REPRISE" -o ''
[ ! -e "$dir/p.md" ] || { echo "FAIL report.sh wrote -o on a usage error"; failed=1; }
# a failing benchmark (a wrapper around reprise that fails --xfer, train
# and --dist) costs its own section only: the others are measured and
# written, the failed ones keep the text they had, exit 1
cat >"$dir/failing" <<EOF
#!/bin/sh
case "\$*" in *--xfer* | train* | *--dist*) echo "wrapper: fails" >&2; exit 1 ;; esac
exec "$REPRISE" "\$@"
EOF
chmod +x "$dir/failing"
# (a build without benchmarks, -DREPRISE_BENCH=OFF as the TSan one, fails
# every bench section: the check needs one that has them)
if ! "$REPRISE" bench --help | grep -q 'has no benchmarks'; then
want 1 "report.sh a failing benchmark" bash "$R" --quick -n 1 -b "$dir/failing" -o "$dir/p.md"
section() { # section NAME FILE: the text of that section of FILE
  sed -n "/^<!-- section: $1 -->\$/,/^<!-- end section: $1 -->\$/p" "$2"
}
if ! grep -q 'failed, kept as they were: xfer train-cpu' "$dir/out" ||
  [ "$(section xfer "$dir/p.md")" != "$(section xfer "$SRC/docs/performance.md")" ] ||
  [ "$(section train-cpu "$dir/p.md")" != "$(section train-cpu "$SRC/docs/performance.md")" ] ||
  ! section hop "$dir/p.md" | grep -q 'failing bench --quick --hop'; then
  echo "FAIL report.sh a failing benchmark: the failed sections not kept, or the others not written"
  tail -5 "$dir/out" | sed 's/^/     /'
  failed=1
fi
rm -f "$dir/p.md"
fi

# ---- gpt_tp.sh
help sh gpt_tp.sh
G="$SRC/bench/gpt_tp.sh"
want 2 "gpt_tp.sh -n 0" sh "$G" -n 0 -b "$REPRISE"
want 2 "gpt_tp.sh -n x" sh "$G" -n x -b "$REPRISE"
want 2 "gpt_tp.sh layout x/2" sh "$G" -b "$REPRISE" 1/1 x/2
want 2 "gpt_tp.sh layout 2" sh "$G" -b "$REPRISE" 2
want 2 "gpt_tp.sh layout 2x/1" sh "$G" -b "$REPRISE" 2x/1
want 2 "gpt_tp.sh -b missing" sh "$G" -b "$dir/missing" 1/1
want 2 "gpt_tp.sh -b not reprise" sh "$G" -b "$dir/notreprise" 1/1
grep -q '^layout' "$dir/out" && { echo "FAIL gpt_tp.sh printed its table header"; failed=1; }
# a failed run (a fake reprise whose --tp 2 fails) is named, the other
# layouts still run and print their rows, and the exit status is 1
mkdir "$dir/tpbin"
cat >"$dir/tpbin/reprise" <<'EOF'
#!/bin/sh
[ "$1" = version ] && { echo 'reprise 0.0.0 (commit fake)'; exit 0; }
while [ $# -gt 1 ]; do
  case $1 in --tp) tp=$2 ;; --json) j=$2 ;; esac
  shift
done
[ "$tp" = 2 ] && { echo "fake reprise: --tp 2 fails" >&2; exit 3; }
printf '{\n "iter_us_median": %s,\n "kernels_per_step": 10,\n "copies_per_step": 0,
 "comm_per_step": 0,\n "state_bytes_per_proc": [1000000],
 "bytes_per_proc": [2000000]\n}\n' "$((100 * tp))" >"$j"
EOF
chmod +x "$dir/tpbin/reprise"
want 1 "gpt_tp.sh a failed layout" sh "$G" -n 2 -b "$dir/tpbin/reprise" 1/1 2/2 4/4
# the first line: the figures' stamp
STAMP='reprise 0.0.0 (commit fake); 20[0-9-]* [0-9:]* UTC; CPU: .*; GPU: .*; load: '
head -1 "$dir/out" | grep -q "^$dir/tpbin/reprise: $STAMP" ||
  { echo "FAIL gpt_tp.sh: no stamp first"; head -1 "$dir/out" | sed 's/^/     /'; failed=1; }
if ! grep -q '2/2, round 1: reprise train failed (exit 3)' "$dir/out" ||
  ! grep -q '^2/2 *failed$' "$dir/out" ||
  ! grep -q '^4/4 *400 *400 *4.00 ' "$dir/out"; then
  echo "FAIL gpt_tp.sh a failed layout: not named, or the others' rows missing"
  sed 's/^/     /' "$dir/out"
  failed=1
fi
# the median of an even number of rounds is the mean of the middle two
# (a fake reprise whose step takes 100 us, then 300 us: the median is 200,
# not the lower 100)
mkdir "$dir/tpeven"
cat >"$dir/tpeven/reprise" <<EOF
#!/bin/sh
[ "\$1" = version ] && { echo 'reprise 0.0.0 (commit fake)'; exit 0; }
while [ \$# -gt 1 ]; do
  case \$1 in --json) j=\$2 ;; esac
  shift
done
n=\$(cat "$dir/tpeven/n" 2>/dev/null || echo 0)
echo \$((n + 1)) >"$dir/tpeven/n"
printf '{\n "iter_us_median": %s,\n "kernels_per_step": 10,\n "copies_per_step": 0,
 "comm_per_step": 0,\n "state_bytes_per_proc": [1000000],
 "bytes_per_proc": [2000000]\n}\n' "\$((100 + 200 * n))" >"\$j"
EOF
chmod +x "$dir/tpeven/reprise"
want 0 "gpt_tp.sh an even number of rounds" sh "$G" -n 2 -b "$dir/tpeven/reprise" 1/1
if ! grep -q '^1/1 *100 *200 *1.00 ' "$dir/out"; then
  echo "FAIL gpt_tp.sh an even number of rounds: not min 100, median 200"
  sed 's/^/     /' "$dir/out"
  failed=1
fi
# -b '': refused, not the default ./build/reprise (here a fake one)
mkdir -p "$dir/cwd/build"
ln -s "$dir/tpbin/reprise" "$dir/cwd/build/reprise"
# shellcheck disable=SC2016 # the inner shell expands them
want 2 "gpt_tp.sh -b ''" sh -c 'cd "$1" && sh "$2" -b "" 1/1' sh "$dir/cwd" "$ASRC/bench/gpt_tp.sh"

# ---- replay_goals.sh
help sh replay_goals.sh
G="$SRC/bench/replay_goals.sh"
want 2 "replay_goals.sh -n 0" sh "$G" -n 0 -b "$REPRISE"
want 2 "replay_goals.sh -n x" sh "$G" -n x -b "$REPRISE"
want 2 "replay_goals.sh workers 0" sh "$G" -n 1 -b "$REPRISE" 0
want 2 "replay_goals.sh -b missing" sh "$G" -b "$dir/missing"
want 2 "replay_goals.sh -b not reprise" sh "$G" -b "$dir/notreprise"
# shellcheck disable=SC2016 # the inner shell expands them
want 2 "replay_goals.sh -b ''" sh -c 'cd "$1" && sh "$2" -n 1 -b "" 2' sh "$dir/cwd" "$ASRC/bench/replay_goals.sh"

# the first line: the figures' stamp (a fake reprise whose bench rows are
# one tiny replay row)
cat >"$dir/goalbin" <<'EOF'
#!/bin/sh
[ "$1" = version ] && { echo 'reprise 0.0.0 (commit fake)'; exit 0; }
while [ $# -gt 1 ]; do
  [ "$1" = --json ] && j=$2
  shift
done
echo '[{"workload": "tiny", "mode": "replay", "ns_per_task_median": 600, "vs_static": 1.0, "pct_of_ideal": 90.0, "ideal_ns_per_task": 540}]' >"$j"
EOF
chmod +x "$dir/goalbin"
want 0 "replay_goals.sh" sh "$G" -n 1 -b "$dir/goalbin" 2
head -1 "$dir/out" | grep -q "^$dir/goalbin: $STAMP" ||
  { echo "FAIL replay_goals.sh: no stamp first"; head -1 "$dir/out" | sed 's/^/     /'; failed=1; }

# ---- dump_scale.sh
help bash dump_scale.sh
G="$SRC/bench/dump_scale.sh"
want 2 "dump_scale.sh REPEAT 0" bash "$G" "$BUILD" 100 0
want 2 "dump_scale.sh REPEAT x" bash "$G" "$BUILD" 100 x
want 2 "dump_scale.sh OPS x" bash "$G" "$BUILD" x 1
want 2 "dump_scale.sh missing build folder" bash "$G" "$dir/none" 100 1
want 2 "dump_scale.sh BUILD_DIR ''" bash "$G" '' 100 1

# ---- gpu_gpt.sh
help bash gpu_gpt.sh
G="$SRC/bench/gpu_gpt.sh"
want 2 "gpu_gpt.sh no BUILD_DIR" bash "$G"
want 2 "gpu_gpt.sh step bogus" bash "$G" "$BUILD" bogus
want 2 "gpu_gpt.sh step train,bogus" bash "$G" "$BUILD" train,bogus
# profile: without ncu the step says so and runs nothing; an ncu that
# profiles no kernel (it exits 0) fails the step
if ! command -v ncu >/dev/null 2>&1 &&
  ! ls /usr/local/cuda*/bin/ncu >/dev/null 2>&1; then
  mkdir "$dir/prof"
  want 1 "gpu_gpt.sh profile without ncu" env OUT="$dir/prof" bash "$G" "$BUILD" profile
  grep -q '^FAIL  profile: no ncu' "$dir/out" ||
    { echo "FAIL gpu_gpt.sh profile without ncu: no line saying so"; failed=1; }
  ! ls "$dir/prof"/ncu_* >/dev/null 2>&1 ||
    { echo "FAIL gpu_gpt.sh profile without ncu: ran the profiles"; failed=1; }
fi
# the end of the output alone names the build, the date and the machine,
# above each step's line (a build whose reprise fails every train)
mkdir "$dir/fb"
cat >"$dir/fb/reprise" <<'EOF'
#!/bin/sh
[ "$1" = version ] && { echo 'reprise 9.9.9 (commit fakefb)'; exit 0; }
echo "fake reprise: fails" >&2
exit 1
EOF
chmod +x "$dir/fb/reprise"
want 1 "gpu_gpt.sh train, a failing build" env OUT="$dir/fbout" bash "$G" "$dir/fb" train
if ! tail -3 "$dir/out" | head -1 |
  grep -q '^== gpu_gpt.sh train: reprise 9.9.9 (commit fakefb); 20[0-9-]* [0-9:]* UTC; GPU: .*; CPU: .*cores$' ||
  ! tail -2 "$dir/out" | head -1 | grep -q '^FAIL  reprise train --model gpt'; then
  echo "FAIL gpu_gpt.sh: no stamp and step lines at the end"
  tail -4 "$dir/out" | sed 's/^/     /'
  failed=1
fi
# a build folder without GPU tests fails the ctest step
want 1 "gpu_gpt.sh ctest, no tests" env OUT="$dir/fbout" bash "$G" "$dir/fb" ctest
grep -q '^FAIL  REPRISE_REQUIRE_GPU=1 ctest -L gpu: No tests were found' "$dir/out" ||
  { echo "FAIL gpu_gpt.sh ctest, no tests: not named"; failed=1; }
# the environment is checked before any step runs
want 2 "gpu_gpt.sh TRAIN_ITERS=3x" env TRAIN_ITERS=3x OUT="$dir/fbout" bash "$G" "$dir/fb" train
want 2 "gpu_gpt.sh KNOBS with an item not VAR=VALUE" \
  env KNOBS='default REPRISE_GPT_ATTN' KNOB_RUNS=1 OUT="$dir/fbout" bash "$G" "$dir/fb" knobs
want 2 "gpu_gpt.sh TEXT missing" env TEXT="$dir/missing" OUT="$dir/fbout" bash "$G" "$dir/fb" train
mkdir "$dir/ncu" "$dir/prof2"
cp "$dir/notreprise" "$dir/ncu/ncu"
want 1 "gpu_gpt.sh profile, ncu profiles no kernel" \
  env PATH="$dir/ncu:$PATH" OUT="$dir/prof2" bash "$G" "$BUILD" profile
grep -q 'no kernel times' "$dir/out" ||
  { echo "FAIL gpu_gpt.sh profile: an empty profile not named"; failed=1; }

# ---- gpu_check.sh: its limit is checked before anything runs
want 2 "gpu_check.sh CTEST_TIMEOUT=20s" env CTEST_TIMEOUT=20s OUT="$dir/ckout" \
  bash "$SRC/bench/gpu_check.sh" "$BUILD"
grep -q 'gpu_check.sh: CTEST_TIMEOUT=20s: want a positive whole number of seconds' "$dir/out" ||
  { echo "FAIL gpu_check.sh CTEST_TIMEOUT=20s: not named"; failed=1; }
[ ! -e "$dir/ckout" ] ||
  { echo "FAIL gpu_check.sh CTEST_TIMEOUT=20s: ran a step"; failed=1; }

# ---- gpu_day.sh (and DRY=1 of gpu_gpt.sh and gpu_profile.sh)
help bash gpu_day.sh
G="$SRC/bench/gpu_day.sh"
want 2 "gpu_day.sh no BUILD_DIR" bash "$G"
want 2 "gpu_day.sh a missing build" bash "$G" "$dir/none"
want 2 "gpu_day.sh DAY_BUDGET=0" env DAY_BUDGET=0 bash "$G" "$BUILD"
want 2 "gpu_day.sh STEPS=ctest,bogus" env STEPS=ctest,bogus bash "$G" "$BUILD"
want 2 "gpu_day.sh DRY=2" env DRY=2 bash "$G" "$BUILD"
want 2 "gpu_day.sh COMPILE_MODES=eager" env COMPILE_MODES=eager bash "$G" "$BUILD"
want 2 "gpu_day.sh TEXT missing" env TEXT="$dir/missing" bash "$G" "$BUILD"
# no GPU (an nvidia-smi that lists none): said at once, nothing run (a
# fake build whose reprise marks any run but `version`)
mkdir "$dir/nosmi" "$dir/daybin"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed: no driver"\nexit 9\n' >"$dir/nosmi/nvidia-smi"
# shellcheck disable=SC2016 # the fake's own $1
printf '#!/bin/sh\n[ "$1" = version ] && { echo "reprise 0.0.0 (commit fake)"; exit 0; }\n: >"%s"\nexit 1\n' \
  "$dir/daybin/ran" >"$dir/daybin/reprise"
chmod +x "$dir/nosmi/nvidia-smi" "$dir/daybin/reprise"
want 1 "gpu_day.sh without a GPU" env PATH="$dir/nosmi:$PATH" OUT="$dir/dayout" \
  bash "$G" "$dir/daybin"
grep -q 'gpu_day.sh: no GPU: nvidia-smi lists none (NVIDIA-SMI has failed' "$dir/out" ||
  { echo "FAIL gpu_day.sh without a GPU: not said"; sed 's/^/     /' "$dir/out"; failed=1; }
if [ -e "$dir/daybin/ran" ] || [ -e "$dir/dayout/ctest.log" ]; then
  echo "FAIL gpu_day.sh without a GPU: ran a step"
  failed=1
fi
# a GPU test that hangs (TIMEOUT 900 as test/CMakeLists.txt gives every
# test, so ctest's --timeout does not reach it): ctest stops it before the
# step's limit and names it, with the summary line (a fake nvidia-smi
# that lists a GPU, a fake torch that fails to import)
if command -v ctest >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
  mkdir "$dir/smi" "$dir/hangbld" "$dir/hangtorch" "$dir/hangtorch/torch"
  printf '#!/bin/sh\necho "GPU 0: Fake GPU (UUID: GPU-0)"\n' >"$dir/smi/nvidia-smi"
  echo 'raise SystemExit(99)' >"$dir/hangtorch/torch/__init__.py"
  cp "$dir/daybin/reprise" "$dir/hangbld/reprise"
  printf 'add_test(hangs "sleep" "300")\nset_tests_properties(hangs PROPERTIES LABELS "gpu" TIMEOUT "900")\nadd_test(passes "true")\nset_tests_properties(passes PROPERTIES LABELS "gpu" TIMEOUT "900")\n' \
    >"$dir/hangbld/CTestTestfile.cmake"
  chmod +x "$dir/smi/nvidia-smi"
  want 1 "gpu_day.sh a GPU test that hangs" env PATH="$dir/smi:$PATH" \
    PYTHONPATH="$dir/hangtorch" OUT="$dir/hangout" STEPS=ctest CTEST_LIMIT=20 \
    bash "$G" "$dir/hangbld"
  if ! grep -q 'hangs (Timeout)' "$dir/hangout/ctest.log" 2>/dev/null ||
    ! grep -q '^FAIL  REPRISE_REQUIRE_GPU=1 ctest -L gpu: 50% tests passed, 1 tests failed out of 2' \
      "$dir/hangout/summary.txt"; then
    echo "FAIL gpu_day.sh a GPU test that hangs: not stopped and named by ctest"
    sed 's/^/     /' "$dir/hangout/summary.txt" "$dir/hangout/ctest.log" 2>/dev/null | tail -8
    failed=1
  fi
  # the same in gpu_gpt.sh's ctest step (CHECK_TIMEOUT) and gpu_check.sh's
  # (CTEST_TIMEOUT; its other steps fail on the fake reprise)
  want 1 "gpu_gpt.sh ctest, a GPU test that hangs" env PATH="$dir/smi:$PATH" \
    OUT="$dir/hanggpt" CHECK_TIMEOUT=20 bash "$SRC/bench/gpu_gpt.sh" "$dir/hangbld" ctest
  if ! grep -q 'hangs (Timeout)' "$dir/hanggpt/ctest.log" 2>/dev/null ||
    ! grep -q '^FAIL  REPRISE_REQUIRE_GPU=1 ctest -L gpu: 50% tests passed, 1 tests failed out of 2 (rc 8)$' \
      "$dir/hanggpt/summary.txt"; then
    echo "FAIL gpu_gpt.sh ctest, a GPU test that hangs: not stopped and named by ctest"
    sed 's/^/     /' "$dir/hanggpt/summary.txt" "$dir/hanggpt/ctest.log" 2>/dev/null | tail -8
    failed=1
  fi
  want 1 "gpu_check.sh a GPU test that hangs" env PATH="$dir/smi:$PATH" \
    OUT="$dir/hangcheck" CTEST_TIMEOUT=20 bash "$SRC/bench/gpu_check.sh" "$dir/hangbld"
  if ! grep -q 'hangs (Timeout)' "$dir/hangcheck/ctest.log" 2>/dev/null ||
    ! grep -q "^FAIL  ctest -L gpu (REPRISE_REQUIRE_GPU=1): 50% tests passed, 1 tests failed out of 2: see $dir/hangcheck/ctest.log\$" \
      "$dir/out"; then
    echo "FAIL gpu_check.sh a GPU test that hangs: not stopped and named by ctest"
    sed 's/^/     /' "$dir/out" "$dir/hangcheck/ctest.log" 2>/dev/null | tail -8
    failed=1
  fi
else
  echo "skip gpu_day.sh, gpu_gpt.sh and gpu_check.sh, a GPU test that hangs: no ctest or python3"
fi
# ctest_stop (bench/args.sh) gives the time of day 10 s before the limit,
# also past midnight (UTC), where ctest reads it as tomorrow's: a `date`
# whose clock says 23:59:50 UTC
stop=$(
  . "$SRC/bench/args.sh"
  date() { case "$*" in *+%s*) echo 86390 ;; *) command date "$@" ;; esac; }
  echo "$(ctest_stop 40) $(ctest_stop 24) [$(ctest_stop 86400)]"
)
if [ "$stop" = "00:00:20 00:00:04 []" ]; then
  echo "ok   ctest_stop past midnight"
else
  echo "FAIL ctest_stop past midnight: '$stop', want '00:00:20 00:00:04 []'"
  failed=1
fi
# DRY=1: every command a script would run, printed; each must take its
# options as they are today: torch_gpt.py gets past its argument checks
# to `import torch` (a fake one that exits 99), and reprise refuses none
# of its options (no exit 2, no "Try 'reprise") but fails for want of a
# device (CUDA_VISIBLE_DEVICES empty: fast even where a GPU is)
drycheck() { # drycheck WHAT MIN: the commands in $dir/out, at least MIN
  grep -v '^#' "$dir/out" >"$dir/dry"
  n=0
  while IFS= read -r line; do
    (
      eval "set -- $line"
      while [ $# -gt 0 ]; do
        case $1 in
        "$B/reprise" | "$ASRC/bench/torch_gpt.py") break ;;
        *=*) export "${1?}" ;;
        esac
        shift
      done
      [ $# -gt 0 ] || exit 3
      if [ "$1" = "$B/reprise" ]; then
        CUDA_VISIBLE_DEVICES='' timeout 60 "$@" >"$dir/dry1" 2>&1
        st=$?
        [ $st != 2 ] && ! grep -q "Try 'reprise" "$dir/dry1" && exit 0
      else
        PYTHONPATH="$dir/dryfake" PYTHONDONTWRITEBYTECODE=1 timeout 60 python3 "$@" \
          >"$dir/dry1" 2>&1
        st=$?
        [ $st = 99 ] && exit 0
      fi
      echo "FAIL $1: exit $st: $line"
      head -3 "$dir/dry1" | sed 's/^/     /'
      exit 1
    )
    case $? in 0) n=$((n + 1)) ;; 1) failed=1 ;; esac
  done <"$dir/dry"
  if [ "$n" -lt "$2" ]; then
    echo "FAIL $1: $n commands checked, want at least $2"
    sed 's/^/     /' "$dir/dry"
    failed=1
  else
    echo "ok   $1: $n commands take their options"
  fi
}
if command -v python3 >/dev/null 2>&1; then
  mkdir -p "$dir/dryfake/torch"
  echo 'raise SystemExit(99)  # imported: past the argument checks' \
    >"$dir/dryfake/torch/__init__.py"
  B="$(cd "$BUILD" && pwd)"
  want 0 "gpu_day.sh DRY=1" env DRY=1 OUT="$dir/dry_day" bash "$G" "$B"
  drycheck "gpu_day.sh DRY=1" 13
  want 0 "gpu_gpt.sh DRY=1, every step" env DRY=1 OUT="$dir/dry_gpt" \
    KNOBS='default REPRISE_GPT_ATTN=gemm+REPRISE_GPT_ATTN_GEMM=direct' KNOB_RUNS=1 \
    bash "$SRC/bench/gpu_gpt.sh" "$B" check,ctest,train,launch,nanogpt,knobs,profile
  drycheck "gpu_gpt.sh DRY=1" 20
  want 0 "gpu_profile.sh DRY=1" env DRY=1 OUT="$dir/dry_prof" \
    bash "$SRC/bench/gpu_profile.sh" "$B"
  drycheck "gpu_profile.sh DRY=1" 2
else
  echo "skip gpu_day.sh DRY=1: no python3"
fi

# ---- test/gpu_test.sh (ctest's wrapper of a GPU test binary): a fake
# binary printing Criterion's lines
GT="$SRC/test/gpu_test.sh"
synth() { # the fake binary's output: [SKIP] lines, then the synthesis
  printf '#!/bin/sh\n' >"$dir/crit"
  for l in "$@"; do printf 'echo "%s"\n' "$l" >>"$dir/crit"; done
  chmod +x "$dir/crit"
}
synth '[SKIP] s::a: Test is disabled' '[====] Synthesis: Tested: 1 | Passing: 1 | Failing: 0 | Crashing: 0'
want 0 "gpu_test.sh every test ran" sh "$GT" "$dir/crit"
synth '[SKIP] s::a: no CUDA device' '[====] Synthesis: Tested: 0 | Passing: 0 | Failing: 0 | Crashing: 0'
want 77 "gpu_test.sh a test skipped" sh "$GT" "$dir/crit"
want 1 "gpu_test.sh a test skipped, REPRISE_REQUIRE_GPU=1" \
  env REPRISE_REQUIRE_GPU=1 sh "$GT" "$dir/crit"
synth '[SKIP] s::a: Test is disabled' '[====] Synthesis: Tested: 0 | Passing: 0 | Failing: 0 | Crashing: 0'
want 1 "gpu_test.sh a filter that names no test" sh "$GT" "$dir/crit"

# ---- torch_gpt.py
if ! command -v python3 >/dev/null 2>&1; then
  echo "skip torch_gpt.py: no python3"
else
  mkdir "$dir/fake" "$dir/fake/torch"
  echo 'raise SystemExit(99)  # imported: the checks came too late' \
    >"$dir/fake/torch/__init__.py"
  T="$SRC/bench/torch_gpt.py"
  # shellcheck disable=SC2317 # run through want
  py() {
    PYTHONPATH="$dir/fake" PYTHONDONTWRITEBYTECODE=1 python3 "$T" "$@"
  }
  want 0 "torch_gpt.py --help" py --help
  want 2 "torch_gpt.py --preset nonsense" py --preset nonsense
  want 2 "torch_gpt.py --preset launch,x" py --preset launch,x
  want 2 "torch_gpt.py --modes eager,bogus" py --modes eager,bogus
  want 2 "torch_gpt.py --attn bogus" py --attn bogus
  want 2 "torch_gpt.py --instantiate-procs 1,x" py --instantiate-procs 1,x
  want 2 "torch_gpt.py --repeats 0" py --repeats 0
  want 2 "torch_gpt.py --lat-steps -1" py --lat-steps -1
  want 2 "torch_gpt.py --lat-steps 0" py --lat-steps 0
  want 2 "torch_gpt.py --threads 0" py --threads 0
  want 2 "torch_gpt.py --device bogus" py --device bogus
  want 2 "torch_gpt.py --math tf32 on the CPU" py --device cpu --math tf32
  want 2 "torch_gpt.py --reprise not reprise" py --reprise "$dir/notreprise"
  want 2 "torch_gpt.py --reprise missing" py --reprise "$dir/missing"
  want 2 "torch_gpt.py --json a folder" py --json "$dir"
  want 2 "torch_gpt.py --markdown in a missing folder" py --markdown "$dir/none/x.md"
  for o in --json --markdown --from-json --reprise --text; do
    want 2 "torch_gpt.py $o ''" py "$o" ''
  done
  want 2 "torch_ref.py --json ''" \
    env PYTHONPATH="$dir/fake" python3 "$SRC/bench/torch_ref.py" --json ''
  want 2 "torch_gpt.py --from-json with --json" \
    py --from-json "$dir/rows.json" --json "$dir/j.json"
  # --from-json: an unreadable rows file leaves --markdown as it was
  echo keep >"$dir/keep.md"
  want 1 "torch_gpt.py --from-json missing" \
    py --from-json "$dir/missing.json" --markdown "$dir/keep.md"
  echo '[{"side": ' >"$dir/bad.json"
  want 1 "torch_gpt.py --from-json corrupt" \
    py --from-json "$dir/bad.json" --markdown "$dir/keep.md"
  echo '{"rows": []}' >"$dir/bad.json"
  want 1 "torch_gpt.py --from-json not rows" \
    py --from-json "$dir/bad.json" --markdown "$dir/keep.md"
  [ "$(cat "$dir/keep.md")" = keep ] ||
    { echo "FAIL torch_gpt.py --from-json touched --markdown"; failed=1; }
  # a replay row whose back-to-back figure had 4 replays in flight
  cat >"$dir/rows.json" <<'EOF'
[{"side": "reprise", "mode": "replay", "status": "ok", "math": "fp32",
  "device": "cpu", "procs": 1,
  "config": {"layers": 1, "heads": 1, "width": 8, "context": 4, "batch": 1,
             "vocab": 5},
  "latency_us": {"min": 1.0, "median": 1.0, "max": 1.0, "n": 1},
  "b2b_us": {"min": 0.5, "median": 0.5, "max": 0.5, "n": 1},
  "b2b_source": "--inflight 4: iter_us_throughput", "inflight_b2b": 4,
  "machine": {"commit": "test"}}]
EOF
  want 0 "torch_gpt.py --from-json" \
    py --from-json "$dir/rows.json" --markdown "$dir/keep.md"
  grep -q 'b2b with --inflight 4' "$dir/keep.md" ||
    { echo "FAIL torch_gpt.py: no --inflight note in the markdown"; failed=1; }
  # shellcheck disable=SC2016 # the inner shell expands them
  want 1 "torch_gpt.py --from-json, stdout closed" \
    sh -c 'python3 "$0" --from-json "$1" >&-' "$T" "$dir/rows.json"
  grep -q 'cannot write stdout' "$dir/out" ||
    { echo "FAIL torch_gpt.py, stdout closed: not said"; failed=1; }

  # SIGTERM (a `timeout`) in the middle of a run: the rows measured so far
  # are written, the last one saying what was cut short. A fake reprise
  # answers `train` at once; a fake gpt_instantiate beside it marks that it
  # runs and sleeps, and is stopped there; torch is not importable.
  mkdir "$dir/notorch" "$dir/notorch/torch" "$dir/bin"
  echo 'raise ImportError("no torch in this test")' \
    >"$dir/notorch/torch/__init__.py"
  cat >"$dir/bin/reprise" <<'EOF'
#!/bin/sh
[ "$1" = version ] && { echo 'reprise 0.0.0 (commit fake)'; exit 0; }
while [ $# -gt 1 ]; do
  [ "$1" = --json ] && j=$2
  shift
done
echo '{"vocab": 50, "iter_us_median": 100, "iter_us_p99": 120,
 "iter_us_throughput": 110, "instantiate_ms": 1}' >"$j"
EOF
  cat >"$dir/bin/gpt_instantiate" <<'EOF'
#!/bin/sh
: >"$RP_TEST_MARK"
exec sleep 120
EOF
  chmod +x "$dir/bin/reprise" "$dir/bin/gpt_instantiate"
  RP_TEST_MARK=$dir/mark PYTHONPATH="$dir/notorch" PYTHONDONTWRITEBYTECODE=1 \
    python3 "$T" --reprise "$dir/bin/reprise" --invocations 1 --threads 1 \
    --trace-replays 0 --instantiate-procs 1 --json "$dir/cut.json" \
    --markdown "$dir/cut.md" >"$dir/cut.out" 2>&1 &
  pid=$!
  i=0 # until the fake gpt_instantiate runs (at most a minute)
  while [ ! -e "$dir/mark" ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
  done
  kill -TERM $pid
  wait $pid
  st=$?
  if [ "$st" != 143 ] || ! python3 - "$dir/cut.json" <<'EOF'; then
import json, sys
rows = json.load(open(sys.argv[1]))
got = [(r["side"], r["mode"], r["status"]) for r in rows]
want = [("reprise", "replay", "ok"), ("reprise", "eager", "ok"),
        ("run", "interrupted", "interrupted")]
assert got == want, got
assert "SIGTERM during gpt_instantiate" in rows[-1]["reason"], rows[-1]
EOF
    echo "FAIL torch_gpt.py stopped by SIGTERM: exit $st, want 143 and the rows so far"
    tail -3 "$dir/cut.out" | sed 's/^/     /'
    failed=1
  elif ! grep -q '| run interrupted |' "$dir/cut.md"; then
    echo "FAIL torch_gpt.py stopped by SIGTERM: no interrupted row in --markdown"
    failed=1
  else
    echo "ok   torch_gpt.py stopped by SIGTERM writes the rows so far"
  fi

  # Both sides run the same step: the AdamW settings reprise train has no
  # option for are refused when its rows are measured, --lr goes to both;
  # reprise's figures leave its first (cold) step out as PyTorch's leave
  # their warm-up out (a fake reprise: its first step 1000 us, then 100 us
  # each; the loop's wall time (1000 + 3 x 100) / 4 = 325 us a step).
  mkdir "$dir/bin2"
  cat >"$dir/bin2/reprise" <<'EOF2'
#!/bin/sh
[ "$1" = version ] && { echo 'reprise 0.0.0 (commit fake)'; exit 0; }
echo "$*" >>"$RP_TEST_ARGS"
j= t=
while [ $# -gt 1 ]; do
  [ "$1" = --json ] && j=$2
  [ "$1" = --timings ] && t=$2
  shift
done
echo '{"vocab": 50, "iter_us_median": 100, "iter_us_p99": 1000,
 "iter_us_throughput": 325, "instantiate_ms": 1, "ops_per_step": 26}' >"$j"
[ -n "$t" ] && echo '{"format": "reprise-timings", "version": 1, "iterations": [
 {"iteration": 0, "mode": "replay", "ns": 1000000},
 {"iteration": 1, "mode": "replay", "ns": 100000},
 {"iteration": 2, "mode": "replay", "ns": 100000},
 {"iteration": 3, "mode": "replay", "ns": 100000}]}' >"$t"
exit 0
EOF2
  chmod +x "$dir/bin2/reprise"
  for o in "--clip 0.5" "--weight-decay 0" "--beta2 0.99" "--lr 10" "--lr 0"; do
    # shellcheck disable=SC2086 # the option and its value
    want 2 "torch_gpt.py $o with reprise train rows" \
      py --reprise "$dir/bin2/reprise" $o
  done
  want 0 "torch_gpt.py --clip 0.5 without reprise train rows" \
    env PYTHONPATH="$dir/notorch" python3 "$T" --clip 0.5 --threads 1 \
    --json "$dir/clip.json"
  # --vocab other than the one reprise train finds in the text (the fake's
  # 50): the two LM heads would differ
  want 2 "torch_gpt.py --vocab other than reprise train's" \
    env RP_TEST_ARGS="$dir/args" PYTHONPATH="$dir/notorch" python3 "$T" \
    --reprise "$dir/bin2/reprise" --invocations 1 --threads 1 \
    --trace-replays 0 --instantiate-procs '' --vocab 65 --json "$dir/v.json"
  grep -q "reprise train's vocabulary for the text is 50" "$dir/out" ||
    { echo "FAIL torch_gpt.py --vocab 65: the mismatch not said"; failed=1; }
  [ ! -e "$dir/v.json" ] ||
    { echo "FAIL torch_gpt.py --vocab 65: rows written"; failed=1; }
  # the reprise rows carry the REPRISE_* settings they ran under (the
  # attention layouts of one config are told apart)
  want 0 "torch_gpt.py under REPRISE_GPT_ATTN=gemm" \
    env REPRISE_GPT_ATTN=gemm RP_TEST_ARGS="$dir/args" PYTHONPATH="$dir/notorch" \
    python3 "$T" --reprise "$dir/bin2/reprise" --invocations 1 --threads 1 \
    --trace-replays 0 --instantiate-procs '' --json "$dir/e.json" --markdown "$dir/e.md"
  grep -q '| reprise replay \[REPRISE_GPT_ATTN=gemm\] |' "$dir/e.md" ||
    { echo "FAIL torch_gpt.py: the reprise row does not name REPRISE_GPT_ATTN=gemm"; failed=1; }
  want 0 "torch_gpt.py --vocab the same as reprise train's" \
    env RP_TEST_ARGS="$dir/args" PYTHONPATH="$dir/notorch" python3 "$T" \
    --reprise "$dir/bin2/reprise" --invocations 1 --threads 1 \
    --trace-replays 0 --instantiate-procs '' --vocab 50 --json "$dir/v.json"
  # without torch --device auto is the CPU
  want 2 "torch_gpt.py --math tf32 on the CPU (auto)" \
    env PYTHONPATH="$dir/notorch" python3 "$T" --math tf32 --json "$dir/tf.json"
  want 2 "torch_gpt.py --fixture without --check" py --fixture x.bin
  want 2 "torch_gpt.py --check with --json" py --check --json "$dir/c.json"
  # --check runs the references' shapes, batches and learning rates: an
  # option of the measured runs would be ignored, so it is refused
  want 2 "torch_gpt.py --check with --lr" py --check --lr 5e-3
  grep -q -- "--lr does not go with it" "$dir/out" ||
    { echo "FAIL torch_gpt.py --check --lr: the option not named"; failed=1; }
  want 2 "torch_gpt.py --check with --layers, --inflight" \
    py --check --layers 3 --inflight 2
  grep -q -- "--layers, --inflight do not go with it" "$dir/out" ||
    { echo "FAIL torch_gpt.py --check --layers --inflight: not named"; failed=1; }
  want 77 "torch_gpt.py --check without PyTorch" \
    env PYTHONPATH="$dir/notorch" python3 "$T" --check
  : >"$dir/args"
  want 0 "torch_gpt.py against a fake reprise" \
    env RP_TEST_ARGS="$dir/args" PYTHONPATH="$dir/notorch" \
    PYTHONDONTWRITEBYTECODE=1 python3 "$T" --reprise "$dir/bin2/reprise" \
    --invocations 1 --threads 1 --trace-replays 0 --instantiate-procs '' \
    --lr 1e-3 --json "$dir/warm.json" --markdown "$dir/warm.md"
  if ! python3 - "$dir/warm.json" "$dir/args" <<'EOF2'; then
import json, sys
rows = [r for r in json.load(open(sys.argv[1])) if r["side"] == "reprise"]
assert len(rows) == 2, rows
for r in rows:
    assert r["latency_us"]["median"] == 100, r["latency_us"]
    assert r["latency_us_p99"]["median"] == 100, r["latency_us_p99"]
    assert abs(r["b2b_us"]["median"] - 100) < 1e-9, r["b2b_us"]
train = [l for l in open(sys.argv[2]) if l.startswith("train ")]
assert train and all(" --lr 0.001 " in l for l in train), train
EOF2
    echo "FAIL torch_gpt.py: reprise's first step in its figures, or --lr not passed"
    failed=1
  elif ! grep -q '| 26 ops |' "$dir/warm.md"; then
    echo "FAIL torch_gpt.py: reprise's op count not labelled as ops"
    failed=1
  else
    echo "ok   torch_gpt.py: reprise's figures without its first step, --lr to both sides"
  fi

  # gpt_instantiate's median of an even count of instantiates is the mean
  # of the middle two (of 2: halfway between min and max, to the printed
  # microsecond)
  if [ -x "$BUILD/gpt_instantiate" ]; then
    if "$BUILD/gpt_instantiate" --layers 1 --heads 1 --width 8 --context 4 \
      --batch 1 --vocab 5 --reps 2 >"$dir/inst.json" 2>&1 &&
      python3 - "$dir/inst.json" <<'EOF2'; then
import json, sys
t = json.load(open(sys.argv[1]))["instantiate_ms"]
assert abs(t["median"] - (t["min"] + t["max"]) / 2) <= 0.0011, t
EOF2
      echo "ok   gpt_instantiate: the median of 2 instantiates is their mean"
    else
      echo "FAIL gpt_instantiate: the median of 2 instantiates is not their mean"
      sed 's/^/     /' "$dir/inst.json"
      failed=1
    fi
  else
    echo "skip gpt_instantiate: not built (REPRISE_BENCH off)"
  fi

  # the benchmark's PyTorch step against the references reprise's tests
  # hold reprise to (test_gpt.c), where PyTorch is installed
  if python3 -c 'import torch' >/dev/null 2>&1; then
    want 0 "torch_gpt.py --check: PyTorch's step is the reference's" \
      python3 "$T" --check --device cpu --threads 1
    grep -c '^ok ' "$dir/out" | grep -qx 4 ||
      { echo "FAIL torch_gpt.py --check: not 4 ok lines"; failed=1; }
    # a reference whose first loss is 1% off (gpt_odd.bin: 3 steps, 9
    # tokens: the losses start at byte 60 + 4 x (3 + 2 x 9))
    python3 - "$SRC/test/fixtures/gpt_odd.bin" "$dir/odd.bin" <<'EOF2'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
(loss,) = struct.unpack_from("<f", b, 144)
struct.pack_into("<f", b, 144, loss * 1.01)
open(sys.argv[2], "wb").write(b)
EOF2
    want 1 "torch_gpt.py --check: a reference it does not match" \
      python3 "$T" --check --device cpu --threads 1 --attn sdpa \
      --fixture "$dir/odd.bin"
    grep -q '^FAIL odd.bin .*step 1: loss' "$dir/out" ||
      { echo "FAIL torch_gpt.py --check: the mismatch not named"; failed=1; }
    want 1 "torch_gpt.py --check --clip 0.5: not the reference's AdamW" \
      python3 "$T" --check --device cpu --threads 1 --clip 0.5
  else
    echo "skip torch_gpt.py --check: PyTorch not importable"
  fi

  # torch_decode.py: its usage errors before torch is imported (the fake
  # torch exits 99), 77 without PyTorch, and where PyTorch is installed
  # the greedy bytes of reprise generate and of the PyTorch decode of the
  # same checkpoint compared (a checkpoint of context 8 trained 20 steps:
  # 40 tokens wrap the context several times; seconds)
  D="$SRC/bench/torch_decode.py"
  # shellcheck disable=SC2317 # run through want
  pyd() {
    PYTHONPATH="$dir/fake" PYTHONDONTWRITEBYTECODE=1 python3 "$D" "$@"
  }
  want 0 "torch_decode.py --help" pyd --help
  if "$REPRISE" train --model gpt --layers 1 --heads 2 --width 16 \
    --context 8 --batch 2 --iters 20 --sample 0 --text "$SRC/README.md" \
    --save-weights "$dir/dec.ckpt" >"$dir/out" 2>&1; then
    W="$dir/dec.ckpt"
    want 2 "torch_decode.py without --weights" pyd --reprise "$REPRISE"
    want 2 "torch_decode.py --weights missing" \
      pyd --reprise "$REPRISE" --weights "$dir/missing.ckpt"
    want 2 "torch_decode.py --weights not a checkpoint" \
      pyd --reprise "$REPRISE" --weights "$SRC/test/fixtures/gpt_tiny.bin"
    grep -q 'not a reprise checkpoint' "$dir/out" ||
      { echo "FAIL torch_decode.py --weights not a checkpoint: not said"; failed=1; }
    head -c 5000 "$W" >"$dir/cut.ckpt"
    want 2 "torch_decode.py --weights truncated" \
      pyd --reprise "$REPRISE" --weights "$dir/cut.ckpt"
    want 2 "torch_decode.py --tokens 0" pyd --reprise "$REPRISE" --weights "$W" --tokens 0
    want 2 "torch_decode.py --tokens 1000001" \
      pyd --reprise "$REPRISE" --weights "$W" --tokens 1000001
    want 2 "torch_decode.py --prompt ''" pyd --reprise "$REPRISE" --weights "$W" --prompt ''
    want 2 "torch_decode.py --prompt a byte outside the vocabulary" \
      pyd --reprise "$REPRISE" --weights "$W" --prompt "$(printf 'a\001')"
    grep -q '0x01 (its byte at offset 1) is not in the vocabulary' "$dir/out" ||
      { echo "FAIL torch_decode.py --prompt: the byte not named"; failed=1; }
    want 2 "torch_decode.py --reprise not reprise" \
      pyd --reprise "$dir/notreprise" --weights "$W"
    want 2 "torch_decode.py --json a folder" \
      pyd --reprise "$REPRISE" --weights "$W" --json "$dir"
    want 2 "torch_decode.py --modes cudagraph on the CPU" \
      pyd --reprise "$REPRISE" --weights "$W" --device cpu --modes cudagraph
    want 77 "torch_decode.py without PyTorch" \
      env PYTHONPATH="$dir/notorch" python3 "$D" --reprise "$REPRISE" --weights "$W"
    if python3 -c 'import torch' >/dev/null 2>&1; then
      want 0 "torch_decode.py: reprise generate and PyTorch print the same greedy bytes" \
        python3 "$D" --reprise "$REPRISE" --weights "$W" --prompt 'The ' \
        --tokens 40 --repeats 1 --device cpu --json "$dir/dec.json" \
        --markdown "$dir/dec.md"
      grep -q '| pytorch eager | cpu (1) | .* | yes |' "$dir/dec.md" ||
        { echo "FAIL torch_decode.py: no 'same bytes' row in --markdown"; failed=1; }
      # a reprise whose output has one byte changed: exit 1, the first
      # difference named, the rows written all the same
      mkdir "$dir/bin3"
      cat >"$dir/bin3/reprise" <<EOF2
#!/bin/sh
[ "\$1" = generate ] || exec "$REPRISE" "\$@"
"$REPRISE" "\$@" | python3 -c 'import sys
b = bytearray(sys.stdin.buffer.read())
b[9] ^= 1
sys.stdout.buffer.write(b)'
EOF2
      chmod +x "$dir/bin3/reprise"
      want 1 "torch_decode.py: outputs that differ" \
        python3 "$D" --reprise "$dir/bin3/reprise" --weights "$W" \
        --prompt 'The ' --tokens 40 --repeats 1 --device cpu --json "$dir/dec.json"
      if ! grep -q 'pytorch eager: differs: first difference at output byte 9 (generated token 5' "$dir/out" ||
        ! grep -q '"same_bytes": false' "$dir/dec.json"; then
        echo "FAIL torch_decode.py: the difference not named, or no rows"
        failed=1
      fi
    else
      echo "skip torch_decode.py greedy bytes: PyTorch not importable"
    fi
  else
    echo "FAIL torch_decode.py: reprise train --save-weights failed"
    tail -3 "$dir/out" | sed 's/^/     /'
    failed=1
  fi

  # report.py: the tables' labels say what the rows measure, and the text
  # under the generated tables is the one docs/performance.md carries. A
  # stream row's host time is every kernel's launch call in a run (10 here),
  # not one launch; a static row's setup is the schedule's build.
  mkdir "$dir/rep"
  printf 'commit=fake\ndate=d\ncpu=c\ngpu=g\nbuild=b\nload=\nruns=1\nquick=0\n' \
    >"$dir/rep/machine"
  for s in dag dist gpu-bench; do echo "reprise bench" >"$dir/rep/$s.cmd"; done
  R1='"backend": "cpu", "workers": 2, "nodes": 9, "reps": 1, "ns_per_task_median": 10'
  printf '[{"workload": "layered", "mode": "%s", %s, "setup_us": 5}]\n' eager "$R1" \
    >"$dir/rep/dag.w2.1.json"
  printf '[{"workload": "layered", "mode": "replay", %s, "setup_us": 5, "vs_static": 1},
 {"workload": "layered", "mode": "static", %s, "setup_us": 5}]\n' "$R1" "$R1" \
    >"$dir/rep/dag.w2.2.json"
  echo '[{"bench": "dist_step", "mode": "replay", "ranks": 2, "workers": 1, "us_per_step": 1}]' \
    >"$dir/rep/dist.1.json"
  echo '[{"case": "chain10", "mode": "stream", "kernels": 10, "host_ns": 20000, "e2e_ns": 30000, "lat_ns": 40000}]' \
    >"$dir/rep/gpu-bench.1.json"
  want 0 "report.py a section of each kind" \
    python3 "$SRC/bench/report.py" --dir "$dir/rep" --base "$dir/rep/none.md" --out "$dir/rep/p.md"
  para() { # para START FILE: the line of FILE that starts with START
    grep -F -- "$1" "$2" | grep -v '^|' | head -1
  }
  if ! grep -q '^| case | mode | kernels | host µs per run |' "$dir/rep/p.md" ||
    grep -q 'per launch' "$dir/rep/p.md" ||
    ! grep -q '| chain10 | stream | 10 | 20.00 |' "$dir/rep/p.md" ||
    ! grep -q 'building the schedule and starting its threads (static)' "$dir/rep/p.md" ||
    [ "$(para 'ns per task: a run' "$dir/rep/p.md")" != "$(para 'ns per task: a run' "$SRC/docs/performance.md")" ] ||
    [ "$(para 'Per run, the slowest rank' "$dir/rep/p.md")" != "$(para 'Per run, the slowest rank' "$SRC/docs/performance.md")" ]; then
    echo "FAIL report.py: a label that does not say what is measured, or text other than docs/performance.md's"
    grep -E 'host|ns per task: a run|Per run, the slowest' "$dir/rep/p.md" | cut -c1-160 | sed 's/^/     /'
    failed=1
  else
    echo "ok   report.py labels and text"
  fi

  # ncu_step.py: the median of an even number of graph launches is the
  # mean of the middle two (10, 20, 30, 40 us: 25, not 30)
  H='"ID","API","Process","Name","Device","CC","Ctx","Stream","Kernel Name","Metric Name","Metric Unit","Metric Value"'
  { echo "$H"
    for k in a b a b; do
      echo "\"1\",\"\",\"\",\"\",\"0\",\"9.0\",\"1\",\"7\",\"$k\",\"gpu__time_duration.sum\",\"us\",\"5\""
    done; } >"$dir/ncu_node.csv"
  { echo "$H"
    for us in 40 10 30 20; do
      echo "\"1\",\"\",\"\",\"\",\"0\",\"9.0\",\"1\",\"7\",\"graph\",\"gpu__time_duration.sum\",\"us\",\"$us\""
    done; } >"$dir/ncu_graph.csv"
  if python3 "$SRC/bench/ncu_step.py" "$dir/ncu_node.csv" "$dir/ncu_graph.csv" \
    >"$dir/ncu.out" 2>&1 &&
    grep -q '4 graph launches, median 25.0 us (min 10.0, max 40.0)' "$dir/ncu.out"; then
    echo "ok   ncu_step.py the median of an even number of graph launches"
  else
    echo "FAIL ncu_step.py the median of an even number of graph launches: not 25.0"
    sed 's/^/     /' "$dir/ncu.out"
    failed=1
  fi
fi

[ "$failed" = 0 ] && echo "all bench script checks passed"
exit "$failed"
