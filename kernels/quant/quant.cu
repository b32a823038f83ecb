// quant.cu - bf16/f16 -> fp8 e4m3 with fp32 scales (talon_quant_fp8): a given per-tensor
// scale, or one computed per row or per group of 128 columns, s = max(amax / 448, 2^-126).
//
// Strategy: one block per row (rows of up to 1024 elements: one warp per row, 8 rows a
// block), 16-byte loads of 8 elements. Each thread issues the loads of its first
// TALON__QUANT_CACHE vectors before any arithmetic (one memory round trip), then: per tensor,
// quantises them; per row, reduces |x|'s maximum over the row's threads and quantises the
// held vectors (a longer row's tail is read again); per group, the 16 threads of a half-warp
// hold one group's 128 columns and reduce by shuffles. Quantisation is the fp32 quotient
// x / s (IEEE; for a computed scale from its reciprocal, dev/fp8.cuh's E4m3Divider) rounded
// to e4m3 with saturation (cvt.rn.satfinite), 8 values per 8-byte store.
#include "dev/fp8.cuh"
#include "dev/kernel.cuh"
#include "dev/reduce.cuh"
#include "talon/kernels/quant.def"

namespace talon::quant {
using namespace talon::dev;

enum Mode { TENSOR = 0, TOKEN = 1, GROUP = 2 };

template <typename T> __device__ __forceinline__ float amax8(const vec_t<T, 8> &v) {
    float x[8], m = 0.f;
    to_f32(v, x);
#pragma unroll
    for (int i = 0; i < 8; i++) m = fmaxf(m, fabsf(x[i])); // fmaxf: a NaN never wins
    return m;
}

template <typename T, typename S> __device__ __forceinline__ void store_q8(uint8_t *dst, const vec_t<T, 8> &v, const S &s) {
    float x[8];
    to_f32(v, x);
    store_e4m3(dst, x, s);
}

// ROW_THREADS: threads per row (BLOCK: a block's; 32: a warp's, BLOCK / 32 rows a block).
template <int DT, int MODE, int BLOCK, int ROW_THREADS>
__device__ void quant_fp8(const talon__quant_params &p) {
    using T = elem<DT>;
    using V = vec_t<T, 8>;
    constexpr int NV = TALON__QUANT_CACHE, ROWS = BLOCK / ROW_THREADS;
    static_assert(ROWS == 1 || ROW_THREADS == 32, "a row per block or per warp");
    const int t = ROWS == 1 ? int(threadIdx.x) : int(threadIdx.x) % ROW_THREADS;
    const int64_t row = int64_t(blockIdx.x) * ROWS + int(threadIdx.x) / ROW_THREADS, nvec = p.cols / 8;
    if (ROWS > 1 && row >= p.rows) return; // a whole warp past the last row
    const T *in = reinterpret_cast<const T *>(p.in) + row * p.in_stride;
    uint8_t *out = reinterpret_cast<uint8_t *>(p.out) + row * p.out_stride;
    float *scale = reinterpret_cast<float *>(p.scale);
    auto vi = [&](int k) { return int64_t(t) + int64_t(k) * ROW_THREADS; };
    // vectors past the held ones: a warp's row has none (the host's rule)
    const int64_t tail = ROWS == 1 ? nvec : 0;

    V x[NV];
    float amax = 0.f;
#pragma unroll
    for (int k = 0; k < NV; k++)
        if (vi(k) < nvec) x[k] = load_vec<T, 8>(in + vi(k) * 8);

    // The scale of vector i (x): per tensor the given one; per group the maximum over the 16
    // vectors of its half-warp (all live or all not: cols is a multiple of 128), written by the
    // first; per row the block's, computed below.
    float s = 0.f;
    if constexpr (MODE == TENSOR) s = __ldg(scale);
    auto group_scale = [&](int64_t i, const V &v) {
        const unsigned half = 0xffffu << (threadIdx.x & 16);
        float m = amax8(v);
#pragma unroll
        for (int o = 8; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(half, m, o));
        const float g = e4m3_scale(m);
        if (i % 16 == 0) scale[row * p.scale_row_stride + (i / 16) * p.scale_group_stride] = g;
        return g;
    };
    if constexpr (MODE == TOKEN) {
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (vi(k) < nvec) amax = fmaxf(amax, amax8(x[k]));
        for (int64_t i = vi(NV); i < tail; i += ROW_THREADS) amax = fmaxf(amax, amax8(load_vec<T, 8>(in + i * 8)));
        const auto max = [](float a, float b) { return fmaxf(a, b); };
        s = e4m3_scale(ROWS == 1 ? block_allreduce(amax, max) : warp_allreduce(amax, max));
        if (t == 0) scale[row] = s;
    }
    // a given scale: the IEEE division; a computed one: its divider (the same bytes, cheaper)
    const E4m3Divider row_div(s);
    auto quantise = [&](int64_t i, const V &v) {
        if constexpr (MODE == TENSOR) store_q8(out + i * 8, v, s);
        else if constexpr (MODE == TOKEN) store_q8(out + i * 8, v, row_div);
        else store_q8(out + i * 8, v, E4m3Divider(group_scale(i, v)));
    };
#pragma unroll
    for (int k = 0; k < NV; k++)
        if (vi(k) < nvec) quantise(vi(k), x[k]);
    for (int64_t i = vi(NV); i < tail; i += ROW_THREADS) quantise(i, load_vec<T, 8>(in + i * 8));
}

} // namespace talon::quant

TALON__KERNELS_quant(TALON_DEV_KERNEL)
