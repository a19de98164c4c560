/* engine/instance.c — instances: typed, strided rectangles in a memory, with
 * generations that change on free and on reallocation. */
#include "engine_impl.h"

#include <string.h>

static const struct {
  const char *name;
  size_t size;
} dtypes[RP_DTYPE_COUNT_] = {
    [RP_F32] = {"f32", 4}, [RP_F64] = {"f64", 8}, [RP_I32] = {"i32", 4},
    [RP_I64] = {"i64", 8}, [RP_U8] = {"u8", 1},
};

size_t rp_dtype_size(rp_dtype t) {
  return (unsigned)t < RP_DTYPE_COUNT_ ? dtypes[t].size : 0;
}

const char *rp_dtype_name(rp_dtype t) {
  return (unsigned)t < RP_DTYPE_COUNT_ ? dtypes[t].name : "?";
}

int64_t rp_rect_volume(const rp_rect *r) {
  if (!r || r->dim < 1 || r->dim > RP_MAX_DIM)
    return 0;
  int64_t v = 1;
  for (int d = 0; d < r->dim; d++) {
    int64_t ext;
    if (!rp__extent_ok(r->lo[d], r->hi[d], &ext) || !rp__mul_i64_ok(v, ext, &v))
      return 0;
  }
  return v;
}

rp_status rp_rect_init(rp_rect *out, int dim, const int64_t *lo,
                       const int64_t *extent) {
  if (!out || !extent)
    return rp__err(RP_EINVAL, "rp_rect_init: NULL %s",
                   out ? "extent" : "rectangle");
  if (dim < 1 || dim > RP_MAX_DIM)
    return rp__err(RP_ESHAPE, "rp_rect_init: %d dimensions (1..%d allowed)",
                   dim, RP_MAX_DIM);
  rp_rect r;
  memset(&r, 0, sizeof r);
  r.dim = dim;
  for (int d = 0; d < dim; d++) {
    r.lo[d] = lo ? lo[d] : 0;
    if (extent[d] < 1)
      return rp__err(RP_ESHAPE,
                     "rp_rect_init: extent %lld in dimension %d "
                     "(must be >= 1)",
                     (long long)extent[d], d);
    /* hi = lo + extent - 1: extent >= 1, so only the sum can overflow */
    if (!rp__add_i64_ok(r.lo[d], extent[d] - 1, &r.hi[d]))
      return rp__err(RP_ERANGE,
                     "rp_rect_init: lo %lld + extent %lld - 1 in "
                     "dimension %d overflows",
                     (long long)r.lo[d], (long long)extent[d], d);
  }
  *out = r;
  return RP_OK;
}

rp_rect rp_rect_make(int dim, const int64_t *lo, const int64_t *extent) {
  rp_rect r;
  if (rp_rect_init(&r, dim, lo, extent) != RP_OK)
    memset(&r, 0, sizeof r); /* dim 0: every call refuses it (RP_ESHAPE) */
  return r;
}

rp_rect rp_rect_1d(int64_t lo, int64_t hi) {
  rp_rect r;
  memset(&r, 0, sizeof r);
  r.dim = 1;
  r.lo[0] = lo;
  r.hi[0] = hi;
  return r;
}

const char *rp_rect_str(const rp_rect *r, char *buf, size_t size) {
  size_t n = 0;
  if (!buf || size == 0)
    return ""; /* no byte may be written: the text is empty */
  buf[0] = '\0';
  if (!r || r->dim < 1 || r->dim > RP_MAX_DIM) {
    snprintf(buf, size, "[invalid rect]");
    return buf;
  }
  for (int d = 0; d < r->dim && n < size; d++) {
    int k = snprintf(buf + n, size - n, "%s%lld..%lld", d ? ", " : "[",
                     (long long)r->lo[d], (long long)r->hi[d]);
    if (k < 0)
      break;
    n += (size_t)k;
  }
  if (n < size)
    snprintf(buf + n, size - n, "]");
  return buf;
}

rp_rect rp_rect_2d(int64_t lo0, int64_t hi0, int64_t lo1, int64_t hi1) {
  rp_rect r;
  memset(&r, 0, sizeof r);
  r.dim = 2;
  r.lo[0] = lo0;
  r.hi[0] = hi0;
  r.lo[1] = lo1;
  r.hi[1] = hi1;
  return r;
}

/* Validates the layout and computes strides and the bytes it spans. */
static rp_status layout(rp_dtype dtype, const rp_rect *rect,
                        const int64_t *strides, int64_t out_strides[],
                        size_t *bytes) {
  if ((unsigned)dtype >= RP_DTYPE_COUNT_)
    return rp__err(RP_ETYPE, "unknown element type %d", (int)dtype);
  if (!rect)
    return rp__err(RP_EINVAL, "NULL rectangle");
  if (rect->dim < 1 || rect->dim > RP_MAX_DIM)
    return rp__err(RP_ESHAPE, "rectangle has %d dimensions (1..%d allowed)",
                   rect->dim, RP_MAX_DIM);
  int64_t ext[RP_MAX_DIM];
  for (int d = 0; d < rect->dim; d++) {
    if (rect->hi[d] < rect->lo[d])
      return rp__err(RP_ESHAPE,
                     "rectangle is empty or inverted in dimension %d "
                     "(lo %lld > hi %lld)",
                     d, (long long)rect->lo[d], (long long)rect->hi[d]);
    if (!rp__extent_ok(rect->lo[d], rect->hi[d], &ext[d]))
      return rp__err(RP_ERANGE,
                     "extent of dimension %d (lo %lld, hi %lld) "
                     "overflows",
                     d, (long long)rect->lo[d], (long long)rect->hi[d]);
  }
  size_t esz = rp_dtype_size(dtype);
  if (!strides) {
    /* dense row-major: last dimension fastest */
    int64_t s = 1;
    for (int d = rect->dim - 1; d >= 0; d--) {
      out_strides[d] = s;
      if (!rp__mul_i64_ok(s, ext[d], &s))
        return rp__err(RP_ERANGE,
                       "instance size overflows: the points of "
                       "dimensions %d.. exceed 2^63",
                       d);
    }
    size_t b, n;
    if (!rp__i64_size_ok(s, &n) || !rp__mul_ok(n, esz, &b) ||
        b > (SIZE_MAX >> 2))
      return rp__err(RP_ERANGE,
                     "instance size overflows: %lld points of %zu "
                     "bytes (limit %zu bytes)",
                     (long long)s, esz, SIZE_MAX >> 2);
    *bytes = b;
    return RP_OK;
  }
  /* Explicit strides: positive, and (sorted by stride) each dimension must
   * step over the whole span of the faster ones, so no two points overlap. */
  int order[RP_MAX_DIM];
  for (int d = 0; d < rect->dim; d++) {
    if (strides[d] <= 0)
      return rp__err(RP_ERANGE, "stride of dimension %d is %lld (must be > 0)",
                     d, (long long)strides[d]);
    out_strides[d] = strides[d];
    order[d] = d;
  }
  for (int i = 1; i < rect->dim; i++)
    for (int j = i; j > 0 && strides[order[j]] < strides[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  int64_t span = 1; /* elements covered by the faster dimensions */
  for (int i = 0; i < rect->dim; i++) {
    int d = order[i];
    if (ext[d] > 1 && strides[d] < span)
      return rp__err(RP_ERANGE,
                     "strides overlap: dimension %d stride %lld < span %lld", d,
                     (long long)strides[d], (long long)span);
    int64_t last;
    if (!rp__mul_i64_ok(strides[d], ext[d] - 1, &last) ||
        !rp__add_i64_ok(last, span, &span))
      return rp__err(RP_ERANGE,
                     "instance size overflows: dimension %d "
                     "stride %lld x extent %lld",
                     d, (long long)strides[d], (long long)ext[d]);
  }
  size_t b, n;
  if (!rp__i64_size_ok(span, &n) || !rp__mul_ok(n, esz, &b) ||
      b > (SIZE_MAX >> 2))
    return rp__err(RP_ERANGE,
                   "instance size overflows: a span of %lld "
                   "elements of %zu bytes (limit %zu bytes)",
                   (long long)span, esz, SIZE_MAX >> 2);
  *bytes = b;
  return RP_OK;
}

static rp_inst_slot *inst_at(const rp_runtime *rt, uint32_t i) {
  return (rp_inst_slot *)rp__ctable_at(&rt->insts, i);
}

/* The handle a live slot hands out (engine.h "Handle identity"). */
static uint64_t inst_id(const rp_runtime *rt, uint32_t gen, uint32_t slot) {
  return (uint64_t)gen << 32 | (uint64_t)rt->tag << RP_HANDLE_TAG_SHIFT | slot;
}

/* Resolves a handle; NULL when unknown, freed, of an older generation or
 * of another runtime. */
static rp_inst_slot *inst_lookup(const rp_runtime *rt, rp_inst inst) {
  uint32_t slot = rp__inst_slot(inst);
  if (inst.id == 0 || rp__handle_tag(inst.id) != rt->tag ||
      slot >= atomic_load_explicit(&rt->insts.size, memory_order_acquire))
    return NULL;
  rp_inst_slot *s = inst_at(rt, slot);
  /* generation 0: a retired slot's, never handed out */
  if (rp__inst_gen(inst) == 0 ||
      rp__inst_gen_settled(&s->gen, rp__inst_gen(inst)) != rp__inst_gen(inst))
    return NULL;
  return s;
}

/* Why inst_lookup refused a handle, for the error detail. */
static const char *inst_why(const rp_runtime *rt, rp_inst inst) {
  return rp__handle_tag(inst.id) != rt->tag ? " (a handle of another "
                                              "runtime, or no instance handle)"
                                            : "";
}

/* Takes a free slot (caller holds inst_lock). */
static rp_status slot_take(rp_runtime *rt, uint32_t *out) {
  if (rt->inst_free) {
    *out = rt->inst_free - 1;
    rt->inst_free = inst_at(rt, *out)->next_free;
    return RP_OK;
  }
  uint32_t i = rt->inst_count;
  if (i > RP_HANDLE_SLOT_MASK || i >= rp__ctable_capacity())
    return rp__err(RP_ERANGE,
                   "the instance table is full (%u live instances, the most "
                   "a runtime holds)",
                   i);
  rp_status st = rp__ctable_reserve(&rt->insts, i);
  if (st)
    return rp__err(st,
                   "out of memory growing the instance table past %u "
                   "entries",
                   i);
  rp_inst_slot *s = inst_at(rt, i);
  if (atomic_load(&s->gen) == 0)
    atomic_store(&s->gen, 1);
  rt->inst_count++;
  *out = i;
  return RP_OK;
}

static rp_status create(rp_runtime *rt, rp_mem mem, rp_dtype dtype,
                        const rp_rect *rect, const int64_t *strides,
                        void *ext_ptr, size_t ext_bytes, rp_inst *out) {
  const char *what =
      ext_ptr ? "rp_instance_create_external" : "rp_instance_create";
  rp_status st = rp__rt_check(rt, what);
  if (st)
    return st;
  if (!out)
    return rp__err(RP_EINVAL, "%s: NULL argument", what);
  st = rp__runtime_check(rt);
  if (st)
    return st;
  if (mem >= rt->nmems)
    return rp__err(RP_EINVAL, "%s: memory %u does not exist (runtime has %u)",
                   what, mem, rt->nmems);
  rp_instance_info info;
  memset(&info, 0, sizeof info);
  st = layout(dtype, rect, strides, info.strides, &info.bytes);
  if (st)
    return rp__err_as(st, "%s: ", what);
  info.mem = mem;
  info.dtype = dtype;
  info.rect = *rect;
  for (int d = rect->dim; d < RP_MAX_DIM; d++)
    info.rect.lo[d] = info.rect.hi[d] = 0;
  void *base = NULL;
  if (ext_ptr) {
    if (ext_bytes < info.bytes)
      return rp__err(RP_ERANGE,
                     "%s: external buffer of %zu bytes is smaller than the "
                     "layout's %zu bytes",
                     what, ext_bytes, info.bytes);
    uintptr_t end;
    if (__builtin_add_overflow((uintptr_t)ext_ptr, ext_bytes, &end))
      return rp__err(RP_ERANGE,
                     "%s: external buffer %p + %zu bytes wraps "
                     "around the address space",
                     what, ext_ptr, ext_bytes);
    info.ptr = ext_ptr;
    info.external = 1;
  } else {
    st = rp__mem_alloc(rt, mem, info.bytes, 64, &base);
    if (st)
      return rp__err_prefix(st, "%s: ", what);
    info.ptr = base;
  }
  pthread_mutex_lock(&rt->inst_lock);
  uint32_t i = 0;
  st = slot_take(rt, &i);
  if (st) {
    pthread_mutex_unlock(&rt->inst_lock);
    if (base)
      rp__mem_free(rt, mem, base);
    return rp__err_prefix(st, "%s: ", what);
  }
  rp_inst_slot *s = inst_at(rt, i);
  s->live = 1;
  s->base = base;
  s->info = info;
  s->name[0] = '\0';
  uint32_t gen = atomic_load(&s->gen);
  s->info.generation = gen;
  pthread_mutex_unlock(&rt->inst_lock);
  out->id = inst_id(rt, gen, i);
  return RP_OK;
}

rp_status rp_instance_create(rp_runtime *rt, rp_mem mem, rp_dtype dtype,
                             const rp_rect *rect, const int64_t *strides,
                             rp_inst *out) {
  return create(rt, mem, dtype, rect, strides, NULL, 0, out);
}

rp_status rp_instance_create_external(rp_runtime *rt, rp_mem mem,
                                      rp_dtype dtype, const rp_rect *rect,
                                      const int64_t *strides, void *ptr,
                                      size_t bytes, rp_inst *out) {
  rp_status st = rp__rt_check(rt, "rp_instance_create_external");
  if (st)
    return st;
  if (!ptr)
    return rp__err(RP_EINVAL, "rp_instance_create_external: NULL pointer");
  /* tasks and copies read the elements through typed pointers */
  size_t esz = rp_dtype_size(dtype);
  if (esz > 1 && (uintptr_t)ptr % esz)
    return rp__err(RP_EINVAL,
                   "rp_instance_create_external: ptr %p is not aligned to "
                   "its %zu-byte elements (%s)",
                   ptr, esz, rp_dtype_name(dtype));
  return create(rt, mem, dtype, rect, strides, ptr, bytes, out);
}

static rp_status lookup_for_change(rp_runtime *rt, rp_inst inst,
                                   const char *what) {
  rp_status st = rp__rt_check(rt, what);
  if (st)
    return st;
  if (!inst.id)
    return rp__err(RP_EINVAL, "%s: instance handle 0 is none (no instance)",
                   what);
  rp_inst_slot *s = inst_lookup(rt, inst);
  if (!s)
    return rp__err(RP_ESTALE, "%s: instance %#llx is stale or unknown%s", what,
                   (unsigned long long)inst.id, inst_why(rt, inst));
  /* An eager task of rt that accesses it would wait for itself below */
  const rp_task_ctx *t = rp__tl_task;
  for (uint32_t i = 0; t && t->rt == rt && i < t->naccess; i++)
    if (t->insts[i].ptr == s->info.ptr && t->insts[i].mem == s->info.mem)
      return rp__err(RP_ECONTRACT,
                     "%s: called from a running task that accesses instance "
                     "%#llx (access %u): it waits for the ops that use it, "
                     "the calling task included",
                     what, (unsigned long long)inst.id, i);
  /* Let eager ops still touching the instance finish first. */
  rp_inst_release_hook hook =
      atomic_load_explicit(&rt->inst_hook, memory_order_acquire);
  return hook ? hook(rt,
                     atomic_load_explicit(&rt->inst_hook_arg,
                                          memory_order_relaxed),
                     inst, what)
              : RP_OK;
}

/* Refuses (RP_EBUSY) to change an instance an exec with replays in flight
 * uses, changing nothing. The generation word is held at a transient value
 * (bit 31 flipped: never a live generation's, so no handle resolves and a
 * replay armed meanwhile sees it stale) while the replay layer looks; then
 * it is restored when busy. Caller holds inst_lock; s is inst's live slot.
 * On RP_OK the word stays transient: the caller stores the new one. */
static rp_status claim_for_change(rp_runtime *rt, rp_inst_slot *s, rp_inst inst,
                                  const char *what) {
  if (!rt->inst_busy) {
    atomic_fetch_add(&rt->inst_epoch, 1);
    return RP_OK;
  }
  uint32_t gen = rp__inst_gen(inst);
  /* seq_cst: pairs with rp_replay's seq_cst publication of a replay in
   * flight before it checks the epoch and generations: one of the two sees
   * the other (a replay that read the old epoch is seen in flight here) */
  atomic_store(&s->gen, gen ^ RP_INST_GEN_CHANGING);
  atomic_fetch_add(&rt->inst_epoch, 1);
  rp_status st = rt->inst_busy(rt, rt->inst_busy_arg, inst, what);
  if (st)
    atomic_store(&s->gen, gen);
  return st;
}

rp_status rp_instance_free(rp_runtime *rt, rp_inst inst) {
  if (inst.id == 0 && !rp__rt_check(rt, "rp_instance_free"))
    return RP_OK;
  rp_status st = rp__refuse_in_replay("rp_instance_free");
  if (!st)
    st = lookup_for_change(rt, inst, "rp_instance_free");
  if (st)
    return st;
  pthread_mutex_lock(&rt->inst_lock);
  rp_inst_slot *s = inst_lookup(rt, inst);
  /* freed concurrently; or a free slot's generation, never handed out (a
   * made-up handle): the slot is on the free list already */
  if (!s || !s->live) {
    pthread_mutex_unlock(&rt->inst_lock);
    return rp__err(RP_ESTALE, "rp_instance_free: instance %#llx is stale",
                   (unsigned long long)inst.id);
  }
  if ((st = claim_for_change(rt, s, inst, "rp_instance_free")) != RP_OK) {
    pthread_mutex_unlock(&rt->inst_lock);
    return st;
  }
  void *base = s->base;
  rp_mem mem = s->info.mem;
  s->live = 0;
  s->base = NULL;
  s->name[0] = '\0';
  /* release: descriptors that acquire-load the generation see the change.
   * A slot whose generations are used up retires instead of wrapping: its
   * generation becomes 0, which no handle carries, and it never goes back
   * on the free list, so no handle kept while its slot was reused names a
   * later instance (one slot lost per 2^31 - 1 instances in it). */
  uint32_t gen = (rp__inst_gen(inst) + 1) & 0x7fffffffu;
  atomic_store_explicit(&s->gen, gen, memory_order_release);
  if (gen) {
    s->next_free = rt->inst_free;
    rt->inst_free = rp__inst_slot(inst) + 1;
  }
  pthread_mutex_unlock(&rt->inst_lock);
  if (base)
    rp__mem_free(rt, mem, base);
  return RP_OK;
}

rp_status rp_instance_realloc(rp_runtime *rt, rp_inst *inout) {
  if (!inout)
    return rp__err(RP_EINVAL, "rp_instance_realloc: NULL argument");
  /* as free: it waits for eager ops and drops the old storage */
  rp_status st = rp__refuse_in_replay("rp_instance_realloc");
  if (!st)
    st = rp__rt_check(rt, "rp_instance_realloc");
  if (st)
    return st;
  /* before any wait or allocation: a free slot (a handle never handed
   * out) is stale, caller memory has nothing to replace */
  pthread_mutex_lock(&rt->inst_lock);
  rp_inst_slot *s = inst_lookup(rt, *inout);
  int dead = s && !s->live, external = s && s->live && s->info.external;
  pthread_mutex_unlock(&rt->inst_lock);
  if (dead)
    return rp__err(RP_ESTALE, "rp_instance_realloc: instance %#llx is stale",
                   (unsigned long long)inout->id);
  if (external)
    return rp__err(RP_EINVAL,
                   "rp_instance_realloc: instance %#llx wraps caller memory",
                   (unsigned long long)inout->id);
  if ((st = lookup_for_change(rt, *inout, "rp_instance_realloc")) != RP_OK)
    return st;
  if (!(s = inst_lookup(rt, *inout)))
    return rp__err(RP_ESTALE, "rp_instance_realloc: instance is stale");
  void *nb;
  st = rp__mem_alloc(rt, s->info.mem, s->info.bytes, 64, &nb);
  if (st)
    return rp__err_prefix(st, "rp_instance_realloc: ");
  pthread_mutex_lock(&rt->inst_lock);
  /* freed or reallocated meanwhile, or a free slot (never handed out) */
  if (inst_lookup(rt, *inout) != s || !s->live) {
    pthread_mutex_unlock(&rt->inst_lock);
    rp__mem_free(rt, s->info.mem, nb);
    return rp__err(RP_ESTALE, "rp_instance_realloc: instance %#llx is stale",
                   (unsigned long long)inout->id);
  }
  if ((st = claim_for_change(rt, s, *inout, "rp_instance_realloc")) != RP_OK) {
    pthread_mutex_unlock(&rt->inst_lock);
    rp__mem_free(rt, s->info.mem, nb);
    return st;
  }
  void *old = s->base;
  s->base = nb;
  s->info.ptr = nb;
  uint32_t gen = (rp__inst_gen(*inout) + 1) & 0x7fffffffu;
  if (gen == 0)
    gen = 1;
  s->info.generation = gen;
  atomic_store_explicit(&s->gen, gen, memory_order_release);
  pthread_mutex_unlock(&rt->inst_lock);
  rp__mem_free(rt, s->info.mem, old);
  inout->id = inst_id(rt, gen, rp__inst_slot(*inout));
  return RP_OK;
}

rp_status rp__inst_view(const rp_runtime *rt, rp_inst inst, rp_inst_view *out) {
  if (!inst.id)
    return rp__err(RP_EINVAL, "instance handle 0 is none (no instance)");
  rp_inst_slot *s = inst_lookup(rt, inst);
  if (!s || !s->live)
    return rp__err(RP_ESTALE, "instance %#llx is stale or unknown%s",
                   (unsigned long long)inst.id, inst_why(rt, inst));
  out->info = s->info;
  out->slot = rp__inst_slot(inst);
  out->gen_word = &s->gen;
  return RP_OK;
}

rp_status rp__inst_mem(const rp_runtime *rt, rp_inst inst, rp_mem *mem) {
  if (!inst.id)
    return RP_EINVAL;
  rp_inst_slot *s = inst_lookup(rt, inst);
  if (!s || !s->live)
    return RP_ESTALE;
  *mem = s->info.mem;
  return RP_OK;
}

rp_status rp_instance_query(const rp_runtime *rt, rp_inst inst,
                            rp_instance_info *out) {
  rp_status cst = rp__rt_check(rt, "rp_instance_query");
  if (cst)
    return cst;
  if (!out)
    return rp__err(RP_EINVAL, "rp_instance_query: NULL argument");
  rp_inst_view v;
  rp_status st = rp__inst_view(rt, inst, &v);
  if (st)
    return rp__err_as(st, "rp_instance_query: ");
  *out = v.info;
  return RP_OK;
}

void *rp_instance_ptr(const rp_runtime *rt, rp_inst inst) {
  rp_inst_view v = {0};
  if (rp__rt_check(rt, "rp_instance_ptr") || rp__inst_view(rt, inst, &v) ||
      !rp__mem_host_addressable(rt, v.info.mem))
    return NULL;
  return v.info.ptr;
}

/* Walks every row (last dimension contiguous run) of an instance's layout,
 * calling fn with the byte offset inside the instance and inside a dense
 * row-major buffer. */
static rp_status for_each_row(rp_runtime *rt, const rp_instance_info *in,
                              void *dense, int to_dense) {
  size_t esz = rp_dtype_size(in->dtype);
  int dim = in->rect.dim;
  int64_t ext[RP_MAX_DIM], idx[RP_MAX_DIM] = {0};
  for (int d = 0; d < dim; d++)
    ext[d] = in->rect.hi[d] - in->rect.lo[d] + 1;
  size_t row = (size_t)ext[dim - 1] * esz;
  int contiguous_rows = in->strides[dim - 1] == 1;
  /* a dense row-major layout is one copy, not one per row (on a GPU each
   * copy is a synchronous cudaMemcpy: 4,096 of them took ~28 ms) */
  int64_t span = 1;
  int packed = 1;
  for (int d = dim - 1; d >= 0 && packed; d--) {
    packed = in->strides[d] == span;
    span *= ext[d];
  }
  if (packed)
    return to_dense ? rp__mem_copy(rt, RP_MEM_CALLER, dense, in->mem, in->ptr,
                                   (size_t)span * esz)
                    : rp__mem_copy(rt, in->mem, in->ptr, RP_MEM_CALLER, dense,
                                   (size_t)span * esz);
  size_t off_dense = 0;
  for (;;) {
    int64_t eoff = 0;
    for (int d = 0; d < dim - 1; d++)
      eoff += idx[d] * in->strides[d];
    char *p = (char *)in->ptr + (size_t)eoff * esz;
    char *q = (char *)dense + off_dense;
    if (contiguous_rows) {
      rp_status st = to_dense
                         ? rp__mem_copy(rt, RP_MEM_CALLER, q, in->mem, p, row)
                         : rp__mem_copy(rt, in->mem, p, RP_MEM_CALLER, q, row);
      if (st)
        return st;
    } else {
      for (int64_t k = 0; k < ext[dim - 1]; k++) {
        char *pe = p + (size_t)(k * in->strides[dim - 1]) * esz;
        char *qe = q + (size_t)k * esz;
        rp_status st =
            to_dense ? rp__mem_copy(rt, RP_MEM_CALLER, qe, in->mem, pe, esz)
                     : rp__mem_copy(rt, in->mem, pe, RP_MEM_CALLER, qe, esz);
        if (st)
          return st;
      }
    }
    off_dense += row;
    int d = dim - 2;
    for (; d >= 0; d--) {
      if (++idx[d] < ext[d])
        break;
      idx[d] = 0;
    }
    if (d < 0)
      return RP_OK;
  }
}

static rp_status read_write(rp_runtime *rt, rp_inst inst, void *buf,
                            size_t bytes, int to_dense, const char *what) {
  rp_status cst = rp__rt_check(rt, what);
  if (cst)
    return cst;
  if (!buf)
    return rp__err(RP_EINVAL, "%s: NULL argument", what);
  if (rt->model)
    return rp__err(RP_EUNSUPPORTED,
                   "%s: a model of a machine (reprise dump) has no instance "
                   "storage to read or write",
                   what);
  rp_inst_view v;
  rp_status st = rp__inst_view(rt, inst, &v);
  if (st)
    return rp__err_as(st, "%s: ", what);
  size_t need =
      (size_t)rp_rect_volume(&v.info.rect) * rp_dtype_size(v.info.dtype);
  if (bytes != need)
    return rp__err(RP_ESHAPE, "%s: buffer is %zu bytes, instance holds %zu",
                   what, bytes, need);
  return for_each_row(rt, &v.info, buf, to_dense);
}

rp_status rp_instance_read(rp_runtime *rt, rp_inst inst, void *dst,
                           size_t bytes) {
  return read_write(rt, inst, dst, bytes, 1, "rp_instance_read");
}

rp_status rp_instance_write(rp_runtime *rt, rp_inst inst, const void *src,
                            size_t bytes) {
  return read_write(rt, inst, (void *)src, bytes, 0, "rp_instance_write");
}

void rp__set_inst_release_hook(rp_runtime *rt, rp_inst_release_hook fn,
                               void *arg) {
  atomic_store_explicit(&rt->inst_hook_arg, arg, memory_order_relaxed);
  atomic_store_explicit(&rt->inst_hook, fn, memory_order_release);
}

void rp__set_inst_busy_hook(rp_runtime *rt, rp_inst_busy_hook fn, void *arg) {
  pthread_mutex_lock(&rt->inst_lock);
  rt->inst_busy_arg = arg;
  rt->inst_busy = fn;
  pthread_mutex_unlock(&rt->inst_lock);
}

/* RP_OK when name (not NULL) is a valid name (reprise.h RP_NAME_MAX);
 * `what` names the call in the error. */
rp_status rp__name_check(const char *name, const char *what) {
  /* bytes are checked before the length is reported, so the detail never
   * quotes a byte outside the rule (a name of megabytes is not measured
   * further than one byte past the limit) */
  size_t n = strnlen(name, RP_NAME_MAX + 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
      return rp__err(RP_EINVAL,
                     "%s: name byte %zu (0x%02x) is not printable ASCII "
                     "other than '\"' and '\\'",
                     what, i, c);
  }
  if (n > RP_NAME_MAX)
    return rp__err(RP_EINVAL, "%s: name '%.20s...' is longer than %d bytes",
                   what, name, RP_NAME_MAX);
  return RP_OK;
}

void rp__name_set(char *dst, const char *name) {
  size_t n = name ? strnlen(name, RP_NAME_MAX) : 0;
  memmove(dst, name ? name : "", n); /* dst and name may overlap */
  dst[n] = '\0';
}

rp_status rp_instance_set_name(rp_runtime *rt, rp_inst inst, const char *name) {
  rp_status st = rp__rt_check(rt, "rp_instance_set_name");
  if (st)
    return st;
  if (name && (st = rp__name_check(name, "rp_instance_set_name")) != RP_OK)
    return st;
  if (!inst.id)
    return rp__err(RP_EINVAL,
                   "rp_instance_set_name: instance handle 0 is none (no "
                   "instance)");
  pthread_mutex_lock(&rt->inst_lock);
  rp_inst_slot *s = inst_lookup(rt, inst);
  if (!s || !s->live) {
    pthread_mutex_unlock(&rt->inst_lock);
    return rp__err(RP_ESTALE,
                   "rp_instance_set_name: instance %#llx is stale "
                   "or unknown%s",
                   (unsigned long long)inst.id, inst_why(rt, inst));
  }
  rp__name_set(s->name, name);
  pthread_mutex_unlock(&rt->inst_lock);
  return RP_OK;
}

const char *rp_instance_name(const rp_runtime *rt, rp_inst inst) {
  if (rp__rt_check(rt, "rp_instance_name"))
    return NULL;
  rp_inst_slot *s = inst_lookup(rt, inst);
  return s && s->live ? s->name : NULL;
}

const _Atomic uint64_t *rp__inst_epoch_word(rp_runtime *rt) {
  return &rt->inst_epoch;
}
