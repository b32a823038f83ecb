/* Driver fault injection on the fake driver (no GPU): a scenario that creates a context and
   runs ops touching every driver call talon makes (module load, get function, attribute set,
   plain and programmatic-dependent launches, the memset of a tile counter, tensor map
   encodes, capture queries, preload, destroy) is replayed once per counted driver call with
   that one call failing (CUDA_ERROR_UNKNOWN). Each time:
   - the step in which the call failed returns an error status, and talon_last_error() starts
     with the function called and names the failure (CUDA_ERROR_UNKNOWN and the call);
   - nothing leaks: after talon_ctx_destroy no module stays loaded (unless the failed call was
     that module's unload, or destroy's push of the context, without which nothing can be
     unloaded: destroy returns nothing to report it) and every context push was popped (but
     the one whose pop failed);
   - the context still works once the fault is gone: the failed step, retried, succeeds, and so
     does every later step.
   The loop ends at the first count past the scenario's last call. */
#include "fake_driver.h"

#define STREAM ((CUstream)(uintptr_t)0x5157)
#define GB (CUdeviceptr)0x40000000ull /* one fake buffer per GiB: no overlaps */

enum { STEP_CREATE, STEP_RMSNORM, STEP_TOPK, STEP_PREFILL, STEP_GEMM, STEP_MOE_GEMM,
       STEP_DECODE, STEP_PRELOAD, STEPS };
static const char *const step_names[] = {"talon_ctx_create", "talon_rmsnorm", "talon_topk",
                                         "talon_prefill_attention", "talon_gemm",
                                         "talon_moe_gemm", "talon_decode_attention",
                                         "talon_ctx_preload"};

static talon_status run_step(int step, talon_ctx **ctx) {
    switch (step) {
    case STEP_CREATE: return talon_ctx_create(ctx, NULL);
    case STEP_RMSNORM: {
        talon_rmsnorm_args a;
        memset(&a, 0, sizeof a);
        a.out = 1 * GB; a.in = 2 * GB; a.weight = 3 * GB; a.rows = 4; a.cols = 4096;
        a.eps = 1e-5f;
        return talon_rmsnorm(*ctx, STREAM, &a);
    }
    case STEP_TOPK: { /* the sampled path: a programmatic-dependent second kernel */
        talon_topk_args a;
        int64_t bytes = 0;
        memset(&a, 0, sizeof a);
        a.out_values = 1 * GB; a.out_indices = 2 * GB; a.in = 3 * GB; a.workspace = 4 * GB;
        a.rows = 256; a.cols = 131072; a.k = 50; a.sorted = 1; a.dtype = TALON_DTYPE_F32;
        if (talon_topk_workspace_size(*ctx, &a, &bytes) != TALON_SUCCESS) return TALON__STATUS_COUNT;
        a.workspace_bytes = bytes;
        return talon_topk(*ctx, STREAM, &a);
    }
    case STEP_PREFILL: { /* a counter memset, then the persistent kernel */
        talon_prefill_attention_args a;
        memset(&a, 0, sizeof a);
        a.o = 1 * GB; a.q = 2 * GB; a.k = 3 * GB; a.v = 4 * GB; a.cu_seqlens_q = 5 * GB;
        a.cu_seqlens_k = 6 * GB; a.workspace = 7 * GB; a.workspace_bytes = 16;
        a.batch = 2; a.total_q = 512; a.total_kv = 512; a.max_seqlen_q = 256;
        a.num_qo_heads = 32; a.num_kv_heads = 8; a.head_dim = 128; a.causal = 1;
        return talon_prefill_attention(*ctx, STREAM, &a);
    }
    case STEP_GEMM: { /* tensor maps encoded on the host */
        talon_gemm_args a;
        memset(&a, 0, sizeof a);
        a.d = 1 * GB; a.a = 2 * GB; a.b = 3 * GB; a.m = 4096; a.n = 4096; a.k = 4096;
        return talon_gemm(*ctx, STREAM, &a);
    }
    case STEP_MOE_GEMM: { /* 3D tensor maps of the experts' weights */
        talon_moe_gemm_args a;
        memset(&a, 0, sizeof a);
        a.d = 1 * GB; a.a = 2 * GB; a.b = 3 * GB; a.sorted_token_ids = 4 * GB;
        a.expert_ids = 5 * GB; a.num_tokens_post_padded = 6 * GB; a.topk_weights = 7 * GB;
        a.tokens = 4; a.topk = 2; a.experts = 8; a.block_size = 128;
        a.sorted_capacity = 1024; a.expert_ids_capacity = 8; a.n = 64; a.k = 64;
        a.a_rows = TALON_MOE_ROWS_TOKEN; a.d_rows = TALON_MOE_ROWS_PAIR;
        a.act = TALON_GEMM_ACT_SILU; a.gated = 1;
        return talon_moe_gemm(*ctx, STREAM, &a);
    }
    case STEP_DECODE: { /* split-KV: the merge is a programmatic dependent */
        talon_decode_attention_args a;
        int64_t bytes = 0;
        memset(&a, 0, sizeof a);
        a.o = 1 * GB; a.q = 2 * GB; a.k_cache = 3 * GB; a.v_cache = 4 * GB;
        a.page_table = 5 * GB; a.kv_lens = 6 * GB; a.workspace = 7 * GB;
        a.batch = 1; a.num_qo_heads = 32; a.num_kv_heads = 8; a.head_dim = 128;
        a.page_size = 16; a.max_kv_len = 32768;
        if (talon_decode_attention_workspace_size(*ctx, &a, &bytes) != TALON_SUCCESS)
            return TALON__STATUS_COUNT;
        a.workspace_bytes = bytes;
        return talon_decode_attention(*ctx, STREAM, &a);
    }
    case STEP_PRELOAD: return talon_ctx_preload(*ctx);
    }
    return TALON__STATUS_COUNT;
}

/* The scenario with the n-th counted call failing; returns 1 when the fault was reached. */
static int run_with_fault(int n) {
    talon_ctx *ctx = NULL;
    int step, hit_step = -1, pop_failed;
    char what[160];
    fake_reset();
    talon__driver_fake = &fake_driver;
    talon__error_buf[0] = '\0';
    fake.quick_loads = 1;
    fake.fault_at = n;
    fake.fault_result = CUDA_ERROR_UNKNOWN;
    for (step = 0; step < STEPS; step++) {
        const int before = fake.fault_call != NULL;
        talon_status s = run_step(step, &ctx);
        if (!before && fake.fault_call) { /* the fault happened in this step */
            hit_step = step;
            snprintf(what, sizeof what, "fault %d (%s) in %s", n, fake.fault_call,
                     step_names[step]);
            if (s == TALON_SUCCESS) fail_msg("%s: returned success", what);
            if (strncmp(talon_last_error(), step_names[step], strlen(step_names[step])) ||
                !strstr(talon_last_error(), "CUDA_ERROR_UNKNOWN") ||
                !strstr(talon_last_error(), fake.fault_call))
                fail_msg("%s: message \"%s\" does not name the failure", what,
                         talon_last_error());
            if (step == STEP_CREATE) {
                assert_null(ctx);
                s = run_step(step, &ctx); /* gone: creating again works */
            } else {
                s = run_step(step, &ctx); /* the context still works: the retry succeeds */
            }
            if (s != TALON_SUCCESS) fail_msg("%s: the retry failed: %s", what, talon_last_error());
        } else if (s != TALON_SUCCESS) {
            fail_msg("fault %d: %s failed with no fault in it: %s", n, step_names[step],
                     talon_last_error());
        }
    }
    talon_ctx_destroy(ctx);
    /* a failed pop leaves its context on the stack (pushes one ahead), whoever called it */
    pop_failed = fake.fault_call && !strcmp(fake.fault_call, "cuCtxPopCurrent");
    if (hit_step < 0 && fake.fault_call) { /* in destroy */
        const int unload = !strcmp(fake.fault_call, "cuModuleUnload");
        const int push_failed = !strcmp(fake.fault_call, "cuCtxPushCurrent");
        if ((!push_failed && fake_loaded_modules() > unload) ||
            fake.pushes != fake.pops + pop_failed)
            fail_msg("fault %d (%s) in talon_ctx_destroy: %d modules left, pushes %d, pops %d",
                     n, fake.fault_call, fake_loaded_modules(), fake.pushes, fake.pops);
    } else if (fake_loaded_modules() || fake.pushes != fake.pops + pop_failed ||
               fake.stale_launches || fake.bad_unloads || fake.bad_images) {
        fail_msg("fault %d (%s): after destroy %d modules loaded, pushes %d pops %d, stale "
                 "launches %d", n, fake.fault_call ? fake.fault_call : "none",
                 fake_loaded_modules(), fake.pushes, fake.pops, fake.stale_launches);
    }
    return fake.fault_call != NULL;
}

static void test_every_driver_call_fails_once(void **state) {
    int n, calls;
    (void)state;
    run_with_fault(0); /* no fault: count the scenario's calls */
    calls = fake.calls;
    for (n = 1; run_with_fault(n); n++) {}
    print_message("test_faults: %d driver calls in the scenario, each failed once\n", n - 1);
    assert_int_equal(n - 1, calls); /* every call of the fault-free run was failed once */
    assert_true(calls >= 40);
}

int main(void) {
    test_add("every driver call of a scenario fails once, in turn",
             test_every_driver_call_fails_once, NULL);
    return test_run("test_faults");
}
