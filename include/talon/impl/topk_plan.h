/* talon/impl/topk_plan.h - top-k's plan: the path (chunk histograms or sampled threshold) and
   the chunk length, from the shape and the SM count alone. Pure host functions the tests call
   directly. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_TOPK_PLAN_H
#define TALON_IMPL_TOPK_PLAN_H

static int talon__topk_small(int64_t rows, int64_t cols) {
    return rows * ((cols + 4095) / 4096) <= TALON__TOPK_SMALL;
}

/* Elements per block. Chunk path: 16384, 8192 or 4096, the longest that still makes 512
   blocks (long chunks amortise a block's fixed work, short ones spread a small batch over
   many SMs; one histogram slot per 4096 elements whatever the chunk, within its 16-bit
   counts). Sampled path: c = ceil(cols / 32768) chunks per row when that makes at least 1024
   blocks (2.6 waves of 132 SMs' slots); with fewer, the c in 1 .. cols / 4096 (the fewest on a
   tie) with the least
     cost(c) = ceil(rows c / slots) x (ceil(cols / c) + 8192),   slots = SMs x TALON__TOPK_BLOCKS_PER_SM
   (the SM count is the device's, read at context creation),
   waves of resident blocks times a block's elements plus a fixed cost worth 8192 of them: a
   block streams at a latency-bound rate, so with few waves a last wave of few blocks leaves
   DRAM idle. chunk_len = ceil(cols / c) rounded up to 64 elements, so every chunk starts
   16-byte aligned in an aligned row. docs/notes/topk.md has the measurements behind both. */
static int64_t talon__topk_cost(int64_t rows, int64_t cols, int64_t c, int64_t slots) {
    return (rows * c + slots - 1) / slots * ((cols + c - 1) / c + 8192);
}
static int64_t talon__topk_chunk_len(int64_t rows, int64_t cols, int small, int sms) {
    const int64_t slots = (int64_t)sms * TALON__TOPK_BLOCKS_PER_SM;
    int64_t chunk_len, c = (cols + 32767) / 32768, i, cost, best;
    if (small) {
        for (chunk_len = 16384; chunk_len > 4096; chunk_len /= 2)
            if (rows * ((cols + chunk_len - 1) / chunk_len) >= 512) break;
        return chunk_len;
    }
    if (rows * c < 1024)
        for (c = 1, best = talon__topk_cost(rows, cols, 1, slots), i = 2; i <= cols / 4096; i++)
            if ((cost = talon__topk_cost(rows, cols, i, slots)) < best) c = i, best = cost;
    return ((cols + c - 1) / c + 63) / 64 * 64;
}

/* 4-byte words of workspace per row: on the chunk path one histogram per chunk of 4096 (two
   16-bit counts a word), then counters, candidate keys and indices, rounded to 16 bytes. */
static int64_t talon__topk_row_ints(int64_t rows, int64_t cols) {
    int64_t cap = cols < TALON__TOPK_CAP ? cols : TALON__TOPK_CAP;
    int64_t hist = talon__topk_small(rows, cols) ? (cols + 4095) / 4096 * (1 << TALON__TOPK_DIGIT) / 2
                                                 : 0;
    return (hist + TALON__TOPK_CTRS + 2 * cap + 3) / 4 * 4;
}

#endif
