/* The quant family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_QUANT_H
#define TALON_TESTS_CASES_QUANT_H

#define QUANT_TEST_OPS(X) X(quant_fp8, quant) X(rmsnorm_quant_fp8, rmsnorm_quant)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define QUANT_BENCH_STRUCTS(S, F) \
    S(talon_quant_fp8_args, \
      F(out, PTR) F(in, PTR) F(scale, PTR) F(rows, I64) F(cols, I64) F(out_stride, I64) \
      F(in_stride, I64) F(scale_row_stride, I64) F(scale_group_stride, I64) F(mode, ENUM) \
      F(dtype, ENUM)) \
    S(talon_rmsnorm_quant_fp8_args, \
      F(out, PTR) F(scale, PTR) F(in, PTR) F(residual, PTR) F(weight, PTR) F(rows, I64) \
      F(cols, I64) F(out_stride, I64) F(in_stride, I64) F(residual_stride, I64) F(eps, F32) \
      F(mode, ENUM) F(dtype, ENUM))

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void quant_fp8_valid_args(talon_quant_fp8_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->scale = 3 * GB;
    a->rows = 16; a->cols = 4096; a->mode = TALON_QUANT_GROUP;
}

static void rmsnorm_quant_fp8_valid_args(talon_rmsnorm_quant_fp8_args *a) {
    a->out = 1 * GB; a->scale = 2 * GB;
    a->in = 3 * GB; a->weight = 4 * GB;
    a->rows = 16; a->cols = 4096; a->eps = 1e-5f;
    a->mode = TALON_QUANT_TOKEN;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
typedef struct { int64_t rows, cols, pad; int mode, row_major; } quant_params;
typedef struct { int64_t rows, cols, pad, off; int mode, residual; } nq_params;
#define QUANT_OC_PARAMS quant_params quant; nq_params nq;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
#include "ref_quant.h"

/* quant_fp8: the scales' layout */
static void quant_geometry(const oc_case *c, int64_t *rs, int64_t *gs, int64_t *n_scales) {
    const int64_t rows = c->p.quant.rows, groups = c->p.quant.cols / 128;
    *rs = c->p.quant.row_major ? groups : 1;
    *gs = c->p.quant.row_major ? 1 : oc_round_up(rows, 4);
    *n_scales = c->p.quant.mode == TALON_QUANT_TOKEN ? rows
                : c->p.quant.mode == TALON_QUANT_GROUP ? (c->p.quant.row_major ? rows * groups : *gs * groups)
                                                       : 1;
}

static void quant_random(oc_case *c, uint64_t *s, int big) {
    const int64_t max_elems = big ? 8000000 : 300000;
    c->p.quant.mode = (int)oc_ri(s, 0, 2);
    c->p.quant.cols = c->p.quant.mode == TALON_QUANT_GROUP ? 128 * oc_len(s, 1, big ? 64 : 24)
                                                           : 16 * oc_len(s, 1, big ? 1024 : 200);
    c->p.quant.rows = oc_len(s, 1, big ? 2048 : 256);
    while (c->p.quant.rows > 1 && c->p.quant.rows * c->p.quant.cols > max_elems)
        c->p.quant.rows = (c->p.quant.rows + 1) / 2;
    c->p.quant.pad = oc_chance(s, 25) ? 16 * oc_ri(s, 1, 3) : 0;
    c->p.quant.row_major = c->p.quant.mode == TALON_QUANT_GROUP && oc_chance(s, 50);
}

static int quant_describe(const oc_case *c, char *buf, size_t n, const char *name,
                          const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s mode %d rows %lld cols %lld pad %lld row_major %d seed %llx",
                    name, dt, c->p.quant.mode, (long long)c->p.quant.rows,
                    (long long)c->p.quant.cols, (long long)c->p.quant.pad,
                    c->p.quant.row_major, seed);
}

static int quant_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.quant.rows, cols = c->p.quant.cols, ld = cols + c->p.quant.pad;
    const int mode = c->p.quant.mode;
    int64_t rs, gs, n_scales, r, t;
    uint64_t s = c->seed;
    (void)ctx;
    quant_geometry(c, &rs, &gs, &n_scales);
    if (oc_add(j, "in", OC_IN, 2, rows * ld, 0) != 0 || oc_add(j, "out", OC_OUT, 1, rows * ld, 0) != 1 ||
        oc_add(j, "scale", mode == TALON_QUANT_TENSOR ? OC_IN : OC_OUT, 4, n_scales, 0) != 2)
        return -1;
    /* row r uniform in +-2^e (e in [-12, 12]); row 1 zeros, row 2 a NaN, row 3 an inf, row 4
       (per tensor) past the scale's range: saturation */
    for (r = 0; r < rows; r++) {
        const float mag = ldexpf(1.0f, (int)(ref_unit01(&s) * 25.0f) - 12);
        for (t = 0; t < cols; t++) {
            float v = oc_u(&s) * mag;
            if (r == 1 && rows > 4) v = 0.0f;
            if (r == 2 && t == cols / 3) v = NAN;
            if (r == 3 && t == cols / 2) v = INFINITY;
            if (r == 4 && mode == TALON_QUANT_TENSOR) v *= 0x1p14f;
            oc_set16(oc_img(j, 0), r * ld + t, oc_bits(c->dt, v));
        }
    }
    if (mode == TALON_QUANT_TENSOR) oc_setf(oc_img(j, 2), 0, 0x1p-8f + ref_unit01(&s));
    return 0;
}

static void quant_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->quant.out = P(1); a->quant.in = P(0); a->quant.scale = P(2);
    a->quant.rows = c->p.quant.rows; a->quant.cols = c->p.quant.cols;
    if (c->p.quant.pad) a->quant.out_stride = a->quant.in_stride = c->p.quant.cols + c->p.quant.pad;
    if (c->p.quant.row_major) {
        a->quant.scale_row_stride = c->p.quant.cols / 128;
        a->quant.scale_group_stride = 1;
    }
    a->quant.mode = (talon_quant_mode)c->p.quant.mode; a->quant.dtype = c->dt;
}

static void quant_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.quant.rows, cols = c->p.quant.cols, ld = cols + c->p.quant.pad;
    const int mode = c->p.quant.mode;
    int64_t rs, gs, n_scales, r, t, g;
    float *x = (float *)malloc((size_t)cols * sizeof(float));
    uint8_t *q = (uint8_t *)malloc((size_t)cols), *want_scale;
    (void)budget;
    quant_geometry(c, &rs, &gs, &n_scales);
    want_scale = (uint8_t *)malloc((size_t)n_scales * 4);
    if (!x || !q || !want_scale) { oc_fail(st, "out of host memory"); goto done; }
    memset(want_scale, 0xFF, (size_t)n_scales * 4); /* entries no row writes stay poisoned */
    if (mode == TALON_QUANT_TENSOR) memcpy(want_scale, oc_img(j, 2), 4);
    for (r = 0; r < rows; r++) {
        for (t = 0; t < cols; t++) x[t] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * ld + t));
        if (mode == TALON_QUANT_TENSOR) {
            ref_quant_e4m3(x, cols, oc_getf(oc_img(j, 2), 0), q);
        } else if (mode == TALON_QUANT_TOKEN) {
            const float sc = ref_quant_scale(ref_quant_amax(x, cols));
            oc_setf(want_scale, r, sc);
            ref_quant_e4m3(x, cols, sc, q);
        } else {
            for (g = 0; g < cols / 128; g++) {
                const float sc = ref_quant_scale(ref_quant_amax(x + g * 128, 128));
                oc_setf(want_scale, r * rs + g * gs, sc);
                ref_quant_e4m3(x + g * 128, 128, sc, q + g * 128);
            }
        }
        st->elements += cols;
        for (t = 0; t < cols; t++) /* bit-exact */
            if (img[1][r * ld + t] != q[t]) {
                oc_fail(st, "out[%lld, %lld] = 0x%02x, expected 0x%02x", (long long)r, (long long)t,
                        img[1][r * ld + t], q[t]);
                break;
            }
    }
    st->elements += n_scales;
    for (r = 0; mode != TALON_QUANT_TENSOR && r < n_scales; r++)
        if (memcmp(img[2] + 4 * r, want_scale + 4 * r, 4)) {
            oc_fail(st, "scale[%lld] = %a, expected %a", (long long)r, (double)oc_getf(img[2], r),
                    (double)oc_getf(want_scale, r));
            break;
        }
    oc_check_outside(st, j, 1, img[1], rows, cols, ld);
done:
    free(x); free(q); free(want_scale);
}

static void nq_random(oc_case *c, uint64_t *s, int big) {
    const int64_t max_elems = big ? 6000000 : 150000;
    c->p.nq.mode = oc_chance(s, 50) ? TALON_QUANT_TENSOR : TALON_QUANT_TOKEN;
    c->p.nq.cols = oc_chance(s, 50) ? 8 * oc_len(s, 1, 1024) : oc_len(s, 1, big ? 12000 : 3000);
    c->p.nq.rows = oc_len(s, 1, big ? 2048 : 128);
    while (c->p.nq.rows > 1 && c->p.nq.rows * c->p.nq.cols > max_elems)
        c->p.nq.rows = (c->p.nq.rows + 1) / 2;
    c->p.nq.pad = oc_chance(s, 25) ? oc_pad(s) : 0;
    c->p.nq.off = oc_chance(s, 15) ? 4 : 0; /* 8 bytes: in and residual off 16-byte alignment */
    c->p.nq.residual = oc_chance(s, 50);
}

static int nq_describe(const oc_case *c, char *buf, size_t n, const char *name,
                       const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s mode %d rows %lld cols %lld pad %lld offset %lld "
                    "residual %d seed %llx", name, dt, c->p.nq.mode, (long long)c->p.nq.rows,
                    (long long)c->p.nq.cols, (long long)c->p.nq.pad, (long long)c->p.nq.off,
                    c->p.nq.residual, seed);
}

/* rmsnorm_quant_fp8's y = rmsnorm(x) * weight of row r in fp64, from the (rounded) residual
   sum when there is one; returns max |y| */
static double nq_ref_row(const oc_job *j, int64_t r, double *x, double *w, double *y) {
    const oc_case *c = &j->c;
    const int64_t cols = c->p.nq.cols, ld = c->p.nq.pad ? cols + c->p.nq.pad : cols;
    double amax = 0;
    int64_t k;
    for (k = 0; k < cols; k++) {
        const float xv = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * ld + k));
        if (c->p.nq.residual) { /* fp32 add, one rounding (as the kernel) */
            const float sum = xv + REF_TO_F32(c->dt, oc_get16(oc_img(j, 2), r * ld + k));
            x[k] = REF_TO_F32(c->dt, oc_bits(c->dt, sum));
        } else {
            x[k] = xv;
        }
        w[k] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 1), k));
    }
    ref_rmsnorm(x, w, y, 1, cols, (double)1e-6f);
    for (k = 0; k < cols; k++) amax = fabs(y[k]) > amax ? fabs(y[k]) : amax;
    return amax;
}

static int nq_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.nq.rows, cols = c->p.nq.cols, off = c->p.nq.off;
    const int64_t ld = c->p.nq.pad ? cols + c->p.nq.pad : cols;
    const int tensor = c->p.nq.mode == TALON_QUANT_TENSOR;
    uint64_t s = c->seed;
    int64_t r, k;
    (void)ctx;
    if (oc_add(j, "in", OC_IN, 2, (rows - 1) * ld + cols, off) != 0 ||
        oc_add(j, "weight", OC_IN, 2, cols, 0) != 1 ||
        oc_add(j, "residual", OC_INOUT, 2, c->p.nq.residual ? (rows - 1) * ld + cols : 1,
               c->p.nq.residual ? off : 0) != 2 ||
        oc_add(j, "out", OC_OUT, 1, (rows - 1) * ld + cols, 0) != 3 ||
        oc_add(j, "scale", tensor ? OC_IN : OC_OUT, 4, tensor ? 1 : rows, 0) != 4)
        return -1;
    for (r = 0; r < rows; r++) { /* rows of magnitudes 2^-3 .. 2^3 */
        const float mag = ldexpf(1.0f, (int)(r % 7) - 3);
        oc_fill16(j, 0, r * ld, cols, mag, &s);
        if (c->p.nq.residual) oc_fill16(j, 2, r * ld, cols, mag, &s);
    }
    for (k = 0; k < cols; k++) oc_set16(oc_img(j, 1), k, oc_bits(c->dt, 0.5f + ref_unit01(&s)));
    if (tensor) { /* a given scale putting the largest |y| near 200 (no saturation) */
        double *x = (double *)malloc((size_t)cols * sizeof(double) * 3), amax = 0;
        if (!x) return -1;
        for (r = 0; r < rows; r++) {
            const double m = nq_ref_row(j, r, x, x + cols, x + 2 * cols);
            amax = m > amax ? m : amax;
        }
        free(x);
        oc_setf(oc_img(j, 4), 0, (float)(amax > 1e-30 ? amax / 200.0 : 1.0));
    }
    return 0;
}

static void nq_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->rmsnorm_quant.out = P(3); a->rmsnorm_quant.scale = P(4); a->rmsnorm_quant.in = P(0);
    a->rmsnorm_quant.residual = c->p.nq.residual ? P(2) : 0;
    a->rmsnorm_quant.weight = P(1);
    a->rmsnorm_quant.rows = c->p.nq.rows; a->rmsnorm_quant.cols = c->p.nq.cols;
    if (c->p.nq.pad)
        a->rmsnorm_quant.out_stride = a->rmsnorm_quant.in_stride =
            a->rmsnorm_quant.residual_stride = c->p.nq.cols + c->p.nq.pad;
    a->rmsnorm_quant.eps = 1e-6f;
    a->rmsnorm_quant.mode = (talon_quant_mode)c->p.nq.mode; a->rmsnorm_quant.dtype = c->dt;
}

static void nq_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const talon_dtype dt = c->dt;
    const int64_t rows = c->p.nq.rows, cols = c->p.nq.cols;
    const int64_t ld = c->p.nq.pad ? cols + c->p.nq.pad : cols;
    const int tensor = c->p.nq.mode == TALON_QUANT_TENSOR;
    const double rtol = ref_rtol(dt), atol = ref_atol(dt);
    double *x = (double *)malloc((size_t)cols * 3 * sizeof(double)), *w = x + cols, *y = w + cols;
    int64_t r, k;
    (void)budget;
    if (!x) { oc_fail(st, "out of host memory"); return; }
    for (r = 0; r < rows; r++) {
        const double amax = nq_ref_row(j, r, x, w, y);
        double s;
        if (c->p.nq.residual) /* the updated residual: the rounded fp32 sum, exact */
            for (k = 0; k < cols; k++) {
                const uint16_t got = oc_get16(img[2] + j->b[2].off, r * ld + k);
                st->elements++;
                if (got != oc_bits(dt, (float)x[k]))
                    oc_fail(st, "residual[%lld, %lld] = 0x%04x, expected 0x%04x (exact)",
                            (long long)r, (long long)k, got, oc_bits(dt, (float)x[k]));
            }
        if (tensor) {
            s = oc_getf(oc_img(j, 4), 0);
        } else { /* s_r = max(amax(y rounded) / 448, 2^-126): y's rounding moves amax */
            const double want = fmax(amax / 448.0, 0x1p-126);
            s = oc_getf(img[4], r);
            oc_cmp(st, "scale", r, 0, s, want, (rtol + 0x1p-16) * want + 0x1p-126);
        }
        for (k = 0; k < cols; k++) {
            /* y rounded to dtype (within tol_y of the fp64 y), divided by s and rounded to e4m3
               (half its unit: 2^-4 relative, 2^-10 absolute among subnormals) */
            const double tol_y = atol + rtol * fabs(y[k]) + 0x1p-18 * fabs(y[k]);
            const double got = ref_e4m3_to_f64(img[3][r * ld + k]) * s;
            oc_cmp(st, "out (dequantised)", r, k, got, y[k],
                   tol_y + 0x1p-4 * (fabs(y[k]) + tol_y) + 0x1p-10 * s);
        }
    }
    oc_check_outside(st, j, 3, img[3], rows, cols, ld);
    if (c->p.nq.residual) oc_check_outside(st, j, 2, img[2], rows, cols, ld);
    free(x);
}

static const oc_op quant_fp8_oc = {quant_random, quant_build, quant_args,
                                   quant_check, quant_describe, NULL};
static const oc_op rmsnorm_quant_fp8_oc = {nq_random, nq_build, nq_args,
                                           nq_check, nq_describe, NULL};
#endif
