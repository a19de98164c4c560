/* train/train_util.h — what the training code (train/) and the tools above
 * it share besides the public header: error prefixes through the public
 * error channel, a monotonic clock (bounded file reading is the library's:
 * rp_file_read_regular).
 * Uses only reprise.h and libc: train/ is built as a client of the library
 * would build it. */
#ifndef RP_TRAIN_UTIL_H
#define RP_TRAIN_UTIL_H

#include "reprise.h"

#include <stddef.h>
#include <stdint.h>

/* Keeps the thread's error detail (rp_error_detail) but prefixes it with
 * the formatted text; returns st. */
rp_status rp_train_err_prefix(rp_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

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

/* RP_OK when a global batch of `batch` rows splits over `ranks` ranks x
 * `parts` shards per rank with no empty shard (rp_chunk_rect by rank, then
 * by shard), else RP_ERANGE naming the first rank that gets an empty one
 * and the shards as `parts_name` ("processors", "data groups"); RP_EINVAL
 * for a zero. The same answer on every rank: no communication. */
rp_status rp_train_split_check(uint32_t batch, uint32_t ranks, uint32_t parts,
                               const char *parts_name);

#endif
