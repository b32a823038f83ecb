/* The decode family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_DECODE_H
#define TALON_TESTS_CASES_DECODE_H

#define DECODE_TEST_OPS(X) X(decode_attention, decode) X(merge_attention_states, merge)
#define DECODE_CHECKED_OPS(X) X(decode_attention, talon__decode_params, test_decode_attention)
#define DECODE_WORKSPACE_OPS(X) X(decode_attention, decode)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void decode_attention_valid_args(talon_decode_attention_args *a) {
    a->o = 1 * GB; a->q = 2 * GB; a->k_cache = 3 * GB;
    a->v_cache = 4 * GB; a->page_table = 5 * GB; a->kv_lens = 6 * GB;
    a->workspace = 7 * GB; a->workspace_bytes = 1 << 30; a->batch = 1;
    a->num_qo_heads = 32; a->num_kv_heads = 8; a->head_dim = 128;
    a->page_size = 16; a->max_kv_len = 32768;
}

static void merge_attention_states_valid_args(talon_merge_attention_states_args *a) {
    a->o = 1 * GB; a->lse = 2 * GB; a->o_a = 3 * GB;
    a->lse_a = 4 * GB; a->o_b = 5 * GB; a->lse_b = 6 * GB;
    a->rows = 64; a->head_dim = 128;
}
#endif

#endif
