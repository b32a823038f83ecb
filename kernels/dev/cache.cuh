// L2 cache policies (createpolicy) and loads that carry one (.L2::cache_hint): evict_first for
// data read for the last time (streamed once), evict_last for data read again soon (by the
// next kernel, or by many CTAs: the weights of a GEMM wave). The TMA variants are in tma.cuh.
#pragma once
#include <cstdint>

namespace talon::dev {

__device__ __forceinline__ uint64_t l2_policy_evict_first() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ uint64_t l2_policy_evict_last() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    return p;
}

// 16 bytes from global memory under an L2 policy.
__device__ __forceinline__ uint4 load_16_l2_hint(const void *a, uint64_t policy) {
    uint4 r;
    asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(a), "l"(policy));
    return r;
}

} // namespace talon::dev
