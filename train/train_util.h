/* train/train_util.h — what the training code (train/) and the tools above
 * it share besides the public header: error prefixes through the public
 * error channel, a monotonic clock (bounded file reading is the library's:
 * rp_file_read_regular), and what the MLP and the GPT both do: name
 * instances and recorded launches, record a step, replay it.
 * Uses only reprise.h and libc: train/ is built as a client of the library
 * would build it. */
#ifndef RP_TRAIN_UTIL_H
#define RP_TRAIN_UTIL_H

#include "reprise.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Keeps the thread's error detail (rp_error_detail) but prefixes it with
 * the formatted text; returns st. */
rp_status rp_train_err_prefix(rp_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Waits for the events evs[0..n) of an eager call's last ops and releases
 * them. issued, the status of issuing the ops, wins: what was issued is
 * drained first, issued's detail kept. Else RP_OK, or the status of an op
 * that failed with "an op of the <what> failed (<its detail>[; <the dist
 * detail>])<tail>" (tail may be ""). */
rp_status rp_train_wait_ops(rp_runtime *rt, const rp_event *evs, uint32_t n,
                            rp_status issued, const char *what,
                            const char *tail);

/* ---- names (docs/debugging.md, "Names.") ---- */

/* Names inst printf-style ("W1", "h3.attn.qkv.w"); a name that does not
 * fit RP_NAME_MAX is cut (names are for people, nothing depends on them).
 * RP_OK and nothing for no instance (id 0). */
rp_status rp_train_name_inst(rp_runtime *rt, rp_inst inst, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Names the next recorded launch: fmt and ap, then the suffix sfx (".s1")
 * where the name leaves room for it; out (RP_NAME_MAX + 1 bytes, may be
 * NULL) gets the name. */
rp_status rp_train_vname_op(rp_runtime *rt, const char *sfx, char *out,
                            const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Records a step: rp_capture_begin, then issue(arg) with *recording set
 * (the model's launches attach what only a recorded launch carries), then
 * rp_capture_end into *out. A failure of issue aborts the capture and is
 * returned; *out is set only on RP_OK. */
rp_status rp_train_capture(rp_runtime *rt, int *recording,
                           rp_status (*issue)(void *arg), void *arg,
                           rp_graph **out);

/* Adds the postcondition `port` to g (the host reads what it names after
 * a replay) and binds it to every op named `op`; RP_EINVAL "<who>: no op
 * named '<op>' writes the <port>" when no op has that name. */
rp_status rp_train_bind_named(rp_graph *g, const char *port, const char *op,
                              const char *who);

/* rp_train_capture, then the postcondition "loss" bound to the ops named
 * loss_op (rp_train_bind_named): a training step as rp_mlp_record and
 * rp_gpt_record return it. On a failure nothing is returned (the graph is
 * destroyed). */
rp_status rp_train_record(rp_runtime *rt, int *recording,
                          rp_status (*issue)(void *arg), void *arg,
                          const char *loss_op, const char *who, rp_graph **out);

/* One replay of ex with the per-replay args (args, size), waited for; a
 * failed replay: its status, "replay failed: <rp_exec_error_detail>". */
rp_status rp_train_replay_wait(rp_runtime *rt, rp_exec *ex, const void *args,
                               size_t size);

/* realloc to n * size bytes (at least 1), NULL on overflow or when out of
 * memory (p then stays allocated). */
void *rp_train_realloc_n(void *p, size_t n, size_t size);

/* Monotonic nanoseconds. */
uint64_t rp_train_now_ns(void);

/* The first n processors of the backend's kind (GPUs on a CUDA runtime,
 * else CPU workers) and their local memories, in processor order.
 * RP_EPROC naming `who` when the runtime has fewer than n. */
rp_status rp_train_pick_procs(rp_runtime *rt, uint32_t n, rp_proc *procs,
                              rp_mem *mems, const char *who);

/* This rank's rows [*lo, *hi] of a batch of B rows over the runtime's
 * ranks, as rp_chunk_rect splits them (all of them with one rank). The
 * caller has checked the split: every rank gets a row. */
void rp_train_rank_rows(const rp_runtime *rt, uint32_t B, int64_t *lo,
                        int64_t *hi);

/* ---- replays in flight (the training loops' --inflight) ---- */

#define RP_TRAIN_MAX_INFLIGHT 64

/* Up to cap replays of one exec outstanding, the oldest (step `first`) at
 * `head`. The owner fills rt, ex, cap (1..RP_TRAIN_MAX_INFLIGHT), first (the
 * first step it will issue), iter_ns and start (optional: the latency of
 * step s goes to iter_ns[s - start]) and report (called for every retired
 * step in step order; it reads what the model needs, e.g. the loss, and
 * sets *halt to stop the reports) through rp_train_ring_init, then issues
 * and retires. */
typedef struct rp_train_ring {
  rp_runtime *rt;
  rp_exec *ex;
  uint32_t cap, first, start;
  uint64_t *iter_ns;
  rp_status (*report)(void *arg, uint32_t step, int *halt);
  void *arg;
  /* state */
  rp_event ev[RP_TRAIN_MAX_INFLIGHT];
  uint64_t t0[RP_TRAIN_MAX_INFLIGHT]; /* when rp_replay was called */
  uint32_t head, n;
  int halt; /* report asked to stop: later steps retire without report */
} rp_train_ring;

/* An empty ring (see rp_train_ring) whose first step is start. */
void rp_train_ring_init(rp_train_ring *r, rp_runtime *rt, rp_exec *ex,
                        uint32_t cap, uint32_t start, uint64_t *iter_ns,
                        rp_status (*report)(void *, uint32_t, int *),
                        void *arg);
/* Issues the next step's replay (the ring must have room: n < cap). */
rp_status rp_train_ring_issue(rp_train_ring *r, const rp_replay_args *ra,
                              uint32_t step);
/* Waits for the oldest outstanding replay, records its latency and reports
 * it (unless halted). A failed replay returns its error, naming the step. */
rp_status rp_train_ring_retire(rp_train_ring *r);
/* Retires every outstanding replay in order; after an error (st != RP_OK)
 * only waits for them and keeps st. Returns the first error. */
rp_status rp_train_ring_finish(rp_train_ring *r, rp_status st);

/* RP_OK when a global batch of `batch` rows splits over `ranks` ranks x
 * `parts` shards per rank with no empty shard (rp_chunk_rect by rank, then
 * by shard), else RP_ERANGE naming the first rank that gets an empty one
 * and the shards as `part_name` / `parts_name` (one, several: "processor",
 * "processors"); RP_EINVAL for a zero. The same answer on every rank: no
 * communication. */
rp_status rp_train_split_check(uint32_t batch, uint32_t ranks, uint32_t parts,
                               const char *part_name, const char *parts_name);

#endif
