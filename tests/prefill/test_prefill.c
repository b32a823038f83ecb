/* Dispatcher tests (fake driver, no GPU) for talon_prefill_attention: one validation test per
   rule, and the exact launches (kernel, grid, block, shared memory, parameters and the three
   tensor maps) for every head_dim and both types. */
#include "fake_driver.h"
#include "table_rows.h"
#include <math.h>

#define STREAM ((CUstream)(uintptr_t)0x5157)
enum { P_O = 0x10000000, P_LSE = 0x20000000, P_Q = 0x30000000, P_K = 0x40000000,
       P_V = 0x50000000, P_CUQ = 0x60000000, P_CUK = 0x70000000 };

/* Two requests of up to 1000 tokens, Llama-3-8B heads: Hq=32, Hk=8, D=128, causal. */
static talon_prefill_attention_args valid(void) {
    talon_prefill_attention_args a;
    memset(&a, 0, sizeof a);
    a.o = P_O; a.lse = P_LSE; a.q = P_Q; a.k = P_K; a.v = P_V;
    a.cu_seqlens_q = P_CUQ; a.cu_seqlens_k = P_CUK;
    a.batch = 2; a.total_q = 1500; a.total_kv = 1500; a.max_seqlen_q = 1000;
    a.num_qo_heads = 32; a.num_kv_heads = 8; a.head_dim = 128; a.causal = 1;
    return a;
}

/* ================================================================ validation */
#define P(f, k, v) SET(talon_prefill_attention_args, f, k, v)
#define BAD(NAME, SETS, FIELD, VALUE)                                                          \
    {.name = "talon_prefill_attention rejects " NAME, .kind = BAD_FIELDS, .set = SETS,          \
     .field = FIELD, .value = VALUE}
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
    BAD("dtype F32", ONE(P(dtype, ENUM, TALON_DTYPE_F32)), "args->dtype", "2"),
    BAD("dtype FP8 (not yet)", ONE(P(dtype, ENUM, TALON_DTYPE_FP8_E4M3)), "args->dtype", "4"),
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
    BAD("o overlapping q", ONE(P(o, PTR, P_Q + 4096 * 2 * 200)), "args->o", "0x30190000"),
    BAD("o overlapping v", ONE(P(o, PTR, P_V - 16)), "args->o", "0x4ffffff0"),
    BAD("lse overlapping o", ONE(P(lse, PTR, P_O + 64)), "args->o", "0x10000000"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_prefill_attention_args a = valid();
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(talon_prefill_attention(row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                                            row->kind == BAD_ARGS ? NULL : &a),
                    "talon_prefill_attention", row->field, row->value);
    assert_int_equal(fake.encodes, 0);
}

/* ================================================================ exact launches */
static const launch_row launch_rows[] = {
    {.name = "prefill bf16 d128 GQA 4 causal -> _bf16_d128", .set = NONE, .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill f16 d64 full, no lse -> _f16_d64", .set = ONE(P(head_dim, I64, 64), P(dtype, ENUM, TALON_DTYPE_F16), P(causal, INT, 0), P(lse, PTR, 0)), .symbol = "talon_prefill_attention_f16_d64"},
    {.name = "prefill bf16 d256 window, soft-cap, sm_scale -> _bf16_d256", .set = ONE(P(head_dim, I64, 256), P(window, I64, 100), P(logits_soft_cap, F32, 30.0f), P(sm_scale, F32, 0.25f)), .symbol = "talon_prefill_attention_bf16_d256"},
    {.name = "prefill MQA with padded strides -> _bf16_d128", .set = ONE(P(num_kv_heads, I64, 1), P(q_stride, I64, 4096 + 64), P(k_stride, I64, 256), P(v_stride, I64, 136), P(o_stride, I64, 8192), P(max_seqlen_q, I64, 129)), .symbol = "talon_prefill_attention_bf16_d128"},
    {.name = "prefill 12 tiles: 12 CTAs -> _bf16_d128", .set = ONE(P(batch, I64, 1), P(num_qo_heads, I64, 4), P(num_kv_heads, I64, 4), P(max_seqlen_q, I64, 300)), .symbol = "talon_prefill_attention_bf16_d128"},
};

/* A map {head_dim, heads, rows} with token stride `stride` elements, box {64, 1, box_rows},
   swizzled 128B, of the args' type, at base. */
static void check_map(const struct fake_enc *e, CUdeviceptr base, int64_t rows, int64_t heads,
                      int64_t d, int64_t stride, uint32_t box_rows, talon_dtype dt) {
    assert_int_equal(e->type, dt == TALON_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
    assert_int_equal(e->rank, 3);
    assert_true((CUdeviceptr)(uintptr_t)e->addr == base);
    assert_int_equal(e->dims[0], d);
    assert_int_equal(e->dims[1], heads);
    assert_int_equal(e->dims[2], rows);
    assert_int_equal(e->strides[0], d * 2);
    assert_int_equal(e->strides[1], stride * 2);
    assert_int_equal(e->box[0], 64);
    assert_int_equal(e->box[1], 1);
    assert_int_equal(e->box[2], box_rows);
    assert_int_equal(e->swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    talon_prefill_attention_args a = valid();
    talon__prefill_params got, want;
    int64_t m_blocks, tiles, qs, ks, vs, os;
    float sm;
    apply_sets(&a, row->set, MAX_SETS);
    if (talon_prefill_attention(g_ctx, STREAM, &a) != TALON_SUCCESS) fail_msg("%s", talon_last_error());
    m_blocks = (a.max_seqlen_q + 127) / 128;
    qs = a.q_stride ? a.q_stride : a.num_qo_heads * a.head_dim;
    ks = a.k_stride ? a.k_stride : a.num_kv_heads * a.head_dim;
    vs = a.v_stride ? a.v_stride : a.num_kv_heads * a.head_dim;
    os = a.o_stride ? a.o_stride : a.num_qo_heads * a.head_dim;
    assert_int_equal(fake.encodes, 3);
    check_map(&fake.enc_log[0], a.q, a.total_q, a.num_qo_heads, a.head_dim, qs, 128, a.dtype);
    check_map(&fake.enc_log[1], a.k, a.total_kv, a.num_kv_heads, a.head_dim, ks, a.head_dim == 256 ? 64 : 128, a.dtype);
    check_map(&fake.enc_log[2], a.v, a.total_kv, a.num_kv_heads, a.head_dim, vs, a.head_dim == 256 ? 64 : 128, a.dtype);
    /* every field but the maps (checked above through the encoder's arguments) */
    memcpy(&got, fake.last.params, sizeof got);
    memset(&want, 0, sizeof want);
    want.q_map = got.q_map; want.k_map = got.k_map; want.v_map = got.v_map;
    want.o = a.o; want.lse = a.lse;
    want.cu_seqlens_q = a.cu_seqlens_q; want.cu_seqlens_k = a.cu_seqlens_k;
    want.o_stride = os;
    want.total_q = a.total_q;
    want.batch = (int)a.batch;
    want.num_qo_heads = (int)a.num_qo_heads;
    want.group = (int)(a.num_qo_heads / a.num_kv_heads);
    want.m_blocks = (int)m_blocks;
    want.causal = a.causal;
    want.window = (int)a.window;
    /* scores in log2 units: sm_scale log2(e), or sm_scale / cap inside cap log2(e) tanh(.) */
    sm = a.sm_scale != 0 ? a.sm_scale : (float)(1.0 / sqrt((double)a.head_dim));
    want.scale = a.logits_soft_cap > 0 ? sm / a.logits_soft_cap : sm * 1.4426950408889634f;
    want.cap = a.logits_soft_cap * 1.4426950408889634f;
    /* persistent: one CTA per SM (132 here), fewer for fewer tiles */
    tiles = m_blocks * a.batch * a.num_qo_heads;
    assert_single_launch(row->symbol, tiles < 132 ? tiles : 132, STREAM, &want, sizeof want);
    assert_int_equal(fake.last.block[0], 384);
}

/* While capturing, an op whose module is not loaded fails (nothing may be loaded during
   capture); after talon_ctx_preload it launches. */
static void test_capture_needs_preload(void **state) {
    talon_prefill_attention_args a = valid();
    (void)state;
    fake.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(talon_prefill_attention(g_ctx, STREAM, &a), TALON_ERROR_NOT_LOADED);
    assert_int_equal(fake.launches, 0);
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
    ADD(test_capture_needs_preload);
    return test_run("test_prefill");
}
