// norm.cu - rmsnorm, fused_add_rmsnorm, layernorm (bf16/f16 in and out, fp32 math).
//
// Strategy: one block per row. Each thread keeps up to CACHE elements of the row in
// registers, so rows up to CACHE * 256 elements are read from memory once; the tail of a
// longer row is re-read (mostly from L2) by the later passes. All loads of a thread are issued
// before any arithmetic so several 16-byte requests are in flight. Block reductions use warp
// shuffles and one float per warp in dynamic shared memory (block / 32 floats: the 32 bytes
// of smem in the table). fused_add_rmsnorm rounds the new residual to the element type and
// normalises that rounded value. layernorm takes the variance around the mean (two passes
// over the registers, not E[x^2] - E[x]^2).
//
// Variants (one line each in talon.h, TALON__KERNELS_norm): element type x VEC, where VEC = 8
// is the 16-byte path (aligned pointers, cols and strides multiples of 8) and VEC = 1 takes
// any shape.
#include "common.cuh"

// Elements per thread held in registers: 32 on the 16-byte path (rows up to 8192 read once);
// 16 on the element-wise path, where each element takes a register of its own.
template <int VEC> constexpr int CACHE = VEC == 8 ? 32 : 16;

enum Mode { RMS, ADD_RMS, LAYER };

__device__ __forceinline__ float block_sum(float v, float *red) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); // red may still be read by the previous reduction
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < blockDim.x / 32 ? red[lane] : 0.f;
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
    return v;
}

template <typename T, int VEC, Mode M>
__device__ __forceinline__ void norm_row(const talon__norm_params &p) {
    constexpr int NV = CACHE<VEC> / VEC;
    extern __shared__ float red[];
    const int64_t row = blockIdx.x, nvec = p.cols / VEC, step = blockDim.x;
    const T *in = reinterpret_cast<const T *>(p.in) + row * p.in_stride;
    T *res = reinterpret_cast<T *>(p.residual) + row * p.residual_stride;
    T *out = reinterpret_cast<T *>(p.out) + row * p.out_stride;
    const T *w = reinterpret_cast<const T *>(p.weight);
    const T *b = reinterpret_cast<const T *>(p.bias);
    const T *src = M == ADD_RMS ? res : in; // where the normalised value lives after pass 1

    // ADD_RMS: residual += in, stored rounded; the rounded value is what gets normalised.
    auto add_residual = [&](int64_t i, float (&v)[VEC], const float (&r)[VEC]) {
#pragma unroll
        for (int j = 0; j < VEC; j++) v[j] += r[j];
        store_f32<T, VEC>(res + i * VEC, v);
#pragma unroll
        for (int j = 0; j < VEC; j++) v[j] = to_f32(from_f32<T>(v[j]));
    };
    auto fetch = [&](int64_t i, float (&v)[VEC]) {
        load_f32<T, VEC>(in + i * VEC, v);
        if (M == ADD_RMS) {
            float r[VEC];
            load_f32<T, VEC>(res + i * VEC, r);
            add_residual(i, v, r);
        }
    };

    // Every load before any store, so the compiler need not fear aliasing between them.
    constexpr int NR = M == ADD_RMS ? NV : 1;
    float x[NV][VEC], r[NR][VEC];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int64_t i = threadIdx.x + k * step;
        if (i < nvec) {
            load_f32<T, VEC>(in + i * VEC, x[k]);
            if (M == ADD_RMS) load_f32<T, VEC>(res + i * VEC, r[k % NR]);
        }
    }
    // Weights (and bias) for the cached part are fetched now, in flight with the row, instead
    // of after the reduction where each would cost a round trip behind the stores.
    constexpr int NB = M == LAYER ? NV : 1;
    vec_t<T, VEC> wc[NV], bc[NB];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int64_t i = threadIdx.x + k * step;
        if (i < nvec) {
            wc[k] = load_ro<T, VEC>(w + i * VEC);
            if (M == LAYER && b) bc[k % NB] = load_ro<T, VEC>(b + i * VEC);
        }
    }
    if (M == ADD_RMS)
#pragma unroll
        for (int k = 0; k < NV; k++) {
            const int64_t i = threadIdx.x + k * step;
            if (i < nvec) add_residual(i, x[k], r[k % NR]);
        }

    // First moment: sum of squares (RMS) or sum (LAYER).
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < NV; k++)
        if (threadIdx.x + k * step < nvec)
#pragma unroll
            for (int j = 0; j < VEC; j++) s += M == LAYER ? x[k][j] : x[k][j] * x[k][j];
    for (int64_t i = threadIdx.x + NV * step; i < nvec; i += step) {
        float v[VEC];
        fetch(i, v);
#pragma unroll
        for (int j = 0; j < VEC; j++) s += M == LAYER ? v[j] : v[j] * v[j];
    }
    s = block_sum(s, red);

    float mean = 0.f, scale;
    if (M == LAYER) {
        mean = s / p.cols;
        float q = 0.f;
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (threadIdx.x + k * step < nvec)
#pragma unroll
                for (int j = 0; j < VEC; j++) q += (x[k][j] - mean) * (x[k][j] - mean);
        for (int64_t i = threadIdx.x + NV * step; i < nvec; i += step) {
            float v[VEC];
            load_f32<T, VEC>(src + i * VEC, v);
#pragma unroll
            for (int j = 0; j < VEC; j++) q += (v[j] - mean) * (v[j] - mean);
        }
        scale = rsqrtf(block_sum(q, red) / p.cols + p.eps);
    } else {
        scale = rsqrtf(s / p.cols + p.eps);
    }

    auto emit = [&](int64_t i, float (&v)[VEC], const vec_t<T, VEC> &wr, const vec_t<T, VEC> &br) {
        float wv[VEC], bv[VEC];
        to_f32(wr, wv);
        if (M == LAYER && b) to_f32(br, bv);
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            v[j] = (v[j] - mean) * scale * wv[j];
            if (M == LAYER && b) v[j] += bv[j];
        }
        store_f32<T, VEC>(out + i * VEC, v);
    };
#pragma unroll
    for (int k = 0; k < NV; k++) {
        const int64_t i = threadIdx.x + k * step;
        if (i < nvec) emit(i, x[k], wc[k], bc[k % NB]);
    }
    for (int64_t i = threadIdx.x + NV * step; i < nvec; i += step) {
        float v[VEC];
        load_f32<T, VEC>(src + i * VEC, v);
        emit(i, v, load_ro<T, VEC>(w + i * VEC), M == LAYER && b ? load_ro<T, VEC>(b + i * VEC) : vec_t<T, VEC>());
    }
}

template <typename T, int VEC> __device__ void rmsnorm(const talon__norm_params &p) { norm_row<T, VEC, RMS>(p); }
template <typename T, int VEC> __device__ void fused_add_rmsnorm(const talon__norm_params &p) { norm_row<T, VEC, ADD_RMS>(p); }
template <typename T, int VEC> __device__ void layernorm(const talon__norm_params &p) { norm_row<T, VEC, LAYER>(p); }

#define X(sym, body, dt, vec, img, block, smem, P)                                             \
    extern "C" __global__ void __launch_bounds__(block) sym(const __grid_constant__ P p) {     \
        body<talon__ct_##dt, vec>(p);                                                          \
    }
TALON__KERNELS_norm(X)
