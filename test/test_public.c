/* test/test_public.c — the public calls that let code above the library
 * (train/, tools/, a user's program built against the installed header)
 * do without internal headers: report through the
 * error channel, read a recorded graph back (ops, accesses, edges, ports,
 * task contracts), print a rectangle, load a graph from memory into a
 * model of the machine it was recorded on. Includes reprise.h only. */
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(public_error, set_returns_the_status_and_sets_the_detail) {
  cr_assert_eq(rp_error_set(RP_ERANGE, "batch %u of %u", 9u, 4u), RP_ERANGE);
  cr_assert_str_eq(rp_error_detail(), "batch 9 of 4");
  cr_assert_eq(rp_error_set(RP_OK, "%s", "ok too"), RP_OK);
  cr_assert_str_eq(rp_error_detail(), "ok too");
}

Test(public_error, the_old_detail_may_be_an_argument) {
  rp_error_set(RP_EINVAL, "bad size");
  rp_error_set(RP_EINVAL, "step %d: %s", 3, rp_error_detail());
  cr_assert_str_eq(rp_error_detail(), "step 3: bad size");
}

Test(public_error, null_format_clears_and_long_text_is_cut) {
  char big[2048];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  rp_error_set(RP_EIO, "%s", big);
  cr_assert_eq(strlen(rp_error_detail()), 1023);
  cr_assert_eq(rp_error_set(RP_EIO, NULL), RP_EIO);
  cr_assert_str_eq(rp_error_detail(), "");
}

Test(public_error, the_library_reports_through_the_same_channel) {
  rp_error_set(RP_EINVAL, "mine");
  cr_assert_eq(rp_runtime_create(NULL, NULL), RP_EINVAL);
  cr_assert(strcmp(rp_error_detail(), "mine") != 0,
            "the library's own failure replaced the detail");
}

/* ---- task contracts ---- */

static rp_status noop(rp_task_ctx *ctx) {
  (void)ctx;
  return RP_OK;
}

Test(public_task, query_returns_what_was_registered) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(rt,
                            &(rp_task_desc){.name = "pub.host",
                                            .cpu_fn = noop,
                                            .flags = RP_TASK_HOST,
                                            .cost_ns = 1234},
                            &t));
  rp_task_info ti;
  RP_CHECK(rp_task_query(rt, t, &ti));
  cr_assert_str_eq(ti.name, "pub.host");
  cr_assert_eq(ti.flags, RP_TASK_HOST);
  cr_assert_eq(ti.cost_ns, 1234);
  cr_assert_eq(ti.has_cpu, 1);
  cr_assert_eq(ti.has_gpu, 0);
  rp_task_info keep = ti;
  RP_EXPECT(rp_task_query(rt, t + 1000, &ti), RP_ENOTASK);
  cr_assert_eq(ti.cost_ns, keep.cost_ns, "untouched on error");
  RP_EXPECT(rp_task_query(rt, t, NULL), RP_EINVAL);
  RP_EXPECT(rp_task_query(NULL, t, &ti), RP_EINVAL);
  th_destroy(rt);
}

/* ---- reading a graph back ---- */

typedef struct fixture {
  rp_runtime *rt;
  rp_task_id t;
  rp_inst a, b;
  rp_graph *g;
  rp_op_id w, r, c;
  rp_port_id post;
} fixture;

/* w writes a; r reads a and writes b on worker 1 (SPMD x2, pinned);
 * c copies a's [2..5] into b; edges w->r (asked) and r->c; post waits for
 * c and w. */
static void build(fixture *f) {
  f->rt = th_cpu_runtime(2);
  RP_CHECK(rp_task_register(
      f->rt, &(rp_task_desc){.name = "pub.noop", .cpu_fn = noop}, &f->t));
  rp_rect r = rp_rect_1d(0, 7);
  RP_CHECK(rp_instance_create(f->rt, 0, RP_F32, &r, NULL, &f->a));
  RP_CHECK(rp_instance_create(f->rt, 0, RP_F32, &r, NULL, &f->b));
  RP_CHECK(rp_graph_create(f->rt, &f->g));
  rp_access wa[] = {{f->a, RP_WRITE, RP_REDOP_NONE}};
  RP_CHECK(rp_graph_add_task(
      f->g,
      &(rp_launch){
          .task = f->t, .proc = 0, .accesses = wa, .naccess = 1, .cost_ns = 77},
      &f->w));
  rp_access ra[] = {{f->a, RP_READ, RP_REDOP_NONE},
                    {f->b, RP_WRITE, RP_REDOP_NONE}};
  rp_proc sp[] = {1, 0};
  RP_CHECK(rp_graph_add_task(f->g,
                             &(rp_launch){.task = f->t,
                                          .proc = RP_PROC_ANY,
                                          .accesses = ra,
                                          .naccess = 2,
                                          .shards = 2,
                                          .shard_procs = sp},
                             &f->r));
  RP_CHECK(rp_graph_add_copy(f->g,
                             &(rp_copy){.src = f->a,
                                        .dst = f->b,
                                        .domain = RP_DOMAIN_RECT,
                                        .rect = rp_rect_1d(2, 5),
                                        .redop = RP_REDOP_SUM,
                                        .wait = RP_NO_EVENT},
                             &f->c));
  RP_CHECK(rp_graph_add_edge(f->g, f->w, f->r));
  RP_CHECK(rp_graph_add_edge(f->g, f->r, f->c));
  RP_CHECK(rp_graph_add_postcondition(f->g, "out", &f->post));
  RP_CHECK(rp_graph_bind_postcondition(f->g, f->post, f->c));
  RP_CHECK(rp_graph_bind_postcondition(f->g, f->post, f->w));
}

static void teardown(fixture *f) {
  RP_CHECK(rp_graph_destroy(f->g));
  RP_CHECK(rp_instance_free(f->rt, f->a));
  RP_CHECK(rp_instance_free(f->rt, f->b));
  th_destroy(f->rt);
}

Test(public_graph, ops_read_back_as_built) {
  fixture f;
  build(&f);
  cr_assert_eq(rp_graph_runtime(f.g), f.rt);
  cr_assert_null(rp_graph_runtime(NULL));
  rp_op_info oi;
  RP_CHECK(rp_graph_op_query(f.g, f.w, &oi));
  cr_assert_eq(oi.kind, RP_OP_TASK);
  cr_assert_eq(oi.task, f.t);
  cr_assert_eq(oi.proc, 0);
  cr_assert_eq(oi.shards, 1);
  cr_assert_null(oi.shard_procs);
  cr_assert_eq(oi.cost_ns, 77);
  cr_assert_eq(oi.naccess, 1);
  RP_CHECK(rp_graph_op_query(f.g, f.r, &oi));
  cr_assert_eq(oi.shards, 2);
  cr_assert_not_null(oi.shard_procs);
  cr_assert_eq(oi.shard_procs[0], 1);
  cr_assert_eq(oi.shard_procs[1], 0);
  cr_assert_eq(oi.naccess, 2);
  RP_CHECK(rp_graph_op_query(f.g, f.c, &oi));
  cr_assert_eq(oi.kind, RP_OP_COPY);
  cr_assert_eq(oi.copy.src.id, f.a.id);
  cr_assert_eq(oi.copy.dst.id, f.b.id);
  cr_assert_eq(oi.copy.domain, RP_DOMAIN_RECT);
  cr_assert_eq(oi.copy.rect.lo[0], 2);
  cr_assert_eq(oi.copy.rect.hi[0], 5);
  cr_assert_eq(oi.copy.redop, RP_REDOP_SUM);
  cr_assert_eq(oi.naccess, 2);
  cr_assert_eq(oi.inserted, 0);
  rp_op_info keep = oi;
  RP_EXPECT(rp_graph_op_query(f.g, 3, &oi), RP_ERANGE);
  cr_assert_eq(oi.kind, keep.kind, "untouched on error");
  RP_EXPECT(rp_graph_op_query(f.g, 0, NULL), RP_EINVAL);
  RP_EXPECT(rp_graph_op_query(NULL, 0, &oi), RP_EINVAL);
  teardown(&f);
}

Test(public_graph, accesses_count_fill_and_refuse_a_short_buffer) {
  fixture f;
  build(&f);
  uint32_t n = 99;
  RP_CHECK(rp_graph_op_accesses(f.g, f.r, NULL, 0, &n));
  cr_assert_eq(n, 2);
  rp_access acc[2];
  RP_CHECK(rp_graph_op_accesses(f.g, f.r, acc, 2, &n));
  cr_assert_eq(acc[0].inst.id, f.a.id);
  cr_assert_eq(acc[0].priv, RP_READ);
  cr_assert_eq(acc[1].inst.id, f.b.id);
  cr_assert_eq(acc[1].priv, RP_WRITE);
  /* a copy: source read, destination reduced with its redop */
  RP_CHECK(rp_graph_op_accesses(f.g, f.c, acc, 2, &n));
  cr_assert_eq(n, 2);
  cr_assert_eq(acc[0].priv, RP_READ);
  cr_assert_eq(acc[1].priv, RP_REDUCE);
  cr_assert_eq(acc[1].redop, RP_REDOP_SUM);
  memset(acc, 0, sizeof acc);
  RP_EXPECT(rp_graph_op_accesses(f.g, f.r, acc, 1, &n), RP_ERANGE);
  cr_assert_eq(n, 2, "the count even when the buffer is short");
  cr_assert_eq(acc[0].inst.id, f.a.id, "cap filled");
  RP_EXPECT(rp_graph_op_accesses(f.g, 7, acc, 2, &n), RP_ERANGE);
  RP_EXPECT(rp_graph_op_accesses(f.g, f.r, acc, 2, NULL), RP_EINVAL);
  teardown(&f);
}

Test(public_graph, edges_and_postcondition_ops_read_back) {
  fixture f;
  build(&f);
  cr_assert_eq(rp_graph_edge_count(f.g), 2);
  rp_op_id from = 9, to = 9;
  int inferred = 9;
  RP_CHECK(rp_graph_edge_query(f.g, 0, &from, &to, &inferred));
  cr_assert(from == f.w && to == f.r && inferred == 0);
  RP_CHECK(rp_graph_edge_query(f.g, 1, &from, &to, &inferred));
  cr_assert(from == f.r && to == f.c && inferred == 0);
  RP_EXPECT(rp_graph_edge_query(f.g, 2, &from, &to, &inferred), RP_ERANGE);
  cr_assert(from == f.r && to == f.c, "untouched on error");
  RP_EXPECT(rp_graph_edge_query(f.g, 0, NULL, &to, &inferred), RP_EINVAL);
  /* a removal moves the last edge into the removed one's place */
  RP_CHECK(rp_graph_add_edge(f.g, f.w, f.c));
  RP_CHECK(rp_graph_remove_edge(f.g, f.w, f.r));
  cr_assert_eq(rp_graph_edge_count(f.g), 2);
  RP_CHECK(rp_graph_edge_query(f.g, 0, &from, &to, &inferred));
  cr_assert(from == f.w && to == f.c && inferred == 0);
  RP_CHECK(rp_graph_edge_query(f.g, 1, &from, &to, &inferred));
  cr_assert(from == f.r && to == f.c && inferred == 0);
  uint32_t n = 0;
  RP_CHECK(rp_graph_postcondition_ops(f.g, f.post, NULL, 0, &n));
  cr_assert_eq(n, 2);
  rp_op_id ops[2];
  RP_CHECK(rp_graph_postcondition_ops(f.g, f.post, ops, 2, &n));
  cr_assert(ops[0] == f.c && ops[1] == f.w, "binding order");
  RP_EXPECT(rp_graph_postcondition_ops(f.g, f.post, ops, 1, &n), RP_ERANGE);
  cr_assert_eq(n, 2);
  RP_EXPECT(rp_graph_postcondition_ops(f.g, f.post + 1, ops, 2, &n), RP_ERANGE);
  teardown(&f);
}

Test(public_graph, capture_marks_the_edges_it_inferred) {
  rp_runtime *rt = th_cpu_runtime(2);
  rp_task_id t;
  RP_CHECK(rp_task_register(
      rt, &(rp_task_desc){.name = "pub.noop", .cpu_fn = noop}, &t));
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst a;
  RP_CHECK(rp_instance_create(rt, 0, RP_F32, &r, NULL, &a));
  rp_access w[] = {{a, RP_WRITE, RP_REDOP_NONE}};
  rp_access rd[] = {{a, RP_READ, RP_REDOP_NONE}};
  RP_CHECK(rp_capture_begin(rt, NULL));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = t, .proc = 0, .accesses = w, .naccess = 1},
      NULL));
  RP_CHECK(rp_launch_task(
      rt, &(rp_launch){.task = t, .proc = 1, .accesses = rd, .naccess = 1},
      NULL));
  rp_graph *g;
  RP_CHECK(rp_capture_end(rt, &g));
  cr_assert_eq(rp_graph_edge_count(g), 1);
  rp_op_id from, to;
  int inferred = 0;
  RP_CHECK(rp_graph_edge_query(g, 0, &from, &to, &inferred));
  cr_assert(from == 0 && to == 1 && inferred == 1);
  RP_CHECK(rp_graph_destroy(g));
  RP_EXPECT(rp_graph_edge_query(g, 0, &from, &to, &inferred), RP_ESTALE);
  rp_op_info oi;
  RP_EXPECT(rp_graph_op_query(g, 0, &oi), RP_ESTALE);
  cr_assert_null(rp_graph_runtime(g));
  RP_CHECK(rp_instance_free(rt, a));
  th_destroy(rt);
}

Test(public_rect, str_prints_every_dimension_and_cuts) {
  char buf[64];
  rp_rect r = rp_rect_2d(0, 3, -2, 5);
  cr_assert_str_eq(rp_rect_str(&r, buf, sizeof buf), "[0..3, -2..5]");
  cr_assert_str_eq(rp_rect_str(NULL, buf, sizeof buf), "[invalid rect]");
  rp_rect bad = {0};
  cr_assert_str_eq(rp_rect_str(&bad, buf, sizeof buf), "[invalid rect]");
  char small[6];
  cr_assert_str_eq(rp_rect_str(&r, small, sizeof small), "[0..3");
}

/* A size of 0 (a caller's remaining room run out: buf + n, sizeof buf - n)
 * or no buffer at all writes no byte and gives "": a size-0 buffer is not
 * written past, a NULL one not dereferenced. */
Test(public_rect, str_with_no_room_writes_nothing) {
  char buf[4] = {'x', 'y', 'z', 'w'};
  rp_rect r = rp_rect_1d(0, 3);
  cr_assert_str_eq(rp_rect_str(&r, buf, 0), "");
  cr_assert_str_eq(rp_rect_str(NULL, buf, 0), "");
  cr_assert_eq(buf[0], 'x');
  cr_assert_str_eq(rp_rect_str(&r, NULL, 0), "");
  cr_assert_str_eq(rp_rect_str(&r, NULL, 16), "");
  cr_assert_str_eq(rp_rect_str(&r, buf, 1), "");
  cr_assert_eq(buf[1], 'y');
}

/* ---- graphs from memory, on a model of the recorded machine ---- */

Test(public_model, a_graph_file_loads_from_memory_into_a_model) {
#ifndef REPRISE_HAVE_CJSON
  cr_skip_test("graph files need cJSON");
#else
  fixture f;
  build(&f);
  th_tmpdir_make("/tmp/rp_pub_XXXXXX");
  const char *path = th_tmp_path("g.json");
  RP_CHECK(rp_graph_save(f.g, path));
  size_t len = 0;
  char *text = th_read_all(path, &len);
  rp_machine_desc m;
  memset(&m, 0xab, sizeof m);
  int present = -1;
  RP_CHECK(rp_graph_file_machine(text, len, &m, &present));
  cr_assert_eq(present, 1, "rp_graph_save records the machine");
  cr_assert_eq(m.cpus, 2);
  cr_assert_eq(m.ngpus, 0);
  rp_runtime *model = NULL;
  RP_CHECK(rp_runtime_create_model(&m, &model));
  cr_assert_eq(rp_proc_count(model), 2);
  for (rp_proc p = 0; p < 2; p++) {
    rp_proc_info pi;
    RP_CHECK(rp_proc_query(model, p, &pi));
    cr_assert_eq(pi.physical, -1, "CPU workers have no physical device");
  }
  rp_task_id t;
  RP_CHECK(rp_task_register(
      model, &(rp_task_desc){.name = "pub.noop", .cpu_fn = noop}, &t));
  rp_graph *g = NULL;
  RP_CHECK(rp_graph_load_mem(model, text, len, NULL, 0, 0, &g));
  cr_assert_eq(rp_graph_op_count(g), 3);
  cr_assert_eq(rp_graph_edge_count(g), 2);
  cr_assert_eq(rp_graph_runtime(g), model);
  rp_op_info oi;
  RP_CHECK(rp_graph_op_query(g, 2, &oi));
  cr_assert_eq(oi.kind, RP_OP_COPY);
  rp_graph *none = NULL;
  RP_EXPECT(rp_graph_load_mem(model, text, len / 2, NULL, 0, 0, &none),
            RP_EFORMAT);
  cr_assert(!strncmp(rp_error_detail(), "rp_graph_load_mem: ", 19), "%s",
            rp_error_detail());
  cr_assert_null(none, "nothing handed out on error");
  RP_EXPECT(rp_graph_load_mem(model, text, (size_t)RP_GRAPH_FILE_MAX + 1, NULL,
                              0, 0, &none),
            RP_ERANGE);
  RP_EXPECT(rp_graph_file_machine("{", 1, &m, &present), RP_EFORMAT);
  uint32_t n = 0;
  RP_CHECK(rp_graph_instances(g, NULL, 0, &n));
  rp_inst insts[2];
  RP_CHECK(rp_graph_instances(g, insts, 2, &n));
  RP_CHECK(rp_graph_destroy(g));
  for (uint32_t i = 0; i < n; i++)
    RP_CHECK(rp_instance_free(model, insts[i]));
  th_destroy(model);
  free(text);
  th_tmpdir_remove();
  teardown(&f);
#endif
}

Test(public_model, bad_machines_are_refused_naming_the_field) {
  rp_runtime *rt = NULL;
  RP_EXPECT(rp_runtime_create_model(NULL, &rt), RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(), "rp_runtime_create_model: NULL machine");
  rp_machine_desc m;
  memset(&m, 0, sizeof m);
  RP_EXPECT(rp_runtime_create_model(&m, &rt), RP_ERANGE);
  cr_assert(strstr(rp_error_detail(), "CPU workers"), "%s", rp_error_detail());
  m.cpus = 1;
  m.ngpus = RP_MODEL_MAX_GPUS + 1;
  RP_EXPECT(rp_runtime_create_model(&m, &rt), RP_ERANGE);
  m.ngpus = 1; /* a device index is >= 0 */
  m.gpu_device[0] = -3;
  RP_EXPECT(rp_runtime_create_model(&m, &rt), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "GPU processor 0 on device -3"), "%s",
            rp_error_detail());
  m.gpu_device[0] = 0; /* GPU memory of no device */
  m.nmems = 1;
  m.mems[0] = (rp_mem_info){.kind = RP_MEM_GPU, .device = -1};
  RP_EXPECT(rp_runtime_create_model(&m, &rt), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "memory 0 is GPU memory of device -1"),
            "%s", rp_error_detail());
  cr_assert_null(rt);
  m.mems[0].device = 0; /* consistent: a model */
  RP_CHECK(rp_runtime_create_model(&m, &rt));
  th_destroy(rt);
}

/* Bounded input: a regular file reads whole; everything else is refused
 * with its own status, leaving the outputs untouched. */
Test(public_file, read_regular_reads_bounded_and_refuses_the_rest) {
  char dir[] = "/tmp/rp_pubfile.XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/f.txt", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs("hello, reprise", f);
  fclose(f);
  char *buf = NULL;
  size_t len = 0;
  RP_CHECK(rp_file_read_regular(path, 64, &buf, &len));
  cr_assert_eq(len, 14u);
  cr_assert_str_eq(buf, "hello, reprise");
  free(buf);
  char *none = (char *)"untouched";
  size_t n = 7;
  RP_EXPECT(rp_file_read_regular(path, 13, &none, &n), RP_ERANGE);
  RP_EXPECT(rp_file_read_regular(dir, 64, &none, &n), RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "directory"), "%s", rp_error_detail());
  char missing[160];
  snprintf(missing, sizeof missing, "%s/missing", dir);
  RP_EXPECT(rp_file_read_regular(missing, 64, &none, &n), RP_ENOENT);
  RP_EXPECT(rp_file_read_regular("/dev/null", 64, &none, &n), RP_EINVAL);
  cr_assert_str_eq(none, "untouched");
  cr_assert_eq(n, 7u);
  int fd = -1;
  uint64_t size = 0;
  RP_EXPECT(rp_file_open_regular(NULL, &fd, &size), RP_EINVAL);
  RP_CHECK(rp_file_open_regular(path, &fd, &size));
  cr_assert_geq(fd, 0);
  cr_assert_eq(size, 14u);
  /* a blocking descriptor, as open(2) gives (the open's O_NONBLOCK, which
   * keeps a FIFO's open from waiting, is cleared) */
  cr_assert_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0, "non-blocking");
  close(fd);
  remove(path);
  rmdir(dir);
}

/* The kernel's generated files are regular to stat but no data: refused
 * by their file system, before any read (/proc/kmsg would wait forever). */
Test(public_file, the_kernels_generated_files_are_refused) {
  if (access("/proc/self/status", R_OK) != 0)
    cr_skip_test("/proc is not mounted here");
  char *none = (char *)"untouched";
  size_t n = 7;
  RP_EXPECT(rp_file_read_regular("/proc/self/status", 1 << 20, &none, &n),
            RP_EINVAL);
  cr_assert(strstr(rp_error_detail(), "a file of the kernel's procfs"), "%s",
            rp_error_detail());
  cr_assert_str_eq(none, "untouched");
  cr_assert_eq(n, 7u);
  int fd = -1;
  uint64_t size = 0;
  /* where it opens at all (CAP_SYSLOG, no LSM refusal): refused by kind */
  int probe = open("/proc/kmsg", O_RDONLY | O_NONBLOCK);
  rp_status st = rp_file_open_regular("/proc/kmsg", &fd, &size);
  if (probe >= 0) {
    close(probe);
    cr_assert_eq(st, RP_EINVAL, "/proc/kmsg: %s (%s)", rp_status_name(st),
                 rp_error_detail());
  } else {
    cr_assert_neq(st, RP_OK);
  }
  cr_assert_eq(fd, -1);
}
