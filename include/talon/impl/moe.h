/* talon/impl/moe.h - moe_align_block_size, moe_sum. Part of talon.h's implementation (TALON_IMPLEMENTATION); not a
   public header. */
#ifndef TALON_IMPL_MOE_H
#define TALON_IMPL_MOE_H

/* ---------------------------------------------------------------- mixture of experts */
/* Shape limits of moe_align_block_size; pre is "args->" for the op, "" for the capacity
   helper, so each message names the argument as the caller spelled it. */
static talon_status talon__moe_align_shape(const char *op, const char *pre, int64_t tokens,
                                           int64_t k, int64_t experts, int64_t block_size) {
    static const struct { const char *name; int64_t max; } lim[3] = {
        {"tokens", 65536}, {"k", 64}, {"experts", TALON__MOE_MAX_EXPERTS}};
    const int64_t v[3] = {tokens, k, experts};
    int i;
    for (i = 0; i < 3; i++)
        if (v[i] < 1 || v[i] > lim[i].max)
            return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                               "%s: %s%s = %lld is out of range [1, %lld]", op, pre, lim[i].name,
                               (long long)v[i], (long long)lim[i].max);
    if (block_size < 1 || block_size > 1024 || (block_size & (block_size - 1)))
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: %sblock_size = %lld is not a power of two in [1, 1024]", op, pre,
                           (long long)block_size);
    return TALON_SUCCESS;
}

static void talon__moe_align_worst(int64_t tokens, int64_t k, int64_t experts,
                                   int64_t block_size, int64_t *sorted, int64_t *blocks) {
    const int64_t n = tokens * k;
    *sorted = n + (experts < n ? experts : n) * (block_size - 1);
    *blocks = (*sorted + block_size - 1) / block_size;
}

talon_status talon_moe_align_block_size_capacity(int64_t tokens, int64_t k, int64_t experts,
                                                 int64_t block_size, int64_t *sorted_capacity,
                                                 int64_t *expert_ids_capacity) {
    int64_t sorted, blocks;
    TALON__TRY(talon__moe_align_shape("talon_moe_align_block_size_capacity", "", tokens, k,
                                      experts, block_size));
    talon__moe_align_worst(tokens, k, experts, block_size, &sorted, &blocks);
    if (sorted_capacity) *sorted_capacity = sorted;
    if (expert_ids_capacity) *expert_ids_capacity = blocks;
    return TALON_SUCCESS;
}

talon_status talon_moe_align_block_size(talon_ctx *ctx, CUstream stream,
                                        const talon_moe_align_block_size_args *a) {
    static const char op[] = "talon_moe_align_block_size";
    talon__moe_align_params p;
    talon__moe_align_plan pl;
    int64_t sorted, blocks, n;
    int k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr_align(op, "sorted_token_ids", a->sorted_token_ids, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "expert_ids", a->expert_ids, 0, 4));
    TALON__TRY(talon__check_ptr_align(op, "num_tokens_post_padded", a->num_tokens_post_padded,
                                      0, 4));
    TALON__TRY(talon__check_ptr_align(op, "topk_ids", a->topk_ids, 0, 4));
    TALON__TRY(talon__moe_align_shape(op, "args->", a->tokens, a->k, a->experts, a->block_size));
    talon__moe_align_worst(a->tokens, a->k, a->experts, a->block_size, &sorted, &blocks);
    if (a->sorted_capacity < sorted || a->expert_ids_capacity < blocks)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->%s = %lld is below the worst case %lld for tokens = %lld, "
                           "k = %lld, experts = %lld, block_size = %lld "
                           "(talon_moe_align_block_size_capacity)",
                           op, a->sorted_capacity < sorted ? "sorted_capacity" : "expert_ids_capacity",
                           (long long)(a->sorted_capacity < sorted ? a->sorted_capacity
                                                                   : a->expert_ids_capacity),
                           (long long)(a->sorted_capacity < sorted ? sorted : blocks),
                           (long long)a->tokens, (long long)a->k, (long long)a->experts,
                           (long long)a->block_size);
    /* no shape needs more (the worst case stays below 2^23), and the plan's slice
       arithmetic stays in range */
    TALON__TRY(talon__check_range(op, "sorted_capacity", a->sorted_capacity, sorted,
                                  TALON__GRID_MAX));
    TALON__TRY(talon__check_range(op, "expert_ids_capacity", a->expert_ids_capacity, blocks,
                                  TALON__GRID_MAX));
    n = a->tokens * a->k;
    pl = talon__moe_align_plan_make(n, a->sorted_capacity, a->expert_ids_capacity);
    memset(&p, 0, sizeof p);
    p.sorted = a->sorted_token_ids; p.expert_ids = a->expert_ids;
    p.num_post = a->num_tokens_post_padded; p.topk_ids = a->topk_ids;
    p.sorted_capacity = a->sorted_capacity; p.expert_ids_capacity = a->expert_ids_capacity;
    p.numel = (int)n; p.experts = (int)a->experts; p.block_size = (int)a->block_size;
    p.chunk = pl.chunk;
    p.sorted_slice = pl.sorted_slice; p.expert_ids_slice = pl.expert_ids_slice;
    if (pl.ids)
        TALON__TRY(talon__pick(op, &k, TALON__B_moe_align_regs, 3, pl.cluster, pl.ids, pl.sliced));
    else
        TALON__TRY(talon__pick(op, &k, TALON__B_moe_align_looped, 2, pl.cluster,
                               TALON__MOE_ALIGN_STAGE_X8));
    return talon__launch(ctx, stream, op, k, pl.grid, &p);
}

talon_status talon_moe_sum(talon_ctx *ctx, CUstream stream, const talon_moe_sum_args *a) {
    static const char op[] = "talon_moe_sum";
    talon__moe_sum_params p;
    CUdeviceptr ptrs[2];
    int vec, r, k;
    TALON__TRY(talon__check_common(op, ctx, a));
    TALON__TRY(talon__check_ptr(op, "out", a->out, 0));
    TALON__TRY(talon__check_ptr(op, "in", a->in, 0));
    TALON__TRY(talon__check_ptr_align(op, "weights", a->weights, 1, 4));
    TALON__TRY(talon__check_size(op, "tokens", a->tokens, TALON__GRID_MAX));
    TALON__TRY(talon__check_size(op, "k", a->k, 64));
    TALON__TRY(talon__check_size(op, "hidden", a->hidden, TALON__GRID_MAX));
    TALON__TRY(talon__check_dtype(op, a->dtype));
    ptrs[0] = a->out; ptrs[1] = a->in;
    vec = talon__vec8(ptrs, 2, &a->hidden, 1) ? 8 : 1;
    r = talon__moe_sum_slices(vec, a->k);
    TALON__TRY(talon__pick(op, &k, TALON__B_moe_sum, 3, (int)a->dtype, vec, r));
    memset(&p, 0, sizeof p);
    p.out = a->out; p.in = a->in; p.weights = a->weights; p.hidden = a->hidden;
    p.k = (int)a->k;
    p.chunks = (int)((a->hidden + 256 * vec * r - 1) / (256 * vec * r));
    if (p.chunks > TALON__GRID_MAX / a->tokens)
        return talon__fail(TALON_ERROR_INVALID_ARGUMENT,
                           "%s: args->tokens = %lld with args->hidden = %lld needs %.0f blocks, "
                           "more than the grid limit %lld",
                           op, (long long)a->tokens, (long long)a->hidden,
                           (double)p.chunks * (double)a->tokens, TALON__GRID_MAX);
    return talon__launch(ctx, stream, op, k, a->tokens * p.chunks, &p);
}

#endif
