/* engine/util.h — shared internal helpers: asserts, error reporting, atomics,
 * futexes, clocks. Private to libreprise. */
#ifndef RP_UTIL_H
#define RP_UTIL_H

#include "reprise.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Graphviz graph attributes that bound dot's layout of a large graph (the
 * network-simplex and crossing-minimisation passes, straight edges): with
 * dot's defaults a training step of a few hundred nodes and edges takes
 * minutes to lay out; the DOT writers add them when rp__dot_large. */
#define RP_DOT_BOUNDED "nslimit=2, nslimit1=2, mclimit=0.3, splines=line"
#define rp__dot_large(nodes, edges) ((nodes) > 50 || (edges) > 100)

#define RP_CACHELINE 64
#define RP_ALIGNED_LINE _Alignas(RP_CACHELINE)
#define RP_LIKELY(x) __builtin_expect(!!(x), 1)
#define RP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define RP_UNUSED(x) ((void)(x))

/* Always-on invariant check: a broken internal invariant is a bug in reprise,
 * never the user's input; it prints the expression and aborts. */
#define RP_ASSERT(e)                                                           \
  do {                                                                         \
    if (RP_UNLIKELY(!(e)))                                                     \
      rp__assert_fail(#e, __FILE__, __LINE__);                                 \
  } while (0)

/* Costly checks: compiled always, evaluated only in debug builds. */
#ifdef NDEBUG
#define RP_DEBUG 0
#else
#define RP_DEBUG 1
#endif
#define RP_DASSERT(e)                                                          \
  do {                                                                         \
    if (RP_DEBUG)                                                              \
      RP_ASSERT(e);                                                            \
  } while (0)

_Noreturn void rp__assert_fail(const char *expr, const char *file, int line);

/* 1 when st is one of RP_STATUS_MAP's codes. */
int rp__status_known(rp_status st);

/* 1 when an event may complete with st as its failure: an error status
 * of RP_STATUS_MAP but RP_EAGAIN, which a query reads as "pending" (a
 * poller would wait forever). RP_ETIMEDOUT may be one (a watchdog's
 * poison), read as a wait's own timeout. */
static inline int rp__status_failure(rp_status st) {
  return st < 0 && st != RP_EAGAIN && rp__status_known(st);
}

/* What a task's return value means: RP_OK, its own error when an event
 * may carry it (rp__status_failure), else (a positive value, an unknown
 * code, RP_EAGAIN) RP_ETASK. */
static inline rp_status rp__task_status(rp_status st) {
  return st == RP_OK || rp__status_failure(st) ? st : RP_ETASK;
}

/* The calling thread's detail buffer (what rp_error_detail() returns):
 * a 0 stored at [0] clears it. The replay lanes take it once per lane run
 * and clear it before each task, so that a task's failure carries its own
 * words only, with one store instead of a call per task. */
char *rp__error_detail_buf(void);
/* Records a detail message for rp_error_detail() and returns st. */
rp_status rp__err(rp_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Keeps the current detail but prefixes it. */
rp_status rp__err_prefix(rp_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The current detail as the caller's own: its leading "rp_name: " (an
 * internal use of a public call, e.g. rp_xfer_plan under rp_launch_copy)
 * is replaced by the formatted prefix, or the prefix goes in front. */
rp_status rp__err_as(rp_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The status of a failed system call that set errno to e: RP_ENOMEM for
 * ENOMEM (the kernel or libc ran out of memory), else RP_EIO. */
rp_status rp__errno_status(int e);

/* Why a write to a stream failed: strerror(e) for an errno e > 0; for 0
 * (a failed write that set none, or an error indicator set before), that
 * the cause was not kept. */
const char *rp__write_cause(int e);

/* "a FIFO (named pipe)", "a character device", "a directory", ... for a
 * st_mode that is not a regular file's. */
const char *rp__file_kind(unsigned mode);

/* Allocation helpers: zeroed, overflow-checked. NULL on failure. */
void *rp__calloc(size_t n, size_t size);
void *rp__reallocarray(void *p, size_t n, size_t size);
char *rp__strdup(const char *s);
/* Checked arithmetic: the one set every size, extent, stride, workspace and
 * count computation uses. Each returns false on overflow (and leaves *out
 * unspecified); none has undefined behaviour for any input. */
static inline bool rp__mul_ok(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline bool rp__add_ok(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
/* v rounded up to a multiple of a (a power of two; 0 counts as 1). */
static inline bool rp__align_up_ok(size_t v, size_t a, size_t *out) {
  if (a == 0)
    a = 1;
  if (a & (a - 1))
    return false;
  size_t t;
  if (__builtin_add_overflow(v, a - 1, &t))
    return false;
  *out = t & ~(a - 1);
  return true;
}
static inline bool rp__add_i64_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool rp__sub_i64_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_sub_overflow(a, b, out);
}
static inline bool rp__mul_i64_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
/* Points in lo..hi inclusive (hi - lo + 1); false when hi < lo or when the
 * count does not fit an int64_t. */
static inline bool rp__extent_ok(int64_t lo, int64_t hi, int64_t *out) {
  int64_t d;
  return hi >= lo && !__builtin_sub_overflow(hi, lo, &d) &&
         !__builtin_add_overflow(d, 1, out);
}
/* A non-negative int64_t as size_t (false for negatives and, on 32-bit
 * hosts, for values past SIZE_MAX). */
static inline bool rp__i64_size_ok(int64_t v, size_t *out) {
  if (v < 0 || (uint64_t)v > SIZE_MAX)
    return false;
  *out = (size_t)v;
  return true;
}

/* Bounded input: rp_file_open_regular, rp_file_read_regular (reprise.h). */

/* Quarantine for destroyed handle objects (runtime, graph, exec): the
 * destroy call poisons the object's magic word and hands its memory here
 * instead of freeing it, so a later call with the destroyed handle reads
 * the poisoned magic and is refused (not a use after free). The last
 * RP_QUARANTINE objects are kept; the oldest is freed when a new one
 * arrives, after which passing its handle is undefined. Thread-safe. */
#define RP_QUARANTINE 32
void rp__quarantine(void *p);
/* The magic word a destroyed object carries while quarantined. */
#define RP_DEAD_MAGIC 0xdeadd00du

/* Grows a dynamic array *pp of *cap elements to hold at least need. */
bool rp__grow(void **pp, uint32_t *cap, uint32_t need, size_t elem);

/* 1 and *out = the number when s (may be NULL) is a decimal number in
 * lo..hi written with digits only (no sign, no blank, no suffix: strtoull
 * alone would take "-1" as ULLONG_MAX and skip leading blanks), else 0. */
int rp__parse_digits(const char *s, unsigned long long lo,
                     unsigned long long hi, unsigned long long *out);

/* Kahn's topological order of the n nodes of a graph given as successor
 * lists (node u's successors are adj[off[u]..off[u + 1]), one entry per
 * edge): order[] gets the nodes, the sources first in index order, then
 * in the order the queue reaches them. indeg (n entries) is scratch; it
 * ends nonzero exactly at the nodes that are on a cycle or behind one.
 * Returns how many nodes were ordered: n unless the graph has a cycle. */
uint32_t rp__topo_order(uint32_t n, const uint32_t *off, const uint32_t *adj,
                        uint32_t *indeg, uint32_t *order);

/* Monotonic nanoseconds. */
uint64_t rp__now_ns(void);
/* Spin-loop hint. */
static inline void rp__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Futex on a 32-bit word: wait while *addr == expected (timeout_ns < 0:
 * forever); wake up to n waiters. Spurious returns are allowed. */
void rp__futex_wait(_Atomic uint32_t *addr, uint32_t expected,
                    int64_t timeout_ns);
void rp__futex_wake(_Atomic uint32_t *addr, int n);
/* Waits while *a == va and *b == vb (futex_waitv, Linux 5.16 and later):
 * a wake on either word, or either word changing, returns. 0 after the
 * wait (spurious returns allowed), -1 when the call is not available (an
 * older kernel, a seccomp filter: nothing waited, and every later call
 * answers -1 at once) or rp__futex_waitv_off is set. */
int rp__futex_wait2(_Atomic uint32_t *a, uint32_t va, _Atomic uint32_t *b,
                    uint32_t vb);
/* 0 once rp__futex_wait2 is known to answer -1. */
int rp__futex_wait2_usable(void);
/* Test hook: nonzero makes rp__futex_wait2 answer -1 (the path of kernels
 * without futex_waitv). */
extern int rp__futex_waitv_off;

/* Environment integer with default (invalid text -> default). */
long rp__env_long(const char *name, long dflt);

/* Tunables (README.md "Environment", the REPRISE_*_NS rows): read once from the
 * environment. */
typedef struct rp_tunables {
  /* How long a waiting thread busy-spins (pause) before it starts yielding
   * its core. Default 10 us: far above a cross-core hand-off (65-330 ns), so
   * a consumer that is expecting its producer answers in well under a
   * microsecond. Time, not iterations: a pause costs ~10 ns on one x86 and
   * ~30 ns on another. env REPRISE_SPIN_NS. */
  uint64_t spin_ns;
  /* How long it then keeps polling with sched_yield before it sleeps on a
   * futex. Default 200 us. Yielding hands the core to any other runnable
   * thread (the host thread, the other worker) when there are more threads
   * than cores, as on the 2-core CI machines, while still answering within a
   * couple of microseconds; a futex wake costs the waker a system call and
   * the sleeper 5-50 us. env REPRISE_YIELD_NS. */
  uint64_t yield_ns;
  /* How long a host thread waiting for an event yields before it sleeps.
   * Default 50 us: a yielding host stays runnable (with as many workers as
   * cores the scheduler then time-slices it against the workers), while a
   * sleeping one needs a futex wake (a system call on the worker's critical
   * path, 5-50 us before the host runs again). Waiting for a replay slot
   * uses an adaptive budget instead (see scheduler.c). env
   * REPRISE_HOST_YIELD_NS. */
  uint64_t host_yield_ns;
  /* How long an idle worker busy-spins before yielding. Default 1 us. env
   * REPRISE_IDLE_SPIN_NS. */
  uint64_t idle_spin_ns;
  /* How long a host thread waiting for a replay slot or an event busy-spins
   * before it yields. A runtime decides (rp__host_spin_ns): this value when
   * REPRISE_HOST_SPIN_NS is set; else 20 us when the process may run on
   * more CPUs than the runtime keeps busy (its workers, and the GPU
   * poller), 0 when it may not (a spinning host would then take the core a
   * worker needs). UINT64_MAX here: not set. */
  uint64_t host_spin_ns;
} rp_tunables;
const rp_tunables *rp__tunables(void);

/* Three-phase waiting: spin (pause), yield, then the caller sleeps on its
 * futex. Call rp__backoff after each failed poll; it pauses or yields and
 * returns 1 while the caller should poll again, 0 once it should sleep. */
typedef struct rp_backoff {
  uint64_t start;
  uint32_t n;
  int yield_only;    /* host-side waits: never busy-spin */
  uint64_t yield_ns; /* host-side: yield budget (0: REPRISE_HOST_YIELD_NS) */
  int idle;          /* an idle worker: busy-spin only REPRISE_IDLE_SPIN_NS */
  uint64_t spin_ns;  /* host-side: busy-spin this long before yielding */
  int yielded;       /* set once it went past its spin phase */
} rp_backoff;
#define RP_BACKOFF_INIT                                                        \
  { 0, 0, 0, 0, 0, 0, 0 }
/* An idle worker (nothing queued, no replay submitted) spins briefly, then
 * yields: the next replay usually arrives from a host thread that may share
 * its core, and a busy-spinning worker would keep it off that core. */
#define RP_BACKOFF_IDLE                                                        \
  { 0, 64, 0, 0, 1, 0, 0 }
/* Host threads (waiting for replays or events) busy-spin only for spin_ns,
 * which the caller sets from rp__host_spin_ns: on a machine with as many
 * workers as cores a spinning host steals the core a worker needs to
 * finish what the host waits for, so it yields at once there. */
#define RP_BACKOFF_HOST                                                        \
  { 0, 64, 1, 0, 0, 0, 0 }
int rp__backoff(rp_backoff *b);

/* NVTX ranges (compiled out without the CUDA toolkit's nvtx3 headers). */
void rp__nvtx_push(const char *name);
void rp__nvtx_pop(void);

#endif
