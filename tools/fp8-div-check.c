/* fp8-div-check: the evidence for kv_append's fp8 division (kernels/kv_cache/kv_cache.cu, div_scale)
   and for the quant ops' division by a computed scale (kernels/dev/fp8.cuh, E4m3Divider).

   The kernel computes x / scale, rounded to fp32, as y = (x mul) rcp plus one FMA correction,
   with mul = 2^k, div = scale 2^k and rcp = RN(1 / div) from the host (talon__fp8_quant; here
   the independent ref_fp8_quant of tests/kv_cache/ref_kv_cache.c), and claims the result equals
   RN(x / scale) wherever it can change the e4m3 byte. This program checks, on the CPU with
   IEEE fp32 and a correctly rounded fmaf:
   1. exhaustively, the scale-invariant core: every f16 significand (bf16's are a subset) over
      every fp32 divisor significand in [1, 2): the corrected quotient equals a / s;
   2. end to end, every bf16 and f16 bit pattern over special scales (1, 3, 0.1, the smallest
      normal and subnormal, FLT_MAX, ...) and 4000 random positive finite ones (uniform over
      the bit patterns, so every exponent): the e4m3 byte equals that of x / scale.
   3. talon_quant_fp8's and rmsnorm_quant_fp8's division by a computed scale (E4m3Divider:
      x RN(1 / s) and the same correction, x and s times 2^64 first when s < 2^-90, no sign
      copy): s = e4m3_scale(amax) for every positive bf16 and f16 amax (0 and inf among them),
      over every 16-bit pattern x of the same type with |x| <= amax or NaN: the e4m3 byte of
      the divider's quotient equals that of x / s.
   4. e4m3_scale itself (amax RN(1 / 448) and one correction): for every fp32 amax from +0 to
      +inf, bit for bit max(amax / 448, 2^-126).
   5. The division by a given scale (E4m3GivenDivider, TALON_QUANT_TENSOR): for s in [2^-60,
      2^60], x clamped to +-1024 s (NaN kept), then x RN(1 / s) and the same correction: every
      bf16 and f16 pattern over special scales in that range and 4000 random ones (uniform
      over its bit patterns): the e4m3 byte equals that of x / s.
   Exit status 0 when all hold. `make check-fp8-div` builds it with -march=native (hardware
   FMA: part 1 is 8.6e9 quotients, part 3 2.1e9, part 4 2.1e9, part 5 5.3e8; ~70 s on one x86
   core); not part of `make test`. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "ref.h"          /* tests/common/ */
#include "ref_kv_cache.h" /* tests/kv_cache/ */

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* kv_cache.cu's div_scale. */
static float div_scale(float x, const float q[3]) {
    const float a = x * q[0], y = a * q[2];
    return fabsf(y) > 0x1p-20f && fabsf(y) < 0x1p20f ? fmaf(fmaf(-y, q[1], a), q[2], y) : y;
}

/* fp8.cuh's quot_by_rcp, e4m3_scale, E4m3Divider and E4m3GivenDivider (on its fast range, s in
   [2^-60, 2^60]), and the IEEE scale they stand for. */
static float quot_by_rcp(float x, float s, float rcp) {
    const float q = x * rcp;
    return fmaf(fmaf(q, s, -x), -rcp, q);
}
static float ieee_scale(float amax) { return fmaxf(amax / 448.0f, 0x1p-126f); }
static float e4m3_scale(float amax) {
    return amax == INFINITY ? amax : fmaxf(quot_by_rcp(amax, 448.0f, 1.0f / 448.0f), 0x1p-126f);
}
static float divider_quot(float x, float scale) {
    const int prescale = scale < 0x1p-90f;
    const float s = scale == INFINITY ? 1.0f : prescale ? scale * 0x1p64f : scale;
    const float rcp = scale == INFINITY ? 0.0f : 1.0f / s;
    return quot_by_rcp(prescale ? x * 0x1p64f : x, s, rcp);
}
static float given_quot(float x, float s) {
    const float lim = 1024.0f * s;
    return quot_by_rcp(isnan(x) ? x : fminf(fmaxf(x, -lim), lim), s, 1.0f / s);
}

/* Part 3 for one 16-bit type: the number of e4m3 bytes that differ. */
static long long check_divider(talon_dtype t, long long *n) {
    long long bad = 0;
    for (uint32_t ha = 0; ha <= 0x7f80u; ha++) { /* amax: +0 up to +inf (f16: 0x7c00) */
        const float amax = ref_to_f32(t, (uint16_t)ha);
        if (isnan(amax) || (t == TALON_DTYPE_F16 && ha > 0x7c00u)) continue;
        const float s = ieee_scale(amax);
        for (uint32_t h = 0; h < 65536; h++) {
            const float x = ref_to_f32(t, (uint16_t)h);
            if (fabsf(x) > amax) continue;
            const uint8_t want = ref_e4m3_from_f32(x / s), got = ref_e4m3_from_f32(divider_quot(x, s));
            if (want != got && bad++ < 5)
                printf("  x %a / scale %a (amax %a): e4m3 0x%02x, want 0x%02x\n", x, s, amax, got, want);
            (*n)++;
        }
    }
    return bad;
}

int main(void) {
    static const float specials[] = {1.0f, 3.0f, 0.1f, 1.0f / 3.0f, 7.0f, 200.0f, 1e-3f,
                                     0x1p-126f, 0x1p-149f, 1e-40f, 3.4028235e38f, 3e38f,
                                     0x1p-64f, 0x1p64f, 0x1.fffffep0f};
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    long long core_bad = 0, e2e_bad = 0, e2e_n = 0;
    for (uint32_t sx = 0; sx < 1024; sx++) {
        const float a = 1.0f + (float)sx / 1024.0f;
        for (uint32_t ss = 0; ss < (1u << 23); ss++) {
            const float s = from_bits(0x3f800000u | ss), rcp = 1.0f / s, y = a * rcp;
            core_bad += fmaf(fmaf(-y, s, a), rcp, y) != a / s;
        }
    }
    printf("core: 1024 x 2^23 quotients, %lld differ from a / s\n", core_bad);
    for (int i = 0; i < (int)(sizeof specials / sizeof specials[0]) + 4000; i++) {
        float s = i < (int)(sizeof specials / sizeof specials[0]) ? specials[i] : 0.0f, q[3];
        while (!(s > 0.0f && s <= 3.4028235e38f))
            s = from_bits((uint32_t)ref_next64(&rng) & 0x7fffffffu);
        ref_fp8_quant(s, q);
        for (uint32_t h = 0; h < 65536; h++)
            for (int f16 = 0; f16 < 2; f16++) {
                const float x = ref_to_f32(f16 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, (uint16_t)h);
                const uint8_t want = ref_e4m3_from_f32(x / s);
                const uint8_t got = ref_e4m3_from_f32(div_scale(x, q));
                if (want != got && e2e_bad++ < 5)
                    printf("  x %a / scale %a: e4m3 0x%02x, want 0x%02x\n", x, s, got, want);
                e2e_n++;
            }
    }
    printf("end to end: %lld conversions, %lld differ\n", e2e_n, e2e_bad);
    long long div_n = 0, div_bad = check_divider(TALON_DTYPE_BF16, &div_n);
    div_bad += check_divider(TALON_DTYPE_F16, &div_n);
    printf("computed scales: %lld conversions, %lld differ\n", div_n, div_bad);
    long long scale_bad = 0;
    for (uint32_t u = 0; u <= 0x7f800000u; u++) {
        const float amax = from_bits(u), want = ieee_scale(amax), got = e4m3_scale(amax);
        if (memcmp(&want, &got, 4) && scale_bad++ < 5)
            printf("  e4m3_scale(%a) = %a, want %a\n", amax, got, want);
    }
    printf("e4m3_scale: 2^31 + 1 amaxes, %lld differ\n", scale_bad);
    static const float given_specials[] = {0x1p-60f, 0x1p60f, 0x1.fffffep-61f * 2.0f, 1.0f,
                                           3.0f, 0.1f, 1.0f / 448.0f, 1e-3f, 0x1.000002p-60f,
                                           0x1.fffffep59f, 65504.0f / 448.0f};
    const int n_given_specials = (int)(sizeof given_specials / sizeof given_specials[0]);
    long long given_bad = 0, given_n = 0;
    for (int i = 0; i < n_given_specials + 4000; i++) {
        float s = i < n_given_specials ? given_specials[i] : 0.0f;
        while (!(s >= 0x1p-60f && s <= 0x1p60f))
            s = from_bits(0x21800000u + (uint32_t)(ref_next64(&rng) % (0x5d800001ull - 0x21800000ull)));
        for (uint32_t h = 0; h < 65536; h++)
            for (int f16 = 0; f16 < 2; f16++) {
                const float x = ref_to_f32(f16 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, (uint16_t)h);
                const uint8_t want = ref_e4m3_from_f32(x / s), got = ref_e4m3_from_f32(given_quot(x, s));
                if (want != got && given_bad++ < 5)
                    printf("  x %a / given scale %a: e4m3 0x%02x, want 0x%02x\n", x, s, got, want);
                given_n++;
            }
    }
    printf("given scales: %lld conversions, %lld differ\n", given_n, given_bad);
    return core_bad || e2e_bad || div_bad || scale_bad || given_bad;
}
