// gemm.cu - dense GEMM with fused epilogues: D = epilogue(alpha * A . B^T), A [m, k] and
// B [n, k] row-major bf16/f16, fp32 accumulation on wgmma, TMA loads.
//
// Structure (one persistent CTA per SM, 384 threads):
//   warpgroup 0  one elected thread walks the CTA's tiles and issues, per k-block of 64, the
//                TMA loads of A (128 rows) and B (two half-tiles of bn / 2 rows) into a ring
//                of STAGES stages (kernels/dev/pipeline.cuh); its registers go to the others.
//   warpgroups 1, 2  64 rows each: wait for a stage, issue 4 wgmma m64 n(bn) k16 from shared
//                memory, keep one k-block in flight and release the previous stage, then run
//                the epilogue from registers straight to global memory while the producer
//                already fills the ring with the next tile.
// Gated (SwiGLU / GeGLU): the half-tiles are the gate's and the up half's rows for the same
// output columns, so accumulator column j < bn / 2 (gate) and j + bn / 2 (up) sit in the same
// thread: act(gate) * up needs no exchange and no [m, 2n] intermediate.
#include "dev/activation.cuh"
#include "dev/kernel.cuh"
#include "dev/pipeline.cuh"
#include "dev/scheduler.cuh"
#include "dev/tma.cuh"
#include "dev/warpgroup.cuh"
#include "dev/wgmma.cuh"
#include "talon/kernels/gemm.def"

namespace talon::gemm {
using namespace talon::dev;

constexpr int BM = TALON__GEMM_BM, BK = TALON__GEMM_BK;

// One k-block of 64: four k16 steps, 32 bytes apart inside the 128-byte swizzled rows.
template <int DT, int BN>
__device__ __forceinline__ void mma_k64(float (&d)[BN / 2], uint64_t da, uint64_t db, bool acc) {
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
        if constexpr (DT == TALON__BF16)
            mma_bf16_ss<BN>(d, desc_add(da, kk * 32), desc_add(db, kk * 32), acc || kk > 0);
        else
            mma_f16_ss<BN>(d, desc_add(da, kk * 32), desc_add(db, kk * 32), acc || kk > 0);
    }
}

template <typename T> __device__ __forceinline__ float2 load_pair(const T *p) {
    if constexpr (sizeof(T) == 4) return *reinterpret_cast<const float2 *>(p);
    else return unpack2<T>(*reinterpret_cast<const uint32_t *>(p));
}
template <typename T> __device__ __forceinline__ void store_pair(T *p, float lo, float hi) {
    if constexpr (sizeof(T) == 4) *reinterpret_cast<float2 *>(p) = make_float2(lo, hi);
    else *reinterpret_cast<uint32_t *>(p) = pack2<T>(lo, hi);
}

// The accumulators of one warpgroup (64 rows x bn columns of the tile at m0, n0) through the
// epilogue to d. Thread layout (kernels/dev/wgmma.cuh): register 4q + 2h + e holds row
// 16 w + l / 4 + 8 h, column 8 q + 2 (l % 4) + e.
template <int DT, int OT, int BN, int G, typename Act>
__device__ __forceinline__ void epilogue(const float (&d)[BN / 2], const talon__gemm_params &p,
                                         int m0, int n0) {
    using TI = elem<DT>;
    using TO = elem<OT>;
    constexpr int NQ = (G ? BN / 2 : BN) / 8; // 8-column groups of output
    const int lane = lane_index();
    const int row0 = m0 + 16 * warp_in_warpgroup() + lane / 4;
    const TI *bias = reinterpret_cast<const TI *>(p.bias);
    const TO *c = reinterpret_cast<const TO *>(p.c);
    TO *out = reinterpret_cast<TO *>(p.d);
#pragma unroll
    for (int q = 0; q < NQ; q++) {
        const int col = n0 + 8 * q + 2 * (lane % 4);
        if (col >= p.n) break;
        float2 bg = make_float2(0.f, 0.f), bu = make_float2(0.f, 0.f);
        if (bias) {
            bg = load_pair(bias + col);
            if (G) bu = load_pair(bias + p.n + col);
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = row0 + 8 * h;
            if (row >= p.m) continue;
            const int r = 4 * q + 2 * h;
            float y0 = Act::f(fmaf(p.alpha, d[r], bg.x));
            float y1 = Act::f(fmaf(p.alpha, d[r + 1], bg.y));
            if constexpr (G) {
                y0 *= fmaf(p.alpha, d[r + BN / 4], bu.x);
                y1 *= fmaf(p.alpha, d[r + BN / 4 + 1], bu.y);
            }
            if (c) {
                const float2 cv = load_pair(c + (int64_t)row * p.ldc + col);
                y0 = fmaf(p.beta, cv.x, y0);
                y1 = fmaf(p.beta, cv.y, y1);
            }
            store_pair(out + (int64_t)row * p.ldd + col, y0, y1);
        }
    }
}

template <int DT, int OT, int BN, int G>
__device__ __forceinline__ void epilogue_act(const float (&d)[BN / 2], const talon__gemm_params &p,
                                             int m0, int n0) {
    switch (p.act) {
    case 1: epilogue<DT, OT, BN, G, Relu>(d, p, m0, n0); break;
    case 2: epilogue<DT, OT, BN, G, Silu>(d, p, m0, n0); break;
    case 3: epilogue<DT, OT, BN, G, GeluErf>(d, p, m0, n0); break;
    case 4: epilogue<DT, OT, BN, G, GeluTanh>(d, p, m0, n0); break;
    default: epilogue<DT, OT, BN, G, Identity>(d, p, m0, n0); break;
    }
}

template <int DT, int OT, int BN, int G>
__device__ void gemm_tile(const talon__gemm_params &p) {
    using T = elem<DT>;
    constexpr int STAGES = TALON__GEMM_STAGES(BN);
    constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK;
    constexpr uint32_t STAGE_BYTES = (A_ELEMS + B_ELEMS) * sizeof(T);
    constexpr int CONSUMER_WARPS = 8;
    extern __shared__ uint8_t smem_raw[];
    // The 128-byte swizzle repeats every 1024 bytes: stage bases must be 1024-aligned.
    T *sa = reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sb = sa + STAGES * A_ELEMS;
    auto *pipe = reinterpret_cast<Pipeline<STAGES> *>(sb + STAGES * B_ELEMS);

    const int tiles = p.tiles_m * p.tiles_n;
    const int kblocks = (p.k + BK - 1) / BK;
    const int wg = warpgroup_index();
    if (threadIdx.x == 0) {
        pipe->init(CONSUMER_WARPS);
        tma_prefetch_desc(&p.a);
        tma_prefetch_desc(&p.b_lo);
        tma_prefetch_desc(&p.b_hi);
    }
    __syncthreads();

    if (wg == 0) {
        setmaxnreg_dec<40>();
        if (warp_in_warpgroup() == 0 && elect_one()) {
            PipeState<STAGES> st;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                const TileCoord tc = tile_of(t, p.tiles_m, p.tiles_n, p.group);
                const int m0 = tc.m * BM;
                const int lo = tc.n * (G ? BN / 2 : BN), hi = G ? lo : lo + BN / 2;
                for (int kb = 0; kb < kblocks; kb++) {
                    uint64_t *full = pipe->producer_acquire(st);
                    pipe->producer_commit(st, STAGE_BYTES);
                    T *a = sa + st.stage * A_ELEMS, *b = sb + st.stage * B_ELEMS;
                    tma_load_2d(a, &p.a, full, kb * BK, m0);
                    tma_load_2d(b, &p.b_lo, full, kb * BK, lo);
                    tma_load_2d(b + B_ELEMS / 2, &p.b_hi, full, kb * BK, hi);
                    st.advance();
                }
            }
        }
    } else {
        setmaxnreg_inc<232>();
        const int band = wg - 1; // this warpgroup's 64 rows of the tile
        const bool arriver = lane_index() == 0;
        PipeState<STAGES> st;
        float d[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; i++) d[i] = 0.f;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            const TileCoord tc = tile_of(t, p.tiles_m, p.tiles_n, p.group);
            uint32_t prev = 0;
            for (int kb = 0; kb < kblocks; kb++) {
                pipe->consumer_wait(st);
                const uint64_t da = make_desc_kmajor<Swizzle::B128>(sa + st.stage * A_ELEMS + band * 64 * BK);
                const uint64_t db = make_desc_kmajor<Swizzle::B128>(sb + st.stage * B_ELEMS);
                wgmma_fence();
                mma_k64<DT, BN>(d, da, db, kb > 0);
                wgmma_commit();
                // The previous k-block's wgmmas are done: its stage may be refilled.
                wgmma_wait<1>();
                if (kb > 0 && arriver) mbar_arrive(&pipe->empty[prev]);
                prev = st.stage;
                st.advance();
            }
            wgmma_wait<0>();
            fence_operand(d);
            if (arriver) mbar_arrive(&pipe->empty[prev]);
            epilogue_act<DT, OT, BN, G>(d, p, tc.m * BM + band * 64, tc.n * (G ? BN / 2 : BN));
        }
    }
}

} // namespace talon::gemm

TALON__KERNELS_gemm(TALON_DEV_KERNEL)
