/* capture/launch.c — the launch API users call: validation, then eager
 * execution or recording depending on the capture mode. Also the capture
 * layer's lifetime (state, drain, teardown). */
#include "capture_impl.h"

#include <string.h>

/* ---- layer state ---- */

/* Waits until every eager op launched before the call completed: it starts
 * a new drain epoch and waits for the old one's ops, so ops other threads
 * launch meanwhile (counted in the new epoch) cannot keep it waiting. A
 * drain that failed (the destroy's, giving up on ops that make no
 * progress) left ops in the epoch it closed, which the next flip makes
 * current again: the next drain then waits for both epochs, one after the
 * other. While the runtime is being destroyed it drains until no op is
 * left in either epoch (callbacks and tasks it runs may still launch), and
 * user events nobody triggered are poisoned after a quiet period, so ops
 * gated on them complete instead of hanging the teardown. */
static rp_status capture_drain(rp_runtime *rt, void *arg) {
  rp_capture_state *cs = arg;
  rp_status st = RP_OK;
  pthread_mutex_lock(&cs->drain_lock);
  int rounds = cs->drain_failed ? 2 : 1;
  do {
    pthread_mutex_lock(&cs->lock);
    uint32_t old = cs->epoch++ & 1;
    pthread_mutex_unlock(&cs->lock);
    st = rp__drain_count(rt, &cs->outstanding[old], "eager ops");
  } while (!st && (--rounds > 0 || (rp__runtime_destroying(rt) &&
                                    (atomic_load(&cs->outstanding[0]) ||
                                     atomic_load(&cs->outstanding[1])))));
  cs->drain_failed = st != RP_OK;
  pthread_mutex_unlock(&cs->drain_lock);
  return st;
}

/* Tests: the room of inst's eager dependence sets (rp__analysis_room). */
uint32_t rp__eager_room(rp_runtime *rt, rp_inst inst) {
  rp_capture_state *cs = rp__capture_state(rt);
  if (!cs)
    return 0;
  pthread_mutex_lock(&cs->lock);
  uint32_t n = rp__analysis_room(&cs->eager, inst);
  pthread_mutex_unlock(&cs->lock);
  return n;
}

static void capture_dtor(rp_runtime *rt, void *arg) {
  RP_UNUSED(rt);
  rp_capture_state *cs = arg;
  rp__analysis_fini(&cs->eager);
  if (atomic_load(&cs->recording)) {
    rp__graph_discard(cs->graph);
    rp__analysis_fini(&cs->rec);
    rp__insert_reset(cs);
  }
  rp__depset_free(&cs->scratch);
  free(cs->evs);
  free(cs->ord);
  pthread_mutex_destroy(&cs->lock);
  pthread_mutex_destroy(&cs->drain_lock);
  free(cs);
}

/* Before an instance is freed or reallocated: wait for eager ops that
 * touch it, so no task writes into freed memory. From a completion
 * callback, or a task of rt, an op still pending is RP_EBUSY instead (it
 * may be queued behind the callback or task on its worker, or wait for
 * the task). The ops' own results do not matter: finished, they no longer
 * touch the instance. */
static rp_status inst_release(rp_runtime *rt, void *arg, rp_inst inst,
                              const char *what) {
  rp_capture_state *cs = arg;
  rp_dep_set toks = {0};
  pthread_mutex_lock(&cs->lock);
  /* out of memory listing them: the call fails, changing nothing (a
   * partial list would let it free storage a pending op still uses) */
  rp_status st = rp__analysis_tokens(&cs->eager, inst, &toks);
  for (uint32_t i = 0; !st && i < toks.n; i++)
    rp__event_retain(rt, (rp_event){toks.v[i].id});
  pthread_mutex_unlock(&cs->lock);
  if (st) {
    rp__depset_free(&toks);
    return rp__err_prefix(st,
                          "%s: listing the eager ops that use the "
                          "instance: ",
                          what);
  }
  int in_task = rp__tl_task && rp__tl_task->rt == rt;
  for (uint32_t i = 0; i < toks.n; i++) {
    rp_event e = {toks.v[i].id};
    if (!st && (rp__tl_in_callback || in_task) &&
        rp__event_peek(rt, e) == RP_EAGAIN)
      st = rp__tl_in_callback
               ? rp__refuse_in_callback(what)
               : rp__err(RP_EBUSY,
                         "%s: an eager op that uses the instance is "
                         "pending, and a running task does not wait for "
                         "it (it may wait for the task, or be queued behind "
                         "it on its worker): nothing was changed",
                         what);
    if (!st)
      (void)rp__event_block(rt, e);
    rp__event_unref(rt, e); /* the reference taken above */
  }
  rp__depset_free(&toks);
  return st;
}

static void install_hooks(rp_runtime *rt, void *cs) {
  rp__set_inst_release_hook(rt, inst_release, cs);
}

rp_capture_state *rp__capture_state(rp_runtime *rt) {
  rp_capture_state *cs = rp__layer_get(rt, RP_LAYER_CAPTURE);
  if (cs)
    return cs;
  cs = rp__calloc(1, sizeof *cs);
  if (!cs)
    return NULL;
  cs->rt = rt;
  pthread_mutex_init(&cs->lock, NULL);
  pthread_mutex_init(&cs->drain_lock, NULL);
  rp__analysis_init(&cs->eager, rp__eager_hooks(rt));
  /* the release hook is set before another thread can launch through cs:
   * an instance free then always waits for cs's eager ops */
  rp_capture_state *won = rp__layer_set(rt, RP_LAYER_CAPTURE, cs, capture_dtor,
                                        capture_drain, install_hooks);
  if (won != cs) {
    pthread_mutex_destroy(&cs->lock);
    pthread_mutex_destroy(&cs->drain_lock);
    free(cs);
  }
  return won;
}

const char *rp__capture_borrower(void) {
  return rp__tl_in_callback ? "an event's callback"
         : rp__tl_task      ? "a running task"
                            : NULL;
}

int rp__capture_owner(const rp_capture_state *cs) {
  /* acquire: pairs with rp_capture_begin's release, so owner is set */
  if (!atomic_load_explicit(&cs->recording, memory_order_acquire))
    return 0;
  /* a callback run on the capturing thread (its rp_event_trigger, say)
   * is no part of the capture's program: as on any other thread, its
   * launches are refused, not recorded */
  return atomic_load_explicit(&cs->owner, memory_order_relaxed) ==
                     rp__thread_token() &&
                 !rp__capture_borrower()
             ? 1
             : -1;
}

const void *rp__thread_token(void) {
  static _Thread_local char token;
  return &token;
}

rp_status rp__capture_mode(rp_capture_state *cs, int *recording) {
  int who = rp__capture_owner(cs);
  *recording = who == 1;
  if (who < 0 && rp__capture_borrower() &&
      atomic_load_explicit(&cs->owner, memory_order_relaxed) ==
          rp__thread_token())
    return rp__err(RP_ECAPTURE,
                   "called from %s on the thread that is capturing on this "
                   "runtime: it is no part of the capture, and launches "
                   "other than the capture's are refused until it ends",
                   rp__capture_borrower());
  if (who < 0)
    return rp__err(RP_ECAPTURE, "another thread is capturing on this runtime; "
                                "launches from other threads are refused "
                                "until it ends");
  return RP_OK;
}

/* ---- validation ---- */

static int is_ref(rp_event e) {
  return (e.id & RP_REF_BIT) != 0;
}

static rp_status check_proc(rp_runtime *rt, const rp_task_rec *t, rp_proc p,
                            const char *what) {
  const rp_proc_info *pi = rp__proc(rt, p);
  if (!pi)
    return rp__err(RP_EPROC, "%s: processor %u out of range (runtime has %u)",
                   what, p, rp_proc_count(rt));
  if (pi->kind == RP_PROC_GPU ? !t->gpu_fn : !t->cpu_fn)
    return rp__err(RP_EPROC,
                   "%s: task '%s' has no %s variant for processor "
                   "%u",
                   what, t->name, pi->kind == RP_PROC_GPU ? "GPU" : "CPU", p);
  return RP_OK;
}

static rp_status check_access_reach(rp_runtime *rt, const rp_launch *l,
                                    rp_proc p, const char *name) {
  for (uint32_t i = 0; i < l->naccess; i++) {
    rp_mem mem = 0;
    rp__inst_mem(rt, l->accesses[i].inst, &mem);
    if (!rp_proc_can_access(rt, p, mem))
      return rp__err(RP_EACCESS,
                     "task '%s': access %u: instance %#llx in "
                     "memory %u is not accessible from processor %u",
                     name, i, (unsigned long long)l->accesses[i].inst.id, mem,
                     p);
  }
  return RP_OK;
}

rp_status rp__check_interps(const rp_launch *l, const char *name,
                            uint32_t first) {
  if (l->ninterp && !l->interps)
    return rp__err(RP_EINVAL, "task '%s': %u interpolations, NULL array", name,
                   l->ninterp);
  for (uint32_t k = 0; k < l->ninterp; k++) {
    const rp_interp *ip = &l->interps[k];
    uint32_t i = first + k; /* the op's numbering */
    size_t src_end;
    if (!rp__add_ok(ip->src_offset, ip->bytes, &src_end) ||
        src_end > RP_MAX_REPLAY_ARGS)
      return rp__err(RP_ERANGE,
                     "task '%s': interpolation %u reads replay argument "
                     "bytes [%zu, +%zu), past the largest replay argument "
                     "block (%u bytes, RP_MAX_REPLAY_ARGS)",
                     name, i, ip->src_offset, ip->bytes, RP_MAX_REPLAY_ARGS);
    if (ip->dst_offset == RP_INTERP_SHARDS) {
      if (ip->bytes != sizeof(uint32_t) || l->shards < 2)
        return rp__err(RP_EINVAL,
                       "task '%s': interpolation %u targets the "
                       "shard count: needs 4 bytes and an SPMD launch",
                       name, i);
      continue;
    }
    size_t end;
    if (!ip->bytes)
      return rp__err(RP_ERANGE,
                     "task '%s': interpolation %u writes 0 bytes (an "
                     "interpolation writes at least one)",
                     name, i);
    if (!rp__add_ok(ip->dst_offset, ip->bytes, &end) || end > l->args_size)
      return rp__err(RP_ERANGE,
                     "task '%s': interpolation %u writes bytes "
                     "[%zu, +%zu) outside the %zu argument bytes",
                     name, i, ip->dst_offset, ip->bytes, l->args_size);
  }
  return RP_OK;
}

rp_status rp__check_launch(rp_runtime *rt, const rp_launch *l, int recorded) {
  const rp_task_rec *t = rp__task_get(rt, l->task);
  if (!t)
    return rp__err(RP_ENOTASK, "task id %u is not registered", l->task);
  const char *name = t->name;
  if (l->args_size && !l->args)
    return rp__err(RP_EINVAL, "task '%s': %zu argument bytes, NULL args", name,
                   l->args_size);
  if (l->args_size > RP_MAX_ARGS)
    return rp__err(RP_ERANGE, "task '%s': %zu argument bytes (max %u)", name,
                   l->args_size, RP_MAX_ARGS);
  if (l->workspace_align & (l->workspace_align - 1))
    return rp__err(RP_EINVAL,
                   "task '%s': workspace alignment %zu is not a "
                   "power of two",
                   name, l->workspace_align);
  if (l->workspace_align > RP_MAX_WORKSPACE_ALIGN)
    return rp__err(RP_ERANGE, "task '%s': workspace alignment %zu (max %zu)",
                   name, l->workspace_align, RP_MAX_WORKSPACE_ALIGN);
  rp_status st = rp__check_accesses(rt, l->accesses, l->naccess, name);
  if (st)
    return st;
  uint32_t n = l->shards > 1 ? l->shards : 1;
  if (n > RP_MAX_SHARDS)
    return rp__err(RP_ERANGE, "task '%s': %u shards (max %u)", name, n,
                   RP_MAX_SHARDS);
  /* the workspace every path allocates: the shards' slices, each aligned
   * (eager launches and instantiate round it alike) */
  size_t ws_align = l->workspace_align ? l->workspace_align : 64, slice, total;
  if (l->workspace_bytes &&
      (!rp__align_up_ok(l->workspace_bytes, ws_align, &slice) ||
       !rp__mul_ok(slice, n, &total)))
    return rp__err(RP_ERANGE,
                   "task '%s': workspace of %u x %zu bytes (aligned to %zu) "
                   "overflows",
                   name, n, l->workspace_bytes, ws_align);
  /* Without shard_procs the engine places an SPMD launch's shards on CPU
   * workers (shard 0 eagerly on proc when one is named): a GPU there would
   * get a CPU placement at instantiate (no CPU body to call). */
  if (n > 1 && !l->shard_procs && l->proc != RP_PROC_ANY) {
    const rp_proc_info *pi = rp__proc(rt, l->proc);
    if (pi && pi->kind == RP_PROC_GPU)
      return rp__err(RP_EPROC,
                     "task '%s': an SPMD launch without shard_procs runs its "
                     "%u shards on CPU workers, and processor %u is a GPU "
                     "(name each shard's processor in shard_procs)",
                     name, n, l->proc);
  }
  for (uint32_t i = 0; i < n; i++) {
    rp_proc p = l->shard_procs ? l->shard_procs[i] : l->proc;
    if (p == RP_PROC_ANY) {
      if (!t->cpu_fn)
        return rp__err(RP_EPROC,
                       "task '%s' has no CPU variant, so it cannot "
                       "run on RP_PROC_ANY",
                       name);
      continue;
    }
    if (l->shard_procs) { /* the shard named: "add: shard_procs[2]" */
      char what[RP_NAME_MAX + 40];
      snprintf(what, sizeof what, "%s: shard_procs[%u]", name, i);
      st = check_proc(rt, t, p, what);
    } else {
      st = check_proc(rt, t, p, name);
    }
    if (st != RP_OK)
      return st;
    /* A recorded launch may get mirror copies instead (copy insertion). */
    if (!recorded && (st = check_access_reach(rt, l, p, name)) != RP_OK)
      return st;
  }
  if (!recorded && l->ninterp)
    return rp__err(RP_EINVAL,
                   "task '%s': interpolations apply to recorded "
                   "launches only",
                   name);
  if ((st = rp__check_interps(l, name, 0)) != RP_OK)
    return st;
  if (t->ext && l->ninterp) /* planned once at instantiate (comm/) */
    return rp__err(RP_EINVAL, INTERP_EXT_REFUSED, name);
  /* a task described by data (the kernels' op descriptors): its declared
   * privileges cover what it does with each access */
  if (t->priv_fn &&
      (st = t->priv_fn(t->priv_arg, l->args, l->args_size, l->accesses,
                       l->naccess, l->interps, l->ninterp)) != RP_OK)
    return st;
  if (!recorded && is_ref(l->wait))
    return rp__err(RP_ECAPTURE,
                   "task '%s': waits on a captured op reference "
                   "outside its capture",
                   name);
  if (!recorded && !rp__event_live(rt, l->wait))
    return rp__err(RP_ESTALE, "task '%s': wait event %#llx is stale", name,
                   (unsigned long long)l->wait.id);
  /* and its args and the accesses' layouts pass the checks its body runs
   * (those an interpolation cannot change): refused here, not in the
   * middle of a replay */
  if (t->launch_fn && (st = t->launch_fn(t->priv_arg, rt, l)) != RP_OK)
    return st;
  return RP_OK;
}

/* ---- public entry points ---- */

/* A model's instances have no storage: it records, it does not run. */
static rp_status model_refuses(const rp_runtime *rt, const char *what) {
  if (!rp__runtime_is_model(rt))
    return RP_OK;
  return rp__err(RP_EUNSUPPORTED,
                 "%s: a model of a machine (reprise dump) runs nothing "
                 "eagerly (record it in a capture instead)",
                 what);
}

rp_status rp__launch_failed(rp_runtime *rt, rp_status st) {
  rp_capture_state *cs = st ? rp__capture_state(rt) : NULL;
  /* rp__capture_mode's test, without its detail (the failure's stays) */
  return rp__launch_leave(cs, cs && rp__capture_owner(cs) == 1, st);
}

rp_status rp__launch_enter(rp_runtime *rt, const void *arg, const char *what,
                           rp_capture_state **cs, int *recording) {
  rp_status cst = rp__rt_check(rt, what);
  if (cst)
    return cst;
  if (!arg) /* each failure from here spends a pending op name */
    return rp__launch_failed(rt, rp__err(RP_EINVAL, "%s: NULL argument", what));
  rp_status st = rp__refuse_in_replay(what);
  if (st)
    return rp__launch_failed(rt, st);
  st = rp__runtime_check(rt);
  if (st)
    return rp__launch_failed(rt, st);
  if (!(*cs = rp__capture_state(rt)))
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  if ((st = rp__capture_mode(*cs, recording)) != RP_OK)
    return rp__err_prefix(st, "%s: ", what);
  if (*recording)
    (*cs)->call = what; /* the recording thread's: its details name it */
  return *recording ? RP_OK : model_refuses(rt, what);
}

rp_status rp__launch_eager_ok(rp_runtime *rt, const char *what) {
  if (!rp__runtime_is_model(rt))
    return RP_OK;
  rp_capture_state *cs = rp__capture_state(rt);
  int rec = 0;
  if (!cs)
    return rp__err(RP_ENOMEM, "%s: out of memory", what);
  rp_status st = rp__capture_mode(cs, &rec);
  return st    ? rp__err_prefix(st, "%s: ", what)
         : rec ? RP_OK
               : model_refuses(rt, what);
}

static rp_status record_task(rp_capture_state *cs, const rp_launch *l,
                             rp_event *done) {
  rp_gop op;
  rp__gop_from_launch(&op, l);
  return rp__record_task(cs, &op, l->wait, done);
}

rp_status rp_launch_task(rp_runtime *rt, const rp_launch *l, rp_event *done) {
  rp_capture_state *cs = NULL;
  int rec = 0;
  rp_status st = rp__launch_enter(rt, l, "rp_launch_task", &cs, &rec);
  if (st)
    return st;
  if ((st = rp__check_launch(rt, l, rec)) != RP_OK)
    return rp__launch_leave(cs, rec, rp__err_as(st, "rp_launch_task: "));
  return rp__launch_leave(
      cs, rec, rec ? record_task(cs, l, done) : rp__eager_task(cs, l, done));
}
