/* GPU tests (H100/H200) of talon_moe_router_topk against tests/router/ref_router.c: ids EXACTLY (the
   reference ranks the same fp32 keys the kernel computes, with the documented tie rule),
   weights within 2^-19 relative + 2^-30 absolute of the fp64 values (32 fp32 ulp: the
   hardware exp of the unbiased softmax, its fp32 sum of up to 512 terms and the rounding of
   x - max, amplified by |x - max| for the small weights; NaN must be NaN where the reference
   says so, and only there).

   Every case: inputs drawn reproducibly and quantised to the logits type on the host; logits
   live in their own allocation laid out with the case's stride and pointer offset, everything
   around the rows (padding, before the pointer, a guard after) holding NaN, which would rank
   first if the kernel read it; outputs poisoned (0xFF: NaN weights, id -1) with a guard after
   them that must stay poisoned; logits and bias must be unchanged afterwards.
   Tests: random inputs over dtype x scoring x bias x renormalize x shapes x layouts;
   adversarial inputs (ties, few distinct values, -inf rows, NaN, +inf, signed zeros, huge
   values, a bias forcing one expert onto every token and half the experts onto none);
   65536 tokens; CUDA graph capture replayed with fresh inputs.
   TALON_TEST_QUICK=1 (for compute-sanitizer) shrinks the shapes; every kernel variant, path,
   fill and graph capture is still covered. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpu.h"
#include "ref.h"
#include "ref_router.h"
#include "talon.h"

#define GUARD 64          /* elements after every tensor that must stay untouched */
#define RTOL 0x1p-19
#define ATOL 0x1p-30
#define MAX_PRINTED 8

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static int64_t g_cases, g_elements;

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---------------------------------------------------------------- cases */
typedef enum fill {
    F_RANDOM,      /* uniform in [-4, 4] (bf16 and f16 quantisation makes ties too) */
    F_EQUAL,       /* every logit 0.5, every bias 0.25: all ties */
    F_FEW,         /* four distinct values: many ties */
    F_NEG_INF,     /* rows all -inf, half -inf, all but one -inf */
    F_NAN,         /* one NaN, all NaN, a quarter NaN of either sign, none */
    F_POS_INF,     /* one +inf, two +inf, +inf and -inf mixed */
    F_ZEROS,       /* -0, +0, -1, +1: -0 must tie with +0 */
    F_HUGE,        /* +-largest finite value of the type, and random */
    F_BIAS_FORCE,  /* bias +1000 on the last expert, -1000 on the first half */
    F_NEAR,        /* within 64 fp32 ulp of 1: keys alike in all but their low bits */
    F_TIE48,       /* 4.5 on experts 1, 5, ..., 189 (48 of 256, 33 of 130): 33 to 64 candidates */
    F_NUM
} fill;
static const char *const fill_name[F_NUM] = {"random", "all equal", "four values", "-inf rows",
                                             "NaN", "+inf", "signed zeros", "huge",
                                             "bias forcing", "near-equal", "48 tied at the top"};

enum layout { L_CONTIG, L_PAD_VEC, L_PAD_ODD, L_MISALIGN, L_NUM };
static const char *const layout_name[L_NUM] = {"contiguous", "padded by 16 bytes", "padded by 3",
                                               "misaligned by one element"};

typedef struct rcase {
    talon_dtype dtype;
    int scoring, renorm, bias;
    int64_t tokens, experts, k;
    int layout;
    fill fill;
    uint64_t seed;
} rcase;

static const char *dtype_name(talon_dtype t) {
    return t == TALON_DTYPE_F32 ? "f32" : t == TALON_DTYPE_BF16 ? "bf16" : "f16";
}

static int describe(const rcase *c, char *buf, size_t len) {
    return snprintf(buf, len,
                    "%s tokens %lld experts %lld k %lld, %s%s%s, %s, %s inputs, seed %llx",
                    dtype_name(c->dtype), (long long)c->tokens, (long long)c->experts,
                    (long long)c->k, c->scoring ? "sigmoid" : "softmax",
                    c->bias ? " + bias" : "", c->renorm ? ", renormalised" : "",
                    layout_name[c->layout], fill_name[c->fill], (unsigned long long)c->seed);
}

/* ---------------------------------------------------------------- one case on the device */
typedef struct result {
    int64_t elements, mismatches, corrupted;
    double worst_ratio, worst_rel; /* weights: |dev - ref| / tolerance, / |ref| */
    char first[400];
    char error[300];
} result;

typedef struct job {
    rcase c;
    size_t esize;
    int64_t stride, offset, logit_elems, outs;
    unsigned char *h_logits, *h_back; /* raw bits in the logits type, whole allocation */
    float *x, *bias;                  /* the quantised values, contiguous; bias [experts] */
    double *ref_w;
    int32_t *ref_ids, *dev_ids;
    float *dev_w;
    CUdeviceptr d_logits, d_bias, d_w, d_ids;
} job;

static uint16_t max_finite_bits(talon_dtype t) { return t == TALON_DTYPE_BF16 ? 0x7f7f : 0x7bff; }

/* Stores v as the logits type at element i of the allocation; returns the value stored. */
static float put(job *j, int64_t i, float v) {
    if (j->c.dtype == TALON_DTYPE_F32) {
        memcpy(j->h_logits + 4 * i, &v, 4);
        return v;
    }
    {
        uint16_t b = ref_from_f32(j->c.dtype, v);
        memcpy(j->h_logits + 2 * i, &b, 2);
        return ref_to_f32(j->c.dtype, b);
    }
}

static float draw(job *j, uint64_t *s, int64_t t, int64_t e, int64_t e0, int64_t e1) {
    const float u = ref_unit01(s) * 8.f - 4.f;
    float big = 3.4028235e38f;
    if (j->c.dtype != TALON_DTYPE_F32) big = ref_to_f32(j->c.dtype, max_finite_bits(j->c.dtype));
    switch (j->c.fill) {
    case F_EQUAL: return 0.5f;
    case F_FEW: return (float)(ref_next64(s) % 4) * 0.25f - 0.5f;
    case F_NEG_INF:
        if (t % 3 == 0) return -INFINITY;
        if (t % 3 == 1) return ref_next64(s) % 2 ? -INFINITY : u;
        return e == e0 ? u : -INFINITY;
    case F_NAN:
        if (t % 4 == 0) return e == e0 ? NAN : u;
        if (t % 4 == 1) return NAN;
        if (t % 4 == 2) {
            const uint64_t r = ref_next64(s) % 8;
            return r == 0 ? NAN : r == 1 ? -NAN : u;
        }
        return u;
    case F_POS_INF:
        if (t % 3 == 0) return e == e0 ? INFINITY : u;
        if (t % 3 == 1) return e == e0 || e == e1 ? INFINITY : u;
        switch (ref_next64(s) % 5) {
        case 0: return INFINITY;
        case 1: return -INFINITY;
        default: return u;
        }
    case F_ZEROS: {
        static const float z[4] = {-0.f, 0.f, -1.f, 1.f};
        return z[ref_next64(s) % 4];
    }
    case F_NEAR: return 1.f + (float)(ref_next64(s) % 64) * 0x1p-23f;
    case F_TIE48: return e % 4 == 1 && e < 193 ? 4.5f : u;
    case F_HUGE:
        switch (ref_next64(s) % 3) {
        case 0: return big;
        case 1: return -big;
        default: return u * 1e4f;
        }
    default: return u;
    }
}

/* Fresh inputs from seed: host values, reference, upload. Outputs poisoned. */
static int job_fill(job *j, uint64_t seed) {
    const rcase *c = &j->c;
    const float nan = NAN;
    uint64_t s = seed;
    CUresult e;
    int64_t i, t, x;
    for (i = 0; i < j->logit_elems; i++) put(j, i, nan);
    for (t = 0; t < c->tokens; t++) {
        const int64_t e0 = (int64_t)(ref_next64(&s) % (uint64_t)c->experts);
        const int64_t e1 = (int64_t)(ref_next64(&s) % (uint64_t)c->experts);
        for (x = 0; x < c->experts; x++)
            j->x[t * c->experts + x] =
                put(j, j->offset + t * j->stride + x, draw(j, &s, t, x, e0, e1));
    }
    for (x = 0; x < c->experts; x++) {
        float b = ref_unit01(&s) * 0.2f - 0.1f;
        if (c->fill == F_EQUAL) b = 0.25f;
        if (c->fill == F_BIAS_FORCE) b = x == c->experts - 1 ? 1000.f : x < c->experts / 2 ? -1000.f : 0.f;
        j->bias[x] = b;
    }
    for (x = c->experts; x < c->experts + GUARD; x++) j->bias[x] = nan;
    ref_moe_router_topk(j->x, c->bias ? j->bias : NULL, c->tokens, (int)c->experts, (int)c->k,
                        c->scoring, c->renorm, j->ref_w, j->ref_ids);
    if ((e = cu.cuMemcpyHtoD(j->d_logits, j->h_logits, (size_t)j->logit_elems * j->esize)) ||
        (e = cu.cuMemcpyHtoD(j->d_bias, j->bias, sizeof(float) * (size_t)(c->experts + GUARD))) ||
        (e = cu.cuMemsetD8(j->d_w, 0xFF, sizeof(float) * (size_t)(j->outs + GUARD))) ||
        (e = cu.cuMemsetD8(j->d_ids, 0xFF, sizeof(int32_t) * (size_t)(j->outs + GUARD))))
        return (int)e;
    return 0;
}

static void job_free(job *j) {
    if (j->d_logits) cu.cuMemFree(j->d_logits);
    if (j->d_bias) cu.cuMemFree(j->d_bias);
    if (j->d_w) cu.cuMemFree(j->d_w);
    if (j->d_ids) cu.cuMemFree(j->d_ids);
    free(j->h_logits); free(j->h_back); free(j->x); free(j->bias);
    free(j->ref_w); free(j->ref_ids); free(j->dev_ids); free(j->dev_w);
    memset(j, 0, sizeof *j);
}

static int job_make(job *j, const rcase *c) {
    CUresult e;
    memset(j, 0, sizeof *j);
    j->c = *c;
    j->esize = c->dtype == TALON_DTYPE_F32 ? 4 : 2;
    j->stride = c->experts;
    if (c->layout == L_PAD_VEC) j->stride += 16 / (int64_t)j->esize;
    if (c->layout == L_PAD_ODD) j->stride += 3;
    j->offset = c->layout == L_MISALIGN ? 1 : 0;
    j->logit_elems = j->offset + c->tokens * j->stride + GUARD;
    j->outs = c->tokens * c->k;
    j->h_logits = malloc((size_t)j->logit_elems * j->esize);
    j->h_back = malloc((size_t)j->logit_elems * j->esize);
    j->x = malloc(sizeof(float) * (size_t)(c->tokens * c->experts));
    j->bias = malloc(sizeof(float) * (size_t)(c->experts + GUARD));
    j->ref_w = malloc(sizeof(double) * (size_t)j->outs);
    j->ref_ids = malloc(sizeof(int32_t) * (size_t)j->outs);
    j->dev_w = malloc(sizeof(float) * (size_t)(j->outs + GUARD));
    j->dev_ids = malloc(sizeof(int32_t) * (size_t)(j->outs + GUARD));
    if (!j->h_logits || !j->h_back || !j->x || !j->bias || !j->ref_w || !j->ref_ids ||
        !j->dev_w || !j->dev_ids)
        return -1;
    if ((e = cu.cuMemAlloc(&j->d_logits, (size_t)j->logit_elems * j->esize)) ||
        (e = cu.cuMemAlloc(&j->d_bias, sizeof(float) * (size_t)(c->experts + GUARD))) ||
        (e = cu.cuMemAlloc(&j->d_w, sizeof(float) * (size_t)(j->outs + GUARD))) ||
        (e = cu.cuMemAlloc(&j->d_ids, sizeof(int32_t) * (size_t)(j->outs + GUARD))))
        return (int)e;
    return job_fill(j, c->seed);
}

static talon_moe_router_topk_args job_args(const job *j) {
    talon_moe_router_topk_args a;
    memset(&a, 0, sizeof a);
    a.topk_weights = j->d_w;
    a.topk_ids = j->d_ids;
    a.logits = j->d_logits + (CUdeviceptr)(j->offset * (int64_t)j->esize);
    a.correction_bias = j->c.bias ? j->d_bias : 0;
    a.tokens = j->c.tokens;
    a.experts = j->c.experts;
    a.k = j->c.k;
    a.logits_stride = j->c.layout == L_CONTIG ? 0 : j->stride;
    a.logits_dtype = j->c.dtype;
    a.scoring = (talon_router_scoring)j->c.scoring;
    a.renormalize = j->c.renorm;
    return a;
}

/* Downloads and compares every output element and the guards; accumulates into r. */
static int job_check(job *j, result *r) {
    const rcase *c = &j->c;
    const uint32_t poison = 0xFFFFFFFFu;
    CUresult e;
    int64_t i, bad = 0;
    float bias_back[512 + GUARD];
    if ((e = cu.cuMemcpyDtoH(j->dev_w, j->d_w, sizeof(float) * (size_t)(j->outs + GUARD))) ||
        (e = cu.cuMemcpyDtoH(j->dev_ids, j->d_ids, sizeof(int32_t) * (size_t)(j->outs + GUARD))) ||
        (e = cu.cuMemcpyDtoH(j->h_back, j->d_logits, (size_t)j->logit_elems * j->esize)) ||
        (e = cu.cuMemcpyDtoH(bias_back, j->d_bias, sizeof(float) * (size_t)(c->experts + GUARD)))) {
        snprintf(r->error, sizeof r->error, "download failed: %s", gpu_error(e));
        return -1;
    }
    for (i = 0; i < j->outs; i++) {
        const double ref = j->ref_w[i], dev = j->dev_w[i];
        const double tol = RTOL * fabs(ref) + ATOL;
        int ok = j->dev_ids[i] == j->ref_ids[i];
        if (isnan(ref) || isnan(dev)) {
            ok = ok && isnan(ref) && isnan(dev);
        } else {
            const double err = fabs(dev - ref);
            ok = ok && err <= tol;
            if (err / tol > r->worst_ratio) r->worst_ratio = err / tol;
            if (ref != 0.0 && err / fabs(ref) > r->worst_rel) r->worst_rel = err / fabs(ref);
        }
        r->elements += 2;
        if (!ok && bad++ == 0)
            snprintf(r->first, sizeof r->first,
                     "first mismatch at token %lld, output %lld: id %d weight %.9g, expected "
                     "id %d weight %.9g (tolerance %.3g)",
                     (long long)(i / c->k), (long long)(i % c->k), j->dev_ids[i], dev,
                     j->ref_ids[i], ref, tol);
    }
    r->mismatches += bad;
    for (i = j->outs; i < j->outs + GUARD; i++)
        if (memcmp(&j->dev_w[i], &poison, 4) || memcmp(&j->dev_ids[i], &poison, 4)) r->corrupted++;
    if (memcmp(j->h_back, j->h_logits, (size_t)j->logit_elems * j->esize)) r->corrupted++;
    if (memcmp(bias_back, j->bias, sizeof(float) * (size_t)(c->experts + GUARD))) r->corrupted++;
    if (r->corrupted && !r->first[0])
        snprintf(r->first, sizeof r->first, "the guard after the outputs or an input changed");
    /* The forcing bias: the last expert leads every token, the first half is never chosen. */
    if (c->fill == F_BIAS_FORCE && c->bias)
        for (i = 0; i < j->outs; i++)
            if ((i % c->k == 0 && j->dev_ids[i] != c->experts - 1) ||
                (c->k <= c->experts - c->experts / 2 && j->dev_ids[i] < c->experts / 2)) {
                r->mismatches++;
                snprintf(r->first, sizeof r->first, "bias forcing: token %lld output %lld is %d",
                         (long long)(i / c->k), (long long)(i % c->k), j->dev_ids[i]);
                break;
            }
    return r->mismatches || r->corrupted ? -1 : 0;
}

static int run_case(const rcase *c, result *r) {
    job j;
    talon_moe_router_topk_args a;
    int rc = -1;
    CUresult e;
    memset(r, 0, sizeof *r);
    if (job_make(&j, c)) {
        snprintf(r->error, sizeof r->error, "setup failed");
    } else {
        a = job_args(&j);
        if (talon_moe_router_topk(g_ctx, g_stream, &a) != TALON_SUCCESS)
            snprintf(r->error, sizeof r->error, "talon_moe_router_topk: %s", talon_last_error());
        else if ((e = cu.cuStreamSynchronize(g_stream)) != CUDA_SUCCESS)
            snprintf(r->error, sizeof r->error, "kernel failed: %s", gpu_error(e));
        else
            rc = job_check(&j, r);
    }
    job_free(&j);
    return rc;
}

/* ---------------------------------------------------------------- bookkeeping */
typedef struct tally {
    const char *test;
    int64_t cases, failures, elements;
    double worst_ratio, worst_rel;
    struct timespec t0;
} tally;

static void tally_start(tally *t, const char *test) {
    memset(t, 0, sizeof *t);
    t->test = test;
    clock_gettime(CLOCK_MONOTONIC, &t->t0);
}

static void tally_case(tally *t, int rc, const rcase *c, const result *r) {
    t->cases++;
    t->elements += r->elements;
    g_cases++;
    g_elements += r->elements;
    if (r->worst_ratio > t->worst_ratio) t->worst_ratio = r->worst_ratio;
    if (r->worst_rel > t->worst_rel) t->worst_rel = r->worst_rel;
    if (rc == 0) return;
    if (t->failures++ < MAX_PRINTED) {
        char desc[400];
        describe(c, desc, sizeof desc);
        print_error("FAILED %s\n    %lld mismatches, %lld corrupted; %s%s\n", desc,
                    (long long)r->mismatches, (long long)r->corrupted, r->error, r->first);
    }
}

static void tally_end(tally *t) {
    print_message("%s: %lld cases, %lld elements checked (ids exact), worst weight error %.3g "
                  "of the tolerance (%.3g relative), %.1f s\n",
                  t->test, (long long)t->cases, (long long)t->elements, t->worst_ratio,
                  t->worst_rel,
                  gpu_seconds_since(&t->t0));
    if (t->failures) {
        print_error("%s: %lld of %lld cases failed\n", t->test, (long long)t->failures,
                    (long long)t->cases);
        fail();
    }
}

static uint64_t case_seed(const rcase *c) {
    uint64_t h = 0x243F6A8885A308D3ull;
    const int64_t v[] = {c->dtype, c->scoring, c->renorm, c->bias, c->tokens, c->experts,
                         c->k, c->layout, c->fill};
    for (int i = 0; i < COUNT(v); i++) h = ref_mix64(h ^ (uint64_t)v[i]);
    return h;
}

static void run_tallied(tally *t, rcase c) {
    result r;
    int rc;
    c.seed = case_seed(&c);
    rc = run_case(&c, &r);
    tally_case(t, rc, &c, &r);
}

/* ---------------------------------------------------------------- tests */
typedef struct shape { int64_t tokens, experts, k; } shape;
/* Every per-lane size (e128, e256, e512) and path: experts multiples of 8 (16-byte path for
   every type), of 4 but not 8 (f32 only), odd; k = 1, k = experts, k = 16. */
static const shape shapes_full[] = {
    {1, 8, 1}, {7, 64, 6}, {111, 128, 8}, {500, 256, 8}, {4096, 256, 8}, {4096, 128, 8},
    {33, 512, 16}, {64, 500, 9}, {5, 7, 7}, {3, 1, 1}, {9, 111, 16}, {17, 300, 5},
    {2, 129, 3}, {1, 512, 16}, {13, 16, 16}, {9, 136, 3}, {6, 384, 8},
};
static const shape shapes_quick[] = {
    {1, 8, 1}, {7, 64, 6}, {33, 512, 16}, {17, 300, 5}, {5, 7, 7}, {111, 256, 8}, {9, 136, 3},
    {3, 1, 1}, {4, 100, 4},
};

static void test_random(void **state) {
    const talon_dtype dtype = (talon_dtype)(intptr_t)*state;
    const shape *sh = g_quick ? shapes_quick : shapes_full;
    const int nsh = g_quick ? COUNT(shapes_quick) : COUNT(shapes_full);
    char name[64];
    tally t;
    snprintf(name, sizeof name, "random %s", dtype_name(dtype));
    tally_start(&t, name);
    for (int cfg = 0; cfg < 8; cfg++)
        for (int i = 0; i < nsh; i++)
            for (int l = 0; l < L_NUM; l++) {
                rcase c = {dtype, cfg & 1, (cfg >> 1) & 1, cfg >> 2, sh[i].tokens,
                           sh[i].experts, sh[i].k, l, F_RANDOM, 0};
                if (g_quick && c.renorm != ((i + l) & 1)) continue;
                run_tallied(&t, c);
            }
    tally_end(&t);
}

static void test_adversarial(void **state) {
    static const shape sh[] = {{37, 64, 6}, {13, 256, 8}, {9, 7, 7}, {5, 512, 16}, {3, 1, 1},
                               {12, 130, 1}};
    static const talon_dtype dtypes[] = {TALON_DTYPE_F32, TALON_DTYPE_BF16, TALON_DTYPE_F16};
    tally t;
    (void)state;
    tally_start(&t, "adversarial inputs");
    for (int f = 1; f < F_NUM; f++)
        for (int d = 0; d < 3; d++)
            for (int cfg = 0; cfg < 4; cfg++)
                for (int i = 0; i < COUNT(sh); i++)
                    for (int l = 0; l < L_NUM; l += 3) {
                        if (g_quick && l != ((i + cfg) % 2 ? L_MISALIGN : L_CONTIG)) continue;
                        rcase c = {dtypes[d], cfg & 1, (i + l) & 1, cfg >> 1, sh[i].tokens,
                                   sh[i].experts, sh[i].k, l, (fill)f, 0};
                        if (f == F_BIAS_FORCE) c.bias = 1;
                        if (f == F_BIAS_FORCE && sh[i].experts < 2) continue;
                        run_tallied(&t, c);
                    }
    tally_end(&t);
}

static void test_many_tokens(void **state) {
    static const talon_dtype dtypes[] = {TALON_DTYPE_F32, TALON_DTYPE_BF16, TALON_DTYPE_F16};
    tally t;
    (void)state;
    tally_start(&t, "65536 tokens");
    for (int d = 0; d < 3; d++) {
        rcase c = {dtypes[d], d == 1, d == 2, d != 0, 65536, g_quick ? 16 : 256,
                   g_quick ? 4 : 8, L_CONTIG, F_RANDOM, 0};
        run_tallied(&t, c);
    }
    tally_end(&t);
}

/* Captured once on a created stream (ctx preloaded), replayed on fresh inputs each time. */
static void test_graph(void **state) {
    static const rcase cases[] = {
        {TALON_DTYPE_F32, 0, 0, 0, 4096, 128, 8, L_CONTIG, F_RANDOM, 1},
        {TALON_DTYPE_BF16, 1, 1, 1, 333, 256, 8, L_PAD_VEC, F_RANDOM, 2},
        {TALON_DTYPE_F16, 0, 1, 1, 77, 300, 16, L_MISALIGN, F_NAN, 3},
    };
    tally t;
    (void)state;
    tally_start(&t, "graph capture and replay");
    for (int n = 0; n < COUNT(cases); n++) {
        job j;
        result r;
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        CUresult e = CUDA_SUCCESS;
        talon_status s = TALON_SUCCESS;
        int rc = 0;
        memset(&r, 0, sizeof r);
        if (job_make(&j, &cases[n])) {
            snprintf(r.error, sizeof r.error, "setup failed");
            rc = -1;
        } else {
            talon_moe_router_topk_args a = job_args(&j);
            if ((e = cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL)) == 0) {
                s = talon_moe_router_topk(g_ctx, g_stream, &a);
                e = cu.cuStreamEndCapture(g_stream, &graph);
            }
            if (!e && s == TALON_SUCCESS) e = cu.cuGraphInstantiateWithFlags(&exec, graph, 0);
            if (e || s != TALON_SUCCESS) {
                snprintf(r.error, sizeof r.error, "capture failed: %s / %s", gpu_error(e),
                         talon_last_error());
                rc = -1;
            }
            for (int rep = 0; rc == 0 && rep < 3; rep++) {
                /* fresh inputs and poisoned outputs in the same buffers, then replay */
                if (rep && job_fill(&j, cases[n].seed + 1000 * (uint64_t)rep)) rc = -1;
                if (rc == 0 && ((e = cu.cuGraphLaunch(exec, g_stream)) ||
                                (e = cu.cuStreamSynchronize(g_stream)))) {
                    snprintf(r.error, sizeof r.error, "replay failed: %s", gpu_error(e));
                    rc = -1;
                }
                if (rc == 0) rc = job_check(&j, &r);
            }
        }
        if (exec) cu.cuGraphExecDestroy(exec);
        if (graph) cu.cuGraphDestroy(graph);
        job_free(&j);
        tally_case(&t, rc, &cases[n], &r);
    }
    tally_end(&t);
}

/* ---------------------------------------------------------------- main */
int main(void) {
    const struct CMUnitTest tests[] = {
        {"random_f32", test_random, NULL, NULL, (void *)(intptr_t)TALON_DTYPE_F32},
        {"random_bf16", test_random, NULL, NULL, (void *)(intptr_t)TALON_DTYPE_BF16},
        {"random_f16", test_random, NULL, NULL, (void *)(intptr_t)TALON_DTYPE_F16},
        {"adversarial", test_adversarial, NULL, NULL, NULL},
        {"many_tokens", test_many_tokens, NULL, NULL, NULL},
        {"graph_capture_replay", test_graph, NULL, NULL, NULL},
    };
    gpu_test t;
    int failed;
    if (gpu_test_begin(&t, "test_gpu_router", CU_STREAM_DEFAULT)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon_moe_router_topk GPU", tests, NULL, NULL);
    return gpu_test_end(&t, "", (long long)g_cases, (long long)g_elements, failed);
}
