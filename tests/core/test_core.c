/* Dispatcher tests on a fake CUDA driver (no GPU) for what every op shares: context creation,
   module loading, concurrent first use, stream capture, launch failure, status strings, bundle
   information and thread-local errors, with a norm and an activation as the ops that load and
   launch. Each family's validation and launch rows are in tests/<family>/test_<family>.c. */
#include "fake_driver.h"
/* ---------------------------------------------------------------- ops, generically */
typedef enum { OP_RMSNORM, OP_LAYERNORM, OP_SILU } op_id;

typedef union op_args {
    talon_rmsnorm_args rms;
    talon_layernorm_args ln;
    talon_silu_and_mul_args silu;
} op_args;

/* 256-aligned fake device addresses, distinct so a swapped field shows in the params. */
enum { P_OUT = 0x100000, P_IN = 0x200000, P_W = 0x300000, P_BIAS = 0x500000 };
#define ROWS 4
#define COLS 4096
#define EPS 1e-5f
#define STREAM ((CUstream)(uintptr_t)0x5157)

/* A valid call on the 16-byte path; rows edit it from here. */
static void valid_args(op_id op, op_args *a) {
    memset(a, 0, sizeof *a);
    switch (op) {
    case OP_RMSNORM:
        a->rms.out = P_OUT; a->rms.in = P_IN; a->rms.weight = P_W;
        a->rms.rows = ROWS; a->rms.cols = COLS; a->rms.eps = EPS;
        break;
    case OP_LAYERNORM:
        a->ln.out = P_OUT; a->ln.in = P_IN; a->ln.weight = P_W; a->ln.bias = P_BIAS;
        a->ln.rows = ROWS; a->ln.cols = COLS; a->ln.eps = EPS;
        break;
    case OP_SILU:
        a->silu.out = P_OUT; a->silu.in = P_IN; a->silu.rows = ROWS; a->silu.cols = COLS;
        break;
    }
}

static talon_status call_op(op_id op, talon_ctx *ctx, CUstream s, const op_args *a) {
    switch (op) {
    case OP_RMSNORM: return talon_rmsnorm(ctx, s, a ? &a->rms : NULL);
    case OP_LAYERNORM: return talon_layernorm(ctx, s, a ? &a->ln : NULL);
    case OP_SILU: return talon_silu_and_mul(ctx, s, a ? &a->silu : NULL);
    }
    return TALON__STATUS_COUNT;
}

/* ================================================================ 1-3: context creation */
static void test_no_driver(void **state) {
    static const talon__driver none = {0};
    talon_ctx *ctx = (talon_ctx *)(uintptr_t)0x1; /* must be overwritten */
    talon__driver d;
    (void)state;
    talon__driver_fake = &none;
    assert_int_equal(talon_ctx_create(&ctx, NULL), TALON_ERROR_NO_DRIVER);
    assert_null(ctx);
    assert_contains(talon_last_error(), "libcuda");

    memset(&d, 0xff, sizeof d); /* open must clear, not just fail to set */
    talon__driver_open("libdoes-not-exist.so.9", &d);
    assert_int_equal(d.loaded, 0);
    assert_null(d.cuInit);
}

typedef struct cc_row { const char *name; int major, minor; const char *sm; } cc_row;
static const cc_row cc_rows[] = {
    {"ctx_create rejects sm_80 (A100)", 8, 0, "sm_80"},
    {"ctx_create rejects sm_91", 9, 1, "sm_91"},
    {"ctx_create rejects sm_100 (B200)", 10, 0, "sm_100"},
};

static void test_unsupported_device(void **state) {
    const cc_row *row = (const cc_row *)*state;
    talon_ctx *ctx = g_ctx; /* non-NULL: must be overwritten */
    fake.major = row->major;
    fake.minor = row->minor;
    fake.name = "NVIDIA Fake-GPU 80GB";
    assert_int_equal(talon_ctx_create(&ctx, NULL), TALON_ERROR_UNSUPPORTED_DEVICE);
    assert_null(ctx);
    assert_contains(talon_last_error(), "NVIDIA Fake-GPU 80GB");
    assert_token(talon_last_error(), row->sm);
}

static void test_create_invalid_arguments(void **state) {
    talon_ctx_options bad_flags = {NULL, 4}; /* 1 and 2 are TALON_CTX_PRELOAD and _CHECKED */
    talon_ctx *ctx = g_ctx;
    (void)state;
    assert_int_equal(talon_ctx_create(NULL, NULL), TALON_ERROR_INVALID_ARGUMENT);
    assert_token(talon_last_error(), "out");

    assert_int_equal(talon_ctx_create(&ctx, &bad_flags), TALON_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_contains(talon_last_error(), "flags");

    fake.current = NULL;
    ctx = g_ctx;
    assert_int_equal(talon_ctx_create(&ctx, NULL), TALON_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_contains(talon_last_error(), "context");
}

/* An explicit options->context needs none current and is the one modules load into. */
static void test_create_explicit_context(void **state) {
    CUcontext other = (CUcontext)(uintptr_t)0xD0D0;
    talon_ctx_options o = {other, 0};
    talon_ctx *ctx = NULL;
    op_args a;
    (void)state;
    fake.current = NULL;
    assert_int_equal(talon_ctx_create(&ctx, &o), TALON_SUCCESS);
    assert_non_null(ctx);
    valid_args(OP_RMSNORM, &a);
    assert_int_equal(call_op(OP_RMSNORM, ctx, STREAM, &a), TALON_SUCCESS);
    assert_ptr_equal(fake.last_pushed, other);
    talon_ctx_destroy(ctx);
}

/* ================================================================ 4: module load failure */
static const CUresult load_errors[] = {CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_INVALID_IMAGE};
static const char *const load_error_names[] = {"CUDA_ERROR_NO_BINARY_FOR_GPU",
                                               "CUDA_ERROR_INVALID_IMAGE"};

static void test_module_load_failure_lazy(void **state) {
    int e = (int)(intptr_t)*state;
    op_args a;
    fake.load_result = load_errors[e];
    valid_args(OP_RMSNORM, &a);
    assert_int_equal(call_op(OP_RMSNORM, g_ctx, STREAM, &a), TALON_ERROR_MODULE_LOAD);
    assert_token(talon_last_error(), load_error_names[e]);
    assert_contains(talon_last_error(), "driver");
    assert_contains(talon_last_error(), "CUDA " TALON__BUNDLE_CUDA); /* what the cubins need */
    assert_contains(talon_last_error(), "CUDA 12.4");                /* what the driver has */
    assert_int_equal(fake.load_calls[TALON__IMG_norm], 1);
    assert_int_equal(fake.launches, 0);
}

static void test_module_load_failure_preload(void **state) {
    int e = (int)(intptr_t)*state;
    talon_ctx_options o = {NULL, TALON_CTX_PRELOAD};
    talon_ctx *ctx = g_ctx;
    fake.load_result = load_errors[e];
    assert_int_equal(talon_ctx_create(&ctx, &o), TALON_ERROR_MODULE_LOAD);
    assert_null(ctx);
    assert_token(talon_last_error(), load_error_names[e]);
    assert_int_equal(fake.launches, 0);
}

/* The second image failing must not leak the first one (teardown checks all are unloaded). */
static void test_preload_second_image_fails(void **state) {
    talon_ctx_options o = {NULL, TALON_CTX_PRELOAD};
    talon_ctx *ctx = g_ctx;
    (void)state;
    fake.load_result = CUDA_ERROR_INVALID_IMAGE;
    fake.load_fail_image = TALON__IMG_act;
    assert_int_equal(talon_ctx_create(&ctx, &o), TALON_ERROR_MODULE_LOAD);
    assert_null(ctx);
    assert_int_equal(fake.load_calls[TALON__IMG_norm], 1);
    assert_int_equal(fake.load_calls[TALON__IMG_act], 1);
    assert_int_equal(fake_loaded_modules(), 0);
}

/* A symbol missing from an image fails the load; kernels resolved before it in the same image
   belong to the module talon unloads, so none of them may be launched afterwards. */
static void test_partial_resolve_publishes_nothing(void **state) {
    op_args a;
    (void)state;
    fake.getfn_fail_symbol = "talon_layernorm_f16_v8_b128"; /* last of the norm image */
    valid_args(OP_RMSNORM, &a);
    assert_int_equal(call_op(OP_RMSNORM, g_ctx, STREAM, &a), TALON_ERROR_MODULE_LOAD);
    assert_contains(talon_last_error(), "talon_layernorm_f16_v8_b128");
    assert_int_equal(fake_loaded_modules(), 0);
    assert_int_equal(call_op(OP_RMSNORM, g_ctx, STREAM, &a), TALON_ERROR_MODULE_LOAD);
    assert_int_equal(fake.stale_launches, 0);
    assert_int_equal(fake.launches, 0);
}

/* ================================================================ 5-6: validation and launch
   rows: tests/norm/test_norm.c and tests/act/test_act.c */

/* ================================================================ 7: concurrent first use */
#define NTHREADS 8
static pthread_barrier_t race_barrier;

static void *race_rmsnorm(void *arg) {
    op_args a;
    valid_args(OP_RMSNORM, &a);
    pthread_barrier_wait(&race_barrier);
    *(talon_status *)arg = call_op(OP_RMSNORM, g_ctx, STREAM, &a);
    return NULL;
}

static void test_concurrent_first_use(void **state) {
    pthread_t t[NTHREADS];
    talon_status s[NTHREADS];
    op_args a;
    int i;
    (void)state;
    pthread_barrier_init(&race_barrier, NULL, NTHREADS);
    for (i = 0; i < NTHREADS; i++) {
        s[i] = TALON__STATUS_COUNT;
        assert_int_equal(pthread_create(&t[i], NULL, race_rmsnorm, &s[i]), 0);
    }
    for (i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&race_barrier);
    for (i = 0; i < NTHREADS; i++) assert_int_equal(s[i], TALON_SUCCESS);
    assert_int_equal(fake.load_calls[TALON__IMG_norm], 1);
    assert_int_equal(fake.load_calls[TALON__IMG_act], 0);
    assert_int_equal(fake.launches, NTHREADS);

    valid_args(OP_SILU, &a);
    assert_int_equal(call_op(OP_SILU, g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.load_calls[TALON__IMG_act], 1);
    assert_int_equal(fake.load_calls[TALON__IMG_norm], 1);
    assert_int_equal(fake.launches, NTHREADS + 1);
}

/* ================================================================ 8: stream capture */
static void test_capture_needs_preload(void **state) {
    op_args a;
    int i;
    (void)state;
    valid_args(OP_LAYERNORM, &a);
    fake.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(call_op(OP_LAYERNORM, g_ctx, STREAM, &a), TALON_ERROR_NOT_LOADED);
    assert_contains(talon_last_error(), "talon_ctx_preload");
    assert_int_equal(fake.load_calls[TALON__IMG_norm] + fake.load_calls[TALON__IMG_act], 0);
    assert_int_equal(fake.launches, 0);

    assert_int_equal(talon_ctx_preload(g_ctx), TALON_SUCCESS);
    assert_int_equal(talon_ctx_preload(g_ctx), TALON_SUCCESS); /* idempotent */
    for (i = 0; i < TALON__NUM_IMAGES; i++) assert_int_equal(fake.load_calls[i], 1);

    fake.capturing_calls = 0;
    assert_int_equal(call_op(OP_LAYERNORM, g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 1);
    assert_int_equal(fake.capturing_calls, 0); /* the loaded path makes no extra driver call */
}

static void test_preload_null_ctx(void **state) {
    (void)state;
    assert_int_equal(talon_ctx_preload(NULL), TALON_ERROR_INVALID_ARGUMENT);
    assert_token(talon_last_error(), "ctx");
}

/* ================================================================ 9: launch failure */
static void test_launch_failure(void **state) {
    op_args a;
    (void)state;
    fake.launch_result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    valid_args(OP_SILU, &a);
    assert_int_equal(call_op(OP_SILU, g_ctx, STREAM, &a), TALON_ERROR_DRIVER);
    assert_token(talon_last_error(), "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
    assert_token(talon_last_error(), "talon_silu_and_mul_bf16_v8");
    assert_int_equal(fake.launches, 0);
}

/* ================================================================ 10: static information */
static void test_status_strings(void **state) {
    static const struct { talon_status s; const char *text; } expect[] = {
#define STATUS_ROW(name, value, text) {name, text},
        TALON_STATUS_LIST(STATUS_ROW)
#undef STATUS_ROW
    };
    size_t i, j;
    (void)state;
    for (i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        assert_string_equal(talon_status_string(expect[i].s), expect[i].text);
        assert_string_not_equal(expect[i].text, "unknown status");
        for (j = 0; j < i; j++) assert_string_not_equal(expect[i].text, expect[j].text);
    }
    assert_int_equal(sizeof expect / sizeof expect[0], TALON__STATUS_COUNT);
    assert_string_equal(talon_status_string(TALON__STATUS_COUNT), "unknown status");
    assert_string_equal(talon_status_string((talon_status)-1), "unknown status");
    assert_string_equal(talon_status_string((talon_status)1000), "unknown status");
}

static void test_version_and_bundle(void **state) {
    const talon_bundle_info *b = talon_bundle_info_get();
    int k, j;
    (void)state;
    assert_int_equal(talon_version(), TALON_VERSION_MAJOR * 10000 + TALON_VERSION_MINOR * 100 +
                                          TALON_VERSION_PATCH);
    assert_non_null(b);
    assert_ptr_equal(b, talon_bundle_info_get());
    assert_non_null(b->version);
    assert_non_null(b->git_commit);
    assert_non_null(b->nvcc_version);
    assert_non_null(b->arch);
    assert_non_null(b->kernel_names);
    assert_string_equal(b->version, TALON_VERSION_STRING);
    assert_string_equal(b->arch, "sm_90a");
    assert_true(b->git_commit[0] && b->nvcc_version[0]);
    assert_int_equal(b->num_images, TALON__NUM_IMAGES);
    assert_int_equal(b->num_kernels, TALON__NUM_KERNELS);
    for (k = 0; k < b->num_kernels; k++) {
        assert_string_equal(b->kernel_names[k], talon__kernels[k].symbol);
        for (j = 0; j < k; j++) assert_string_not_equal(b->kernel_names[k], b->kernel_names[j]);
    }
}

/* ================================================================ 11: thread-local errors */
static char other_initial[512], other_after[512];

static void *fail_in_other_thread(void *arg) {
    op_args a;
    (void)arg;
    snprintf(other_initial, sizeof other_initial, "%s", talon_last_error());
    valid_args(OP_SILU, &a);
    a.silu.cols = 0;
    talon_silu_and_mul(g_ctx, STREAM, &a.silu);
    snprintf(other_after, sizeof other_after, "%s", talon_last_error());
    return NULL;
}

static void test_last_error_thread_local(void **state) {
    char mine[512];
    pthread_t t;
    (void)state;
    assert_int_equal(talon_rmsnorm(NULL, STREAM, NULL), TALON_ERROR_INVALID_ARGUMENT);
    snprintf(mine, sizeof mine, "%s", talon_last_error());
    assert_int_equal(pthread_create(&t, NULL, fail_in_other_thread, NULL), 0);
    pthread_join(t, NULL);
    assert_string_equal(other_initial, ""); /* a new thread starts with no error */
    assert_contains(other_after, "talon_silu_and_mul");
    assert_string_equal(talon_last_error(), mine);
}

/* ================================================================ main */
static char names[TEST_MAX][128];

#define ADD(fn) test_add(#fn, fn, NULL)
#define ADD_ROWS(table, fn)                                                                    \
    for (i = 0; i < sizeof table / sizeof table[0]; i++) test_add(table[i].name, fn, &table[i])

int main(void) {
    size_t i;
    ADD(test_no_driver);
    ADD_ROWS(cc_rows, test_unsupported_device);
    ADD(test_create_invalid_arguments);
    ADD(test_create_explicit_context);
    for (i = 0; i < sizeof load_errors / sizeof load_errors[0]; i++) {
        snprintf(names[test_count], sizeof names[0], "lazy load fails with %s", load_error_names[i]);
        test_add(names[test_count], test_module_load_failure_lazy, (const void *)(uintptr_t)i);
        snprintf(names[test_count], sizeof names[0], "TALON_CTX_PRELOAD fails with %s",
                 load_error_names[i]);
        test_add(names[test_count], test_module_load_failure_preload, (const void *)(uintptr_t)i);
    }
    ADD(test_preload_second_image_fails);
    ADD(test_partial_resolve_publishes_nothing);
    ADD(test_concurrent_first_use);
    ADD(test_capture_needs_preload);
    ADD(test_preload_null_ctx);
    ADD(test_launch_failure);
    ADD(test_status_strings);
    ADD(test_version_and_bundle);
    ADD(test_last_error_thread_local);
    return test_run("test_core");
}
