/* The decode family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_DECODE_H
#define TALON_TESTS_CASES_DECODE_H

#define DECODE_TEST_OPS(X) X(decode_attention, decode) X(merge_attention_states, merge)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define DECODE_BENCH_STRUCTS(S, F) \
    S(talon_decode_attention_args, \
      F(o, PTR) F(lse, PTR) F(q, PTR) F(k_cache, PTR) F(v_cache, PTR) F(page_table, PTR) \
      F(kv_lens, PTR) F(workspace, PTR) F(workspace_bytes, I64) F(batch, I64) \
      F(num_qo_heads, I64) F(num_kv_heads, I64) F(head_dim, I64) F(page_size, I64) \
      F(num_pages, I64) F(page_table_stride, I64) F(max_kv_len, I64) F(window, I64) \
      F(num_splits, I64) \
      F(sm_scale, F32) F(logits_soft_cap, F32) F(k_scale, F32) F(v_scale, F32) \
      F(dtype, ENUM) F(kv_dtype, ENUM) F(layout, ENUM)) \
    S(talon_merge_attention_states_args, \
      F(o, PTR) F(lse, PTR) F(o_a, PTR) F(lse_a, PTR) F(o_b, PTR) F(lse_b, PTR) \
      F(rows, I64) F(head_dim, I64) F(dtype, ENUM))

#define DECODE_CHECKED_OPS(X) X(decode_attention, talon__decode_params, test_decode_attention)
#define DECODE_WORKSPACE_OPS(X) X(decode_attention, decode)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void decode_attention_valid_args(talon_decode_attention_args *a) {
    a->o = 1 * GB; a->q = 2 * GB; a->k_cache = 3 * GB;
    a->v_cache = 4 * GB; a->page_table = 5 * GB; a->kv_lens = 6 * GB;
    a->workspace = 7 * GB; a->workspace_bytes = 1 << 30; a->batch = 1;
    a->num_qo_heads = 32; a->num_kv_heads = 8; a->head_dim = 128;
    a->page_size = 16; a->max_kv_len = 32768;
}

static void merge_attention_states_valid_args(talon_merge_attention_states_args *a) {
    a->o = 1 * GB; a->lse = 2 * GB; a->o_a = 3 * GB;
    a->lse_a = 4 * GB; a->o_b = 5 * GB; a->lse_b = 6 * GB;
    a->rows = 64; a->head_dim = 128;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
typedef struct {
    int64_t hq, hk, d, ps, max_kv_len, window, splits, pt_pad;
    int batch, fp8, hnd, no_lse;
    float cap, sm_scale, qamp, k_scale, v_scale;
    int lens[OC_MAXB];
} dec_params;
typedef struct { int64_t rows, d; int with_lse; } merge_params;
#define DECODE_OC_PARAMS dec_params dec; merge_params merge;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
#include "ref_attn.h"

/* decode: the page table's row stride and the caches' pages */
static void dec_geometry(const oc_case *c, int64_t *stride, int64_t *pages) {
    int b;
    *stride = (c->p.dec.max_kv_len + c->p.dec.ps - 1) / c->p.dec.ps + c->p.dec.pt_pad;
    *pages = 3; /* never referenced */
    for (b = 0; b < c->p.dec.batch; b++) *pages += (c->p.dec.lens[b] + c->p.dec.ps - 1) / c->p.dec.ps;
}

static void dec_random(oc_case *c, uint64_t *s, int big) {
    static const int64_t splits[] = {1, 2, 3, 7, 64, 256};
    const int h = (int)oc_ri(s, 0, OC_COUNT(oc_heads) - 1);
    const double max_work = big ? 4e8 : 2.5e7; /* batch x hq x keys x d */
    int64_t longest, b;
    c->p.dec.fp8 = oc_chance(s, 25);
    c->p.dec.hnd = oc_chance(s, 50);
    c->p.dec.d = (int64_t)64 << oc_ri(s, 0, 2);
    c->p.dec.hq = oc_heads[h][0];
    c->p.dec.hk = oc_heads[h][1];
    c->p.dec.ps = (int64_t)1 << oc_ri(s, 0, 8);
    c->p.dec.batch = (int)oc_ri(s, 1, big ? OC_MAXB : 4);
    longest = oc_len(s, 1, big ? 4096 : 1024);
    while (longest > 1 && ((double)(c->p.dec.batch * c->p.dec.hq * c->p.dec.d) * (double)longest > max_work ||
                           c->p.dec.batch * longest * c->p.dec.hk * c->p.dec.d > (big ? 8000000 : 1000000)))
        longest = (longest + 1) / 2;
    c->p.dec.max_kv_len = 1;
    for (b = 0; b < c->p.dec.batch; b++) {
        const int64_t r = oc_ri(s, 0, 9);
        c->p.dec.lens[b] = (int)(r == 0 ? 0 : r == 1 ? longest : oc_ri(s, 1, longest));
        if (c->p.dec.lens[b] > c->p.dec.max_kv_len) c->p.dec.max_kv_len = c->p.dec.lens[b];
    }
    if (oc_chance(s, 20)) c->p.dec.max_kv_len += oc_ri(s, 1, 100); /* a looser bound */
    c->p.dec.window = oc_chance(s, 25) ? oc_len(s, 1, longest) : 0;
    c->p.dec.cap = oc_chance(s, 25) ? (oc_chance(s, 50) ? 5.0f : 30.0f) : 0.0f;
    c->p.dec.qamp = c->p.dec.cap > 0 ? 4.0f : 1.0f;
    c->p.dec.splits = oc_chance(s, 25) ? splits[oc_ri(s, 0, OC_COUNT(splits) - 1)] : 0;
    c->p.dec.pt_pad = oc_chance(s, 25) ? 3 : 0;
    c->p.dec.no_lse = oc_chance(s, 20);
    c->p.dec.sm_scale = oc_chance(s, 20) ? 0.3f : 0.0f;
    c->p.dec.k_scale = c->p.dec.fp8 ? 0.3f + 2.0f * ref_unit01(s) : 1.0f;
    c->p.dec.v_scale = c->p.dec.fp8 ? 0.3f + 2.0f * ref_unit01(s) : 1.0f;
}

static int dec_describe(const oc_case *c, char *buf, size_t n, const char *name,
                        const char *dt, unsigned long long seed) {
    int k = snprintf(buf, n, "%s %s%s D %lld Hq %lld Hk %lld page %lld %s max_kv_len %lld "
                     "window %lld cap %g splits %lld pt_pad %lld%s sm_scale %g lens {",
                     name, dt, c->p.dec.fp8 ? " kv e4m3" : "", (long long)c->p.dec.d,
                     (long long)c->p.dec.hq, (long long)c->p.dec.hk, (long long)c->p.dec.ps,
                     c->p.dec.hnd ? "HND" : "NHD", (long long)c->p.dec.max_kv_len,
                     (long long)c->p.dec.window, (double)c->p.dec.cap,
                     (long long)c->p.dec.splits, (long long)c->p.dec.pt_pad,
                     c->p.dec.no_lse ? " no-lse" : "", (double)c->p.dec.sm_scale);
    int b;
    for (b = 0; b < c->p.dec.batch && k > 0 && (size_t)k < n; b++)
        k += snprintf(buf + k, n - (size_t)k, "%s%d", b ? "," : "", c->p.dec.lens[b]);
    if (k > 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, "} seed %llx", seed);
    return k;
}

static void dec_args_shape(const oc_case *c, talon_decode_attention_args *a) {
    memset(a, 0, sizeof *a);
    a->batch = c->p.dec.batch;
    a->num_qo_heads = c->p.dec.hq;
    a->num_kv_heads = c->p.dec.hk;
    a->head_dim = c->p.dec.d;
    a->page_size = c->p.dec.ps;
    a->max_kv_len = c->p.dec.max_kv_len;
    a->page_table_stride = c->p.dec.pt_pad ? (c->p.dec.max_kv_len + c->p.dec.ps - 1) / c->p.dec.ps +
                                                 c->p.dec.pt_pad : 0;
    a->window = c->p.dec.window;
    a->num_splits = c->p.dec.splits;
    a->sm_scale = c->p.dec.sm_scale;
    a->logits_soft_cap = c->p.dec.cap;
    a->k_scale = c->p.dec.k_scale;
    a->v_scale = c->p.dec.v_scale;
    a->dtype = c->dt;
    a->kv_dtype = c->p.dec.fp8 ? TALON_DTYPE_FP8_E4M3 : c->dt;
    a->layout = c->p.dec.hnd ? TALON_KV_HND : TALON_KV_NHD;
}

static int dec_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int es = c->p.dec.fp8 ? 1 : 2;
    const int64_t rows = c->p.dec.batch * c->p.dec.hq, d = c->p.dec.d, ps = c->p.dec.ps;
    talon_decode_attention_args a;
    int64_t stride, pages, cache, ws = 0, i, *perm, n = 0;
    uint64_t s = c->seed;
    int b;
    dec_geometry(c, &stride, &pages);
    cache = pages * ps * c->p.dec.hk * d;
    dec_args_shape(c, &a);
    if (talon_decode_attention_workspace_size(ctx, &a, &ws) != TALON_SUCCESS) return -1;
    if (oc_add(j, "q", OC_IN, 2, rows * d, 0) != 0 || oc_add(j, "k_cache", OC_IN, es, cache, 0) != 1 ||
        oc_add(j, "v_cache", OC_IN, es, cache, 0) != 2 ||
        oc_add(j, "page_table", OC_IN, 4, c->p.dec.batch * stride, 0) != 3 ||
        oc_add(j, "kv_lens", OC_IN, 4, c->p.dec.batch, 0) != 4 ||
        oc_add(j, "o", OC_OUT, 2, rows * d, 0) != 5 || oc_add(j, "lse", OC_OUT, 4, rows, 0) != 6 ||
        oc_add(j, "workspace", OC_WS, 1, ws, 0) != 7)
        return -1;
    oc_fill16(j, 0, 0, rows * d, c->p.dec.qamp, &s);
    for (i = 0; i < cache; i++) {
        if (es == 1) { /* fp8: wider values, one in 64 past 448 (saturates) */
            float xk = 8.0f * oc_u(&s), xv = 8.0f * oc_u(&s);
            if ((ref_next64(&s) & 63) == 0) xk = xk > 0 ? 600.0f : -500.0f;
            oc_img(j, 1)[i] = ref_e4m3_from_f32(xk);
            oc_img(j, 2)[i] = ref_e4m3_from_f32(xv);
        } else {
            oc_set16(oc_img(j, 1), i, oc_bits(c->dt, oc_u(&s)));
            oc_set16(oc_img(j, 2), i, oc_bits(c->dt, oc_u(&s)));
        }
    }
    /* each request's pages: a random permutation of the cache's; entries past them point far
       outside the cache (never read) */
    if (!(perm = (int64_t *)malloc((size_t)pages * sizeof(int64_t)))) return -1;
    for (i = 0; i < pages; i++) perm[i] = i;
    for (i = pages - 1; i > 0; i--) {
        const int64_t k = (int64_t)(ref_next64(&s) % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[k];
        perm[k] = x;
    }
    for (i = 0; i < c->p.dec.batch * stride; i++) oc_seti(oc_img(j, 3), i, 0x3fffffff);
    for (b = 0; b < c->p.dec.batch; b++) {
        for (i = 0; i < (c->p.dec.lens[b] + ps - 1) / ps; i++)
            oc_seti(oc_img(j, 3), b * stride + i, (int32_t)perm[n++]);
        oc_seti(oc_img(j, 4), b, c->p.dec.lens[b]);
    }
    free(perm);
    return 0;
}

static void dec_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    dec_args_shape(c, &a->decode);
    a->decode.o = P(5); a->decode.lse = c->p.dec.no_lse ? 0 : P(6); a->decode.q = P(0);
    a->decode.k_cache = P(1); a->decode.v_cache = P(2); a->decode.page_table = P(3);
    a->decode.kv_lens = P(4); a->decode.workspace = P(7);
    a->decode.workspace_bytes = (int64_t)j->b[7].used;
}

static void dec_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t hq = c->p.dec.hq, d = c->p.dec.d, rows = c->p.dec.batch * hq, group = hq / c->p.dec.hk;
    const double rtol = ref_rtol(c->dt), atol = ref_atol(c->dt);
    const double scale = c->p.dec.sm_scale != 0 ? c->p.dec.sm_scale : 1.0 / sqrt((double)d);
    const double ks = c->p.dec.fp8 ? c->p.dec.k_scale : 1.0, vs = c->p.dec.fp8 ? c->p.dec.v_scale : 1.0;
    int64_t stride, pages, row, i, t;
    float *kv = NULL, *vv = NULL;
    const float **kp = NULL, **vp = NULL;
    double *q = NULL, *o, *mag, work = 0;
    int b;
    dec_geometry(c, &stride, &pages);
    for (b = 0; b < c->p.dec.batch; b++) work += (double)c->p.dec.lens[b] * (double)(hq * d);
    kv = oc_cache_values(j, 1, c->p.dec.fp8);
    vv = oc_cache_values(j, 2, c->p.dec.fp8);
    kp = (const float **)malloc(sizeof(float *) * (size_t)(c->p.dec.max_kv_len + 1) * 2);
    q = (double *)malloc((size_t)d * 3 * sizeof(double));
    if (!kv || !vv || !kp || !q) { oc_fail(st, "out of host memory"); goto done; }
    vp = kp + c->p.dec.max_kv_len + 1;
    o = q + d;
    mag = o + d;
    {
        const int64_t step = oc_step(work, budget);
        for (row = 0; row < rows; row++) {
            const int64_t bb = row / hq, h = row % hq, kvh = h / group, len = c->p.dec.lens[bb];
            const int64_t lo = c->p.dec.window > 0 && len > c->p.dec.window ? len - c->p.dec.window : 0;
            const uint8_t *orow = img[5];
            double lse, smax;
            if (row % step && row != rows - 1) {
                oc_check_written(st, "o", orow, row * d, d, c->dt);
                if (!c->p.dec.no_lse && isnan(oc_getf(img[6], row)))
                    oc_fail(st, "lse[%lld] is NaN (not written?)", (long long)row);
                continue;
            }
            for (i = 0; i < d; i++) q[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), row * d + i));
            for (t = lo; t < len; t++) {
                const int64_t page = oc_geti(oc_img(j, 3), bb * stride + t / c->p.dec.ps);
                const int64_t at = oc_cache_at(c->p.dec.hnd, c->p.dec.ps, c->p.dec.hk, d, page,
                                               t % c->p.dec.ps, kvh);
                kp[t - lo] = kv + at;
                vp[t - lo] = vv + at;
            }
            lse = ref_attn_decode(q, kp, vp, len - lo, d, scale, c->p.dec.cap, ks, vs, o, mag, &smax);
            for (i = 0; i < d; i++) /* 2^-14 mag: what fp32 evaluation may cancel */
                oc_cmp(st, "o", row, i, REF_TO_F32(c->dt, oc_get16(orow, row * d + i)), o[i],
                       rtol * fabs(o[i]) + atol + 0x1p-14 * mag[i]);
            if (!c->p.dec.no_lse) {
                const double got = oc_getf(img[6], row);
                if (lse == -INFINITY) {
                    st->elements++;
                    if (got != -INFINITY) oc_fail(st, "lse[%lld] = %g, reference -inf", (long long)row, got);
                } else {
                    oc_cmp(st, "lse", row, 0, got, lse, 0x1p-16 * (1 + fabs(lse) + smax));
                }
            }
        }
    }
    if (c->p.dec.no_lse) oc_check_poison(st, j, 6, img[6]);
done:
    free(kv); free(vv); free(kp); free(q);
}

static void merge_random(oc_case *c, uint64_t *s, int big) {
    c->p.merge.rows = oc_len(s, 1, big ? 4096 : 600);
    c->p.merge.d = 8 * (big ? oc_len(s, 1, 512) : oc_ri(s, 1, 64));
    c->p.merge.with_lse = oc_chance(s, 70);
}

static int merge_describe(const oc_case *c, char *buf, size_t n, const char *name,
                          const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s rows %lld head_dim %lld%s seed %llx", name, dt,
                    (long long)c->p.merge.rows, (long long)c->p.merge.d,
                    c->p.merge.with_lse ? "" : " no-lse", seed);
}

static int merge_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.merge.rows, d = c->p.merge.d;
    uint64_t s = c->seed;
    int64_t r;
    (void)ctx;
    if (oc_add(j, "o_a", OC_IN, 2, rows * d, 0) != 0 || oc_add(j, "lse_a", OC_IN, 4, rows, 0) != 1 ||
        oc_add(j, "o_b", OC_IN, 2, rows * d, 0) != 2 || oc_add(j, "lse_b", OC_IN, 4, rows, 0) != 3 ||
        oc_add(j, "o", OC_OUT, 2, rows * d, 0) != 4 || oc_add(j, "lse", OC_OUT, 4, rows, 0) != 5)
        return -1;
    oc_fill16(j, 0, 0, rows * d, 1.0f, &s);
    oc_fill16(j, 2, 0, rows * d, 1.0f, &s);
    for (r = 0; r < rows; r++) {
        float la = 5.0f * oc_u(&s), lb = 5.0f * oc_u(&s);
        if (r % 5 == 1) la = -INFINITY;
        if (r % 5 == 2) lb = -INFINITY;
        if (r % 5 == 3) la = lb = -INFINITY;
        if (r % 7 == 4) { la = 90.0f; lb = 88.5f; } /* exp would overflow fp32 */
        oc_setf(oc_img(j, 1), r, la);
        oc_setf(oc_img(j, 3), r, lb);
    }
    return 0;
}

static void merge_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->merge.o = P(4); a->merge.lse = c->p.merge.with_lse ? P(5) : 0;
    a->merge.o_a = P(0); a->merge.lse_a = P(1); a->merge.o_b = P(2); a->merge.lse_b = P(3);
    a->merge.rows = c->p.merge.rows; a->merge.head_dim = c->p.merge.d; a->merge.dtype = c->dt;
}

static void merge_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.merge.rows, d = c->p.merge.d;
    const double rtol = ref_rtol(c->dt), atol = ref_atol(c->dt);
    double *va = (double *)malloc((size_t)d * 3 * sizeof(double)), *vb = va + d, *ro = vb + d;
    int64_t r, i;
    (void)budget;
    if (!va) { oc_fail(st, "out of host memory"); return; }
    for (r = 0; r < rows; r++) {
        const double la = oc_getf(oc_img(j, 1), r), lb = oc_getf(oc_img(j, 3), r);
        const double m = la > lb ? la : lb;
        const double wa = m == -INFINITY ? 0 : exp(la - m), wb = m == -INFINITY ? 0 : exp(lb - m);
        double lse;
        for (i = 0; i < d; i++) {
            va[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * d + i));
            vb[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 2), r * d + i));
        }
        lse = ref_attn_merge(va, la, vb, lb, d, ro);
        for (i = 0; i < d; i++) {
            const double mag = wa + wb > 0 ? (wa * fabs(va[i]) + wb * fabs(vb[i])) / (wa + wb) : 0;
            oc_cmp(st, "o", r, i, REF_TO_F32(c->dt, oc_get16(img[4], r * d + i)), ro[i],
                   rtol * fabs(ro[i]) + atol + 0x1p-14 * mag);
        }
        if (c->p.merge.with_lse) {
            const double got = oc_getf(img[5], r);
            if (lse == -INFINITY) {
                st->elements++;
                if (got != -INFINITY) oc_fail(st, "lse[%lld] = %g, reference -inf", (long long)r, got);
            } else {
                oc_cmp(st, "lse", r, 0, got, lse, 0x1p-16 * (1 + fabs(lse)));
            }
        }
    }
    if (!c->p.merge.with_lse) oc_check_poison(st, j, 5, img[5]);
    free(va);
}

static const oc_op decode_attention_oc = {dec_random, dec_build, dec_args,
                                          dec_check, dec_describe, NULL};
static const oc_op merge_attention_states_oc = {merge_random, merge_build, merge_args,
                                                merge_check, merge_describe, NULL};
#endif

#ifdef CHECKED_FAMILY_CASES /* test_gpu_checked.c */
#ifndef CHECKED_BASELINE
typedef struct decode_setup {
    int64_t batch, hq, hk, d, ps, max_len, pages, pt_stride;
    int fp8;
    int32_t *lens, *table;
    CUdeviceptr k, v, dlens, dtable, ws, dlens_bad, dtable_bad;
    int64_t ws_bytes;
    region rg[2]; /* o, lse */
} decode_setup;

static void decode_args(const decode_setup *ds, talon_decode_attention_args *a, int64_t splits,
                        int declare) {
    memset(a, 0, sizeof *a);
    a->o = ds->rg[0].p; a->lse = ds->rg[1].p; /* q and the workspace: the caller's */
    a->k_cache = ds->k; a->v_cache = ds->v; a->page_table = ds->dtable; a->kv_lens = ds->dlens;
    a->batch = ds->batch; a->num_qo_heads = ds->hq; a->num_kv_heads = ds->hk;
    a->head_dim = ds->d; a->page_size = ds->ps; a->page_table_stride = ds->pt_stride;
    a->max_kv_len = ds->max_len; a->num_splits = splits;
    a->kv_dtype = ds->fp8 ? TALON_DTYPE_FP8_E4M3 : TALON_DTYPE_BF16;
    a->k_scale = a->v_scale = 0.5f;
    a->num_pages = declare ? ds->pages : 0;
}

/* Caches of `pages` pages (exact allocations: a read past them is memcheck's), a page table
   of distinct random pages, the lengths. */
static void decode_setup_make(decode_setup *ds, int64_t batch, int64_t hq, int64_t hk, int64_t d,
                              int64_t ps, int64_t max_len, int fp8, const int32_t *lens) {
    const int64_t per = (max_len + ps - 1) / ps;
    const size_t cache = (size_t)(batch * per + 3) * (size_t)(ps * hk * d) * (fp8 ? 1 : 2);
    uint64_t s = ref_mix64(41);
    int64_t i, n;
    int32_t *perm;
    memset(ds, 0, sizeof *ds);
    ds->batch = batch; ds->hq = hq; ds->hk = hk; ds->d = d; ds->ps = ps; ds->max_len = max_len;
    ds->fp8 = fp8; ds->pt_stride = per; ds->pages = batch * per + 3;
    n = ds->pages;
    perm = (int32_t *)malloc((size_t)n * 4);
    for (i = 0; i < n; i++) perm[i] = (int32_t)i;
    for (i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)(ref_next64(&s) % (uint64_t)(i + 1));
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    ds->table = (int32_t *)malloc((size_t)(batch * per) * 4);
    memcpy(ds->table, perm, (size_t)(batch * per) * 4);
    free(perm);
    ds->lens = (int32_t *)malloc((size_t)batch * 4);
    memcpy(ds->lens, lens, (size_t)batch * 4);
    ds->k = gpu_alloc(cache);
    ds->v = gpu_alloc(cache);
    if (fp8) {
        unsigned char *h = (unsigned char *)malloc(cache);
        size_t b;
        for (b = 0; b < cache; b++) h[b] = ref_e4m3_from_f32(4.0f * (2.0f * ref_unit01(&s) - 1.0f));
        upload(ds->k, h, cache);
        for (b = 0; b < cache; b++) h[b] = ref_e4m3_from_f32(4.0f * (2.0f * ref_unit01(&s) - 1.0f));
        upload(ds->v, h, cache);
        free(h);
    } else {
        uint16_t *h = random_16(TALON_DTYPE_BF16, cache / 2, 42, 1.0f);
        upload(ds->k, h, cache);
        free(h);
        h = random_16(TALON_DTYPE_BF16, cache / 2, 43, 1.0f);
        upload(ds->v, h, cache);
        free(h);
    }
    ds->dlens = gpu_alloc((size_t)batch * 4);
    ds->dlens_bad = gpu_alloc((size_t)batch * 4);
    ds->dtable = gpu_alloc((size_t)(batch * per) * 4);
    ds->dtable_bad = gpu_alloc((size_t)(batch * per) * 4);
    upload(ds->dlens, ds->lens, (size_t)batch * 4);
    upload(ds->dtable, ds->table, (size_t)(batch * per) * 4);
    ds->rg[0] = region_new((size_t)(batch * hq * d * 2), GUARD, NULL);
    ds->rg[1] = region_new((size_t)(batch * hq * 4), GUARD, NULL);
    ds->ws_bytes = 1 << 24;
    ds->ws = gpu_alloc((size_t)ds->ws_bytes);
}

static void decode_setup_free(decode_setup *ds) {
    region_free(&ds->rg[0]); region_free(&ds->rg[1]);
    cu.cuMemFree(ds->k); cu.cuMemFree(ds->v); cu.cuMemFree(ds->dlens); cu.cuMemFree(ds->dlens_bad);
    cu.cuMemFree(ds->dtable); cu.cuMemFree(ds->dtable_bad); cu.cuMemFree(ds->ws);
    free(ds->lens); free(ds->table);
    memset(ds, 0, sizeof *ds);
}

/* The checked run may differ in request `b`'s rows only, and those must be NaN. */
typedef struct nan_rows { int64_t b, hq, d; } nan_rows;
static int decode_nan_allowed(const void *ctx, int i, size_t off, const unsigned char *got) {
    const nan_rows *n = (const nan_rows *)ctx;
    if (n->b < 0) return 0;
    if (i == 0) { /* o: bf16 [batch, hq, d] */
        const size_t row = off / (size_t)(n->hq * n->d * 2);
        uint16_t x;
        if ((int64_t)row != n->b) return 0;
        memcpy(&x, got + (off & ~(size_t)1), 2);
        return (x & 0x7f80) == 0x7f80 && (x & 0x7f) != 0;
    } else { /* lse: fp32 [batch, hq] */
        const size_t row = off / (size_t)(n->hq * 4);
        float x;
        if ((int64_t)row != n->b) return 0;
        memcpy(&x, got + (off & ~(size_t)3), 4);
        return isnan(x);
    }
}

/* One decode case: the checked run with kv_lens[lens_b] = lens_v (lens_b >= 0) or page-table
   entry pt_at = pt_v (pt_at >= 0); reading == whether the kernel reads that entry. */
static int decode_case(const char *name, decode_setup *ds, int64_t splits, int declare,
                       int64_t lens_b, int32_t lens_v, int64_t pt_at, int32_t pt_v, int reading) {
    talon_decode_attention_args ref, chk;
    want_report w = {NULL, NULL, 0, 0, 0, NULL};
    nan_rows nr = {-1, ds->hq, ds->d};
    uint16_t *q = random_16(TALON_DTYPE_BF16, (size_t)(ds->batch * ds->hq * ds->d), 44, 1.0f);
    CUdeviceptr dq = gpu_alloc((size_t)(ds->batch * ds->hq * ds->d * 2));
    int32_t *lens = (int32_t *)malloc((size_t)ds->batch * 4);
    int32_t *table = (int32_t *)malloc((size_t)(ds->batch * ds->pt_stride) * 4);
    int fails;
    upload(dq, q, (size_t)(ds->batch * ds->hq * ds->d * 2));
    memcpy(lens, ds->lens, (size_t)ds->batch * 4);
    memcpy(table, ds->table, (size_t)(ds->batch * ds->pt_stride) * 4);
    if (lens_b >= 0) lens[lens_b] = lens_v;
    if (pt_at >= 0) table[pt_at] = pt_v;
    upload(ds->dlens_bad, lens, (size_t)ds->batch * 4);
    upload(ds->dtable_bad, table, (size_t)(ds->batch * ds->pt_stride) * 4);
    decode_args(ds, &ref, splits, declare);
    ref.q = dq; ref.workspace = ds->ws; ref.workspace_bytes = ds->ws_bytes;
    chk = ref;
    chk.kv_lens = ds->dlens_bad;
    chk.page_table = ds->dtable_bad;
    if (lens_b >= 0) { /* clamping is documented without checking: the same inputs */
        ref.kv_lens = ds->dlens_bad;
        w.op = "talon_decode_attention"; w.what = "kv_lens";
        w.index = lens_b; w.value = lens_v; w.bound = ds->max_len;
    }
    if (pt_at >= 0 && reading) { /* unchecked, the bad page would be read: the valid table */
        w.op = "talon_decode_attention"; w.what = "page_table";
        w.index = pt_at; w.value = pt_v; w.bound = declare ? ds->pages : 2147483648LL;
        nr.b = pt_at / ds->pt_stride;
    }
    if (pt_at >= 0 && !reading) ref.page_table = ds->dtable_bad; /* never read: same inputs */
    fails = run_pair(name, ds->rg, 2, OP_decode_attention, &ref, &chk, &w, decode_nan_allowed, &nr);
    if (nr.b >= 0) { /* the request's rows must be NaN (not merely allowed to be) */
        unsigned char *o = region_read(&ds->rg[0]);
        int64_t e;
        for (e = 0; e < ds->hq * ds->d; e++) {
            uint16_t x;
            memcpy(&x, o + ds->rg[0].guard + (size_t)((nr.b * ds->hq * ds->d + e) * 2), 2);
            if (!((x & 0x7f80) == 0x7f80 && (x & 0x7f))) {
                print_error("%s: o[%lld, %lld] = 0x%04x, not NaN\n", name, (long long)nr.b,
                            (long long)e, x);
                fails++;
                break;
            }
        }
        free(o);
    }
    cu.cuMemFree(dq);
    free(q); free(lens); free(table);
    return fails;
}

static void test_decode_attention(void **state) {
    static const int32_t lens[4] = {256, 100, 37, 200};
    /* (hq, hk, fp8): the per-lane kernel (one head per CTA), the tensor-core one (4), fp8 */
    static const int64_t shapes[3][3] = {{8, 8, 0}, {32, 8, 0}, {16, 8, 1}};
    decode_setup ds;
    int fails = 0, i;
    char name[160];
    (void)state;
    for (i = 0; i < 3; i++) {
        const char *kind = i == 0 ? "per-lane" : i == 1 ? "tensor-core" : "fp8";
        int64_t splits;
        decode_setup_make(&ds, 4, shapes[i][0], shapes[i][1], 128, 16, 256, (int)shapes[i][2], lens);
        for (splits = 1; splits <= 3; splits += 2) {
            const int64_t st = ds.pt_stride;
            snprintf(name, sizeof name, "decode %s, %lld split(s), valid", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, -1, 0, -1, 0, 0);
            snprintf(name, sizeof name, "decode %s, %lld split(s), kv_lens 300 > max", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, 2, 300, -1, 0, 0);
            snprintf(name, sizeof name, "decode %s, %lld split(s), kv_lens -4", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, 1, -4, -1, 0, 0);
            snprintf(name, sizeof name, "decode %s, %lld split(s), page = num_pages", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, -1, 0, 1 * st + 3, (int32_t)ds.pages, 1);
            snprintf(name, sizeof name, "decode %s, %lld split(s), page 2^30", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, -1, 0, 3 * st + 12, 1 << 30, 1);
            snprintf(name, sizeof name, "decode %s, %lld split(s), page -1, num_pages undeclared", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 0, -1, 0, 0 * st + 15, -1, 1);
            snprintf(name, sizeof name, "decode %s, %lld split(s), bad entry past kv_lens (unread)", kind, (long long)splits);
            fails += decode_case(name, &ds, splits, 1, -1, 0, 2 * st + 10, -1, 0);
        }
        decode_setup_free(&ds);
    }
    if (fails) fail_msg("%d decode failures", fails);
}
#endif

/* decode: 64 requests of 4096 keys; tensor-core bf16, fp8, and the per-lane kernel */
static int decode_attention_bench(bench_case *cases) {
    enum { HQ = 32, HK = 8, D = 128, PS = 16 };
    static talon_decode_attention_args dec[3];
    int64_t t;
    int i;
    int nc = 0;
    for (i = 0; i < 3; i++) {
        static const char *const names[3] = {"decode B64 L4096 32/8 bf16 (tensor cores)",
                                             "decode B64 L4096 32/8 fp8 cache",
                                             "decode B64 L4096 32/32 bf16 (per-lane)"};
        const int64_t b = 64, l = 4096, per = l / PS, hk = i == 2 ? 32 : HK, fp8 = i == 1;
        const size_t cache = (size_t)(b * per) * PS * (size_t)hk * D * (fp8 ? 1 : 2);
        int32_t *pt = (int32_t *)malloc((size_t)(b * per) * 4), lens[64];
        int64_t ws = 0;
        CUdeviceptr dpt = gpu_alloc((size_t)(b * per) * 4), dl = gpu_alloc(sizeof lens);
        for (t = 0; t < b * per; t++) pt[t] = (int32_t)((t * 7) % (b * per));
        for (t = 0; t < b; t++) lens[t] = (int32_t)l;
        upload(dpt, pt, (size_t)(b * per) * 4);
        upload(dl, lens, sizeof lens);
        free(pt);
        memset(&dec[i], 0, sizeof dec[i]);
        dec[i].o = gpu_alloc((size_t)b * HQ * D * 2); dec[i].lse = gpu_alloc((size_t)b * HQ * 4);
        dec[i].q = bench_fill((size_t)b * HQ * D * 2, 6);
        dec[i].k_cache = gpu_alloc(cache); dec[i].v_cache = gpu_alloc(cache);
        GPU_CK(cu.cuMemsetD8(dec[i].k_cache, 0x22, cache));
        GPU_CK(cu.cuMemsetD8(dec[i].v_cache, 0x22, cache));
        dec[i].page_table = dpt; dec[i].kv_lens = dl; dec[i].batch = b; dec[i].num_qo_heads = HQ;
        dec[i].num_kv_heads = hk; dec[i].head_dim = D; dec[i].page_size = PS;
        dec[i].max_kv_len = l; dec[i].kv_dtype = fp8 ? TALON_DTYPE_FP8_E4M3 : TALON_DTYPE_BF16;
        dec[i].k_scale = dec[i].v_scale = 1.0f;
#ifndef CHECKED_BASELINE
        dec[i].num_pages = b * per;
#endif
        if (talon_decode_attention_workspace_size(g.ctx, &dec[i], &ws) != TALON_SUCCESS) return -1;
        dec[i].workspace = gpu_alloc((size_t)(ws ? ws : 16));
        dec[i].workspace_bytes = ws;
        cases[nc].name = names[i]; cases[nc].op = OP_decode_attention; cases[nc++].args = &dec[i];
    }
    return nc;
}
#endif
