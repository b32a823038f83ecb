// Fast math for inner loops and epilogues (PTX ISA: ex2, rcp, min/max.NaN), and division by a
// launch-constant divisor.
#pragma once
#include <cstdint>

namespace talon::dev {

constexpr float kLog2e = 1.4426950408889634f; // exp(x) = exp2_ftz(x * kLog2e)

// 2^x by the SFU's approximation (max relative error about 2^-22), results below 2^-126
// flushed to zero: exp2f adds a range fix-up (a compare and two multiplies) for those, which a
// softmax weight that small never needs. ex2(-inf) = 0.
__device__ __forceinline__ float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// 1 / x by the SFU's approximation (max relative error about 2^-23), flushing subnormal inputs
// and results to zero: without ftz a compare, a select and two multiplies rescale them.
// rcp(+-inf) = +-0, rcp(+-0) = +-inf.
__device__ __forceinline__ float rcp_ftz(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// min and max that return NaN when either operand is NaN (fminf / fmaxf return the other).
__device__ __forceinline__ float min_nan(float a, float b) {
    float y;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
    return y;
}
__device__ __forceinline__ float max_nan(float a, float b) {
    float y;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
    return y;
}

// n / d without a divide, for n < 2^31: (umulhi(n, m) + n) >> l with the host's l = ceil(log2
// d) and m = floor(2^32 (2^l - d) / d) + 1 (talon__div_magic; the sum stays below 2^32).
__device__ __forceinline__ uint32_t div_magic(uint32_t n, uint32_t m, uint32_t l) { return (__umulhi(n, m) + n) >> l; }

} // namespace talon::dev
