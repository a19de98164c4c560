/* train/train_util.c — error prefixes, bounded file reading and the clock
 * for train/ and the tools (train_util.h), over libc and the public error
 * channel. */
#include "train_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

rp_status rp_train_err_prefix(rp_status st, const char *fmt, ...) {
  char pre[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  /* rp_error_set formats before it replaces: the old detail may be an
   * argument */
  return rp_error_set(st, "%s%s", pre, rp_error_detail());
}

void *rp_train_realloc_n(void *p, size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes))
    return NULL;
  return realloc(p, bytes ? bytes : 1);
}

static const char *file_kind(mode_t m) {
  return S_ISFIFO(m)   ? "a FIFO (named pipe)"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISDIR(m)  ? "a directory"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

rp_status rp_train_open_regular(const char *path, int *fd_out, uint64_t *size) {
  if (!path || !fd_out || !size)
    return rp_error_set(RP_EINVAL, "NULL argument");
  /* O_NONBLOCK: opening a FIFO without a writer would block forever */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return rp_error_set(errno == ENOENT ? RP_ENOENT : RP_EIO, "cannot open: %s",
                        strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return rp_error_set(RP_EIO, "cannot stat: %s", strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return rp_error_set(RP_EINVAL,
                        "%s, not a regular file: only regular files "
                        "are read (a pipe or a device could block or never "
                        "end)",
                        file_kind(sb.st_mode));
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(fd);
    return rp_error_set(RP_EIO, "fcntl: %s", strerror(e));
  }
  *fd_out = fd;
  *size = (uint64_t)sb.st_size;
  return RP_OK;
}

rp_status rp_train_read_regular(const char *path, size_t max, char **buf,
                                size_t *len) {
  int fd;
  uint64_t size;
  if (max > SIZE_MAX - 2)
    max = SIZE_MAX - 2; /* room for the growth probe and the NUL */
  rp_status st = rp_train_open_regular(path, &fd, &size);
  if (st)
    return st;
  if (size > max) {
    close(fd);
    return rp_error_set(RP_ERANGE,
                        "the file has %llu bytes, above the limit of %zu",
                        (unsigned long long)size, max);
  }
  /* room for the size fstat said, one byte more to see growth, and a NUL */
  size_t cap = (size_t)size + 2, n = 0;
  char *b = malloc(cap);
  if (!b) {
    close(fd);
    return rp_error_set(RP_ENOMEM, "out of memory for %zu bytes", cap);
  }
  while (n <= max) {
    if (n + 1 >= cap) { /* the file grew: double, up to max + 2 */
      size_t ncap = cap > max / 2 ? max + 2 : cap * 2;
      char *nb = ncap > cap ? realloc(b, ncap) : NULL;
      if (!nb) {
        st = ncap > cap ? rp_error_set(RP_ENOMEM, "out of memory")
                        : rp_error_set(RP_ERANGE,
                                       "the file has more than %zu bytes", max);
        break;
      }
      b = nb;
      cap = ncap;
    }
    ssize_t r = read(fd, b + n, cap - 1 - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      st = rp_error_set(RP_EIO, "read failed: %s", strerror(errno));
      break;
    }
    if (r == 0)
      break;
    n += (size_t)r;
  }
  close(fd);
  if (!st && n > max)
    st = rp_error_set(RP_ERANGE, "the file has more than %zu bytes", max);
  if (st) {
    free(b);
    return st;
  }
  b[n] = 0;
  *buf = b;
  *len = n;
  return RP_OK;
}

uint64_t rp_train_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
