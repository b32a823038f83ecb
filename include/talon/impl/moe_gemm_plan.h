/* talon/impl/moe_gemm_plan.h - the MoE expert GEMM's and the grouped GEMM's plan: tile width,
   tile grid, raster and grid size from host values alone (the rows each expert or group gets
   are on the device). Pure host functions the tests call directly. Part of
   talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_MOE_GEMM_PLAN_H
#define TALON_IMPL_MOE_GEMM_PLAN_H

typedef struct talon__moe_gemm_plan {
    int bn;      /* rows of b per tile of the 128-row kernel: 256 or 128 (unused by the
                    transposed one) */
    int blocks;  /* blocks of 128 rows the grid walks */
    int tiles_n; /* tiles of (gated ? bn / 2 : bn) output columns */
    int group;   /* tile-rows per raster group */
    int grid;    /* persistent CTAs */
    int skip_padding; /* 1: halves of a block that are all padding issue no wgmmas */
    int swap_rows; /* 16, 32 or 64: the transposed decode kernel, a rows per chunk; 0: none */
} talon__moe_gemm_plan;

/* The plan over `blocks` blocks of 128 rows of which `busy_rows` rows are expected to have
   work (the device decides which): the tile width by the dense GEMM's wave cost
   (talon__gemm_cost) over the blocks those rows fill, between 256 and 128 rows of b (128
   only, unless allow_256: gated fp8 block scales with n not a multiple of 128, where a
   256-row tile's up half would straddle two scale blocks). Tiles are walked in groups of 16
   blocks, consecutive blocks mostly of one expert, so a wave shares its experts' weight
   panels in L2. Grid: min(blocks x tiles_n, SMs) CTAs rounded down to whole clusters (at
   least one); a tile of a block without work costs its CTA two loads. */
static void talon__moe_gemm_plan_blocks(int64_t busy_rows, int64_t blocks, int64_t n, int gated,
                                        int allow_256, int sms, talon__moe_gemm_plan *pl) {
    const int64_t busy = (busy_rows + 127) / 128;
    int64_t cols, tiles;
    pl->bn = !allow_256 || talon__gemm_cost(busy, n, gated, 128, sms) <
                               talon__gemm_cost(busy, n, gated, 256, sms)
                 ? 128 : 256;
    cols = talon__gemm_tile_cols(pl->bn, gated);
    pl->blocks = (int)blocks;
    pl->tiles_n = (int)((n + cols - 1) / cols);
    pl->group = 16;
    tiles = blocks * pl->tiles_n;
    pl->grid = (int)(tiles < sms ? tiles : sms) / TALON__MOE_GEMM_CLUSTER * TALON__MOE_GEMM_CLUSTER;
    if (pl->grid < TALON__MOE_GEMM_CLUSTER) pl->grid = TALON__MOE_GEMM_CLUSTER;
    pl->skip_padding = 0;
    pl->swap_rows = 0;
}

/* talon_moe_gemm: the blocks expert_ids holds that end inside sorted_capacity (a valid
   num_tokens_post_padded, a multiple of 128 up to the capacity, never reaches further, and a
   broken one then cannot make the kernel read past sorted_token_ids), tokens x topk pairs
   spread evenly over them. Padding halves skip their wgmmas at up to 128 tokens (decode), where
   an expert (picked once per token) fills at most one block. With more, the pair of CTAs of a
   cluster often streams one expert's weights for two of its blocks in step, sharing them
   through L2; a skipping half lets one CTA run ahead and the sharing fails (H100: DeepSeek-V3
   T=16384 0.87-0.90x, as slow as with no pairing at all; T <= 64: 1.01-1.02x;
   docs/notes/moe_gemm.md).
   At up to 64 tokens (an expert then has at most that many rows) the transposed kernel instead
   (moe_gemm_swap): tiles of 128 output columns x the block's slots in chunks of MN rows, one
   CTA per SM, no clusters. MN is the smallest of 16, 32, 64 that holds twice the rows an
   expert gets on average (tokens x topk / experts), or the tokens if fewer: a chunk's rows of
   a take a stage's shared memory whether used or not (H200, Qwen3-30B-A3B T=64, 4 rows an
   expert: 16-row chunks 1.05x 64-row ones in fp8), while an expert past its chunk streams its
   weights once more for each further chunk with rows (docs/notes/moe_gemm.md, step 14). Not
   where no_swap: a and d both SORTED (every slot of such a block is computed from a[s] as is,
   padding included).
   block: fp8 block scales, where gated with n not a multiple of 128 rules out bn 256 (as the
   grouped GEMM's), and the transposed kernel, which waits for each k-block's products to
   scale them (a few k-blocks in flight), is taken at up to 32 tokens only (H200: T=32
   DeepSeek-V3 1.16x, Qwen3-30B-A3B 1.12x the 128-row kernel; gated chunks of 64 would spill;
   docs/notes/moe_gemm.md). */
static void talon__moe_gemm_plan_make(int64_t tokens, int64_t topk, int64_t experts, int64_t n,
                                      int gated, int block, int64_t sorted_capacity,
                                      int64_t expert_ids_capacity, int no_swap, int sms,
                                      talon__moe_gemm_plan *pl) {
    const int64_t sorted_blocks = sorted_capacity / 128;
    const int64_t blocks = expert_ids_capacity < sorted_blocks ? expert_ids_capacity : sorted_blocks;
    talon__moe_gemm_plan_blocks(tokens * topk, blocks, n, gated, !(block && gated && n % 128),
                                sms, pl);
    pl->skip_padding = tokens <= 128;
    if (tokens <= (block ? 32 : 64) && !no_swap) {
        const int64_t tiles = blocks * ((n + 127) / 128);
        const int64_t twice = 2 * ((tokens * topk + experts - 1) / experts);
        const int64_t rows = twice < tokens ? twice : tokens;
        pl->swap_rows = rows <= 16 ? 16 : rows <= 32 ? 32 : 64;
        pl->tiles_n = (int)((n + 127) / 128);
        pl->grid = (int)(tiles < sms ? tiles : sms);
        if (pl->grid < 1) pl->grid = 1;
        pl->skip_padding = 0;
    }
}

/* talon_grouped_gemm: CONTIGUOUS walks rows / 128 blocks, MASKED ceil(rows / 128) per group;
   every row is taken as busy (the counts are on the device). block: fp8 block scales. */
static void talon__grouped_gemm_plan_make(talon_grouped_layout layout, int64_t groups,
                                          int64_t rows, int64_t n, int gated, int block, int sms,
                                          talon__moe_gemm_plan *pl) {
    const int allow_256 = !(block && gated && n % 128);
    if (layout == TALON_GROUPED_MASKED)
        talon__moe_gemm_plan_blocks(groups * rows, groups * ((rows + 127) / 128), n, gated,
                                    allow_256, sms, pl);
    else
        talon__moe_gemm_plan_blocks(rows, rows / 128, n, gated, allow_256, sms, pl);
}

#endif
