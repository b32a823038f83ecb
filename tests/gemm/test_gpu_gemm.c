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
   fp8 (e4m3, per-tensor, per-row and block scales): the tensor cores' fp8 accumulator keeps
   fewer bits than fp32, so most fp8 cases take operands whose partial sums it holds exactly
   (multiples of 1/4 below 3 in a, integers up to 4 in b: sums of multiples of 1/4 below
   2^11) and are checked as tightly as the fp32 epilogue allows, r |ref| + 2^-20 mag (block
   scales: + 2^-24 (k-blocks + 16) mag, one fp32 rounding per k-block): any slip of a scale,
   row or column shows. Cases on real-valued operands (uniform in [-1, 1), rounded to e4m3)
   allow the accumulator to lose 2^-13 of itself per k-step of 32, r |ref| + 2^-13 peak
   (ref_gemm.h), and print the largest error seen as a share of that.

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
static long long g_cases, g_elements;

enum { RES_NONE, RES_C, RES_IN_PLACE };

typedef struct gcase {
    talon_dtype dt, ot;
    int64_t m, n, k;
    int pad; /* extra elements per row of a, b, c and d (multiples of 16; 0 contiguous) */
    int bias, resid;
    talon_gemm_act act;
    int gated;
    float alpha, beta; /* 0: the op's default, 1 */
    talon_gemm_scale scale; /* fp8 only */
    int real;               /* fp8: real-valued operands (else exactly summable ones) */
} gcase;

typedef struct job {
    gcase c;
    int64_t lda, ldb, ldd, brows, isize, osize, a_scales, b_scales, kb;
    double *a, *b, *bias, *cres; /* exact inputs, contiguous */
    double *sa, *sb;             /* fp8: the scales in ref_gemm.h's layout */
    unsigned char *ha, *hb;      /* a and b as on the device (with padding) */
    uint16_t *hbias;
    float *hsa, *hsb;
    unsigned char *hc, *hd;      /* c and d as on the device (with padding) */
    int64_t d_bytes;
    CUdeviceptr da, db, dbias, dc, dd, dsa, dsb;
} job;

static double g_worst_real; /* fp8 real-valued cases: the largest |error| / tolerance */

static const char *dname(talon_dtype t) {
    return t == TALON_DTYPE_F32 ? "f32" : t == TALON_DTYPE_BF16 ? "bf16"
           : t == TALON_DTYPE_F16 ? "f16" : "e4m3";
}

static void describe(const gcase *c, char *s, size_t n) {
    snprintf(s, n, "%s->%s m %lld n %lld k %lld pad %d bias %d resid %d act %d gated %d "
             "alpha %g beta %g scale %d real %d", dname(c->dt), dname(c->ot), (long long)c->m,
             (long long)c->n, (long long)c->k, c->pad, c->bias, c->resid, (int)c->act, c->gated,
             (double)c->alpha, (double)c->beta, (int)c->scale, c->real);
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
    free(j->a); free(j->b); free(j->bias); free(j->cres); free(j->sa); free(j->sb);
    free(j->ha); free(j->hb); free(j->hbias); free(j->hsa); free(j->hsb); free(j->hc);
    free(j->hd);
    if (j->dsa) cu.cuMemFree(j->dsa);
    if (j->dsb) cu.cuMemFree(j->dsb);
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
    j->isize = c->dt == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
    j->osize = c->ot == TALON_DTYPE_F32 ? 4 : 2;
    j->kb = (c->k + 127) / 128;
    /* on the device: per row; per block, a [kb, m rounded up to 4], b [rows / 128, kb] */
    j->a_scales = c->scale == TALON_GEMM_SCALE_ROW     ? c->m
                  : c->scale == TALON_GEMM_SCALE_BLOCK ? j->kb * ((c->m + 3) / 4 * 4) : 1;
    j->b_scales = c->scale == TALON_GEMM_SCALE_ROW     ? j->brows
                  : c->scale == TALON_GEMM_SCALE_BLOCK ? j->kb * ((j->brows + 127) / 128) : 1;
    j->d_bytes = c->m * j->ldd * j->osize + GUARD;
    j->a = malloc((size_t)(c->m * c->k) * sizeof(double));
    j->b = malloc((size_t)(j->brows * c->k) * sizeof(double));
    j->bias = malloc((size_t)j->brows * sizeof(double));
    j->cres = malloc((size_t)(c->m * c->n) * sizeof(double));
    j->sa = malloc((size_t)(c->m * j->kb) * sizeof(double));
    j->sb = malloc((size_t)(j->brows * j->kb) * sizeof(double));
    j->ha = malloc((size_t)(c->m * j->lda * j->isize));
    j->hb = malloc((size_t)(j->brows * j->ldb * j->isize));
    j->hbias = malloc((size_t)j->brows * 2);
    j->hsa = malloc((size_t)j->a_scales * 4);
    j->hsb = malloc((size_t)j->b_scales * 4);
    j->hc = malloc((size_t)j->d_bytes);
    j->hd = malloc((size_t)j->d_bytes);
    if (!j->a || !j->b || !j->bias || !j->cres || !j->sa || !j->sb || !j->ha || !j->hb ||
        !j->hbias || !j->hsa || !j->hsb || !j->hc || !j->hd)
        return -1;
    if (cu.cuMemAlloc(&j->da, (size_t)(c->m * j->lda * j->isize)) ||
        cu.cuMemAlloc(&j->db, (size_t)(j->brows * j->ldb * j->isize)) ||
        cu.cuMemAlloc(&j->dbias, (size_t)j->brows * 2) ||
        cu.cuMemAlloc(&j->dsa, (size_t)j->a_scales * 4) ||
        cu.cuMemAlloc(&j->dsb, (size_t)j->b_scales * 4) ||
        cu.cuMemAlloc(&j->dc, (size_t)j->d_bytes) || cu.cuMemAlloc(&j->dd, (size_t)j->d_bytes))
        return -1;
    return 0;
}

/* One input element into dst (isize bytes), returned exactly: 16-bit, uniform in [-1, 1);
   fp8 real-valued, the same rounded to e4m3; fp8 exact, from `set` (n values). */
static double input(const job *j, uint64_t *s, const double *set, int n, unsigned char *dst) {
    if (j->isize == 2) return rounded(j->c.dt, 2.f * ref_unit01(s) - 1.f, dst);
    {
        const float x = j->c.real ? 2.f * ref_unit01(s) - 1.f
                                  : (float)set[(int)(ref_unit01(s) * (float)n) % n];
        *dst = ref_e4m3_from_f32(x);
        return ref_e4m3_to_f64(*dst);
    }
}

/* Fresh random operands (uniform in [-1, 1), rounded; row padding NaN), uploaded; d poisoned
   (or, in place, holding c with poisoned padding). */
static int job_upload(job *j, uint64_t seed) {
    static const double set_a[] = {0, 0.25, -0.25, 0.5, -0.5, 0.75, -0.75, 1, -1, 1.5, -1.5,
                                   2, -2, 3, -3};
    static const double set_b[] = {0, 1, -1, 2, -2, 3, -3, 4, -4};
    const gcase *c = &j->c;
    const talon_dtype bias_type = j->isize == 1 ? c->ot : c->dt;
    const unsigned char nan_byte = j->isize == 1 ? 0x7F : 0xFF; /* NaN in e4m3; in 16 bits */
    uint64_t s = ref_mix64(seed);
    int64_t r, t;
    for (r = 0; r < c->m; r++)
        for (t = 0; t < j->lda; t++) {
            unsigned char *dst = j->ha + (r * j->lda + t) * j->isize;
            if (t < c->k) j->a[r * c->k + t] = input(j, &s, set_a, COUNT(set_a), dst);
            else memset(dst, nan_byte, (size_t)j->isize);
        }
    for (r = 0; r < j->brows; r++)
        for (t = 0; t < j->ldb; t++) {
            unsigned char *dst = j->hb + (r * j->ldb + t) * j->isize;
            if (t < c->k) j->b[r * c->k + t] = input(j, &s, set_b, COUNT(set_b), dst);
            else memset(dst, nan_byte, (size_t)j->isize);
        }
    for (r = 0; r < j->brows; r++)
        j->bias[r] = rounded(bias_type, 2.f * ref_unit01(&s) - 1.f, (unsigned char *)&j->hbias[r]);
    /* scales in [0.5, 1.5) (fp32), per row or one repeated */
    for (r = 0; r < j->a_scales; r++) j->hsa[r] = 0.5f + ref_unit01(&s);
    for (r = 0; r < j->b_scales; r++) j->hsb[r] = 0.5f + ref_unit01(&s);
    if (c->scale == TALON_GEMM_SCALE_BLOCK) {
        const int64_t m4 = (c->m + 3) / 4 * 4;
        for (r = 0; r < c->m; r++)
            for (t = 0; t < j->kb; t++) j->sa[r * j->kb + t] = j->hsa[t * m4 + r];
        for (r = 0; r < j->b_scales; r++) j->sb[r] = j->hsb[r];
    } else {
        for (r = 0; r < c->m; r++) j->sa[r] = j->hsa[j->a_scales > 1 ? r : 0];
        for (r = 0; r < j->brows; r++) j->sb[r] = j->hsb[j->b_scales > 1 ? r : 0];
    }
    memset(j->hc, 0xFF, (size_t)j->d_bytes);
    for (r = 0; r < c->m; r++)
        for (t = 0; t < c->n; t++)
            j->cres[r * c->n + t] = rounded(c->ot, 4.f * ref_unit01(&s) - 2.f,
                                            j->hc + (r * j->ldd + t) * j->osize);
    if (cu.cuMemcpyHtoD(j->da, j->ha, (size_t)(c->m * j->lda * j->isize)) ||
        cu.cuMemcpyHtoD(j->db, j->hb, (size_t)(j->brows * j->ldb * j->isize)) ||
        cu.cuMemcpyHtoD(j->dbias, j->hbias, (size_t)j->brows * 2) ||
        cu.cuMemcpyHtoD(j->dsa, j->hsa, (size_t)j->a_scales * 4) ||
        cu.cuMemcpyHtoD(j->dsb, j->hsb, (size_t)j->b_scales * 4) ||
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
    if (j->isize == 1) { a.scale = c->scale; a.a_scale = j->dsa; a.b_scale = j->dsb; }
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

static int job_check(job *j, long long *elements) {
    const gcase *c = &j->c;
    const double rel = c->ot == TALON_DTYPE_BF16 ? 0x1p-8 : c->ot == TALON_DTYPE_F16 ? 0x1p-11 : 0.0;
    const double macs = (double)c->m * (double)c->n * (double)c->k * (c->gated ? 2 : 1);
    const int64_t step = macs > SAMPLED_MACS ? (int64_t)ceil(macs / SAMPLED_MACS) : 1;
    const int fp8 = j->isize == 1;
    ref_gemm_problem p = {c->m, c->n, c->k, j->a, j->b, c->bias ? j->bias : NULL,
                          c->resid ? j->cres : NULL, c->alpha != 0.f ? c->alpha : 1.0,
                          c->beta != 0.f ? c->beta : 1.0, c->act, c->gated,
                          fp8 ? j->sa : NULL, fp8 ? j->sb : NULL,
                          c->scale == TALON_GEMM_SCALE_BLOCK};
    /* tolerance: rel |ref| + e_mag mag + e_peak peak (the file's comment); block scales add
       each k-block's product in fp32: one rounding per block */
    const double e_mag = !fp8 ? 0x1p-14
                         : c->scale == TALON_GEMM_SCALE_BLOCK ? 0x1p-24 * (double)(j->kb + 16)
                                                              : 0x1p-20,
                 e_peak = fp8 && c->real ? 0x1p-13 : 0.0;
    double *ref = malloc((size_t)c->n * sizeof(double)), *mag = malloc((size_t)c->n * sizeof(double));
    double *peak = malloc((size_t)c->n * sizeof(double));
    int64_t bad = 0, r, t, b;
    char what[200] = "", desc[200];
    if (!ref || !mag || !peak || cu.cuMemcpyDtoH(j->hd, j->dd, (size_t)j->d_bytes)) {
        free(ref); free(mag); free(peak);
        return -1;
    }
    for (r = 0; r < c->m; r++) {
        /* padding bytes of every row, checked or not, stay poisoned */
        for (b = c->n * j->osize; b < j->ldd * j->osize; b++)
            if (j->hd[r * j->ldd * j->osize + b] != 0xFF && !bad++)
                snprintf(what, sizeof what, "row %lld padding byte %lld written", (long long)r,
                         (long long)b);
        if (r % step && r != c->m - 1) continue;
        ref_gemm_row(&p, r, ref, mag, peak);
        for (t = 0; t < c->n; t++) {
            const double got = out_at(j, r, t),
                         tol = rel * fabs(ref[t]) + e_mag * mag[t] + e_peak * peak[t] + 1e-30;
            ++*elements;
            if (e_peak > 0 && fabs(got - ref[t]) / tol > g_worst_real)
                g_worst_real = fabs(got - ref[t]) / tol;
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
    free(ref); free(mag); free(peak);
    return bad ? -1 : 0;
}

/* ---------------------------------------------------------------- tests */
static void run_case(gpu_tally *t, const gcase *c, uint64_t seed) {
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
    gpu_tally t;
    int i, n, k;
    (void)state;
    gpu_tally_start(&t, "gemm_shapes");
    for (i = 0; i < nm; i++)
        for (n = 0; n < nn; n++)
            for (k = 0; k < nk; k++) {
                gcase c = {BF, BF, ms[i], ns[n], ks[k], 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0};
                run_case(&t, &c, 0x6E00 + (uint64_t)(i * 100 + n * 10 + k));
                if ((i == 0 || i == nm - 1) && (k == 0 || k == nk - 1)) {
                    c.dt = c.ot = HF;
                    run_case(&t, &c, 0x6F00 + (uint64_t)(i * 100 + n * 10 + k));
                }
            }
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* Each epilogue, output type and view. */
static void test_epilogues(void **state) {
    const int64_t m = g_quick ? 129 : 1000, n = g_quick ? 72 : 4104, k = g_quick ? 136 : 4104;
    const gcase cases[] = {
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_RELU, 0, 0, 0, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_SILU, 0, 0, 0, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_GELU_ERF, 0, 0.25f, 0, 0, 0},
        {BF, BF, m, n, k, 0, 0, RES_NONE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0, 0, 0},
        {BF, BF, m, n, k, 0, 0, RES_C, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0.5f, -2.f, 0, 0},
        {BF, BF, m, n, k, 24, 1, RES_IN_PLACE, TALON_GEMM_ACT_SILU, 0, 0, 0.5f, 0, 0},
        {BF, BF, m, n, k, 8, 0, RES_C, TALON_GEMM_ACT_NONE, 0, -1.5f, 3.f, 0, 0},
        {BF, F32, m, n, k, 0, 1, RES_C, TALON_GEMM_ACT_GELU_ERF, 0, 0, 0, 0, 0},
        {BF, F32, m, n, k, 16, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {HF, HF, m, n, k, 0, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0, 0, 0, 0},
        {HF, F32, m, n, k, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_RELU, 0, 0.125f, 1.f, 0, 0},
        /* gated: SwiGLU, GeGLU (both), with bias, residual, strides */
        {BF, BF, m, n, k, 0, 0, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0, 0, 0},
        {BF, BF, m, n, k, 0, 1, RES_NONE, TALON_GEMM_ACT_GELU_TANH, 1, 0, 0, 0, 0},
        {BF, BF, m, n, k, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_GELU_ERF, 1, 0.5f, 0, 0, 0},
        {BF, BF, m, n, k, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 1, 0, 0, 0, 0},
        {HF, HF, m, n, k, 0, 0, RES_C, TALON_GEMM_ACT_SILU, 1, 0, 0, 0, 0},
        {BF, F32, 7, 72, 24, 0, 1, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0, 0, 0},
        {BF, BF, 1, 8, 16, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_SILU, 1, 0, 0, 0, 0},
        /* m <= 64: the transposed kernel (MN 16, 32, 64; tiles of 64 rows of b, split-K 1 or
           2, or of 128 rows) with each epilogue */
        {BF, BF, 7, 72, 24, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0, 0, 0},
        {HF, HF, 33, 4104, 520, 8, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0.5f, -1.f, 0, 0},
        {BF, BF, 64, 1000, 4104, 16, 0, RES_NONE, TALON_GEMM_ACT_RELU, 0, 0, 0, 0, 0},
        {BF, BF, 17, 4096, 4096, 0, 1, RES_NONE, TALON_GEMM_ACT_GELU_ERF, 0, 0, 0, 0, 0},
        {BF, BF, 20, 520, 136, 0, 0, RES_NONE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0, 0, 0},
        {BF, BF, 40, 14336, 520, 0, 1, RES_C, TALON_GEMM_ACT_RELU, 0, 0, 0.5f, 0, 0}, /* 128 rows */
        {HF, HF, 30, 14400, 264, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_SILU, 0, 0, 0, 0, 0}, /* 128, edge */
        /* m 65..128 with >= 128 k-blocks and few tiles: transposed, MN 128 (two 64-row store
           chunks), split-K 2 */
        {BF, BF, 77, 1000, 8200, 16, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0, 0.5f, 0, 0},
        {HF, HF, 128, 4104, 8192, 0, 0, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {BF, BF, 65, 2056, 8256, 8, 1, RES_NONE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0, 0, 0},
    };
    gpu_tally t;
    int i;
    (void)state;
    gpu_tally_start(&t, "gemm_epilogues");
    for (i = 0; i < COUNT(cases); i++) run_case(&t, &cases[i], 0xE900 + (uint64_t)i);
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* Problems large enough for 128 x 256 tiles in clusters of 2 (and 128 x 192 tiles) and
   several tiles per CTA, and split-K's few-tile shapes (sampled rows). */
static void test_large(void **state) {
    const gcase full[] = {
        {BF, BF, 2048, 4096, 4096, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {BF, BF, 4096, 6144, 4096, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {BF, BF, 2048, 3584, 4096, 0, 0, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0, 0, 0},
        {HF, HF, 1000, 4104, 4104, 0, 1, RES_NONE, TALON_GEMM_ACT_GELU_TANH, 1, 0, 0, 0, 0},
        {BF, BF, 16, 14336, 4096, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {BF, BF, 64, 4096, 14336, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        /* 11 tile-rows of 128 x 256: the last cluster pair's second tile lies below m */
        {BF, BF, 1408, 6144, 520, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_RELU, 0, 0, 0, 0, 0},
        /* 128 x 192 tiles */
        {BF, BF, 512, 6144, 4096, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {BF, F32, 1152, 4096, 520, 0, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0, 0, 0, 0},
        /* split-K (few tiles): transposed (64-row tiles, 2 ways), 2 ways */
        {BF, BF, 1, 4096, 14336, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {HF, HF, 64, 4096, 14336, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0, 0, 0},
        {BF, F32, 200, 4096, 4104, 0, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0.5f, 2.f, 0, 0},
        /* transposed, 448 tiles x 2 ways on 66 pairs: several tiles per split-K cluster */
        {BF, BF, 16, 28672, 4096, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
    };
    const gcase quick[] = {
        {BF, BF, 1152, 4096, 64, 0, 1, RES_C, TALON_GEMM_ACT_SILU, 0, 0, 0, 0, 0},     /* bn 192 */
        {HF, F32, 1152, 4096, 64, 8, 0, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},
        {BF, BF, 1408, 6144, 64, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_RELU, 0, 0, 0, 0, 0}, /* 256, odd */
        {BF, BF, 7, 1024, 2056, 8, 1, RES_IN_PLACE, TALON_GEMM_ACT_SILU, 0, 0, 0, 0, 0},  /* m16 split 2 */
        {HF, F32, 64, 4096, 1024, 0, 1, RES_C, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},     /* split 2 */
        {BF, BF, 40, 520, 136, 0, 1, RES_C, TALON_GEMM_ACT_RELU, 0, 0, 0, 0, 0},         /* m64 */
        {HF, HF, 20, 4096, 1024, 8, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},    /* m32 split 2 */
        {BF, BF, 1, 2048, 2048, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0}, /* m16 split 2 */
        {BF, BF, 7, 28672, 2048, 0, 0, RES_NONE, TALON_GEMM_ACT_SILU, 0, 0, 0, 0, 0},    /* tiles/cluster */
        {HF, F32, 2176, 2048, 64, 8, 0, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0, 0, 0},
    };
    gpu_tally t;
    int i;
    (void)state;
    gpu_tally_start(&t, "gemm_large");
    for (i = 0; i < (g_quick ? COUNT(quick) : COUNT(full)); i++)
        run_case(&t, g_quick ? &quick[i] : &full[i], 0x1A00 + (uint64_t)i);
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* fp8 e4m3 inputs, bf16 out, scales per tensor, per row and per block: the odd shapes
   (k a multiple of 16), each epilogue, strides, every kernel kind (128 x 256 pairs, 192, 128,
   split-K, transposed m <= 64 with split-K, block-scaled), on exactly summable operands; then
   real-valued ones (the file's comment). */
#define E4 TALON_DTYPE_FP8_E4M3
#define F8(M, N, K, PAD, BIAS, RES, ACT, GATED, ALPHA, BETA, SCALE, REAL)                     \
    {.dt = E4, .ot = BF, .m = M, .n = N, .k = K, .pad = PAD, .bias = BIAS, .resid = RES,        \
     .act = TALON_GEMM_ACT_##ACT, .gated = GATED, .alpha = ALPHA, .beta = BETA,                \
     .scale = TALON_GEMM_SCALE_##SCALE, .real = REAL}
static void test_fp8(void **state) {
    const gcase full[] = {
        F8(1, 8, 16, 0, 0, RES_NONE, NONE, 0, 0, 0, TENSOR, 0),
        F8(7, 72, 48, 0, 1, RES_NONE, NONE, 0, 0, 0, ROW, 0),
        F8(129, 4104, 4112, 0, 0, RES_NONE, NONE, 0, 0, 0, TENSOR, 0),
        F8(1000, 72, 4112, 16, 1, RES_C, SILU, 0, 0, 0, ROW, 0),
        F8(1000, 4104, 4112, 0, 1, RES_NONE, GELU_ERF, 0, 0.25f, 0, ROW, 0),
        F8(1000, 4104, 4112, 16, 0, RES_IN_PLACE, NONE, 0, 0, -0.5f, TENSOR, 0),
        F8(1000, 4104, 4112, 0, 1, RES_NONE, RELU, 0, 0, 0, TENSOR, 0),
        F8(1000, 4104, 4112, 0, 1, RES_NONE, GELU_TANH, 1, 0, 0, ROW, 0),     /* GeGLU */
        F8(2048, 3584, 4096, 0, 0, RES_NONE, SILU, 1, 0, 0, TENSOR, 0),       /* SwiGLU, 256 */
        F8(2048, 4096, 4096, 0, 0, RES_NONE, NONE, 0, 0, 0, ROW, 0),          /* 256 pairs */
        F8(1408, 6144, 512, 16, 1, RES_IN_PLACE, RELU, 0, 0, 0, ROW, 0),      /* odd pair */
        F8(512, 6144, 4096, 0, 0, RES_NONE, NONE, 0, 0, 0, ROW, 0),           /* 192 */
        F8(100, 4096, 4096, 0, 1, RES_C, NONE, 0, 0, 2.f, ROW, 0),            /* split 2 */
        F8(200, 4096, 2048, 0, 0, RES_NONE, SILU, 0, 0, 0, TENSOR, 0),        /* split 2 */
        F8(1, 4096, 14336, 0, 0, RES_NONE, NONE, 0, 0, 0, ROW, 0),            /* m16 split 2 */
        F8(16, 14336, 4096, 0, 1, RES_IN_PLACE, NONE, 0, 0, 0, TENSOR, 0),    /* m16 */
        F8(33, 4104, 528, 16, 1, RES_C, SILU, 0, 0.5f, -1.f, ROW, 0),         /* m64 */
        F8(20, 4096, 2048, 0, 0, RES_NONE, GELU_TANH, 0, 0, 0, ROW, 0),       /* m32 split 2 */
        F8(16, 28672, 2048, 0, 0, RES_NONE, NONE, 0, 0, 0, ROW, 0),           /* tiles/cluster */
        F8(1000, 4104, 4112, 0, 0, RES_NONE, NONE, 0, 0, 0, TENSOR, 1),
        F8(2048, 4096, 4096, 0, 1, RES_NONE, SILU, 0, 0, 0, ROW, 1),
        F8(64, 4096, 14336, 0, 0, RES_NONE, NONE, 0, 0, 0, ROW, 1),
        /* block scales (256-row tiles of b in pairs, an odd pair and a last tile whose second
           half-tile lies past n; 128-row tiles; split-K at few tiles; gated halves in two
           blocks) */
        F8(1100, 7232, 1024, 16, 1, RES_IN_PLACE, GELU_TANH, 0, 0, 0, BLOCK, 0),  /* 256 */
        F8(1100, 3584, 1024, 0, 1, RES_NONE, SILU, 1, 0, 0, BLOCK, 0),          /* gated 256 */
        F8(1100, 7232, 2048, 0, 0, RES_NONE, NONE, 0, 0, 0, BLOCK, 1),          /* 256 */
        F8(7, 72, 48, 0, 1, RES_NONE, NONE, 0, 0, 0, BLOCK, 0),
        F8(129, 4104, 4112, 16, 1, RES_IN_PLACE, GELU_TANH, 0, 0.5f, 0, BLOCK, 0),
        F8(1000, 7168, 2048, 0, 0, RES_NONE, NONE, 0, 0, 0, BLOCK, 0),
        F8(100, 4096, 4096, 0, 0, RES_C, SILU, 0, 0, 0, BLOCK, 0),               /* split 2 */
        F8(16, 4096, 7168, 0, 0, RES_NONE, NONE, 0, 0, 0, BLOCK, 0),             /* swap, split 2 */
        F8(16, 14336, 1024, 0, 1, RES_NONE, SILU, 0, 0, 0, BLOCK, 0),            /* swap, 128 rows */
        F8(33, 4160, 512, 16, 1, RES_IN_PLACE, NONE, 0, 0, 0, BLOCK, 0),        /* swap, 64, edge */
        F8(20, 14400, 512, 0, 0, RES_C, GELU_TANH, 0, 0, -1.f, BLOCK, 0),        /* 128, band past n */
        F8(300, 2112, 1536, 0, 1, RES_NONE, SILU, 1, 0, 0, BLOCK, 0),            /* gated */
        F8(2048, 7168, 2048, 0, 0, RES_NONE, NONE, 0, 0, 0, BLOCK, 1),
        F8(16, 4096, 7168, 0, 1, RES_NONE, NONE, 0, 0, 0, BLOCK, 1),
        /* the transposed consumer's k-blocks in groups of 8 (MN 32, 64: 4), the rest in 4, 2, 1 */
        F8(16, 4096, 2432, 0, 0, RES_NONE, NONE, 0, 0, 0, BLOCK, 0),          /* 9, 10 a way */
        F8(50, 1000, 848, 16, 1, RES_NONE, SILU, 0, 0, 0, BLOCK, 0),          /* 64: 7 */
        F8(30, 3000, 1408, 0, 0, RES_C, GELU_TANH, 0, 0, 0.5f, BLOCK, 0),     /* 32: 11 */
    };
    const gcase quick[] = {
        F8(7, 72, 48, 16, 1, RES_IN_PLACE, SILU, 0, 0, 0, ROW, 0),            /* m16 */
        F8(129, 520, 272, 0, 1, RES_C, GELU_ERF, 0, 0, 0, TENSOR, 0),         /* split */
        F8(1152, 4096, 128, 0, 1, RES_NONE, NONE, 0, 0, 0, ROW, 0),           /* 192 */
        F8(1408, 6144, 128, 16, 0, RES_IN_PLACE, RELU, 0, 0, 0, ROW, 0),      /* 256, odd */
        F8(2176, 2048, 128, 0, 1, RES_NONE, SILU, 1, 0, 0, ROW, 0),           /* gated 256 */
        F8(64, 2048, 2048, 0, 1, RES_NONE, NONE, 0, 0, 0, TENSOR, 1),         /* m64 split */
        F8(129, 520, 272, 16, 1, RES_IN_PLACE, SILU, 0, 0, 0, BLOCK, 0),
        F8(1100, 7232, 256, 16, 1, RES_IN_PLACE, SILU, 0, 0, 0, BLOCK, 0),    /* 256, edge */
        F8(1100, 3584, 256, 0, 0, RES_NONE, GELU_ERF, 1, 0, 0, BLOCK, 0),     /* gated 256 */
        F8(7, 2048, 2048, 0, 0, RES_NONE, NONE, 0, 0, 0, BLOCK, 1),            /* swap, split 2 */
        F8(20, 14400, 256, 0, 1, RES_NONE, SILU, 0, 0, 0, BLOCK, 0),           /* swap, 128, edge */
        F8(200, 192, 256, 0, 1, RES_C, GELU_ERF, 1, 0, 0, BLOCK, 0),           /* gated */
        F8(30, 1000, 1408, 0, 1, RES_NONE, NONE, 0, 0, 0, BLOCK, 0),           /* swap 32: 11 */
    };
    gpu_tally t;
    int i;
    (void)state;
    gpu_tally_start(&t, "gemm_fp8");
    g_worst_real = 0;
    for (i = 0; i < (g_quick ? COUNT(quick) : COUNT(full)); i++)
        run_case(&t, g_quick ? &quick[i] : &full[i], 0xF800 + (uint64_t)i);
    print_message("gemm_fp8: real-valued operands: largest |error| %.3f of the tolerance\n",
                  g_worst_real);
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* Captured once, replayed on fresh inputs with d re-poisoned (or re-filled with c). */
static void test_graph(void **state) {
    static const gcase cases[] = {
        {BF, BF, 129, 4104, 24, 0, 1, RES_IN_PLACE, TALON_GEMM_ACT_GELU_TANH, 0, 0, 0, 0, 0},
        {HF, HF, 7, 72, 136, 8, 1, RES_NONE, TALON_GEMM_ACT_SILU, 1, 0, 0, 0, 0},
    };
    gpu_tally t;
    int i, rep;
    (void)state;
    gpu_tally_start(&t, "gemm_graph_capture_replay");
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
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* The same call twice gives the same bits (split-K partial sums meet in a fixed order; the
   clustered and transposed kernels included). */
static void test_deterministic(void **state) {
    static const gcase cases[] = {
        {BF, BF, 100, 4096, 14336, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},  /* swap MN 128, 2 */
        {BF, BF, 100, 4096, 8128, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},   /* split 2 */
        {BF, BF, 16, 4096, 14336, 0, 1, RES_NONE, TALON_GEMM_ACT_SILU, 0, 0, 0, 0, 0},   /* swap, 2 */
        {BF, BF, 16, 28672, 2048, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},   /* swap, 2 x 7 */
        {HF, F32, 200, 4096, 4104, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},  /* split 2 */
        {BF, BF, 2048, 4096, 1024, 0, 0, RES_NONE, TALON_GEMM_ACT_NONE, 0, 0, 0, 0, 0},  /* pairs */
        F8(16, 4096, 14336, 0, 0, RES_NONE, NONE, 0, 0, 0, ROW, 1),               /* swap, 2 */
        F8(100, 4096, 4096, 0, 1, RES_NONE, NONE, 0, 0, 0, TENSOR, 1),            /* split 2 */
        F8(16, 4096, 7168, 0, 0, RES_NONE, NONE, 0, 0, 0, BLOCK, 1),              /* split 2 */
    };
    gpu_tally t;
    int i;
    (void)state;
    gpu_tally_start(&t, "gemm_deterministic");
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
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_epilogues),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_fp8),
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
    return gpu_test_end(&t, "", g_cases, g_elements, failed);
}
