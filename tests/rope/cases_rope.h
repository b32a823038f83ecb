/* The rope family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_ROPE_H
#define TALON_TESTS_CASES_ROPE_H

#define ROPE_TEST_OPS(X) X(rope, rope)
#define ROPE_CHECKED_OPS(X) X(rope, talon__rope_params, test_rope)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void rope_valid_args(talon_rope_args *a) {
    a->q = 1 * GB; a->k = 2 * GB; a->positions = 3 * GB; a->tokens = 16;
    a->num_q_heads = 32; a->num_kv_heads = 8; a->head_dim = 128;
}
#endif

#endif
