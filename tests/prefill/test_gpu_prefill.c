/* GPU tests (H100/H200) of talon_prefill_attention and talon_prefill_attention_paged against
   the fp64 reference of
   tests/decode/ref_attn.h (one query row against its attended keys), every output element
   (o and lse) written and checked after poisoning o and lse with 0xFF bytes (NaN).

   A case draws q, k and v at random (reproducibly from its seed) in [-1, 1) (q times qamp),
   rounded to bf16/f16; the reference reads exactly those values. Token strides may be padded:
   q/k/v padding holds random values the kernel must not read into results, o padding must
   stay poisoned. Rows of requests long enough to make the fp64 reference slow are sampled
   (every `sample`-th query row is compared; every row is still checked to be written and
   finite).
   Tolerances, per element:
     o:   |dev - ref| <= rtol |ref| + atol + ptol mag, rtol 2^-7 (bf16) / 2^-10 (f16) (one unit
          in the last place), atol 1e-5 / 1e-6, mag = sum_j p_j |v_j| and ptol 2^-8 / 2^-10:
          the weights enter P v rounded to the input type (half a unit: 2^-9 / 2^-12 of each
          weight), twice that bound;
     lse: |dev - ref| <= 2^-16 (1 + |ref| + max_j |s_j|); -inf exactly where the ref is -inf.
   Paged cases hold the same k and v in a cache of shuffled pages (a few more than needed, NHD
   or HND), every slot that holds no key of a request filled with NaN: the kernel must neither
   read unused pages nor let the NaN of a last page's empty slots reach o. Page-table entries
   past a request's pages are -1 (never read).
   FP8 cases (talon_prefill_attention only): q, k and v drawn as above, quantised to e4m3 with
   per-tensor scales (real value = e4m3 value x scale, what the reference reads), o bf16:
     o:   |dev - ref| <= 2^-7 |ref| + 1e-5 + sum_j e_j |v_j| / sum_j p_j, with p_j = exp(s_j -
          max s) and e_j = max(2^-4 p_j, min(2^-10, p_j)) + p_j ds_j: the kernel's e4m3 rounding
          of each weight (relative 2^-4; absolute 2^-10 of the running max, which is at most
          the final one, in e4m3's subnormals), ds_j = 2^-12 sm_scale sum_i |q_i k_ji| for the
          fp8 tensor cores' accumulation of the score;
     lse: the tolerance above plus max_j ds_j.
   They include peaky rows (large q) where one wrong key order in P v is far outside it.
   Paged cases on fp8 caches (kv_dtype, q and o 16-bit) hold e4m3 x scale values, which the
   kernel widens exactly: the 16-bit tolerances above apply; empty slots hold the e4m3 NaN.
   TALON_TEST_QUICK=1 (compute-sanitizer) keeps every path with short requests. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpu.h"
#include "ref.h"
#include "../decode/ref_attn.h"
#include "talon.h"

#define MAXB 8
#define NTHREADS 8
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define DV(c) ((c)->d == 192 ? 128 : (c)->d) /* v's and o's head_dim */
#define FP8(c) ((c)->dtype == TALON_DTYPE_FP8_E4M3)
#define ES(c) (FP8(c) ? 1 : 2)                                   /* bytes of q, k, v */
#define KV8(c) (FP8(c) || (c)->kv8)                              /* k and v hold e4m3 */
#define ODT(c) (FP8(c) ? TALON_DTYPE_BF16 : (c)->dtype)         /* o's type */

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static long long g_cases, g_elements;

typedef struct pcase {
    talon_dtype dtype;
    int64_t d, hq, hk;
    int batch;
    int qlens[MAXB], klens[MAXB];
    int causal, window, no_lse;
    float cap, sm_scale, qamp;
    float qscale, kscale, vscale; /* fp8 only (kscale, vscale: and fp8 caches) */
    int kv8;       /* paged: fp8 e4m3 caches (kv_dtype), q and o dtype */
    int64_t pad;   /* extra elements in every token stride (q, k, v, o) */
    int sample;    /* compare every sample-th query row (0 or 1: all) */
    int page_size; /* 0: contiguous k/v (talon_prefill_attention); else the paged op */
    talon_kv_layout layout;
    int broken;    /* paged: page ids outside the cache and kv_lens outside [0, max_kv_len] */
    uint64_t seed;
} pcase;

static void describe(const pcase *c, char *buf, size_t n) {
    int i, k = snprintf(buf, n, "%s D=%lld/%lld Hq=%lld Hk=%lld %s window=%d cap=%g pad=%lld%s lens={",
                        FP8(c) ? "e4m3" : c->dtype == TALON_DTYPE_F16 ? "f16" : "bf16", (long long)c->d, (long long)DV(c),
                        (long long)c->hq, (long long)c->hk, c->causal ? "causal" : "full",
                        c->window, (double)c->cap, (long long)c->pad, c->no_lse ? " no-lse" : "");
    for (i = 0; i < c->batch && k > 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, "%s%d/%d", i ? "," : "", c->qlens[i], c->klens[i]);
    if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "}");
    if (c->page_size && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "} paged %s page %d%s", c->layout == TALON_KV_HND ? "HND" : "NHD",
                 c->page_size, c->kv8 ? " e4m3 caches" : "");
}

typedef struct tally {
    gpu_tally t;
    double worst; /* max |err| / tol */
} tally;

/* ---------------------------------------------------------------- one case */
typedef struct job {
    const pcase *c;
    int64_t total_q, total_kv, qs, ks, vs, os;
    int32_t cu_q[MAXB + 1], cu_k[MAXB + 1];
    uint16_t *qb, *kb, *vb, *ob;   /* element bits (fp8: the e4m3 byte) */
    float *qv, *kv, *vv;           /* element values */
    /* paged: the caches' images, the page table and kv_lens */
    uint16_t *kc, *vc;
    int32_t *pt, kv_lens[MAXB];
    int64_t num_pages, pt_stride, max_kv_len;
    float *lse;
    double sm_scale;
    /* results of the check */
    long long bad, elements;
    double worst;
    char first[256];
    pthread_mutex_t lock;
    int next_row;
} job;

/* e4m3: x / scale rounded to e4m3, val = that e4m3 value x scale; else dtype. */
static void draw(const pcase *c, int e4m3, uint16_t *bits, float *val, int64_t n, float amp,
                 float scale, uint64_t seed) {
    uint64_t s = ref_mix64(seed);
    int64_t i;
    for (i = 0; i < n; i++) {
        const float x = amp * (2.0f * ref_unit01(&s) - 1.0f);
        if (e4m3) {
            bits[i] = ref_e4m3_from_f32(x / scale);
            val[i] = (float)(ref_e4m3_to_f64((uint8_t)bits[i]) * scale);
        } else {
            bits[i] = ref_from_f32(c->dtype, x);
            val[i] = ref_to_f32(c->dtype, bits[i]);
        }
    }
}

/* n elements' bits to the device: 16-bit as they are, e4m3 one byte each. */
static void upload(int e4m3, CUdeviceptr dst, const uint16_t *bits, int64_t n) {
    if (e4m3) {
        uint8_t *b = malloc((size_t)n);
        for (int64_t i = 0; i < n; i++) b[i] = (uint8_t)bits[i];
        GPU_CK(cu.cuMemcpyHtoD(dst, b, (size_t)n));
        free(b);
    } else {
        GPU_CK(cu.cuMemcpyHtoD(dst, bits, 2 * (size_t)n));
    }
}

/* The paged form of k and v: request b's pages at random ids, 3 spare pages, NaN in every
   slot that holds no key. */
static void job_make_pages(job *j) {
    const pcase *c = j->c;
    const int64_t ps = c->page_size, d = c->d, hk = c->hk, page_elems = ps * hk * d;
    int64_t *perm, used = 0, i, n, t, h;
    uint64_t s = ref_mix64(c->seed * 7 + 5);
    int b;
    for (b = 0; b < c->batch; b++) {
        j->kv_lens[b] = c->klens[b];
        if (c->klens[b] > j->max_kv_len) j->max_kv_len = c->klens[b];
        n = (c->klens[b] + ps - 1) / ps;
        if (n > j->pt_stride) j->pt_stride = n;
        used += n;
    }
    if (!j->max_kv_len) j->max_kv_len = 1;
    j->pt_stride += 1; /* a longer row than needed */
    j->num_pages = used + 3;
    perm = malloc(sizeof(int64_t) * (size_t)j->num_pages);
    for (i = 0; i < j->num_pages; i++) perm[i] = i;
    for (i = j->num_pages - 1; i > 0; i--) { /* Fisher-Yates */
        const int64_t r = (int64_t)(ref_unit01(&s) * (double)(i + 1)) % (i + 1), x = perm[i];
        perm[i] = perm[r]; perm[r] = x;
    }
    j->kc = malloc(2 * (size_t)(j->num_pages * page_elems));
    j->vc = malloc(2 * (size_t)(j->num_pages * page_elems));
    memset(j->kc, 0xFF, 2 * (size_t)(j->num_pages * page_elems));
    memset(j->vc, 0xFF, 2 * (size_t)(j->num_pages * page_elems));
    j->pt = malloc(sizeof(int32_t) * (size_t)(c->batch * j->pt_stride));
    for (i = 0; i < c->batch * j->pt_stride; i++) j->pt[i] = -1;
    used = 0;
    for (b = 0; b < c->batch; b++)
        for (t = 0; t < c->klens[b]; t++) {
            const int64_t page = t % ps ? j->pt[b * j->pt_stride + t / ps] : perm[used++];
            j->pt[b * j->pt_stride + t / ps] = (int32_t)page;
            for (h = 0; h < hk; h++) {
                const int64_t at = c->layout == TALON_KV_HND ? ((page * hk + h) * ps + t % ps) * d
                                                             : ((page * ps + t % ps) * hk + h) * d;
                memcpy(j->kc + at, j->kb + (j->cu_k[b] + t) * j->ks + h * d, 2 * (size_t)d);
                memcpy(j->vc + at, j->vb + (j->cu_k[b] + t) * j->vs + h * d, 2 * (size_t)d);
            }
        }
    free(perm);
}

static void job_make(job *j, const pcase *c) {
    int b;
    memset(j, 0, sizeof *j);
    j->c = c;
    for (b = 0; b < c->batch; b++) {
        j->cu_q[b + 1] = j->cu_q[b] + c->qlens[b];
        j->cu_k[b + 1] = j->cu_k[b] + c->klens[b];
    }
    j->total_q = j->cu_q[c->batch] ? j->cu_q[c->batch] : 1;
    j->total_kv = j->cu_k[c->batch] ? j->cu_k[c->batch] : 1;
    j->qs = c->hq * c->d + c->pad;
    j->ks = c->hk * c->d + c->pad;
    j->vs = c->hk * DV(c) + c->pad;
    j->os = c->hq * DV(c) + c->pad;
    j->qb = malloc(2 * (size_t)(j->total_q * j->qs));
    j->qv = malloc(4 * (size_t)(j->total_q * j->qs));
    j->kb = malloc(2 * (size_t)(j->total_kv * j->ks));
    j->kv = malloc(4 * (size_t)(j->total_kv * j->ks));
    j->vb = malloc(2 * (size_t)(j->total_kv * j->vs));
    j->vv = malloc(4 * (size_t)(j->total_kv * j->vs));
    j->ob = malloc(2 * (size_t)(j->total_q * j->os));
    j->lse = malloc(4 * (size_t)(j->total_q * c->hq));
    draw(c, FP8(c), j->qb, j->qv, j->total_q * j->qs, c->qamp > 0 ? c->qamp : 1.0f, c->qscale, c->seed * 3 + 1);
    draw(c, KV8(c), j->kb, j->kv, j->total_kv * j->ks, 1.0f, c->kscale, c->seed * 3 + 2);
    draw(c, KV8(c), j->vb, j->vv, j->total_kv * j->vs, 1.0f, c->vscale, c->seed * 3 + 3);
    j->sm_scale = c->sm_scale != 0.0f ? c->sm_scale : 1.0 / sqrt((double)c->d);
    if (c->page_size) job_make_pages(j);
    pthread_mutex_init(&j->lock, NULL);
}

static void job_free(job *j) {
    free(j->qb); free(j->qv); free(j->kb); free(j->kv); free(j->vb); free(j->vv);
    free(j->ob); free(j->lse); free(j->kc); free(j->vc); free(j->pt);
    pthread_mutex_destroy(&j->lock);
}

static void note(job *j, long long bad, long long elements, double worst, const char *first) {
    pthread_mutex_lock(&j->lock);
    if (bad && !j->bad) snprintf(j->first, sizeof j->first, "%s", first);
    j->bad += bad;
    j->elements += elements;
    if (worst > j->worst) j->worst = worst;
    pthread_mutex_unlock(&j->lock);
}

/* fp8: bound[i] = sum_j e_j |v_j[i]| / sum_j p_j (file comment) for one query row against its
   n attended keys; returns max_j ds_j. */
static double fp8_weight_bound(const double *q, const float *const *k, const float *const *v,
                               int64_t n, int64_t d, int64_t dv, double sm_scale, double cap,
                               double *bound) {
    double *s = malloc(sizeof(double) * (size_t)(n ? n : 1)), *ds = malloc(sizeof(double) * (size_t)(n ? n : 1));
    double mx = -INFINITY, l = 0, ds_max = 0;
    int64_t j, i;
    for (i = 0; i < dv; i++) bound[i] = 0;
    for (j = 0; j < n; j++) {
        double dot = 0, mag = 0;
        for (i = 0; i < d; i++) {
            dot += q[i] * k[j][i];
            mag += fabs(q[i] * k[j][i]);
        }
        s[j] = sm_scale * dot;
        if (cap > 0) s[j] = cap * tanh(s[j] / cap);
        ds[j] = 0x1p-12 * sm_scale * mag;
        if (ds[j] > ds_max) ds_max = ds[j];
        if (s[j] > mx) mx = s[j];
    }
    for (j = 0; j < n; j++) l += exp(s[j] - mx);
    for (j = 0; j < n; j++) {
        const double p = exp(s[j] - mx);
        const double e = fmax(0x1p-4 * p, fmin(0x1p-10, p)) + p * ds[j];
        for (i = 0; i < dv; i++) bound[i] += e * fabs(v[j][i]) / l;
    }
    free(s);
    free(ds);
    return ds_max;
}

/* Checks query token rows handed out one at a time (all heads of a token). */
static void *check_worker(void *arg) {
    job *j = arg;
    const pcase *c = j->c;
    const int64_t d = c->d, dv = DV(c), group = c->hq / c->hk;
    const double rtol = c->dtype == TALON_DTYPE_F16 ? 0x1p-10 : 0x1p-7;
    const double atol = c->dtype == TALON_DTYPE_F16 ? 1e-6 : 1e-5;
    const double ptol = c->dtype == TALON_DTYPE_F16 ? 0x1p-10 : 0x1p-8;
    const float **kp = malloc(sizeof(float *) * (size_t)j->total_kv);
    const float **vp = malloc(sizeof(float *) * (size_t)j->total_kv);
    double *q = malloc(sizeof(double) * (size_t)d), *o = malloc(sizeof(double) * (size_t)dv);
    double *mag = malloc(sizeof(double) * (size_t)dv);
    double *w8 = malloc(sizeof(double) * (size_t)dv); /* fp8: the weights' error bound */
    char first[256];
    for (;;) {
        long long bad = 0, elements = 0;
        double worst = 0;
        int64_t t, h, i;
        int b = 0, pos, lo, hi, n, ql, kl, qi;
        pthread_mutex_lock(&j->lock);
        t = j->next_row++;
        pthread_mutex_unlock(&j->lock);
        if (t >= j->cu_q[c->batch]) break;
        while (j->cu_q[b + 1] <= t) b++;
        ql = c->qlens[b]; kl = c->klens[b]; qi = (int)(t - j->cu_q[b]);
        pos = qi + kl - ql;
        lo = c->window > 0 ? pos - c->window + 1 : 0;
        if (lo < 0) lo = 0;
        hi = c->causal ? pos : kl - 1;
        if (hi > kl - 1) hi = kl - 1;
        n = hi >= lo ? hi - lo + 1 : 0;
        first[0] = 0;
        for (h = 0; h < c->hq; h++) {
            const uint16_t *orow = j->ob + t * j->os + h * dv;
            const int sampled = c->sample <= 1 || qi % c->sample == 0 || qi == ql - 1;
            double lse = 0, smax = 0, ds_max = 0;
            if (sampled) {
                const int64_t hk = h / group;
                for (i = 0; i < d; i++) q[i] = j->qv[t * j->qs + h * d + i];
                for (i = 0; i < n; i++) {
                    kp[i] = j->kv + (j->cu_k[b] + lo + i) * j->ks + hk * d;
                    vp[i] = j->vv + (j->cu_k[b] + lo + i) * j->vs + hk * dv;
                }
                lse = ref_attn_dv(q, kp, vp, n, d, dv, j->sm_scale, c->cap, 1.0, 1.0, o, mag, &smax);
                if (FP8(c)) ds_max = fp8_weight_bound(q, kp, vp, n, d, dv, j->sm_scale, c->cap, w8);
            }
            for (i = 0; i < dv; i++) {
                const double dev = ref_to_f32(ODT(c), orow[i]);
                double tol, err;
                elements++;
                if (!sampled) {
                    if (!isfinite(dev) && !bad++)
                        snprintf(first, sizeof first, "o[%lld, %lld, %lld] = %g (not written?)", (long long)t, (long long)h, (long long)i, dev);
                    continue;
                }
                tol = FP8(c) ? 0x1p-7 * fabs(o[i]) + 1e-5 + w8[i] : rtol * fabs(o[i]) + atol + ptol * mag[i];
                err = fabs(dev - o[i]);
                if (!(err <= tol)) {
                    if (!bad++)
                        snprintf(first, sizeof first, "o[%lld, %lld, %lld] = %.8g, ref %.8g (tol %.3g)", (long long)t, (long long)h, (long long)i, dev, o[i], tol);
                } else if (err / tol > worst) worst = err / tol;
            }
            for (i = c->hq * dv; h == c->hq - 1 && i < j->os; i++) /* o's padding stays poisoned */
                if (j->ob[t * j->os + i] != 0xFFFF && !bad++)
                    snprintf(first, sizeof first, "o padding [%lld, %lld] written", (long long)t, (long long)i);
            if (!c->no_lse) {
                const float dl = j->lse[t * c->hq + h];
                int ok;
                elements++;
                if (!sampled) ok = !isnan(dl);
                else if (lse == -INFINITY) ok = dl == -INFINITY;
                else ok = fabs(dl - lse) <= 0x1p-16 * (1 + fabs(lse) + smax) + ds_max;
                if (!ok && !bad++)
                    snprintf(first, sizeof first, "lse[%lld, %lld] = %.9g, ref %.9g", (long long)t, (long long)h, (double)dl, lse);
            }
        }
        note(j, bad, elements, worst, first);
    }
    free(kp); free(vp); free(q); free(o); free(mag); free(w8);
    return NULL;
}

typedef struct dev {
    CUdeviceptr q, k, v, o, lse, cu_q, cu_k, pt, lens, ws;
    int64_t ws_bytes; /* the workspace size function's, for the case's args */
} dev;

static void fill_args(const job *j, const dev *dv, talon_prefill_attention_args *a) {
    const pcase *c = j->c;
    memset(a, 0, sizeof *a);
    a->o = dv->o; a->lse = c->no_lse ? 0 : dv->lse; a->q = dv->q; a->k = dv->k; a->v = dv->v;
    a->cu_seqlens_q = dv->cu_q; a->cu_seqlens_k = dv->cu_k;
    a->workspace = dv->ws; a->workspace_bytes = dv->ws_bytes;
    a->batch = c->batch;
    a->total_q = j->total_q; a->total_kv = j->total_kv;
    for (int b = 0; b < c->batch; b++)
        if (c->qlens[b] > a->max_seqlen_q) a->max_seqlen_q = c->qlens[b];
    if (!a->max_seqlen_q) a->max_seqlen_q = 1;
    a->num_qo_heads = c->hq; a->num_kv_heads = c->hk; a->head_dim = c->d;
    a->v_head_dim = c->d == 192 ? 128 : 0;
    if (c->pad) { a->q_stride = j->qs; a->k_stride = j->ks; a->v_stride = j->vs; a->o_stride = j->os; }
    a->window = c->window;
    a->causal = c->causal;
    a->sm_scale = c->sm_scale;
    a->logits_soft_cap = c->cap;
    a->dtype = c->dtype;
    a->q_scale = c->qscale; a->k_scale = c->kscale; a->v_scale = c->vscale;
}

static void fill_paged_args(const job *j, const dev *dv, talon_prefill_attention_paged_args *a) {
    const pcase *c = j->c;
    memset(a, 0, sizeof *a);
    a->o = dv->o; a->lse = c->no_lse ? 0 : dv->lse; a->q = dv->q;
    a->k_cache = dv->k; a->v_cache = dv->v; a->page_table = dv->pt; a->kv_lens = dv->lens;
    a->cu_seqlens_q = dv->cu_q;
    a->workspace = dv->ws; a->workspace_bytes = dv->ws_bytes;
    a->batch = c->batch;
    a->total_q = j->total_q;
    for (int b = 0; b < c->batch; b++)
        if (c->qlens[b] > a->max_seqlen_q) a->max_seqlen_q = c->qlens[b];
    if (!a->max_seqlen_q) a->max_seqlen_q = 1;
    a->max_kv_len = j->max_kv_len;
    a->num_pages = j->num_pages;
    a->page_size = c->page_size;
    a->page_table_stride = j->pt_stride;
    a->num_qo_heads = c->hq; a->num_kv_heads = c->hk; a->head_dim = c->d;
    if (c->pad) { a->q_stride = j->qs; a->o_stride = j->os; }
    a->window = c->window;
    a->causal = c->causal;
    a->sm_scale = c->sm_scale;
    a->logits_soft_cap = c->cap;
    a->dtype = c->dtype;
    a->layout = c->layout;
    if (c->kv8) {
        a->kv_dtype = TALON_DTYPE_FP8_E4M3;
        a->k_scale = c->kscale;
        a->v_scale = c->vscale;
    }
}

static void poison(const job *j, const dev *dv) {
    GPU_CK(cu.cuMemsetD8(dv->ws, 0xFF, (size_t)dv->ws_bytes)); /* contents on entry: irrelevant */
    GPU_CK(cu.cuMemsetD8(dv->o, 0xFF, 2 * (size_t)(j->total_q * j->os)));
    GPU_CK(cu.cuMemsetD8(dv->lse, 0xFF, 4 * (size_t)(j->total_q * j->c->hq)));
}

/* Broken paged inputs (job_break): the results are wrong by contract, but every o element
   and lse must be written and finite (bad page ids read zeros, kv_lens is clamped), and a
   request with kv_lens < 0 has no keys: o = 0, lse = -inf. compute-sanitizer's memcheck run
   checks that nothing outside the buffers is read. */
static void check_broken(job *j) {
    const pcase *c = j->c;
    int64_t t, i;
    int b = 0;
    for (t = 0; t < j->cu_q[c->batch]; t++) {
        while (j->cu_q[b + 1] <= t) b++;
        for (i = 0; i < c->hq * DV(c); i++) {
            const double o = ref_to_f32(ODT(c), j->ob[t * j->os + i]);
            const int ok = j->kv_lens[b] < 0 ? o == 0.0 : isfinite(o);
            j->elements++;
            if (!ok && !j->bad++)
                snprintf(j->first, sizeof j->first, "o[%lld, %lld] = %g (request %d)", (long long)t, (long long)i, o, b);
        }
        for (i = 0; i < c->hq; i++) {
            const float l = j->lse[t * c->hq + i];
            const int ok = j->kv_lens[b] < 0 ? l == -INFINITY : isfinite(l);
            j->elements++;
            if (!ok && !j->bad++)
                snprintf(j->first, sizeof j->first, "lse[%lld, %lld] = %g (request %d)", (long long)t, (long long)i, (double)l, b);
        }
    }
}

/* Page ids past the cache (-5, num_pages + 7, INT32_MAX) in request 0's rows, kv_lens past
   max_kv_len for request 1 (clamped: its later keys come from entries of -1; its keys fill
   whole pages, else the unwritten slots of its last page, NaN here, would count as keys) and
   below 0 for request 2. */
static void job_break(job *j) {
    j->pt[0] = -5;
    if (j->c->klens[0] > j->c->page_size) j->pt[1] = (int32_t)j->num_pages + 7;
    if (j->c->klens[0] > 2 * j->c->page_size) j->pt[2] = INT32_MAX;
    j->kv_lens[1] = (int32_t)j->max_kv_len + 1000;
    j->kv_lens[2] = -3;
}

static int check(job *j, const dev *dv) {
    pthread_t th[NTHREADS];
    int i;
    GPU_CK(cu.cuMemcpyDtoH(j->ob, dv->o, 2 * (size_t)(j->total_q * j->os)));
    GPU_CK(cu.cuMemcpyDtoH(j->lse, dv->lse, 4 * (size_t)(j->total_q * j->c->hq)));
    j->bad = j->elements = 0; j->worst = 0; j->next_row = 0; j->first[0] = 0;
    if (j->c->broken) {
        check_broken(j);
        return j->bad != 0;
    }
    for (i = 0; i < NTHREADS; i++) pthread_create(&th[i], NULL, check_worker, j);
    for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    return j->bad != 0;
}

/* Runs a case (graph: captured once and replayed `replays` times on fresh q); returns the
   workspace bytes its args ask for (more than 16: some tiles' keys split). */
static int64_t run_case(tally *t, const pcase *c, int graph, int replays) {
    job j;
    dev dv;
    talon_prefill_attention_args a;
    talon_prefill_attention_paged_args pa;
    talon_status st = TALON_SUCCESS;
    char what[512];
    int r, failed = 0;
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    job_make(&j, c);
    if (c->broken) job_break(&j);
    const int64_t cache_elems = j.num_pages * c->page_size * c->hk * c->d;
    const size_t cache_bytes = (KV8(c) ? 1 : 2) * (size_t)cache_elems;
    const size_t k_bytes = c->page_size ? cache_bytes : ES(c) * (size_t)(j.total_kv * j.ks);
    const size_t v_bytes = c->page_size ? cache_bytes : ES(c) * (size_t)(j.total_kv * j.vs);
    memset(&dv, 0, sizeof dv);
    dv.q = gpu_alloc(ES(c) * (size_t)(j.total_q * j.qs));
    dv.k = gpu_alloc(k_bytes);
    dv.v = gpu_alloc(v_bytes);
    dv.o = gpu_alloc(2 * (size_t)(j.total_q * j.os));
    dv.lse = gpu_alloc(4 * (size_t)(j.total_q * c->hq));
    dv.cu_q = gpu_alloc(4 * (MAXB + 1));
    dv.cu_k = gpu_alloc(4 * (MAXB + 1));
    upload(FP8(c), dv.q, j.qb, j.total_q * j.qs);
    if (c->page_size) { /* unused slots: 0xFFFF, or the e4m3 NaN 0xFF */
        upload(KV8(c), dv.k, j.kc, cache_elems);
        upload(KV8(c), dv.v, j.vc, cache_elems);
    } else {
        upload(FP8(c), dv.k, j.kb, j.total_kv * j.ks);
        upload(FP8(c), dv.v, j.vb, j.total_kv * j.vs);
    }
    GPU_CK(cu.cuMemcpyHtoD(dv.cu_q, j.cu_q, 4 * (MAXB + 1)));
    GPU_CK(cu.cuMemcpyHtoD(dv.cu_k, j.cu_k, 4 * (MAXB + 1)));
    if (c->page_size) {
        dv.pt = gpu_alloc(4 * (size_t)(c->batch * j.pt_stride));
        dv.lens = gpu_alloc(4 * MAXB);
        GPU_CK(cu.cuMemcpyHtoD(dv.pt, j.pt, 4 * (size_t)(c->batch * j.pt_stride)));
        GPU_CK(cu.cuMemcpyHtoD(dv.lens, j.kv_lens, 4 * MAXB));
    }
    fill_args(&j, &dv, &a);
    if (c->page_size) fill_paged_args(&j, &dv, &pa);
    st = c->page_size ? talon_prefill_attention_paged_workspace_size(g_ctx, &pa, &dv.ws_bytes)
                      : talon_prefill_attention_workspace_size(g_ctx, &a, &dv.ws_bytes);
    assert_int_equal(st, TALON_SUCCESS);
    dv.ws = gpu_alloc((size_t)dv.ws_bytes);
    a.workspace = pa.workspace = dv.ws;
    a.workspace_bytes = pa.workspace_bytes = dv.ws_bytes;
#define LAUNCH() (c->page_size ? talon_prefill_attention_paged(g_ctx, g_stream, &pa)           \
                               : talon_prefill_attention(g_ctx, g_stream, &a))
    if (graph) {
        GPU_CK(cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
        st = LAUNCH();
        GPU_CK(cu.cuStreamEndCapture(g_stream, &g));
        if (g) GPU_CK(cu.cuGraphInstantiateWithFlags(&ge, g, 0));
    }
    for (r = 0; r < (graph ? replays : 1) && st == TALON_SUCCESS && !gpu_call_failed; r++) {
        if (r > 0) { /* fresh q for the replay */
            draw(c, FP8(c), j.qb, j.qv, j.total_q * j.qs, c->qamp > 0 ? c->qamp : 1.0f, c->qscale,
                 c->seed * 3 + 1 + 1000 * (uint64_t)r);
            upload(FP8(c), dv.q, j.qb, j.total_q * j.qs);
        }
        poison(&j, &dv);
        if (graph) GPU_CK(cu.cuGraphLaunch(ge, g_stream));
        else st = LAUNCH();
        GPU_CK(cu.cuStreamSynchronize(g_stream));
        if (st != TALON_SUCCESS || gpu_call_failed) break;
        failed |= check(&j, &dv);
        t->t.elements += j.elements;
        if (j.worst > t->worst) t->worst = j.worst;
        if (j.bad) break;
    }
    t->t.cases++;
    if (failed || st != TALON_SUCCESS || gpu_call_failed) {
        describe(c, what, sizeof what);
        t->t.failures++;
        if (st != TALON_SUCCESS) print_error("FAILED %s: %s\n", what, talon_last_error());
        else print_error("FAILED %s: %lld mismatches; first: %s\n", what, j.bad, j.first);
        gpu_call_failed = 0;
    }
    if (ge) cu.cuGraphExecDestroy(ge);
    if (g) cu.cuGraphDestroy(g);
    cu.cuMemFree(dv.q); cu.cuMemFree(dv.k); cu.cuMemFree(dv.v); cu.cuMemFree(dv.o);
    cu.cuMemFree(dv.lse); cu.cuMemFree(dv.cu_q); cu.cuMemFree(dv.cu_k);
    cu.cuMemFree(dv.ws);
    if (dv.pt) cu.cuMemFree(dv.pt);
    if (dv.lens) cu.cuMemFree(dv.lens);
    job_free(&j);
#undef LAUNCH
    return dv.ws_bytes;
}

static void tally_start(tally *t, const char *name) {
    memset(t, 0, sizeof *t);
    gpu_tally_start(&t->t, name);
}
static void tally_end(tally *t) {
    print_message("%s: worst error %.3f of the tolerance\n", t->t.name, t->worst);
    if (gpu_tally_end(&t->t, &g_cases, &g_elements)) fail();
}

static pcase base(talon_dtype dt, int64_t d, int64_t hq, int64_t hk, int causal, const int *ql,
                  const int *kl, int n, uint64_t seed) {
    pcase c;
    int i;
    memset(&c, 0, sizeof c);
    c.dtype = dt; c.d = d; c.hq = hq; c.hk = hk; c.causal = causal; c.batch = n;
    for (i = 0; i < n; i++) {
        c.qlens[i] = ql[i];
        c.klens[i] = kl ? kl[i] : ql[i];
    }
    c.seed = seed;
    return c;
}

static const int64_t dims[] = {64, 128, 256};

/* Lengths 1, 17, 128, 1000 and 4097 in one call (quick: 1, 17, 128, 300), every head_dim,
   both types, causal and not. */
static void test_mixed_lengths(void **state) {
    static const int full[] = {1, 17, 128, 1000, 4097}, quick[] = {1, 17, 128, 300};
    tally t;
    int di, dt, causal;
    (void)state;
    tally_start(&t, "mixed lengths");
    for (di = 0; di < COUNT(dims); di++)
        for (dt = 0; dt < 2; dt++)
            for (causal = 0; causal < 2; causal++) {
                pcase c = base(dt ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, dims[di], 4, 2, causal,
                               g_quick ? quick : full, NULL, g_quick ? 4 : 5, 11 + di * 4 + dt * 2 + causal);
                c.sample = g_quick ? 1 : 5;
                run_case(&t, &c, 0, 1);
            }
    tally_end(&t);
}

/* Fewer queries than keys (a cached prefix: bottom-right causal alignment), more queries than
   keys (leading queries see nothing), empty requests. */
static void test_prefix_and_empty(void **state) {
    static const int ql[] = {1, 17, 128, 300, 50, 0, 9}, kl[] = {1000, 17, 2000, 301, 20, 5, 0};
    tally t;
    int di, causal;
    (void)state;
    tally_start(&t, "prefix and empty");
    for (di = 0; di < COUNT(dims); di++)
        for (causal = 0; causal < 2; causal++) {
            pcase c = base(TALON_DTYPE_BF16, dims[di], 2, 1, causal, ql, kl, 7, 101 + di * 2 + causal);
            if (g_quick) c.klens[0] = c.klens[2] = 400;
            run_case(&t, &c, 0, 1);
        }
    tally_end(&t);
}

/* GQA ratios 1, 4, 7, 8 and MQA. */
static void test_group_ratios(void **state) {
    static const int64_t heads[][2] = {{3, 3}, {8, 2}, {7, 1}, {16, 2}, {6, 1}};
    static const int ql[] = {200, 33};
    tally t;
    int hi, causal;
    (void)state;
    tally_start(&t, "group ratios");
    for (hi = 0; hi < COUNT(heads); hi++)
        for (causal = 0; causal < 2; causal++) {
            pcase c = base(hi % 2 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, 128, heads[hi][0],
                           heads[hi][1], causal, ql, NULL, 2, 201 + hi * 2 + causal);
            run_case(&t, &c, 0, 1);
        }
    tally_end(&t);
}

/* Sliding windows (with and without causal), soft-caps with large scores, sm_scale. */
static void test_window_softcap(void **state) {
    static const int ql[] = {300, 129, 5}, kl[] = {300, 700, 64};
    static const int windows[] = {1, 37, 128, 200};
    tally t;
    int di, wi, causal;
    (void)state;
    tally_start(&t, "window and soft-cap");
    for (di = 0; di < COUNT(dims); di++) {
        for (wi = 0; wi < COUNT(windows); wi++)
            for (causal = 0; causal < 2; causal++) {
                pcase c = base(TALON_DTYPE_BF16, dims[di], 2, 2, causal, ql, kl, 3, 301 + di * 8 + wi * 2 + causal);
                c.window = windows[wi];
                run_case(&t, &c, 0, 1);
            }
        for (causal = 0; causal < 2; causal++) {
            pcase c = base(di == 1 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, dims[di], 2, 1, causal, ql, kl, 3, 351 + di * 2 + causal);
            c.cap = di == 2 ? 5.0f : 30.0f;
            c.qamp = 8.0f;
            c.sm_scale = di == 0 ? 0.3f : 0.0f;
            c.window = causal ? 0 : 100;
            run_case(&t, &c, 0, 1);
        }
    }
    tally_end(&t);
}

/* Padded token strides (q, k, v, o), no lse, peaky softmax (large q). */
static void test_strides(void **state) {
    static const int ql[] = {130, 7, 64}, kl[] = {130, 260, 64};
    tally t;
    int di, causal;
    (void)state;
    tally_start(&t, "strides and no lse");
    for (di = 0; di < COUNT(dims); di++)
        for (causal = 0; causal < 2; causal++) {
            pcase c = base(causal ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, dims[di], 3, 1, causal, ql, kl, 3, 401 + di * 2 + causal);
            c.pad = 8 + 16 * di;
            c.no_lse = di == 1;
            c.qamp = 4.0f;
            run_case(&t, &c, 0, 1);
        }
    tally_end(&t);
}

/* Captured once, replayed on fresh inputs. */
static void test_graph(void **state) {
    static const int ql[] = {257, 64, 1}, kl[] = {257, 300, 1};
    tally t;
    (void)state;
    tally_start(&t, "graph capture and replay");
    {
        pcase c = base(TALON_DTYPE_BF16, 128, 4, 2, 1, ql, kl, 3, 501);
        run_case(&t, &c, 1, 3);
    }
    tally_end(&t);
}

/* Broken paged inputs in both loaders (page 16: TMA boxes, page 4: the gather): bad page
   ids and kv_lens outside [0, max_kv_len] give finite results and no fault. */
static void test_paged_broken(void **state) {
    static const int ql[] = {100, 60, 30}, kl[] = {300, 208, 90};
    tally t;
    int i;
    (void)state;
    tally_start(&t, "paged with bad page ids and kv_lens");
    for (i = 0; i < 2; i++) {
        pcase c = base(TALON_DTYPE_BF16, 128, 4, 2, i, ql, kl, 3, 901 + i);
        c.page_size = i ? 4 : 16;
        c.layout = i ? TALON_KV_HND : TALON_KV_NHD;
        c.broken = 1;
        run_case(&t, &c, 0, 1);
    }
    tally_end(&t);
}

/* q/k 192 with v 128: mixed lengths, a cached prefix, GQA 4, a window and soft-cap, padded
   strides (v's and o's of their own width), both types. */
static void test_dims_192_128(void **state) {
    static const int full[] = {1, 17, 128, 1000, 4097}, quick[] = {1, 17, 128, 300};
    static const int ql[] = {300, 129, 5}, kl[] = {300, 700, 64};
    tally t;
    int dt, causal;
    (void)state;
    tally_start(&t, "q/k 192, v 128");
    for (dt = 0; dt < 2; dt++)
        for (causal = 0; causal < 2; causal++) {
            pcase c = base(dt ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, 192, 8, 2, causal,
                           g_quick ? quick : full, NULL, g_quick ? 4 : 5, 801 + dt * 2 + causal);
            c.sample = g_quick ? 1 : 5;
            run_case(&t, &c, 0, 1);
        }
    for (causal = 0; causal < 2; causal++) {
        pcase c = base(TALON_DTYPE_BF16, 192, 4, 4, causal, ql, kl, 3, 811 + causal);
        c.window = causal ? 0 : 100;
        c.cap = 20.0f;
        c.qamp = 4.0f;
        c.pad = 16;
        run_case(&t, &c, 0, 1);
    }
    tally_end(&t);
}

/* fp8 e4m3 q, k, v (head_dim 128 and 256): mixed lengths 1..4097, a cached prefix and empty
   requests, GQA 4 and MQA, peaky rows (large q), a window, a soft-cap, padded strides (16
   elements), no lse, and a captured graph replayed on fresh q. Scales differ per tensor. */
static pcase fp8_case(int64_t d, int64_t hq, int64_t hk, int causal, const int *ql, const int *kl,
                      int n, uint64_t seed) {
    pcase c = base(TALON_DTYPE_FP8_E4M3, d, hq, hk, causal, ql, kl, n, seed);
    c.qscale = 1.0f / 300;
    c.kscale = 1.0f / 250;
    c.vscale = 1.0f / 320;
    return c;
}
static void test_fp8(void **state) {
    static const int full[] = {1, 17, 128, 1000, 4097}, quick[] = {1, 17, 128, 300};
    static const int pql[] = {1, 17, 128, 300, 50, 0, 9}, pkl[] = {1000, 17, 2000, 301, 20, 5, 0};
    static const int ql[] = {130, 7, 64, 300}, kl[] = {130, 260, 64, 700};
    static const int d8[] = {128, 256};
    tally t;
    int di, causal, i;
    (void)state;
    tally_start(&t, "fp8 e4m3");
    for (di = 0; di < 2; di++)
        for (causal = 0; causal < 2; causal++) {
            pcase c = fp8_case(d8[di], 4, 2, causal, g_quick ? quick : full, NULL, g_quick ? 4 : 5, 1001 + di * 2 + causal);
            c.sample = g_quick ? 1 : 5;
            run_case(&t, &c, 0, 1);
            c = fp8_case(d8[di], 2, 1, causal, pql, pkl, 7, 1011 + di * 2 + causal);
            if (g_quick) c.klens[0] = c.klens[2] = 400;
            run_case(&t, &c, 0, 1);
        }
    for (i = 0; i < 4; i++) { /* peaky rows; window, soft-cap, strides, no lse */
        pcase c = fp8_case(d8[i % 2], i < 2 ? 6 : 3, i < 2 ? 1 : 3, i % 2, ql, kl, 4, 1021 + i);
        c.qamp = 4.0f;
        c.qscale = c.qamp / 300;
        c.window = i == 1 ? 37 : 0;
        c.cap = i == 2 ? 20.0f : 0.0f;
        c.pad = i >= 2 ? 16 * i : 0;
        c.no_lse = i == 3;
        run_case(&t, &c, 0, 1);
    }
    {
        pcase c = fp8_case(128, 4, 2, 1, ql, kl, 4, 1031);
        run_case(&t, &c, 1, 3);
    }
    if (!g_quick) { /* causal from 8192 queries: d128's 192-row kernel (talon__prefill_tile_rows) */
        static const int l8k[] = {8192};
        pcase c = fp8_case(128, 2, 1, 1, l8k, NULL, 1, 1041);
        c.sample = 31;
        run_case(&t, &c, 0, 1);
    }
    tally_end(&t);
}

/* A paged geometry: head_dim, page size, layout. */
typedef struct { int d, page, layout; } page_geometry;

/* The caches of case c hold fp8 e4m3 with these scales (kv_dtype). */
static void fp8_caches(pcase *c, float k_scale, float v_scale) {
    c->kv8 = 1;
    c->kscale = k_scale;
    c->vscale = v_scale;
}

/* Each geometry causal and not, bf16 and f16 in turn, over a cached prefix (lengths 1 to 4097;
   quick: to 300), seeds from seed0; fp8: on fp8 e4m3 caches. */
static void page_sweep(tally *t, const page_geometry *pages, int n, int seed0, int fp8) {
    static const int ql[] = {1, 17, 128, 300, 1000}, kl[] = {1, 40, 2000, 300, 4097};
    static const int qlq[] = {1, 17, 128, 70}, klq[] = {1, 40, 300, 70};
    int pi, causal;
    for (pi = 0; pi < n; pi++)
        for (causal = 0; causal < 2; causal++) {
            pcase c = base(pi % 2 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, pages[pi].d, 4, 2, causal,
                           g_quick ? qlq : ql, g_quick ? klq : kl, g_quick ? 4 : 5, seed0 + pi * 2 + causal);
            c.page_size = pages[pi].page;
            c.layout = (talon_kv_layout)pages[pi].layout;
            c.sample = g_quick ? 1 : 5;
            if (fp8) fp8_caches(&c, 1.0f / 250, 1.0f / 320);
            run_case(t, &c, 0, 1);
        }
}

/* The paged op: page sizes 1..256 in both layouts at every head_dim, over a cached prefix
   (fewer queries than keys) and without one, lengths 1 to 4097, both types. */
static void test_paged(void **state) {
    static const page_geometry pages[] = {
        {64, 1, TALON_KV_NHD},    {64, 16, TALON_KV_HND},   {128, 2, TALON_KV_HND},
        {128, 16, TALON_KV_NHD},  {128, 64, TALON_KV_HND},  {128, 256, TALON_KV_NHD},
        {256, 8, TALON_KV_NHD},   {256, 128, TALON_KV_HND}, {256, 256, TALON_KV_HND},
    };
    tally t;
    (void)state;
    tally_start(&t, "paged");
    page_sweep(&t, pages, COUNT(pages), 601, 0);
    tally_end(&t);
}

/* The paged op on fp8 e4m3 caches (kv_dtype, bf16/f16 q and o): page sizes 1..256 in both
   layouts at every head_dim, a cached prefix, lengths 1 to 4097, GQA 7, a window, a soft-cap,
   q/o strides, no lse, bad page ids and kv_lens, and a captured graph replayed on fresh q.
   The caches' values are exact e4m3 x scale, which the kernel widens exactly: the 16-bit
   tolerances apply. */
static void test_paged_fp8(void **state) {
    static const page_geometry pages[] = {
        {64, 1, TALON_KV_NHD}, {64, 16, TALON_KV_HND}, {128, 4, TALON_KV_HND}, {128, 16, TALON_KV_NHD},
        {128, 256, TALON_KV_HND}, {256, 8, TALON_KV_NHD}, {256, 64, TALON_KV_HND},
    };
    static const int ol[] = {300, 129, 5}, okl[] = {300, 700, 64};
    static const int bl[] = {100, 60, 30}, bkl[] = {300, 208, 90};
    tally t;
    int i;
    (void)state;
    tally_start(&t, "paged fp8 caches");
    page_sweep(&t, pages, COUNT(pages), 1101, 1);
    for (i = 0; i < 3; i++) {
        pcase c = base(i == 1 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, 128, 7, 1, i != 1, ol, okl, 3, 1121 + i);
        c.page_size = i == 0 ? 16 : i == 1 ? 2 : 32;
        c.layout = i == 1 ? TALON_KV_HND : TALON_KV_NHD;
        c.window = i == 1 ? 100 : 0;
        c.cap = i == 2 ? 20.0f : 0.0f;
        c.qamp = i == 2 ? 6.0f : 1.0f;
        c.pad = i == 2 ? 24 : 0;
        c.no_lse = i == 2;
        fp8_caches(&c, 1.0f / 200, 1.0f / 100);
        run_case(&t, &c, 0, 1);
    }
    {
        pcase c = base(TALON_DTYPE_BF16, 128, 4, 2, 1, bl, bkl, 3, 1131);
        c.page_size = 16;
        c.broken = 1;
        fp8_caches(&c, 1.0f / 250, 1.0f / 320);
        run_case(&t, &c, 0, 1);
        c = base(TALON_DTYPE_BF16, 128, 8, 2, 1, ol, okl, 3, 1132);
        c.page_size = 16;
        fp8_caches(&c, 1.0f / 250, 1.0f / 320);
        run_case(&t, &c, 1, 3);
    }
    for (i = 0; i < 2; i++) { /* bf16 q far outside f16's range, with moderate scores: the
                                 kernel converts q to f16 scaled by a power of two */
        pcase c = base(TALON_DTYPE_BF16, i ? 64 : 128, 4, 2, 1, ol, okl, 3, 1141 + i);
        c.page_size = 16;
        c.qamp = i ? 0x1p-24f : 0x1p20f;
        c.sm_scale = (float)((i ? 0x1p24 : 0x1p-20) / sqrt(i ? 64.0 : 128.0));
        fp8_caches(&c, 1.0f / 200, 1.0f / 100);
        run_case(&t, &c, 0, 1);
    }
    tally_end(&t);
}

/* The paged op with GQA 7 and MQA, a window, a soft-cap, q/o strides and no lse; and captured
   once, replayed on fresh q. */
static void test_paged_options(void **state) {
    static const int ql[] = {300, 129, 5}, kl[] = {300, 700, 64};
    tally t;
    int i;
    (void)state;
    tally_start(&t, "paged options and graph");
    for (i = 0; i < 4; i++) {
        pcase c = base(i % 2 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16, i == 3 ? 256 : 128,
                       i % 2 ? 7 : 6, 1 + (i == 2), i != 1, ql, kl, 3, 701 + i);
        c.page_size = i == 0 ? 16 : i == 1 ? 4 : i == 2 ? 32 : 64;
        c.layout = i % 2 ? TALON_KV_HND : TALON_KV_NHD;
        c.window = i == 1 ? 100 : i == 3 ? 37 : 0;
        c.cap = i >= 2 ? 20.0f : 0.0f;
        c.qamp = i >= 2 ? 6.0f : 1.0f;
        c.pad = i == 2 ? 24 : 0;
        c.no_lse = i == 2;
        run_case(&t, &c, 0, 1);
    }
    {
        pcase c = base(TALON_DTYPE_BF16, 128, 8, 2, 1, ql, kl, 3, 711);
        c.page_size = 16;
        run_case(&t, &c, 1, 3);
    }
    tally_end(&t);
}

/* Many tiles a CTA: long causal calls and many short requests with many heads (the benchmark's
   shapes), every head_dim, so the consumer warpgroups run many tiles in a row and can drift
   apart (d64 takes no turns), and each producer kind hands tiles over many times (fp8's
   transposing warps, TMA pages, gathered pages, widened fp8 caches); rows sampled (every 61st
   of a request and its last). */
static void test_many_tiles(void **state) {
    static const int longs[] = {8192, 8192}, shorts[] = {1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024};
    static const int qlongs[] = {1024, 1024}, qshorts[] = {256, 256, 256}, wide[] = {1600, 77};
    static const int wide_q[] = {300, 9}, wide_kv[] = {3500, 3100};
    static const int64_t heads[] = {32, 16, 8}; /* d64, d128, d256: 16 k tokens x 32 / 16 / 8 heads */
    static const page_geometry pages[] = {{128, 16, TALON_KV_NHD}, {128, 4, TALON_KV_HND}, {128, 16, TALON_KV_NHD}};
    const int *sl = g_quick ? qshorts : shorts, ns = g_quick ? COUNT(qshorts) : COUNT(shorts);
    tally t;
    int di, shape, pi;
    pcase c;
    (void)state;
    tally_start(&t, "many tiles");
    for (di = 0; di < COUNT(dims); di++)
        for (shape = 0; shape < 2; shape++) {
            const int *ql = shape ? sl : g_quick ? qlongs : longs;
            const int n = shape ? ns : g_quick ? COUNT(qlongs) : COUNT(longs);
            c = base(TALON_DTYPE_BF16, dims[di], heads[di], heads[di], 1, ql, NULL, n, 61 + di * 2 + shape);
            c.sample = g_quick ? 1 : 61;
            run_case(&t, &c, 0, 1);
        }
    c = fp8_case(128, 16, 16, 1, sl, NULL, ns, 67);
    c.sample = g_quick ? 1 : 61;
    run_case(&t, &c, 0, 1);
    /* head_dim 128, GQA 16/8, f16, no causal mask: 1600 and 77 queries */
    c = base(TALON_DTYPE_F16, 128, 16, 8, 0, wide, NULL, COUNT(wide), 66);
    c.sample = 5;
    run_case(&t, &c, 0, 1);
    /* the same from pages of 16 (the cache's tail rows zeroed by the consumers), and a causal
       prefill of 300 and 9 tokens over 3500 and 3100 cached keys */
    c = base(TALON_DTYPE_BF16, 128, 16, 8, 0, wide, NULL, COUNT(wide), 71);
    c.page_size = 16;
    c.sample = 5;
    run_case(&t, &c, 0, 1);
    c = base(TALON_DTYPE_BF16, 128, 8, 8, 1, wide_q, wide_kv, COUNT(wide_q), 72);
    c.page_size = 16;
    c.layout = TALON_KV_HND;
    c.sample = 3;
    run_case(&t, &c, 0, 1);
    for (pi = 0; pi < COUNT(pages); pi++) {
        c = base(TALON_DTYPE_BF16, pages[pi].d, 16, 4, 1, sl, NULL, ns, 68 + pi);
        c.page_size = pages[pi].page;
        c.layout = (talon_kv_layout)pages[pi].layout;
        c.sample = g_quick ? 1 : 61;
        if (pi == 2) fp8_caches(&c, 1.0f / 250, 1.0f / 320);
        run_case(&t, &c, 0, 1);
    }
    tally_end(&t);
}

/* Split keys (the last round's tiles in pieces, merged by the last to finish): few long tiles,
   contiguous and paged, every head_dim and loader, fp8, causal over a prefix (also with a
   window and soft-cap), a request of far fewer keys than max_kv_len (pieces with no key block),
   and a captured graph replayed (the pieces' counters zeroed at each launch). Each case must
   ask for more than 16 bytes of workspace: its tiles are split. */
static void test_split_keys(void **state) {
    static const int q1[] = {300}, k1[] = {4000}, q2[] = {400}, k2[] = {5000}, k3[] = {3000};
    static const int q4[] = {256}, k4[] = {4096}, q5[] = {500, 500}, k5[] = {6000, 600};
    tally t;
    int i;
    (void)state;
    tally_start(&t, "split keys");
    for (i = 0; i < 11; i++) {
        pcase c;
        switch (i) {
        case 0: c = base(TALON_DTYPE_BF16, 128, 8, 2, 0, q1, k1, 1, 1101); break;
        case 1: c = base(TALON_DTYPE_F16, 64, 4, 4, 0, q2, k2, 1, 1102); break;
        case 2: c = base(TALON_DTYPE_BF16, 256, 2, 1, 1, q1, k3, 1, 1103); break;
        case 3:
            c = base(TALON_DTYPE_BF16, 128, 4, 1, 1, q1, k1, 1, 1104);
            c.window = 2500;
            c.cap = 30.0f;
            c.qamp = 4.0f;
            break;
        case 4: c = base(TALON_DTYPE_F16, 192, 4, 4, 0, q1, k1, 1, 1105); break;
        case 5: c = fp8_case(128, 4, 4, 0, q4, k4, 1, 1106); break;
        case 6: c = fp8_case(256, 2, 2, 1, q1, k3, 1, 1107); break;
        case 7:
            c = base(TALON_DTYPE_BF16, 128, 8, 2, 1, q5, k5, 2, 1108);
            c.page_size = 16;
            break;
        case 8:
            c = base(TALON_DTYPE_F16, 128, 4, 4, 0, q4, k3, 1, 1109);
            c.page_size = 1;
            c.layout = TALON_KV_HND;
            break;
        case 9:
            c = base(TALON_DTYPE_BF16, 128, 4, 2, 1, q4, k3, 1, 1110);
            c.page_size = 16;
            fp8_caches(&c, 1.0f / 250, 1.0f / 320);
            break;
        default: c = base(TALON_DTYPE_BF16, 256, 4, 4, 0, q4, k3, 1, 1111); c.page_size = 64; break;
        }
        c.sample = g_quick ? 1 : 3;
        assert_true(run_case(&t, &c, i == 0, i == 0 ? 3 : 1) > 16);
    }
    tally_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_lengths), cmocka_unit_test(test_many_tiles),
        cmocka_unit_test(test_prefix_and_empty), cmocka_unit_test(test_group_ratios),
        cmocka_unit_test(test_window_softcap), cmocka_unit_test(test_strides),
        cmocka_unit_test(test_graph),         cmocka_unit_test(test_dims_192_128),
        cmocka_unit_test(test_fp8),           cmocka_unit_test(test_paged),
        cmocka_unit_test(test_paged_options), cmocka_unit_test(test_paged_broken),
        cmocka_unit_test(test_paged_fp8),     cmocka_unit_test(test_split_keys),
    };
    gpu_test t;
    int failed;
    /* a blocking stream: it waits for the uploads and poison memsets on the legacy stream */
    if (gpu_test_begin(&t, "test_gpu_prefill", CU_STREAM_DEFAULT)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon GPU prefill attention", tests, NULL, NULL);
    return gpu_test_end(&t, " against the fp64 reference", g_cases, g_elements, failed);
}
