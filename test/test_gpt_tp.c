/* test/test_gpt_tp.c — tensor parallelism on the GPT (train/gpt.h,
 * rp_gpt_config.tp; docs/distributed.md): attention heads and the MLP's
 * hidden columns split over tp processors, the partial sums of the
 * row-parallel projections joined by REDUCTION, the LayerNorm outputs
 * REPLICATEd, the split weights REPARTITIONed at their global offsets and
 * their gradients COMBINEd at home. The gpt_tp_backends suite also builds
 * as test_gpt_tp_cuda: the processors are logical GPUs of one device
 * (rp_runtime_config.gpus), and it skips without one.
 *
 * Bounds (relative to the largest magnitude of the tensor compared):
 *  - loss (every step) and the first step's gradients: 1e-5. Tensor
 *    parallelism changes only the order of float sums: the row-parallel
 *    projections sum tp partial products, the LayerNorms' input gradients
 *    sum tp partial gradients (measured at most a few 1e-7);
 *  - weights after 10 AdamW steps: 1e-5 too (measured at most 1.7e-6 on
 *    the CPU), except elements whose gradient is null (below 1e-6 of their
 *    tensor's largest: rounding noise, as the key bias, whose exact
 *    gradient is zero): AdamW divides by sqrt(v) and turns any noise into
 *    an update of about lr per step with a random sign, so they are held
 *    to twice the sum of the learning rates, absolutely;
 *  - the PyTorch fixture at tp 2: test_gpt's bounds (1e-4);
 *  - replay against eager: bitwise. */
#include "helpers.h"
#include "train/gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP_TOL 1e-5
#define STEPS_TOL 1e-5
#define REF_TOL 1e-4
#define NULL_GRAD 1e-6
#define STEPS 10

/* A model of 2 layers, 4 heads, width 32, context 16, batch 4, vocabulary
 * 64 on `procs` processors, tp of them per group; STEPS batches of tokens
 * from a fixed seed in the ring. A test may change the width, the batch
 * and against_one's heads first (odd_shape). */
static uint32_t g_heads = 4, g_width = 32, g_batch = 4;

typedef struct run {
  rp_runtime *rt;
  rp_gpt *m;
  rp_exec *ex;
} run;

static void run_init(run *r, uint32_t heads, uint32_t procs, uint32_t tp) {
  memset(r, 0, sizeof *r);
  r->rt = th_runtime_procs(TH_BACKEND, procs);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(r->rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = 2;
  c.heads = heads;
  c.width = g_width;
  c.context = 16;
  c.vocab = 64;
  c.batch = g_batch;
  c.procs = procs;
  c.tp = tp;
  c.ring = STEPS;
  c.seed = 7;
  RP_CHECK(rp_gpt_create(r->rt, &k, &c, &r->m));
  size_t n = (size_t)STEPS * c.batch * c.context;
  int32_t *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  cr_assert(x && y);
  rp_rng g;
  rp_rng_seed(&g, 99);
  for (size_t i = 0; i < n; i++) {
    x[i] = (int32_t)(rp_rng_next(&g) % c.vocab);
    y[i] = (int32_t)(rp_rng_next(&g) % c.vocab);
  }
  RP_CHECK(rp_gpt_write_batches(r->m, x, y, STEPS));
  free(x);
  free(y);
}

static void run_fini(run *r) {
  RP_CHECK(rp_exec_destroy(r->ex));
  RP_CHECK(rp_gpt_destroy(r->m));
  th_destroy(r->rt);
}

static void run_step(run *r, uint32_t k, int replay) {
  rp_gpt_step_args a = {k % STEPS, 1e-3f * (float)(k + 1), (int32_t)k + 1};
  if (!replay) {
    RP_CHECK(rp_gpt_step(r->m, &a));
    RP_CHECK(rp_runtime_drain(r->rt));
    return;
  }
  if (!r->ex) {
    rp_graph *g;
    RP_CHECK(rp_gpt_record(r->m, &g));
    RP_CHECK(rp_instantiate(g, NULL, &r->ex));
    RP_CHECK(rp_graph_destroy(g));
  }
  rp_replay_args ra = {.args = &a, .args_size = sizeof a};
  rp_event done;
  RP_CHECK(rp_replay(r->ex, &ra, &done));
  rp_status st = rp_event_wait(r->rt, done, -1);
  rp_event_release(r->rt, done);
  cr_assert_eq(st, RP_OK, "replay %u: %s", k, rp_exec_error_detail(r->ex));
}

static float *run_read(run *r, rp_gpt_slot s) {
  size_t n = rp_gpt_param_count(r->m);
  float *out = malloc(n * sizeof *out), *p = out;
  cr_assert_not_null(out);
  for (uint32_t i = 0; i < rp_gpt_param_tensors(r->m); i++) {
    const rp_gpt_param_info *pi = rp_gpt_param(r->m, i);
    size_t k = (size_t)pi->rows * pi->cols;
    RP_CHECK(rp_gpt_tensor_read(r->m, i, s, p, k));
    p += k;
  }
  return out;
}

typedef struct result {
  float loss[STEPS];
  float *grad;   /* after the first step */
  float *weight; /* after STEPS steps */
} result;

static result train(uint32_t heads, uint32_t procs, uint32_t tp, int replay) {
  result res;
  memset(&res, 0, sizeof res);
  run r;
  run_init(&r, heads, procs, tp);
  for (uint32_t k = 0; k < STEPS; k++) {
    run_step(&r, k, replay);
    RP_CHECK(rp_gpt_batch_loss(r.m, &res.loss[k]));
    if (k == 0)
      res.grad = run_read(&r, RP_GPT_GRAD);
  }
  res.weight = run_read(&r, RP_GPT_WEIGHT);
  run_fini(&r);
  return res;
}

static void result_free(result *r) {
  free(r->grad);
  free(r->weight);
}

/* got within tol of want per tensor (relative to the tensor's largest
 * |want|); where `grad` (the reference's gradient) is null, within nb
 * absolutely. Returns the worst ratio. */
static double compare(const rp_gpt *m, const float *got, const float *want,
                      const float *grad, double tol, double nb,
                      const char *what) {
  double worst = 0;
  for (uint32_t i = 0; i < rp_gpt_param_tensors(m); i++) {
    const rp_gpt_param_info *pi = rp_gpt_param(m, i);
    size_t k = (size_t)pi->rows * pi->cols;
    double scale = 0, gmax = 0, diff = 0;
    size_t at = 0;
    for (size_t j = 0; j < k; j++) {
      scale = fmax(scale, fabs((double)want[j]));
      gmax = grad ? fmax(gmax, fabs((double)grad[j])) : 0;
    }
    for (size_t j = 0; j < k; j++) {
      double d = fabs((double)got[j] - (double)want[j]);
      if (grad && fabs((double)grad[j]) <= NULL_GRAD * gmax) {
        cr_assert(d <= nb, "%s %s[%zu] (null gradient): %.9g vs %.9g", what,
                  pi->name, j, (double)got[j], (double)want[j]);
        continue;
      }
      if (d > diff || isnan(d)) {
        diff = d;
        at = j;
      }
    }
    double rel = diff / (scale > 0 ? scale : 1);
    worst = fmax(worst, rel);
    cr_assert(rel <= tol, "%s %s[%zu]: %.9g vs %.9g: relative %.3g > %.3g (%s)",
              what, pi->name, at, (double)got[at], (double)want[at], rel, tol,
              TH_BACKEND_NAME);
    got += k;
    want += k;
    grad = grad ? grad + k : NULL;
  }
  return worst;
}

static double lr_sum(void) {
  double s = 0;
  for (uint32_t k = 0; k < STEPS; k++)
    s += 1e-3 * (k + 1);
  return s;
}

/* tp (and procs / tp data groups) against one processor. */
static void against_one(uint32_t procs, uint32_t tp) {
  result one = train(g_heads, 1, 1, 1), par = train(g_heads, procs, tp, 1);
  run r; /* for the table */
  run_init(&r, g_heads, 1, 1);
  for (uint32_t k = 0; k < STEPS; k++)
    cr_assert(fabsf(par.loss[k] - one.loss[k]) <= TP_TOL * fabsf(one.loss[k]),
              "procs %u tp %u step %u: loss %.9g vs %.9g", procs, tp, k + 1,
              (double)par.loss[k], (double)one.loss[k]);
  double g = compare(r.m, par.grad, one.grad, NULL, TP_TOL, 0, "gradient");
  double w = compare(r.m, par.weight, one.weight, one.grad, STEPS_TOL,
                     2 * lr_sum(), "weight after 10 steps");
  cr_log_info("%s procs %u tp %u against 1: gradients within %.3g, weights "
              "after %u steps within %.3g (relative)",
              TH_BACKEND_NAME, procs, tp, g, STEPS, w);
  run_fini(&r);
  result_free(&one);
  result_free(&par);
}

Test(gpt_tp_backends, tp2_matches_one_processor) {
  against_one(2, 2);
}

Test(gpt_tp_backends, tp4_matches_one_processor) {
  against_one(4, 4);
}

Test(gpt_tp_backends, tp2_times_dp2_matches_one_processor) {
  against_one(4, 2);
}

/* Odd counts: 3 heads of 8 (width 24) and a batch of 5, which no group
 * count here divides (torch.chunk's rows: 2, 2, 1 over 3 groups; 3, 2
 * over 2). */
static void odd_shape(void) {
  g_heads = 3;
  g_width = 24;
  g_batch = 5;
}

Test(gpt_tp_backends, dp3_on_an_uneven_batch_matches_one_processor) {
  odd_shape();
  against_one(3, 1);
}

Test(gpt_tp_backends, tp3_matches_one_processor) {
  odd_shape();
  against_one(3, 3);
}

Test(gpt_tp_backends, tp3_times_dp2_on_an_uneven_batch_matches_one_processor) {
  odd_shape();
  against_one(6, 3);
}

/* The first index where a and b differ in bits, n when none. */
static size_t first_diff(const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof *a) != 0)
      return i;
  return n;
}

Test(gpt_tp_backends, replay_is_bitwise_equal_to_eager) {
  const uint32_t cfg[][3] = {{2, 2, 0}, {4, 2, 0}, {6, 3, 1}};
  for (size_t i = 0; i < 3; i++) {
    if (cfg[i][2])
      odd_shape(); /* tp 3 x dp 2, an uneven batch */
    result e = train(g_heads, cfg[i][0], cfg[i][1], 0);
    result r = train(g_heads, cfg[i][0], cfg[i][1], 1);
    cr_assert(!memcmp(e.loss, r.loss, sizeof e.loss), "procs %u tp %u: loss",
              cfg[i][0], cfg[i][1]);
    run t;
    run_init(&t, g_heads, 1, 1);
    size_t n = rp_gpt_param_count(t.m);
    run_fini(&t);
    size_t gd = first_diff(e.grad, r.grad, n),
           wd = first_diff(e.weight, r.weight, n);
    cr_assert(gd == n,
              "procs %u tp %u: step 1's gradient element %zu: "
              "eager %.9g, replay %.9g",
              cfg[i][0], cfg[i][1], gd, gd < n ? e.grad[gd] : 0.0f,
              gd < n ? r.grad[gd] : 0.0f);
    cr_assert(wd == n,
              "procs %u tp %u: replayed weights differ from eager "
              "ones: element %zu: eager %.9g, replay %.9g",
              cfg[i][0], cfg[i][1], wd, wd < n ? e.weight[wd] : 0.0f,
              wd < n ? r.weight[wd] : 0.0f);
    result_free(&e);
    result_free(&r);
  }
}

/* ---- the PyTorch fixture of test_gpt at tp 2 ---- */

/* RP_TEST_SOURCE_DIR (test/CMakeLists.txt) is test/'s absolute path: the
 * binary finds its fixtures from any working directory. */
static const char *fixture_path(const char *name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/fixtures/%s", RP_TEST_SOURCE_DIR, name);
  return path;
}

/* A fixture of test_gpt (test/fixtures/NAME) replayed at tp 2 on two
 * processors: loss, gradients and weights after the steps. */
static void pytorch_fixture_at_tp2(const char *name) {
  size_t len;
  char *buf = th_read_all(fixture_path(name), &len);
  cr_assert(len > 60 && !memcmp(buf, "RPGPTFX1", 8), "not a fixture");
  const char *p = buf + 8;
  uint32_t h[8];
  memcpy(h, p, sizeof h);
  p += sizeof h;
  float a[5], lr[8], loss[8];
  memcpy(a, p, sizeof a);
  p += sizeof a;
  uint32_t steps = h[6];
  cr_assert(steps >= 1 && steps <= 8);
  memcpy(lr, p, steps * 4);
  p += steps * 4;
  size_t bt = (size_t)h[5] * h[3];
  const int32_t *x = (const int32_t *)(const void *)p;
  const int32_t *y = x + bt;
  p += 2 * bt * 4;
  memcpy(loss, p, steps * 4);
  p += steps * 4;
  size_t n = (len - (size_t)(p - buf)) / 12;
  const float *init = (const float *)(const void *)p, *grad = init + n,
              *after = grad + n;

  rp_runtime *rt = th_runtime_procs(TH_BACKEND, 2);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = h[0], c.heads = h[1], c.width = h[2], c.context = h[3];
  c.vocab = h[4], c.batch = h[5], c.procs = 2, c.tp = 2, c.ring = 1;
  c.beta1 = a[0], c.beta2 = a[1], c.eps = a[2], c.weight_decay = a[3];
  c.max_norm = a[4];
  rp_gpt *m;
  RP_CHECK(rp_gpt_create(rt, &k, &c, &m));
  cr_assert_eq(rp_gpt_param_count(m), n);
  const float *w = init;
  for (uint32_t i = 0; i < rp_gpt_param_tensors(m); i++) {
    const rp_gpt_param_info *pi = rp_gpt_param(m, i);
    size_t e = (size_t)pi->rows * pi->cols;
    RP_CHECK(rp_gpt_tensor_write(m, i, RP_GPT_WEIGHT, w, e));
    w += e;
  }
  RP_CHECK(rp_gpt_write_batches(m, x, y, 1));
  rp_graph *g;
  rp_exec *ex;
  RP_CHECK(rp_gpt_record(m, &g));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  run r = {rt, m, ex};
  double lsum = 0;
  for (uint32_t s = 0; s < steps; s++) {
    rp_gpt_step_args sa = {0, lr[s], (int32_t)s + 1};
    rp_replay_args ra = {.args = &sa, .args_size = sizeof sa};
    rp_event done;
    RP_CHECK(rp_replay(ex, &ra, &done));
    RP_CHECK(rp_event_wait(rt, done, -1));
    rp_event_release(rt, done);
    lsum += lr[s];
    float l;
    RP_CHECK(rp_gpt_batch_loss(m, &l));
    cr_assert(fabsf(l - loss[s]) <= REF_TOL * fabsf(loss[s]),
              "step %u: loss %.9g, PyTorch %.9g", s + 1, (double)l,
              (double)loss[s]);
    if (s == 0) {
      float *gr = run_read(&r, RP_GPT_GRAD);
      double gw = compare(m, gr, grad, NULL, REF_TOL, 0, "gradient, tp 2");
      cr_log_info("tp 2: gradients within %.3g of PyTorch", gw);
      free(gr);
    }
  }
  float *wt = run_read(&r, RP_GPT_WEIGHT);
  compare(m, wt, after, grad, REF_TOL, 2 * lsum, "weight after steps, tp 2");
  free(wt);
  run_fini(&r);
  free(buf);
}

Test(gpt_tp_backends, pytorch_fixture_at_tp2) {
  pytorch_fixture_at_tp2("gpt_tiny.bin");
}

/* Head size 5, two heads per slice, context 3, batch 3, vocabulary 7. */
Test(gpt_tp_backends, pytorch_odd_shapes_fixture_at_tp2) {
  pytorch_fixture_at_tp2("gpt_odd.bin");
}

/* ---- the recorded step: parallel operators, overlap, memory ---- */

static int find_op(rp_graph *g, const char *name, rp_op_id from) {
  for (rp_op_id i = from; i < rp_graph_op_count(g); i++) {
    const char *n = rp_graph_op_name(g, i);
    if (n && !strcmp(n, name))
      return (int)i;
  }
  return -1;
}

/* Every kind of parallel operator is a node of the step: REPLICATE (the
 * LayerNorm outputs, and the gathered sums of squares back to every
 * processor; backward: the slices' input gradients summed), REDUCTION (the
 * partial projections; backward: the output gradient to every slice),
 * COMBINE (the processors' sums of squares at home) and, with data groups,
 * REPARTITION (the batch over the groups); each copy of an operator carries
 * its name. The optimizer runs on the shards: no weight or gradient of a
 * split tensor crosses processors at tp 2 (at tp 2 x dp 2 only group 0's
 * weight shards go to group 1's slices, one copy each). */
Test(gpt_tp_backends, the_step_has_every_parallel_operator) {
  run r;
  run_init(&r, 4, 2, 2);
  rp_graph *g;
  RP_CHECK(rp_gpt_record(r.m, &g));
  const char *names[] = {"h0.ln1.replicate",        "h0.ln2.replicate",
                         "h0.attn.proj.reduce",     "h1.mlp.proj.reduce",
                         "h1.mlp.proj.reduce.bwd",  "h1.ln2.replicate.bwd",
                         "h0.attn.proj.reduce.bwd", "h0.ln1.replicate.bwd",
                         "grad.sumsq.combine",      "grad.sumsq.replicate"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int at = find_op(g, names[i], 0);
    cr_assert(at >= 0, "no op named %s", names[i]);
    int second = find_op(g, names[i], (rp_op_id)at + 1);
    cr_assert(second == at + 1, "%s: one copy per slice (2), adjacent",
              names[i]);
  }
  cr_assert_lt(find_op(g, "h0.ln1.replicate", 0),
               find_op(g, "h0.attn.qkv.t1", 0));
  const char *gone[] = {"h0.attn.qkv.w.repartition", "h0.attn.qkv.dW.combine",
                        "h1.mlp.fc.db.combine", "h1.mlp.proj.w.repartition"};
  for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
    cr_assert_eq(find_op(g, gone[i], 0), -1, "%s: a split tensor moved",
                 gone[i]);
  /* sums of squares, gathered, then each processor's AdamW */
  int c = find_op(g, "grad.sumsq.combine", 0);
  int r0 = find_op(g, "grad.sumsq.replicate", 0);
  int a0 = find_op(g, "adamw.t0", 0), a1 = find_op(g, "adamw.t1", 0);
  int s1 = find_op(g, "grad.sumsq.t1", 0);
  cr_assert(c >= 0 && r0 >= 0 && a0 >= 0 && a1 >= 0 && s1 >= 0);
  cr_assert(rp_graph_depends(g, (rp_op_id)s1, (rp_op_id)c + 1));
  cr_assert(rp_graph_depends(g, (rp_op_id)r0, (rp_op_id)a0));
  cr_assert(rp_graph_depends(g, (rp_op_id)r0 + 1, (rp_op_id)a1));
  cr_assert_eq(find_op(g, "adamw", 0), -1, "one AdamW per processor");
  RP_CHECK(rp_graph_destroy(g));
  run_fini(&r);

  run_init(&r, 4, 4, 2);
  RP_CHECK(rp_gpt_record(r.m, &g));
  int sp = find_op(g, "batch.x.split", 0);
  cr_assert(sp >= 0 && find_op(g, "batch.x.split", (rp_op_id)sp + 1) == sp + 1,
            "the batch over 2 groups (REPARTITION)");
  for (uint32_t t = 0; t < 2; t++) {
    char n[64];
    snprintf(n, sizeof n, "h1.mlp.fc.w.t%u.replicate", t);
    int at = find_op(g, n, 0);
    cr_assert(at >= 0, "no op named %s", n);
    cr_assert_eq(find_op(g, n, (rp_op_id)at + 1), -1, "%s: one copy", n);
  }
  RP_CHECK(rp_graph_destroy(g));
  run_fini(&r);
}

/* A shard's reduction starts when its partial result is ready: the copy
 * of slice 0's partial projection (the reduction's first copy) depends on
 * slice 0's projection and not on slice 1's, so it overlaps slice 1's
 * work; slice 1's copy (the sum) depends on slice 1's projection. The
 * same holds for the backward's gradient sums (REPLICATE backward). */
Test(gpt_tp_backends, a_slices_reduction_waits_for_that_slice_only) {
  run r;
  run_init(&r, 4, 2, 2);
  rp_graph *g;
  RP_CHECK(rp_gpt_record(r.m, &g));
  const char *pairs[][3] = {
      {"h0.attn.proj.reduce", "h0.attn.proj.t0", "h0.attn.proj.t1"},
      {"h1.mlp.proj.reduce", "h1.mlp.proj.t0", "h1.mlp.proj.t1"},
      {"h1.ln2.replicate.bwd", "h1.mlp.fc.bwd.t0", "h1.mlp.fc.bwd.t1"},
      {"h0.ln1.replicate.bwd", "h0.attn.qkv.bwd.t0", "h0.attn.qkv.bwd.t1"}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    int c0 = find_op(g, pairs[i][0], 0);
    int p0 = find_op(g, pairs[i][1], 0), p1 = find_op(g, pairs[i][2], 0);
    cr_assert(c0 >= 0 && p0 >= 0 && p1 >= 0, "%s: ops missing", pairs[i][0]);
    int c1 = c0 + 1;
    cr_assert(rp_graph_depends(g, (rp_op_id)p0, (rp_op_id)c0),
              "%s: slice 0's copy does not follow %s", pairs[i][0],
              pairs[i][1]);
    cr_assert(!rp_graph_depends(g, (rp_op_id)p1, (rp_op_id)c0),
              "%s: slice 0's copy waits for %s", pairs[i][0], pairs[i][2]);
    cr_assert(rp_graph_depends(g, (rp_op_id)p1, (rp_op_id)c1),
              "%s: slice 1's copy does not follow %s", pairs[i][0],
              pairs[i][2]);
    cr_assert(!rp_graph_depends(g, (rp_op_id)c1, (rp_op_id)p0) &&
                  !rp_graph_depends(g, (rp_op_id)c0, (rp_op_id)p1),
              "%s: a copy precedes a slice's producer", pairs[i][0]);
  }
  RP_CHECK(rp_graph_destroy(g));
  run_fini(&r);
}

/* Each processor holds 1/tp of the split matrices' state (their shards
 * at global offsets: weights, gradients and both AdamW moments: the
 * optimizer is sharded like the weights); the home processor also holds
 * the whole state of the tensors not split (LayerNorms, embeddings,
 * biases of the row-parallel projections). */
Test(gpt_tp_backends, processors_hold_their_shards) {
  for (uint32_t tp = 2; tp <= 4; tp += 2) {
    run r;
    run_init(&r, 4, tp, tp);
    uint64_t split = 0, all = 0;
    for (uint32_t i = 0; i < rp_gpt_param_tensors(r.m); i++) {
      const rp_gpt_param_info *pi = rp_gpt_param(r.m, i);
      uint64_t e = (uint64_t)pi->rows * pi->cols;
      all += e;
      const char *n = pi->name;
      size_t L = strlen(n);
      int is = strstr(n, "attn.qkv.") || strstr(n, "mlp.fc.") ||
               (L > 6 && !strcmp(n + L - 6, "proj.w"));
      split += is ? e : 0;
    }
    uint64_t total, state;
    RP_CHECK(rp_gpt_proc_bytes(r.m, 0, &total, &state));
    cr_assert_eq(state, 4 * 4 * (all - split) + 4 * 4 * split / tp,
                 "tp %u home: %llu", tp, (unsigned long long)state);
    for (uint32_t p = 1; p < tp; p++) {
      RP_CHECK(rp_gpt_proc_bytes(r.m, p, &total, &state));
      cr_assert_eq(state, 4 * 4 * split / tp, "tp %u processor %u: %llu", tp, p,
                   (unsigned long long)state);
      cr_assert_gt(total, state);
    }
    cr_assert_eq(rp_gpt_proc_count(r.m), tp); /* one process: procs */
    cr_assert_eq(rp_gpt_proc_bytes(r.m, tp, &total, &state), RP_EINVAL);
    run_fini(&r);
  }
}

Test(gpt_tp, bad_tensor_parallel_configs_are_refused) {
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.procs = 3;
  c.tp = 2;
  cr_assert_eq(rp_gpt_config_check(&c), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "not a multiple of tp"), "%s",
            rp_error_detail());
  c.procs = 8;
  c.tp = 8; /* 4 heads */
  cr_assert_eq(rp_gpt_config_check(&c), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "heads 4"), "%s", rp_error_detail());
  c.procs = 4;
  c.tp = 2;
  c.batch = 1;
  cr_assert_eq(rp_gpt_config_check(&c), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "data groups"), "%s", rp_error_detail());
  c.batch = 2;
  cr_assert_eq(rp_gpt_config_check(&c), RP_OK);
  /* across ranks (dist, tp above procs): tp a multiple of procs, the
   * ranks x procs processors a multiple of tp, at most the maximum */
  c.dist = 1;
  c.procs = 1;
  c.tp = 2;
  cr_assert_eq(rp_gpt_config_check(&c), RP_OK);
  c.procs = 2;
  c.tp = 3;
  c.heads = 3;
  c.width = 129;
  cr_assert_eq(rp_gpt_config_check(&c), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "tp 3 is not a multiple of procs 2"),
            "%s", rp_error_detail());
  /* resume: which layouts add the data-parallel parts in the same order */
  const struct {
    rp_gpt_layout a, b;
    int alike;
  } lay[] = {
      {{1, 1, 1}, {1, 1, 0}, 1}, /* tp 0 is 1 */
      {{2, 1, 1}, {1, 2, 1}, 1}, /* 2 parts: one addition */
      {{1, 2, 2}, {2, 1, 2}, 1}, /* 1 part */
      {{2, 2, 2}, {4, 1, 2}, 1}, /* 2 parts of tp 2 */
      {{2, 2, 1}, {2, 2, 1}, 1}, /* the same layout, 4 parts */
      {{4, 1, 1}, {2, 2, 1}, 0}, /* 4 parts: a+b+c+d vs (a+b)+(c+d) */
      {{3, 1, 1}, {1, 3, 1}, 0}, /* 3 parts: MPI's order */
      {{1, 1, 1}, {2, 1, 1}, 0}, /* other parts */
      {{2, 1, 2}, {2, 1, 1}, 0}, /* other tp */
      /* tp across ranks (tp above procs): the operators add the parts in
       * part order, as one process does, whatever their number */
      {{1, 6, 2}, {6, 1, 2}, 1},  /* 3 groups of 2 ranks */
      {{2, 6, 4}, {12, 1, 4}, 1}, /* 3 groups of 2 ranks x 2 */
      {{1, 16, 4}, {2, 8, 4}, 1}, /* 4 groups, both across ranks */
      {{2, 3, 2}, {6, 1, 2}, 0},  /* 3 parts all-reduced across ranks */
      {{2, 3, 2}, {1, 6, 2}, 0},
  };
  for (size_t i = 0; i < sizeof lay / sizeof lay[0]; i++) {
    cr_assert_eq(rp_gpt_layouts_sum_alike(lay[i].a, lay[i].b), lay[i].alike,
                 "layout pair %zu", i);
    cr_assert_eq(rp_gpt_layouts_sum_alike(lay[i].b, lay[i].a), lay[i].alike,
                 "layout pair %zu, swapped", i);
  }
  cr_assert_eq(rp_gpt_split_check(8, 2, 1, 2), RP_OK);
  cr_assert_eq(rp_gpt_split_check(8, 4, 1, 2), RP_OK);
  cr_assert_eq(rp_gpt_split_check(8, 2, 2, 4), RP_OK);
  cr_assert_eq(rp_gpt_split_check(8, 3, 1, 2), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(),
                   "tp 2 across ranks does not divide the 3 ranks x 1 "
                   "processor (3 in all) into whole groups"),
            "%s", rp_error_detail());
  cr_assert_eq(rp_gpt_split_check(8, 2, 2, 3), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "tp 3 across ranks is not a multiple "
                                      "of the 2 processors per rank"),
            "%s", rp_error_detail());
  /* each condition holds but the total: the message names the total */
  cr_assert_eq(rp_gpt_split_check(18, 18, 1, 2), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "tp 2 across ranks: 18 ranks x 1 "
                                      "processor is 18 processors in all (at "
                                      "most 16)"),
            "%s", rp_error_detail());
  cr_assert_eq(rp_gpt_split_check(1, 4, 1, 2), RP_ERANGE); /* 2 groups */
  cr_assert(strstr(rp_error_detail(), "batch 1 cannot be split over 2 data "
                                      "groups of --tp across ranks (the last "
                                      "gets an empty shard)"),
            "%s", rp_error_detail());
}

/* Evaluation (forward only, over the groups) and greedy sampling (the
 * forward of group 0, the weights repartitioned first) at tp 2 agree with
 * one processor's. */
Test(gpt_tp_backends, evaluate_and_sample_match_one_processor) {
  run one, two;
  run_init(&one, 4, 1, 1);
  run_init(&two, 4, 2, 2);
  rp_gpt_step_args a = {0, 1e-2f, 1};
  RP_CHECK(rp_gpt_step(one.m, &a));
  RP_CHECK(rp_gpt_step(two.m, &a));
  RP_CHECK(rp_runtime_drain(one.rt));
  RP_CHECK(rp_runtime_drain(two.rt));
  size_t n = (size_t)4 * 16;
  int32_t x[64], y[64];
  for (size_t i = 0; i < n; i++) {
    x[i] = (int32_t)((i * 7) % 64);
    y[i] = (int32_t)((i * 5 + 1) % 64);
  }
  double l1, l2;
  RP_CHECK(rp_gpt_evaluate(one.m, x, y, 1, &l1));
  RP_CHECK(rp_gpt_evaluate(two.m, x, y, 1, &l2));
  cr_assert(fabs(l1 - l2) <= TP_TOL * fabs(l1), "evaluate %.9g vs %.9g", l1,
            l2);
  int32_t prompt[3] = {1, 2, 3}, o1[11], o2[11];
  RP_CHECK(rp_gpt_sample(one.m, prompt, 3, 8,
                         &(rp_gpt_sampling){.temperature = 0, .seed = 5}, o1));
  RP_CHECK(rp_gpt_sample(two.m, prompt, 3, 8,
                         &(rp_gpt_sampling){.temperature = 0, .seed = 5}, o2));
  cr_assert(!memcmp(o1, o2, sizeof o1), "greedy samples differ");
  run_fini(&one);
  run_fini(&two);
}

static void run_write(run *r, rp_gpt_slot s, const float *in) {
  for (uint32_t i = 0; i < rp_gpt_param_tensors(r->m); i++) {
    const rp_gpt_param_info *pi = rp_gpt_param(r->m, i);
    size_t k = (size_t)pi->rows * pi->cols;
    RP_CHECK(rp_gpt_tensor_write(r->m, i, s, in, k));
    in += k;
  }
}

/* Greedy decoding by replay (rp_gpt_generate): n tokens after the prompt
 * into out, the last decode step's logits into logits. */
static void run_generate(run *r, int32_t *out, uint32_t n, float *logits) {
  rp_graph *g;
  rp_exec *ex;
  RP_CHECK(rp_gpt_decode_record(r->m, &g));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  int32_t prompt[3] = {5, 1, 9};
  RP_CHECK(rp_gpt_generate(r->m, ex, prompt, 3, n,
                           &(rp_gpt_sampling){.temperature = 0, .seed = 1},
                           out));
  RP_CHECK(rp_instance_read(r->rt, rp_gpt_decode_logits(r->m), logits,
                            rp_gpt_cfg(r->m)->vocab * sizeof *logits));
  RP_CHECK(rp_exec_destroy(ex));
}

/* The sharded state (weights, gradients, both moments) read whole from tp
 * 2 moves into one processor and into tp 2 x dp 2 and reads back the same
 * bits; the next step from it agrees with tp 2's (the moments landed in
 * their shards' places); greedy decoding at tp 2 (the split weights
 * gathered into the decode step's copies) gives one processor's tokens and
 * logits bit for bit. */
Test(gpt_tp_backends, sharded_state_moves_between_layouts) {
  run two, one, quad;
  run_init(&two, 4, 2, 2);
  for (uint32_t k = 0; k < 3; k++)
    run_step(&two, k, 1);
  run_init(&one, 4, 1, 1);
  run_init(&quad, 4, 4, 2);
  size_t n = rp_gpt_param_count(two.m);
  float *st[4];
  for (int s = 0; s < 4; s++) {
    st[s] = run_read(&two, (rp_gpt_slot)s);
    run_write(&one, (rp_gpt_slot)s, st[s]);
    run_write(&quad, (rp_gpt_slot)s, st[s]);
    float *a = run_read(&one, (rp_gpt_slot)s), *b = run_read(&quad, s);
    cr_assert_eq(first_diff(a, st[s], n), n, "slot %d into one processor", s);
    cr_assert_eq(first_diff(b, st[s], n), n, "slot %d into tp 2 x dp 2", s);
    free(a), free(b);
  }
  run_step(&two, 3, 0);
  run_step(&one, 3, 0);
  float n1, n2; /* the clipping norm: the processors' sums, gathered */
  RP_CHECK(rp_gpt_grad_norm(one.m, &n1));
  RP_CHECK(rp_gpt_grad_norm(two.m, &n2));
  cr_assert(n1 > 0 && fabsf(n1 - n2) <= TP_TOL * n1, "norm %.9g vs %.9g",
            (double)n2, (double)n1);
  float *w2 = run_read(&two, RP_GPT_WEIGHT),
        *w1 = run_read(&one, RP_GPT_WEIGHT);
  float *g1 = run_read(&one, RP_GPT_GRAD);
  compare(one.m, w2, w1, g1, STEPS_TOL, 2e-3, "weights one step on");
  free(w2), free(w1), free(g1);
  /* the same weights in both again, then decode */
  run_write(&one, RP_GPT_WEIGHT, st[0]);
  run_write(&two, RP_GPT_WEIGHT, st[0]);
  uint32_t V = rp_gpt_cfg(one.m)->vocab;
  int32_t t1[15], t2[15];
  float *l1 = malloc(V * sizeof *l1), *l2 = malloc(V * sizeof *l2);
  run_generate(&one, t1, 12, l1);
  run_generate(&two, t2, 12, l2);
  cr_assert(!memcmp(t1, t2, sizeof t1), "greedy tokens differ at tp 2");
  cr_assert_eq(first_diff(l1, l2, V), V, "decode logits differ at tp 2");
  for (int s = 0; s < 4; s++)
    free(st[s]);
  free(l1), free(l2);
  run_fini(&one);
  run_fini(&two);
  run_fini(&quad);
}

/* Too few processors for procs = 4 (tp 2 x 2 groups): RP_EPROC naming
 * them, nothing created (the runtime's destroy finds nothing left). */
Test(gpt_tp, too_few_processors_are_refused) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CPU, 2);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.procs = 4;
  c.tp = 2;
  rp_gpt *m = NULL;
  cr_assert_eq(rp_gpt_create(rt, &k, &c, &m), RP_EPROC);
  cr_assert_null(m);
  cr_assert(strstr(rp_error_detail(), "4 CPU processors wanted"), "%s",
            rp_error_detail());
  th_destroy(rt);
}

/* Tensor parallelism across ranks on a runtime of one rank (no
 * communicator): tp 2 over 1 processor per rank needs 2 ranks; refused by
 * rp_gpt_create with the rule, nothing created (ASan: nothing leaks). */
Test(gpt_tp, tp_across_one_rank_is_refused) {
  rp_runtime *rt = th_runtime(RP_BACKEND_CPU, 2);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.dist = 1;
  c.procs = 1;
  c.tp = 2;
  cr_assert_eq(rp_gpt_config_check(&c), RP_OK); /* ranks unknown there */
  rp_gpt *m = NULL;
  cr_assert_eq(rp_gpt_create(rt, &k, &c, &m), RP_EINVAL);
  cr_assert_null(m);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_create: tp 2 across ranks"), "%s",
            rp_error_detail());
  th_destroy(rt);
}

/* ---- the trace: the order of a replay's events ---- */

typedef struct span {
  double start, end; /* us; end < 0: not seen */
} span;

/* The span of op `op` in replay r of a trace file (one event per line, as
 * rp_exec_trace_write writes them; not its "wait" event). */
static span trace_span(const char *trace, int op, int r) {
  span s = {0, -1};
  char want[64];
  snprintf(want, sizeof want, "\"args\": {\"op\": %d, ", op);
  for (const char *l = trace; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : l) {
    const char *e = strchr(l, '\n'), *a = strstr(l, want);
    const char *wait = "{\"name\": \"wait\"", *b = strchr(l, '{');
    if (!a || (e && a > e) || !b || !strncmp(b, wait, strlen(wait)))
      continue; /* a wait before the op is not the op */
    const char *rp = strstr(a, "\"replay\": ");
    if (!rp || atoi(rp + 10) != r)
      continue;
    const char *ts = strstr(l, "\"ts\": "), *du = strstr(l, "\"dur\": ");
    cr_assert(ts && du && ts < a && du < a, "event of op %d: no ts/dur", op);
    s.start = strtod(ts + 6, NULL);
    s.end = s.start + strtod(du + 7, NULL);
    return s;
  }
  return s;
}

/* In every traced replay: slice t's copy of a REDUCTION starts after slice
 * t's partial projection ends, slice 1's copy (the sum) after slice 0's
 * copy; whether slice 0's copy ran while slice 1 still computed (the
 * overlap) depends on the schedule, and is logged. */
Test(gpt_tp, trace_orders_each_slices_copy_after_its_producer) {
  th_tmpdir_make("/tmp/rp_gpt_tp_XXXXXX");
  run r;
  run_init(&r, 4, 2, 2);
  rp_graph *g;
  RP_CHECK(rp_gpt_record(r.m, &g));
  RP_CHECK(rp_instantiate(g, NULL, &r.ex));
  const uint32_t replays = 4;
  RP_CHECK(rp_exec_trace_start(r.ex, replays));
  for (uint32_t k = 0; k < replays; k++) {
    rp_gpt_step_args a = {k, 1e-3f, (int32_t)k + 1};
    rp_replay_args ra = {.args = &a, .args_size = sizeof a};
    rp_event done;
    RP_CHECK(rp_replay(r.ex, &ra, &done));
    RP_CHECK(rp_event_wait(r.rt, done, -1));
    rp_event_release(r.rt, done);
  }
  const char *path = th_tmp_path("trace.json");
  RP_CHECK(rp_exec_trace_write(r.ex, path));
  char *trace = th_read_all(path, NULL);
  const char *ops[][3] = {
      {"h0.attn.proj.reduce", "h0.attn.proj.t0", "h0.attn.proj.t1"},
      {"h1.mlp.proj.reduce", "h1.mlp.proj.t0", "h1.mlp.proj.t1"},
      {"h0.ln1.replicate.bwd", "h0.attn.qkv.bwd.t0", "h0.attn.qkv.bwd.t1"}};
  const double eps = 0.002; /* the file's 1 ns resolution, twice */
  uint32_t overlapped = 0, seen = 0;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    int c0 = find_op(g, ops[i][0], 0);
    int p0 = find_op(g, ops[i][1], 0), p1 = find_op(g, ops[i][2], 0);
    cr_assert(c0 >= 0 && p0 >= 0 && p1 >= 0, "%s: ops missing", ops[i][0]);
    for (int k = 0; k < (int)replays; k++) {
      span s0 = trace_span(trace, c0, k), s1 = trace_span(trace, c0 + 1, k);
      span q0 = trace_span(trace, p0, k), q1 = trace_span(trace, p1, k);
      cr_assert(s0.end >= 0 && s1.end >= 0 && q0.end >= 0 && q1.end >= 0,
                "%s: replay %d: events missing", ops[i][0], k);
      cr_assert_geq(s0.start + eps, q0.end,
                    "%s replay %d: slice 0's copy "
                    "starts before its producer ends",
                    ops[i][0], k);
      cr_assert_geq(s1.start + eps, q1.end,
                    "%s replay %d: slice 1's copy "
                    "starts before its producer ends",
                    ops[i][0], k);
      cr_assert_geq(s1.start + eps, s0.end,
                    "%s replay %d: the sum starts "
                    "before the first copy ends",
                    ops[i][0], k);
      overlapped += s0.start < q1.end;
      seen++;
    }
  }
  cr_log_info("slice 0's copy started before slice 1's producer ended in %u "
              "of %u reductions",
              overlapped, seen);
  free(trace);
  RP_CHECK(rp_graph_destroy(g));
  run_fini(&r);
  th_tmpdir_remove();
}
