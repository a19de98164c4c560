/* comm/mpi_comm.c — the MPI transport: communicators, persistent requests,
 * polling with a timeout, and the roll call that names a silent peer.
 *
 * Completion: the worker that runs a communication op starts its requests
 * and polls MPI_Test itself, pacing itself like the engine's waits (spin,
 * then yield, then short sleeps), until the request completes or the
 * timeout expires. No worker ever blocks inside MPI (MPI_Wait), and there
 * is no progress thread: MPICH progresses a request only inside MPI calls,
 * so a progress thread would spin on MPI_Test anyway, on a core the workers
 * need; polling from the lane that waits for the result hands the
 * completion to the next op of that lane with no hand-off, no queue and no
 * lock on the replay path. The cost is that the polling worker runs nothing
 * else meanwhile; other lanes keep computing (see docs/distributed.md).
 *
 * Threads: ops on one communicator run one at a time (they all write the
 * runtime's token instance), so the fields a waiting thread writes
 * (where it waits, the roll-call buffers) are used by one thread at a time;
 * hand-over between ops goes through the engine's events or the replay's
 * lane order, which synchronize. MPI itself runs with MPI_THREAD_MULTIPLE.
 *
 * Tags on an exec's communicator: 0 roll-call questions, 1 answers, 2 "gave
 * up" notices (a rank that timed out tells every other, so a rank waiting
 * on it fails at once with the first cause instead of timing out in turn;
 * on the runtime's eager communicator, a rank whose eager op failed or was
 * skipped tells them too, and an eager op that waits on one peer heeds
 * only that peer's notice),
 * 3 + (pair_seq * K + slot) mod span for the data of the pair_seq-th copy
 * between two ranks in replay slot `slot` (K slots: replays in flight never
 * match each other's messages). */
#include "comm.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#define TAG_ASK 0
#define TAG_HERE 1
#define TAG_GONE 2
#define TAG_P2P 3
#define GONE_LEN 320
#define RC_LEN                                                                 \
  6 /* roll call: kind, seq, replay, op, asked seq, asked replay               \
     */
#define RC_ASK 1
#define RC_HERE 2

/* Pacing of a poll loop: spin 20 us (a peer already at the same op answers
 * within a few microseconds on one node), yield until 5 ms (a large
 * transfer still needs this rank's MPI progress: yielding keeps polling
 * when the core is free), then sleep 50 us between polls (a peer that is
 * milliseconds late costs this worker no core). */
#define SPIN_NS 20000ull
#define YIELD_NS 5000000ull
#define SLEEP_NS 50000L
/* How often a waiting rank answers roll calls. */
#define SERVE_NS 1000000ull

struct rp_mpi_comm {
  MPI_Comm comm;
  int rank, size;
  int64_t tag_span; /* usable data tags: [TAG_P2P, TAG_P2P + span) */
  uint64_t timeout_ns;
  _Atomic int broken; /* set by a timeout (release), read by later ops */
  char broken_why[320];
  int told;         /* the peers know this rank gave up: it sent its notice
                       (give_up), or they failed the same eager all-reduce */
  rp_dist_where at; /* where this rank waits (roll-call answers) */
  int64_t ask[RC_LEN];
  int64_t *reply;      /* size x RC_LEN: one answer buffer per asker */
  char gone[GONE_LEN]; /* this rank's "gave up" notice */
  MPI_Request *sends;  /* size x 3: pending ask / answer / notice per rank */
  int leak;            /* a send could not be completed: keep the buffers */
  /* agree_shape's operand: MPI may still write it after a timeout, and a
   * communicator that timed out is never freed (rp__mpi_comm_free) */
  int64_t agree[6];
  unsigned char bcast[256]; /* rp__mpi_bcast's buffer, kept alike */
};

struct rp_mpi_reqs {
  rp_mpi_comm *mc;
  uint32_t n; /* K point-to-point slots, or 1 all-reduce */
  int coll;
  unsigned char *stuck; /* per request: active after a timeout (not freed) */
  MPI_Request req[];
};

static rp_status mpi_fail(int rc, const char *call, char *why, size_t n) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
    snprintf(msg, sizeof msg, "error %d", rc);
  snprintf(why, n, "%s failed: %s", call, msg);
  return RP_EBACKEND;
}

static rp_status mpi_err(int rc, const char *call) {
  char why[MPI_MAX_ERROR_STRING + 64];
  mpi_fail(rc, call, why, sizeof why);
  return rp__err(RP_EBACKEND, "%s", why);
}

static MPI_Datatype mpi_type(rp_dtype t) {
  switch (t) {
  case RP_F32:
    return MPI_FLOAT;
  case RP_F64:
    return MPI_DOUBLE;
  case RP_I32:
    return MPI_INT32_T;
  case RP_I64:
    return MPI_INT64_T;
  default:
    return MPI_DATATYPE_NULL;
  }
}

static void pace(uint64_t waited) {
  if (waited < SPIN_NS) {
    for (int i = 0; i < 16; i++)
      rp__cpu_relax();
  } else if (waited < YIELD_NS) {
    sched_yield();
  } else {
    struct timespec ts = {0, SLEEP_NS};
    nanosleep(&ts, NULL);
  }
}

/* ---- communicators ---- */

static rp_status comm_new(MPI_Comm c, uint64_t timeout_ns, rp_mpi_comm **out) {
  rp_mpi_comm *mc = rp__calloc(1, sizeof *mc);
  if (!mc)
    return rp__err(RP_ENOMEM, "dist: out of memory");
  mc->comm = c;
  mc->timeout_ns = timeout_ns;
  MPI_Comm_rank(c, &mc->rank);
  MPI_Comm_size(c, &mc->size);
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(c, MPI_TAG_UB, &ub, &flag);
  mc->tag_span = (flag && ub ? *ub : 32767) - TAG_P2P + 1;
  mc->reply = rp__calloc((size_t)mc->size * RC_LEN, sizeof *mc->reply);
  mc->sends = rp__calloc((size_t)mc->size * 3, sizeof *mc->sends);
  if (!mc->reply || !mc->sends) {
    free(mc->reply);
    free(mc->sends);
    free(mc);
    return rp__err(RP_ENOMEM, "dist: out of memory");
  }
  for (int i = 0; i < mc->size * 3; i++)
    mc->sends[i] = MPI_REQUEST_NULL;
  *out = mc;
  return RP_OK;
}

static int mpi_usable(void) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

/* What a call that would call MPI after MPI_Finalize says. */
#define MPI_GONE                                                               \
  "MPI is finalized (finalize it after the last replay and eager op, and "     \
  "after rp_runtime_destroy)"

/* An op or set-up call that would call MPI after MPI_Finalize (the program
 * finalized it before rp_runtime_destroy): MPICH would abort the whole
 * process, so it fails instead, naming the cause. */
static rp_status mpi_gone(int rank, const char *what, char *why, size_t n) {
  if (mpi_usable())
    return RP_OK;
  snprintf(why, n, "rank %d: %s: " MPI_GONE, rank, what);
  return RP_EINVAL;
}

/* MPI_Comm_idup polled with the timeout: a rank that never joins (it does
 * not create the runtime, or instantiates another graph) fails the call
 * instead of hanging it. */
static rp_status dup_comm(MPI_Comm parent, uint64_t timeout_ns,
                          const char *what, rp_mpi_comm **out) {
  if (!mpi_usable())
    return rp__err(RP_EINVAL, "%s: " MPI_GONE, what);
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Request q = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(parent, &c, &q);
  if (rc != MPI_SUCCESS)
    return mpi_err(rc, "MPI_Comm_idup");
  uint64_t t0 = rp__now_ns();
  for (uint32_t i = 0;; i++) {
    int done = 0;
    if ((rc = MPI_Test(&q, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
      return mpi_err(rc, "MPI_Comm_idup");
    if (done)
      break;
    uint64_t waited = rp__now_ns() - t0;
    if (waited >= timeout_ns)
      return rp__err(RP_EPEER,
                     "%s: not every rank joined the communicator "
                     "duplicate within %llu ms (every rank must create the "
                     "runtime and instantiate graphs with communication in "
                     "the same order)",
                     what, (unsigned long long)(timeout_ns / 1000000));
    pace(waited);
  }
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  rp_status st = comm_new(c, timeout_ns, out);
  if (st)
    MPI_Comm_free(&c);
  return st;
}

void rp__mpi_comm_free(rp_mpi_comm *mc) {
  if (!mc)
    return;
  if (mpi_usable()) {
    for (int i = 0; i < mc->size * 3; i++) {
      int done = 1;
      if (mc->sends[i] != MPI_REQUEST_NULL)
        MPI_Test(&mc->sends[i], &done, MPI_STATUS_IGNORE);
      if (!done) {
        /* A roll-call message nobody received: let MPI finish it, and
         * keep its buffer alive (a few bytes, after a failure only). */
        MPI_Request_free(&mc->sends[i]);
        mc->leak = 1;
      }
    }
    /* A communicator that broke (this rank timed out or heard a notice)
     * may have sent notices and questions that their ranks never read.
     * Freed, its context could be given to a later communicator (MPICH
     * picks a context free on every rank), where those messages would
     * match: a later runtime's first wait would fail with this one's
     * cause. Kept, its context stays taken: one communicator a failure. */
    if (mc->leak || atomic_load_explicit(&mc->broken, memory_order_acquire)) {
      mc->leak = 1;
      return;
    }
    /* Pending operations on it complete or stay pending; the
     * communicator goes once they are gone (MPI semantics). */
    MPI_Comm_free(&mc->comm);
  }
  if (mc->leak)
    return;
  free(mc->reply);
  free(mc->sends);
  free(mc);
}

rp_status rp__mpi_attach(rp_dist_state *ds, void *user_comm) {
  if (!mpi_usable())
    return rp__err(RP_EINVAL,
                   "rp_runtime_config.comm: MPI is not "
                   "initialized (call MPI_Init_thread with "
                   "MPI_THREAD_MULTIPLE first) or already finalized");
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE)
    return rp__err(RP_EUNSUPPORTED,
                   "rp_runtime_config.comm: MPI runs at "
                   "thread level %d; reprise's workers call MPI "
                   "concurrently: initialize it with MPI_Init_thread("
                   "MPI_THREAD_MULTIPLE)",
                   level);
  MPI_Comm uc = *(const MPI_Comm *)user_comm;
  int inter = 0;
  if (uc == MPI_COMM_NULL || MPI_Comm_test_inter(uc, &inter) != MPI_SUCCESS ||
      inter)
    return rp__err(RP_EINVAL, "rp_runtime_config.comm: not an "
                              "intra-communicator");
  rp_status st = dup_comm(uc, ds->timeout_ns, "rp_runtime_create", &ds->ctl);
  if (!st)
    st = dup_comm(ds->ctl->comm, ds->timeout_ns, "rp_runtime_create",
                  &ds->eager);
  if (st) {
    rp__mpi_comm_free(ds->ctl);
    ds->ctl = NULL;
    return st;
  }
  ds->rank = (uint32_t)ds->ctl->rank;
  ds->ranks = (uint32_t)ds->ctl->size;
  return RP_OK;
}

void rp__mpi_detach(rp_dist_state *ds) {
  rp__mpi_comm_free(ds->eager);
  rp__mpi_comm_free(ds->ctl);
  ds->eager = ds->ctl = NULL;
}

rp_status rp__mpi_comm_dup(rp_dist_state *ds, rp_mpi_comm **out) {
  return dup_comm(ds->ctl->comm, ds->timeout_ns, "instantiate", out);
}

int rp__mpi_broken(const rp_mpi_comm *mc, const char **why) {
  /* acquire: pairs with the release in timed_out (broken_why is set) */
  if (!atomic_load_explicit(&((rp_mpi_comm *)mc)->broken, memory_order_acquire))
    return 0;
  *why = mc->broken_why;
  return 1;
}

/* ---- the roll call ---- */

/* Answers the questions other ranks asked on mc: where this rank waits. */
static void serve(rp_mpi_comm *mc) {
  for (;;) {
    int flag = 0;
    MPI_Message m;
    MPI_Status st;
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG_ASK, mc->comm, &flag, &m, &st) !=
            MPI_SUCCESS ||
        !flag)
      return;
    int64_t ask[RC_LEN];
    if (MPI_Mrecv(ask, RC_LEN, MPI_INT64_T, &m, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS)
      return;
    int j = st.MPI_SOURCE, done = 1;
    MPI_Request *rq = &mc->sends[3 * j + 1];
    if (*rq != MPI_REQUEST_NULL)
      MPI_Test(rq, &done, MPI_STATUS_IGNORE);
    if (!done)
      continue; /* still answering its last question */
    int64_t *r = &mc->reply[(size_t)j * RC_LEN];
    r[0] = RC_HERE;
    r[1] = (int64_t)mc->at.seq;
    r[2] = (int64_t)mc->at.replay;
    r[3] = (int64_t)mc->at.op;
    r[4] = ask[1];
    r[5] = ask[2];
    MPI_Isend(r, RC_LEN, MPI_INT64_T, j, TAG_HERE, mc->comm, rq);
  }
}

/* Appends "rank j <what>" to out (separated by "; "). */
static void say(char *out, size_t n, size_t *len, int j, const char *what) {
  if (*len >= n)
    return;
  int k =
      snprintf(out + *len, n - *len, "%srank %d %s", *len ? "; " : "", j, what);
  *len += k > 0 ? (size_t)k : 0;
}

/* Asks every rank w waits for where it is, collects answers for a grace
 * period and says, in out, which ranks did not answer (the ones this rank
 * waits for) and where the others are. */
static void roll_call(rp_mpi_comm *mc, const rp_dist_where *w, char *out,
                      size_t n) {
  int size = mc->size;
  int64_t *ans = rp__calloc((size_t)size * RC_LEN, sizeof *ans);
  if (!ans) {
    snprintf(out, n, "rank %d did not answer", w->peer);
    return;
  }
  mc->ask[0] = RC_ASK;
  mc->ask[1] = (int64_t)w->seq;
  mc->ask[2] = (int64_t)w->replay;
  mc->ask[3] = (int64_t)w->op;
  for (int j = 0; j < size; j++) {
    if (j == mc->rank || (w->peer >= 0 && j != w->peer))
      continue;
    MPI_Request *rq = &mc->sends[3 * j];
    if (*rq != MPI_REQUEST_NULL) /* an earlier question: let it go */
      MPI_Request_free(rq);
    MPI_Isend(mc->ask, RC_LEN, MPI_INT64_T, j, TAG_ASK, mc->comm, rq);
  }
  uint64_t grace =
      mc->timeout_ns / 4 < 1000000000ull ? mc->timeout_ns / 4 : 1000000000ull;
  uint64_t t0 = rp__now_ns();
  int want = w->peer >= 0 ? 1 : size - 1, got = 0;
  while (got < want && rp__now_ns() - t0 < grace) {
    serve(mc);
    int flag = 0;
    MPI_Message m;
    MPI_Status st;
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG_HERE, mc->comm, &flag, &m, &st) ==
            MPI_SUCCESS &&
        flag) {
      int64_t r[RC_LEN];
      MPI_Mrecv(r, RC_LEN, MPI_INT64_T, &m, MPI_STATUS_IGNORE);
      int64_t *a = &ans[(size_t)st.MPI_SOURCE * RC_LEN];
      /* an answer to this question (older ones are dropped) */
      if (r[4] == mc->ask[1] && r[5] == mc->ask[2] && a[0] == 0) {
        memcpy(a, r, sizeof r);
        got++;
      }
      continue;
    }
    pace(SPIN_NS); /* yield */
  }
  size_t len = 0;
  out[0] = 0;
  for (int j = 0; j < size; j++) {
    if (j == mc->rank || (w->peer >= 0 && j != w->peer))
      continue;
    const int64_t *a = &ans[(size_t)j * RC_LEN];
    char at[80];
    if (a[0] == 0)
      snprintf(at, sizeof at, "did not answer");
    else if (a[1] == mc->ask[1] && a[2] == mc->ask[2])
      snprintf(at, sizeof at, "waits at the same op");
    else if (a[1] == -2) /* seq UINT64_MAX - 1: a set-up collective */
      snprintf(at, sizeof at,
               "waits in a set-up collective (instantiate, NCCL)");
    else if (a[2] == -1)
      snprintf(at, sizeof at, "waits at an eager op");
    else
      snprintf(at, sizeof at, "waits at its op %u of replay %llu",
               (unsigned)a[3], (unsigned long long)a[2]);
    say(out, n, &len, j, at);
  }
  free(ans);
}

static void mark_broken(rp_mpi_comm *mc, const char *why) {
  snprintf(mc->broken_why, sizeof mc->broken_why, "%s", why);
  /* release: broken_why is written before a later op sees `broken` */
  atomic_store_explicit(&mc->broken, 1, memory_order_release);
}

/* Marks mc broken and tells every other rank (a rank waiting on this one
 * fails at once). */
static void give_up(rp_mpi_comm *mc, const char *why) {
  mark_broken(mc, why);
  mc->told = 1;
  snprintf(mc->gone, sizeof mc->gone, "%s", why);
  for (int j = 0; j < mc->size; j++) {
    MPI_Request *rq = &mc->sends[3 * j + 2];
    if (j == mc->rank || *rq != MPI_REQUEST_NULL)
      continue;
    MPI_Isend(mc->gone, (int)strlen(mc->gone) + 1, MPI_CHAR, j, TAG_GONE,
              mc->comm, rq);
  }
}

static void timed_out(rp_mpi_comm *mc, const rp_dist_where *w, char *why,
                      size_t n) {
  char roll[200], where[64];
  roll_call(mc, w, roll, sizeof roll);
  if (w->seq == UINT64_MAX - 1) /* instantiate's and set-up's collectives */
    snprintf(where, sizeof where, "set-up");
  else if (w->replay == UINT64_MAX)
    snprintf(where, sizeof where, "eager op %llu", (unsigned long long)w->seq);
  else
    snprintf(where, sizeof where, "op %u, replay %llu", w->op,
             (unsigned long long)w->replay);
  char peer[24] = "every rank";
  if (w->peer >= 0)
    snprintf(peer, sizeof peer, "rank %d", w->peer);
  snprintf(why, n, "rank %d: %s (%s) with %s: no answer within %llu ms: %s",
           mc->rank, w->what, where, peer,
           (unsigned long long)(mc->timeout_ns / 1000000), roll);
  give_up(mc, why);
}

/* A notice from a rank that gave up on mc (it timed out, or its eager op
 * failed or was skipped): 1 and why filled when one arrived. An eager op
 * that waits on one peer heeds only that peer's notice (a failure between
 * two other ranks does not fail a copy between healthy ones; the rank that
 * fails on the notice tells its own peers in turn); every other wait heeds
 * any rank's. */
static int gave_up(rp_mpi_comm *mc, const rp_dist_where *w, char *why,
                   size_t n) {
  int flag = 0, from = MPI_ANY_SOURCE;
  if (w->replay == UINT64_MAX && w->seq != UINT64_MAX - 1 && w->peer >= 0)
    from = w->peer; /* an eager copy */
  MPI_Message m;
  MPI_Status st;
  if (MPI_Improbe(from, TAG_GONE, mc->comm, &flag, &m, &st) != MPI_SUCCESS ||
      !flag)
    return 0;
  char text[GONE_LEN];
  if (MPI_Mrecv(text, GONE_LEN, MPI_CHAR, &m, MPI_STATUS_IGNORE) != MPI_SUCCESS)
    snprintf(text, sizeof text, "(unreadable notice)");
  text[GONE_LEN - 1] = 0;
  snprintf(why, n, "rank %d: %s: rank %d gave up first: %s", mc->rank, w->what,
           st.MPI_SOURCE, text);
  mark_broken(mc, why);
  return 1;
}

/* ---- waiting ---- */

/* What a wait polls: a request to complete, or (req NULL) a message from
 * `peer` with `tag` to arrive (MPI_Improbe: *msg and *status filled). */
typedef struct poll_on {
  MPI_Request *req;
  int peer, tag;
  MPI_Message *msg;
} poll_on;

static int poll_once(rp_mpi_comm *mc, const poll_on *p, int *flag,
                     MPI_Status *status) {
  if (p->req)
    return MPI_Test(p->req, flag, status);
  return MPI_Improbe(p->peer, p->tag, mc->comm, flag, p->msg, status);
}

/* Polls until *p completes (RP_OK, *status filled) or the timeout expires
 * (RP_EPEER, why says who did not answer; a request stays active).
 * Answers roll calls while it waits. */
static rp_status wait_on(rp_mpi_comm *mc, const poll_on *p,
                         const rp_dist_where *w, MPI_Status *status, char *why,
                         size_t n) {
  mc->at = *w;
  uint64_t t0 = 0, next_serve = 0;
  for (uint32_t i = 0;; i++) {
    int flag = 0;
    int rc = poll_once(mc, p, &flag, status);
    if (rc != MPI_SUCCESS)
      return mpi_fail(rc, p->req ? "MPI_Test" : "MPI_Improbe", why, n);
    if (flag)
      return RP_OK;
    if (i < 64) { /* the first polls are free of clock reads */
      rp__cpu_relax();
      continue;
    }
    uint64_t now = rp__now_ns();
    if (!t0)
      t0 = next_serve = now;
    if (now >= next_serve) {
      serve(mc);
      if (gave_up(mc, w, why, n))
        return RP_EPEER;
      next_serve = now + SERVE_NS;
    }
    if (now - t0 >= mc->timeout_ns) {
      timed_out(mc, w, why, n);
      return RP_EPEER;
    }
    pace(now - t0);
  }
}

/* Polls *req until it completes (RP_OK, *status filled) or the timeout
 * expires (RP_EPEER, why says who did not answer; the request stays
 * active). Answers roll calls while it waits. */
static rp_status wait_req(rp_mpi_comm *mc, MPI_Request *req,
                          const rp_dist_where *w, MPI_Status *status, char *why,
                          size_t n) {
  poll_on p = {req, 0, 0, NULL};
  return wait_on(mc, &p, w, status, why, n);
}

/* After a timeout: a receive is cancelled (it must not write into memory
 * that may be freed later); a request that still does not complete is
 * left to MPI and never freed. Returns 1 when the request is inactive. */
static int abandon(MPI_Request *req, int p2p) {
  if (!p2p)
    return 0; /* a collective cannot be cancelled */
  MPI_Cancel(req);
  uint64_t t0 = rp__now_ns();
  while (rp__now_ns() - t0 < 100000000ull) {
    int done = 0;
    if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done)
      return 1;
    sched_yield();
  }
  return 0;
}

/* ---- persistent requests (replays) ---- */

static rp_status reqs_new(rp_mpi_comm *mc, uint32_t n, rp_mpi_reqs **out) {
  rp_mpi_reqs *q = rp__calloc(1, sizeof *q + n * sizeof(MPI_Request));
  unsigned char *stuck = rp__calloc(n, 1);
  if (!q || !stuck) {
    free(q);
    free(stuck);
    return rp__err(RP_ENOMEM, "dist: out of memory");
  }
  q->mc = mc;
  q->n = n;
  q->stuck = stuck;
  for (uint32_t k = 0; k < n; k++)
    q->req[k] = MPI_REQUEST_NULL;
  *out = q;
  return RP_OK;
}

/* Every rank's all-reduce operand against every other's, before the
 * all-reduce itself (one of other counts would mix unrelated elements
 * without an error): the largest and smallest count, type code and op
 * number (w->seq: eager ops are numbered alike on every rank, so an op
 * refused on one rank shows here instead of pairing the next all-reduce
 * with the peers' previous one), in one all-reduce of six numbers.
 * RP_ESHAPE (operands) or RP_EPEER (out of step), the same on every rank,
 * when they differ. */
static rp_status agree_shape(rp_mpi_comm *mc, size_t count, rp_dtype t,
                             const rp_dist_where *w, int *agreed, char *why,
                             size_t n) {
  int64_t *v = mc->agree; /* one op at a time on mc: its token, or
                             instantiate's thread */
  v[0] = (int64_t)count, v[1] = -(int64_t)count;
  v[2] = (int64_t)t, v[3] = -(int64_t)t;
  v[4] = (int64_t)(w->seq & INT64_MAX), v[5] = -v[4];
  MPI_Request req;
  int rc =
      MPI_Iallreduce(MPI_IN_PLACE, v, 6, MPI_INT64_T, MPI_MAX, mc->comm, &req);
  if (rc != MPI_SUCCESS)
    return mpi_fail(rc, "MPI_Iallreduce", why, n);
  rp_status s = wait_req(mc, &req, w, MPI_STATUS_IGNORE, why, n);
  if (s)
    return s;
  *agreed = 1; /* every rank has these numbers: the same answer everywhere */
  if (v[4] != -v[5]) {
    snprintf(why, n,
             "the ranks' all-reduces are out of step: communication op %lld "
             "on one rank, %lld on another (an op refused or skipped on some "
             "rank: every rank must make the same communication calls)",
             (long long)-v[5], (long long)v[4]);
    return RP_EPEER;
  }
  if (v[0] != -v[1] || v[2] != -v[3]) {
    /* the smallest and largest type code, by name (every rank's is a
     * summable rp_dtype) */
    snprintf(why, n,
             "the ranks' all-reduce operands differ: %lld to %lld elements, "
             "types %s to %s (every rank must give the same shape and type)",
             (long long)-v[1], (long long)v[0], rp_dtype_name((rp_dtype)-v[3]),
             rp_dtype_name((rp_dtype)v[2]));
    return RP_ESHAPE;
  }
  return RP_OK;
}

rp_status rp__mpi_agree_slots(rp_mpi_comm *mc, uint32_t K) {
  /* collective on the exec's new communicator, before any op uses it */
  int64_t *v = mc->agree;
  v[0] = (int64_t)K, v[1] = -(int64_t)K;
  MPI_Request req;
  int rc =
      MPI_Iallreduce(MPI_IN_PLACE, v, 2, MPI_INT64_T, MPI_MAX, mc->comm, &req);
  if (rc != MPI_SUCCESS)
    return mpi_err(rc, "MPI_Iallreduce");
  rp_dist_where w = {"instantiate: replay slots", UINT64_MAX - 1, UINT64_MAX,
                     UINT32_MAX, -1};
  char why[320];
  rp_status st = wait_req(mc, &req, &w, MPI_STATUS_IGNORE, why, sizeof why);
  if (st)
    return rp__err(st, "%s", why);
  if (v[0] != -v[1])
    return rp__err(RP_EINVAL,
                   "the ranks instantiate with max_inflight %lld to %lld "
                   "(every rank must give the same rp_exec_opts.max_inflight: "
                   "a copy's messages are tagged by replay slot, so other "
                   "slot counts would pair them with another copy's or "
                   "another replay's)",
                   (long long)-v[1], (long long)v[0]);
  return RP_OK;
}

rp_status rp__mpi_p2p_init(rp_mpi_comm *mc, int send, void *buf, size_t bytes,
                           uint32_t peer, uint64_t pair_seq, uint32_t K,
                           rp_mpi_reqs **out) {
  if (bytes > INT_MAX)
    return rp__err(RP_ERANGE, "a message of %zu bytes (at most %d)", bytes,
                   INT_MAX);
  rp_mpi_reqs *q = NULL;
  rp_status st = reqs_new(mc, K, &q);
  if (st)
    return st;
  for (uint32_t k = 0; k < K; k++) {
    int tag = TAG_P2P + (int)((pair_seq * K + k) % (uint64_t)mc->tag_span);
    int rc = send ? MPI_Send_init(buf, (int)bytes, MPI_BYTE, (int)peer, tag,
                                  mc->comm, &q->req[k])
                  : MPI_Recv_init(buf, (int)bytes, MPI_BYTE, (int)peer, tag,
                                  mc->comm, &q->req[k]);
    if (rc != MPI_SUCCESS) {
      rp__mpi_reqs_free(q);
      return mpi_err(rc, send ? "MPI_Send_init" : "MPI_Recv_init");
    }
  }
  *out = q;
  return RP_OK;
}

rp_status rp__mpi_allreduce_init(rp_mpi_comm *mc, void *buf, size_t count,
                                 rp_dtype t, rp_mpi_reqs **out) {
  /* collective like MPI_Allreduce_init: the ranks are in step here, and
   * every rank takes the same branch after it (the count agreed) */
  rp_dist_where w = {"instantiate: all-reduce", UINT64_MAX - 1, UINT64_MAX,
                     UINT32_MAX, -1};
  char why[320];
  int agreed = 0;
  rp_status st = agree_shape(mc, count, t, &w, &agreed, why, sizeof why);
  if (st)
    return rp__err(st, "%s", why);
  if (count > INT_MAX)
    return rp__err(RP_ERANGE, "an all-reduce of %zu elements (at most %d)",
                   count, INT_MAX);
  rp_mpi_reqs *q = NULL;
  st = reqs_new(mc, 1, &q);
  if (st)
    return st;
  q->coll = 1;
  int rc = MPI_Allreduce_init(MPI_IN_PLACE, buf, (int)count, mpi_type(t),
                              MPI_SUM, mc->comm, MPI_INFO_NULL, &q->req[0]);
  if (rc != MPI_SUCCESS) {
    rp__mpi_reqs_free(q);
    return mpi_err(rc, "MPI_Allreduce_init");
  }
  *out = q;
  return RP_OK;
}

rp_status rp__mpi_run(rp_mpi_reqs *q, uint64_t r, const rp_dist_where *w,
                      size_t *got, char *why, size_t whylen) {
  const char *broke;
  if (rp__mpi_broken(q->mc, &broke)) {
    snprintf(why, whylen,
             "this exec's communication broke earlier (%s); "
             "destroy it and instantiate again on every rank",
             broke);
    return RP_EPEER;
  }
  rp_status g = mpi_gone(q->mc->rank, w->what, why, whylen);
  if (g)
    return g;
  uint32_t k = q->coll ? 0 : (uint32_t)(r % q->n);
  int rc = MPI_Start(&q->req[k]);
  if (rc != MPI_SUCCESS)
    return mpi_fail(rc, "MPI_Start", why, whylen);
  MPI_Status st;
  rp_status s = wait_req(q->mc, &q->req[k], w, &st, why, whylen);
  if (s == RP_EPEER)
    q->stuck[k] = !abandon(&q->req[k], !q->coll);
  if (s == RP_OK && got) {
    int c = 0;
    MPI_Get_count(&st, MPI_BYTE, &c);
    *got = (size_t)c;
  }
  return s;
}

int rp__mpi_reqs_free(rp_mpi_reqs *q) {
  if (!q)
    return 0;
  int stuck = 0;
  for (uint32_t k = 0; k < q->n; k++) {
    stuck |= q->stuck[k];
    if (q->req[k] != MPI_REQUEST_NULL && !q->stuck[k] && mpi_usable())
      MPI_Request_free(&q->req[k]); /* inactive persistent request */
  }
  free(q->stuck);
  free(q);
  return stuck;
}

void rp__mpi_skipped(rp_mpi_comm *mc, const rp_dist_where *w, rp_status st) {
  const char *broke;
  if (rp__mpi_broken(mc, &broke) || !mpi_usable())
    return; /* told already, or no MPI left to tell them through */
  char why[GONE_LEN], peer[24] = "every rank";
  if (w->peer >= 0)
    snprintf(peer, sizeof peer, "rank %d", w->peer);
  snprintf(why, sizeof why,
           "rank %d skipped its %s (op %u, replay %llu) with %s: %s on that "
           "rank (%s)",
           mc->rank, w->what, w->op, (unsigned long long)w->replay, peer,
           rp_status_name(st),
           st == RP_ESTALE ? "a stale replay" : "an op before it failed");
  give_up(mc, why);
}

/* ---- eager ---- */

void rp__mpi_eager_failed(rp_dist_state *ds, const char *why) {
  rp_mpi_comm *mc = ds->eager;
  /* told already (a timeout here, or a failure every rank saw), or no MPI
   * left to tell them through */
  if (!mc || mc->told || !mpi_usable())
    return;
  give_up(mc, why);
}

static rp_status eager_broken(rp_dist_state *ds, const rp_dist_where *w,
                              char *why, size_t n) {
  rp_status g = mpi_gone(ds->eager->rank, w->what, why, n);
  if (g)
    return g;
  const char *broke;
  if (!rp__mpi_broken(ds->eager, &broke))
    return RP_OK;
  snprintf(why, n, "the runtime's eager communication broke earlier (%s)",
           broke);
  return RP_EPEER;
}

rp_status rp__mpi_eager_p2p(rp_dist_state *ds, int send, void *buf,
                            size_t bytes, uint32_t peer, uint64_t pair_seq,
                            const rp_dist_where *w, size_t *got, int *kept,
                            char *why, size_t whylen) {
  rp_mpi_comm *mc = ds->eager;
  *kept = 0;
  rp_status s = eager_broken(ds, w, why, whylen);
  if (s)
    return s;
  if (bytes > INT_MAX) {
    snprintf(why, whylen, "a message of %zu bytes (at most %d)", bytes,
             INT_MAX);
    return RP_ERANGE;
  }
  int tag = TAG_P2P + (int)(pair_seq % (uint64_t)mc->tag_span);
  MPI_Request req;
  MPI_Status st;
  void *drain = NULL;
  int rc, c = (int)bytes;
  if (send) {
    rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, (int)peer, tag, mc->comm, &req);
  } else {
    /* The message is matched first and received at its own size: one
     * longer than the destination (a peer's other shape) would be an MPI
     * truncation error, which MPICH raises as fatal through
     * MPI_COMM_WORLD's handler whatever this communicator's is. One of
     * another length is received into scratch and reported by its length
     * (a shorter one too: it must not land in the destination's first
     * points of an op that fails). */
    MPI_Message msg = MPI_MESSAGE_NULL;
    poll_on p = {NULL, (int)peer, tag, &msg};
    s = wait_on(mc, &p, w, &st, why, whylen);
    if (s)
      return s; /* nothing posted: nothing to abandon */
    MPI_Get_count(&st, MPI_BYTE, &c);
    if (c < 0)
      c = 0;
    if ((size_t)c != bytes && !(drain = malloc(c ? (size_t)c : 1))) {
      /* the matched message can no longer be received by anyone: this
       * communicator's order is lost, as after a timeout */
      snprintf(why, whylen, "out of memory receiving %d bytes", c);
      mark_broken(mc, why);
      return RP_ENOMEM;
    }
    rc = MPI_Imrecv(drain ? drain : buf, c, MPI_BYTE, &msg, &req);
  }
  if (rc != MPI_SUCCESS) {
    free(drain);
    return mpi_fail(rc, send ? "MPI_Isend" : "MPI_Imrecv", why, whylen);
  }
  s = wait_req(mc, &req, w, &st, why, whylen);
  if (s == RP_EPEER && !abandon(&req, 1)) {
    MPI_Request_free(&req); /* MPI finishes it, in the buffer it has */
    *kept = !drain;         /* the caller's: kept by the caller */
    drain = NULL;           /* MPI may still write it: leaked */
  }
  free(drain);
  if (s == RP_OK && got)
    *got = (size_t)c;
  return s;
}

rp_status rp__mpi_eager_allreduce(rp_dist_state *ds, void *buf, size_t count,
                                  rp_dtype t, const rp_dist_where *w, int *kept,
                                  char *why, size_t whylen) {
  *kept = 0;
  rp_status s = eager_broken(ds, w, why, whylen);
  if (s)
    return s;
  int agreed = 0;
  s = agree_shape(ds->eager, count, t, w, &agreed, why, whylen);
  if (!s && count > INT_MAX) { /* the same count: the same answer everywhere */
    snprintf(why, whylen, "an all-reduce of %zu elements (at most %d)", count,
             INT_MAX);
    s = RP_ERANGE;
  }
  if (s && agreed) /* every rank fails it alike: nobody needs telling */
    ds->eager->told = 1;
  if (s)
    return s;
  MPI_Request req;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(t), MPI_SUM,
                          ds->eager->comm, &req);
  if (rc != MPI_SUCCESS)
    return mpi_fail(rc, "MPI_Iallreduce", why, whylen);
  s = wait_req(ds->eager, &req, w, MPI_STATUS_IGNORE, why, whylen);
  /* a collective cannot be cancelled: after a timeout it stays MPI's and
   * completes, writing buf, when the late ranks arrive */
  *kept = s == RP_EPEER;
  return s;
}

rp_status rp__mpi_bcast(rp_dist_state *ds, rp_mpi_comm *mc, void *buf,
                        size_t bytes) {
  if (!mc)
    mc = ds->eager;
  char gone[200];
  if (mpi_gone(mc->rank, "NCCL set-up broadcast", gone, sizeof gone))
    return rp__err(RP_EINVAL, "%s", gone);
  /* through the communicator's own buffer: after a timeout the broadcast
   * stays pending and may still write there, never into the caller's */
  if (bytes > sizeof mc->bcast)
    return rp__err(RP_ERANGE, "a set-up broadcast of %zu bytes (at most %zu)",
                   bytes, sizeof mc->bcast);
  memcpy(mc->bcast, buf, bytes);
  MPI_Request req;
  int rc = MPI_Ibcast(mc->bcast, (int)bytes, MPI_BYTE, 0, mc->comm, &req);
  if (rc != MPI_SUCCESS)
    return mpi_err(rc, "MPI_Ibcast");
  rp_dist_where w = {"NCCL set-up broadcast", UINT64_MAX - 1, UINT64_MAX,
                     UINT32_MAX, mc->rank == 0 ? -1 : 0};
  char why[320];
  rp_status st = wait_req(mc, &req, &w, MPI_STATUS_IGNORE, why, sizeof why);
  if (st)
    return rp__err(st, "%s", why);
  memcpy(buf, mc->bcast, bytes);
  return RP_OK;
}
