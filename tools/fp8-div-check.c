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
   3. talon_quant_fp8's and rmsnorm_quant_fp8's division by a computed scale (E4m3Divider: the
      same correction, mul and div from s's exponent on the device, the sign copied from x):
      s = e4m3_scale(amax) for every positive finite bf16 and f16 amax (and 0),
      over every 16-bit pattern x of the same type with |x| <= amax or NaN: the e4m3 byte of
      the divider's quotient equals that of x / s.
   Exit status 0 when all hold. `make check-fp8-div` builds it with -march=native (hardware
   FMA: part 1 is 8.6e9 quotients, part 3 2.1e9; ~40 s on one x86 core); not part of
   `make test`. */
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

/* fp8.cuh's e4m3_scale and E4m3Divider. */
static float e4m3_scale(float amax) { return fmaxf(amax / 448.0f, 0x1p-126f); }
static float divider_quot(float x, float s) {
    uint32_t u, e;
    float mul, div, rcp, a, y;
    memcpy(&u, &s, 4);
    e = u >> 23;
    mul = e < 255 ? from_bits((254u - e) << 23) : 0.0f;
    div = e < 255 ? from_bits((u & 0x7fffffu) | 0x3f800000u) : 1.0f;
    rcp = 1.0f / div;
    a = x * mul;
    y = a * rcp;
    return copysignf(fmaf(fmaf(-y, div, a), rcp, y), x);
}

/* Part 3 for one 16-bit type: the number of e4m3 bytes that differ. */
static long long check_divider(talon_dtype t, long long *n) {
    long long bad = 0;
    for (uint32_t ha = 0; ha < 0x7f80u; ha++) { /* amax: +0 and every positive finite pattern */
        const float amax = ref_to_f32(t, (uint16_t)ha);
        if (!isfinite(amax)) continue;
        const float s = e4m3_scale(amax);
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
    return core_bad || e2e_bad || div_bad;
}
