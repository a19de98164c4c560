/* test/train_common.h — what test_train.c and test_train_gpu.c share: a
 * runtime with the kernels, a synthetic data set and the MLP, training a
 * fresh model, and weight comparisons. Header-only (static inline),
 * included by both. */
#ifndef RP_TEST_TRAIN_COMMON_H
#define RP_TEST_TRAIN_COMMON_H

#include "helpers.h"
#include "train/mlp.h"

#include <math.h>
#include <stdlib.h>

typedef struct tw {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_dataset d;
  rp_mlp *m;
  rp_mlp_config cfg;
} tw;

/* Small enough for 2 cores and learnable: spirals, 2048 samples, 3
 * classes, 32-32 hidden, batch 128 (16 batches per epoch). */
static inline void tw_config(rp_mlp_config *c, uint32_t procs) {
  rp_mlp_config_init(c);
  c->hidden[0] = c->hidden[1] = 32;
  c->nhidden = 2;
  c->batch = 128;
  c->procs = procs;
  c->seed = 7;
}

/* A runtime of `kind` (P GPUs on CUDA, P CPU workers either way), the
 * kernels, the data set and the model. Skips without a CUDA device. */
static inline void tw_init(tw *w, rp_backend_kind kind,
                           const rp_mlp_config *c) {
  memset(w, 0, sizeof *w);
  w->cfg = *c;
  if (kind == RP_BACKEND_CUDA) {
    th_need_gpu();
  }
  rp_runtime_config rc;
  rp_runtime_config_init(&rc);
  rc.backend = kind;
  rc.cpus = c->procs;
  rc.gpus = c->procs;
  rc.quiet = 1;
  rc.ignore_env = 1;
  RP_CHECK(rp_runtime_create(&rc, &w->rt));
  RP_CHECK(rp_kernels_register(w->rt, &w->k));
  RP_CHECK(rp_data_generate(RP_DATA_SPIRALS, 2048, 2, 3, c->seed, &w->d));
  RP_CHECK(rp_mlp_create(w->rt, &w->k, c, &w->d, &w->m));
}

static inline void tw_fini(tw *w) {
  RP_CHECK(rp_mlp_destroy(w->m));
  rp_data_free(&w->d);
  th_destroy(w->rt);
}

static inline rp_mlp_train_opts tw_opts(uint32_t iters) {
  /* A decaying rate: every replay gets a different lr through its args. */
  rp_mlp_train_opts o = {.iters = iters, .lr = 0.05f, .lr_decay = 0.01f};
  return o;
}

/* Records and instantiates the step; *ex owned by the caller. Returns the
 * instantiate status (RP_EUNSUPPORTED where a backend cannot replay). */
static inline rp_status tw_exec(tw *w, rp_exec **ex) {
  rp_graph *g = NULL;
  RP_CHECK(rp_mlp_record(w->m, &g));
  rp_status st = rp_instantiate(g, NULL, ex);
  RP_CHECK(rp_graph_destroy(g));
  return st;
}

static inline float *tw_params(tw *w) {
  size_t n = rp_mlp_param_count(w->m);
  float *p = malloc(n * sizeof *p);
  cr_assert_not_null(p);
  RP_CHECK(rp_mlp_params_read(w->m, p, n));
  return p;
}

/* Trains a fresh model (its own runtime of `kind`; skips without a CUDA
 * device) with `seed` for `iters` steps, eagerly or by replaying the
 * recorded step, and returns its parameters (*n of them; the caller frees
 * them) and, when loss/acc are not NULL, its loss and accuracy over the
 * data set. An instantiate that fails (RP_EUNSUPPORTED included) fails the
 * test. */
static inline float *tw_train(rp_backend_kind kind, uint32_t procs,
                              uint64_t seed, int eager, uint32_t iters,
                              size_t *n, double *loss, double *acc) {
  rp_mlp_config c;
  tw_config(&c, procs);
  c.seed = seed;
  tw w;
  tw_init(&w, kind, &c);
  rp_mlp_train_opts o = tw_opts(iters);
  if (eager) {
    RP_CHECK(rp_mlp_train_eager(w.m, &o));
  } else {
    rp_exec *ex = NULL;
    RP_CHECK(tw_exec(&w, &ex));
    RP_CHECK(rp_mlp_train_replay(w.m, ex, &o));
    RP_CHECK(rp_exec_destroy(ex));
  }
  double l, a;
  RP_CHECK(rp_mlp_evaluate(w.m, &l, &a));
  if (loss)
    *loss = l;
  if (acc)
    *acc = a;
  float *p = tw_params(&w);
  *n = rp_mlp_param_count(w.m);
  tw_fini(&w);
  return p;
}

/* max |a - b| / max(max |a|, 1e-3) over n values (NaN counts as huge). */
static inline double tw_rel_diff(const float *a, const float *b, size_t n) {
  double diff = 0, big = 1e-3;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    diff = d > diff || isnan(d) ? d : diff;
    big = fabs((double)a[i]) > big ? fabs((double)a[i]) : big;
  }
  return isnan(diff) ? INFINITY : diff / big;
}

#endif
