// Warp and block reductions and scans.
#pragma once
#include <cstdint>
#include <cstring>

namespace talon::dev {

// __shfl_xor_sync for any trivially copyable T, one 32-bit shuffle per word (structs such as
// running statistics move field by field, as hand-written shuffles would).
template <typename T> __device__ __forceinline__ T shfl_xor(T v, int mask) {
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
        return __shfl_xor_sync(~0u, v, mask);
    } else {
        static_assert(sizeof(T) % 4 == 0, "whole 32-bit words");
        uint32_t w[sizeof(T) / 4];
        memcpy(w, &v, sizeof(T));
#pragma unroll
        for (int i = 0; i < int(sizeof(T) / 4); i++) w[i] = __shfl_xor_sync(~0u, w[i], mask);
        memcpy(&v, w, sizeof(T));
        return v;
    }
}

// op over the 32 lanes of a warp (a butterfly: every lane gets the result).
template <typename T, typename Op> __device__ __forceinline__ T warp_allreduce(T v, Op op) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v = op(v, shfl_xor(v, o));
    return v;
}

// op over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. T{} must be op's identity. One __syncthreads; the block's threads must all call it,
// and a second call needs a barrier between them (the scratch is reused).
template <typename T, typename Op> __device__ __forceinline__ T block_allreduce(T v, Op op) {
    __shared__ T red[32];
    v = warp_allreduce(v, op);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < int(blockDim.x / 32) ? red[lane] : T{};
    return warp_allreduce(v, op);
}

// Exclusive prefix sums of two ints per thread at once, over a block of NW warps (all call it);
// the block's totals in *total. warp_sum: NW + 1 entries of shared memory.
template <int NW>
__device__ __forceinline__ int2 block_exclusive_scan2(int2 v, int2 *total, int2 *warp_sum) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int2 inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int tx = __shfl_up_sync(~0u, inc.x, o), ty = __shfl_up_sync(~0u, inc.y, o);
        if (lane >= o) inc.x += tx, inc.y += ty;
    }
    if (lane == 31) warp_sum[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        const int2 w = lane < NW ? warp_sum[lane] : make_int2(0, 0);
        int2 winc = w;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int tx = __shfl_up_sync(~0u, winc.x, o), ty = __shfl_up_sync(~0u, winc.y, o);
            if (lane >= o) winc.x += tx, winc.y += ty;
        }
        if (lane < NW) warp_sum[lane] = make_int2(winc.x - w.x, winc.y - w.y);
        if (lane == 31) warp_sum[NW] = winc;
    }
    __syncthreads();
    *total = warp_sum[NW];
    return make_int2(warp_sum[warp].x + inc.x - v.x, warp_sum[warp].y + inc.y - v.y);
}

} // namespace talon::dev
