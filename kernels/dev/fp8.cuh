// fp8 e4m3 conversions (cvt with .satfinite: out-of-range values saturate to +-448, NaN stays
// NaN; round to nearest even).
#pragma once
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

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

// The scale of values whose largest magnitude is amax, for e4m3's 448: amax / 448 (IEEE),
// never 0 or subnormal (an all-zero set gets 2^-126 and quantises to zeros).
__device__ __forceinline__ float e4m3_scale(float amax) { return fmaxf(__fdiv_rn(amax, 448.f), 0x1p-126f); }

// x[i] / s (the IEEE fp32 quotient) -> e4m3 at dst: VEC bytes, one store (VEC 8: 8-byte aligned).
template <int VEC> __device__ __forceinline__ void store_e4m3(uint8_t *dst, const float (&x)[VEC], float s) {
    static_assert(VEC == 1 || VEC == 8, "one value or 8");
    if constexpr (VEC == 1) {
        *dst = e4m3_from_f32(__fdiv_rn(x[0], s));
    } else {
        uint32_t w[4];
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = e4m3x2_from_f32(__fdiv_rn(x[2 * i], s), __fdiv_rn(x[2 * i + 1], s));
        *reinterpret_cast<uint2 *>(dst) = make_uint2(w[0] | w[1] << 16, w[2] | w[3] << 16);
    }
}

} // namespace talon::dev
