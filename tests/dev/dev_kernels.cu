// Test kernels for the talon::dev Hopper primitives (kernels/dev/*.cuh), driven by
// tests/dev/test_gpu_dev.c. Each kernel is small and checks one composition; none is tuned.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include "dev/async.cuh"
#include "dev/fp8.cuh"
#include "dev/mbarrier.cuh"
#include "dev/pipeline.cuh"
#include "dev/scheduler.cuh"
#include "dev/tma.cuh"
#include "dev/warpgroup.cuh"
#include "dev/wgmma.cuh"

using namespace talon::dev;

// Dynamic shared memory rounded up to 1024 B (the 128B swizzle atom); launches add 1024 slack.
__device__ __forceinline__ uint8_t *smem_1024() {
    extern __shared__ __align__(16) uint8_t dyn_smem[];
    return reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(dyn_smem) + 1023) &
                                       ~uintptr_t(1023));
}

// ------------------------------------------------------------------ (1) TMA load of boxes
// CTA (x, y, z) loads the box_rows x box_cols box at (row, col) = (y * box_rows + off_r,
// x * box_cols + off_c) of matrix z (3D map when gridDim.z > 1) and writes it, by plain stores,
// into a mosaic `out` of gridDim.y * box_rows rows x gridDim.x * box_cols columns per matrix.
// swz128: the map swizzles 128B (box_cols * 2 == 128) and the copy-out undoes the swizzle.
extern "C" __global__ void __launch_bounds__(128)
dev_tma_load_box(const __grid_constant__ CUtensorMap map, uint16_t *out, int box_rows,
                 int box_cols, int off_r, int off_c, int swz128, int hint) {
    __shared__ uint64_t bar;
    uint8_t *tile = smem_1024();
    const int r0 = blockIdx.y * box_rows + off_r, c0 = blockIdx.x * box_cols + off_c;
    if (threadIdx.x == 0) {
        tma_prefetch_desc(&map);
        mbar_init(&bar, 1);
        mbar_fence_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(&bar, uint32_t(box_rows * box_cols * 2));
        if (gridDim.z > 1) {
            tma_prefetch_3d(&map, c0, r0, blockIdx.z); // no effect to check but that it is legal
            tma_load_3d(tile, &map, &bar, c0, r0, blockIdx.z);
        } else if (hint == 1)
            tma_load_2d_hint(tile, &map, &bar, c0, r0, l2_policy_evict_first());
        else if (hint == 2)
            tma_load_2d_hint(tile, &map, &bar, c0, r0, l2_policy_evict_last());
        else
            tma_load_2d(tile, &map, &bar, c0, r0);
    }
    mbar_wait(&bar, 0);
    const int out_cols = gridDim.x * box_cols;
    uint16_t *o = out + (size_t(blockIdx.z) * gridDim.y * box_rows + blockIdx.y * box_rows) * out_cols +
                  blockIdx.x * box_cols;
    for (int i = threadIdx.x; i < box_rows * box_cols; i += blockDim.x) {
        const int r = i / box_cols, c = i % box_cols;
        uint32_t off = uint32_t(r * box_cols + c) * 2;
        if (swz128) off ^= ((off >> 7) & 7) << 4;
        o[size_t(r) * out_cols + c] = *reinterpret_cast<const uint16_t *>(tile + off);
    }
}

// ------------------------------------------------------------------ (2) TMA store
// CTA (x, y) fills a box from src (same shape and pitch as the map's matrix; 0xBEEF where the
// box is outside, which the store must clip) and stores it at (y * box_rows + off_r,
// x * box_cols + off_c).
extern "C" __global__ void __launch_bounds__(128)
dev_tma_store_box(const __grid_constant__ CUtensorMap map, const uint16_t *src, int rows,
                  int cols, int ld, int box_rows, int box_cols, int off_r, int off_c) {
    uint16_t *tile = reinterpret_cast<uint16_t *>(smem_1024());
    const int r0 = blockIdx.y * box_rows + off_r, c0 = blockIdx.x * box_cols + off_c;
    for (int i = threadIdx.x; i < box_rows * box_cols; i += blockDim.x) {
        const int r = r0 + i / box_cols, c = c0 + i % box_cols;
        tile[i] = (r >= 0 && r < rows && c >= 0 && c < cols) ? src[size_t(r) * ld + c] : 0xBEEF;
    }
    fence_proxy_async(); // generic-proxy writes -> TMA reads
    __syncthreads();
    if (threadIdx.x == 0) {
        tma_store_2d(&map, tile, c0, r0);
        bulk_commit_group();
        bulk_wait_group_read<0>();
        bulk_wait_group<0>();
    }
}

// ------------------------------------------------------------------ (2b) 1D bulk copies
// CTA b moves `chunk` bytes at b * chunk: L2 prefetch, bulk load to shared memory, bulk store.
extern "C" __global__ void __launch_bounds__(32)
dev_bulk_copy(const uint8_t *src, uint8_t *dst, uint32_t chunk) {
    __shared__ uint64_t bar;
    uint8_t *buf = smem_1024();
    const size_t base = size_t(blockIdx.x) * chunk;
    if (elect_one()) {
        bulk_prefetch_l2(src + base, chunk);
        mbar_init(&bar, 1);
        mbar_fence_init();
    }
    __syncwarp();
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(&bar, chunk);
        bulk_load(buf, src + base, chunk, &bar);
    }
    mbar_wait(&bar, 0);
    if (threadIdx.x == 0) {
        bulk_store(dst + base, buf, chunk);
        bulk_commit_group();
        bulk_wait_group<0>();
        mbar_inval(&bar);
    }
}

// ------------------------------------------------------------------ (2c) cp.async into an mbarrier
// 128 threads copy 16-byte piece i = t * pieces + e of src into shared piece i: its first
// bytes[i] bytes (0..16), zeros after them (cp_async_16_zfill where bytes[i] is 0 or 16,
// cp_async_16_zfill_bytes otherwise), and arrive on a barrier counting 128 arrivals
// (cp_async_mbar_arrive_noinc); after the wait each thread writes out pieces that other
// threads copied (out[i] = shared piece (i + 37 pieces) mod total).
extern "C" __global__ void __launch_bounds__(128)
dev_cp_async_mbar(const uint4 *src, const uint32_t *bytes, uint4 *out, int pieces) {
    __shared__ uint64_t bar;
    uint4 *buf = reinterpret_cast<uint4 *>(smem_1024());
    const int total = 128 * pieces;
    if (threadIdx.x == 0) {
        mbar_init(&bar, 128);
        mbar_fence_init();
    }
    __syncthreads();
    for (int e = 0; e < pieces; e++) {
        const int i = int(threadIdx.x) * pieces + e;
        const int n = int(bytes[i]);
        if (n == 0 || n == 16) cp_async_16_zfill(smem_addr(buf + i), src + i, n == 16);
        else cp_async_16_zfill_bytes(smem_addr(buf + i), src + i, n);
    }
    cp_async_mbar_arrive_noinc(smem_addr(&bar));
    mbar_wait(&bar, 0);
    for (int e = 0; e < pieces; e++) {
        const int i = int(threadIdx.x) * pieces + e;
        out[i] = buf[(i + 37 * pieces) % total];
    }
}

// ------------------------------------------------------------------ (3) multicast in a cluster of 2
// Cluster q covers rows [q * 2 * half_rows, +2 * half_rows) x columns [y * box_cols, +box_cols).
// CTA rank r loads the half r (map box = half_rows x box_cols) and multicasts it to both CTAs;
// each CTA then copies the whole tile out to out[(2q + r) * tile elements]. Afterwards both CTAs
// arrive remotely on a barrier of rank 0, which records the completed count in flags[q].
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128)
dev_tma_multicast(const __grid_constant__ CUtensorMap map, uint16_t *out, int half_rows,
                  int box_cols, uint32_t *flags) {
    __shared__ uint64_t bar, done;
    uint8_t *tile = smem_1024();
    const uint32_t rank = cluster_ctarank();
    const int q = blockIdx.x / 2;
    const uint32_t half_bytes = uint32_t(half_rows * box_cols * 2);
    if (threadIdx.x == 0) {
        mbar_init(&bar, 1);
        mbar_init(&done, 2);
        mbar_fence_init();
    }
    cluster_sync(); // peers' barriers exist before anyone multicasts onto them
    if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(&bar, 2 * half_bytes); // both halves land here
        tma_load_2d_multicast(tile + rank * half_bytes, &map, &bar, blockIdx.y * box_cols,
                              q * 2 * half_rows + int(rank) * half_rows, 0x3);
    }
    mbar_wait(&bar, 0);
    const int n = 2 * half_rows * box_cols;
    uint16_t *o = out + (size_t(blockIdx.y) * gridDim.x + blockIdx.x) * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = reinterpret_cast<const uint16_t *>(tile)[i];
    __syncthreads();
    if (threadIdx.x == 0) {
        mbar_arrive_cluster(&done, 0);
        if (rank == 0) {
            mbar_wait_cluster(&done, 0);
            flags[blockIdx.y * (gridDim.x / 2) + q] = 2;
        }
    }
    cluster_sync(); // nobody exits while a peer may still touch its shared memory
}

// ------------------------------------------------------------------ (4) one wgmma tile
// C[64 x N] (fp32, row-major) = A[64 x K] * B[N x K]^T; A, B K-major, loaded by TMA one K-slab
// at a time. KIND 0 bf16 SS, 1 f16 SS, 2 bf16 RS (A fragments from global into registers),
// 3 e4m3 SS, 4 e4m3 RS. SW picks the shared-memory layout (and the maps' swizzle): with a swizzle the slab
// is one box whose rows are the swizzle span (128B: 64 x 16-bit or 128 x fp8; 64B: 32; 32B: 16
// elements); with None the 128-byte slab is loaded as 8 boxes 16 bytes wide, box j at j * rows *
// 16 bytes, which is the no-swizzle core-matrix layout (SBO = 128, LBO = rows * 16). K is a
// multiple of the slab.
// The A-from-registers fragments (kernels/dev/wgmma.cuh) of STEPS k-steps of 32 bytes (k16 of
// bf16, k32 of e4m3: the e4m3 fragment is the 16-bit one read as byte pairs) from byte column c0
// of a row-major [64 rows of row_bytes] matrix in global memory, for the calling thread of the
// warpgroup.
template <int STEPS>
__device__ __forceinline__ void load_a_fragments(uint32_t (&af)[STEPS][4], const void *A, int row_bytes, int c0) {
    const uint8_t *a = static_cast<const uint8_t *>(A);
    const int r = 16 * (threadIdx.x / 32) + threadIdx.x % 32 / 4;
#pragma unroll
    for (int k = 0; k < STEPS; k++) {
        const int c = c0 + 32 * k + 4 * (threadIdx.x % 4);
        af[k][0] = *reinterpret_cast<const uint32_t *>(a + size_t(r) * row_bytes + c);
        af[k][1] = *reinterpret_cast<const uint32_t *>(a + size_t(r + 8) * row_bytes + c);
        af[k][2] = *reinterpret_cast<const uint32_t *>(a + size_t(r) * row_bytes + c + 16);
        af[k][3] = *reinterpret_cast<const uint32_t *>(a + size_t(r + 8) * row_bytes + c + 16);
    }
}

template <int KIND, int N, Swizzle SW, bool SWAP_LBO_SBO = false>
__device__ __forceinline__ void wgmma_tile(const CUtensorMap *ma, const CUtensorMap *mb, float *C,
                                           int K, const uint16_t *A) {
    constexpr int SPAN = SW == Swizzle::B64 ? 64 : SW == Swizzle::B32 ? 32 : 128; // bytes per row
    constexpr bool RS = KIND == 2 || KIND == 4, FP8 = KIND >= 3;
    constexpr int BK = FP8 ? SPAN : SPAN / 2;                                    // elements
    constexpr int STEPS = SPAN / 32;                                             // 32 B of K each
    constexpr uint32_t A_BYTES = 64 * SPAN, B_BYTES = N * SPAN;
    __shared__ uint64_t bar;
    uint8_t *sA = smem_1024();
    uint8_t *sB = sA + A_BYTES;
    const int t = threadIdx.x, w = t / 32, l = t % 32;
    if (t == 0) {
        tma_prefetch_desc(ma);
        tma_prefetch_desc(mb);
        mbar_init(&bar, 1);
        mbar_fence_init();
    }
    __syncthreads();
    float acc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) acc[i] = 12345.0f; // overwritten by the first scale-d = 0
    uint64_t da, db;
    if constexpr (SW == Swizzle::None && SWAP_LBO_SBO) { // probe: the other reading of the ISA
        da = make_smem_desc(sA, 128, 64 * 16, Swizzle::None);
        db = make_smem_desc(sB, 128, N * 16, Swizzle::None);
    } else if constexpr (SW == Swizzle::None) {
        da = make_smem_desc(sA, 64 * 16, 128, Swizzle::None);
        db = make_smem_desc(sB, N * 16, 128, Swizzle::None);
    } else {
        da = make_desc_kmajor<SW>(sA);
        db = make_desc_kmajor<SW>(sB);
    }
    // K step of 32 bytes: inside the row for swizzled layouts, two 16-byte core-matrix columns
    // for None.
    constexpr uint32_t A_STEP = SW == Swizzle::None ? 2 * 64 * 16 : 32;
    constexpr uint32_t B_STEP = SW == Swizzle::None ? 2 * N * 16 : 32;
    const int nk = K / BK;
    for (int kb = 0; kb < nk; kb++) {
        if (t == 0) {
            mbar_arrive_expect_tx(&bar, (RS ? 0 : A_BYTES) + B_BYTES);
            if constexpr (SW == Swizzle::None) {
                constexpr int CHUNK = FP8 ? 16 : 8; // elements per 16 bytes
#pragma unroll
                for (int j = 0; j < SPAN / 16; j++) {
                    if (!RS) tma_load_2d(sA + j * 64 * 16, ma, &bar, kb * BK + j * CHUNK, 0);
                    tma_load_2d(sB + j * N * 16, mb, &bar, kb * BK + j * CHUNK, 0);
                }
            } else {
                if (!RS) tma_load_2d(sA, ma, &bar, kb * BK, 0);
                tma_load_2d(sB, mb, &bar, kb * BK, 0);
            }
        }
        uint32_t af[STEPS][4];
        if constexpr (RS) load_a_fragments(af, A, K * (FP8 ? 1 : 2), kb * SPAN); // bytes
        mbar_wait(&bar, kb & 1);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < STEPS; k++) {
            const bool accumulate = kb > 0 || k > 0;
            const uint64_t a = desc_add(da, A_STEP * k), b = desc_add(db, B_STEP * k);
            if constexpr (KIND == 0) mma_bf16_ss<N>(acc, a, b, accumulate);
            else if constexpr (KIND == 1) mma_f16_ss<N>(acc, a, b, accumulate);
            else if constexpr (KIND == 2) mma_bf16_rs<N>(acc, af[k], b, accumulate);
            else if constexpr (KIND == 3) mma_e4m3_ss<N>(acc, a, b, accumulate);
            else mma_e4m3_rs<N>(acc, af[k], b, accumulate);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_operand(acc);
        named_bar_sync(1, 128); // every warp is done with the slab before TMA overwrites it
    }
#pragma unroll
    for (int i = 0; i < N / 2; i++) {
        const int row = 16 * w + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + (i % 2);
        C[row * N + col] = acc[i];
    }
}

#define DEV_WGMMA_KERNEL(name, KIND, N, SW)                                                        \
    extern "C" __global__ void __launch_bounds__(128, 1)                                           \
        name(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb,       \
             float *C, int K, const uint16_t *A) {                                                 \
        wgmma_tile<KIND, N, Swizzle::SW>(&ma, &mb, C, K, A);                                       \
    }
DEV_WGMMA_KERNEL(dev_wgmma_bf16_n64, 0, 64, B128)
DEV_WGMMA_KERNEL(dev_wgmma_bf16_n128, 0, 128, B128)
DEV_WGMMA_KERNEL(dev_wgmma_bf16_n256, 0, 256, B128)
DEV_WGMMA_KERNEL(dev_wgmma_f16_n128, 1, 128, B128)
DEV_WGMMA_KERNEL(dev_wgmma_bf16rs_n128, 2, 128, B128)
DEV_WGMMA_KERNEL(dev_wgmma_e4m3_n128, 3, 128, B128)
DEV_WGMMA_KERNEL(dev_wgmma_e4m3_n256, 3, 256, B128)
DEV_WGMMA_KERNEL(dev_wgmma_e4m3rs_n128, 4, 128, B128)
DEV_WGMMA_KERNEL(dev_wgmma_e4m3rs_n256, 4, 256, B128)
DEV_WGMMA_KERNEL(dev_wgmma_bf16_n64_sw64, 0, 64, B64)
DEV_WGMMA_KERNEL(dev_wgmma_bf16_n64_sw32, 0, 64, B32)
DEV_WGMMA_KERNEL(dev_wgmma_bf16_n128_nosw, 0, 128, None)
DEV_WGMMA_KERNEL(dev_wgmma_e4m3_n64_sw64, 3, 64, B64)
extern "C" __global__ void __launch_bounds__(128, 1)
dev_wgmma_bf16_n128_nosw_probe(const __grid_constant__ CUtensorMap ma,
                               const __grid_constant__ CUtensorMap mb, float *C, int K,
                               const uint16_t *A) {
    wgmma_tile<0, 128, Swizzle::None, true>(&ma, &mb, C, K, A);
}

// ------------------------------------------------------------------ (4b) MN-major B
// C[64 x N] = A[64 x K] * B[K x N] with B stored [K, N] row-major (N contiguous, as v in
// attention's P v): A fragments from global memory (as KIND 2), B loaded per 64-row K-slab as
// N / 64 boxes of 64 columns x 64 rows under the 128-byte swizzle and read transposed (TB = 1)
// through make_desc_mn_major_b128 (LBO = one box, 8 KB; a k16 step = 16 rows = 2 KB).
template <int N>
__device__ __forceinline__ void wgmma_mn_tile(const CUtensorMap *mb, float *C, int K, const uint16_t *A) {
    __shared__ uint64_t bar;
    uint8_t *sB = smem_1024();
    const int t = threadIdx.x, w = t / 32, l = t % 32;
    if (t == 0) {
        tma_prefetch_desc(mb);
        mbar_init(&bar, 1);
        mbar_fence_init();
    }
    __syncthreads();
    float acc[N / 2];
    const uint64_t db = make_desc_mn_major_b128(sB, 64 * 128);
    for (int kb = 0; kb < K / 64; kb++) {
        if (t == 0) {
            mbar_arrive_expect_tx(&bar, N * 64 * 2);
#pragma unroll
            for (int c = 0; c < N / 64; c++) tma_load_2d(sB + c * 8192, mb, &bar, c * 64, kb * 64);
        }
        uint32_t af[4][4];
        load_a_fragments(af, A, 2 * K, kb * 128);
        mbar_wait(&bar, kb & 1);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < 4; k++) mma_bf16_rs<N, 1>(acc, af[k], desc_add(db, 2048 * k), kb > 0 || k > 0);
        wgmma_commit();
        wgmma_wait<0>();
        fence_operand(acc);
        named_bar_sync(1, 128);
    }
#pragma unroll
    for (int i = 0; i < N / 2; i++) {
        const int row = 16 * w + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + (i % 2);
        C[row * N + col] = acc[i];
    }
}
#define DEV_WGMMA_MN_KERNEL(name, N)                                                               \
    extern "C" __global__ void __launch_bounds__(128, 1)                                           \
        name(const __grid_constant__ CUtensorMap mb, float *C, int K, const uint16_t *A) {         \
        wgmma_mn_tile<N>(&mb, C, K, A);                                                            \
    }
DEV_WGMMA_MN_KERNEL(dev_wgmma_bf16rs_mn_n64, 64)
DEV_WGMMA_MN_KERNEL(dev_wgmma_bf16rs_mn_n256, 256)

// ------------------------------------------------------------------ (5) warp-specialised GEMM
// D[M x N] (fp32) = A[M x K] * B[N x K]^T, bf16 K-major operands. 384 threads: warpgroup 0 is
// the producer (one elected thread issues TMA into a 4-stage ring), warpgroups 1 and 2 each
// compute 64 rows of a 128 x 128 tile. Persistent: CTAs walk the tile scheduler's order.
// Partial tiles: TMA zero-fills loads past M, N, K; the epilogue masks the stores.
namespace gemm {
constexpr int BM = 128, BN = 128, BK = 64, STAGES = 4;
constexpr uint32_t A_STAGE = BM * BK * 2, B_STAGE = BN * BK * 2;
struct Smem {
    uint8_t a[STAGES][A_STAGE];
    uint8_t b[STAGES][B_STAGE];
    Pipeline<STAGES> pipe;
};
} // namespace gemm

extern "C" __global__ void __launch_bounds__(384, 1)
dev_gemm_ws(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb,
            float *D, int M, int N, int K, int group) {
    using namespace gemm;
    Smem &s = *reinterpret_cast<Smem *>(smem_1024());
    if (threadIdx.x == 0) {
        tma_prefetch_desc(&ma);
        tma_prefetch_desc(&mb);
        s.pipe.init(2 * kWarpgroupThreads);
    }
    __syncthreads();
    const int nk = (K + BK - 1) / BK;
    const int wg = warpgroup_index();
    if (wg == 0) {
        setmaxnreg_dec<40>();
        if (warp_in_warpgroup() == 0 && elect_one()) {
            PipeState<STAGES> st;
            for (TileScheduler sc = TileScheduler::make(M, N, BM, BN, group, blockIdx.x); sc.valid();
                 sc.next(gridDim.x)) {
                const TileCoord tc = sc.coord();
                for (int kb = 0; kb < nk; kb++) {
                    uint64_t *full = s.pipe.producer_acquire(st);
                    s.pipe.producer_commit(st, A_STAGE + B_STAGE);
                    tma_load_2d(s.a[st.stage], &ma, full, kb * BK, tc.m * BM);
                    tma_load_2d(s.b[st.stage], &mb, full, kb * BK, tc.n * BN);
                    st.advance();
                }
            }
        }
    } else {
        setmaxnreg_inc<232>();
        const int cw = wg - 1, t = thread_in_warpgroup(), w = t / 32, l = t % 32;
        PipeState<STAGES> st;
        float acc[BN / 2];
        for (TileScheduler sc = TileScheduler::make(M, N, BM, BN, group, blockIdx.x); sc.valid();
             sc.next(gridDim.x)) {
            const TileCoord tc = sc.coord();
            for (int kb = 0; kb < nk; kb++) {
                s.pipe.consumer_wait(st);
                const uint64_t da = make_desc_kmajor<Swizzle::B128>(s.a[st.stage] + cw * 64 * 128);
                const uint64_t db = make_desc_kmajor<Swizzle::B128>(s.b[st.stage]);
                wgmma_fence();
#pragma unroll
                for (int k = 0; k < BK / 16; k++)
                    mma_bf16_ss<BN>(acc, desc_add(da, 32 * k), desc_add(db, 32 * k), kb > 0 || k > 0);
                wgmma_commit();
                wgmma_wait<0>();
                fence_operand(acc);
                s.pipe.consumer_release(st);
                st.advance();
            }
            const int row0 = tc.m * BM + cw * 64 + 16 * w + l / 4, col0 = tc.n * BN + 2 * (l % 4);
#pragma unroll
            for (int i = 0; i < BN / 2; i++) {
                const int row = row0 + 8 * ((i / 2) % 2), col = col0 + 8 * (i / 4) + (i % 2);
                if (row < M && col < N) D[size_t(row) * N + col] = acc[i];
            }
        }
    }
}

// ------------------------------------------------------------------ load_relaxed
// out[i] = load_relaxed(&in[i % n]) for 256 threads.
extern "C" __global__ void __launch_bounds__(256) dev_load_relaxed(const int *in, int n, int *out) {
    out[threadIdx.x] = load_relaxed(in + int(threadIdx.x) % n);
}

// ------------------------------------------------------------------ pipeline state skip
// out[2 (24 s0 + n) + {0, 1}] = (stage, phase) of a PipeState<6> advanced s0 times, then
// skip(n) (s0, n < 24: up to four times round the ring).
extern "C" __global__ void dev_pipe_skip(int *out) {
    if (threadIdx.x != 0) return;
    for (int s0 = 0; s0 < 24; s0++)
        for (int n = 0; n < 24; n++) {
            PipeState<6> st;
            for (int i = 0; i < s0; i++) st.advance();
            st.skip(uint32_t(n));
            out[2 * (24 * s0 + n)] = int(st.stage);
            out[2 * (24 * s0 + n) + 1] = int(st.phase);
        }
}

// ------------------------------------------------------------------ scheduler order
// out[3 t + {0, 1, 2}] = (m, n, CTA) of tile t as the CTAs walk it.
extern "C" __global__ void dev_sched_order(int m, int n, int tile_m, int tile_n, int group, int *out) {
    if (threadIdx.x != 0) return;
    for (TileScheduler sc = TileScheduler::make(m, n, tile_m, tile_n, group, blockIdx.x); sc.valid();
         sc.next(gridDim.x)) {
        const TileCoord tc = sc.coord();
        out[3 * sc.tile] = tc.m;
        out[3 * sc.tile + 1] = tc.n;
        out[3 * sc.tile + 2] = blockIdx.x;
    }
}

// ------------------------------------------------------------------ e4m3 by a computed scale
// Block (a, h / 256): amax = amaxes[a], s = e4m3_scale(amax), x = the 16-bit pattern h (f16 or
// bf16). out[2 (65536 a + h) + {0, 1}] = the e4m3 bytes of x / s by E4m3Divider(s) (as the
// quant kernels store it, store_e4m3) and by __fdiv_rn(x, s) where |x| <= amax or x is NaN (the
// divider's domain), else 0xAA twice.
extern "C" __global__ void __launch_bounds__(256) dev_e4m3_divider(const float *amaxes, int f16, uint8_t *out) {
    const uint32_t h = blockIdx.y * 256 + threadIdx.x;
    const float amax = amaxes[blockIdx.x];
    const unsigned short bits = (unsigned short)h;
    const float x = f16 ? __half2float(__ushort_as_half(bits)) : __bfloat162float(__ushort_as_bfloat16(bits));
    const float s = e4m3_scale(amax);
    uint8_t *o = out + 2 * (size_t(65536) * blockIdx.x + h);
    if (fabsf(x) <= amax || x != x) {
        const float xs[1] = {x};
        store_e4m3(o, xs, E4m3Divider(s));
        o[1] = e4m3_from_f32(__fdiv_rn(x, s));
    } else {
        o[0] = o[1] = 0xAA;
    }
}

// Block (a, h / 256): s = scales[a] (any fp32), x = the 16-bit pattern h (f16 or bf16).
// out[2 (65536 a + h) + {0, 1}] = the e4m3 bytes of x / s by E4m3GivenDivider(s) (as the kernels
// store it) and by __fdiv_rn(x, s).
extern "C" __global__ void __launch_bounds__(256) dev_e4m3_given_divider(const float *scales, int f16, uint8_t *out) {
    const uint32_t h = blockIdx.y * 256 + threadIdx.x;
    const float s = scales[blockIdx.x];
    const unsigned short bits = (unsigned short)h;
    const float x = f16 ? __half2float(__ushort_as_half(bits)) : __bfloat162float(__ushort_as_bfloat16(bits));
    uint8_t *o = out + 2 * (size_t(65536) * blockIdx.x + h);
    const float xs[1] = {x};
    store_e4m3(o, xs, E4m3GivenDivider(s));
    o[1] = e4m3_from_f32(__fdiv_rn(x, s));
}

// Thread i of the grid, for every fp32 pattern u = i, i + stride, .. up to +inf: counts in
// *differ the amaxes whose e4m3_scale differs in any bit from max(__fdiv_rn(amax, 448), 2^-126),
// and keeps the first one in *first.
extern "C" __global__ void __launch_bounds__(256) dev_e4m3_scale_all(unsigned *differ, unsigned *first) {
    const uint32_t stride = gridDim.x * blockDim.x;
    unsigned n = 0;
    for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u <= 0x7f800000u; u += stride) {
        const float amax = __uint_as_float(u);
        if (__float_as_uint(e4m3_scale(amax)) != __float_as_uint(fmaxf(__fdiv_rn(amax, 448.f), 0x1p-126f))) {
            n++;
            atomicMin(first, u);
        }
    }
    if (n) atomicAdd(differ, n);
}
