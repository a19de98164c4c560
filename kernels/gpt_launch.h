/* kernels/gpt_launch.h — the launch shapes of the GPT's CUDA kernels that
 * depend on the model's shape, as plain C: the grid caps of the
 * grid-stride kernels, the attention's fused kernels (2-D grid, up to 1024
 * threads, dynamic shared memory) and its decode, the cross-entropy's
 * rows, the embedding backward's dwte. The launchers (the kernels/ .cu files)
 * take their grids, blocks and dynamic shared memory from these functions, so
 * test/test_gpt_launch.c checks what runs against the device's limits
 * (below) for the configs that train, on any machine, CUDA or not. */
#ifndef RP_KERNELS_GPT_LAUNCH_H
#define RP_KERNELS_GPT_LAUNCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The limits a launch must keep (every CUDA device of compute capability
 * 7.0 and up): threads a block, gridDim.y and gridDim.z, and the dynamic
 * shared memory a block gets without
 * cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize), which
 * no launcher calls. */
#define RP_GPT_MAX_BLOCK_THREADS 1024u
#define RP_GPT_MAX_GRID_YZ 65535u
#define RP_GPT_SMEM_NO_OPT_IN ((size_t)48 * 1024)

/* Grid cap of the grid-stride kernels: 65536 blocks of 256 threads cover
 * 16M items a sweep, which fills any current GPU; the loops cover the
 * rest. */
#define RP_GPT_MAX_BLOCKS 65536u

/* The attention's block of the GEMM path's kernels and of decode; the
 * fused kernels' __launch_bounds__ (32 warps). */
#define RP_GPT_ATTN_THREADS 256u
#define RP_GPT_ATTN_FUSED_MAX_THREADS 1024u

typedef struct rp_gpt_launch {
  unsigned grid[3], block[3];
  size_t smem; /* dynamic shared memory, bytes */
} rp_gpt_launch;

/* Blocks of per_block for `items` (at least 1, at most RP_GPT_MAX_BLOCKS). */
unsigned rp_gpt_blocks_for(size_t items, unsigned per_block);

/* The fused attention kernels' shared memory in floats: the forward with
 * `warps` warps, the backward (RP_GPT_ATTN_FUSED_MAX_THREADS threads). */
size_t rp_gpt_attn_fused_fwd_floats(int T, int hs, unsigned warps);
size_t rp_gpt_attn_fused_bwd_floats(int T, int hs);
/* 1 when a head of T positions and hs floats takes the fused kernels
 * (both within RP_GPT_SMEM_NO_OPT_IN, the forward with
 * RP_GPT_ATTN_THREADS threads), 0 when it takes the GEMM path. */
int rp_gpt_attn_fused_fits(int T, int hs);
/* The fused forward over bh = B NH heads (rp_gpt_attn_fused_fits true):
 * the most warps, halving from 32, whose buffers fit, and about 256
 * blocks (at most a row group per warp's row of the head). */
rp_gpt_launch rp_gpt_attn_fused_fwd_launch(int bh, int T, int hs);
/* The fused backward: a block of RP_GPT_ATTN_FUSED_MAX_THREADS a head. */
rp_gpt_launch rp_gpt_attn_fused_bwd_launch(int bh, int T, int hs);
/* Decode: a block of RP_GPT_ATTN_THREADS a head, a float of dynamic
 * shared memory a thread. */
rp_gpt_launch rp_gpt_attn_decode_launch(int NH);

/* The cross-entropy's row kernel: a block a row (grid-stride over N rows),
 * 1024 threads for V > 4096, 256 for V > 256, else 64. */
rp_gpt_launch rp_gpt_xent_rows_launch(int N, int V);

/* The embedding kernels' block (their shared arrays are sized by it). */
#define RP_GPT_EMBED_THREADS 256u

/* The embedding backward's dwte over n = B T positions of width C and a
 * vocabulary of V (n in [1, INT_MAX - 65536]): *by_token = 1 when a block
 * takes a token and 256 columns (grid V x column blocks: 4 V x the
 * column blocks <= n and at most 65535 column blocks), 0 when a block
 * takes a position (grid n). Blocks of RP_GPT_EMBED_THREADS. */
rp_gpt_launch rp_gpt_embed_bwd_wte_launch(long long n, int C, int V,
                                          int *by_token);

#ifdef __cplusplus
}
#endif

#endif
