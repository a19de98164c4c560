/* comm/nccl.c — the all-reduce on GPU instances: NCCL. Built with
 * REPRISE_HAVE_NCCL (the CUDA toolkit's NCCL was found); the only file of
 * comm/ that sees CUDA and NCCL headers.
 *
 * Communicators: an NCCL communicator spans one GPU per rank. Eager
 * launches use one per physical device and runtime, created by the first
 * all-reduce on that device (inside the op, so every rank creates it at the
 * same point: communication ops run in launch order); an exec gets its own
 * per GPU at instantiate (comm/exec.c: created by its first all-reduce on
 * that GPU, shared by the others, freed with the exec), so that its
 * all-reduces can be captured into the device's CUDA graph (NCCL supports
 * stream capture) and replays of two execs never share one. The all-reduces
 * sharing one communicator are ordered among themselves (they all write the
 * token), so NCCL sees them in launch order on every rank. The unique id
 * travels over MPI (rank 0 broadcasts, with the timeout); with one rank it
 * stays local.
 *
 * Multi-GPU: one rank per GPU is the model; it is tested on one GPU only
 * (single-rank communicators) until a machine with several GPUs is
 * available (see docs/distributed.md). */
#include "comm.h"

#ifdef REPRISE_HAVE_NCCL

#include "engine/cuda_check.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <string.h>

#define MAX_DEVICES 64

typedef struct nccl_eager {
  pthread_mutex_t lock; /* creation only (first op per device) */
  ncclComm_t comm[MAX_DEVICES];
} nccl_eager;

int rp__nccl_built(void) {
  return 1;
}

#define NCCL_TRY_(call)                                                        \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (r_ != ncclSuccess)                                                     \
      return rp__err(RP_EBACKEND, "%s failed (%s:%d): %s", #call, __FILE__,    \
                     __LINE__, ncclGetErrorString(r_));                        \
  } while (0)

/* CUDA calls: the project's one wrapper (engine/cuda_check.h). No runtime
 * is at hand in the self-test; a sticky error still marks the device lost
 * for every runtime. */
#define CUDA_TRY_(call) RP_CUDA_TRY(NULL, call)

static ncclDataType_t nccl_type(rp_dtype t) {
  switch (t) {
  case RP_F64:
    return ncclFloat64;
  case RP_I32:
    return ncclInt32;
  case RP_I64:
    return ncclInt64;
  default:
    return ncclFloat32;
  }
}

/* A communicator over every rank of mc (ds->eager when NULL) for the
 * calling thread's current device. Collective. */
static rp_status comm_init(rp_dist_state *ds, rp_mpi_comm *mc,
                           ncclComm_t *out) {
  ncclUniqueId id;
  if (ds->rank == 0)
    NCCL_TRY_(ncclGetUniqueId(&id));
  if (ds->ranks > 1) {
    rp_status st = rp__mpi_bcast(ds, mc, &id, sizeof id);
    if (st)
      return rp__err_prefix(st, "NCCL set-up: ");
  }
  NCCL_TRY_(ncclCommInitRank(out, (int)ds->ranks, id, (int)ds->rank));
  return RP_OK;
}

static rp_status eager_comm(rp_dist_state *ds, ncclComm_t *out) {
  const rp_device_ops *dv = rp__device_ops(ds->rt);
  int dev = dv ? dv->current_device() : -1;
  if (dev < 0 || dev >= MAX_DEVICES)
    return rp__err(RP_EBACKEND, "NCCL: no current device (%d)", dev);
  pthread_mutex_lock(&ds->lock);
  if (!ds->nccl) {
    nccl_eager *ne = rp__calloc(1, sizeof *ne);
    if (ne)
      pthread_mutex_init(&ne->lock, NULL);
    ds->nccl = ne;
  }
  nccl_eager *ne = ds->nccl;
  pthread_mutex_unlock(&ds->lock);
  if (!ne)
    return rp__err(RP_ENOMEM, "NCCL: out of memory");
  pthread_mutex_lock(&ne->lock);
  rp_status st = RP_OK;
  if (!ne->comm[dev]) {
    /* Kept only on success: whatever a failed init leaves in its out
     * argument is not a communicator, and the next call tries again. */
    ncclComm_t c = NULL;
    st = comm_init(ds, NULL, &c);
    if (!st)
      ne->comm[dev] = c;
  }
  *out = ne->comm[dev];
  pthread_mutex_unlock(&ne->lock);
  return st;
}

rp_status rp__nccl_task(rp_task_ctx *ctx, const rp_dist_args *a) {
  rp_dist_state *ds = rp__dist_state(ctx->rt);
  ncclComm_t comm = (ncclComm_t)(uintptr_t)a->planned;
  if (!comm) {
    rp_status st = eager_comm(ds, &comm);
    if (st)
      return st;
  }
  size_t count = (size_t)rp_rect_volume(&a->dom);
  void *p = ctx->insts[0].ptr;
  NCCL_TRY_(ncclAllReduce(p, p, count, nccl_type((rp_dtype)a->dtype), ncclSum,
                          comm, (cudaStream_t)ctx->stream));
  return RP_OK;
}

rp_status rp__nccl_comm_create(rp_dist_state *ds, rp_mpi_comm *mc, rp_mem mem,
                               void **out) {
  int dev = -1;
  for (rp_proc p = 0; p < rp_proc_count(ds->rt) && dev < 0; p++) {
    rp_proc_info pi;
    rp_proc_query(ds->rt, p, &pi);
    if (pi.kind == RP_PROC_GPU && pi.local == mem)
      dev = rp__device_ops(ds->rt)->proc_device(ds->rt, p);
  }
  if (dev < 0)
    return rp__err(RP_EACCESS, "NCCL: no GPU works in memory %u", mem);
  int prev = 0;
  CUDA_TRY_(cudaGetDevice(&prev));
  CUDA_TRY_(cudaSetDevice(dev));
  ncclComm_t c = NULL;
  rp_status st = comm_init(ds, mc, &c);
  cudaSetDevice(prev); /* the host thread's device, as found */
  *out = c;
  return st;
}

void rp__nccl_comm_free(void *comm) {
  if (comm)
    ncclCommDestroy((ncclComm_t)comm);
}

void rp__nccl_fini(rp_dist_state *ds) {
  nccl_eager *ne = ds->nccl;
  if (!ne)
    return;
  for (int d = 0; d < MAX_DEVICES; d++)
    if (ne->comm[d])
      ncclCommDestroy(ne->comm[d]);
  pthread_mutex_destroy(&ne->lock);
  free(ne);
  ds->nccl = NULL;
}

/* ---- self-test (one GPU) ---- */

typedef struct selftest {
  float *a, *b;
  cudaStream_t s;
  ncclComm_t comm;
  cudaGraph_t g;
  cudaGraphExec_t x;
} selftest;

static void selftest_free(selftest *t) {
  if (t->x)
    cudaGraphExecDestroy(t->x);
  if (t->g)
    cudaGraphDestroy(t->g);
  if (t->comm)
    ncclCommDestroy(t->comm);
  if (t->s)
    cudaStreamDestroy(t->s);
  cudaFree(t->a);
  cudaFree(t->b);
}

/* Captures b = allreduce(a) (out of place, so the data visibly moves with
 * one rank) into a CUDA graph and launches it `launches` times, zeroing b
 * before each launch; b must equal a after every one. */
static rp_status selftest_run(selftest *t, size_t n, int launches,
                              float *host) {
  ncclUniqueId id;
  NCCL_TRY_(ncclGetUniqueId(&id));
  NCCL_TRY_(ncclCommInitRank(&t->comm, 1, id, 0));
  CUDA_TRY_(cudaStreamCreateWithFlags(&t->s, cudaStreamNonBlocking));
  CUDA_TRY_(cudaMalloc((void **)&t->a, n * sizeof(float)));
  CUDA_TRY_(cudaMalloc((void **)&t->b, n * sizeof(float)));
  for (size_t i = 0; i < n; i++)
    host[i] = (float)(i % 1000) + 0.5f;
  CUDA_TRY_(cudaMemcpy(t->a, host, n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_TRY_(cudaStreamBeginCapture(t->s, cudaStreamCaptureModeThreadLocal));
  ncclResult_t r =
      ncclAllReduce(t->a, t->b, n, ncclFloat32, ncclSum, t->comm, t->s);
  cudaError_t e = cudaStreamEndCapture(t->s, &t->g);
  NCCL_TRY_(r);
  CUDA_TRY_(e);
  CUDA_TRY_(cudaGraphInstantiate(&t->x, t->g, 0));
  for (int k = 0; k < launches; k++) {
    CUDA_TRY_(cudaMemsetAsync(t->b, 0, n * sizeof(float), t->s));
    CUDA_TRY_(cudaGraphLaunch(t->x, t->s));
    CUDA_TRY_(cudaStreamSynchronize(t->s));
    memset(host, 0, n * sizeof(float));
    CUDA_TRY_(
        cudaMemcpy(host, t->b, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
      if (host[i] != (float)(i % 1000) + 0.5f)
        return rp__err(RP_EBACKEND,
                       "NCCL graph launch %d: element %zu is "
                       "%g, expected %g",
                       k, i, (double)host[i],
                       (double)((float)(i % 1000) + 0.5f));
  }
  return RP_OK;
}

rp_status rp__nccl_graph_selftest(int device, size_t n, int launches) {
  int prev = 0;
  CUDA_TRY_(cudaGetDevice(&prev));
  CUDA_TRY_(cudaSetDevice(device));
  float *host = malloc(n * sizeof(float));
  selftest t = {0};
  rp_status st = host ? selftest_run(&t, n, launches, host)
                      : rp__err(RP_ENOMEM, "out of memory");
  selftest_free(&t);
  free(host);
  cudaSetDevice(prev);
  return st;
}

#endif /* REPRISE_HAVE_NCCL */
