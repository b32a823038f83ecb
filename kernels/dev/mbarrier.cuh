// mbarrier: the shared-memory barrier that TMA and the pipelines complete on (PTX ISA
// "Parallel Synchronization and Communication Instructions: mbarrier").
// A barrier is one 8-byte-aligned uint64_t in shared memory. Each phase completes when its
// pending arrival count reaches zero AND its transaction count (bytes that async copies
// announced with expect_tx) reaches zero; waiters poll the parity (0/1) of the phase they wait on.
#pragma once
#include <cstdint>

namespace talon::dev {

// 32-bit shared::cta address of a shared-memory object (what every PTX operand below takes).
__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread initialises; `count` arrivals complete each phase.
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
                 : "memory");
}

// After initialising barriers that other threads, the TMA unit (async proxy) or other CTAs of
// the cluster will touch: makes the inits visible to them. Follow with __syncthreads() (or a
// cluster barrier when peers arrive remotely / multicast onto them).
__device__ __forceinline__ void mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Barrier memory may be reused for something else only after inval.
__device__ __forceinline__ void mbar_inval(uint64_t *bar) {
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Plain arrival (release semantics at CTA scope: our earlier writes/reads are ordered before).
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Arrive and announce `tx_bytes` of async-copy data the current phase must also wait for. The
// producer calls this once per stage, then issues the copies that carry complete_tx.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t tx_bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
                 "r"(tx_bytes)
                 : "memory");
}

// Announce bytes without arriving (when the arrival comes separately).
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t tx_bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)),
                 "r"(tx_bytes)
                 : "memory");
}

// One non-blocking probe: true once the phase with parity `phase` has completed.
__device__ __forceinline__ bool mbar_try_wait(uint64_t *bar, uint32_t phase) {
    uint32_t done;
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.b32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(phase)
        : "memory");
    return done != 0;
}

// Block until the phase with parity `phase` completes (acquire at CTA scope: data that the
// completing arrivals/copies wrote is visible afterwards). try_wait suspends the thread for a
// hardware-chosen time per probe, so the loop is not a hot spin.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t phase) {
    asm volatile(
        "{\n .reg .pred p;\n"
        "WAIT_%=:\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        " @!p bra WAIT_%=;\n}" ::"r"(smem_addr(bar)),
        "r"(phase)
        : "memory");
}

// Same, with acquire at cluster scope: for barriers that peer CTAs arrive on remotely.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t *bar, uint32_t phase) {
    asm volatile(
        "{\n .reg .pred p;\n"
        "WAIT_%=:\n"
        " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
        " @!p bra WAIT_%=;\n}" ::"r"(smem_addr(bar)),
        "r"(phase)
        : "memory");
}

// ---------------------------------------------------------------- cluster helpers
// Not volatile: a constant of the CTA, which the compiler may re-read instead of keeping a
// register (or a spill slot) for it.
__device__ __forceinline__ uint32_t cluster_ctarank() {
    uint32_t r;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ uint32_t cluster_nctarank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return r;
}

// Whole-cluster barrier (all threads of all CTAs). release/acquire order shared-memory writes
// and mbarrier inits across the cluster: use after init and before exit when peers write into
// our shared memory (multicast, remote arrive).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;" ::
                     : "memory");
}
// The two halves, split so that work fits between them: arrive when this CTA's shared memory
// may be read by its peers for the last time coming, wait before exiting (a CTA must not exit
// while a peer may still read its shared memory).
__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Address of the same shared-memory variable in CTA `cta` of the cluster (shared::cluster window).
__device__ __forceinline__ uint32_t map_to_cta(const void *p, uint32_t cta) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_addr(p)), "r"(cta));
    return r;
}

// Arrive on the barrier at the same offset in CTA `cta` of the cluster (release at cluster scope,
// so our earlier writes to that CTA's memory are visible to its waiters).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t cta) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(
                     map_to_cta(bar, cta))
                 : "memory");
}

// Read 4 floats (16-byte aligned) at the same shared-memory offset in CTA `cta` of the
// cluster (distributed shared memory). Order it after the peer's writes with a barrier the
// peer released at cluster scope (mbar_arrive_cluster, then mbar_wait_cluster here).
__device__ __forceinline__ float4 load_remote_f4(const void *p, uint32_t cta) {
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(map_to_cta(p, cta))
                 : "memory");
    return v;
}

// Arrive on the barrier at the same offset in CTA `cta`, with the default release at CTA
// scope: for "I am done reading that stage" signals (consumers freeing a stage that a peer's
// multicast refills) once the reads are complete (wgmmas waited for), where no data of ours
// has to become visible to the peer. Reads of the peer's memory that may still be in flight
// (ld.shared::cluster) need mbar_arrive_cluster, or the peer may overwrite what they read.
// Its cluster-scope release costs a MEMBAR.ALL.GPU per call, which halved a GEMM's throughput
// when each k-block's release paid it.
__device__ __forceinline__ void mbar_arrive_remote(uint64_t *bar, uint32_t cta) {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(map_to_cta(bar, cta))
                 : "memory");
}

} // namespace talon::dev
