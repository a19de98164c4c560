#!/usr/bin/env python3
"""Per-step time of one GPT training step (nanoGPT's model: pre-LN blocks,
causal self-attention, tanh GELU, LM head tied to the token embedding; the
mean softmax cross-entropy; backward; clip_grad_norm_(1.0); AdamW with
weight decay on the matrices and embeddings), in PyTorch and in reprise, on
one machine, in one call.

PyTorch modes (each in its own child process, so that one mode's caches,
graphs and compiled code do not leak into the next):
  eager            the step as written; attention by
                   F.scaled_dot_product_attention(is_causal=True)
                   ("sdpa": PyTorch's fused attention kernel), or with
                   --attn manual as matmul, mask, softmax, matmul (the same
                   math as reprise's attention kernels);
  cudagraph        (GPU) the whole step, optimizer included (capturable
                   AdamW), captured into one torch.cuda.CUDAGraph, replayed;
  compile-max-autotune-no-cudagraphs, compile-reduce-overhead, compile-default
                   torch.compile of the model (forward and backward) and of
                   the clipping + optimizer step, in that mode.
reprise modes (with --reprise BIN): `reprise train --model gpt` by replay
and eagerly (the same kernels without the engine's record/replay: the
difference is the engine's share), each --invocations times.

Times: latency = one step, then synchronize (median over --lat-steps steps);
back to back ("b2b") = --b2b-steps steps issued, then one synchronize,
divided by their number. Each PyTorch figure is given as min/median/max over
--repeats repeats in one process, after --warmup steps; each reprise figure
as min/median/max over --invocations processes of --reprise-iters steps,
its first step left out (from `reprise train --timings`): latency = the
median of the other steps' times (replay, then wait for it); b2b = the
training loop's wall time less the first step and the validation passes,
per step, each replay waited for before the next is issued (with
--inflight N, N in flight, the first step kept). On the CPU there is
nothing to synchronize: the two differ only by the step boundary. Kernels
per step: on the GPU the device kernels (and memcpy/memset) the profiler
sees per step, and the host launch calls; on the CPU the aten operators the
profiler sees (leaf ops: those that call no other aten op); reprise's: the
ops of its recorded step (a GPU op can be several kernels). MFU: nanoGPT's
estimate, flops per step = B*T*(6*N + 12*L*C*T) (N: parameters without
the position embedding), over the back-to-back median, against the peak in
the row (GPU: H100/H200 SXM 67 TFLOP/s FP32 without tensor cores, 494 dense
TF32; CPU: no peak assumed unless --cpu-peak-gflops: FLOP/s only).

Data: one fixed batch of random tokens resident where the model is (no input
pipeline inside the timed step) on the PyTorch side.

The same step on both sides: --check runs this script's PyTorch step (the
model, the loss, backward, clip_grad_norm_, AdamW, as the timed modes run
them) from the initial weights of test/fixtures/gpt_tiny.bin and
gpt_odd.bin, the references test/test_gpt.c holds reprise's step to, and
compares the loss of each step, the gradients and the weights after the
steps within test_gpt.c's bounds (1e-4). --lr is both sides' learning rate;
--beta2, --weight-decay and --clip are PyTorch's alone (reprise train has
its own fixed: 0.95, 0.1, 1.0) and another value is refused when reprise
train rows are measured.

  python3 bench/torch_gpt.py --check [--device cpu|cuda] [--attn sdpa,manual]

  python3 bench/torch_gpt.py --preset launch --json rows.json --markdown rows.md
  python3 bench/torch_gpt.py --preset launch,nanogpt --reprise build/reprise \\
      --json rows.json --markdown rows.md          # everything, on a GPU box

Exit status 0 when the rows were written (a mode that failed or timed out
is a row with "status": "failed"/"timeout" and its reason; torch missing is
one row "skipped: torch not importable"), 1 when --from-json cannot read its
rows or --json/--markdown cannot be written (a full device shows only then),
2 on bad usage (checked before anything is measured: the options, the
configurations (--width a multiple of --heads; with --reprise, the sizes
`reprise train --model gpt` takes), --text a readable file long enough for
the context, the --json/--markdown paths, --reprise answering `version`,
--device cuda where PyTorch has no CUDA), 143 / 130 when SIGTERM (a
`timeout` around the script) or SIGINT stopped it while measuring: the
rows measured until then are written all the same, the last one
"status": "interrupted" naming what it cut short (that and what was still
to run are not measured). --json and --markdown are written whole or not
at all (a temporary file, then a rename). Not a test: no assertion on
time; the "goals" section of the markdown only compares. --check exits 0
when every reference agrees, 1 when one does not (or cannot be read: one
FAIL line each), 77 without PyTorch.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outfile import out_path_error, write_whole  # noqa: E402 (bench/outfile.py)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

PRESETS = {
    # launch-bound: tiny kernels, the step's time is launch/issue overhead
    "launch": dict(layers=4, heads=4, width=128, context=64, batch=16),
    # nanoGPT's shakespeare_char configuration (dropout 0)
    "nanogpt": dict(layers=6, heads=6, width=384, context=256, batch=64),
}

GPU_MODES = ["eager", "cudagraph", "compile-max-autotune-no-cudagraphs",
             "compile-reduce-overhead"]
CPU_MODES = ["eager", "compile-default"]
# every mode torch_child runs (compile-X: torch.compile's mode X)
ALL_MODES = ["eager", "cudagraph", "compile-default", "compile-reduce-overhead",
             "compile-max-autotune", "compile-max-autotune-no-cudagraphs"]
ATTNS = ["sdpa", "manual"]
# The options of the measured runs, which --check (the references' shapes,
# batches and learning rates) does not use: refused with it.
CHECK_IGNORES = ("preset", "layers", "heads", "width", "context", "batch",
                 "vocab", "modes", "lr", "warmup", "repeats", "lat_steps",
                 "b2b_steps", "profile_steps", "mode_timeout",
                 "cpu_peak_gflops", "reprise_iters", "reprise_procs",
                 "invocations", "instantiate_procs", "trace_replays",
                 "inflight", "reprise_arg", "text")

# Peak FLOP/s by device-name substring: (fp32 without tensor cores, tf32
# dense). H200 has the H100 SXM's compute.
GPU_PEAKS = [("H200", 67e12, 494e12), ("H100 PCIe", 51e12, 378e12),
             ("H100", 67e12, 494e12), ("A100", 19.5e12, 156e12)]


# ---------------------------------------------------------------- helpers

def run_text(cmd, **kw):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                              **kw).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def die(msg, status=2):
    """One line on stderr and exit: 2 bad usage, 1 unreadable input."""
    print(f"torch_gpt.py: {msg}", file=sys.stderr)
    sys.exit(status)


def spread(xs):
    """min/median/max of a list of numbers (None when empty)."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs),
            "n": len(xs)}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info():
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": run_text(["git", "-C", REPO, "describe", "--always",
                            "--dirty", "--tags"]) or "unknown",
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        # the interpreter by name: its install path says nothing about the run
        "command": " ".join(shlex.quote(a) for a in ["python3"] + sys.argv),
    }
    smi = shutil.which("nvidia-smi")
    if smi:
        q = run_text([smi, "--query-gpu=name,driver_version",
                      "--format=csv,noheader"])
        if q:
            first = q.splitlines()[0].split(",")
            info["gpu"] = first[0].strip()
            info["driver"] = first[1].strip() if len(first) > 1 else None
    return info


def flops_per_step(cfg, n_params_no_wpe):
    """nanoGPT's estimate_mfu: 6N per token plus 12*L*C*T per token for
    attention (causal mask not halved), times B*T tokens."""
    L, C, T, B = cfg["layers"], cfg["width"], cfg["context"], cfg["batch"]
    return B * T * (6 * n_params_no_wpe + 12 * L * C * T)


def param_count(cfg):
    """Parameters of the model, the position embedding excluded (nanoGPT's
    non_embedding count; the token embedding stays: it is the LM head)."""
    L, C, V = cfg["layers"], cfg["width"], cfg["vocab"]
    per_block = (2 * C  # ln_1
                 + 3 * C * C + 3 * C  # c_attn
                 + C * C + C  # attn c_proj
                 + 2 * C  # ln_2
                 + 4 * C * C + 4 * C  # c_fc
                 + 4 * C * C + C)  # mlp c_proj
    return V * C + L * per_block + 2 * C


def peak_flops(device_name, math_mode, cpu_peak_gflops):
    if device_name and device_name != "cpu":
        for key, fp32, tf32 in GPU_PEAKS:
            if key in device_name:
                return (tf32 if math_mode == "tf32" else fp32), \
                    f"{key} {'TF32 dense' if math_mode == 'tf32' else 'FP32 (no tensor cores)'}"
        return None, None
    if cpu_peak_gflops:
        return cpu_peak_gflops * 1e9, "--cpu-peak-gflops"
    return None, None


def add_mfu(row, cfg, cpu_peak_gflops):
    n = param_count(cfg)
    f = flops_per_step(cfg, n)
    row["params_no_wpe"] = n
    row["flops_per_step"] = f
    row["flops_formula"] = "B*T*(6*N + 12*L*C*T), N = params without wpe"
    b2b = (row.get("b2b_us") or {}).get("median")
    if not b2b:
        return
    row["flops_per_s"] = f / (b2b * 1e-6)
    peak, what = peak_flops(row.get("device"), row.get("math"), cpu_peak_gflops)
    if peak:
        row["peak_flops"] = peak
        row["peak"] = what
        row["mfu"] = row["flops_per_s"] / peak


# ------------------------------------------------------------ PyTorch side

def build_model(torch, cfg, attn):
    nn = torch.nn
    F = torch.nn.functional
    C, NH, T, V = cfg["width"], cfg["heads"], cfg["context"], cfg["vocab"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)
            self.register_buffer(
                "mask", torch.tril(torch.ones(T, T, dtype=torch.bool)),
                persistent=False)

        def attention(self, x):
            B, Tn, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, Tn, NH, C // NH).transpose(1, 2)
            k = k.view(B, Tn, NH, C // NH).transpose(1, 2)
            v = v.view(B, Tn, NH, C // NH).transpose(1, 2)
            if attn == "sdpa":
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
                att = att.masked_fill(~self.mask[:Tn, :Tn], float("-inf"))
                y = F.softmax(att, dim=-1) @ v
            y = y.transpose(1, 2).contiguous().view(B, Tn, C)
            return self.c_proj(y)

        def forward(self, x):
            x = x + self.attention(self.ln_1(x))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)),
                                            approximate="tanh"))

        def decode(self, x, cache_k, cache_v, pos, upto):
            """One token x [1, 1, C] at position pos (a [1] index tensor):
            its key and value into the caches [1, NH, T, C/NH] at pos, its
            query over cache positions 0..pos. upto: the positions kept
            (pos + 1, an int: eager), or None: all T, the ones past pos
            masked (static shapes, for a captured graph)."""
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(1, 1, NH, C // NH).transpose(1, 2)
                       for t in (q, k, v))
            cache_k.index_copy_(2, pos, k)
            cache_v.index_copy_(2, pos, v)
            kk, vv = cache_k, cache_v
            if upto is not None:
                kk, vv = cache_k[:, :, :upto], cache_v[:, :, :upto]
            att = (q @ kk.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
            if upto is None:
                att = att.masked_fill(~self.mask[pos], float("-inf"))
            y = (F.softmax(att, dim=-1) @ vv).transpose(1, 2).reshape(1, 1, C)
            x = x + self.c_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)),
                                            approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(cfg["layers"])])
            self.ln_f = nn.LayerNorm(C)
            self.register_buffer("pos", torch.arange(T), persistent=False)
            for name, p in self.named_parameters():  # nanoGPT's init
                if name.endswith("weight") and p.dim() == 2:
                    std = 0.02
                    if name.endswith("c_proj.weight") or \
                            name.endswith("mlp_proj.weight"):
                        std = 0.02 / (2 * cfg["layers"]) ** 0.5
                    nn.init.normal_(p, 0.0, std)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(self.pos[: idx.size(1)])
            for blk in self.h:
                x = blk(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

        def decode(self, tok, pos, caches, upto=None):
            """The logits [V] of one token (a [1, 1] tensor) at position pos
            (a [1] tensor) with a KV cache (caches: per block its key and
            value caches), as reprise's decode step (docs/gpt.md
            "Decoding"); upto as Block.decode's."""
            x = self.wte(tok) + self.wpe(pos).view(1, 1, C)
            for blk, (ck, cv) in zip(self.h, caches):
                x = blk.decode(x, ck, cv, pos, upto)
            return F.linear(self.ln_f(x), self.wte.weight).view(V)

    return GPT()


def make_optimizer(torch, model, a, capturable):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": a.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=a.lr, betas=(0.9, a.beta2), eps=1e-8)
    if a.adamw == "fused":
        kw["fused"] = True
    else:
        kw["foreach"] = a.adamw == "foreach"
    if capturable:
        kw["capturable"] = True
    return torch.optim.AdamW(groups, **kw)


def train_step(torch, model, opt, params, x, y, max_norm, last, grads=None):
    """The step every mode runs (eagerly, captured or around the compiled
    model): gradients set to None, forward and mean cross-entropy,
    backward, clip_grad_norm_ (every step), AdamW; the loss in
    last["loss"]. grads (--check only): called between the backward and
    the clipping."""
    opt.zero_grad(set_to_none=True)
    loss = model(x, y)
    loss.backward()
    if grads is not None:
        grads()
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    opt.step()
    last["loss"] = loss


# aten ops that move no data (views, allocation, metadata): left out of the
# CPU "kernels per step" (they are counted in aten_leaf_ops_per_step).
METADATA_OPS = {
    "empty", "empty_strided", "empty_like", "as_strided", "view", "_unsafe_view",
    "reshape", "_reshape_alias", "t", "transpose", "expand", "permute", "slice",
    "select", "split", "split_with_sizes", "unbind", "unsqueeze", "squeeze",
    "detach", "alias", "lift_fresh", "resize_", "set_", "narrow", "numpy_T",
    "result_type", "is_nonzero", "item", "_local_scalar_dense", "size", "stride",
    "contiguous", "view_as", "expand_as", "flatten", "unflatten", "chunk",
    "to", "_to_copy", "is_same_size", "scalar_tensor", "_has_compatible_shallow_copy_type",
}


def profile_counts(torch, step, sync, steps, on_gpu):
    """Kernels (GPU) or aten ops (CPU) per step seen by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        sync()
    evs = prof.events()
    out = {}
    if on_gpu:
        # device activity, less the profiler's GPU-side user ranges
        # (Optimizer.step#...: annotations, not kernels)
        dev = [e for e in evs if str(getattr(e, "device_type", "")).endswith("CUDA")
               and not getattr(e, "is_user_annotation", False)]
        mem = [e for e in dev if "memcpy" in e.name.lower() or "memset" in e.name.lower()]
        out["kernels_per_step"] = (len(dev) - len(mem)) / steps
        out["memcpy_memset_per_step"] = len(mem) / steps
        launches = [e for e in evs if e.name in ("cudaLaunchKernel", "cuLaunchKernel",
                                                 "cudaLaunchKernelExC", "cuLaunchKernelEx")]
        graphs = [e for e in evs if e.name in ("cudaGraphLaunch", "cuGraphLaunch")]
        out["host_kernel_launches_per_step"] = len(launches) / steps
        out["host_graph_launches_per_step"] = len(graphs) / steps
        out["kernel_count_method"] = "torch.profiler CUDA activity (CUPTI)"
        # where the device time goes: kernels by name, per step (the
        # profiler's own timing, a little slower than unprofiled steps)
        by = {}
        for e in dev:
            t = by.setdefault(e.name[:100], [0, 0.0])
            t[0] += 1
            t[1] += e.time_range.end - e.time_range.start
        top = sorted(by.items(), key=lambda kv: -kv[1][1])[:20]
        out["device_us_per_step"] = round(sum(v[1] for v in by.values()) / steps, 1)
        out["kernel_time_top"] = [[k, v[0] / steps, round(v[1] / steps, 1)]
                                  for k, v in top]
    else:
        aten = [e for e in evs if e.name.startswith("aten::")]
        leaf = [e for e in aten
                if not any(c.name.startswith("aten::") for c in e.cpu_children)]
        work = [e for e in leaf if e.name[len("aten::"):] not in METADATA_OPS]
        out["aten_ops_per_step"] = len(aten) / steps
        out["aten_leaf_ops_per_step"] = len(leaf) / steps
        out["kernels_per_step"] = len(work) / steps
        out["kernel_count_method"] = ("torch.profiler: leaf aten ops that compute "
                                      "(views, allocations and metadata ops left out)")
    return out


def measure(step, sync, a):
    lat_reps, b2b_reps, lat_all = [], [], []
    for _ in range(a.repeats):
        ts = []
        for _ in range(a.lat_steps):
            t0 = time.perf_counter()
            step()
            sync()
            ts.append(time.perf_counter() - t0)
        lat_reps.append(statistics.median(ts) * 1e6)
        lat_all += ts
        sync()
        t0 = time.perf_counter()
        for _ in range(a.b2b_steps):
            step()
        sync()
        b2b_reps.append((time.perf_counter() - t0) / a.b2b_steps * 1e6)
    lat_all.sort()
    p99 = lat_all[min(len(lat_all) - 1, int(0.99 * len(lat_all)))] * 1e6
    return spread(lat_reps), spread(b2b_reps), p99


def torch_child(a, cfg, mode, attn):
    """Runs one PyTorch mode; returns its row (without the common fields)."""
    import torch
    on_gpu = a.device == "cuda"
    dev = torch.device(a.device)
    row = {"side": "pytorch", "mode": mode, "attention": attn,
           "torch": torch.__version__, "adamw": a.adamw,
           "optimizer_settings": {"lr": a.lr, "betas": [0.9, a.beta2],
                                  "eps": 1e-8, "weight_decay": a.weight_decay,
                                  "clip": a.clip}}
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = a.math == "tf32"
        torch.backends.cudnn.allow_tf32 = a.math == "tf32"
        row["device"] = torch.cuda.get_device_name()
        row["cuda"] = torch.version.cuda
        sync = torch.cuda.synchronize
    else:
        torch.set_num_threads(a.threads)
        row["device"] = "cpu"
        row["threads"] = torch.get_num_threads()
        sync = lambda: None  # noqa: E731
    torch.set_float32_matmul_precision("high" if a.math == "tf32" else "highest")
    torch.manual_seed(a.seed)
    model = build_model(torch, cfg, attn).to(dev)
    B, T, V = cfg["batch"], cfg["context"], cfg["vocab"]
    x = torch.randint(0, V, (B, T), device=dev)
    y = torch.randint(0, V, (B, T), device=dev)
    params = list(model.parameters())
    opt = make_optimizer(torch, model, a, capturable=(mode == "cudagraph"))
    clip = torch.nn.utils.clip_grad_norm_
    last = {}

    def eager_step():
        train_step(torch, model, opt, params, x, y, a.clip, last)

    t_setup = time.perf_counter()
    if mode == "eager":
        step = eager_step
        for _ in range(a.warmup):
            step()
        sync()
    elif mode == "cudagraph":
        if not on_gpu:
            raise RuntimeError("cudagraph needs CUDA")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(max(3, a.warmup)):
                eager_step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            eager_step()
        step = g.replay
        for _ in range(a.warmup):
            step()
        sync()
    elif mode.startswith("compile-"):
        cmode = mode[len("compile-"):]
        cmodel = torch.compile(model, mode=cmode)
        reduce_overhead = cmode == "reduce-overhead"

        def opt_body():
            clip(params, a.clip)
            opt.step()

        copt = torch.compile(opt_body, mode=cmode)
        row["optimizer"] = "compiled"
        mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)

        def step():
            if reduce_overhead and mark:
                mark()
            opt.zero_grad(set_to_none=True)
            loss = cmodel(x, y)
            loss.backward()
            copt()
            last["loss"] = loss

        try:
            for _ in range(max(5, a.warmup)):
                step()
            sync()
        except Exception as e:  # the optimizer did not compile: eager one
            row["optimizer"] = f"eager (compile failed: {type(e).__name__})"
            copt = opt_body
            torch.manual_seed(a.seed)
            for _ in range(max(5, a.warmup)):
                step()
            sync()
    else:
        raise ValueError(f"unknown mode {mode}")
    sync()
    row["setup_s"] = time.perf_counter() - t_setup
    row["latency_us"], row["b2b_us"], row["latency_us_p99"] = measure(step, sync, a)
    if a.profile_steps > 0:
        try:
            row.update(profile_counts(torch, step, sync, a.profile_steps, on_gpu))
        except Exception as e:  # counts are optional: say why they are absent
            row["kernel_count_error"] = f"{type(e).__name__}: {e}"[:300]
    if "loss" in last:
        row["final_loss"] = float(last["loss"].detach().float().cpu())
    return row


# ------------------------------------------------------------ --check

# test/fixtures/gpt_*.bin (tools/gpt_fixture.py): the PyTorch reference
# test/test_gpt.c holds reprise's GPT step to. --check holds this script's
# PyTorch step to the same references with test_gpt.c's bounds.
CHECK_FIXTURES = ["gpt_tiny.bin", "gpt_odd.bin"]
CHECK_TOL = 1e-4        # test_gpt.c's REF_TOL
CHECK_NULL_GRAD = 1e-6  # test_gpt.c's NULL_GRAD


def read_fixture(path):
    """The fixture's config, optimizer, batch, losses and tensors (float32
    lists), or a ValueError saying what is wrong with the file."""
    import struct
    with open(path, "rb") as f:
        b = f.read()
    if len(b) < 60 or b[:8] != b"RPGPTFX1":
        raise ValueError("not a GPT fixture (no RPGPTFX1 header)")
    L, NH, C, T, V, B, steps, ntens = struct.unpack_from("<8I", b, 8)
    beta1, beta2, eps, wd, max_norm = struct.unpack_from("<5f", b, 40)
    at = 60
    cfg = dict(layers=L, heads=NH, width=C, context=T, vocab=V, batch=B)
    shapes = gpt_shapes(L, C, T, V)
    if ntens != len(shapes) or not steps or not NH or C % NH:
        raise ValueError(f"its header ({L} layers, {NH} heads, width {C}, "
                         f"{ntens} tensors, {steps} steps) is not a GPT's")
    numel = sum(r * (c[0] if c else 1) for r, *c in shapes)
    want = 60 + 4 * (steps + 2 * B * T + steps + 3 * numel)
    if len(b) != want:
        raise ValueError(f"{len(b)} bytes, {want} for its header's model")

    def take(fmt, n):
        nonlocal at
        v = list(struct.unpack_from(f"<{n}{fmt}", b, at))
        at += 4 * n
        return v
    lrs = take("f", steps)
    x, y = take("i", B * T), take("i", B * T)
    losses = take("f", steps)
    tensors = []
    for _ in range(3):  # initial weights, gradients, weights after
        tensors.append([take("f", r * (c[0] if c else 1)) for r, *c in shapes])
    return {"config": cfg, "shapes": shapes, "lrs": lrs, "x": x, "y": y,
            "losses": losses, "init": tensors[0], "grad": tensors[1],
            "after": tensors[2],
            "adamw": {"beta1": beta1, "beta2": beta2, "eps": eps,
                      "weight_decay": wd, "max_norm": max_norm}}


def gpt_shapes(L, C, T, V):
    """The parameter tensors' shapes in reprise's order (train/gpt.h),
    which is build_model's named_parameters order."""
    return [(V, C), (T, C)] + [s for _ in range(L) for s in (
        (C,), (C,), (3 * C, C), (3 * C,), (C, C), (C,), (C,), (C,),
        (4 * C, C), (4 * C,), (C, 4 * C), (C,))] + [(C,), (C,)]


# A GPT checkpoint (`reprise train --model gpt --save-weights`): the
# container of train/ckpt.h (magic, container version 1, payload version,
# kind "gpt", payload length, FNV-1a 64) around the payload of train/gpt.h
# (versions 1 to 3: a header of 48, 60 or 68 bytes, V vocabulary bytes,
# then per tensor its weights, first and second moments, f32).
CKPT_PAYLOAD_HEAD = {1: 48, 2: 60, 3: 68}


def read_checkpoint(path):
    """The checkpoint's config, vocabulary (bytes: token i is byte
    vocab[i]) and weights (per tensor, in gpt_shapes order, a memoryview
    of its little-endian f32 values), or a ValueError saying what is wrong
    with the file. Its structure is checked (magic, kind, versions,
    sizes); its checksum is not (an FNV-1a over the file in pure Python
    takes minutes): `reprise generate` checks it on the same file."""
    import struct
    with open(path, "rb") as f:  # writable: torch.frombuffer takes it
        b = bytearray(os.fstat(f.fileno()).st_size)
        del b[f.readinto(b):]  # a file that shrank meanwhile
    if len(b) < 48 or b[:8] != b"RPRSCKPT":
        raise ValueError("not a reprise checkpoint (no RPRSCKPT header)")
    cver, pver = struct.unpack_from("<2I", b, 8)
    kind = bytes(b[16:32]).rstrip(b"\0")
    (plen,) = struct.unpack_from("<Q", b, 32)
    if cver != 1 or kind != b"gpt" or pver not in CKPT_PAYLOAD_HEAD:
        raise ValueError(f"container version {cver}, kind {kind!r}, payload "
                         f"version {pver}: not a GPT checkpoint this script "
                         "reads (container 1, kind 'gpt', payload 1..3)")
    if len(b) != 48 + plen:
        raise ValueError(f"{len(b)} bytes, its header says {48 + plen}")
    head = CKPT_PAYLOAD_HEAD[pver]
    L, NH, C, T, V, B = struct.unpack_from("<6I", b, 48)
    if not (L and NH and C and T and 2 <= V <= 256) or C % NH:
        raise ValueError(f"its header ({L} layers, {NH} heads, width {C}, "
                         f"context {T}, vocabulary {V}) is not a GPT's")
    shapes = gpt_shapes(L, C, T, V)
    numel = [s[0] * (s[1] if len(s) > 1 else 1) for s in shapes]
    want = head + V + 4 * 3 * sum(numel)
    if plen != want:
        raise ValueError(f"a payload of {plen} bytes, {want} for its "
                         "header's model")
    at = 48 + head
    vocab = bytes(b[at:at + V])
    at += V
    mv = memoryview(b)
    weights = []
    for n in numel:  # weights, then the two moments (left out)
        weights.append(mv[at:at + 4 * n])
        at += 3 * 4 * n
    cfg = dict(layers=L, heads=NH, width=C, context=T, vocab=V, batch=B)
    return {"config": cfg, "vocab": vocab, "shapes": shapes,
            "weights": weights, "payload_version": pver}


def worst_rel(got, want, grad=None, null_bound=None):
    """test_gpt.c's check_tensors: the largest |got - want| over the largest
    |want| of each tensor (with grad, its null-gradient elements held to
    null_bound absolutely instead); (worst ratio, tensor index, a null
    element over its bound or None)."""
    worst, where = 0.0, 0
    for i, (g, w) in enumerate(zip(got, want)):
        scale = max((abs(v) for v in w), default=0.0) or 1.0
        gmax = max((abs(v) for v in grad[i]), default=0.0) if grad else 0.0
        diff = 0.0
        for j, (u, v) in enumerate(zip(g, w)):
            d = abs(u - v)
            if grad and abs(grad[i][j]) <= CHECK_NULL_GRAD * gmax:
                if not d <= null_bound:
                    return float("inf"), i, j
                continue
            if not d <= diff:
                diff = d if d == d else float("inf")
        if diff / scale > worst:
            worst, where = diff / scale, i
    return worst, where, None


def check_one(torch, a, fx, attn, capturable):
    """This script's PyTorch step (build_model, make_optimizer,
    train_step) from the fixture's weights on its batch, its steps with
    its learning rates: the problems found (none: the same step as the
    reference reprise's tests hold reprise to), and a summary."""
    cfg, dev = fx["config"], torch.device(a.device)
    torch.manual_seed(a.seed)
    model = build_model(torch, cfg, attn).to(dev)
    params = list(model.parameters())
    bad = [f"parameter {i}: shape {tuple(p.shape)}, the fixture's {s}"
           for i, (p, s) in enumerate(zip(params, fx["shapes"]))
           if tuple(p.shape) != tuple(s)]
    if bad or len(params) != len(fx["shapes"]):
        return bad or [f"{len(params)} parameters, the fixture has "
                       f"{len(fx['shapes'])}"], ""
    with torch.no_grad():
        for p, w in zip(params, fx["init"]):
            p.copy_(torch.tensor(w, dtype=torch.float32).view(p.shape))
    opt = make_optimizer(torch, model, a, capturable=capturable)
    B, T = cfg["batch"], cfg["context"]
    x = torch.tensor(fx["x"], dtype=torch.int64, device=dev).view(B, T)
    y = torch.tensor(fx["y"], dtype=torch.int64, device=dev).view(B, T)
    grads, last, problems, losses = [], {}, [], []

    def keep_grads():
        if not grads:
            grads.extend(p.grad.detach().flatten().cpu().tolist() for p in params)
    for k, lr in enumerate(fx["lrs"]):
        for g in opt.param_groups:
            g["lr"] = lr
        train_step(torch, model, opt, params, x, y, a.clip, last, keep_grads)
        loss, ref = float(last["loss"].detach().cpu()), fx["losses"][k]
        losses.append(loss)
        if not abs(loss - ref) <= CHECK_TOL * abs(ref):
            problems.append(f"step {k + 1}: loss {loss:.9g}, the reference's "
                            f"{ref:.9g}")
    names = [n for n, _ in model.named_parameters()]
    gw, gi, _ = worst_rel(grads, fx["grad"])
    if not gw <= CHECK_TOL:
        problems.append(f"gradient of {names[gi]}: relative difference "
                        f"{gw:.3g} > {CHECK_TOL:g}")
    after = [p.detach().flatten().cpu().tolist() for p in params]
    ww, wi, null = worst_rel(after, fx["after"], fx["grad"], 2 * sum(fx["lrs"]))
    if null is not None:
        problems.append(f"weights after {len(fx['lrs'])} steps: {names[wi]}"
                        f"[{null}] (null gradient) beyond 2 x the sum of the "
                        "learning rates")
    elif not ww <= CHECK_TOL:
        problems.append(f"weights after {len(fx['lrs'])} steps: {names[wi]}: "
                        f"relative difference {ww:.3g} > {CHECK_TOL:g}")
    lw = max(abs(u - v) / abs(v) for u, v in zip(losses, fx["losses"]))
    return problems, (f"loss {losses[0]:.6f} (reference {fx['losses'][0]:.6f}), "
                      f"the {len(losses)} losses within {lw:.2g}, gradients "
                      f"within {gw:.2g}, weights after {len(fx['lrs'])} steps "
                      f"within {ww:.2g} (relative)")


def run_check(a):
    """--check: 0 when this script's PyTorch step reproduces every fixture
    (loss at each step, gradients, weights after the steps) with each
    --attn (and, on a GPU, the cudagraph mode's capturable AdamW); 1 when
    one does not or a fixture cannot be read; 77 without PyTorch."""
    files = a.fixture or [os.path.join(REPO, "test", "fixtures", n)
                          for n in CHECK_FIXTURES]
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure: no torch
        print(f"torch_gpt.py: --check skipped: PyTorch not importable "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        return 77
    if a.device == "cuda" and not torch.cuda.is_available():
        die(f"--device cuda: PyTorch {torch.__version__} sees no CUDA device")
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cpu" and a.math == "tf32":
        die(CPU_TF32)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.math == "tf32"
        torch.backends.cudnn.allow_tf32 = a.math == "tf32"
    else:
        torch.set_num_threads(a.threads or os.cpu_count())
    torch.set_float32_matmul_precision("high" if a.math == "tf32" else "highest")
    failed = False
    for path in files:
        name = os.path.basename(path)
        try:
            fx = read_fixture(path)
        except (OSError, ValueError) as e:
            print(f"FAIL {name}: {getattr(e, 'strerror', None) or e}")
            failed = True
            continue
        # the optimizer the benchmark runs against the reference's (reprise's)
        mine = {"beta1": 0.9, "beta2": a.beta2, "eps": 1e-8,
                "weight_decay": a.weight_decay, "max_norm": a.clip}
        odd = [f"{k} {mine[k]:g} (the reference's {v:g})"
               for k, v in fx["adamw"].items()
               if abs(mine[k] - v) > 1e-6 * abs(v)]
        if odd:
            print(f"FAIL {name}: this run's AdamW is not the reference's: "
                  + ", ".join(odd))
            failed = True
            continue
        capt = [False] + ([True] if a.device == "cuda" else [])
        for attn in a.attn:
            for c in capt:
                what = (f"{name} ({cfg_text(fx['config'])}), attention {attn}, "
                        f"AdamW {a.adamw}{' capturable' if c else ''}, "
                        f"{a.device} {a.math}")
                problems, summary = check_one(torch, a, fx, attn, c)
                if problems:
                    failed = True
                    print(f"FAIL {what}: " + "; ".join(problems))
                else:
                    print(f"ok   {what}: {summary}")
    sys.stdout.flush()
    return 1 if failed else 0


# ------------------------------------------------------------ reprise side

def text_file(a, tmpdir):
    if a.text:
        return a.text
    # A text made of the repository's own docs: enough characters for any
    # batch; the timing does not depend on the content.
    path = os.path.join(tmpdir, "corpus.txt")
    parts = []
    for d in ("docs", "."):
        root = os.path.join(REPO, d)
        for n in sorted(os.listdir(root)):
            if n.endswith(".md"):
                with open(os.path.join(root, n), errors="replace") as f:
                    parts.append(f.read())
    text = "\n".join(parts)
    while len(text) < 1 << 20:
        text += text
    with open(path, "w") as f:
        f.write(text)
    return path


def reprise_cmd(a, cfg, mode, text, json_path, inflight, timings=None):
    cmd = [a.reprise, "train", "--model", "gpt",
           "--layers", str(cfg["layers"]), "--heads", str(cfg["heads"]),
           "--width", str(cfg["width"]), "--context", str(cfg["context"]),
           "--batch", str(cfg["batch"]), "--text", text,
           "--iters", str(a.reprise_iters), "--json", json_path,
           "--log-every", str(a.reprise_iters), "--sample", "0",
           "--procs", str(a.reprise_procs), "--lr", repr(a.lr)]
    if a.device == "cpu":
        cmd += ["--backend", "cpu"]
    elif a.device == "cuda":
        cmd += ["--backend", "cuda"]
    if mode == "eager":
        cmd.append("--eager")
    if inflight > 1:
        cmd += ["--inflight", str(inflight)]
    if timings:
        cmd += ["--timings", timings]
    cmd += a.reprise_arg
    return cmd


def pick(d, *names):
    for n in names:
        if isinstance(d, dict) and d.get(n) is not None:
            return d[n]
    return None


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None


def reprise_figures(out, mode, cfg):
    """(median latency us, p99 us, back-to-back us, how b2b was derived)
    from one `reprise train --json` object: the GPT's fields (iter_us_median,
    iter_us_p99, iter_us_throughput: the loop's wall time per step, the
    validation passes left out, with --inflight replays in flight) or the
    MLP's ({mode}_iter_us_*); for an older train command without
    iter_us_throughput, train_tokens_per_s or tokens_per_s."""
    med = pick(out, f"{mode}_iter_us_median", "iter_us_median")
    p99 = pick(out, f"{mode}_iter_us_p99", "iter_us_p99")
    thr = pick(out, f"{mode}_iter_us_throughput", "iter_us_throughput")
    how = "iter_us_throughput (the loop's wall time per step, validation left out)"
    if thr is None and pick(out, "train_tokens_per_s"):
        thr = cfg["batch"] * cfg["context"] / out["train_tokens_per_s"] * 1e6
        how = "batch*context / train_tokens_per_s (validation passes left out)"
    if thr is None and pick(out, "tokens_per_s"):
        thr = cfg["batch"] * cfg["context"] / out["tokens_per_s"] * 1e6
        how = ("batch*context / tokens_per_s (the training loop's wall time "
               "per step, validation passes included)")
    return med, p99, thr, how


def p99_of(xs):
    """The p99 as measure() takes it from PyTorch's latencies."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


def warm_figures(path, med, p99, thr, how):
    """The figures of reprise_figures with the first (cold) step left out,
    as PyTorch's warm-up steps are: latency median and p99 over the other
    steps' times of `--timings PATH` (each step's replay and its wait),
    back to back (the loop's wall time, validation passes left out, over n
    steps) less the first step's time, over n - 1. As they were when the
    file has fewer than 2 steps or b2b is not iter_us_throughput."""
    try:
        with open(path) as f:
            ns = [float(e["ns"]) for e in json.load(f)["iterations"]]
    except (OSError, ValueError, KeyError, TypeError):
        return med, p99, thr, how
    if len(ns) < 2 or not how.startswith("iter_us_throughput") or thr is None:
        return med, p99, thr, how
    rest = [x / 1e3 for x in ns[1:]]
    thr = (thr * len(ns) - ns[0] / 1e3) / (len(ns) - 1)
    return (statistics.median(rest), p99_of(rest), thr,
            "iter_us_throughput less the first step (--timings), over the "
            "other steps (the loop's wall time, validation left out)")


def trace_overhead(path):
    """From a `reprise train --trace` timeline: per replay (the first one,
    cold, left out), its span, the busiest worker's time in ops (tasks and
    copies) and the overhead = span / that - 1; medians over the replays."""
    with open(path) as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    spans = {e["args"]["replay"]: e["dur"] for e in ev if e.get("cat") == "replay"}
    busy = {}
    for e in ev:
        if e.get("cat") in ("task", "copy") and "replay" in e.get("args", {}):
            k = (e["args"]["replay"], e["tid"])
            busy[k] = busy.get(k, 0.0) + e["dur"]
    over, span_l, busy_l, util = [], [], [], []
    workers = {k[1] for k in busy}
    for r, span in sorted(spans.items()):
        if r == 0 or span <= 0:
            continue
        per = [busy.get((r, w), 0.0) for w in workers]
        if not per or max(per) <= 0:
            continue
        over.append(100.0 * (span / max(per) - 1.0))
        span_l.append(span)
        busy_l.append(max(per))
        util.append(100.0 * sum(per) / (span * len(per)))
    if not over:
        return None
    return {"replay_overhead_pct": statistics.median(over),
            "trace_replays": len(over),
            "trace_span_us": statistics.median(span_l),
            "trace_busiest_worker_ops_us": statistics.median(busy_l),
            "trace_worker_utilisation_pct": statistics.median(util),
            "trace_workers": len(workers)}


def reprise_rows(a, cfg, tmpdir):
    """reprise replay and eager for cfg, --invocations processes each
    (alternating replay and eager, so that a change in the machine's load
    hits both); with --inflight N > 1 the replay's back-to-back figure comes
    from extra runs with N replays in flight (a train command that refuses
    --inflight leaves the one-in-flight throughput)."""
    env = dict(os.environ)
    text = text_file(a, tmpdir)
    res = {m: {"lat": [], "p99": [], "b2b": [], "outs": [], "cmds": [], "err": None,
               "how": None}
           for m in ("replay", "eager")}
    for i in range(a.invocations):
        for mode in ("replay", "eager"):
            r = res[mode]
            if r["err"]:
                continue
            runs = [1] + ([a.inflight] if mode == "replay" and a.inflight > 1 else [])
            for inflight in runs:
                jp = os.path.join(tmpdir, f"r_{mode}_{i}_{inflight}.json")
                # each step's time: the first (cold) one left out below
                tp = os.path.join(tmpdir, f"r_{mode}_{i}_timings.json") \
                    if inflight == 1 else None
                cmd = reprise_cmd(a, cfg, mode, text, jp, inflight, tp)
                if i == 0:
                    r["cmds"].append(" ".join(shlex.quote(c) for c in cmd))
                try:
                    p = subprocess.run(cmd, capture_output=True, text=True,
                                       env=env, timeout=a.mode_timeout)
                    if p.returncode != 0:
                        raise RuntimeError(f"exit {p.returncode}: "
                                           f"{(p.stderr or p.stdout).strip()[-400:]}")
                    with open(jp) as f:
                        out = json.load(f)
                except subprocess.TimeoutExpired:
                    r["err"] = ("timeout", f"over {a.mode_timeout:.0f} s")
                    break
                except (RuntimeError, OSError, ValueError) as e:
                    if inflight > 1:  # --inflight refused: keep the rest
                        r["inflight_error"] = str(e)[:300]
                        continue
                    r["err"] = ("failed", str(e)[:500])
                    break
                med, p99, thr, how = reprise_figures(out, mode, cfg)
                if tp:
                    med, p99, thr, how = warm_figures(tp, med, p99, thr, how)
                if inflight == 1:
                    r["lat"].append(med)
                    r["p99"].append(p99)
                    r["outs"].append(out)
                    if len(runs) == 1 or "inflight_error" in r:
                        r["b2b"].append(thr)
                        r["how"] = how
                else:
                    r["b2b"].append(thr)
                    r["how"] = f"--inflight {inflight}: {how}"
                    r["inflight"] = inflight
    trace = None
    # the timeline's per-worker op times describe CPU workers; a GPU replay's
    # kernels run inside its CUDA graph, which the trace does not time
    if a.trace_replays and a.device == "cpu" and not res["replay"]["err"]:
        jp = os.path.join(tmpdir, "r_trace.json")
        tp = os.path.join(tmpdir, "r_trace_timeline.json")
        cmd = reprise_cmd(a, cfg, "replay", text, jp, 1)
        cmd[cmd.index("--iters") + 1] = str(a.trace_replays + 1)
        cmd[cmd.index("--log-every") + 1] = str(a.trace_replays + 1)
        cmd += ["--trace", tp]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                               timeout=a.mode_timeout)
            if p.returncode == 0:
                trace = trace_overhead(tp)
                if trace:
                    trace["trace_command"] = " ".join(shlex.quote(c) for c in cmd)
        except (OSError, ValueError, KeyError, subprocess.SubprocessError):
            trace = None
    rows = []
    for mode in ("replay", "eager"):
        r = res[mode]
        row = {"side": "reprise", "mode": mode,
               "attention": "reprise kernels (matmul, fused causal softmax, matmul)",
               "device": a.device_name, "math": "fp32"}
        row["procs"] = a.reprise_procs
        if a.device == "cpu":
            row["threads"] = a.reprise_procs
        row["reprise_command"] = r["cmds"]
        # the kernel and lowering settings reprise train read from the
        # environment (REPRISE_GPT_ATTN=gemm, REPRISE_CUBLAS_WS_MIB=4, ...):
        # rows of one config under different settings are told apart
        knobs = reprise_knobs()
        if knobs:
            row["reprise_env"] = knobs
        if r["err"]:
            row.update(status=r["err"][0], reason=r["err"][1])
            rows.append(row)
            continue
        row["status"] = "ok"
        row["invocations"] = len(r["lat"])
        row["latency_us"] = spread(r["lat"])
        row["latency_us_p99"] = spread(r["p99"])
        row["b2b_us"] = spread(r["b2b"])
        row["b2b_source"] = r["how"]
        if r.get("inflight") and not r.get("inflight_error"):
            row["inflight_b2b"] = r["inflight"]
        if r.get("inflight_error"):
            row["inflight_error"] = r["inflight_error"]
        first = r["outs"][0] if r["outs"] else {}
        # Fields the train command may or may not emit: taken when present.
        for name, keys in (("kernels_per_step", ("ops_per_step", "ops", "tasks_per_step")),
                           ("instantiate_ms", ("instantiate_ms",)),
                           ("record_ms", ("record_ms", "capture_ms")),
                           ("ops_run_per_replay", ("ops_run_per_replay",)),
                           ("device_idle_pct", ("device_idle_pct", "gpu_idle_pct")),
                           ("replay_overhead_pct", ("replay_overhead_pct",)),
                           ("reprise_params", ("params", "parameters")),
                           ("vocab", ("vocab",)),
                           ("final_loss", ("final_loss",)),
                           ("backend", ("backend",))):
            v = pick(first, *keys)
            if v is not None:
                row[name] = v
        if mode == "replay" and trace:
            row.update(trace)
            row["replay_overhead_method"] = (
                "--trace timeline: replay span / busiest worker's time in its "
                "tasks and copies - 1, median over replays 2..")
        if "instantiate_ms" in row:
            row["instantiate_ms_spread"] = spread([pick(o, "instantiate_ms") for o in r["outs"]])
        if "kernels_per_step" in row:
            row["kernel_count_method"] = "reprise: ops of the recorded step (tasks and copies)"
        wanted = ["iter_us_p99"] + (["instantiate_ms"] if mode == "replay" else [])
        if mode == "replay" and a.device != "cpu":
            wanted.append("device_idle_pct")
        missing = [k for k in wanted
                   if pick(first, k, f"{mode}_{k}") is None]
        if missing:
            row["missing_fields"] = missing
        rows.append(row)
    return rows


def instantiate_rows(a, cfg):
    """bench/gpt/gpt_instantiate (built next to the reprise binary): the
    step's ops, record and instantiate times per --instantiate-procs."""
    exe = os.path.join(os.path.dirname(os.path.abspath(a.reprise)), "gpt_instantiate")
    rows = []
    for procs in a.instantiate_procs:
        row = {"side": "reprise", "mode": "instantiate", "procs": procs,
               "device": a.device_name, "math": "fp32"}
        cmd = [exe, "--layers", str(cfg["layers"]), "--heads", str(cfg["heads"]),
               "--width", str(cfg["width"]), "--context", str(cfg["context"]),
               "--batch", str(cfg["batch"]), "--vocab", str(cfg["vocab"]),
               "--procs", str(procs), "--reps", "20",
               "--backend", "cuda" if a.device == "cuda" else "cpu"]
        row["reprise_command"] = [" ".join(shlex.quote(c) for c in cmd)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=a.mode_timeout)
            if p.returncode != 0:
                raise RuntimeError(f"exit {p.returncode}: {p.stderr.strip()[-300:]}")
            out = json.loads(p.stdout)
            row.update(status="ok", kernels_per_step=out["ops"],
                       record_ms=out["record_ms"], instantiate_ms=out["instantiate_ms"],
                       instantiate_reps=out["reps"],
                       kernel_count_method="reprise: ops of the recorded step")
        except (OSError, ValueError, KeyError, RuntimeError,
                subprocess.SubprocessError) as e:
            row.update(status="failed", reason=str(e)[:300])
        rows.append(row)
    return rows


def reprise_vocab(a, cfg, tmpdir, quiet=False):
    """The vocabulary reprise's --text reader gives (from a 1-step run's
    JSON), so that the PyTorch model has the same LM head; None (and,
    unless quiet, a note on stderr: the PyTorch model then has 65) when
    that run fails."""
    text = text_file(a, tmpdir)
    jp = os.path.join(tmpdir, "vocab.json")
    cmd = reprise_cmd(a, dict(cfg), "replay", text, jp, 1)
    cmd[cmd.index("--iters") + 1] = "1"
    env = dict(os.environ)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=a.mode_timeout)
        if p.returncode == 0:
            with open(jp) as f:
                v = pick(json.load(f), "vocab")
            if v:
                return v
            why = "its --json has no vocab"
        else:
            why = f"exit {p.returncode}: " + \
                ((p.stderr or p.stdout).strip().splitlines() or [""])[0][:200]
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        why = f"{type(e).__name__}: {e}"[:200]
    if quiet:
        return None
    print(f"torch_gpt.py: note: reprise's vocabulary for the text is unknown "
          f"({why}); the PyTorch model uses 65 (--vocab sets it)",
          file=sys.stderr, flush=True)
    return None


# ------------------------------------------------------------- markdown

def fmt_spread(s, scale=1.0, digits=1, unit=""):
    """'median (min–max)'; unit "us" picks µs or ms by the median."""
    if not s:
        return "–"
    if unit == "us" and s["median"] >= 10000:
        scale, unit = scale / 1000, " ms"
    elif unit == "us":
        unit = " µs"
    f = f"{{:.{digits}f}}"
    return (f"{f.format(s['median'] * scale)}{unit} "
            f"({f.format(s['min'] * scale)}–{f.format(s['max'] * scale)})")


def reprise_knobs():
    """The REPRISE_* variables of this environment that choose reprise's
    kernels or lowering (not REPRISE_REQUIRE_GPU, a test setting)."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith("REPRISE_") and k != "REPRISE_REQUIRE_GPU"}


def row_label(r):
    m = f"{r['side']} {r['mode']}"
    if r["side"] == "reprise" and r.get("procs", 1) > 1:
        m += f" (--procs {r['procs']})"
    if r["side"] == "reprise" and r.get("reprise_env"):
        m += " [" + " ".join(f"{k}={v}" for k, v in r["reprise_env"].items()) + "]"
    if r["side"] == "pytorch" and r["mode"] == "eager":
        m += f" ({r.get('attention')})"
    return m


def cfg_name(cfg):
    for k, v in PRESETS.items():
        if all(cfg.get(x) == v[x] for x in v):
            return f"{k}: " + cfg_text(cfg)
    return cfg_text(cfg)


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def cfg_text(cfg):
    return (f"{plural(cfg['layers'], 'layer')}, {plural(cfg['heads'], 'head')}, "
            f"width {cfg['width']}, "
            f"context {cfg['context']}, batch {cfg['batch']}, vocab {cfg.get('vocab')}")


def goals(rows):
    """The goals as ratios (medians of back-to-back times); lines of
    text, nothing asserted."""
    out = []
    by = {}
    for r in rows:
        if r.get("status") == "ok":
            key = (r["side"], r["mode"], r.get("attention"))
            by.setdefault(cfg_text(r["config"]), {})[key] = r
    for cname, d in by.items():
        rep = d.get(("reprise", "replay", next((k[2] for k in d if k[:2] == ("reprise", "replay")), None)))
        if not rep:
            continue

        def get(side, mode, attn=None):
            for k, r in d.items():
                if k[0] == side and k[1] == mode and (attn is None or k[2] == attn):
                    return r
            return None

        def ratio(other, what):
            parts = []
            for metric, name in (("latency_us", "latency"), ("b2b_us", "back to back")):
                if other and other.get(metric) and rep.get(metric):
                    q = rep[metric]["median"] / other[metric]["median"]
                    parts.append(f"{q:.2f} ({name})")
            if parts:
                out.append(f"- {cname}: reprise replay / {what}: " + ", ".join(parts))
        ratio(get("pytorch", "cudagraph"), "PyTorch whole-step CUDA graph (goal ≤ 0.8 launch-bound)")
        comp = [r for k, r in d.items() if k[0] == "pytorch" and k[1].startswith("compile-")]
        if comp:
            best = min(comp, key=lambda r: r["b2b_us"]["median"])
            ratio(best, f"torch.compile's best ({best['mode']}) "
                  "(goal ≤ 1 launch-bound, ≤ 1.25 nanoGPT)")
        ratio(get("pytorch", "eager", "sdpa"), "PyTorch eager, fused attention (goal ≤ 1)")
        ratio(get("pytorch", "eager", "manual"), "PyTorch eager, manual attention")
        ratio(get("reprise", "eager"), "reprise eager (the engine's share)")
        if rep.get("replay_overhead_pct") is not None:
            out.append(f"- {cname}: replay overhead over the busiest worker's ops "
                       f"{rep['replay_overhead_pct']:.2f}% (goal ≤ 5% on the CPU)")
    return out


LEGEND = (
    "Latency: one step then synchronize (reprise: wait for its done event), "
    "median of the steps of one repeat (PyTorch, after its warm-up steps) "
    "or of one invocation (reprise, its first step left out). Back to back: "
    "PyTorch: steps issued without waiting, then one synchronize, per step; "
    "reprise: the training loop's wall time per step, its first step and "
    "the validation passes left out (the batch ring's refills in), each "
    "replay waited for before the next is issued unless the row says "
    "--inflight N (that figure keeps the first step). PyTorch: "
    "min/median/max over repeats in one process; reprise: over separate "
    "invocations. Kernels/step: PyTorch: GPU kernels per step (profiler), "
    "on the CPU its leaf aten ops; reprise: the ops of the recorded step "
    "(a GPU op can be several kernels). MFU: flops per step "
    "B·T·(6N + 12·L·C·T) (N: the parameters but the position embedding) "
    "over the back-to-back median.")


def to_markdown(rows, meta):
    lines = ["# GPT training step: reprise and PyTorch", ""]
    stamp = [f"commit {meta.get('commit')}"
             + (f" (reprise built from {meta['reprise_commit']})"
                if meta.get("reprise_commit") not in (None, meta.get("commit"))
                else ""),
             meta.get("date", ""),
             f"CPU {meta.get('cpu')} ({meta.get('cores')} cores)"]
    if meta.get("gpu"):
        stamp.append(f"GPU {meta['gpu']}, driver {meta.get('driver')}, "
                     f"CUDA {meta.get('cuda') or '?'}")
    if meta.get("torch"):
        stamp.append(f"PyTorch {meta['torch']}")
    loads = [x[0] for r in rows for x in (r.get("loadavg_before"), r.get("loadavg_after"))
             if x]
    if loads:
        stamp.append(f"1-minute load average during the run {min(loads):.1f}–{max(loads):.1f} "
                     f"on {meta.get('cores')} cores")
    lines += ["; ".join(stamp) + ".", "", "Command:", "",
              "    " + meta.get("command", ""), ""]
    configs = []
    for r in rows:
        c = r.get("config")
        if c and c not in configs:
            configs.append(c)
    for c in configs or [None]:
        rs = [r for r in rows if r.get("config") == c]
        if c:
            lines += [f"## {cfg_name(c)}", ""]
        inst = [r for r in rs if r.get("mode") == "instantiate"]
        rs = [r for r in rs if r.get("mode") != "instantiate"]
        if rs:
            lines += ["| side, mode | math | device (threads) | latency median (min–max) "
                      "| back to back median (min–max) | kernels/step | MFU or FLOP/s | notes |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in rs:
            dev = r.get("device") or "–"
            if r.get("threads"):
                dev += f" ({r['threads']})"
            if r.get("status") != "ok":
                lines.append(f"| {row_label(r)} | {r.get('math', '–')} | {dev} | "
                             f"{r.get('status')} | – | – | – | {r.get('reason', '')[:120]} |")
                continue
            k = r.get("kernels_per_step")
            kt = f"{k:.0f}" if isinstance(k, (int, float)) else "–"
            if r["side"] == "reprise" and kt != "–":
                kt += " ops"  # a GPU op can be several kernels
            if r.get("memcpy_memset_per_step"):
                kt += f" (+{r['memcpy_memset_per_step']:.0f} copies)"
            if r.get("mfu") is not None:
                perf = f"{100 * r['mfu']:.1f}%"
            elif r.get("flops_per_s"):
                perf = f"{r['flops_per_s'] / 1e9:.1f} GFLOP/s"
            else:
                perf = "–"
            notes = []
            if r.get("replay_overhead_pct") is not None:
                notes.append(f"replay overhead {r['replay_overhead_pct']:.2f}% over the "
                             f"busiest worker's ops (trace, {r.get('trace_replays')} replays)")
            if r.get("instantiate_ms") is not None and not isinstance(r["instantiate_ms"], dict):
                notes.append(f"instantiate {r['instantiate_ms']:.1f} ms")
            if "/ tokens_per_s" in (r.get("b2b_source") or ""):
                notes.append("back to back from its tokens/s (the loop's wall time, "
                             "2 validation passes included)")
            inflight = r.get("inflight_b2b")
            if inflight is None:  # a row without the key: its b2b_source
                m = re.match(r"--inflight (\d+):", r.get("b2b_source") or "")
                inflight = int(m.group(1)) if m else 1
            if inflight > 1:
                notes.append(f"b2b with --inflight {inflight}")
            elif r["side"] == "reprise" and r.get("b2b_source") and \
                    "less the first step" not in r["b2b_source"]:
                # a row of a run without the step times (--timings)
                notes.append("its first step in its figures")
            if r.get("optimizer") and r["optimizer"] != "compiled":
                notes.append(f"optimizer {r['optimizer']}")
            if r.get("setup_s") and r["mode"].startswith("compile"):
                notes.append(f"compile {r['setup_s']:.0f} s")
            if r.get("missing_fields"):
                notes.append("no " + ", ".join(r["missing_fields"]) + " in its JSON")
            lines.append(f"| {row_label(r)} | {r.get('math')} | {dev} | "
                         f"{fmt_spread(r.get('latency_us'), unit='us')} | "
                         f"{fmt_spread(r.get('b2b_us'), unit='us')} "
                         f"| {kt} | {perf} | {'; '.join(notes)} |")
        if rs:
            lines.append("")
        if inst:
            lines += ["Recording and instantiating the step (reprise, "
                      "`gpt_instantiate`, 20 instantiates each):", "",
                      "| processors | ops per step | record ms | instantiate ms median (min–max) |",
                      "| --- | --- | --- | --- |"]
            for r in inst:
                if r.get("status") != "ok":
                    lines.append(f"| {r['procs']} | {r.get('status')} | – | {r.get('reason', '')[:100]} |")
                    continue
                lines.append(f"| {r['procs']} | {r['kernels_per_step']} | {r['record_ms']:.1f} "
                             f"| {fmt_spread(r['instantiate_ms'], digits=2)} |")
            lines.append("")
    g = goals(rows)
    if g:
        lines += ["## Against the goals (ratios of medians)", ""] + g + [""]
    lines += [LEGEND, ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ main

def int_at_least(lo, what):
    """An argparse type: an integer >= lo."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"{text!r}: wants {what}")
        return v
    return parse


positive_int = int_at_least(1, "a positive integer")
nonneg_int = int_at_least(0, "an integer >= 0")


def positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: wants a positive number")
    return v


def float_in(lo, hi, what, lo_open=False, hi_open=False):
    """An argparse type: a finite number in [lo, hi] (an end open when
    asked)."""
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (lo < v if lo_open else lo <= v) or \
                not (v < hi if hi_open else v <= hi) or v != v:
            raise argparse.ArgumentTypeError(f"{text!r}: wants {what}")
        return v
    return parse


INF = float("inf")


def name_list(allowed, what, empty=False):
    """A comma list of names from allowed, as a list ('' only if empty)."""
    def parse(text):
        items = [x.strip() for x in text.split(",")] if text else []
        bad = [x for x in items if x not in allowed]
        if bad or (not items and not empty):
            raise argparse.ArgumentTypeError(
                f"{text!r}: want a comma list of {what} ({', '.join(allowed)})")
        return items
    return parse


def file_name(text):
    """An argparse type: a file name, not '' (an unset shell variable
    would otherwise read as the option not given)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty file name")
    return text


def procs_list(text):
    """A comma list of positive integers; '' for none."""
    items = [x.strip() for x in text.split(",") if x.strip()] if text else []
    try:
        return [positive_int(x) for x in items]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: want a comma list of positive integers, or ''") from None


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default=None,
                    type=name_list(list(PRESETS), "presets"),
                    help="comma list of " + ", ".join(PRESETS) + " (default launch, "
                    "unless --layers etc. give a config)")
    for k in ("layers", "heads", "width", "context", "batch"):
        ap.add_argument(f"--{k}", type=positive_int, default=None)
    ap.add_argument("--vocab", type=positive_int, default=None,
                    help="default: reprise's vocabulary for the text when "
                    "--reprise, else 65 (with reprise train rows another is a "
                    "usage error: reprise train takes the text's)")
    ap.add_argument("--modes", default=None,
                    type=name_list(ALL_MODES + ["none"], "modes", empty=True),
                    help=f"PyTorch modes, comma list of {', '.join(ALL_MODES)} "
                    f"(GPU default {','.join(GPU_MODES)}; "
                    f"CPU {','.join(CPU_MODES)}); 'none' for none")
    ap.add_argument("--attn", default=["sdpa", "manual"],
                    type=name_list(ATTNS, "attentions"),
                    help="attention(s) for the eager mode: comma list of sdpa, "
                    "manual (default both; the other modes use the first)")
    ap.add_argument("--math", choices=("fp32", "tf32"), default="fp32",
                    help="GPU: fp32 (default, TF32 off) or tf32 (PyTorch's "
                    "GEMMs on TF32 tensor cores; reprise's stay FP32); the "
                    "CPU takes fp32 only")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                    help="auto: cuda when PyTorch sees one; cuda where PyTorch "
                    "has no CUDA is a usage error (without PyTorch: the "
                    "reprise rows and a 'skipped' row)")
    ap.add_argument("--threads", type=positive_int, default=None,
                    help="CPU: torch threads (default: all cores)")
    ap.add_argument("--adamw", choices=("foreach", "fused", "single"), default="foreach")
    # reprise train --model gpt's AdamW: lr 2e-3 (PyTorch's step keeps it
    # constant, reprise's schedule gives each step its own: the same work),
    # betas (0.9, 0.95), eps 1e-8, decay 0.1, clipping at 1.0 (REPRISE_ADAMW)
    ap.add_argument("--lr", type=float_in(0, INF, "a finite number >= 0",
                                          hi_open=True), default=2e-3,
                    help="AdamW's learning rate, PyTorch's (constant) and "
                    "reprise train's (--lr: the peak of its schedule) "
                    "(default 2e-3)")
    ap.add_argument("--beta2", type=float_in(0, 1, "a number in [0, 1)",
                                             hi_open=True), default=0.95,
                    help="PyTorch's AdamW beta2 (default 0.95, reprise's; "
                    "reprise train has no other: another is refused when "
                    "reprise train runs)")
    ap.add_argument("--weight-decay", default=0.1,
                    type=float_in(0, INF, "a finite number >= 0", hi_open=True),
                    help="PyTorch's AdamW weight decay on the matrices and "
                    "embeddings (default 0.1, reprise's; as --beta2)")
    ap.add_argument("--clip", type=float_in(0, INF, "a finite number > 0",
                                            lo_open=True, hi_open=True),
                    default=1.0,
                    help="PyTorch's clip_grad_norm_ max norm, every step "
                    "(default 1.0, reprise's; as --beta2)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=nonneg_int, default=10)
    ap.add_argument("--repeats", type=positive_int, default=5)
    ap.add_argument("--lat-steps", type=positive_int, default=None,
                    help="default GPU 50, CPU 10")
    ap.add_argument("--b2b-steps", type=positive_int, default=None,
                    help="default GPU 200, CPU 20")
    ap.add_argument("--profile-steps", type=nonneg_int, default=3,
                    help="steps under the profiler for the kernel counts (0: none)")
    ap.add_argument("--mode-timeout", type=positive_float, default=None,
                    help="seconds per PyTorch mode / reprise invocation "
                    "(default GPU 900, CPU 600)")
    ap.add_argument("--cpu-peak-gflops", type=positive_float, default=None)
    ap.add_argument("--reprise", default=None, type=file_name,
                    help="the reprise binary (BUILD/reprise); checked first: "
                    "`REPRISE version` must print 'reprise ...'")
    ap.add_argument("--reprise-iters", type=positive_int, default=200)
    ap.add_argument("--reprise-procs", type=positive_int, default=None,
                    help="reprise train --procs: processors the step is split over "
                    f"(CPU workers, 1..{REPRISE_MAX_PROCS}; default: --threads on "
                    f"the CPU, at most {REPRISE_MAX_PROCS}, 1 on a GPU)")
    ap.add_argument("--invocations", type=nonneg_int, default=5,
                    help="reprise train processes per mode (0: no reprise train rows)")
    ap.add_argument("--instantiate-procs", default=[1, 2, 4], type=procs_list,
                    help="processor counts for the record/instantiate rows "
                    "(gpt_instantiate next to --reprise), default 1,2,4; '' for none")
    ap.add_argument("--trace-replays", type=nonneg_int, default=15,
                    help="reprise: one more run with --trace over this many replays "
                    "(after a cold one) for the replay overhead; 0: none")
    ap.add_argument("--inflight", type=positive_int, default=1,
                    help="reprise replays in flight for the back-to-back figure "
                    "(1: the training loop's throughput)")
    ap.add_argument("--reprise-arg", action="append", default=[],
                    help="extra argument for reprise train (repeatable)")
    ap.add_argument("--text", default=None, type=file_name, help="text file for reprise (default: "
                    "the repository's docs, repeated to 1 MiB)")
    ap.add_argument("--json", default=None, type=file_name,
                    help="write the rows here (a JSON array)")
    ap.add_argument("--markdown", default=None, type=file_name,
                    help="write the markdown table here")
    ap.add_argument("--from-json", default=None, metavar="ROWS", type=file_name,
                    help="render --markdown (default: stdout) from an existing "
                    "rows file; measure nothing. --json does not go with it "
                    "(a usage error: the rows are that file)")
    ap.add_argument("--check", action="store_true",
                    help="measure nothing: run this script's PyTorch step "
                    "(each --attn; --adamw, --beta2, --weight-decay, --clip, "
                    "--device, --math as given) from the weights of the "
                    "references reprise's tests hold reprise to "
                    "(test/fixtures/gpt_tiny.bin, gpt_odd.bin) and compare "
                    "the loss at each step, the gradients and the weights "
                    "after the steps (1e-4, test_gpt.c's bounds); exit 0 "
                    "when all agree, 1 when one does not, 77 without PyTorch; "
                    "the references fix the config, batch and learning "
                    "rates: the options of the measured runs (--lr, "
                    "--layers, --inflight, ...) are a usage error with it")
    ap.add_argument("--fixture", action="append", default=[], type=file_name,
                    help="with --check: this fixture instead (repeatable)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-config", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return a
    if a.fixture and not a.check:
        ap.error("--fixture goes with --check")
    if a.check:
        if a.from_json or a.json or a.markdown or a.reprise:
            ap.error("--check measures nothing and writes no rows: "
                     "--from-json, --json, --markdown and --reprise do not "
                     "go with it")
        # the references fix the shapes, the batch and each step's lr: an
        # option of the measured runs would be ignored, not checked
        ignored = [f"--{k.replace('_', '-')}" for k in CHECK_IGNORES
                   if getattr(a, k) != ap.get_default(k)]
        if ignored:
            ap.error("--check runs the references' own shapes, batches and "
                     "learning rates and measures nothing: "
                     + ", ".join(ignored)
                     + (" does" if len(ignored) == 1 else " do")
                     + " not go with it")
        return a
    if a.from_json and a.json:
        ap.error("--from-json renders --markdown from its rows: --json does not "
                 "apply (the rows are that file)")
    outs = [(o, p) for o, p in (("--json", a.json), ("--markdown", a.markdown)) if p]
    for opt, path in outs:
        why = out_path_error(path)
        if why:
            ap.error(f"{opt} {path}: {why}")
    if len(outs) == 2 and os.path.realpath(a.json) == os.path.realpath(a.markdown) \
            and not os.path.abspath(a.json).startswith(("/dev/", "/proc/")):
        ap.error("--json and --markdown name the same file")
    if not a.from_json:
        why = run_error(a)
        if why:
            die(why)
    if a.reprise and not a.from_json:
        a.reprise_version = reprise_version(a.reprise)
        if a.reprise_version is None:
            ap.error(f"--reprise {a.reprise}: not reprise "
                     f"('{a.reprise} version' prints no 'reprise ...' line)")
    return a


# what `reprise train --model gpt` and gpt_instantiate take (train/gpt.h,
# `reprise train --help`)
REPRISE_LIMITS = {"layers": 32, "heads": 256, "width": 8192, "context": 4096,
                  "batch": 65536}
REPRISE_MAX_PROCS = 16
# reprise train --model gpt's AdamW settings no option changes
# (rp_gpt_config_init): the PyTorch side must run the same
REPRISE_ADAMW = {"beta2": 0.95, "weight_decay": 0.1, "clip": 1.0}
REPRISE_MAX_LR = 10  # reprise train's --lr: above 0, below 10
# --math tf32 sets PyTorch's "high" float32 matmul precision, which on the
# CPU runs no TF32 (here its GEMMs stay bitwise FP32): rows labelled tf32
# would name a math mode that did not run
CPU_TF32 = ("--math tf32 on the CPU: TF32 is a GPU math mode, PyTorch's CPU "
            "GEMMs have none (--math fp32, or --device cuda)")
REPRISE_MAX_INFLIGHT = 64
REPRISE_MAX_ITERS = 100000000


def run_error(a):
    """Why the options describe a run that would only fail (its rows
    'failed'), or None: checked before anything is measured."""
    # reprise train runs for the rows and, without --vocab, for the
    # vocabulary; gpt_instantiate for --instantiate-procs
    train = bool(a.reprise) and (a.invocations > 0 or a.vocab is None)
    reprise = train or bool(a.reprise and a.instantiate_procs)
    names = a.preset or ["launch"]
    for name, cfg in zip(names, configs_from(a)):
        def opt(k):
            if getattr(a, k) is not None:
                return f"--{k} {cfg[k]}"
            return f"{k} {cfg[k]} (preset {name})"
        if cfg["width"] % cfg["heads"]:
            return f"{opt('width')} is not a multiple of {opt('heads')}"
        if not reprise:
            continue
        for k, hi in REPRISE_LIMITS.items():
            if cfg[k] > hi:
                return f"{opt(k)}: reprise train --model gpt takes 1..{hi}"
        B, T, C, H = cfg["batch"], cfg["context"], cfg["width"], cfg["heads"]
        if B * T * C * 4 >= 1 << 31 or B * H * T * T >= 1 << 31:
            return (f"{opt('batch')} x {opt('context')}: too large for reprise's "
                    "int32 kernel sizes")
        procs = ([("--reprise-procs", a.reprise_procs)]
                 if a.reprise_procs and train else []) + \
            [("--instantiate-procs", p) for p in a.instantiate_procs]
        for o, p in procs:
            if p > REPRISE_MAX_PROCS:
                return f"{o} {p}: reprise's GPT takes 1..{REPRISE_MAX_PROCS}"
            if p > B:
                return (f"{opt('batch')} over {o} {p}: every processor needs "
                        "rows of the batch")
    if reprise and a.instantiate_procs and a.vocab is not None and \
            not 2 <= a.vocab <= 256:
        return f"--vocab {a.vocab}: reprise's GPT (gpt_instantiate) takes 2..256"
    if train and a.invocations > 0:  # rows of both sides
        for k, v in REPRISE_ADAMW.items():
            if getattr(a, k) != v:
                return (f"--{k.replace('_', '-')} {getattr(a, k):g}: reprise "
                        f"train --model gpt runs AdamW with {v:g} (no option "
                        "changes it): the two sides would not run the same "
                        "step")
    if train:
        if not 0 < a.lr < REPRISE_MAX_LR:
            return (f"--lr {a.lr:g}: reprise train --model gpt takes above 0 "
                    f"and below {REPRISE_MAX_LR}")
    if train and a.inflight > REPRISE_MAX_INFLIGHT:
        return f"--inflight {a.inflight}: reprise train takes 1..{REPRISE_MAX_INFLIGHT}"
    if train and a.reprise_iters > REPRISE_MAX_ITERS:
        return f"--reprise-iters {a.reprise_iters}: reprise train takes 1..{REPRISE_MAX_ITERS}"
    if a.device == "cpu" and a.math == "tf32":
        return CPU_TF32
    if a.text is not None:
        if os.path.exists(a.text) and not os.path.isfile(a.text):
            return f"--text {a.text}: not a regular file"
        try:
            with open(a.text, "rb") as f:
                size = os.fstat(f.fileno()).st_size
        except OSError as e:
            return f"--text {a.text}: {e.strerror or e}"
        if size == 0:
            return f"--text {a.text}: empty"
        # reprise keeps the last 10% for validation: a window of context + 1
        # bytes on each side of the split
        T = max(c["context"] for c in configs_from(a))
        if train and size < 10 * (T + 1):
            return (f"--text {a.text}: {size} bytes, fewer than the "
                    f"{10 * (T + 1)} reprise's 90%/10% split needs for a "
                    f"window of context {T} + 1 on each side")
    return None


def reprise_version(binary):
    """The line `BINARY version` prints ('reprise 0.1.0 (commit X)'), or
    None when it is not reprise."""
    try:
        p = subprocess.run([binary, "version"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0:
        return None
    for line in p.stdout.splitlines():
        if line.startswith("reprise "):
            return line.strip()
    return None


def configs_from(a):
    explicit = {k: getattr(a, k) for k in ("layers", "heads", "width", "context", "batch")}
    if a.preset:
        out = []
        for name in a.preset:
            c = dict(PRESETS[name])
            c.update({k: v for k, v in explicit.items() if v is not None})
            out.append(c)
        return out
    c = dict(PRESETS["launch"])
    c.update({k: v for k, v in explicit.items() if v is not None})
    return [c]


def write_or_die(path, text):
    """write_whole, or one line and exit 1 (a full device, a folder gone)."""
    try:
        write_whole(path, text)
    except OSError as e:
        die(f"cannot write {path}: {e.strerror or e}", 1)


def write_stdout(text):
    """text on stdout, or one line and exit 1 (stdout a full device, or
    closed: Python then has no sys.stdout)."""
    if sys.stdout is None:
        die("cannot write stdout: it is closed", 1)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as e:
        # stdout to /dev/null: the exit's own flush finds nothing to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        die(f"cannot write stdout: {e.strerror or e}", 1)


def write_outputs(a, rows, meta):
    for r in rows:
        for k in ("commit", "reprise_commit", "date"):
            r.setdefault(k, meta.get(k))
    if a.json:
        write_or_die(a.json, json.dumps(rows, indent=1) + "\n")
    if a.markdown:
        write_or_die(a.markdown, to_markdown(rows, meta))
    if not a.json and not a.markdown:
        write_stdout(json.dumps(rows, indent=1) + "\n")


def check_rows(rows):
    """Why rows is not a rows file of this script, or None."""
    if not isinstance(rows, list):
        return "not a JSON array of rows"
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            return f"row {i} is not an object"
        for k in ("side", "mode", "status"):
            if not isinstance(r.get(k), str):
                return f"row {i} has no {k!r}"
        c = r.get("config")
        if c is not None and not (isinstance(c, dict) and all(
                isinstance(c.get(k), int) for k in PRESETS["launch"])):
            return f"row {i}: its 'config' has no " + ", ".join(PRESETS["launch"])
        if not isinstance(r.get("machine", {}), dict):
            return f"row {i}: its 'machine' is not an object"
    return None


def from_json(a):
    """--from-json: the markdown of a rows file; 1 when it cannot be read,
    and --markdown is left as it was."""
    try:
        with open(a.from_json) as f:
            rows = json.load(f)
    except OSError as e:
        die(f"--from-json {a.from_json}: {e.strerror or e}", 1)
    except ValueError as e:
        die(f"--from-json {a.from_json}: not JSON ({e})", 1)
    why = check_rows(rows)
    if why:
        die(f"--from-json {a.from_json}: {why}", 1)
    meta = dict(rows[0].get("machine", {})) if rows else {}
    try:
        text = to_markdown(rows, meta)
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as e:
        die(f"--from-json {a.from_json}: a row does not fit "
            f"({type(e).__name__}: {e})", 1)
    if a.markdown:
        write_or_die(a.markdown, text)
    else:
        write_stdout(text)
    return 0


def run_child(a):
    cfg = json.loads(a.child_config)
    mode, attn = a.child.split(":")
    try:
        row = torch_child(a, cfg, mode, attn)
        row["status"] = "ok"
    except Exception as e:  # reported as a row by the parent
        row = {"side": "pytorch", "mode": mode, "attention": attn,
               "status": "failed", "reason": f"{type(e).__name__}: {e}"[:500]}
    with open(a.child_out, "w") as f:
        json.dump(row, f)
    return 0


class Stopped(BaseException):
    """SIGTERM (a `timeout`) or SIGINT (Ctrl-C) while measuring: the rows
    measured so far are still written (main), with a last row saying what
    was cut short. BaseException: a mode's `except Exception` does not
    swallow it."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def on_stop(signum, frame):
    """SIGTERM or SIGINT as Stopped: the finally blocks (the temporary
    folder) run, and subprocess.run kills the child it waits for."""
    raise Stopped(signum)


def stop_signals(handler):
    """SIGTERM and SIGINT to handler; SIGINT only where it is not ignored
    (a background job of a shell ignores it, and so does its child)."""
    signal.signal(signal.SIGTERM, handler)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, handler)


def main(argv=None):
    stop_signals(on_stop)
    # the options, output paths and --reprise first: nothing heavy before
    a = parse_args(argv)
    if a.from_json:
        return from_json(a)
    if a.check:
        return run_check(a)
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no torch
        torch = None
        torch_error = f"{type(e).__name__}: {e}"
    if a.device == "cuda" and torch is not None and not torch.cuda.is_available():
        die(f"--device cuda: PyTorch {torch.__version__} sees no CUDA device "
            "(--device cpu or auto measures on the CPU)")
    if a.device == "auto":
        a.device = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    on_gpu = a.device == "cuda"
    if not on_gpu and a.math == "tf32" and not a.child:
        die(CPU_TF32)
    a.threads = a.threads or os.cpu_count()
    a.lat_steps = a.lat_steps or (50 if on_gpu else 10)
    a.b2b_steps = a.b2b_steps or (200 if on_gpu else 20)
    a.mode_timeout = a.mode_timeout or (900 if on_gpu else 600)
    a.reprise_procs = a.reprise_procs or \
        (1 if on_gpu else min(a.threads, REPRISE_MAX_PROCS))
    if a.child:
        return run_child(a)
    for cfg in configs_from(a):  # the default --reprise-procs known now
        if a.reprise and (a.invocations > 0 or a.vocab is None) and \
                cfg["batch"] < a.reprise_procs:
            die(f"batch {cfg['batch']} over --reprise-procs {a.reprise_procs} "
                "(by default --threads): every processor needs rows of the batch")

    meta = machine_info()
    if torch is not None:
        meta["torch"] = torch.__version__
        if on_gpu:
            meta["cuda"] = torch.version.cuda
            meta.setdefault("gpu", torch.cuda.get_device_name())
    if a.reprise:
        # the commit the binary was built from (`reprise version`), which
        # can differ from the checkout running this script
        v = a.reprise_version
        if "(commit " in v:
            meta["reprise_commit"] = v.split("(commit ", 1)[1].rstrip(")\n ")
    a.device_name = meta.get("gpu") if on_gpu else "cpu"
    modes = a.modes or (GPU_MODES if on_gpu else CPU_MODES)  # '': the default
    modes = [m for m in modes if m != "none"]
    attns = a.attn
    rows = []
    stopped = None
    tmpdir = tempfile.mkdtemp(prefix="torch_gpt.")
    try:
        if a.vocab and a.reprise and a.invocations > 0:
            # reprise train takes its vocabulary from the text: another
            # --vocab would give the PyTorch model another LM head
            v = reprise_vocab(a, configs_from(a)[0], tmpdir, quiet=True)
            if v is not None and v != a.vocab:
                die(f"--vocab {a.vocab}: reprise train's vocabulary for the "
                    f"text is {v} (it has no --vocab: the two sides' LM heads "
                    f"would differ); give --vocab {v}, or no --vocab")
        for cfg in configs_from(a):
            common = {"config": cfg, "math": a.math, "machine": meta,
                      "loadavg_before": loadavg()}
            if on_gpu is False:
                common["threads"] = a.threads
            crows = []

            def done(r):
                r["loadavg_after"] = loadavg()
                for k, v in common.items():
                    r.setdefault(k, v)
                if r.get("status") == "ok":
                    add_mfu(r, cfg, a.cpu_peak_gflops)
                print(f"# {cfg_text(cfg)}: {row_label(r)}: {r.get('status')} "
                      f"lat {fmt_spread(r.get('latency_us'))} us, "
                      f"b2b {fmt_spread(r.get('b2b_us'))} us"
                      + (f" ({r.get('reason')})" if r.get("reason") else ""),
                      file=sys.stderr, flush=True)
                crows.append(r)

            now = "reprise's vocabulary run"  # what a stop cuts short
            try:
                if a.vocab:
                    cfg["vocab"] = a.vocab
                elif a.reprise:
                    cfg["vocab"] = reprise_vocab(a, cfg, tmpdir) or 65
                else:
                    cfg["vocab"] = 65
                if a.reprise and a.invocations > 0:
                    now = "reprise train (replay and eager)"
                    for r in reprise_rows(a, cfg, tmpdir):
                        done(r)
                if a.reprise and a.instantiate_procs:
                    now = "gpt_instantiate"
                    for r in instantiate_rows(a, cfg):
                        done(r)
                if torch is None:
                    done({"side": "pytorch", "mode": "all", "status": "skipped",
                          "reason": f"skipped: torch not importable ({torch_error})"})
                else:
                    for m in modes:
                        for at in (attns if m == "eager" else attns[:1]):
                            now = f"pytorch {m} ({at})"
                            done(run_torch_mode(a, cfg, m, at, tmpdir))
            except (Stopped, KeyboardInterrupt) as e:
                stop_signals(signal.SIG_IGN)  # a second one: the rows still
                stopped = getattr(e, "signum", signal.SIGINT)
                done({"side": "run", "mode": "interrupted", "status": "interrupted",
                      "reason": f"{signal.Signals(stopped).name} during {now}: "
                      "it and what was still to run are not measured"})
            rows += crows
            if stopped:
                break
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    # the rows are measured: a signal now would only lose them
    stop_signals(signal.SIG_IGN)
    write_outputs(a, rows, meta)
    return 128 + stopped if stopped else 0


def run_torch_mode(a, cfg, mode, attn, tmpdir):
    out = os.path.join(tmpdir, f"child_{mode}_{attn}.json")
    argv = [sys.executable, os.path.abspath(__file__), "--child", f"{mode}:{attn}",
            "--child-out", out, "--child-config", json.dumps(cfg),
            "--device", a.device, "--threads", str(a.threads), "--math", a.math,
            "--adamw", a.adamw, "--lr", str(a.lr), "--beta2", str(a.beta2),
            "--weight-decay", str(a.weight_decay), "--clip", str(a.clip),
            "--seed", str(a.seed), "--warmup", str(a.warmup),
            "--repeats", str(a.repeats), "--lat-steps", str(a.lat_steps),
            "--b2b-steps", str(a.b2b_steps), "--profile-steps", str(a.profile_steps)]
    env = dict(os.environ)
    if a.device == "cpu":
        env["OMP_NUM_THREADS"] = str(a.threads)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, env=env,
                           timeout=a.mode_timeout)
    except subprocess.TimeoutExpired:
        return {"side": "pytorch", "mode": mode, "attention": attn, "status": "timeout",
                "reason": f"over the {a.mode_timeout:.0f} s budget (--mode-timeout)"}
    try:
        with open(out) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"side": "pytorch", "mode": mode, "attention": attn, "status": "failed",
                "reason": f"exit {p.returncode}: {(p.stderr or '').strip()[-400:]}"}


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except Stopped as e:  # before or after the measuring (or in a child)
        sys.exit(128 + e.signum)
