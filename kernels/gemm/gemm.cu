// gemm.cu - dense GEMM with fused epilogues: D = epilogue(alpha * A . B^T), A [m, k] and
// B [n, k] row-major bf16/f16 (or fp8 e4m3 with fp32 scales per tensor, per row or per
// block), fp32 accumulation on wgmma, TMA loads.
//
// Structure (one persistent CTA per SM, 384 threads; gemm_swap's 64-row tiles: 256, one consumer):
//   warpgroup 0  one elected thread walks the CTA's tiles and issues, per k-block (128 bytes
//                of k: 64 bf16/f16 or 128 e4m3), the TMA loads of A (128 rows) and B (two
//                half-tiles of bn / 2 rows) into a ring of STAGES stages
//                (kernels/dev/pipeline.cuh); its registers go to the others.
//   warpgroups 1, 2  64 rows each: wait for a stage, issue 4 wgmma m64 n(bn) k16 (e4m3: k32)
//                from shared memory, keep one k-block in flight and release the previous
//                stage, then run the epilogue: 128 bytes of columns at a time into a swizzled
//                staging chunk, written out by an asynchronous TMA store, while the producer
//                already fills the ring with the next tile.
// Gated (SwiGLU / GeGLU): the half-tiles are the gate's and the up half's rows for the same
// output columns, so accumulator column j < bn / 2 (gate) and j + bn / 2 (up) sit in the same
// thread: act(gate) * up needs no exchange and no [m, 2n] intermediate.
// Block scales (fp8, DeepSeek-V3's layout): each k-block's product goes to a second set of
// accumulators, which the consumer waits for and adds to the first times a's scale of the
// row and b's of the 128-row block (the scales differ per k-block, so they cannot wait for
// the epilogue; this also keeps the fp8 tensor cores' short accumulation to one k-block).
// Three bodies: gemm_tile (128-row tiles, clusters of 2 sharing b, split-K through
// distributed shared memory), gemm_pingpong (gemm_tile with each consumer warpgroup on whole
// 128 x 128 tiles of its own, taking turns on the tensor cores: one's epilogue under the
// other's wgmmas) and gemm_swap (m <= 64, the product transposed); the host's plan
// (include/talon/impl/gemm_plan.h) picks the body and its template arguments.
#include "dev/activation.cuh"
#include "dev/async.cuh"
#include "dev/kernel.cuh"
#include "dev/pipeline.cuh"
#include "dev/scheduler.cuh"
#include "dev/tma.cuh"
#include "dev/warpgroup.cuh"
#include "dev/wgmma.cuh"
#include "talon/kernels/gemm.def"
#include "tile_parts.cuh"

namespace talon::gemm {
using namespace talon::dev;

// The bias's type: the inputs' (16-bit), the output's (fp8)
template <int DT, int OT> using bias_elem = elem<is_fp8<DT> ? OT : DT>;

// fp8: a's scale of row `row` (< m) times b's scale of row `col` pair, from the params' steps
// (0: one scale for the tensor). Rows or columns past the edge read element 0 (their results
// are clipped by the TMA store).
__device__ __forceinline__ float a_scale_of(const talon__gemm_params &p, int row) {
    return __ldg(reinterpret_cast<const float *>(p.a_scale) + (row < p.m ? row : 0) * p.a_scale_step);
}
__device__ __forceinline__ float2 b_scale_pair(const talon__gemm_params &p, int col, int limit) {
    const float *bs = reinterpret_cast<const float *>(p.b_scale);
    if (!p.b_scale_step) {
        const float s = __ldg(bs);
        return make_float2(s, s);
    }
    return __ldg(reinterpret_cast<const float2 *>(bs + (col < limit ? col : 0)));
}

// Chunks of 128 bytes of output columns that a warpgroup's part of a tile writes.
template <int OT, int BN, int G>
__device__ __forceinline__ int out_chunks(const talon__gemm_params &p, int n0) {
    constexpr int OUT_COLS = G ? BN / 2 : BN, CHUNK = 128 / sizeof(elem<OT>);
    return min(OUT_COLS / CHUNK, (p.n - n0 + CHUNK - 1) / CHUNK);
}

// The residual rows (64 from m0) of the chunk from column col0, 16 bytes per copy, into the
// staging layout at buf: one cp.async group per thread, committed even when this thread
// copies nothing (the epilogue counts groups).
template <int OT>
__device__ __forceinline__ void copy_residual(const talon__gemm_params &p, uint32_t buf, int m0,
                                              int col0) {
    using TO = elem<OT>;
    const int t = thread_in_warpgroup();
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int u = t + kWarpgroupThreads * i, row = u / 8, unit = u % 8;
        const int col = col0 + unit * (16 / int(sizeof(TO)));
        if (m0 + row < p.m && col < p.n)
            cp_async_16(buf + row * 128 + ((unit ^ (row & 7)) << 4),
                        reinterpret_cast<const TO *>(p.c) + (int64_t)(m0 + row) * p.ldc + col);
    }
    cp_async_commit();
}

// The residual of a warpgroup's first two chunks, into the two staging buffers in the order
// the epilogue takes them (every store of theirs read first): called before a tile's main
// loop, so they land under it, or at the epilogue's start.
template <int OT, int BN, int G>
__device__ __forceinline__ void residual_first(const talon__gemm_params &p, int m0, int n0,
                                               const Staging &st) {
    constexpr int CHUNK = 128 / sizeof(elem<OT>);
    st.wait_reads(1 + int(warpgroup_index()), thread_in_warpgroup() == 0);
    const int chunks = out_chunks<OT, BN, G>(p, n0);
    for (int ch = 0; ch < 2 && ch < chunks; ch++)
        copy_residual<OT>(p, st.buf + ((st.count + ch) & 1) * 8192, m0, n0 + ch * CHUNK);
}

// The accumulators of one warpgroup (64 rows x bn columns of the tile at m0, n0) through the
// epilogue, staged in shared memory 128 bytes of columns at a time and written by TMA stores
// (which clip rows >= m and columns >= n). Thread layout (kernels/dev/wgmma.cuh): register
// 4q + 2h + e holds row 16 w + l / 4 + 8 h, column 8 q + 2 (l % 4) + e.
// The inputs come through shared memory, read with few, coalesced, concurrent loads: the
// tile's bias into `bias_s` once, each chunk's residual rows by cp.async into the staging
// chunk itself, where each thread then reads its pairs and overwrites them with the results
// (two chunks' rows in flight at a time; c_started: the first two were issued before the
// tile's main loop, by residual_first).
// (Loaded per pair from global memory, next to the 128 accumulators there were registers
// for one pair's loads at a time, and their latencies added up: +12-16% over the plain GEMM.)
// SCALED: fp8 with per-tensor or per-row scales, applied here (block scales were applied in
// the main loop).
// INPUTS false: the launch has no bias and no residual (compiled out, not branched over).
template <int DT, int OT, int BN, int G, bool SCALED, typename Act, bool INPUTS = true>
__device__ __forceinline__ void epilogue(float (&d)[BN / 2], const talon__gemm_params &p,
                                         int m0, int n0, Staging &st, bool c_started = false) {
    using TI = bias_elem<DT, OT>;
    using TO = elem<OT>;
    constexpr int OUT_COLS = G ? BN / 2 : BN, CHUNK = 128 / sizeof(TO), QC = CHUNK / 8;
    const int lane = lane_index(), t = thread_in_warpgroup();
    const int r0 = 16 * warp_in_warpgroup() + lane / 4; // row in the warpgroup's 64
    const bool leader = t == 0;
    const int barrier = 1 + int(warpgroup_index()); // named barriers 2, 3
    const TI *bias = INPUTS ? reinterpret_cast<const TI *>(p.bias) : nullptr;
    const TO *c = INPUTS ? reinterpret_cast<const TO *>(p.c) : nullptr;
    // alpha times (fp8) a's scale of the thread's rows r0 and r0 + 8
    float ra[2] = {p.alpha, p.alpha};
    if constexpr (SCALED)
#pragma unroll
        for (int h = 0; h < 2; h++) ra[h] = p.alpha * a_scale_of(p, m0 + r0 + 8 * h);
    // bias_s[j], j < BN: the tile's bias pairs (gated: the gate's OUT_COLS, then the up half's);
    // read only after the first chunk's barrier; the last tile's readers passed its last one
    if (bias && t < BN / 2) {
        const int j = 2 * t, col = n0 + (G && j >= OUT_COLS ? j - OUT_COLS + p.n : j);
        const bool in_n = (G && j >= OUT_COLS ? col - p.n : col) < p.n;
        asm volatile("st.shared.b32 [%0], %1;" ::"r"(st.bias_s + j * 2),
                     "r"(in_n ? *reinterpret_cast<const uint32_t *>(bias + col) : 0u));
    }
    // the residual: chunks 0 and 1 in flight from the start (c_started: since the main loop),
    // chunk ch + 2 issued once chunk ch's store has read its buffer
    const int chunks = out_chunks<OT, BN, G>(p, n0);
    if (c && !c_started) residual_first<OT, BN, G>(p, m0, n0, st);
    // With an activation or inputs the chunk's code is long: one copy of it, looped, keeps the
    // kernel's instructions in cache (unrolled, the GELU epilogue's warps in the ping-pong
    // kernel stalled on instruction fetch a third of the time), for at most 96 moves a chunk:
    // looped, each chunk's values are at the start of d and it moves the rest down by its CV
    // (d is dead after the epilogue). The lean epilogue stays unrolled and reads them in place.
    // Chunk values: v[i], i < CV (gated: the gate's; the up half's at v[HALF + i]).
    constexpr bool LOOPED = INPUTS || !is_identity<Act>;
    constexpr int CV = 4 * QC, HALF = G ? BN / 4 : BN / 2;
    auto chunk = [&](int ch) {
        const float *v = d + (LOOPED ? 0 : ch * CV);
        const int col0 = n0 + ch * CHUNK;
        const uint32_t buf = st.begin(barrier, leader);
        if (c) { // the chunk's residual rows have landed (the next chunk's may be in flight)
            if (ch + 1 < chunks) cp_async_wait<1>();
            else cp_async_wait<0>();
            named_bar_sync(barrier, kWarpgroupThreads);
        }
#pragma unroll
        for (int qq = 0; qq < QC; qq++) {
            const int j = col0 - n0 + 8 * qq + 2 * (lane % 4);
            const float2 bg = bias ? load_shared_pair<TI>(st.bias_s + j * 2) : make_float2(0.f, 0.f);
            const float2 bu = bias && G ? load_shared_pair<TI>(st.bias_s + (OUT_COLS + j) * 2)
                                        : make_float2(0.f, 0.f);
            // fp8: b's scales of the pair's columns (gated: of the gate's and the up half's rows)
            float2 sg = make_float2(1.f, 1.f), su = make_float2(1.f, 1.f);
            if constexpr (SCALED) {
                sg = b_scale_pair(p, n0 + j, p.n);
                if constexpr (G) su = b_scale_pair(p, p.n + n0 + j, 2 * p.n);
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = r0 + 8 * h, i = 4 * qq + 2 * h;
                float y0 = Act::f(fmaf(ra[h] * sg.x, v[i], bg.x));
                float y1 = Act::f(fmaf(ra[h] * sg.y, v[i + 1], bg.y));
                if constexpr (G) {
                    y0 *= fmaf(ra[h] * su.x, v[HALF + i], bu.x);
                    y1 *= fmaf(ra[h] * su.y, v[HALF + i + 1], bu.y);
                }
                if (c) {
                    const float2 cv = load_shared_pair<TO>(stage_addr<TO>(buf, r, qq, lane));
                    y0 = fmaf(p.beta, cv.x, y0);
                    y1 = fmaf(p.beta, cv.y, y1);
                }
                stage_pair<TO>(buf, r, qq, lane, y0, y1);
            }
        }
        st.store_tma(&p.d_map, buf, col0, m0, barrier, leader);
        if (c && ch + 2 < chunks) {
            st.wait_reads(barrier, leader);
            copy_residual<OT>(p, buf, m0, col0 + 2 * CHUNK);
        }
        if constexpr (LOOPED) {
#pragma unroll
            for (int i = 0; i + CV < HALF; i++) {
                d[i] = d[i + CV];
                if constexpr (G) d[HALF + i] = d[HALF + i + CV];
            }
        }
    };
    if constexpr (LOOPED) {
#pragma unroll 1
        for (int ch = 0; ch < chunks; ch++) chunk(ch);
    } else {
#pragma unroll
        for (int ch = 0; ch < OUT_COLS / CHUNK; ch++) {
            if (ch >= chunks) break; // the same in the whole warpgroup
            chunk(ch);
        }
    }
}

// The epilogue with the launch's activation and inputs as template arguments: one
// instantiation per activation, and a lean one for the commonest linear layer (no bias, no
// residual, no activation: lean_epilogue), whose epilogue the tensor cores wait for in the
// cooperative kernels (ncu: ~10% of their time at 64 k-blocks a tile with the generic one).
__device__ __forceinline__ bool lean_epilogue(const talon__gemm_params &p) {
    return !p.bias && !p.c && p.act == 0;
}
template <int DT, int OT, int BN, int G, bool SCALED>
__device__ __forceinline__ void run_generic_epilogue(float (&d)[BN / 2],
                                                     const talon__gemm_params &p, int m0, int n0,
                                                     Staging &st, bool c_started = false) {
    with_act(p.act, [&](auto act) {
        epilogue<DT, OT, BN, G, SCALED, decltype(act)>(d, p, m0, n0, st, c_started);
    });
}
template <int DT, int OT, int BN, int G, bool SCALED>
__device__ __forceinline__ void run_epilogue(float (&d)[BN / 2], const talon__gemm_params &p,
                                             int m0, int n0, Staging &st, bool c_started = false) {
    if (lean_epilogue(p))
        epilogue<DT, OT, BN, G, SCALED, Identity, false>(d, p, m0, n0, st);
    else
        run_generic_epilogue<DT, OT, BN, G, SCALED>(d, p, m0, n0, st, c_started);
}

// Split-K across the SPLIT CTAs of a cluster, for both bodies: the barriers (in each CTA's
// shared memory) and the reduction of one tile's accumulators. The ranks' fp32 partials meet
// in rank 0 in rank order (bit-reproducible), through distributed shared memory. CONSUMERS:
// the threads of the consumer warpgroups.
template <int SPLIT, int CONSUMERS = 256> struct SplitK {
    uint64_t ready[SPLIT]; // on rank 0: rank r's partial is in place
    uint64_t done;         // on rank r: rank 0 has read it

    __device__ __forceinline__ void init() { // one thread, before the cluster barrier
        for (int r = 0; r < SPLIT; r++) mbar_init(&ready[r], CONSUMERS);
        mbar_init(&done, CONSUMERS);
        mbar_fence_init();
    }

    // After tile number `iter` of this CTA: ranks 1.. leave d in `partial` (their own shared
    // memory, CONSUMERS x K / 4 float4), zero d and return false; rank 0 adds theirs to its d
    // and returns true (it runs the epilogue).
    template <int K>
    __device__ __forceinline__ bool reduce(float (&d)[K], float4 *partial, int rank, int consumer,
                                           uint32_t iter) {
        if (rank != 0) {
            mbar_wait(&done, (iter & 1) ^ 1); // rank 0 has read the previous tile's partial
#pragma unroll
            for (int j = 0; j < K / 4; j++)
                partial[j * CONSUMERS + consumer] =
                    make_float4(d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]);
            mbar_arrive_cluster(&ready[rank], 0); // release: the writes go with it
            zero(d);
            return false;
        }
#pragma unroll 1
        for (int r = 1; r < SPLIT; r++) {
            mbar_wait_cluster(&ready[r], iter & 1);
#pragma unroll
            for (int j = 0; j < K / 4; j++) {
                const float4 v = load_remote_f4(&partial[j * CONSUMERS + consumer], r);
                d[4 * j] += v.x; d[4 * j + 1] += v.y; d[4 * j + 2] += v.z; d[4 * j + 3] += v.w;
            }
            // a cluster-scope release: rank r overwrites `partial` with its next tile's sums
            // once this arrives, so these reads must be complete by then (with the CTA-scope
            // default, a rare element read the next tile's partial: N 28672 at M 16, several
            // tiles per cluster)
            mbar_arrive_cluster(&done, r);
        }
        return true;
    }
};

// Ping-pong consumers (gemm_tile's PINGPONG): warpgroup `turn` (0 or 1) takes the CTA's tiles
// number turn, turn + 2, ... whole: 128 rows as two m64 halves of BN columns against one b
// tile. The ring holds the tiles' k-blocks in the order the producer walks them, so each
// warpgroup skips the other's. It starts a tile only once the other has waited for its own
// tile's last k-block (named barriers 4 and 5): that keeps one warpgroup's wgmmas at a time on
// the tensor cores, and it is what makes the parity waits sound, since a stage's full barrier
// is then at most one phase behind the one waited for.
template <int DT, int OT, int BN, int G, int STAGES, int CM, typename T>
__device__ __forceinline__ void consume_pingpong(const talon__gemm_params &p, T *sa, T *sb,
                                                 uint8_t *staging, uint8_t *bias_s,
                                                 Pipeline<STAGES> *pipe, int rank, int first,
                                                 int stride, int units, int units_m, int group,
                                                 int kb0, int kb1) {
    constexpr int BK = kblock<DT>, A_ELEMS = BM * BK, B_ELEMS = BN * BK;
    const int turn = warpgroup_index() - 1;
    const bool arriver = lane_index() == 0;
    Staging out{smem_addr(staging + turn * 16384), 0, smem_addr(bias_s + turn * 512)};
    PipeState<STAGES> st;
    const int kblocks = kb1 - kb0;
    float d[2][BN / 2]; // rows 0..63 and 64..127 of the tile
    auto release = [&](uint32_t stage) { release_stage<CM>(pipe, stage, arriver); };
    if (turn) st.skip(kblocks);
    for (int u = first + turn * stride; u < units; u += 2 * stride) {
        const TileCoord tc = tile_of(u, units_m, p.tiles_n, group);
        const int m0 = (tc.m * CM + (CM > 1 ? rank : 0)) * BM, n0 = tc.n * (G ? BN / 2 : BN);
        const bool other_next = u + stride < units; // the other warpgroup has the next tile
        if (u != first) named_bar_sync(4 + turn, 2 * kWarpgroupThreads);
        uint32_t prev = 0;
        for (int kb = kb0; kb < kb1; kb++) {
            pipe->consumer_wait(st);
            if (kb == kb1 - 1 && other_next) named_bar_arrive(5 - turn, 2 * kWarpgroupThreads);
            const T *a = sa + st.stage * A_ELEMS;
            const uint64_t db = make_desc_kmajor<Swizzle::B128>(sb + st.stage * B_ELEMS);
            wgmma_fence();
            mma_kblock<DT, BN>(d[0], make_desc_kmajor<Swizzle::B128>(a), db, kb > kb0);
            mma_kblock<DT, BN>(d[1], make_desc_kmajor<Swizzle::B128>(a + 64 * BK), db, kb > kb0);
            wgmma_commit();
            wgmma_wait<1>(); // the previous k-block's wgmmas are done: release its stage
            if (kb > kb0) release(prev);
            prev = st.stage;
            st.advance();
        }
        wgmma_wait<0>();
        fence_operand(d[0]);
        fence_operand(d[1]);
        release(prev);
        st.skip(kblocks);
        // The generic epilogue: one copy of its code for both halves (instruction cache), the
        // second half's accumulators moved into the first's registers. The lean one unrolled
        // (the halves share their columns' loads, e.g. fp8 row scales).
        if (lean_epilogue(p)) {
#pragma unroll
            for (int h = 0; h < 2; h++)
                if (m0 + 64 * h < p.m)
                    epilogue<DT, OT, BN, G, is_fp8<DT>, Identity, false>(d[h], p, m0 + 64 * h, n0,
                                                                         out);
        } else {
#pragma unroll 1
            for (int h = 0; h < 2; h++) {
                if (m0 + 64 * h < p.m)
                    run_generic_epilogue<DT, OT, BN, G, is_fp8<DT>>(d[0], p, m0 + 64 * h, n0, out);
                if (h == 0)
#pragma unroll
                    for (int i = 0; i < BN / 2; i++) d[0][i] = d[1][i];
            }
        }
    }
    // every store done before the CTA's shared memory goes
    if (thread_in_warpgroup() == 0) bulk_wait_group<0>();
}

// Clusters (the table row's cluster column):
//  - bn 256 runs in pairs of CTAs on vertically adjacent tiles (m, n) and (m + 1, n), which
//    share b's tile: each CTA loads one half-tile and multicasts it to both (b's traffic from
//    L2 halves).
//  - SPLIT > 1 (split-K, bn 128, for shapes with fewer tiles than SMs): the SPLIT CTAs of a
//    cluster take equal shares of the k-blocks of one tile; ranks 1.. leave their fp32
//    partial sums in shared memory, and rank 0 adds them to its own in rank order through
//    distributed shared memory (a fixed order: deterministic) and runs the epilogue.
//  - PINGPONG (gemm_pingpong): each consumer warpgroup takes whole 128 x bn tiles (bn 128, two
//    m64 halves, 128 accumulators), every other tile of the CTA, so that one's epilogue runs
//    while the other's wgmmas keep the tensor cores busy (with both on one tile, the tensor
//    cores idled through every epilogue: ~10% of the time at k 4096, more with GELU). Pairs
//    share b's tile as at bn 256.
template <int DT, int OT, int BN, int G, int SPLIT, int BLOCK_SCALED, int PINGPONG = 0>
__device__ void gemm_tile(const talon__gemm_params &p) {
    static_assert(!PINGPONG || (BN == 128 && SPLIT == 1 && !BLOCK_SCALED),
                  "ping-pong: bn 128 only");
    using T = elem<DT>;
    constexpr int BK = kblock<DT>;
    constexpr int STAGES = TALON__GEMM_STAGES(BN, SPLIT);
    constexpr int CM = PINGPONG ? TALON__GEMM_PINGPONG_CLUSTER
                                : SPLIT > 1 ? 1 : TALON__GEMM_CLUSTER(BN); // tiles per cluster
    constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK;
    constexpr uint32_t STAGE_BYTES = (A_ELEMS + B_ELEMS) * sizeof(T);
    constexpr int CONSUMER_WARPS = PINGPONG ? 4 : 8; // the warps that read one stage
    extern __shared__ uint8_t smem_raw[];
    // The 128-byte swizzle repeats every 1024 bytes: stage bases must be 1024-aligned.
    T *sa = reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sb = sa + STAGES * A_ELEMS;
    uint8_t *staging = reinterpret_cast<uint8_t *>(sb + STAGES * B_ELEMS); // 2 x 16 KB
    uint8_t *bias_s = staging + 2 * 16384;                                 // 2 x 512 B
    float4 *partial = reinterpret_cast<float4 *>(bias_s + 1024);          // SPLIT > 1: 128 x bn
    auto *pipe = reinterpret_cast<Pipeline<STAGES> *>(reinterpret_cast<uint8_t *>(partial) +
                                                      (SPLIT > 1 ? BM * BN * 4 : 0));
    auto *split = reinterpret_cast<SplitK<SPLIT> *>(pipe + 1);

    // Tiles are walked in units of CM vertically adjacent tiles, one per CTA of a cluster; a
    // split-K cluster shares one tile.
    const int rank = CM * SPLIT > 1 ? int(cluster_ctarank()) : 0;
    const int units_m = (p.tiles_m + CM - 1) / CM, units = units_m * p.tiles_n;
    const int first = blockIdx.x / (CM * SPLIT), stride = gridDim.x / (CM * SPLIT);
    const int group = (p.group + CM - 1) / CM;
    const int kblocks = (p.k + BK - 1) / BK;
    const int kb0 = SPLIT > 1 ? rank * kblocks / SPLIT : 0;
    const int kb1 = SPLIT > 1 ? (rank + 1) * kblocks / SPLIT : kblocks;
    const int wg = warpgroup_index();
    if (threadIdx.x == 0) {
        pipe->init(CONSUMER_WARPS * CM); // a stage is free once every sharing CTA is done
        if constexpr (SPLIT > 1) split->init();
        tma_prefetch_desc(&p.a);
        tma_prefetch_desc(&p.b_lo);
        tma_prefetch_desc(&p.b_hi);
        tma_prefetch_desc(&p.d_map);
    }
    // Barriers initialised in every CTA of the cluster before any multicasts or arrives.
    if constexpr (CM * SPLIT > 1) cluster_sync();
    else __syncthreads();

    if (wg == 0) {
        setmaxnreg_dec<40>();
        if (warp_in_warpgroup() == 0 && elect_one()) {
            PipeState<STAGES> st;
            for (int u = first; u < units; u += stride) {
                const TileCoord tc = tile_of(u, units_m, p.tiles_n, group);
                const int m0 = (tc.m * CM + (CM > 1 ? rank : 0)) * BM;
                const int lo = tc.n * (G ? BN / 2 : BN), hi = G ? lo : lo + BN / 2;
                for (int kb = kb0; kb < kb1; kb++) {
                    uint64_t *full = pipe->producer_acquire(st);
                    pipe->producer_commit(st, STAGE_BYTES);
                    T *a = sa + st.stage * A_ELEMS, *b = sb + st.stage * B_ELEMS;
                    tma_load_2d(a, &p.a, full, kb * BK, m0);
                    if constexpr (CM > 1) { // rank 0 brings the first half-tile, rank 1 the second
                        tma_load_2d_multicast(b + rank * (B_ELEMS / 2), rank ? &p.b_hi : &p.b_lo,
                                              full, kb * BK, rank ? hi : lo, 0x3);
                    } else {
                        tma_load_2d(b, &p.b_lo, full, kb * BK, lo);
                        tma_load_2d(b + B_ELEMS / 2, &p.b_hi, full, kb * BK, hi);
                    }
                    st.advance();
                }
            }
        }
    } else if constexpr (PINGPONG) {
        setmaxnreg_inc<232>();
        consume_pingpong<DT, OT, BN, G, STAGES, CM>(p, sa, sb, staging, bias_s, pipe, rank, first,
                                                    stride, units, units_m, group, kb0, kb1);
    } else {
        setmaxnreg_inc<232>();
        const int band = wg - 1; // this warpgroup's 64 rows of the tile
        const bool arriver = lane_index() == 0;
        const int consumer = int(threadIdx.x) - kWarpgroupThreads; // 0..255
        Staging out{smem_addr(staging + band * 16384), 0, smem_addr(bias_s + band * 512)};
        PipeState<STAGES> st;
        uint32_t iter = 0; // tiles done (split-K barrier phases)
        auto release = [&](uint32_t stage) { release_stage<CM>(pipe, stage, arriver); };
        float d[BN / 2];
        // One tile's k-blocks [kb0, kb1) into d.
        auto mainloop = [&](int m0, const TileCoord &tc) {
            if constexpr (BLOCK_SCALED) {
                const BlockScales sc{reinterpret_cast<const float *>(p.a_scale), p.a_scale_ld,
                                     reinterpret_cast<const float *>(p.b_scale), p.b_scale_ld, p.n};
                int ra[2];
                block_scale_rows(m0 + band * 64, p.m, ra);
                consume_kblocks_block_scaled<DT, BN, G, 0>(d, pipe, st, kb0, kb1, sc, ra,
                    tc.n * (G ? BN / 2 : BN),
                    [&](uint32_t s) { return make_desc_kmajor<Swizzle::B128>(sa + s * A_ELEMS + band * 64 * BK); },
                    [&](uint32_t s) { return sb + s * B_ELEMS; }, release);
            } else {
                consume_kblocks<DT, BN>(d, pipe, st, kb0, kb1, [&](uint32_t s, uint64_t &da, uint64_t &db) {
                    da = make_desc_kmajor<Swizzle::B128>(sa + s * A_ELEMS + band * 64 * BK);
                    db = make_desc_kmajor<Swizzle::B128>(sb + s * B_ELEMS);
                }, release);
            }
        };
        zero(d); // stays the sum when a split has no k-block
        for (int u = first; u < units; u += stride, iter++) {
            const TileCoord tc = tile_of(u, units_m, p.tiles_n, group);
            const int m0 = (tc.m * CM + (CM > 1 ? rank : 0)) * BM, n0 = tc.n * (G ? BN / 2 : BN);
            // the residual's first chunks land under the main loop (split-K: rank 0 only
            // writes, after the reduction)
            const bool c_started = SPLIT == 1 && p.c && m0 < p.m;
            if (c_started) residual_first<OT, BN, G>(p, m0 + band * 64, n0, out);
            mainloop(m0, tc);
            if constexpr (SPLIT > 1)
                if (!split->reduce(d, partial, rank, consumer, iter)) continue;
            // the second tile of a pair may lie below the last row of tiles: nothing to write
            if (m0 < p.m)
                run_epilogue<DT, OT, BN, G, is_fp8<DT> && !BLOCK_SCALED>(d, p, m0 + band * 64, n0,
                                                                         out, c_started);
            if constexpr (SPLIT > 1) zero(d); // stays the sum if the next tile's share is empty
        }
        if (thread_in_warpgroup() == 0) bulk_wait_group<0>(); // every store done before the CTA's smem goes
    }
    // A CTA leaves only when no peer still arrives on its barriers or reads its memory.
    if constexpr (CM * SPLIT > 1) cluster_sync();
}

// ---------------------------------------------------------------- small m (decode)
// m <= 64, the weight-bandwidth-bound regime: the product is computed transposed, D^T = B A^T,
// so that b's rows fill wgmma's 64-row side and the few rows of a are its N (MN = 16, 32 or
// 64; 128 for m 65..128 where the normal kernel's 128-row tiles would leave SMs idle, with
// 64-row tiles of b): a 128 x MN tile per k-block costs 1/8 .. 1/2 of the tensor time a
// 128 x 128 tile of mostly zero rows would, and the CTA streams b at the rate its loads
// allow. Tiles are ROWS (128 or 64) rows of b, one consumer warpgroup per 64 of them holding
// 64 output columns x MN rows; split-K as in gemm_tile. 64-row tiles give a narrow n twice the
// CTAs, so its split-K needs only clusters of 2 (N 4096: 64 tiles x 2 ways = 128 CTAs;
// clusters of 4 would not all be resident at once: 30 of them fit on a 132-SM part).

// The accumulators of one warpgroup (64 columns n0.. of d, MN rows) through the epilogue
// into staging chunks of up to 64 rows x 128 bytes, each written by one TMA store. Register
// 4q + 2h + e holds column 16 w + l / 4 + 8 h, row 8 q + 2 (l % 4) + e. SCALED: fp8 with
// per-tensor or per-row scales, applied here (block scales were applied in the main loop).
template <int DT, int OT, int MN, bool SCALED, typename Act>
__device__ __forceinline__ void epilogue_swap(const float (&d)[MN / 2],
                                              const talon__gemm_params &p, int n0, Staging &st) {
    using TI = bias_elem<DT, OT>;
    using TO = elem<OT>;
    const int lane = lane_index();
    const int c0 = 16 * warp_in_warpgroup() + lane / 4; // column in the warpgroup's 64
    const TI *bias = reinterpret_cast<const TI *>(p.bias);
    const TO *c = reinterpret_cast<const TO *>(p.c);
    const bool leader = thread_in_warpgroup() == 0;
    const int barrier = 1 + int(warpgroup_index());
    float b[2], sc[2]; // per column: bias; alpha times (fp8) b's scale
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int col = n0 + c0 + 8 * h;
        b[h] = bias && col < p.n ? to_f32(bias[col]) : 0.f;
        sc[h] = p.alpha;
        if constexpr (SCALED)
            sc[h] *= __ldg(reinterpret_cast<const float *>(p.b_scale) + (col < p.n ? col : 0) * p.b_scale_step);
    }
    // rows in chunks of at most 64 (a staging chunk: 64 rows x 128 bytes; MN 128: two)
    constexpr int PART = MN < 64 ? MN : 64;
#pragma unroll
    for (int part = 0; part < MN / PART; part++) {
        const uint32_t buf = st.begin(barrier, leader);
#pragma unroll
        for (int q = part * PART / 8; q < (part + 1) * PART / 8; q++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int row = 8 * q + 2 * (lane % 4) + e, cl = c0 + 8 * h, col = n0 + cl;
                    const int r = row - part * PART; // in the chunk
                    const float s = SCALED ? sc[h] * a_scale_of(p, row) : sc[h];
                    float y = Act::f(fmaf(s, d[4 * q + 2 * h + e], b[h]));
                    if (c && row < p.m && col < p.n)
                        y = fmaf(p.beta, to_f32(c[(int64_t)row * p.ldc + col]), y);
                    const TO v = from_f32<TO>(y);
                    const uint32_t at = buf + r * 128 + (((cl / 8) ^ (r & 7)) << 4) + (cl % 8) * 2;
                    asm volatile("st.shared.b16 [%0], %1;" ::"r"(at),
                                 "h"(*reinterpret_cast<const unsigned short *>(&v)));
                }
        st.store_tma(&p.d_map, buf, n0, part * PART, barrier, leader);
    }
}

// The k-blocks [kb0, kb1) of one transposed tile into d with fp8 block scales (DeepSeek-V3's):
// each k-block's product goes to a register set of its own, is waited for and added to d
// times a's scale of the register's row of a (the thread holds MN / 4 of them; rows at or
// past m read row 0's, their results are clipped by the store) and b's scale of the
// warpgroup's 128-row block, b_row (the scales' row of that block). Groups of 8 k-blocks (4
// at MN 32 and 64: registers, and no gain at 32) are in flight together, their scale loads
// first; each stage is released as soon as its wgmmas are done.
template <int DT, int MN, int STAGES, typename Desc, typename Release>
__device__ __forceinline__ void consume_kblocks_swap_block_scaled(
    float (&d)[MN / 2], Pipeline<STAGES> *pipe, PipeState<STAGES> &st, int kb0, int kb1,
    const talon__gemm_params &p, const float *b_row, Desc desc, Release release) {
    constexpr int N = MN <= 16 ? 8 : 4;
    const int lane = lane_index();
    const float *as = reinterpret_cast<const float *>(p.a_scale);
    float tmp[N][MN / 2], sa[N][MN / 4], sb[N]; // per set: the product, a's scales (rows
    uint32_t stage[N];                          // 8 q + 2 (l % 4) + e at 2 q + e), b's scale
    zero(d);
    kblocks_in_groups<N>(kb0, kb1,
        [&](int kb, auto j) {
            constexpr int s = decltype(j)::value;
#pragma unroll
            for (int i = 0; i < MN / 4; i++) {
                const int row = 8 * (i / 2) + 2 * (lane % 4) + i % 2;
                sa[s][i] = __ldg(as + int64_t(kb) * p.a_scale_ld + (row < p.m ? row : 0));
            }
            sb[s] = __ldg(b_row + kb);
        },
        [&](int, auto j) {
            constexpr int s = decltype(j)::value;
            pipe->consumer_wait(st);
            uint64_t da, db;
            desc(st.stage, da, db);
            wgmma_fence();
            mma_kblock<DT, MN>(tmp[s], da, db, false);
            wgmma_commit();
            stage[s] = st.stage;
            st.advance();
        },
        [&](int, auto j) {
            constexpr int s = decltype(j)::value;
            fence_operand(tmp[s]);
            release(stage[s]);
#pragma unroll
            for (int i = 0; i < MN / 2; i++) // register 4 q + 2 h + e: row 8 q + 2 (l % 4) + e
                d[i] = fmaf(tmp[s][i], sa[s][2 * (i / 4) + i % 2] * sb[s], d[i]);
        });
}

template <int DT, int OT, int MN, int SPLIT, int ROWS, int BLOCK_SCALED>
__device__ void gemm_swap(const talon__gemm_params &p) {
    using T = elem<DT>;
    constexpr int BK = kblock<DT>;
    constexpr int STAGES = TALON__GEMM_SWAP_STAGES(MN, ROWS);
    constexpr int W_ELEMS = ROWS * BK, X_ELEMS = MN * BK;
    constexpr uint32_t STAGE_BYTES = (W_ELEMS + X_ELEMS) * sizeof(T);
    constexpr int CONSUMER_WARPGROUPS = ROWS / 64, CONSUMER_WARPS = 4 * CONSUMER_WARPGROUPS;
    extern __shared__ uint8_t smem_raw[];
    T *sw = reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sx = sw + STAGES * W_ELEMS; // MN rows of 128 bytes: stays 1024-aligned
    uint8_t *staging = reinterpret_cast<uint8_t *>(sx + STAGES * X_ELEMS); // 16 KB a warpgroup
    float4 *partial = reinterpret_cast<float4 *>(staging + CONSUMER_WARPGROUPS * 16384);
    auto *pipe = reinterpret_cast<Pipeline<STAGES> *>(reinterpret_cast<uint8_t *>(partial) +
                                                      (SPLIT > 1 ? ROWS * MN * 4 : 0));
    using Split = SplitK<SPLIT, CONSUMER_WARPGROUPS * kWarpgroupThreads>;
    auto *split = reinterpret_cast<Split *>(pipe + 1);

    const int rank = SPLIT > 1 ? int(cluster_ctarank()) : 0;
    const int first = blockIdx.x / SPLIT, stride = gridDim.x / SPLIT;
    const int kblocks = (p.k + BK - 1) / BK;
    const int kb0 = rank * kblocks / SPLIT, kb1 = (rank + 1) * kblocks / SPLIT;
    const int wg = warpgroup_index();
    if (threadIdx.x == 0) {
        pipe->init(CONSUMER_WARPS);
        if constexpr (SPLIT > 1) split->init();
        tma_prefetch_desc(&p.a);
        tma_prefetch_desc(&p.b_lo);
        tma_prefetch_desc(&p.d_map);
    }
    if constexpr (SPLIT > 1) cluster_sync();
    else __syncthreads();

    if (wg == 0) {
        if constexpr (CONSUMER_WARPGROUPS > 1) setmaxnreg_dec<40>();
        if (warp_in_warpgroup() == 0 && elect_one()) {
            PipeState<STAGES> st;
            for (int u = first; u < p.tiles_n; u += stride)
                for (int kb = kb0; kb < kb1; kb++) {
                    uint64_t *full = pipe->producer_acquire(st);
                    pipe->producer_commit(st, STAGE_BYTES);
                    tma_load_2d(sw + st.stage * W_ELEMS, &p.b_lo, full, kb * BK, u * ROWS);
                    tma_load_2d(sx + st.stage * X_ELEMS, &p.a, full, kb * BK, 0);
                    st.advance();
                }
        }
    } else {
        if constexpr (CONSUMER_WARPGROUPS > 1) setmaxnreg_inc<232>();
        const int band = wg - 1; // this warpgroup's 64 rows of b (columns of d)
        const bool arriver = lane_index() == 0;
        const int consumer = int(threadIdx.x) - kWarpgroupThreads;
        Staging out{smem_addr(staging + band * 16384), 0, 0};
        PipeState<STAGES> st;
        uint32_t iter = 0;
        float d[MN / 2];
        zero(d);
        for (int u = first; u < p.tiles_n; u += stride, iter++) {
            const int n0 = u * ROWS + band * 64;
            auto desc = [&](uint32_t s, uint64_t &da, uint64_t &db) {
                da = make_desc_kmajor<Swizzle::B128>(sw + s * W_ELEMS + band * 64 * BK);
                db = make_desc_kmajor<Swizzle::B128>(sx + s * X_ELEMS);
            };
            auto release = [&](uint32_t s) { release_stage<1>(pipe, s, arriver); };
            if constexpr (BLOCK_SCALED) {
                // a band past n (the last tile's second) reads the tile's first block's scales
                const float *b_row = reinterpret_cast<const float *>(p.b_scale) +
                                     int64_t((n0 < p.n ? n0 : u * ROWS) / 128) * p.b_scale_ld;
                consume_kblocks_swap_block_scaled<DT, MN>(d, pipe, st, kb0, kb1, p, b_row, desc, release);
            } else {
                consume_kblocks<DT, MN>(d, pipe, st, kb0, kb1, desc, release);
            }
            if constexpr (SPLIT > 1)
                if (!split->reduce(d, partial, rank, consumer, iter)) continue;
            if (n0 < p.n)
                with_act(p.act, [&](auto act) {
                    epilogue_swap<DT, OT, MN, is_fp8<DT> && !BLOCK_SCALED, decltype(act)>(d, p, n0, out);
                });
            if constexpr (SPLIT > 1) zero(d);
        }
        if (thread_in_warpgroup() == 0) bulk_wait_group<0>();
    }
    if constexpr (SPLIT > 1) cluster_sync();
}

template <int DT, int OT, int G>
__device__ void gemm_pingpong(const talon__gemm_params &p) {
    gemm_tile<DT, OT, 128, G, 1, 0, 1>(p);
}

} // namespace talon::gemm

TALON__KERNELS_gemm(TALON_DEV_KERNEL)
