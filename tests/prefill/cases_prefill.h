/* The prefill family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_PREFILL_H
#define TALON_TESTS_CASES_PREFILL_H

#define PREFILL_TEST_OPS(X) X(prefill_attention, prefill) X(prefill_attention_paged, prefill_paged)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define PREFILL_BENCH_STRUCTS(S, F) \
    S(talon_prefill_attention_args, \
      F(o, PTR) F(lse, PTR) F(q, PTR) F(k, PTR) F(v, PTR) F(cu_seqlens_q, PTR) \
      F(cu_seqlens_k, PTR) F(workspace, PTR) F(workspace_bytes, I64) F(batch, I64) \
      F(total_q, I64) F(total_kv, I64) \
      F(max_seqlen_q, I64) F(num_qo_heads, I64) F(num_kv_heads, I64) F(head_dim, I64) \
      F(v_head_dim, I64) F(q_stride, I64) F(k_stride, I64) F(v_stride, I64) F(o_stride, I64) \
      F(window, I64) \
      F(causal, I32) F(sm_scale, F32) F(logits_soft_cap, F32) F(dtype, ENUM) \
      F(q_scale, F32) F(k_scale, F32) F(v_scale, F32)) \
    S(talon_prefill_attention_paged_args, \
      F(o, PTR) F(lse, PTR) F(q, PTR) F(k_cache, PTR) F(v_cache, PTR) F(page_table, PTR) \
      F(kv_lens, PTR) F(cu_seqlens_q, PTR) F(workspace, PTR) F(workspace_bytes, I64) \
      F(batch, I64) F(total_q, I64) F(max_seqlen_q, I64) \
      F(max_kv_len, I64) F(num_pages, I64) F(page_size, I64) F(page_table_stride, I64) \
      F(num_qo_heads, I64) F(num_kv_heads, I64) F(head_dim, I64) F(q_stride, I64) \
      F(o_stride, I64) F(window, I64) F(causal, I32) F(sm_scale, F32) \
      F(logits_soft_cap, F32) F(dtype, ENUM) F(layout, ENUM) F(kv_dtype, ENUM) F(k_scale, F32) \
      F(v_scale, F32))

#define PREFILL_CHECKED_OPS(X) X(prefill_attention_paged, talon__prefill_params, test_prefill_paged)
#define PREFILL_WORKSPACE_OPS(X)                                                                \
    X(prefill_attention, prefill) X(prefill_attention_paged, prefill_paged)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void prefill_attention_valid_args(talon_prefill_attention_args *a) {
    a->o = 1 * GB; a->q = 2 * GB; a->k = 3 * GB;
    a->v = 4 * GB; a->cu_seqlens_q = 5 * GB; a->cu_seqlens_k = 6 * GB;
    a->workspace = 7 * GB; a->workspace_bytes = 16; a->batch = 2;
    a->total_q = 512; a->total_kv = 512; a->max_seqlen_q = 256;
    a->num_qo_heads = 32; a->num_kv_heads = 8; a->head_dim = 128;
    a->causal = 1;
}

static void prefill_attention_paged_valid_args(talon_prefill_attention_paged_args *a) {
    a->o = 1 * GB; a->q = 2 * GB;
    a->k_cache = 3 * GB; a->v_cache = 4 * GB;
    a->page_table = 5 * GB; a->kv_lens = 6 * GB;
    a->cu_seqlens_q = 7 * GB; a->workspace = 8 * GB;
    a->workspace_bytes = 16; a->batch = 2;
    a->total_q = 512; a->max_seqlen_q = 256;
    a->max_kv_len = 1024; a->num_pages = 256;
    a->page_size = 16; a->num_qo_heads = 32;
    a->num_kv_heads = 8; a->head_dim = 128;
    a->causal = 1;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
/* prefill_attention (ps 0) and prefill_attention_paged (ps > 0); d 192: v 128 */
typedef struct {
    int64_t hq, hk, d, pad, ps;
    int batch, causal, window, no_lse, hnd;
    float cap, sm_scale, qamp;
    int qlens[OC_MAXB], klens[OC_MAXB];
} pre_params;
#define PREFILL_OC_PARAMS pre_params pre;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
#include "../decode/ref_attn.h"

/* prefill: offsets of the requests, token strides, the paged cache's shape */
typedef struct pre_geo {
    int32_t cu_q[OC_MAXB + 1], cu_k[OC_MAXB + 1];
    int64_t total_q, total_kv, dv, qs, ks, vs, os, max_q, max_kv, pt_stride, num_pages;
} pre_geo;
static void pre_geometry(const oc_case *c, pre_geo *g) {
    int b;
    memset(g, 0, sizeof *g);
    for (b = 0; b < c->p.pre.batch; b++) {
        const int64_t pages = (c->p.pre.klens[b] + c->p.pre.ps - 1) / (c->p.pre.ps ? c->p.pre.ps : 1);
        g->cu_q[b + 1] = g->cu_q[b] + c->p.pre.qlens[b];
        g->cu_k[b + 1] = g->cu_k[b] + c->p.pre.klens[b];
        if (c->p.pre.qlens[b] > g->max_q) g->max_q = c->p.pre.qlens[b];
        if (c->p.pre.klens[b] > g->max_kv) g->max_kv = c->p.pre.klens[b];
        if (pages > g->pt_stride) g->pt_stride = pages;
        g->num_pages += pages;
    }
    g->total_q = g->cu_q[c->p.pre.batch] ? g->cu_q[c->p.pre.batch] : 1;
    g->total_kv = g->cu_k[c->p.pre.batch] ? g->cu_k[c->p.pre.batch] : 1;
    if (!g->max_q) g->max_q = 1;
    if (!g->max_kv) g->max_kv = 1;
    g->pt_stride += 1;  /* a longer row than needed */
    g->num_pages += 3;  /* spare pages, never referenced */
    g->dv = c->p.pre.d == 192 ? 128 : c->p.pre.d;
    g->qs = c->p.pre.hq * c->p.pre.d + c->p.pre.pad;
    g->ks = c->p.pre.hk * c->p.pre.d + c->p.pre.pad;
    g->vs = c->p.pre.hk * g->dv + c->p.pre.pad;
    g->os = c->p.pre.hq * g->dv + c->p.pre.pad;
}

static void pre_random(oc_case *c, uint64_t *s, int big) {
    const int paged = c->op == OP_prefill_attention_paged;
    const int h = (int)oc_ri(s, 0, OC_COUNT(oc_heads) - 1);
    const double max_work = big ? 3e9 : 4e7; /* sum of q x k x hq x d */
    double work;
    int b;
    c->p.pre.d = !paged && oc_chance(s, 20) ? 192 : (int64_t)64 << oc_ri(s, 0, 2);
    c->p.pre.hq = oc_heads[h][0];
    c->p.pre.hk = oc_heads[h][1];
    c->p.pre.batch = (int)oc_ri(s, 1, big ? 6 : 4);
    for (b = 0; b < c->p.pre.batch; b++) {
        const int64_t q = oc_chance(s, 10) ? 0 : oc_len(s, 1, big ? 1024 : 200);
        const int64_t r = oc_ri(s, 0, 19);
        c->p.pre.qlens[b] = (int)q;
        c->p.pre.klens[b] = (int)(r < 10 ? q : r < 17 ? q + oc_len(s, 1, big ? 2000 : 300) : oc_ri(s, 0, q));
    }
    if (!c->p.pre.qlens[0]) { /* at least one query */
        c->p.pre.qlens[0] = 1;
        if (!c->p.pre.klens[0]) c->p.pre.klens[0] = 1;
    }
    for (;;) { /* halve the longest request until the reference's work and q, k, v fit */
        int longest = 0;
        int64_t keys = 0, queries = 0;
        work = 0;
        for (b = 0; b < c->p.pre.batch; b++) {
            work += (double)c->p.pre.qlens[b] * (double)c->p.pre.klens[b];
            keys += c->p.pre.klens[b];
            queries += c->p.pre.qlens[b];
            if (c->p.pre.klens[b] + c->p.pre.qlens[b] > c->p.pre.klens[longest] + c->p.pre.qlens[longest])
                longest = b;
        }
        if (work * (double)(c->p.pre.hq * c->p.pre.d) <= max_work &&
            keys * c->p.pre.hk * c->p.pre.d <= (big ? 8000000 : 1000000) &&
            queries * c->p.pre.hq * c->p.pre.d <= (big ? 8000000 : 1000000))
            break;
        c->p.pre.qlens[longest] = (c->p.pre.qlens[longest] + 1) / 2;
        c->p.pre.klens[longest] = (c->p.pre.klens[longest] + 1) / 2;
    }
    c->p.pre.causal = oc_chance(s, 50);
    c->p.pre.window = oc_chance(s, 25) ? (int)oc_len(s, 1, 300) : 0;
    c->p.pre.cap = oc_chance(s, 20) ? (oc_chance(s, 50) ? 5.0f : 20.0f) : 0.0f;
    c->p.pre.qamp = c->p.pre.cap > 0 ? 4.0f : 1.0f;
    c->p.pre.pad = oc_chance(s, 25) ? 8 * oc_ri(s, 1, 3) : 0;
    c->p.pre.no_lse = oc_chance(s, 20);
    c->p.pre.sm_scale = oc_chance(s, 20) ? 0.3f : 0.0f;
    if (paged) {
        c->p.pre.ps = (int64_t)1 << oc_ri(s, 0, 8);
        c->p.pre.hnd = oc_chance(s, 50);
    }
}

static int pre_describe(const oc_case *c, char *buf, size_t n, const char *name,
                        const char *dt, unsigned long long seed) {
    int k = snprintf(buf, n, "%s %s D %lld Hq %lld Hk %lld %s window %d cap %g pad %lld%s "
                     "sm_scale %g page %lld %s lens {", name, dt, (long long)c->p.pre.d,
                     (long long)c->p.pre.hq, (long long)c->p.pre.hk,
                     c->p.pre.causal ? "causal" : "full", c->p.pre.window,
                     (double)c->p.pre.cap, (long long)c->p.pre.pad,
                     c->p.pre.no_lse ? " no-lse" : "", (double)c->p.pre.sm_scale,
                     (long long)c->p.pre.ps, c->p.pre.hnd ? "HND" : "NHD");
    int b;
    for (b = 0; b < c->p.pre.batch && k > 0 && (size_t)k < n; b++)
        k += snprintf(buf + k, n - (size_t)k, "%s%d/%d", b ? "," : "", c->p.pre.qlens[b],
                      c->p.pre.klens[b]);
    if (k > 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, "} seed %llx", seed);
    return k;
}

/* the element offset of (token slot `t` of a request, kv head h) in a paged cache: page
   page_table[t / ps] */
static int64_t pre_cache_at(const oc_case *c, int64_t page, int64_t off, int64_t h) {
    const int64_t ps = c->p.pre.ps, hk = c->p.pre.hk, d = c->p.pre.d;
    return c->p.pre.hnd ? ((page * hk + h) * ps + off) * d : ((page * ps + off) * hk + h) * d;
}

static int pre_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int paged = c->p.pre.ps > 0;
    const int64_t hq = c->p.pre.hq, hk = c->p.pre.hk, d = c->p.pre.d;
    pre_geo g;
    uint64_t s = c->seed;
    (void)ctx;
    pre_geometry(c, &g);
    if (oc_add(j, "q", OC_IN, 2, g.total_q * g.qs, 0) != 0) return -1;
    if (!paged) {
        if (oc_add(j, "k", OC_IN, 2, g.total_kv * g.ks, 0) != 1 ||
            oc_add(j, "v", OC_IN, 2, g.total_kv * g.vs, 0) != 2)
            return -1;
    } else {
        const int64_t cache = g.num_pages * c->p.pre.ps * hk * d;
        if (oc_add(j, "k_cache", OC_IN, 2, cache, 0) != 1 || /* unused slots stay NaN */
            oc_add(j, "v_cache", OC_IN, 2, cache, 0) != 2)
            return -1;
    }
    if (oc_add(j, "cu_seqlens_q", OC_IN, 4, c->p.pre.batch + 1, 0) != 3 ||
        oc_add(j, paged ? "page_table" : "cu_seqlens_k", OC_IN, 4,
               paged ? c->p.pre.batch * g.pt_stride : c->p.pre.batch + 1, 0) != 4 ||
        oc_add(j, "o", OC_OUT, 2, g.total_q * g.os, 0) != 5 ||
        oc_add(j, "lse", OC_OUT, 4, g.total_q * hq, 0) != 6 ||
        oc_add(j, "workspace", OC_WS, 1, 16, 0) != 7 ||
        (paged && oc_add(j, "kv_lens", OC_IN, 4, c->p.pre.batch, 0) != 8))
        return -1;
    /* q's padding holds random values too: they must not reach a result */
    oc_fill16(j, 0, 0, g.total_q * g.qs, c->p.pre.qamp, &s);
    if (!paged) {
        oc_fill16(j, 1, 0, g.total_kv * g.ks, 1.0f, &s);
        oc_fill16(j, 2, 0, g.total_kv * g.vs, 1.0f, &s);
        for (int b = 0; b <= c->p.pre.batch; b++) {
            oc_seti(oc_img(j, 3), b, g.cu_q[b]);
            oc_seti(oc_img(j, 4), b, g.cu_k[b]);
        }
    } else {
        int64_t *perm = (int64_t *)malloc((size_t)g.num_pages * sizeof(int64_t)), i, used = 0;
        if (!perm) return -1;
        for (i = 0; i < g.num_pages; i++) perm[i] = i;
        for (i = g.num_pages - 1; i > 0; i--) {
            const int64_t k = (int64_t)(ref_next64(&s) % (uint64_t)(i + 1)), x = perm[i];
            perm[i] = perm[k];
            perm[k] = x;
        }
        for (i = 0; i < c->p.pre.batch * g.pt_stride; i++) oc_seti(oc_img(j, 4), i, -1);
        for (int b = 0; b < c->p.pre.batch; b++) {
            oc_seti(oc_img(j, 3), b, g.cu_q[b]);
            oc_seti(oc_img(j, 8), b, c->p.pre.klens[b]);
            for (int64_t t = 0; t < c->p.pre.klens[b]; t++) {
                int64_t page;
                if (t % c->p.pre.ps == 0) /* a new page */
                    oc_seti(oc_img(j, 4), b * g.pt_stride + t / c->p.pre.ps, (int32_t)perm[used++]);
                page = oc_geti(oc_img(j, 4), b * g.pt_stride + t / c->p.pre.ps);
                for (int64_t h = 0; h < hk; h++) {
                    oc_fill16(j, 1, pre_cache_at(c, page, t % c->p.pre.ps, h), d, 1.0f, &s);
                    oc_fill16(j, 2, pre_cache_at(c, page, t % c->p.pre.ps, h), d, 1.0f, &s);
                }
            }
        }
        oc_seti(oc_img(j, 3), c->p.pre.batch, g.cu_q[c->p.pre.batch]);
        free(perm);
    }
    return 0;
}

static void prefill_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    pre_geo g;
    pre_geometry(c, &g);
    a->prefill.o = P(5); a->prefill.lse = c->p.pre.no_lse ? 0 : P(6); a->prefill.q = P(0);
    a->prefill.k = P(1); a->prefill.v = P(2); a->prefill.cu_seqlens_q = P(3);
    a->prefill.cu_seqlens_k = P(4); a->prefill.workspace = P(7); a->prefill.workspace_bytes = 16;
    a->prefill.batch = c->p.pre.batch; a->prefill.total_q = g.total_q;
    a->prefill.total_kv = g.total_kv; a->prefill.max_seqlen_q = g.max_q;
    a->prefill.num_qo_heads = c->p.pre.hq; a->prefill.num_kv_heads = c->p.pre.hk;
    a->prefill.head_dim = c->p.pre.d; a->prefill.v_head_dim = c->p.pre.d == 192 ? 128 : 0;
    if (c->p.pre.pad) {
        a->prefill.q_stride = g.qs; a->prefill.k_stride = g.ks;
        a->prefill.v_stride = g.vs; a->prefill.o_stride = g.os;
    }
    a->prefill.window = c->p.pre.window; a->prefill.causal = c->p.pre.causal;
    a->prefill.sm_scale = c->p.pre.sm_scale; a->prefill.logits_soft_cap = c->p.pre.cap;
    a->prefill.dtype = c->dt;
}

static void paged_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    pre_geo g;
    pre_geometry(c, &g);
    a->prefill_paged.o = P(5); a->prefill_paged.lse = c->p.pre.no_lse ? 0 : P(6);
    a->prefill_paged.q = P(0); a->prefill_paged.k_cache = P(1); a->prefill_paged.v_cache = P(2);
    a->prefill_paged.page_table = P(4); a->prefill_paged.kv_lens = P(8);
    a->prefill_paged.cu_seqlens_q = P(3); a->prefill_paged.workspace = P(7);
    a->prefill_paged.workspace_bytes = 16;
    a->prefill_paged.batch = c->p.pre.batch; a->prefill_paged.total_q = g.total_q;
    a->prefill_paged.max_seqlen_q = g.max_q; a->prefill_paged.max_kv_len = g.max_kv;
    a->prefill_paged.num_pages = g.num_pages; a->prefill_paged.page_size = c->p.pre.ps;
    a->prefill_paged.page_table_stride = g.pt_stride;
    a->prefill_paged.num_qo_heads = c->p.pre.hq; a->prefill_paged.num_kv_heads = c->p.pre.hk;
    a->prefill_paged.head_dim = c->p.pre.d;
    if (c->p.pre.pad) { a->prefill_paged.q_stride = g.qs; a->prefill_paged.o_stride = g.os; }
    a->prefill_paged.window = c->p.pre.window; a->prefill_paged.causal = c->p.pre.causal;
    a->prefill_paged.sm_scale = c->p.pre.sm_scale;
    a->prefill_paged.logits_soft_cap = c->p.pre.cap; a->prefill_paged.dtype = c->dt;
    a->prefill_paged.layout = c->p.pre.hnd ? TALON_KV_HND : TALON_KV_NHD;
}

static void pre_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int paged = c->p.pre.ps > 0;
    const int64_t hq = c->p.pre.hq, d = c->p.pre.d, group = hq / c->p.pre.hk;
    const double rtol = ref_rtol(c->dt), atol = ref_atol(c->dt);
    /* the weights enter P v rounded to the input type: twice that half unit, of mag */
    const double ptol = c->dt == TALON_DTYPE_F16 ? 0x1p-10 : 0x1p-8;
    const double scale = c->p.pre.sm_scale != 0 ? c->p.pre.sm_scale : 1.0 / sqrt((double)d);
    pre_geo g;
    float *kf = NULL, *vf = NULL;
    const float **kp = NULL, **vp = NULL;
    double *q = NULL, *o, *mag, work = 0;
    int64_t t, step;
    int b = 0;
    pre_geometry(c, &g);
    for (b = 0; b < c->p.pre.batch; b++)
        work += (double)c->p.pre.qlens[b] * (double)c->p.pre.klens[b] * (double)(hq * d);
    step = oc_step(work, budget);
    kf = oc_cache_values(j, 1, 0);
    vf = oc_cache_values(j, 2, 0);
    kp = (const float **)malloc(sizeof(float *) * (size_t)(g.max_kv + 1) * 2);
    q = (double *)malloc((size_t)(d + 2 * g.dv) * sizeof(double));
    if (!kf || !vf || !kp || !q) { oc_fail(st, "out of host memory"); goto done; }
    vp = kp + g.max_kv + 1;
    o = q + d;
    mag = o + g.dv;
    b = 0;
    for (t = 0; t < g.cu_q[c->p.pre.batch]; t++) {
        int64_t h, i, ql, kl, qi, pos, lo, hi, n;
        int sampled;
        while (g.cu_q[b + 1] <= t) b++;
        ql = c->p.pre.qlens[b];
        kl = c->p.pre.klens[b];
        qi = t - g.cu_q[b];
        pos = qi + kl - ql; /* the new tokens are the last keys (bottom-right causal) */
        lo = c->p.pre.window > 0 ? pos - c->p.pre.window + 1 : 0;
        if (lo < 0) lo = 0;
        hi = c->p.pre.causal ? pos : kl - 1;
        if (hi > kl - 1) hi = kl - 1;
        n = hi >= lo ? hi - lo + 1 : 0;
        sampled = step == 1 || qi % step == 0 || qi == ql - 1;
        for (h = 0; h < hq; h++) {
            const int64_t kvh = h / group;
            double lse, smax;
            if (!sampled) {
                oc_check_written(st, "o", img[5], t * g.os + h * g.dv, g.dv, c->dt);
                if (!c->p.pre.no_lse && isnan(oc_getf(img[6], t * hq + h)))
                    oc_fail(st, "lse[%lld, %lld] is NaN (not written?)", (long long)t, (long long)h);
                continue;
            }
            for (i = 0; i < d; i++) q[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), t * g.qs + h * d + i));
            for (i = 0; i < n; i++) {
                if (paged) {
                    const int64_t key = lo + i;
                    const int64_t page = oc_geti(oc_img(j, 4), b * g.pt_stride + key / c->p.pre.ps);
                    const int64_t at = oc_cache_at(c->p.pre.hnd, c->p.pre.ps, c->p.pre.hk, d, page,
                                                   key % c->p.pre.ps, kvh);
                    kp[i] = kf + at;
                    vp[i] = vf + at;
                } else {
                    kp[i] = kf + (g.cu_k[b] + lo + i) * g.ks + kvh * d;
                    vp[i] = vf + (g.cu_k[b] + lo + i) * g.vs + kvh * g.dv;
                }
            }
            lse = ref_attn_dv(q, kp, vp, n, d, g.dv, scale, c->p.pre.cap, 1.0, 1.0, o, mag, &smax);
            for (i = 0; i < g.dv; i++)
                oc_cmp(st, "o", t, h * g.dv + i, REF_TO_F32(c->dt, oc_get16(img[5], t * g.os + h * g.dv + i)),
                       o[i], rtol * fabs(o[i]) + atol + ptol * mag[i]);
            if (!c->p.pre.no_lse) {
                const double got = oc_getf(img[6], t * hq + h);
                if (lse == -INFINITY) {
                    st->elements++;
                    if (got != -INFINITY)
                        oc_fail(st, "lse[%lld, %lld] = %g, reference -inf", (long long)t, (long long)h, got);
                } else {
                    oc_cmp(st, "lse", t, h, got, lse, 0x1p-16 * (1 + fabs(lse) + smax));
                }
            }
        }
    }
    /* o's row padding stays poisoned (a row past every request is not compared) */
    oc_check_outside(st, j, 5, img[5], g.total_q, hq * g.dv, g.os);
    if (c->p.pre.no_lse) oc_check_poison(st, j, 6, img[6]);
done:
    free(kf); free(vf); free(kp); free(q);
}

static const oc_op prefill_attention_oc = {pre_random, pre_build, prefill_args,
                                           pre_check, pre_describe, NULL};
static const oc_op prefill_attention_paged_oc = {pre_random, pre_build, paged_args,
                                                 pre_check, pre_describe, NULL};
#endif

#ifdef CHECKED_FAMILY_CASES /* test_gpu_checked.c */
#ifndef CHECKED_BASELINE
static int paged_case(const char *name, int64_t ps, int64_t lens_b, int32_t lens_v, int64_t pt_b,
                      int64_t pt_i, int32_t pt_v, int reading) {
    enum { B = 3, HQ = 8, HK = 2, D = 128, MAXLEN = 320 };
    static const int32_t qlen[B] = {20, 64, 5}, klen[B] = {100, 64, 300};
    const int64_t per = MAXLEN / ps, pages = B * per + 5;
    int32_t cu_q[B + 1], lens[B], *table = (int32_t *)malloc((size_t)(B * per) * 4);
    int64_t total_q, i;
    uint16_t *q, *kc, *vc;
    region rg[2];
    CUdeviceptr dq, dk, dv, dcu, dlens, dtable, ws;
    talon_prefill_attention_paged_args a;
    want_report w = {NULL, NULL, 0, 0, 0, NULL};
    int fails;
    cu_q[0] = 0;
    for (i = 0; i < B; i++) cu_q[i + 1] = cu_q[i] + qlen[i];
    total_q = cu_q[B];
    for (i = 0; i < B; i++) lens[i] = klen[i];
    for (i = 0; i < B * per; i++) table[i] = (int32_t)((i * 7 + 3) % pages); /* distinct */
    if (lens_b >= 0) lens[lens_b] = lens_v;
    if (pt_b >= 0) table[pt_b * per + pt_i] = pt_v;
    q = random_16(TALON_DTYPE_BF16, (size_t)(total_q * HQ * D), 51, 1.0f);
    kc = random_16(TALON_DTYPE_BF16, (size_t)(pages * ps * HK * D), 52, 1.0f);
    vc = random_16(TALON_DTYPE_BF16, (size_t)(pages * ps * HK * D), 53, 1.0f);
    dq = gpu_alloc((size_t)(total_q * HQ * D * 2));
    dk = gpu_alloc((size_t)(pages * ps * HK * D * 2));
    dv = gpu_alloc((size_t)(pages * ps * HK * D * 2));
    dcu = gpu_alloc(sizeof cu_q); dlens = gpu_alloc(sizeof lens);
    dtable = gpu_alloc((size_t)(B * per) * 4); ws = gpu_alloc(16);
    upload(dq, q, (size_t)(total_q * HQ * D * 2));
    upload(dk, kc, (size_t)(pages * ps * HK * D * 2));
    upload(dv, vc, (size_t)(pages * ps * HK * D * 2));
    upload(dcu, cu_q, sizeof cu_q); upload(dlens, lens, sizeof lens);
    upload(dtable, table, (size_t)(B * per) * 4);
    rg[0] = region_new((size_t)(total_q * HQ * D * 2), GUARD, NULL);
    rg[1] = region_new((size_t)(total_q * HQ * 4), GUARD, NULL);
    memset(&a, 0, sizeof a);
    a.o = rg[0].p; a.lse = rg[1].p; a.q = dq; a.k_cache = dk; a.v_cache = dv;
    a.page_table = dtable; a.kv_lens = dlens; a.cu_seqlens_q = dcu; a.workspace = ws;
    a.workspace_bytes = 16; a.batch = B; a.total_q = total_q; a.max_seqlen_q = 64;
    a.max_kv_len = MAXLEN; a.num_pages = pages; a.page_size = ps; a.num_qo_heads = HQ;
    a.num_kv_heads = HK; a.head_dim = D; a.causal = 1;
    w.kernel = ps < 16 ? "talon_prefill_attention_gather_" : "talon_prefill_attention_pages_";
    if (lens_b >= 0) {
        w.op = "talon_prefill_attention_paged"; w.what = "kv_lens";
        w.index = lens_b; w.value = lens_v; w.bound = MAXLEN;
    }
    if (pt_b >= 0 && reading) {
        w.op = "talon_prefill_attention_paged"; w.what = "page_table";
        w.index = pt_b * per + pt_i; w.value = pt_v; w.bound = pages;
    }
    /* without checking a bad page reads zeros and a bad kv_lens is clamped: the same inputs */
    fails = run_pair(name, rg, 2, OP_prefill_attention_paged, &a, &a, &w, NULL, NULL);
    region_free(&rg[0]); region_free(&rg[1]);
    cu.cuMemFree(dq); cu.cuMemFree(dk); cu.cuMemFree(dv); cu.cuMemFree(dcu);
    cu.cuMemFree(dlens); cu.cuMemFree(dtable); cu.cuMemFree(ws);
    free(table); free(q); free(kc); free(vc);
    return fails;
}

static void test_prefill_paged(void **state) {
    int fails = 0, i;
    char name[160];
    (void)state;
    for (i = 0; i < 2; i++) { /* pages of 16: a TMA box per page; of 8: rows gathered */
        const int64_t ps = i ? 8 : 16;
        const char *path = i ? "gather" : "TMA pages";
        snprintf(name, sizeof name, "prefill paged %s valid", path);
        fails += paged_case(name, ps, -1, 0, -1, 0, 0, 0);
        snprintf(name, sizeof name, "prefill paged %s kv_lens -1", path);
        fails += paged_case(name, ps, 0, -1, -1, 0, 0, 0);
        snprintf(name, sizeof name, "prefill paged %s kv_lens 321 > max", path);
        fails += paged_case(name, ps, 2, 321, -1, 0, 0, 0);
        snprintf(name, sizeof name, "prefill paged %s page = num_pages", path);
        fails += paged_case(name, ps, -1, 0, 2, 7, (int32_t)(3 * (320 / ps) + 5), 1);
        snprintf(name, sizeof name, "prefill paged %s page -9", path);
        fails += paged_case(name, ps, -1, 0, 1, 0, -9, 1);
        snprintf(name, sizeof name, "prefill paged %s bad entry past kv_lens (unread)", path);
        fails += paged_case(name, ps, -1, 0, 1, 320 / ps - 1, -9, 0);
    }
    if (fails) fail_msg("%d prefill paged failures", fails);
}
#endif

/* prefill paged: 4 prompts of 2048 tokens, causal; pages of 16 (TMA) and of 8 (gather) */
static int prefill_attention_paged_bench(bench_case *cases) {
    enum { HQ = 32, HK = 8, D = 128 };
    static talon_prefill_attention_paged_args pf[2];
    int64_t t;
    int i;
    int nc = 0;
    for (i = 0; i < 2; i++) {
        const int64_t b = 4, l = 2048, ps = i ? 8 : 16, per = l / ps;
        const size_t cache = (size_t)(b * per) * (size_t)ps * HK * D * 2;
        int32_t *pt = (int32_t *)malloc((size_t)(b * per) * 4), lens[4], cq[5];
        CUdeviceptr dpt = gpu_alloc((size_t)(b * per) * 4), dl = gpu_alloc(sizeof lens), dcq = gpu_alloc(sizeof cq);
        for (t = 0; t < b * per; t++) pt[t] = (int32_t)((t * 7) % (b * per));
        for (t = 0; t < b; t++) lens[t] = (int32_t)l;
        for (t = 0; t <= b; t++) cq[t] = (int32_t)(t * l);
        upload(dpt, pt, (size_t)(b * per) * 4);
        upload(dl, lens, sizeof lens);
        upload(dcq, cq, sizeof cq);
        free(pt);
        memset(&pf[i], 0, sizeof pf[i]);
        pf[i].o = gpu_alloc((size_t)b * l * HQ * D * 2); pf[i].lse = 0;
        pf[i].q = bench_fill((size_t)b * l * HQ * D * 2, 7);
        pf[i].k_cache = bench_fill(cache, 8); pf[i].v_cache = bench_fill(cache, 9);
        pf[i].page_table = dpt; pf[i].kv_lens = dl; pf[i].cu_seqlens_q = dcq;
        pf[i].workspace = gpu_alloc(16); pf[i].workspace_bytes = 16; pf[i].batch = b;
        pf[i].total_q = b * l; pf[i].max_seqlen_q = l; pf[i].max_kv_len = l;
        pf[i].num_pages = b * per; pf[i].page_size = ps; pf[i].num_qo_heads = HQ;
        pf[i].num_kv_heads = HK; pf[i].head_dim = D; pf[i].causal = 1;
        cases[nc].name = i ? "prefill paged 4 x 2048 causal, pages of 8" : "prefill paged 4 x 2048 causal, pages of 16";
        cases[nc].op = OP_prefill_attention_paged; cases[nc++].args = &pf[i];
    }
    return nc;
}
#endif
