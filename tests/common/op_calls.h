/* Every op of talon.h behind one union and one number, for the tests that drive all of them:
   through the fake driver tests/core/fuzz_ops.c (any bytes), test_faults.c (valid calls under
   driver faults) and test_checked.c; on the GPU tests/core/op_cases.h (random valid shapes)
   and test_gpu_checked.c. op_call(ctx, stream, op, args) calls op. Included after
   fake_driver.h, it also gives STREAM and op_valid_args, which fills a call each op accepts
   (fake addresses one GiB apart, so no two buffers overlap; workspaces of 1 GiB). */
#ifndef TALON_TESTS_OP_CALLS_H
#define TALON_TESTS_OP_CALLS_H

typedef union op_args {
    talon_rmsnorm_args rmsnorm;
    talon_fused_add_rmsnorm_args fused_add_rmsnorm;
    talon_layernorm_args layernorm;
    talon_silu_and_mul_args silu;
    talon_gelu_and_mul_args gelu;
    talon_moe_router_topk_args router;
    talon_topk_args topk;
    talon_moe_align_block_size_args align;
    talon_moe_sum_args moe_sum;
    talon_rope_args rope;
    talon_kv_append_args kv_append;
    talon_gather_rows_args gather;
    talon_decode_attention_args decode;
    talon_merge_attention_states_args merge;
    talon_prefill_attention_args prefill;
    talon_prefill_attention_paged_args prefill_paged;
    talon_gemm_args gemm;
    talon_quant_fp8_args quant;
    talon_rmsnorm_quant_fp8_args rmsnorm_quant;
    talon_moe_gemm_args moe_gemm;
    talon_grouped_gemm_args grouped_gemm;
} op_args;

/* X(name, union member): every op of talon.h. */
#define TEST_OPS(X)                                                                            \
    X(rmsnorm, rmsnorm) X(fused_add_rmsnorm, fused_add_rmsnorm) X(layernorm, layernorm)        \
    X(silu_and_mul, silu) X(gelu_and_mul, gelu) X(moe_router_topk, router) X(topk, topk)       \
    X(moe_align_block_size, align) X(moe_sum, moe_sum) X(rope, rope) X(kv_append, kv_append)   \
    X(gather_rows, gather) X(decode_attention, decode) X(merge_attention_states, merge)        \
    X(prefill_attention, prefill) X(prefill_attention_paged, prefill_paged) X(gemm, gemm)      \
    X(quant_fp8, quant) X(rmsnorm_quant_fp8, rmsnorm_quant) X(moe_gemm, moe_gemm)            \
    X(grouped_gemm, grouped_gemm)

enum {
#define OP_ENUM(name, member) OP_##name,
    TEST_OPS(OP_ENUM)
#undef OP_ENUM
    NUM_OPS
};

static const char *const op_names[] = {
#define OP_NAME(name, member) "talon_" #name,
    TEST_OPS(OP_NAME)
#undef OP_NAME
};

static const size_t op_sizes[] = {
#define OP_SIZE(name, member) sizeof(((op_args *)0)->member),
    TEST_OPS(OP_SIZE)
#undef OP_SIZE
};

#if defined(__GNUC__)
__attribute__((unused))
#endif
static talon_status op_call(talon_ctx *ctx, CUstream stream, int op, const op_args *a) {
    switch (op) {
#define OP_CALL(name, member) case OP_##name: return talon_##name(ctx, stream, &a->member);
        TEST_OPS(OP_CALL)
#undef OP_CALL
    }
    return TALON__STATUS_COUNT;
}

#ifdef TALON_TESTS_FAKE_DRIVER_H
#define STREAM ((CUstream)(uintptr_t)0x5157)
#define GB (CUdeviceptr)0x40000000ull /* one fake buffer per GiB: no overlaps */

static void op_valid_args(int op, op_args *a) {
    memset(a, 0, sizeof *a);
    switch (op) {
    case OP_rmsnorm:
        a->rmsnorm.out = 1 * GB; a->rmsnorm.in = 2 * GB; a->rmsnorm.weight = 3 * GB;
        a->rmsnorm.rows = 4; a->rmsnorm.cols = 4096; a->rmsnorm.eps = 1e-5f;
        break;
    case OP_fused_add_rmsnorm:
        a->fused_add_rmsnorm.in = 1 * GB; a->fused_add_rmsnorm.residual = 2 * GB;
        a->fused_add_rmsnorm.weight = 3 * GB; a->fused_add_rmsnorm.rows = 4;
        a->fused_add_rmsnorm.cols = 4096; a->fused_add_rmsnorm.eps = 1e-5f;
        break;
    case OP_layernorm:
        a->layernorm.out = 1 * GB; a->layernorm.in = 2 * GB; a->layernorm.weight = 3 * GB;
        a->layernorm.bias = 4 * GB; a->layernorm.rows = 4; a->layernorm.cols = 4096;
        a->layernorm.eps = 1e-5f;
        break;
    case OP_silu_and_mul:
        a->silu.out = 1 * GB; a->silu.in = 2 * GB; a->silu.rows = 4; a->silu.cols = 4096;
        break;
    case OP_gelu_and_mul:
        a->gelu.out = 1 * GB; a->gelu.in = 2 * GB; a->gelu.rows = 4; a->gelu.cols = 4096;
        break;
    case OP_moe_router_topk:
        a->router.topk_weights = 1 * GB; a->router.topk_ids = 2 * GB; a->router.logits = 3 * GB;
        a->router.tokens = 16; a->router.experts = 128; a->router.k = 8;
        break;
    case OP_topk:
        a->topk.out_values = 1 * GB; a->topk.out_indices = 2 * GB; a->topk.in = 3 * GB;
        a->topk.workspace = 4 * GB; a->topk.workspace_bytes = 1 << 30;
        a->topk.rows = 256; a->topk.cols = 131072; a->topk.k = 50; a->topk.sorted = 1;
        a->topk.dtype = TALON_DTYPE_F32;
        break;
    case OP_moe_align_block_size:
        a->align.sorted_token_ids = 1 * GB; a->align.expert_ids = 2 * GB;
        a->align.num_tokens_post_padded = 3 * GB; a->align.topk_ids = 4 * GB;
        a->align.tokens = 16; a->align.k = 8; a->align.experts = 128; a->align.block_size = 128;
        talon_moe_align_block_size_capacity(16, 8, 128, 128, &a->align.sorted_capacity,
                                            &a->align.expert_ids_capacity);
        break;
    case OP_moe_sum:
        a->moe_sum.out = 1 * GB; a->moe_sum.in = 2 * GB; a->moe_sum.weights = 3 * GB;
        a->moe_sum.tokens = 16; a->moe_sum.k = 8; a->moe_sum.hidden = 4096;
        break;
    case OP_rope:
        a->rope.q = 1 * GB; a->rope.k = 2 * GB; a->rope.positions = 3 * GB; a->rope.tokens = 16;
        a->rope.num_q_heads = 32; a->rope.num_kv_heads = 8; a->rope.head_dim = 128;
        break;
    case OP_kv_append:
        a->kv_append.k_cache = 1 * GB; a->kv_append.v_cache = 2 * GB; a->kv_append.k = 3 * GB;
        a->kv_append.v = 4 * GB; a->kv_append.slot_mapping = 5 * GB; a->kv_append.tokens = 16;
        a->kv_append.num_kv_heads = 8; a->kv_append.head_dim = 128;
        a->kv_append.num_pages = 64; a->kv_append.page_size = 16;
        break;
    case OP_gather_rows:
        a->gather.out = 1 * GB; a->gather.in = 2 * GB; a->gather.indices = 3 * GB;
        a->gather.rows = 4; a->gather.cols = 4096; a->gather.in_rows = 128256;
        break;
    case OP_decode_attention:
        a->decode.o = 1 * GB; a->decode.q = 2 * GB; a->decode.k_cache = 3 * GB;
        a->decode.v_cache = 4 * GB; a->decode.page_table = 5 * GB; a->decode.kv_lens = 6 * GB;
        a->decode.workspace = 7 * GB; a->decode.workspace_bytes = 1 << 30; a->decode.batch = 1;
        a->decode.num_qo_heads = 32; a->decode.num_kv_heads = 8; a->decode.head_dim = 128;
        a->decode.page_size = 16; a->decode.max_kv_len = 32768;
        break;
    case OP_merge_attention_states:
        a->merge.o = 1 * GB; a->merge.lse = 2 * GB; a->merge.o_a = 3 * GB;
        a->merge.lse_a = 4 * GB; a->merge.o_b = 5 * GB; a->merge.lse_b = 6 * GB;
        a->merge.rows = 64; a->merge.head_dim = 128;
        break;
    case OP_prefill_attention:
        a->prefill.o = 1 * GB; a->prefill.q = 2 * GB; a->prefill.k = 3 * GB;
        a->prefill.v = 4 * GB; a->prefill.cu_seqlens_q = 5 * GB; a->prefill.cu_seqlens_k = 6 * GB;
        a->prefill.workspace = 7 * GB; a->prefill.workspace_bytes = 16; a->prefill.batch = 2;
        a->prefill.total_q = 512; a->prefill.total_kv = 512; a->prefill.max_seqlen_q = 256;
        a->prefill.num_qo_heads = 32; a->prefill.num_kv_heads = 8; a->prefill.head_dim = 128;
        a->prefill.causal = 1;
        break;
    case OP_prefill_attention_paged:
        a->prefill_paged.o = 1 * GB; a->prefill_paged.q = 2 * GB;
        a->prefill_paged.k_cache = 3 * GB; a->prefill_paged.v_cache = 4 * GB;
        a->prefill_paged.page_table = 5 * GB; a->prefill_paged.kv_lens = 6 * GB;
        a->prefill_paged.cu_seqlens_q = 7 * GB; a->prefill_paged.workspace = 8 * GB;
        a->prefill_paged.workspace_bytes = 16; a->prefill_paged.batch = 2;
        a->prefill_paged.total_q = 512; a->prefill_paged.max_seqlen_q = 256;
        a->prefill_paged.max_kv_len = 1024; a->prefill_paged.num_pages = 256;
        a->prefill_paged.page_size = 16; a->prefill_paged.num_qo_heads = 32;
        a->prefill_paged.num_kv_heads = 8; a->prefill_paged.head_dim = 128;
        a->prefill_paged.causal = 1;
        break;
    case OP_gemm:
        a->gemm.d = 1 * GB; a->gemm.a = 2 * GB; a->gemm.b = 3 * GB;
        a->gemm.m = 4096; a->gemm.n = 4096; a->gemm.k = 4096;
        break;
    case OP_quant_fp8:
        a->quant.out = 1 * GB; a->quant.in = 2 * GB; a->quant.scale = 3 * GB;
        a->quant.rows = 16; a->quant.cols = 4096; a->quant.mode = TALON_QUANT_GROUP;
        break;
    case OP_rmsnorm_quant_fp8:
        a->rmsnorm_quant.out = 1 * GB; a->rmsnorm_quant.scale = 2 * GB;
        a->rmsnorm_quant.in = 3 * GB; a->rmsnorm_quant.weight = 4 * GB;
        a->rmsnorm_quant.rows = 16; a->rmsnorm_quant.cols = 4096; a->rmsnorm_quant.eps = 1e-5f;
        a->rmsnorm_quant.mode = TALON_QUANT_TOKEN;
        break;
    case OP_moe_gemm:
        a->moe_gemm.d = 1 * GB; a->moe_gemm.a = 2 * GB; a->moe_gemm.b = 3 * GB;
        a->moe_gemm.sorted_token_ids = 4 * GB; a->moe_gemm.expert_ids = 5 * GB;
        a->moe_gemm.num_tokens_post_padded = 6 * GB; a->moe_gemm.topk_weights = 7 * GB;
        a->moe_gemm.tokens = 4; a->moe_gemm.topk = 2; a->moe_gemm.experts = 8;
        a->moe_gemm.block_size = 128; a->moe_gemm.sorted_capacity = 1024;
        a->moe_gemm.expert_ids_capacity = 8; a->moe_gemm.n = 64; a->moe_gemm.k = 64;
        a->moe_gemm.a_rows = TALON_MOE_ROWS_TOKEN; a->moe_gemm.d_rows = TALON_MOE_ROWS_PAIR;
        a->moe_gemm.act = TALON_GEMM_ACT_SILU; a->moe_gemm.gated = 1;
        break;
    case OP_grouped_gemm:
        a->grouped_gemm.d = 1 * GB; a->grouped_gemm.a = 2 * GB; a->grouped_gemm.b = 3 * GB;
        a->grouped_gemm.group_rows = 4 * GB; a->grouped_gemm.groups = 8;
        a->grouped_gemm.rows = 256; a->grouped_gemm.n = 64; a->grouped_gemm.k = 64;
        a->grouped_gemm.layout = TALON_GROUPED_MASKED; a->grouped_gemm.act = TALON_GEMM_ACT_SILU;
        a->grouped_gemm.gated = 1;
        break;
    }
}

#endif /* TALON_TESTS_FAKE_DRIVER_H */

#endif
