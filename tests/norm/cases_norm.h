/* The norm family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_NORM_H
#define TALON_TESTS_CASES_NORM_H

#define NORM_TEST_OPS(X)                                                                        \
    X(rmsnorm, rmsnorm) X(fused_add_rmsnorm, fused_add_rmsnorm) X(layernorm, layernorm)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define NORM_BENCH_STRUCTS(S, F) \
    S(talon_rmsnorm_args, \
      F(out, PTR) F(in, PTR) F(weight, PTR) F(rows, I64) F(cols, I64) F(out_stride, I64) \
      F(in_stride, I64) F(eps, F32) F(dtype, ENUM)) \
    S(talon_fused_add_rmsnorm_args, \
      F(in, PTR) F(residual, PTR) F(weight, PTR) F(rows, I64) F(cols, I64) F(in_stride, I64) \
      F(residual_stride, I64) F(eps, F32) F(dtype, ENUM)) \
    S(talon_layernorm_args, \
      F(out, PTR) F(in, PTR) F(weight, PTR) F(bias, PTR) F(rows, I64) F(cols, I64) \
      F(out_stride, I64) F(in_stride, I64) F(eps, F32) F(dtype, ENUM))

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void rmsnorm_valid_args(talon_rmsnorm_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->weight = 3 * GB;
    a->rows = 4; a->cols = 4096; a->eps = 1e-5f;
}

static void fused_add_rmsnorm_valid_args(talon_fused_add_rmsnorm_args *a) {
    a->in = 1 * GB; a->residual = 2 * GB;
    a->weight = 3 * GB; a->rows = 4;
    a->cols = 4096; a->eps = 1e-5f;
}

static void layernorm_valid_args(talon_layernorm_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->weight = 3 * GB;
    a->bias = 4 * GB; a->rows = 4; a->cols = 4096;
    a->eps = 1e-5f;
}
#endif

#ifdef TALON_TESTS_OP_CASES_H /* oc_case's params */
/* rmsnorm, fused_add_rmsnorm, layernorm, and the act family's silu_and_mul and gelu_and_mul
   (the same row-wise shapes, cases_act.h): cols of the output (the gated ops read 2 cols);
   strides 0 = contiguous; off: elements added to every pointer (1: misaligned, the
   element-wise path) */
typedef struct { int64_t rows, cols, in_stride, out_stride, res_stride, off; int bias, approx; } norm_params;
#define NORM_OC_PARAMS norm_params norm;
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
static int oc_gated(int op) { return op == OP_silu_and_mul || op == OP_gelu_and_mul; }

static void norm_random(oc_case *c, uint64_t *s, int big) {
    const int64_t max_elems = big ? 6000000 : 150000;
    const int gated = oc_gated(c->op);
    int64_t w;
    c->p.norm.cols = oc_chance(s, 50) ? 8 * oc_len(s, 1, big ? 2048 : 512)
                                      : oc_len(s, 1, big ? 12000 : 3000);
    c->p.norm.rows = oc_len(s, 1, big ? 2048 : 96);
    while (c->p.norm.rows > 1 && c->p.norm.rows * c->p.norm.cols * (gated ? 3 : 2) > max_elems)
        c->p.norm.rows = (c->p.norm.rows + 1) / 2;
    w = gated ? 2 * c->p.norm.cols : c->p.norm.cols;
    c->p.norm.in_stride = oc_chance(s, 30) ? w + oc_pad(s) : 0;
    c->p.norm.out_stride = oc_chance(s, 30) ? c->p.norm.cols + oc_pad(s) : 0;
    c->p.norm.res_stride = oc_chance(s, 30) ? c->p.norm.cols + oc_pad(s) : 0;
    c->p.norm.off = oc_chance(s, 15);
    c->p.norm.bias = oc_chance(s, 50);
    c->p.norm.approx = oc_chance(s, 50);
}

static int norm_describe(const oc_case *c, char *buf, size_t n, const char *name,
                         const char *dt, unsigned long long seed) {
    return snprintf(buf, n, "%s %s rows %lld cols %lld in_stride %lld out_stride %lld "
                    "residual_stride %lld offset %lld bias %d approx %d seed %llx", name, dt,
                    (long long)c->p.norm.rows, (long long)c->p.norm.cols,
                    (long long)c->p.norm.in_stride, (long long)c->p.norm.out_stride,
                    (long long)c->p.norm.res_stride, (long long)c->p.norm.off,
                    c->p.norm.bias, c->p.norm.approx, seed);
}

static int norm_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int gated = oc_gated(c->op), fused = c->op == OP_fused_add_rmsnorm;
    const int ln = c->op == OP_layernorm;
    const int64_t rows = c->p.norm.rows, cols = c->p.norm.cols, off = c->p.norm.off;
    const int64_t w = gated ? 2 * cols : cols;
    const int64_t ldx = c->p.norm.in_stride ? c->p.norm.in_stride : w;
    const int64_t ldy = c->p.norm.out_stride ? c->p.norm.out_stride : cols;
    const int64_t ldr = c->p.norm.res_stride ? c->p.norm.res_stride : cols;
    uint64_t s = c->seed;
    int64_t r, k;
    int yi;
    (void)ctx;
    if (oc_add(j, "in", fused ? OC_INOUT : OC_IN, 2, (rows - 1) * ldx + w, off) != 0) return -1;
    if (!gated && oc_add(j, "weight", OC_IN, 2, cols, off) != 1) return -1;
    yi = oc_add(j, fused ? "residual" : "out", fused ? OC_INOUT : OC_OUT, 2,
                (rows - 1) * (fused ? ldr : ldy) + cols, off);
    if (yi < 0 || (ln && oc_add(j, "bias", OC_IN, 2, cols, off) != 3)) return -1;
    for (r = 0; r < rows; r++) /* row padding stays NaN */
        for (k = 0; k < w; k++) {
            /* layernorm: mean 3, sd 1 (the mean matters); others uniform in [-2, 2) */
            const float v = ln ? 3.0f + (ref_unit01(&s) + ref_unit01(&s) + ref_unit01(&s) +
                                         ref_unit01(&s) - 2.0f) * 1.7320508f
                               : 2.0f * oc_u(&s);
            oc_set16(oc_img(j, 0), r * ldx + k, oc_bits(c->dt, v));
        }
    if (!gated)
        for (k = 0; k < cols; k++) oc_set16(oc_img(j, 1), k, oc_bits(c->dt, 0.5f + ref_unit01(&s)));
    if (fused)
        for (r = 0; r < rows; r++) oc_fill16(j, yi, r * ldr, cols, 2.0f, &s);
    if (ln) oc_fill16(j, 3, 0, cols, 1.0f, &s);
    return 0;
}

static void norm_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const talon_dtype dt = c->dt;
    const int gated = oc_gated(c->op), fused = c->op == OP_fused_add_rmsnorm;
    const int ln = c->op == OP_layernorm;
    const int64_t rows = c->p.norm.rows, cols = c->p.norm.cols, w = gated ? 2 * cols : cols;
    const int64_t ldx = c->p.norm.in_stride ? c->p.norm.in_stride : w;
    const int64_t ldy = c->p.norm.out_stride ? c->p.norm.out_stride : cols;
    const int64_t ldr = c->p.norm.res_stride ? c->p.norm.res_stride : cols;
    const int oi = fused ? 0 : gated ? 1 : 2; /* the buffer holding the result */
    const int64_t ldo = fused ? ldx : ldy;
    const double rtol = ref_rtol(dt), atol = ref_atol(dt);
    const uint8_t *xin = oc_img(j, 0), *out = img[oi] + j->b[oi].off;
    double *x = (double *)malloc((size_t)(2 * w + 5 * cols) * sizeof(double));
    double *ref = x + 2 * w, *mag = ref + cols, *wv = mag + cols, *bv = wv + cols;
    int64_t r, k;
    (void)budget;
    if (!x) { oc_fail(st, "out of host memory"); return; }
    for (k = 0; k < cols; k++) {
        wv[k] = gated ? 0.0 : REF_TO_F32(dt, oc_get16(oc_img(j, 1), k));
        bv[k] = ln && c->p.norm.bias ? REF_TO_F32(dt, oc_get16(oc_img(j, 3), k)) : 0.0;
    }
    for (r = 0; r < rows; r++) {
        if (c->op == OP_rmsnorm) {
            for (k = 0; k < cols; k++) x[k] = REF_TO_F32(dt, oc_get16(xin, r * ldx + k));
            ref_rmsnorm(x, wv, ref, 1, cols, (double)1e-6f);
            for (k = 0; k < cols; k++) mag[k] = fabs(ref[k]);
        } else if (fused) {
            const uint8_t *res0 = oc_img(j, 2), *res = img[2] + j->b[2].off;
            for (k = 0; k < cols; k++) { /* the new residual: fp32 add, one rounding, exact */
                const float sum = REF_TO_F32(dt, oc_get16(xin, r * ldx + k)) + REF_TO_F32(dt, oc_get16(res0, r * ldr + k));
                const uint16_t want = oc_bits(dt, sum), got = oc_get16(res, r * ldr + k);
                st->elements++;
                if (got != want)
                    oc_fail(st, "residual[%lld, %lld] = 0x%04x, expected 0x%04x (exact)",
                            (long long)r, (long long)k, got, want);
                x[k] = REF_TO_F32(dt, want);
            }
            ref_rmsnorm(x, wv, ref, 1, cols, (double)1e-6f);
            for (k = 0; k < cols; k++) mag[k] = fabs(ref[k]);
        } else if (ln) {
            double mean = 0, var = 0, rstd;
            for (k = 0; k < cols; k++) x[k] = REF_TO_F32(dt, oc_get16(xin, r * ldx + k));
            ref_layernorm(x, wv, c->p.norm.bias ? bv : NULL, ref, 1, cols, (double)1e-5f);
            for (k = 0; k < cols; k++) mean += x[k];
            mean /= (double)cols;
            for (k = 0; k < cols; k++) var += (x[k] - mean) * (x[k] - mean);
            rstd = 1.0 / sqrt(var / (double)cols + (double)1e-5f);
            /* the row mean is an fp32 sum: what it may lose, scaled through the epilogue */
            for (k = 0; k < cols; k++) mag[k] = (fabs(x[k]) + fabs(mean)) * rstd * fabs(wv[k]) + fabs(bv[k]);
        } else {
            const enum ref_act act = c->op == OP_silu_and_mul ? REF_SILU
                                     : c->p.norm.approx ? REF_GELU_TANH : REF_GELU_ERF;
            for (k = 0; k < w; k++) x[k] = REF_TO_F32(dt, oc_get16(xin, r * ldx + k));
            ref_gated(act, x, ref, 1, cols);
            for (k = 0; k < cols; k++) mag[k] = fabs(x[k] * x[cols + k]);
        }
        for (k = 0; k < cols; k++)
            oc_cmp(st, j->b[oi].name, r, k, REF_TO_F32(dt, oc_get16(out, r * ldo + k)), ref[k],
                   atol + rtol * fabs(ref[k]) + 0x1p-18 * mag[k]);
    }
    oc_check_outside(st, j, oi, img[oi], rows, cols, ldo);
    if (fused) oc_check_outside(st, j, 2, img[2], rows, cols, ldr);
    free(x);
}

static void rmsnorm_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->rmsnorm.out = P(2); a->rmsnorm.in = P(0); a->rmsnorm.weight = P(1);
    a->rmsnorm.rows = c->p.norm.rows; a->rmsnorm.cols = c->p.norm.cols;
    a->rmsnorm.out_stride = c->p.norm.out_stride; a->rmsnorm.in_stride = c->p.norm.in_stride;
    a->rmsnorm.eps = 1e-6f; a->rmsnorm.dtype = c->dt;
}

static void fused_add_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->fused_add_rmsnorm.in = P(0); a->fused_add_rmsnorm.residual = P(2);
    a->fused_add_rmsnorm.weight = P(1);
    a->fused_add_rmsnorm.rows = c->p.norm.rows; a->fused_add_rmsnorm.cols = c->p.norm.cols;
    a->fused_add_rmsnorm.in_stride = c->p.norm.in_stride;
    a->fused_add_rmsnorm.residual_stride = c->p.norm.res_stride;
    a->fused_add_rmsnorm.eps = 1e-6f; a->fused_add_rmsnorm.dtype = c->dt;
}

static void layernorm_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->layernorm.out = P(2); a->layernorm.in = P(0); a->layernorm.weight = P(1);
    a->layernorm.bias = c->p.norm.bias ? P(3) : 0;
    a->layernorm.rows = c->p.norm.rows; a->layernorm.cols = c->p.norm.cols;
    a->layernorm.out_stride = c->p.norm.out_stride; a->layernorm.in_stride = c->p.norm.in_stride;
    a->layernorm.eps = 1e-5f; a->layernorm.dtype = c->dt;
}

static const oc_op rmsnorm_oc = {norm_random, norm_build, rmsnorm_args,
                                 norm_check, norm_describe, NULL};
static const oc_op fused_add_rmsnorm_oc = {norm_random, norm_build, fused_add_args,
                                           norm_check, norm_describe, NULL};
static const oc_op layernorm_oc = {norm_random, norm_build, layernorm_args,
                                   norm_check, norm_describe, NULL};
#endif
