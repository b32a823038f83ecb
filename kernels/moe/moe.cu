// moe.cu - mixture-of-experts glue: moe_align_block_size (vLLM semantics, deterministic order)
// and moe_sum (weighted sum of each token's k expert outputs).
//
// moe_align strategy: each warp owns a contiguous run of flat ids and ranks them 32 at a time
// against a running count per expert, so the order inside an expert is ascending flat index
// whatever the schedule. Variants:
// - register kernels (<= MOE_ALIGN_C8W_MAX ids): blocks of 512 threads, a thread per expert,
//   each lane's ids loaded once into registers. small (<= 2048 ids): one block; sliced (the
//   same ids, a sorted_capacity over 2048): independent blocks, each ranking all the ids and
//   storing only its slice of the outputs (its own kernel: compiled into the one-block one,
//   the slicing measured slower there; docs/notes/moe.md); c8 / c8w: a
//   compile-time cluster of 8 (a plain launch forms it), 8 or 32 ids per lane. A step's lanes
//   of one expert find each other by OR-ing their bits into the warp's mask word of that expert
//   (OR commutes: deterministic); the lowest of them clears it and advances the count. Thread e
//   then scans expert e over the warps, a cluster adds up its blocks' totals through distributed
//   shared memory, and every block scans the padded counts over the experts itself. Ids go
//   through a shared-memory stage (from one id per thread on) so each expert's run is stored
//   to consecutive addresses. A small block writes the sentinel over its slice first, under
//   the loads' latency (one block filling every slot measured slower); a cluster writes only
//   the padding and the tail at the end, so no block's fill has to be ordered before another
//   block's ids. Latency-bound: few barriers; 16-bit counts and one shared region reused after
//   ranking keep shared memory at 48 KB up to c8 (more shared memory measured slower).
//   Measurements: docs/notes/moe.md.
// - x8 (larger): a cluster of 8 blocks of 1024 threads. Global warp g (block rank * 32 + warp)
//   owns the contiguous flat ids [g * chunk, (g+1) * chunk).
//   1. Each warp counts its ids per expert into its own shared-memory row (atomics).
//   2. Each expert's column is scanned over the 32 warps (a thread per expert); the block
//      totals are exchanged through distributed shared memory, giving every block the ids of
//      that expert in lower-ranked blocks and the grand count. Every block then scans the
//      padded counts over the experts itself (<= 512 entries), so no block waits on another
//      again (a block only waits, before exiting, until the others have read its totals).
//   3. Each warp re-reads its ids, 32 at a time, and places them: running position of the
//      expert in this warp (after earlier warps) + rank among the lanes of the step holding the
//      same expert (one ballot per key bit). When the block's ids fit the stage (16384) they
//      are placed in shared memory in expert order and then copied out; larger problems store
//      straight to memory.
//   4. Sentinel padding (a warp per expert), the tail up to the caller's capacity (16-byte
//      stores) and the expert id of every block (binary search over the segment starts, -1
//      past the end) are spread over all threads of the cluster; these slots never meet the ids
//      of step 3.
// Invalid ids (outside [0, experts)) are never counted or placed.
//
// moe_sum strategy: purely streaming, as act.cu: the grid is tokens x chunks, each thread R
// VEC-wide slices of hidden (blockDim VEC apart) for all k experts of its token, eight 16-byte
// loads in flight before any arithmetic: R = 1 for k > 4, 2 for k 3..4, 4 for k <= 2, so a
// small k keeps as many bytes in flight as k = 8; weights are fp32 broadcast loads. Variants:
// element type x VEC (8 = 16-byte path, 1 = any shape and alignment) x R (16-byte path).
#include <cooperative_groups.h>
#include <type_traits>
#include "dev/kernel.cuh"
#include "dev/mbarrier.cuh"
#include "dev/reduce.cuh"
#include "talon/kernels/moe.def"

namespace talon::moe {
using namespace talon::dev;

namespace cg = cooperative_groups;

constexpr int WARPS = TALON__MOE_ALIGN_WARPS;
constexpr int EMAX = TALON__MOE_MAX_EXPERTS;

template <int CL> __device__ __forceinline__ void cluster_sync() {
    if constexpr (CL > 1) cg::this_cluster().sync();
    else __syncthreads();
}

// Ids a lane holds at once: 16 KB per warp in flight per round trip. A warp whose chunk fits
// (<= 512 ids: every problem the stage takes) reads its ids from memory exactly once.
constexpr int UNROLL = 16;

struct IdGroup {
    int e[UNROLL];
};

__device__ __forceinline__ IdGroup load_ids(const int *ids, int s, int hi) {
    const int lane = threadIdx.x % 32;
    IdGroup g;
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int i = s + u * 32 + lane;
        g.e[u] = i < hi ? __ldg(ids + i) : -1;
    }
    return g;
}

// Runs f(id, flat, valid) over the warp's ids [lo, hi), steps of 32 ids in ascending order,
// the first group from `first` (loaded at lo); warp-uniform, so f may use warp collectives.
template <typename F>
__device__ __forceinline__ void for_warp_ids(const int *ids, int lo, int hi, int experts,
                                             const IdGroup &first, F f) {
    const int lane = threadIdx.x % 32;
    for (int s = lo; s < hi; s += 32 * UNROLL) {
        const IdGroup g = s == lo ? first : load_ids(ids, s, hi);
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (s + u * 32 < hi) f(g.e[u], s + u * 32 + lane, unsigned(g.e[u]) < unsigned(experts));
    }
}

// Lanes whose key equals this lane's, from one ballot per key bit: much cheaper than
// __match_any_sync over 32 distinct keys (as CUB does it).
__device__ __forceinline__ unsigned same_key_lanes(int key, int bits) {
    unsigned m = ~0u;
    for (int b = 0; b < bits; b++) {
        const bool bit = (key >> b) & 1;
        const unsigned v = __ballot_sync(~0u, bit);
        m &= bit ? v : ~v;
    }
    return m;
}

// p[0, count) = v over threads t of nt: 16-byte stores between a 4-byte head and tail.
__device__ __forceinline__ void fill(int *p, int64_t count, int v, int t, int nt) {
    const int64_t head = min(int64_t((0u - unsigned(reinterpret_cast<uintptr_t>(p) >> 2)) & 3u), count);
    const int64_t nvec = (count - head) / 4, tail = head + nvec * 4;
    if (t < head) p[t] = v;
    int4 *q = reinterpret_cast<int4 *>(p + head);
    for (int64_t i = t; i < nvec; i += nt) q[i] = make_int4(v, v, v, v);
    if (t < count - tail) p[tail + t] = v;
}

// Ids of expert e in the lower-ranked blocks of the cluster (*before) and in all (*all), from
// each block's totals tot[] in distributed shared memory.
template <int CL>
__device__ __forceinline__ void cluster_count(int *tot, int e, int rank, int *before, int *all) {
    cg::cluster_group cluster = cg::this_cluster();
    int b = 0, a = 0;
#pragma unroll
    for (int r = 0; r < CL; r++) {
        const int t = *cluster.map_shared_rank(tot + e, r);
        if (r < rank) b += t;
        a += t;
    }
    *before = b;
    *all = a;
}

template <int CL, int STAGE>
__device__ __forceinline__ void moe_align_looped(const talon__moe_align_params &p) {
    extern __shared__ int smem[];
    const int E = p.experts, ES = E + 1, B = p.block_size;
    int *cnt = smem;                     // [WARPS][ES]: counts, then running local positions
    int *tot = cnt + WARPS * (EMAX + 1); // [E] this block's ids per expert (read by the cluster)
    int *before = tot + EMAX;            // [E] ids of expert e in lower-ranked blocks, then
                                         //     the first position of this block's ids of e
    int *count = before + EMAX;          // [E] ids of expert e in all blocks
    int *delta = count + EMAX;           // [E] global minus local position of expert e's ids
    int *start = delta + EMAX;           // [E + 1] padded group starts
    int *stage = start + EMAX + 1;       // [STAGE] this block's ids in local order ...
    int *stage_pos = stage + STAGE;      // ... and their global positions
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int rank = CL > 1 ? int(cg::this_cluster().block_rank()) : 0;
    const int n = p.numel;
    const int lo = min((rank * WARPS + warp) * p.chunk, n), hi = min(lo + p.chunk, n);
    // The block's ids fit the stage: place them in shared memory, then copy each expert's run
    // out contiguously (scattered 4-byte global stores cost a cache line each).
    const bool staged = WARPS * p.chunk <= STAGE;
    const int *ids = reinterpret_cast<const int *>(p.topk_ids);
    int *sorted = reinterpret_cast<int *>(p.sorted);
    int *expert_ids = reinterpret_cast<int *>(p.expert_ids);
    int *row = cnt + warp * ES;

    const IdGroup first = load_ids(ids, lo, hi); // in flight while the counts are cleared
    for (int i = threadIdx.x; i < WARPS * ES; i += blockDim.x) cnt[i] = 0;
    __syncthreads();

    // 1. per-warp counts
    for_warp_ids(ids, lo, hi, E, first, [&](int e, int, bool ok) {
        if (ok) atomicAdd(row + e, 1);
    });
    __syncthreads();

    // 2. exclusive scan of each expert over the warps, a thread per expert (its 32 counts are
    // loaded before the running sum needs them); block totals
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int sum = 0;
#pragma unroll
        for (int w0 = 0; w0 < WARPS; w0 += 8) { // 8 loads in flight: no spills beside the ids
            int v[8];
#pragma unroll
            for (int w = 0; w < 8; w++) v[w] = cnt[(w0 + w) * ES + e];
#pragma unroll
            for (int w = 0; w < 8; w++) {
                cnt[(w0 + w) * ES + e] = sum;
                sum += v[w];
            }
        }
        tot[e] = sum;
    }
    cluster_sync<CL>();
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int b = 0, all = tot[e];
        if constexpr (CL > 1) cluster_count<CL>(tot, e, rank, &b, &all);
        before[e] = b;
        count[e] = all;
    }
    // No block may exit (releasing its shared memory) before the others have read its tot:
    // arrive now, wait at the very end.
    if constexpr (CL > 1) cluster_arrive();

    // padded group starts, and where this block's ids of each expert go (E <= blockDim.x)
    int total, placed;
    {
        const int e = threadIdx.x;
        __shared__ int2 warp_sum[WARPS + 1];
        int2 t;
        const int2 sc = block_exclusive_scan2<WARPS>(
            make_int2(e < E ? (count[e] + B - 1) & -B : 0, e < E && staged ? tot[e] : 0), &t,
            warp_sum);
        total = t.x;
        placed = t.y;
        if (e <= E) start[e] = sc.x;
        if (e < E) { // tot may still be read by other blocks: before takes the first positions
            delta[e] = staged ? sc.x + before[e] - sc.y : 0;
            before[e] = staged ? sc.y : sc.x + before[e]; // local or global
        }
    }
    __syncthreads();
    for (int e = lane; e < E; e += 32) row[e] += before[e]; // each warp needs only its own row
    __syncwarp();

    // 3. place the ids: running position + rank among the lanes of this step with that expert
    const int bits = 32 - __clz(E); // keys 0 .. E (E: invalid)
    for_warp_ids(ids, lo, hi, E, first, [&](int e, int flat, bool ok) {
        const unsigned m = same_key_lanes(ok ? e : E, bits);
        const int base = ok ? row[e] : 0, pos = base + __popc(m & ((1u << lane) - 1));
        if (ok && staged) {
            stage[pos] = flat;
            stage_pos[pos] = pos + delta[e];
        } else if (ok) {
            sorted[pos] = flat;
        }
        __syncwarp();
        if (ok && lane == __ffs(m) - 1) row[e] = base + __popc(m);
        __syncwarp();
    });
    if (staged) {
        __syncthreads();
        for (int i = threadIdx.x; i < placed; i += blockDim.x) sorted[stage_pos[i]] = stage[i];
    }

    // 4. sentinels, block ids, the count
    const int gthread = rank * blockDim.x + threadIdx.x, nthreads = CL * blockDim.x;
    for (int e = rank * WARPS + warp; e < E; e += CL * WARPS)
        for (int i = start[e] + count[e] + lane; i < start[e + 1]; i += 32) sorted[i] = n;
    fill(sorted + total, p.sorted_capacity - total, n, gthread, nthreads);
    const int nblocks = total / B;
    for (int64_t b = gthread; b < p.expert_ids_capacity; b += nthreads) {
        int v = -1;
        if (b < nblocks) {
            // the expert e with start[e] <= b * B < start[e + 1]
            const int x = int(b) * B;
            int l = 0, h = E; // start[l] <= x < start[h]
            while (h - l > 1) {
                const int mid = (l + h) / 2;
                if (start[mid] <= x) l = mid;
                else h = mid;
            }
            v = l;
        }
        expert_ids[b] = v;
    }
    if (gthread == 0) *reinterpret_cast<int *>(p.num_post) = total;
    if constexpr (CL > 1) cluster_wait();
}

constexpr int SW = TALON__MOE_ALIGN_REGS_WARPS;
static_assert(SW * 32 >= EMAX, "thread e owns expert e");

// Staged ids of the register kernels whose blocks hold <= 4096 ids are packed as
// global position << SFLAT | offset in the block (positions < 2^20); larger ones keep the
// offset in a second, 16-bit array.
constexpr int SFLAT = 12;
static_assert((int64_t(TALON__MOE_ALIGN_C8_MAX) + EMAX * 1023) < (int64_t(1) << (32 - SFLAT)),
              "packed position fits");

// Lanes whose key equals this lane's through a per-warp mask row in shared memory: every
// lane ORs its bit into its key's word (OR commutes, so the word is deterministic), reads it
// back, and the lowest lane of the group clears it and advances the running count; a few
// instructions instead of one ballot per key bit. Shared memory: 16-bit rows (counts < 2^16),
// then one region that holds the mask rows while ranking and everything else afterwards.
template <int CL, int SU, bool SLICED>
__device__ __forceinline__ void align_regs(const talon__moe_align_params &p) {
    constexpr int IDS = SW * 32 * SU; // ids of a block at most
    constexpr bool PACK = IDS <= 1 << SFLAT;
    static_assert(!PACK == (IDS > 4096), "the layout TALON__MOE_ALIGN_REGS_SMEM sizes");
    extern __shared__ int smem[];
    unsigned short *cnt = reinterpret_cast<unsigned short *>(smem); // [SW][EMAX] running
                        // counts, then ids of e in earlier warps of this block
    int *region = smem + SW * EMAX / 2;
    unsigned *msk = reinterpret_cast<unsigned *>(region); // [SW][EMAX] while ranking
    int *tot = region;          // [E] this block's ids of e (read by the cluster)
    int *first = tot + EMAX;    // [E] where this block's ids of e start (local or global)
    int *delta = first + EMAX;  // [E] global minus local position of this block's ids of e
    int *gstart = delta + EMAX; // [E] padded group start (cluster: padding at the end)
    int *gcount = gstart + EMAX; // [E] ids of e in the cluster
    int2 *warp_sum = reinterpret_cast<int2 *>(gcount + EMAX); // [SW + 1]
    int *stage = reinterpret_cast<int *>(warp_sum + SW + 1); // [IDS] ids in local order
    unsigned short *sflat = reinterpret_cast<unsigned short *>(stage + IDS); // [IDS] (!PACK)
    const int E = p.experts, B = p.block_size, n = p.numel;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int rank = CL > 1 ? int(cg::this_cluster().block_rank()) : 0;
    const int blo = min(rank * SW * p.chunk, n);
    const int lo = min(blo + warp * p.chunk, n), hi = min(lo + p.chunk, n);
    // Many ids: place them in shared memory and copy each expert's run out to consecutive
    // addresses (a warp's scattered 4-byte stores cost a cache line each). Few: direct.
    const bool staged = n >= CL * SW * 32;
    // Sliced (small, grid > 1): this block's part of sorted and of expert_ids (the host's
    // division); unsliced, the code is that of one block owning everything.
    int64_t s0 = 0, s1 = p.sorted_capacity, b0 = 0, b1 = p.expert_ids_capacity;
    if constexpr (SLICED) {
        s0 = min(blockIdx.x * p.sorted_slice, s1);
        s1 = min(s0 + p.sorted_slice, s1);
        b0 = min(blockIdx.x * p.expert_ids_slice, b1);
        b1 = min(b0 + p.expert_ids_slice, b1);
    }
    auto mine = [&](int64_t i) { return !SLICED || (i >= s0 && i < s1); };
    const int *ids = reinterpret_cast<const int *>(p.topk_ids);
    int *sorted = reinterpret_cast<int *>(p.sorted);
    int *expert_ids = reinterpret_cast<int *>(p.expert_ids);
    unsigned short *row = cnt + warp * EMAX;
    unsigned *mrow = msk + warp * EMAX;
    int key[SU]; // the id, then expert | rank in the warp << 10 (keys <= 512, ranks < 2^21)
#pragma unroll
    for (int u = 0; u < SU; u++) {
        const int i = lo + u * 32 + lane;
        key[u] = i < hi ? __ldg(ids + i) : -1;
    }
    for (int e = lane; e < EMAX / 2; e += 32) reinterpret_cast<int *>(row)[e] = 0;
    for (int e = lane; e < E; e += 32) mrow[e] = 0;
    // Small: the sentinel over the slice now, under the loads' latency; a cluster pads at the
    // end instead, so no block's fill has to be ordered before another block's ids.
    if constexpr (CL == 1) fill(sorted + s0, s1 - s0, n, threadIdx.x, blockDim.x);
    __syncwarp();

    // rank in the warp (ascending flat index); invalid ids get key E and are never placed
#pragma unroll
    for (int u = 0; u < SU; u++) {
        if (lo + u * 32 >= hi) break;
        const int k = unsigned(key[u]) < unsigned(E) ? key[u] : E;
        unsigned m;
        int base = 0;
        if (k < E) atomicOr(mrow + k, 1u << lane);
        __syncwarp();
        m = k < E ? mrow[k] : 0u;
        if (k < E) base = row[k];
        __syncwarp();
        if (k < E && lane == __ffs(m) - 1) {
            mrow[k] = 0;
            row[k] = (unsigned short)(base + __popc(m));
        }
        key[u] = k | (base + __popc(m & ((1u << lane) - 1))) << 10;
        __syncwarp();
    }
    __syncthreads();

    // thread e: expert e over the warps; over the cluster (distributed shared memory); then
    // the padded starts over the experts
    const int e = threadIdx.x;
    int v[SW], sum = 0;
#pragma unroll
    for (int w = 0; w < SW; w++) v[w] = e < E ? cnt[w * EMAX + e] : 0;
#pragma unroll
    for (int w = 0; w < SW; w++) {
        const int c = v[w];
        v[w] = sum;
        sum += c;
    }
    int before = 0, all = sum;
    if constexpr (CL > 1) {
        if (e < E) tot[e] = sum;
        cg::this_cluster().sync();
        if (e < E) cluster_count<CL>(tot, e, rank, &before, &all);
        // no block may exit before the others have read its tot: arrive now, wait at the end
        cluster_arrive();
    }
    const int pad = (all + B - 1) & -B;
    int2 t;
    const int2 sc = block_exclusive_scan2<SW>(make_int2(pad, sum), &t, warp_sum);
    const int total = t.x, placed = t.y, global = sc.x + before;
    if (e < E) {
#pragma unroll
        for (int w = 0; w < SW; w++) cnt[w * EMAX + e] = (unsigned short)v[w];
        first[e] = staged ? sc.y : global;
        delta[e] = global - sc.y;
        if constexpr (CL > 1) {
            gstart[e] = sc.x;
            gcount[e] = all;
        }
        if (e % CL == rank) {
            using I = std::conditional_t<SLICED, int64_t, int>;
            const I lo_b = sc.x / B, hi_b = (sc.x + pad) / B;
            const I from = SLICED ? max(lo_b, I(b0)) : lo_b, to = SLICED ? min(hi_b, I(b1)) : hi_b;
            for (I b = from; b < to; b++) expert_ids[b] = e;
        }
    }
    const int gthread = rank * blockDim.x + threadIdx.x, nthreads = CL * blockDim.x;
    for (int64_t b = (SLICED ? max(int64_t(total / B), b0) : total / B) + gthread; b < b1;
         b += nthreads)
        expert_ids[b] = -1;
    if (gthread == 0 && (!SLICED || blockIdx.x == 0)) *reinterpret_cast<int *>(p.num_post) = total;
    if constexpr (CL > 1) fill(sorted + total, p.sorted_capacity - total, n, gthread, nthreads);
    __syncthreads();
    if constexpr (CL > 1) // padding of the experts this block owns, a warp per expert
        for (int x = rank + CL * warp; x < E; x += CL * SW)
            for (int i = gstart[x] + gcount[x] + lane; i < gstart[x] + ((gcount[x] + B - 1) & -B);
                 i += 32)
                sorted[i] = n;
#pragma unroll
    for (int u = 0; u < SU; u++)
        if (lo + u * 32 < hi && (key[u] & 1023) < E) {
            const int k = key[u] & 1023, flat = lo + u * 32 + lane;
            const int pos = first[k] + row[k] + (key[u] >> 10);
            if (!staged) {
                if (mine(pos)) sorted[pos] = flat;
            } else if constexpr (PACK) {
                stage[pos] = unsigned(pos + delta[k]) << SFLAT | (flat - blo);
            } else {
                stage[pos] = pos + delta[k];
                sflat[pos] = (unsigned short)(flat - blo);
            }
        }
    if (staged) {
        __syncthreads();
        for (int i = threadIdx.x; i < placed; i += blockDim.x) {
            if constexpr (PACK) {
                const unsigned at = unsigned(stage[i]) >> SFLAT;
                if (mine(at)) sorted[at] = blo + (stage[i] & ((1 << SFLAT) - 1));
            } else if (mine(stage[i])) {
                sorted[stage[i]] = blo + sflat[i];
            }
        }
    }
    if constexpr (CL > 1) cluster_wait();
}

// The register kernels' body: targs (cluster size, ids of the cluster at most, sliced 0/1).
template <int CL, int IDS, int SLICED> __device__ void moe_align_regs(const talon__moe_align_params &p) {
    align_regs<CL, IDS / (SW * 32 * CL), SLICED != 0>(p);
}

template <typename T, int VEC, int R>
__device__ __forceinline__ void moe_sum_r(const talon__moe_sum_params &p) {
    constexpr int J = 8 / R; // experts of a slice in flight (k <= J when R > 1)
    const unsigned chunks = unsigned(p.chunks);
    const int64_t t = blockIdx.x / chunks, step = (int64_t)blockDim.x * VEC;
    const int64_t h = ((int64_t)(blockIdx.x % chunks) * R * blockDim.x + threadIdx.x) * VEC;
    if (h >= p.hidden) return;
    const T *x = reinterpret_cast<const T *>(p.in) + t * p.k * p.hidden + h;
    const float *w = reinterpret_cast<const float *>(p.weights) + t * p.k;
    float acc[R][VEC] = {};
    for (int j0 = 0; j0 < p.k; j0 += J) {
        vec_t<T, VEC> v[R][J];
        float wj[J];
#pragma unroll
        for (int u = 0; u < J; u++) {
            if (j0 + u >= p.k) break;
            wj[u] = p.weights ? __ldg(w + j0 + u) : 1.f;
#pragma unroll
            for (int r = 0; r < R; r++)
                if (h + r * step < p.hidden)
                    v[r][u] = load_vec<T, VEC>(x + (j0 + u) * p.hidden + r * step);
        }
#pragma unroll
        for (int u = 0; u < J; u++) {
            if (j0 + u >= p.k) break;
#pragma unroll
            for (int r = 0; r < R; r++)
                if (h + r * step < p.hidden) {
                    float f[VEC];
                    to_f32(v[r][u], f);
#pragma unroll
                    for (int i = 0; i < VEC; i++) acc[r][i] = fmaf(wj[u], f[i], acc[r][i]);
                }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
        if (h + r * step < p.hidden)
            store_f32<T, VEC>(reinterpret_cast<T *>(p.out) + t * p.hidden + h + r * step, acc[r]);
}
template <int DT, int VEC, int R> __device__ void moe_sum(const talon__moe_sum_params &p) { moe_sum_r<elem<DT>, VEC, R>(p); }

} // namespace talon::moe

TALON__KERNELS_moe(TALON_DEV_KERNEL)
