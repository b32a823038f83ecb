/* talon/impl/norm.h - rmsnorm, fused_add_rmsnorm, layernorm. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_NORM_H
#define TALON_IMPL_NORM_H

/* ---------------------------------------------------------------- norms */
/* Threads per block on the 16-byte path: the fewest whole warps that keep the row on chip
   (TALON__NORM_CACHE elements a thread), from 128 (twice the bytes in flight per thread of
   256) to 256: every thread about the same share (at 5120 columns, 256 threads would hold 3 or
   2 vectors each; 160 hold 4: layernorm 1.15x, rmsnorm 1.05x on the H100). Element-wise: 256. */
static int talon__norm_block(int vec, int64_t cols) {
    int64_t threads;
    if (vec != 8) return 256;
    threads = (cols / 8 + TALON__NORM_CACHE / 8 - 1) / (TALON__NORM_CACHE / 8);
    threads = (threads + 31) / 32 * 32;
    return threads < 128 ? 128 : threads > 256 ? 256 : (int)threads;
}

/* Shared by the norms: validates the row geometry and launches one block per row. quant: the
   fp8 variants' talon_quant_mode (their fourth template argument), -1 for the others. */
static talon_status talon__norm(talon_ctx *ctx, CUstream stream, const char *op,
                                talon__body body, talon_dtype dtype, int64_t rows, int quant,
                                talon__norm_params *p) {
    CUdeviceptr ptrs[5];
    int64_t lens[4];
    int n = 0, vec, k;
    TALON__TRY(talon__check_dtype(op, dtype));
    TALON__TRY(talon__check_size(op, "rows", rows, TALON__GRID_MAX));
    ptrs[n++] = p->out;
    ptrs[n++] = p->in;
    ptrs[n++] = p->weight;
    if (p->residual) ptrs[n++] = p->residual;
    if (p->bias) ptrs[n++] = p->bias;
    lens[0] = p->cols; lens[1] = p->out_stride; lens[2] = p->in_stride;
    lens[3] = p->residual_stride;
    vec = talon__vec8(ptrs, n, lens, 4) ? 8 : 1;
    if (quant < 0)
        TALON__TRY(talon__pick(op, &k, body, 3, (int)dtype, vec, talon__norm_block(vec, p->cols)));
    else
        TALON__TRY(talon__pick(op, &k, body, 4, (int)dtype, vec, talon__norm_block(vec, p->cols),
                               quant));
    return talon__launch(ctx, stream, op, k, rows, p);
}

talon_status talon_rmsnorm(talon_ctx *ctx, CUstream stream, const talon_rmsnorm_args *a) {
    static const char op[] = "talon_rmsnorm";
    talon__norm_params p;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr(op, "out", a->out, 0));
    TALON__TRY(talon__check_ptr(op, "in", a->in, 0));
    TALON__TRY(talon__check_ptr(op, "weight", a->weight, 0));
    memset(&p, 0, sizeof p);
    p.out = a->out; p.in = a->in; p.weight = a->weight; p.cols = a->cols; p.eps = a->eps;
    TALON__TRY(talon__check_size(op, "cols", a->cols, INT64_MAX / 2));
    TALON__TRY(talon__check_stride(op, "out_stride", a->out_stride, a->cols, &p.out_stride));
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    return talon__norm(ctx, stream, op, TALON__B_rmsnorm, a->dtype, a->rows, -1, &p);
}

talon_status talon_fused_add_rmsnorm(talon_ctx *ctx, CUstream stream,
                                     const talon_fused_add_rmsnorm_args *a) {
    static const char op[] = "talon_fused_add_rmsnorm";
    talon__norm_params p;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr(op, "in", a->in, 0));
    TALON__TRY(talon__check_ptr(op, "residual", a->residual, 0));
    TALON__TRY(talon__check_ptr(op, "weight", a->weight, 0));
    memset(&p, 0, sizeof p);
    p.out = a->in; p.in = a->in; p.residual = a->residual; p.weight = a->weight;
    p.cols = a->cols; p.eps = a->eps;
    TALON__TRY(talon__check_size(op, "cols", a->cols, INT64_MAX / 2));
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    TALON__TRY(talon__check_stride(op, "residual_stride", a->residual_stride, a->cols,
                                   &p.residual_stride));
    p.out_stride = p.in_stride;
    return talon__norm(ctx, stream, op, TALON__B_fused_add_rmsnorm, a->dtype, a->rows, -1, &p);
}

talon_status talon_layernorm(talon_ctx *ctx, CUstream stream, const talon_layernorm_args *a) {
    static const char op[] = "talon_layernorm";
    talon__norm_params p;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr(op, "out", a->out, 0));
    TALON__TRY(talon__check_ptr(op, "in", a->in, 0));
    TALON__TRY(talon__check_ptr(op, "weight", a->weight, 0));
    TALON__TRY(talon__check_ptr(op, "bias", a->bias, 1));
    memset(&p, 0, sizeof p);
    p.out = a->out; p.in = a->in; p.weight = a->weight; p.bias = a->bias;
    p.cols = a->cols; p.eps = a->eps;
    TALON__TRY(talon__check_size(op, "cols", a->cols, INT64_MAX / 2));
    TALON__TRY(talon__check_stride(op, "out_stride", a->out_stride, a->cols, &p.out_stride));
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    return talon__norm(ctx, stream, op, TALON__B_layernorm, a->dtype, a->rows, -1, &p);
}

talon_status talon_rmsnorm_quant_fp8(talon_ctx *ctx, CUstream stream,
                                     const talon_rmsnorm_quant_fp8_args *a) {
    static const char op[] = "talon_rmsnorm_quant_fp8";
    talon__norm_params p;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_range(op, "mode", (int64_t)(int)a->mode, TALON_QUANT_TENSOR,
                                  TALON_QUANT_TOKEN));
    TALON__TRY(talon__check_ptr_align(op, "out", a->out, 0, 1));
    TALON__TRY(talon__check_ptr_align(op, "scale", a->scale, 0, 4));
    TALON__TRY(talon__check_ptr(op, "in", a->in, 0));
    TALON__TRY(talon__check_ptr(op, "residual", a->residual, 1));
    TALON__TRY(talon__check_ptr(op, "weight", a->weight, 0));
    memset(&p, 0, sizeof p);
    p.out = a->out; p.scale = a->scale; p.in = a->in; p.residual = a->residual;
    p.weight = a->weight; p.cols = a->cols; p.eps = a->eps;
    TALON__TRY(talon__check_size(op, "cols", a->cols, INT64_MAX / 2));
    TALON__TRY(talon__check_stride(op, "out_stride", a->out_stride, a->cols, &p.out_stride));
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    if (a->residual)
        TALON__TRY(talon__check_stride(op, "residual_stride", a->residual_stride, a->cols,
                                       &p.residual_stride));
    /* the outputs (out, token scales) meet no input; rows out of range: talon__norm says so */
    if (a->rows > 0 && a->rows <= TALON__GRID_MAX && a->cols > 0) {
        const int64_t out_b = talon__rows_bytes(a->rows, a->cols, p.out_stride, 1);
        const int64_t in_b = talon__rows_bytes(a->rows, a->cols, p.in_stride, 2);
        const int64_t res_b = talon__rows_bytes(a->rows, a->cols, p.residual_stride, 2);
        const int token = a->mode == TALON_QUANT_TOKEN; /* scales written, else one read */
        const int64_t sc_b = 4 * (token ? a->rows : 1);
        if (talon__overlap(a->out, out_b, a->in, in_b) ||
            talon__overlap(a->out, out_b, a->residual, res_b) ||
            talon__overlap(a->out, out_b, a->weight, 2 * a->cols))
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->out = 0x%llx overlaps "
                               "an input", op, (unsigned long long)a->out);
        if (talon__overlap(a->scale, sc_b, a->out, out_b) ||
            (token && (talon__overlap(a->scale, sc_b, a->in, in_b) ||
                       talon__overlap(a->scale, sc_b, a->residual, res_b) ||
                       talon__overlap(a->scale, sc_b, a->weight, 2 * a->cols))))
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->scale = 0x%llx "
                               "overlaps another argument", op, (unsigned long long)a->scale);
    }
    return talon__norm(ctx, stream, op,
                       a->residual ? TALON__B_fused_add_rmsnorm_fp8 : TALON__B_rmsnorm_fp8,
                       a->dtype, a->rows, (int)a->mode, &p);
}

#endif
