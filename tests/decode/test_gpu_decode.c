/* GPU tests (H100/H200) of talon_decode_attention and talon_merge_attention_states against
   the fp64 references of tests/decode/ref_attn.h, every output element (o and lse) checked after
   poisoning the outputs and the workspace with 0xFF bytes (NaN).

   A case draws q and the K/V caches at random (reproducibly from its seed), quantised to the
   element type (bf16/f16 exactly; fp8 e4m3 by the bit-exact RNE + satfinite host conversion,
   with values past 448 that saturate); the reference reads exactly those element values and
   the scales. Each request's pages are a random permutation of the cache's page ids; page
   table entries past a request's pages hold 0x3fffffff, which points far outside the cache.
   Tolerances, per element:
     o:   |dev - ref| <= rtol |ref| + atol + 2^-14 mag, rtol 2^-7 (bf16) / 2^-10 (f16) (one unit
          in the last place), atol 1e-5 / 1e-6, mag = sum_t p_t |v_t| (the size of what fp32
          evaluation can cancel: 2^-14 of it is 1/64 of a bf16 unit);
     lse: |dev - ref| <= 2^-16 (1 + |ref| + max_t |s_t|); -inf exactly where the ref is -inf.
   TALON_TEST_QUICK=1 (compute-sanitizer) keeps every path (every D, group shape, page size
   class, fp8, soft-cap, window, forced and automatic splits, empty requests, graph replay,
   merge) with short contexts. */
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
#include "ref_attn.h"
#include "talon.h"

#define MAXB 16
#define NTHREADS 8
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define PT_POISON 0x3fffffff

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static int64_t g_cases, g_elements;

typedef struct dcase {
    talon_dtype dtype;
    int fp8, no_lse, hnd; /* hnd: caches [pages, Hk, page_size, D] */
    int64_t hq, hk, d, ps, max_kv_len, window, splits, pt_pad;
    int batch;
    int lens[MAXB];
    float cap, sm_scale, qamp, k_scale, v_scale;
    uint64_t seed;
} dcase;

typedef struct tally {
    const char *test;
    int64_t cases, failures, elements;
    double worst; /* max |err| / tol over all checked elements */
    struct timespec t0;
} tally;

static void tally_start(tally *t, const char *name) {
    memset(t, 0, sizeof *t);
    t->test = name;
    clock_gettime(CLOCK_MONOTONIC, &t->t0);
}

static void tally_end(tally *t) {
    print_message("%s: %lld cases, %lld elements checked (o and lse), worst error %.3f of the "
                  "tolerance, %.1f s\n",
                  t->test, (long long)t->cases, (long long)t->elements, t->worst,
                  gpu_seconds_since(&t->t0));
    g_cases += t->cases;
    g_elements += t->elements;
    if (t->failures) {
        print_error("%s: %lld of %lld cases failed\n", t->test, (long long)t->failures,
                    (long long)t->cases);
        fail();
    }
}

static void describe(const dcase *c, char *buf, size_t n) {
    int i, k = snprintf(buf, n, "%s%s D=%lld Hq=%lld Hk=%lld page=%lld max_kv_len=%lld window=%lld "
                        "cap=%g splits=%lld%s%s lens={",
                        c->dtype == TALON_DTYPE_F16 ? "f16" : "bf16", c->fp8 ? " kv fp8" : "",
                        (long long)c->d, (long long)c->hq, (long long)c->hk, (long long)c->ps,
                        (long long)c->max_kv_len, (long long)c->window, (double)c->cap,
                        (long long)c->splits, c->no_lse ? " no-lse" : "", c->hnd ? " HND" : "");
    for (i = 0; i < c->batch && k > 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, "%s%d", i ? "," : "", c->lens[i]);
    if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "}");
}

/* ---------------------------------------------------------------- host data */
typedef struct host {
    const dcase *c;
    int64_t npages, stride, nq;
    int32_t *pt;            /* [batch, stride] */
    void *kbits, *vbits;    /* device images of the caches */
    float *kval, *vval;     /* element values */
    uint16_t *qbits;
    double *q;              /* [batch, hq, d] values */
    size_t esize, cache_elems;
} host;

static float draw(uint64_t *s) { return 2.0f * ref_unit01(s) - 1.0f; }

/* Quantises x into slot i of a cache image; returns the element value. */
static float put(const dcase *c, void *bits, size_t i, float x) {
    if (c->fp8) {
        uint8_t b = ref_e4m3_from_f32(x);
        ((uint8_t *)bits)[i] = b;
        return (float)ref_e4m3_to_f64(b);
    }
    ((uint16_t *)bits)[i] = ref_from_f32(c->dtype, x);
    return ref_to_f32(c->dtype, ((uint16_t *)bits)[i]);
}

static void draw_q(host *h, uint64_t seed) {
    const dcase *c = h->c;
    uint64_t s = seed;
    int64_t i;
    for (i = 0; i < h->nq; i++) {
        h->qbits[i] = ref_from_f32(c->dtype, draw(&s) * c->qamp);
        h->q[i] = ref_to_f32(c->dtype, h->qbits[i]);
    }
}

/* Pages for `alloc` keys per request (each request's own page count), scattered. */
static void host_make(host *h, const dcase *c, const int *alloc) {
    uint64_t s = c->seed;
    int64_t b, i, j, n = 0, *perm;
    memset(h, 0, sizeof *h);
    h->c = c;
    h->stride = (c->max_kv_len + c->ps - 1) / c->ps + c->pt_pad;
    for (b = 0; b < c->batch; b++) h->npages += (alloc[b] + c->ps - 1) / c->ps;
    h->npages += 3; /* never referenced */
    perm = malloc(sizeof *perm * (size_t)h->npages);
    for (i = 0; i < h->npages; i++) perm[i] = i;
    for (i = h->npages - 1; i > 0; i--) {
        int64_t t;
        j = (int64_t)(ref_next64(&s) % (uint64_t)(i + 1));
        t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    h->pt = malloc(sizeof *h->pt * (size_t)(c->batch * h->stride));
    for (i = 0; i < c->batch * h->stride; i++) h->pt[i] = PT_POISON;
    for (b = 0; b < c->batch; b++)
        for (i = 0; i < (alloc[b] + c->ps - 1) / c->ps; i++) h->pt[b * h->stride + i] = (int32_t)perm[n++];
    free(perm);
    h->esize = c->fp8 ? 1 : 2;
    h->cache_elems = (size_t)(h->npages * c->ps * c->hk * c->d);
    h->kbits = malloc(h->cache_elems * h->esize);
    h->vbits = malloc(h->cache_elems * h->esize);
    h->kval = malloc(h->cache_elems * sizeof(float));
    h->vval = malloc(h->cache_elems * sizeof(float));
    for (i = 0; i < (int64_t)h->cache_elems; i++) {
        /* fp8: wider values, one in 64 past 448 (saturates) */
        float amp = c->fp8 ? 8.0f : 1.0f, xk = draw(&s) * amp, xv = draw(&s) * amp;
        if (c->fp8 && (ref_next64(&s) & 63) == 0) xk = xk > 0 ? 600.0f : -500.0f;
        h->kval[i] = put(c, h->kbits, (size_t)i, xk);
        h->vval[i] = put(c, h->vbits, (size_t)i, xv);
    }
    h->nq = c->batch * c->hq * c->d;
    h->qbits = malloc(sizeof *h->qbits * (size_t)h->nq);
    h->q = malloc(sizeof *h->q * (size_t)h->nq);
    draw_q(h, c->seed ^ 0x5151);
}

static void host_free(host *h) {
    free(h->pt); free(h->kbits); free(h->vbits); free(h->kval); free(h->vval);
    free(h->qbits); free(h->q);
}

/* ---------------------------------------------------------------- reference */
/* The first element of kv head hk's row at offset off of page pg (talon.h's layouts). */
static int64_t cache_row(const dcase *c, int64_t pg, int64_t off, int64_t hk) {
    return (c->hnd ? (pg * c->hk + hk) * c->ps + off : (pg * c->ps + off) * c->hk + hk) * c->d;
}

typedef struct refjob {
    const host *h;
    const int *lens;
    double *o, *lse, *mag, *smax;
    int tid;
} refjob;

static void *ref_worker(void *arg) {
    refjob *r = (refjob *)arg;
    const host *h = r->h;
    const dcase *c = h->c;
    const int64_t group = c->hq / c->hk, rows = c->batch * c->hq;
    const float **kp = malloc(sizeof *kp * (size_t)c->max_kv_len);
    const float **vp = malloc(sizeof *vp * (size_t)c->max_kv_len);
    const double scale = c->sm_scale != 0 ? c->sm_scale : 1.0 / sqrt((double)c->d);
    int64_t row;
    for (row = r->tid; row < rows; row += NTHREADS) {
        const int64_t b = row / c->hq, hq = row % c->hq, hk = hq / group;
        const int64_t len = r->lens[b], lo = c->window > 0 && len > c->window ? len - c->window : 0;
        int64_t t;
        for (t = lo; t < len; t++) {
            const int64_t row = cache_row(c, h->pt[b * h->stride + t / c->ps], t % c->ps, hk);
            kp[t - lo] = h->kval + row;
            vp[t - lo] = h->vval + row;
        }
        r->lse[row] = ref_attn_decode(h->q + row * c->d, kp, vp, len - lo, c->d, scale, c->cap,
                                      c->fp8 ? c->k_scale : 1.0, c->fp8 ? c->v_scale : 1.0,
                                      r->o + row * c->d, r->mag + row * c->d, &r->smax[row]);
    }
    free(kp);
    free(vp);
    return NULL;
}

/* Compares the device output with the reference; returns 0 on pass. */
static int compare(const dcase *c, const host *h, const int *lens, const uint16_t *o,
                   const float *lse, tally *t, const char *how) {
    const int64_t rows = c->batch * c->hq, n = rows * c->d;
    const double rtol = ref_rtol(c->dtype);
    const double atol = ref_atol(c->dtype);
    double *ro = malloc(sizeof *ro * (size_t)n), *mag = malloc(sizeof *mag * (size_t)n);
    double *rl = malloc(sizeof *rl * (size_t)rows), *smax = malloc(sizeof *smax * (size_t)rows);
    pthread_t th[NTHREADS];
    refjob jobs[NTHREADS];
    int64_t i, bad = 0;
    char first[512] = "";
    for (i = 0; i < NTHREADS; i++) {
        jobs[i] = (refjob){h, lens, ro, rl, mag, smax, (int)i};
        pthread_create(&th[i], NULL, ref_worker, &jobs[i]);
    }
    for (i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    for (i = 0; i < n; i++) {
        const double dev = ref_to_f32(c->dtype, o[i]), ref = ro[i];
        const double tol = rtol * fabs(ref) + atol + 0x1p-14 * mag[i], err = fabs(dev - ref);
        if (!(err <= tol)) {
            if (!bad++)
                snprintf(first, sizeof first, "o[b=%lld, h=%lld, d=%lld] = %.8g (bits 0x%04x), ref %.8g, tol %.3g",
                         (long long)(i / c->d / c->hq), (long long)(i / c->d % c->hq),
                         (long long)(i % c->d), dev, o[i], ref, tol);
        } else if (err / tol > t->worst) t->worst = err / tol;
    }
    t->elements += n;
    if (!c->no_lse) {
        for (i = 0; i < rows; i++) {
            const double ref = rl[i], dev = lse[i];
            const double tol = 0x1p-16 * (1 + fabs(ref) + smax[i]);
            int ok = ref == -INFINITY ? dev == -INFINITY : fabs(dev - ref) <= tol;
            if (!ok) {
                if (!bad++)
                    snprintf(first, sizeof first, "lse[b=%lld, h=%lld] = %.9g, ref %.9g, tol %.3g",
                             (long long)(i / c->hq), (long long)(i % c->hq), dev, ref, tol);
            } else if (ref != -INFINITY && fabs(dev - ref) / tol > t->worst)
                t->worst = fabs(dev - ref) / tol;
        }
        t->elements += rows;
    }
    free(ro); free(mag); free(rl); free(smax);
    t->cases++;
    if (bad) {
        char d[512];
        describe(c, d, sizeof d);
        t->failures++;
        print_error("FAILED [%s] %s\n    %lld mismatches; first: %s\n", how, d, (long long)bad, first);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- one case */
typedef struct dev {
    CUdeviceptr q, o, lse, k, v, pt, lens, ws;
    int64_t ws_bytes;
} dev;

static void fill_args(const dcase *c, const dev *d, talon_decode_attention_args *a) {
    memset(a, 0, sizeof *a);
    a->o = d->o; a->lse = c->no_lse ? 0 : d->lse; a->q = d->q; a->k_cache = d->k; a->v_cache = d->v;
    a->page_table = d->pt; a->kv_lens = d->lens; a->workspace = d->ws;
    a->workspace_bytes = d->ws_bytes;
    a->batch = c->batch; a->num_qo_heads = c->hq; a->num_kv_heads = c->hk; a->head_dim = c->d;
    a->page_size = c->ps; a->max_kv_len = c->max_kv_len; a->window = c->window;
    a->num_splits = c->splits; a->sm_scale = c->sm_scale; a->logits_soft_cap = c->cap;
    a->page_table_stride = c->pt_pad ? (c->max_kv_len + c->ps - 1) / c->ps + c->pt_pad : 0;
    a->k_scale = c->k_scale; a->v_scale = c->v_scale;
    a->dtype = c->dtype;
    a->kv_dtype = c->fp8 ? TALON_DTYPE_FP8_E4M3 : c->dtype;
    a->layout = c->hnd ? TALON_KV_HND : TALON_KV_NHD;
}

static void poison(const dcase *c, const dev *d) {
    GPU_CK(cu.cuMemsetD8(d->o, 0xff, (size_t)(c->batch * c->hq * c->d * 2)));
    GPU_CK(cu.cuMemsetD8(d->lse, 0xff, (size_t)(c->batch * c->hq * 4)));
    if (d->ws_bytes) GPU_CK(cu.cuMemsetD8(d->ws, 0xff, (size_t)d->ws_bytes));
}

/* Runs a case directly, or (replays > 0) captured once into a graph and replayed with each
   of the `replays` length sets and fresh queries. */
static void run_case(tally *t, const dcase *c, int replays, const int (*replay_lens)[MAXB]) {
    host h;
    dev d;
    talon_decode_attention_args a;
    int alloc[MAXB], r, b;
    const int64_t rows = c->batch * c->hq;
    uint16_t *o = malloc(sizeof *o * (size_t)(rows * c->d));
    float *lse = malloc(sizeof *lse * (size_t)rows);
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    talon_status st;
    for (b = 0; b < c->batch; b++) alloc[b] = replays ? (int)c->max_kv_len : c->lens[b];
    host_make(&h, c, alloc);
    memset(&d, 0, sizeof d);
    d.q = gpu_alloc((size_t)h.nq * 2);
    d.o = gpu_alloc((size_t)(rows * c->d * 2));
    d.lse = gpu_alloc((size_t)rows * 4);
    d.k = gpu_alloc(h.cache_elems * h.esize);
    d.v = gpu_alloc(h.cache_elems * h.esize);
    d.pt = gpu_alloc(sizeof(int32_t) * (size_t)(c->batch * h.stride));
    d.lens = gpu_alloc(sizeof(int32_t) * (size_t)c->batch);
    GPU_CK(cu.cuMemcpyHtoD(d.q, h.qbits, (size_t)h.nq * 2));
    GPU_CK(cu.cuMemcpyHtoD(d.k, h.kbits, h.cache_elems * h.esize));
    GPU_CK(cu.cuMemcpyHtoD(d.v, h.vbits, h.cache_elems * h.esize));
    GPU_CK(cu.cuMemcpyHtoD(d.pt, h.pt, sizeof(int32_t) * (size_t)(c->batch * h.stride)));
    GPU_CK(cu.cuMemcpyHtoD(d.lens, c->lens, sizeof(int32_t) * (size_t)c->batch));
    fill_args(c, &d, &a);
    st = talon_decode_attention_workspace_size(g_ctx, &a, &d.ws_bytes);
    if (st != TALON_SUCCESS) print_error("workspace_size: %s\n", talon_last_error());
    d.ws = d.ws_bytes ? gpu_alloc((size_t)d.ws_bytes) : 0; /* exactly the size asked for */
    fill_args(c, &d, &a);
    if (!replays) {
        poison(c, &d);
        GPU_CK(cu.cuCtxSynchronize());
        st = talon_decode_attention(g_ctx, g_stream, &a);
        if (st != TALON_SUCCESS) print_error("talon_decode_attention: %s\n", talon_last_error());
        GPU_CK(cu.cuStreamSynchronize(g_stream));
        GPU_CK(cu.cuMemcpyDtoH(o, d.o, sizeof *o * (size_t)(rows * c->d)));
        GPU_CK(cu.cuMemcpyDtoH(lse, d.lse, sizeof *lse * (size_t)rows));
        if (st != TALON_SUCCESS || gpu_call_failed) { t->failures++; t->cases++; gpu_call_failed = 0; }
        else compare(c, &h, c->lens, o, lse, t, "direct");
    } else {
        GPU_CK(cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
        st = talon_decode_attention(g_ctx, g_stream, &a);
        GPU_CK(cu.cuStreamEndCapture(g_stream, &graph));
        if (st != TALON_SUCCESS) print_error("captured talon_decode_attention: %s\n", talon_last_error());
        if (graph) GPU_CK(cu.cuGraphInstantiateWithFlags(&exec, graph, 0));
        for (r = 0; r < replays && exec && st == TALON_SUCCESS; r++) {
            dcase cr = *c;
            memcpy(cr.lens, replay_lens[r], sizeof cr.lens);
            draw_q(&h, c->seed + 977u * (unsigned)(r + 1));
            GPU_CK(cu.cuMemcpyHtoD(d.q, h.qbits, (size_t)h.nq * 2));
            GPU_CK(cu.cuMemcpyHtoD(d.lens, cr.lens, sizeof(int32_t) * (size_t)c->batch));
            poison(c, &d);
            GPU_CK(cu.cuCtxSynchronize());
            GPU_CK(cu.cuGraphLaunch(exec, g_stream));
            GPU_CK(cu.cuStreamSynchronize(g_stream));
            GPU_CK(cu.cuMemcpyDtoH(o, d.o, sizeof *o * (size_t)(rows * c->d)));
            GPU_CK(cu.cuMemcpyDtoH(lse, d.lse, sizeof *lse * (size_t)rows));
            if (gpu_call_failed) break;
            compare(&cr, &h, cr.lens, o, lse, t, "graph replay");
        }
        if (st != TALON_SUCCESS || !exec || gpu_call_failed) { t->failures++; t->cases++; gpu_call_failed = 0; }
        if (exec) cu.cuGraphExecDestroy(exec);
        if (graph) cu.cuGraphDestroy(graph);
    }
    cu.cuMemFree(d.q); cu.cuMemFree(d.o); cu.cuMemFree(d.lse); cu.cuMemFree(d.k);
    cu.cuMemFree(d.v); cu.cuMemFree(d.pt); cu.cuMemFree(d.lens);
    if (d.ws) cu.cuMemFree(d.ws);
    host_free(&h);
    free(o);
    free(lse);
}

static dcase base_case(int64_t d, int64_t hq, int64_t hk, int64_t ps, const int *lens, int n,
                       uint64_t seed) {
    dcase c;
    int i;
    memset(&c, 0, sizeof c);
    c.d = d; c.hq = hq; c.hk = hk; c.ps = ps; c.batch = n;
    for (i = 0; i < n; i++) {
        c.lens[i] = lens[i];
        if (lens[i] > c.max_kv_len) c.max_kv_len = lens[i];
    }
    c.qamp = 1.0f;
    c.k_scale = 0.75f;
    c.v_scale = 1.25f;
    c.seed = ref_mix64(seed);
    return c;
}

/* ---------------------------------------------------------------- tests */
static const int64_t dims[] = {64, 128, 256};
static const int64_t heads[][2] = {{4, 4}, {16, 4}, {16, 2}, {8, 1}};
static const int64_t psizes[] = {16, 1, 64, 256};

static void test_mixed_lengths(void **state) {
    static const int full[] = {1, 15, 16, 17, 1000, 32768}, quick[] = {1, 15, 16, 17, 300};
    tally t;
    int di, hi, kv;
    (void)state;
    tally_start(&t, "mixed lengths x D x GQA x page size x fp8 x NHD/HND");
    for (di = 0; di < 3; di++)
        for (hi = 0; hi < 4; hi++)
            for (kv = 0; kv < 2; kv++) {
                dcase c;
                if (g_quick && kv != (di + hi) % 2) continue;
                c = g_quick ? base_case(dims[di], heads[hi][0], heads[hi][1], psizes[(di + hi) % 4], quick, 5, 100 + di * 8 + hi * 2 + kv)
                            : base_case(dims[di], heads[hi][0], heads[hi][1], psizes[(di + hi) % 4], full, 6, 100 + di * 8 + hi * 2 + kv);
                c.fp8 = kv;
                c.dtype = (hi + kv) % 2 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16;
                c.pt_pad = hi % 2 ? 3 : 0;
                c.hnd = (di + kv) % 2;
                run_case(&t, &c, 0, NULL);
            }
    {   /* the benchmark's shape: 32 query heads over 8 kv heads */
        dcase c = g_quick ? base_case(128, 32, 8, 16, quick, 5, 7) : base_case(128, 32, 8, 16, full, 6, 7);
        run_case(&t, &c, 0, NULL);
    }
    tally_end(&t);
}

static void test_page_sizes(void **state) {
    static const int lens[] = {1, 15, 16, 17, 257, 1000};
    static const int64_t ps_full[] = {1, 2, 4, 8, 16, 32, 64, 128, 256}, ps_quick[] = {1, 2, 16, 256};
    const int64_t *ps = g_quick ? ps_quick : ps_full;
    const int nps = g_quick ? COUNT(ps_quick) : COUNT(ps_full);
    tally t;
    int i;
    (void)state;
    tally_start(&t, "page sizes 1..256, forced splits, NHD/HND");
    for (i = 0; i < nps; i++) {
        dcase c = base_case(128, 8, 2, ps[i], lens, g_quick ? 5 : 6, 200 + i);
        c.splits = i % 2 ? 3 : 0;
        c.fp8 = i % 3 == 2;
        c.dtype = i % 2 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16;
        c.hnd = i % 4 >= 2;
        run_case(&t, &c, 0, NULL);
    }
    tally_end(&t);
}

static void test_group_ratios(void **state) {
    static const int64_t hs[][3] = {{3, 1, 128}, {10, 2, 128}, {24, 2, 64}, {12, 4, 256},
                                    {32, 1, 128}, {64, 8, 64}, {6, 6, 128}, {40, 8, 128},
                                    {16, 8, 128}, {4, 2, 64}, /* these two: 2 heads per CTA */
                                    {56, 8, 128}, {32, 4, 64}, {64, 8, 128}, {32, 2, 256}};
    /* the last four: 7 and 8 heads per CTA (the middle two with fp8 caches), and a group of 16
       at d256 in 4 chunks of 4 */
    static const int full[] = {1, 17, 1000, 2000}, quick[] = {1, 17, 300};
    tally t;
    int i;
    (void)state;
    tally_start(&t, "group ratios 1..32 (GQA 2, 3, 5, 7, 8, 12, 16, MQA)");
    for (i = 0; i < COUNT(hs); i++) {
        dcase c = g_quick ? base_case(hs[i][2], hs[i][0], hs[i][1], 16, quick, 3, 300 + i)
                          : base_case(hs[i][2], hs[i][0], hs[i][1], 16, full, 4, 300 + i);
        c.fp8 = i % 4 == 3 || i == 12;
        c.hnd = i % 3 == 1;
        c.dtype = i % 2 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16;
        run_case(&t, &c, 0, NULL);
    }
    tally_end(&t);
}

static void test_softcap_window(void **state) {
    static const float caps[] = {0.0f, 5.0f, 30.0f};
    static const int64_t windows[] = {0, 1, 16, 100, 5000};
    static const int full[] = {1, 15, 16, 17, 1000, 6000}, quick[] = {1, 15, 17, 300};
    tally t;
    int i, j, n = 0;
    (void)state;
    tally_start(&t, "soft-cap x sliding window");
    for (i = 0; i < COUNT(caps); i++)
        for (j = 0; j < COUNT(windows); j++) {
            dcase c;
            if (g_quick && (i == 1 || j == 1 || j == 3)) continue;
            c = g_quick ? base_case(128, 16, 4, 16, quick, 4, 400 + n)
                        : base_case(128, 16, 4, 16, full, 6, 400 + n);
            c.cap = caps[i];
            c.window = windows[j];
            c.qamp = 4.0f; /* scores of tens: the cap bites and the softmax is peaked */
            c.fp8 = n % 4 == 1;
            c.dtype = n % 2 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16;
            n++;
            run_case(&t, &c, 0, NULL);
        }
    tally_end(&t);
}

/* fp8 caches on the tensor cores take q as f16 scaled by a power of two: bf16 q far outside
   the f16 range (1e6) or below its normals (1e-6) must lose nothing, f16 q near its maximum
   likewise. sm_scale brings the scores back to a few units. */
static void test_fp8_q_range(void **state) {
    static const int full[] = {1, 17, 1000, 3000}, quick[] = {1, 17, 300};
    static const float amps[] = {1e-6f, 1e6f, 3e4f};
    tally t;
    int i;
    (void)state;
    tally_start(&t, "fp8 KV, q amplitudes 1e-6, 3e4 and (bf16) 1e6");
    for (i = 0; i < 12; i++) {
        /* 4 or 8, 2, 1 query heads per kv head */
        const int64_t d = i % 2 ? 64 : 128, hq = i % 3 == 0 ? (i % 9 == 0 ? 32 : 16) : i % 3 == 1 ? 8 : 4;
        dcase c = g_quick ? base_case(d, hq, 4, 16, quick, 3, 800 + i) : base_case(d, hq, 4, 16, full, 4, 800 + i);
        c.fp8 = 1;
        c.qamp = amps[i / 4];
        c.dtype = i / 4 == 1 || i % 4 == 3 ? TALON_DTYPE_BF16 : TALON_DTYPE_F16;
        c.sm_scale = (float)(6.0 / (c.qamp * 8.0 * sqrt((double)d)));
        run_case(&t, &c, 0, NULL);
    }
    tally_end(&t);
}

static void test_empty_and_splits(void **state) {
    static const int lens[] = {0, 5, 0, 1000, 0, 4000};
    static const int64_t splits[] = {0, 1, 2, 4, 64, 256};
    tally t;
    int i;
    (void)state;
    tally_start(&t, "kv_len 0, forced splits up to 256, no lse, odd scales");
    for (i = 0; i < COUNT(splits); i++) {
        dcase c = base_case(i % 2 ? 64 : 128, 8, 2, i % 3 ? 16 : 1, lens, 6, 500 + i);
        if (g_quick) c.lens[5] = 700;
        c.max_kv_len = 4000;
        c.splits = splits[i];
        c.no_lse = i % 2;
        c.sm_scale = 0.3f;
        c.fp8 = i % 3 == 1;
        c.k_scale = 0.37f;
        c.v_scale = 2.5f;
        c.dtype = i % 4 < 2 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16;
        run_case(&t, &c, 0, NULL);
    }
    {   /* a window larger than every length; page size 2 */
        static const int one[] = {3, 9};
        dcase c = base_case(64, 2, 1, 2, one, 2, 599);
        c.window = 1 << 20;
        run_case(&t, &c, 0, NULL);
    }
    tally_end(&t);
}

static void test_graph(void **state) {
    static const int full[][MAXB] = {{4096, 1, 300, 17}, {0, 4000, 16, 2049}, {33, 33, 4096, 1}};
    static const int quick[][MAXB] = {{300, 1, 200, 17}, {0, 299, 16, 100}, {33, 33, 300, 1}};
    const int (*lens)[MAXB] = g_quick ? quick : full;
    tally t;
    int i;
    (void)state;
    tally_start(&t, "graph capture, replays with new kv_lens and q");
    for (i = 0; i < 3; i++) {
        dcase c = base_case(i == 0 ? 128 : i == 1 ? 64 : 256, i == 0 ? 32 : i == 1 ? 8 : 4,
                            i == 0 ? 8 : i == 1 ? 1 : 4, i == 0 ? 16 : i == 1 ? 1 : 256, lens[0], 4,
                            600 + i);
        c.max_kv_len = g_quick ? 300 : 4096;
        c.fp8 = i == 1;
        c.dtype = i == 1 ? TALON_DTYPE_F16 : TALON_DTYPE_BF16;
        if (i == 2) { c.window = 100; c.cap = 20.0f; c.qamp = 3.0f; }
        run_case(&t, &c, 3, lens);
    }
    tally_end(&t);
}

static void test_merge(void **state) {
    static const int64_t rows_l[] = {1, 7, 500}, dims_l[] = {8, 64, 128, 136, 256};
    tally t;
    int ri, di, dt;
    (void)state;
    tally_start(&t, "merge_attention_states (lse -inf on either or both sides)");
    for (ri = 0; ri < COUNT(rows_l); ri++)
        for (di = 0; di < COUNT(dims_l); di++)
            for (dt = 0; dt < 2; dt++) {
                const talon_dtype type = dt ? TALON_DTYPE_F16 : TALON_DTYPE_BF16;
                const int64_t rows = rows_l[ri], d = dims_l[di], n = rows * d;
                const int with_lse = (ri + di + dt) % 3 != 0;
                const double rtol = dt ? 0x1p-10 : 0x1p-7, atol = dt ? 1e-6 : 1e-5;
                uint16_t *oa = malloc(2 * (size_t)n), *ob = malloc(2 * (size_t)n), *o = malloc(2 * (size_t)n);
                float *la = malloc(4 * (size_t)rows), *lb = malloc(4 * (size_t)rows), *l = malloc(4 * (size_t)rows);
                double *va = malloc(8 * (size_t)d), *vb = malloc(8 * (size_t)d), *ro = malloc(8 * (size_t)d);
                CUdeviceptr doa = gpu_alloc(2 * (size_t)n), dob = gpu_alloc(2 * (size_t)n), dout = gpu_alloc(2 * (size_t)n);
                CUdeviceptr dla = gpu_alloc(4 * (size_t)rows), dlb = gpu_alloc(4 * (size_t)rows), dl = gpu_alloc(4 * (size_t)rows);
                uint64_t s = ref_mix64(700 + (uint64_t)(ri * 100 + di * 10 + dt));
                talon_merge_attention_states_args a;
                int64_t i, r, bad = 0;
                talon_status st;
                char first[256] = "";
                for (i = 0; i < n; i++) {
                    oa[i] = ref_from_f32(type, draw(&s));
                    ob[i] = ref_from_f32(type, draw(&s));
                }
                for (r = 0; r < rows; r++) {
                    la[r] = 5.0f * draw(&s);
                    lb[r] = 5.0f * draw(&s);
                    if (r % 5 == 1) la[r] = -INFINITY;
                    if (r % 5 == 2) lb[r] = -INFINITY;
                    if (r % 5 == 3) la[r] = lb[r] = -INFINITY;
                    if (r % 7 == 4) { la[r] = 90.0f; lb[r] = 88.5f; } /* exp would overflow fp32 */
                }
                GPU_CK(cu.cuMemcpyHtoD(doa, oa, 2 * (size_t)n));
                GPU_CK(cu.cuMemcpyHtoD(dob, ob, 2 * (size_t)n));
                GPU_CK(cu.cuMemcpyHtoD(dla, la, 4 * (size_t)rows));
                GPU_CK(cu.cuMemcpyHtoD(dlb, lb, 4 * (size_t)rows));
                GPU_CK(cu.cuMemsetD8(dout, 0xff, 2 * (size_t)n));
                GPU_CK(cu.cuMemsetD8(dl, 0xff, 4 * (size_t)rows));
                memset(&a, 0, sizeof a);
                a.o = dout; a.lse = with_lse ? dl : 0; a.o_a = doa; a.lse_a = dla; a.o_b = dob;
                a.lse_b = dlb; a.rows = rows; a.head_dim = d; a.dtype = type;
                st = talon_merge_attention_states(g_ctx, g_stream, &a);
                if (st != TALON_SUCCESS) print_error("merge: %s\n", talon_last_error());
                GPU_CK(cu.cuStreamSynchronize(g_stream));
                GPU_CK(cu.cuMemcpyDtoH(o, dout, 2 * (size_t)n));
                GPU_CK(cu.cuMemcpyDtoH(l, dl, 4 * (size_t)rows));
                for (r = 0; r < rows; r++) {
                    double lse, m = la[r] > lb[r] ? la[r] : lb[r];
                    double wa = m == -INFINITY ? 0 : exp(la[r] - m), wb = m == -INFINITY ? 0 : exp(lb[r] - m);
                    for (i = 0; i < d; i++) {
                        va[i] = ref_to_f32(type, oa[r * d + i]);
                        vb[i] = ref_to_f32(type, ob[r * d + i]);
                    }
                    lse = ref_attn_merge(va, la[r], vb, lb[r], d, ro);
                    for (i = 0; i < d; i++) {
                        const double dev = ref_to_f32(type, o[r * d + i]);
                        const double mag = wa + wb > 0 ? (wa * fabs(va[i]) + wb * fabs(vb[i])) / (wa + wb) : 0;
                        const double tol = rtol * fabs(ro[i]) + atol + 0x1p-14 * mag, err = fabs(dev - ro[i]);
                        if (!(err <= tol)) {
                            if (!bad++) snprintf(first, sizeof first, "o[%lld, %lld] = %.8g, ref %.8g", (long long)r, (long long)i, dev, ro[i]);
                        } else if (err / tol > t.worst) t.worst = err / tol;
                    }
                    if (with_lse) {
                        const double tol = 0x1p-16 * (1 + fabs(lse));
                        int ok = lse == -INFINITY ? l[r] == -INFINITY : fabs(l[r] - lse) <= tol;
                        if (!ok && !bad++) snprintf(first, sizeof first, "lse[%lld] = %.9g, ref %.9g", (long long)r, (double)l[r], lse);
                    }
                }
                t.cases++;
                t.elements += n + (with_lse ? rows : 0);
                if (bad || st != TALON_SUCCESS || gpu_call_failed) {
                    t.failures++;
                    print_error("FAILED merge %s rows=%lld D=%lld%s: %lld mismatches; first: %s\n",
                                dt ? "f16" : "bf16", (long long)rows, (long long)d, with_lse ? "" : " no-lse",
                                (long long)bad, first);
                    gpu_call_failed = 0;
                }
                free(oa); free(ob); free(o); free(la); free(lb); free(l); free(va); free(vb); free(ro);
                cu.cuMemFree(doa); cu.cuMemFree(dob); cu.cuMemFree(dout);
                cu.cuMemFree(dla); cu.cuMemFree(dlb); cu.cuMemFree(dl);
            }
    tally_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_lengths), cmocka_unit_test(test_page_sizes),
        cmocka_unit_test(test_group_ratios),  cmocka_unit_test(test_softcap_window),
        cmocka_unit_test(test_fp8_q_range), cmocka_unit_test(test_empty_and_splits),
        cmocka_unit_test(test_graph),
        cmocka_unit_test(test_merge),
    };
    gpu_test t;
    int failed;
    if (gpu_test_begin(&t, "test_gpu_decode", CU_STREAM_DEFAULT)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon GPU decode attention", tests, NULL, NULL);
    return gpu_test_end(&t, " against the fp64 reference", (long long)g_cases, (long long)g_elements, failed);
}
