// fp8 e4m3 conversions (cvt with .satfinite: out-of-range values saturate to +-448, NaN stays
// NaN; round to nearest even).
#pragma once
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "math.cuh"

namespace talon::dev {

// The two e4m3 values in the low 16 bits of w -> f16x2 (exact: cvt.rn.f16x2.e4m3x2).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t w) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffffu), __NV_E4M3);
    return uint32_t(h.x) | uint32_t(h.y) << 16;
}

// The two e4m3 values in the low 16 bits of w -> bf16x2 (exact: e4m3 -> f16 -> f32 -> bf16,
// every e4m3 value is a bf16 value).
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t w) {
    const uint32_t h = e4m3x2_to_f16x2(w);
    const float lo = __half2float(__ushort_as_half((unsigned short)(h & 0xffffu)));
    const float hi = __half2float(__ushort_as_half((unsigned short)(h >> 16)));
    return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u); // exact: no rounding
}

// fp32 -> e4m3: one value, and two into 16 bits (lo in the low byte).
__device__ __forceinline__ uint8_t e4m3_from_f32(float x) {
    return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ uint32_t e4m3x2_from_f32(float lo, float hi) {
    return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
}

// x / s from rcp = RN(1 / s), without a division: q = x rcp, then one FMA correction from the
// residual x - q s (Markstein), three instructions. The IEEE quotient wherever the residual is
// exact (no intermediate under- or overflow); the callers below bound their inputs so that it
// is, or so that the e4m3 byte cannot tell. The sign of a zero survives: for x = +-0 the
// residual is +0, and +0 (-rcp) + q = q.
__device__ __forceinline__ float quot_by_rcp(float x, float s, float rcp) {
    const float q = __fmul_rn(x, rcp);
    return __fmaf_rn(__fmaf_rn(q, s, -x), -rcp, q);
}

// The scale of values whose largest magnitude is amax, for e4m3's 448: amax / 448 (IEEE),
// never 0 or subnormal (an all-zero set gets 2^-126 and quantises to zeros), by quot_by_rcp,
// not a division: `make check-fp8-div` (part 4) finds it equal to the IEEE quotient for every
// fp32 amax, inf apart (the residual would be NaN).
__device__ __forceinline__ float e4m3_scale(float amax) {
    return amax == INFINITY ? amax : fmaxf(quot_by_rcp(amax, 448.f, 1.f / 448.f), 0x1p-126f);
}

// x / s for a scale computed from the values it divides (s = e4m3_scale(amax), |x| <= amax or x
// NaN), as the IEEE fp32 quotient gives it to e4m3, by quot_by_rcp: three instructions a value.
// The residual is exact while s >= 2^-90 (a smaller x's quotient is e4m3 +-0 either way); below
// that (amax under about 2^-81, an all-zero row among them) x and s are first multiplied by
// 2^64, one more instruction. s = inf (an inf among the values): s 1, rcp 0, so x / inf = +-0
// and inf / inf = NaN as IEEE. `make check-fp8-div` (part 3) finds the same e4m3 byte as x / s
// for every bf16 and f16 amax and value.
struct E4m3Divider {
    float s, rcp;  // the divisor (times 2^64 when prescaled; 1 for inf) and RN(1 / s) (0 for inf)
    bool prescale; // s < 2^-90: x is multiplied by 2^64 too
    __device__ __forceinline__ explicit E4m3Divider(float scale) {
        prescale = scale < 0x1p-90f;
        s = scale == INFINITY ? 1.f : prescale ? scale * 0x1p64f : scale;
        rcp = scale == INFINITY ? 0.f : __frcp_rn(s);
    }
    // f(q) with q(x) = x / s as one branch-free functor: the prescaling decided once, here, for
    // all the values f divides (a row's loop, or one store), not per value.
    template <typename F> __device__ __forceinline__ void dispatch(F &&f) const {
        if (prescale) f([this](float x) { return quot_by_rcp(x * 0x1p64f, s, rcp); });
        else f([this](float x) { return quot_by_rcp(x, s, rcp); });
    }
};

// x / s for a given scale (TALON_QUANT_TENSOR's: any x, any s), as the IEEE fp32 quotient gives
// it to e4m3. For s in [2^-60, 2^60], x is clamped to +-1024 s (NaN stays NaN: a larger |x| / s,
// inf among them, saturates to 448 either way), then quot_by_rcp: five instructions a value
// against the IEEE division's eight and its slow-path test. No overflow (|q| <= 1024), and a
// residual that is not exact (x under 2^-103) belongs to a quotient under 2^-40, e4m3 +-0
// either way. Other scales (0, negative, subnormal, inf, NaN, extreme) take __fdiv_rn. `make
// check-fp8-div` (part 5): every bf16 and f16 value over 4000 random scales of the range and
// its edges, the same e4m3 bytes.
struct E4m3GivenDivider {
    float s, rcp, lim;
    bool direct; // s in [2^-60, 2^60]
    __device__ __forceinline__ explicit E4m3GivenDivider(float scale) {
        direct = scale >= 0x1p-60f && scale <= 0x1p60f; // false for NaN
        s = scale;
        rcp = direct ? __frcp_rn(scale) : 0.f;
        lim = 1024.f * scale;
    }
    // as E4m3Divider::dispatch: the choice of quotient made once for all the values f divides
    template <typename F> __device__ __forceinline__ void dispatch(F &&f) const {
        if (direct) {
            f([this](float x) {
                return quot_by_rcp(min_nan(max_nan(x, -lim), lim), s, rcp);
            });
        } else {
            f([this](float x) { return __fdiv_rn(x, s); });
        }
    }
};

// quot(x[i]) -> e4m3 at dst: VEC bytes, one store (VEC 8: 8-byte aligned).
template <int VEC, typename Quot>
__device__ __forceinline__ void store_e4m3_quot(uint8_t *dst, const float (&x)[VEC], const Quot &quot) {
    static_assert(VEC == 1 || VEC == 8, "one value or 8");
    if constexpr (VEC == 1) {
        *dst = e4m3_from_f32(quot(x[0]));
    } else {
        uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = e4m3x2_from_f32(quot(x[2 * i]), quot(x[2 * i + 1]));
        *reinterpret_cast<uint2 *>(dst) = make_uint2(w[0] | w[1] << 16, w[2] | w[3] << 16);
    }
}
// x[i] / s -> e4m3 at dst by a divider (E4m3Divider, E4m3GivenDivider): the IEEE quotient's
// bytes, the divider's choice made per store (a loop over many stores: dispatch around it).
template <int VEC, typename Divider>
__device__ __forceinline__ void store_e4m3(uint8_t *dst, const float (&x)[VEC], const Divider &d) {
    d.dispatch([&](const auto &quot) { store_e4m3_quot(dst, x, quot); });
}

} // namespace talon::dev
