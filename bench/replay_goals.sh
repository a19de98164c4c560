#!/bin/sh
# bench/replay_goals.sh — the CPU replay goals, measured: runs
# `reprise bench --mode replay --backend cpu --workers W --json ...` RUNS
# times per worker count and prints, per row (workload x replay/static),
# the min, median and max over the invocations of each invocation's median
# ns per task, of the replay's ratio to the static schedule (x_static) and,
# for tiny, of the share of the ideal reached (%ideal), next to the goal,
# under a first line naming the binary, its `version` (the commit), the
# date, the CPU, the GPU and the load average.
#
#   bench/replay_goals.sh [-n RUNS] [-b REPRISE] [-k] [WORKERS...]
#   bench/replay_goals.sh -h | --help
#
#   -n RUNS     invocations per worker count (default 10)
#   -b REPRISE  the reprise binary (default ./build-rel/reprise, then
#               ./build/reprise); it must answer `REPRISE version`
#   -k          keep the JSON files (their folder is printed)
#   WORKERS     worker counts, each 1..128 (default: 2 8)
#
# Goals: layered <= 2x the static schedule, chain and forkjoin
# <= 1.2x, tiny >= 95% of the ideal at 2 workers and >= 85% at 8, and no
# bimodality between invocations (compare min and max). Build with
#   cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release && \
#   cmake --build build-rel -j
# Only awk and POSIX sh are needed. On a machine with fewer cores than
# workers + 1 the figures measure oversubscription, not the scheduler.
# Exit 0 done (goals met or not), 1 a benchmark failed, 2 usage.
set -eu

runs=10
bin=
keep=0
. "$(dirname "$0")/args.sh" # die, posint, worker_count, help, need_reprise, stamp
[ "${1:-}" != --help ] || help
while getopts hn:b:k opt; do
  case $opt in
  h) help ;;
  n) runs=$OPTARG ;;
  b) bin=$OPTARG; [ -n "$bin" ] || die "-b: an empty file name" ;;
  k) keep=1 ;;
  *)
    echo "usage: $0 [-n RUNS] [-b REPRISE] [-k] [WORKERS...]" >&2
    exit 2
    ;;
  esac
done
shift $((OPTIND - 1))
posint "$runs" || die "-n wants a positive count, not '$runs'"
[ $# -gt 0 ] || set -- 2 8
for w in "$@"; do
  worker_count "$w" || die "workers: want counts in 1..128, not '$w'"
done
if [ -z "$bin" ]; then
  for b in ./build-rel/reprise ./build/reprise; do
    if [ -x "$b" ]; then
      bin=$b
      break
    fi
  done
fi
need_reprise "$bin"

dir=$(mktemp -d "${TMPDIR:-/tmp}/replay_goals.XXXXXX")
[ "$keep" = 1 ] || trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')
echo "$bin: $(stamp)"

for w in "$@"; do
  i=1
  while [ "$i" -le "$runs" ]; do
    if ! "$bin" bench --mode replay --backend cpu --workers "$w" --json "$dir/w$w.$i.json" \
      >"$dir/w$w.$i.out" 2>"$dir/w$w.$i.err"; then
      echo "$0: invocation $i at $w workers failed:" >&2
      cat "$dir/w$w.$i.err" >&2
      exit 1
    fi
    if [ ! -s "$dir/w$w.$i.json" ]; then
      echo "$0: invocation $i at $w workers wrote no JSON rows" >&2
      exit 1
    fi
    i=$((i + 1))
  done
  [ "$cores" = '?' ] || [ "$w" -lt "$cores" ] ||
    echo "note: $w workers and the host thread on $cores CPUs: they share cores"
  # One JSON object per line (bench/bench_util.c writes them so). awk
  # reads the files itself: no pipe to hide a failure from set -e.
  awk -v workers="$w" -v runs="$runs" '
    function num(key,   m) {
      if (match($0, "\"" key "\": [-+0-9.eE]+")) {
        m = substr($0, RSTART, RLENGTH)
        sub(/.*: /, "", m)
        return m + 0
      }
      return ""
    }
    function str(key,   m) {
      if (match($0, "\"" key "\": \"[^\"]*\"")) {
        m = substr($0, RSTART, RLENGTH)
        sub(/.*: "/, "", m)
        sub(/"$/, "", m)
        return m
      }
      return ""
    }
    function add(k, v) {
      if (v == "") return
      n[k]++
      val[k, n[k]] = v
    }
    # min, median and max of val[k, 1..n[k]] (insertion sort: mawk has no
    # asort)
    function stats(k,   i, j, t, c, med) {
      c = n[k]
      for (i = 2; i <= c; i++) {
        t = val[k, i]
        for (j = i - 1; j >= 1 && val[k, j] > t; j--) val[k, j + 1] = val[k, j]
        val[k, j + 1] = t
      }
      med = c % 2 ? val[k, (c + 1) / 2] : (val[k, c / 2] + val[k, c / 2 + 1]) / 2
      smin = val[k, 1]; smed = med; smax = val[k, c]
      return c
    }
    /"workload":/ {
      wl = str("workload"); md = str("mode")
      if (md != "replay" && md != "static") next
      k = wl SUBSEP md
      if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
      add(k SUBSEP "ns", num("ns_per_task_median"))
      add(k SUBSEP "x", num("vs_static"))
      add(k SUBSEP "pct", num("pct_of_ideal"))
      if (wl == "tiny") ideal[k] = num("ideal_ns_per_task")
    }
    END {
      if (!nk) {
        print "replay_goals.sh: no replay or static rows in the JSON" > "/dev/stderr"
        exit 1
      }
      printf "\n%d workers, %d invocations (each: the median of its 5 runs)\n", workers, runs
      printf "%-9s %-6s %27s %21s %21s  %s\n", "workload", "mode",
             "ns/task min / med / max", "x_static min/med/max",
             "%ideal min/med/max", "goal (on the medians)"
      for (o = 1; o <= nk; o++) {
        k = order[o]; split(k, p, SUBSEP); wl = p[1]; md = p[2]
        stats(k SUBSEP "ns")
        line = sprintf("%-9s %-6s %8.1f / %7.1f / %7.1f", wl, md, smin, smed, smax)
        xs = "-"; xmed = ""
        if (n[k SUBSEP "x"]) {
          stats(k SUBSEP "x"); xmed = smed
          xs = sprintf("%5.2f / %5.2f / %5.2f", smin, smed, smax)
        }
        ps = "-"; pmed = ""
        if (n[k SUBSEP "pct"]) {
          stats(k SUBSEP "pct"); pmed = smed
          ps = sprintf("%5.1f / %5.1f / %5.1f", smin, smed, smax)
        }
        goal = ""
        if (md == "replay") {
          lim = wl == "layered" ? 2.0 : (wl == "chain" || wl == "forkjoin") ? 1.2 : 0
          if (lim && xmed != "")
            goal = sprintf("x_static <= %.1f: %s", lim, xmed <= lim ? "met" : "NOT met")
          if (wl == "tiny" && pmed != "") {
            want = workers <= 2 ? 95 : 85
            goal = sprintf("%%ideal >= %d: %s (ideal %.1f ns/task)", want,
                           pmed >= want ? "met" : "NOT met", ideal[k])
          }
        }
        printf "%s %21s %21s  %s\n", line, xs, ps, goal
      }
    }' "$dir"/w"$w".*.json
done
[ "$keep" = 0 ] || echo "JSON and tables kept in $dir"
