/* engine/ops.c — the engine's low-level operations, as Realm's: run a task
 * on a processor, copy bytes; each gated on one precondition event and
 * completing an event of its own. No dependence analysis: the events are
 * the only order.
 *
 * Each op is one allocation (op, gate waiter, instance views, argument
 * bytes) freed by whoever completes it. The gate (engine/gate.c) enqueues
 * the op on its processor once pre completed, so the op's work always
 * starts on that processor's thread (a GPU's driver thread may call CUDA; a
 * CUDA host function that triggered pre may not). rt->ops_outstanding
 * counts the ops not completed, for drain and destroy. */
#include "engine_impl.h"

#include <sched.h>
#include <stddef.h>
#include <string.h>

/* Argument bytes a spawn copies, at most: as launches (RP_MAX_ARGS). */
#define RP_SPAWN_MAX_ARGS (1u << 20)

/* ---------------------------------------------------------------------- */
/* Running a task (shared with eager execution) */

/* rp__task_status; a return that is no rp_status, without words of the
 * task's own (the detail was cleared before it ran), is named. */
static rp_status task_status_named(const rp_task_rec *t, rp_status raw) {
  rp_status st = rp__task_status(raw);
  if (st != raw && !rp_error_detail()[0])
    rp__err(st, "task '%s' returned %d, not an rp_status", t->name, (int)raw);
  return st;
}

rp_status rp__task_invoke(rp_runtime *rt, const rp_task_rec *t,
                          rp_task_ctx *ctx, void (*gpu_done)(void *arg),
                          void *arg, int *queued) {
  *queued = 0;
  int gpu = ctx->kind == RP_PROC_GPU;
  rp_task_fn fn = gpu ? t->gpu_fn : t->cpu_fn;
  if (!fn)
    return rp__err(RP_EPROC, "task '%s' has no %s variant for processor %u",
                   t->name, gpu ? "GPU" : "CPU", ctx->proc);
  rp__nvtx_push(t->name);
  if (gpu) {
    /* Only a device backend registers GPU processors. */
    const rp_device_ops *dev = rt->procs[ctx->proc].be->dev;
    RP_ASSERT(dev);
    ctx->stream = dev->proc_stream(rt, ctx->proc);
    const rp_task_ctx *outer = rp__tl_task;
    rp__tl_task = ctx;
    rp_status st = fn(ctx);
    rp__tl_task = outer;
    rp__nvtx_pop();
    st = task_status_named(t, st);
    /* The task only enqueued work: completion comes from the stream. */
    if (st == RP_OK)
      st = dev->launch_host_func(rt, ctx->stream, gpu_done, arg);
    *queued = st == RP_OK;
    return st;
  }
  const rp_task_ctx *outer = rp__tl_task;
  rp__tl_task = ctx;
  rp_status st = fn(ctx);
  rp__tl_task = outer;
  rp__nvtx_pop();
  return task_status_named(t, st);
}

/* ---------------------------------------------------------------------- */
/* Shared: arming, completion, drain */

/* Frees op, then completes done with st. The count drops last: once it
 * reads 0, no completing thread touches the runtime any more. */
/* why: a failure's detail (NULL: none). */
static void op_complete(rp_runtime *rt, void *op, rp_event done, rp_status st,
                        const char *why) {
  free(op);
  rp__event_complete_why(rt, done, st, why);
  /* release: the op's effects happen before a drain that reads 0 */
  atomic_fetch_sub_explicit(&rt->ops_outstanding, 1, memory_order_release);
}

/* Creates the op's event in *slot and arms its gate (g->work.run set) on
 * proc behind pre. On failure nothing was armed: the op is still the
 * caller's to free. */
static rp_status op_arm(rp_runtime *rt, rp_gate *g, rp_gate_waiter *waiter,
                        rp_proc proc, rp_event pre, rp_event *slot,
                        rp_event *done) {
  rp_status st = rp__event_new(rt, slot);
  if (st)
    return st;
  rp_event ev = *slot; /* the op may be gone once the gate is armed */
  /* relaxed: the decrement comes after this one in the counter's
   * modification order; a drain needs no more */
  atomic_fetch_add_explicit(&rt->ops_outstanding, 1, memory_order_relaxed);
  st = rp__gate_submit(rt, g, proc, &pre, NULL, pre.id ? 1 : 0, waiter);
  if (st) { /* pre went stale after the caller's check: a caller bug */
    atomic_fetch_sub_explicit(&rt->ops_outstanding, 1, memory_order_relaxed);
    rp__event_complete(rt, ev, st);
    rp_event_release(rt, ev);
    return st;
  }
  if (done)
    *done = ev;
  else
    rp_event_release(rt, ev);
  return RP_OK;
}

/* A model of a machine (reprise dump) has no devices and no instance
 * storage: nothing runs there (a GPU processor of it has no stream). */
static rp_status refuse_model(const rp_runtime *rt, const char *call) {
  if (!rp__runtime_is_model(rt))
    return RP_OK;
  return rp__err(RP_EUNSUPPORTED,
                 "%s: a model of a machine (reprise dump) runs nothing", call);
}

static rp_status check_pre(const rp_runtime *rt, rp_event pre,
                           const char *call) {
  if (!rp__event_live(rt, pre))
    return rp__err(RP_ESTALE, "%s: precondition event %#llx is stale", call,
                   (unsigned long long)pre.id);
  return RP_OK;
}

rp_status rp__drain_count(rp_runtime *rt, _Atomic uint64_t *outstanding,
                          const char *what) {
  uint64_t last = UINT64_MAX, since = rp__now_ns();
  for (;;) {
    /* acquire: pairs with the completer's release decrement */
    uint64_t n = atomic_load_explicit(outstanding, memory_order_acquire);
    if (n == 0)
      return RP_OK;
    uint64_t now = rp__now_ns();
    if (n != last) {
      last = n;
      since = now;
    } else if (rp__runtime_destroying(rt) && now - since > 100000000ull) {
      /* Quiet for 100 ms while going down: what still waits can only be
       * waiting for user events nobody will trigger. */
      if (rp__events_cancel_user(rt, RP_EBUSY) == 0 &&
          now - since > 10000000000ull)
        return rp__err(RP_EBUSY,
                       "%llu %s cannot complete: none completed for 10 s "
                       "after the pending user events were poisoned (a "
                       "task that does not return, or ops waiting for "
                       "one); nothing was freed",
                       (unsigned long long)n, what);
    }
    sched_yield();
  }
}

rp_status rp__ops_drain(rp_runtime *rt) {
  return rp__drain_count(rt, &rt->ops_outstanding, "engine ops");
}

/* ---------------------------------------------------------------------- */
/* Task spawn */

typedef struct task_op {
  rp_gate gate; /* first: the gate's work item is the op */
  rp_gate_waiter waiter;
  rp_runtime *rt;
  const rp_task_rec *task;
  rp_event done;
  rp_proc proc;
  uint32_t ninsts;
  size_t args_size;
  rp_instance_info *insts; /* in the same block */
  void *args;              /* in the same block */
} task_op;

/* The stream reached the end of the task's work (a CUDA host thread). */
static void task_gpu_done(void *arg) {
  task_op *op = arg;
  op_complete(op->rt, op, op->done, RP_OK, NULL);
}

/* The gate opened: runs on op->proc's thread. */
static void task_start(rp_work *w) {
  task_op *op = (task_op *)w;
  rp_runtime *rt = op->rt;
  /* The gate's last decrement (acq_rel) published the poison before the
   * queue hand-off that brought the op here. */
  rp_status st = (rp_status)atomic_load(&op->gate.poison);
  if (st == RP_OK) {
    rp_task_ctx ctx = {
        .rt = rt,
        .proc = op->proc,
        .kind = rp__proc(rt, op->proc)->kind,
        .shard = 0,
        .shards = 1,
        .args = op->args_size ? op->args : NULL,
        .args_size = op->args_size,
        .naccess = op->ninsts,
        .insts = op->insts,
        .replay = UINT64_MAX,
    };
    int queued;
    rp_error_set(RP_OK, NULL); /* a failure's detail is the task's own */
    st = rp__task_invoke(rt, op->task, &ctx, task_gpu_done, op, &queued);
    if (queued)
      return; /* task_gpu_done completes it */
    op_complete(rt, op, op->done, st, st ? rp_error_detail() : NULL);
    return;
  }
  char *why = rp__gate_take_why(&op->gate); /* a dependency's */
  op_complete(rt, op, op->done, st, why);
  free(why);
}

static size_t align_up(size_t v, size_t a) {
  return (v + a - 1) & ~(a - 1);
}

static task_op *task_op_alloc(uint32_t ninsts, size_t args_size) {
  size_t off_i = align_up(sizeof(task_op), 16);
  size_t off_a = off_i + align_up(sizeof(rp_instance_info) * ninsts, 16);
  char *b = malloc(off_a + (args_size ? args_size : 1));
  if (!b)
    return NULL;
  task_op *op = (task_op *)(void *)b;
  memset(op, 0, sizeof *op);
  op->insts = (rp_instance_info *)(void *)(b + off_i);
  op->args = b + off_a;
  return op;
}

/* Everything about s that needs no storage. */
static rp_status check_spawn(rp_runtime *rt, const rp_task_spawn *s,
                             const rp_task_rec **task) {
  const rp_proc_info *pi = rp__proc(rt, s->proc);
  if (!pi)
    return rp__err(RP_EPROC,
                   "rp__spawn_task: processor %u out of range "
                   "(runtime has %u)",
                   s->proc, rt->nprocs);
  const rp_task_rec *t = rp__task_get(rt, s->task);
  if (!t)
    return rp__err(RP_ENOTASK,
                   "rp__spawn_task: task id %u is not "
                   "registered",
                   s->task);
  if (pi->kind == RP_PROC_GPU ? !t->gpu_fn : !t->cpu_fn)
    return rp__err(RP_EPROC,
                   "rp__spawn_task: task '%s' has no %s variant "
                   "for processor %u",
                   t->name, pi->kind == RP_PROC_GPU ? "GPU" : "CPU", s->proc);
  if (s->args_size && !s->args)
    return rp__err(RP_EINVAL,
                   "rp__spawn_task: task '%s': %zu argument "
                   "bytes, NULL args",
                   t->name, s->args_size);
  if (s->args_size > RP_SPAWN_MAX_ARGS)
    return rp__err(RP_ERANGE,
                   "rp__spawn_task: task '%s': %zu argument "
                   "bytes (max %u)",
                   t->name, s->args_size, RP_SPAWN_MAX_ARGS);
  if (s->ninsts && !s->insts)
    return rp__err(RP_EINVAL,
                   "rp__spawn_task: task '%s': %u instances, "
                   "NULL array",
                   t->name, s->ninsts);
  *task = t;
  return RP_OK;
}

/* Resolves the instances into op->insts: live and reachable from proc. */
static rp_status fill_insts(rp_runtime *rt, task_op *op,
                            const rp_task_spawn *s) {
  for (uint32_t i = 0; i < s->ninsts; i++) {
    rp_inst_view v;
    rp_status st = rp__inst_view(rt, s->insts[i], &v);
    if (st)
      return rp__err_prefix(
          st, "rp__spawn_task: task '%s': instance %u: ", op->task->name, i);
    if (!rp_proc_can_access(rt, s->proc, v.info.mem))
      return rp__err(RP_EACCESS,
                     "rp__spawn_task: task '%s': instance %u "
                     "(%#llx) in memory %u is not accessible from "
                     "processor %u",
                     op->task->name, i, (unsigned long long)s->insts[i].id,
                     v.info.mem, s->proc);
    op->insts[i] = v.info;
  }
  return RP_OK;
}

rp_status rp__spawn_task(rp_runtime *rt, const rp_task_spawn *s, rp_event pre,
                         rp_event *done) {
  if (!rt || !s)
    return rp__err(RP_EINVAL, "rp__spawn_task: NULL %s",
                   rt ? "spawn" : "runtime");
  rp_status st = rp__runtime_check(rt);
  const rp_task_rec *t = NULL;
  if (!st)
    st = refuse_model(rt, "rp__spawn_task");
  if (!st)
    st = check_spawn(rt, s, &t);
  if (!st)
    st = check_pre(rt, pre, "rp__spawn_task");
  if (st)
    return st;
  task_op *op = task_op_alloc(s->ninsts, s->args_size);
  if (!op)
    return rp__err(RP_ENOMEM, "rp__spawn_task: task '%s': out of memory",
                   t->name);
  op->rt = rt;
  op->task = t;
  op->proc = s->proc;
  op->ninsts = s->ninsts;
  op->args_size = s->args_size;
  if (s->args_size)
    memcpy(op->args, s->args, s->args_size);
  st = fill_insts(rt, op, s);
  op->gate.work.run = task_start;
  if (!st)
    st = op_arm(rt, &op->gate, &op->waiter, s->proc, pre, &op->done, done);
  if (st)
    free(op);
  return st;
}

/* ---------------------------------------------------------------------- */
/* Byte copies */

typedef struct copy_op {
  rp_gate gate; /* first: the gate's work item is the op */
  rp_gate_waiter waiter;
  rp_copy_async cp; /* what the backend copies */
  rp_work fin;      /* cp.done: completes the op */
  rp_runtime *rt;
  rp_event done;
  rp_proc where;
} copy_op;

/* The bytes landed: on the worker (CPU) or a CUDA host thread (GPU). */
static void copy_fin(rp_work *w) {
  copy_op *op = (copy_op *)(void *)((char *)w - offsetof(copy_op, fin));
  op_complete(op->rt, op, op->done, RP_OK, NULL);
}

/* The gate opened: runs on op->where's thread. On a CPU worker the
 * backend queues the copy once more, behind what this worker has queued
 * since: one contract (callable from any thread but a CUDA host function)
 * for both backends, at the price of a second hop. */
static void copy_start(rp_work *w) {
  copy_op *op = (copy_op *)w;
  rp_runtime *rt = op->rt;
  /* published by the gate's last decrement, as in task_start */
  rp_status st = (rp_status)atomic_load(&op->gate.poison);
  if (st == RP_OK) {
    const rp_proc_rec *p = &rt->procs[op->where];
    st = p->be->copy_async(rp__proc_backend_state(rt, op->where), p, &op->cp);
    if (st == RP_OK)
      return; /* copy_fin completes it */
    op_complete(rt, op, op->done, st, rp_error_detail());
    return;
  }
  char *why = rp__gate_take_why(&op->gate); /* a dependency's */
  op_complete(rt, op, op->done, st, why);
  free(why);
}

/* Bytes spanned by rows rows pitch apart, the last row_bytes long. */
static rp_status copy_extent(const void *base, size_t rows, size_t row_bytes,
                             size_t pitch, const char *side, size_t *ext) {
  size_t span;
  if (!rp__mul_ok(rows - 1, pitch, &span) ||
      !rp__add_ok(span, row_bytes, ext) || (uintptr_t)base > UINTPTR_MAX - *ext)
    return rp__err(RP_ERANGE,
                   "rp__spawn_copy: %s: %zu rows of %zu bytes, "
                   "pitch %zu, overflow the address space",
                   side, rows, row_bytes, pitch);
  return RP_OK;
}

static rp_status check_mem(const rp_runtime *rt, rp_mem m, rp_proc where,
                           const char *side) {
  if (m >= rt->nmems)
    return rp__err(RP_EINVAL,
                   "rp__spawn_copy: %s memory %u out of range "
                   "(runtime has %u)",
                   side, m, rt->nmems);
  if (rt->procs[where].info.kind == RP_PROC_CPU &&
      !rp__mem_host_addressable(rt, m))
    return rp__err(RP_EACCESS,
                   "rp__spawn_copy: %s memory %u is not "
                   "addressable from CPU worker %u",
                   side, m, where);
  return RP_OK;
}

/* Checks c and fills the backend's request (pitches resolved). */
static rp_status check_copy(const rp_runtime *rt, const rp_copy_bytes *c,
                            rp_proc where, rp_copy_async *cp) {
  if (where >= rt->nprocs)
    return rp__err(RP_EPROC,
                   "rp__spawn_copy: processor %u out of range "
                   "(runtime has %u)",
                   where, rt->nprocs);
  if (!c->dst || !c->src)
    return rp__err(RP_EINVAL, "rp__spawn_copy: NULL %s pointer",
                   c->dst ? "src" : "dst");
  if (!c->rows || !c->row_bytes)
    return rp__err(RP_EINVAL,
                   "rp__spawn_copy: %zu rows of %zu bytes: "
                   "nothing to copy",
                   c->rows, c->row_bytes);
  size_t dp = c->dst_pitch ? c->dst_pitch : c->row_bytes;
  size_t sp = c->src_pitch ? c->src_pitch : c->row_bytes;
  if (dp < c->row_bytes || sp < c->row_bytes)
    return rp__err(RP_EINVAL,
                   "rp__spawn_copy: %s_pitch %zu is below "
                   "row_bytes %zu",
                   dp < c->row_bytes ? "dst" : "src",
                   dp < c->row_bytes ? dp : sp, c->row_bytes);
  size_t dext = 0, sext = 0;
  rp_status st = copy_extent(c->dst, c->rows, c->row_bytes, dp, "dst", &dext);
  if (!st)
    st = copy_extent(c->src, c->rows, c->row_bytes, sp, "src", &sext);
  if (!st)
    st = check_mem(rt, c->dst_mem, where, "dst");
  if (!st)
    st = check_mem(rt, c->src_mem, where, "src");
  if (st)
    return st;
  uintptr_t d = (uintptr_t)c->dst, s = (uintptr_t)c->src;
  if (d < s + sext && s < d + dext)
    return rp__err(RP_EINVAL,
                   "rp__spawn_copy: destination [%p, +%zu) "
                   "overlaps source [%p, +%zu)",
                   c->dst, dext, c->src, sext);
  if (!rt->procs[where].be->copy_async)
    return rp__err(RP_EUNSUPPORTED,
                   "rp__spawn_copy: backend %s cannot "
                   "copy",
                   rt->procs[where].be->name);
  *cp = (rp_copy_async){.dst = c->dst,
                        .src = c->src,
                        .rows = c->rows,
                        .row_bytes = c->row_bytes,
                        .dpitch = dp,
                        .spitch = sp};
  return RP_OK;
}

rp_status rp__spawn_copy(rp_runtime *rt, const rp_copy_bytes *c, rp_proc where,
                         rp_event pre, rp_event *done) {
  if (!rt || !c)
    return rp__err(RP_EINVAL, "rp__spawn_copy: NULL %s",
                   rt ? "copy" : "runtime");
  rp_copy_async cp;
  rp_status st = rp__runtime_check(rt);
  if (!st)
    st = refuse_model(rt, "rp__spawn_copy");
  if (!st)
    st = check_copy(rt, c, where, &cp);
  if (!st)
    st = check_pre(rt, pre, "rp__spawn_copy");
  if (st)
    return st;
  copy_op *op = rp__calloc(1, sizeof *op);
  if (!op)
    return rp__err(RP_ENOMEM, "rp__spawn_copy: out of memory");
  op->rt = rt;
  op->where = where;
  op->cp = cp;
  op->cp.done = &op->fin;
  op->fin.run = copy_fin;
  op->gate.work.run = copy_start;
  st = op_arm(rt, &op->gate, &op->waiter, where, pre, &op->done, done);
  if (st)
    free(op);
  return st;
}
