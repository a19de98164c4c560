/* xfer/plan.c — planning a copy into a descriptor: validation, the copy
 * domain, the loop nest, the channel; and the descriptor's per-use
 * protocol (check, reset, release). */
#include "xfer/xfer.h"

#include <string.h>

const char *rp_xfer_rect_str(const rp_rect *r, char *buf, size_t size) {
  return rp_rect_str(r, buf, size);
}

static int rect_contains(const rp_rect *outer, const rp_rect *inner) {
  for (int d = 0; d < inner->dim; d++)
    if (inner->lo[d] < outer->lo[d] || inner->hi[d] > outer->hi[d])
      return 0;
  return 1;
}

static int rect_empty(const rp_rect *r) {
  for (int d = 0; d < r->dim; d++)
    if (r->hi[d] < r->lo[d])
      return 1;
  return 0;
}

/* ---------------------------------------------------------------------- */
/* Validation and the copy domain */

typedef struct side {
  const char *name; /* "src" / "dst" */
  rp_inst inst;
  rp_inst_view v;
} side;

static rp_status side_view(rp_runtime *rt, side *s) {
  rp_status st = rp__inst_view(rt, s->inst, &s->v);
  if (st)
    return rp__err(st, "rp_xfer_plan: %s instance %#llx %s", s->name,
                   (unsigned long long)s->inst.id, rp__inst_missing(s->inst));
  return RP_OK;
}

static rp_status check_types(const side *s, const side *t, rp_redop redop) {
  rp_dtype a = s->v.info.dtype, b = t->v.info.dtype;
  if (a != b)
    return rp__err(RP_ETYPE,
                   "rp_xfer_plan: src instance %#llx is %s, dst instance "
                   "%#llx is %s",
                   (unsigned long long)s->inst.id, rp_dtype_name(a),
                   (unsigned long long)t->inst.id, rp_dtype_name(b));
  if (redop == RP_REDOP_SUM && a != RP_F32 && a != RP_F64 && a != RP_I32 &&
      a != RP_I64)
    return rp__err(RP_ETYPE,
                   "rp_xfer_plan: SUM into dst instance %#llx of type %s "
                   "(only f32, f64, i32, i64)",
                   (unsigned long long)t->inst.id, rp_dtype_name(a));
  return RP_OK;
}

/* The domain must lie inside inst's rect; names inst and both rects. */
static rp_status check_fits(const rp_rect *dom, const side *s,
                            const char *mode) {
  if (rect_contains(&s->v.info.rect, dom))
    return RP_OK;
  char a[RP_XFER_RECT_STR], b[RP_XFER_RECT_STR];
  return rp__err(RP_ESHAPE,
                 "rp_xfer_plan: domain %s %s does not fit %s instance %#llx "
                 "rect %s",
                 mode, rp_xfer_rect_str(dom, a, sizeof a), s->name,
                 (unsigned long long)s->inst.id,
                 rp_xfer_rect_str(&s->v.info.rect, b, sizeof b));
}

static rp_status intersect(const side *s, const side *t, rp_rect *dom) {
  const rp_rect *a = &s->v.info.rect, *b = &t->v.info.rect;
  *dom = *a;
  for (int d = 0; d < a->dim; d++) {
    dom->lo[d] = a->lo[d] > b->lo[d] ? a->lo[d] : b->lo[d];
    dom->hi[d] = a->hi[d] < b->hi[d] ? a->hi[d] : b->hi[d];
  }
  if (!rect_empty(dom))
    return RP_OK;
  char x[RP_XFER_RECT_STR], y[RP_XFER_RECT_STR];
  return rp__err(
      RP_ESHAPE,
      "rp_xfer_plan: domain INTERSECT is empty: src instance "
      "%#llx rect %s, dst instance %#llx rect %s",
      (unsigned long long)s->inst.id, rp_xfer_rect_str(a, x, sizeof x),
      (unsigned long long)t->inst.id, rp_xfer_rect_str(b, y, sizeof y));
}

static rp_status pick_domain(const rp_copy *c, const side *s, const side *t,
                             rp_rect *dom) {
  if (s->v.info.rect.dim != t->v.info.rect.dim)
    return rp__err(RP_ESHAPE,
                   "rp_xfer_plan: src instance %#llx has %d dims, dst "
                   "instance %#llx has %d",
                   (unsigned long long)s->inst.id, s->v.info.rect.dim,
                   (unsigned long long)t->inst.id, t->v.info.rect.dim);
  switch (c->domain) {
  case RP_DOMAIN_INTERSECT:
    return intersect(s, t, dom);
  case RP_DOMAIN_SRC:
    *dom = s->v.info.rect;
    return check_fits(dom, t, "SRC");
  case RP_DOMAIN_DST:
    *dom = t->v.info.rect;
    return check_fits(dom, s, "DST");
  case RP_DOMAIN_RECT:
    break;
  }
  char a[RP_XFER_RECT_STR];
  *dom = c->rect;
  for (int d = dom->dim > 0 ? dom->dim : 0; d < RP_MAX_DIM; d++)
    dom->lo[d] = dom->hi[d] = 0; /* unused dims: as instance rects keep them */
  if (c->rect.dim != s->v.info.rect.dim)
    return rp__err(RP_ESHAPE,
                   "rp_xfer_plan: domain RECT %s has %d dims, the "
                   "instances have %d",
                   rp_xfer_rect_str(&c->rect, a, sizeof a), c->rect.dim,
                   s->v.info.rect.dim);
  if (rect_empty(&c->rect))
    return rp__err(RP_ESHAPE, "rp_xfer_plan: domain RECT %s is empty",
                   rp_xfer_rect_str(&c->rect, a, sizeof a));
  rp_status st = check_fits(dom, s, "RECT");
  return st ? st : check_fits(dom, t, "RECT");
}

static rp_status check_args(rp_runtime *rt, const rp_copy *c) {
  if (!rt || !c)
    return rp__err(RP_EINVAL, "rp_xfer_plan: NULL argument");
  rp_status st = rp__runtime_check(rt);
  if (st)
    return st;
  if (c->redop != RP_REDOP_NONE && c->redop != RP_REDOP_SUM)
    return rp__err(RP_EINVAL,
                   "rp_xfer_plan: unknown redop %d into dst "
                   "instance %#llx",
                   (int)c->redop, (unsigned long long)c->dst.id);
  if ((unsigned)c->domain > RP_DOMAIN_RECT)
    return rp__err(RP_EINVAL, "rp_xfer_plan: unknown copy domain mode %d",
                   (int)c->domain);
  if (c->src.id == c->dst.id && c->src.id != 0)
    return rp__err(RP_EINVAL,
                   "rp_xfer_plan: src and dst are the same "
                   "instance %#llx",
                   (unsigned long long)c->src.id);
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* The loop nest */

typedef struct axis {
  int64_t ext, ss, ds; /* extent, src and dst strides in bytes */
} axis;

/* Collects the domain's non-trivial dimensions and the offsets (elements)
 * of its first point in each instance. */
static int collect_axes(const rp_rect *dom, const rp_instance_info *s,
                        const rp_instance_info *t, int64_t esz, axis *ax,
                        int64_t *soff, int64_t *doff) {
  int n = 0;
  *soff = *doff = 0;
  for (int d = 0; d < dom->dim; d++) {
    *soff += (dom->lo[d] - s->rect.lo[d]) * s->strides[d];
    *doff += (dom->lo[d] - t->rect.lo[d]) * t->strides[d];
    int64_t ext = dom->hi[d] - dom->lo[d] + 1;
    if (ext > 1)
      ax[n++] = (axis){ext, s->strides[d] * esz, t->strides[d] * esz};
  }
  return n;
}

/* Orders axes by destination stride, largest first (a copy is pointwise, so
 * any order moves the same bytes; this one writes sequentially), then merges
 * an outer axis into the next inner one when its strides are exactly the
 * inner span on both sides. Returns the new axis count. */
static int order_and_merge(axis *ax, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && ax[j].ds > ax[j - 1].ds; j--) {
      axis tmp = ax[j];
      ax[j] = ax[j - 1];
      ax[j - 1] = tmp;
    }
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (m > 0 && ax[m - 1].ss == ax[i].ss * ax[i].ext &&
        ax[m - 1].ds == ax[i].ds * ax[i].ext) {
      ax[m - 1].ext *= ax[i].ext;
      ax[m - 1].ss = ax[i].ss;
      ax[m - 1].ds = ax[i].ds;
    } else {
      ax[m++] = ax[i];
    }
  }
  return m;
}

static void build_nest(const rp_rect *dom, const rp_instance_info *s,
                       const rp_instance_info *t, rp_xfer_nest *n) {
  int64_t esz = (int64_t)rp_dtype_size(s->dtype), soff, doff;
  axis ax[RP_MAX_DIM];
  int na = collect_axes(dom, s, t, esz, ax, &soff, &doff);
  na = order_and_merge(ax, na);
  if (na == 0) /* one point: a one-element contiguous row */
    ax[na++] = (axis){1, esz, esz};
  memset(n, 0, sizeof *n);
  int lead = RP_XFER_NEST_DIMS - na;
  for (int i = 0; i < RP_XFER_NEST_DIMS; i++) {
    axis a = i < lead ? (axis){1, 0, 0} : ax[i - lead];
    n->ext[i] = a.ext;
    n->sstride[i] = a.ss;
    n->dstride[i] = a.ds;
  }
  /* in integers: a model of a machine (reprise dump) has no storage, and
   * an offset from its NULL is undefined as pointer arithmetic */
  n->src = (void *)((uintptr_t)s->ptr + (uintptr_t)(soff * esz));
  n->dst = (void *)((uintptr_t)t->ptr + (uintptr_t)(doff * esz));
  n->esz = (uint32_t)esz;
  n->dtype = (int32_t)s->dtype;
  n->src_dev = n->dst_dev = -1;
}

static int nest_is_span(const rp_xfer_nest *n) {
  return n->ext[0] == 1 && n->ext[1] == 1 && n->ext[2] == 1 &&
         n->sstride[3] == (int64_t)n->esz && n->dstride[3] == (int64_t)n->esz;
}

/* ---------------------------------------------------------------------- */
/* Channels */

/* A dense copy of d's nest from the source into ib (nest order). */
static void stage_nest(rp_xfer_desc *d) {
  d->stage = d->nest;
  d->stage.dst = d->ib;
  d->stage.dst_dev = d->nest.dst_dev;
  int64_t s = d->nest.esz;
  for (int i = RP_XFER_NEST_DIMS - 1; i >= 0; i--) {
    d->stage.dstride[i] =
        d->nest.ext[i] > 1 || i == RP_XFER_NEST_DIMS - 1 ? s : 0;
    s *= d->nest.ext[i];
  }
}

/* CUDA plan: device ids; a SUM whose source the kernel cannot read (other
 * device or host memory) is staged through ib in the destination's memory. */
/* The device of memory m (-1: host memory), from the runtime's tables: a
 * model of a machine (reprise dump) has memories but no pointers. */
static int mem_device(rp_runtime *rt, rp_mem m) {
  rp_mem_info mi;
  return rp_mem_query(rt, m, &mi) == RP_OK && mi.kind == RP_MEM_GPU ? mi.device
                                                                    : -1;
}

static rp_status plan_cuda(rp_xfer_desc *d) {
  rp_status st = RP_OK;
  if (rp__runtime_is_model(d->rt)) {
    d->nest.src_dev = mem_device(d->rt, d->src_mem);
    d->nest.dst_dev = mem_device(d->rt, d->dst_mem);
  } else {
    st = rp_xfer_cuda_device_of(d->rt, d->nest.src, &d->nest.src_dev);
    if (!st)
      st = rp_xfer_cuda_device_of(d->rt, d->nest.dst, &d->nest.dst_dev);
  }
  if (st)
    return rp__err_prefix(st, "rp_xfer_plan: copy %#llx -> %#llx: ",
                          (unsigned long long)d->src.id,
                          (unsigned long long)d->dst.id);
  if (d->redop != RP_REDOP_SUM) {
    d->channel = RP_XFER_CUDA_COPY;
    return RP_OK;
  }
  if (d->nest.dst_dev < 0)
    return rp__err(RP_EUNSUPPORTED,
                   "rp_xfer_plan: SUM from GPU memory into host dst instance "
                   "%#llx; stage it through a GPU instance",
                   (unsigned long long)d->dst.id);
  d->channel = RP_XFER_CUDA_REDUCE;
  if (d->nest.src_dev == d->nest.dst_dev)
    return RP_OK;
  d->ib_bytes = (size_t)d->bytes;
  st = rp__mem_alloc(d->rt, d->dst_mem, d->ib_bytes, 256, &d->ib);
  if (st)
    return rp__err_prefix(st,
                          "rp_xfer_plan: staging buffer for SUM into dst "
                          "instance %#llx: ",
                          (unsigned long long)d->dst.id);
  stage_nest(d);
  d->nest.src = d->ib; /* the fold reads the staged copy */
  for (int i = 0; i < RP_XFER_NEST_DIMS; i++)
    d->nest.sstride[i] = d->stage.dstride[i];
  d->nest.src_dev = d->nest.dst_dev;
  return RP_OK;
}

static rp_status pick_channel(rp_xfer_desc *d) {
  rp_runtime *rt = d->rt;
  if (rp__mem_host_addressable(rt, d->src_mem) &&
      rp__mem_host_addressable(rt, d->dst_mem)) {
    d->channel = d->redop == RP_REDOP_SUM ? RP_XFER_CPU_REDUCE
                 : nest_is_span(&d->nest) ? RP_XFER_CPU_SPAN
                                          : RP_XFER_CPU_STRIDED;
    return RP_OK;
  }
  return plan_cuda(d);
}

/* ---------------------------------------------------------------------- */
/* Plan and the per-use protocol */

/* Bytes from the nest's first point on one side to the end of its last
 * (strides are positive, so the walk stays inside). */
static uintptr_t nest_span(const rp_xfer_nest *n, int dst) {
  uintptr_t span = n->esz;
  for (int i = 0; i < RP_XFER_NEST_DIMS; i++)
    span += (uintptr_t)(n->ext[i] - 1) *
            (uintptr_t)(dst ? n->dstride[i] : n->sstride[i]);
  return span;
}

/* Allocated instances never share memory; an external one may wrap
 * another external one's buffer, or part of an allocated one's (a view
 * into rp_instance_ptr's memory). A copy whose source and destination byte
 * ranges overlap could read what it already wrote (memcpy's undefined
 * case), so it is refused, also when strides would interleave the points
 * without touching one twice; a copy between disjoint ranges of one buffer
 * is fine. */
static rp_status check_overlap(const rp_xfer_desc *d, int src_ext,
                               int dst_ext) {
  if (!src_ext && !dst_ext)
    return RP_OK;
  uintptr_t s0 = (uintptr_t)d->nest.src, s1 = s0 + nest_span(&d->nest, 0);
  uintptr_t d0 = (uintptr_t)d->nest.dst, d1 = d0 + nest_span(&d->nest, 1);
  if (s1 <= d0 || d1 <= s0)
    return RP_OK;
  return rp__err(RP_EINVAL,
                 "rp_xfer_plan: copy %#llx -> %#llx: the instances' bytes "
                 "overlap in memory (src [%p, +%zu), dst [%p, +%zu); %s "
                 "external); copy through a separate buffer",
                 (unsigned long long)d->src.id, (unsigned long long)d->dst.id,
                 (void *)s0, (size_t)(s1 - s0), (void *)d0, (size_t)(d1 - d0),
                 src_ext && dst_ext ? "both"
                 : src_ext          ? "src"
                                    : "dst");
}

static rp_status check_alignment(const rp_xfer_desc *d) {
  /* The fold dereferences typed pointers: an external instance wrapping a
   * misaligned buffer cannot be a SUM destination or source. */
  uintptr_t mis =
      ((uintptr_t)d->nest.src | (uintptr_t)d->nest.dst) % d->nest.esz;
  if (d->redop != RP_REDOP_SUM || mis == 0)
    return RP_OK;
  return rp__err(RP_EINVAL,
                 "rp_xfer_plan: SUM %#llx -> %#llx on a buffer "
                 "not aligned to its %u-byte elements",
                 (unsigned long long)d->src.id, (unsigned long long)d->dst.id,
                 d->nest.esz);
}

static rp_status plan_sides(rp_runtime *rt, const rp_copy *c, side *s, side *t,
                            rp_rect *dom) {
  rp_status st = check_args(rt, c);
  if (st)
    return st;
  *s = (side){.name = "src", .inst = c->src};
  *t = (side){.name = "dst", .inst = c->dst};
  st = side_view(rt, s);
  if (!st)
    st = side_view(rt, t);
  if (!st)
    st = check_types(s, t, c->redop);
  if (!st)
    st = pick_domain(c, s, t, dom);
  return st;
}

rp_status rp_xfer_plan(rp_runtime *rt, const rp_copy *c, rp_xfer_desc *d) {
  if (!d)
    return rp__err(RP_EINVAL, "rp_xfer_plan: NULL descriptor");
  memset(d, 0, sizeof *d);
  side s, t;
  rp_rect dom;
  rp_status st = plan_sides(rt, c, &s, &t, &dom);
  if (st)
    return st;
  d->rt = rt;
  d->src = c->src;
  d->dst = c->dst;
  d->redop = c->redop;
  d->domain = dom;
  d->bytes = (uint64_t)rp_rect_volume(&dom) * rp_dtype_size(s.v.info.dtype);
  d->src_mem = s.v.info.mem;
  d->dst_mem = t.v.info.mem;
  d->src_gen = rp__inst_gen(c->src); /* == the slot's, checked by the view */
  d->dst_gen = rp__inst_gen(c->dst);
  d->src_gen_word = s.v.gen_word;
  d->dst_gen_word = t.v.gen_word;
  build_nest(&dom, &s.v.info, &t.v.info, &d->nest);
  st = check_overlap(d, s.v.info.external, t.v.info.external);
  if (!st)
    st = check_alignment(d);
  if (!st)
    st = pick_channel(d);
  if (st)
    rp_xfer_release(d);
  return st;
}

rp_status rp_xfer_check(const rp_xfer_desc *d) {
  if (!d || d->channel == RP_XFER_NONE)
    return rp__err(RP_ESTALE, "rp_xfer: descriptor is not planned");
  /* the loads (rp__inst_gen_settled) pair with the release stores of the
   * new generation in rp_instance_free and rp_instance_realloc, so a free
   * that completed before them is seen; one racing with the transfer
   * itself is excluded by the caller. */
  uint32_t sg = rp__inst_gen_settled(d->src_gen_word, d->src_gen);
  uint32_t dg = rp__inst_gen_settled(d->dst_gen_word, d->dst_gen);
  if (RP_LIKELY(sg == d->src_gen && dg == d->dst_gen))
    return RP_OK;
  const char *which = sg != d->src_gen && dg != d->dst_gen ? "src and dst"
                      : sg != d->src_gen                   ? "src"
                                                           : "dst";
  return rp__err(RP_ESTALE,
                 "rp_xfer: copy %#llx -> %#llx: %s instance freed or "
                 "reallocated since planning (generations %u -> %u, "
                 "%u -> %u); plan it again",
                 (unsigned long long)d->src.id, (unsigned long long)d->dst.id,
                 which, d->src_gen, sg, d->dst_gen, dg);
}

void rp_xfer_reset(rp_xfer_desc *d) {
  if (!d) /* as rp_xfer_release: nothing to reset */
    return;
  d->ran = 0;
  d->progress = 0;
  d->ib_offset = 0;
}

void rp_xfer_release(rp_xfer_desc *d) {
  if (!d)
    return;
  if (d->ib)
    rp__mem_free(d->rt, d->dst_mem, d->ib);
  memset(d, 0, sizeof *d);
}

int rp_xfer_is_device(const rp_xfer_desc *d) {
  return d &&
         (d->channel == RP_XFER_CUDA_COPY || d->channel == RP_XFER_CUDA_REDUCE);
}

rp_proc rp_xfer_device_proc(const rp_xfer_desc *d) {
  if (!rp_xfer_is_device(d))
    return RP_PROC_ANY;
  for (int k = 0; k < 2; k++) {
    rp_mem m = k == 0 ? d->dst_mem : d->src_mem;
    for (rp_proc p = 0; p < rp_proc_count(d->rt); p++) {
      const rp_proc_info *pi = rp__proc(d->rt, p);
      if (pi->kind == RP_PROC_GPU && pi->local == m)
        return p;
    }
  }
  return RP_PROC_ANY;
}
