/* train/train_util.h — what the training code (train/) and the tools above
 * it share besides the public header: error prefixes through the public
 * error channel, bounded reading of regular files, a monotonic clock.
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

/* Bounded input. Opens path for reading only when it is a regular file:
 * a FIFO, a device, a directory or a socket is refused (RP_EINVAL naming
 * which) before anything could block on it or read endless bytes (the
 * open itself does not block: O_NONBLOCK, cleared afterwards). *size gets
 * the file's size. RP_ENOENT / RP_EIO when it cannot be opened. The detail
 * does not name the path: callers prefix it. */
rp_status rp_train_open_regular(const char *path, int *fd, uint64_t *size);
/* Reads a whole regular file of at most max bytes into *buf (malloc'd,
 * NUL-terminated; *len excludes the NUL). RP_ERANGE when the file has (or
 * grows to) more than max bytes: no more than max + 1 are ever read. */
rp_status rp_train_read_regular(const char *path, size_t max, char **buf,
                                size_t *len);

/* Monotonic nanoseconds. */
uint64_t rp_train_now_ns(void);

#endif
