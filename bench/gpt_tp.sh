#!/bin/sh
# bench/gpt_tp.sh — tensor parallelism on the GPT (docs/distributed.md),
# measured: runs `reprise train --model gpt --json ...` in RUNS rounds, each
# round one run of every layout (procs/tp: 1/1, 2/2, 2/1, 4/4, 4/2 by
# default) in turn, and prints per layout the min and median over the
# rounds of each run's median step time, the median over the rounds of the
# ratio to the same round's first layout (so that a machine whose speed
# drifts between rounds affects both sides of each ratio alike), the
# step's kernels, copies and communication ops (rank 0's), and the bytes
# per processor (parameter state / all), under a first line naming the
# binary, its `version` (the commit), the date, the CPU, the GPU and the
# load average.
#
#   bench/gpt_tp.sh [-n RUNS] [-b REPRISE] [-B BACKEND] [-w WIDTH] [LAYOUTS...]
#   bench/gpt_tp.sh -h | --help
#
#   -n RUNS     rounds (default 3)
#   -b REPRISE  the reprise binary (default ./build-rel/reprise, then
#               ./build/reprise); it must answer `REPRISE version`
#   -B BACKEND  cpu (CPU workers, default) or cuda (logical GPUs of one
#               device: --procs P makes P of them)
#   -w WIDTH    model width (default 512; 2 layers, 8 heads, context 64,
#               batch 8, 8 iterations)
#   LAYOUTS     PROCS/TP pairs (default: 1/1 2/2 2/1 4/4 4/2); the first is
#               the ratios' base. RANKSxPROCS/TP runs `$MPIEXEC -n RANKS
#               reprise train --dist` (MPIEXEC: default mpiexec) with
#               PROCS per rank: 2x1/2 is tensor parallelism over 2 ranks of
#               one worker each, 2x1/1 data parallelism across them
#
# Goals: on 2 cores TP=2 over 2 workers <= 0.6x TP=1's step
# time; on one GPU TP=2 <= 1.15x and --procs 2 <= 1.2x --procs 1. On a
# machine with fewer idle cores than workers the figures measure
# oversubscription, not the split. Only awk and POSIX sh are needed.
# A failed run is named on stderr (layout, round, exit status) and the
# other runs go on: its layout's row counts the runs that worked, or reads
# "failed"; a round whose first layout failed gives no ratios. Exit 0 done,
# 1 a run failed, 2 usage.
set -eu

runs=3
bin=
backend=cpu
width=512
usage() {
  echo "usage: $0 [-n RUNS] [-b REPRISE] [-B BACKEND] [-w WIDTH] [LAYOUTS...]" >&2
  exit 2
}
. "$(dirname "$0")/args.sh" # die, posint, help, need_reprise, stamp
[ "${1:-}" != --help ] || help
while getopts hn:b:B:w: opt; do
  case $opt in
  h) help ;;
  n) runs=$OPTARG ;;
  b) bin=$OPTARG; [ -n "$bin" ] || die "-b: an empty file name" ;;
  B) backend=$OPTARG ;;
  w) width=$OPTARG ;;
  *) usage ;;
  esac
done
shift $((OPTIND - 1))
posint "$runs" || die "-n wants a positive count, not '$runs'"
posint "$width" || die "-w wants a positive width, not '$width'"
[ $# -gt 0 ] || set -- 1/1 2/2 2/1 4/4 4/2
for layout in "$@"; do
  case $layout in
  */*) procs=${layout%/*} tp=${layout#*/} ;;
  *) procs='' tp='' ;;
  esac
  case $procs in
  *x*) ranks=${procs%%x*} procs=${procs#*x} ;;
  *) ranks=1 ;;
  esac
  if ! posint "$ranks" || ! posint "$procs" || ! posint "$tp"; then
    die "layout '$layout': want PROCS/TP or RANKSxPROCS/TP (positive integers, e.g. 2/2 or 2x1/2)"
  fi
done
if [ -z "$bin" ]; then
  bin=./build-rel/reprise
  [ -x "$bin" ] || bin=./build/reprise
fi
need_reprise "$bin"
dir=$(mktemp -d "${TMPDIR:-/tmp}/rp_gpt_tp.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# One JSON field's value (numbers and one-line arrays).
field() {
  sed -n "s/^ *\"$2\": \\(.*\\)\$/\\1/p" "$1" | sed 's/,$//'
}

echo "$bin: $(stamp)"
printf '%-7s %10s %10s %7s %7s %7s %5s  %s\n' layout "min us" "median us" \
  "x $1" kernels copies comm "bytes per processor (state / all)"
status=0
i=0
while [ "$i" -lt "$runs" ]; do
  first= # the round's first layout's time, the ratios' base
  k=0
  for layout in "$@"; do
    k=$((k + 1))
    procs=${layout%/*}
    tp=${layout#*/}
    j="$dir/$procs.$tp.json"
    case $procs in
    *x*) set_mpi="${MPIEXEC:-mpiexec} -n ${procs%x*}" dist=--dist ;;
    *) set_mpi= dist= ;;
    esac
    rm -f "$j"
    st=0
    # shellcheck disable=SC2086 # the mpiexec prefix splits into words
    $set_mpi "$bin" train --model gpt --backend "$backend" $dist \
      --procs "${procs#*x}" --tp "$tp" \
      --layers 2 --heads 8 --width "$width" --context 64 --batch 8 \
      --iters 8 --log-every 100000 --sample 0 --json "$j" >/dev/null || st=$?
    us=$(field "$j" iter_us_median 2>/dev/null || true)
    if [ "$st" -ne 0 ] || [ -z "$us" ]; then
      echo "$0: $layout, round $((i + 1)): reprise train failed (exit $st)" >&2
      status=1
      continue
    fi
    cp "$j" "$dir/$procs.$tp.last.json"
    [ "$k" -gt 1 ] || first=$us
    echo "$us" >>"$dir/$procs.$tp.t"
    [ -z "$first" ] || echo "$us $first" | awk '{print $1 / $2}' >>"$dir/$procs.$tp.r"
  done
  i=$((i + 1))
done
for layout in "$@"; do
  procs=${layout%/*}
  tp=${layout#*/}
  j="$dir/$procs.$tp.last.json"
  if [ ! -s "$dir/$procs.$tp.t" ]; then
    printf '%-7s %10s\n' "$layout" failed
    continue
  fi
  # min and median (an even count: the mean of the middle two)
  stats=$(sort -g "$dir/$procs.$tp.t" | awk '{v[NR] = $1}
    END {print v[1], (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
  ratio=$(sort -g "$dir/$procs.$tp.r" 2>/dev/null | awk '{v[NR] = $1}
    END {if (!NR) print "-"; else printf "%.2f\n",
      (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
  state=$(field "$j" state_bytes_per_proc | tr -d '[] ')
  all=$(field "$j" bytes_per_proc | tr -d '[] ')
  bytes=$(echo "$state $all" | awk '{n = split($1, s, ","); split($2, a, ",");
    for (i = 1; i <= n; i++) printf "%s%.1f/%.1f MB", (i > 1 ? ", " : ""),
      s[i] / 1e6, a[i] / 1e6}')
  n=$(wc -l <"$dir/$procs.$tp.t")
  [ "$n" -eq "$runs" ] || bytes="$bytes ($n of $runs runs)"
  printf '%-7s %10.0f %10.0f %7s %7s %7s %5s  %s\n' "$layout" \
    "${stats% *}" "${stats#* }" "$ratio" "$(field "$j" kernels_per_step)" \
    "$(field "$j" copies_per_step)" "$(field "$j" comm_per_step)" "$bytes"
done
exit "$status"
