// prefill.cu - attention over many query tokens per request (FlashAttention-style: the
// scores never leave the chip), bf16/f16, fp32 accumulation on wgmma, TMA loads.
//
// A tile is BM query rows of one query head of one request (128, or 192: prefill.def).
// Persistent CTAs of 128 + 2 BM threads (one per SM) take the tiles in the order (request, kv
// head, query block from the last, query head of the group): CTA i starts with tile i, then
// takes the next untaken one from a counter in the workspace (zeroed by the host before the
// launch), so a CTA that drew short causal tiles takes more (a static stride left 1.3x the
// mean work on the busiest SM at 16 x 1024 tokens). The tiles running at once share the k/v
// of a few (request, kv head) pairs, which stay in L2: ordered by query block first, 132 tiles
// of 132 different pairs read 132 separate k/v streams, more than HBM delivers (measured:
// 0.55x cuDNN at 16 x 1024 tokens, docs/notes/prefill.md). Within a pair the causal tiles
// with the most keys come first.
//   warpgroup 0  thread 0 takes the tiles, decodes each into shared memory for the others,
//                and loads its q (once the previous tile's last q k^T is done), then k and v
//                of each block of BN keys into a ring of STAGES stages (separate barriers for
//                k and v, so that q k^T starts while v is still on its way); its registers go
//                to the others.
//   warpgroups 1..  64 query rows each: S = q k^T (wgmma, both operands in shared memory),
//                the online softmax in registers (fp32, exp2 with log2 e folded into the
//                scale), P rounded to the input type and O += P v with P straight from the
//                registers (the score accumulator layout is the A-fragment layout) and v
//                read transposed (MN-major) from its natural [keys, d] rows. Two warpgroups
//                issue S of the next block before P v of the current one, so the softmax of
//                one block runs while the tensor cores multiply the other, and take turns at
//                issuing (ping-pong), so one's softmax overlaps the other's products. Three
//                (192 rows) run each block's steps in order, the others' work filling the
//                gaps.
// Blocks are walked from the last one down, so the causal diagonal and the ragged tail (the
// blocks that need a mask) come first.
// Split keys (talon__prefill_split): the tiles of a call's last, partial round may run as
// pieces over shares of their key blocks; the last piece to finish merges the partials.
// fp8 e4m3 (contiguous k/v): q k^T on the fp8 tensor cores; P is rounded to e4m3 for P v,
// whose B must be K-major, so warps 1-3 of the producer warpgroup transpose each block of v
// from the ring it lands in into a v^T ring (ldmatrix/stmatrix, transpose_v_block), with the
// keys in the order the P fragments come out of the score accumulator.
// Paged k/v: the same kernel with another producer. KV_PAGES (pages of 16 keys and more): the
// producer threads each load one page's rows of a block as TMA boxes (page id from the page
// table; ids outside the cache and pages past the request's keys read zeros). The last
// page's slots past the request's keys hold whatever the cache holds (NaN included), which a
// zero softmax weight does not cancel in P v, so consumer warpgroup 1 zeroes those v rows in
// the tile's first stage before its first P v (warpgroup 2's comes after it in the ping-pong
// order). KV_GATHER (pages under 16 keys, where one box per page is too many: each costs
// 40-60 ns of TMA issue, 128 a block at pages of 1): the producer warpgroup's 128 threads copy
// the rows by 16-byte cp.async, zero-filling rows past the keys (docs/notes/prefill.md).
// KV_WIDEN (paged fp8 e4m3 caches, 16-bit q and o): the producer warpgroup's threads copy
// their pieces of each block's rows into a landing buffer by cp.async and widen them (exact)
// into the 16-bit k/v ring (v to f16, P v in f16; k to f16 up to d128, a bf16 q converted to
// f16 in shared memory by the consumers, scaled by a power of two; k to q's type at d256), so
// the rest is the 16-bit kernel.
// Checked mode (kernels/dev/check.cuh), paged only: the lead producer thread records a kv_lens
// outside [0, max_kv_len] (clamped, as always), and a producer warp scans the page ids of each
// tile's keys once, before its block loop (a page id outside the cache reads as zeros, as
// always): the loop that issues the loads is the one an unchecked launch runs (a test inside
// it cost the default path 1-2% at pages of 8 and 16).
#include "dev/async.cuh"
#include "dev/check.cuh"
#include "dev/fp8.cuh"
#include "dev/kernel.cuh"
#include "dev/math.cuh"
#include "dev/mma.cuh"
#include "dev/pipeline.cuh"
#include "dev/reduce.cuh"
#include "dev/tma.cuh"
#include "dev/vec.cuh"
#include "dev/warpgroup.cuh"
#include "dev/wgmma.cuh"
#include "talon/kernels/prefill.def"

namespace talon::prefill {
using namespace talon::dev;

constexpr float NEG_INF = -__builtin_huge_valf();

// D[64 x N] += A . B with A from registers and B in shared memory (O += P v): 16-bit v MN-major
// (its natural rows), fp8 v^T K-major.
template <int DT, int N>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) {
    if constexpr (DT == TALON__BF16) mma_bf16_rs<N, 1>(d, a, b, true);
    else if constexpr (DT == TALON__F16) mma_f16_rs<N, 1>(d, a, b, true);
    else mma_e4m3_rs<N>(d, a, b, true);
}

// fp8: the v^T of one block of BN keys, by one of the three transposing producer warps
// (warp w of 3). v landed as the k tiles do (rows of keys, 128-byte chunks of d, 128-byte
// swizzle); v^T has rows of BN = 128 bytes (128-byte swizzle). v^T row d holds
// the keys of column d in the order the P fragments of mma_e4m3_rs want them: the score
// accumulator gives a thread keys 8 j + 2 (l % 4) + {0, 1} of every 32, the A fragment reads
// 4 (l % 4) + {0..3} (+16), so position 16 g + 4 q + 2 i + e of a row holds key 16 g + 8 i +
// 2 q + e, and P packs into fragments without shuffles.
// A pass moves 16 keys x 32 bytes of d with one ldmatrix and one stmatrix. The load reads four
// 8 x 8 b16 matrices (keys 16 g + {0..7, 8..15} x d bytes 32 e + {0..15, 16..31}), transposed:
// lane (c, q) = (l / 4, l % 4) gets, of each, keys 2 q and 2 q + 1 at d pair 2 c, + 1 (bytes
// k0d0 k0d1 k1d0 k1d1). One byte permute of the two key halves makes the word of row d = 2 c
// (or 2 c + 1) at positions 16 g + 4 q + {0..3}: keys 2 q, 2 q + 1, 2 q + 8, 2 q + 9, the order
// above. Those words are the rows of four matrices (even and odd d of each 16 bytes of d),
// which the store writes as 16-byte pieces of v^T rows. The loads are free of bank conflicts
// (8 consecutive keys read 8 different pieces); the stores of 8 even rows meet 4 pieces
// twice (2-way).
template <int BN, int DV>
__device__ __forceinline__ void transpose_v_block(const uint8_t *land, uint8_t *vt, int w) {
    static_assert(BN == 128, "v^T rows of 128 bytes");
    constexpr int G = BN / 16; // 16-key groups
    // lane l addresses row i of matrix m; every swizzle term but the pass's own is fixed per
    // lane: the load's row key % 8 = i, the store's row d % 8 = 2 i + m % 2
    const unsigned l = lane_index(), m = l / 8, i = l % 8;
    const uint32_t ld_base = smem_addr(land) + (8 * (m % 2) + i) * 128 + (((m / 2) ^ (i % 2)) << 4);
    const uint32_t st_base = smem_addr(vt) + (16 * (m / 2) + 2 * i + m % 2) * BN;
    const unsigned swz = (2 * i + m % 2) % 8;
    for (unsigned pass = w; pass < G * (DV / 32); pass += 3) {
        const unsigned g = pass % G, e = pass / G;
        // load: keys 16 g + 8 (m % 2) + i, d bytes 32 e + 16 (m / 2): chunk e / 4 of 128 bytes,
        // piece (2 (e % 4) + m / 2) ^ i
        uint32_t x[4], o[4];
        ldmatrix_x4<true>(x, ld_base + g * 2048 + (e / 4) * (BN * 128) + (((e % 4) ^ (i / 2)) << 5));
        o[0] = prmt(x[0], x[1], 0x6420); // d = 32 e + 2 c
        o[1] = prmt(x[0], x[1], 0x7531); // d = 32 e + 2 c + 1
        o[2] = prmt(x[2], x[3], 0x6420); // d = 32 e + 16 + 2 c
        o[3] = prmt(x[2], x[3], 0x7531); // d = 32 e + 16 + 2 c + 1
        // store: matrix m row i = v^T row d = 32 e + 16 (m / 2) + 2 i + m % 2, bytes 16 g..16 g + 15
        stmatrix_x4(st_base + e * 32 * BN + ((g ^ swz) << 4), o);
    }
}

// The tile's place: request b, query head h, rows [m0, m0 + BM) of the request's q_len,
// keys in blocks [nb_lo, nb_hi) of BN; off = kv_len - q_len (query row i sits at key position
// i + off: the new tokens are the last ones), pos0 = m0 + off (the tile's first row's).
struct Tile {
    int b, h, m0, q0, q_len, k0, kv_len, off, nb_lo, nb_hi, pos0;
};

// Checked mode, paged k/v: records the first page id outside [0, num_pages) among those the
// tile's blocks of keys read (the warp's lanes take the page-table entries in turn).
template <int BN>
__device__ __forceinline__ void check_tile_pages(const talon__prefill_params &p, const Tile &tl) {
    const int lo = tl.nb_lo * BN, hi = min(tl.nb_hi * BN, tl.kv_len);
    if (lo >= hi) return;
    const int64_t row = int64_t(tl.b) * p.page_table_stride;
    const int *pt = reinterpret_cast<const int *>(p.page_table) + row;
    for (int e = (lo >> p.page_shift) + lane_index(); e <= ((hi - 1) >> p.page_shift); e += 32) {
        const int page = __ldg(pt + e);
        if (unsigned(page) >= unsigned(p.num_pages))
            check_fail(p.check, TALON__CHECK_PAGED_PAGE, row + e, page, p.num_pages);
    }
}

// Piece number t (>= split_first) of a split tile (talon__prefill_split): the tile's place
// among the split ones, and in part which share of its keys the piece takes.
__device__ __forceinline__ unsigned split_slot(const talon__prefill_params &p, int t, int &part) {
    const unsigned v = t - p.split_first, slot = __umulhi(v, p.split_magic); // v / parts
    part = int(v - slot * p.split_parts);
    return slot;
}

// report: checked mode records a bad kv_lens (the lead producer thread only).
template <int BM, int BN, bool PAGED>
__device__ __forceinline__ bool tile_of(const talon__prefill_params &p, int t, Tile &tl,
                                        bool report = false) {
    // a piece of a split tile: its tile, and which share of the keys
    int part = -1;
    if (t >= p.split_first) t = p.split_first + int(split_slot(p, t, part));
    // t = (section of (b, kv head) pairs, query block from the last, pair of the section,
    // query head of the group): talon__prefill_sections
    const int per_pair = p.m_blocks * p.group, hk_count = p.num_qo_heads / p.group;
    const int first_tiles = p.section_first * per_pair;
    int pair = 0, size = p.section_first, r = t;
    if (t >= first_tiles) {
        const int s = (t - first_tiles) / (p.section * per_pair);
        r = t - first_tiles - s * (p.section * per_pair);
        pair = p.section_first + s * p.section;
        size = p.section;
    }
    const int rank = r / (size * p.group), in = r - rank * (size * p.group);
    pair += in / p.group;
    tl.m0 = (p.m_blocks - 1 - rank) * BM;
    tl.b = pair / hk_count;
    tl.h = pair % hk_count * p.group + in % p.group;
    const int *cu_q = reinterpret_cast<const int *>(p.cu_seqlens_q);
    const int *cu_k = reinterpret_cast<const int *>(p.cu_seqlens_k);
    tl.q0 = __ldg(cu_q + tl.b);
    tl.q_len = __ldg(cu_q + tl.b + 1) - tl.q0;
    if (tl.m0 >= tl.q_len) return false; // nothing of this request here
    if constexpr (PAGED) {
        tl.k0 = 0;
        const int raw = __ldg(reinterpret_cast<const int *>(p.kv_lens) + tl.b);
        if (report && checking(p.check) && (raw < 0 || raw > p.max_kv_len))
            check_fail(p.check, TALON__CHECK_PAGED_KV_LEN, tl.b, raw, p.max_kv_len);
        tl.kv_len = min(max(raw, 0), p.max_kv_len);
    } else {
        tl.k0 = __ldg(cu_k + tl.b);
        tl.kv_len = max(__ldg(cu_k + tl.b + 1) - tl.k0, 0);
    }
    // query row i attends keys j in [pos - window + 1, pos] (causal) of [0, kv_len), pos = i + off
    tl.off = tl.kv_len - tl.q_len;
    tl.pos0 = tl.m0 + tl.off;
    int hi = tl.kv_len, lo = 0;
    if (p.causal) hi = min(hi, tl.m0 + BM + tl.off);
    if (p.window) lo = max(0, tl.m0 + tl.off - p.window + 1);
    tl.nb_lo = lo / BN;
    tl.nb_hi = hi > lo ? (hi + BN - 1) / BN : tl.nb_lo;
    if (part >= 0) { // blocks [lo + n part / parts, lo + n (part + 1) / parts): maybe none
        const unsigned n = tl.nb_hi - tl.nb_lo;
        const int first = tl.nb_lo;
        tl.nb_lo = first + int(__umulhi(n * part, p.split_magic));
        tl.nb_hi = first + int(__umulhi(n * (part + 1), p.split_magic));
    }
    return true;
}

// Split keys: warp `warp` of a piece of split tile t writes its partial (O, its rows' running
// max, its lanes' sums of the weights: DV / 2 + 4 words a lane, word i of lane l at 32 i + l)
// to the workspace and counts itself done on the tile's counter of that warp. Returns whether
// it counted the last piece (it then merges the pieces' partials and writes the rows), and in
// pieces the lane's word 0 of the warp's piece 0.
template <int DV, int WARPS>
__device__ __forceinline__ bool split_piece_done(const talon__prefill_params &p, int t, int warp,
                                                 const float (&o)[DV / 2], const float (&m)[2],
                                                 const float (&l)[2], const float *&pieces) {
    constexpr int WORDS = DV / 2 + 4;
    int part;
    const unsigned slot = split_slot(p, t, part);
    const int lane = lane_index();
    // the workspace: the tile counter (16 bytes), the split tiles' warp counters, then from a
    // 256-byte boundary the partials (talon__prefill_plan_of)
    const int split_tiles = p.m_blocks * p.batch * p.num_qo_heads - p.split_first;
    uint8_t *ws = reinterpret_cast<uint8_t *>(p.tile_counter);
    unsigned *done = reinterpret_cast<unsigned *>(ws + 16) + slot * WARPS + warp;
    float *first = reinterpret_cast<float *>(ws + ((16 + split_tiles * WARPS * 4 + 255) & ~255)) +
                   (int64_t(slot) * WARPS + warp) * p.split_parts * (WORDS * 32) + lane;
    float *mine = first + part * (WORDS * 32);
#pragma unroll
    for (int i = 0; i < DV / 2; i++) mine[32 * i] = o[i];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mine[32 * (DV / 2 + r)] = m[r];
        mine[32 * (DV / 2 + 2 + r)] = l[r];
    }
    __threadfence(); // the partial before the count that publishes it
    __syncwarp();
    unsigned before = 0;
    if (lane == 0) before = atomicAdd(done, 1u);
    pieces = first;
    if (__shfl_sync(~0u, before, 0) != unsigned(p.split_parts - 1)) return false;
    __threadfence(); // the count before the other pieces' partials
    return true;
}

template <int DT, int D, int KV, int BM>
__device__ void prefill_tile(const talon__prefill_params &p) {
    constexpr bool FP8 = DT == TALON__FP8_E4M3;
    using T = elem<DT>;                            // q, k, v
    using TO = elem<FP8 ? TALON__BF16 : DT>;       // o
    constexpr bool PAGED = KV != TALON__PREFILL_KV_CONTIGUOUS;
    // the producer warpgroup's 128 threads fill the k/v stages (cp.async, or widening fp8 rows)
    constexpr bool WIDEN = KV == TALON__PREFILL_KV_WIDEN;
    constexpr bool GATHER = KV == TALON__PREFILL_KV_GATHER || WIDEN;
    // P and v in P v: fp8 caches widen v to f16 whatever q's type (one conversion instruction
    // a pair where bf16 takes four; exact, as every e4m3 value is an f16 value, and P in [0, 1]
    // keeps three more bits in f16 than in bf16)
    constexpr int DTV = WIDEN ? TALON__F16 : DT;
    // q k^T likewise runs in f16 on fp8 caches up to d128: k widens in one instruction a pair
    // (bf16 takes four), and a bf16 q is converted in shared memory, exactly, scaled by a power
    // of two (q_to_f16). At d256 the scale's register made the consumers spill 144 bytes.
    constexpr bool Q_TO_F16 = WIDEN && DT == TALON__BF16 && D <= 128;
    constexpr int DTK = Q_TO_F16 ? TALON__F16 : DT;
    static_assert(!FP8 || !PAGED, "fp8: contiguous k/v only");
    constexpr int BN = FP8 ? TALON__PREFILL_FP8_BN(D) : TALON__PREFILL_BN(D, KV);
    constexpr int CONSUMERS = BM / 64; // consumer warpgroups
    // Three consumers run each block's steps in order (q k^T, softmax, P v, each product
    // waited for), the overlap coming from the other two warpgroups: at 160 registers the
    // pipelined loop (S of the next block beside P of this one) fits only 128-key blocks,
    // which measured 0.89-0.94x of this loop over 192 at d64 (docs/notes/prefill.md).
    constexpr bool SERIAL = CONSUMERS == 3;
    constexpr int STAGES = FP8     ? TALON__PREFILL_FP8_STAGES(D)
                           : WIDEN ? TALON__PREFILL_WIDEN_STAGES(D)
                                   : TALON__PREFILL_STAGES(D);
    constexpr int WLAND = TALON__PREFILL_WIDEN_LAND(D); // widen: landing buffers of fp8 k and v
    // the v stages the consumers read: the k ring's count, fp8 the v^T ring's
    constexpr int VSTAGES = FP8 ? TALON__PREFILL_FP8_VT_STAGES(D) : STAGES;
    constexpr int LSTAGES = TALON__PREFILL_FP8_LAND_STAGES; // fp8: v's landing ring
    constexpr int PRODUCER_REGS = FP8     ? (D == 256 ? 24 : CONSUMERS == 3 ? 32 : 56)
                                  : WIDEN ? 72
                                  : GATHER ? 56
                                           : CONSUMERS == 3 ? 32 : 40;
    constexpr int CONSUMER_REGS = FP8     ? (D == 256 ? 240 : CONSUMERS == 3 ? 160 : 224)
                                  : WIDEN ? 216
                                  : GATHER ? 224
                                           : CONSUMERS == 3 ? 160 : 232;
    // setmaxnreg moves registers within the CTA's launch share (65536 / threads, rounded down
    // to 8, a thread): the consumers' increase waits for registers that are not there
    static_assert(128 * PRODUCER_REGS + CONSUMERS * 128 * CONSUMER_REGS <=
                      TALON__PREFILL_THREADS(BM) * (65536 / TALON__PREFILL_THREADS(BM) / 8 * 8),
                  "register file");
    constexpr int DV = TALON__PREFILL_DV(D); // v's and o's head_dim
    static_assert(!PAGED || DV == D, "the paged caches have one head_dim");
    constexpr int CW = 128 / sizeof(T);                // elements of a 128-byte column chunk
    constexpr int CH = D / CW, CHV = DV / CW;          // chunks of a row
    constexpr int Q_CHUNK = BM * CW, KV_CHUNK = BN * CW; // elements of one chunk's tile
    constexpr uint32_t Q_BYTES = BM * D * sizeof(T), K_BYTES = BN * D * sizeof(T), V_BYTES = BN * DV * sizeof(T);
    extern __shared__ uint8_t smem_raw[];
    // 128-byte swizzled tiles: 1024-aligned. fp8: v lands in sv (LSTAGES) and its transpose
    // goes to svt.
    T *sq = reinterpret_cast<T *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    T *sk = sq + BM * D;
    T *sv = sk + STAGES * BN * D;
    T *svt = sv + (FP8 ? LSTAGES : STAGES) * BN * DV;
    // widen: the landing buffers (k then v of a block, rows of d bytes) after the v ring
    uint8_t *sland = reinterpret_cast<uint8_t *>(svt);
    uint64_t *q_full = reinterpret_cast<uint64_t *>(FP8 ? reinterpret_cast<uint8_t *>(svt + VSTAGES * DV * BN)
                                                   : WIDEN ? sland + WLAND * 2 * BN * D
                                                           : reinterpret_cast<uint8_t *>(svt));
    uint64_t *q_empty = q_full + 1;
    auto *kpipe = reinterpret_cast<Pipeline<STAGES> *>(q_empty + 1);
    auto *vpipe = reinterpret_cast<Pipeline<VSTAGES> *>(kpipe + 1);
    auto *lpipe = reinterpret_cast<Pipeline<LSTAGES> *>(vpipe + 1); // fp8: v landing -> transposers
    // the tile handed from the producer's lead thread to the rest (two slots: tile k in slot
    // k % 2), and the barrier the gathering (or fp8's transposing) producer threads wait on
    // before reading the slot (the consumers read it after q_full, which the lead arrives on
    // after writing it)
    int *tile_slot = FP8 ? reinterpret_cast<int *>(lpipe + 1) : reinterpret_cast<int *>(vpipe + 1);
    uint64_t *tile_ready = reinterpret_cast<uint64_t *>(tile_slot + 2);
    // Tile k as the lead decoded it (tile_of), in box k % 3, which every other thread reads: a
    // decode of its own cost each consumer thread ~150 instructions (divisions, dependent
    // loads of cu_seqlens) at the start of every tile, and registers or another decode for
    // the epilogue's fields. The lead decodes tile k + 1 into its box while tile k runs: box
    // k % 3 is written next for tile k + 3, after the lead published tile k + 2, that is after
    // every reader arrived on q_empty for tile k + 1, which each does after its last read of
    // tile k's box (the epilogue's included).
    Tile *tile_box = reinterpret_cast<Tile *>(tile_ready + 1);
    static_assert(sizeof(Tile) * 3 <= TALON__PREFILL_TILE_BOX_BYTES, "tile box");
    // the tiles, with each split tile counted once per piece (talon__prefill_split)
    const int tiles = p.split_first + (p.m_blocks * p.batch * p.num_qo_heads - p.split_first) * p.split_parts;
    // KV_PAGES: a block's page runs (a box each for k and v per 64 columns) and the producer
    // warps that issue their copies (talon__prefill_page_warps: 4 or 1)
    const int page_rows = TALON__PREFILL_PAGE_ROWS(1 << p.page_shift, BN); // keys a box
    const int page_runs = KV == TALON__PREFILL_KV_PAGES ? BN / page_rows : 0;
    const int page_warps = KV == TALON__PREFILL_KV_PAGES ? p.page_warps : 1;

    if (threadIdx.x == 0) {
        mbar_init(tile_ready, 1);
        mbar_init(q_full, 1);
        // one arrival per consumer thread (its warp's last q k^T of the tile done) and per
        // thread of fp8's transposing warps or the paged producers (it read the tile's
        // slot): the lead publishes the next tile only then. Every reader of the slot arrives
        // itself: with one arrival a warp (after __syncwarp), racecheck reported the slot's
        // next write as racing the other lanes' reads.
        mbar_init(q_empty, CONSUMERS * 128 + (FP8 ? 96 : GATHER || page_warps == 4 ? 128 : 0));
        // k/v stages: filled by TMA (one arrive_expect_tx), or by the 128 producer threads'
        // cp.async (fp8's v^T: the 3 transposing warps); released by each consumer warp
        kpipe->init(CONSUMERS * 4, GATHER ? 128 : 1);
        vpipe->init(CONSUMERS * 4, GATHER ? 128 : FP8 ? 3 : 1);
        if (FP8) lpipe->init(3, 1);
        tma_prefetch_desc(&p.q_map);
        if (!GATHER) {
            tma_prefetch_desc(&p.k_map);
            tma_prefetch_desc(&p.v_map);
        }
    }
    __syncthreads();

    if (warpgroup_index() == 0) {
        // The CTA holds 384 x 168 registers (the launch bound's share, rounded to 8): 2 x 128 x
        // 232 + 128 x 40 (the tile hand-over and the paged address arithmetic spill at 24);
        // fp8 2 x 128 x 224 + 128 x 56 (the transposing warps spill at 40), at d256 2 x 128 x
        // 240 + 128 x 24 (the 64 + 128 accumulators; the producer threads spill, ~10 local
        // accesses a block, outside the transposing passes); gathered pages
        // the same (their copy loops unrolled, which spill at 40); fp8 caches 2 x 128 x 216 +
        // 128 x 72 (the widening threads spill at 56). Three consumers (16-bit d64, fp8 d128):
        // 512 x 128, 3 x 128 x 160 + 128 x 32.
        setmaxnreg_dec<PRODUCER_REGS>();
        // contiguous: thread 0 alone (fp8: and warps 1-3 transpose v); pages: page_warps warps
        // (lane 0 of warp 0 leads); gather: 4 warps
        if constexpr (FP8) {
            if (warp_in_warpgroup() != 0) {
                // each block of v of each tile, as it lands, into the next v^T stage
                PipeState<LSTAGES> ls;
                PipeState<VSTAGES> ts;
                for (int k = 0;; k++) {
                    Tile tl;
                    mbar_wait(tile_ready, k % 2);
                    const int t = tile_slot[k % 2];
                    mbar_arrive(q_empty);
                    if (t < 0) return;
                    tl = tile_box[k % 3];
                    for (int n = tl.nb_hi - 1; n >= tl.nb_lo; n--) {
                        lpipe->consumer_wait(ls);
                        vpipe->producer_acquire(ts);
                        transpose_v_block<BN, DV>(reinterpret_cast<const uint8_t *>(sv + ls.stage * BN * DV),
                                                  reinterpret_cast<uint8_t *>(svt + ts.stage * DV * BN),
                                                  warp_in_warpgroup() - 1);
                        fence_proxy_async(); // ordinary stores, read next by the tensor cores
                        __syncwarp();
                        if (lane_index() == 0) {
                            lpipe->consumer_release(ls);
                            mbar_arrive(&vpipe->full[ts.stage]);
                        }
                        ls.advance();
                        ts.advance();
                    }
                }
            }
        }
        if constexpr (!PAGED) {
            if (threadIdx.x != 0) return;
        } else if constexpr (!GATHER) {
            if (warp_in_warpgroup() >= page_warps) return;
        }
        const bool lead = !PAGED || threadIdx.x == 0; // takes the tiles, loads q, fills the TMA barriers
        const int hk_count = p.num_qo_heads / p.group;
        unsigned *counter = reinterpret_cast<unsigned *>(p.tile_counter);
        PipeState<STAGES> st;
        PipeState<LSTAGES> lst; // fp8: the v landing ring
        int land_slot = 0;      // widen: the landing buffer of the next block
        uint32_t q_phase = 0;
        // the lead's next candidate tile (unsigned: grid + tickets may pass 2^31 - 1 when
        // tiles come near it)
        unsigned next = blockIdx.x;
        // the lead decodes its first tile here and every later one once, after the previous
        // tile's k/v copies (for the q prefetch), into the tile's box
        Tile tl;
        // the lead's next tile with work (tile_of false: a query block past the request's
        // queries), taking tickets past those without, decoded into box
        auto find_next = [&](Tile &box) {
            while (next < unsigned(tiles) && !tile_of<BM, BN, PAGED>(p, int(next), box, true))
                next = gridDim.x + atomicAdd(counter, 1u);
        };
        for (int k = 0;; k++) {
            // The lead takes the next tile with work once the previous tile's q k^T are done
            // (so that the slot and tile_ready are at most one tile ahead of every reader),
            // publishes it (-1: none left) and loads its q.
            int t = -1;
            if (lead) {
                if (k == 0) find_next(tile_box[0]);
                t = next < unsigned(tiles) ? int(next) : -1;
                mbar_wait(q_empty, q_phase ^ 1);
                tile_slot[k % 2] = t;
                tl = tile_box[k % 3];
                if (GATHER || FP8 || page_warps == 4) mbar_arrive(tile_ready);
                if (t < 0) {
                    mbar_arrive(q_full); // no bytes: the consumers read -1 and stop
                } else {
                    mbar_arrive_expect_tx(q_full, Q_BYTES);
#pragma unroll
                    for (int c = 0; c < CH; c++)
                        tma_load_3d(sq + c * Q_CHUNK, &p.q_map, q_full, c * CW, tl.h, tl.q0 + tl.m0);
                    next = gridDim.x + atomicAdd(counter, 1u);
                }
            }
            q_phase ^= 1;
            if (GATHER || page_warps == 4) {
                if (!lead) {
                    mbar_wait(tile_ready, k % 2);
                    t = tile_slot[k % 2];
                }
                mbar_arrive(q_empty);
            } else if constexpr (PAGED) {
                t = __shfl_sync(~0u, t, 0);
                __syncwarp(); // the lead's write of the box before the other lanes' reads
            }
            if (t < 0) break;
            if (!lead) tl = tile_box[k % 3];
            if constexpr (PAGED) {
                if (checking(p.check) && warp_in_warpgroup() == 0) check_tile_pages<BN>(p, tl);
            }
            const int hk = tl.h / p.group;
            for (int n = tl.nb_hi - 1; n >= tl.nb_lo; n--) {
                if constexpr (!PAGED) {
                    // keys [n BN, n BN + BN) of the request: one box per 128-byte column chunk
                    uint64_t *kf = kpipe->producer_acquire(st);
                    kpipe->producer_commit(st, K_BYTES);
#pragma unroll
                    for (int c = 0; c < CH; c++)
                        tma_load_3d(sk + st.stage * BN * D + c * KV_CHUNK, &p.k_map, kf, c * CW, hk, tl.k0 + n * BN);
                    if constexpr (FP8) {
                        uint64_t *vf = lpipe->producer_acquire(lst);
                        lpipe->producer_commit(lst, V_BYTES);
#pragma unroll
                        for (int c = 0; c < CHV; c++)
                            tma_load_3d(sv + lst.stage * BN * DV + c * KV_CHUNK, &p.v_map, vf, c * CW, hk, tl.k0 + n * BN);
                        lst.advance();
                    } else {
                        uint64_t *vf = vpipe->producer_acquire(st);
                        vpipe->producer_commit(st, V_BYTES);
#pragma unroll
                        for (int c = 0; c < CHV; c++)
                            tma_load_3d(sv + st.stage * BN * DV + c * KV_CHUNK, &p.v_map, vf, c * CW, hk, tl.k0 + n * BN);
                    }
                } else if constexpr (!GATHER) {
                    // lane i / page_warps of warp i % page_warps loads page run i: page_rows
                    // keys, 64 columns a box; a coordinate below 0 puts the whole box outside
                    // the map (zeros)
                    const int w = warp_in_warpgroup(), rows = page_rows;
                    if (lead) {
                        kpipe->producer_acquire(st);
                        kpipe->producer_commit(st, K_BYTES);
                        vpipe->producer_acquire(st);
                        vpipe->producer_commit(st, V_BYTES);
                    }
                    // the stage's bytes are expected before any box lands (4 warps: each
                    // syncs, as an arriving warp 0 could run a block ahead and arrive twice on
                    // one phase of the barrier)
                    if (page_warps == 4) named_bar_sync(10, 128);
                    else __syncwarp();
                    const int *pt = reinterpret_cast<const int *>(p.page_table) + tl.b * p.page_table_stride;
                    for (int i = lane_index() * page_warps + w; i < page_runs; i += 32 * page_warps) {
                        const int j = n * BN + i * rows; // the box's first key
                        const int page = j < tl.kv_len ? __ldg(pt + (j >> p.page_shift)) : -1;
                        const int slot = j & ((1 << p.page_shift) - 1);
                        const bool ok = unsigned(page) < unsigned(p.num_pages);
                        const int c1 = p.layout == 0 ? hk : slot;
                        const int c2 = p.layout == 0 ? (ok ? (page << p.page_shift) + slot : -rows)
                                                     : (ok ? page * hk_count + hk : -1);
                        const int at = st.stage * BN * D + i * rows * 64;
#pragma unroll
                        for (int c = 0; c < CH; c++) {
                            tma_load_3d(sk + at + c * KV_CHUNK, &p.k_map, &kpipe->full[st.stage], c * 64, c1, c2);
                            tma_load_3d(sv + at + c * KV_CHUNK, &p.v_map, &vpipe->full[st.stage], c * 64, c1, c2);
                        }
                    }
                } else {
                    // 16-byte cp.async into the 128-byte swizzle (piece x of row r at x ^ r % 8),
                    // 4 rows of 128 bytes per warp instruction (coalesced): warp w copies rows
                    // 16 i + 4 w + lane / 8, piece lane % 8 of each 64-column chunk. Lane o
                    // first finds the cache row (of d elements; fewer than 2^32, checked on the
                    // host) of row 16 (o / 4) + 4 w + o % 4, or ~0: past the request's keys or
                    // a page id outside the cache, zero-filled, so no NaN of an unwritten slot
                    // reaches P v.
                    const int w = warp_in_warpgroup(), lane = lane_index();
                    auto rows_of = [&](int nb) { // this lane's cache row of block nb, or ~0
                        unsigned row = ~0u;
                        if (lane < BN / 4) {
                            const int j = nb * BN + 16 * (lane / 4) + 4 * w + lane % 4;
                            const int *pt = reinterpret_cast<const int *>(p.page_table) + tl.b * p.page_table_stride;
                            const int page = j < tl.kv_len ? __ldg(pt + (j >> p.page_shift)) : -1;
                            const unsigned slot = j & ((1 << p.page_shift) - 1);
                            if (unsigned(page) < unsigned(p.num_pages))
                                row = p.layout == 0 ? ((unsigned(page) << p.page_shift) + slot) * hk_count + hk
                                                    : ((unsigned(page) * hk_count + hk) << p.page_shift) + slot;
                        }
                        return row;
                    };
                    const unsigned mine = WIDEN && WLAND == 2 && n != tl.nb_hi - 1 ? ~0u : rows_of(n);
                    const uint32_t dst = uint32_t((4 * w + lane / 8) * 128 + (((lane % 8) ^ ((4 * w + lane / 8) % 8)) << 4));
                    auto copy = [&](Pipeline<STAGES> *pipe, T *ring, CUdeviceptr cache) {
                        pipe->producer_acquire(st);
                        const T *src = reinterpret_cast<const T *>(cache) + (lane % 8) * 8;
                        const uint32_t base = smem_addr(ring + st.stage * BN * D) + dst;
                        // unrolled: the shuffles and address arithmetic of one row overlap the
                        // others' (a loop of dependent steps a row left the consumers waiting)
#pragma unroll
                        for (int i = 0; i < BN / 16; i++) {
                            const unsigned at = __shfl_sync(~0u, mine, 4 * i + lane / 8);
                            const T *row = src + uint64_t(at == ~0u ? 0 : at) * D;
#pragma unroll
                            for (int c = 0; c < CH; c++)
                                cp_async_16_zfill(base + i * 2048 + c * (KV_CHUNK * 2), row + c * 64, at != ~0u);
                        }
                        cp_async_mbar_arrive_noinc(smem_addr(&pipe->full[st.stage]));
                    };
                    // fp8 caches: each thread copies its rows' 16-byte pieces of e4m3 (16 elements,
                    // piece lane % 8 of each 128-byte chunk of a row; at d64 lanes 0-3 of 8) into
                    // a landing buffer by cp.async (zeros past the keys or on a bad page), and
                    // later widens the same pieces, so it waits for its own copies only. The
                    // next block's copies are issued before this one's widening (2 buffers).
                    constexpr int XP = D >= 128 ? D / 128 : 1; // pieces a lane takes of a row
                    const bool active = D >= 128 || lane % 8 < 4;
                    // Row r = 16 i + 4 w + lane / 8 of a block: r % 8 is the same for every i, so
                    // the swizzle and every offset but i's are fixed per thread.
                    const int r0 = 4 * w + lane / 8;
                    auto land_issue = [&](unsigned rows, int slot) {
                        const uint32_t buf = smem_addr(sland + slot * 2 * BN * D) + r0 * D + (lane % 8) * 16;
                        const uint8_t *kc = reinterpret_cast<const uint8_t *>(p.k_cache) + (lane % 8) * 16;
                        const uint8_t *vc = reinterpret_cast<const uint8_t *>(p.v_cache) + (lane % 8) * 16;
#pragma unroll
                        for (int i = 0; i < BN / 16; i++) {
                            const unsigned at = __shfl_sync(~0u, rows, 4 * i + lane / 8);
                            const uint64_t off = uint64_t(at == ~0u ? 0 : at) * D;
#pragma unroll
                            for (int j = 0; j < XP; j++) {
                                if (!active) continue;
                                const uint32_t to = buf + i * 16 * D + 128 * j; // k's piece; v's BN D on
                                cp_async_16_zfill(to, kc + off + 128 * j, at != ~0u);
                                cp_async_16_zfill(to + BN * D, vc + off + 128 * j, at != ~0u);
                            }
                        }
                        cp_async_commit();
                    };
                    // its landed pieces of k (half 0, to q's type) or v (1, to f16) of buffer
                    // slot into the next stage of pipe: piece x (elements 16 x .. 16 x + 15) of
                    // a row goes to its 64-column chunk x / 4 as 16-byte pieces 2 (x % 4) and + 1,
                    // swizzled by r0 % 8
                    auto widen = [&](Pipeline<STAGES> *pipe, T *ring, int slot, int half) {
                        const uint32_t src = smem_addr(sland + (slot * 2 + half) * BN * D) + r0 * D + (lane % 8) * 16;
                        pipe->producer_acquire(st);
                        const uint32_t to = smem_addr(ring + st.stage * BN * D) + r0 * 128;
                        // two rows' pieces at a time: the loop waits on its shared loads
                        // (docs/notes/prefill.md, step 28)
#pragma unroll 2
                        for (int i = 0; i < BN / 16; i++) {
#pragma unroll
                            for (int j = 0; j < XP; j++) {
                                if (!active) continue;
                                const int x = lane % 8 + 8 * j;
                                uint32_t in[4], h[8];
                                lds<4>(in, src + i * 16 * D + 128 * j);
#pragma unroll
                                for (int k = 0; k < 8; k++) {
                                    const uint32_t two = in[k / 2] >> (16 * (k % 2));
                                    h[k] = DTK == TALON__BF16 && half == 0 ? e4m3x2_to_bf16x2(two) : e4m3x2_to_f16x2(two);
                                }
                                const uint32_t row = to + (x / 4) * (KV_CHUNK * 2) + i * 2048;
                                sts4(row + (((2 * (x % 4)) ^ (r0 % 8)) << 4), h[0], h[1], h[2], h[3]);
                                sts4(row + (((2 * (x % 4) + 1) ^ (r0 % 8)) << 4), h[4], h[5], h[6], h[7]);
                            }
                        }
                        fence_proxy_async(); // ordinary stores, read next by the tensor cores
                        mbar_arrive(&pipe->full[st.stage]);
                    };
                    if constexpr (WIDEN) {
                        // block n's copies were issued ahead (the tile's first block: now)
                        if (WLAND == 1 || n == tl.nb_hi - 1) land_issue(mine, land_slot);
                        if (WLAND == 2 && n > tl.nb_lo) {
                            land_issue(rows_of(n - 1), land_slot ^ 1);
                            cp_async_wait<1>();
                        } else {
                            cp_async_wait<0>();
                        }
                        widen(kpipe, sk, land_slot, 0);
                        widen(vpipe, sv, land_slot, 1);
                        if (WLAND == 2) land_slot ^= 1;
                    } else {
                        copy(kpipe, sk, p.k_cache);
                        copy(vpipe, sv, p.v_cache);
                    }
                }
                st.advance();
            }
            // the next tile's q into L2 while this tile's last blocks are consumed: its load
            // waits for every warpgroup's last q k^T, and the tile's first S waits for it
            if (lead) {
                Tile &nt = tile_box[(k + 1) % 3];
                find_next(nt);
                if (next < unsigned(tiles)) {
#pragma unroll
                    for (int c = 0; c < CH; c++) tma_prefetch_3d(&p.q_map, c * CW, nt.h, nt.q0 + nt.m0);
                }
            }
        }
        return;
    }

    setmaxnreg_inc<CONSUMER_REGS>();
    const int band = warpgroup_index() - 1, lane = lane_index();
    const int r0 = band * 64 + 16 * warp_in_warpgroup() + lane / 4; // tile row of h = 0; h = 1: + 8
    const uint64_t dq = make_desc_kmajor<Swizzle::B128>(sq + band * 64 * CW); // 64 rows of 128 B
    PipeState<STAGES> kst;
    PipeState<VSTAGES> vst; // v is consumed one block behind k
    float o[DV / 2], m_run[2], l_run[2];
    Tile tl{};
    // Q_TO_F16: the warp's scores are q k^T / 2^e, e its q rows' scale (q_to_f16)
    float q_unscale = 1.f;
    // Q_TO_F16: the warp's 16 rows of the tile's q (bf16, 2 KB of each 64-column chunk) to
    // f16 times 2^-e in place, e = the exponent of their largest finite |q| less 14 (so it is
    // below 2^15): exact wherever the scaled value is an f16 normal (bf16's 8 significant bits
    // fit in f16's 11), that is every element within 2^-28 of the largest; the smaller ones
    // round to f16's subnormals (an error under 2^-39 of the largest). inf and NaN stay
    // themselves. Then 2^e scales the warp's scores (q_unscale), and the warpgroup meets
    // before its first q k^T reads the others' rows.
    auto q_to_f16 = [&] {
        constexpr int PIECES = CH * 2048 / 16 / 32; // 16-byte pieces a lane
        const uint32_t base = smem_addr(sq) + (band * 64 + 16 * warp_in_warpgroup()) * 128 + lane * 16;
        auto piece = [&](int j) { return base + (j % (2048 / 512)) * 512 + (j / (2048 / 512)) * (Q_CHUNK * 2); };
        uint32_t w[PIECES][4]; // read once: at most 8 pieces (d128)
        uint32_t mx = 0;       // the largest finite |q|'s bf16 bits
#pragma unroll
        for (int j = 0; j < PIECES; j++) {
            lds<4>(w[j], piece(j));
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const uint32_t a = (w[j][e / 2] >> (16 * (e % 2))) & 0x7fffu;
                mx = max(mx, a < 0x7f80u ? a : 0u);
            }
        }
        mx = warp_allreduce(mx, [](uint32_t a, uint32_t b) { return max(a, b); });
        const int ex = mx == 0 ? 0 : max(int(mx >> 7) - 141, -126);
        const float down = __int_as_float((127 - ex) << 23);
        q_unscale = __int_as_float((127 + ex) << 23);
#pragma unroll
        for (int j = 0; j < PIECES; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float2 f = unpack2<__nv_bfloat16>(w[j][e]);
                w[j][e] = pack2<__half>(f.x * down, f.y * down);
            }
            sts4(piece(j), w[j][0], w[j][1], w[j][2], w[j][3]);
        }
        fence_proxy_async(); // ordinary stores, read next by the tensor cores
        named_bar_sync(6 + band, 128);
    };

    // S = q k^T of the next k stage, issued (accumulator layout: wgmma.cuh; register i holds
    // row r0 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (lane % 4) + i % 2 of the block)
    auto issue_qk = [&](float (&s)[BN / 2]) {
        kpipe->consumer_wait(kst);
        if (GATHER) fence_proxy_async();
        wgmma_fence(); // s and the previous block's P were touched since the last wgmma
        const uint64_t dk = make_desc_kmajor<Swizzle::B128>(sk + kst.stage * BN * D);
#pragma unroll
        for (int kk = 0; kk < D * int(sizeof(T)) / 32; kk++) // 32 bytes of d a step
            mma_ss<DTK, BN>(s, desc_add(dq, (kk / 4) * Q_CHUNK * sizeof(T) + (kk % 4) * 32),
                           desc_add(dk, (kk / 4) * KV_CHUNK * sizeof(T) + (kk % 4) * 32), kk > 0);
        wgmma_commit();
    };
    // KV_PAGES: v rows past the request's keys in the tile's first v stage (its last block)
    // are zeroed before the first P v: by warpgroup 1, warpgroup 2 issuing its first P v after
    // that (ping-pong). Whole 128-byte rows: the swizzle permutes only within a row.
    static_assert(!PAGED || CONSUMERS == 2, "paged: 128-row tiles");
    bool first_pv = false;
    auto zero_v_tail = [&] {
        const int valid = tl.kv_len - (tl.nb_hi - 1) * BN; // in (0, BN]
        if (valid >= BN) return;
        T *base = sv + vst.stage * BN * DV;
        const int per_chunk = (BN - valid) * 8; // 16-byte pieces
        for (int e = int(threadIdx.x) - 128; e < CHV * per_chunk; e += 128)
            reinterpret_cast<uint4 *>(base + e / per_chunk * KV_CHUNK + valid * 64)[e % per_chunk] = make_uint4(0, 0, 0, 0);
        fence_proxy_async(); // ordinary stores, read next by the tensor cores
        named_bar_sync(3, 128);
    };
    // O += P v of the next v stage, issued (P from registers, v MN-major)
    // (P fragments: k16 steps of 16-bit P, k32 steps of fp8 P)
    constexpr int PK = FP8 ? BN / 32 : BN / 16;
    auto issue_pv = [&](const uint32_t (&pf)[PK][4]) {
        vpipe->consumer_wait(vst);
        if constexpr (PAGED && !GATHER) {
            if (first_pv && band == 0) zero_v_tail();
        }
        first_pv = false;
        if (GATHER) fence_proxy_async(); // written by cp.async, read by the tensor cores
        wgmma_fence();
        if constexpr (FP8) { // v^T rows of BN keys: a k32 step is 32 bytes along them
            const uint64_t dv = make_desc_kmajor<Swizzle::B128>(svt + vst.stage * DV * BN);
#pragma unroll
            for (int kk = 0; kk < PK; kk++) mma_rs<DT, DV>(o, pf[kk], desc_add(dv, kk * 32));
        } else { // v's rows: a k16 step is 16 rows of 128 bytes
            const uint64_t dv = make_desc_mn_major_b128(sv + vst.stage * BN * DV, KV_CHUNK * 2);
#pragma unroll
            for (int kk = 0; kk < PK; kk++) mma_rs<DTV, DV>(o, pf[kk], desc_add(dv, kk * 16 * 128));
        }
        wgmma_commit();
    };
    // Scores of block n, masked, into p = exp2(s e - max) in place, e = p.exp_scale (log2
    // units: e folds log2 e into sm_scale, which is > 0, so the max of s gives the max of s e;
    // with a soft-cap the capped scores are in log2 units and e is 1); the running max and sum
    // move on, alpha gets the factor the rows' O must be rescaled by.
    // (Q_TO_F16: the scores' factor takes the warp's q_unscale, before a soft-cap's tanh,
    // otherwise with e; each written twice so that the other kernels' code stays as it was)
    auto softmax = [&](float (&s)[BN / 2], int n, float (&alpha)[2]) {
        if (p.cap != 0.f) {
#pragma unroll
            for (int i = 0; i < BN / 2; i++) {
                if constexpr (Q_TO_F16) s[i] = p.cap * tanhf(s[i] * (p.scale * q_unscale));
                else s[i] = p.cap * tanhf(s[i] * p.scale);
            }
        }
        const int j0 = n * BN;
        const bool tail = j0 + BN > tl.kv_len;
        const bool diag = p.causal && j0 + BN - 1 > tl.pos0;
        const bool left = p.window && j0 < tl.pos0 + BM - 1 - p.window + 1;
        if (PAGED && (tail || diag || left)) {
            // the paged kernels keep the per-element test (9 instructions an element, with
            // branches): with the row bounds below held, they spill at d256 and the gathering d64
#pragma unroll
            for (int i = 0; i < BN / 2; i++) {
                const int j = j0 + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
                const int pos = tl.pos0 + r0 + 8 * ((i / 2) % 2);
                const bool ok = j < tl.kv_len && (!p.causal || j <= pos) && (!p.window || j > pos - p.window);
                if (!ok) s[i] = NEG_INF;
            }
        } else if (tail || diag || left) {
            // row r keeps the columns c in [lo, hi) of this thread's (c = 8 (i / 4) + i % 2, a
            // constant of the unrolled loop: two compares and a select an element)
            const int c0 = j0 + 2 * (lane % 4);
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int pos = tl.pos0 + r0 + 8 * r;
                const int hi = (p.causal ? min(tl.kv_len, pos + 1) : tl.kv_len) - c0;
                const int lo = (p.window ? max(0, pos - p.window + 1) : 0) - c0;
#pragma unroll
                for (int i = 2 * r; i < BN / 2; i += 4) {
                    s[i] = 8 * (i / 4) >= lo && 8 * (i / 4) < hi ? s[i] : NEG_INF;
                    s[i + 1] = 8 * (i / 4) + 1 >= lo && 8 * (i / 4) + 1 < hi ? s[i + 1] : NEG_INF;
                }
            }
        }
        // the row maxima and sums in 4 partial chains a row (a chain of 32 dependent
        // instructions a row left the warp waiting on each one's latency)
        float mx4[2][4], rs4[2][4], mx[2], ms[2], rs[2];
#pragma unroll
        for (int r = 0; r < 2; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) mx4[r][c] = NEG_INF, rs4[r][c] = 0.f;
#pragma unroll
        for (int i = 0; i < BN / 2; i++) mx4[(i / 2) % 2][(i / 4) % 4] = fmaxf(mx4[(i / 2) % 2][(i / 4) % 4], s[i]);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(fmaxf(mx4[r][0], mx4[r][1]), fmaxf(mx4[r][2], mx4[r][3]));
            mx[r] = fmaxf(mx[r], shfl_xor(mx[r], 1));
            mx[r] = fmaxf(mx[r], shfl_xor(mx[r], 2));
            float m_new;
            if constexpr (Q_TO_F16) m_new = fmaxf(m_run[r], mx[r] * (p.cap != 0.f ? p.exp_scale : p.exp_scale * q_unscale));
            else m_new = fmaxf(m_run[r], mx[r] * p.exp_scale);
            ms[r] = m_new == NEG_INF ? 0.f : m_new; // a row with no key yet: p = 0, not NaN
            alpha[r] = exp2_ftz(m_run[r] - ms[r]);
            m_run[r] = m_new;
        }
#pragma unroll
        for (int i = 0; i < BN / 2; i++) {
            if constexpr (Q_TO_F16) s[i] = exp2_ftz(fmaf(s[i], p.cap != 0.f ? p.exp_scale : p.exp_scale * q_unscale, -ms[(i / 2) % 2]));
            else s[i] = exp2_ftz(fmaf(s[i], p.exp_scale, -ms[(i / 2) % 2]));
            rs4[(i / 2) % 2][(i / 4) % 4] += s[i];
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            rs[r] = (rs4[r][0] + rs4[r][1]) + (rs4[r][2] + rs4[r][3]);
            l_run[r] = fmaf(l_run[r], alpha[r], rs[r]);
        }
    };
    // P rounded into A fragments. 16-bit: k-step kk's register e packs i = 8 kk + 2 e and + 1.
    // fp8 (keys in v^T's order, transpose_v_block): register e of k-step kk packs i = 16 kk +
    // 2 e' + 8 (e / 2) + {0, 1, 4, 5}, e' = e % 2 (the row half).
    auto pack = [&](const float (&s)[BN / 2], uint32_t (&pf)[PK][4]) {
        if constexpr (FP8) {
#pragma unroll
            for (int kk = 0; kk < PK; kk++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = 16 * kk + 2 * (e % 2) + 8 * (e / 2);
                    pf[kk][e] = e4m3x2_from_f32(s[i], s[i + 1]) | e4m3x2_from_f32(s[i + 4], s[i + 5]) << 16;
                }
        } else {
#pragma unroll
            for (int i = 0; i < BN / 2; i += 2) pf[i / 8][(i % 8) / 2] = pack2<elem<DTV>>(s[i], s[i + 1]);
        }
    };
    // Releases the v stage once this warp's P v on it is done. fp8: the transposing warps
    // write the stage next, ordinary stores, so the whole warp's reads are ordered before the
    // release (__syncwarp), not only lane 0's.
    auto release_v = [&] {
        if (FP8) __syncwarp();
        if (lane == 0) vpipe->consumer_release(vst);
        vst.advance();
    };
    // O times the factor of its rows' moved maxima, skipped by a warp whose rows all kept theirs
    // (alpha 1: most blocks of a long row). O must not be in a wgmma's hands.
    auto rescale_o = [&](const float (&alpha)[2]) {
        if (__any_sync(~0u, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
            for (int i = 0; i < DV / 2; i++) o[i] *= alpha[(i / 2) % 2];
        }
    };
    // Releases q (and the tile's slot) once the warp's last q k^T of the tile is done.
    auto release_q = [&] { mbar_arrive(q_empty); };
    // The epilogue stages o in the k stage of the tile's last block (where BM rows of DV
    // 16-bit columns fit: BN x D >= BM x DV) and writes it out by TMA, a warpgroup's 64 rows
    // in one copy (row by row where some are past the request's queries): from registers, 32
    // 4-byte stores a thread held their registers until the stores drained (18% of the
    // consumers' samples at L = 1024), and the threads' own 16-byte stores from the stage
    // were 1.04-1.06x slower there than TMA (docs/notes/prefill.md). That stage is released
    // once it has been read. The other warpgroups may still be reading it for their last q k^T:
    // the tile's phase of q_empty says when all are done (a phase no warpgroup a tile ahead
    // can overrun: the next one needs this epilogue first). Not at d256 or with fp8
    // (their k stage is half o's size) nor the gathering producers (their d64 kernels spilled
    // with it). The thread that stores a warpgroup's rows waits for the copy's read of the
    // stage, and releases it, only after its next tile's first q k^T is issued (o_pending;
    // two consumers): waited at once, the warpgroup's next wgmma waited for it. The producer
    // fills two other stages first.
    constexpr bool STAGE_O = !FP8 && !GATHER && BN * D >= BM * DV;
    // UNIFORM_ISSUE: branches ptxas would take as divergent (on values each thread loaded:
    // the tile's number, its bounds) written so that it can prove them uniform, the tile
    // loop's exit as a warp vote and the block loop's first step as a flag. Otherwise the
    // state handed past them (the held k stage, o_pending, v's pipeline state) took k's and
    // v's wgmma descriptors out of the uniform registers: each rebuilt in ordinary ones and
    // moved over (two R2UR) for every wgmma. The 16-bit d128 and d192 kernels, where that
    // measured 1.02-1.06x; fp8, d64 and d256 measured 0.97-1.00x (docs/notes/prefill.md,
    // step 24).
    constexpr bool UNIFORM_ISSUE = !FP8 && (D == 128 || D == 192);
    PipeState<STAGES> o_stage; // the held k stage
    bool o_pending = false;
    auto release_o_stage = [&] {
        if (STAGE_O && o_pending) {
            bulk_wait_group_read<0>();
#pragma unroll
            for (int w = 0; w < 4; w++) kpipe->consumer_release(o_stage); // one a warp
            o_pending = false;
        }
    };
    auto release_k = [&](bool last) {
        if (STAGE_O && last) {
            o_stage = kst;
        } else if (lane == 0) {
            kpipe->consumer_release(kst);
        }
        kst.advance();
    };

    for (int k = 0;; k++) {
        mbar_wait(q_full, k % 2); // the tile's q, or -1: no tiles left (and its slot)
        const int t = tile_slot[k % 2];
        // (UNIFORM_ISSUE: a vote; every lane read the same t)
        if (UNIFORM_ISSUE ? __any_sync(~0u, t < 0) : t < 0) {
            release_o_stage(); // the last store's read before the CTA's shared memory goes
            break;
        }
        if constexpr (Q_TO_F16) q_to_f16();
        tl = tile_box[k % 3];
        first_pv = true;
#pragma unroll
        for (int i = 0; i < DV / 2; i++) o[i] = 0.f;
        m_run[0] = m_run[1] = NEG_INF;
        l_run[0] = l_run[1] = 0.f;
        // Ping-pong: the two warpgroups take turns at issuing their wgmmas (named barriers 1
        // and 2: a warpgroup waits for its turn, issues, then hands the turn over), so that
        // one's softmax runs while the other's matrix products occupy the tensor cores. Per
        // tile, warpgroup 2 hands warpgroup 1 the first turn and takes no turn after its last.
        // fp8 and d64 issue without turns: their products are short against the softmax, and
        // taking turns made each warpgroup wait for the other's softmax (measured 1.03-1.05x
        // and 1.09x faster without, docs/notes/prefill.md). KV_PAGES keeps them at d64: warpgroup
        // 2's first P v must follow warpgroup 1's zeroing of the v tail (zero_v_tail). Three
        // consumers take no turns either (turns among them measured 0.82-0.87x).
        constexpr bool PING_PONG = !FP8 && !SERIAL && (D != 64 || KV == TALON__PREFILL_KV_PAGES);
        const int phases = tl.nb_hi - tl.nb_lo + 1; // issue points: first S, S + P v per block, last P v
        int phase = 0;
        auto my_turn = [&] {
            if (PING_PONG) named_bar_sync(1 + band, 256);
        };
        auto their_turn = [&] {
            if (PING_PONG && (band == 0 || ++phase < phases)) named_bar_arrive(2 - band, 256);
        };
        if (PING_PONG && band == 1 && phases > 1) named_bar_arrive(1, 256);

        if (SERIAL && tl.nb_hi > tl.nb_lo) {
            // O is not being written while the softmax runs: alpha applies at once
            float s[BN / 2], alpha[2];
            uint32_t pf[PK][4];
            for (int n = tl.nb_hi - 1; n >= tl.nb_lo; n--) {
                issue_qk(s);
                wgmma_wait<0>();
                fence_operand(s);
                release_k(n == tl.nb_lo);
                if (n == tl.nb_lo) release_q();
                softmax(s, n, alpha);
                rescale_o(alpha);
                pack(s, pf);
                issue_pv(pf);
                wgmma_wait<0>();
                fence_operand(o);
                release_v();
            }
        } else if (tl.nb_hi > tl.nb_lo) {
            // Software pipeline: S of block n is computed while P v of block n + 1 (blocks
            // are walked downwards) still runs, and the softmax of block n overlaps that P v.
            // O takes the factor of block n + 1's maxima right after S of block n is issued,
            // under that product (O is in no wgmma's hands there), and P v of block n + 1
            // follows. The wait for a P v heads the next step, before P is packed over its A
            // registers: placed straight after the softmax, ptxas hoisted it (and the v stage's
            // release) above the softmax, which then no longer overlapped P v (SASS,
            // docs/notes/prefill.md).
            float s[BN / 2], alpha[2];
            uint32_t pf[PK][4];
            my_turn();
            issue_qk(s);
            their_turn();
            release_o_stage();
            wgmma_wait<0>();
            fence_operand(s);
            release_k(tl.nb_hi - 1 == tl.nb_lo);
            if (tl.nb_hi - 1 == tl.nb_lo) release_q();
            softmax(s, tl.nb_hi - 1, alpha);
            // whether the loop has issued a P v (all but its first step; UNIFORM_ISSUE: a flag
            // rather than a test of n against the tile's bounds)
            bool pv_issued = false;
            for (int n = tl.nb_hi - 2;; n--) {
                wgmma_wait<0>(); // P v of block n + 2
                fence_operand(o);
                if (UNIFORM_ISSUE ? pv_issued : n != tl.nb_hi - 2) release_v();
                pack(s, pf);
                my_turn();
                if (n < tl.nb_lo) break;
                issue_qk(s);
                rescale_o(alpha);
                issue_pv(pf);
                pv_issued = true;
                their_turn();
                wgmma_wait<1>(); // S done, P v still running
                fence_operand(s);
                release_k(n == tl.nb_lo);
                if (n == tl.nb_lo) release_q();
                softmax(s, n, alpha);
            }
            rescale_o(alpha);
            issue_pv(pf);
            their_turn();
            wgmma_wait<0>();
            fence_operand(o);
            release_v();
        } else {
            release_q();
            release_o_stage();
        }

        // ---- o = O / l, lse = ln(sum exp(score)) = (max + log2 l) ln 2
        // The tile read again (its slot and box are not rewritten before this tile's q and the
        // next tile's are released): the fields only the epilogue reads (request, head, rows)
        // then hold no registers through the block loop.
        tl = tile_box[k % 3];
        TO *out = reinterpret_cast<TO *>(p.o);
        float *lse = reinterpret_cast<float *>(p.lse);
        // rows of this request inside o, even for cu_seqlens that break the caller's promise
        auto row_ok = [&](int row) {
            return row < tl.q_len && int64_t(tl.q0) + row >= 0 && int64_t(tl.q0) + row < p.total_q;
        };
        // o's scale of this thread's rows, 1 / l (l: the lanes' partial sums) times o_scale,
        // and their lse (m: the rows' maxima)
        auto finish_rows = [&](const float (&m)[2], const float (&ls)[2], float (&inv)[2]) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float l = ls[r];
                l += shfl_xor(l, 1);
                l += shfl_xor(l, 2);
                inv[r] = l > 0.f ? p.o_scale / l : 0.f;
                const int row = tl.m0 + r0 + 8 * r;
                if (lse && lane % 4 == 0 && row_ok(row))
                    lse[(int64_t(tl.q0) + row) * p.num_qo_heads + tl.h] =
                        l > 0.f ? (m[r] + log2f(l)) * 0.6931471805599453f : NEG_INF;
            }
        };
        // this thread's columns 2 (lane % 4) + {0, 1} of o's row r0 + 8 r (+ 8 q for pair q), or
        // null where the row is not in o
        auto o_row = [&](int r) -> TO * {
            const int row = tl.m0 + r0 + 8 * r;
            return row_ok(row) ? out + (int64_t(tl.q0) + row) * p.o_stride + int64_t(tl.h) * DV + 2 * (lane % 4)
                               : nullptr;
        };
        float inv[2];
        if (tile_slot[k % 2] >= p.split_first) {
            // A piece: its partial out; the last of a tile's pieces (a warp's rows at a time)
            // merges all of them in piece order, so that o does not depend on which finished
            // last, a pair of o's registers at a time (few registers: the block loop's stay
            // as they are). o leaves from registers: the held k stage goes back as it is.
            constexpr int WORDS = DV / 2 + 4;
            const float *pieces;
            if (STAGE_O && tl.nb_hi > tl.nb_lo) {
                __syncwarp();
                if (lane == 0) kpipe->consumer_release(o_stage);
            }
            if (!split_piece_done<DV, BM / 16>(p, tile_slot[k % 2], band * 4 + warp_in_warpgroup(),
                                               o, m_run, l_run, pieces))
                continue;
            // every piece's loads at once (pieces up to TALON__PREFILL_SPLIT_PARTS, unrolled):
            // a loop over the pieces waited for each load in turn, at the call's end
            constexpr int PARTS = TALON__PREFILL_SPLIT_PARTS;
            float mj[PARTS][2], w[PARTS][2], mx[2] = {NEG_INF, NEG_INF}, ms[2], ls[2] = {0.f, 0.f};
#pragma unroll
            for (int j = 0; j < PARTS; j++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    mj[j][r] = j < p.split_parts ? __ldcg(pieces + j * (WORDS * 32) + 32 * (DV / 2 + r)) : NEG_INF;
                    mx[r] = fmaxf(mx[r], mj[j][r]);
                }
#pragma unroll
            for (int r = 0; r < 2; r++) ms[r] = mx[r] == NEG_INF ? 0.f : mx[r]; // rows with no key: 0
#pragma unroll
            for (int j = 0; j < PARTS; j++)
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    w[j][r] = exp2_ftz(mj[j][r] - ms[r]); // 0 past the pieces
                    if (j < p.split_parts)
                        ls[r] = fmaf(__ldcg(pieces + j * (WORDS * 32) + 32 * (DV / 2 + 2 + r)), w[j][r], ls[r]);
                }
            finish_rows(mx, ls, inv);
            TO *const rows[2] = {o_row(0), o_row(1)};
#pragma unroll 1
            for (int q = 0; q < DV / 8; q += 2) { // registers 4 q .. 4 q + 7: pairs q, q + 1 of both rows
                float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int j = 0; j < PARTS; j++)
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        if (j < p.split_parts)
                            a[e] = fmaf(__ldcg(pieces + j * (WORDS * 32) + 32 * (4 * q + e)), w[j][(e / 2) % 2], a[e]);
#pragma unroll
                for (int e = 0; e < 8; e += 2) {
                    const int r = (e / 2) % 2;
                    if (rows[r])
                        *reinterpret_cast<uint32_t *>(rows[r] + 8 * (q + e / 4)) = pack2<TO>(a[e] * inv[r], a[e + 1] * inv[r]);
                }
            }
            continue;
        }
        finish_rows(m_run, l_run, inv);
        if (STAGE_O && tl.nb_hi > tl.nb_lo) {
            // the warpgroup's 64 rows of DV columns as TMA stores them: DV / 64 chunks of 64
            // rows x 128 bytes, 16-byte piece x of row i at x ^ (i % 8) (the 128-byte swizzle;
            // stmatrix's 8 rows and the loop's row pieces also fall in different banks so)
            constexpr int PIECES = DV / 8;
            const uint32_t stage = smem_addr(sk + o_stage.stage * BN * D) + band * 64 * DV * 2;
            // piece c of row i, given i8 = i % 8 (a constant per thread where it is used)
            auto piece = [&](int i, int c, int i8) {
                return stage + (c / 8) * 8192 + i * 128 + (((c % 8) ^ i8) << 4);
            };
            mbar_wait(q_empty, k % 2); // every warpgroup's last q k^T of this tile is done
#pragma unroll
            for (int j = 0; j < DV / 8; j += 2) {
                // matrices (row half, 8 columns) (0, j), (1, j), (0, j + 1), (1, j + 1)
                const uint32_t x[4] = {pack2<TO>(o[4 * j] * inv[0], o[4 * j + 1] * inv[0]),
                                       pack2<TO>(o[4 * j + 2] * inv[1], o[4 * j + 3] * inv[1]),
                                       pack2<TO>(o[4 * j + 4] * inv[0], o[4 * j + 5] * inv[0]),
                                       pack2<TO>(o[4 * j + 6] * inv[1], o[4 * j + 7] * inv[1])};
                const int m = lane / 8, i = 16 * warp_in_warpgroup() + 8 * (m % 2) + lane % 8;
                stmatrix_x4(piece(i, j + m / 2, lane % 8), x);
            }
            // All 64 rows in the request (and in o): one thread stores them by TMA and releases
            // the stage once the copy has read it, while the rest go on to the next tile.
            // Otherwise each thread stores its row pieces that are (the request's last tile).
            const int row0 = tl.m0 + band * 64;
            if (row0 + 64 <= tl.q_len && tl.q0 >= 0 && int64_t(tl.q0) + row0 + 64 <= p.total_q) {
                fence_proxy_async(); // the stmatrix writes, read next by the TMA unit
                named_bar_sync(6 + band, 128);
                if (thread_in_warpgroup() == 0) {
                    const T *rows = sk + o_stage.stage * BN * D + band * 64 * DV; // = stage
#pragma unroll
                    for (int c = 0; c < DV / 64; c++)
                        tma_store_3d(&p.o_map, rows + c * 4096, c * 64, tl.h, tl.q0 + row0);
                    bulk_commit_group();
                    o_pending = true;
                    if (SERIAL) release_o_stage(); // three consumers wait here: the flag through
                                                   // their loop spilled at 160 registers
                }
            } else {
                named_bar_sync(6 + band, 128); // the warpgroup's rows are staged
                // thread x takes piece x % PIECES of rows x / PIECES + STEP it: all loads first,
                // then all stores (the rotation i % 8 is the same for every it: STEP is a
                // multiple of 8)
                constexpr int STEP = 128 / PIECES, PASSES = 64 / STEP;
                const int c = thread_in_warpgroup() % PIECES, i0 = thread_in_warpgroup() / PIECES;
                uint32_t v[PASSES][4];
#pragma unroll
                for (int it = 0; it < PASSES; it++) lds<4>(v[it], piece(i0 + STEP * it, c, i0 % 8));
                TO *at = out + (int64_t(tl.q0) + row0 + i0) * p.o_stride + int64_t(tl.h) * DV + 8 * c;
#pragma unroll
                for (int it = 0; it < PASSES; it++)
                    if (row_ok(row0 + i0 + STEP * it))
                        *reinterpret_cast<uint4 *>(at + int64_t(STEP * it) * p.o_stride) =
                            make_uint4(v[it][0], v[it][1], v[it][2], v[it][3]);
                fence_proxy_async(); // ordinary accesses to the stage before its next TMA fill
                __syncwarp();
                if (lane == 0) kpipe->consumer_release(o_stage);
            }
        } else {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                TO *orow = o_row(r);
                if (!orow) continue;
#pragma unroll
                for (int q = 0; q < DV / 8; q++)
                    *reinterpret_cast<uint32_t *>(orow + 8 * q) =
                        pack2<TO>(o[4 * q + 2 * r] * inv[r], o[4 * q + 2 * r + 1] * inv[r]);
            }
        }
    }
}

} // namespace talon::prefill

TALON__KERNELS_prefill(TALON_DEV_KERNEL)
