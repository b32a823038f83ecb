/* The moe family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_MOE_H
#define TALON_TESTS_CASES_MOE_H

#define MOE_TEST_OPS(X) X(moe_align_block_size, align) X(moe_sum, moe_sum)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void moe_align_block_size_valid_args(talon_moe_align_block_size_args *a) {
    a->sorted_token_ids = 1 * GB; a->expert_ids = 2 * GB;
    a->num_tokens_post_padded = 3 * GB; a->topk_ids = 4 * GB;
    a->tokens = 16; a->k = 8; a->experts = 128; a->block_size = 128;
    talon_moe_align_block_size_capacity(16, 8, 128, 128, &a->sorted_capacity,
                                        &a->expert_ids_capacity);
}

static void moe_sum_valid_args(talon_moe_sum_args *a) {
    a->out = 1 * GB; a->in = 2 * GB; a->weights = 3 * GB;
    a->tokens = 16; a->k = 8; a->hidden = 4096;
}
#endif

#endif
