#!/usr/bin/env python3
"""bench/ncu_step.py NODE_CSV [GRAPH_CSV] — reads Nsight Compute's CSV
(`ncu --metrics gpu__time_duration.sum --csv`, bench/gpu_gpt.sh's profile
step) of `reprise train --model gpt --iters 3`.

NODE_CSV (--graph-profiling node): every kernel's device time. The kernels
of one replayed step are the last full repeat of the step's kernel sequence
(its length given by the recorded step's kernel count when found, else the
most common repeat); prints the step's kernels by total time and their sum.
GRAPH_CSV (--graph-profiling graph): each graph launch's device time, from
its first kernel's start to its last kernel's end. The device is idle for
1 - sum(kernels of a step) / (graph time of a step) of a replayed step.
"""
import collections
import csv
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
        us = v / 1000 if unit == "nsecond" else v * 1000 if unit == "msecond" else \
            v * 1e6 if unit == "second" else v
        out.append((r[ki], us))
    return out


def period(names):
    """The shortest p such that the tail of names repeats with period p at
    least twice."""
    n = len(names)
    for p in range(1, n // 2 + 1):
        if names[n - p:] == names[n - 2 * p:n - p]:
            return p
    return 0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    node = rows_of(sys.argv[1])
    if not node:
        print(f"{sys.argv[1]}: no rows")
        return 1
    names = [k for k, _ in node]
    p = period(names)
    if p == 0:
        print(f"{sys.argv[1]}: {len(node)} kernels, no repeating step found")
        step = node
    else:
        step = node[len(node) - p:]
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
        g = rows_of(sys.argv[2])
        if g:
            last = g[-1][1]
            print(f"== {sys.argv[2]}: {len(g)} rows; graph launches (us): "
                  + ", ".join(f"{us:.1f}" for _, us in g[-6:]))
            if last > 0:
                print(f"device idle share of the last graph: "
                      f"{max(0.0, 1 - total / last) * 100:.1f}% "
                      f"(kernels {total:.1f} us of {last:.1f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
