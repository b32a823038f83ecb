/* talon/impl/decode.h - decode attention and merge_attention_states. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_DECODE_H
#define TALON_IMPL_DECODE_H

/* Validates the shape fields and derives the launch plan; shared by the op and its
   workspace-size function, so both agree. */
static talon_status talon__decode_plan_make(const char *op, const talon_decode_attention_args *a,
                                            int sms, talon__decode_plan *pl) {
    int64_t group, ctas, splits, hmax;
    TALON__TRY(talon__check_dtype(op, a->dtype));
    if (a->kv_dtype != a->dtype && a->kv_dtype != TALON_DTYPE_FP8_E4M3)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->kv_dtype = %d must equal args->dtype (%d) or be "
                           "TALON_DTYPE_FP8_E4M3 (%d)",
                           op, (int)a->kv_dtype, (int)a->dtype, (int)TALON_DTYPE_FP8_E4M3);
    TALON__TRY(talon__check_range(op, "batch", a->batch, 1, 1 << 24));
    TALON__TRY(talon__check_attention_heads(op, a->num_qo_heads, a->num_kv_heads, a->head_dim));
    TALON__TRY(talon__check_pages(op, a->page_size, a->max_kv_len, a->page_table_stride,
                                  &pl->pt_stride));
    TALON__TRY(talon__check_range(op, "window", a->window, 0, INT32_MAX));
    TALON__TRY(talon__check_range(op, "num_splits", a->num_splits, 0, 256));
    group = a->num_qo_heads / a->num_kv_heads;
    hmax = talon__decode_heads_max(a->head_dim);
    pl->head_chunks = (int)((group + hmax - 1) / hmax);
    pl->heads_per_cta = (int)((group + pl->head_chunks - 1) / pl->head_chunks);
    pl->gmax = 1 << talon__ceil_log2((uint64_t)pl->heads_per_cta); /* the kernels' 1, 2, 4, 8 */
    ctas = a->batch * a->num_kv_heads * pl->head_chunks;
    if (ctas > TALON__GRID_MAX)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->batch = %lld with %lld kv heads needs more than 2^31-1 CTAs",
                           op, (long long)a->batch, (long long)a->num_kv_heads);
    splits = a->num_splits ? a->num_splits : talon__decode_splits(ctas, a->max_kv_len, sms);
    /* the merge kernel's grid: 8 lanes per 8 elements of o, 128 threads a block */
    if (splits > 1 && (a->batch * a->num_qo_heads * a->head_dim + 127) / 128 > TALON__GRID_MAX)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->batch = %lld with %lld qo heads of head_dim %lld needs "
                           "more than 2^31-1 blocks to merge %lld splits", op,
                           (long long)a->batch, (long long)a->num_qo_heads,
                           (long long)a->head_dim, (long long)splits);
    pl->splits = (int)splits;
    pl->part_o_bytes = splits * a->batch * a->num_qo_heads * a->head_dim * 4;
    pl->ws_bytes = splits == 1 ? 0 : (pl->part_o_bytes + splits * a->batch * a->num_qo_heads * 4 + 15) / 16 * 16;
    return TALON_SUCCESS;
}

talon_status talon_decode_attention_workspace_size(talon_ctx *ctx,
                                                   const talon_decode_attention_args *a,
                                                   int64_t *bytes) {
    static const char op[] = "talon_decode_attention_workspace_size";
    talon__decode_plan pl;
    TALON__TRY(talon__check_common(op, ctx, a));
    if (!bytes) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: bytes is NULL", op);
    TALON__TRY(talon__decode_plan_make(op, a, ctx->sms, &pl));
    *bytes = pl.ws_bytes;
    return TALON_SUCCESS;
}

talon_status talon_decode_attention(talon_ctx *ctx, CUstream stream,
                                    const talon_decode_attention_args *a) {
    static const char op[] = "talon_decode_attention";
    const int fp8 = a && a->kv_dtype == TALON_DTYPE_FP8_E4M3;
    talon__decode_plan pl;
    talon__decode_params p;
    float sm_scale, k_scale = 1.0f, log2e = 1.4426950408889634f;
    int64_t strides[3];
    int k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr_align(op, "o", a->o, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "lse", a->lse, 1, 4));
    TALON__TRY(talon__check_ptr_align(op, "q", a->q, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "k_cache", a->k_cache, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "v_cache", a->v_cache, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "page_table", a->page_table, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "kv_lens", a->kv_lens, 0, 4));
    TALON__TRY(talon__decode_plan_make(op, a, ctx->sms, &pl));
    TALON__TRY(talon__kv_strides(op, a->layout, a->page_size, a->num_kv_heads,
                                 a->head_dim * (fp8 ? 1 : 2), strides));
    TALON__TRY(talon__check_range(op, "num_pages", a->num_pages, 0, TALON__GRID_MAX));
    if (a->num_pages * a->page_size * a->num_kv_heads >= (1LL << 32))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->num_pages = %lld makes "
                           "%lld rows of head_dim elements a cache (num_pages x page_size x "
                           "num_kv_heads), 2^32 or more", op, (long long)a->num_pages,
                           (long long)(a->num_pages * a->page_size * a->num_kv_heads));
    if (a->workspace_bytes < pl.ws_bytes)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->workspace_bytes = %lld is smaller than the %lld bytes "
                           "talon_decode_attention_workspace_size asks for (%d splits)",
                           op, (long long)a->workspace_bytes, (long long)pl.ws_bytes, pl.splits);
    TALON__TRY(talon__check_ptr_align(op, "workspace", a->workspace, pl.ws_bytes == 0, 16));
    TALON__TRY(talon__check_float(op, "sm_scale", a->sm_scale, 0, 1));
    TALON__TRY(talon__check_float(op, "logits_soft_cap", a->logits_soft_cap, 1, 1));
    if (fp8) {
        TALON__TRY(talon__check_float(op, "k_scale", a->k_scale, 1, 0));
        TALON__TRY(talon__check_float(op, "v_scale", a->v_scale, 1, 0));
        k_scale = a->k_scale;
    }
    sm_scale = a->sm_scale != 0.0f ? a->sm_scale
               : a->head_dim == 64 ? 0.125f : a->head_dim == 128 ? 0.08838834764831845f : 0.0625f;
    memset(&p, 0, sizeof p);
    p.o = a->o; p.lse = a->lse; p.q = a->q; p.k = a->k_cache; p.v = a->v_cache;
    p.page_table = a->page_table; p.kv_lens = a->kv_lens;
    if (pl.splits > 1) {
        p.part_o = a->workspace;
        p.part_lse = a->workspace + (CUdeviceptr)pl.part_o_bytes;
    }
    p.page_table_stride = pl.pt_stride;
    p.rows = a->batch * a->num_qo_heads;
    p.num_kv_heads = (int)a->num_kv_heads;
    p.group = (int)(a->num_qo_heads / a->num_kv_heads);
    p.heads_per_cta = pl.heads_per_cta;
    p.head_chunks = pl.head_chunks;
    p.page_shift = (int)talon__ceil_log2((uint64_t)a->page_size);
    p.page_rows = (int)strides[0];
    p.slot_stride = (int)strides[1]; p.head_stride = (int)strides[2];
    p.max_kv_len = (int)a->max_kv_len;
    p.window = (int)a->window;
    p.splits = pl.splits;
    p.q_scale = sm_scale * k_scale *
                (a->logits_soft_cap > 0.0f ? 1.0f / a->logits_soft_cap : log2e);
    p.cap = a->logits_soft_cap * log2e;
    p.v_scale = fp8 ? a->v_scale : 1.0f;
    TALON__TRY(talon__pick(op, &k, TALON__B_decode_heads, 4, (int)a->dtype, fp8,
                           (int)a->head_dim, pl.gmax));
    talon__check_set(ctx, &p.check, k);
    if (ctx->check) /* checked mode's page-id bound; undeclared: only negative ids are caught */
        p.page_limit = a->num_pages ? (uint32_t)a->num_pages : 0x80000000u;
    TALON__TRY(talon__launch2d(ctx, stream, op, k,
                               a->batch * a->num_kv_heads * pl.head_chunks, pl.splits, &p));
    if (pl.splits > 1) {
        talon__merge_params m;
        memset(&m, 0, sizeof m);
        m.o = a->o; m.lse = a->lse; m.v0 = p.part_o; m.s0 = p.part_lse;
        m.v_step = p.rows * a->head_dim * 4;
        m.s_step = p.rows * 4;
        m.rows = p.rows;
        m.head_dim = a->head_dim;
        m.n = pl.splits;
        TALON__TRY(talon__pick(op, &k, TALON__B_merge_splits, 1, (int)a->dtype));
        return talon__launch_ex(ctx, stream, op, k,
                                (p.rows * a->head_dim / 8 * TALON__DECODE_MERGE_LANES + 127) / 128,
                                1, &m, 1);
    }
    return TALON_SUCCESS;
}

talon_status talon_merge_attention_states(talon_ctx *ctx, CUstream stream,
                                          const talon_merge_attention_states_args *a) {
    static const char op[] = "talon_merge_attention_states";
    talon__merge_params m;
    int k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr_align(op, "o", a->o, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "lse", a->lse, 1, 4));
    TALON__TRY(talon__check_ptr_align(op, "o_a", a->o_a, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "lse_a", a->lse_a, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "o_b", a->o_b, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "lse_b", a->lse_b, 0, 4));
    TALON__TRY(talon__check_dtype(op, a->dtype));
    if (a->head_dim < 8 || a->head_dim > 4096 || a->head_dim % 8)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->head_dim = %lld is not a multiple of 8 in [8, 4096]", op,
                           (long long)a->head_dim);
    TALON__TRY(talon__check_size(op, "rows", a->rows, TALON__GRID_MAX / (4096 / 8)));
    memset(&m, 0, sizeof m);
    m.o = a->o; m.lse = a->lse; m.v0 = a->o_a; m.s0 = a->lse_a;
    /* Two arbitrary tensors are two states spaced by their difference (wraps harmlessly). */
    m.v_step = (int64_t)(a->o_b - a->o_a);
    m.s_step = (int64_t)(a->lse_b - a->lse_a);
    m.rows = a->rows;
    m.head_dim = a->head_dim;
    m.n = 2;
    TALON__TRY(talon__pick(op, &k, TALON__B_merge_states, 1, (int)a->dtype));
    return talon__launch(ctx, stream, op, k, (a->rows * a->head_dim / 8 + 127) / 128, &m);
}

#endif
