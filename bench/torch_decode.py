#!/usr/bin/env python3
"""Greedy decoding of one GPT checkpoint by `reprise generate` and by
PyTorch (gpt-fast style: eager with a KV cache; on a GPU also the decode
step captured in a torch.cuda.CUDAGraph), checked for the same bytes and
timed the same way. Trains nothing.

  python3 bench/torch_decode.py --reprise build/reprise --weights W.ckpt \\
      [--weights W2.ckpt ...] [--prompt TEXT] [--tokens N] \\
      [--device cpu|cuda|auto] [--threads N] [--repeats R] \\
      [--json rows.json] [--markdown rows.md]

W.ckpt: a checkpoint of `reprise train --model gpt ... --save-weights
W.ckpt`. The PyTorch model is bench/torch_gpt.py's (build_model, its decode
method: the forward of one token at one position, its key and value
written into per-block caches, attention over positions 0..pos; the
weights read by torch_gpt.read_checkpoint). Per checkpoint, --repeats
times, alternating so that a change in the machine's load hits both:

  reprise   `reprise generate --load-weights W --tokens N --temperature 0
            [--prompt P] --backend cpu|cuda`: one replay of the recorded
            decode step per position;
  pytorch   each mode in a process of its own: eager (the decode step op
            by op, the caches sliced to positions 0..pos), and on a GPU
            cudagraph (the step with static shapes, the positions past pos
            masked, captured once and replayed per position).

Both sides decode greedily (the first largest logit) with reprise's window
policy: a prompt longer than the context decodes its last T bytes, and
when the context T is full the last T/2 tokens are decoded again from
position 0; so the whole output is compared, past the context too. Both
print the prompt, then each byte as it is drawn (a write and a flush per
byte, into a pipe to this script), then a newline; control bytes print as
reprise prints them (`?`: docs/gpt.md "Decoding"), so two control bytes
are not told apart. The outputs must be byte for byte the same, every
repeat of every side; on a difference the first one is shown with
PyTorch's two largest logits at that token (a gap within float rounding
is a near-tie, not a wrong model).

Time: tokens/s = N over the span reprise generate reports on stderr
(its `... tokens/s generated`): from after the prompt is printed to the
last byte's flush, the replays of the prompt's last window and the writes
to stdout included, the checkpoint's load and the decode step's recording
and instantiation left out. PyTorch's is the same span in its process:
the prompt's positions decoded, then N tokens, each written and flushed;
the weights' load, the caches' allocation and (cudagraph) the warm-up and
capture left out. Each figure is min/median/max over --repeats processes,
none warmed up beforehand (a cold first step is in both). reprise
generate runs one CPU worker with a one-threaded BLAS: --threads (default
1) is PyTorch's torch.set_num_threads on the CPU.

Exit status: 0 when every output is the same and the rows are written; 1
when outputs differ, a run fails or times out (the rows are written all
the same, saying so), or --json/--markdown cannot be written; 2 on bad
usage (checked before anything runs: the options, the output paths,
--reprise answering `version`, each --weights a GPT checkpoint, the
prompt's bytes in each checkpoint's vocabulary, --device cuda or the
cudagraph mode where PyTorch has no CUDA); 77 when PyTorch is not
importable (nothing runs).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outfile import out_path_error  # noqa: E402 (bench/outfile.py)
import torch_gpt as tg  # noqa: E402 (the model, the loader, the stamp)

MODES = ["eager", "cudagraph"]
MAX_TOKENS = 1000000  # reprise generate's --tokens
RATE = re.compile(r"reprise generate: (\d+) bytes? in ([0-9.]+) s "
                  r"\(([0-9.]+) tokens/s generated")


def die(msg, status=2):
    print(f"torch_decode.py: {msg}", file=sys.stderr)
    sys.exit(status)


class Printer:
    """reprise's text printer (tools/cli.c rp_cli_text_put): control bytes
    other than newline and tab, and DEL, as '?'; a C2 waits for the next
    byte, and C2 80..C2 9F (a C1 control) is one '?'."""

    def __init__(self, out):
        self.out, self.held = out, False

    def put(self, ch):
        b = b""
        if self.held:
            self.held = False
            if 0x80 <= ch <= 0x9f:
                self.out(b"?")
                return
            b = b"\xc2"
        if ch == 0xc2:
            self.held = True
        else:
            ch = ch if ch in (10, 9) or (ch >= 32 and ch != 127) else ord("?")
            b += bytes([ch])
        if b:
            self.out(b)

    def end(self):
        if self.held:
            self.out(b"\xc2")
        self.held = False


def greedy_positions(T, plen, n):
    """reprise's decode order (rp_gpt_generate): (position, index of the
    token decoded there, whether its logits draw the next token), per
    replay, for a prompt of plen tokens and n tokens to generate."""
    total, filled = plen + n, plen
    have, pos = plen - min(plen, T), 0
    while filled < total:
        if pos == T:  # full: the last T/2 tokens again from position 0
            have -= T // 2
            pos = 0
        draw = have + 1 == filled
        yield pos, have, draw
        pos += 1
        have += 1
        if draw:
            filled += 1


# ------------------------------------------------------------ the child

def child(a):
    """One PyTorch decode (--child MODE): the bytes on stdout as reprise
    generate prints them, the figures into --child-out."""
    import torch
    ck = tg.read_checkpoint(a.weights[0])
    cfg, vocab = ck["config"], ck["vocab"]
    L, NH, C, T = cfg["layers"], cfg["heads"], cfg["width"], cfg["context"]
    on_gpu = a.device == "cuda"
    dev = torch.device(a.device)
    row = {"torch": torch.__version__}
    if on_gpu:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        row["device"] = torch.cuda.get_device_name()
        row["cuda"] = torch.version.cuda
    else:
        torch.set_num_threads(a.threads)
        row["device"] = "cpu"
        row["threads"] = torch.get_num_threads()
    torch.set_float32_matmul_precision("highest")
    t_setup = time.perf_counter()
    with torch.inference_mode():
        model = tg.build_model(torch, cfg, "manual")
        params = list(model.parameters())
        for p, w in zip(params, ck["weights"]):
            p.copy_(torch.frombuffer(w, dtype=torch.float32).view(p.shape))
        model = model.to(dev).eval()
    del ck
    prompt = [vocab.index(c) for c in bytes.fromhex(a.child_prompt)]
    n, plen = a.tokens, len(prompt)
    caches = [(torch.zeros(1, NH, T, C // NH, device=dev),
               torch.zeros(1, NH, T, C // NH, device=dev)) for _ in range(L)]
    tok = torch.zeros(1, 1, dtype=torch.long, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    margins = [] if a.child_margins else None

    if a.child == "eager":
        def step(t, p):
            tok.fill_(t)
            pos.fill_(p)
            lg = model.decode(tok, pos, caches, upto=p + 1)
            if margins is not None:
                v, i = torch.topk(lg, min(2, lg.numel()))
                margins.append([[int(x), float(y)] for x, y in zip(i, v)])
            return int(torch.argmax(lg))
    elif a.child == "cudagraph":
        with torch.inference_mode():
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model.decode(tok, pos, caches)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                logits = model.decode(tok, pos, caches)
                best = torch.argmax(logits)
        torch.cuda.synchronize()

        def step(t, p):
            tok.fill_(t)
            pos.fill_(p)
            g.replay()
            if margins is not None:
                v, i = torch.topk(logits, min(2, logits.numel()))
                margins.append([[int(x), float(y)] for x, y in zip(i, v)])
            return int(best)  # waits for the replay
    else:
        raise ValueError(f"unknown mode {a.child}")
    if on_gpu:
        torch.cuda.synchronize()
    row["setup_s"] = time.perf_counter() - t_setup

    out = sys.stdout.buffer

    def write(b):
        out.write(b)
        out.flush()
    pr = Printer(write)
    for t in prompt:
        pr.put(vocab[t])
    toks = list(prompt)
    with torch.inference_mode():
        t0 = time.perf_counter()
        for p, i, draw in greedy_positions(T, plen, n):
            nxt = step(toks[i], p)
            if draw:
                toks.append(nxt)
                pr.put(vocab[nxt])
        s = time.perf_counter() - t0
    pr.end()
    write(b"\n")
    row.update(seconds=s, tokens_per_s=n / s if s > 0 else None,
               tokens=toks[plen:])
    if margins is not None:  # per generated token: the drawing replay's
        row["margins"] = [m for m, (_, _, d) in
                          zip(margins, greedy_positions(T, plen, n)) if d]
    with open(a.child_out, "w") as f:
        json.dump(row, f)
    return 0


# ------------------------------------------------------------ the parent

def run(cmd, a, env=None):
    """(exit status, stdout bytes, stderr text) or (None, b"", why)."""
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=a.timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, b"", f"timeout: over {a.timeout:g} s (--timeout)"
    except OSError as e:
        return None, b"", f"{type(e).__name__}: {e}"
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def reprise_cmd(a, w):
    cmd = [a.reprise, "generate", "--load-weights", w, "--tokens",
           str(a.tokens), "--temperature", "0", "--backend", a.device]
    if a.prompt is not None:
        cmd += ["--prompt", a.prompt]
    return cmd


def torch_cmd(a, w, mode, prompt, out, margins=False):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode,
           "--child-out", out, "--child-prompt", prompt.hex(),
           "--weights", w, "--tokens", str(a.tokens), "--device", a.device,
           "--threads", str(a.threads)]
    return cmd + (["--child-margins"] if margins else [])


def quoted(cmd):
    return " ".join(shlex.quote(c) for c in cmd)


def first_difference(ref, got):
    """The first byte offset where got differs from ref, or None."""
    for i, (x, y) in enumerate(zip(ref, got)):
        if x != y:
            return i
    return None if len(ref) == len(got) else min(len(ref), len(got))


def token_at(prompt, vocab, toks, offset):
    """The index of the generated token whose bytes reach output offset
    `offset` (the printer's output of prompt + toks)."""
    buf = bytearray()
    pr = Printer(buf.extend)
    for c in prompt:
        pr.put(c)
    for k, t in enumerate(toks):
        pr.put(vocab[t])
        if len(buf) > offset:
            return k
    return len(toks)


def show(b):
    return repr(bytes(b))[2:-1]


def diagnose(a, w, ck, prompt, ref, got, row, tmp):
    """The first difference between reprise's output (ref) and a PyTorch
    run's (got): where, and PyTorch's two largest logits there (a rerun of
    the eager mode recording them)."""
    off = first_difference(ref, got)
    vocab, T = ck["vocab"], ck["config"]["context"]
    d = {"offset": off, "reprise": show(ref[max(0, off - 20):off + 20]),
         "pytorch": show(got[max(0, off - 20):off + 20])}
    k = token_at(prompt, vocab, row.get("tokens", []), off)
    d["token"] = k
    # positions decoded before token k's draw: past T, a wrap re-decoded
    # the last T/2 tokens
    d["within_context"] = min(len(prompt), T) + k <= T
    mp = os.path.join(tmp, "margins.json")
    st, _, err = run(torch_cmd(a, w, "eager", prompt, mp, margins=True), a)
    try:
        with open(mp) as f:
            m = json.load(f)["margins"][k]
        d["pytorch_top2"] = [[show(vocab[t:t + 1]), v] for t, v in m]
        if len(m) == 2:
            top = max(abs(m[0][1]), abs(m[1][1])) or 1.0
            d["gap_relative"] = (m[0][1] - m[1][1]) / top
    except (OSError, ValueError, KeyError, IndexError) as e:
        d["pytorch_top2_error"] = f"{type(e).__name__}: {e} {err[-200:]}"
    return d


def cfg_text(c):
    return (f"{tg.plural(c['layers'], 'layer')}, {tg.plural(c['heads'], 'head')}, "
            f"width {c['width']}, context {c['context']}, vocab {c['vocab']}")


def measure(a, w, ck, prompt, meta, modes, tmp):
    """The rows of one checkpoint: reprise generate, then each PyTorch
    mode, --repeats times in turn; every output compared with reprise's
    first."""
    cfg = dict(ck["config"])
    common = {"config": cfg, "weights": w, "tokens": a.tokens,
              "prompt_bytes": len(prompt), "machine": meta,
              "loadavg_before": tg.loadavg()}
    sides = [("reprise", "generate")] + [("pytorch", m) for m in modes]
    res = {s: {"rates": [], "outs": [], "err": None, "last": {}} for s in sides}
    rcmd = reprise_cmd(a, w)
    for i in range(a.repeats):
        for side in sides:
            r = res[side]
            if r["err"]:
                continue
            if side[0] == "reprise":
                st, out, err = run(rcmd, a)
                m = RATE.search(err) if st == 0 else None
                if not m:
                    r["err"] = (err.strip().splitlines() or ["?"])[-1][:400] \
                        if st is not None else err
                    r["err"] = (f"exit {st}: " if st is not None else "") + r["err"]
                    continue
                r["rates"].append(float(m.group(3)))
            else:
                jp = os.path.join(tmp, f"{side[1]}_{i}.json")
                env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
                st, out, err = run(torch_cmd(a, w, side[1], prompt, jp), a, env)
                try:
                    with open(jp) as f:
                        r["last"] = json.load(f)
                    os.unlink(jp)
                except (OSError, ValueError):
                    r["err"] = (f"exit {st}: " if st is not None else "") + \
                        (err.strip().splitlines() or ["?"])[-1][:400]
                    continue
                r["rates"].append(r["last"]["tokens_per_s"])
            r["outs"].append(out)
            print(f"# {os.path.basename(w)}: {side[0]} {side[1]} run {i + 1}: "
                  f"{r['rates'][-1]:.0f} tokens/s", file=sys.stderr, flush=True)
    rows = []
    ref = res[sides[0]]["outs"][0] if res[sides[0]]["outs"] else None
    for side in sides:
        r = res[side]
        row = dict(common, side=side[0], mode=side[1], loadavg_after=tg.loadavg())
        if side[0] == "reprise":
            row.update(device=a.device, threads=1 if a.device == "cpu" else None,
                       command=quoted(rcmd),
                       span="reprise generate's stderr figure: the prompt's "
                       "replays and the writes to stdout included")
        else:
            row.update(device=r["last"].get("device", a.device),
                       threads=r["last"].get("threads"),
                       torch=r["last"].get("torch"),
                       setup_s=r["last"].get("setup_s"),
                       command=quoted(torch_cmd(a, w, side[1], prompt, "ROW.json")),
                       span="the same span: the prompt's positions decoded, "
                       "then each token drawn, written and flushed")
        if r["err"]:
            row.update(status="failed", reason=r["err"])
        else:
            row.update(status="ok", invocations=len(r["rates"]),
                       tokens_per_s=tg.spread(r["rates"]))
        if ref is not None and r["outs"]:
            same = all(o == ref for o in r["outs"])
            row["same_bytes"] = same
            if not same:
                bad = next(o for o in r["outs"] if o != ref)
                row["status"] = "differs"
                if side[0] == "pytorch":
                    row["first_difference"] = diagnose(
                        a, w, ck, prompt, ref, bad, r["last"], tmp)
                else:
                    row["first_difference"] = {
                        "offset": first_difference(ref, bad),
                        "note": "reprise generate printed other bytes in "
                        "another run"}
        rows.append(row)
    if ref is not None:
        rows[0]["output_bytes"] = len(ref)
    return rows


def fmt_rate(s):
    if not s:
        return "–"
    return f"{s['median']:.0f} ({s['min']:.0f}–{s['max']:.0f})"


LEGEND = (
    "tokens/s: generated tokens over the span reprise generate reports on "
    "stderr (from after the prompt is printed to the last byte's flush: the "
    "replays of the prompt's last window and the writes to stdout, a pipe, "
    "included; the checkpoint's load and the decode step's recording and "
    "instantiation left out), and the same span in PyTorch's process (its "
    "weights' load, caches and graph capture left out); min/median/max over "
    "processes, none warmed up beforehand. Same bytes: the whole output "
    "(prompt, generated bytes, newline) equal to reprise's, byte for byte, "
    "in every run; both sides decode greedily with reprise's window "
    "policy (when the context is full, the last T/2 tokens are decoded "
    "again from position 0), so bytes past the context are compared too.")


def to_markdown(rows, meta):
    lines = ["# GPT decoding: reprise generate and PyTorch", ""]
    stamp = [f"commit {meta.get('commit')}", meta.get("date", ""),
             f"CPU {meta.get('cpu')} ({meta.get('cores')} cores)"]
    if meta.get("gpu"):
        stamp.append(f"GPU {meta['gpu']}")
    if meta.get("torch"):
        stamp.append(f"PyTorch {meta['torch']}")
    if meta.get("reprise"):
        stamp.append(meta["reprise"])
    loads = [x[0] for r in rows for x in (r.get("loadavg_before"),
                                          r.get("loadavg_after")) if x]
    if loads:
        stamp.append(f"1-minute load average {min(loads):.1f}–{max(loads):.1f} "
                     f"on {meta.get('cores')} cores")
    lines += ["; ".join(stamp) + ".", "", "Command:", "",
              "    " + meta.get("command", ""), ""]
    ws = []
    for r in rows:
        if r["weights"] not in ws:
            ws.append(r["weights"])
    for w in ws:
        rs = [r for r in rows if r["weights"] == w]
        c = rs[0]["config"]
        lines += [f"## {cfg_text(c)}: {rs[0]['tokens']} tokens from a "
                  f"{rs[0]['prompt_bytes']}-byte prompt", "",
                  "| side, mode | device (threads) | tokens/s median (min–max) "
                  "| same bytes as reprise | notes |",
                  "| --- | --- | --- | --- | --- |"]
        for r in rs:
            dev = r.get("device") or "–"
            if r.get("threads"):
                dev += f" ({r['threads']})"
            same = {True: "yes", False: "**no**"}.get(r.get("same_bytes"), "–")
            notes = []
            if r.get("reason"):
                notes.append(r["reason"][:120])
            d = r.get("first_difference")
            if d:
                notes.append(f"first difference at byte {d.get('offset')}"
                             + (f", token {d['token']}" if "token" in d else ""))
            if r.get("setup_s") is not None:
                notes.append(f"setup {r['setup_s']:.2f} s")
            lines.append(f"| {r['side']} {r['mode']} | {dev} | "
                         f"{fmt_rate(r.get('tokens_per_s'))} | {same} | "
                         f"{'; '.join(notes)} |")
        lines.append("")
    lines += [LEGEND, ""]
    return "\n".join(lines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reprise", default=os.path.join(tg.REPO, "build", "reprise"),
                    type=tg.file_name, help="the reprise binary (default build/reprise)")
    ap.add_argument("--weights", action="append", default=[], type=tg.file_name,
                    help="a GPT checkpoint (reprise train --model gpt "
                    "--save-weights); repeatable: one section each")
    ap.add_argument("--prompt", default=None,
                    help="the prompt (default: reprise generate's, a newline "
                    "or the vocabulary's first byte)")
    ap.add_argument("--tokens", type=tg.int_at_least(1, "a positive integer"),
                    default=200, help=f"tokens to generate (1..{MAX_TOKENS}, "
                    "default 200)")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="both sides' (reprise generate --backend); auto: "
                    "cuda when PyTorch sees one")
    ap.add_argument("--threads", type=tg.positive_int, default=1,
                    help="PyTorch's threads on the CPU (default 1, as reprise "
                    "generate's one worker with a one-threaded BLAS)")
    ap.add_argument("--modes", default=None,
                    type=tg.name_list(MODES, "modes"),
                    help="PyTorch modes: eager, cudagraph (GPU); default eager "
                    "on the CPU, both on a GPU")
    ap.add_argument("--repeats", type=tg.positive_int, default=3,
                    help="processes per side and checkpoint (default 3)")
    ap.add_argument("--timeout", type=tg.positive_float, default=600,
                    help="seconds per process (default 600)")
    ap.add_argument("--json", default=None, type=tg.file_name)
    ap.add_argument("--markdown", default=None, type=tg.file_name)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-prompt", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-margins", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return a
    if not a.weights:
        ap.error("--weights: a checkpoint is needed (reprise train --model "
                 "gpt ... --save-weights FILE)")
    if a.tokens > MAX_TOKENS:
        ap.error(f"--tokens {a.tokens}: reprise generate takes 1..{MAX_TOKENS}")
    if a.prompt == "":
        ap.error("--prompt: empty (reprise generate refuses it)")
    if a.modes and "cudagraph" in a.modes and a.device == "cpu":
        ap.error("--modes cudagraph: a CUDA graph needs --device cuda")
    outs = [(o, p) for o, p in (("--json", a.json), ("--markdown", a.markdown)) if p]
    for opt, path in outs:
        why = out_path_error(path)
        if why:
            ap.error(f"{opt} {path}: {why}")
    if len(outs) == 2 and os.path.realpath(a.json) == os.path.realpath(a.markdown):
        ap.error("--json and --markdown name the same file")
    a.reprise_version = tg.reprise_version(a.reprise)
    if a.reprise_version is None:
        ap.error(f"--reprise {a.reprise}: not reprise ('{a.reprise} version' "
                 "prints no 'reprise ...' line)")
    return a


def main(argv=None):
    a = parse_args(argv)
    if a.child:
        return child(a)
    cks = []
    for w in a.weights:
        try:
            ck = tg.read_checkpoint(w)
        except OSError as e:
            die(f"--weights {w}: {e.strerror or e}")
        except ValueError as e:
            die(f"--weights {w}: {e}")
        vocab = ck["vocab"]
        if a.prompt is not None:
            prompt = os.fsencode(a.prompt)
            for i, c in enumerate(prompt):
                if c not in vocab:
                    die(f"--prompt: 0x{c:02x} (its byte at offset {i}) is not "
                        f"in the vocabulary of {w}")
        else:  # reprise generate's default
            prompt = b"\n" if b"\n"[0] in vocab else vocab[:1]
        cks.append((w, ck, prompt))
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure: no torch
        print(f"torch_decode.py: skipped: PyTorch not importable "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        return 77
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    elif a.device == "cuda" and not torch.cuda.is_available():
        die(f"--device cuda: PyTorch {torch.__version__} sees no CUDA device")
    if a.modes and "cudagraph" in a.modes and a.device != "cuda":
        die("--modes cudagraph: a CUDA graph needs a CUDA device (PyTorch "
            "sees none)")
    modes = a.modes or (MODES if a.device == "cuda" else ["eager"])
    meta = tg.machine_info()
    meta["torch"] = torch.__version__
    meta["reprise"] = a.reprise_version
    if a.device == "cuda":
        meta.setdefault("gpu", torch.cuda.get_device_name())
    rows = []
    with tempfile.TemporaryDirectory(prefix="torch_decode.") as tmp:
        for w, ck, prompt in cks:
            rows += measure(a, w, ck, prompt, meta, modes, tmp)
    bad = [r for r in rows if r["status"] != "ok"]
    for r in bad:
        d = r.get("first_difference") or {}
        print(f"torch_decode.py: {os.path.basename(r['weights'])}: {r['side']} "
              f"{r['mode']}: {r['status']}"
              + (f": {r['reason']}" if r.get("reason") else "")
              + (f": first difference at output byte {d.get('offset')}"
                 f" (generated token {d.get('token')}, "
                 f"{'within' if d.get('within_context') else 'past'} the "
                 f"first context): reprise {d.get('reprise')!r}, PyTorch "
                 f"{d.get('pytorch')!r}; PyTorch's two largest logits there "
                 f"{d.get('pytorch_top2')} (gap {d.get('gap_relative', 0):.2g} "
                 "of the largest)" if d else ""),
              file=sys.stderr)
    for r in rows:
        r.setdefault("commit", meta.get("commit"))
        r.setdefault("date", meta.get("date"))
    try:
        if a.json:
            tg.write_whole(a.json, json.dumps(rows, indent=1) + "\n")
        if a.markdown:
            tg.write_whole(a.markdown, to_markdown(rows, meta))
        if not a.json and not a.markdown:
            sys.stdout.write(to_markdown(rows, meta))
    except OSError as e:
        die(f"cannot write the rows: {e.strerror or e}", 1)
    if not bad:
        print("torch_decode.py: reprise and PyTorch printed the same bytes "
              f"({tg.plural(len(cks), 'checkpoint')}, every run)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
