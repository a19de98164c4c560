/* xfer/parallel.c — parallel operators (replicate, repartition, combine,
 * reduction; forward and backward) expanded into copies, as the FlexFlow
 * Realm backend executes them; and rp_chunk_rect, the torch.chunk split
 * they validate shards against. */
#include "xfer/xfer.h"

#include <string.h>

/* torch.chunk semantics: chunk = ceil(extent / n); shard i covers
 * [lo + i*chunk, min(hi, lo + (i+1)*chunk - 1)]. When the split leaves
 * trailing shards empty (10 rows into 6: chunk 2 fills only 5 shards)
 * torch.chunk returns fewer chunks; a shard here is an instance that must
 * hold at least one point, so an empty shard is RP_ESHAPE rather than an
 * empty rectangle, and the caller picks fewer shards. */
rp_status rp_chunk_rect(const rp_rect *whole, int dim, uint32_t n, uint32_t i,
                        rp_rect *out) {
  if (!whole || !out)
    return rp__err(RP_EINVAL, "rp_chunk_rect: NULL argument");
  if (whole->dim < 1 || whole->dim > RP_MAX_DIM)
    return rp__err(RP_ESHAPE, "rp_chunk_rect: whole rect has %d dims (1..%d)",
                   whole->dim, RP_MAX_DIM);
  for (int d = 0; d < whole->dim; d++) {
    int64_t e;
    if (whole->hi[d] < whole->lo[d])
      return rp__err(RP_ESHAPE, "rp_chunk_rect: whole rect is empty in dim %d",
                     d);
    if (!rp__extent_ok(whole->lo[d], whole->hi[d], &e))
      return rp__err(RP_ERANGE, "rp_chunk_rect: extent of dim %d overflows", d);
  }
  if (rp_rect_volume(whole) <= 0)
    return rp__err(RP_ERANGE, "rp_chunk_rect: the whole rect's volume "
                              "overflows");
  if (dim < 0 || dim >= whole->dim)
    return rp__err(RP_EINVAL,
                   "rp_chunk_rect: dim %d out of range (rect has "
                   "%d dims)",
                   dim, whole->dim);
  if (n == 0)
    return rp__err(RP_EINVAL, "rp_chunk_rect: zero shards");
  if (i >= n)
    return rp__err(RP_ERANGE, "rp_chunk_rect: shard %u of %u", i, n);
  int64_t lo = whole->lo[dim], hi = whole->hi[dim], ext, off, end;
  if (!rp__extent_ok(lo, hi, &ext)) /* cannot fail: checked above */
    return rp__err(RP_ERANGE, "rp_chunk_rect: extent of dim %d overflows", dim);
  int64_t chunk = ext / n + (ext % n != 0);
  /* off = chunk * i < ext + n fits in practice, but checked: no signed
   * overflow for any input */
  if (!rp__mul_i64_ok(chunk, (int64_t)i, &off) || off >= ext)
    return rp__err(RP_ESHAPE,
                   "rp_chunk_rect: shard %u of %u along dim %d is empty "
                   "(extent %lld splits into chunks of %lld; use fewer "
                   "shards)",
                   i, n, dim, (long long)ext, (long long)chunk);
  *out = *whole;
  out->lo[dim] = lo + off; /* off < ext: lo + off <= hi */
  /* the last point: lo + off + chunk - 1, or hi when that passes it */
  out->hi[dim] =
      !rp__add_i64_ok(off, chunk, &end) || end >= ext ? hi : lo + end - 1;
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* Validation */

static const char *kind_name(rp_pop_kind k) {
  switch (k) {
  case RP_POP_REPLICATE:
    return "replicate";
  case RP_POP_REPARTITION:
    return "repartition";
  case RP_POP_COMBINE:
    return "combine";
  case RP_POP_REDUCTION:
    return "reduction";
  }
  return "?";
}

static int is_split(rp_pop_kind k) {
  return k == RP_POP_REPARTITION || k == RP_POP_COMBINE;
}

static rp_status check_op(const rp_parallel_op *op) {
  if ((unsigned)op->kind > RP_POP_REDUCTION)
    return rp__err(RP_EINVAL, "rp_xfer_expand_parallel: unknown kind %d",
                   (int)op->kind);
  if (op->backward != 0 && op->backward != 1)
    return rp__err(RP_EINVAL,
                   "rp_xfer_expand_parallel: backward = %d (0 forward, 1 "
                   "backward)",
                   op->backward);
  if (op->nparts == 0)
    return rp__err(RP_EINVAL, "rp_xfer_expand_parallel: %s has no parts",
                   kind_name(op->kind));
  if (!op->parts)
    return rp__err(RP_EINVAL,
                   "rp_xfer_expand_parallel: %s of %u parts with parts = NULL",
                   kind_name(op->kind), op->nparts);
  /* handle 0 first: two parts (or a part and the whole) left 0 are not
   * "the same instance", they are none */
  if (!op->whole.id)
    return rp__err(RP_EINVAL, "rp_xfer_expand_parallel: %s whole instance 0 %s",
                   kind_name(op->kind), rp__inst_missing(op->whole));
  for (uint32_t i = 0; i < op->nparts; i++) {
    if (!op->parts[i].id)
      return rp__err(RP_EINVAL,
                     "rp_xfer_expand_parallel: %s part %u instance 0 %s",
                     kind_name(op->kind), i, rp__inst_missing(op->parts[i]));
    if (op->parts[i].id == op->whole.id)
      return rp__err(RP_EINVAL,
                     "rp_xfer_expand_parallel: %s part %u is the "
                     "whole instance %#llx",
                     kind_name(op->kind), i, (unsigned long long)op->whole.id);
    for (uint32_t j = 0; j < i; j++)
      if (op->parts[j].id == op->parts[i].id)
        return rp__err(RP_EINVAL,
                       "rp_xfer_expand_parallel: %s parts %u and "
                       "%u are the same instance %#llx",
                       kind_name(op->kind), j, i,
                       (unsigned long long)op->parts[i].id);
  }
  return RP_OK;
}

/* Whether the operator sums its parts into the whole: the backward of
 * replicate, the forward of reduction. */
static int is_sum(const rp_parallel_op *op) {
  return op->kind == RP_POP_REPLICATE   ? op->backward != 0
         : op->kind == RP_POP_REDUCTION ? !op->backward
                                        : 0;
}

/* The rect part i must have: its torch.chunk shard, or the whole's rect. */
static rp_status part_rect(const rp_parallel_op *op, const rp_rect *whole,
                           uint32_t i, rp_rect *want) {
  if (!is_split(op->kind)) {
    *want = *whole;
    return RP_OK;
  }
  if (op->dim < 0 || op->dim >= whole->dim)
    return rp__err(RP_EINVAL,
                   "rp_xfer_expand_parallel: %s along dim %d of a "
                   "%d-dim whole",
                   kind_name(op->kind), op->dim, whole->dim);
  rp_status st = rp_chunk_rect(whole, op->dim, op->nparts, i, want);
  if (st)
    return rp__err_prefix(
        st, "rp_xfer_expand_parallel: %s part %u: ", kind_name(op->kind), i);
  return RP_OK;
}

static int rect_eq(const rp_rect *a, const rp_rect *b) {
  if (a->dim != b->dim)
    return 0;
  for (int d = 0; d < a->dim; d++)
    if (a->lo[d] != b->lo[d] || a->hi[d] != b->hi[d])
      return 0;
  return 1;
}

static rp_status check_part(rp_runtime *rt, const rp_parallel_op *op,
                            const rp_instance_info *w, uint32_t i) {
  const char *k = kind_name(op->kind);
  rp_inst_view v;
  rp_status vst = rp__inst_view(rt, op->parts[i], &v);
  if (vst)
    return rp__err(vst,
                   "rp_xfer_expand_parallel: %s part %u instance "
                   "%#llx %s",
                   k, i, (unsigned long long)op->parts[i].id,
                   rp__inst_missing(op->parts[i]));
  if (v.info.dtype != w->dtype)
    return rp__err(RP_ETYPE,
                   "rp_xfer_expand_parallel: %s part %u instance "
                   "%#llx is %s, the whole is %s",
                   k, i, (unsigned long long)op->parts[i].id,
                   rp_dtype_name(v.info.dtype), rp_dtype_name(w->dtype));
  rp_rect want;
  rp_status st = part_rect(op, &w->rect, i, &want);
  if (st)
    return st;
  if (rect_eq(&v.info.rect, &want))
    return RP_OK;
  char a[RP_XFER_RECT_STR], b[RP_XFER_RECT_STR];
  return rp__err(RP_ESHAPE,
                 "rp_xfer_expand_parallel: %s part %u instance "
                 "%#llx has rect %s, expected %s",
                 k, i, (unsigned long long)op->parts[i].id,
                 rp_xfer_rect_str(&v.info.rect, a, sizeof a),
                 rp_xfer_rect_str(&want, b, sizeof b));
}

/* ---------------------------------------------------------------------- */
/* Expansion */

static rp_copy make_copy(rp_inst src, rp_inst dst, rp_copy_domain dom,
                         rp_redop redop) {
  rp_copy c;
  memset(&c, 0, sizeof c);
  c.src = src;
  c.dst = dst;
  c.domain = dom;
  c.redop = redop;
  c.wait = RP_NO_EVENT;
  return c;
}

/* Fills out[0..nparts). Three shapes cover all eight cases:
 * whole -> every part (scatter/broadcast, domain DST: the part's rect);
 * every part -> whole (gather, domain SRC: the part's rect);
 * sum of parts -> whole (part 0 plain, then SUM; domain SRC). */
static void expand(const rp_parallel_op *op, rp_copy *out) {
  enum { TO_PARTS, GATHER, SUM } shape;
  switch (op->kind) {
  case RP_POP_REPLICATE:
    shape = op->backward ? SUM : TO_PARTS;
    break;
  case RP_POP_REPARTITION:
    shape = op->backward ? GATHER : TO_PARTS;
    break;
  case RP_POP_COMBINE:
    shape = op->backward ? TO_PARTS : GATHER;
    break;
  default:
    shape = op->backward ? TO_PARTS : SUM;
    break;
  }
  for (uint32_t i = 0; i < op->nparts; i++) {
    rp_inst p = op->parts[i];
    if (shape == TO_PARTS)
      out[i] = make_copy(op->whole, p, RP_DOMAIN_DST, RP_REDOP_NONE);
    else
      out[i] = make_copy(p, op->whole, RP_DOMAIN_SRC,
                         shape == SUM && i > 0 ? RP_REDOP_SUM : RP_REDOP_NONE);
  }
}

rp_status rp_xfer_expand_parallel(rp_runtime *rt, const rp_parallel_op *op,
                                  rp_copy *out, uint32_t cap, uint32_t *count) {
  if (!rt || !op || !count)
    return rp__err(RP_EINVAL, "rp_xfer_expand_parallel: NULL argument");
  rp_status st = check_op(op);
  if (st)
    return st;
  rp_inst_view w;
  if ((st = rp__inst_view(rt, op->whole, &w)))
    return rp__err(st,
                   "rp_xfer_expand_parallel: %s whole instance "
                   "%#llx %s",
                   kind_name(op->kind), (unsigned long long)op->whole.id,
                   rp__inst_missing(op->whole));
  for (uint32_t i = 0; i < op->nparts; i++)
    if ((st = check_part(rt, op, &w.info, i)))
      return st;
  /* A sum's type is checked whatever the part count: one part is a plain
   * copy, but the same operator over more parts would be refused. */
  rp_dtype t = w.info.dtype;
  if (is_sum(op) && t != RP_F32 && t != RP_F64 && t != RP_I32 && t != RP_I64)
    return rp__err(RP_ETYPE,
                   "rp_xfer_expand_parallel: %s%s sums its parts, which "
                   "are %s (a sum takes f32, f64, i32 or i64)",
                   kind_name(op->kind), op->backward ? " backward" : "",
                   rp_dtype_name(t));
  if (out && cap < op->nparts) {
    *count = op->nparts;
    return rp__err(RP_ERANGE,
                   "rp_xfer_expand_parallel: %s needs %u copies, "
                   "room for %u",
                   kind_name(op->kind), op->nparts, cap);
  }
  *count = op->nparts;
  if (out)
    expand(op, out);
  return RP_OK;
}
