/* capture/analysis.c — dependence analysis from declared accesses.
 *
 * Per instance (by slot, reset when the generation changes):
 *   mode   NONE, WRITE (w = {last writer}) or REDUCE (w = the reductions of
 *          the current same-operator group)
 *   r      readers since w
 *   gpre   for a reduce group: what every member of the group waits for
 * Rules (RAW, WAR, WAW; same-operator reductions of one kind of op
 * commute: tasks' with tasks', copies' with copies'):
 *   READ          waits for w;                      r += self
 *   WRITE / RW    waits for w and r;                w = {self}, r = {}
 *   REDUCE(op)    joining the open group (same op, same kind, no reader
 *                 since): waits for gpre; w += self. Else opens a group:
 *                 waits for w and r; gpre = w + r, w = {self}, r = {}.
 * A wait for a reader (r, and gpre's tokens that came from r) is an order
 * only (token.order): the op overwrites what the reader read, so an eager
 * op does not inherit a reader's failure, only a writer's.
 * A task's fold and a copy's never share a group: a CPU copy folds under
 * the library's block locks, which a task's atomic fold does not take, so
 * the two would lose each other's updates if they ran at once. */
#include "capture.h"

#include <string.h>

enum { MODE_NONE = 0, MODE_WRITE = 1, MODE_REDUCE = 2 };

typedef struct rp_inst_deps {
  uint32_t gen;
  uint8_t mode;
  uint8_t copy; /* MODE_REDUCE: the group's folds are copies' */
  rp_redop redop;
  rp_dep_set w, r, gpre;
} rp_inst_deps;

void rp__analysis_init(rp_analysis *a, rp_dep_hooks hooks) {
  memset(a, 0, sizeof *a);
  a->hooks = hooks;
}

#define INDEX_FROM 16 /* sets this large get a hash index */

static uint32_t hash_id(uint64_t id) {
  id ^= id >> 33;
  id *= 0xff51afd7ed558ccdull;
  id ^= id >> 33;
  return (uint32_t)id;
}

/* Position of id in s, or UINT32_MAX. */
static uint32_t set_find(const rp_dep_set *s, uint64_t id) {
  if (!s->index) {
    for (uint32_t i = 0; i < s->n; i++)
      if (s->v[i].id == id)
        return i;
    return UINT32_MAX;
  }
  for (uint32_t h = hash_id(id) & (s->icap - 1);; h = (h + 1) & (s->icap - 1)) {
    uint32_t p = s->index[h];
    if (!p)
      return UINT32_MAX;
    if (s->v[p - 1].id == id)
      return p - 1;
  }
}

static void index_put(rp_dep_set *s, uint32_t pos) {
  uint32_t h = hash_id(s->v[pos].id) & (s->icap - 1);
  while (s->index[h])
    h = (h + 1) & (s->icap - 1);
  s->index[h] = pos + 1;
}

/* (Re)builds the index for the current contents; keeps the set usable
 * (linear) if memory runs out. */
static void index_build(rp_dep_set *s) {
  uint32_t want = 64;
  while (want < 2 * s->cap)
    want *= 2;
  if (want != s->icap) {
    uint32_t *ni = realloc(s->index, sizeof *ni * want);
    if (!ni) {
      free(s->index);
      s->index = NULL;
      s->icap = 0;
      return;
    }
    s->index = ni;
    s->icap = want;
  }
  memset(s->index, 0, sizeof *s->index * s->icap);
  for (uint32_t i = 0; i < s->n; i++)
    index_put(s, i);
}

/* Appends t, known to be absent. */
static rp_status set_append(rp_dep_set *s, rp_dep_token t) {
  uint32_t old_cap = s->cap;
  if (s->n == s->cap &&
      !rp__grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v))
    return rp__err(RP_ENOMEM, "dependence analysis: out of memory");
  s->v[s->n++] = t;
  if (s->cap != old_cap && s->cap >= INDEX_FROM)
    index_build(s);
  else if (s->index)
    index_put(s, s->n - 1);
  return RP_OK;
}

rp_status rp__depset_add(rp_dep_set *s, rp_dep_token t) {
  uint32_t at = set_find(s, t.id);
  if (at == UINT32_MAX)
    return set_append(s, t);
  s->v[at].order &= t.order; /* depending on what it wrote wins */
  return RP_OK;
}

void rp__depset_clear(rp_dep_set *s) {
  s->n = 0;
  if (s->index)
    memset(s->index, 0, sizeof *s->index * s->icap);
}

void rp__depset_free(rp_dep_set *s) {
  free(s->v);
  free(s->index);
  memset(s, 0, sizeof *s);
}

static void set_clear(rp_analysis *a, rp_dep_set *s) {
  if (a->hooks.release)
    for (uint32_t i = 0; i < s->n; i++)
      a->hooks.release(a->hooks.arg, s->v[i]);
  rp__depset_clear(s);
}

/* Drops completed tokens so sets of long-running eager programs stay small.
 * Called only when a set is full, so the scan is amortized O(1) per add. */
static void set_prune(rp_analysis *a, rp_dep_set *s) {
  if (!a->hooks.done)
    return;
  uint32_t k = 0;
  for (uint32_t i = 0; i < s->n; i++) {
    if (a->hooks.done(a->hooks.arg, s->v[i])) {
      if (a->hooks.release)
        a->hooks.release(a->hooks.arg, s->v[i]);
    } else {
      s->v[k++] = s->v[i];
    }
  }
  if (k != s->n) {
    s->n = k;
    if (s->index)
      index_build(s);
  }
}

/* Adds a token the state will hold. *added counts the new references the
 * caller must take (one atomic add per op instead of one per set). */
static rp_status set_hold(rp_analysis *a, rp_dep_set *s, rp_dep_token t,
                          uint32_t *added) {
  if (set_find(s, t.id) != UINT32_MAX)
    return RP_OK;
  if (s->n == s->cap)
    set_prune(a, s);
  rp_status st = set_append(s, t);
  if (st == RP_OK)
    (*added)++;
  return st;
}

static void deps_reset(rp_analysis *a, rp_inst_deps *d, uint32_t gen) {
  set_clear(a, &d->w);
  set_clear(a, &d->r);
  set_clear(a, &d->gpre);
  d->mode = MODE_NONE;
  d->redop = RP_REDOP_NONE;
  d->gen = gen;
}

static void table_free(rp_analysis *a, rp_inst_deps **tab, uint32_t *cap) {
  for (uint32_t i = 0; i < *cap; i++) {
    rp_inst_deps *d = &(*tab)[i];
    deps_reset(a, d, 0);
    rp__depset_free(&d->w);
    rp__depset_free(&d->r);
    rp__depset_free(&d->gpre);
  }
  free(*tab);
  *tab = NULL;
  *cap = 0;
}

void rp__analysis_fini(rp_analysis *a) {
  table_free(a, &a->by_slot, &a->cap);
  table_free(a, &a->by_mirror, &a->mcap);
}

/* A mirror reference (capture.h) is an instance of its own, kept apart
 * from engine slots; mirrors have no generations. */
static rp_inst_deps *mirror_state(rp_analysis *a, rp_inst ref) {
  uint32_t k = rp__mirror_index(ref);
  if (k >= a->mcap &&
      (k == UINT32_MAX || !rp__grow((void **)&a->by_mirror, &a->mcap, k + 1,
                                    sizeof *a->by_mirror)))
    return NULL;
  return &a->by_mirror[k];
}

/* The state for an instance, reset if it belongs to an older generation. */
static rp_inst_deps *state_for(rp_analysis *a, rp_inst inst) {
  if (rp__is_mirror(inst))
    return mirror_state(a, inst);
  uint32_t slot = rp__inst_slot(inst);
  if (slot >= a->cap) {
    if (slot == UINT32_MAX ||
        !rp__grow((void **)&a->by_slot, &a->cap, slot + 1, sizeof *a->by_slot))
      return NULL;
  }
  rp_inst_deps *d = &a->by_slot[slot];
  if (d->gen != rp__inst_gen(inst))
    deps_reset(a, d, rp__inst_gen(inst));
  return d;
}

static int joins_group(const rp_inst_deps *d, const rp_access *ac, int copy) {
  return ac->priv == RP_REDUCE && d->mode == MODE_REDUCE &&
         d->redop == ac->redop && d->copy == (copy != 0) && d->r.n == 0;
}

/* Appends in's tokens to out, skipping those already completed (nothing to
 * wait for: an eager op then gates on fewer events); order 1 marks them
 * order-only (readers), else they keep their own mark. */
static rp_status add_all(const rp_analysis *a, rp_dep_set *out,
                         const rp_dep_set *in, uint32_t order) {
  for (uint32_t i = 0; i < in->n; i++) {
    if (a->hooks.done && a->hooks.done(a->hooks.arg, in->v[i]))
      continue;
    rp_dep_token t = in->v[i];
    t.order |= order;
    rp_status st = rp__depset_add(out, t);
    if (st)
      return st;
  }
  return RP_OK;
}

rp_status rp__analysis_deps(rp_analysis *a, const rp_access *acc, uint32_t nacc,
                            int copy, rp_dep_set *deps) {
  for (uint32_t i = 0; i < nacc; i++) {
    rp_inst_deps *d = state_for(a, acc[i].inst);
    if (!d)
      return rp__err(RP_ENOMEM, "dependence analysis: out of memory");
    rp_status st;
    if (acc[i].priv == RP_READ)
      st = add_all(a, deps, &d->w, 0);
    else if (joins_group(d, &acc[i], copy))
      st = add_all(a, deps, &d->gpre, 0);
    else if ((st = add_all(a, deps, &d->w, 0)) == RP_OK)
      st = add_all(a, deps, &d->r, 1);
    if (st)
      return st;
  }
  return RP_OK;
}

/* Moves every token of from into to, marked order-only when order is 1:
 * the references move with them (a token already in `to` gives its extra
 * reference back). */
static rp_status set_move(rp_analysis *a, rp_dep_set *to, rp_dep_set *from,
                          uint32_t order) {
  rp_status st = RP_OK;
  for (uint32_t i = 0; i < from->n; i++) {
    rp_dep_token t = from->v[i];
    t.order = order;
    uint32_t at = set_find(to, t.id);
    if (at != UINT32_MAX)
      to->v[at].order &= order;
    if (at != UINT32_MAX || st != RP_OK || (st = set_append(to, t)) != RP_OK) {
      if (a->hooks.release)
        a->hooks.release(a->hooks.arg, t);
    }
  }
  rp__depset_clear(from);
  return st;
}

/* Room in s for `more` tokens beyond its own: completed ones are dropped
 * first, as set_hold does when s is full. */
static rp_status set_reserve(rp_analysis *a, rp_dep_set *s, uint32_t more) {
  if (s->cap - s->n >= more)
    return RP_OK;
  set_prune(a, s);
  if (s->cap - s->n >= more)
    return RP_OK;
  if (more > UINT32_MAX - s->n ||
      !rp__grow((void **)&s->v, &s->cap, s->n + more, sizeof *s->v))
    return rp__err(RP_ENOMEM, "dependence analysis: out of memory");
  /* as set_append does when it grows s: the appends the room is for
   * then find the index large enough (or none) */
  if (s->cap >= INDEX_FROM)
    index_build(s);
  return RP_OK;
}

rp_status rp__analysis_reserve(rp_analysis *a, const rp_access *acc,
                               uint32_t nacc) {
  /* Bounds that hold whatever the order of the accesses (one instance may
   * come twice): the one token commit adds is self, and every set holds a
   * token once (set_hold and set_move look it up first), so r and w gain
   * at most one token each, and a new reduction group's predecessors are
   * the writers and readers moved in, self among them at most once (room
   * for one token per access would make an op naming N instances allocate
   * N sets of N tokens: 8 GB for 10,000 reads). */
  for (uint32_t i = 0; i < nacc; i++) {
    rp_inst_deps *d = state_for(a, acc[i].inst);
    if (!d)
      return rp__err(RP_ENOMEM, "dependence analysis: out of memory");
    rp_status st = set_reserve(a, &d->r, 1);
    if (!st)
      st = set_reserve(a, &d->w, 1);
    /* every reduction, even one that would join the open group: an
     * earlier access of the same op may read the instance and close the
     * group before this one commits */
    if (!st && acc[i].priv == RP_REDUCE)
      st = set_reserve(a, &d->gpre, d->w.n + d->r.n + 1);
    if (st)
      return st;
  }
  return RP_OK;
}

rp_status rp__analysis_commit(rp_analysis *a, const rp_access *acc,
                              uint32_t nacc, int copy, rp_dep_token self) {
  /* One reference per set that will hold self, taken up front in one go
   * (the op may already have run: a prune below must never drop a
   * reference self does not hold yet); surplus ones are given back. */
  uint32_t held = 0;
  if (nacc && a->hooks.retain)
    a->hooks.retain(a->hooks.arg, self, nacc);
  rp_status st = RP_OK;
  for (uint32_t i = 0; i < nacc && !st; i++) {
    rp_inst_deps *d = state_for(a, acc[i].inst);
    if (!d) {
      st = rp__err(RP_ENOMEM, "dependence analysis: out of memory");
      break;
    }
    switch (acc[i].priv) {
    case RP_READ:
      st = set_hold(a, &d->r, self, &held);
      break;
    case RP_REDUCE:
      if (joins_group(d, &acc[i], copy)) {
        st = set_hold(a, &d->w, self, &held);
        break;
      }
      set_clear(a, &d->gpre);
      if ((st = set_move(a, &d->gpre, &d->w, 0)) == RP_OK &&
          (st = set_move(a, &d->gpre, &d->r, 1)) == RP_OK)
        st = set_hold(a, &d->w, self, &held);
      d->mode = MODE_REDUCE;
      d->copy = copy != 0;
      d->redop = acc[i].redop;
      break;
    default: /* WRITE, RW */
      set_clear(a, &d->w);
      set_clear(a, &d->r);
      set_clear(a, &d->gpre);
      st = set_hold(a, &d->w, self, &held);
      d->mode = MODE_WRITE;
      break;
    }
  }
  if (a->hooks.retain && a->hooks.release)
    for (uint32_t k = held; k < nacc; k++)
      a->hooks.release(a->hooks.arg, self);
  return st;
}

/* The state for an instance when there is one, looked up only (never
 * grown or reset): a slot of another generation (the instance freed
 * meanwhile) is not this instance's state. */
static rp_inst_deps *state_peek(rp_analysis *a, rp_inst inst) {
  if (rp__is_mirror(inst))
    return rp__mirror_index(inst) < a->mcap
               ? &a->by_mirror[rp__mirror_index(inst)]
               : NULL;
  uint32_t slot = rp__inst_slot(inst);
  return slot < a->cap && a->by_slot[slot].gen == rp__inst_gen(inst)
             ? &a->by_slot[slot]
             : NULL;
}

uint32_t rp__analysis_room(rp_analysis *a, rp_inst inst) {
  const rp_inst_deps *d = state_peek(a, inst);
  return d ? d->w.cap + d->r.cap + d->gpre.cap : 0;
}

void rp__analysis_implied(rp_analysis *a, rp_inst inst, uint64_t before) {
  rp_inst_deps *d = state_peek(a, inst);
  uint32_t at = d ? set_find(&d->w, before) : UINT32_MAX;
  if (at == UINT32_MAX)
    return;
  rp_dep_set *s = &d->w;
  if (a->hooks.release)
    a->hooks.release(a->hooks.arg, s->v[at]);
  memmove(&s->v[at], &s->v[at + 1], sizeof *s->v * (s->n - at - 1));
  s->n--;
  if (s->index)
    index_build(s);
}

rp_status rp__analysis_tokens(rp_analysis *a, rp_inst inst, rp_dep_set *out) {
  rp_inst_deps *d = state_peek(a, inst);
  if (!d)
    return RP_OK;
  rp_status st = add_all(a, out, &d->w, 0);
  if (!st)
    st = add_all(a, out, &d->r, 1);
  if (!st)
    st = add_all(a, out, &d->gpre, 0);
  return st;
}

rp_status rp__check_accesses(rp_runtime *rt, const rp_access *acc,
                             uint32_t nacc, const char *what) {
  if (nacc && !acc)
    return rp__err(RP_EINVAL, "%s: %u accesses but NULL array", what, nacc);
  for (uint32_t i = 0; i < nacc; i++) {
    rp_mem mem;
    rp_status st = rp__inst_mem(rt, acc[i].inst, &mem);
    if (st)
      return rp__err(st, "%s: access %u: instance %#llx %s", what, i,
                     (unsigned long long)acc[i].inst.id,
                     rp__inst_missing(acc[i].inst));
    switch (acc[i].priv) {
    case RP_READ:
    case RP_WRITE:
    case RP_RW:
      if (acc[i].redop != RP_REDOP_NONE) /* it would read as a reduction */
        return rp__err(RP_EINVAL,
                       "%s: access %u: reduction operator %d on a %s access "
                       "(only RP_REDUCE takes one)",
                       what, i, (int)acc[i].redop,
                       acc[i].priv == RP_READ    ? "read"
                       : acc[i].priv == RP_WRITE ? "write"
                                                 : "read-write");
      break;
    case RP_REDUCE:
      if (acc[i].redop == RP_REDOP_NONE)
        return rp__err(RP_EINVAL,
                       "%s: access %u: RP_REDUCE without a reduction "
                       "operator (redop RP_REDOP_NONE; set RP_REDOP_SUM)",
                       what, i);
      if (acc[i].redop != RP_REDOP_SUM)
        return rp__err(RP_EINVAL,
                       "%s: access %u: unknown reduction "
                       "operator %d",
                       what, i, (int)acc[i].redop);
      break;
    default:
      return rp__err(RP_EINVAL, "%s: access %u: unknown privilege %d", what, i,
                     (int)acc[i].priv);
    }
  }
  return RP_OK;
}
