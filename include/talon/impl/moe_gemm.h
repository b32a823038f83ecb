/* talon/impl/moe_gemm.h - the MoE expert GEMMs and the grouped GEMM: validate -> plan
   (moe_gemm_plan.h) -> tensor maps -> launch. Part of talon.h's implementation
   (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_MOE_GEMM_H
#define TALON_IMPL_MOE_GEMM_H

/* Rows of a matrix in layout `rows` (TALON_MOE_ROWS_*). */
static int64_t talon__moe_rows_count(talon_moe_rows rows, const talon_moe_gemm_args *a) {
    return rows == TALON_MOE_ROWS_SORTED ? a->sorted_capacity
           : rows == TALON_MOE_ROWS_TOKEN ? a->tokens : a->tokens * a->topk;
}

static talon_status talon__moe_gemm_check_rows(const char *op, const char *name, int v,
                                               int allow_token) {
    if (v == TALON_MOE_ROWS_SORTED || v == TALON_MOE_ROWS_PAIR ||
        (allow_token && v == TALON_MOE_ROWS_TOKEN))
        return TALON_SUCCESS;
    return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = %d must be "
                       "TALON_MOE_ROWS_SORTED (0)%s or PAIR (2)", op, name, v,
                       allow_token ? ", TOKEN (1)" : "");
}

/* The capacities cover moe_align's worst case for (tokens, topk, experts, 128). */
static talon_status talon__moe_gemm_check_capacity(const char *op, const talon_moe_gemm_args *a) {
    int64_t sorted, blocks;
    talon__moe_align_worst(a->tokens, a->topk, a->experts, 128, &sorted, &blocks);
    if (a->sorted_capacity < sorted || a->sorted_capacity > TALON__GRID_MAX)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->sorted_capacity = %lld "
                           "is out of range [%lld, 2^31) for tokens = %lld, topk = %lld, "
                           "experts = %lld (talon_moe_align_block_size_capacity)", op,
                           (long long)a->sorted_capacity, (long long)sorted,
                           (long long)a->tokens, (long long)a->topk, (long long)a->experts);
    if (a->expert_ids_capacity < blocks || a->expert_ids_capacity > (1 << 24))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->expert_ids_capacity = "
                           "%lld is out of range [%lld, 2^24] for tokens = %lld, topk = %lld, "
                           "experts = %lld (talon_moe_align_block_size_capacity)", op,
                           (long long)a->expert_ids_capacity, (long long)blocks,
                           (long long)a->tokens, (long long)a->topk, (long long)a->experts);
    return TALON_SUCCESS;
}

/* Both ops' activation: CLAMPED_SWIGLU gated only, its alpha finite and > 0 and its limit > 0
   (+inf: no clamping); the other acts with both 0. */
static talon_status talon__moe_gemm_check_act(const char *op, talon_gemm_act act, int gated,
                                              float alpha, float limit) {
    typedef char same_act[TALON_GEMM_ACT_CLAMPED_SWIGLU == TALON__MOE_ACT_CLAMPED_SWIGLU ? 1 : -1];
    (void)sizeof(same_act);
    TALON__TRY(talon__check_range(op, "act", (int64_t)(int)act, TALON_GEMM_ACT_NONE,
                                  TALON_GEMM_ACT_CLAMPED_SWIGLU));
    if (act != TALON_GEMM_ACT_CLAMPED_SWIGLU) {
        if (alpha != 0.0f || limit != 0.0f)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = %g must be 0 with "
                               "args->act = %d (it is TALON_GEMM_ACT_CLAMPED_SWIGLU's)", op,
                               alpha != 0.0f ? "act_alpha" : "act_limit",
                               (double)(alpha != 0.0f ? alpha : limit), (int)act);
        return TALON_SUCCESS;
    }
    if (!gated)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->act = "
                           "TALON_GEMM_ACT_CLAMPED_SWIGLU (5) needs args->gated = 1, not %d (it "
                           "combines the gate and up rows)", op, gated);
    TALON__TRY(talon__check_float(op, "act_alpha", alpha, 1, 0));
    if (!(limit > 0.0f))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->act_limit = %g must be > 0 "
                           "(+inf: no clamping)", op, (double)limit);
    return TALON_SUCCESS;
}

/* Both ops' operand rules: n, k, gated, act (alpha, limit), the strides (resolved into *lda,
   *ldb, *ldd; a's and b's rows 16 bytes apart: elements of isize bytes), the three matrices'
   pointers and the optional bias's. */
static talon_status talon__moe_gemm_check_operands(const char *op, int64_t n, int64_t k, int gated,
                                                   talon_gemm_act act, float alpha, float limit,
                                                   int isize, int64_t lda_in,
                                                   int64_t ldb_in, int64_t ldd_in, CUdeviceptr d,
                                                   CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias,
                                                   int64_t *lda, int64_t *ldb, int64_t *ldd) {
    TALON__TRY(talon__gemm_check_dim(op, "n", n));
    TALON__TRY(talon__gemm_check_dim(op, "k", k));
    TALON__TRY(talon__check_range(op, "gated", gated, 0, 1));
    TALON__TRY(talon__moe_gemm_check_act(op, act, gated, alpha, limit));
    TALON__TRY(talon__gemm_check_ld(op, "lda", lda_in, k, 16 / isize, lda));
    TALON__TRY(talon__gemm_check_ld(op, "ldb", ldb_in, k, 16 / isize, ldb));
    TALON__TRY(talon__gemm_check_ld(op, "ldd", ldd_in, n, 8, ldd));
    TALON__TRY(talon__check_ptr_align(op, "d", d, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "a", a, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "b", b, 0, 16));
    return talon__check_ptr_align(op, "bias", bias, 1, 4);
}

/* Both ops' end: b's tensor maps ([groups, n, k] views, gated: of the gate rows and of the
   up rows; boxes of bn / 2 rows), the plan's fields, the kernel of (dtype, bn, gated, sc: fp8
   scales per tensor or row, applied in the epilogue). */
static talon_status talon__moe_gemm_launch(talon_ctx *ctx, CUstream stream, const char *op,
                                           talon__moe_gemm_params *p,
                                           const talon__moe_gemm_plan *pl, CUdeviceptr b,
                                           int64_t n, int64_t k, int64_t ldb, int gated,
                                           talon_dtype dtype, int sc) {
    const int64_t b_rows = (gated ? 2 : 1) * n;
    const int box = pl->swap_rows ? 128 : pl->bn / 2; /* rows of one half-tile (swap: of b) */
    int kernel;
    TALON__TRY(talon__gemm_map_batched(ctx, op, "b", &p->b_lo, b, n, k, ldb, box, dtype,
                                       p->experts, b_rows * ldb));
    if (gated)
        TALON__TRY(talon__gemm_map_batched(ctx, op, "b", &p->b_hi,
                                           b + (CUdeviceptr)(n * ldb * talon__gemm_esize(dtype)),
                                           n, k, ldb, box, dtype, p->experts, b_rows * ldb));
    else
        p->b_hi = p->b_lo;
    p->n = (int)n; p->k = (int)k;
    p->blocks = pl->blocks; p->tiles_n = pl->tiles_n; p->group = pl->group;
    p->skip_padding = pl->skip_padding;
    if (pl->swap_rows)
        TALON__TRY(talon__pick(op, &kernel, TALON__B_moe_gemm_swap, 4, (int)dtype, pl->swap_rows,
                               gated, sc));
    else
        TALON__TRY(talon__pick(op, &kernel, TALON__B_moe_gemm_tile, 4, (int)dtype, pl->bn, gated,
                               sc));
    talon__check_set(ctx, &p->check, kernel);
    /* a programmatic dependent of the stream's previous kernel (talon.h) */
    return talon__launch_ex(ctx, stream, op, kernel, pl->grid, 1, p, 1);
}

/* Both ops' types: bf16/f16 without scales, or fp8 with TENSOR, ROW or BLOCK scales; then
   the dense GEMM's rules. */
static talon_status talon__moe_gemm_check_types(const char *op, talon_dtype dtype,
                                                talon_gemm_scale scale, CUdeviceptr a_scale,
                                                CUdeviceptr b_scale, int gated, int64_t n) {
    if (dtype == TALON_DTYPE_FP8_E4M3 && scale != TALON_GEMM_SCALE_TENSOR &&
        scale != TALON_GEMM_SCALE_ROW && scale != TALON_GEMM_SCALE_BLOCK)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->scale = %d must be "
                           "TALON_GEMM_SCALE_TENSOR (1), ROW (2) or BLOCK (3) with fp8 inputs",
                           op, (int)scale);
    return talon__gemm_check_inputs(op, dtype, scale, a_scale, b_scale, gated, n);
}

/* fp8: b_scale's floats per group (expert) of b_rows rows: BLOCK [ceil(b_rows / 128),
   ceil(k / 128)], ROW one per row, TENSOR one. */
static int64_t talon__moe_gemm_b_scales(talon_gemm_scale scale, int64_t b_rows, int64_t k) {
    return scale == TALON_GEMM_SCALE_BLOCK ? (b_rows + 127) / 128 * ((k + 127) / 128)
           : scale == TALON_GEMM_SCALE_ROW ? b_rows : 1;
}

/* fp8: a_scale's floats over rows of a: BLOCK [ceil(k / 128), rows rounded up to 4], ROW one
   per row, TENSOR one. */
static int64_t talon__moe_gemm_a_scales(talon_gemm_scale scale, int64_t rows, int64_t k) {
    return scale == TALON_GEMM_SCALE_BLOCK ? (k + 127) / 128 * ((rows + 3) / 4 * 4)
           : scale == TALON_GEMM_SCALE_ROW ? rows : 1;
}

/* fp8's scale fields of the params over rows of a (rows4: rounded up to 4) and b_rows rows
   of b per group. */
static void talon__moe_gemm_scales(talon__moe_gemm_params *p, talon_gemm_scale scale,
                                   CUdeviceptr a_scale, CUdeviceptr b_scale, int64_t rows,
                                   int64_t b_rows, int64_t k) {
    p->a_scale = a_scale; p->b_scale = b_scale;
    p->a_scale_ld = (rows + 3) / 4 * 4; p->b_scale_ld = (int)((k + 127) / 128);
    p->b_scale_expert = talon__moe_gemm_b_scales(scale, b_rows, k);
    p->scale_rows = (int)rows;
    p->a_scale_step = p->b_scale_step = scale == TALON_GEMM_SCALE_ROW;
}

talon_status talon_moe_gemm(talon_ctx *ctx, CUstream stream, const talon_moe_gemm_args *a) {
    static const char op[] = "talon_moe_gemm";
    talon__moe_gemm_params p;
    talon__moe_gemm_plan pl;
    int64_t lda, ldb, ldd, a_rows, d_rows, b_rows;
    CUdeviceptr sd[2], s[2];
    int isize, fp8, block;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__moe_gemm_check_types(op, a->dtype, a->scale, a->a_scale, a->b_scale,
                                           a->gated, a->n));
    isize = talon__gemm_esize(a->dtype);
    fp8 = isize == 1;
    block = fp8 && a->scale == TALON_GEMM_SCALE_BLOCK;
    TALON__TRY(talon__moe_gemm_check_rows(op, "a_rows", (int)a->a_rows, 1));
    TALON__TRY(talon__moe_gemm_check_rows(op, "d_rows", (int)a->d_rows, 0));
    TALON__TRY(talon__check_size(op, "tokens", a->tokens, 65536));
    TALON__TRY(talon__check_size(op, "topk", a->topk, 64));
    TALON__TRY(talon__check_size(op, "experts", a->experts, TALON__MOE_MAX_EXPERTS));
    if (a->block_size != 128)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->block_size = %lld must "
                           "be 128 (the tile's rows)", op, (long long)a->block_size);
    TALON__TRY(talon__moe_gemm_check_capacity(op, a));
    TALON__TRY(talon__moe_gemm_check_operands(op, a->n, a->k, a->gated, a->act, a->act_alpha,
                                              a->act_limit, isize, a->lda, a->ldb, a->ldd, a->d,
                                              a->a, a->b, a->bias, &lda, &ldb, &ldd));
    TALON__TRY(talon__check_ptr_align(op, "sorted_token_ids", a->sorted_token_ids, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "expert_ids", a->expert_ids, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "num_tokens_post_padded", a->num_tokens_post_padded,
                                      0, 4));
    TALON__TRY(talon__check_ptr_align(op, "topk_weights", a->topk_weights, 1, 4));
    a_rows = talon__moe_rows_count(a->a_rows, a);
    d_rows = talon__moe_rows_count(a->d_rows, a);
    b_rows = (a->gated ? 2 : 1) * a->n;
    talon__gemm_span(a->d, d_rows, a->n, ldd, 2, sd);
    talon__gemm_span(a->a, a_rows, a->k, lda, isize, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "a", a->a, s));
    talon__gemm_span(a->b, a->experts * b_rows, a->k, ldb, isize, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "b", a->b, s));
    talon__gemm_span(a->bias, a->experts, b_rows, b_rows, 2, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "bias", a->bias, s));
    talon__gemm_span(a->a_scale, 1, talon__moe_gemm_a_scales(a->scale, a_rows, a->k), 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "a_scale", a->a_scale, s));
    talon__gemm_span(a->b_scale, 1, a->experts * talon__moe_gemm_b_scales(a->scale, b_rows, a->k),
                     1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "b_scale", a->b_scale, s));
    talon__gemm_span(a->sorted_token_ids, 1, a->sorted_capacity, 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "sorted_token_ids", a->sorted_token_ids, s));
    talon__gemm_span(a->expert_ids, 1, a->expert_ids_capacity, 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "expert_ids", a->expert_ids, s));
    talon__gemm_span(a->num_tokens_post_padded, 1, 1, 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "num_tokens_post_padded",
                                          a->num_tokens_post_padded, s));
    talon__gemm_span(a->topk_weights, 1, a->tokens * a->topk, 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "topk_weights", a->topk_weights, s));

    talon__moe_gemm_plan_make(a->tokens, a->topk, a->experts, a->n, a->gated, block,
                              a->sorted_capacity, a->expert_ids_capacity,
                              a->a_rows == TALON_MOE_ROWS_SORTED &&
                                  a->d_rows == TALON_MOE_ROWS_SORTED,
                              ctx->sms, &pl);
    if ((int64_t)pl.blocks * pl.tiles_n > (1LL << 30)) /* the kernel's int tile indices */
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->n = %lld with "
                           "args->sorted_capacity = %lld makes %lld tiles, more than 2^30", op,
                           (long long)a->n, (long long)a->sorted_capacity,
                           (long long)pl.blocks * pl.tiles_n);
    memset(&p, 0, sizeof p);
    /* a SORTED: 128-row boxes (a gathered a, and every a of the transposed kernel, is read
       by pointer); d SORTED: 64-row boxes (transposed: a chunk's rows) */
    if (a->a_rows == TALON_MOE_ROWS_SORTED && !pl.swap_rows)
        TALON__TRY(talon__gemm_map(ctx, op, "a", &p.a, a->a, a_rows, a->k, lda, TALON__GEMM_BM,
                                   a->dtype));
    if (a->d_rows == TALON_MOE_ROWS_SORTED)
        TALON__TRY(talon__gemm_map(ctx, op, "d", &p.d_map, a->d, d_rows, a->n, ldd,
                                   pl.swap_rows ? pl.swap_rows : 64,
                                   fp8 ? TALON_DTYPE_BF16 : a->dtype));
    p.a_ptr = a->a; p.d = a->d;
    p.sorted_token_ids = a->sorted_token_ids; p.expert_ids = a->expert_ids;
    p.num_post = a->num_tokens_post_padded; p.topk_weights = a->topk_weights;
    p.lda = lda; p.ldd = ldd;
    p.experts = (int)a->experts; p.topk = (int)a->topk; p.pairs = (int)(a->tokens * a->topk);
    p.a_rows = (int)a->a_rows; p.d_rows = (int)a->d_rows; p.act = (int)a->act;
    p.bias = a->bias; p.act_alpha = a->act_alpha; p.act_limit = a->act_limit;
    p.layout = TALON__MOE_LAYOUT_ALIGNED;
    if (fp8) talon__moe_gemm_scales(&p, a->scale, a->a_scale, a->b_scale, a_rows, b_rows, a->k);
    return talon__moe_gemm_launch(ctx, stream, op, &p, &pl, a->b, a->n, a->k, ldb, a->gated,
                                  a->dtype, fp8 && !block);
}

/* talon_grouped_gemm's rules: the pointers of its layout given, the other layout's 0. */
static talon_status talon__grouped_gemm_check_layout(const char *op,
                                                     const talon_grouped_gemm_args *a) {
    const int masked = a->layout == TALON_GROUPED_MASKED;
    TALON__TRY(talon__check_range(op, "layout", (int64_t)(int)a->layout,
                                  TALON_GROUPED_CONTIGUOUS, TALON_GROUPED_MASKED));
    TALON__TRY(talon__check_ptr_align(op, "tile_groups", a->tile_groups, masked, 4));
    TALON__TRY(talon__check_ptr_align(op, "rows_used", a->rows_used, 1, 4));
    TALON__TRY(talon__check_ptr_align(op, "group_rows", a->group_rows, !masked, 4));
    if (masked && (a->tile_groups || a->rows_used))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = 0x%llx must be NULL "
                           "with TALON_GROUPED_MASKED (it is the contiguous layout's)", op,
                           a->tile_groups ? "tile_groups" : "rows_used",
                           (unsigned long long)(a->tile_groups ? a->tile_groups : a->rows_used));
    if (!masked && a->group_rows)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->group_rows = 0x%llx must "
                           "be NULL with TALON_GROUPED_CONTIGUOUS (it is the masked layout's)",
                           op, (unsigned long long)a->group_rows);
    if (masked) {
        TALON__TRY(talon__check_range(op, "rows", a->rows, 1, 1 << 20));
        if (a->groups * a->rows > TALON__GRID_MAX)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->rows = %lld with "
                               "args->groups = %lld makes %lld rows, 2^31 or more", op,
                               (long long)a->rows, (long long)a->groups,
                               (long long)(a->groups * a->rows));
        return TALON_SUCCESS;
    }
    TALON__TRY(talon__check_range(op, "rows", a->rows, 128, TALON__GRID_MAX - 127));
    if (a->rows % 128)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->rows = %lld must be a "
                           "multiple of 128 with TALON_GROUPED_CONTIGUOUS (one group per "
                           "128-row tile)", op, (long long)a->rows);
    return TALON_SUCCESS;
}

talon_status talon_grouped_gemm(talon_ctx *ctx, CUstream stream, const talon_grouped_gemm_args *a) {
    static const char op[] = "talon_grouped_gemm";
    talon__moe_gemm_params p;
    talon__moe_gemm_plan pl;
    int64_t lda, ldb, ldd, rows, b_rows;
    CUdeviceptr sd[2], s[2];
    int isize, fp8, block;
    talon_dtype out_dtype;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__moe_gemm_check_types(op, a->dtype, a->scale, a->a_scale, a->b_scale,
                                           a->gated, a->n));
    isize = talon__gemm_esize(a->dtype);
    fp8 = isize == 1;
    block = fp8 && a->scale == TALON_GEMM_SCALE_BLOCK;
    out_dtype = fp8 ? TALON_DTYPE_BF16 : a->dtype;
    TALON__TRY(talon__check_size(op, "groups", a->groups, 65536));
    TALON__TRY(talon__grouped_gemm_check_layout(op, a));
    TALON__TRY(talon__moe_gemm_check_operands(op, a->n, a->k, a->gated, a->act, a->act_alpha,
                                              a->act_limit, isize, a->lda, a->ldb, a->ldd, a->d,
                                              a->a, a->b, a->bias, &lda, &ldb, &ldd));
    /* a and d as [rows, .] matrices (MASKED: the groups' blocks of rows back to back) */
    rows = a->layout == TALON_GROUPED_MASKED ? a->groups * a->rows : a->rows;
    b_rows = (a->gated ? 2 : 1) * a->n;
    talon__gemm_span(a->d, rows, a->n, ldd, 2, sd);
    talon__gemm_span(a->a, rows, a->k, lda, isize, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "a", a->a, s));
    talon__gemm_span(a->b, a->groups * b_rows, a->k, ldb, isize, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "b", a->b, s));
    talon__gemm_span(a->bias, a->groups, b_rows, b_rows, 2, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "bias", a->bias, s));
    talon__gemm_span(a->a_scale, 1, talon__moe_gemm_a_scales(a->scale, rows, a->k), 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "a_scale", a->a_scale, s));
    talon__gemm_span(a->b_scale, 1, a->groups * talon__moe_gemm_b_scales(a->scale, b_rows, a->k),
                     1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "b_scale", a->b_scale, s));
    talon__gemm_span(a->tile_groups, 1, a->rows / 128, 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "tile_groups", a->tile_groups, s));
    talon__gemm_span(a->rows_used, 1, 1, 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "rows_used", a->rows_used, s));
    talon__gemm_span(a->group_rows, 1, a->groups, 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "group_rows", a->group_rows, s));

    talon__grouped_gemm_plan_make(a->layout, a->groups, a->rows, a->n, a->gated, block,
                                  ctx->sms, &pl);
    if ((int64_t)pl.blocks * pl.tiles_n > (1LL << 30)) /* the kernel's int tile indices */
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->n = %lld with args->rows "
                           "= %lld makes %lld tiles, more than 2^30", op, (long long)a->n,
                           (long long)a->rows, (long long)pl.blocks * pl.tiles_n);
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__gemm_map(ctx, op, "a", &p.a, a->a, rows, a->k, lda, TALON__GEMM_BM,
                               a->dtype));
    TALON__TRY(talon__gemm_map(ctx, op, "d", &p.d_map, a->d, rows, a->n, ldd, 64, out_dtype));
    p.a_ptr = a->a; p.d = a->d;
    p.expert_ids = a->tile_groups; p.num_post = a->rows_used; p.group_rows = a->group_rows;
    p.lda = lda; p.ldd = ldd;
    p.experts = (int)a->groups;
    p.a_rows = TALON__MOE_ROWS_SORTED; p.d_rows = TALON__MOE_ROWS_SORTED; p.act = (int)a->act;
    p.bias = a->bias; p.act_alpha = a->act_alpha; p.act_limit = a->act_limit;
    p.layout = a->layout == TALON_GROUPED_MASKED ? TALON__MOE_LAYOUT_MASKED
                                                 : TALON__MOE_LAYOUT_CONTIGUOUS;
    p.group_size = a->layout == TALON_GROUPED_MASKED ? (int)a->rows : 0;
    if (fp8) talon__moe_gemm_scales(&p, a->scale, a->a_scale, a->b_scale, rows, b_rows, a->k);
    return talon__moe_gemm_launch(ctx, stream, op, &p, &pl, a->b, a->n, a->k, ldb, a->gated,
                                  a->dtype, fp8 && !block);
}

#endif
