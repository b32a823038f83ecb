// quant.cu - bf16/f16 -> fp8 e4m3 with fp32 scales (talon_quant_fp8): a given per-tensor
// scale, or one computed per row or per group of 128 columns, s = max(amax / 448, 2^-126).
//
// Strategy, per tensor and per row (quant_fp8): one block per row (rows of up to 1024
// elements: one warp per row, 8 rows a block), 16-byte loads of 8 elements. Each thread issues
// the loads of its first TALON__QUANT_CACHE vectors before any arithmetic (one memory round
// trip), then: per tensor, quantises them; per row, reduces |x|'s maximum over the row's
// threads and quantises the held vectors (a longer row's tail is read again).
// Per group (quant_fp8_groups): a group needs nothing from the rest of its row, so the groups
// of all rows are numbered together and each takes 8 threads (2 vectors each) of a 256-thread
// block: no block waits on a row's end or holds a row's registers, and the group's maximum is
// 3 shuffles of the whole warp.
// Quantisation is the fp32 quotient x / s (its e4m3 bytes, from s's reciprocal and one
// correction: dev/fp8.cuh's E4m3Divider and E4m3GivenDivider) rounded to e4m3 with saturation
// (cvt.rn.satfinite), 8 values per 8-byte store.
#include "dev/async.cuh"
#include "dev/fp8.cuh"
#include "dev/kernel.cuh"
#include "dev/math.cuh"
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

// quot: x -> x / s in fp32 (the IEEE quotient, or one equal to it in e4m3)
template <typename T, typename Quot> __device__ __forceinline__ void store_q8(uint8_t *dst, const vec_t<T, 8> &v, const Quot &quot) {
    float x[8];
    to_f32(v, x);
    store_e4m3_quot(dst, x, quot);
}

// ROW_THREADS: threads per row (BLOCK: a block's; 32: a warp's, BLOCK / 32 rows a block).
template <int DT, int MODE, int BLOCK, int ROW_THREADS>
__device__ void quant_fp8(const talon__quant_params &p) {
    using T = elem<DT>;
    using V = vec_t<T, 8>;
    constexpr int NV = TALON__QUANT_CACHE, ROWS = BLOCK / ROW_THREADS;
    static_assert(ROWS == 1 || ROW_THREADS == 32, "a row per block or per warp");
    static_assert(MODE == TENSOR || MODE == TOKEN, "groups: quant_fp8_groups");
    pdl_launch_dependents(); // launched as a programmatic dependent: the next kernel may start
    pdl_wait();              // the previous kernel's writes (in) are visible from here
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

    // The scale: per tensor the given one; per row the block's (or warp's), computed here.
    float s = 0.f;
    if constexpr (MODE == TENSOR) s = __ldg(scale);
    else {
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (vi(k) < nvec) amax = fmaxf(amax, amax8(x[k]));
        for (int64_t i = vi(NV); i < tail; i += ROW_THREADS) amax = fmaxf(amax, amax8(load_vec<T, 8>(in + i * 8)));
        const auto max = [](float a, float b) { return fmaxf(a, b); };
        s = e4m3_scale(ROWS == 1 ? block_allreduce(amax, max) : warp_allreduce(amax, max));
        if (t == 0) scale[row] = s;
    }
    auto quantise_row = [&](const auto &quot) {
#pragma unroll
        for (int k = 0; k < NV; k++)
            if (vi(k) < nvec) store_q8(out + vi(k) * 8, x[k], quot);
        for (int64_t i = vi(NV); i < tail; i += ROW_THREADS) store_q8(out + i * 8, load_vec<T, 8>(in + i * 8), quot);
    };
    // the IEEE quotient's bytes, by the divider for a given or a computed scale
    if constexpr (MODE == TENSOR) E4m3GivenDivider(s).dispatch(quantise_row);
    else E4m3Divider(s).dispatch(quantise_row);
}

// GT threads a group of 128 columns, 16 / GT vectors each: thread j of a group takes its
// vectors j, j + GT, .. (a warp's load covers 32 / GT groups' pieces of 16 GT bytes whole).
template <int DT, int BLOCK, int GT>
__device__ void quant_fp8_groups(const talon__quant_params &p) {
    using T = elem<DT>;
    using V = vec_t<T, 8>;
    constexpr int NV = TALON__QUANT_GROUP / 8 / GT;
    pdl_launch_dependents(); // as in quant_fp8
    pdl_wait();
    const uint32_t unit = blockIdx.x * (BLOCK / GT) + threadIdx.x / GT, j = threadIdx.x % GT;
    // a group past the last (the last block's) reads the last one again and stores nothing
    const bool live = unit < p.units;
    const uint32_t read = live ? unit : p.units - 1;
    const uint32_t row = div_magic(read, p.div_m, p.div_l), g = read - row * p.groups_per_row;
    const int64_t col = int64_t(g) * TALON__QUANT_GROUP + j * 8;
    const T *in = reinterpret_cast<const T *>(p.in) + row * p.in_stride + col;
    V x[NV];
    float m = 0.f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        x[k] = load_vec<T, 8>(in + k * GT * 8);
        m = fmaxf(m, amax8(x[k]));
    }
    // every lane shuffles (the whole warp's mask); a group's lanes only with each other
#pragma unroll
    for (int o = GT / 2; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (!live) return;
    const float s = e4m3_scale(m);
    if (j == 0) reinterpret_cast<float *>(p.scale)[row * p.scale_row_stride + g * p.scale_group_stride] = s;
    uint8_t *out = reinterpret_cast<uint8_t *>(p.out) + row * p.out_stride + col;
    E4m3Divider(s).dispatch([&](const auto &quot) {
#pragma unroll
        for (int k = 0; k < NV; k++) store_q8(out + k * GT * 8, x[k], quot);
    });
}

} // namespace talon::quant

TALON__KERNELS_quant(TALON_DEV_KERNEL)
