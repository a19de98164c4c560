/* test/nvtx_inject.h — the NVTX injection library the NVTX test loads
 * (test/nvtx_inject.c): NVTX's loader dlopens it from NVTX_INJECTION64_PATH
 * on the process's first NVTX call and calls InitializeInjectionNvtx2,
 * which hooks RangePushA and RangePop. Every push and pop is logged with
 * its thread and nesting depth; the test reads the log through dlsym. */
#ifndef RP_NVTX_INJECT_H
#define RP_NVTX_INJECT_H

#include <stddef.h>

typedef struct rp_nvtx_rec {
  int push;          /* 1 push, 0 pop */
  int depth;         /* the thread's open ranges before this push/pop */
  unsigned long tid; /* gettid() of the calling thread */
  char name[64];     /* the pushed name (pops: the name they closed; "" for
                        a pop without an open range) */
} rp_nvtx_rec;

/* The log so far (*n records; at most RP_NVTX_LOG_MAX, then dropped is
 * counted). The pointer stays valid until the next reset. */
typedef const rp_nvtx_rec *(*rp_nvtx_log_fn)(size_t *n, size_t *dropped);
/* Empties the log (call while no other thread pushes). */
typedef void (*rp_nvtx_reset_fn)(void);

#define RP_NVTX_LOG_MAX 65536

/* The library's exports (the test reaches them through dlsym). */
const rp_nvtx_rec *rp_nvtx_inject_log(size_t *n, size_t *dropped);
void rp_nvtx_inject_reset(void);

#endif
