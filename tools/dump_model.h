/* tools/dump_model.h — a graph as `reprise dump --stats/--lint` sees it:
 * plain arrays (ops, instances, edges) with what the analyses need already
 * looked up (task contracts, processor and memory kinds, copy domains).
 *
 * dm_build fills a model from a loaded graph and its runtime; the analyses
 * (dump_lint.c) read only the model, so a test can hand them a model of a
 * machine it does not have (GPU processors on a CPU-only host). */
#ifndef RP_DUMP_MODEL_H
#define RP_DUMP_MODEL_H

#include "reprise.h"

#include <stdint.h>
#include <stdio.h>

typedef struct dm_access {
  uint32_t inst; /* instance table index (the graph file's "id") */
  rp_privilege priv;
  rp_redop redop;
} dm_access;

typedef struct dm_inst {
  rp_mem_kind mem;
  int device;
  rp_dtype dtype;
  rp_rect rect;
  char name[RP_NAME_MAX + 1]; /* "" unnamed */
} dm_inst;

typedef struct dm_op {
  rp_op_kind kind;
  const char *name;            /* task name, or "copy" */
  char label[RP_NAME_MAX + 1]; /* the op's own name; "" unnamed */
  rp_proc proc; /* task: processor or RP_PROC_ANY; copy: RP_PROC_ANY */
  const rp_proc *shard_procs; /* SPMD: one per shard, or NULL */
  rp_proc_kind pkind;         /* the processor's kind (CPU for RP_PROC_ANY) */
  uint32_t shards;            /* >= 1 */
  unsigned flags;             /* task contract (rp_task_flags); 0 for copies */
  int contract_known;         /* 0: a placeholder task, its contract unknown */
  uint64_t cost_ns;           /* the op's hint, else its task's; 0: none */
  dm_access *acc; /* tasks: declared; copies: src (READ), dst (WRITE,
                     or REDUCE with the copy's redop) */
  uint32_t nacc;
  rp_rect domain; /* copies: the points moved (dim 0: none) */
  uint32_t npost; /* postcondition ports bound to the op */
} dm_op;

typedef struct dm_edge {
  uint32_t from, to;
  int inferred; /* capture inferred it (not asked for) */
} dm_edge;

typedef struct dm_graph {
  dm_op *ops;
  uint32_t nops;
  dm_inst *insts;
  uint32_t ninsts;
  dm_edge *edges;
  uint32_t nedges;
  uint32_t npre, npost; /* ports */
  /* rp_graph_validate's refusal of the graph ("RP_EPORT: ..."), set by the
   * caller for the instantiate check; NULL none (dm_build leaves it NULL,
   * dm_free does not free it) */
  const char *refused;
  rp_proc_kind *proc_kinds; /* per processor of the runtime */
  uint32_t nprocs;
  dm_access *acc_pool; /* dm_build's storage for every op's accesses */
} dm_graph;

/* Fills *m from g and its runtime. Task names point into the runtime's
 * registry (valid while it lives). unknown(name, arg) says whether a task
 * is a placeholder whose contract nobody declared (may be NULL: none).
 * RP_OK, or a status with rp_error_detail set and *m left empty. */
rp_status dm_build(const rp_graph *g, int (*unknown)(const char *, void *),
                   void *arg, dm_graph *m);
/* Frees what dm_build allocated (not a hand-built model's arrays). */
void dm_free(dm_graph *m);

/* ---- analyses (dump_lint.c) ---- */

/* Op counts per kind and processor and per task, critical path (ops and
 * cost hints), width. 0 ok, -1 out of memory or a cycle (said on err). */
int dm_stats(const dm_graph *m, FILE *out, FILE *err);

/* The lint checks, bits of a selection mask (DM_LINT_ALL: every one). */
enum {
  DM_LINT_RUNAHEAD = 1u << 0,
  DM_LINT_CONTRACT = 1u << 1,
  DM_LINT_REDUNDANT = 1u << 2,
  DM_LINT_UNREAD = 1u << 3,
  DM_LINT_MERGE = 1u << 4,
  DM_LINT_RACE = 1u << 5,
  DM_LINT_INSTANTIATE = 1u << 6,
  DM_LINT_ALL = (1u << 7) - 1,
};
/* The check's bit for a name ("redundant-edge"), 0 when unknown. */
unsigned dm_lint_check(const char *name, size_t len);
/* "runahead, contract, ...": every check's name, for usage errors. */
const char *dm_lint_checks(void);

/* What dm_lint found, and what it could not check. */
typedef struct dm_lint_result {
  uint32_t findings;  /* of the checks that ran */
  unsigned unchecked; /* DM_LINT_* bits selected that could not run */
  /* with unchecked: "race could not run (40000 ops: reachability is
   * built for at most 32768)" */
  char why[256];
} dm_lint_result;

/* The lint findings of the checks in `checks` (DM_LINT_* bits), one per
 * line on out, then a summary line, which names the checks left out and
 * those that could not run (with why). 0 ok, -1 failure (said on err). */
int dm_lint(const dm_graph *m, unsigned checks, FILE *out, FILE *err,
            dm_lint_result *res);

/* Ops above which reachability (redundant edges, the ordering check of
 * mergeable copies, races) is not built, and those checks cannot run: it
 * takes nops^2 / 8 bytes (128 MiB at the limit). */
#define DM_REACH_MAX_OPS 32768u

#endif
