// router.cu - talon_moe_router_topk: router logits [tokens, experts] (f32, bf16, f16) -> the
// k best experts of each token (int32 ids) and their weights (fp32), in one kernel.
//
// Strategy: one warp per token, four tokens per 128-thread block. Each lane holds NPER experts
// of its row in registers and turns each into a 32-bit order key (larger key = better expert;
// absent experts get 0). Softmax needs the row max (one redux on the keys) and the row sum.
// Selection ranks instead of running k dependent rounds: a floor t that at least k experts
// reach (the lanes' best two keys merged over groups of lanes by shuffles, then the least of
// the groups') leaves few candidates (~k + 5 for random logits); one ballot per slot packs
// them into shared memory as 64-bit (key, ~index), and each lane ranks one by counting the
// larger ones (independent compares, no round trips); the lane holding rank r < k scores and
// writes output r. With 33 to 64 candidates (random logits: ~0.2% of tokens at E=256) each
// lane ranks two and the chosen pass through shared memory. With more (many ties) the warp
// takes k rounds instead:
// the lanes keep their best two, one redux gives the best key, a second (only when several
// lanes hold it) the lowest index, the owner stores it to won[r] and pops, rescanning its
// slots when it already popped; lane r then takes won[r]. Scores come from the key without a
// bias, else from the reloaded logit. Per-lane reductions are trees and the unbiased softmax
// sum shares its shuffle rounds with the floor: the warps wait on latency more than on issue
// slots (a 16-lanes-per-token variant, two tokens a warp, measured slower: docs/notes/router.md).
//
// Reproducibility: with a correction bias the keys depend on the scores, so these are then
// computed by a fixed sequence of correctly rounded fp32 operations: an exp and a reciprocal
// of our own (no MUFU, no contraction) and the softmax sum in 53-bit fixed point, whose value does
// not depend on the order of addition. tests/router/ref_router.c performs the same operations on the
// CPU and so reproduces every id bit for bit. Without a bias the keys are the logits.
//
// Why: k rounds of reduxes are a latency-bound chain, so ranking replaced them; the few tokens
// with more than 32 candidates made their warps the kernel's tail, hence two candidates a lane
// before falling back to rounds; fixing scoring and bias at compile time (router_softmax)
// measured faster; blocks of 2, 4 or 8 tokens cost the same. Measurements: docs/notes/router.md.
//
// Variants (one row each in include/talon/kernels/router.def): scoring (router_softmax: softmax
// without a bias; router: any scoring, optional bias) x element type x load path
// (VEC = 4 f32 or 8 bf16/f16 elements per 16-byte load; VEC = 1 element-wise, any layout) x
// experts per lane (NPER = 4, 8, 16 for up to 128, 256, 512 experts).
#include "dev/kernel.cuh"
#include "dev/keys.cuh"
#include "dev/reduce.cuh"
#include "talon/kernels/router.def"

namespace talon::router {
using namespace talon::dev;


// exp(d): Cody-Waite reduction by ln 2 (n rounded by the 1.5 * 2^23 trick, which also leaves
// n in the low mantissa bits: no conversion instructions, which issue at 1/8 rate), degree-7
// Taylor polynomial, scaling by 2^n in two exact steps so only the last product rounds (also
// into subnormals). About 2 ulp; every operation correctly rounded, none contracted.
__device__ __forceinline__ float rexp(float d) {
    if (d != d) return d;
    d = fminf(fmaxf(d, -104.f), 89.f);
    const float t = __fadd_rn(__fmul_rn(d, 0x1.715476p+0f), 0x1.8p23f);
    const float n = __fadd_rn(t, -0x1.8p23f);
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
    const int ni = __float_as_int(t) - 0x4b400000, h = ni / 2;
    return __fmul_rn(__fmul_rn(p, __int_as_float((h + 127) << 23)),
                     __int_as_float((ni - h + 127) << 23));
}

// 1 / d for d >= 1: Newton's iteration from a bit-trick estimate, fmas only (the correctly
// rounded division calls a slow-path subroutine); within 1 ulp, almost always exact.
// d > 2^126 gives 0 (the true value is subnormal).
__device__ __forceinline__ float rrcp(float d) {
    if (d != d) return d;
    if (d > 0x1p126f) return 0.f;
    float r = __int_as_float(0x7ef311c3 - __float_as_int(d));
#pragma unroll
    for (int it = 0; it < 4; it++) r = __fmaf_rn(r, __fmaf_rn(-d, r, 1.f), r);
    return r;
}

__device__ __forceinline__ float rsigmoid(float x) { return rrcp(__fadd_rn(1.f, rexp(-x))); }

// The hardware exp (MUFU, 2 ulp) for the unbiased softmax, whose keys do not depend on it.
__device__ __forceinline__ float fast_exp(float d) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__fmul_rn(d, 0x1.715476p+0f)));
    return y;
}


template <typename T, int VEC>
__device__ __forceinline__ void load_logits(const T *p, float *x) {
    if constexpr (VEC == 1) {
        x[0] = to_f32(__ldg(p));
    } else {
        const uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
        const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
        for (int t = 0; t < VEC; t++) x[t] = to_f32(e[t]);
    }
}

// A store by the lanes whose pred is set, without a branch around it.
__device__ __forceinline__ void store_if(bool pred, uint32_t addr, uint32_t lo, uint32_t hi) {
    asm volatile("{ .reg .pred p; setp.ne.u32 p, %0, 0; @p st.shared.v2.u32 [%1], {%2, %3}; }"
                 ::"r"(uint32_t(pred)), "r"(addr), "r"(lo), "r"(hi) : "memory");
}

// Reductions of a lane's slots as trees (depth log2 NPER instead of a chain of NPER).
template <int N, typename V, typename F> __device__ __forceinline__ V tree(const V *v, F f) {
    if constexpr (N == 1) {
        return v[0];
    } else {
        return f(tree<N / 2>(v, f), tree<N / 2>(v + N / 2, f));
    }
}

template <typename T, int VEC, int NPER, bool PLAIN>
__device__ __forceinline__ void route_tokens(const talon__router_params &p) {
    // Slot i of lane l holds expert l * VEC + off(i): vectors of VEC experts, 32 lanes apart,
    // so slots run in expert order within a lane. A vector is present whole or not at all.
    auto off = [](int i) { return i / VEC * 32 * VEC + i % VEC; };
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, base = lane * VEC, E = p.experts;
    auto live = [&](int i) { return base + off(i - i % VEC) < E; };
    const int64_t token = (int64_t)blockIdx.x * (blockDim.x / 32) + warp;
    if (token >= p.tokens) return;
    const T *row = reinterpret_cast<const T *>(p.logits) + token * p.logits_stride;
    const float *bias = PLAIN ? nullptr : reinterpret_cast<const float *>(p.bias);

    float x[NPER];
    uint32_t key[NPER];
#pragma unroll
    for (int i = 0; i < NPER; i += VEC) {
        if (live(i)) {
            load_logits<T, VEC>(row + base + off(i), x + i);
        } else {
#pragma unroll
            for (int t = 0; t < VEC; t++) x[i + t] = -INFINITY;
        }
    }
#pragma unroll
    for (int i = 0; i < NPER; i++) {
        key[i] = order_key(x[i]) & (live(i) ? ~0u : 0u);  // a mask, not a branch
    }
    auto umax = [](uint32_t a, uint32_t b) { return max(a, b); };

    // Softmax: p = exp(x - m) * (1 / S). With a bias the scores pick the experts, so they take
    // the exact route: rexp, and S in fixed point (every term is in [0, 1] once m is finite, so
    // 2^53 scales it exactly and the sum of the truncated products fits 63 bits for 512
    // experts, in any order). Without one, the hardware exp and an fp32 sum.
    const bool softmax = PLAIN || p.scoring == TALON__ROUTER_SOFTMAX;
    float m = 0.f, inv = 0.f, sum = 0.f;  // sum: unbiased, reduced with the floor below
    if (softmax) {
        m = order_key_value(__reduce_max_sync(~0u, tree<NPER>(key, umax)));
        if (!isfinite(m)) {
            inv = __uint_as_float(0x7fffffffu);
        } else if (bias) {
            unsigned long long q[NPER];
#pragma unroll
            for (int i = 0; i < NPER; i++) q[i] = __float2ull_rz(__fmul_rn(rexp(__fsub_rn(x[i], m)), 0x1p53f));
            unsigned long long sq = tree<NPER>(q, [](unsigned long long a, unsigned long long b) { return a + b; });
            sq = warp_allreduce(sq, [](unsigned long long a, unsigned long long b) { return a + b; });
            inv = rrcp(__fmul_rn(__ull2float_rn(sq), 0x1p-53f));
        } else {
            float e[NPER];
#pragma unroll
            for (int i = 0; i < NPER; i++) e[i] = fast_exp(x[i] - m);
            sum = tree<NPER>(e, [](float a, float b) { return a + b; });
        }
    }
    auto score = [&](float v) {
        if (!softmax) return rsigmoid(v);
        return bias ? __fmul_rn(rexp(__fsub_rn(v, m)), inv) : fast_exp(v - m) * inv;
    };
    if (bias) {
        float b[NPER];
#pragma unroll
        for (int i = 0; i < NPER; i++) b[i] = live(i) ? __ldg(bias + base + off(i)) : 0.f;
#pragma unroll
        for (int i = 0; i < NPER; i++)
            if (live(i)) key[i] = order_key(__fadd_rn(score(x[i]), b[i]));
    }

    // won[r]: round r's expert (index, key). cand: the candidates (~index, key), whose 64-bit
    // order is the ranking (larger key, then lower index).
    __shared__ uint2 won_[TALON__ROUTER_TOKENS_PER_BLOCK][16];
    __shared__ unsigned long long cand_[TALON__ROUTER_TOKENS_PER_BLOCK][64];
    uint2 *const won = won_[warp];
    const unsigned long long *const cand = cand_[warp];
    const uint32_t won_at = uint32_t(__cvta_generic_to_shared(won));
    const uint32_t cand_at = uint32_t(__cvta_generic_to_shared(cand));

    // A floor t with at least k experts at or above it: g groups of lanes (lanes equal mod g,
    // g = 2^ceil(log2 k) / 2) each hold two experts at or above their second best key, and t
    // is the least of those. Only the experts at or above t (typically ~k + 5 of them) can be
    // chosen; with at most 32, each is ranked by counting the better ones (independent steps,
    // no round trips).
    uint32_t t1, t2;
    {
        uint32_t b1[NPER / 2], b2[NPER / 2];
#pragma unroll
        for (int i = 0; i < NPER / 2; i++) {
            b1[i] = max(key[2 * i], key[2 * i + 1]);
            b2[i] = min(key[2 * i], key[2 * i + 1]);
        }
#pragma unroll
        for (int w = NPER / 4; w; w /= 2) {
#pragma unroll
            for (int i = 0; i < w; i++) {
                b2[i] = max(min(b1[i], b1[i + w]), max(b2[i], b2[i + w]));
                b1[i] = max(b1[i], b1[i + w]);
            }
        }
        t1 = b1[0];
        t2 = b2[0];
    }
    // Groups of lanes merge their (best, second) down to g groups, then the least second best
    // of the groups; the unbiased softmax sum takes the same rounds (independent shuffles).
    const int g = p.k <= 2 ? 1 : p.k <= 4 ? 2 : p.k <= 8 ? 4 : 8;
    const bool fold = softmax && !bias;
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        if (fold) sum += __shfl_xor_sync(~0u, sum, o);
        const uint32_t u2 = __shfl_xor_sync(~0u, t2, o);
        if (o >= g) {  // uniform over the warp
            const uint32_t u1 = __shfl_xor_sync(~0u, t1, o);
            t2 = max(max(t2, u2), min(t1, u1));
            t1 = max(t1, u1);
        } else {
            t2 = min(t2, u2);
        }
    }
    if (fold) inv = isfinite(m) ? __fdividef(1.f, sum) : __uint_as_float(0x7fffffffu);
    const uint32_t t = max(t2, 1u);
    const unsigned below = (1u << lane) - 1u;
    int n = 0;
#pragma unroll
    for (int i = 0; i < NPER; i++) {
        const bool c = key[i] >= t;
        const unsigned b = __ballot_sync(~0u, c);
        const int at = n + __popc(b & below);
        store_if(c && at < 64, cand_at + 8 * at, ~uint32_t(base + off(i)), key[i]);
        n += __popc(b);
    }
    // slot: where this lane's expert (my_id, my_key) goes among the token's k outputs, or -1.
    int slot = -1, my_id = 0;
    uint32_t my_key = 0;
    if (n <= 32) {
        __syncwarp();
        const unsigned long long mine = lane < n ? cand[lane] : 0ull;
        int rank = 0;
#pragma unroll 4
        for (int j = 0; j < n; j++) rank += cand[j] > mine;
        slot = lane < n && rank < p.k ? rank : -1;
        my_id = int(~uint32_t(mine));
        my_key = uint32_t(mine >> 32);
    } else if (n <= 64) {
        // Two candidates a lane (random logits land here for ~0.2% of tokens at E=256, and
        // the k rounds below made those warps the kernel's tail): the chosen go through won.
        __syncwarp();
        const unsigned long long m0 = cand[lane], m1 = lane + 32 < n ? cand[lane + 32] : 0ull;
        int r0 = 0, r1 = 0;
#pragma unroll 4
        for (int j = 0; j < n; j++) {
            const unsigned long long c = cand[j];
            r0 += c > m0;
            r1 += c > m1;
        }
        store_if(r0 < p.k, won_at + 8 * r0, ~uint32_t(m0), uint32_t(m0 >> 32));
        store_if(lane + 32 < n && r1 < p.k, won_at + 8 * r1, ~uint32_t(m1), uint32_t(m1 >> 32));
        __syncwarp();
        if (lane < p.k) {
            slot = lane;
            my_id = int(won[lane].x);
            my_key = won[lane].y;
        }
    } else {
        // Many experts near the top (ties): k rounds. Each lane keeps its best two remaining
        // experts; round r takes the best key M (one redux) and, when several lanes hold M,
        // the lowest index among them (a second); the winning lane stores it to won[r] and
        // pops its second best, or rescans its slots if it already popped since its last
        // scan (stale, a warp-uniform mask of lanes).
        uint32_t k1 = 0u, k2 = 0u;
        int i1 = -1, i2 = -1;
        auto insert = [&](uint32_t c, int xi) {
            const bool g1 = c > k1, g2 = c > k2;
            k2 = g1 ? k1 : g2 ? c : k2;
            i2 = g1 ? i1 : g2 ? xi : i2;
            k1 = g1 ? c : k1;
            i1 = g1 ? xi : i1;
        };
#pragma unroll
        for (int i = 0; i < NPER; i++) insert(key[i], base + off(i));
        unsigned stale = 0;
        for (int r = 0; r < p.k; r++) {
            const uint32_t M = __reduce_max_sync(~0u, k1);
            bool own = k1 == M;
            unsigned b = __ballot_sync(~0u, own);
            if (b & (b - 1)) {  // every lane takes part (not behind the && of own)
                const uint32_t I = __reduce_min_sync(~0u, own ? uint32_t(i1) : ~0u);
                own = own && uint32_t(i1) == I;
                b = __ballot_sync(~0u, own);
            }
            store_if(own, won_at + 8 * r, uint32_t(i1), M);
            if (b & stale) {
                if (own) {
                    const int I = i1;
                    k1 = k2 = 0u;
                    i1 = i2 = -1;
#pragma unroll
                    for (int i = 0; i < NPER; i++) {
                        const int xi = base + off(i);
                        insert(key[i] < M || (key[i] == M && xi > I) ? key[i] : 0u, xi);
                    }
                }
                stale &= ~b;
            } else {
                k1 = own ? k2 : k1;
                i1 = own ? i2 : i1;
                k2 = own ? 0u : k2;
                stale |= b;
            }
        }
        __syncwarp();
        if (lane < p.k) {
            slot = lane;
            my_id = int(won[lane].x);
            my_key = won[lane].y;
        }
    }

    // Each chosen expert is scored by its lane: without a bias from its key (the logit's), with
    // one from its logit (still in L1).
    float w = 0.f;
    if (slot >= 0) w = score(bias ? to_f32(__ldg(row + my_id)) : order_key_value(my_key));
    if (p.renormalize) {
        float s = w;
        s = warp_allreduce(s, [](float a, float b) { return __fadd_rn(a, b); });
        w = __fdividef(w, s);
    }
    if (slot >= 0) {
        reinterpret_cast<float *>(p.weights)[token * p.k + slot] = w;
        reinterpret_cast<int *>(p.ids)[token * p.k + slot] = my_id;
    }
}

// The kernel body: targs (logit type, VEC, experts per lane, softmax without a bias).
template <int DT, int VEC, int NPER, int SOFTMAX> __device__ void route(const talon__router_params &p) {
    route_tokens<elem<DT>, VEC, NPER, SOFTMAX != 0>(p);
}

} // namespace talon::router

TALON__KERNELS_router(TALON_DEV_KERNEL)
