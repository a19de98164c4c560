/* replay/lower.c — the device-independent half of the CUDA lowering (see
 * lower.h): cutting GPU units into segments, adding the launcher units,
 * the per-placement segment data, the dump, and rp_exec_update_args. */
#include "lower.h"

#include <string.h>

/* ---- cutting ---- */

/* The key u gets from its predecessors (see lower.h): never below a
 * predecessor's, one more across a host -> GPU edge, one more across a GPU
 * -> GPU edge from a GPU that launches after u's at the same depth. */
static uint32_t unit_key(const rp_cut_in *in, const uint32_t *key, uint32_t u) {
  uint32_t pd = in->port && in->port[u] ? RP_KEY_PORT : 0, d = 0;
  int32_t g = in->gpu[u];
  for (uint32_t j = 0; j < in->npred[u]; j++) {
    uint32_t p = in->preds[in->pred_off[u] + j];
    int32_t gp = in->gpu[p];
    uint32_t need = key[p] & ~RP_KEY_PORT;
    if (g >= 0 && (gp < 0 || gp > g))
      need++;
    pd |= key[p] & RP_KEY_PORT;
    if (need > d)
      d = need;
  }
  return pd | d;
}

typedef struct cut_item {
  uint32_t key;
  int32_t gpu;
  uint32_t topo; /* position in the input order */
  uint32_t unit;
} cut_item;

static int by_launch(const void *a, const void *b) {
  const cut_item *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  if (x->gpu != y->gpu)
    return x->gpu < y->gpu ? -1 : 1;
  return x->topo < y->topo ? -1 : x->topo > y->topo;
}

void rp__lower_cut_free(rp_cut *c) {
  free(c->key);
  free(c->seg);
  free(c->segs);
  free(c->members);
  memset(c, 0, sizeof *c);
}

/* Groups the sorted GPU items into segments. */
static void cut_group(rp_cut *c, const cut_item *it, uint32_t ng) {
  for (uint32_t i = 0; i < ng; i++) {
    if (i == 0 || it[i].key != it[i - 1].key || it[i].gpu != it[i - 1].gpu)
      c->segs[c->nseg++] = (rp_cut_seg){it[i].gpu, it[i].key, i, 0};
    c->segs[c->nseg - 1].n++;
    c->members[i] = it[i].unit;
    c->seg[it[i].unit] = c->nseg - 1;
  }
}

rp_status rp__lower_cut(const rp_cut_in *in, rp_cut *out) {
  uint32_t n = in->n, ng = 0;
  memset(out, 0, sizeof *out);
  out->key = rp__calloc(n ? n : 1, sizeof *out->key);
  out->seg = malloc(sizeof *out->seg * (n ? n : 1));
  cut_item *it = malloc(sizeof *it * (n ? n : 1));
  if (!out->key || !out->seg || !it) {
    free(it);
    rp__lower_cut_free(out);
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t u = in->order[k];
    out->key[u] = unit_key(in, out->key, u);
    out->seg[u] = UINT32_MAX;
    if (in->gpu[u] >= 0)
      it[ng++] = (cut_item){out->key[u], in->gpu[u], k, u};
  }
  qsort(it, ng, sizeof *it, by_launch);
  out->segs = malloc(sizeof *out->segs * (ng ? ng : 1));
  out->members = malloc(sizeof *out->members * (ng ? ng : 1));
  if (!out->segs || !out->members) {
    free(it);
    rp__lower_cut_free(out);
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  }
  cut_group(out, it, ng);
  free(it);
  return RP_OK;
}

/* ---- plan: segments and launcher units ---- */

static int is_gpu_unit(const rp_exec *ex, const rp_unit *u) {
  if (u->pinned == RP_PROC_ANY)
    return 0;
  const rp_proc_info *pi = rp__proc(ex->rt, u->pinned);
  return pi && pi->kind == RP_PROC_GPU;
}

/* The leader of GPU processor p's group: the lowest GPU processor on the
 * same physical device (rp_proc_info.physical; `device` is the logical
 * index, distinct for every logical GPU). */
static uint32_t gpu_leader(const rp_exec *ex, uint32_t p) {
  /* REPRISE_GPU_GROUPS=0 (read at instantiate): every logical GPU its own
   * group, as on separate devices (the tests' way to run the cross-GPU
   * event path on one device) */
  const char *v = getenv("REPRISE_GPU_GROUPS");
  if (v && strcmp(v, "0") == 0)
    return p;
  const rp_proc_info *pi = rp__proc(ex->rt, p);
  for (uint32_t q = 0; q < p; q++) {
    const rp_proc_info *qi = rp__proc(ex->rt, q);
    if (qi && qi->kind == RP_PROC_GPU && qi->physical == pi->physical)
      return q;
  }
  return p;
}

/* The cut's input from the units (op units only). On failure *c holds
 * nothing (rp__lower_cut_free may still be called on it). */
static rp_status cut_units(rp_exec *ex, int32_t *gpu, rp_cut *c) {
  uint32_t n = ex->nunits;
  memset(c, 0, sizeof *c);
  uint8_t *port = malloc(n ? n : 1);
  uint32_t *off = malloc(sizeof *off * (n ? n : 1));
  uint32_t *np = malloc(sizeof *np * (n ? n : 1));
  rp_status st = RP_OK;
  if (!port || !off || !np) {
    st = rp__err(RP_ENOMEM, "instantiate: out of memory");
  } else {
    for (uint32_t u = 0; u < n; u++) {
      port[u] = ex->units[u].nport > 0;
      off[u] = ex->units[u].pred_off;
      np[u] = ex->units[u].npred;
    }
    rp_cut_in in = {n, ex->order, gpu, port, off, np, ex->preds};
    st = rp__lower_cut(&in, c);
  }
  free(port);
  free(off);
  free(np);
  return st;
}

/* Grows the units, order, key and seg_of arrays by nseg launcher slots. */
static rp_status grow_units(rp_exec *ex, rp_cut *c, uint32_t nseg) {
  uint32_t n = ex->nunits, m = n + nseg;
  rp_unit *units = realloc(ex->units, sizeof *units * m);
  if (units)
    ex->units = units;
  uint32_t *order = realloc(ex->order, sizeof *order * m);
  if (order)
    ex->order = order;
  uint32_t *key = realloc(c->key, sizeof *key * m);
  if (key)
    c->key = key;
  uint32_t *seg = realloc(c->seg, sizeof *seg * m);
  if (seg)
    c->seg = seg;
  if (!units || !order || !key || !seg)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  memset(&ex->units[n], 0, sizeof *units * nseg);
  return RP_OK;
}

/* Launcher k's predecessors: the host predecessors of its members (once
 * each: stamp[p] == mark once listed) and launcher k - 1 (launches happen
 * in segment order). Reads the op units' original lists. */
static uint32_t launcher_preds(const rp_exec *ex, const rp_cut *c,
                               const int32_t *gpu, uint32_t k, uint32_t *stamp,
                               uint32_t mark, uint32_t *out) {
  uint32_t np = 0;
  const rp_cut_seg *sg = &c->segs[k];
  for (uint32_t i = 0; i < sg->n; i++) {
    const rp_unit *u = &ex->units[c->members[sg->first + i]];
    for (uint32_t j = 0; j < u->npred; j++) {
      uint32_t p = ex->preds[u->pred_off + j];
      if (gpu[p] >= 0 || stamp[p] == mark)
        continue;
      stamp[p] = mark;
      if (out)
        out[np] = p;
      np++;
    }
  }
  if (k > 0) {
    if (out)
      out[np] = ex->nunits + k - 1;
    np++;
  }
  return np;
}

/* The union of its members' precondition ports into out; with out NULL,
 * an upper bound of their number. */
static uint32_t launcher_ports(const rp_exec *ex, const rp_cut *c, uint32_t k,
                               uint32_t *out) {
  uint32_t np = 0;
  const rp_cut_seg *sg = &c->segs[k];
  for (uint32_t i = 0; i < sg->n; i++) {
    const rp_unit *u = &ex->units[c->members[sg->first + i]];
    for (uint32_t j = 0; j < u->nport; j++) {
      uint32_t p = ex->ports[u->port_off + j], q = 0;
      while (out && q < np && out[q] != p)
        q++;
      if (out && q < np)
        continue; /* already there */
      if (out)
        out[np] = p;
      np++;
    }
  }
  return np;
}

static uint32_t csr_end(const rp_exec *ex) {
  uint32_t end = 0;
  for (uint32_t u = 0; u < ex->nunits; u++) {
    const rp_unit *x = &ex->units[u];
    end = x->port_off + x->nport > end ? x->port_off + x->nport : end;
  }
  return end;
}

static void launcher_init(rp_unit *l, uint32_t launch_lane) {
  l->kind = RP_UNIT_LAUNCH;
  l->op = UINT32_MAX;
  l->pinned = launch_lane;
  l->cost_ns = 2000; /* a graph launch and a host function: ~2 us */
  l->measured_ns = UINT64_MAX;
  l->shards_src = SIZE_MAX;
  l->max_shards = 1;
  l->name = "launch";
}

/* The launchers' precondition ports, appended to ex->ports. */
static rp_status add_launcher_ports(rp_exec *ex, const rp_cut *c) {
  uint32_t n = ex->nunits, qend = csr_end(ex);
  uint64_t nport = 0;
  for (uint32_t k = 0; k < c->nseg; k++)
    nport += launcher_ports(ex, c, k, NULL); /* an upper bound */
  if (qend + nport > UINT32_MAX)
    return rp__err(RP_ERANGE, "instantiate: too many ports");
  uint32_t *ports = realloc(ex->ports, sizeof *ports * (qend + nport + 1));
  if (!ports)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  ex->ports = ports;
  for (uint32_t k = 0; k < c->nseg; k++) {
    rp_unit *l = &ex->units[n + k];
    l->port_off = qend;
    l->nport = launcher_ports(ex, c, k, &ex->ports[qend]);
    qend += l->nport;
  }
  return RP_OK;
}

/* Rebuilds the predecessor CSR: each GPU unit also waits (for ordering
 * only) on its segment's launcher, so every placement puts a launcher
 * before the host units that wait on its segment; the launchers follow
 * with their own predecessors. */
static rp_status add_launcher_preds(rp_exec *ex, const rp_cut *c,
                                    const int32_t *gpu) {
  uint32_t n = ex->nunits, nseg = c->nseg;
  uint32_t *stamp = rp__calloc(n ? n : 1, sizeof *stamp);
  if (!stamp)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  uint64_t total = 0;
  for (uint32_t u = 0; u < n; u++)
    total += ex->units[u].npred + (gpu[u] >= 0);
  for (uint32_t k = 0; k < nseg; k++) /* marks 1 .. nseg */
    total += launcher_preds(ex, c, gpu, k, stamp, k + 1, NULL);
  uint32_t *preds =
      total <= UINT32_MAX ? malloc(sizeof *preds * (total + 1)) : NULL;
  if (!preds) {
    free(stamp);
    return rp__err(RP_ENOMEM, "instantiate: too many edges or out of "
                              "memory");
  }
  /* launchers first, from the old lists, into the tail (marks nseg + 1
   * .. 2 nseg: every pass over a segment uses a fresh mark) */
  uint32_t off = (uint32_t)total, head = 0, tail = off;
  for (uint32_t k = nseg; k-- > 0;)
    off -= launcher_preds(ex, c, gpu, k, stamp, nseg + 1 + k, NULL);
  uint32_t at = off;
  for (uint32_t k = 0; k < nseg; k++) {
    rp_unit *l = &ex->units[n + k];
    l->pred_off = at;
    l->npred =
        launcher_preds(ex, c, gpu, k, stamp, 2 * nseg + 1 + k, &preds[at]);
    at += l->npred;
  }
  RP_ASSERT(at == tail);
  for (uint32_t u = 0; u < n; u++) {
    rp_unit *x = &ex->units[u];
    memcpy(&preds[head], &ex->preds[x->pred_off], sizeof *preds * x->npred);
    x->pred_off = head;
    head += x->npred;
    if (gpu[u] >= 0) {
      preds[head++] = n + c->seg[u];
      x->npred++;
    }
  }
  RP_ASSERT(head == off);
  free(ex->preds);
  ex->preds = preds;
  free(stamp);
  return RP_OK;
}

/* Appends the launcher units' ports and preds to the CSR arrays. */
static rp_status add_launchers(rp_exec *ex, const rp_cut *c, const int32_t *gpu,
                               uint32_t launch_lane) {
  for (uint32_t k = 0; k < c->nseg; k++)
    launcher_init(&ex->units[ex->nunits + k], launch_lane);
  rp_status st = add_launcher_ports(ex, c);
  return st ? st : add_launcher_preds(ex, c, gpu);
}

typedef struct order_item {
  uint32_t key;
  uint32_t rank; /* launchers first in a key block, in launch order */
  uint32_t unit;
} order_item;

static int by_block(const void *a, const void *b) {
  const order_item *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The initial order: the topological order stably sorted by key (keys
 * never decrease along an edge, so it stays topological), each key block
 * led by its launchers in launch order (their predecessors all have
 * smaller keys). */
static rp_status order_by_key(rp_exec *ex, const rp_cut *c, uint32_t n) {
  uint32_t m = n + c->nseg;
  order_item *it = malloc(sizeof *it * (m ? m : 1));
  if (!it)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  for (uint32_t k = 0; k < n; k++)
    it[k] = (order_item){c->key[ex->order[k]], c->nseg + k, ex->order[k]};
  for (uint32_t k = 0; k < c->nseg; k++)
    it[n + k] = (order_item){c->segs[k].key, k, n + k};
  qsort(it, m, sizeof *it, by_block);
  for (uint32_t k = 0; k < m; k++)
    ex->order[k] = it[k].unit;
  free(it);
  return RP_OK;
}

static rp_status lower_new(rp_exec *ex, rp_cut *c, uint32_t launch_lane) {
  rp_lower *lw = rp__calloc(1, sizeof *lw);
  if (!lw)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  ex->lw = lw;
  lw->nseg = c->nseg;
  lw->nop_units = ex->nunits;
  lw->launch_lane = launch_lane;
  lw->segs = rp__calloc(c->nseg, sizeof *lw->segs);
  uint32_t nprocs = rp_proc_count(ex->rt); /* the lanes, once allocated */
  lw->gpu_of_lane = malloc(sizeof *lw->gpu_of_lane * nprocs);
  lw->gpus = rp__calloc(nprocs, sizeof *lw->gpus);
  if (!lw->segs || !lw->gpu_of_lane || !lw->gpus)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  for (uint32_t w = 0; w < nprocs; w++)
    lw->gpu_of_lane[w] = UINT32_MAX;
  for (uint32_t k = 0; k < c->nseg; k++) {
    uint32_t lane = (uint32_t)c->segs[k].gpu; /* a group's leader */
    uint8_t first = lw->gpu_of_lane[lane] == UINT32_MAX;
    if (first) {
      lw->gpu_of_lane[lane] = lw->ngpu;
      lw->gpus[lw->ngpu].group = lw->ngpu;
      lw->gpus[lw->ngpu++].lane = lane;
    }
    lw->segs[k] = (rp_seg){.lane = lane,
                           .gpu = lw->gpu_of_lane[lane],
                           .key = c->segs[k].key,
                           .launch = ex->nunits + k,
                           .first = c->segs[k].first,
                           .n = c->segs[k].n,
                           .first_of_gpu = first};
  }
  lw->last_seg = rp__calloc(lw->ngpu ? lw->ngpu : 1, sizeof *lw->last_seg);
  if (!lw->last_seg)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  for (uint32_t k = c->nseg; k-- > 0;) {
    rp_seg *sg = &lw->segs[k];
    int later = 0;
    for (uint32_t j = k + 1; j < c->nseg && !later; j++)
      later = lw->segs[j].lane == sg->lane;
    sg->last_of_gpu = !later;
    if (!later)
      lw->last_seg[sg->gpu] = k;
  }
  /* a debugging switch (and the tests' way to run both completion paths),
   * read at every instantiate */
  const char *graphs = getenv("REPRISE_CUDA_GRAPHS"); /* as in build */
  lw->graphs = !(graphs && strcmp(graphs, "0") == 0);
  const char *poll = getenv("REPRISE_GPU_POLL");
  lw->poll_ok = !(poll && strcmp(poll, "0") == 0);
  lw->poll_events = poll && strcmp(poll, "events") == 0;
  /* the other logical GPUs of each group (their own parameter buffers) */
  for (uint32_t u = 0; u < ex->nunits; u++) {
    const rp_unit *x = &ex->units[u];
    if (c->seg[u] == UINT32_MAX || lw->gpu_of_lane[x->pinned] != UINT32_MAX)
      continue;
    uint32_t lead = (uint32_t)c->segs[c->seg[u]].gpu;
    lw->gpu_of_lane[x->pinned] = lw->ngpu;
    lw->gpus[lw->ngpu].group = lw->gpu_of_lane[lead];
    lw->gpus[lw->ngpu++].lane = x->pinned;
  }
  /* the cut's arrays move into the lowering */
  lw->members = c->members;
  lw->seg_of = c->seg;
  c->members = NULL;
  c->seg = NULL;
  /* graph or op by op: known now (a model of a machine never builds) */
  for (uint32_t k = 0; k < c->nseg; k++)
    lw->segs[k].eager = rp__lower_eager_reason(ex, k);
  return RP_OK;
}

rp_status rp__lower_plan(rp_exec *ex) {
  uint32_t n = ex->nunits;
  int32_t *gpu = malloc(sizeof *gpu * (n ? n : 1));
  if (!gpu)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  int any = 0;
  for (uint32_t u = 0; u < n; u++) {
    gpu[u] = is_gpu_unit(ex, &ex->units[u])
                 ? (int32_t)gpu_leader(ex, ex->units[u].pinned)
                 : -1;
    any |= gpu[u] >= 0;
  }
  if (!any) { /* CPU-only: nothing changes */
    free(gpu);
    return RP_OK;
  }
  rp_cut c;
  rp_status st = cut_units(ex, gpu, &c);
  uint32_t launch_lane = ex->ncpu - 1; /* the CPU lane list scheduling fills
                                          last, so launches rarely queue
                                          behind host work */
  if (!st)
    st = grow_units(ex, &c, c.nseg);
  if (!st)
    st = add_launchers(ex, &c, gpu, launch_lane);
  if (!st)
    st = order_by_key(ex, &c, n);
  if (!st) {
    for (uint32_t k = 0; k < c.nseg; k++) {
      c.key[n + k] = c.segs[k].key;
      c.seg[n + k] = k;
    }
    st = lower_new(ex, &c, launch_lane);
  }
  if (!st) {
    ex->unit_key = c.key;
    c.key = NULL;
    ex->nlaunch = c.nseg;
    ex->nunits = n + c.nseg;
  }
  rp__lower_cut_free(&c);
  free(gpu);
  return st;
}

/* ---- after each placement ---- */

/* Which of a member's waits its launcher performs: those on CPU lanes
 * (host dependencies, in this replay or the previous one), except on the
 * launch lane itself: there everything a member waits for precedes the
 * launcher (its host predecessors are the launcher's, and the previous
 * replay ran first), and the launcher's own position is among them. */
static int launcher_waits_for(const rp_exec *ex, const rp_wait *w) {
  return w->lane < ex->ncpu && w->lane != ex->lw->launch_lane;
}

/* Members' waits the launcher performs (launcher_waits_for), into the room
 * rp__lower_reserve made (they are some of the placement's waits). */
static void collect_waits(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  RP_ASSERT(ex->nwaits <= lw->waits_cap);
  lw->nwaits = 0;
  for (uint32_t k = 0; k < lw->nseg; k++) {
    rp_seg *sg = &lw->segs[k];
    sg->wait_off = lw->nwaits;
    for (uint32_t i = 0; i < sg->n; i++) {
      const rp_unit *u = &ex->units[lw->members[sg->first + i]];
      for (uint32_t j = 0; j < u->nwait; j++) {
        const rp_wait *w = &ex->waits[u->wait_off + j];
        if (launcher_waits_for(ex, w))
          lw->waits[lw->nwaits++] = *w;
      }
    }
    sg->nwait = lw->nwaits - sg->wait_off;
  }
}

/* 1 when no CPU lane but the launch lane has units, and it holds only
 * launchers that wait for nothing on the host (no precondition, no CPU
 * lane, no member waiting on one): running it costs a graph launch per
 * segment and never blocks, so the calling thread can run it. */
static int launch_inline_ok(const rp_exec *ex) {
  const rp_lower *lw = ex->lw;
  for (uint32_t w = 0; w < ex->ncpu; w++) {
    const rp_lane *l = &ex->lanes[w];
    if (w != lw->launch_lane) {
      if (l->len)
        return 0;
      continue;
    }
    for (uint32_t i = 0; i < l->len; i++) {
      const rp_unit *u = &ex->units[l->units[i]];
      if (u->kind != RP_UNIT_LAUNCH || u->nwait || u->nport ||
          lw->segs[lw->seg_of[l->units[i]]].nwait)
        return 0;
    }
  }
  return 1;
}

/* Each segment's lanes and end positions (lw->pubs: room for one per
 * member, made by rp__lower_reserve), and each group's completion
 * sources. */
static void seg_pubs(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  uint32_t at = 0;
  for (uint32_t k = 0; k < lw->nseg; k++) {
    rp_seg *sg = &lw->segs[k];
    sg->pub_off = at;
    for (uint32_t i = 0; i < sg->n; i++) {
      const rp_unit *u = &ex->units[lw->members[sg->first + i]];
      uint32_t j = sg->pub_off;
      while (j < at && lw->pubs[j].lane != u->lane)
        j++;
      if (j == at)
        lw->pubs[at++] = (rp_seg_pub){u->lane, 0};
      if (u->pos + 1 > lw->pubs[j].end)
        lw->pubs[j].end = u->pos + 1;
    }
    sg->npub = at - sg->pub_off;
  }
  for (uint32_t g = 0; g < lw->ngpu; g++)
    lw->gpus[g].nsrc = 0;
  for (uint32_t g = 0; g < lw->ngpu; g++)
    if (ex->lanes[lw->gpus[g].lane].len)
      lw->gpus[lw->gpus[g].group].nsrc++;
}

rp_status rp__lower_reserve(rp_exec *ex, uint32_t most_waits) {
  rp_lower *lw = ex->lw;
  if (!lw->pubs) { /* at most one per member: the same for every placement */
    uint32_t nm = 0;
    for (uint32_t k = 0; k < lw->nseg; k++)
      nm += lw->segs[k].n;
    lw->pubs = malloc(sizeof *lw->pubs * (nm ? nm : 1));
    if (!lw->pubs)
      return rp__err(RP_ENOMEM, "placement: out of memory");
  }
  if (!lw->waits || lw->waits_cap < most_waits) {
    uint32_t want = most_waits ? most_waits : 1;
    rp_wait *w = realloc(lw->waits, sizeof *w * want);
    if (!w)
      return rp__err(RP_ENOMEM, "placement: out of memory");
    lw->waits = w;
    lw->waits_cap = want;
  }
  return RP_OK;
}

void rp__lower_placed(rp_exec *ex) {
  rp_lower *lw = ex->lw;
  for (uint32_t k = 0; k < lw->nseg; k++) {
    rp_seg *sg = &lw->segs[k];
    sg->any_post = 0;
    for (uint32_t i = 0; i < sg->n; i++) {
      const rp_unit *u = &ex->units[lw->members[sg->first + i]];
      sg->any_post |= u->npost > 0;
    }
    sg->needs_cb = sg->last_of_gpu || sg->any_post;
  }
  seg_pubs(ex);
  /* a segment whose completion a host unit waits for needs its callback
   * (waits of GPU units on other GPUs are device-side) */
  for (uint32_t u = 0; u < ex->nunits; u++) {
    const rp_unit *x = &ex->units[u];
    if (lw->seg_of[u] != UINT32_MAX && x->kind != RP_UNIT_LAUNCH)
      continue;
    for (uint32_t k = 0; k < x->nwait; k++) {
      const rp_wait *w = &ex->waits[x->wait_off + k];
      if (w->lane < ex->ncpu)
        continue;
      uint32_t p = ex->lanes[w->lane].units[w->pos - 1];
      lw->segs[lw->seg_of[p]].needs_cb = 1;
    }
  }
  /* polling completes only a GPU's last segment: a segment before it
   * whose completion the host needs keeps host functions for all */
  lw->polled = lw->poll_ok;
  for (uint32_t k = 0; k < lw->nseg; k++)
    if (lw->segs[k].needs_cb && !lw->segs[k].last_of_gpu)
      lw->polled = 0;
  collect_waits(ex);
  lw->inline_ok = launch_inline_ok(ex);
}

/* ---- what keeps an op out of a CUDA graph ---- */

const char *rp__lower_task_blocker(const rp_runtime *rt, const rp_gop *op) {
  if (op->kind != RP_OP_TASK)
    return NULL;
  int value = 0;
  for (uint32_t k = 0; k < op->ninterp; k++) {
    if (op->interps[k].dst_offset == RP_INTERP_SHARDS)
      return "an op's shard count is interpolated";
    value = 1;
  }
  const rp_task_rec *t = value ? rp__task_get(rt, op->task) : NULL;
  if (value && (!t || !(t->flags & RP_TASK_DEVICE_ARGS)))
    return "an op interpolates args its task reads at issue (no "
           "RP_TASK_DEVICE_ARGS)";
  return NULL;
}

const char *rp__lower_eager_reason(const rp_exec *ex, uint32_t k) {
  const rp_lower *lw = ex->lw;
  if (!lw->graphs)
    return "REPRISE_CUDA_GRAPHS=0";
  const rp_seg *sg = &lw->segs[k];
  for (uint32_t i = 0; i < sg->n; i++) {
    const rp_unit *u = &ex->units[lw->members[sg->first + i]];
    if (u->kind == RP_UNIT_COPY) {
      const rp_mem_info *m[2];
      rp_mem_info a, b;
      m[0] = rp_mem_query(ex->rt, u->xd->src_mem, &a) ? NULL : &a;
      m[1] = rp_mem_query(ex->rt, u->xd->dst_mem, &b) ? NULL : &b;
      for (int s = 0; s < 2; s++)
        if (m[s] && m[s]->kind == RP_MEM_SYSTEM)
          return "a copy touches pageable host memory";
      continue;
    }
    if (u->shards_src != SIZE_MAX)
      return "an op's shard count is interpolated";
    const char *why = rp__lower_task_blocker(ex->rt, &ex->g->ops[u->op]);
    if (why)
      return why;
  }
  return NULL;
}

/* ---- stats ---- */

void rp__lower_stats(const rp_exec *ex, rp_exec_stats *out) {
  rp_lower *lw = ex->lw;
  out->gpus = lw->ngpu;
  for (uint32_t g = 0; g < lw->ngpu; g++)
    out->gpu_devices += lw->gpus[g].group == g;
  out->gpu_segments = lw->nseg;
  for (uint32_t g = 0; g < lw->ngpu; g++) {
    uint32_t n = 0;
    for (uint32_t k = 0; k < lw->nseg; k++)
      n += lw->segs[k].gpu == g;
    out->max_gpu_segments =
        n > out->max_gpu_segments ? n : out->max_gpu_segments;
  }
  for (uint32_t k = 0; k < lw->nseg; k++)
    out->gpu_segments_op_by_op += lw->segs[k].eager != NULL;
  out->graph_launches =
      atomic_load_explicit(&lw->n_graph_launches, memory_order_relaxed);
  out->gpu_ops_op_by_op =
      atomic_load_explicit(&lw->n_op_by_op, memory_order_relaxed);
  out->host_callbacks =
      atomic_load_explicit(&lw->n_callbacks, memory_order_relaxed);
  out->host_waits =
      atomic_load_explicit(&lw->n_host_waits, memory_order_relaxed);
  out->stream_waits =
      atomic_load_explicit(&lw->n_stream_waits, memory_order_relaxed);
  out->param_copies =
      atomic_load_explicit(&lw->n_param_copies, memory_order_relaxed);
}

/* ---- dump ---- */

void rp__lower_dump(const rp_exec *ex, FILE *f) {
  const rp_lower *lw = ex->lw;
  if (!lw)
    return;
  fprintf(f, "gpu segments: %u (launched from lane %u, CUDA graphs %s)\n",
          lw->nseg, lw->launch_lane, lw->graphs ? "on" : "off");
  for (uint32_t k = 0; k < lw->nseg; k++) {
    const rp_seg *sg = &lw->segs[k];
    fprintf(f, "  segment %u: gpu lane %u, %s%u, %u ops, %s%s%s%s\n", k,
            sg->lane, sg->key & RP_KEY_PORT ? "after ports, depth " : "depth ",
            sg->key & ~RP_KEY_PORT, sg->n,
            sg->eager ? "issued op by op: " : "CUDA graph",
            sg->eager ? sg->eager : "", sg->nev ? ", waits on other GPUs" : "",
            !sg->needs_cb ? ""
            : lw->polled  ? ", completion polled"
                          : ", host callback (side stream)");
  }
}

/* ---- rp_exec_update_args ---- */
