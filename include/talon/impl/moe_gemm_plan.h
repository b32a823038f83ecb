/* talon/impl/moe_gemm_plan.h - the MoE expert GEMM's plan: tile width, tile grid, raster and
   grid size from (tokens, topk, n, gated, capacities, SM count) alone (the rows each
   expert gets are on the device). Pure host functions the tests call directly. Part of
   talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_MOE_GEMM_PLAN_H
#define TALON_IMPL_MOE_GEMM_PLAN_H

typedef struct talon__moe_gemm_plan {
    int bn;      /* rows of b per tile: 256 or 128 */
    int blocks;  /* blocks of 128 sorted slots the grid walks: expert_ids_capacity */
    int tiles_n; /* tiles of (gated ? bn / 2 : bn) output columns */
    int group;   /* tile-rows per raster group */
    int grid;    /* persistent CTAs */
} talon__moe_gemm_plan;

/* Blocks the grid walks: those expert_ids holds that end inside sorted_capacity (a valid
   num_tokens_post_padded, a multiple of 128 up to the capacity, never reaches further, and a
   broken one then cannot make the kernel read past sorted_token_ids). The tile width: the
   dense GEMM's wave cost (talon__gemm_cost) over the blocks that tokens x topk pairs fill
   when spread evenly (one block per 128 pairs; the device decides how many there are),
   between 256 and 128 rows of b. Tiles are walked in groups of 16 blocks, consecutive blocks
   mostly of one expert, so a wave shares its experts' weight panels in L2. Grid: min(blocks
   x tiles_n, SMs) CTAs; a tile of a block without work costs its CTA two loads. */
static void talon__moe_gemm_plan_make(int64_t tokens, int64_t topk, int64_t n, int gated,
                                      int64_t sorted_capacity, int64_t expert_ids_capacity,
                                      int sms, talon__moe_gemm_plan *pl) {
    const int64_t sorted_blocks = sorted_capacity / 128;
    const int64_t blocks = expert_ids_capacity < sorted_blocks ? expert_ids_capacity : sorted_blocks;
    const int64_t busy = (tokens * topk + 127) / 128;
    int64_t cols, tiles;
    pl->bn = talon__gemm_cost(busy, n, gated, 128, sms) < talon__gemm_cost(busy, n, gated, 256, sms)
                 ? 128 : 256;
    cols = talon__gemm_tile_cols(pl->bn, gated);
    pl->blocks = (int)blocks;
    pl->tiles_n = (int)((n + cols - 1) / cols);
    pl->group = 16;
    tiles = blocks * pl->tiles_n;
    pl->grid = (int)(tiles < sms ? tiles : sms);
}

#endif
