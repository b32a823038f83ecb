/* Driver fault injection on the fake driver (no GPU): a scenario that creates a context, runs
   every op once (each first call loads its image lazily; among them topk's and split decode's
   programmatic-dependent launches, prefill's tile-counter memset, the GEMMs' tensor maps),
   preloads, creates a checked context (TALON_CTX_CHECKED: its record's allocation), reads a
   planted violation back with talon_ctx_check on a stream and on stream 0 (copy, clear,
   stream and context synchronisation) and destroys both (the record's free), touching every
   driver call talon makes (checked at the end against the driver table), is replayed once per
   counted driver call with that one call failing (CUDA_ERROR_UNKNOWN). Each time:
   - the step in which the call failed returns an error status, and talon_last_error() starts
     with the function called and names the failure (CUDA_ERROR_UNKNOWN and the call);
   - nothing leaks: after talon_ctx_destroy no module stays loaded and no device memory stays
     allocated (unless the failed call was that module's unload or that record's free, or
     destroy's push of the context, without which nothing can be unloaded or freed: destroy
     returns nothing to report it) and every context push was popped (but the one whose pop
     failed);
   - the context still works once the fault is gone: the failed step, retried, succeeds, and so
     does every later step.
   The loop ends at the first count past the scenario's last call. */
#include "fake_driver.h"

#include "op_calls.h"

/* Steps: 0 creates the ctx, 1..NUM_OPS run each op once (a valid call, op_calls.h), then the
   preload of the images no op loaded, the checked ctx's creation and two talon_ctx_check
   calls, each after a planted violation; destroy of both follows. */
enum {
    STEP_CREATE = 0,
    STEP_PRELOAD = NUM_OPS + 1,
    STEP_CREATE_CHECKED,
    STEP_CHECK_STREAM,
    STEP_CHECK_ALL,
    STEPS
};

static const char *step_name(int step) {
    return step == STEP_CREATE || step == STEP_CREATE_CHECKED ? "talon_ctx_create"
           : step == STEP_PRELOAD                             ? "talon_ctx_preload"
           : step >= STEP_CHECK_STREAM                        ? "talon_ctx_check"
                                                              : op_names[step - 1];
}

/* What a kernel records: a bad gather index (talon_ctx_check then copies, clears and waits). */
static void plant_violation(talon_ctx *checked) {
    talon__check_record *r = (talon__check_record *)(uintptr_t)checked->check;
    r->claim = 1;
    r->done = 1;
    r->kernel = 0;
    r->site = TALON__CHECK_GATHER_INDEX;
    r->index = 1;
    r->value = -1;
    r->bound = 2;
}

static talon_status run_step(int step, talon_ctx **ctx, talon_ctx **checked) {
    static const talon_ctx_options checked_options = {NULL, TALON_CTX_CHECKED};
    talon_check_report report;
    op_args a;
    if (step == STEP_CREATE) return talon_ctx_create(ctx, NULL);
    if (step == STEP_PRELOAD) return talon_ctx_preload(*ctx);
    if (step == STEP_CREATE_CHECKED) return talon_ctx_create(checked, &checked_options);
    if (step >= STEP_CHECK_STREAM) {
        plant_violation(*checked);
        return talon_ctx_check(*checked, step == STEP_CHECK_STREAM ? STREAM : NULL, &report);
    }
    op_valid_args(step - 1, &a);
    return op_call(*ctx, STREAM, step - 1, &a);
}

/* The driver calls a fault hit: each must be hit once the loop has run (every entry point of
   the driver table but those no scenario reaches: cuInit is called only when libcuda is
   opened, never with the fake; cuDriverGetVersion only in a message about a cubin the driver
   cannot run; the error-text calls are not counted). */
#define FAULT_NAMES_MAX 64
static const char *fault_names[FAULT_NAMES_MAX];
static int fault_name_count;

static void note_fault(const char *call) {
    int i;
    for (i = 0; i < fault_name_count; i++)
        if (!strcmp(fault_names[i], call)) return;
    if (fault_name_count < FAULT_NAMES_MAX) fault_names[fault_name_count++] = call;
}

static int fault_noted(const char *call) {
    int i;
    for (i = 0; i < fault_name_count; i++)
        if (!strcmp(fault_names[i], call)) return 1;
    return 0;
}

/* The scenario with the n-th counted call failing; returns 1 when the fault was reached. */
static int run_with_fault(int n) {
    talon_ctx *ctx = NULL, *checked = NULL;
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
        talon_status s = run_step(step, &ctx, &checked);
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
            if (step == STEP_CREATE || step == STEP_CREATE_CHECKED) {
                assert_null(step == STEP_CREATE ? ctx : checked);
                s = run_step(step, &ctx, &checked); /* gone: creating again works */
            } else {
                s = run_step(step, &ctx, &checked); /* the context still works: the retry succeeds */
            }
            if (s != TALON_SUCCESS) fail_msg("%s: the retry failed: %s", what, talon_last_error());
        } else if (s != TALON_SUCCESS) {
            fail_msg("fault %d: %s failed with no fault in it: %s", n, step_name(step),
                     talon_last_error());
        }
    }
    talon_ctx_destroy(ctx);
    talon_ctx_destroy(checked);
    if (fake.fault_call) note_fault(fake.fault_call);
    /* a failed pop leaves its context on the stack (pushes one ahead), whoever called it */
    pop_failed = fake.fault_call && !strcmp(fake.fault_call, "cuCtxPopCurrent");
    if (hit_step < 0 && fake.fault_call) { /* in a destroy */
        const int unload = !strcmp(fake.fault_call, "cuModuleUnload");
        const int freed = !strcmp(fake.fault_call, "cuMemFree");
        const int push_failed = !strcmp(fake.fault_call, "cuCtxPushCurrent");
        if ((!push_failed && (fake_loaded_modules() > unload || fake_live_allocs() > freed)) ||
            fake_live_allocs() > 1 || fake.pushes != fake.pops + pop_failed || fake.bad_frees)
            fail_msg("fault %d (%s) in talon_ctx_destroy: %d modules left, %d allocations "
                     "left, pushes %d, pops %d", n, fake.fault_call, fake_loaded_modules(),
                     fake_live_allocs(), fake.pushes, fake.pops);
    } else if (fake_loaded_modules() || fake_live_allocs() || fake.bad_frees ||
               fake.pushes != fake.pops + pop_failed || fake.stale_launches ||
               fake.bad_unloads || fake.bad_images) {
        fail_msg("fault %d (%s): after destroy %d modules loaded, %d allocations left, pushes "
                 "%d pops %d, stale launches %d", n, fake.fault_call ? fake.fault_call : "none",
                 fake_loaded_modules(), fake_live_allocs(), fake.pushes, fake.pops,
                 fake.stale_launches);
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
#define FAULT_COVERED(name, version, args)                                                     \
    if (strcmp(#name, "cuInit") && strcmp(#name, "cuDriverGetVersion") &&                      \
        strcmp(#name, "cuGetErrorName") && strcmp(#name, "cuGetErrorString") &&                \
        !fault_noted(#name))                                                                   \
        fail_msg("the scenario never calls %s: no fault of it was injected", #name);
    TALON__DRIVER_FUNCS(FAULT_COVERED)
#undef FAULT_COVERED
}

int main(void) {
    test_add("every driver call of a scenario fails once, in turn",
             test_every_driver_call_fails_once, NULL);
    return test_run("test_faults");
}
