/* test/nvtx_inject.c — a minimal NVTX tool (see nvtx_inject.h): it records
 * the ranges a process pushes so that a test can check their names and
 * nesting without Nsight Systems or a GPU. */
#include "nvtx_inject.h"

#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAXDEPTH 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static rp_nvtx_rec log_recs[RP_NVTX_LOG_MAX];
static size_t log_n, log_dropped;

/* Per thread: the names of the open ranges (innermost last). */
static _Thread_local char open_names[MAXDEPTH][64];
static _Thread_local int depth;

/* Appends one record under the lock. */
static void record(int push, int d, const char *name) {
  pthread_mutex_lock(&lock);
  if (log_n < RP_NVTX_LOG_MAX) {
    rp_nvtx_rec *r = &log_recs[log_n++];
    r->push = push;
    r->depth = d;
    r->tid = (unsigned long)syscall(SYS_gettid);
    snprintf(r->name, sizeof r->name, "%s", name ? name : "(null)");
  } else {
    log_dropped++;
  }
  pthread_mutex_unlock(&lock);
}

static int NVTX_API push_a(const char *msg) {
  int d = depth;
  record(1, d, msg);
  if (d < MAXDEPTH)
    snprintf(open_names[d], sizeof open_names[d], "%s", msg ? msg : "(null)");
  depth = d + 1;
  return d;
}

static int NVTX_API pop(void) {
  if (depth == 0) {
    record(0, 0, "");
    return -1;
  }
  int d = --depth;
  record(0, d, d < MAXDEPTH ? open_names[d] : "(deep)");
  return d;
}

EXPORT const rp_nvtx_rec *rp_nvtx_inject_log(size_t *n, size_t *dropped) {
  pthread_mutex_lock(&lock);
  *n = log_n;
  *dropped = log_dropped;
  pthread_mutex_unlock(&lock);
  return log_recs;
}

EXPORT void rp_nvtx_inject_reset(void) {
  pthread_mutex_lock(&lock);
  log_n = log_dropped = 0;
  pthread_mutex_unlock(&lock);
}

/* Installs fn in slot id of the CORE module's function table. */
static int hook(NvtxFunctionTable table, unsigned size, unsigned id,
                NvtxFunctionPointer fn) {
  if (id >= size || !table[id])
    return 0;
  *table[id] = fn;
  return 1;
}

/* NVTX's loader looks this up by name (nvtxInit.h). */
EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);

/* NVTX's loader calls this once, on the process's first NVTX call.
 * Non-zero: attached. */
EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const NvtxExportTableCallbacks *cb =
      (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
  if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
    return 0;
  NvtxFunctionTable table = NULL;
  unsigned size = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table)
    return 0;
  return hook(table, size, NVTX_CBID_CORE_RangePushA,
              (NvtxFunctionPointer)push_a) &&
         hook(table, size, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)pop);
}
