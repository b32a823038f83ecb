// tile_parts.cuh - the pieces of a persistent wgmma tile kernel shared by the gemm and
// moe_gemm families: the k-block's wgmmas, the consumer's main loops over a stage ring (plain,
// and with fp8 block scales), the swizzled output staging and the activation dispatch. 128-row tiles (two consumer warpgroups
// of 64 rows), k-blocks of one 128-byte swizzled row.
#pragma once
#include "dev/activation.cuh"
#include "dev/pipeline.cuh"
#include "dev/tma.cuh"
#include "dev/warpgroup.cuh"
#include "dev/wgmma.cuh"
#include "talon/kernels/gemm.def"

namespace talon::gemm {
using namespace talon::dev;

constexpr int BM = TALON__GEMM_BM;
// k per k-block: one 128-byte swizzled row (64 bf16/f16, 128 e4m3)
template <int DT> constexpr int kblock = TALON__GEMM_BK_BYTES / int(sizeof(elem<DT>));
template <int DT> constexpr bool is_fp8 = DT == TALON__FP8_E4M3;

// One k-block: four wgmma k-steps (k16 of bf16/f16, k32 of e4m3), 32 bytes apart inside the
// 128-byte swizzled rows; BN is the wgmma's N.
template <int DT, int BN>
__device__ __forceinline__ void mma_kblock(float (&d)[BN / 2], uint64_t da, uint64_t db, bool acc) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) mma_ss<DT, BN>(d, desc_add(da, kk * 32), desc_add(db, kk * 32), acc || kk > 0);
}

// Where the pair (row r, columns 8 qq + 2 (l % 4) + {0, 1}) of a 128-byte-swizzled staging
// chunk goes (row r of the chunk is 128 bytes; 16-byte unit u of row r sits at u ^ (r % 8)).
// Conflict-free: the 8 rows of one store instruction land in 8 different 16-byte units.
// 32-bit shared addresses and st.shared: no 64-bit pointer to keep live; as volatile asm they
// stay in order with the named barriers, the proxy fence and the residual's ld.shared.
template <typename T> __device__ __forceinline__ uint32_t stage_addr(uint32_t chunk, int r, int qq, int lane) {
    if constexpr (sizeof(T) == 4)
        return chunk + r * 128 + (((2 * qq + (lane % 4) / 2) ^ (r & 7)) << 4) + (lane % 2) * 8;
    else
        return chunk + r * 128 + ((qq ^ (r & 7)) << 4) + (lane % 4) * 4;
}
template <typename T> __device__ __forceinline__ void stage_pair(uint32_t chunk, int r, int qq, int lane, float lo, float hi) {
    if constexpr (sizeof(T) == 4)
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(stage_addr<T>(chunk, r, qq, lane)), "f"(lo), "f"(hi));
    else
        asm volatile("st.shared.b32 [%0], %1;" ::"r"(stage_addr<T>(chunk, r, qq, lane)), "r"(pack2<T>(lo, hi)));
}

// Per-warpgroup output staging: two 128-byte x 64-row chunks, alternating, each stored by
// one TMA store while the next is written. A chunk: begin() (its buffer, once free), the
// warpgroup's writes into it, then store_tma() (or the caller's own copy-out and next()).
// barrier: the warpgroup's named barrier; leader: its one thread that waits and stores.
struct Staging {
    uint32_t buf;    // shared address of 2 x 8 KB, 1024-aligned
    uint32_t count;  // chunks staged so far (selects the buffer)
    uint32_t bias_s; // shared address of the tile's bias (bn 16-bit values; gemm_tile only)

    // The next chunk's buffer, after the TMA store that used it two chunks ago has read it
    // and every thread of the warpgroup is done with the chunk before.
    __device__ __forceinline__ uint32_t begin(int barrier, bool leader) const {
        if (leader) bulk_wait_group_read<1>();
        named_bar_sync(barrier, kWarpgroupThreads);
        return buf + (count & 1) * 8192;
    }
    // The chunk staged at chunk_buf to (c0, c1) of map: one asynchronous TMA store.
    __device__ __forceinline__ void store_tma(const CUtensorMap *map, uint32_t chunk_buf, int c0,
                                              int c1, int barrier, bool leader) {
        fence_proxy_async(); // the generic-proxy writes, before the TMA store reads them
        named_bar_sync(barrier, kWarpgroupThreads);
        if (leader) {
            tma_store_2d(map, __cvta_shared_to_generic(chunk_buf), c0, c1);
            bulk_commit_group();
        }
        next();
    }
    __device__ __forceinline__ void next() { count++; }
    // Both buffers free: every TMA store issued so far has read its chunk.
    __device__ __forceinline__ void wait_reads(int barrier, bool leader) const {
        if (leader) bulk_wait_group_read<0>();
        named_bar_sync(barrier, kWarpgroupThreads);
    }
};

// A pair of values of type T from shared memory as floats.
template <typename T> __device__ __forceinline__ float2 load_shared_pair(uint32_t addr) {
    if constexpr (sizeof(T) == 4) {
        float2 v;
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
        return v;
    } else {
        uint32_t w;
        asm volatile("ld.shared.b32 %0, [%1];" : "=r"(w) : "r"(addr));
        return unpack2<T>(w);
    }
}

// Calls f(Act{}) with the activation functor of a talon_gemm_act value (a run-time value of
// the launch, uniform over the grid; each epilogue is compiled once per activation).
template <typename F> __device__ __forceinline__ void with_act(int act, F &&f) {
    switch (act) {
    case 1: f(Relu{}); break;
    case 2: f(Silu{}); break;
    case 3: f(GeluErf{}); break;
    case 4: f(GeluTanh{}); break;
    default: f(Identity{}); break;
    }
}

template <int K> __device__ __forceinline__ void zero(float (&d)[K]) {
#pragma unroll
    for (int i = 0; i < K; i++) d[i] = 0.f;
}

// A consumer warp is done with a stage: one arrival (by `arriver`, one lane of the warp) in
// every CTA of the cluster whose producer may refill it (both, in a pair).
template <int CM, int STAGES>
__device__ __forceinline__ void release_stage(Pipeline<STAGES> *pipe, uint32_t stage,
                                              bool arriver) {
    if (!arriver) return;
    if constexpr (CM > 1) {
#pragma unroll
        for (int r = 0; r < CM; r++) mbar_arrive_remote(&pipe->empty[stage], r);
    } else {
        mbar_arrive(&pipe->empty[stage]);
    }
}

// The k-blocks [kb0, kb1) of one tile into d, for both bodies: wait for each stage, issue its
// wgmmas (desc(stage, da, db) gives the operands), keep one k-block in flight and release the
// stage before it (release(stage)), then wait for the last.
template <int DT, int N, int STAGES, typename Desc, typename Release>
__device__ __forceinline__ void consume_kblocks(float (&d)[N / 2], Pipeline<STAGES> *pipe,
                                                PipeState<STAGES> &st, int kb0, int kb1,
                                                Desc desc, Release release) {
    uint32_t prev = 0;
    for (int kb = kb0; kb < kb1; kb++) {
        pipe->consumer_wait(st);
        uint64_t da, db;
        desc(st.stage, da, db);
        wgmma_fence();
        mma_kblock<DT, N>(d, da, db, kb > kb0);
        wgmma_commit();
        // The previous k-block's wgmmas are done: its stage may be refilled.
        wgmma_wait<1>();
        if (kb > kb0) release(prev);
        prev = st.stage;
        st.advance();
    }
    wgmma_wait<0>();
    fence_operand(d);
    if (kb1 > kb0) release(prev);
}

// A compile-time index (of a register set: static, so the sets stay in registers).
template <int I> struct Slot {
    static constexpr int value = I;
};
template <int I, int N, typename F> __device__ __forceinline__ void static_for(F &&f) {
    if constexpr (I < N) {
        f(Slot<I>{});
        static_for<I + 1, N>(f);
    }
}

// N k-blocks from kb in flight together, each in register set j = its index in the group:
// load(kb + j, Slot<j>) starts the loads it needs beside its product (fp8 scales), issue(kb +
// j, Slot<j>) waits for its stage and issues its wgmmas (one commit group), retire(kb + j,
// Slot<j>) runs once they are done, while the group's later wgmmas still run.
template <int N, typename Load, typename Issue, typename Retire>
__device__ __forceinline__ void kblock_group(int kb, Load &load, Issue &issue, Retire &retire) {
    static_for<0, N>([&](auto j) { load(kb + decltype(j)::value, j); });
    static_for<0, N>([&](auto j) { issue(kb + decltype(j)::value, j); });
    static_for<0, N>([&](auto j) {
        wgmma_wait<N - 1 - decltype(j)::value>();
        retire(kb + decltype(j)::value, j);
    });
}

// The last k-blocks [kb, kb1), fewer than 2 H of them, in groups of H, H / 2, .., 1.
template <int H, typename Load, typename Issue, typename Retire>
__device__ __forceinline__ void kblocks_rest(int kb, int kb1, Load &load, Issue &issue, Retire &retire) {
    if constexpr (H >= 1) {
        if (kb + H <= kb1) {
            kblock_group<H>(kb, load, issue, retire);
            kb += H;
        }
        kblocks_rest<H / 2>(kb, kb1, load, issue, retire);
    }
}

// The k-blocks [kb0, kb1) in groups of N in flight (N a power of two; the rest in groups of
// N / 2, N / 4, .., 1), for consumers that must read each k-block's product on its own (fp8
// block scales) and would otherwise wait out every k-block's wgmma and scale-load latency in
// turn. No wgmma is in flight across the loop's back edge, so ptxas can tell which group
// each wait covers (a set left in flight from one iteration to the next made it serialise
// the wgmmas: C7514).
template <int N, typename Load, typename Issue, typename Retire>
__device__ __forceinline__ void kblocks_in_groups(int kb0, int kb1, Load load, Issue issue,
                                                  Retire retire) {
    int kb = kb0;
    for (; kb + N <= kb1; kb += N) kblock_group<N>(kb, load, issue, retire);
    kblocks_rest<N / 2>(kb, kb1, load, issue, retire);
}

// The k-blocks of a tile in which this warpgroup has no products to compute: wait for each
// stage and release it at once (the producer refills a stage once every consumer warp has).
template <int STAGES, typename Release>
__device__ __forceinline__ void pass_kblocks(Pipeline<STAGES> *pipe, PipeState<STAGES> &st,
                                             int kblocks, Release release) {
    for (int kb = 0; kb < kblocks; kb++) {
        pipe->consumer_wait(st);
        release(st.stage);
        st.advance();
    }
}

// d += tmp (one k-block's product over part PART of the tile's columns, PN of them) scaled
// by a's scale of each of the thread's two rows times b's scale of the 128-row block the
// columns come from: c[h][half], half = the half-tile (lo: accumulator columns < BN / 2)
// (fp8 block scales).
template <int BN, int PN, int PART>
__device__ __forceinline__ void promote(float (&d)[BN / 2], const float (&tmp)[PN / 2],
                                        const float (&c)[2][2]) {
#pragma unroll
    for (int i = 0; i < PN / 2; i++) {
        const int half = PN == BN ? i >= BN / 4 : PART;
        d[PART * PN / 2 + i] = fmaf(tmp[i], c[(i / 2) % 2][half], d[PART * PN / 2 + i]);
    }
}

// The block scales of one launch (fp8, DeepSeek-V3's layout, talon_gemm's BLOCK): a's, k-block
// rows of a_ld floats; b's (of the tile's weights), one per 128-row block and k-block, rows of
// b_ld floats; n: the output columns (gated: b's up rows start n on).
struct BlockScales {
    const float *a;
    int64_t a_ld;
    const float *b;
    int b_ld, n;
};

// The rows of a's scales for this thread's two accumulator rows of the warpgroup's 64 from
// row0 (rows at or past `rows` read row 0's: their results are clipped or dropped).
__device__ __forceinline__ void block_scale_rows(int row0, int rows, int (&ra)[2]) {
    const int r = row0 + 16 * warp_in_warpgroup() + lane_index() / 4;
    ra[0] = r < rows ? r : 0;
    ra[1] = r + 8 < rows ? r + 8 : 0;
}

// The k-blocks [kb0, kb1) of one tile into d with fp8 block scales: each k-block's product
// goes to a second accumulator set, which is waited for and added to d times a's scale of the
// thread's two rows (ra: their rows of a's scales) and b's of the half-tile's 128-row block
// (n0: the tile's first output column; gated: the gate's block and the up's). The scales
// differ per k-block, so they cannot wait for the epilogue; this also keeps the fp8 tensor
// cores' short accumulation to one k-block. bn 256: the product goes to tmp one half-tile (128 columns) at
// a time; the other warpgroup's wgmmas keep the tensor cores busy during each promotion (two
// full 64 x 256 sets would take all 256 registers). a_desc(stage): the warpgroup's a
// descriptor; b_tile(stage): the stage's b tile.
// AHEAD 1: each k-block's scales are loaded a k-block before their use, into one of two
// register sets that alternate (two k-blocks a pass, so that no just-loaded value is copied:
// the copy would wait for it). talon_moe_gemm's kernels take it; the dense kernel measured
// slower with it and keeps AHEAD 0 (gemm.md: its scale loads outlast even a k-block).
template <int DT, int BN, int G, int AHEAD, int STAGES, typename ADesc, typename BTile, typename Release>
__device__ __forceinline__ void consume_kblocks_block_scaled(
    float (&d)[BN / 2], Pipeline<STAGES> *pipe, PipeState<STAGES> &st, int kb0, int kb1,
    const BlockScales &sc, const int (&ra)[2], int n0, ADesc a_desc, BTile b_tile,
    Release release) {
    static_assert(AHEAD == 0 || AHEAD == 1, "scales ahead: 0 or 1 k-block");
    constexpr int PN = BN == 256 ? 128 : BN, BK = kblock<DT>;
    const int hi = G ? n0 + sc.n : n0 + BN / 2;
    // A last tile's second half-tile may start past b's rows (its columns are clipped): its
    // scales row would too, so it reads the first's.
    const float *bl = sc.b + (n0 / 128) * sc.b_ld;
    const float *bh = G || hi < sc.n ? sc.b + (hi / 128) * sc.b_ld : bl;
    float tmp[PN / 2];
    // One k-block with its scales s: a's of the thread's two rows, b's of the two half-tiles.
    auto kblock = [&](const float (&s)[4]) {
        const float c[2][2] = {{s[0] * s[2], s[0] * s[3]}, {s[1] * s[2], s[1] * s[3]}};
        pipe->consumer_wait(st);
        const uint64_t da = a_desc(st.stage);
        const auto *b = b_tile(st.stage);
        wgmma_fence();
        mma_kblock<DT, PN>(tmp, da, make_desc_kmajor<Swizzle::B128>(b), false);
        wgmma_commit();
        wgmma_wait<0>();
        fence_operand(tmp);
        promote<BN, PN, 0>(d, tmp, c);
        if constexpr (PN < BN) {
            wgmma_fence();
            mma_kblock<DT, PN>(tmp, da, make_desc_kmajor<Swizzle::B128>(b + PN * BK), false);
            wgmma_commit();
            wgmma_wait<0>();
            fence_operand(tmp);
            promote<BN, PN, 1>(d, tmp, c);
        }
        release(st.stage);
        st.advance();
    };
    if constexpr (AHEAD == 0) {
        zero(d);
        // a's row pointer steps in 64 bits: ceil(k / 128) x a_ld may pass 2^31
        const float *as = sc.a + int64_t(kb0) * sc.a_ld;
        for (int kb = kb0; kb < kb1; kb++, as += sc.a_ld) {
            const float s[4] = {__ldg(as + ra[0]), __ldg(as + ra[1]), __ldg(bl + kb), __ldg(bh + kb)};
            kblock(s);
        }
    } else {
        // in program order before the stage waits (ldg_ordered: __ldg may be sunk under them)
        auto load_scales = [&](int kb, float (&s)[4]) {
            const float *ak = sc.a + int64_t(kb) * sc.a_ld;
            s[0] = ldg_ordered(ak + ra[0]);
            s[1] = ldg_ordered(ak + ra[1]);
            s[2] = ldg_ordered(bl + kb);
            s[3] = ldg_ordered(bh + kb);
        };
        float q[2][4] = {};
        if (kb0 < kb1) load_scales(kb0, q[0]);
        zero(d);
        for (int kb = kb0; kb < kb1; kb += 2) {
            static_for<0, 2>([&](auto j) { // k-block kb + j, its scales in q[j]
                constexpr int J = decltype(j)::value;
                const int k = kb + J;
                if (k >= kb1) return;
                if (k + 1 < kb1) load_scales(k + 1, q[(J + 1) % 2]);
                kblock(q[J]);
            });
        }
    }
}

} // namespace talon::gemm
