/* fp64 CPU references; see ref.h. */
#include "ref.h"
#include <math.h>
#include <pthread.h>
#include <string.h>

float ref_f32_table[2][65536];
static pthread_once_t ref_f32_table_once = PTHREAD_ONCE_INIT;
static void ref_f32_table_fill(void) {
    uint32_t b;
    for (b = 0; b < 65536; b++) {
        ref_f32_table[0][b] = ref_to_f32(TALON_DTYPE_BF16, (uint16_t)b);
        ref_f32_table[1][b] = ref_to_f32(TALON_DTYPE_F16, (uint16_t)b);
    }
}
void ref_f32_table_init(void) { pthread_once(&ref_f32_table_once, ref_f32_table_fill); }

double ref_rtol(talon_dtype t) { return t == TALON_DTYPE_BF16 ? 0x1p-7 : 0x1p-10; }
double ref_atol(talon_dtype t) { return t == TALON_DTYPE_BF16 ? 1e-5 : 1e-6; }

uint64_t ref_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
uint64_t ref_next64(uint64_t *state) { return ref_mix64(*state += 0x9E3779B97F4A7C15ull); }
float ref_unit01(uint64_t *state) { return (float)(ref_next64(state) >> 40) * 0x1p-24f; }

static uint32_t f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float bits_f32(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

static uint16_t bf16_from_f32(float x) {
    uint32_t u = f32_bits(x);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static uint16_t f16_from_f32(float x) {
    uint32_t u = f32_bits(x), sign = (u >> 16) & 0x8000, mant;
    int exp;
    float a = fabsf(x);
    if (isnan(x)) return (uint16_t)(sign | 0x7e00);
    if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
    if (a < 6.103515625e-05f) {                           /* subnormal: multiples of 2^-24 */
        float q = a * 16777216.0f;                        /* exact scaling */
        return (uint16_t)(sign | (uint32_t)nearbyintf(q)); /* nearbyint: ties to even */
    }
    exp = (int)((u >> 23) & 0xff) - 127 + 15;
    mant = u & 0x7fffff;
    {
        uint32_t half = mant >> 13, rest = mant & 0x1fff;
        uint32_t h = ((uint32_t)exp << 10) | half;
        if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) h++; /* carry may bump exponent */
        return (uint16_t)(sign | h);
    }
}

uint16_t ref_from_f32(talon_dtype t, float x) {
    return t == TALON_DTYPE_BF16 ? bf16_from_f32(x) : f16_from_f32(x);
}

float ref_to_f32(talon_dtype t, uint16_t b) {
    uint32_t sign = (uint32_t)(b & 0x8000) << 16, exp = (b >> 10) & 0x1f, mant = b & 0x3ff;
    if (t == TALON_DTYPE_BF16) return bits_f32((uint32_t)b << 16);
    if (exp == 0) return (sign ? -1.0f : 1.0f) * (float)mant * 5.9604644775390625e-08f;
    if (exp == 31) return bits_f32(sign | 0x7f800000 | (mant << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint8_t ref_e4m3_from_f32(float x) {
    const uint32_t u = f32_bits(x), m = u & 0x7fffff, rest = m & 0xfffff;
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    const float a = fabsf(x);
    uint32_t r;
    if (isnan(x)) return 0x7f;                      /* cvt.rn.satfinite: the canonical NaN */
    if (a > 464.0f) return (uint8_t)(sign | 0x7e);  /* 464 itself is a tie that keeps 448 */
    if (a < 0x1p-6f)                                /* subnormal: multiples of 2^-9, exact */
        return (uint8_t)(sign | (uint8_t)nearbyintf(a * 512.0f)); /* ties to even; 8 = 2^-6 */
    r = ((((u >> 23) & 0xff) - 127 + 7) << 3) | (m >> 20);
    if (rest > 0x80000 || (rest == 0x80000 && (r & 1))) r++; /* a carry bumps the exponent */
    return (uint8_t)(sign | r);
}

double ref_e4m3_to_f64(uint8_t b) {
    const int e = (b >> 3) & 15, m = b & 7;
    const double s = (b & 0x80) ? -1.0 : 1.0;
    if (e == 15 && m == 7) return NAN;
    if (e == 0) return s * m * 0x1p-9;
    return s * (1.0 + m / 8.0) * ldexp(1.0, e - 7);
}

void ref_rmsnorm(const double *in, const double *w, double *out, int64_t rows, int64_t cols,
                 double eps) {
    for (int64_t r = 0; r < rows; r++) {
        const double *x = in + r * cols;
        double ss = 0, scale;
        for (int64_t c = 0; c < cols; c++) ss += x[c] * x[c];
        scale = 1.0 / sqrt(ss / (double)cols + eps);
        for (int64_t c = 0; c < cols; c++) out[r * cols + c] = x[c] * scale * w[c];
    }
}

void ref_layernorm(const double *in, const double *w, const double *bias, double *out,
                   int64_t rows, int64_t cols, double eps) {
    for (int64_t r = 0; r < rows; r++) {
        const double *x = in + r * cols;
        double mean = 0, var = 0, scale;
        for (int64_t c = 0; c < cols; c++) mean += x[c];
        mean /= (double)cols;
        for (int64_t c = 0; c < cols; c++) var += (x[c] - mean) * (x[c] - mean);
        scale = 1.0 / sqrt(var / (double)cols + eps);
        for (int64_t c = 0; c < cols; c++)
            out[r * cols + c] = (x[c] - mean) * scale * w[c] + (bias ? bias[c] : 0.0);
    }
}

double ref_act(enum ref_act act, double x) {
    switch (act) {
    case REF_SILU: return x / (1.0 + exp(-x));
    case REF_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case REF_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    }
    return NAN;
}

void ref_gated(enum ref_act act, const double *in, double *out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            out[r * cols + c] = ref_act(act, in[r * 2 * cols + c]) * in[r * 2 * cols + cols + c];
}

/* talon_gemm_act of x (talon_gemm, talon_moe_gemm) */
double ref_gemm_act(talon_gemm_act act, double x) {
    switch (act) {
    case TALON_GEMM_ACT_NONE: return x;
    case TALON_GEMM_ACT_RELU: return x > 0.0 ? x : 0.0;
    case TALON_GEMM_ACT_SILU: return x / (1.0 + exp(-x));
    case TALON_GEMM_ACT_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case TALON_GEMM_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case TALON_GEMM_ACT_CLAMPED_SWIGLU: break; /* gated only: ref_gemm_glu */
    }
    return NAN;
}

/* A gated epilogue's value from the gate's sum g and the up's sum u: act(g) u, or
   CLAMPED_SWIGLU's rule with alpha and limit. */
double ref_gemm_glu(talon_gemm_act act, double g, double u, double alpha, double limit) {
    if (act != TALON_GEMM_ACT_CLAMPED_SWIGLU) return ref_gemm_act(act, g) * u;
    if (isnan(g) || isnan(u)) return NAN;
    g = g < limit ? g : limit;
    u = u < -limit ? -limit : u > limit ? limit : u;
    return g / (1.0 + exp(-alpha * g)) * (u + 1.0);
}
