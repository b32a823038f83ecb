// decode.cu - decode attention over a paged KV cache (flash-decoding) and the merge of partial
// attention states; q/o bf16 or f16, cache of the same type or fp8 e4m3 with per-tensor scales.
//
// Strategy: one CTA of 128 threads per (request, kv head, chunk of up to 8 query heads of its group
// (4 at head_dim 256), split of the keys). The query heads of a chunk share every K/V load, which
// is what keeps GQA bandwidth-bound. Per-lane version (16-bit caches; below): threads form key
// groups of D/8 lanes; a lane owns 8 consecutive elements of a key row (one 16-byte load), so a key
// group reads a whole row and the dot product is finished by xor shuffles inside the group. Each
// key group walks its own keys, KPI at a time. K and V stream through a ring of STAGES steps in
// shared memory filled by cp.async, two steps in flight while one is computed: each lane copies
// exactly the 16-byte pieces it later reads, so the ring needs no barrier (a register-only version,
// with loads in flight only between the steps, was latency-bound: fp8 took as long as bf16). Each
// key group keeps its own online softmax (fp32, base 2, log2 e folded into the query scale), every
// lane of the group computing it for all (key, head) pairs of the step: the 64 independent
// butterfly shuffles beat a reduce-scatter leaving one score per lane, whose dependent shuffle
// chain measured slower (docs/notes/decode.md). No barrier is taken until the key groups are
// combined through shared memory at the end. The CTA's keys are its split's share of the request's
// attended range (the window), computed from the device kv_lens, so the grid depends only on host
// values. One split writes o and lse; several write fp32 partials (normalised o, natural-log lse)
// that merge_splits combines. The merge is launched as a programmatic dependent: every attention
// CTA lets it launch as it starts, and it waits for the whole grid in griddepcontrol.wait, so its
// launch hides under the attention kernel's end (measured faster: docs/notes/decode.md).
//
// With an fp8 cache, or 2 to 8 heads per CTA and head_dim <= 128, decode_mma (below) replaces
// the per-lane dot products by tensor-core tiles: fp8 on the per-lane path was bound by its
// conversions, and for 16-bit caches the shuffles, conversions and per-head FMAs were the
// bottleneck. The ring, copy, prefetch, CTA-shape and cluster variants tried against this design
// (none clearly faster), and what separates it from cuDNN, are in docs/notes/decode.md.
//
// Checked mode (kernels/dev/check.cuh): kv_lens outside [0, max_kv_len] is recorded (and clamped,
// as always); a page id at or past page_limit is recorded, page 0 is read in its place, and the
// CTA's output rows become NaN (lse NaN; a partial's lse +inf, which makes the merged rows NaN),
// so a request that read a bad page cannot pass for a good one. Off (check.record 0), the page
// test is one uniform predicate per page load.
//
// Both cache layouts run the same code: a key row's address comes from strides the host derives
// from the layout (page rows, slot and head strides). HND (a head's rows of a page contiguous, 4
// KB at page 16) reads at NHD's rate.
//
// Variants (include/talon/kernels/decode.def): q type x cache type (same or fp8) x head_dim
// (64, 128, 256) x heads per CTA (1, 2, 4, 8 (d64, d128): the group is cut into chunks of at
// most 8, at most 4 at d256).
// merge_splits reads n fp32 partials, merge_states two partials of the output type.
#include "dev/async.cuh"
#include "dev/check.cuh"
#include "dev/fp8.cuh"
#include "dev/kernel.cuh"
#include "dev/mma.cuh"
#include "talon/kernels/decode.def"

namespace talon::decode {
using namespace talon::dev;

constexpr int NT = 128; // threads per CTA: the block column of every row
constexpr int KPI = 4;  // keys per key group per step
constexpr int STAGES = 3; // steps in the shared-memory ring: two in flight while one is computed
// The tensor-core kernel's ring: one step in flight while one is computed (faster than 3 there;
// the per-lane kernel lost 2% at head_dim 256 with 2: docs/notes/decode.md).
constexpr int MMA_STAGES = 2;
constexpr float NEG_INF = -__builtin_huge_valf();
constexpr float LN2 = 0.69314718055994531f;


// 8 consecutive cache elements of one key row (16 bytes). Copied global -> shared by cp.async
// (L2 only: streamed once), read back by the same thread, so the ring needs no barrier, only
// cp.async.wait_group.
template <typename T> struct Row8 {
    using raw = uint4;
    raw r;
    __device__ __forceinline__ static void copy(raw *dst, const char *src) {
        cp_async_16((unsigned)__cvta_generic_to_shared(dst), src);
    }
    __device__ __forceinline__ void get(float (&x)[8]) const {
        const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = unpack2<T>(w[i]);
            x[2 * i] = f.x;
            x[2 * i + 1] = f.y;
        }
    }
};

// Fills the first S - 1 steps of a ring of S: page numbers one step ahead of the copies.
template <int S, typename P, typename I>
__device__ __forceinline__ void prime_ring(P &pages, I &issue, int start, int step) {
    pages(start);
#pragma unroll
    for (int st = 0; st < S - 1; st++) {
        issue(start + st * step, st);
        pages(start + (st + 1) * step);
    }
}

// Page id `at` of page-table row pt; checked mode replaces an id at or past page_limit by 0 (a
// page that exists). No flag is kept: one more live register made the d256 kernels spill; the
// CTA finds out afterwards (bad_pages).
__device__ __forceinline__ int page_id(const talon__decode_params &p, const int *pt, int at) {
    const int id = __ldg(pt + at);
    return checking(p.check) && unsigned(id) >= p.page_limit ? 0 : id;
}

// What a CTA works on: request b, kv head hk, its gn query heads from row row0 of q and o,
// and its split's share [start, end) of the attended keys [lo, kv). Clamping keeps a bad
// kv_lens inside the page-table row.
struct Cta {
    int b, hk, gn, start, end;
    int64_t row0;
    // first: the kernel's start (kv_lens read through the read-only path, checked); else the
    // checked epilogue's (a plain load: the compiler must not keep the first one live)
    __device__ __forceinline__ Cta(const talon__decode_params &p, bool first) {
        const int hc = blockIdx.x % p.head_chunks, bh = blockIdx.x / p.head_chunks;
        hk = bh % p.num_kv_heads;
        b = bh / p.num_kv_heads;
        const int g0 = hc * p.heads_per_cta;
        gn = min(p.heads_per_cta, p.group - g0);
        row0 = ((int64_t)b * p.num_kv_heads + hk) * p.group + g0;
        const int *lens = reinterpret_cast<const int *>(p.kv_lens) + b;
        const int raw = first ? __ldg(lens) : *reinterpret_cast<const volatile int *>(lens);
        if (first && checking(p.check) && (raw < 0 || raw > p.max_kv_len) && threadIdx.x == 0)
            check_fail(p.check, TALON__CHECK_DECODE_KV_LEN, b, raw, p.max_kv_len);
        const int kv = min(max(raw, 0), p.max_kv_len);
        const int lo = p.window > 0 ? max(kv - p.window, 0) : 0;
        const int chunk = (kv - lo + p.splits - 1) / p.splits;
        start = lo + (int)blockIdx.y * chunk;
        end = min(kv, start + chunk);
    }
};

// Checked mode, after the loop: whether the CTA's pages hold an invalid id, each found one
// recorded (the first to reach the record stays); then the barrier the combine needs anyway
// (unchecked: the barrier alone). The CTA's request and keys are derived again (kv_lens
// re-read): kept from the start, they made the d256 kernels spill.
__device__ __forceinline__ bool bad_pages(const talon__decode_params &p) {
    if (!checking(p.check)) {
        __syncthreads();
        return false;
    }
    const Cta cta(p, false);
    const int *pt = reinterpret_cast<const int *>(p.page_table) + (int64_t)cta.b * p.page_table_stride;
    bool bad = false;
    if (cta.start < cta.end)
        for (int at = (cta.start >> p.page_shift) + int(threadIdx.x); at <= (cta.end - 1) >> p.page_shift; at += NT) {
            const int id = pt[at];
            if (unsigned(id) >= p.page_limit) {
                check_fail(p.check, TALON__CHECK_DECODE_PAGE, (int64_t)cta.b * p.page_table_stride + at,
                           id, p.page_limit);
                bad = true;
                break;
            }
        }
    return __syncthreads_or(bad);
}

// The CTA's result: head h's elements [li * 8, li * 8 + 8) from the NK partial states
// (max m, sum l, unnormalised acc, base 2) that its key groups left in shared memory.
// bad (checked mode: the CTA read an invalid page id): NaN rows, and a partial lse of +inf,
// which turns the merged rows NaN too.
template <typename T, int D, int G, int NK>
__device__ __forceinline__ void finish(const talon__decode_params &p, const float (*s_acc)[G][D],
                                       const float (*s_m)[G], const float (*s_l)[G], int h, int li,
                                       int64_t row0, bool bad) {
    float M = NEG_INF, L = 0.f, o[8] = {};
#pragma unroll
    for (int k = 0; k < NK; k++) M = fmaxf(M, s_m[k][h]);
    const float ms = M == NEG_INF ? 0.f : M;
#pragma unroll
    for (int k = 0; k < NK; k++) {
        const float w = exp2f(s_m[k][h] - ms);
        const float4 *a = reinterpret_cast<const float4 *>(&s_acc[k][h][li * 8]);
        const float4 x = a[0], y = a[1];
        L = fmaf(w, s_l[k][h], L);
        o[0] = fmaf(w, x.x, o[0]); o[1] = fmaf(w, x.y, o[1]);
        o[2] = fmaf(w, x.z, o[2]); o[3] = fmaf(w, x.w, o[3]);
        o[4] = fmaf(w, y.x, o[4]); o[5] = fmaf(w, y.y, o[5]);
        o[6] = fmaf(w, y.z, o[6]); o[7] = fmaf(w, y.w, o[7]);
    }
    // No key: o = 0, lse = -inf (the merge then ignores this split).
    float inv = L > 0.f ? p.v_scale / L : 0.f;
    float lse = L > 0.f ? (M + log2f(L)) * LN2 : NEG_INF;
    if (bad) {
        inv = __int_as_float(0x7fc00000); // NaN
        lse = p.part_o ? -NEG_INF : inv;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) o[e] *= inv;
    const int64_t row = row0 + h;
    if (!p.part_o) {
        store_f32<T, 8>(reinterpret_cast<T *>(p.o) + row * D + li * 8, o);
        if (p.lse && li == 0) reinterpret_cast<float *>(p.lse)[row] = lse;
    } else {
        const int64_t prow = (int64_t)blockIdx.y * p.rows + row;
        float4 *d = reinterpret_cast<float4 *>(reinterpret_cast<float *>(p.part_o) + prow * D + li * 8);
        d[0] = make_float4(o[0], o[1], o[2], o[3]);
        d[1] = make_float4(o[4], o[5], o[6], o[7]);
        if (li == 0) reinterpret_cast<float *>(p.part_lse)[prow] = lse;
    }
}

template <typename T, int D, int G>
__device__ __forceinline__ void decode(const talon__decode_params &p) {
    constexpr int TPK = D / 8, NKG = NT / TPK, STEP = NKG * KPI, EB = sizeof(T);
    using R = Row8<T>;
    using raw = typename R::raw;
    static_assert(G <= NKG, "the combine gives each head one key group's lanes");
    static_assert(NKG * G * (D + 2) * 4 <= STAGES * 2 * KPI * NT * (int)sizeof(raw), "combine fits the ring");
    // ring[stage][K or V][key j][thread]: consecutive threads, consecutive 16 bytes. The
    // combine reuses it once drained: no static shared memory, so the table's 48 KB is the
    // whole footprint (more would need the opt-in attribute).
    extern __shared__ uint4 smem[];
    raw(*ring)[2][KPI][NT] = reinterpret_cast<raw(*)[2][KPI][NT]>(smem);
    float(*s_acc)[G][D] = reinterpret_cast<float(*)[G][D]>(smem);
    float(*s_m)[G] = reinterpret_cast<float(*)[G]>(reinterpret_cast<float *>(smem) + NKG * G * D);
    float(*s_l)[G] = s_m + NKG;

    const int tid = threadIdx.x, kg = tid / TPK, li = tid % TPK;
    const Cta cta(p, true);
    const int hk = cta.hk, b = cta.b, gn = cta.gn, start = cta.start, end = cta.end;
    const int64_t row0 = cta.row0;

    float q[G][8], acc[G][8], m[G], l[G];
    const T *qp = reinterpret_cast<const T *>(p.q) + row0 * D + li * 8;
#pragma unroll
    for (int h = 0; h < G; h++) {
        if (h < gn) load_f32<T, 8>(qp + h * D, q[h]);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            q[h][e] = h < gn ? q[h][e] * p.q_scale : 0.f;
            acc[h][e] = 0.f;
        }
        m[h] = NEG_INF;
        l[h] = 0.f;
    }

    const int *pt = reinterpret_cast<const int *>(p.page_table) + (int64_t)b * p.page_table_stride;
    const int pmask = (1 << p.page_shift) - 1;
    const char *kb = reinterpret_cast<const char *>(p.k) + hk * p.head_stride + li * 8 * EB;
    const char *vb = reinterpret_cast<const char *>(p.v) + hk * p.head_stride + li * 8 * EB;
    // Keys past the end are clamped onto the last one (a valid address) and masked later. The
    // page ids of a step are fetched one step before its copies are issued, so the issue
    // never waits on the page table.
    unsigned pg[KPI]; // first cache row of each key's page (< 2^32 rows of slot_stride bytes)
    auto pages = [&](int step_base) {
        if (step_base < end) {
#pragma unroll
            for (int j = 0; j < KPI; j++)
                pg[j] = unsigned(page_id(p, pt, min(step_base + kg * KPI + j, end - 1) >> p.page_shift)) *
                        unsigned(p.page_rows);
        }
    };
    // The ring: steps issued STAGES - 1 ahead of the one computed; one commit group per step
    // (empty past the end) keeps the wait count constant.
    auto issue = [&](int step_base, int stage) {
        if (step_base < end) {
#pragma unroll
            for (int j = 0; j < KPI; j++) {
                const int pos = min(step_base + kg * KPI + j, end - 1);
                const int64_t off = (int64_t)(pg[j] + (pos & pmask)) * p.slot_stride;
                R::copy(&ring[stage][0][j][tid], kb + off);
                R::copy(&ring[stage][1][j][tid], vb + off);
            }
        }
        cp_async_commit();
    };
    prime_ring<STAGES>(pages, issue, start, STEP);

    int stage = 0;
    for (int base = start; base < end; base += STEP) {
        issue(base + (STAGES - 1) * STEP, stage == 0 ? STAGES - 1 : stage - 1);
        pages(base + STAGES * STEP);
        cp_async_wait<STAGES - 1>();
        const int first = base + kg * KPI;
        R kr[KPI], vr[KPI];
#pragma unroll
        for (int j = 0; j < KPI; j++) {
            kr[j].r = ring[stage][0][j][tid];
            vr[j].r = ring[stage][1][j][tid];
        }
        stage = stage == STAGES - 1 ? 0 : stage + 1;

        float s[KPI][G];
#pragma unroll
        for (int j = 0; j < KPI; j++) {
            float k8[8];
            kr[j].get(k8);
#pragma unroll
            for (int h = 0; h < G; h++) {
                float d = 0.f;
#pragma unroll
                for (int e = 0; e < 8; e++) d = fmaf(q[h][e], k8[e], d);
                s[j][h] = d;
            }
        }
#pragma unroll
        for (int o = TPK / 2; o; o >>= 1)
#pragma unroll
            for (int j = 0; j < KPI; j++)
#pragma unroll
                for (int h = 0; h < G; h++) s[j][h] += __shfl_xor_sync(~0u, s[j][h], o);
#pragma unroll
        for (int j = 0; j < KPI; j++)
#pragma unroll
            for (int h = 0; h < G; h++) {
                if (p.cap != 0.f) s[j][h] = p.cap * tanhf(s[j][h]);
                if (first + j >= end) s[j][h] = NEG_INF;
            }

#pragma unroll
        for (int h = 0; h < G; h++) {
            float mx = m[h];
#pragma unroll
            for (int j = 0; j < KPI; j++) mx = fmaxf(mx, s[j][h]);
            const float ms = mx == NEG_INF ? 0.f : mx, alpha = exp2f(m[h] - ms);
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < KPI; j++) {
                s[j][h] = exp2f(s[j][h] - ms);
                sum += s[j][h];
            }
            l[h] = l[h] * alpha + sum;
            m[h] = mx;
#pragma unroll
            for (int e = 0; e < 8; e++) acc[h][e] *= alpha;
        }
#pragma unroll
        for (int j = 0; j < KPI; j++) {
            float v8[8];
            vr[j].get(v8);
#pragma unroll
            for (int h = 0; h < G; h++)
#pragma unroll
                for (int e = 0; e < 8; e++) acc[h][e] = fmaf(s[j][h], v8[e], acc[h][e]);
        }
    }
    cp_async_wait<0>();
    const bool bad = bad_pages(p); // the ring becomes s_acc

    // Combine the key groups: thread (kg, li) finishes head kg's elements [li * 8, li * 8 + 8).
    if (li == 0) {
#pragma unroll
        for (int h = 0; h < G; h++) {
            s_m[kg][h] = m[h];
            s_l[kg][h] = l[h];
        }
    }
#pragma unroll
    for (int h = 0; h < G; h++) {
        float4 *d = reinterpret_cast<float4 *>(&s_acc[kg][h][li * 8]);
        d[0] = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
        d[1] = make_float4(acc[h][4], acc[h][5], acc[h][6], acc[h][7]);
    }
    __syncthreads();
    if (kg < gn) finish<T, D, G, NKG>(p, s_acc, s_m, s_l, kg, li, row0, bad);
}

// Tensor-core version (fp8 caches; 16-bit ones with D <= 128, groups of 2 to 8 heads). Each warp
// walks its own KW keys per step through its own slice of the ring. Scores are computed transposed,
// S^T = K q^T on mma.m16n8k16: keys are M (rows 8..15 repeat rows 0..7, so ldmatrix fills the A
// fragment directly), the heads are N and q is the B fragment, held unscaled (exact) for the whole
// loop; the scale is applied to the fp32 scores. Then o^T += V^T P^T on mma.m16n8k8: head_dim is M
// (ldmatrix .trans of the V rows), keys K, and N holds P in two 16-bit parts, columns 0..3 its
// rounding and 4..7 the rounding of the rest for the same heads, so P V is as exact as in fp32 and
// no column is wasted (5 to 8 heads take a second such tile of P V; the scores' 8 columns hold 8
// heads); movmatrix turns the score layout into the B layout. The accumulators keep the two parts
// apart until the end. K/V rows sit in the ring with their 16-byte chunks XOR-swizzled by row, so
// ldmatrix reads them without bank conflicts. The online softmax runs per head on the column
// lanes (t < 2 for up to 4 heads).
// fp8 caches: the ring holds the raw e4m3 bytes (a warp's step is still 2 KB of K, now 2048 /
// head_dim keys) and the MMAs run in f16, every e4m3 value converting exactly
// (cvt.rn.f16x2.e4m3x2) right after its shared-memory load. Since e4m3 pairs cannot be
// ldmatrix'ed into the 16-bit layouts, the fragments permute head_dim instead, which a dot
// product and a per-dim output allow: a K lane takes 4 consecutive bytes of its key, a V lane
// D/8 consecutive dims of two keys (byte-permuted into key pairs); q follows K's order and the
// output dims V's.
template <typename T, bool FP8, int D, int G>
__device__ __forceinline__ void decode_mma(const talon__decode_params &p) {
    using TM = std::conditional_t<FP8, __half, T>; // the MMA's element type
    constexpr int NW = NT / 32, ROWB = D * (FP8 ? 1 : 2), KW = 2048 / ROWB, NKT = KW / 8;
    constexpr int CPR = ROWB / 16, NCP = KW * CPR / 32, STEP = NW * KW, TILEB = KW * ROWB;
    constexpr int STAGEB = 2 * TILEB;
    // P V's column tiles: one holds 4 heads (their two parts); 5 to 8 heads take a second.
    constexpr int NPV = G > 4 ? 2 : 1;
    static_assert(NKT >= 1 && CPR >= 4 && 32 % CPR == 0 && G <= 8, "tile shapes");
    static_assert(NW * G * (D + 2) * 4 <= NW * MMA_STAGES * STAGEB, "combine fits the ring");
    extern __shared__ uint4 smem[];
    float(*s_acc)[G][D] = reinterpret_cast<float(*)[G][D]>(smem);
    float(*s_m)[G] = reinterpret_cast<float(*)[G]>(reinterpret_cast<float *>(smem) + NW * G * D);
    float(*s_l)[G] = s_m + NW;

    const int tid = threadIdx.x, w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const Cta cta(p, true);
    const int hk = cta.hk, b = cta.b, gn = cta.gn, start = cta.start, end = cta.end;
    const int64_t row0 = cta.row0;

    // B fragments of q: column g = head g (0 past the chunk). 16-bit caches: the pairs as
    // stored, k rows 2t, 2t + 1 (+ 8) of each 16 dims. fp8: dims 16 kk + 4t .. + 3 stand for
    // those rows (the order of the dims in a dot product is free; the K fragment below takes
    // the same order), in f16 scaled by 2^qs so the largest |q| of the CTA is in
    // [2^14, 2^15): exact for bf16 q of any range, undone on the fp32 scores.
    uint32_t qb[D / 16][2];
    float sc = p.q_scale;
    {
        const uint32_t *qp =
            reinterpret_cast<const uint32_t *>(p.q) + (row0 + min(g, gn - 1)) * (D / 2) + (FP8 ? 2 * t : t);
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            qb[kk][0] = g < gn ? __ldg(qp + kk * 8) : 0u;
            qb[kk][1] = g < gn ? __ldg(qp + kk * 8 + (FP8 ? 1 : 4)) : 0u;
        }
        if constexpr (FP8) {
            // The largest |q|: 16-bit magnitudes order as integers (NaN above inf).
            uint32_t mb = 0;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) mb = __vmaxu2(mb, __vmaxu2(qb[kk][0], qb[kk][1]) & 0x7fff7fffu);
            mb = max(mb & 0xffffu, mb >> 16);
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) mb = max(mb, __shfl_xor_sync(~0u, mb, o));
            const float mx = unpack2<T>(mb).x;
            int qs = 0;
            if (mx > 0.f && mx <= 3.4e38f) {
                frexpf(mx, &qs);
                qs = 15 - qs;
            }
            sc = ldexpf(sc, -qs);
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const float2 f = unpack2<T>(qb[kk][j]);
                    qb[kk][j] = pack2<__half>(ldexpf(f.x, qs), ldexpf(f.y, qs));
                }
        }
    }
    // acc[j][mt]: o^T rows 16 mt + g (0, 1) and + 8 (2, 3), columns 2t, 2t + 1 of column tile
    // j (heads 4 j .. 4 j + 3: their high parts in columns 0..3, low parts in 4..7). For fp8
    // those rows are dims g D/8 + 2 mt and + 1 (see the V fragment).
    float acc[NPV][D / 16][4], m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < NPV; j++)
#pragma unroll
        for (int i = 0; i < D / 16; i++) acc[j][i][0] = acc[j][i][1] = acc[j][i][2] = acc[j][i][3] = 0.f;

    // Byte offset of 16-byte chunk c of tile row r: XOR-swizzled so the 8 rows of an ldmatrix
    // hit 8 different bank groups (64-byte rows pair up in 128-byte lines).
    auto chunk = [](int r, int c) -> unsigned { return (c ^ (CPR >= 8 ? r & 7 : (r >> 1) & 3)) << 4; };
    auto swz = [&](int r, int c) -> unsigned { return r * ROWB + chunk(r, c); };
    const int *pt = reinterpret_cast<const int *>(p.page_table) + (int64_t)b * p.page_table_stride;
    const int pmask = (1 << p.page_shift) - 1;
    // Lane's copies: chunk c of rows r0 + j * 32 / CPR of the warp's K and V tiles.
    const int c = lane % CPR, r0 = lane / CPR;
    const char *kb = reinterpret_cast<const char *>(p.k) + hk * p.head_stride + c * 16;
    const char *vb = reinterpret_cast<const char *>(p.v) + hk * p.head_stride + c * 16;
    const unsigned ring = (unsigned)__cvta_generic_to_shared(smem) + w * MMA_STAGES * STAGEB;
    unsigned pg[NCP]; // as in decode
    auto pages = [&](int step_base) {
        if (step_base < end) {
#pragma unroll
            for (int j = 0; j < NCP; j++)
                pg[j] = unsigned(page_id(p, pt, min(step_base + w * KW + r0 + j * (32 / CPR), end - 1) >> p.page_shift)) *
                        unsigned(p.page_rows);
        }
    };
    auto issue = [&](int step_base, int stage) {
        if (step_base < end) {
#pragma unroll
            for (int j = 0; j < NCP; j++) {
                const int r = r0 + j * (32 / CPR);
                const int pos = min(step_base + w * KW + r, end - 1);
                const int64_t off = (int64_t)(pg[j] + (pos & pmask)) * p.slot_stride;
                const unsigned d = ring + stage * STAGEB + swz(r, c);
                cp_async_16(d, kb + off);
                cp_async_16(d + TILEB, vb + off);
            }
        }
        cp_async_commit();
    };
    prime_ring<MMA_STAGES>(pages, issue, start, STEP);

    // ldmatrix: lanes 8i..8i+7 give row (lane & 7) of matrix i. 16-bit K: matrices 0, 1 are
    // chunk 2 kk (rows 8..15 repeat 0..7), 2, 3 chunk 2 kk + 1; V (.trans): chunks 4 cg + i.
    // fp8 K: matrix i is chunk 4 kq + i, k-step 4 kq + i, lane (g, t) getting its 4 bytes
    // 4t..4t+3 of key g. fp8 V is read directly: lane (g, t) takes dims [g D/8, g D/8 + D/8)
    // of keys 2t and 2t + 1, the pairs the A fragment of o^T wants.
    const unsigned lrow = (lane & 7) * ROWB;
    const int lr = lane & 7, kc = lane >> 4, vc = lane >> 3, vdim = g * (D / 8);
    // fp8 V: a lane's D/8 bytes of a row are VP pieces of VW words (8 bytes at D = 64).
    constexpr int VW = D / 32 < 4 ? D / 32 : 4, VP = D / 32 / VW;
    unsigned vx[VP], vy[VP];
#pragma unroll
    for (int i = 0; i < VP; i++) {
        const int b = vdim + 16 * i;
        vx[i] = swz(2 * t, b / 16) + b % 16 - lrow;
        vy[i] = swz(2 * t + 1, b / 16) + b % 16 - lrow;
    }
    int stage = 0;
    for (int base = start; base < end; base += STEP) {
        __syncwarp(); // every lane is done reading the stage about to be refilled
        issue(base + (MMA_STAGES - 1) * STEP, stage == 0 ? MMA_STAGES - 1 : stage - 1);
        pages(base + MMA_STAGES * STEP);
        cp_async_wait<MMA_STAGES - 1>();
        __syncwarp(); // the other lanes' copies of this stage are visible
        const unsigned kt = ring + stage * STAGEB + lrow, vt = kt + TILEB;
        stage = stage == MMA_STAGES - 1 ? 0 : stage + 1;

        // s[nt][e]: key base + w KW + 8 nt + g, head 2t + e.
        float s[NKT][2], mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nt = 0; nt < NKT; nt++) {
            float d[4] = {0.f, 0.f, 0.f, 0.f};
            if constexpr (FP8) {
#pragma unroll
                for (int kq = 0; kq < D / 64; kq++) {
                    uint32_t x[4];
                    ldmatrix_x4<false>(x, kt + nt * 8 * ROWB + chunk(lr, 4 * kq + vc));
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const uint32_t lo = e4m3x2_to_f16x2(x[i]), hi = e4m3x2_to_f16x2(x[i] >> 16);
                        const uint32_t a[4] = {lo, lo, hi, hi};
                        mma_m16n8k16<TM>(d, a, qb[4 * kq + i][0], qb[4 * kq + i][1]);
                    }
                }
            } else {
#pragma unroll
                for (int kk = 0; kk < D / 16; kk++) {
                    uint32_t x[4];
                    ldmatrix_x4<false>(x, kt + nt * 8 * ROWB + chunk(lr, 2 * kk + kc));
                    mma_m16n8k16<TM>(d, x, qb[kk][0], qb[kk][1]);
                }
            }
            const bool out = base + w * KW + nt * 8 + g >= end;
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float x = d[e] * sc;
                if (p.cap != 0.f) x = p.cap * tanhf(x);
                s[nt][e] = out ? NEG_INF : x;
                mx[e] = fmaxf(mx[e], s[nt][e]);
            }
        }
        float alpha[2], ms[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
#pragma unroll
            for (int o = 4; o < 32; o <<= 1) mx[e] = fmaxf(mx[e], __shfl_xor_sync(~0u, mx[e], o));
            ms[e] = mx[e] == NEG_INF ? 0.f : mx[e];
            alpha[e] = exp2f(m[e] - ms[e]);
            m[e] = mx[e];
            l[e] *= alpha[e];
        }
        // Lane t's columns 2t, 2t + 1 of tile 0 are heads 2t, 2t + 1 (t < 2) or the low parts
        // of lane t - 2's heads; of tile 1, the heads of lane t + 2 (t < 2) or its own.
        float ta[NPV][2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float a = __shfl_xor_sync(~0u, alpha[e], 2);
            ta[0][e] = t < 2 ? alpha[e] : a;
            if constexpr (NPV == 2) ta[1][e] = t < 2 ? a : alpha[e];
        }
        // (the same as testing alpha alone over the warp, which made ptxas spill 8 bytes in the
        // 16-bit d128 g8 kernels)
        if (__any_sync(~0u, ta[0][0] != 1.f || ta[0][1] != 1.f || ta[NPV - 1][0] != 1.f ||
                                ta[NPV - 1][1] != 1.f)) {
#pragma unroll
            for (int j = 0; j < NPV; j++)
#pragma unroll
                for (int i = 0; i < D / 16; i++) {
                    acc[j][i][0] *= ta[j][0]; acc[j][i][1] *= ta[j][1];
                    acc[j][i][2] *= ta[j][0]; acc[j][i][3] *= ta[j][1];
                }
        }
#pragma unroll
        for (int nt = 0; nt < NKT; nt++) {
            const float p0 = exp2f(s[nt][0] - ms[0]), p1 = exp2f(s[nt][1] - ms[1]);
            l[0] += p0;
            l[1] += p1;
            const uint32_t hi = pack2<TM>(p0, p1);
            const float2 h = unpack2<TM>(hi);
            const uint32_t lo = pack2<TM>(p0 - h.x, p1 - h.y);
            // Tile 0 takes lanes t < 2's high parts and their low parts from lanes t + 2; tile 1
            // lanes t + 2's high parts and their own low parts: one exchange serves both.
            const uint32_t px = __shfl_xor_sync(~0u, NPV == 2 && t >= 2 ? hi : lo, 2);
            uint32_t pb[NPV];
            pb[0] = movmatrix_trans(t < 2 ? hi : px);
            if constexpr (NPV == 2) pb[1] = movmatrix_trans(t < 2 ? px : lo);
            if constexpr (FP8) {
                // Byte j of word i of x (key 2t) and y (key 2t + 1), i counted over the pieces,
                // is dim g D/8 + 4i + j: pairs (x_j, y_j) are the A fragments of tiles 2i
                // (j = 0, 1) and 2i + 1.
#pragma unroll
                for (int pc = 0; pc < VP; pc++) {
                    uint32_t x[VW], y[VW];
                    lds<VW>(x, vt + nt * 8 * ROWB + vx[pc]);
                    lds<VW>(y, vt + nt * 8 * ROWB + vy[pc]);
#pragma unroll
                    for (int j = 0; j < VW; j++) {
                        const int i = VW * pc + j;
                        const uint32_t a = __byte_perm(x[j], y[j], 0x5140), c2 = __byte_perm(x[j], y[j], 0x7362);
                        const uint32_t a0 = e4m3x2_to_f16x2(a), a1 = e4m3x2_to_f16x2(a >> 16);
                        const uint32_t c0 = e4m3x2_to_f16x2(c2), c1 = e4m3x2_to_f16x2(c2 >> 16);
#pragma unroll
                        for (int jt = 0; jt < NPV; jt++) {
                            mma_m16n8k8<TM>(acc[jt][2 * i], a0, a1, pb[jt]);
                            mma_m16n8k8<TM>(acc[jt][2 * i + 1], c0, c1, pb[jt]);
                        }
                    }
                }
            } else {
#pragma unroll
                for (int cg = 0; cg < CPR / 4; cg++) {
                    uint32_t x[4];
                    ldmatrix_x4<true>(x, vt + nt * 8 * ROWB + chunk(lr, 4 * cg + vc));
#pragma unroll
                    for (int jt = 0; jt < NPV; jt++) {
                        mma_m16n8k8<TM>(acc[jt][2 * cg], x[0], x[1], pb[jt]);
                        mma_m16n8k8<TM>(acc[jt][2 * cg + 1], x[2], x[3], pb[jt]);
                    }
                }
            }
        }
    }
    cp_async_wait<0>();
    const bool bad = bad_pages(p); // the ring becomes s_acc

#pragma unroll
    for (int e = 0; e < 2; e++)
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) l[e] += __shfl_xor_sync(~0u, l[e], o);
    // Each head's two parts summed: lanes t and t ^ 2 then hold the same sums, of heads 2t, 2t
    // + 1 of tile 0 (t < 2) and of tile 1 (t >= 2).
#pragma unroll
    for (int j = 0; j < NPV; j++)
#pragma unroll
        for (int i = 0; i < D / 16; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[j][i][e] += __shfl_xor_sync(~0u, acc[j][i][e], 2);
#pragma unroll
    for (int e = 0; e < 2; e++) {
        const int h = 2 * t + e;
        if (h < G) {
#pragma unroll
            for (int i = 0; i < D / 16; i++) {
                const bool t1 = NPV == 2 && t >= 2;
                s_acc[w][h][FP8 ? vdim + 2 * i : 16 * i + g] = t1 ? acc[NPV - 1][i][e] : acc[0][i][e];
                s_acc[w][h][FP8 ? vdim + 2 * i + 1 : 16 * i + 8 + g] = t1 ? acc[NPV - 1][i][2 + e] : acc[0][i][2 + e];
            }
            if (g == 0) {
                s_m[w][h] = m[e];
                s_l[w][h] = l[e];
            }
        }
    }
    __syncthreads();
    if (tid < gn * (D / 8)) finish<T, D, G, NW>(p, s_acc, s_m, s_l, tid / (D / 8), tid % (D / 8), row0, bad);
}

// n states of [rows, head_dim]: o = sum_i exp(lse_i - lse) o_i, lse = ln sum_i exp(lse_i).
// S lanes share 8 elements of a row, lane j taking states j, j + S, ...: max over the lanes,
// then each lane's weighted sum, summed across the lanes by xor shuffles. The split merge
// uses S = TALON__DECODE_MERGE_LANES: one thread walking all n states made the many-split
// merge a chain of L2 round trips (docs/notes/decode.md). S = 1 for two states.
template <typename Tin, typename Tout, int S>
__device__ __forceinline__ void merge(const talon__merge_params &p) {
    const int64_t vpr = p.head_dim / 8, i = ((int64_t)blockIdx.x * NT + threadIdx.x) / S;
    if (i >= p.rows * vpr) return; // the S lanes of a chunk leave together
    const int part = threadIdx.x % S;
    const unsigned lanes = S == 1 ? 1u : ((1u << S) - 1) << (threadIdx.x % 32 / S * S);
    const int64_t r = i / vpr, c = (i - r * vpr) * 8;
    const char *s = reinterpret_cast<const char *>(p.s0) + r * 4;
    const char *v = reinterpret_cast<const char *>(p.v0) + (r * p.head_dim + c) * sizeof(Tin);
    float M = NEG_INF, L = 0.f, o[8] = {};
#pragma unroll 8
    for (int64_t k = part; k < p.n; k += S) M = fmaxf(M, *reinterpret_cast<const float *>(s + k * p.s_step));
#pragma unroll
    for (int off = S / 2; off; off >>= 1) M = fmaxf(M, __shfl_xor_sync(lanes, M, off, S));
    if (M != NEG_INF) {
#pragma unroll 8
        for (int64_t k = part; k < p.n; k += S) {
            const float w = expf(*reinterpret_cast<const float *>(s + k * p.s_step) - M);
            float x[8];
            if constexpr (std::is_same_v<Tin, float>) {
                const float4 *a = reinterpret_cast<const float4 *>(v + k * p.v_step);
                const float4 y = a[0], z = a[1];
                x[0] = y.x; x[1] = y.y; x[2] = y.z; x[3] = y.w;
                x[4] = z.x; x[5] = z.y; x[6] = z.z; x[7] = z.w;
            } else {
                load_f32<Tin, 8>(reinterpret_cast<const Tin *>(v + k * p.v_step), x);
            }
            L += w;
#pragma unroll
            for (int e = 0; e < 8; e++) o[e] = fmaf(w, x[e], o[e]);
        }
#pragma unroll
        for (int off = S / 2; off; off >>= 1) {
            L += __shfl_xor_sync(lanes, L, off, S);
#pragma unroll
            for (int e = 0; e < 8; e++) o[e] += __shfl_xor_sync(lanes, o[e], off, S);
        }
        const float inv = 1.f / L; // L >= 1: the largest state weighs exp(0)
#pragma unroll
        for (int e = 0; e < 8; e++) o[e] *= inv;
    }
    if (part) return;
    store_f32<Tout, 8>(reinterpret_cast<Tout *>(p.o) + r * p.head_dim + c, o);
    if (p.lse && c == 0) reinterpret_cast<float *>(p.lse)[r] = M == NEG_INF ? M : M + logf(L);
}

// fp8 caches take the tensor cores; 16-bit ones for 2 to 8 heads and head_dim <= 128 (with one
// head per CTA the per-lane kernel measured faster: docs/notes/decode.md).
template <int DT, int FP8, int D, int G> __device__ void decode_heads(const talon__decode_params &p) {
    using T = elem<DT>;
    // The merge kernel may launch now (a programmatic dependent, talon.h); it waits for this
    // grid's results before reading them.
    pdl_launch_dependents();
    if constexpr (FP8 || (G > 1 && D <= 128)) decode_mma<T, FP8 != 0, D, G>(p);
    else decode<T, D, G>(p);
}
template <int DT> __device__ void merge_splits(const talon__merge_params &p) {
    pdl_wait(); // the attention kernel's partials
    merge<float, elem<DT>, TALON__DECODE_MERGE_LANES>(p);
}
template <int DT> __device__ void merge_states(const talon__merge_params &p) { merge<elem<DT>, elem<DT>, 1>(p); }

} // namespace talon::decode

TALON__KERNELS_decode(TALON_DEV_KERNEL)
