/* tools/dump_view.h — `reprise dump`'s views for large steps, over the
 * model of dump_model.h: ops grouped by dotted name prefix (--group),
 * the neighbourhood of an op or group (--focus/--depth), the critical path
 * (--critical-path), a replay trace's summary (--trace/--summary), the
 * difference of two graphs (--diff) and the explorable page (--format
 * html). Each view lives in its own file (dump_view.c, dump_crit.c,
 * dump_trace.c, dump_summary.c, dump_diff.c, dump_html.c with its style
 * and script in dump_html_page.c and its SVG compaction in
 * dump_html_svg.c); they read the model and print, and say what failed on
 * err. */
#ifndef RP_DUMP_VIEW_H
#define RP_DUMP_VIEW_H

#include "dump_model.h"

/* The group depth's range (--group DEPTH). */
#define DV_MAX_DEPTH 32u
/* The group of ops without a name. */
#define DV_UNNAMED "(unnamed)"

/* ---- graph-file extras the model does not hold (dump_extra.c) ---- */

typedef struct dv_port {
  char *name;
  uint32_t *ops; /* bound ops */
  uint32_t nops;
} dv_port;

typedef struct dv_extra {
  char **args; /* per op: its argument bytes in hex ("" none), or NULL */
  uint32_t nops;
  dv_port *pre, *post;
  uint32_t npre, npost;
  /* For --diff, the fields of each op and instance that the model does not
   * compare (an op's interpolations, workspace, copy domain and rectangle,
   * reduction, operator, SPMD processors; an instance's strides): sorted
   * "key\tvalue" lines (value as compact JSON), so that key order in the
   * file does not matter. */
  char **op_rest, **inst_rest;
  uint32_t ninsts;
} dv_extra;

/* Reads op arguments and port names from a graph file's text. 0 ok, -1
 * the text is not a graph file this build can read (said on err). */
int dv_extra_read(const char *text, size_t len, dv_extra *x, FILE *err);
void dv_extra_free(dv_extra *x);

/* ---- grouping and focus (dump_view.c) ---- */

/* 1 when the name component c (n bytes) is a shard suffix: "s" or "t"
 * and a decimal number ("s3", "t0"; the trainers name an op's shards
 * "embed.s3", "h1.attn.qkv.s0.t1", "h1.mlp.fc.w.t0.replicate"). */
int dv_shard_component(const char *c, size_t n);
/* The first `depth` dotted components of label into buf ("h3.attn.qkv",
 * depth 2: "h3.attn"), its shard suffixes (dv_shard_component; never the
 * first component) left out and not counted ("h3.attn.qkv.s1", depth 4:
 * "h3.attn.qkv"); DV_UNNAMED for "". */
void dv_group_key(const char *label, unsigned depth, char *buf, size_t cap);
/* label's shard suffixes, each with its dot (".s1.t0"; "" none). */
void dv_shard_suffix(const char *label, char *buf, size_t cap);

typedef struct dv_node {
  char name[RP_NAME_MAX + 1]; /* the group's prefix or the op's name */
  uint32_t op;                /* an op node: the op; a group: UINT32_MAX */
  uint32_t first, nops;       /* its ops: view.members[first .. +nops) */
  uint32_t ntasks, ncopies;
  uint32_t shards; /* the different shard suffixes of its ops (1: none) */
  double cost_ns;  /* its ops' costs added */
  int crit;        /* holds an op of the critical path */
} dv_node;

typedef struct dv_vedge {
  uint32_t from, to; /* nodes */
  uint32_t count;    /* graph edges it stands for */
  int crit;          /* joins two consecutive ops of the critical path */
} dv_vedge;

typedef struct dv_view {
  dv_node *nodes;
  uint32_t nnodes;
  uint32_t *members; /* ops, node by node */
  uint32_t nmembers;
  uint32_t *node_of; /* per op of the graph: its node, or UINT32_MAX */
  dv_vedge *edges;
  uint32_t nedges;
} dv_view;

typedef struct dv_crit dv_crit;

typedef struct dv_opts {
  unsigned depth;        /* group by this many components; 0: ops */
  const uint32_t *ops;   /* the ops to show (NULL: every op) */
  uint32_t nops;         /* their number */
  const char *parent;    /* the enclosing group's key (NULL: none) */
  int single_as_op;      /* a group of one op is drawn as the op */
  const dv_crit *crit;   /* marks the path's nodes and edges (or NULL) */
  const double *cost_ns; /* per op (or NULL: cost hints) */
} dv_opts;

/* Builds the view of o's ops. 0 ok, -1 out of memory (said on err). */
int dv_build(const dm_graph *m, const dv_opts *o, dv_view *v, FILE *err);
void dv_free(dv_view *v);

/* The ops of the group or op called `name` (an op's name, a group's
 * prefix, or "op N") and those within `depth` edges before or after them,
 * ascending, into *ops (malloc'd). The number of ops; 0 when name matches
 * none (nothing allocated); UINT32_MAX out of memory. */
uint32_t dv_focus(const dm_graph *m, const char *name, unsigned depth,
                  uint32_t **ops);

/* The model's edges as adjacency lists: successors (fwd) or predecessors
 * of op i are adj[off[i] .. off[i + 1]). 0 ok, -1 out of memory. */
int dv_adj(const dm_graph *m, int fwd, uint32_t **off, uint32_t **adj);

/* Writes s as the inside of a JSON string (quotes, backslashes, control
 * bytes and "</" escaped, so it may sit inside an HTML script). */
void dv_json_str(FILE *out, const char *s);
/* A node's label: its name; an op's task name when unnamed; "''" for a
 * group of an empty name (ops named ".x" group under ''). */
const char *dv_node_label(const dm_graph *m, const dv_node *n);

/* Writes the view (text, DOT or JSON). what: a line saying what the view
 * is ("--group 1 of 10004 ops"). 0 ok, -1 write error. */
int dv_write(const dm_graph *m, const dv_view *v, rp_dump_format fmt,
             const char *what, FILE *out);

/* ---- the critical path (dump_crit.c) ---- */

struct dv_crit {
  uint32_t *path; /* ops, first to last */
  uint32_t n;
  double total_ns;   /* its cost (op count when basis is "op count") */
  const char *basis; /* "measured durations", "cost hints", "op count" */
  uint8_t *on;       /* per op: 1 on the path */
  uint32_t *next;    /* per op on the path: the op after it, or UINT32_MAX */
};

/* The longest path by cost: cost_ns per op when given (measured), else
 * the cost hints, else every op 1. 0 ok, -1 a cycle or out of memory
 * (said on err). */
int dv_crit_find(const dm_graph *m, const double *cost_ns, dv_crit *c,
                 FILE *err);
void dv_crit_free(dv_crit *c);
/* A path of more than DV_CRIT_LISTED ops starts with its cost per group of
 * names (the DV_CRIT_GROUPS largest, then the rest counted). */
#define DV_CRIT_LISTED 32u
#define DV_CRIT_GROUPS 16u
/* The path: on a path of more than DV_CRIT_LISTED ops, first its cost per
 * group of `depth` name components (0: 1), the largest first; then one op
 * a line with its cost and share. 0 ok, -1 write error. */
int dv_crit_print(const dm_graph *m, const dv_crit *c, const double *cost_ns,
                  unsigned depth, FILE *out);

/* ---- replay traces (dump_trace.c) ---- */

typedef enum dv_cat {
  DV_EV_TASK,
  DV_EV_COPY,
  DV_EV_WAIT,
  DV_EV_LAUNCH,
  DV_EV_GPU,
  DV_EV_REPLAY,
  DV_EV_OTHER
} dv_cat;

typedef struct dv_event {
  const char *name; /* the op's name or its task's (points into the doc) */
  const char *task; /* named ops: the task; else NULL */
  dv_cat cat;
  uint32_t tid;
  double ts, dur; /* us */
  int64_t op;     /* args.op, -1 none */
  int64_t replay; /* args.replay, -1 none */
  int device;     /* a GPU span with device times */
  int ran;        /* args.status is "ok" or absent: the unit ran (an SPMD
                     shard a replay did not run, or an op a stale or failed
                     replay skipped, is an event but no run) */
} dv_event;

typedef struct dv_track {
  uint32_t tid;
  const char *name;
} dv_track;

typedef struct dv_trace {
  dv_event *ev;
  uint32_t nev;
  dv_track *tracks;
  uint32_t ntracks;
  void *doc; /* the parsed JSON the names point into */
} dv_trace;

/* Loads a Chrome trace that `reprise train --trace` (rp_exec_trace_write)
 * wrote, of at most max bytes (0, or above DV_TRACE_MAX_BYTES: that). 0
 * ok, -1 unreadable, too large or not such a trace (said on err, naming
 * the file and what is wrong). */
#define DV_TRACE_MAX_BYTES ((uint64_t)1 << 30)
int dv_trace_load(const char *path, uint64_t max, dv_trace *t, FILE *err);
void dv_trace_free(dv_trace *t);
/* 0 when every op event of t names an op of m under that op's name (its
 * own, else its task's; an unnamed copy's "reprise.copy"); else -1, said
 * on err naming the first op that differs: a trace of another graph. */
int dv_trace_matches(const dv_trace *t, const dm_graph *m, FILE *err);
/* Each op's mean measured duration over its runs in the trace (events
 * that ran: dv_event.ran; ns; 0 where the trace has none) into *cost (malloc'd,
 * m->nops entries). 0 ok, -1 a trace of another graph (dv_trace_matches), or
 * out of memory (said). */
int dv_trace_op_costs(const dv_trace *t, const dm_graph *m, double **cost,
                      FILE *err);

/* ---- summary (dump_summary.c) ---- */

/* Time per group (depth) and per task, each track's busy share, idle
 * gaps over gap_us, the slowest replays, device times. 0 ok, -1 write
 * error or out of memory. */
int dv_summary(const dv_trace *t, unsigned depth, double gap_us, FILE *out,
               FILE *err);

/* ---- diff (dump_diff.c) ---- */

/* The differences of b from a: ops, edges, instances and ports added,
 * removed or changed (ops matched by name, then by structure). *ndiff gets
 * their number. 0 ok, -1 out of memory (said on err). */
int dv_diff(const dm_graph *a, const dv_extra *xa, const dm_graph *b,
            const dv_extra *xb, FILE *out, FILE *err, uint32_t *ndiff);

/* ---- the page (dump_html.c) ---- */

typedef struct dv_html_opts {
  const char *title;
  const dv_extra *extra;
  const dv_crit *crit;
  const double *cost_ns; /* measured, or NULL */
  const uint32_t *ops;   /* --focus: these ops only (NULL: every op) */
  uint32_t nops;
  unsigned depth; /* the top level's grouping depth (0 ops, default 1) */
} dv_html_opts;

/* The page's style and script (dump_html_page.c): lines, NULL-ended. */
extern const char *const dv_page_css[];
extern const char *const dv_page_js[];

/* Writes the SVG `dot -Tsvg` laid a level out in (svg, len bytes) as the
 * inside of a JSON string, compacted for the page (dump_html_svg.c): no
 * comments, titles or attributes the page's style and script do not need.
 * 0 ok, -1 out of memory. */
int dv_svg_json(FILE *out, const char *svg, size_t len);

/* One self-contained page: every level of grouping laid out by Graphviz
 * (`dot`), d3 (libjs-d3) and the page's script inlined. 0 ok, -1 failed
 * (said on err: dot or d3 missing, dot failed, write error). */
int dv_html(const dm_graph *m, const dv_html_opts *o, FILE *out, FILE *err);

#endif
