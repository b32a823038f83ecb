/* GPU tests of talon_gemm (H100/H200): random bf16/f16 operands, every epilogue (bias, each
   activation, residual in a separate c or in place in d, alpha and beta, gated SwiGLU/GeGLU),
   bf16/f16/f32 outputs, strided views, odd shapes (m 1, 7, 129, 1000; n 8, 72, 4104; k 16, 24,
   4104) and both tile widths, against the fp64 reference of ref_gemm.h on every element (large
   problems: every element of sampled rows). The output is poisoned (0xFF bytes) first; the
   padding between rows of d and a guard after it must stay poisoned, and the padding of a's
   and b's rows holds NaN, which would reach the result if it were read. Tolerance per element:
   |gpu - ref| <= r |ref| + 2^-14 mag, r the output's rounding (2^-8 bf16, 2^-11 f16, 0 f32)
   and mag the sum of |terms| the value is made of (fp32 accumulation over k). Also CUDA graph
   capture with replays on fresh inputs.

   TALON_TEST_QUICK=1 (for compute-sanitizer) keeps every kernel variant and epilogue on
   smaller problems. Two calls on the same inputs must give the same bits. */
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
#include "ref_gemm.h"
#include "talon.h"

#define GUARD 256
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define SAMPLED_MACS 4e8 /* larger problems are checked on sampled rows */

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static int64_t g_cases, g_elements;

enum { RES_NONE, RES_C, RES_IN_PLACE };

typedef struct gcase {
    talon_dtype dt, ot;
    int64_t m, n, k;
    int pad; /* extra elements per row of a, b, c and d (multiples of 8; 0 contiguous) */
    int bias, resid;
    talon_gemm_act act;
    int gated;
    float alpha, beta; /* 0: the op's default, 1 */
} gcase;

typedef struct job {
    gcase c;
    int64_t lda, ldb, ldd, brows, osize;
    double *a, *b, *bias, *cres; /* exact inputs, contiguous */
    uint16_t *ha, *hb, *hbias;
    unsigned char *hc, *hd;      /* c and d as on the device (with padding) */
    int64_t d_bytes;
    CUdeviceptr da, db, dbias, dc, dd;
} job;

static const char *dname(talon_dtype t) {
    return t == TALON_DTYPE_F32 ? "f32" : t == TALON_DTYPE_BF16 ? "bf16" : "f16";
}

static void describe(const gcase *c, char *s, size_t n) {
    snprintf(s, n, "%s->%s m %lld n %lld k %lld pad %d bias %d resid %d act %d gated %d "
             "alpha %g beta %g", dname(c->dt), dname(c->ot), (long long)c->m, (long long)c->n,
             (long long)c->k, c->pad, c->bias, c->resid, (int)c->act, c->gated,
             (double)c->alpha, (double)c->beta);
}

/* x rounded to t (16-bit bits into *bits when t is not f32), returned exactly */
static double rounded(talon_dtype t, float x, unsigned char *dst) {
    if (t == TALON_DTYPE_F32) {
        memcpy(dst, &x, 4);
        return x;
    }
    {
        const uint16_t b = ref_from_f32(t, x);
        memcpy(dst, &b, 2);
        return ref_to_f32(t, b);
    }
}

static void job_free(job *j) {
    free(j->a); free(j->b); free(j->bias); free(j->cres);
    free(j->ha); free(j->hb); free(j->hbias); free(j->hc); free(j->hd);
    if (j->da) cu.cuMemFree(j->da);
    if (j->db) cu.cuMemFree(j->db);
    if (j->dbias) cu.cuMemFree(j->dbias);
    if (j->dc) cu.cuMemFree(j->dc);
    if (j->dd) cu.cuMemFree(j->dd);
    memset(j, 0, sizeof *j);
}

static int job_prepare(job *j, const gcase *c) {
    memset(j, 0, sizeof *j);
    j->c = *c;
    j->lda = c->k + c->pad; j->ldb = c->k + c->pad; j->ldd = c->n + c->pad;
    j->brows = c->gated ? 2 * c->n : c->n;
    j->osize = c->ot == TALON_DTYPE_F32 ? 4 : 2;
    j->d_bytes = c->m * j->ldd * j->osize + GUARD;
    j->a = malloc((size_t)(c->m * c->k) * sizeof(double));
    j->b = malloc((size_t)(j->brows * c->k) * sizeof(double));
    j->bias = malloc((size_t)j->brows * sizeof(double));
    j->cres = malloc((size_t)(c->m * c->n) * sizeof(double));
    j->ha = malloc((size_t)(c->m * j->lda) * 2);
    j->hb = malloc((size_t)(j->brows * j->ldb) * 2);
    j->hbias = malloc((size_t)j->brows * 2);
    j->hc = malloc((size_t)j->d_bytes);
    j->hd = malloc((size_t)j->d_bytes);
    if (!j->a || !j->b || !j->bias || !j->cres || !j->ha || !j->hb || !j->hbias || !j->hc || !j->hd)
        return -1;
    if (cu.cuMemAlloc(&j->da, (size_t)(c->m * j->lda) * 2) ||
        cu.cuMemAlloc(&j->db, (size_t)(j->brows * j->ldb) * 2) ||
        cu.cuMemAlloc(&j->dbias, (size_t)j->brows * 2) ||
        cu.cuMemAlloc(&j->dc, (size_t)j->d_bytes) || cu.cuMemAlloc(&j->dd, (size_t)j->d_bytes))
        return -1;
    return 0;
}

/* Fresh random operands (uniform in [-1, 1), rounded; row padding NaN), uploaded; d poisoned
   (or, in place, holding c with poisoned padding). */
static int job_upload(job *j, uint64_t seed) {
    const gcase *c = &j->c;
    const uint16_t nan16 = 0xFFFF;
    uint64_t s = ref_mix64(seed);
    int64_t r, t;
    for (r = 0; r < c->m; r++)
        for (t = 0; t < j->lda; t++) {
            if (t < c->k) j->a[r * c->k + t] = rounded(c->dt, 2.f * ref_unit01(&s) - 1.f,
                                                      (unsigned char *)&j->ha[r * j->lda + t]);
            else j->ha[r * j->lda + t] = nan16;
        }
    for (r = 0; r < j->brows; r++)
        for (t = 0; t < j->ldb; t++) {
            if (t < c->k) j->b[r * c->k + t] = rounded(c->dt, 2.f * ref_unit01(&s) - 1.f,
                                                      (unsigned char *)&j->hb[r * j->ldb + t]);
            else j->hb[r * j->ldb + t] = nan16;
        }
    for (r = 0; r < j->brows; r++)
        j->bias[r] = rounded(c->dt, 2.f * ref_unit01(&s) - 1.f, (unsigned char *)&j->hbias[r]);
    memset(j->hc, 0xFF, (size_t)j->d_bytes);
    for (r = 0; r < c->m; r++)
        for (t = 0; t < c->n; t++)
            j->cres[r * c->n + t] = rounded(c->ot, 4.f * ref_unit01(&s) - 2.f,
                                            j->hc + (r * j->ldd + t) * j->osize);
    if (cu.cuMemcpyHtoD(j->da, j->ha, (size_t)(c->m * j->lda) * 2) ||
        cu.cuMemcpyHtoD(j->db, j->hb, (size_t)(j->brows * j->ldb) * 2) ||
        cu.cuMemcpyHtoD(j->dbias, j->hbias, (size_t)j->brows * 2) ||
        cu.cuMemcpyHtoD(j->dc, j->hc, (size_t)j->d_bytes))
        return -1;
    if (c->resid == RES_IN_PLACE) return cu.cuMemcpyHtoD(j->dd, j->hc, (size_t)j->d_bytes) ? -1 : 0;
    return cu.cuMemsetD8(j->dd, 0xFF, (size_t)j->d_bytes) ? -1 : 0;
}

static talon_status job_launch(const job *j, CUstream stream) {
    const gcase *c = &j->c;
    talon_gemm_args a;
    memset(&a, 0, sizeof a);
    a.d = j->dd; a.a = j->da; a.b = j->db;
    a.bias = c->bias ? j->dbias : 0;
    a.c = c->resid == RES_C ? j->dc : c->resid == RES_IN_PLACE ? j->dd : 0;
    a.m = c->m; a.n = c->n; a.k = c->k;
    if (c->pad) { a.lda = j->lda; a.ldb = j->ldb; a.ldd = j->ldd; a.ldc = a.c ? j->ldd : 0; }
    a.alpha = c->alpha; a.beta = c->beta;
    a.act = c->act; a.gated = c->gated;
    a.dtype = c->dt; a.out_dtype = c->ot;
    return talon_gemm(g_ctx, stream, &a);
}

static double out_at(const job *j, int64_t r, int64_t t) {
    const unsigned char *p = j->hd + (r * j->ldd + t) * j->osize;
    if (j->osize == 4) {
        float f;
        memcpy(&f, p, 4);
        return f;
    } else {
        uint16_t b;
        memcpy(&b, p, 2);
        return ref_to_f32(j->c.ot, b);
    }
}

static int job_check(job *j, int64_t *elements) {
    const gcase *c = &j->c;
    const double rel = c->ot == TALON_DTYPE_BF16 ? 0x1p-8 : c->ot == TALON_DTYPE_F16 ? 0x1p-11 : 0.0;
    const double macs = (double)c->m * (double)c->n * (double)c->k * (c->gated ? 2 : 1);
    const int64_t step = macs > SAMPLED_MACS ? (int64_t)ceil(macs / SAMPLED_MACS) : 1;
    ref_gemm_problem p = {c->m, c->n, c->k, j->a, j->b, c->bias ? j->bias : NULL,
                          c->resid ? j->cres : NULL, c->alpha != 0.f ? c->alpha : 1.0,
                          c->beta != 0.f ? c->beta : 1.0, c->act, c->gated};
    double *ref = malloc((size_t)c->n * sizeof(double)), *mag = malloc((size_t)c->n * sizeof(double));
    int64_t bad = 0, r, t, b;
    char what[200] = "", desc[200];
    if (!ref || !mag || cu.cuMemcpyDtoH(j->hd, j->dd, (size_t)j->d_bytes)) {
        free(ref); free(mag);
        return -1;
    }
    for (r = 0; r < c->m; r++) {
        /* padding bytes of every row, checked or not, stay poisoned */
        for (b = c->n * j->osize; b < j->ldd * j->osize; b++)
            if (j->hd[r * j->ldd * j->osize + b] != 0xFF && !bad++)
                snprintf(what, sizeof what, "row %lld padding byte %lld written", (long long)r,
                         (long long)b);
        if (r % step && r != c->m - 1) continue;
        ref_gemm_row(&p, r, ref, mag);
        for (t = 0; t < c->n; t++) {
            const double got = out_at(j, r, t), tol = rel * fabs(ref[t]) + 0x1p-14 * mag[t] + 1e-30;
            ++*elements;
            if (!(fabs(got - ref[t]) <= tol) && !bad++)
                snprintf(what, sizeof what, "d[%lld, %lld] = %.9g, ref %.9g (tol %.3g)",
                         (long long)r, (long long)t, got, ref[t], tol);
        }
    }
    for (b = c->m * j->ldd * j->osize; b < j->d_bytes; b++)
        if (j->hd[b] != 0xFF && !bad++) snprintf(what, sizeof what, "guard byte %lld written", (long long)b);
    if (bad) {
        describe(c, desc, sizeof desc);
        print_error("FAILED %s: %lld mismatches, first: %s\n", desc, (long long)bad, what);
    }
    free(ref); free(mag);
    return bad ? -1 : 0;
}

/* ---------------------------------------------------------------- tests */
typedef struct tally { const char *name; int64_t cases, failures, elements; struct timespec t0; } tally;

static void tally_start(tally *t, const char *name) {
    memset(t, 0, sizeof *t);
    t->name = name;
    clock_gettime(CLOCK_MONOTONIC, &t->t0);
}

static void tally_end(tally *t) {
    print_message("%s: %lld cases, %lld elements checked, %lld failed, %.1f s\n", t->name,
                  (long long)t->cases, (long long)t->elements, (long long)t->failures,
                  gpu_seconds_since(&t->t0));
    g_cases += t->cases;
    g_elements += t->elements;
    if (t->failures) fail();
}

static void run_case(tally *t, const gcase *c, uint64_t seed) {
    job j;
    char desc[200];
    int rc = job_prepare(&j, c);
    talon_status s = TALON_SUCCESS;
    CUresult e = CUDA_SUCCESS;
    t->cases++;
    if (!rc) rc = job_upload(&j, seed);
    if (!rc && (s = job_launch(&j, g_stream)) != TALON_SUCCESS) rc = -1;
    if (!rc && (e = cu.cuStreamSynchronize(g_stream)) != CUDA_SUCCESS) rc = -1;
    if (rc) {
        describe(c, desc, sizeof desc);
        print_error("FAILED %s: setup/launch: %s %s\n", desc, s ? talon_last_error() : "",
                    e ? gpu_error(e) : "");
    } else {
        rc = job_check(&j, &t->elements);
    }
    if (rc) t->failures++;
    job_free(&j);
    if (e != CUDA_SUCCESS) fail(); /* a sticky error ends the program's usefulness */
}

#define BF TALON_DTYPE_BF16
#define HF TALON_DTYPE_F16
#define F32 TALON_DTYPE_F32

/* Plain products over the odd shapes: m x n x k, bf16 (f16 on the corners). */
static void test_shapes(void **state) {
    static const int64_t ms_full[] = {1, 7, 129, 1000}, ns_full[] = {8, 72, 4104},
                         ks_full[] = {16, 24, 4104};
    static const int64_t ms_quick[] = {1, 129}, ns_quick[] = {8, 72}, ks_quick[] = {24, 136};
    const int64_t *ms = g_quick ? ms_quick : ms_full, *ns = g_quick ? ns_quick : ns_full,
                  *ks = g_quick ? ks_quick : ks_full;
    const int nm = g_quick ? 2 : 4, nn = g_quick ? 2 : 3, nk = g_quick ? 2 : 3;
    tally t;
    int i, n, k;
    (void)state;
    tally_start(&t, "gemm_shapes");
    for (i = 0; i < nm; i++)
        for (n = 0; n < nn; n++)
            for (k = 0; k < nk; k++) {
                gcase c = {BF, BF, ms[i], ns[n], ks[k], 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0};
                run_case(&t, &c, 0x6E00 + (uint64_t)(i * 100 + n * 10 + k));
                if ((i == 0 || i == nm - 1) && (k == 0 || k == nk - 1)) {
                    c.dt = c.ot = HF;
                    run_case(&t, &c, 0x6F00 + (uint64_t)(i * 100 + n * 10 + k));
                }
            }
    tally_end(&t);
}

/* Each epilogue, output type and view. */
static void test_epilogues(void **state) {
    const int64_t m = g_quick ? 129 : 1000, n = g_quick ? 72 : 4104, k = g_quick ? 136 : 4104;
    const gcase cases[] = {
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_RELU, 0, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_SILU, 0, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_GELU_ERF, 0, 0.25f, 0},
        {BF, BF, m, n, k, 0, 0, RES_NONE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0},
        {BF, BF, m, n, k, 0, 0, RES_C, TALON_GEMM_ACT_NONE, 0, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0.5f, -2.f},
        {BF, BF, m, n, k, 24, 1, RES_IN_PLACE, TALON_GEMM_ACT_SILU, 0, 0, 0.5f},
        {BF, BF, m, n, k, 8, 0, RES_C, TALON_GEMM_ACT_NONE, 0, -1.5f, 3.f},
        {BF, F32, m, n, k, 0, 1, RES_C, TALON_GEMM_ACT_GELU_ERF, 0, 0, 0},
        {BF, F32, m, n, k, 16, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},
        {HF, HF, m, n, k, 0, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0, 0},
        {HF, F32, m, n, k, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_RELU, 0, 0.125f, 1.f},
        /* gated: SwiGLU, GeGLU (both), with bias, residual, strides */
        {BF, BF, m, n, k, 0, 0, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_GELU_TANH, 1, 0, 0},
        {BF, BF, m, n, k, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_GELU_ERF, 1, 0.5f, 0},
        {BF, BF, m, n, k, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 1, 0, 0},
        {HF, HF, m, n, k, 0, 0, RES_C, TALON_GEMM_ACT_SILU, 1, 0, 0},
        {BF, F32, 7, 72, 24, 0, 1, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0},
        {BF, BF, 1, 8, 16, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_SILU, 1, 0, 0},
        /* m <= 64: the transposed kernel (MN 16, 32, 64) with each epilogue */
        {BF, BF, 7, 72, 24, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0},
        {HF, HF, 33, 4104, 520, 8, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0.5f, -1.f},
        {BF, BF, 64, 1000, 4104, 16, 0, RES_NONE, TALON_GEMM_ACT_RELU, 0, 0, 0},
        {BF, BF, 17, 4096, 4096, 0, 1, RES_NONE, TALON_GEMM_ACT_GELU_ERF, 0, 0, 0},
    };
    tally t;
    int i;
    (void)state;
    tally_start(&t, "gemm_epilogues");
    for (i = 0; i < COUNT(cases); i++) run_case(&t, &cases[i], 0xE900 + (uint64_t)i);
    tally_end(&t);
}

/* Problems large enough for 128 x 256 tiles in clusters of 2 (and 128 x 192 tiles) and
   several tiles per CTA, and split-K's few-tile shapes (sampled rows). */
static void test_large(void **state) {
    const gcase full[] = {
        {BF, BF, 2048, 4096, 4096, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},
        {BF, BF, 4096, 6144, 4096, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0, 0},
        {BF, BF, 2048, 3584, 4096, 0, 0, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0},
        {HF, HF, 1000, 4104, 4104, 0, 1, RES_NONE, TALON_GEMM_ACT_GELU_TANH, 1, 0, 0},
        {BF, BF, 16, 14336, 4096, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},
        {BF, BF, 64, 4096, 14336, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},
        /* 11 tile-rows of 128 x 256: the last cluster pair's second tile lies below m */
        {BF, BF, 1408, 6144, 520, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_RELU, 0, 0, 0},
        /* 128 x 192 tiles */
        {BF, BF, 512, 6144, 4096, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},
        {BF, F32, 1152, 4096, 520, 0, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0, 0},
        /* split-K (few tiles): 4 ways, 2 ways */
        {BF, BF, 1, 4096, 14336, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},
        {HF, HF, 64, 4096, 14336, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0},
        {BF, F32, 200, 4096, 4104, 0, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0.5f, 2.f},
    };
    const gcase quick[] = {
        {BF, BF, 1152, 4096, 64, 0, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0, 0},     /* bn 192 */
        {HF, F32, 1152, 4096, 64, 8, 0, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0, 0},
        {BF, BF, 1408, 6144, 64, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_RELU, 0, 0, 0}, /* 256, odd */
        {BF, BF, 7, 1024, 2056, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_SILU, 0, 0, 0},  /* split 4 */
        {HF, F32, 64, 4096, 1024, 0, 1, RES_C, TALON_GEMM_ACT_NONE, 0, 0, 0},     /* split 2 */
        {BF, BF, 40, 520, 136, 0, 1, RES_C, TALON_GEMM_ACT_RELU, 0, 0, 0},         /* m64 */
        {HF, HF, 20, 4096, 1024, 8, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},    /* m32 split 2 */
        {BF, BF, 1, 2048, 2048, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0, 0}, /* m16 split 4 */
        {HF, F32, 2176, 2048, 64, 8, 0, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0},
    };
    tally t;
    int i;
    (void)state;
    tally_start(&t, "gemm_large");
    for (i = 0; i < (g_quick ? COUNT(quick) : COUNT(full)); i++)
        run_case(&t, g_quick ? &quick[i] : &full[i], 0x1A00 + (uint64_t)i);
    tally_end(&t);
}

/* Captured once, replayed on fresh inputs with d re-poisoned (or re-filled with c). */
static void test_graph(void **state) {
    static const gcase cases[] = {
        {BF, BF, 129, 4104, 24, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0},
        {HF, HF, 7, 72, 136, 8, 1, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0},
    };
    tally t;
    int i, rep;
    (void)state;
    tally_start(&t, "gemm_graph_capture_replay");
    for (i = 0; i < COUNT(cases); i++) {
        job j;
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        assert_int_equal(job_prepare(&j, &cases[i]), 0);
        assert_int_equal(cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
                         CUDA_SUCCESS);
        assert_int_equal(job_launch(&j, g_stream), TALON_SUCCESS);
        assert_int_equal(cu.cuStreamEndCapture(g_stream, &graph), CUDA_SUCCESS);
        assert_int_equal(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
        for (rep = 0; rep < 3; rep++) {
            t.cases++;
            assert_int_equal(job_upload(&j, 0x6A00 + (uint64_t)(i * 10 + rep)), 0);
            assert_int_equal(cu.cuGraphLaunch(exec, g_stream), CUDA_SUCCESS);
            assert_int_equal(cu.cuStreamSynchronize(g_stream), CUDA_SUCCESS);
            if (job_check(&j, &t.elements)) t.failures++;
        }
        cu.cuGraphExecDestroy(exec);
        cu.cuGraphDestroy(graph);
        job_free(&j);
    }
    tally_end(&t);
}

/* The same call twice gives the same bits (split-K partial sums meet in a fixed order; the
   clustered and transposed kernels included). */
static void test_deterministic(void **state) {
    static const gcase cases[] = {
        {BF, BF, 100, 4096, 14336, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},  /* split 4 */
        {BF, BF, 16, 4096, 14336, 0, 1, RES_NONE, TALON_GEMM_ACT_SILU, 0, 0, 0},   /* swap, 4 */
        {HF, F32, 200, 4096, 4104, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},  /* split 2 */
        {BF, BF, 2048, 4096, 1024, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0},  /* pairs */
    };
    tally t;
    int i;
    (void)state;
    tally_start(&t, "gemm_deterministic");
    for (i = 0; i < COUNT(cases); i++) {
        job j;
        unsigned char *first;
        assert_int_equal(job_prepare(&j, &cases[i]), 0);
        first = malloc((size_t)j.d_bytes);
        assert_non_null(first);
        assert_int_equal(job_upload(&j, 0xDE7 + (uint64_t)i), 0);
        assert_int_equal(job_launch(&j, g_stream), TALON_SUCCESS);
        assert_int_equal(cu.cuStreamSynchronize(g_stream), CUDA_SUCCESS);
        assert_int_equal(cu.cuMemcpyDtoH(first, j.dd, (size_t)j.d_bytes), CUDA_SUCCESS);
        assert_int_equal(cu.cuMemsetD8(j.dd, 0xFF, (size_t)j.d_bytes), CUDA_SUCCESS);
        assert_int_equal(job_launch(&j, g_stream), TALON_SUCCESS);
        assert_int_equal(cu.cuStreamSynchronize(g_stream), CUDA_SUCCESS);
        t.cases++;
        if (job_check(&j, &t.elements)) t.failures++; /* reads d back into j.hd */
        if (memcmp(first, j.hd, (size_t)j.d_bytes)) {
            print_error("FAILED case %d: two calls gave different bits\n", i);
            t.failures++;
        }
        free(first);
        job_free(&j);
    }
    tally_end(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_epilogues),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_graph),
        cmocka_unit_test(test_deterministic),
    };
    gpu_test t;
    int failed;
    if (gpu_test_begin(&t, "test_gpu_gemm", CU_STREAM_DEFAULT)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon_gemm GPU", tests, NULL, NULL);
    return gpu_test_end(&t, "", (long long)g_cases, (long long)g_elements, failed);
}
