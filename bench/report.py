#!/usr/bin/env python3
"""bench/report.py — the tables of docs/performance.md, from the JSON rows
bench/report.sh collected (run by it; standard library only).

  python3 bench/report.py --dir DIR --base FILE --out FILE

DIR holds `machine` (the stamp's fields), SECTION.cmd (the commands a
section ran) and the JSON files, named SECTION.<...>.<invocation>.json.
A section measured in DIR is written fresh; any other section keeps the
text it has in --base (with its own stamp); one neither measured nor in
--base says how to measure it. Exit 0 written, 1 an input that cannot be
read or --out that cannot be written (one line on stderr; --out is
written whole or not at all), 2 bad usage (a --dir that is not a folder,
an --out whose folder is missing or not writable)."""
import argparse
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outfile import out_path_error, write_whole  # noqa: E402 (bench/outfile.py)

# (name, title, measured where): the sections in the order they appear
SECTIONS = [
    ("dag", "DAG workloads: replay, eager and a hand-written static schedule",
     "any machine"),
    ("dag-many-cores", "DAG workloads at 2 and 8 workers, replay and static",
     "a machine with 10 or more CPUs"),
    ("hop", "One dependent hop between two workers", "any machine"),
    ("xfer", "Planned copies against memcpy", "any machine"),
    ("build", "Building and instantiating large graphs", "any machine"),
    ("train-cpu", "The training step on the CPU: replay against eager",
     "any machine"),
    ("dist", "Several processes: the replayed step and all-reduce under MPI",
     "a machine with `mpiexec` and a build with MPI"),
    ("gpu-bench", "GPU: CUDA graphs, stream launches and reprise replays",
     "a machine where a CUDA device answers"),
    ("gpu-train", "GPU: the training step, reprise against PyTorch",
     "a machine where a CUDA device answers (PyTorch rows: with "
     "`import torch` and CUDA)"),
]

PREAMBLE = """\
# Performance

`bash bench/report.sh` measures reprise and writes this file (options:
`-n N` invocations, default 5 (3 with `--quick`); `-o FILE`; `-b REPRISE`; `-w LIST` the
worker counts of the first section's DAG workloads, comma-separated,
default 2; `--quick` for a smoke run whose figures are not measurements).
The sections dag, hop, xfer, build, train-cpu and dist are its output:
their stamps, tables and the text under the tables come from
`bench/report.py`. The sections dag-many-cores, gpu-bench and gpu-train
are written by hand from the commands in their headers; `report.sh`
replaces each with its own table when it measures it (dag-many-cores on a
machine with 10 or more CPUs, the GPU sections where a CUDA device
answers). Each section is headed by the commit the binary was built
from (`reprise version`), the date, the machine and the exact commands;
the generated ones show the minimum, median and maximum over the
invocations (each invocation's own figure is the median of its
repetitions). A section is replaced only by a fresh measurement of
itself: a run on a machine without a GPU rewrites the CPU sections and
keeps the GPU sections as they are, each with its own stamp, and a
section one of whose benchmarks failed keeps its text too (`report.sh`
names it and exits 1). Compare
figures within a section: sections stamped with different commits or
machines are not comparable with each other.

`bench/gpu_check.sh BUILD_DIR` is the pass/fail check for a GPU machine
(the GPU tests with `REPRISE_REQUIRE_GPU=1`, the GPU benchmark, the training
step); this file is the measurement. The fields and units of the rows
`reprise bench --json` writes: [bench_rows.md](bench_rows.md).
"""


def die(msg, status=1):
    """One line on stderr and exit: 1 unreadable input or unwritable
    output, 2 bad usage."""
    print(f"report.py: {msg}", file=sys.stderr)
    sys.exit(status)


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        die(f"cannot read {path}: {e.strerror or e}")
    except ValueError as e:  # not UTF-8
        die(f"cannot read {path}: {e}")


def load_rows(path):
    try:
        data = json.loads(read_text(path))
    except ValueError as e:
        die(f"{path}: not JSON ({e})")
    return data if isinstance(data, list) else [data]


def files(d, sec, middle="*"):
    """{invocation: path} for SECTION.<middle>.<i>.json (or SECTION.<i>)."""
    out = {}
    pat = os.path.join(d, f"{sec}.{middle}.json") if middle else \
        os.path.join(d, f"{sec}.*.json")
    for p in glob.glob(pat):
        out[p] = load_rows(p)
    return out


def mmm(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "—"
    if len(vals) == 1:
        return fmt.format(vals[0])
    return (fmt.format(statistics.median(vals)) + " (" +
            fmt.format(min(vals)) + "–" + fmt.format(max(vals)) + ")")


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def num(fmt, v):
    return "—" if v is None else fmt.format(v)


def table(head, rows):
    out = ["| " + " | ".join(head) + " |",
           "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def group(rowsets, keyf):
    """{key: [row, ...]} over every invocation's rows, keys in first-seen
    order."""
    g = {}
    for rows in rowsets:
        for r in rows:
            g.setdefault(keyf(r), []).append(r)
    return g


def col(rows, k):
    return [r.get(k) for r in rows]


# ---- sections ----

def sec_dag(d, name):
    out = []
    pats = sorted(glob.glob(os.path.join(d, f"{name}.w*.json")))
    byw = {}
    for p in pats:
        w = int(re.search(r"\.w(\d+)\.", os.path.basename(p)).group(1))
        byw.setdefault(w, []).append(load_rows(p))
    if not byw:
        return None
    for w in sorted(byw):
        g = group(byw[w], lambda r: (r["workload"], r["mode"]))
        rows = []
        for (wl, mode), rs in g.items():
            eager = g.get((wl, "eager"))
            ratio = "—"
            if mode == "replay" and eager:
                e = med(col(eager, "ns_per_task_median"))
                rr = med(col(rs, "ns_per_task_median"))
                ratio = num("{:.2f}×", e / rr if e and rr else None)
            rows.append([wl, mode, rs[0].get("nodes", "—"),
                         mmm(col(rs, "ns_per_task_median"), "{:.1f}"),
                         mmm(col(rs, "vs_static"), "{:.2f}")
                         if mode == "replay" else "—",
                         ratio,
                         mmm(col(rs, "pct_of_ideal"), "{:.1f}%")
                         if wl == "tiny" else "—",
                         mmm(col(rs, "setup_us"), "{:.0f}")])
        out.append(f"{w} workers:\n")
        out.append(table(["workload", "mode", "tasks", "ns per task",
                          "replay / static", "eager / replay",
                          "share of ideal", "setup µs"], rows))
        out.append("")
    out.append(
        "ns per task: a run's time over its tasks, each invocation's median "
        "of its runs. replay: the DAG recorded once and replayed "
        "(`rp_replay`); eager: the same launches each run, dependencies "
        "inferred every time; static: a hand-written schedule of the same "
        "DAG on the same lanes (`bench/static_sched.c`: worker threads "
        "running fixed lists and waiting on per-task progress counters), "
        "the floor a replay engine is held to. replay / static is the "
        "median of each invocation's ratio; eager / replay is the eager "
        "median over the replay median. Setup: building the launch "
        "list and its instances (eager), `rp_instantiate` (replay) or "
        "building the schedule and starting its threads (static). tiny: "
        "129 tasks of about "
        "1 µs each in 16 layers; the share of the ideal is the task time "
        "spread evenly over the workers (at most 8, a layer's width: "
        "within one run no more tasks can run at once; runs in flight may "
        "overlap, so past 8 workers the share can exceed 100%) against "
        "the measured time. "
        "Workloads: chain (1,000 empty tasks in a line), forkjoin (1 + "
        "1,000 + 1), layered (16 layers of 8, 9 accesses per task + 1).")
    return "\n".join(out)


def sec_hop(d, name):
    fs = files(d, name)
    if not fs:
        return None
    g = group(fs.values(), lambda r: (r["case"], r["mode"]))
    rows = [[c, m, rs[0].get("reps", "—"), mmm(col(rs, "ns_median"), "{:,.0f}")]
            for (c, m), rs in g.items()]
    return (table(["case", "mode", "samples", "ns (median of the samples)"],
                  rows) + "\n\n" +
            "One dependent hop between two workers: the time from the "
            "producer's last store to the consumer's first instruction, "
            "measured inside the tasks. hop_spin: the consumer is spinning "
            "when the producer finishes; hop_sleep: it has gone to sleep "
            "(the producer first works 1 ms). os: the same hop between two "
            "bare threads on a word (spin) or a futex (sleep), the "
            "machine's own floor.")


def sec_xfer(d, name):
    fs = files(d, name)
    if not fs:
        return None
    g = group(fs.values(), lambda r: (r["case"], r["bytes"]))
    rows = []
    for (c, b), rs in g.items():
        size = f"{b // 1048576} MiB" if b >= 1048576 else f"{b // 1024} KiB"
        rows.append([c, size, mmm(col(rs, "planned_gbps"), "{:.1f}"),
                     mmm(col(rs, "memcpy_gbps"), "{:.1f}"),
                     mmm(col(rs, "plan_us"), "{:.2f}"),
                     mmm(col(rs, "reset_us"), "{:.4f}")])
    return (table(["case", "bytes", "planned GB/s", "memcpy GB/s",
                   "plan µs", "reset µs"], rows) + "\n\n" +
            "A copy planned once into a transfer descriptor and run, "
            "against `memcpy` of the same bytes; plan: planning and "
            "releasing a descriptor; reset: what a replay pays to reuse "
            "one.")


def sec_build(d, name):
    fs = files(d, name)
    if not fs:
        return None
    g = group(fs.values(), lambda r: (r["case"], r["n"]))
    what = {"chain": "a chain built with `rp_graph_add_task` + "
                     "`rp_graph_add_edge`",
            "instantiate": "`rp_instantiate` of that chain",
            "register": "task registrations",
            "ports": "tasks bound to a precondition and a postcondition "
                     "port, and `rp_instantiate` of them"}
    rows = [[c, f"{n:,}", what.get(c, c), mmm(col(rs, "s_median"), "{:.3f}")]
            for (c, n), rs in g.items()]
    return table(["case", "n", "what", "seconds"], rows)


TRAIN_CPU = {
    "small": "2-16-16-3, batch 32 (launch-bound)",
    "big": "128-512-512-10, batch 512 (compute-bound)",
}


def sec_train_cpu(d, name):
    rows = []
    for m, label in TRAIN_CPU.items():
        fs = files(d, name, m + ".*")
        if not fs:
            continue
        rs = [r for rows_ in fs.values() for r in rows_]
        e, r = med(col(rs, "eager_iter_us_median")), \
            med(col(rs, "replay_iter_us_median"))
        same = all(x.get("weights_bitwise_equal") for x in rs)
        rows.append([label, rs[0].get("ops_per_step", "—"),
                     mmm(col(rs, "replay_iter_us_median"), "{:.1f}"),
                     mmm(col(rs, "eager_iter_us_median"), "{:.1f}"),
                     num("{:.2f}×", e / r if e and r else None),
                     "yes" if same else "NO"])
    if not rows:
        return None
    return (table(["model (`--procs 1`)", "ops per step",
                   "replay µs/iteration", "eager µs/iteration",
                   "eager / replay", "final weights bitwise equal"], rows) +
            "\n\n" +
            "`reprise train --compare` runs the same step eagerly and "
            "replayed (the same tasks, the same kernels) and compares the "
            "final weights; µs per iteration is each run's median latency "
            "(one step, then its wait). Their ratio is the replay engine's "
            "own share: the kernels are identical on both sides.")


GPU_MODELS = {
    "small": "2-64-64-3, batch 256",
    "big": "2-256-256-3, batch 1024",
}


def sec_gpu_bench(d, name):
    fs = files(d, name)
    if not fs:
        return None
    g = group(fs.values(), lambda r: (r["case"], r["mode"]))
    rows = [[c, m, rs[0].get("kernels", "—"),
             mmm([v / 1e3 if v is not None else None
                  for v in col(rs, "host_ns")], "{:.2f}"),
             mmm([v / 1e3 if v is not None else None
                  for v in col(rs, "e2e_ns")], "{:.2f}"),
             mmm([v / 1e3 if v is not None else None
                  for v in col(rs, "lat_ns")], "{:.2f}")]
            for (c, m), rs in g.items()]
    return (table(["case", "mode", "kernels", "host µs per run",
                   "back to back µs per run", "latency µs per run"], rows) +
            "\n\n" +
            "Empty kernels in chains and a 4-stream fork-join. stream: "
            "launched one by one on streams; graph: captured once into a "
            "CUDA graph, `cudaGraphLaunch` per run; reprise: recorded once, "
            "`rp_replay` per run (one graph launch); reprise-eager: the "
            "same exec with `REPRISE_CUDA_GRAPHS=0` (ops issued one by "
            "one). host: the launch calls alone (stream: one per kernel; "
            "the others: one per run); back to back: 64 runs "
            "issued, then waited for, per run; latency: one run, then its "
            "wait. Compare back to back with back to back and latency with "
            "latency.")


def sec_gpu_train(d, name):
    rows = []
    for m, label in GPU_MODELS.items():
        lat = [r for v in files(d, name, m + ".lat.*").values() for r in v]
        if not lat:
            continue
        b2b = [r for v in files(d, name, m + ".b2b.*").values() for r in v]
        eag = [r for v in files(d, name, m + ".eager.*").values() for r in v]
        tor = [r for v in files(d, name, m + ".torch.*").values() for r in v]
        rows.append([label, "reprise replay",
                     lat[0].get("ops_per_step", "—"),
                     mmm(col(lat, "replay_iter_us_median"), "{:.1f}"),
                     mmm(col(b2b, "replay_iter_us_throughput"), "{:.1f}")])
        rows.append([label, "reprise eager (same kernels, `--compare`)",
                     eag[0].get("ops_per_step", "—") if eag else "—",
                     mmm(col(eag, "eager_iter_us_median"), "{:.1f}"),
                     "—"])
        for impl in ("torch-graph", "torch-eager"):
            rs = [r for r in tor if r.get("impl") == impl]
            if rs:
                rows.append([label, f"PyTorch {rs[0].get('torch', '')} "
                             + ("CUDA graph" if impl == "torch-graph"
                                else "eager"),
                             rs[0].get("kernels_per_step", "—"),
                             mmm(col(rs, "latency_us"), "{:.1f}"),
                             mmm(col(rs, "back_to_back_us"), "{:.1f}")])
    if not rows:
        return None
    return (table(["model (`--procs 1`)", "implementation",
                   "GPU work items per step", "latency µs/step",
                   "back to back µs/step"], rows) + "\n\n" +
            "The same model, optimizer (SGD with momentum) and batch on "
            "both sides. Latency: one step, then a wait for it (median); "
            "back to back: steps issued without waiting (reprise `--inflight "
            "16`, PyTorch N steps then one synchronize), wall time per step. "
            "Work items per step: reprise's ops per step (`rp_exec_stats`; "
            "fused kernels: bias+ReLU, softmax cross-entropy with the last "
            "bias gradient, ReLU backward with its bias gradient, one SGD "
            "kernel over every parameter; a cuBLAS GEMM op may run more than "
            "one kernel); PyTorch's kernels, memsets and "
            "copies in one eager step (its profiler), which its CUDA graph "
            "replays as one launch. A ratio between reprise replay and "
            "PyTorch's graph comes mostly from the number of kernels (the "
            "fusion), not from the replay engine; reprise eager against "
            "reprise replay (the same kernels) is the engine's own share.")


def sec_dist(d, name):
    fs = files(d, name)
    if not fs:
        return None
    rows = []
    g = group(fs.values(), lambda r: (r["bench"], r.get("mode"),
                                      r.get("bytes")))
    for (b, mode, size), rs in g.items():
        if b == "dist_step":
            rows.append([f"data-parallel step, {mode}",
                         f"{rs[0].get('ranks')} ranks x "
                         f"{rs[0].get('workers')} worker",
                         mmm(col(rs, "us_per_step"), "{:.1f}"), "—", "—"])
        elif b == "dist_allreduce":
            sz = f"{size // 1048576} MiB" if size >= 1048576 else \
                f"{size // 1024} KiB"
            rows.append([f"all-reduce {sz}, alone",
                         f"{rs[0].get('ranks')} ranks",
                         mmm(col(rs, "replay_us"), "{:.2f}"),
                         mmm(col(rs, "plain_us"), "{:.2f}"),
                         mmm(col(rs, "replay_over_plain"), "{:.2f}")])
            if all("in_step_plain_us" in r for r in rs):
                rows.append([f"all-reduce {sz}, inside a step of "
                             f"{rs[0].get('in_step')}",
                             f"{rs[0].get('ranks')} ranks",
                             mmm(col(rs, "in_step_us"), "{:.2f}"),
                             mmm(col(rs, "in_step_plain_us"), "{:.2f}"),
                             mmm(col(rs, "in_step_over_plain"), "{:.2f}")])
    return (table(["row", "ranks", "reprise replay µs", "plain MPI µs",
                   "replay / plain"], rows) + "\n\n" +
            "Per run, the slowest rank's mean per step or per all-reduce; "
            "the median of the runs. The "
            "step: a data-parallel 256 -> 256 -> 10 MLP (five all-reduces: "
            "the loss and four gradients), replayed back to back (up to 4 "
            "in flight) against the same launches eager, each step waited "
            "for: a replay row is throughput, an eager row latency. The "
            "all-reduce: a persistent all-reduce (`MPI_Allreduce_init`) "
            "replayed, against a loop of blocking `MPI_Allreduce` on the "
            "same buffer; alone: a graph of that one all-reduce, so each "
            "all-reduce also pays a whole replay (its hand-off to the "
            "worker, its completion, the host's wake-ups); inside a step: "
            "a graph of that many all-reduces of as many buffers one after "
            "another, as a step's gradients are, per all-reduce, against "
            "the blocking loop over the same buffers in turn. On a "
            "machine with fewer cores than ranks x workers the ranks share "
            "cores.")


BUILDERS = {
    "dag": sec_dag, "dag-many-cores": sec_dag, "hop": sec_hop,
    "xfer": sec_xfer, "build": sec_build, "train-cpu": sec_train_cpu,
    "dist": sec_dist, "gpu-bench": sec_gpu_bench, "gpu-train": sec_gpu_train,
}


def stamp(machine, cmds, gpu_section):
    lines = [f"commit `{machine['commit']}` · {machine['date']} · "
             f"CPU: {machine['cpu']} · GPU: {machine['gpu']} · build "
             f"{machine['build']} · {machine['runs']} invocation"
             f"{'' if machine['runs'] == '1' else 's'}" +
             (f" · load average at the start {machine['load']}"
              if machine.get("load") else "")]
    if machine.get("quick") == "1":
        lines.append("")
        lines.append("**`--quick` run: a smoke test of the script, not a "
                     "measurement (few repetitions; figures can be far "
                     "off).**")
    lines.append("")
    lines.append("```sh")
    lines += cmds
    lines.append("```")
    return "\n".join(lines)


def parse_sections(text):
    secs = {}
    for m in re.finditer(r"<!-- section: ([a-z0-9-]+) -->\n(.*?)"
                         r"<!-- end section: \1 -->", text, re.S):
        secs[m.group(1)] = m.group(2)
    return secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        die(f"--dir {a.dir}: not a directory", 2)
    why = out_path_error(a.out)
    if why:
        die(f"--out {a.out}: {why}", 2)
    machine = {}
    for line in read_text(os.path.join(a.dir, "machine")).splitlines():
        k, _, v = line.partition("=")
        machine[k] = v
    old = {}
    if os.path.exists(a.base):
        old = parse_sections(read_text(a.base))
    parts = [PREAMBLE]
    for name, title, where in SECTIONS:
        body = BUILDERS[name](a.dir, name)
        if body is not None:
            cmds = [c for c in read_text(os.path.join(a.dir, name + ".cmd"))
                    .splitlines() if c]
            text = (f"## {title}\n\n" +
                    stamp(machine, cmds, name.startswith("gpu")) +
                    "\n\n" + body + "\n")
        elif name in old:
            text = old[name]
        else:
            text = (f"## {title}\n\nNot measured yet: `bash bench/report.sh` "
                    f"measures it on {where}.\n")
        parts.append(f"<!-- section: {name} -->\n{text}"
                     f"<!-- end section: {name} -->\n")
    try:
        write_whole(a.out, "\n".join(parts))
    except OSError as e:
        die(f"cannot write {a.out}: {e.strerror or e}")


if __name__ == "__main__":
    main()
