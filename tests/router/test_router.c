/* talon_moe_router_topk on the fake driver (no GPU): one validation test per rule, the exact
   launch (kernel, grid, block, params) for each path, and the CPU reference (tests/router/ref_router.c)
   on hand-computed cases. */
#include "fake_driver.h"
#include "table_rows.h"

#include <math.h>
#include "ref.h"
#include "ref_router.h"

#define OP "talon_moe_router_topk"
#define STREAM ((CUstream)(uintptr_t)0x5157)
enum { P_W = 0x100000, P_IDS = 0x200000, P_LOGITS = 0x300000, P_BIAS = 0x400000 };

/* A valid call on the f32 16-byte path; rows edit it from here. */
static talon_moe_router_topk_args valid_args(void) {
    talon_moe_router_topk_args a;
    memset(&a, 0, sizeof a);
    a.topk_weights = P_W;
    a.topk_ids = P_IDS;
    a.logits = P_LOGITS;
    a.tokens = 64;
    a.experts = 256;
    a.k = 8;
    a.logits_dtype = TALON_DTYPE_F32;
    return a;
}

#define RSET(f, k, v) SET(talon_moe_router_topk_args, f, k, v)

_Static_assert(sizeof(talon_dtype) == sizeof(int) && sizeof(talon_router_scoring) == sizeof(int),
               "SET_INT writes an int");

/* ================================================================ validation */
#define BAD(NAME, SETS, FIELD, VALUE) \
    {.name = OP " rejects " NAME, .kind = BAD_FIELDS, .set = SETS, .field = FIELD, .value = VALUE}

static const bad_row bad_rows[] = {
    {.name = OP " rejects ctx NULL", .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = OP " rejects args NULL", .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    BAD("logits_dtype I32", ONE(RSET(logits_dtype, INT, TALON_DTYPE_I32)), "args->logits_dtype", "3"),
    BAD("logits_dtype = 7", ONE(RSET(logits_dtype, INT, 7)), "args->logits_dtype", "7"),
    BAD("scoring = 2", ONE(RSET(scoring, INT, 2)), "args->scoring", "2"),
    BAD("scoring = -1", ONE(RSET(scoring, INT, -1)), "args->scoring", "-1"),
    BAD("renormalize = 2", ONE(RSET(renormalize, INT, 2)), "args->renormalize", "2"),
    BAD("tokens = 0", ONE(RSET(tokens, I64, 0)), "args->tokens", "0"),
    BAD("tokens = -1", ONE(RSET(tokens, I64, -1)), "args->tokens", "-1"),
    BAD("tokens = 65537", ONE(RSET(tokens, I64, 65537)), "args->tokens", "65537"),
    BAD("experts = 0", ONE(RSET(experts, I64, 0)), "args->experts", "0"),
    BAD("experts = 513", ONE(RSET(experts, I64, 513)), "args->experts", "513"),
    BAD("k = 0", ONE(RSET(k, I64, 0)), "args->k", "0"),
    BAD("k = 17", ONE(RSET(k, I64, 17)), "args->k", "17"),
    BAD("k = 9 > experts = 8", ONE(RSET(k, I64, 9), RSET(experts, I64, 8)), "args->k", "9"),
    BAD("topk_weights NULL", ONE(RSET(topk_weights, PTR, 0)), "args->topk_weights", "NULL"),
    BAD("topk_weights misaligned", ONE(RSET(topk_weights, PTR, P_W + 2)), "args->topk_weights",
        "0x100002"),
    BAD("topk_ids NULL", ONE(RSET(topk_ids, PTR, 0)), "args->topk_ids", "NULL"),
    BAD("topk_ids misaligned", ONE(RSET(topk_ids, PTR, P_IDS + 2)), "args->topk_ids", "0x200002"),
    BAD("logits NULL", ONE(RSET(logits, PTR, 0)), "args->logits", "NULL"),
    BAD("f32 logits misaligned by 2", ONE(RSET(logits, PTR, P_LOGITS + 2)), "args->logits",
        "0x300002"),
    BAD("bf16 logits misaligned by 1",
        ONE(RSET(logits, PTR, P_LOGITS + 1), RSET(logits_dtype, INT, TALON_DTYPE_BF16)),
        "args->logits", "0x300001"),
    BAD("correction_bias misaligned", ONE(RSET(correction_bias, PTR, P_BIAS + 2)),
        "args->correction_bias", "0x400002"),
    BAD("logits_stride = 255 (shorter than a row)", ONE(RSET(logits_stride, I64, 255)),
        "args->logits_stride", "255"),
    BAD("logits_stride = -8", ONE(RSET(logits_stride, I64, -8)), "args->logits_stride", "-8"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_moe_router_topk_args a = valid_args();
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(talon_moe_router_topk(row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                                          row->kind == BAD_ARGS ? NULL : &a),
                    OP, row->field, row->value);
}

/* ================================================================ launches */
#define LAUNCH(NAME, SETS, SYM) {.name = NAME, .set = SETS, .symbol = SYM}
#define BF16 RSET(logits_dtype, INT, TALON_DTYPE_BF16)
#define F16 RSET(logits_dtype, INT, TALON_DTYPE_F16)

/* Softmax without a bias takes the router_softmax kernels (valid_args), anything else the
   general ones. */
static const launch_row launch_rows[] = {
    LAUNCH("f32 256 experts -> f32_v4_e256", NONE, "talon_moe_router_topk_softmax_f32_v4_e256"),
    LAUNCH("f32 128 experts -> f32_v4_e128", ONE(RSET(experts, I64, 128)),
           "talon_moe_router_topk_softmax_f32_v4_e128"),
    LAUNCH("f32 64 experts k 6 -> f32_v4_e128", ONE(RSET(experts, I64, 64), RSET(k, I64, 6)),
           "talon_moe_router_topk_softmax_f32_v4_e128"),
    LAUNCH("f32 512 experts k 16 -> f32_v4_e512", ONE(RSET(experts, I64, 512), RSET(k, I64, 16)),
           "talon_moe_router_topk_softmax_f32_v4_e512"),
    LAUNCH("f32 132 experts -> f32_v4_e256", ONE(RSET(experts, I64, 132)),
           "talon_moe_router_topk_softmax_f32_v4_e256"),
    LAUNCH("f32 130 experts (not a multiple of 4) -> f32_e256", ONE(RSET(experts, I64, 130)),
           "talon_moe_router_topk_softmax_f32_e256"),
    LAUNCH("f32 logits 8-byte aligned -> f32_e256", ONE(RSET(logits, PTR, P_LOGITS + 8)),
           "talon_moe_router_topk_softmax_f32_e256"),
    LAUNCH("f32 logits_stride 258 -> f32_e256", ONE(RSET(logits_stride, I64, 258)),
           "talon_moe_router_topk_softmax_f32_e256"),
    LAUNCH("f32 logits_stride 260 -> f32_v4_e256", ONE(RSET(logits_stride, I64, 260)),
           "talon_moe_router_topk_softmax_f32_v4_e256"),
    LAUNCH("f32 7 experts k 7 -> f32_e128", ONE(RSET(experts, I64, 7), RSET(k, I64, 7)),
           "talon_moe_router_topk_softmax_f32_e128"),
    LAUNCH("f32 257 experts -> f32_e512", ONE(RSET(experts, I64, 257)),
           "talon_moe_router_topk_softmax_f32_e512"),
    LAUNCH("bf16 256 experts -> bf16_v8_e256", ONE(BF16), "talon_moe_router_topk_softmax_bf16_v8_e256"),
    LAUNCH("bf16 128 experts -> bf16_v8_e256", ONE(BF16, RSET(experts, I64, 128)),
           "talon_moe_router_topk_softmax_bf16_v8_e256"),
    LAUNCH("bf16 512 experts -> bf16_v8_e512", ONE(BF16, RSET(experts, I64, 512)),
           "talon_moe_router_topk_softmax_bf16_v8_e512"),
    LAUNCH("bf16 300 experts (not a multiple of 8) -> bf16_e512",
           ONE(BF16, RSET(experts, I64, 300)), "talon_moe_router_topk_softmax_bf16_e512"),
    LAUNCH("bf16 100 experts -> bf16_e128", ONE(BF16, RSET(experts, I64, 100)),
           "talon_moe_router_topk_softmax_bf16_e128"),
    LAUNCH("bf16 logits 2-byte aligned -> bf16_e256", ONE(BF16, RSET(logits, PTR, P_LOGITS + 2)),
           "talon_moe_router_topk_softmax_bf16_e256"),
    LAUNCH("f16 logits_stride 264 -> f16_v8_e256", ONE(F16, RSET(logits_stride, I64, 264)),
           "talon_moe_router_topk_softmax_f16_v8_e256"),
    LAUNCH("f16 logits_stride 260 -> f16_e256", ONE(F16, RSET(logits_stride, I64, 260)),
           "talon_moe_router_topk_softmax_f16_e256"),
    LAUNCH("f16 1 expert k 1 -> f16_e128", ONE(F16, RSET(experts, I64, 1), RSET(k, I64, 1)),
           "talon_moe_router_topk_softmax_f16_e128"),
    LAUNCH("sigmoid, bias, renormalize are passed on",
           ONE(RSET(scoring, INT, TALON_ROUTER_SIGMOID), RSET(correction_bias, PTR, P_BIAS),
               RSET(renormalize, INT, 1)), "talon_moe_router_topk_f32_v4_e256"),
    LAUNCH("bias 4-byte aligned keeps the 16-byte path",
           ONE(RSET(correction_bias, PTR, P_BIAS + 4)), "talon_moe_router_topk_f32_v4_e256"),
    LAUNCH("tokens 1 -> one block", ONE(RSET(tokens, I64, 1)), "talon_moe_router_topk_softmax_f32_v4_e256"),
    LAUNCH("tokens 5 -> two blocks", ONE(RSET(tokens, I64, 5)), "talon_moe_router_topk_softmax_f32_v4_e256"),
    LAUNCH("tokens 65536 -> 16384 blocks", ONE(RSET(tokens, I64, 65536)),
           "talon_moe_router_topk_softmax_f32_v4_e256"),
    LAUNCH("sigmoid without a bias -> the general kernel",
           ONE(RSET(scoring, INT, TALON_ROUTER_SIGMOID)), "talon_moe_router_topk_f32_v4_e256"),
    LAUNCH("softmax with a bias -> the general kernel", ONE(RSET(correction_bias, PTR, P_BIAS)),
           "talon_moe_router_topk_f32_v4_e256"),
    LAUNCH("bf16 softmax with a bias -> the general kernel",
           ONE(BF16, RSET(correction_bias, PTR, P_BIAS)), "talon_moe_router_topk_bf16_v8_e256"),
};

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    const int k = kernel_index(row->symbol);
    talon_moe_router_topk_args a = valid_args();
    talon__router_params want;
    assert_true(k >= 0);
    apply_sets(&a, row->set, MAX_SETS);
    assert_int_equal(talon_moe_router_topk(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 1);
    if (fake.last.fn != fake_handle_for(row->symbol))
        fail_msg("launched %s, expected %s",
                 talon__kernels[fake.fns[FN_INDEX(fake.last.fn)].kernel].symbol, row->symbol);
    assert_int_equal(fake.load_calls[TALON__IMG_router], 1);
    /* The params follow from the public contract: stride 0 means a row of experts. */
    memset(&want, 0, sizeof want);
    want.logits = a.logits;
    want.bias = a.correction_bias;
    want.weights = a.topk_weights;
    want.ids = a.topk_ids;
    want.tokens = a.tokens;
    want.logits_stride = a.logits_stride ? a.logits_stride : a.experts;
    want.experts = (int)a.experts;
    want.k = (int)a.k;
    want.scoring = (int)a.scoring;
    want.renormalize = a.renormalize;
    assert_int_equal(fake.last.grid[0], (a.tokens + 3) / 4);
    assert_int_equal(fake.last.grid[1], 1);
    assert_int_equal(fake.last.grid[2], 1);
    assert_int_equal(fake.last.block[0], 128);
    assert_int_equal(talon__kernels[k].block, 128);
    assert_int_equal(fake.last.block[1], 1);
    assert_int_equal(fake.last.block[2], 1);
    assert_int_equal(fake.last.smem, 0);
    assert_ptr_equal(fake.last.stream, STREAM);
    assert_null(fake.last.extra);
    assert_int_equal(fake.last.param_size, sizeof want);
    assert_memory_equal(fake.last.params, &want, sizeof want);
}

/* The op loads only its own image, and inside capture after preload makes no other call. */
static void test_capture_after_preload(void **state) {
    talon_moe_router_topk_args a = valid_args();
    (void)state;
    fake.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(talon_moe_router_topk(g_ctx, STREAM, &a), TALON_ERROR_NOT_LOADED);
    assert_int_equal(fake.launches, 0);
    assert_int_equal(talon_ctx_preload(g_ctx), TALON_SUCCESS);
    fake.capturing_calls = 0;
    assert_int_equal(talon_moe_router_topk(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 1);
    assert_int_equal(fake.capturing_calls, 0);
}

/* ================================================================ reference */
#define W_TOL 1e-12
static void expect_row(const float *x, const float *bias, int experts, int k, int scoring,
                       int renorm, const int32_t *want_ids, const double *want_w) {
    int32_t ids[16];
    double w[16];
    ref_moe_router_topk(x, bias, 1, experts, k, scoring, renorm, w, ids);
    for (int j = 0; j < k; j++) {
        if (ids[j] != want_ids[j]) fail_msg("ids[%d] = %d, expected %d", j, ids[j], want_ids[j]);
        if (isnan(want_w[j]) ? !isnan(w[j]) : !(fabs(w[j] - want_w[j]) <= W_TOL))
            fail_msg("weights[%d] = %.17g, expected %.17g", j, w[j], want_w[j]);
    }
}

static void test_ref_softmax(void **state) {
    const float x[4] = {1.f, 3.f, 2.f, 0.f};
    const double s = exp(1.0) + exp(3.0) + exp(2.0) + 1.0;
    const int32_t ids[2] = {1, 2};
    const double w[2] = {exp(3.0) / s, exp(2.0) / s};
    const double wr[2] = {exp(3.0) / (exp(3.0) + exp(2.0)), exp(2.0) / (exp(3.0) + exp(2.0))};
    (void)state;
    expect_row(x, NULL, 4, 2, 0, 0, ids, w);
    expect_row(x, NULL, 4, 2, 0, 1, ids, wr);
}

/* DeepSeek-V3: the bias picks the experts, the weights stay the unbiased scores. */
static void test_ref_bias_selects_only(void **state) {
    const float x[2] = {2.f, 1.f}, bias[2] = {0.f, 1.f};
    const float xs[4] = {0.f, 0.f, 0.f, 0.f}, bs[4] = {0.f, 0.1f, -0.1f, 0.2f};
    const double p0 = 1.0 / (1.0 + exp(-1.0)), p1 = 1.0 - p0;
    const int32_t ids[2] = {1, 0}, ids_s[2] = {3, 1};
    const double w[2] = {p1, p0}, w_s[2] = {0.5, 0.5};
    (void)state;
    expect_row(x, bias, 2, 2, 0, 0, ids, w);
    expect_row(xs, bs, 4, 2, 1, 0, ids_s, w_s);
    expect_row(xs, bs, 4, 2, 1, 1, ids_s, w_s);
}

static void test_ref_ties_and_zeros(void **state) {
    const float eq[5] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    const float z[4] = {-1.f, -0.f, 0.f, -0.f};
    const int32_t ids_eq[3] = {0, 1, 2}, ids_z[3] = {1, 2, 3};
    const double w_eq[3] = {0.2, 0.2, 0.2};
    const double sz = 3.0 + exp(-1.0), w_z[3] = {1 / sz, 1 / sz, 1 / sz};
    (void)state;
    expect_row(eq, NULL, 5, 3, 0, 0, ids_eq, w_eq);
    expect_row(eq, eq, 5, 3, 0, 0, ids_eq, w_eq); /* equal biases: still ties */
    expect_row(z, NULL, 4, 3, 0, 0, ids_z, w_z);  /* -0 == +0: index order */
}

static void test_ref_non_finite(void **state) {
    const float nan_row[3] = {1.f, NAN, 3.f}, inf_row[3] = {1.f, INFINITY, -INFINITY};
    const float ninf[3] = {-INFINITY, -INFINITY, -INFINITY}, bias[3] = {0.f, 0.f, 1.f};
    const int32_t ids_nan[2] = {1, 2}, ids_inf[2] = {1, 0}, ids_lo[2] = {0, 1};
    const int32_t ids_inf_s[3] = {1, 0, 2};
    const double nan2[2] = {NAN, NAN}, zero2[2] = {0.0, 0.0};
    const double s_nan[2] = {NAN, 1.0 / (1.0 + exp(-3.0))};
    const double s_inf[3] = {1.0, 1.0 / (1.0 + exp(-1.0)), 0.0};
    (void)state;
    expect_row(nan_row, NULL, 3, 2, 0, 0, ids_nan, nan2); /* NaN first, softmax all NaN */
    expect_row(nan_row, NULL, 3, 2, 1, 0, ids_nan, s_nan);
    expect_row(nan_row, NULL, 3, 2, 1, 1, ids_nan, nan2);
    expect_row(inf_row, NULL, 3, 2, 0, 0, ids_inf, nan2); /* +inf: softmax NaN */
    expect_row(inf_row, NULL, 3, 3, 1, 0, ids_inf_s, s_inf);
    expect_row(ninf, NULL, 3, 2, 0, 0, ids_lo, nan2);     /* all -inf: NaN, ids in order */
    expect_row(ninf, bias, 3, 2, 0, 0, ids_lo, nan2);     /* NaN keys ignore the bias */
    expect_row(ninf, NULL, 3, 2, 1, 0, ids_lo, zero2);
    expect_row(ninf, NULL, 3, 2, 1, 1, ids_lo, nan2);     /* 0 / 0 */
}

/* The kernel's exp and reciprocal: within 3 and 1 ulp over the range that matters, exact at
   the ends. */
static void test_ref_exp(void **state) {
    double worst = 0.0;
    (void)state;
    for (float d = -87.f; d <= 88.f; d += 0.0137f) {
        const double want = exp((double)d), got = ref_router_exp(d);
        const double ulp = ldexp(1.0, ilogb(want) - 23);
        if (fabs(got - want) / ulp > worst) worst = fabs(got - want) / ulp;
    }
    if (worst > 3.0) fail_msg("ref_router_exp is %.2f ulp off", worst);
    assert_true(ref_router_exp(0.f) == 1.f);
    assert_true(ref_router_exp(-INFINITY) == 0.f);
    assert_true(ref_router_exp(-200.f) == 0.f);
    assert_true(isinf(ref_router_exp(89.f)) && isinf(ref_router_exp(INFINITY)));
    assert_true(isnan(ref_router_exp(NAN)));
    assert_true(ref_router_exp(-100.f) > 0.f && ref_router_exp(-100.f) < 0x1p-126f); /* subnormal */
    for (float d = 1.f; d < 0x1p126f; d *= 1.0137f) { /* the reciprocal: within 1 ulp */
        const float got = ref_router_recip(d), want = 1.f / d;
        if (fabsf(got - want) > ldexpf(1.f, ilogbf(want) - 23))
            fail_msg("ref_router_recip(%a) = %a, expected %a", (double)d, (double)got, (double)want);
    }
    assert_true(ref_router_recip(1.f) == 1.f && ref_router_recip(INFINITY) == 0.f);
    assert_true(isnan(ref_router_recip(NAN)));
    assert_true(ref_router_sigmoid(0.f) == 0.5f);
    assert_true(ref_router_sigmoid(INFINITY) == 1.f && ref_router_sigmoid(-INFINITY) == 0.f);
}

/* The softmax keys sum in fixed point: the same row in any order gives the same scores. */
static void test_ref_keys_order_free(void **state) {
    float x[64], y[64], bias[64], kx[64], ky[64];
    uint64_t s = 42;
    (void)state;
    for (int i = 0; i < 64; i++) {
        x[i] = ref_unit01(&s) * 16.f - 8.f;
        bias[i] = 0.f;
    }
    for (int i = 0; i < 64; i++) y[i] = x[63 - i];
    ref_router_keys(x, bias, 64, 0, kx);
    ref_router_keys(y, bias, 64, 0, ky);
    for (int i = 0; i < 64; i++)
        if (memcmp(&kx[i], &ky[63 - i], 4)) fail_msg("key %d depends on the order", i);
}

/* ================================================================ main */
int main(void) {
    size_t i;
#define ADD(NAME, FN, STATE) test_add(NAME, FN, (const void *)(uintptr_t)(STATE))
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        ADD(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        ADD(launch_rows[i].name, test_launch, &launch_rows[i]);
    ADD("capture after preload", test_capture_after_preload, NULL);
    ADD("ref softmax", test_ref_softmax, NULL);
    ADD("ref bias selects only", test_ref_bias_selects_only, NULL);
    ADD("ref ties and signed zeros", test_ref_ties_and_zeros, NULL);
    ADD("ref non-finite logits", test_ref_non_finite, NULL);
    ADD("ref exp", test_ref_exp, NULL);
    ADD("ref keys order-free", test_ref_keys_order_free, NULL);
    return test_run("test_router");
}
