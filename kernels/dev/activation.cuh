// Activation functions in fp32, shared by the gated-activation ops and the GEMM epilogues
// (one definition, so a fused epilogue rounds exactly like the separate op).
// The SFU's exp and reciprocal (a few ulp of fp32, far below a 16-bit output's rounding),
// flushing subnormals: results below 2^-126 in magnitude become zero, which spares each call
// the range fix-up instructions (a GEMM epilogue runs these per element).
#pragma once

#include "math.cuh"

namespace talon::dev {

struct Identity { __device__ static float f(float x) { return x; } };
template <typename Act> constexpr bool is_identity = false;
template <> constexpr bool is_identity<Identity> = true;
struct Relu { __device__ static float f(float x) { return fmaxf(x, 0.f); } };
struct Silu {
    __device__ static float f(float x) { return x * rcp_ftz(1.f + exp2_ftz(-x * kLog2e)); }
};
// 0.5 x (1 + erf(x / sqrt 2)), erf branch-free by Abramowitz & Stegun 7.1.26 (|error| below
// 1.5e-7): erf(z) = 1 - q, q = t (a1 + t (a2 + .. + t a5)) e^(-z^2), t = 1 / (1 + p z), z >= 0.
// For x < 0 the result is 0.5 x q, with no cancellation in the tail.
struct GeluErf {
    __device__ static float f(float x) {
        const float z = fabsf(x) * 0.70710678118654752f;
        const float t = rcp_ftz(fmaf(0.3275911f, z, 1.f));
        const float poly = fmaf(fmaf(fmaf(fmaf(1.061405429f, t, -1.453152027f), t, 1.421413741f), t,
                                     -0.284496736f), t, 0.254829592f);
        const float q = t * poly * exp2_ftz(z * z * -kLog2e);
        return 0.5f * x * (x >= 0.f ? 2.f - q : q);
    }
};
struct GeluTanh {
    __device__ static float f(float x) {
        return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    }
};

// gpt-oss's gated activation ("SwiGLU with a limit"), for gated GEMM epilogues only: the gate
// clamped above at limit and the up into [-limit, limit], then g sigmoid(alpha g) (u + 1).
// A NaN gate or up stays NaN (min/max.NaN; fminf would return the limit).
struct ClampedSwiglu {
    float neg_alpha_log2e, limit; // sigmoid(alpha g) = 1 / (1 + 2^(g neg_alpha_log2e))
    __device__ ClampedSwiglu(float alpha, float lim)
        : neg_alpha_log2e(-alpha * kLog2e), limit(lim) {}
    __device__ float glu(float g, float u) const {
        g = min_nan(g, limit);
        u = min_nan(max_nan(u, -limit), limit);
        return g * rcp_ftz(1.f + exp2_ftz(g * neg_alpha_log2e)) * (u + 1.f);
    }
};

// A gated epilogue's value from the gate's and the up's sums: act(g) u, or the act's own rule.
template <typename Act> __device__ __forceinline__ float glu(const Act &, float g, float u) {
    return Act::f(g) * u;
}
__device__ __forceinline__ float glu(const ClampedSwiglu &act, float g, float u) {
    return act.glu(g, u);
}

} // namespace talon::dev
