#!/usr/bin/env python3
"""tools/gpt_fixture.py — writes test/fixtures/gpt_tiny.bin and
test/fixtures/gpt_odd.bin, the PyTorch references that test/test_gpt.c
checks train/gpt.c against.

Needs PyTorch (`pip install torch`); the test suite does not: the fixtures
are committed. Run from the repository root:

    python3 tools/gpt_fixture.py [out [L NH C T V B SEED]]
        (default: test/fixtures/gpt_tiny.bin 2 2 32 16 64 4 1234)
    python3 tools/gpt_fixture.py test/fixtures/gpt_odd.bin 1 4 20 3 7 3 1234
        (the odd shapes: head size 5, context 3, batch 3, vocabulary 7)

The model is nanoGPT's (pre-LayerNorm blocks, causal self-attention with the
qkv projection split q|k|v, MLP 4x wide with tanh-GELU, learned token and
position embeddings, final LayerNorm, LM head tied to wte, mean
cross-entropy), written out below with the parameter names and order of
train/gpt.h. Tiny config: 2 layers, 2 heads, width 32, context 16, batch 4,
vocabulary 64. Initial weights as nanoGPT initialises them (normal 0.02,
residual projections 0.02/sqrt(2L), zero biases, unit LayerNorm weights)
from torch.manual_seed(1234), rounded to float32; one batch of random
tokens. The reference is computed in float64 from those float32 values
(so it carries no float32 rounding of its own), then stored as float32:
the loss, every parameter's gradient, then three steps of
clip_grad_norm_(max_norm=1.0) + torch.optim.AdamW(betas=(0.9, 0.95),
eps=1e-8, weight_decay=0.1 on matrices and embeddings, 0 elsewhere;
foreach=False) on the same batch with the learning rates LRS (one per step,
as the per-replay argument), and the parameters after them.

Layout (little-endian):
  bytes 0..7   magic "RPGPTFX1"
  u32 x 8      L, NH, C, T, V, B, steps, tensors
  f32 x 5      beta1, beta2, eps, weight_decay, max_norm
  f32 x steps  learning rate of each step
  i32 x B*T    inputs, then i32 x B*T targets
  f32 x steps  the loss before each step's update (step 1: at the initial
               weights)
  then, for each tensor in train/gpt.h's order: initial weights; then for
  each tensor: the gradient at the initial weights (before clipping); then
  for each tensor: the weights after the `steps` updates.
"""
import math
import struct
import sys

import torch
import torch.nn.functional as F

L, NH, C, T, V, B = 2, 2, 32, 16, 64, 4
LRS = [1e-3, 8e-4, 6e-4]
BETAS, EPS, WD, MAX_NORM = (0.9, 0.95), 1e-8, 0.1, 1.0


def param_table():
    """(name, shape, std or None, constant) in train/gpt.h's order."""
    t = [("wte", (V, C), 0.02, 0), ("wpe", (T, C), 0.02, 0)]
    rstd = 0.02 / math.sqrt(2 * L)
    for l in range(L):
        h = "h%d." % l
        t += [
            (h + "ln1.w", (C,), None, 1), (h + "ln1.b", (C,), None, 0),
            (h + "attn.qkv.w", (3 * C, C), 0.02, 0),
            (h + "attn.qkv.b", (3 * C,), None, 0),
            (h + "attn.proj.w", (C, C), rstd, 0),
            (h + "attn.proj.b", (C,), None, 0),
            (h + "ln2.w", (C,), None, 1), (h + "ln2.b", (C,), None, 0),
            (h + "mlp.fc.w", (4 * C, C), 0.02, 0),
            (h + "mlp.fc.b", (4 * C,), None, 0),
            (h + "mlp.proj.w", (C, 4 * C), rstd, 0),
            (h + "mlp.proj.b", (C,), None, 0),
        ]
    t += [("lnf.w", (C,), None, 1), ("lnf.b", (C,), None, 0)]
    return t


def forward(p, x, y):
    hs = C // NH
    pos = torch.arange(T)
    h = p["wte"][x] + p["wpe"][pos]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        g = lambda n: p["h%d.%s" % (l, n)]
        a = F.layer_norm(h, (C,), g("ln1.w"), g("ln1.b"), 1e-5)
        qkv = a @ g("attn.qkv.w").T + g("attn.qkv.b")
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        o = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        h = h + o @ g("attn.proj.w").T + g("attn.proj.b")
        a = F.layer_norm(h, (C,), g("ln2.w"), g("ln2.b"), 1e-5)
        f = F.gelu(a @ g("mlp.fc.w").T + g("mlp.fc.b"), approximate="tanh")
        h = h + f @ g("mlp.proj.w").T + g("mlp.proj.b")
    h = F.layer_norm(h, (C,), p["lnf.w"], p["lnf.b"], 1e-5)
    logits = h @ p["wte"].T
    return F.cross_entropy(logits.view(-1, V), y.view(-1))


def main():
    global L, NH, C, T, V, B
    out = sys.argv[1] if len(sys.argv) > 1 else "test/fixtures/gpt_tiny.bin"
    seed = 1234
    if len(sys.argv) > 2:
        if len(sys.argv) != 9:
            sys.exit("usage: gpt_fixture.py [out [L NH C T V B SEED]]")
        L, NH, C, T, V, B, seed = (int(a) for a in sys.argv[2:9])
    torch.manual_seed(seed)
    table = param_table()
    init = {}
    for name, shape, std, const in table:
        if std is None:
            init[name] = torch.full(shape, float(const), dtype=torch.float32)
        else:
            init[name] = torch.randn(shape, dtype=torch.float32) * std
    x = torch.randint(0, V, (B, T), dtype=torch.int64)
    y = torch.randint(0, V, (B, T), dtype=torch.int64)
    params = {n: init[n].double().clone().requires_grad_(True)
              for n, _, _, _ in table}
    order = [params[n] for n, _, _, _ in table]
    decay = [p for (n, s, _, _), p in zip(table, order) if len(s) >= 2]
    other = [p for (n, s, _, _), p in zip(table, order) if len(s) < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": other, "weight_decay": 0.0}],
                            lr=LRS[0], betas=BETAS, eps=EPS, foreach=False)
    losses, grads = [], None
    for lr in LRS:
        opt.zero_grad()
        loss = forward(params, x, y)
        loss.backward()
        losses.append(loss.item())
        if grads is None:
            grads = [p.grad.detach().clone() for p in order]
        torch.nn.utils.clip_grad_norm_(order, MAX_NORM, foreach=False)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
    with open(out, "wb") as f:
        f.write(b"RPGPTFX1")
        f.write(struct.pack("<8I", L, NH, C, T, V, B, len(LRS), len(table)))
        f.write(struct.pack("<5f", BETAS[0], BETAS[1], EPS, WD, MAX_NORM))
        f.write(struct.pack("<%df" % len(LRS), *LRS))
        f.write(struct.pack("<%di" % (B * T), *x.flatten().tolist()))
        f.write(struct.pack("<%di" % (B * T), *y.flatten().tolist()))
        f.write(struct.pack("<%df" % len(losses), *losses))

        def put(ts):
            for t in ts:
                v = t.detach().flatten().tolist()
                f.write(struct.pack("<%df" % len(v), *v))

        put([init[n] for n, _, _, _ in table])
        put(grads)
        put(order)
    print("%s: loss %.6f -> %.6f after %d steps" %
          (out, losses[0], losses[-1], len(LRS)))


if __name__ == "__main__":
    main()
