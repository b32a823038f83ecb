/* GPU test (H100/H200) of talon.h's SIZE LIMITS: every op once at a shape whose element offsets
   pass 2^31 (elements, and so bytes): at its largest allowed sizes where those fit in 80 GB
   (router, top-k, moe_align's capacities, merge rows, the GEMM's m, moe_gemm's tokens), else
   just past 2^31 elements (limits such as 2^31 - 1 rows are far beyond any memory). Inputs
   are a periodic pattern (an odd period of 999983 elements, written once from the host and
   doubled on the device by copies), so an offset that wrapped at 2^31 or 2^32 reads other
   values; outputs are poisoned first. A sample of rows (the first, the last, those on each
   side of 2^31 elements and of 2^31 and 2^32 bytes, random ones) is checked against fp64
   references computed on the host for just those rows (exact where the op is exact).
   One line per op: shape, kernel time, elements checked. An op whose buffers do not fit in the
   free device memory is skipped (said so, not a failure). Arguments: substrings of the op
   names to run only those. TALON_TEST_QUICK (compute-sanitizer) skips everything: these
   buffers are too large for memcheck. At most 32.2 GiB at once (decode); the other ops 4 to
   16 GiB each. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu.h"
#include "ref.h"
#include "../decode/ref_attn.h"
#include "../moe/ref_moe.h"
#include "../quant/ref_quant.h"
#include "../rope/ref_rope.h"
#include "../router/ref_router.h"
#include "../topk/ref_topk.h"
#include "talon.h"

#define PE 999983 /* pattern period in elements: odd, so no wrap at a power of two matches it */
#define P31 2147483648LL
#define GIB (1024.0 * 1024.0 * 1024.0)
#define MAXS 96   /* sampled rows per check at most */
#define MAXBUF 12 /* device buffers of one case */

static talon_ctx *g_ctx;
static CUstream g_s;
static CUevent g_ev[2];
static int g_failed, g_run, g_skipped;
static long long g_checked;
static int g_argc;
static char **g_argv;

/* ================================================================ patterns */
enum { K_BF16, K_F32, K_E4M3 };
typedef struct pat {
    int es;          /* bytes per element */
    uint8_t *raw;    /* PE elements as stored */
    double *v;       /* their exact values */
} pat;

/* PE values uniform in [lo, hi), rounded to the kind (e4m3: random finite bytes below 4). */
static void pat_make(pat *p, int kind, uint64_t seed, double lo, double hi) {
    int64_t i;
    p->es = kind == K_F32 ? 4 : kind == K_BF16 ? 2 : 1;
    p->raw = (uint8_t *)malloc((size_t)PE * (size_t)p->es);
    p->v = (double *)malloc((size_t)PE * sizeof(double));
    if (!p->raw || !p->v) abort();
    for (i = 0; i < PE; i++) {
        const uint64_t h = ref_mix64(seed * 0x9E3779B97F4A7C15ull + (uint64_t)i);
        const float x = (float)(lo + (hi - lo) * (double)(h >> 40) * 0x1p-24);
        if (kind == K_BF16) {
            const uint16_t b = ref_from_f32(TALON_DTYPE_BF16, x);
            memcpy(p->raw + 2 * i, &b, 2);
            p->v[i] = ref_to_f32(TALON_DTYPE_BF16, b);
        } else if (kind == K_F32) {
            memcpy(p->raw + 4 * i, &x, 4);
            p->v[i] = x;
        } else {
            const uint8_t b = (uint8_t)((h & 0x80) | (h % 0x48)); /* exponent <= 8: |x| < 4 */
            p->raw[i] = b;
            p->v[i] = ref_e4m3_to_f64(b);
        }
    }
}

static void pat_free(pat *p) {
    free(p->raw);
    free(p->v);
}

static double pv(const pat *p, int64_t i) { return p->v[i % PE]; }
static float pf(const pat *p, int64_t i) { return (float)p->v[i % PE]; }

/* bytes of d = the pattern repeated: one period from the host, then doubling device copies
   (each a whole number of periods, so the period holds). */
static void pat_fill(CUdeviceptr d, size_t bytes, const pat *p) {
    const size_t period = (size_t)PE * (size_t)p->es;
    size_t filled = bytes < period ? bytes : period;
    GPU_CK(cu.cuMemcpyHtoD(d, p->raw, filled));
    while (filled < bytes) {
        const size_t n = bytes - filled < filled ? bytes - filled : filled;
        GPU_CK(cu.cuMemcpyDtoDAsync(d + filled, d, n, g_s));
        filled += n;
    }
    GPU_CK(cu.cuStreamSynchronize(g_s));
}

/* ================================================================ buffers */
static CUdeviceptr g_buf[MAXBUF];
static int g_nbuf;

static void free_all(void) {
    while (g_nbuf > 0) cu.cuMemFree(g_buf[--g_nbuf]);
}

/* Allocates every size (0 ends the list) or none; -1 (after saying why) when they do not fit. */
static int alloc_all(const char *op, CUdeviceptr *out[], const size_t *bytes) {
    size_t need = 0, free_b = 0, total_b = 0;
    int i;
    for (i = 0; bytes[i]; i++) need += bytes[i];
    GPU_CK(cu.cuMemGetInfo(&free_b, &total_b));
    if (need + (512u << 20) > free_b) {
        printf("%-32s skipped: needs %.1f GiB, %.1f GiB free\n", op, need / GIB, free_b / GIB);
        g_skipped++;
        return -1;
    }
    for (i = 0; bytes[i]; i++) {
        CUresult r = cu.cuMemAlloc(out[i], bytes[i]);
        if (r != CUDA_SUCCESS) {
            printf("%-32s skipped: cuMemAlloc(%.1f GiB): %s\n", op, bytes[i] / GIB, gpu_error(r));
            free_all();
            g_skipped++;
            return -1;
        }
        g_buf[g_nbuf++] = *out[i];
    }
    return 0;
}

static void get(void *h, CUdeviceptr base, int64_t byte_off, size_t bytes) {
    GPU_CK(cu.cuMemcpyDtoH(h, base + (CUdeviceptr)byte_off, bytes));
}
static void put(CUdeviceptr base, const void *h, size_t bytes) {
    GPU_CK(cu.cuMemcpyHtoD(base, h, bytes));
}
static void poison(CUdeviceptr d, size_t bytes, unsigned char v) {
    GPU_CK(cu.cuMemsetD8(d, v, bytes));
}

static double bf16_at(const uint16_t *h, int64_t i) { return ref_to_f32(TALON_DTYPE_BF16, h[i]); }

/* ================================================================ samples and checks */
/* Sorted distinct indices of [0, n): the first two, the last `last`, b - 1 and b for each
   boundary b, and `nrand` random ones. */
static int sample(int64_t n, const int64_t *bnd, int nb, int nrand, int last, uint64_t seed,
                  int64_t *out) {
    int64_t c[MAXS * 2];
    int m = 0, i, k = 0;
    c[m++] = 0;
    c[m++] = 1;
    for (i = 0; i < nb; i++) {
        c[m++] = bnd[i] - 1;
        c[m++] = bnd[i];
    }
    for (i = 0; i < last; i++) c[m++] = n - 1 - i;
    for (i = 0; i < nrand; i++) c[m++] = (int64_t)(ref_mix64(seed + (uint64_t)i) % (uint64_t)n);
    for (i = 0; i < m; i++) /* insertion sort, then unique and in range */
        for (k = i; k > 0 && c[k - 1] > c[k]; k--) {
            const int64_t x = c[k];
            c[k] = c[k - 1];
            c[k - 1] = x;
        }
    for (i = 0, k = 0; i < m && k < MAXS; i++)
        if (c[i] >= 0 && c[i] < n && (k == 0 || out[k - 1] != c[i])) out[k++] = c[i];
    return k;
}

/* The rows of a row-major tensor (stride s elements of es bytes) whose first element is the
   first at or past 2^31 elements, 2^31 bytes and 2^32 bytes. */
static int bounds(int64_t s, int es, int64_t *b) {
    b[0] = (P31 + s - 1) / s;
    b[1] = (P31 + s * es - 1) / (s * es);
    b[2] = (2 * P31 + s * es - 1) / (s * es);
    return 3;
}

typedef struct chk {
    long long n, bad;
    char first[320];
} chk;

/* Counts one element: ok when |got - want| <= tol (NaN never is). */
static void check(chk *c, double got, double want, double tol, const char *fmt, ...) {
    c->n++;
    if (fabs(got - want) <= tol || (got == want)) return;
    if (!c->bad++) {
        char where[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(where, sizeof where, fmt, ap);
        va_end(ap);
        snprintf(c->first, sizeof c->first, "%s = %.9g, want %.9g (tol %.3g)", where, got, want,
                 tol);
    }
}

/* The op, timed by events on the stream; -1 (said) when it fails. */
#define TIMED(ms, call)                                                                        \
    do {                                                                                       \
        talon_status st_;                                                                      \
        float f_ = 0;                                                                          \
        GPU_CK(cu.cuEventRecord(g_ev[0], g_s));                                                \
        st_ = (call);                                                                          \
        GPU_CK(cu.cuEventRecord(g_ev[1], g_s));                                                \
        GPU_CK(cu.cuStreamSynchronize(g_s));                                                   \
        GPU_CK(cu.cuEventElapsedTime(&f_, g_ev[0], g_ev[1]));                                  \
        (ms) = f_;                                                                             \
        if (st_ != TALON_SUCCESS) {                                                            \
            printf("%s: %s\n", #call, talon_last_error());                                     \
            g_failed++;                                                                        \
            return;                                                                            \
        }                                                                                      \
    } while (0)

/* Prints the op's line and adds up. */
static void report(const char *op, const char *shape, double ms, const chk *c) {
    printf("%-32s %s: %.2f ms, %lld elements checked, %s%s\n", op, shape, ms, c->n,
           c->bad ? "FAILED: " : gpu_call_failed ? "FAILED: a driver call failed" : "ok",
           c->bad ? c->first : "");
    if (c->bad) printf("%-32s %lld of %lld elements wrong\n", op, c->bad, c->n);
    g_run++;
    g_checked += c->n;
    if (c->bad || gpu_call_failed) g_failed++;
    gpu_call_failed = 0;
    fflush(stdout);
}

static int wanted(const char *name) {
    int i;
    if (g_argc < 2) return 1;
    for (i = 1; i < g_argc; i++)
        if (strstr(name, g_argv[i])) return 1;
    return 0;
}

/* ================================================================ norms */
/* rmsnorm, layernorm, rmsnorm_quant_fp8 (TOKEN), fused_add_rmsnorm on [2^19 + 77, 4096]. */
static void case_norms(void) {
    const int64_t R = (1 << 19) + 77, C = 4096;
    const size_t bytes = (size_t)(R * C * 2);
    const float eps = 1e-6f;
    CUdeviceptr in, out, res, w, bias, scale;
    CUdeviceptr *outs[] = {&in, &out, &res, &w, &bias, &scale};
    const size_t sizes[] = {bytes, bytes, bytes, (size_t)C * 2, (size_t)C * 2, (size_t)R * 4, 0};
    pat pin, pres, pw, pb;
    int64_t rows[MAXS], bnd[3];
    uint16_t *h = (uint16_t *)malloc((size_t)C * 2), *saved;
    uint8_t *q8 = (uint8_t *)malloc((size_t)C), *want8 = (uint8_t *)malloc((size_t)C);
    double *x = (double *)malloc((size_t)C * sizeof(double));
    double *y = (double *)malloc((size_t)C * sizeof(double));
    double *wd = (double *)malloc((size_t)C * sizeof(double));
    double *bd = (double *)malloc((size_t)C * sizeof(double));
    float *yf = (float *)malloc((size_t)C * sizeof(float));
    char shape[128];
    int ns, i;
    int64_t j;
    double ms;
    if (!wanted("talon_rmsnorm talon_layernorm talon_rmsnorm_quant_fp8 talon_fused_add_rmsnorm"))
        return;
    if (alloc_all("talon_rmsnorm (and norms)", outs, sizes)) return;
    pat_make(&pin, K_BF16, 1, -1, 1);
    pat_make(&pres, K_BF16, 2, -1, 1);
    pat_make(&pw, K_BF16, 3, 0.5, 1.5);
    pat_make(&pb, K_BF16, 4, -0.5, 0.5);
    pat_fill(in, bytes, &pin);
    pat_fill(res, bytes, &pres);
    pat_fill(w, (size_t)C * 2, &pw);
    pat_fill(bias, (size_t)C * 2, &pb);
    for (j = 0; j < C; j++) wd[j] = pv(&pw, j), bd[j] = pv(&pb, j);
    ns = sample(R, bnd, bounds(C, 2, bnd), 24, 16, 11, rows);
    saved = (uint16_t *)malloc((size_t)ns * (size_t)C * 2);
    snprintf(shape, sizeof shape, "rows %lld cols %lld bf16 (%.3f x 2^31 elements)", (long long)R,
             (long long)C, (double)(R * C) / (double)P31);

    { /* rmsnorm */
        talon_rmsnorm_args a;
        chk c = {0};
        memset(&a, 0, sizeof a);
        a.out = out; a.in = in; a.weight = w; a.rows = R; a.cols = C; a.eps = eps;
        poison(out, bytes, 0xff);
        TIMED(ms, talon_rmsnorm(g_ctx, g_s, &a));
        for (i = 0; i < ns; i++) {
            get(saved + (size_t)i * C, out, rows[i] * C * 2, (size_t)C * 2);
            for (j = 0; j < C; j++) x[j] = pv(&pin, rows[i] * C + j);
            ref_rmsnorm(x, wd, y, 1, C, eps);
            for (j = 0; j < C; j++)
                check(&c, bf16_at(saved + (size_t)i * C, j), y[j], fabs(y[j]) * 0x1p-7 + 1e-5,
                      "out[%lld, %lld]", (long long)rows[i], (long long)j);
        }
        report("talon_rmsnorm", shape, ms, &c);
    }
    { /* layernorm with a bias */
        talon_layernorm_args a;
        chk c = {0};
        memset(&a, 0, sizeof a);
        a.out = out; a.in = in; a.weight = w; a.bias = bias; a.rows = R; a.cols = C; a.eps = eps;
        poison(out, bytes, 0xff);
        TIMED(ms, talon_layernorm(g_ctx, g_s, &a));
        for (i = 0; i < ns; i++) {
            get(h, out, rows[i] * C * 2, (size_t)C * 2);
            for (j = 0; j < C; j++) x[j] = pv(&pin, rows[i] * C + j);
            ref_layernorm(x, wd, bd, y, 1, C, eps);
            for (j = 0; j < C; j++)
                check(&c, bf16_at(h, j), y[j], fabs(y[j]) * 0x1p-7 + 1e-4, "out[%lld, %lld]",
                      (long long)rows[i], (long long)j);
        }
        report("talon_layernorm", shape, ms, &c);
    }
    { /* rmsnorm to fp8 with per-row scales: bit for bit rmsnorm's rows then quantised */
        talon_rmsnorm_quant_fp8_args a;
        chk c = {0};
        memset(&a, 0, sizeof a);
        a.out = out; a.scale = scale; a.in = in; a.weight = w; a.rows = R; a.cols = C;
        a.eps = eps; a.mode = TALON_QUANT_TOKEN;
        poison(out, bytes, 0xff);
        poison(scale, (size_t)R * 4, 0xff);
        TIMED(ms, talon_rmsnorm_quant_fp8(g_ctx, g_s, &a));
        for (i = 0; i < ns; i++) {
            float s, want_s;
            get(q8, out, rows[i] * C, (size_t)C);
            get(&s, scale, rows[i] * 4, 4);
            for (j = 0; j < C; j++) yf[j] = (float)bf16_at(saved + (size_t)i * C, j);
            want_s = ref_quant_scale(ref_quant_amax(yf, C));
            ref_quant_e4m3(yf, C, want_s, want8);
            check(&c, s, want_s, 0, "scale[%lld]", (long long)rows[i]);
            for (j = 0; j < C; j++)
                check(&c, q8[j], want8[j], 0, "out byte [%lld, %lld]", (long long)rows[i],
                      (long long)j);
        }
        snprintf(shape, sizeof shape, "rows %lld cols %lld bf16 -> e4m3 (%.3f x 2^31 bytes out)",
                 (long long)R, (long long)C, (double)(R * C) / (double)P31);
        report("talon_rmsnorm_quant_fp8", shape, ms, &c);
    }
    { /* fused_add_rmsnorm, in place: residual = round(residual + in), in = rmsnorm of it */
        talon_fused_add_rmsnorm_args a;
        chk c = {0};
        memset(&a, 0, sizeof a);
        a.in = in; a.residual = res; a.weight = w; a.rows = R; a.cols = C; a.eps = eps;
        TIMED(ms, talon_fused_add_rmsnorm(g_ctx, g_s, &a));
        for (i = 0; i < ns; i++) {
            get(h, res, rows[i] * C * 2, (size_t)C * 2);
            for (j = 0; j < C; j++) {
                const float sum = pf(&pres, rows[i] * C + j) + pf(&pin, rows[i] * C + j);
                x[j] = ref_to_f32(TALON_DTYPE_BF16, ref_from_f32(TALON_DTYPE_BF16, sum));
                check(&c, bf16_at(h, j), x[j], 0, "residual[%lld, %lld]", (long long)rows[i],
                      (long long)j);
            }
            get(h, in, rows[i] * C * 2, (size_t)C * 2);
            ref_rmsnorm(x, wd, y, 1, C, eps);
            for (j = 0; j < C; j++)
                check(&c, bf16_at(h, j), y[j], fabs(y[j]) * 0x1p-7 + 1e-5, "in[%lld, %lld]",
                      (long long)rows[i], (long long)j);
        }
        snprintf(shape, sizeof shape, "rows %lld cols %lld bf16 (%.3f x 2^31 elements)",
                 (long long)R, (long long)C, (double)(R * C) / (double)P31);
        report("talon_fused_add_rmsnorm", shape, ms, &c);
    }
    free_all();
    pat_free(&pin); pat_free(&pres); pat_free(&pw); pat_free(&pb);
    free(h); free(saved); free(q8); free(want8); free(x); free(y); free(wd); free(bd); free(yf);
}

/* ================================================================ gated activations */
static void case_act(void) {
    const int64_t R = (1 << 19) + 77, C = 4096;
    const size_t in_bytes = (size_t)(R * 2 * C * 2), out_bytes = (size_t)(R * C * 2);
    CUdeviceptr in, out;
    CUdeviceptr *outs[] = {&in, &out};
    const size_t sizes[] = {in_bytes, out_bytes, 0};
    pat p;
    int64_t rows[MAXS], bnd[3], j;
    uint16_t *h = (uint16_t *)malloc((size_t)C * 2);
    char shape[128];
    int ns, i, g;
    double ms;
    if (!wanted("talon_silu_and_mul talon_gelu_and_mul")) return;
    if (alloc_all("talon_silu_and_mul (and gelu)", outs, sizes)) return;
    pat_make(&p, K_BF16, 5, -3, 3);
    pat_fill(in, in_bytes, &p);
    ns = sample(R, bnd, bounds(2 * C, 2, bnd), 24, 16, 12, rows);
    snprintf(shape, sizeof shape, "rows %lld cols %lld bf16 (in %.3f x 2^31 elements)",
             (long long)R, (long long)C, (double)(R * 2 * C) / (double)P31);
    for (g = 0; g < 2; g++) {
        chk c = {0};
        poison(out, out_bytes, 0xff);
        if (!g) {
            talon_silu_and_mul_args a;
            memset(&a, 0, sizeof a);
            a.out = out; a.in = in; a.rows = R; a.cols = C;
            TIMED(ms, talon_silu_and_mul(g_ctx, g_s, &a));
        } else {
            talon_gelu_and_mul_args a;
            memset(&a, 0, sizeof a);
            a.out = out; a.in = in; a.rows = R; a.cols = C; a.approx = TALON_GELU_TANH;
            TIMED(ms, talon_gelu_and_mul(g_ctx, g_s, &a));
        }
        for (i = 0; i < ns; i++) {
            get(h, out, rows[i] * C * 2, (size_t)C * 2);
            for (j = 0; j < C; j++) {
                const int64_t e = rows[i] * 2 * C + j;
                const double y = ref_act(g ? REF_GELU_TANH : REF_SILU, pv(&p, e)) * pv(&p, e + C);
                check(&c, bf16_at(h, j), y, fabs(y) * 0x1p-7 + 1e-5, "out[%lld, %lld]",
                      (long long)rows[i], (long long)j);
            }
        }
        report(g ? "talon_gelu_and_mul" : "talon_silu_and_mul", shape, ms, &c);
    }
    free_all();
    pat_free(&p);
    free(h);
}

/* ================================================================ MoE routing, top-k */
/* The largest router: 65536 tokens of 256 experts, k 8, bf16 logits rows 32832 apart. */
static void case_router(void) {
    const int64_t T = 65536, E = 256, K = 8, LD = 32832;
    const size_t bytes = (size_t)(T * LD * 2);
    CUdeviceptr logits, wts, ids;
    CUdeviceptr *outs[] = {&logits, &wts, &ids};
    const size_t sizes[] = {bytes, (size_t)(T * K * 4), (size_t)(T * K * 4), 0};
    pat p;
    int64_t rows[MAXS], bnd[3], j;
    float row[256], got_w[8];
    int32_t got_id[8], want_id[8];
    double want_w[8];
    char shape[160];
    int ns, i;
    double ms;
    talon_moe_router_topk_args a;
    chk c = {0};
    if (!wanted("talon_moe_router_topk")) return;
    if (alloc_all("talon_moe_router_topk", outs, sizes)) return;
    pat_make(&p, K_BF16, 6, -4, 4);
    pat_fill(logits, bytes, &p);
    poison(wts, (size_t)(T * K * 4), 0xff);
    poison(ids, (size_t)(T * K * 4), 0xff);
    memset(&a, 0, sizeof a);
    a.topk_weights = wts; a.topk_ids = ids; a.logits = logits; a.tokens = T; a.experts = E;
    a.k = K; a.logits_stride = LD; a.renormalize = 1;
    TIMED(ms, talon_moe_router_topk(g_ctx, g_s, &a));
    ns = sample(T, bnd, bounds(LD, 2, bnd), 40, 16, 13, rows);
    for (i = 0; i < ns; i++) {
        get(got_w, wts, rows[i] * K * 4, (size_t)K * 4);
        get(got_id, ids, rows[i] * K * 4, (size_t)K * 4);
        for (j = 0; j < E; j++) row[j] = pf(&p, rows[i] * LD + j);
        ref_moe_router_topk(row, NULL, 1, (int)E, (int)K, 0, 1, want_w, want_id);
        for (j = 0; j < K; j++) {
            check(&c, got_id[j], want_id[j], 0, "topk_ids[%lld, %lld]", (long long)rows[i],
                  (long long)j);
            check(&c, got_w[j], want_w[j], 1e-5 * fabs(want_w[j]) + 1e-7,
                  "topk_weights[%lld, %lld]", (long long)rows[i], (long long)j);
        }
    }
    snprintf(shape, sizeof shape, "tokens %lld experts %lld k %lld, logits_stride %lld bf16 "
             "(%.3f x 2^31 elements)", (long long)T, (long long)E, (long long)K, (long long)LD,
             (double)(T * LD) / (double)P31);
    report("talon_moe_router_topk", shape, ms, &c);
    free_all();
    pat_free(&p);
}

/* The largest top-k: 1024 rows of 262144 f32, k 1024, rows 2^21 + 4096 apart. */
static void case_topk(void) {
    const int64_t R = 1024, C = 262144, K = 1024, LD = (1 << 21) + 4096;
    const size_t bytes = (size_t)(R * LD * 4);
    CUdeviceptr in, vals, idx, ws;
    CUdeviceptr *outs[] = {&in, &vals, &idx, &ws};
    size_t sizes[] = {bytes, (size_t)(R * K * 4), (size_t)(R * K * 4), 0, 0};
    talon_topk_args a;
    pat p;
    int64_t rows[MAXS], bnd[3], j, wsb = 0;
    float *row = (float *)malloc((size_t)C * 4), got_v[1024];
    int32_t got_i[1024], want_i[1024];
    char shape[160];
    int ns, i;
    double ms;
    chk c = {0};
    if (!wanted("talon_topk")) return;
    memset(&a, 0, sizeof a);
    a.rows = R; a.cols = C; a.k = K; a.in_stride = LD; a.sorted = 1; a.dtype = TALON_DTYPE_F32;
    if (talon_topk_workspace_size(g_ctx, &a, &wsb) != TALON_SUCCESS) {
        printf("talon_topk_workspace_size: %s\n", talon_last_error());
        g_failed++;
        return;
    }
    sizes[3] = (size_t)wsb;
    if (alloc_all("talon_topk", outs, sizes)) return;
    pat_make(&p, K_F32, 7, -1, 1);
    pat_fill(in, bytes, &p);
    poison(vals, (size_t)(R * K * 4), 0xff);
    poison(idx, (size_t)(R * K * 4), 0xff);
    a.out_values = vals; a.out_indices = idx; a.in = in; a.workspace = ws; a.workspace_bytes = wsb;
    TIMED(ms, talon_topk(g_ctx, g_s, &a));
    ns = sample(R, bnd, bounds(LD, 4, bnd), 4, 4, 14, rows);
    for (i = 0; i < ns; i++) {
        get(got_v, vals, rows[i] * K * 4, (size_t)K * 4);
        get(got_i, idx, rows[i] * K * 4, (size_t)K * 4);
        for (j = 0; j < C; j++) row[j] = pf(&p, rows[i] * LD + j);
        ref_topk_row(row, C, K, want_i);
        for (j = 0; j < K; j++) {
            check(&c, got_i[j], want_i[j], 0, "out_indices[%lld, %lld]", (long long)rows[i],
                  (long long)j);
            check(&c, got_v[j], row[want_i[j]], 0, "out_values[%lld, %lld]", (long long)rows[i],
                  (long long)j);
        }
    }
    snprintf(shape, sizeof shape, "rows %lld cols %lld k %lld, in_stride %lld f32 (%.3f x 2^31 "
             "elements)", (long long)R, (long long)C, (long long)K, (long long)LD,
             (double)(R * LD) / (double)P31);
    report("talon_topk", shape, ms, &c);
    free_all();
    pat_free(&p);
    free(row);
}

/* ================================================================ mixture of experts */
/* The largest align: 65536 tokens x 64 slots over 512 experts, both capacities 2^31 - 1. */
static void case_moe_align(void) {
    const int64_t T = 65536, K = 64, E = 512, B = 128, CAP = P31 - 1, N = T * K;
    CUdeviceptr sorted, eids, post, tids;
    CUdeviceptr *outs[] = {&sorted, &eids, &post, &tids};
    const size_t sizes[] = {(size_t)CAP * 4, (size_t)CAP * 4, 16, (size_t)N * 4, 0};
    int32_t *ids = (int32_t *)malloc((size_t)N * 4), *ws = NULL, *we = NULL, *gs = NULL, *ge = NULL;
    int32_t want_post = 0, got_post = -1, v;
    int64_t ws_cap = 0, we_cap = 0, j;
    static const int64_t tail[] = {1LL << 28, 1LL << 29, (1LL << 29) + 1, 1LL << 30,
                                   P31 / 2 + 3, P31 - 64, P31 - 17, P31 - 2};
    talon_moe_align_block_size_args a;
    char shape[160];
    size_t t;
    double ms;
    chk c = {0};
    if (!wanted("talon_moe_align_block_size")) return;
    if (alloc_all("talon_moe_align_block_size", outs, sizes)) return;
    for (j = 0; j < N; j++) { /* 1 in 97 masked (-1) */
        const uint64_t h = ref_mix64(0xA11 + (uint64_t)j);
        ids[j] = h % 97 == 0 ? -1 : (int32_t)((h >> 8) % (uint64_t)E);
    }
    put(tids, ids, (size_t)N * 4);
    poison(sorted, (size_t)CAP * 4, 0xa5);
    poison(eids, (size_t)CAP * 4, 0xa5);
    poison(post, 16, 0xa5);
    memset(&a, 0, sizeof a);
    a.sorted_token_ids = sorted; a.expert_ids = eids; a.num_tokens_post_padded = post;
    a.topk_ids = tids; a.tokens = T; a.k = K; a.experts = E; a.block_size = B;
    a.sorted_capacity = CAP; a.expert_ids_capacity = CAP;
    TIMED(ms, talon_moe_align_block_size(g_ctx, g_s, &a));
    /* the reference over the worst-case capacities; the device's slots past them are padding */
    talon_moe_align_block_size_capacity(T, K, E, B, &ws_cap, &we_cap);
    ws = (int32_t *)malloc((size_t)ws_cap * 4); we = (int32_t *)malloc((size_t)we_cap * 4);
    gs = (int32_t *)malloc((size_t)ws_cap * 4); ge = (int32_t *)malloc((size_t)we_cap * 4);
    if (ref_moe_align(ids, T, K, E, B, ws, ws_cap, we, we_cap, &want_post)) abort();
    get(&got_post, post, 0, 4);
    get(gs, sorted, 0, (size_t)ws_cap * 4);
    get(ge, eids, 0, (size_t)we_cap * 4);
    check(&c, got_post, want_post, 0, "num_tokens_post_padded");
    for (j = 0; j < ws_cap; j++) check(&c, gs[j], ws[j], 0, "sorted_token_ids[%lld]", (long long)j);
    for (j = 0; j < we_cap; j++) check(&c, ge[j], we[j], 0, "expert_ids[%lld]", (long long)j);
    for (t = 0; t < sizeof tail / sizeof tail[0]; t++) {
        get(&v, sorted, tail[t] * 4, 4);
        check(&c, v, (double)N, 0, "sorted_token_ids[%lld]", (long long)tail[t]);
        get(&v, eids, tail[t] * 4, 4);
        check(&c, v, -1, 0, "expert_ids[%lld]", (long long)tail[t]);
    }
    snprintf(shape, sizeof shape, "tokens %lld k %lld experts %lld block %lld, capacities 2^31 - 1 "
             "(%.3f x 2^31 bytes each)", (long long)T, (long long)K, (long long)E, (long long)B,
             (double)CAP * 4 / (double)P31);
    report("talon_moe_align_block_size", shape, ms, &c);
    free_all();
    free(ids); free(ws); free(we); free(gs); free(ge);
}

/* in [2^19 + 77, 2, 4096] -> out [2^19 + 77, 4096], with weights. */
static void case_moe_sum(void) {
    const int64_t T = (1 << 19) + 77, K = 2, H = 4096;
    const size_t in_bytes = (size_t)(T * K * H * 2), out_bytes = (size_t)(T * H * 2);
    CUdeviceptr in, out, w;
    CUdeviceptr *outs[] = {&in, &out, &w};
    const size_t sizes[] = {in_bytes, out_bytes, (size_t)(T * K * 4), 0};
    pat p, pw;
    int64_t rows[MAXS], bnd[3], j;
    uint16_t *h = (uint16_t *)malloc((size_t)H * 2);
    double *x = (double *)malloc((size_t)(K * H) * sizeof(double)), wd[2];
    double *y = (double *)malloc((size_t)H * sizeof(double));
    double *mag = (double *)malloc((size_t)H * sizeof(double));
    talon_moe_sum_args a;
    char shape[160];
    int ns, i;
    double ms;
    chk c = {0};
    if (!wanted("talon_moe_sum")) return;
    if (alloc_all("talon_moe_sum", outs, sizes)) return;
    pat_make(&p, K_BF16, 8, -1, 1);
    pat_make(&pw, K_F32, 9, 0, 1);
    pat_fill(in, in_bytes, &p);
    pat_fill(w, (size_t)(T * K * 4), &pw);
    poison(out, out_bytes, 0xff);
    memset(&a, 0, sizeof a);
    a.out = out; a.in = in; a.weights = w; a.tokens = T; a.k = K; a.hidden = H;
    TIMED(ms, talon_moe_sum(g_ctx, g_s, &a));
    ns = sample(T, bnd, bounds(K * H, 2, bnd), 24, 16, 15, rows);
    for (i = 0; i < ns; i++) {
        get(h, out, rows[i] * H * 2, (size_t)H * 2);
        for (j = 0; j < K * H; j++) x[j] = pv(&p, rows[i] * K * H + j);
        for (j = 0; j < K; j++) wd[j] = pv(&pw, rows[i] * K + j);
        ref_moe_sum(x, wd, y, mag, 1, K, H);
        for (j = 0; j < H; j++)
            check(&c, bf16_at(h, j), y[j], fabs(y[j]) * 0x1p-7 + mag[j] * 0x1p-20 + 1e-6,
                  "out[%lld, %lld]", (long long)rows[i], (long long)j);
    }
    snprintf(shape, sizeof shape, "tokens %lld k %lld hidden %lld bf16 (in %.3f x 2^31 elements)",
             (long long)T, (long long)K, (long long)H, (double)(T * K * H) / (double)P31);
    report("talon_moe_sum", shape, ms, &c);
    free_all();
    pat_free(&p); pat_free(&pw);
    free(h); free(x); free(y); free(mag);
}

/* ================================================================ rope, kv_append, gather */
/* NeoX rope (theta) on q and k views of a fused qkv [400000, 48 heads, 128]. */
static void case_rope(void) {
    const int64_t T = 400000, HQ = 32, HK = 8, D = 128, LD = (HQ + 2 * HK) * D;
    const size_t bytes = (size_t)(T * LD * 2);
    CUdeviceptr qkv, pos;
    CUdeviceptr *outs[] = {&qkv, &pos};
    const size_t sizes[] = {bytes, (size_t)T * 8, 0};
    int64_t *hpos = (int64_t *)malloc((size_t)T * 8), rows[MAXS], bnd[3], j;
    uint16_t *h = (uint16_t *)malloc((size_t)LD * 2);
    double cs[128], x[128];
    talon_rope_args a;
    pat p;
    char shape[160];
    int ns, i, hd;
    double ms;
    chk c = {0};
    if (!wanted("talon_rope")) return;
    if (alloc_all("talon_rope", outs, sizes)) return;
    pat_make(&p, K_BF16, 10, -1, 1);
    pat_fill(qkv, bytes, &p);
    for (j = 0; j < T; j++) hpos[j] = (j * 7919) % 1000003;
    put(pos, hpos, (size_t)T * 8);
    memset(&a, 0, sizeof a);
    a.q = qkv; a.k = qkv + (CUdeviceptr)(HQ * D * 2); a.positions = pos; a.tokens = T;
    a.num_q_heads = HQ; a.num_kv_heads = HK; a.head_dim = D; a.q_stride = LD; a.k_stride = LD;
    a.positions_dtype = TALON_INDEX_I64;
    TIMED(ms, talon_rope(g_ctx, g_s, &a));
    ns = sample(T, bnd, bounds(LD, 2, bnd), 24, 16, 16, rows);
    for (i = 0; i < ns; i++) {
        get(h, qkv, rows[i] * LD * 2, (size_t)LD * 2);
        ref_rope_theta_row(cs, (double)hpos[rows[i]], 10000.0, D);
        for (hd = 0; hd < HQ + 2 * HK; hd++) {
            for (j = 0; j < D; j++) x[j] = pv(&p, rows[i] * LD + hd * D + j);
            if (hd < HQ + HK) ref_rope_head(x, D, 0, cs); /* v heads: untouched */
            for (j = 0; j < D; j++)
                check(&c, bf16_at(h, hd * D + j), x[j],
                      hd < HQ + HK ? fabs(x[j]) * 0x1p-8 + 1e-5 : 0, "qkv[%lld, head %d, %lld]",
                      (long long)rows[i], hd, (long long)j);
        }
    }
    snprintf(shape, sizeof shape, "tokens %lld heads %lld + %lld dim %lld in a qkv of stride %lld "
             "bf16 (%.3f x 2^31 elements)", (long long)T, (long long)HQ, (long long)HK,
             (long long)D, (long long)LD, (double)(T * LD) / (double)P31);
    report("talon_rope", shape, ms, &c);
    free_all();
    pat_free(&p);
    free(hpos); free(h);
}

/* 2^21 + 112 tokens of 8 x 128 into NHD caches of as many slots, token t to slot T - 1 - t. */
static void case_kv_append(void) {
    const int64_t T = (1 << 21) + 112, HK = 8, D = 128, ROW = HK * D, PS = 16;
    const size_t bytes = (size_t)(T * ROW * 2);
    CUdeviceptr k, v, kc, vc, slots;
    CUdeviceptr *outs[] = {&k, &v, &kc, &vc, &slots};
    const size_t sizes[] = {bytes, bytes, bytes, bytes, (size_t)T * 8, 0};
    int64_t *hs = (int64_t *)malloc((size_t)T * 8), rows[MAXS], bnd[3], j;
    uint16_t *h = (uint16_t *)malloc((size_t)ROW * 2);
    talon_kv_append_args a;
    pat pk, pvv;
    char shape[160];
    int ns, i, w;
    double ms;
    chk c = {0};
    if (!wanted("talon_kv_append")) return;
    if (alloc_all("talon_kv_append", outs, sizes)) return;
    pat_make(&pk, K_BF16, 17, -1, 1);
    pat_make(&pvv, K_BF16, 18, -1, 1);
    pat_fill(k, bytes, &pk);
    pat_fill(v, bytes, &pvv);
    poison(kc, bytes, 0xff);
    poison(vc, bytes, 0xff);
    for (j = 0; j < T; j++) hs[j] = T - 1 - j;
    put(slots, hs, (size_t)T * 8);
    memset(&a, 0, sizeof a);
    a.k_cache = kc; a.v_cache = vc; a.k = k; a.v = v; a.slot_mapping = slots; a.tokens = T;
    a.num_kv_heads = HK; a.head_dim = D; a.num_pages = T / PS; a.page_size = PS;
    TIMED(ms, talon_kv_append(g_ctx, g_s, &a));
    ns = sample(T, bnd, bounds(ROW, 2, bnd), 24, 16, 17, rows);
    for (i = 0; i < ns; i++)
        for (w = 0; w < 2; w++) { /* NHD: slot s's row at s x Hk x D */
            get(h, w ? vc : kc, hs[rows[i]] * ROW * 2, (size_t)ROW * 2);
            for (j = 0; j < ROW; j++)
                check(&c, bf16_at(h, j), pv(w ? &pvv : &pk, rows[i] * ROW + j), 0,
                      "%s_cache[slot %lld, %lld]", w ? "v" : "k", (long long)hs[rows[i]],
                      (long long)j);
        }
    snprintf(shape, sizeof shape, "tokens %lld kv heads %lld dim %lld, %lld pages of %lld (NHD) "
             "bf16 (%.3f x 2^31 elements each)", (long long)T, (long long)HK, (long long)D,
             (long long)(T / PS), (long long)PS, (double)(T * ROW) / (double)P31);
    report("talon_kv_append", shape, ms, &c);
    free_all();
    pat_free(&pk); pat_free(&pvv);
    free(hs); free(h);
}

/* [2^19 + 90, 4096] rows gathered from a [2^19 + 50, 4096] table; some indices -1 (zeros). */
static void case_gather(void) {
    const int64_t R = (1 << 19) + 90, IR = (1 << 19) + 50, C = 4096;
    const size_t out_bytes = (size_t)(R * C * 2), in_bytes = (size_t)(IR * C * 2);
    CUdeviceptr in, out, idx;
    CUdeviceptr *outs[] = {&in, &out, &idx};
    const size_t sizes[] = {in_bytes, out_bytes, (size_t)R * 8, 0};
    int64_t *hi = (int64_t *)malloc((size_t)R * 8), rows[MAXS], bnd[3], j;
    uint16_t *h = (uint16_t *)malloc((size_t)C * 2);
    talon_gather_rows_args a;
    pat p;
    char shape[160];
    int ns, i;
    double ms;
    chk c = {0};
    if (!wanted("talon_gather_rows")) return;
    if (alloc_all("talon_gather_rows", outs, sizes)) return;
    pat_make(&p, K_BF16, 19, -1, 1);
    pat_fill(in, in_bytes, &p);
    poison(out, out_bytes, 0xff);
    for (j = 0; j < R; j++) hi[j] = j % 1000 == 999 ? -1 : (j * 7 + 11) % IR;
    hi[0] = hi[R - 1] = IR - 1;
    put(idx, hi, (size_t)R * 8);
    memset(&a, 0, sizeof a);
    a.out = out; a.in = in; a.indices = idx; a.rows = R; a.cols = C; a.in_rows = IR;
    a.index_dtype = TALON_INDEX_I64;
    TIMED(ms, talon_gather_rows(g_ctx, g_s, &a));
    ns = sample(R, bnd, bounds(C, 2, bnd), 24, 16, 18, rows);
    for (i = 0; i < ns; i++) {
        get(h, out, rows[i] * C * 2, (size_t)C * 2);
        for (j = 0; j < C; j++)
            check(&c, bf16_at(h, j), hi[rows[i]] < 0 ? 0.0 : pv(&p, hi[rows[i]] * C + j), 0,
                  "out[%lld, %lld] (index %lld)", (long long)rows[i], (long long)j,
                  (long long)hi[rows[i]]);
    }
    snprintf(shape, sizeof shape, "rows %lld of %lld x %lld bf16 (%.3f x 2^31 elements each)",
             (long long)R, (long long)IR, (long long)C, (double)(IR * C) / (double)P31);
    report("talon_gather_rows", shape, ms, &c);
    free_all();
    pat_free(&p);
    free(hi); free(h);
}

/* ================================================================ attention */
/* Checks o (and lse) of query row `row` (D values from o_host) against the keys k[t], v[t]. */
static void check_attn(chk *c, const char *what, long long row, const uint16_t *o_host, float lse,
                       int has_lse, const double *q, float *const *k, float *const *v, int64_t n,
                       int64_t d, double ptol) {
    double o[256], mag[256], smax = 0, l;
    int64_t i;
    l = ref_attn_decode(q, (const float *const *)k, (const float *const *)v, n, d,
                        1.0 / sqrt((double)d), 0, 1, 1, o, mag, &smax);
    for (i = 0; i < d; i++)
        check(c, bf16_at(o_host, i), o[i], fabs(o[i]) * 0x1p-7 + ptol * mag[i] + 1e-5,
              "%s o[%lld, %lld]", what, row, (long long)i);
    if (has_lse) check(c, lse, l, 1e-4 * (1 + fabs(l) + smax), "%s lse[%lld]", what, row);
}

/* 2^21 + 256 requests of 1 to 40 keys, Hq 8, Hk 2, D 128 (o: 2^31 + 2^18 elements), two
   splits (their partials: 2 x 2^31 floats), HND caches of 2^19 + 3 pages (4.3 GB each). */
static void case_decode(void) {
    const int64_t B = (1 << 21) + 256, HQ = 8, HK = 2, D = 128, PS = 16, NP = (1 << 19) + 3;
    const int64_t MAXL = 40, PTS = 3, ROWS = B * HQ;
    const size_t qbytes = (size_t)(ROWS * D * 2), cbytes = (size_t)(NP * PS * HK * D * 2);
    CUdeviceptr q, o, lse, kc, vc, pt, lens, ws;
    CUdeviceptr *outs[] = {&q, &o, &lse, &kc, &vc, &pt, &lens, &ws};
    size_t sizes[] = {qbytes, qbytes, (size_t)ROWS * 4, cbytes, cbytes, (size_t)(B * PTS * 4),
                      (size_t)B * 4, 0, 0};
    int32_t *hpt = (int32_t *)malloc((size_t)(B * PTS * 4)), *hl = (int32_t *)malloc((size_t)B * 4);
    float *kv = (float *)malloc((size_t)(2 * MAXL * D) * sizeof(float)), *kp[40], *vp[40];
    uint16_t oh[8 * 128];
    float lh[8];
    double qd[128];
    int64_t reqs[MAXS], bnd[3], j, wsb = 0;
    talon_decode_attention_args a;
    pat pq, pk, pvv;
    char shape[200];
    int ns, i, hh;
    double ms;
    chk c = {0};
    if (!wanted("talon_decode_attention")) return;
    memset(&a, 0, sizeof a);
    a.batch = B; a.num_qo_heads = HQ; a.num_kv_heads = HK; a.head_dim = D; a.page_size = PS;
    a.num_pages = NP; a.page_table_stride = PTS; a.max_kv_len = MAXL; a.num_splits = 2;
    a.layout = TALON_KV_HND;
    if (talon_decode_attention_workspace_size(g_ctx, &a, &wsb) != TALON_SUCCESS) {
        printf("talon_decode_attention_workspace_size: %s\n", talon_last_error());
        g_failed++;
        return;
    }
    sizes[7] = (size_t)wsb;
    if (alloc_all("talon_decode_attention", outs, sizes)) return;
    pat_make(&pq, K_BF16, 20, -1, 1);
    pat_make(&pk, K_BF16, 21, -1, 1);
    pat_make(&pvv, K_BF16, 22, -1, 1);
    pat_fill(q, qbytes, &pq);
    pat_fill(kc, cbytes, &pk);
    pat_fill(vc, cbytes, &pvv);
    poison(o, qbytes, 0xff);
    poison(lse, (size_t)ROWS * 4, 0xff);
    for (j = 0; j < B; j++) {
        int64_t e;
        hl[j] = 1 + (int32_t)(ref_mix64(0xDEC + (uint64_t)j) % (uint64_t)MAXL);
        for (e = 0; e < PTS; e++) hpt[j * PTS + e] = (int32_t)((j * PTS + e) * 40503 % NP);
    }
    for (j = 0; j < PTS; j++) hpt[(B - 1) * PTS + j] = (int32_t)(NP - 1 - j); /* the last pages */
    hl[B - 1] = (int32_t)MAXL;
    put(pt, hpt, (size_t)(B * PTS * 4));
    put(lens, hl, (size_t)B * 4);
    a.o = o; a.lse = lse; a.q = q; a.k_cache = kc; a.v_cache = vc; a.page_table = pt;
    a.kv_lens = lens; a.workspace = ws; a.workspace_bytes = wsb;
    TIMED(ms, talon_decode_attention(g_ctx, g_s, &a));
    ns = sample(B, bnd, bounds(HQ * D, 2, bnd), 24, 8, 19, reqs);
    for (i = 0; i < ns; i++) {
        const int64_t b = reqs[i], n = hl[b];
        get(oh, o, b * HQ * D * 2, (size_t)(HQ * D * 2));
        get(lh, lse, b * HQ * 4, (size_t)HQ * 4);
        for (hh = 0; hh < HQ; hh++) {
            const int64_t hk = hh / (HQ / HK);
            int64_t t, e;
            for (t = 0; t < n; t++) { /* HND: ((page Hk + hk) page_size + offset) D */
                const int64_t at = (((int64_t)hpt[b * PTS + t / PS] * HK + hk) * PS + t % PS) * D;
                kp[t] = kv + t * D;
                vp[t] = kv + (MAXL + t) * D;
                for (e = 0; e < D; e++) kp[t][e] = pf(&pk, at + e), vp[t][e] = pf(&pvv, at + e);
            }
            for (e = 0; e < D; e++) qd[e] = pv(&pq, (b * HQ + hh) * D + e);
            check_attn(&c, "decode", (long long)(b * HQ + hh), oh + hh * D, lh[hh], 1, qd, kp, vp,
                       n, D, 0x1p-14);
        }
    }
    snprintf(shape, sizeof shape, "batch %lld Hq %lld Hk %lld dim %lld, 2 splits, %lld pages of "
             "%lld (HND) bf16 (o %.3f x 2^31 elements, workspace %.1f GiB)", (long long)B,
             (long long)HQ, (long long)HK, (long long)D, (long long)NP, (long long)PS,
             (double)(ROWS * D) / (double)P31, wsb / GIB);
    report("talon_decode_attention", shape, ms, &c);
    free_all();
    pat_free(&pq); pat_free(&pk); pat_free(&pvv);
    free(hpt); free(hl); free(kv);
}

/* The most rows (2^22 - 1) of head_dim 520: 2^31 + 2^25 elements in each state. */
static void case_merge(void) {
    const int64_t R = (1 << 22) - 1, D = 520;
    const size_t ob = (size_t)(R * D * 2), lb = (size_t)R * 4;
    CUdeviceptr o, lse, oa, la, obb, lbb;
    CUdeviceptr *outs[] = {&o, &lse, &oa, &la, &obb, &lbb};
    const size_t sizes[] = {ob, lb, ob, lb, ob, lb, 0};
    int64_t rows[MAXS], bnd[3], j;
    uint16_t *h = (uint16_t *)malloc((size_t)D * 2);
    double xa[520], xb[520], y[520];
    talon_merge_attention_states_args a;
    pat pa, pb, pla, plb;
    char shape[160];
    int ns, i;
    double ms;
    chk c = {0};
    if (!wanted("talon_merge_attention_states")) return;
    if (alloc_all("talon_merge_attention_states", outs, sizes)) return;
    pat_make(&pa, K_BF16, 23, -1, 1);
    pat_make(&pb, K_BF16, 24, -1, 1);
    pat_make(&pla, K_F32, 25, -4, 4);
    pat_make(&plb, K_F32, 43, -4, 4);
    pat_fill(oa, ob, &pa);
    pat_fill(obb, ob, &pb);
    pat_fill(la, lb, &pla);
    pat_fill(lbb, lb, &plb);
    poison(o, ob, 0xff);
    poison(lse, lb, 0xff);
    memset(&a, 0, sizeof a);
    a.o = o; a.lse = lse; a.o_a = oa; a.lse_a = la; a.o_b = obb; a.lse_b = lbb; a.rows = R;
    a.head_dim = D;
    TIMED(ms, talon_merge_attention_states(g_ctx, g_s, &a));
    ns = sample(R, bnd, bounds(D, 2, bnd), 24, 16, 20, rows);
    for (i = 0; i < ns; i++) {
        const double lsa = pv(&pla, rows[i]), lsb = pv(&plb, rows[i]);
        double l;
        float got_l;
        get(h, o, rows[i] * D * 2, (size_t)D * 2);
        get(&got_l, lse, rows[i] * 4, 4);
        for (j = 0; j < D; j++) xa[j] = pv(&pa, rows[i] * D + j), xb[j] = pv(&pb, rows[i] * D + j);
        l = ref_attn_merge(xa, lsa, xb, lsb, D, y);
        for (j = 0; j < D; j++)
            check(&c, bf16_at(h, j), y[j],
                  fabs(y[j]) * 0x1p-7 + 1e-5 * (fabs(xa[j]) + fabs(xb[j])) + 1e-6,
                  "o[%lld, %lld]", (long long)rows[i], (long long)j);
        check(&c, got_l, l, 1e-5 * (1 + fabs(l)), "lse[%lld]", (long long)rows[i]);
    }
    snprintf(shape, sizeof shape, "rows %lld head_dim %lld bf16 (%.3f x 2^31 elements each)",
             (long long)R, (long long)D, (double)(R * D) / (double)P31);
    report("talon_merge_attention_states", shape, ms, &c);
    free_all();
    pat_free(&pa); pat_free(&pb); pat_free(&pla); pat_free(&plb);
    free(h);
}

/* Ragged causal requests of 96 to 160 queries (the last up to 255) over 2^20 + 256 tokens,
   16 heads of 128: q, k, v and o of 2^31 + 2^19 elements each. The paged form reads the keys
   from NHD caches (4 kv heads, 2^18 + 5 pages of 16: 4.3 GB each), each request's L = its
   queries plus a cached prefix of up to 64 keys, once with pages of 16 (a TMA box per page)
   and once as pages of 8 (the row gather). */
static int64_t prefill_lengths(int64_t total, int32_t *seq, uint64_t seed) {
    int64_t b = 0, at = 0;
    seq[0] = 0;
    while (at < total) {
        int64_t n = 96 + (int64_t)(ref_mix64(seed + (uint64_t)b) % 65);
        if (total - at - n < 96) n = total - at; /* the last takes the rest (< 256) */
        at += n;
        seq[++b] = (int32_t)at;
    }
    return b;
}

/* Sampled query tokens: which request each is in. */
static int64_t request_of(const int32_t *seq, int64_t batch, int64_t t) {
    int64_t lo = 0, hi = batch; /* seq[lo] <= t < seq[hi] */
    while (hi - lo > 1) {
        const int64_t mid = (lo + hi) / 2;
        if (seq[mid] <= t) lo = mid;
        else hi = mid;
    }
    return lo;
}

static void case_prefill(void) {
    const int64_t TQ = (1 << 20) + 256, H = 16, D = 128, LD = H * D, MAXQ = 255;
    const size_t bytes = (size_t)(TQ * LD * 2);
    CUdeviceptr q, k, v, o, lse, cuq, ws;
    CUdeviceptr *outs[] = {&q, &k, &v, &o, &lse, &cuq, &ws};
    const size_t sizes[] = {bytes, bytes, bytes, bytes, (size_t)(TQ * H * 4), (size_t)TQ * 4,
                            16, 0};
    int32_t *seq = (int32_t *)malloc((size_t)TQ * 4);
    float *kv = (float *)malloc((size_t)(2 * MAXQ * D) * sizeof(float)), *kp[255], *vp[255];
    uint16_t oh[16 * 128];
    float lh[16];
    double qd[128];
    int64_t toks[MAXS], bnd[3], batch;
    talon_prefill_attention_args a;
    pat pq, pk, pvv;
    char shape[200];
    int ns, i, hh;
    double ms;
    chk c = {0};
    if (!wanted("talon_prefill_attention")) return;
    if (alloc_all("talon_prefill_attention", outs, sizes)) return;
    batch = prefill_lengths(TQ, seq, 0x9F11);
    pat_make(&pq, K_BF16, 26, -1, 1);
    pat_make(&pk, K_BF16, 27, -1, 1);
    pat_make(&pvv, K_BF16, 28, -1, 1);
    pat_fill(q, bytes, &pq);
    pat_fill(k, bytes, &pk);
    pat_fill(v, bytes, &pvv);
    poison(o, bytes, 0xff);
    poison(lse, (size_t)(TQ * H * 4), 0xff);
    put(cuq, seq, (size_t)(batch + 1) * 4);
    memset(&a, 0, sizeof a);
    a.o = o; a.lse = lse; a.q = q; a.k = k; a.v = v; a.cu_seqlens_q = cuq; a.cu_seqlens_k = cuq;
    a.workspace = ws; a.workspace_bytes = 16; a.batch = batch; a.total_q = TQ; a.total_kv = TQ;
    a.max_seqlen_q = MAXQ; a.num_qo_heads = H; a.num_kv_heads = H; a.head_dim = D; a.causal = 1;
    TIMED(ms, talon_prefill_attention(g_ctx, g_s, &a));
    ns = sample(TQ, bnd, bounds(LD, 2, bnd), 24, 8, 21, toks);
    for (i = 0; i < ns; i++) {
        const int64_t t = toks[i], b = request_of(seq, batch, t), q0 = seq[b], n = t - q0 + 1;
        get(oh, o, t * LD * 2, (size_t)LD * 2);
        get(lh, lse, t * H * 4, (size_t)H * 4);
        for (hh = 0; hh < H; hh++) { /* causal, self: keys q0 .. t */
            int64_t j, e;
            for (j = 0; j < n; j++) {
                kp[j] = kv + j * D;
                vp[j] = kv + (MAXQ + j) * D;
                for (e = 0; e < D; e++)
                    kp[j][e] = pf(&pk, ((q0 + j) * H + hh) * D + e),
                    vp[j][e] = pf(&pvv, ((q0 + j) * H + hh) * D + e);
            }
            for (e = 0; e < D; e++) qd[e] = pv(&pq, (t * H + hh) * D + e);
            check_attn(&c, "prefill", (long long)(t * H + hh), oh + hh * D, lh[hh], 1, qd, kp, vp,
                       n, D, 0x1p-8);
        }
    }
    snprintf(shape, sizeof shape, "total_q = total_kv %lld (%lld requests, causal) heads %lld dim "
             "%lld bf16 (%.3f x 2^31 elements each)", (long long)TQ, (long long)batch,
             (long long)H, (long long)D, (double)(TQ * LD) / (double)P31);
    report("talon_prefill_attention", shape, ms, &c);
    free_all();
    pat_free(&pq); pat_free(&pk); pat_free(&pvv);
    free(seq); free(kv);
}

static void case_prefill_paged(void) {
    const int64_t TQ = (1 << 20) + 256, HQ = 16, HK = 4, D = 128, LD = HQ * D, NP = (1 << 18) + 5;
    const int64_t MAXQ = 255, PRE = 64, MAXL = MAXQ + PRE, SLOTS = NP * 16;
    const size_t qbytes = (size_t)(TQ * LD * 2), cbytes = (size_t)(SLOTS * HK * D * 2);
    CUdeviceptr q, o, lse, cuq, kc, vc, pt, lens, ws;
    CUdeviceptr *outs[] = {&q, &o, &lse, &cuq, &kc, &vc, &pt, &lens, &ws};
    const size_t sizes[] = {qbytes, qbytes, (size_t)(TQ * HQ * 4), (size_t)TQ * 4, cbytes, cbytes,
                            (size_t)TQ * 4 * 2 + 4096, (size_t)TQ * 4, 16, 0};
    int32_t *seq = (int32_t *)malloc((size_t)TQ * 4), *hl = (int32_t *)malloc((size_t)TQ * 4);
    int32_t *hpt = (int32_t *)malloc((size_t)TQ * 8 + 4096);
    float *kv = (float *)malloc((size_t)(2 * MAXL * D) * sizeof(float)), *kp[319], *vp[319];
    uint16_t oh[16 * 128];
    float lh[16];
    double qd[128];
    int64_t toks[MAXS], bnd[3], batch, b, j;
    talon_prefill_attention_paged_args a;
    pat pq, pk, pvv;
    char shape[240];
    int ns, i, hh, variant;
    double ms;
    if (!wanted("talon_prefill_attention_paged")) return;
    if (alloc_all("talon_prefill_attention_paged", outs, sizes)) return;
    batch = prefill_lengths(TQ, seq, 0x9F12);
    for (b = 0; b < batch; b++) /* the new tokens after a cached prefix */
        hl[b] = seq[b + 1] - seq[b] + (int32_t)(ref_mix64(0x1E45 + (uint64_t)b) % (PRE + 1));
    pat_make(&pq, K_BF16, 29, -1, 1);
    pat_make(&pk, K_BF16, 30, -1, 1);
    pat_make(&pvv, K_BF16, 31, -1, 1);
    pat_fill(q, qbytes, &pq);
    pat_fill(kc, cbytes, &pk);
    pat_fill(vc, cbytes, &pvv);
    put(cuq, seq, (size_t)(batch + 1) * 4);
    put(lens, hl, (size_t)batch * 4);
    for (variant = 0; variant < 2; variant++) {
        const int64_t ps = variant ? 8 : 16, np = SLOTS / ps, pts = (MAXL + ps - 1) / ps;
        chk c = {0};
        /* page ids spread over the whole cache (a multiplier coprime with it), the last
           request's on its last pages */
        for (b = 0; b < batch; b++)
            for (j = 0; j < pts; j++) hpt[b * pts + j] = (int32_t)((b * pts + j) * 7919 % np);
        for (j = 0; j < pts; j++) hpt[(batch - 1) * pts + j] = (int32_t)(np - pts + j);
        put(pt, hpt, (size_t)(batch * pts) * 4);
        poison(o, qbytes, 0xff);
        poison(lse, (size_t)(TQ * HQ * 4), 0xff);
        memset(&a, 0, sizeof a);
        a.o = o; a.lse = lse; a.q = q; a.k_cache = kc; a.v_cache = vc; a.page_table = pt;
        a.kv_lens = lens; a.cu_seqlens_q = cuq; a.workspace = ws; a.workspace_bytes = 16;
        a.batch = batch; a.total_q = TQ; a.max_seqlen_q = MAXQ; a.max_kv_len = MAXL;
        a.num_pages = np; a.page_size = ps; a.page_table_stride = pts; a.num_qo_heads = HQ;
        a.num_kv_heads = HK; a.head_dim = D; a.causal = 1;
        TIMED(ms, talon_prefill_attention_paged(g_ctx, g_s, &a));
        ns = sample(TQ, bnd, bounds(LD, 2, bnd), 24, 8, 22 + (uint64_t)variant, toks);
        for (i = 0; i < ns; i++) {
            const int64_t t = toks[i], rb = request_of(seq, batch, t), nq = seq[rb + 1] - seq[rb];
            const int64_t L = hl[rb], n = t - seq[rb] + L - nq + 1; /* keys 0 .. pos */
            get(oh, o, t * LD * 2, (size_t)LD * 2);
            get(lh, lse, t * HQ * 4, (size_t)HQ * 4);
            for (hh = 0; hh < HQ; hh++) {
                const int64_t hk = hh / (HQ / HK);
                int64_t e;
                for (j = 0; j < n; j++) { /* NHD: (slot Hk + hk) D */
                    const int64_t slot = (int64_t)hpt[rb * pts + j / ps] * ps + j % ps;
                    const int64_t at = (slot * HK + hk) * D;
                    kp[j] = kv + j * D;
                    vp[j] = kv + (MAXL + j) * D;
                    for (e = 0; e < D; e++) kp[j][e] = pf(&pk, at + e), vp[j][e] = pf(&pvv, at + e);
                }
                for (e = 0; e < D; e++) qd[e] = pv(&pq, (t * HQ + hh) * D + e);
                check_attn(&c, "prefill paged", (long long)(t * HQ + hh), oh + hh * D, lh[hh], 1,
                           qd, kp, vp, n, D, 0x1p-8);
            }
        }
        snprintf(shape, sizeof shape, "total_q %lld (%lld requests, causal, up to %lld keys) Hq "
                 "%lld Hk %lld dim %lld, %lld pages of %lld (NHD, %s) bf16 (q %.3f x 2^31 "
                 "elements, caches %.1f GiB each)", (long long)TQ, (long long)batch,
                 (long long)MAXL, (long long)HQ, (long long)HK, (long long)D, (long long)np,
                 (long long)ps, variant ? "row gather" : "a TMA box per page",
                 (double)(TQ * LD) / (double)P31, cbytes / GIB);
        report("talon_prefill_attention_paged", shape, ms, &c);
    }
    free_all();
    pat_free(&pq); pat_free(&pk); pat_free(&pvv);
    free(seq); free(hl); free(hpt); free(kv);
}

/* ================================================================ GEMMs, quantisation */
/* d [2^24, 256] = silu(a [2^24, 256] . b^T + bias) + 0.5 d, bf16: m at its limit, a and d of
   2^32 elements; then e4m3 a with block scales (a_scale [2, 2^24]) into the same d. */
static void case_gemm(void) {
    const int64_t M = 1LL << 24, N = 256, K = 256;
    const size_t abytes = (size_t)(M * K * 2), dbytes = (size_t)(M * N * 2);
    CUdeviceptr a_, b_, d_, bias, as, bs;
    CUdeviceptr *outs[] = {&a_, &b_, &d_, &bias, &as, &bs};
    const size_t sizes[] = {abytes, (size_t)(N * K * 2), dbytes, (size_t)N * 2,
                            (size_t)(2 * M * 4), 64, 0};
    int64_t rows[MAXS], bnd[3], j, kk;
    uint16_t *h = (uint16_t *)malloc((size_t)N * 2);
    double *bd = (double *)malloc((size_t)(N * K) * sizeof(double));
    talon_gemm_args g;
    pat pa, pb, pc, pbias, p8a, p8b, psc;
    char shape[200];
    int ns, i, fp8;
    double ms;
    if (!wanted("talon_gemm")) return;
    if (alloc_all("talon_gemm", outs, sizes)) return;
    pat_make(&pa, K_BF16, 32, -1, 1);
    pat_make(&pb, K_BF16, 33, -1, 1);
    pat_make(&pc, K_BF16, 34, -1, 1);
    pat_make(&pbias, K_BF16, 35, -1, 1);
    pat_make(&p8a, K_E4M3, 36, 0, 0);
    pat_make(&p8b, K_E4M3, 37, 0, 0);
    pat_make(&psc, K_F32, 38, 0.5, 1.5);
    pat_fill(bias, (size_t)N * 2, &pbias);
    ns = sample(M, bnd, bounds(K, 2, bnd), 24, 16, 23, rows);
    for (fp8 = 0; fp8 < 2; fp8++) {
        const pat *A = fp8 ? &p8a : &pa, *B = fp8 ? &p8b : &pb;
        chk c = {0};
        pat_fill(a_, fp8 ? abytes / 2 : abytes, A);
        pat_fill(b_, (size_t)(N * K) * (fp8 ? 1 : 2), B);
        pat_fill(d_, dbytes, &pc); /* the residual c = d */
        if (fp8) pat_fill(as, (size_t)(2 * M * 4), &psc), pat_fill(bs, 64, &psc);
        for (j = 0; j < N * K; j++) bd[j] = pv(B, j);
        memset(&g, 0, sizeof g);
        g.d = d_; g.a = a_; g.b = b_; g.bias = bias; g.c = d_; g.m = M; g.n = N; g.k = K;
        g.beta = 0.5f; g.act = TALON_GEMM_ACT_SILU;
        if (fp8) {
            g.dtype = TALON_DTYPE_FP8_E4M3; g.scale = TALON_GEMM_SCALE_BLOCK;
            g.a_scale = as; g.b_scale = bs;
        }
        TIMED(ms, talon_gemm(g_ctx, g_s, &g));
        for (i = 0; i < ns; i++) {
            const int64_t r = rows[i];
            get(h, d_, r * N * 2, (size_t)N * 2);
            for (j = 0; j < N; j++) {
                double x = pv(&pbias, j), mag = fabs(x), y, cv = pv(&pc, r * N + j);
                int64_t gk;
                for (gk = 0; gk < K / 128; gk++) { /* block scales: a [g][m], b [n / 128][g] */
                    const double s = fp8 ? pv(&psc, gk * M + r) * pv(&psc, (j / 128) * 2 + gk) : 1;
                    double acc = 0, am = 0;
                    for (kk = gk * 128; kk < gk * 128 + 128; kk++) {
                        const double p = pv(A, r * K + kk) * bd[j * K + kk];
                        acc += p;
                        am += fabs(p);
                    }
                    x += s * acc;
                    mag += s * am;
                }
                y = ref_gemm_act(TALON_GEMM_ACT_SILU, x) + 0.5 * cv;
                check(&c, bf16_at(h, j), y,
                      fabs(y) * 0x1p-7 + mag * (fp8 ? 0x1p-9 : 0x1p-12) + 1e-4, "d[%lld, %lld]",
                      (long long)r, (long long)j);
            }
        }
        snprintf(shape, sizeof shape, "m %lld n %lld k %lld %s, bias, silu, c = d (a %.3f x 2^31 "
                 "%s, d %.3f x 2^31 elements)", (long long)M, (long long)N, (long long)K,
                 fp8 ? "e4m3 with block scales" : "bf16", (double)(M * K) / (double)P31,
                 fp8 ? "bytes" : "elements", (double)(M * N) / (double)P31);
        report("talon_gemm", shape, ms, &c);
    }
    free_all();
    pat_free(&pa); pat_free(&pb); pat_free(&pc); pat_free(&pbias); pat_free(&p8a);
    pat_free(&p8b); pat_free(&psc);
    free(h); free(bd);
}

/* [2^19 + 77, 4096] bf16 -> e4m3 with group scales (group-major): bit-exact. */
static void case_quant(void) {
    const int64_t R = (1 << 19) + 77, C = 4096, G = C / 128, R4 = (R + 3) / 4 * 4;
    const size_t in_bytes = (size_t)(R * C * 2), out_bytes = (size_t)(R * C);
    CUdeviceptr in, out, sc;
    CUdeviceptr *outs[] = {&in, &out, &sc};
    const size_t sizes[] = {in_bytes, out_bytes, (size_t)(G * R4 * 4), 0};
    int64_t rows[MAXS], bnd[3], j, gg;
    uint8_t *q8 = (uint8_t *)malloc((size_t)C), want8[128];
    float x[128];
    talon_quant_fp8_args a;
    pat p;
    char shape[160];
    int ns, i;
    double ms;
    chk c = {0};
    if (!wanted("talon_quant_fp8")) return;
    if (alloc_all("talon_quant_fp8", outs, sizes)) return;
    pat_make(&p, K_BF16, 39, -8, 8);
    pat_fill(in, in_bytes, &p);
    poison(out, out_bytes, 0xff);
    poison(sc, (size_t)(G * R4 * 4), 0xff);
    memset(&a, 0, sizeof a);
    a.out = out; a.in = in; a.scale = sc; a.rows = R; a.cols = C; a.mode = TALON_QUANT_GROUP;
    TIMED(ms, talon_quant_fp8(g_ctx, g_s, &a));
    ns = sample(R, bnd, bounds(C, 1, bnd), 24, 16, 24, rows);
    for (i = 0; i < ns; i++) {
        get(q8, out, rows[i] * C, (size_t)C);
        for (gg = 0; gg < G; gg++) {
            float s, want_s;
            get(&s, sc, (gg * R4 + rows[i]) * 4, 4);
            for (j = 0; j < 128; j++) x[j] = pf(&p, rows[i] * C + gg * 128 + j);
            want_s = ref_quant_scale(ref_quant_amax(x, 128));
            ref_quant_e4m3(x, 128, want_s, want8);
            check(&c, s, want_s, 0, "scale[row %lld, group %lld]", (long long)rows[i],
                  (long long)gg);
            for (j = 0; j < 128; j++)
                check(&c, q8[gg * 128 + j], want8[j], 0, "out byte [%lld, %lld]",
                      (long long)rows[i], (long long)(gg * 128 + j));
        }
    }
    snprintf(shape, sizeof shape, "rows %lld cols %lld bf16 -> e4m3, group scales (in %.3f x 2^31 "
             "elements, out %.3f x 2^31 bytes)", (long long)R, (long long)C,
             (double)(R * C) / (double)P31, (double)(R * C) / (double)P31);
    report("talon_quant_fp8", shape, ms, &c);
    free_all();
    pat_free(&p);
    free(q8);
}

/* The most tokens (65536) x topk 8 over 8 experts: a TOKEN rows 32832 apart (2^31 + 2^21
   elements), d PAIR [2^19, 4160] (2^31 + 2^25 elements), the routing weights applied. */
static void case_moe_gemm(void) {
    const int64_t T = 65536, TK = 8, E = 8, N = 4160, K = 512, LDA = 32832, P = T * TK;
    const size_t abytes = (size_t)(T * LDA * 2), dbytes = (size_t)(P * N * 2);
    CUdeviceptr a_, b_, d_, sorted, eids, post, w;
    int64_t scap = 0, ecap = 0, rows[MAXS], bnd[3], j, kk;
    int32_t *ids = (int32_t *)malloc((size_t)P * 4), *hs = NULL, *he = NULL, post_h = 0;
    CUdeviceptr *outs[] = {&a_, &b_, &d_, &sorted, &eids, &post, &w};
    size_t sizes[] = {abytes, (size_t)(E * N * K * 2), dbytes, 0, 0, 16, (size_t)P * 4, 0};
    uint16_t *h = (uint16_t *)malloc((size_t)N * 2);
    double *x = (double *)malloc((size_t)K * sizeof(double));
    talon_moe_gemm_args g;
    pat pa, pb, pw;
    char shape[240];
    int ns, i;
    double ms;
    chk c = {0};
    if (!wanted("talon_moe_gemm")) return;
    talon_moe_align_block_size_capacity(T, TK, E, 128, &scap, &ecap);
    sizes[3] = (size_t)scap * 4;
    sizes[4] = (size_t)ecap * 4;
    if (alloc_all("talon_moe_gemm", outs, sizes)) return;
    for (j = 0; j < P; j++) { /* a token's 8 experts distinct: 3 j + a shift per token, mod 8 */
        const int64_t shift = (int64_t)(ref_mix64(0x3E + (uint64_t)(j / TK)) % E);
        ids[j] = (int32_t)(((j % TK) * 3 + shift) % E);
    }
    hs = (int32_t *)malloc((size_t)scap * 4);
    he = (int32_t *)malloc((size_t)ecap * 4);
    if (ref_moe_align(ids, T, TK, E, 128, hs, scap, he, ecap, &post_h)) abort();
    put(sorted, hs, (size_t)scap * 4);
    put(eids, he, (size_t)ecap * 4);
    put(post, &post_h, 4);
    pat_make(&pa, K_BF16, 40, -1, 1);
    pat_make(&pb, K_BF16, 41, -1, 1);
    pat_make(&pw, K_F32, 42, 0, 1);
    pat_fill(a_, abytes, &pa);
    pat_fill(b_, (size_t)(E * N * K * 2), &pb);
    pat_fill(w, (size_t)P * 4, &pw);
    poison(d_, dbytes, 0xff);
    memset(&g, 0, sizeof g);
    g.d = d_; g.a = a_; g.b = b_; g.sorted_token_ids = sorted; g.expert_ids = eids;
    g.num_tokens_post_padded = post; g.topk_weights = w; g.tokens = T; g.topk = TK; g.experts = E;
    g.block_size = 128; g.sorted_capacity = scap; g.expert_ids_capacity = ecap; g.n = N; g.k = K;
    g.lda = LDA; g.a_rows = TALON_MOE_ROWS_TOKEN; g.d_rows = TALON_MOE_ROWS_PAIR;
    g.act = TALON_GEMM_ACT_SILU;
    TIMED(ms, talon_moe_gemm(g_ctx, g_s, &g));
    ns = sample(P, bnd, bounds(N, 2, bnd), 24, 16, 25, rows);
    for (i = 0; i < ns; i++) { /* pair f: token f / topk, expert ids[f] */
        const int64_t f = rows[i], t = f / TK, e = ids[f];
        const double wf = pv(&pw, f);
        get(h, d_, f * N * 2, (size_t)N * 2);
        for (kk = 0; kk < K; kk++) x[kk] = pv(&pa, t * LDA + kk);
        for (j = 0; j < N; j++) {
            double acc = 0, mag = 0, y;
            for (kk = 0; kk < K; kk++) {
                const double p = x[kk] * pv(&pb, (e * N + j) * K + kk);
                acc += p;
                mag += fabs(p);
            }
            y = ref_gemm_act(TALON_GEMM_ACT_SILU, acc) * wf;
            check(&c, bf16_at(h, j), y, fabs(y) * 0x1p-7 + mag * wf * 0x1p-12 + 1e-5,
                  "d[pair %lld, %lld]", (long long)f, (long long)j);
        }
    }
    snprintf(shape, sizeof shape, "tokens %lld topk %lld experts %lld n %lld k %lld bf16, a TOKEN "
             "lda %lld (%.3f x 2^31 elements), d PAIR (%.3f x 2^31 elements)", (long long)T,
             (long long)TK, (long long)E, (long long)N, (long long)K, (long long)LDA,
             (double)(T * LDA) / (double)P31, (double)(P * N) / (double)P31);
    report("talon_moe_gemm", shape, ms, &c);
    free_all();
    pat_free(&pa); pat_free(&pb); pat_free(&pw);
    free(ids); free(hs); free(he); free(h); free(x);
}

int main(int argc, char **argv) {
    static void (*const cases[])(void) = {
        case_norms, case_act, case_router, case_topk, case_moe_align, case_moe_sum, case_rope,
        case_kv_append, case_gather, case_decode, case_merge, case_prefill, case_prefill_paged,
        case_gemm, case_quant, case_moe_gemm,
    };
    gpu_test t;
    size_t free_b = 0, total_b = 0, i;
    g_argc = argc;
    g_argv = argv;
    if (gpu_test_begin(&t, "test_gpu_limits", CU_STREAM_DEFAULT)) return 1;
    if (t.quick) {
        printf("test_gpu_limits: skipped under TALON_TEST_QUICK (buffers of up to 32 GiB are too "
               "large for compute-sanitizer)\n");
        return gpu_test_end(&t, "", 0, 0, 0);
    }
    g_ctx = t.ctx;
    g_s = t.stream;
    GPU_CK(cu.cuEventCreate(&g_ev[0], CU_EVENT_DEFAULT));
    GPU_CK(cu.cuEventCreate(&g_ev[1], CU_EVENT_DEFAULT));
    GPU_CK(cu.cuMemGetInfo(&free_b, &total_b));
    printf("test_gpu_limits: %.1f GiB free of %.1f GiB\n", free_b / GIB, total_b / GIB);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cases[i]();
        free_all(); /* a case that failed early left its buffers */
    }
    cu.cuEventDestroy(g_ev[0]);
    cu.cuEventDestroy(g_ev[1]);
    printf("test_gpu_limits: %d ops run, %d skipped, %d failed\n", g_run, g_skipped, g_failed);
    return gpu_test_end(&t, " (sampled rows at shapes past 2^31)", g_run, g_checked, g_failed);
}
