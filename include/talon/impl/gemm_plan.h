/* talon/impl/gemm_plan.h - the dense GEMM's plan: kernel (tiled or transposed), tile width,
   split-K, tile grid, raster and grid size from (m, n, k, gated, output type, SM count)
   alone. Pure host functions the tests call directly. Part of talon.h's implementation
   (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_GEMM_PLAN_H
#define TALON_IMPL_GEMM_PLAN_H

typedef struct talon__gemm_plan {
    int bn;               /* rows of b per tile: 256, 192 (not gated) or 128 */
    int tiles_m, tiles_n; /* tiles of 128 rows x (gated ? bn / 2 : bn) output columns */
    int group;            /* tile-rows per raster group */
    int split;            /* split-K ways: 1 or 2 (bn 128, not gated; transposed: 64 rows) */
    int swap_mn;          /* small m: rows of a per tile of the transposed kernel; else 0 */
    int swap_rows;        /* the transposed kernel's rows of b per tile: 128 or 64 */
    int pingpong;         /* 1: gemm_pingpong (bn 128, a warpgroup per tile) */
    int grid;             /* persistent CTAs */
} talon__gemm_plan;

/* Output columns of a tile of width bn. */
static int talon__gemm_tile_cols(int bn, int gated) { return gated ? bn / 2 : bn; }

/* The tile width with the least estimated time: waves of tiles times a tile's time,
     cost(bn) = ceil(tiles(bn) / SMs) x bn x slow(bn),   slow = 1, 1.04, 1.08 for 256, 192, 128
   (a narrower tile reads more shared memory per flop: 128 x 128 tiles ran 8% below 128 x 256
   per SM on H100, docs/notes/gemm.md), the wider on a tie. So a problem that 128 x 256 tiles
   cover in a fraction of a wave takes narrower tiles, and one whose last wave would be nearly
   empty takes the width that fills it best (M 512, N 6144: 128 tiles of 192 in one wave,
   not 96 of 256 or 192 of 128). bn 256 runs in clusters of 2 CTAs on vertically adjacent
   tiles (TALON__GEMM_CLUSTER): its grid is 2 min(pairs, floor(SMs / 2)), pairs =
   ceil(tiles_m / 2) tiles_n; the others' min(tiles, SMs). Tiles are walked in groups of 16
   tile-rows (a wave of 132 CTAs then shares about 16 row panels of a and 8 column panels of
   b in L2).
   Split-K where tiles are few: at bn 128 (not gated), 2 ways where tiles x 2 <= SMs and each
   way keeps at least 8 k-blocks (128 bytes of k) (M 128, N 4096, K 14336: 32 tiles -> 64
   CTAs). The ways of a tile are a cluster, and only clusters of 2 are sure to be resident all
   at once: a 132-SM H100 or H200 holds 66 pairs but 30 clusters of 4
   (cuOccupancyMaxActiveClusters), so 32 tiles x 4 ways ran 2 clusters in a second round,
   1.2-1.5x slower than 2 ways (docs/notes/gemm.md). Each way's fp32 partial is added to the
   first's in a fixed order inside the cluster, so the result is deterministic, though its
   rounding differs from the unsplit sum's. */
static int64_t talon__gemm_cost(int64_t tiles_m, int64_t n, int gated, int bn, int sms) {
    const int64_t cols = talon__gemm_tile_cols(bn, gated);
    const int64_t tiles = tiles_m * ((n + cols - 1) / cols);
    const int64_t slow = bn == 256 ? 100 : bn == 192 ? 104 : 108;
    return (tiles + sms - 1) / sms * bn * slow;
}

/* k-blocks of k: 128 bytes each (64 16-bit or 128 fp8 elements). */
static int64_t talon__gemm_kblocks(int64_t k, int in_size) {
    return (k * in_size + TALON__GEMM_BK_BYTES - 1) / TALON__GEMM_BK_BYTES;
}

/* Whether k splits `ways` ways with at least 8 k-blocks a way: the split-K rule of both
   kernels. */
static int talon__gemm_split_fits(int64_t k, int in_size, int ways) {
    return talon__gemm_kblocks(k, in_size) >= 8 * ways;
}

/* Split-K ways for `tiles` tiles of k: 2 where tiles x 2 <= SMs and k splits 2 ways, else 1. */
static int talon__gemm_split(int64_t tiles, int64_t k, int in_size, int sms) {
    return tiles * 2 <= sms && talon__gemm_split_fits(k, in_size, 2) ? 2 : 1;
}

/* m <= 64 with a 16-bit output, not gated: the transposed kernel (gemm_swap), tiles of `rows`
   rows of b against all m rows of a, padded to MN = 16, 32 or 64 (or 128, for m 65..128 where
   talon__gemm_swap128_pays: 64-row tiles, 2 ways). It streams b, so the plan evens out the
   bytes per CTA: of (rows, ways) in (128, 1), (64, 1), (64, 2) the least
     ceil(tiles(rows) x ways / SMs) x rows / ways,
   the first on a tie, where a split keeps at least 8 k-blocks a way (N 14336: 112 tiles of 128
   rows; N 4096: 64 tiles of 64 rows x 2 ways = 128 CTAs; as in talon__gemm_split, no more
   than 2 ways).
   in_size: bytes per input element (2, or 1 for fp8); the rest of the plan does not depend on
   it, nor on block scales (a 128- or 64-row tile lies in one 128-row scale block). Elsewhere
   block-scaled fp8 (block) takes tiles of 256 or 128 rows of b (a 192-row tile's second half
   would straddle two 128-row scale blocks; gated 256 needs n a multiple of 128 for the same
   reason). */
static void talon__gemm_plan_swap(int64_t m, int64_t n, int64_t k, int in_size, int sms,
                                  talon__gemm_plan *pl) {
    static const int shapes[][2] = {{64, 1}, {64, 2}}; /* rows, ways, after (128, 1) */
    int64_t best, tiles, cost;
    size_t i;
    pl->swap_mn = m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128;
    pl->bn = 128;
    pl->tiles_m = 1;
    if (pl->swap_mn == 128) { /* talon__gemm_swap128_pays: 2 x its tiles fit the SMs */
        pl->swap_rows = 64;
        pl->split = 2;
        pl->tiles_n = (int)((n + 63) / 64);
        pl->grid = 2 * pl->tiles_n;
        return;
    }
    pl->swap_rows = 128;
    pl->split = 1;
    pl->tiles_n = (int)((n + 127) / 128);
    best = (pl->tiles_n + sms - 1) / sms * 128;
    for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int rows = shapes[i][0], ways = shapes[i][1];
        if (ways > 1 && !talon__gemm_split_fits(k, in_size, ways)) continue;
        tiles = (n + rows - 1) / rows;
        cost = (tiles * ways + sms - 1) / sms * rows / ways;
        if (cost >= best) continue;
        best = cost;
        pl->swap_rows = rows;
        pl->split = ways;
        pl->tiles_n = (int)tiles;
    }
    pl->grid = pl->split * (pl->tiles_n < sms / pl->split ? pl->tiles_n : sms / pl->split);
}

/* m 65..128 through the transposed kernel (MN 128, tiles of 64 rows of b, split-K 2) where
   the normal kernel's split-K would leave at least half the SMs idle (one tile-row of at most
   SMs / 4 tiles of 128: N <= 4224 on 132 SMs) and k is long (>= 128 k-blocks): its 64-row
   tiles x 2 ways run on twice the SMs (H100: N 4096 K 14336 M 65 / 96 / 128 1.14x / 1.22x /
   1.26x; N 2048 K 8192 1.03x / 1.22x / 1.27x). With more tiles (N 8192: 0.84x at M 65) or k
   4096 the normal kernel's 128-row tiles, which read a fewer times, do as well or better
   (docs/notes/gemm.md, step 13). 16-bit inputs only (the kernels the table has). */
static int talon__gemm_swap128_pays(int64_t m, int64_t n, int64_t k, int in_size, int block,
                                    int sms) {
    return m > 64 && m <= 128 && in_size == 2 && !block && 4 * ((n + 127) / 128) <= sms &&
           talon__gemm_kblocks(k, in_size) >= 128;
}

/* The epilogue as the plan sees it: none, a bias or an activation (with or without a
   residual), or a residual alone. */
enum { TALON__GEMM_EPI_NONE = 0, TALON__GEMM_EPI_ACT = 1, TALON__GEMM_EPI_RESIDUAL = 2 };

/* Ping-pong tiles (gemm_pingpong: each consumer warpgroup on whole 128 x 128 tiles of its
   own, one's epilogue under the other's wgmmas) where the epilogue is a large share of a
   tile's time and the problem is not one where they lose. The cooperative kernels' tensor
   cores idle through every epilogue, ~10% of the time at 64 k-blocks a tile with no
   epilogue at all (ncu), more with GELU, residual, gating or fp8 scales; but 128-wide tiles
   move 1.5x the bytes per flop of 128 x 256 pairs from L2, and on H100 they ran 0.69-0.87x at
   16384 x 28672 x 4096 and at k 14336 (docs/notes/gemm.md, step 11). So, at most 64 k-blocks
   (k 4096 of 16-bit, 8192 of fp8), m x (b's rows) <= 2^27, at least 2 tile-rows (pairs share
   b) and 2 tiles of 128 x 128 per SM, for:
   - fp8 (row or tensor scales) and gating;
   - a bias or an activation, past 32 k-blocks only where the cooperative tiles would be
     narrower than 256 (bn, chosen before) or number at least 5 per SM: with fewer, the
     epilogues they expose cost less than ping-pong's slower main loop (4096^3 bias + GELU
     1.05x faster cooperative, 4096 x 6144 x 4096 1.02x faster ping-pong: step 16);
   - a residual alone up to 32 k-blocks (its epilogue costs a tile about the same whatever k,
     and at 64 the cooperative tiles were 1.00-1.11x faster: step 14).
   Plain 16-bit GEMMs keep the cooperative tiles (0.82-1.05x). */
static int talon__gemm_pingpong_pays(int64_t m, int64_t n, int64_t k, int in_size, int gated,
                                     int epilogue, int bn, int sms) {
    const int64_t rows_b = gated ? 2 * n : n, tiles_m = (m + TALON__GEMM_BM - 1) / TALON__GEMM_BM;
    const int64_t kblocks = talon__gemm_kblocks(k, in_size);
    const int64_t tiles_256 = tiles_m * ((rows_b + 255) / 256);
    return (in_size == 1 || gated ||
            (epilogue == TALON__GEMM_EPI_ACT &&
             (kblocks <= 32 || bn != 256 || tiles_256 >= 5 * (int64_t)sms)) ||
            (epilogue == TALON__GEMM_EPI_RESIDUAL && kblocks <= 32)) &&
           kblocks <= 64 && m * rows_b <= ((int64_t)1 << 27) && tiles_m >= 2 &&
           tiles_m * ((rows_b + 127) / 128) >= 2 * (int64_t)sms;
}

/* epilogue: TALON__GEMM_EPI_*. */
static void talon__gemm_plan_make(int64_t m, int64_t n, int64_t k, int in_size, int gated,
                                  int out_f32, int block, int epilogue, int sms,
                                  talon__gemm_plan *pl) {
    static const int widths[] = {256, 192, 128};
    const int64_t tiles_m = (m + TALON__GEMM_BM - 1) / TALON__GEMM_BM;
    int64_t best = -1, cost, units, cluster, slots, cols;
    size_t i;
    pl->group = 16;
    pl->swap_rows = 0;
    pl->pingpong = 0;
    if (!gated && !out_f32 &&
        (m <= 64 || talon__gemm_swap128_pays(m, n, k, in_size, block, sms))) {
        talon__gemm_plan_swap(m, n, k, in_size, sms, pl);
        return;
    }
    pl->swap_mn = 0;
    pl->bn = 256;
    for (i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        if ((gated && widths[i] == 192) || (block && widths[i] == 192) ||
            (block && gated && widths[i] == 256 && n % 128))
            continue;
        cost = talon__gemm_cost(tiles_m, n, gated, widths[i], sms);
        if (best < 0 || cost < best) {
            best = cost;
            pl->bn = widths[i];
        }
    }
    pl->tiles_m = (int)tiles_m;
    pl->tiles_n = (int)((n + talon__gemm_tile_cols(pl->bn, gated) - 1) /
                        talon__gemm_tile_cols(pl->bn, gated));
    pl->split = pl->bn == 128 && !gated ? talon__gemm_split(tiles_m * pl->tiles_n, k, in_size, sms)
                                        : 1;
    if (pl->split > 1) {
        units = tiles_m * pl->tiles_n;
        pl->grid = (int)(pl->split * (units < sms / pl->split ? units : sms / pl->split));
        return;
    }
    if (!block && talon__gemm_pingpong_pays(m, n, k, in_size, gated, epilogue, pl->bn, sms)) {
        pl->pingpong = 1;
        pl->bn = 128;
        cols = talon__gemm_tile_cols(128, gated);
        pl->tiles_n = (int)((n + cols - 1) / cols);
    }
    cluster = pl->pingpong ? TALON__GEMM_PINGPONG_CLUSTER : TALON__GEMM_CLUSTER(pl->bn);
    units = (tiles_m + cluster - 1) / cluster * pl->tiles_n;
    slots = sms / cluster;
    pl->grid = (int)(cluster * (units < slots ? units : slots));
}

#endif
