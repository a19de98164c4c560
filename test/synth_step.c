/* test/synth_step.c — the synthetic transformer-shaped step (synth_step.h).
 * Each layer: forward ln1, attn.{qkv,score,softmax,proj}, ln2,
 * mlp.{fc,act,proj} (rp.axpy/rp.scale on small f32 instances named
 * h{l}.*), a residual edge past each block, a copy of the block's input to
 * the other processor (h{l}.attn.in.copy, h{l}.mlp.in.copy); backward the
 * same ops reversed (h{l}.*.bwd). */
#include "synth_step.h"

#include "kernels/tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct synth {
  rp_runtime *rt;
  rp_graph *g;
  rp_kernel_tasks k;
  rp_mem sys;
  rp_status st;
  rp_op_id last; /* the op the next chained op follows */
  int variant;
} synth;

static const rp_scalar_args ARGS = {.value = 0.5f, .n = 0};

#define NOLAYER UINT32_MAX

/* "h{l}.suffix", or the suffix alone for NOLAYER. */
static void layer_name(char *buf, size_t cap, const char *suffix, uint32_t l) {
  if (l == NOLAYER)
    snprintf(buf, cap, "%s", suffix);
  else
    snprintf(buf, cap, "h%u.%s", l, suffix);
}

static rp_inst inst(synth *s, const char *fmt, uint32_t l) {
  char name[RP_NAME_MAX + 1];
  layer_name(name, sizeof name, fmt, l);
  rp_rect r = rp_rect_1d(0, 15);
  rp_inst i = {0};
  if (!s->st)
    s->st = rp_instance_create(s->rt, s->sys, RP_F32, &r, NULL, &i);
  if (!s->st)
    s->st = rp_instance_set_name(s->rt, i, name);
  return i;
}

static rp_op_id op_named(synth *s, rp_op_id id, const char *fmt, uint32_t l) {
  char name[RP_NAME_MAX + 1];
  layer_name(name, sizeof name, fmt, l);
  if (!s->st)
    s->st = rp_graph_set_op_name(s->g, id, name);
  return id;
}

static void edge(synth *s, rp_op_id a, rp_op_id b) {
  if (!s->st)
    s->st = rp_graph_add_edge(s->g, a, b);
}

/* axpy x -> y on proc, after s->last (and after `also` unless UINT32_MAX). */
static rp_op_id axpy(synth *s, rp_inst x, rp_inst y, rp_proc proc,
                     uint64_t cost, const char *fmt, uint32_t l,
                     rp_op_id also) {
  rp_access acc[2] = {{x, RP_READ, RP_REDOP_NONE}, {y, RP_RW, RP_REDOP_NONE}};
  rp_launch ln = {.task = s->k.axpy,
                  .proc = proc,
                  .accesses = acc,
                  .naccess = 2,
                  .args = &ARGS,
                  .args_size = sizeof ARGS,
                  .cost_ns = cost};
  rp_op_id id = 0;
  if (!s->st)
    s->st = rp_graph_add_task(s->g, &ln, &id);
  if (s->st)
    return 0;
  if (s->last != UINT32_MAX)
    edge(s, s->last, id);
  if (also != UINT32_MAX && also != s->last)
    edge(s, also, id);
  s->last = id;
  return op_named(s, id, fmt, l);
}

static rp_op_id copy(synth *s, rp_inst src, rp_inst dst, const char *fmt,
                     uint32_t l) {
  rp_copy c = {.src = src, .dst = dst, .domain = RP_DOMAIN_SRC};
  rp_op_id id = 0;
  if (!s->st)
    s->st = rp_graph_add_copy(s->g, &c, &id);
  if (s->st)
    return 0;
  if (s->last != UINT32_MAX)
    edge(s, s->last, id);
  s->last = id;
  return op_named(s, id, fmt, l);
}

/* One block (attn or mlp) of layer l, forward: its ops on proc p, the
 * input copied to the other processor first, a residual edge past it. */
static void block(synth *s, uint32_t l, const char *const *names, uint32_t n,
                  rp_inst x, rp_proc p, uint64_t cost) {
  rp_inst t = inst(s, names[n], l); /* the block's own activation */
  rp_op_id in = s->last;
  rp_op_id c = copy(s, x, t, names[n + 1], l);
  s->last = in; /* the first op runs beside the copy, the second joins */
  char out[RP_NAME_MAX + 1];
  snprintf(out, sizeof out, "%s.out", names[0]);
  rp_inst o = inst(s, out, l); /* the first op reads x beside the copy */
  axpy(s, x, o, p, cost, names[0], l, UINT32_MAX);
  for (uint32_t i = 1; i < n; i++)
    axpy(s, i == 1 ? o : t, x, p, cost * (i + 1), names[i], l,
         i == 1 ? c : UINT32_MAX);
}

static const char *const ATTN[] = {"ln1",          "attn.qkv",  "attn.score",
                                   "attn.softmax", "attn.proj", "attn.act",
                                   "attn.in.copy"};
static const char *const MLP[] = {"ln2",      "mlp.fc", "mlp.act",
                                  "mlp.proj", "mlp.h",  "mlp.in.copy"};
static const char *const ATTN_B[] = {
    "attn.proj_bwd", "attn.softmax_bwd", "attn.score_bwd", "attn.qkv_bwd",
    "ln1_bwd",       "attn.grad",        "attn.grad.copy"};
static const char *const MLP_B[] = {"mlp.proj_bwd", "mlp.act_bwd",
                                    "mlp.fc_bwd",   "ln2_bwd",
                                    "mlp.grad",     "mlp.grad.copy"};

uint32_t synth_layers_for(uint32_t ops) {
  uint32_t l =
      ops > SYNTH_OPS_FIXED ? (ops - SYNTH_OPS_FIXED) / SYNTH_OPS_PER_LAYER : 0;
  return l ? l : 1;
}

static void layers(synth *s, uint32_t n, rp_inst *xs) {
  for (uint32_t l = 0; l < n && !s->st; l++) {
    xs[l] = inst(s, "x", l);
    block(s, l, ATTN, 5, xs[l], l % 2, 1000);
    block(s, l, MLP, 4, xs[l], (l + 1) % 2, 2000);
  }
}

static void layers_bwd(synth *s, uint32_t n, const rp_inst *xs) {
  for (uint32_t l = n; l-- > 0 && !s->st;) {
    block(s, l, MLP_B, 4, xs[l], (l + 1) % 2, 2500);
    block(s, l, ATTN_B, 5, xs[l], l % 2, 1500);
  }
}

rp_status synth_step_build(rp_runtime *rt, uint32_t n, rp_graph **out) {
  synth s = {.rt = rt, .last = UINT32_MAX};
  *out = NULL;
  rp_inst *xs = calloc(n ? n : 1, sizeof *xs);
  if (!xs)
    return RP_ENOMEM;
  if ((s.st = rp_task_find(rt, "rp.axpy", &s.k.axpy)) == RP_OK &&
      (s.st = rp_mem_find(rt, RP_MEM_SYSTEM, -1, &s.sys)) == RP_OK)
    s.st = rp_graph_create(rt, &s.g);
  rp_inst emb = inst(&s, "wte", NOLAYER), head = inst(&s, "lm_head.w", NOLAYER);
  axpy(&s, emb, emb, 0, 500, "embed", NOLAYER, UINT32_MAX);
  layers(&s, n, xs);
  axpy(&s, head, head, 1, 800, "lm_head", NOLAYER, UINT32_MAX);
  axpy(&s, head, emb, 0, 300, "loss", NOLAYER, UINT32_MAX);
  layers_bwd(&s, n, xs);
  axpy(&s, emb, head, 1, 400, "embed_bwd", NOLAYER, UINT32_MAX);
  free(xs);
  if (s.st && s.g) {
    synth_free(rt, s.g);
    s.g = NULL;
  }
  *out = s.g;
  return s.st;
}

void synth_free(rp_runtime *rt, rp_graph *g) {
  uint32_t n = 0;
  rp_inst *list = NULL;
  if (rp_graph_instances(g, NULL, 0, &n) == RP_OK && n &&
      (list = malloc(sizeof *list * n)) != NULL)
    rp_graph_instances(g, list, n, &n);
  rp_graph_destroy(g);
  for (uint32_t i = 0; list && i < n; i++)
    rp_instance_free(rt, list[i]);
  free(list);
}

/* variant 1: op 1 renamed, an edge 0 -> 5 added. */
static rp_status vary(rp_graph *g) {
  rp_status st = rp_graph_set_op_name(g, 1, "h0.attn.in.copy2");
  return st ? st : rp_graph_add_edge(g, 0, 5);
}

rp_status synth_step_save(uint32_t ops, int variant, const char *path) {
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU;
  cfg.cpus = 2;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  rp_kernel_tasks k;
  rp_graph *g = NULL;
  rp_status st = rp_runtime_create(&cfg, &rt);
  if (!st)
    st = rp_kernels_register(rt, &k);
  if (!st)
    st = synth_step_build(rt, synth_layers_for(ops), &g);
  if (!st && variant)
    st = vary(g);
  if (!st)
    st = rp_graph_save(g, path);
  if (g)
    synth_free(rt, g);
  if (rt)
    rp_runtime_destroy(rt);
  return st;
}
