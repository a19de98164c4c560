/* The recorder (capture/record.c) and its dependence analysis
 * (capture/analysis.c): which recorded ops a capture orders, checked
 * against an oracle of the access rules (reprise.h, "The capture
 * contract", and RP_REDUCE), and what a capture does on misuse. */
#include "helpers.h"

#include <stdlib.h>
#include <string.h>

static rp_status empty_task(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

static rp_task_id reg(rp_runtime *rt, const char *name, rp_task_fn fn) {
  rp_task_id t;
  RP_CHECK(
      rp_task_register(rt, &(rp_task_desc){.name = name, .cpu_fn = fn}, &t));
  return t;
}

#define NI 3    /* instances */
#define NOPS 12 /* ops per random capture */
#define NCASES 3000

/* One op's access to one instance in the oracle: 0 none, else a privilege;
 * copy: the op is a copy (its reductions are copies'). */
typedef struct o_op {
  int priv[NI];
  int copy;
} o_op;

/* 1 when ops i < j must be ordered: they share an instance that one of
 * them does not only read, unless both fold into it with the same kind of
 * op and nothing but such folds touched it in between (one group). */
static int must_order(const o_op *ops, int i, int j) {
  for (int x = 0; x < NI; x++) {
    int a = ops[i].priv[x], b = ops[j].priv[x];
    if (!a || !b || (a == RP_READ && b == RP_READ))
      continue;
    if (a == RP_REDUCE && b == RP_REDUCE && ops[i].copy == ops[j].copy) {
      int same_group = 1;
      for (int k = i + 1; k < j; k++)
        if (ops[k].priv[x] &&
            (ops[k].priv[x] != RP_REDUCE || ops[k].copy != ops[i].copy))
          same_group = 0;
      if (same_group)
        continue;
    }
    return 1;
  }
  return 0;
}

Test(capture, random_captures_order_exactly_the_conflicting_ops,
     .timeout = 300) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg(rt, "empty", empty_task);
  rp_inst in[NI];
  rp_rect r = rp_rect_1d(0, 3);
  for (int x = 0; x < NI; x++)
    RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &in[x]));
  srand(12345);
  for (int c = 0; c < NCASES; c++) {
    o_op ops[NOPS];
    memset(ops, 0, sizeof ops);
    RP_CHECK(rp_capture_begin(rt, NULL));
    for (int o = 0; o < NOPS; o++) {
      if (rand() % 3 == 0) { /* a copy between two instances */
        int s = rand() % NI, d = (s + 1 + rand() % (NI - 1)) % NI;
        int red = rand() % 2;
        ops[o].copy = 1;
        ops[o].priv[s] = RP_READ;
        ops[o].priv[d] = red ? RP_REDUCE : RP_WRITE;
        RP_CHECK(rp_launch_copy(
            rt,
            &(rp_copy){.src = in[s],
                       .dst = in[d],
                       .redop = red ? RP_REDOP_SUM : RP_REDOP_NONE},
            NULL));
        continue;
      }
      rp_access acc[2 * NI];
      uint32_t n = 0;
      for (int k = 0; k < 2 * NI; k++) {     /* an instance may come twice */
        int x = rand() % NI, p = rand() % 6; /* 0, 1: none */
        static const int privs[] = {0, 0, RP_READ, RP_WRITE, RP_RW, RP_REDUCE};
        if (!privs[p] || (k >= NI && rand() % 3))
          continue;
        int had = ops[o].priv[x];
        /* two accesses: both reads a read, both folds a fold, else RW */
        ops[o].priv[x] = !had || had == privs[p] ? privs[p] : RP_RW;
        if (had == RP_WRITE && privs[p] == RP_WRITE)
          ops[o].priv[x] = RP_WRITE;
        acc[n++] =
            (rp_access){in[x], (rp_privilege)privs[p],
                        privs[p] == RP_REDUCE ? RP_REDOP_SUM : RP_REDOP_NONE};
      }
      RP_CHECK(rp_launch_task(
          rt,
          &(rp_launch){
              .task = t, .proc = RP_PROC_ANY, .accesses = acc, .naccess = n},
          NULL));
    }
    rp_graph *g;
    RP_CHECK(rp_capture_end(rt, &g));
    cr_assert_eq(rp_graph_op_count(g), NOPS);
    /* every edge joins conflicting ops (no spurious order) */
    for (uint32_t e = 0; e < rp_graph_edge_count(g); e++) {
      rp_op_id from, to;
      int inferred;
      RP_CHECK(rp_graph_edge_query(g, e, &from, &to, &inferred));
      cr_assert(from < to && must_order(ops, (int)from, (int)to),
                "case %d: edge %u -> %u joins ops that need no order", c, from,
                to);
    }
    /* every conflicting pair is ordered (no missed dependence) */
    for (int i = 0; i < NOPS; i++)
      for (int j = i + 1; j < NOPS; j++)
        if (must_order(ops, i, j))
          cr_assert(rp_graph_depends(g, (rp_op_id)i, (rp_op_id)j),
                    "case %d: ops %d and %d conflict, unordered", c, i, j);
    RP_CHECK(rp_graph_destroy(g));
  }
  for (int x = 0; x < NI; x++)
    RP_CHECK(rp_instance_free(rt, in[x]));
  th_destroy(rt);
}
