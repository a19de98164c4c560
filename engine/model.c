/* engine/model.c — a model runtime: the processors and memories of a
 * recorded machine, without its devices and without instance storage, so
 * that a graph file recorded anywhere loads, dumps and lints here
 * (reprise dump). The CPU backend provides the workers and system memory;
 * this backend adds the GPU processors and the other memories, and takes
 * over every memory so that no instance gets storage. */
#include "engine_impl.h"

#include <string.h>

/* No storage: an instance of a model has info.ptr NULL. */
static rp_status model_alloc(void *state, const rp_mem_rec *m, size_t bytes,
                             size_t align, void **ptr) {
  (void)state, (void)m, (void)bytes, (void)align;
  *ptr = NULL;
  return RP_OK;
}

static void model_free(void *state, const rp_mem_rec *m, void *ptr) {
  (void)state, (void)m, (void)ptr;
}

/* Nothing runs on a model; a stray enqueue completes at once so that
 * nobody waits forever on it. */
static void model_enqueue(void *state, const rp_proc_rec *p, rp_work *w) {
  (void)state, (void)p;
  w->run(w);
}

static const rp_backend_ops model_backend = {
    .name = "model",
    .mem_alloc = model_alloc,
    .mem_free = model_free,
    .proc_enqueue = model_enqueue,
};

/* The description's limits, checked before anything is built. */
static rp_status check_desc(const rp_machine_desc *m) {
  if (!m)
    return rp__err(RP_EINVAL, "rp_runtime_create_model: NULL machine");
  if (m->cpus < 1 || m->cpus > RP_MAX_PROCS / 2)
    return rp__err(RP_ERANGE,
                   "rp_runtime_create_model: machine: %u CPU workers (1..%d)",
                   m->cpus, RP_MAX_PROCS / 2);
  if (m->ngpus > RP_MODEL_MAX_GPUS)
    return rp__err(
        RP_ERANGE,
        "rp_runtime_create_model: machine: %u GPU processors (at most %d)",
        m->ngpus, RP_MODEL_MAX_GPUS);
  if (m->nmems > RP_MODEL_MAX_MEMS)
    return rp__err(RP_ERANGE,
                   "rp_runtime_create_model: machine: %u memories (at most %d)",
                   m->nmems, RP_MODEL_MAX_MEMS);
  for (unsigned g = 0; g < m->ngpus; g++) {
    if (m->gpu_device[g] < 0)
      return rp__err(
          RP_EINVAL,
          "rp_runtime_create_model: machine: GPU processor %u on device %d", g,
          m->gpu_device[g]);
    if (m->gpu_device[g] > RP_MODEL_MAX_DEVICE) /* a graph file could not
                                                   name it */
      return rp__err(
          RP_ERANGE,
          "rp_runtime_create_model: machine: GPU processor %u on device %d (at "
          "most %d)",
          g, m->gpu_device[g], RP_MODEL_MAX_DEVICE);
  }
  for (unsigned i = 0; i < m->nmems; i++) {
    if ((unsigned)m->mems[i].kind > RP_MEM_GPU)
      return rp__err(RP_EINVAL,
                     "rp_runtime_create_model: machine: memory %u has kind %d",
                     i, (int)m->mems[i].kind);
    if (m->mems[i].kind == RP_MEM_GPU && m->mems[i].device < 0)
      return rp__err(RP_EINVAL,
                     "rp_runtime_create_model: machine: memory %u is GPU "
                     "memory of device %d",
                     i, m->mems[i].device);
    /* the device of any other memory is not read (it becomes -1) */
    if (m->mems[i].kind == RP_MEM_GPU &&
        m->mems[i].device > RP_MODEL_MAX_DEVICE)
      return rp__err(RP_ERANGE,
                     "rp_runtime_create_model: machine: memory %u on device %d "
                     "(at most %d)",
                     i, m->mems[i].device, RP_MODEL_MAX_DEVICE);
  }
  return RP_OK;
}

/* The memory GPU processor g works in: its device's, else system. */
static rp_mem gpu_local(const rp_runtime *rt, int device) {
  for (unsigned k = 0; k < rt->nmems; k++)
    if (rt->mems[k].info.kind == RP_MEM_GPU &&
        rt->mems[k].info.device == device)
      return k;
  return 0;
}

/* Adds the described memories (system memory is the CPU backend's) and GPU
 * processors, then lets every processor reach every memory. */
static rp_status add_model_parts(rp_runtime *rt, const rp_machine_desc *m) {
  rp_status st = RP_OK;
  for (unsigned i = 0; i < m->nmems && !st; i++) {
    rp_mem found;
    rp_mem_info mi = m->mems[i];
    if (mi.kind != RP_MEM_GPU)
      mi.device = -1;
    if (rp__mem_lookup(rt, mi.kind, mi.device, &found))
      continue; /* named twice, or system memory */
    st = rp__add_mem(rt, &mi, &model_backend, 0, NULL);
  }
  for (unsigned g = 0; g < m->ngpus && !st; g++) {
    rp_proc_info pi = {RP_PROC_GPU, m->gpu_device[g],
                       gpu_local(rt, m->gpu_device[g]), m->gpu_device[g]};
    st = rp__add_proc(rt, &pi, &model_backend, g, NULL);
  }
  if (st)
    return st;
  for (unsigned k = 0; k < rt->nmems; k++) {
    rt->mems[k].be = &model_backend; /* no storage, system memory too */
    /* host memories stay host memories for the planner (nothing is
     * ever copied: there are no bytes) */
    rt->mems[k].host_addressable = rt->mems[k].info.kind != RP_MEM_GPU;
  }
  for (unsigned p = 0; p < rt->nprocs; p++)
    for (unsigned k = 0; k < rt->nmems; k++)
      rt->access[p][k] = 1;
  return RP_OK;
}

rp_status rp__runtime_create_model(const rp_machine_desc *m, rp_runtime **out) {
  rp_status st = check_desc(m);
  if (st || !out)
    return st ? st : rp__err(RP_EINVAL, "rp_runtime_create_model: NULL out");
  rp_runtime_config cfg;
  rp_runtime_config_init(&cfg);
  cfg.cpus = m->cpus;
  cfg.backend = RP_BACKEND_CPU;
  cfg.quiet = 1;
  cfg.ignore_env = 1;
  rp_runtime *rt = NULL;
  if ((st = rp__runtime_create_engine(&cfg, &rt)) != RP_OK)
    return st;
  rt->model = 1;
  rt->backend_reason = "a model of a recorded machine (no devices)";
  if ((st = add_model_parts(rt, m)) != RP_OK) {
    rp_runtime_destroy(rt);
    return st;
  }
  *out = rt;
  return RP_OK;
}

int rp__runtime_is_model(const rp_runtime *rt) {
  return rt && rt->model;
}
