/* comm/exec.c — running communication ops: the eager task functions (one
 * op at a time on a CPU worker or, for a GPU all-reduce, on the GPU's
 * stream) and the replay form (rp_task_ext): at instantiate, an exec gets a
 * communicator of its own and each unit its persistent requests and
 * staging buffer; every replay starts them and polls (mpi_comm.c). */
#include "comm.h"

#include <string.h>

static const char *const WHAT[RP_DIST_ROLES] = {"nothing", "send", "recv",
                                                "local copy", "all-reduce"};

static int fits(const rp_instance_info *in, const rp_dist_args *a) {
  int ok = a->dom.dim == in->rect.dim && rp_rect_volume(&a->dom) > 0 &&
           (rp_dtype)a->dtype == in->dtype;
  for (int d = 0; ok && d < a->dom.dim; d++)
    ok = a->dom.lo[d] >= in->rect.lo[d] && a->dom.hi[d] <= in->rect.hi[d];
  return ok;
}

/* The op's arguments, checked against its accesses and this rank (a graph
 * file or a launch by name could hand a dist task anything; a graph file
 * with communication belongs to the rank that recorded it). */
static rp_status get_args(const rp_task_ctx *ctx, const rp_dist_args **out) {
  static const uint32_t nacc[RP_DIST_ROLES] = {1, 2, 2, 3, 2};
  const rp_dist_args *a = ctx->args;
  if (ctx->args_size != sizeof *a || a->magic != RP_DIST_ARGS_MAGIC ||
      a->role >= RP_DIST_ROLES || ctx->naccess != nacc[a->role] ||
      ctx->shards > 1)
    return rp__err(RP_EINVAL,
                   "rp.dist task: arguments are not a "
                   "communication op's (launch it with rp_launch_allreduce "
                   "or rp_launch_dist_copy)");
  const rp_dist_state *ds = rp__dist_state(ctx->rt);
  uint32_t me = ds->rank, n = ds->ranks;
  int ok = 1;
  if (a->role == RP_DIST_SEND)
    ok = a->src_rank == me && a->dst_rank != me && a->dst_rank < n;
  else if (a->role == RP_DIST_RECV)
    ok = a->dst_rank == me && a->src_rank != me && a->src_rank < n;
  else if (a->role == RP_DIST_SELF)
    ok = a->src_rank == me && a->dst_rank == me;
  if (!ok)
    return rp__err(RP_EINVAL,
                   "rp.dist task: a copy from rank %u to rank %u recorded "
                   "as a %s does not belong to rank %u of %u",
                   a->src_rank, a->dst_rank,
                   a->role == RP_DIST_SEND   ? "send"
                   : a->role == RP_DIST_RECV ? "recv"
                                             : "local copy",
                   me, n);
  int shape = a->role == RP_DIST_NONE ||
              (fits(&ctx->insts[0], a) &&
               (a->role != RP_DIST_SELF || fits(&ctx->insts[1], a)));
  void *p;
  if (shape && a->role == RP_DIST_ALLREDUCE)
    shape = rp__dist_contig(&ctx->insts[0], &ctx->insts[0].rect, &p) &&
            a->redop == RP_REDOP_SUM;
  if (shape && a->redop == RP_REDOP_SUM)
    shape = a->dtype == RP_F32 || a->dtype == RP_F64 || a->dtype == RP_I32 ||
            a->dtype == RP_I64;
  if (!shape)
    return rp__err(RP_ESHAPE, "rp.dist task: its rectangle, type or "
                              "operator does not match its instances");
  /* as rp_launch_dist_copy refuses it: a local copy moves rows through a
   * bounce buffer, so shared bytes would be read after being written (a
   * graph file or a launch by name can name one instance twice, or
   * external instances over one buffer; a model's have no storage) */
  if (a->role == RP_DIST_SELF && ctx->insts[0].ptr && ctx->insts[1].ptr &&
      rp__dist_overlap(&ctx->insts[0], &ctx->insts[1], &a->dom))
    return rp__err(RP_EINVAL,
                   "rp.dist task: a local copy whose source and destination "
                   "bytes overlap (one instance on both sides, or external "
                   "instances over one buffer)");
  *out = a;
  return RP_OK;
}

static size_t dom_bytes(const rp_dist_args *a) {
  return (size_t)rp_rect_volume(&a->dom) * rp_dtype_size(a->dtype);
}

/* An eager op's staging buffer, counted while it lives (ds->eager_staged):
 * freed after the op unless MPI kept it (a timeout: it may still write
 * there). */
static void *stage_alloc(rp_dist_state *ds, size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (p) /* relaxed: a statistic for tests */
    atomic_fetch_add_explicit(&ds->eager_staged, 1, memory_order_relaxed);
  return p;
}

static void stage_free(rp_dist_state *ds, void *p) {
  free(p);
  atomic_fetch_sub_explicit(&ds->eager_staged, 1, memory_order_relaxed);
}

/* ---- eager ---- */

/* The op as a peer's detail names it ("recv from rank 1"). */
static void op_name(const rp_dist_args *a, char *out, size_t n) {
  switch (a->role) {
  case RP_DIST_SEND:
    snprintf(out, n, "send to rank %u", a->dst_rank);
    break;
  case RP_DIST_RECV:
    snprintf(out, n, "recv from rank %u", a->src_rank);
    break;
  case RP_DIST_NONE:
    snprintf(out, n, "copy from rank %u to rank %u (a placeholder here)",
             a->src_rank, a->dst_rank);
    break;
  default:
    snprintf(out, n, "%s", WHAT[a->role]);
  }
}

/* This rank's eager op a failed with st (why): its token fails every later
 * eager communication op here, so the other ranks are told (once), and a
 * peer waiting on this rank fails at once, quoting the cause. */
static void tell_peers(rp_dist_state *ds, const rp_dist_args *a, rp_status st,
                       const char *why) {
  char op[96], me[24], text[320];
  op_name(a, op, sizeof op);
  int k = snprintf(me, sizeof me, "rank %u: ", ds->rank);
  if (k > 0 && !strncmp(why, me, (size_t)k))
    why += k; /* named once */
  snprintf(text, sizeof text, "rank %u: %s (eager op %llu) failed with %s: %s",
           ds->rank, op, (unsigned long long)a->eager_op, rp_status_name(st),
           why);
  rp__mpi_eager_failed(ds, text);
}

static rp_status eager_p2p(rp_dist_state *ds, const rp_task_ctx *ctx,
                           const rp_dist_args *a, char *why, size_t n) {
  int send = a->role == RP_DIST_SEND;
  const rp_instance_info *inst = &ctx->insts[0];
  size_t bytes = dom_bytes(a), got = 0;
  void *buf;
  int staged = !rp__dist_contig(inst, &a->dom, &buf) ||
               (!send && a->redop == RP_REDOP_SUM),
      kept = 0;
  if (staged && !(buf = stage_alloc(ds, bytes))) {
    snprintf(why, n, "out of memory staging %zu bytes", bytes);
    return RP_ENOMEM;
  }
  if (staged && send)
    rp__dist_pack(inst, &a->dom, buf);
  rp_dist_where w = {WHAT[a->role], a->eager_op, UINT64_MAX, UINT32_MAX,
                     (int32_t)(send ? a->dst_rank : a->src_rank)};
  rp_status st = rp__mpi_eager_p2p(ds, send, buf, bytes, (uint32_t)w.peer,
                                   a->eager_seq, &w, &got, &kept, why, n);
  if (!st && !send && got != bytes) {
    snprintf(why, n,
             "rank %u: recv from rank %u: %zu bytes arrived, the "
             "destination rect holds %zu",
             ds->rank, a->src_rank, got, bytes);
    st = RP_ESHAPE;
  }
  if (!st && staged && !send)
    rp__dist_unpack(inst, &a->dom, buf, (rp_redop)a->redop);
  if (staged && !kept) /* else MPI may still write it: leaked */
    stage_free(ds, buf);
  return st;
}

rp_status rp__dist_task_cpu(rp_task_ctx *ctx) {
  const rp_dist_args *a = NULL;
  rp_status st = get_args(ctx, &a);
  if (st)
    return st;
  rp_dist_state *ds = rp__dist_state(ctx->rt);
  char why[320] = "";
  switch (a->role) {
  case RP_DIST_NONE:
    return RP_OK;
  case RP_DIST_SELF:
    rp__dist_local_copy(&ctx->insts[0], &ctx->insts[1], &a->dom,
                        (rp_redop)a->redop);
    return RP_OK;
  case RP_DIST_ALLREDUCE: {
    if (ds->ranks == 1)
      return RP_OK;
    /* through a buffer of the op's own, as a replay's (plan_allreduce):
     * after a timeout MPI keeps it and may still write there */
    size_t bytes = dom_bytes(a);
    void *buf = stage_alloc(ds, bytes);
    int kept = 0;
    if (!buf) {
      snprintf(why, sizeof why, "out of memory staging %zu bytes", bytes);
      st = RP_ENOMEM;
      break;
    }
    memcpy(buf, ctx->insts[0].ptr, bytes); /* dense (get_args) */
    rp_dist_where w = {"all-reduce", a->eager_op, UINT64_MAX, UINT32_MAX, -1};
    st =
        rp__mpi_eager_allreduce(ds, buf, (size_t)rp_rect_volume(&a->dom),
                                (rp_dtype)a->dtype, &w, &kept, why, sizeof why);
    if (!st)
      memcpy(ctx->insts[0].ptr, buf, bytes);
    if (!kept) /* else MPI may still write it: leaked */
      stage_free(ds, buf);
    break;
  }
  default:
    st = eager_p2p(ds, ctx, a, why, sizeof why);
  }
  if (st) {
    rp__dist_set_detail(ds, why);
    if (ctx->replay == UINT64_MAX) /* eager */
      tell_peers(ds, a, st, why);
    rp__err(st, "%s", why);
  }
  return st;
}

rp_status rp__dist_task_gpu(rp_task_ctx *ctx) {
  const rp_dist_args *a = NULL;
  rp_status st = get_args(ctx, &a);
  if (st)
    return st;
  if (a->role != RP_DIST_ALLREDUCE)
    return rp__err(RP_EINVAL, "rp.dist task: only the all-reduce has a GPU "
                              "form");
  st = rp__nccl_task(ctx, a);
  if (st) {
    rp_dist_state *ds = rp__dist_state(ctx->rt);
    rp__dist_set_detail(ds, rp_error_detail());
    if (ctx->replay == UINT64_MAX) /* eager, not a replay's captured unit */
      tell_peers(ds, a, st, rp_error_detail());
  }
  return st;
}

/* An eager op that did not run because an op it depends on failed: the
 * token makes every communication op depend on the previous one, so once
 * one failed every later one of the runtime lands here. Its detail names
 * it and quotes the runtime's first failed eager op (the cause), instead
 * of passing that failure on as if it were this op's own; when no
 * communication op failed before (a task it reads from failed), this one
 * becomes that first failure, and the other ranks are told (a peer waiting
 * on it fails at once, quoting the detail). */
static void eager_skipped(rp_runtime *rt, const void *args, size_t args_size,
                          rp_status st, const char *why, char *out, size_t n) {
  const rp_dist_args *a = args;
  rp_dist_state *ds = rp__dist_state(rt);
  if (!ds || args_size != sizeof *a || a->magic != RP_DIST_ARGS_MAGIC ||
      a->role >= RP_DIST_ROLES)
    return; /* not a communication op's arguments: why passes on */
  char op[96];
  op_name(a, op, sizeof op);
  int len =
      snprintf(out, n, "rank %u: %s (eager op %llu) did not run: ", ds->rank,
               op, (unsigned long long)a->eager_op);
  size_t at = len > 0 && (size_t)len < n ? (size_t)len : 0;
  pthread_mutex_lock(&ds->lock); /* failure path only */
  if (ds->first[0])
    snprintf(out + at, n - at,
             "the runtime's eager communication failed earlier (%s)",
             ds->first);
  else
    snprintf(out + at, n - at, "an op it depends on failed with %s (%s)",
             rp_status_name(st), why && *why ? why : "no detail");
  pthread_mutex_unlock(&ds->lock);
  rp__dist_set_detail(ds, out);
  rp__mpi_eager_failed(ds, out); /* told already when an earlier op failed */
}

/* ---- replays (rp_task_ext) ---- */

/* The exec's NCCL communicator of one GPU (keyed by the GPU's memory: one
 * per GPU processor), shared by every all-reduce unit of the exec on it. */
typedef struct dist_nccl {
  rp_mem mem;
  void *comm; /* ncclComm_t */
} dist_nccl;

typedef struct dist_exec {
  rp_dist_state *ds;
  rp_mpi_comm *mc;               /* the exec's own (NULL with one rank) */
  uint32_t K;                    /* replay slots: max_inflight */
  uint64_t nseq;                 /* communication ops planned so far */
  uint64_t *send_seq, *recv_seq; /* per peer: copies planned so far */
  dist_nccl *nccl;               /* per GPU used, in order of first use */
  uint32_t nnccl;
} dist_exec;

typedef struct dist_unit {
  dist_exec *dx;
  rp_dist_args a;
  uint32_t op;
  uint64_t seq;
  const rp_instance_info *insts; /* the exec's views (stable) */
  void *buf;                     /* what the requests move */
  int staged;                    /* buf is ours (pack / unpack) */
  size_t bytes;
  rp_mpi_reqs *q;
  char why[320];
} dist_unit;

/* After every unit was released and the exec's device work finished
 * (rp__exec_free frees the lowering, then the units, then this). */
static void ext_exec_end(void *xs) {
  dist_exec *dx = xs;
  if (!dx)
    return;
  for (uint32_t i = 0; i < dx->nnccl; i++)
    rp__nccl_comm_free(dx->nccl[i].comm);
  free(dx->nccl);
  rp__mpi_comm_free(dx->mc);
  free(dx->send_seq);
  free(dx->recv_seq);
  free(dx);
}

static rp_status ext_exec_begin(rp_runtime *rt, uint32_t K, void **xs) {
  dist_exec *dx = rp__calloc(1, sizeof *dx);
  if (!dx)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  dx->ds = rp__dist_state(rt);
  dx->K = K;
  dx->send_seq = rp__calloc(dx->ds->ranks, sizeof *dx->send_seq);
  dx->recv_seq = rp__calloc(dx->ds->ranks, sizeof *dx->recv_seq);
  rp_status st = dx->send_seq && dx->recv_seq
                     ? RP_OK
                     : rp__err(RP_ENOMEM, "instantiate: out of memory");
  /* collective: every rank instantiates this graph */
  if (!st && dx->ds->ranks > 1 && !(st = rp__mpi_comm_dup(dx->ds, &dx->mc)))
    st = rp__mpi_agree_slots(dx->mc, K);
  if (st) {
    ext_exec_end(dx);
    return st;
  }
  *xs = dx;
  return RP_OK;
}

static void ext_release(void *state) {
  dist_unit *u = state;
  /* a request MPI still owns after a timeout keeps its buffer */
  if (rp__mpi_reqs_free(u->q) == 0 && u->staged)
    free(u->buf);
  free(u);
}

static rp_status plan_p2p(dist_exec *dx, dist_unit *u) {
  int send = u->a.role == RP_DIST_SEND;
  u->bytes = dom_bytes(&u->a);
  u->staged = !rp__dist_contig(&u->insts[0], &u->a.dom, &u->buf) ||
              (!send && u->a.redop == RP_REDOP_SUM);
  if (u->staged && !(u->buf = malloc(u->bytes ? u->bytes : 1)))
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  uint32_t peer = send ? u->a.dst_rank : u->a.src_rank;
  uint64_t pair = send ? dx->send_seq[peer]++ : dx->recv_seq[peer]++;
  return rp__mpi_p2p_init(dx->mc, send, u->buf, u->bytes, peer, pair, dx->K,
                          &u->q);
}

/* The exec's communicator for GPU memory mem, created at its first
 * all-reduce. Creation is collective: units are planned in graph op order
 * on every rank, so every rank creates its communicators at the same ops
 * in the same order, provided each rank runs its k-th GPU all-reduce on
 * the GPU processor of the same id (SPMD: the same recorded step). */
static rp_status exec_comm(dist_exec *dx, rp_mem mem, void **comm) {
  for (uint32_t i = 0; i < dx->nnccl; i++)
    if (dx->nccl[i].mem == mem) {
      *comm = dx->nccl[i].comm;
      return RP_OK;
    }
  dist_nccl *n = realloc(dx->nccl, sizeof *n * (dx->nnccl + 1));
  if (!n)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  dx->nccl = n;
  rp_status st = rp__nccl_comm_create(dx->ds, dx->mc, mem, comm);
  if (st)
    return st;
  n[dx->nnccl++] = (dist_nccl){mem, *comm};
  /* relaxed: a statistic for tests */
  atomic_fetch_add_explicit(&dx->ds->nccl_exec_comms, 1, memory_order_relaxed);
  return RP_OK;
}

static rp_status plan_allreduce(dist_exec *dx, dist_unit *u, rp_task_ctx *ctx,
                                int *as_task) {
  const rp_instance_info *in = &u->insts[0];
  if (!rp__mem_host_addressable(ctx->rt, in->mem)) {
    /* GPU: the task itself runs (captured into the device's graph) with
     * the exec's NCCL communicator of that GPU in its args */
    void *comm = NULL;
    rp_status st = exec_comm(dx, in->mem, &comm);
    if (st)
      return st;
    u->a.planned = (uint64_t)(uintptr_t)comm;
    memcpy((void *)ctx->args, &u->a, sizeof u->a);
    *as_task = 1;
    return RP_OK;
  }
  if (dx->ds->ranks == 1)
    return RP_OK;
  /* On a buffer of the unit's own (the instance copied in before each
   * replay's all-reduce and out after it): a collective cannot be
   * cancelled, so one that times out stays with MPI and completes when
   * the late ranks arrive, writing its result then. It writes into this
   * buffer, kept allocated after a timeout (ext_release), never into the
   * instance, which the caller may write, replay in a new exec or free. */
  u->bytes = dom_bytes(&u->a);
  if (!(u->buf = malloc(u->bytes)))
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  u->staged = 1;
  return rp__mpi_allreduce_init(dx->mc, u->buf,
                                (size_t)rp_rect_volume(&u->a.dom),
                                (rp_dtype)u->a.dtype, &u->q);
}

static rp_status ext_plan(void *xs, uint32_t op, rp_task_ctx *ctx, void **state,
                          int *as_task) {
  dist_exec *dx = xs;
  const rp_dist_args *a = NULL;
  rp_status st = get_args(ctx, &a);
  if (st)
    return st;
  dist_unit *u = rp__calloc(1, sizeof *u);
  if (!u)
    return rp__err(RP_ENOMEM, "instantiate: out of memory");
  u->dx = dx;
  u->a = *a;
  u->op = op;
  u->seq = dx->nseq++;
  u->insts = ctx->insts;
  if (a->role == RP_DIST_SEND || a->role == RP_DIST_RECV)
    st = plan_p2p(dx, u);
  else if (a->role == RP_DIST_ALLREDUCE)
    st = plan_allreduce(dx, u, ctx, as_task);
  if (st) {
    ext_release(u);
    return st;
  }
  *state = u;
  return RP_OK;
}

static rp_status run_p2p(dist_unit *u, uint64_t r) {
  int send = u->a.role == RP_DIST_SEND;
  const rp_instance_info *inst = &u->insts[0];
  rp_dist_where w = {WHAT[u->a.role], u->seq, r, u->op,
                     (int32_t)(send ? u->a.dst_rank : u->a.src_rank)};
  if (send && u->staged)
    rp__dist_pack(inst, &u->a.dom, u->buf);
  size_t got = 0;
  rp_status st = rp__mpi_run(u->q, r, &w, &got, u->why, sizeof u->why);
  if (!st && !send && got != u->bytes) {
    snprintf(u->why, sizeof u->why,
             "rank %u: recv from rank %u: %zu bytes "
             "arrived, the destination rect holds %zu",
             u->dx->ds->rank, u->a.src_rank, got, u->bytes);
    st = RP_ESHAPE;
  }
  if (!st && !send && u->staged)
    rp__dist_unpack(inst, &u->a.dom, u->buf, (rp_redop)u->a.redop);
  return st;
}

static rp_status ext_run(void *state, uint64_t r, const char **why) {
  dist_unit *u = state;
  rp_status st = RP_OK;
  switch (u->a.role) {
  case RP_DIST_SELF:
    rp__dist_local_copy(&u->insts[0], &u->insts[1], &u->a.dom,
                        (rp_redop)u->a.redop);
    break;
  case RP_DIST_SEND:
  case RP_DIST_RECV:
    st = run_p2p(u, r);
    break;
  case RP_DIST_ALLREDUCE:
    if (u->q) {
      rp_dist_where w = {"all-reduce", u->seq, r, u->op, -1};
      memcpy(u->buf, u->insts[0].ptr, u->bytes); /* dense (get_args) */
      st = rp__mpi_run(u->q, r, &w, NULL, u->why, sizeof u->why);
      if (!st)
        memcpy(u->insts[0].ptr, u->buf, u->bytes);
    }
    break;
  default:
    break;
  }
  if (st)
    *why = u->why;
  return st;
}

/* A replay that passed over the unit (an op before it failed on this
 * rank, or the replay is stale): a send or all-reduce of its peers may
 * have completed without it (MPI buffers small messages), and that message
 * would be taken by this rank's next replay of the slot. The exec's
 * communication breaks here and the other ranks are told. */
static void ext_skipped(void *state, uint64_t r, rp_status st) {
  dist_unit *u = state;
  if (!u->q) /* a local copy, a placeholder, one rank */
    return;
  int32_t peer = u->a.role == RP_DIST_ALLREDUCE ? -1
                 : u->a.role == RP_DIST_SEND    ? (int32_t)u->a.dst_rank
                                                : (int32_t)u->a.src_rank;
  rp_dist_where w = {WHAT[u->a.role], u->seq, r, u->op, peer};
  rp__mpi_skipped(u->dx->mc, &w, st);
}

const rp_task_ext rp__dist_ext = {
    .exec_begin = ext_exec_begin,
    .exec_end = ext_exec_end,
    .plan = ext_plan,
    .run = ext_run,
    .skipped = ext_skipped,
    .release = ext_release,
    .eager_skipped = eager_skipped,
};
