/* capture/insert.c — copy insertion while recording.
 *
 * When a recorded task's processor cannot reach one of its instances
 * (another device's memory, device memory from a CPU task), the task gets a
 * mirror of the instance in its processor's own memory (capture.h,
 * "mirrors"), kept in step by inserted copies:
 *   - before the task: source -> mirror, unless the mirror still holds the
 *     source's contents (nothing recorded since the mirror was last filled
 *     or written back wrote the source);
 *   - the task accesses the mirror instead of the source;
 *   - after a task that writes the mirror (WRITE, RW, REDUCE): mirror ->
 *     source, so the source is current for whatever reads it next.
 * The write-back copies the whole mirror, so a WRITE access's mirror is
 * filled too unless the task is known to overwrite every element of the
 * instance (its task record's cover_fn says so: a kernel task whose
 * descriptor's write rule reaches the instance's volume, rp.fill with n 0);
 * elements a task leaves alone then keep the source's contents, as they
 * do when it runs on the source.
 *
 * Every inserted copy is an ordinary copy op flagged `inserted`, recorded
 * through rp__record_op and so through the same dependence analysis as the
 * launches: the fill waits for the source's last writer, the task waits for
 * the fill (and for the mirror's earlier readers before it overwrites it),
 * the write-back waits for the task and for the source's readers, and later
 * readers of the source wait for the write-back. A reference to the task
 * (its `done`) stands for the task and its write-backs: record.c adds them
 * wherever the reference is waited on or bound to a postcondition.
 *
 * Where: a shard's processor (RP_PROC_ANY: worker 0, which reaches what
 * every CPU worker reaches) decides reach through rp__reach; the mirror
 * lives in that processor's local memory. The shards of one SPMD op share
 * its accesses, so they must agree on that memory: shards on different
 * devices that cannot reach an instance are refused (RP_EACCESS). */
#include "capture_impl.h"

#include <string.h>

#define NO_MIRROR UINT32_MAX
#define NO_MEM UINT32_MAX

enum { STALE = 0, FRESH = 1, WRITTEN_BACK = 2 };

static int reads(rp_privilege p) {
  return p != RP_WRITE;
}
static int writes(rp_privilege p) {
  return p != RP_READ;
}

void rp__insert_reset(rp_capture_state *cs) {
  free(cs->mvalid);
  free(cs->mnext);
  free(cs->mhead);
  cs->mvalid = NULL;
  cs->mnext = cs->mhead = NULL;
  cs->mcap = cs->hcap = 0;
}

/* The mirror of src in mem, or NO_MIRROR. */
static uint32_t find_mirror(const rp_capture_state *cs, rp_inst src,
                            rp_mem mem) {
  const rp_graph *g = cs->graph;
  uint32_t slot = rp__inst_slot(src);
  uint32_t k = slot < cs->hcap ? cs->mhead[slot] : 0;
  for (; k; k = cs->mnext[k - 1])
    if (g->mirrors[k - 1].src.id == src.id && g->mirrors[k - 1].mem == mem)
      return k - 1;
  return NO_MIRROR;
}

static rp_status add_mirror(rp_capture_state *cs, rp_inst src, rp_mem mem,
                            uint32_t *out) {
  rp_graph *g = cs->graph;
  uint32_t slot = rp__inst_slot(src);
  if (g->nmirrors >= cs->mcap) { /* mvalid and mnext share the capacity */
    uint32_t ncap = cs->mcap ? cs->mcap * 2 : 8;
    if (ncap <= g->nmirrors)
      ncap = UINT32_MAX;
    uint8_t *v = rp__reallocarray(cs->mvalid, ncap, sizeof *v);
    if (v)
      cs->mvalid = v;
    uint32_t *n = v ? rp__reallocarray(cs->mnext, ncap, sizeof *n) : NULL;
    if (!n)
      return rp__err(RP_ENOMEM, "copy insertion: out of memory");
    cs->mnext = n;
    cs->mcap = ncap;
  }
  if (slot >= cs->hcap &&
      (slot == UINT32_MAX ||
       !rp__grow((void **)&cs->mhead, &cs->hcap, slot + 1, sizeof *cs->mhead)))
    return rp__err(RP_ENOMEM, "copy insertion: out of memory");
  rp_status st = rp__graph_add_mirror(g, src, mem, out);
  if (st)
    return st;
  cs->mvalid[*out] = STALE;
  cs->mnext[*out] = cs->mhead[slot];
  cs->mhead[slot] = *out + 1;
  return RP_OK;
}

/* Drops the mirrors added since the table had n entries (newest first:
 * each was pushed at the head of its source's chain). */
static void drop_mirrors(rp_capture_state *cs, uint32_t n) {
  rp_graph *g = cs->graph;
  while (g->nmirrors > n) {
    uint32_t k = --g->nmirrors;
    cs->mhead[rp__inst_slot(g->mirrors[k].src)] = cs->mnext[k];
  }
}

void rp__insert_note_writes(rp_capture_state *cs, const rp_gop *op) {
  rp_access tmp[2];
  const rp_access *acc;
  uint32_t n = rp__op_accesses(op, tmp, &acc);
  for (uint32_t i = 0; i < n; i++) {
    rp_inst x = acc[i].inst;
    uint32_t slot = rp__inst_slot(x);
    if (!writes(acc[i].priv) || rp__is_mirror(x) || slot >= cs->hcap)
      continue;
    for (uint32_t k = cs->mhead[slot]; k; k = cs->mnext[k - 1])
      if (cs->graph->mirrors[k - 1].src.id == x.id)
        cs->mvalid[k - 1] = STALE;
  }
}

/* The processor that decides reach for shard s. */
static rp_proc shard_proc(const rp_gop *op, uint32_t s) {
  rp_proc p = op->shard_procs ? op->shard_procs[s] : op->proc;
  return p == RP_PROC_ANY ? 0 : p;
}

/* The memory access i needs a mirror in (NO_MEM: none); errors name the
 * call `what` and the task. */
static rp_status mirror_mem(rp_runtime *rt, const rp_gop *op, uint32_t i,
                            const char *what, const char *name, rp_mem *out) {
  rp_inst x = op->acc[i].inst;
  rp_mem tgt = NO_MEM;
  rp_proc first = 0;
  for (uint32_t s = 0; s < op->shards; s++) {
    rp_proc p = shard_proc(op, s);
    if (rp__reach(rt, p, x))
      continue;
    rp_mem local = rp__proc(rt, p)->local;
    if (tgt == NO_MEM) {
      tgt = local;
      first = p;
    } else if (local != tgt) {
      return rp__err(RP_EACCESS,
                     "%s: task '%s': access %u: instance %#llx is "
                     "not accessible from processors %u and %u, whose shards "
                     "would need mirrors in different memories (%u, %u); "
                     "launch one op per device",
                     what, name, i, (unsigned long long)x.id, first, p, tgt,
                     local);
    }
  }
  for (uint32_t s = 0; tgt != NO_MEM && s < op->shards; s++)
    if (!rp_proc_can_access(rt, shard_proc(op, s), tgt))
      return rp__err(RP_EACCESS,
                     "%s: task '%s': access %u: instance %#llx needs "
                     "a mirror in memory %u for processor %u, which "
                     "processor %u of another shard cannot access",
                     what, name, i, (unsigned long long)x.id, tgt, first,
                     shard_proc(op, s));
  *out = tgt;
  return RP_OK;
}

/* Per access: the memory of the mirror it needs. Adds nothing. */
static rp_status plan(rp_capture_state *cs, const rp_gop *op, rp_mem *mem,
                      int *any) {
  const rp_task_rec *t = rp__task_get(cs->rt, op->task);
  *any = 0;
  for (uint32_t i = 0; i < op->nacc; i++) {
    rp_status st = mirror_mem(cs->rt, op, i, cs->call ? cs->call : "launch",
                              t ? t->name : "?", &mem[i]);
    if (st)
      return st;
    *any |= mem[i] != NO_MEM;
  }
  return RP_OK;
}

static rp_status record_copy(rp_capture_state *cs, rp_inst src, rp_inst dst,
                             rp_event wait) {
  rp_gop c;
  memset(&c, 0, sizeof c);
  c.kind = RP_OP_COPY;
  c.copy = (rp_copy){.src = src, .dst = dst, .domain = RP_DOMAIN_SRC};
  c.shards = 1;
  c.proc = RP_PROC_ANY;
  c.inserted = 1;
  return rp__record_op(cs, &c, wait, NULL);
}

/* The volumes of op's accesses (-1: unknown), for the task's cover_fn. */
static void volumes(rp_capture_state *cs, const rp_gop *op, int64_t *vol) {
  for (uint32_t i = 0; i < op->nacc; i++) {
    rp_inst_view v;
    vol[i] = rp__inst_view(cs->rt, op->acc[i].inst, &v) == RP_OK
                 ? rp_rect_volume(&v.info.rect)
                 : -1;
  }
}

/* 1 when access i's mirror is filled before the task (when stale): the
 * task reads it, or it may leave some of its elements as they were (the
 * write-back copies every element). */
static int fills(const rp_task_rec *t, const rp_gop *op, const int64_t *vol,
                 uint32_t i) {
  if (reads(op->acc[i].priv))
    return 1;
  return !(t && t->cover_fn &&
           t->cover_fn(t->priv_arg, op->args, op->args_size, vol, op->nacc, i,
                       op->interps, op->ninterp));
}

/* Copies in what the task reads or may leave alone, records it on its
 * mirrors, writes back what it wrote. mir[i]: access i's mirror or
 * NO_MIRROR; vol: the accesses' volumes. */
static rp_status record_around(rp_capture_state *cs, const rp_gop *op,
                               const uint32_t *mir, const int64_t *vol,
                               rp_access *acc, rp_event wait, rp_event *ref) {
  const rp_gmirror *tab = cs->graph->mirrors;
  const rp_task_rec *t = rp__task_get(cs->rt, op->task);
  rp_status st = RP_OK;
  /* The fills take the task's wait too: a precondition may be what makes
   * the source's contents ready. */
  for (uint32_t i = 0; i < op->nacc && !st; i++) {
    uint32_t m = mir[i];
    if (m == NO_MIRROR || cs->mvalid[m] != STALE || !fills(t, op, vol, i))
      continue;
    st = record_copy(cs, tab[m].src, rp__mirror_ref(m), wait);
    if (!st)
      cs->mvalid[m] = FRESH;
  }
  for (uint32_t i = 0; i < op->nacc; i++)
    if (mir[i] != NO_MIRROR)
      acc[i].inst = rp__mirror_ref(mir[i]);
  rp_gop task = *op;
  task.acc = acc;
  if (!st)
    st = rp__record_op(cs, &task, wait, ref);
  for (uint32_t i = 0; i < op->nacc && !st; i++) {
    uint32_t m = mir[i];
    if (m == NO_MIRROR || !writes(op->acc[i].priv) ||
        cs->mvalid[m] == WRITTEN_BACK)
      continue;
    /* recording the write-back marks every mirror of the source stale,
     * this one included; this one alone matches the source afterwards */
    st = record_copy(cs, rp__mirror_ref(m), tab[m].src, RP_NO_EVENT);
    if (!st)
      cs->mvalid[m] = WRITTEN_BACK;
  }
  for (uint32_t i = 0; i < op->nacc; i++)
    if (mir[i] != NO_MIRROR && cs->mvalid[mir[i]] == WRITTEN_BACK)
      cs->mvalid[mir[i]] = FRESH;
  return st;
}

rp_status rp__record_task(rp_capture_state *cs, const rp_gop *op, rp_event wait,
                          rp_event *ref) {
  rp_graph *g = cs->graph;
  if (g->no_copy_insertion || !op->nacc)
    return rp__record_op(cs, op, wait, ref);
  rp_mem *mem = malloc(sizeof *mem * op->nacc);
  uint32_t *mir = malloc(sizeof *mir * op->nacc);
  rp_access *acc = malloc(sizeof *acc * op->nacc);
  int64_t *vol = malloc(sizeof *vol * op->nacc);
  int any = 0;
  rp_status st = mem && mir && acc && vol
                     ? RP_OK
                     : rp__err(RP_ENOMEM, "copy insertion: out of memory");
  if (!st)
    st = plan(cs, op, mem, &any);
  /* a bad wait reference fails before anything is added */
  if (!st && any)
    st = rp__record_check_ref(cs, wait, cs->call ? cs->call : "launch");
  uint32_t nops = g->nops, nmirrors = g->nmirrors;
  for (uint32_t i = 0; !st && any && i < op->nacc; i++) {
    mir[i] = NO_MIRROR;
    if (mem[i] == NO_MEM)
      continue;
    mir[i] = find_mirror(cs, op->acc[i].inst, mem[i]);
    if (mir[i] == NO_MIRROR)
      st = add_mirror(cs, op->acc[i].inst, mem[i], &mir[i]);
  }
  if (!st && any) {
    memcpy(acc, op->acc, sizeof *acc * op->nacc);
    volumes(cs, op, vol);
    st = record_around(cs, op, mir, vol, acc, wait, ref);
  } else if (!st) {
    st = rp__record_op(cs, op, wait, ref);
  }
  /* Nothing recorded: the graph is as it was. Part of it recorded (only
   * on ENOMEM): the analysis cannot take it back, so the capture fails. */
  if (st && g->nops == nops)
    drop_mirrors(cs, nmirrors);
  else if (st)
    rp__capture_fail(cs, st);
  free(mem);
  free(mir);
  free(acc);
  free(vol);
  return st;
}
