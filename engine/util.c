/* engine/util.c — errors, allocation helpers, clocks, futexes, tunables. */
#include "util.h"
#include "engine.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef REPRISE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

/* ---- status text: generated from the one list in reprise.h ---- */

const char *rp_status_str(rp_status st) {
  switch (st) {
#define RP_STR_(name, code, text)                                              \
  case RP_##name:                                                              \
    return text;
    RP_STATUS_MAP(RP_STR_)
#undef RP_STR_
  }
  return "unknown status";
}

const char *rp_status_name(rp_status st) {
  switch (st) {
#define RP_NAME_(name, code, text)                                             \
  case RP_##name:                                                              \
    return "RP_" #name;
    RP_STATUS_MAP(RP_NAME_)
#undef RP_NAME_
  }
  return "RP_?";
}

int rp__status_known(rp_status st) {
  switch (st) {
#define RP_KNOWN_(name, code, text)                                            \
  case RP_##name:                                                              \
    return 1;
    RP_STATUS_MAP(RP_KNOWN_)
#undef RP_KNOWN_
  }
  return 0;
}

unsigned rp_version(void) {
  return REPRISE_VERSION_HEX;
}

#define RP_STR2_(x) #x
#define RP_STR_(x) RP_STR2_(x)
const char *rp_version_string(void) {
  return RP_STR_(REPRISE_VERSION_MAJOR) "." RP_STR_(
      REPRISE_VERSION_MINOR) "." RP_STR_(REPRISE_VERSION_PATCH);
}

/* ---- error detail ---- */

static _Thread_local char tl_detail[1024];

const char *rp_error_detail(void) {
  return tl_detail;
}

char *rp__error_detail_buf(void) {
  return tl_detail;
}

/* The detail becomes the formatted text: through a buffer, as the
 * arguments may point into tl_detail (a detail quoting rp_error_detail()). */
__attribute__((format(printf, 1, 0))) static void set_detail(const char *fmt,
                                                             va_list ap) {
  char buf[sizeof tl_detail] = "";
  if (vsnprintf(buf, sizeof buf, fmt, ap) < 0)
    buf[0] = 0;
  memcpy(tl_detail, buf, sizeof tl_detail);
}

rp_status rp__err(rp_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_detail(fmt, ap);
  va_end(ap);
  return st;
}

rp_status rp_error_set(rp_status st, const char *fmt, ...) {
  if (!fmt) {
    tl_detail[0] = 0;
    return st;
  }
  va_list ap;
  va_start(ap, fmt);
  set_detail(fmt, ap);
  va_end(ap);
  return st;
}

/* The detail becomes the formatted prefix and then the old detail, less
 * its leading "rp_name: " when `rename` (the call's name it replaces). */
static void reprefix(int rename, const char *fmt, va_list ap) {
  char old[sizeof tl_detail];
  memcpy(old, tl_detail, sizeof old);
  const char *rest = old;
  size_t id = strspn(old, "abcdefghijklmnopqrstuvwxyz0123456789_");
  if (rename && !strncmp(old, "rp_", 3) && !strncmp(old + id, ": ", 2))
    rest = old + id + 2;
  char buf[sizeof tl_detail] = ""; /* the arguments may point into it */
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  if (n < 0)
    buf[0] = 0;
  if (n >= 0 && (size_t)n < sizeof buf)
    snprintf(buf + n, sizeof buf - (size_t)n, "%s", rest);
  memcpy(tl_detail, buf, sizeof tl_detail);
}

rp_status rp__err_prefix(rp_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  reprefix(0, fmt, ap);
  va_end(ap);
  return st;
}

rp_status rp__err_as(rp_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  reprefix(1, fmt, ap);
  va_end(ap);
  return st;
}

void rp__assert_fail(const char *expr, const char *file, int line) {
  fprintf(stderr, "reprise: internal invariant failed: %s (%s:%d)\n", expr,
          file, line);
  fflush(stderr);
  abort();
}

/* ---- allocation ---- */

void *rp__calloc(size_t n, size_t size) {
  if (n == 0 || size == 0)
    n = size = 1;
  return calloc(n, size);
}

void *rp__reallocarray(void *p, size_t n, size_t size) {
  size_t bytes;
  if (!rp__mul_ok(n, size, &bytes))
    return NULL;
  return realloc(p, bytes ? bytes : 1);
}

char *rp__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d)
    memcpy(d, s, n);
  return d;
}

bool rp__grow(void **pp, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap)
    return true;
  uint64_t ncap = *cap ? (uint64_t)*cap * 2 : 8;
  while (ncap < need)
    ncap *= 2;
  if (ncap > UINT32_MAX)
    ncap = UINT32_MAX;
  if (ncap < need)
    return false;
  void *np = rp__reallocarray(*pp, (size_t)ncap, elem);
  if (!np)
    return false;
  memset((char *)np + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
  *pp = np;
  *cap = (uint32_t)ncap;
  return true;
}

int rp__parse_digits(const char *s, unsigned long long lo,
                     unsigned long long hi, unsigned long long *out) {
  if (!s || !isdigit((unsigned char)s[0]))
    return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v < lo || v > hi)
    return 0;
  *out = v;
  return 1;
}

uint32_t rp__topo_order(uint32_t n, const uint32_t *off, const uint32_t *adj,
                        uint32_t *indeg, uint32_t *order) {
  for (uint32_t i = 0; i < n; i++)
    indeg[i] = 0;
  for (uint32_t k = 0; k < off[n]; k++)
    indeg[adj[k]]++;
  uint32_t head = 0, tail = 0;
  for (uint32_t i = 0; i < n; i++)
    if (!indeg[i])
      order[tail++] = i;
  while (head < tail) {
    uint32_t u = order[head++];
    for (uint32_t k = off[u]; k < off[u + 1]; k++)
      if (--indeg[adj[k]] == 0)
        order[tail++] = adj[k];
  }
  return tail;
}

/* ---- bounded input ---- */

rp_status rp__errno_status(int e) {
  return e == ENOMEM ? RP_ENOMEM : RP_EIO;
}

const char *rp__write_cause(int e) {
  return e > 0 ? strerror(e)
               : "the stream's error indicator is set (its cause was not "
                 "kept: a full disk, a stream not open for writing, a "
                 "closed descriptor)";
}

const char *rp__file_kind(unsigned m) {
  return S_ISFIFO(m)   ? "a FIFO (named pipe)"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISDIR(m)  ? "a directory"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

static rp_status not_regular(mode_t m) {
  return rp__err(RP_EINVAL,
                 "%s, not a regular file: only regular files "
                 "are read (a pipe or a device could block or never end)",
                 rp__file_kind(m));
}

/* The name of a kernel file system whose files are generated as they are
 * read, or NULL (magic numbers of linux/magic.h). */
static const char *kernel_fs(long type) {
  switch ((unsigned long)type) {
  case 0x9fa0: /* PROC_SUPER_MAGIC */
    return "procfs";
  case 0x62656572: /* SYSFS_MAGIC */
    return "sysfs";
  case 0x64626720: /* DEBUGFS_MAGIC */
    return "debugfs";
  case 0x74726163: /* TRACEFS_MAGIC */
    return "tracefs";
  default:
    return NULL;
  }
}

rp_status rp_file_open_regular(const char *path, int *fd_out, uint64_t *size) {
  if (!path || !fd_out || !size)
    return rp__err(RP_EINVAL, "NULL argument");
  /* O_NONBLOCK: opening a FIFO without a writer would block forever */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    struct stat lsb;
    /* a socket (ENXIO) or a device without a driver cannot be opened at
     * all: say what it is, as for the kinds that can */
    if (e != ENOENT && stat(path, &lsb) == 0 && !S_ISREG(lsb.st_mode))
      return not_regular(lsb.st_mode);
    return rp__err(e == ENOENT ? RP_ENOENT : RP_EIO, "cannot open: %s",
                   strerror(e));
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return rp__err(RP_EIO, "cannot stat: %s", strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return not_regular(sb.st_mode);
  }
  /* the kernel's own files (procfs, sysfs, debugfs, tracefs) are regular
   * to stat but generated as they are read: /proc/kmsg waits for messages
   * and never ends; none is a file of data */
  struct statfs fs;
  if (fstatfs(fd, &fs) == 0 && kernel_fs(fs.f_type)) {
    close(fd);
    return rp__err(RP_EINVAL,
                   "a file of the kernel's %s, not a file of data: its "
                   "reads could wait or never end",
                   kernel_fs(fs.f_type));
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(fd);
    return rp__err(RP_EIO, "fcntl: %s", strerror(e));
  }
  *fd_out = fd;
  *size = (uint64_t)sb.st_size;
  return RP_OK;
}

rp_status rp_file_read_regular(const char *path, size_t max, char **buf,
                               size_t *len) {
  int fd;
  uint64_t size;
  if (!path || !buf || !len)
    return rp__err(RP_EINVAL, "NULL argument");
  if (max > SIZE_MAX - 2)
    max = SIZE_MAX - 2; /* room for the growth probe and the NUL */
  rp_status st = rp_file_open_regular(path, &fd, &size);
  if (st)
    return st;
  if (size > max) {
    close(fd);
    return rp__err(RP_ERANGE,
                   "the file has %llu bytes, above the limit of "
                   "%zu",
                   (unsigned long long)size, max);
  }
  /* room for the size fstat said, one byte more to see growth, and a NUL */
  size_t cap = (size_t)size + 2, n = 0;
  char *b = malloc(cap);
  if (!b) {
    close(fd);
    return rp__err(RP_ENOMEM, "out of memory for %zu bytes", cap);
  }
  while (n <= max) {
    if (n + 1 >= cap) { /* the file grew: double, up to max + 2 */
      size_t ncap = cap > max / 2 ? max + 2 : cap * 2;
      char *nb = ncap > cap ? realloc(b, ncap) : NULL;
      if (!nb) {
        st = ncap > cap
                 ? rp__err(RP_ENOMEM, "out of memory for %zu bytes", ncap)
                 : rp__err(RP_ERANGE,
                           "the file has more than %zu "
                           "bytes",
                           max);
        break;
      }
      b = nb;
      cap = ncap;
    }
    ssize_t r = read(fd, b + n, cap - 1 - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      st = rp__err(RP_EIO, "read failed: %s", strerror(errno));
      break;
    }
    if (r == 0)
      break;
    n += (size_t)r;
  }
  close(fd);
  if (!st && n > max)
    st = rp__err(RP_ERANGE, "the file has more than %zu bytes", max);
  if (st) {
    free(b);
    return st;
  }
  b[n] = 0;
  *buf = b;
  *len = n;
  return RP_OK;
}

/* ---- clocks, futexes ---- */

uint64_t rp__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rp__futex_wait(_Atomic uint32_t *addr, uint32_t expected,
                    int64_t timeout_ns) {
  struct timespec ts, *tsp = NULL;
  if (timeout_ns >= 0) {
    ts.tv_sec = (time_t)(timeout_ns / 1000000000);
    ts.tv_nsec = (long)(timeout_ns % 1000000000);
    tsp = &ts;
  }
  /* Returns on wake, on *addr != expected (EAGAIN), on timeout or signal:
   * every caller re-checks its condition in a loop. */
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, tsp, NULL,
          0);
}

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449 /* the same number on every architecture */
#endif

/* struct futex_waitv of <linux/futex.h> (5.16), which older headers lack */
typedef struct rp_futex_waitv {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
} rp_futex_waitv;
#define RP_FUTEX_32 2u
#define RP_FUTEX_PRIVATE 128u

int rp__futex_waitv_off;
static _Atomic int waitv_missing; /* the kernel answered ENOSYS */

int rp__futex_wait2_usable(void) {
  return !rp__futex_waitv_off &&
         !atomic_load_explicit(&waitv_missing, memory_order_relaxed);
}

int rp__futex_wait2(_Atomic uint32_t *a, uint32_t va, _Atomic uint32_t *b,
                    uint32_t vb) {
  if (!rp__futex_wait2_usable())
    return -1;
  rp_futex_waitv w[2] = {
      {va, (uint64_t)(uintptr_t)a, RP_FUTEX_32 | RP_FUTEX_PRIVATE, 0},
      {vb, (uint64_t)(uintptr_t)b, RP_FUTEX_32 | RP_FUTEX_PRIVATE, 0}};
  /* no timeout; returns on a wake, a changed word (EAGAIN) or a signal.
   * Any other error (ENOSYS: an older kernel; EPERM or the like: a seccomp
   * filter that does not know the call) means it cannot wait: the callers
   * fall back to the bounded single-word wait from now on, rather than
   * come straight back (a spin). */
  if (syscall(SYS_futex_waitv, w, 2u, 0u, NULL, CLOCK_MONOTONIC) < 0 &&
      errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT) {
    atomic_store_explicit(&waitv_missing, 1, memory_order_relaxed);
    return -1;
  }
  return 0;
}

void rp__futex_wake(_Atomic uint32_t *addr, int n) {
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

long rp__env_long(const char *name, long dflt) {
  const char *s = getenv(name);
  if (!s || !*s)
    return dflt;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end)
    return dflt;
  return v;
}

static rp_tunables g_tun;
static pthread_once_t g_tun_once = PTHREAD_ONCE_INIT;

/* A time tunable: what rp_runtime_create accepts (engine/env_rules.h:
 * digits only, 0..10^10 ns); dflt when unset or empty ("not set") and for
 * anything else (a value only a runtime made with ignore_env lets
 * through). */
static uint64_t env_ns(const char *name, uint64_t dflt) {
  unsigned long long v;
  return rp__parse_digits(getenv(name), 0, 10000000000ull, &v) ? (uint64_t)v
                                                               : dflt;
}

static void tunables_init(void) {
  g_tun.spin_ns = env_ns("REPRISE_SPIN_NS", 10000);
  g_tun.yield_ns = env_ns("REPRISE_YIELD_NS", 200000);
  g_tun.host_yield_ns = env_ns("REPRISE_HOST_YIELD_NS", 50000);
  g_tun.idle_spin_ns = env_ns("REPRISE_IDLE_SPIN_NS", 1000);
  g_tun.host_spin_ns = env_ns("REPRISE_HOST_SPIN_NS", UINT64_MAX);
}

const rp_tunables *rp__tunables(void) {
  pthread_once(&g_tun_once, tunables_init);
  return &g_tun;
}

int rp__backoff(rp_backoff *b) {
  /* The first polls are free of clock reads: most waits end within them. */
  if (++b->n < 64) {
    rp__cpu_relax();
    return 1;
  }
  const rp_tunables *t = rp__tunables();
  uint64_t now = rp__now_ns();
  if (!b->start)
    b->start = now;
  uint64_t waited = now - b->start;
  uint64_t spin = b->yield_only ? b->spin_ns
                  : b->idle     ? t->idle_spin_ns
                                : t->spin_ns;
  if (waited < spin) {
    for (int i = 0; i < 16; i++)
      rp__cpu_relax();
    return 1;
  }
  uint64_t budget = spin + (!b->yield_only ? t->yield_ns
                            : b->yield_ns  ? b->yield_ns
                                           : t->host_yield_ns);
  if (waited < budget) {
    b->yielded = 1;
    sched_yield();
    return 1;
  }
  return 0;
}

/* ---- NVTX ---- */

void rp__nvtx_push(const char *name) {
#ifdef REPRISE_HAVE_NVTX
  if (rp__nvtx_on)
    nvtxRangePushA(name);
#else
  RP_UNUSED(name);
#endif
}

void rp__nvtx_pop(void) {
#ifdef REPRISE_HAVE_NVTX
  if (rp__nvtx_on)
    nvtxRangePop();
#endif
}

/* ---- quarantine of destroyed handle objects (see util.h) ---- */

static pthread_mutex_t quarantine_lock = PTHREAD_MUTEX_INITIALIZER;
static void *quarantine_ring[RP_QUARANTINE];
static unsigned quarantine_next;

void rp__quarantine(void *p) {
  if (!p)
    return;
  pthread_mutex_lock(&quarantine_lock);
  void *old = quarantine_ring[quarantine_next];
  quarantine_ring[quarantine_next] = p;
  quarantine_next = (quarantine_next + 1) % RP_QUARANTINE;
  pthread_mutex_unlock(&quarantine_lock);
  free(old);
}
