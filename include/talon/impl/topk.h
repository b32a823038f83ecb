/* talon/impl/topk.h - top-k. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_TOPK_H
#define TALON_IMPL_TOPK_H

static talon_status talon__topk_shape(const char *op, const talon_topk_args *a, int64_t *bytes) {
    TALON__TRY(talon__check_size(op, "rows", a->rows, TALON__TOPK_ROWS_MAX));
    TALON__TRY(talon__check_size(op, "cols", a->cols, TALON__TOPK_COLS_MAX));
    *bytes = a->rows * talon__topk_row_ints(a->rows, a->cols) * 4;
    return TALON_SUCCESS;
}

talon_status talon_topk_workspace_size(talon_ctx *ctx, const talon_topk_args *a, int64_t *bytes) {
    static const char op[] = "talon_topk_workspace_size";
    TALON__TRY(talon__check_common(op, ctx, a));
    if (!bytes) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: bytes is NULL", op);
    return talon__topk_shape(op, a, bytes);
}

talon_status talon_topk(talon_ctx *ctx, CUstream stream, const talon_topk_args *a) {
    static const char op[] = "talon_topk";
    talon__topk_params p;
    int64_t need, chunk_len;
    int esize, k, small;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_dtype_f32(op, "dtype", a->dtype, &esize));
    TALON__TRY(talon__topk_shape(op, a, &need));
    TALON__TRY(talon__check_size(op, "k", a->k, TALON__TOPK_KMAX));
    if (a->k > a->cols)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->k = %lld is larger than args->cols = %lld", op,
                           (long long)a->k, (long long)a->cols);
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    if (a->sorted != 0 && a->sorted != 1)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->sorted = %d is not 0 or 1",
                           op, a->sorted);
    TALON__TRY(talon__check_ptr_align(op, "out_values", a->out_values, 0, esize));
    TALON__TRY(talon__check_ptr_align(op, "out_indices", a->out_indices, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "in", a->in, 0, esize));
    TALON__TRY(talon__check_ptr_align(op, "workspace", a->workspace, 0, 16));
    if (a->workspace_bytes < need)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->workspace_bytes = %lld is smaller than the %lld bytes "
                           "talon_topk_workspace_size asks for (rows %lld, cols %lld)",
                           op, (long long)a->workspace_bytes, (long long)need,
                           (long long)a->rows, (long long)a->cols);
    p.out_values = a->out_values; p.out_indices = a->out_indices; p.in = a->in;
    p.workspace = a->workspace;
    p.row_ints = need / (a->rows * 4);
    p.cols = (int)a->cols; p.k = (int)a->k; p.sorted = a->sorted;
    p.cap = (int)(a->cols < TALON__TOPK_CAP ? a->cols : TALON__TOPK_CAP);
    small = talon__topk_small(a->rows, a->cols);
    chunk_len = talon__topk_chunk_len(a->rows, a->cols, small, ctx->sms);
    p.chunk_len = (int)chunk_len;
    p.chunks = (int)((a->cols + chunk_len - 1) / chunk_len);
    if (small) {
        TALON__TRY(talon__pick(op, &k, TALON__B_topk_chunk_hist, 2, (int)a->dtype, 512));
        TALON__TRY(talon__launch2d(ctx, stream, op, k, p.chunks, a->rows, &p));
        TALON__TRY(talon__pick(op, &k, TALON__B_topk_chunk_select, 2, (int)a->dtype, 512));
        return talon__launch2d(ctx, stream, op, k, p.chunks, a->rows, &p);
    }
    TALON__TRY(talon__pick(op, &k, TALON__B_topk_sample, 2, (int)a->dtype, 512));
    TALON__TRY(talon__launch2d(ctx, stream, op, k, a->rows, 1, &p));
    TALON__TRY(talon__pick(op, &k, TALON__B_topk_select, 2, (int)a->dtype, 512));
    return talon__launch_ex(ctx, stream, op, k, p.chunks, a->rows, &p, 1);
}

#endif
