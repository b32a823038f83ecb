// topk.cu - per-row top-k values and int32 indices (fp32, bf16, f16), k <= 1024.
//
// Strategy: radix select on an order-preserving 32-bit key (sign bit flipped, negatives
// inverted; bf16/f16 go through their exact fp32 value; every NaN maps to the top key and
// -0.0 to +0.0, so NaN ranks above +inf and the zeros tie). A row is split over `chunks`
// blocks (grid chunks x rows); the host picks one of two fixed two-kernel sequences from the
// shape alone (impl/topk_plan.h, TALON__TOPK_SMALL). Both end in select, which keeps the keys in a
// range [lo, lo + span] as candidates:
// chunk path (rows x ceil(cols / 4096) <= TALON__TOPK_SMALL):
//   chunk_hist: each block stores its chunk's histogram of the top 11 key bits (16-bit counts:
//           chunks are at most 16384 keys) in the chunk's own slot of the workspace with plain
//           stores, so nothing needs zeroing; block 0 of a row zeroes select's counters;
//   chunk_select: select, each block first summing the chunks' histograms itself, 512 bins at
//           a time from the top, to find the digit d of the k-th key: the candidates are the
//           keys with digit d, those above (fewer than k) go straight to the output. Every
//           block re-reads all its row's chunk histograms, a cost that grows with
//           rows x chunks^2: hence only for small problems, whose second read of the row
//           mostly hits L2;
// sampled path (larger problems):
//   sample: one block per row ranks TALON__TOPK_SAMPLE keys of the row (64 evenly spaced runs)
//           and takes as threshold t a key that about 2k and at least k keys of the row should
//           reach (topk_sample says how it is set), then zeroes select's counters;
//   select: the candidates are every key >= t: the row is read once.
// select: each block stages its hits in shared memory, reserves space for them with one
// global atomic per block and counter, and appends them (element bits and index) to the
// workspace. The row's last block to finish (arrival counter) resolves the candidates:
//   - few entries (above + candidates <= half the block): every entry's rank among them, by
//     (key desc, index asc), is its output position; ties need nothing more;
//   - else entries (the keys above and the candidates) spread over bins of the top 11 bits of
//     their key range, at most BIN_MAX in any bin from the k-th entry's up: each entry of those
//     bins is placed by the counts of the bins above it and its rank within its own bin, by
//     (key desc, index asc); ties need nothing more, and the output comes out sorted either way;
//   - else (ties, narrow or outlying values) radix select over the candidates' key offsets
//     from lo finds the k-th key T and how many keys equal to T are needed; when that is fewer
//     than there are, a second radix select over (2^18 - 1 - index) takes the lowest indices
//     (the tie rule); the k winners are then bitonic-sorted by (key desc, index asc) if asked.
// Values are written from the element bits carried along, so NaN payloads and -0.0 survive.
// Candidates usually fit the workspace (cap = min(cols, TALON__TOPK_CAP)); when more keys are
// candidates (many ties, narrow distributions), the last block re-reads the row for each
// remaining pass instead; when fewer than k keys reach a sampled threshold (a sample unlike
// its row: sorted rows), every key of the row is a candidate, read from the row the same way.
// Slower, same result.
//
// Why this shape: reading a large row once (sampled path) beat the earlier three kernels that
// read it twice; the chunk path's histogram re-reads grow with rows x chunks^2, so it serves
// small problems only; select prefetching the head of its chunk under the sample kernel, and
// 16-byte loads with L2 hints, each measured faster. The measurements, and the variants tried
// and not taken (one-read register lists, 8-block clusters, group skipping, longer chunks), are
// in docs/notes/topk.md.
#include <cstddef>
#include <type_traits>
#include "dev/async.cuh"
#include "dev/kernel.cuh"
#include "dev/keys.cuh"
#include "dev/tma.cuh"
#include "talon/kernels/topk.def"

namespace talon::topk {
using namespace talon::dev;

constexpr int BINS = 1 << TALON__TOPK_DIGIT; // 2048 bins of the 11-bit digit
constexpr int LOW = 32 - TALON__TOPK_DIGIT;  // key bits below the top digit
constexpr uint32_t LOW_MASK = (1u << LOW) - 1;
constexpr int IDX_BITS = 18;                 // cols <= 2^18
constexpr uint32_t IDX_TOP = (1u << IDX_BITS) - 1;
constexpr int UNROLL = 8;

// Candidates carry an element's raw bits (raw_of), so the values written at the end need no
// second read of the input.
template <typename T> __device__ __forceinline__ uint32_t key_of(T v) { return order_key(to_f32(v)); }
template <typename T> __device__ __forceinline__ uint32_t key_of_raw(uint32_t u) {
    return key_of(from_raw<T>(u));
}

struct Row {
    // hist: on the chunk path one histogram per chunk (BINS / 2 words each, bin 2w in the
    // low half of word w, 2w + 1 in the high half); the sampled path has none;
    // ctr: [0] keys above the candidates written, [1] candidates, [2] select blocks done,
    // [4] the sampled threshold key
    int *hist, *ctr;
    uint32_t *cand_raw, *cand_idx;
};

template <bool SLOTS> __device__ __forceinline__ Row row_ws(const talon__topk_params &p, int row) {
    int *base = reinterpret_cast<int *>(p.workspace) + (int64_t)row * p.row_ints;
    int *ctr = base + (SLOTS ? p.chunks * (BINS / 2) : 0);
    return {base, ctr, reinterpret_cast<uint32_t *>(ctr + TALON__TOPK_CTRS),
            reinterpret_cast<uint32_t *>(ctr + TALON__TOPK_CTRS + p.cap)};
}

// L2 policies of the 16-byte loads: hist marks the row evict_last, so that select, which reads
// it again right after, finds more of it in L2; select marks it evict_first (its last read).
enum { L2_KEEP = 1, L2_DROP = 2 };
template <int POL> __device__ __forceinline__ uint64_t l2_policy() {
    if constexpr (POL == L2_KEEP) return l2_policy_evict_last();
    if constexpr (POL == L2_DROP) return l2_policy_evict_first();
    return 0;
}

// Element l of a 16-byte group as a float, straight from its word (bf16: its bits moved up or
// masked, one instruction, where to_f32 of the extracted element took two).
template <typename T> __device__ __forceinline__ float group_f32(const uint4 &x, int l) {
    const uint32_t w[4] = {x.x, x.y, x.z, x.w};
    if constexpr (sizeof(T) == 4) return __uint_as_float(w[l]);
    const uint32_t u = w[l / 2];
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return __uint_as_float(l % 2 ? u & 0xffff0000u : u << 16);
    return __half2float(__ushort_as_half((unsigned short)(l % 2 ? u >> 16 : u)));
}

// Calls f(i, v, x) for every element v of [begin, end) this thread owns, x = to_f32(v), loads in
// flight first: with POL, where the range starts 16-byte aligned, two 16-byte loads under that
// L2 policy (fewer load instructions than 4-byte ones), the rest UNROLL element loads. More
// loads in flight cost registers and a block per SM, and measured slower (docs/notes/topk.md).
// The 16-byte loop's full rounds walk a pointer and test no bounds (with an index per load,
// ptxas rebuilt each load's address from the row's base every round).
template <typename T, int BLOCK, int POL = 0, typename F>
__device__ __forceinline__ void for_keys(const T *in, int begin, int end, F f) {
    constexpr int V = 16 / sizeof(T), UV = POL ? 2 : 0;
    const uint64_t pol = l2_policy<POL>();
    if (UV && (reinterpret_cast<uintptr_t>(in + begin) & 15) == 0) {
        const int nvec = (end - begin) / V;
        const uint4 *vin = reinterpret_cast<const uint4 *>(in + begin) + threadIdx.x;
        auto each = [&](const uint4 &x, int q) {
            T e[V];
            memcpy(e, &x, 16);
#pragma unroll
            for (int l = 0; l < V; l++) f(begin + q * V + l, e[l], group_f32<T>(x, l));
        };
        int b = 0;
        for (; b + BLOCK * UV <= nvec; b += BLOCK * UV, vin += BLOCK * UV) {
            uint4 x[UV > 0 ? UV : 1];
#pragma unroll
            for (int j = 0; j < UV; j++) x[j] = load_16_l2_hint(vin + j * BLOCK, pol);
#pragma unroll
            for (int j = 0; j < UV; j++) each(x[j], b + j * BLOCK + threadIdx.x);
        }
#pragma unroll
        for (int j = 0; j < UV; j++) {
            const int q = b + j * BLOCK + threadIdx.x;
            if (q < nvec) each(load_16_l2_hint(vin + j * BLOCK, pol), q);
        }
        begin += nvec * V;
    }
    for (int base = begin; base < end; base += BLOCK * UNROLL) {
        T v[UNROLL];
#pragma unroll
        for (int j = 0; j < UNROLL; j++) {
            const int i = base + j * BLOCK + threadIdx.x;
            if (i < end) v[j] = in[i];
        }
#pragma unroll
        for (int j = 0; j < UNROLL; j++) {
            const int i = base + j * BLOCK + threadIdx.x;
            if (i < end) f(i, v[j], to_f32(v[j]));
        }
    }
}

// Sum of s over the block's higher threads (bins above this thread's); warp_sums then holds
// each warp's sum.
template <int BLOCK> __device__ __forceinline__ int sum_above(int s, int *warp_sums) {
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    int incl = s; // sum over lanes >= lane
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_down_sync(~0u, incl, o);
        if (lane + o < 32) incl += v;
    }
    if (lane == 0) warp_sums[warp] = incl;
    __syncthreads();
    int above = incl - s;
    for (int w = warp + 1; w < BLOCK / 32; w++) above += warp_sums[w];
    return above;
}

// Digit holding the need-th largest item of a shared histogram: res[0] = digit, res[1] = items
// in higher digits. Every thread owns BINS / BLOCK consecutive bins.
template <int BLOCK>
__device__ __forceinline__ void find_digit(const int *hist, int need, int *res, int *warp_sums) {
    constexpr int PER = BINS / BLOCK;
    const int t = threadIdx.x;
    int s = 0;
#pragma unroll
    for (int j = 0; j < PER; j++) s += hist[t * PER + j];
    int above = sum_above<BLOCK>(s, warp_sums);
    if (above < need && above + s >= need) {
        for (int b = t * PER + PER - 1;; b--) {
            if (above + hist[b] >= need) {
                res[0] = b;
                res[1] = above;
                break;
            }
            above += hist[b];
        }
    }
    __syncthreads();
}

// Radix select over `bits`-bit values produced by each(f) (f(v) once per item of this
// thread): returns the need-th largest value V; on return need is how many items equal to V
// are among the top and eq how many items equal V.
template <int BLOCK, typename Each>
__device__ __forceinline__ uint32_t radix_select(Each each, int bits, int &need, int &eq, int *hist, int *res,
                                 int *warp_sums) {
    uint32_t prefix = 0;
    for (int hi = bits; hi > 0;) {
        const int lo = hi > TALON__TOPK_DIGIT ? hi - TALON__TOPK_DIGIT : 0;
        const uint32_t mask = (uint32_t)((1ull << (hi - lo)) - 1);
        for (int b = threadIdx.x; b < BINS; b += BLOCK) hist[b] = 0;
        __syncthreads();
        each([&](uint32_t v) {
            if ((uint64_t)v >> hi == prefix) atomicAdd(&hist[(v >> lo) & mask], 1);
        });
        __syncthreads();
        find_digit<BLOCK>(hist, need, res, warp_sums);
        need -= res[1];
        eq = hist[res[0]];
        prefix = (uint32_t)((uint64_t)prefix << (hi - lo)) | (uint32_t)res[0];
        hi = lo;
        __syncthreads(); // res and hist are rewritten by the next pass
    }
    return prefix;
}

// Threadfence-reduction pattern: true in every thread of the block that arrives last of n.
__device__ __forceinline__ bool last_to_arrive(int *counter, int n, int *flag) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence(); // cumulative: orders the block's writes, seen through the barrier
        *flag = atomicAdd(counter, 1) == n - 1;
    }
    __syncthreads();
    if (!*flag) return false;
    __threadfence();
    return true;
}

template <typename T> __device__ __forceinline__ const T *row_in(const talon__topk_params &p, int row) {
    return reinterpret_cast<const T *>(p.in) + (int64_t)row * p.in_stride;
}

// The sampled path's threshold: the rank-r key (top 22 bits, the rest zero) of TALON__TOPK_SAMPLE
// keys of the row, in 64 runs of 128 spaced floor((cols - 128) / 63) apart (the last ends within
// 63 elements of the row's end; or the whole row when it is no longer), with r set so that
// about 2k and at least k keys of the row lie at or above it unless the
// sample is unrepresentative: m = k x sample / cols keys of the sample are expected above the
// k-th key of the row, r = m + 5 sqrt(m) + 8 (at least 4.4 standard deviations above it
// for k = 1024 at 262144 columns, and about 2200 expected keys of 4096 places).
template <int DT, int BLOCK> __device__ void topk_sample(const talon__topk_params &p) {
    using T = elem<DT>;
    constexpr int PER = TALON__TOPK_SAMPLE / BLOCK, RUN = 128, RUNS = TALON__TOPK_SAMPLE / RUN;
    constexpr int SHIFT = 10; // key bits below the threshold's
    __shared__ int hist[BINS], res[2], warp_sums[32];
    pdl_launch_dependents(); // select (topk_select)
    const int row = blockIdx.x, n = min(p.cols, TALON__TOPK_SAMPLE);
    const T *in = row_in<T>(p, row);
    // Element of sample s = j * BLOCK + threadIdx.x: run s / RUN starts `spacing` elements
    // after the previous one (a whole row when it is no longer than the sample).
    static_assert(BLOCK % RUN == 0, "a thread's samples are BLOCK / RUN runs apart");
    const int spacing = p.cols > TALON__TOPK_SAMPLE ? (p.cols - RUN) / (RUNS - 1) : RUN;
    const int first = (int)threadIdx.x / RUN * spacing + (int)threadIdx.x % RUN;
    T v[PER];
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (j * BLOCK + (int)threadIdx.x < n) v[j] = in[first + j * (BLOCK / RUN) * spacing];
    uint32_t key[PER];
#pragma unroll
    for (int j = 0; j < PER; j++) key[j] = key_of(v[j]) >> SHIFT;
    const float m = (float)p.k * (float)n / (float)p.cols;
    int need = min(n, (int)ceilf(m + 5.0f * sqrtf(m) + 8.0f)), eq;
    const uint32_t t = radix_select<BLOCK>(
        [&](auto f) {
#pragma unroll
            for (int j = 0; j < PER; j++)
                if (j * BLOCK + (int)threadIdx.x < n) f(key[j]);
        },
        32 - SHIFT, need, eq, hist, res, warp_sums);
    const Row r = row_ws<false>(p, row);
    if (threadIdx.x < TALON__TOPK_CTRS) r.ctr[threadIdx.x] = threadIdx.x == 4 ? (int)(t << SHIFT) : 0;
}

template <int DT, int BLOCK> __device__ void topk_chunk_hist(const talon__topk_params &p) {
    using T = elem<DT>;
    __shared__ int hist[BINS];
    const int row = blockIdx.y, begin = blockIdx.x * p.chunk_len;
    const int end = min(p.cols, begin + p.chunk_len);
    const Row r = row_ws<true>(p, row);
    if (blockIdx.x == 0 && threadIdx.x < TALON__TOPK_CTRS) r.ctr[threadIdx.x] = 0;
    for (int b = threadIdx.x; b < BINS; b += BLOCK) hist[b] = 0;
    __syncthreads();
    for_keys<T, BLOCK, L2_KEEP>(row_in<T>(p, row), begin, end, [&](int, T, float x) {
        atomicAdd(&hist[order_key(x) >> LOW], 1);
    });
    __syncthreads();
    uint32_t *mine = reinterpret_cast<uint32_t *>(r.hist) + blockIdx.x * (BINS / 2);
    for (int w = threadIdx.x; w < BINS / 2; w += BLOCK)
        mine[w] = (uint32_t)hist[2 * w] | (uint32_t)hist[2 * w + 1] << 16;
}

// chunk_select's digit: the row's k-th key's top digit (res[0]) and how many keys lie in
// higher digits (res[1]), from the chunks' histograms one tile of BLOCK bins at a time from
// the top. Each thread sums four bins (8 bytes) over a quarter of the chunks, so the loads of
// all chunks are in flight at once.
template <int BLOCK>
__device__ __forceinline__ void row_digit(const talon__topk_params &p, const int *hist, int *sh, int *res,
                                          int *warp_sums) {
    constexpr int TILE = BLOCK, QUADS = TILE / 4, GROUPS = BLOCK / QUADS;
    constexpr int LOADS = 8; // 32 chunks per tile in one L2 round trip (B=1 V=128256)
    static_assert(BINS % TILE == 0 && GROUPS * TILE <= BINS, "tile");
    const int t = threadIdx.x, q = t % QUADS, g = t / QUADS;
    const uint2 *words = reinterpret_cast<const uint2 *>(hist);
    int need = p.k, above = 0;
    for (int top = BINS - TILE;; top -= TILE) {
        int n[4] = {0, 0, 0, 0}; // bins top + 4q + j
        for (int c0 = g; c0 < p.chunks; c0 += LOADS * GROUPS) {
            uint2 x[LOADS];
#pragma unroll
            for (int j = 0; j < LOADS; j++) {
                const int c = c0 + j * GROUPS;
                x[j] = c < p.chunks ? __ldcg(&words[(c * BINS + top) / 4 + q]) : make_uint2(0, 0);
            }
#pragma unroll
            for (int j = 0; j < LOADS; j++) {
                n[0] += x[j].x & 0xFFFF;
                n[1] += x[j].x >> 16;
                n[2] += x[j].y & 0xFFFF;
                n[3] += x[j].y >> 16;
            }
        }
#pragma unroll
        for (int j = 0; j < 4; j++) sh[g * TILE + 4 * q + j] = n[j];
        if (t == 0) res[0] = -1;
        __syncthreads();
        int s = 0; // bin top + t
#pragma unroll
        for (int j = 0; j < GROUPS; j++) s += sh[j * TILE + t];
        const int higher = sum_above<BLOCK>(s, warp_sums);
        int total = 0;
        for (int j = 0; j < BLOCK / 32; j++) total += warp_sums[j];
        if (higher < need && higher + s >= need) {
            res[0] = top + t;
            res[1] = above + higher;
        }
        __syncthreads();
        if (res[0] >= 0) return;
        need -= total;
        above += total;
        __syncthreads(); // sh, res and warp_sums are rewritten by the next tile
    }
}

// Shared memory of the select kernel (dynamic; TALON__TOPK_SMEM bytes).
struct SelectSmem {
    int hist[BINS];
    uint32_t cand_raw[TALON__TOPK_CAP], cand_idx[TALON__TOPK_CAP];
    unsigned long long sorted[TALON__TOPK_KMAX]; // key << 32 | (IDX_TOP - index) << 10 | slot
    uint32_t raw[TALON__TOPK_KMAX];              // element bits by slot
    int res[2], warp_sums[32], count, last, n_above, n_cand, base_above, base_cand;
};

static_assert(sizeof(SelectSmem) <= TALON__TOPK_SMEM, "TALON__TOPK_SMEM in include/talon/kernels/topk.def is too small");

// The resolving block's common case: the m entries in sm.cand_raw / cand_idx (m >= k, every
// key >= lo) are binned by the top 11 bits of their offsets from lo; the k-th entry's bin d
// comes from the counts. Entries in bins d and up are laid out in `placed` bin by bin, from the
// top (a bin starts after the counts of the bins above it), and each one's output place is its
// bin's start plus its rank among its own bin's entries by (key desc, index asc). A bin from d
// up holding more than BIN_MAX entries (ties, a narrow range, an outlier stretching the range)
// makes that ranking costly: then false, nothing written, and the caller's radix select and
// sort take over. Expects sm.count = 0, set before the barrier ahead of this call. Not inlined:
// inlined, ptxas spilled 44 bytes in chunk_select_bf16.
template <typename T, int BLOCK>
__device__ __noinline__ bool place_by_bins(SelectSmem &sm, int m, int k, uint32_t lo, T *out_val,
                                           int *out_idx) {
    constexpr int PER = BINS / BLOCK, WARPS = BLOCK / 32, BIN_MAX = 128;
    static_assert(TALON__TOPK_CAP <= 1 << 12 && IDX_BITS <= 20, "a rank key's fields");
    static_assert(offsetof(SelectSmem, raw) == offsetof(SelectSmem, sorted) + sizeof(sm.sorted) &&
                      (TALON__TOPK_KMAX - 1 + BIN_MAX) * 8 <= sizeof(sm.sorted) + sizeof(sm.raw),
                  "placed spans sorted and raw");
    const int t = threadIdx.x;
    uint32_t hi = 0;
    for (int e = t; e < m; e += BLOCK) hi = max(hi, key_of_raw<T>(sm.cand_raw[e]));
    hi = __reduce_max_sync(~0u, hi);
    if (t % 32 == 0) sm.warp_sums[t / 32] = (int)hi;
    for (int b = t; b < BINS; b += BLOCK) sm.hist[b] = 0;
    __syncthreads();
    for (int w = 0; w < WARPS; w++) hi = max(hi, (uint32_t)sm.warp_sums[w]);
    const int shift = max(0, 32 - __clz(hi - lo) - TALON__TOPK_DIGIT);
    auto bin_of = [&](uint32_t key) { return (int)((key - lo) >> shift); };
    for (int e = t; e < m; e += BLOCK) atomicAdd(&sm.hist[bin_of(key_of_raw<T>(sm.cand_raw[e]))], 1);
    __syncthreads();
    find_digit<BLOCK>(sm.hist, k, sm.res, sm.warp_sums);
    const int d = sm.res[0];
    int sum = 0, widest = 0;
#pragma unroll
    for (int j = 0; j < PER; j++) {
        const int count = sm.hist[t * PER + j];
        sum += count;
        if (t * PER + j >= d) widest = max(widest, count);
    }
    widest = __reduce_max_sync(~0u, widest);
    if (t % 32 == 0) atomicMax(&sm.count, widest);
    int start = sum_above<BLOCK>(sum, sm.warp_sums); // its barrier also publishes sm.count
    if (sm.count > BIN_MAX) {
        __syncthreads(); // hist, res and warp_sums are the caller's again
        return false;
    }
#pragma unroll
    for (int j = PER - 1; j >= 0; j--) {
        const int count = sm.hist[t * PER + j];
        sm.hist[t * PER + j] = start; // the bin's cursor, from its start
        start += count;
    }
    __syncthreads();
    // The entries of bins d and up, bin by bin, as rank keys: key << 32 | (IDX_TOP - index) << 12
    // | e (the entry; indices are unique, so e never decides a compare), so that ranking within
    // a bin is an 8-byte load and a compare per entry (with ties, bf16 bins hold tens).
    unsigned long long *placed = sm.sorted; // runs on into sm.raw: both unused on this path
    for (int e = t; e < m; e += BLOCK) {
        const uint32_t key = key_of_raw<T>(sm.cand_raw[e]);
        const int b = bin_of(key);
        if (b >= d)
            placed[atomicAdd(&sm.hist[b], 1)] =
                (unsigned long long)key << 32 | (IDX_TOP - sm.cand_idx[e]) << 12 | (uint32_t)e;
    }
    __syncthreads();
    // Now hist[b] is where bin b ends, which is where bin b - 1 starts.
    for (int q = t; q < sm.hist[d]; q += BLOCK) {
        const unsigned long long mine = placed[q];
        const int b = bin_of((uint32_t)(mine >> 32)), end = sm.hist[b];
        int place = b == BINS - 1 ? 0 : sm.hist[b + 1];
        for (int j = place; j < end; j++) place += placed[j] > mine;
        if (place < k) {
            const uint32_t e = (uint32_t)mine & 0xFFF;
            out_val[place] = from_raw<T>(sm.cand_raw[e]);
            out_idx[place] = (int)sm.cand_idx[e];
        }
    }
    return true;
}

// A select block's row and chunk [begin, end). Blocks run in the reverse order of chunk_hist's:
// the chunks it read last are the likeliest to be still in L2 (the sampled path reads its rows
// once; order does not matter).
struct Chunk {
    int row, begin, end;
};
__device__ __forceinline__ Chunk select_chunk(const talon__topk_params &p) {
    const int begin = (gridDim.x - 1 - blockIdx.x) * p.chunk_len;
    return {(int)(gridDim.y - 1 - blockIdx.y), begin, min(p.cols, begin + p.chunk_len)};
}

template <typename T, int BLOCK, bool SLOTS> __device__ void select_rows(const talon__topk_params &p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    SelectSmem &sm = *reinterpret_cast<SelectSmem *>(smem_raw);
    const auto [row, begin, end] = select_chunk(p);
    const Row r = row_ws<SLOTS>(p, row);
    const T *in = row_in<T>(p, row);
    int *out_idx = reinterpret_cast<int *>(p.out_indices) + (int64_t)row * p.k;
    T *out_val = reinterpret_cast<T *>(p.out_values) + (int64_t)row * p.k;

    // Candidates are the keys in [lo, lo + span]: the k-th key's top digit on the chunk path,
    // whose higher digits (fewer than k keys, `above`) go straight to the output; every
    // key from the sampled threshold up on the other.
    uint32_t lo, span;
    int above = 0;
    if (SLOTS) {
        row_digit<BLOCK>(p, r.hist, sm.hist, sm.res, sm.warp_sums);
        lo = (uint32_t)sm.res[0] << LOW;
        span = LOW_MASK;
        above = sm.res[1];
    } else {
        lo = (uint32_t)__ldcg(&r.ctr[4]);
        span = ~0u - lo;
    }

    // Hits are staged in shared memory (the candidate arrays, unused until the last block's
    // final stage) and copied out with one global atomic per block and counter: a global
    // atomic per warp and hit made every warp wait on L2 round trips at large k. Keys above
    // the candidates are fewer than k <= STAGE_ABOVE; candidates past STAGE_CAND go straight
    // out. Hits are rare (about 2k of a row), so each takes its own shared atomic: a vote and
    // warp-aggregated slots for every element made this loop issue-bound (docs/notes/topk.md).
    constexpr int STAGE_ABOVE = TALON__TOPK_KMAX, STAGE_CAND = TALON__TOPK_CAP - STAGE_ABOVE;
    if (threadIdx.x == 0) sm.n_above = sm.n_cand = 0;
    __syncthreads();
    const float below = order_key_value(lo);
    for_keys<T, BLOCK, L2_DROP>(in, begin, end, [&](int i, T v, float x) {
        if (x < below) return; // the common case: one compare
        const uint32_t key = order_key(x);
        if (key < lo) return;
        if (SLOTS && key - lo > span) { // keys above the candidates: the chunk path only
            const int o = atomicAdd(&sm.n_above, 1);
            sm.cand_raw[o] = raw_of(v);
            sm.cand_idx[o] = (uint32_t)i;
            return;
        }
        const int c = atomicAdd(&sm.n_cand, 1);
        if (c < STAGE_CAND) {
            sm.cand_raw[STAGE_ABOVE + c] = raw_of(v);
            sm.cand_idx[STAGE_ABOVE + c] = (uint32_t)i;
        } else {
            const int g = atomicAdd(&r.ctr[1], 1);
            if (g < p.cap) {
                r.cand_raw[g] = raw_of(v);
                r.cand_idx[g] = (uint32_t)i;
            }
        }
    });
    __syncthreads();
    const int n_above = sm.n_above, n_cand = min(sm.n_cand, STAGE_CAND);
    if (threadIdx.x == 0) {
        sm.base_above = n_above ? atomicAdd(&r.ctr[0], n_above) : 0;
        sm.base_cand = n_cand ? atomicAdd(&r.ctr[1], n_cand) : 0;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < n_above; j += BLOCK) {
        out_val[sm.base_above + j] = from_raw<T>(sm.cand_raw[j]);
        out_idx[sm.base_above + j] = (int)sm.cand_idx[j];
    }
    for (int j = threadIdx.x; j < n_cand && sm.base_cand + j < p.cap; j += BLOCK) {
        r.cand_raw[sm.base_cand + j] = sm.cand_raw[STAGE_ABOVE + j];
        r.cand_idx[sm.base_cand + j] = sm.cand_idx[STAGE_ABOVE + j];
    }

    // The last block of the row to finish resolves the candidates.
    if (!last_to_arrive(&r.ctr[2], p.chunks, &sm.last)) return;
    int ncand = __ldcg(&r.ctr[1]);
    // Fewer than k keys reached the sampled threshold (a sample unlike its row): every key of
    // the row is a candidate, read from the row. (ncand = cols is never read after this, but
    // without it ptxas spills 4 bytes in chunk_select_f16.)
    const bool short_sample = ncand < p.k - above;
    if (short_sample) {
        lo = 0;
        span = ~0u;
        ncand = p.cols;
    }
    const bool in_smem = !short_sample && ncand <= p.cap;
    auto put = [&](int o, uint32_t key, uint32_t i, uint32_t u) {
        sm.sorted[o] = (unsigned long long)key << 32 | (unsigned long long)(IDX_TOP - i) << 10 | o;
        sm.raw[o] = u;
    };
    if (in_smem && above + ncand <= BLOCK / 2) {
        // Few entries (small k, spread values): each one's rank among all of them is its place
        // in the sorted output, ties included: one barrier, where binning takes seven.
        const int m = above + ncand, e = threadIdx.x;
        if (e < above) {
            const T v = __ldcg(&out_val[e]);
            put(e, key_of(v), (uint32_t)__ldcg(&out_idx[e]), raw_of(v));
        } else if (e < m) {
            const uint32_t u = __ldcg(&r.cand_raw[e - above]);
            put(e, key_of_raw<T>(u), __ldcg(&r.cand_idx[e - above]), u);
        }
        __syncthreads();
        if (e >= m) return;
        const unsigned long long mine = sm.sorted[e];
        int rank = 0;
        for (int j = 0; j < m; j++) rank += sm.sorted[j] > mine;
        if (rank < p.k) {
            out_val[rank] = from_raw<T>(sm.raw[e]);
            out_idx[rank] = (int)(IDX_TOP - (uint32_t)(mine >> 10 & IDX_TOP));
        }
        return;
    }
    // Entries in shared memory: the candidates, then (where they fit) the keys above them.
    const bool binned = in_smem && above + ncand <= TALON__TOPK_CAP;
    if (in_smem)
        for (int c = threadIdx.x; c < ncand; c += BLOCK) {
            sm.cand_raw[c] = __ldcg(&r.cand_raw[c]);
            sm.cand_idx[c] = __ldcg(&r.cand_idx[c]);
        }
    if (binned)
        for (int o = threadIdx.x; o < above; o += BLOCK) {
            sm.cand_raw[ncand + o] = raw_of(__ldcg(&out_val[o]));
            sm.cand_idx[ncand + o] = (uint32_t)__ldcg(&out_idx[o]);
        }
    if (threadIdx.x == 0) sm.count = 0;
    __syncthreads();
    if (binned && place_by_bins<T, BLOCK>(sm, above + ncand, p.k, lo, out_val, out_idx)) return;
    // Every candidate (low key bits, index, element bits) this thread owns.
    auto each_cand = [&](auto f) {
        if (in_smem) {
            for (int c = threadIdx.x; c < ncand; c += BLOCK) {
                const uint32_t u = sm.cand_raw[c];
                f(key_of_raw<T>(u) - lo, sm.cand_idx[c], u);
            }
        } else {
            for_keys<T, BLOCK>(in, 0, p.cols, [&](int i, T v, float x) {
                const uint32_t key = order_key(x);
                if (key >= lo && key - lo <= span) f(key - lo, (uint32_t)i, raw_of(v));
            });
        }
    };
    int need = p.k - above, eq = 0;
    const uint32_t kth = radix_select<BLOCK>(
        [&](auto f) { each_cand([&](uint32_t key, uint32_t, uint32_t) { f(key); }); }, 32 - __clz(span), need, eq,
        sm.hist, sm.res, sm.warp_sums);
    // Keys equal to the k-th are taken up to index last_idx: the `need` lowest indices.
    uint32_t last_idx = 0xFFFFFFFFu;
    if (need < eq) {
        int one = 0;
        last_idx = IDX_TOP - radix_select<BLOCK>(
                                 [&](auto f) {
                                     each_cand([&](uint32_t key, uint32_t i, uint32_t) {
                                         if (key == kth) f(IDX_TOP - i);
                                     });
                                 },
                                 IDX_BITS, need, one, sm.hist, sm.res, sm.warp_sums);
    }

    // Gather the k winners, sort if asked, write values and indices.
    if (threadIdx.x == 0) sm.count = above;
    for (int o = threadIdx.x; o < above; o += BLOCK) {
        const T v = __ldcg(&out_val[o]);
        put(o, key_of(v), (uint32_t)__ldcg(&out_idx[o]), raw_of(v));
    }
    __syncthreads();
    each_cand([&](uint32_t key, uint32_t i, uint32_t u) {
        if (key > kth || (key == kth && i <= last_idx)) put(atomicAdd(&sm.count, 1), key + lo, i, u);
    });
    __syncthreads();
    if (p.sorted) {
        int n = 1;
        while (n < p.k) n <<= 1;
        for (int o = p.k + threadIdx.x; o < n; o += BLOCK) sm.sorted[o] = 0; // below any winner
        __syncthreads();
        for (int size = 2; size <= n; size <<= 1)
            for (int stride = size / 2; stride > 0; stride >>= 1) {
                for (int t = threadIdx.x; t < n / 2; t += BLOCK) {
                    const int a = 2 * t - (t & (stride - 1)), b = a + stride;
                    const unsigned long long x = sm.sorted[a], y = sm.sorted[b];
                    if (((a & size) == 0) == (x < y)) { // descending runs where a & size == 0
                        sm.sorted[a] = y;
                        sm.sorted[b] = x;
                    }
                }
                __syncthreads();
            }
    }
    for (int o = threadIdx.x; o < p.k; o += BLOCK) {
        const unsigned long long c = sm.sorted[o];
        out_val[o] = from_raw<T>(sm.raw[c & (TALON__TOPK_KMAX - 1)]);
        out_idx[o] = (int)(IDX_TOP - (uint32_t)(c >> 10 & IDX_TOP));
    }
}

// The sampled path's select is launched as a programmatic dependent of sample (talon.h), which
// lets it launch as it starts: the sample blocks wait on latency and leave DRAM idle, so the
// select blocks that find room meanwhile pull the head of their chunk into L2, then wait for the
// threshold (griddepcontrol.wait: sample's grid complete and its writes visible).
template <int DT, int BLOCK> __device__ void topk_select(const talon__topk_params &p) {
    using T = elem<DT>;
    constexpr int PIECE = 4096; // bytes per prefetch instruction, one per thread
    const Chunk c = select_chunk(p);
    const uintptr_t a = reinterpret_cast<uintptr_t>(row_in<T>(p, c.row) + c.begin);
    const uintptr_t lo = (a + 15) & ~uintptr_t(15); // bulk prefetches take 16-byte bounds
    const uintptr_t hi = min(a + uintptr_t(c.end - c.begin) * sizeof(T), lo + TALON__TOPK_PREFETCH) & ~uintptr_t(15);
    const uintptr_t s = lo + uintptr_t(threadIdx.x) * PIECE;
    if (s < hi) bulk_prefetch_l2(reinterpret_cast<const void *>(s), unsigned(min(uintptr_t(PIECE), hi - s)));
    pdl_wait();
    select_rows<T, BLOCK, false>(p);
}
template <int DT, int BLOCK> __device__ void topk_chunk_select(const talon__topk_params &p) {
    using T = elem<DT>;
    select_rows<T, BLOCK, true>(p);
}

} // namespace talon::topk

TALON__KERNELS_topk(TALON_DEV_KERNEL)
