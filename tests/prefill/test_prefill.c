/* Dispatcher tests (fake driver, no GPU) for talon_prefill_attention and
   talon_prefill_attention_paged: one validation test per rule, and the exact launches (kernel,
   grid, block, shared memory, parameters and the three tensor maps) for every head_dim, both
   types and both cache layouts. */
#include "fake_driver.h"
#include "table_rows.h"
#include <math.h>

#define STREAM ((CUstream)(uintptr_t)0x5157)
enum { P_O = 0x10000000, P_LSE = 0x20000000, P_Q = 0x30000000, P_K = 0x40000000,
       P_V = 0x50000000, P_CUQ = 0x60000000, P_CUK = 0x70000000, P_PT = 0x71000000,
       P_LENS = 0x72000000, P_WS = 0x73000000 };
enum { OP_CONTIGUOUS, OP_PAGED }; /* the op a row is for */
#define P_WS_BYTES (64LL << 20) /* more than any row's plan asks for */

/* Two requests of up to 1000 tokens, Llama-3-8B heads: Hq=32, Hk=8, D=128, causal. */
static talon_prefill_attention_args valid(void) {
    talon_prefill_attention_args a;
    memset(&a, 0, sizeof a);
    a.o = P_O; a.lse = P_LSE; a.q = P_Q; a.k = P_K; a.v = P_V;
    a.cu_seqlens_q = P_CUQ; a.cu_seqlens_k = P_CUK;
    a.workspace = P_WS; a.workspace_bytes = P_WS_BYTES;
    a.batch = 2; a.total_q = 1500; a.total_kv = 1500; a.max_seqlen_q = 1000;
    a.num_qo_heads = 32; a.num_kv_heads = 8; a.head_dim = 128; a.causal = 1;
    return a;
}

/* The paged form: two requests of up to 1000 new tokens over up to 32768 keys in a cache of
   4096 pages of 16 (NHD), Llama-3-8B heads, causal. Each cache spans 128 MiB. */
static talon_prefill_attention_paged_args valid_paged(void) {
    talon_prefill_attention_paged_args a;
    memset(&a, 0, sizeof a);
    a.o = P_O; a.lse = P_LSE; a.q = P_Q; a.k_cache = P_K; a.v_cache = P_V;
    a.page_table = P_PT; a.kv_lens = P_LENS; a.cu_seqlens_q = P_CUQ;
    a.workspace = P_WS; a.workspace_bytes = P_WS_BYTES;
    a.batch = 2; a.total_q = 1500; a.max_seqlen_q = 1000; a.max_kv_len = 32768;
    a.num_pages = 4096; a.page_size = 16;
    a.num_qo_heads = 32; a.num_kv_heads = 8; a.head_dim = 128; a.causal = 1;
    return a;
}

/* ================================================================ validation */
#define P(f, k, v) SET(talon_prefill_attention_args, f, k, v)
#define G(f, k, v) SET(talon_prefill_attention_paged_args, f, k, v)
#define BAD(NAME, SETS, FIELD, VALUE)                                                          \
    {.name = "talon_prefill_attention rejects " NAME, .kind = BAD_FIELDS, .set = SETS,          \
     .field = FIELD, .value = VALUE}
#define BADP(NAME, SETS, FIELD, VALUE)                                                         \
    {.name = "talon_prefill_attention_paged rejects " NAME, .op = OP_PAGED,                    \
     .kind = BAD_FIELDS, .set = SETS, .field = FIELD, .value = VALUE}
static const bad_row bad_rows[] = {
    {.name = "talon_prefill_attention rejects ctx NULL", .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = "talon_prefill_attention rejects args NULL", .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    BAD("o NULL", ONE(P(o, PTR, 0)), "args->o", "NULL"),
    BAD("o not 16-byte aligned", ONE(P(o, PTR, P_O + 8)), "args->o", "0x10000008"),
    BAD("lse not 4-byte aligned", ONE(P(lse, PTR, P_LSE + 2)), "args->lse", "0x20000002"),
    BAD("q NULL", ONE(P(q, PTR, 0)), "args->q", "NULL"),
    BAD("q not 16-byte aligned", ONE(P(q, PTR, P_Q + 2)), "args->q", "0x30000002"),
    BAD("k NULL", ONE(P(k, PTR, 0)), "args->k", "NULL"),
    BAD("k not 16-byte aligned", ONE(P(k, PTR, P_K + 4)), "args->k", "0x40000004"),
    BAD("v NULL", ONE(P(v, PTR, 0)), "args->v", "NULL"),
    BAD("v not 16-byte aligned", ONE(P(v, PTR, P_V + 8)), "args->v", "0x50000008"),
    BAD("cu_seqlens_q NULL", ONE(P(cu_seqlens_q, PTR, 0)), "args->cu_seqlens_q", "NULL"),
    BAD("cu_seqlens_q not 4-byte aligned", ONE(P(cu_seqlens_q, PTR, P_CUQ + 2)), "args->cu_seqlens_q", "0x60000002"),
    BAD("cu_seqlens_k NULL", ONE(P(cu_seqlens_k, PTR, 0)), "args->cu_seqlens_k", "NULL"),
    BAD("cu_seqlens_k not 4-byte aligned", ONE(P(cu_seqlens_k, PTR, P_CUK + 1)), "args->cu_seqlens_k", "0x70000001"),
    BAD("workspace NULL", ONE(P(workspace, PTR, 0)), "args->workspace", "NULL"),
    BAD("workspace not 16-byte aligned", ONE(P(workspace, PTR, P_WS + 8)), "args->workspace", "0x73000008"),
    BAD("workspace_bytes 15", ONE(P(workspace_bytes, I64, 15)), "args->workspace_bytes", "15"),
    BAD("o overlapping the workspace", ONE(P(workspace, PTR, P_O + 4096)), "args->o", "0x10000000"),
    BAD("dtype F32", ONE(P(dtype, ENUM, TALON_DTYPE_F32)), "args->dtype", "2"),
    BAD("fp8 with head_dim 64", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(head_dim, I64, 64), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, 1)), "args->head_dim", "64"),
    BAD("fp8 with head_dim 192 (v 128)", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(head_dim, I64, 192), P(v_head_dim, I64, 128), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, 1)), "args->head_dim", "192"),
    BAD("fp8 q_scale 0", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(k_scale, F32, 1), P(v_scale, F32, 1)), "args->q_scale", "0"),
    BAD("fp8 k_scale NaN", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1), P(k_scale, F32, NAN), P(v_scale, F32, 1)), "args->k_scale", "nan"),
    BAD("fp8 v_scale -1", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, -1)), "args->v_scale", "-1"),
    BAD("fp8 q_scale x k_scale x sm_scale past fp32", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1e30f), P(k_scale, F32, 1e30f), P(v_scale, F32, 1)), "args->q_scale", "1e+30"),
    BAD("fp8 q_stride not a multiple of 16", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, 1), P(q_stride, I64, 4104)), "args->q_stride", "4104"),
    BAD("fp8 v_stride not a multiple of 16", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, 1), P(v_stride, I64, 1032)), "args->v_stride", "1032"),
    BAD("fp8 o overlapping k's last token", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, 1), P(o, PTR, P_K + 1500 * 1024 - 16)), "args->o", "0x40176ff0"),
    BAD("batch 0", ONE(P(batch, I64, 0)), "args->batch", "0"),
    BAD("batch 2^20+1", ONE(P(batch, I64, (1 << 20) + 1)), "args->batch", "1048577"),
    BAD("total_q 0", ONE(P(total_q, I64, 0)), "args->total_q", "0"),
    BAD("total_q 2^31", ONE(P(total_q, I64, 2147483648LL)), "args->total_q", "2147483648"),
    BAD("total_kv 0", ONE(P(total_kv, I64, 0)), "args->total_kv", "0"),
    BAD("total_kv 2^31", ONE(P(total_kv, I64, 2147483648LL)), "args->total_kv", "2147483648"),
    BAD("max_seqlen_q 0", ONE(P(max_seqlen_q, I64, 0)), "args->max_seqlen_q", "0"),
    BAD("max_seqlen_q past total_q", ONE(P(max_seqlen_q, I64, 1501)), "args->max_seqlen_q", "1501"),
    BAD("num_qo_heads 0", ONE(P(num_qo_heads, I64, 0)), "args->num_qo_heads", "0"),
    BAD("num_qo_heads 1025", ONE(P(num_qo_heads, I64, 1025)), "args->num_qo_heads", "1025"),
    BAD("num_kv_heads 0", ONE(P(num_kv_heads, I64, 0)), "args->num_kv_heads", "0"),
    BAD("num_qo_heads 12 with 8 kv heads", ONE(P(num_qo_heads, I64, 12)), "args->num_qo_heads", "12"),
    BAD("head_dim 96", ONE(P(head_dim, I64, 96)), "args->head_dim", "96"),
    BAD("head_dim 512", ONE(P(head_dim, I64, 512)), "args->head_dim", "512"),
    BAD("head_dim 192 with v_head_dim 0", ONE(P(head_dim, I64, 192)), "args->v_head_dim", "192"),
    BAD("head_dim 192 with v_head_dim 192", ONE(P(head_dim, I64, 192), P(v_head_dim, I64, 192)), "args->v_head_dim", "192"),
    BAD("v_head_dim 64 with head_dim 128", ONE(P(v_head_dim, I64, 64)), "args->v_head_dim", "64"),
    BAD("v_stride shorter than a token of v (192/128)", ONE(P(head_dim, I64, 192), P(v_head_dim, I64, 128), P(v_stride, I64, 1016)), "args->v_stride", "1016"),
    BAD("q_stride shorter than a token", ONE(P(q_stride, I64, 4088)), "args->q_stride", "4088"),
    BAD("q_stride not a multiple of 8", ONE(P(q_stride, I64, 4100)), "args->q_stride", "4100"),
    BAD("k_stride shorter than a token", ONE(P(k_stride, I64, 1000)), "args->k_stride", "1000"),
    BAD("v_stride not a multiple of 8", ONE(P(v_stride, I64, 1028)), "args->v_stride", "1028"),
    BAD("o_stride shorter than a token", ONE(P(o_stride, I64, 8)), "args->o_stride", "8"),
    BAD("window -1", ONE(P(window, I64, -1)), "args->window", "-1"),
    BAD("window 2^31", ONE(P(window, I64, 2147483648LL)), "args->window", "2147483648"),
    BAD("causal 2", ONE(P(causal, INT, 2)), "args->causal", "2"),
    BAD("sm_scale NaN", ONE(P(sm_scale, F32, NAN)), "args->sm_scale", "nan"),
    BAD("sm_scale inf", ONE(P(sm_scale, F32, INFINITY)), "args->sm_scale", "inf"),
    BAD("sm_scale -0.5", ONE(P(sm_scale, F32, -0.5f)), "args->sm_scale", "-0.5"),
    BAD("logits_soft_cap -1", ONE(P(logits_soft_cap, F32, -1.0f)), "args->logits_soft_cap", "-1"),
    BAD("logits_soft_cap inf", ONE(P(logits_soft_cap, F32, INFINITY)), "args->logits_soft_cap", "inf"),
    BAD("a grid over 2^31-1 CTAs", ONE(P(batch, I64, 1 << 20), P(total_q, I64, 1LL << 30),
        P(max_seqlen_q, I64, 1 << 20), P(num_qo_heads, I64, 1024), P(num_kv_heads, I64, 1024)),
        "args->max_seqlen_q", "1048576"),
    BAD("max_seqlen_q + total_kv past 2^31 - 256 (int32 positions)", ONE(P(total_kv, I64, 2147482393LL)), "args->max_seqlen_q", "1000"),
    BAD("o overlapping q", ONE(P(o, PTR, P_Q + 4096 * 2 * 200)), "args->o", "0x30190000"),
    BAD("o overlapping v", ONE(P(o, PTR, P_V - 16)), "args->o", "0x4ffffff0"),
    BAD("lse overlapping o", ONE(P(lse, PTR, P_O + 64)), "args->o", "0x10000000"),
    /* the paged form: its own fields, and the shared ones through the same code */
    {.name = "talon_prefill_attention_paged rejects ctx NULL", .op = OP_PAGED, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = "talon_prefill_attention_paged rejects args NULL", .op = OP_PAGED, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    BADP("o NULL", ONE(G(o, PTR, 0)), "args->o", "NULL"),
    BADP("q not 16-byte aligned", ONE(G(q, PTR, P_Q + 2)), "args->q", "0x30000002"),
    BADP("cu_seqlens_q NULL", ONE(G(cu_seqlens_q, PTR, 0)), "args->cu_seqlens_q", "NULL"),
    BADP("k_cache NULL", ONE(G(k_cache, PTR, 0)), "args->k_cache", "NULL"),
    BADP("k_cache not 16-byte aligned", ONE(G(k_cache, PTR, P_K + 8)), "args->k_cache", "0x40000008"),
    BADP("v_cache NULL", ONE(G(v_cache, PTR, 0)), "args->v_cache", "NULL"),
    BADP("v_cache not 16-byte aligned", ONE(G(v_cache, PTR, P_V + 4)), "args->v_cache", "0x50000004"),
    BADP("page_table NULL", ONE(G(page_table, PTR, 0)), "args->page_table", "NULL"),
    BADP("page_table not 4-byte aligned", ONE(G(page_table, PTR, P_PT + 2)), "args->page_table", "0x71000002"),
    BADP("kv_lens NULL", ONE(G(kv_lens, PTR, 0)), "args->kv_lens", "NULL"),
    BADP("kv_lens not 4-byte aligned", ONE(G(kv_lens, PTR, P_LENS + 1)), "args->kv_lens", "0x72000001"),
    BADP("dtype FP8 (q and o are 16-bit; fp8 caches are kv_dtype)", ONE(G(dtype, ENUM, TALON_DTYPE_FP8_E4M3)), "args->dtype", "4"),
    BADP("kv_dtype F32", ONE(G(kv_dtype, ENUM, TALON_DTYPE_F32)), "args->kv_dtype", "2"),
    BADP("kv_dtype 100 with dtype F16", ONE(G(dtype, ENUM, TALON_DTYPE_F16), G(kv_dtype, ENUM, 100)), "args->kv_dtype", "100"),
    BADP("fp8 caches with k_scale 0", ONE(G(kv_dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(v_scale, F32, 1)), "args->k_scale", "0"),
    BADP("fp8 caches with v_scale inf", ONE(G(kv_dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(k_scale, F32, 1), G(v_scale, F32, INFINITY)), "args->v_scale", "inf"),
    BADP("fp8 caches with k_scale x sm_scale past fp32", ONE(G(kv_dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(k_scale, F32, 3e38f), G(v_scale, F32, 1), G(sm_scale, F32, 100)), "args->k_scale", "3e+38"),
    BADP("o overlapping an fp8 k_cache", ONE(G(kv_dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(k_scale, F32, 1), G(v_scale, F32, 1), G(o, PTR, P_K + 0x3FFFFF0)), "args->o", "0x43fffff0"),
    BADP("max_seqlen_q past total_q", ONE(G(max_seqlen_q, I64, 1501)), "args->max_seqlen_q", "1501"),
    BADP("head_dim 96", ONE(G(head_dim, I64, 96)), "args->head_dim", "96"),
    BADP("head_dim 192 (one head_dim for the caches)", ONE(G(head_dim, I64, 192)), "args->head_dim", "192"),
    BADP("q_stride not a multiple of 8", ONE(G(q_stride, I64, 4100)), "args->q_stride", "4100"),
    BADP("window -1", ONE(G(window, I64, -1)), "args->window", "-1"),
    BADP("page_size 0", ONE(G(page_size, I64, 0)), "args->page_size", "0"),
    BADP("page_size 24", ONE(G(page_size, I64, 24)), "args->page_size", "24"),
    BADP("page_size 512", ONE(G(page_size, I64, 512)), "args->page_size", "512"),
    BADP("max_kv_len 0", ONE(G(max_kv_len, I64, 0)), "args->max_kv_len", "0"),
    BADP("max_kv_len 2^30+1", ONE(G(max_kv_len, I64, (1 << 30) + 1)), "args->max_kv_len", "1073741825"),
    BADP("page_table_stride short of max_kv_len", ONE(G(page_table_stride, I64, 2047)), "args->page_table_stride", "2047"),
    BADP("num_pages 0", ONE(G(num_pages, I64, 0)), "args->num_pages", "0"),
    BADP("num_pages 2^31", ONE(G(num_pages, I64, 2147483648LL)), "args->num_pages", "2147483648"),
    BADP("caches of 2^32 rows", ONE(G(num_pages, I64, 1 << 25), G(page_size, I64, 16), G(k_cache, PTR, 0x100000000000LL), G(v_cache, PTR, 0x200000000000LL)), "args->num_pages", "33554432"),
    BADP("max_seqlen_q + max_kv_len past 2^31 - 256 (int32 positions)", ONE(G(total_q, I64, 2147483647LL), G(max_seqlen_q, I64, 1 << 30), G(max_kv_len, I64, 1 << 30), G(o, PTR, 0x700000000000LL)), "args->max_seqlen_q", "1073741824"),
    BADP("workspace NULL", ONE(G(workspace, PTR, 0)), "args->workspace", "NULL"),
    BADP("workspace_bytes 0", ONE(G(workspace_bytes, I64, 0)), "args->workspace_bytes", "0"),
    BADP("layout 2", ONE(G(layout, ENUM, 2)), "args->layout", "2"),
    BADP("o overlapping q", ONE(G(o, PTR, P_Q + 4096 * 2 * 200)), "args->o", "0x30190000"),
    BADP("o overlapping k_cache", ONE(G(o, PTR, P_K + 0x7FFFFF0)), "args->o", "0x47fffff0"),
    BADP("o overlapping v_cache", ONE(G(o, PTR, P_V - 16)), "args->o", "0x4ffffff0"),
    BADP("lse overlapping o", ONE(G(lse, PTR, P_O + 64)), "args->o", "0x10000000"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_ctx *ctx = row->kind == BAD_CTX ? NULL : g_ctx;
    if (row->op == OP_PAGED) {
        talon_prefill_attention_paged_args a = valid_paged();
        apply_sets(&a, row->set, MAX_SETS);
        assert_rejected(talon_prefill_attention_paged(ctx, STREAM, row->kind == BAD_ARGS ? NULL : &a),
                        "talon_prefill_attention_paged", row->field, row->value);
    } else {
        talon_prefill_attention_args a = valid();
        apply_sets(&a, row->set, MAX_SETS);
        assert_rejected(talon_prefill_attention(ctx, STREAM, row->kind == BAD_ARGS ? NULL : &a),
                        "talon_prefill_attention", row->field, row->value);
    }
    assert_int_equal(fake.encodes, 0);
    assert_int_equal(fake.memsets, 0);
}

/* ================================================================ exact launches */
static const launch_row launch_rows[] = {
    {.name = "prefill bf16 d128 GQA 4 causal -> _bf16_d128", .set = NONE, .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill f16 d64 full, no lse -> _f16_d64", .set = ONE(P(head_dim, I64, 64), P(dtype, ENUM, TALON_DTYPE_F16), P(causal, INT, 0), P(lse, PTR, 0)), .symbol = "talon_prefill_attention_f16_d64"},
    {.name = "prefill bf16 d256 window, soft-cap, sm_scale -> _bf16_d256", .set = ONE(P(head_dim, I64, 256), P(window, I64, 100), P(logits_soft_cap, F32, 30.0f), P(sm_scale, F32, 0.25f)), .symbol = "talon_prefill_attention_bf16_d256"},
    {.name = "prefill MQA with padded strides -> _bf16_d128", .set = ONE(P(num_kv_heads, I64, 1), P(q_stride, I64, 4096 + 64), P(k_stride, I64, 256), P(v_stride, I64, 136), P(o_stride, I64, 8192), P(max_seqlen_q, I64, 129)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill q/k 192, v 128 f16 -> _f16_d192", .set = ONE(P(head_dim, I64, 192), P(v_head_dim, I64, 128), P(dtype, ENUM, TALON_DTYPE_F16)), .symbol = "talon_prefill_attention_f16_d192"},
    {.name = "prefill q/k 192, v 128, strides, v_head_dim 128 -> _bf16_d192", .set = ONE(P(head_dim, I64, 192), P(v_head_dim, I64, 128), P(q_stride, I64, 6144 + 8), P(v_stride, I64, 1032), P(o_stride, I64, 4096 + 16)), .symbol = "talon_prefill_attention_bf16_d192"},
    {.name = "prefill v_head_dim = head_dim -> _bf16_d64", .set = ONE(P(head_dim, I64, 64), P(v_head_dim, I64, 64)), .symbol = "talon_prefill_attention_bf16_d64"},
    {.name = "prefill max_seqlen_q + total_kv = 2^31 - 256 -> _bf16_d128", .set = ONE(P(total_kv, I64, 2147482392LL)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill d128 full, 1536 keys a request (128 rows at any length) -> _bf16_d128", .set = ONE(P(causal, INT, 0), P(total_kv, I64, 3072)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill f16 d128 causal, 3072 keys a request (128 rows at any length) -> _f16_d128", .set = ONE(P(dtype, ENUM, TALON_DTYPE_F16), P(total_kv, I64, 6144)), .symbol = "talon_prefill_attention_f16_d128"},
    {.name = "prefill fp8 d128 full, 4096 keys a request (192 rows) -> _e4m3_d128_rows192", .set = ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, 1), P(causal, INT, 0), P(total_kv, I64, 8192)), .symbol = "talon_prefill_attention_e4m3_d128_rows192"},
    {.name = "prefill fp8 d128 causal, 8192 queries (192 rows) -> _e4m3_d128_rows192", .set = ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, 1), P(batch, I64, 1), P(total_q, I64, 8192), P(max_seqlen_q, I64, 8192), P(total_kv, I64, 8192)), .symbol = "talon_prefill_attention_e4m3_d128_rows192"},
    {.name = "prefill fp8 d128 window, 8191 queries (128 rows) -> _e4m3_d128", .set = ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, 1), P(causal, INT, 0), P(window, I64, 512), P(batch, I64, 1), P(total_q, I64, 8191), P(max_seqlen_q, I64, 8191), P(total_kv, I64, 8191)), .symbol = "talon_prefill_attention_e4m3_d128"},
    {.name = "prefill window 2^31-1 (no key excluded: passed as none) -> _bf16_d128", .set = ONE(P(window, I64, 2147483647LL), P(causal, INT, 0)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill window = total_kv (passed as none) -> _bf16_d128", .set = ONE(P(window, I64, 1500)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill fp8 d128 GQA 4 causal, scales -> _e4m3_d128", .set = ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 0.5f), P(k_scale, F32, 0.25f), P(v_scale, F32, 3.0f)), .symbol = "talon_prefill_attention_e4m3_d128"},
    {.name = "prefill fp8 d256 soft-cap, strides of 16 -> _e4m3_d256", .set = ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(head_dim, I64, 256), P(q_scale, F32, 0.125f), P(k_scale, F32, 2.0f), P(v_scale, F32, 0.75f), P(logits_soft_cap, F32, 50.0f), P(q_stride, I64, 8192 + 16), P(k_stride, I64, 2048 + 16), P(o_stride, I64, 8192 + 8)), .symbol = "talon_prefill_attention_e4m3_d256"},
    {.name = "prefill fp8 o right after k (1-byte elements: no overlap) -> _e4m3_d128", .set = ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3), P(q_scale, F32, 1), P(k_scale, F32, 1), P(v_scale, F32, 1), P(o, PTR, P_K + 1500 * 1024)), .symbol = "talon_prefill_attention_e4m3_d128"},
    {.name = "prefill 12 tiles: 12 CTAs -> _bf16_d128", .set = ONE(P(batch, I64, 1), P(num_qo_heads, I64, 4), P(num_kv_heads, I64, 4), P(max_seqlen_q, I64, 300)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill 1000 queries over 20000 keys, 8 heads, full: 64 tiles of 128 rows in 2 pieces -> _bf16_d128", .set = ONE(P(batch, I64, 1), P(total_q, I64, 1000), P(total_kv, I64, 20000), P(num_qo_heads, I64, 8), P(num_kv_heads, I64, 8), P(causal, INT, 0)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill 2 x 2000 queries, 8 heads, full: 256 tiles of 128 rows -> _bf16_d128", .set = ONE(P(total_q, I64, 4000), P(total_kv, I64, 4000), P(max_seqlen_q, I64, 2000), P(num_qo_heads, I64, 8), P(num_kv_heads, I64, 8), P(causal, INT, 0)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill 2 x 8192 queries, 16 heads, full: 1024 tiles of 128 rows -> _bf16_d128", .set = ONE(P(total_q, I64, 16384), P(total_kv, I64, 16384), P(max_seqlen_q, I64, 8192), P(num_qo_heads, I64, 16), P(num_kv_heads, I64, 16), P(causal, INT, 0)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "paged NHD page 16 bf16 d128 -> _pages_bf16_d128", .op = OP_PAGED, .set = NONE, .symbol = "talon_prefill_attention_pages_bf16_d128"},
    {.name = "paged 2048 new over 30000 cached: 512 tiles of 128 rows -> _pages_bf16_d128", .op = OP_PAGED, .set = ONE(G(batch, I64, 1), G(total_q, I64, 2048), G(max_seqlen_q, I64, 2048), G(max_kv_len, I64, 32048)), .symbol = "talon_prefill_attention_pages_bf16_d128"},
    {.name = "paged 256 new over 32048 keys: 64 tiles of 128 rows in 2 pieces -> _pages_bf16_d128", .op = OP_PAGED, .set = ONE(G(batch, I64, 1), G(total_q, I64, 256), G(max_seqlen_q, I64, 256), G(max_kv_len, I64, 32048)), .symbol = "talon_prefill_attention_pages_bf16_d128"},
    {.name = "paged page 16 d128 full, max_kv_len 1536 (128 rows at any length) -> _pages_bf16_d128", .op = OP_PAGED, .set = ONE(G(max_kv_len, I64, 1536), G(causal, INT, 0)), .symbol = "talon_prefill_attention_pages_bf16_d128"},
    {.name = "paged HND page 256 f16 d256, table stride 300 -> _pages_f16_d256", .op = OP_PAGED, .set = ONE(G(layout, ENUM, TALON_KV_HND), G(page_size, I64, 256), G(num_pages, I64, 256), G(head_dim, I64, 256), G(dtype, ENUM, TALON_DTYPE_F16), G(page_table_stride, I64, 300)), .symbol = "talon_prefill_attention_pages_f16_d256"},
    {.name = "paged HND page 64 d128 MQA, q/o strides -> _pages_bf16_d128", .op = OP_PAGED, .set = ONE(G(layout, ENUM, TALON_KV_HND), G(page_size, I64, 64), G(num_pages, I64, 1024), G(num_kv_heads, I64, 1), G(q_stride, I64, 4096 + 8), G(o_stride, I64, 8192)), .symbol = "talon_prefill_attention_pages_bf16_d128"},
    {.name = "paged NHD page 1 d64, window, no lse -> _gather_bf16_d64", .op = OP_PAGED, .set = ONE(G(page_size, I64, 1), G(num_pages, I64, 65536), G(head_dim, I64, 64), G(window, I64, 4096), G(lse, PTR, 0), G(causal, INT, 0)), .symbol = "talon_prefill_attention_gather_bf16_d64"},
    {.name = "paged window = max_kv_len (passed as none) -> _pages_bf16_d128", .op = OP_PAGED, .set = ONE(G(window, I64, 32768), G(causal, INT, 0)), .symbol = "talon_prefill_attention_pages_bf16_d128"},
    {.name = "paged window max_kv_len - 1 (kept) -> _pages_bf16_d128", .op = OP_PAGED, .set = ONE(G(window, I64, 32767)), .symbol = "talon_prefill_attention_pages_bf16_d128"},
    {.name = "paged HND page 8 f16 d256 -> _gather_f16_d256", .op = OP_PAGED, .set = ONE(G(layout, ENUM, TALON_KV_HND), G(page_size, I64, 8), G(num_pages, I64, 8192), G(head_dim, I64, 256), G(dtype, ENUM, TALON_DTYPE_F16)), .symbol = "talon_prefill_attention_gather_f16_d256"},
    {.name = "paged fp8 caches NHD page 16 bf16 d128, scales -> _widen_bf16_d128", .op = OP_PAGED, .set = ONE(G(kv_dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(k_scale, F32, 0.5f), G(v_scale, F32, 3.0f)), .symbol = "talon_prefill_attention_widen_bf16_d128"},
    {.name = "paged fp8 caches HND page 1 f16 d64 -> _widen_f16_d64", .op = OP_PAGED, .set = ONE(G(kv_dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(k_scale, F32, 2.0f), G(v_scale, F32, 0.25f), G(layout, ENUM, TALON_KV_HND), G(page_size, I64, 1), G(num_pages, I64, 65536), G(head_dim, I64, 64), G(dtype, ENUM, TALON_DTYPE_F16)), .symbol = "talon_prefill_attention_widen_f16_d64"},
    {.name = "paged fp8 caches page 256 d256, o right after k_cache (1-byte elements) -> _widen_bf16_d256", .op = OP_PAGED, .set = ONE(G(kv_dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(k_scale, F32, 1), G(v_scale, F32, 1), G(page_size, I64, 256), G(num_pages, I64, 256), G(head_dim, I64, 256), G(o, PTR, P_K + 256LL * 256 * 8 * 256)), .symbol = "talon_prefill_attention_widen_bf16_d256"},
    {.name = "paged kv_dtype 0 with dtype f16 (0: dtype) -> _pages_f16_d128", .op = OP_PAGED, .set = ONE(G(dtype, ENUM, TALON_DTYPE_F16)), .symbol = "talon_prefill_attention_pages_f16_d128"},
    {.name = "paged kv_dtype = dtype (f16) -> _pages_f16_d128", .op = OP_PAGED, .set = ONE(G(kv_dtype, ENUM, TALON_DTYPE_F16), G(dtype, ENUM, TALON_DTYPE_F16)), .symbol = "talon_prefill_attention_pages_f16_d128"},
    {.name = "paged NHD page 16, MQA, 2^31 page rows -> _gather_bf16_d128", .op = OP_PAGED, .set = ONE(G(num_pages, I64, 1 << 27), G(num_kv_heads, I64, 1), G(k_cache, PTR, 0x100000000000LL), G(v_cache, PTR, 0x200000000000LL)), .symbol = "talon_prefill_attention_gather_bf16_d128"},
};

/* A map {head_dim, heads, rows} with token stride `stride` elements, box {128 bytes, 1,
   box_rows}, swizzled 128B, of the args' type (fp8: bytes), at base. */
static void check_map(const struct fake_enc *e, CUdeviceptr base, int64_t rows, int64_t heads,
                      int64_t d, int64_t stride, uint32_t box_rows, talon_dtype dt) {
    const int es = dt == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
    assert_int_equal(e->type, dt == TALON_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                              : dt == TALON_DTYPE_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                      : CU_TENSOR_MAP_DATA_TYPE_UINT8);
    assert_int_equal(e->rank, 3);
    assert_true((CUdeviceptr)(uintptr_t)e->addr == base);
    assert_int_equal(e->dims[0], d);
    assert_int_equal(e->dims[1], heads);
    assert_int_equal(e->dims[2], rows);
    assert_int_equal(e->strides[0], d * es);
    assert_int_equal(e->strides[1], stride * es);
    assert_int_equal(e->box[0], 128 / es);
    assert_int_equal(e->box[1], 1);
    assert_int_equal(e->box[2], box_rows);
    assert_int_equal(e->swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
}

/* A paged cache's map (KV_PAGES): NHD {d, Hk, pages x page_size}, box {64, 1, rows}; HND
   {d, page_size, pages x Hk}, box {64, rows, 1}; rows = min(page_size, BN). */
static void check_cache_map(const struct fake_enc *e, CUdeviceptr base,
                            const talon_prefill_attention_paged_args *a, int64_t rows) {
    const int nhd = a->layout == TALON_KV_NHD;
    assert_int_equal(e->type, a->dtype == TALON_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
    assert_int_equal(e->rank, 3);
    assert_true((CUdeviceptr)(uintptr_t)e->addr == base);
    assert_int_equal(e->dims[0], a->head_dim);
    assert_int_equal(e->dims[1], nhd ? a->num_kv_heads : a->page_size);
    assert_int_equal(e->dims[2], a->num_pages * (nhd ? a->page_size : a->num_kv_heads));
    assert_int_equal(e->strides[0], a->head_dim * 2);
    assert_int_equal(e->strides[1], (nhd ? a->num_kv_heads : a->page_size) * a->head_dim * 2);
    assert_int_equal(e->box[0], 64);
    assert_int_equal(e->box[1], nhd ? 1 : rows);
    assert_int_equal(e->box[2], nhd ? rows : 1);
    assert_int_equal(e->swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
}

/* The counters (the workspace's first `bytes`) zeroed on the stream before the launch. */
static void assert_counters_zeroed(int64_t bytes) {
    assert_int_equal(fake.memsets, 1);
    assert_true(fake.fill.dst == P_WS);
    assert_int_equal(fake.fill.value, 0);
    assert_int_equal(fake.fill.n, bytes / 4);
    assert_true(fake.fill.stream == STREAM);
    assert_int_equal(fake.fill.before_launch, 1);
}

/* The fields both ops fill alike (the four maps copied from got: checked separately). */
static void want_common(talon__prefill_params *want, const talon__prefill_params *got,
                        CUdeviceptr o, CUdeviceptr lse, CUdeviceptr cu_q, int64_t o_stride,
                        int64_t total_q, int64_t batch, int64_t hq, int64_t hk, int64_t d,
                        int64_t max_seqlen_q, int64_t rows, int causal, int64_t window,
                        float sm_scale, float cap) {
    float sm = sm_scale != 0 ? sm_scale : (float)(1.0 / sqrt((double)d));
    memset(want, 0, sizeof *want);
    want->q_map = got->q_map; want->k_map = got->k_map; want->v_map = got->v_map;
    want->o_map = got->o_map;
    want->o = o; want->lse = lse; want->cu_seqlens_q = cu_q;
    want->tile_counter = P_WS;
    want->o_stride = o_stride ? o_stride : hq * d;
    want->total_q = total_q;
    want->batch = (int)batch;
    want->num_qo_heads = (int)hq;
    want->group = (int)(hq / hk);
    want->m_blocks = (int)((max_seqlen_q + rows - 1) / rows); /* rows: query rows a tile */
    want->causal = causal;
    want->window = (int)window; /* callers pass 0 for a window of every key or more, as the op */
    /* scores in log2 units: sm_scale log2(e), or sm_scale / cap inside cap log2(e) tanh(.) */
    want->scale = cap > 0 ? sm / cap : sm * 1.4426950408889634f;
    want->cap = cap * 1.4426950408889634f;
    want->o_scale = 1.0f;
}

/* The launch of the plan for kv and keys (talon__prefill_plan_of, tested below): its split in
   want, the grid (the split tiles counted once per piece, at most one CTA per SM), the counters
   zeroed. */
static void assert_planned_launch(const char *symbol, talon__prefill_params *want,
                                  const talon__prefill_common *c, int kv, int64_t keys) {
    talon__prefill_plan pl;
    int64_t grid;
    talon__prefill_plan_of(c, kv, keys, 132, &pl);
    assert_int_equal(pl.m_blocks, want->m_blocks);
    /* the exponent's scale: 1 under a soft-cap, else the final score scale */
    want->exp_scale = want->cap > 0 ? 1.0f : want->scale;
    want->split_first = (int)pl.split_first;
    want->split_parts = pl.split_parts;
    want->split_magic = pl.split_parts > 1 ? (unsigned)((0x100000000ULL + pl.split_parts - 1) / pl.split_parts) : 0;
    grid = pl.split_first + (pl.tiles - pl.split_first) * pl.split_parts;
    assert_single_launch(symbol, grid < 132 ? grid : 132, STREAM, want, sizeof *want);
    assert_counters_zeroed(pl.zeroed);
}

static void test_launch_paged(const launch_row *row) {
    talon_prefill_attention_paged_args a = valid_paged();
    talon__prefill_params got, want;
    int64_t qs, bn, rows, tile_rows;
    int pages;
    apply_sets(&a, row->set, MAX_SETS);
    if (talon_prefill_attention_paged(g_ctx, STREAM, &a) != TALON_SUCCESS) fail_msg("%s", talon_last_error());
    qs = a.q_stride ? a.q_stride : a.num_qo_heads * a.head_dim;
    bn = a.head_dim == 256 ? 64 : 128;
    rows = a.page_size < bn ? a.page_size : bn;
    /* a box per page: the caches' maps, then q's and o's; gathered: q's and o's */
    pages = strstr(row->symbol, "_pages_") != NULL;
    assert_int_equal(fake.encodes, pages ? 4 : 2);
    if (pages) {
        check_cache_map(&fake.enc_log[0], a.k_cache, &a, rows);
        check_cache_map(&fake.enc_log[1], a.v_cache, &a, rows);
    }
    tile_rows = 128; /* query rows a tile: always 128 from a paged cache */
    check_map(&fake.enc_log[pages ? 2 : 0], a.q, a.total_q, a.num_qo_heads, a.head_dim, qs,
              (uint32_t)tile_rows, a.dtype);
    check_map(&fake.enc_log[pages ? 3 : 1], a.o, a.total_q, a.num_qo_heads, a.head_dim,
              a.o_stride ? a.o_stride : a.num_qo_heads * a.head_dim, 64, a.dtype);
    memcpy(&got, fake.last.params, sizeof got);
    want_common(&want, &got, a.o, a.lse, a.cu_seqlens_q, a.o_stride, a.total_q, a.batch,
                a.num_qo_heads, a.num_kv_heads, a.head_dim, a.max_seqlen_q, tile_rows, a.causal,
                a.window >= a.max_kv_len ? 0 : a.window, a.sm_scale, a.logits_soft_cap);
    want.page_table = a.page_table;
    want.kv_lens = a.kv_lens;
    want.k_cache = a.k_cache;
    want.v_cache = a.v_cache;
    want.page_table_stride = a.page_table_stride ? a.page_table_stride : (a.max_kv_len + a.page_size - 1) / a.page_size;
    want.num_pages = (int)a.num_pages;
    while ((1 << want.page_shift) < a.page_size) want.page_shift++;
    want.layout = (int)a.layout;
    want.max_kv_len = (int)a.max_kv_len;
    want.page_warps = pages ? talon__prefill_page_warps(a.page_size, a.head_dim, bn) : 0;
    if (a.kv_dtype == TALON_DTYPE_FP8_E4M3) { /* k_scale in the score scale, v_scale on o */
        want.scale *= a.k_scale;
        want.o_scale = a.v_scale;
    }
    want.section = talon__prefill_sections(a.batch * a.num_kv_heads, want.m_blocks, want.group,
                                           a.max_kv_len * a.head_dim * 2 * (a.kv_dtype == TALON_DTYPE_FP8_E4M3 ? 1 : 2),
                                           a.causal, 132, &want.section_first);
    {
        const talon__prefill_common c = TALON__PREFILL_COMMON(&a, a.head_dim);
        assert_planned_launch(row->symbol, &want, &c, talon__prefill_paged_kv(&a), a.max_kv_len);
    }
    assert_int_equal(fake.last.block[0], 128 + 2 * tile_rows);
}

/* The tile order's sections (talon__prefill_sections): causal, enough pairs a section for its
   work per SM to reach its longest tile, within the L2 budget; the remainder first; 1 without a
   causal mask or with one query block. */
static void test_sections(void **state) {
    static const struct {
        int64_t pairs, m_blocks, group, kv_bytes;
        int causal, sms, want, first;
    } rows[] = {
        {32, 64, 1, 4 << 20, 1, 132, 5, 2},     /* B=2 x 16 heads, L=8192: 264 / 65; 2 + 6 x 5 */
        {32, 64, 1, 8 << 20, 1, 132, 5, 2},     /* hd256, 8 MiB a pair: 5 fit the 40 MiB budget */
        {32, 64, 1, 10 << 20, 1, 132, 4, 4},    /* 10 MiB a pair: the budget's 4; 4 + 7 x 4 */
        {256, 8, 1, 512 << 10, 1, 132, 30, 16}, /* B=16 x 16 heads, L=1024: 264 / 9 */
        {16, 64, 4, 4 << 20, 1, 132, 2, 2},     /* GQA 32/8: the group's tiles count */
        {32, 64, 1, 1 << 20, 1, 66, 3, 2},      /* 66 SMs */
        {8, 16, 4, 15 << 20, 1, 132, 2, 2},     /* a 30000-key prefix, 15 MiB a pair: 2 */
        {8, 16, 4, 48 << 20, 1, 132, 1, 1},     /* a pair past the budget: pair by pair */
        {3, 64, 1, 1 << 20, 1, 132, 3, 3},      /* fewer pairs than wanted: all of them */
        {32, 64, 1, 1 << 20, 0, 132, 1, 1},     /* no causal mask */
        {32, 1, 1, 1 << 20, 1, 132, 1, 1},      /* one query block */
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int first = -1;
        assert_int_equal(talon__prefill_sections(rows[i].pairs, rows[i].m_blocks, rows[i].group,
                                                 rows[i].kv_bytes, rows[i].causal, rows[i].sms,
                                                 &first),
                         rows[i].want);
        assert_int_equal(first, rows[i].first);
    }
}

/* Split keys (talon__prefill_split): the last round's tiles in the pieces that make it
   shortest by the model (a piece 1.3x its share), where the tiles fill fewer than 3 rounds and
   that saves 3% of the call. */
static void test_split(void **state) {
    static const struct {
        int64_t tiles;
        int sms;
        int64_t blocks, first;
        int parts;
    } rows[] = {
        {352, 132, 236, 264, 3}, /* 2048 new over 30000 (GQA 32/8, 192 rows): 2 + 0.88 rounds */
        {192, 132, 236, 132, 2}, /* 1024 new: 1 + 0.66 */
        {384, 132, 236, 384, 1}, /* 2304 new: the last round is 120 of 132 */
        {96, 132, 236, 96, 1},   /* 512 new: 4 pieces would save 2% (measured: 12% slower) */
        {1376, 132, 64, 1376, 1},/* 10 rounds */
        {264, 132, 64, 264, 1},  /* whole rounds */
        {12, 132, 3, 12, 1},     /* 3 key blocks: too few to split */
        {12, 132, 100, 0, 8},    /* 12 tiles: 8 pieces each */
        {100, 66, 200, 66, 5},   /* 66 SMs: 34 tiles left, 170 pieces */
        {270, 132, 16, 264, 4},  /* 4 key blocks a piece at most */
        {11, 4, 16, 11, 1},      /* 4 SMs, 3 tiles left: 4 pieces each take longer than 1 */
        {11, 4, 1000, 11, 1},    /* over 1000 blocks they save 0.8% of the call: under 3% */
        {9, 4, 1000, 8, 4},      /* 1 tile left: 4 pieces, a round of them */
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int parts = -1;
        assert_int_equal(talon__prefill_split(rows[i].tiles, rows[i].sms, rows[i].blocks, &parts),
                         rows[i].first);
        assert_int_equal(parts, rows[i].parts);
    }
}

/* The plan (talon__prefill_plan_of): rows, tiles, split and workspace layout; no split where
   a request may have fewer queries than max_seqlen_q (the tiles counted may not run). */
static void paged_plan(const talon_prefill_attention_paged_args *g, talon__prefill_plan *pl) {
    const talon__prefill_common c = TALON__PREFILL_COMMON(g, g->head_dim);
    talon__prefill_plan_of(&c, TALON__PREFILL_KV_PAGES, g->max_kv_len, 132, pl);
}
static void test_plan(void **state) {
    talon_prefill_attention_paged_args g = valid_paged();
    talon__prefill_plan pl;
    (void)state;
    g.batch = 1; g.total_q = 256; g.max_seqlen_q = 256; g.max_kv_len = 32048;
    paged_plan(&g, &pl);
    assert_int_equal(pl.rows, 128);
    assert_int_equal(pl.m_blocks, 2);
    assert_int_equal(pl.tiles, 64);
    assert_int_equal(pl.split_first, 0);
    assert_int_equal(pl.split_parts, 2);
    assert_int_equal(pl.zeroed, 16 + 64 * 8 * 4); /* a counter per warp of 16 rows */
    assert_int_equal(pl.partials, 2304);
    assert_int_equal(pl.bytes, 2304 + 64LL * 2 * 128 * (64 + 4) * 8);
    g.max_seqlen_q = 512; /* up to 512 queries (256 in all): none split */
    paged_plan(&g, &pl);
    assert_int_equal(pl.rows, 128);
    assert_int_equal(pl.split_first, 128);
    assert_int_equal(pl.split_parts, 1);
    assert_int_equal(pl.zeroed, 16);
    assert_int_equal(pl.bytes, 16);
}

/* Query rows a tile (talon__prefill_tile_rows): 192 for 16-bit contiguous k/v at head_dim 64
   (masked or not, any length) and for fp8 at head_dim 128 without a causal mask or window or
   from 8192 queries; 128 for every other head_dim and every paged source. */
static void test_tile_rows(void **state) {
    static const struct {
        talon_dtype dt;
        int64_t head_dim;
        int kv, masked;
        int64_t max_seqlen_q;
        int want;
    } rows[] = {
        {TALON_DTYPE_BF16, 64, TALON__PREFILL_KV_CONTIGUOUS, 0, 1024, 192},
        {TALON_DTYPE_F16, 64, TALON__PREFILL_KV_CONTIGUOUS, 1, 100, 192},
        {TALON_DTYPE_BF16, 128, TALON__PREFILL_KV_CONTIGUOUS, 0, 8192, 128},
        {TALON_DTYPE_F16, 128, TALON__PREFILL_KV_CONTIGUOUS, 1, 8192, 128},
        {TALON_DTYPE_FP8_E4M3, 128, TALON__PREFILL_KV_CONTIGUOUS, 0, 1, 192},
        {TALON_DTYPE_FP8_E4M3, 128, TALON__PREFILL_KV_CONTIGUOUS, 0, 4096, 192},
        {TALON_DTYPE_FP8_E4M3, 128, TALON__PREFILL_KV_CONTIGUOUS, 1, 8191, 128},
        {TALON_DTYPE_FP8_E4M3, 128, TALON__PREFILL_KV_CONTIGUOUS, 1, 8192, 192},
        {TALON_DTYPE_FP8_E4M3, 256, TALON__PREFILL_KV_CONTIGUOUS, 0, 8192, 128},
        {TALON_DTYPE_FP8_E4M3, 256, TALON__PREFILL_KV_CONTIGUOUS, 1, 16384, 128},
        {TALON_DTYPE_BF16, 192, TALON__PREFILL_KV_CONTIGUOUS, 0, 8192, 128},
        {TALON_DTYPE_BF16, 256, TALON__PREFILL_KV_CONTIGUOUS, 0, 8192, 128},
        {TALON_DTYPE_BF16, 64, TALON__PREFILL_KV_PAGES, 0, 8192, 128},
        {TALON_DTYPE_F16, 128, TALON__PREFILL_KV_PAGES, 0, 8192, 128},
        {TALON_DTYPE_BF16, 256, TALON__PREFILL_KV_PAGES, 1, 8192, 128},
        {TALON_DTYPE_BF16, 64, TALON__PREFILL_KV_GATHER, 0, 8192, 128},
        {TALON_DTYPE_BF16, 128, TALON__PREFILL_KV_WIDEN, 0, 8192, 128},
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(talon__prefill_tile_rows(rows[i].dt, rows[i].head_dim, rows[i].kv,
                                                  rows[i].masked, rows[i].max_seqlen_q),
                         rows[i].want);
}

/* Producer warps of the box-per-page loader (talon__prefill_page_warps): 4 from 32 TMA copies
   a block (page runs x k and v x 64-column chunks), else 1. */
static void test_page_warps(void **state) {
    (void)state;
    assert_int_equal(talon__prefill_page_warps(16, 128, 128), 4);  /* 8 runs x 2 x 2 = 32 */
    assert_int_equal(talon__prefill_page_warps(32, 128, 128), 1);  /* 16 */
    assert_int_equal(talon__prefill_page_warps(256, 128, 128), 1); /* one run: 4 */
    assert_int_equal(talon__prefill_page_warps(16, 64, 128), 1);   /* 16 */
    assert_int_equal(talon__prefill_page_warps(16, 256, 64), 4);   /* 4 runs x 2 x 4 = 32 */
    assert_int_equal(talon__prefill_page_warps(32, 256, 64), 1);   /* 16 */
}

/* The paged loader choice: a TMA box per page from 16 keys a page, else the gather; the gather
   too where a map's rows pass 2^31 - 1 (NHD: pages x page_size, HND: pages x kv heads). */
static void test_paged_source(void **state) {
    (void)state;
    assert_int_equal(talon__prefill_paged_source(1, 1000, 8, TALON_KV_NHD), TALON__PREFILL_KV_GATHER);
    assert_int_equal(talon__prefill_paged_source(8, 1000, 8, TALON_KV_HND), TALON__PREFILL_KV_GATHER);
    assert_int_equal(talon__prefill_paged_source(16, 1000, 8, TALON_KV_NHD), TALON__PREFILL_KV_PAGES);
    assert_int_equal(talon__prefill_paged_source(256, 1000, 8, TALON_KV_HND), TALON__PREFILL_KV_PAGES);
    assert_int_equal(talon__prefill_paged_source(16, 134217727, 8, TALON_KV_NHD), TALON__PREFILL_KV_PAGES);
    assert_int_equal(talon__prefill_paged_source(16, 134217728, 8, TALON_KV_NHD), TALON__PREFILL_KV_GATHER);
    assert_int_equal(talon__prefill_paged_source(16, 134217728, 8, TALON_KV_HND), TALON__PREFILL_KV_PAGES);
    assert_int_equal(talon__prefill_paged_source(16, 268435456, 8, TALON_KV_HND), TALON__PREFILL_KV_GATHER);
}

/* The plan's bytes: 16 without split tiles (and for shapes the op refuses); NULL ctx, args or
   bytes refused. */
static void test_workspace_size(void **state) {
    talon_prefill_attention_args a = valid();
    talon_prefill_attention_paged_args g = valid_paged();
    int64_t bytes = -1;
    (void)state;
    assert_int_equal(talon_prefill_attention_workspace_size(g_ctx, &a, &bytes), TALON_SUCCESS);
    assert_int_equal(bytes, 16);
    bytes = -1;
    assert_int_equal(talon_prefill_attention_paged_workspace_size(g_ctx, &g, &bytes), TALON_SUCCESS);
    assert_int_equal(bytes, 16);
    /* 256 new tokens over 32048 keys: 64 tiles of 128 rows in 2 pieces (test_plan) */
    g.batch = 1; g.total_q = 256; g.max_seqlen_q = 256; g.max_kv_len = 32048;
    assert_int_equal(talon_prefill_attention_paged_workspace_size(g_ctx, &g, &bytes), TALON_SUCCESS);
    assert_int_equal(bytes, 2304 + 64LL * 2 * 128 * (64 + 4) * 8);
    g.workspace_bytes = bytes - 1;
    assert_rejected(talon_prefill_attention_paged(g_ctx, STREAM, &g), "talon_prefill_attention_paged",
                    "args->workspace_bytes", "8915199");
    g.head_dim = 100;
    assert_int_equal(talon_prefill_attention_paged_workspace_size(g_ctx, &g, &bytes), TALON_SUCCESS);
    assert_int_equal(bytes, 16);
    assert_rejected(talon_prefill_attention_workspace_size(g_ctx, &a, NULL),
                    "talon_prefill_attention_workspace_size", "bytes", "NULL");
    assert_rejected(talon_prefill_attention_paged_workspace_size(NULL, &g, &bytes),
                    "talon_prefill_attention_paged_workspace_size", "ctx", "NULL");
    assert_rejected(talon_prefill_attention_workspace_size(g_ctx, NULL, &bytes),
                    "talon_prefill_attention_workspace_size", "args", "NULL");
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    talon_prefill_attention_args a = valid();
    talon__prefill_params got, want;
    int64_t qs, ks, vs, dv, bn, rows, keys;
    if (row->op == OP_PAGED) {
        test_launch_paged(row);
        return;
    }
    apply_sets(&a, row->set, MAX_SETS);
    if (talon_prefill_attention(g_ctx, STREAM, &a) != TALON_SUCCESS) fail_msg("%s", talon_last_error());
    dv = a.head_dim == 192 ? 128 : a.head_dim; /* v's and o's */
    qs = a.q_stride ? a.q_stride : a.num_qo_heads * a.head_dim;
    ks = a.k_stride ? a.k_stride : a.num_kv_heads * a.head_dim;
    vs = a.v_stride ? a.v_stride : a.num_kv_heads * dv;
    /* keys per block */
    bn = a.dtype == TALON_DTYPE_FP8_E4M3 ? 128
         : a.head_dim == 256 ? 80 : a.head_dim == 64 ? 192 : 128;
    /* query rows a tile: 192 (three consumer warpgroups) for 16-bit inputs at head_dim 64 and
       fp8 at head_dim 128 without a mask or from 8192 queries; else 128 */
    if (a.dtype == TALON_DTYPE_FP8_E4M3)
        rows = a.head_dim == 128 && (!(a.causal || a.window > 0) || a.max_seqlen_q >= 8192) ? 192 : 128;
    else
        rows = a.head_dim == 64 ? 192 : 128;
    keys = a.total_kv / a.batch > a.max_seqlen_q ? a.total_kv / a.batch : a.max_seqlen_q;
    assert_int_equal(fake.encodes, 4);
    check_map(&fake.enc_log[0], a.k, a.total_kv, a.num_kv_heads, a.head_dim, ks, (uint32_t)bn, a.dtype);
    check_map(&fake.enc_log[1], a.v, a.total_kv, a.num_kv_heads, dv, vs, (uint32_t)bn, a.dtype);
    check_map(&fake.enc_log[2], a.q, a.total_q, a.num_qo_heads, a.head_dim, qs, (uint32_t)rows, a.dtype);
    /* o's: 64 rows a box (a warpgroup's), bf16 for fp8 inputs */
    check_map(&fake.enc_log[3], a.o, a.total_q, a.num_qo_heads, dv,
              a.o_stride ? a.o_stride : a.num_qo_heads * dv, 64,
              a.dtype == TALON_DTYPE_FP8_E4M3 ? TALON_DTYPE_BF16 : a.dtype);
    /* every field but the maps (checked above through the encoder's arguments) */
    memcpy(&got, fake.last.params, sizeof got);
    want_common(&want, &got, a.o, a.lse, a.cu_seqlens_q, a.o_stride ? a.o_stride : a.num_qo_heads * dv,
                a.total_q, a.batch, a.num_qo_heads, a.num_kv_heads, a.head_dim, a.max_seqlen_q, rows,
                a.causal, a.window >= a.total_kv ? 0 : a.window, a.sm_scale, a.logits_soft_cap);
    want.cu_seqlens_k = a.cu_seqlens_k;
    if (a.dtype == TALON_DTYPE_FP8_E4M3) { /* q_scale k_scale in the score scale, v_scale on o */
        want.scale *= a.q_scale * a.k_scale;
        want.o_scale = a.v_scale;
    }
    {
        const int64_t es = a.dtype == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
        want.section = talon__prefill_sections(a.batch * a.num_kv_heads, want.m_blocks, want.group,
                                               keys * (a.head_dim + dv) * es, a.causal, 132,
                                               &want.section_first);
    }
    /* persistent: one CTA per SM (132 here), fewer for fewer tiles */
    {
        const talon__prefill_common c = TALON__PREFILL_COMMON(&a, a.v_head_dim);
        assert_planned_launch(row->symbol, &want, &c, TALON__PREFILL_KV_CONTIGUOUS, keys);
    }
    assert_int_equal(fake.last.block[0], 128 + 2 * rows); /* a warpgroup per 64 rows, and the producer */
}

/* While capturing, an op whose module is not loaded fails (nothing may be loaded during
   capture); after talon_ctx_preload it launches. */
static void test_capture_needs_preload(void **state) {
    talon_prefill_attention_args a = valid();
    (void)state;
    fake.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(talon_prefill_attention(g_ctx, STREAM, &a), TALON_ERROR_NOT_LOADED);
    assert_int_equal(fake.launches, 0);
    assert_int_equal(fake.memsets, 0); /* nothing enqueued either */
    assert_int_equal(talon_ctx_preload(g_ctx), TALON_SUCCESS);
    assert_int_equal(talon_prefill_attention(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 1);
}

#define ADD(fn) test_add(#fn, fn, NULL)
#define ADD_ROWS(table, fn)                                                                    \
    for (i = 0; i < sizeof table / sizeof table[0]; i++) test_add(table[i].name, fn, &table[i])

int main(void) {
    size_t i;
    ADD_ROWS(bad_rows, test_invalid_argument);
    ADD_ROWS(launch_rows, test_launch);
    ADD(test_sections);
    ADD(test_tile_rows);
    ADD(test_page_warps);
    ADD(test_paged_source);
    ADD(test_workspace_size);
    ADD(test_split);
    ADD(test_plan);
    ADD(test_capture_needs_preload);
    return test_run("test_prefill");
}
