/* kernels/gpt_launch.c — the GPT CUDA kernels' launch shapes (see
 * gpt_launch.h). Plain C, built with or without the toolkit. */
#include "gpt_launch.h"

/* about two blocks for each SM of a 132-SM GPU (H100, H200) */
#define FUSED_BLOCKS 256u

static rp_gpt_launch launch_1d(unsigned grid, unsigned block, size_t smem) {
  rp_gpt_launch l = {{grid, 1, 1}, {block, 1, 1}, smem};
  return l;
}

unsigned rp_gpt_blocks_for(size_t items, unsigned per_block) {
  size_t b = (items + per_block - 1) / per_block;
  if (b == 0)
    b = 1;
  return b < RP_GPT_MAX_BLOCKS ? (unsigned)b : RP_GPT_MAX_BLOCKS;
}

size_t rp_gpt_attn_fused_fwd_floats(int T, int hs, unsigned warps) {
  return 2 * (size_t)T * ((size_t)hs + 1) + warps * ((size_t)hs + (size_t)T);
}

size_t rp_gpt_attn_fused_bwd_floats(int T, int hs) {
  return 3 * (size_t)T * ((size_t)hs + 1) + (size_t)T * (size_t)T;
}

int rp_gpt_attn_fused_fits(int T, int hs) {
  return rp_gpt_attn_fused_fwd_floats(T, hs, RP_GPT_ATTN_THREADS / 32) *
                 sizeof(float) <=
             RP_GPT_SMEM_NO_OPT_IN &&
         rp_gpt_attn_fused_bwd_floats(T, hs) * sizeof(float) <=
             RP_GPT_SMEM_NO_OPT_IN;
}

rp_gpt_launch rp_gpt_attn_fused_fwd_launch(int bh, int T, int hs) {
  unsigned w = RP_GPT_ATTN_FUSED_MAX_THREADS / 32;
  while (w > RP_GPT_ATTN_THREADS / 32 &&
         rp_gpt_attn_fused_fwd_floats(T, hs, w) * sizeof(float) >
             RP_GPT_SMEM_NO_OPT_IN)
    w /= 2;
  unsigned most = ((unsigned)T + w - 1) / w;
  unsigned r = (FUSED_BLOCKS + (unsigned)bh - 1) / (unsigned)bh;
  rp_gpt_launch l = {{(unsigned)bh,
                      r < 1      ? 1
                      : r > most ? most
                                 : r,
                      1},
                     {w * 32, 1, 1},
                     rp_gpt_attn_fused_fwd_floats(T, hs, w) * sizeof(float)};
  return l;
}

rp_gpt_launch rp_gpt_attn_fused_bwd_launch(int bh, int T, int hs) {
  return launch_1d((unsigned)bh, RP_GPT_ATTN_FUSED_MAX_THREADS,
                   rp_gpt_attn_fused_bwd_floats(T, hs) * sizeof(float));
}

rp_gpt_launch rp_gpt_attn_decode_launch(int NH) {
  return launch_1d((unsigned)NH, RP_GPT_ATTN_THREADS,
                   RP_GPT_ATTN_THREADS * sizeof(float));
}

rp_gpt_launch rp_gpt_xent_rows_launch(int N, int V) {
  unsigned th = V > 4096 ? 1024u : V > 256 ? 256u : 64u;
  return launch_1d(rp_gpt_blocks_for(N > 0 ? (size_t)N : 0, 1), th, 0);
}

rp_gpt_launch rp_gpt_embed_bwd_wte_launch(long long n, int C, int V,
                                          int *by_token) {
  unsigned col_blocks =
      (unsigned)((C + RP_GPT_EMBED_THREADS - 1) / RP_GPT_EMBED_THREADS);
  *by_token = V > 0 && (long long)V * col_blocks * 4 <= n &&
              col_blocks <= RP_GPT_MAX_GRID_YZ;
  if (*by_token) {
    rp_gpt_launch l = {{rp_gpt_blocks_for((size_t)V, 1), col_blocks, 1},
                       {RP_GPT_EMBED_THREADS, 1, 1},
                       0};
    return l;
  }
  return launch_1d(rp_gpt_blocks_for((size_t)n, 1), RP_GPT_EMBED_THREADS, 0);
}
