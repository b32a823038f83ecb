// Device helpers shared by the kernel files: element types, fp32 conversion, vector access.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "talon.h"

typedef __nv_bfloat16 talon__ct_BF16;
typedef __half talon__ct_F16;

__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ __nv_bfloat16 from_f32(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_f32(float x) { return __float2half_rn(x); }

// VEC consecutive elements moved as one access (16 bytes when VEC = 8).
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) vec_t { T v[VEC]; };

template <typename T, int VEC>
__device__ __forceinline__ void load_f32(const T *p, float (&x)[VEC]) {
    vec_t<T, VEC> v = *reinterpret_cast<const vec_t<T, VEC> *>(p);
#pragma unroll
    for (int i = 0; i < VEC; i++) x[i] = to_f32(v.v[i]);
}

template <typename T, int VEC>
__device__ __forceinline__ void store_f32(T *p, const float (&x)[VEC]) {
    vec_t<T, VEC> v;
#pragma unroll
    for (int i = 0; i < VEC; i++) v.v[i] = from_f32<T>(x[i]);
    *reinterpret_cast<vec_t<T, VEC> *>(p) = v;
}
