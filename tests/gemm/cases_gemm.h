/* The gemm family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_GEMM_H
#define TALON_TESTS_CASES_GEMM_H

#define GEMM_TEST_OPS(X) X(gemm, gemm)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void gemm_valid_args(talon_gemm_args *a) {
    a->d = 1 * GB; a->a = 2 * GB; a->b = 3 * GB;
    a->m = 4096; a->n = 4096; a->k = 4096;
}
#endif

#endif
