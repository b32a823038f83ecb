// rope.cu - rotary position embedding in place on q and k (talon_rope); bf16/f16 in, fp32 math.
//
// Strategy: a thread owns one pair vector (VP pairs at the same offsets of every head) of
// one token and a group of up to G heads (q heads first, then k heads; G in rope.def). It
// gets cos/sin of its VP pairs once, from the token's cache row or from theta, and reuses them
// for every head of its group: the cache row is read from memory once per token and the
// theta mode's fp64 angles (inv_freq, product, reduction mod 2 pi; then fp32 sin/cos) cost
// one evaluation per pair and group, not per head. All heads of the group are loaded before
// any arithmetic, so one round trip covers them. Consecutive threads take consecutive pair
// vectors of a head, so a warp reads whole 128-byte lines. The rotated rows are stored with
// the streaming hint (faster at 4096 tokens; on the loads it gained nothing:
// docs/notes/rope.md). Elements past rot_dim are never touched; a token whose position is
// outside the cache is skipped (checked mode: and recorded).
//
// Variants (one row each in include/talon/kernels/rope.def): style (NeoX/GPT-J; NeoX with one
// head per thread on the 16-byte path, for a cos/sin cache) x element type x VEC, where VEC = 8
// is the 16-byte path and VEC = 1 takes any layout. On the 16-byte path a thread rotates 8
// pairs (NeoX: 8 elements from each half) or 4 pairs (GPT-J: 8 interleaved elements).
#include <type_traits>
#include "dev/check.cuh"
#include "dev/kernel.cuh"
#include "talon/kernels/rope.def"

namespace talon::rope {
using namespace talon::dev;

template <int N> __device__ __forceinline__ void load_f32s(const float *p, float (&x)[N]) {
    if constexpr (N % 4 == 0) {
#pragma unroll
        for (int i = 0; i < N; i += 4) {
            const float4 f = __ldg(reinterpret_cast<const float4 *>(p + i));
            x[i] = f.x; x[i + 1] = f.y; x[i + 2] = f.z; x[i + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = __ldg(p + i);
    }
}

// cos/sin of pos * f: the angle in fp64, reduced to [-pi, pi] there (2 pi split in two parts,
// Cody-Waite), so an fp32 angle's error at large positions never enters; then the fast fp32
// sin/cos, whose absolute error on [-pi, pi] is below 2^-21.
__device__ __forceinline__ void angle_sincos(double pos, double f, float &s, float &c) {
    const double a = pos * f, k = rint(a * 0.15915494309189535);
    const double r = fma(-k, 2.4492935982947064e-16, fma(-k, 6.283185307179586, a));
    __sincosf((float)r, &s, &c);
}

__device__ __forceinline__ void rotate(float &x, float &y, float c, float s) {
    const float x0 = x;
    x = fmaf(x0, c, -y * s);
    y = fmaf(y, c, x0 * s);
}

template <typename T, int VEC, bool NEOX, int G>
__device__ __forceinline__ void rope(const talon__rope_params &p) {
    constexpr int VP = VEC == 1 ? 1 : (NEOX ? 8 : 4); // pairs per thread
    // Per head: the 16-byte path keeps raw 32-bit words (two elements each, so registers hold
    // packed data: NeoX 4 words of x then 4 of y, GPT-J 4 (x, y) words); element-wise: x, y.
    constexpr int NW = VEC == 1 ? 2 : (NEOX ? 8 : 4);
    using W = std::conditional_t<VEC == 1, T, uint32_t>;
    const uint32_t u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= p.threads) return;
    const uint32_t t = u / p.per_token, r = u % p.per_token;
    const int g = int(r / p.vecs), i0 = int(r % p.vecs) * VP, half = p.rot_dim / 2;
    const int64_t pos = p.pos64 ? reinterpret_cast<const int64_t *>(p.positions)[t]
                                : reinterpret_cast<const int32_t *>(p.positions)[t];
    // Offsets in a head of the first and second half of the thread's words.
    const int off0 = NEOX ? i0 : 2 * i0, off1 = NEOX ? half + i0 : 2 * i0 + VP;
    W w[G][NW];
    T *ptr[G];
#pragma unroll
    for (int k = 0; k < G; k++) {
        const int h = g * G + k;
        ptr[k] = nullptr;
        if (h >= p.heads) continue;
        ptr[k] = h < p.num_q_heads
                     ? reinterpret_cast<T *>(p.q) + t * p.q_stride + (int64_t)h * p.head_dim
                     : reinterpret_cast<T *>(p.k) + t * p.k_stride +
                           (int64_t)(h - p.num_q_heads) * p.head_dim;
        if constexpr (VEC == 1) {
            w[k][0] = ptr[k][off0];
            w[k][1] = ptr[k][NEOX ? off1 : off0 + 1];
        } else {
            const uint4 a = *reinterpret_cast<const uint4 *>(ptr[k] + off0);
            w[k][0] = a.x; w[k][1] = a.y; w[k][2] = a.z; w[k][3] = a.w;
            if constexpr (NEOX) {
                const uint4 b = *reinterpret_cast<const uint4 *>(ptr[k] + off1);
                w[k][4] = b.x; w[k][5] = b.y; w[k][6] = b.z; w[k][7] = b.w;
            }
        }
    }
    // cos/sin after the loads above are in flight: they do not wait for the position, and the
    // theta mode's arithmetic overlaps them.
    float c[VP], s[VP];
    if (p.cos_sin) {
        if (pos < 0 || pos >= p.max_pos) {
            if (checking(p.check) && r == 0) // the token's first thread records it
                check_fail(p.check, TALON__CHECK_ROPE_POSITION, t, pos, p.max_pos);
            return;
        }
        const float *row = reinterpret_cast<const float *>(p.cos_sin) + pos * p.rot_dim;
        load_f32s<VP>(row + i0, c);
        load_f32s<VP>(row + half + i0, s);
    } else {
        // inv_freq of pair i0 + j = theta^(-2 i0 / rot_dim) * step^j: two exp2 per thread.
        const double l = log2(p.theta) * (-2.0 / p.rot_dim), step = exp2(l);
        double f = exp2(l * i0);
#pragma unroll
        for (int j = 0; j < VP; j++, f *= step) angle_sincos((double)pos, f, s[j], c[j]);
    }
#pragma unroll
    for (int k = 0; k < G; k++) {
        if (!ptr[k]) continue;
        if constexpr (VEC == 1) {
            float x = to_f32(w[k][0]), y = to_f32(w[k][1]);
            rotate(x, y, c[0], s[0]);
            ptr[k][off0] = from_f32<T>(x);
            ptr[k][NEOX ? off1 : off0 + 1] = from_f32<T>(y);
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if constexpr (NEOX) { // words j, 4 + j: x and y of pairs 2j, 2j + 1
                    float2 x = unpack2<T>(w[k][j]), y = unpack2<T>(w[k][4 + j]);
                    rotate(x.x, y.x, c[2 * j], s[2 * j]);
                    rotate(x.y, y.y, c[2 * j + 1], s[2 * j + 1]);
                    w[k][j] = pack2<T>(x.x, x.y);
                    w[k][4 + j] = pack2<T>(y.x, y.y);
                } else { // word j: pair j
                    float2 xy = unpack2<T>(w[k][j]);
                    rotate(xy.x, xy.y, c[j], s[j]);
                    w[k][j] = pack2<T>(xy.x, xy.y);
                }
            }
            store_vec<T, 8, true>(ptr[k] + off0, *reinterpret_cast<const vec_t<T, 8> *>(&w[k][0]));
            if constexpr (NEOX)
                store_vec<T, 8, true>(ptr[k] + off1, *reinterpret_cast<const vec_t<T, 8> *>(&w[k][4]));
        }
    }
}

template <int DT, int VEC> __device__ void rope_neox(const talon__rope_params &p) { rope<elem<DT>, VEC, true, TALON__ROPE_HEADS>(p); }
template <int DT, int VEC> __device__ void rope_neox1(const talon__rope_params &p) { rope<elem<DT>, VEC, true, 1>(p); }
template <int DT, int VEC> __device__ void rope_gptj(const talon__rope_params &p) { rope<elem<DT>, VEC, false, TALON__ROPE_HEADS>(p); }

} // namespace talon::rope

TALON__KERNELS_rope(TALON_DEV_KERNEL)
