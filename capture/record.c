/* capture/record.c — recording launches into a graph (capture mode).
 *
 * The capturing thread's launches become graph ops; their dependencies come
 * from the same analysis eager execution uses, over op ids instead of
 * events, so a recorded step has exactly the edges eager execution would
 * have waited on. */
#include "capture_impl.h"

#include <pthread.h>
#include <string.h>

/* ---- captures left open by an exiting thread ----
 * Only the capturing thread may close its capture; a thread that exits with
 * one open would leave its runtime refusing eager launches and destroy for
 * good. So each thread remembers the runtimes it captures on, and a
 * pthread key destructor aborts what is still open when it exits. */

#define TL_CAPTURES 4 /* open captures one thread may hold (more: refused) */
static _Thread_local rp_runtime *tl_captures[TL_CAPTURES];
static pthread_key_t capture_key;
static pthread_once_t capture_once = PTHREAD_ONCE_INIT;
static int capture_key_ok;

static rp_status close_capture(rp_runtime *rt, rp_graph **out,
                               const char *what);

/* 1 when this thread may open one more capture (a tracking slot free). */
static int capture_slot_free(void) {
  for (int i = 0; i < TL_CAPTURES; i++)
    if (!tl_captures[i])
      return 1;
  return 0;
}

/* Key destructor: runs on the exiting thread (pthread_self() is still its
 * own, and so is its thread token: the owner check in close_capture
 * passes). */
static void capture_thread_exit(void *unused) {
  RP_UNUSED(unused);
  for (int i = 0; i < TL_CAPTURES; i++) {
    rp_runtime *rt = tl_captures[i];
    if (rt && rp__rt_check(rt, "thread exit") == RP_OK)
      close_capture(rt, NULL, "rp_capture_abort (thread exit)");
    tl_captures[i] = NULL;
  }
}

static void capture_key_init(void) {
  capture_key_ok = pthread_key_create(&capture_key, capture_thread_exit) == 0;
}

/* Remembers (rt != NULL) or forgets an open capture of this thread. */
static void track_capture(rp_runtime *rt, rp_runtime *forget) {
  for (int i = 0; i < TL_CAPTURES; i++)
    if (tl_captures[i] == forget) {
      tl_captures[i] = rt;
      break;
    }
  if (rt) {
    pthread_once(&capture_once, capture_key_init);
    /* any non-NULL value: the destructor runs at thread exit */
    if (capture_key_ok)
      pthread_setspecific(capture_key, tl_captures);
  }
}

static rp_event op_ref(const rp_capture_state *cs, rp_op_id op) {
  return (rp_event){RP_REF_BIT | (uint64_t)(cs->serial & 0x3fffffffu) << 32 |
                    (uint64_t)(op + 1)};
}

static rp_event port_ref(const rp_capture_state *cs, rp_port_id p) {
  return (rp_event){RP_REF_BIT | RP_REF_PORT |
                    (uint64_t)(cs->serial & 0x3fffffffu) << 32 |
                    (uint64_t)(p + 1)};
}

/* Decodes a reference of the open capture: op (port = 0) or precondition
 * port (port = 1). */
static rp_status decode_ref(const rp_capture_state *cs, rp_event e,
                            uint32_t *index, int *port, const char *what) {
  if (!(e.id & RP_REF_BIT))
    return rp__err(RP_ECAPTURE,
                   "%s: event %#llx is an eager event; a "
                   "recorded op can only wait on recorded ops or on "
                   "rp_capture_precondition ports",
                   what, (unsigned long long)e.id);
  if (RP_REF_SERIAL(e.id) != (cs->serial & 0x3fffffffu))
    return rp__err(RP_ECAPTURE,
                   "%s: reference %#llx belongs to another "
                   "capture",
                   what, (unsigned long long)e.id);
  *port = (e.id & RP_REF_PORT) != 0;
  *index = (uint32_t)e.id - 1;
  uint32_t limit = *port ? cs->graph->npre : cs->graph->nops;
  if ((uint32_t)e.id == 0 || *index >= limit)
    return rp__err(RP_ECAPTURE, "%s: reference %#llx is out of range", what,
                   (unsigned long long)e.id);
  return RP_OK;
}

rp_status rp__record_check_ref(const rp_capture_state *cs, rp_event e,
                               const char *what) {
  uint32_t idx;
  int port;
  return e.id ? decode_ref(cs, e, &idx, &port, what) : RP_OK;
}

/* A copy of a parallel operator stands for the whole operator (whose
 * reference is its last copy): the first op of the run of its group's
 * copies that ends at op id; id itself for any other op. */
static rp_op_id group_head(const rp_graph *g, rp_op_id id) {
  const rp_gop *op = &g->ops[id];
  rp_op_id h = id;
  if (op->kind != RP_OP_COPY || !op->group)
    return id;
  while (h > 0 && g->ops[h - 1].kind == RP_OP_COPY &&
         g->ops[h - 1].group == op->group)
    h--;
  return h;
}

/* The write-backs copy insertion recorded right after task op t
 * (insert.c): a reference to t stands for them too, so whoever waits for
 * the task sees its results in the source instances. */
static uint32_t writeback_tail(const rp_graph *g, rp_op_id t) {
  if (g->ops[t].kind != RP_OP_TASK)
    return 0;
  uint32_t k = 0;
  while (t + k + 1 < g->nops && g->ops[t + k + 1].inserted &&
         rp__is_mirror(g->ops[t + k + 1].copy.src))
    k++;
  return k;
}

rp_status rp_capture_begin(rp_runtime *rt, const rp_capture_opts *opts) {
  rp_status cst = rp__rt_check(rt, "rp_capture_begin");
  if (cst)
    return cst;
  if ((cst = rp__refuse_in_replay("rp_capture_begin")) != RP_OK)
    return cst;
  /* A capture is its thread's: only that thread ends it. A task body or a
   * callback borrows its thread (a worker, or whichever thread triggers),
   * so a capture it left open could never be closed. */
  if (rp__tl_task || rp__tl_in_callback)
    return rp__err(RP_ECONTRACT,
                   "rp_capture_begin called from %s: a capture belongs to "
                   "the thread that opens it, and one left open when it "
                   "returns could never be ended (nothing was opened)",
                   rp__tl_task ? "a running task" : "an event's callback");
  rp_capture_state *cs = rp__capture_state(rt);
  if (!cs)
    return rp__err(RP_ENOMEM, "rp_capture_begin: out of memory");
  pthread_mutex_lock(&cs->lock);
  if (atomic_load(&cs->recording)) {
    int mine = rp__capture_owner(cs) == 1;
    pthread_mutex_unlock(&cs->lock);
    return rp__err(RP_ECAPTURE, mine ? "rp_capture_begin: a capture is "
                                       "already open on this thread (nested "
                                       "capture is not supported)"
                                     : "rp_capture_begin: another thread is "
                                       "capturing on this runtime");
  }
  if (!capture_slot_free()) { /* one its exit could not abort */
    pthread_mutex_unlock(&cs->lock);
    return rp__err(RP_ERANGE,
                   "rp_capture_begin: this thread holds %d open captures "
                   "already (on other runtimes), the most one thread may "
                   "hold: end one first",
                   TL_CAPTURES);
  }
  rp_graph *g;
  rp_status st = rp__graph_new(rt, "rp_capture_begin", &g);
  if (st) {
    pthread_mutex_unlock(&cs->lock);
    return st;
  }
  g->no_copy_insertion = opts ? opts->no_copy_insertion : 0;
  cs->graph = g;
  cs->failed = 0;
  cs->next_name[0] = '\0';
  cs->keep_name = 0;
  /* unique across the process's runtimes: another runtime's (or an
   * earlier capture's) reference is refused, not mistaken for one of this
   * capture's ops; 0 is never a serial */
  static _Atomic uint32_t serials;
  do
    cs->serial = atomic_fetch_add(&serials, 1) + 1;
  while (!(cs->serial & 0x3fffffffu));
  rp__analysis_init(&cs->rec, (rp_dep_hooks){0});
  atomic_store_explicit(&cs->owner, rp__thread_token(), memory_order_relaxed);
  /* release: graph, owner and analysis are set before a thread can see the
   * capture open */
  atomic_store_explicit(&cs->recording, 1, memory_order_release);
  pthread_mutex_unlock(&cs->lock);
  track_capture(rt, NULL);
  return RP_OK;
}

static rp_status close_capture(rp_runtime *rt, rp_graph **out,
                               const char *what) {
  rp_status cst = rp__rt_check(rt, what);
  if (cst)
    return cst;
  rp_capture_state *cs = rp__layer_get(rt, RP_LAYER_CAPTURE);
  if (cs && rp__capture_borrower() && rp__capture_owner(cs))
    return rp__err(RP_ECAPTURE,
                   "%s called from %s: a capture is ended by the code "
                   "that opened it, not by a task or a callback borrowing "
                   "a thread (the capture stays open)",
                   what, rp__capture_borrower());
  if (!cs || rp__capture_owner(cs) != 1)
    return rp__err(RP_ECAPTURE, "%s: no capture is open on this thread", what);
  pthread_mutex_lock(&cs->lock);
  rp_graph *g = cs->graph;
  cs->graph = NULL;
  rp__analysis_fini(&cs->rec);
  rp__insert_reset(cs);
  rp_status failed = (rp_status)cs->failed;
  char why[sizeof cs->failed_detail];
  snprintf(why, sizeof why, "%s", failed ? cs->failed_detail : "");
  atomic_store_explicit(&cs->recording, 0, memory_order_release);
  pthread_mutex_unlock(&cs->lock);
  track_capture(NULL, rt);
  if (out && !failed) {
    *out = g;
    return RP_OK;
  }
  rp__graph_discard(g);
  if (out)
    return rp__err(failed,
                   "%s: a recorded launch failed part-way (%s: %s); "
                   "the capture is closed and its graph discarded",
                   what, rp_status_name(failed), why);
  return RP_OK;
}

rp_status rp_capture_end(rp_runtime *rt, rp_graph **out) {
  if (!out)
    return rp__err(RP_EINVAL, "rp_capture_end: NULL out");
  return close_capture(rt, out, "rp_capture_end");
}

rp_status rp_capture_abort(rp_runtime *rt) {
  return close_capture(rt, NULL, "rp_capture_abort");
}

static rp_status recording_state(rp_runtime *rt, rp_capture_state **cs,
                                 const char *what) {
  rp_status cst = rp__rt_check(rt, what);
  if (cst)
    return cst;
  *cs = rp__layer_get(rt, RP_LAYER_CAPTURE);
  int rec = 0;
  rp_status st = *cs ? rp__capture_mode(*cs, &rec) : RP_OK;
  if (st && rp__capture_borrower()) /* rp__capture_mode's detail says */
    return rp__err_prefix(st, "%s: ", what);
  if (st) /* another thread's capture */
    return rp__err(RP_ECAPTURE,
                   "%s: no capture is open on this thread (another thread "
                   "is capturing on this runtime)",
                   what);
  if (!rec)
    return rp__err(RP_ECAPTURE, "%s: no capture is open on this thread", what);
  return RP_OK;
}

int rp_capture_open(rp_runtime *rt) {
  if (rp__rt_check(rt, "rp_capture_open") != RP_OK)
    return 0;
  rp_capture_state *cs = rp__layer_get(rt, RP_LAYER_CAPTURE);
  return cs ? rp__capture_owner(cs) : 0;
}

rp_status rp_capture_name_next(rp_runtime *rt, const char *name) {
  rp_capture_state *cs;
  rp_status st = recording_state(rt, &cs, "rp_capture_name_next");
  if (!st && name)
    st = rp__name_check(name, "rp_capture_name_next");
  if (!st)
    snprintf(cs->next_name, sizeof cs->next_name, "%s", name ? name : "");
  return st;
}

rp_status rp_capture_precondition(rp_runtime *rt, const char *name,
                                  rp_event *ev, uint32_t *port) {
  rp_capture_state *cs;
  rp_status st = recording_state(rt, &cs, "rp_capture_precondition");
  if (st)
    return st;
  if (!ev)
    return rp__err(RP_EINVAL, "rp_capture_precondition: NULL event out");
  rp_port_id p;
  if ((st = rp_graph_add_precondition(cs->graph, name, &p)) != RP_OK)
    return rp__err_as(st, "rp_capture_precondition: ");
  *ev = port_ref(cs, p);
  if (port)
    *port = p;
  return RP_OK;
}

rp_status rp_capture_postcondition(rp_runtime *rt, const char *name,
                                   const rp_event *ops, uint32_t n,
                                   uint32_t *port) {
  rp_capture_state *cs;
  rp_status st = recording_state(rt, &cs, "rp_capture_postcondition");
  if (st)
    return st;
  if (n && !ops)
    return rp__err(RP_EINVAL, "rp_capture_postcondition: NULL ops");
  for (uint32_t i = 0; i < n; i++) {
    uint32_t idx;
    int is_port = 0;
    if (!(ops[i].id & RP_REF_BIT)) /* the header's RP_EPORT, not a wait's */
      return rp__err(RP_EPORT,
                     "rp_capture_postcondition: ops[%u] = %#llx is %s, not "
                     "an op reference of this capture",
                     i, (unsigned long long)ops[i].id,
                     ops[i].id ? "an eager event" : "RP_NO_EVENT");
    if ((st = decode_ref(cs, ops[i], &idx, &is_port,
                         "rp_capture_postcondition")) != RP_OK) {
      char why[256]; /* rp__err formats into the detail it would read */
      snprintf(why, sizeof why, "%s", rp_error_detail());
      return rp__err(RP_EPORT, "%s", why);
    }
    if (is_port)
      return rp__err(RP_EPORT,
                     "rp_capture_postcondition: ref %u is a "
                     "precondition port, not an op",
                     i);
  }
  rp_port_id p;
  if ((st = rp_graph_add_postcondition(cs->graph, name, &p)) != RP_OK)
    return rp__err_as(st, "rp_capture_postcondition: ");
  for (uint32_t i = 0; i < n; i++) {
    uint32_t idx;
    int is_port;
    decode_ref(cs, ops[i], &idx, &is_port, "rp_capture_postcondition");
    uint32_t tail = writeback_tail(cs->graph, idx);
    for (uint32_t k = group_head(cs->graph, idx); k <= idx + tail; k++)
      if ((st = rp_graph_bind_postcondition(cs->graph, p, k)) != RP_OK &&
          st != RP_EPORT) {
        /* out of memory: the port goes again (it is the last one) */
        rp_gport *gp = &cs->graph->post[--cs->graph->npost];
        free(gp->name);
        free(gp->ops);
        *gp = (rp_gport){0};
        return st;
      }
  }
  if (port)
    *port = p;
  return RP_OK;
}

/* Records one op: appends it, adds edges from its inferred dependencies and
 * from `wait`, and makes it the newest accessor of its instances. */
rp_status rp__record_op(rp_capture_state *cs, const rp_gop *op, rp_event wait,
                        rp_event *ref) {
  rp_graph *g = cs->graph;
  uint32_t widx = 0;
  int wport = 0;
  rp_status st = RP_OK;
  if (wait.id && (st = decode_ref(cs, wait, &widx, &wport,
                                  cs->call ? cs->call : "launch")))
    return st;
  rp_access tmp[2];
  const rp_access *acc;
  uint32_t nacc = rp__op_accesses(op, tmp, &acc);
  rp_dep_set deps = {0};
  int copy = op->kind != RP_OP_TASK;
  /* room first: the commit below then cannot fail, so a failed launch
   * leaves the analysis as it was (a half-done commit would keep the
   * dropped op as an accessor, and take its instances' history away) */
  if ((st = rp__analysis_reserve(&cs->rec, acc, nacc)) != RP_OK ||
      (st = rp__analysis_deps(&cs->rec, acc, nacc, copy, &deps)) != RP_OK)
    goto out;
  rp_op_id id;
  rp_gop named;
  if (!op->inserted && cs->next_name[0]) { /* rp_capture_name_next */
    named = *op;                           /* shallow: append deep-copies */
    memcpy(named.name, cs->next_name, sizeof named.name);
    op = &named;
  }
  if ((st = rp__graph_append(g, op, &id)) != RP_OK)
    goto out;
  for (uint32_t i = 0; i < deps.n && !st; i++)
    st = rp__graph_edge_inferred(g, (rp_op_id)deps.v[i].id, id);
  if (!st && wait.id)
    st = wport ? rp_graph_bind_precondition(g, widx, id)
               : rp_graph_add_edge(g, widx, id);
  int bound = !st && wait.id && wport; /* id is port widx's last op */
  for (uint32_t k = 1; !st && wait.id && !wport && k <= writeback_tail(g, widx);
       k++)
    st = rp_graph_add_edge(g, widx + k, id);
  /* a parallel operator's earlier copies: implied by the wait on it */
  for (rp_op_id j = wait.id && !wport ? group_head(g, widx) : widx;
       !st && j < widx; j++)
    st = rp__graph_edge_inferred(g, j, id);
  if (!st) /* cannot fail after the reserve */
    st = rp__analysis_commit(&cs->rec, acc, nacc, copy,
                             (rp_dep_token){id, 0, 0});
  if (st) {
    /* Undo: drop the op, its edges and its precondition binding (the
     * port's last) so the graph stays as it was. */
    while (g->nedges && g->edges[g->nedges - 1].to == id)
      g->nedges--;
    if (bound)
      g->pre[widx].nops--;
    rp__gop_clear(&g->ops[--g->nops]);
    goto out;
  }
  rp__insert_note_writes(cs, op);
  if (!op->inserted && !cs->keep_name)
    cs->next_name[0] = '\0'; /* the name was for this launch only */
  if (ref)
    *ref = op_ref(cs, id);
out:
  rp__depset_free(&deps);
  return st;
}
