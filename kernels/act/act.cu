// act.cu - gated activations: out[r, j] = act(in[r, j]) * in[r, cols + j], act in
// {silu, gelu (erf), gelu (tanh)}; bf16/f16 in and out, fp32 math, one rounding.
//
// Strategy: purely streaming. The grid is rows x chunks, one block of 256 threads per chunk of
// a row, each thread one VEC-wide slice of the gate and the matching slice of the up half; no
// shared memory, no reuse. Division by chunks happens once per thread in 32 bits.
//
// Variants (one row each in include/talon/kernels/act.def): activation x element type x VEC,
// where VEC = 8 is the 16-byte path (aligned pointers, cols and strides multiples of 8) and
// VEC = 1 takes any shape.
#include "dev/activation.cuh"
#include "dev/kernel.cuh"
#include "talon/kernels/act.def"

namespace talon::act {
using namespace talon::dev;

template <typename T, int VEC, typename Act>
__device__ __forceinline__ void gated(const talon__act_params &p) {
    const unsigned chunks = (unsigned)p.chunks;
    const int64_t row = blockIdx.x / chunks;
    const int64_t j = ((int64_t)(blockIdx.x % chunks) * blockDim.x + threadIdx.x) * VEC;
    if (j >= p.cols) return;
    const T *in = reinterpret_cast<const T *>(p.in) + row * p.in_stride;
    float g[VEC], u[VEC];
    load_f32<T, VEC>(in + j, g);
    load_f32<T, VEC>(in + p.cols + j, u);
#pragma unroll
    for (int i = 0; i < VEC; i++) g[i] = Act::f(g[i]) * u[i];
    store_f32<T, VEC>(reinterpret_cast<T *>(p.out) + row * p.out_stride + j, g);
}

template <int DT, int VEC> __device__ void silu_mul(const talon__act_params &p) { gated<elem<DT>, VEC, Silu>(p); }
template <int DT, int VEC> __device__ void gelu_erf_mul(const talon__act_params &p) { gated<elem<DT>, VEC, GeluErf>(p); }
template <int DT, int VEC> __device__ void gelu_tanh_mul(const talon__act_params &p) { gated<elem<DT>, VEC, GeluTanh>(p); }

} // namespace talon::act

TALON__KERNELS_act(TALON_DEV_KERNEL)
