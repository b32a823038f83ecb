/* The quant family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_QUANT_H
#define TALON_TESTS_CASES_QUANT_H

#define QUANT_TEST_OPS(X) X(quant_fp8, quant) X(rmsnorm_quant_fp8, rmsnorm_quant)

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

#endif
