// Element types, fp32 conversion, vector access, packed pairs.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "talon/kernels/common.def"

namespace talon::dev {

// The element type of a table's type value (TALON__BF16, ...): elem<DT>.
template <int DT> struct elem_of;
template <> struct elem_of<TALON__BF16> { using type = __nv_bfloat16; };
template <> struct elem_of<TALON__F16> { using type = __half; };
template <> struct elem_of<TALON__F32> { using type = float; };
template <> struct elem_of<TALON__I32> { using type = int32_t; };
template <> struct elem_of<TALON__FP8_E4M3> { using type = uint8_t; }; // the e4m3 bits
template <int DT> using elem = typename elem_of<DT>::type;

// bf16 is the top half of an fp32: a shift (ptxas allocates registers better for it than for cvt).
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __uint_as_float(uint32_t(__bfloat16_as_ushort(x)) << 16); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(float x) { return x; }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_f32(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f32(float x) { return __float2half_rn(x); }

// VEC consecutive elements moved as one access (16 bytes when VEC = 8).
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) vec_t {
    static_assert(VEC == 1 || VEC == 8, "one element or 16 bytes");
    T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ vec_t<T, VEC> load_vec(const T *p) {
    return *reinterpret_cast<const vec_t<T, VEC> *>(p);
}

// Read-only data (weights, bias) through the non-coherent cache.
template <typename T, int VEC>
__device__ __forceinline__ vec_t<T, VEC> load_ro(const T *p) {
    vec_t<T, VEC> v;
    if constexpr (VEC == 8) {
        uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
        v = *reinterpret_cast<vec_t<T, VEC> *>(&u);
    } else {
        v.v[0] = __ldg(p);
    }
    return v;
}

// CS: the streaming hint (st.global.cs, evict first), for lines nothing reads again soon.
template <typename T, int VEC, bool CS = false>
__device__ __forceinline__ void store_vec(T *p, const vec_t<T, VEC> &v) {
    if constexpr (VEC == 1) {
        *p = v.v[0];
    } else {
        // Written in PTX: NVVM otherwise splits some of these into four 4-byte stores.
        const uint4 u = *reinterpret_cast<const uint4 *>(&v);
        if constexpr (CS)
            asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u.x),
                         "r"(u.y), "r"(u.z), "r"(u.w)
                         : "memory");
        else
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(u.x), "r"(u.y),
                         "r"(u.z), "r"(u.w)
                         : "memory");
    }
}

template <typename T, int VEC>
__device__ __forceinline__ void to_f32(const vec_t<T, VEC> &v, float (&x)[VEC]) {
#pragma unroll
    for (int i = 0; i < VEC; i++) x[i] = to_f32(v.v[i]);
}

template <typename T, int VEC>
__device__ __forceinline__ vec_t<T, VEC> to_vec(const float (&x)[VEC]) {
    vec_t<T, VEC> v;
#pragma unroll
    for (int i = 0; i < VEC; i++) v.v[i] = from_f32<T>(x[i]);
    return v;
}

template <typename T, int VEC>
__device__ __forceinline__ void load_f32(const T *p, float (&x)[VEC]) {
    to_f32(load_vec<T, VEC>(p), x);
}

template <typename T, int VEC>
__device__ __forceinline__ void store_f32(T *p, const float (&x)[VEC]) {
    store_vec(p, to_vec<T, VEC>(x));
}

// A read-only global load that keeps its place in program order among asm volatile
// statements (__ldg may be sunk past them, e.g. under a later wait).
__device__ __forceinline__ float ldg_ordered(const float *p) {
    float x;
    asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(x) : "l"(p));
    return x;
}

// Two 16-bit elements packed in a 32-bit word (the low one first) <-> fp32; packing rounds to
// nearest even (cvt.rn.{bf16,f16}x2.f32).
template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t w);
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t w) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t w) {
    return __half22float2(*reinterpret_cast<const __half2 *>(&w));
}
// Byte permute: the bytes of {hi:lo} (0-3 from lo, 4-7 from hi) that sel's four nibbles name,
// lowest result byte first (a run-time selector is fine).
__device__ __forceinline__ uint32_t prmt(uint32_t lo, uint32_t hi, uint32_t sel) {
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
    return r;
}

template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&b);
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}

} // namespace talon::dev
