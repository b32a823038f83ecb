// TMA (the bulk tensor copy engine) and plain bulk copies (PTX ISA "Data Movement: Tensor
// Copy Instructions": cp.async.bulk.tensor, cp.async.bulk, cp.async.bulk.prefetch, and
// "Memory Consistency Model: proxies" for fence.proxy.async).
//
// Tensor maps are built on the host (cuTensorMapEncodeTiled, see include/talon/impl/tma.h) and
// passed to kernels as `const __grid_constant__ CUtensorMap` parameters: the copy instructions
// read the 128-byte map from the parameter space through its generic address, so it must not
// be copied into a local. Coordinates are signed element indices, innermost dimension first
// (c0 = column of a row-major matrix); a box partly or wholly outside the tensor is filled
// with zeros on load and clipped on store. Coordinates may be negative.
// Rules seen on H200 (driver 580), checked by tests/dev/test_gpu_dev.c:
//  - c0 * element size must be a multiple of 16 bytes (loads and stores, swizzled or not);
//    otherwise the copy faults with "illegal instruction". Outer load coordinates are free.
//  - store coordinates must be >= 0 (a negative one faults likewise); a stored box may run
//    past the far end of the tensor. Loads accept negative coordinates (zero fill).
//  - stores clip outer dimensions exactly but the inner one at 16-byte granularity: when the
//    tensor's inner extent in bytes is not a multiple of 16, the rest of its last 16-byte chunk
//    (row padding, or a neighbour's columns in a column sub-view) is written too. Make views
//    that are stored through TMA a multiple of 16 bytes wide. Loads zero-fill exactly.
//
// Loads complete on an mbarrier (complete_tx::bytes): arm it with mbar_arrive_expect_tx(bar,
// total box bytes, zero-filled ones included) before or after issuing, then mbar_wait.
// Shared-memory destinations: 128-byte aligned, 1024 when the map swizzles 128B.
#pragma once
#include <cuda.h>
#include <cstdint>
#include "cache.cuh"
#include "mbarrier.cuh"

namespace talon::dev {

__device__ __forceinline__ uint64_t tmap_ptr(const CUtensorMap *map) {
    return reinterpret_cast<uint64_t>(map);
}

// Pull the descriptor into the TMA unit's cache ahead of the first copy (one thread, at start).
__device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap *map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(tmap_ptr(map)) : "memory");
}

// Ordinary shared-memory writes (generic proxy) -> later reads by TMA/wgmma (async proxy):
// each writing thread fences, then a barrier, then the copy is issued. Also needed the other
// way when shared memory that TMA wrote is rewritten by ordinary stores before another copy.
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---------------------------------------------------------------- global -> shared, tensor
// The destination is shared::cluster; our own CTA's shared::cta address is valid there.
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                            int32_t c0, int32_t c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_addr(dst)),
                 "l"(tmap_ptr(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
                 : "memory");
}

__device__ __forceinline__ void tma_load_3d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                            int32_t c0, int32_t c1, int32_t c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_addr(dst)),
                 "l"(tmap_ptr(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

__device__ __forceinline__ void tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                            int32_t c0, int32_t c1, int32_t c2, int32_t c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(smem_addr(dst)),
                 "l"(tmap_ptr(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}

__device__ __forceinline__ void tma_load_5d(void *dst, const CUtensorMap *map, uint64_t *bar,
                                            int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                            int32_t c4) {
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];" ::"r"(smem_addr(dst)),
                 "l"(tmap_ptr(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                 "r"(c4)
                 : "memory");
}

// With an L2 eviction policy from l2_policy_evict_first/last.
__device__ __forceinline__ void tma_load_2d_hint(void *dst, const CUtensorMap *map,
                                                 uint64_t *bar, int32_t c0, int32_t c1,
                                                 uint64_t policy) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_addr(dst)),
                 "l"(tmap_ptr(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "l"(policy)
                 : "memory");
}

__device__ __forceinline__ void tma_load_3d_hint(void *dst, const CUtensorMap *map,
                                                 uint64_t *bar, int32_t c0, int32_t c1,
                                                 int32_t c2, uint64_t policy) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(smem_addr(dst)),
                 "l"(tmap_ptr(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2),
                 "l"(policy)
                 : "memory");
}

// Multicast: one global read lands at the same shared offset (dst, and bar) in every CTA of
// the cluster whose bit is set in cta_mask, and completes bytes on each of their barriers.
// Each receiving CTA's barrier must expect the bytes it receives. Barriers must be initialised
// in all receivers (cluster_sync after init) before any CTA issues one.
__device__ __forceinline__ void tma_load_2d_multicast(void *dst, const CUtensorMap *map,
                                                      uint64_t *bar, int32_t c0, int32_t c1,
                                                      uint16_t cta_mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_addr(dst)),
                 "l"(tmap_ptr(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
                 : "memory");
}

__device__ __forceinline__ void tma_load_3d_multicast(void *dst, const CUtensorMap *map,
                                                      uint64_t *bar, int32_t c0, int32_t c1,
                                                      int32_t c2, uint16_t cta_mask) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(smem_addr(dst)),
                 "l"(tmap_ptr(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2),
                 "h"(cta_mask)
                 : "memory");
}

// Warm L2 with a box of a 3D map (no shared memory, no barrier). L2 is where the SMs' global
// accesses meet, so a prefetch never leaves a copy that a later write could make stale.
__device__ __forceinline__ void tma_prefetch_3d(const CUtensorMap *map, int32_t c0, int32_t c1,
                                                int32_t c2) {
    asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global [%0, {%1, %2, %3}];" ::"l"(tmap_ptr(map)),
                 "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

// ---------------------------------------------------------------- shared -> global, tensor
// Source written by ordinary stores needs fence_proxy_async() in each writer + a barrier first.
// Completion is tracked per thread in bulk groups: commit, then wait.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, const void *src, int32_t c0,
                                             int32_t c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                     tmap_ptr(map)),
                 "r"(smem_addr(src)), "r"(c0), "r"(c1)
                 : "memory");
}

__device__ __forceinline__ void tma_store_3d(const CUtensorMap *map, const void *src, int32_t c0,
                                             int32_t c1, int32_t c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
            tmap_ptr(map)),
        "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

__device__ __forceinline__ void bulk_commit_group() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// At most N of this thread's committed groups still read shared memory: the source buffers of
// the others may be overwritten (the global writes may still be in flight).
template <int N> __device__ __forceinline__ void bulk_wait_group_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// At most N groups still pending at all (writes done and visible): use before kernel exit when
// a dependent launch or this kernel reads the stored data, or before reading it back.
template <int N> __device__ __forceinline__ void bulk_wait_group() {
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// ---------------------------------------------------------------- plain bulk copies
// Contiguous bytes global -> own shared memory, completing on bar. bytes a multiple of 16,
// both addresses 16-byte aligned.
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes,
                                          uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}

// Contiguous bytes shared -> global, tracked by bulk groups like tma_store_2d.
__device__ __forceinline__ void bulk_store(void *dst, const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                 "r"(smem_addr(src)), "r"(bytes)
                 : "memory");
}

// Warm L2 with contiguous bytes (multiple of 16, 16-byte aligned); nothing to wait for.
__device__ __forceinline__ void bulk_prefetch_l2(const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

} // namespace talon::dev
