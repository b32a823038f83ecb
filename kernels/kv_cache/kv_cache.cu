// kv_cache.cu - the append of new keys and values into a paged KV cache (talon_kv_append);
// bf16/f16 in, the input type or fp8 e4m3 in the cache.
//
// Strategy: a streaming copy. A unit is VEC elements of k or of v of one token; a thread
// loads TALON__KV_UNROLL units (BLOCK apart) and their slots before storing any, then writes each
// to the cache row of its slot (in either layout, NHD or HND), quantised to e4m3 for the fp8
// variant (x / scale correctly rounded in fp32, then cvt.rn.satfinite, as __nv_cvt_float_to_fp8).
// The division is a reciprocal and one FMA correction (div_scale): with __fdiv_rn the fp8 variant
// was bound by its instructions; and a unit's token comes from a multiply-high by a host constant
// instead of a division (faster; two units per thread instead measured slower). The streaming
// hint (as rope's) was not taken; HND and NHD cost the same. Measurements: docs/notes/kv_cache.md.
//
// Checked mode records a slot past the cache (kernels/dev/check.cuh); the token is skipped either
// way.
//
// Variants (one row each in include/talon/kernels/kv_cache.def): cache type (input type/fp8) x
// element type x VEC, where VEC = 8 is the 16-byte path and VEC = 1 takes any layout.
#include "dev/check.cuh"
#include "dev/fp8.cuh"
#include "dev/kernel.cuh"
#include "dev/math.cuh"
#include "talon/kernels/kv_cache.def"

namespace talon::kv_cache {
using namespace talon::dev;

// x / scale rounded to fp32 (as __fdiv_rn), cheaper. The host (talon__fp8_quant) gives
// q = {mul, div, rcp}: x / scale = (x mul) / div, mul = 2^k, div = scale 2^k in [2^-22, 4), rcp =
// RN(1 / div); x mul is exact, or over/underflows only where |x / scale| is far outside e4m3's
// range. Then y = (x mul) rcp and one FMA correction from the exact residual: exactly RN of the
// quotient for 2^-20 < |y| < 2^20, where nothing under- or overflows (`make check-fp8-div`:
// exhaustively every f16 significand, so every bf16 one, over every fp32 divisor significand
// in [1, 2), the result being scale-invariant there; and the e4m3 bytes of every 16-bit
// pattern over 4015 scales). Outside that range e4m3 gives +-0 or +-448 either way (inf and
// NaN pass through).
__device__ __forceinline__ float div_scale(float x, const float (&q)[3]) {
    const float a = x * q[0], y = a * q[2];
    return fabsf(y) > 0x1p-20f && fabsf(y) < 0x1p20f ? fmaf(fmaf(-y, q[1], a), q[2], y) : y;
}

template <typename T, int VEC, bool FP8>
__device__ __forceinline__ void kv_copy(const talon__kv_params &p) {
    constexpr int U = TALON__KV_UNROLL;
    const uint32_t units_per_token = 2 * p.row_vecs;
    vec_t<T, VEC> x[U];
    int64_t dst[U], slot[U];
    int which[U];
    // The k/v loads do not depend on the slot: issue them with the slot loads, one round trip.
#pragma unroll
    for (int i = 0; i < U; i++) {
        const uint32_t unit = (blockIdx.x * U + i) * blockDim.x + threadIdx.x;
        slot[i] = -1;
        if (unit >= p.units) continue;
        const uint32_t t = div_magic(unit, p.div_m, p.div_l); // unit / units_per_token
        const uint32_t r = unit - t * units_per_token;
        which[i] = r >= p.row_vecs;
        const int64_t e = (int64_t)(which[i] ? r - p.row_vecs : r) * VEC;
        const T *src = which[i] ? reinterpret_cast<const T *>(p.v) + t * p.v_stride
                                : reinterpret_cast<const T *>(p.k) + t * p.k_stride;
        slot[i] = reinterpret_cast<const int64_t *>(p.slots)[t];
        x[i] = load_vec<T, VEC>(src + e);
        dst[i] = e;
    }
    // Element e = h D + d of a token's row: NHD keeps the row whole (head_stride = D), HND
    // (page_size > 1) puts each head's D elements page_size rows apart.
    const int64_t pmask = (1ll << p.page_shift) - 1;
#pragma unroll
    for (int i = 0; i < U; i++) {
        if (slot[i] < 0 || slot[i] >= p.num_slots) {
            // checked mode: a slot past the cache (negative ones are padding), recorded by the
            // token's first unit (its index recomputed here, off the hot path)
            if (checking(p.check) && slot[i] >= p.num_slots) {
                const uint32_t unit = (blockIdx.x * U + i) * blockDim.x + threadIdx.x;
                const uint32_t t = div_magic(unit, p.div_m, p.div_l);
                if (unit == t * units_per_token)
                    check_fail(p.check, TALON__CHECK_KV_APPEND_SLOT, t, slot[i], p.num_slots);
            }
            dst[i] = -1;
            continue;
        }
        const uint32_t e = (uint32_t)dst[i], h = p.head_stride == p.head_dim ? 0 : e / p.head_dim;
        dst[i] = ((slot[i] >> p.page_shift) * p.page_rows + (slot[i] & pmask)) * p.slot_stride +
                 h * (p.head_stride - p.head_dim) + e;
    }
#pragma unroll
    for (int i = 0; i < U; i++) {
        if (dst[i] < 0) continue;
        if constexpr (FP8) {
            const float(&qc)[3] = p.quant[which[i]];
            uint8_t *out = reinterpret_cast<uint8_t *>(which[i] ? p.v_cache : p.k_cache) + dst[i];
            auto q = [&](int j) { return div_scale(to_f32(x[i].v[j]), qc); };
            if constexpr (VEC == 8) {
                uint32_t b[4];
#pragma unroll
                for (int j = 0; j < 4; j++)
                    b[j] = e4m3x2_from_f32(q(2 * j), q(2 * j + 1));
                *reinterpret_cast<uint2 *>(out) = make_uint2(b[0] | b[1] << 16, b[2] | b[3] << 16);
            } else {
                *out = e4m3_from_f32(q(0));
            }
        } else {
            store_vec<T, VEC>(reinterpret_cast<T *>(which[i] ? p.v_cache : p.k_cache) + dst[i], x[i]);
        }
    }
}

template <int DT, int VEC> __device__ void kv_append(const talon__kv_params &p) { kv_copy<elem<DT>, VEC, false>(p); }
template <int DT, int VEC> __device__ void kv_append_fp8(const talon__kv_params &p) { kv_copy<elem<DT>, VEC, true>(p); }

} // namespace talon::kv_cache

TALON__KERNELS_kv_cache(TALON_DEV_KERNEL)
