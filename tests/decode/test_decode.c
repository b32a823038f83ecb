/* Dispatcher tests (fake driver, no GPU) for talon_decode_attention, its workspace size and
   talon_merge_attention_states: one validation test per rule, the exact launches (kernel,
   grid, block, params) of the one- and multi-split paths, the split rule on the benchmark
   shapes, and self-tests of the fp64 references and the e4m3 conversion. */
#include "fake_driver.h"
#include <math.h>
#include "ref_attn.h"

#define STREAM ((CUstream)(uintptr_t)0x5157)
enum { P_O = 0x100000, P_LSE = 0x200000, P_Q = 0x300000, P_K = 0x400000, P_V = 0x500000,
       P_PT = 0x600000, P_LENS = 0x700000, P_WS = 0x800000, P_OA = 0x900000,
       P_LA = 0xA00000, P_OB = 0xB00000, P_LB = 0xC00000 };

/* Two CTAs' worth of a Llama-3-8B-like decode: B=2, Hq=32, Hk=8, D=128, page 16, 4096 keys. */
static talon_decode_attention_args valid_decode(void) {
    talon_decode_attention_args a;
    memset(&a, 0, sizeof a);
    a.o = P_O; a.lse = P_LSE; a.q = P_Q; a.k_cache = P_K; a.v_cache = P_V;
    a.page_table = P_PT; a.kv_lens = P_LENS; a.workspace = P_WS; a.workspace_bytes = 1 << 30;
    a.batch = 2; a.num_qo_heads = 32; a.num_kv_heads = 8; a.head_dim = 128; a.page_size = 16;
    a.max_kv_len = 4096;
    return a;
}

static talon_merge_attention_states_args valid_merge(void) {
    talon_merge_attention_states_args a;
    memset(&a, 0, sizeof a);
    a.o = P_O; a.lse = P_LSE; a.o_a = P_OA; a.lse_a = P_LA; a.o_b = P_OB; a.lse_b = P_LB;
    a.rows = 7; a.head_dim = 128;
    return a;
}

/* ================================================================ validation */
typedef enum { OP_DECODE, OP_WS, OP_MERGE } op_id;
static const char *const op_names[] = {"talon_decode_attention",
                                       "talon_decode_attention_workspace_size",
                                       "talon_merge_attention_states"};
typedef struct bad_row {
    const char *name;
    op_id op;
    void (*edit)(void *args); /* turns the valid args into the bad ones */
    int null_ctx, null_args, null_out;
    const char *field, *value;
} bad_row;

#define D_EDIT(fn, body) static void fn(void *p) { talon_decode_attention_args *a = p; body; }
#define M_EDIT(fn, body) static void fn(void *p) { talon_merge_attention_states_args *a = p; body; }
D_EDIT(d_o_null, a->o = 0)
D_EDIT(d_o_mis, a->o = P_O + 8)
D_EDIT(d_lse_mis, a->lse = P_LSE + 2)
D_EDIT(d_q_null, a->q = 0)
D_EDIT(d_q_mis, a->q = P_Q + 2)
D_EDIT(d_k_null, a->k_cache = 0)
D_EDIT(d_k_mis, a->k_cache = P_K + 4)
D_EDIT(d_v_null, a->v_cache = 0)
D_EDIT(d_v_mis, a->v_cache = P_V + 8)
D_EDIT(d_pt_null, a->page_table = 0)
D_EDIT(d_pt_mis, a->page_table = P_PT + 2)
D_EDIT(d_lens_null, a->kv_lens = 0)
D_EDIT(d_lens_mis, a->kv_lens = P_LENS + 1)
D_EDIT(d_dtype_f32, a->dtype = TALON_DTYPE_F32; a->kv_dtype = TALON_DTYPE_F32)
D_EDIT(d_dtype_7, a->dtype = (talon_dtype)7)
D_EDIT(d_kv_f16, a->kv_dtype = TALON_DTYPE_F16)
D_EDIT(d_kv_i32, a->kv_dtype = TALON_DTYPE_I32)
D_EDIT(d_batch0, a->batch = 0)
D_EDIT(d_batch_big, a->batch = 16777217)
D_EDIT(d_hq0, a->num_qo_heads = 0)
D_EDIT(d_hq_big, a->num_qo_heads = 1025)
D_EDIT(d_hk0, a->num_kv_heads = 0)
D_EDIT(d_hq_mult, a->num_qo_heads = 12; a->num_kv_heads = 8)
D_EDIT(d_d96, a->head_dim = 96)
D_EDIT(d_d512, a->head_dim = 512)
D_EDIT(d_ps0, a->page_size = 0)
D_EDIT(d_ps3, a->page_size = 3)
D_EDIT(d_ps24, a->page_size = 24)
D_EDIT(d_ps512, a->page_size = 512)
D_EDIT(d_layout2, a->layout = (talon_kv_layout)2)
D_EDIT(d_max0, a->max_kv_len = 0)
D_EDIT(d_max_neg, a->max_kv_len = -5)
D_EDIT(d_max_big, a->max_kv_len = 1073741825)
D_EDIT(d_window_neg, a->window = -1)
D_EDIT(d_splits_neg, a->num_splits = -1)
D_EDIT(d_splits_big, a->num_splits = 257)
D_EDIT(d_pt_stride, a->page_table_stride = 255) /* 4096 / 16 = 256 pages */
D_EDIT(d_pages_neg, a->num_pages = -1)
D_EDIT(d_pages_big, a->num_pages = 2147483648LL)
D_EDIT(d_pages_rows, a->num_pages = 33554432) /* x 16 x 8 heads = 2^32 rows */
/* 2^29 CTAs (fine), but 2^32 blocks to merge the 2 splits */
D_EDIT(d_merge_grid, a->batch = 1 << 24; a->num_qo_heads = 128; a->num_kv_heads = 32;
       a->head_dim = 256; a->num_splits = 2)
D_EDIT(d_ws_small, a->num_splits = 4; a->workspace_bytes = 4 * 2 * 32 * 129 * 4 - 16)
D_EDIT(d_ws_null, a->workspace = 0)
D_EDIT(d_ws_mis, a->workspace = P_WS + 4)
D_EDIT(d_scale_nan, a->sm_scale = NAN)
D_EDIT(d_scale_inf, a->sm_scale = INFINITY)
D_EDIT(d_cap_neg, a->logits_soft_cap = -1.0f)
D_EDIT(d_cap_nan, a->logits_soft_cap = NAN)
D_EDIT(d_kscale0, a->kv_dtype = TALON_DTYPE_FP8_E4M3; a->k_scale = 0; a->v_scale = 1)
D_EDIT(d_vscale_neg, a->kv_dtype = TALON_DTYPE_FP8_E4M3; a->k_scale = 1; a->v_scale = -2)
D_EDIT(d_kscale_inf, a->kv_dtype = TALON_DTYPE_FP8_E4M3; a->k_scale = INFINITY; a->v_scale = 1)
M_EDIT(m_o_null, a->o = 0)
M_EDIT(m_o_mis, a->o = P_O + 2)
M_EDIT(m_lse_mis, a->lse = P_LSE + 2)
M_EDIT(m_oa_null, a->o_a = 0)
M_EDIT(m_oa_mis, a->o_a = P_OA + 8)
M_EDIT(m_la_null, a->lse_a = 0)
M_EDIT(m_ob_null, a->o_b = 0)
M_EDIT(m_lb_null, a->lse_b = 0)
M_EDIT(m_lb_mis, a->lse_b = P_LB + 1)
M_EDIT(m_dtype, a->dtype = TALON_DTYPE_FP8_E4M3)
M_EDIT(m_d0, a->head_dim = 0)
M_EDIT(m_d12, a->head_dim = 12)
M_EDIT(m_d_big, a->head_dim = 4104)
M_EDIT(m_rows0, a->rows = 0)
M_EDIT(m_rows_big, a->rows = 4194305)

#define DB(N, E, F, V) {.name = "talon_decode_attention rejects " N, .op = OP_DECODE, .edit = E, .field = F, .value = V}
#define WB(N, E, F, V) {.name = "talon_decode_attention_workspace_size rejects " N, .op = OP_WS, .edit = E, .field = F, .value = V}
#define MB(N, E, F, V) {.name = "talon_merge_attention_states rejects " N, .op = OP_MERGE, .edit = E, .field = F, .value = V}
static const bad_row bad_rows[] = {
    {.name = "talon_decode_attention rejects ctx NULL", .op = OP_DECODE, .null_ctx = 1, .field = "ctx", .value = "NULL"},
    {.name = "talon_decode_attention rejects args NULL", .op = OP_DECODE, .null_args = 1, .field = "args", .value = "NULL"},
    DB("o NULL", d_o_null, "args->o", "NULL"),
    DB("o not 16-byte aligned", d_o_mis, "args->o", "0x100008"),
    DB("lse not 4-byte aligned", d_lse_mis, "args->lse", "0x200002"),
    DB("q NULL", d_q_null, "args->q", "NULL"),
    DB("q not 16-byte aligned", d_q_mis, "args->q", "0x300002"),
    DB("k_cache NULL", d_k_null, "args->k_cache", "NULL"),
    DB("k_cache not 16-byte aligned", d_k_mis, "args->k_cache", "0x400004"),
    DB("v_cache NULL", d_v_null, "args->v_cache", "NULL"),
    DB("v_cache not 16-byte aligned", d_v_mis, "args->v_cache", "0x500008"),
    DB("page_table NULL", d_pt_null, "args->page_table", "NULL"),
    DB("page_table not 4-byte aligned", d_pt_mis, "args->page_table", "0x600002"),
    DB("kv_lens NULL", d_lens_null, "args->kv_lens", "NULL"),
    DB("kv_lens not 4-byte aligned", d_lens_mis, "args->kv_lens", "0x700001"),
    DB("dtype F32", d_dtype_f32, "args->dtype", "2"),
    DB("dtype 7", d_dtype_7, "args->dtype", "7"),
    DB("kv_dtype F16 with dtype BF16", d_kv_f16, "args->kv_dtype", "1"),
    DB("kv_dtype I32", d_kv_i32, "args->kv_dtype", "3"),
    DB("batch 0", d_batch0, "args->batch", "0"),
    DB("batch 2^24+1", d_batch_big, "args->batch", "16777217"),
    DB("num_qo_heads 0", d_hq0, "args->num_qo_heads", "0"),
    DB("num_qo_heads 1025", d_hq_big, "args->num_qo_heads", "1025"),
    DB("num_kv_heads 0", d_hk0, "args->num_kv_heads", "0"),
    DB("num_qo_heads 12 with 8 kv heads", d_hq_mult, "args->num_qo_heads", "12"),
    DB("head_dim 96", d_d96, "args->head_dim", "96"),
    DB("head_dim 512", d_d512, "args->head_dim", "512"),
    DB("page_size 0", d_ps0, "args->page_size", "0"),
    DB("page_size 3", d_ps3, "args->page_size", "3"),
    DB("page_size 24", d_ps24, "args->page_size", "24"),
    DB("page_size 512", d_ps512, "args->page_size", "512"),
    DB("layout 2", d_layout2, "args->layout", "2"),
    DB("max_kv_len 0", d_max0, "args->max_kv_len", "0"),
    DB("max_kv_len -5", d_max_neg, "args->max_kv_len", "-5"),
    DB("max_kv_len 2^30+1", d_max_big, "args->max_kv_len", "1073741825"),
    DB("window -1", d_window_neg, "args->window", "-1"),
    DB("num_splits -1", d_splits_neg, "args->num_splits", "-1"),
    DB("num_splits 257", d_splits_big, "args->num_splits", "257"),
    DB("page_table_stride shorter than max_kv_len's pages", d_pt_stride, "args->page_table_stride", "255"),
    DB("num_pages -1", d_pages_neg, "args->num_pages", "-1"),
    DB("num_pages 2^31", d_pages_big, "args->num_pages", "2147483648"),
    DB("num_pages making 2^32 cache rows", d_pages_rows, "args->num_pages", "33554432"),
    DB("splits whose merge needs 2^32 blocks", d_merge_grid, "args->batch", "16777216"),
    DB("workspace_size 16 bytes short", d_ws_small, "args->workspace_bytes", "132080"),
    DB("workspace NULL when splits > 1", d_ws_null, "args->workspace", "NULL"),
    DB("workspace not 16-byte aligned", d_ws_mis, "args->workspace", "0x800004"),
    DB("sm_scale NaN", d_scale_nan, "args->sm_scale", "nan"),
    DB("sm_scale inf", d_scale_inf, "args->sm_scale", "inf"),
    DB("logits_soft_cap -1", d_cap_neg, "args->logits_soft_cap", "-1"),
    DB("logits_soft_cap NaN", d_cap_nan, "args->logits_soft_cap", "nan"),
    DB("fp8 k_scale 0", d_kscale0, "args->k_scale", "0"),
    DB("fp8 v_scale -2", d_vscale_neg, "args->v_scale", "-2"),
    DB("fp8 k_scale inf", d_kscale_inf, "args->k_scale", "inf"),
    {.name = "talon_decode_attention_workspace_size rejects ctx NULL", .op = OP_WS, .null_ctx = 1, .field = "ctx", .value = "NULL"},
    {.name = "talon_decode_attention_workspace_size rejects args NULL", .op = OP_WS, .null_args = 1, .field = "args", .value = "NULL"},
    {.name = "talon_decode_attention_workspace_size rejects bytes NULL", .op = OP_WS, .null_out = 1, .field = "bytes", .value = "NULL"},
    WB("head_dim 96", d_d96, "args->head_dim", "96"),
    WB("num_qo_heads 12 with 8 kv heads", d_hq_mult, "args->num_qo_heads", "12"),
    WB("page_size 3", d_ps3, "args->page_size", "3"),
    WB("max_kv_len 0", d_max0, "args->max_kv_len", "0"),
    WB("splits whose merge needs 2^32 blocks", d_merge_grid, "args->batch", "16777216"),
    {.name = "talon_merge_attention_states rejects ctx NULL", .op = OP_MERGE, .null_ctx = 1, .field = "ctx", .value = "NULL"},
    {.name = "talon_merge_attention_states rejects args NULL", .op = OP_MERGE, .null_args = 1, .field = "args", .value = "NULL"},
    MB("o NULL", m_o_null, "args->o", "NULL"),
    MB("o not 16-byte aligned", m_o_mis, "args->o", "0x100002"),
    MB("lse not 4-byte aligned", m_lse_mis, "args->lse", "0x200002"),
    MB("o_a NULL", m_oa_null, "args->o_a", "NULL"),
    MB("o_a not 16-byte aligned", m_oa_mis, "args->o_a", "0x900008"),
    MB("lse_a NULL", m_la_null, "args->lse_a", "NULL"),
    MB("o_b NULL", m_ob_null, "args->o_b", "NULL"),
    MB("lse_b NULL", m_lb_null, "args->lse_b", "NULL"),
    MB("lse_b not 4-byte aligned", m_lb_mis, "args->lse_b", "0xc00001"),
    MB("dtype FP8", m_dtype, "args->dtype", "4"),
    MB("head_dim 0", m_d0, "args->head_dim", "0"),
    MB("head_dim 12", m_d12, "args->head_dim", "12"),
    MB("head_dim 4104", m_d_big, "args->head_dim", "4104"),
    MB("rows 0", m_rows0, "args->rows", "0"),
    MB("rows 4194305", m_rows_big, "args->rows", "4194305"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    const char *op = op_names[row->op];
    talon_decode_attention_args d = valid_decode();
    talon_merge_attention_states_args m = valid_merge();
    talon_ctx *ctx = row->null_ctx ? NULL : g_ctx;
    int64_t bytes = -7;
    talon_status s;
    if (row->edit) row->edit(row->op == OP_MERGE ? (void *)&m : (void *)&d);
    if (row->op == OP_DECODE) s = talon_decode_attention(ctx, STREAM, row->null_args ? NULL : &d);
    else if (row->op == OP_WS)
        s = talon_decode_attention_workspace_size(ctx, row->null_args ? NULL : &d,
                                                  row->null_out ? NULL : &bytes);
    else s = talon_merge_attention_states(ctx, STREAM, row->null_args ? NULL : &m);
    if (row->op == OP_WS) assert_int_equal(bytes, -7);
    assert_rejected(s, op, row->field, row->value);
}

/* A misaligned pointer's message states the rule in words (issue: "is not aligned to the
   16-byte element" read as if the element were 16 bytes). */
static void test_alignment_message(void **state) {
    talon_decode_attention_args d = valid_decode();
    talon_merge_attention_states_args m = valid_merge();
    (void)state;
    d.o += 8;
    assert_int_equal(talon_decode_attention(g_ctx, STREAM, &d), TALON_ERROR_INVALID_ARGUMENT);
    assert_contains(talon_last_error(), "must be 16-byte aligned");
    m.lse_a += 2;
    assert_int_equal(talon_merge_attention_states(g_ctx, STREAM, &m), TALON_ERROR_INVALID_ARGUMENT);
    assert_contains(talon_last_error(), "must be 4-byte aligned");
}

/* ================================================================ the split rule */
/* The head chunks as talon.h documents them: ceil(group / 8) at head_dim <= 128, else
   ceil(group / 4). */
static int64_t doc_chunks(int64_t hq, int64_t hk, int64_t d) {
    const int64_t most = d <= 128 ? 8 : 4;
    return (hq / hk + most - 1) / most;
}

/* The rule as talon.h documents it, written out independently: one split from 199 to 528
   CTAs, else the least cost(s) = waves / s, raised towards 264 CTAs (128-key chunks at
   least) when that leaves at most 198. */
static int64_t doc_splits_on(int64_t sms, int64_t batch, int64_t hq, int64_t hk, int64_t d,
                             int64_t max_kv_len) {
    const int64_t chunks = doc_chunks(hq, hk, d), slots = 4 * sms, ctas = batch * hk * chunks;
    int64_t most = (max_kv_len + 1023) / 1024, s;
    double best = 1e300;
    if (2 * ctas > 3 * sms && ctas <= slots) return 1;
    if (most > 256) most = 256;
    for (s = 1; s <= most; s++) {
        double c = (double)((ctas * s + slots - 1) / slots) / (double)s;
        if (c < best) best = c;
    }
    for (s = 1; s <= most; s++)
        if ((double)((ctas * s + slots - 1) / slots) / (double)s <= best * (1 + 1e-12)) break;
    if (2 * ctas * s <= 3 * sms) {
        int64_t fill = (2 * sms + ctas - 1) / ctas, by_keys = (max_kv_len + 127) / 128;
        if (fill > by_keys) fill = by_keys;
        if (fill > 256) fill = 256;
        if (fill > s) s = fill;
    }
    return s;
}

/* The figures of talon.h are for 132 SMs (H100 SXM / H200). */
static int64_t doc_splits(int64_t batch, int64_t hq, int64_t hk, int64_t d, int64_t max_kv_len) {
    return doc_splits_on(132, batch, hq, hk, d, max_kv_len);
}

static int64_t ws_bytes(int64_t splits, int64_t rows, int64_t d) {
    return splits == 1 ? 0 : (splits * rows * (d + 1) * 4 + 15) / 16 * 16;
}

static void test_split_rule(void **state) {
    static const struct { int64_t b, hq, hk, d, max, splits; } rows[] = {
        {64, 32, 8, 128, 4096, 1},  /* 512 CTAs fit the 528 slots: one wave */
        {1, 32, 8, 128, 32768, 32}, /* 8 CTAs: 32 splits (chunks >= 1024 keys) */
        {256, 32, 8, 128, 512, 1},  /* 2048 CTAs: 4 waves either way */
        {16, 32, 8, 128, 4096, 4},  /* 128 CTAs: 4 splits fill the 528 slots */
        {24, 32, 8, 128, 4096, 2},  /* 192 CTAs: 2 splits */
        {25, 32, 8, 128, 4096, 1},  /* 200 CTAs: more than 1.5 per SM, one wave */
        {66, 32, 8, 128, 4096, 1},  /* 528 CTAs: the last of one wave */
        {75, 32, 8, 128, 4096, 4},  /* 600 CTAs: past one wave, 4 splits (5 waves of 1/4) */
        {1, 8, 8, 64, 100, 1},      /* one chunk of keys */
        {1, 32, 8, 128, 1024, 8},   /* 8 CTAs: chunks of 128 keys */
        {1, 32, 8, 128, 8192, 33},  /* 8 x 8 CTAs at 1024 keys: raised to 264 CTAs */
        {1, 32, 8, 128, 16384, 33}, /* 8 x 16 CTAs: the same */
        {2, 32, 8, 128, 8192, 17},  /* 16 x 8 CTAs: 272 */
        {8, 32, 8, 128, 2048, 5},   /* 64 x 2 CTAs: 320 */
        {1, 4, 1, 128, 65536, 256}, /* 1 CTA: 264 capped at 256 splits */
        {1, 4, 1, 128, 1000, 8},    /* 1 CTA: 128-key chunks */
        {4, 32, 1, 256, 1 << 20, 0}, {3, 12, 4, 128, 700, 0}, {1, 64, 1, 128, 65536, 0},
        {7, 40, 5, 64, 5000, 0}, {1, 2, 1, 128, 9999, 0},
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        talon_decode_attention_args a = valid_decode();
        int64_t bytes = -1, want = doc_splits(rows[i].b, rows[i].hq, rows[i].hk, rows[i].d, rows[i].max);
        if (rows[i].splits) assert_int_equal(want, rows[i].splits);
        a.batch = rows[i].b; a.num_qo_heads = rows[i].hq; a.num_kv_heads = rows[i].hk;
        a.head_dim = rows[i].d; a.max_kv_len = rows[i].max;
        assert_int_equal(talon_decode_attention_workspace_size(g_ctx, &a, &bytes), TALON_SUCCESS);
        assert_int_equal(bytes, ws_bytes(want, rows[i].b * rows[i].hq, rows[i].d));
        a.workspace_bytes = bytes;
        assert_int_equal(talon_decode_attention(g_ctx, STREAM, &a), TALON_SUCCESS);
        assert_int_equal(fake.log[fake.launches - (want > 1 ? 2 : 1)].grid[1], want);
        a.num_splits = 5; /* forced */
        assert_int_equal(talon_decode_attention_workspace_size(g_ctx, &a, &bytes), TALON_SUCCESS);
        assert_int_equal(bytes, ws_bytes(5, rows[i].b * rows[i].hq, rows[i].d));
        fake.launches = 0;
    }
}

/* ================================================================ exact launches */
typedef struct launch_row {
    const char *name;
    void (*edit)(void *args);
    const char *symbol;
} launch_row;

D_EDIT(l_none, (void)a)
D_EDIT(l_f16_fp8_g1, a->dtype = TALON_DTYPE_F16; a->kv_dtype = TALON_DTYPE_FP8_E4M3; a->num_qo_heads = 8; a->k_scale = 0.5f; a->v_scale = 2.0f)
D_EDIT(l_g2_d64, a->num_qo_heads = 16; a->head_dim = 64; a->num_splits = 1; a->lse = 0)
D_EDIT(l_g3_d256, a->num_qo_heads = 24; a->head_dim = 256; a->page_size = 1; a->page_table_stride = 5000; a->window = 100; a->logits_soft_cap = 30.0f; a->sm_scale = 0.25f)
D_EDIT(l_mqa_g12, a->num_qo_heads = 12; a->num_kv_heads = 1; a->num_splits = 7; a->page_size = 256)
D_EDIT(l_g5, a->num_qo_heads = 40; a->num_kv_heads = 8; a->batch = 64)
D_EDIT(l_bf16_fp8_g8, a->kv_dtype = TALON_DTYPE_FP8_E4M3; a->k_scale = 3.0f; a->v_scale = 0.25f; a->num_qo_heads = 64)
D_EDIT(l_g8_d64, a->num_qo_heads = 64; a->head_dim = 64)
D_EDIT(l_g16_d256, a->num_qo_heads = 128; a->head_dim = 256)
D_EDIT(l_fp8_d256, a->kv_dtype = TALON_DTYPE_FP8_E4M3; a->k_scale = 1.0f; a->v_scale = 1.0f; a->head_dim = 256)
D_EDIT(l_hnd, a->layout = TALON_KV_HND)
D_EDIT(l_hnd_fp8_g1, a->layout = TALON_KV_HND; a->kv_dtype = TALON_DTYPE_FP8_E4M3; a->k_scale = 1.0f; a->v_scale = 1.0f; a->num_qo_heads = 8; a->page_size = 64; a->head_dim = 64)

static const launch_row launch_rows[] = {
    {"decode bf16 GQA 4, auto splits -> _d128_g4 + merge", l_none, "talon_decode_attention_bf16_d128_g4"},
    {"decode f16 fp8 MHA -> _kvfp8_d128_g1", l_f16_fp8_g1, "talon_decode_attention_f16_kvfp8_d128_g1"},
    {"decode GQA 2 d64 one split, no lse -> _d64_g2", l_g2_d64, "talon_decode_attention_bf16_d64_g2"},
    {"decode GQA 3 d256 page 1, window, soft-cap -> _d256_g4", l_g3_d256, "talon_decode_attention_bf16_d256_g4"},
    {"decode MQA 12 heads: 2 chunks of 6 -> _g8", l_mqa_g12, "talon_decode_attention_bf16_d128_g8"},
    {"decode GQA 5: one chunk -> _g8", l_g5, "talon_decode_attention_bf16_d128_g8"},
    {"decode bf16 fp8 GQA 8: one chunk -> _kvfp8_d128_g8", l_bf16_fp8_g8, "talon_decode_attention_bf16_kvfp8_d128_g8"},
    {"decode GQA 8 d64 -> _d64_g8", l_g8_d64, "talon_decode_attention_bf16_d64_g8"},
    {"decode GQA 16 d256: 4 chunks of 4 -> _d256_g4", l_g16_d256, "talon_decode_attention_bf16_d256_g4"},
    {"decode bf16 fp8 GQA 4 d256 -> _kvfp8_d256_g4", l_fp8_d256, "talon_decode_attention_bf16_kvfp8_d256_g4"},
    {"decode HND -> _d128_g4", l_hnd, "talon_decode_attention_bf16_d128_g4"},
    {"decode HND fp8 MHA d64 page 64 -> _kvfp8_d64_g1", l_hnd_fp8_g1, "talon_decode_attention_bf16_kvfp8_d64_g1"},
};

static void check_kernel(const fake_launch *l, const char *symbol) {
    int k = kernel_index(symbol);
    assert_true(k >= 0);
    if (l->fn != fake_handle_for(symbol))
        fail_msg("launched %s, expected %s", talon__kernels[fake.fns[FN_INDEX(l->fn)].kernel].symbol,
                 symbol);
    assert_int_equal(l->block[0], 128);
    assert_int_equal(l->block[1], 1);
    assert_int_equal(l->block[2], 1);
    assert_int_equal(l->grid[2], 1);
    /* the K/V ring: 48 KB on the per-lane rows (16-bit g1 and d256), else 32 KB */
    const int lane = !strstr(symbol, "kvfp8") && (strstr(symbol, "_g1") || strstr(symbol, "_d256"));
    assert_int_equal(l->smem, strstr(symbol, "merge") ? 0 : lane ? 49152 : 32768);
    /* the split merge is a programmatic dependent of the attention kernel; nothing else is */
    assert_int_equal(l->dependent, strstr(symbol, "merge_splits") != NULL);
    assert_int_equal(l->smem, talon__kernels[k].smem);
    assert_ptr_equal(l->stream, STREAM);
    assert_null(l->extra);
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    talon_decode_attention_args a = valid_decode();
    talon__decode_params want;
    int64_t group, chunks, per, splits, bytes;
    int fp8;
    double cap_l2e, scale;
    row->edit(&a);
    fp8 = a.kv_dtype == TALON_DTYPE_FP8_E4M3;
    group = a.num_qo_heads / a.num_kv_heads;
    chunks = doc_chunks(a.num_qo_heads, a.num_kv_heads, a.head_dim);
    per = (group + chunks - 1) / chunks;
    splits = a.num_splits ? a.num_splits : doc_splits(a.batch, a.num_qo_heads, a.num_kv_heads, a.head_dim, a.max_kv_len);
    assert_int_equal(talon_decode_attention_workspace_size(g_ctx, &a, &bytes), TALON_SUCCESS);
    assert_int_equal(bytes, ws_bytes(splits, a.batch * a.num_qo_heads, a.head_dim));
    assert_int_equal(talon_decode_attention(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, splits > 1 ? 2 : 1);
    check_kernel(&fake.log[0], row->symbol);
    assert_int_equal(fake.log[0].grid[0], a.batch * a.num_kv_heads * chunks);
    assert_int_equal(fake.log[0].grid[1], splits);
    assert_int_equal(fake.log[0].param_size, sizeof want);

    memset(&want, 0, sizeof want);
    want.o = a.o; want.lse = a.lse; want.q = a.q; want.k = a.k_cache; want.v = a.v_cache;
    want.page_table = a.page_table; want.kv_lens = a.kv_lens;
    if (splits > 1) {
        want.part_o = a.workspace;
        want.part_lse = a.workspace + (CUdeviceptr)(splits * a.batch * a.num_qo_heads * a.head_dim * 4);
    }
    want.page_table_stride = a.page_table_stride ? a.page_table_stride : (a.max_kv_len + a.page_size - 1) / a.page_size;
    want.rows = a.batch * a.num_qo_heads;
    want.num_kv_heads = (int)a.num_kv_heads;
    want.group = (int)group;
    want.heads_per_cta = (int)per;
    want.head_chunks = (int)chunks;
    want.page_shift = (int)log2((double)a.page_size);
    {   /* the caches' rows (head_dim elements): NHD [pages, page_size, Hk, D], HND [pages, Hk,
           page_size, D] */
        const int rowb = (int)a.head_dim * (fp8 ? 1 : 2), hnd = a.layout == TALON_KV_HND;
        want.page_rows = (int)(hnd ? a.num_kv_heads * a.page_size : a.page_size);
        want.slot_stride = hnd ? rowb : (int)a.num_kv_heads * rowb;
        want.head_stride = hnd ? (int)a.page_size * rowb : rowb;
    }
    want.max_kv_len = (int)a.max_kv_len;
    want.window = (int)a.window;
    want.splits = (int)splits;
    scale = a.sm_scale != 0 ? a.sm_scale : 1.0 / sqrt((double)a.head_dim);
    cap_l2e = a.logits_soft_cap * (1.0 / log(2.0));
    want.q_scale = (float)(scale * (fp8 ? a.k_scale : 1.0) *
                           (a.logits_soft_cap > 0 ? 1.0 / a.logits_soft_cap : 1.0 / log(2.0)));
    want.cap = (float)cap_l2e;
    want.v_scale = fp8 ? a.v_scale : 1.0f;
    {   /* the float fields may differ from the fp64 derivation by rounding only */
        talon__decode_params got;
        memcpy(&got, fake.log[0].params, sizeof got);
        assert_true(fabs(got.q_scale - want.q_scale) <= 4e-7 * fabs(want.q_scale));
        assert_true(fabs(got.cap - want.cap) <= 4e-7 * fabs(want.cap));
        want.q_scale = got.q_scale;
        want.cap = got.cap;
        assert_memory_equal(&got, &want, sizeof want);
    }
    if (splits > 1) {
        talon__merge_params m;
        char sym[64];
        snprintf(sym, sizeof sym, "talon_merge_splits_%s", a.dtype == TALON_DTYPE_F16 ? "f16" : "bf16");
        check_kernel(&fake.log[1], sym);
        assert_int_equal(fake.log[1].grid[0], (want.rows * a.head_dim / 8 * 8 + 127) / 128);
        assert_int_equal(fake.log[1].grid[1], 1);
        memset(&m, 0, sizeof m);
        m.o = a.o; m.lse = a.lse; m.v0 = want.part_o; m.s0 = want.part_lse;
        m.v_step = want.rows * a.head_dim * 4; m.s_step = want.rows * 4;
        m.rows = want.rows; m.head_dim = a.head_dim; m.n = splits;
        assert_int_equal(fake.log[1].param_size, sizeof m);
        assert_memory_equal(fake.log[1].params, &m, sizeof m);
    }
}

static void test_launch_merge(void **state) {
    talon_merge_attention_states_args a = valid_merge();
    talon__merge_params m;
    (void)state;
    a.dtype = TALON_DTYPE_F16;
    a.o_b = P_OA - 0x1000; /* below o_a: the step is negative */
    a.lse = 0;
    a.rows = 1000;
    a.head_dim = 72;
    assert_int_equal(talon_merge_attention_states(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 1);
    check_kernel(&fake.log[0], "talon_merge_states_f16");
    assert_int_equal(fake.log[0].grid[0], (1000 * 72 / 8 + 127) / 128);
    assert_int_equal(fake.log[0].grid[1], 1);
    memset(&m, 0, sizeof m);
    m.o = a.o; m.v0 = P_OA; m.s0 = P_LA; m.v_step = -0x1000; m.s_step = P_LB - P_LA;
    m.rows = 1000; m.head_dim = 72; m.n = 2;
    assert_memory_equal(fake.log[0].params, &m, sizeof m);
}

/* An exactly sized workspace passes; zero workspace is fine with one split. */
static void test_workspace_exact(void **state) {
    talon_decode_attention_args a = valid_decode();
    int64_t bytes;
    (void)state;
    a.num_splits = 4;
    assert_int_equal(talon_decode_attention_workspace_size(g_ctx, &a, &bytes), TALON_SUCCESS);
    assert_int_equal(bytes, 4 * 2 * 32 * 129 * 4);
    a.workspace_bytes = bytes;
    assert_int_equal(talon_decode_attention(g_ctx, STREAM, &a), TALON_SUCCESS);
    a.num_splits = 1;
    a.workspace = 0;
    a.workspace_bytes = 0;
    assert_int_equal(talon_decode_attention_workspace_size(g_ctx, &a, &bytes), TALON_SUCCESS);
    assert_int_equal(bytes, 0);
    assert_int_equal(talon_decode_attention(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 3);
}

static void test_capture_needs_preload(void **state) {
    talon_decode_attention_args a = valid_decode();
    (void)state;
    fake.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(talon_decode_attention(g_ctx, STREAM, &a), TALON_ERROR_NOT_LOADED);
    assert_int_equal(fake.launches, 0);
    assert_int_equal(talon_ctx_preload(g_ctx), TALON_SUCCESS);
    assert_int_equal(talon_decode_attention(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 2); /* attention + merge, both from the preloaded image */
}

/* ================================================================ references */
static void test_ref_attn(void **state) {
    /* d = 2, q = (1, 0): scores are k[t][0] * sm_scale * k_scale */
    static const float k0[2] = {0, 5}, k1[2] = {1, 7}, k2[2] = {2, 9};
    static const float v0[2] = {1, 0}, v1[2] = {0, 1}, v2[2] = {2, 2};
    const float *k[3] = {k0, k1, k2}, *v[3] = {v0, v1, v2};
    const double q[2] = {1, 0};
    double o[2], mag[2], smax, lse, z, e1, e2, cap;
    (void)state;
    /* scores 0, 1, 2 (sm_scale 0.5, k_scale 2) */
    lse = ref_attn_decode(q, k, v, 3, 2, 0.5, 0, 2.0, 3.0, o, mag, &smax);
    z = 1 + exp(1) + exp(2);
    assert_true(fabs(lse - log(z)) < 1e-14);
    assert_true(fabs(o[0] - 3.0 * (1 + 2 * exp(2)) / z) < 1e-14);
    assert_true(fabs(o[1] - 3.0 * (exp(1) + 2 * exp(2)) / z) < 1e-14);
    assert_true(fabs(mag[0] - o[0]) < 1e-14 && smax == 2.0);
    /* soft-cap 1.5: scores 1.5 tanh(s / 1.5) */
    cap = 1.5;
    lse = ref_attn_decode(q, k, v, 3, 2, 0.5, cap, 2.0, 1.0, o, NULL, NULL);
    e1 = exp(cap * tanh(1 / cap));
    e2 = exp(cap * tanh(2 / cap));
    assert_true(fabs(lse - log(1 + e1 + e2)) < 1e-14);
    assert_true(fabs(o[0] - (1 + 2 * e2) / (1 + e1 + e2)) < 1e-14);
    /* no keys */
    lse = ref_attn_decode(q, k, v, 0, 2, 1, 0, 1, 1, o, mag, NULL);
    assert_true(lse == -INFINITY && o[0] == 0 && o[1] == 0 && mag[0] == 0);
}

static void test_ref_merge(void **state) {
    const double a[2] = {1, 2}, b[2] = {3, -4};
    double o[2], lse;
    (void)state;
    lse = ref_attn_merge(a, log(1.0), b, log(3.0), 2, o);
    assert_true(fabs(lse - log(4.0)) < 1e-15);
    assert_true(fabs(o[0] - (1 + 9) / 4.0) < 1e-15 && fabs(o[1] - (2 - 12) / 4.0) < 1e-15);
    lse = ref_attn_merge(a, -INFINITY, b, 0.5, 2, o);
    assert_true(lse == 0.5 && o[0] == 3 && o[1] == -4);
    lse = ref_attn_merge(a, -INFINITY, b, -INFINITY, 2, o);
    assert_true(lse == -INFINITY && o[0] == 0 && o[1] == 0);
}

/* The plan takes the device's SM count from the context (here the fake's), not 132: the pure
   rule at three counts against the documented one, then through contexts of 132 and 114 SMs
   (an H100 PCIe) on shapes whose split count differs. */
static void test_split_rule_follows_sms(void **state) {
    static const int sms[] = {132, 114, 78};
    static const struct { int64_t b, hq, hk, max, at132, at114; } rows[] = {
        {24, 32, 8, 4096, 2, 1},   /* 192 CTAs: 1.45 per SM on 132, 1.68 on 114 */
        {75, 32, 8, 4096, 4, 3},   /* 600 CTAs: past one wave on both */
        {2, 32, 8, 8192, 17, 15},  /* 16 CTAs: raised towards 2 per SM */
        {1, 32, 8, 32768, 32, 32}, /* 8 CTAs: 1024-key chunks either way */
    };
    size_t i, j;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const int64_t ctas = rows[i].b * rows[i].hk * doc_chunks(rows[i].hq, rows[i].hk, 128);
        for (j = 0; j < sizeof sms / sizeof sms[0]; j++)
            assert_int_equal(talon__decode_splits(ctas, rows[i].max, sms[j]),
                             doc_splits_on(sms[j], rows[i].b, rows[i].hq, rows[i].hk, 128, rows[i].max));
        assert_int_equal(talon__decode_splits(ctas, rows[i].max, 132), rows[i].at132);
        assert_int_equal(talon__decode_splits(ctas, rows[i].max, 114), rows[i].at114);
    }
    for (j = 0; j < 2; j++) {
        talon_ctx *ctx;
        talon_decode_attention_args a = valid_decode();
        int64_t bytes = -1;
        fake.sms = j ? 114 : 132;
        assert_int_equal(talon_ctx_create(&ctx, NULL), TALON_SUCCESS);
        a.batch = 24; a.num_qo_heads = 32; a.num_kv_heads = 8; a.head_dim = 128; a.max_kv_len = 4096;
        assert_int_equal(talon_decode_attention_workspace_size(ctx, &a, &bytes), TALON_SUCCESS);
        assert_int_equal(bytes, ws_bytes(j ? 1 : 2, 24 * 32, 128));
        talon_ctx_destroy(ctx);
    }
}

/* ================================================================ main */
#define ADD(fn) test_add(#fn, fn, NULL)
#define ADD_ROWS(table, fn)                                                                    \
    for (i = 0; i < sizeof table / sizeof table[0]; i++) test_add(table[i].name, fn, &table[i])

int main(void) {
    size_t i;
    ADD_ROWS(bad_rows, test_invalid_argument);
    ADD(test_alignment_message);
    ADD(test_split_rule);
    ADD(test_split_rule_follows_sms);
    ADD_ROWS(launch_rows, test_launch);
    ADD(test_launch_merge);
    ADD(test_workspace_exact);
    ADD(test_capture_needs_preload);
    ADD(test_ref_attn);
    ADD(test_ref_merge);
    return test_run("test_decode");
}
