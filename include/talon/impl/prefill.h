/* talon/impl/prefill.h - prefill attention: validate -> tensor maps -> launch. Part of
   talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_PREFILL_H
#define TALON_IMPL_PREFILL_H

/* A token stride: 0 = heads * head_dim, else at least that, 16 bytes' elements apart (8
   16-bit, 16 fp8: TMA rows of 16-byte multiples; o's pairs) and at most 2^31. */
static talon_status talon__prefill_check_stride(const char *op, const char *name, int64_t v,
                                                int64_t row, int esize, int64_t *out) {
    TALON__TRY(talon__check_stride(op, name, v, row, out));
    if (*out % (16 / esize) || *out > (1LL << 31))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = %lld must be a "
                           "multiple of %d up to 2^31", op, name, (long long)*out, 16 / esize);
    return TALON_SUCCESS;
}

/* Bytes of an element of q, k and v: fp8 e4m3 1, else 2 (o: always 2) */
static int talon__prefill_esize(talon_dtype dt) { return dt == TALON_DTYPE_FP8_E4M3 ? 1 : 2; }

/* Persistent CTAs: one per SM (a CTA takes the whole register file), fewer when there are
   fewer tiles. The workspace starts with the counter of the tiles taken after the first grid
   (16 bytes: all a call without split tiles needs). */
#define TALON__PREFILL_WORKSPACE 16
static int64_t talon__prefill_grid(int64_t tiles, int sms) {
    return tiles < sms ? tiles : sms;
}

/* Split keys, a host rule: where a call's tiles fill fewer than TALON__PREFILL_SPLIT_ROUNDS
   rounds of the SMs, its last, partial round (rest = tiles % sms tiles) runs on a few SMs
   while the others idle: on the H200, 2048 new tokens over a 30000-token prefix (352 tiles of
   192 rows at GQA 32/8: 2.6 rounds) took 1907 us, 2304 new tokens (384 tiles) 2004 us. Those
   last tiles are split into `parts` pieces, each over a parts-th of the tile's key blocks; the
   last piece of a tile to finish merges the pieces' partials. The model, in tiles' time: the
   last round takes 1 unsplit, else ceil(rest parts / sms) / parts x TALON__PREFILL_SPLIT_COST
   (a piece measured 1.3-1.5x its share of a tile: the pieces of a round read more of k and v
   at once) plus 2 / blocks (a piece's start and merge); parts (2..8, at most 3 sms pieces, 4
   key blocks a piece) is the fastest, taken where it saves 3% of the call (docs/notes/
   prefill.md, step 16, on 192-row tiles: 2048 new 1.03-1.07x, 1024 new 1.18x; 512 new, 4
   pieces of 96 tiles, 1.12x slower, which the model leaves whole; the 128-row tiles that now
   serve head_dim 128 split none of those three). blocks: the key
   blocks of those last tiles, about. Over more rounds the tiles' ends spread out and the
   tail costs little (hd128 non-causal L = 8192, 10.3 rounds: about 1.5%). Returns the first
   split tile (tiles: none); *parts is 1 where none is split. */
#define TALON__PREFILL_SPLIT_ROUNDS 3
#define TALON__PREFILL_SPLIT_COST 1.3
static int64_t talon__prefill_split(int64_t tiles, int sms, int64_t blocks, int *parts) {
    const int64_t full = tiles / sms, rest = tiles % sms;
    double best = 1.0;
    int n;
    *parts = 1;
    if (full >= TALON__PREFILL_SPLIT_ROUNDS || rest == 0) return tiles;
    for (n = 2; n <= TALON__PREFILL_SPLIT_PARTS && rest * n <= 3 * (int64_t)sms && 4 * n <= blocks; n++) {
        const double last = (double)((rest * n + sms - 1) / sms) / n * TALON__PREFILL_SPLIT_COST +
                            2.0 / (double)blocks;
        if (last < best) {
            best = last;
            *parts = n;
        }
    }
    if (1.0 - best < 0.03 * (double)(full + 1)) *parts = 1;
    return *parts > 1 ? tiles - rest : tiles;
}

/* The tile order, a host rule the kernel follows: the (request, kv head) pairs are taken a
   section at a time, and within a section the query blocks from the last (under a causal mask
   the longest) across the section's pairs. The counter hands tiles out greedily, so the call
   ends on the short tiles of its last section. Pair by pair (a section of 1), the last pair's
   longest tile started when little else was left and ran on alone (SMs active 90% of a causal
   L = 8192 call). Causal: sections of at least 2 sms / (group (m_blocks + 1)) pairs, so a
   section's work per SM is at least its longest tile; as few as that, for the pairs' k/v
   (kv_bytes each) to stay within TALON__PREFILL_L2_BUDGET (40 MiB: hd256 causal, 8 MiB a pair,
   gets its 5 pairs and ran 1.03-1.05x faster than in 24 MiB's 3 on the H200, the other shapes
   within 1%; docs/notes/prefill.md). Without a causal mask a pair's tiles are equal: sections
   of 1. Returns the pairs of a section; *first gets those of the first, the remainder, so
   that the last section is a whole one. */
#define TALON__PREFILL_L2_BUDGET (40LL << 20)
static int talon__prefill_sections(int64_t pairs, int64_t m_blocks, int64_t group,
                                   int64_t kv_bytes, int causal, int sms, int *first) {
    int64_t g = 1, most;
    if (causal && m_blocks > 1) {
        g = (2 * sms + group * (m_blocks + 1) - 1) / (group * (m_blocks + 1));
        most = kv_bytes > 0 ? TALON__PREFILL_L2_BUDGET / kv_bytes : g;
        if (g > most) g = most;
        if (g > pairs) g = pairs;
        if (g < 1) g = 1;
    }
    *first = (int)(pairs - (pairs - 1) / g * g);
    return (int)g;
}

/* Query rows a tile (the kernel's BM, prefill.def), a host rule: 192 (three consumer
   warpgroups) for 16-bit q, k, v with contiguous k/v at head_dim 64 (measured on the H100
   against 128 rows: 1.00-1.21x at 512 to 8192 tokens a request, docs/notes/prefill.md), and
   for fp8 at head_dim 128 without a causal mask or window (H200: 1.02-1.08x at 512 to 8192)
   or with max_seqlen_q >= 8192 (causal: 1.03-1.04x there, 0.88-0.99x at 512 to 4096); else
   128. At head_dim 128, 192 rows served long 16-bit requests (1.07-1.12x on the H100) until the
   128-row kernel rescaled O under the next q k^T: on the H200, 128 rows then ran 1.02-1.03x
   faster causal at L = 8192 and as fast without a mask (docs/notes/prefill.md, step 20). */
static int talon__prefill_tile_rows(talon_dtype dt, int64_t head_dim, int kv, int masked,
                                    int64_t max_seqlen_q) {
    if (dt == TALON_DTYPE_FP8_E4M3)
        return head_dim == 128 && (!masked || max_seqlen_q >= 8192) ? TALON__PREFILL_BM_WIDE
                                                                    : TALON__PREFILL_BM;
    return kv == TALON__PREFILL_KV_CONTIGUOUS && head_dim == 64 ? TALON__PREFILL_BM_WIDE
                                                                : TALON__PREFILL_BM;
}

/* Producer warps that issue a paged block's TMA copies (KV_PAGES: a box per page run of
   min(page_size, bn) keys, for k and v, per 64 columns). A copy costs ~40-60 ns of issue
   whatever its size, so from 32 copies a block (pages of 16 keys at head_dim 128) the 4 warps
   of the producer warpgroup issue them side by side; with fewer, warp 0 alone, which was as
   fast or faster there (docs/notes/prefill.md step 13). */
static int talon__prefill_page_warps(int64_t page_size, int64_t head_dim, int bn) {
    const int64_t runs = page_size < bn ? bn / page_size : 1;
    return runs * 2 * (head_dim / 64) >= 32 ? 4 : 1;
}

/* Token-major [rows, heads, head_dim] of 16-bit or fp8 elements as the 3-D map {head_dim,
   heads, rows}, boxes of 128 bytes of columns (64 or 128 elements, swizzled) x 1 head x
   box_rows tokens: one box is a K-major wgmma tile. */
static talon_status talon__prefill_map(const talon_ctx *ctx, const char *op, const char *name,
                                       CUtensorMap *map, CUdeviceptr base, int64_t rows,
                                       int64_t heads, int64_t head_dim, int64_t stride,
                                       int box_rows, talon_dtype dt) {
    talon__tensor_map_shape t;
    memset(&t, 0, sizeof t);
    const int es = talon__prefill_esize(dt);
    t.type = dt == TALON_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
             : dt == TALON_DTYPE_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                     : CU_TENSOR_MAP_DATA_TYPE_UINT8;
    t.rank = 3;
    t.dims[0] = (uint64_t)head_dim; t.dims[1] = (uint64_t)heads; t.dims[2] = (uint64_t)rows;
    t.strides[0] = (uint64_t)(head_dim * es); t.strides[1] = (uint64_t)(stride * es);
    t.box[0] = (uint32_t)(128 / es); t.box[1] = 1; t.box[2] = (uint32_t)box_rows;
    t.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    return talon__tensor_map(ctx, op, name, map, base, &t);
}

/* The fields both ops share (q, o, lse, cu_seqlens_q, shapes, scalars). */
typedef struct talon__prefill_common {
    CUdeviceptr o, lse, q, cu_seqlens_q, workspace;
    int64_t workspace_bytes;
    int64_t batch, total_q, max_seqlen_q, num_qo_heads, num_kv_heads, head_dim;
    int64_t v_head_dim; /* v's and o's; 0: head_dim */
    int64_t q_stride, o_stride, window;
    int causal;
    float sm_scale, logits_soft_cap;
    talon_dtype dtype;
} talon__prefill_common;

/* A launch's tiles and workspace: the kernel's query rows a tile (talon__prefill_tile_rows),
   the tiles (m_blocks x batch x num_qo_heads), the split ones (talon__prefill_split: only where
   every request has max_seqlen_q queries, so that the tiles counted are the ones that run),
   and the workspace: the tile counter (16 bytes), a counter per warp (16 rows) of each split
   tile, zeroed with it (zeroed bytes), then from a 256-byte boundary (partials) each piece's
   partial o, maxima and sums, rows x (dv / 2 + 4) x 8 bytes. keys: a request's keys, about
   (contiguous: the mean of total_kv or max_seqlen_q, paged: max_kv_len). */
typedef struct talon__prefill_plan {
    int rows, m_blocks, split_parts;
    int64_t tiles, split_first, zeroed, partials, bytes;
} talon__prefill_plan;

static void talon__prefill_plan_of(const talon__prefill_common *a, int kv, int64_t keys, int sms,
                                   talon__prefill_plan *pl) {
    const int64_t dv = TALON__PREFILL_DV(a->head_dim);
    const int64_t bn = a->dtype == TALON_DTYPE_FP8_E4M3 ? TALON__PREFILL_FP8_BN(a->head_dim)
                                                        : TALON__PREFILL_BN(a->head_dim, kv);
    int64_t last = keys, split;
    pl->rows = talon__prefill_tile_rows(a->dtype, a->head_dim, kv, a->causal || a->window > 0,
                                        a->max_seqlen_q);
    pl->m_blocks = (int)((a->max_seqlen_q + pl->rows - 1) / pl->rows);
    pl->tiles = (int64_t)pl->m_blocks * a->batch * a->num_qo_heads;
    /* the last tiles in the order: a causal mask gives them a request's first queries */
    if (a->causal && keys - a->max_seqlen_q + pl->rows < last)
        last = (keys > a->max_seqlen_q ? keys - a->max_seqlen_q : 0) + pl->rows;
    if (a->window > 0 && a->window + pl->rows < last) last = a->window + pl->rows;
    pl->split_first = pl->tiles;
    pl->split_parts = 1;
    if (a->total_q == a->batch * a->max_seqlen_q)
        pl->split_first = talon__prefill_split(pl->tiles, sms, (last + bn - 1) / bn, &pl->split_parts);
    split = pl->tiles - pl->split_first;
    pl->zeroed = TALON__PREFILL_WORKSPACE + split * (pl->rows / 16) * 4;
    pl->partials = (pl->zeroed + 255) / 256 * 256;
    pl->bytes = split ? pl->partials + split * pl->split_parts * pl->rows * (dv / 2 + 4) * 8
                      : TALON__PREFILL_WORKSPACE;
}

/* Validates the shared fields and fills their params but q's map (no driver call: the caller
   encodes the maps after its own checks); *qs is q's token stride, *o_bytes o's span. fp8:
   whether dtype may be TALON_DTYPE_FP8_E4M3 (head_dim 128 or 256 then; the caller folds its
   scales in). m_blocks is the launch's (it depends on the kernel's rows). */
static talon_status talon__prefill_common_params(const char *op, const talon__prefill_common *a,
                                                 int fp8, talon__prefill_params *p, int64_t *qs,
                                                 int64_t *o_bytes) {
    int64_t os, q_row, o_row, m_blocks;
    const int64_t dv = a->v_head_dim ? a->v_head_dim : a->head_dim;
    float sm_scale;
    TALON__TRY(talon__check_ptr_align(op, "o", a->o, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "lse", a->lse, 1, 4));
    TALON__TRY(talon__check_ptr_align(op, "q", a->q, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "cu_seqlens_q", a->cu_seqlens_q, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "workspace", a->workspace, 0, 16));
    const int es = talon__prefill_esize(a->dtype);
    if (!fp8 || a->dtype != TALON_DTYPE_FP8_E4M3) TALON__TRY(talon__check_dtype(op, a->dtype));
    else if (a->head_dim != 128 && a->head_dim != 256)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->head_dim = %lld is not "
                           "supported with fp8 e4m3 (128, 256)", op, (long long)a->head_dim);
    TALON__TRY(talon__check_size(op, "batch", a->batch, 1 << 20));
    TALON__TRY(talon__check_size(op, "total_q", a->total_q, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "max_seqlen_q", a->max_seqlen_q, a->total_q));
    /* head_dim 64, 128, 256 with v_head_dim the same, or 192 with 128 */
    TALON__TRY(talon__check_attention_heads(op, a->num_qo_heads, a->num_kv_heads,
                                            a->head_dim == 192 ? 128 : a->head_dim));
    if (dv != TALON__PREFILL_DV(a->head_dim))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->v_head_dim = %lld must be "
                           "head_dim (or 0), or 128 with head_dim 192", op, (long long)dv);
    q_row = a->num_qo_heads * a->head_dim;
    o_row = a->num_qo_heads * dv;
    TALON__TRY(talon__prefill_check_stride(op, "q_stride", a->q_stride, q_row, es, qs));
    TALON__TRY(talon__prefill_check_stride(op, "o_stride", a->o_stride, o_row, 2, &os));
    TALON__TRY(talon__check_range(op, "window", a->window, 0, INT32_MAX));
    TALON__TRY(talon__check_range(op, "causal", a->causal, 0, 1));
    TALON__TRY(talon__check_float(op, "sm_scale", a->sm_scale, 1, 1));
    TALON__TRY(talon__check_float(op, "logits_soft_cap", a->logits_soft_cap, 1, 1));
    /* at 128 rows a tile: the most tiles any kernel takes */
    m_blocks = (a->max_seqlen_q + TALON__PREFILL_BM - 1) / TALON__PREFILL_BM;
    if (m_blocks * a->batch * a->num_qo_heads > TALON__GRID_MAX)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->max_seqlen_q = %lld with "
                           "batch %lld and %lld heads needs more than 2^31-1 CTAs", op,
                           (long long)a->max_seqlen_q, (long long)a->batch,
                           (long long)a->num_qo_heads);
    *o_bytes = talon__rows_bytes(a->total_q, o_row, os, 2);
    if (talon__overlap(a->o, *o_bytes, a->q, talon__rows_bytes(a->total_q, q_row, *qs, es)) ||
        talon__overlap(a->o, *o_bytes, a->lse, a->total_q * a->num_qo_heads * 4))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->o = 0x%llx overlaps q or lse "
                           "(outputs must not overlap inputs)", op, (unsigned long long)a->o);
    memset(p, 0, sizeof *p);
    sm_scale = a->sm_scale != 0.0f ? a->sm_scale
               : a->head_dim == 64 ? 0.125f : a->head_dim == 128 ? 0.08838834764831845f
               : a->head_dim == 192 ? 0.07216878364870322f : 0.0625f;
    p->o = a->o; p->lse = a->lse;
    p->cu_seqlens_q = a->cu_seqlens_q;
    p->tile_counter = a->workspace;
    p->o_stride = os;
    p->total_q = a->total_q;
    p->batch = (int)a->batch;
    p->num_qo_heads = (int)a->num_qo_heads;
    p->group = (int)(a->num_qo_heads / a->num_kv_heads);
    p->causal = a->causal;
    p->window = (int)a->window;
    p->scale = a->logits_soft_cap > 0.0f ? sm_scale / a->logits_soft_cap
                                         : sm_scale * 1.4426950408889634f;
    p->cap = a->logits_soft_cap * 1.4426950408889634f;
    p->o_scale = 1.0f;
    return TALON_SUCCESS;
}

/* fp8 inputs: k_scale and v_scale checked (q_scale, the caller's: 0 when q is not fp8), then
   folded into the params: the score scale times q_scale x k_scale, o times v_scale. */
static talon_status talon__prefill_fold_scales(const char *op, talon__prefill_params *p,
                                               float q_scale, float k_scale, float v_scale) {
    TALON__TRY(talon__check_float(op, "k_scale", k_scale, 1, 0));
    TALON__TRY(talon__check_float(op, "v_scale", v_scale, 1, 0));
    p->scale *= (q_scale != 0.0f ? q_scale : 1.0f) * k_scale;
    p->o_scale = v_scale;
    if (p->scale > 0.0f && p->scale - p->scale == 0.0f) return TALON_SUCCESS;
    if (q_scale != 0.0f)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->q_scale = %g and k_scale = "
                           "%g make the score scale %g (not finite and > 0)", op,
                           (double)q_scale, (double)k_scale, (double)p->scale);
    return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->k_scale = %g makes the score "
                       "scale %g (not finite and > 0)", op, (double)k_scale, (double)p->scale);
}

/* Query and key positions are int32 in the kernel: with max_seqlen_q + keys (the bound on a
   request's key count: total_kv, or max_kv_len when paged) at most TALON__PREFILL_POS_MAX, every
   position sum it forms (a tile's 192 rows or a block's 192 keys past one, minus a window)
   stays in range. A window of `keys` or more excludes no key: passed as none, so that
   pos - window cannot wrap either. */
#define TALON__PREFILL_POS_MAX ((1LL << 31) - 256)
static talon_status talon__prefill_positions(const char *op, const char *keys_name, int64_t keys,
                                             const talon__prefill_common *a,
                                             talon__prefill_params *p) {
    if (a->max_seqlen_q + keys > TALON__PREFILL_POS_MAX)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->max_seqlen_q = %lld with "
                           "args->%s = %lld: their sum must be at most 2^31 - 256 (int32 "
                           "positions)", op, (long long)a->max_seqlen_q, keys_name,
                           (long long)keys);
    if (a->window >= keys) p->window = 0;
    return TALON_SUCCESS;
}

/* Plans the tiles (talon__prefill_plan_of) for the k/v source kv (TALON__PREFILL_KV_*) and a
   request's keys, about, and checks the workspace against the plan; o_bytes: o's span. */
static talon_status talon__prefill_plan_checked(const talon_ctx *ctx, const char *op,
                                                const talon__prefill_common *a, int kv,
                                                int64_t keys, int64_t o_bytes,
                                                talon__prefill_plan *pl) {
    talon__prefill_plan_of(a, kv, keys, ctx->sms, pl);
    if (a->workspace_bytes < pl->bytes)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->workspace_bytes = %lld is "
                           "smaller than the %lld bytes the workspace size function gives for "
                           "these args", op, (long long)a->workspace_bytes, (long long)pl->bytes);
    if (talon__overlap(a->o, o_bytes, a->workspace, pl->bytes))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->o = 0x%llx overlaps the "
                           "workspace (outputs must not overlap inputs)", op,
                           (unsigned long long)a->o);
    return TALON_SUCCESS;
}

/* Encodes q's and o's maps (the k and v maps are the caller's), orders the tiles, zeroes the
   counters and launches the kernel of plan pl for the k/v source kv; kv_bytes: the bytes of k
   and v of one (request, kv head) pair, about. */
static talon_status talon__prefill_launch(talon_ctx *ctx, CUstream stream, const char *op,
                                          const talon__prefill_common *a, int64_t qs, int kv,
                                          const talon__prefill_plan *pl, int64_t kv_bytes,
                                          talon__prefill_params *p) {
    int k;
    p->exp_scale = p->cap != 0.0f ? 1.0f : p->scale; /* scale as fp8's scales left it */
    p->m_blocks = pl->m_blocks;
    p->split_first = (int)pl->split_first;
    p->split_parts = pl->split_parts;
    if (pl->split_parts > 1) /* ceil(2^32 / parts) */
        p->split_magic = (unsigned)((0x100000000ULL + (unsigned)pl->split_parts - 1) / (unsigned)pl->split_parts);
    p->section = talon__prefill_sections(a->batch * a->num_kv_heads, p->m_blocks,
                                         p->group, kv_bytes, p->causal, ctx->sms,
                                         &p->section_first);
    TALON__TRY(talon__prefill_map(ctx, op, "q", &p->q_map, a->q, a->total_q, a->num_qo_heads,
                                  a->head_dim, qs, pl->rows, a->dtype));
    TALON__TRY(talon__prefill_map(ctx, op, "o", &p->o_map, a->o, a->total_q, a->num_qo_heads,
                                  TALON__PREFILL_DV(a->head_dim), p->o_stride, 64,
                                  a->dtype == TALON_DTYPE_FP8_E4M3 ? TALON_DTYPE_BF16 : a->dtype));
    TALON__TRY(talon__pick(op, &k, TALON__B_prefill_tile, 4, (int)a->dtype, (int)a->head_dim, kv,
                           pl->rows));
    if (kv != TALON__PREFILL_KV_CONTIGUOUS) talon__check_set(ctx, &p->check, k); /* paged only */
    return talon__launch_counted(ctx, stream, op, k,
                                 talon__prefill_grid(pl->split_first + (pl->tiles - pl->split_first) *
                                                     pl->split_parts, ctx->sms),
                                 p, a->workspace, pl->zeroed / 4);
}

/* The shared fields of args a, v's head_dim dv. */
#define TALON__PREFILL_COMMON(a, dv)                                                           \
    {(a)->o, (a)->lse, (a)->q, (a)->cu_seqlens_q, (a)->workspace, (a)->workspace_bytes,        \
     (a)->batch, (a)->total_q, (a)->max_seqlen_q, (a)->num_qo_heads, (a)->num_kv_heads,        \
     (a)->head_dim, dv, (a)->q_stride, (a)->o_stride, (a)->window, (a)->causal, (a)->sm_scale, \
     (a)->logits_soft_cap, (a)->dtype}

/* A workspace size function's checks; *bytes starts at 16 (a call without split tiles). */
static talon_status talon__prefill_workspace_size(talon_ctx *ctx, const char *op, const void *args,
                                                  int64_t *bytes) {
    TALON__TRY(talon__check_common(op, ctx, args));
    if (!bytes) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: bytes is NULL", op);
    *bytes = TALON__PREFILL_WORKSPACE;
    return TALON_SUCCESS;
}
/* The plan's workspace bytes into *bytes where the shapes are ones the op may accept (the args
   are not checked yet: the others keep 16, and the op refuses them, saying why). */
static void talon__prefill_plan_bytes(const talon_ctx *ctx, const talon__prefill_common *c, int kv,
                                      int64_t keys, int64_t *bytes) {
    talon__prefill_plan pl;
    const int64_t d = c->head_dim;
    if (c->batch < 1 || c->batch > (1 << 20) || c->num_qo_heads < 1 || c->num_qo_heads > 1024 ||
        c->max_seqlen_q < 1 || c->total_q < c->max_seqlen_q || c->total_q > TALON__GRID_MAX ||
        (c->max_seqlen_q + TALON__PREFILL_BM - 1) / TALON__PREFILL_BM * c->batch * c->num_qo_heads > TALON__GRID_MAX ||
        keys < 0 || keys > TALON__PREFILL_POS_MAX || c->window < 0 || c->window > INT32_MAX ||
        (d != 64 && d != 128 && d != 192 && d != 256))
        return;
    talon__prefill_plan_of(c, kv, keys, ctx->sms, &pl);
    *bytes = pl.bytes;
}

/* A request's keys for the plan: max_seqlen_q, or the mean of total_kv where that is more */
static int64_t talon__prefill_keys(const talon_prefill_attention_args *a) {
    const int64_t mean = a->batch > 0 ? a->total_kv / a->batch : 0;
    return mean > a->max_seqlen_q ? mean : a->max_seqlen_q;
}

talon_status talon_prefill_attention_workspace_size(talon_ctx *ctx,
                                                    const talon_prefill_attention_args *a,
                                                    int64_t *bytes) {
    TALON__TRY(talon__prefill_workspace_size(ctx, "talon_prefill_attention_workspace_size", a, bytes));
    {
        const talon__prefill_common c = TALON__PREFILL_COMMON(a, a->v_head_dim);
        talon__prefill_plan_bytes(ctx, &c, TALON__PREFILL_KV_CONTIGUOUS, talon__prefill_keys(a), bytes);
    }
    return TALON_SUCCESS;
}

talon_status talon_prefill_attention(talon_ctx *ctx, CUstream stream,
                                     const talon_prefill_attention_args *a) {
    static const char op[] = "talon_prefill_attention";
    talon__prefill_params p;
    talon__prefill_plan pl;
    int64_t qs, ks, vs, k_row, v_row, o_bytes;
    TALON__TRY(talon__check_common(op, ctx, a));
    {
        const talon__prefill_common c = TALON__PREFILL_COMMON(a, a->v_head_dim);
        TALON__TRY(talon__check_ptr_align(op, "k", a->k, 0, 16));
        TALON__TRY(talon__check_ptr_align(op, "v", a->v, 0, 16));
        TALON__TRY(talon__check_ptr_align(op, "cu_seqlens_k", a->cu_seqlens_k, 0, 4));
        TALON__TRY(talon__check_size(op, "total_kv", a->total_kv, TALON__GRID_MAX));
        const int es = talon__prefill_esize(a->dtype);
        const int bn = es == 1 ? TALON__PREFILL_FP8_BN(a->head_dim)
                               : TALON__PREFILL_BN(a->head_dim, TALON__PREFILL_KV_CONTIGUOUS);
        TALON__TRY(talon__prefill_common_params(op, &c, 1, &p, &qs, &o_bytes));
        if (a->dtype == TALON_DTYPE_FP8_E4M3) {
            TALON__TRY(talon__check_float(op, "q_scale", a->q_scale, 1, 0));
            TALON__TRY(talon__prefill_fold_scales(op, &p, a->q_scale, a->k_scale, a->v_scale));
        }
        TALON__TRY(talon__prefill_positions(op, "total_kv", a->total_kv, &c, &p));
        k_row = a->num_kv_heads * a->head_dim;
        v_row = a->num_kv_heads * TALON__PREFILL_DV(a->head_dim);
        TALON__TRY(talon__prefill_check_stride(op, "k_stride", a->k_stride, k_row, es, &ks));
        TALON__TRY(talon__prefill_check_stride(op, "v_stride", a->v_stride, v_row, es, &vs));
        if (talon__overlap(a->o, o_bytes, a->k, talon__rows_bytes(a->total_kv, k_row, ks, es)) ||
            talon__overlap(a->o, o_bytes, a->v, talon__rows_bytes(a->total_kv, v_row, vs, es)))
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->o = 0x%llx overlaps k "
                               "or v (outputs must not overlap inputs)", op,
                               (unsigned long long)a->o);
        TALON__TRY(talon__prefill_plan_checked(ctx, op, &c, TALON__PREFILL_KV_CONTIGUOUS,
                                               talon__prefill_keys(a), o_bytes, &pl));
        TALON__TRY(talon__prefill_map(ctx, op, "k", &p.k_map, a->k, a->total_kv, a->num_kv_heads,
                                      a->head_dim, ks, bn, a->dtype));
        TALON__TRY(talon__prefill_map(ctx, op, "v", &p.v_map, a->v, a->total_kv, a->num_kv_heads,
                                      TALON__PREFILL_DV(a->head_dim), vs, bn, a->dtype));
        p.cu_seqlens_k = a->cu_seqlens_k;
        return talon__prefill_launch(ctx, stream, op, &c, qs, TALON__PREFILL_KV_CONTIGUOUS, &pl,
                                     talon__prefill_keys(a) * (a->head_dim + TALON__PREFILL_DV(a->head_dim)) * es,
                                     &p);
    }
}

/* How the paged kernel reads the caches: one TMA box per page and 64 columns for pages of 16
   keys and more (at most 16 boxes a block: measured faster than the gather, docs/notes/
   prefill.md), else rows gathered by cp.async (a box per page of 1-8 keys costs more TMA issue
   than the block's math). Gather also when a map's rows would pass the kernel's int32
   coordinates. */
static int talon__prefill_paged_source(int64_t page_size, int64_t num_pages, int64_t num_kv_heads,
                                       talon_kv_layout layout) {
    /* map rows: num_pages x this (divided, not multiplied: the workspace size function passes
       args not yet checked) */
    const int64_t per_page = layout == TALON_KV_NHD ? page_size : num_kv_heads;
    return page_size >= 16 && per_page > 0 && num_pages <= INT32_MAX / per_page
               ? TALON__PREFILL_KV_PAGES
               : TALON__PREFILL_KV_GATHER;
}

/* The k/v source of a paged call: fp8 caches widened, else by talon__prefill_paged_source. */
static int talon__prefill_paged_kv(const talon_prefill_attention_paged_args *a) {
    return a->kv_dtype == TALON_DTYPE_FP8_E4M3
               ? TALON__PREFILL_KV_WIDEN
               : talon__prefill_paged_source(a->page_size, a->num_pages, a->num_kv_heads, a->layout);
}

talon_status talon_prefill_attention_paged_workspace_size(
    talon_ctx *ctx, const talon_prefill_attention_paged_args *a, int64_t *bytes) {
    TALON__TRY(talon__prefill_workspace_size(ctx, "talon_prefill_attention_paged_workspace_size", a,
                                             bytes));
    {
        const talon__prefill_common c = TALON__PREFILL_COMMON(a, a->head_dim);
        talon__prefill_plan_bytes(ctx, &c, talon__prefill_paged_kv(a), a->max_kv_len, bytes);
    }
    return TALON_SUCCESS;
}

/* A paged cache as the map of KV_PAGES (prefill.def): NHD [pages, page_size, Hk, d] as {d, Hk,
   pages * page_size}, box {64, 1, rows}; HND [pages, Hk, page_size, d] as {d, page_size,
   pages * Hk}, box {64, rows, 1}. */
static talon_status talon__prefill_cache_map(const talon_ctx *ctx, const char *op,
                                             const char *name, CUtensorMap *map, CUdeviceptr base,
                                             const talon_prefill_attention_paged_args *a,
                                             int rows) {
    talon__tensor_map_shape t;
    const int nhd = a->layout == TALON_KV_NHD;
    memset(&t, 0, sizeof t);
    t.type = a->dtype == TALON_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                          : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    t.rank = 3;
    t.dims[0] = (uint64_t)a->head_dim;
    t.dims[1] = (uint64_t)(nhd ? a->num_kv_heads : a->page_size);
    t.dims[2] = (uint64_t)(nhd ? a->num_pages * a->page_size : a->num_pages * a->num_kv_heads);
    t.strides[0] = (uint64_t)(a->head_dim * 2);
    t.strides[1] = (uint64_t)((nhd ? a->num_kv_heads : a->page_size) * a->head_dim * 2);
    t.box[0] = 64;
    t.box[1] = nhd ? 1u : (uint32_t)rows;
    t.box[2] = nhd ? (uint32_t)rows : 1u;
    t.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    return talon__tensor_map(ctx, op, name, map, base, &t);
}

talon_status talon_prefill_attention_paged(talon_ctx *ctx, CUstream stream,
                                           const talon_prefill_attention_paged_args *a) {
    static const char op[] = "talon_prefill_attention_paged";
    talon__prefill_params p;
    talon__prefill_plan pl;
    int64_t strides[3], qs, pt_stride, o_bytes, cache_bytes;
    int kv, fp8, cache_es;
    TALON__TRY(talon__check_common(op, ctx, a));
    fp8 = a->kv_dtype == TALON_DTYPE_FP8_E4M3;
    cache_es = fp8 ? 1 : 2; /* bytes of a cache element */
    {
        const talon__prefill_common c = TALON__PREFILL_COMMON(a, a->head_dim);
        if (a->head_dim == 192) /* the caches have one head_dim */
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->head_dim = 192 is not "
                               "supported with a paged cache (64, 128, 256)", op);
        TALON__TRY(talon__check_ptr_align(op, "k_cache", a->k_cache, 0, 16));
        TALON__TRY(talon__check_ptr_align(op, "v_cache", a->v_cache, 0, 16));
        TALON__TRY(talon__check_ptr_align(op, "page_table", a->page_table, 0, 4));
        TALON__TRY(talon__check_ptr_align(op, "kv_lens", a->kv_lens, 0, 4));
        TALON__TRY(talon__prefill_common_params(op, &c, 0, &p, &qs, &o_bytes));
        if (a->kv_dtype != 0 && a->kv_dtype != a->dtype && !fp8)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->kv_dtype = %d must be 0 "
                               "or args->dtype (%d): the caches hold dtype, or %d: fp8 e4m3",
                               op, (int)a->kv_dtype, (int)a->dtype, (int)TALON_DTYPE_FP8_E4M3);
        if (fp8) {
            TALON__TRY(talon__prefill_fold_scales(op, &p, 0.0f, a->k_scale, a->v_scale));
        }
        TALON__TRY(talon__check_pages(op, a->page_size, a->max_kv_len, a->page_table_stride,
                                      &pt_stride));
        TALON__TRY(talon__prefill_positions(op, "max_kv_len", a->max_kv_len, &c, &p));
        TALON__TRY(talon__check_size(op, "num_pages", a->num_pages, TALON__GRID_MAX));
        TALON__TRY(talon__kv_strides(op, a->layout, a->page_size, a->num_kv_heads, 1, strides));
        if (a->num_pages * a->page_size * a->num_kv_heads >= (1LL << 32))
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->num_pages = %lld makes "
                               "%lld rows of head_dim elements a cache (num_pages x page_size x "
                               "num_kv_heads), 2^32 or more", op, (long long)a->num_pages,
                               (long long)(a->num_pages * a->page_size * a->num_kv_heads));
        cache_bytes = a->num_pages * a->page_size * a->num_kv_heads * a->head_dim * cache_es;
        if (talon__overlap(a->o, o_bytes, a->k_cache, cache_bytes) ||
            talon__overlap(a->o, o_bytes, a->v_cache, cache_bytes))
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->o = 0x%llx overlaps "
                               "k_cache or v_cache (outputs must not overlap inputs)", op,
                               (unsigned long long)a->o);
        p.page_table = a->page_table;
        p.kv_lens = a->kv_lens;
        p.k_cache = a->k_cache;
        p.v_cache = a->v_cache;
        p.page_table_stride = pt_stride;
        p.num_pages = (int)a->num_pages;
        p.page_shift = (int)talon__ceil_log2((uint64_t)a->page_size);
        p.layout = (int)a->layout;
        p.max_kv_len = (int)a->max_kv_len;
        kv = talon__prefill_paged_kv(a);
        TALON__TRY(talon__prefill_plan_checked(ctx, op, &c, kv, a->max_kv_len, o_bytes, &pl));
        if (kv == TALON__PREFILL_KV_PAGES) {
            const int bn = TALON__PREFILL_BN(a->head_dim, TALON__PREFILL_KV_PAGES);
            const int page_rows = (int)TALON__PREFILL_PAGE_ROWS(a->page_size, bn);
            p.page_warps = talon__prefill_page_warps(a->page_size, a->head_dim, bn);
            TALON__TRY(talon__prefill_cache_map(ctx, op, "k_cache", &p.k_map, a->k_cache, a,
                                                page_rows));
            TALON__TRY(talon__prefill_cache_map(ctx, op, "v_cache", &p.v_map, a->v_cache, a,
                                                page_rows));
        }
        return talon__prefill_launch(ctx, stream, op, &c, qs, kv, &pl,
                                     a->max_kv_len * 2 * a->head_dim * cache_es, &p);
    }
}

#endif
