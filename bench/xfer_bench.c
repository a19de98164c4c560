/* bench/xfer_bench.c — planned copies against memcpy.
 *
 * For each case and size: the throughput of a planned descriptor used as a
 * replay uses it (rp_xfer_reset + rp_xfer_run_cpu per copy) against plain
 * memcpy of the same payload bytes between two dense buffers; the cost of
 * planning (rp_xfer_plan + rp_xfer_release); and the cost of a reset. Every
 * figure is the median of RUNS samples; planned and memcpy samples alternate
 * so that frequency drift hits both alike.
 *   contiguous: dense 1-D f32 -> dense 1-D f32 (one memcpy span)
 *   strided2d:  rows of ROW_ELEMS f32 inside padded rows on both sides (src
 *               pitch +64 elements, dst +32): one memcpy per row
 * Goals: contiguous within 10% of memcpy at >= 1 MiB;
 * reset at least 20x cheaper than plan. */
#include "bench/bench.h"
#include "xfer/xfer.h"

#include <string.h>

#define RUNS 5
#define ROW_ELEMS 256                 /* 1 KiB payload rows in strided2d */
#define BYTES_PER_SAMPLE (256u << 20) /* ~256 MiB moved per sample */
#define PLAN_ITERS 2000
#define RESET_ITERS 1000000

typedef struct xb_case {
  const char *name;
  int strided;
} xb_case;

typedef struct xb_result {
  double planned_gbps, memcpy_gbps, plan_us, reset_us;
} xb_result;

static double median(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v[n / 2];
}

static double secs_since(uint64_t t0) {
  return (double)(rp__now_ns() - t0) * 1e-9;
}

/* Source and destination instances for a case, and the copy between them. */
static rp_status make_pair(rp_runtime *rt, const xb_case *c, size_t bytes,
                           rp_inst *src, rp_inst *dst, rp_copy *cp) {
  int64_t n = (int64_t)(bytes / sizeof(float));
  rp_rect r = rp_rect_1d(0, n - 1);
  int64_t ss[2] = {ROW_ELEMS + 64, 1}, ds[2] = {ROW_ELEMS + 32, 1};
  if (c->strided)
    r = rp_rect_2d(0, n / ROW_ELEMS - 1, 0, ROW_ELEMS - 1);
  rp_mem m;
  rp_status st = rp_mem_find(rt, RP_MEM_SYSTEM, -1, &m);
  if (!st)
    st = rp_instance_create(rt, m, RP_F32, &r, c->strided ? ss : NULL, src);
  if (!st)
    st = rp_instance_create(rt, m, RP_F32, &r, c->strided ? ds : NULL, dst);
  memset(cp, 0, sizeof *cp);
  cp->src = *src;
  cp->dst = *dst;
  cp->domain = RP_DOMAIN_INTERSECT;
  return st;
}

static double planned_sample(rp_xfer_desc *d, size_t bytes, unsigned iters) {
  uint64_t t0 = rp__now_ns();
  for (unsigned i = 0; i < iters; i++) {
    rp_xfer_reset(d);
    if (rp_xfer_run_cpu(d))
      return 0;
  }
  return (double)bytes * iters / secs_since(t0) * 1e-9;
}

static double memcpy_sample(void *dst, const void *src, size_t bytes,
                            unsigned iters) {
  uint64_t t0 = rp__now_ns();
  for (unsigned i = 0; i < iters; i++) {
    memcpy(dst, src, bytes);
    /* keep the copies: the compiler may not drop or merge them */
    __asm__ __volatile__("" : : "r"(dst) : "memory");
  }
  return (double)bytes * iters / secs_since(t0) * 1e-9;
}

/* div: 1, or QUICK_DIV for --quick (every loop that many times shorter) */
#define QUICK_DIV 16u

static rp_status throughput(rp_xfer_desc *d, size_t bytes, unsigned div,
                            xb_result *out) {
  void *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
  if (!a || !b) {
    free(a);
    free(b);
    return RP_ENOMEM;
  }
  memset(a, 1, bytes); /* fault the pages in before timing */
  memset(b, 2, bytes);
  unsigned iters = (unsigned)(BYTES_PER_SAMPLE / div / bytes);
  iters = iters < 4 ? 4 : iters;
  double p[RUNS], m[RUNS];
  planned_sample(d, bytes, 1); /* warm */
  memcpy_sample(b, a, bytes, 1);
  for (int r = 0; r < RUNS; r++) {
    m[r] = memcpy_sample(b, a, bytes, iters);
    p[r] = planned_sample(d, bytes, iters);
  }
  free(a);
  free(b);
  out->planned_gbps = median(p, RUNS);
  out->memcpy_gbps = median(m, RUNS);
  return out->planned_gbps > 0 ? RP_OK : RP_EINVAL;
}

static rp_status plan_and_reset_costs(rp_runtime *rt, const rp_copy *cp,
                                      rp_xfer_desc *d, unsigned div,
                                      xb_result *out) {
  double p[RUNS], z[RUNS];
  const unsigned plan_iters = PLAN_ITERS / div, reset_iters = RESET_ITERS / div;
  for (int r = 0; r < RUNS; r++) {
    uint64_t t0 = rp__now_ns();
    for (unsigned i = 0; i < plan_iters; i++) {
      rp_xfer_desc x;
      rp_status st = rp_xfer_plan(rt, cp, &x);
      if (st)
        return st;
      rp_xfer_release(&x);
    }
    p[r] = secs_since(t0) * 1e6 / plan_iters;
    t0 = rp__now_ns();
    for (unsigned i = 0; i < reset_iters; i++) {
      rp_xfer_reset(d);
      __asm__ __volatile__("" : : "r"(d) : "memory");
    }
    z[r] = secs_since(t0) * 1e6 / reset_iters;
  }
  out->plan_us = median(p, RUNS);
  out->reset_us = median(z, RUNS);
  return RP_OK;
}

static rp_status run_case(rp_runtime *rt, const xb_case *c, size_t bytes,
                          unsigned div, xb_result *out) {
  rp_inst src = {0}, dst = {0};
  rp_copy cp;
  rp_xfer_desc d;
  rp_status st = make_pair(rt, c, bytes, &src, &dst, &cp);
  if (!st)
    st = rp_xfer_plan(rt, &cp, &d);
  if (!st) {
    st = throughput(&d, bytes, div, out);
    if (!st)
      st = plan_and_reset_costs(rt, &cp, &d, div, out);
    rp_xfer_release(&d);
  }
  rp_instance_free(rt, src);
  rp_instance_free(rt, dst);
  return st;
}

static void report(FILE *table, FILE *json, const xb_case *c, size_t bytes,
                   const xb_result *r, int first, int quick) {
  if (table)
    fprintf(table, "%-11s %9zu %12.2f %11.2f %8.3f %9.3f %10.4f %8.0fx\n",
            c->name, bytes, r->planned_gbps, r->memcpy_gbps,
            r->planned_gbps / r->memcpy_gbps, r->plan_us, r->reset_us,
            r->plan_us / r->reset_us);
  if (json)
    fprintf(json,
            "%s  {\"case\": \"%s\", \"bytes\": %zu, \"planned_gbps\": %.3f, "
            "\"memcpy_gbps\": %.3f, \"plan_us\": %.4f, \"reset_us\": %.6f, "
            "\"commit\": \"%s\"%s}",
            first ? "" : ",\n", c->name, bytes, r->planned_gbps, r->memcpy_gbps,
            r->plan_us, r->reset_us, rp_build_commit,
            quick ? ", \"quick\": true" : "");
}

int rp_bench_xfer(int quick, FILE *table, FILE *json) {
  static const xb_case cases[] = {{"contiguous", 0}, {"strided2d", 1}};
  static const size_t sizes[] = {64u << 10, 1u << 20, 16u << 20};
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.backend = RP_BACKEND_CPU; /* host memory on one worker, whatever */
  cfg.cpus = 1;                 /* REPRISE_BACKEND or REPRISE_WORKERS say */
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  if (rp_runtime_create(&cfg, &rt)) {
    fprintf(stderr, "xfer bench: %s\n", rp_error_detail());
    return 1;
  }
  if (table)
    fprintf(table, "%-11s %9s %12s %11s %8s %9s %10s %9s\n", "case", "bytes",
            "planned_GB/s", "memcpy_GB/s", "ratio", "plan_us", "reset_us",
            "plan/rst");
  if (json)
    fprintf(json, "[\n");
  int rc = 0, first = 1;
  for (size_t c = 0; c < RP_ARRAY_LEN(cases) && !rc; c++)
    for (size_t s = 0; s < RP_ARRAY_LEN(sizes) && !rc; s++) {
      xb_result r;
      rp_status st =
          run_case(rt, &cases[c], sizes[s], quick ? QUICK_DIV : 1, &r);
      if (st) {
        fprintf(stderr, "xfer bench %s %zu: %s (%s)\n", cases[c].name, sizes[s],
                rp_status_name(st), rp_error_detail());
        rc = 1;
        break;
      }
      report(table, json, &cases[c], sizes[s], &r, first, quick);
      first = 0;
    }
  if (json)
    fprintf(json, "\n]\n");
  rp_runtime_destroy(rt);
  return rc;
}
