// Warpgroup-level control (PTX ISA: setmaxnreg, bar.sync / bar.arrive, elect.sync).
#pragma once
#include <cstdint>

namespace talon::dev {

constexpr int kWarpgroupThreads = 128;

// Warpgroup of the calling thread and its rank inside it. Read through __shfl_sync so the
// compiler knows the value is warp-uniform (branches on it stay uniform).
__device__ __forceinline__ int warpgroup_index() {
    return __shfl_sync(0xffffffffu, int(threadIdx.x) / kWarpgroupThreads, 0);
}
__device__ __forceinline__ int warp_index() { return __shfl_sync(0xffffffffu, int(threadIdx.x) / 32, 0); }
__device__ __forceinline__ int warp_in_warpgroup() { return warp_index() % 4; }
__device__ __forceinline__ int thread_in_warpgroup() { return int(threadIdx.x) % kWarpgroupThreads; }
__device__ __forceinline__ int lane_index() { return int(threadIdx.x) % 32; }

// Move this warpgroup's per-thread register budget (multiple of 8, 24..256). Takes effect only
// when the kernel has a register cap at entry (__launch_bounds__(threads, 1)), every warp of the
// warpgroup executes it, and the roles are branches of one if/else (else ptxas ignores it with
// warning C7508). Typical: producer dec<40>, consumers inc<232> with 1 + 2 warpgroups.
template <int REGS> __device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg range");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS> __device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg range");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}

// Named barriers 1..15 (0 is __syncthreads). `threads` is a multiple of 32: the number of
// threads that take part (sync + arrive together). arrive does not wait: producer/consumer
// hand-offs between warpgroups without stalling the signaller.
__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(uint32_t id, uint32_t threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// True in exactly one active lane of the warp (the same one in all callers of the warp);
// cheaper than lane == 0 tests for issuing TMA / mbarrier ops, and warp-convergence aware.
__device__ __forceinline__ bool elect_one() {
    uint32_t pred;
    asm volatile(
        "{\n .reg .pred p;\n .reg .b32 r;\n"
        " elect.sync r|p, %1;\n"
        " selp.b32 %0, 1, 0, p;\n}"
        : "=r"(pred)
        : "r"(0xffffffffu));
    return pred != 0;
}

} // namespace talon::dev
