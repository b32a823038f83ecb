/* talon/impl/act.h - gated activations. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_ACT_H
#define TALON_IMPL_ACT_H

/* ---------------------------------------------------------------- gated activations */
static talon_status talon__gated(talon_ctx *ctx, CUstream stream, const char *op,
                                 talon__body body, CUdeviceptr out, CUdeviceptr in,
                                 int64_t rows, int64_t cols, int64_t out_stride,
                                 int64_t in_stride, talon_dtype dtype) {
    talon__act_params p;
    CUdeviceptr ptrs[2];
    int64_t lens[3];
    int vec, k;
    TALON__TRY(talon__check_ptr(op, "out", out, 0));
    TALON__TRY(talon__check_ptr(op, "in", in, 0));
    TALON__TRY(talon__check_size(op, "rows", rows, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "cols", cols, INT64_MAX / 4));
    memset(&p, 0, sizeof p);
    p.out = out; p.in = in; p.cols = cols;
    TALON__TRY(talon__check_stride(op, "out_stride", out_stride, cols, &p.out_stride));
    TALON__TRY(talon__check_stride(op, "in_stride", in_stride, 2 * cols, &p.in_stride));
    TALON__TRY(talon__check_dtype(op, dtype));
    ptrs[0] = out; ptrs[1] = in;
    lens[0] = cols; lens[1] = p.out_stride; lens[2] = p.in_stride;
    vec = talon__vec8(ptrs, 2, lens, 3) ? 8 : 1;
    TALON__TRY(talon__pick(op, &k, body, 2, (int)dtype, vec));
    p.chunks = (cols + (int64_t)talon__kernels[k].block * vec - 1) /
               ((int64_t)talon__kernels[k].block * vec);
    if (p.chunks > TALON__GRID_MAX / rows)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->rows = %lld with args->cols = %lld needs %.0f blocks, more "
                           "than the grid limit %lld",
                           op, (long long)rows, (long long)cols, (double)p.chunks * (double)rows,
                           TALON__GRID_MAX);
    return talon__launch(ctx, stream, op, k, rows * p.chunks, &p);
}

talon_status talon_silu_and_mul(talon_ctx *ctx, CUstream stream,
                                const talon_silu_and_mul_args *a) {
    static const char op[] = "talon_silu_and_mul";
    TALON__TRY(talon__check_common(op, ctx, a));
    return talon__gated(ctx, stream, op, TALON__B_silu_mul, a->out, a->in, a->rows, a->cols,
                        a->out_stride, a->in_stride, a->dtype);
}

talon_status talon_gelu_and_mul(talon_ctx *ctx, CUstream stream,
                                const talon_gelu_and_mul_args *a) {
    static const char op[] = "talon_gelu_and_mul";
    TALON__TRY(talon__check_common(op, ctx, a));
    if (a->approx != TALON_GELU_ERF && a->approx != TALON_GELU_TANH)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->approx = %d is not TALON_GELU_ERF (0) or TALON_GELU_TANH (1)",
                           op, (int)a->approx);
    return talon__gated(ctx, stream, op,
                        a->approx == TALON_GELU_TANH ? TALON__B_gelu_tanh_mul : TALON__B_gelu_erf_mul,
                        a->out, a->in, a->rows, a->cols, a->out_stride, a->in_stride, a->dtype);
}

#endif
