/* talon/impl/quant.h - fp8 quantisation (talon_quant_fp8): validate -> launch. Part of
   talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_QUANT_H
#define TALON_IMPL_QUANT_H

#define TALON__QUANT_COLS_MAX (1LL << 24)

/* Per tensor and per row, threads per row and per block (quant.def): rows a warp holds in
   registers (TALON__QUANT_CACHE vectors of 8 per thread) take a warp each, 8 rows a 256-thread
   block; rows a 128-thread block holds a 128-thread block each; longer ones 256 threads. */
typedef struct talon__quant_plan {
    int row_threads, block;
} talon__quant_plan;

static talon__quant_plan talon__quant_plan_make(int64_t cols) {
    talon__quant_plan pl;
    pl.row_threads = cols <= 32 * 8 * TALON__QUANT_CACHE ? 32
                     : cols <= 128 * 8 * TALON__QUANT_CACHE ? 128 : 256;
    pl.block = pl.row_threads == 32 ? 256 : pl.row_threads;
    return pl;
}

/* Per group (quant_fp8_groups, any cols): TALON__QUANT_GROUP_THREADS threads a group,
   TALON__QUANT_GROUP_BLOCK a block (quant.def; other shapes of both measured no faster:
   docs/notes/quant.md); the groups of the rows a launch takes are numbered row-major in 32-bit
   units, so a launch takes at most (2^31 - 256) / groups_per_row rows (fewer than all only past
   512 GiB of input: then one launch per chunk of rows). */
static int64_t talon__quant_group_rows_per_launch(int64_t groups_per_row) {
    return (((int64_t)1 << 31) - 256) / groups_per_row;
}

talon_status talon_quant_fp8(talon_ctx *ctx, CUstream stream, const talon_quant_fp8_args *a) {
    static const char op[] = "talon_quant_fp8";
    talon__quant_params p;
    talon__quant_plan pl;
    int64_t groups, out_bytes, in_bytes, scale_bytes;
    int k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_dtype(op, a->dtype));
    TALON__TRY(talon__check_range(op, "mode", (int64_t)(int)a->mode, TALON_QUANT_TENSOR,
                                  TALON_QUANT_GROUP));
    TALON__TRY(talon__check_size(op, "rows", a->rows, TALON__GRID_MAX));
    TALON__TRY(talon__check_range(op, "cols", a->cols, 16, TALON__QUANT_COLS_MAX));
    if (a->cols % (a->mode == TALON_QUANT_GROUP ? TALON__QUANT_GROUP : 16))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->cols = %lld must be a "
                           "multiple of %d%s", op, (long long)a->cols,
                           a->mode == TALON_QUANT_GROUP ? TALON__QUANT_GROUP : 16,
                           a->mode == TALON_QUANT_GROUP ? " (the group size)" : "");
    TALON__TRY(talon__check_ptr_align(op, "out", a->out, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "in", a->in, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "scale", a->scale, 0, 4));
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "out_stride", a->out_stride, a->cols, &p.out_stride));
    TALON__TRY(talon__check_stride(op, "in_stride", a->in_stride, a->cols, &p.in_stride));
    if (p.out_stride % 16)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->out_stride = %lld must be "
                           "a multiple of 16", op, (long long)p.out_stride);
    if (p.in_stride % 8)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->in_stride = %lld must be "
                           "a multiple of 8", op, (long long)p.in_stride);
    groups = a->cols / TALON__QUANT_GROUP;
    scale_bytes = 4 * (a->mode == TALON_QUANT_TOKEN ? a->rows : 1);
    if (a->mode == TALON_QUANT_GROUP) {
        if (!a->scale_row_stride && !a->scale_group_stride) { /* group-major, 16-byte rows */
            p.scale_row_stride = 1;
            p.scale_group_stride = (a->rows + 3) / 4 * 4;
        } else {
            p.scale_row_stride = a->scale_row_stride;
            p.scale_group_stride = a->scale_group_stride;
            if (!(p.scale_row_stride == 1 && p.scale_group_stride >= a->rows) &&
                !(p.scale_group_stride == 1 && p.scale_row_stride >= groups))
                return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->scale_row_stride "
                                   "= %lld with args->scale_group_stride = %lld is not a "
                                   "layout of %lld rows x %lld groups (one stride 1, the "
                                   "other at least the first's extent; both 0: group-major)",
                                   op, (long long)a->scale_row_stride,
                                   (long long)a->scale_group_stride, (long long)a->rows,
                                   (long long)groups);
        }
        { /* the scales' span, bounded: the kernel's scale offsets must not wrap */
            int64_t r_part, g_part;
            if (__builtin_mul_overflow(a->rows - 1, p.scale_row_stride, &r_part) ||
                __builtin_mul_overflow(groups - 1, p.scale_group_stride, &g_part) ||
                r_part > ((int64_t)1 << 60) || g_part > ((int64_t)1 << 60) ||
                r_part + g_part > ((int64_t)1 << 60))
                return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->scale_row_stride "
                                   "= %lld with args->scale_group_stride = %lld spans more "
                                   "than 2^60 scales", op, (long long)a->scale_row_stride,
                                   (long long)a->scale_group_stride);
            scale_bytes = 4 * (r_part + g_part + 1);
        }
    }
    out_bytes = talon__rows_bytes(a->rows, a->cols, p.out_stride, 1);
    in_bytes = talon__rows_bytes(a->rows, a->cols, p.in_stride, 2);
    if (talon__overlap(a->out, out_bytes, a->in, in_bytes))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->out = 0x%llx overlaps in",
                           op, (unsigned long long)a->out);
    if (talon__overlap(a->scale, scale_bytes, a->out, out_bytes) ||
        (a->mode != TALON_QUANT_TENSOR &&
         talon__overlap(a->scale, scale_bytes, a->in, in_bytes)))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->scale = 0x%llx overlaps %s",
                           op, (unsigned long long)a->scale,
                           talon__overlap(a->scale, scale_bytes, a->out, out_bytes) ? "out"
                                                                                          : "in");
    p.out = a->out; p.in = a->in; p.scale = a->scale; p.rows = a->rows; p.cols = a->cols;
    if (a->mode == TALON_QUANT_GROUP) {
        const int64_t per_launch = talon__quant_group_rows_per_launch(groups);
        const int per_block = TALON__QUANT_GROUP_BLOCK / TALON__QUANT_GROUP_THREADS;
        int64_t r0;
        TALON__TRY(talon__pick(op, &k, TALON__B_quant_fp8_groups, 3, (int)a->dtype,
                               TALON__QUANT_GROUP_BLOCK, TALON__QUANT_GROUP_THREADS));
        p.groups_per_row = (uint32_t)groups;
        talon__div_magic((uint64_t)groups, &p.div_m, &p.div_l);
        for (r0 = 0; r0 < a->rows; r0 += per_launch) {
            talon__quant_params q = p;
            q.rows = a->rows - r0 < per_launch ? a->rows - r0 : per_launch;
            /* unsigned: spans past 2^63 bytes pass the overlap checks (they meet nothing
               nearer), and the addresses wrap as the kernels' would */
            q.in += (CUdeviceptr)r0 * (CUdeviceptr)p.in_stride * 2u;
            q.out += (CUdeviceptr)r0 * (CUdeviceptr)p.out_stride;
            q.scale += (CUdeviceptr)r0 * (CUdeviceptr)p.scale_row_stride * 4u;
            q.units = (uint32_t)(q.rows * groups);
            TALON__TRY(talon__launch_ex(ctx, stream, op, k, (q.units + per_block - 1) / per_block,
                                        1, &q, 1));
        }
        return TALON_SUCCESS;
    }
    pl = talon__quant_plan_make(a->cols);
    TALON__TRY(talon__pick(op, &k, TALON__B_quant_fp8, 4, (int)a->dtype, (int)a->mode, pl.block,
                           pl.row_threads));
    /* a programmatic dependent (talon.h) */
    return talon__launch_ex(ctx, stream, op, k,
                            (a->rows + pl.block / pl.row_threads - 1) / (pl.block / pl.row_threads),
                            1, &p, 1);
}

#endif
