/* The gather family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_GATHER_H
#define TALON_TESTS_CASES_GATHER_H

#define GATHER_TEST_OPS(X) X(gather_rows, gather)
#define GATHER_CHECKED_OPS(X) X(gather_rows, talon__gather_params, test_gather_rows)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void gather_rows_valid_args(talon_gather_rows_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->indices = 3 * GB;
    a->rows = 4; a->cols = 4096; a->in_rows = 128256;
}
#endif

#endif
