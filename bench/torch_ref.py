#!/usr/bin/env python3
"""The reference for `reprise train` on a GPU: the same MLP step (gather the
batch's rows, linear+relu layers, softmax cross-entropy, backward, SGD with
momentum) in PyTorch, eager and captured whole into one torch.cuda.CUDAGraph.
Prints per-iteration times: latency (one step, then synchronize) and back to
back (N steps, then synchronize, divided by N), medians of 5 runs, and the
GPU work items (kernels, memsets and copies) one step issues, counted by
PyTorch's profiler on one eager step (the captured graph replays the same
work as one launch).

  python3 bench/torch_ref.py [--hidden 64,64] [--batch 256] [--iters 500]
                             [--json FILE]

--json writes the two rows as a JSON array (bench/report.sh reads it).
Needs PyTorch with CUDA; not part of the build or the tests. Exit 0
measured, 1 --json cannot be written, 2 bad usage, 77 skipped: no PyTorch
or no CUDA device (one line on stderr; 77 is the tests' "skipped")."""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outfile import out_path_error, write_whole  # noqa: E402 (bench/outfile.py)

torch = None  # imported once the options are checked


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: wants a positive integer")
    return v


def positive_list(text):
    try:
        return [positive_int(x) for x in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: wants a comma list of positive integers") from None


def file_name(text):
    """An argparse type: a file name, not '' (an unset shell variable
    would otherwise read as the option not given)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty file name")
    return text


def die(msg, status):
    print(f"torch_ref.py: {msg}", file=sys.stderr)
    sys.exit(status)


def main():
    global torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", default=[64, 64], type=positive_list)
    ap.add_argument("--batch", type=positive_int, default=256)
    ap.add_argument("--features", type=positive_int, default=2)
    ap.add_argument("--classes", type=positive_int, default=3)
    ap.add_argument("--samples", type=positive_int, default=4096)
    ap.add_argument("--iters", type=positive_int, default=500)
    ap.add_argument("--json", default=None, type=file_name)
    a = ap.parse_args()
    if a.batch > a.samples:
        ap.error(f"--batch {a.batch} is more than --samples {a.samples}")
    if a.json and out_path_error(a.json):
        ap.error(f"--json {a.json}: {out_path_error(a.json)}")
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure: no torch
        die(f"skipped: PyTorch not importable ({type(e).__name__}: {e})", 77)
    if not torch.cuda.is_available():
        die(f"skipped: PyTorch {torch.__version__} sees no CUDA device "
            "(this reference needs one)", 77)
    dev = torch.device("cuda")
    torch.manual_seed(1)
    widths = [a.features] + a.hidden + [a.classes]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data_x = torch.randn(a.samples, a.features, device=dev)
    data_y = torch.randint(0, a.classes, (a.samples,), device=dev)
    nb = a.samples // a.batch
    index = torch.zeros(1, dtype=torch.long, device=dev)  # batch number
    ar = torch.arange(a.batch, device=dev)

    def step():
        rows = index * a.batch + ar
        x = data_x.index_select(0, rows)
        y = data_y.index_select(0, rows)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        return loss

    def timeit(fn, n):
        lat, b2b = [], []
        for _ in range(5):
            t = []
            for i in range(50):
                index.fill_(i % nb)
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                t.append(time.perf_counter() - t0)
            lat.append(statistics.median(t))
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(n):
                fn()
            torch.cuda.synchronize()
            b2b.append((time.perf_counter() - t0) / n)
        return statistics.median(lat) * 1e6, statistics.median(b2b) * 1e6

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(5):
            step()
    torch.cuda.current_stream().wait_stream(s)
    kernels = count_gpu_work(step)
    e_lat, e_b2b = timeit(step, a.iters)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    g_lat, g_b2b = timeit(g.replay, a.iters)
    name = torch.cuda.get_device_name()
    model = '-'.join(map(str, widths))
    print(f"# PyTorch {torch.__version__} on {name}; MLP {model} "
          f"batch {a.batch}; {kernels} GPU work items per step")
    print(f"torch-eager  latency_us {e_lat:8.1f}  back_to_back_us {e_b2b:8.1f}")
    print(f"torch-graph  latency_us {g_lat:8.1f}  back_to_back_us {g_b2b:8.1f}")
    if a.json:
        rows = [{"impl": impl, "model": model, "batch": a.batch,
                 "latency_us": round(lat, 3), "back_to_back_us": round(b2b, 3),
                 "kernels_per_step": kernels, "torch": torch.__version__,
                 "device": name}
                for impl, lat, b2b in (("torch-eager", e_lat, e_b2b),
                                       ("torch-graph", g_lat, g_b2b))]
        try:
            write_whole(a.json, json.dumps(rows, indent=1) + "\n")
        except OSError as e:
            die(f"cannot write {a.json}: {e.strerror or e}", 1)


def count_gpu_work(step):
    """The GPU activities (kernels, memsets, copies) one eager step issues,
    as PyTorch's profiler (CUPTI) records them."""
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA)


if __name__ == "__main__":
    main()
