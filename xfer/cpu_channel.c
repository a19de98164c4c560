/* xfer/cpu_channel.c — the CPU channels: one memcpy span, strided rows, and
 * sum folds that stay correct when several copies reduce into one
 * destination at once. All run synchronously on the calling thread and
 * allocate nothing. */
#include "xfer/xfer.h"

#include <string.h>

/* ---------------------------------------------------------------------- */
/* Striped fold locks. Tunables (compile time):
 * FOLD_BLOCK_SHIFT 14: a lock covers a 16 KiB-aligned block of destination
 *   addresses. One uncontended lock/unlock (~20-40 ns) then amortizes over
 *   4096 f32 adds (~1-2 us), under 3%, while four threads folding into one
 *   1 MiB destination still interleave over 64 blocks instead of queueing on
 *   one lock for the whole fold.
 * FOLD_STRIPES 64: distinct mutexes; blocks hash onto them. False sharing
 *   between unrelated destinations only costs a wait, never correctness, and
 *   64 cache lines is small. Process-wide, because destination addresses
 *   are: two runtimes wrapping one external buffer still exclude each
 *   other. */
#define FOLD_BLOCK_SHIFT 14
#define FOLD_BLOCK ((uintptr_t)1 << FOLD_BLOCK_SHIFT)
#define FOLD_STRIPES 64

typedef struct stripe {
  RP_ALIGNED_LINE pthread_mutex_t m; /* one per cache line: no false sharing */
} stripe;

static stripe g_stripes[FOLD_STRIPES];
static pthread_once_t g_stripes_once = PTHREAD_ONCE_INIT;

static void stripes_init(void) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  /* adaptive: spin briefly before sleeping; folds hold a lock ~1-2 us */
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
  for (int i = 0; i < FOLD_STRIPES; i++)
    pthread_mutex_init(&g_stripes[i].m, &a);
  pthread_mutexattr_destroy(&a);
}

static pthread_mutex_t *stripe_of(uintptr_t block) {
  /* Fibonacci hash: neighbouring blocks land on different stripes */
  uint64_t h = (uint64_t)block * 0x9E3779B97F4A7C15ull;
  return &g_stripes[h >> (64 - 6)].m;
}
_Static_assert(FOLD_STRIPES == 64, "stripe_of takes the top 6 bits");

int rp__xfer_is_fold_lock(const void *m) {
  for (int i = 0; i < FOLD_STRIPES; i++)
    if (m == (const void *)&g_stripes[i].m)
      return 1;
  return 0;
}

/* ---------------------------------------------------------------------- */
/* Folds of n elements, no locking. Integer sums run in unsigned arithmetic:
 * they wrap modulo 2^bits like the CUDA atomicAdd, never signed overflow. */

#define DEFINE_FOLD(name, T, U)                                                \
  static void name(char *dst, int64_t ds, const char *src, int64_t ss,         \
                   int64_t n) {                                                \
    if (ds == (int64_t)sizeof(T) && ss == (int64_t)sizeof(T)) {                \
      T *restrict d = (T *)(void *)dst;                                        \
      const T *restrict s = (const T *)(const void *)src;                      \
      for (int64_t i = 0; i < n; i++)                                          \
        d[i] = (T)((U)d[i] + (U)s[i]);                                         \
      return;                                                                  \
    }                                                                          \
    for (int64_t i = 0; i < n; i++, dst += ds, src += ss) {                    \
      T *d = (T *)(void *)dst;                                                 \
      *d = (T)((U)*d + (U) * (const T *)(const void *)src);                    \
    }                                                                          \
  }
DEFINE_FOLD(fold_f32, float, float)
DEFINE_FOLD(fold_f64, double, double)
DEFINE_FOLD(fold_i32, int32_t, uint32_t)
DEFINE_FOLD(fold_i64, int64_t, uint64_t)
#undef DEFINE_FOLD

typedef void (*fold_fn)(char *, int64_t, const char *, int64_t, int64_t);

static fold_fn fold_for(int32_t dtype) {
  switch (dtype) {
  case RP_F32:
    return fold_f32;
  case RP_F64:
    return fold_f64;
  case RP_I32:
    return fold_i32;
  case RP_I64:
    return fold_i64;
  }
  RP_ASSERT(!"plan admits SUM only on f32/f64/i32/i64");
  return NULL;
}

/* Folds one row block by block: the elements whose first byte lies in one
 * FOLD_BLOCK of destination addresses are folded under that block's stripe.
 * Strides are positive, so addresses rise monotonically along the row. */
static void fold_row(fold_fn f, char *dst, int64_t ds, const char *src,
                     int64_t ss, int64_t n) {
  while (n > 0) {
    uintptr_t a = (uintptr_t)dst;
    uintptr_t end = (a | (FOLD_BLOCK - 1)) + 1;
    int64_t k = (int64_t)((end - a + (uintptr_t)ds - 1) / (uintptr_t)ds);
    if (k > n)
      k = n;
    pthread_mutex_t *m = stripe_of(a >> FOLD_BLOCK_SHIFT);
    pthread_mutex_lock(m);
    f(dst, ds, src, ss, k);
    pthread_mutex_unlock(m);
    dst += k * ds;
    src += k * ss;
    n -= k;
  }
}

/* ---------------------------------------------------------------------- */
/* Copies of one row */

static void copy_elems(char *dst, int64_t ds, const char *src, int64_t ss,
                       int64_t n, uint32_t esz) {
  /* memcpy with a constant size compiles to one load and store, and stays
   * defined for misaligned external buffers */
  switch (esz) {
  case 4:
    for (int64_t i = 0; i < n; i++, dst += ds, src += ss)
      memcpy(dst, src, 4);
    return;
  case 8:
    for (int64_t i = 0; i < n; i++, dst += ds, src += ss)
      memcpy(dst, src, 8);
    return;
  default:
    for (int64_t i = 0; i < n; i++, dst += ds, src += ss)
      memcpy(dst, src, esz);
  }
}

/* Walks the three outer dimensions of the nest and handles every row. */
static void walk_rows(const rp_xfer_nest *n, fold_fn f) {
  const int64_t *e = n->ext, *ss = n->sstride, *ds = n->dstride;
  int64_t esz = n->esz;
  int contiguous = ss[3] == esz && ds[3] == esz;
  for (int64_t i = 0; i < e[0]; i++)
    for (int64_t j = 0; j < e[1]; j++)
      for (int64_t k = 0; k < e[2]; k++) {
        const char *s = n->src + i * ss[0] + j * ss[1] + k * ss[2];
        char *d = n->dst + i * ds[0] + j * ds[1] + k * ds[2];
        if (f)
          fold_row(f, d, ds[3], s, ss[3], e[3]);
        else if (contiguous)
          memcpy(d, s, (size_t)(e[3] * esz));
        else
          copy_elems(d, ds[3], s, ss[3], e[3], n->esz);
      }
}

rp_status rp_xfer_run_cpu(rp_xfer_desc *d) {
  if (!d || d->channel == RP_XFER_NONE)
    return rp__err(RP_EINVAL, "rp_xfer_run_cpu: descriptor is not planned");
  if (rp_xfer_is_device(d))
    return rp__err(RP_EINVAL,
                   "rp_xfer_run_cpu: copy %#llx -> %#llx has a "
                   "CUDA channel; use rp_xfer_run_stream",
                   (unsigned long long)d->src.id,
                   (unsigned long long)d->dst.id);
  if (RP_UNLIKELY(d->ran))
    return rp__err(RP_EINVAL,
                   "rp_xfer_run_cpu: copy %#llx -> %#llx already "
                   "ran since its last reset",
                   (unsigned long long)d->src.id,
                   (unsigned long long)d->dst.id);
  rp_status st = rp_xfer_check(d);
  if (RP_UNLIKELY(st))
    return st;
  switch (d->channel) {
  case RP_XFER_CPU_SPAN:
    memcpy(d->nest.dst, d->nest.src, (size_t)d->bytes);
    break;
  case RP_XFER_CPU_STRIDED:
    walk_rows(&d->nest, NULL);
    break;
  default:
    RP_ASSERT(d->channel == RP_XFER_CPU_REDUCE);
    /* after the first call pthread_once is one acquire load */
    pthread_once(&g_stripes_once, stripes_init);
    walk_rows(&d->nest, fold_for(d->nest.dtype));
    break;
  }
  d->ran = 1;
  d->progress = d->bytes;
  return RP_OK;
}
