/* test/test_gpt_launch.c — the GPT CUDA kernels' launch shapes
 * (kernels/gpt_launch.h), on any machine: for the configs that train (the
 * test fixture, the launch-bound step, `make run`'s, nanoGPT's) and the
 * shapes test/test_gpt_kernels_gpu.c runs, every shape the launchers take
 * from there keeps the limits of a CUDA device written out here (not the
 * header's names for them): at most 1024 threads a block and within the
 * kernel's __launch_bounds__, a whole number of warps where the kernel
 * reduces across warps, gridDim.y and z at most 65535, at least one block,
 * and dynamic shared memory within the 48 KiB a block gets without
 * cudaFuncSetAttribute (no launcher calls it), laid out as the kernel
 * carves it. Registers per thread times threads stay within 65536 at
 * compile time: every kernel launched with more than 256 threads declares
 * its block in __launch_bounds__ (ptxas then keeps it within 64 registers
 * at 1024 threads). */
#include "helpers.h"

#include "kernels/gpt_launch.h"

#include <stdio.h>

#define DEV_THREADS 1024u
#define DEV_GRID_YZ 65535u
#define DEV_GRID_X 2147483647u
#define DEV_SMEM ((size_t)48 * 1024)

/* The limits every launch keeps; bound: the kernel's __launch_bounds__
 * (0: none); warps: 1 when the block must be whole warps. */
static void check_launch(const rp_gpt_launch *l, unsigned bound, int warps,
                         const char *what) {
  unsigned threads = l->block[0] * l->block[1] * l->block[2];
  cr_assert(threads >= 1 && threads <= DEV_THREADS, "%s: %u threads a block",
            what, threads);
  if (bound)
    cr_assert(threads <= bound, "%s: %u threads, beyond __launch_bounds__ %u",
              what, threads, bound);
  if (warps)
    cr_assert(threads % 32 == 0, "%s: %u threads: not whole warps", what,
              threads);
  cr_assert(l->grid[0] >= 1 && l->grid[0] <= DEV_GRID_X, "%s: gridDim.x %u",
            what, l->grid[0]);
  cr_assert(l->grid[1] >= 1 && l->grid[1] <= DEV_GRID_YZ, "%s: gridDim.y %u",
            what, l->grid[1]);
  cr_assert(l->grid[2] >= 1 && l->grid[2] <= DEV_GRID_YZ, "%s: gridDim.z %u",
            what, l->grid[2]);
  cr_assert(l->smem <= DEV_SMEM, "%s: %zu bytes of dynamic shared memory", what,
            l->smem);
}

typedef struct cfg {
  const char *name;
  int layers, NH, C, T, B, V;
} cfg;

/* The configs that train (the fixture: test/fixtures; the launch-bound
 * step: bench/gpu_day.sh; make run's; nanoGPT's character-level one, with
 * the vocabularies of its corpora). */
static const cfg k_cfgs[] = {
    {"fixture", 2, 2, 32, 16, 4, 64},
    {"launch-bound", 4, 4, 128, 64, 16, 93},
    {"make run", 2, 4, 64, 64, 16, 93},
    {"nanoGPT (shakespeare)", 6, 6, 384, 256, 64, 65},
    {"nanoGPT (fortunes)", 6, 6, 384, 256, 64, 100},
};

/* The attention's launches for B heads of T x hs; returns whether the
 * fused kernels run. */
static int check_attention(int B, int T, int C, int NH, const char *name) {
  char what[160];
  int hs = C / NH, bh = B * NH;
  int fused = rp_gpt_attn_fused_fits(T, hs);
  if (fused) {
    rp_gpt_launch f = rp_gpt_attn_fused_fwd_launch(bh, T, hs);
    snprintf(what, sizeof what, "%s: attention_fused_fwd_k (B %d T %d hs %d)",
             name, B, T, hs);
    check_launch(&f, 1024, 1, what);
    /* the kernel carves K, V (rows of hs + 1) and each warp's q and p rows
     * out of it, with its own warp count */
    unsigned w = f.block[0] / 32;
    size_t want = (2 * (size_t)T * (hs + 1) + w * ((size_t)hs + T)) * 4;
    cr_assert_eq(f.smem, want, "%s: %zu bytes for %u warps, needs %zu", what,
                 f.smem, w, want);
    cr_assert(w >= 8, "%s: %u warps", what, w);
    cr_assert_eq(f.grid[0], (unsigned)bh, "%s: a block column a head", what);
    cr_assert(f.grid[1] <= (T + w - 1) / w,
              "%s: %u row groups for %d rows of %u warps", what, f.grid[1], T,
              w);
    rp_gpt_launch b = rp_gpt_attn_fused_bwd_launch(bh, T, hs);
    snprintf(what, sizeof what, "%s: attention_fused_bwd_k (B %d T %d hs %d)",
             name, B, T, hs);
    check_launch(&b, 1024, 1, what);
    want = (3 * (size_t)T * (hs + 1) + (size_t)T * T) * 4;
    cr_assert_eq(b.smem, want, "%s: %zu bytes, needs %zu", what, b.smem, want);
    cr_assert_eq(b.grid[0], (unsigned)bh, "%s: a block a head", what);
  } else {
    /* the GEMM path: grid-stride kernels of RP_GPT_ATTN_THREADS */
    size_t rows = (size_t)bh * T, n = (size_t)B * T * C;
    rp_gpt_launch sm = {
        {rp_gpt_blocks_for(rows, RP_GPT_ATTN_THREADS / 32), 1, 1},
        {RP_GPT_ATTN_THREADS, 1, 1},
        0};
    snprintf(what, sizeof what, "%s: softmax_causal_k (B %d T %d NH %d)", name,
             B, T, NH);
    check_launch(&sm, 0, 1, what);
    rp_gpt_launch pm = {{rp_gpt_blocks_for(n, RP_GPT_ATTN_THREADS), 1, 1},
                        {RP_GPT_ATTN_THREADS, 1, 1},
                        0};
    snprintf(what, sizeof what, "%s: permutes (B %d T %d C %d)", name, B, T, C);
    check_launch(&pm, 0, 0, what);
  }
  return fused;
}

/* Every shape-dependent launch of a config's training and decode steps. */
static int check_cfg(const cfg *c) {
  char what[160];
  int fused = check_attention(c->B, c->T, c->C, c->NH, c->name);
  rp_gpt_launch d = rp_gpt_attn_decode_launch(c->NH);
  snprintf(what, sizeof what, "%s: attention_decode_k", c->name);
  check_launch(&d, 0, 1, what);
  cr_assert_eq(d.smem, d.block[0] * sizeof(float),
               "%s: a float of dynamic shared memory a thread", what);
  int N = c->B * c->T;
  rp_gpt_launch x = rp_gpt_xent_rows_launch(N, c->V);
  snprintf(what, sizeof what, "%s: xent_rows_k (N %d V %d)", c->name, N, c->V);
  check_launch(&x, 0, 1, what);
  int by_token;
  rp_gpt_launch e = rp_gpt_embed_bwd_wte_launch(N, c->C, c->V, &by_token);
  snprintf(what, sizeof what, "%s: embed_bwd_wte (N %d C %d V %d)", c->name, N,
           c->C, c->V);
  check_launch(&e, 0, 1, what);
  return fused;
}

Test(gpt_launch, training_configs_keep_the_device_limits) {
  /* which attention path each takes: the fixture's and the launch-bound
   * step's heads fit the fused kernels, nanoGPT's (T 256, hs 64) do not
   * (docs/gpu.md) */
  int want_fused[] = {1, 1, 1, 0, 0};
  for (size_t i = 0; i < sizeof k_cfgs / sizeof k_cfgs[0]; i++)
    cr_assert_eq(check_cfg(&k_cfgs[i]), want_fused[i],
                 "%s: the attention's %s path was expected", k_cfgs[i].name,
                 want_fused[i] ? "fused" : "GEMM");
}

/* test/test_gpt_kernels_gpu.c's attention shapes (B, T, C, NH), and
 * heads at the edge of the fused kernels' shared memory. */
Test(gpt_launch, attention_test_shapes_keep_the_device_limits) {
  static const int shapes[][4] = {
      {2, 7, 12, 3},  {1, 33, 64, 2},   {3, 40, 48, 4},  {1, 40, 80, 1},
      {2, 96, 48, 6}, {16, 64, 128, 4}, {2, 64, 256, 4}, {1, 100, 32, 2},
      {1, 8, 300, 1}, {64, 64, 128, 4}, {3, 2, 6, 3},    {2, 3, 6, 3},
      {2, 7, 15, 3},  {2, 9, 18, 3},    {1, 7, 15, 3},   {1, 1, 4096, 1},
      {1, 1, 1, 1},   {1, 104, 8, 1},   {1, 2048, 1, 1}, {512, 16, 16, 1},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    check_attention(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3],
                    "test shape");
  /* T 96 with hs 8 fits (the edge test_gpt_kernels_gpu.c names), T 64
   * with hs 64 and T 100 with hs 16 do not */
  cr_assert(rp_gpt_attn_fused_fits(96, 8));
  cr_assert(!rp_gpt_attn_fused_fits(64, 64));
  cr_assert(!rp_gpt_attn_fused_fits(100, 16));
  /* T 8 with hs 300: 32 warps' buffers do not fit, 16 do */
  cr_assert_eq(rp_gpt_attn_fused_fwd_launch(1, 8, 300).block[0], 16 * 32);
}

Test(gpt_launch, row_kernels_keep_the_device_limits) {
  static const int vocab[] = {1,   2,   31,   32,   33,   64,
                              256, 257, 4096, 4097, 50257};
  for (size_t i = 0; i < sizeof vocab / sizeof vocab[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "xent_rows_k V %d", vocab[i]);
    rp_gpt_launch x = rp_gpt_xent_rows_launch(16384, vocab[i]);
    check_launch(&x, 0, 1, what);
    x = rp_gpt_xent_rows_launch(0, vocab[i]);
    check_launch(&x, 0, 1, what);
  }
  /* embed_bwd: by token only while the column blocks fit gridDim.y */
  int by_token;
  rp_gpt_launch e = rp_gpt_embed_bwd_wte_launch(16384, 384, 65, &by_token);
  cr_assert(by_token, "nanoGPT's dwte is by token");
  check_launch(&e, 0, 1, "embed_bwd_wte nanoGPT");
  e = rp_gpt_embed_bwd_wte_launch(0x7fffffffLL - 65536, 65536 * 256, 1,
                                  &by_token);
  cr_assert(!by_token, "65536 column blocks do not fit gridDim.y");
  check_launch(&e, 0, 1, "embed_bwd_wte wide");
  e = rp_gpt_embed_bwd_wte_launch(1, 1, 50257, &by_token);
  cr_assert(!by_token);
  check_launch(&e, 0, 1, "embed_bwd_wte one position");
  /* grid-stride grids: never empty, never beyond the cap */
  cr_assert_eq(rp_gpt_blocks_for(0, 256), 1);
  cr_assert_eq(rp_gpt_blocks_for(257, 256), 2);
  cr_assert_eq(rp_gpt_blocks_for((size_t)1 << 40, 1), RP_GPT_MAX_BLOCKS);
}
