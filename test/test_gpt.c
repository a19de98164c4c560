/* test/test_gpt.c — the GPT (train/gpt.h) against PyTorch and against
 * itself. The gpt_backends suite also builds as test_gpt_cuda (the CUDA
 * backend; it skips without a device): test/helpers.h.
 *
 * The reference: test/fixtures/gpt_tiny.bin, written by
 * tools/gpt_fixture.py (float64 PyTorch from float32 initial weights; see
 * there): the loss, every gradient and the parameters after 3 AdamW steps
 * with clipping, for 2 layers, 2 heads, width 32, context 16, batch 4,
 * vocabulary 64; and test/fixtures/gpt_odd.bin, the same for shapes the
 * tiny one has not: 1 layer, 4 heads of 5 (width 20), context 3, batch 3,
 * vocabulary 7.
 *
 * Bounds (relative to the largest magnitude of the tensor compared):
 *  - loss and gradients: 1e-4 (float32 sums of at most a few thousand
 *    terms against an exact reference; measured 4.5e-7 on the CPU);
 *  - parameters after 3 steps: 1e-4 likewise (measured 9.1e-6), but for
 *    null-gradient elements (see NULL_GRAD below), held to an absolute
 *    bound of twice the sum of the learning rates;
 *  - --procs 2 against 1: loss and gradients 1e-5 (only the order of
 *    float sums differs); weights after 3 steps 1e-4 (see the test);
 *  - replay against eager, and a resumed run against an uninterrupted
 *    one: bitwise (the kernels are deterministic). */
#include "helpers.h"
#include "train/ckpt.h"
#include "train/gpt.h"
#include "train/mlp.h"

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/resource.h>

#define REF_TOL 1e-4
#define PROCS_TOL 1e-5
#define CUDA_TOL 1e-4

/* ---- the fixture ---- */

typedef struct fixture {
  uint32_t L, NH, C, T, V, B, steps, tensors;
  float beta1, beta2, eps, wd, max_norm;
  float lr[8], loss[8];
  int32_t *x, *y;
  float *init, *grad, *after; /* every tensor, in table order */
  size_t n;                   /* floats per set */
  char *buf;
} fixture;

/* RP_TEST_SOURCE_DIR (test/CMakeLists.txt) is test/'s absolute path: the
 * binary finds its fixtures from any working directory. */
static const char *fixture_path(const char *name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/fixtures/%s", RP_TEST_SOURCE_DIR, name);
  return path;
}

/* test/fixtures/NAME */
static void fx_load_file(fixture *fx, const char *name) {
  memset(fx, 0, sizeof *fx);
  size_t len;
  fx->buf = th_read_all(fixture_path(name), &len);
  cr_assert_not_null(fx->buf, "cannot read %s", fixture_path(name));
  cr_assert(len > 60 && !memcmp(fx->buf, "RPGPTFX1", 8), "not a fixture");
  const char *p = fx->buf + 8;
  uint32_t h[8];
  memcpy(h, p, sizeof h);
  p += sizeof h;
  fx->L = h[0], fx->NH = h[1], fx->C = h[2], fx->T = h[3], fx->V = h[4];
  fx->B = h[5], fx->steps = h[6], fx->tensors = h[7];
  cr_assert(fx->steps >= 1 && fx->steps <= 8);
  float a[5];
  memcpy(a, p, sizeof a);
  p += sizeof a;
  fx->beta1 = a[0], fx->beta2 = a[1], fx->eps = a[2], fx->wd = a[3];
  fx->max_norm = a[4];
  memcpy(fx->lr, p, fx->steps * 4);
  p += fx->steps * 4;
  size_t bt = (size_t)fx->B * fx->T;
  fx->x = (int32_t *)(void *)p; /* the file's words are 4-byte aligned */
  p += bt * 4;
  fx->y = (int32_t *)(void *)p;
  p += bt * 4;
  memcpy(fx->loss, p, fx->steps * 4);
  p += fx->steps * 4;
  size_t rest = len - (size_t)(p - fx->buf);
  cr_assert(rest % 12 == 0, "fixture tail %zu bytes", rest);
  fx->n = rest / 12;
  fx->init = (float *)(void *)p;
  fx->grad = fx->init + fx->n;
  fx->after = fx->grad + fx->n;
}

static void fx_load(fixture *fx) {
  fx_load_file(fx, "gpt_tiny.bin");
}

static void fx_free(fixture *fx) {
  free(fx->buf);
}

/* ---- a model of the fixture's config ---- */

typedef struct tg {
  rp_runtime *rt;
  rp_gpt *m;
  rp_exec *ex;
} tg;

static void tg_init(tg *t, const fixture *fx, rp_backend_kind kind,
                    uint32_t procs, uint32_t ring) {
  memset(t, 0, sizeof *t);
  t->rt = th_runtime_procs(kind, procs); /* skips without a CUDA device */
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(t->rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = fx->L;
  c.heads = fx->NH;
  c.width = fx->C;
  c.context = fx->T;
  c.vocab = fx->V;
  c.batch = fx->B;
  c.procs = procs;
  c.ring = ring;
  c.beta1 = fx->beta1;
  c.beta2 = fx->beta2;
  c.eps = fx->eps;
  c.weight_decay = fx->wd;
  c.max_norm = fx->max_norm;
  RP_CHECK(rp_gpt_create(t->rt, &k, &c, &t->m));
  cr_assert_eq(rp_gpt_param_tensors(t->m), fx->tensors);
  cr_assert_eq(rp_gpt_param_count(t->m), fx->n);
  const float *w = fx->init;
  for (uint32_t i = 0; i < fx->tensors; i++) {
    const rp_gpt_param_info *p = rp_gpt_param(t->m, i);
    size_t n = (size_t)p->rows * p->cols;
    RP_CHECK(rp_gpt_tensor_write(t->m, i, RP_GPT_WEIGHT, w, n));
    w += n;
  }
  RP_CHECK(rp_gpt_write_batches(t->m, fx->x, fx->y, 1));
}

static void tg_fini(tg *t) {
  RP_CHECK(rp_exec_destroy(t->ex));
  RP_CHECK(rp_gpt_destroy(t->m));
  th_destroy(t->rt);
}

/* Step k (0-based) of the fixture: eagerly, or by replaying the recorded
 * step (recorded at the first call). */
static void tg_step(tg *t, const fixture *fx, uint32_t k, int replay) {
  rp_gpt_step_args a = {0, fx->lr[k], (int32_t)k + 1};
  if (!replay) {
    RP_CHECK(rp_gpt_step(t->m, &a));
    RP_CHECK(rp_runtime_drain(t->rt));
    return;
  }
  if (!t->ex) {
    rp_graph *g;
    RP_CHECK(rp_gpt_record(t->m, &g));
    RP_CHECK(rp_instantiate(g, NULL, &t->ex));
    RP_CHECK(rp_graph_destroy(g));
  }
  rp_replay_args ra = {.args = &a, .args_size = sizeof a};
  rp_event done;
  RP_CHECK(rp_replay(t->ex, &ra, &done));
  rp_status st = rp_event_wait(t->rt, done, -1);
  rp_event_release(t->rt, done);
  cr_assert_eq(st, RP_OK, "replay %u: %s", k, rp_exec_error_detail(t->ex));
}

static float *tg_read(tg *t, rp_gpt_slot s) {
  size_t n = rp_gpt_param_count(t->m);
  float *out = malloc(n * sizeof *out), *p = out;
  cr_assert_not_null(out);
  for (uint32_t i = 0; i < rp_gpt_param_tensors(t->m); i++) {
    const rp_gpt_param_info *pi = rp_gpt_param(t->m, i);
    size_t k = (size_t)pi->rows * pi->cols;
    RP_CHECK(rp_gpt_tensor_read(t->m, i, s, p, k));
    p += k;
  }
  return out;
}

/* Null-gradient elements: those whose exact gradient (the fixture's) is
 * below NULL_GRAD times the largest of their tensor. The key bias is one
 * (softmax ignores a shift common to a row's scores, so its exact
 * gradient is zero and a float32 one is rounding noise); AdamW turns any
 * nonzero noise into an update of about lr per step, with a random sign.
 * After steps such elements are held to |diff| <= NULL_BOUND (twice the
 * sum of the fixture's learning rates): their updates are noise by
 * construction. Every other element meets the relative bound. */
#define NULL_GRAD 1e-6
static double null_bound(const fixture *fx) {
  double s = 0;
  for (uint32_t k = 0; k < fx->steps; k++)
    s += fx->lr[k];
  return 2 * s;
}

/* Every tensor of got within tol of want, relative to the largest
 * magnitude of want's tensor (null-gradient elements of `grad`, when not
 * NULL, within nb absolutely); returns the worst ratio seen. */
static double check_tensors_null(tg *t, const float *got, const float *want,
                                 double tol, const char *what,
                                 const float *grad, double nb);
static double check_tensors(tg *t, const float *got, const float *want,
                            double tol, const char *what) {
  return check_tensors_null(t, got, want, tol, what, NULL, 0);
}

static double check_tensors_null(tg *t, const float *got, const float *want,
                                 double tol, const char *what,
                                 const float *grad, double nb) {
  double worst = 0;
  uint32_t nulls = 0;
  for (uint32_t i = 0; i < rp_gpt_param_tensors(t->m); i++) {
    const rp_gpt_param_info *pi = rp_gpt_param(t->m, i);
    size_t k = (size_t)pi->rows * pi->cols;
    double scale = 0, diff = 0, gmax = 0;
    size_t at = 0;
    for (size_t j = 0; j < k; j++)
      scale = fmax(scale, fabs((double)want[j]));
    for (size_t j = 0; grad && j < k; j++)
      gmax = fmax(gmax, fabs((double)grad[j]));
    for (size_t j = 0; j < k; j++) {
      double d = fabs((double)got[j] - (double)want[j]);
      if (grad && fabs((double)grad[j]) <= NULL_GRAD * gmax) {
        nulls++;
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
  if (grad || nb > 0)
    cr_log_info("%s: %u null-gradient elements", what, nulls);
  return worst;
}

/* ---- against PyTorch ---- */

static void against_pytorch_on(const char *name, uint32_t procs, int replay) {
  fixture fx;
  fx_load_file(&fx, name);
  tg t;
  tg_init(&t, &fx, TH_BACKEND, procs, 1);
  tg_step(&t, &fx, 0, replay);
  float loss;
  RP_CHECK(rp_gpt_batch_loss(t.m, &loss));
  cr_assert(fabs(loss - fx.loss[0]) <= REF_TOL * fabs(fx.loss[0]),
            "loss %.9g, PyTorch %.9g", (double)loss, (double)fx.loss[0]);
  float *g = tg_read(&t, RP_GPT_GRAD);
  double gw = check_tensors(&t, g, fx.grad, REF_TOL, "gradient");
  free(g);
  for (uint32_t k = 1; k < fx.steps; k++) {
    tg_step(&t, &fx, k, replay);
    RP_CHECK(rp_gpt_batch_loss(t.m, &loss));
    cr_assert(fabs(loss - fx.loss[k]) <= REF_TOL * fabs(fx.loss[k]),
              "step %u: loss %.9g, PyTorch %.9g", k + 1, (double)loss,
              (double)fx.loss[k]);
  }
  float *w = tg_read(&t, RP_GPT_WEIGHT);
  double ww = check_tensors_null(&t, w, fx.after, REF_TOL, "weight after steps",
                                 fx.grad, null_bound(&fx));
  cr_log_info("%s %s %s on %u: gradients within %.3g, weights after %u "
              "steps within %.3g of PyTorch (relative)",
              name, TH_BACKEND_NAME, replay ? "replay" : "eager", procs, gw,
              fx.steps, ww);
  free(w);
  tg_fini(&t);
  fx_free(&fx);
}

static void against_pytorch(int replay) {
  against_pytorch_on("gpt_tiny.bin", 1, replay);
}

Test(gpt_backends, eager_loss_gradients_and_adamw_steps_match_pytorch) {
  against_pytorch(0);
}

Test(gpt_backends, replayed_loss_gradients_and_adamw_steps_match_pytorch) {
  against_pytorch(1);
}

/* Head size 5, context 3, batch 3 (split 2 + 1 over two processors),
 * vocabulary 7: eager and replayed, on one and two processors. */
Test(gpt_backends, odd_shapes_match_pytorch_eager_and_replayed) {
  for (uint32_t procs = 1; procs <= 2; procs++)
    for (int replay = 0; replay <= 1; replay++)
      against_pytorch_on("gpt_odd.bin", procs, replay);
}

/* The fixture's steps on P processors, eagerly or replayed: the weights
 * (and, when grad is not NULL, the first step's gradients). */
static float *run_fixture_g(const fixture *fx, rp_backend_kind kind,
                            uint32_t procs, int replay, float *last_loss,
                            float **grad) {
  tg t;
  tg_init(&t, fx, kind, procs, 1);
  for (uint32_t k = 0; k < fx->steps; k++) {
    tg_step(&t, fx, k, replay);
    if (k == 0 && grad)
      *grad = tg_read(&t, RP_GPT_GRAD);
  }
  RP_CHECK(rp_gpt_batch_loss(t.m, last_loss));
  float *w = tg_read(&t, RP_GPT_WEIGHT);
  tg_fini(&t);
  return w;
}

static float *run_fixture(const fixture *fx, rp_backend_kind kind,
                          uint32_t procs, int replay, float *last_loss) {
  return run_fixture_g(fx, kind, procs, replay, last_loss, NULL);
}

Test(gpt_backends, replay_is_bitwise_equal_to_eager) {
  fixture fx;
  fx_load(&fx);
  for (uint32_t procs = 1; procs <= 2; procs++) {
    float le, lr;
    float *e = run_fixture(&fx, TH_BACKEND, procs, 0, &le);
    float *r = run_fixture(&fx, TH_BACKEND, procs, 1, &lr);
    cr_assert(!memcmp(e, r, fx.n * sizeof *e),
              "procs %u: replayed weights differ from eager ones", procs);
    cr_assert(!memcmp(&le, &lr, sizeof le), "procs %u: loss %.9g vs %.9g",
              procs, (double)le, (double)lr);
    free(e);
    free(r);
  }
  fx_free(&fx);
}

/* The CUDA attention's GEMM path, with its heads permuted and addressed
 * in place (REPRISE_GPT_ATTN=gemm, REPRISE_GPT_ATTN_GEMM=permute|direct):
 * both fixtures' heads fit the fused kernels, so the default never runs
 * them in a whole step. Within PyTorch's bounds on the odd shapes (head
 * size 5, batch split 2 + 1) eager and replayed on one and two
 * processors, replay bitwise equal to eager. The kernels read the
 * variables at each launch; the CPU backend has no such paths (the same
 * checks run its kernels again). */
Test(gpt_backends, attention_gemm_layouts_match_pytorch_and_replay_eager) {
  const char *const layout[] = {"permute", "direct"};
  for (int l = 0; l < 2; l++) {
    setenv("REPRISE_GPT_ATTN", "gemm", 1);
    setenv("REPRISE_GPT_ATTN_GEMM", layout[l], 1);
    fixture fx;
    fx_load_file(&fx, "gpt_odd.bin");
    for (uint32_t procs = 1; procs <= 2; procs++) {
      for (int replay = 0; replay <= 1; replay++)
        against_pytorch_on("gpt_odd.bin", procs, replay);
      float le, lr;
      float *e = run_fixture(&fx, TH_BACKEND, procs, 0, &le);
      float *r = run_fixture(&fx, TH_BACKEND, procs, 1, &lr);
      cr_assert(!memcmp(e, r, fx.n * sizeof *e) && !memcmp(&le, &lr, sizeof le),
                "%s layout, procs %u: replay differs from eager", layout[l],
                procs);
      free(e);
      free(r);
    }
    fx_free(&fx);
  }
  unsetenv("REPRISE_GPT_ATTN");
  unsetenv("REPRISE_GPT_ATTN_GEMM");
}

/* Two processors sum the gradients of two halves of the batch: the loss
 * and the gradients (null-gradient elements included, relative to their
 * tensor's largest) agree with one processor's within 1e-5. The weights
 * after 3 steps are held to REF_TOL: AdamW divides by sqrt(v), so for an
 * element with a small gradient it turns the gradients' relative rounding
 * difference into an update difference of up to about lr times it; the
 * null-gradient elements' updates are noise, held to NULL_BOUND only. */
Test(gpt_backends, two_processors_match_one_gradients_1e_5_weights_1e_4) {
  fixture fx;
  fx_load(&fx);
  float l1, l2, *g1, *g2;
  float *one = run_fixture_g(&fx, TH_BACKEND, 1, 1, &l1, &g1);
  float *two = run_fixture_g(&fx, TH_BACKEND, 2, 1, &l2, &g2);
  tg t; /* for the table */
  tg_init(&t, &fx, TH_BACKEND, 1, 1);
  check_tensors(&t, g2, g1, PROCS_TOL, "gradient, procs 2 vs 1");
  check_tensors_null(&t, two, one, REF_TOL, "weights after steps, procs 2 vs 1",
                     fx.grad, null_bound(&fx));
  tg_fini(&t);
  cr_assert(fabs(l1 - l2) <= PROCS_TOL * fabs(l1), "loss %.9g vs %.9g",
            (double)l1, (double)l2);
  free(one);
  free(two);
  free(g1);
  free(g2);
  fx_free(&fx);
}

Test(gpt_backends, cuda_matches_cpu_within_the_reference_bound) {
  if (TH_ON_CPU)
    cr_skip_test("compares CUDA with the CPU: test_gpt_cuda runs it");
  fixture fx;
  fx_load(&fx);
  float lg, lc;
  float *gpu = run_fixture(&fx, RP_BACKEND_CUDA, 1, 1, &lg);
  float *cpu = run_fixture(&fx, RP_BACKEND_CPU, 1, 1, &lc);
  tg t;
  tg_init(&t, &fx, RP_BACKEND_CPU, 1, 1);
  check_tensors_null(&t, gpu, cpu, CUDA_TOL, "CUDA vs CPU", fx.grad,
                     null_bound(&fx));
  tg_fini(&t);
  free(gpu);
  free(cpu);
  fx_free(&fx);
}

/* ---- decoding ---- */

/* rp_gpt_sampling.on_token's log: the tokens seen; RP_EIO at the
 * stop_at-th (0: never). */
typedef struct tok_log {
  int32_t tok[16];
  uint32_t n, stop_at;
} tok_log;

static rp_status log_token(void *arg, int32_t token) {
  tok_log *l = arg;
  if (l->n < 16)
    l->tok[l->n] = token;
  l->n++;
  return l->stop_at && l->n == l->stop_at ? RP_EIO : RP_OK;
}

/* The decode graph, replayed once per position with a KV cache, gives the
 * logits of the full forward at every position (within 1e-5 of the
 * largest logit: the same math, GEMMs of other shapes), and greedy
 * generation by replay the tokens of greedy full-recompute sampling. */
Test(gpt_backends, decode_by_replay_matches_the_full_forward) {
  fixture fx;
  fx_load(&fx);
  tg t;
  tg_init(&t, &fx, TH_BACKEND, 1, 1);
  uint32_t T = fx.T, V = fx.V;
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(t.rt, rp_gpt_procs(t.m)[0], &pi));
  rp_inst tok;
  rp_rect r = rp_rect_2d(0, 0, 0, T - 1);
  RP_CHECK(rp_instance_create(t.rt, pi.local, RP_I32, &r, NULL, &tok));
  RP_CHECK(rp_instance_write(t.rt, tok, fx.x, T * sizeof(int32_t)));
  RP_CHECK(rp_gpt_forward(t.m, tok, 1));
  RP_CHECK(rp_runtime_drain(t.rt));
  size_t nl = (size_t)fx.B * T * V;
  float *full = malloc(nl * sizeof *full), *one = malloc(V * sizeof *one);
  RP_CHECK(rp_instance_read(t.rt, rp_gpt_logits(t.m), full, nl * sizeof *full));
  rp_graph *g;
  RP_CHECK(rp_gpt_decode_record(t.m, &g));
  /* the host reads the logits: a postcondition on the head (every op's
   * result is then observed: `dump --lint` clean) */
  cr_assert_eq(rp_graph_postcondition_count(g), 1);
  rp_op_id head;
  uint32_t nb = 0;
  RP_CHECK(rp_graph_postcondition_ops(g, 0, &head, 1, &nb));
  cr_assert(nb == 1 && strstr(rp_graph_op_name(g, head), "lm_head"),
            "bound to %u ops", nb);
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  double worst = 0;
  for (uint32_t pos = 0; pos < T; pos++) {
    rp_gpt_decode_step a = {(int32_t)pos, fx.x[pos]};
    rp_replay_args ra = {.args = &a, .args_size = sizeof a};
    rp_event done;
    RP_CHECK(rp_replay(ex, &ra, &done));
    rp_status st = rp_event_wait(t.rt, done, -1);
    rp_event_release(t.rt, done);
    cr_assert_eq(st, RP_OK, "pos %u: %s", pos, rp_exec_error_detail(ex));
    RP_CHECK(rp_instance_read(t.rt, rp_gpt_decode_logits(t.m), one,
                              V * sizeof *one));
    double scale = 0, diff = 0;
    for (uint32_t v = 0; v < V; v++) {
      scale = fmax(scale, fabs((double)full[pos * V + v]));
      diff = fmax(diff, fabs((double)full[pos * V + v] - (double)one[v]));
    }
    worst = fmax(worst, diff / scale);
    cr_assert(diff <= 1e-5 * scale, "pos %u: decode differs by %g (of %g)", pos,
              diff, scale);
  }
  cr_log_info("%s: decode vs full forward within %.3g", TH_BACKEND_NAME, worst);
  int32_t gen[12], smp[12];
  RP_CHECK(rp_gpt_generate(t.m, ex, fx.x, 2, 10,
                           &(rp_gpt_sampling){.temperature = 0, .seed = 1},
                           gen));
  RP_CHECK(rp_gpt_sample(t.m, fx.x, 2, 10,
                         &(rp_gpt_sampling){.temperature = 0, .seed = 1}, smp));
  cr_assert(!memcmp(gen, smp, sizeof gen), "greedy decode and sample differ");
  /* a draw among the top 1 at temperature 2 is greedy's, both ways */
  int32_t top1[12];
  RP_CHECK(rp_gpt_generate(
      t.m, ex, fx.x, 2, 10,
      &(rp_gpt_sampling){.temperature = 2, .top_k = 1, .seed = 3}, top1));
  cr_assert(!memcmp(gen, top1, sizeof gen), "decode: top-1 is not greedy");
  RP_CHECK(rp_gpt_sample(
      t.m, fx.x, 2, 10,
      &(rp_gpt_sampling){.temperature = 2, .top_k = 1, .seed = 3}, top1));
  cr_assert(!memcmp(gen, top1, sizeof gen), "sample: top-1 is not greedy");
  RP_EXPECT(rp_gpt_generate(t.m, ex, fx.x, 2, 1, NULL, gen), RP_EINVAL);
  RP_EXPECT(rp_gpt_sample(t.m, fx.x, 2, 1, NULL, smp), RP_EINVAL);
  int32_t bad = (int32_t)V;
  RP_EXPECT(rp_gpt_generate(t.m, ex, &bad, 1, 1,
                            &(rp_gpt_sampling){.temperature = 0, .seed = 1},
                            gen),
            RP_ERANGE);
  /* plen + n past 2^32 - 1 (it wrapped to 0 and generated nothing) */
  RP_EXPECT(rp_gpt_generate(t.m, ex, fx.x, 2, UINT32_MAX,
                            &(rp_gpt_sampling){.temperature = 0, .seed = 1},
                            gen),
            RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "overflow a 32-bit count"), "%s",
            rp_error_detail());
  /* rp_gpt_sample likewise, before any token is drawn (on_token stops a
   * run that starts after the first) */
  tok_log none = {.stop_at = 1};
  RP_EXPECT(rp_gpt_sample(t.m, fx.x, 2, UINT32_MAX,
                          &(rp_gpt_sampling){.temperature = 0,
                                             .on_token = log_token,
                                             .arg = &none},
                          smp),
            RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_sample: 2 prompt tokens + "
                                      "4294967295 to generate overflow a "
                                      "32-bit count"),
            "%s", rp_error_detail());
  cr_assert_eq(none.n, 0, "%u tokens drawn", none.n);
  /* the training step's exec is no decode step: its arguments are longer */
  rp_graph *sg;
  rp_exec *sx;
  RP_CHECK(rp_gpt_record(t.m, &sg));
  RP_CHECK(rp_instantiate(sg, NULL, &sx));
  RP_CHECK(rp_graph_destroy(sg));
  RP_EXPECT(rp_gpt_generate(t.m, sx, fx.x, 2, 1,
                            &(rp_gpt_sampling){.temperature = 0, .seed = 1},
                            gen),
            RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_generate: ex is not a decode "
                                      "step"),
            "%s", rp_error_detail());
  RP_CHECK(rp_exec_destroy(sx));
  /* past the context (the last T/2 decoded again from position 0): the
   * tokens within the context are those of a run that stops there */
  int32_t *longer = malloc((2 + 3 * T) * sizeof *longer);
  int32_t *shorter = malloc(T * sizeof *shorter);
  RP_CHECK(rp_gpt_generate(t.m, ex, fx.x, 2, 3 * T,
                           &(rp_gpt_sampling){.temperature = 1, .seed = 5},
                           longer));
  RP_CHECK(rp_gpt_generate(t.m, ex, fx.x, 2, T - 2,
                           &(rp_gpt_sampling){.temperature = 1, .seed = 5},
                           shorter));
  cr_assert(!memcmp(longer, shorter, T * sizeof *shorter),
            "the wrap rewrote tokens of the first context");
  for (uint32_t i = 0; i < 2 + 3 * T; i++)
    cr_assert(longer[i] >= 0 && (uint32_t)longer[i] < V);
  free(longer);
  free(shorter);
  /* on_token: each drawn token in order, as out holds them; a status
   * other than RP_OK stops the run after that token and is returned */
  tok_log lg = {0};
  int32_t got[12];
  RP_CHECK(rp_gpt_generate(
      t.m, ex, fx.x, 2, 10,
      &(rp_gpt_sampling){
          .temperature = 1, .seed = 7, .on_token = log_token, .arg = &lg},
      got));
  cr_assert_eq(lg.n, 10);
  cr_assert(!memcmp(lg.tok, got + 2, 10 * sizeof *got), "on_token's order");
  lg = (tok_log){.stop_at = 4};
  RP_EXPECT(rp_gpt_generate(t.m, ex, fx.x, 2, 10,
                            &(rp_gpt_sampling){.temperature = 1,
                                               .seed = 7,
                                               .on_token = log_token,
                                               .arg = &lg},
                            got),
            RP_EIO);
  cr_assert_eq(lg.n, 4, "the run went on after on_token failed: %u", lg.n);
  lg = (tok_log){.stop_at = 3};
  RP_EXPECT(rp_gpt_sample(t.m, fx.x, 2, 10,
                          &(rp_gpt_sampling){.temperature = 0,
                                             .on_token = log_token,
                                             .arg = &lg},
                          got),
            RP_EIO);
  cr_assert_eq(lg.n, 3);
  /* weights that overflow: logits not finite, nothing to draw from */
  const rp_gpt_param_info *p0 = rp_gpt_param(t.m, 0); /* wte, the head too */
  size_t nw = (size_t)p0->rows * p0->cols;
  float *w0 = malloc(nw * sizeof *w0), *big = malloc(nw * sizeof *big);
  RP_CHECK(rp_gpt_tensor_read(t.m, 0, RP_GPT_WEIGHT, w0, nw));
  for (size_t i = 0; i < nw; i++)
    big[i] = i % 2 ? 3e38f : -3e38f;
  RP_CHECK(rp_gpt_tensor_write(t.m, 0, RP_GPT_WEIGHT, big, nw));
  RP_EXPECT(rp_gpt_generate(t.m, ex, fx.x, 2, 3,
                            &(rp_gpt_sampling){.temperature = 1, .seed = 1},
                            got),
            RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "the weights overflow float"), "%s",
            rp_error_detail());
  RP_EXPECT(
      rp_gpt_sample(t.m, fx.x, 2, 3, &(rp_gpt_sampling){.temperature = 0}, got),
      RP_ERANGE);
  RP_CHECK(rp_gpt_tensor_write(t.m, 0, RP_GPT_WEIGHT, w0, nw));
  free(w0);
  free(big);
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_instance_free(t.rt, tok));
  free(full);
  free(one);
  tg_fini(&t);
  fx_free(&fx);
}

/* ---- training on text, checkpoints ---- */

/* A deterministic pseudo-text of n bytes: words of a small alphabet. */
static uint8_t *make_text(size_t n) {
  uint8_t *b = malloc(n);
  cr_assert_not_null(b);
  rp_rng r;
  rp_rng_seed(&r, 42);
  const char *words[] = {"the ", "cat ",  "sat ", "on ",
                         "a ",   "mat. ", "dog ", "ran\n"};
  size_t i = 0;
  while (i < n) {
    const char *w = words[rp_rng_next(&r) % 8];
    for (size_t j = 0; w[j] && i < n; j++)
      b[i++] = (uint8_t)w[j];
  }
  return b;
}

typedef struct tt {
  rp_runtime *rt;
  rp_gpt *m;
  rp_exec *ex;
  rp_text text;
  rp_kernel_tasks k;
} tt;

static void tt_init(tt *t, uint32_t procs, int replay) {
  memset(t, 0, sizeof *t);
  uint8_t *b = make_text(20000);
  RP_CHECK(rp_text_from_bytes("test text", b, 20000, 16, &t->text));
  free(b);
  t->rt = th_runtime_procs(TH_BACKEND, procs);
  RP_CHECK(rp_kernels_register(t->rt, &t->k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = 2;
  c.heads = 2;
  c.width = 32;
  c.context = 16;
  c.vocab = t->text.vocab;
  c.batch = 4;
  c.procs = procs;
  c.ring = 4; /* refilled every 4 steps */
  c.seed = 3;
  RP_CHECK(rp_gpt_create(t->rt, &t->k, &c, &t->m));
  if (replay) {
    rp_graph *g;
    RP_CHECK(rp_gpt_record(t->m, &g));
    RP_CHECK(rp_instantiate(g, NULL, &t->ex));
    RP_CHECK(rp_graph_destroy(g));
  }
}

static void tt_fini(tt *t) {
  RP_CHECK(rp_exec_destroy(t->ex));
  RP_CHECK(rp_gpt_destroy(t->m));
  th_destroy(t->rt);
  rp_text_free(&t->text);
}

/* Steps start..stop-1 of a 10-step schedule. */
static void tt_train(tt *t, uint32_t start, uint32_t stop) {
  rp_gpt_train_opts o = {
      .iters = 10, .start = start, .stop = stop, .lr = 3e-3f, .warmup = 2};
  RP_CHECK(rp_gpt_train(t->m, t->ex, &t->text, &o));
}

/* The front-end check of lr x weight_decay computes it in float, as the
 * AdamW kernels do: a pair whose exact product is below 1 but rounds to
 * 1.0f (which would zero every decayed matrix) is refused by
 * rp_gpt_step_check and rp_gpt_step before any op runs, not by the
 * AdamW op at the end of a step. */
/* A one-layer model of context 8 on one processor with weight decay wd
 * (tests of the lr x weight_decay rules), on 2000 bytes of text. */
typedef struct wd_model {
  rp_runtime *rt;
  rp_gpt *m;
  rp_text text;
} wd_model;

static void wd_model_init(wd_model *t, float wd, uint32_t heads, uint32_t width,
                          uint32_t batch, uint32_t ring) {
  uint8_t *b = make_text(2000);
  RP_CHECK(rp_text_from_bytes("test text", b, 2000, 8, &t->text));
  free(b);
  t->rt = th_runtime_procs(TH_BACKEND, 1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(t->rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = 1, c.heads = heads, c.width = width, c.context = 8;
  c.batch = batch, c.vocab = t->text.vocab, c.ring = ring;
  c.weight_decay = wd;
  RP_CHECK(rp_gpt_create(t->rt, &k, &c, &t->m));
}

static void wd_model_fini(wd_model *t) {
  RP_CHECK(rp_gpt_destroy(t->m));
  th_destroy(t->rt);
  rp_text_free(&t->text);
}

Test(gpt_backends, lr_times_weight_decay_is_checked_in_float) {
  const float lr = 0.435312152f, wd = 2.29720211f;
  cr_assert((double)lr * wd < 1.0 && lr * wd >= 1.0f);
  wd_model t;
  wd_model_init(&t, wd, 2, 16, 2, 2);
  rp_gpt *m = t.m;
  rp_gpt_step_args a = {0, lr, 1};
  RP_EXPECT(rp_gpt_step_check(m, &a), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_step_check: lr 0.435312 x "
                                      "weight_decay 2.2972 = 1 in float"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_gpt_step(m, &a), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_step: "), "%s",
            rp_error_detail());
  a.lr = nextafterf(lr, 0); /* the largest lr below it trains */
  cr_assert_lt(a.lr * wd, 1.0f);
  RP_CHECK(rp_gpt_step(m, &a));
  wd_model_fini(&t);
}

/* The schedule at its boundaries (0-based steps; warmup 4 of 10): step 0
 * at lr / 4, the warmup's last step (3) and the first after it (4) at the
 * peak exactly, step 5 at the cosine of 1/5 of the way, the last step (9)
 * at lr / 10 exactly; no warmup starts at the peak; with at most one step
 * after the warmup the peak holds to the end. A stopped or resumed run
 * computes each step's rate from (lr, warmup, iters, t) alone, so these
 * are its rates too. No step's rate is above the peak, also where the
 * formulas round up: the first cosine step of the largest float below 2
 * would round to 2.0f, which with a weight decay of 0.5 would make the
 * decay step zero the matrices (test below). */
Test(gpt, lr_schedule_at_its_boundaries_and_never_above_its_peak) {
  const float lr = 3e-3f;
  cr_assert_eq(rp_gpt_lr(lr, 4, 10, 0), lr * 1.0f / 4.0f);
  cr_assert_eq(rp_gpt_lr(lr, 4, 10, 1), lr * 2.0f / 4.0f);
  cr_assert_eq(rp_gpt_lr(lr, 4, 10, 3), lr);
  cr_assert_eq(rp_gpt_lr(lr, 4, 10, 4), lr);
  double want = lr / 10.0 + 0.5 * (1 + cos(M_PI / 5)) * (lr - lr / 10.0);
  cr_assert(fabs(rp_gpt_lr(lr, 4, 10, 5) - want) <= 1e-7 * lr, "%.9g vs %.9g",
            (double)rp_gpt_lr(lr, 4, 10, 5), want);
  cr_assert_eq(rp_gpt_lr(lr, 4, 10, 9), lr / 10.0f);
  cr_assert_eq(rp_gpt_lr(lr, 0, 10, 0), lr);
  cr_assert_eq(rp_gpt_lr(lr, 0, 1, 0), lr);
  cr_assert_eq(rp_gpt_lr(lr, 4, 5, 4), lr);
  cr_assert_eq(rp_gpt_lr(lr, 4, 6, 5), lr / 10.0f);
  /* the cosine only goes down after the warmup */
  for (uint32_t t = 4; t + 1 < 10; t++)
    cr_assert_geq(rp_gpt_lr(lr, 4, 10, t), rp_gpt_lr(lr, 4, 10, t + 1));
  /* never above the peak, where lr x t / w or min + (lr - min) round up */
  const float peaks[] = {nextafterf(2.0f, 0), 1.42857134f, 3.33333302f};
  for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++)
    for (uint32_t w = 0; w < 20; w++)
      for (uint32_t t = 0; t < w + 10; t++)
        cr_assert_leq(rp_gpt_lr(peaks[i], w, w + 10, t), peaks[i],
                      "lr %a, warmup %u, step %u: %a", (double)peaks[i], w, t,
                      (double)rp_gpt_lr(peaks[i], w, w + 10, t));
}

/* rp_gpt_train takes a peak lr whose product with the weight decay is
 * below 1; then every step's rate is one rp_gpt_step takes, so the run
 * does not fail part-way (here at its first step, whose cosine rate
 * rounded up to 2.0f: 2 x 0.5 = 1). */
Test(gpt_backends, a_peak_lr_train_takes_is_taken_at_every_step) {
  const float wd = 0.5f, lr = nextafterf(2.0f, 0);
  cr_assert(lr * wd < 1.0f);
  wd_model t;
  wd_model_init(&t, wd, 1, 8, 1, 4);
  rp_gpt_train_opts o = {.iters = 3, .lr = lr, .warmup = 0};
  rp_status st = rp_gpt_train(t.m, NULL, &t.text, &o);
  cr_assert_eq(st, RP_OK, "%s", rp_error_detail());
  wd_model_fini(&t);
}

/* Whether nanoGPT's configure_optimizers decays the tensor: every 2-D
 * parameter (the embeddings wte and wpe and the Linear matrices), no
 * LayerNorm weight or bias and no Linear bias. From the name alone. */
static int decays_by_name(const char *name) {
  size_t n = strlen(name);
  if (!strcmp(name, "wte") || !strcmp(name, "wpe"))
    return 1;
  return !strstr(name, "ln") && n > 2 && !strcmp(name + n - 2, ".w");
}

/* One step's update in closed form from the model's own gradient (read
 * back, before clipping) and the moments written before it: the global
 * norm, clip_grad_norm_'s scale max_norm / (norm + 1e-6) where below 1,
 * AdamW's decay of exactly the 2-D tensors by lr x weight_decay, the
 * moments, and the bias correction of the step number given (5 here, on
 * moments that are not zero), computed in double for every element, on
 * one and two processors, clipping active and not. A large weight decay
 * (0.5) and a step number past 1 make a wrong decay flag, a missing or
 * spurious clip or a bias correction off by a step stand out: the
 * PyTorch fixture's 3 steps from zero moments see them only through
 * their effect on the next steps' gradients. */
Test(gpt_backends, a_step_is_clipped_adamw_of_its_gradient_in_closed_form) {
  uint8_t *b = make_text(4000);
  rp_text text;
  RP_CHECK(rp_text_from_bytes("test text", b, 4000, 8, &text));
  free(b);
  for (int run = 0; run < 4; run++) {
    uint32_t procs = 1 + (uint32_t)(run & 1);
    int clip = run < 2;
    rp_runtime *rt = th_runtime_procs(TH_BACKEND, procs);
    rp_kernel_tasks k;
    RP_CHECK(rp_kernels_register(rt, &k));
    rp_gpt_config c;
    rp_gpt_config_init(&c);
    c.layers = 1, c.heads = 2, c.width = 8, c.context = 8, c.batch = 3;
    c.vocab = text.vocab, c.ring = 1, c.procs = procs, c.seed = 5;
    c.weight_decay = 0.5f;
    c.max_norm = clip ? 0.05f : 1e3f;
    rp_gpt *m;
    RP_CHECK(rp_gpt_create(rt, &k, &c, &m));
    int32_t x[3 * 8], y[3 * 8];
    RP_CHECK(rp_text_windows(&text, 0, text.ntrain, 3, 8, 7, 0, 1, x, y));
    RP_CHECK(rp_gpt_write_batches(m, x, y, 1));
    uint32_t nt = rp_gpt_param_tensors(m);
    size_t n = rp_gpt_param_count(m);
    float *w0 = malloc(n * 4), *m0 = malloc(n * 4), *v0 = malloc(n * 4);
    float *w1 = malloc(n * 4), *m1 = malloc(n * 4), *v1 = malloc(n * 4);
    float *g = malloc(n * 4);
    cr_assert(w0 && m0 && v0 && w1 && m1 && v1 && g);
    for (size_t j = 0; j < n; j++) { /* moments of earlier steps */
      m0[j] = 1e-3f * (float)sin(0.37 * (double)j);
      v0[j] = 1e-6f * (1.5f + (float)cos(0.11 * (double)j));
    }
    size_t o = 0;
    for (uint32_t i = 0; i < nt; i++) {
      const rp_gpt_param_info *p = rp_gpt_param(m, i);
      size_t e = (size_t)p->rows * p->cols;
      cr_assert_eq(p->decay, decays_by_name(p->name), "%s: decay flag %d",
                   p->name, p->decay);
      RP_CHECK(rp_gpt_tensor_write(m, i, RP_GPT_MOM1, m0 + o, e));
      RP_CHECK(rp_gpt_tensor_write(m, i, RP_GPT_MOM2, v0 + o, e));
      RP_CHECK(rp_gpt_tensor_read(m, i, RP_GPT_WEIGHT, w0 + o, e));
      o += e;
    }
    const float lr = 0.01f;
    const int32_t step = 5;
    rp_gpt_step_args a = {0, lr, step};
    RP_CHECK(rp_gpt_step(m, &a));
    RP_CHECK(rp_runtime_drain(rt));
    float norm;
    RP_CHECK(rp_gpt_grad_norm(m, &norm));
    o = 0;
    for (uint32_t i = 0; i < nt; i++) {
      const rp_gpt_param_info *p = rp_gpt_param(m, i);
      size_t e = (size_t)p->rows * p->cols;
      RP_CHECK(rp_gpt_tensor_read(m, i, RP_GPT_WEIGHT, w1 + o, e));
      RP_CHECK(rp_gpt_tensor_read(m, i, RP_GPT_MOM1, m1 + o, e));
      RP_CHECK(rp_gpt_tensor_read(m, i, RP_GPT_MOM2, v1 + o, e));
      RP_CHECK(rp_gpt_tensor_read(m, i, RP_GPT_GRAD, g + o, e));
      o += e;
    }
    double sq = 0;
    for (size_t j = 0; j < n; j++)
      sq += (double)g[j] * g[j];
    double ref = sqrt(sq);
    cr_assert(fabs(norm - ref) <= 1e-6 * ref, "norm %.9g, closed form %.9g",
              (double)norm, ref);
    double sc = c.max_norm / (ref + 1e-6);
    cr_assert(clip ? sc < 0.5 : sc > 2, "the run means %s: scale %g",
              clip ? "to clip" : "not to clip", sc);
    sc = sc < 1 ? sc : 1;
    double b1 = c.beta1, b2 = c.beta2;
    double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    o = 0;
    for (uint32_t i = 0; i < nt; i++) {
      const rp_gpt_param_info *p = rp_gpt_param(m, i);
      size_t e = (size_t)p->rows * p->cols;
      int dec = decays_by_name(p->name);
      double wmax = 0;
      for (size_t j = o; j < o + e; j++)
        wmax = fmax(wmax, fabs((double)w0[j]));
      for (size_t j = o; j < o + e; j++) {
        double gr = sc * g[j];
        double me = b1 * m0[j] + (1 - b1) * gr;
        double ve = b2 * v0[j] + (1 - b2) * gr * gr;
        double we = w0[j] * (dec ? 1 - (double)lr * c.weight_decay : 1) -
                    lr * (me / bc1) / (sqrt(ve / bc2) + c.eps);
        /* float rounding of the terms (m's may cancel) */
        double mtol = 1e-6 * (b1 * fabs(m0[j]) + (1 - b1) * fabs(gr));
        cr_assert(fabs(m1[j] - me) <= mtol && fabs(v1[j] - ve) <= 1e-6 * ve,
                  "%s[%zu] moments %.9g %.9g, closed form %.9g %.9g (procs "
                  "%u, clip %d)",
                  p->name, j - o, (double)m1[j], (double)v1[j], me, ve, procs,
                  clip);
        cr_assert(fabs(w1[j] - we) <= 1e-6 * wmax + 1e-5 * lr,
                  "%s[%zu] %.9g, closed form %.9g (from %.9g; decay %d, "
                  "procs %u, clip %d)",
                  p->name, j - o, (double)w1[j], we, (double)w0[j], dec, procs,
                  clip);
      }
      o += e;
    }
    free(w0), free(m0), free(v0), free(w1), free(m1), free(v1), free(g);
    RP_CHECK(rp_gpt_destroy(m));
    th_destroy(rt);
  }
  rp_text_free(&text);
}

/* Eager misuse is refused before anything runs, so nothing is poisoned:
 * a non-finite or negative lr, or one whose product with the weight decay
 * is 1 or more (rp_gpt_step, rp_gpt_train), a prompt token
 * outside the vocabulary or a bad temperature (rp_gpt_sample), a text
 * whose split is shorter than a window or whose vocabulary is larger than
 * the model's (rp_gpt_train: no read past the tokens). Afterwards greedy
 * sampling gives the same tokens as before, and ten eager steps end
 * bitwise where a model that saw no misuse ends. */
Test(gpt_backends, eager_misuse_is_refused_and_the_model_trains_on) {
  tt a, b;
  tt_init(&a, 1, 0);
  tt_init(&b, 1, 0);
  const rp_gpt_sampling greedy = {.temperature = 0, .seed = 1};
  int32_t prompt[2] = {1, 2}, before[6], after[6];
  RP_CHECK(rp_gpt_sample(a.m, prompt, 2, 4, &greedy, before));
  /* 10 x the default weight decay 0.1 is 1: the decay step would zero
   * the matrices (above 1 it flips or grows them) */
  const float bad_lr[] = {NAN, INFINITY, -1e-3f, 10.0f, 1e30f};
  for (size_t i = 0; i < sizeof bad_lr / sizeof bad_lr[0]; i++) {
    const char *why = i < 3 ? ": lr = " : "x weight_decay 0.1 = ";
    rp_gpt_step_args st = {0, bad_lr[i], 1};
    RP_EXPECT(rp_gpt_step(a.m, &st), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "rp_gpt_step: ") &&
                  strstr(rp_error_detail(), why),
              "%s", rp_error_detail());
    rp_gpt_train_opts o = {.iters = 10, .lr = bad_lr[i], .warmup = 2};
    RP_EXPECT(rp_gpt_train(a.m, NULL, &a.text, &o), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "rp_gpt_train: ") &&
                  strstr(rp_error_detail(), why),
              "%s", rp_error_detail());
  }
  int32_t outside[2] = {1, (int32_t)a.text.vocab};
  RP_EXPECT(rp_gpt_sample(a.m, outside, 2, 4, &greedy, after), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "prompt token 1 = "), "%s",
            rp_error_detail());
  const float bad_t[] = {-1.0f, NAN, INFINITY};
  for (size_t i = 0; i < sizeof bad_t / sizeof bad_t[0]; i++) {
    rp_gpt_sampling how = {.temperature = bad_t[i], .seed = 1};
    RP_EXPECT(rp_gpt_sample(a.m, prompt, 2, 4, &how, after), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "temperature = "), "%s",
              rp_error_detail());
  }
  /* a training split of 16 tokens: no window of 16 + 1 fits */
  rp_text small = a.text, wide;
  small.ntrain = 16;
  uint8_t *many = malloc(4000);
  for (int i = 0; i < 4000; i++)
    many[i] = (uint8_t)(i * 7 % 251);
  RP_CHECK(rp_text_from_bytes("wide", many, 4000, 16, &wide));
  free(many);
  rp_gpt_train_opts o = {.iters = 10, .lr = 3e-3f, .warmup = 2};
  /* schedules no checkpoint holds: a step count past the limit (its step
   * numbers would overflow), a warmup as long as the run */
  const uint32_t bad_iw[][2] = {{RP_GPT_ITERS_MAX + 1, 2}, {10, 10}};
  for (size_t i = 0; i < 2; i++) {
    rp_gpt_train_opts bo = {
        .iters = bad_iw[i][0], .warmup = bad_iw[i][1], .lr = 3e-3f};
    RP_EXPECT(rp_gpt_train(a.m, NULL, &a.text, &bo), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), "rp_gpt_train: iters ") &&
                  strstr(rp_error_detail(), "warmup below it"),
              "%s", rp_error_detail());
  }
  RP_EXPECT(rp_gpt_train(a.m, NULL, &small, &o), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "does not fit the model"), "%s",
            rp_error_detail());
  cr_assert_gt(wide.vocab, a.text.vocab, "the wide text's vocabulary");
  RP_EXPECT(rp_gpt_train(a.m, NULL, &wide, &o), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "does not fit the model"), "%s",
            rp_error_detail());
  rp_text_free(&wide);
  RP_CHECK(rp_gpt_sample(a.m, prompt, 2, 4, &greedy, after));
  cr_assert(!memcmp(before, after, sizeof before),
            "greedy sampling changed after the refused calls");
  tt_train(&a, 0, 10);
  tt_train(&b, 0, 10);
  size_t n = rp_gpt_param_count(a.m);
  float *wa = malloc(n * sizeof *wa), *wb = malloc(n * sizeof *wb);
  RP_CHECK(rp_gpt_params_read(a.m, wa, n));
  RP_CHECK(rp_gpt_params_read(b.m, wb, n));
  cr_assert(!memcmp(wa, wb, n * sizeof *wa),
            "the weights differ from a model that saw no misuse");
  free(wa), free(wb);
  tt_fini(&a);
  tt_fini(&b);
}

/* A capture held open by another thread until released. */
typedef struct holder {
  rp_runtime *rt;
  atomic_int state; /* 1 open, 2 asked to end */
  rp_graph *g;
  rp_status st;
} holder;

static void *holder_main(void *arg) {
  holder *h = arg;
  h->st = rp_capture_begin(h->rt, NULL);
  atomic_store(&h->state, 1);
  while (atomic_load(&h->state) != 2)
    usleep(1000);
  if (h->st == RP_OK)
    h->st = rp_capture_end(h->rt, &h->g);
  return NULL;
}

static void hold_capture(holder *h, pthread_t *th) {
  cr_assert_eq(pthread_create(th, NULL, holder_main, h), 0);
  while (atomic_load(&h->state) != 1)
    usleep(1000);
  RP_CHECK(h->st);
}

static void release_capture(holder *h, pthread_t th, rp_graph **g) {
  atomic_store(&h->state, 2);
  pthread_join(th, NULL);
  RP_CHECK(h->st);
  *g = h->g;
}

/* The eager calls refuse to run while a capture is open (this thread's
 * would record their ops and read stale results, another's refuse them
 * part-way); a replayed argument
 * block the step would refuse fails the CPU replay and changes nothing;
 * rp_gpt_forward refuses a tokens instance of another type or too small,
 * and after it ran over a token outside the vocabulary (on a CPU its ops
 * poison the activations; a GPU's embedding makes the row NaN) sampling
 * and evaluation report that failure instead of answering from stale
 * logits. */
Test(gpt_backends, eager_calls_report_captures_bad_args_and_failed_ops) {
  tt a;
  tt_init(&a, 1, 1);
  const rp_gpt_sampling greedy = {.temperature = 0, .seed = 1};
  int32_t prompt[2] = {1, 2}, before[6], got[6];
  RP_CHECK(rp_gpt_sample(a.m, prompt, 2, 4, &greedy, before));
  size_t n = rp_gpt_param_count(a.m), per = (size_t)4 * 16;
  float *w0 = malloc(n * sizeof *w0), *w1 = malloc(n * sizeof *w1);
  int32_t *x = malloc(per * sizeof *x), *y = malloc(per * sizeof *y);
  RP_CHECK(rp_gpt_params_read(a.m, w0, n));
  RP_CHECK(
      rp_text_windows(&a.text, a.text.ntrain, a.text.n, 4, 16, 9, 0, 1, x, y));
  double l0, l1;
  RP_CHECK(rp_gpt_evaluate(a.m, x, y, 1, &l0));

  char path[64];
  snprintf(path, sizeof path, "/tmp/reprise-gpt-capture-%d", (int)getpid());
  rp_gpt_ckpt info = {.iters = 10, .warmup = 2, .lr = 3e-3f};
  rp_gpt_train_opts o = {.iters = 10, .lr = 3e-3f, .warmup = 2};
  const char *calls[] = {"rp_gpt_sample", "rp_gpt_evaluate", "rp_gpt_save",
                         "rp_gpt_train", "rp_gpt_decode_fill"};
  for (int mine = 1; mine >= 0; mine--) { /* this thread's, another's */
    holder h = {.rt = a.rt};
    pthread_t th;
    if (mine)
      RP_CHECK(rp_capture_begin(a.rt, NULL));
    else
      hold_capture(&h, &th);
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
      rp_status st = i == 0   ? rp_gpt_sample(a.m, prompt, 2, 4, &greedy, got)
                     : i == 1 ? rp_gpt_evaluate(a.m, x, y, 1, &l1)
                     : i == 2 ? rp_gpt_save(a.m, path, &info)
                     : i == 3 ? rp_gpt_train(a.m, NULL, &a.text, &o)
                              : rp_gpt_decode_fill(a.m);
      cr_assert_eq(st, RP_ECAPTURE, "%s: %s", calls[i], rp_error_detail());
      cr_assert(strstr(rp_error_detail(), mine ? "a capture is open on this "
                                                 "thread"
                                               : "a capture is open on "
                                                 "another thread"),
                "%s: %s", calls[i], rp_error_detail());
    }
    /* in one process the accessors move host bytes alone: they work */
    RP_CHECK(rp_gpt_params_read(a.m, w1, n));
    cr_assert(!memcmp(w0, w1, n * sizeof *w0));
    rp_graph *g = NULL;
    if (mine)
      RP_CHECK(rp_capture_end(a.rt, &g));
    else
      release_capture(&h, th, &g);
    cr_assert_eq(rp_graph_op_count(g), 0, "the refused calls recorded %u ops",
                 rp_graph_op_count(g));
    RP_CHECK(rp_graph_destroy(g));
  }
  cr_assert_eq(access(path, F_OK), -1, "rp_gpt_save wrote a file");

  /* lr x weight_decay 2: rp_gpt_step refuses it, so does a CPU replay */
  rp_gpt_step_args bad = {0, 20.0f, 1};
  RP_EXPECT(rp_gpt_step_check(a.m, &bad), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_step_check: lr 20 x "
                                      "weight_decay 0.1 = 2"),
            "%s", rp_error_detail());
  if (TH_BACKEND == RP_BACKEND_CPU) {
    rp_event done;
    RP_CHECK(rp_replay(
        a.ex, &(rp_replay_args){.args = &bad, .args_size = sizeof bad}, &done));
    RP_EXPECT(rp_event_wait(a.rt, done, -1), RP_EINVAL);
    cr_assert(strstr(rp_exec_error_detail(a.ex), "x weight_decay"), "%s",
              rp_exec_error_detail(a.ex));
    RP_CHECK(rp_event_release(a.rt, done));
    RP_CHECK(rp_gpt_params_read(a.m, w1, n));
    cr_assert(!memcmp(w0, w1, n * sizeof *w0), "the refused replay changed "
                                               "the weights");
  }

  /* rp_gpt_forward's tokens: type, size, then a value outside [0, V) */
  rp_inst f32, few, tok;
  rp_rect r16 = rp_rect_1d(0, 15), r15 = rp_rect_1d(0, 14);
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(a.rt, rp_gpt_procs(a.m)[0], &pi));
  rp_mem home = pi.local;
  RP_CHECK(rp_instance_create(a.rt, home, RP_F32, &r16, NULL, &f32));
  RP_CHECK(rp_instance_create(a.rt, home, RP_I32, &r15, NULL, &few));
  RP_CHECK(rp_instance_create(a.rt, home, RP_I32, &r16, NULL, &tok));
  RP_EXPECT(rp_gpt_forward(a.m, f32, 1), RP_ETYPE);
  cr_assert(strstr(rp_error_detail(), "tokens are f32"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_gpt_forward(a.m, few, 1), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "hold 15 elements"), "%s",
            rp_error_detail());
  RP_CHECK(rp_gpt_sample(a.m, prompt, 2, 4, &greedy, got));
  cr_assert(!memcmp(before, got, sizeof got), "the refusals changed sampling");
  int32_t bad_tok[16] = {0, 1, 2, 1000};
  RP_CHECK(rp_instance_write(a.rt, tok, bad_tok, sizeof bad_tok));
  RP_CHECK(rp_gpt_forward(a.m, tok, 1));
  if (TH_BACKEND == RP_BACKEND_CPU) { /* the CPU's embedding refuses it */
    RP_EXPECT(rp_gpt_sample(a.m, prompt, 2, 4, &greedy, got), RP_ERANGE);
    cr_assert(strstr(rp_error_detail(), "token 1000") &&
                  strstr(rp_error_detail(), "stay poisoned"),
              "%s", rp_error_detail());
    RP_EXPECT(rp_gpt_evaluate(a.m, x, y, 1, &l1), RP_ERANGE);
    cr_assert(strstr(rp_error_detail(), "rp_gpt_evaluate: ") &&
                  strstr(rp_error_detail(), "token 1000"),
              "%s", rp_error_detail());
  } else { /* a GPU's makes the row NaN: nothing fails, nothing poisoned */
    RP_CHECK(rp_gpt_sample(a.m, prompt, 2, 4, &greedy, got));
    cr_assert(!memcmp(before, got, sizeof got), "sampling changed");
  }
  RP_CHECK(rp_gpt_params_read(a.m, w1, n));
  cr_assert(!memcmp(w0, w1, n * sizeof *w0), "the weights changed");

  /* argument checks that name the element */
  int32_t *x2 = malloc(2 * per * sizeof *x2),
          *y2 = malloc(2 * per * sizeof *y2);
  memcpy(x2, x, per * sizeof *x), memcpy(x2 + per, x, per * sizeof *x);
  memcpy(y2, y, per * sizeof *y), memcpy(y2 + per, y, per * sizeof *y);
  x2[per + 3] = (int32_t)a.text.vocab; /* the second batch's */
  RP_EXPECT(rp_gpt_evaluate(a.m, x2, y2, 2, &l1), RP_ERANGE);
  char want[64];
  snprintf(want, sizeof want, "rp_gpt_evaluate: x[%zu] = %u outside", per + 3,
           a.text.vocab);
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  free(x2), free(y2);
  size_t nv = (size_t)rp_gpt_param(a.m, 0)->rows * rp_gpt_param(a.m, 0)->cols;
  float *v = calloc(nv, sizeof *v);
  v[5] = -1;
  RP_EXPECT(rp_gpt_tensor_write(a.m, 0, RP_GPT_MOM2, v, nv), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "element 5 is -1"), "%s",
            rp_error_detail());
  v[5] = NAN;
  RP_EXPECT(rp_gpt_tensor_write(a.m, 0, RP_GPT_MOM2, v, nv), RP_EINVAL);
  v[5] = 0;
  RP_CHECK(rp_gpt_tensor_read(a.m, 0, RP_GPT_MOM2, v, nv));
  for (size_t k = 0; k < nv; k++)
    cr_assert(v[k] >= 0, "element %zu of the moment was written", k);
  free(v);
  RP_EXPECT(rp_gpt_generate(a.m, a.ex, prompt, 2, 1, &greedy, got), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_decode_record it first"), "%s",
            rp_error_detail());
  RP_CHECK(rp_instance_free(a.rt, f32));
  RP_CHECK(rp_instance_free(a.rt, few));
  RP_CHECK(rp_instance_free(a.rt, tok));
  free(w0), free(w1), free(x), free(y);
  tt_fini(&a);
}

Test(gpt_backends, checkpoint_resume_is_bitwise_equal_to_one_run) {
  tt a, b;
  tt_init(&a, 1, 1); /* skips without a device: before the folder is made */
  th_tmpdir_make("/tmp/rp_gpt_XXXXXX");
  tt_train(&a, 0, 10);
  float *straight = malloc(rp_gpt_param_count(a.m) * sizeof(float));
  RP_CHECK(rp_gpt_params_read(a.m, straight, rp_gpt_param_count(a.m)));
  RP_CHECK(rp_gpt_reset(a.m));
  tt_train(&a, 0, 5); /* stops half way (the schedule still of 10) */
  rp_gpt_ckpt info;
  memset(&info, 0, sizeof info);
  info.step = 5;
  info.lr = 3e-3f;
  info.iters = 10;
  memcpy(info.bytes, a.text.bytes, a.text.vocab);
  const char *path = th_tmp_path("gpt.ckpt");
  RP_CHECK(rp_gpt_save(a.m, path, &info));
  tt_fini(&a);
  /* the second half in a fresh process state: new runtime, new model */
  tt_init(&b, 1, 1);
  rp_gpt_ckpt c; /* as `reprise train --load-weights` resumes */
  RP_CHECK(rp_gpt_ckpt_read_info(path, &c));
  cr_assert_eq(c.step, 5);
  cr_assert_eq(c.vocab, b.text.vocab);
  cr_assert(!memcmp(c.bytes, b.text.bytes, c.vocab));
  RP_CHECK(rp_gpt_ckpt_load(b.m, path, &c));
  tt_train(&b, 5, 10);
  size_t n = rp_gpt_param_count(b.m);
  float *resumed = malloc(n * sizeof(float));
  RP_CHECK(rp_gpt_params_read(b.m, resumed, n));
  cr_assert(!memcmp(straight, resumed, n * sizeof(float)),
            "resumed weights differ from the uninterrupted run's");
  free(straight);
  free(resumed);
  tt_fini(&b);
  th_tmpdir_remove();
}

/* Each rp_gpt_train call draws its windows from the text it is given: a
 * second call on another text (the same vocabulary, the tokens reversed)
 * over steps the first one left in the ring trains on the new text's
 * windows, bitwise as a model whose ring an evaluation used in between
 * (which makes the call write its batches anew); not on the first text's
 * windows, which would leave it where a second call on the first text
 * does. */
Test(gpt_backends, train_draws_its_windows_from_the_text_it_is_given) {
  tt a, b, c;
  tt_init(&a, 1, 1);
  tt_init(&b, 1, 1);
  tt_init(&c, 1, 1);
  rp_text other = a.text;
  other.tokens = malloc(other.n);
  cr_assert_not_null(other.tokens);
  for (size_t i = 0; i < other.n; i++)
    other.tokens[i] = a.text.tokens[other.n - 1 - i];
  rp_gpt_train_opts o = {.iters = 10, .stop = 2, .lr = 3e-3f, .warmup = 2};
  RP_CHECK(rp_gpt_train(a.m, a.ex, &a.text, &o)); /* steps 0, 1 in the ring */
  RP_CHECK(rp_gpt_train(a.m, a.ex, &other, &o));
  RP_CHECK(rp_gpt_train(b.m, b.ex, &b.text, &o));
  size_t per = (size_t)4 * 16;
  int32_t *x = malloc(per * sizeof *x), *y = malloc(per * sizeof *y);
  cr_assert(x && y);
  RP_CHECK(
      rp_text_windows(&b.text, b.text.ntrain, b.text.n, 4, 16, 9, 0, 1, x, y));
  double loss;
  RP_CHECK(rp_gpt_evaluate(b.m, x, y, 1, &loss)); /* uses the ring */
  RP_CHECK(rp_gpt_train(b.m, b.ex, &other, &o));
  RP_CHECK(rp_gpt_train(c.m, c.ex, &c.text, &o));
  RP_CHECK(rp_gpt_train(c.m, c.ex, &c.text, &o));
  size_t n = rp_gpt_param_count(a.m);
  float *wa = malloc(n * sizeof *wa), *wb = malloc(n * sizeof *wb),
        *wc = malloc(n * sizeof *wc);
  cr_assert(wa && wb && wc);
  RP_CHECK(rp_gpt_params_read(a.m, wa, n));
  RP_CHECK(rp_gpt_params_read(b.m, wb, n));
  RP_CHECK(rp_gpt_params_read(c.m, wc, n));
  cr_assert(!memcmp(wa, wb, n * sizeof *wa),
            "the second call did not train on the windows of its text");
  cr_assert(memcmp(wa, wc, n * sizeof *wa) != 0,
            "the second call trained on the first text's windows");
  free(wa), free(wb), free(wc), free(x), free(y);
  free(other.tokens);
  tt_fini(&a);
  tt_fini(&b);
  tt_fini(&c);
}

/* Once warmed up, a replayed GPT step allocates nothing: the workers
 * nothing at all (the tasks' argument and overlap checks included, 114
 * accesses for gpt.adamw here), the host thread nothing per step (a call's
 * own set-up is the same for 4 steps as for 16). */
Test(gpt_backends, training_by_replay_allocates_nothing_per_step) {
  if (!TH_ON_CPU)
    cr_skip_test("the worker counters are the CPU backend's");
  if (rp_thread_allocated_bytes() == UINT64_MAX)
    cr_skip_test("built without jemalloc (sanitizer build): no per-thread "
                 "allocation counters");
  tt t;
  tt_init(&t, 2, 1);
  rp_gpt_train_opts o = {.iters = 100, .stop = 8, .lr = 3e-3f, .warmup = 2};
  RP_CHECK(rp_gpt_train(t.m, t.ex, &t.text, &o));
  uint64_t d[2], w[2];
  const uint32_t stop[2] = {12, 28};
  for (int k = 0; k < 2; k++) {
    o.start = o.stop;
    o.stop = stop[k];
    uint64_t h0 = rp_thread_allocated_bytes();
    uint64_t w0 = rp_runtime_worker_allocated_bytes(t.rt);
    RP_CHECK(rp_gpt_train(t.m, t.ex, &t.text, &o));
    d[k] = rp_thread_allocated_bytes() - h0;
    w[k] = rp_runtime_worker_allocated_bytes(t.rt) - w0;
  }
  cr_assert(w[0] == 0 && w[1] == 0,
            "the workers allocated %llu bytes in 4 steps, %llu in 16",
            (unsigned long long)w[0], (unsigned long long)w[1]);
  cr_assert_eq(d[0], d[1],
               "the host allocated %llu bytes in 4 steps, %llu in 16",
               (unsigned long long)d[0], (unsigned long long)d[1]);
  tt_fini(&t);
}

Test(gpt_backends, training_on_text_goes_below_the_bigram_baseline) {
  tt t;
  tt_init(&t, 1, 1);
  size_t n = (size_t)4 * 4 * 16;
  int32_t *x = malloc(4 * n), *y = malloc(4 * n);
  RP_CHECK(
      rp_text_windows(&t.text, t.text.ntrain, t.text.n, 4, 16, 9, 0, 4, x, y));
  double bigram = rp_text_bigram_loss(&t.text, x, y, n), before, after;
  RP_CHECK(rp_gpt_evaluate(t.m, x, y, 4, &before));
  rp_gpt_train_opts o = {.iters = 300, .lr = 1e-2f, .warmup = 20};
  RP_CHECK(rp_gpt_train(t.m, t.ex, &t.text, &o));
  RP_CHECK(rp_gpt_evaluate(t.m, x, y, 4, &after));
  cr_log_info("val loss %.4f -> %.4f, bigram %.4f", before, after, bigram);
  cr_assert(after < bigram && before > bigram,
            "val loss %.4f -> %.4f, bigram %.4f", before, after, bigram);
  free(x);
  free(y);
  tt_fini(&t);
}

typedef struct seen {
  uint32_t n, steps[16];
  float loss[16];
} seen;

static int record_progress(void *arg, uint32_t t, const float *loss) {
  seen *s = arg;
  if (s->n < 16) {
    s->steps[s->n] = t;
    s->loss[s->n] = loss ? *loss : NAN;
  }
  s->n++;
  return 0;
}

/* Up to 3 replays in flight over a ring of 4 batch slots (refilled every
 * 4 steps, while nothing is in flight): the weights end bitwise where one
 * replay at a time leaves them, every step is reported once and in order,
 * with the same losses at the same steps. */
Test(gpt_backends, inflight_replays_give_the_weights_of_one_in_flight) {
  for (uint32_t procs = 1; procs <= 2; procs++) {
    float *w[2] = {NULL, NULL};
    seen sn[2];
    size_t n = 0;
    for (int k = 0; k < 2; k++) {
      tt t;
      tt_init(&t, procs, 1);
      memset(&sn[k], 0, sizeof sn[k]);
      uint64_t ns[11], wall = 0;
      rp_gpt_train_opts o = {.iters = 11,
                             .lr = 3e-3f,
                             .warmup = 2,
                             .loss_every = 3,
                             .progress = record_progress,
                             .arg = &sn[k],
                             .iter_ns = ns,
                             .wall_ns = &wall,
                             .inflight = k ? 3 : 1};
      RP_CHECK(rp_gpt_train(t.m, t.ex, &t.text, &o));
      cr_assert_gt(wall, 0);
      n = rp_gpt_param_count(t.m);
      w[k] = malloc(n * sizeof(float));
      RP_CHECK(rp_gpt_params_read(t.m, w[k], n));
      o.inflight = RP_GPT_MAX_INFLIGHT + 1;
      RP_EXPECT(rp_gpt_train(t.m, t.ex, &t.text, &o), RP_EINVAL);
      tt_fini(&t);
    }
    cr_assert(!memcmp(w[0], w[1], n * sizeof(float)),
              "procs %u: --inflight 3 weights differ from --inflight 1", procs);
    cr_assert_eq(sn[1].n, 11);
    for (uint32_t i = 0; i < 11; i++) {
      cr_assert_eq(sn[1].steps[i], i);
      int read = i % 3 == 0 || i == 10;
      cr_assert_eq(isnan(sn[1].loss[i]), !read, "step %u", i);
      if (read)
        cr_assert(sn[0].loss[i] == sn[1].loss[i], "step %u: loss %g vs %g", i,
                  (double)sn[0].loss[i], (double)sn[1].loss[i]);
    }
    free(w[0]);
    free(w[1]);
  }
}

/* Greedy full-recompute decoding over the windows rp_gpt_generate decodes:
 * token i's context is out[ws..i), ws starting at the prompt's last T
 * tokens and moving on by T/2 whenever the context would exceed T tokens;
 * the forward (rp_gpt_forward) of that window, the argmax (first of equal
 * maxima) of its last position's logits. Independent of the decode graph
 * and its caches. */
static void greedy_full(rp_runtime *rt, rp_gpt *m, rp_inst tok, uint32_t B,
                        const int32_t *prompt, uint32_t plen, uint32_t n,
                        int32_t *out) {
  const rp_gpt_config *c = rp_gpt_cfg(m);
  uint32_t T = c->context, V = c->vocab;
  size_t nl = (size_t)B * T * V;
  float *logits = malloc(nl * sizeof *logits);
  int32_t *win = calloc(T, sizeof *win);
  cr_assert(logits && win);
  memcpy(out, prompt, plen * sizeof *out);
  uint32_t ws = plen > T ? plen - T : 0;
  for (uint32_t i = plen; i < plen + n; i++) {
    if (i - ws > T)
      ws += T / 2;
    uint32_t k = i - ws;
    memset(win, 0, T * sizeof *win);
    memcpy(win, out + ws, k * sizeof *win);
    RP_CHECK(rp_instance_write(rt, tok, win, T * sizeof *win));
    RP_CHECK(rp_gpt_forward(m, tok, 1));
    RP_CHECK(rp_runtime_drain(rt));
    RP_CHECK(
        rp_instance_read(rt, rp_gpt_logits(m), logits, nl * sizeof *logits));
    const float *row = logits + (size_t)(k - 1) * V;
    int32_t best = 0;
    for (uint32_t v = 1; v < V; v++)
      best = row[v] > row[best] ? (int32_t)v : best;
    out[i] = best;
  }
  free(logits);
  free(win);
}

/* A model trained for 30 steps (so that the argmax is no coin toss between
 * near-equal logits, yet the tokens still depend on more than the last
 * few: moving the window on by T/4 instead of T/2 in greedy_full makes
 * this test fail): greedy decoding by replay of the decode graph gives the
 * tokens of greedy full-recompute decoding, within the context and past it
 * (where both move the window on by T/2), from a one-token prompt, a short
 * one and one longer than the context. */
Test(gpt_backends, greedy_decoding_equals_greedy_full_recompute) {
  tt t;
  tt_init(&t, 1, 1);
  rp_gpt_train_opts o = {.iters = 30, .lr = 1e-2f, .warmup = 3};
  RP_CHECK(rp_gpt_train(t.m, t.ex, &t.text, &o));
  const rp_gpt_config *c = rp_gpt_cfg(t.m);
  uint32_t T = c->context, B = c->batch;
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(t.rt, rp_gpt_procs(t.m)[0], &pi));
  rp_inst tok;
  rp_rect r = rp_rect_2d(0, 0, 0, T - 1);
  RP_CHECK(rp_instance_create(t.rt, pi.local, RP_I32, &r, NULL, &tok));
  rp_graph *g;
  RP_CHECK(rp_gpt_decode_record(t.m, &g));
  rp_exec *dec;
  RP_CHECK(rp_instantiate(g, NULL, &dec));
  RP_CHECK(rp_graph_destroy(g));
  uint32_t plens[] = {1, 5, T + 3}, n = 3 * T + 4; /* 52 tokens, 2 wraps */
  int32_t text[64]; /* prompts from the validation split */
  cr_assert_leq(T + 3, 64);
  for (uint32_t i = 0; i < T + 3; i++)
    text[i] = t.text.tokens[t.text.ntrain + i];
  int32_t *rep = malloc((T + 3 + n) * sizeof *rep);
  int32_t *full = malloc((T + 3 + n) * sizeof *full);
  for (size_t p = 0; p < sizeof plens / sizeof plens[0]; p++) {
    uint32_t plen = plens[p];
    RP_CHECK(rp_gpt_generate(t.m, dec, text, plen, n,
                             &(rp_gpt_sampling){.temperature = 0, .seed = 1},
                             rep));
    greedy_full(t.rt, t.m, tok, B, text, plen, n, full);
    for (uint32_t i = 0; i < plen + n; i++)
      cr_assert_eq(rep[i], full[i],
                   "prompt of %u: token %u is %d by replay, %d by full "
                   "recompute",
                   plen, i, rep[i], full[i]);
    /* not a constant run: the comparison covers distinct tokens */
    uint32_t changes = 0;
    for (uint32_t i = plen + 1; i < plen + n; i++)
      changes += rep[i] != rep[i - 1];
    cr_assert_gt(changes, 4, "prompt of %u: %u changes in %u tokens", plen,
                 changes, n);
  }
  free(rep);
  free(full);
  RP_CHECK(rp_exec_destroy(dec));
  RP_CHECK(rp_instance_free(t.rt, tok));
  tt_fini(&t);
}

static void put_bytes(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(b, 1, n, f), n);
  cr_assert_eq(fclose(f), 0);
}

/* Greedy and sampled tokens of decode-step replays of m, from prompt. */
static void decode_tokens(rp_gpt *m, const int32_t *prompt, uint32_t plen,
                          uint32_t n, float temperature, int32_t *out) {
  rp_graph *g;
  rp_exec *ex;
  RP_CHECK(rp_gpt_decode_record(m, &g));
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_gpt_generate(
      m, ex, prompt, plen, n,
      &(rp_gpt_sampling){.temperature = temperature, .seed = 7}, out));
  RP_CHECK(rp_exec_destroy(ex));
}

/* `reprise generate`'s model: a decode-only model (rp_gpt_create_decoder)
 * holds the weights and the decode step's instances, nothing else: its
 * bytes are the weights' plus the decode step's exactly, a quarter of the
 * parameter state a training model of the same shape holds (weights,
 * gradients, both moments), and below a third of that model's bytes. The
 * checkpoint's weights streamed into it (rp_gpt_ckpt_load_weights) are
 * the trained model's bitwise, and it decodes the same tokens (greedy and
 * sampled); the training calls refuse it. */
Test(gpt_backends, a_decode_only_model_holds_the_weights_and_decodes_alike) {
  tt t;
  tt_init(&t, 1, 1);
  th_tmpdir_make("/tmp/rp_gpt_XXXXXX");
  tt_train(&t, 0, 10);
  rp_gpt_ckpt info;
  memset(&info, 0, sizeof info);
  memcpy(info.bytes, t.text.bytes, t.text.vocab);
  const char *path = th_tmp_path("gpt.ckpt");
  RP_CHECK(rp_gpt_save(t.m, path, &info));
  rp_gpt_ckpt k;
  RP_CHECK(rp_gpt_ckpt_read_info(path, &k));
  cr_assert(k.data == NULL && k.ndata == 3 * rp_gpt_param_count(t.m));
  rp_gpt_config c = *rp_gpt_cfg(t.m);
  c.batch = 1; /* what generate built before: one row, a ring of 1 */
  c.ring = 1;
  const rp_kernel_tasks *kt = &t.k;
  rp_gpt *full, *dec;
  RP_CHECK(rp_gpt_create(t.rt, kt, &c, &full));
  uint64_t before = 0, after = 0, state = 0, dtotal = 0, dstate = 0;
  RP_CHECK(rp_gpt_proc_bytes(full, 0, &before, &state));
  rp_graph *g;
  RP_CHECK(rp_gpt_decode_record(full, &g));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_gpt_proc_bytes(full, 0, &after, &state));
  RP_CHECK(rp_gpt_create_decoder(t.rt, kt, &c, &dec));
  RP_CHECK(rp_gpt_proc_bytes(dec, 0, &dtotal, &dstate));
  uint64_t wbytes = rp_gpt_param_count(t.m) * sizeof(float);
  cr_assert_eq(state, 4 * wbytes, "training state %llu bytes",
               (unsigned long long)state);
  cr_assert_eq(dstate, wbytes, "decode-only state %llu bytes, weights %llu",
               (unsigned long long)dstate, (unsigned long long)wbytes);
  cr_assert_eq(dtotal, wbytes + (after - before),
               "decode-only model %llu bytes: weights %llu + decode step "
               "%llu",
               (unsigned long long)dtotal, (unsigned long long)wbytes,
               (unsigned long long)(after - before));
  cr_assert_lt(3 * dtotal, after, "%llu bytes, the training model %llu",
               (unsigned long long)dtotal, (unsigned long long)after);
  /* the weights, streamed from the file, are the trained model's */
  RP_CHECK(rp_gpt_ckpt_load_weights(dec, path, NULL));
  size_t n = rp_gpt_param_count(t.m);
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  RP_CHECK(rp_gpt_params_read(t.m, a, n));
  RP_CHECK(rp_gpt_params_read(dec, b, n));
  cr_assert(!memcmp(a, b, n * sizeof *a), "loaded weights differ");
  int32_t prompt[3];
  for (int i = 0; i < 3; i++)
    prompt[i] = t.text.tokens[t.text.ntrain + i];
  int32_t want[3 + 40], got[3 + 40];
  for (int temp = 0; temp < 2; temp++) {
    decode_tokens(t.m, prompt, 3, 40, (float)temp, want);
    decode_tokens(dec, prompt, 3, 40, (float)temp, got);
    cr_assert(!memcmp(want, got, sizeof want),
              "temperature %d: the decode-only model's tokens differ", temp);
  }
  /* no training state: the calls that need one refuse it, nothing done */
  rp_gpt_step_args sa = {.batch = 0, .lr = 1e-3f, .step = 1};
  RP_EXPECT(rp_gpt_step(dec, &sa), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_step: a decode-only model"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_gpt_tensor_read(dec, 0, RP_GPT_MOM1, a,
                               (size_t)rp_gpt_param(dec, 0)->rows *
                                   rp_gpt_param(dec, 0)->cols),
            RP_EINVAL);
  RP_EXPECT(rp_gpt_sample(dec, prompt, 3, 1,
                          &(rp_gpt_sampling){.temperature = 0}, got),
            RP_EINVAL);
  RP_EXPECT(rp_gpt_record(dec, &g), RP_EINVAL);
  RP_EXPECT(rp_gpt_save(dec, path, &info), RP_EINVAL);
  RP_CHECK(rp_gpt_params_read(dec, b, n));
  cr_assert(!memcmp(a, b, n * sizeof *a), "a refused call changed weights");
  free(a);
  free(b);
  RP_CHECK(rp_gpt_destroy(dec));
  RP_CHECK(rp_gpt_destroy(full));
  tt_fini(&t);
  th_tmpdir_remove();
}

/* The checkpoint tests' fixture: a CPU runtime of 1 worker and its
 * kernels; the config c of their models (1 layer, width 16, 2 heads,
 * context 8, a 5-byte vocabulary, batch 2) and three models of it: a
 * training model a, a training model b and a decode-only d, b's seed a's +
 * 1, d's a's + d_seed (0: a's weights, 1: b's); a scratch folder, the
 * path of w.ckpt in it and the info of a save (the vocabulary "abcde"). */
typedef struct ckfix {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_gpt_config c;
  rp_gpt *a, *b, *d;
  rp_gpt_ckpt info;
  const char *path;
} ckfix;

static rp_gpt *ckfix_model(ckfix *f, int decoder);

static void ckfix_init(ckfix *f, uint64_t d_seed) {
  f->rt = th_cpu_runtime(1);
  RP_CHECK(rp_kernels_register(f->rt, &f->k));
  rp_gpt_config_init(&f->c);
  f->c.layers = 1;
  f->c.width = 16;
  f->c.heads = 2;
  f->c.context = 8;
  f->c.vocab = 5;
  f->c.batch = 2;
  f->c.ring = 1;
  th_tmpdir_make("/tmp/rp_gpt_XXXXXX");
  memset(&f->info, 0, sizeof f->info);
  for (int i = 0; i < 5; i++)
    f->info.bytes[i] = (uint8_t)('a' + i);
  f->path = th_tmp_path("w.ckpt");
  uint64_t seed = f->c.seed;
  f->a = ckfix_model(f, 0);
  f->c.seed = seed + 1;
  f->b = ckfix_model(f, 0);
  f->c.seed = seed + d_seed;
  f->d = ckfix_model(f, 1);
  f->c.seed = seed;
}

/* A model of f->c: a training one, or decode-only (decoder). */
static rp_gpt *ckfix_model(ckfix *f, int decoder) {
  rp_gpt *m;
  RP_CHECK(decoder ? rp_gpt_create_decoder(f->rt, &f->k, &f->c, &m)
                   : rp_gpt_create(f->rt, &f->k, &f->c, &m));
  return m;
}

/* Destroys the models, the folder and the runtime. */
static void ckfix_fini(ckfix *f) {
  RP_CHECK(rp_gpt_destroy(f->d));
  RP_CHECK(rp_gpt_destroy(f->b));
  RP_CHECK(rp_gpt_destroy(f->a));
  th_tmpdir_remove();
  th_destroy(f->rt);
}

/* What state_of reads: the weights alone, or the whole state. */
enum { WEIGHTS = 1, STATE = 3 };

/* m's weights (WEIGHTS) or every weight and both moments (STATE), tensor
 * after tensor (malloc'd; *n floats). */
static float *state_of(rp_gpt *m, int slots, size_t *n) {
  *n = (size_t)slots * rp_gpt_param_count(m);
  float *all = malloc(*n * sizeof *all), *q = all;
  cr_assert_not_null(all);
  const rp_gpt_slot slot[] = {RP_GPT_WEIGHT, RP_GPT_MOM1, RP_GPT_MOM2};
  for (uint32_t i = 0; i < rp_gpt_param_tensors(m); i++) {
    const rp_gpt_param_info *p = rp_gpt_param(m, i);
    size_t k = (size_t)p->rows * p->cols;
    for (int s = 0; s < slots; s++, q += k)
      RP_CHECK(rp_gpt_tensor_read(m, i, slot[s], q, k));
  }
  return all;
}

/* m's weights or state (slots) are still `was` (n floats, state_of's). */
static void state_is(rp_gpt *m, int slots, const float *was, size_t n,
                     const char *why) {
  size_t k;
  float *now = state_of(m, slots, &k);
  cr_assert_eq(k, n);
  cr_assert(!memcmp(now, was, n * sizeof *now), "%s: the model changed", why);
  free(now);
}

/* The error detail names the file and says each of what[] (NULL-ended). */
static void detail_says(const char *path, const char *const *what) {
  const char *e = rp_error_detail();
  cr_assert(strstr(e, path), "not naming %s: %s", path, e);
  for (int i = 0; what[i]; i++)
    cr_assert(strstr(e, what[i]), "not saying '%s': %s", what[i], e);
}
#define DETAIL_SAYS(path, ...)                                                 \
  detail_says((path), (const char *const[]){__VA_ARGS__, NULL})

/* call (a load into m) fails with want, the detail naming path and saying
 * each of the texts after it, m's weights or state (slots) unchanged. */
#define LOAD_REFUSED(m, slots, call, want, path, ...)                          \
  do {                                                                         \
    size_t n_;                                                                 \
    float *was_ = state_of((m), (slots), &n_);                                 \
    RP_EXPECT((call), (want));                                                 \
    DETAIL_SAYS((path), __VA_ARGS__);                                          \
    state_is((m), (slots), was_, n_, #call);                                   \
    free(was_);                                                                \
  } while (0)

/* A checkpoint streamed into a model (rp_gpt_ckpt_read_info, then
 * rp_gpt_ckpt_load_weights) is checked as a whole read is: a flipped
 * payload byte is RP_ECHECKSUM both ways (load: at the end, after its
 * weights were written), another architecture RP_ESHAPE naming the
 * file, a truncated file RP_EFORMAT. */
Test(gpt, a_streamed_checkpoint_is_checked_as_a_whole_read) {
  ckfix f;
  ckfix_init(&f, 0);
  rp_gpt *m = f.a, *d = f.d;
  const char *path = f.path;
  RP_CHECK(rp_gpt_save(m, path, &f.info));
  RP_CHECK(rp_gpt_ckpt_load_weights(d, path, NULL));
  size_t len;
  char *buf = th_read_all(path, &len);
  cr_assert_not_null(buf);
  buf[len - 3] ^= 0x10; /* a second moment's byte */
  const char *bad = th_tmp_path("bad.ckpt");
  put_bytes(bad, buf, len);
  rp_gpt_ckpt got;
  RP_EXPECT(rp_gpt_ckpt_read_info(bad, &got), RP_ECHECKSUM);
  cr_assert(strstr(rp_error_detail(), "checksum mismatch"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_gpt_ckpt_load_weights(d, bad, NULL), RP_ECHECKSUM);
  const char *cut = th_tmp_path("cut.ckpt");
  put_bytes(cut, buf, len - 1);
  RP_EXPECT(rp_gpt_ckpt_read_info(cut, &got), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "truncated"), "%s", rp_error_detail());
  free(buf);
  f.c.width = 32;
  rp_gpt *other = ckfix_model(&f, 1);
  RP_EXPECT(rp_gpt_ckpt_load_weights(other, path, NULL), RP_ESHAPE);
  DETAIL_SAYS(path, "width 16");
  RP_CHECK(rp_gpt_destroy(other));
  ckfix_fini(&f);
}

/* rp_gpt_create_decoder takes of its config the architecture, the seed
 * and max_bytes alone: the training fields (batch, layout, ring, AdamW,
 * clipping) are not looked at, so values a training model refuses are
 * no error, and the weights are those of the clean config's decoder. */
Test(gpt, a_decoder_ignores_the_training_fields_of_its_config) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = 1;
  c.width = 16;
  c.heads = 2;
  c.context = 8;
  c.vocab = 5;
  rp_gpt_config odd = c;
  odd.batch = 0;
  odd.procs = 0;
  odd.tp = 3;
  odd.ring = 0;
  odd.beta1 = 1.5f;
  odd.beta2 = -1.0f;
  odd.eps = 0.0f;
  odd.weight_decay = NAN;
  odd.max_norm = INFINITY;
  rp_gpt *a, *b;
  RP_EXPECT(rp_gpt_create(rt, &k, &odd, &a), RP_EINVAL);
  RP_CHECK(rp_gpt_create_decoder(rt, &k, &odd, &a));
  RP_CHECK(rp_gpt_create_decoder(rt, &k, &c, &b));
  size_t n = rp_gpt_param_count(a);
  cr_assert_eq(n, rp_gpt_param_count(b));
  float *wa = malloc(n * sizeof *wa), *wb = malloc(n * sizeof *wb);
  cr_assert(wa && wb);
  RP_CHECK(rp_gpt_params_read(a, wa, n));
  RP_CHECK(rp_gpt_params_read(b, wb, n));
  cr_assert(!memcmp(wa, wb, n * sizeof *wa), "other weights");
  free(wa);
  free(wb);
  RP_CHECK(rp_gpt_destroy(b));
  RP_CHECK(rp_gpt_destroy(a));
  th_destroy(rt);
}

/* generate reads a checkpoint's header and vocabulary
 * (rp_gpt_ckpt_read_info), then streams its weights
 * (rp_gpt_ckpt_load_weights with that info): a file replaced in between
 * by another checkpoint of the same architecture (other weights, which
 * would be decoded with the first file's vocabulary) is refused before
 * any weight is written, RP_ECHECKSUM naming the file, the model
 * unchanged; the file read is loaded with its info. */
Test(gpt, a_weights_load_refuses_a_file_replaced_since_it_was_read) {
  ckfix f;
  ckfix_init(&f, 2); /* b: other weights than a's and d's */
  rp_gpt *a = f.a, *b = f.b, *d = f.d;
  const char *path = f.path;
  RP_CHECK(rp_gpt_save(a, path, &f.info));
  rp_gpt_ckpt got;
  RP_CHECK(rp_gpt_ckpt_read_info(path, &got));
  f.info.bytes[4] = 'z'; /* another vocabulary, other weights */
  RP_CHECK(rp_gpt_save(b, path, &f.info));
  LOAD_REFUSED(d, WEIGHTS, rp_gpt_ckpt_load_weights(d, path, &got),
               RP_ECHECKSUM, path, "the file changed since it was read",
               "nothing loaded");
  /* the file as read: loaded, b's weights */
  RP_CHECK(rp_gpt_ckpt_read_info(path, &got));
  RP_CHECK(rp_gpt_ckpt_load_weights(d, path, &got));
  size_t nb;
  float *want = state_of(b, WEIGHTS, &nb);
  state_is(d, WEIGHTS, want, nb, "not the file's weights");
  free(want);
  ckfix_fini(&f);
}

/* A checkpoint cut short after rp_gpt_ckpt_read_info checked it (the
 * file shrank between that check and the load's reads) is refused by the
 * weights' load (generate) and the resume (train --load-weights) before
 * anything is written: RP_EFORMAT naming the file and the cut, the model
 * unchanged. */
Test(gpt, a_load_refuses_a_file_cut_since_it_was_read) {
  ckfix f;
  ckfix_init(&f, 1); /* b and d: other weights than a's */
  rp_gpt *a = f.a, *b = f.b, *d = f.d;
  const char *path = f.path;
  RP_CHECK(rp_gpt_save(a, path, &f.info));
  rp_gpt_ckpt got;
  RP_CHECK(rp_gpt_ckpt_read_info(path, &got));
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(truncate(path, sb.st_size / 2), 0);
  LOAD_REFUSED(d, WEIGHTS, rp_gpt_ckpt_load_weights(d, path, &got), RP_EFORMAT,
               path, "truncated");
  LOAD_REFUSED(b, STATE, rp_gpt_ckpt_load(b, path, &got), RP_EFORMAT, path,
               "truncated");
  ckfix_fini(&f);
}

/* A resume (rp_gpt_ckpt_load: the weights and both moments streamed into
 * a training model) checks the whole file before it writes anything: a
 * corrupt file (RP_ECHECKSUM), a value it would refuse (RP_EFORMAT, the
 * last one of the file), another architecture (RP_ESHAPE naming the file)
 * and a file replaced since rp_gpt_ckpt_read_info read it (RP_ECHECKSUM)
 * leave the model bitwise as it was; a good file gives it the saved
 * weights and moments bitwise. */
Test(gpt, a_resume_checks_the_whole_file_before_it_writes) {
  ckfix f;
  ckfix_init(&f, 1); /* b and d: other weights than a's */
  rp_gpt *a = f.a, *b = f.b, *d = f.d;
  /* moments that are not zero, each value its own */
  for (uint32_t i = 0; i < rp_gpt_param_tensors(a); i++) {
    const rp_gpt_param_info *p = rp_gpt_param(a, i);
    size_t n = (size_t)p->rows * p->cols;
    float *v = malloc(n * sizeof *v);
    cr_assert_not_null(v);
    for (size_t j = 0; j < n; j++)
      v[j] = 0.25f * (float)(i + 1) + 1e-3f * (float)j;
    RP_CHECK(rp_gpt_tensor_write(a, i, RP_GPT_MOM2, v, n));
    for (size_t j = 0; j < n; j++)
      v[j] = -v[j];
    RP_CHECK(rp_gpt_tensor_write(a, i, RP_GPT_MOM1, v, n));
    free(v);
  }
  f.info.step = 3;
  f.info.iters = 10;
  f.info.lr = 1e-3f;
  const char *path = f.path, *bad = th_tmp_path("bad.ckpt");
  RP_CHECK(rp_gpt_save(a, path, &f.info));
  size_t an, len;
  float *want = state_of(a, STATE, &an);
  char *buf = th_read_all(path, &len);
  cr_assert_not_null(buf);
  unsigned char *pl = (unsigned char *)buf + RP_CKPT_HEAD;
  size_t pn = len - RP_CKPT_HEAD;
  /* the last value of the file: the last tensor's last second moment */
  buf[len - 2] ^= 0x10;
  put_bytes(bad, buf, len);
  LOAD_REFUSED(b, STATE, rp_gpt_ckpt_load(b, bad, NULL), RP_ECHECKSUM, bad,
               "checksum mismatch");
  buf[len - 2] ^= 0x10;
  const float bads[] = {-1.0f, NAN};
  for (int i = 0; i < 2; i++) { /* resealed: the GPT's own checks */
    rp_le_putf(pl + pn - 4, bads[i]);
    RP_CHECK(rp_ckpt_save(bad, "gpt", 3, pl, pn));
    LOAD_REFUSED(b, STATE, rp_gpt_ckpt_load(b, bad, NULL), RP_EFORMAT, bad,
                 i ? "finite" : "second AdamW moment");
  }
  /* read, then replaced by another checkpoint before the load */
  RP_CHECK(rp_gpt_save(a, bad, &f.info));
  rp_gpt_ckpt got;
  RP_CHECK(rp_gpt_ckpt_read_info(bad, &got));
  cr_assert_eq(got.step, 3);
  f.info.step = 4;
  RP_CHECK(rp_gpt_save(a, bad, &f.info));
  LOAD_REFUSED(b, STATE, rp_gpt_ckpt_load(b, bad, &got), RP_ECHECKSUM, bad,
               "the file changed since it was read", "nothing loaded");
  /* a decode-only model has no moments; another shape is named */
  RP_EXPECT(rp_gpt_ckpt_load(d, path, NULL), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_ckpt_load"), "%s",
            rp_error_detail());
  f.c.width = 32;
  rp_gpt *other = ckfix_model(&f, 0);
  LOAD_REFUSED(other, STATE, rp_gpt_ckpt_load(other, path, NULL), RP_ESHAPE,
               path, "width 16");
  RP_CHECK(rp_gpt_destroy(other));
  /* a good file: a's state, bitwise, with or without info */
  RP_CHECK(rp_gpt_ckpt_load(b, path, NULL));
  state_is(b, STATE, want, an, "a good file");
  RP_CHECK(rp_gpt_reset(b));
  RP_CHECK(rp_gpt_ckpt_read_info(path, &got));
  RP_CHECK(rp_gpt_ckpt_load(b, path, &got));
  state_is(b, STATE, want, an, "a good file, info given");
  free(buf);
  free(want);
  ckfix_fini(&f);
}

/* ---- host-side units (CPU only) ---- */

Test(gpt, text_vocabulary_is_the_bytes_present_in_order) {
  const char *s = "ba\ncab\nbaa\nabcab\nbbb\nccc\naaa\nbcb\ncbc\nabc\nxyz\n";
  rp_text t;
  RP_CHECK(rp_text_from_bytes("s", (const uint8_t *)s, strlen(s), 2, &t));
  cr_assert_eq(t.vocab, 7); /* \n a b c x y z */
  cr_assert_eq(t.bytes[0], '\n');
  cr_assert_eq(t.bytes[1], 'a');
  cr_assert_eq(t.bytes[6], 'z');
  cr_assert_eq(t.tokens[0], 2); /* 'b' */
  cr_assert_eq(t.ntrain, t.n - t.n / 10);
  rp_text_free(&t);
}

/* rp_text_digest is FNV-1a 64 of the text's own bytes (past its 4 KiB
 * blocks too): the same bytes give it, another order of the same bytes (the
 * same vocabulary) does not. */
Test(gpt, text_digest_is_the_fnv1a_of_its_bytes) {
  size_t n = 10000;
  uint8_t *b = malloc(n), *r = malloc(n);
  cr_assert(b && r);
  for (size_t i = 0; i < n; i++)
    b[i] = (uint8_t)("the cat sat\n"[i % 12]);
  for (size_t i = 0; i < n; i++)
    r[i] = b[n - 1 - i];
  rp_text t, u;
  RP_CHECK(rp_text_from_bytes("b", b, n, 8, &t));
  RP_CHECK(rp_text_from_bytes("r", r, n, 8, &u));
  cr_assert_eq(t.vocab, u.vocab);
  cr_assert_eq(rp_text_digest(&t), rp_fnv1a64(RP_FNV64_INIT, b, n));
  cr_assert_eq(rp_text_digest(&u), rp_fnv1a64(RP_FNV64_INIT, r, n));
  cr_assert_neq(rp_text_digest(&t), rp_text_digest(&u));
  rp_text_free(&t);
  rp_text_free(&u);
  free(b);
  free(r);
}

Test(gpt, text_too_short_or_of_one_byte_is_refused) {
  rp_text t;
  RP_EXPECT(rp_text_from_bytes("s", (const uint8_t *)"abababab", 8, 4, &t),
            RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "s: 8 bytes"), "%s", rp_error_detail());
  RP_EXPECT(rp_text_from_bytes("s", (const uint8_t *)"aaaaaaaa", 8, 1, &t),
            RP_EFORMAT);
  RP_EXPECT(rp_text_load("/nonexistent/corpus.txt", 0, 4, &t), RP_ENOENT);
  cr_assert(strstr(rp_error_detail(), "/nonexistent/corpus.txt"));
}

Test(gpt, bigram_loss_is_add_one_smoothed_counts) {
  const char *s = "abababababababababab"; /* 20 bytes: 18 train */
  rp_text t;
  RP_CHECK(rp_text_from_bytes("s", (const uint8_t *)s, 20, 1, &t));
  cr_assert_eq(t.ntrain, 18);
  int32_t x[2] = {0, 1}, y[2] = {1, 1};
  double got = rp_text_bigram_loss(&t, x, y, 2);
  /* pairs of tokens 0..17: a->b 9 times, b->a 8 times; V = 2 */
  double want = -(log((9.0 + 1) / (9 + 2)) + log((0.0 + 1) / (8 + 2))) / 2;
  cr_assert(fabs(got - want) < 1e-12, "%.12g vs %.12g", got, want);
  rp_text_free(&t);
}

Test(gpt, windows_depend_on_the_seed_and_batch_index_alone) {
  uint8_t *b = make_text(5000);
  rp_text t;
  RP_CHECK(rp_text_from_bytes("t", b, 5000, 8, &t));
  int32_t x1[3 * 2 * 8], y1[3 * 2 * 8], x2[2 * 8], y2[2 * 8];
  RP_CHECK(rp_text_windows(&t, 0, t.ntrain, 2, 8, 5, 10, 3, x1, y1));
  RP_CHECK(rp_text_windows(&t, 0, t.ntrain, 2, 8, 5, 12, 1, x2, y2));
  cr_assert(!memcmp(x1 + 2 * 16, x2, sizeof x2), "batch 12 differs");
  for (int i = 0; i < 16; i++) /* targets are the inputs shifted by one */
    if (i % 8 != 7)
      cr_assert_eq(y2[i], x2[i + 1]);
  /* a range with no window of T + 1 tokens (it crashed): refused */
  RP_EXPECT(rp_text_windows(&t, 100, 108, 2, 8, 5, 0, 1, x2, y2), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "tokens [100, 108) of 5000 hold no "
                                      "window of 8 + 1 tokens"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_text_windows(&t, 100, 107, 2, 8, 5, 0, 1, x2, y2), RP_ERANGE);
  RP_EXPECT(rp_text_windows(&t, 0, 5001, 2, 8, 5, 0, 1, x2, y2), RP_ERANGE);
  RP_CHECK(rp_text_windows(&t, 100, 109, 2, 8, 5, 0, 1, x2, y2));
  free(b);
  rp_text_free(&t);
}

/* Neighbouring batches draw independent windows (seeding each batch's
 * stream with index-spaced splitmix64 states once made batch k + 1 batch
 * k shifted by one window). */
Test(gpt, neighbouring_batches_share_no_windows) {
  uint8_t *b = make_text(20000);
  rp_text t;
  RP_CHECK(rp_text_from_bytes("t", b, 20000, 32, &t));
  enum { NB = 16, BW = 8, TW = 32 };
  static int32_t x[NB * BW * TW], y[NB * BW * TW];
  RP_CHECK(rp_text_windows(&t, 0, t.ntrain, BW, TW, 1, 0, NB, x, y));
  int shared = 0;
  for (int k = 0; k + 1 < NB; k++)
    for (int i = 0; i < BW; i++)
      for (int j = 0; j < BW; j++)
        shared += !memcmp(x + (k * BW + i) * TW, x + ((k + 1) * BW + j) * TW,
                          TW * sizeof *x);
  cr_assert_leq(shared, 2, "%d windows shared between neighbouring batches",
                shared);
  free(b);
  rp_text_free(&t);
}

/* max_bytes: a model whose instances would take more is refused before
 * they are made (what it made is freed: th_destroy's leak check), and one
 * within it is built. */
Test(gpt, max_bytes_refuses_a_model_larger_than_the_limit) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_kernel_tasks k;
  RP_CHECK(rp_kernels_register(rt, &k));
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.max_bytes = (uint64_t)1 << 30;
  rp_gpt *m;
  RP_CHECK(rp_gpt_create(rt, &k, &c, &m));
  uint64_t total = 0, state = 0;
  RP_CHECK(rp_gpt_proc_bytes(m, 0, &total, &state));
  cr_assert(total > (1u << 20) && total <= c.max_bytes, "%llu bytes",
            (unsigned long long)total);
  RP_CHECK(rp_gpt_destroy(m));
  /* refused naming the whole model's size (one processor: all of it on
   * processor 0), not the size at which the build passed the limit */
  c.max_bytes = 1u << 20; /* the default model takes several MiB */
  m = (rp_gpt *)(uintptr_t)0x1;
  RP_EXPECT(rp_gpt_create(rt, &k, &c, &m), RP_ENOMEM);
  char want[160];
  snprintf(want, sizeof want,
           "would take %.1f MiB (%llu bytes) on this rank, above the limit "
           "of 1.0 MiB (max_bytes: 1048576 bytes)",
           (double)total / (1u << 20), (unsigned long long)total);
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  /* the build with the room it needs after a refusal: the same model */
  c.max_bytes = total;
  RP_CHECK(rp_gpt_create(rt, &k, &c, &m));
  uint64_t again = 0;
  RP_CHECK(rp_gpt_proc_bytes(m, 0, &again, &state));
  cr_assert_eq(again, total);
  /* the decode step's instances come later: the limit bounds them too */
  rp_graph *g = NULL;
  RP_EXPECT(rp_gpt_decode_record(m, &g), RP_ENOMEM);
  cr_assert(strstr(rp_error_detail(),
                   "rp_gpt_decode_record: the decode step: the model's "
                   "instances would take ") &&
                strstr(rp_error_detail(), "with these, above the limit"),
            "%s", rp_error_detail());
  /* the refusal leaves no decode step behind: asked again, it is refused
   * again (not recorded over instances never made), and fill too */
  RP_EXPECT(rp_gpt_decode_record(m, &g), RP_ENOMEM);
  cr_assert(strstr(rp_error_detail(), "with these, above the limit"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_gpt_decode_fill(m), RP_ENOMEM);
  cr_assert(rp_gpt_decode_logits(m).id == 0);
  RP_CHECK(rp_gpt_proc_bytes(m, 0, &again, &state));
  cr_assert_eq(again, total);
  RP_CHECK(rp_gpt_destroy(m));
  /* room for part of the decode step: what it made is freed again */
  c.max_bytes = total + 4 * (uint64_t)c.context * c.width * sizeof(float);
  RP_CHECK(rp_gpt_create(rt, &k, &c, &m));
  RP_EXPECT(rp_gpt_decode_record(m, &g), RP_ENOMEM);
  RP_CHECK(rp_gpt_proc_bytes(m, 0, &again, &state));
  cr_assert_eq(again, total, "%llu bytes after the refusal, %llu before",
               (unsigned long long)again, (unsigned long long)total);
  RP_EXPECT(rp_gpt_decode_record(m, &g), RP_ENOMEM);
  RP_CHECK(rp_gpt_destroy(m));
  th_destroy(rt);
}

/* The save tests' start: a scratch folder, the fixture's model on the CPU
 * (*fx, *t) and a save's info whose vocabulary is every byte; returns the
 * path of w.ckpt in the folder. save_end: what save_start made, freed. */
static const char *save_start(fixture *fx, tg *t, rp_gpt_ckpt *info) {
  th_tmpdir_make("/tmp/rp_gpt_XXXXXX");
  fx_load(fx);
  tg_init(t, fx, RP_BACKEND_CPU, 1, 1);
  memset(info, 0, sizeof *info);
  for (uint32_t i = 0; i < RP_GPT_MAX_VOCAB; i++)
    info->bytes[i] = (uint8_t)i;
  return th_tmp_path("w.ckpt");
}

static void save_end(fixture *fx, tg *t) {
  tg_fini(t);
  fx_free(fx);
  th_tmpdir_remove();
}

Test(gpt, config_and_checkpoint_errors_are_precise) {
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.width = 30; /* not a multiple of 4 heads */
  RP_EXPECT(rp_gpt_config_check(&c), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "multiple of heads"));
  cr_assert(!strncmp(rp_error_detail(), "rp_gpt_config_check: ", 21), "%s",
            rp_error_detail());
  rp_gpt_config_init(&c); /* the split rp_gpt_create makes is checked */
  c.batch = 5;
  c.procs = 4;
  RP_EXPECT(rp_gpt_config_check(&c), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "batch 5"), "%s", rp_error_detail());
  RP_EXPECT(rp_gpt_split_check(4, 1, 3, 2), RP_EINVAL); /* no layout */
  cr_assert(strstr(rp_error_detail(), "procs 3 is not a multiple of tp 2"),
            "%s", rp_error_detail());
  rp_gpt_config_init(&c); /* each AdamW setting named */
  c.eps = INFINITY;
  RP_EXPECT(rp_gpt_config_check(&c), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "AdamW eps = inf"), "%s",
            rp_error_detail());
  rp_gpt_config_init(&c);
  c.weight_decay = INFINITY;
  RP_EXPECT(rp_gpt_config_check(&c), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "AdamW weight_decay = inf"), "%s",
            rp_error_detail());
  rp_gpt_config_init(&c);
  c.beta2 = 1.0f;
  RP_EXPECT(rp_gpt_config_check(&c), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "AdamW beta2 = 1"), "%s",
            rp_error_detail());
  fixture fx;
  tg t;
  rp_gpt_ckpt info, zero;
  const char *path = save_start(&fx, &t, &info);
  memset(&zero, 0, sizeof zero);
  RP_EXPECT(rp_gpt_save(t.m, path, &zero), RP_EINVAL); /* bytes all 0 */
  cr_assert(strstr(rp_error_detail(), "vocabulary byte 1 (0x00) does not "
                                      "follow byte 0 (0x00)"),
            "%s", rp_error_detail());
  /* schedules the reader would refuse: not written */
  const struct {
    uint32_t step, iters, warmup;
    float lr;
    const char *why;
  } sched[] = {
      {0, 0, 0, -1, "lr = -1: lr outside [0, 100]"},
      {0, 0, 0, NAN, "lr = nan: lr outside [0, 100]"},
      {0, 0, 0, 1e30f, "lr outside [0, 100]"},
      {11, 10, 0, 0,
       "step 11, iters 10, warmup 0, lr = 0: more steps done "
       "than iters"},
      {5, 10, 10, 0, "warmup not below iters"},
      {5, 10, 0xffffffffu, 0, "warmup not below iters"},
      {5, 100000001u, 0, 0, "iters above 100000000"},
      {100000001u, 0, 0, 0, "step above 100000000"},
  };
  for (size_t i = 0; i < sizeof sched / sizeof sched[0]; i++) {
    info.step = sched[i].step, info.iters = sched[i].iters;
    info.warmup = sched[i].warmup, info.lr = sched[i].lr;
    RP_EXPECT(rp_gpt_save(t.m, path, &info), RP_EINVAL);
    cr_assert(strstr(rp_error_detail(), sched[i].why), "case %zu: %s", i,
              rp_error_detail());
  }
  info.step = info.iters = info.warmup = 0;
  cr_assert_neq(access(path, F_OK), 0, "a file was written");
  info.lr = 0;
  { /* the token named by array, index and value; the ring is kept */
    size_t nt = (size_t)fx.B * fx.T;
    int32_t *y = malloc(nt * sizeof *y);
    cr_assert(y);
    memcpy(y, fx.y, nt * sizeof *y);
    y[3] = (int32_t)fx.V;
    RP_EXPECT(rp_gpt_write_batches(t.m, fx.x, y, 1), RP_ERANGE);
    char want[64];
    snprintf(want, sizeof want, "y[3] = %u outside [0, %u)", fx.V, fx.V);
    cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
    RP_EXPECT(rp_gpt_write_batches(t.m, fx.x, y, 2), RP_EINVAL); /* ring 1 */
    cr_assert(strstr(rp_error_detail(), "2 batches (ring 1)"), "%s",
              rp_error_detail());
    free(y);
  }
  float one[1];
  RP_EXPECT(
      rp_gpt_tensor_read(t.m, rp_gpt_param_tensors(t.m), RP_GPT_WEIGHT, one, 1),
      RP_EINVAL);
  RP_EXPECT(rp_gpt_tensor_read(t.m, 0, RP_GPT_WEIGHT, one, 1), RP_ESHAPE);
  RP_EXPECT(rp_gpt_params_read(t.m, one, 1), RP_EINVAL);
  char sizes[96];
  snprintf(sizes, sizeof sizes,
           "rp_gpt_params_read: out holds 1 floats, the model has %zu "
           "weights",
           rp_gpt_param_count(t.m));
  cr_assert(strstr(rp_error_detail(), sizes), "%s", rp_error_detail());
  RP_EXPECT(rp_gpt_tensor_write(t.m, 0, RP_GPT_WEIGHT, NULL, 1), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_tensor_write"), "%s",
            rp_error_detail());
  info.text_digest = 0x0123456789abcdefull; /* kept as given */
  RP_CHECK(rp_gpt_save(t.m, path, &info));
  size_t len;
  char *buf = th_read_all(path, &len);
  /* the checkpoint container (train/ckpt.h), kind "gpt" */
  cr_assert(rp_ckpt_is_container((const unsigned char *)buf, len));
  cr_assert_str_eq(buf + 16, "gpt");
  buf[len / 2] ^= 1; /* one bit of a weight */
  put_bytes(path, buf, len);
  rp_gpt_ckpt c2;
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_ECHECKSUM);
  cr_assert(strstr(rp_error_detail(), "checksum mismatch") &&
                strstr(rp_error_detail(), path),
            "%s", rp_error_detail());
  buf[len / 2] ^= 1;
  put_bytes(path, buf, len - 4); /* torn */
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "truncated"), "%s", rp_error_detail());
  put_bytes(path, buf, 30); /* torn inside the header */
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "truncated"), "%s", rp_error_detail());
  for (size_t cut = 1; cut < 8; cut++) { /* inside the magic */
    put_bytes(path, buf, cut);
    RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
    cr_assert(strstr(rp_error_detail(), "truncated: "), "%zu bytes: %s", cut,
              rp_error_detail());
  }
  put_bytes(path, buf, 0); /* empty */
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "an empty file, not a checkpoint"), "%s",
            rp_error_detail());
  put_bytes(path, "RPRSWGHT\1\0\0\0", 12); /* an MLP's bare record */
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "a bare MLP weights record "
                                      "('RPRSWGHT'), not a 'gpt' checkpoint"),
            "%s", rp_error_detail());
  /* payloads resealed in a valid container: the GPT's own checks */
  unsigned char *pl = (unsigned char *)buf + RP_CKPT_HEAD;
  size_t pn = len - RP_CKPT_HEAD;
  RP_CHECK(rp_ckpt_save(path, "mlp", 1, pl, pn)); /* another model's kind */
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "a 'mlp' checkpoint, not a 'gpt' one"),
            "%s", rp_error_detail());
  /* a kind that is no name (a control byte), checksum sealed: a damaged
   * header, its bytes never printed raw */
  unsigned char *hb = (unsigned char *)buf;
  hb[17] = 0x1b; /* "g\x1bt" */
  uint64_t hh = rp_fnv1a64(rp_fnv1a64(RP_FNV64_INIT, hb, 40), pl, pn);
  for (int k = 0; k < 8; k++)
    hb[40 + k] = (unsigned char)(hh >> 8 * k);
  put_bytes(path, buf, len);
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "a damaged header: byte 1 of the kind "
                                      "field is 0x1b") &&
                !strchr(rp_error_detail(), 0x1b),
            "%s", rp_error_detail());
  hb[17] = 'p';
  RP_CHECK(rp_ckpt_save(path, "gpt", 4, pl, pn));
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EVERSION);
  cr_assert(strstr(rp_error_detail(), "payload version 4 (this build reads "
                                      "versions 1 to 3)"),
            "%s", rp_error_detail());
  RP_CHECK(rp_ckpt_save(path, "gpt", 0, pl, pn));
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EVERSION);
  pl[0] = 3; /* 3 layers: the size disagrees */
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn));
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "3 layers") &&
                strstr(rp_error_detail(), "truncated"),
            "%s", rp_error_detail());
  pl[0] = 0; /* no layers */
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn));
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "bad header"), "%s", rp_error_detail());
  pl[0] = 2;
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn)); /* as saved: reads */
  RP_CHECK(rp_gpt_ckpt_read(path, &c2));
  cr_assert(c2.procs == 1 && c2.tp == 1 && c2.ranks == 1,
            "the layout: procs %u tp %u ranks %u", c2.procs, c2.tp, c2.ranks);
  cr_assert_eq(c2.text_digest, 0x0123456789abcdefull, "text digest %llx",
               (unsigned long long)c2.text_digest);
  rp_gpt_ckpt_free(&c2);
  /* version 2 (no text digest) reads, its digest unknown (0) */
  unsigned char *v1 = malloc(pn - 8);
  cr_assert_not_null(v1);
  memcpy(v1, pl, 60);
  memcpy(v1 + 60, pl + 68, pn - 68);
  RP_CHECK(rp_ckpt_save(path, "gpt", 2, v1, pn - 8));
  RP_CHECK(rp_gpt_ckpt_read(path, &c2));
  cr_assert(c2.text_digest == 0 && c2.procs == 1 && c2.layers == 2 &&
                c2.bytes[5] == 5,
            "digest %llx, procs %u", (unsigned long long)c2.text_digest,
            c2.procs);
  rp_gpt_ckpt_free(&c2);
  /* version 1 (no layout fields either) reads, its layout unknown (0) */
  memcpy(v1 + 48, pl + 68, pn - 68);
  RP_CHECK(rp_ckpt_save(path, "gpt", 1, v1, pn - 20));
  free(v1);
  RP_CHECK(rp_gpt_ckpt_read(path, &c2));
  cr_assert(c2.procs == 0 && c2.layers == 2 && c2.text_digest == 0 &&
                c2.bytes[5] == 5,
            "procs %u", c2.procs);
  rp_gpt_ckpt_free(&c2);
  pl[52] = 3; /* tp 3 of procs 1 */
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn));
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "bad header (procs 1, tp 3, ranks 1)"),
            "%s", rp_error_detail());
  pl[52] = 1;
  memset(pl + 56, 0xff, 4); /* 4294967295 ranks: more than MPI counts */
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn));
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "bad header (procs 1, tp 1, ranks "
                                      "4294967295)"),
            "%s", rp_error_detail());
  memset(pl + 56, 0, 4);
  pl[56] = 1;
  uint32_t batch;
  memcpy(&batch, pl + 20, 4);
  memset(pl + 20, 0, 4); /* batch 0 */
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn));
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "bad header") &&
                strstr(rp_error_detail(), "batch 0"),
            "%s", rp_error_detail());
  memcpy(pl + 20, &batch, 4);
  { /* schedules outside the command line's domain (step 24, lr 28,
     * warmup 32, iters 36) */
    unsigned char keep[16];
    memcpy(keep, pl + 24, 16);
    const struct {
      uint32_t step, warmup, iters;
      float lr;
      const char *why;
    } rs[] = {
        {11, 0, 10, 0,
         "(step 11, iters 10, warmup 0, lr 0: more steps "
         "done than iters)"},
        {5, 4294967295u, 10, 0, "warmup not below iters"},
        {5, 0, 10, 1e30f, "lr outside [0, 100]"},
        /* past any --iters: a run would take forever, or its tables more
         * memory than there is */
        {3, 0, 4294967295u, 0, "iters above 100000000"},
        {200000000u, 0, 0, 0, "step above 100000000"},
        {200000000u, 0, 4294967295u, 0, "iters above 100000000"},
    };
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
      uint32_t w[3] = {rs[i].step, 0, rs[i].warmup};
      memcpy(w + 1, &rs[i].lr, 4);
      memcpy(pl + 24, w, 12);
      memcpy(pl + 36, &rs[i].iters, 4);
      RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn));
      RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
      cr_assert(strstr(rp_error_detail(), "bad header") &&
                    strstr(rp_error_detail(), rs[i].why),
                "case %zu: %s", i, rp_error_detail());
    }
    memcpy(pl + 24, keep, 16);
  }
  pl[68 + 5] = pl[68 + 4]; /* a vocabulary byte twice */
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn));
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "vocabulary byte 5 (0x04) does not "
                                      "follow byte 4 (0x04)"),
            "%s", rp_error_detail());
  pl[68 + 5] = 5;
  const float nan = NAN; /* a weight not finite */
  memcpy(pl + pn - 4 * 7, &nan, 4);
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn));
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "is nan: a checkpoint holds finite "
                                      "values only"),
            "%s", rp_error_detail());
  /* the kind field: NUL after the name, up to its 16th byte */
  memset(pl + pn - 4 * 7, 0, 4);
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, pn));
  char *sealed = th_read_all(path, &len);
  sealed[31] = 'x';
  uint64_t h = rp_fnv1a64(rp_fnv1a64(RP_FNV64_INIT, sealed, 40),
                          sealed + RP_CKPT_HEAD, len - RP_CKPT_HEAD);
  memcpy(sealed + 40, &h, 8); /* little-endian, as the container's */
  put_bytes(path, sealed, len);
  free(sealed);
  RP_EXPECT(rp_gpt_ckpt_read(path, &c2), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "byte 15 of the kind field is 0x78"),
            "%s", rp_error_detail());
  /* a model whose weights are not finite is not saved */
  float *w0 = calloc(2048, sizeof *w0); /* wte: 64 x 32 */
  cr_assert_not_null(w0);
  RP_CHECK(rp_gpt_tensor_read(t.m, 0, RP_GPT_WEIGHT, w0, 2048));
  float keep = w0[0];
  w0[0] = INFINITY;
  RP_CHECK(rp_gpt_tensor_write(t.m, 0, RP_GPT_WEIGHT, w0, 2048));
  RP_EXPECT(rp_gpt_save(t.m, path, &info), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "value 0 of the weights and AdamW "
                                      "moments is inf"),
            "%s", rp_error_detail());
  w0[0] = keep;
  RP_CHECK(rp_gpt_tensor_write(t.m, 0, RP_GPT_WEIGHT, w0, 2048));
  free(w0);
  /* a checkpoint struct whose values do not fit the model (apply read
   * past them) and a NULL buffer (a split tensor's read wrote there) */
  RP_CHECK(rp_gpt_save(t.m, path, &info));
  RP_CHECK(rp_gpt_ckpt_read(path, &c2));
  size_t nd = c2.ndata;
  c2.ndata = 10;
  RP_EXPECT(rp_gpt_ckpt_apply(t.m, &c2), RP_ESHAPE);
  cr_assert(strstr(rp_error_detail(), "rp_gpt_ckpt_apply: 10 values"), "%s",
            rp_error_detail());
  c2.ndata = nd;
  { /* a negative second moment (the last element of tensor 1's): refused,
     * and nothing written (tensor 0's weights stay) */
    const rp_gpt_param_info *p0 = rp_gpt_param(t.m, 0),
                            *p1 = rp_gpt_param(t.m, 1);
    size_t n0 = (size_t)p0->rows * p0->cols, n1 = (size_t)p1->rows * p1->cols;
    float *before = malloc(n0 * sizeof *before),
          *after = malloc(n0 * sizeof *after);
    cr_assert(before && after);
    RP_CHECK(rp_gpt_tensor_read(t.m, 0, RP_GPT_WEIGHT, before, n0));
    c2.data[0] += 1.0f;
    c2.data[3 * n0 + 3 * n1 - 1] = -1.0f;
    RP_EXPECT(rp_gpt_ckpt_apply(t.m, &c2), RP_EFORMAT);
    char want[96];
    snprintf(want, sizeof want,
             "%s's second AdamW moment holds -1 at element %zu", p1->name,
             n1 - 1);
    cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
    RP_CHECK(rp_gpt_tensor_read(t.m, 0, RP_GPT_WEIGHT, after, n0));
    cr_assert(!memcmp(before, after, n0 * sizeof *after), "weights changed");
    free(before);
    free(after);
  }
  rp_gpt_ckpt_free(&c2);
  RP_EXPECT(rp_gpt_tensor_read(t.m, 0, RP_GPT_WEIGHT, NULL, 2048), RP_EINVAL);
  cr_assert(!rp_gpt_cfg(NULL) && !rp_gpt_procs(NULL) &&
                !rp_gpt_logits(NULL).id && !rp_gpt_decode_logits(NULL).id,
            "an accessor of no model");
  /* and the MLP refuses a GPT checkpoint by its kind */
  RP_CHECK(rp_gpt_save(t.m, path, &info));
  rp_mlp_ckpt mc;
  RP_EXPECT(rp_mlp_ckpt_read(path, &mc), RP_EFORMAT);
  cr_assert(strstr(rp_error_detail(), "a 'gpt' checkpoint, not a 'mlp' one"),
            "%s", rp_error_detail());
  free(buf);
  save_end(&fx, &t);
}

/* The save goes through the output writer: a save that fails half way
 * (the file size limit) leaves the previous checkpoint whole and no
 * temporary file beside it. */
Test(gpt, a_failed_save_leaves_the_previous_checkpoint_whole) {
  fixture fx;
  tg t;
  rp_gpt_ckpt info;
  const char *path = save_start(&fx, &t, &info);
  info.step = 7;
  RP_CHECK(rp_gpt_save(t.m, path, &info));
  size_t len;
  char *before = th_read_all(path, &len);
  cr_assert_gt(len, 4096);
  info.step = 8;
  signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of a signal */
  struct rlimit old, lim;
  cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = 4096;
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
  rp_status st = rp_gpt_save(t.m, path, &info);
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
  cr_assert_eq(st, RP_EIO, "%s: %s", rp_status_name(st), rp_error_detail());
  cr_assert(strstr(rp_error_detail(), path), "%s", rp_error_detail());
  size_t len2;
  char *after = th_read_all(path, &len2);
  cr_assert(len2 == len && !memcmp(before, after, len),
            "the previous checkpoint changed");
  rp_gpt_ckpt c;
  RP_CHECK(rp_gpt_ckpt_read(path, &c));
  cr_assert_eq(c.step, 7);
  rp_gpt_ckpt_free(&c);
  DIR *d = opendir(th_tmp_path("."));
  cr_assert_not_null(d);
  int entries = 0;
  for (struct dirent *e; (e = readdir(d));)
    entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  cr_assert_eq(entries, 1, "a temporary file was left");
  free(before);
  free(after);
  save_end(&fx, &t);
}

/* A checkpoint's size follows from the config alone: rp_gpt_save_check_config
 * takes the model rp_gpt_save writes (the file is 48 + 68 + V + 12 bytes
 * per parameter) and refuses what rp_gpt_save_check would, with the same
 * detail, before a model is made. */
Test(gpt, a_checkpoint_size_is_known_before_the_model_is_built) {
  fixture fx;
  tg t;
  rp_gpt_ckpt info;
  const char *path = save_start(&fx, &t, &info);
  RP_CHECK(rp_gpt_save(t.m, path, &info));
  size_t len;
  free(th_read_all(path, &len));
  const rp_gpt_config *mc = rp_gpt_cfg(t.m);
  cr_assert_eq(len, 48 + 68 + mc->vocab + 12 * rp_gpt_param_count(t.m),
               "%zu bytes", len);
  RP_CHECK(rp_gpt_save_check(t.m));
  RP_CHECK(rp_gpt_save_check_config(mc));
  unlink(path);
  save_end(&fx, &t);
  /* 32 layers of width 1024, context 8, 15 bytes: 403104768 parameters,
   * a file of 4837257347 bytes */
  rp_gpt_config c;
  rp_gpt_config_init(&c);
  c.layers = 32;
  c.heads = 8;
  c.width = 1024;
  c.context = 8;
  c.vocab = 15;
  RP_EXPECT(rp_gpt_save_check_config(&c), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(),
                   "a model of this size: its checkpoint would be 4837257347 "
                   "bytes, above the 4294967296 bytes a checkpoint may have"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_gpt_save_check_config(NULL), RP_EINVAL);
}

/* The reference draw: the inverse of the softmax(logits / temperature) CDF
 * over the logits at least the k-th largest (ties included; k 0 or >= V:
 * all) at u, in long double, independent of rp_gpt_pick's float and double
 * arithmetic. *margin: u's distance to the nearest CDF step (a draw that
 * close to one may round either way). */
static int32_t pick_ref(const float *lg, uint32_t V, float temp, uint32_t k,
                        double u, long double *margin) {
  long double top = -INFINITY, w[8], z = 0, acc = 0;
  for (uint32_t v = 0; v < V; v++)
    top = lg[v] > top ? lg[v] : top;
  for (uint32_t v = 0; v < V; v++) {
    uint32_t above = 0;
    for (uint32_t j = 0; j < V; j++)
      above += lg[j] > lg[v];
    w[v] = k == 0 || above < k
               ? expl(((long double)lg[v] - top) / (long double)temp)
               : 0;
    z += w[v];
  }
  int32_t got = -1;
  *margin = 1;
  for (uint32_t v = 0; v < V; v++) {
    acc += w[v] / z;
    if (w[v] > 0)
      *margin = fminl(*margin, fabsl(acc - (long double)u));
    if (got < 0 && w[v] > 0 && (long double)u < acc)
      got = (int32_t)v;
  }
  return got;
}

/* rp_gpt_pick inverts the CDF at the uniform it draws (one per draw, the
 * seeded stream's next): every draw is the reference's (pick_ref) at that
 * uniform, for temperatures from the smallest float to 100, top-k with
 * ties at the k-th, and logits at the ends of the float range (no NaN: the
 * two largest, +FLT_MAX, share the draws, -FLT_MAX never drawn). */
Test(gpt, pick_inverts_the_softmax_cdf_at_each_draw) {
  static const float lg[][6] = {{0.3f, -1.2f, 2.5f, 2.5f, 0.0f, -40.0f},
                                {-FLT_MAX, FLT_MAX, FLT_MAX, 0, 1e30f, -1e30f},
                                {1e6f, 1e6f - 3, 1e6f - 1, 0, 5, 1e6f - 1}};
  static const float temps[] = {FLT_TRUE_MIN, 1e-3f, 0.7f, 1, 3, 100};
  static const uint32_t ks[] = {0, 1, 2, 3, 4, 6, 9};
  float scratch[6];
  unsigned close = 0, n = 0;
  for (size_t l = 0; l < sizeof lg / sizeof lg[0]; l++)
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++)
      for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
        rp_rng r;
        rp_rng_seed(&r, 1000 * l + 10 * t + j);
        for (int i = 0; i < 400; i++, n++) {
          rp_rng next = r;
          double u = rp_rng_uniform(&next);
          long double margin;
          int32_t want = pick_ref(lg[l], 6, temps[t], ks[j], u, &margin);
          int32_t got = rp_gpt_pick(lg[l], 6, temps[t], ks[j], scratch, &r);
          cr_assert_eq(r.s, next.s, "one uniform per draw");
          cr_assert(want >= 0 && got >= 0 && got < 6);
          if (margin < 1e-12L) { /* at a step: either side */
            close++;
            continue;
          }
          cr_assert_eq(got, want,
                       "logits %zu, temperature %g, top-k %u, u = %.9g: "
                       "drew %d, the CDF gives %d",
                       l, (double)temps[t], ks[j], u, got, want);
        }
      }
  cr_assert_lt(close, n / 100, "%u of %u draws at a CDF step", close, n);
}

/* rp_gpt_pick: temperature 0 is the first largest logit whatever top_k;
 * top_k keeps the logits at least the k-th largest (ties at it all take
 * part); top_k 0 and >= V draw alike. The draws come from a fixed seed,
 * so the counts are fixed too; the bounds are the distribution's (p = e /
 * (e + 1) = 0.73 for the pair 5, 4) within 7 standard deviations. */
Test(gpt, pick_draws_among_the_top_k) {
  const float lg[5] = {0, 5, 1, 4, 3}, tie[5] = {2, 2, 2, 0, -1};
  float scratch[5];
  rp_rng r;
  rp_rng_seed(&r, 11);
  for (uint32_t k = 0; k < 7; k++) {
    cr_assert_eq(rp_gpt_pick(lg, 5, 0.0f, k, scratch, &r), 1);
    cr_assert_eq(rp_gpt_pick(tie, 5, 0.0f, k, scratch, &r), 0);
  }
  unsigned drawn[5] = {0}, seen_tie[5] = {0};
  for (int i = 0; i < 2000; i++) {
    drawn[rp_gpt_pick(lg, 5, 1.0f, 2, scratch, &r)]++;
    seen_tie[rp_gpt_pick(tie, 5, 1.0f, 1, scratch, &r)]++;
    cr_assert_eq(rp_gpt_pick(lg, 5, 1.0f, 1, scratch, &r), 1);
  }
  cr_assert_eq(drawn[0] + drawn[2] + drawn[4], 0, "outside the top 2");
  cr_assert(drawn[1] >= 2000 * (0.731 - 0.07) &&
                drawn[1] <= 2000 * (0.731 + 0.07),
            "5 against 4: %u of 2000", drawn[1]);
  cr_assert_eq(seen_tie[3] + seen_tie[4], 0, "below the tied top");
  for (int v = 0; v < 3; v++)
    cr_assert(seen_tie[v] > 500, "tied logit %d: %u of 2000", v, seen_tie[v]);
  rp_rng a, b;
  rp_rng_seed(&a, 7);
  rp_rng_seed(&b, 7);
  for (int i = 0; i < 200; i++)
    cr_assert_eq(rp_gpt_pick(lg, 5, 0.7f, 0, scratch, &a),
                 rp_gpt_pick(lg, 5, 0.7f, 5 + (uint32_t)i % 3, scratch, &b));
}

/* Hand-made checkpoint files a user may give --load-weights, each
 * refused naming the file and what is wrong, nothing kept: a GPT payload
 * shorter than its header (of each version), a kind field of NUL bytes
 * under a checksum that matches it, and a file above the 4 GiB a
 * checkpoint may have (sparse: its header consistent with its size). */
Test(gpt, hand_made_checkpoint_headers_are_refused_naming_the_file) {
  th_tmpdir_make("/tmp/rp_gpt_hand_XXXXXX");
  const char *path = th_tmp_path("hand.ckpt");
  unsigned char pl[68] = {0};
  rp_gpt_ckpt c;
  const struct {
    uint32_t version;
    size_t n, head;
  } shorts[] = {{3, 4, 68}, {3, 0, 68}, {3, 67, 68}, {2, 59, 60}, {1, 47, 48}};
  for (size_t i = 0; i < sizeof shorts / sizeof shorts[0]; i++) {
    RP_CHECK(rp_ckpt_save(path, "gpt", shorts[i].version, pl, shorts[i].n));
    char want[160];
    snprintf(want, sizeof want,
             "%s: GPT payload of %zu byte%s (its header alone has %zu)", path,
             shorts[i].n, shorts[i].n == 1 ? "" : "s", shorts[i].head);
    memset(&c, 0x5a, sizeof c);
    RP_EXPECT(rp_gpt_ckpt_read_info(path, &c), RP_EFORMAT);
    cr_assert_str_eq(rp_error_detail(), want, "case %zu", i);
    RP_EXPECT(rp_gpt_ckpt_read(path, &c), RP_EFORMAT);
    cr_assert_str_eq(rp_error_detail(), want, "case %zu", i);
  }
  /* the kind field all NUL, the checksum resealed over it */
  RP_CHECK(rp_ckpt_save(path, "gpt", 3, pl, sizeof pl));
  size_t len;
  unsigned char *b = (unsigned char *)th_read_all(path, &len);
  memset(b + 16, 0, 16);
  uint64_t h = rp_fnv1a64(rp_fnv1a64(RP_FNV64_INIT, b, 40), b + RP_CKPT_HEAD,
                          len - RP_CKPT_HEAD);
  for (int k = 0; k < 8; k++)
    b[40 + k] = (unsigned char)(h >> 8 * k);
  put_bytes(path, b, len);
  char want[256];
  snprintf(want, sizeof want, "%s: a damaged header: the kind field is empty",
           path);
  RP_EXPECT(rp_gpt_ckpt_read_info(path, &c), RP_EFORMAT);
  cr_assert_str_eq(rp_error_detail(), want);
  /* above the limit: 4 GiB + 1 byte, its header saying so (sparse) */
  uint64_t size = RP_GPT_CKPT_MAX + 1, payload = size - RP_CKPT_HEAD;
  for (int k = 0; k < 8; k++)
    b[32 + k] = (unsigned char)(payload >> 8 * k);
  memcpy(b + 16, "gpt", 3);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(b, 1, RP_CKPT_HEAD, f), RP_CKPT_HEAD);
  cr_assert_eq(fclose(f), 0);
  cr_assert_eq(truncate(path, (off_t)size), 0);
  snprintf(want, sizeof want,
           "%s: the file has %llu bytes, above the limit of %llu", path,
           (unsigned long long)size, (unsigned long long)RP_GPT_CKPT_MAX);
  RP_EXPECT(rp_gpt_ckpt_read_info(path, &c), RP_ERANGE);
  cr_assert_str_eq(rp_error_detail(), want);
  RP_EXPECT(rp_gpt_ckpt_read(path, &c), RP_ERANGE);
  cr_assert_str_eq(rp_error_detail(), want);
  free(b);
  th_tmpdir_remove();
}
