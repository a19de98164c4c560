/* comm/comm.h — the distributed layer's internal interface: SPMD ranks over
 * MPI, communication ops as tasks with a planned replay form, NCCL for GPU
 * instances. Private to libreprise; only comm/ includes it (and tests).
 *
 * Owns: the runtime's communicators (a duplicate of the user's MPI_Comm for
 * eager ops, another for the host's collective set-up calls), the task
 * records of the communication ops ("rp.dist.*"), their eager functions,
 * their replay plans (rp_task_ext: persistent requests per exec), the
 * timeout and the roll call that names a peer that does not answer.
 *
 * A communication op is a task whose argument bytes are an rp_dist_args
 * (so graph files, dumps and dependence analysis treat it as any task) and
 * whose accesses, per role, are
 *   SEND       0 src READ,                    1 token RW
 *   RECV       0 dst WRITE (RW with a SUM),   1 token RW
 *   SELF       0 src READ, 1 dst WRITE / RW,  2 token RW
 *   ALLREDUCE  0 inst RW,                     1 token RW
 *   NONE       0 token RW (a copy between two other ranks: a placeholder
 *              that keeps every rank's graph the same list of
 *              communication ops; its done event follows the earlier ones)
 * The token is one hidden byte per runtime that every communication op
 * writes: communication runs in launch order on every rank (MPI's matching
 * order, and no deadlock: the earliest unfinished op always has all its
 * ranks at it).
 *
 * Names: the folder is comm/ (communication); the public calls, the task
 * names in graph files ("rp.dist.*") and the internal prefix rp__dist_
 * keep "dist" (distributed), as reprise.h's "Distributed" section does.
 *
 * Layering: comm/ sits above replay (it plans replay units, through the
 * engine's rp_task_ext) and capture (it launches through rp_launch_task).
 * The engine does not call it: the public rp_runtime_create (runtime.c
 * here) creates the engine's runtime and then calls rp__dist_attach, which
 * stores the state in the runtime's RP_LAYER_COMM slot. mpi_*.c is built
 * only with MPI; without it comm.c answers for the single rank. */
#ifndef RP_COMM_H
#define RP_COMM_H

#include "engine/engine.h"

#include <pthread.h>

#define RP_DIST_ARGS_MAGIC 0x31504452u /* "RDP1" */

typedef enum rp_dist_role {
  RP_DIST_NONE = 0,
  RP_DIST_SEND = 1,
  RP_DIST_RECV = 2,
  RP_DIST_SELF = 3,
  RP_DIST_ALLREDUCE = 4,
  RP_DIST_ROLES
} rp_dist_role;

/* A communication op's argument bytes (stored in graphs and graph files). */
typedef struct rp_dist_args {
  uint32_t magic;    /* RP_DIST_ARGS_MAGIC */
  uint32_t role;     /* rp_dist_role on the rank that launched it */
  uint32_t src_rank; /* copies: sending and receiving rank */
  uint32_t dst_rank;
  int32_t redop; /* copies: NONE or SUM into dst; all-reduce: SUM */
  int32_t dtype;
  rp_rect dom;        /* the points this rank moves, global coordinates */
  uint64_t eager_op;  /* eager: the runtime's communication op count */
  uint64_t eager_seq; /* eager p2p: ops of this (src, dst) pair before it */
  uint64_t planned;   /* 0 when launched; in a replay's GPU all-reduce unit
                         its exec's NCCL communicator of that GPU (see
                         nccl.c) */
} rp_dist_args;

/* Where a rank waits: what a roll call compares. seq is the op's index
 * among the exec's (eager: the runtime's) communication ops, the same on
 * every rank; op is this rank's graph op id (UINT32_MAX eager); replay is
 * UINT64_MAX for eager ops. */
typedef struct rp_dist_where {
  const char *what; /* "send", "recv", "all-reduce" */
  uint64_t seq;
  uint64_t replay;
  uint32_t op;
  int32_t peer; /* the rank that must answer; -1: every other rank */
} rp_dist_where;

typedef struct rp_mpi_comm rp_mpi_comm; /* mpi_comm.c */
typedef struct rp_mpi_reqs rp_mpi_reqs; /* a unit's persistent requests */

typedef struct rp_dist_state {
  rp_runtime *rt;
  uint32_t rank, ranks;
  uint64_t timeout_ns;
  rp_mpi_comm *eager; /* eager ops (workers); NULL with one process */
  rp_mpi_comm *ctl;   /* host-side set-up: exec communicators */
  rp_task_id task[RP_DIST_ROLES];
  pthread_mutex_t lock; /* the token, the eager counters, detail */
  rp_inst token;        /* created at the first launch */
  uint64_t eager_ops;   /* communication launches so far */
  uint64_t *send_seq;   /* per peer: eager sends launched to it */
  uint64_t *recv_seq;   /* per peer: eager receives launched from it */
  char detail[704];     /* last failed eager op (rp_runtime_dist_detail) */
  char first[320];      /* the first failed eager op's detail ("": none
                           yet): once one failed, the token fails every
                           later one, which quotes it */
  void *nccl;           /* eager NCCL communicators per device (nccl.c) */
  _Atomic uint64_t nccl_exec_comms; /* exec communicators created so far
                                       (tests: one per exec and GPU) */
  _Atomic int64_t eager_staged;     /* eager staging buffers allocated and not
                                       freed (tests: only one MPI kept after a
                                       timeout stays) */
} rp_dist_state;

/* Called by rp_runtime_create (runtime.c) once the engine's runtime is
 * up, to take cfg->comm (duplicating it: a collective call) and install the
 * RP_LAYER_COMM state. On failure nothing is installed (the caller tears
 * the runtime down). */
rp_status rp__dist_attach(rp_runtime *rt, const rp_runtime_config *cfg);
/* The runtime's state (NULL before attach). */
rp_dist_state *rp__dist_state(rp_runtime *rt);
/* Records an eager failure's detail for rp_runtime_dist_detail (and, for
 * the runtime's first failed eager op, as the cause later ones quote). */
void rp__dist_set_detail(rp_dist_state *ds, const char *why);

/* ---- strided host data (pack.c) ---- */

/* 1 when dom's points are one contiguous span of inst's memory; *ptr then
 * points at the first one. */
int rp__dist_contig(const rp_instance_info *inst, const rp_rect *dom,
                    void **ptr);
/* Copies dom's points of inst into / out of a dense buffer (row-major over
 * dom). unpack with RP_REDOP_SUM adds instead of storing. */
void rp__dist_pack(const rp_instance_info *inst, const rp_rect *dom, void *buf);
void rp__dist_unpack(const rp_instance_info *inst, const rp_rect *dom,
                     const void *buf, rp_redop redop);
/* 1 when the bytes of dom's points in a and those in b overlap, counting
 * each side from its first point to the end of its last (strides are
 * positive): points interleaved by strides count as overlapping. */
int rp__dist_overlap(const rp_instance_info *a, const rp_instance_info *b,
                     const rp_rect *dom);
/* dst[dom] = src[dom] (or += with SUM): both host instances, same type,
 * whose bytes of dom do not overlap (rp__dist_overlap): rows move through
 * a bounce buffer, so an overlap would read what was already written. */
void rp__dist_local_copy(const rp_instance_info *src,
                         const rp_instance_info *dst, const rp_rect *dom,
                         rp_redop redop);

/* ---- MPI (mpi_comm.c; stubs in comm.c without MPI) ---- */

/* Takes the user's communicator: checks MPI is initialized with
 * MPI_THREAD_MULTIPLE, duplicates it twice (eager, ctl). */
rp_status rp__mpi_attach(rp_dist_state *ds, void *user_comm);
void rp__mpi_detach(rp_dist_state *ds);
/* A communicator of an exec's own, duplicated from ctl (collective). */
rp_status rp__mpi_comm_dup(rp_dist_state *ds, rp_mpi_comm **out);
void rp__mpi_comm_free(rp_mpi_comm *mc);
/* 1 after a timeout on mc (why: what happened). */
int rp__mpi_broken(const rp_mpi_comm *mc, const char **why);

/* Every rank's replay slots (an exec's max_inflight) against every
 * other's, on an exec's new communicator (collective): RP_EINVAL on every
 * rank when they differ (a copy's tag depends on the slot count). */
rp_status rp__mpi_agree_slots(rp_mpi_comm *mc, uint32_t K);
/* Persistent requests of one replay unit: K point-to-point requests (one
 * per replay slot, tag from the pair's sequence number and the slot), or
 * one all-reduce request. buf stays the unit's for their lifetime. */
rp_status rp__mpi_p2p_init(rp_mpi_comm *mc, int send, void *buf, size_t bytes,
                           uint32_t peer, uint64_t pair_seq, uint32_t K,
                           rp_mpi_reqs **out);
rp_status rp__mpi_allreduce_init(rp_mpi_comm *mc, void *buf, size_t count,
                                 rp_dtype t, rp_mpi_reqs **out);
/* Starts slot r % K (0 for an all-reduce) and polls it until it completes
 * or the timeout expires (RP_EPEER, roll call in why). *got: bytes received
 * (receives). */
rp_status rp__mpi_run(rp_mpi_reqs *q, uint64_t r, const rp_dist_where *w,
                      size_t *got, char *why, size_t whylen);
/* A replay passed over a unit on this rank without running it (st: why):
 * the peers' messages of that replay stay unmatched and would pair with a
 * later replay's, so mc breaks (later runs fail at once with RP_EPEER) and
 * every other rank is told, as after a timeout. */
void rp__mpi_skipped(rp_mpi_comm *mc, const rp_dist_where *w, rp_status st);
/* Frees q; returns 1 when a request timed out and stays with MPI (its
 * buffer must then stay allocated). */
int rp__mpi_reqs_free(rp_mpi_reqs *q);
/* Eager forms on the runtime's eager communicator (non-persistent).
 * *kept: 1 when the op failed with its request still MPI's (a timeout
 * MPI could not cancel, a collective): buf must then stay allocated; 0
 * otherwise (buf is the caller's again, to free). */
rp_status rp__mpi_eager_p2p(rp_dist_state *ds, int send, void *buf,
                            size_t bytes, uint32_t peer, uint64_t pair_seq,
                            const rp_dist_where *w, size_t *got, int *kept,
                            char *why, size_t whylen);
rp_status rp__mpi_eager_allreduce(rp_dist_state *ds, void *buf, size_t count,
                                  rp_dtype t, const rp_dist_where *w, int *kept,
                                  char *why, size_t whylen);
/* An eager op failed or was skipped on this rank (why: what the peers
 * read, naming this rank and the cause): the runtime's token fails every
 * later eager communication op here, so the other ranks are told once, on
 * the eager communicator (a "gave up" notice, as after a timeout). A peer's
 * eager op that waits on this rank (a copy with it, an all-reduce) then
 * fails at once with RP_EPEER quoting why, instead of timing out. Nothing
 * is sent when the peers know already (this rank timed out and told them,
 * or an all-reduce's operand check failed it on every rank), with one
 * rank, or after MPI_Finalize. */
void rp__mpi_eager_failed(rp_dist_state *ds, const char *why);
/* Broadcasts bytes from rank 0 of mc (ds->eager when mc is NULL), with the
 * timeout (NCCL's unique id). */
rp_status rp__mpi_bcast(rp_dist_state *ds, rp_mpi_comm *mc, void *buf,
                        size_t bytes);

/* ---- NCCL (nccl.c; stubs without NCCL) ---- */

/* 1 when this build has NCCL. */
int rp__nccl_built(void);
/* The all-reduce of a GPU task: on ctx's stream with the communicator in
 * a->planned, or the runtime's eager one for ctx's device. */
rp_status rp__nccl_task(rp_task_ctx *ctx, const rp_dist_args *a);
/* An exec's communicator for the GPU working in GPU memory mem (created at
 * instantiate by the exec's first all-reduce on that GPU and shared by its
 * others; collective over mc, NULL with one rank): stored in *comm (an
 * ncclComm_t), freed by rp__nccl_comm_free when the exec is freed. */
rp_status rp__nccl_comm_create(rp_dist_state *ds, rp_mpi_comm *mc, rp_mem mem,
                               void **comm);
void rp__nccl_comm_free(void *comm);
/* Frees the runtime's eager communicators. */
void rp__nccl_fini(rp_dist_state *ds);
/* Self-test for one GPU (tests): a one-rank communicator, an all-reduce of
 * n floats captured into a CUDA graph, launched `launches` times; checks
 * the data and returns RP_OK, or the failure with a detail. */
rp_status rp__nccl_graph_selftest(int device, size_t n, int launches);

/* exec.c: the communication tasks' eager forms and their planned replay
 * form (comm.c registers them). */
rp_status rp__dist_task_cpu(rp_task_ctx *ctx);
rp_status rp__dist_task_gpu(rp_task_ctx *ctx);
extern const rp_task_ext rp__dist_ext;

#endif
