/* The moe_gemm family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_MOE_GEMM_H
#define TALON_TESTS_CASES_MOE_GEMM_H

#define MOE_GEMM_TEST_OPS(X) X(moe_gemm, moe_gemm) X(grouped_gemm, grouped_gemm)
#define MOE_GEMM_CHECKED_OPS(X)                                                                 \
    X(moe_gemm, talon__moe_gemm_params, test_moe_gemm)                                          \
    X(grouped_gemm, talon__moe_gemm_params, test_grouped_gemm)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void moe_gemm_valid_args(talon_moe_gemm_args *a) {
    a->d = 1 * GB; a->a = 2 * GB; a->b = 3 * GB;
    a->sorted_token_ids = 4 * GB; a->expert_ids = 5 * GB;
    a->num_tokens_post_padded = 6 * GB; a->topk_weights = 7 * GB;
    a->tokens = 4; a->topk = 2; a->experts = 8;
    a->block_size = 128; a->sorted_capacity = 1024;
    a->expert_ids_capacity = 8; a->n = 64; a->k = 64;
    a->a_rows = TALON_MOE_ROWS_TOKEN; a->d_rows = TALON_MOE_ROWS_PAIR;
    a->act = TALON_GEMM_ACT_SILU; a->gated = 1;
}

static void grouped_gemm_valid_args(talon_grouped_gemm_args *a) {
    a->d = 1 * GB; a->a = 2 * GB; a->b = 3 * GB;
    a->group_rows = 4 * GB; a->groups = 8;
    a->rows = 256; a->n = 64; a->k = 64;
    a->layout = TALON_GROUPED_MASKED; a->act = TALON_GEMM_ACT_SILU;
    a->gated = 1;
}
#endif

#endif
