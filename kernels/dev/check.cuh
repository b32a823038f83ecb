// Checked mode (include/talon/kernels/check.def): the record of the first bad device-side
// index. A kernel tests `c.record` (0 on an unchecked ctx: nothing else runs) and its bound,
// and calls check_fail on a violation; it then skips or masks the access as its op documents.
#pragma once
#include <cstdint>
#include "talon/kernels/check.def"

namespace talon::dev {

// Whether checked mode is on for this launch (a kernel parameter: uniform, free to test).
__device__ __forceinline__ bool checking(const talon__check &c) { return c.record != 0; }

// Records (site, index, value, bound) unless a violation is recorded already: the thread whose
// atomicAdd finds claim 0 writes the fields and publishes them (done) after a fence. The plain
// read first keeps a flood of bad indices (every thread of a kernel) from queueing on the
// atomic once one is in. (An add, not a compare-and-swap: one register fewer, which kept the
// 40-register producer warps of prefill from spilling.)
__device__ __forceinline__ void check_fail(const talon__check &c, int site, int64_t index,
                                           int64_t value, int64_t bound) {
    auto *r = reinterpret_cast<talon__check_record *>(c.record);
    if (*reinterpret_cast<volatile uint32_t *>(&r->claim) != 0u) return;
    if (atomicAdd(&r->claim, 1u) != 0u) return;
    r->kernel = c.kernel;
    r->site = site;
    r->index = index;
    r->value = value;
    r->bound = bound;
    __threadfence();
    *reinterpret_cast<volatile uint32_t *>(&r->done) = 1u;
}

} // namespace talon::dev
