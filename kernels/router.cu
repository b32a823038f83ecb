// router.cu - talon_moe_router_topk: router logits [tokens, experts] (f32, bf16, f16) -> the
// k best experts of each token (int32 ids) and their weights (fp32), in one kernel.
//
// Strategy: one warp per token, four tokens per 128-thread block. Each lane holds NPER experts
// of its row in registers and turns each into a 32-bit order key (larger key = better expert;
// taken or absent experts get 0). The warp then picks the k winners in k rounds: every lane
// finds its own best, two redux.sync give the best key and the lowest expert index holding it,
// the owner clears that expert, and lane r keeps round r's id and logit. At the end lanes
// 0..k-1 compute their weights and write them side by side. Softmax needs the row max (one
// redux on the keys) and the row sum (a warp reduction), both before the rounds.
//
// Reproducibility: with a correction bias the keys depend on the scores, so the scores are
// computed by a fixed sequence of correctly rounded fp32 operations: an exp of our own (no
// MUFU, no contraction) and the softmax sum accumulated in 53-bit fixed point, whose value does
// not depend on the order of addition. tests/ref_router.c performs the same operations on the
// CPU and so reproduces every id bit for bit.
//
// Variants (one line each in talon.h, TALON__KERNELS_router): element type x load path
// (VEC = 4 f32 or 8 bf16/f16 elements per 16-byte load; VEC = 1 element-wise, any layout) x
// experts per lane (NPER = 4, 8, 16 for up to 128, 256, 512 experts).
#include "common.cuh"

typedef float talon__ct_F32;

__device__ __forceinline__ float router_f32(float x) { return x; }
__device__ __forceinline__ float router_f32(__nv_bfloat16 x) { return to_f32(x); }
__device__ __forceinline__ float router_f32(__half x) { return to_f32(x); }

// exp(d): Cody-Waite reduction by ln 2, degree-7 Taylor polynomial, scaling by 2^n in two
// exact steps so only the last multiplication rounds (also into subnormals). About 2 ulp.
__device__ __forceinline__ float rexp(float d) {
    if (d != d) return d;
    d = fminf(fmaxf(d, -104.f), 89.f);
    const float n = rintf(__fmul_rn(d, 0x1.715476p+0f));
    float r = __fmaf_rn(n, -0x1.62e400p-1f, d);
    r = __fmaf_rn(n, -0x1.7f7d1cp-20f, r);
    float p = 0x1.a01a02p-13f;
    p = __fmaf_rn(p, r, 0x1.6c16c2p-10f);
    p = __fmaf_rn(p, r, 0x1.111112p-7f);
    p = __fmaf_rn(p, r, 0x1.555556p-5f);
    p = __fmaf_rn(p, r, 0x1.555556p-3f);
    p = __fmaf_rn(p, r, 0.5f);
    p = __fmaf_rn(p, r, 1.f);
    p = __fmaf_rn(p, r, 1.f);
    const int ni = (int)n, h = ni / 2;
    return __fmul_rn(__fmul_rn(p, __int_as_float((h + 127) << 23)),
                     __int_as_float((ni - h + 127) << 23));
}

__device__ __forceinline__ float rsigmoid(float x) { return __frcp_rn(__fadd_rn(1.f, rexp(-x))); }

// Monotone map of floats to unsigned keys: -0 folds into +0 (x + 0), every NaN is the largest
// key, and 0 is left free for "taken".
__device__ __forceinline__ uint32_t order_key(float x) {
    const uint32_t u = __float_as_uint(__fadd_rn(x, 0.f));
    return x != x ? ~0u : (u >> 31 ? ~u : u | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
    return k == ~0u ? __uint_as_float(0x7fffffffu) : __uint_as_float(k >> 31 ? k & 0x7fffffffu : ~k);
}

template <typename T, int VEC>
__device__ __forceinline__ void load_logits(const T *p, float *x) {
    if constexpr (VEC == 1) {
        x[0] = router_f32(__ldg(p));
    } else {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
        const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
        for (int t = 0; t < VEC; t++) x[t] = router_f32(e[t]);
    }
}

template <typename T, int VEC, int NPER>
__device__ __forceinline__ void route(const talon__router_params &p) {
    // Slot i of lane l holds expert l * VEC + off(i): vectors of VEC experts, 32 lanes apart.
    auto off = [](int i) { return i / VEC * 32 * VEC + i % VEC; };
    const int lane = threadIdx.x % 32, base = lane * VEC, E = p.experts;
    const int64_t token = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (token >= p.tokens) return;
    const T *row = reinterpret_cast<const T *>(p.logits) + token * p.logits_stride;
    const float *bias = reinterpret_cast<const float *>(p.bias);

    float x[NPER], b[NPER];
#pragma unroll
    for (int i = 0; i < NPER; i += VEC) {
        if (base + off(i) < E) {
            load_logits<T, VEC>(row + base + off(i), x + i);
        } else {
#pragma unroll
            for (int t = 0; t < VEC; t++) x[i + t] = -INFINITY;
        }
    }
#pragma unroll
    for (int i = 0; i < NPER; i++) b[i] = bias && base + off(i) < E ? __ldg(bias + base + off(i)) : 0.f;

    uint32_t key[NPER], top = 0;
#pragma unroll
    for (int i = 0; i < NPER; i++) {
        key[i] = base + off(i) < E ? order_key(x[i]) : 0u;
        top = max(top, key[i]);
    }

    // Softmax: p = exp(x - m) * (1 / S). Every term is in [0, 1] once m is finite, so 2^53
    // scales it exactly and S = sum of the truncated products fits 63 bits for 512 experts.
    const bool softmax = p.scoring == TALON_ROUTER_SOFTMAX;
    float m = 0.f, inv = 0.f;
    if (softmax) {
        m = key_value(__reduce_max_sync(~0u, top));
        if (isfinite(m)) {
            unsigned long long s = 0;
#pragma unroll
            for (int i = 0; i < NPER; i++) s += __float2ull_rz(__fmul_rn(rexp(__fsub_rn(x[i], m)), 0x1p53f));
#pragma unroll
            for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
            inv = __frcp_rn(__fmul_rn(__ull2float_rn(s), 0x1p-53f));
        } else {
            inv = __uint_as_float(0x7fffffffu);
        }
    }
    auto score = [&](float v) { return softmax ? __fmul_rn(rexp(__fsub_rn(v, m)), inv) : rsigmoid(v); };
    if (bias) {
#pragma unroll
        for (int i = 0; i < NPER; i++)
            if (key[i]) key[i] = order_key(__fadd_rn(score(x[i]), b[i]));
    }

    int my_id = 0;
    float my_x = 0.f;
    for (int r = 0; r < p.k; r++) {
        // Scanning in expert order with a strict > keeps the lowest index among equal keys.
        uint32_t bk = 0;
        int bo = 0;
        float bx = 0.f;
#pragma unroll
        for (int i = 0; i < NPER; i++)
            if (key[i] > bk) { bk = key[i]; bo = off(i); bx = x[i]; }
        const uint32_t best = __reduce_max_sync(~0u, bk);
        const int id = (int)__reduce_min_sync(~0u, bk == best ? uint32_t(base + bo) : ~0u);
        const float wx = __shfl_sync(~0u, bx, id / VEC % 32);
        if (lane == r) { my_id = id; my_x = wx; }
#pragma unroll
        for (int i = 0; i < NPER; i++)
            if (base + off(i) == id) key[i] = 0u;
    }

    float w = lane < p.k ? score(my_x) : 0.f;
    if (p.renormalize) {
        float s = w;
#pragma unroll
        for (int o = 16; o; o >>= 1) s = __fadd_rn(s, __shfl_xor_sync(~0u, s, o));
        w = __fdiv_rn(w, s);
    }
    if (lane < p.k) {
        reinterpret_cast<float *>(p.weights)[token * p.k + lane] = w;
        reinterpret_cast<int *>(p.ids)[token * p.k + lane] = my_id;
    }
}

template <typename T, int VEC> __device__ void router_e128(const talon__router_params &p) { route<T, VEC, VEC < 4 ? 4 : VEC>(p); }
template <typename T, int VEC> __device__ void router_e256(const talon__router_params &p) { route<T, VEC, 8>(p); }
template <typename T, int VEC> __device__ void router_e512(const talon__router_params &p) { route<T, VEC, 16>(p); }

#define X(sym, body, dt, vec, img, block, smem, P)                                             \
    extern "C" __global__ void __launch_bounds__(block) sym(const __grid_constant__ P p) {     \
        body<talon__ct_##dt, vec>(p);                                                          \
    }
TALON__KERNELS_router(X)
