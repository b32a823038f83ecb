/* The prefill family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_PREFILL_H
#define TALON_TESTS_CASES_PREFILL_H

#define PREFILL_TEST_OPS(X) X(prefill_attention, prefill) X(prefill_attention_paged, prefill_paged)
#define PREFILL_CHECKED_OPS(X) X(prefill_attention_paged, talon__prefill_params, test_prefill_paged)
#define PREFILL_WORKSPACE_OPS(X)                                                                \
    X(prefill_attention, prefill) X(prefill_attention_paged, prefill_paged)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void prefill_attention_valid_args(talon_prefill_attention_args *a) {
    a->o = 1 * GB; a->q = 2 * GB; a->k = 3 * GB;
    a->v = 4 * GB; a->cu_seqlens_q = 5 * GB; a->cu_seqlens_k = 6 * GB;
    a->workspace = 7 * GB; a->workspace_bytes = 16; a->batch = 2;
    a->total_q = 512; a->total_kv = 512; a->max_seqlen_q = 256;
    a->num_qo_heads = 32; a->num_kv_heads = 8; a->head_dim = 128;
    a->causal = 1;
}

static void prefill_attention_paged_valid_args(talon_prefill_attention_paged_args *a) {
    a->o = 1 * GB; a->q = 2 * GB;
    a->k_cache = 3 * GB; a->v_cache = 4 * GB;
    a->page_table = 5 * GB; a->kv_lens = 6 * GB;
    a->cu_seqlens_q = 7 * GB; a->workspace = 8 * GB;
    a->workspace_bytes = 16; a->batch = 2;
    a->total_q = 512; a->max_seqlen_q = 256;
    a->max_kv_len = 1024; a->num_pages = 256;
    a->page_size = 16; a->num_qo_heads = 32;
    a->num_kv_heads = 8; a->head_dim = 128;
    a->causal = 1;
}
#endif

#endif
