/* talon/impl/rope.h - rotary position embedding. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_ROPE_H
#define TALON_IMPL_ROPE_H

/* ---------------------------------------------------------------- rotary embedding, KV cache */
talon_status talon_rope(talon_ctx *ctx, CUstream stream, const talon_rope_args *a) {
    static const char op[] = "talon_rope";
    const int pos_bytes = a && a->positions_dtype == TALON_INDEX_I64 ? 8 : 4;
    talon__rope_params p;
    int64_t rot, heads, vp, per_token;
    int vec, neox, one, block, k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_dtype(op, a->dtype));
    if (a->style != TALON_ROPE_NEOX && a->style != TALON_ROPE_GPTJ)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->style = %d is not TALON_ROPE_NEOX (0) or TALON_ROPE_GPTJ (1)",
                           op, (int)a->style);
    if (a->positions_dtype != TALON_INDEX_I32 && a->positions_dtype != TALON_INDEX_I64)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->positions_dtype = %d is not TALON_INDEX_I32 (0) or "
                           "TALON_INDEX_I64 (1)", op, (int)a->positions_dtype);
    TALON__TRY(talon__check_ptr(op, "q", a->q, 0));
    TALON__TRY(talon__check_ptr(op, "k", a->k, 1));
    TALON__TRY(talon__check_ptr_align(op, "positions", a->positions, 0, pos_bytes));
    TALON__TRY(talon__check_ptr_align(op, "cos_sin_cache", a->cos_sin_cache, 1, 4));
    TALON__TRY(talon__check_size(op, "tokens", a->tokens, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "num_q_heads", a->num_q_heads, 1 << 20));
    if (a->k) TALON__TRY(talon__check_size(op, "num_kv_heads", a->num_kv_heads, 1 << 20));
    else if (a->num_kv_heads)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->num_kv_heads = %lld but args->k is NULL (0 rotates q only)",
                           op, (long long)a->num_kv_heads);
    TALON__TRY(talon__check_size(op, "head_dim", a->head_dim, 1024));
    rot = a->rot_dim ? a->rot_dim : a->head_dim;
    if (rot < 2 || rot > a->head_dim || rot % 2)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->rot_dim = %lld must be even and in [2, head_dim = %lld] "
                           "(0: head_dim)", op, (long long)a->rot_dim, (long long)a->head_dim);
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "q_stride", a->q_stride, a->num_q_heads * a->head_dim,
                                   &p.q_stride));
    TALON__TRY(talon__check_stride(op, "k_stride", a->k_stride, a->num_kv_heads * a->head_dim,
                                   &p.k_stride));
    if (a->cos_sin_cache) {
        TALON__TRY(talon__check_size(op, "max_pos", a->max_pos, INT64_MAX / 1024));
    } else if (!(a->theta >= 0.0f && a->theta <= 3.4028235e38f)) {
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->theta = %g must be finite and > 0 (0: 10000), or pass "
                           "args->cos_sin_cache", op, (double)a->theta);
    }
    neox = a->style == TALON_ROPE_NEOX;
    {
        const CUdeviceptr ptrs[3] = {a->q, a->k, a->cos_sin_cache};
        const int64_t lens[4] = {a->head_dim, p.q_stride, p.k_stride, neox ? rot / 2 : rot};
        vec = talon__vec8(ptrs, 3, lens, 4) ? 8 : 1;
    }
    vp = vec == 1 ? 1 : neox ? 8 : 4;
    one = neox && vec == 8 && a->cos_sin_cache; /* one head per thread, not TALON__ROPE_HEADS */
    heads = a->num_q_heads + (a->k ? a->num_kv_heads : 0);
    per_token = one ? heads : (heads + TALON__ROPE_HEADS - 1) / TALON__ROPE_HEADS;
    per_token *= rot / 2 / vp;
    if (per_token > TALON__GRID_MAX / a->tokens)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->tokens = %lld with %lld heads and rot_dim %lld needs %.0f "
                           "threads, more than 2^31 - 1", op, (long long)a->tokens,
                           (long long)heads, (long long)rot, (double)per_token * (double)a->tokens);
    p.q = a->q; p.k = a->k; p.positions = a->positions; p.cos_sin = a->cos_sin_cache;
    p.max_pos = a->max_pos;
    p.theta = a->theta > 0.0f ? (double)a->theta : 10000.0;
    p.num_q_heads = (int32_t)a->num_q_heads; p.heads = (int32_t)heads;
    p.head_dim = (int32_t)a->head_dim; p.rot_dim = (int32_t)rot;
    p.vecs = (uint32_t)(rot / 2 / vp); p.per_token = (uint32_t)per_token;
    p.threads = (uint32_t)(per_token * a->tokens);
    p.pos64 = a->positions_dtype == TALON_INDEX_I64;
    TALON__TRY(talon__pick(op, &k,
                           one ? TALON__B_rope_neox1 : neox ? TALON__B_rope_neox : TALON__B_rope_gptj,
                           2, (int)a->dtype, vec));
    talon__check_set(ctx, &p.check, k);
    block = talon__kernels[k].block;
    return talon__launch(ctx, stream, op, k, ((int64_t)p.threads + block - 1) / block, &p);
}

#endif
