/* Coverage-guided fuzzing of every op's argument struct through the fake driver (no GPU):
   `make fuzz` (libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer). An input is
   an op number and the bytes of its args struct (any values: pointers, sizes, strides, enums,
   floats). Each call must either be rejected before anything reaches the driver (no launch,
   no memset, a message starting with the op's name) or launch; the workspace-size functions
   of the ops that have one must either fail with a message or give a size >= 0. Anything
   else aborts (a finding), as does any sanitizer report. One more input kind fuzzes the
   functions around the ops (fuzz_api: status strings, moe_align capacities, context options,
   the bundle description). The search starts from a valid call
   of each op (op_valid_args in op_calls.h; FUZZ_SEEDS=dir writes them, as `make fuzz` does). */
#include "fake_driver.h"

#include "op_calls.h"

#define API NUM_OPS /* the input kind of the functions around the ops (fuzz_api) */

static talon_ctx *ctx;

static talon_status call(int op, const op_args *a) { return op_call(ctx, STREAM, op, a); }

/* The ops with a workspace (WORKSPACE_OPS, op_calls.h): its size function, on the same args
   (-2 when there is none). */
static talon_status workspace_size(int op, const op_args *a, int64_t *bytes) {
    *bytes = -2;
    switch (op) {
#define WORKSPACE_SIZE(name, member)                                                           \
    case OP_##name: return talon_##name##_workspace_size(ctx, &a->member, bytes);
        WORKSPACE_OPS(WORKSPACE_SIZE)
#undef WORKSPACE_SIZE
    }
    return TALON_SUCCESS;
}

static void check(int cond, const char *what, int op) {
    if (cond) return;
    fprintf(stderr, "fuzz_ops: %s: %s (last error: \"%s\")\n", op_names[op], what,
            talon_last_error());
    abort();
}

/* FUZZ_SEEDS=dir: writes one seed per op (its number, then its valid args) into dir, after
   checking that each is accepted, and exits. */
static void write_seeds(const char *dir) {
    int op;
    for (op = 0; op < NUM_OPS; op++) {
        op_args a;
        char path[4096];
        unsigned char byte = (unsigned char)op;
        FILE *f;
        op_valid_args(op, &a);
        check(call(op, &a) == TALON_SUCCESS, "its seed is rejected", op);
        snprintf(path, sizeof path, "%s/seed_%s", dir, op_names[op]);
        if (!(f = fopen(path, "wb")) || fwrite(&byte, 1, 1, f) != 1 ||
            fwrite(&a, op_sizes[op], 1, f) != 1 || fclose(f)) {
            fprintf(stderr, "fuzz_ops: cannot write %s\n", path);
            exit(1);
        }
    }
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fake_reset();
    fake.quick_loads = 1;
    talon__driver_fake = &fake_driver;
    if (talon_ctx_create(&ctx, NULL) != TALON_SUCCESS || talon_ctx_preload(ctx) != TALON_SUCCESS)
        abort();
    if (getenv("FUZZ_SEEDS")) write_seeds(getenv("FUZZ_SEEDS"));
    return 0;
}

/* The functions around the ops, on the input's bytes: talon_status_string of any value,
   talon_moe_align_block_size_capacity of any shape (a message or capacities that hold the
   worst case), talon_ctx_create with any options (success, then talon_ctx_check and destroy
   and nothing left loaded, or a message) and the bundle's description. */
static void fuzz_api(const uint8_t *data, size_t n) {
    struct { int32_t status; int64_t tokens, k, experts, block; uint32_t flags; uint64_t cu; } in;
    talon_ctx_options o;
    talon_ctx *c = NULL;
    int64_t sorted = -1, blocks = -1;
    const talon_bundle_info *bi = talon_bundle_info_get();
    memset(&in, 0, sizeof in);
    memcpy(&in, data, n < sizeof in ? n : sizeof in);
    if (!talon_status_string((talon_status)in.status)) abort();
    talon__error_buf[0] = '\0';
    if (talon_moe_align_block_size_capacity(in.tokens, in.k, in.experts, in.block, &sorted,
                                            &blocks) == TALON_SUCCESS) {
        if (sorted < in.tokens * in.k || blocks < 1 || blocks * in.block < sorted) abort();
    } else if (!talon_last_error()[0]) {
        abort();
    }
    memset(&o, 0, sizeof o);
    o.flags = in.flags & ~(uint32_t)TALON_CTX_PRELOAD; /* a preload per input would fill the
                                                           fake driver's module table */
    o.context = (CUcontext)(uintptr_t)in.cu;
    talon__error_buf[0] = '\0';
    if (talon_ctx_create(&c, &o) == TALON_SUCCESS) {
        talon_check_report report;
        if (!c) abort();
        /* a checked ctx reads back a clean record; any other refuses, with a message */
        if (talon_ctx_check(c, (CUstream)(uintptr_t)in.cu, &report) !=
                (o.flags & TALON_CTX_CHECKED ? TALON_SUCCESS : TALON_ERROR_INVALID_ARGUMENT) ||
            report.violated)
            abort();
        talon_ctx_destroy(c);
    } else if (c || strncmp(talon_last_error(), "talon_ctx_create", 16)) {
        abort();
    }
    if (!bi || !bi->version || bi->num_kernels < 1 || !bi->kernel_names[bi->num_kernels - 1])
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    op_args a;
    int op, launches, memsets;
    talon_status s;
    int64_t bytes;
    if (n < 1) return 0;
    op = data[0] % (NUM_OPS + 1);
    if (op == API) {
        fuzz_api(data + 1, n - 1);
        return 0;
    }
    memset(&a, 0, sizeof a);
    memcpy(&a, data + 1, n - 1 < op_sizes[op] ? n - 1 : op_sizes[op]);
    launches = fake.launches;
    memsets = fake.memsets;
    talon__error_buf[0] = '\0';
    s = call(op, &a);
    check(s >= TALON_SUCCESS && s < TALON__STATUS_COUNT, "status out of range", op);
    if (s != TALON_SUCCESS) {
        check(fake.launches == launches && fake.memsets == memsets, "launched, then failed", op);
        check(!strncmp(talon_last_error(), op_names[op], strlen(op_names[op])),
              "the message does not start with the op's name", op);
    } else {
        check(fake.launches > launches, "succeeded without a launch", op);
    }
    talon__error_buf[0] = '\0';
    s = workspace_size(op, &a, &bytes);
    check(s == TALON_SUCCESS ? bytes >= 0 || bytes == -2 : talon_last_error()[0] != '\0',
          "workspace size: a negative size, or a failure without a message", op);
    return 0;
}
