/* The gemm family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_GEMM_H
#define TALON_TESTS_CASES_GEMM_H

#define GEMM_TEST_OPS(X) X(gemm, gemm)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define GEMM_BENCH_STRUCTS(S, F) \
    S(talon_gemm_args, \
      F(d, PTR) F(a, PTR) F(b, PTR) F(bias, PTR) F(c, PTR) F(a_scale, PTR) F(b_scale, PTR) \
      F(m, I64) F(n, I64) F(k, I64) F(lda, I64) F(ldb, I64) F(ldc, I64) F(ldd, I64) \
      F(alpha, F32) F(beta, F32) F(act, ENUM) F(gated, I32) F(dtype, ENUM) F(out_dtype, ENUM) \
      F(scale, ENUM))

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void gemm_valid_args(talon_gemm_args *a) {
    a->d = 1 * GB; a->a = 2 * GB; a->b = 3 * GB;
    a->m = 4096; a->n = 4096; a->k = 4096;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
/* resid 0: none, 1: c, 2: in place (c = d); scale: fp8's talon_gemm_scale */
typedef struct {
    int64_t m, n, k, pad;
    int bias, resid, gated, scale;
    talon_gemm_act act;
    talon_dtype ot;
    float alpha, beta;
} gemm_params;
#define GEMM_OC_PARAMS gemm_params gemm;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
#include "ref_gemm.h"

/* gemm: strides, rows of b and the scales' counts */
typedef struct gemm_geo {
    int64_t isize, osize, lda, ldb, ldd, brows, kb, a_scales, b_scales;
    int fp8;
} gemm_geo;
static void gemm_geometry(const oc_case *c, gemm_geo *g) {
    const int64_t m = c->p.gemm.m, pad = c->p.gemm.pad;
    g->fp8 = c->dt == TALON_DTYPE_FP8_E4M3;
    g->isize = g->fp8 ? 1 : 2;
    g->osize = c->p.gemm.ot == TALON_DTYPE_F32 ? 4 : 2;
    g->lda = g->ldb = c->p.gemm.k + pad;
    g->ldd = c->p.gemm.n + pad;
    g->brows = c->p.gemm.gated ? 2 * c->p.gemm.n : c->p.gemm.n;
    g->kb = (c->p.gemm.k + 127) / 128;
    g->a_scales = !g->fp8 ? 1 : c->p.gemm.scale == TALON_GEMM_SCALE_ROW ? m
                  : c->p.gemm.scale == TALON_GEMM_SCALE_BLOCK ? g->kb * oc_round_up(m, 4) : 1;
    g->b_scales = !g->fp8 ? 1 : c->p.gemm.scale == TALON_GEMM_SCALE_ROW ? g->brows
                  : c->p.gemm.scale == TALON_GEMM_SCALE_BLOCK ? g->kb * ((g->brows + 127) / 128) : 1;
}

static void gemm_random(oc_case *c, uint64_t *s, int big) {
    static const float scalars[] = {0.0f, 0.0f, 0.0f, 0.5f, 2.0f, -1.25f};
    const int fp8 = oc_chance(s, 20);
    c->dt = fp8 ? TALON_DTYPE_FP8_E4M3 : c->dt;
    c->p.gemm.ot = fp8 ? TALON_DTYPE_BF16 : oc_chance(s, 60) ? c->dt : TALON_DTYPE_F32;
    c->p.gemm.scale = fp8 ? (int)oc_ri(s, TALON_GEMM_SCALE_TENSOR, TALON_GEMM_SCALE_BLOCK) : 0;
    c->p.gemm.gated = oc_chance(s, 30);
    c->p.gemm.m = oc_len(s, 1, big ? 2048 : 200);
    c->p.gemm.n = c->p.gemm.gated && c->p.gemm.scale == TALON_GEMM_SCALE_BLOCK
                      ? 64 * oc_len(s, 1, big ? 32 : 8) : 8 * oc_len(s, 1, big ? 256 : 96);
    c->p.gemm.k = fp8 ? 16 * oc_len(s, 1, big ? 128 : 48) : 8 * oc_len(s, 1, big ? 256 : 96);
    c->p.gemm.pad = oc_chance(s, 25) ? 16 : 0;
    c->p.gemm.bias = oc_chance(s, 50);
    c->p.gemm.resid = oc_chance(s, 50) ? 0 : oc_chance(s, 50) ? 1 : 2;
    c->p.gemm.act = (talon_gemm_act)oc_ri(s, 0, 4);
    c->p.gemm.alpha = scalars[oc_ri(s, 0, OC_COUNT(scalars) - 1)];
    c->p.gemm.beta = scalars[oc_ri(s, 0, OC_COUNT(scalars) - 1)];
}

static int gemm_describe(const oc_case *c, char *buf, size_t n, const char *name,
                         const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s->%s m %lld n %lld k %lld pad %lld bias %d resid %d act %d "
                    "gated %d alpha %g beta %g scale %d seed %llx", name, dt,
                    oc_dtype_name(c->p.gemm.ot), (long long)c->p.gemm.m, (long long)c->p.gemm.n,
                    (long long)c->p.gemm.k, (long long)c->p.gemm.pad, c->p.gemm.bias,
                    c->p.gemm.resid, (int)c->p.gemm.act, c->p.gemm.gated,
                    (double)c->p.gemm.alpha, (double)c->p.gemm.beta, c->p.gemm.scale, seed);
}

static int gemm_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int64_t m = c->p.gemm.m, n = c->p.gemm.n, k = c->p.gemm.k;
    const talon_dtype bias_type = c->dt == TALON_DTYPE_FP8_E4M3 ? TALON_DTYPE_BF16 : c->dt;
    gemm_geo g;
    uint64_t s = c->seed;
    int64_t r, t;
    (void)ctx;
    gemm_geometry(c, &g);
    if (oc_add(j, "a", OC_IN, (int)g.isize, m * g.lda, 0) != 0 ||
        oc_add(j, "b", OC_IN, (int)g.isize, g.brows * g.ldb, 0) != 1 ||
        oc_add(j, "bias", OC_IN, 2, c->p.gemm.bias ? g.brows : 1, 0) != 2 ||
        oc_add(j, "c", OC_IN, (int)g.osize, c->p.gemm.resid == 1 ? m * g.ldd : 1, 0) != 3 ||
        oc_add(j, "d", c->p.gemm.resid == 2 ? OC_INOUT : OC_OUT, (int)g.osize, m * g.ldd, 0) != 4 ||
        oc_add(j, "a_scale", OC_IN, 4, g.a_scales, 0) != 5 ||
        oc_add(j, "b_scale", OC_IN, 4, g.b_scales, 0) != 6)
        return -1;
    /* row padding of a and b stays NaN (0xFF: NaN in 16 bits and in e4m3): it would reach d */
    for (r = 0; r < m; r++)
        for (t = 0; t < k; t++)
            gemm_input(c, &s, gemm_set_a, OC_COUNT(gemm_set_a), oc_img(j, 0) + (r * g.lda + t) * g.isize);
    for (r = 0; r < g.brows; r++)
        for (t = 0; t < k; t++)
            gemm_input(c, &s, gemm_set_b, OC_COUNT(gemm_set_b), oc_img(j, 1) + (r * g.ldb + t) * g.isize);
    if (c->p.gemm.bias)
        for (r = 0; r < g.brows; r++) oc_set16(oc_img(j, 2), r, oc_bits(bias_type, oc_u(&s)));
    for (r = 0; r < g.a_scales; r++) oc_setf(oc_img(j, 5), r, 0.5f + ref_unit01(&s));
    for (r = 0; r < g.b_scales; r++) oc_setf(oc_img(j, 6), r, 0.5f + ref_unit01(&s));
    if (c->p.gemm.resid) { /* the residual: in c, or in d itself (its padding stays poison) */
        uint8_t *dst = oc_img(j, c->p.gemm.resid == 1 ? 3 : 4);
        for (r = 0; r < m; r++)
            for (t = 0; t < n; t++) {
                const float v = 2.0f * oc_u(&s);
                if (g.osize == 4) oc_setf(dst, r * g.ldd + t, v);
                else oc_set16(dst, r * g.ldd + t, oc_bits(c->p.gemm.ot, v));
            }
    }
    return 0;
}

static void gemm_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    gemm_geo g;
    gemm_geometry(c, &g);
    a->gemm.d = P(4); a->gemm.a = P(0); a->gemm.b = P(1);
    a->gemm.bias = c->p.gemm.bias ? P(2) : 0;
    a->gemm.c = c->p.gemm.resid == 1 ? P(3) : c->p.gemm.resid == 2 ? P(4) : 0;
    a->gemm.m = c->p.gemm.m; a->gemm.n = c->p.gemm.n; a->gemm.k = c->p.gemm.k;
    if (c->p.gemm.pad) {
        a->gemm.lda = g.lda; a->gemm.ldb = g.ldb; a->gemm.ldd = g.ldd;
        a->gemm.ldc = a->gemm.c ? g.ldd : 0;
    }
    a->gemm.alpha = c->p.gemm.alpha; a->gemm.beta = c->p.gemm.beta;
    a->gemm.act = c->p.gemm.act; a->gemm.gated = c->p.gemm.gated;
    a->gemm.dtype = c->dt; a->gemm.out_dtype = c->p.gemm.ot;
    if (g.fp8) {
        a->gemm.scale = (talon_gemm_scale)c->p.gemm.scale;
        a->gemm.a_scale = P(5);
        a->gemm.b_scale = P(6);
    }
}

static void gemm_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t m = c->p.gemm.m, n = c->p.gemm.n, k = c->p.gemm.k;
    const int block = c->p.gemm.scale == TALON_GEMM_SCALE_BLOCK;
    const talon_dtype ot = c->p.gemm.ot;
    const talon_dtype bias_type = c->dt == TALON_DTYPE_FP8_E4M3 ? TALON_DTYPE_BF16 : c->dt;
    gemm_geo g;
    double *a, *b, *bias, *cres, *sa, *sb, *ref, *mag, rel, e_mag;
    int64_t r, t, step;
    ref_gemm_problem p;
    gemm_geometry(c, &g);
    rel = ot == TALON_DTYPE_BF16 ? 0x1p-8 : ot == TALON_DTYPE_F16 ? 0x1p-11 : 0.0;
    /* fp32 accumulation; fp8: operands whose partial sums the accumulator holds exactly, so
       only the fp32 epilogue (block scales: one fp32 rounding per k-block) */
    e_mag = !g.fp8 ? 0x1p-14 : block ? 0x1p-24 * (double)(g.kb + 16) : 0x1p-20;
    a = (double *)malloc((size_t)(m * k + g.brows * k + g.brows + m * n + m * g.kb + g.b_scales +
                                  g.brows * g.kb + 2 * n) * sizeof(double));
    if (!a) { oc_fail(st, "out of host memory"); return; }
    b = a + m * k;
    bias = b + g.brows * k;
    cres = bias + g.brows;
    sa = cres + m * n;
    sb = sa + m * g.kb;
    ref = sb + g.b_scales + g.brows * g.kb;
    mag = ref + n;
    for (r = 0; r < m; r++)
        for (t = 0; t < k; t++)
            a[r * k + t] = g.fp8 ? ref_e4m3_to_f64(oc_img(j, 0)[r * g.lda + t])
                                 : REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * g.lda + t));
    for (r = 0; r < g.brows; r++)
        for (t = 0; t < k; t++)
            b[r * k + t] = g.fp8 ? ref_e4m3_to_f64(oc_img(j, 1)[r * g.ldb + t])
                                 : REF_TO_F32(c->dt, oc_get16(oc_img(j, 1), r * g.ldb + t));
    for (r = 0; c->p.gemm.bias && r < g.brows; r++) bias[r] = REF_TO_F32(bias_type, oc_get16(oc_img(j, 2), r));
    if (c->p.gemm.resid) {
        const uint8_t *src = oc_img(j, c->p.gemm.resid == 1 ? 3 : 4);
        for (r = 0; r < m; r++)
            for (t = 0; t < n; t++)
                cres[r * n + t] = g.osize == 4 ? oc_getf(src, r * g.ldd + t) : REF_TO_F32(ot, oc_get16(src, r * g.ldd + t));
    }
    if (g.fp8 && block) { /* ref_gemm.h's layout: a [m, kb], b [rows / 128, kb] */
        const int64_t m4 = oc_round_up(m, 4);
        for (r = 0; r < m; r++)
            for (t = 0; t < g.kb; t++) sa[r * g.kb + t] = oc_getf(oc_img(j, 5), t * m4 + r);
        for (r = 0; r < g.b_scales; r++) sb[r] = oc_getf(oc_img(j, 6), r);
    } else if (g.fp8) { /* per row, or one repeated */
        for (r = 0; r < m; r++) sa[r] = oc_getf(oc_img(j, 5), g.a_scales > 1 ? r : 0);
        for (r = 0; r < g.brows; r++) sb[r] = oc_getf(oc_img(j, 6), g.b_scales > 1 ? r : 0);
    }
    p.m = m; p.n = n; p.k = k; p.a = a; p.b = b;
    p.bias = c->p.gemm.bias ? bias : NULL;
    p.c = c->p.gemm.resid ? cres : NULL;
    p.alpha = c->p.gemm.alpha != 0.0f ? c->p.gemm.alpha : 1.0;
    p.beta = c->p.gemm.beta != 0.0f ? c->p.gemm.beta : 1.0;
    p.act = c->p.gemm.act;
    p.gated = c->p.gemm.gated;
    p.a_scale = g.fp8 ? sa : NULL;
    p.b_scale = g.fp8 ? sb : NULL;
    p.block = block;
    step = oc_step((double)m * (double)n * (double)k * (c->p.gemm.gated ? 2.0 : 1.0), budget);
    for (r = 0; r < m; r++) {
        if (r % step && r != m - 1) { /* not compared: written (finite) at least */
            for (t = 0; t < n; t++) {
                const double got = g.osize == 4 ? oc_getf(img[4], r * g.ldd + t)
                                                : REF_TO_F32(ot, oc_get16(img[4], r * g.ldd + t));
                if (!isfinite(got)) {
                    oc_fail(st, "d[%lld, %lld] = %g (not written?)", (long long)r, (long long)t, got);
                    break;
                }
            }
            st->elements += n;
            continue;
        }
        ref_gemm_row(&p, r, ref, mag, NULL);
        for (t = 0; t < n; t++) {
            const double got = g.osize == 4 ? oc_getf(img[4], r * g.ldd + t)
                                            : REF_TO_F32(ot, oc_get16(img[4], r * g.ldd + t));
            oc_cmp(st, "d", r, t, got, ref[t], rel * fabs(ref[t]) + e_mag * mag[t] + 1e-30);
        }
    }
    oc_check_outside(st, j, 4, img[4], m, n, g.ldd);
    free(a);
}

static const oc_op gemm_oc = {gemm_random, gemm_build, gemm_args, gemm_check, gemm_describe, NULL};
#endif
