/* train/mlp.c — the data-parallel MLP training step (see mlp.h). Uses the
 * public API and the kernel tasks only: the same launches run eagerly or are
 * recorded. */
#include "mlp.h"

#include "ckpt.h"
#include "train_util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXL (RP_MLP_MAX_HIDDEN + 1)
#define MAXSINKS 4 /* the sgd_multi task, the loss (see sink()) */

/* One layer's home instances. */
typedef struct layer {
  uint32_t in, out;
  rp_inst w, b;   /* master weights [in x out] and bias [out] */
  rp_inst vw, vb; /* momentum */
  rp_inst gw, gb; /* gradients summed over the shards */
} layer;

/* One shard's instances, in its processor's memory. Activations keep the
 * batch's global row numbers (rect rows lo..hi), as the shard of x does.
 * With one processor the shard is the whole batch in the home memory: x,
 * y, loss, w, b, gw, gb are then the home instances themselves (see
 * alias_home), so the step needs no parallel ops. */
typedef struct shard {
  int64_t lo, hi;
  uint32_t rows;
  rp_inst x, y, loss, dlogits;
  rp_inst w[MAXL], b[MAXL];   /* replicas */
  rp_inst z[MAXL];            /* pre-activations; z[L-1] are the logits */
  rp_inst a[MAXL];            /* relu(z[l]), l < L-1 */
  rp_inst da[MAXL], dz[MAXL]; /* gradients of a[l] and z[l], l < L-1 */
  rp_inst gw[MAXL], gb[MAXL]; /* this shard's weight gradients */
} shard;

struct rp_mlp {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_mlp_config cfg;
  uint32_t nl; /* layers: nhidden + 1 */
  uint32_t features, classes, samples, nbatches;
  rp_proc procs[RP_MLP_MAX_PROCS];
  rp_mem mems[RP_MLP_MAX_PROCS];
  uint32_t rank, ranks;   /* rp_runtime_rank/ranks with dist, else 0 of 1 */
  int64_t rlo, rhi;       /* this rank's rows of every batch (global) */
  uint32_t rows;          /* rhi - rlo + 1: the batch's rows on this rank */
  rp_inst data_x, data_y; /* the data set, or with dist this rank's rows of
                             every whole batch, batch after batch (home) */
  rp_inst bx, by;         /* this rank's rows of the current batch (home) */
  rp_inst loss;           /* the batch loss, summed over the shards (and
                             with dist all-reduced over the ranks) */
  layer layers[MAXL];
  shard *shards;
  /* evaluation (home, this rank's batch rows); esum: dist only, system
   * memory, {loss sum, correct count} all-reduced over the ranks */
  rp_inst ez[MAXL], ea[MAXL], eprobs, eloss, ecount, esum;
  /* every instance, for rp_mlp_destroy */
  rp_inst *all;
  uint32_t nall, capall;
  int recording; /* rp_mlp_record is issuing: attach interpolations */
  int cur_shard; /* the shard forward/backward record (op names) */
  int collect;   /* a timed eager step: collect the sinks' events */
  rp_event sinks[MAXSINKS];
  uint32_t nsinks;
  /* shuffling (rp_mlp_shuffle): the data set as given, the epoch whose
   * order data_x holds (-1: the given order), the permutation and the
   * packed rows being written (allocated once: training allocates nothing) */
  int shuffle;
  uint64_t shuffle_seed;
  int64_t loaded_epoch;
  float *src_x, *stage_x;
  int32_t *src_y, *stage_y;
  uint32_t *perm;
  /* validation (rp_mlp_set_validation): packed like data_x, whole batches */
  rp_inst val_x, val_y;
  uint32_t val_batches;
};

/* ---------------------------------------------------------------------- */
/* Configuration */

void rp_mlp_config_init(rp_mlp_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->hidden[0] = cfg->hidden[1] = 64;
  cfg->nhidden = 2;
  cfg->batch = 256;
  cfg->procs = 2;
  cfg->momentum = 0.9f;
  cfg->seed = 1;
}

static rp_status check_config(const rp_mlp_config *c, const rp_dataset *d) {
  const char *f = "rp_mlp_create";
  if (c->nhidden > RP_MLP_MAX_HIDDEN)
    return rp_error_set(RP_EINVAL, "%s: %u hidden layers (max %u)", f,
                        c->nhidden, RP_MLP_MAX_HIDDEN);
  for (uint32_t i = 0; i < c->nhidden; i++)
    if (c->hidden[i] == 0 || c->hidden[i] > RP_MLP_MAX_WIDTH)
      return rp_error_set(RP_EINVAL, "%s: hidden[%u] = %u (need 1..%u)", f, i,
                          c->hidden[i], RP_MLP_MAX_WIDTH);
  if (c->procs == 0 || c->procs > RP_MLP_MAX_PROCS)
    return rp_error_set(RP_EINVAL, "%s: procs = %u (need 1..%u)", f, c->procs,
                        RP_MLP_MAX_PROCS);
  if (!(c->momentum >= 0.0f && c->momentum < 1.0f))
    return rp_error_set(RP_EINVAL, "%s: momentum = %g (need 0 <= momentum < 1)",
                        f, (double)c->momentum);
  if (!d->x || !d->y || d->n == 0 || d->features == 0 || d->classes < 2)
    return rp_error_set(RP_EINVAL,
                        "%s: empty data set (%u samples, %u features, "
                        "%u classes)",
                        f, d->n, d->features, d->classes);
  if (c->batch < c->procs || c->batch > d->n || c->batch > (1u << 24))
    return rp_error_set(RP_ERANGE,
                        "%s: batch = %u (need procs = %u <= batch <= "
                        "samples = %u)",
                        f, c->batch, c->procs, d->n);
  return RP_OK;
}

static rp_status pick_procs(rp_mlp *m) {
  return rp_train_pick_procs(m->rt, m->cfg.procs, m->procs, m->mems,
                             "rp_mlp_create");
}

/* ---------------------------------------------------------------------- */
/* Instances */

/* Allocates in memory `mem` and remembers the instance for destroy. */
static rp_status mk_in(rp_mlp *m, rp_mem mem, rp_dtype dt, rp_rect r,
                       rp_inst *out) {
  if (m->nall == m->capall) {
    uint32_t cap = m->capall ? 2 * m->capall : 64;
    rp_inst *a = rp_train_realloc_n(m->all, cap, sizeof *a);
    if (!a)
      return rp_error_set(RP_ENOMEM, "rp_mlp_create: out of memory");
    m->all = a;
    m->capall = cap;
  }
  rp_status st = rp_instance_create(m->rt, mem, dt, &r, NULL, out);
  if (st == RP_OK)
    m->all[m->nall++] = *out;
  return st;
}

/* An instance in the memory of the step's processor p. */
static rp_status mk(rp_mlp *m, uint32_t p, rp_dtype dt, rp_rect r,
                    rp_inst *out) {
  rp_status st = mk_in(m, m->mems[p], dt, r, out);
  if (st != RP_OK)
    return rp_train_err_prefix(st,
                               "rp_mlp_create: processor %u: ", m->procs[p]);
  return RP_OK;
}

/* An instance in system memory (host-addressable on every backend). */
static rp_status mk_sys(rp_mlp *m, rp_dtype dt, rp_rect r, rp_inst *out) {
  rp_mem sys;
  rp_status st = rp_mem_find(m->rt, RP_MEM_SYSTEM, -1, &sys);
  if (st == RP_OK)
    st = mk_in(m, sys, dt, r, out);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "rp_mlp_create: system memory: ");
  return RP_OK;
}

static rp_rect mat(int64_t lo, int64_t hi, uint32_t cols) {
  return rp_rect_2d(lo, hi, 0, (int64_t)cols - 1);
}

/* ---- names (docs/debugging.md, "Names."): instances and step ops ---- */

/* Names inst printf-style ("W1", "s0.z1"); a name that does not fit is
 * cut (names are for people, nothing depends on them). */
#define name_inst(m, inst, ...) rp_train_name_inst((m)->rt, inst, __VA_ARGS__)

/* Names the next recorded launch ("fc1.fwd"; with several processors the
 * shard's suffix, "fc1.fwd.s1"); nothing while not recording. */
__attribute__((format(printf, 3, 4))) static rp_status
name_op(rp_mlp *m, int sh, const char *fmt, ...) {
  if (!m->recording)
    return RP_OK;
  char sfx[16] = "";
  if (sh >= 0 && m->cfg.procs > 1)
    snprintf(sfx, sizeof sfx, ".s%d", sh);
  va_list ap;
  va_start(ap, fmt);
  rp_status st = rp_train_vname_op(m->rt, sfx, NULL, fmt, ap);
  va_end(ap);
  return st;
}

/* The ops that write the step's final loss sum (docs/debugging.md, "Names."):
 * what rp_mlp_record binds to its "loss" postcondition. */
static const char *loss_op(const rp_mlp *m) {
  return m->cfg.dist        ? "loss.allreduce"
         : m->cfg.procs > 1 ? "loss.reduce"
                            : "loss.xent";
}

/* Every instance by its role: layer l's weights "W<l+1>", gradients
 * "dW<l+1>", momentum "vW<l+1>"; shard p's replicas and activations
 * "s<p>.W1", "s<p>.z1" (one processor: the home ones, no prefix). */
static rp_status name_all(rp_mlp *m) {
  rp_status st = RP_OK;
  rp_inst home[] = {m->data_x, m->data_y, m->bx,     m->by,  m->loss,
                    m->eprobs, m->eloss,  m->ecount, m->esum};
  const char *hn[] = {"data.x",    "data.y",     "batch.x",
                      "batch.y",   "loss",       "eval.probs",
                      "eval.loss", "eval.count", "eval.sum"};
  for (size_t i = 0; !st && i < sizeof home / sizeof *home; i++)
    st = name_inst(m, home[i], "%s", hn[i]);
  for (uint32_t l = 0; !st && l < m->nl; l++) {
    const layer *ly = &m->layers[l];
    rp_inst li[] = {
        ly->w,  ly->b,  ly->vw,   ly->vb,
        ly->gw, ly->gb, m->ez[l], l + 1 < m->nl ? m->ea[l] : (rp_inst){0}};
    const char *ln[] = {"W", "b", "vW", "vb", "dW", "db", "eval.z", "eval.a"};
    for (size_t i = 0; !st && i < sizeof li / sizeof *li; i++)
      st = name_inst(m, li[i], "%s%u", ln[i], l + 1);
  }
  for (uint32_t p = 0; !st && m->cfg.procs > 1 && p < m->cfg.procs; p++) {
    const shard *s = &m->shards[p];
    rp_inst si[] = {s->x, s->y, s->loss, s->dlogits};
    const char *sn[] = {"x", "y", "loss", "dlogits"};
    for (size_t i = 0; !st && i < 4; i++)
      st = name_inst(m, si[i], "s%u.%s", p, sn[i]);
  }
  for (uint32_t p = 0; !st && p < m->cfg.procs; p++) {
    const shard *s = &m->shards[p];
    char pre[16] = "";
    if (m->cfg.procs > 1)
      snprintf(pre, sizeof pre, "s%u.", p);
    else if ((st = name_inst(m, s->dlogits, "dlogits")) != RP_OK)
      break;
    for (uint32_t l = 0; !st && l < m->nl; l++) {
      int own = m->cfg.procs > 1; /* else the home W, b, dW, db */
      rp_inst li[] = {own ? s->w[l] : (rp_inst){0},
                      own ? s->b[l] : (rp_inst){0},
                      own ? s->gw[l] : (rp_inst){0},
                      own ? s->gb[l] : (rp_inst){0},
                      s->z[l],
                      l + 1 < m->nl ? s->a[l] : (rp_inst){0},
                      l + 1 < m->nl ? s->da[l] : (rp_inst){0},
                      l + 1 < m->nl ? s->dz[l] : (rp_inst){0}};
      const char *ln[] = {"W", "b", "dW", "db", "z", "a", "da", "dz"};
      for (size_t i = 0; !st && i < sizeof li / sizeof *li; i++)
        st = name_inst(m, li[i], "%s%s%u", pre, ln[i], l + 1);
    }
  }
  return st;
}

/* Rows of the home data set: all samples, or with dist this rank's rows
 * of every whole batch. */
static uint32_t home_rows(const rp_mlp *m) {
  return m->cfg.dist ? m->nbatches * m->rows : m->samples;
}

static rp_status make_home(rp_mlp *m) {
  int64_t lo = m->rlo, hi = m->rhi;
  uint32_t nd = home_rows(m);
  rp_status st = mk(m, 0, RP_F32, mat(0, nd - 1, m->features), &m->data_x);
  if (!st)
    st = mk(m, 0, RP_I32, rp_rect_1d(0, nd - 1), &m->data_y);
  if (!st)
    st = mk(m, 0, RP_F32, mat(lo, hi, m->features), &m->bx);
  if (!st)
    st = mk(m, 0, RP_I32, rp_rect_1d(lo, hi), &m->by);
  if (!st)
    st = mk(m, 0, RP_F32, rp_rect_1d(0, 0), &m->loss);
  for (uint32_t l = 0; !st && l < m->nl; l++) {
    layer *ly = &m->layers[l];
    rp_rect w = mat(0, ly->in - 1, ly->out), b = rp_rect_1d(0, ly->out - 1);
    rp_inst *wi[] = {&ly->w, &ly->vw, &ly->gw},
            *bi[] = {&ly->b, &ly->vb, &ly->gb};
    for (int i = 0; !st && i < 3; i++)
      if (!(st = mk(m, 0, RP_F32, w, wi[i])))
        st = mk(m, 0, RP_F32, b, bi[i]);
    if (!st)
      st = mk(m, 0, RP_F32, mat(lo, hi, ly->out), &m->ez[l]);
    if (!st && l + 1 < m->nl)
      st = mk(m, 0, RP_F32, mat(lo, hi, ly->out), &m->ea[l]);
  }
  if (!st)
    st = mk(m, 0, RP_F32, mat(lo, hi, m->classes), &m->eprobs);
  if (!st)
    st = mk(m, 0, RP_F32, rp_rect_1d(0, 0), &m->eloss);
  if (!st)
    st = mk(m, 0, RP_I32, rp_rect_1d(0, 0), &m->ecount);
  if (!st && m->cfg.dist) /* host memory: its all-reduce needs no NCCL */
    st = mk_sys(m, RP_F64, rp_rect_1d(0, 1), &m->esum);
  return st;
}

static rp_status make_shard(rp_mlp *m, uint32_t p) {
  shard *s = &m->shards[p];
  rp_rect whole = rp_rect_1d(m->rlo, m->rhi), part;
  rp_status st = rp_chunk_rect(&whole, 0, m->cfg.procs, p, &part);
  if (st != RP_OK) /* dist: place_rank() has refused this already */
    return rp_error_set(RP_ERANGE,
                        "rp_mlp_create: batch %u cannot be split into "
                        "%u non-empty shards (shard %u is empty): use fewer "
                        "processors or a larger batch",
                        m->cfg.batch, m->cfg.procs, p);
  s->lo = part.lo[0];
  s->hi = part.hi[0];
  s->rows = (uint32_t)(s->hi - s->lo + 1);
  int own = m->cfg.procs > 1; /* else alias_home() */
  if (own)
    st = mk(m, p, RP_F32, mat(s->lo, s->hi, m->features), &s->x);
  if (!st && own)
    st = mk(m, p, RP_I32, part, &s->y);
  if (!st && own)
    st = mk(m, p, RP_F32, rp_rect_1d(0, 0), &s->loss);
  if (!st)
    st = mk(m, p, RP_F32, mat(s->lo, s->hi, m->classes), &s->dlogits);
  for (uint32_t l = 0; !st && l < m->nl; l++) {
    const layer *ly = &m->layers[l];
    rp_rect w = mat(0, ly->in - 1, ly->out), b = rp_rect_1d(0, ly->out - 1);
    rp_rect act = mat(s->lo, s->hi, ly->out);
    rp_inst *mats[] = {&s->w[l], &s->gw[l]}, *vecs[] = {&s->b[l], &s->gb[l]};
    for (int i = 0; !st && own && i < 2; i++)
      if (!(st = mk(m, p, RP_F32, w, mats[i])))
        st = mk(m, p, RP_F32, b, vecs[i]);
    if (!st)
      st = mk(m, p, RP_F32, act, &s->z[l]);
    if (l + 1 < m->nl) {
      rp_inst *acts[] = {&s->a[l], &s->da[l], &s->dz[l]};
      for (int i = 0; !st && i < 3; i++)
        st = mk(m, p, RP_F32, act, acts[i]);
    }
  }
  return st;
}

/* One processor: the only shard is the home batch (the same rows in the
 * same memory), so it uses the home instances instead of copies of them;
 * the replicate, repartition and reduction ops would be plain copies.
 * These handles are not in m->all (destroy frees them once). */
static void alias_home(rp_mlp *m) {
  shard *s = &m->shards[0];
  s->x = m->bx;
  s->y = m->by;
  s->loss = m->loss;
  for (uint32_t l = 0; l < m->nl; l++) {
    s->w[l] = m->layers[l].w;
    s->b[l] = m->layers[l].b;
    s->gw[l] = m->layers[l].gw;
    s->gb[l] = m->layers[l].gb;
  }
}

rp_status rp_mlp_destroy(rp_mlp *m) {
  if (!m)
    return RP_OK;
  rp_status st = RP_OK;
  for (uint32_t i = m->nall; i-- > 0;) {
    rp_status fs = rp_instance_free(m->rt, m->all[i]);
    if (st == RP_OK)
      st = fs;
  }
  free(m->all);
  free(m->shards);
  free(m->src_x);
  free(m->src_y);
  free(m->stage_x);
  free(m->stage_y);
  free(m->perm);
  free(m);
  return st;
}

/* ---------------------------------------------------------------------- */
/* Launch helpers */

/* Launches a task; *done (may be NULL) gets its event or op reference. */
static rp_status task_ev(rp_mlp *m, rp_task_id t, rp_proc p,
                         const rp_access *acc, uint32_t nacc, const void *args,
                         size_t size, const rp_interp *ip, rp_event *done) {
  rp_launch l = {.task = t,
                 .proc = p,
                 .accesses = acc,
                 .naccess = nacc,
                 .args = args,
                 .args_size = size};
  if (ip && m->recording) { /* interpolations are for recorded launches */
    l.interps = ip;
    l.ninterp = 1;
  }
  return rp_launch_task(m->rt, &l, done);
}

static rp_status task(rp_mlp *m, rp_task_id t, rp_proc p, const rp_access *acc,
                      uint32_t nacc, const void *args, size_t size,
                      const rp_interp *ip) {
  return task_ev(m, t, p, acc, nacc, args, size, ip, NULL);
}

/* Where an eager step collects the events of its last ops (the sgd tasks
 * and the loss reduction: every other op precedes one of them), or NULL.
 * The slot starts as RP_NO_EVENT: a launch that fails leaves it so, not
 * holding an earlier step's released event. */
static rp_event *sink(rp_mlp *m) {
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

static rp_status gemm(rp_mlp *m, rp_proc p, rp_inst a, rp_inst b, rp_inst c,
                      int ta, int tb, uint32_t rows, uint32_t cols,
                      uint32_t inner) {
  rp_gemm_args g = {(int32_t)rows, (int32_t)cols, (int32_t)inner, ta, tb,
                    1.0f,          0.0f};
  return task(m, m->k.gemm, p, ACC(R(a), R(b), W(c)), &g, sizeof g, NULL);
}

static rp_status gather(rp_mlp *m, rp_inst src, rp_inst dst, uint32_t cols,
                        uint32_t index) {
  /* rows = this rank's rows: with dist the home data set holds them batch
   * after batch, so batch `index` of the rank is its chunk of global batch
   * `index` */
  rp_gather_args g = {(int32_t)index, (int32_t)m->rows, (int32_t)cols};
  rp_interp ip = {offsetof(rp_mlp_step_args, batch),
                  offsetof(rp_gather_args, index), sizeof g.index};
  return task(m, m->k.gather_rows, m->procs[0], ACC(R(src), W(dst)), &g,
              sizeof g, &ip);
}

static rp_status pop_ev(rp_mlp *m, rp_pop_kind kind, rp_inst whole,
                        const rp_inst *parts, rp_event *done) {
  rp_parallel_op op = {.kind = kind,
                       .whole = whole,
                       .parts = parts,
                       .nparts = m->cfg.procs,
                       .dim = 0};
  return rp_launch_parallel(m->rt, &op, done);
}

/* With one processor the shard is the home instance (alias_home): no op. */
static rp_status pop(rp_mlp *m, rp_pop_kind kind, rp_inst whole,
                     const rp_inst *parts) {
  return m->cfg.procs == 1 ? RP_OK : pop_ev(m, kind, whole, parts, NULL);
}

/* Gathers field `off` (an rp_inst) of every shard into parts. */
static const rp_inst *shard_field(const rp_mlp *m, size_t off, uint32_t l,
                                  rp_inst *parts) {
  for (uint32_t p = 0; p < m->cfg.procs; p++)
    memcpy(&parts[p], (const char *)&m->shards[p] + off + l * sizeof(rp_inst),
           sizeof(rp_inst));
  return parts;
}
#define PARTS(field, l) shard_field(m, offsetof(shard, field), (l), parts)

/* ---------------------------------------------------------------------- */
/* The step */

/* Forward over `rows` rows of x on processor p, with weights w[], b[] into
 * z[] and a[]. */
static rp_status forward(rp_mlp *m, rp_proc p, rp_inst x, uint32_t rows,
                         const rp_inst *w, const rp_inst *b, const rp_inst *z,
                         const rp_inst *a) {
  rp_status st = RP_OK;
  for (uint32_t l = 0; !st && l < m->nl; l++) {
    const layer *ly = &m->layers[l];
    rp_inst in = l ? a[l - 1] : x;
    int relu = l + 1 < m->nl; /* z += b, then a = relu(z) in one task */
    rp_bias_act_args ba = {(int32_t)rows, (int32_t)ly->out,
                           relu ? RP_ACT_RELU : RP_ACT_NONE};
    st = name_op(m, m->cur_shard, "fc%u.fwd", l + 1);
    if (!st)
      st = gemm(m, p, in, w[l], z[l], 0, 0, rows, ly->out, ly->in);
    if (!st)
      st = name_op(m, m->cur_shard, relu ? "fc%u.bias_relu" : "fc%u.bias",
                   l + 1);
    if (!st && relu)
      st = task(m, m->k.bias_act, p, ACC(RW(z[l]), R(b[l]), W(a[l])), &ba,
                sizeof ba, NULL);
    else if (!st)
      st = task(m, m->k.bias_act, p, ACC(RW(z[l]), R(b[l])), &ba, sizeof ba,
                NULL);
  }
  return st;
}

/* Loss and backward of shard p into its gradients. */
static rp_status backward(rp_mlp *m, uint32_t p) {
  shard *s = &m->shards[p];
  rp_proc pr = m->procs[p];
  uint32_t L = m->nl;
  rp_xent_args xa = {(int32_t)s->rows, (int32_t)m->classes,
                     (float)m->cfg.batch};
  /* loss, dlogits and the last layer's bias gradient in one task; with one
   * processor (and no all-reduce after it) it writes the batch loss last,
   * so an eager step waits for it */
  rp_event *done = m->cfg.procs == 1 && !m->cfg.dist ? sink(m) : NULL;
  rp_status st = name_op(m, (int)p, "loss.xent");
  if (!st)
    st = task_ev(m, m->k.softmax_xent, pr,
                 ACC(R(s->z[L - 1]), R(s->y), W(s->dlogits), W(s->loss),
                     W(s->gb[L - 1])),
                 &xa, sizeof xa, NULL, done);
  for (uint32_t l = L; !st && l-- > 0;) {
    const layer *ly = &m->layers[l];
    rp_inst dz = l + 1 == L ? s->dlogits : s->dz[l];
    rp_inst in = l ? s->a[l - 1] : s->x;
    rp_rows_cols_args ba = {(int32_t)s->rows, (int32_t)ly->in};
    /* dW = in^T dz; d(in) = dz W^T, then the layer below's dz and db
     * (relu backward and column sums) in one task */
    st = name_op(m, (int)p, "fc%u.dW", l + 1);
    if (!st)
      st = gemm(m, pr, in, dz, s->gw[l], 1, 0, ly->in, ly->out, s->rows);
    if (!st && l > 0 && !(st = name_op(m, (int)p, "fc%u.dx", l + 1)))
      st = gemm(m, pr, dz, s->w[l], s->da[l - 1], 0, 1, s->rows, ly->in,
                ly->out);
    if (!st && l > 0 && !(st = name_op(m, (int)p, "fc%u.relu_bwd", l)))
      st = task(m, m->k.relu_bwd_bias, pr,
                ACC(R(s->a[l - 1]), R(s->da[l - 1]), W(s->dz[l - 1]),
                    W(s->gb[l - 1])),
                &ba, sizeof ba, NULL);
  }
  return st;
}

/* Every weight and bias in one rp.sgd_multi task (layer by layer: w, b). */
static rp_status sgd_all(rp_mlp *m, float lr) {
  rp_access acc[3 * 2 * MAXL];
  uint32_t n = 0;
  for (uint32_t l = 0; l < m->nl; l++) {
    const layer *ly = &m->layers[l];
    rp_inst t[2][3] = {{ly->w, ly->gw, ly->vw}, {ly->b, ly->gb, ly->vb}};
    for (int i = 0; i < 2; i++) {
      acc[n++] = (rp_access){t[i][0], RP_RW, RP_REDOP_NONE};
      acc[n++] = (rp_access){t[i][1], RP_READ, RP_REDOP_NONE};
      acc[n++] = (rp_access){t[i][2], RP_RW, RP_REDOP_NONE};
    }
  }
  rp_sgd_multi_args a = {lr, m->cfg.momentum, (int32_t)(n / 3)};
  rp_interp ip = {offsetof(rp_mlp_step_args, lr),
                  offsetof(rp_sgd_multi_args, lr), sizeof a.lr};
  rp_status st = name_op(m, -1, "sgd");
  return st ? st
            : task_ev(m, m->k.sgd_multi, m->procs[0], acc, n, &a, sizeof a, &ip,
                      sink(m));
}

static rp_status step_inputs(rp_mlp *m, uint32_t index) {
  rp_inst parts[RP_MLP_MAX_PROCS];
  int multi = m->cfg.procs > 1; /* else pop() records nothing to name */
  rp_status st = name_op(m, -1, "batch.x.gather");
  if (!st)
    st = gather(m, m->data_x, m->bx, m->features, index);
  if (!st && !(st = name_op(m, -1, "batch.y.gather")))
    st = gather(m, m->data_y, m->by, 1, index);
  if (!st && multi && !(st = name_op(m, -1, "batch.x.split")))
    st = pop(m, RP_POP_REPARTITION, m->bx, PARTS(x, 0));
  if (!st && multi && !(st = name_op(m, -1, "batch.y.split")))
    st = pop(m, RP_POP_REPARTITION, m->by, PARTS(y, 0));
  for (uint32_t l = 0; !st && multi && l < m->nl; l++) {
    if (!(st = name_op(m, -1, "W%u.replicate", l + 1)))
      st = pop(m, RP_POP_REPLICATE, m->layers[l].w, PARTS(w, l));
    if (!st && !(st = name_op(m, -1, "b%u.replicate", l + 1)))
      st = pop(m, RP_POP_REPLICATE, m->layers[l].b, PARTS(b, l));
  }
  return st;
}

static rp_status allreduce_ev(rp_mlp *m, rp_inst inst, rp_event *done) {
  rp_allreduce a = {inst, RP_REDOP_SUM, RP_NO_EVENT};
  return rp_launch_allreduce(m->rt, &a, done);
}

/* dist: sums the rank's loss and gradients over the ranks, in place. The
 * all-reduces run one after another in this launch order on every rank
 * (reprise.h): the loss first (ready after the forward pass), then the
 * gradients last layer first (the order backward produces them), so each
 * waits for little besides its own inputs. */
static rp_status step_allreduce(rp_mlp *m) {
  rp_status st = name_op(m, -1, "%s", loss_op(m));
  if (!st)
    st = allreduce_ev(m, m->loss, sink(m));
  for (uint32_t l = m->nl; !st && l-- > 0;) {
    if (!(st = name_op(m, -1, "dW%u.allreduce", l + 1)))
      st = allreduce_ev(m, m->layers[l].gw, NULL);
    if (!st && !(st = name_op(m, -1, "db%u.allreduce", l + 1)))
      st = allreduce_ev(m, m->layers[l].gb, NULL);
  }
  return st;
}

static rp_status step_update(rp_mlp *m, float lr) {
  rp_inst parts[RP_MLP_MAX_PROCS];
  rp_status st = RP_OK;
  int multi = m->cfg.procs > 1; /* else pop() records nothing to name */
  for (uint32_t l = 0; !st && multi && l < m->nl; l++) {
    if (!(st = name_op(m, -1, "dW%u.reduce", l + 1)))
      st = pop(m, RP_POP_REDUCTION, m->layers[l].gw, PARTS(gw, l));
    if (!st && !(st = name_op(m, -1, "db%u.reduce", l + 1)))
      st = pop(m, RP_POP_REDUCTION, m->layers[l].gb, PARTS(gb, l));
  }
  /* the loss's last op is an eager step's sink: its reduction, or with
   * dist its all-reduce (one processor: backward() made the loss task one) */
  if (!st && multi)
    st = name_op(m, -1, "loss.reduce");
  if (!st && m->cfg.procs > 1)
    st = pop_ev(m, RP_POP_REDUCTION, m->loss, PARTS(loss, 0),
                m->cfg.dist ? NULL : sink(m));
  if (!st && m->cfg.dist)
    st = step_allreduce(m);
  if (!st)
    st = sgd_all(m, lr);
  return st;
}

rp_status rp_mlp_step(rp_mlp *m, const rp_mlp_step_args *a) {
  if (!m || !a)
    return rp_error_set(RP_EINVAL, "rp_mlp_step: NULL argument");
  if (a->batch >= m->nbatches)
    return rp_error_set(RP_ERANGE, "rp_mlp_step: batch %u of %u", a->batch,
                        m->nbatches);
  rp_status st = step_inputs(m, a->batch);
  for (uint32_t p = 0; !st && p < m->cfg.procs; p++) {
    shard *s = &m->shards[p];
    m->cur_shard = (int)p;
    st = forward(m, m->procs[p], s->x, s->rows, s->w, s->b, s->z, s->a);
    if (!st)
      st = backward(m, p);
  }
  if (!st)
    st = step_update(m, a->lr);
  return st;
}

static rp_status record_step(void *arg) {
  rp_mlp_step_args a = {0, 0.0f};
  return rp_mlp_step(arg, &a);
}

/* The host reads the loss after a replay: a postcondition "loss" bound to
 * the ops named loss_op(m) (every op that writes the final sum: each of
 * the reduction's copies is bound) says so, and keeps the lint's
 * unread-result check quiet on the step. */
rp_status rp_mlp_record(rp_mlp *m, rp_graph **out) {
  if (!m || !out)
    return rp_error_set(RP_EINVAL, "rp_mlp_record: NULL argument");
  return rp_train_record(m->rt, &m->recording, record_step, m, loss_op(m),
                         "rp_mlp_record", out);
}

/* ---------------------------------------------------------------------- */
/* State */

/* Fills inst's n floats: uniform in [-scale, scale) from r, or zeros when r
 * is NULL. buf is scratch of at least n floats. */
static rp_status write_init(rp_mlp *m, rp_inst inst, float *buf, size_t n,
                            rp_rng *r, float scale) {
  for (size_t i = 0; i < n; i++)
    buf[i] = r ? scale * (2.0f * rp_rng_uniform(r) - 1.0f) : 0.0f;
  return rp_instance_write(m->rt, inst, buf, n * sizeof *buf);
}

rp_status rp_mlp_reset(rp_mlp *m) {
  if (!m)
    return rp_error_set(RP_EINVAL, "rp_mlp_reset: NULL argument");
  size_t most = 0;
  for (uint32_t l = 0; l < m->nl; l++) {
    size_t n = (size_t)m->layers[l].in * m->layers[l].out;
    most = n > most ? n : most;
  }
  float *buf = calloc(most, sizeof *buf);
  if (!buf)
    return rp_error_set(RP_ENOMEM, "rp_mlp_reset: out of memory");
  rp_rng r;
  rp_rng_seed(&r, m->cfg.seed ^ 0x6d6c702d696e6974ull); /* "mlp-init" */
  rp_status st = RP_OK;
  for (uint32_t l = 0; !st && l < m->nl; l++) {
    const layer *ly = &m->layers[l];
    size_t nw = (size_t)ly->in * ly->out;
    /* He-uniform for ReLU layers, Glorot-uniform for the output layer. */
    float scale = l + 1 < m->nl ? sqrtf(6.0f / (float)ly->in)
                                : sqrtf(6.0f / (float)(ly->in + ly->out));
    st = write_init(m, ly->w, buf, nw, &r, scale);
    if (!st)
      st = write_init(m, ly->vw, buf, nw, NULL, 0);
    if (!st)
      st = write_init(m, ly->b, buf, ly->out, NULL, 0);
    if (!st)
      st = write_init(m, ly->vb, buf, ly->out, NULL, 0);
  }
  free(buf);
  return st;
}

rp_status rp_mlp_split_check(uint32_t batch, uint32_t ranks, uint32_t procs) {
  return rp_train_split_check(batch, ranks, procs, "processor", "processors");
}

/* This rank's rows of every batch: all of them without dist. With dist,
 * checks every rank's split (its rows, then those over P processors) so
 * that every rank refuses a bad one alike, before anything collective. */
static rp_status place_rank(rp_mlp *m) {
  uint32_t B = m->cfg.batch, P = m->cfg.procs;
  m->rank = 0;
  m->ranks = 1;
  m->rlo = 0;
  m->rhi = B - 1;
  m->rows = B;
  if (!m->cfg.dist) /* make_shard checks the split over the processors */
    return RP_OK;
  m->rank = rp_runtime_rank(m->rt);
  m->ranks = rp_runtime_ranks(m->rt);
  rp_status st = rp_mlp_split_check(B, m->ranks, P);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "rp_mlp_create: ");
  rp_train_rank_rows(m->rt, B, &m->rlo, &m->rhi); /* checked above */
  m->rows = (uint32_t)(m->rhi - m->rlo + 1);
  return RP_OK;
}

/* Packs this rank's rows of nb whole batches, batch after batch, into
 * ox/oy: source row perm[i] for row i of the ordered set (i without a
 * permutation). Without dist the rank's rows are every row of a batch. */
static void pack_rows(const rp_mlp *m, const float *x, const int32_t *y,
                      const uint32_t *perm, uint32_t nb, float *ox,
                      int32_t *oy) {
  size_t F = m->features;
  for (size_t b = 0; b < nb; b++)
    for (size_t r = 0; r < m->rows; r++) {
      size_t from = b * m->cfg.batch + (size_t)m->rlo + r;
      size_t to = b * m->rows + r;
      from = perm ? perm[from] : from;
      memcpy(ox + to * F, x + from * F, F * sizeof *ox);
      oy[to] = y[from];
    }
}

/* Copies the data set into the home memory: all of it, or with dist this
 * rank's rows of every whole batch, batch after batch (a partial last
 * batch is never used, as without dist). */
static rp_status write_data(rp_mlp *m, const rp_dataset *d) {
  size_t F = d->features, nd = home_rows(m);
  if (!m->cfg.dist) {
    rp_status st = rp_instance_write(m->rt, m->data_x, d->x,
                                     (size_t)d->n * F * sizeof(float));
    return st ? st
              : rp_instance_write(m->rt, m->data_y, d->y,
                                  (size_t)d->n * sizeof(int32_t));
  }
  float *x = calloc(nd * F, sizeof *x);
  int32_t *y = calloc(nd, sizeof *y);
  rp_status st = RP_OK;
  if (!x || !y)
    st = rp_error_set(RP_ENOMEM, "rp_mlp_create: out of memory");
  if (!st)
    pack_rows(m, d->x, d->y, NULL, m->nbatches, x, y);
  if (!st)
    st = rp_instance_write(m->rt, m->data_x, x, nd * F * sizeof *x);
  if (!st)
    st = rp_instance_write(m->rt, m->data_y, y, nd * sizeof *y);
  free(x);
  free(y);
  return st;
}

rp_status rp_mlp_create(rp_runtime *rt, const rp_kernel_tasks *k,
                        const rp_mlp_config *cfg, const rp_dataset *data,
                        rp_mlp **out) {
  if (!rt || !k || !cfg || !data || !out)
    return rp_error_set(RP_EINVAL, "rp_mlp_create: NULL argument");
  rp_status st = check_config(cfg, data);
  if (st != RP_OK)
    return st;
  rp_mlp *m = calloc(1, sizeof *m);
  if (!m || !(m->shards = calloc(cfg->procs, sizeof *m->shards))) {
    free(m);
    return rp_error_set(RP_ENOMEM, "rp_mlp_create: out of memory");
  }
  m->rt = rt;
  m->k = *k;
  m->cfg = *cfg;
  m->nl = cfg->nhidden + 1;
  m->features = data->features;
  m->classes = data->classes;
  m->samples = data->n;
  m->nbatches = data->n / cfg->batch;
  m->loaded_epoch = -1;
  for (uint32_t l = 0; l < m->nl; l++) {
    m->layers[l].in = l ? cfg->hidden[l - 1] : data->features;
    m->layers[l].out = l + 1 < m->nl ? cfg->hidden[l] : data->classes;
  }
  st = place_rank(m);
  if (!st)
    st = pick_procs(m);
  if (!st)
    st = make_home(m);
  for (uint32_t p = 0; !st && p < cfg->procs; p++)
    st = make_shard(m, p);
  if (!st && cfg->procs == 1)
    alias_home(m);
  if (!st)
    st = name_all(m);
  if (!st)
    st = write_data(m, data);
  if (!st)
    st = rp_mlp_reset(m);
  if (st != RP_OK) {
    rp_mlp_destroy(m);
    return st;
  }
  *out = m;
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* Queries */

uint32_t rp_mlp_batches(const rp_mlp *m) {
  return m ? m->nbatches : 0;
}
const rp_proc *rp_mlp_procs(const rp_mlp *m) {
  return m ? m->procs : NULL;
}

size_t rp_mlp_param_count(const rp_mlp *m) {
  size_t n = 0;
  for (uint32_t l = 0; m && l < m->nl; l++)
    n += (size_t)(m->layers[l].in + 1) * m->layers[l].out;
  return n;
}

rp_status rp_mlp_params_read(rp_mlp *m, float *out, size_t n) {
  if (!m || !out)
    return rp_error_set(RP_EINVAL, "rp_mlp_params_read: NULL argument");
  if (n < rp_mlp_param_count(m))
    return rp_error_set(RP_ERANGE,
                        "rp_mlp_params_read: room for %zu of %zu "
                        "parameters",
                        n, rp_mlp_param_count(m));
  rp_status st = RP_OK;
  for (uint32_t l = 0; !st && l < m->nl; l++) {
    const layer *ly = &m->layers[l];
    size_t nw = (size_t)ly->in * ly->out;
    st = rp_instance_read(m->rt, ly->w, out, nw * sizeof *out);
    out += nw;
    if (!st)
      st = rp_instance_read(m->rt, ly->b, out, ly->out * sizeof *out);
    out += ly->out;
  }
  return st;
}

rp_status rp_mlp_batch_loss(rp_mlp *m, float *out) {
  if (!m || !out)
    return rp_error_set(RP_EINVAL, "rp_mlp_batch_loss: NULL argument");
  return rp_instance_read(m->rt, m->loss, out, sizeof *out);
}

/* One batch of the evaluation (this rank's rows of batch i of the packed
 * set sx/sy): loss (summed over those rows, divided by the global batch)
 * and the number of correct predictions. */
static rp_status eval_batch(rp_mlp *m, rp_inst sx, rp_inst sy, uint32_t i,
                            float *loss, int32_t *correct) {
  rp_proc p = m->procs[0];
  const layer *ly = m->layers;
  rp_inst w[MAXL], b[MAXL];
  for (uint32_t l = 0; l < m->nl; l++) {
    w[l] = ly[l].w;
    b[l] = ly[l].b;
  }
  rp_inst logits = m->ez[m->nl - 1];
  /* norm 0 (the rows: the whole batch) without dist, where it is the same
   * number: the single-process evaluation keeps its exact ops */
  rp_xent_args xa = {(int32_t)m->rows, (int32_t)m->classes,
                     m->cfg.dist ? (float)m->cfg.batch : 0.0f};
  rp_rows_cols_args ra = {(int32_t)m->rows, (int32_t)m->classes};
  rp_status st = gather(m, sx, m->bx, m->features, i);
  if (!st)
    st = gather(m, sy, m->by, 1, i);
  if (!st)
    st = forward(m, p, m->bx, m->rows, w, b, m->ez, m->ea);
  if (!st)
    st = task(m, m->k.xent_fwd, p,
              ACC(R(logits), R(m->by), W(m->eprobs), W(m->eloss)), &xa,
              sizeof xa, NULL);
  if (!st)
    st = task(m, m->k.accuracy, p, ACC(R(logits), R(m->by), W(m->ecount)), &ra,
              sizeof ra, NULL);
  rp_status dst = rp_runtime_drain(m->rt);
  if (!st)
    st = dst;
  if (!st)
    st = rp_instance_read(m->rt, m->eloss, loss, sizeof *loss);
  if (!st)
    st = rp_instance_read(m->rt, m->ecount, correct, sizeof *correct);
  return st;
}

/* dist: the sums of every rank (an eager all-reduce of esum). Counts up to
 * 2^53 are exact in f64. */
static rp_status sum_ranks(rp_mlp *m, double *sum, int64_t *correct) {
  double v[2] = {*sum, (double)*correct};
  rp_event done = RP_NO_EVENT;
  rp_status st = rp_instance_write(m->rt, m->esum, v, sizeof v);
  if (!st)
    st = allreduce_ev(m, m->esum, &done);
  if (!st) {
    st = rp_event_wait(m->rt, done, -1);
    rp_event_release(m->rt, done);
    if (st != RP_OK)
      st = rp_error_set(st, "all-reduce of the sums: %s",
                        rp_runtime_dist_detail(m->rt));
  }
  if (!st)
    st = rp_instance_read(m->rt, m->esum, v, sizeof v);
  if (!st) {
    *sum = v[0];
    *correct = (int64_t)v[1];
  }
  return st;
}

/* Mean loss and accuracy over nb whole batches of the packed set sx/sy. */
static rp_status evaluate_on(rp_mlp *m, rp_inst sx, rp_inst sy, uint32_t nb,
                             const char *f, double *loss, double *accuracy) {
  double sum = 0.0;
  int64_t correct = 0;
  for (uint32_t i = 0; i < nb; i++) {
    float l = 0.0f;
    int32_t c = 0;
    rp_status st = eval_batch(m, sx, sy, i, &l, &c);
    if (st != RP_OK)
      return rp_train_err_prefix(st, "%s: batch %u: ", f, i);
    sum += l;
    correct += c;
  }
  rp_status st = m->cfg.dist ? sum_ranks(m, &sum, &correct) : RP_OK;
  if (st != RP_OK)
    return rp_train_err_prefix(st, "%s: ", f);
  *loss = sum / nb;
  *accuracy = (double)correct / ((double)nb * m->cfg.batch);
  return RP_OK;
}

rp_status rp_mlp_evaluate(rp_mlp *m, double *loss, double *accuracy) {
  if (!m || !loss || !accuracy)
    return rp_error_set(RP_EINVAL, "rp_mlp_evaluate: NULL argument");
  return evaluate_on(m, m->data_x, m->data_y, m->nbatches, "rp_mlp_evaluate",
                     loss, accuracy);
}

rp_status rp_mlp_evaluate_val(rp_mlp *m, double *loss, double *accuracy) {
  if (!m || !loss || !accuracy)
    return rp_error_set(RP_EINVAL, "rp_mlp_evaluate_val: NULL argument");
  if (!m->val_batches)
    return rp_error_set(RP_EINVAL, "rp_mlp_evaluate_val: no validation set "
                                   "(rp_mlp_set_validation)");
  return evaluate_on(m, m->val_x, m->val_y, m->val_batches,
                     "rp_mlp_evaluate_val", loss, accuracy);
}

rp_status rp_mlp_set_validation(rp_mlp *m, const rp_dataset *val) {
  const char *f = "rp_mlp_set_validation";
  if (!m || !val || !val->x || !val->y)
    return rp_error_set(RP_EINVAL, "%s: NULL argument", f);
  if (m->val_batches)
    return rp_error_set(RP_EEXIST, "%s: the model has a validation set", f);
  if (val->features != m->features)
    return rp_error_set(RP_ESHAPE, "%s: %u features, the training set has %u",
                        f, val->features, m->features);
  for (uint32_t i = 0; i < val->n; i++)
    if (val->y[i] < 0 || (uint32_t)val->y[i] >= m->classes)
      return rp_error_set(RP_ERANGE, "%s: sample %u: label %d outside [0, %u)",
                          f, i, (int)val->y[i], m->classes);
  uint32_t nb = val->n / m->cfg.batch;
  if (nb == 0)
    return rp_error_set(RP_ERANGE, "%s: %u samples, less than one batch of %u",
                        f, val->n, m->cfg.batch);
  size_t rows = (size_t)nb * m->rows, F = m->features;
  float *x = calloc(rows * F, sizeof *x);
  int32_t *y = calloc(rows, sizeof *y);
  rp_status st =
      x && y ? RP_OK : rp_error_set(RP_ENOMEM, "%s: out of memory", f);
  if (!st)
    st = mk(m, 0, RP_F32, mat(0, (int64_t)rows - 1, m->features), &m->val_x);
  if (!st)
    st = mk(m, 0, RP_I32, rp_rect_1d(0, (int64_t)rows - 1), &m->val_y);
  if (!st) {
    pack_rows(m, val->x, val->y, NULL, nb, x, y);
    st = rp_instance_write(m->rt, m->val_x, x, rows * F * sizeof *x);
  }
  if (!st)
    st = rp_instance_write(m->rt, m->val_y, y, rows * sizeof *y);
  free(x);
  free(y);
  if (!st)
    m->val_batches = nb; /* on failure the instances wait for destroy */
  return st;
}

/* ---------------------------------------------------------------------- */
/* Shuffling */

rp_status rp_mlp_shuffle(rp_mlp *m, const rp_dataset *d, uint64_t seed) {
  const char *f = "rp_mlp_shuffle";
  if (!m || !d || !d->x || !d->y)
    return rp_error_set(RP_EINVAL, "%s: NULL argument", f);
  if (d->n != m->samples || d->features != m->features)
    return rp_error_set(RP_ESHAPE,
                        "%s: a data set of %u x %u, the model's is "
                        "%u x %u",
                        f, d->n, d->features, m->samples, m->features);
  size_t n = m->samples, F = m->features, nd = home_rows(m);
  if (!m->src_x) { /* once: training then allocates nothing */
    m->src_x = calloc(n * F, sizeof *m->src_x);
    m->src_y = calloc(n, sizeof *m->src_y);
    m->stage_x = calloc(nd * F, sizeof *m->stage_x);
    m->stage_y = calloc(nd, sizeof *m->stage_y);
    m->perm = calloc(n, sizeof *m->perm);
    if (!m->src_x || !m->src_y || !m->stage_x || !m->stage_y || !m->perm)
      return rp_error_set(RP_ENOMEM, "%s: out of memory", f);
  }
  memcpy(m->src_x, d->x, n * F * sizeof *m->src_x);
  memcpy(m->src_y, d->y, n * sizeof *m->src_y);
  m->shuffle = 1;
  m->shuffle_seed = seed;
  m->loaded_epoch = -1; /* the next training step writes its epoch */
  return RP_OK;
}

void rp_mlp_epoch_permutation(uint32_t n, uint64_t seed, uint32_t epoch,
                              uint32_t *perm) {
  /* the epoch's stream starts at a mixed value: splitmix64 streams seeded
   * a multiple of its increment apart are shifted copies of each other,
   * and Fisher-Yates over streams one draw apart gives orders that share
   * many neighbours */
  rp_rng g;
  rp_rng_seed(&g, seed ^ 0x73687566666c6521ull /* "shuffle!" */ ^
                      0xd1b54a32d192ed03ull * (epoch + 1ull));
  rp_data_permutation(n, rp_rng_next(&g), perm);
}

/* Writes epoch e's order into data_x/data_y (no step may be running):
 * the data set permuted by a permutation seeded from the seed and e, so
 * every epoch's order is known without the ones before (a resumed run
 * sees the order an uninterrupted one does) and every rank computes the
 * same. No-op without shuffling or when that order is loaded. */
static rp_status load_epoch(rp_mlp *m, uint32_t e) {
  if (!m->shuffle || m->loaded_epoch == (int64_t)e)
    return RP_OK;
  size_t F = m->features, nd = home_rows(m);
  rp_mlp_epoch_permutation(m->samples, m->shuffle_seed, e, m->perm);
  if (m->cfg.dist) {
    pack_rows(m, m->src_x, m->src_y, m->perm, m->nbatches, m->stage_x,
              m->stage_y);
  } else {
    for (size_t i = 0; i < m->samples; i++) {
      memcpy(m->stage_x + i * F, m->src_x + m->perm[i] * F,
             F * sizeof *m->stage_x);
      m->stage_y[i] = m->src_y[m->perm[i]];
    }
  }
  rp_status st =
      rp_instance_write(m->rt, m->data_x, m->stage_x, nd * F * sizeof(float));
  if (!st)
    st = rp_instance_write(m->rt, m->data_y, m->stage_y, nd * sizeof(int32_t));
  if (st != RP_OK)
    return rp_train_err_prefix(st, "shuffling for epoch %u: ", e);
  m->loaded_epoch = e;
  return RP_OK;
}

/* 1 when step t needs another epoch's order than the one loaded. */
static int epoch_change(const rp_mlp *m, uint32_t t) {
  return m->shuffle && m->loaded_epoch != (int64_t)(t / m->nbatches);
}

/* ---------------------------------------------------------------------- */
/* Training loops */

typedef rp_status (*step_fn)(rp_mlp *m, void *ctx, const rp_mlp_step_args *a);

static rp_status replay_one(rp_mlp *m, void *ctx, const rp_mlp_step_args *a) {
  return rp_train_replay_wait(m->rt, ctx, a, sizeof *a);
}

/* Issues the step and waits for the events of its last ops, as a replay
 * waits for its done event (rp_runtime_drain would busy-yield the host
 * thread instead of sleeping through long steps). */
static rp_status eager_one(rp_mlp *m, void *ctx, const rp_mlp_step_args *a) {
  (void)ctx;
  m->collect = 1;
  m->nsinks = 0;
  rp_status st = rp_mlp_step(m, a);
  m->collect = 0;
  return rp_train_wait_ops(m->rt, m->sinks, m->nsinks, st, "eager step", "");
}

static rp_mlp_step_args step_args(const rp_mlp *m, const rp_mlp_train_opts *o,
                                  uint32_t t) {
  rp_mlp_step_args a = {t % m->nbatches,
                        o->lr / (1.0f + o->lr_decay * (float)t)};
  return a;
}

/* 1 when step t reads the batch loss. */
static int reads_loss(const rp_mlp_train_opts *o, uint32_t t) {
  return o->loss_every && (t % o->loss_every == 0 || t + 1 == o->iters);
}

static rp_status train(rp_mlp *m, step_fn fn, void *ctx,
                       const rp_mlp_train_opts *o) {
  for (uint32_t t = o->start; t < o->iters; t++) {
    rp_status st = load_epoch(m, t / m->nbatches); /* the step waited */
    if (st != RP_OK)
      return rp_train_err_prefix(st, "step %u: ", t);
    rp_mlp_step_args a = step_args(m, o, t);
    uint64_t t0 = rp_train_now_ns();
    st = fn(m, ctx, &a);
    uint64_t t1 = rp_train_now_ns();
    if (st != RP_OK)
      return rp_train_err_prefix(st, "step %u: ", t);
    if (o->iter_ns)
      o->iter_ns[t - o->start] = t1 - t0;
    float loss = NAN;
    if (reads_loss(o, t) && (st = rp_mlp_batch_loss(m, &loss)) != RP_OK)
      return st;
    if (o->progress && o->progress(o->arg, t, loss))
      break;
  }
  return RP_OK;
}

_Static_assert(RP_MLP_MAX_INFLIGHT <= RP_TRAIN_MAX_INFLIGHT,
               "the ring holds RP_MLP_MAX_INFLIGHT replays");

/* What a retired replay reports (rp_train_ring.report): the loss when its
 * step reads one (it is then the newest, see train_inflight). */
typedef struct flight_ctx {
  rp_mlp *m;
  const rp_mlp_train_opts *o;
} flight_ctx;

static rp_status report_step(void *arg, uint32_t t, int *halt) {
  const flight_ctx *f = arg;
  float loss = NAN;
  rp_status st;
  if (reads_loss(f->o, t) && (st = rp_mlp_batch_loss(f->m, &loss)) != RP_OK)
    return st;
  if (f->o->progress && f->o->progress(f->o->arg, t, loss))
    *halt = 1;
  return RP_OK;
}

/* Up to o->inflight replays outstanding (see rp_mlp_train_opts). A step
 * that reads the loss retires every outstanding replay right after it is
 * issued, so when it is retired no later replay has been started. */
static rp_status train_inflight(rp_mlp *m, rp_exec *ex,
                                const rp_mlp_train_opts *o) {
  flight_ctx f = {m, o};
  rp_train_ring r;
  rp_train_ring_init(&r, m->rt, ex, o->inflight, o->start, o->iter_ns,
                     report_step, &f);
  rp_status st = RP_OK;
  for (uint32_t t = o->start; !st && !r.halt && t < o->iters; t++) {
    if (r.n == r.cap && (st = rp_train_ring_retire(&r)) != RP_OK)
      break;
    /* a new epoch's order is written while no replay is in flight */
    while (!st && r.n && epoch_change(m, t))
      st = rp_train_ring_retire(&r);
    if (!st && (st = load_epoch(m, t / m->nbatches)) != RP_OK)
      st = rp_train_err_prefix(st, "step %u: ", t);
    if (st || r.halt)
      break;
    rp_mlp_step_args a = step_args(m, o, t);
    rp_replay_args ra = {.args = &a, .args_size = sizeof a};
    if ((st = rp_train_ring_issue(&r, &ra, t)) != RP_OK)
      break;
    while (!st && r.n && reads_loss(o, t))
      st = rp_train_ring_retire(&r);
  }
  return rp_train_ring_finish(&r, st);
}

rp_status rp_mlp_train_replay(rp_mlp *m, rp_exec *ex,
                              const rp_mlp_train_opts *o) {
  if (!m || !ex || !o)
    return rp_error_set(RP_EINVAL, "rp_mlp_train_replay: NULL argument");
  if (o->inflight > RP_MLP_MAX_INFLIGHT)
    return rp_error_set(RP_EINVAL,
                        "rp_mlp_train_replay: inflight = %u (need 0..%d)",
                        o->inflight, RP_MLP_MAX_INFLIGHT);
  if (o->start > o->iters)
    return rp_error_set(RP_EINVAL, "rp_mlp_train_replay: start %u > iters %u",
                        o->start, o->iters);
  uint64_t w0 = rp_train_now_ns();
  rp_status st =
      o->inflight > 1 ? train_inflight(m, ex, o) : train(m, replay_one, ex, o);
  if (o->wall_ns)
    *o->wall_ns = rp_train_now_ns() - w0;
  return st;
}

rp_status rp_mlp_train_eager(rp_mlp *m, const rp_mlp_train_opts *o) {
  if (!m || !o)
    return rp_error_set(RP_EINVAL, "rp_mlp_train_eager: NULL argument");
  if (o->start > o->iters)
    return rp_error_set(RP_EINVAL, "rp_mlp_train_eager: start %u > iters %u",
                        o->start, o->iters);
  uint64_t w0 = rp_train_now_ns();
  rp_status st = train(m, eager_one, NULL, o);
  rp_status dst = rp_runtime_drain(m->rt); /* the ops' own bookkeeping */
  if (o->wall_ns)
    *o->wall_ns = rp_train_now_ns() - w0;
  return st ? st : dst;
}

/* ---------------------------------------------------------------------- */
/* Checkpoints (format in mlp.h) */

#define CKPT_MAGIC "RPRSWGHT"
#define CKPT_HEAD 48u /* bytes before the widths */

#define CKPT_KIND "mlp" /* in the checkpoint container (ckpt.h) */

static uint64_t fnv1a64(const unsigned char *b, size_t n) {
  return rp_fnv1a64(RP_FNV64_INIT, b, n);
}

/* a + b and a * b, saturating at UINT64_MAX: a checkpoint's size from
 * whatever widths a caller gives (a saturated size is refused). */
static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
static uint64_t sat_mul(uint64_t a, uint64_t b) {
  return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* Floats of a model with these widths: per layer W, b and their momentum
 * (saturating). */
static uint64_t ckpt_floats(const uint32_t *w, uint32_t layers) {
  uint64_t n = 0;
  for (uint32_t l = 0; l < layers; l++)
    n = sat_add(n, sat_mul(2, sat_add((uint64_t)w[l] * w[l + 1], w[l + 1])));
  return n;
}

/* The record's bytes (inside the container) of a model with the widths
 * w[0..layers] (saturating): the header, the widths, the floats and the
 * checksum. */
static uint64_t record_bytes(const uint32_t *w, uint32_t layers) {
  return sat_add(CKPT_HEAD + 4 * ((uint64_t)layers + 1) + 8,
                 sat_mul(4, ckpt_floats(w, layers)));
}

/* The widths (features, hidden..., classes) of the model cfg builds on a
 * data set of `features` and `classes`; its layer count. */
static uint32_t config_widths(const rp_mlp_config *cfg, uint32_t features,
                              uint32_t classes, uint32_t *w) {
  w[0] = features;
  for (uint32_t l = 0; l < cfg->nhidden; l++)
    w[l + 1] = cfg->hidden[l];
  w[cfg->nhidden + 1] = classes;
  return cfg->nhidden + 1;
}

/* "2-64-64-3" into buf. */
static const char *widths_str(const uint32_t *w, uint32_t layers, char *buf,
                              size_t cap) {
  size_t k = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i <= layers && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%u", i ? "-" : "", w[i]);
  return buf;
}

/* Copies (dir 0: instance -> floats, 1: floats -> instance) every
 * parameter and its momentum in the file's order. */
static rp_status ckpt_move(rp_mlp *m, float *p, int dir) {
  rp_status st = RP_OK;
  for (uint32_t l = 0; !st && l < m->nl; l++) {
    const layer *ly = &m->layers[l];
    size_t nw = (size_t)ly->in * ly->out;
    rp_inst inst[4] = {ly->w, ly->b, ly->vw, ly->vb};
    size_t cnt[4] = {nw, ly->out, nw, ly->out};
    for (int i = 0; !st && i < 4; i++) {
      st = dir ? rp_instance_write(m->rt, inst[i], p, cnt[i] * sizeof *p)
               : rp_instance_read(m->rt, inst[i], p, cnt[i] * sizeof *p);
      p += cnt[i];
    }
  }
  return st;
}

/* A schedule a checkpoint may hold: the options' domain (--lr > 0,
 * --lr-decay >= 0), finite. */
static int good_schedule(float lr, float lr_decay) {
  return isfinite(lr) && lr > 0.0f && isfinite(lr_decay) && lr_decay >= 0.0f;
}

/* The record's bytes (inside the container) of m's checkpoint. */
static uint64_t ckpt_record_bytes(const rp_mlp *m, uint32_t *w) {
  w[0] = m->features;
  for (uint32_t l = 0; l < m->nl; l++)
    w[l + 1] = m->layers[l].out;
  return record_bytes(w, m->nl);
}

/* The size check of a checkpoint whose record has `record` bytes. */
static rp_status save_size_check(uint64_t record) {
  return rp_ckpt_size_check("a model of this size", record, RP_MLP_CKPT_MAX);
}

rp_status rp_mlp_save_check(const rp_mlp *m) {
  if (!m)
    return rp_error_set(RP_EINVAL, "rp_mlp_save_check: NULL model");
  uint32_t w[MAXL + 1];
  return save_size_check(ckpt_record_bytes(m, w));
}

uint64_t rp_mlp_ckpt_bytes(const rp_mlp_config *cfg, uint32_t features,
                           uint32_t classes) {
  if (!cfg || cfg->nhidden > RP_MLP_MAX_HIDDEN)
    return 0;
  uint32_t w[MAXL + 1];
  uint32_t nl = config_widths(cfg, features, classes, w);
  return sat_add(RP_CKPT_HEAD, record_bytes(w, nl));
}

rp_status rp_mlp_save_check_config(const rp_mlp_config *cfg, uint32_t features,
                                   uint32_t classes) {
  if (!cfg || cfg->nhidden > RP_MLP_MAX_HIDDEN)
    return rp_error_set(RP_EINVAL, "rp_mlp_save_check_config: NULL config or "
                                   "more than RP_MLP_MAX_HIDDEN layers");
  uint32_t w[MAXL + 1];
  uint32_t nl = config_widths(cfg, features, classes, w);
  return save_size_check(record_bytes(w, nl));
}

rp_status rp_mlp_save(rp_mlp *m, const char *path,
                      const rp_mlp_ckpt_info *info) {
  if (!m || !path || !info)
    return rp_error_set(RP_EINVAL, "rp_mlp_save: NULL argument");
  if (rp_mlp_save_check(m) != RP_OK)
    return rp_error_set(RP_ERANGE, "rp_mlp_save: %s", rp_error_detail());
  uint32_t w[MAXL + 1];
  size_t size = (size_t)ckpt_record_bytes(m, w);
  size_t nf = (size_t)ckpt_floats(w, m->nl);
  size_t head = CKPT_HEAD + 4 * ((size_t)m->nl + 1);
  unsigned char *b = calloc(size, 1);
  float *p = calloc(nf ? nf : 1, sizeof *p);
  rp_status st = b && p ? ckpt_move(m, p, 0)
                        : rp_error_set(RP_ENOMEM, "rp_mlp_save: out of memory");
  if (!st && !good_schedule(info->lr, info->lr_decay)) /* the reader would */
    st = rp_error_set(RP_EINVAL,
                      "rp_mlp_save: lr %g, lr decay %g (need "
                      "finite, lr > 0, decay >= 0)",
                      (double)info->lr, (double)info->lr_decay);
  if (!st) /* the reader would refuse it */
    st = rp_ckpt_check_finite(p, nf, "rp_mlp_save", "the weights and momenta",
                              0);
  if (!st) {
    memcpy(b, CKPT_MAGIC, 8);
    rp_le_put32(b + 8, 1);
    rp_le_put32(b + 12, m->nl);
    rp_le_put32(b + 16, info->step);
    rp_le_putf(b + 20, info->lr);
    rp_le_putf(b + 24, info->lr_decay);
    rp_le_putf(b + 28, m->cfg.momentum);
    rp_le_put32(b + 32, m->cfg.batch);
    rp_le_put32(b + 36, m->shuffle ? 1u : 0u);
    rp_le_put32(b + 40, (uint32_t)m->cfg.seed);
    rp_le_put32(b + 44, (uint32_t)(m->cfg.seed >> 32));
    for (uint32_t i = 0; i <= m->nl; i++)
      rp_le_put32(b + CKPT_HEAD + 4 * i, w[i]);
    for (size_t i = 0; i < nf; i++)
      rp_le_putf(b + head + 4 * i, p[i]);
    uint64_t h = fnv1a64(b, size - 8);
    rp_le_put32(b + size - 8, (uint32_t)h);
    rp_le_put32(b + size - 4, (uint32_t)(h >> 32));
    /* the record inside the checkpoint container: written through the
     * output writer, a length and a checksum around it */
    st = rp_ckpt_save(path, CKPT_KIND, 1, b, size);
  }
  free(b);
  free(p);
  return st;
}

/* Checks a record in b (n bytes): a whole file (inner 0) or the payload
 * of a checkpoint container (inner 1: whose length and checksum held, so
 * nothing in it is "truncated" or "not a checkpoint" but the record), and
 * fills *c (but for the parameters). */
static rp_status ckpt_parse(const char *path, const unsigned char *b, size_t n,
                            int inner, rp_mlp_ckpt *c) {
  const char *unit = inner ? "the container's payload" : "the file";
  if (n == 0)
    return rp_error_set(RP_EFORMAT, "%s: %s", path,
                        inner ? "an 'mlp' checkpoint of an empty payload (no "
                                "weights record)"
                              : "an empty file, not a checkpoint");
  if (inner && rp_ckpt_is_container(b, n))
    return rp_error_set(RP_EFORMAT,
                        "%s: an 'mlp' checkpoint whose payload is another "
                        "checkpoint container, not an MLP weights record",
                        path);
  if (inner && (n < CKPT_HEAD || memcmp(b, CKPT_MAGIC, 8) != 0))
    return rp_error_set(RP_EFORMAT,
                        "%s: an 'mlp' checkpoint whose %zu-byte payload is "
                        "not an MLP weights record (one starts '" CKPT_MAGIC
                        "' and has a %u-byte header at least)",
                        path, n, CKPT_HEAD);
  if (n < 8 && (!memcmp(b, RP_CKPT_MAGIC, n) || !memcmp(b, CKPT_MAGIC, n)))
    return rp_error_set(RP_EFORMAT,
                        "%s: truncated: %zu byte%s, cut inside "
                        "the checkpoint's magic",
                        path, n, n == 1 ? "" : "s");
  if (n >= 8 && n < CKPT_HEAD && !memcmp(b, CKPT_MAGIC, 8))
    return rp_error_set(RP_EFORMAT,
                        "%s: truncated: %zu bytes, a weights record's "
                        "header alone has %u",
                        path, n, CKPT_HEAD);
  if (n < CKPT_HEAD || memcmp(b, CKPT_MAGIC, 8) != 0)
    return rp_error_set(RP_EFORMAT,
                        "%s: not a reprise checkpoint (neither an "
                        "'" RP_CKPT_MAGIC "' container nor an '" CKPT_MAGIC
                        "' weights record)",
                        path);
  if (rp_le_get32(b + 8) != 1)
    return rp_error_set(RP_EVERSION,
                        "%s: weights format version %u (this "
                        "build reads version 1)",
                        path, rp_le_get32(b + 8));
  c->layers = rp_le_get32(b + 12);
  if (c->layers < 1 || c->layers > MAXL)
    return rp_error_set(RP_EFORMAT, "%s: %u layers (need 1..%u)", path,
                        c->layers, MAXL);
  size_t head = CKPT_HEAD + 4 * ((size_t)c->layers + 1);
  if (n < head)
    return rp_error_set(
        RP_EFORMAT, "%s: %s header: %u layers need %zu bytes, %s has %zu", path,
        inner ? "a damaged record's" : "truncated", c->layers, head, unit, n);
  for (uint32_t i = 0; i <= c->layers; i++)
    if ((c->widths[i] = rp_le_get32(b + CKPT_HEAD + 4 * i)) == 0 ||
        c->widths[i] > (1u << 24))
      return rp_error_set(RP_EFORMAT,
                          "%s: layer width %u is %u (need "
                          "1..2^24)",
                          path, i, c->widths[i]);
  char ws[160];
  uint64_t want = head + 4 * ckpt_floats(c->widths, c->layers) + 8;
  if (n != want)
    return rp_error_set(RP_EFORMAT,
                        "%s: %s: the header (an MLP %s) needs %llu "
                        "bytes, %s has %zu",
                        path,
                        inner      ? "a damaged record"
                        : n < want ? "truncated"
                                   : "trailing bytes",
                        widths_str(c->widths, c->layers, ws, sizeof ws),
                        (unsigned long long)want, unit, n);
  uint64_t h = fnv1a64(b, n - 8);
  uint64_t fh = rp_le_get32(b + n - 8) | (uint64_t)rp_le_get32(b + n - 4) << 32;
  if (h != fh)
    return rp_error_set(RP_ECHECKSUM,
                        "%s: checksum mismatch (the file says "
                        "fnv1a64:%016llx, its bytes give %016llx): the file is "
                        "corrupt",
                        path, (unsigned long long)fh, (unsigned long long)h);
  c->info.step = rp_le_get32(b + 16);
  c->info.lr = rp_le_getf(b + 20);
  c->info.lr_decay = rp_le_getf(b + 24);
  c->info.momentum = rp_le_getf(b + 28);
  c->info.batch = rp_le_get32(b + 32);
  c->info.shuffle = rp_le_get32(b + 36) & 1u;
  if (rp_le_get32(b + 36) > 1u || c->info.batch < 1 || c->info.batch > 1u << 24)
    return rp_error_set(RP_EFORMAT,
                        "%s: bad header: batch %u (need 1..%u), flags %#x "
                        "(bit 0 alone is defined)",
                        path, c->info.batch, 1u << 24, rp_le_get32(b + 36));
  c->info.seed = rp_le_get32(b + 40) | (uint64_t)rp_le_get32(b + 44) << 32;
  if (!good_schedule(c->info.lr, c->info.lr_decay) ||
      !(c->info.momentum >= 0.0f && c->info.momentum < 1.0f))
    return rp_error_set(RP_EFORMAT,
                        "%s: bad schedule: lr %g, lr decay %g, "
                        "momentum %g",
                        path, (double)c->info.lr, (double)c->info.lr_decay,
                        (double)c->info.momentum);
  return RP_OK;
}

/* The file's first bytes (at most RP_CKPT_HEAD) and its size, read before
 * the whole file: what they say decides whether it is read at all. */
static rp_status read_head(const char *path, unsigned char *head, size_t *got,
                           uint64_t *size) {
  int fd = -1;
  rp_status st = rp_file_open_regular(path, &fd, size);
  if (st != RP_OK)
    return rp_train_err_prefix(st, "%s: ", path);
  *got = 0;
  while (*got < RP_CKPT_HEAD && *got < *size) {
    ssize_t k = read(fd, head + *got, RP_CKPT_HEAD - *got);
    if (k <= 0)
      break; /* a short read: the whole read says why */
    *got += (size_t)k;
  }
  close(fd);
  return RP_OK;
}

/* RP_OK for the payload version this build reads. */
static rp_status payload_version(const char *path, uint32_t version) {
  return version == 1 ? RP_OK
                      : rp_error_set(RP_EVERSION,
                                     "%s: MLP checkpoint payload version %u "
                                     "(this build reads version 1)",
                                     path, version);
}

/* A whole checkpoint file in b (n bytes; inner: the payload of a container
 * already checked): the container's payload (or a bare record) parsed into
 * *c, its floats read. */
static rp_status parse_file(const char *path, const unsigned char *b, size_t n,
                            int inner, rp_mlp_ckpt *c) {
  rp_status st = RP_OK;
  if (!inner && rp_ckpt_is_container(b, n)) { /* a bare record also loads */
    uint32_t version;
    size_t off, len;
    st = rp_ckpt_parse(path, CKPT_KIND, b, n, &version, &off, &len);
    if (!st)
      st = payload_version(path, version);
    if (!st)
      b += off, n = len, inner = 1;
  }
  if (!st)
    st = ckpt_parse(path, b, n, inner, c);
  if (!st) {
    c->nparams = (size_t)ckpt_floats(c->widths, c->layers);
    size_t head = CKPT_HEAD + 4 * ((size_t)c->layers + 1);
    st = rp_ckpt_floats_read(path, b + head, c->nparams,
                             "the weights and momenta", &c->params);
  }
  return st;
}

rp_status rp_mlp_ckpt_read(const char *path, rp_mlp_ckpt *out) {
  if (!path || !out)
    return rp_error_set(RP_EINVAL, "rp_mlp_ckpt_read: NULL argument");
  rp_mlp_ckpt c;
  memset(&c, 0, sizeof c);
  /* The first bytes first: a file that is no checkpoint is refused, and a
   * container's header checked against the file's size (rp_ckpt_load),
   * without reading (up to RP_MLP_CKPT_MAX of) the rest. A bare record is
   * read whole, as is a file whose first bytes did not come (the whole
   * read says why). */
  unsigned char head[RP_CKPT_HEAD];
  size_t got = 0;
  uint64_t size = 0;
  rp_status st = read_head(path, head, &got, &size);
  if (st != RP_OK)
    return st;
  int short_read = got < (size < RP_CKPT_HEAD ? size : RP_CKPT_HEAD);
  int bare = got >= 8 && !memcmp(head, CKPT_MAGIC, 8);
  if (!short_read && !bare && !rp_ckpt_is_container(head, got))
    return ckpt_parse(path, head, got, 0, &c); /* neither: refused so */
  void *buf = NULL;
  size_t n = 0;
  if (!short_read && !bare) { /* the container: its header first */
    uint32_t version;
    st = rp_ckpt_load(path, CKPT_KIND, RP_MLP_CKPT_MAX, &version, &buf, &n);
    if (!st)
      st = payload_version(path, version);
    if (!st) /* the payload alone: the record */
      st = parse_file(path, buf, n, 1, &c);
  } else {
    char *whole = NULL;
    st = rp_file_read_regular(path, RP_MLP_CKPT_MAX, &whole, &n);
    if (st != RP_OK)
      return rp_train_err_prefix(st, "%s: ", path);
    buf = whole;
    st = parse_file(path, buf, n, 0, &c);
  }
  free(buf);
  if (!st)
    *out = c;
  else
    free(c.params);
  return st;
}

void rp_mlp_ckpt_free(rp_mlp_ckpt *c) {
  if (!c)
    return;
  free(c->params);
  memset(c, 0, sizeof *c);
}

/* c against the widths w[0..nl] (features, hidden..., classes). */
static rp_status ckpt_widths_fit(const rp_mlp_ckpt *c, const uint32_t *w,
                                 uint32_t nl) {
  int same = c->layers == nl;
  for (uint32_t i = 0; same && i <= nl; i++)
    same = c->widths[i] == w[i];
  char a[160], b[160];
  if (!same)
    return rp_error_set(RP_ESHAPE, "the file holds an MLP %s, this model is %s",
                        widths_str(c->widths, c->layers, a, sizeof a),
                        widths_str(w, nl, b, sizeof b));
  return RP_OK;
}

rp_status rp_mlp_ckpt_fits(const rp_mlp_ckpt *c, const rp_mlp_config *cfg,
                           const rp_dataset *data) {
  if (!c || !cfg || !data || cfg->nhidden > RP_MLP_MAX_HIDDEN)
    return rp_error_set(RP_EINVAL, "rp_mlp_ckpt_fits: NULL argument or "
                                   "more than RP_MLP_MAX_HIDDEN layers");
  uint32_t w[MAXL + 1];
  uint32_t nl = config_widths(cfg, data->features, data->classes, w);
  return ckpt_widths_fit(c, w, nl);
}

rp_status rp_mlp_ckpt_apply(rp_mlp *m, const rp_mlp_ckpt *c) {
  if (!m || !c || !c->params)
    return rp_error_set(RP_EINVAL, "rp_mlp_ckpt_apply: NULL argument");
  uint32_t w[MAXL + 1];
  w[0] = m->features;
  for (uint32_t l = 0; l < m->nl; l++)
    w[l + 1] = m->layers[l].out;
  rp_status st = ckpt_widths_fit(c, w, m->nl);
  return st ? st : ckpt_move(m, c->params, 1);
}
