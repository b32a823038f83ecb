// Ordered keys: a monotone map of floats to unsigned integers, so that radix selection, integer
// max/min reductions (redux.sync) and atomics order values as numbers. -0 and +0 share a key,
// every NaN (either sign, any payload) takes the largest key 0xFFFFFFFF, so NaN ranks above
// +inf; key 0 belongs to no value (a free "absent" mark). Also an element's raw bits as a
// 32-bit word and back, for carrying values through a selection bit for bit.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "vec.cuh"

namespace talon::dev {

__device__ __forceinline__ uint32_t order_key(float x) {
    const uint32_t u = __float_as_uint(__fadd_rn(x, 0.f)); // -0 + 0 = +0
    return (u & 0x7fffffffu) > 0x7f800000u ? ~0u : u ^ (uint32_t(int32_t(u) >> 31) | 0x80000000u);
}

// The value whose key is `key` (NaN for keys no value has). x < order_key_value(k) implies
// order_key(x) < k, so one float compare can reject an element before its key is formed (a
// NaN bound rejects nothing).
__device__ __forceinline__ float order_key_value(uint32_t key) {
    return key == ~0u ? __uint_as_float(0x7fffffffu)
                      : __uint_as_float(key >> 31 ? key & 0x7fffffffu : ~key);
}

__device__ __forceinline__ uint32_t raw_of(float x) { return __float_as_uint(x); }
__device__ __forceinline__ uint32_t raw_of(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
__device__ __forceinline__ uint32_t raw_of(__half x) { return __half_as_ushort(x); }
template <typename T> __device__ __forceinline__ T from_raw(uint32_t u);
template <> __device__ __forceinline__ float from_raw<float>(uint32_t u) { return __uint_as_float(u); }
template <> __device__ __forceinline__ __nv_bfloat16 from_raw<__nv_bfloat16>(uint32_t u) { return __ushort_as_bfloat16((unsigned short)u); }
template <> __device__ __forceinline__ __half from_raw<__half>(uint32_t u) { return __ushort_as_half((unsigned short)u); }

} // namespace talon::dev
