/* GPU tests (H100/H200) for talon_rope and talon_kv_append. Every element of every buffer a
   launch could touch is checked: rotated elements against the fp64 reference (tests/rope/ref_rope.h)
   within the tolerance below; everything else (the v part and padding of a fused qkv buffer,
   dims past rot_dim, guards, tokens whose position is out of the cache, every cache slot not
   written, the inputs of kv_append) bit for bit. Cache slots start poisoned (0xFF bytes: NaN in
   bf16, f16 and e4m3) and each written slot must hold exactly the input (bf16/f16) or the host
   e4m3 conversion of x / scale (fp8). Inputs are random and reproducible, quantised on the host.

   rope tolerance per element: |dev - ref| <= 2^-8 |ref| (bf16; 2^-11 f16: half a unit in the
   last place, what one correct rounding may cost) + (2^-18 + e) (|x| + |y|) (2^-18: fp32
   arithmetic and, in theta mode, fp32 cos/sin of the fp64-reduced angle; e: theta mode's
   documented angle error 1e-14 |position| rad, 0 with a cache) + 2^-25 (f16 subnormals).
   A wrong angle, pair, sign or rounding exceeds it.

   TALON_TEST_QUICK=1 (compute-sanitizer) drops the 4096-token cases and the 500-token
   sweep; every kernel, layout and mode is still run. */
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
#include "ref_rope.h"
#include "talon.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define GUARD 64 /* elements before and after every region */

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static int64_t g_cases, g_elements;

/* ---------------------------------------------------------------- tally */
typedef struct tally {
    const char *test;
    int64_t cases, failures, elements;
    double max_ulp, max_ratio;
} tally;

static void tally_case(tally *t, int ok, int64_t elements, const char *desc, const char *why) {
    t->cases++;
    t->elements += elements;
    g_cases++;
    g_elements += elements;
    if (!ok && t->failures++ < 10) print_error("FAILED %s\n    %s\n", desc, why);
}

static void tally_end(tally *t) {
    print_message("%s: %lld cases, %lld elements checked, worst error %.3f ulp = %.3f of the "
                  "tolerance%s\n", t->test, (long long)t->cases, (long long)t->elements,
                  t->max_ulp, t->max_ratio, t->failures ? "" : ", all passed");
    if (t->failures) {
        print_error("%s: %lld of %lld cases failed\n", t->test, (long long)t->failures,
                    (long long)t->cases);
        fail();
    }
}

/* ---------------------------------------------------------------- device memory */
static CUdeviceptr dalloc(size_t bytes) {
    CUdeviceptr p = 0;
    if (cu.cuMemAlloc(&p, bytes ? bytes : 1) != CUDA_SUCCESS) fail_msg("cuMemAlloc(%zu)", bytes);
    return p;
}
static void up(CUdeviceptr d, const void *h, size_t n) {
    if (cu.cuMemcpyHtoD(d, h, n) != CUDA_SUCCESS) fail_msg("cuMemcpyHtoD");
}
/* The test stream is non-blocking, so it does not wait for the legacy stream that cuMemcpyHtoD
   and cuMemsetD8 use, and these may return before the device has finished them (the poison
   then landed after the kernel when other processes shared the GPU). Called after uploads. */
static void uploads_done(void) {
    if (cu.cuCtxSynchronize() != CUDA_SUCCESS) fail_msg("cuCtxSynchronize");
}
static void down(void *h, CUdeviceptr d, size_t n) {
    if (cu.cuMemcpyDtoH(h, d, n) != CUDA_SUCCESS) fail_msg("cuMemcpyDtoH");
}
static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) fail_msg("malloc(%zu)", n);
    return p;
}

static uint16_t rand_elem(talon_dtype t, uint64_t *st, float range) {
    return ref_from_f32(t, (ref_unit01(st) * 2.0f - 1.0f) * range);
}

static double ulp_of(talon_dtype t, double x) {
    int e;
    frexp(fabs(x), &e); /* |x| in [2^(e-1), 2^e) */
    if (t == TALON_DTYPE_BF16) return ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 7);
    return ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10);
}

/* Buffer layouts of q/k (rope) and k/v (kv_append). */
enum { L_CONTIG, L_FUSED, L_MISALIGN, L_NUM };
static const char *const layout_name[L_NUM] = {"separate contiguous", "fused qkv, padded by 8",
                                               "fused qkv, misaligned, padded by 3"};

/* Where q/k/v live: one allocation of n elements; element offsets and row strides (0 =
   contiguous, passed to talon as is). */
typedef struct qkv_layout {
    int64_t n, q, k, v, q_stride, k_stride, v_stride, row_q, row_k; /* row_*: real stride */
} qkv_layout;

static qkv_layout make_layout(int layout, int64_t tokens, int64_t hq, int64_t hk, int64_t d) {
    qkv_layout l;
    memset(&l, 0, sizeof l);
    if (layout == L_CONTIG) {
        const int64_t qn = (tokens * hq * d + 7) / 8 * 8, kn = (tokens * hk * d + 7) / 8 * 8;
        l.q = GUARD;
        l.k = l.q + qn + GUARD;
        l.v = l.k + kn + GUARD;
        l.n = l.v + kn + GUARD;
        l.row_q = hq * d;
        l.row_k = hk * d;
    } else {
        const int64_t row = (hq + 2 * hk) * d + (layout == L_FUSED ? 8 : 3);
        l.q = GUARD + (layout == L_MISALIGN);
        l.k = l.q + hq * d;
        l.v = l.k + hk * d;
        l.n = l.q + tokens * row + GUARD;
        l.q_stride = l.k_stride = l.v_stride = l.row_q = l.row_k = row;
    }
    return l;
}

/* ================================================================ rope */
typedef struct rope_case {
    talon_dtype dtype;
    int gptj, pos64, theta_mode, layout, q_only;
    int64_t tokens, hq, hk, d, rot;   /* rot 0: head_dim (passed as 0) */
    float theta;                      /* theta mode; 0 = 10000 */
    int64_t max_pos;                  /* cache mode */
    int64_t pos_lo, pos_hi;           /* positions drawn from [lo, hi) */
    uint64_t seed;
} rope_case;

typedef struct rope_job {
    rope_case c;
    qkv_layout l;
    uint16_t *init, *dev;
    void *pos;
    float *cache;
    unsigned char *mask;
    CUdeviceptr d_buf, d_pos, d_cache;
    talon_rope_args a;
} rope_job;

static int64_t rope_pos(const rope_job *j, int64_t t) {
    return j->c.pos64 ? ((const int64_t *)j->pos)[t] : ((const int32_t *)j->pos)[t];
}

static void rope_describe(const rope_case *c, char *buf, size_t n) {
    snprintf(buf, n, "rope %s %s tokens %lld Hq %lld Hk %lld D %lld rot %lld, %s, %s positions "
             "in [%lld, %lld), %s (theta %g, max_pos %lld)%s",
             c->dtype == TALON_DTYPE_BF16 ? "bf16" : "f16", c->gptj ? "GPT-J" : "NeoX",
             (long long)c->tokens, (long long)c->hq, (long long)c->hk, (long long)c->d,
             (long long)(c->rot ? c->rot : c->d), layout_name[c->layout],
             c->pos64 ? "int64" : "int32", (long long)c->pos_lo, (long long)c->pos_hi,
             c->theta_mode ? "theta" : "cos/sin cache", (double)c->theta, (long long)c->max_pos,
             c->q_only ? ", q only" : "");
}

/* Host data for seed: every element of the buffer random, positions, cache. */
static void rope_fill(rope_job *j, uint64_t seed) {
    const rope_case *c = &j->c;
    uint64_t st = seed;
    for (int64_t i = 0; i < j->l.n; i++) j->init[i] = rand_elem(c->dtype, &st, 4.0f);
    for (int64_t t = 0; t < c->tokens; t++) {
        const int64_t p = c->pos_lo + (int64_t)(ref_next64(&st) % (uint64_t)(c->pos_hi - c->pos_lo));
        if (c->pos64) ((int64_t *)j->pos)[t] = p;
        else ((int32_t *)j->pos)[t] = (int32_t)p;
    }
}

static rope_job *rope_prepare(const rope_case *c) {
    rope_job *j = (rope_job *)calloc(1, sizeof *j);
    const int64_t rot = c->rot ? c->rot : c->d;
    j->c = *c;
    j->l = make_layout(c->layout, c->tokens, c->hq, c->q_only ? 0 : c->hk, c->d);
    j->init = (uint16_t *)xmalloc((size_t)j->l.n * 2);
    j->dev = (uint16_t *)xmalloc((size_t)j->l.n * 2);
    j->mask = (unsigned char *)xmalloc((size_t)j->l.n);
    j->pos = xmalloc((size_t)c->tokens * 8);
    j->d_buf = dalloc((size_t)j->l.n * 2);
    j->d_pos = dalloc((size_t)c->tokens * 8);
    if (!c->theta_mode) {
        double *row = (double *)xmalloc((size_t)rot * sizeof(double));
        j->cache = (float *)xmalloc((size_t)(c->max_pos * rot) * 4);
        for (int64_t p = 0; p < c->max_pos; p++) {
            ref_rope_theta_row(row, (double)p, 10000.0, rot);
            for (int64_t i = 0; i < rot; i++) j->cache[p * rot + i] = (float)row[i];
        }
        free(row);
        j->d_cache = dalloc((size_t)(c->max_pos * rot) * 4);
        up(j->d_cache, j->cache, (size_t)(c->max_pos * rot) * 4);
    }
    rope_fill(j, c->seed);
    memset(&j->a, 0, sizeof j->a);
    j->a.q = j->d_buf + (CUdeviceptr)j->l.q * 2;
    j->a.k = c->q_only ? 0 : j->d_buf + (CUdeviceptr)j->l.k * 2;
    j->a.positions = j->d_pos;
    j->a.cos_sin_cache = j->d_cache;
    j->a.tokens = c->tokens;
    j->a.num_q_heads = c->hq;
    j->a.num_kv_heads = c->q_only ? 0 : c->hk;
    j->a.head_dim = c->d;
    j->a.rot_dim = c->rot;
    j->a.q_stride = j->l.q_stride;
    j->a.k_stride = j->l.k_stride;
    j->a.max_pos = c->theta_mode ? 0 : c->max_pos;
    j->a.theta = c->theta;
    j->a.dtype = c->dtype;
    j->a.positions_dtype = c->pos64 ? TALON_INDEX_I64 : TALON_INDEX_I32;
    j->a.style = c->gptj ? TALON_ROPE_GPTJ : TALON_ROPE_NEOX;
    return j;
}

static void rope_upload(rope_job *j) {
    up(j->d_buf, j->init, (size_t)j->l.n * 2);
    up(j->d_pos, j->pos, (size_t)j->c.tokens * (j->c.pos64 ? 8 : 4));
    uploads_done();
}

static void rope_free(rope_job *j) {
    cu.cuMemFree(j->d_buf);
    cu.cuMemFree(j->d_pos);
    if (j->d_cache) cu.cuMemFree(j->d_cache);
    free(j->init); free(j->dev); free(j->mask); free(j->pos); free(j->cache);
    free(j);
}

/* Downloads and checks every element; returns 1 on pass, why on failure. */
static int rope_check(rope_job *j, tally *ta, int64_t *elements, char *why, size_t whylen) {
    const rope_case *c = &j->c;
    const int64_t rot = c->rot ? c->rot : c->d, half = rot / 2;
    const double rhalf = c->dtype == TALON_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    const double atol = c->dtype == TALON_DTYPE_BF16 ? 0 : 0x1p-25;
    const int64_t heads = c->hq + (c->q_only ? 0 : c->hk);
    double *x = (double *)xmalloc((size_t)rot * sizeof(double)), *y = (double *)xmalloc((size_t)rot * sizeof(double));
    double *cs = (double *)xmalloc((size_t)rot * sizeof(double));
    int64_t bad = 0, untouched_bad = 0;
    why[0] = 0;
    down(j->dev, j->d_buf, (size_t)j->l.n * 2);
    memset(j->mask, 0, (size_t)j->l.n);
    for (int64_t t = 0; t < c->tokens; t++) {
        const int64_t p = rope_pos(j, t);
        /* theta mode: the documented angle error, 1e-14 |p| rad (fp64 inv_freq and product) */
        const double noise = 0x1p-18 + (c->theta_mode ? 1e-14 * fabs((double)p) : 0.0);
        if (c->theta_mode) ref_rope_theta_row(cs, (double)p, c->theta ? c->theta : 10000.0, rot);
        else if (p < 0 || p >= c->max_pos) continue; /* must stay unchanged */
        else for (int64_t i = 0; i < rot; i++) cs[i] = j->cache[p * rot + i];
        for (int64_t h = 0; h < heads; h++) {
            const int64_t base = h < c->hq ? j->l.q + t * j->l.row_q + h * c->d
                                           : j->l.k + t * j->l.row_k + (h - c->hq) * c->d;
            for (int64_t i = 0; i < rot; i++) x[i] = ref_to_f32(c->dtype, j->init[base + i]);
            memcpy(y, x, (size_t)rot * sizeof(double));
            ref_rope_head(y, rot, c->gptj, cs);
            for (int64_t i = 0; i < rot; i++) {
                const int64_t partner = c->gptj ? (i ^ 1) : (i < half ? i + half : i - half);
                const double ref = y[i], m = fabs(x[i]) + fabs(x[partner]);
                const double dv = ref_to_f32(c->dtype, j->dev[base + i]);
                const double err = fabs(dv - ref), tol = rhalf * fabs(ref) + noise * m + atol;
                j->mask[base + i] = 1;
                if (!(err <= tol)) {
                    if (!bad++)
                        snprintf(why, whylen, "token %lld (position %lld) head %lld dim %lld: "
                                 "dev %.8g (0x%04x) ref %.8g, |err| %.3g > tol %.3g (input %.8g)",
                                 (long long)t, (long long)p, (long long)h, (long long)i, dv,
                                 j->dev[base + i], ref, err, tol, x[i]);
                    continue;
                }
                if (tol > 0 && err / tol > ta->max_ratio) ta->max_ratio = err / tol;
                if (fabs(ref) > 1e-6 && err / ulp_of(c->dtype, ref) > ta->max_ulp)
                    ta->max_ulp = err / ulp_of(c->dtype, ref);
            }
        }
    }
    for (int64_t i = 0; i < j->l.n; i++)
        if (!j->mask[i] && j->dev[i] != j->init[i] && !untouched_bad++ && !bad)
            snprintf(why, whylen, "element %lld outside the rotated part changed: 0x%04x -> "
                     "0x%04x", (long long)i, j->init[i], j->dev[i]);
    *elements = j->l.n;
    free(x); free(y); free(cs);
    if (bad || untouched_bad) {
        size_t k = strlen(why);
        snprintf(why + k, whylen - k, " [%lld rotated elements wrong, %lld others changed]",
                 (long long)bad, (long long)untouched_bad);
        return 0;
    }
    return 1;
}

/* Records a launch that returned s: synchronises, then check(job) on success. */
typedef int (*check_fn)(void *job, tally *ta, int64_t *elements, char *why, size_t whylen);
static void finish(tally *ta, const char *desc, const char *op, talon_status s, check_fn check,
                   void *job) {
    char why[512] = "";
    int64_t el = 0;
    int ok = 0;
    if (s != TALON_SUCCESS) snprintf(why, sizeof why, "%s: %s", op, talon_last_error());
    else if (cu.cuStreamSynchronize(g_stream) != CUDA_SUCCESS) snprintf(why, sizeof why, "sync failed");
    else ok = check(job, ta, &el, why, sizeof why);
    tally_case(ta, ok, el, desc, why);
}

static int rope_check_job(void *j, tally *ta, int64_t *el, char *why, size_t n) {
    return rope_check((rope_job *)j, ta, el, why, n);
}

static void rope_run(tally *ta, const rope_case *c) {
    rope_job *j = rope_prepare(c);
    char desc[512];
    rope_describe(c, desc, sizeof desc);
    rope_upload(j);
    finish(ta, desc, "talon_rope", talon_rope(g_ctx, g_stream, &j->a), rope_check_job, j);
    rope_free(j);
}

typedef struct shape { int64_t hq, hk, d, rot; } shape;
static const shape rope_shapes[] = {
    {32, 8, 128, 0},  /* Llama-3-8B */
    {8, 8, 64, 0},    /* MHA, D 64 */
    {4, 1, 256, 0},   /* D 256 */
    {2, 1, 128, 32},  /* partial rotary, 32 of 128 */
    {3, 1, 80, 64},   /* partial, D 80: 16-byte path */
    {5, 3, 72, 40},   /* NeoX element-wise (20 pairs), GPT-J 16-byte (rot % 8 == 0) */
    {2, 2, 66, 66},   /* 33 pairs: element-wise */
    {1, 1, 6, 4},     /* tiny */
    {9, 1, 128, 0},   /* 10 heads: a partial group of 8 */
    {2, 1, 1024, 0},  /* the largest head */
};

static rope_case rope_make(talon_dtype dt, const shape *s, int64_t tokens, int gptj, int layout,
                           int variant) {
    rope_case c;
    memset(&c, 0, sizeof c);
    c.dtype = dt;
    c.gptj = gptj;
    c.layout = layout;
    c.tokens = tokens;
    c.hq = s->hq; c.hk = s->hk; c.d = s->d; c.rot = s->rot;
    c.theta_mode = variant & 1;
    c.pos64 = (variant >> 1) & 1;
    c.max_pos = 4096;
    c.pos_lo = 0;
    c.pos_hi = c.theta_mode ? 65536 : 4096;
    c.seed = ref_mix64((uint64_t)tokens * 1000003u ^ (uint64_t)(s - rope_shapes) << 20 ^
                       (uint64_t)gptj << 28 ^ (uint64_t)layout << 30 ^ (uint64_t)variant << 34 ^
                       (uint64_t)dt << 40);
    return c;
}

static void test_rope(void **state) {
    const talon_dtype dt = (talon_dtype)(intptr_t)*state;
    static const int64_t tokens_full[] = {1, 7, 111, 500}, tokens_quick[] = {1, 7, 111};
    const int64_t *tokens = g_quick ? tokens_quick : tokens_full;
    const int ntok = g_quick ? COUNT(tokens_quick) : COUNT(tokens_full);
    tally ta = {dt == TALON_DTYPE_BF16 ? "rope_bf16" : "rope_f16", 0, 0, 0, 0, 0};
    int s, k, g, l, v = 0;
    /* every shape x style x layout x tokens; cache/theta and int32/int64 rotate */
    for (s = 0; s < COUNT(rope_shapes); s++)
        for (g = 0; g < 2; g++)
            for (l = 0; l < L_NUM; l++)
                for (k = 0; k < ntok; k++) {
                    rope_case c = rope_make(dt, &rope_shapes[s], tokens[k], g, l, v++ % 4);
                    if (rope_shapes[s].d == 1024 && tokens[k] > 111) continue;
                    rope_run(&ta, &c);
                }
    /* 4096 tokens, Llama shapes, both styles, both sources, both position types */
    if (!g_quick)
        for (g = 0; g < 2; g++)
            for (v = 0; v < 4; v++) {
                rope_case c = rope_make(dt, &rope_shapes[0], 4096, g, v % 2 ? L_FUSED : L_CONTIG, v);
                rope_run(&ta, &c);
            }
    tally_end(&ta);
}

/* Theta mode at large and negative positions (the fp64 angle), theta 500000; cache mode with
   positions outside [0, max_pos) (those tokens must stay unchanged); q only. */
static void test_rope_positions(void **state) {
    tally ta = {"rope_positions", 0, 0, 0, 0, 0};
    static const struct { int64_t lo, hi; float theta; int pos64, theta_mode; } r[] = {
        {0, 2147483647, 10000, 1, 1},           {-2147483647, 2147483647, 500000, 0, 1},
        {2147000000, 2147483647, 1e6f, 0, 1},   {-100000, 100000, 10000, 1, 1},
        {-50, 4200, 0, 0, 0},                   {-3000000000LL, 3000000000LL, 0, 1, 0},
    };
    (void)state;
    for (int i = 0; i < COUNT(r); i++)
        for (int dt = 0; dt < 2; dt++)
            for (int g = 0; g < 2; g++) {
                rope_case c = rope_make((talon_dtype)dt, &rope_shapes[i % 2 ? 3 : 0], 111, g,
                                        i % L_NUM, 0);
                c.pos_lo = r[i].lo; c.pos_hi = r[i].hi; c.theta = r[i].theta;
                c.pos64 = r[i].pos64; c.theta_mode = r[i].theta_mode;
                c.seed ^= 0x9e37u * (uint64_t)(i + 1);
                rope_run(&ta, &c);
            }
    for (int dt = 0; dt < 2; dt++)
        for (int l = 0; l < L_NUM; l++) {
            rope_case c = rope_make((talon_dtype)dt, &rope_shapes[l], 7, l % 2, l, l);
            c.q_only = 1;
            rope_run(&ta, &c);
        }
    tally_end(&ta);
}

/* ================================================================ kv_append */
typedef struct kv_case {
    talon_dtype dtype;
    int fp8, layout, patterns; /* patterns: k, v hold every 16-bit pattern in turn */
    int hnd;                   /* caches [pages, Hk, page_size, D] */
    float k_scale, v_scale;
    int64_t tokens, hk, d, page_size;
    uint64_t seed;
} kv_case;

typedef struct kv_job {
    kv_case c;
    qkv_layout l;
    int64_t num_pages, slots, row, cache_bytes; /* per cache, guards included */
    uint16_t *init;
    int64_t *slot;
    unsigned char *cache, *dev;  /* k cache then v cache */
    uint16_t *dev_in;
    CUdeviceptr d_buf, d_slot, d_cache;
    talon_kv_append_args a;
} kv_job;

static void kv_describe(const kv_case *c, char *buf, size_t n) {
    snprintf(buf, n, "kv_append %s -> %s %s (scales %g, %g) tokens %lld Hk %lld D %lld page %lld, "
             "%s%s", c->dtype == TALON_DTYPE_BF16 ? "bf16" : "f16", c->hnd ? "HND" : "NHD",
             c->fp8 ? "fp8 e4m3" : "same", (double)c->k_scale, (double)c->v_scale,
             (long long)c->tokens, (long long)c->hk, (long long)c->d, (long long)c->page_size,
             layout_name[c->layout], c->patterns ? ", every bit pattern" : "");
}

/* Inputs, and a scattered slot mapping: a random permutation of the slots, with about 1 in
   8 tokens negative (skipped) and 1 in 16 past the end (skipped). */
static void kv_fill(kv_job *j, uint64_t seed) {
    const kv_case *c = &j->c;
    uint64_t st = seed;
    int64_t *perm = (int64_t *)xmalloc((size_t)j->slots * 8);
    for (int64_t i = 0; i < j->l.n; i++) j->init[i] = rand_elem(c->dtype, &st, c->fp8 ? 600.0f : 4.0f);
    if (c->patterns)
        for (int64_t t = 0, n = 0; t < c->tokens; t++)
            for (int64_t e = 0; e < j->row; e++, n++) {
                j->init[j->l.k + t * j->l.row_k + e] = (uint16_t)n;
                j->init[j->l.v + t * j->l.row_k + e] = (uint16_t)(65535 - n);
            }
    for (int64_t i = 0; i < j->slots; i++) perm[i] = i;
    for (int64_t i = j->slots - 1; i > 0; i--) {
        const int64_t k = (int64_t)(ref_next64(&st) % (uint64_t)(i + 1)), tmp = perm[i];
        perm[i] = perm[k];
        perm[k] = tmp;
    }
    for (int64_t t = 0; t < c->tokens; t++) {
        const uint64_t r = ref_next64(&st) % 16;
        j->slot[t] = c->patterns ? perm[t] : r < 2 ? -1 - (int64_t)r * 1000 : r == 2 ? j->slots + t : perm[t];
    }
    free(perm);
}

static kv_job *kv_prepare(const kv_case *c) {
    kv_job *j = (kv_job *)calloc(1, sizeof *j);
    j->c = *c;
    j->row = c->hk * c->d;
    j->l = make_layout(c->layout, c->tokens, c->layout == L_CONTIG ? 0 : 2 * c->hk, c->hk, c->d);
    if (c->layout == L_CONTIG) { /* k at q's place, v after it: two separate regions */
        j->l.k = GUARD;
        j->l.v = GUARD + (c->tokens * j->row + 7) / 8 * 8 + GUARD;
        j->l.n = j->l.v + c->tokens * j->row + GUARD;
        j->l.row_k = j->row;
    }
    j->num_pages = (c->tokens * 3 / 2 + c->page_size - 1) / c->page_size + 1;
    j->slots = j->num_pages * c->page_size;
    j->cache_bytes = (j->slots * j->row + 2 * GUARD) * (c->fp8 ? 1 : 2);
    j->init = (uint16_t *)xmalloc((size_t)j->l.n * 2);
    j->dev_in = (uint16_t *)xmalloc((size_t)j->l.n * 2);
    j->slot = (int64_t *)xmalloc((size_t)c->tokens * 8);
    j->cache = (unsigned char *)xmalloc((size_t)j->cache_bytes * 2);
    j->dev = (unsigned char *)xmalloc((size_t)j->cache_bytes * 2);
    j->d_buf = dalloc((size_t)j->l.n * 2);
    j->d_slot = dalloc((size_t)c->tokens * 8);
    j->d_cache = dalloc((size_t)j->cache_bytes * 2);
    kv_fill(j, c->seed);
    memset(&j->a, 0, sizeof j->a);
    j->a.k_cache = j->d_cache + (CUdeviceptr)GUARD * (c->fp8 ? 1 : 2);
    j->a.v_cache = j->a.k_cache + (CUdeviceptr)j->cache_bytes;
    j->a.k = j->d_buf + (CUdeviceptr)j->l.k * 2;
    j->a.v = j->d_buf + (CUdeviceptr)j->l.v * 2;
    j->a.slot_mapping = j->d_slot;
    j->a.tokens = c->tokens;
    j->a.num_kv_heads = c->hk;
    j->a.head_dim = c->d;
    j->a.num_pages = j->num_pages;
    j->a.page_size = c->page_size;
    j->a.k_stride = j->l.k_stride;
    j->a.v_stride = j->l.v_stride;
    j->a.k_scale = c->k_scale;
    j->a.v_scale = c->v_scale;
    j->a.dtype = c->dtype;
    j->a.cache_dtype = c->fp8 ? TALON_DTYPE_FP8_E4M3 : c->dtype;
    j->a.layout = c->hnd ? TALON_KV_HND : TALON_KV_NHD;
    return j;
}

static void kv_upload(kv_job *j) {
    up(j->d_buf, j->init, (size_t)j->l.n * 2);
    up(j->d_slot, j->slot, (size_t)j->c.tokens * 8);
    if (cu.cuMemsetD8(j->d_cache, 0xFF, (size_t)j->cache_bytes * 2) != CUDA_SUCCESS)
        fail_msg("cuMemsetD8");
    uploads_done();
}

static void kv_free(kv_job *j) {
    cu.cuMemFree(j->d_buf); cu.cuMemFree(j->d_slot); cu.cuMemFree(j->d_cache);
    free(j->init); free(j->dev_in); free(j->slot); free(j->cache); free(j->dev);
    free(j);
}

/* Cache element of token row element e (= h D + d) at slot s (talon.h's layouts). */
static int64_t kv_elem(const kv_case *c, int64_t s, int64_t e) {
    const int64_t pg = s / c->page_size, off = s % c->page_size, h = e / c->d;
    if (!c->hnd) return s * c->hk * c->d + e;
    return ((pg * c->hk + h) * c->page_size + off) * c->d + e % c->d;
}

static int kv_check(kv_job *j, int64_t *elements, char *why, size_t whylen) {
    const kv_case *c = &j->c;
    const int eb = c->fp8 ? 1 : 2;
    int64_t bad = 0, nan_bad = 0, in_bad = 0;
    why[0] = 0;
    down(j->dev, j->d_cache, (size_t)j->cache_bytes * 2);
    down(j->dev_in, j->d_buf, (size_t)j->l.n * 2);
    memset(j->cache, 0xFF, (size_t)j->cache_bytes * 2);
    for (int64_t t = 0; t < c->tokens; t++) {
        if (j->slot[t] < 0 || j->slot[t] >= j->slots) continue;
        for (int kv = 0; kv < 2; kv++) {
            const int64_t src = (kv ? j->l.v : j->l.k) + t * j->l.row_k;
            unsigned char *dst = j->cache + (size_t)kv * j->cache_bytes + (size_t)GUARD * eb;
            const float scale = (kv ? c->v_scale : c->k_scale) ? (kv ? c->v_scale : c->k_scale) : 1.0f;
            for (int64_t e = 0; e < j->row; e++) {
                const uint16_t b = j->init[src + e];
                const int64_t i = kv_elem(c, j->slot[t], e);
                if (c->fp8) dst[i] = ref_e4m3_from_f32(ref_to_f32(c->dtype, b) / scale);
                else memcpy(dst + 2 * i, &b, 2);
            }
        }
    }
    for (int64_t i = 0; i < j->cache_bytes * 2; i += eb) {
        if (!memcmp(j->cache + i, j->dev + i, (size_t)eb)) continue;
        {
            const int kv = i >= j->cache_bytes;
            const int64_t e = (i - kv * j->cache_bytes) / eb - GUARD;
            if (c->fp8 && (j->cache[i] & 0x7f) == 0x7f) nan_bad++;
            if (!bad++)
                snprintf(why, whylen, "%s cache element %lld (page %lld, row %lld of %lld-element "
                         "rows): dev 0x%02x%02x, expected 0x%02x%02x", kv ? "v" : "k",
                         (long long)e, (long long)(e / (j->row * c->page_size)),
                         (long long)(e % (j->row * c->page_size) / c->d), (long long)c->d,
                         eb == 2 ? j->dev[i + 1] : 0, j->dev[i],
                         eb == 2 ? j->cache[i + 1] : 0, j->cache[i]);
        }
    }
    for (int64_t i = 0; i < j->l.n; i++) in_bad += j->dev_in[i] != j->init[i];
    *elements = j->cache_bytes * 2 / eb + j->l.n;
    if (bad || in_bad) {
        size_t k = strlen(why);
        snprintf(why + k, whylen - k, " [%lld cache elements wrong (%lld where NaN was "
                 "expected), %lld input elements changed]", (long long)bad, (long long)nan_bad,
                 (long long)in_bad);
        return 0;
    }
    return 1;
}

static int kv_check_job(void *j, tally *ta, int64_t *el, char *why, size_t n) {
    (void)ta;
    return kv_check((kv_job *)j, el, why, n);
}

static void kv_run(tally *ta, const kv_case *c) {
    kv_job *j = kv_prepare(c);
    char desc[512];
    kv_describe(c, desc, sizeof desc);
    kv_upload(j);
    finish(ta, desc, "talon_kv_append", talon_kv_append(g_ctx, g_stream, &j->a), kv_check_job, j);
    kv_free(j);
}

static void test_kv_append(void **state) {
    const talon_dtype dt = (talon_dtype)(intptr_t)*state;
    static const int64_t tokens_full[] = {1, 7, 111, 500}, tokens_quick[] = {1, 7, 111};
    static const int64_t pages[] = {1, 16, 256};
    static const struct { int64_t hk, d; } shapes[] = {{8, 128}, {1, 64}, {2, 256}, {3, 80},
                                                       {1, 100}, {2, 7}};
    static const float scales[][2] = {{0, 0}, {0.5f, 2.0f}, {3.0f, 0.1f}};
    const int64_t *tokens = g_quick ? tokens_quick : tokens_full;
    const int ntok = g_quick ? COUNT(tokens_quick) : COUNT(tokens_full);
    tally ta = {dt == TALON_DTYPE_BF16 ? "kv_append_bf16" : "kv_append_f16", 0, 0, 0, 0, 0};
    int n = 0;
    for (int s = 0; s < COUNT(shapes); s++)
        for (int p = 0; p < COUNT(pages); p++)
            for (int f = 0; f < 2; f++)
                for (int l = 0; l < L_NUM; l++)
                    for (int k = 0; k < ntok; k++, n++) {
                        kv_case c;
                        memset(&c, 0, sizeof c);
                        c.dtype = dt; c.fp8 = f; c.layout = l; c.tokens = tokens[k];
                        c.hnd = (l + k) % 2;
                        c.hk = shapes[s].hk; c.d = shapes[s].d; c.page_size = pages[p];
                        c.k_scale = scales[n % 3][0]; c.v_scale = scales[n % 3][1];
                        c.seed = ref_mix64((uint64_t)n * 7919u ^ (uint64_t)dt << 40);
                        kv_run(&ta, &c);
                    }
    if (!g_quick)
        for (int f = 0; f < 2; f++)
            for (int p = 0; p < COUNT(pages); p++) {
                kv_case c;
                memset(&c, 0, sizeof c);
                c.dtype = dt; c.fp8 = f; c.layout = p % 2 ? L_FUSED : L_CONTIG; c.tokens = 4096;
                c.hk = 8; c.d = 128; c.page_size = pages[p]; c.k_scale = f ? 0.75f : 0;
                c.hnd = (f + p) % 2;
                c.seed = ref_mix64((uint64_t)(f * 3 + p) ^ 0xABCDu ^ (uint64_t)dt << 40);
                kv_run(&ta, &c);
            }
    tally_end(&ta);
}

/* Every bf16/f16 bit pattern through the fp8 conversion (and the plain copy), with scales
   that are exact (1, 1/16), inexact (3, 0.1, 1e-3, 1/3, 7), large (200, 1e30) and at the ends
   of the range the kernel's reciprocal division rescales (the smallest normal and subnormal
   floats, a subnormal, FLT_MAX, 3e38): exact bits required. */
static void test_kv_patterns(void **state) {
    static const float scales[] = {1.0f, 0.0625f, 3.0f, 0.1f, 1e-3f, 200.0f, 1.0f / 3.0f, 7.0f,
                                   0x1p-126f, 0x1p-149f, 1e-40f, 1e30f, 3.4028235e38f, 3e38f};
    tally ta = {"kv_append_every_pattern", 0, 0, 0, 0, 0};
    (void)state;
    for (int dt = 0; dt < 2; dt++)
        for (int s = -1; s < COUNT(scales); s++) {
            kv_case c;
            memset(&c, 0, sizeof c);
            c.dtype = (talon_dtype)dt; c.fp8 = s >= 0; c.patterns = 1;
            c.layout = s == 2 ? L_MISALIGN : L_CONTIG; /* one element-wise run */
            c.tokens = 512; c.hk = 1; c.d = 128; c.page_size = 16;
            c.k_scale = s >= 0 ? scales[s] : 0; c.v_scale = s >= 0 ? scales[COUNT(scales) - 1 - s] : 0;
            c.seed = 77u + (uint64_t)s + 100u * (uint64_t)dt;
            kv_run(&ta, &c);
        }
    tally_end(&ta);
}

/* ================================================================ graphs */
/* rope then kv_append captured into one graph (ctx preloaded), replayed twice, each time on
   fresh inputs, positions and slot mappings. */
static void test_graph(void **state) {
    tally ta = {"graph_capture_replay", 0, 0, 0, 0, 0};
    (void)state;
    for (int v = 0; v < 4; v++) {
        const talon_dtype dt = (talon_dtype)(v % 2);
        rope_case rc = rope_make(dt, &rope_shapes[v < 2 ? 0 : 5], 111, v / 2, v % 2 ? L_FUSED : L_MISALIGN, v);
        kv_case kc;
        rope_job *rj = rope_prepare(&rc);
        kv_job *kj;
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        char desc[600], d2[300], why[512];
        talon_status s1, s2;
        memset(&kc, 0, sizeof kc);
        kc.dtype = dt; kc.fp8 = v >= 2; kc.layout = v % 2 ? L_FUSED : L_CONTIG; kc.tokens = 111;
        kc.hk = 8; kc.d = 128; kc.page_size = 16; kc.k_scale = 0.5f; kc.seed = 99u + (uint64_t)v;
        kj = kv_prepare(&kc);
        rope_describe(&rc, desc, sizeof desc);
        kv_describe(&kc, d2, sizeof d2);
        strncat(desc, " + ", sizeof desc - strlen(desc) - 1);
        strncat(desc, d2, sizeof desc - strlen(desc) - 1);
        assert_int_equal(cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
        s1 = talon_rope(g_ctx, g_stream, &rj->a);
        s2 = talon_kv_append(g_ctx, g_stream, &kj->a);
        assert_int_equal(cu.cuStreamEndCapture(g_stream, &graph), CUDA_SUCCESS);
        assert_int_equal(s1, TALON_SUCCESS);
        assert_int_equal(s2, TALON_SUCCESS);
        assert_int_equal(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
        for (int r = 0; r < 2; r++) {
            int64_t e1 = 0, e2 = 0;
            int ok;
            rope_fill(rj, rc.seed + 1000u * (uint64_t)(r + 1));
            kv_fill(kj, kc.seed + 1000u * (uint64_t)(r + 1));
            rope_upload(rj);
            kv_upload(kj);
            assert_int_equal(cu.cuGraphLaunch(exec, g_stream), CUDA_SUCCESS);
            assert_int_equal(cu.cuStreamSynchronize(g_stream), CUDA_SUCCESS);
            ok = rope_check(rj, &ta, &e1, why, sizeof why);
            if (ok) ok = kv_check(kj, &e2, why, sizeof why);
            tally_case(&ta, ok, e1 + e2, desc, why);
        }
        cu.cuGraphExecDestroy(exec);
        cu.cuGraphDestroy(graph);
        rope_free(rj);
        kv_free(kj);
    }
    tally_end(&ta);
}

/* ---------------------------------------------------------------- main */
int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_rope, (void *)(intptr_t)TALON_DTYPE_BF16),
        cmocka_unit_test_prestate(test_rope, (void *)(intptr_t)TALON_DTYPE_F16),
        cmocka_unit_test(test_rope_positions),
        cmocka_unit_test_prestate(test_kv_append, (void *)(intptr_t)TALON_DTYPE_BF16),
        cmocka_unit_test_prestate(test_kv_append, (void *)(intptr_t)TALON_DTYPE_F16),
        cmocka_unit_test(test_kv_patterns),
        cmocka_unit_test(test_graph),
    };
    gpu_test t;
    int failed;
    if (gpu_test_begin(&t, "test_gpu_rope", CU_STREAM_NON_BLOCKING)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon GPU rope/kv_append", tests, NULL, NULL);
    return gpu_test_end(&t, "", (long long)g_cases, (long long)g_elements, failed);
}
