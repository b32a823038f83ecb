// moe_gemm.cu - the MoE expert GEMMs over moe_align_block_size's layout: for each block of
// 128 sorted slots (one expert e = expert_ids[block]) and each slot s of it,
//     d row of s = epilogue(a row of s . w[e]^T)
// where a's row is the slot's own (a_rows SORTED), its token's (TOKEN: sorted_token_ids[s] /
// topk) or its pair's (PAIR: sorted_token_ids[s]), and d's row the slot's own (SORTED) or its
// pair's (PAIR). The grouped GEMM runs on the same kernels: its contiguous layout is a SORTED
// a and d with one group per block (expert_ids); its masked layout walks ceil(group_size /
// 128) blocks per group and writes only the first group_rows[g] rows of each group.
// The dense GEMM's tile (kernels/gemm/tile_parts.cuh) with three changes:
//   - b's tile comes from expert e's weights (a 3D tensor map [experts, rows, k]);
//   - a gathered a (TOKEN, PAIR) is copied by all 128 producer threads with 16-byte
//     cp.async into the 128-byte swizzle, 4 rows of 128 bytes per warp instruction, zero-
//     filling the padding slots (sentinel ids); a SORTED a is one TMA box as in the GEMM;
//   - a scattered d (PAIR, or the part of a masked block below its group's count) leaves the
//     staging chunk by coalesced 16-byte stores, a row per 8 threads, skipping padding slots;
//     a SORTED d by TMA stores.
// The epilogue adds an optional bias per group (talon_moe_gemm's padding slots take none), and
// a gated one takes glu(act, gate, up): act(gate) up, or gpt-oss's clamped SwiGLU.
// Blocks past num_tokens_post_padded or of an expert outside [0, experts) are skipped by
// producer and consumers alike (they read the same ids). CTAs run in clusters of 2 on adjacent
// tiles whose producers start each round of tiles together (L2 sharing of the weights).
// At decode (params.skip_padding), a consumer warpgroup whose 64 slots are all padding issues
// no wgmmas for the tile. talon_moe_gemm at up to 64 tokens runs moe_gemm_swap instead (the
// product transposed: the weights as wgmma's M, a few slots as its N; at the end of the file).
// fp8, bf16 out: DeepSeek-V3 block scales applied per k-block (tile_parts.cuh's
// consume_kblocks_block_scaled; a's scales of the row of a each slot comes from), or (SC 1)
// a scale per tensor or per row of a times one per group or per row of the group's b, applied
// in the epilogue; the transposed kernel takes both (block scales: its own k-block loop).
// Checked mode (kernels/dev/check.cuh) records a sorted id above the sentinel (negative ones
// included; treated as padding, as always) where a thread reads one, and a
// num_tokens_post_padded (rows_used) outside [0, the rows the grid walks] or a group_rows
// entry outside [0, group_size] (thread 0 of CTA 0). Expert ids outside [0, experts) are
// expert parallelism's skipped blocks, not violations.
#include "dev/async.cuh"
#include "dev/check.cuh"
#include "dev/kernel.cuh"
#include "dev/scheduler.cuh"
#include "dev/tma.cuh"
#include "gemm/tile_parts.cuh"
#include "talon/kernels/moe_gemm.def"

namespace talon::moe_gemm {
using namespace talon::dev;
using namespace talon::gemm;

// d's type: the inputs', bf16 for fp8.
template <int DT> using out_elem = elem<is_fp8<DT> ? TALON__BF16 : DT>;

// A block of 128 rows: its expert (group; -1: no work), first row of a and d (SORTED), and
// rows to write (below 128 only in a masked layout's last block of a group).
struct Block {
    int e, s0, live;
};

// Rows that a masked group holds, clamped into [0, group_size].
__device__ __forceinline__ int group_rows(const talon__moe_gemm_params &p, int g) {
    const int r = __ldg(reinterpret_cast<const int *>(p.group_rows) + g);
    return r < 0 ? 0 : r > p.group_size ? p.group_size : r;
}

__device__ __forceinline__ Block block_at(const talon__moe_gemm_params &p, int block, int num_post) {
    if (p.layout == TALON__MOE_LAYOUT_MASKED) {
        const int per_group = (p.group_size + BM - 1) / BM;
        const int g = block / per_group, r0 = (block - g * per_group) * BM;
        const int rows = group_rows(p, g);
        return Block{rows > r0 ? g : -1, g * p.group_size + r0, min(rows - r0, BM)};
    }
    int e = -1;
    if (block * BM < num_post) {
        e = __ldg(reinterpret_cast<const int *>(p.expert_ids) + block);
        if (unsigned(e) >= unsigned(p.experts)) e = -1;
    }
    return Block{e, block * BM, BM};
}

// Rows in use of the aligned layouts (all of them without a num_post), and thread 0 of CTA 0
// checks the device counts once (checked mode).
__device__ __forceinline__ int rows_in_use(const talon__moe_gemm_params &p) {
    const int walked = p.blocks * BM;
    const int num_post = p.num_post ? __ldg(reinterpret_cast<const int *>(p.num_post)) : walked;
    if (checking(p.check) && blockIdx.x == 0 && threadIdx.x == 0) {
        if (p.layout == TALON__MOE_LAYOUT_MASKED) {
            for (int g = 0; g < p.experts; g++) {
                const int r = __ldg(reinterpret_cast<const int *>(p.group_rows) + g);
                if (r < 0 || r > p.group_size) {
                    check_fail(p.check, TALON__CHECK_GROUPED_GEMM_GROUP_ROWS, g, r, p.group_size);
                    break;
                }
            }
        } else if (num_post < 0 || num_post > walked) {
            check_fail(p.check, p.layout == TALON__MOE_LAYOUT_CONTIGUOUS ? TALON__CHECK_GROUPED_GEMM_ROWS_USED
                                                                         : TALON__CHECK_MOE_GEMM_NUM_POST,
                       0, num_post, int64_t(walked));
        }
    }
    return num_post;
}

// The pair of sorted slot s, or -1 for a padding slot (the sentinel, or any id >= pairs;
// checked mode records one above the sentinel).
__device__ __forceinline__ int pair_of(const talon__moe_gemm_params &p, int s, unsigned f) {
    if (f < unsigned(p.pairs)) return int(f);
    if (f > unsigned(p.pairs) && checking(p.check))
        check_fail(p.check, TALON__CHECK_MOE_GEMM_SORTED_ID, s, int(f), p.pairs);
    return -1;
}
__device__ __forceinline__ unsigned sorted_id(const talon__moe_gemm_params &p, int s) {
    return __ldg(reinterpret_cast<const unsigned *>(p.sorted_token_ids) + s);
}
__device__ __forceinline__ int slot_pair(const talon__moe_gemm_params &p, int s) {
    return pair_of(p, s, sorted_id(p, s));
}

// The row of a that slot s (sorted id f) reads (~0: a padding slot, zero-filled): its own
// (SORTED, as is), its token's or its pair's.
__device__ __forceinline__ unsigned a_row_of(const talon__moe_gemm_params &p, int s, unsigned f) {
    if (p.a_rows == TALON__MOE_ROWS_SORTED) return unsigned(s);
    const int pr = pair_of(p, s, f);
    if (pr < 0) return ~0u;
    return p.a_rows == TALON__MOE_ROWS_TOKEN ? unsigned(pr) / unsigned(p.topk) : unsigned(pr);
}

// The row of a whose fp8 scales slot s (sorted id f) takes: a_row_of's, row 0's for a padding
// slot (zeros) and for a sorted slot at or past scale_rows (the masked layout's last block).
__device__ __forceinline__ int scale_row(const talon__moe_gemm_params &p, int s, unsigned f) {
    const unsigned r = a_row_of(p, s, f);
    return r < unsigned(p.scale_rows) ? int(r) : 0;
}
__device__ __forceinline__ int scale_row(const talon__moe_gemm_params &p, int s) {
    // a sorted a needs no id (the grouped GEMM has none to read)
    return scale_row(p, s, p.a_rows == TALON__MOE_ROWS_SORTED ? 0u : sorted_id(p, s));
}

// Whether a block's half (64 rows from slot s0, `live` of them below a masked group's count)
// needs its products: not when all its slots are padding and their results are not written
// (d PAIR) or are zeros anyway (a gathered: zero rows, act(0) x up = 0). moe_align pads each
// expert's rows at the end of its last block, so at decode (a few rows per expert) the
// second half of every block is padding. Warp-uniform.
__device__ __forceinline__ bool half_has_work(const talon__moe_gemm_params &p, int s0, int live) {
    if (live <= 0) return false;
    if (!p.skip_padding || p.layout != TALON__MOE_LAYOUT_ALIGNED ||
        (p.a_rows == TALON__MOE_ROWS_SORTED && p.d_rows == TALON__MOE_ROWS_SORTED))
        return true;
    const int s = s0 + lane_index();
    return __any_sync(~0u, slot_pair(p, s) >= 0 || slot_pair(p, s + 32) >= 0);
}

// The scales of columns col and col + 1 (step 1: one per column, 8-byte aligned pairs; 0: one).
__device__ __forceinline__ float2 scale_pair(const float *s, int col, int step) {
    if (!step) {
        const float v = __ldg(s);
        return make_float2(v, v);
    }
    return __ldg(reinterpret_cast<const float2 *>(s + col));
}

// Group e's bias row (d's type; gated: n gate biases, then n up biases), or null without one.
template <int DT, int G>
__device__ __forceinline__ const out_elem<DT> *expert_bias(const talon__moe_gemm_params &p, int e) {
    return p.bias ? reinterpret_cast<const out_elem<DT> *>(p.bias) + int64_t(e) * (G ? 2 : 1) * p.n
                  : nullptr;
}

// The bias of columns col and col + 1 (of d's type) as floats; zeros without one.
template <typename T>
__device__ __forceinline__ float2 bias_pair(const T *bias, int col) {
    if (!bias) return make_float2(0.f, 0.f);
    return make_float2(to_f32(bias[col]), to_f32(bias[col + 1]));
}

// The epilogue's activation: talon_gemm_act's, or (gated kernels only: the host allows it with
// gated alone) TALON_GEMM_ACT_CLAMPED_SWIGLU with the launch's alpha and limit.
template <int G, typename F>
__device__ __forceinline__ void with_moe_act(const talon__moe_gemm_params &p, F &&f) {
    if constexpr (G) {
        if (p.act == TALON__MOE_ACT_CLAMPED_SWIGLU) {
            f(ClampedSwiglu(p.act_alpha, p.act_limit));
            return;
        }
    }
    with_act(p.act, f);
}

// The bytes of a gathered 16-byte piece of a row of a that lie inside its k columns, `left`
// (> 0) of them from the piece's first: fp8's pieces of 16 elements can end 8 past k (k is a
// multiple of 8), in the row's padding (any bytes, NaN too) or past a's end, so only the
// bytes inside are read and the rest zero-filled; 16-bit pieces end inside.
template <typename T> __device__ __forceinline__ int piece_bytes(int left) {
    return sizeof(T) == 1 && left < 16 ? left : 16;
}

// One warpgroup's 64 rows (sorted slots s0..s0 + 63) x bn columns of the tile through the
// epilogue: plus the bias of the group's columns (talon_moe_gemm: slots with a pair only), act
// (gated: glu(act, gate, up)), times the router weight of the slot's pair (padding slots: 0),
// staged 128 bytes of columns at a time (tile_parts.cuh), then written by a TMA
// store (d SORTED, all 64 rows live) or by 16-byte stores to the pairs' rows (PAIR) or to the
// first `live` rows (a masked group's last block). Register 4q + 2h + e of
// d holds row 16 w + l / 4 + 8 h, column 8 q + 2 (l % 4) + e (gated: the up half's at + bn / 4).
// SC 1 (fp8 epilogue scales): each value times a's scale of the row of a its slot was
// computed from (the slot's, its token's or its pair's) and b's of its column in group e
// (gated: the gate's and the up's rows), before the activation; columns past n read column 0's.
template <int DT, int BN, int G, int SC, typename Act>
__device__ __forceinline__ void epilogue(const float (&d)[BN / 2], const talon__moe_gemm_params &p,
                                         int e, int s0, int live, int n0, Staging &st,
                                         const Act &act) {
    using T = out_elem<DT>;
    constexpr int OUT_COLS = G ? BN / 2 : BN, CHUNK = 64, QC = CHUNK / 8;
    const int lane = lane_index(), t = thread_in_warpgroup();
    const int r0 = 16 * warp_in_warpgroup() + lane / 4;
    const bool pairs = p.d_rows == TALON__MOE_ROWS_PAIR, leader = t == 0, scatter = pairs || live < 64;
    const int barrier = 1 + int(warpgroup_index()); // named barriers 2, 3
    // w: the router weight of the row's pair; ra (SC): a's scale of the row; bm: 1 where the
    // row takes the bias (0: a padding slot of talon_moe_gemm)
    float w[2] = {1.f, 1.f}, ra[2] = {1.f, 1.f}, bm[2] = {1.f, 1.f};
    const float *bs = reinterpret_cast<const float *>(p.b_scale) + (SC ? e * p.b_scale_expert : 0);
    const T *bias = expert_bias<DT, G>(p, e);
    if constexpr (SC)
#pragma unroll
        for (int h = 0; h < 2; h++)
            ra[h] = __ldg(reinterpret_cast<const float *>(p.a_scale) + scale_row(p, s0 + r0 + 8 * h) * p.a_scale_step);
    if (p.topk_weights || (bias && p.layout == TALON__MOE_LAYOUT_ALIGNED))
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int f = slot_pair(p, s0 + r0 + 8 * h);
            if (p.topk_weights) w[h] = f >= 0 ? __ldg(reinterpret_cast<const float *>(p.topk_weights) + f) : 0.f;
            bm[h] = f >= 0 ? 1.f : 0.f;
        }
    // scatter: this thread copies 16-byte piece t % 8 of rows t / 8 + 16 i, to d row rows[i]
    int rows[4];
    if (scatter)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = t / 8 + 16 * i;
            rows[i] = pairs ? slot_pair(p, s0 + r) : r < live ? s0 + r : -1;
        }
#pragma unroll
    for (int ch = 0; ch < OUT_COLS / CHUNK; ch++) {
        const int col0 = n0 + ch * CHUNK;
        if (col0 >= p.n) break; // the same in the whole warpgroup
        const uint32_t buf = st.begin(barrier, leader);
#pragma unroll
        for (int qq = 0; qq < QC; qq++) {
            const int i0 = 4 * (ch * QC + qq);
            // SC: b's scales of the pair's columns (gated: of the gate's and the up's rows); their
            // biases (columns past n read column 0's)
            float2 sg = make_float2(1.f, 1.f), su = sg;
            const int col = col0 + 8 * qq + 2 * (lane % 4), c = col < p.n ? col : 0;
            if constexpr (SC) {
                sg = scale_pair(bs, c, p.b_scale_step);
                if constexpr (G) su = scale_pair(bs, p.n + c, p.b_scale_step);
            }
            const float2 bg = bias_pair(bias, c), bu = G ? bias_pair(bias, p.n + c) : bg;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int i = i0 + 2 * h;
                const float x0 = fmaf(bg.x, bm[h], d[i] * (ra[h] * sg.x));
                const float x1 = fmaf(bg.y, bm[h], d[i + 1] * (ra[h] * sg.y));
                float y0, y1;
                if constexpr (G) {
                    y0 = glu(act, x0, fmaf(bu.x, bm[h], d[i + BN / 4] * (ra[h] * su.x)));
                    y1 = glu(act, x1, fmaf(bu.y, bm[h], d[i + BN / 4 + 1] * (ra[h] * su.y)));
                } else {
                    y0 = act.f(x0);
                    y1 = act.f(x1);
                }
                stage_pair<T>(buf, r0 + 8 * h, qq, lane, y0 * w[h], y1 * w[h]);
            }
        }
        if (!scatter) {
            st.store_tma(&p.d_map, buf, col0, s0, barrier, leader);
        } else { // the next begin()'s barrier keeps the buffer until every thread read it
            named_bar_sync(barrier, kWarpgroupThreads);
            const int col = col0 + (t % 8) * 8;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = t / 8 + 16 * i;
                uint4 v;
                asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                             : "r"(buf + r * 128 + (((t % 8) ^ (r & 7)) << 4)));
                if (rows[i] >= 0 && col < p.n)
                    *reinterpret_cast<uint4 *>(reinterpret_cast<T *>(p.d) + int64_t(rows[i]) * p.ldd + col) = v;
            }
            st.next();
        }
    }
}

// One warpgroup's half h of a tile through the epilogue, unless nothing of it is written:
// rows past a masked group's count, or a half without products (half_has_work) whose rows go
// to pairs. Without products, the sorted rows get their zeros from zero accumulators of their
// own (zeroing d itself would make ptxas serialise the next tile's wgmmas).
template <int DT, int BN, int G, int SC>
__device__ __forceinline__ void finish_half(const float (&d)[BN / 2],
                                            const talon__moe_gemm_params &p, const Block &blk,
                                            int h, bool products, int n0, Staging &out) {
    const int live = blk.live - 64 * h;
    if (live <= 0 || (!products && p.d_rows == TALON__MOE_ROWS_PAIR)) return;
    if (!products) {
        float z[BN / 2];
        zero(z);
        epilogue<DT, BN, G, 0>(z, p, blk.e, blk.s0 + 64 * h, live, n0, out, Identity{});
        return;
    }
    with_moe_act<G>(p, [&](const auto &act) {
        epilogue<DT, BN, G, SC>(d, p, blk.e, blk.s0 + 64 * h, live, n0, out, act);
    });
}

template <int DT, int BN, int G, int SC>
__device__ void moe_gemm_tile(const talon__moe_gemm_params &p) {
    using T = elem<DT>;
    constexpr int BK = kblock<DT>;
    constexpr int STAGES = TALON__MOE_GEMM_STAGES(BN);
    constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK;
    constexpr uint32_t A_BYTES = A_ELEMS * sizeof(T), B_BYTES = B_ELEMS * sizeof(T);
    constexpr int CONSUMER_WARPS = 8, CS = TALON__MOE_GEMM_CLUSTER;
    extern __shared__ uint8_t smem_raw[];
    // The 128-byte swizzle repeats every 1024 bytes: stage bases must be 1024-aligned.
    T *sa = reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sb = sa + STAGES * A_ELEMS;
    uint8_t *staging = reinterpret_cast<uint8_t *>(sb + STAGES * B_ELEMS); // 2 x 16 KB
    auto *pipe = reinterpret_cast<Pipeline<STAGES> *>(staging + 2 * 16384);
    uint64_t *round_bar = reinterpret_cast<uint64_t *>(pipe + 1); // [2], alternating rounds

    const bool gather = p.a_rows != TALON__MOE_ROWS_SORTED;
    const int tiles = p.blocks * p.tiles_n, kblocks = (p.k + BK - 1) / BK;
    const int wg = warpgroup_index();
    pdl_launch_dependents(); // the next kernel's CTAs take the SMs this grid leaves
    if (threadIdx.x == 0) {
        // a stage fills with b's TMA bytes (one arrive_expect_tx) and, gathering, the 128
        // producer threads' cp.async arrivals
        pipe->init(CONSUMER_WARPS, gather ? 1 + kWarpgroupThreads : 1);
        if (!gather) tma_prefetch_desc(&p.a);
        tma_prefetch_desc(&p.b_lo);
        tma_prefetch_desc(&p.b_hi);
        if (p.d_rows == TALON__MOE_ROWS_SORTED) tma_prefetch_desc(&p.d_map);
        mbar_init(&round_bar[0], CS - 1);
        mbar_init(&round_bar[1], CS - 1);
        mbar_fence_init();
    }
    cluster_sync(); // the peers' round barriers exist before anyone arrives on them
    pdl_wait();     // a programmatic dependent (talon.h): the previous kernel's writes visible
    const int num_post = rows_in_use(p);

    if (wg == 0) {
        setmaxnreg_dec<40>();
        if (!gather && threadIdx.x != 0) return; // TMA alone: one thread
        const int w = warp_in_warpgroup(), lane = lane_index();
        // gathering: lane o holds the a row of tile row 16 (o / 4) + 4 w + o % 4 (~0: a
        // padding slot, zero-filled); each warp instruction copies 4 rows x 8 pieces of 16 bytes
        const uint32_t dst = uint32_t((4 * w + lane / 8) * 128 + (((lane % 8) ^ ((4 * w + lane / 8) % 8)) << 4));
        const T *a_ptr = reinterpret_cast<const T *>(p.a_ptr);
        PipeState<STAGES> st;
        // Rounds: the cluster's CTAs take adjacent tiles u0 + rank (the same column, adjacent
        // blocks: mostly one expert's), and their producers start each round together, so an
        // expert's weights stream through L2 once for both (left alone, the CTAs drift apart
        // over a launch by more than L2 holds them: docs/notes/moe_gemm.md). Two barriers used
        // in turn: a peer can be one round ahead, never two (it waits for our arrival).
        const int rank = int(cluster_ctarank());
        int round = 0;
        for (int u0 = int(blockIdx.x) - rank; u0 < tiles; u0 += gridDim.x, round++) {
            if (threadIdx.x == 0)
#pragma unroll
                for (int r = 0; r < CS; r++)
                    if (r != rank) mbar_arrive_remote(&round_bar[round & 1], r);
            mbar_wait(&round_bar[round & 1], (round >> 1) & 1);
            const int u = u0 + rank;
            if (u >= tiles) continue;
            const TileCoord tc = tile_of(u, p.blocks, p.tiles_n, p.group);
            const Block blk = block_at(p, tc.m, num_post);
            if (blk.e < 0) continue;
            const int e = blk.e, s0 = blk.s0;
            const int lo = tc.n * (G ? BN / 2 : BN), hi = G ? lo : lo + BN / 2;
            unsigned mine = ~0u;
            if (gather) {
                const int f = slot_pair(p, s0 + 16 * (lane / 4) + 4 * w + lane % 4);
                if (f >= 0) mine = p.a_rows == TALON__MOE_ROWS_TOKEN ? unsigned(f) / unsigned(p.topk) : unsigned(f);
            }
            for (int kb = 0; kb < kblocks; kb++) {
                uint64_t *full = pipe->producer_acquire(st);
                if (threadIdx.x == 0) {
                    pipe->producer_commit(st, gather ? B_BYTES : A_BYTES + B_BYTES);
                    if (!gather) tma_load_2d(sa + st.stage * A_ELEMS, &p.a, full, kb * BK, s0);
                    T *b = sb + st.stage * B_ELEMS;
                    tma_load_3d(b, &p.b_lo, full, kb * BK, lo, e);
                    tma_load_3d(b + B_ELEMS / 2, &p.b_hi, full, kb * BK, hi, e);
                }
                if (gather) {
                    const int col = kb * BK + (lane % 8) * (16 / int(sizeof(T)));
                    const uint32_t base = smem_addr(sa + st.stage * A_ELEMS) + dst;
#pragma unroll
                    for (int i = 0; i < BM / 16; i++) {
                        const unsigned at = __shfl_sync(~0u, mine, 4 * i + lane / 8);
                        const bool ok = at != ~0u && col < p.k;
                        cp_async_16_zfill_bytes(base + i * 2048, a_ptr + (ok ? int64_t(at) * p.lda + col : 0),
                                                ok ? piece_bytes<T>(p.k - col) : 0);
                    }
                    cp_async_mbar_arrive_noinc(smem_addr(full));
                }
                st.advance();
            }
        }
        return;
    }

    setmaxnreg_inc<232>();
    const int band = wg - 1; // this warpgroup's 64 rows of the tile
    const bool arriver = lane_index() == 0;
    Staging out{smem_addr(staging + band * 16384), 0, 0};
    PipeState<STAGES> st;
    float d[BN / 2];
    for (int u = blockIdx.x; u < tiles; u += gridDim.x) {
        const TileCoord tc = tile_of(u, p.blocks, p.tiles_n, p.group);
        const Block blk = block_at(p, tc.m, num_post);
        if (blk.e < 0) continue;
        auto release = [&](uint32_t s) { release_stage<1>(pipe, s, arriver); };
        const bool work = half_has_work(p, blk.s0 + band * 64, blk.live - band * 64);
        if (!work) {
            pass_kblocks(pipe, st, kblocks, release);
        } else if constexpr (is_fp8<DT> && !SC) {
            // b's scales: expert e's; a's: of the rows of a the thread's two rows come from
            const BlockScales sc{reinterpret_cast<const float *>(p.a_scale), p.a_scale_ld,
                                 reinterpret_cast<const float *>(p.b_scale) + blk.e * p.b_scale_expert,
                                 p.b_scale_ld, p.n};
            const int r = blk.s0 + band * 64 + 16 * warp_in_warpgroup() + lane_index() / 4;
            const int ra[2] = {scale_row(p, r), scale_row(p, r + 8)};
            consume_kblocks_block_scaled<DT, BN, G, 1>(d, pipe, st, 0, kblocks, sc, ra,
                tc.n * (G ? BN / 2 : BN),
                [&](uint32_t s) {
                    if (gather) fence_proxy_async(); // as below
                    return make_desc_kmajor<Swizzle::B128>(sa + s * A_ELEMS + band * 64 * BK);
                },
                [&](uint32_t s) { return sb + s * B_ELEMS; }, release);
        } else {
            consume_kblocks<DT, BN>(d, pipe, st, 0, kblocks, [&](uint32_t s, uint64_t &da, uint64_t &db) {
                // a gathered by cp.async (generic proxy) is read by the tensor cores (async proxy)
                if (gather) fence_proxy_async();
                da = make_desc_kmajor<Swizzle::B128>(sa + s * A_ELEMS + band * 64 * BK);
                db = make_desc_kmajor<Swizzle::B128>(sb + s * B_ELEMS);
            }, release);
        }
        finish_half<DT, BN, G, SC>(d, p, blk, band, work, tc.n * (G ? BN / 2 : BN), out);
    }
    if (thread_in_warpgroup() == 0) bulk_wait_group<0>(); // every store done before the CTA's smem goes
}

// ---------------------------------------------------------------- decode (few rows per expert)
// At up to 64 tokens an expert gets at most that many rows (the router picks it once per
// token), so a block's 128 slots are mostly padding and the GEMM streams weights. moe_gemm_swap
// computes the product transposed, d^T = b a^T: 128 rows of expert e's weights (gated: 128
// gate and 128 up rows) fill wgmma's M side, 64 per consumer warpgroup, and the block's slots
// its N side in chunks of MN rows (16, 32 or 64; the plan's, from the tokens). A chunk whose MN
// slots are all padding is not computed: its sorted d rows get zeros by a TMA store of a zero
// chunk, its pair rows nothing. moe_align puts an expert's rows first in its block, so one
// chunk has work unless the routing names an expert twice for a token; then the weights are
// streamed once per chunk with work. a's rows are gathered by the loader's 128 threads
// (cp.async, any row layout), b's by TMA, as in moe_gemm_tile. fp8 (bf16 d): a's scale per
// tensor or per row times b's per group or per row, applied in the epilogue as there (SC 1),
// or DeepSeek-V3's block scales applied per k-block (SC 0).

// A tile's block as read from memory: its expert id (-1: none, or past num_post) and, in lane l
// of every warp, the sorted ids of slots l + 32 i. Read a tile ahead, so that their latency
// passes under the current tile's loads instead of stalling the stream at each tile's start.
struct SwapIds {
    int e;
    unsigned f[BM / 32];
};

__device__ __forceinline__ SwapIds swap_ids(const talon__moe_gemm_params &p, int u, int tiles,
                                            int num_post) {
    SwapIds x{-1, {}};
    const int block = u / p.tiles_n;
    if (u >= tiles) return x;
    if (block * BM < num_post) x.e = __ldg(reinterpret_cast<const int *>(p.expert_ids) + block);
#pragma unroll
    for (int i = 0; i < BM / 32; i++) x.f[i] = sorted_id(p, block * BM + 32 * i + lane_index());
    return x;
}

// The rows each chunk of MN slots of the block from s0 needs: byte j is the slots of chunk j up
// to its last one with a pair, rounded up to a multiple of 8 (0: no pair, the chunk is not
// computed). moe_align puts an expert's rows first in its block, so a chunk of 64 slots at
// decode mostly needs 8 or 16: only those are gathered and go through the epilogue; the
// others are padding (zeros in a SORTED d, nothing in a PAIR d). Warp-collective.
template <int MN>
__device__ __forceinline__ uint64_t chunk_rows(const talon__moe_gemm_params &p, int s0,
                                               const SwapIds &ids) {
    uint64_t rows = 0;
#pragma unroll
    for (int i = 0; i < BM / 32; i++) {
        const int s = s0 + 32 * i + lane_index();
        const uint32_t b = __ballot_sync(~0u, pair_of(p, s, ids.f[i]) >= 0);
#pragma unroll
        for (int c = 0; c < (MN < 32 ? 32 / MN : 1); c++) {
            const uint32_t part = MN < 32 ? (b >> (c * MN)) & ((1u << MN) - 1) : b;
            // the part's slots sit at (32 i) % MN + c MN.. of chunk (32 i) / MN + c; later
            // parts of a chunk end further in, so the last nonzero one sets its rows
            const int chunk = (32 * i) / MN + c, end = (32 * i) % MN + 32 - __clz(part);
            if (part) rows = (rows & ~(uint64_t(0xff) << (8 * chunk))) |
                             uint64_t((end + 7) & ~7) << (8 * chunk);
        }
    }
    return rows;
}
__device__ __forceinline__ int rows_of_chunk(uint64_t rows, int j) { return int(rows >> (8 * j)) & 0xff; }

// The sorted id of slot r (0..127) of the block, from the lane that holds it (warp-collective).
// Every register is shuffled and one kept: picking the register first made ptxas index the
// ids in local memory.
__device__ __forceinline__ unsigned id_of(const SwapIds &ids, int r) {
    unsigned v = 0;
#pragma unroll
    for (int i = 0; i < BM / 32; i++) {
        const unsigned x = __shfl_sync(~0u, ids.f[i], r % 32);
        v = r / 32 == i ? x : v;
    }
    return v;
}

// Per-column values of this thread's two output columns (16 w + l / 4 + 8 h of the
// warpgroup's) in expert e: the gate's (or only) rows' and the up rows'. Columns past n read
// column 0's.
struct ColumnValues {
    float g[2], u[2];
};
// fp8: b's scales.
template <int G>
__device__ __forceinline__ ColumnValues column_scales(const talon__moe_gemm_params &p, int e, int n0) {
    const float *bs = reinterpret_cast<const float *>(p.b_scale) + e * p.b_scale_expert;
    ColumnValues cs{};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int col = n0 + 16 * warp_in_warpgroup() + lane_index() / 4 + 8 * h, c = col < p.n ? col : 0;
        cs.g[h] = __ldg(bs + c * p.b_scale_step);
        if constexpr (G) cs.u[h] = __ldg(bs + (p.n + c) * p.b_scale_step);
    }
    return cs;
}

// The bias (zeros without one).
template <int DT, int G>
__device__ __forceinline__ ColumnValues column_bias(const talon__moe_gemm_params &p, int e, int n0) {
    ColumnValues cb{};
    const auto *bias = expert_bias<DT, G>(p, e);
    if (!bias) return cb;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int col = n0 + 16 * warp_in_warpgroup() + lane_index() / 4 + 8 * h, c = col < p.n ? col : 0;
        cb.g[h] = to_f32(bias[c]);
        if constexpr (G) cb.u[h] = to_f32(bias[p.n + c]);
    }
    return cb;
}

// One warpgroup's 64 output columns from n0 x the MN slots from s0 through the epilogue: plus
// the bias of the columns (slots with a pair only), act (gated: glu(act, gate, up)), times the
// router weight of the slot's pair, staged as MN rows of 128 bytes, then written by a TMA
// store (d SORTED) or by 16-byte stores to the pairs' rows. Only the first `need` slots
// (chunk_rows) are computed; the rest of a SORTED d gets zeros.
// Register 4q + 2h + e of g (and u) holds column 16 w + l / 4 + 8 h, slot 8 q + 2 (l % 4) + e.
// Threads t < MN bring slot t's weight, pair (-1: padding, which takes no bias; a PAIR d's row)
// and (fp8) a's scale (w, f, ra: read before the chunk's products); w_s, pair_s, ra_s: the
// warpgroup's MN of them in shared memory. SC: each value times a's scale of its slot's row
// and b's of its column (cs: gate, up), before the bias (cb: gate, up).
template <int DT, int MN, int G, int SC, typename Act>
__device__ __forceinline__ void epilogue_swap(const float (&g)[MN / 2], const float (&u)[MN / 2],
                                              const talon__moe_gemm_params &p, int s0, int need,
                                              int n0, float w, int f, float ra,
                                              const ColumnValues &cs, const ColumnValues &cb,
                                              const Act &act, Staging &st, float *w_s,
                                              int *pair_s, float *ra_s) {
    using T = out_elem<DT>;
    const int lane = lane_index(), t = thread_in_warpgroup();
    const int c0 = 16 * warp_in_warpgroup() + lane / 4;
    const bool pairs = p.d_rows == TALON__MOE_ROWS_PAIR, leader = t == 0;
    const int barrier = 1 + int(warpgroup_index()); // named barriers 2, 3
    const uint32_t buf = st.begin(barrier, leader); // also: every thread done with the last rows
    if (t < MN) {
        w_s[t] = w;
        pair_s[t] = f;
        if constexpr (SC) ra_s[t] = ra;
    }
    named_bar_sync(barrier, kWarpgroupThreads);
#pragma unroll
    for (int q = 0; q < MN / 8; q++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                if (8 * q >= need) continue; // warp-uniform: slots of padding only
                const int i = 4 * q + 2 * h + e, r = 8 * q + 2 * (lane % 4) + e, c = c0 + 8 * h;
                const float sa = SC ? ra_s[r] : 1.f, bm = pair_s[r] >= 0 ? 1.f : 0.f;
                const float xg = fmaf(cb.g[h], bm, SC ? g[i] * (sa * cs.g[h]) : g[i]);
                float y;
                if constexpr (G) y = glu(act, xg, fmaf(cb.u[h], bm, SC ? u[i] * (sa * cs.u[h]) : u[i]));
                else y = act.f(xg);
                const T v = from_f32<T>(y * w_s[r]);
                const uint32_t at = buf + r * 128 + (((c / 8) ^ (r & 7)) << 4) + (c % 8) * 2;
                asm volatile("st.shared.b16 [%0], %1;" ::"r"(at), "h"(*reinterpret_cast<const unsigned short *>(&v)));
            }
    if (!pairs) { // the rows past `need`: zeros (this thread: 16 bytes of rows t / 8 + 16 i)
#pragma unroll
        for (int i = 0; i < MN / 16; i++) {
            const int r = t / 8 + 16 * i;
            if (r >= need)
                asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" ::"r"(buf + r * 128 + (t % 8) * 16), "r"(0));
        }
        st.store_tma(&p.d_map, buf, n0, s0, barrier, leader);
        return;
    }
    named_bar_sync(barrier, kWarpgroupThreads);
    const int col = n0 + (t % 8) * 8;
#pragma unroll
    for (int i = 0; i < MN / 16; i++) {
        const int r = t / 8 + 16 * i;
        if (r >= need) break; // padding from here on
        const int f = pair_s[r];
        uint4 v;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "r"(buf + r * 128 + (((t % 8) ^ (r & 7)) << 4)));
        if (f >= 0 && col < p.n)
            *reinterpret_cast<uint4 *>(reinterpret_cast<T *>(p.d) + int64_t(f) * p.ldd + col) = v;
    }
    st.next();
}

// One chunk's k-blocks with fp8 block scales (DeepSeek-V3's): each k-block's product goes to
// a register set of its own (gated: two), is waited for and added to g (up) times a's scale of
// each of the thread's slots (arow: the rows of a they come from, slot 8 q + 2 (l % 4) + e at
// 2 q + e; slots at or past `need` are skipped) and b's of the warpgroup's 64 rows (bs_g,
// bs_u: their 128-row block's scales, one per k-block). Groups of k-blocks are in flight
// together, their scale loads first (kblocks_in_groups); each stage is released as soon as
// its wgmmas are done. desc(stage, gate or only b, up b, a): the stage's descriptors.
template <int DT, int MN, int G, int STAGES, typename Desc>
__device__ __forceinline__ void consume_chunk_block_scaled(
    float (&g)[MN / 2], float (&up)[MN / 2], Pipeline<STAGES> *pipe, PipeState<STAGES> &st,
    int kblocks, const float *as, int64_t a_ld, const int (&arow)[MN / 4], int need,
    const float *bs_g, const float *bs_u, Desc desc, bool arriver) {
    constexpr int N = (G ? 2 : 1) * MN <= 32 ? 4 : 2;
    float tg[N][MN / 2], tu[N][G ? MN / 2 : 1], sa[N][MN / 4], sg[N], su[N];
    uint32_t stage[N];
    zero(g);
    if constexpr (G) zero(up);
    kblocks_in_groups<N>(0, kblocks,
        [&](int kb, auto j) {
            constexpr int s = decltype(j)::value;
#pragma unroll
            for (int i = 0; i < MN / 4; i++)
                sa[s][i] = 8 * (i / 2) < need ? __ldg(as + kb * a_ld + arow[i]) : 0.f;
            sg[s] = __ldg(bs_g + kb);
            su[s] = G ? __ldg(bs_u + kb) : 0.f;
        },
        [&](int, auto j) {
            constexpr int s = decltype(j)::value;
            pipe->consumer_wait(st);
            fence_proxy_async(); // a gathered by cp.async (generic proxy), read by the tensor cores
            uint64_t dg, du, da;
            desc(st.stage, dg, du, da);
            wgmma_fence();
            mma_kblock<DT, MN>(tg[s], dg, da, false);
            if constexpr (G) mma_kblock<DT, MN>(tu[s], du, da, false);
            wgmma_commit();
            stage[s] = st.stage;
            st.advance();
        },
        [&](int, auto j) {
            constexpr int s = decltype(j)::value;
            fence_operand(tg[s]);
            if constexpr (G) fence_operand(tu[s]);
            release_stage<1>(pipe, stage[s], arriver);
#pragma unroll
            for (int i = 0; i < MN / 2; i++) { // register 4 q + 2 h + e: slot 8 q + 2 (l % 4) + e
                if (8 * (i / 4) >= need) continue; // warp-uniform
                const float sc = sa[s][2 * (i / 4) + i % 2];
                g[i] = fmaf(tg[s][i], sc * sg[s], g[i]);
                if constexpr (G) up[i] = fmaf(tu[s][i], sc * su[s], up[i]);
            }
        });
}

// Launched as a programmatic dependent (talon.h), a CTA may start while the previous kernel
// drains, typically the gate/up projection's last tiles before the down projection: it warms L2
// with up to kSwapPrefetch bytes of its first tile's weights, then waits. The ids it reads
// may still be being written (load_relaxed: a stale one only warms other weights), and L2
// holds no copy a later write could leave stale, so nothing read here is wrong after the wait.
constexpr uint32_t kSwapPrefetch = 192 * 1024; // a CTA's: 132 SMs fill half of the H100's L2

template <int G>
__device__ __forceinline__ void prefetch_first_tile(const talon__moe_gemm_params &p, int tiles,
                                                    int kblocks, int bk, uint32_t kblock_bytes) {
    const int u = int(blockIdx.x), block = u / p.tiles_n;
    if (u >= tiles) return;
    const int num_post = p.num_post ? load_relaxed(reinterpret_cast<const int *>(p.num_post)) : p.blocks * BM;
    if (block * BM >= num_post) return;
    const int e = load_relaxed(reinterpret_cast<const int *>(p.expert_ids) + block);
    if (unsigned(e) >= unsigned(p.experts)) return;
    const int row0 = (u % p.tiles_n) * 128, n = min(kblocks, int(kSwapPrefetch / kblock_bytes));
    for (int kb = 0; kb < n; kb++) {
        tma_prefetch_3d(&p.b_lo, kb * bk, row0, e);
        if constexpr (G) tma_prefetch_3d(&p.b_hi, kb * bk, row0, e);
    }
}

template <int DT, int MN, int G, int SC>
__device__ void moe_gemm_swap(const talon__moe_gemm_params &p) {
    using T = elem<DT>;
    constexpr int BK = kblock<DT>;
    constexpr int STAGES = TALON__MOE_GEMM_SWAP_STAGES(MN, G);
    constexpr int B_ELEMS = TALON__MOE_GEMM_SWAP_B_ROWS(G) * BK, A_ELEMS = MN * BK;
    constexpr uint32_t B_BYTES = B_ELEMS * sizeof(T);
    constexpr int CONSUMER_WARPS = 8, CHUNKS = BM / MN;
    extern __shared__ uint8_t smem_raw[];
    T *sb = reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sa = sb + STAGES * B_ELEMS; // MN rows of 128 bytes: stays 1024-aligned
    uint8_t *staging = reinterpret_cast<uint8_t *>(sa + STAGES * A_ELEMS); // 2 x 16 KB
    uint8_t *zeros = staging + 32768;                                     // MN rows x 128 bytes
    float *w_s = reinterpret_cast<float *>(zeros + 8192);                 // [2][64]
    int *pair_s = reinterpret_cast<int *>(w_s + 128);                     // [2][64]
    auto *pipe = reinterpret_cast<Pipeline<STAGES> *>(pair_s + 128);
    float *ra_s = reinterpret_cast<float *>(pipe + 1);                    // [2][64]: fp8

    const int tiles = p.blocks * p.tiles_n, kblocks = (p.k + BK - 1) / BK;
    const int wg = warpgroup_index();
    pdl_launch_dependents(); // the next kernel's CTAs take the SMs this grid leaves
    if (threadIdx.x == 0) {
        // a stage fills with b's TMA bytes (one arrive_expect_tx) and the 128 loader threads'
        // cp.async arrivals
        pipe->init(CONSUMER_WARPS, 1 + kWarpgroupThreads);
        tma_prefetch_desc(&p.b_lo);
        tma_prefetch_desc(&p.b_hi);
        if (p.d_rows == TALON__MOE_ROWS_SORTED) tma_prefetch_desc(&p.d_map);
        prefetch_first_tile<G>(p, tiles, kblocks, BK, B_BYTES);
    }
    if (wg > 0) { // the zero chunk, before any TMA store reads it
        const int i = int(threadIdx.x) - kWarpgroupThreads;
        reinterpret_cast<uint4 *>(zeros)[i] = make_uint4(0, 0, 0, 0);
        reinterpret_cast<uint4 *>(zeros)[i + 256] = make_uint4(0, 0, 0, 0);
        fence_proxy_async();
    }
    __syncthreads();
    pdl_wait(); // the previous kernel's writes (a, the ids) are visible from here
    const int num_post = rows_in_use(p);
    SwapIds next = swap_ids(p, blockIdx.x, tiles, num_post);

    if (wg == 0) {
        setmaxnreg_dec<56>(); // the ids of two tiles and the gathered rows
        // thread t copies 16-byte piece t % 8 of a's rows t / 8 + 16 i of each chunk
        const int t = int(threadIdx.x), piece = t % 8;
        constexpr int PIECE = 16 / int(sizeof(T)); // elements of a piece
        const T *a_ptr = reinterpret_cast<const T *>(p.a_ptr);
        PipeState<STAGES> st;
        for (int u = blockIdx.x; u < tiles; u += gridDim.x) {
            const SwapIds ids = next;
            next = swap_ids(p, u + gridDim.x, tiles, num_post);
            if (unsigned(ids.e) >= unsigned(p.experts)) continue;
            const int b0 = (u / p.tiles_n) * BM; // the block's first slot
            const uint64_t rows = chunk_rows<MN>(p, b0, ids);
            const int row0 = (u % p.tiles_n) * 128; // the tile's first row of b (gated: of each half)
            for (int j = 0; j < CHUNKS; j++) {
                const int need = rows_of_chunk(rows, j); // a's rows past it are not read
                if (!need) continue;
                unsigned src[MN / 16];
#pragma unroll
                for (int i = 0; i < MN / 16; i++) {
                    const int r = j * MN + t / 8 + 16 * i;
                    src[i] = a_row_of(p, b0 + r, id_of(ids, r));
                }
                for (int kb = 0; kb < kblocks; kb++) {
                    uint64_t *full = pipe->producer_acquire(st);
                    if (t == 0) {
                        pipe->producer_commit(st, B_BYTES);
                        T *b = sb + st.stage * B_ELEMS;
                        tma_load_3d(b, &p.b_lo, full, kb * BK, row0, ids.e);
                        if constexpr (G) tma_load_3d(b + B_ELEMS / 2, &p.b_hi, full, kb * BK, row0, ids.e);
                    }
                    const int col = kb * BK + piece * PIECE;
                    const uint32_t base = smem_addr(sa + st.stage * A_ELEMS);
#pragma unroll
                    for (int i = 0; i < MN / 16; i++) {
                        const int r = t / 8 + 16 * i;
                        const bool ok = src[i] != ~0u && col < p.k;
                        if (r < need)
                            cp_async_16_zfill_bytes(base + r * 128 + ((piece ^ (r & 7)) << 4),
                                                    a_ptr + (ok ? int64_t(src[i]) * p.lda + col : 0),
                                                    ok ? piece_bytes<T>(p.k - col) : 0);
                    }
                    cp_async_mbar_arrive_noinc(smem_addr(full));
                    st.advance();
                }
            }
        }
        return;
    }

    setmaxnreg_inc<224>(); // 128 x 56 + 256 x 224 = 64 K registers
    const int band = wg - 1; // this warpgroup's 64 rows of b: output columns
    const int t = thread_in_warpgroup();
    const bool arriver = lane_index() == 0, leader = t == 0;
    Staging out{smem_addr(staging + band * 16384), 0, 0};
    PipeState<STAGES> st;
    float g[MN / 2], up[MN / 2];
    for (int u = blockIdx.x; u < tiles; u += gridDim.x) {
        const SwapIds ids = next;
        next = swap_ids(p, u + gridDim.x, tiles, num_post);
        if (unsigned(ids.e) >= unsigned(p.experts)) continue;
        const int b0 = (u / p.tiles_n) * BM;
        const uint64_t rows = chunk_rows<MN>(p, b0, ids);
        const int n0 = (u % p.tiles_n) * 128 + band * 64;
        for (int j = 0; j < CHUNKS; j++) {
            const int s0 = b0 + j * MN, need = rows_of_chunk(rows, j);
            if (!need) {
                // sorted rows of padding: zeros, as the 128-row kernel writes them
                if (p.d_rows == TALON__MOE_ROWS_SORTED && n0 < p.n && leader) {
                    tma_store_2d(&p.d_map, zeros, n0, s0);
                    bulk_commit_group();
                }
                continue;
            }
            // slot t's router weight, pair and (fp8) a's scale, and b's scales of this thread's
            // columns: loaded now, used after the products
            const unsigned id = id_of(ids, j * MN + t % MN);
            float w = 1.f, ra = 1.f;
            int f = -1;
            if (t < MN) {
                f = pair_of(p, s0 + t, id);
                if (p.topk_weights) w = f >= 0 ? __ldg(reinterpret_cast<const float *>(p.topk_weights) + f) : 0.f;
                if constexpr (SC)
                    ra = __ldg(reinterpret_cast<const float *>(p.a_scale) + scale_row(p, s0 + t, id) * p.a_scale_step);
            }
            ColumnValues cs{};
            if constexpr (SC) cs = column_scales<G>(p, ids.e, n0);
            const ColumnValues cb = column_bias<DT, G>(p, ids.e, n0);
            if constexpr (is_fp8<DT> && !SC) {
                // block scales: the rows of a this thread's slots come from (padding: row 0's,
                // zeros), and b's scale rows of the warpgroup's gate (or only) and up rows
                int arow[MN / 4];
#pragma unroll
                for (int i = 0; i < MN / 4; i++) {
                    const int r = 8 * (i / 2) + 2 * (lane_index() % 4) + i % 2;
                    // warp-uniform: id_of is warp-collective
                    arow[i] = 8 * (i / 2) < need ? scale_row(p, s0 + r, id_of(ids, j * MN + r)) : 0;
                }
                const float *bs = reinterpret_cast<const float *>(p.b_scale) + ids.e * p.b_scale_expert;
                // 64 rows: inside one 128-block; a warpgroup wholly past n (its results are not
                // written) reads block 0's, as its scale rows may lie past b's
                const int rows0 = (u % p.tiles_n) * 128 + band * 64, brow = rows0 < p.n ? rows0 : 0;
                consume_chunk_block_scaled<DT, MN, G>(
                    g, up, pipe, st, kblocks, reinterpret_cast<const float *>(p.a_scale), p.a_scale_ld,
                    arow, need, bs + (brow / 128) * p.b_scale_ld,
                    bs + (G ? (p.n + brow) / 128 : 0) * p.b_scale_ld,
                    [&](uint32_t s, uint64_t &dg, uint64_t &du, uint64_t &da) {
                        const T *b = sb + s * B_ELEMS + band * 64 * BK;
                        dg = make_desc_kmajor<Swizzle::B128>(b);
                        du = make_desc_kmajor<Swizzle::B128>(b + B_ELEMS / 2);
                        da = make_desc_kmajor<Swizzle::B128>(sa + s * A_ELEMS);
                    },
                    arriver);
            } else {
                uint32_t prev = 0;
                for (int kb = 0; kb < kblocks; kb++) {
                    pipe->consumer_wait(st);
                    fence_proxy_async(); // a gathered by cp.async (generic proxy), read by the tensor cores
                    const T *b = sb + st.stage * B_ELEMS + band * 64 * BK;
                    const uint64_t da = make_desc_kmajor<Swizzle::B128>(sa + st.stage * A_ELEMS);
                    wgmma_fence();
                    mma_kblock<DT, MN>(g, make_desc_kmajor<Swizzle::B128>(b), da, kb > 0);
                    if constexpr (G) mma_kblock<DT, MN>(up, make_desc_kmajor<Swizzle::B128>(b + B_ELEMS / 2), da, kb > 0);
                    wgmma_commit();
                    wgmma_wait<1>(); // the previous k-block's wgmmas are done: its stage may be refilled
                    if (kb > 0) release_stage<1>(pipe, prev, arriver);
                    prev = st.stage;
                    st.advance();
                }
                wgmma_wait<0>();
                fence_operand(g);
                if constexpr (G) fence_operand(up);
                release_stage<1>(pipe, prev, arriver);
            }
            if (n0 < p.n)
                with_moe_act<G>(p, [&](const auto &act) {
                    epilogue_swap<DT, MN, G, SC>(g, up, p, s0, need, n0, w, f, ra, cs, cb, act, out,
                                                 w_s + band * 64, pair_s + band * 64, ra_s + band * 64);
                });
        }
    }
    if (leader) bulk_wait_group<0>(); // every store done before the CTA's smem goes
}

} // namespace talon::moe_gemm

TALON__KERNELS_moe_gemm(TALON_DEV_KERNEL)
