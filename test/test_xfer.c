/* test/test_xfer.c — transfer descriptors, CPU channels, parallel
 * operators, rp_chunk_rect. Copies are checked bitwise against a reference
 * loop over the domain's points applied to a snapshot of the destination's
 * whole layout (padding included), so a stray write anywhere fails. */
#include "helpers.h"
#include "xfer/xfer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Criterion reports a test whose child leaked as passing (LeakSanitizer's
 * exit code comes after the result), so a leak test asks LSan itself. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define EXPECT_NO_LEAKS()                                                      \
  cr_assert_eq(__lsan_do_recoverable_leak_check(), 0,                          \
               "leaks: see the LeakSanitizer report above")
#else
#define EXPECT_NO_LEAKS() ((void)0)
#endif

/* ---------------------------------------------------------------------- */
/* Helpers */

static rp_mem sysmem(rp_runtime *rt) {
  rp_mem m;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &m));
  return m;
}

static rp_inst mk(rp_runtime *rt, rp_dtype t, rp_rect r, const int64_t *st) {
  rp_inst i;
  RP_CHECK(rp_instance_create(rt, sysmem(rt), t, &r, st, &i));
  return i;
}

static rp_instance_info info_of(rp_runtime *rt, rp_inst i) {
  rp_instance_info in;
  RP_CHECK(rp_instance_query(rt, i, &in));
  return in;
}

static rp_rect rect_of(int dim, const int64_t *lo, const int64_t *ext) {
  return rp_rect_make(dim, lo, ext);
}

/* Byte address of global point p. */
static char *at(const rp_instance_info *in, const int64_t *p) {
  int64_t off = 0;
  for (int d = 0; d < in->rect.dim; d++)
    off += (p[d] - in->rect.lo[d]) * in->strides[d];
  return (char *)in->ptr + off * (int64_t)rp_dtype_size(in->dtype);
}

/* Odometer over the points of r: first call with p = r.lo; returns 0 after
 * the last point. */
static int next_point(const rp_rect *r, int64_t *p) {
  for (int d = r->dim - 1; d >= 0; d--) {
    if (++p[d] <= r->hi[d])
      return 1;
    p[d] = r->lo[d];
  }
  return 0;
}

/* Fills the whole layout span of i (padding too) with bytes from seed. */
static void fill_random(rp_runtime *rt, rp_inst i, unsigned seed) {
  rp_instance_info in = info_of(rt, i);
  unsigned char *b = in.ptr;
  for (size_t k = 0; k < in.bytes; k++) {
    seed = seed * 1103515245u + 12345u;
    b[k] = (unsigned char)(seed >> 16);
  }
}

/* Snapshot of dst's layout with the copy src -> dst over dom applied. */
static unsigned char *reference(rp_runtime *rt, rp_inst src, rp_inst dst,
                                const rp_rect *dom) {
  rp_instance_info s = info_of(rt, src), t = info_of(rt, dst);
  unsigned char *ref = malloc(t.bytes);
  memcpy(ref, t.ptr, t.bytes);
  rp_instance_info r = t;
  r.ptr = ref;
  size_t esz = rp_dtype_size(s.dtype);
  int64_t p[RP_MAX_DIM];
  memcpy(p, dom->lo, sizeof p);
  do
    memcpy(at(&r, p), at(&s, p), esz);
  while (next_point(dom, p));
  return ref;
}

static void expect_layout(rp_runtime *rt, rp_inst dst, const void *ref,
                          const char *what) {
  rp_instance_info t = info_of(rt, dst);
  cr_assert(memcmp(t.ptr, ref, t.bytes) == 0, "%s: destination differs", what);
}

static rp_copy copy_of(rp_inst s, rp_inst d, rp_copy_domain dom) {
  rp_copy c;
  memset(&c, 0, sizeof c);
  c.src = s;
  c.dst = d;
  c.domain = dom;
  return c;
}

static rp_status plan_run(rp_runtime *rt, const rp_copy *c) {
  rp_xfer_desc d;
  rp_status st = rp_xfer_plan(rt, c, &d);
  if (st)
    return st;
  st = rp_xfer_run_cpu(&d);
  rp_xfer_release(&d);
  return st;
}

static int has(const char *needle) {
  return strstr(rp_error_detail(), needle) != NULL;
}

/* ---------------------------------------------------------------------- */
/* rp_chunk_rect */

Test(xfer, chunk_rect_follows_torch_chunk) {
  rp_rect w = rp_rect_2d(0, 9, 0, 4), r;
  int64_t want3[3][2] = {{0, 3}, {4, 7}, {8, 9}};
  for (uint32_t i = 0; i < 3; i++) {
    RP_CHECK(rp_chunk_rect(&w, 0, 3, i, &r));
    cr_assert(r.lo[0] == want3[i][0] && r.hi[0] == want3[i][1], "3 parts %u",
              i);
    cr_assert(r.lo[1] == 0 && r.hi[1] == 4);
  }
  int64_t want4[4][2] = {{0, 2}, {3, 5}, {6, 8}, {9, 9}};
  for (uint32_t i = 0; i < 4; i++) {
    RP_CHECK(rp_chunk_rect(&w, 0, 4, i, &r));
    cr_assert(r.lo[0] == want4[i][0] && r.hi[0] == want4[i][1], "4 parts %u",
              i);
  }
  /* global coordinates: a whole starting at 100 */
  rp_rect g = rp_rect_1d(100, 109);
  RP_CHECK(rp_chunk_rect(&g, 0, 3, 2, &r));
  cr_assert(r.lo[0] == 108 && r.hi[0] == 109);
}

Test(xfer, chunk_rect_rejects_empty_trailing_shard_and_bad_args) {
  rp_rect w = rp_rect_1d(0, 9), r;
  for (uint32_t i = 0; i < 5; i++)
    RP_CHECK(rp_chunk_rect(&w, 0, 6, i, &r)); /* chunk 2: five shards */
  RP_EXPECT(rp_chunk_rect(&w, 0, 6, 5, &r), RP_ESHAPE);
  cr_assert(has("empty"), "%s", rp_error_detail());
  RP_EXPECT(rp_chunk_rect(&w, 0, 0, 0, &r), RP_EINVAL);
  RP_EXPECT(rp_chunk_rect(&w, 1, 2, 0, &r), RP_EINVAL);
  RP_EXPECT(rp_chunk_rect(&w, 0, 2, 2, &r), RP_ERANGE);
  RP_EXPECT(rp_chunk_rect(NULL, 0, 2, 0, &r), RP_EINVAL);
  rp_rect e = rp_rect_1d(5, 4);
  RP_EXPECT(rp_chunk_rect(&e, 0, 1, 0, &r), RP_ESHAPE);
}

/* ---------------------------------------------------------------------- */
/* Copies */

enum { L_DENSE, L_PADDED, L_COLMAJOR, L_INTERLEAVED, L_COUNT };

/* Explicit strides for a layout kind (NULL for dense). */
static const int64_t *strides_for(int kind, int dim, const int64_t *ext,
                                  int64_t *st) {
  int64_t s = kind == L_INTERLEAVED ? 2 : 1;
  switch (kind) {
  case L_DENSE:
    return NULL;
  case L_COLMAJOR: /* first dimension fastest, padded by one */
    for (int d = 0; d < dim; d++) {
      st[d] = s;
      s *= ext[d] + 1;
    }
    return st;
  default: /* row-major, padded rows; interleaved: element stride 2 */
    for (int d = dim - 1; d >= 0; d--) {
      st[d] = s;
      s *= ext[d] + (d == dim - 1 ? 3 : 1);
    }
    return st;
  }
}

/* Rects for a domain mode: big B, small S inside B, O overlapping B. */
static void mode_rects(int mode, int dim, rp_rect *src, rp_rect *dst,
                       rp_rect *dom) {
  static const int64_t e[RP_MAX_DIM] = {7, 6, 5, 4};
  int64_t lo[RP_MAX_DIM] = {0}, slo[RP_MAX_DIM] = {0}, se[RP_MAX_DIM] = {0},
          olo[RP_MAX_DIM] = {0};
  for (int d = 0; d < dim; d++) {
    lo[d] = 2 + 3 * d - (d == 1 ? 9 : 0); /* non-zero, one negative origin */
    slo[d] = lo[d] + 1;
    se[d] = e[d] - 2;
    olo[d] = lo[d] + 2;
  }
  rp_rect B = rect_of(dim, lo, e), S = rect_of(dim, slo, se);
  rp_rect O = rect_of(dim, olo, e);
  switch (mode) {
  case RP_DOMAIN_INTERSECT:
    *src = B, *dst = O, *dom = B;
    for (int d = 0; d < dim; d++)
      dom->lo[d] = O.lo[d];
    return;
  case RP_DOMAIN_SRC:
    *src = S, *dst = B, *dom = S;
    return;
  case RP_DOMAIN_DST:
    *src = B, *dst = S, *dom = S;
    return;
  default:
    *src = B, *dst = O, *dom = B;
    for (int d = 0; d < dim; d++) {
      dom->lo[d] = B.lo[d] + 2;
      dom->hi[d] = B.hi[d] - 1;
    }
  }
}

static void copy_case(rp_runtime *rt, int dim, int mode, int sl, int dl,
                      rp_dtype t) {
  rp_rect rs, rd, dom;
  mode_rects(mode, dim, &rs, &rd, &dom);
  int64_t es[RP_MAX_DIM], ed[RP_MAX_DIM], ss[RP_MAX_DIM], ds[RP_MAX_DIM];
  for (int d = 0; d < dim; d++) {
    es[d] = rs.hi[d] - rs.lo[d] + 1;
    ed[d] = rd.hi[d] - rd.lo[d] + 1;
  }
  rp_inst s = mk(rt, t, rs, strides_for(sl, dim, es, ss));
  rp_inst d = mk(rt, t, rd, strides_for(dl, dim, ed, ds));
  fill_random(rt, s, 17u + (unsigned)dim);
  fill_random(rt, d, 91u + (unsigned)mode);
  unsigned char *ref = reference(rt, s, d, &dom);
  rp_copy c = copy_of(s, d, (rp_copy_domain)mode);
  c.rect = dom;
  rp_xfer_desc x;
  RP_CHECK(rp_xfer_plan(rt, &c, &x));
  cr_assert(rp_rect_volume(&x.domain) == rp_rect_volume(&dom));
  RP_CHECK(rp_xfer_run_cpu(&x));
  char what[96];
  snprintf(what, sizeof what, "dim %d mode %d layouts %d->%d %s", dim, mode, sl,
           dl, rp_dtype_name(t));
  expect_layout(rt, d, ref, what);
  rp_xfer_release(&x);
  free(ref);
  RP_CHECK(rp_instance_free(rt, s));
  RP_CHECK(rp_instance_free(rt, d));
}

Test(xfer, copies_1d_to_4d_every_domain_mode_and_layout_match_reference) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_dtype types[] = {RP_F32, RP_F64, RP_U8, RP_I64};
  for (int dim = 1; dim <= RP_MAX_DIM; dim++)
    for (int mode = 0; mode <= RP_DOMAIN_RECT; mode++)
      for (int sl = 0; sl < L_COUNT; sl++)
        for (int dl = 0; dl < L_COUNT; dl++)
          copy_case(rt, dim, mode, sl, dl, types[(sl + dl + dim) % 4]);
  th_destroy(rt);
}

Test(xfer, dense_layouts_merge_into_one_span) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_inst a = mk(rt, RP_F32, rp_rect_2d(0, 63, 0, 31), NULL);
  rp_inst b = mk(rt, RP_F32, rp_rect_2d(0, 63, 0, 31), NULL);
  rp_xfer_desc x;
  rp_copy c = copy_of(a, b, RP_DOMAIN_INTERSECT);
  RP_CHECK(rp_xfer_plan(rt, &c, &x));
  cr_assert_eq(x.channel, RP_XFER_CPU_SPAN);
  cr_assert_eq(x.bytes, 64u * 32u * 4u);
  rp_xfer_release(&x);
  /* full rows of a dense instance are still one span */
  c.domain = RP_DOMAIN_RECT;
  c.rect = rp_rect_2d(8, 15, 0, 31);
  RP_CHECK(rp_xfer_plan(rt, &c, &x));
  cr_assert_eq(x.channel, RP_XFER_CPU_SPAN);
  rp_xfer_release(&x);
  /* part of every row is not */
  c.rect = rp_rect_2d(8, 15, 1, 30);
  RP_CHECK(rp_xfer_plan(rt, &c, &x));
  cr_assert_eq(x.channel, RP_XFER_CPU_STRIDED);
  cr_assert_eq(x.nest.ext[3], 30);
  cr_assert_eq(x.nest.ext[2], 8);
  cr_assert(!rp_xfer_is_device(&x));
  rp_xfer_release(&x);
  th_destroy(rt);
}

Test(xfer, intersection_moves_only_shared_points_in_global_coordinates) {
  rp_runtime *rt = th_cpu_runtime(1);
  /* a shard holding global rows 4..7 of a 10x3 tensor, copied into a shard
   * holding rows 6..9: only rows 6..7 move */
  rp_inst s = mk(rt, RP_I32, rp_rect_2d(4, 7, 0, 2), NULL);
  rp_inst d = mk(rt, RP_I32, rp_rect_2d(6, 9, 0, 2), NULL);
  int32_t v[12];
  for (int i = 0; i < 12; i++)
    v[i] = 100 + i; /* row 4+i/3, col i%3 */
  RP_CHECK(rp_instance_write(rt, s, v, sizeof v));
  rp_copy c = copy_of(s, d, RP_DOMAIN_INTERSECT);
  RP_CHECK(plan_run(rt, &c));
  int32_t out[12];
  RP_CHECK(rp_instance_read(rt, d, out, sizeof out));
  for (int i = 0; i < 12; i++) {
    int row = 6 + i / 3;
    int32_t want = row <= 7 ? 100 + (row - 4) * 3 + i % 3 : 0;
    cr_assert_eq(out[i], want, "row %d col %d", row, i % 3);
  }
  th_destroy(rt);
}

/* A model of a machine (rp_runtime_create_model, `reprise dump`) has no
 * instance storage: a copy between parts of its instances is planned with
 * the domain's offsets from no base (computed as integers, not as
 * offsets from a NULL pointer, which UBSan refuses). */
Test(xfer, a_model_plans_a_copy_from_its_offsets_without_storage) {
  rp_machine_desc m = {.cpus = 1};
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_inst s = mk(rt, RP_I32, rp_rect_2d(4, 7, 0, 2), NULL);
  rp_inst d = mk(rt, RP_I32, rp_rect_2d(6, 9, 0, 2), NULL);
  cr_assert_null(info_of(rt, s).ptr, "a model's instance has no storage");
  rp_copy c = copy_of(s, d, RP_DOMAIN_INTERSECT);
  rp_xfer_desc x;
  RP_CHECK(rp_xfer_plan(rt, &c, &x));
  /* rows 6..7: row 2 of src, row 0 of dst; 3 columns of 4 bytes */
  cr_assert_eq((uintptr_t)x.nest.src, (uintptr_t)(2 * 3 * 4));
  cr_assert_eq((uintptr_t)x.nest.dst, (uintptr_t)0);
  cr_assert_eq(x.bytes, 24u);
  rp_xfer_release(&x);
  RP_CHECK(rp_instance_free(rt, s));
  RP_CHECK(rp_instance_free(rt, d));
  RP_CHECK(rp_runtime_destroy(rt));
}

/* ---------------------------------------------------------------------- */
/* Reductions */

static void set_values(rp_runtime *rt, rp_inst i, int64_t (*f)(int64_t k)) {
  rp_instance_info in = info_of(rt, i);
  int64_t n = rp_rect_volume(&in.rect);
  size_t esz = rp_dtype_size(in.dtype);
  unsigned char *buf = malloc((size_t)n * esz);
  for (int64_t k = 0; k < n; k++) {
    int64_t v = f(k);
    float f32 = (float)v;
    double f64 = (double)v;
    int32_t i32 = (int32_t)v;
    void *src = in.dtype == RP_F32   ? (void *)&f32
                : in.dtype == RP_F64 ? (void *)&f64
                : in.dtype == RP_I32 ? (void *)&i32
                                     : (void *)&v;
    memcpy(buf + (size_t)k * esz, src, esz);
  }
  RP_CHECK(rp_instance_write(rt, i, buf, (size_t)n * esz));
  free(buf);
}

/* Dense row-major values of i, as doubles (exact for the test's values). */
static double *get_values(rp_runtime *rt, rp_inst i, int64_t *count) {
  rp_instance_info in = info_of(rt, i);
  int64_t n = rp_rect_volume(&in.rect);
  size_t esz = rp_dtype_size(in.dtype);
  unsigned char *buf = malloc((size_t)n * esz);
  RP_CHECK(rp_instance_read(rt, i, buf, (size_t)n * esz));
  double *out = malloc((size_t)n * sizeof *out);
  for (int64_t k = 0; k < n; k++) {
    unsigned char *p = buf + (size_t)k * esz;
    float f32;
    double f64;
    int32_t i32;
    int64_t i64;
    switch (in.dtype) {
    case RP_F32:
      memcpy(&f32, p, 4), out[k] = f32;
      break;
    case RP_F64:
      memcpy(&f64, p, 8), out[k] = f64;
      break;
    case RP_I32:
      memcpy(&i32, p, 4), out[k] = i32;
      break;
    default:
      memcpy(&i64, p, 8), out[k] = (double)i64;
    }
  }
  free(buf);
  if (count)
    *count = n;
  return out;
}

static int64_t val_k(int64_t k) {
  return k % 97 - 40;
}
static int64_t val_2k(int64_t k) {
  return 2 * (k % 97 - 40);
}

Test(xfer, sum_folds_each_dtype_over_strided_layouts) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_dtype types[] = {RP_F32, RP_F64, RP_I32, RP_I64};
  int64_t pad[2] = {40, 1}, inter[2] = {70, 2};
  for (int t = 0; t < 4; t++)
    for (int lay = 0; lay < 3; lay++) {
      const int64_t *sst = lay == 1 ? pad : lay == 2 ? inter : NULL;
      rp_inst s = mk(rt, types[t], rp_rect_2d(0, 19, 0, 29), sst);
      rp_inst d =
          mk(rt, types[t], rp_rect_2d(0, 19, 0, 29), lay == 2 ? pad : NULL);
      set_values(rt, s, val_2k);
      set_values(rt, d, val_k);
      rp_copy c = copy_of(s, d, RP_DOMAIN_SRC);
      c.redop = RP_REDOP_SUM;
      rp_xfer_desc x;
      RP_CHECK(rp_xfer_plan(rt, &c, &x));
      cr_assert_eq(x.channel, RP_XFER_CPU_REDUCE);
      RP_CHECK(rp_xfer_run_cpu(&x));
      rp_xfer_release(&x);
      int64_t n;
      double *v = get_values(rt, d, &n);
      for (int64_t k = 0; k < n; k++)
        cr_assert_eq(v[k], (double)(3 * val_k(k)), "%s layout %d k %lld",
                     rp_dtype_name(types[t]), lay, (long long)k);
      free(v);
      RP_CHECK(rp_instance_free(rt, s));
      RP_CHECK(rp_instance_free(rt, d));
    }
  th_destroy(rt);
}

/* Four threads fold into one destination at once, each over a different,
 * overlapping window (so block boundaries and layouts differ), many times. */
#define NT 4
#define SUM_N (1 << 18) /* 1 MiB of f32 */
#define SUM_REPS 40

typedef struct sum_arg {
  rp_runtime *rt;
  rp_xfer_desc x;
  rp_status st;
} sum_arg;

static void *sum_thread(void *p) {
  sum_arg *a = p;
  for (int r = 0; r < SUM_REPS && !a->st; r++) {
    rp_xfer_reset(&a->x);
    a->st = rp_xfer_run_cpu(&a->x);
  }
  return NULL;
}

static int64_t win_lo(int t) {
  return (int64_t)t * (SUM_N / 8) + 3 * t;
}

static void concurrent_sum(rp_dtype type) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_inst dst = mk(rt, type, rp_rect_1d(0, SUM_N - 1), NULL);
  rp_inst src[NT];
  sum_arg args[NT];
  pthread_t th[NT];
  int64_t two = 2;
  for (int t = 0; t < NT; t++) {
    /* threads 2, 3 read interleaved sources: per-element folds */
    rp_rect w = rp_rect_1d(win_lo(t), win_lo(t) + SUM_N / 2 - 1);
    src[t] = mk(rt, type, w, t >= 2 ? &two : NULL);
    set_values(rt, src[t], t % 2 ? val_2k : val_k);
    rp_copy c = copy_of(src[t], dst, RP_DOMAIN_SRC);
    c.redop = RP_REDOP_SUM;
    args[t] = (sum_arg){.rt = rt};
    RP_CHECK(rp_xfer_plan(rt, &c, &args[t].x));
  }
  for (int t = 0; t < NT; t++)
    cr_assert_eq(pthread_create(&th[t], NULL, sum_thread, &args[t]), 0);
  for (int t = 0; t < NT; t++) {
    pthread_join(th[t], NULL);
    RP_CHECK(args[t].st);
    rp_xfer_release(&args[t].x);
  }
  double *v = get_values(rt, dst, NULL);
  for (int64_t k = 0; k < SUM_N; k++) {
    int64_t want = 0;
    for (int t = 0; t < NT; t++)
      if (k >= win_lo(t) && k < win_lo(t) + SUM_N / 2)
        want +=
            SUM_REPS * (t % 2 ? val_2k(k - win_lo(t)) : val_k(k - win_lo(t)));
    cr_assert_eq(v[k], (double)want, "%s point %lld", rp_dtype_name(type),
                 (long long)k);
  }
  free(v);
  th_destroy(rt);
}

Test(xfer, four_threads_sum_into_one_destination_exactly_f32) {
  concurrent_sum(RP_F32);
}
Test(xfer, four_threads_sum_into_one_destination_exactly_f64) {
  concurrent_sum(RP_F64);
}
Test(xfer, four_threads_sum_into_one_destination_exactly_i32) {
  concurrent_sum(RP_I32);
}
Test(xfer, four_threads_sum_into_one_destination_exactly_i64) {
  concurrent_sum(RP_I64);
}

/* ---------------------------------------------------------------------- */
/* Parallel operators */

static void run_copies(rp_runtime *rt, const rp_copy *c, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    cr_assert_eq(c[i].wait.id, 0u, "copy %u carries a wait", i);
    RP_CHECK(plan_run(rt, &c[i]));
  }
}

static void run_pop(rp_runtime *rt, const rp_parallel_op *op) {
  rp_copy c[8];
  uint32_t n = 0;
  RP_CHECK(rp_xfer_expand_parallel(rt, op, c, 8, &n));
  cr_assert_eq(n, op->nparts);
  run_copies(rt, c, n);
}

/* Index of global point p in the dense row-major order of r. */
static int64_t dense_index(const rp_rect *r, const int64_t *p) {
  int64_t k = 0;
  for (int d = 0; d < r->dim; d++)
    k = k * (r->hi[d] - r->lo[d] + 1) + (p[d] - r->lo[d]);
  return k;
}

/* Whole of 10 x 7 at origin (3, -2); parts per kind; values exact. */
typedef struct pop_fix {
  rp_inst whole, parts[4];
  rp_parallel_op op;
} pop_fix;

static int64_t val_whole(int64_t k) {
  return 3 * k - 50;
}
static int64_t val_big(int64_t k) {
  RP_UNUSED(k);
  return 999;
}

static void pop_setup(rp_runtime *rt, pop_fix *f, rp_pop_kind kind, int bwd,
                      uint32_t n, int dim, rp_dtype t) {
  memset(f, 0, sizeof *f);
  rp_rect w = rp_rect_2d(3, 12, -2, 4);
  f->whole = mk(rt, t, w, NULL);
  set_values(rt, f->whole, val_whole);
  int split = kind == RP_POP_REPARTITION || kind == RP_POP_COMBINE;
  for (uint32_t i = 0; i < n; i++) {
    rp_rect r = w;
    if (split)
      RP_CHECK(rp_chunk_rect(&w, dim, n, i, &r));
    int64_t st[2] = {(r.hi[1] - r.lo[1] + 1) + (int64_t)i, 1}; /* padded */
    f->parts[i] = mk(rt, t, r, i % 2 ? st : NULL);
    set_values(rt, f->parts[i], i % 2 ? val_k : val_2k);
  }
  f->op = (rp_parallel_op){.kind = kind,
                           .backward = bwd,
                           .whole = f->whole,
                           .parts = f->parts,
                           .nparts = n,
                           .dim = dim};
}

/* part i's values at its own points equal the whole's (scatter, broadcast) */
static void expect_parts_from_whole(rp_runtime *rt, const pop_fix *f) {
  rp_instance_info wi = info_of(rt, f->whole);
  double *w = get_values(rt, f->whole, NULL);
  for (uint32_t i = 0; i < f->op.nparts; i++) {
    rp_instance_info pi = info_of(rt, f->parts[i]);
    double *p = get_values(rt, f->parts[i], NULL);
    int64_t pt[RP_MAX_DIM];
    memcpy(pt, pi.rect.lo, sizeof pt);
    do
      cr_assert_eq(p[dense_index(&pi.rect, pt)], w[dense_index(&wi.rect, pt)],
                   "part %u point (%lld, %lld)", i, (long long)pt[0],
                   (long long)pt[1]);
    while (next_point(&pi.rect, pt));
    free(p);
  }
  free(w);
}

/* whole == the parts assembled (gather) or summed */
static void expect_whole(rp_runtime *rt, const pop_fix *f, double **parts,
                         int sum) {
  rp_instance_info wi = info_of(rt, f->whole);
  double *w = get_values(rt, f->whole, NULL);
  int64_t pt[RP_MAX_DIM];
  memcpy(pt, wi.rect.lo, sizeof pt);
  do {
    double want = 0;
    for (uint32_t i = 0; i < f->op.nparts; i++) {
      rp_rect r = info_of(rt, f->parts[i]).rect;
      int in = 1;
      for (int d = 0; d < r.dim; d++)
        in &= pt[d] >= r.lo[d] && pt[d] <= r.hi[d];
      if (in)
        want = sum ? want + parts[i][dense_index(&r, pt)]
                   : parts[i][dense_index(&r, pt)];
    }
    cr_assert_eq(w[dense_index(&wi.rect, pt)], want, "whole (%lld, %lld)",
                 (long long)pt[0], (long long)pt[1]);
  } while (next_point(&wi.rect, pt));
  free(w);
}

static void pop_case(rp_runtime *rt, rp_pop_kind kind, int bwd, uint32_t n,
                     int dim, rp_dtype t) {
  pop_fix f;
  pop_setup(rt, &f, kind, bwd, n, dim, t);
  int to_parts = (kind == RP_POP_REPLICATE && !bwd) ||
                 (kind == RP_POP_REPARTITION && !bwd) ||
                 (kind == RP_POP_COMBINE && bwd) ||
                 (kind == RP_POP_REDUCTION && bwd);
  int sum = kind == RP_POP_REPLICATE || kind == RP_POP_REDUCTION;
  double *parts[4] = {0};
  if (!to_parts) {
    set_values(rt, f.whole, val_big); /* must be overwritten */
    for (uint32_t i = 0; i < n; i++)
      parts[i] = get_values(rt, f.parts[i], NULL);
  }
  run_pop(rt, &f.op);
  if (to_parts)
    expect_parts_from_whole(rt, &f);
  else
    expect_whole(rt, &f, parts, sum);
  for (uint32_t i = 0; i < n; i++) {
    free(parts[i]);
    RP_CHECK(rp_instance_free(rt, f.parts[i]));
  }
  RP_CHECK(rp_instance_free(rt, f.whole));
}

Test(xfer, every_parallel_op_fwd_and_bwd_on_1_to_4_parts_f32_f64) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_dtype types[] = {RP_F32, RP_F64};
  for (int k = 0; k <= RP_POP_REDUCTION; k++)
    for (int bwd = 0; bwd < 2; bwd++)
      for (uint32_t n = 1; n <= 4; n++)
        for (int dim = 0; dim < 2; dim++) /* 10 rows / 7 cols: uneven */
          for (int t = 0; t < 2; t++)
            pop_case(rt, (rp_pop_kind)k, bwd, n, dim, types[t]);
  th_destroy(rt);
}

Test(xfer, parallel_copies_have_the_documented_shape) {
  rp_runtime *rt = th_cpu_runtime(1);
  pop_fix f;
  pop_setup(rt, &f, RP_POP_REPLICATE, 1, 3, 0, RP_F32);
  rp_copy c[3];
  uint32_t n;
  RP_CHECK(rp_xfer_expand_parallel(rt, &f.op, NULL, 0, &n));
  cr_assert_eq(n, 3u);
  RP_EXPECT(rp_xfer_expand_parallel(rt, &f.op, c, 2, &n), RP_ERANGE);
  cr_assert_eq(n, 3u);
  RP_CHECK(rp_xfer_expand_parallel(rt, &f.op, c, 3, &n));
  /* replicate bwd: part 0 plain first, then SUM, all into the whole */
  for (uint32_t i = 0; i < 3; i++) {
    cr_assert_eq(c[i].src.id, f.parts[i].id);
    cr_assert_eq(c[i].dst.id, f.whole.id);
    cr_assert_eq(c[i].redop, i ? RP_REDOP_SUM : RP_REDOP_NONE);
    cr_assert_eq(c[i].wait.id, 0u);
  }
  th_destroy(rt);
}

Test(xfer, repartition_then_combine_is_identity) {
  rp_runtime *rt = th_cpu_runtime(1);
  for (uint32_t n = 1; n <= 4; n++)
    for (int dim = 0; dim < 2; dim++) {
      pop_fix f;
      pop_setup(rt, &f, RP_POP_REPARTITION, 0, n, dim, RP_F64);
      double *orig = get_values(rt, f.whole, NULL);
      run_pop(rt, &f.op);
      rp_inst w2 = mk(rt, RP_F64, info_of(rt, f.whole).rect, NULL);
      rp_parallel_op comb = f.op;
      comb.kind = RP_POP_COMBINE;
      comb.whole = w2;
      run_pop(rt, &comb);
      int64_t cnt;
      double *back = get_values(rt, w2, &cnt);
      cr_assert(memcmp(orig, back, (size_t)cnt * sizeof *back) == 0,
                "n %u dim %d", n, dim);
      free(orig);
      free(back);
      for (uint32_t i = 0; i < n; i++)
        RP_CHECK(rp_instance_free(rt, f.parts[i]));
      RP_CHECK(rp_instance_free(rt, f.whole));
      RP_CHECK(rp_instance_free(rt, w2));
    }
  th_destroy(rt);
}

Test(xfer, replicate_bwd_is_the_sum_of_the_replicas) {
  rp_runtime *rt = th_cpu_runtime(1);
  for (uint32_t n = 1; n <= 4; n++) {
    pop_fix f;
    pop_setup(rt, &f, RP_POP_REPLICATE, 0, n, 0, RP_F32);
    int64_t cnt;
    double *orig = get_values(rt, f.whole, &cnt);
    run_pop(rt, &f.op); /* fwd: every replica = whole */
    f.op.backward = 1;
    run_pop(rt, &f.op); /* bwd: whole = sum of n copies */
    double *sum = get_values(rt, f.whole, NULL);
    for (int64_t k = 0; k < cnt; k++)
      cr_assert_eq(sum[k], n * orig[k], "n %u k %lld", n, (long long)k);
    free(orig);
    free(sum);
    for (uint32_t i = 0; i < n; i++)
      RP_CHECK(rp_instance_free(rt, f.parts[i]));
    RP_CHECK(rp_instance_free(rt, f.whole));
  }
  th_destroy(rt);
}

Test(xfer, parallel_op_three_and_four_dim_split_on_middle_dim) {
  rp_runtime *rt = th_cpu_runtime(1);
  for (int dim = 3; dim <= 4; dim++) {
    int64_t lo[4] = {1, 5, -3, 2}, ext[4] = {2, 10, 3, 2};
    rp_rect w = rect_of(dim, lo, ext);
    rp_inst whole = mk(rt, RP_F32, w, NULL), parts[3];
    set_values(rt, whole, val_whole);
    for (uint32_t i = 0; i < 3; i++) {
      rp_rect r;
      RP_CHECK(rp_chunk_rect(&w, 1, 3, i, &r));
      parts[i] = mk(rt, RP_F32, r, NULL);
    }
    rp_parallel_op op = {.kind = RP_POP_REPARTITION,
                         .whole = whole,
                         .parts = parts,
                         .nparts = 3,
                         .dim = 1};
    run_pop(rt, &op);
    /* every point of each part equals the whole's */
    rp_instance_info wi = info_of(rt, whole);
    for (uint32_t i = 0; i < 3; i++) {
      rp_instance_info pi = info_of(rt, parts[i]);
      int64_t p[RP_MAX_DIM];
      memcpy(p, pi.rect.lo, sizeof p);
      do
        cr_assert(memcmp(at(&pi, p), at(&wi, p), 4) == 0, "dim %d part %u", dim,
                  i);
      while (next_point(&pi.rect, p));
      RP_CHECK(rp_instance_free(rt, parts[i]));
    }
    RP_CHECK(rp_instance_free(rt, whole));
  }
  th_destroy(rt);
}

Test(xfer, parallel_op_validation_names_the_part) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_rect w = rp_rect_2d(0, 9, 0, 3);
  rp_inst whole = mk(rt, RP_F32, w, NULL), parts[6];
  rp_copy c[6];
  uint32_t n;
  /* 10 rows into 6: chunk 2 leaves shard 5 empty */
  for (uint32_t i = 0; i < 6; i++) {
    rp_rect r = w;
    if (i < 5)
      RP_CHECK(rp_chunk_rect(&w, 0, 6, i, &r));
    parts[i] = mk(rt, RP_F32, r, NULL);
  }
  rp_parallel_op op = {.kind = RP_POP_REPARTITION,
                       .whole = whole,
                       .parts = parts,
                       .nparts = 6,
                       .dim = 0};
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 6, &n), RP_ESHAPE);
  cr_assert(has("part 5") && has("empty"), "%s", rp_error_detail());
  /* a wrong shard rect: 5 parts where part 2 is shifted */
  op.nparts = 5;
  RP_CHECK(rp_xfer_expand_parallel(rt, &op, c, 6, &n));
  rp_inst good2 = parts[2];
  parts[2] = mk(rt, RP_F32, rp_rect_2d(5, 6, 0, 3), NULL);
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 6, &n), RP_ESHAPE);
  cr_assert(has("part 2"), "%s", rp_error_detail());
  RP_CHECK(rp_instance_free(rt, parts[2]));
  /* dtype of a part */
  rp_rect r2;
  RP_CHECK(rp_chunk_rect(&w, 0, 5, 2, &r2));
  parts[2] = mk(rt, RP_F64, r2, NULL);
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 6, &n), RP_ETYPE);
  cr_assert(has("part 2"), "%s", rp_error_detail());
  RP_CHECK(rp_instance_free(rt, parts[2]));
  parts[2] = good2;
  /* replicate / reduction parts must have the whole's rect */
  op.kind = RP_POP_REDUCTION;
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 6, &n), RP_ESHAPE);
  cr_assert(has("part 0"), "%s", rp_error_detail());
  /* bad arguments */
  op.kind = RP_POP_COMBINE;
  op.dim = 2;
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 6, &n), RP_EINVAL);
  op.dim = 0;
  op.kind = (rp_pop_kind)9;
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 6, &n), RP_EINVAL);
  op.kind = RP_POP_COMBINE;
  op.backward = 2; /* 0 or 1 only */
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 6, &n), RP_EINVAL);
  cr_assert(has("backward = 2 (0 forward, 1 backward)"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_launch_parallel(rt, &op, NULL), RP_EINVAL);
  cr_assert(has("backward = 2"), "%s", rp_error_detail());
  op.backward = 0;
  op.nparts = 0;
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 6, &n), RP_EINVAL);
  cr_assert(has("combine has no parts"), "%s", rp_error_detail());
  op.nparts = 5;
  const rp_inst *kept = op.parts;
  op.parts = NULL;
  RP_EXPECT(rp_launch_parallel(rt, &op, NULL), RP_EINVAL);
  cr_assert(has("combine of 5 parts with parts = NULL"), "%s",
            rp_error_detail());
  op.parts = kept;
  rp_inst dup[2] = {parts[0], parts[0]};
  rp_parallel_op rep = {
      .kind = RP_POP_REPLICATE, .whole = whole, .parts = dup, .nparts = 2};
  RP_EXPECT(rp_xfer_expand_parallel(rt, &rep, c, 6, &n), RP_EINVAL);
  dup[1] = whole;
  RP_EXPECT(rp_xfer_expand_parallel(rt, &rep, c, 6, &n), RP_EINVAL);
  RP_CHECK(rp_instance_free(rt, parts[4]));
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 6, &n), RP_ESTALE);
  cr_assert(has("part 4"), "%s", rp_error_detail());
  RP_EXPECT(rp_xfer_expand_parallel(rt, NULL, c, 6, &n), RP_EINVAL);
  th_destroy(rt);
}

/* Handles left 0 (a zeroed parts array) are none, not "the same instance":
 * the detail names the first one, whichever other check it would also
 * fail. */
Test(xfer, parallel_op_handle_0_is_none_not_a_repeat) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_rect w = rp_rect_1d(0, 9);
  rp_inst whole = mk(rt, RP_F32, w, NULL), parts[3] = {{0}, {0}, {0}};
  rp_parallel_op op = {
      .kind = RP_POP_REPLICATE, .whole = whole, .parts = parts, .nparts = 3};
  rp_copy c[3];
  uint32_t n = 7;
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 3, &n), RP_EINVAL);
  cr_assert(has("replicate part 0 instance 0 is none (handle 0)"), "%s",
            rp_error_detail());
  cr_assert_eq(n, 7u, "*count untouched");
  RP_EXPECT(rp_launch_parallel(rt, &op, NULL), RP_EINVAL);
  cr_assert(has("rp_launch_parallel: replicate part 0 instance 0 is none"),
            "%s", rp_error_detail());
  /* the whole left 0 too: the whole is named first */
  op.whole.id = 0;
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 3, &n), RP_EINVAL);
  cr_assert(has("replicate whole instance 0 is none (handle 0)"), "%s",
            rp_error_detail());
  /* part 1 alone left 0 behind a good part 0 */
  op.whole = whole;
  parts[0] = mk(rt, RP_F32, w, NULL);
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, c, 3, &n), RP_EINVAL);
  cr_assert(has("part 1 instance 0 is none"), "%s", rp_error_detail());
  RP_CHECK(rp_instance_free(rt, parts[0]));
  RP_CHECK(rp_instance_free(rt, whole));
  th_destroy(rt);
}

/* ---------------------------------------------------------------------- */
/* Stale descriptors: never move bytes to or from freed memory */

typedef enum {
  FREE_SRC,
  FREE_DST,
  REALLOC_SRC,
  REALLOC_DST,
  REUSE_DST
} stale_how;

static void stale_case(stale_how how, rp_redop redop) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_inst s = mk(rt, RP_F32, rp_rect_1d(0, 1023), NULL);
  rp_inst d = mk(rt, RP_F32, rp_rect_1d(0, 1023), NULL);
  set_values(rt, s, val_2k);
  set_values(rt, d, val_k);
  rp_copy c = copy_of(s, d, RP_DOMAIN_INTERSECT);
  c.redop = redop;
  rp_xfer_desc x;
  RP_CHECK(rp_xfer_plan(rt, &c, &x));
  RP_CHECK(rp_xfer_check(&x));
  rp_inst keep = d; /* the instance whose bytes must not change */
  const char *side = "src";
  switch (how) {
  case FREE_SRC:
    RP_CHECK(rp_instance_free(rt, s));
    break;
  case REALLOC_SRC:
    RP_CHECK(rp_instance_realloc(rt, &s));
    set_values(rt, s, val_2k);
    break;
  case FREE_DST:
    RP_CHECK(rp_instance_free(rt, d));
    keep = s, side = "dst";
    break;
  case REALLOC_DST:
    RP_CHECK(rp_instance_realloc(rt, &d));
    set_values(rt, d, val_k);
    keep = d, side = "dst";
    break;
  case REUSE_DST: /* freed, and its slot handed to a new instance */
    RP_CHECK(rp_instance_free(rt, d));
    d = mk(rt, RP_F32, rp_rect_1d(0, 1023), NULL);
    set_values(rt, d, val_k);
    keep = d, side = "dst";
    break;
  }
  int64_t n;
  double *before = get_values(rt, keep, &n);
  RP_EXPECT(rp_xfer_run_cpu(&x), RP_ESTALE);
  cr_assert(has(side), "detail names %s: %s", side, rp_error_detail());
  rp_xfer_reset(&x); /* reset does not re-plan: still stale */
  RP_EXPECT(rp_xfer_run_cpu(&x), RP_ESTALE);
  RP_EXPECT(rp_xfer_check(&x), RP_ESTALE);
  double *after = get_values(rt, keep, NULL);
  cr_assert(memcmp(before, after, (size_t)n * sizeof *after) == 0,
            "bytes changed after a stale run (case %d)", (int)how);
  free(before);
  free(after);
  rp_xfer_release(&x);
  th_destroy(rt);
}

Test(xfer, stale_after_src_free) {
  stale_case(FREE_SRC, RP_REDOP_NONE);
}
Test(xfer, stale_after_dst_free) {
  stale_case(FREE_DST, RP_REDOP_NONE);
}
Test(xfer, stale_after_src_realloc) {
  stale_case(REALLOC_SRC, RP_REDOP_NONE);
}
Test(xfer, stale_after_dst_realloc_leaves_new_storage_alone) {
  stale_case(REALLOC_DST, RP_REDOP_NONE);
}
Test(xfer, stale_after_dst_slot_reused_by_another_instance) {
  stale_case(REUSE_DST, RP_REDOP_NONE);
}
Test(xfer, stale_sum_moves_nothing) {
  stale_case(REALLOC_DST, RP_REDOP_SUM);
}

/* ---------------------------------------------------------------------- */
/* Bad input: each a status and a detail; nothing planned */

Test(xfer, bad_input_is_rejected_with_its_status) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_inst a = mk(rt, RP_F32, rp_rect_2d(0, 9, 0, 9), NULL);
  rp_inst b = mk(rt, RP_F32, rp_rect_2d(20, 29, 0, 9), NULL);
  rp_inst f64 = mk(rt, RP_F64, rp_rect_2d(0, 9, 0, 9), NULL);
  rp_inst u8a = mk(rt, RP_U8, rp_rect_2d(0, 9, 0, 9), NULL);
  rp_inst u8b = mk(rt, RP_U8, rp_rect_2d(0, 9, 0, 9), NULL);
  rp_inst small = mk(rt, RP_F32, rp_rect_2d(2, 5, 2, 5), NULL);
  rp_inst line = mk(rt, RP_F32, rp_rect_1d(0, 9), NULL);
  rp_xfer_desc x;
  rp_copy c = copy_of(a, f64, RP_DOMAIN_INTERSECT);
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ETYPE);
  cr_assert_eq(x.channel, RP_XFER_NONE);
  rp_xfer_release(&x); /* a failed plan leaves a released descriptor */
  c = copy_of(a, b, RP_DOMAIN_INTERSECT);
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ESHAPE);
  cr_assert(has("INTERSECT is empty"), "%s", rp_error_detail());
  c = copy_of(a, small, RP_DOMAIN_RECT);
  c.rect = rp_rect_2d(0, 3, 3, 4); /* inside a, not inside small */
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ESHAPE);
  cr_assert(has("dst instance") && has("[2..5, 2..5]"), "%s",
            rp_error_detail());
  c = copy_of(small, a, RP_DOMAIN_RECT);
  c.rect = rp_rect_2d(0, 3, 3, 4);
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ESHAPE);
  cr_assert(has("src instance"), "%s", rp_error_detail());
  c.rect = rp_rect_2d(3, 2, 3, 4); /* empty */
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ESHAPE);
  c = copy_of(a, small, RP_DOMAIN_SRC); /* a does not fit small */
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ESHAPE);
  c = copy_of(small, a, RP_DOMAIN_DST);
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ESHAPE);
  c = copy_of(line, a, RP_DOMAIN_INTERSECT);
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ESHAPE);
  c = copy_of(a, small, RP_DOMAIN_INTERSECT);
  c.redop = (rp_redop)7;
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_EINVAL);
  c = copy_of(u8a, u8b, RP_DOMAIN_INTERSECT);
  c.redop = RP_REDOP_SUM;
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ETYPE);
  c = copy_of(a, small, (rp_copy_domain)9);
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_EINVAL);
  c = copy_of(a, a, RP_DOMAIN_INTERSECT);
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_EINVAL);
  RP_EXPECT(rp_xfer_plan(NULL, &c, &x), RP_EINVAL);
  RP_EXPECT(rp_xfer_plan(rt, NULL, &x), RP_EINVAL);
  RP_EXPECT(rp_xfer_plan(rt, &c, NULL), RP_EINVAL);
  RP_CHECK(rp_instance_free(rt, b));
  c = copy_of(a, b, RP_DOMAIN_INTERSECT);
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ESTALE);
  cr_assert(has("dst instance"), "%s", rp_error_detail());
  /* handle 0 is none: a missing argument, not a freed instance */
  c = copy_of((rp_inst){0}, a, RP_DOMAIN_INTERSECT);
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_EINVAL);
  cr_assert(has("src instance 0 is none"), "%s", rp_error_detail());
  cr_assert_eq(x.channel, RP_XFER_NONE);
  th_destroy(rt);
}

/* ---------------------------------------------------------------------- */
/* The per-use protocol */

Test(xfer, planned_once_reset_per_use) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_inst s = mk(rt, RP_I64, rp_rect_1d(0, 99), NULL);
  rp_inst d = mk(rt, RP_I64, rp_rect_1d(0, 99), NULL);
  set_values(rt, s, val_k);
  rp_copy c = copy_of(s, d, RP_DOMAIN_SRC);
  c.redop = RP_REDOP_SUM;
  rp_xfer_desc x;
  RP_CHECK(rp_xfer_plan(rt, &c, &x));
  for (int r = 0; r < 10; r++) {
    rp_xfer_reset(&x);
    cr_assert_eq(x.progress, 0u);
    RP_CHECK(rp_xfer_run_cpu(&x));
    cr_assert_eq(x.progress, 800u);
  }
  /* a second run without reset would fold twice: refused */
  RP_EXPECT(rp_xfer_run_cpu(&x), RP_EINVAL);
  double *v = get_values(rt, d, NULL);
  for (int k = 0; k < 100; k++)
    cr_assert_eq(v[k], 10.0 * (double)val_k(k), "k %d", k);
  free(v);
  /* a CPU channel, with or without CUDA in the build */
  RP_EXPECT(rp_xfer_run_stream(&x, NULL), RP_EINVAL);
  cr_assert(!rp_xfer_is_device(&x));
  rp_xfer_release(&x);
  rp_xfer_release(&x); /* twice is safe */
  rp_xfer_release(NULL);
  rp_xfer_reset(NULL); /* as release: a no-op (it dereferenced NULL) */
  RP_EXPECT(rp_xfer_run_cpu(&x), RP_EINVAL);
  RP_EXPECT(rp_xfer_check(&x), RP_ESTALE);
  th_destroy(rt);
}

/* Under ASan, plan and release (good and failing plans) leak nothing. */
Test(xfer, plan_and_release_leak_nothing) {
  rp_runtime *rt = th_cpu_runtime(1);
  int64_t pad[2] = {12, 1};
  rp_inst s = mk(rt, RP_F32, rp_rect_2d(0, 7, 0, 9), pad);
  rp_inst d = mk(rt, RP_F32, rp_rect_2d(4, 11, 0, 9), NULL);
  rp_inst bad = mk(rt, RP_F64, rp_rect_2d(0, 7, 0, 9), NULL);
  for (int i = 0; i < 1000; i++) {
    rp_xfer_desc x;
    rp_copy c = copy_of(s, d, RP_DOMAIN_INTERSECT);
    c.redop = i % 2 ? RP_REDOP_SUM : RP_REDOP_NONE;
    RP_CHECK(rp_xfer_plan(rt, &c, &x));
    RP_CHECK(rp_xfer_run_cpu(&x));
    rp_xfer_release(&x);
    c.dst = bad;
    RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ETYPE);
    rp_xfer_release(&x);
  }
  th_destroy(rt);
  EXPECT_NO_LEAKS();
}

/* ---------------------------------------------------------------------- */
/* Details name rectangles in full */

/* rp_rect_str of a 4-D rect whose every coordinate has 19 digits and a
 * sign is 176 characters: a detail shows it whole, not cut mid-number. */
Test(xfer, details_show_extreme_4d_rects_whole) {
  rp_runtime *rt = th_cpu_runtime(1);
  int64_t lo[4] = {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
  int64_t e2[4] = {2, 2, 2, 2}, e3[4] = {3, 3, 3, 3};
  rp_rect r = rect_of(4, lo, e2), big = rect_of(4, lo, e3);
  rp_inst s = mk(rt, RP_I32, r, NULL), d = mk(rt, RP_I32, r, NULL);
  char want_dom[256], want_inst[256];
  rp_rect_str(&big, want_dom, sizeof want_dom);
  rp_rect_str(&r, want_inst, sizeof want_inst);
  cr_assert_eq(strlen(want_dom), 176u, "%s", want_dom);
  rp_copy c = copy_of(s, d, RP_DOMAIN_RECT);
  c.rect = big;
  rp_xfer_desc x;
  RP_EXPECT(rp_xfer_plan(rt, &c, &x), RP_ESHAPE);
  cr_assert(has(want_dom) && has(want_inst), "%s", rp_error_detail());
  /* a part of a parallel operator with the wrong shard */
  int64_t we[4] = {4, 2, 2, 2};
  rp_rect wr = rect_of(4, lo, we), want;
  rp_inst whole = mk(rt, RP_I32, wr, NULL), parts[2];
  RP_CHECK(rp_chunk_rect(&wr, 0, 2, 1, &want));
  parts[0] = mk(rt, RP_I32, want, NULL); /* part 1's shard as part 0 */
  parts[1] = mk(rt, RP_I32, want, NULL);
  RP_CHECK(rp_chunk_rect(&wr, 0, 2, 0, &want));
  rp_parallel_op op = {.kind = RP_POP_REPARTITION,
                       .whole = whole,
                       .parts = parts,
                       .nparts = 2,
                       .dim = 0};
  uint32_t n;
  RP_EXPECT(rp_xfer_expand_parallel(rt, &op, NULL, 0, &n), RP_ESHAPE);
  rp_rect_str(&want, want_dom, sizeof want_dom);
  cr_assert(has(want_dom), "%s", rp_error_detail());
  th_destroy(rt);
}

/* A model of a machine plans copies as its GPUs would: a SUM out of GPU
 * memory into a host instance has no channel there (the fold runs on the
 * destination's device), so recording one, or adding it to a graph, is
 * refused naming the call and the destination, and nothing is recorded. */
Test(xfer, a_model_refuses_a_sum_from_gpu_memory_into_a_host_instance) {
  rp_machine_desc m = {.cpus = 1, .ngpus = 1, .gpu_device = {0}, .nmems = 1};
  m.mems[0] = (rp_mem_info){RP_MEM_GPU, 0};
  rp_runtime *rt = NULL;
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  rp_mem gm;
  RP_CHECK(rp_mem_find(rt, RP_MEM_GPU, 0, &gm));
  rp_rect r = rp_rect_1d(0, 7);
  rp_inst s, d;
  RP_CHECK(rp_instance_create(rt, gm, RP_F32, &r, NULL, &s));
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &d));
  rp_copy c = copy_of(s, d, RP_DOMAIN_SRC);
  c.redop = RP_REDOP_SUM;
  char want[160];
  snprintf(want, sizeof want,
           "SUM from GPU memory into host dst instance %#llx; stage it "
           "through a GPU instance",
           (unsigned long long)d.id);
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_error_set(RP_EINVAL, "stale");
  rp_event done = {0x5eed};
  RP_EXPECT(rp_launch_copy(rt, &c, &done), RP_EUNSUPPORTED);
  cr_assert(!strncmp(rp_error_detail(), "rp_launch_copy: ", 16) &&
                !strcmp(rp_error_detail() + 16, want),
            "%s", rp_error_detail());
  cr_assert_eq(done.id, 0x5eedu, "done was set");
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 0u, "nothing recorded");
  rp_error_set(RP_EINVAL, "stale");
  rp_op_id op = 77;
  RP_EXPECT(rp_graph_add_copy(g, &c, &op), RP_EUNSUPPORTED);
  cr_assert(strstr(rp_error_detail(), "rp_graph_add_copy: ") &&
                strstr(rp_error_detail(), want) &&
                !strstr(rp_error_detail(), "stale"),
            "%s", rp_error_detail());
  cr_assert_eq(op, 77u);
  cr_assert_eq(rp_graph_op_count(g), 0u);
  /* the other way round is planned (through a staging buffer) */
  rp_copy back = copy_of(d, s, RP_DOMAIN_SRC);
  back.redop = RP_REDOP_SUM;
  RP_CHECK(rp_graph_add_copy(g, &back, &op));
  cr_assert_eq(rp_graph_op_count(g), 1u);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, s));
  RP_CHECK(rp_instance_free(rt, d));
  RP_CHECK(rp_runtime_destroy(rt));
}
