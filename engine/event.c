/* engine/event.c — generational one-shot events.
 *
 * A handle is (generation << 32) | (tag << 23) | (slot + 1) (the tag names
 * the runtime, engine.h "Handle identity"). A slot is recycled when its
 * reference count drops to zero (the trigger holds one reference until it
 * completes the event, each handle handed out holds one); recycling bumps the
 * generation (31 bits: bit 63 of a handle marks a captured op reference),
 * so any older handle is detected as stale; a slot past generation
 * 2^31 - 1 retires (generation 0, never free again) rather than wrap.
 *
 * The common cases take no lock: allocation pops a lock-free free list,
 * triggering an event nobody registered a waiter on is one CAS, and a host
 * thread sleeps on the state word with a futex. Only waiter registration and
 * the trigger of an event that has waiters take the slot's mutex. */
#include "engine_impl.h"

#include <string.h>

static inline uint32_t ev_slot_of(rp_event e) {
  return ((uint32_t)e.id & RP_HANDLE_SLOT_MASK) - 1u;
}
static inline uint64_t ev_id(const rp_runtime *rt, uint32_t gen, uint32_t i) {
  return (uint64_t)gen << 32 | (uint64_t)rt->tag << RP_HANDLE_TAG_SHIFT |
         (uint64_t)(i + 1);
}
static inline uint32_t ev_gen_of(rp_event e) {
  return (uint32_t)(e.id >> 32);
}

static inline rp_event_slot *slot_at(const rp_event_table *et, uint32_t i) {
  return (rp_event_slot *)rp__ctable_at(&et->t, i);
}

/* Resolves a handle to its slot, or NULL when it is out of range or its
 * generation is not the slot's current one (recycled). */
void (*rp__event_resolved_hook)(rp_runtime *rt, rp_event e);

static rp_event_slot *ev_lookup(const rp_runtime *rt, rp_event e) {
  uint32_t lo = (uint32_t)e.id & RP_HANDLE_SLOT_MASK;
  if (lo == 0 || rp__handle_tag(e.id) != rt->tag || (e.id >> 63) ||
      lo - 1 >= atomic_load_explicit(&rt->events.t.size, memory_order_acquire))
    return NULL;
  rp_event_slot *s = slot_at(&rt->events, lo - 1);
  /* generation 0: a retired slot's, never handed out */
  if (ev_gen_of(e) == 0 ||
      atomic_load_explicit(&s->gen, memory_order_acquire) != ev_gen_of(e))
    return NULL;
  /* A free slot (no reference: never used, or recycled) holds no event:
   * its generation is the one its next event will get, so a handle that
   * names it was never handed out (a made-up or uninitialized one). A
   * waiter joining it would be dropped when the slot is taken, or wait
   * for an unrelated event. */
  if (atomic_load_explicit(&s->refs, memory_order_acquire) == 0)
    return NULL;
  return s;
}

/* The error for a handle ev_lookup refused (or whose slot was recycled
 * meanwhile): "[call: ]event 0x... is stale[note]". call names the public
 * entry point, NULL for none; note is "" or a hint to append. */
const char *rp__event_handle_note(const rp_runtime *rt, rp_event e) {
  if (e.id >> 63)
    return " (a captured op reference, not an event)";
  if (rp__handle_tag(e.id) != rt->tag)
    return " (a handle of another runtime, or no event handle)";
  return "";
}

static rp_status ev_stale(const rp_runtime *rt, rp_event e, const char *call,
                          const char *note) {
  const char *what = rp__event_handle_note(rt, e);
  if (*what)
    note = what;
  if (call)
    return rp__err(RP_ESTALE, "%s: event %#llx is stale%s", call,
                   (unsigned long long)e.id, note);
  return rp__err(RP_ESTALE, "event %#llx is stale%s", (unsigned long long)e.id,
                 note);
}
#define EV_RECYCLED " (released and recycled)" /* note: engine-internal */

static void slot_init_range(rp_event_table *et, uint32_t from, uint32_t to) {
  for (uint32_t i = from; i < to; i++) {
    rp_event_slot *s = slot_at(et, i);
    atomic_init(&s->state, RP_EV_PENDING);
    atomic_init(&s->gen, 1);
    atomic_init(&s->refs, 0);
    atomic_init(&s->poison, 0);
    atomic_init(&s->next_free, 0);
    atomic_init(&s->user, 0);
    pthread_mutex_init(&s->lock, NULL);
    s->waiters = NULL;
    s->why = NULL;
  }
}

rp_status rp__events_init(rp_event_table *et) {
  rp_status st = rp__ctable_init(&et->t, sizeof(rp_event_slot));
  if (st)
    return st;
  atomic_init(&et->free_head, 0);
  atomic_init(&et->reserved, 0);
  pthread_mutex_init(&et->grow_lock, NULL);
  return RP_OK;
}

void rp__events_fini(rp_event_table *et) {
  uint32_t n = atomic_load(&et->t.size);
  for (uint32_t i = 0; i < n; i++) {
    rp_event_slot *s = slot_at(et, i);
    /* no waiter is left: rp_runtime_destroy drained the ops and poisoned
     * the user events, whose completion ran and freed every waiter */
    pthread_mutex_destroy(&s->lock);
    free(s->why);
  }
  rp__ctable_fini(&et->t);
  pthread_mutex_destroy(&et->grow_lock);
}

/* Pushes slot i onto the free list. */
static void free_push(rp_event_table *et, uint32_t i) {
  rp_event_slot *s = slot_at(et, i);
  uint64_t head = atomic_load_explicit(&et->free_head, memory_order_relaxed);
  for (;;) {
    atomic_store_explicit(&s->next_free, (uint32_t)head, memory_order_relaxed);
    uint64_t nh = (head & 0xffffffff00000000ull) | (uint64_t)(i + 1);
    /* release: the slot's reset state is visible to the popper */
    if (atomic_compare_exchange_weak_explicit(&et->free_head, &head, nh,
                                              memory_order_release,
                                              memory_order_relaxed))
      return;
  }
}

/* Pops a free slot index, or UINT32_MAX when the list is empty. The tag in
 * the high half changes on every pop, so a concurrent pop/push/pop of the
 * same slot cannot make a stale CAS succeed (ABA). */
static uint32_t free_pop(rp_event_table *et) {
  uint64_t head = atomic_load_explicit(&et->free_head, memory_order_acquire);
  for (;;) {
    uint32_t top = (uint32_t)head;
    if (top == 0)
      return UINT32_MAX;
    rp_event_slot *s = slot_at(et, top - 1);
    uint32_t next = atomic_load_explicit(&s->next_free, memory_order_relaxed);
    uint64_t nh = ((head >> 32) + 1) << 32 | next;
    if (atomic_compare_exchange_weak_explicit(&et->free_head, &head, nh,
                                              memory_order_acquire,
                                              memory_order_acquire))
      return top - 1;
  }
}

static rp_status grow(rp_event_table *et) {
  pthread_mutex_lock(&et->grow_lock);
  rp_status st = RP_OK;
  /* Another thread may have grown the table meanwhile. */
  if ((uint32_t)atomic_load(&et->free_head) == 0) {
    uint32_t old = atomic_load(&et->t.size);
    st = rp__ctable_reserve(&et->t, old);
    if (st == RP_OK) {
      uint32_t now = atomic_load(&et->t.size);
      slot_init_range(et, old, now);
      for (uint32_t i = now; i-- > old;)
        free_push(et, i);
    }
  }
  pthread_mutex_unlock(&et->grow_lock);
  return st;
}

/* The detail of a table that could not grow (st): at its capacity, or out
 * of memory. */
static rp_status ev_full(rp_event_table *et, rp_status st) {
  if (atomic_load(&et->t.size) >= rp__ctable_capacity())
    return rp__err(st,
                   "the event table is full (%u events; an event keeps its "
                   "slot until it has completed and its references are "
                   "released: a pending one, such as a merge of an event "
                   "that never triggers, keeps it even once released)",
                   rp__ctable_capacity());
  return rp__err(st, "event table: out of memory");
}

rp_status rp__event_new(rp_runtime *rt, rp_event *out) {
  rp_event_table *et = &rt->events;
  uint32_t i;
  while ((i = free_pop(et)) == UINT32_MAX) {
    rp_status st = grow(et);
    if (st)
      return ev_full(et, st);
  }
  rp_event_slot *s = slot_at(et, i);
  /* release: a stale peek that reads this 0 (run_completed) sees the
   * generation the recycling bumped */
  atomic_store_explicit(&s->poison, 0, memory_order_release);
  atomic_store_explicit(&s->refs, 2, memory_order_relaxed);
  atomic_store_explicit(&s->user, 0, memory_order_relaxed);
  atomic_store_explicit(&s->yield_us, 0, memory_order_relaxed);
  s->waiters = NULL;
  atomic_store_explicit(&s->state, RP_EV_PENDING, memory_order_release);
  uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
  atomic_store_explicit(&s->released, 0, memory_order_relaxed);
  out->id = ev_id(rt, gen, i);
  return RP_OK;
}

/* The most events rp__event_reserve keeps free for all execs together. */
#define EV_RESERVE_MAX (1u << 20)

rp_status rp__event_reserve(rp_runtime *rt, uint32_t n) {
  rp_event_table *et = &rt->events;
  uint64_t total = atomic_fetch_add(&et->reserved, n) + n;
  uint32_t want = total < EV_RESERVE_MAX ? (uint32_t)total : EV_RESERVE_MAX;
  uint32_t *held = malloc(sizeof *held * (want ? want : 1));
  if (!held) {
    atomic_fetch_sub(&et->reserved, n);
    return rp__err(RP_ENOMEM, "event table: out of memory");
  }
  rp_status st = RP_OK;
  uint32_t k = 0;
  while (k < want) {
    uint32_t i = free_pop(et);
    if (i != UINT32_MAX)
      held[k++] = i;
    else if ((st = grow(et)) != RP_OK)
      break;
  }
  /* back in the reverse order, so the list reads as before */
  while (k-- > 0)
    free_push(et, held[k]);
  free(held);
  if (st) {
    atomic_fetch_sub(&et->reserved, n);
    return ev_full(et, st);
  }
  return RP_OK;
}

void rp__event_unreserve(rp_runtime *rt, uint32_t n) {
  atomic_fetch_sub(&rt->events.reserved, n);
}

void rp__event_set_yield(rp_runtime *rt, rp_event e, uint32_t us) {
  if (e.id == 0)
    return;
  atomic_store_explicit(&slot_at(&rt->events, ev_slot_of(e))->yield_us, us,
                        memory_order_relaxed);
}

/* Takes a reference unless the count is 0: a slot with no reference is
 * recycled (on the free list, or being taken off it), and a plain
 * increment would bring it back into use. 1 when taken; the caller then
 * re-checks the generation (the slot may hold another event by now). */
static int ev_try_ref(rp_event_slot *s) {
  uint32_t r = atomic_load_explicit(&s->refs, memory_order_relaxed);
  do {
    if (r == 0)
      return 0;
  } while (!atomic_compare_exchange_weak_explicit(
      &s->refs, &r, r + 1, memory_order_acquire, memory_order_relaxed));
  return 1;
}

/* Drops one reference; the last one recycles the slot. */
static void ev_unref(rp_event_table *et, uint32_t i, rp_event_slot *s) {
  /* acq_rel: every use of the slot by this holder happens before the
   * recycling, which happens after every other holder's uses. */
  uint32_t old = atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel);
  RP_ASSERT(old > 0);
  if (old == 1) {
    free(s->why); /* the last holder: nobody reads it any more */
    s->why = NULL;
    /* 31 bits: the handle's bit 63 marks a captured op reference (a
     * generation past 2^31 - 1 would make this slot's events read as
     * one). A slot whose generations are used up retires instead of
     * wrapping: its generation becomes 0, which no handle carries, and it
     * never goes back on the free list, so no handle kept while its slot
     * was reused names a later event (one slot lost per 2^31 - 1 events
     * in it). Only the last holder writes it. */
    uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed) + 1;
    int retire = !(gen & 0x7fffffffu);
    atomic_store_explicit(&s->gen, retire ? 0 : gen, memory_order_release);
    if (!retire)
      free_push(et, i);
  }
}

/* A reference to s while it still holds e: 1, or 0 (none taken) when the
 * slot was recycled meanwhile (a stale use of e's handle). */
static int ev_hold(rp_runtime *rt, rp_event_slot *s, rp_event e) {
  if (!ev_try_ref(s))
    return 0;
  if (atomic_load_explicit(&s->gen, memory_order_acquire) == ev_gen_of(e))
    return 1;
  ev_unref(&rt->events, ev_slot_of(e), s);
  return 0;
}

void rp__event_prefetch(rp_runtime *rt, rp_event e) {
  if (e.id != 0)
    __builtin_prefetch(slot_at(&rt->events, ev_slot_of(e)), 1, 3);
}

/* The detail of the event whose waiters run on this thread (nested
 * completions save and restore it). */
static _Thread_local const char *tl_waiter_why;

/* The state a thread runs an event's waiters in, saved around them: they
 * are callbacks, not the replay's task this worker may be running
 * (launches and polls are theirs to make: a refused one flagged the
 * replay as a task's contract violation), and a failure's waiters find
 * its detail in rp_error_detail(), the thread's own coming back after. */
typedef struct waiter_ctx {
  const char *why;
  const char **violation;
  int keep;    /* restore the thread's detail after */
  char *saved; /* it, when it had one (malloc'd; NULL: empty, or no memory) */
} waiter_ctx;

/* Before each waiter of a poisoned event: what failed (a waiter before
 * it may have set another detail). */
static void waiter_say(rp_event e, rp_status st, const char *why) {
  rp_error_set(st, "event %#llx was poisoned with %s: %s",
               (unsigned long long)e.id, rp_status_name(st),
               why ? why : "no detail recorded");
}

/* The thread's detail is kept across the waiters where it is someone's:
 * around a poisoned event's (they are told what failed), and on a worker
 * inside a replay (a replay task's own words, which its failure reports,
 * must not be wiped or replaced by a callback's). A copy only when there
 * is a detail to keep: no stack buffer on a completion's frame (merges
 * nest), no allocation where the detail is empty. */
static void waiters_enter(waiter_ctx *c, rp_status st, const char *why) {
  rp__tl_in_callback++; /* calls that would wait refuse instead */
  c->why = tl_waiter_why;
  c->violation = rp__tl_replay_violation;
  tl_waiter_why = st != RP_OK ? why : NULL;
  rp__tl_replay_violation = NULL;
  c->keep = st != RP_OK || c->violation;
  c->saved =
      c->keep && rp_error_detail()[0] ? rp__strdup(rp_error_detail()) : NULL;
}

static void waiters_leave(waiter_ctx *c) {
  if (c->keep) {
    if (c->saved)
      rp_error_set(RP_OK, "%s", c->saved);
    else
      rp_error_set(RP_OK, NULL);
    free(c->saved);
  }
  rp__tl_replay_violation = c->violation;
  tl_waiter_why = c->why;
  rp__tl_in_callback--;
}

const char *rp__event_waiter_why(void) {
  return tl_waiter_why;
}

const char *rp__event_why(const rp_runtime *rt, rp_event e) {
  rp_status st = rp__event_peek(rt, e); /* acquire: why is published */
  return st == RP_OK || st == RP_EAGAIN
             ? NULL
             : slot_at(&rt->events, ev_slot_of(e))->why;
}

void rp__event_complete(rp_runtime *rt, rp_event e, rp_status st) {
  rp__event_complete_why(rt, e, st, NULL);
}

void rp__event_complete_why(rp_runtime *rt, rp_event e, rp_status st,
                            const char *why) {
  if (e.id == 0)
    return;
  uint32_t i = ev_slot_of(e);
  rp_event_slot *s = slot_at(&rt->events, i);
  RP_ASSERT(atomic_load_explicit(&s->gen, memory_order_relaxed) ==
            ev_gen_of(e));
  uint32_t fin = st == RP_OK ? RP_EV_TRIGGERED : RP_EV_POISONED;
  if (st != RP_OK) {
    atomic_store_explicit(&s->poison, (int32_t)st, memory_order_relaxed);
    /* published by the state store below (release), as the status is */
    if (why && *why)
      s->why = strdup(why);
  }
  /* release: the work this event stands for (and the poison status) is
   * visible to whoever observes the new state with acquire. */
  uint32_t old = atomic_load_explicit(&s->state, memory_order_relaxed);
  uint32_t nw;
  do {
    RP_ASSERT((old & RP_EV_STATE_MASK) == RP_EV_PENDING);
    nw = (old & ~RP_EV_STATE_MASK) | fin;
  } while (!atomic_compare_exchange_weak_explicit(
      &s->state, &old, nw, memory_order_acq_rel, memory_order_relaxed));
  if (old & RP_EV_HAS_WAITERS) {
    /* A registration that set HAS_WAITERS holds the lock until its node is
     * linked: taking the lock here sees the whole list. */
    pthread_mutex_lock(&s->lock);
    rp_ev_waiter *w = s->waiters;
    s->waiters = NULL;
    pthread_mutex_unlock(&s->lock);
    waiter_ctx c;
    waiters_enter(&c, st, s->why);
    while (w) {
      rp_ev_waiter *next = w->next; /* fn may free w */
      if (st != RP_OK)
        waiter_say(e, st, s->why);
      w->fn(w, st);
      w = next;
    }
    waiters_leave(&c);
  }
  if (old & RP_EV_SLEEPERS)
    rp__futex_wake(&s->state, 0x7fffffff);
  ev_unref(&rt->events, i, s);
}

rp_status rp__event_retain(rp_runtime *rt, rp_event e) {
  if (e.id == 0)
    return RP_OK;
  rp_event_slot *s = ev_lookup(rt, e);
  if (!s || !ev_hold(rt, s, e)) /* released and recycled meanwhile */
    return ev_stale(rt, e, NULL, EV_RECYCLED);
  return RP_OK;
}

void rp__event_unref(rp_runtime *rt, rp_event e) {
  if (e.id == 0)
    return;
  rp_event_slot *s = slot_at(&rt->events, ev_slot_of(e));
  RP_DASSERT(atomic_load(&s->gen) == ev_gen_of(e));
  ev_unref(&rt->events, ev_slot_of(e), s);
}

void rp__event_retain_n(rp_runtime *rt, rp_event e, uint32_t n) {
  if (e.id == 0 || n == 0)
    return;
  rp_event_slot *s = slot_at(&rt->events, ev_slot_of(e));
  RP_DASSERT(atomic_load(&s->gen) == ev_gen_of(e));
  atomic_fetch_add_explicit(&s->refs, n, memory_order_relaxed);
}

rp_status rp__event_peek(const rp_runtime *rt, rp_event e) {
  if (e.id == 0)
    return RP_OK;
  rp_event_slot *s = slot_at(&rt->events, ev_slot_of(e));
  uint32_t v = atomic_load_explicit(&s->state, memory_order_acquire);
  switch (v & RP_EV_STATE_MASK) {
  case RP_EV_TRIGGERED:
    return RP_OK;
  case RP_EV_POISONED:
    return (rp_status)atomic_load_explicit(&s->poison, memory_order_relaxed);
  default:
    return RP_EAGAIN;
  }
}

rp_status rp__event_peek_live(const rp_runtime *rt, rp_event e) {
  if (e.id == 0)
    return RP_OK;
  rp_event_slot *s = ev_lookup(rt, e); /* the generation, first */
  if (!s)
    return RP_ESTALE;
  rp_status st = rp__event_peek(rt, e); /* acquire: the check below follows */
  if (atomic_load_explicit(&s->gen, memory_order_acquire) != ev_gen_of(e))
    return RP_ESTALE; /* recycled meanwhile: st may be another event's */
  return st;
}

int rp__event_live(const rp_runtime *rt, rp_event e) {
  return e.id == 0 || ev_lookup(rt, e) != NULL;
}

int rp__event_is_user(const rp_runtime *rt, rp_event e) {
  rp_event_slot *s = e.id ? ev_lookup(rt, e) : NULL;
  if (!s)
    return -1;
  int user = atomic_load_explicit(&s->user, memory_order_acquire) != 0;
  if (atomic_load_explicit(&s->gen, memory_order_acquire) != ev_gen_of(e))
    return -1; /* recycled meanwhile: the word may be another event's */
  return user;
}

/* fn run at once (the event completed already) is a callback as on the
 * trigger path: calls that would wait refuse there instead. */
static void run_now(rp_ev_waiter *w, rp_event e, rp_status st,
                    const char *why) {
  waiter_ctx c;
  waiters_enter(&c, st, why);
  if (st != RP_OK)
    waiter_say(e, st, why);
  w->fn(w, st);
  waiters_leave(&c);
}

/* Runs w at once for e, completed with done (as peeked). The handle's
 * owner may release it meanwhile (a stale use): the slot may be recycled
 * and taken by a new event, whose initialization a peek can catch half
 * done (the old state with a cleared status: "triggered"). The generation
 * read after the peek tells; then a poisoned e's detail is read holding a
 * reference. Stale: RP_ESTALE, w not run. */
static rp_status run_completed(rp_runtime *rt, rp_event_slot *s, rp_event e,
                               rp_ev_waiter *w, rp_status done) {
  atomic_thread_fence(memory_order_acquire); /* pairs with rp__event_new */
  if (atomic_load_explicit(&s->gen, memory_order_acquire) != ev_gen_of(e))
    return ev_stale(rt, e, NULL, EV_RECYCLED);
  if (done == RP_OK) {
    run_now(w, e, RP_OK, NULL);
    return RP_OK;
  }
  if (!ev_hold(rt, s, e))
    return ev_stale(rt, e, NULL, EV_RECYCLED);
  run_now(w, e, done, s->why); /* published with the state, as done */
  ev_unref(&rt->events, ev_slot_of(e), s);
  return RP_OK;
}

rp_status rp__event_add_waiter(rp_runtime *rt, rp_event e, rp_ev_waiter *w) {
  if (e.id == 0) {
    run_now(w, e, RP_OK, NULL);
    return RP_OK;
  }
  rp_event_slot *s = ev_lookup(rt, e);
  if (!s)
    return ev_stale(rt, e, NULL, EV_RECYCLED);
  if (rp__event_resolved_hook)
    rp__event_resolved_hook(rt, e);
  /* Completed already: no list to join, no lock (acquire: the event's work
   * happens before fn). */
  rp_status done = rp__event_peek(rt, e);
  if (done != RP_EAGAIN)
    return run_completed(rt, s, e, w, done);
  pthread_mutex_lock(&s->lock);
  uint32_t old = atomic_load_explicit(&s->state, memory_order_acquire);
  while ((old & RP_EV_STATE_MASK) == RP_EV_PENDING &&
         !(old & RP_EV_HAS_WAITERS)) {
    if (atomic_compare_exchange_weak_explicit(
            &s->state, &old, old | RP_EV_HAS_WAITERS, memory_order_acq_rel,
            memory_order_acquire))
      old |= RP_EV_HAS_WAITERS;
  }
  /* A pending state may be the next event's: the handle's owner released
   * it meanwhile (a stale use), its slot recycled and taken again. That
   * state was stored after the generation's bump (acquire above), and with
   * HAS_WAITERS set the slot cannot be recycled before the lock is given
   * back: the generation tells, and w must not join another event's list
   * (a HAS_WAITERS set there is harmless: its trigger finds its own). */
  if ((old & RP_EV_STATE_MASK) == RP_EV_PENDING &&
      atomic_load_explicit(&s->gen, memory_order_acquire) != ev_gen_of(e)) {
    pthread_mutex_unlock(&s->lock);
    return ev_stale(rt, e, NULL, EV_RECYCLED);
  }
  if ((old & RP_EV_STATE_MASK) == RP_EV_PENDING) {
    w->next = s->waiters;
    s->waiters = w;
    pthread_mutex_unlock(&s->lock);
    return RP_OK;
  }
  pthread_mutex_unlock(&s->lock);
  return run_completed(rt, s, e, w, rp__event_peek(rt, e));
}

/* ---------------------------------------------------------------------- */
/* Public API */

rp_status rp_event_create(rp_runtime *rt, rp_event *out) {
  rp_status st = rp__rt_check(rt, "rp_event_create");
  if (st)
    return st;
  if (!out)
    return rp__err(RP_EINVAL, "rp_event_create: NULL argument");
  if (atomic_load(&rt->closing))
    return rp__err(RP_EBUSY,
                   "rp_event_create: the runtime is being destroyed "
                   "(an event made by a callback or task that "
                   "rp_runtime_destroy runs would outlive the runtime)");
  st = rp__event_new(rt, out);
  if (st)
    return rp__err_prefix(st, "rp_event_create: ");
  atomic_store_explicit(&slot_at(&rt->events, ev_slot_of(*out))->user, 1,
                        memory_order_relaxed);
  return RP_OK;
}

/* A user event's `user` word: 1 pending, 2 once a trigger, poison or
 * cancel claimed its completion (only the claimer completes it; an event
 * the runtime completes has 0 and cannot be claimed). */
static int claim_user(rp_event_slot *s) {
  uint32_t pending = 1;
  return atomic_compare_exchange_strong_explicit(
      &s->user, &pending, 2, memory_order_acq_rel, memory_order_acquire);
}

uint32_t rp__events_cancel_user(rp_runtime *rt, rp_status st) {
  uint32_t n = atomic_load(&rt->events.t.size), count = 0;
  for (uint32_t i = 0; i < n; i++) {
    rp_event_slot *s = slot_at(&rt->events, i);
    if (atomic_load(&s->refs) == 0 || !claim_user(s))
      continue;
    rp_event e = {ev_id(rt, atomic_load(&s->gen), i)};
    rp__event_complete_why(rt, e, st,
                           "poisoned by rp_runtime_destroy: still pending "
                           "when the runtime went down");
    count++;
  }
  return count;
}

static rp_status user_complete(rp_runtime *rt, rp_event e, rp_status st,
                               const char *what) {
  rp_status cst = rp__rt_check(rt, what);
  if (cst)
    return cst;
  if (e.id == 0)
    return rp__err(RP_EINVAL, "%s: RP_NO_EVENT cannot be completed", what);
  rp_event_slot *s = ev_lookup(rt, e);
  if (s && rp__event_resolved_hook)
    rp__event_resolved_hook(rt, e);
  /* held: a trigger racing this one (of a released handle) may complete
   * the event and recycle its slot, and another thread reuse it; the claim
   * below must not take that new event's completion */
  if (!s || !ev_hold(rt, s, e))
    return ev_stale(rt, e, what, s ? EV_RECYCLED : "");
  /* Claim the completion: of two threads completing one event, one wins
   * and the other is told it already completed. */
  if (!claim_user(s)) {
    int user = atomic_load_explicit(&s->user, memory_order_acquire) != 0;
    ev_unref(&rt->events, ev_slot_of(e), s);
    return rp__err(RP_EINVAL,
                   user ? "%s: event %#llx already completed"
                        : "%s: event %#llx is not an rp_event_create event: "
                          "the runtime completes it",
                   what, (unsigned long long)e.id);
  }
  rp__event_complete_why(rt, e, st, st ? "poisoned by rp_event_poison" : NULL);
  ev_unref(&rt->events, ev_slot_of(e), s);
  return RP_OK;
}

rp_status rp_event_trigger(rp_runtime *rt, rp_event e) {
  return user_complete(rt, e, RP_OK, "rp_event_trigger");
}

rp_status rp_event_poison(rp_runtime *rt, rp_event e, rp_status why) {
  if (why >= 0)
    return rp__err(RP_EINVAL, "rp_event_poison: status %d is not an error",
                   (int)why);
  if (!rp__status_known(why)) /* waiters could not name it */
    return rp__err(RP_EINVAL,
                   "rp_event_poison: status %d is not a reprise status "
                   "(RP_STATUS_MAP)",
                   (int)why);
  if (!rp__status_failure(why)) /* a query would say "pending" */
    return rp__err(RP_EINVAL, "rp_event_poison: RP_EAGAIN would read as "
                              "still pending, not as a failure");
  return user_complete(rt, e, why, "rp_event_poison");
}

/* The poison status st of e, whose slot s the caller holds a reference
 * to, with its detail: what failed, where the poisoning op said. */
static rp_status poisoned(rp_event_slot *s, rp_event e, rp_status st,
                          const char *what) {
  const char *why = s->why; /* published with the poisoned state */
  return rp__err(st, "%s: event %#llx was poisoned with %s: %s", what,
                 (unsigned long long)e.id, rp_status_name(st),
                 why ? why : "no detail recorded (the failing op gave none)");
}

rp_status rp_event_query(const rp_runtime *rt, rp_event e) {
  rp_status cst = rp__rt_check(rt, "rp_event_query");
  if (cst)
    return cst;
  if (e.id == 0)
    return RP_OK;
  rp_event_slot *s = ev_lookup(rt, e);
  if (!s)
    return ev_stale(rt, e, "rp_event_query", "");
  rp_status st = rp__event_peek(rt, e);
  /* Re-check: the slot may have been recycled while we read it. */
  if (atomic_load_explicit(&s->gen, memory_order_acquire) != ev_gen_of(e))
    return ev_stale(rt, e, "rp_event_query", "");
  if (RP_LIKELY(st == RP_OK || st == RP_EAGAIN))
    return st;
  /* Failure path: hold the slot while its detail is read (the table's
   * reference counts are atomics, mutable through a const runtime). */
  rp_runtime *mrt = (rp_runtime *)rt;
  if (!ev_hold(mrt, s, e))
    return ev_stale(rt, e, "rp_event_query", "");
  st = poisoned(s, e, st, "rp_event_query");
  ev_unref(&mrt->events, ev_slot_of(e), s);
  return st;
}

/* Spins, then sleeps on the state word until e completes or the deadline
 * passes. The caller holds a reference, so the slot cannot be recycled. */
static rp_status wait_loop(rp_runtime *rt, rp_event_slot *s, rp_event e,
                           int64_t timeout_ns) {
  uint64_t deadline =
      timeout_ns < 0 ? UINT64_MAX : rp__now_ns() + (uint64_t)timeout_ns;
  /* workers block here only for preconditions: spin like any lane wait;
   * host threads yield */
  rp_backoff b = RP_BACKOFF_INIT;
  if (!rp__tl_replay_violation) {
    b = (rp_backoff)RP_BACKOFF_HOST;
    b.spin_ns = rt->host_spin_ns;
    b.yield_ns =
        1000ull * atomic_load_explicit(&s->yield_us, memory_order_relaxed);
  }
  for (;;) {
    uint32_t v = atomic_load_explicit(&s->state, memory_order_acquire);
    if ((v & RP_EV_STATE_MASK) != RP_EV_PENDING)
      return rp__event_peek(rt, e);
    if (timeout_ns != 0 && rp__backoff(&b) &&
        (b.n < 64 || rp__now_ns() < deadline))
      continue;
    uint64_t now = rp__now_ns();
    if (now >= deadline)
      return rp__err(RP_ETIMEDOUT,
                     "rp_event_wait: event %#llx not triggered within %lld ns",
                     (unsigned long long)e.id, (long long)timeout_ns);
    /* Announce the sleeper before sleeping; the trigger wakes all sleepers
     * when it sees the bit (seq_cst pairs with its CAS). */
    if (!(v & RP_EV_SLEEPERS) &&
        !atomic_compare_exchange_strong(&s->state, &v, v | RP_EV_SLEEPERS))
      continue;
    rp__futex_wait(&s->state, v | RP_EV_SLEEPERS,
                   deadline == UINT64_MAX ? -1 : (int64_t)(deadline - now));
  }
}

rp_status rp__event_block_serving(rp_runtime *rt, rp_event e) {
  if (e.id == 0)
    return RP_OK;
  rp_event_slot *s = slot_at(&rt->events, ev_slot_of(e));
  rp_backoff b = RP_BACKOFF_INIT;
  for (;;) {
    uint32_t v = atomic_load_explicit(&s->state, memory_order_acquire);
    if ((v & RP_EV_STATE_MASK) != RP_EV_PENDING)
      return rp__event_peek(rt, e);
    if (rp__worker_serve()) {
      b = (rp_backoff)RP_BACKOFF_INIT;
      continue;
    }
    if (rp__backoff(&b))
      continue;
    if (!(v & RP_EV_SLEEPERS) &&
        !atomic_compare_exchange_strong(&s->state, &v, v | RP_EV_SLEEPERS))
      continue;
    rp__worker_block_wait(&s->state, v | RP_EV_SLEEPERS);
  }
}

rp_status rp__event_block(rp_runtime *rt, rp_event e) {
  if (e.id == 0)
    return RP_OK;
  rp_status st = rp__event_peek(rt, e);
  if (st != RP_EAGAIN)
    return st;
  return wait_loop(rt, slot_at(&rt->events, ev_slot_of(e)), e, -1);
}

rp_status rp_event_wait(rp_runtime *rt, rp_event e, int64_t timeout_ns) {
  rp_status cst = rp__rt_check(rt, "rp_event_wait");
  if (cst)
    return cst;
  if ((cst = rp__refuse_in_replay("rp_event_wait")) != RP_OK)
    return cst;
  if (e.id == 0)
    return RP_OK;
  rp_event_slot *s = ev_lookup(rt, e);
  if (!s)
    return ev_stale(rt, e, "rp_event_wait", "");
  /* Hold a reference while waiting so the slot cannot be recycled under us
   * (the caller might release its handle from another thread). */
  if (!ev_hold(rt, s, e))
    return ev_stale(rt, e, "rp_event_wait", "");
  /* a callback may poll (timeout 0) or wait for what is complete */
  if (rp__tl_in_callback && timeout_ns != 0 &&
      rp__event_peek(rt, e) == RP_EAGAIN) {
    ev_unref(&rt->events, ev_slot_of(e), s);
    return rp__refuse_in_callback("rp_event_wait");
  }
  rp_status st = wait_loop(rt, s, e, timeout_ns);
  if (st != RP_OK && st == rp__event_peek(rt, e))
    st = poisoned(s, e, st, "rp_event_wait");
  ev_unref(&rt->events, ev_slot_of(e), s);
  return st;
}

typedef struct user_waiter {
  rp_ev_waiter w;
  void (*cb)(void *, rp_status);
  void *arg;
} user_waiter;

static void user_waiter_fn(rp_ev_waiter *w, rp_status st) {
  user_waiter *u = (user_waiter *)w;
  u->cb(u->arg, st);
  free(u);
}

rp_status rp_event_on_complete(rp_runtime *rt, rp_event e,
                               void (*cb)(void *arg, rp_status st), void *arg) {
  rp_status cst = rp__rt_check(rt, "rp_event_on_complete");
  if (cst)
    return cst;
  if (!cb)
    return rp__err(RP_EINVAL, "rp_event_on_complete: NULL argument");
  if (!rp__event_live(rt, e))
    return ev_stale(rt, e, "rp_event_on_complete", "");
  user_waiter *u = malloc(sizeof *u);
  if (!u)
    return rp__err(RP_ENOMEM, "rp_event_on_complete: out of memory");
  u->w.fn = user_waiter_fn;
  u->cb = cb;
  u->arg = arg;
  rp_status st = rp__event_add_waiter(rt, e, &u->w);
  if (st)
    free(u);
  return st;
}

typedef struct merge_state {
  rp_runtime *rt;
  rp_event out;
  _Atomic uint32_t remaining;
  _Atomic int32_t poison;
  char *why; /* the first poison's detail, passed on */
} merge_state;

/* One waiter node per input, with a pointer back to the shared state. */
typedef struct merge_node {
  rp_ev_waiter w; /* first member: the waiter pointer is the node pointer */
  merge_state *m;
} merge_node;

static void merge_done(merge_state *m, rp_status st, const char *why) {
  if (st != RP_OK) {
    int32_t zero = 0;
    if (atomic_compare_exchange_strong(&m->poison, &zero, (int32_t)st) && why)
      m->why = strdup(why); /* read by the last one, after `remaining` */
  }
  if (atomic_fetch_sub_explicit(&m->remaining, 1, memory_order_acq_rel) == 1) {
    rp_status fin = (rp_status)atomic_load(&m->poison);
    rp_runtime *rt = m->rt;
    rp_event out = m->out;
    char *fin_why = m->why;
    free(m); /* the nodes live in the same block */
    rp__event_complete_why(rt, out, fin, fin_why);
    free(fin_why);
  }
}

static void merge_fn(rp_ev_waiter *w, rp_status st) {
  merge_done(((merge_node *)w)->m, st, rp__event_waiter_why());
}

rp_status rp_event_merge(rp_runtime *rt, const rp_event *evs, size_t n,
                         rp_event *out) {
  rp_status cst = rp__rt_check(rt, "rp_event_merge");
  if (cst)
    return cst;
  if (!out || (n && !evs))
    return rp__err(RP_EINVAL, "rp_event_merge: NULL argument");
  if (n > UINT32_MAX - 1)
    return rp__err(RP_ERANGE, "rp_event_merge: %zu events", n);
  for (size_t i = 0; i < n; i++)
    if (!rp__event_live(rt, evs[i]))
      return rp__err(
          RP_ESTALE, "rp_event_merge: evs[%zu] (event %#llx) is stale%s", i,
          (unsigned long long)evs[i].id, rp__event_handle_note(rt, evs[i]));
  size_t bytes;
  if (!rp__mul_ok(n, sizeof(merge_node), &bytes) ||
      !rp__add_ok(bytes, sizeof(merge_state), &bytes))
    return rp__err(RP_ERANGE, "rp_event_merge: too many events");
  merge_state *m = malloc(bytes);
  if (!m)
    return rp__err(RP_ENOMEM, "rp_event_merge: out of memory");
  rp_status st = rp__event_new(rt, out);
  if (st) {
    free(m);
    return rp__err_prefix(st, "rp_event_merge: ");
  }
  m->rt = rt;
  m->out = *out;
  m->why = NULL;
  atomic_init(&m->poison, 0);
  /* One extra count held while registering, so the merge cannot complete
   * (and free m) before every node is registered. */
  atomic_init(&m->remaining, (uint32_t)n + 1);
  merge_node *nodes = (merge_node *)(void *)(m + 1);
  for (size_t i = 0; i < n; i++) {
    nodes[i].w.fn = merge_fn;
    nodes[i].m = m;
    /* Liveness was checked above; a concurrent release by another thread is
     * a caller bug, reported as stale and counted as done. */
    if (rp__event_add_waiter(rt, evs[i], &nodes[i].w) != RP_OK)
      merge_done(m, RP_ESTALE, "rp_event_merge: an input event went stale");
  }
  merge_done(m, RP_OK, NULL);
  return RP_OK;
}

/* The handle's own reference goes once: a second release of an event
 * still pending (its slot not yet recycled) is refused, else it would take
 * the trigger's reference and recycle the slot under its waiters. */
rp_status rp_event_release(rp_runtime *rt, rp_event e) {
  rp_status st = rp__rt_check(rt, "rp_event_release");
  if (st)
    return st;
  if (e.id == 0)
    return RP_OK;
  rp_event_slot *s = ev_lookup(rt, e);
  if (s && rp__event_resolved_hook)
    rp__event_resolved_hook(rt, e);
  /* held: a second release racing a trigger must not mark (and drop a
   * reference of) the event that reuses the slot once it recycles */
  if (!s || !ev_hold(rt, s, e))
    return ev_stale(rt, e, "rp_event_release", s ? EV_RECYCLED : "");
  uint32_t i = ev_slot_of(e);
  if (atomic_exchange_explicit(&s->released, 1, memory_order_relaxed)) {
    ev_unref(&rt->events, i, s);
    return rp__err(RP_ESTALE,
                   "rp_event_release: event %#llx was already "
                   "released (it is still pending)",
                   (unsigned long long)e.id);
  }
  ev_unref(&rt->events, i, s); /* the handle's reference */
  ev_unref(&rt->events, i, s); /* ours */
  return RP_OK;
}
