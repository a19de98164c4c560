/* engine/runtime.c — runtime lifetime, backend selection, processors,
 * memories, the task registry, task contexts, layer slots. */
#include "engine_impl.h"
#include "env_rules.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

_Atomic uint32_t rp__runtime_tag_last;
_Thread_local const char **rp__tl_replay_violation;
_Thread_local int rp__tl_in_callback;
_Thread_local const struct rp_task_ctx *rp__tl_task;
int rp__nvtx_on;

const char *rp__contract_why(const char *call) {
  static _Thread_local char buf[160];
  snprintf(buf, sizeof buf,
           "task called %s, which a task may not call inside a replay (a "
           "launch, a wait, or a change to an object)",
           call);
  return buf;
}

/* ---------------------------------------------------------------------- */
/* Chunked tables */

uint32_t rp__ctable_max_chunks = RP_MAX_CHUNKS;

rp_status rp__ctable_init(rp_ctable *t, size_t elem) {
  for (unsigned i = 0; i < RP_MAX_CHUNKS; i++)
    atomic_init(&t->chunks[i], NULL);
  atomic_init(&t->size, 0);
  t->elem = elem;
  return RP_OK;
}

void rp__ctable_fini(rp_ctable *t) {
  for (unsigned i = 0; i < RP_MAX_CHUNKS; i++) {
    free(atomic_load(&t->chunks[i]));
    atomic_store(&t->chunks[i], NULL);
  }
  atomic_store(&t->size, 0);
}

rp_status rp__ctable_reserve(rp_ctable *t, uint32_t i) {
  uint32_t size = atomic_load_explicit(&t->size, memory_order_relaxed);
  while (i >= size) {
    uint32_t c = size >> RP_CHUNK_SHIFT;
    if (c >= rp__ctable_max_chunks || c >= RP_MAX_CHUNKS)
      return RP_ENOMEM;
    void *chunk = rp__calloc(RP_CHUNK_SIZE, t->elem);
    if (!chunk)
      return RP_ENOMEM;
    /* release: the zeroed chunk is visible before the size that covers it */
    atomic_store_explicit(&t->chunks[c], chunk, memory_order_release);
    size += RP_CHUNK_SIZE;
    atomic_store_explicit(&t->size, size, memory_order_release);
  }
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* Processors and memories */

rp_status rp__add_proc(rp_runtime *rt, const rp_proc_info *info,
                       const rp_backend_ops *be, unsigned local, rp_proc *out) {
  if (rt->nprocs >= RP_MAX_PROCS)
    return rp__err(RP_ERANGE, "too many processors (max %d)", RP_MAX_PROCS);
  rp_proc_rec *p = &rt->procs[rt->nprocs];
  p->info = *info;
  p->be = be;
  p->local = local;
  if (out)
    *out = rt->nprocs;
  rt->nprocs++;
  return RP_OK;
}

rp_status rp__add_mem(rp_runtime *rt, const rp_mem_info *info,
                      const rp_backend_ops *be, int host_addressable,
                      rp_mem *out) {
  if (rt->nmems >= RP_MAX_MEMS)
    return rp__err(RP_ERANGE, "too many memories (max %d)", RP_MAX_MEMS);
  rp_mem_rec *m = &rt->mems[rt->nmems];
  m->info = *info;
  m->be = be;
  m->host_addressable = host_addressable;
  if (out)
    *out = rt->nmems;
  rt->nmems++;
  return RP_OK;
}

unsigned rp_proc_count(const rp_runtime *rt) {
  return rp__rt_check(rt, "rp_proc_count") ? 0 : rt->nprocs;
}
unsigned rp_mem_count(const rp_runtime *rt) {
  return rp__rt_check(rt, "rp_mem_count") ? 0 : rt->nmems;
}
unsigned rp__cpu_workers(const rp_runtime *rt) {
  return rt->ncpu;
}

uint64_t rp__host_spin_ns(const rp_runtime *rt) {
  return rt->host_spin_ns;
}

/* The host spin budget (rp_tunables.host_spin_ns): REPRISE_HOST_SPIN_NS,
 * else 20 us when the process may run on more CPUs than the runtime keeps
 * busy (its workers, and the GPU backend's poller thread): the host then
 * has a core of its own and answers a completion in a cache transfer
 * instead of a sched_yield round trip. 0 otherwise. */
static uint64_t host_spin(const rp_runtime *rt) {
  uint64_t set = rp__tunables()->host_spin_ns;
  if (set != UINT64_MAX)
    return set;
  cpu_set_t allowed;
  long cpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0
                  ? CPU_COUNT(&allowed)
                  : sysconf(_SC_NPROCESSORS_ONLN);
  long busy = (long)rt->ncpu + (rt->gpu_state != NULL);
  return cpus > busy ? 20000 : 0;
}

const rp_proc_info *rp__proc(const rp_runtime *rt, rp_proc p) {
  return p < rt->nprocs ? &rt->procs[p].info : NULL;
}

rp_status rp_proc_query(const rp_runtime *rt, rp_proc p, rp_proc_info *out) {
  rp_status cst = rp__rt_check(rt, "rp_proc_query");
  if (cst)
    return cst;
  if (!out)
    return rp__err(RP_EINVAL, "rp_proc_query: NULL argument");
  if (p >= rt->nprocs)
    return rp__err(RP_EPROC,
                   "rp_proc_query: processor %u out of range (runtime has %u)",
                   p, rt->nprocs);
  *out = rt->procs[p].info;
  return RP_OK;
}

rp_status rp_mem_query(const rp_runtime *rt, rp_mem m, rp_mem_info *out) {
  rp_status cst = rp__rt_check(rt, "rp_mem_query");
  if (cst)
    return cst;
  if (!out)
    return rp__err(RP_EINVAL, "rp_mem_query: NULL argument");
  if (m >= rt->nmems)
    return rp__err(RP_EINVAL,
                   "rp_mem_query: memory %u out of range (runtime has %u)", m,
                   rt->nmems);
  *out = rt->mems[m].info;
  return RP_OK;
}

int rp_proc_can_access(const rp_runtime *rt, rp_proc p, rp_mem m) {
  return !rp__rt_check(rt, "rp_proc_can_access") && p < rt->nprocs &&
         m < rt->nmems && rt->access[p][m];
}

int rp__mem_lookup(const rp_runtime *rt, rp_mem_kind kind, int device,
                   rp_mem *out) {
  for (unsigned m = 0; m < rt->nmems; m++)
    if (rt->mems[m].info.kind == kind &&
        (kind != RP_MEM_GPU || rt->mems[m].info.device == device)) {
      *out = m;
      return 1;
    }
  return 0;
}

rp_status rp_mem_find(const rp_runtime *rt, rp_mem_kind kind, int device,
                      rp_mem *out) {
  rp_status cst = rp__rt_check(rt, "rp_mem_find");
  if (cst)
    return cst;
  if (!out)
    return rp__err(RP_EINVAL, "rp_mem_find: NULL argument");
  if (rp__mem_lookup(rt, kind, device, out))
    return RP_OK;
  return rp__err(RP_ENOENT, "rp_mem_find: no memory of kind %d (device %d)",
                 (int)kind, device);
}

int rp__mem_host_addressable(const rp_runtime *rt, rp_mem m) {
  return m == RP_MEM_CALLER || (m < rt->nmems && rt->mems[m].host_addressable);
}

rp_status rp__mem_alloc(rp_runtime *rt, rp_mem m, size_t bytes, size_t align,
                        void **ptr) {
  if (m >= rt->nmems)
    return rp__err(RP_EINVAL, "memory %u out of range", m);
  const rp_mem_rec *mr = &rt->mems[m];
  void *st = mr->be == &rp__cpu_backend ? rt->cpu_state : rt->gpu_state;
  rp_status s = mr->be->mem_alloc(st, mr, bytes ? bytes : 1, align, ptr);
  if (s)
    return rp__err_prefix(s, "allocating %zu bytes in memory %u: ", bytes, m);
  return RP_OK;
}

void rp__mem_free(rp_runtime *rt, rp_mem m, void *ptr) {
  if (!ptr || m >= rt->nmems)
    return;
  const rp_mem_rec *mr = &rt->mems[m];
  void *st = mr->be == &rp__cpu_backend ? rt->cpu_state : rt->gpu_state;
  mr->be->mem_free(st, mr, ptr);
}

rp_status rp__mem_copy(rp_runtime *rt, rp_mem dst_mem, void *dst,
                       rp_mem src_mem, const void *src, size_t bytes) {
  if (rp__mem_host_addressable(rt, dst_mem) &&
      rp__mem_host_addressable(rt, src_mem)) {
    memcpy(dst, src, bytes);
    return RP_OK;
  }
  /* One side is device memory: the device's backend copies. */
  rp_mem dev = rp__mem_host_addressable(rt, dst_mem) ? src_mem : dst_mem;
  const rp_mem_rec *mr = &rt->mems[dev];
  if (!mr->be->mem_copy)
    return rp__err(RP_EUNSUPPORTED, "backend %s cannot copy", mr->be->name);
  return mr->be->mem_copy(rt->gpu_state, dst, src, bytes);
}

/* ---------------------------------------------------------------------- */
/* Task registry */

static rp_task_rec *task_at(const rp_runtime *rt, uint32_t i) {
  return (rp_task_rec *)rp__ctable_at(&rt->tasks, i);
}

const rp_task_rec *rp__task_get(const rp_runtime *rt, rp_task_id id) {
  if (id >=
      atomic_load_explicit(&((rp_runtime *)rt)->ntasks, memory_order_acquire))
    return NULL;
  return task_at(rt, id);
}

uint32_t rp__task_count(const rp_runtime *rt) {
  return atomic_load_explicit(&((rp_runtime *)rt)->ntasks,
                              memory_order_acquire);
}

/* FNV-1a over a task name. */
static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* The id of the task named `name`, or UINT32_MAX (caller holds task_lock). */
static uint32_t task_lookup(const rp_runtime *rt, const char *name) {
  if (!rt->task_hash)
    return UINT32_MAX;
  uint32_t mask = rt->task_hash_cap - 1;
  for (uint32_t h = name_hash(name) & mask; rt->task_hash[h];
       h = (h + 1) & mask) {
    uint32_t id = rt->task_hash[h] - 1;
    if (strcmp(task_at(rt, id)->name, name) == 0)
      return id;
  }
  return UINT32_MAX;
}

static void task_hash_put(rp_runtime *rt, uint32_t id) {
  uint32_t mask = rt->task_hash_cap - 1;
  uint32_t h = name_hash(task_at(rt, id)->name) & mask;
  while (rt->task_hash[h])
    h = (h + 1) & mask;
  rt->task_hash[h] = id + 1;
}

/* Room for n tasks at a load of at most 1/2 (caller holds task_lock). */
static rp_status task_hash_reserve(rp_runtime *rt, uint32_t n) {
  if ((uint64_t)n * 2 <= rt->task_hash_cap)
    return RP_OK;
  uint64_t cap = 64;
  while (cap < (uint64_t)n * 2)
    cap *= 2;
  if (cap > (1ull << 31))
    return rp__err(RP_ERANGE,
                   "rp_task_register: %u tasks is past the "
                   "registry's limit of 2^30",
                   n);
  uint32_t *t = rp__calloc((size_t)cap, sizeof *t);
  if (!t)
    return rp__err(RP_ENOMEM, "rp_task_register: out of memory");
  free(rt->task_hash);
  rt->task_hash = t;
  rt->task_hash_cap = (uint32_t)cap;
  for (uint32_t i = 0; i + 1 < n; i++) /* the n - 1 registered ones */
    task_hash_put(rt, i);
  return RP_OK;
}

rp_status rp_task_register(rp_runtime *rt, const rp_task_desc *d,
                           rp_task_id *out) {
  return rp__task_register_with(rt, d, NULL, out);
}

rp_status rp__task_register_with(rp_runtime *rt, const rp_task_desc *d,
                                 const rp_task_hooks *h, rp_task_id *out) {
  rp_status cst = rp__rt_check(rt, "rp_task_register");
  if (cst)
    return cst;
  if (!d || !out)
    return rp__err(RP_EINVAL, "rp_task_register: NULL argument");
  if (!d->name || !*d->name)
    return rp__err(RP_EINVAL, "rp_task_register: task needs a name");
  rp_status nst = rp__name_check(d->name, "rp_task_register");
  if (nst)
    return nst;
  if (!d->cpu_fn && !d->gpu_fn)
    return rp__err(RP_EINVAL, "rp_task_register: task '%s' has no variant",
                   d->name);
  if (d->flags &
      ~(unsigned)(RP_TASK_STREAM_ORDERED | RP_TASK_HOST | RP_TASK_DEVICE_ARGS))
    return rp__err(RP_EINVAL,
                   "rp_task_register: task '%s' has unknown flags "
                   "%#x",
                   d->name, d->flags);
  if ((d->flags & RP_TASK_STREAM_ORDERED) && (d->flags & RP_TASK_HOST))
    return rp__err(RP_EINVAL,
                   "rp_task_register: task '%s' cannot be both STREAM_ORDERED "
                   "and HOST",
                   d->name);
  pthread_mutex_lock(&rt->task_lock);
  uint32_t n = atomic_load(&rt->ntasks);
  uint32_t dup = task_lookup(rt, d->name);
  if (dup != UINT32_MAX) {
    pthread_mutex_unlock(&rt->task_lock);
    return rp__err(RP_EEXIST, "task '%s' is already registered (id %u)",
                   d->name, dup);
  }
  rp_status st = n >= rp__ctable_capacity()
                     ? rp__err(RP_ERANGE,
                               "rp_task_register: too many tasks (%u "
                               "registered, the most a runtime holds)",
                               n)
                     : task_hash_reserve(rt, n + 1);
  if (st) {
    pthread_mutex_unlock(&rt->task_lock);
    return st;
  }
  st = rp__ctable_reserve(&rt->tasks, n);
  char *name = st ? NULL : rp__strdup(d->name);
  if (!name) {
    pthread_mutex_unlock(&rt->task_lock);
    return rp__err(RP_ENOMEM, "rp_task_register: out of memory");
  }
  rp_task_rec *t = task_at(rt, n);
  t->name = name;
  t->cpu_fn = d->cpu_fn;
  t->gpu_fn = d->gpu_fn;
  t->check_fn = d->check_fn;
  t->flags = d->flags ? d->flags : RP_TASK_HOST;
  t->cost_ns = d->cost_ns;
  t->ext = h ? h->ext : NULL;
  t->priv_fn = h ? h->priv_fn : NULL;
  t->launch_fn = h ? h->launch_fn : NULL;
  t->cover_fn = h ? h->cover_fn : NULL;
  t->priv_arg = h ? h->arg : NULL;
  task_hash_put(rt, n);
  /* release: the record is complete before readers can see its id */
  atomic_store_explicit(&rt->ntasks, n + 1, memory_order_release);
  pthread_mutex_unlock(&rt->task_lock);
  *out = n;
  return RP_OK;
}

int rp__task_lookup(const rp_runtime *rt, const char *name, rp_task_id *out) {
  /* the registry's lock, not its data, changes: the runtime stays const */
  rp_runtime *w = (rp_runtime *)rt;
  pthread_mutex_lock(&w->task_lock);
  uint32_t id = task_lookup(rt, name);
  pthread_mutex_unlock(&w->task_lock);
  if (id == UINT32_MAX)
    return 0;
  *out = id;
  return 1;
}

rp_status rp_task_find(const rp_runtime *rt, const char *name,
                       rp_task_id *out) {
  rp_status cst = rp__rt_check(rt, "rp_task_find");
  if (cst)
    return cst;
  if (!name || !out)
    return rp__err(RP_EINVAL, "rp_task_find: NULL argument");
  if (rp__task_lookup(rt, name, out))
    return RP_OK;
  return rp__err(RP_ENOTASK, "no task named '%s'", name);
}

const char *rp_task_name(const rp_runtime *rt, rp_task_id id) {
  const rp_task_rec *t =
      rp__rt_check(rt, "rp_task_name") ? NULL : rp__task_get(rt, id);
  return t ? t->name : NULL;
}

rp_status rp_task_query(const rp_runtime *rt, rp_task_id id,
                        rp_task_info *out) {
  rp_status cst = rp__rt_check(rt, "rp_task_query");
  if (cst)
    return cst;
  if (!out)
    return rp__err(RP_EINVAL, "rp_task_query: NULL argument");
  const rp_task_rec *t = rp__task_get(rt, id);
  if (!t)
    return rp__err(RP_ENOTASK, "rp_task_query: no task %u", (unsigned)id);
  *out = (rp_task_info){t->name, t->flags, t->cost_ns, t->cpu_fn != NULL,
                        t->gpu_fn != NULL};
  return RP_OK;
}

/* ---------------------------------------------------------------------- */
/* Task context accessors */

rp_runtime *rp_ctx_runtime(const rp_task_ctx *c) {
  return c->rt;
}
rp_proc rp_ctx_proc(const rp_task_ctx *c) {
  return c->proc;
}
rp_proc_kind rp_ctx_proc_kind(const rp_task_ctx *c) {
  return c->kind;
}
uint32_t rp_ctx_shard(const rp_task_ctx *c) {
  return c->shard;
}
uint32_t rp_ctx_shards(const rp_task_ctx *c) {
  return c->shards;
}
void *rp_ctx_stream(const rp_task_ctx *c) {
  return c->stream;
}
uint64_t rp_ctx_replay(const rp_task_ctx *c) {
  return c->replay_at ? *c->replay_at : c->replay;
}
uint32_t rp_ctx_access_count(const rp_task_ctx *c) {
  return c->naccess;
}
const void *rp_ctx_device_args(const rp_task_ctx *c) {
  return c->dev_args;
}

const void *rp_ctx_args(const rp_task_ctx *c, size_t *size) {
  if (size)
    *size = c->args_size;
  return c->args;
}

void *rp_ctx_ptr(const rp_task_ctx *c, uint32_t i) {
  return i < c->naccess ? c->insts[i].ptr : NULL;
}

const rp_instance_info *rp_ctx_inst(const rp_task_ctx *c, uint32_t i) {
  return i < c->naccess ? &c->insts[i] : NULL;
}

void *rp_ctx_workspace(const rp_task_ctx *c, size_t *bytes) {
  if (bytes)
    *bytes = c->workspace_bytes;
  return c->workspace;
}

/* ---------------------------------------------------------------------- */
/* Layer slots, poller, accounting */

void *rp__layer_get(rp_runtime *rt, int layer) {
  pthread_mutex_lock(&rt->layer_lock);
  void *s = rt->layers[layer];
  pthread_mutex_unlock(&rt->layer_lock);
  return s;
}

void *rp__layer_set(rp_runtime *rt, int layer, void *state,
                    void (*dtor)(rp_runtime *, void *),
                    rp_status (*drain)(rp_runtime *, void *),
                    void (*install)(rp_runtime *, void *)) {
  pthread_mutex_lock(&rt->layer_lock);
  if (!rt->layers[layer]) {
    if (install)
      install(rt, state);
    rt->layers[layer] = state;
    rt->layer_dtor[layer] = dtor;
    rt->layer_drain[layer] = drain;
  }
  void *s = rt->layers[layer];
  pthread_mutex_unlock(&rt->layer_lock);
  return s;
}

void *rp__cuda_state(rp_runtime *rt) {
  return rt->gpu_state;
}

const rp_device_ops *rp__device_ops(rp_runtime *rt) {
  return rt && rt->gpu_state ? rt->gpu_be->dev : NULL;
}

static _Atomic(rp_stream_hook) g_stream_hook;

void rp__set_stream_hook(rp_stream_hook hook) {
  atomic_store(&g_stream_hook, hook);
}

void rp__stream_hook_call(void *stream, int created) {
  rp_stream_hook h = atomic_load(&g_stream_hook);
  if (h && stream)
    h(stream, created);
}

int rp__runtime_destroying(const rp_runtime *rt) {
  return atomic_load(&((rp_runtime *)rt)->destroying);
}

rp_status rp__runtime_refuse_closing(const rp_runtime *rt, const char *call) {
  if (!atomic_load(&((rp_runtime *)rt)->closing))
    return RP_OK;
  return rp__err(RP_EBUSY,
                 "%s: the runtime is being destroyed (a graph or exec "
                 "made by a callback or task that rp_runtime_destroy runs "
                 "would outlive the runtime)",
                 call);
}

void rp__runtime_ref(rp_runtime *rt, int delta) {
  atomic_fetch_add(&rt->live_objects, delta);
}

/* A sticky device error anywhere in the process (rp__device_set_lost). */
static atomic_int device_lost;
static char device_lost_why[256];

void rp__device_set_lost(const char *why) {
  int zero = 0;
  if (atomic_compare_exchange_strong(&device_lost, &zero, 2)) {
    snprintf(device_lost_why, sizeof device_lost_why, "%s", why);
    atomic_store(&device_lost, 1); /* release: the text first */
  }
}

rp_status rp__runtime_check(const rp_runtime *rt) {
  rp_runtime *w = (rp_runtime *)rt;
  if (RP_UNLIKELY(atomic_load_explicit(&device_lost, memory_order_relaxed)) &&
      rt->gpu_state && atomic_load(&device_lost) == 1)
    rp__runtime_set_unusable(w, device_lost_why);
  if (RP_UNLIKELY(atomic_load_explicit(&w->unusable, memory_order_relaxed)))
    return rp__err(RP_EUNUSABLE, "runtime unusable: %s", rt->unusable_why);
  return RP_OK;
}

void rp__runtime_set_unusable(rp_runtime *rt, const char *why) {
  int zero = 0;
  if (atomic_compare_exchange_strong(&rt->unusable, &zero, 2)) {
    snprintf(rt->unusable_why, sizeof rt->unusable_why, "%s", why);
    atomic_store(&rt->unusable, 1);
  }
}

const char *rp_runtime_backend_reason(const rp_runtime *rt) {
  if (rp__rt_check(rt, "rp_runtime_backend_reason"))
    return "";
  return rt->backend_reason ? rt->backend_reason : "";
}

rp_backend_kind rp_runtime_backend(const rp_runtime *rt) {
  return rp__rt_check(rt, "rp_runtime_backend") ? RP_BACKEND_CPU : rt->kind;
}

/* ---------------------------------------------------------------------- */
/* Allocation counters (jemalloc) */

#ifdef REPRISE_HAVE_JEMALLOC
/* 1 when jemalloc's counters count the process's allocations: the
 * library links jemalloc, but a program that does not (one linked with
 * -lreprise alone) resolves malloc to libc's, and jemalloc's per-thread
 * counters then stay at 0 whatever is allocated. Probed once: a malloc
 * must move the calling thread's counter. */
static int alloc_counted(void) {
  static _Atomic int known; /* 0 not probed yet, 1 counted, 2 not counted */
  int k = atomic_load_explicit(&known, memory_order_relaxed);
  if (k)
    return k == 1;
  uint64_t a = 0, b = 0;
  size_t sz = sizeof a;
  if (mallctl("thread.allocated", &a, &sz, NULL, 0) != 0) {
    atomic_store_explicit(&known, 2, memory_order_relaxed);
    return 0;
  }
  /* volatile: the allocation is made, not optimised away with its free */
  void *volatile p = malloc(4096);
  if (!p)
    return 0; /* out of memory: ask again next time */
  sz = sizeof b;
  int counted = mallctl("thread.allocated", &b, &sz, NULL, 0) == 0 && b > a;
  free(p);
  atomic_store_explicit(&known, counted ? 1 : 2, memory_order_relaxed);
  return counted;
}
#endif

uint64_t rp_thread_allocated_bytes(void) {
#ifdef REPRISE_HAVE_JEMALLOC
  uint64_t v = 0;
  size_t sz = sizeof v;
  if (alloc_counted() && mallctl("thread.allocated", &v, &sz, NULL, 0) == 0)
    return v;
#endif
  return UINT64_MAX;
}

void rp__alloc_counter_register(rp_runtime *rt, unsigned worker) {
#ifdef REPRISE_HAVE_JEMALLOC
  uint64_t *p = NULL;
  size_t sz = sizeof p;
  if (rt->worker_alloc && alloc_counted() &&
      mallctl("thread.allocatedp", &p, &sz, NULL, 0) == 0)
    atomic_store(&rt->worker_alloc[worker], p);
#else
  RP_UNUSED(rt);
  RP_UNUSED(worker);
#endif
}

uint64_t rp_runtime_worker_allocated_bytes(rp_runtime *rt) {
  if (rp__rt_check(rt, "rp_runtime_worker_allocated_bytes"))
    return UINT64_MAX;
#ifdef REPRISE_HAVE_JEMALLOC
  if (!rt->worker_alloc || !alloc_counted())
    return UINT64_MAX;
  uint64_t sum = 0;
  for (unsigned w = 0; w < rt->ncpu; w++) {
    /* a worker registers its counter when its thread starts: on a loaded
     * machine that can come after the first replays (waiting here, up to
     * 2 s, keeps a measurement from mixing "unknown" with a count) */
    uint64_t *p = atomic_load(&rt->worker_alloc[w]);
    for (uint64_t t0 = rp__now_ns(); !p && rp__now_ns() - t0 < 2000000000ull;
         p = atomic_load(&rt->worker_alloc[w]))
      sched_yield();
    if (!p)
      return UINT64_MAX;
    /* A racy but word-sized read of the worker's own counter: jemalloc
     * builds are never sanitizer builds. */
    sum += *(volatile uint64_t *)p;
  }
  return sum;
#else
  RP_UNUSED(rt);
  return UINT64_MAX;
#endif
}

/* ---------------------------------------------------------------------- */
/* Create / destroy */

void rp_runtime_config_init(rp_runtime_config *cfg) {
  if (!cfg)
    return;
  memset(cfg, 0, sizeof *cfg);
  cfg->backend = RP_BACKEND_AUTO;
}

/* Every REPRISE_* variable the library reads, with what it accepts: checked at
 * rp_runtime_create, so that a typo is an error naming the variable and its
 * value rather than a silent default (the command line checks the same
 * table, engine/env_rules.h, before any work). Unset or empty is "not set". The
 * tunables (spins, yields) are read once per process, the lowering's
 * switches at instantiate; checking them here catches them before any run
 * (a runtime created with ignore_env does not check them, and the readers
 * then fall back to their defaults for a malformed value). */
const rp_env_rule rp_env_rules[] = {
    {"REPRISE_BACKEND", 0, 0, "cpu|cuda|auto"},
    {"REPRISE_WORKERS", 1, RP_MAX_PROCS / 2, NULL},
    {"REPRISE_CPUS", 1, RP_MAX_PROCS / 2, NULL},
    {"REPRISE_GPUS", 1, RP_MAX_GPUS, NULL},
    {"REPRISE_DIST_TIMEOUT_MS", 1, 86400000ul, NULL},
    {"REPRISE_SPIN_NS", 0, 10000000000ul, NULL},
    {"REPRISE_YIELD_NS", 0, 10000000000ul, NULL},
    {"REPRISE_HOST_YIELD_NS", 0, 10000000000ul, NULL},
    {"REPRISE_IDLE_SPIN_NS", 0, 10000000000ul, NULL},
    {"REPRISE_HOST_SPIN_NS", 0, 10000000000ul, NULL},
    {"REPRISE_PIN", 0, 1, NULL},
    {"REPRISE_NVTX", 0, 1, NULL},
    {"REPRISE_CUDA_GRAPHS", 0, 0, "0|1"},
    {"REPRISE_GPU_GROUPS", 0, 0, "0|1"},
    {"REPRISE_GPU_POLL", 0, 0, "0|1|events"},
    /* the GPT kernels' switches, read at each launch (kernels/) */
    {"REPRISE_CUBLAS_WS_MIB", 1, 1024, NULL},
    {"REPRISE_GPT_ATTN", 0, 0, "fused|gemm"},
    {"REPRISE_GPT_ATTN_GEMM", 0, 0, "permute|direct"},
    {"REPRISE_GPT_COLSUM", 0, 0, "split|serial"},
};
const size_t rp_env_nrules = sizeof rp_env_rules / sizeof rp_env_rules[0];

/* 1 when s is one of the '|'-separated words. */
static int env_is_word(const char *s, const char *words) {
  size_t n = strlen(s);
  for (const char *p = words;;) {
    size_t len = strcspn(p, "|");
    if (len == n && strncmp(p, s, n) == 0)
      return 1;
    if (!p[len])
      return 0;
    p += len + 1;
  }
}

int rp__env_rule_accepts(const rp_env_rule *r, const char *s) {
  unsigned long long v;
  return r->words ? env_is_word(s, r->words)
                  : rp__parse_digits(s, r->lo, r->hi, &v);
}

static rp_status env_check(void) {
  for (size_t i = 0; i < rp_env_nrules; i++) {
    const rp_env_rule *r = &rp_env_rules[i];
    const char *s = getenv(r->var);
    if (!s || !*s || rp__env_rule_accepts(r, s))
      continue;
    if (r->words)
      return rp__err(RP_EINVAL, "%s=%.64s: expected one of %s", r->var, s,
                     r->words);
    return rp__err(RP_EINVAL, "%s=%.64s: expected a whole number in %lu..%lu",
                   r->var, s, r->lo, r->hi);
  }
  return RP_OK;
}

/* The value of a variable env_check accepted; dflt when unset or empty. */
static long env_num(const char *var, long dflt) {
  const char *s = getenv(var);
  return s && *s ? strtol(s, NULL, 10) : dflt;
}

/* Applies the checked environment to cfg. REPRISE_WORKERS wins over its
 * deprecated spelling REPRISE_CPUS. *backend_env = 1 when REPRISE_BACKEND
 * chose the backend (its errors name the variable then, the config
 * otherwise). */
static rp_status apply_env(rp_runtime_config *cfg, int *backend_env) {
  rp_status st = env_check();
  if (st)
    return st;
  const char *b = getenv("REPRISE_BACKEND");
  *backend_env = b && *b;
  if (b && *b)
    cfg->backend = !strcmp(b, "cpu")    ? RP_BACKEND_CPU
                   : !strcmp(b, "cuda") ? RP_BACKEND_CUDA
                                        : RP_BACKEND_AUTO;
  long n = env_num("REPRISE_WORKERS", env_num("REPRISE_CPUS", 0));
  if (n > 0)
    cfg->cpus = (unsigned)n;
  long g = env_num("REPRISE_GPUS", 0);
  if (g > 0)
    cfg->gpus = (unsigned)g;
  long t = env_num("REPRISE_DIST_TIMEOUT_MS", 0);
  if (t > 0)
    cfg->dist_timeout_ms = (uint32_t)t;
  return RP_OK;
}

static atomic_int fallback_said;

static void destroy_parts(rp_runtime *rt) {
  /* GPU drivers and device work may still use instances (and may queue CPU
   * work): let them finish before the workers stop and instances go. */
  if (rt->gpu_state && rt->gpu_be->drain)
    rt->gpu_be->drain(rt->gpu_state);
  /* Workers stop first: they run the layers' pollers (the replay ring), and
   * no task may touch an instance after this... */
  if (rt->cpu_state)
    rp__cpu_backend.fini(rt, rt->cpu_state);
  rt->cpu_state = NULL;
  /* Layer state goes once nothing can reach it: idle workers keep calling
   * the replay layer's poller (reading its ring) and eager GPU completions
   * the capture layer's counters until here; the backends and the event
   * table are still up for the destructors (the replay layer's destroys
   * CUDA streams). */
  for (int l = RP_LAYER_COUNT - 1; l >= 0; l--)
    if (rt->layers[l] && rt->layer_dtor[l]) {
      rt->layer_dtor[l](rt, rt->layers[l]);
      rt->layers[l] = NULL;
    }
  /* ...then instances still alive are freed with the runtime, while the
   * backends that own their memories are still up. */
  for (uint32_t i = 0; i < rt->inst_count; i++) {
    rp_inst_slot *s = (rp_inst_slot *)rp__ctable_at(&rt->insts, i);
    if (s->live && s->base)
      rp__mem_free(rt, s->info.mem, s->base);
    s->live = 0;
  }
  if (rt->gpu_state)
    rt->gpu_be->fini(rt, rt->gpu_state);
  rt->gpu_state = NULL;
  rp__ctable_fini(&rt->insts);
  uint32_t nt = atomic_load(&rt->ntasks);
  for (uint32_t i = 0; i < nt; i++)
    free(((rp_task_rec *)rp__ctable_at(&rt->tasks, i))->name);
  rp__ctable_fini(&rt->tasks);
  free(rt->task_hash);
  rp__events_fini(&rt->events);
  free(rt->worker_alloc);
  pthread_mutex_destroy(&rt->inst_lock);
  pthread_mutex_destroy(&rt->task_lock);
  pthread_mutex_destroy(&rt->layer_lock);
}

rp_status rp__runtime_create_engine(const rp_runtime_config *cfg_in,
                                    rp_runtime **out) {
  if (!out)
    return rp__err(RP_EINVAL, "rp_runtime_create: NULL out");
  *out = NULL;
  rp_runtime_config cfg;
  if (cfg_in)
    cfg = *cfg_in;
  else
    rp_runtime_config_init(&cfg);
  if ((unsigned)cfg.backend > RP_BACKEND_CUDA)
    return rp__err(RP_EINVAL,
                   "rp_runtime_create: cfg.backend %d is not "
                   "RP_BACKEND_AUTO, RP_BACKEND_CPU or RP_BACKEND_CUDA",
                   (int)cfg.backend);
  int backend_env = 0;
  if (!cfg.ignore_env) {
    rp_status st = apply_env(&cfg, &backend_env);
    if (st)
      return st;
  }
  if (cfg.cpus > RP_MAX_PROCS / 2)
    return rp__err(RP_EINVAL, "cpus = %u: at most %d", cfg.cpus,
                   RP_MAX_PROCS / 2);
  if (cfg.gpus > RP_MAX_GPUS) /* REPRISE_GPUS's range, whatever the backend */
    return rp__err(RP_EINVAL, "gpus = %u: at most %d", cfg.gpus, RP_MAX_GPUS);

  rp_runtime *rt = rp__calloc(1, sizeof *rt);
  if (!rt)
    return rp__err(RP_ENOMEM, "rp_runtime_create: out of memory");
  rt->cfg = cfg;
  rt->magic = RP_RUNTIME_MAGIC;
  /* handle tags 1..255, in creation order (engine.h "Handle identity"):
   * the last one handed out is kept, not a count of runtimes, whose wrap
   * at 2^32 would hand out tag 1 twice in a row */
  uint32_t last = atomic_load(&rp__runtime_tag_last), next;
  do
    next = last % 255 + 1;
  while (!atomic_compare_exchange_weak(&rp__runtime_tag_last, &last, next));
  rt->tag = next;
  /* Nsight Systems and other NVTX tools announce themselves through the
   * injection variable; per-op ranges are emitted only then. */
  if (getenv("NVTX_INJECTION64_PATH") || rp__env_long("REPRISE_NVTX", 0) > 0)
    rp__nvtx_on = 1;
  pthread_mutex_init(&rt->inst_lock, NULL);
  pthread_mutex_init(&rt->task_lock, NULL);
  pthread_mutex_init(&rt->layer_lock, NULL);
  rp__ctable_init(&rt->insts, sizeof(rp_inst_slot));
  rp__ctable_init(&rt->tasks, sizeof(rp_task_rec));
  rp_status st = rp__events_init(&rt->events);
  if (st)
    goto fail;

  unsigned ncpu = cfg.cpus;
  if (!ncpu) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    ncpu = n < 1 ? 1 : n > RP_MAX_PROCS / 2 ? RP_MAX_PROCS / 2 : (unsigned)n;
  }
  rt->cfg.cpus = ncpu;
#ifdef REPRISE_HAVE_JEMALLOC
  rt->worker_alloc = rp__calloc(ncpu, sizeof *rt->worker_alloc);
#endif
  /* The CPU backend registers the workers and system memory first. */
  st = rp__cpu_backend.init(rt, &rt->cfg, &rt->cpu_state);
  if (st)
    goto fail;
  rt->ncpu = rt->nprocs;
  rt->kind = RP_BACKEND_CPU;

  if (cfg.backend != RP_BACKEND_CPU) {
    if (rp__gpu_backend) {
      st = rp__gpu_backend->init(rt, &rt->cfg, &rt->gpu_state);
      if (st == RP_OK) {
        rt->gpu_be = rp__gpu_backend;
        rt->kind = RP_BACKEND_CUDA;
      } else if (cfg.backend == RP_BACKEND_CUDA) {
        st = rp__err_prefix(st, backend_env ? "REPRISE_BACKEND=cuda: "
                                            : "backend cuda: ");
        goto fail;
      } else {
        static char why[300];
        if (!atomic_exchange(&fallback_said, 1)) {
          snprintf(why, sizeof why, "%s", rp_error_detail());
          if (!cfg.quiet)
            fprintf(stderr, "reprise: %s; using the CPU backend\n", why);
        }
        rt->backend_reason = why[0] ? why : "no CUDA device answers";
      }
    } else {
      if (cfg.backend == RP_BACKEND_CUDA) {
        st = rp__err(RP_ENODEV,
                     "%sthis build of reprise has no CUDA backend "
                     "(CUDA toolkit not found)",
                     backend_env ? "REPRISE_BACKEND=cuda: " : "backend cuda: ");
        goto fail;
      }
      rt->backend_reason = "built without the CUDA toolkit";
      if (!atomic_exchange(&fallback_said, 1) && !cfg.quiet)
        fprintf(stderr, "reprise: built without the CUDA toolkit; using the "
                        "CPU backend\n");
    }
  }
  rt->host_spin_ns = host_spin(rt);
  /* Access: every processor reaches host-addressable memories; device
   * memories are reached by their own device's processors. */
  for (unsigned p = 0; p < rt->nprocs; p++)
    for (unsigned m = 0; m < rt->nmems; m++) {
      const rp_proc_rec *pr = &rt->procs[p];
      const rp_mem_rec *mr = &rt->mems[m];
      if (mr->info.kind == RP_MEM_GPU)
        rt->access[p][m] =
            pr->info.kind == RP_PROC_GPU && pr->info.device == mr->info.device;
      else
        rt->access[p][m] = mr->info.kind == RP_MEM_SYSTEM
                               ? pr->info.kind == RP_PROC_CPU
                               : 1; /* pinned: both */
    }
  *out = rt;
  return RP_OK;
fail:
  rp__runtime_discard(rt);
  return st;
}

void rp__runtime_discard(rp_runtime *rt) {
  destroy_parts(rt);
  free(rt);
}

const rp_runtime_config *rp__runtime_config(const rp_runtime *rt) {
  return &rt->cfg;
}

static rp_status drain_layers(rp_runtime *rt) {
  for (int l = RP_LAYER_COUNT - 1; l >= 0; l--) {
    void *s = rp__layer_get(rt, l);
    if (s && rt->layer_drain[l]) {
      rp_status st = rt->layer_drain[l](rt, s);
      if (st)
        return st;
    }
  }
  return RP_OK;
}

rp_status rp_runtime_drain(rp_runtime *rt) {
  rp_status st = rp__rt_check(rt, "rp_runtime_drain");
  if (!st) /* it waits: from a replay's task it could wait for itself */
    st = rp__refuse_in_replay("rp_runtime_drain");
  if (!st) /* an eager task for itself */
    st = rp__refuse_in_task(rt, "rp_runtime_drain");
  if (!st) /* and a callback's worker for the work queued behind it */
    st = rp__refuse_in_callback("rp_runtime_drain");
  if (st)
    return st;
  st = drain_layers(rt);
  if (!st)
    st = rp__ops_drain(rt);
  if (st)
    return rp__err_as(st, "rp_runtime_drain: ");
  if (rt->gpu_state && rt->gpu_be->drain)
    rt->gpu_be->drain(rt->gpu_state);
  rp__cpu_backend.drain(rt->cpu_state);
  return RP_OK;
}

rp_status rp_runtime_destroy(rp_runtime *rt) {
  if (!rt)
    return RP_OK;
  rp_status cst = rp__rt_check(rt, "rp_runtime_destroy");
  if (cst)
    return cst;
  if ((cst = rp__refuse_in_replay("rp_runtime_destroy")) != RP_OK ||
      (cst = rp__refuse_in_task(rt, "rp_runtime_destroy")) != RP_OK ||
      (cst = rp__refuse_in_callback("rp_runtime_destroy")) != RP_OK)
    return cst;
  int32_t live = atomic_load(&rt->live_objects);
  if (live > 0) /* an open capture holds its graph */
    return rp__err(RP_EBUSY,
                   "rp_runtime_destroy: %d graphs or execs are still alive "
                   "(an open capture's graph counts: end it first)",
                   (int)live);
  atomic_store(&rt->destroying, 1);
  /* No user event may be made from here on (by a callback or a task the
   * drain runs): the drain poisons the pending ones when it stalls, and a
   * callback that made the next each time would keep it going forever. */
  atomic_store(&rt->closing, 1);
  /* Layers first (their ops may wait on engine ops and the reverse: each
   * drain only waits, so either order completes). */
  rp_status st = drain_layers(rt);
  if (!st)
    st = rp__ops_drain(rt);
  if (st) {
    atomic_store(&rt->closing, 0);
    atomic_store(&rt->destroying, 0);
    return rp__err_as(st, "rp_runtime_destroy: ");
  }
  /* user events nobody triggered: poisoned, so that their callbacks run
   * and merges over them complete (and free what they hold). Their
   * callbacks cannot make new ones (closing), so one pass completes every
   * user event. */
  rp__events_cancel_user(rt, RP_EBUSY);
  atomic_store(&rt->destroying, 0);
  destroy_parts(rt);
  /* The struct stays in quarantine with a poisoned magic, so a second
   * destroy or a later call with this handle is refused (RP_ESTALE). */
  rt->magic = RP_DEAD_MAGIC;
  rp__quarantine(rt);
  return RP_OK;
}

uint32_t rp__runtime_tag(const rp_runtime *rt) {
  return rt->tag;
}

rp_status rp__rt_check(const rp_runtime *rt, const char *what) {
  if (RP_UNLIKELY(!rt))
    return rp__err(RP_EINVAL, "%s: NULL runtime", what);
  if (RP_LIKELY(rt->magic == RP_RUNTIME_MAGIC))
    return RP_OK;
  if (rt->magic == RP_DEAD_MAGIC)
    return rp__err(RP_ESTALE, "%s: the runtime %p was destroyed", what,
                   (const void *)rt);
  return rp__err(RP_EINVAL, "%s: %p is not a runtime", what, (const void *)rt);
}
