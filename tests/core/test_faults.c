/* Driver fault injection on the fake driver (no GPU): a scenario that creates a context, runs
   every op once (each first call loads its image lazily; among them topk's and split decode's
   programmatic-dependent launches, prefill's tile-counter memset, the GEMMs' tensor maps),
   preloads and destroys, touching every driver call talon makes, is replayed once per counted
   driver call with that one call failing (CUDA_ERROR_UNKNOWN). Each time:
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

#include "op_calls.h"

/* Steps: 0 creates the ctx, 1..NUM_OPS run each op once (a valid call, op_calls.h), then the
   preload of the images no op loaded; destroy follows. */
enum { STEP_CREATE = 0, STEP_PRELOAD = NUM_OPS + 1, STEPS };

static const char *step_name(int step) {
    return step == STEP_CREATE ? "talon_ctx_create"
           : step == STEP_PRELOAD ? "talon_ctx_preload" : op_names[step - 1];
}

static talon_status run_step(int step, talon_ctx **ctx) {
    op_args a;
    if (step == STEP_CREATE) return talon_ctx_create(ctx, NULL);
    if (step == STEP_PRELOAD) return talon_ctx_preload(*ctx);
    op_valid_args(step - 1, &a);
    return op_call(*ctx, step - 1, &a);
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
                     step_name(step));
            if (s == TALON_SUCCESS) fail_msg("%s: returned success", what);
            if (strncmp(talon_last_error(), step_name(step), strlen(step_name(step))) ||
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
            fail_msg("fault %d: %s failed with no fault in it: %s", n, step_name(step),
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
