/* test/test_misuse_inputs.c — nothing a caller does can corrupt
 * memory or hang the process. One test per class of misuse (CPU backend):
 * sizes at the edges of their types (checked arithmetic), hostile files
 * for every reader (graph files, data files, the dump and train commands),
 * write errors (/dev/full), overlapping external copies, and graphs
 * built at scale (edge and task indexes). Run under ASan+UBSan and TSan
 * in CI: a failure here is often a sanitizer report, not an assertion. */
#include "helpers.h"

#include "capture/capture.h" /* rp__graph_load_file, the file limits */
#include "cli_run.h"
#include "engine/util.h" /* the checked helpers */
#include "train/data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static rp_status noop(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

static rp_task_id reg_noop(rp_runtime *rt) {
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "misuse.noop", .cpu_fn = noop}, &t));
  return t;
}

static int has(const char *hay, const char *needle) {
  return strstr(hay, needle) != NULL;
}

/* ---- checked arithmetic ---- */

Test(misuse_sizes, checked_helpers_at_the_edges) {
  size_t z;
  int64_t v;
  cr_assert(!rp__mul_ok(SIZE_MAX, 2, &z));
  cr_assert(rp__mul_ok(SIZE_MAX, 1, &z) && z == SIZE_MAX);
  cr_assert(!rp__add_ok(SIZE_MAX, 1, &z));
  cr_assert(!rp__align_up_ok(SIZE_MAX, 64, &z));
  cr_assert(!rp__align_up_ok(SIZE_MAX - 62, 64, &z));
  cr_assert(rp__align_up_ok(SIZE_MAX - 63, 64, &z) && z == SIZE_MAX - 63);
  cr_assert(rp__align_up_ok(65, 64, &z) && z == 128);
  cr_assert(rp__align_up_ok(5, 0, &z) && z == 5); /* 0 counts as 1 */
  cr_assert(!rp__align_up_ok(5, 3, &z));          /* not a power of two */
  cr_assert(!rp__add_i64_ok(INT64_MAX, 1, &v));
  cr_assert(!rp__add_i64_ok(INT64_MIN, -1, &v));
  cr_assert(!rp__sub_i64_ok(INT64_MIN, 1, &v));
  cr_assert(!rp__mul_i64_ok(INT64_MAX, 2, &v));
  cr_assert(!rp__mul_i64_ok(INT64_MIN, -1, &v));
  cr_assert(rp__mul_i64_ok((int64_t)1 << 31, (int64_t)1 << 31, &v) &&
            v == (int64_t)1 << 62);
  cr_assert(!rp__extent_ok(INT64_MIN, INT64_MAX, &v));
  cr_assert(!rp__extent_ok(-1, INT64_MAX - 1, &v));
  cr_assert(!rp__extent_ok(5, 4, &v));
  cr_assert(rp__extent_ok(0, INT64_MAX - 1, &v) && v == INT64_MAX);
  cr_assert(rp__extent_ok(INT64_MIN, -2, &v) && v == INT64_MAX);
  cr_assert(!rp__i64_size_ok(-1, &z));
  cr_assert(rp__i64_size_ok(INT64_MAX, &z) && z == (size_t)INT64_MAX);
}

Test(misuse_sizes, rect_make_and_init) {
  rp_rect r;
  int64_t lo[2] = {INT64_MAX, 0}, ext[2] = {2, 1};
  RP_EXPECT(rp_rect_init(&r, 1, NULL, NULL), RP_EINVAL);
  RP_EXPECT(rp_rect_init(NULL, 1, NULL, ext), RP_EINVAL);
  rp_rect m = rp_rect_make(1, NULL, NULL); /* no dereference of NULL */
  cr_assert_eq(m.dim, 0);
  cr_assert(has(rp_error_detail(), "NULL extent"), "%s", rp_error_detail());
  RP_EXPECT(rp_rect_init(&r, 0, NULL, ext), RP_ESHAPE);
  RP_EXPECT(rp_rect_init(&r, RP_MAX_DIM + 1, NULL, ext), RP_ESHAPE);
  RP_EXPECT(rp_rect_init(&r, 1, lo, ext), RP_ERANGE); /* INT64_MAX + 1 */
  cr_assert_eq(rp_rect_make(1, lo, ext).dim, 0);
  int64_t neg[1] = {-5}, zero[1] = {0}, huge[1] = {INT64_MAX};
  RP_EXPECT(rp_rect_init(&r, 1, NULL, neg), RP_ESHAPE);
  RP_EXPECT(rp_rect_init(&r, 1, NULL, zero), RP_ESHAPE);
  RP_CHECK(rp_rect_init(&r, 1, NULL, huge));
  cr_assert_eq(r.hi[0], INT64_MAX - 1);
  int64_t near[1] = {INT64_MAX - 1};
  RP_CHECK(rp_rect_init(&r, 1, near, ext));
  cr_assert_eq(r.hi[0], INT64_MAX);
  int64_t minlo[1] = {INT64_MIN};
  RP_CHECK(rp_rect_init(&r, 1, minlo, huge));
  cr_assert_eq(r.hi[0], -2);
  /* volumes past 2^63 and extents past int64 are 0, not UB */
  rp_rect all = rp_rect_1d(INT64_MIN, INT64_MAX);
  cr_assert_eq(rp_rect_volume(&all), 0);
  rp_rect big = rp_rect_2d(0, INT64_MAX - 1, 0, 1);
  cr_assert_eq(rp_rect_volume(&big), 0);
  /* a dim-0 rect from rp_rect_make is refused by every call */
  rp_runtime *rt = th_cpu_runtime(1);
  rp_inst i;
  RP_EXPECT(rp_instance_create(rt, 0, RP_F32, &m, NULL, &i), RP_ESHAPE);
  th_destroy(rt);
}

Test(misuse_sizes, chunk_rect_at_large_extents) {
  rp_rect out;
  rp_rect w = rp_rect_1d(0, INT64_MAX - 1); /* extent INT64_MAX */
  RP_CHECK(rp_chunk_rect(&w, 0, 2, 1, &out));
  cr_assert_eq(out.lo[0], (int64_t)1 << 62);
  cr_assert_eq(out.hi[0], INT64_MAX - 1);
  /* 2^32 - 1 parts of an extent of 2^63 - 1 are never empty: the last
   * four chunks are non-empty, contiguous, and the last ends the rect */
  rp_rect next = {0};
  for (uint32_t i = 0; i < 4; i++) {
    uint32_t n = UINT32_MAX, k = n - 1 - i;
    RP_CHECK(rp_chunk_rect(&w, 0, n, k, &out));
    cr_assert(out.lo[0] <= out.hi[0], "chunk %u is empty", k);
    if (i == 0)
      cr_assert_eq(out.hi[0], INT64_MAX - 1, "the last chunk ends at %lld",
                   (long long)out.hi[0]);
    else
      cr_assert_eq(out.hi[0] + 1, next.lo[0], "chunks %u and %u: a gap", k,
                   k + 1);
    next = out;
  }
  rp_rect neg = rp_rect_1d(INT64_MIN, -2);
  RP_CHECK(rp_chunk_rect(&neg, 0, 3, 2, &out));
  cr_assert_eq(out.hi[0], -2);
  cr_assert(out.lo[0] > INT64_MIN && out.lo[0] <= -2);
  /* extents or volumes that overflow are RP_ERANGE (as the header says),
   * an empty rectangle RP_ESHAPE */
  rp_rect all = rp_rect_1d(INT64_MIN, INT64_MAX);
  RP_EXPECT(rp_chunk_rect(&all, 0, 2, 0, &out), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "extent of dim 0 overflows"), "%s",
            rp_error_detail());
  rp_rect wide = rp_rect_1d(INT64_MIN, INT64_MAX - 1); /* 2^64 - 1 points */
  RP_EXPECT(rp_chunk_rect(&wide, 0, 3, 2, &out), RP_ERANGE);
  rp_rect two = rp_rect_2d(0, INT64_MAX - 1, 0, INT64_MAX - 1);
  RP_EXPECT(rp_chunk_rect(&two, 1, 2, 1, &out), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "volume overflows"), "%s",
            rp_error_detail());
  rp_rect empty = rp_rect_1d(5, 4);
  RP_EXPECT(rp_chunk_rect(&empty, 0, 2, 0, &out), RP_ESHAPE);
  RP_EXPECT(rp_chunk_rect(&w, 0, 0, 0, &out), RP_EINVAL);
  RP_EXPECT(rp_chunk_rect(&w, 0, 2, 2, &out), RP_ERANGE);
  RP_EXPECT(rp_chunk_rect(NULL, 0, 2, 0, &out), RP_EINVAL);
}

Test(misuse_sizes, instance_extents_strides_and_buffers) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_inst i;
  rp_rect r = rp_rect_1d(0, INT64_MAX); /* extent 2^63 */
  RP_EXPECT(rp_instance_create(rt, 0, RP_U8, &r, NULL, &i), RP_ERANGE);
  r = rp_rect_1d(INT64_MIN, 0);
  RP_EXPECT(rp_instance_create(rt, 0, RP_U8, &r, NULL, &i), RP_ERANGE);
  r = rp_rect_1d(0, ((int64_t)1 << 62) - 1); /* 2^62 f64: bytes overflow */
  RP_EXPECT(rp_instance_create(rt, 0, RP_F64, &r, NULL, &i), RP_ERANGE);
  int64_t e4[4] = {1 << 20, 1 << 20, 1 << 20, 1 << 20}; /* 2^80 points */
  r = rp_rect_make(4, NULL, e4);
  RP_EXPECT(rp_instance_create(rt, 0, RP_U8, &r, NULL, &i), RP_ERANGE);
  r = rp_rect_1d(0, 1);
  int64_t s_max[1] = {INT64_MAX}, s_neg[1] = {-4}, s_zero[1] = {0};
  RP_EXPECT(rp_instance_create(rt, 0, RP_F32, &r, s_max, &i), RP_ERANGE);
  RP_EXPECT(rp_instance_create(rt, 0, RP_F32, &r, s_neg, &i), RP_ERANGE);
  RP_EXPECT(rp_instance_create(rt, 0, RP_F32, &r, s_zero, &i), RP_ERANGE);
  r = rp_rect_2d(0, 1, 0, 1);
  int64_t s2[2] = {INT64_MAX / 2 + 1, 1};
  RP_EXPECT(rp_instance_create(rt, 0, RP_F32, &r, s2, &i), RP_ERANGE);
  /* external buffers: too small, or wrapping the address space */
  float buf[8];
  r = rp_rect_1d(0, 7);
  RP_EXPECT(rp_instance_create_external(rt, 0, RP_F32, &r, NULL, buf,
                                        sizeof buf - 1, &i),
            RP_ERANGE);
  RP_EXPECT(
      rp_instance_create_external(rt, 0, RP_F32, &r, NULL, buf, SIZE_MAX, &i),
      RP_ERANGE);
  /* realloc keeps a checked shape; a stale handle is refused */
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &i));
  rp_inst old = i;
  RP_CHECK(rp_instance_realloc(rt, &i));
  RP_EXPECT(rp_instance_realloc(rt, &old), RP_ESTALE);
  /* a read or write buffer of the wrong size */
  RP_EXPECT(rp_instance_read(rt, i, buf, SIZE_MAX), RP_ESHAPE);
  RP_CHECK(rp_instance_free(rt, i));
  th_destroy(rt);
}

/* A one-op graph of the noop task with the given workspace, instantiated;
 * rp_graph_validate must say what instantiate says (it checks the graph
 * as instantiate would), naming the op too. A workspace whose slices
 * overflow is refused by the builder already, leaving the graph empty
 * (and *out untouched): its status is returned then. */
static rp_status ws_instantiate(rp_runtime *rt, rp_task_id t, size_t bytes,
                                size_t align, uint32_t shards) {
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_op_id id = 77;
  rp_status ast = rp_graph_add_task(g,
                                    &(rp_launch){.task = t,
                                                 .proc = RP_PROC_ANY,
                                                 .shards = shards,
                                                 .workspace_bytes = bytes,
                                                 .workspace_align = align},
                                    &id);
  if (ast) {
    cr_assert(has(rp_error_detail(),
                  "rp_graph_add_task: task 'misuse.noop': workspace of "),
              "%s", rp_error_detail());
    cr_assert_eq(rp_graph_op_count(g), 0, "a refused add adds nothing");
    cr_assert_eq(id, 77, "*out untouched");
    RP_CHECK(rp_graph_destroy(g));
    return ast;
  }
  rp_status vst = rp_graph_validate(g);
  cr_assert(vst == RP_OK || has(rp_error_detail(), "op 0 (task "),
            "rp_graph_validate names the op: %s", rp_error_detail());
  rp_exec *ex = NULL;
  rp_status st = rp_instantiate(g, NULL, &ex);
  cr_assert_eq(vst, st,
               "workspace %zu x %u: rp_graph_validate said %s, "
               "rp_instantiate %s",
               bytes, shards, rp_status_name(vst), rp_status_name(st));
  rp_exec_destroy(ex);
  RP_CHECK(rp_graph_destroy(g));
  return st;
}

Test(misuse_sizes, workspace_bytes_near_size_max) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg_noop(rt);
  RP_EXPECT(ws_instantiate(rt, t, SIZE_MAX, 0, 1), RP_ERANGE);
  cr_assert(has(rp_error_detail(), "workspace"), "%s", rp_error_detail());
  RP_EXPECT(ws_instantiate(rt, t, SIZE_MAX - 100, 64, 2), RP_ERANGE);
  RP_EXPECT(ws_instantiate(rt, t, SIZE_MAX / 2 + 1, 0, 2), RP_ERANGE);
  cr_assert(has(rp_error_detail(),
                "workspace of 2 x 9223372036854775808 bytes (aligned to 64) "
                "overflows"),
            "the shards and bytes are named: %s", rp_error_detail());
  /* recorded launches are refused alike: the capture keeps no op that no
   * instantiate could take */
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_EXPECT(rp_launch_task(rt,
                           &(rp_launch){.task = t,
                                        .proc = RP_PROC_ANY,
                                        .shards = 2,
                                        .workspace_bytes = SIZE_MAX / 2 + 1},
                           NULL),
            RP_ERANGE);
  cr_assert(has(rp_error_detail(), "rp_launch_task: task 'misuse.noop': "
                                   "workspace of 2 x "),
            "%s", rp_error_detail());
  rp_graph *cg;
  RP_CHECK(rp_capture_end(rt, &cg));
  cr_assert_eq(rp_graph_op_count(cg), 0);
  RP_CHECK(rp_graph_destroy(cg));
  /* (an alignment of 2^63 is refused by the builder: below) */
  RP_CHECK(ws_instantiate(rt, t, 100, 0, 2));
  /* eager launches round the same way */
  rp_event done;
  RP_EXPECT(
      rp_launch_task(
          rt,
          &(rp_launch){.task = t, .proc = 0, .workspace_bytes = SIZE_MAX - 3},
          &done),
      RP_ERANGE);
  RP_EXPECT(rp_launch_task(rt,
                           &(rp_launch){.task = t,
                                        .proc = 0,
                                        .workspace_bytes = 64,
                                        .workspace_align = 3},
                           &done),
            RP_EINVAL);
  /* a power of two, but above a huge page: refused, not allocated */
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_launch big = {.task = t,
                   .proc = 0,
                   .workspace_bytes = 64,
                   .workspace_align = (size_t)1 << 40};
  RP_EXPECT(rp_launch_task(rt, &big, &done), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "workspace alignment 1099511627776 "
                                      "(max 2097152)"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_graph_add_task(g, &big, NULL), RP_ERANGE);
  big.workspace_align = RP_MAX_WORKSPACE_ALIGN; /* the largest: works */
  RP_CHECK(rp_graph_add_task(g, &big, NULL));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A graph with one op whose interpolation reads replay bytes [8, 16). */
static rp_graph *interp_graph(rp_runtime *rt, rp_task_id t, size_t src) {
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  int64_t args = 0;
  rp_op_id op;
  RP_CHECK(rp_graph_add_task(
      g,
      &(rp_launch){
          .task = t, .proc = 0, .args = &args, .args_size = sizeof args},
      &op));
  RP_CHECK(rp_graph_add_interp(
      g, op, &(rp_interp){.src_offset = src, .dst_offset = 0, .bytes = 8}));
  return g;
}

Test(misuse_sizes, exec_options_and_argument_blocks) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t = reg_noop(rt);
  rp_graph *g = interp_graph(rt, t, 8);
  rp_exec *ex = NULL;
  RP_EXPECT(rp_instantiate(g, &(rp_exec_opts){.max_inflight = 65}, &ex),
            RP_ERANGE);
  cr_assert(has(rp_error_detail(), "64"), "%s", rp_error_detail());
  RP_EXPECT(rp_instantiate(g, &(rp_exec_opts){.max_inflight = UINT32_MAX}, &ex),
            RP_ERANGE);
  RP_EXPECT(rp_instantiate(g, &(rp_exec_opts){.max_args = SIZE_MAX}, &ex),
            RP_ERANGE);
  RP_EXPECT(rp_instantiate(
                g, &(rp_exec_opts){.max_args = RP_MAX_REPLAY_ARGS + 1}, &ex),
            RP_ERANGE);
  RP_EXPECT(rp_instantiate(g, &(rp_exec_opts){.max_args = 15}, &ex),
            RP_ERANGE); /* the interpolation reads past max_args */
  cr_assert_null(ex);
  RP_CHECK(rp_instantiate(
      g, &(rp_exec_opts){.max_inflight = RP_MAX_INFLIGHT, .max_args = 16},
      &ex));
  /* short argument blocks: an error naming the op and interpolation */
  int64_t vals[2] = {1, 2};
  rp_event done;
  RP_EXPECT(
      rp_replay(ex, &(rp_replay_args){.args = vals, .args_size = 8}, &done),
      RP_ERANGE);
  cr_assert(has(rp_error_detail(), "op 0") &&
                has(rp_error_detail(), "interpolation 0"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_replay(ex, NULL, &done), RP_ERANGE);
  RP_EXPECT(
      rp_replay(ex, &(rp_replay_args){.args = vals, .args_size = 17}, &done),
      RP_ERANGE);
  RP_EXPECT(
      rp_replay(ex, &(rp_replay_args){.args = NULL, .args_size = 16}, &done),
      RP_EINVAL);
  RP_CHECK(
      rp_replay(ex, &(rp_replay_args){.args = vals, .args_size = 16}, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  /* an interpolation source past the largest replay argument block, or
   * whose end overflows, never instantiates: refused when it is added (the
   * builder, capture and the loader alike), naming the op's own index */
  g = interp_graph(rt, t, RP_MAX_REPLAY_ARGS - 8); /* the last 8 bytes */
  rp_interp past[] = {{RP_MAX_REPLAY_ARGS - 7, 0, 8}, {SIZE_MAX - 3, 0, 8}};
  for (int k = 0; k < 2; k++) {
    RP_EXPECT(rp_graph_add_interp(g, 0, &past[k]), RP_ERANGE);
    cr_assert(has(rp_error_detail(),
                  "rp_graph_add_interp: task 'misuse.noop': interpolation 1 "
                  "reads replay argument bytes") &&
                  has(rp_error_detail(), "RP_MAX_REPLAY_ARGS"),
              "%s", rp_error_detail());
  }
  RP_CHECK(rp_graph_validate(g));
  RP_CHECK(
      rp_instantiate(g, &(rp_exec_opts){.max_args = RP_MAX_REPLAY_ARGS}, &ex));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  int64_t args = 0;
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_EXPECT(rp_launch_task(rt,
                           &(rp_launch){.task = t,
                                        .proc = 0,
                                        .args = &args,
                                        .args_size = sizeof args,
                                        .interps = past,
                                        .ninterp = 1},
                           NULL),
            RP_ERANGE);
  cr_assert(has(rp_error_detail(), "interpolation 0 reads replay argument"),
            "%s", rp_error_detail());
  RP_CHECK(rp_capture_end(rt, &g));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}

/* A copy src -> dst recorded is refused (RP_EINVAL) at instantiate, or
 * already when added, and never runs. */
static void recorded_copy_refused(rp_runtime *rt, rp_inst src, rp_inst dst) {
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  rp_status st = rp_graph_add_copy(g, &(rp_copy){.src = src, .dst = dst}, NULL);
  if (!st) {
    rp_exec *ex = NULL;
    RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_EINVAL);
  } else {
    RP_EXPECT(st, RP_EINVAL);
  }
  RP_CHECK(rp_graph_destroy(g));
}

Test(misuse_sizes, overlapping_external_copies_are_refused) {
  rp_runtime *rt = th_cpu_runtime(1);
  float buf[64];
  for (int k = 0; k < 64; k++)
    buf[k] = (float)k;
  rp_rect r = rp_rect_1d(0, 31);
  rp_inst a, b, c;
  RP_CHECK(rp_instance_create_external(rt, 0, RP_F32, &r, NULL, buf,
                                       32 * sizeof(float), &a));
  RP_CHECK(rp_instance_create_external(rt, 0, RP_F32, &r, NULL, buf + 16,
                                       32 * sizeof(float), &b));
  RP_CHECK(rp_instance_create_external(rt, 0, RP_F32, &r, NULL, buf + 32,
                                       32 * sizeof(float), &c));
  rp_event done;
  RP_EXPECT(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = b}, &done),
            RP_EINVAL);
  cr_assert(has(rp_error_detail(), "overlap"), "%s", rp_error_detail());
  RP_EXPECT(
      rp_launch_copy(rt, &(rp_copy){.src = b, .dst = a, .redop = RP_REDOP_SUM},
                     &done),
      RP_EINVAL);
  /* disjoint parts of one buffer copy as usual */
  RP_CHECK(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = c}, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  for (int k = 0; k < 32; k++)
    cr_assert_eq(buf[32 + k], (float)k);
  recorded_copy_refused(rt, a, b);
  RP_CHECK(rp_instance_free(rt, a));
  RP_CHECK(rp_instance_free(rt, b));
  RP_CHECK(rp_instance_free(rt, c));
  th_destroy(rt);
}

/* An external instance that views part of an allocated one's memory
 * (rp_instance_ptr) overlaps it: a copy between them is refused eagerly
 * and at instantiate, as between two external ones (it ran memcpy on
 * overlapping memory); a disjoint view copies. An external buffer not
 * aligned to its elements is refused at create (tasks and copies read it
 * through typed pointers). */
Test(misuse_sizes, a_view_overlapping_an_allocated_instance_is_refused) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_rect r16 = rp_rect_1d(0, 15), r12 = rp_rect_1d(0, 11),
          r4 = rp_rect_1d(0, 3);
  rp_inst a, view, tail;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r16, NULL, &a));
  float *p = rp_instance_ptr(rt, a);
  cr_assert_not_null(p);
  for (int k = 0; k < 16; k++)
    p[k] = (float)k;
  RP_CHECK(rp_instance_create_external(rt, 0, RP_F32, &r12, NULL, p + 2,
                                       12 * sizeof(float), &view));
  RP_CHECK(rp_instance_create_external(rt, 0, RP_F32, &r4, NULL, p + 12,
                                       4 * sizeof(float), &tail));
  rp_event done;
  RP_EXPECT(rp_launch_copy(rt, &(rp_copy){.src = a, .dst = view}, &done),
            RP_EINVAL);
  cr_assert(has(rp_error_detail(), "overlap in memory") &&
                has(rp_error_detail(), "dst external"),
            "%s", rp_error_detail());
  RP_EXPECT(rp_launch_copy(rt, &(rp_copy){.src = view, .dst = a}, &done),
            RP_EINVAL);
  recorded_copy_refused(rt, a, view);
  /* the first 4 elements of a into its last 4 (the view `tail`): the
   * bytes the copy moves do not overlap, though the instances do */
  RP_CHECK(rp_launch_copy(
      rt, &(rp_copy){.src = a, .dst = tail, .domain = RP_DOMAIN_DST}, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  for (int k = 0; k < 4; k++)
    cr_assert_eq(p[12 + k], (float)k);
  /* misaligned: one byte into a float buffer */
  rp_inst bad = {0};
  RP_EXPECT(rp_instance_create_external(rt, 0, RP_F32, &r4, NULL, (char *)p + 1,
                                        15 * sizeof(float), &bad),
            RP_EINVAL);
  cr_assert(has(rp_error_detail(), "not aligned to its 4-byte elements"), "%s",
            rp_error_detail());
  cr_assert_eq(bad.id, 0);
  RP_CHECK(rp_instance_free(rt, tail));
  RP_CHECK(rp_instance_free(rt, view));
  RP_CHECK(rp_instance_free(rt, a));
  th_destroy(rt);
}

/* Edge and task indexes stay exact at scale (timing is in `reprise bench
 * --build`, not here). */
Test(misuse_sizes, edges_and_tasks_at_scale) {
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg_noop(rt);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  enum { N = 20000 };
  for (uint32_t i = 0; i < N; i++) {
    rp_op_id id;
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, &id));
    if (i)
      RP_CHECK(rp_graph_add_edge(g, id - 1, id));
  }
  cr_assert_eq(rp_graph_edge_count(g), N - 1);
  for (uint32_t i = 1; i < N; i += 7) /* duplicates are no-ops */
    RP_CHECK(rp_graph_add_edge(g, i - 1, i));
  cr_assert_eq(rp_graph_edge_count(g), N - 1);
  for (uint32_t i = 1; i < N; i += 2) /* remove half, in any order */
    RP_CHECK(rp_graph_remove_edge(g, i - 1, i));
  RP_EXPECT(rp_graph_remove_edge(g, 0, 1), RP_ENOENT);
  cr_assert_eq(rp_graph_edge_count(g), N / 2 - 1);
  for (uint32_t i = 2; i < N; i += 2)
    RP_EXPECT(rp_graph_remove_edge(g, i - 1, i), RP_OK);
  cr_assert_eq(rp_graph_edge_count(g), 0);
  for (uint32_t i = 1; i < N; i++)
    RP_CHECK(rp_graph_add_edge(g, i - 1, i));
  cr_assert_eq(rp_graph_edge_count(g), N - 1);
  cr_assert(rp_graph_depends(g, 0, N - 1));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  for (uint32_t i = 0; i < 5000; i++) {
    char name[32];
    snprintf(name, sizeof name, "misuse.t%u", i);
    rp_task_id id, f;
    RP_CHECK(rp_task_register(rt, &(rp_task_desc){.name = name, .cpu_fn = noop},
                              &id));
    RP_CHECK(rp_task_find(rt, name, &f));
    cr_assert_eq(f, id);
  }
  rp_task_id id;
  RP_EXPECT(
      rp_task_register(
          rt, &(rp_task_desc){.name = "misuse.t4321", .cpu_fn = noop}, &id),
      RP_EEXIST);
  RP_EXPECT(rp_task_find(rt, "misuse.t5000", &id), RP_ENOTASK);
  th_destroy(rt);
}

/* ---- hostile files ---- */

static void tmpdir(void) {
  th_tmpdir_make("/tmp/rp_misuse_XXXXXX");
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
  cr_assert_eq(fclose(f), 0);
}

/* A file of n copies of byte c, no newline. */
static void write_fill(const char *path, size_t n, char c) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  char chunk[4096];
  memset(chunk, c, sizeof chunk);
  for (size_t done = 0; done < n;) {
    size_t k = n - done < sizeof chunk ? n - done : sizeof chunk;
    cr_assert_eq(fwrite(chunk, 1, k, f), k);
    done += k;
  }
  cr_assert_eq(fclose(f), 0);
}

/* A graph file of one noop op over one f32 instance of hi + 1 points (no
 * checksum: the loader accepts a file without one). */
static void write_graph(const char *path, const char *hi) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"format\": \"reprise-graph\", \"version\": 1, \"graph\": {"
           "\"instances\": [{\"id\": 0, \"mem\": \"system\", \"device\": -1,"
           " \"dtype\": \"f32\", \"lo\": [0], \"hi\": [%s], \"strides\": "
           "[1]}], \"ops\": [{\"id\": 0, \"kind\": \"task\", \"task\": "
           "\"misuse.noop\", \"proc\": 0, \"shards\": 1, \"shard_procs\": "
           "null, \"workspace_bytes\": 0, \"workspace_align\": 0, "
           "\"cost_ns\": 0, \"args\": \"\", \"accesses\": [{\"inst\": 0, "
           "\"priv\": \"W\", \"redop\": \"none\"}], \"interps\": []}], "
           "\"edges\": [], \"preconditions\": [], \"postconditions\": []}}\n",
           hi);
  write_file(path, text);
}

/* The paths no reader may block on or read without end. */
static const char *fifo_path(void) {
  const char *p = th_tmp_path("fifo");
  cr_assert_eq(mkfifo(p, 0600), 0, "mkfifo: %s", strerror(errno));
  return p;
}

Test(misuse_files, graph_files, .timeout = 60) {
  tmpdir();
  rp_runtime *rt = th_cpu_runtime(1);
  reg_noop(rt);
  rp_graph *g = NULL;
  const char *odd[] = {fifo_path(), "/dev/zero", th_tmp_path(".")};
  for (int k = 0; k < 3; k++) {
    RP_EXPECT(rp_graph_load(rt, odd[k], NULL, 0, &g), RP_EINVAL);
    cr_assert(has(rp_error_detail(), "not a regular file"), "%s",
              rp_error_detail());
  }
  cr_assert(has(rp_error_detail(), "directory"), "%s", rp_error_detail());
  /* a tiny file claiming a 1 GiB instance: refused before allocating */
  const char *huge = th_tmp_path("huge.json");
  write_graph(huge, "268435455");
  RP_EXPECT(rp_graph_load(rt, huge, NULL, 0, &g), RP_ERANGE);
  cr_assert(has(rp_error_detail(), "limit"), "%s", rp_error_detail());
  write_graph(huge, "\"9223372036854775806\""); /* 2^63 points */
  RP_EXPECT(rp_graph_load(rt, huge, NULL, 0, &g), RP_ERANGE);
  /* the same file, small: loads; lowered limits refuse it */
  const char *ok = th_tmp_path("ok.json");
  write_graph(ok, "15");
  RP_CHECK(rp_graph_load(rt, ok, NULL, 0, &g));
  rp_inst inst;
  uint32_t n;
  RP_CHECK(rp_graph_instances(g, &inst, 1, &n));
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(rt, inst));
  RP_EXPECT(rp__graph_load_file(rt, ok, NULL, 0, 0, 63, &g), RP_ERANGE);
  RP_EXPECT(rp__graph_load_file(rt, ok, NULL, 0, 100, 0, &g), RP_ERANGE);
  cr_assert(has(rp_error_detail(), "above the limit of 100"), "%s",
            rp_error_detail());
  th_destroy(rt);
  th_tmpdir_remove();
}

Test(misuse_files, data_files, .timeout = 60) {
  tmpdir();
  rp_dataset d;
  const char *odd[] = {fifo_path(), "/dev/zero", th_tmp_path(".")};
  for (int k = 0; k < 3; k++)
    RP_EXPECT(rp_data_load(odd[k], &d), RP_EINVAL);
  /* a line past the limit: at most the limit is read, then an error */
  const char *line = th_tmp_path("line.csv");
  write_fill(line, RP_DATA_MAX_LINE + 4096, '1');
  RP_EXPECT(rp_data_load(line, &d), RP_ERANGE);
  cr_assert(has(rp_error_detail(), "line longer than"), "%s",
            rp_error_detail());
  /* a good CSV loads; a lowered size limit refuses it */
  const char *csv = th_tmp_path("ok.csv");
  write_file(csv, "label,a,b\n0,1.5,2\n1,3,4\n");
  RP_CHECK(rp_data_load(csv, &d));
  cr_assert_eq(d.n, 2);
  rp_data_free(&d);
  RP_EXPECT(rp_data_load_max(csv, 10, &d), RP_ERANGE);
  /* a binary header claiming 2^30 samples in a 24-byte file */
  const char *bin = th_tmp_path("claim.bin");
  unsigned char h[24] = "RPRSDATA";
  uint32_t fields[4] = {1, 1u << 30, 1, 2};
  for (int k = 0; k < 4; k++)
    for (int b = 0; b < 4; b++)
      h[8 + 4 * k + b] = (unsigned char)(fields[k] >> (8 * b));
  FILE *f = fopen(bin, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(h, 1, sizeof h, f), sizeof h);
  cr_assert_eq(fclose(f), 0);
  rp_status st = rp_data_load(bin, &d);
  cr_assert(st == RP_EFORMAT || st == RP_ERANGE, "%s: %s", rp_status_name(st),
            rp_error_detail());
  th_tmpdir_remove();
}

Test(misuse_files, dump_and_train_commands, .timeout = 120) {
  tmpdir();
  cli_run r;
  const char *fifo = fifo_path();
  const char *odd[] = {fifo, "/dev/zero", th_tmp_path(".")};
  for (int k = 0; k < 3; k++) {
    RUN(&r, "dump", odd[k]);
    cr_assert_eq(r.status, 1, "%s: %d %s", odd[k], r.status, r.err);
    cr_assert(has(r.err, "not a regular file"), "%s", r.err);
    RUN(&r, "train", "--data", odd[k], "--iters", "1");
    cr_assert_eq(r.status, 1, "%s: %d %s", odd[k], r.status, r.err);
    cr_assert(has(r.err, "not a regular file"), "%s", r.err);
  }
#ifdef REPRISE_HAVE_CJSON
  const char *huge = th_tmp_path("huge.json");
  write_graph(huge, "268435455");
  /* the dump reads into a model of the machine and allocates no instance
   * storage: a tiny file claiming 1 GiB prints (rp_graph_load into a live
   * runtime refuses it, test graph_files) */
  RUN(&r, "dump", huge);
  cr_assert_eq(r.status, 0, "%s", r.err);
  cr_assert(has(r.out, "268435455"), "%s", r.out);
  const char *ok = th_tmp_path("ok.json");
  write_graph(ok, "15");
  RUN(&r, "dump", ok);
  cr_assert_eq(r.status, 0, "%s", r.err);
  RUN(&r, "dump", ok, "--max-bytes", "32");
  cr_assert_eq(r.status, 1, "%s", r.err);
  RUN(&r, "dump", ok, "--max-bytes", "1K"); /* file and 64 B instance fit */
  cr_assert_eq(r.status, 0, "%s", r.err);
#endif
  RUN(&r, "dump", "x.json", "--max-bytes", "0");
  cr_assert_eq(r.status, 2, "%s", r.err);
  RUN(&r, "dump", "x.json", "--max-bytes", "12Q");
  cr_assert_eq(r.status, 2, "%s", r.err);
  /* above the loader's own limit: refused, naming it, not capped */
  RUN(&r, "dump", "x.json", "--max-bytes", "65M");
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(strstr(r.err, "1..67108864"), "%s", r.err);
  const char *line = th_tmp_path("line.csv");
  write_fill(line, 100000, '7');
  RUN(&r, "train", "--data", line, "--max-bytes", "4K", "--iters", "1");
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(has(r.err, "above the limit"), "%s", r.err);
  RUN(&r, "train", "--max-bytes", "-1");
  cr_assert_eq(r.status, 2, "%s", r.err);
  /* data that cannot fill the batch, or one class only; outputs that
   * would replace an input */
  const char *three = th_tmp_path("three.csv");
  write_file(three, "label,a,b\n0,1,2\n1,3,4\n0,5,6\n");
  RUN(&r, "train", "--data", three, "--batch", "8", "--procs", "1",
      "--val-frac", "0", "--iters", "1");
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(has(r.err, "--batch 8 is more than the 3 samples"), "%s", r.err);
  RUN(&r, "train", "--batch", "5", "--procs", "4", "--iters", "1");
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(has(r.err, "--batch 5 over --procs 4"), "%s", r.err);
  const char *single = th_tmp_path("single.csv");
  write_file(single, "label,a,b\n0,1,2\n0,3,4\n0,5,6\n");
  rp_dataset d;
  RP_EXPECT(rp_data_load(single, &d), RP_EFORMAT);
  cr_assert(has(rp_error_detail(), "every label is 0"), "%s",
            rp_error_detail());
  RUN(&r, "train", "--data", three, "--json", three, "--batch", "2", "--procs",
      "1", "--val-frac", "0", "--iters", "1");
  cr_assert_eq(r.status, 2, "%s", r.err);
  cr_assert(has(r.err, "is the --data file"), "%s", r.err);
  /* features finite but past float's range in the network: the initial
   * loss is not finite, which is the data's fault, not --lr's */
  const char *big = th_tmp_path("big.csv");
  FILE *hf = fopen(big, "w");
  cr_assert_not_null(hf);
  fputs("label,x0,x1\n", hf);
  for (int i = 0; i < 64; i++)
    fprintf(hf, "%d,%g,%g\n", i % 3, i % 2 ? -3e38 : 3e38,
            (i / 2) % 2 ? -3e38 : 3e38);
  fclose(hf);
  RUN(&r, "train", "--backend", "cpu", "--data", big, "--hidden", "8",
      "--batch", "16", "--iters", "20");
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(has(r.err, "before any step: the data overflow"), "%s", r.err);
  cr_assert(!has(r.err, "--lr"), "%s", r.err);
  size_t kn = 0;
  char *kept = th_read_all(three, &kn);
  cr_assert(kept && !strncmp(kept, "label,a,b", 9), "the data were replaced");
  free(kept);
  th_tmpdir_remove();
}

/* ---- write errors ---- */

Test(misuse_files, writers_report_dev_full, .timeout = 120) {
  if (access("/dev/full", W_OK) != 0)
    cr_skip_test("no writable /dev/full on this machine");
  rp_runtime *rt = th_cpu_runtime(1);
  rp_task_id t = reg_noop(rt);
  rp_graph *g;
  RP_CHECK(rp_graph_create(rt, &g));
  for (int k = 0; k < 200; k++) /* more than one stdio buffer of text */
    RP_CHECK(rp_graph_add_task(g, &(rp_launch){.task = t, .proc = 0}, NULL));
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int fmt = RP_DUMP_TEXT; fmt <= RP_DUMP_JSON; fmt++) {
    FILE *f = fopen("/dev/full", "w");
    cr_assert_not_null(f);
    RP_EXPECT(rp_exec_dump(ex, f, (rp_dump_format)fmt), RP_EIO);
    /* the cause, or that it was not kept: never a made-up one */
    cr_assert(strstr(rp_error_detail(), "No space left on device") ||
                  strstr(rp_error_detail(), "its cause was not kept"),
              "%s", rp_error_detail());
    fclose(f);
    f = fopen("/dev/full", "w");
    cr_assert_not_null(f);
    RP_EXPECT(rp_graph_dump(g, f, (rp_dump_format)fmt), RP_EIO);
    fclose(f);
  }
  /* an unbuffered stream: the write that failed says why */
  for (int fmt = RP_DUMP_TEXT; fmt <= RP_DUMP_JSON; fmt++) {
    FILE *f = fopen("/dev/full", "w");
    cr_assert_not_null(f);
    setvbuf(f, NULL, _IONBF, 0);
    RP_EXPECT(rp_exec_dump(ex, f, (rp_dump_format)fmt), RP_EIO);
    cr_assert(strstr(rp_error_detail(),
                     "rp_exec_dump: write failed: No space left on device"),
              "%s", rp_error_detail());
    fclose(f);
  }
  /* a stream whose error indicator was set before (a read on a stream
   * open for writing only), errno left over from an unrelated failure:
   * the writes succeed, the indicator is reported, errno is no cause */
  th_tmpdir_make("/tmp/rp_dumperr_XXXXXX");
  for (int fmt = RP_DUMP_TEXT; fmt <= RP_DUMP_JSON; fmt++) {
    FILE *f = fopen(th_tmp_path("dump.txt"), "w");
    cr_assert_not_null(f);
    cr_assert_eq(fgetc(f), EOF);
    cr_assert(ferror(f));
    errno = ENOENT;
    RP_EXPECT(rp_exec_dump(ex, f, (rp_dump_format)fmt), RP_EIO);
    cr_assert(strstr(rp_error_detail(), "its cause was not kept"), "%s",
              rp_error_detail());
    errno = ENOENT;
    RP_EXPECT(rp_graph_dump(g, f, (rp_dump_format)fmt), RP_EIO);
    cr_assert(strstr(rp_error_detail(),
                     fmt == RP_DUMP_JSON
                         ? "rp_graph_dump: writing the JSON dump failed: the "
                           "stream's error indicator is set (its cause was "
                           "not kept"
                         : "rp_graph_dump: write failed: the stream's error "
                           "indicator is set (its cause was not kept"),
              "%s", rp_error_detail());
    fclose(f);
  }
  th_tmpdir_remove();
  /* a small dump fits stdio's buffer: only the flush can fail */
  rp_graph *one;
  RP_CHECK(rp_graph_create(rt, &one));
  RP_CHECK(rp_graph_add_task(one, &(rp_launch){.task = t, .proc = 0}, NULL));
  rp_exec *ex1;
  RP_CHECK(rp_instantiate(one, NULL, &ex1));
  FILE *f = fopen("/dev/full", "w");
  RP_EXPECT(rp_exec_dump(ex1, f, RP_DUMP_TEXT), RP_EIO);
  fclose(f);
  RP_EXPECT(rp_exec_dump(ex1, NULL, RP_DUMP_TEXT), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "rp_exec_dump: NULL f"), "%s",
            rp_error_detail());
  RP_CHECK(rp_exec_trace_start(ex1, 1));
  rp_event done;
  RP_CHECK(rp_replay(ex1, NULL, &done));
  RP_CHECK(rp_event_wait(rt, done, -1));
  RP_CHECK(rp_event_release(rt, done));
  /* a file writer refuses the device before writing (the output writer
   * replaces only regular files); its write errors on a regular file:
   * test_outputs (a file size limit) */
  RP_EXPECT(rp_exec_trace_write(ex1, "/dev/full"), RP_EINVAL);
  cr_assert(has(rp_error_detail(), "a character device"), "%s",
            rp_error_detail());
  RP_CHECK(rp_exec_destroy(ex1));
  RP_CHECK(rp_graph_destroy(one));
#ifdef REPRISE_HAVE_CJSON
  /* (rp_graph_save writes a temporary file next to its path and renames
   * it: never aim it at /dev/full) */
  tmpdir();
  const char *path = th_tmp_path("g.json");
  RP_CHECK(rp_graph_save(g, path));
  cli_run r;
  RUN(&r, "dump", path, "-o", "/dev/full");
  cr_assert_eq(r.status, 1, "%s", r.err);
  cr_assert(has(r.err, "a character device"), "%s", r.err);
  RUN(&r, "dump", path, "--stats", "-o", "/dev/full");
  cr_assert_eq(r.status, 1, "%s", r.err);
  th_tmpdir_remove();
#endif
#ifdef REPRISE_HAVE_BENCH
  cli_run rb;
  RUN(&rb, "bench", "--build", "--sizes", "100", "--json", "/dev/full");
  cr_assert_eq(rb.status, 1, "%s", rb.err);
#endif
  RP_CHECK(rp_exec_destroy(ex));
  RP_CHECK(rp_graph_destroy(g));
  th_destroy(rt);
}
