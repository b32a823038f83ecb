// Asynchronous copies into shared memory (cp.async, sm_80+) and programmatic dependent launch
// (griddepcontrol, sm_90). The bulk and tensor copies are in tma.cuh.
#pragma once
#include <cstdint>

namespace talon::dev {

// 16 bytes global -> shared, cached in L2 only (.cg): for data streamed once.
__device__ __forceinline__ void cp_async_16(uint32_t smem, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem), "l"(src) : "memory");
}
// The same copy of only the first `bytes` (0..16) bytes at src, the rest of the 16 zero-filled
// (src's bytes past them are not read; at 0 src must still be a global address).
__device__ __forceinline__ void cp_async_16_zfill_bytes(uint32_t smem, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem), "l"(src), "r"(bytes)
                 : "memory");
}
// The 16-byte copy, or 16 zero bytes when !valid.
__device__ __forceinline__ void cp_async_16_zfill(uint32_t smem, const void *src, bool valid) {
    cp_async_16_zfill_bytes(smem, src, valid ? 16 : 0);
}
// Arrives on the mbarrier at bar (shared address) once every cp.async this thread issued before
// has landed, without adding an expected arrival (.noinc): a barrier fed this way counts one
// arrival per producing thread in its init count. The consumer reads the data after its wait;
// the tensor cores (wgmma) read it only after a fence.proxy.async in the consumer.
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Programmatic dependent launch: a kernel launched after this one with programmatic stream
// serialization may start once every CTA of this grid has called launch_dependents (or
// exited); it must call pdl_wait before reading what this grid writes.
__device__ __forceinline__ void pdl_launch_dependents() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
// Waits until the grids this one depends on have completed and their writes are visible.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
// Before pdl_wait, a value the earlier grid may still be writing: read at GPU scope (L2, never
// a non-coherent or L1 copy that a later read could be served from), old or new. A hint only.
__device__ __forceinline__ int load_relaxed(const int *p) {
    int v;
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

} // namespace talon::dev
