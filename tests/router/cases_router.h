/* The router family's ops in the dispatcher-wide tests (tests/core/); the scheme, and what
   each section holds: tests/common/op_calls.h. */
#ifndef TALON_TESTS_CASES_ROUTER_H
#define TALON_TESTS_CASES_ROUTER_H

#define ROUTER_TEST_OPS(X) X(moe_router_topk, router)

#ifdef TALON_TESTS_FAKE_DRIVER_H /* op_valid_args: a call each op accepts */
static void moe_router_topk_valid_args(talon_moe_router_topk_args *a) {
    a->topk_weights = 1 * GB; a->topk_ids = 2 * GB; a->logits = 3 * GB;
    a->tokens = 16; a->experts = 128; a->k = 8;
}
#endif

#endif
