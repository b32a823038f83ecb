/* The CPU references and bf16/f16 conversions the GPU tests trust: checked against hand-computed
   values and exhaustively over all 16-bit patterns where that is cheap. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "ref.h"

static const talon_dtype DTYPES[] = {TALON_DTYPE_BF16, TALON_DTYPE_F16};
static const char *dname(talon_dtype t) { return t == TALON_DTYPE_BF16 ? "bf16" : "f16"; }

static int is_nan_bits(talon_dtype t, uint16_t b) {
    return t == TALON_DTYPE_BF16 ? (b & 0x7fff) > 0x7f80 : (b & 0x7fff) > 0x7c00;
}

static float f32_of(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

#define ASSERT_BITS(t, x, want)                                                                \
    do {                                                                                       \
        uint16_t got_ = ref_from_f32(t, x);                                                    \
        if (got_ != (want))                                                                    \
            fail_msg("%s(%.9g) = 0x%04x, expected 0x%04x", dname(t), (double)(x), got_,        \
                     (unsigned)(want));                                                        \
    } while (0)

/* |a - b| <= tol * max(1, |b|) */
#define ASSERT_NEAR(a, b, tol)                                                                 \
    do {                                                                                       \
        double a_ = (a), b_ = (b);                                                             \
        if (!(fabs(a_ - b_) <= (tol) * fmax(1.0, fabs(b_))))                                   \
            fail_msg("%s = %.17g, expected %.17g", #a, a_, b_);                                \
    } while (0)

/* ---------------------------------------------------------------- conversions */
static void test_roundtrip_all_patterns(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++)
        for (uint32_t b = 0; b < 0x10000; b++) {
            float x = ref_to_f32(DTYPES[i], (uint16_t)b);
            if (is_nan_bits(DTYPES[i], (uint16_t)b)) {
                if (!isnan(x)) fail_msg("%s 0x%04x is NaN but converts to %g", dname(DTYPES[i]), b, (double)x);
                if (!is_nan_bits(DTYPES[i], ref_from_f32(DTYPES[i], x)))
                    fail_msg("%s NaN 0x%04x does not stay NaN", dname(DTYPES[i]), b);
            } else {
                ASSERT_BITS(DTYPES[i], x, b);
            }
        }
}

static void test_exact_values(void **state) {
    (void)state;
    ASSERT_BITS(TALON_DTYPE_BF16, 1.0f, 0x3f80);
    ASSERT_BITS(TALON_DTYPE_BF16, -2.0f, 0xc000);
    ASSERT_BITS(TALON_DTYPE_BF16, 3.140625f, 0x4049);
    ASSERT_BITS(TALON_DTYPE_F16, 1.0f, 0x3c00);
    ASSERT_BITS(TALON_DTYPE_F16, -2.0f, 0xc000);
    ASSERT_BITS(TALON_DTYPE_F16, 0.333251953125f, 0x3555);
    assert_true(ref_to_f32(TALON_DTYPE_BF16, 0x4049) == 3.140625f);
    assert_true(ref_to_f32(TALON_DTYPE_F16, 0x3555) == 0.333251953125f);
}

/* The midpoint of two neighbours (exact in fp32 for both types) goes to the even one; a hair
   either side goes to the nearer. Checked for every finite positive neighbour pair. */
static void test_ties_to_even(void **state) {
    (void)state;
    ASSERT_BITS(TALON_DTYPE_BF16, 1.0f + 0x1p-8f, 0x3f80);     /* 1 | 1+2^-7: down to even */
    ASSERT_BITS(TALON_DTYPE_BF16, 1.0f + 3 * 0x1p-8f, 0x3f82); /* 1+2^-7 | 1+2^-6: up to even */
    ASSERT_BITS(TALON_DTYPE_BF16, 1.0f + 0x1p-8f + 0x1p-20f, 0x3f81);
    ASSERT_BITS(TALON_DTYPE_F16, 1.0f + 0x1p-11f, 0x3c00);
    ASSERT_BITS(TALON_DTYPE_F16, 1.0f + 3 * 0x1p-11f, 0x3c02);
    ASSERT_BITS(TALON_DTYPE_F16, 1.0f + 0x1p-11f + 0x1p-20f, 0x3c01);
    for (int i = 0; i < 2; i++) {
        const talon_dtype t = DTYPES[i];
        const uint16_t last = t == TALON_DTYPE_BF16 ? 0x7f7f : 0x7bff; /* largest finite */
        for (uint16_t b = 0; b < last; b++) {
            float lo = ref_to_f32(t, b), hi = ref_to_f32(t, (uint16_t)(b + 1));
            float mid = (float)(((double)lo + hi) / 2);
            assert_true((double)mid == ((double)lo + hi) / 2);
            ASSERT_BITS(t, mid, b & 1 ? b + 1 : b);
            ASSERT_BITS(t, -mid, 0x8000 | (b & 1 ? b + 1 : b));
            ASSERT_BITS(t, nextafterf(mid, 0), b);
            ASSERT_BITS(t, nextafterf(mid, INFINITY), b + 1);
        }
    }
}

static void test_overflow(void **state) {
    (void)state;
    ASSERT_BITS(TALON_DTYPE_F16, 65504.0f, 0x7bff);
    ASSERT_BITS(TALON_DTYPE_F16, 65519.0f, 0x7bff);  /* below the 65504 | 65536 midpoint */
    ASSERT_BITS(TALON_DTYPE_F16, 65520.0f, 0x7c00);  /* the midpoint: ties to even, 65536 = inf */
    ASSERT_BITS(TALON_DTYPE_F16, 70000.0f, 0x7c00);
    for (float x = 65520.0f; x < 0x1p18f; x += 7.0f) ASSERT_BITS(TALON_DTYPE_F16, x, 0x7c00);
    ASSERT_BITS(TALON_DTYPE_F16, -70000.0f, 0xfc00);
    ASSERT_BITS(TALON_DTYPE_F16, 3.4028235e38f, 0x7c00);
    ASSERT_BITS(TALON_DTYPE_F16, INFINITY, 0x7c00);
    ASSERT_BITS(TALON_DTYPE_F16, -INFINITY, 0xfc00);
    assert_true(isinf(ref_to_f32(TALON_DTYPE_F16, 0x7c00)));
    assert_true(ref_to_f32(TALON_DTYPE_F16, 0x7bff) == 65504.0f);
    ASSERT_BITS(TALON_DTYPE_BF16, f32_of(0x7f7f0000), 0x7f7f); /* largest finite bf16 */
    ASSERT_BITS(TALON_DTYPE_BF16, f32_of(0x7f7f8000), 0x7f80); /* its midpoint with 2^128 */
    ASSERT_BITS(TALON_DTYPE_BF16, 3.4028235e38f, 0x7f80);
    ASSERT_BITS(TALON_DTYPE_BF16, INFINITY, 0x7f80);
    ASSERT_BITS(TALON_DTYPE_BF16, -INFINITY, 0xff80);
}

static void test_f16_subnormals(void **state) {
    (void)state;
    ASSERT_BITS(TALON_DTYPE_F16, 0x1p-24f, 0x0001);
    ASSERT_BITS(TALON_DTYPE_F16, 0x1p-25f, 0x0000);            /* 0 | 1 tie: even 0 */
    ASSERT_BITS(TALON_DTYPE_F16, 0x1p-25f + 0x1p-40f, 0x0001);
    ASSERT_BITS(TALON_DTYPE_F16, 3 * 0x1p-25f, 0x0002);        /* 1 | 2 tie: even 2 */
    ASSERT_BITS(TALON_DTYPE_F16, 5 * 0x1p-25f, 0x0002);        /* 2 | 3 tie: even 2 */
    ASSERT_BITS(TALON_DTYPE_F16, -3 * 0x1p-25f, 0x8002);
    ASSERT_BITS(TALON_DTYPE_F16, 1023 * 0x1p-24f, 0x03ff);     /* largest subnormal */
    ASSERT_BITS(TALON_DTYPE_F16, 2047 * 0x1p-25f, 0x0400);     /* its tie with 2^-14: even */
    ASSERT_BITS(TALON_DTYPE_F16, 0x1p-14f, 0x0400);            /* smallest normal */
    ASSERT_BITS(TALON_DTYPE_F16, 0x1p-30f, 0x0000);
    assert_true(ref_to_f32(TALON_DTYPE_F16, 0x0001) == 0x1p-24f);
    assert_true(ref_to_f32(TALON_DTYPE_F16, 0x03ff) == 1023 * 0x1p-24f);
    assert_true(ref_to_f32(TALON_DTYPE_F16, 0x8001) == -0x1p-24f);
    ASSERT_BITS(TALON_DTYPE_BF16, 0x1p-133f, 0x0001);          /* fp32 subnormals carry over */
}

static void test_nan(void **state) {
    const float nans[] = {NAN, -NAN, f32_of(0x7f800001) /* signalling, low payload only */,
                          f32_of(0xff800001), f32_of(0x7fc00000)};
    (void)state;
    for (int i = 0; i < 2; i++)
        for (size_t j = 0; j < sizeof nans / sizeof *nans; j++) {
            uint16_t b = ref_from_f32(DTYPES[i], nans[j]);
            uint32_t u;
            memcpy(&u, &nans[j], 4);
            if (!is_nan_bits(DTYPES[i], b)) fail_msg("%s of NaN 0x%08x gave 0x%04x", dname(DTYPES[i]), u, b);
            assert_true(isnan(ref_to_f32(DTYPES[i], b)));
        }
    assert_true(isnan(ref_to_f32(TALON_DTYPE_F16, 0x7c01)));
    assert_true(isnan(ref_to_f32(TALON_DTYPE_BF16, 0x7f81)));
}

static void test_negative_zero(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) {
        float z = ref_to_f32(DTYPES[i], 0x8000);
        ASSERT_BITS(DTYPES[i], -0.0f, 0x8000);
        ASSERT_BITS(DTYPES[i], 0.0f, 0x0000);
        assert_true(z == 0.0f && signbit(z));
        assert_true(!signbit(ref_to_f32(DTYPES[i], 0x0000)));
    }
    ASSERT_BITS(TALON_DTYPE_F16, -0x1p-30f, 0x8000); /* underflow keeps the sign */
}

/* e4m3 against hand-worked codes: ties to even (normal and subnormal), carries into the next
   binade, saturation from 448 up to infinity, NaN; then every finite code round-trips and every
   midpoint between neighbours goes to the even one. */
static void test_e4m3(void **state) {
    static const struct { float x; uint8_t bits; } rows[] = {
        {0.0f, 0x00}, {-0.0f, 0x80}, {1.0f, 0x38}, {-1.0f, 0xb8}, {240.0f, 0x77},
        {0.1f, 0x1d}, {-3.3f, 0xc5}, {1.0626f, 0x39},
        {0x1.1p0f, 0x38},   /* 1.0625: tie between 1 and 1.125: even (1) */
        {0x1.3p0f, 0x3a},   /* 1.1875: tie between 1.125 and 1.25: even (1.25) */
        {0x1.fp0f, 0x40},   /* 1.9375 rounds up into the next binade: 2.0 */
        {0x1p-6f, 0x08},    /* smallest normal */
        {0x1p-9f, 0x01},    /* smallest subnormal */
        {0x1p-10f, 0x00},   /* tie between 0 and the smallest subnormal: even (0) */
        {-0x1p-10f, 0x80},
        {0x1.8p-10f, 0x01}, /* above that tie */
        {0x1.8p-9f, 0x02},  /* 1.5 * 2^-9: tie between 1 and 2: even (2) */
        {0x1.4p-8f, 0x02},  /* 2.5 * 2^-9: tie between 2 and 3: even (2) */
        {0x1.ep-7f, 0x08},  /* 7.5 * 2^-9: tie, rounds up into the smallest normal */
        {0x1.fp-7f, 0x08}, {0x1.e8p-7f, 0x08}, {1e-30f, 0x00},
        {448.0f, 0x7e}, {-448.0f, 0xfe}, {449.0f, 0x7e}, {463.99f, 0x7e},
        {464.0f, 0x7e},     /* tie between 448 and 480, which e4m3 lacks: saturates */
        {465.0f, 0x7e}, {1000.0f, 0x7e}, {1e30f, 0x7e}, {INFINITY, 0x7e}, {-INFINITY, 0xfe},
    };
    size_t i;
    int b;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (ref_e4m3_from_f32(rows[i].x) != rows[i].bits)
            fail_msg("e4m3(%a) = 0x%02x, expected 0x%02x", (double)rows[i].x,
                     ref_e4m3_from_f32(rows[i].x), rows[i].bits);
    assert_int_equal(ref_e4m3_from_f32(NAN), 0x7f);
    assert_true(isnan(ref_e4m3_to_f64(0x7f)) && isnan(ref_e4m3_to_f64(0xff)));
    assert_true(ref_e4m3_to_f64(0x7e) == 448.0 && ref_e4m3_to_f64(0x01) == 0x1p-9);
    assert_true(ref_e4m3_to_f64(0x3a) == 1.25);
    for (b = 0; b < 256; b++) {
        const double v = ref_e4m3_to_f64((uint8_t)b);
        double next;
        if (isnan(v)) continue;
        assert_int_equal(ref_e4m3_from_f32((float)v), b);
        if ((b & 0x7f) >= 0x7e) continue;
        next = ref_e4m3_to_f64((uint8_t)(b + 1));
        assert_int_equal(ref_e4m3_from_f32((float)((v + next) / 2)), (b & 1) ? b + 1 : b);
    }
}

/* ---------------------------------------------------------------- norms */
static void test_rmsnorm_hand(void **state) {
    const double in[] = {3, 4}, w[] = {1, 2};
    double out[2];
    (void)state;
    ref_rmsnorm(in, w, out, 1, 2, 0.0); /* mean(x^2) = 12.5 */
    ASSERT_NEAR(out[0], 3 / sqrt(12.5), 1e-15);
    ASSERT_NEAR(out[1], 8 / sqrt(12.5), 1e-15);
    ref_rmsnorm(in, w, out, 1, 2, 1.5);
    ASSERT_NEAR(out[0], 3 / sqrt(14.0), 1e-15);
    ASSERT_NEAR(out[1], 8 / sqrt(14.0), 1e-15);
}

static void test_rmsnorm_rows(void **state) {
    double in[] = {3, 4, 1, 1, 0, 0, -6, 8}, w[] = {1, 2}, out[8 + 1];
    (void)state;
    out[8] = 42; /* must stay untouched */
    ref_rmsnorm(in, w, out, 4, 2, 1e-6);
    ASSERT_NEAR(out[0], 3 / sqrt(12.5 + 1e-6), 1e-15);
    ASSERT_NEAR(out[1], 8 / sqrt(12.5 + 1e-6), 1e-15);
    ASSERT_NEAR(out[2], 1 / sqrt(1 + 1e-6), 1e-15);
    ASSERT_NEAR(out[3], 2 / sqrt(1 + 1e-6), 1e-15);
    assert_true(out[4] == 0 && out[5] == 0); /* all-zero row with eps: 0, not NaN */
    ASSERT_NEAR(out[6], -6 / sqrt(50 + 1e-6), 1e-15);
    ASSERT_NEAR(out[7], 16 / sqrt(50 + 1e-6), 1e-15);
    assert_true(out[8] == 42);
    in[0] = 300; /* another row's input changes nothing in row 1 */
    ref_rmsnorm(in, w, out, 4, 2, 1e-6);
    ASSERT_NEAR(out[2], 1 / sqrt(1 + 1e-6), 1e-15);
}

static void test_layernorm_hand(void **state) {
    const double in[] = {1, 2, 3, 4, 5, 5, 5, 5}, w[] = {1, 1, 2, 2}, b[] = {0.5, 0, 0, -1};
    const double zero[4] = {0};
    double out[8], nob[8], zb[8];
    const double s = 1 / sqrt(1.25); /* row 0: mean 2.5, biased variance 1.25 */
    (void)state;
    ref_layernorm(in, w, b, out, 2, 4, 0.0);
    ASSERT_NEAR(out[0], -1.5 * s + 0.5, 1e-15);
    ASSERT_NEAR(out[1], -0.5 * s, 1e-15);
    ASSERT_NEAR(out[2], 0.5 * s * 2, 1e-15);
    ASSERT_NEAR(out[3], 1.5 * s * 2 - 1, 1e-15);
    ref_layernorm(in, w, b, out, 2, 4, 0.25);
    ASSERT_NEAR(out[0], -1.5 / sqrt(1.5) + 0.5, 1e-15);
    for (int c = 0; c < 4; c++) ASSERT_NEAR(out[4 + c], b[c], 0); /* constant row: just bias */
    ref_layernorm(in, w, NULL, nob, 2, 4, 0.25);
    ref_layernorm(in, w, zero, zb, 2, 4, 0.25);
    for (int c = 0; c < 8; c++) ASSERT_NEAR(nob[c], zb[c], 0);
    ASSERT_NEAR(nob[0], -1.5 / sqrt(1.5), 1e-15);
}

/* ---------------------------------------------------------------- activations */
static void test_act_values(void **state) {
    (void)state;
    ASSERT_NEAR(ref_act(REF_SILU, 0), 0, 0);
    ASSERT_NEAR(ref_act(REF_SILU, 1), 1 / (1 + exp(-1.0)), 1e-16);
    ASSERT_NEAR(ref_act(REF_SILU, 1), 0.7310585786300049, 1e-15);
    ASSERT_NEAR(ref_act(REF_SILU, -1), -0.2689414213699951, 1e-15);
    ASSERT_NEAR(ref_act(REF_GELU_ERF, 0), 0, 0);
    ASSERT_NEAR(ref_act(REF_GELU_ERF, 1), 0.8413447460685429, 1e-15);
    ASSERT_NEAR(ref_act(REF_GELU_ERF, -1), -0.15865525393145707, 1e-15);
    ASSERT_NEAR(ref_act(REF_GELU_TANH, 0), 0, 0);
    ASSERT_NEAR(ref_act(REF_GELU_TANH, 1), 0.8411919906082768, 1e-15);
    ASSERT_NEAR(ref_act(REF_GELU_TANH, -1), -0.15880800939172324, 1e-15);
    for (int a = REF_SILU; a <= REF_GELU_TANH; a++) {
        ASSERT_NEAR(ref_act((enum ref_act)a, -30), 0, 1e-11);  /* large negative: ~0 */
        ASSERT_NEAR(ref_act((enum ref_act)a, -1000), 0, 0);   /* and no NaN from exp overflow */
        ASSERT_NEAR(ref_act((enum ref_act)a, 30), 30, 1e-11);  /* large positive: identity */
    }
}

static void test_gated_layout(void **state) {
    /* 2 rows of [gate0 gate1 gate2 | up0 up1 up2] */
    const double in[] = {1, 0, -1, 2, 5, 3,
                         2, 1, 0.5, -1, 4, 10};
    double out[6 + 1];
    (void)state;
    for (int a = REF_SILU; a <= REF_GELU_TANH; a++) {
        out[6] = 42;
        ref_gated((enum ref_act)a, in, out, 2, 3);
        for (int r = 0; r < 2; r++)
            for (int c = 0; c < 3; c++)
                ASSERT_NEAR(out[r * 3 + c], ref_act((enum ref_act)a, in[r * 6 + c]) * in[r * 6 + 3 + c], 0);
        assert_true(out[6] == 42);
    }
    ref_gated(REF_SILU, in, out, 2, 3);
    ASSERT_NEAR(out[0], 2 * 0.7310585786300049, 1e-15);  /* silu(1) * 2 */
    ASSERT_NEAR(out[1], 0, 0);                           /* silu(0) * 5 */
    ASSERT_NEAR(out[2], 3 * -0.2689414213699951, 1e-15); /* silu(-1) * 3 */
    ASSERT_NEAR(out[4], 4 * 0.7310585786300049, 1e-15);  /* silu(1) * 4, row 1 */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_patterns),
        cmocka_unit_test(test_exact_values),
        cmocka_unit_test(test_ties_to_even),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_f16_subnormals),
        cmocka_unit_test(test_nan),
        cmocka_unit_test(test_negative_zero),
        cmocka_unit_test(test_e4m3),
        cmocka_unit_test(test_rmsnorm_hand),
        cmocka_unit_test(test_rmsnorm_rows),
        cmocka_unit_test(test_layernorm_hand),
        cmocka_unit_test(test_act_values),
        cmocka_unit_test(test_gated_layout),
    };
    return cmocka_run_group_tests_name("ref", tests, NULL, NULL);
}
