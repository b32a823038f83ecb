// norm.cu - rmsnorm, fused_add_rmsnorm, layernorm (bf16/f16 in and out, fp32 math), and the
// two rms norms straight to fp8 e4m3 (talon_rmsnorm_quant_fp8).
//
// Strategy: one block per row. Each thread keeps up to CACHE elements of the row on chip
// (shared memory, up to 16 KB per block), so rows up to CACHE * block elements are read from
// memory once; the tail of a longer row is re-read (mostly from L2) when the output is
// written. A thread issues all its loads, weights included, before any
// arithmetic, so one memory round trip covers them. Each row needs one block reduction: the
// sum of squares, or for layernorm each thread's (count, mean, M2), from one pass over its own
// values shifted by the first of them, merged with Chan's parallel formula: no cancellation
// from a large mean, and no second block reduction. fused_add_rmsnorm
// rounds the new residual to the element type and normalises that rounded value.
//
// fp8 out: the normalised values are rounded to the element type (what rmsnorm stores), then
// divided by the scale and rounded to e4m3: a given per-tensor scale, or per row the block's
// largest |value| / 448, from a second pass over the staged row (and the tail, read again).
//
// Variants (one row each in include/talon/kernels/norm.def): element type x VEC, where VEC = 8
// is the 16-byte path (aligned pointers, cols and strides multiples of 8) and VEC = 1 takes
// any shape; the 16-byte path also comes with 128 threads (_b128) for rows of up to 4096.
#include <type_traits>
#include "dev/async.cuh"
#include "dev/fp8.cuh"
#include "dev/kernel.cuh"
#include "dev/reduce.cuh"
#include "talon/kernels/norm.def"

namespace talon::norm {
using namespace talon::dev;

// Elements per thread kept on chip: 32 on the 16-byte path (rows up to 8192 read once),
// 12 on the element-wise path, where each element takes a register of its own (16 made
// ptxas spill; 8 for fp8 out, whose scale pass needs more registers).
template <int VEC, int Q> constexpr int CACHE = VEC == 8 ? TALON__NORM_CACHE : Q >= 0 ? 8 : 12;

enum Mode { RMS, ADD_RMS, LAYER };

// Count, mean and sum of squared deviations of a set of values.
struct Stats {
    float n, mean, m2;
};

__device__ __forceinline__ float combine(float a, float b) { return a + b; }
__device__ __forceinline__ Stats combine(Stats a, Stats b) {
    // Fast division here and below: IEEE division (a subroutine with a slow path) in the
    // reduction every row waits on cost layernorm 10% of its bandwidth; the operands are
    // counts and sums far from the range where the fast form loses accuracy.
    const float n = a.n + b.n, d = b.mean - a.mean, f = n > 0.f ? __fdividef(b.n, n) : 0.f;
    return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}

// Whole-block reduction; every thread gets the result. Called once per kernel.
template <typename R> __device__ __forceinline__ R block_reduce(R v) {
    return block_allreduce(v, [](R a, R b) { return combine(a, b); });
}

// Q: the output, -1 the element type; fp8 e4m3 with 0 a per-tensor scale, 1 per-row scales.
// W: the body's TALON__NORM_STAGED_* (norm.def): whether the 16-byte path stages the weights.
template <typename T, int VEC, int BLOCK, Mode M, int W, int Q = -1>
__device__ __forceinline__ void norm_row(const talon__norm_params &p) {
    using V = vec_t<T, VEC>;
    using TO = std::conditional_t<(Q >= 0), uint8_t, T>;
    using R = std::conditional_t<M == LAYER, Stats, float>;
    constexpr int NV = CACHE<VEC, Q> / VEC, NR = M == ADD_RMS ? NV : 1;
    // The block size is a compile-time constant so the cached vectors of a thread sit at
    // immediate offsets from one address per array.
    constexpr int step = BLOCK;
    const int64_t row = blockIdx.x, nvec = p.cols / VEC;
    const T *in = reinterpret_cast<const T *>(p.in) + row * p.in_stride;
    T *res = reinterpret_cast<T *>(p.residual) + row * p.residual_stride;
    TO *out = reinterpret_cast<TO *>(p.out) + row * p.out_stride;
    const T *w = reinterpret_cast<const T *>(p.weight);
    const T *b = reinterpret_cast<const T *>(p.bias);
    const T *src = M == ADD_RMS ? res : in; // where the value to normalise lives after pass 1
    auto live = [&](int k) { return threadIdx.x + k * step < nvec; };
    auto at = [&](int64_t i) { return i * VEC; }; // element offset of vector i
    auto vi = [&](int k) { return threadIdx.x + k * step; };

    // The cached row waits out the reduction in shared memory (stage), not registers: held in
    // registers (the compiler keeps them unpacked to fp32) it capped occupancy at 2-3 blocks
    // per SM. Each thread reads back only its own vectors. Where it measured faster (W) the
    // weights go to shared memory too, by cp.async, so no register holds them across the
    // reduction; those two stages are the dynamic shared memory of norm.def's rows.
    constexpr bool STAGED = VEC == 8 && W;
    using Stage = V[BLOCK];
    Stage *stage, *wstage = nullptr;
    if constexpr (STAGED) {
        extern __shared__ uint4 dyn[];
        stage = reinterpret_cast<Stage *>(dyn);
        wstage = stage + NV;
    } else {
        __shared__ V xs[NV][BLOCK];
        stage = xs;
    }

    // Every load of the cached part first, weights included: one round trip, and no store in
    // between for the compiler to fear aliasing with.
    V x[NV], r[NR], wv[STAGED ? 1 : NV];
#pragma unroll
    for (int k = 0; k < NV; k++)
        if (live(k)) {
            if constexpr (STAGED)
                cp_async_16((uint32_t)__cvta_generic_to_shared(&wstage[k][threadIdx.x]),
                            w + at(vi(k)));
            x[k] = load_vec<T, VEC>(in + at(vi(k)));
            if (M == ADD_RMS) r[k % NR] = load_vec<T, VEC>(res + at(vi(k)));
            if constexpr (!STAGED) wv[k] = load_ro<T, VEC>(w + at(vi(k)));
        }
    if constexpr (STAGED) cp_async_commit();
    auto weight = [&](int k) -> V {
        if constexpr (STAGED) return wstage[k][threadIdx.x];
        else return wv[k];
    };

    // fused_add_rmsnorm: residual = round(residual + in), stored; x becomes the rounded sum.
    auto add_residual = [&](int64_t e, V &xv, const V &rv) {
        float a[VEC], c[VEC];
        to_f32(xv, a);
        to_f32(rv, c);
#pragma unroll
        for (int j = 0; j < VEC; j++) a[j] += c[j];
        xv = to_vec<T, VEC>(a);
        store_vec(res + e, xv);
    };
#pragma unroll
    for (int k = 0; k < NV; k++)
        if (M == ADD_RMS && live(k)) add_residual(at(vi(k)), x[k], r[k % NR]);
    for (int64_t i = vi(NV); M == ADD_RMS && i < nvec; i += step) {
        V v = load_vec<T, VEC>(in + at(i));
        add_residual(at(i), v, load_vec<T, VEC>(res + at(i)));
    }

    // Sums of g(x) over this thread's elements: the cached vectors, then the tail (re-read).
    auto thread_sum = [&](auto g) {
        float2 s = {0.f, 0.f};
        float a[VEC];
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (live(k)) {
                to_f32(x[k], a);
#pragma unroll
                for (int j = 0; j < VEC; j++) s = g(s, a[j]);
            }
        for (int64_t i = vi(NV); i < nvec; i += step) {
            to_f32(load_vec<T, VEC>(src + at(i)), a);
#pragma unroll
            for (int j = 0; j < VEC; j++) s = g(s, a[j]);
        }
        return s;
    };
    R acc;
    if constexpr (M == LAYER) {
        // One pass over the thread's own values, shifted by the first of them (close to the
        // mean, so no cancellation to speak of), then one merge across the block.
        const int64_t mine = threadIdx.x < nvec ? (nvec - 1 - threadIdx.x) / step + 1 : 0;
        const float n = float(mine * VEC), shift = mine ? to_f32(x[0].v[0]) : 0.f;
        const float2 s = thread_sum([shift](float2 s, float a) {
            return make_float2(s.x + (a - shift), s.y + (a - shift) * (a - shift));
        });
        const float mean_d = n > 0.f ? __fdividef(s.x, n) : 0.f;
        acc = {n, shift + mean_d, fmaxf(s.y - s.x * mean_d, 0.f)};
    } else {
        acc = thread_sum([](float2 s, float a) { return make_float2(s.x + a * a, 0.f); }).x;
    }

#pragma unroll
    for (int k = 0; k < NV; k++)
        if (live(k)) stage[k][threadIdx.x] = x[k];
    // The bias is fetched now, with the row already staged, so its latency hides behind the
    // reduction without holding registers next to the row's.
    constexpr int NB = M == LAYER ? NV : 1;
    V bv[NB];
    if (M == LAYER && b)
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (live(k)) bv[k % NB] = load_ro<T, VEC>(b + at(vi(k)));
    if constexpr (STAGED) cp_async_wait<0>(); // each thread reads only its own copies
    acc = block_reduce(acc);

    float mean = 0.f, scale;
    if constexpr (M == LAYER) {
        mean = acc.mean;
        scale = rsqrtf(__fdividef(acc.m2, float(p.cols)) + p.eps);
    } else {
        scale = rsqrtf(__fdividef(acc, float(p.cols)) + p.eps);
    }

    auto normed = [&](const V &xv, const V &wr, const V &br, float (&y)[VEC]) {
        float wf[VEC], bf[VEC];
        to_f32(xv, y);
        to_f32(wr, wf);
        if (M == LAYER && b) to_f32(br, bf);
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            y[j] = (y[j] - mean) * scale * wf[j];
            if (M == LAYER && b) y[j] += bf[j];
        }
    };
    if constexpr (Q < 0) {
        auto emit = [&](int64_t e, const V &xv, const V &wr, const V &br) {
            float y[VEC];
            normed(xv, wr, br, y);
            store_f32(out + e, y);
        };
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (live(k)) emit(at(vi(k)), stage[k][threadIdx.x], weight(k), bv[k % NB]);
        for (int64_t i = vi(NV); i < nvec; i += step)
            emit(at(i), load_vec<T, VEC>(src + at(i)), load_ro<T, VEC>(w + at(i)),
                 M == LAYER && b ? load_ro<T, VEC>(b + at(i)) : V{});
    } else {
        // The values rmsnorm would store (rounded to T), then e4m3 with the scale qs.
        auto rounded = [&](const V &xv, const V &wr, float (&y)[VEC]) {
            normed(xv, wr, V{}, y);
            to_f32(to_vec<T, VEC>(y), y);
        };
        float qs, y[VEC];
        if constexpr (Q == 0) {
            qs = __ldg(reinterpret_cast<const float *>(p.scale));
        } else {
            float amax = 0.f;
            auto track = [&](const V &xv, const V &wr) {
                rounded(xv, wr, y);
#pragma unroll
                for (int j = 0; j < VEC; j++) amax = fmaxf(amax, fabsf(y[j]));
            };
            // 16-byte vectors: their rounded values replace them in the stage, and the pass
            // after the reduction only quantises them (a longer row's tail is normalised
            // again; the narrower paths spill with it)
#pragma unroll
            for (int k = 0; k < NV; k++)
                if (live(k)) {
                    track(stage[k][threadIdx.x], weight(k));
                    if constexpr (VEC == 8) stage[k][threadIdx.x] = to_vec<T, VEC>(y);
                }
            for (int64_t i = vi(NV); i < nvec; i += step)
                track(load_vec<T, VEC>(src + at(i)), load_ro<T, VEC>(w + at(i)));
            qs = e4m3_scale(block_allreduce(amax, [](float a, float c) { return fmaxf(a, c); }));
            if (threadIdx.x == 0) reinterpret_cast<float *>(p.scale)[row] = qs;
        }
        // the IEEE quotient's bytes, by the divider for a given or a computed scale
        const auto quot = [&] {
            if constexpr (Q == 0) return E4m3GivenDivider(qs);
            else return E4m3Divider(qs);
        }();
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (live(k)) {
                if constexpr (Q == 1 && VEC == 8) to_f32(stage[k][threadIdx.x], y);
                else rounded(stage[k][threadIdx.x], weight(k), y);
                store_e4m3(out + at(vi(k)), y, quot);
            }
        for (int64_t i = vi(NV); i < nvec; i += step) {
            rounded(load_vec<T, VEC>(src + at(i)), load_ro<T, VEC>(w + at(i)), y);
            store_e4m3(out + at(i), y, quot);
        }
    }
}

template <int DT, int VEC, int BLOCK> __device__ void rmsnorm(const talon__norm_params &p) { norm_row<elem<DT>, VEC, BLOCK, RMS, TALON__NORM_STAGED_rmsnorm>(p); }
template <int DT, int VEC, int BLOCK> __device__ void fused_add_rmsnorm(const talon__norm_params &p) { norm_row<elem<DT>, VEC, BLOCK, ADD_RMS, TALON__NORM_STAGED_fused_add_rmsnorm>(p); }
template <int DT, int VEC, int BLOCK> __device__ void layernorm(const talon__norm_params &p) { norm_row<elem<DT>, VEC, BLOCK, LAYER, TALON__NORM_STAGED_layernorm>(p); }
template <int DT, int VEC, int BLOCK, int Q> __device__ void rmsnorm_fp8(const talon__norm_params &p) { norm_row<elem<DT>, VEC, BLOCK, RMS, TALON__NORM_STAGED_rmsnorm_fp8, Q>(p); }
template <int DT, int VEC, int BLOCK, int Q> __device__ void fused_add_rmsnorm_fp8(const talon__norm_params &p) { norm_row<elem<DT>, VEC, BLOCK, ADD_RMS, TALON__NORM_STAGED_fused_add_rmsnorm_fp8, Q>(p); }

} // namespace talon::norm

TALON__KERNELS_norm(TALON_DEV_KERNEL)
