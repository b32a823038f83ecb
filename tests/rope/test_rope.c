/* Dispatcher tests on a fake CUDA driver (no GPU) for talon_rope: one validation error per rule
   (status, message naming the field and its value, nothing loaded or launched), the exact launch
   of each path (kernel, grid, block, params derived from the public contract), and self-tests
   of the fp64 references. talon_kv_append's are in tests/kv_cache/test_kv_cache.c. */
#include "fake_driver.h"
#include "table_rows.h"
#include <math.h>
#include "ref_rope.h"

typedef enum { OP_ROPE } op_id; /* the one op: table_rows.h's op column */
static const char *const op_names[] = {"talon_rope"};

enum { P_Q = 0x100000, P_K = 0x200000, P_POS = 0x300000, P_CS = 0x400000 };
#define STREAM ((CUstream)(uintptr_t)0x5157)

/* Llama-3-8B shapes, 4 tokens: Hq 32, Hk 8, D 128. */
static void valid_args(talon_rope_args *a) {
    memset(a, 0, sizeof *a);
    a->q = P_Q; a->k = P_K; a->positions = P_POS;
    a->cos_sin_cache = P_CS; a->max_pos = 8192;
    a->tokens = 4; a->num_q_heads = 32; a->num_kv_heads = 8;
    a->head_dim = 128;
}

#define R(f, k, v) SET(talon_rope_args, f, k, v)

/* ================================================================ validation, one per rule */
#define BAD(OP, NAME, SETS, FIELD, VALUE)                                                       \
    {.name = NAME, .op = OP, .kind = BAD_FIELDS, .set = SETS, .field = FIELD, .value = VALUE}

static const bad_row bad_rows[] = {
    {.name = "rope: ctx NULL", .op = OP_ROPE, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = "rope: args NULL", .op = OP_ROPE, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    BAD(OP_ROPE, "rope: dtype F32", ONE(R(dtype, ENUM, TALON_DTYPE_F32)), "args->dtype", "2"),
    BAD(OP_ROPE, "rope: dtype FP8", ONE(R(dtype, ENUM, TALON_DTYPE_FP8_E4M3)), "args->dtype", "4"),
    BAD(OP_ROPE, "rope: style 2", ONE(R(style, ENUM, 2)), "args->style", "2"),
    BAD(OP_ROPE, "rope: style -1", ONE(R(style, ENUM, -1)), "args->style", "-1"),
    BAD(OP_ROPE, "rope: positions_dtype 2", ONE(R(positions_dtype, ENUM, 2)),
        "args->positions_dtype", "2"),
    BAD(OP_ROPE, "rope: q NULL", ONE(R(q, PTR, 0)), "args->q", "NULL"),
    BAD(OP_ROPE, "rope: q odd", ONE(R(q, PTR, 0x7001)), "args->q", "0x7001"),
    BAD(OP_ROPE, "rope: k odd", ONE(R(k, PTR, 0x7001)), "args->k", "0x7001"),
    BAD(OP_ROPE, "rope: positions NULL", ONE(R(positions, PTR, 0)), "args->positions", "NULL"),
    BAD(OP_ROPE, "rope: int32 positions not 4-byte aligned", ONE(R(positions, PTR, 0x7002)),
        "args->positions", "0x7002"),
    BAD(OP_ROPE, "rope: int64 positions not 8-byte aligned",
        ONE(R(positions, PTR, 0x7004), R(positions_dtype, ENUM, TALON_INDEX_I64)),
        "args->positions", "0x7004"),
    BAD(OP_ROPE, "rope: cos_sin_cache not 4-byte aligned", ONE(R(cos_sin_cache, PTR, 0x7002)),
        "args->cos_sin_cache", "0x7002"),
    BAD(OP_ROPE, "rope: tokens 0", ONE(R(tokens, I64, 0)), "args->tokens", "0"),
    BAD(OP_ROPE, "rope: tokens 2^31", ONE(R(tokens, I64, 2147483648.0)), "args->tokens",
        "2147483648"),
    BAD(OP_ROPE, "rope: num_q_heads 0", ONE(R(num_q_heads, I64, 0)), "args->num_q_heads", "0"),
    BAD(OP_ROPE, "rope: num_kv_heads 0 with k", ONE(R(num_kv_heads, I64, 0)),
        "args->num_kv_heads", "0"),
    BAD(OP_ROPE, "rope: num_kv_heads 8 without k", ONE(R(k, PTR, 0)), "args->num_kv_heads", "8"),
    BAD(OP_ROPE, "rope: head_dim 0", ONE(R(head_dim, I64, 0)), "args->head_dim", "0"),
    BAD(OP_ROPE, "rope: head_dim 1025", ONE(R(head_dim, I64, 1025)), "args->head_dim", "1025"),
    BAD(OP_ROPE, "rope: rot_dim odd", ONE(R(rot_dim, I64, 63)), "args->rot_dim", "63"),
    BAD(OP_ROPE, "rope: rot_dim > head_dim", ONE(R(rot_dim, I64, 130)), "args->rot_dim", "130"),
    BAD(OP_ROPE, "rope: rot_dim negative", ONE(R(rot_dim, I64, -2)), "args->rot_dim", "-2"),
    BAD(OP_ROPE, "rope: head_dim 1 (rot_dim 0 = 1 is odd)", ONE(R(head_dim, I64, 1)),
        "args->rot_dim", "0"),
    BAD(OP_ROPE, "rope: q_stride shorter than Hq * D", ONE(R(q_stride, I64, 4095)),
        "args->q_stride", "4095"),
    BAD(OP_ROPE, "rope: k_stride shorter than Hk * D", ONE(R(k_stride, I64, 1000)),
        "args->k_stride", "1000"),
    BAD(OP_ROPE, "rope: max_pos 0 with a cache", ONE(R(max_pos, I64, 0)), "args->max_pos", "0"),
    BAD(OP_ROPE, "rope: theta negative", ONE(R(cos_sin_cache, PTR, 0), R(theta, F32, -2)),
        "args->theta", "-2"),
    BAD(OP_ROPE, "rope: theta NaN", ONE(R(cos_sin_cache, PTR, 0), R(theta, F32, NAN)),
        "args->theta", "nan"),
    BAD(OP_ROPE, "rope: theta inf", ONE(R(cos_sin_cache, PTR, 0), R(theta, F32, INFINITY)),
        "args->theta", "inf"),
    BAD(OP_ROPE, "rope: more than 2^31 - 1 threads",
        ONE(R(tokens, I64, 2147483647), R(num_q_heads, I64, 64)), "args->tokens", "2147483647"),

};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_rope_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(talon_rope(row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                               row->kind == BAD_ARGS ? NULL : &a),
                    op_names[row->op], row->field, row->value);
}

/* ================================================================ launches */
#define LAUNCH(OP, NAME, SETS, SYM) {.name = NAME, .op = OP, .set = SETS, .symbol = SYM}

static const launch_row launch_rows[] = {
    LAUNCH(OP_ROPE, "rope bf16 NeoX Llama shapes, cache -> neox1 v8 (one head per thread)", NONE,
           "talon_rope_neox1_bf16_v8"),
    LAUNCH(OP_ROPE, "rope f16 NeoX, cache -> neox1 f16 v8", ONE(R(dtype, ENUM, TALON_DTYPE_F16)),
           "talon_rope_neox1_f16_v8"),
    LAUNCH(OP_ROPE, "rope f16 GPT-J -> gptj v8",
           ONE(R(dtype, ENUM, TALON_DTYPE_F16), R(style, ENUM, TALON_ROPE_GPTJ)),
           "talon_rope_gptj_f16_v8"),
    LAUNCH(OP_ROPE, "rope NeoX rot_dim 120 (half not a multiple of 8) -> element-wise",
           ONE(R(rot_dim, I64, 120)), "talon_rope_neox_bf16"),
    LAUNCH(OP_ROPE, "rope GPT-J rot_dim 120 -> gptj v8",
           ONE(R(rot_dim, I64, 120), R(style, ENUM, TALON_ROPE_GPTJ)), "talon_rope_gptj_bf16_v8"),
    LAUNCH(OP_ROPE, "rope GPT-J rot_dim 36 -> element-wise",
           ONE(R(rot_dim, I64, 36), R(style, ENUM, TALON_ROPE_GPTJ)), "talon_rope_gptj_bf16"),
    LAUNCH(OP_ROPE, "rope D 80 rot_dim 64 (partial) -> neox1 v8",
           ONE(R(head_dim, I64, 80), R(rot_dim, I64, 64)), "talon_rope_neox1_bf16_v8"),
    LAUNCH(OP_ROPE, "rope D 72 rot_dim 64, theta -> neox v8", ONE(R(head_dim, I64, 72),
           R(rot_dim, I64, 64), R(cos_sin_cache, PTR, 0)), "talon_rope_neox_bf16_v8"),
    LAUNCH(OP_ROPE, "rope D 68 rot_dim 64 -> element-wise", ONE(R(head_dim, I64, 68),
           R(rot_dim, I64, 64)), "talon_rope_neox_bf16"),
    LAUNCH(OP_ROPE, "rope q misaligned by 2 -> element-wise", ONE(R(q, PTR, P_Q + 2)),
           "talon_rope_neox_bf16"),
    LAUNCH(OP_ROPE, "rope k misaligned by 8 -> element-wise", ONE(R(k, PTR, P_K + 8)),
           "talon_rope_neox_bf16"),
    LAUNCH(OP_ROPE, "rope cache 8-byte aligned -> element-wise",
           ONE(R(cos_sin_cache, PTR, P_CS + 8)), "talon_rope_neox_bf16"),
    LAUNCH(OP_ROPE, "rope fused qkv strides 6144 -> v8",
           ONE(R(q_stride, I64, 6144), R(k_stride, I64, 6144), R(k, PTR, P_Q + 8192)),
           "talon_rope_neox1_bf16_v8"),
    LAUNCH(OP_ROPE, "rope q_stride 6146 -> element-wise", ONE(R(q_stride, I64, 6146)),
           "talon_rope_neox_bf16"),
    LAUNCH(OP_ROPE, "rope q only (k NULL, Hk 0)", ONE(R(k, PTR, 0), R(num_kv_heads, I64, 0)),
           "talon_rope_neox1_bf16_v8"),
    LAUNCH(OP_ROPE, "rope q only, 7 heads, theta -> neox v8 (4 groups)", ONE(R(k, PTR, 0),
           R(num_kv_heads, I64, 0), R(num_q_heads, I64, 7), R(cos_sin_cache, PTR, 0)),
           "talon_rope_neox_bf16_v8"),
    LAUNCH(OP_ROPE, "rope theta mode, theta 0 -> 10000", ONE(R(cos_sin_cache, PTR, 0)),
           "talon_rope_neox_bf16_v8"),
    LAUNCH(OP_ROPE, "rope theta 500000, int64 positions, GPT-J",
           ONE(R(cos_sin_cache, PTR, 0), R(theta, F32, 500000), R(positions_dtype, ENUM, 1),
               R(style, ENUM, 1)), "talon_rope_gptj_bf16_v8"),
    LAUNCH(OP_ROPE, "rope 1 token, 1+1 heads, D 2", ONE(R(tokens, I64, 1),
           R(num_q_heads, I64, 1), R(num_kv_heads, I64, 1), R(head_dim, I64, 2)),
           "talon_rope_neox_bf16"),
};

/* Threads per block: 128 for the one-head NeoX kernels, else 256. */
static int64_t rope_block(const char *symbol) { return strstr(symbol, "neox1") ? 128 : 256; }

/* The params the op must pass, from the public contract; returns the grid size. */
static int64_t expected_launch(const talon_rope_args *r, const char *symbol, void *params) {
    const int v8 = strstr(symbol, "_v8") != NULL;
    talon__rope_params *p = (talon__rope_params *)params;
    memset(params, 0, 256);
    const int64_t vp = !v8 ? 1 : r->style == TALON_ROPE_GPTJ ? 4 : 8;
    const int64_t rot = r->rot_dim ? r->rot_dim : r->head_dim;
    const int64_t heads = r->num_q_heads + r->num_kv_heads;
    p->q = r->q; p->k = r->k; p->positions = r->positions; p->cos_sin = r->cos_sin_cache;
    p->q_stride = r->q_stride ? r->q_stride : r->num_q_heads * r->head_dim;
    p->k_stride = r->k_stride ? r->k_stride : r->num_kv_heads * r->head_dim;
    p->max_pos = r->max_pos;
    p->theta = r->theta ? r->theta : 10000.0;
    p->num_q_heads = (int32_t)r->num_q_heads; p->heads = (int32_t)heads;
    p->head_dim = (int32_t)r->head_dim; p->rot_dim = (int32_t)rot;
    p->vecs = (uint32_t)(rot / 2 / vp);
    const int64_t g = strstr(symbol, "neox1") ? 1 : TALON__ROPE_HEADS; /* heads per thread */
    p->per_token = (uint32_t)((heads + g - 1) / g * p->vecs);
    p->threads = (uint32_t)(p->per_token * r->tokens);
    p->pos64 = r->positions_dtype == TALON_INDEX_I64;
    return (p->threads + rope_block(symbol) - 1) / rope_block(symbol);
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    unsigned char want[256];
    int64_t grid;
    talon_rope_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_int_equal(talon_rope(g_ctx, STREAM, &a), TALON_SUCCESS);
    /* rope and kv_append are families of their own: only the op's image loads */
    assert_int_equal(fake.load_calls[TALON__IMG_rope], 1);
    assert_int_equal(fake.load_calls[TALON__IMG_kv_cache], 0);
    grid = expected_launch(&a, row->symbol, want);
    assert_single_launch(row->symbol, grid, STREAM, want, sizeof(talon__rope_params));
    assert_int_equal(fake.last.block[0], rope_block(row->symbol));
    assert_int_equal(fake.last.smem, 0);
}

/* ================================================================ references */
static void test_ref_rope_head(void **state) {
    /* pair 0 at pi/2, pair 1 at pi: cos 0, -1; sin 1, 0 */
    const double cs[4] = {0, -1, 1, 0};
    double neox[6] = {1, 2, 3, 4, 5, 6}, gptj[6] = {1, 2, 3, 4, 5, 6};
    const double want_neox[6] = {-3, -2, 1, -4, 5, 6}, want_gptj[6] = {-2, 1, -3, -4, 5, 6};
    (void)state;
    ref_rope_head(neox, 4, 0, cs); /* D = 6: elements 4, 5 untouched */
    ref_rope_head(gptj, 4, 1, cs);
    for (int i = 0; i < 6; i++) {
        assert_true(neox[i] == want_neox[i]);
        assert_true(gptj[i] == want_gptj[i]);
    }
}

static void test_ref_theta_row(void **state) {
    double cs[4];
    (void)state;
    ref_rope_theta_row(cs, 0, 10000, 4);
    assert_true(cs[0] == 1 && cs[1] == 1 && cs[2] == 0 && cs[3] == 0);
    ref_rope_theta_row(cs, 3, 100, 4); /* inv_freq 1, 100^-0.5 = 0.1 */
    assert_true(fabs(cs[0] - cos(3.0)) < 1e-15 && fabs(cs[2] - sin(3.0)) < 1e-15);
    assert_true(fabs(cs[1] - cos(0.3)) < 1e-15 && fabs(cs[3] - sin(0.3)) < 1e-15);
}

/* ================================================================ main */
int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        test_add(launch_rows[i].name, test_launch, &launch_rows[i]);
    test_add("ref_rope_head (NeoX, GPT-J, partial)", test_ref_rope_head, NULL);
    test_add("ref_rope_theta_row", test_ref_theta_row, NULL);
    return test_run("test_rope");
}
