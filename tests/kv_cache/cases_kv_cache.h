/* The kv_cache family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_KV_CACHE_H
#define TALON_TESTS_CASES_KV_CACHE_H

#define KV_CACHE_TEST_OPS(X) X(kv_append, kv_append)
#define KV_CACHE_CHECKED_OPS(X) X(kv_append, talon__kv_params, test_kv_append)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void kv_append_valid_args(talon_kv_append_args *a) {
    a->k_cache = 1 * GB; a->v_cache = 2 * GB; a->k = 3 * GB;
    a->v = 4 * GB; a->slot_mapping = 5 * GB; a->tokens = 16;
    a->num_kv_heads = 8; a->head_dim = 128;
    a->num_pages = 64; a->page_size = 16;
}
#endif

#endif
