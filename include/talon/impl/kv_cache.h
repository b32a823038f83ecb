/* talon/impl/kv_cache.h - kv_append. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_KV_CACHE_H
#define TALON_IMPL_KV_CACHE_H

/* The constants of kv_cache.cu's division x / scale = (x mul) / div for one finite scale > 0:
   mul = 2^k and div = scale 2^k in [2^-22, 4) (in [1, 2) but at the ends of the float range),
   rcp = 1 / div rounded to nearest. Bit operations, and a division in double whose second
   rounding is harmless (53 >= 2 * 24 + 2 bits), so no host floating-point mode (flush to zero,
   reciprocal estimates) can change them. */
static void talon__fp8_quant(float scale, float q[3]) {
    uint32_t b, e;
    int k;
    memcpy(&b, &scale, 4);
    e = b >> 23;
    if (e) { /* normal: div takes scale's significand, exponent 0 (1 for the top binade) */
        k = 127 - (int)e > -126 ? 127 - (int)e : -126;
        b = (b & 0x7fffffu) | (uint32_t)((int)e + k) << 23;
        memcpy(&q[1], &b, 4);
    } else { /* subnormal: scale 2^127, exactly the integer significand times 2^-22 */
        k = 127;
        q[1] = (float)((double)b * 0x1p-22);
    }
    b = (uint32_t)(127 + k) << 23;
    memcpy(&q[0], &b, 4);
    q[2] = (float)(1.0 / (double)q[1]);
}

talon_status talon_kv_append(talon_ctx *ctx, CUstream stream, const talon_kv_append_args *a) {
    static const char op[] = "talon_kv_append";
    const int fp8 = a && a->cache_dtype == TALON_DTYPE_FP8_E4M3, cache_bytes = fp8 ? 1 : 2;
    const char *const scale_names[2] = {"k_scale", "v_scale"};
    talon__kv_params p;
    int64_t row, units, per_block, strides[3];
    int vec, k, i;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_dtype(op, a->dtype));
    if (a->cache_dtype != a->dtype && !fp8)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->cache_dtype = %d is neither args->dtype = %d nor "
                           "TALON_DTYPE_FP8_E4M3 (%d)", op, (int)a->cache_dtype, (int)a->dtype,
                           (int)TALON_DTYPE_FP8_E4M3);
    TALON__TRY(talon__check_ptr_align(op, "k_cache", a->k_cache, 0, cache_bytes));
    TALON__TRY(talon__check_ptr_align(op, "v_cache", a->v_cache, 0, cache_bytes));
    TALON__TRY(talon__check_ptr(op, "k", a->k, 0));
    TALON__TRY(talon__check_ptr(op, "v", a->v, 0));
    TALON__TRY(talon__check_ptr_align(op, "slot_mapping", a->slot_mapping, 0, 8));
    TALON__TRY(talon__check_size(op, "tokens", a->tokens, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "num_kv_heads", a->num_kv_heads, 1 << 20));
    TALON__TRY(talon__check_size(op, "head_dim", a->head_dim, 1024));
    TALON__TRY(talon__check_size(op, "page_size", a->page_size, 1 << 20));
    if (a->page_size & (a->page_size - 1))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->page_size = %lld is not a power of two", op,
                           (long long)a->page_size);
    row = a->num_kv_heads * a->head_dim;
    TALON__TRY(talon__check_size(op, "num_pages", a->num_pages,
                                 INT64_MAX / 2 / a->page_size / row));
    TALON__TRY(talon__kv_strides(op, a->layout, a->page_size, a->num_kv_heads, a->head_dim,
                                 strides));
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "k_stride", a->k_stride, row, &p.k_stride));
    TALON__TRY(talon__check_stride(op, "v_stride", a->v_stride, row, &p.v_stride));
    for (i = 0; fp8 && i < 2; i++) {
        const float s = i ? a->v_scale : a->k_scale;
        if (!(s >= 0.0f && s <= 3.4028235e38f))
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                               "%s: args->%s = %g must be finite and > 0 (0: 1.0)", op,
                               scale_names[i], (double)s);
        talon__fp8_quant(s ? s : 1.0f, p.quant[i]);
    }
    {
        const CUdeviceptr ptrs[4] = {a->k_cache, a->v_cache, a->k, a->v};
        /* HND (page_size > 1) splits a token's row by head: a unit must not cross one */
        const int64_t lens[4] = {row, p.k_stride, p.v_stride,
                                 strides[2] == a->head_dim ? row : a->head_dim};
        vec = talon__vec8(ptrs, 4, lens, 4) ? 8 : 1;
    }
    units = row / vec * 2;
    per_block = 256 * TALON__KV_UNROLL;
    if (units > (TALON__GRID_MAX - per_block) / a->tokens)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->tokens = %lld with num_kv_heads * head_dim = %lld is more "
                           "than one launch covers (2^31 vectors)", op, (long long)a->tokens,
                           (long long)row);
    p.k_cache = a->k_cache; p.v_cache = a->v_cache; p.k = a->k; p.v = a->v;
    p.slots = a->slot_mapping;
    p.num_slots = a->num_pages * a->page_size;
    p.row = row;
    p.page_rows = strides[0]; p.slot_stride = strides[1]; p.head_stride = strides[2];
    p.head_dim = (uint32_t)a->head_dim;
    p.page_shift = talon__ceil_log2((uint64_t)a->page_size);
    p.row_vecs = (uint32_t)(row / vec);
    talon__div_magic(2ull * p.row_vecs, &p.div_m, &p.div_l);
    p.units = (uint32_t)(units * a->tokens);
    TALON__TRY(talon__pick(op, &k, fp8 ? TALON__B_kv_append_fp8 : TALON__B_kv_append, 2,
                           (int)a->dtype, vec));
    talon__check_set(ctx, &p.check, k);
    return talon__launch(ctx, stream, op, k, ((int64_t)p.units + per_block - 1) / per_block, &p);
}

#endif
