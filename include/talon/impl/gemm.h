/* talon/impl/gemm.h - dense GEMM: validate -> plan (gemm_plan.h) -> tensor maps -> launch.
   Part of talon.h's implementation (TALON_IMPLEMENTATION); not a public header. */
#ifndef TALON_IMPL_GEMM_H
#define TALON_IMPL_GEMM_H

#define TALON__GEMM_M_MAX (1LL << 24)
#define TALON__GEMM_NK_MAX (1LL << 20)

/* n and k: in [8, 2^20] and a multiple of 8 (TMA rows and the epilogue's pairs). */
static talon_status talon__gemm_check_dim(const char *op, const char *name, int64_t v) {
    TALON__TRY(talon__check_range(op, name, v, 8, TALON__GEMM_NK_MAX));
    if (v % 8)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = %lld must be a "
                           "multiple of 8", op, name, (long long)v);
    return TALON_SUCCESS;
}

/* A row stride: 0 = row, else at least a row, a multiple of `mult` elements (16 bytes: 8 of
   16 bits, 16 of fp8) and at most 2^36 (a TMA stride is below 2^40 bytes; spans of m rows
   stay inside 64 bits). */
static talon_status talon__gemm_check_ld(const char *op, const char *name, int64_t ld,
                                         int64_t row, int mult, int64_t *out) {
    TALON__TRY(talon__check_stride(op, name, ld, row, out));
    if (*out % mult || *out > (1LL << 36))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = %lld must be a "
                           "multiple of %d up to 2^36", op, name, (long long)*out, mult);
    return TALON_SUCCESS;
}

/* The rules the GEMM and the grouped GEMM share on their input types: dtype bf16, f16 or fp8
   e4m3; 16-bit inputs take scale NONE and no scale pointers; fp8 both scale pointers (4-byte
   aligned, b_scale 8 for ROW: the epilogue reads column pairs), and with BLOCK, gated: n a
   multiple of 64 (each half-tile of b inside one 128-row block). Which fp8 scale modes an op
   takes is its own rule, checked before this. */
static talon_status talon__gemm_check_inputs(const char *op, talon_dtype dtype,
                                             talon_gemm_scale scale, CUdeviceptr a_scale,
                                             CUdeviceptr b_scale, int gated, int64_t n) {
    if (dtype != TALON_DTYPE_FP8_E4M3) {
        if (dtype != TALON_DTYPE_BF16 && dtype != TALON_DTYPE_F16)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->dtype = %d is not "
                               "supported (bf16 = %d, f16 = %d, fp8 e4m3 = %d)", op,
                               (int)dtype, (int)TALON_DTYPE_BF16, (int)TALON_DTYPE_F16,
                               (int)TALON_DTYPE_FP8_E4M3);
        if (scale != TALON_GEMM_SCALE_NONE)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->scale = %d must be "
                               "TALON_GEMM_SCALE_NONE (0) with bf16/f16 inputs", op,
                               (int)scale);
        if (a_scale || b_scale)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = 0x%llx must be "
                               "NULL with bf16/f16 inputs (scales are for fp8)", op,
                               a_scale ? "a_scale" : "b_scale",
                               (unsigned long long)(a_scale ? a_scale : b_scale));
        return TALON_SUCCESS;
    }
    if (scale == TALON_GEMM_SCALE_BLOCK && gated && n % 64)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->n = %lld must be a "
                           "multiple of 64 for gated block scales", op, (long long)n);
    TALON__TRY(talon__check_ptr_align(op, "a_scale", a_scale, 0, 4));
    return talon__check_ptr_align(op, "b_scale", b_scale, 0, scale == TALON_GEMM_SCALE_ROW ? 8 : 4);
}

/* talon_gemm's types: out_dtype the input's or f32 (16-bit), bf16 (fp8); fp8 scale TENSOR,
   ROW or BLOCK; then the shared rules. */
static talon_status talon__gemm_check_types(const char *op, const talon_gemm_args *a) {
    const int fp8 = a->dtype == TALON_DTYPE_FP8_E4M3;
    if (!fp8 && (a->dtype == TALON_DTYPE_BF16 || a->dtype == TALON_DTYPE_F16) &&
        a->out_dtype != a->dtype && a->out_dtype != TALON_DTYPE_F32)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->out_dtype = %d must "
                           "be dtype (%d) or f32 (%d)", op, (int)a->out_dtype,
                           (int)a->dtype, (int)TALON_DTYPE_F32);
    if (fp8 && a->out_dtype != TALON_DTYPE_BF16)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->out_dtype = %d must be "
                           "bf16 (%d) with fp8 inputs", op, (int)a->out_dtype,
                           (int)TALON_DTYPE_BF16);
    if (fp8 && a->scale != TALON_GEMM_SCALE_TENSOR && a->scale != TALON_GEMM_SCALE_ROW &&
        a->scale != TALON_GEMM_SCALE_BLOCK)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->scale = %d must be "
                           "TALON_GEMM_SCALE_TENSOR (1), ROW (2) or BLOCK (3) with fp8 inputs",
                           op, (int)a->scale);
    return talon__gemm_check_inputs(op, a->dtype, a->scale, a->a_scale, a->b_scale, a->gated,
                                    a->n);
}

/* Bytes [lo, hi) a row-major rows x cols matrix of stride ld touches. */
static void talon__gemm_span(CUdeviceptr base, int64_t rows, int64_t cols, int64_t ld,
                             int esize, CUdeviceptr span[2]) {
    span[0] = base;
    span[1] = base + (CUdeviceptr)talon__rows_bytes(rows, cols, ld, esize);
}

static talon_status talon__gemm_check_disjoint(const char *op, const CUdeviceptr d[2],
                                               const char *name, CUdeviceptr p,
                                               const CUdeviceptr s[2]) {
    if (talon__overlap(p, (int64_t)(s[1] - s[0]), d[0], (int64_t)(d[1] - d[0])))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = 0x%llx overlaps d "
                           "(outputs must not overlap inputs; c may be d itself)", op, name,
                           (unsigned long long)p);
    return TALON_SUCCESS;
}

/* Bytes of an element of a, b, c or d. */
static int talon__gemm_esize(talon_dtype dt) {
    return dt == TALON_DTYPE_F32 ? 4 : dt == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
}

/* `batches` row-major [rows, cols] matrices of stride ld elements, batch_stride elements
   apart (a 3D map, the batch its outer coordinate, so a box never runs into the next matrix;
   batches 0: one matrix, a 2D map), boxes of 128 bytes x box_rows with the 128-byte swizzle the kernels'
   shared-memory tiles use. */
static talon_status talon__gemm_map_batched(const talon_ctx *ctx, const char *op,
                                            const char *name, CUtensorMap *map, CUdeviceptr base,
                                            int64_t rows, int64_t cols, int64_t ld, int box_rows,
                                            talon_dtype dt, int64_t batches, int64_t batch_stride) {
    talon__tensor_map_shape t;
    const int esize = talon__gemm_esize(dt);
    memset(&t, 0, sizeof t);
    t.type = dt == TALON_DTYPE_BF16    ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
             : dt == TALON_DTYPE_F16   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
             : dt == TALON_DTYPE_F32   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                       : CU_TENSOR_MAP_DATA_TYPE_UINT8;
    t.rank = batches ? 3 : 2;
    t.dims[0] = (uint64_t)cols; t.dims[1] = (uint64_t)rows; t.dims[2] = (uint64_t)batches;
    t.strides[0] = (uint64_t)(ld * esize); t.strides[1] = (uint64_t)(batch_stride * esize);
    t.box[0] = (uint32_t)(128 / esize); t.box[1] = (uint32_t)box_rows; t.box[2] = 1;
    t.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    return talon__tensor_map(ctx, op, name, map, base, &t);
}

/* One such matrix: a 2D map. */
static talon_status talon__gemm_map(const talon_ctx *ctx, const char *op, const char *name,
                                    CUtensorMap *map, CUdeviceptr base, int64_t rows,
                                    int64_t cols, int64_t ld, int box_rows, talon_dtype dt) {
    return talon__gemm_map_batched(ctx, op, name, map, base, rows, cols, ld, box_rows, dt, 0, 0);
}

/* The plan's view of the epilogue (gemm_plan.h). */
static int talon__gemm_epilogue_kind(const talon_gemm_args *a) {
    if (a->bias || a->act != TALON_GEMM_ACT_NONE) return TALON__GEMM_EPI_ACT;
    return a->c ? TALON__GEMM_EPI_RESIDUAL : TALON__GEMM_EPI_NONE;
}

talon_status talon_gemm(talon_ctx *ctx, CUstream stream, const talon_gemm_args *a) {
    static const char op[] = "talon_gemm";
    talon__gemm_params p;
    talon__gemm_plan pl;
    int64_t lda, ldb, ldc = 0, ldd, b_rows;
    CUdeviceptr sd[2], s[2];
    int osize, isize, k, row_scales, block_scales;
    int64_t kblocks, a_scales, b_scales; /* fp8: scale counts */
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__gemm_check_types(op, a));
    osize = talon__gemm_esize(a->out_dtype);
    isize = talon__gemm_esize(a->dtype);
    row_scales = a->scale == TALON_GEMM_SCALE_ROW;
    block_scales = a->scale == TALON_GEMM_SCALE_BLOCK;
    TALON__TRY(talon__check_size(op, "m", a->m, TALON__GEMM_M_MAX));
    TALON__TRY(talon__gemm_check_dim(op, "n", a->n));
    TALON__TRY(talon__gemm_check_dim(op, "k", a->k));
    if (isize == 1 && a->k % 16) /* rows of whole 16 bytes */
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->k = %lld must be a "
                           "multiple of 16 with fp8 inputs", op, (long long)a->k);
    TALON__TRY(talon__check_range(op, "gated", a->gated, 0, 1));
    TALON__TRY(talon__check_range(op, "act", (int64_t)(int)a->act, TALON_GEMM_ACT_NONE,
                                  TALON_GEMM_ACT_GELU_TANH));
    b_rows = a->gated ? 2 * a->n : a->n;
    TALON__TRY(talon__gemm_check_ld(op, "lda", a->lda, a->k, 16 / isize, &lda));
    TALON__TRY(talon__gemm_check_ld(op, "ldb", a->ldb, a->k, 16 / isize, &ldb));
    TALON__TRY(talon__gemm_check_ld(op, "ldd", a->ldd, a->n, 8, &ldd));
    if (a->c) TALON__TRY(talon__gemm_check_ld(op, "ldc", a->ldc, a->n, 8, &ldc));
    TALON__TRY(talon__check_ptr_align(op, "d", a->d, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "a", a->a, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "b", a->b, 0, 16));
    TALON__TRY(talon__check_ptr_align(op, "bias", a->bias, 1, 16));
    TALON__TRY(talon__check_ptr_align(op, "c", a->c, 1, 16));
    if (a->c == a->d && ldc != ldd)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->ldc = %lld differs from "
                           "ldd = %lld while c is d", op, (long long)ldc, (long long)ldd);
    talon__gemm_span(a->d, a->m, a->n, ldd, osize, sd);
    talon__gemm_span(a->a, a->m, a->k, lda, isize, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "a", a->a, s));
    talon__gemm_span(a->b, b_rows, a->k, ldb, isize, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "b", a->b, s));
    talon__gemm_span(a->bias, 1, b_rows, b_rows, 2, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "bias", a->bias, s));
    kblocks = (a->k + 127) / 128;
    a_scales = row_scales ? a->m : block_scales ? kblocks * ((a->m + 3) / 4 * 4) : 1;
    b_scales = row_scales ? b_rows : block_scales ? kblocks * ((b_rows + 127) / 128) : 1;
    talon__gemm_span(a->a_scale, 1, a_scales, 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "a_scale", a->a_scale, s));
    talon__gemm_span(a->b_scale, 1, b_scales, 1, 4, s);
    TALON__TRY(talon__gemm_check_disjoint(op, sd, "b_scale", a->b_scale, s));
    if (a->c != a->d) {
        talon__gemm_span(a->c, a->m, a->n, ldc, osize, s);
        TALON__TRY(talon__gemm_check_disjoint(op, sd, "c", a->c, s));
    }
    TALON__TRY(talon__check_float(op, "alpha", a->alpha, 0, 1));
    TALON__TRY(talon__check_float(op, "beta", a->beta, 0, 1));

    talon__gemm_plan_make(a->m, a->n, a->k, isize, a->gated, a->out_dtype == TALON_DTYPE_F32,
                          block_scales, talon__gemm_epilogue_kind(a),
                          ctx->sms, &pl);
    memset(&p, 0, sizeof p);
    /* boxes: a 128 rows (the transposed kernel: MN), b bn / 2 rows (transposed: swap_rows), d
       64 rows (transposed: MN, at most 64: the epilogue stores 128 rows as two chunks) */
    TALON__TRY(talon__gemm_map(ctx, op, "a", &p.a, a->a, a->m, a->k, lda,
                               pl.swap_mn ? pl.swap_mn : TALON__GEMM_BM, a->dtype));
    TALON__TRY(talon__gemm_map(ctx, op, "b", &p.b_lo, a->b, a->n, a->k, ldb,
                               pl.swap_mn ? pl.swap_rows : pl.bn / 2, a->dtype));
    if (a->gated)
        TALON__TRY(talon__gemm_map(ctx, op, "b", &p.b_hi, a->b + (CUdeviceptr)(a->n * ldb * isize),
                                   a->n, a->k, ldb, pl.bn / 2, a->dtype));
    else
        p.b_hi = p.b_lo;
    TALON__TRY(talon__gemm_map(ctx, op, "d", &p.d_map, a->d, a->m, a->n, ldd,
                               pl.swap_mn && pl.swap_mn < 64 ? pl.swap_mn : 64, a->out_dtype));
    p.d = a->d; p.c = a->c; p.bias = a->bias;
    p.a_scale = a->a_scale; p.b_scale = a->b_scale;
    p.a_scale_step = p.b_scale_step = row_scales;
    if (block_scales) {
        p.a_scale_ld = (int)((a->m + 3) / 4 * 4);
        p.b_scale_ld = (int)kblocks;
    }
    p.ldd = ldd; p.ldc = ldc;
    p.m = (int)a->m; p.n = (int)a->n; p.k = (int)a->k;
    p.tiles_m = pl.tiles_m; p.tiles_n = pl.tiles_n; p.group = pl.group;
    p.act = (int)a->act;
    p.alpha = a->alpha != 0.0f ? a->alpha : 1.0f;
    p.beta = a->beta != 0.0f ? a->beta : 1.0f;
    if (pl.swap_mn)
        TALON__TRY(talon__pick(op, &k, TALON__B_gemm_swap, 6, (int)a->dtype, (int)a->out_dtype,
                               pl.swap_mn, pl.split, pl.swap_rows, block_scales));
    else if (pl.pingpong)
        TALON__TRY(talon__pick(op, &k, TALON__B_gemm_pingpong, 3, (int)a->dtype,
                               (int)a->out_dtype, a->gated));
    else
        TALON__TRY(talon__pick(op, &k, TALON__B_gemm_tile, 6, (int)a->dtype, (int)a->out_dtype,
                               pl.bn, a->gated, pl.split, block_scales));
    return talon__launch(ctx, stream, op, k, pl.grid, &p);
}

#endif
