/* kernels/op_table.c — the one argument and access check of every task
 * (contract in op_table.h). */
#include "op_table.h"

#include "engine/util.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t field_i32(const void *args, uint16_t f) {
  int32_t v;
  memcpy(&v, (const char *)args + (f - 1), sizeof v);
  return v;
}

static int64_t field_i64(const void *args, uint16_t f) {
  int64_t v;
  memcpy(&v, (const char *)args + (f - 1), sizeof v);
  return v;
}

typedef struct launch_view launch_view;
static int may_change(const launch_view *L, uint16_t f, size_t bytes);

/* The fields' ranges; at launch (L) a field an interpolation writes is
 * left to the task's own check. */
static rp_status check_fields(const rp_op *op, const void *args,
                              const launch_view *L) {
  for (int i = 0; i < RP_OP_MAX_FIELDS && op->fields[i].name; i++) {
    const rp_op_field *f = &op->fields[i];
    if (may_change(L, f->field, f->i64 ? 8 : 4))
      continue;
    int64_t v = f->i64 ? field_i64(args, f->field) : field_i32(args, f->field);
    if (v < f->lo || v > f->hi)
      return rp__err(RP_EINVAL, "%s: %s = %lld (need %lld..%lld)", op->name,
                     f->name, (long long)v, (long long)f->lo, (long long)f->hi);
  }
  return RP_OK;
}

uint32_t rp_op_access_total(const rp_op *op, const void *args) {
  uint32_t count = op->ngroup ? (uint32_t)field_i32(args, op->group_count) : 0;
  uint32_t tail = op->ntail; /* switched-off accesses at the end: none */
  while (tail > 0 && op->tail[tail - 1].when &&
         field_i32(args, op->tail[tail - 1].when) == 0)
    tail--;
  return op->nhead + op->ngroup * count + tail;
}

/* 1 when field f (a float one when f32) is nonzero in args. */
static int field_nonzero(const void *args, uint16_t f, int f32) {
  if (f32) {
    float v;
    memcpy(&v, (const char *)args + (f - 1), sizeof v);
    return v != 0.0f;
  }
  return field_i32(args, f) != 0;
}

/* What the task does with access a under args (priv, plus `also` while
 * its field is on). */
static rp_privilege priv_of(const rp_op_access *a, const void *args) {
  if (a->also_when &&
      field_nonzero(args, a->also_when, (a->flags & RP_OPA_ALSO_F32) != 0))
    return (rp_privilege)(a->priv | a->also);
  return a->priv;
}

/* 1 when one of the interpolations writes a byte of field f (4 bytes, or
 * `bytes`: interpolated_n). */
static int interpolated_n(uint16_t f, size_t bytes, const rp_interp *ip,
                          uint32_t nip) {
  size_t lo = (size_t)f - 1, hi = lo + bytes;
  for (uint32_t k = 0; ip && k < nip; k++)
    if (ip[k].dst_offset != RP_INTERP_SHARDS && ip[k].dst_offset < hi &&
        (ip[k].dst_offset >= lo || lo - ip[k].dst_offset < ip[k].bytes))
      return 1;
  return 0;
}

static int interpolated(uint16_t f, const rp_interp *ip, uint32_t nip) {
  return interpolated_n(f, 4, ip, nip);
}

/* The launch check's view of a launch's interpolations (rp_op_check_launch);
 * NULL when the task runs (its args are final then: everything is
 * checked). */
typedef struct launch_view {
  const rp_interp *ip;
  uint32_t nip;
  int args_interp; /* one of them writes a byte of the args */
} launch_view;

/* 1 when, at launch, field f (`bytes` wide) may still change: a replay's
 * interpolation writes it. Always 0 when the task runs (L NULL). */
static int may_change(const launch_view *L, uint16_t f, size_t bytes) {
  return L && L->args_interp && interpolated_n(f, bytes, L->ip, L->nip);
}

/* 1 when, at launch, rule c's count may change with a replay's
 * interpolation (it reads a field one writes). */
static int need_may_change(const launch_view *L, const rp_op_count *c) {
  if (!L || !L->args_interp)
    return 0;
  size_t fbytes = c->kind == RP_OPC_I64 ? 8 : 4;
  int nf = c->kind == RP_OPC_GROUP_VOL ? 0 : 4;
  for (int k = 0; k < nf && c->field[k]; k++)
    if (interpolated_n(c->field[k], fbytes, L->ip, L->nip))
      return 1;
  return 0;
}

/* 1 when the layout is dense row-major (a dimension of extent 1 may have
 * any stride: it is never stepped over). */
static int dense(const rp_instance_info *in) {
  int64_t want = 1;
  for (int d = in->rect.dim - 1; d >= 0; d--) {
    int64_t ext = in->rect.hi[d] - in->rect.lo[d] + 1;
    if (ext > 1 && in->strides[d] != want)
      return 0;
    want *= ext;
  }
  return 1;
}

/* The volume of access i of the launch: from ctx when it is not NULL,
 * else from vol (nvol entries; -1 unknown); -1 when absent or unknown. */
typedef struct vols {
  const rp_task_ctx *ctx;
  const int64_t *vol;
  uint32_t nvol;
} vols;

static int64_t vol_at(const vols *v, uint32_t i) {
  if (v->ctx) {
    const rp_instance_info *in = rp_ctx_inst(v->ctx, i);
    return in ? rp_rect_volume(&in->rect) : -1;
  }
  return v->vol && i < v->nvol ? v->vol[i] : -1;
}

/* Elements access i (of a group starting at access g0) needs. */
static rp_status need_in(const rp_op *op, const rp_op_count *c,
                         const void *args, const vols *v, uint32_t g0,
                         int64_t *out) {
  int64_t prod = 1, in;
  switch (c->kind) {
  case RP_OPC_I64:
    prod = field_i64(args, c->field[0]);
    break;
  case RP_OPC_N_OR_VOL0:
    prod = field_i32(args, c->field[0]);
    if (prod == 0 && (in = vol_at(v, 0)) >= 0)
      prod = in;
    break;
  case RP_OPC_GROUP_VOL:
    in = vol_at(v, g0);
    prod = in >= 0 ? in : 0;
    break;
  default:
    for (int k = 0; k < 4 && c->field[k]; k++)
      if (__builtin_mul_overflow(prod, (int64_t)field_i32(args, c->field[k]),
                                 &prod))
        return rp__err(RP_EINVAL, "%s: sizes overflow", op->name);
  }
  if (__builtin_mul_overflow(prod, c->mul, &prod) ||
      __builtin_add_overflow(prod, c->add, &prod))
    return rp__err(RP_EINVAL, "%s: sizes overflow", op->name);
  *out = prod;
  return RP_OK;
}

static rp_status need_of(const rp_op *op, const rp_op_count *c,
                         const void *args, const rp_task_ctx *ctx, uint32_t g0,
                         int64_t *out) {
  vols v = {ctx, NULL, 0};
  return need_in(op, c, args, &v, g0, out);
}

/* Access i as described by a: present (unless optional or switched off by
 * its `when` field), of its type, dense, holding what its rule needs. */
static rp_status take(const rp_op *op, const rp_op_access *a, const void *args,
                      const rp_task_ctx *ctx, uint32_t i, uint32_t g0,
                      void **ptr, int64_t *vol, const launch_view *L) {
  ptr[i] = NULL;
  if (vol)
    vol[i] = 0;
  if (a->when && (field_i32(args, a->when) == 0 || may_change(L, a->when, 4)))
    return RP_OK; /* off, or (at launch) a replay may switch it */
  const rp_instance_info *in = rp_ctx_inst(ctx, i);
  if (!in && (a->flags & RP_OPA_OPTIONAL))
    return RP_OK;
  if (!in)
    return rp__err(RP_ESHAPE, "%s: access %u (%s) missing: %u accesses",
                   op->name, i, a->role, rp_ctx_access_count(ctx));
  if (!(a->flags & RP_OPA_ANY_TYPE) && in->dtype != a->dtype)
    return rp__err(RP_ETYPE, "%s: access %u (%s) is %s, needs %s", op->name, i,
                   a->role, rp_dtype_name(in->dtype), rp_dtype_name(a->dtype));
  if (!dense(in))
    return rp__err(RP_ESHAPE, "%s: access %u (%s) is not dense row-major",
                   op->name, i, a->role);
  int64_t need = 0, have = rp_rect_volume(&in->rect);
  rp_status st = need_may_change(L, &a->need)
                     ? RP_OK /* a replay may change the count */
                     : need_of(op, &a->need, args, ctx, g0, &need);
  if (st != RP_OK)
    return st;
  if (have < need)
    return rp__err(RP_ESHAPE,
                   "%s: access %u (%s) has %lld elements, needs %lld", op->name,
                   i, a->role, (long long)have, (long long)need);
  ptr[i] = in->ptr;
  if (vol)
    vol[i] = have;
  return RP_OK;
}

/* The descriptor of access i (a group's at g0: its group's first). */
static const rp_op_access *access_at(const rp_op *op, uint32_t count,
                                     uint32_t i, uint32_t *g0) {
  *g0 = 0;
  if (i < op->nhead)
    return &op->head[i];
  uint32_t j = i - op->nhead;
  if (j < op->ngroup * count) {
    *g0 = op->nhead + j / op->ngroup * op->ngroup;
    return &op->group[j % op->ngroup];
  }
  return &op->tail[j - op->ngroup * count];
}

/* One access's bytes for the overlap check: [lo, hi). */
typedef struct span {
  uintptr_t lo, hi;
  uint32_t i;
  uint8_t written;
} span;

static int span_before(const span *a, const span *b) {
  return a->lo != b->lo ? a->lo < b->lo : a->i < b->i;
}

/* Heapsort by first byte: in place, n log n for the up to
 * RP_OP_MAX_TOTAL spans of a gpt.adamw, and no allocation (glibc's qsort
 * mallocs above 1 KiB; this runs in task bodies on every replay). */
static void spans_sift(span *s, uint32_t k, uint32_t n) {
  span x = s[k];
  for (uint32_t c; (c = 2 * k + 1) < n; k = c) {
    if (c + 1 < n && span_before(&s[c], &s[c + 1]))
      c++;
    if (!span_before(&x, &s[c]))
      break;
    s[k] = s[c];
  }
  s[k] = x;
}

static void spans_sort(span *s, uint32_t n) {
  for (uint32_t k = n / 2; k-- > 0;)
    spans_sift(s, k, n);
  for (uint32_t m = n; m-- > 1;) {
    span t = s[0];
    s[0] = s[m], s[m] = t;
    spans_sift(s, 0, m);
  }
}

static rp_status overlap_err(const rp_op *op, uint32_t count, uint32_t a,
                             uint32_t b) {
  uint32_t g;
  if (a > b) {
    uint32_t t = a;
    a = b, b = t;
  }
  return rp__err(RP_EINVAL,
                 "%s: access %u (%s) and access %u (%s) overlap, and the "
                 "task writes one of them",
                 op->name, a, access_at(op, count, a, &g)->role, b,
                 access_at(op, count, b, &g)->role);
}

/* The overlap check over s (room for total spans): sorted by first byte, an
 * access overlaps an earlier one exactly when it starts below the largest
 * end so far (of every access when it is written, of the written ones
 * when it is read). An access on its alias's first element is folded into
 * that one first (one span, written if either is, as long as either). */
static rp_status disjoint_in(const rp_op *op, const void *args,
                             const rp_task_ctx *ctx, void *const *ptr,
                             uint32_t total, uint32_t count, span *s) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < total; i++) {
    uint32_t g0;
    const rp_op_access *a = access_at(op, count, i, &g0);
    const rp_instance_info *in = rp_ctx_inst(ctx, i);
    int64_t need = 0;
    if (!ptr[i] || !in)
      continue;
    rp_status st = need_of(op, &a->need, args, ctx, g0, &need);
    if (st != RP_OK)
      return st;
    size_t size = rp_dtype_size(in->dtype);
    if (need <= 0 || size == 0)
      continue;
    uintptr_t lo = (uintptr_t)ptr[i];
    s[n++] =
        (span){lo, lo + (uintptr_t)need * size, i, priv_of(a, args) != RP_READ};
  }
  for (uint32_t k = 0; k < n;) {
    uint32_t g0, m = 0;
    const rp_op_access *a = access_at(op, count, s[k].i, &g0);
    while (a->alias && m < n &&
           !(s[m].i == (uint32_t)a->alias - 1u && s[m].lo == s[k].lo))
      m++;
    if (!a->alias || m == n) {
      k++;
      continue;
    }
    s[m].written |= s[k].written;
    s[m].hi = s[m].hi > s[k].hi ? s[m].hi : s[k].hi;
    s[k] = s[--n]; /* s[k] is the moved one now: k stays */
  }
  if (n < 2)
    return RP_OK;
  spans_sort(s, n);
  uintptr_t end_all = 0, end_w = 0;
  uint32_t who_all = 0, who_w = 0;
  for (uint32_t k = 0; k < n; k++) {
    if (s[k].written && s[k].lo < end_all)
      return overlap_err(op, count, who_all, s[k].i);
    if (!s[k].written && s[k].lo < end_w)
      return overlap_err(op, count, who_w, s[k].i);
    if (s[k].hi > end_all)
      end_all = s[k].hi, who_all = s[k].i;
    if (s[k].written && s[k].hi > end_w)
      end_w = s[k].hi, who_w = s[k].i;
  }
  return RP_OK;
}

/* The multi-tensor tasks' spans on a frame of their own (about 48 KiB),
 * so that the others' frames stay small; no allocation. */
__attribute__((noinline)) static rp_status
disjoint_many(const rp_op *op, const void *args, const rp_task_ctx *ctx,
              void *const *ptr, uint32_t total, uint32_t count) {
  span s[RP_OP_MAX_TOTAL];
  return disjoint_in(op, args, ctx, ptr, total, count, s);
}

static rp_status check_disjoint(const rp_op *op, const void *args,
                                const rp_task_ctx *ctx, void *const *ptr,
                                uint32_t total, uint32_t count) {
  span s[2 * RP_OP_MAX_ACCESSES + 2];
  if (total <= sizeof s / sizeof s[0])
    return disjoint_in(op, args, ctx, ptr, total, count, s);
  return disjoint_many(op, args, ctx, ptr, total, count);
}

/* The tail's accesses counted at launch: as rp_op_access_total, a tail
 * access whose `when` a replay may switch on counted as off (the launch
 * may leave it out). */
static uint32_t launch_total(const rp_op *op, const void *args, uint32_t count,
                             const launch_view *L) {
  uint32_t tail = op->ntail;
  while (tail > 0 && op->tail[tail - 1].when &&
         (field_i32(args, op->tail[tail - 1].when) == 0 ||
          may_change(L, op->tail[tail - 1].when, 4)))
    tail--;
  return op->nhead + op->ngroup * count + tail;
}

/* The check. L NULL: the task runs, with its final args (every check);
 * else a launch, whose interpolations a replay applies later: a check
 * that reads a field one of them writes is left to the run, and so are
 * check_args (which reads any field) and, since they compare storage,
 * the overlap check and check_ptrs when one writes the args; check_ptrs
 * also needs every access's storage (a model's instances have none). */
static rp_status prep(const rp_op *op, const rp_task_ctx *ctx, void *args,
                      void **ptr, int64_t *vol, uint32_t cap, int disjoint,
                      const launch_view *L) {
  size_t have = 0;
  const void *a = rp_ctx_args(ctx, &have);
  if (!a || have < op->args_size)
    return rp__err(RP_EINVAL, "%s: args are %zu bytes, need %zu (%s)", op->name,
                   a ? have : 0, op->args_size, op->args_type);
  memcpy(args, a, op->args_size); /* args bytes carry no alignment promise */
  rp_status st = check_fields(op, args, L);
  if (st == RP_OK && op->check_args && !(L && L->args_interp))
    st = op->check_args(op, args, ctx);
  if (st != RP_OK)
    return st;
  /* at launch, a group count a replay may change leaves the head only */
  int count_known = !(op->ngroup && may_change(L, op->group_count, 4));
  uint32_t count = op->ngroup && count_known
                       ? (uint32_t)field_i32(args, op->group_count)
                       : 0;
  uint32_t total =
      L ? launch_total(op, args, count, L) : rp_op_access_total(op, args);
  /* ptr/vol get an entry per access the task may take: the tail's
   * switched-off ones too (NULL, 0) */
  uint32_t slots = op->nhead + op->ngroup * count + op->ntail;
  if (!count_known) { /* the head's accesses only */
    for (uint32_t k = 0; st == RP_OK && k < op->nhead; k++)
      st = take(op, &op->head[k], args, ctx, k, 0, ptr, vol, L);
    return st;
  }
  if (total > RP_OP_MAX_TOTAL)
    return rp__err(RP_ESHAPE, "%s: %u accesses, the task takes at most %u",
                   op->name, total, RP_OP_MAX_TOTAL);
  if (slots > cap)
    return rp__err(RP_ESHAPE, "%s: %u access slots, room for %u", op->name,
                   slots, cap);
  if (rp_ctx_access_count(ctx) > slots) /* one it would never touch */
    return rp__err(RP_ESHAPE, "%s: %u accesses, the task takes at most %u",
                   op->name, rp_ctx_access_count(ctx), slots);
  if (op->ngroup && rp_ctx_access_count(ctx) < total)
    return rp__err(RP_ESHAPE, "%s: %u accesses for %u tensors (need %u)",
                   op->name, rp_ctx_access_count(ctx), count, total);
  uint32_t i = 0;
  for (uint32_t k = 0; st == RP_OK && k < op->nhead; k++, i++)
    st = take(op, &op->head[k], args, ctx, i, 0, ptr, vol, L);
  for (uint32_t g = 0; st == RP_OK && g < count; g++) {
    uint32_t g0 = i;
    for (uint32_t k = 0; st == RP_OK && k < op->ngroup; k++, i++)
      st = take(op, &op->group[k], args, ctx, i, g0, ptr, vol, L);
  }
  for (uint32_t k = 0; st == RP_OK && k < op->ntail; k++, i++)
    st = take(op, &op->tail[k], args, ctx, i, 0, ptr, vol, L);
  int storage = 1; /* at launch: every access has storage */
  for (uint32_t k = 0; L && k < rp_ctx_access_count(ctx); k++)
    if (!rp_ctx_inst(ctx, k)->ptr)
      storage = 0;
  if (L && L->args_interp)
    disjoint = 0, storage = 0;
  if (st == RP_OK && disjoint)
    st = check_disjoint(op, args, ctx, ptr, total, count);
  if (st == RP_OK && op->check_ptrs && storage)
    st = op->check_ptrs(op, args, ptr, ctx);
  return st;
}

rp_status rp_op_prep(const rp_op *op, const rp_task_ctx *ctx, void *args,
                     void **ptr, int64_t *vol, uint32_t cap) {
  return prep(op, ctx, args, ptr, vol, cap, 1, NULL);
}

rp_status rp_op_prep_args(const rp_op *op, const rp_task_ctx *ctx, void *args,
                          void **ptr, int64_t *vol, uint32_t cap) {
  return prep(op, ctx, args, ptr, vol, cap, 0, NULL);
}

rp_status rp_op_check_launch(const rp_op *op, const rp_task_ctx *ctx,
                             const rp_interp *interps, uint32_t ninterp) {
  launch_view L = {interps, ninterp, 0};
  for (uint32_t k = 0; interps && k < ninterp; k++)
    if (interps[k].dst_offset != RP_INTERP_SHARDS)
      L.args_interp = 1;
  /* the args copy and a pointer per access slot the task may take: on
   * the stack for the fixed-access tasks with small args, else on the
   * heap (more than RP_OP_MAX_TOTAL + 2 slots are refused before any
   * access is taken) */
  _Alignas(max_align_t) char small_args[256];
  void *small_ptr[2 * RP_OP_MAX_ACCESSES + 2];
  uint32_t cap = op->ngroup ? RP_OP_MAX_TOTAL + 2 : op->nhead + op->ntail;
  void *args =
      op->args_size <= sizeof small_args ? small_args : malloc(op->args_size);
  void **ptr = op->ngroup ? malloc(cap * sizeof *ptr) : small_ptr;
  rp_status st =
      args && ptr ? prep(op, ctx, args, ptr, NULL, cap, 1, &L)
                  : rp__err(RP_ENOMEM, "%s: out of memory checking the launch",
                            op->name);
  if (args != small_args)
    free(args);
  if (ptr != small_ptr)
    free(ptr);
  return st;
}

/* ---- privileges ---- */

static const char *priv_name(rp_privilege p) {
  switch (p) {
  case RP_READ:
    return "RP_READ";
  case RP_WRITE:
    return "RP_WRITE";
  case RP_RW:
    return "RP_RW";
  case RP_REDUCE:
    return "RP_REDUCE";
  default:
    return "an unknown privilege";
  }
}

static const char *priv_does(rp_privilege p) {
  switch (p) {
  case RP_READ:
    return "reads";
  case RP_WRITE:
    return "overwrites";
  case RP_RW:
    return "reads and writes";
  default:
    return "folds into";
  }
}

/* On in the launch: nonzero, or written by an interpolation (a replay may
 * make it nonzero). */
static int launch_on(const void *args, uint16_t f, int f32, const rp_interp *ip,
                     uint32_t nip) {
  return field_nonzero(args, f, f32) || interpolated(f, ip, nip);
}

rp_status rp_op_check_privs(const rp_op *op, const void *args, size_t args_size,
                            const rp_access *acc, uint32_t nacc,
                            const rp_interp *interps, uint32_t ninterp) {
  if (!args || args_size < op->args_size || !acc) /* rp_op_prep refuses */
    return RP_OK;
  uint32_t count = 0, slots = op->nhead;
  if (op->ngroup) {
    int32_t c = field_i32(args, op->group_count);
    if (c >= 0 && c <= RP_OP_MAX_TOTAL) { /* else: the head only */
      count = (uint32_t)c;
      slots += op->ngroup * count + op->ntail;
    }
  } else {
    slots += op->ntail;
  }
  for (uint32_t i = 0; i < nacc && i < slots; i++) {
    uint32_t g0;
    const rp_op_access *a = access_at(op, count, i, &g0);
    if (a->when && !launch_on(args, a->when, 0, interps, ninterp))
      continue; /* switched off: the task does not touch it */
    rp_privilege need = a->priv;
    int also = a->also_when &&
               launch_on(args, a->also_when, (a->flags & RP_OPA_ALSO_F32) != 0,
                         interps, ninterp);
    if (also)
      need = (rp_privilege)(need | a->also);
    rp_privilege d = acc[i].priv;
    if (d == need || d == RP_RW)
      continue;
    char why[96] = "";
    if (also)
      snprintf(
          why, sizeof why, " (as %s is %s)", a->also_name,
          field_nonzero(args, a->also_when, (a->flags & RP_OPA_ALSO_F32) != 0)
              ? "nonzero"
              : "interpolated");
    return rp__err(RP_EINVAL,
                   "task '%s': access %u (%s) is declared %s, and the task "
                   "%s it%s: declare %s%s%s",
                   op->name, i, a->role, priv_name(d), priv_does(need), why,
                   priv_name(need), need == RP_RW ? "" : " or ",
                   need == RP_RW ? "" : "RP_RW");
  }
  return RP_OK;
}

/* ---- what a write covers ---- */

int rp_op_writes_whole(const rp_op *op, const void *args, size_t args_size,
                       const int64_t *vol, uint32_t nacc, uint32_t i,
                       const rp_interp *interps, uint32_t ninterp) {
  if (!op || !args || args_size < op->args_size || !vol || i >= nacc ||
      vol[i] < 0)
    return 0;
  /* the args as the task will see them: a check_args hook may refuse or
   * normalise them, so a descriptor with one is not read here */
  if (op->check_args || check_fields(op, args, NULL) != RP_OK)
    return 0;
  uint32_t count = 0, g0;
  if (op->ngroup) {
    if (interpolated(op->group_count, interps, ninterp))
      return 0;
    count = (uint32_t)field_i32(args, op->group_count);
  }
  if (i >= op->nhead + op->ngroup * count + op->ntail)
    return 0;
  const rp_op_access *a = access_at(op, count, i, &g0);
  if (!(a->flags & RP_OPA_WRITES_ALL) || priv_of(a, args) != RP_WRITE)
    return 0;
  if (a->also_when && interpolated(a->also_when, interps, ninterp))
    return 0;
  if (a->when && (field_i32(args, a->when) == 0 ||
                  interpolated(a->when, interps, ninterp)))
    return 0;
  const rp_op_count *c = &a->need;
  size_t fbytes = c->kind == RP_OPC_I64 ? 8 : 4;
  for (int k = 0; k < 4 && c->field[k]; k++)
    if (interpolated_n(c->field[k], fbytes, interps, ninterp))
      return 0;
  vols v = {NULL, vol, nacc};
  int64_t need = 0;
  if (need_in(op, c, args, &v, g0, &need) != RP_OK)
    return 0;
  return need >= vol[i];
}
