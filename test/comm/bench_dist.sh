#!/bin/sh
# test/comm/bench_dist.sh — `reprise bench --dist --quick` under mpiexec:
# exit 0, rank 0 alone prints the table, and the JSON holds the step rows
# (replay and eager) and one all-reduce row per size, each with its keys
# and a positive time. Run by ctest (label dist):
#   bench_dist.sh REPRISE MPIEXEC NUMPROC_FLAG N
set -u
REPRISE=$1 MPIEXEC=$2 NPFLAG=$3 N=$4
dir=$(mktemp -d /tmp/rp_bench_dist_XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL $*" >&2; exit 1; }

"$MPIEXEC" "$NPFLAG" "$N" "$REPRISE" bench --dist --quick \
  --json "$dir/b.json" >"$dir/out" 2>"$dir/err" ||
  fail "exit $?: $(cat "$dir/err")"
[ "$(grep -c 'reprise bench --dist:' "$dir/out")" = 1 ] ||
  fail "the header is not printed once (rank 0 only): $(cat "$dir/out")"
grep -q "^reprise bench --dist: $N ranks" "$dir/out" ||
  fail "no '$N ranks' header: $(cat "$dir/out")"
j="$dir/b.json"
[ "$(grep -c '"bench": "dist_step", "mode": "replay"' "$j")" = 1 ] ||
  fail "replayed step row: $(cat "$j")"
[ "$(grep -c '"bench": "dist_step", "mode": "eager"' "$j")" = 1 ] ||
  fail "eager step row: $(cat "$j")"
for b in 4096 65536 1048576 16777216; do
  row=$(grep "\"bench\": \"dist_allreduce\", \"ranks\": $N, \"bytes\": $b," "$j")
  [ -n "$row" ] || fail "no all-reduce row for $b bytes: $(cat "$j")"
  for k in replay_us replay_algbw_gbps replay_busbw_gbps plain_us \
           plain_algbw_gbps plain_busbw_gbps replay_over_plain; do
    echo "$row" | grep -Eq "\"$k\": [0-9]*\.?[0-9]+" ||
      fail "$b bytes: key $k missing or not a number: $row"
  done
  echo "$row" | grep -Eq '"replay_us": 0(\.0+)?,' && fail "zero time: $row"
done
echo "ok   bench --dist under $N ranks: step and all-reduce rows"
