/* Every op of talon.h behind one union and one number, for the tests that drive all of them:
   through the fake driver tests/core/fuzz_ops.c (any bytes), test_faults.c (valid calls under
   driver faults) and test_checked.c; on the GPU tests/core/op_cases.h (random valid shapes)
   and test_gpu_checked.c. op_call(ctx, stream, op, args) calls op. Included after
   fake_driver.h, it also gives STREAM and op_valid_args, which fills a call each op accepts
   (fake addresses one GiB apart, so no two buffers overlap; workspaces of 1 GiB).

   What these tests know of an op is its family's: tests/<family>/cases_<family>.h (all of
   them: family_cases.h) holds, for each of its ops,
   - always: its X(name, op_args member) in <FAMILY>_TEST_OPS; its args struct's fields in
     <FAMILY>_BENCH_STRUCTS (bench/shim.c); X(name, the params struct that
     holds its talon__check, its GPU test) in <FAMILY>_CHECKED_OPS if its kernels check
     device indices; X(name, member) in <FAMILY>_WORKSPACE_OPS if it has a
     talon_<name>_workspace_size; after fake_driver.h, <name>_valid_args; in op_cases.h,
     the family's oc_case params (<FAMILY>_OC_PARAMS);
   - where OC_FAMILY_CASES is defined (op_cases.h): <name>_oc, its random shapes, build,
     arguments, check and description;
   - where CHECKED_FAMILY_CASES is defined (test_gpu_checked.c): its checked-mode GPU test and
     <name>_bench, its --bench cases.
   The lists below name each family once; everything per op is generated from them (in
   TEST_OPS order, the numbering, which the soak test's seeds rely on). */
#ifndef TALON_TESTS_OP_CALLS_H
#define TALON_TESTS_OP_CALLS_H

#ifdef TALON_TESTS_FAKE_DRIVER_H
#define STREAM ((CUstream)(uintptr_t)0x5157)
#define GB (CUdeviceptr)0x40000000ull /* one fake buffer per GiB: no overlaps */
#endif

#include "family_cases.h"

/* X(name, union member): every op of talon.h (test_op_list.c checks) */
#define TEST_OPS(X)                                                                            \
    NORM_TEST_OPS(X) ACT_TEST_OPS(X) ROUTER_TEST_OPS(X) TOPK_TEST_OPS(X) MOE_TEST_OPS(X)      \
    ROPE_TEST_OPS(X) KV_CACHE_TEST_OPS(X) GATHER_TEST_OPS(X) DECODE_TEST_OPS(X)               \
    PREFILL_TEST_OPS(X) GEMM_TEST_OPS(X) QUANT_TEST_OPS(X) MOE_GEMM_TEST_OPS(X)

/* X(name, params, GPU test): the ops whose kernels check device indices */
#define CHECKED_OPS(X)                                                                         \
    KV_CACHE_CHECKED_OPS(X) ROPE_CHECKED_OPS(X) GATHER_CHECKED_OPS(X) DECODE_CHECKED_OPS(X)   \
    PREFILL_CHECKED_OPS(X) MOE_GEMM_CHECKED_OPS(X)

/* X(name, union member): the ops with a talon_<name>_workspace_size */
#define WORKSPACE_OPS(X) TOPK_WORKSPACE_OPS(X) DECODE_WORKSPACE_OPS(X) PREFILL_WORKSPACE_OPS(X)

#if defined(__GNUC__)
#define OP_CALLS_UNUSED __attribute__((unused))
#else
#define OP_CALLS_UNUSED
#endif

typedef union op_args {
#define OP_MEMBER(name, member) talon_##name##_args member;
    TEST_OPS(OP_MEMBER)
#undef OP_MEMBER
} op_args;

enum {
#define OP_ENUM(name, member) OP_##name,
    TEST_OPS(OP_ENUM)
#undef OP_ENUM
    NUM_OPS
};

static const char *const op_names[] = {
#define OP_NAME(name, member) "talon_" #name,
    TEST_OPS(OP_NAME)
#undef OP_NAME
};

static const size_t op_sizes[] = {
#define OP_SIZE(name, member) sizeof(((op_args *)0)->member),
    TEST_OPS(OP_SIZE)
#undef OP_SIZE
};

OP_CALLS_UNUSED static talon_status op_call(talon_ctx *ctx, CUstream stream, int op,
                                            const op_args *a) {
    switch (op) {
#define OP_CALL(name, member) case OP_##name: return talon_##name(ctx, stream, &a->member);
        TEST_OPS(OP_CALL)
#undef OP_CALL
    }
    return TALON__STATUS_COUNT;
}

#ifdef TALON_TESTS_FAKE_DRIVER_H
OP_CALLS_UNUSED static void op_valid_args(int op, op_args *a) {
    memset(a, 0, sizeof *a);
    switch (op) {
#define OP_VALID(name, member) case OP_##name: name##_valid_args(&a->member); break;
        TEST_OPS(OP_VALID)
#undef OP_VALID
    }
}
#endif

#endif
