/* Built four ways (C99 and C++17, -pedantic, header-only and against libtalon.a): calls every
   public function of talon.h (each op with a NULL ctx) and runs without a GPU. Exit status 0 when the header's
   version macros agree with the compiled talon_version() and every call behaved. */
#include <stdio.h>
#include <string.h>
#include "talon.h"

static int failures = 0;

static void expect(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "compile_check: %s\n", what);
        failures++;
    }
}

/* Every op rejects a NULL ctx on the host, so none of this needs a driver. */
static void check_ops(void) {
    talon_rmsnorm_args rms;
    talon_fused_add_rmsnorm_args add;
    talon_layernorm_args ln;
    talon_silu_and_mul_args silu;
    talon_gelu_and_mul_args gelu;
    talon_ctx *ctx = NULL;
    CUstream stream = NULL;

    memset(&rms, 0, sizeof rms);
    rms.out = 0x1000; rms.in = 0x2000; rms.weight = 0x3000; rms.rows = 2; rms.cols = 8;
    rms.out_stride = 0; rms.in_stride = 0; rms.eps = 1e-6f; rms.dtype = TALON_DTYPE_BF16;
    expect(talon_rmsnorm(ctx, stream, &rms) == TALON_ERROR_INVALID_ARGUMENT, "talon_rmsnorm(NULL ctx)");

    memset(&add, 0, sizeof add);
    add.in = 0x1000; add.residual = 0x2000; add.weight = 0x3000; add.rows = 2; add.cols = 8;
    add.in_stride = 0; add.residual_stride = 0; add.eps = 1e-6f; add.dtype = TALON_DTYPE_F16;
    expect(talon_fused_add_rmsnorm(ctx, stream, &add) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_fused_add_rmsnorm(NULL ctx)");

    memset(&ln, 0, sizeof ln);
    ln.out = 0x1000; ln.in = 0x2000; ln.weight = 0x3000; ln.bias = 0; ln.rows = 2; ln.cols = 8;
    ln.out_stride = 0; ln.in_stride = 0; ln.eps = 1e-5f; ln.dtype = TALON_DTYPE_F32;
    expect(talon_layernorm(ctx, stream, &ln) == TALON_ERROR_INVALID_ARGUMENT, "talon_layernorm(NULL ctx)");

    memset(&silu, 0, sizeof silu);
    silu.out = 0x1000; silu.in = 0x2000; silu.rows = 2; silu.cols = 8;
    silu.out_stride = 0; silu.in_stride = 0; silu.dtype = TALON_DTYPE_BF16;
    expect(talon_silu_and_mul(ctx, stream, &silu) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_silu_and_mul(NULL ctx)");

    memset(&gelu, 0, sizeof gelu);
    gelu.out = 0x1000; gelu.in = 0x2000; gelu.rows = 2; gelu.cols = 8;
    gelu.out_stride = 0; gelu.in_stride = 0; gelu.dtype = TALON_DTYPE_F16; gelu.approx = TALON_GELU_ERF;
    expect(talon_gelu_and_mul(ctx, stream, &gelu) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_gelu_and_mul(NULL ctx)");
    gelu.approx = TALON_GELU_TANH;
    expect(talon_gelu_and_mul(ctx, stream, &gelu) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_gelu_and_mul(NULL ctx, tanh)");
    expect(talon_last_error()[0] != '\0', "talon_last_error() empty after a failure");
}

/* The ops after the norms and activations, each with its enums and helpers. */
static void check_more_ops(void) {
    talon_moe_router_topk_args router;
    talon_topk_args topk;
    talon_moe_align_block_size_args align;
    talon_moe_sum_args sum;
    talon_rope_args rope;
    talon_kv_append_args kv;
    talon_decode_attention_args dec;
    talon_merge_attention_states_args merge;
    talon_prefill_attention_args pre;
    talon_gemm_args gemm;
    talon_quant_fp8_args quant;
    talon_prefill_attention_paged_args paged;
    talon_rmsnorm_quant_fp8_args nq;
    talon_moe_gemm_args moe;
    talon_grouped_gemm_args grouped;
    talon_gather_rows_args gather;
    talon_ctx *ctx = NULL;
    CUstream stream = NULL;
    int64_t sorted = 0, blocks = 0, bytes = -1;

    memset(&router, 0, sizeof router);
    router.topk_weights = 0x1000; router.topk_ids = 0x2000; router.logits = 0x3000;
    router.tokens = 4; router.experts = 64; router.k = 6; router.logits_dtype = TALON_DTYPE_F32;
    router.scoring = TALON_ROUTER_SIGMOID; router.renormalize = 1;
    expect(talon_moe_router_topk(ctx, stream, &router) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_moe_router_topk(NULL ctx)");
    router.scoring = TALON_ROUTER_SOFTMAX;

    memset(&topk, 0, sizeof topk);
    topk.out_values = 0x1000; topk.out_indices = 0x2000; topk.in = 0x3000; topk.workspace = 0x4000;
    topk.rows = 2; topk.cols = 1000; topk.k = 10; topk.sorted = 1; topk.dtype = TALON_DTYPE_F32;
    expect(talon_topk_workspace_size(ctx, &topk, &topk.workspace_bytes) ==
               TALON_ERROR_INVALID_ARGUMENT, "talon_topk_workspace_size(NULL ctx)");
    expect(talon_topk(ctx, stream, &topk) == TALON_ERROR_INVALID_ARGUMENT, "talon_topk(NULL ctx)");

    expect(talon_moe_align_block_size_capacity(16, 8, 256, 64, &sorted, &blocks) == TALON_SUCCESS &&
               sorted > 0 && blocks > 0,
           "talon_moe_align_block_size_capacity");
    memset(&align, 0, sizeof align);
    align.sorted_token_ids = 0x1000; align.expert_ids = 0x2000; align.num_tokens_post_padded = 0x3000;
    align.topk_ids = 0x4000; align.tokens = 16; align.k = 8; align.experts = 256; align.block_size = 64;
    align.sorted_capacity = sorted; align.expert_ids_capacity = blocks;
    expect(talon_moe_align_block_size(ctx, stream, &align) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_moe_align_block_size(NULL ctx)");

    memset(&sum, 0, sizeof sum);
    sum.out = 0x1000; sum.in = 0x2000; sum.weights = 0x3000; sum.tokens = 2; sum.k = 8;
    sum.hidden = 64; sum.dtype = TALON_DTYPE_BF16;
    expect(talon_moe_sum(ctx, stream, &sum) == TALON_ERROR_INVALID_ARGUMENT, "talon_moe_sum(NULL ctx)");

    memset(&rope, 0, sizeof rope);
    rope.q = 0x1000; rope.k = 0x2000; rope.positions = 0x3000; rope.tokens = 2;
    rope.num_q_heads = 4; rope.num_kv_heads = 2; rope.head_dim = 64; rope.theta = 10000.0f;
    rope.dtype = TALON_DTYPE_BF16; rope.positions_dtype = TALON_INDEX_I64; rope.style = TALON_ROPE_GPTJ;
    expect(talon_rope(ctx, stream, &rope) == TALON_ERROR_INVALID_ARGUMENT, "talon_rope(NULL ctx)");
    rope.positions_dtype = TALON_INDEX_I32; rope.style = TALON_ROPE_NEOX;

    memset(&kv, 0, sizeof kv);
    kv.k_cache = 0x1000; kv.v_cache = 0x2000; kv.k = 0x3000; kv.v = 0x4000; kv.slot_mapping = 0x5000;
    kv.tokens = 2; kv.num_kv_heads = 2; kv.head_dim = 64; kv.num_pages = 4; kv.page_size = 16;
    kv.dtype = TALON_DTYPE_BF16; kv.cache_dtype = TALON_DTYPE_FP8_E4M3; kv.k_scale = 1.0f;
    kv.v_scale = 1.0f; kv.layout = TALON_KV_HND;
    expect(talon_kv_append(ctx, stream, &kv) == TALON_ERROR_INVALID_ARGUMENT, "talon_kv_append(NULL ctx)");
    kv.layout = TALON_KV_NHD;

    memset(&dec, 0, sizeof dec);
    dec.o = 0x1000; dec.q = 0x2000; dec.k_cache = 0x3000; dec.v_cache = 0x4000;
    dec.page_table = 0x5000; dec.kv_lens = 0x6000; dec.batch = 2; dec.num_qo_heads = 8;
    dec.num_kv_heads = 2; dec.head_dim = 128; dec.page_size = 16; dec.max_kv_len = 1024;
    dec.dtype = TALON_DTYPE_BF16; dec.kv_dtype = TALON_DTYPE_BF16; dec.layout = TALON_KV_NHD;
    expect(talon_decode_attention_workspace_size(ctx, &dec, &bytes) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_decode_attention_workspace_size(NULL ctx)");
    expect(talon_decode_attention(ctx, stream, &dec) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_decode_attention(NULL ctx)");

    memset(&merge, 0, sizeof merge);
    merge.o = 0x1000; merge.o_a = 0x2000; merge.lse_a = 0x3000; merge.o_b = 0x4000;
    merge.lse_b = 0x5000; merge.rows = 2; merge.head_dim = 64; merge.dtype = TALON_DTYPE_F16;
    expect(talon_merge_attention_states(ctx, stream, &merge) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_merge_attention_states(NULL ctx)");

    memset(&pre, 0, sizeof pre);
    pre.o = 0x1000; pre.q = 0x2000; pre.k = 0x3000; pre.v = 0x4000; pre.cu_seqlens_q = 0x5000;
    pre.cu_seqlens_k = 0x6000; pre.batch = 2; pre.total_q = 300; pre.total_kv = 300;
    pre.max_seqlen_q = 200; pre.num_qo_heads = 8; pre.num_kv_heads = 2; pre.head_dim = 128;
    pre.causal = 1; pre.dtype = TALON_DTYPE_BF16;
    expect(talon_prefill_attention_workspace_size(ctx, &pre, &bytes) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_prefill_attention_workspace_size(NULL ctx)");
    expect(talon_prefill_attention(ctx, stream, &pre) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_prefill_attention(NULL ctx)");

    memset(&paged, 0, sizeof paged);
    paged.o = 0x1000; paged.q = 0x2000; paged.k_cache = 0x3000; paged.v_cache = 0x4000;
    paged.page_table = 0x5000; paged.kv_lens = 0x6000; paged.cu_seqlens_q = 0x7000;
    paged.batch = 2; paged.total_q = 300; paged.max_seqlen_q = 200; paged.max_kv_len = 1024;
    paged.num_pages = 128; paged.page_size = 16; paged.num_qo_heads = 8; paged.num_kv_heads = 2;
    paged.head_dim = 128; paged.causal = 1; paged.dtype = TALON_DTYPE_BF16; paged.layout = TALON_KV_HND;
    expect(talon_prefill_attention_paged_workspace_size(ctx, &paged, &bytes) ==
               TALON_ERROR_INVALID_ARGUMENT, "talon_prefill_attention_paged_workspace_size(NULL ctx)");
    expect(talon_prefill_attention_paged(ctx, stream, &paged) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_prefill_attention_paged(NULL ctx)");

    memset(&gemm, 0, sizeof gemm);
    gemm.d = 0x1000; gemm.a = 0x2000; gemm.b = 0x3000; gemm.m = 16; gemm.n = 64; gemm.k = 64;
    gemm.act = TALON_GEMM_ACT_SILU; gemm.gated = 1; gemm.dtype = TALON_DTYPE_BF16;
    gemm.out_dtype = TALON_DTYPE_F32;
    expect(talon_gemm(ctx, stream, &gemm) == TALON_ERROR_INVALID_ARGUMENT, "talon_gemm(NULL ctx)");

    memset(&quant, 0, sizeof quant);
    quant.out = 0x1000; quant.in = 0x2000; quant.scale = 0x3000; quant.rows = 4; quant.cols = 128;
    quant.mode = TALON_QUANT_GROUP; quant.dtype = TALON_DTYPE_BF16;
    expect(talon_quant_fp8(ctx, stream, &quant) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_quant_fp8(NULL ctx)");

    memset(&nq, 0, sizeof nq);
    nq.out = 0x1000; nq.scale = 0x2000; nq.in = 0x3000; nq.weight = 0x4000; nq.rows = 4;
    nq.cols = 128; nq.eps = 1e-6f; nq.mode = TALON_QUANT_TOKEN; nq.dtype = TALON_DTYPE_BF16;
    expect(talon_rmsnorm_quant_fp8(ctx, stream, &nq) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_rmsnorm_quant_fp8(NULL ctx)");

    memset(&moe, 0, sizeof moe);
    moe.d = 0x1000; moe.a = 0x2000; moe.b = 0x3000; moe.sorted_token_ids = 0x4000;
    moe.expert_ids = 0x5000; moe.num_tokens_post_padded = 0x6000; moe.topk_weights = 0x7000;
    moe.tokens = 4; moe.topk = 2; moe.experts = 8; moe.block_size = 128;
    moe.sorted_capacity = 1024; moe.expert_ids_capacity = 8; moe.n = 64; moe.k = 64;
    moe.a_rows = TALON_MOE_ROWS_TOKEN; moe.d_rows = TALON_MOE_ROWS_PAIR;
    moe.act = TALON_GEMM_ACT_SILU; moe.gated = 1; moe.dtype = TALON_DTYPE_BF16;
    expect(talon_moe_gemm(ctx, stream, &moe) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_moe_gemm(NULL ctx)");
    moe.a_rows = TALON_MOE_ROWS_SORTED;

    memset(&grouped, 0, sizeof grouped);
    grouped.d = 0x1000; grouped.a = 0x2000; grouped.b = 0x3000; grouped.group_rows = 0x4000;
    grouped.groups = 8; grouped.rows = 256; grouped.n = 64; grouped.k = 64;
    grouped.layout = TALON_GROUPED_MASKED; grouped.act = TALON_GEMM_ACT_SILU; grouped.gated = 1;
    grouped.dtype = TALON_DTYPE_BF16;
    expect(talon_grouped_gemm(ctx, stream, &grouped) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_grouped_gemm(NULL ctx)");
    grouped.layout = TALON_GROUPED_CONTIGUOUS;

    memset(&gather, 0, sizeof gather);
    gather.out = 0x1000; gather.in = 0x2000; gather.indices = 0x3000; gather.rows = 4;
    gather.cols = 64; gather.in_rows = 100; gather.index_dtype = TALON_INDEX_I64;
    expect(talon_gather_rows(ctx, stream, &gather) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_gather_rows(NULL ctx)");
}

static void check_statuses(void) {
#define STATUS_VALUE(name, value, text) name,
    static const talon_status all[] = {TALON_STATUS_LIST(STATUS_VALUE)};
#undef STATUS_VALUE
    const char *unknown = talon_status_string(TALON__STATUS_COUNT);
    size_t i;
    expect(unknown != NULL && unknown[0] != '\0', "talon_status_string(out of range) empty");
    for (i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *s = talon_status_string(all[i]);
        expect(s != NULL && s[0] != '\0', "talon_status_string empty");
        expect(s != NULL && unknown != NULL && strcmp(s, unknown) != 0, "talon_status_string unknown for a listed status");
    }
}

static void check_version(void) {
    const talon_bundle_info *info = talon_bundle_info_get();
    char v[32];
    int i;
    snprintf(v, sizeof v, "%d.%d.%d", TALON_VERSION_MAJOR, TALON_VERSION_MINOR, TALON_VERSION_PATCH);
    expect(talon_version() ==
               TALON_VERSION_MAJOR * 10000 + TALON_VERSION_MINOR * 100 + TALON_VERSION_PATCH,
           "talon_version() disagrees with TALON_VERSION_* (header and archive differ?)");
    expect(strcmp(v, TALON_VERSION_STRING) == 0, "TALON_VERSION_STRING disagrees with TALON_VERSION_*");
    expect(info != NULL, "talon_bundle_info_get() is NULL");
    if (!info) return;
    expect(strcmp(info->version, TALON_VERSION_STRING) == 0, "bundle version disagrees with the header");
    expect(info->num_images > 0 && info->num_kernels > 0 && info->kernel_names != NULL,
           "empty bundle");
    for (i = 0; info->kernel_names && i < info->num_kernels; i++)
        expect(info->kernel_names[i] != NULL && info->kernel_names[i][0] != '\0', "empty kernel name");
    printf("talon %s (commit %s, nvcc %s, %s): %d images, %d kernels\n", info->version,
           info->git_commit, info->nvcc_version, info->arch, info->num_images, info->num_kernels);
}

/* Without a GPU or driver creation fails cleanly; with one, the ctx is torn down again. */
static void check_ctx(void) {
    talon_ctx *ctx = NULL;
    talon_ctx_options opt;
    talon_status s;
    memset(&opt, 0, sizeof opt);
    opt.context = NULL;
    opt.flags = 0u;
    expect(talon_ctx_create(NULL, &opt) == TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_create(NULL out)");
    opt.flags = 0x80u;
    expect(talon_ctx_create(&ctx, &opt) == TALON_ERROR_INVALID_ARGUMENT && ctx == NULL,
           "talon_ctx_create(unknown flags)");
    opt.flags = (unsigned)TALON_CTX_PRELOAD;
    s = talon_ctx_create(&ctx, &opt);
    if (s == TALON_SUCCESS) {
        expect(ctx != NULL && talon_ctx_preload(ctx) == TALON_SUCCESS, "talon_ctx_preload");
    } else {
        expect(ctx == NULL, "talon_ctx_create failed but set *out");
        expect(talon_last_error()[0] != '\0', "talon_ctx_create failed without a message");
    }
    talon_ctx_destroy(ctx);
    talon_ctx_destroy(NULL);
    expect(talon_ctx_preload(NULL) == TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_preload(NULL)");
    {
        talon_check_report report;
        memset(&report, 0xff, sizeof report);
        expect(talon_ctx_check(NULL, NULL, &report) == TALON_ERROR_INVALID_ARGUMENT &&
                   report.violated == 0 && report.op == NULL,
               "talon_ctx_check(NULL ctx)");
    }
    opt.flags = (unsigned)TALON_CTX_CHECKED;
    ctx = NULL;
    s = talon_ctx_create(&ctx, &opt);
    if (s == TALON_SUCCESS) {
        talon_check_report report;
        expect(talon_ctx_check(ctx, NULL, &report) == TALON_SUCCESS && report.violated == 0,
               "talon_ctx_check(checked ctx)");
    } else {
        expect(ctx == NULL && talon_last_error()[0] != '\0', "talon_ctx_create(TALON_CTX_CHECKED)");
    }
    talon_ctx_destroy(ctx);
}

int main(void) {
    check_version();
    check_statuses();
    check_ops();
    check_more_ops();
    check_ctx();
    return failures ? 1 : 0;
}
