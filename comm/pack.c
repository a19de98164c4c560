/* comm/pack.c — moving a rectangle of a strided host instance into and out
 * of the dense buffers messages travel in, and local copies between two
 * instances (the root's own part of a parallel operator). Row by row: the
 * last dimension's run is contiguous when its stride is 1 (dense layouts),
 * else element by element. */
#include "comm.h"

#include <string.h>

/* Byte address of point p of inst. */
static char *at(const rp_instance_info *inst, const int64_t *p) {
  size_t esz = rp_dtype_size(inst->dtype);
  int64_t off = 0;
  for (int d = 0; d < inst->rect.dim; d++)
    off += (p[d] - inst->rect.lo[d]) * inst->strides[d];
  return (char *)inst->ptr + off * (int64_t)esz;
}

int rp__dist_contig(const rp_instance_info *inst, const rp_rect *dom,
                    void **ptr) {
  /* Contiguous iff, ignoring dimensions of extent 1, each dimension's
   * stride is the product of the inner dimensions' extents (innermost 1). */
  int64_t expect = 1;
  for (int d = dom->dim - 1; d >= 0; d--) {
    int64_t ext = dom->hi[d] - dom->lo[d] + 1;
    if (ext == 1)
      continue;
    if (inst->strides[d] != expect)
      return 0;
    expect *= ext;
  }
  *ptr = at(inst, dom->lo);
  return 1;
}

int rp__dist_overlap(const rp_instance_info *a, const rp_instance_info *b,
                     const rp_rect *dom) {
  uintptr_t a0 = (uintptr_t)at(a, dom->lo),
            a1 = (uintptr_t)at(a, dom->hi) + rp_dtype_size(a->dtype);
  uintptr_t b0 = (uintptr_t)at(b, dom->lo),
            b1 = (uintptr_t)at(b, dom->hi) + rp_dtype_size(b->dtype);
  return a0 < b1 && b0 < a1;
}

/* Calls row(dst_row, src_row, n) for every row of dom (the last dimension):
 * the buffer side advances densely, the instance side by its strides. */
typedef void (*row_fn)(char *inst, char *buf, int64_t n, size_t esz,
                       int64_t stride, rp_dtype t);

static void each_row(const rp_instance_info *inst, const rp_rect *dom,
                     char *buf, row_fn fn, rp_dtype t) {
  int D = dom->dim;
  size_t esz = rp_dtype_size(inst->dtype);
  int64_t p[RP_MAX_DIM];
  memcpy(p, dom->lo, sizeof p);
  int64_t n = dom->hi[D - 1] - dom->lo[D - 1] + 1;
  int64_t stride = inst->strides[D - 1];
  for (;;) {
    fn(at(inst, p), buf, n, esz, stride, t);
    buf += (size_t)n * esz;
    int d = D - 2;
    while (d >= 0 && ++p[d] > dom->hi[d]) {
      p[d] = dom->lo[d];
      d--;
    }
    if (d < 0)
      return;
  }
}

static void row_pack(char *inst, char *out, int64_t n, size_t esz,
                     int64_t stride, rp_dtype t) {
  RP_UNUSED(t);
  if (stride == 1) {
    memcpy(out, inst, (size_t)n * esz);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    memcpy(out + (size_t)i * esz, inst + i * stride * (int64_t)esz, esz);
}

static void row_store(char *inst, char *buf, int64_t n, size_t esz,
                      int64_t stride, rp_dtype t) {
  RP_UNUSED(t);
  if (stride == 1) {
    memcpy(inst, buf, (size_t)n * esz);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    memcpy(inst + i * stride * (int64_t)esz, buf + (size_t)i * esz, esz);
}

#define SUM_ROW_(T)                                                            \
  for (int64_t i = 0; i < n; i++) {                                            \
    T a, b;                                                                    \
    memcpy(&a, inst + i * stride * (int64_t)esz, sizeof a);                    \
    memcpy(&b, buf + (size_t)i * esz, sizeof b);                               \
    a = (T)(a + b);                                                            \
    memcpy(inst + i * stride * (int64_t)esz, &a, sizeof a);                    \
  }

static void row_sum(char *inst, char *buf, int64_t n, size_t esz,
                    int64_t stride, rp_dtype t) {
  switch (t) {
  case RP_F32:
    SUM_ROW_(float);
    break;
  case RP_F64:
    SUM_ROW_(double);
    break;
  case RP_I32: /* integer sums wrap modulo 2^32, as in xfer */
    SUM_ROW_(uint32_t);
    break;
  case RP_I64:
    SUM_ROW_(uint64_t);
    break;
  default:
    RP_ASSERT(!"sum of an unsupported type (launch checks it)");
  }
}
#undef SUM_ROW_

void rp__dist_pack(const rp_instance_info *inst, const rp_rect *dom,
                   void *buf) {
  each_row(inst, dom, buf, row_pack, inst->dtype);
}

void rp__dist_unpack(const rp_instance_info *inst, const rp_rect *dom,
                     const void *buf, rp_redop redop) {
  each_row(inst, dom, (char *)buf, redop == RP_REDOP_SUM ? row_sum : row_store,
           inst->dtype);
}

void rp__dist_local_copy(const rp_instance_info *src,
                         const rp_instance_info *dst, const rp_rect *dom,
                         rp_redop redop) {
  /* Row by row through a small bounce buffer: both sides may be strided. */
  int D = dom->dim;
  size_t esz = rp_dtype_size(src->dtype);
  int64_t n = dom->hi[D - 1] - dom->lo[D - 1] + 1;
  char bounce[4096];
  int64_t chunk = (int64_t)(sizeof bounce / esz);
  rp_rect row = *dom;
  int64_t p[RP_MAX_DIM];
  memcpy(p, dom->lo, sizeof p);
  for (;;) {
    for (int64_t c = 0; c < n; c += chunk) {
      for (int d = 0; d < D - 1; d++)
        row.lo[d] = row.hi[d] = p[d];
      row.lo[D - 1] = dom->lo[D - 1] + c;
      row.hi[D - 1] = row.lo[D - 1] + (c + chunk < n ? chunk : n - c) - 1;
      rp__dist_pack(src, &row, bounce);
      rp__dist_unpack(dst, &row, bounce, redop);
    }
    int d = D - 2;
    while (d >= 0 && ++p[d] > dom->hi[d]) {
      p[d] = dom->lo[d];
      d--;
    }
    if (d < 0)
      return;
  }
}
