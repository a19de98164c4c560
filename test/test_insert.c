/* Copy insertion (capture/insert.c): mirrors and inserted copies for tasks
 * whose processor cannot reach an instance.
 *
 * On the CPU backend every worker reaches system memory, so insertion never
 * triggers by itself. These tests install an access predicate through the
 * capture layer's test hook (rp__capture_set_reach) that makes instances
 * "private" to one worker: the insertion pass and validation then run
 * exactly as they do for device memory, the mirrors are real instances
 * (in the worker's own memory, system memory here) and the replays move
 * real bytes, so results are compared bitwise with eager execution. The
 * suite insert_backends runs on every backend (also built as
 * test_insert_cuda: test/helpers.h), on real device memory on CUDA; what
 * only several GPUs have is in test_insert_gpu.c. */
#include "helpers.h"

#include "capture/capture_impl.h"
#include "kernels/tasks.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define N 4

/* instance ids private to a worker: only that worker reaches them */
typedef struct priv {
  uint64_t id[4];
  rp_proc owner[4];
  int n;
} priv;

static int private_reach(void *arg, rp_proc p, rp_inst inst) {
  const priv *pv = arg;
  for (int i = 0; i < pv->n; i++)
    if (pv->id[i] == inst.id)
      return p == pv->owner[i];
  return 1;
}

typedef struct fx {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_inst a, b, c;
  priv pv;
} fx;

static void fx_init(fx *f) {
  memset(f, 0, sizeof *f);
  f->rt = th_cpu_runtime(2);
  RP_CHECK(rp_kernels_register(f->rt, &f->k));
  rp_rect r = rp_rect_1d(0, N - 1);
  RP_CHECK(rp_instance_create(f->rt, 0, RP_F32, &r, NULL, &f->a));
  RP_CHECK(rp_instance_create(f->rt, 0, RP_F32, &r, NULL, &f->b));
  RP_CHECK(rp_instance_create(f->rt, 0, RP_F32, &r, NULL, &f->c));
  /* a lives with worker 0, b with worker 1; c is shared */
  f->pv = (priv){{f->a.id, f->b.id}, {0, 1}, 2};
}

static void hook_on(fx *f) {
  RP_CHECK(rp__capture_set_reach(f->rt, private_reach, &f->pv));
}

static void fx_fini(fx *f) {
  RP_CHECK(rp__capture_set_reach(f->rt, NULL, NULL));
  RP_CHECK(rp_instance_free(f->rt, f->a));
  RP_CHECK(rp_instance_free(f->rt, f->b));
  RP_CHECK(rp_instance_free(f->rt, f->c));
  th_destroy(f->rt);
}

static void set(fx *f, rp_inst i, float base) {
  float v[N];
  for (int k = 0; k < N; k++)
    v[k] = base + (float)k;
  RP_CHECK(rp_instance_write(f->rt, i, v, sizeof v));
}

static void get(fx *f, rp_inst i, float *v) {
  RP_CHECK(rp_instance_read(f->rt, i, v, sizeof(float) * N));
}

/* ---- launches ---- */

static void task1(fx *f, rp_task_id t, rp_proc p, rp_inst x, rp_privilege pr,
                  float value, rp_event wait, rp_event *done) {
  rp_scalar_args a = {value, 0};
  rp_access acc[1] = {{x, pr, RP_REDOP_NONE}};
  rp_launch l = {.task = t,
                 .proc = p,
                 .accesses = acc,
                 .naccess = 1,
                 .args = &a,
                 .args_size = sizeof a,
                 .wait = wait};
  RP_CHECK(rp_launch_task(f->rt, &l, done));
}

static void fill(fx *f, rp_proc p, rp_inst x, float v) {
  task1(f, f->k.fill, p, x, RP_WRITE, v, RP_NO_EVENT, NULL);
}

static void scale(fx *f, rp_proc p, rp_inst x, float v) {
  task1(f, f->k.scale, p, x, RP_RW, v, RP_NO_EVENT, NULL);
}

/* y += v * x */
static void axpy(fx *f, rp_proc p, rp_inst x, rp_inst y, float v) {
  rp_scalar_args a = {v, 0};
  rp_access acc[2] = {{x, RP_READ, RP_REDOP_NONE}, {y, RP_RW, RP_REDOP_NONE}};
  rp_launch l = {.task = f->k.axpy,
                 .proc = p,
                 .accesses = acc,
                 .naccess = 2,
                 .args = &a,
                 .args_size = sizeof a};
  RP_CHECK(rp_launch_task(f->rt, &l, NULL));
}

static void copy(fx *f, rp_inst src, rp_inst dst) {
  rp_copy c = {.src = src, .dst = dst, .domain = RP_DOMAIN_SRC};
  RP_CHECK(rp_launch_copy(f->rt, &c, NULL));
}

/* The step the differential tests run: every kind of access to a and b
 * from the worker that cannot reach them, and from the one that can. */
static void program(fx *f) {
  fill(f, 0, f->b, 1.0f);            /* WRITE b from 0: write-back only */
  scale(f, 1, f->a, 3.0f);           /* RW a from 1: fill, write-back */
  axpy(f, 0, f->a, f->b, 2.0f);      /* b's mirror still current: no fill */
  axpy(f, 1, f->b, f->a, 1.0f);      /* a's mirror still current: no fill */
  scale(f, RP_PROC_ANY, f->b, 0.5f); /* any worker stands for worker 0 */
  copy(f, f->a, f->c);               /* user copies: c = a, then a = c + ... */
  axpy(f, 0, f->c, f->c, 0.0f);      /* (reads and writes c in place) */
  copy(f, f->c, f->a);               /* writes a: its mirror goes stale */
  axpy(f, 1, f->a, f->c, 1.0f);      /* so this fills again */
}

static rp_graph *capture(fx *f, int no_insertion, void (*fn)(fx *)) {
  rp_capture_opts o = {.no_copy_insertion = no_insertion};
  RP_CHECK(rp_capture_begin(f->rt, &o));
  fn(f);
  rp_graph *g;
  RP_CHECK(rp_capture_end(f->rt, &g));
  return g;
}

static uint32_t count_inserted(const rp_graph *g, int writebacks) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < g->nops; i++)
    if (g->ops[i].inserted &&
        rp__is_mirror(g->ops[i].copy.src) == (writebacks != 0))
      n++;
  return n;
}

static char *dump(const rp_graph *g, rp_dump_format fmt) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  cr_assert(m);
  RP_CHECK(rp_graph_dump(g, m, fmt));
  fclose(m);
  return buf;
}

static void replay_n(rp_graph *g, int n) {
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  for (int r = 0; r < n; r++) {
    rp_event done;
    RP_CHECK(rp_replay(ex, NULL, &done));
    RP_CHECK(rp_event_wait(g->rt, done, -1));
    RP_CHECK(rp_event_release(g->rt, done));
  }
  RP_CHECK(rp_exec_destroy(ex));
}

/* ---- structure ---- */

Test(insert, reader_gets_a_fill_into_a_mirror) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  rp_graph *g;
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  axpy(&f, 1, f.a, f.c, 2.0f); /* a: READ from worker 1 */
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 2, "fill + task");
  cr_assert_eq(g->nmirrors, 1);
  cr_assert_eq(g->mirrors[0].src.id, f.a.id);
  cr_assert_eq(g->mirrors[0].mem, 0u, "worker 1's own memory");
  const rp_gop *fl = &g->ops[0], *t = &g->ops[1];
  cr_assert(fl->kind == RP_OP_COPY && fl->inserted);
  cr_assert_eq(fl->copy.src.id, f.a.id);
  cr_assert_eq(fl->copy.dst.id, rp__mirror_ref(0).id);
  cr_assert_eq(t->acc[0].inst.id, rp__mirror_ref(0).id, "task reads mirror");
  cr_assert_eq(t->acc[1].inst.id, f.c.id, "reachable access untouched");
  cr_assert(rp_graph_depends(g, 0, 1));
  cr_assert_eq(count_inserted(g, 1), 0u, "a read needs no write-back");
  /* read back through the public header: the task's access names the
   * mirror's handle, which rp_graph_mirror_query resolves */
  cr_assert_eq(rp_graph_mirror_count(g), 1u);
  cr_assert_eq(rp_graph_mirror_count(NULL), 0u);
  rp_access acc[2];
  uint32_t nacc;
  RP_CHECK(rp_graph_op_accesses(g, 1, acc, 2, &nacc));
  rp_inst ref = {0}, src = {0};
  rp_mem mem = 99;
  RP_CHECK(rp_graph_mirror_query(g, 0, &ref, &src, &mem));
  cr_assert_eq(ref.id, acc[0].inst.id, "the handle the task's access names");
  cr_assert_eq(src.id, f.a.id);
  cr_assert_eq(mem, 0u);
  RP_CHECK(rp_graph_mirror_query(g, 0, NULL, NULL, NULL));
  rp_inst untouched = {7};
  RP_EXPECT(rp_graph_mirror_query(g, 1, &untouched, NULL, NULL), RP_ERANGE);
  cr_assert_eq(untouched.id, 7u, "output written on error");
  RP_EXPECT(rp_graph_mirror_query(NULL, 0, NULL, NULL, NULL), RP_EINVAL);
  char *txt = dump(g, RP_DUMP_TEXT);
  cr_assert(strstr(txt, "op 0: copy domain src redop none (inserted)"), "%s",
            txt);
  cr_assert(strstr(txt, "mirror 0: inst#"), "%s", txt);
  cr_assert(strstr(txt, "access 0: mirror#0(inst#"), "%s", txt);
  free(txt);
  char *dot = dump(g, RP_DUMP_DOT);
  cr_assert(strstr(dot, "inserted copy"), "%s", dot);
  free(dot);
  RP_CHECK(rp_graph_validate(g));
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

Test(insert, writer_gets_a_write_back_that_later_readers_wait_for) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  scale(&f, 1, f.a, 3.0f);     /* ops 0 fill, 1 scale, 2 write-back */
  axpy(&f, 0, f.a, f.c, 1.0f); /* op 3: reads a where it lives */
  scale(&f, 0, f.a, 2.0f);     /* op 4: writes a where it lives */
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 5);
  const rp_gop *wb = &g->ops[2];
  cr_assert(wb->kind == RP_OP_COPY && wb->inserted);
  cr_assert_eq(wb->copy.src.id, rp__mirror_ref(0).id);
  cr_assert_eq(wb->copy.dst.id, f.a.id);
  cr_assert(rp_graph_depends(g, 1, 2), "write-back after the task");
  cr_assert(rp_graph_depends(g, 2, 3), "reader of a after the write-back");
  cr_assert(rp_graph_depends(g, 2, 4), "next writer of a after it (WAW)");
  cr_assert(rp_graph_depends(g, 3, 4), "and after the reader (WAR)");
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

Test(insert, current_mirror_is_not_filled_again_until_the_source_changes) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  axpy(&f, 1, f.a, f.c, 1.0f); /* fill */
  axpy(&f, 1, f.a, f.c, 1.0f); /* mirror current: no fill */
  fill(&f, 0, f.a, 5.0f);      /* a written where it lives */
  axpy(&f, 1, f.a, f.c, 1.0f); /* fill again */
  copy(&f, f.c, f.a);          /* a user copy writes a */
  axpy(&f, 1, f.a, f.c, 1.0f); /* fill again */
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(g->nmirrors, 1, "one mirror per (instance, memory)");
  cr_assert_eq(count_inserted(g, 0), 3u);
  cr_assert_eq(count_inserted(g, 1), 0u);
  /* the second reader shares the first fill; WAR on the mirror orders the
   * next fill after both readers */
  cr_assert(rp_graph_depends(g, 0, 2));
  cr_assert(g->ops[4].inserted, "op 4 is the second fill");
  cr_assert(rp_graph_depends(g, 1, 4) && rp_graph_depends(g, 2, 4));
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

Test(insert, write_only_task_is_not_filled_first) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  fill(&f, 1, f.a, 2.0f);
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 2, "task + write-back");
  cr_assert_eq(count_inserted(g, 0), 0u);
  cr_assert_eq(count_inserted(g, 1), 1u);
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

Test(insert, task_reference_stands_for_its_write_backs) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  rp_event t;
  task1(&f, f.k.scale, 1, f.a, RP_RW, 2.0f, RP_NO_EVENT, &t); /* 0, 1, 2 */
  task1(&f, f.k.fill, 0, f.c, RP_WRITE, 1.0f, t, NULL);       /* 3 */
  uint32_t port;
  RP_CHECK(rp_capture_postcondition(f.rt, "scaled", &t, 1, &port));
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 4);
  cr_assert(rp_graph_depends(g, 2, 3), "explicit wait covers the write-back");
  cr_assert_eq(g->post[0].nops, 2u, "postcondition: task and write-back");
  cr_assert_eq(g->post[0].ops[0], 1u);
  cr_assert_eq(g->post[0].ops[1], 2u);
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

Test(insert, spmd_shards_share_one_mirror) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  rp_proc sp[2] = {1, 1};
  rp_scalar_args a = {2.0f, 0};
  /* X on worker 0's private memory gets the mirror; Y is shared */
  rp_access acc[2] = {{f.a, RP_READ, RP_REDOP_NONE},
                      {f.c, RP_RW, RP_REDOP_NONE}};
  rp_launch l = {.task = f.k.axpy,
                 .accesses = acc,
                 .naccess = 2,
                 .args = &a,
                 .args_size = sizeof a,
                 .shards = 2,
                 .shard_procs = sp};
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  RP_CHECK(rp_launch_task(f.rt, &l, NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 2);
  cr_assert_eq(g->ops[1].shards, 2u);
  cr_assert_eq(g->ops[1].acc[0].inst.id, rp__mirror_ref(0).id);
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

Test(insert, instances_of_a_graph_with_mirrors_are_the_sources) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  rp_graph *g = capture(&f, 0, program);
  rp_inst l[8];
  uint32_t n;
  RP_CHECK(rp_graph_instances(g, l, 8, &n));
  cr_assert_eq(n, 3u);
  cr_assert_eq(l[0].id, f.b.id, "first use: the WRITE b's write-back");
  cr_assert_eq(l[1].id, f.a.id);
  cr_assert_eq(l[2].id, f.c.id);
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

/* ---- insertion off ---- */

Test(insert, off_the_same_graph_fails_validation_naming_op_and_instance) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  rp_graph *g = capture(&f, 1, program);
  cr_assert_eq(g->nmirrors, 0);
  cr_assert_eq(count_inserted(g, 0) + count_inserted(g, 1), 0u);
  rp_exec *ex = NULL;
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_EACCESS);
  cr_assert_null(ex);
  char want[160];
  snprintf(want, sizeof want,
           "op 0 (task 'rp.fill'): access 0: instance %#llx (memory 0) is "
           "not accessible from processor 0 (copy insertion is off)",
           (unsigned long long)f.b.id);
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  RP_EXPECT(rp_graph_validate(g), RP_EACCESS);
  RP_CHECK(rp_graph_destroy(g));
  /* without the hook the access matrix says every worker reaches system
   * memory: the same capture validates */
  RP_CHECK(rp__capture_set_reach(f.rt, NULL, NULL));
  g = capture(&f, 1, program);
  RP_CHECK(rp_graph_validate(g));
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

/* ---- replays move the bytes ---- */

static void reference(fx *f, int reps, float out[3][N]) {
  set(f, f->a, 1.0f);
  set(f, f->b, 10.0f);
  set(f, f->c, 100.0f);
  for (int r = 0; r < reps; r++)
    program(f);
  RP_CHECK(rp_runtime_drain(f->rt));
  get(f, f->a, out[0]);
  get(f, f->b, out[1]);
  get(f, f->c, out[2]);
}

Test(insert, replays_with_mirrors_match_eager_bitwise) {
  enum { REPS = 3 };
  fx f;
  fx_init(&f);
  float want[3][N], got[3][N];
  reference(&f, REPS, want); /* eager: the hook does not apply */
  hook_on(&f);
  rp_graph *g = capture(&f, 0, program);
  cr_assert_eq(g->nmirrors, 2u, "a for worker 1, b for worker 0");
  cr_assert_eq(count_inserted(g, 0), 2u, "fills: scale a, last axpy");
  cr_assert_eq(count_inserted(g, 1), 5u, "write-backs");
  set(&f, f.a, 1.0f);
  set(&f, f.b, 10.0f);
  set(&f, f.c, 100.0f);
  replay_n(g, REPS);
  get(&f, f.a, got[0]);
  get(&f, f.b, got[1]);
  get(&f, f.c, got[2]);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < N; k++)
      cr_assert_eq(got[i][k], want[i][k], "instance %d element %d: %g vs %g", i,
                   k, (double)got[i][k], (double)want[i][k]);
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

/* ---- writes that leave part of the instance alone ---- */

/* rp.fill of n elements from proc p, declared RP_WRITE; interpolated: n
 * comes from the replay's argument block (4 bytes at 0). */
static void fill_n(fx *f, rp_proc p, rp_inst x, float v, int32_t n,
                   int interpolated) {
  rp_scalar_args a = {v, n};
  rp_access acc[1] = {{x, RP_WRITE, RP_REDOP_NONE}};
  rp_interp ip = {0, offsetof(rp_scalar_args, n), sizeof(int32_t)};
  rp_launch l = {.task = f->k.fill,
                 .proc = p,
                 .accesses = acc,
                 .naccess = 1,
                 .args = &a,
                 .args_size = sizeof a,
                 .interps = interpolated ? &ip : NULL,
                 .ninterp = interpolated ? 1 : 0};
  RP_CHECK(rp_launch_task(f->rt, &l, NULL));
}

static void replay_args(rp_graph *g, const void *args, size_t size) {
  rp_exec *ex;
  RP_CHECK(rp_instantiate(g, NULL, &ex));
  rp_replay_args ra = {.args = args, .args_size = size};
  rp_event done;
  RP_CHECK(rp_replay(ex, &ra, &done));
  RP_CHECK(rp_event_wait(g->rt, done, -1));
  RP_CHECK(rp_event_release(g->rt, done));
  RP_CHECK(rp_exec_destroy(ex));
}

static void expect(fx *f, rp_inst x, const float *want, const char *what) {
  float got[N];
  get(f, x, got);
  for (int k = 0; k < N; k++)
    cr_assert_eq(got[k], want[k], "%s: element %d is %g, want %g", what, k,
                 (double)got[k], (double)want[k]);
}

Test(insert, write_of_part_of_the_instance_keeps_the_rest_as_eager_does) {
  fx f;
  fx_init(&f);
  const float want[N] = {7, 7, 12, 13};
  set(&f, f.b, 10.0f);
  fill_n(&f, 0, f.b, 7.0f, 2, 0); /* eager: the hook does not apply */
  RP_CHECK(rp_runtime_drain(f.rt));
  expect(&f, f.b, want, "eager");
  hook_on(&f);
  set(&f, f.b, 10.0f);
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  fill_n(&f, 0, f.b, 7.0f, 2, 0); /* b: worker 1's, a mirror for worker 0 */
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 3, "fill, task, write-back");
  cr_assert_eq(count_inserted(g, 0), 1u, "the mirror is filled first");
  cr_assert_eq(count_inserted(g, 1), 1u);
  cr_assert(rp_graph_depends(g, 0, 1));
  replay_n(g, 1);
  expect(&f, f.b, want, "replay");
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

Test(insert, write_whose_count_a_replay_sets_is_filled_first) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  set(&f, f.b, 10.0f);
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  fill_n(&f, 0, f.b, 7.0f, 0, 1); /* n 0 (whole) as recorded; replays set n */
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(count_inserted(g, 0), 1u, "n may shrink: the mirror is filled");
  int32_t n = 2;
  replay_args(g, &n, sizeof n);
  const float want[N] = {7, 7, 12, 13};
  expect(&f, f.b, want, "replay with n = 2");
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

/* A task registered without a descriptor that writes element 0 only: the
 * engine cannot know what it writes, so a WRITE mirror is filled. */
static rp_status first_only(rp_task_ctx *ctx) {
  const rp_instance_info *in = rp_ctx_inst(ctx, 0);
  ((float *)in->ptr)[0] = -1.0f;
  return RP_OK;
}

Test(insert, plain_task_write_gets_its_mirror_filled) {
  fx f;
  fx_init(&f);
  rp_task_desc d = {.name = "test.first_only", .cpu_fn = first_only};
  rp_task_id t;
  RP_CHECK(rp_task_register(f.rt, &d, &t));
  hook_on(&f);
  set(&f, f.b, 10.0f);
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  task1(&f, t, 0, f.b, RP_WRITE, 0.0f, RP_NO_EVENT, NULL);
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  cr_assert_eq(count_inserted(g, 0), 1u);
  cr_assert_eq(count_inserted(g, 1), 1u);
  replay_n(g, 1);
  const float want[N] = {-1, 11, 12, 13};
  expect(&f, f.b, want, "replay");
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

/* ---- graph files ---- */

#ifdef REPRISE_HAVE_CJSON
Test(insert, graph_file_round_trip_keeps_mirrors) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  rp_graph *g = capture(&f, 0, program);
  char *json = dump(g, RP_DUMP_JSON);
  cr_assert(strstr(json, "\"mirrors\":"), "%s", json);
  cr_assert(strstr(json, "\"mirror\":"), "%s", json);
  cr_assert(strstr(json, "\"inserted\":\ttrue"), "%s", json);
  cr_assert(strstr(json, "\"version\":\t1"), "%s", json);
  rp_inst l[3];
  uint32_t n;
  RP_CHECK(rp_graph_instances(g, l, 3, &n));
  rp_graph *h;
  RP_CHECK(rp__graph_load_mem(f.rt, json, strlen(json), l, n, 0, &h));
  char *t1 = dump(g, RP_DUMP_TEXT), *t2 = dump(h, RP_DUMP_TEXT);
  cr_assert_str_eq(t1, t2);
  char *json2 = dump(h, RP_DUMP_JSON);
  cr_assert_str_eq(json, json2, "a loaded graph saves to the same file");
  free(t1);
  free(t2);
  free(json2);
  /* and the loaded graph replays like the captured one */
  float want[3][N], got[3][N];
  RP_CHECK(rp__capture_set_reach(f.rt, NULL, NULL));
  reference(&f, 2, want);
  hook_on(&f);
  set(&f, f.a, 1.0f);
  set(&f, f.b, 10.0f);
  set(&f, f.c, 100.0f);
  replay_n(h, 2);
  get(&f, f.a, got[0]);
  get(&f, f.b, got[1]);
  get(&f, f.c, got[2]);
  cr_assert_arr_eq(got, want, sizeof got);
  free(json);
  RP_CHECK(rp_graph_destroy(h));
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

/* Replaces the first `from` in s by `to` and drops the checksum line (the
 * checksum is optional), so an edit reaches the schema checks. */
static char *edit(const char *s, const char *from, const char *to) {
  const char *at = strstr(s, from);
  cr_assert(at, "'%s' not in the file", from);
  size_t n = strlen(s) + strlen(to) + 1;
  char *out = malloc(n);
  snprintf(out, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
  char *c = strstr(out, "\"checksum\":");
  cr_assert(c);
  char *e = strchr(c, '\n');
  memmove(c, e + 1, strlen(e + 1) + 1);
  return out;
}

static void expect_load(fx *f, const char *json, const char *from,
                        const char *to, rp_status want, const char *detail) {
  char *t = edit(json, from, to);
  rp_graph *h = NULL;
  rp_status st = rp__graph_load_mem(f->rt, t, strlen(t), NULL, 0, 0, &h);
  cr_assert_eq(st, want, "'%s' -> '%s': %s (%s)", from, to, rp_status_name(st),
               rp_error_detail());
  cr_assert(strstr(rp_error_detail(), detail), "%s", rp_error_detail());
  cr_assert_null(h);
  free(t);
}

Test(insert, loader_checks_mirrors) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  scale(&f, 1, f.a, 3.0f); /* fill a -> mirror 0, scale, write-back */
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  char *json = dump(g, RP_DUMP_JSON);
  /* an unedited file (without its checksum) loads, allocating */
  char *t = edit(json, "\"graph\"", "\"graph\"");
  rp_graph *h;
  RP_CHECK(rp__graph_load_mem(f.rt, t, strlen(t), NULL, 0, 0, &h));
  cr_assert_eq(h->nmirrors, 1u);
  rp_inst l[1];
  uint32_t n;
  RP_CHECK(rp_graph_instances(h, l, 1, &n));
  RP_CHECK(rp_graph_destroy(h));
  RP_CHECK(rp_instance_free(f.rt, l[0]));
  free(t);
  expect_load(&f, json, "\"mirror\":\t0", "\"mirror\":\t7", RP_ERANGE,
              "mirror 7 out of range");
  expect_load(&f, json, "\"mirror\":\t0", "\"mirror\":\t0, \"x\": 1",
              RP_EFORMAT, "unknown key 'x'");
  expect_load(&f, json, "\"source\":\t0", "\"source\":\t3", RP_ERANGE,
              "graph.mirrors[0].source");
  expect_load(&f, json,
              "\"source\":\t0,\n\t\t\t\t\"mem\":\t\"system\",\n\t\t\t\t"
              "\"device\":\t-1",
              "\"source\":\t0,\n\t\t\t\t\"mem\":\t\"gpu\",\n\t\t\t\t"
              "\"device\":\t0",
              RP_ENOENT, "graph.mirrors[0]: the runtime has no gpu memory");
  expect_load(&f, json, "\"source\":\t0,\n\t\t\t\t\"mem\":\t\"system\"",
              "\"source\":\t0,\n\t\t\t\t\"mem\":\t\"gpu\"", RP_ERANGE,
              "graph.mirrors[0].device: -1 out of range");
  expect_load(&f, json, "\"mirrors\":\t[{\n\t\t\t\t\"id\":\t0",
              "\"mirrors\":\t[{\n\t\t\t\t\"id\":\t1", RP_EFORMAT,
              "graph.mirrors[0].id");
  expect_load(&f, json, "\"dst\":\t0,", "\"dst\":\t{\"mirror\": 0},", RP_EINVAL,
              "copies mirror 0 into mirror 0");
  expect_load(&f, json, "\"domain\":\t\"src\"", "\"domain\":\t\"rect\"",
              RP_EFORMAT, "rect");
  expect_load(&f, json, "\"redop\":\t\"none\",\n\t\t\t\t\"group\"",
              "\"redop\":\t\"sum\",\n\t\t\t\t\"group\"", RP_EINVAL,
              "no reduction");
  free(json);
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}
#endif

/* ---- bad input ---- */

Test(insert, mirror_references_are_not_instances_to_the_public_api) {
  fx f;
  fx_init(&f);
  rp_access acc[1] = {{rp__mirror_ref(0), RP_RW, RP_REDOP_NONE}};
  rp_scalar_args a = {1.0f, 0};
  rp_launch l = {.task = f.k.scale,
                 .proc = 0,
                 .accesses = acc,
                 .naccess = 1,
                 .args = &a,
                 .args_size = sizeof a};
  RP_EXPECT(rp_launch_task(f.rt, &l, NULL), RP_ESTALE);
  rp_graph *g;
  RP_CHECK(rp_graph_create(f.rt, &g));
  RP_EXPECT(rp_graph_add_task(g, &l, NULL), RP_ESTALE);
  RP_EXPECT(rp__graph_add_task_mirrored(g, &l, NULL), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "mirror 0, out of range"), "%s",
            rp_error_detail());
  RP_EXPECT(rp__graph_add_mirror(g, rp__mirror_ref(0), 0, &(uint32_t){0}),
            RP_ESTALE);
  RP_EXPECT(rp__graph_add_mirror(g, f.a, 99, &(uint32_t){0}), RP_EINVAL);
  cr_assert_eq(g->nmirrors, 0u);
  rp_copy c = {.src = rp__mirror_ref(0), .dst = f.a};
  RP_EXPECT(rp_graph_add_copy(g, &c, NULL), RP_ESTALE);
  /* the copies a graph may hold: a whole mirror to or from its source */
  RP_EXPECT(rp__check_mirror_copy(g, &c, "x"), RP_EINVAL);
  uint32_t k;
  RP_CHECK(rp__graph_add_mirror(g, f.a, 0, &k));
  RP_CHECK(rp__check_mirror_copy(g, &c, "x"));
  c.dst = f.c;
  RP_EXPECT(rp__check_mirror_copy(g, &c, "x"), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "only its own source"), "%s",
            rp_error_detail());
  c = (rp_copy){.src = f.a, .dst = rp__mirror_ref(0), .redop = RP_REDOP_SUM};
  RP_EXPECT(rp__check_mirror_copy(g, &c, "x"), RP_EINVAL);
  c.redop = RP_REDOP_NONE;
  RP_CHECK(rp__check_mirror_copy(g, &c, "x"));
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

Test(insert, stale_source_fails_instantiate_naming_the_copy) {
  fx f;
  fx_init(&f);
  hook_on(&f);
  RP_CHECK(rp_capture_begin(f.rt, NULL));
  axpy(&f, 1, f.a, f.c, 1.0f);
  rp_graph *g;
  RP_CHECK(rp_capture_end(f.rt, &g));
  RP_CHECK(rp_instance_realloc(f.rt, &f.a));
  f.pv.id[0] = f.a.id;
  rp_exec *ex = NULL;
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_ESTALE);
  cr_assert(strstr(rp_error_detail(), "mirror 0: source instance"), "%s",
            rp_error_detail());
  RP_CHECK(rp_graph_destroy(g));
  fx_fini(&f);
}

/* ---- every backend: a processor that cannot reach an instance ----
 * On CUDA the access matrix itself: a GPU does not reach system memory, a
 * CPU worker does not reach a GPU's memory. On the CPU backend the access
 * predicate above makes an instance private to one worker. Either way the
 * "far" processor (the first GPU on CUDA, worker 1 on the CPU backend)
 * cannot reach a "home" instance (system memory; private to worker 0) and
 * CPU worker 0 cannot reach a "far" instance (the GPU's memory; private to
 * worker 1). Instantiating goes through the backend's replay lowering (on
 * CUDA replay/gpu_build.c, gpu_launch.c): any refusal, RP_EUNSUPPORTED
 * included, fails the test. */

#define BN 64

typedef struct bx {
  rp_runtime *rt;
  rp_kernel_tasks k;
  rp_proc far;
  priv pv; /* the CPU backend's private instances */
} bx;

static void bx_init(bx *b) {
  memset(b, 0, sizeof *b);
  b->rt = th_runtime(TH_BACKEND, 2); /* skips without a CUDA device */
  RP_CHECK(rp_kernels_register(b->rt, &b->k));
  b->far = TH_ON_CPU ? 1 : th_backend_proc(b->rt);
  if (TH_ON_CPU)
    RP_CHECK(rp__capture_set_reach(b->rt, private_reach, &b->pv));
}

static void bx_fini(bx *b) {
  if (TH_ON_CPU)
    RP_CHECK(rp__capture_set_reach(b->rt, NULL, NULL));
  th_destroy(b->rt);
}

static rp_mem local_of(const rp_runtime *rt, rp_proc p) {
  rp_proc_info pi;
  RP_CHECK(rp_proc_query(rt, p, &pi));
  return pi.local;
}

/* An instance of BN floats base, base + 1, ... in memory m. */
static rp_inst bx_make(bx *b, rp_mem m, float base) {
  rp_rect r = rp_rect_1d(0, BN - 1);
  rp_inst i;
  RP_CHECK(rp_instance_create(b->rt, m, RP_F32, &r, NULL, &i));
  float v[BN];
  for (int k = 0; k < BN; k++)
    v[k] = base + (float)k;
  RP_CHECK(rp_instance_write(b->rt, i, v, sizeof v));
  return i;
}

/* An instance only CPU workers reach (system memory; on the CPU backend
 * private to worker 0); `far` is 1 for one only the far processor reaches
 * (its memory; private to worker 1). */
static rp_inst bx_private(bx *b, int far, float base) {
  rp_inst i = bx_make(b, far ? local_of(b->rt, b->far) : 0, base);
  if (TH_ON_CPU) {
    b->pv.id[b->pv.n] = i.id;
    b->pv.owner[b->pv.n++] = far ? b->far : 0;
  }
  return i;
}

static void bx_task1(bx *b, rp_task_id t, rp_proc p, rp_inst x, rp_privilege pr,
                     float value) {
  rp_scalar_args a = {value, 0};
  rp_access acc[1] = {{x, pr, RP_REDOP_NONE}};
  rp_launch l = {.task = t,
                 .proc = p,
                 .accesses = acc,
                 .naccess = 1,
                 .args = &a,
                 .args_size = sizeof a};
  RP_CHECK(rp_launch_task(b->rt, &l, NULL));
}

/* y += v * x on p */
static void bx_axpy(bx *b, rp_proc p, rp_inst x, rp_inst y, float v) {
  rp_scalar_args a = {v, 0};
  rp_access acc[2] = {{x, RP_READ, RP_REDOP_NONE}, {y, RP_RW, RP_REDOP_NONE}};
  rp_launch l = {.task = b->k.axpy,
                 .proc = p,
                 .accesses = acc,
                 .naccess = 2,
                 .args = &a,
                 .args_size = sizeof a};
  RP_CHECK(rp_launch_task(b->rt, &l, NULL));
}

/* Instantiates and replays once; returns 1 (the callers check the data). */
static int replay_once(rp_graph *g) {
  rp_exec *ex = NULL;
  rp_status st = rp_instantiate(g, NULL, &ex);
  cr_assert_eq(st, RP_OK, "%s: instantiate: %s (%s)", TH_BACKEND_NAME,
               rp_status_name(st), rp_error_detail());
  rp_event done;
  RP_CHECK(rp_replay(ex, NULL, &done));
  RP_CHECK(rp_event_wait(g->rt, done, -1));
  RP_CHECK(rp_event_release(g->rt, done));
  RP_CHECK(rp_exec_destroy(ex));
  return 1;
}

/* A writer on the far processor (a GPU task on system memory): a mirror in
 * its memory, filled before and written back after. */
Test(insert_backends, far_writer_gets_a_mirror_in_its_memory) {
  bx b;
  bx_init(&b);
  rp_inst a = bx_private(&b, 0, 1.0f);
  RP_CHECK(rp_capture_begin(b.rt, NULL));
  bx_task1(&b, b.k.scale, b.far, a, RP_RW, 3.0f);
  rp_graph *g;
  RP_CHECK(rp_capture_end(b.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 3, "fill, task, write-back");
  cr_assert_eq(g->nmirrors, 1u);
  cr_assert_eq(g->mirrors[0].mem, local_of(b.rt, b.far),
               "in the far processor's memory");
  cr_assert(g->ops[0].inserted && g->ops[2].inserted);
  cr_assert_eq(g->ops[1].acc[0].inst.id, rp__mirror_ref(0).id);
  RP_CHECK(rp_graph_validate(g));
  if (replay_once(g)) {
    float v[BN];
    RP_CHECK(rp_instance_read(b.rt, a, v, sizeof v));
    for (int i = 0; i < BN; i++)
      cr_assert_eq(v[i], 3.0f * (1.0f + (float)i), "element %d", i);
  }
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(b.rt, a));
  bx_fini(&b);
}

/* A reader on CPU worker 0 of a far instance (a CPU task on device
 * memory): a mirror in the worker's memory, filled first. */
Test(insert_backends, worker_reading_a_far_instance_gets_a_mirror) {
  bx b;
  bx_init(&b);
  rp_inst d = bx_private(&b, 1, 2.0f);
  rp_inst c = bx_make(&b, 0, 0.0f); /* reached by worker 0 */
  RP_CHECK(rp_capture_begin(b.rt, NULL));
  bx_axpy(&b, 0, d, c, 1.0f); /* c += d on CPU worker 0 */
  rp_graph *g;
  RP_CHECK(rp_capture_end(b.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 2, "fill, task");
  cr_assert_eq(g->mirrors[0].src.id, d.id);
  cr_assert_eq(g->mirrors[0].mem, local_of(b.rt, 0), "in the worker's memory");
  RP_CHECK(rp_graph_validate(g));
  if (replay_once(g)) {
    float v[BN];
    RP_CHECK(rp_instance_read(b.rt, c, v, sizeof v));
    /* c starts at i (bx_make(.., 0.0f)), d at 2 + i: c + d = 2 + 2i */
    for (int i = 0; i < BN; i++)
      cr_assert_eq(v[i], 2.0f + 2.0f * (float)i, "element %d: %g, want %g", i,
                   (double)v[i], 2.0 + 2.0 * i);
  }
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(b.rt, d));
  RP_CHECK(rp_instance_free(b.rt, c));
  bx_fini(&b);
}

Test(insert_backends, insertion_off_fails_validation_naming_op_and_instance) {
  bx b;
  bx_init(&b);
  rp_inst a = bx_private(&b, 0, 1.0f);
  rp_capture_opts o = {.no_copy_insertion = 1};
  RP_CHECK(rp_capture_begin(b.rt, &o));
  bx_task1(&b, b.k.scale, b.far, a, RP_RW, 3.0f);
  rp_graph *g;
  RP_CHECK(rp_capture_end(b.rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 1);
  cr_assert_eq(g->nmirrors, 0u);
  rp_exec *ex = NULL;
  RP_EXPECT(rp_instantiate(g, NULL, &ex), RP_EACCESS);
  char want[200];
  snprintf(want, sizeof want,
           "op 0 (task 'rp.scale'): access 0: instance %#llx (memory 0) is "
           "not accessible from processor %u (copy insertion is off)",
           (unsigned long long)a.id, b.far);
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp_instance_free(b.rt, a));
  bx_fini(&b);
}

/* What several GPUs without peer access meet (test_insert_gpu.c), on a
 * model of a two-GPU machine with the reach hook: an SPMD launch whose
 * shards on two devices both need a mirror of one instance would need
 * them in different memories; it is refused naming the call, the task,
 * the access and both processors, and nothing is recorded. */
Test(insert, spmd_shards_needing_mirrors_in_two_memories_are_refused) {
  rp_machine_desc md = {
      .cpus = 1, .ngpus = 2, .gpu_device = {0, 1}, .nmems = 2};
  md.mems[0] = (rp_mem_info){RP_MEM_GPU, 0};
  md.mems[1] = (rp_mem_info){RP_MEM_GPU, 1};
  rp_runtime *rt;
  RP_CHECK(rp_runtime_create_model(&md, &rt));
  rp_task_id t;
  RP_CHECK(rp_task_register(rt,
                            &(rp_task_desc){.name = "both",
                                            .cpu_fn = first_only,
                                            .gpu_fn = first_only},
                            &t));
  rp_rect r = rp_rect_1d(0, N - 1);
  rp_inst x;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &x));
  priv pv = {{x.id}, {0}, 1}; /* only CPU worker 0 reaches x */
  RP_CHECK(rp__capture_set_reach(rt, private_reach, &pv));
  rp_proc sp[2] = {1, 2};
  rp_access acc[1] = {{x, RP_RW, RP_REDOP_NONE}};
  rp_launch l = {
      .task = t, .accesses = acc, .naccess = 1, .shards = 2, .shard_procs = sp};
  RP_CHECK(rp_capture_begin(rt, NULL));
  rp_error_set(RP_EINVAL, "stale");
  rp_event done = {0x5eed};
  RP_EXPECT(rp_launch_task(rt, &l, &done), RP_EACCESS);
  char want[256];
  snprintf(want, sizeof want,
           "rp_launch_task: task 'both': access 0: instance %#llx is not "
           "accessible from processors 1 and 2, whose shards would need "
           "mirrors in different memories (1, 2); launch one op per device",
           (unsigned long long)x.id);
  cr_assert_str_eq(rp_error_detail(), want);
  cr_assert_eq(done.id, 0x5eedu, "done was set");
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_op_count(g), 0u, "nothing recorded");
  cr_assert_eq(g->nmirrors, 0u);
  RP_CHECK(rp_graph_destroy(g));
  RP_CHECK(rp__capture_set_reach(rt, NULL, NULL));
  RP_CHECK(rp_instance_free(rt, x));
  RP_CHECK(rp_runtime_destroy(rt));
}
