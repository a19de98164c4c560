/* capture/eager.c — eager execution of launches: analyse the accesses in
 * program order, then hand the op to the engine gated on its dependencies.
 *
 * One allocation per launch holds the op, its copied arguments, instance
 * views, shard records and gate waiters. The analysis lock serializes
 * launches (program order across threads); completion never takes it. */
#include "capture_impl.h"

#include <string.h>

typedef struct eager_task eager_task;

typedef struct eager_shard {
  rp_work work;
  eager_task *t;
  uint32_t index;
  rp_proc proc;
} eager_shard;

struct eager_task {
  rp_gate gate; /* opens when all dependencies completed */
  rp_capture_state *cs;
  const rp_task_rec *task;
  rp_event done;
  uint8_t epoch;          /* its drain epoch (rp__eager_end) */
  _Atomic uint32_t left;  /* shards not finished */
  _Atomic int32_t status; /* first failure */
  char *why; /* its detail (malloc'd by the shard that set status) */
  void *args;
  size_t args_size;
  rp_instance_info *insts;
  uint32_t naccess;
  char *ws;
  size_t ws_slice; /* a shard's stride in ws: ws_bytes aligned up */
  size_t ws_bytes; /* a shard's workspace as declared (what it is told) */
  rp_mem ws_mem;
  uint32_t nshards;
  eager_shard *shards;
  rp_gate_waiter *waiters;
};

/* ---- completion ---- */

/* why: the failure's detail (NULL: none), kept by the first failure. */
static void finish(eager_task *t, rp_status st, const char *why) {
  if (st != RP_OK) {
    int32_t zero = 0;
    if (atomic_compare_exchange_strong(&t->status, &zero, (int32_t)st) && why &&
        *why)
      t->why = strdup(why); /* read by the last shard, after `left` */
  }
  /* acq_rel: the last shard sees every other shard's status and effects */
  if (atomic_fetch_sub_explicit(&t->left, 1, memory_order_acq_rel) != 1)
    return;
  rp_capture_state *cs = t->cs;
  rp_runtime *rt = cs->rt;
  rp_event done = t->done;
  uint8_t epoch = t->epoch;
  rp_status fin = (rp_status)atomic_load(&t->status);
  char *fin_why = t->why;
  if (t->ws)
    rp__mem_free(rt, t->ws_mem, t->ws);
  free(t);
  rp__event_complete_why(rt, done, fin, fin_why);
  free(fin_why);
  rp__eager_op_done(cs, epoch);
}

/* Runs on a CUDA callback thread once the stream reached it: completes the
 * op (no CUDA call happens on this path: waiters only enqueue work). */
static void gpu_done(void *arg) {
  finish(arg, RP_OK, NULL);
}

static void run_shard(eager_shard *sh) {
  eager_task *t = sh->t;
  rp_runtime *rt = t->cs->rt;
  const rp_proc_info *pi = rp__proc(rt, sh->proc);
  rp_task_ctx ctx = {
      .rt = rt,
      .proc = sh->proc,
      .kind = pi->kind,
      .shard = sh->index,
      .shards = t->nshards,
      .args = t->args,
      .args_size = t->args_size,
      .naccess = t->naccess,
      .insts = t->insts,
      .workspace = t->ws ? t->ws + sh->index * t->ws_slice : NULL,
      .workspace_bytes = t->ws ? t->ws_bytes : 0,
      .replay = UINT64_MAX,
  };
  /* A GPU shard only enqueues work: gpu_done completes it from the
   * stream. */
  int queued;
  rp_error_set(RP_OK, NULL); /* a failure's detail is the task's own */
  rp_status st = rp__task_invoke(rt, t->task, &ctx, gpu_done, t, &queued);
  if (!queued)
    finish(t, st, st ? rp_error_detail() : NULL);
}

static void shard_work(rp_work *w) {
  run_shard((eager_shard *)w);
}

/* The gate opened on shard 0's processor: fan the other shards out. */
static void start(rp_work *w) {
  eager_task *t = (eager_task *)w;
  rp_status pre = (rp_status)atomic_load(&t->gate.poison);
  if (pre != RP_OK) {
    /* A dependency failed: skip the work, pass its status on. */
    atomic_store(&t->left, 1);
    char *why = rp__gate_take_why(&t->gate);
    /* a task with an eager_skipped hook may say why in its own words (a
     * communication op: the runtime's communication failed earlier) */
    char own[768] = "";
    const rp_task_ext *x = t->task ? t->task->ext : NULL;
    if (x && x->eager_skipped)
      x->eager_skipped(t->cs->rt, t->args, t->args_size, pre, why, own,
                       sizeof own);
    finish(t, pre, own[0] ? own : why);
    free(why);
    return;
  }
  for (uint32_t i = 1; i < t->nshards; i++)
    rp__proc_enqueue(t->cs->rt, t->shards[i].proc, &t->shards[i].work);
  run_shard(&t->shards[0]);
}

/* ---- launch ---- */

static void tok_retain(void *arg, rp_dep_token t, uint32_t n) {
  rp__event_retain_n(arg, (rp_event){t.id}, n);
}
static void tok_release(void *arg, rp_dep_token t) {
  rp__event_unref(arg, (rp_event){t.id}); /* the analysis' own reference */
}
/* Completed successfully: nothing to wait for, and the analysis may drop
 * it. A poisoned event stays, so every later dependent still inherits its
 * status. */
static int tok_done(void *arg, rp_dep_token t) {
  return rp__event_peek(arg, (rp_event){t.id}) == RP_OK;
}

rp_dep_hooks rp__eager_hooks(rp_runtime *rt) {
  return (rp_dep_hooks){tok_retain, tok_release, tok_done, rt};
}

/* RP_PROC_ANY: follow the newest pending dependency (no hand-off when a
 * chain can stay on one worker), else spread round-robin. */
static rp_proc pick_cpu(rp_capture_state *cs, const rp_dep_set *deps) {
  for (uint32_t i = deps->n; i-- > 0;)
    if (rp__event_peek(cs->rt, (rp_event){deps->v[i].id}) == RP_EAGAIN &&
        deps->v[i].proc < rp__cpu_workers(cs->rt))
      return deps->v[i].proc;
  return cs->rr++ % rp__cpu_workers(cs->rt);
}

static size_t align_up(size_t v, size_t a) {
  return (v + a - 1) & ~(a - 1);
}

/* One block: task, shards, waiters, instance views, args. */
static eager_task *task_alloc(uint32_t nshards, uint32_t npre, uint32_t nacc,
                              size_t args_size) {
  size_t off_sh = align_up(sizeof(eager_task), 16);
  size_t off_w = off_sh + align_up(sizeof(eager_shard) * nshards, 16);
  size_t off_i = off_w + align_up(sizeof(rp_gate_waiter) * npre, 16);
  size_t off_a = off_i + align_up(sizeof(rp_instance_info) * nacc, 16);
  char *b = malloc(off_a + (args_size ? args_size : 1));
  if (!b)
    return NULL;
  eager_task *t = (eager_task *)(void *)b;
  memset(t, 0, sizeof *t);
  t->shards = (eager_shard *)(void *)(b + off_sh);
  t->waiters = (rp_gate_waiter *)(void *)(b + off_w);
  t->insts = (rp_instance_info *)(void *)(b + off_i);
  t->args = b + off_a;
  return t;
}

static rp_status fill_task(rp_capture_state *cs, eager_task *t,
                           const rp_launch *l, rp_proc proc0) {
  rp_runtime *rt = cs->rt;
  t->cs = cs;
  t->task = rp__task_get(rt, l->task);
  t->nshards = l->shards > 1 ? l->shards : 1;
  t->naccess = l->naccess;
  t->args_size = l->args_size;
  if (l->args_size)
    memcpy(t->args, l->args, l->args_size);
  for (uint32_t i = 0; i < l->naccess; i++) {
    rp_inst_view v;
    rp_status st = rp__inst_view(rt, l->accesses[i].inst, &v);
    if (st)
      return st;
    t->insts[i] = v.info;
  }
  for (uint32_t i = 0; i < t->nshards; i++) {
    eager_shard *sh = &t->shards[i];
    sh->work.run = shard_work;
    sh->t = t;
    sh->index = i;
    /* RP_PROC_ANY, alone or as a shard's entry: shard 0 on proc0, the
     * others round the CPU workers from there */
    rp_proc want = l->shard_procs ? l->shard_procs[i] : RP_PROC_ANY;
    sh->proc = want != RP_PROC_ANY ? want
               : i == 0            ? proc0
                                   : (proc0 + i) % rp__cpu_workers(rt);
  }
  if (l->workspace_bytes) {
    size_t align = l->workspace_align ? l->workspace_align : 64;
    t->ws_mem = rp__proc(rt, t->shards[0].proc)->local;
    /* one block for every shard's slice: every shard must address it */
    for (uint32_t i = 1; i < t->nshards; i++) {
      rp_mem m = rp__proc(rt, t->shards[i].proc)->local;
      if (m != t->ws_mem)
        return rp__err(RP_EUNSUPPORTED,
                       "rp_launch_task: task '%s': an eager SPMD workspace "
                       "lies in one memory, and shard %u's processor %u has "
                       "memory %u, shard 0's memory %u (record the launch: "
                       "a replay gives each GPU shard a workspace of its "
                       "own)",
                       t->task ? t->task->name : "?", i, t->shards[i].proc, m,
                       t->ws_mem);
    }
    size_t total;
    if (!rp__align_up_ok(l->workspace_bytes, align, &t->ws_slice) ||
        !rp__mul_ok(t->ws_slice, t->nshards, &total))
      return rp__err(RP_ERANGE,
                     "rp_launch_task: task '%s': workspace of %u x %zu bytes "
                     "(aligned to %zu) overflows",
                     t->task ? t->task->name : "?", t->nshards,
                     l->workspace_bytes, align);
    void *ws;
    rp_status st = rp__mem_alloc(rt, t->ws_mem, total, align, &ws);
    if (st)
      return rp__err_prefix(st,
                            "rp_launch_task: task '%s': workspace of %u x %zu "
                            "bytes: ",
                            t->task ? t->task->name : "?", t->nshards,
                            l->workspace_bytes);
    t->ws = ws;
    t->ws_bytes = l->workspace_bytes;
  }
  atomic_init(&t->left, t->nshards);
  atomic_init(&t->status, 0);
  t->gate.work.run = start;
  return RP_OK;
}

/* ---- the issue protocol shared by tasks and copies ---- */

rp_status rp__eager_begin(rp_capture_state *cs, const rp_access *acc,
                          uint32_t nacc, int copy, rp_event wait,
                          uint32_t *npre, rp_proc *hint) {
  pthread_mutex_lock(&cs->lock);
  rp_dep_set *deps = &cs->scratch; /* reused storage */
  rp__depset_clear(deps);
  /* room for the commit in rp__eager_end first (pruning completed tokens,
   * which only here, before the dependences are taken, may go): once the
   * op is armed it may run, so the commit must not fail (the launch would
   * report an error for an op that runs, its accesses half recorded) */
  rp_status st = rp__analysis_reserve(&cs->eager, acc, nacc);
  if (!st)
    st = rp__analysis_deps(&cs->eager, acc, nacc, copy, deps);
  if (!st && wait.id)
    st = rp__depset_add(deps, (rp_dep_token){wait.id, UINT32_MAX, 0});
  if (!st && (!rp__grow((void **)&cs->evs, &cs->evs_cap, deps->n + 1,
                        sizeof *cs->evs) ||
              !rp__grow((void **)&cs->ord, &cs->ord_cap, deps->n + 1,
                        sizeof *cs->ord)))
    st = rp__err(RP_ENOMEM, "launch: out of memory");
  if (st) {
    pthread_mutex_unlock(&cs->lock);
    return st;
  }
  *npre = deps->n;
  *hint = pick_cpu(cs, deps);
  return RP_OK;
}

void rp__eager_abort(rp_capture_state *cs) {
  pthread_mutex_unlock(&cs->lock);
}

rp_status rp__eager_end(rp_capture_state *cs, rp_gate *gate, rp_proc proc,
                        rp_gate_waiter *waiters, const rp_access *acc,
                        uint32_t nacc, int copy, rp_event *done_slot,
                        uint8_t *epoch_slot, rp_event *done, int *armed) {
  rp_runtime *rt = cs->rt;
  *armed = 0;
  const rp_dep_set *deps = &cs->scratch;
  rp_status st = rp__event_new(rt, done_slot);
  if (st) {
    pthread_mutex_unlock(&cs->lock);
    return rp__err_prefix(st, copy ? "rp_launch_copy: " : "rp_launch_task: ");
  }
  for (uint32_t i = 0; i < deps->n; i++) {
    cs->evs[i].id = deps->v[i].id;
    cs->ord[i] = deps->v[i].order != 0;
  }
  rp_event ev = *done_slot; /* the op may be freed once the gate is armed */
  uint8_t epoch = (uint8_t)(cs->epoch & 1); /* under lock, as drains flip it */
  *epoch_slot = epoch;
  atomic_fetch_add_explicit(&cs->outstanding[epoch], 1, memory_order_relaxed);
  st = rp__gate_submit(rt, gate, proc, cs->evs, cs->ord, deps->n, waiters);
  if (st) {
    atomic_fetch_sub(&cs->outstanding[epoch], 1);
    rp__event_complete(rt, ev, st);
    rp_event_release(rt, ev);
    pthread_mutex_unlock(&cs->lock);
    return st;
  }
  *armed = 1;
  st = rp__analysis_commit(&cs->eager, acc, nacc, copy,
                           (rp_dep_token){ev.id, proc, 0});
  pthread_mutex_unlock(&cs->lock);
  if (done)
    *done = ev;
  else
    rp_event_release(rt, ev);
  return st;
}

void rp__eager_op_done(rp_capture_state *cs, uint8_t epoch) {
  /* release: everything the op did happens before a drain returns */
  atomic_fetch_sub_explicit(&cs->outstanding[epoch], 1, memory_order_release);
}

rp_status rp__eager_task(rp_capture_state *cs, const rp_launch *l,
                         rp_event *done) {
  uint32_t npre;
  rp_proc hint;
  rp_status st =
      rp__eager_begin(cs, l->accesses, l->naccess, 0, l->wait, &npre, &hint);
  if (st)
    return st;
  rp_proc proc0 = l->shard_procs && l->shard_procs[0] != RP_PROC_ANY
                      ? l->shard_procs[0]
                  : l->shard_procs || l->proc == RP_PROC_ANY ? hint
                                                             : l->proc;
  uint32_t nshards = l->shards > 1 ? l->shards : 1;
  eager_task *t = task_alloc(nshards, npre, l->naccess, l->args_size);
  st = t ? fill_task(cs, t, l, proc0)
         : rp__err(RP_ENOMEM, "launch: out of memory");
  if (st) {
    rp__eager_abort(cs);
    if (t && t->ws)
      rp__mem_free(cs->rt, t->ws_mem, t->ws);
    free(t);
    return st;
  }
  rp_mem ws_mem = t->ws_mem;
  char *ws = t->ws;
  int armed;
  st = rp__eager_end(cs, &t->gate, proc0, t->waiters, l->accesses, l->naccess,
                     0, &t->done, &t->epoch, done, &armed);
  if (!armed) { /* the op never became visible: it is still ours */
    if (ws)
      rp__mem_free(cs->rt, ws_mem, ws);
    free(t);
  }
  return st;
}
