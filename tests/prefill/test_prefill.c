/* Dispatcher tests (fake driver, no GPU) for talon_prefill_attention: one validation test per
   rule, and the exact launches (kernel, grid, block, shared memory, parameters and the three
   tensor maps) for every head_dim and both types. */
#include "fake_driver.h"
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
typedef struct bad_row {
    const char *name;
    void (*edit)(talon_prefill_attention_args *a);
    int null_ctx, null_args;
    const char *field, *value;
} bad_row;

#define EDIT(fn, body) static void fn(talon_prefill_attention_args *a) { body; }
EDIT(o_null, a->o = 0)
EDIT(o_mis, a->o = P_O + 8)
EDIT(lse_mis, a->lse = P_LSE + 2)
EDIT(q_null, a->q = 0)
EDIT(q_mis, a->q = P_Q + 2)
EDIT(k_null, a->k = 0)
EDIT(k_mis, a->k = P_K + 4)
EDIT(v_null, a->v = 0)
EDIT(v_mis, a->v = P_V + 8)
EDIT(cuq_null, a->cu_seqlens_q = 0)
EDIT(cuq_mis, a->cu_seqlens_q = P_CUQ + 2)
EDIT(cuk_null, a->cu_seqlens_k = 0)
EDIT(cuk_mis, a->cu_seqlens_k = P_CUK + 1)
EDIT(dtype_f32, a->dtype = TALON_DTYPE_F32)
EDIT(dtype_fp8, a->dtype = TALON_DTYPE_FP8_E4M3)
EDIT(batch0, a->batch = 0)
EDIT(batch_big, a->batch = (1 << 20) + 1)
EDIT(tq0, a->total_q = 0)
EDIT(tq_big, a->total_q = 2147483648LL)
EDIT(tk0, a->total_kv = 0)
EDIT(tk_big, a->total_kv = 2147483648LL)
EDIT(msq0, a->max_seqlen_q = 0)
EDIT(msq_big, a->max_seqlen_q = 1501)
EDIT(hq0, a->num_qo_heads = 0)
EDIT(hq_big, a->num_qo_heads = 1025)
EDIT(hk0, a->num_kv_heads = 0)
EDIT(hq_mult, a->num_qo_heads = 12)
EDIT(d96, a->head_dim = 96)
EDIT(d512, a->head_dim = 512)
EDIT(qs_short, a->q_stride = 4088)
EDIT(qs_odd, a->q_stride = 4100)
EDIT(ks_short, a->k_stride = 1000)
EDIT(vs_odd, a->v_stride = 1028)
EDIT(os_short, a->o_stride = 8)
EDIT(win_neg, a->window = -1)
EDIT(win_big, a->window = 2147483648LL)
EDIT(causal2, a->causal = 2)
EDIT(scale_nan, a->sm_scale = NAN)
EDIT(scale_inf, a->sm_scale = INFINITY)
EDIT(scale_neg, a->sm_scale = -0.5f)
EDIT(cap_neg, a->logits_soft_cap = -1.0f)
EDIT(cap_inf, a->logits_soft_cap = INFINITY)
EDIT(grid_big, a->batch = 1 << 20; a->total_q = 1LL << 30; a->max_seqlen_q = 1 << 20; a->num_qo_heads = 1024; a->num_kv_heads = 1024)
EDIT(o_over_q, a->o = P_Q + 4096 * 2 * 200)
EDIT(o_over_v, a->o = P_V - 16)
EDIT(o_over_lse, a->lse = P_O + 64)

#define BR(N, E, F, V) {.name = "talon_prefill_attention rejects " N, .edit = E, .field = F, .value = V}
static const bad_row bad_rows[] = {
    {.name = "talon_prefill_attention rejects ctx NULL", .null_ctx = 1, .field = "ctx", .value = "NULL"},
    {.name = "talon_prefill_attention rejects args NULL", .null_args = 1, .field = "args", .value = "NULL"},
    BR("o NULL", o_null, "args->o", "NULL"),
    BR("o not 16-byte aligned", o_mis, "args->o", "0x10000008"),
    BR("lse not 4-byte aligned", lse_mis, "args->lse", "0x20000002"),
    BR("q NULL", q_null, "args->q", "NULL"),
    BR("q not 16-byte aligned", q_mis, "args->q", "0x30000002"),
    BR("k NULL", k_null, "args->k", "NULL"),
    BR("k not 16-byte aligned", k_mis, "args->k", "0x40000004"),
    BR("v NULL", v_null, "args->v", "NULL"),
    BR("v not 16-byte aligned", v_mis, "args->v", "0x50000008"),
    BR("cu_seqlens_q NULL", cuq_null, "args->cu_seqlens_q", "NULL"),
    BR("cu_seqlens_q not 4-byte aligned", cuq_mis, "args->cu_seqlens_q", "0x60000002"),
    BR("cu_seqlens_k NULL", cuk_null, "args->cu_seqlens_k", "NULL"),
    BR("cu_seqlens_k not 4-byte aligned", cuk_mis, "args->cu_seqlens_k", "0x70000001"),
    BR("dtype F32", dtype_f32, "args->dtype", "2"),
    BR("dtype FP8 (not yet)", dtype_fp8, "args->dtype", "4"),
    BR("batch 0", batch0, "args->batch", "0"),
    BR("batch 2^20+1", batch_big, "args->batch", "1048577"),
    BR("total_q 0", tq0, "args->total_q", "0"),
    BR("total_q 2^31", tq_big, "args->total_q", "2147483648"),
    BR("total_kv 0", tk0, "args->total_kv", "0"),
    BR("total_kv 2^31", tk_big, "args->total_kv", "2147483648"),
    BR("max_seqlen_q 0", msq0, "args->max_seqlen_q", "0"),
    BR("max_seqlen_q past total_q", msq_big, "args->max_seqlen_q", "1501"),
    BR("num_qo_heads 0", hq0, "args->num_qo_heads", "0"),
    BR("num_qo_heads 1025", hq_big, "args->num_qo_heads", "1025"),
    BR("num_kv_heads 0", hk0, "args->num_kv_heads", "0"),
    BR("num_qo_heads 12 with 8 kv heads", hq_mult, "args->num_qo_heads", "12"),
    BR("head_dim 96", d96, "args->head_dim", "96"),
    BR("head_dim 512", d512, "args->head_dim", "512"),
    BR("q_stride shorter than a token", qs_short, "args->q_stride", "4088"),
    BR("q_stride not a multiple of 8", qs_odd, "args->q_stride", "4100"),
    BR("k_stride shorter than a token", ks_short, "args->k_stride", "1000"),
    BR("v_stride not a multiple of 8", vs_odd, "args->v_stride", "1028"),
    BR("o_stride shorter than a token", os_short, "args->o_stride", "8"),
    BR("window -1", win_neg, "args->window", "-1"),
    BR("window 2^31", win_big, "args->window", "2147483648"),
    BR("causal 2", causal2, "args->causal", "2"),
    BR("sm_scale NaN", scale_nan, "args->sm_scale", "nan"),
    BR("sm_scale inf", scale_inf, "args->sm_scale", "inf"),
    BR("sm_scale -0.5", scale_neg, "args->sm_scale", "-0.5"),
    BR("logits_soft_cap -1", cap_neg, "args->logits_soft_cap", "-1"),
    BR("logits_soft_cap inf", cap_inf, "args->logits_soft_cap", "inf"),
    BR("a grid over 2^31-1 CTAs", grid_big, "args->max_seqlen_q", "1048576"),
    BR("o overlapping q", o_over_q, "args->o", "0x30190000"),
    BR("o overlapping v", o_over_v, "args->o", "0x4ffffff0"),
    BR("lse overlapping o", o_over_lse, "args->o", "0x10000000"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_prefill_attention_args a = valid();
    if (row->edit) row->edit(&a);
    assert_rejected(talon_prefill_attention(row->null_ctx ? NULL : g_ctx, STREAM,
                                            row->null_args ? NULL : &a),
                    "talon_prefill_attention", row->field, row->value);
    assert_int_equal(fake.encodes, 0);
}

/* ================================================================ exact launches */
typedef struct launch_row {
    const char *name;
    void (*edit)(talon_prefill_attention_args *a);
    const char *symbol;
} launch_row;

EDIT(l_none, (void)a)
EDIT(l_d64_f16, a->head_dim = 64; a->dtype = TALON_DTYPE_F16; a->causal = 0; a->lse = 0)
EDIT(l_d256_window_cap, a->head_dim = 256; a->window = 100; a->logits_soft_cap = 30.0f; a->sm_scale = 0.25f)
EDIT(l_strides_mqa, a->num_kv_heads = 1; a->q_stride = 4096 + 64; a->k_stride = 256; a->v_stride = 136; a->o_stride = 8192; a->max_seqlen_q = 129)
EDIT(l_few_tiles, a->batch = 1; a->num_qo_heads = 4; a->num_kv_heads = 4; a->max_seqlen_q = 300)

static const launch_row launch_rows[] = {
    {"prefill bf16 d128 GQA 4 causal -> _bf16_d128", l_none, "talon_prefill_attention_bf16_d128"},
    {"prefill f16 d64 full, no lse -> _f16_d64", l_d64_f16, "talon_prefill_attention_f16_d64"},
    {"prefill bf16 d256 window, soft-cap, sm_scale -> _bf16_d256", l_d256_window_cap, "talon_prefill_attention_bf16_d256"},
    {"prefill MQA with padded strides -> _bf16_d128", l_strides_mqa, "talon_prefill_attention_bf16_d128"},
    {"prefill 12 tiles: 12 CTAs -> _bf16_d128", l_few_tiles, "talon_prefill_attention_bf16_d128"},
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
    row->edit(&a);
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
