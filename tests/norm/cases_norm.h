/* The norm family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_NORM_H
#define TALON_TESTS_CASES_NORM_H

#define NORM_TEST_OPS(X)                                                                        \
    X(rmsnorm, rmsnorm) X(fused_add_rmsnorm, fused_add_rmsnorm) X(layernorm, layernorm)

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

#endif
