/* comm/stubs.c — what comm.c calls in builds without MPI (mpi_comm.c is
 * not built) or without NCCL (nccl.c answers nothing). Without MPI there is
 * one rank: a communicator in the config is refused, and nothing else can
 * reach the transport (every copy is local, an all-reduce a no-op). */
#include "comm.h"

#ifndef REPRISE_HAVE_MPI
rp_status rp__mpi_attach(rp_dist_state *ds, void *user_comm) {
  RP_UNUSED(ds);
  RP_UNUSED(user_comm);
  return rp__err(RP_EUNSUPPORTED,
                 "rp_runtime_config.comm: this build of "
                 "reprise has no MPI (MPI was not found at configure time)");
}

void rp__mpi_detach(rp_dist_state *ds) {
  RP_UNUSED(ds);
}

rp_status rp__mpi_comm_dup(rp_dist_state *ds, rp_mpi_comm **out) {
  RP_UNUSED(ds);
  *out = NULL;
  return RP_OK; /* one rank: no communicator needed */
}

void rp__mpi_comm_free(rp_mpi_comm *mc) {
  RP_UNUSED(mc);
}

int rp__mpi_broken(const rp_mpi_comm *mc, const char **why) {
  RP_UNUSED(mc);
  RP_UNUSED(why);
  return 0;
}

#define RP_NO_MPI_()                                                           \
  RP_ASSERT(!"MPI transport reached in a build without MPI");                  \
  return RP_EUNSUPPORTED

rp_status rp__mpi_p2p_init(rp_mpi_comm *mc, int send, void *buf, size_t bytes,
                           uint32_t peer, uint64_t pair_seq, uint32_t K,
                           rp_mpi_reqs **out) {
  (void)mc, (void)send, (void)buf, (void)bytes, (void)peer, (void)pair_seq;
  (void)K, (void)out;
  RP_NO_MPI_();
}

rp_status rp__mpi_agree_slots(rp_mpi_comm *mc, uint32_t K) {
  (void)mc, (void)K;
  RP_NO_MPI_();
}

rp_status rp__mpi_allreduce_init(rp_mpi_comm *mc, void *buf, size_t count,
                                 rp_dtype t, rp_mpi_reqs **out) {
  (void)mc, (void)buf, (void)count, (void)t, (void)out;
  RP_NO_MPI_();
}

rp_status rp__mpi_run(rp_mpi_reqs *q, uint64_t r, const rp_dist_where *w,
                      size_t *got, char *why, size_t whylen) {
  (void)q, (void)r, (void)w, (void)got, (void)why, (void)whylen;
  RP_NO_MPI_();
}

void rp__mpi_skipped(rp_mpi_comm *mc, const rp_dist_where *w, rp_status st) {
  (void)mc, (void)w, (void)st;
}

int rp__mpi_reqs_free(rp_mpi_reqs *q) {
  RP_UNUSED(q);
  return 0;
}

void rp__mpi_eager_failed(rp_dist_state *ds, const char *why) {
  (void)ds, (void)why;
}

rp_status rp__mpi_eager_p2p(rp_dist_state *ds, int send, void *buf,
                            size_t bytes, uint32_t peer, uint64_t pair_seq,
                            const rp_dist_where *w, size_t *got, int *kept,
                            char *why, size_t whylen) {
  (void)ds, (void)send, (void)buf, (void)bytes, (void)peer, (void)pair_seq;
  (void)w, (void)got, (void)why, (void)whylen;
  *kept = 0;
  RP_NO_MPI_();
}

rp_status rp__mpi_eager_allreduce(rp_dist_state *ds, void *buf, size_t count,
                                  rp_dtype t, const rp_dist_where *w, int *kept,
                                  char *why, size_t whylen) {
  (void)ds, (void)buf, (void)count, (void)t, (void)w, (void)why, (void)whylen;
  *kept = 0;
  RP_NO_MPI_();
}

rp_status rp__mpi_bcast(rp_dist_state *ds, rp_mpi_comm *mc, void *buf,
                        size_t bytes) {
  (void)ds, (void)mc, (void)buf, (void)bytes;
  return RP_OK; /* one rank: it already has the bytes */
}
#endif

#ifndef REPRISE_HAVE_NCCL
int rp__nccl_built(void) {
  return 0;
}

rp_status rp__nccl_task(rp_task_ctx *ctx, const rp_dist_args *a) {
  RP_UNUSED(ctx);
  RP_UNUSED(a);
  return rp__err(RP_EUNSUPPORTED, "this build of reprise has no NCCL");
}

rp_status rp__nccl_comm_create(rp_dist_state *ds, rp_mpi_comm *mc, rp_mem mem,
                               void **comm) {
  (void)ds, (void)mc, (void)mem;
  *comm = NULL;
  return rp__err(RP_EUNSUPPORTED, "this build of reprise has no NCCL");
}

void rp__nccl_comm_free(void *comm) {
  RP_UNUSED(comm);
}
void rp__nccl_fini(rp_dist_state *ds) {
  RP_UNUSED(ds);
}

rp_status rp__nccl_graph_selftest(int device, size_t n, int launches) {
  (void)device, (void)n, (void)launches;
  return rp__err(RP_EUNSUPPORTED, "this build of reprise has no NCCL");
}
#endif
