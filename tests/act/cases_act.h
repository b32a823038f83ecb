/* The act family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_ACT_H
#define TALON_TESTS_CASES_ACT_H

#define ACT_TEST_OPS(X) X(silu_and_mul, silu) X(gelu_and_mul, gelu)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void silu_and_mul_valid_args(talon_silu_and_mul_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->rows = 4; a->cols = 4096;
}

static void gelu_and_mul_valid_args(talon_gelu_and_mul_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->rows = 4; a->cols = 4096;
}
#endif

#endif
