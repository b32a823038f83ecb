/* talon/impl/gather.h - the row gather (token embeddings). Part of talon.h's implementation
   (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_GATHER_H
#define TALON_IMPL_GATHER_H

talon_status talon_gather_rows(talon_ctx *ctx, CUstream stream, const talon_gather_rows_args *a) {
    static const char op[] = "talon_gather_rows";
    talon__gather_params p;
    int esize, unit, k;
    int64_t index_bytes;
    TALON__TRY(talon__check_common(op, ctx, a));
    esize = a->dtype == TALON_DTYPE_F32 ? 4 : a->dtype == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
    if (a->dtype != TALON_DTYPE_BF16 && a->dtype != TALON_DTYPE_F16 &&
        a->dtype != TALON_DTYPE_F32 && a->dtype != TALON_DTYPE_FP8_E4M3)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->dtype = %d is not supported (bf16 = %d, f16 = %d, f32 = %d, "
                           "fp8_e4m3 = %d)", op, (int)a->dtype, (int)TALON_DTYPE_BF16,
                           (int)TALON_DTYPE_F16, (int)TALON_DTYPE_F32, (int)TALON_DTYPE_FP8_E4M3);
    if (a->index_dtype != TALON_INDEX_I32 && a->index_dtype != TALON_INDEX_I64)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->index_dtype = %d is not TALON_INDEX_I32 (0) or "
                           "TALON_INDEX_I64 (1)", op, (int)a->index_dtype);
    index_bytes = a->index_dtype == TALON_INDEX_I64 ? 8 : 4;
    TALON__TRY(talon__check_ptr_align(op, "out", a->out, 0, esize));
    TALON__TRY(talon__check_ptr_align(op, "in", a->in, 0, esize));
    TALON__TRY(talon__check_ptr_align(op, "indices", a->indices, 0, (int)index_bytes));
    TALON__TRY(talon__check_size(op, "rows", a->rows, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "in_rows", a->in_rows, INT64_MAX / 16));
    TALON__TRY(talon__check_size(op, "cols", a->cols, INT64_MAX / 16));
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "out_stride", a->out_stride, a->cols, &p.out_stride));
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    if (p.in_stride > INT64_MAX / 16 / a->in_rows || p.out_stride > INT64_MAX / 16 / a->rows)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->in_stride = %lld with args->in_rows = %lld (or out_stride "
                           "%lld with rows %lld) spans more than 2^59 elements", op,
                           (long long)p.in_stride, (long long)a->in_rows,
                           (long long)p.out_stride, (long long)a->rows);
    if (talon__overlap(a->out, talon__rows_bytes(a->rows, a->cols, p.out_stride, esize), a->in,
                       talon__rows_bytes(a->in_rows, a->cols, p.in_stride, esize)) ||
        talon__overlap(a->out, talon__rows_bytes(a->rows, a->cols, p.out_stride, esize),
                       a->indices, a->rows * index_bytes))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->out = 0x%llx overlaps args->in or args->indices", op,
                           (unsigned long long)a->out);
    /* 16 bytes a unit when both pointers are 16-byte aligned and rows and strides are whole
       units; otherwise one element. */
    unit = a->out % 16 == 0 && a->in % 16 == 0 && (a->cols * esize) % 16 == 0 &&
                   (p.out_stride * esize) % 16 == 0 && (p.in_stride * esize) % 16 == 0
               ? 16 : esize;
    p.out = a->out; p.in = a->in; p.indices = a->indices;
    p.in_rows = a->in_rows;
    p.row_units = a->cols * esize / unit;
    p.out_stride = p.out_stride * esize / unit;
    p.in_stride = p.in_stride * esize / unit;
    p.index64 = a->index_dtype == TALON_INDEX_I64;
    TALON__TRY(talon__pick(op, &k, TALON__B_gather_rows, 1, unit));
    talon__check_set(ctx, &p.check, k);
    p.chunks = (p.row_units + talon__kernels[k].block - 1) / talon__kernels[k].block;
    if (p.chunks > TALON__GRID_MAX / a->rows)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->rows = %lld with args->cols = %lld needs %.0f blocks, more "
                           "than the grid limit %lld", op, (long long)a->rows,
                           (long long)a->cols, (double)p.chunks * (double)a->rows,
                           TALON__GRID_MAX);
    return talon__launch(ctx, stream, op, k, a->rows * p.chunks, &p);
}

#endif
