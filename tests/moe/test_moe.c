/* Dispatcher tests on a fake CUDA driver (no GPU) for talon_moe_align_block_size and
   talon_moe_sum: one validation test per rule, the exact launch each makes, the capacity
   helper, and the CPU references on hand-computed cases. */
#include "fake_driver.h"
#include "table_rows.h"
#include "ref_moe.h"

#include <math.h>

#define STREAM ((CUstream)(uintptr_t)0x5157)
enum { P_SORTED = 0x100000, P_EIDS = 0x200000, P_NPOST = 0x300000, P_IDS = 0x400000,
       P_OUT = 0x500000, P_IN = 0x600000, P_W = 0x700000 };

typedef enum { OP_ALIGN, OP_SUM } op_id;
static const char *const op_names[] = {"talon_moe_align_block_size", "talon_moe_sum"};

typedef union op_args {
    talon_moe_align_block_size_args align;
    talon_moe_sum_args sum;
} op_args;

/* E=256, k=8, block 64: the worst case for tokens = 16 is 128 + 128 * 63 = 8192 slots in
   128 blocks. */
static void valid_args(op_id op, op_args *a) {
    memset(a, 0, sizeof *a);
    if (op == OP_ALIGN) {
        a->align.sorted_token_ids = P_SORTED; a->align.expert_ids = P_EIDS;
        a->align.num_tokens_post_padded = P_NPOST; a->align.topk_ids = P_IDS;
        a->align.tokens = 16; a->align.k = 8; a->align.experts = 256; a->align.block_size = 64;
        a->align.sorted_capacity = 8192; a->align.expert_ids_capacity = 128;
    } else {
        a->sum.out = P_OUT; a->sum.in = P_IN; a->sum.weights = P_W;
        a->sum.tokens = 4; a->sum.k = 8; a->sum.hidden = 4096;
    }
}

static talon_status call_op(op_id op, talon_ctx *ctx, const op_args *a) {
    if (op == OP_ALIGN) return talon_moe_align_block_size(ctx, STREAM, a ? &a->align : NULL);
    return talon_moe_sum(ctx, STREAM, a ? &a->sum : NULL);
}

#define AL(f, k, v) SET(talon_moe_align_block_size_args, f, k, v)
#define SUM(f, k, v) SET(talon_moe_sum_args, f, k, v)

/* ================================================================ validation, one per rule */

#define BAD(NAME, OP, SETS, FIELD, VALUE)                                                      \
    {.name = NAME, .op = OP, .kind = BAD_FIELDS, .set = SETS, .field = FIELD, .value = VALUE}
#define A "talon_moe_align_block_size"
#define S "talon_moe_sum"
#define NULL_BAD(OP, M, N, F) BAD(N " rejects " #F " NULL", OP, ONE(M(F, PTR, 0)), "args->" #F, "NULL")
#define MIS_BAD(OP, M, N, F, V) BAD(N " rejects misaligned " #F, OP, ONE(M(F, PTR, V)), "args->" #F, #V)
static const bad_row bad_rows[] = {
    {.name = A " rejects ctx NULL", .op = OP_ALIGN, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = A " rejects args NULL", .op = OP_ALIGN, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    NULL_BAD(OP_ALIGN, AL, A, sorted_token_ids),
    NULL_BAD(OP_ALIGN, AL, A, expert_ids),
    NULL_BAD(OP_ALIGN, AL, A, num_tokens_post_padded),
    NULL_BAD(OP_ALIGN, AL, A, topk_ids),
    MIS_BAD(OP_ALIGN, AL, A, sorted_token_ids, 0x100002),
    MIS_BAD(OP_ALIGN, AL, A, expert_ids, 0x200001),
    MIS_BAD(OP_ALIGN, AL, A, num_tokens_post_padded, 0x300003),
    MIS_BAD(OP_ALIGN, AL, A, topk_ids, 0x400002),
    BAD(A " rejects tokens = 0", OP_ALIGN, ONE(AL(tokens, I64, 0)), "args->tokens", "0"),
    BAD(A " rejects tokens = 65537", OP_ALIGN, ONE(AL(tokens, I64, 65537)), "args->tokens", "65537"),
    BAD(A " rejects k = 0", OP_ALIGN, ONE(AL(k, I64, 0)), "args->k", "0"),
    BAD(A " rejects k = 65", OP_ALIGN, ONE(AL(k, I64, 65)), "args->k", "65"),
    BAD(A " rejects experts = 0", OP_ALIGN, ONE(AL(experts, I64, 0)), "args->experts", "0"),
    BAD(A " rejects experts = 513", OP_ALIGN, ONE(AL(experts, I64, 513)), "args->experts", "513"),
    BAD(A " rejects block_size = 0", OP_ALIGN, ONE(AL(block_size, I64, 0)), "args->block_size", "0"),
    BAD(A " rejects block_size = 48 (not a power of two)", OP_ALIGN, ONE(AL(block_size, I64, 48)),
        "args->block_size", "48"),
    BAD(A " rejects block_size = 2048", OP_ALIGN, ONE(AL(block_size, I64, 2048)),
        "args->block_size", "2048"),
    BAD(A " rejects sorted_capacity one below the worst case", OP_ALIGN,
        ONE(AL(sorted_capacity, I64, 8191)), "args->sorted_capacity", "8191"),
    BAD(A " rejects expert_ids_capacity one below the worst case", OP_ALIGN,
        ONE(AL(expert_ids_capacity, I64, 127)), "args->expert_ids_capacity", "127"),
    /* found by fuzzing (tests/core/fuzz_ops.c): the plan's slices overflowed */
    BAD(A " rejects sorted_capacity 2^31", OP_ALIGN, ONE(AL(sorted_capacity, I64, 2147483648)),
        "args->sorted_capacity", "2147483648"),
    BAD(A " rejects expert_ids_capacity INT64_MAX", OP_ALIGN,
        ONE(AL(expert_ids_capacity, I64, INT64_MAX)), "args->expert_ids_capacity",
        "9223372036854775807"),

    {.name = S " rejects ctx NULL", .op = OP_SUM, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = S " rejects args NULL", .op = OP_SUM, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    NULL_BAD(OP_SUM, SUM, S, out),
    NULL_BAD(OP_SUM, SUM, S, in),
    MIS_BAD(OP_SUM, SUM, S, out, 0x500001),
    MIS_BAD(OP_SUM, SUM, S, in, 0x600001),
    MIS_BAD(OP_SUM, SUM, S, weights, 0x700002),
    BAD(S " rejects tokens = 0", OP_SUM, ONE(SUM(tokens, I64, 0)), "args->tokens", "0"),
    BAD(S " rejects k = 0", OP_SUM, ONE(SUM(k, I64, 0)), "args->k", "0"),
    BAD(S " rejects k = 65", OP_SUM, ONE(SUM(k, I64, 65)), "args->k", "65"),
    BAD(S " rejects hidden = 0", OP_SUM, ONE(SUM(hidden, I64, 0)), "args->hidden", "0"),
    BAD(S " rejects dtype F32", OP_SUM, ONE(SUM(dtype, ENUM, TALON_DTYPE_F32)), "args->dtype", "2"),
    BAD(S " rejects dtype I32", OP_SUM, ONE(SUM(dtype, ENUM, TALON_DTYPE_I32)), "args->dtype", "3"),
    BAD(S " rejects a grid over 2^31-1 blocks", OP_SUM,
        ONE(SUM(tokens, I64, 2147483647), SUM(hidden, I64, 4096)), "args->tokens", "2147483647"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    const char *op = op_names[row->op];
    op_args a;
    valid_args(row->op, &a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(call_op(row->op, row->kind == BAD_CTX ? NULL : g_ctx,
                            row->kind == BAD_ARGS ? NULL : &a),
                    op, row->field, row->value);
}

/* ================================================================ launches */
static void expect_launch(const char *symbol, unsigned grid, const void *params, size_t size) {
    int k = kernel_index(symbol);
    assert_true(k >= 0);
    assert_int_equal(fake.launches, 1);
    if (fake.last.fn != fake_handle_for(symbol))
        fail_msg("launched %s, expected %s",
                 talon__kernels[fake.fns[FN_INDEX(fake.last.fn)].kernel].symbol, symbol);
    assert_int_equal(fake.last.grid[0], grid);
    assert_int_equal(fake.last.grid[1], 1);
    assert_int_equal(fake.last.grid[2], 1);
    assert_int_equal(fake.last.block[0], talon__kernels[k].block);
    assert_int_equal(fake.last.block[1], 1);
    assert_int_equal(fake.last.smem, (unsigned)talon__kernels[k].smem);
    assert_ptr_equal(fake.last.stream, STREAM);
    assert_int_equal(fake.last.param_size, (int)size);
    assert_memory_equal(fake.last.params, params, size);
}

/* Small problems: 16 warps, chunk = ceil(numel / 512) * 32 ids per warp; a block per 2048
   slots of sorted_capacity, at most 64 blocks: one block is the small kernel (no slices), more
   the sliced one, each block taking ceil(capacity / grid) slots (rounded up to 4) of sorted
   and ceil(128 / grid) of expert_ids. */
static void test_align_launch_small(void **state) {
    static const struct {
        int64_t tokens, k, sorted_capacity;
        unsigned grid;
        int64_t sorted_slice, expert_ids_slice;
    } rows[] = {
        {16, 8, 8192, 4, 2048, 32},
        {16, 8, 8193, 5, 1640, 26},
        {1, 1, 64, 1, 0, 0},
        {1, 1, 2048, 1, 0, 0},
        {1, 1, 2049, 2, 1028, 64},
        {16, 8, 64 * 2048, 64, 2048, 2},
        {16, 8, 64 * 2048 + 1, 64, 2052, 2},
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        talon__moe_align_params want;
        op_args a;
        fake.launches = 0;
        valid_args(OP_ALIGN, &a);
        a.align.tokens = rows[i].tokens;
        a.align.k = rows[i].k;
        a.align.sorted_capacity = rows[i].sorted_capacity;
        assert_int_equal(call_op(OP_ALIGN, g_ctx, &a), TALON_SUCCESS);
        memset(&want, 0, sizeof want);
        want.sorted = P_SORTED; want.expert_ids = P_EIDS; want.num_post = P_NPOST;
        want.topk_ids = P_IDS; want.sorted_capacity = rows[i].sorted_capacity;
        want.expert_ids_capacity = 128; want.numel = (int)(rows[i].tokens * rows[i].k);
        want.experts = 256; want.block_size = 64; want.chunk = 32;
        want.sorted_slice = rows[i].sorted_slice;
        want.expert_ids_slice = rows[i].expert_ids_slice;
        expect_launch(rows[i].grid == 1 ? "talon_moe_align_block_size_i32_small"
                                        : "talon_moe_align_block_size_i32_sliced",
                      rows[i].grid, &want, sizeof want);
    }
    assert_int_equal(talon__kernels[kernel_index("talon_moe_align_block_size_i32_small")].block,
                     512);
    assert_int_equal(talon__kernels[kernel_index("talon_moe_align_block_size_i32_sliced")].block,
                     512);
    assert_int_equal(talon__kernels[kernel_index("talon_moe_align_block_size_i32_c8")].block, 512);
    assert_int_equal(talon__kernels[kernel_index("talon_moe_align_block_size_i32_c8w")].block, 512);
    assert_int_equal(talon__kernels[kernel_index("talon_moe_align_block_size_i32_x8")].block, 1024);
}

/* 2048 ids still take the small kernel (4 steps of 32 per warp), 2049 the c8 cluster (8 * 16
   warps: chunk rounds ceil(2049 / 4096) = 1 step of 32 up); 32768 ids still c8 (8 steps), 32776
   the c8w cluster (ceil(32776 / 4096) = 9 steps), 131072 still c8w (32 steps), 131080 the x8
   cluster (8 * 32 warps, ceil(131080 / 8192) = 17 steps); 65536 x 64 ids: 4194304 / 256 warps
   = 16384 each. */
static void test_align_launch_cluster(void **state) {
    static const struct { int64_t tokens, k; const char *symbol; unsigned grid; int chunk; } rows[] = {
        {256, 8, "talon_moe_align_block_size_i32_sliced", 9, 128}, /* ceil(18181 / 2048) */
        {2049, 1, "talon_moe_align_block_size_i32_c8", 8, 32},
        {512, 8, "talon_moe_align_block_size_i32_c8", 8, 32},
        {4096, 8, "talon_moe_align_block_size_i32_c8", 8, 256},
        {4097, 8, "talon_moe_align_block_size_i32_c8w", 8, 288},
        {16384, 8, "talon_moe_align_block_size_i32_c8w", 8, 1024},
        {16385, 8, "talon_moe_align_block_size_i32_x8", 8, 544},
        {65536, 64, "talon_moe_align_block_size_i32_x8", 8, 16384},
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        talon__moe_align_params want;
        op_args a;
        int64_t sc = 0, ec = 0;
        fake.launches = 0;
        valid_args(OP_ALIGN, &a);
        a.align.tokens = rows[i].tokens;
        a.align.k = rows[i].k;
        assert_int_equal(talon_moe_align_block_size_capacity(rows[i].tokens, rows[i].k, 256, 64,
                                                             &sc, &ec), TALON_SUCCESS);
        a.align.sorted_capacity = sc + 5; /* more than needed is fine, and passed through */
        a.align.expert_ids_capacity = ec;
        assert_int_equal(call_op(OP_ALIGN, g_ctx, &a), TALON_SUCCESS);
        memset(&want, 0, sizeof want);
        want.sorted = P_SORTED; want.expert_ids = P_EIDS; want.num_post = P_NPOST;
        want.topk_ids = P_IDS; want.sorted_capacity = sc + 5; want.expert_ids_capacity = ec;
        want.numel = (int)(rows[i].tokens * rows[i].k); want.experts = 256;
        want.block_size = 64; want.chunk = rows[i].chunk;
        /* clusters take no slices; the sliced row: ceil(18181 / 9) = 2021 -> 2024 slots,
           ceil(284 / 9) = 32 blocks */
        want.sorted_slice = rows[i].grid == 8 ? 0 : 2024;
        want.expert_ids_slice = rows[i].grid == 8 ? 0 : 32;
        expect_launch(rows[i].symbol, rows[i].grid, &want, sizeof want);
    }
}

/* The 16-byte path needs out and in 16-byte aligned and hidden % 8 == 0; weights 0 passes.
   There a thread takes 4 slices of 8 elements for k <= 2, 2 for k <= 4, else 1: chunks =
   ceil(hidden / (2048 * slices)); the element-wise path always 1 (ceil(hidden / 256)). */
static void test_sum_launch(void **state) {
    static const struct {
        talon_dtype dtype; CUdeviceptr in, w; int64_t tokens, k, hidden;
        const char *symbol; int chunks;
    } rows[] = {
        {TALON_DTYPE_BF16, P_IN, P_W, 4, 8, 4096, "talon_moe_sum_bf16_v8", 2},
        {TALON_DTYPE_F16, P_IN, 0, 3, 8, 4097, "talon_moe_sum_f16", 17},
        {TALON_DTYPE_BF16, P_IN + 2, P_W + 4, 5, 8, 4096, "talon_moe_sum_bf16", 16},
        {TALON_DTYPE_F16, P_IN, P_W, 7, 8, 2056, "talon_moe_sum_f16_v8", 2},
        {TALON_DTYPE_BF16, P_IN, P_W, 4, 5, 4096, "talon_moe_sum_bf16_v8", 2},
        {TALON_DTYPE_F16, P_IN, P_W, 2, 4, 4096, "talon_moe_sum_f16_v8_r2", 1},
        {TALON_DTYPE_BF16, P_IN, 0, 3, 3, 16384, "talon_moe_sum_bf16_v8_r2", 4},
        {TALON_DTYPE_BF16, P_IN, P_W, 5, 2, 7168, "talon_moe_sum_bf16_v8_r4", 1},
        {TALON_DTYPE_F16, P_IN, P_W, 1, 1, 16392, "talon_moe_sum_f16_v8_r4", 3},
        {TALON_DTYPE_F16, P_IN + 2, P_W, 3, 2, 4096, "talon_moe_sum_f16", 16},
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        talon__moe_sum_params want;
        op_args a;
        fake.launches = 0;
        valid_args(OP_SUM, &a);
        a.sum.dtype = rows[i].dtype; a.sum.in = rows[i].in; a.sum.weights = rows[i].w;
        a.sum.tokens = rows[i].tokens; a.sum.k = rows[i].k; a.sum.hidden = rows[i].hidden;
        assert_int_equal(call_op(OP_SUM, g_ctx, &a), TALON_SUCCESS);
        memset(&want, 0, sizeof want);
        want.out = P_OUT; want.in = rows[i].in; want.weights = rows[i].w;
        want.hidden = rows[i].hidden; want.k = (int)rows[i].k; want.chunks = rows[i].chunks;
        expect_launch(rows[i].symbol, (unsigned)(rows[i].tokens * rows[i].chunks), &want,
                      sizeof want);
    }
}

/* ================================================================ capacity helper */
static void test_capacity(void **state) {
    int64_t sc = -1, ec = -1;
    (void)state;
    /* 128 ids, min(256, 128) = 128 groups of up to 63 padding slots */
    assert_int_equal(talon_moe_align_block_size_capacity(16, 8, 256, 64, &sc, &ec), TALON_SUCCESS);
    assert_int_equal(sc, 8192);
    assert_int_equal(ec, 128);
    /* 32768 ids, 256 experts: 32768 + 256 * 63 = 48896 slots, ceil(48896 / 64) = 764 blocks */
    assert_int_equal(talon_moe_align_block_size_capacity(4096, 8, 256, 64, &sc, NULL), TALON_SUCCESS);
    assert_int_equal(sc, 48896);
    assert_int_equal(talon_moe_align_block_size_capacity(4096, 8, 256, 64, NULL, &ec), TALON_SUCCESS);
    assert_int_equal(ec, 764);
    /* block 1: no padding at all; 7 ids over 512 experts, block 256: 7 + 7 * 255 */
    assert_int_equal(talon_moe_align_block_size_capacity(7, 1, 64, 1, &sc, &ec), TALON_SUCCESS);
    assert_int_equal(sc, 7);
    assert_int_equal(ec, 7);
    assert_int_equal(talon_moe_align_block_size_capacity(7, 1, 512, 256, &sc, &ec), TALON_SUCCESS);
    assert_int_equal(sc, 1792);
    assert_int_equal(ec, 7);
    /* errors name the parameter without args-> */
    assert_int_equal(talon_moe_align_block_size_capacity(0, 8, 256, 64, &sc, &ec),
                     TALON_ERROR_INVALID_ARGUMENT);
    assert_contains(talon_last_error(), "talon_moe_align_block_size_capacity: tokens = 0");
    assert_int_equal(talon_moe_align_block_size_capacity(16, 8, 256, 3, &sc, &ec),
                     TALON_ERROR_INVALID_ARGUMENT);
    assert_contains(talon_last_error(), "block_size = 3");
}

/* ================================================================ references */
/* tokens 3, k 2, 4 experts: ids 2 0 | 2 -1 | 5 0 -> expert 0 has flats {1, 5}, expert 2 {0, 2};
   -1 and 5 are skipped. */
static const int32_t hand_ids[6] = {2, 0, 2, -1, 5, 0};

static void test_ref_align_block2(void **state) {
    static const int32_t want_sorted[10] = {1, 5, 0, 2, 6, 6, 6, 6, 6, 6};
    static const int32_t want_eids[5] = {0, 2, -1, -1, -1};
    int32_t sorted[10], eids[5], npost = -7;
    (void)state;
    assert_int_equal(ref_moe_align(hand_ids, 3, 2, 4, 2, sorted, 10, eids, 5, &npost), 0);
    assert_int_equal(npost, 4);
    assert_memory_equal(sorted, want_sorted, sizeof sorted);
    assert_memory_equal(eids, want_eids, sizeof eids);
}

static void test_ref_align_block4(void **state) {
    static const int32_t want_sorted[18] = {1, 5, 6, 6, 0, 2, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6};
    static const int32_t want_eids[5] = {0, 2, -1, -1, -1};
    int32_t sorted[18], eids[5], npost = -7;
    (void)state;
    assert_int_equal(ref_moe_align(hand_ids, 3, 2, 4, 4, sorted, 18, eids, 5, &npost), 0);
    assert_int_equal(npost, 8);
    assert_memory_equal(sorted, want_sorted, sizeof sorted);
    assert_memory_equal(eids, want_eids, sizeof eids);
}

/* No valid id: nothing placed, every slot the sentinel, every block -1. */
static void test_ref_align_none_valid(void **state) {
    static const int32_t ids[4] = {-1, 3, 7, -5};
    int32_t sorted[7], eids[4], npost = -7;
    int i;
    (void)state;
    assert_int_equal(ref_moe_align(ids, 2, 2, 3, 2, sorted, 7, eids, 4, &npost), 0);
    assert_int_equal(npost, 0);
    for (i = 0; i < 7; i++) assert_int_equal(sorted[i], 4);
    for (i = 0; i < 4; i++) assert_int_equal(eids[i], -1);
}

static void test_ref_sum(void **state) {
    static const double x[4] = {1, 2, 3, 4}, w[2] = {0.5, 2};
    double out[2], mag[2];
    (void)state;
    ref_moe_sum(x, w, out, mag, 1, 2, 2);
    assert_true(out[0] == 6.5 && out[1] == 9.0);
    assert_true(mag[0] == 6.5 && mag[1] == 9.0);
    ref_moe_sum(x, NULL, out, NULL, 1, 2, 2);
    assert_true(out[0] == 4.0 && out[1] == 6.0);
}

/* The plans as pure functions, at the edges of each kernel's range and of the slicing. */
static void test_plans(void **state) {
    static const struct { int64_t n, sorted, blocks; int ids, cluster, block, sliced; int64_t grid, slice; } rows[] = {
        {128, 2047, 32, 2048, 1, 512, 0, 1, 0},          /* fits one slice: one block */
        {128, 8192, 128, 2048, 1, 512, 1, 4, 2048},      /* 4 slices of 2048 */
        {2048, 200000, 3125, 2048, 1, 512, 1, 64, 3128}, /* capped at 64 slices */
        {2049, 600000, 9376, 32768, 8, 512, 0, 8, 0},    /* past one block: cluster of 8 */
        {32769, 600000, 9376, 131072, 8, 512, 0, 8, 0},  /* the wide register cluster */
        {131073, 600000, 9376, 0, 8, 1024, 0, 8, 0},     /* the looped cluster */
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const talon__moe_align_plan pl = talon__moe_align_plan_make(rows[i].n, rows[i].sorted, rows[i].blocks);
        assert_int_equal(pl.ids, rows[i].ids);
        assert_int_equal(pl.cluster, rows[i].cluster);
        assert_int_equal(pl.block, rows[i].block);
        assert_int_equal(pl.sliced, rows[i].sliced);
        assert_int_equal(pl.grid, rows[i].grid);
        assert_int_equal(pl.sorted_slice, rows[i].slice);
        assert_int_equal(pl.chunk % 32, 0);
        assert_true((int64_t)pl.chunk * pl.block / 32 * pl.cluster >= rows[i].n); /* ids covered */
    }
    assert_int_equal(talon__moe_sum_slices(8, 1), 4);
    assert_int_equal(talon__moe_sum_slices(8, 2), 4);
    assert_int_equal(talon__moe_sum_slices(8, 3), 2);
    assert_int_equal(talon__moe_sum_slices(8, 4), 2);
    assert_int_equal(talon__moe_sum_slices(8, 5), 1);
    assert_int_equal(talon__moe_sum_slices(1, 2), 1);
}

/* ================================================================ main */
#define ADD(fn) test_add(#fn, fn, NULL)

int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    ADD(test_align_launch_small);
    ADD(test_align_launch_cluster);
    ADD(test_sum_launch);
    ADD(test_capacity);
    ADD(test_plans);
    ADD(test_ref_align_block2);
    ADD(test_ref_align_block4);
    ADD(test_ref_align_none_valid);
    ADD(test_ref_sum);
    return test_run("test_moe");
}
