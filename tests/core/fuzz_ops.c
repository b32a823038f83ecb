/* Coverage-guided fuzzing of every op's argument struct through the fake driver (no GPU):
   `make fuzz` (libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer). An input is
   an op number and the bytes of its args struct (any values: pointers, sizes, strides, enums,
   floats). Each call must either be rejected before anything reaches the driver (no launch,
   no memset, a message starting with the op's name) or launch; the workspace-size functions
   of the ops that have one must either fail with a message or give a size >= 0. Anything
   else aborts (a finding), as does any sanitizer report. */
#include "fake_driver.h"

#define STREAM ((CUstream)(uintptr_t)0x5157)

typedef union fuzz_args {
    talon_rmsnorm_args rmsnorm;
    talon_fused_add_rmsnorm_args fused_add_rmsnorm;
    talon_layernorm_args layernorm;
    talon_silu_and_mul_args silu;
    talon_gelu_and_mul_args gelu;
    talon_moe_router_topk_args router;
    talon_topk_args topk;
    talon_moe_align_block_size_args align;
    talon_moe_sum_args moe_sum;
    talon_rope_args rope;
    talon_kv_append_args kv_append;
    talon_gather_rows_args gather;
    talon_decode_attention_args decode;
    talon_merge_attention_states_args merge;
    talon_prefill_attention_args prefill;
    talon_prefill_attention_paged_args prefill_paged;
    talon_gemm_args gemm;
    talon_quant_fp8_args quant;
    talon_rmsnorm_quant_fp8_args rmsnorm_quant;
    talon_moe_gemm_args moe_gemm;
} fuzz_args;

/* X(name, union member): every op of talon.h. */
#define FUZZ_OPS(X)                                                                            \
    X(rmsnorm, rmsnorm) X(fused_add_rmsnorm, fused_add_rmsnorm) X(layernorm, layernorm)        \
    X(silu_and_mul, silu) X(gelu_and_mul, gelu) X(moe_router_topk, router) X(topk, topk)       \
    X(moe_align_block_size, align) X(moe_sum, moe_sum) X(rope, rope) X(kv_append, kv_append)   \
    X(gather_rows, gather) X(decode_attention, decode) X(merge_attention_states, merge)        \
    X(prefill_attention, prefill) X(prefill_attention_paged, prefill_paged) X(gemm, gemm)      \
    X(quant_fp8, quant) X(rmsnorm_quant_fp8, rmsnorm_quant) X(moe_gemm, moe_gemm)

enum {
#define FUZZ_ENUM(name, member) OP_##name,
    FUZZ_OPS(FUZZ_ENUM)
#undef FUZZ_ENUM
    NUM_OPS
};

static const char *const op_names[] = {
#define FUZZ_NAME(name, member) "talon_" #name,
    FUZZ_OPS(FUZZ_NAME)
#undef FUZZ_NAME
};

static const size_t op_sizes[] = {
#define FUZZ_SIZE(name, member) sizeof(((fuzz_args *)0)->member),
    FUZZ_OPS(FUZZ_SIZE)
#undef FUZZ_SIZE
};

static talon_ctx *ctx;

static talon_status call(int op, const fuzz_args *a) {
    switch (op) {
#define FUZZ_CALL(name, member) case OP_##name: return talon_##name(ctx, STREAM, &a->member);
        FUZZ_OPS(FUZZ_CALL)
#undef FUZZ_CALL
    }
    return TALON__STATUS_COUNT;
}

/* The ops with a workspace: its size function, on the same args (-2 when there is none). */
static talon_status workspace_size(int op, const fuzz_args *a, int64_t *bytes) {
    *bytes = -2;
    switch (op) {
    case OP_topk: return talon_topk_workspace_size(ctx, &a->topk, bytes);
    case OP_decode_attention: return talon_decode_attention_workspace_size(ctx, &a->decode, bytes);
    case OP_prefill_attention:
        return talon_prefill_attention_workspace_size(ctx, &a->prefill, bytes);
    case OP_prefill_attention_paged:
        return talon_prefill_attention_paged_workspace_size(ctx, &a->prefill_paged, bytes);
    }
    return TALON_SUCCESS;
}

static void check(int cond, const char *what, int op) {
    if (cond) return;
    fprintf(stderr, "fuzz_ops: %s: %s (last error: \"%s\")\n", op_names[op], what,
            talon_last_error());
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fake_reset();
    fake.quick_loads = 1;
    talon__driver_fake = &fake_driver;
    if (talon_ctx_create(&ctx, NULL) != TALON_SUCCESS || talon_ctx_preload(ctx) != TALON_SUCCESS)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    fuzz_args a;
    int op, launches, memsets;
    talon_status s;
    int64_t bytes;
    if (n < 1) return 0;
    op = data[0] % NUM_OPS;
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
