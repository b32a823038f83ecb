/* talon/impl/router.h - moe_router_topk. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_ROUTER_H
#define TALON_IMPL_ROUTER_H

/* ---------------------------------------------------------------- MoE routing */
talon_status talon_moe_router_topk(talon_ctx *ctx, CUstream stream,
                                   const talon_moe_router_topk_args *a) {
    static const char op[] = "talon_moe_router_topk";
    talon__router_params p;
    int esize, vec, per_lane, k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_dtype_f32(op, "logits_dtype", a->logits_dtype, &esize));
    if (a->scoring != TALON_ROUTER_SOFTMAX && a->scoring != TALON_ROUTER_SIGMOID)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->scoring = %d is not TALON_ROUTER_SOFTMAX (0) or "
                           "TALON_ROUTER_SIGMOID (1)", op, (int)a->scoring);
    if (a->renormalize != 0 && a->renormalize != 1)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->renormalize = %d is not 0 or 1", op, a->renormalize);
    TALON__TRY(talon__check_size(op, "tokens", a->tokens, 65536));
    TALON__TRY(talon__check_size(op, "experts", a->experts, 512));
    TALON__TRY(talon__check_size(op, "k", a->k, 16));
    if (a->k > a->experts)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->k = %lld is larger than args->experts = %lld", op,
                           (long long)a->k, (long long)a->experts);
    TALON__TRY(talon__check_ptr_align(op, "topk_weights", a->topk_weights, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "topk_ids", a->topk_ids, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "logits", a->logits, 0, esize));
    TALON__TRY(talon__check_ptr_align(op, "correction_bias", a->correction_bias, 1, 4));
    memset(&p, 0, sizeof p);
    TALON__TRY(talon__check_stride(op, "logits_stride", a->logits_stride, a->experts,
                                   &p.logits_stride));
    p.logits = a->logits; p.bias = a->correction_bias;
    p.weights = a->topk_weights; p.ids = a->topk_ids;
    p.tokens = a->tokens; p.experts = (int)a->experts; p.k = (int)a->k;
    p.scoring = (int)a->scoring; p.renormalize = a->renormalize;
    vec = 16 / esize;
    if (a->logits % 16 || a->experts % vec || p.logits_stride % vec) vec = 1;
    per_lane = a->experts <= 128 ? 4 : a->experts <= 256 ? 8 : 16;
    if (per_lane < vec) per_lane = vec;
    TALON__TRY(talon__pick(op, &k, TALON__B_route, 4, (int)a->logits_dtype, vec, per_lane,
                           a->scoring == TALON_ROUTER_SOFTMAX && !a->correction_bias));
    return talon__launch(ctx, stream, op, k,
                         (a->tokens + TALON__ROUTER_TOKENS_PER_BLOCK - 1) /
                             TALON__ROUTER_TOKENS_PER_BLOCK,
                         &p);
}

#endif
