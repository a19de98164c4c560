# bench/args.sh — argument checks the benchmark scripts share (POSIX sh;
# sourced: `. "$(dirname "$0")/args.sh"`). Each failure is a usage error:
# a message naming the script, exit 2.

# die MESSAGE...: the message on stderr, exit 2.
die() {
  echo "$0: $*" >&2
  exit 2
}

# posint VALUE: true when VALUE is a positive decimal integer.
posint() {
  case $1 in '' | *[!0-9]*) return 1 ;; esac
  [ "$1" -gt 0 ] 2>/dev/null
}

# worker_count VALUE: true when VALUE is a worker count `reprise bench
# --workers` takes (1..128).
worker_count() {
  posint "$1" && [ "$1" -le 128 ] 2>/dev/null
}

# help: the script's header comment (line 2 up to the first line that is
# not a comment), exit 0.
help() {
  awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"
  exit 0
}

# need_reprise BIN: BIN is an executable file that answers `BIN version`
# with a "reprise ..." line; that line in $reprise_version.
need_reprise() {
  [ -n "$1" ] || die "no reprise binary (build one: make build, or pass -b)"
  if [ ! -f "$1" ] || [ ! -x "$1" ]; then
    die "$1 is not an executable file (pass -b REPRISE)"
  fi
  reprise_version=$("$1" version 2>/dev/null | grep -m1 '^reprise ' || true)
  [ -n "$reprise_version" ] ||
    die "$1 is not reprise ('$1 version' prints no 'reprise ...' line)"
}

# stamp: the line a figure needs to be quoted: the binary's `version` line
# ($reprise_version, from need_reprise), the date, the CPU model and online
# CPUs, the GPU where nvidia-smi lists one, and the load average.
stamp() {
  _cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null)
  _gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
  echo "$reprise_version; $(date -u '+%Y-%m-%d %H:%M UTC');" \
    "CPU: ${_cpu:-$(uname -m)}, $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') online;" \
    "GPU: ${_gpu:-none};" \
    "load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
}

# ctest_stop LIMIT: the time of day for ctest's --stop-time that stops
# every test still running 10 s before LIMIT seconds from now (half of
# LIMIT where LIMIT is under 20): ctest itself then ends a test that
# hangs, names it "(Timeout)" with its output and prints its summary.
# Every test's TIMEOUT property (900 s, test/CMakeLists.txt) wins over
# ctest's --timeout, so without a stop time a test that hangs runs until
# the `timeout` around ctest kills it: no summary, the test not named.
# The time is UTC: run ctest with TZ=UTC (ctest reads a time of day in
# whole-hour zones only). ctest reads a time of day earlier than now as
# tomorrow's, so a stop time past midnight (UTC) holds too. Nothing where
# LIMIT is a day or more, or `date` fails: there the limit alone stops
# ctest. Use:
#   at=$(ctest_stop "$limit"); ... ctest ... ${at:+--stop-time "$at"}
ctest_stop() {
  _margin=10
  [ "$1" -lt 20 ] && _margin=$(($1 / 2))
  [ "$1" -lt 86400 ] || return 0
  _now=$(date -u +%s 2>/dev/null) || return 0
  date -u -d "@$((_now + $1 - _margin))" +%H:%M:%S 2>/dev/null
  return 0
}
