/* talon/impl/validate.h - validation rules shared by the ops: one check per line at the call site, each naming the argument and its value. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_VALIDATE_H
#define TALON_IMPL_VALIDATE_H

#define TALON__GRID_MAX 2147483647LL

static talon_status talon__check_common(const char *op, const void *ctx, const void *args) {
    if (!ctx) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", op);
    if (!args) return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args is NULL", op);
    return TALON_SUCCESS;
}

static talon_status talon__check_dtype(const char *op, talon_dtype t) {
    if (t == TALON_DTYPE_BF16 || t == TALON_DTYPE_F16) return TALON_SUCCESS;
    return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                       "%s: args->dtype = %d is not supported (bf16 = %d, f16 = %d)", op, (int)t,
                       (int)TALON_DTYPE_BF16, (int)TALON_DTYPE_F16);
}

/* The data types of the ops that also take fp32 (logits, scores); *size gets the element's
   bytes. */
static talon_status talon__check_dtype_f32(const char *op, const char *name, talon_dtype t,
                                           int *size) {
    *size = t == TALON_DTYPE_F32 ? 4 : 2;
    if (t == TALON_DTYPE_F32 || t == TALON_DTYPE_BF16 || t == TALON_DTYPE_F16)
        return TALON_SUCCESS;
    return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                       "%s: args->%s = %d is not supported (bf16 = %d, f16 = %d, f32 = %d)", op,
                       name, (int)t, (int)TALON_DTYPE_BF16, (int)TALON_DTYPE_F16,
                       (int)TALON_DTYPE_F32);
}

/* Device pointers must be non-NULL (unless optional) and aligned to their element. */
static talon_status talon__check_ptr_align(const char *op, const char *name, CUdeviceptr p,
                                           int optional, int align) {
    if (!p && !optional)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s is NULL", op, name);
    if (p % (CUdeviceptr)align)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = 0x%llx must be %d-byte aligned", op,
                           name, (unsigned long long)p, align);
    return TALON_SUCCESS;
}

static talon_status talon__check_ptr(const char *op, const char *name, CUdeviceptr p,
                                     int optional) {
    return talon__check_ptr_align(op, name, p, optional, 2);
}


static talon_status talon__check_size(const char *op, const char *name, int64_t v, int64_t max) {
    if (v < 1 || v > max)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = %lld is out of range [1, %lld]", op, name,
                           (long long)v, (long long)max);
    return TALON_SUCCESS;
}

/* Resolves a row stride (0 = min) into *out; a stride shorter than a row is an error. */
static talon_status talon__check_stride(const char *op, const char *name, int64_t stride,
                                        int64_t min, int64_t *out) {
    *out = stride ? stride : min;
    if (stride && stride < min)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = %lld is shorter than a row (%lld elements)", op, name,
                           (long long)stride, (long long)min);
    return TALON_SUCCESS;
}

/* The 16-byte path: every pointer 16-byte aligned and every length a multiple of 8. */
static int talon__vec8(const CUdeviceptr *ptrs, int nptrs, const int64_t *lens, int nlens) {
    int i;
    for (i = 0; i < nptrs; i++)
        if (ptrs[i] % 16) return 0;
    for (i = 0; i < nlens; i++)
        if (lens[i] % 8) return 0;
    return 1;
}

static talon_status talon__check_range(const char *op, const char *name, int64_t v, int64_t lo,
                                       int64_t hi) {
    if (v < lo || v > hi)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = %lld is out of range [%lld, %lld]", op, name,
                           (long long)v, (long long)lo, (long long)hi);
    return TALON_SUCCESS;
}

static talon_status talon__check_float(const char *op, const char *name, float v, int positive,
                                       int zero_ok) {
    if (v - v != 0.0f || (positive && v < 0.0f) || (!zero_ok && v == 0.0f))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->%s = %g must be %s", op,
                           name, (double)v,
                           positive ? (zero_ok ? "finite and >= 0 (0: default)"
                                               : "finite and > 0")
                                    : "finite");
    return TALON_SUCCESS;
}

/* Bytes from the first element of a row-major rows x cols matrix with a row stride of ld
   elements of esize bytes to the end of its last row (the span an overlap check compares);
   INT64_MAX when that does not fit (no buffer spans 2^63 bytes: such arguments overlap
   anything, and checks run before the sizes are bounded may see them). */
static int64_t talon__rows_bytes(int64_t rows, int64_t cols, int64_t ld, int esize) {
    int64_t span;
    if (__builtin_mul_overflow(rows - 1, ld, &span) || __builtin_add_overflow(span, cols, &span) ||
        __builtin_mul_overflow(span, (int64_t)esize, &span))
        return INT64_MAX;
    return span;
}

/* Whether byte ranges [a, a + a_bytes) and [b, b + b_bytes) meet (0 when either is NULL). */
static int talon__overlap(CUdeviceptr a, int64_t a_bytes, CUdeviceptr b, int64_t b_bytes) {
    if (!a || !b) return 0;
    /* distances, not ends: an end past 2^64 would wrap */
    return a >= b ? a - b < (CUdeviceptr)b_bytes : b - a < (CUdeviceptr)a_bytes;
}

#define TALON__TRY(expr)                                                                       \
    do {                                                                                       \
        talon_status talon__s = (expr);                                                        \
        if (talon__s != TALON_SUCCESS) return talon__s;                                        \
    } while (0)

/* Attention heads (decode, prefill): num_qo_heads and num_kv_heads in [1, 1024], the first a
   multiple of the second (MHA, GQA, MQA); head_dim 64, 128 or 256. */
static talon_status talon__check_attention_heads(const char *op, int64_t hq, int64_t hk,
                                                 int64_t head_dim) {
    TALON__TRY(talon__check_range(op, "num_qo_heads", hq, 1, 1024));
    TALON__TRY(talon__check_range(op, "num_kv_heads", hk, 1, 1024));
    if (hq % hk)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->num_qo_heads = %lld is not "
                           "a multiple of args->num_kv_heads = %lld", op, (long long)hq,
                           (long long)hk);
    if (head_dim != 64 && head_dim != 128 && head_dim != 256)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT, "%s: args->head_dim = %lld is not "
                           "supported (64, 128, 256)", op, (long long)head_dim);
    return TALON_SUCCESS;
}

#endif
