/* talon/impl/gemm_plan.h - the dense GEMM's plan: tile width, tile grid, raster and grid size
   from (m, n, gated, SM count) alone. Pure host functions the tests call directly. Part of
   talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_GEMM_PLAN_H
#define TALON_IMPL_GEMM_PLAN_H

typedef struct talon__gemm_plan {
    int bn;               /* rows of b per tile: 256 or 128 */
    int tiles_m, tiles_n; /* tiles of 128 rows x (gated ? bn / 2 : bn) output columns */
    int group;            /* tile-rows per raster group */
    int grid;             /* persistent CTAs: min(tiles, SMs) */
} talon__gemm_plan;

/* Output columns of a tile of width bn. */
static int talon__gemm_tile_cols(int bn, int gated) { return gated ? bn / 2 : bn; }

/* bn = 256 (the wider wgmma: more flops per byte of shared memory read) unless that leaves
   SMs without a tile, then 128. Tiles are walked in groups of 16 tile-rows (a wave of 132
   CTAs then shares about 16 row panels of a and 8 column panels of b in L2). */
static void talon__gemm_plan_make(int64_t m, int64_t n, int gated, int sms, talon__gemm_plan *pl) {
    const int64_t tiles_m = (m + TALON__GEMM_BM - 1) / TALON__GEMM_BM;
    const int64_t cols256 = talon__gemm_tile_cols(256, gated);
    int64_t tiles;
    pl->bn = tiles_m * ((n + cols256 - 1) / cols256) >= sms ? 256 : 128;
    pl->tiles_m = (int)tiles_m;
    pl->tiles_n = (int)((n + talon__gemm_tile_cols(pl->bn, gated) - 1) /
                        talon__gemm_tile_cols(pl->bn, gated));
    pl->group = 16;
    tiles = (int64_t)pl->tiles_m * pl->tiles_n;
    pl->grid = (int)(tiles < sms ? tiles : sms);
}

#endif
