/* train/gpt.c — the GPT training step (see gpt.h): one function per layer
 * kind, each issuing its forward or backward ops; a block is a dozen
 * lines; the step is a loop over blocks. Uses the public API and the
 * kernel tasks only: the same launches run eagerly or are recorded. */
#include "gpt.h"
#include "ckpt.h"

#include "train_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A block's parameters, at 2 + 12 l + j. */
enum {
  LN1_W,
  LN1_B,
  QKV_W,
  QKV_B,
  APROJ_W,
  APROJ_B,
  LN2_W,
  LN2_B,
  FC_W,
  FC_B,
  MPROJ_W,
  MPROJ_B,
  PER_BLOCK
};
#define WTE 0u
#define WPE 1u
#define BP(l, j) (2u + PER_BLOCK * (uint32_t)(l) + (uint32_t)(j))
#define LNF_W(L) (2u + PER_BLOCK * (uint32_t)(L))
#define LNF_B(L) (LNF_W(L) + 1u)
#define MAXSINKS (4 + RP_GPT_MAX_PROCS)
/* procs[p] of another rank's processor (tensor parallelism across ranks):
 * its rank launches the tasks on it */
#define NOWHERE ((rp_proc)0xfffffffeu)

/* One block's activations on one shard (N = rows * T positions). */
typedef struct block_acts {
  rp_inst res;             /* the block's input (the residual stream) */
  rp_inst ln1, ln1m, ln1r; /* ln1(res), its means and 1/std */
  rp_inst qkv, qkvr, att;  /* [N, 3C], permuted q k v, probabilities */
  rp_inst atty, aproj;     /* attention output, its projection */
  rp_inst resm;            /* res + aproj */
  rp_inst ln2, ln2m, ln2r; /* ln2(resm) */
  rp_inst fcpre, fcact;    /* fc(ln2) + b, gelu of it: [N, 4C] */
  rp_inst mproj;           /* mlp projection: the block adds resm + it */
  rp_inst kc, vc;          /* decoding: the key and value caches */
} block_acts;

/* One shard's instances in its processor's memory. With one processor
 * x, y, loss, w and g are the home ones. */
typedef struct shard {
  int64_t lo, hi; /* batch rows */
  uint32_t rows, N;
  rp_inst x, y, loss;
  rp_inst *w, *g;   /* parameter replicas and this shard's gradients */
  rp_inst *mo, *vo; /* tp > 1, group 0's slices: the AdamW moments of their
                       shards of the split tensors */
  block_acts *a;
  rp_inst resf, lnf, lnfm, lnfr, logits, losses;
  /* backward scratch, shared by the blocks */
  rp_inst dres, dln, dfc, datty, dqkv, datt, scratch;
} shard;

struct rp_gpt {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_gpt_config cfg;
  uint32_t np; /* parameter tensors */
  rp_gpt_param_info *info;
  rp_proc procs[RP_GPT_MAX_PROCS];
  rp_mem mems[RP_GPT_MAX_PROCS];
  rp_inst *w, *g, *mo, *vo; /* home: weights, gradients, moments (tp > 1:
                               of the tensors not split; w also holds the
                               decode step's whole copies of the split
                               ones, make_decode) */
  rp_inst ring_x, ring_y;   /* the batch ring [ring * B x T] */
  rp_inst bx, by;           /* the step's batch [B x T] */
  rp_inst loss, stats;      /* mean loss; AdamW's norms */
  rp_inst sample;           /* [1 x T] tokens for rp_gpt_sample */
  shard *sh;
  rp_inst *all;
  uint32_t nall, capall;
  int recording;
  int collect;
  rp_event sinks[MAXSINKS];
  uint32_t nsinks;
  int32_t *hx, *hy;    /* ring staging (allocated once) */
  shard *dec;          /* decoding (rp_gpt_decode_record): one position */
  uint64_t ring_base;  /* rp_gpt_train: the step of ring slot 0 */
  uint32_t ring_valid; /* its batches in the ring (0: none) */
  /* Tensor parallelism (docs/distributed.md): tp processors per data group,
   * dp groups; processor index d * tp + t. sh[d] is group d's leader (its
   * processor t = 0: the residual stream, LayerNorms, embedding, head and
   * loss); ts[d * tp + t] (tp > 1) the slice of processor t: its shards of
   * the split matrices, their gradients and the per-head activations. */
  uint32_t tp, dp;
  shard *ts;
  rp_inst *gsum; /* tp > 1, dp > 1: [t * np + i] the groups' sum of slice
                    t's gradient shard i, on processor t */
  /* tp > 1, the sharded optimizer: processor t's sum of squares of its
   * gradients (part[t], at [t, t]: one element of sq), its per-tensor sums
   * (each[t]), the gathered sums (sq, home) and their copies (sqr[t]) that
   * its AdamW reads, and its AdamW's stats (ostats[t]; m->stats for t 0) */
  rp_inst sq, part[RP_GPT_MAX_PROCS], each[RP_GPT_MAX_PROCS];
  rp_inst sqr[RP_GPT_MAX_PROCS], ostats[RP_GPT_MAX_PROCS];
  uint64_t bytes[RP_GPT_MAX_PROCS], state_bytes[RP_GPT_MAX_PROCS];
  /* cfg.max_bytes: a first pass of the build that counts this rank's
   * instances (need_bytes) and makes none (dry) */
  int dry;
  uint64_t need_bytes;
  uint64_t made_bytes; /* this rank's instances made: the decode step's
                          are checked against max_bytes as they come */
  int state;           /* mk counts into state_bytes */
  const char *making;  /* the call making instances, for their errors */
  /* Across ranks (cfg.dist): this rank's rows [rlo, rhi] of every global
   * batch (all of them without dist), held in the ring and the home batch;
   * esum: the evaluation's loss sum and failed ranks, all-reduced (system
   * memory: no NCCL) */
  uint32_t rank, ranks;
  int64_t rlo, rhi;
  uint32_t rows;
  rp_inst esum;
  /* Tensor parallelism across ranks (xr: cfg.dist and tp > procs): the
   * ranks' processors form one layout of G = ranks x procs processors,
   * processor p on rank p / procs (procs[p] NOWHERE on the others); the
   * home (processor 0) holds the whole batch. Without xr, G = procs.
   * lossr: xr, this rank's copy of the step's loss; opname: the name of
   * the op being launched (a parallel operator's copies across ranks each
   * carry it); dec_filled: rp_gpt_decode_fill ran */
  int xr;
  uint32_t G;
  rp_inst lossr, tok; /* tok: xr, home: a sampled token for every rank */
  char opname[RP_NAME_MAX + 1];
  int dec_filled;
  int decoder; /* rp_gpt_create_decoder: the weights and the decode step's
                  instances alone */
};

/* Processor p's rank, and whether it is this one. */
static uint32_t rank_of(const rp_gpt *m, uint32_t p) {
  return m->xr ? p / m->cfg.procs : m->rank;
}
static int here(const rp_gpt *m, uint32_t p) {
  return rank_of(m, p) == m->rank;
}

/* Refuses fn on a decode-only model: it has no training state. */
static rp_status trainer_only(const rp_gpt *m, const char *fn) {
  if (!m || !m->decoder)
    return RP_OK;
  return rp_error_set(RP_EINVAL,
                      "%s: a decode-only model (rp_gpt_create_decoder) has "
                      "no gradients, AdamW moments, batches or training "
                      "activations",
                      fn);
}

/* ---------------------------------------------------------------------- */
/* Configuration and the parameter table */

void rp_gpt_config_init(rp_gpt_config *c) {
  memset(c, 0, sizeof *c);
  c->layers = 4;
  c->heads = 4;
  c->width = 128;
  c->context = 64;
  c->vocab = 64;
  c->batch = 16;
  c->procs = 1;
  c->tp = 1;
  c->ring = 64;
  c->beta1 = 0.9f;
  c->beta2 = 0.95f;
  c->eps = 1e-8f;
  c->weight_decay = 0.1f;
  c->max_norm = 1.0f;
  c->seed = 1;
}

/* f: the public call the messages name. */
static rp_status config_check(const rp_gpt_config *c, const char *f) {
  if (!c)
    return rp_error_set(RP_EINVAL, "%s: NULL config", f);
  struct {
    const char *name;
    uint32_t v, lo, hi;
  } r[] = {{"layers", c->layers, 1, RP_GPT_MAX_LAYERS},
           {"heads", c->heads, 1, 256},
           {"width", c->width, 1, RP_GPT_MAX_WIDTH},
           {"context", c->context, 1, RP_GPT_MAX_CONTEXT},
           {"vocab", c->vocab, 2, RP_GPT_MAX_VOCAB},
           {"batch", c->batch, 1, RP_GPT_MAX_BATCH},
           {"procs", c->procs, 1, RP_GPT_MAX_PROCS},
           {"ring", c->ring, 1, 1u << 16}};
  for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
    if (r[i].v < r[i].lo || r[i].v > r[i].hi)
      return rp_error_set(RP_EINVAL, "%s: %s = %u (need %u..%u)", f, r[i].name,
                          r[i].v, r[i].lo, r[i].hi);
  if (c->width % c->heads)
    return rp_error_set(RP_EINVAL, "%s: width %u is not a multiple of heads %u",
                        f, c->width, c->heads);
  uint32_t tp = c->tp ? c->tp : 1;
  if (c->dist && tp > c->procs && tp % c->procs)
    return rp_error_set(RP_EINVAL,
                        "%s: tp %u is not a multiple of procs %u (a group "
                        "of tp processors across ranks takes every "
                        "processor of tp / procs ranks)",
                        f, tp, c->procs);
  if (!(c->dist && tp > c->procs) && c->procs % tp)
    return rp_error_set(RP_EINVAL,
                        "%s: procs %u is not a multiple of tp %u (the "
                        "processors form procs / tp data groups of tp)",
                        f, c->procs, tp);
  if (c->heads % tp)
    return rp_error_set(RP_EINVAL,
                        "%s: heads %u are not a multiple of tp %u (every "
                        "processor needs whole heads)",
                        f, c->heads, tp);
  if (c->batch < c->procs / tp)
    return rp_error_set(RP_EINVAL,
                        "%s: batch %u < %u data groups (every group needs "
                        "rows)",
                        f, c->batch, c->procs / tp);
  /* one process: the split rp_gpt_create makes (dist: with the ranks) */
  if (!c->dist && rp_gpt_split_check(c->batch, 1, c->procs, tp))
    return rp_error_set(RP_EINVAL, "%s: %s", f, rp_error_detail());
  uint64_t rows_t = (uint64_t)c->batch * c->context;
  if (rows_t * c->width * 4 >= (1u << 31) ||
      (uint64_t)c->batch * c->heads * c->context * c->context >= (1u << 31))
    return rp_error_set(RP_EINVAL,
                        "%s: batch %u x context %u is too large for int32 "
                        "kernel sizes",
                        f, c->batch, c->context);
  struct {
    const char *name, *need;
    float v;
    int ok;
  } h[] = {{"beta1", "in [0, 1)", c->beta1, c->beta1 >= 0 && c->beta1 < 1},
           {"beta2", "in [0, 1)", c->beta2, c->beta2 >= 0 && c->beta2 < 1},
           {"eps", "finite, > 0", c->eps, c->eps > 0 && isfinite(c->eps)},
           {"weight_decay", "finite, >= 0", c->weight_decay,
            c->weight_decay >= 0 && isfinite(c->weight_decay)},
           {"max_norm", "finite", c->max_norm, isfinite(c->max_norm)}};
  for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
    if (!h[i].ok)
      return rp_error_set(RP_EINVAL, "%s: AdamW %s = %g (need %s)", f,
                          h[i].name, (double)h[i].v, h[i].need);
  return RP_OK;
}

rp_status rp_gpt_config_check(const rp_gpt_config *c) {
  return config_check(c, "rp_gpt_config_check");
}

rp_status rp_gpt_split_check(uint32_t batch, uint32_t ranks, uint32_t procs,
                             uint32_t tp) {
  tp = tp ? tp : 1;
  if (procs && tp > procs) { /* groups across ranks: one layout */
    uint64_t all = (uint64_t)ranks * procs;
    const char *ps = procs == 1 ? "" : "s";
    if (tp % procs)
      return rp_error_set(RP_EINVAL,
                          "tp %u across ranks is not a multiple of the %u "
                          "processor%s per rank (a group spans whole ranks)",
                          tp, procs, ps);
    if (all % tp)
      return rp_error_set(RP_EINVAL,
                          "tp %u across ranks does not divide the %u rank%s x "
                          "%u processor%s (%llu in all) into whole groups",
                          tp, ranks, ranks == 1 ? "" : "s", procs, ps,
                          (unsigned long long)all);
    if (all > RP_GPT_MAX_PROCS)
      return rp_error_set(RP_EINVAL,
                          "tp %u across ranks: %u ranks x %u processor%s is "
                          "%llu processors in all (at most %d)",
                          tp, ranks, procs, ps, (unsigned long long)all,
                          RP_GPT_MAX_PROCS);
    /* the batch splits over the data groups alone (each spans ranks) */
    return rp_train_split_check(batch, 1, (uint32_t)(all / tp),
                                "data group of --tp across ranks",
                                "data groups of --tp across ranks");
  }
  if (procs % tp)
    return rp_error_set(RP_EINVAL,
                        "procs %u is not a multiple of tp %u (the "
                        "processors form procs / tp data groups of tp)",
                        procs, tp);
  return rp_train_split_check(batch, ranks, tp > 1 ? procs / tp : procs,
                              tp > 1 ? "data group" : "processor",
                              tp > 1 ? "data groups" : "processors");
}

/* 1 when l adds its data-parallel parts as one process of procs x ranks
 * processors does, in part order: one rank, or tensor parallelism across
 * the ranks (tp above procs), whose parallel operators sum in part order
 * across ranks too; data parallelism across ranks adds them with MPI's
 * all-reduce. */
static int sums_as_one_process(rp_gpt_layout l) {
  return l.ranks <= 1 || l.tp > l.procs;
}

int rp_gpt_layouts_sum_alike(rp_gpt_layout a, rp_gpt_layout b) {
  a.tp = a.tp ? a.tp : 1;
  b.tp = b.tp ? b.tp : 1;
  if (a.procs == b.procs && a.ranks == b.ranks && a.tp == b.tp)
    return 1;
  uint64_t na = (uint64_t)a.procs * a.ranks, nb = (uint64_t)b.procs * b.ranks;
  if (na != nb || a.tp != b.tp)
    return 0;
  return na / a.tp <= 2 || (sums_as_one_process(a) && sums_as_one_process(b));
}

static void set_info(rp_gpt_param_info *p, const char *name, uint32_t rows,
                     uint32_t cols, int decay, float std, float value) {
  snprintf(p->name, sizeof p->name, "%s", name);
  p->rows = rows;
  p->cols = cols;
  p->decay = decay;
  p->init_std = std;
  p->init_value = value;
}

/* The table: names, shapes, decay and initialisation (gpt.h). */
static void make_table(rp_gpt *m) {
  const rp_gpt_config *c = &m->cfg;
  uint32_t C = c->width;
  float std = 0.02f, rstd = 0.02f / sqrtf(2.0f * (float)c->layers);
  set_info(&m->info[WTE], "wte", c->vocab, C, 1, std, 0);
  set_info(&m->info[WPE], "wpe", c->context, C, 1, std, 0);
  for (uint32_t l = 0; l < c->layers; l++) {
    struct {
      const char *n;
      uint32_t rows, cols;
      int decay;
      float std, value;
    } b[PER_BLOCK] = {{"ln1.w", 1, C, 0, 0, 1},
                      {"ln1.b", 1, C, 0, 0, 0},
                      {"attn.qkv.w", 3 * C, C, 1, std, 0},
                      {"attn.qkv.b", 1, 3 * C, 0, 0, 0},
                      {"attn.proj.w", C, C, 1, rstd, 0},
                      {"attn.proj.b", 1, C, 0, 0, 0},
                      {"ln2.w", 1, C, 0, 0, 1},
                      {"ln2.b", 1, C, 0, 0, 0},
                      {"mlp.fc.w", 4 * C, C, 1, std, 0},
                      {"mlp.fc.b", 1, 4 * C, 0, 0, 0},
                      {"mlp.proj.w", C, 4 * C, 1, rstd, 0},
                      {"mlp.proj.b", 1, C, 0, 0, 0}};
    for (int j = 0; j < PER_BLOCK; j++) {
      char name[32];
      snprintf(name, sizeof name, "h%u.%s", l, b[j].n);
      set_info(&m->info[BP(l, j)], name, b[j].rows, b[j].cols, b[j].decay,
               b[j].std, b[j].value);
    }
  }
  set_info(&m->info[LNF_W(c->layers)], "lnf.w", 1, C, 0, 0, 1);
  set_info(&m->info[LNF_B(c->layers)], "lnf.b", 1, C, 0, 0, 0);
}

static size_t numel(const rp_gpt_param_info *p) {
  return (size_t)p->rows * p->cols;
}

/* ---------------------------------------------------------------------- */
/* Instances and names */

/* "384.0 GiB", "5.2 MiB" or "1000 bytes". */
static const char *size_str(char *buf, size_t n, uint64_t v) {
  if (v >= (1u << 30))
    snprintf(buf, n, "%.1f GiB", (double)v / (double)(1u << 30));
  else if (v >= (1u << 20))
    snprintf(buf, n, "%.1f MiB", (double)v / (double)(1u << 20));
  else
    snprintf(buf, n, "%llu byte%s", (unsigned long long)v, v == 1 ? "" : "s");
  return buf;
}

static uint64_t rect_bytes(rp_dtype dt, rp_rect r) {
  uint64_t bytes = rp_dtype_size(dt);
  for (int d = 0; d < r.dim; d++)
    bytes *= (uint64_t)(r.hi[d] - r.lo[d] + 1);
  return bytes;
}

/* Counts an instance of rect r in processor p's bytes. */
static void count_bytes(rp_gpt *m, uint32_t p, rp_dtype dt, rp_rect r) {
  uint64_t bytes = rect_bytes(dt, r);
  m->bytes[p] += bytes;
  if (m->state)
    m->state_bytes[p] += bytes;
}

/* An instance in memory mem, counted in processor p's bytes (p < 0: in
 * none), freed by rp_gpt_destroy. On another rank's processor (xr) only
 * counted: *out stays {0}. */
static rp_status mk_in(rp_gpt *m, rp_mem mem, int p, rp_dtype dt, rp_rect r,
                       rp_inst *out) {
  if (p >= 0 && !here(m, (uint32_t)p)) {
    *out = (rp_inst){0};
    count_bytes(m, (uint32_t)p, dt, r);
    return RP_OK;
  }
  uint64_t b = rect_bytes(dt, r);
  if (m->dry) { /* counted, not made */
    *out = (rp_inst){0};
    m->need_bytes += b;
    return RP_OK;
  }
  if (m->cfg.max_bytes && m->made_bytes + b > m->cfg.max_bytes) {
    char have[32], lim[32]; /* the decode step's, after the model's */
    return rp_error_set(RP_ENOMEM,
                        "%s: the model's instances would take %s on this "
                        "rank with these, above the limit of %s (max_bytes: "
                        "%llu bytes)",
                        m->making,
                        size_str(have, sizeof have, m->made_bytes + b),
                        size_str(lim, sizeof lim, m->cfg.max_bytes),
                        (unsigned long long)m->cfg.max_bytes);
  }
  if (m->nall == m->capall) {
    uint32_t cap = m->capall ? 2 * m->capall : 256;
    rp_inst *a = rp_train_realloc_n(m->all, cap, sizeof *a);
    if (!a)
      return rp_error_set(RP_ENOMEM, "rp_gpt_create: out of memory");
    m->all = a;
    m->capall = cap;
  }
  rp_status st = rp_instance_create(m->rt, mem, dt, &r, NULL, out);
  if (st != RP_OK && p < 0)
    return rp_train_err_prefix(st, "%s: system memory: ", m->making);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "%s: processor %u: ", m->making,
                               m->procs[p]);
  m->all[m->nall++] = *out;
  m->made_bytes += b;
  if (p >= 0)
    count_bytes(m, (uint32_t)p, dt, r);
  return RP_OK;
}

static rp_status mk(rp_gpt *m, uint32_t p, rp_dtype dt, rp_rect r,
                    rp_inst *out) {
  return mk_in(m, m->mems[p], (int)p, dt, r, out);
}

static rp_status mkf(rp_gpt *m, uint32_t p, uint64_t rows, uint64_t cols,
                     rp_inst *out) {
  return mk(m, p, RP_F32,
            rp_rect_2d(0, (int64_t)rows - 1, 0, (int64_t)cols - 1), out);
}

#define name_inst(m, inst, ...) rp_train_name_inst((m)->rt, inst, __VA_ARGS__)

/* Names the next recorded launch ("h3.attn.qkv" and the suffix `sfx`:
 * ".s1" data group 1, ".t1" tensor-parallel slice 1, ".s1.t1" both);
 * nothing while not recording. */
__attribute__((format(printf, 3, 4))) static rp_status
name_op(rp_gpt *m, const char *sfx, const char *fmt, ...) {
  if (!m->recording)
    return RP_OK;
  va_list ap;
  va_start(ap, fmt);
  rp_status st = rp_train_vname_op(m->rt, sfx, m->opname, fmt, ap);
  va_end(ap);
  return st;
}

/* "h3.mlp.fc.w" -> "h3.mlp.fc.dW", ".b" -> ".db", "wte" -> "dwte". */
static void grad_name(const char *w, char *out, size_t cap) {
  size_t n = strlen(w);
  if (n > 2 && w[n - 2] == '.' && (w[n - 1] == 'w' || w[n - 1] == 'b'))
    snprintf(out, cap, "%.*s.d%c", (int)(n - 2), w,
             w[n - 1] == 'w' ? 'W' : 'b');
  else
    snprintf(out, cap, "d%s", w);
}

/* Tensor parallelism: the dimension of tensor i's home rect along which
 * it is split over the tp processors of a group, -1 for a tensor every
 * processor of the group needs whole (or tp 1). Column-parallel: attn.qkv
 * (w [3][C][C], b [3][C]: dim 1 splits q, k and v by heads alike), mlp.fc
 * (w [4C][C] by rows, b [1][4C] by columns); row-parallel: attn.proj.w
 * [C][C] and mlp.proj.w [C][4C] by input columns (their biases are added
 * once, by processor t = 0). */
static int split_dim(const rp_gpt *m, uint32_t i) {
  if (m->tp <= 1 || i < 2 || i >= LNF_W(m->cfg.layers))
    return -1;
  switch ((i - 2) % PER_BLOCK) {
  case QKV_W:
  case QKV_B:
  case APROJ_W:
  case FC_B:
  case MPROJ_W:
    return 1;
  case FC_W:
    return 0;
  default:
    return -1;
  }
}

/* Tensor i's rect at home: rows x cols, except with tensor parallelism
 * attn.qkv.w [3][C][C] and attn.qkv.b [3][C] (the same bytes, so the
 * layout is nanoGPT's [q | k | v] either way). */
static rp_rect home_rect(const rp_gpt *m, uint32_t i) {
  const rp_gpt_param_info *p = &m->info[i];
  rp_rect r = rp_rect_2d(0, (int64_t)p->rows - 1, 0, (int64_t)p->cols - 1);
  if (split_dim(m, i) < 0 || (i - 2) % PER_BLOCK > QKV_B)
    return r;
  int64_t C = m->cfg.width;
  if ((i - 2) % PER_BLOCK == QKV_B)
    return rp_rect_2d(0, 2, 0, C - 1);
  r.dim = 3;
  r.lo[0] = r.lo[1] = r.lo[2] = 0;
  r.hi[0] = 2;
  r.hi[1] = r.hi[2] = C - 1;
  return r;
}

/* An f32 [rows x cols] instance to make and its name after a prefix;
 * sliced: with tensor parallelism the slices hold it, not the leader. */
typedef struct inst_spec {
  rp_inst *i;
  uint64_t rows, cols;
  const char *n;
  int sliced;
} inst_spec;

/* Makes v[0..n) on processor p, named prefix + name; skip_sliced leaves
 * out the sliced ones. */
static rp_status make_specs(rp_gpt *m, uint32_t p, const inst_spec *v, size_t n,
                            const char *prefix, int skip_sliced) {
  rp_status st = RP_OK;
  for (size_t i = 0; !st && i < n; i++) {
    if (skip_sliced && v[i].sliced)
      continue;
    if (!(st = mkf(m, p, v[i].rows, v[i].cols, v[i].i)))
      st = name_inst(m, *v[i].i, "%s%s", prefix, v[i].n);
  }
  return st;
}
#define SPECS(v) (v), sizeof(v) / sizeof((v)[0])

/* The tensors processor t's AdamW updates: with tensor parallelism its
 * shards of the split tensors (t = 0: and every tensor not split), else
 * all of them (t = 0). */
static uint32_t opt_count(const rp_gpt *m, uint32_t t) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < m->np; i++)
    n += t == 0 || split_dim(m, i) >= 0;
  return n;
}

/* A decode-only model's state: the weights alone, at home. */
static rp_status make_weights(rp_gpt *m) {
  rp_status st = RP_OK;
  m->state = 1;
  for (uint32_t i = 0; !st && i < m->np; i++)
    if (!(st = mk(m, 0, RP_F32, home_rect(m, i), &m->w[i])))
      st = name_inst(m, m->w[i], "%s", m->info[i].name);
  m->state = 0;
  return st;
}

/* The home state: weights, gradients and moments of every tensor not
 * split (tensor parallelism keeps the split ones in the slices only). */
static rp_status make_home(rp_gpt *m) {
  const rp_gpt_config *c = &m->cfg;
  rp_inst *sets[4] = {m->w, m->g, m->mo, m->vo};
  rp_status st = RP_OK;
  m->state = 1;
  for (uint32_t i = 0; !st && i < m->np; i++)
    for (int s = 0; !st && s < 4 && split_dim(m, i) < 0; s++)
      st = mk(m, 0, RP_F32, home_rect(m, i), &sets[s][i]);
  m->state = 0;
  /* this rank's rows: every row of a batch without dist */
  uint64_t rb = (uint64_t)c->ring * m->rows;
  rp_rect ring = rp_rect_2d(0, (int64_t)rb - 1, 0, c->context - 1);
  rp_rect batch = rp_rect_2d(m->rlo, m->rhi, 0, c->context - 1);
  if (!st)
    st = mk(m, 0, RP_I32, ring, &m->ring_x);
  if (!st)
    st = mk(m, 0, RP_I32, ring, &m->ring_y);
  if (!st)
    st = mk(m, 0, RP_I32, batch, &m->bx);
  if (!st)
    st = mk(m, 0, RP_I32, batch, &m->by);
  if (!st)
    st = mkf(m, 0, 1, 1, &m->loss);
  if (!st)
    st = mkf(m, 0, 1, m->np + 1, &m->stats);
  if (!st && m->tp > 1 &&
      !(st = mk(m, 0, RP_F32, rp_rect_1d(0, m->tp - 1), &m->sq)))
    st = name_inst(m, m->sq, "grad.sumsq");
  if (!st)
    st = mk(m, 0, RP_I32, rp_rect_2d(0, 0, 0, c->context - 1), &m->sample);
  if (!st && c->dist) { /* host memory: its all-reduce needs no NCCL */
    rp_mem sys;
    st = rp_mem_find(m->rt, RP_MEM_SYSTEM, -1, &sys);
    if (!st)
      st = mk_in(m, sys, -1, RP_F64, rp_rect_1d(0, 1), &m->esum);
    if (!st)
      st = name_inst(m, m->esum, "eval.sum");
  }
  if (!st && m->xr && !(st = mkf(m, 0, 1, 1, &m->tok)))
    st = name_inst(m, m->tok, "sample.token");
  for (uint32_t r = 0; !st && m->xr && r < m->ranks; r++) { /* rank r's */
    rp_inst one;
    if (!(st = mkf(m, r * m->cfg.procs, 1, 1, &one)) && r == m->rank &&
        !(st = name_inst(m, one, "loss.rank%u", r)))
      m->lossr = one;
  }
  for (uint32_t i = 0; !st && i < m->np; i++) {
    char gn[48];
    grad_name(m->info[i].name, gn, sizeof gn);
    st = name_inst(m, m->w[i], "%s", m->info[i].name);
    if (!st)
      st = name_inst(m, m->g[i], "%s", gn);
    if (!st)
      st = name_inst(m, m->mo[i], "%s.m", m->info[i].name);
    if (!st)
      st = name_inst(m, m->vo[i], "%s.v", m->info[i].name);
  }
  rp_inst hi[] = {m->ring_x, m->ring_y, m->bx,    m->by,
                  m->loss,   m->stats,  m->sample};
  const char *hn[] = {"ring.x", "ring.y",      "batch.x", "batch.y",
                      "loss",   "adamw.stats", "sample.x"};
  for (size_t i = 0; !st && i < sizeof hi / sizeof *hi; i++)
    st = name_inst(m, hi[i], "%s", hn[i]);
  return st;
}

/* Processor t's share of the clipping norm (tensor parallelism): its sum
 * of squares at [t, t], its per-tensor sums, the gathered sums' copy its
 * AdamW reads, and that AdamW's stats (t = 0: m->stats). */
static rp_status make_norm(rp_gpt *m, uint32_t t) {
  uint32_t n = opt_count(m, t);
  rp_status st = mk(m, t, RP_F32, rp_rect_1d(t, t), &m->part[t]);
  if (!st)
    st = mkf(m, t, 1, n, &m->each[t]);
  if (!st)
    st = mk(m, t, RP_F32, rp_rect_1d(0, m->tp - 1), &m->sqr[t]);
  if (!st && t > 0)
    st = mkf(m, t, 1, n + 1, &m->ostats[t]);
  if (!st)
    st = name_inst(m, m->part[t], "t%u.grad.sumsq", t);
  if (!st)
    st = name_inst(m, m->each[t], "t%u.grad.sumsq.each", t);
  if (!st)
    st = name_inst(m, m->sqr[t], "t%u.grad.sumsq.all", t);
  if (!st)
    st = name_inst(m, m->ostats[t], "t%u.adamw.stats", t);
  return st;
}

/* Group d's leader activations ("s1." in front with several groups). With
 * tensor parallelism (lead: the leader of a group) the per-head ones (from
 * qkv to the MLP's hidden columns) live in the slices: the leader keeps the
 * residual stream, the LayerNorms, the summed projections and the head. */
static rp_status make_acts(rp_gpt *m, uint32_t d) {
  const rp_gpt_config *c = &m->cfg;
  shard *s = &m->sh[d];
  uint64_t N = s->N, C = c->width, T = c->context, NH = c->heads;
  uint64_t att = (uint64_t)s->rows * NH * T * T;
  uint32_t p = d * m->tp;
  int lead = m->tp > 1;
  char pre[8] = "";
  if (m->dp > 1)
    snprintf(pre, sizeof pre, "s%u.", d);
  rp_status st = RP_OK;
  for (uint32_t l = 0; !st && l < c->layers; l++) {
    block_acts *a = &s->a[l];
    const inst_spec v[] = {{&a->res, N, C, "res", 0},
                           {&a->ln1, N, C, "ln1.out", 0},
                           {&a->ln1m, 1, N, "ln1.mean", 0},
                           {&a->ln1r, 1, N, "ln1.rstd", 0},
                           {&a->qkv, N, 3 * C, "attn.qkv.out", 1},
                           {&a->qkvr, 3, N * C, "attn.qkvr", 1},
                           {&a->att, 1, att, "attn.att", 1},
                           {&a->atty, N, C, "attn.y", 1},
                           {&a->aproj, N, C, "attn.proj.out", 0},
                           {&a->resm, N, C, "res.mid", 0},
                           {&a->ln2, N, C, "ln2.out", 0},
                           {&a->ln2m, 1, N, "ln2.mean", 0},
                           {&a->ln2r, 1, N, "ln2.rstd", 0},
                           {&a->fcpre, N, 4 * C, "mlp.fc.out", 1},
                           {&a->fcact, N, 4 * C, "mlp.gelu", 1},
                           {&a->mproj, N, C, "mlp.proj.out", 0}};
    char bl[24];
    snprintf(bl, sizeof bl, "%sh%u.", pre, l);
    st = make_specs(m, p, SPECS(v), bl, lead);
  }
  const inst_spec v[] = {{&s->resf, N, C, "res.final", 0},
                         {&s->lnf, N, C, "lnf.out", 0},
                         {&s->lnfm, 1, N, "lnf.mean", 0},
                         {&s->lnfr, 1, N, "lnf.rstd", 0},
                         {&s->logits, N, c->vocab, "logits", 0},
                         {&s->losses, 1, N, "losses", 0},
                         {&s->dres, N, C, "dres", 0},
                         {&s->dln, N, C, "dln", 0},
                         {&s->dfc, N, 4 * C, "dfc", 1},
                         {&s->datty, N, C, "dattn.y", 1},
                         {&s->dqkv, N, 3 * C, "dqkv", 1},
                         {&s->datt, 1, att, "datt", 1},
                         {&s->scratch, 4, N * C, "attn.scratch", 1}};
  return st ? st : make_specs(m, p, SPECS(v), pre, lead);
}

/* Slice t of group d (tp > 1) on processor d * tp + t: its shards of the
 * split tensors at their global offsets (rp_chunk_rect of the home rects),
 * their gradients (group 0: and AdamW moments, and its share of the
 * clipping norm: make_norm), and the activations of its heads and
 * hidden columns (C / tp wide) plus replicas of the LayerNorm outputs and
 * its partial projections (full width). */
static rp_status make_slice(rp_gpt *m, uint32_t d, uint32_t t) {
  const rp_gpt_config *c = &m->cfg;
  uint32_t p = d * m->tp + t;
  shard *s = &m->ts[p];
  const shard *ld = &m->sh[d];
  s->lo = ld->lo;
  s->hi = ld->hi;
  s->rows = ld->rows;
  s->N = ld->N;
  s->w = calloc(m->np, sizeof *s->w);
  s->g = calloc(m->np, sizeof *s->g);
  s->a = calloc(c->layers, sizeof *s->a);
  if (d == 0) { /* the optimizer's shards */
    s->mo = calloc(m->np, sizeof *s->mo);
    s->vo = calloc(m->np, sizeof *s->vo);
  }
  if (!s->w || !s->g || !s->a || (d == 0 && (!s->mo || !s->vo)))
    return rp_error_set(RP_ENOMEM, "rp_gpt_create: out of memory");
  char pre[16];
  if (m->dp > 1)
    snprintf(pre, sizeof pre, "s%u.t%u.", d, t);
  else
    snprintf(pre, sizeof pre, "t%u.", t);
  rp_status st = RP_OK;
  m->state = 1;
  for (uint32_t i = 0; !st && i < m->np; i++) {
    int dim = split_dim(m, i);
    if (dim < 0)
      continue;
    rp_rect whole = home_rect(m, i), part;
    char gn[48];
    grad_name(m->info[i].name, gn, sizeof gn);
    st = rp_chunk_rect(&whole, dim, m->tp, t, &part);
    if (!st && !(st = mk(m, p, RP_F32, part, &s->w[i])))
      st = mk(m, p, RP_F32, part, &s->g[i]);
    if (!st)
      st = name_inst(m, s->w[i], "%s%s", pre, m->info[i].name);
    if (!st)
      st = name_inst(m, s->g[i], "%s%s", pre, gn);
    if (!st && m->dp > 1 && d == 0) {
      rp_inst *sum = &m->gsum[(size_t)t * m->np + i];
      if (!(st = mk(m, p, RP_F32, part, sum)))
        st = name_inst(m, *sum, "t%u.%s.sum", t, gn);
    }
    if (!st && d == 0 && !(st = mk(m, p, RP_F32, part, &s->mo[i])) &&
        !(st = mk(m, p, RP_F32, part, &s->vo[i])) &&
        !(st = name_inst(m, s->mo[i], "%s%s.m", pre, m->info[i].name)))
      st = name_inst(m, s->vo[i], "%s%s.v", pre, m->info[i].name);
  }
  m->state = 0;
  if (!st && d == 0)
    st = make_norm(m, t);
  uint64_t N = s->N, C = c->width, Cs = C / m->tp, T = c->context;
  uint64_t att = (uint64_t)s->rows * (c->heads / m->tp) * T * T;
  for (uint32_t l = 0; !st && l < c->layers; l++) {
    block_acts *a = &s->a[l];
    const inst_spec v[] = {{&a->ln1, N, C, "ln1.out", 0},
                           {&a->qkv, N, 3 * Cs, "attn.qkv.out", 0},
                           {&a->qkvr, 3, N * Cs, "attn.qkvr", 0},
                           {&a->att, 1, att, "attn.att", 0},
                           {&a->atty, N, Cs, "attn.y", 0},
                           {&a->aproj, N, C, "attn.proj.part", 0},
                           {&a->ln2, N, C, "ln2.out", 0},
                           {&a->fcpre, N, 4 * Cs, "mlp.fc.out", 0},
                           {&a->fcact, N, 4 * Cs, "mlp.gelu", 0},
                           {&a->mproj, N, C, "mlp.proj.part", 0}};
    char bl[32];
    snprintf(bl, sizeof bl, "%sh%u.", pre, l);
    st = make_specs(m, p, SPECS(v), bl, 0);
  }
  const inst_spec v[] = {{&s->dres, N, C, "dres", 0},
                         {&s->dln, N, C, "dln.part", 0},
                         {&s->dfc, N, 4 * Cs, "dfc", 0},
                         {&s->datty, N, Cs, "dattn.y", 0},
                         {&s->dqkv, N, 3 * Cs, "dqkv", 0},
                         {&s->datt, 1, att, "datt", 0},
                         {&s->scratch, 4, N * Cs, "attn.scratch", 0}};
  return st ? st : make_specs(m, p, SPECS(v), pre, 0);
}

/* Group d's leader shard on processor d * tp: its rows of the batch, the
 * replicas of the tensors it needs whole, its activations. */
static rp_status make_shard(rp_gpt *m, uint32_t d) {
  const rp_gpt_config *c = &m->cfg;
  shard *s = &m->sh[d];
  uint32_t p = d * m->tp;
  rp_rect whole = rp_rect_1d(m->rlo, m->rhi), part; /* this rank's rows */
  rp_status st = rp_chunk_rect(&whole, 0, m->dp, d, &part);
  if (st != RP_OK) /* dist: place_rank() has refused this already */
    return rp_error_set(RP_EINVAL, "rp_gpt_create: batch %u over %u shards",
                        c->batch, m->dp);
  s->lo = part.lo[0];
  s->hi = part.hi[0];
  s->rows = (uint32_t)(s->hi - s->lo + 1);
  s->N = s->rows * c->context;
  s->w = calloc(m->np, sizeof *s->w);
  s->g = calloc(m->np, sizeof *s->g);
  s->a = calloc(c->layers, sizeof *s->a);
  if (!s->w || !s->g || !s->a)
    return rp_error_set(RP_ENOMEM, "rp_gpt_create: out of memory");
  if (m->dp == 1) { /* the home instances themselves */
    s->x = m->bx;
    s->y = m->by;
    s->loss = m->loss;
    memcpy(s->w, m->w, m->np * sizeof *s->w);
    memcpy(s->g, m->g, m->np * sizeof *s->g);
  } else {
    rp_rect rows = rp_rect_2d(s->lo, s->hi, 0, c->context - 1);
    st = mk(m, p, RP_I32, rows, &s->x);
    if (!st)
      st = mk(m, p, RP_I32, rows, &s->y);
    if (!st)
      st = mkf(m, p, 1, 1, &s->loss);
    m->state = 1;
    for (uint32_t i = 0; !st && i < m->np; i++) {
      char gn[48];
      grad_name(m->info[i].name, gn, sizeof gn);
      if (split_dim(m, i) >= 0)
        continue; /* in the slices */
      if (!(st = mkf(m, p, m->info[i].rows, m->info[i].cols, &s->w[i])))
        st = mkf(m, p, m->info[i].rows, m->info[i].cols, &s->g[i]);
      if (!st)
        st = name_inst(m, s->w[i], "s%u.%s", d, m->info[i].name);
      if (!st)
        st = name_inst(m, s->g[i], "s%u.%s", d, gn);
    }
    m->state = 0;
    if (!st)
      st = name_inst(m, s->x, "s%u.x", d);
    if (!st)
      st = name_inst(m, s->y, "s%u.y", d);
    if (!st)
      st = name_inst(m, s->loss, "s%u.loss", d);
  }
  st = st ? st : make_acts(m, d);
  for (uint32_t t = 0; !st && m->tp > 1 && t < m->tp; t++)
    st = make_slice(m, d, t);
  return st;
}

/* This rank's rows of every batch: all of them without dist. With dist,
 * checks every rank's split (its rows, then those over the data groups) so
 * that every rank refuses a bad one alike, before anything collective. */
static rp_status place_rank(rp_gpt *m) {
  uint32_t B = m->cfg.batch;
  m->rank = 0;
  m->ranks = 1;
  m->rlo = 0;
  m->rhi = B - 1;
  m->rows = B;
  if (!m->cfg.dist)
    return RP_OK;
  m->rank = rp_runtime_rank(m->rt);
  m->ranks = rp_runtime_ranks(m->rt);
  rp_status st = rp_gpt_split_check(B, m->ranks, m->cfg.procs, m->tp);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "rp_gpt_create: ");
  if (m->xr && rp_runtime_backend(m->rt) == RP_BACKEND_CUDA)
    return rp_error_set(RP_EUNSUPPORTED,
                        "rp_gpt_create: tensor parallelism across ranks "
                        "copies activations between ranks through host "
                        "memory: the CPU backend only");
  if (m->xr) /* the home holds the whole batch, as in one process */
    return RP_OK;
  rp_train_rank_rows(m->rt, B, &m->rlo, &m->rhi); /* checked above */
  m->rows = (uint32_t)(m->rhi - m->rlo + 1);
  return RP_OK;
}

/* The processors: this rank's P; with xr at their places among the G of
 * the layout, NOWHERE at the other ranks'. */
static rp_status pick_procs(rp_gpt *m) {
  uint32_t P = m->cfg.procs;
  rp_proc mine[RP_GPT_MAX_PROCS];
  rp_mem mems[RP_GPT_MAX_PROCS];
  rp_status st = rp_train_pick_procs(m->rt, P, mine, mems, "rp_gpt_create");
  for (uint32_t p = 0; !st && p < m->G; p++) {
    m->procs[p] = here(m, p) ? mine[p % P] : NOWHERE;
    m->mems[p] = here(m, p) ? mems[p % P] : 0;
  }
  return st;
}

/* The shards' and slices' tables (make_shard, make_slice), freed and
 * zeroed. */
static void free_shards(rp_gpt *m) {
  for (uint32_t d = 0; m->sh && d < m->dp; d++) {
    free(m->sh[d].w);
    free(m->sh[d].g);
    free(m->sh[d].a);
    memset(&m->sh[d], 0, sizeof m->sh[d]);
  }
  for (uint32_t p = 0; m->ts && p < m->G; p++) {
    free(m->ts[p].w);
    free(m->ts[p].g);
    free(m->ts[p].mo);
    free(m->ts[p].vo);
    free(m->ts[p].a);
    memset(&m->ts[p], 0, sizeof m->ts[p]);
  }
}

static rp_status make_decode(rp_gpt *m);
static void free_decode(rp_gpt *m);

/* What a model is made of: a decode-only model's weights and decode
 * step, or the training state (home, then the shards). */
static rp_status make_model(rp_gpt *m) {
  if (m->decoder) {
    rp_status st = make_weights(m);
    return st ? st : make_decode(m);
  }
  rp_status st = make_home(m);
  for (uint32_t d = 0; !st && d < m->dp; d++)
    st = make_shard(m, d);
  return st;
}

/* cfg.max_bytes: the build run once making nothing, counting this rank's
 * instances, so that a model above the limit is refused, naming its
 * whole size, before any instance is made. */
static rp_status check_size(rp_gpt *m, const char *fn) {
  const char *making = m->making; /* make_decode sets its own */
  m->dry = 1;
  m->need_bytes = 0;
  rp_status st = make_model(m);
  m->dry = 0;
  m->making = making;
  free_shards(m);
  free_decode(m);
  memset(m->bytes, 0, sizeof m->bytes);
  memset(m->state_bytes, 0, sizeof m->state_bytes);
  if (st != RP_OK || m->need_bytes <= m->cfg.max_bytes)
    return st;
  char need[32], lim[32];
  return rp_error_set(RP_ENOMEM,
                      "%s: the model's instances would take %s "
                      "(%llu bytes) on this rank, above the limit of %s "
                      "(max_bytes: %llu bytes)",
                      fn, size_str(need, sizeof need, m->need_bytes),
                      (unsigned long long)m->need_bytes,
                      size_str(lim, sizeof lim, m->cfg.max_bytes),
                      (unsigned long long)m->cfg.max_bytes);
}

rp_status rp_gpt_destroy(rp_gpt *m) {
  if (!m)
    return RP_OK;
  rp_status st = RP_OK;
  uint32_t kept = 0;
  for (uint32_t i = m->nall; i-- > 0;) {
    rp_status fs = rp_instance_free(m->rt, m->all[i]);
    kept += fs != RP_OK;
    if (st == RP_OK)
      st = fs;
  }
  /* m goes either way (the header's rule): say so, not the instance
   * call's "nothing was changed" */
  if (st != RP_OK)
    st = rp_error_set(st,
                      "rp_gpt_destroy: the model is freed, but %u of its %u "
                      "instances could not be (%s): they stay until "
                      "rp_runtime_destroy; destroy the model's execs first",
                      kept, m->nall, rp_error_detail());
  free_shards(m);
  free(m->sh);
  free(m->ts);
  free(m->gsum);
  free_decode(m);
  free(m->all);
  free(m->info);
  free(m->w);
  free(m->g);
  free(m->mo);
  free(m->vo);
  free(m->hx);
  free(m->hy);
  free(m);
  return st;
}

/* rp_gpt_create, or with decoder rp_gpt_create_decoder (fn: which). */
static rp_status create(rp_runtime *rt, const rp_kernel_tasks *k,
                        const rp_gpt_config *cfg, int decoder, const char *fn,
                        rp_gpt **out) {
  rp_status st = config_check(cfg, fn);
  if (st != RP_OK)
    return st;
  if (RP_GPT_PARAMS(cfg->layers) > RP_GPT_ADAMW_MAX)
    return rp_error_set(RP_EINVAL, "%s: too many layers", fn);
  if (cfg->dist && rp_capture_open(rt)) /* its weights travel eagerly */
    return rp_error_set(RP_ECAPTURE, "rp_gpt_create: dist: a capture is open "
                                     "on the runtime (the weights are set up "
                                     "by eager ops)");
  rp_gpt *m = calloc(1, sizeof *m);
  if (!m)
    return rp_error_set(RP_ENOMEM, "rp_gpt_create: out of memory");
  m->rt = rt;
  m->making = fn;
  m->decoder = decoder;
  m->k = *k;
  m->cfg = *cfg;
  m->np = RP_GPT_PARAMS(cfg->layers);
  m->tp = cfg->tp ? cfg->tp : 1;
  m->xr = cfg->dist && m->tp > cfg->procs;
  m->G = m->xr ? rp_runtime_ranks(rt) * cfg->procs : cfg->procs;
  m->cfg.tp = m->tp;
  st = place_rank(m); /* with xr: G is a multiple of tp, at most the max */
  if (st != RP_OK) {
    free(m);
    return st;
  }
  m->dp = m->G / m->tp;
  size_t rb = (size_t)cfg->ring * cfg->batch * cfg->context;
  m->info = calloc(m->np, sizeof *m->info);
  m->w = calloc(m->np, sizeof *m->w);
  m->g = calloc(m->np, sizeof *m->g);
  m->mo = calloc(m->np, sizeof *m->mo);
  m->vo = calloc(m->np, sizeof *m->vo);
  m->sh = calloc(m->dp, sizeof *m->sh);
  if (m->tp > 1)
    m->ts = calloc(m->G, sizeof *m->ts);
  if (m->tp > 1 && m->dp > 1)
    m->gsum = calloc((size_t)m->tp * m->np, sizeof *m->gsum);
  m->hx = calloc(rb, sizeof *m->hx);
  m->hy = calloc(rb, sizeof *m->hy);
  if (!m->info || !m->w || !m->g || !m->mo || !m->vo || !m->sh || !m->hx ||
      !m->hy || (m->tp > 1 && !m->ts) || (m->tp > 1 && m->dp > 1 && !m->gsum))
    st = rp_error_set(RP_ENOMEM, "rp_gpt_create: out of memory");
  if (!st) {
    make_table(m);
    st = pick_procs(m);
  }
  if (!st && cfg->max_bytes)
    st = check_size(m, fn);
  if (!st)
    st = make_model(m);
  if (!st)
    st = rp_gpt_reset(m);
  if (st != RP_OK) {
    rp_gpt_destroy(m);
    return st;
  }
  *out = m;
  return RP_OK;
}

rp_status rp_gpt_create(rp_runtime *rt, const rp_kernel_tasks *k,
                        const rp_gpt_config *cfg, rp_gpt **out) {
  if (!rt || !k || !cfg || !out)
    return rp_error_set(RP_EINVAL, "rp_gpt_create: NULL argument");
  return create(rt, k, cfg, 0, "rp_gpt_create", out);
}

rp_status rp_gpt_create_decoder(rp_runtime *rt, const rp_kernel_tasks *k,
                                const rp_gpt_config *cfg, rp_gpt **out) {
  if (!rt || !k || !cfg || !out)
    return rp_error_set(RP_EINVAL, "rp_gpt_create_decoder: NULL argument");
  /* one processor, one row: of cfg only the architecture, the seed and
   * the limit count (the layout's and the optimizer's fields, unused, are
   * the defaults, so that no value of theirs is refused) */
  rp_gpt_config one;
  rp_gpt_config_init(&one);
  one.layers = cfg->layers;
  one.heads = cfg->heads;
  one.width = cfg->width;
  one.context = cfg->context;
  one.vocab = cfg->vocab;
  one.seed = cfg->seed;
  one.max_bytes = cfg->max_bytes;
  one.batch = 1;
  one.procs = 1;
  one.tp = 1;
  one.ring = 1;
  one.dist = 0;
  return create(rt, k, &one, 1, "rp_gpt_create_decoder", out);
}

/* ---------------------------------------------------------------------- */
/* Launch helpers */

static rp_status task_ev(rp_gpt *m, rp_task_id t, rp_proc p,
                         const rp_access *acc, uint32_t nacc, const void *args,
                         size_t size, const rp_interp *ip, uint32_t nip,
                         rp_event *done) {
  if (p == NOWHERE) { /* another rank's processor: that rank launches it */
    if (done)
      *done = RP_NO_EVENT;
    return m->recording ? rp_capture_name_next(m->rt, NULL) : RP_OK;
  }
  rp_launch l = {.task = t,
                 .proc = p,
                 .accesses = acc,
                 .naccess = nacc,
                 .args = args,
                 .args_size = size};
  if (ip && m->recording) {
    l.interps = ip;
    l.ninterp = nip;
  }
  return rp_launch_task(m->rt, &l, done);
}

static rp_status task(rp_gpt *m, rp_task_id t, rp_proc p, const rp_access *acc,
                      uint32_t nacc, const void *args, size_t size) {
  return task_ev(m, t, p, acc, nacc, args, size, NULL, 0, NULL);
}

/* A slot for an eager op's done event while m->collect (RP_NO_EVENT until
 * a launch fills it), else NULL. */
static rp_event *sink(rp_gpt *m) {
  if (!m->collect || m->nsinks >= MAXSINKS)
    return NULL;
  m->sinks[m->nsinks] = RP_NO_EVENT;
  return &m->sinks[m->nsinks++];
}

#define R(i)                                                                   \
  { (i), RP_READ, RP_REDOP_NONE }
#define W(i)                                                                   \
  { (i), RP_WRITE, RP_REDOP_NONE }
#define RW(i)                                                                  \
  { (i), RP_RW, RP_REDOP_NONE }
#define ACC(...)                                                               \
  (const rp_access[]){__VA_ARGS__},                                            \
      (uint32_t)(sizeof((const rp_access[]){__VA_ARGS__}) / sizeof(rp_access))

/* What one layer function needs: the processor, the shard's sizes (for a
 * tensor-parallel slice C and NH are its own: C / tp, NH / tp) and the
 * suffix of its ops' names. */
typedef struct ctx {
  rp_gpt *m;
  shard *s;
  int decode; /* one token at a per-replay position (rp_gpt_decode_step) */
  rp_proc p;
  char sfx[16];
  int tp;     /* the blocks run over group d's slices */
  uint32_t d; /* the data group */
  int32_t B, T, C, NH, V, N;
} ctx;

/* ---------------------------------------------------------------------- */
/* Layers: one forward and one backward function per kind */

/* Decoding: wte[token] + wpe[pos], both per replay. */
static rp_status embedding_token(ctx *x, rp_inst wte, rp_inst wpe,
                                 rp_inst out) {
  rp_gpt_token_args a = {0, 0, x->C, x->V, x->T};
  rp_interp ip[2] = {{offsetof(rp_gpt_decode_step, pos),
                      offsetof(rp_gpt_token_args, pos), sizeof a.pos},
                     {offsetof(rp_gpt_decode_step, token),
                      offsetof(rp_gpt_token_args, token), sizeof a.token}};
  return task_ev(x->m, x->m->k.embed_token, x->p, ACC(R(wte), R(wpe), W(out)),
                 &a, sizeof a, ip, 2, NULL);
}

static rp_status embedding_fwd(ctx *x, rp_inst tok, rp_inst wte, rp_inst wpe,
                               rp_inst out) {
  rp_status st = name_op(x->m, x->sfx, "embed");
  if (st || x->decode)
    return st ? st : embedding_token(x, wte, wpe, out);
  rp_gpt_embed_args a = {x->B, x->T, x->C, x->V};
  return task(x->m, x->m->k.embed_fwd, x->p,
              ACC(R(tok), R(wte), R(wpe), W(out)), &a, sizeof a);
}

static rp_status embedding_bwd(ctx *x, rp_inst tok, rp_inst dout, rp_inst dwte,
                               rp_inst dwpe) {
  rp_gpt_embed_args a = {x->B, x->T, x->C, x->V};
  rp_status st = name_op(x->m, x->sfx, "embed.bwd");
  return st ? st
            : task(x->m, x->m->k.embed_bwd, x->p,
                   ACC(R(tok), R(dout), RW(dwte), W(dwpe)), &a, sizeof a);
}

/* ln(in) into out; with `r` (not id 0) first res = in + r (the residual
 * add of the layer before, fused). */
static rp_status layernorm_fwd(ctx *x, const char *name, rp_inst in, rp_inst r,
                               rp_inst res, rp_inst w, rp_inst b, rp_inst out,
                               rp_inst mean, rp_inst rstd) {
  rp_gpt_ln_args a = {x->N, x->C, 1e-5f};
  rp_status st = name_op(x->m, x->sfx, "%s", name);
  if (st)
    return st;
  if (!r.id)
    return task(x->m, x->m->k.layernorm_fwd, x->p,
                ACC(R(in), R(w), R(b), W(out), W(mean), W(rstd)), &a, sizeof a);
  return task(x->m, x->m->k.residual_layernorm_fwd, x->p,
              ACC(R(in), R(r), W(res), R(w), R(b), W(out), W(mean), W(rstd)),
              &a, sizeof a);
}

/* dx += (or = without accumulate) the gradient through the LayerNorm. */
static rp_status layernorm_bwd(ctx *x, const char *name, rp_inst dout,
                               rp_inst in, rp_inst w, rp_inst mean,
                               rp_inst rstd, rp_inst dx, rp_inst dw, rp_inst db,
                               int accumulate) {
  rp_gpt_ln_bwd_args a = {x->N, x->C, accumulate};
  rp_access dxa = {dx, accumulate ? RP_RW : RP_WRITE, RP_REDOP_NONE};
  rp_status st = name_op(x->m, x->sfx, "%s.bwd", name);
  return st ? st
            : task(x->m, x->m->k.layernorm_bwd, x->p,
                   ACC(R(dout), R(in), R(w), R(mean), R(rstd), dxa, W(dw),
                       W(db)),
                   &a, sizeof a);
}

/* out[N, OC] = in[N, IC] W^T (+ b when b.id). */
/* (done: may be NULL, the op's event or reference) */
static rp_status linear_fwd_ev(ctx *x, const char *name, rp_inst in, rp_inst w,
                               rp_inst b, rp_inst out, int32_t IC, int32_t OC,
                               rp_event *done) {
  rp_gpt_matmul_args a = {x->N, IC, OC, b.id ? 1 : 0, 0};
  rp_status st = name_op(x->m, x->sfx, "%s", name);
  if (st)
    return st;
  if (b.id)
    return task_ev(x->m, x->m->k.matmul_fwd, x->p,
                   ACC(R(in), R(w), W(out), R(b)), &a, sizeof a, NULL, 0, done);
  return task_ev(x->m, x->m->k.matmul_fwd, x->p, ACC(R(in), R(w), W(out)), &a,
                 sizeof a, NULL, 0, done);
}

static rp_status linear_fwd(ctx *x, const char *name, rp_inst in, rp_inst w,
                            rp_inst b, rp_inst out, int32_t IC, int32_t OC) {
  return linear_fwd_ev(x, name, in, w, b, out, IC, OC, NULL);
}

/* din = dout W, dW = dout^T in, db = column sums (when db.id). */
static rp_status linear_bwd(ctx *x, const char *name, rp_inst dout, rp_inst in,
                            rp_inst w, rp_inst din, rp_inst dw, rp_inst db,
                            int32_t IC, int32_t OC) {
  rp_gpt_matmul_args a = {x->N, IC, OC, db.id ? 1 : 0, 0};
  rp_status st = name_op(x->m, x->sfx, "%s.bwd", name);
  if (st)
    return st;
  if (db.id)
    return task(x->m, x->m->k.matmul_bwd, x->p,
                ACC(R(dout), R(in), R(w), W(din), W(dw), W(db)), &a, sizeof a);
  return task(x->m, x->m->k.matmul_bwd, x->p,
              ACC(R(dout), R(in), R(w), W(din), W(dw)), &a, sizeof a);
}

static rp_status attention_fwd(ctx *x, const char *name, rp_inst qkv,
                               rp_inst qkvr, rp_inst att, rp_inst out,
                               rp_inst scratch) {
  rp_gpt_attn_args a = {x->B, x->T, x->C, x->NH};
  rp_status st = name_op(x->m, x->sfx, "%s", name);
  return st ? st
            : task(x->m, x->m->k.attention_fwd, x->p,
                   ACC(R(qkv), W(qkvr), W(att), W(out), W(scratch)), &a,
                   sizeof a);
}

/* Decoding: the token's k and v into the caches at pos (per replay), its
 * attention over positions 0..pos. */
static rp_status attention_decode(ctx *x, const char *name, rp_inst qkv,
                                  rp_inst kc, rp_inst vc, rp_inst out,
                                  rp_inst scratch) {
  rp_gpt_decode_args a = {0, x->T, x->C, x->NH};
  rp_interp ip = {offsetof(rp_gpt_decode_step, pos),
                  offsetof(rp_gpt_decode_args, pos), sizeof a.pos};
  rp_status st = name_op(x->m, x->sfx, "%s", name);
  return st ? st
            : task_ev(x->m, x->m->k.attention_decode, x->p,
                      ACC(R(qkv), RW(kc), RW(vc), W(out), W(scratch)), &a,
                      sizeof a, &ip, 1, NULL);
}

static rp_status attention_bwd(ctx *x, const char *name, rp_inst dout,
                               rp_inst qkvr, rp_inst att, rp_inst dqkv,
                               rp_inst datt, rp_inst scratch) {
  rp_gpt_attn_args a = {x->B, x->T, x->C, x->NH};
  rp_status st = name_op(x->m, x->sfx, "%s.bwd", name);
  return st ? st
            : task(x->m, x->m->k.attention_bwd, x->p,
                   ACC(R(dout), R(qkvr), R(att), W(dqkv), W(datt), W(scratch)),
                   &a, sizeof a);
}

static rp_status gelu_fwd(ctx *x, const char *name, rp_inst pre, rp_inst b,
                          rp_inst out) {
  rp_gpt_rows_cols_args a = {x->N, 4 * x->C};
  rp_status st = name_op(x->m, x->sfx, "%s", name);
  return st ? st
            : task(x->m, x->m->k.bias_gelu_fwd, x->p,
                   ACC(RW(pre), R(b), W(out)), &a, sizeof a);
}

static rp_status gelu_bwd(ctx *x, const char *name, rp_inst pre, rp_inst d) {
  rp_gpt_n_args a = {(int64_t)x->N * 4 * x->C};
  rp_status st = name_op(x->m, x->sfx, "%s.bwd", name);
  return st ? st
            : task(x->m, x->m->k.gelu_bwd, x->p, ACC(R(pre), R(d), W(d)), &a,
                   sizeof a);
}

/* Copy k of a parallel operator across ranks (see gpop), as this rank
 * sees it: whole on rank wr, part k on rank pr; to_parts: whole -> part,
 * split: chunk k of the whole. */
static rp_status xr_copy(rp_gpt *m, int to_parts, int split, uint32_t wr,
                         rp_inst whole, uint32_t pr, rp_inst part, uint32_t k,
                         uint32_t n, rp_event *done) {
  rp_dist_copy c = {.src_rank = to_parts ? wr : pr,
                    .dst_rank = to_parts ? pr : wr,
                    .src = to_parts ? whole : part,
                    .dst = to_parts ? part : whole,
                    .redop =
                        !split && !to_parts && k ? RP_REDOP_SUM : RP_REDOP_NONE,
                    .wait = RP_NO_EVENT};
  rp_instance_info wi, pi;
  rp_status st = RP_OK;
  if (split && wr == m->rank && !(st = rp_instance_query(m->rt, whole, &wi)))
    st = rp_chunk_rect(&wi.rect, 0, n, k, &c.rect); /* at global offsets */
  else if (split && pr == m->rank &&
           !(st = rp_instance_query(m->rt, part, &pi)))
    c.rect = pi.rect;
  if (!st && m->recording)
    st = rp_capture_name_next(m->rt, m->opname);
  return st ? st : rp_launch_dist_copy(m->rt, &c, done);
}

/* A parallel operator over n parts (split along dimension 0): the whole
 * on processor wp, part k on processor pp[k]. When one rank holds them all
 * (always without xr) that rank launches it (rp_launch_parallel). Across
 * ranks every rank launches the same copies, part after part, with
 * rp_launch_dist_copy (each rank keeps its side: send, receive, a local
 * copy or a placeholder): whole -> part k (a split kind's chunk k; the
 * parts on other ranks than the whole's first), or part k -> whole in
 * part order, summed into it after part 0 for the summing kinds (the
 * local operator's order, so the sums are the same bits). *done: the last
 * copy (a rank's communication runs in launch order). */
static rp_status gpop(rp_gpt *m, rp_pop_kind kind, int backward, uint32_t wp,
                      rp_inst whole, const uint32_t *pp, const rp_inst *parts,
                      uint32_t n, rp_event *done) {
  uint32_t wr = rank_of(m, wp);
  int one = 1;
  for (uint32_t k = 0; k < n; k++)
    one &= rank_of(m, pp[k]) == wr;
  if (one && wr == m->rank) {
    rp_parallel_op op = {.kind = kind,
                         .backward = backward,
                         .whole = whole,
                         .parts = parts,
                         .nparts = n,
                         .dim = 0,
                         .wait = RP_NO_EVENT};
    return rp_launch_parallel(m->rt, &op, done);
  }
  if (done)
    *done = RP_NO_EVENT;
  if (one) /* another rank's alone */
    return m->recording ? rp_capture_name_next(m->rt, NULL) : RP_OK;
  /* whole -> parts: the other ranks' parts first, so that no send waits
   * behind the work that this rank's own parts start (the copies run in
   * launch order); parts -> whole in part order (the sums' order) */
  int split = kind == RP_POP_REPARTITION || kind == RP_POP_COMBINE;
  int scatter = kind == RP_POP_REPARTITION || kind == RP_POP_REPLICATE;
  int to_parts = scatter != !!backward;
  rp_status st = RP_OK;
  uint32_t left = n;
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t k = 0; !st && k < n; k++) {
      int remote = rank_of(m, pp[k]) != wr;
      if (to_parts && remote == pass)
        continue; /* pass 0: the remote parts, pass 1: the others */
      if (!to_parts && pass)
        break;
      left--;
      st = xr_copy(m, to_parts, split, wr, whole, rank_of(m, pp[k]), parts[k],
                   k, n, left ? NULL : done);
    }
  return st;
}

/* Processors base + k * step (k < n) into pp. */
static const uint32_t *procs_of(uint32_t *pp, uint32_t n, uint32_t base,
                                uint32_t step) {
  for (uint32_t k = 0; k < n; k++)
    pp[k] = base + k * step;
  return pp;
}

/* ---------------------------------------------------------------------- */
/* Blocks */

/* The names of block l's ops, "h<l>.<op>", in the order its forward and
 * its backward issue them. */
static const char *const FWD_OPS[8] = {"ln1",       "attn.qkv", "attn",
                                       "attn.proj", "ln2",      "mlp.fc",
                                       "mlp.gelu",  "mlp.proj"};
static const char *const BWD_OPS[8] = {"mlp.proj", "mlp.gelu",  "mlp.fc",
                                       "ln2",      "attn.proj", "attn",
                                       "attn.qkv", "ln1"};

static void block_names(uint32_t l, const char *const k[8], char n[8][32]) {
  for (int i = 0; i < 8; i++)
    snprintf(n[i], 32, "h%u.%s", l, k[i]);
}

/* Block l's forward. `prev`: the previous block's activations (its
 * residual add is fused into this block's ln1), NULL for block 0. */
static rp_status block_fwd(ctx *x, const rp_inst *w, uint32_t l,
                           const block_acts *prev, block_acts *a) {
  int32_t C = x->C;
  char n[8][32];
  block_names(l, FWD_OPS, n);
  const char *gelu = n[6], *mproj = n[7];
  rp_inst none = {0};
  rp_status st =
      prev ? layernorm_fwd(x, n[0], prev->resm, prev->mproj, a->res,
                           w[BP(l, LN1_W)], w[BP(l, LN1_B)], a->ln1, a->ln1m,
                           a->ln1r)
           : layernorm_fwd(x, n[0], a->res, none, none, w[BP(l, LN1_W)],
                           w[BP(l, LN1_B)], a->ln1, a->ln1m, a->ln1r);
  if (!st)
    st = linear_fwd(x, n[1], a->ln1, w[BP(l, QKV_W)], w[BP(l, QKV_B)], a->qkv,
                    C, 3 * C);
  if (!st && x->decode)
    st =
        attention_decode(x, n[2], a->qkv, a->kc, a->vc, a->atty, x->s->scratch);
  else if (!st)
    st =
        attention_fwd(x, n[2], a->qkv, a->qkvr, a->att, a->atty, x->s->scratch);
  if (!st)
    st = linear_fwd(x, n[3], a->atty, w[BP(l, APROJ_W)], w[BP(l, APROJ_B)],
                    a->aproj, C, C);
  if (!st)
    st = layernorm_fwd(x, n[4], a->res, a->aproj, a->resm, w[BP(l, LN2_W)],
                       w[BP(l, LN2_B)], a->ln2, a->ln2m, a->ln2r);
  if (!st) /* the bias is added with the gelu */
    st = linear_fwd(x, n[5], a->ln2, w[BP(l, FC_W)], none, a->fcpre, C, 4 * C);
  if (!st)
    st = gelu_fwd(x, gelu, a->fcpre, w[BP(l, FC_B)], a->fcact);
  if (!st)
    st = linear_fwd(x, mproj, a->fcact, w[BP(l, MPROJ_W)], w[BP(l, MPROJ_B)],
                    a->mproj, 4 * C, C);
  return st;
}

/* Block l's backward: s->dres holds the gradient of the block's output
 * (resm + mproj) and gets that of its input. */
static rp_status block_bwd(ctx *x, shard *s, const rp_inst *w, const rp_inst *g,
                           uint32_t l, const block_acts *a) {
  int32_t C = x->C;
  char n[8][32];
  block_names(l, BWD_OPS, n);
  const char *ln1 = n[7];
  rp_status st =
      linear_bwd(x, n[0], s->dres, a->fcact, w[BP(l, MPROJ_W)], s->dfc,
                 g[BP(l, MPROJ_W)], g[BP(l, MPROJ_B)], 4 * C, C);
  if (!st)
    st = gelu_bwd(x, n[1], a->fcpre, s->dfc);
  if (!st)
    st = linear_bwd(x, n[2], s->dfc, a->ln2, w[BP(l, FC_W)], s->dln,
                    g[BP(l, FC_W)], g[BP(l, FC_B)], C, 4 * C);
  if (!st)
    st = layernorm_bwd(x, n[3], s->dln, a->resm, w[BP(l, LN2_W)], a->ln2m,
                       a->ln2r, s->dres, g[BP(l, LN2_W)], g[BP(l, LN2_B)], 1);
  if (!st)
    st = linear_bwd(x, n[4], s->dres, a->atty, w[BP(l, APROJ_W)], s->datty,
                    g[BP(l, APROJ_W)], g[BP(l, APROJ_B)], C, C);
  if (!st)
    st = attention_bwd(x, n[5], s->datty, a->qkvr, a->att, s->dqkv, s->datt,
                       s->scratch);
  if (!st)
    st = linear_bwd(x, n[6], s->dqkv, a->ln1, w[BP(l, QKV_W)], s->dln,
                    g[BP(l, QKV_W)], g[BP(l, QKV_B)], C, 3 * C);
  if (!st)
    st = layernorm_bwd(x, ln1, s->dln, a->res, w[BP(l, LN1_W)], a->ln1m,
                       a->ln1r, s->dres, g[BP(l, LN1_W)], g[BP(l, LN1_B)], 1);
  return st;
}

/* Group d's leader (on processor d * tp). */
static ctx make_ctx(rp_gpt *m, uint32_t d, uint32_t rows, int named) {
  const rp_gpt_config *c = &m->cfg;
  ctx x;
  memset(&x, 0, sizeof x);
  x.m = m;
  x.s = &m->sh[d];
  x.p = m->procs[d * m->tp];
  if (named && m->dp > 1)
    snprintf(x.sfx, sizeof x.sfx, ".s%u", d);
  x.tp = m->tp > 1;
  x.d = d;
  x.B = (int32_t)rows;
  x.T = (int32_t)c->context;
  x.C = (int32_t)c->width;
  x.NH = (int32_t)c->heads;
  x.V = (int32_t)c->vocab;
  x.N = (int32_t)(rows * c->context);
  return x;
}

/* Slice t of the leader lx's group: its processor, C / tp, NH / tp. */
static ctx slice_ctx(const ctx *lx, uint32_t t) {
  rp_gpt *m = lx->m;
  uint32_t p = lx->d * m->tp + t;
  ctx x = *lx;
  x.s = &m->ts[p];
  x.p = m->procs[p];
  if (m->dp > 1)
    snprintf(x.sfx, sizeof x.sfx, ".s%u.t%u", lx->d, t);
  else
    snprintf(x.sfx, sizeof x.sfx, ".t%u", t);
  x.C = lx->C / (int32_t)m->tp;
  x.NH = lx->NH / (int32_t)m->tp;
  return x;
}

/* ---- tensor parallelism (Megatron-LM's layout, docs/distributed.md) ----
 * The leader of a group (processor t = 0) keeps the residual stream and
 * runs the LayerNorms; each slice t runs its heads and hidden columns:
 *   ln -> REPLICATE (Megatron's f: copy forward, its backward sums the
 *   slices' input gradients) -> column-parallel qkv / fc on the slice's
 *   rows of W -> attention on its heads / gelu on its columns ->
 *   row-parallel proj on its input columns (partial [N, C] outputs, the
 *   bias added by slice 0 only) -> REDUCTION (Megatron's g: the partial
 *   sums meet at the leader; its backward copies the output gradient to
 *   every slice). */

/* The group's slices' instance picked by `pick` (offset into shard or
 * block_acts) into parts. */
static void slice_parts(const ctx *lx, uint32_t l, size_t off, int in_acts,
                        rp_inst *parts) {
  rp_gpt *m = lx->m;
  for (uint32_t t = 0; t < m->tp; t++) {
    shard *s = &m->ts[lx->d * m->tp + t];
    const char *base = in_acts ? (const char *)&s->a[l] : (const char *)s;
    memcpy(&parts[t], base + off, sizeof parts[t]);
  }
}
#define ACT_PARTS(lx, l, f, parts)                                             \
  slice_parts(lx, l, offsetof(block_acts, f), 1, parts)
#define SH_PARTS(lx, f, parts) slice_parts(lx, 0, offsetof(shard, f), 0, parts)

/* A parallel operator over the group's slices, named "h{l}.{what}". */
static rp_status tp_pop(const ctx *lx, rp_pop_kind kind, int backward,
                        rp_inst whole, const rp_inst *parts, const char *what,
                        uint32_t l) {
  uint32_t pp[RP_GPT_MAX_PROCS];
  rp_status st = name_op(lx->m, lx->sfx, "h%u.%s", l, what);
  return st ? st
            : gpop(lx->m, kind, backward, lx->d * lx->m->tp, whole,
                   procs_of(pp, lx->m->tp, lx->d * lx->m->tp, 1), parts,
                   lx->m->tp, NULL);
}

/* Block l's forward over the group's slices; w: the leader's weights. */
static rp_status tp_block_fwd(ctx *lx, const rp_inst *w, uint32_t l,
                              const block_acts *prev, block_acts *a) {
  rp_gpt *m = lx->m;
  int32_t C = lx->C, Cs = C / (int32_t)m->tp;
  char n[8][32];
  block_names(l, FWD_OPS, n);
  const char *gelu = n[6], *mproj = n[7];
  rp_inst none = {0}, parts[RP_GPT_MAX_PROCS];
  rp_status st =
      prev ? layernorm_fwd(lx, n[0], prev->resm, prev->mproj, a->res,
                           w[BP(l, LN1_W)], w[BP(l, LN1_B)], a->ln1, a->ln1m,
                           a->ln1r)
           : layernorm_fwd(lx, n[0], a->res, none, none, w[BP(l, LN1_W)],
                           w[BP(l, LN1_B)], a->ln1, a->ln1m, a->ln1r);
  ACT_PARTS(lx, l, ln1, parts);
  if (!st)
    st = tp_pop(lx, RP_POP_REPLICATE, 0, a->ln1, parts, "ln1.replicate", l);
  for (uint32_t t = 0; !st && t < m->tp; t++) {
    ctx x = slice_ctx(lx, t);
    const rp_inst *sw = x.s->w;
    block_acts *sa = &x.s->a[l];
    st = linear_fwd(&x, n[1], sa->ln1, sw[BP(l, QKV_W)], sw[BP(l, QKV_B)],
                    sa->qkv, C, 3 * Cs);
    if (!st)
      st = attention_fwd(&x, n[2], sa->qkv, sa->qkvr, sa->att, sa->atty,
                         x.s->scratch);
    if (!st) /* row-parallel: the bias once */
      st = linear_fwd(&x, n[3], sa->atty, sw[BP(l, APROJ_W)],
                      t ? none : w[BP(l, APROJ_B)], sa->aproj, Cs, C);
  }
  ACT_PARTS(lx, l, aproj, parts);
  if (!st)
    st =
        tp_pop(lx, RP_POP_REDUCTION, 0, a->aproj, parts, "attn.proj.reduce", l);
  if (!st)
    st = layernorm_fwd(lx, n[4], a->res, a->aproj, a->resm, w[BP(l, LN2_W)],
                       w[BP(l, LN2_B)], a->ln2, a->ln2m, a->ln2r);
  ACT_PARTS(lx, l, ln2, parts);
  if (!st)
    st = tp_pop(lx, RP_POP_REPLICATE, 0, a->ln2, parts, "ln2.replicate", l);
  for (uint32_t t = 0; !st && t < m->tp; t++) {
    ctx x = slice_ctx(lx, t);
    const rp_inst *sw = x.s->w;
    block_acts *sa = &x.s->a[l];
    st = linear_fwd(&x, n[5], sa->ln2, sw[BP(l, FC_W)], none, sa->fcpre, C,
                    4 * Cs);
    if (!st)
      st = gelu_fwd(&x, gelu, sa->fcpre, sw[BP(l, FC_B)], sa->fcact);
    if (!st)
      st = linear_fwd(&x, mproj, sa->fcact, sw[BP(l, MPROJ_W)],
                      t ? none : w[BP(l, MPROJ_B)], sa->mproj, 4 * Cs, C);
  }
  ACT_PARTS(lx, l, mproj, parts);
  if (!st)
    st = tp_pop(lx, RP_POP_REDUCTION, 0, a->mproj, parts, "mlp.proj.reduce", l);
  return st;
}

/* Block l's backward over the group's slices: s->dres (the leader's)
 * holds the gradient of the block's output and gets that of its input. */
static rp_status tp_block_bwd(ctx *lx, shard *s, const rp_inst *w,
                              const rp_inst *g, uint32_t l,
                              const block_acts *a) {
  rp_gpt *m = lx->m;
  int32_t C = lx->C, Cs = C / (int32_t)m->tp;
  char n[8][32];
  block_names(l, BWD_OPS, n);
  const char *ln1 = n[7];
  rp_inst none = {0}, dres[RP_GPT_MAX_PROCS], dln[RP_GPT_MAX_PROCS];
  SH_PARTS(lx, dres, dres);
  SH_PARTS(lx, dln, dln);
  rp_status st =
      tp_pop(lx, RP_POP_REDUCTION, 1, s->dres, dres, "mlp.proj.reduce.bwd", l);
  for (uint32_t t = 0; !st && t < m->tp; t++) {
    ctx x = slice_ctx(lx, t);
    shard *ss = x.s;
    const block_acts *sa = &ss->a[l];
    st = linear_bwd(&x, n[0], ss->dres, sa->fcact, ss->w[BP(l, MPROJ_W)],
                    ss->dfc, ss->g[BP(l, MPROJ_W)],
                    t ? none : g[BP(l, MPROJ_B)], 4 * Cs, C);
    if (!st)
      st = gelu_bwd(&x, n[1], sa->fcpre, ss->dfc);
    if (!st)
      st = linear_bwd(&x, n[2], ss->dfc, sa->ln2, ss->w[BP(l, FC_W)], ss->dln,
                      ss->g[BP(l, FC_W)], ss->g[BP(l, FC_B)], C, 4 * Cs);
  }
  if (!st)
    st = tp_pop(lx, RP_POP_REPLICATE, 1, s->dln, dln, "ln2.replicate.bwd", l);
  if (!st)
    st = layernorm_bwd(lx, n[3], s->dln, a->resm, w[BP(l, LN2_W)], a->ln2m,
                       a->ln2r, s->dres, g[BP(l, LN2_W)], g[BP(l, LN2_B)], 1);
  if (!st)
    st = tp_pop(lx, RP_POP_REDUCTION, 1, s->dres, dres, "attn.proj.reduce.bwd",
                l);
  for (uint32_t t = 0; !st && t < m->tp; t++) {
    ctx x = slice_ctx(lx, t);
    shard *ss = x.s;
    const block_acts *sa = &ss->a[l];
    st = linear_bwd(&x, n[4], ss->dres, sa->atty, ss->w[BP(l, APROJ_W)],
                    ss->datty, ss->g[BP(l, APROJ_W)],
                    t ? none : g[BP(l, APROJ_B)], Cs, C);
    if (!st)
      st = attention_bwd(&x, n[5], ss->datty, sa->qkvr, sa->att, ss->dqkv,
                         ss->datt, ss->scratch);
    if (!st)
      st = linear_bwd(&x, n[6], ss->dqkv, sa->ln1, ss->w[BP(l, QKV_W)], ss->dln,
                      ss->g[BP(l, QKV_W)], ss->g[BP(l, QKV_B)], C, 3 * Cs);
  }
  if (!st)
    st = tp_pop(lx, RP_POP_REPLICATE, 1, s->dln, dln, "ln1.replicate.bwd", l);
  if (!st)
    st = layernorm_bwd(lx, ln1, s->dln, a->res, w[BP(l, LN1_W)], a->ln1m,
                       a->ln1r, s->dres, g[BP(l, LN1_W)], g[BP(l, LN1_B)], 1);
  return st;
}

/* ---------------------------------------------------------------------- */
/* The model */

/* Embedding, blocks, lnf and the head: tokens -> s->logits. */
/* The forward up to the logits; done (may be NULL) gets the last op's
 * event (eager) or reference. */
static rp_status forward(ctx *x, shard *s, const rp_inst *w, rp_inst tokens,
                         rp_event *done) {
  uint32_t L = x->m->cfg.layers;
  rp_status st = embedding_fwd(x, tokens, w[WTE], w[WPE], s->a[0].res);
  for (uint32_t l = 0; !st && l < L; l++)
    st = x->tp ? tp_block_fwd(x, w, l, l ? &s->a[l - 1] : NULL, &s->a[l])
               : block_fwd(x, w, l, l ? &s->a[l - 1] : NULL, &s->a[l]);
  const block_acts *last = &s->a[L - 1];
  if (!st)
    st = layernorm_fwd(x, "lnf", last->resm, last->mproj, s->resf, w[LNF_W(L)],
                       w[LNF_B(L)], s->lnf, s->lnfm, s->lnfr);
  rp_inst none = {0};
  if (!st) /* tied: the head is wte */
    st = linear_fwd_ev(x, "lm_head", s->lnf, w[WTE], none, s->logits, x->C,
                       x->V, done);
  return st;
}

/* Cross-entropy (mean over the global batch's positions; with grad the
 * logits become dlogits). */
static rp_status loss_fwd(ctx *x, shard *s, int grad, rp_event *done) {
  const rp_gpt_config *c = &x->m->cfg;
  rp_gpt_xent_args a = {x->N, x->V, (float)c->batch * (float)c->context, grad};
  rp_access lg = {s->logits, grad ? RP_RW : RP_READ, RP_REDOP_NONE};
  rp_status st = name_op(x->m, x->sfx, "loss.xent");
  return st ? st
            : task_ev(x->m, x->m->k.xent, x->p,
                      ACC(lg, R(s->y), W(s->losses), W(s->loss)), &a, sizeof a,
                      NULL, 0, done);
}

/* From dlogits (in s->logits) to every gradient of the shard. */
static rp_status backward(ctx *x, shard *s) {
  uint32_t L = x->m->cfg.layers;
  const rp_inst *w = s->w, *g = s->g;
  rp_inst none = {0};
  rp_status st = linear_bwd(x, "lm_head", s->logits, s->lnf, w[WTE], s->dln,
                            g[WTE], none, x->C, x->V);
  if (!st)
    st = layernorm_bwd(x, "lnf", s->dln, s->resf, w[LNF_W(L)], s->lnfm, s->lnfr,
                       s->dres, g[LNF_W(L)], g[LNF_B(L)], 0);
  for (uint32_t l = L; !st && l-- > 0;)
    st = x->tp ? tp_block_bwd(x, s, w, g, l, &s->a[l])
               : block_bwd(x, s, w, g, l, &s->a[l]);
  if (!st) /* adds into dwte after the head's part */
    st = embedding_bwd(x, s->x, s->dres, g[WTE], g[WPE]);
  return st;
}

/* dp > 1: the weights into the leaders' replicas and, with tensor
 * parallelism, group 0's shards of the split tensors (where the optimizer
 * keeps them) into the other groups' slices (REPLICATE). */
static rp_status step_weights(rp_gpt *m) {
  rp_inst parts[RP_GPT_MAX_PROCS];
  uint32_t pp[RP_GPT_MAX_PROCS];
  rp_status st = RP_OK;
  for (uint32_t i = 0; !st && m->dp > 1 && i < m->np; i++) {
    if (split_dim(m, i) < 0) {
      for (uint32_t d = 0; d < m->dp; d++)
        parts[d] = m->sh[d].w[i];
      if (!(st = name_op(m, "", "%s.replicate", m->info[i].name)))
        st = gpop(m, RP_POP_REPLICATE, 0, 0, m->w[i],
                  procs_of(pp, m->dp, 0, m->tp), parts, m->dp, NULL);
      continue;
    }
    for (uint32_t t = 0; !st && t < m->tp; t++) {
      for (uint32_t d = 1; d < m->dp; d++)
        parts[d - 1] = m->ts[d * m->tp + t].w[i];
      if (!(st = name_op(m, "", "%s.t%u.replicate", m->info[i].name, t)))
        st = gpop(m, RP_POP_REPLICATE, 0, t, m->ts[t].w[i],
                  procs_of(pp, m->dp - 1, m->tp + t, m->tp), parts, m->dp - 1,
                  NULL);
    }
  }
  return st;
}

/* The step's batch (ring slot `index`, per replay) into the groups, and
 * the weights into their replicas and shards. */
static rp_status step_inputs(rp_gpt *m, uint32_t index) {
  const rp_gpt_config *c = &m->cfg;
  /* this rank's rows: the ring holds them batch after batch */
  rp_gather_args ga = {(int32_t)index, (int32_t)m->rows, (int32_t)c->context};
  rp_interp ip = {offsetof(rp_gpt_step_args, batch),
                  offsetof(rp_gather_args, index), sizeof ga.index};
  rp_status st = name_op(m, "", "batch.x.gather");
  if (!st)
    st = task_ev(m, m->k.gather_rows, m->procs[0], ACC(R(m->ring_x), W(m->bx)),
                 &ga, sizeof ga, &ip, 1, NULL);
  if (!st && !(st = name_op(m, "", "batch.y.gather")))
    st = task_ev(m, m->k.gather_rows, m->procs[0], ACC(R(m->ring_y), W(m->by)),
                 &ga, sizeof ga, &ip, 1, NULL);
  if (m->G == 1 || st)
    return st;
  rp_inst parts[RP_GPT_MAX_PROCS];
  uint32_t pp[RP_GPT_MAX_PROCS];
  if (m->dp > 1) {
    for (uint32_t d = 0; d < m->dp; d++)
      parts[d] = m->sh[d].x;
    if (!(st = name_op(m, "", "batch.x.split")))
      st = gpop(m, RP_POP_REPARTITION, 0, 0, m->bx,
                procs_of(pp, m->dp, 0, m->tp), parts, m->dp, NULL);
    for (uint32_t d = 0; d < m->dp; d++)
      parts[d] = m->sh[d].y;
    if (!st && !(st = name_op(m, "", "batch.y.split")))
      st = gpop(m, RP_POP_REPARTITION, 0, 0, m->by, pp, parts, m->dp, NULL);
  }
  return st ? st : step_weights(m);
}

/* Tensor i's gradient as processor t's AdamW reads it: at home, or with
 * tensor parallelism slice t's shard (dp > 1: the groups' sum of it). */
static rp_inst opt_grad(const rp_gpt *m, uint32_t t, uint32_t i) {
  if (split_dim(m, i) < 0)
    return m->g[i];
  return m->dp > 1 ? m->gsum[(size_t)t * m->np + i] : m->ts[t].g[i];
}

/* dp > 1: the groups' gradients summed (REDUCTION): those of the tensors
 * the leaders hold whole at home, each split tensor's shards into group
 * 0's slices (where the optimizer keeps them); and the losses. */
static rp_status reduce_grads(rp_gpt *m) {
  rp_inst parts[RP_GPT_MAX_PROCS];
  uint32_t pp[RP_GPT_MAX_PROCS];
  rp_status st = RP_OK;
  if (m->dp == 1)
    return st;
  for (uint32_t i = 0; !st && i < m->np; i++) {
    char gn[48];
    grad_name(m->info[i].name, gn, sizeof gn);
    if (split_dim(m, i) < 0) {
      for (uint32_t d = 0; d < m->dp; d++)
        parts[d] = m->sh[d].g[i];
      if (!(st = name_op(m, "", "%s.reduce", gn)))
        st = gpop(m, RP_POP_REDUCTION, 0, 0, m->g[i],
                  procs_of(pp, m->dp, 0, m->tp), parts, m->dp, NULL);
      continue;
    }
    for (uint32_t t = 0; !st && t < m->tp; t++) {
      for (uint32_t d = 0; d < m->dp; d++)
        parts[d] = m->ts[d * m->tp + t].g[i];
      if (!(st = name_op(m, "", "%s.t%u.reduce", gn, t)))
        st = gpop(m, RP_POP_REDUCTION, 0, t, opt_grad(m, t, i),
                  procs_of(pp, m->dp, t, m->tp), parts, m->dp, NULL);
    }
  }
  for (uint32_t d = 0; d < m->dp; d++)
    parts[d] = m->sh[d].loss;
  if (!st && !(st = name_op(m, "", "loss.reduce")))
    st = gpop(m, RP_POP_REDUCTION, 0, 0, m->loss, procs_of(pp, m->dp, 0, m->tp),
              parts, m->dp, m->cfg.dist ? NULL : sink(m));
  return st;
}

/* dist: sums the rank's loss and home gradients over the ranks, in place.
 * The all-reduces run one after another in this launch order on every
 * rank (reprise.h): the loss first, then the gradients last tensor first
 * (about the order backward finishes them: wte's last, after the
 * embedding's backward), so each waits for little besides its input. */
static rp_status step_allreduce(rp_gpt *m) {
  rp_allreduce a = {m->loss, RP_REDOP_SUM, RP_NO_EVENT};
  rp_status st = name_op(m, "", "loss.allreduce");
  if (!st)
    st = rp_launch_allreduce(m->rt, &a, sink(m));
  for (uint32_t i = m->np; !st && i-- > 0;) {
    char gn[48];
    grad_name(m->info[i].name, gn, sizeof gn);
    /* a split tensor: each of its shards where the optimizer keeps it */
    uint32_t n = split_dim(m, i) < 0 ? 1 : m->tp;
    for (uint32_t t = 0; !st && t < n; t++) {
      a.inst = opt_grad(m, t, i);
      if (n == 1)
        st = name_op(m, "", "%s.allreduce", gn);
      else
        st = name_op(m, "", "%s.t%u.allreduce", gn, t);
      if (!st)
        st = rp_launch_allreduce(m->rt, &a, NULL);
    }
  }
  return st;
}

/* xr: the step's loss from home to every rank (REPLICATE: each rank's
 * first processor holds its copy, lossr). An eager step's sink. */
static rp_status loss_replicate(rp_gpt *m) {
  rp_inst parts[RP_GPT_MAX_PROCS];
  uint32_t pp[RP_GPT_MAX_PROCS];
  for (uint32_t r = 0; r < m->ranks; r++)
    parts[r] = r == m->rank ? m->lossr : (rp_inst){0};
  rp_status st = name_op(m, "", "loss.replicate");
  return st ? st
            : gpop(m, RP_POP_REPLICATE, 0, 0, m->loss,
                   procs_of(pp, m->ranks, 0, m->cfg.procs), parts, m->ranks,
                   sink(m));
}

/* Processor t's gpt.adamw over the tensors it keeps (opt_count); with
 * norm_parts (tensor parallelism) the clipping norm from the gathered sums
 * of squares (sqr[t]). lr and step per replay. */
static rp_status adamw_on(rp_gpt *m, uint32_t t, float lr, int32_t step,
                          int32_t norm_parts) {
  const rp_gpt_config *c = &m->cfg;
  rp_gpt_adamw_args a;
  memset(&a, 0, sizeof a);
  a.lr = lr;
  a.step = step;
  a.beta1 = c->beta1;
  a.beta2 = c->beta2;
  a.eps = c->eps;
  a.weight_decay = c->weight_decay;
  a.max_norm = c->max_norm;
  a.norm_parts = norm_parts;
  rp_access acc[4 * RP_GPT_ADAMW_MAX + 2];
  uint32_t n = 0, k = 0;
  const shard *s = m->ts ? &m->ts[t] : NULL; /* NULL: tp 1, nothing split */
  for (uint32_t i = 0; i < m->np; i++) {
    int split = split_dim(m, i) >= 0;
    if (!split && t > 0)
      continue;
    a.decay[k++] = (uint8_t)(m->info[i].decay ? 1 : 0);
    acc[n++] = (rp_access){split ? s->w[i] : m->w[i], RP_RW, RP_REDOP_NONE};
    acc[n++] = (rp_access){opt_grad(m, t, i), RP_READ, RP_REDOP_NONE};
    acc[n++] = (rp_access){split ? s->mo[i] : m->mo[i], RP_RW, RP_REDOP_NONE};
    acc[n++] = (rp_access){split ? s->vo[i] : m->vo[i], RP_RW, RP_REDOP_NONE};
  }
  a.count = (int32_t)k;
  rp_inst stats = t ? m->ostats[t] : m->stats;
  acc[n++] = (rp_access){stats, RP_WRITE, RP_REDOP_NONE};
  if (norm_parts)
    acc[n++] = (rp_access){m->sqr[t], RP_READ, RP_REDOP_NONE};
  rp_interp ip[2] = {{offsetof(rp_gpt_step_args, lr),
                      offsetof(rp_gpt_adamw_args, lr), sizeof a.lr},
                     {offsetof(rp_gpt_step_args, step),
                      offsetof(rp_gpt_adamw_args, step), sizeof a.step}};
  rp_status st =
      norm_parts ? name_op(m, "", "adamw.t%u", t) : name_op(m, "", "adamw");
  return st ? st
            : task_ev(m, m->k.adamw, m->procs[t], acc, n, &a, sizeof a, ip, 2,
                      sink(m));
}

/* Processor t's gpt.sumsq over the gradients its AdamW reads. */
static rp_status sumsq_on(rp_gpt *m, uint32_t t) {
  rp_gpt_sumsq_args a = {0};
  rp_access acc[RP_GPT_ADAMW_MAX + 2];
  uint32_t n = 0;
  for (uint32_t i = 0; i < m->np; i++)
    if (t == 0 || split_dim(m, i) >= 0)
      acc[n++] = (rp_access){opt_grad(m, t, i), RP_READ, RP_REDOP_NONE};
  a.count = (int32_t)n;
  acc[n++] = (rp_access){m->part[t], RP_WRITE, RP_REDOP_NONE};
  acc[n++] = (rp_access){m->each[t], RP_WRITE, RP_REDOP_NONE};
  rp_status st = name_op(m, "", "grad.sumsq.t%u", t);
  return st ? st : task(m, m->k.sumsq, m->procs[t], acc, n, &a, sizeof a);
}

/* The optimizer step. One processor: one gpt.adamw over every tensor.
 * Tensor parallelism (the optimizer sharded like the weights: each of
 * group 0's processors keeps its shards' moments and updates them): each
 * processor sums its gradients' squares (gpt.sumsq), the sums meet at
 * home (COMBINE) and go back to every processor (REPLICATE), and each
 * runs gpt.adamw on its share with the global norm from them. */
static rp_status adamw(rp_gpt *m, float lr, int32_t step) {
  if (m->tp == 1)
    return adamw_on(m, 0, lr, step, 0);
  uint32_t pp[RP_GPT_MAX_PROCS];
  rp_status st = RP_OK;
  for (uint32_t t = 0; !st && t < m->tp; t++)
    st = sumsq_on(m, t);
  if (!st && !(st = name_op(m, "", "grad.sumsq.combine")))
    st = gpop(m, RP_POP_COMBINE, 0, 0, m->sq, procs_of(pp, m->tp, 0, 1),
              m->part, m->tp, NULL);
  if (!st && !(st = name_op(m, "", "grad.sumsq.replicate")))
    st = gpop(m, RP_POP_REPLICATE, 0, 0, m->sq, pp, m->sqr, m->tp, NULL);
  for (uint32_t t = 0; !st && t < m->tp; t++)
    st = adamw_on(m, t, lr, step, (int32_t)m->tp);
  return st;
}

/* A learning rate the step takes: finite, >= 0, and lr x weight_decay
 * below 1 (AdamW's decay step multiplies the matrices by 1 - lr x
 * weight_decay: at 1 or more it zeroes them, flips their sign or grows
 * them). Refused before any op is issued: a failed eager op would poison
 * the instances it writes for every later op. */
static rp_status lr_check(const rp_gpt *m, const char *fn, float lr) {
  if (!(isfinite(lr) && lr >= 0))
    return rp_error_set(RP_EINVAL, "%s: lr = %g (need finite, >= 0)", fn,
                        (double)lr);
  /* in float, as gpt.adamw computes it: a double product below 1 may
   * round to 1 */
  float lrwd = lr * m->cfg.weight_decay;
  if (!(lrwd < 1.0f))
    return rp_error_set(RP_EINVAL,
                        "%s: lr %g x weight_decay %g = %g in float (need "
                        "below 1: the decay step multiplies the matrices by "
                        "1 - lr x weight_decay)",
                        fn, (double)lr, (double)m->cfg.weight_decay,
                        (double)lrwd);
  return RP_OK;
}

static rp_status step_check(const rp_gpt *m, const rp_gpt_step_args *a,
                            const char *fn) {
  if (!m || !a)
    return rp_error_set(RP_EINVAL, "%s: NULL argument", fn);
  if (trainer_only(m, fn) != RP_OK)
    return RP_EINVAL;
  if (a->batch >= m->cfg.ring || a->step < 1)
    return rp_error_set(RP_ERANGE, "%s: batch %u of %u, step %d", fn, a->batch,
                        m->cfg.ring, (int)a->step);
  return lr_check(m, fn, a->lr);
}

rp_status rp_gpt_step_check(const rp_gpt *m, const rp_gpt_step_args *a) {
  return step_check(m, a, "rp_gpt_step_check");
}

rp_status rp_gpt_step(rp_gpt *m, const rp_gpt_step_args *a) {
  rp_status st = step_check(m, a, "rp_gpt_step");
  if (st != RP_OK)
    return st;
  st = step_inputs(m, a->batch);
  for (uint32_t d = 0; !st && d < m->dp; d++) {
    shard *s = &m->sh[d];
    ctx x = make_ctx(m, d, s->rows, 1);
    st = forward(&x, s, s->w, s->x, NULL);
    if (!st) /* the loss's last op is an eager step's sink */
      st = loss_fwd(&x, s, 1, m->dp == 1 && !m->cfg.dist ? sink(m) : NULL);
    if (!st)
      st = backward(&x, s);
  }
  if (!st)
    st = reduce_grads(m);
  if (!st && m->cfg.dist && !m->xr)
    st = step_allreduce(m);
  if (!st && m->xr)
    st = loss_replicate(m);
  if (!st)
    st = adamw(m, a->lr, a->step);
  return st;
}

/* The ops that write the step's final loss (docs/debugging.md, "Names."):
 * what rp_gpt_record binds to its "loss" postcondition. */
static const char *loss_op(const rp_gpt *m) {
  return m->xr         ? "loss.replicate"
         : m->cfg.dist ? "loss.allreduce"
         : m->dp > 1   ? "loss.reduce"
                       : "loss.xent";
}

static rp_status record_step(void *arg) {
  rp_gpt_step_args a = {0, 0.0f, 1};
  return rp_gpt_step(arg, &a);
}

rp_status rp_gpt_record(rp_gpt *m, rp_graph **out) {
  if (!m || !out)
    return rp_error_set(RP_EINVAL, "rp_gpt_record: NULL argument");
  if (trainer_only(m, "rp_gpt_record") != RP_OK)
    return RP_EINVAL;
  return rp_train_record(m->rt, &m->recording, record_step, m, loss_op(m),
                         "rp_gpt_record", out);
}

/* ---------------------------------------------------------------------- */
/* Evaluation and sampling (eager) */

rp_status rp_gpt_forward(rp_gpt *m, rp_inst tokens, uint32_t rows) {
  if (trainer_only(m, "rp_gpt_forward") != RP_OK)
    return RP_EINVAL;
  if (!m || rows == 0 || rows > m->sh[0].rows)
    return rp_error_set(RP_EINVAL, "rp_gpt_forward: rows %u (need 1..%u)", rows,
                        m ? m->sh[0].rows : 0);
  rp_instance_info in;
  int64_t need = (int64_t)rows * m->cfg.context;
  if (!tokens.id && here(m, 0))
    return rp_error_set(RP_EINVAL, "rp_gpt_forward: tokens handle 0 (none)");
  if (tokens.id) { /* 0: processor 0 is another rank's (it launches) */
    rp_status st = rp_instance_query(m->rt, tokens, &in);
    if (st != RP_OK)
      return rp_train_err_prefix(st, "rp_gpt_forward: tokens: ");
    if (in.dtype != RP_I32)
      return rp_error_set(RP_ETYPE, "rp_gpt_forward: tokens are %s (need i32)",
                          rp_dtype_name(in.dtype));
    if (rp_rect_volume(&in.rect) < need)
      return rp_error_set(RP_ESHAPE,
                          "rp_gpt_forward: tokens hold %lld elements (need "
                          ">= rows %u x context %u = %lld)",
                          (long long)rp_rect_volume(&in.rect), rows,
                          m->cfg.context, (long long)need);
  }
  ctx x = make_ctx(m, 0, rows, 1);
  rp_status st = m->tp > 1 ? step_weights(m) : RP_OK;
  return st ? st : forward(&x, &m->sh[0], m->w, tokens, sink(m));
}

/* RP_ERANGE naming the first of x[0..n), y[0..n) outside [0, V). */
static rp_status tokens_check(const rp_gpt *m, const int32_t *x,
                              const int32_t *y, size_t n, const char *fn) {
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 2; k++) {
      int32_t t = k ? y[i] : x[i];
      if (t < 0 || (uint32_t)t >= m->cfg.vocab)
        return rp_error_set(RP_ERANGE, "%s: %s[%zu] = %d outside [0, %u)", fn,
                            k ? "y" : "x", i, t, m->cfg.vocab);
    }
  return RP_OK;
}

/* Waits for the eager ops collected in m->sinks (m->collect) and releases
 * them; st (a failure issuing them) wins. A failed op poisoned what it
 * writes: the detail names it and says so. */
static rp_status wait_sinks(rp_gpt *m, rp_status st, const char *what) {
  m->collect = 0;
  uint32_t n = m->nsinks;
  m->nsinks = 0;
  return rp_train_wait_ops(m->rt, m->sinks, n, st, what,
                           "; the instances it writes stay poisoned, so "
                           "every later eager step, evaluation or sampling "
                           "of the model fails too");
}

/* Refuses a call that runs its ops eagerly and reads their results while
 * a capture is open on the runtime: this thread's would record its ops,
 * another thread's refuse them part-way. */
static rp_status eager_only(rp_gpt *m, const char *fn) {
  int who = rp_capture_open(m->rt);
  if (who)
    return rp_error_set(RP_ECAPTURE,
                        "%s: a capture is open on %s (this call runs its ops "
                        "eagerly and reads their results; end or abort the "
                        "capture first)",
                        fn, who > 0 ? "this thread" : "another thread");
  return RP_OK;
}

rp_inst rp_gpt_logits(const rp_gpt *m) {
  return m ? m->sh[0].logits : (rp_inst){0};
}

/* Waits for an eager communication op (and drops done); a failure gets
 * the peer's detail after `what`. */
static rp_status wait_dist(rp_gpt *m, rp_event done, const char *what) {
  rp_status st = rp_event_wait(m->rt, done, -1);
  rp_event_release(m->rt, done);
  return st ? rp_error_set(st, "%s: %s", what, rp_runtime_dist_detail(m->rt))
            : RP_OK;
}

/* dist: the sums of every rank's v[2] (an eager all-reduce of esum). */
static rp_status sum_ranks(rp_gpt *m, double v[2]) {
  rp_allreduce a = {m->esum, RP_REDOP_SUM, RP_NO_EVENT};
  rp_event done = RP_NO_EVENT;
  rp_status st = rp_instance_write(m->rt, m->esum, v, 2 * sizeof *v);
  if (!st && !(st = rp_launch_allreduce(m->rt, &a, &done)))
    st = wait_dist(m, done, "all-reduce of the loss sum");
  return st ? st : rp_instance_read(m->rt, m->esum, v, 2 * sizeof *v);
}

rp_status rp_gpt_evaluate(rp_gpt *m, const int32_t *x, const int32_t *y,
                          uint32_t n, double *loss) {
  if (!m || !x || !y || !loss || n == 0)
    return rp_error_set(RP_EINVAL, "rp_gpt_evaluate: bad argument");
  if (trainer_only(m, "rp_gpt_evaluate") != RP_OK)
    return RP_EINVAL;
  rp_status est = eager_only(m, "rp_gpt_evaluate");
  if (est != RP_OK)
    return est;
  double sum = 0;
  size_t per = (size_t)m->cfg.batch * m->cfg.context;
  est = tokens_check(m, x, y, per * n, "rp_gpt_evaluate"); /* all first */
  if (est != RP_OK)
    return est;
  rp_status st = RP_OK;
  for (uint32_t b = 0; !st && b < n; b += m->cfg.ring) {
    uint32_t k = n - b < m->cfg.ring ? n - b : m->cfg.ring;
    st = rp_gpt_write_batches(m, x + b * per, y + b * per, k);
    for (uint32_t i = 0; !st && i < k; i++) {
      m->collect = 1; /* the loss ops' events: a failure is waited for */
      m->nsinks = 0;
      st = step_inputs(m, i);
      for (uint32_t d = 0; !st && d < m->dp; d++) {
        shard *s = &m->sh[d];
        ctx c = make_ctx(m, d, s->rows, 0);
        st = forward(&c, s, s->w, s->x, NULL);
        if (!st)
          st = loss_fwd(&c, s, 0, sink(m));
      }
      if (!st && m->dp > 1) {
        rp_inst parts[RP_GPT_MAX_PROCS];
        for (uint32_t d = 0; d < m->dp; d++)
          parts[d] = m->sh[d].loss;
        uint32_t pp[RP_GPT_MAX_PROCS];
        st = gpop(m, RP_POP_REDUCTION, 0, 0, m->loss,
                  procs_of(pp, m->dp, 0, m->tp), parts, m->dp, sink(m));
      }
      st = wait_sinks(m, st, "evaluation");
      rp_status ds = rp_runtime_drain(m->rt);
      st = st ? st : ds;
      float l = 0; /* xr: the home's rank alone has the loss */
      if (!st && m->loss.id)
        st = rp_instance_read(m->rt, m->loss, &l, sizeof l);
      sum += l;
    }
  }
  if (st != RP_OK)
    st = rp_train_err_prefix(st, "rp_gpt_evaluate: ");
  if (!m->cfg.dist) {
    if (st == RP_OK)
      *loss = sum / n;
    return st;
  }
  /* dist: each rank's losses are its parts of the batches' means (norm:
   * the global batch). A rank whose part failed takes part too, so that
   * every rank returns a failure (with tensor parallelism across ranks a
   * failed op's sends are skipped: its peers fail on their own). */
  char why[1024]; /* rp_error_detail()'s size */
  snprintf(why, sizeof why, "%s", st ? rp_error_detail() : "");
  double v[2] = {st ? 0 : sum, st ? 1 : 0};
  rp_status ds = sum_ranks(m, v);
  if (st != RP_OK)
    return rp_error_set(st, "%s", why);
  if (ds != RP_OK)
    return rp_train_err_prefix(ds, "rp_gpt_evaluate: ");
  if (v[1] > 0)
    return rp_error_set(RP_EPOISON,
                        "rp_gpt_evaluate: %g rank(s) of the job failed their "
                        "part (their own details say why)",
                        v[1]);
  *loss = v[0] / n;
  return RP_OK;
}

static rp_status xr_piece(rp_gpt *m, rp_inst own, uint32_t owner, rp_rect r,
                          float *out, size_t n);

/* xr: *tok, picked on the home's rank, on every rank (through the home's
 * one-float instance tok; a token < V is exact as a float). Collective. */
static rp_status share_token(rp_gpt *m, int32_t *tok) {
  float f = (float)*tok;
  rp_status st =
      m->tok.id ? rp_instance_write(m->rt, m->tok, &f, sizeof f) : RP_OK;
  if (!st)
    st = xr_piece(m, m->tok, rank_of(m, 0), rp_rect_2d(0, 0, 0, 0), &f, 1);
  if (!st)
    *tok = (int32_t)f;
  return st;
}

static int desc_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x < y) - (x > y);
}

int32_t rp_gpt_pick(const float *lg, uint32_t V, float temperature,
                    uint32_t top_k, float *scratch, rp_rng *r) {
  int32_t best = 0;
  for (uint32_t v = 1; v < V; v++)
    best = lg[v] > lg[best] ? (int32_t)v : best;
  if (temperature <= 0)
    return best;
  float floor = -INFINITY; /* the logits below it take no part */
  if (top_k > 0 && top_k < V) {
    memcpy(scratch, lg, V * sizeof *scratch);
    qsort(scratch, V, sizeof *scratch, desc_float);
    floor = scratch[top_k - 1];
  }
  double z = 0, u = rp_rng_uniform(r), acc = 0;
  for (uint32_t v = 0; v < V; v++)
    z += lg[v] >= floor ? exp((lg[v] - lg[best]) / temperature) : 0.0;
  for (uint32_t v = 0; v < V; v++) {
    if (!(lg[v] >= floor))
      continue;
    acc += exp((lg[v] - lg[best]) / temperature) / z;
    if (u < acc)
      return (int32_t)v;
  }
  return best;
}

/* Before a sampling call `f` runs anything: plen + n tokens that fit a
 * 32-bit count, no capture open (eager_only), a prompt's
 * tokens in [0, V) and a temperature that is 0 or positive (a token
 * outside the vocabulary would fail the embedding op and poison the
 * instances it writes). */
static rp_status check_prompt(rp_gpt *m, const int32_t *prompt, uint32_t plen,
                              uint32_t n, const rp_gpt_sampling *how,
                              const char *f) {
  if (n > UINT32_MAX - plen) /* out holds plen + n tokens */
    return rp_error_set(RP_ERANGE,
                        "%s: %u prompt tokens + %u to generate overflow a "
                        "32-bit count",
                        f, plen, n);
  rp_status st = eager_only(m, f);
  if (st != RP_OK)
    return st;
  uint32_t V = m->cfg.vocab;
  for (uint32_t i = 0; i < plen; i++)
    if (prompt[i] < 0 || (uint32_t)prompt[i] >= V)
      return rp_error_set(RP_ERANGE, "%s: prompt token %u = %d outside [0, %u)",
                          f, i, (int)prompt[i], V);
  if (!(how->temperature >= 0 && isfinite(how->temperature)))
    return rp_error_set(RP_EINVAL,
                        "%s: temperature = %g (need 0 for greedy, or finite "
                        "and > 0)",
                        f, (double)how->temperature);
  return RP_OK;
}

/* The token after position `at` is drawn from V finite logits only: an
 * infinite or NaN one (weights that overflow) would draw garbage. Then
 * the caller's on_token. */
static rp_status pick_checked(const float *lg, uint32_t V, uint32_t at,
                              const rp_gpt_sampling *how, float *scratch,
                              rp_rng *r, const char *f, int32_t *tok) {
  for (uint32_t v = 0; v < V; v++)
    if (!isfinite(lg[v]))
      return rp_error_set(RP_ERANGE,
                          "%s: logit %u after token %u is %s: the weights "
                          "overflow float",
                          f, v, at,
                          isnan(lg[v]) ? "NaN"
                          : lg[v] > 0  ? "+infinity"
                                       : "-infinity");
  *tok = rp_gpt_pick(lg, V, how->temperature, how->top_k, scratch, r);
  return how->on_token ? how->on_token(how->arg, *tok) : RP_OK;
}

rp_status rp_gpt_sample(rp_gpt *m, const int32_t *prompt, uint32_t plen,
                        uint32_t n, const rp_gpt_sampling *how, int32_t *out) {
  if (!m || !prompt || !out || !how || plen == 0)
    return rp_error_set(RP_EINVAL, "rp_gpt_sample: bad argument");
  if (trainer_only(m, "rp_gpt_sample") != RP_OK)
    return RP_EINVAL;
  uint32_t T = m->cfg.context, V = m->cfg.vocab;
  rp_status st = check_prompt(m, prompt, plen, n, how, "rp_gpt_sample");
  if (st != RP_OK)
    return st;
  int32_t *win = calloc(T, sizeof *win);
  size_t nl = (size_t)m->sh[0].N * V; /* shard 0's logits instance */
  float *logits = calloc(nl + V, sizeof *logits); /* + pick's scratch */
  st = win && logits
           ? RP_OK
           : rp_error_set(RP_ENOMEM,
                          "rp_gpt_sample: out of memory for %zu bytes (a "
                          "window of %u tokens and %zu logits)",
                          T * sizeof *win + (nl + V) * sizeof *logits, T,
                          nl + V);
  rp_rng r;
  rp_rng_seed(&r, how->seed ^ 0x73616d706c65ull);
  memcpy(out, prompt, plen * sizeof *out);
  for (uint32_t i = 0; !st && i < n; i++) {
    uint32_t have = plen + i, k = have < T ? have : T;
    memset(win, 0, T * sizeof *win);
    memcpy(win, out + have - k, k * sizeof *win);
    if (m->sample.id) /* xr: the home's rank holds it */
      st = rp_instance_write(m->rt, m->sample, win, T * sizeof *win);
    m->collect = 1; /* the logits' op event: a failure is waited for */
    m->nsinks = 0;
    if (!st)
      st = rp_gpt_forward(m, m->sample, 1);
    st = wait_sinks(m, st, "forward");
    if (st != RP_OK)
      st = rp_train_err_prefix(st, "rp_gpt_sample: ");
    rp_status ds = rp_runtime_drain(m->rt);
    st = st ? st : ds;
    if (!st && m->sh[0].logits.id) /* shard 0's: rows * T, the first T */
      st =
          rp_instance_read(m->rt, m->sh[0].logits, logits, nl * sizeof *logits);
    if (st)
      break;
    int32_t tok = 0;
    rp_status ps = RP_OK;
    if (m->sh[0].logits.id)
      ps = pick_checked(logits + (size_t)(k - 1) * V, V, have - 1, how,
                        logits + nl, &r, "rp_gpt_sample", &tok);
    if (m->xr) { /* the home's rank's pick, on every rank (-1: it failed);
                    every rank goes on or stops by it alone */
      int32_t shared = ps ? -1 : tok;
      st = share_token(m, &shared);
      if (!st && shared >= 0)
        ps = RP_OK;
      else if (!st && !ps)
        ps = rp_error_set(RP_ERANGE,
                          "rp_gpt_sample: the home rank drew no token "
                          "after token %u",
                          have - 1);
      tok = shared;
    }
    st = st ? st : ps;
    if (!st)
      out[have] = tok;
  }
  free(win);
  free(logits);
  return st;
}

/* ---------------------------------------------------------------------- */
/* Decoding: one token per replay, with key/value caches */

/* Undoes a make_decode that failed part-way: its instances freed (the
 * last nall - nall0 of m->all), the byte counts as before, m->dec NULL,
 * so that the next call makes it (or is refused) from the start. */
static void unmake_decode(rp_gpt *m, uint32_t nall0, uint64_t made0,
                          uint64_t bytes0) {
  while (m->nall > nall0) /* made now, used by nothing: the free succeeds */
    (void)rp_instance_free(m->rt, m->all[--m->nall]);
  m->made_bytes = made0;
  m->bytes[0] = bytes0;
  for (uint32_t i = 0; i < m->np; i++)
    if (split_dim(m, i) >= 0)
      m->w[i] = (rp_inst){0};
  free_decode(m);
}

/* The decode step's table (its instances are in m->all). */
static void free_decode(rp_gpt *m) {
  if (m->dec)
    free(m->dec->a);
  free(m->dec);
  m->dec = NULL;
}

/* The decode instances (processor 0): one position's activations, the
 * caches [T x C] per block (head h's keys at rows h * T..), the scores.
 * On failure none is left (unmake_decode). */
static rp_status make_decode(rp_gpt *m) {
  const rp_gpt_config *c = &m->cfg;
  m->making = "the decode step";
  uint32_t nall0 = m->nall;
  uint64_t made0 = m->made_bytes, bytes0 = m->bytes[0];
  shard *d = calloc(1, sizeof *d);
  if (!d || !(d->a = calloc(c->layers, sizeof *d->a))) {
    free(d);
    return rp_error_set(RP_ENOMEM, "the decode step: out of memory");
  }
  m->dec = d;
  d->rows = 1;
  d->N = 1;
  uint64_t C = c->width, T = c->context;
  rp_status st = RP_OK;
  for (uint32_t l = 0; !st && l < c->layers; l++) {
    block_acts *a = &d->a[l];
    const inst_spec v[] = {{&a->res, 1, C, "res", 0},
                           {&a->ln1, 1, C, "ln1.out", 0},
                           {&a->ln1m, 1, 1, "ln1.mean", 0},
                           {&a->ln1r, 1, 1, "ln1.rstd", 0},
                           {&a->qkv, 1, 3 * C, "attn.qkv.out", 0},
                           {&a->atty, 1, C, "attn.y", 0},
                           {&a->aproj, 1, C, "attn.proj.out", 0},
                           {&a->resm, 1, C, "res.mid", 0},
                           {&a->ln2, 1, C, "ln2.out", 0},
                           {&a->ln2m, 1, 1, "ln2.mean", 0},
                           {&a->ln2r, 1, 1, "ln2.rstd", 0},
                           {&a->fcpre, 1, 4 * C, "mlp.fc.out", 0},
                           {&a->fcact, 1, 4 * C, "mlp.gelu", 0},
                           {&a->mproj, 1, C, "mlp.proj.out", 0},
                           {&a->kc, T, C, "attn.kcache", 0},
                           {&a->vc, T, C, "attn.vcache", 0}};
    char bl[24];
    snprintf(bl, sizeof bl, "dec.h%u.", l);
    st = make_specs(m, 0, SPECS(v), bl, 0);
  }
  const inst_spec v[] = {{&d->resf, 1, C, "res.final", 0},
                         {&d->lnf, 1, C, "lnf.out", 0},
                         {&d->lnfm, 1, 1, "lnf.mean", 0},
                         {&d->lnfr, 1, 1, "lnf.rstd", 0},
                         {&d->logits, 1, c->vocab, "logits", 0},
                         {&d->scratch, c->heads, T, "attn.scores", 0}};
  if (!st)
    st = make_specs(m, 0, SPECS(v), "dec.", 0);
  /* tensor parallelism: the split tensors whole on processor 0 (gathered
   * from the shards by rp_gpt_generate) */
  for (uint32_t i = 0; !st && i < m->np; i++)
    if (split_dim(m, i) >= 0 &&
        !(st = mk(m, 0, RP_F32, home_rect(m, i), &m->w[i])))
      st = name_inst(m, m->w[i], "dec.%s", m->info[i].name);
  if (st != RP_OK)
    unmake_decode(m, nall0, made0, bytes0);
  return st;
}

/* The decode step: one position of one row through the home weights. */
static rp_status decode_step(void *arg) {
  rp_gpt *m = arg;
  ctx x = make_ctx(m, 0, 1, 1);
  x.s = m->dec;
  x.decode = 1;
  x.tp = 0; /* the home weights on processor 0 */
  x.B = 1;  /* one position of one row; T stays the caches' length */
  x.N = 1;
  rp_inst none = {0};
  return forward(&x, m->dec, m->w, none, NULL);
}

rp_status rp_gpt_decode_record(rp_gpt *m, rp_graph **out) {
  if (!m || !out)
    return rp_error_set(RP_EINVAL, "rp_gpt_decode_record: NULL argument");
  rp_status st = m->dec ? RP_OK : make_decode(m);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "rp_gpt_decode_record: ");
  rp_graph *g = NULL;
  if ((st = rp_train_capture(m->rt, &m->recording, decode_step, m, &g)) !=
      RP_OK)
    return st;
  /* the host reads the logits after each replay: a postcondition on the
   * head says so (and `dump --lint` finds every op's result observed) */
  rp_port_id port;
  st = rp_graph_add_postcondition(g, "logits", &port);
  uint32_t bound = 0;
  for (rp_op_id i = 0; !st && i < rp_graph_op_count(g); i++) {
    uint32_t na = 0;
    rp_access *acc = NULL;
    if ((st = rp_graph_op_accesses(g, i, NULL, 0, &na)) == RP_OK && na &&
        !(acc = malloc(na * sizeof *acc)))
      st = rp_error_set(RP_ENOMEM, "rp_gpt_decode_record: out of memory");
    if (!st && na)
      st = rp_graph_op_accesses(g, i, acc, na, &na);
    int writes = 0;
    for (uint32_t k = 0; !st && k < na; k++)
      writes |= acc[k].inst.id == m->dec->logits.id && acc[k].priv != RP_READ;
    free(acc);
    if (!st && writes && !(st = rp_graph_bind_postcondition(g, port, i)))
      bound++;
  }
  if (!st && !bound)
    st = rp_error_set(RP_EINVAL,
                      "rp_gpt_decode_record: no op writes the logits");
  if (st != RP_OK) {
    rp_graph_destroy(g);
    return st;
  }
  *out = g;
  return RP_OK;
}

rp_inst rp_gpt_decode_logits(const rp_gpt *m) {
  return m && m->dec ? m->dec->logits : (rp_inst){0};
}

static rp_status decode_one(rp_gpt *m, rp_exec *ex, int32_t pos, int32_t token,
                            float *logits) {
  rp_gpt_decode_step a = {pos, token};
  rp_replay_args ra = {.args = &a, .args_size = sizeof a};
  rp_event done;
  rp_status st = rp_replay(ex, &ra, &done);
  if (st == RP_ERANGE) /* it reads past the (position, token) block */
    return rp_train_err_prefix(st,
                               "rp_gpt_generate: ex is not a decode step "
                               "(an instantiation of rp_gpt_decode_record's "
                               "graph): ");
  if (st != RP_OK)
    return rp_train_err_prefix(st, "rp_gpt_generate: ");
  st = rp_event_wait(m->rt, done, -1);
  rp_event_release(m->rt, done);
  if (st != RP_OK)
    return rp_error_set(st, "rp_gpt_generate: decode replay: %s",
                        rp_exec_error_detail(ex));
  return rp_instance_read(m->rt, m->dec->logits, logits,
                          m->cfg.vocab * sizeof *logits);
}

static rp_status slot_io(rp_gpt *m, uint32_t i, rp_gpt_slot s, float *out,
                         const float *in, size_t n);

/* Tensor parallelism: the split tensors' weights, gathered from the
 * shards, into the decode step's whole copies (make_decode). */
static rp_status gather_split(rp_gpt *m) {
  size_t most = 0;
  for (uint32_t i = 0; m->tp > 1 && i < m->np; i++)
    most = numel(&m->info[i]) > most ? numel(&m->info[i]) : most;
  if (most == 0)
    return RP_OK;
  float *buf = malloc(most * sizeof *buf);
  rp_status st = buf ? RP_OK
                     : rp_error_set(RP_ENOMEM,
                                    "out of memory for %zu bytes (a split "
                                    "tensor gathered from its shards)",
                                    most * sizeof *buf);
  for (uint32_t i = 0; !st && i < m->np; i++) {
    size_t n = numel(&m->info[i]);
    if (split_dim(m, i) >= 0 &&
        !(st = slot_io(m, i, RP_GPT_WEIGHT, buf, NULL, n)) && m->w[i].id)
      st = rp_instance_write(m->rt, m->w[i], buf, n * sizeof *buf);
  }
  free(buf);
  return st;
}

rp_status rp_gpt_decode_fill(rp_gpt *m) {
  if (!m)
    return rp_error_set(RP_EINVAL, "rp_gpt_decode_fill: NULL argument");
  rp_status st = eager_only(m, "rp_gpt_decode_fill");
  if (st != RP_OK)
    return st;
  st = m->dec ? RP_OK : make_decode(m);
  if (!st)
    st = gather_split(m);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "rp_gpt_decode_fill: ");
  m->dec_filled = 1;
  return RP_OK;
}

rp_status rp_gpt_generate(rp_gpt *m, rp_exec *ex, const int32_t *prompt,
                          uint32_t plen, uint32_t n, const rp_gpt_sampling *how,
                          int32_t *out) {
  if (!m || !ex || !prompt || !out || !how || plen == 0)
    return rp_error_set(RP_EINVAL, "rp_gpt_generate: bad argument");
  if (!m->dec)
    return rp_error_set(RP_EINVAL, "rp_gpt_generate: the model has no decode "
                                   "step (rp_gpt_decode_record it first)");
  uint32_t T = m->cfg.context, V = m->cfg.vocab;
  rp_status st = check_prompt(m, prompt, plen, n, how, "rp_gpt_generate");
  if (st != RP_OK)
    return st;
  if (m->xr && (!m->dec_filled || !m->dec->logits.id))
    return rp_error_set(RP_EINVAL,
                        "rp_gpt_generate: tensor parallelism across ranks: "
                        "the decode step runs on rank 0, after "
                        "rp_gpt_decode_fill on every rank");
  st = m->xr ? RP_OK : gather_split(m);
  /* the replays below are not ordered after eager ops: an eager step may
   * still be writing the weights they read */
  if (st == RP_OK)
    st = rp_runtime_drain(m->rt);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "rp_gpt_generate: ");
  float *logits = calloc(2 * (size_t)V, sizeof *logits); /* + scratch */
  if (!logits)
    return rp_error_set(RP_ENOMEM, "rp_gpt_generate: out of memory");
  rp_rng r;
  rp_rng_seed(&r, how->seed ^ 0x73616d706c65ull);
  memcpy(out, prompt, plen * sizeof *out);
  /* out[0..filled) are tokens; out[have] is decoded next, at position
   * pos; the caches hold positions 0..pos-1 = tokens out[have-pos..have) */
  uint32_t total = plen + n, filled = plen;
  uint32_t keep = plen < T ? plen : T; /* a long prompt: its last T */
  uint32_t have = plen - keep, pos = 0;
  while (!st && filled < total) {
    if (pos == T) { /* full: decode the last T/2 tokens again from 0 */
      have -= T / 2;
      pos = 0;
    }
    st = decode_one(m, ex, (int32_t)pos, out[have], logits);
    pos++;
    have++;
    if (!st && have == filled) { /* the last token: its logits sample */
      st = pick_checked(logits, V, filled - 1, how, logits + V, &r,
                        "rp_gpt_generate", &out[filled]);
      filled++;
    }
  }
  free(logits);
  return st;
}

/* ---------------------------------------------------------------------- */
/* State */

/* Tensor i's slot s where the optimizer keeps it: at home, or for a split
 * tensor slice t's shard of it. */
static rp_inst slot_inst(const rp_gpt *m, uint32_t i, rp_gpt_slot s,
                         uint32_t t) {
  if (s == RP_GPT_GRAD)
    return opt_grad(m, t, i);
  int split = split_dim(m, i) >= 0;
  const shard *ts = split ? &m->ts[t] : NULL;
  switch (s) {
  case RP_GPT_WEIGHT:
    return split ? ts->w[i] : m->w[i];
  case RP_GPT_MOM1:
    return split ? ts->mo[i] : m->mo[i];
  default:
    return split ? ts->vo[i] : m->vo[i];
  }
}

/* Copies between a split tensor's whole (row-major over home_rect) and
 * slice t's shard (row-major over its chunk): whole -> part when to_part,
 * else part -> whole. */
static void shard_copy(const rp_gpt *m, uint32_t i, uint32_t t, float *dst,
                       const float *src, int to_part) {
  rp_rect r = home_rect(m, i), c;
  int dim = split_dim(m, i);
  rp_chunk_rect(&r, dim, m->tp, t, &c); /* checked at create */
  size_t outer = 1, inner = 1;
  for (int d = 0; d < r.dim; d++) {
    size_t ext = (size_t)(r.hi[d] - r.lo[d] + 1);
    outer *= d < dim ? ext : 1;
    inner *= d > dim ? ext : 1;
  }
  size_t we = (size_t)(r.hi[dim] - r.lo[dim] + 1);
  size_t pe = (size_t)(c.hi[dim] - c.lo[dim] + 1), at = (size_t)c.lo[dim];
  for (size_t o = 0; o < outer; o++) {
    size_t w = (o * we + at) * inner, p = o * pe * inner;
    memcpy(dst + (to_part ? p : w), src + (to_part ? w : p),
           pe * inner * sizeof *dst);
  }
}

/* xr: a piece of a slot (the home instance or a shard, `own`, of rect r
 * on rank `owner`) into out (n floats) on every rank: the owner copies it
 * to each other rank (eager rp_launch_dist_copy, the same calls on every
 * rank: collective) and each rank reads its copy. */
static rp_status xr_piece(rp_gpt *m, rp_inst own, uint32_t owner, rp_rect r,
                          float *out, size_t n) {
  rp_inst tmp = {0};
  rp_mem sys;
  rp_status st = RP_OK;
  if (m->rank != owner && !(st = rp_mem_find(m->rt, RP_MEM_SYSTEM, -1, &sys)))
    st = rp_instance_create(m->rt, sys, RP_F32, &r, NULL, &tmp);
  for (uint32_t q = 0; !st && q < m->ranks; q++) {
    if (q == owner)
      continue;
    rp_dist_copy c = {.src_rank = owner,
                      .dst_rank = q,
                      .src = own,
                      .dst = tmp,
                      .redop = RP_REDOP_NONE,
                      .wait = RP_NO_EVENT};
    rp_event done = RP_NO_EVENT;
    char what[32];
    snprintf(what, sizeof what, "copy from rank %u", owner);
    if (!(st = rp_launch_dist_copy(m->rt, &c, &done)))
      st = wait_dist(m, done, what);
  }
  if (!st)
    st = rp_instance_read(m->rt, tmp.id ? tmp : own, out, n * sizeof *out);
  if (tmp.id)
    rp_instance_free(m->rt, tmp);
  return st;
}

/* Tensor i's slot s whole (n floats): read into out, or written from in
 * (when not NULL). The home instance, or each shard of a split tensor
 * through a scratch buffer. With xr a write leaves other ranks' pieces to
 * them, and a read is collective (xr_piece). */
static rp_status slot_io(rp_gpt *m, uint32_t i, rp_gpt_slot s, float *out,
                         const float *in, size_t n) {
  if (split_dim(m, i) < 0) {
    rp_inst one = slot_inst(m, i, s, 0);
    if (m->xr && !in)
      return xr_piece(m, one, rank_of(m, 0), home_rect(m, i), out, n);
    if (!one.id) /* xr: another rank's */
      return RP_OK;
    return in ? rp_instance_write(m->rt, one, in, n * sizeof *in)
              : rp_instance_read(m->rt, one, out, n * sizeof *out);
  }
  size_t pn = n / m->tp; /* config check: the split extents divide */
  float *part = malloc(pn * sizeof *part);
  rp_status st = part ? RP_OK
                      : rp_error_set(RP_ENOMEM,
                                     "out of memory for %zu bytes (one "
                                     "shard's part of a split tensor)",
                                     pn * sizeof *part);
  for (uint32_t t = 0; !st && t < m->tp; t++) {
    rp_inst sh = slot_inst(m, i, s, t);
    rp_rect whole = home_rect(m, i), r;
    rp_chunk_rect(&whole, split_dim(m, i), m->tp, t, &r); /* as created */
    if (in && sh.id) {
      shard_copy(m, i, t, part, in, 1);
      st = rp_instance_write(m->rt, sh, part, pn * sizeof *part);
    } else if (!in && m->xr) {
      if (!(st = xr_piece(m, sh, rank_of(m, t), r, part, pn)))
        shard_copy(m, i, t, out, part, 0);
    } else if (!in &&
               !(st = rp_instance_read(m->rt, sh, part, pn * sizeof *part))) {
      shard_copy(m, i, t, out, part, 0);
    }
  }
  free(part);
  return st;
}

rp_status rp_gpt_reset(rp_gpt *m) {
  if (!m)
    return rp_error_set(RP_EINVAL, "rp_gpt_reset: NULL argument");
  if (m->xr && eager_only(m, "rp_gpt_reset") != RP_OK) /* eager copies */
    return RP_ECAPTURE;
  size_t most = 0;
  for (uint32_t i = 0; i < m->np; i++)
    most = numel(&m->info[i]) > most ? numel(&m->info[i]) : most;
  float *buf = calloc(most, sizeof *buf), *zero = calloc(most, sizeof *zero);
  rp_status st = buf && zero
                     ? RP_OK
                     : rp_error_set(RP_ENOMEM,
                                    "rp_gpt_reset: out of memory for %zu bytes "
                                    "(two buffers of the largest tensor's %zu "
                                    "values)",
                                    2 * most * sizeof *buf, most);
  rp_rng r;
  rp_rng_seed(&r, m->cfg.seed ^ 0x6770742d696e6974ull); /* "gpt-init" */
  for (uint32_t i = 0; !st && i < m->np; i++) {
    const rp_gpt_param_info *p = &m->info[i];
    size_t n = numel(p);
    for (size_t j = 0; j < n; j++)
      buf[j] =
          p->init_std > 0 ? p->init_std * rp_rng_normal(&r) : p->init_value;
    st = slot_io(m, i, RP_GPT_WEIGHT, NULL, buf, n);
    for (int s = RP_GPT_GRAD; !st && !m->decoder && s <= RP_GPT_MOM2; s++)
      st = slot_io(m, i, (rp_gpt_slot)s, NULL, zero, n);
  }
  free(buf);
  free(zero);
  return st;
}

const rp_gpt_config *rp_gpt_cfg(const rp_gpt *m) {
  return m ? &m->cfg : NULL;
}
rp_status rp_gpt_proc_bytes(const rp_gpt *m, uint32_t p, uint64_t *total,
                            uint64_t *state) {
  if (!m || !total || !state || p >= m->G)
    return rp_error_set(RP_EINVAL, "rp_gpt_proc_bytes: processor %u of %u", p,
                        m ? m->G : 0);
  *total = m->bytes[p];
  *state = m->state_bytes[p];
  return RP_OK;
}
const rp_proc *rp_gpt_procs(const rp_gpt *m) {
  return m ? m->procs : NULL;
}
uint32_t rp_gpt_proc_count(const rp_gpt *m) {
  return m ? m->G : 0;
}
uint32_t rp_gpt_param_tensors(const rp_gpt *m) {
  return m ? m->np : 0;
}
size_t rp_gpt_param_count(const rp_gpt *m) {
  size_t n = 0;
  for (uint32_t i = 0; m && i < m->np; i++)
    n += numel(&m->info[i]);
  return n;
}
const rp_gpt_param_info *rp_gpt_param(const rp_gpt *m, uint32_t i) {
  return m && i < m->np ? &m->info[i] : NULL;
}

static rp_status check_slot(rp_gpt *m, uint32_t i, rp_gpt_slot s, size_t n,
                            const char *f) {
  if (!m || i >= m->np || (unsigned)s > RP_GPT_MOM2)
    return rp_error_set(RP_EINVAL, "%s: tensor %u slot %d", f, i, (int)s);
  if (s != RP_GPT_WEIGHT && trainer_only(m, f) != RP_OK)
    return RP_EINVAL;
  if (m->xr && eager_only(m, f) != RP_OK) /* shards travel by eager copies */
    return RP_ECAPTURE;
  if (n != numel(&m->info[i]))
    return rp_error_set(RP_ESHAPE, "%s: %s has %zu elements, not %zu", f,
                        m->info[i].name, numel(&m->info[i]), n);
  return RP_OK;
}

rp_status rp_gpt_tensor_read(rp_gpt *m, uint32_t i, rp_gpt_slot s, float *out,
                             size_t n) {
  if (!out)
    return rp_error_set(RP_EINVAL, "rp_gpt_tensor_read: NULL buffer");
  rp_status st = check_slot(m, i, s, n, "rp_gpt_tensor_read");
  if (st == RP_OK && (st = slot_io(m, i, s, out, NULL, n)) != RP_OK)
    st = rp_train_err_prefix(st, "rp_gpt_tensor_read: ");
  return st;
}

rp_status rp_gpt_tensor_write(rp_gpt *m, uint32_t i, rp_gpt_slot s,
                              const float *in, size_t n) {
  if (!in)
    return rp_error_set(RP_EINVAL, "rp_gpt_tensor_write: NULL buffer");
  rp_status st = check_slot(m, i, s, n, "rp_gpt_tensor_write");
  for (size_t k = 0; st == RP_OK && s == RP_GPT_MOM2 && k < n; k++)
    if (!(in[k] >= 0)) /* a mean of squares */
      st = rp_error_set(RP_EINVAL,
                        "rp_gpt_tensor_write: %s's second moment: element "
                        "%zu is %g (need >= 0: a mean of squares)",
                        m->info[i].name, k, (double)in[k]);
  if (st == RP_OK && (st = slot_io(m, i, s, NULL, in, n)) != RP_OK)
    st = rp_train_err_prefix(st, "rp_gpt_tensor_write: ");
  return st;
}

rp_status rp_gpt_params_read(rp_gpt *m, float *out, size_t n) {
  if (!m || !out)
    return rp_error_set(RP_EINVAL, "rp_gpt_params_read: NULL argument");
  if (n < rp_gpt_param_count(m))
    return rp_error_set(RP_EINVAL,
                        "rp_gpt_params_read: out holds %zu floats, the model "
                        "has %zu weights",
                        n, rp_gpt_param_count(m));
  rp_status st = RP_OK;
  for (uint32_t i = 0; !st && i < m->np; i++) {
    st = rp_gpt_tensor_read(m, i, RP_GPT_WEIGHT, out, numel(&m->info[i]));
    out += numel(&m->info[i]);
  }
  return st;
}

/* Keeps this rank's rows of the n global batches in the staging buffers,
 * batch after batch, at their front (in place: a batch's rows move to a
 * lower or the same offset). Without dist nothing moves. */
static void pack_rows(rp_gpt *m, uint32_t n) {
  size_t T = m->cfg.context, B = m->cfg.batch, rows = m->rows;
  for (size_t j = 0; m->cfg.dist && j < n; j++) {
    size_t to = j * rows * T, from = (j * B + (size_t)m->rlo) * T;
    memmove(m->hx + to, m->hx + from, rows * T * sizeof *m->hx);
    memmove(m->hy + to, m->hy + from, rows * T * sizeof *m->hy);
  }
}

/* The ring from the staging buffers (this rank's rows of every slot). */
static rp_status write_ring(rp_gpt *m) {
  if (!m->ring_x.id) /* xr: another rank's home holds the ring */
    return RP_OK;
  size_t all = (size_t)m->cfg.ring * m->rows * m->cfg.context;
  rp_status st =
      rp_instance_write(m->rt, m->ring_x, m->hx, all * sizeof *m->hx);
  return st ? st
            : rp_instance_write(m->rt, m->ring_y, m->hy, all * sizeof *m->hy);
}

rp_status rp_gpt_write_batches(rp_gpt *m, const int32_t *x, const int32_t *y,
                               uint32_t n) {
  if (!m || !x || !y || n == 0 || n > m->cfg.ring)
    return rp_error_set(RP_EINVAL, "rp_gpt_write_batches: %u batches (ring %u)",
                        n, m ? m->cfg.ring : 0);
  if (trainer_only(m, "rp_gpt_write_batches") != RP_OK)
    return RP_EINVAL;
  size_t per = (size_t)m->cfg.batch * m->cfg.context, total = per * n;
  rp_status st = tokens_check(m, x, y, total, "rp_gpt_write_batches");
  if (st != RP_OK)
    return st;
  m->ring_valid = 0; /* not the training windows any more */
  memcpy(m->hx, x, total * sizeof *x);
  memcpy(m->hy, y, total * sizeof *y);
  pack_rows(m, n);
  return write_ring(m);
}

rp_status rp_gpt_batch_loss(rp_gpt *m, float *out) {
  if (!m || !out)
    return rp_error_set(RP_EINVAL, "rp_gpt_batch_loss: NULL argument");
  if (trainer_only(m, "rp_gpt_batch_loss") != RP_OK)
    return RP_EINVAL;
  return rp_instance_read(m->rt, m->xr ? m->lossr : m->loss, out, sizeof *out);
}

rp_status rp_gpt_grad_norm(rp_gpt *m, float *out) {
  if (!m || !out)
    return rp_error_set(RP_EINVAL, "rp_gpt_grad_norm: NULL argument");
  if (trainer_only(m, "rp_gpt_grad_norm") != RP_OK)
    return RP_EINVAL;
  if (!m->stats.id)
    return rp_error_set(RP_EINVAL,
                        "rp_gpt_grad_norm: the norm is on rank %u "
                        "(processor 0)",
                        rank_of(m, 0));
  float *s = calloc(m->np + 1, sizeof *s);
  if (!s)
    return rp_error_set(RP_ENOMEM, "rp_gpt_grad_norm: out of memory");
  rp_status st = rp_instance_read(m->rt, m->stats, s, (m->np + 1) * sizeof *s);
  *out = s[0];
  free(s);
  return st;
}

/* ---------------------------------------------------------------------- */
/* Training */

/* Never above lr: lr x t / warmup and min + (lr - min) may round up by
 * an ulp, and a rate above the peak rp_gpt_train checked may be one
 * rp_gpt_step refuses (lr x weight_decay rounding to 1). */
float rp_gpt_lr(float lr, uint32_t warmup, uint32_t iters, uint32_t t) {
  float r = lr;
  if (t < warmup) {
    r = lr * (float)(t + 1) / (float)warmup;
  } else if (iters > warmup + 1) {
    float min = lr / 10.0f;
    double progress = (double)(t - warmup) / (double)(iters - warmup - 1);
    progress = progress > 1 ? 1 : progress;
    r = min + (float)(0.5 * (1.0 + cos(M_PI * progress))) * (lr - min);
  }
  return r < lr ? r : lr;
}

static rp_status run_one(rp_gpt *m, rp_exec *ex, const rp_gpt_step_args *a) {
  if (ex)
    return rp_train_replay_wait(m->rt, ex, a, sizeof *a);
  m->collect = 1;
  m->nsinks = 0;
  return wait_sinks(m, rp_gpt_step(m, a), "eager step");
}

/* Writes the next ring of batches, for steps s.. (evaluation may have
 * used the ring in between) when step s's batch is not in the ring. No
 * replay may be in flight. */
static rp_status refill(rp_gpt *m, const rp_text *t, uint32_t s,
                        uint32_t stop) {
  const rp_gpt_config *c = &m->cfg;
  if (s >= m->ring_base && s < m->ring_base + m->ring_valid)
    return RP_OK;
  uint32_t n = stop - s < c->ring ? stop - s : c->ring;
  /* every rank draws the global batches' windows and keeps its rows */
  rp_status st = rp_text_windows(t, 0, t->ntrain, c->batch, c->context, c->seed,
                                 s, n, m->hx, m->hy);
  if (st)
    return rp_train_err_prefix(st, "the training text: ");
  pack_rows(m, n);
  m->ring_base = s;
  m->ring_valid = n;
  return write_ring(m);
}

static int needs_refill(const rp_gpt *m, uint32_t s) {
  return s < m->ring_base || s >= m->ring_base + m->ring_valid;
}

static rp_gpt_step_args args_of(const rp_gpt *m, const rp_gpt_train_opts *o,
                                uint32_t s) {
  rp_gpt_step_args a = {(uint32_t)(s - m->ring_base),
                        rp_gpt_lr(o->lr, o->warmup, o->iters, s),
                        (int32_t)(s + 1)};
  return a;
}

static int reads_loss(const rp_gpt_train_opts *o, uint32_t s, uint32_t stop) {
  return o->loss_every && (s % o->loss_every == 0 || s + 1 == stop);
}

_Static_assert(RP_GPT_MAX_INFLIGHT <= RP_TRAIN_MAX_INFLIGHT,
               "the ring holds RP_GPT_MAX_INFLIGHT replays");

/* What a retired replay reports (rp_train_ring.report): the loss when its
 * step reads one (it is then the newest replay), through progress. */
typedef struct flight_ctx {
  rp_gpt *m;
  const rp_gpt_train_opts *o;
  uint32_t stop;
} flight_ctx;

static rp_status report_step(void *arg, uint32_t s, int *halt) {
  const flight_ctx *f = arg;
  float loss = NAN;
  int read = reads_loss(f->o, s, f->stop);
  rp_status st;
  if (read && (st = rp_gpt_batch_loss(f->m, &loss)) != RP_OK)
    return st;
  if (f->o->progress && f->o->progress(f->o->arg, s, read ? &loss : NULL))
    *halt = 1;
  return RP_OK;
}

/* Up to o->inflight replays outstanding (see rp_gpt_train_opts). The ring
 * is refilled, and a step that reads the loss is reported, only when no
 * replay is outstanding: every replay in flight reads a slot of the ring
 * as it was when the replay was issued. */
static rp_status train_inflight(rp_gpt *m, rp_exec *ex, const rp_text *t,
                                const rp_gpt_train_opts *o, uint32_t stop) {
  flight_ctx f = {m, o, stop};
  rp_train_ring r;
  rp_train_ring_init(&r, m->rt, ex, o->inflight, o->start, o->iter_ns,
                     report_step, &f);
  rp_status st = RP_OK;
  for (uint32_t s = o->start; !st && !r.halt && s < stop; s++) {
    if (r.n == r.cap && (st = rp_train_ring_retire(&r)) != RP_OK)
      break;
    while (!st && r.n && needs_refill(m, s))
      st = rp_train_ring_retire(&r);
    if (st || r.halt)
      break;
    if ((st = refill(m, t, s, stop)) != RP_OK) {
      st = rp_train_err_prefix(st, "step %u: ", s);
      break;
    }
    rp_gpt_step_args a = args_of(m, o, s);
    rp_replay_args ra = {.args = &a, .args_size = sizeof a};
    if ((st = rp_train_ring_issue(&r, &ra, s)) != RP_OK)
      break;
    while (!st && r.n && reads_loss(o, s, stop))
      st = rp_train_ring_retire(&r);
  }
  return rp_train_ring_finish(&r, st);
}

rp_status rp_gpt_train(rp_gpt *m, rp_exec *ex, const rp_text *t,
                       const rp_gpt_train_opts *o) {
  uint32_t stop = o && o->stop ? o->stop : o ? o->iters : 0;
  if (!m || !t || !o || o->start > stop || stop > o->iters)
    return rp_error_set(RP_EINVAL, "rp_gpt_train: bad argument");
  if (trainer_only(m, "rp_gpt_train") != RP_OK)
    return RP_EINVAL;
  if (eager_only(m, "rp_gpt_train") != RP_OK)
    return RP_ECAPTURE;
  if (o->inflight > RP_GPT_MAX_INFLIGHT)
    return rp_error_set(RP_EINVAL, "rp_gpt_train: inflight = %u (need 0..%d)",
                        o->inflight, RP_GPT_MAX_INFLIGHT);
  if (o->iters > RP_GPT_ITERS_MAX || o->warmup >= o->iters)
    return rp_error_set(RP_EINVAL,
                        "rp_gpt_train: iters %u, warmup %u (need iters in "
                        "1..%u and warmup below it: a schedule a checkpoint "
                        "holds)",
                        o->iters, o->warmup, RP_GPT_ITERS_MAX);
  if (t->ntrain <= m->cfg.context || t->vocab > m->cfg.vocab)
    return rp_error_set(RP_EINVAL,
                        "rp_gpt_train: the text's training split (%zu "
                        "tokens, vocabulary %u) does not fit the model "
                        "(windows of context %u + 1, vocabulary %u)",
                        t->ntrain, t->vocab, m->cfg.context, m->cfg.vocab);
  rp_status lst = lr_check(m, "rp_gpt_train", o->lr);
  if (lst != RP_OK)
    return lst;
  /* the batches an earlier call left in the ring are of its text (t may
   * be another, or changed since): the first step writes this one's */
  m->ring_valid = 0;
  uint64_t w0 = rp_train_now_ns();
  rp_status st = RP_OK;
  if (ex && o->inflight > 1) {
    st = train_inflight(m, ex, t, o, stop);
    if (o->wall_ns)
      *o->wall_ns = rp_train_now_ns() - w0;
    return st;
  }
  for (uint32_t s = o->start; !st && s < stop; s++) {
    if ((st = refill(m, t, s, stop)) != RP_OK)
      break;
    rp_gpt_step_args a = args_of(m, o, s);
    uint64_t t0 = rp_train_now_ns();
    st = run_one(m, ex, &a);
    uint64_t t1 = rp_train_now_ns();
    if (st) {
      st = rp_train_err_prefix(st, "step %u: ", s);
      break;
    }
    if (o->iter_ns)
      o->iter_ns[s - o->start] = t1 - t0;
    float loss = NAN;
    int read = reads_loss(o, s, stop);
    if (read && (st = rp_gpt_batch_loss(m, &loss)) != RP_OK)
      break;
    if (o->progress && o->progress(o->arg, s, read ? &loss : NULL))
      break;
  }
  if (!ex) {
    rp_status ds = rp_runtime_drain(m->rt);
    st = st ? st : ds;
  }
  if (o->wall_ns)
    *o->wall_ns = rp_train_now_ns() - w0;
  return st;
}

/* ---------------------------------------------------------------------- */
/* Checkpoints */

#define CKPT_KIND "gpt"  /* in the checkpoint container (ckpt.h) */
#define CKPT_VERSION 3u  /* the payload's format (gpt.h) */
#define CKPT_HEAD 68u    /* payload bytes before the vocabulary */
#define CKPT_HEAD_V2 60u /* version 2: no text digest */
#define CKPT_HEAD_V1 48u /* version 1: no layout fields either */
#define CKPT_MAX RP_GPT_CKPT_MAX

/* Floats of the checkpoint of a model of this shape: 3 per parameter. */
static uint64_t ckpt_floats(uint32_t L, uint64_t C, uint64_t T, uint64_t V) {
  uint64_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C +
                   4 * C + 4 * C * C + C;
  return 3 * (V * C + T * C + L * block + 2 * C);
}

/* What a checkpoint's step and schedule may be (the command line's
 * domain): lr finite in [0, RP_GPT_CKPT_LR_MAX]; with a schedule (iters
 * > 0, as the command line writes) step <= iters and warmup < iters
 * (iters 0: none recorded, the others as the library's caller gave them).
 * 0 when not (why: the reason). */
static int schedule_ok(uint32_t step, uint32_t iters, uint32_t warmup, float lr,
                       const char **why) {
  *why = !isfinite(lr) || lr < 0 || lr > RP_GPT_CKPT_LR_MAX
             ? "lr outside [0, 100]"
         : iters > RP_GPT_ITERS_MAX ? "iters above 100000000"
         : step > RP_GPT_ITERS_MAX  ? "step above 100000000"
         : iters && step > iters    ? "more steps done than iters"
         : iters && warmup >= iters ? "warmup not below iters"
                                    : NULL;
  return *why == NULL;
}

rp_status rp_gpt_save_check_config(const rp_gpt_config *cfg) {
  if (!cfg)
    return rp_error_set(RP_EINVAL, "rp_gpt_save_check_config: NULL config");
  /* the payload as rp_gpt_save writes it: 4 bytes per float */
  uint64_t payload =
      CKPT_HEAD + (uint64_t)cfg->vocab +
      4 * ckpt_floats(cfg->layers, cfg->width, cfg->context, cfg->vocab);
  return rp_ckpt_size_check("a model of this size", payload, CKPT_MAX);
}

rp_status rp_gpt_save_check(const rp_gpt *m) {
  if (!m)
    return rp_error_set(RP_EINVAL, "rp_gpt_save_check: NULL model");
  return rp_gpt_save_check_config(&m->cfg);
}

rp_status rp_gpt_save(rp_gpt *m, const char *path, const rp_gpt_ckpt *info) {
  if (!m || !path || !info)
    return rp_error_set(RP_EINVAL, "rp_gpt_save: NULL argument");
  if (trainer_only(m, "rp_gpt_save") != RP_OK)
    return RP_EINVAL;
  if (eager_only(m, "rp_gpt_save") != RP_OK)
    return RP_ECAPTURE;
  if (rp_gpt_save_check(m) != RP_OK)
    return rp_error_set(RP_ERANGE, "rp_gpt_save: %s", rp_error_detail());
  const char *why;
  if (!schedule_ok(info->step, info->iters, info->warmup, info->lr, &why))
    return rp_error_set(RP_EINVAL, /* the reader refuses it */
                        "rp_gpt_save: step %u, iters %u, warmup %u, lr = %g: "
                        "%s",
                        info->step, info->iters, info->warmup, (double)info->lr,
                        why);
  const rp_gpt_config *c = &m->cfg;
  for (uint32_t i = 1; i < c->vocab; i++) /* and this */
    if (info->bytes[i] <= info->bytes[i - 1])
      return rp_error_set(RP_EINVAL,
                          "rp_gpt_save: vocabulary byte %u (0x%02x) does not "
                          "follow byte %u (0x%02x) (need distinct bytes in "
                          "increasing order)",
                          i, info->bytes[i], i - 1, info->bytes[i - 1]);
  size_t nf = 3 * rp_gpt_param_count(m);
  size_t size = CKPT_HEAD + c->vocab + 4 * nf;
  unsigned char *b = calloc(size, 1);
  float *p = calloc(nf, sizeof *p);
  rp_status st =
      b && p ? RP_OK
             : rp_error_set(RP_ENOMEM,
                            "rp_gpt_save: out of memory for %zu bytes (the "
                            "checkpoint's %zu bytes and its %zu values)",
                            size + nf * sizeof *p, size, nf);
  float *q = p;
  for (uint32_t i = 0; !st && i < m->np; i++)
    for (int s = 0; !st && s < 4; s++) {
      if (s == RP_GPT_GRAD)
        continue;
      st = rp_gpt_tensor_read(m, i, (rp_gpt_slot)s, q, numel(&m->info[i]));
      q += numel(&m->info[i]);
    }
  if (!st) /* the reader would refuse it */
    st = rp_ckpt_check_finite(p, nf, "rp_gpt_save",
                              "the weights and AdamW moments", 0);
  if (!st) {
    uint32_t h[] = {c->layers, c->heads, c->width,  c->context,
                    c->vocab,  c->batch, info->step};
    for (int i = 0; i < 7; i++)
      rp_le_put32(b + 4 * i, h[i]);
    rp_le_putf(b + 28, info->lr);
    rp_le_put32(b + 32, info->warmup);
    rp_le_put32(b + 36, info->iters);
    rp_le_put32(b + 40, (uint32_t)c->seed);
    rp_le_put32(b + 44, (uint32_t)(c->seed >> 32));
    rp_le_put32(b + 48, c->procs);
    rp_le_put32(b + 52, m->tp);
    rp_le_put32(b + 56, m->ranks);
    rp_le_put64(b + 60, info->text_digest);
    memcpy(b + CKPT_HEAD, info->bytes, c->vocab);
    for (size_t i = 0; i < nf; i++)
      rp_le_putf(b + CKPT_HEAD + c->vocab + 4 * i, p[i]);
    /* the container: its length and checksum around the payload, written
     * through the output writer (the file is replaced only by a whole
     * one); xr: by rank 0 alone */
    if (!m->xr || m->rank == 0)
      st = rp_ckpt_save(path, CKPT_KIND, CKPT_VERSION, b, size);
  }
  free(b);
  free(p);
  return st;
}

/* Checks the payload's header (at b; n bytes in all, head of them the
 * header) of a checkpoint the container has checked and fills *c (but for
 * the vocabulary and the floats). */
static rp_status ckpt_parse(const char *path, const unsigned char *b, size_t n,
                            uint32_t head, rp_gpt_ckpt *c) {
  if (n < head)
    return rp_error_set(RP_EFORMAT,
                        "%s: GPT payload of %zu byte%s (its header alone "
                        "has %u)",
                        path, n, n == 1 ? "" : "s", head);
  c->layers = rp_le_get32(b);
  c->heads = rp_le_get32(b + 4);
  c->width = rp_le_get32(b + 8);
  c->context = rp_le_get32(b + 12);
  c->vocab = rp_le_get32(b + 16);
  c->batch = rp_le_get32(b + 20);
  c->step = rp_le_get32(b + 24);
  c->lr = rp_le_getf(b + 28);
  c->warmup = rp_le_get32(b + 32);
  c->iters = rp_le_get32(b + 36);
  c->seed = rp_le_get32(b + 40) | (uint64_t)rp_le_get32(b + 44) << 32;
  if (head > CKPT_HEAD_V1) {
    c->procs = rp_le_get32(b + 48);
    c->tp = rp_le_get32(b + 52);
    c->ranks = rp_le_get32(b + 56);
    if (c->procs < 1 || c->procs > RP_GPT_MAX_PROCS || c->tp < 1 ||
        c->tp > 256 || c->ranks < 1 || c->ranks > INT32_MAX || /* MPI's */
        (c->tp <= c->procs ? c->procs % c->tp != 0
                           : c->tp % c->procs != 0 || /* across ranks */
                                 (c->ranks % (c->tp / c->procs)) != 0))
      return rp_error_set(RP_EFORMAT,
                          "%s: bad header (procs %u, tp %u, ranks %u)", path,
                          c->procs, c->tp, c->ranks);
  }
  if (head > CKPT_HEAD_V2)
    c->text_digest = rp_le_get64(b + 60);
  if (c->layers < 1 || c->layers > RP_GPT_MAX_LAYERS || c->heads < 1 ||
      c->heads > 256 || c->width < 1 || c->width > RP_GPT_MAX_WIDTH ||
      c->width % c->heads || c->context < 1 ||
      c->context > RP_GPT_MAX_CONTEXT || c->vocab < 2 ||
      c->vocab > RP_GPT_MAX_VOCAB || c->batch < 1 ||
      c->batch > RP_GPT_MAX_BATCH)
    return rp_error_set(RP_EFORMAT,
                        "%s: bad header (layers %u, heads %u, "
                        "width %u, context %u, vocab %u, batch %u)",
                        path, c->layers, c->heads, c->width, c->context,
                        c->vocab, c->batch);
  const char *why;
  if (!schedule_ok(c->step, c->iters, c->warmup, c->lr, &why))
    return rp_error_set(RP_EFORMAT,
                        "%s: bad header (step %u, iters %u, warmup %u, lr "
                        "%g: %s)",
                        path, c->step, c->iters, c->warmup, (double)c->lr, why);
  uint64_t want = head + c->vocab +
                  4 * ckpt_floats(c->layers, c->width, c->context, c->vocab);
  if (n != want)
    return rp_error_set(RP_EFORMAT,
                        "%s: %s: the header (a GPT of %u layer%s, width "
                        "%u, context %u, vocabulary %u) needs %llu payload "
                        "bytes, the file has %zu",
                        path, n < want ? "truncated" : "trailing bytes",
                        c->layers, c->layers == 1 ? "" : "s", c->width,
                        c->context, c->vocab, (unsigned long long)want, n);
  return RP_OK;
}

/* The vocabulary (c->vocab bytes at b) into c: the bytes present in a
 * text, in increasing order (rp_text). */
static rp_status ckpt_vocab(const char *path, const unsigned char *b,
                            rp_gpt_ckpt *c) {
  memcpy(c->bytes, b, c->vocab);
  for (uint32_t i = 1; i < c->vocab; i++)
    if (c->bytes[i] <= c->bytes[i - 1])
      return rp_error_set(RP_EFORMAT,
                          "%s: vocabulary byte %u (0x%02x) does not follow "
                          "byte %u (0x%02x): a vocabulary holds distinct "
                          "bytes in increasing order",
                          path, i, c->bytes[i], i - 1, c->bytes[i - 1]);
  return RP_OK;
}

void rp_gpt_ckpt_free(rp_gpt_ckpt *c) {
  if (!c)
    return;
  free(c->data);
  memset(c, 0, sizeof *c);
}

rp_status rp_gpt_ckpt_fits(const rp_gpt_ckpt *c, const rp_gpt_config *g) {
  if (!c || !g)
    return rp_error_set(RP_EINVAL, "rp_gpt_ckpt_fits: NULL argument");
  if (c->layers != g->layers || c->heads != g->heads || c->width != g->width ||
      c->context != g->context || c->vocab != g->vocab)
    return rp_error_set(RP_ESHAPE,
                        "the file holds a GPT of %u layer%s, %u head%s, "
                        "width %u, context %u, vocabulary %u; this model has "
                        "%u, %u, %u, %u, %u",
                        c->layers, c->layers == 1 ? "" : "s", c->heads,
                        c->heads == 1 ? "" : "s", c->width, c->context,
                        c->vocab, g->layers, g->heads, g->width, g->context,
                        g->vocab);
  return RP_OK;
}

rp_status rp_gpt_ckpt_apply(rp_gpt *m, const rp_gpt_ckpt *c) {
  if (!m || !c || !c->data)
    return rp_error_set(RP_EINVAL, "rp_gpt_ckpt_apply: NULL argument");
  if (trainer_only(m, "rp_gpt_ckpt_apply") != RP_OK)
    return RP_EINVAL;
  rp_status fit = rp_gpt_ckpt_fits(c, &m->cfg);
  if (fit)
    return fit;
  if (c->ndata != 3 * rp_gpt_param_count(m))
    return rp_error_set(RP_ESHAPE,
                        "rp_gpt_ckpt_apply: %zu values, this model takes %zu "
                        "(weights and both moments of %zu parameters)",
                        c->ndata, 3 * rp_gpt_param_count(m),
                        rp_gpt_param_count(m));
  /* a second moment is a mean of squares: a negative one (only a crafted
   * file holds one) is refused before anything is written */
  const float *q = c->data;
  for (uint32_t i = 0; i < m->np; i++) {
    size_t n = numel(&m->info[i]);
    const float *v = q + 2 * n;
    for (size_t k = 0; k < n; k++)
      if (!(v[k] >= 0)) /* NaN too */
        return rp_error_set(RP_EFORMAT,
                            "rp_gpt_ckpt_apply: %s's second AdamW moment "
                            "holds %g at element %zu (a mean of squares is "
                            "never negative or NaN)",
                            m->info[i].name, (double)v[k], k);
    q += 3 * n;
  }
  q = c->data;
  rp_status st = RP_OK;
  for (uint32_t i = 0; !st && i < m->np; i++)
    for (int s = 0; !st && s < 4; s++) {
      if (s == RP_GPT_GRAD)
        continue;
      st = rp_gpt_tensor_write(m, i, (rp_gpt_slot)s, q, numel(&m->info[i]));
      q += numel(&m->info[i]);
    }
  return st;
}

/* What a streamed read (ckpt_stream) does with the values. */
typedef enum ckpt_mode {
  CKPT_INFO,    /* checks them, keeps none */
  CKPT_DATA,    /* keeps them all in c->data (rp_gpt_ckpt_read) */
  CKPT_WEIGHTS, /* writes the weights into m, checks the moments */
  CKPT_STATE    /* writes the weights and both moments into m */
} ckpt_mode;

/* A checkpoint streamed (rp_ckpt_reader), never held whole: its header
 * and vocabulary into *c, every value checked (finite; second moments
 * >= 0), tensor after tensor through one buffer of the largest. INFO and
 * DATA verify the checksum in a first pass, before anything else of the
 * payload; WEIGHTS and STATE (m: a model, its architecture the file's)
 * check it at the end, after writing into m, and refuse a file whose
 * header's checksum is not *expect (the file rp_gpt_ckpt_read_info
 * verified; NULL: no such check) before writing anything. */
static rp_status ckpt_stream(const char *path, rp_gpt_ckpt *c, rp_gpt *m,
                             ckpt_mode mode, const uint64_t *expect) {
  rp_ckpt_reader *r = NULL;
  uint32_t version = 0;
  uint64_t len = 0;
  int verify = mode == CKPT_INFO || mode == CKPT_DATA;
  rp_status st = rp_ckpt_reader_open(path, CKPT_KIND, CKPT_MAX, verify,
                                     &version, &len, &r);
  if (st != RP_OK)
    return st;
  memset(c, 0, sizeof *c);
  c->checksum = rp_ckpt_reader_checksum(r);
  if (expect && c->checksum != *expect)
    st = rp_error_set(RP_ECHECKSUM,
                      "%s: the file changed since it was read (its checksum "
                      "is now fnv1a64:%016llx, was %016llx): nothing loaded",
                      path, (unsigned long long)c->checksum,
                      (unsigned long long)*expect);
  if (!st && (version < 1 || version > CKPT_VERSION))
    st = rp_error_set(RP_EVERSION,
                      "%s: GPT checkpoint payload version %u (this "
                      "build reads versions 1 to %u)",
                      path, version, CKPT_VERSION);
  uint32_t head = version == 1   ? CKPT_HEAD_V1
                  : version == 2 ? CKPT_HEAD_V2
                                 : CKPT_HEAD;
  unsigned char hb[CKPT_HEAD + RP_GPT_MAX_VOCAB];
  if (!st)
    st = rp_ckpt_reader_read(r, hb, len < head ? (size_t)len : head);
  if (!st)
    st = ckpt_parse(path, hb, (size_t)len, head, c);
  if (!st && !(st = rp_ckpt_reader_read(r, hb + head, c->vocab)))
    st = ckpt_vocab(path, hb + head, c);
  if (!st && m && (st = rp_gpt_ckpt_fits(c, &m->cfg)) != RP_OK)
    st = rp_train_err_prefix(st, "%s: ", path);
  const rp_gpt_param_info *info = m ? m->info : NULL;
  rp_gpt_param_info *own = NULL;
  uint32_t np = RP_GPT_PARAMS(c->layers);
  if (!st && !m) { /* the shapes of the file's model */
    rp_gpt tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.cfg.layers = c->layers;
    tmp.cfg.width = c->width;
    tmp.cfg.context = c->context;
    tmp.cfg.vocab = c->vocab;
    tmp.np = np;
    tmp.info = own = calloc(np, sizeof *own);
    if (own)
      make_table(&tmp);
    else
      st = rp_ckpt_oom(path, (uint64_t)np * sizeof *own,
                       "holding the shapes of its %u tensors", np);
    info = own;
  }
  size_t most = 0, all = 0;
  uint32_t big = 0; /* the largest tensor */
  for (uint32_t i = 0; !st && i < np; i++) {
    if (numel(&info[i]) > most)
      most = numel(&info[i]), big = i;
    all += 3 * numel(&info[i]);
  }
  float *v = NULL, *data = NULL;
  if (!st && mode == CKPT_DATA && !(data = malloc(all * sizeof *data)))
    st = rp_ckpt_oom(path, (uint64_t)all * sizeof *data,
                     "reading its %zu values (the weights and both AdamW "
                     "moments of its %u tensors)",
                     all, np);
  if (!st && mode != CKPT_DATA && !(v = malloc(most * sizeof *v)))
    st = rp_ckpt_oom(path, (uint64_t)most * sizeof *v,
                     "reading the tensor '%s' (%u x %u, its largest)",
                     info[big].name, info[big].rows, info[big].cols);
  size_t at = 0; /* the value's index among all of them */
  for (uint32_t i = 0; !st && i < np; i++)
    for (int s = 0; !st && s < 3; s++) { /* weights, m, v */
      size_t n = numel(&info[i]);
      float *b = data ? data + at : v;
      if ((st = rp_ckpt_reader_read(r, b, 4 * n)))
        break;
      for (size_t k = 0; k < n; k++) /* in place: little-endian to host */
        b[k] = rp_le_getf((const unsigned char *)&b[k]);
      for (size_t k = 0; !st && k < n; k++)
        if (!isfinite(b[k]))
          st = rp_error_set(RP_EFORMAT,
                            "%s: value %zu of the weights and AdamW moments "
                            "is %g: a checkpoint holds finite values only "
                            "(saved from a run that had diverged?)",
                            path, at + k, (double)b[k]);
        else if (s == 2 && b[k] < 0)
          st = rp_error_set(RP_EFORMAT,
                            "%s: %s's second AdamW moment holds %g at "
                            "element %zu (a mean of squares is never "
                            "negative or NaN)",
                            path, info[i].name, (double)b[k], k);
      at += n;
      /* RP_GPT_WEIGHT, RP_GPT_MOM1, RP_GPT_MOM2 (the gradient's between) */
      rp_gpt_slot slot = s == 0   ? RP_GPT_WEIGHT
                         : s == 1 ? RP_GPT_MOM1
                                  : RP_GPT_MOM2;
      if (!st && (mode == CKPT_STATE || (mode == CKPT_WEIGHTS && s == 0)) &&
          (st = rp_gpt_tensor_write(m, i, slot, b, n)) != RP_OK)
        st = rp_train_err_prefix(st, "%s: ", path);
    }
  if (!st)
    st = rp_ckpt_reader_finish(r);
  if (!st) {
    c->ndata = at;
    c->data = data;
    data = NULL;
  }
  free(data);
  free(v);
  free(own);
  rp_ckpt_reader_close(r);
  return st;
}

rp_status rp_gpt_ckpt_read(const char *path, rp_gpt_ckpt *out) {
  if (!path || !out)
    return rp_error_set(RP_EINVAL, "rp_gpt_ckpt_read: NULL argument");
  rp_gpt_ckpt c;
  rp_status st = ckpt_stream(path, &c, NULL, CKPT_DATA, NULL);
  if (!st)
    *out = c;
  return st;
}

rp_status rp_gpt_ckpt_read_info(const char *path, rp_gpt_ckpt *out) {
  if (!path || !out)
    return rp_error_set(RP_EINVAL, "rp_gpt_ckpt_read_info: NULL argument");
  rp_gpt_ckpt c;
  rp_status st = ckpt_stream(path, &c, NULL, CKPT_INFO, NULL);
  if (!st)
    *out = c;
  return st;
}

rp_status rp_gpt_ckpt_load_weights(rp_gpt *m, const char *path,
                                   const rp_gpt_ckpt *info) {
  if (!m || !path)
    return rp_error_set(RP_EINVAL, "rp_gpt_ckpt_load_weights: NULL argument");
  rp_gpt_ckpt c;
  return ckpt_stream(path, &c, m, CKPT_WEIGHTS, info ? &info->checksum : NULL);
}

rp_status rp_gpt_ckpt_load(rp_gpt *m, const char *path,
                           const rp_gpt_ckpt *info) {
  if (!m || !path)
    return rp_error_set(RP_EINVAL, "rp_gpt_ckpt_load: NULL argument");
  if (trainer_only(m, "rp_gpt_ckpt_load") != RP_OK)
    return RP_EINVAL;
  rp_gpt_ckpt own, c;
  rp_status st = RP_OK;
  if (!info && (st = rp_gpt_ckpt_read_info(path, &own)) == RP_OK)
    info = &own; /* the first pass: the whole file checked, nothing kept */
  if (!st && (st = rp_gpt_ckpt_fits(info, &m->cfg)) != RP_OK)
    st = rp_train_err_prefix(st, "%s: ", path);
  if (!st)
    st = ckpt_stream(path, &c, m, CKPT_STATE, &info->checksum);
  return st;
}
