/* engine/queue.h — the in-order work queue every processor thread drains (CPU
 * workers, GPU driver threads), with its sleep/wake protocol.
 *
 * The queue is an intrusive multi-producer single-consumer list (Vyukov): a
 * push is one atomic exchange, a pop touches only consumer-owned state,
 * nothing is allocated. Any thread may push; only the owning thread pops.
 *
 * Sleep/wake (a Dekker pair on seq_cst operations): the consumer announces
 * `sleeping`, re-checks the queue (and whatever else it serves), then waits on
 * the futex word `wake_seq`; a producer pushes, then loads `sleeping` and, if
 * set, bumps `wake_seq` and wakes. Either the consumer's re-check sees the
 * push or the producer sees the announcement: no lost wake-up.
 *
 * Consumer loop shape:
 *   for (;;) {
 *     if ((w = rp__queue_pop(q))) { run(w); continue; }
 *     ...spin a while...
 *     uint32_t seq = rp__queue_sleep_begin(q);
 *     if (rp__queue_nonempty(q) || stop) { rp__queue_sleep_end(q); continue; }
 *     rp__queue_sleep_wait(q, seq);
 *     rp__queue_sleep_end(q);
 *   }
 * Private to libreprise. */
#ifndef RP_QUEUE_H
#define RP_QUEUE_H

#include "engine.h"

typedef struct rp_queue {
  /* producer side */
  RP_ALIGNED_LINE _Atomic(rp_work *) tail;
  /* consumer side */
  RP_ALIGNED_LINE rp_work *head;
  rp_work stub;
  /* sleep/wake: the consumer sleeps on wake_seq while `sleeping` is set */
  RP_ALIGNED_LINE _Atomic uint32_t wake_seq;
  _Atomic uint32_t sleeping;
} rp_queue;

static inline void rp__queue_init(rp_queue *q) {
  atomic_init(&q->stub.next, NULL);
  q->head = &q->stub;
  atomic_init(&q->tail, &q->stub);
  atomic_init(&q->wake_seq, 0);
  atomic_init(&q->sleeping, 0);
}

/* Any thread. Does not wake the consumer: call rp__queue_wake after. */
static inline void rp__queue_push(rp_queue *q, rp_work *n) {
  atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
  /* seq_cst exchange: orders the push before the producer's later load of
   * `sleeping` (pairs with the consumer's store of `sleeping` before its
   * emptiness re-check). */
  rp_work *prev = atomic_exchange(&q->tail, n);
  /* release: n's contents are visible to the consumer that follows prev */
  atomic_store_explicit(&prev->next, n, memory_order_release);
}

/* Consumer only. NULL when empty or when a producer is between its two steps
 * (the caller retries). The returned item is no longer referenced by the
 * queue and may be pushed again at once. */
static inline rp_work *rp__queue_pop(rp_queue *q) {
  rp_work *head = q->head;
  rp_work *next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (head == &q->stub) {
    if (!next)
      return NULL;
    q->head = next;
    head = next;
    next = atomic_load_explicit(&next->next, memory_order_acquire);
  }
  if (next) {
    q->head = next;
    return head;
  }
  if (head != atomic_load(&q->tail))
    return NULL;
  rp__queue_push(q, &q->stub);
  next = atomic_load_explicit(&head->next, memory_order_acquire);
  if (next) {
    q->head = next;
    return head;
  }
  return NULL;
}

/* Consumer only: 1 when something was pushed that pop has not returned yet
 * (including a push still between its two steps). */
static inline int rp__queue_nonempty(rp_queue *q) {
  return !(q->head == &q->stub &&
           atomic_load_explicit(&q->stub.next, memory_order_acquire) == NULL &&
           atomic_load(&q->tail) == &q->stub);
}

/* Producer side, after a push: wakes the consumer if it announced sleep. */
static inline void rp__queue_wake(rp_queue *q) {
  if (atomic_load(&q->sleeping)) {
    atomic_fetch_add(&q->wake_seq, 1);
    rp__futex_wake(&q->wake_seq, 1);
  }
}

/* Wakes the consumer unconditionally (after setting a stop flag it re-checks
 * before sleeping). */
static inline void rp__queue_kick(rp_queue *q) {
  atomic_fetch_add(&q->wake_seq, 1);
  rp__futex_wake(&q->wake_seq, 1);
}

/* Consumer: announces sleep; returns the futex value to wait on. The caller
 * must then re-check the queue and its other wake conditions. */
static inline uint32_t rp__queue_sleep_begin(rp_queue *q) {
  uint32_t seq = atomic_load(&q->wake_seq);
  /* seq_cst store: ordered before the caller's re-check loads */
  atomic_store(&q->sleeping, 1);
  return seq;
}

/* Consumer: sleeps until a wake or kick changed wake_seq from seq (spurious
 * returns allowed: the loop re-checks). */
static inline void rp__queue_sleep_wait(rp_queue *q, uint32_t seq) {
  rp__futex_wait(&q->wake_seq, seq, -1);
}

static inline void rp__queue_sleep_end(rp_queue *q) {
  atomic_store(&q->sleeping, 0);
}

#endif
