// wgmma: warpgroup matrix multiply-accumulate (PTX ISA "Warpgroup Level Matrix Multiply-
// Accumulate Instructions": wgmma.mma_async, the shared-memory matrix descriptor, wgmma.fence,
// wgmma.commit_group, wgmma.wait_group). sm_90a only.
//
// A warpgroup = 4 consecutive warps starting at a warp index divisible by 4; all 128 threads
// execute every call below with the same operands (the .sync.aligned instructions).
//
// Sequence for one tile:
//     wgmma_fence();                         // accumulators / A registers written before here
//     for k: mma_bf16_ss<N>(d, da + k, db + k, k > 0 || acc);   // issue, asynchronous
//     wgmma_commit();                        // close the group
//     wgmma_wait<0>(); fence_operand(d);     // results in d, shared memory free to overwrite
// Accumulators use "+f" constraints so they stay in registers across the asynchronous window;
// touching them between issue and wait (or indexing them at run time) makes ptxas serialise the
// wgmmas (warnings C7508-C7510, C7517), so every loop over d must be fully unrolled.
//
// Accumulator layout (m64nN, f32, float d[N/2] per thread): thread t of the warpgroup, warp
// w = t / 32, lane l; for i in [0, N/2):
//     row = 16 * w + l / 4 + 8 * ((i / 2) % 2),  col = 8 * (i / 4) + 2 * (l % 4) + (i % 2).
// A-from-registers fragment (mma_*_rs, 16-bit types, 4 x b32 per thread, k16 step): the
// m16n8k16 A fragment of mma.sync for rows 16w..16w+15:
//     a[0] = {A[r][c], A[r][c+1]}, a[1] = {A[r+8][c], A[r+8][c+1]},
//     a[2] = {A[r][c+8], A[r][c+9]}, a[3] = {A[r+8][c+8], A[r+8][c+9]},
//     r = 16 * w + l / 4, c = 2 * (l % 4); the lower column in the low 16 bits.
//     Those registers must not be rewritten until the wgmma that reads them has been waited on.
//
// Shared-memory matrix descriptor (64 bits):
//     [13:0]  start address >> 4        [29:16] leading-dimension byte offset (LBO) >> 4
//     [45:32] stride-dimension byte offset (SBO) >> 4
//     [51:49] base offset (0 when the swizzle pattern's repeat is aligned, i.e. tile base
//             aligned to 8 rows x swizzle bytes: 1024 B for 128B)   [63:62] swizzle mode
// K-major tiles (each row = one M or N index, K contiguous) of 16-bit elements, as TMA writes
// them with the matching CU_TENSOR_MAP_SWIZZLE_* and box inner size = swizzle span:
//     SW128: rows of 128 B (64 bf16); 8-row atoms of 1024 B; the 16-byte chunk j of row r
//            sits at chunk j ^ (r % 8) (address bits [6:4] ^= bits [9:7]). SBO = 1024 (next
//            8 rows), LBO unused (the 32 B of K of one wgmma never leave a row). Base
//            1024-aligned.
//     SW64:  rows of 64 B (32 bf16); address bits [5:4] ^= bits [8:7]; SBO = 512; base
//            512-aligned.
//     SW32:  rows of 32 B (16 bf16); address bit [4] ^= bit [7]; SBO = 256; base 256-aligned.
//     NONE:  "interleaved" core matrices of 8 rows x 16 B stored as 128 contiguous bytes;
//            LBO = bytes between core matrices adjacent in K, SBO = bytes between core
//            matrices adjacent in M/N (8 rows apart). E.g. TMA boxes 16 bytes wide, box j (K
//            bytes 16j..16j+15 of all R rows) at j * R * 16: SBO = 128, LBO = R * 16, and a
//            k16 bf16 step adds 2 * R * 16. (Tested; the swapped reading faults.)
// In all swizzled modes the XOR is applied to absolute shared-memory address bits, so a K step
// inside a row is taken by adding its byte offset to the start address (desc + (bytes >> 4)):
// k16 of bf16 = 32 B, k32 of fp8 = 32 B. fp8 (e4m3/e5m2) operands must be K-major; their rows
// of 128 B hold 128 elements under SW128.
#pragma once
#include <cstdint>
#include "mbarrier.cuh"
#include "talon/kernels/common.def"

namespace talon::dev {

enum class Swizzle : uint32_t { None = 0, B128 = 1, B64 = 2, B32 = 3 };

__device__ __forceinline__ uint64_t make_smem_desc(const void *smem, uint32_t lbo_bytes,
                                                   uint32_t sbo_bytes, Swizzle sw) {
    const uint64_t addr = smem_addr(smem);
    return ((addr & 0x3FFFF) >> 4) | (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) |
           (uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32) | (uint64_t(sw) << 62);
}

// K-major tile whose rows are exactly one swizzle span long (the TMA box of the same swizzle
// with inner box bytes = span), rows packed: SBO = 8 rows.
template <Swizzle SW> __device__ __forceinline__ uint64_t make_desc_kmajor(const void *smem) {
    static_assert(SW != Swizzle::None, "use make_smem_desc with explicit LBO/SBO for no swizzle");
    constexpr uint32_t span = SW == Swizzle::B128 ? 128 : SW == Swizzle::B64 ? 64 : 32;
    return make_smem_desc(smem, 16, 8 * span, SW);
}

// MN-major tile of 16-bit elements under the 128-byte swizzle (MN contiguous, e.g. v [keys, d]
// as the B of P v, transposed with TB = 1): each K index is a row of 128 B holding 64 MN
// elements, 8 rows form a 1024-byte atom (SBO = 1024, next 8 K indices); a wider MN side is
// more such 64-column tiles `mn_chunk_bytes` apart (LBO; the next TMA box). A k16 step adds
// 16 rows = 2048 B to the start address. Base 1024-aligned.
__device__ __forceinline__ uint64_t make_desc_mn_major_b128(const void *smem, uint32_t mn_chunk_bytes) {
    return make_smem_desc(smem, mn_chunk_bytes, 1024, Swizzle::B128);
}

// Move the start address by `bytes` (multiple of 16). Stays inside the 14-bit field for any
// shared-memory address (< 256 KB), so only the low word changes: a 64-bit add made the
// compiler carry into the high word and move both into uniform registers for every wgmma.
__device__ __forceinline__ uint64_t desc_add(uint64_t desc, uint32_t bytes) {
    return (desc & 0xffffffff00000000ull) | uint32_t(uint32_t(desc) + (bytes >> 4));
}

// Make prior register / shared-memory writes visible to the following wgmmas (required before
// the first wgmma of a batch and whenever accumulators or A registers were touched in between).
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void warpgroup_arrive() { wgmma_fence(); }

__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// Wait until at most N committed groups are pending.
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Compiler-only fence: keeps reads/writes of the registers from moving across an adjacent
// wgmma_wait / wgmma_fence (the asm above has no data dependence on them).
template <int K> __device__ __forceinline__ void fence_operand(float (&d)[K]) {
#pragma unroll
    for (int i = 0; i < K; i++) asm volatile("" : "+f"(d[i])::"memory");
}
template <int K> __device__ __forceinline__ void fence_operand(uint32_t (&r)[K]) {
#pragma unroll
    for (int i = 0; i < K; i++) asm volatile("" : "+r"(r[i])::"memory");
}

// Operand lists for K accumulator registers (mechanical; one per accumulator count).
#define TALON_DEV_DREGS_8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define TALON_DEV_DOPS_8(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define TALON_DEV_DREGS_16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define TALON_DEV_DOPS_16(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define TALON_DEV_DREGS_32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TALON_DEV_DOPS_32(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TALON_DEV_DREGS_40 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}"
#define TALON_DEV_DOPS_40(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define TALON_DEV_DREGS_48 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define TALON_DEV_DOPS_48(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define TALON_DEV_DREGS_64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define TALON_DEV_DOPS_64(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define TALON_DEV_DREGS_96 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define TALON_DEV_DOPS_96(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define TALON_DEV_DREGS_128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define TALON_DEV_DOPS_128(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// D[64 x N] (+)= A[64 x 16] * B[N x 16]^T, bf16, both operands from shared memory.
// TA/TB: 1 = that operand is MN-major in shared memory (0 = K-major).
template <int N, int TA = 0, int TB = 0>
__device__ __forceinline__ void mma_bf16_ss(float (&d)[N / 2], uint64_t a, uint64_t b, bool accumulate) {
    static_assert(N == 16 || N == 32 || N == 64 || N == 80 || N == 96 || N == 128 || N == 192 || N == 256, "N not provided");
    const uint32_t s = accumulate;
    if constexpr (N == 16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 " TALON_DEV_DREGS_8 ", %8, %9, p, 1, 1, %11, %12;\n}"
                     : TALON_DEV_DOPS_8(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 32)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " TALON_DEV_DREGS_16 ", %16, %17, p, 1, 1, %19, %20;\n}"
                     : TALON_DEV_DOPS_16(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " TALON_DEV_DREGS_32 ", %32, %33, p, 1, 1, %35, %36;\n}"
                     : TALON_DEV_DOPS_32(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 80)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 " TALON_DEV_DREGS_40 ", %40, %41, p, 1, 1, %43, %44;\n}"
                     : TALON_DEV_DOPS_40(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 96)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 " TALON_DEV_DREGS_48 ", %48, %49, p, 1, 1, %51, %52;\n}"
                     : TALON_DEV_DOPS_48(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " TALON_DEV_DREGS_64 ", %64, %65, p, 1, 1, %67, %68;\n}"
                     : TALON_DEV_DOPS_64(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 192)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 " TALON_DEV_DREGS_96 ", %96, %97, p, 1, 1, %99, %100;\n}"
                     : TALON_DEV_DOPS_96(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 256)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " TALON_DEV_DREGS_128 ", %128, %129, p, 1, 1, %131, %132;\n}"
                     : TALON_DEV_DOPS_128(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
}

// D[64 x N] (+)= A[64 x 16] * B[N x 16]^T, f16, both operands from shared memory.
// TA/TB: 1 = that operand is MN-major in shared memory (0 = K-major).
template <int N, int TA = 0, int TB = 0>
__device__ __forceinline__ void mma_f16_ss(float (&d)[N / 2], uint64_t a, uint64_t b, bool accumulate) {
    static_assert(N == 16 || N == 32 || N == 64 || N == 80 || N == 96 || N == 128 || N == 192 || N == 256, "N not provided");
    const uint32_t s = accumulate;
    if constexpr (N == 16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 " TALON_DEV_DREGS_8 ", %8, %9, p, 1, 1, %11, %12;\n}"
                     : TALON_DEV_DOPS_8(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 32)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 " TALON_DEV_DREGS_16 ", %16, %17, p, 1, 1, %19, %20;\n}"
                     : TALON_DEV_DOPS_16(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " TALON_DEV_DREGS_32 ", %32, %33, p, 1, 1, %35, %36;\n}"
                     : TALON_DEV_DOPS_32(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 80)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16 " TALON_DEV_DREGS_40 ", %40, %41, p, 1, 1, %43, %44;\n}"
                     : TALON_DEV_DOPS_40(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 96)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 " TALON_DEV_DREGS_48 ", %48, %49, p, 1, 1, %51, %52;\n}"
                     : TALON_DEV_DOPS_48(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " TALON_DEV_DREGS_64 ", %64, %65, p, 1, 1, %67, %68;\n}"
                     : TALON_DEV_DOPS_64(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 192)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 " TALON_DEV_DREGS_96 ", %96, %97, p, 1, 1, %99, %100;\n}"
                     : TALON_DEV_DOPS_96(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
    else if constexpr (N == 256)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " TALON_DEV_DREGS_128 ", %128, %129, p, 1, 1, %131, %132;\n}"
                     : TALON_DEV_DOPS_128(d) : "l"(a), "l"(b), "r"(s), "n"(TA), "n"(TB));
}

// D[64 x N] (+)= A[64 x 16] * B[N x 16]^T, bf16, A from registers (fragment layout in
// the file comment), B from shared memory. TB: 1 = B is MN-major in shared memory.
template <int N, int TB = 0>
__device__ __forceinline__ void mma_bf16_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, bool accumulate) {
    static_assert(N == 16 || N == 32 || N == 64 || N == 96 || N == 128 || N == 192 || N == 256, "N not provided");
    const uint32_t s = accumulate;
    if constexpr (N == 16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 " TALON_DEV_DREGS_8 ", {%8, %9, %10, %11}, %12, p, 1, 1, %14;\n}"
                     : TALON_DEV_DOPS_8(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 32)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " TALON_DEV_DREGS_16 ", {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}"
                     : TALON_DEV_DOPS_16(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " TALON_DEV_DREGS_32 ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}"
                     : TALON_DEV_DOPS_32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 96)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 " TALON_DEV_DREGS_48 ", {%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}"
                     : TALON_DEV_DOPS_48(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " TALON_DEV_DREGS_64 ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}"
                     : TALON_DEV_DOPS_64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 192)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 " TALON_DEV_DREGS_96 ", {%96, %97, %98, %99}, %100, p, 1, 1, %102;\n}"
                     : TALON_DEV_DOPS_96(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 256)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " TALON_DEV_DREGS_128 ", {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}"
                     : TALON_DEV_DOPS_128(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
}

// D[64 x N] (+)= A[64 x 16] * B[N x 16]^T, f16, A from registers (fragment layout in
// the file comment), B from shared memory. TB: 1 = B is MN-major in shared memory.
template <int N, int TB = 0>
__device__ __forceinline__ void mma_f16_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, bool accumulate) {
    static_assert(N == 16 || N == 32 || N == 64 || N == 96 || N == 128 || N == 192 || N == 256, "N not provided");
    const uint32_t s = accumulate;
    if constexpr (N == 16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 " TALON_DEV_DREGS_8 ", {%8, %9, %10, %11}, %12, p, 1, 1, %14;\n}"
                     : TALON_DEV_DOPS_8(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 32)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 " TALON_DEV_DREGS_16 ", {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}"
                     : TALON_DEV_DOPS_16(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " TALON_DEV_DREGS_32 ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}"
                     : TALON_DEV_DOPS_32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 96)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 " TALON_DEV_DREGS_48 ", {%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}"
                     : TALON_DEV_DOPS_48(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " TALON_DEV_DREGS_64 ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}"
                     : TALON_DEV_DOPS_64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 192)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 " TALON_DEV_DREGS_96 ", {%96, %97, %98, %99}, %100, p, 1, 1, %102;\n}"
                     : TALON_DEV_DOPS_96(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
    else if constexpr (N == 256)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " TALON_DEV_DREGS_128 ", {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}"
                     : TALON_DEV_DOPS_128(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s), "n"(TB));
}

// D[64 x N] (+)= A[64 x 32] * B[N x 32]^T, e4m3, both operands from shared memory.
template <int N>
__device__ __forceinline__ void mma_e4m3_ss(float (&d)[N / 2], uint64_t a, uint64_t b, bool accumulate) {
    static_assert(N == 16 || N == 32 || N == 64 || N == 128 || N == 192 || N == 256, "N not provided");
    const uint32_t s = accumulate;
    if constexpr (N == 16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 " TALON_DEV_DREGS_8 ", %8, %9, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_8(d) : "l"(a), "l"(b), "r"(s));
    else if constexpr (N == 32)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 " TALON_DEV_DREGS_16 ", %16, %17, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_16(d) : "l"(a), "l"(b), "r"(s));
    else if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " TALON_DEV_DREGS_32 ", %32, %33, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_32(d) : "l"(a), "l"(b), "r"(s));
    else if constexpr (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " TALON_DEV_DREGS_64 ", %64, %65, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_64(d) : "l"(a), "l"(b), "r"(s));
    else if constexpr (N == 192)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 " TALON_DEV_DREGS_96 ", %96, %97, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_96(d) : "l"(a), "l"(b), "r"(s));
    else if constexpr (N == 256)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " TALON_DEV_DREGS_128 ", %128, %129, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_128(d) : "l"(a), "l"(b), "r"(s));
}

// D[64 x N] (+)= A[64 x 32] * B[N x 32]^T, e4m3, A from registers, B K-major in shared memory
// (fp8 has no transposed B). The A fragment is the 16-bit one with bytes for elements: a[0] =
// A[r][c..c+3], a[1] = A[r+8][c..c+3], a[2] = A[r][c+16..c+19], a[3] = A[r+8][c+16..c+19],
// r = 16 * w + l / 4, c = 4 * (l % 4), the lowest column in the low byte.
template <int N>
__device__ __forceinline__ void mma_e4m3_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, bool accumulate) {
    static_assert(N == 64 || N == 128 || N == 256, "N not provided");
    const uint32_t s = accumulate;
    if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " TALON_DEV_DREGS_32 ", {%32, %33, %34, %35}, %36, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_32(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s));
    else if constexpr (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " TALON_DEV_DREGS_64 ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s));
    else if constexpr (N == 256)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " TALON_DEV_DREGS_128 ", {%128, %129, %130, %131}, %132, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_128(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(s));
}

// D[64 x N] (+)= A[64 x 32] * B[N x 32]^T, e5m2, both operands from shared memory.
template <int N>
__device__ __forceinline__ void mma_e5m2_ss(float (&d)[N / 2], uint64_t a, uint64_t b, bool accumulate) {
    static_assert(N == 32 || N == 64 || N == 128 || N == 192 || N == 256, "N not provided");
    const uint32_t s = accumulate;
    if constexpr (N == 32)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k32.f32.e5m2.e5m2 " TALON_DEV_DREGS_16 ", %16, %17, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_16(d) : "l"(a), "l"(b), "r"(s));
    else if constexpr (N == 64)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e5m2 " TALON_DEV_DREGS_32 ", %32, %33, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_32(d) : "l"(a), "l"(b), "r"(s));
    else if constexpr (N == 128)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e5m2 " TALON_DEV_DREGS_64 ", %64, %65, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_64(d) : "l"(a), "l"(b), "r"(s));
    else if constexpr (N == 192)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k32.f32.e5m2.e5m2 " TALON_DEV_DREGS_96 ", %96, %97, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_96(d) : "l"(a), "l"(b), "r"(s));
    else if constexpr (N == 256)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k32.f32.e5m2.e5m2 " TALON_DEV_DREGS_128 ", %128, %129, p, 1, 1;\n}"
                     : TALON_DEV_DOPS_128(d) : "l"(a), "l"(b), "r"(s));
}

// mma_bf16_ss, mma_f16_ss or mma_e4m3_ss by a table's element type DT (TALON__BF16, TALON__F16,
// TALON__FP8_E4M3), both operands K-major.
template <int DT, int N>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, bool accumulate) {
    static_assert(DT == TALON__BF16 || DT == TALON__F16 || DT == TALON__FP8_E4M3, "no wgmma for DT");
    if constexpr (DT == TALON__BF16) mma_bf16_ss<N>(d, a, b, accumulate);
    else if constexpr (DT == TALON__F16) mma_f16_ss<N>(d, a, b, accumulate);
    else mma_e4m3_ss<N>(d, a, b, accumulate);
}

} // namespace talon::dev
