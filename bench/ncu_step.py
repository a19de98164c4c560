#!/usr/bin/env python3
"""bench/ncu_step.py NODE_CSV [GRAPH_CSV] — reads Nsight Compute's CSV
(`ncu --metrics gpu__time_duration.sum --csv`, bench/gpu_gpt.sh's profile
step) of `reprise train --model gpt --iters 3`.

NODE_CSV (--graph-profiling node): every kernel's device time. The kernels
of one replayed step are the longest run of kernels that repeats at once
(the step's replays; the second, warm one is taken); prints them by total
time and their sum.
GRAPH_CSV (--graph-profiling graph): each graph launch's device time, from
its first kernel's start to its last kernel's end. The device is idle for
1 - sum(kernels of a step) / (graph time of a step) of a replayed step.
"""
import collections
import csv
import statistics
import sys


def rows_of(path):
    rows = [r for r in csv.reader(open(path, errors="replace")) if len(r) > 10]
    if not rows:
        return []
    h = rows[0]
    ki, vi, ui = h.index("Kernel Name"), h.index("Metric Value"), h.index("Metric Unit")
    out = []
    for r in rows[1:]:
        try:
            v = float(r[vi].replace(",", ""))
        except ValueError:
            continue
        unit = r[ui]
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0,
                 "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
        us = v * scale.get(unit, 1.0)
        out.append((r[ki], us))
    return out


def period(names):
    """(i, p): the longest p (and its first i) with names[i:i+p] equal to
    names[i+p:i+2p] and not itself a repeat of a shorter run: a step
    replayed at least twice in a row (an evaluation's batches repeat a
    shorter forward pass)."""
    codes = {}
    s = "".join(chr(0x100 + codes.setdefault(k, len(codes))) for k in names)
    n = len(s)
    for p in range(n // 2, 0, -1):
        for i in range(0, n - 2 * p + 1):
            b = s[i:i + p]
            if b == s[i + p:i + 2 * p] and (b + b).find(b, 1) == p:
                return i, p
    return 0, 0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    node = rows_of(sys.argv[1])
    if not node:
        print(f"{sys.argv[1]}: no rows")
        return 1
    names = [k for k, _ in node]
    i, p = period(names)
    if p == 0:
        print(f"{sys.argv[1]}: {len(node)} kernels, no repeating step found")
        step = node
    else:
        step = node[i + p:i + 2 * p]  # the second of the repeats: warm
    total = sum(us for _, us in step)
    by = collections.OrderedDict()
    for k, us in step:
        a = by.setdefault(k.split("(")[0][:70], [0, 0.0])
        a[0] += 1
        a[1] += us
    print(f"== {sys.argv[1]}: one step, {len(step)} kernels, sum {total:.1f} us")
    for k, (c, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:20]:
        print(f"  {us:9.1f} us {100 * us / total:5.1f}%  x{c:<4d} {k}")
    if len(sys.argv) > 2:
        g = sorted(us for k, us in rows_of(sys.argv[2]) if k == "graph")
        if g:
            med = statistics.median(g)
            print(f"== {sys.argv[2]}: {len(g)} graph launches, median "
                  f"{med:.1f} us (min {g[0]:.1f}, max {g[-1]:.1f})")
            if med > 0:
                print(f"device idle share of a replayed step: "
                      f"{max(0.0, 1 - total / med) * 100:.1f}% "
                      f"(its kernels {total:.1f} us of the graph's {med:.1f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
