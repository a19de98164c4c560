/* Instances: shapes, strides, generations, external memory, bad input. */
#include "helpers.h"
#include "engine/engine_impl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static rp_runtime *rt;
static void setup(void) {
  rt = th_cpu_runtime(1);
}
static void teardown(void) {
  th_destroy(rt);
}

TestSuite(instance, .init = setup, .fini = teardown, .timeout = 60);

static rp_mem sysmem(void) {
  rp_mem m;
  RP_CHECK(rp_mem_find(rt, RP_MEM_SYSTEM, -1, &m));
  return m;
}

Test(instance, dense_layout_with_nonzero_origin) {
  rp_rect r = rp_rect_2d(4, 7, 10, 19); /* rows 4..7, cols 10..19 */
  rp_inst i;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &i));
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, i, &info));
  cr_assert_eq(info.rect.lo[0], 4);
  cr_assert_eq(info.rect.hi[1], 19);
  cr_assert_eq(info.strides[0], 10);
  cr_assert_eq(info.strides[1], 1);
  cr_assert_eq(info.bytes, 4 * 10 * sizeof(float));
  cr_assert_eq(rp_rect_volume(&info.rect), 40);
  float *p = rp_instance_ptr(rt, i);
  cr_assert_not_null(p);
  for (int k = 0; k < 40; k++)
    cr_assert_eq(p[k], 0.0f, "fresh instances are zeroed");
  RP_CHECK(rp_instance_free(rt, i));
}

/* Storage is 64-byte aligned and zeroed at every size, small to large
 * (a 64 MiB block comes from the kernel's zero pages), also after a
 * neighbour was written and freed. */
Test(instance, storage_is_aligned_and_zeroed_at_every_size) {
  static const int64_t sizes[] = {1, 3, 15, 16, 17, 1000, 1 << 16, 1 << 24};
  for (int round = 0; round < 2; round++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      rp_rect r = rp_rect_1d(0, sizes[k] - 1);
      rp_inst i;
      RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &i));
      float *p = rp_instance_ptr(rt, i);
      cr_assert_eq((uintptr_t)p % 64, 0, "%lld floats at %p",
                   (long long)sizes[k], (void *)p);
      for (int64_t e = 0; e < sizes[k]; e += 1 + sizes[k] / 4096)
        cr_assert_eq(p[e], 0.0f, "%lld floats: element %lld",
                     (long long)sizes[k], (long long)e);
      cr_assert_eq(p[sizes[k] - 1], 0.0f);
      for (int64_t e = 0; e < sizes[k]; e++) /* dirty it for round 2 */
        p[e] = 1.0f;
      RP_CHECK(rp_instance_free(rt, i));
    }
}

#ifndef TH_TSAN
/* Resident memory of this process, bytes (/proc/self/statm), or 0. */
static uint64_t resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, res = 0;
  if (f) {
    if (fscanf(f, "%llu %llu", &size, &res) != 2)
      res = 0;
    fclose(f);
  }
  return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}
#endif

/* A large instance's pages are not touched at creation (the CPU backend
 * zeroes with calloc: the kernel's zero pages until used), so a model
 * larger than memory fails its size checks, not the OOM killer: 1 GiB
 * created adds far less than that to the resident set (ASan's shadow of
 * it, an eighth, included). */
Test(instance, a_large_instance_is_not_touched_at_creation) {
#ifdef TH_TSAN
  cr_skip_test("ThreadSanitizer maps its own shadow of every allocation");
#else
  const char *conf = getenv("MALLOC_CONF");
  if (getenv("MALLOC_PERTURB_") ||
      (conf && (strstr(conf, "junk") || strstr(conf, "zero"))))
    cr_skip_test("the allocator is asked to fill what it hands out");
  uint64_t before = resident_bytes();
  if (!before)
    cr_skip_test("/proc/self/statm is not readable here");
  rp_rect r = rp_rect_1d(0, (int64_t)(1 << 28) - 1); /* 1 GiB of f32 */
  rp_inst i;
  rp_status st = rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &i);
  if (st == RP_ENOMEM)
    cr_skip_test("1 GiB of address space is refused here (%s)",
                 rp_error_detail());
  RP_CHECK(st);
  uint64_t grew = resident_bytes() - before;
  cr_assert_lt(grew, (uint64_t)256 << 20, "1 GiB instance: %llu MiB resident",
               (unsigned long long)(grew >> 20));
  float *p = rp_instance_ptr(rt, i);
  cr_assert(p[0] == 0.0f && p[(1 << 28) - 1] == 0.0f);
  RP_CHECK(rp_instance_free(rt, i));
#endif
}

Test(instance, every_dtype_and_dimension) {
  for (int t = 0; t < RP_DTYPE_COUNT_; t++)
    for (int dim = 1; dim <= RP_MAX_DIM; dim++) {
      int64_t lo[4] = {-1, 2, 0, 5}, ext[4] = {3, 2, 5, 1};
      rp_rect r = rp_rect_make(dim, lo, ext);
      rp_inst i;
      RP_CHECK(rp_instance_create(rt, sysmem(), (rp_dtype)t, &r, NULL, &i));
      rp_instance_info info;
      RP_CHECK(rp_instance_query(rt, i, &info));
      size_t vol = 1;
      for (int d = 0; d < dim; d++)
        vol *= (size_t)ext[d];
      cr_assert_eq(info.bytes, vol * rp_dtype_size((rp_dtype)t), "t%d d%d", t,
                   dim);
      RP_CHECK(rp_instance_free(rt, i));
    }
}

Test(instance, explicit_strides_read_write_round_trip) {
  /* 3 x 4 column-major with padding: stride[0] = 1, stride[1] = 5 */
  rp_rect r = rp_rect_2d(0, 2, 0, 3);
  int64_t strides[2] = {1, 5};
  rp_inst i;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_I32, &r, strides, &i));
  int32_t in[12], out[12];
  for (int k = 0; k < 12; k++)
    in[k] = k * 7 + 1;
  RP_CHECK(rp_instance_write(rt, i, in, sizeof in));
  int32_t *raw = rp_instance_ptr(rt, i);
  cr_assert_eq(raw[1 * 1 + 2 * 5], in[1 * 4 + 2], "element (1,2)");
  RP_CHECK(rp_instance_read(rt, i, out, sizeof out));
  cr_assert_arr_eq(in, out, sizeof in);
  RP_EXPECT(rp_instance_read(rt, i, out, sizeof out - 4), RP_ESHAPE);
  RP_CHECK(rp_instance_free(rt, i));
}

Test(instance, bad_shapes_types_and_sizes_are_errors) {
  rp_inst i = {0};
  rp_rect r = rp_rect_1d(0, 9);
  RP_EXPECT(rp_instance_create(rt, sysmem(), (rp_dtype)99, &r, NULL, &i),
            RP_ETYPE);
  rp_rect inv = rp_rect_1d(5, 4);
  RP_EXPECT(rp_instance_create(rt, sysmem(), RP_F32, &inv, NULL, &i),
            RP_ESHAPE);
  rp_rect bad_dim = r;
  bad_dim.dim = 5;
  RP_EXPECT(rp_instance_create(rt, sysmem(), RP_F32, &bad_dim, NULL, &i),
            RP_ESHAPE);
  bad_dim.dim = 0;
  RP_EXPECT(rp_instance_create(rt, sysmem(), RP_F32, &bad_dim, NULL, &i),
            RP_ESHAPE);
  rp_rect huge = rp_rect_2d(0, INT64_MAX / 2, 0, INT64_MAX / 2);
  RP_EXPECT(rp_instance_create(rt, sysmem(), RP_F64, &huge, NULL, &i),
            RP_ERANGE);
  rp_rect full = rp_rect_1d(INT64_MIN, INT64_MAX);
  RP_EXPECT(rp_instance_create(rt, sysmem(), RP_U8, &full, NULL, &i),
            RP_ERANGE);
  rp_rect r2 = rp_rect_2d(0, 3, 0, 3);
  int64_t overlap[2] = {2, 1}; /* rows overlap columns */
  RP_EXPECT(rp_instance_create(rt, sysmem(), RP_F32, &r2, overlap, &i),
            RP_ERANGE);
  int64_t neg[2] = {4, -1};
  RP_EXPECT(rp_instance_create(rt, sysmem(), RP_F32, &r2, neg, &i), RP_ERANGE);
  RP_EXPECT(rp_instance_create(rt, 99, RP_F32, &r, NULL, &i), RP_EINVAL);
  RP_EXPECT(rp_instance_create(rt, sysmem(), RP_F32, NULL, NULL, &i),
            RP_EINVAL);
  cr_assert_eq(i.id, 0, "no handle was produced");
}

Test(instance, free_bumps_generation_and_old_handles_are_stale) {
  rp_rect r = rp_rect_1d(0, 15);
  rp_inst a;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &a));
  RP_CHECK(rp_instance_free(rt, a));
  RP_EXPECT(rp_instance_free(rt, a), RP_ESTALE);
  RP_EXPECT(rp_instance_query(rt, a, &(rp_instance_info){0}), RP_ESTALE);
  cr_assert_null(rp_instance_ptr(rt, a));
  rp_inst b;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &b));
  cr_assert_eq((uint32_t)b.id, (uint32_t)a.id, "slot reused");
  cr_assert_neq(b.id, a.id, "with a new generation");
  RP_EXPECT(rp_instance_query(rt, a, &(rp_instance_info){0}), RP_ESTALE);
  RP_CHECK(rp_instance_free(rt, b));
}

Test(instance, realloc_gives_new_generation_and_zeroed_storage) {
  rp_rect r = rp_rect_1d(0, 7);
  rp_inst a;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F64, &r, NULL, &a));
  double v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  RP_CHECK(rp_instance_write(rt, a, v, sizeof v));
  rp_inst old = a;
  RP_CHECK(rp_instance_realloc(rt, &a));
  cr_assert_neq(a.id, old.id);
  RP_EXPECT(rp_instance_query(rt, old, &(rp_instance_info){0}), RP_ESTALE);
  RP_CHECK(rp_instance_read(rt, a, v, sizeof v));
  for (int k = 0; k < 8; k++)
    cr_assert_eq(v[k], 0.0);
  RP_CHECK(rp_instance_free(rt, a));
}

Test(instance, external_memory_is_used_and_not_freed) {
  static float buf[64];
  buf[3] = 42.0f;
  rp_rect r = rp_rect_1d(100, 163);
  rp_inst e;
  RP_EXPECT(rp_instance_create_external(rt, sysmem(), RP_F32, &r, NULL, buf,
                                        sizeof buf - 4, &e),
            RP_ERANGE);
  cr_assert(!strncmp(rp_error_detail(), "rp_instance_create_external: ", 29),
            "the detail names the call: %s", rp_error_detail());
  RP_EXPECT(rp_instance_create_external(rt, sysmem(), RP_U8, &r, NULL,
                                        (void *)(UINTPTR_MAX - 15), 64, &e),
            RP_ERANGE);
  cr_assert(!strncmp(rp_error_detail(), "rp_instance_create_external: ", 29),
            "the detail names the call: %s", rp_error_detail());
  RP_CHECK(rp_instance_create_external(rt, sysmem(), RP_F32, &r, NULL, buf,
                                       sizeof buf, &e));
  cr_assert_eq(rp_instance_ptr(rt, e), buf);
  float out[64];
  RP_CHECK(rp_instance_read(rt, e, out, sizeof out));
  cr_assert_eq(out[3], 42.0f);
  RP_EXPECT(rp_instance_realloc(rt, &e), RP_EINVAL);
  RP_CHECK(rp_instance_free(rt, e));
  buf[0] = 1.0f; /* still ours (ASan would flag a free) */
}

Test(instance, rect_helpers) {
  rp_rect r = rp_rect_2d(0, 0, 0, -1);
  cr_assert_eq(rp_rect_volume(&r), 0, "empty");
  cr_assert_eq(rp_rect_volume(NULL), 0);
  cr_assert_eq(rp_dtype_size((rp_dtype)42), 0);
  cr_assert_str_eq(rp_dtype_name(RP_F64), "f64");
}

Test(instance, instances_alive_at_destroy_are_freed_with_the_runtime) {
  rp_runtime *rt2 = th_cpu_runtime(1);
  rp_rect r = rp_rect_1d(0, 1023);
  rp_inst i;
  RP_CHECK(rp_instance_create(rt2, 0, RP_F32, &r, NULL, &i));
  th_destroy(rt2); /* ASan reports a leak if this is wrong */
}

/* A slot freed 2^31 - 1 times: its last generation still names a working
 * instance; freed, the slot retires instead of wrapping to generation 1,
 * so a handle kept from any earlier generation never names a later
 * instance, and the next instance takes another slot (the generation is
 * set by hand: 2^31 frees take minutes). */
Test(instance, a_slot_whose_generations_are_used_up_retires) {
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst a;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &a));
  RP_CHECK(rp_instance_free(rt, a)); /* the next create takes its slot */
  uint32_t slot = rp__inst_slot(a);
  rp_inst_slot *s = (rp_inst_slot *)rp__ctable_at(&rt->insts, slot);
  atomic_store(&s->gen, 0x7fffffffu);
  rp_inst b;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &b));
  cr_assert_eq(rp__inst_slot(b), slot, "the slot is reused (LIFO free list)");
  cr_assert_eq(rp__inst_gen(b), 0x7fffffffu);
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, b, &info));
  ((float *)info.ptr)[3] = 2.5f;
  RP_CHECK(rp_instance_free(rt, b));
  RP_EXPECT(rp_instance_query(rt, b, &info), RP_ESTALE);
  cr_assert_eq(atomic_load(&s->gen), 0u, "the slot retired");
  rp_inst fresh[4];
  for (int i = 0; i < 4; i++) {
    RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &fresh[i]));
    cr_assert_neq(rp__inst_slot(fresh[i]), slot, "a retired slot was reused");
  }
  /* generation 1 (what a wrap would have made) and 0 (a retired slot's)
   * name nothing */
  rp_inst gen1 = {(uint64_t)1 << 32 | (uint32_t)b.id}, gen0 = {(uint32_t)b.id};
  RP_EXPECT(rp_instance_query(rt, gen1, &info), RP_ESTALE);
  RP_EXPECT(rp_instance_query(rt, gen0, &info), RP_ESTALE);
  RP_EXPECT(rp_instance_free(rt, gen0), RP_ESTALE);
  for (int i = 0; i < 4; i++)
    RP_CHECK(rp_instance_free(rt, fresh[i]));
}

/* A NULL buffer and a stale instance's name are refused naming the call;
 * the instance keeps its data and name. */
Test(instance, a_null_buffer_and_a_stale_name_are_refused) {
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst a;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &a));
  float v[4] = {1, 2, 3, 4}, back[4] = {0};
  RP_CHECK(rp_instance_write(rt, a, v, sizeof v));
  RP_CHECK(rp_instance_set_name(rt, a, "weights"));
  RP_EXPECT(rp_instance_read(rt, a, NULL, sizeof v), RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(), "rp_instance_read: NULL argument");
  RP_EXPECT(rp_instance_write(rt, a, NULL, sizeof v), RP_EINVAL);
  cr_assert_str_eq(rp_error_detail(), "rp_instance_write: NULL argument");
  RP_CHECK(rp_instance_read(rt, a, back, sizeof back));
  cr_assert_arr_eq(back, v, sizeof v);
  rp_instance_info info;
  RP_CHECK(rp_instance_query(rt, a, &info));
  cr_assert_str_eq(rp_instance_name(rt, a), "weights");

  rp_inst gone;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &gone));
  RP_CHECK(rp_instance_free(rt, gone));
  RP_EXPECT(rp_instance_set_name(rt, gone, "late"), RP_ESTALE);
  char want[128];
  snprintf(want, sizeof want,
           "rp_instance_set_name: instance %#llx is stale or unknown",
           (unsigned long long)gone.id);
  cr_assert_str_eq(rp_error_detail(), want);
  /* the slot's next instance has no name from the refused call */
  rp_inst next;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &next));
  cr_assert_str_eq(rp_instance_name(rt, next), "");
  RP_CHECK(rp_instance_free(rt, next));
  RP_CHECK(rp_instance_free(rt, a));
}

/* A handle never handed out (a made-up one naming a free slot with the
 * generation its next instance will get) names no instance: free and
 * realloc refuse it (RP_ESTALE) as every other call does, instead of
 * putting the free slot on the free list again, after which two later
 * instances shared the slot (one's free freed the other's storage). */
Test(instance, a_handle_never_handed_out_is_stale) {
  rp_rect r = rp_rect_1d(0, 3);
  rp_inst a;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &a));
  RP_CHECK(rp_instance_free(rt, a));
  rp_inst never = {a.id + (1ull << 32)}, moved = never;
  rp_instance_info info;
  RP_EXPECT(rp_instance_query(rt, never, &info), RP_ESTALE);
  RP_EXPECT(rp_instance_realloc(rt, &moved), RP_ESTALE);
  cr_assert_eq(moved.id, never.id, "the handle was rewritten");
  cr_assert(strstr(rp_error_detail(), "rp_instance_realloc"), "%s",
            rp_error_detail());
  RP_EXPECT(rp_instance_free(rt, never), RP_ESTALE);
  char want[128];
  snprintf(want, sizeof want, "rp_instance_free: instance %#llx is stale",
           (unsigned long long)never.id);
  cr_assert_str_eq(rp_error_detail(), want);
  /* the next instances take slots of their own */
  rp_inst b, c;
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &b));
  RP_CHECK(rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &c));
  cr_assert_neq(b.id & 0xffffffffu, c.id & 0xffffffffu,
                "two live instances share a slot");
  float vb[4] = {1, 2, 3, 4}, vc[4] = {5, 6, 7, 8}, back[4];
  RP_CHECK(rp_instance_write(rt, b, vb, sizeof vb));
  RP_CHECK(rp_instance_write(rt, c, vc, sizeof vc));
  RP_CHECK(rp_instance_read(rt, b, back, sizeof back));
  cr_assert_arr_eq(back, vb, sizeof vb);
  RP_CHECK(rp_instance_free(rt, c));
  RP_CHECK(rp_instance_free(rt, b));
}

/* A runtime's instance table is full at its last entry (4M; the seam
 * lowers it to 2 chunks, 2048 instances): the next create is RP_ERANGE
 * naming the call and the full table, not an out-of-memory; *out stays,
 * and a freed slot is taken again. */
Test(instance, a_full_instance_table_is_erange_not_out_of_memory) {
  rp__ctable_max_chunks = 2;
  rp_rect r = rp_rect_1d(0, 0);
  rp_inst first = {0}, h = {0}, last = {0};
  uint32_t made = 0;
  rp_status st = RP_OK;
  while (made < 4096 && (st = rp_instance_create(rt, sysmem(), RP_F32, &r, NULL,
                                                 &h)) == RP_OK) {
    if (!made)
      first = h;
    last = h;
    made++;
  }
  rp__ctable_max_chunks = 4096;
  RP_EXPECT(st, RP_ERANGE);
  cr_assert(made > 2000 && made <= 2048, "%u instances made", made);
  cr_assert_eq(h.id, last.id, "*out was written");
  cr_assert(!strncmp(rp_error_detail(),
                     "rp_instance_create: the instance table is full", 46),
            "%s", rp_error_detail());
  rp_inst keep = {0x5eed};
  RP_CHECK(rp_instance_free(rt, first));
  rp__ctable_max_chunks = 2;
  st = rp_instance_create(rt, sysmem(), RP_F32, &r, NULL, &keep);
  rp__ctable_max_chunks = 4096;
  RP_CHECK(st);
  cr_assert_neq(keep.id, 0x5eed);
}
