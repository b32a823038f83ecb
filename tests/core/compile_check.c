/* Built four ways (C99 and C++17, -pedantic, header-only and against libtalon.a): calls every
   public function of talon.h (each op, through the tests' op list, with a NULL ctx) and runs
   without a GPU. Exit status 0 when the header's version macros agree with the compiled
   talon_version() and every call behaved. */
#include <stdio.h>
#include <string.h>
#include "talon.h"
#include "../common/op_calls.h"

static int failures = 0;

static void expect(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "compile_check: %s\n", what);
        failures++;
    }
}

/* Every op (the tests' list, op_calls.h) rejects a NULL ctx on the host before it reads its
   args, with a message naming it, so none of this needs a driver. */
static void check_ops(void) {
    op_args a;
    int op;
    memset(&a, 0, sizeof a);
    for (op = 0; op < NUM_OPS; op++) {
        const talon_status s = op_call(NULL, NULL, op, &a);
        if (s != TALON_ERROR_INVALID_ARGUMENT ||
            strncmp(talon_last_error(), op_names[op], strlen(op_names[op])) != 0) {
            fprintf(stderr, "compile_check: %s(NULL ctx): %s (%s)\n", op_names[op],
                    talon_status_string(s), talon_last_error());
            failures++;
        }
    }
}

/* The functions beside the ops: the workspace sizes (NULL ctx) and moe_align's capacities. */
static void check_helpers(void) {
    talon_topk_args topk;
    talon_decode_attention_args dec;
    talon_prefill_attention_args pre;
    talon_prefill_attention_paged_args paged;
    int64_t sorted = 0, blocks = 0, bytes = -1;
    memset(&topk, 0, sizeof topk);
    memset(&dec, 0, sizeof dec);
    memset(&pre, 0, sizeof pre);
    memset(&paged, 0, sizeof paged);
    expect(talon_topk_workspace_size(NULL, &topk, &bytes) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_topk_workspace_size(NULL ctx)");
    expect(talon_decode_attention_workspace_size(NULL, &dec, &bytes) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_decode_attention_workspace_size(NULL ctx)");
    expect(talon_prefill_attention_workspace_size(NULL, &pre, &bytes) == TALON_ERROR_INVALID_ARGUMENT,
           "talon_prefill_attention_workspace_size(NULL ctx)");
    expect(talon_prefill_attention_paged_workspace_size(NULL, &paged, &bytes) ==
               TALON_ERROR_INVALID_ARGUMENT, "talon_prefill_attention_paged_workspace_size(NULL ctx)");
    expect(talon_moe_align_block_size_capacity(16, 8, 256, 64, &sorted, &blocks) == TALON_SUCCESS &&
               sorted > 0 && blocks > 0,
           "talon_moe_align_block_size_capacity");
}

static void check_statuses(void) {
#define STATUS_VALUE(name, value, text) name,
    static const talon_status all[] = {TALON_STATUS_LIST(STATUS_VALUE)};
#undef STATUS_VALUE
    const char *unknown = talon_status_string(TALON__STATUS_COUNT);
    size_t i;
    expect(unknown != NULL && unknown[0] != '\0', "talon_status_string(out of range) empty");
    for (i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *s = talon_status_string(all[i]);
        expect(s != NULL && s[0] != '\0', "talon_status_string empty");
        expect(s != NULL && unknown != NULL && strcmp(s, unknown) != 0, "talon_status_string unknown for a listed status");
    }
}

static void check_version(void) {
    const talon_bundle_info *info = talon_bundle_info_get();
    char v[32];
    int i;
    snprintf(v, sizeof v, "%d.%d.%d", TALON_VERSION_MAJOR, TALON_VERSION_MINOR, TALON_VERSION_PATCH);
    expect(talon_version() ==
               TALON_VERSION_MAJOR * 10000 + TALON_VERSION_MINOR * 100 + TALON_VERSION_PATCH,
           "talon_version() disagrees with TALON_VERSION_* (header and archive differ?)");
    expect(strcmp(v, TALON_VERSION_STRING) == 0, "TALON_VERSION_STRING disagrees with TALON_VERSION_*");
    expect(info != NULL, "talon_bundle_info_get() is NULL");
    if (!info) return;
    expect(strcmp(info->version, TALON_VERSION_STRING) == 0, "bundle version disagrees with the header");
    expect(info->num_images > 0 && info->num_kernels > 0 && info->kernel_names != NULL,
           "empty bundle");
    for (i = 0; info->kernel_names && i < info->num_kernels; i++)
        expect(info->kernel_names[i] != NULL && info->kernel_names[i][0] != '\0', "empty kernel name");
    printf("talon %s (commit %s, nvcc %s, %s): %d images, %d kernels\n", info->version,
           info->git_commit, info->nvcc_version, info->arch, info->num_images, info->num_kernels);
}

/* Without a GPU or driver creation fails cleanly; with one, the ctx is torn down again. */
static void check_ctx(void) {
    talon_ctx *ctx = NULL;
    talon_ctx_options opt;
    talon_status s;
    memset(&opt, 0, sizeof opt);
    opt.context = NULL;
    opt.flags = 0u;
    expect(talon_ctx_create(NULL, &opt) == TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_create(NULL out)");
    opt.flags = 0x80u;
    expect(talon_ctx_create(&ctx, &opt) == TALON_ERROR_INVALID_ARGUMENT && ctx == NULL,
           "talon_ctx_create(unknown flags)");
    opt.flags = (unsigned)TALON_CTX_PRELOAD;
    s = talon_ctx_create(&ctx, &opt);
    if (s == TALON_SUCCESS) {
        expect(ctx != NULL && talon_ctx_preload(ctx) == TALON_SUCCESS, "talon_ctx_preload");
    } else {
        expect(ctx == NULL, "talon_ctx_create failed but set *out");
        expect(talon_last_error()[0] != '\0', "talon_ctx_create failed without a message");
    }
    talon_ctx_destroy(ctx);
    talon_ctx_destroy(NULL);
    expect(talon_ctx_preload(NULL) == TALON_ERROR_INVALID_ARGUMENT, "talon_ctx_preload(NULL)");
    {
        talon_check_report report;
        memset(&report, 0xff, sizeof report);
        expect(talon_ctx_check(NULL, NULL, &report) == TALON_ERROR_INVALID_ARGUMENT &&
                   report.violated == 0 && report.op == NULL,
               "talon_ctx_check(NULL ctx)");
    }
    opt.flags = (unsigned)TALON_CTX_CHECKED;
    ctx = NULL;
    s = talon_ctx_create(&ctx, &opt);
    if (s == TALON_SUCCESS) {
        talon_check_report report;
        expect(talon_ctx_check(ctx, NULL, &report) == TALON_SUCCESS && report.violated == 0,
               "talon_ctx_check(checked ctx)");
    } else {
        expect(ctx == NULL && talon_last_error()[0] != '\0', "talon_ctx_create(TALON_CTX_CHECKED)");
    }
    talon_ctx_destroy(ctx);
}

int main(void) {
    check_version();
    check_statuses();
    check_ops();
    check_helpers();
    check_ctx();
    return failures ? 1 : 0;
}
