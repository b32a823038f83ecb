/* Checked mode (TALON_CTX_CHECKED, talon_ctx_check) on the fake driver (no GPU): the record's
   life cycle (allocated and zeroed at create, freed at destroy), talon_ctx_check's errors and
   reads (the fake's device memory is host memory, so a test plants what a kernel would
   record), and the launches: on a checked ctx each op whose kernels check passes the record
   and the launched kernel in its params, and on an unchecked ctx every op's params are those
   of a checked ctx with the check field zero (off, a launch passes what it always did). The
   kernels' checks themselves run on the GPU: tests/core/test_gpu_checked.c. */
#include "fake_driver.h"

#include "op_calls.h"

static talon_ctx *checked_ctx(void) {
    talon_ctx_options o = {NULL, TALON_CTX_CHECKED};
    talon_ctx *ctx = NULL;
    assert_int_equal(talon_ctx_create(&ctx, &o), TALON_SUCCESS);
    assert_non_null(ctx);
    return ctx;
}

static talon__check_record *record_of(talon_ctx *ctx) {
    return (talon__check_record *)(uintptr_t)ctx->check;
}

/* What a kernel would leave: a complete record of `site` found by `symbol`. */
static void plant(talon_ctx *ctx, const char *symbol, int site, int64_t index, int64_t value,
                  int64_t bound) {
    talon__check_record *r = record_of(ctx);
    r->claim = 3; /* three threads raced; the first wrote */
    r->done = 1;
    r->kernel = kernel_index(symbol);
    r->site = site;
    r->index = index;
    r->value = value;
    r->bound = bound;
}

static int record_is_zero(talon_ctx *ctx) {
    static const talon__check_record zero;
    return !memcmp(record_of(ctx), &zero, sizeof zero);
}

/* ================================================================ the record */
static void test_create_allocates_a_zeroed_record(void **state) {
    talon_ctx *ctx;
    (void)state;
    assert_int_equal(fake_live_allocs(), 0); /* the fixture's ctx is unchecked: nothing */
    assert_int_equal(fake.memsets, 0);
    ctx = checked_ctx();
    assert_int_equal(fake_live_allocs(), 1);
    assert_int_equal(fake.allocs[0].bytes, sizeof(talon__check_record));
    assert_true(ctx->check == fake.allocs[0].ptr);
    assert_true(record_is_zero(ctx)); /* the fake's cuMemAlloc fills with 0xa5 */
    assert_int_equal(fake.memsets, 1);
    assert_int_equal(fake.fill.n, TALON__CHECK_RECORD_WORDS);
    assert_ptr_equal(fake.fill.stream, NULL);
    assert_int_equal(fake.stream_syncs, 1); /* the memset is waited for */
    assert_ptr_equal(fake.last_sync, NULL);
    assert_int_equal(fake_loaded_modules(), 0); /* nothing loaded without PRELOAD */
    talon_ctx_destroy(ctx);
    assert_int_equal(fake_live_allocs(), 0);
}

static void test_create_checked_preload(void **state) {
    talon_ctx_options o = {NULL, TALON_CTX_CHECKED | TALON_CTX_PRELOAD};
    talon_ctx *ctx = NULL;
    (void)state;
    fake.quick_loads = 1;
    assert_int_equal(talon_ctx_create(&ctx, &o), TALON_SUCCESS);
    assert_int_equal(fake_loaded_modules(), TALON__NUM_IMAGES);
    assert_int_equal(fake_live_allocs(), 1);
    talon_ctx_destroy(ctx);
    assert_int_equal(fake_live_allocs(), 0);
    assert_int_equal(fake_loaded_modules(), 0);
}

static void test_create_unknown_flag(void **state) {
    talon_ctx_options o = {NULL, TALON_CTX_CHECKED | 4u};
    talon_ctx *ctx = g_ctx;
    (void)state;
    assert_int_equal(talon_ctx_create(&ctx, &o), TALON_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_contains(talon_last_error(), "0x6");
    assert_int_equal(fake_live_allocs(), 0);
}

/* Each driver call of the record's set-up failing: DRIVER, named, nothing left behind. */
static void test_create_faults(void **state) {
    static const char *const calls[] = {"cuMemAlloc", "cuMemsetD32Async", "cuStreamSynchronize"};
    talon_ctx_options o = {NULL, TALON_CTX_CHECKED};
    talon_ctx *ctx;
    int n, base;
    (void)state;
    fake.calls = 0;
    fake.fault_at = 0;
    ctx = checked_ctx(); /* count the calls of a clean create */
    base = fake.calls;
    talon_ctx_destroy(ctx);
    for (n = 0; n < 3; n++) {
        fake.calls = 0;
        fake.fault_call = NULL;
        fake.fault_result = CUDA_ERROR_OUT_OF_MEMORY;
        fake.fault_at = base - 3 + n; /* the record's three calls come before the last pop */
        ctx = g_ctx;
        assert_int_equal(talon_ctx_create(&ctx, &o), TALON_ERROR_DRIVER);
        assert_null(ctx);
        assert_non_null(fake.fault_call);
        assert_string_equal(fake.fault_call, calls[n]);
        assert_contains(talon_last_error(), "talon_ctx_create");
        assert_contains(talon_last_error(), calls[n]);
        assert_contains(talon_last_error(), "CUDA_ERROR_OUT_OF_MEMORY");
        assert_int_equal(fake_live_allocs(), 0);
        assert_int_equal(fake.pushes, fake.pops);
    }
    fake.fault_at = 0;
}

/* ================================================================ talon_ctx_check */
static void test_check_arguments(void **state) {
    talon_check_report r;
    talon_ctx *ctx;
    (void)state;
    assert_int_equal(talon_ctx_check(g_ctx, STREAM, NULL), TALON_ERROR_INVALID_ARGUMENT);
    assert_token(talon_last_error(), "report");

    memset(&r, 0xff, sizeof r);
    assert_int_equal(talon_ctx_check(NULL, STREAM, &r), TALON_ERROR_INVALID_ARGUMENT);
    assert_token(talon_last_error(), "ctx");
    assert_int_equal(r.violated, 0);
    assert_null(r.op);
    assert_null(r.kernel);

    memset(&r, 0xff, sizeof r);
    assert_int_equal(talon_ctx_check(g_ctx, STREAM, &r), TALON_ERROR_INVALID_ARGUMENT);
    assert_contains(talon_last_error(), "talon_ctx_check:");
    assert_token(talon_last_error(), "TALON_CTX_CHECKED");
    assert_int_equal(r.violated, 0);
    assert_null(r.what);
    assert_int_equal(fake.stream_syncs + fake.ctx_syncs + fake.dtoh_copies, 0);

    ctx = checked_ctx();
    fake.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE; /* a capturing stream: refused, untouched */
    plant(ctx, "talon_gather_rows_u16", TALON__CHECK_GATHER_INDEX, 1, 2, 3);
    fake.stream_syncs = 0;
    assert_int_equal(talon_ctx_check(ctx, STREAM, &r), TALON_ERROR_INVALID_ARGUMENT);
    assert_contains(talon_last_error(), "capturing");
    assert_int_equal(r.violated, 0);
    assert_int_equal(fake.stream_syncs + fake.ctx_syncs + fake.dtoh_copies, 0);
    assert_int_equal(record_of(ctx)->claim, 3);
    assert_int_equal(fake.pushes, fake.pops);
    talon_ctx_destroy(ctx);
}

static void test_check_clean(void **state) {
    talon_check_report r;
    talon_ctx *ctx;
    (void)state;
    ctx = checked_ctx();
    fake.stream_syncs = fake.memsets = 0;
    memset(&r, 0xff, sizeof r);
    assert_int_equal(talon_ctx_check(ctx, STREAM, &r), TALON_SUCCESS);
    assert_int_equal(r.violated, 0);
    assert_null(r.op);
    assert_int_equal(r.index, 0);
    assert_int_equal(fake.ctx_syncs, 0);   /* a stream: only that stream is waited for */
    assert_int_equal(fake.stream_syncs, 1);
    assert_ptr_equal(fake.last_sync, STREAM);
    assert_int_equal(fake.dtoh_copies, 1);
    assert_int_equal(fake.memsets, 0);     /* nothing to clear */
    assert_int_equal(fake.pushes, fake.pops);

    assert_int_equal(talon_ctx_check(ctx, NULL, &r), TALON_SUCCESS); /* 0: every stream */
    assert_int_equal(r.violated, 0);
    assert_int_equal(fake.ctx_syncs, 1);
    talon_ctx_destroy(ctx);
}

static void test_check_reports_and_clears(void **state) {
    talon_check_report r;
    talon_ctx *ctx;
    (void)state;
    ctx = checked_ctx();
    plant(ctx, "talon_decode_attention_bf16_d128_g4", TALON__CHECK_DECODE_PAGE, 3 * 512 + 7,
          -5, 1000);
    fake.memsets = 0;
    assert_int_equal(talon_ctx_check(ctx, STREAM, &r), TALON_SUCCESS);
    assert_int_equal(r.violated, 1);
    assert_string_equal(r.op, "talon_decode_attention");
    assert_string_equal(r.kernel, "talon_decode_attention_bf16_d128_g4");
    assert_string_equal(r.what, "page_table");
    assert_string_equal(r.rule, "in [0, num_pages)");
    assert_int_equal(r.index, 3 * 512 + 7);
    assert_int_equal(r.value, -5);
    assert_int_equal(r.bound, 1000);
    assert_true(record_is_zero(ctx)); /* cleared on the stream, and waited for */
    assert_int_equal(fake.memsets, 1);
    assert_ptr_equal(fake.fill.stream, STREAM);
    assert_ptr_equal(fake.last_sync, STREAM);
    assert_int_equal(talon_ctx_check(ctx, STREAM, &r), TALON_SUCCESS); /* reported once */
    assert_int_equal(r.violated, 0);

    /* every site names its op and tensor as the list in check.def does */
#define SITE_ROW(site, op_, what_, rule_)                                                      \
    plant(ctx, "talon_rope_neox_bf16_v8", TALON__CHECK_##site, 1, 2, 3);                      \
    assert_int_equal(talon_ctx_check(ctx, NULL, &r), TALON_SUCCESS);                           \
    assert_int_equal(r.violated, 1);                                                           \
    assert_string_equal(r.op, op_);                                                            \
    assert_string_equal(r.what, what_);                                                        \
    assert_string_equal(r.rule, rule_);
    TALON__CHECK_SITES(SITE_ROW)
#undef SITE_ROW
    talon_ctx_destroy(ctx);
}

/* A record claimed but not yet written (a kernel of another stream is recording): the whole
   context is waited for and the record read again; one never completed reads as unknown. */
static void test_check_incomplete_record(void **state) {
    talon_check_report r;
    talon_ctx *ctx;
    (void)state;
    ctx = checked_ctx();
    record_of(ctx)->claim = 1;
    fake.ctx_syncs = fake.dtoh_copies = 0;
    assert_int_equal(talon_ctx_check(ctx, STREAM, &r), TALON_SUCCESS);
    assert_int_equal(fake.ctx_syncs, 1);
    assert_int_equal(fake.dtoh_copies, 2);
    assert_int_equal(r.violated, 1);
    assert_contains(r.op, "unknown");
    assert_contains(r.kernel, "unknown");
    assert_true(record_is_zero(ctx));

    plant(ctx, "talon_gather_rows_u16", TALON__CHECK_NUM_SITES, 0, 0, 0); /* not a site */
    assert_int_equal(talon_ctx_check(ctx, STREAM, &r), TALON_SUCCESS);
    assert_int_equal(r.violated, 1);
    assert_contains(r.what, "unknown");
    plant(ctx, "talon_gather_rows_u16", TALON__CHECK_GATHER_INDEX, 0, 0, 0);
    record_of(ctx)->kernel = TALON__NUM_KERNELS; /* not a kernel */
    assert_int_equal(talon_ctx_check(ctx, STREAM, &r), TALON_SUCCESS);
    assert_contains(r.kernel, "unknown");
    talon_ctx_destroy(ctx);
}

/* Each driver call of talon_ctx_check failing once: DRIVER, named, report zero, the context
   stack as it was; the record stays for the next call unless the read got through. */
static void test_check_faults(void **state) {
    static const char *const calls[] = {"cuCtxPushCurrent", "cuStreamIsCapturing",
                                        "cuMemcpyDtoHAsync", "cuStreamSynchronize",
                                        "cuMemsetD32Async", "cuStreamSynchronize",
                                        "cuCtxPopCurrent"};
    talon_check_report r;
    talon_ctx *ctx;
    int n;
    (void)state;
    ctx = checked_ctx();
    for (n = 0; n < 7; n++) {
        plant(ctx, "talon_gather_rows_u16", TALON__CHECK_GATHER_INDEX, 9, 99, 8);
        fake.calls = 0;
        fake.fault_call = NULL;
        fake.fault_result = CUDA_ERROR_UNKNOWN;
        fake.fault_at = n + 1;
        memset(&r, 0xff, sizeof r);
        assert_int_equal(talon_ctx_check(ctx, STREAM, &r), TALON_ERROR_DRIVER);
        assert_non_null(fake.fault_call);
        assert_string_equal(fake.fault_call, calls[n]);
        assert_contains(talon_last_error(), "talon_ctx_check: ");
        assert_contains(talon_last_error(), calls[n]);
        assert_contains(talon_last_error(), "CUDA_ERROR_UNKNOWN");
        assert_int_equal(r.violated, 0);
        assert_null(r.op);
        /* a failed pop leaves the pushed context on the stack */
        assert_int_equal(fake.pushes, fake.pops + !strcmp(calls[n], "cuCtxPopCurrent"));
        fake.pops = fake.pushes;
        fake.fault_at = 0;
        /* the retry works; the violation is there unless the clear already went through */
        assert_int_equal(talon_ctx_check(ctx, STREAM, &r), TALON_SUCCESS);
        assert_int_equal(r.violated, n < 5);
        if (n < 5) assert_int_equal(r.value, 99);
    }
    talon_ctx_destroy(ctx);
}

static void test_destroy_frees_the_record(void **state) {
    talon_ctx *ctx;
    (void)state;
    ctx = checked_ctx();
    fake.calls = 0;
    fake.fault_call = NULL;
    fake.fault_result = CUDA_ERROR_UNKNOWN;
    fake.fault_at = 1; /* destroy's push: nothing can be freed (destroy reports nothing) */
    talon_ctx_destroy(ctx);
    assert_int_equal(fake_live_allocs(), 1);
    fake.fault_at = 0;
    free((void *)(uintptr_t)fake.allocs[0].ptr);
    fake.nallocs = 0;
}

/* ================================================================ launches */
/* The ops whose kernels check (CHECKED_OPS, op_calls.h), and where their params hold the
   talon__check. */
typedef struct checked_op { int op; size_t at; } checked_op;
static const checked_op checked_ops[] = {
#define CHECKED_ROW(name, params, gpu_test) {OP_##name, offsetof(params, check)},
    CHECKED_OPS(CHECKED_ROW)
#undef CHECKED_ROW
};

static const checked_op *checked_op_of(int op) {
    size_t i;
    for (i = 0; i < sizeof checked_ops / sizeof checked_ops[0]; i++)
        if (checked_ops[i].op == op) return &checked_ops[i];
    return NULL;
}

/* Every op, on an unchecked and on a checked ctx: the same launches, and the same params but
   the checked op's talon__check (zero unchecked; the record and the kernel's row checked) and
   decode's page_limit. */
static void test_launch_params(void **state) {
    const int op = (int)(intptr_t)*state;
    const checked_op *c = checked_op_of(op);
    fake_launch plain[FAKE_LOG];
    talon_ctx *ctx;
    op_args a;
    int launches, i;
    fake.quick_loads = 1;
    op_valid_args(op, &a);
    assert_int_equal(op_call(g_ctx, STREAM, op, &a), TALON_SUCCESS);
    launches = fake.launches;
    assert_true(launches >= 1 && launches <= FAKE_LOG);
    memcpy(plain, fake.log, sizeof plain);
    ctx = checked_ctx();
    fake.launches = 0;
    assert_int_equal(op_call(ctx, STREAM, op, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, launches);
    for (i = 0; i < launches; i++) {
        fake_launch *l = &fake.log[i];
        const int k = fake.fns[FN_INDEX(l->fn)].kernel;
        assert_int_equal(fake.fns[FN_INDEX(plain[i].fn)].kernel, k);
        assert_memory_equal(plain[i].grid, l->grid, sizeof l->grid);
        assert_int_equal(plain[i].param_size, l->param_size);
        if (c && i == 0) { /* the op's first kernel is the one that checks */
            talon__check want, off;
            memset(&want, 0, sizeof want);
            want.record = ctx->check;
            want.kernel = k;
            memcpy(&off, plain[i].params + c->at, sizeof off);
            assert_true(off.record == 0 && off.kernel == 0 && off.unused == 0);
            assert_memory_equal(l->params + c->at, &want, sizeof want);
            memcpy(l->params + c->at, &off, sizeof off);
            if (op == OP_decode_attention) { /* no num_pages declared: negative ids only */
                const size_t pl = offsetof(talon__decode_params, page_limit);
                uint32_t limit, zero = 0;
                memcpy(&limit, l->params + pl, 4);
                assert_int_equal(limit, 0x80000000u);
                memcpy(l->params + pl, &zero, 4);
            }
        }
        assert_memory_equal(plain[i].params, l->params, (size_t)l->param_size);
    }
    talon_ctx_destroy(ctx);
}

/* decode's num_pages: the page-id bound of a checked launch; validated either way. */
static void test_decode_num_pages(void **state) {
    const size_t pl = offsetof(talon__decode_params, page_limit);
    talon_ctx *ctx;
    op_args a;
    uint32_t limit;
    (void)state;
    fake.quick_loads = 1;
    op_valid_args(OP_decode_attention, &a);
    a.decode.num_pages = 4096;
    assert_int_equal(op_call(g_ctx, STREAM, OP_decode_attention, &a), TALON_SUCCESS);
    memcpy(&limit, fake.log[0].params + pl, 4);
    assert_int_equal(limit, 0); /* unchecked: untouched */
    ctx = checked_ctx();
    fake.launches = 0;
    assert_int_equal(op_call(ctx, STREAM, OP_decode_attention, &a), TALON_SUCCESS);
    memcpy(&limit, fake.log[0].params + pl, 4);
    assert_int_equal(limit, 4096);
    talon_ctx_destroy(ctx);
}

int main(void) {
    int op;
#define ADD(fn) test_add(#fn, fn, NULL)
    ADD(test_create_allocates_a_zeroed_record);
    ADD(test_create_checked_preload);
    ADD(test_create_unknown_flag);
    ADD(test_create_faults);
    ADD(test_check_arguments);
    ADD(test_check_clean);
    ADD(test_check_reports_and_clears);
    ADD(test_check_incomplete_record);
    ADD(test_check_faults);
    ADD(test_destroy_frees_the_record);
    ADD(test_decode_num_pages);
#undef ADD
    for (op = 0; op < NUM_OPS; op++)
        test_add(op_names[op], test_launch_params, (const void *)(intptr_t)op);
    return test_run("test_checked");
}
