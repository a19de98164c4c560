/* engine/gate.c — "run this on a processor once these events completed":
 * the engine's one scheduling primitive for eager work. */
#include "engine_impl.h"

#include <stdlib.h>
#include <string.h>

static void gate_open(rp_gate *g) {
  rp__proc_enqueue(g->rt, g->proc, &g->work);
}

/* why: the poison's detail (NULL: none), kept by the first poison. */
static void gate_count(rp_gate *g, rp_status st, const char *why) {
  if (st != RP_OK) {
    int32_t zero = 0;
    if (atomic_compare_exchange_strong(&g->poison, &zero, (int32_t)st) && why)
      g->why = strdup(why);
  }
  /* acq_rel: the last decrementer sees every poison store before it */
  if (atomic_fetch_sub_explicit(&g->remaining, 1, memory_order_acq_rel) == 1)
    gate_open(g);
}

static void gate_waiter_fn(rp_ev_waiter *w, rp_status st) {
  rp_gate_waiter *gw = (rp_gate_waiter *)w;
  if (gw->order) /* only ordered after it: its failure is not ours */
    gate_count(gw->g, RP_OK, NULL);
  else
    gate_count(gw->g, st, rp__event_waiter_why());
}

rp_status rp__gate_submit(rp_runtime *rt, rp_gate *g, rp_proc proc,
                          const rp_event *pre, const uint8_t *order,
                          uint32_t npre, rp_gate_waiter *waiters) {
  for (uint32_t i = 0; i < npre; i++)
    if (!rp__event_live(rt, pre[i]))
      return rp__err(RP_ESTALE, "precondition event %#llx is stale",
                     (unsigned long long)pre[i].id);
  g->rt = rt;
  g->proc = proc;
  g->why = NULL;
  atomic_init(&g->poison, 0);
  /* +1 held during registration so the gate cannot open early */
  atomic_init(&g->remaining, npre + 1);
  for (uint32_t i = 0; i < npre; i++) {
    waiters[i].w.fn = gate_waiter_fn;
    waiters[i].g = g;
    waiters[i].order = order && order[i];
    /* rp__event_add_waiter runs fn at once, lock-free, for an event that
     * already completed */
    if (rp__event_add_waiter(rt, pre[i], &waiters[i].w) != RP_OK)
      gate_count(g, RP_ESTALE, "a precondition event went stale");
  }
  gate_count(g, RP_OK, NULL);
  return RP_OK;
}
