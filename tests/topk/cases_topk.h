/* The topk family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_TOPK_H
#define TALON_TESTS_CASES_TOPK_H

#define TOPK_TEST_OPS(X) X(topk, topk)
#define TOPK_WORKSPACE_OPS(X) X(topk, topk)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void topk_valid_args(talon_topk_args *a) {
    a->out_values = 1 * GB; a->out_indices = 2 * GB; a->in = 3 * GB;
    a->workspace = 4 * GB; a->workspace_bytes = 1 << 30;
    a->rows = 256; a->cols = 131072; a->k = 50; a->sorted = 1;
    a->dtype = TALON_DTYPE_F32;
}
#endif

#endif
