/* capture/capture.h — what the capture layer offers the layers above it
 * (replay, graph files, tools): the recorded graph's read-only form, and the
 * dependence analysis.
 *
 * The capture layer owns graphs: their ops, edges, ports and
 * interpolations. Other layers read a graph through the const structs below
 * and never modify them; every change goes through the rp_graph_* API, which
 * validates it. Private to libreprise. */
#ifndef RP_CAPTURE_H
#define RP_CAPTURE_H

#include "engine/engine.h"

/* One recorded op. A parallel operator is recorded as its copies, each
 * tagged with the operator's group so dumps and graph files can show it. */
typedef struct rp_gop {
  rp_op_kind kind;
  /* task ops */
  rp_task_id task;
  rp_proc proc;         /* a processor or RP_PROC_ANY */
  uint32_t shards;      /* >= 1 */
  rp_proc *shard_procs; /* NULL or `shards` entries */
  size_t ws_bytes;      /* per shard */
  size_t ws_align;
  uint64_t cost_ns;
  void *args;
  size_t args_size;
  rp_access *acc;
  uint32_t nacc;
  rp_interp *interps;
  uint32_t ninterp;
  /* copy ops */
  rp_copy copy;   /* wait is always RP_NO_EVENT */
  uint32_t group; /* parallel-operator group (0 = none) */
  rp_pop_kind pop_kind;
  int pop_backward;
  /* where the op came from: 1 when capture inserted it (mirror copy) */
  int inserted;
  /* rp_capture_name_next / rp_graph_set_op_name; "" none */
  char name[RP_NAME_MAX + 1];
} rp_gop;

typedef struct rp_gedge {
  rp_op_id from, to;
  /* 1: capture inferred it from conflicting accesses; 0: asked for
   * (rp_graph_add_edge, a launch's wait, a graph file without the mark) */
  uint32_t inferred;
} rp_gedge;

/* ---- mirrors (copy insertion, insert.c and mirror.c) ----
 * When a recorded task's processor cannot reach an instance (another
 * device's memory, device memory from a CPU task), capture gives the task a
 * mirror: a copy of the instance in the processor's own memory, kept in
 * step by inserted copy ops (source -> mirror before a reader, mirror ->
 * source after a writer). The graph records the mirror in its table
 * (index -> source instance, target memory); ops name it through a marked
 * handle: slot RP_MIRROR_SLOT, which the engine never hands out, with the
 * table index in the generation half. Mirrors own no storage in a graph:
 * rp_instantiate allocates one instance per mirror (owned by the exec,
 * freed with it) and substitutes it for the marked handles. */
typedef struct rp_gmirror {
  rp_inst src; /* the source instance (never a mirror) */
  rp_mem mem;  /* where the mirror lives */
} rp_gmirror;

#define RP_MIRROR_SLOT UINT32_MAX
static inline int rp__is_mirror(rp_inst i) {
  return (uint32_t)i.id == RP_MIRROR_SLOT;
}
static inline uint32_t rp__mirror_index(rp_inst i) {
  return (uint32_t)(i.id >> 32);
}
static inline rp_inst rp__mirror_ref(uint32_t k) {
  return (rp_inst){(uint64_t)k << 32 | RP_MIRROR_SLOT};
}

typedef struct rp_gport {
  char *name;
  rp_op_id *ops; /* precondition: ops waiting on it; postcondition: ops it
                    waits for */
  uint32_t nops, cap;
  rp_op_id max; /* the largest of ops (nops > 0): binding a larger op needs
                   no duplicate search, so ascending binds are O(1) */
} rp_gport;

#define RP_GRAPH_MAGIC 0x52504752u /* "RPGR"; RP_DEAD_MAGIC destroyed */
/* RP_OK for a live graph; RP_EINVAL for NULL or no graph, RP_ESTALE for a
 * destroyed one (still quarantined, engine/util.h). `what`: the call. */
rp_status rp__graph_check(const rp_graph *g, const char *what);

struct rp_graph {
  uint32_t magic;
  rp_runtime *rt;
  rp_gop *ops;
  uint32_t nops, ops_cap;
  rp_gedge *edges;
  uint32_t nedges, edges_cap;
  rp_gport *pre;
  uint32_t npre, pre_cap;
  rp_gport *post;
  uint32_t npost, post_cap;
  uint32_t ngroups;
  int no_copy_insertion;
  rp_gmirror *mirrors; /* the mirror table (see above) */
  uint32_t nmirrors, mirrors_cap;
  /* Edge index (graph.c): an open-addressing hash set of edge positions + 1
   * (0 = empty) keyed by (from, to), so that rp_graph_add_edge's duplicate
   * check and rp_graph_remove_edge are O(1). An entry counts only while
   * edges[pos] still holds its key: code that drops edges from the tail
   * (undo paths) leaves stale entries, which lookups skip and a rebuild
   * clears. A copy of the struct must not share it (set eidx NULL). */
  uint32_t *eidx;
  uint32_t eidx_cap, eidx_used; /* slots (power of two), entries written */
};

/* Appends mirror (src, mem) to g's table: src must be a live instance
 * (not a mirror), mem a memory of the runtime. *out gets its index. */
rp_status rp__graph_add_mirror(rp_graph *g, rp_inst src, rp_mem mem,
                               uint32_t *out);
/* The instance a reference stands for: a mirror's source (id 0 when the
 * mirror index is out of range), else the reference itself. */
rp_inst rp__graph_source(const rp_graph *g, rp_inst i);
/* Checks the mirror table: sources live, memories in range. */
rp_status rp__check_mirrors(const rp_graph *g);
/* Checks a copy that names a mirror: it moves a whole mirror to or from
 * its own source (no reduction, no RECT domain). `what` names the op. */
rp_status rp__check_mirror_copy(const rp_graph *g, const rp_copy *c,
                                const char *what);
/* rp_graph_add_task for launches that may name mirrors of g (graph
 * files): the builder's checks run on the mirrors' sources. */
rp_status rp__graph_add_task_mirrored(rp_graph *g, const rp_launch *l,
                                      rp_op_id *out);
/* Copies acc with every mirror replaced by its source; RP_EINVAL naming
 * `what` and the access when a mirror index is out of range. *out is the
 * caller's to free. */
rp_status rp__resolve_accesses(const rp_graph *g, const rp_access *acc,
                               uint32_t nacc, const char *what,
                               rp_access **out);

/* Whether tasks on processor p may access inst in place: the runtime's
 * access matrix for the instance's memory, unless a test installed its own
 * predicate (rp__capture_set_reach). Copy insertion and graph validation
 * ask this; eager launches use the access matrix. */
int rp__reach(rp_runtime *rt, rp_proc p, rp_inst inst);
/* Test hook: replaces the access predicate copy insertion and validation
 * use, so that the insertion pass can be driven on the CPU backend (where
 * every worker reaches every memory). NULL restores the access matrix. The
 * predicate is asked only about user instances, never about mirrors (a
 * mirror lives in its processor's own memory). Set it while no capture or
 * instantiate is running. */
typedef int (*rp_reach_fn)(void *arg, rp_proc p, rp_inst inst);
rp_status rp__capture_set_reach(rp_runtime *rt, rp_reach_fn fn, void *arg);

/* RP_OK when a launch by this thread on rt would run eagerly on a runtime
 * that can run it, or would be recorded; RP_EUNSUPPORTED naming `what`
 * when rt is a model of a machine (no instance storage) and this thread
 * has no capture open on it. Launch entry points (here and in comm/) call
 * it before any side effect. */
rp_status rp__launch_eager_ok(rp_runtime *rt, const char *what);
/* A launch call of comm/ that failed while this thread records on rt
 * spends the name rp_capture_name_next gave it (as the capture's own
 * launch calls do). Returns st. */
rp_status rp__launch_failed(rp_runtime *rt, rp_status st);

/* The accesses an op declares (a copy reads its source and writes or
 * reduces into its destination; `tmp` holds those two). Returns the count
 * and points *out at them. */
uint32_t rp__op_accesses(const rp_gop *op, rp_access tmp[2],
                         const rp_access **out);
/* A task op borrowing l's arrays (rp__graph_append deep-copies them). */
void rp__gop_from_launch(rp_gop *op, const rp_launch *l);
/* Frees one op's owned arrays. */
void rp__gop_clear(rp_gop *op);
/* Deep-copies an op (arrays included). */
rp_status rp__gop_copy(rp_gop *dst, const rp_gop *src);
/* Appends an op (deep copy of *op) to g: validates what a builder call
 * validates (task exists, processor in range, instances live, args sizes,
 * interpolation ranges). */
rp_status rp__graph_append(rp_graph *g, const rp_gop *op, rp_op_id *out);
/* Appends an edge without duplicate checks (caller deduplicates). */
rp_status rp__graph_edge(rp_graph *g, rp_op_id from, rp_op_id to);
/* The same, for an edge capture inferred (marked so: lint and graph files
 * tell it from an edge someone asked for); nothing when from -> to is
 * there already. */
rp_status rp__graph_edge_inferred(rp_graph *g, rp_op_id from, rp_op_id to);
/* Topological order of g's ops into order[nops]; RP_ECYCLE with the ops on
 * one cycle named in the detail. */
rp_status rp__graph_topo(const rp_graph *g, uint32_t *order);
/* Creates an empty graph (counted against the runtime's live objects). */
rp_status rp__graph_new(rp_runtime *rt, const char *what, rp_graph **out);
/* Frees a graph no caller was given (a capture aborted or failed, a load
 * that failed) without taking a place in the quarantine of destroyed
 * handles (engine/util.h), whose 32 places keep the user's destroyed objects.
 */
void rp__graph_discard(rp_graph *g);
const char *rp__op_label(const rp_graph *g, rp_op_id op, char *buf, size_t n);

/* ---------------------------------------------------------------------- */
/* Dependence analysis over abstract tokens (an eager op's completion event,
 * or a recorded op's id), shared by eager execution and capture so both infer
 * exactly the same dependencies. Per instance it keeps the last writer (or
 * the current group of same-operator reductions), the readers since, and the
 * group's own predecessors. */

typedef struct rp_dep_token {
  uint64_t id;
  uint32_t proc; /* where the op ran / was placed (eager placement hint) */
  /* in a dependence set: 1 when the op only comes after this one (it
   * overwrites what this one read): an eager op does not inherit its
   * failure; 0 when it depends on what this one wrote */
  uint32_t order;
} rp_dep_token;

/* A set of tokens in insertion order. Membership is a linear scan while the
 * set is small and an open-addressing index once it grows (a sink reading a
 * thousand instances would otherwise make analysis quadratic). */
typedef struct rp_dep_set {
  rp_dep_token *v;
  uint32_t n, cap;
  uint32_t *index; /* slot -> position + 1, 0 empty; NULL while small */
  uint32_t icap;   /* power of two, >= 2 * cap */
} rp_dep_set;

typedef struct rp_dep_hooks {
  void (*retain)(void *arg, rp_dep_token t, uint32_t n); /* (optional) */
  void (*release)(void *arg, rp_dep_token t);            /* (optional) */
  int (*done)(void *arg, rp_dep_token t); /* (optional) completed? */
  void *arg;
} rp_dep_hooks;

typedef struct rp_analysis {
  struct rp_inst_deps *by_slot;
  uint32_t cap;
  struct rp_inst_deps *by_mirror; /* mirror references, by mirror index */
  uint32_t mcap;
  rp_dep_hooks hooks;
} rp_analysis;

void rp__analysis_init(rp_analysis *a, rp_dep_hooks hooks);
/* The hooks eager execution uses: tokens are engine events (eager.c). */
rp_dep_hooks rp__eager_hooks(rp_runtime *rt);
void rp__analysis_fini(rp_analysis *a);
/* Appends (deduplicated) the tokens an op with these accesses must wait for
 * (copy: the op is a copy, whose reductions commute only with copies').
 * The tokens stay valid until the next commit. */
rp_status rp__analysis_deps(rp_analysis *a, const rp_access *acc, uint32_t nacc,
                            int copy, rp_dep_set *deps);
/* Makes room for what rp__analysis_commit of the same accesses will store
 * (pruning completed tokens first), so that commit, once the op may run,
 * cannot run out of memory: call it before deps (a prune after them could
 * drop the last reference to a dependence not yet handed to the op's
 * gate), with nothing committed in between. RP_ENOMEM otherwise (nothing
 * recorded). */
rp_status rp__analysis_reserve(rp_analysis *a, const rp_access *acc,
                               uint32_t nacc);
/* Records the op `self` as the newest accessor. After rp__analysis_reserve
 * of the same accesses (nothing launched in between) it cannot fail. */
rp_status rp__analysis_commit(rp_analysis *a, const rp_access *acc,
                              uint32_t nacc, int copy, rp_dep_token self);
/* The tokens inst's sets have room for (tests: completed tokens are
 * pruned, so the sets of a long eager program stay small). */
uint32_t rp__analysis_room(rp_analysis *a, rp_inst inst);
/* The op `before`, one of inst's current writers, is ordered before
 * another of them (a sum chained in part order): later accessors need not
 * wait for it, so it leaves the writers (a reduction of N parts then keeps
 * the writers a reader waits for at O(1), not N). */
void rp__analysis_implied(rp_analysis *a, rp_inst inst, uint64_t before);
/* Appends every token recorded for instance slot `slot` (for waiting before
 * an instance is freed). */
rp_status rp__analysis_tokens(rp_analysis *a, rp_inst inst, rp_dep_set *out);
rp_status rp__depset_add(rp_dep_set *s, rp_dep_token t);
void rp__depset_clear(rp_dep_set *s);
void rp__depset_free(rp_dep_set *s);

/* Validates declared accesses against the runtime: live instances, known
 * privileges, reduce ops. `what` names the op in errors. */
rp_status rp__check_accesses(rp_runtime *rt, const rp_access *acc,
                             uint32_t nacc, const char *what);

/* ---- graph files (graph_load.c): limits and the bounded loaders ----
 * A graph file may have at most RP_GRAPH_FILE_MAX bytes, and the instances
 * the loader allocates for it (rp_graph_load with insts == NULL) at most
 * RP_GRAPH_ALLOC_MAX bytes together, in any memory: a small file cannot
 * make it allocate (and zero) gigabytes. docs/debugging.md "Graph files". */
/* (RP_GRAPH_FILE_MAX, RP_GRAPH_ALLOC_MAX: reprise.h) */

/* rp_graph_load from memory: buf need not be NUL-terminated. max_alloc caps
 * the bytes of the instances the loader allocates (insts == NULL); 0 means
 * RP_GRAPH_ALLOC_MAX. */
rp_status rp__graph_load_mem(rp_runtime *rt, const void *buf, size_t len,
                             const rp_inst *insts, uint32_t ninsts,
                             size_t max_alloc, rp_graph **out);
/* The recorded machine of a graph file (its optional graph.machine key):
 * *present = 1 and *m filled when the file has one, *present = 0 when not;
 * an error when the file is not a graph file or the key is malformed. */
rp_status rp__graph_machine(const void *buf, size_t len, rp_machine_desc *m,
                            int *present);
/* rp_graph_load with other limits: max_file bytes for the file (0:
 * RP_GRAPH_FILE_MAX), max_alloc as above. */
rp_status rp__graph_load_file(rp_runtime *rt, const char *path,
                              const rp_inst *insts, uint32_t ninsts,
                              size_t max_file, size_t max_alloc,
                              rp_graph **out);

#endif
