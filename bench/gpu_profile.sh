#!/usr/bin/env bash
# bench/gpu_profile.sh BUILD_DIR — per-kernel device times of the replayed
# training step under Nsight Compute (ncu), for finding the slow kernel, on
# a machine with a GPU and a CUDA build (logs under $OUT, default a new
# folder in /tmp). Exits 1 without ncu or when a profile has no rows.
# DRY=1 prints each ncu command instead of running it (no GPU needed), exit 0.
set -u
if [ $# -ne 1 ] || [ ! -x "$1/reprise" ]; then
  echo "usage: $0 BUILD_DIR (a build with the CUDA backend)" >&2
  exit 2
fi
B=$(cd "$1" && pwd)
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/rp_gpu_profile.XXXXXX")}
mkdir -p "$OUT"
. "$(dirname "$0")/dry.sh" # DRY, x
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ "$DRY" = 1 ] && NCU=${NCU:-ncu}
[ -n "$NCU" ] || { echo "$0: no ncu (Nsight Compute) found" >&2; exit 1; }
failed=0
prof() { # $1: name, rest: train options
  local name=$1
  shift
  if [ "$DRY" = 1 ]; then
    printf '%q ' timeout 150 "$NCU" --metrics gpu__time_duration.sum --csv \
      --graph-profiling node "$B/reprise" train --backend cuda --iters 3 \
      --log-every 1000 "$@" | sed 's/ $//'
    echo
    return
  fi
  timeout 150 "$NCU" --metrics gpu__time_duration.sum --csv \
    --graph-profiling node "$B/reprise" train --backend cuda --iters 3 \
    --log-every 1000 "$@" >"$OUT/ncu-$name.csv" 2>"$OUT/ncu-$name.err"
  echo "== $name: kernel, calls, mean us (last replay's kernels)"
  python3 - "$OUT/ncu-$name.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("no rows"); sys.exit(1)
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
t = collections.OrderedDict()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")); v = v / 1000 if r[ui] == "nsecond" else v * 1000 if r[ui] == "msecond" else v
    t.setdefault(r[ki][:60], []).append(v)
tot = 0
for k, v in t.items():
    print(f"{k:60s} {len(v):4d} {sum(v)/len(v):8.2f}")
    tot += sum(v) / len(v) * (len(v) / 3 if len(v) >= 3 else 1)
print(f"sum of means x calls/3: {tot:.1f} us")
PY
  [ $? -eq 0 ] || failed=1
}
prof small --procs 1
prof big --procs 1 --hidden 256,256 --batch 1024
[ "$DRY" = 1 ] && exit 0
echo "logs: $OUT"
exit "$failed"
