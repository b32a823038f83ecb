// Activation functions in fp32, shared by the gated-activation ops and the GEMM epilogues
// (one definition, so a fused epilogue rounds exactly like the separate op).
// Fast exp and division (a few ulp of fp32, far below a 16-bit output's rounding).
#pragma once

namespace talon::dev {

struct Identity { __device__ static float f(float x) { return x; } };
struct Relu { __device__ static float f(float x) { return fmaxf(x, 0.f); } };
struct Silu { __device__ static float f(float x) { return __fdividef(x, 1.f + __expf(-x)); } };
struct GeluErf { __device__ static float f(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); } };
struct GeluTanh {
    __device__ static float f(float x) {
        return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    }
};

} // namespace talon::dev
