/* The act family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_ACT_H
#define TALON_TESTS_CASES_ACT_H

#define ACT_TEST_OPS(X) X(silu_and_mul, silu) X(gelu_and_mul, gelu)
/* bench/shim.c: the fields of its args structs, in talon.h's order (kinds: bench/shim.c) */
#define ACT_BENCH_STRUCTS(S, F) \
    S(talon_silu_and_mul_args, \
      F(out, PTR) F(in, PTR) F(rows, I64) F(cols, I64) F(out_stride, I64) F(in_stride, I64) \
      F(dtype, ENUM)) \
    S(talon_gelu_and_mul_args, \
      F(out, PTR) F(in, PTR) F(rows, I64) F(cols, I64) F(out_stride, I64) F(in_stride, I64) \
      F(dtype, ENUM) F(approx, ENUM))

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void silu_and_mul_valid_args(talon_silu_and_mul_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->rows = 4; a->cols = 4096;
}

static void gelu_and_mul_valid_args(talon_gelu_and_mul_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->rows = 4; a->cols = 4096;
}
#endif

#endif

#ifdef OC_FAMILY_CASES /* op_cases.h */
/* the gated ops take norm's row-wise cases (cases_norm.h: shapes, inputs, the reference
   of each op) with their own arguments */
static void silu_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->silu.out = P(1); a->silu.in = P(0); a->silu.rows = c->p.norm.rows;
    a->silu.cols = c->p.norm.cols; a->silu.out_stride = c->p.norm.out_stride;
    a->silu.in_stride = c->p.norm.in_stride; a->silu.dtype = c->dt;
}

static void gelu_args(const oc_job *j, const oc_dev *d, op_args *a) {
    const oc_case *c = &j->c;
    a->gelu.out = P(1); a->gelu.in = P(0); a->gelu.rows = c->p.norm.rows;
    a->gelu.cols = c->p.norm.cols; a->gelu.out_stride = c->p.norm.out_stride;
    a->gelu.in_stride = c->p.norm.in_stride; a->gelu.dtype = c->dt;
    a->gelu.approx = c->p.norm.approx ? TALON_GELU_TANH : TALON_GELU_ERF;
}

static const oc_op silu_and_mul_oc = {norm_random, norm_build, silu_args,
                                      norm_check, norm_describe, NULL};
static const oc_op gelu_and_mul_oc = {norm_random, norm_build, gelu_args,
                                      norm_check, norm_describe, NULL};
#endif
