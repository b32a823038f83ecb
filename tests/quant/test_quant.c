/* Dispatcher tests on a fake CUDA driver (no GPU) for talon_quant_fp8: one validation error per
   rule (status, message naming the field and its value, nothing launched), the block size rule,
   and the launch of each variant (symbol, a block or a warp per row, the params and the default
   group scale layout); talon_rmsnorm_quant_fp8's own rules and kernel choice. */
#include "fake_driver.h"
#include "table_rows.h"

typedef enum { OP_QUANT } op_id; /* the one op: table_rows.h's op column */
static const char *const op_names[] = {"talon_quant_fp8"};

#define P_OUT 0x10000000ull
#define P_IN 0x20000000ull
#define P_SCALE 0x30000000ull
#define STREAM ((CUstream)(uintptr_t)0x5157)

/* Llama-3-8B activations of 4096 tokens, per-token scales. */
static void valid_args(talon_quant_fp8_args *a) {
    memset(a, 0, sizeof *a);
    a->out = P_OUT; a->in = P_IN; a->scale = P_SCALE;
    a->rows = 4096; a->cols = 4096; a->mode = TALON_QUANT_TOKEN;
}

#define Q(f, k, v) SET(talon_quant_fp8_args, f, k, v)
#define BAD(NAME, SETS, FIELD, VALUE)                                                          \
    {.name = "quant: " NAME, .op = OP_QUANT, .kind = BAD_FIELDS, .set = SETS, .field = FIELD,   \
     .value = VALUE}

static const bad_row bad_rows[] = {
    {.name = "quant: ctx NULL", .op = OP_QUANT, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = "quant: args NULL", .op = OP_QUANT, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    BAD("dtype F32", ONE(Q(dtype, ENUM, TALON_DTYPE_F32)), "args->dtype", "2"),
    BAD("dtype FP8", ONE(Q(dtype, ENUM, TALON_DTYPE_FP8_E4M3)), "args->dtype", "4"),
    BAD("mode 3", ONE(Q(mode, ENUM, 3)), "args->mode", "3"),
    BAD("mode -1", ONE(Q(mode, ENUM, -1)), "args->mode", "-1"),
    BAD("rows 0", ONE(Q(rows, I64, 0)), "args->rows", "0"),
    BAD("rows 2^31", ONE(Q(rows, I64, 2147483648.0)), "args->rows", "2147483648"),
    BAD("cols 8 (below 16)", ONE(Q(cols, I64, 8)), "args->cols", "8"),
    BAD("cols 2^24 + 16", ONE(Q(cols, I64, 16777232)), "args->cols", "16777232"),
    BAD("cols 4104 (not a multiple of 16)", ONE(Q(cols, I64, 4104)), "args->cols", "4104"),
    BAD("group: cols 4112 (not a multiple of 128)",
        ONE(Q(mode, ENUM, TALON_QUANT_GROUP), Q(cols, I64, 4112)), "args->cols", "4112"),
    BAD("out NULL", ONE(Q(out, PTR, 0)), "args->out", "NULL"),
    BAD("out 8-byte aligned", ONE(Q(out, PTR, P_OUT + 8)), "args->out", "0x10000008"),
    BAD("in NULL", ONE(Q(in, PTR, 0)), "args->in", "NULL"),
    BAD("in 2-byte aligned", ONE(Q(in, PTR, P_IN + 2)), "args->in", "0x20000002"),
    BAD("scale NULL", ONE(Q(scale, PTR, 0)), "args->scale", "NULL"),
    BAD("scale 2-byte aligned", ONE(Q(scale, PTR, P_SCALE + 2)), "args->scale", "0x30000002"),
    BAD("out_stride 4080 (shorter than a row)", ONE(Q(out_stride, I64, 4080)), "args->out_stride",
        "4080"),
    BAD("out_stride 4104 (not a multiple of 16)", ONE(Q(out_stride, I64, 4104)),
        "args->out_stride", "4104"),
    BAD("in_stride 4100 (not a multiple of 8)", ONE(Q(in_stride, I64, 4100)), "args->in_stride",
        "4100"),
    BAD("group: scale strides 2 x 1 (neither layout)", ONE(Q(mode, ENUM, TALON_QUANT_GROUP),
        Q(scale_row_stride, I64, 2), Q(scale_group_stride, I64, 1)), "args->scale_row_stride",
        "2"),
    BAD("group: group-major stride below rows", ONE(Q(mode, ENUM, TALON_QUANT_GROUP),
        Q(scale_row_stride, I64, 1), Q(scale_group_stride, I64, 4095)), "args->scale_row_stride",
        "4095"),
    /* found by fuzzing (tests/core/fuzz_ops.c): the scales' span overflowed */
    BAD("group: scale_group_stride spanning 2^62 scales", ONE(Q(mode, ENUM, TALON_QUANT_GROUP),
        Q(scale_row_stride, I64, 1), Q(scale_group_stride, I64, 4611686018427387904)),
        "args->scale_row_stride", "4611686018427387904"),
    BAD("out overlaps in", ONE(Q(out, PTR, P_IN + 4096 * 2 * 4095)), "args->out", "0x21ffe000"),
    BAD("token scales inside out", ONE(Q(scale, PTR, P_OUT + 4096 * 100)), "args->scale",
        "0x10064000"),
    BAD("token scales inside in", ONE(Q(scale, PTR, P_IN + 64)), "args->scale", "0x20000040"),
    BAD("group scales reach out", ONE(Q(mode, ENUM, TALON_QUANT_GROUP),
        Q(scale, PTR, P_OUT - 4 * 4096 * 32 + 4)), "args->scale", "0xff80004"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_quant_fp8_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(talon_quant_fp8(row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                                    row->kind == BAD_ARGS ? NULL : &a),
                    op_names[row->op], row->field, row->value);
}

/* Per tensor, the scale is read, not written: it may lie inside in. Edges accepted. */
static void test_accepts(void **state) {
    talon_quant_fp8_args a;
    (void)state;
    valid_args(&a);
    a.mode = TALON_QUANT_TENSOR; a.scale = P_IN + 64;
    assert_int_equal(talon_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
    valid_args(&a);
    a.rows = 1; a.cols = 16;
    assert_int_equal(talon_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
    valid_args(&a);
    a.rows = 1; a.cols = 1 << 24; a.in = 0x100000000ull;
    assert_int_equal(talon_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
    valid_args(&a); /* row-major group scales */
    a.mode = TALON_QUANT_GROUP; a.scale_row_stride = 32; a.scale_group_stride = 1;
    assert_int_equal(talon_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 4);
}

static void expect_quant_plan(int64_t cols, int row_threads, int block) {
    const talon__quant_plan pl = talon__quant_plan_make(cols);
    assert_int_equal(pl.row_threads, row_threads);
    assert_int_equal(pl.block, block);
}

static void test_block(void **state) {
    (void)state;
    expect_quant_plan(16, 32, 256); /* a warp per row, 8 rows a block */
    expect_quant_plan(1024, 32, 256);
    expect_quant_plan(1040, 128, 128);
    expect_quant_plan(4096, 128, 128);
    expect_quant_plan(4112, 256, 256);
    expect_quant_plan(1 << 24, 256, 256);
}

typedef struct quant_launch_row {
    const char *name;
    field_set set[MAX_SETS];
    const char *symbol;
    int64_t row_stride, group_stride; /* the group scale layout the kernel gets */
} quant_launch_row;

static const quant_launch_row launch_rows[] = {
    {"quant: bf16 per token", {{SET_NONE, 0, 0, 0}}, "talon_quant_fp8_bf16_token_b128", 0, 0},
    {"quant: f16 per tensor, 7168 cols", ONE(Q(dtype, ENUM, TALON_DTYPE_F16),
     Q(mode, ENUM, TALON_QUANT_TENSOR), Q(cols, I64, 7168)), "talon_quant_fp8_f16_tensor_b256", 0, 0},
    {"quant: group-major scales, rows rounded up to 4", ONE(Q(mode, ENUM, TALON_QUANT_GROUP),
     Q(rows, I64, 4093)), "talon_quant_fp8_bf16_group_g8", 1, 4096},
    {"quant: row-major group scales, 16384 cols", ONE(Q(mode, ENUM, TALON_QUANT_GROUP),
     Q(cols, I64, 16384), Q(scale_row_stride, I64, 128), Q(scale_group_stride, I64, 1)),
     "talon_quant_fp8_bf16_group_g8", 128, 1},
    {"quant: per token, 768 cols, 4093 rows: a warp per row", ONE(Q(cols, I64, 768),
     Q(rows, I64, 4093)), "talon_quant_fp8_bf16_token_w32", 0, 0},
    {"quant: f16 per tensor, 16 cols: a warp per row", ONE(Q(dtype, ENUM, TALON_DTYPE_F16),
     Q(mode, ENUM, TALON_QUANT_TENSOR), Q(cols, I64, 16)), "talon_quant_fp8_f16_tensor_w32", 0, 0},
    {"quant: group scales, 1024 cols, 9 rows", ONE(Q(mode, ENUM, TALON_QUANT_GROUP),
     Q(cols, I64, 1024), Q(rows, I64, 9)), "talon_quant_fp8_bf16_group_g8", 1, 12},
    {"quant: f16 group scales, 7168 cols, 7 rows", ONE(Q(dtype, ENUM, TALON_DTYPE_F16),
     Q(mode, ENUM, TALON_QUANT_GROUP), Q(cols, I64, 7168), Q(rows, I64, 7)),
     "talon_quant_fp8_f16_group_g8", 1, 8},
    {"quant: group scales, 128 cols (one group a row)", ONE(Q(mode, ENUM, TALON_QUANT_GROUP),
     Q(cols, I64, 128), Q(rows, I64, 33)), "talon_quant_fp8_bf16_group_g8", 1, 36},
};

/* A group kernel's launch: 32 groups a block over all rows, and its division by the groups of
   a row right for the units it numbers. */
static void expect_group_launch(int64_t rows, int64_t groups) {
    const talon__quant_params *p = (const talon__quant_params *)fake.last.params;
    const uint32_t d = (uint32_t)groups, units = (uint32_t)(rows * groups);
    const uint32_t ns[] = {0, 1, d - 1, d, d + 1, 3 * d + 7, units - 1, units + 31, 0x7fffffffu};
    size_t i;
    assert_int_equal(fake.last.grid[0], (rows * groups + 31) / 32);
    assert_int_equal(fake.last.block[0], 256);
    assert_int_equal(p->units, units);
    assert_int_equal(p->groups_per_row, d);
    for (i = 0; i < sizeof ns / sizeof ns[0]; i++)
        assert_int_equal(((uint32_t)((uint64_t)ns[i] * p->div_m >> 32) + ns[i]) >> p->div_l,
                         ns[i] / d); /* the kernel's 32-bit sum */
}

/* The group kernels number a launch's groups in 32 bits: past 2^31 - 256 groups (512 GiB of
   input) rows go in several launches, each with its rows' pointers. */
static void test_group_launches(void **state) {
    const int64_t groups = (1 << 24) / 128, per = talon__quant_group_rows_per_launch(groups);
    const talon__quant_params *p = (const talon__quant_params *)fake.last.params;
    talon_quant_fp8_args a;
    (void)state;
    assert_int_equal(per, 16383);
    assert_true(per * groups <= ((int64_t)1 << 31) - 256 && (per + 1) * groups > ((int64_t)1 << 31) - 256);
    assert_int_equal(talon__quant_group_rows_per_launch(1), ((int64_t)1 << 31) - 256);
    valid_args(&a);
    a.mode = TALON_QUANT_GROUP; a.rows = 1 << 20; a.cols = 1 << 24;
    a.out = 1ull << 48; a.in = 1ull << 50; a.scale = 1ull << 46;
    a.scale_row_stride = groups; a.scale_group_stride = 1;
    assert_int_equal(talon_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 65); /* 64 x 16383 rows, then 64 */
    expect_group_launch(64, groups);
    assert_int_equal(p->rows, 64);
    assert_int_equal(p->in, a.in + (uint64_t)64 * 16383 * a.cols * 2);
    assert_int_equal(p->out, a.out + (uint64_t)64 * 16383 * a.cols);
    assert_int_equal(p->scale, a.scale + (uint64_t)64 * 16383 * groups * 4);
}

static void test_launch(void **state) {
    const quant_launch_row *row = (const quant_launch_row *)*state;
    const talon__quant_params *p;
    talon_quant_fp8_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_int_equal(talon_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 1);
    assert_int_equal(fake.last.fn, fake_handle_for(row->symbol));
    if (a.mode == TALON_QUANT_GROUP) {
        expect_group_launch(a.rows, a.cols / 128);
    } else { /* a block per row, or (w32) a warp per row, 8 rows a block */
        assert_int_equal(fake.last.grid[0], strstr(row->symbol, "w32") ? (a.rows + 7) / 8 : a.rows);
        assert_int_equal(fake.last.block[0], strstr(row->symbol, "b128") ? 128 : 256);
    }
    assert_int_equal(fake.last.param_size, sizeof(talon__quant_params));
    p = (const talon__quant_params *)fake.last.params;
    assert_int_equal(p->out, a.out);
    assert_int_equal(p->in, a.in);
    assert_int_equal(p->scale, a.scale);
    assert_int_equal(p->rows, a.rows);
    assert_int_equal(p->cols, a.cols);
    assert_int_equal(p->out_stride, a.cols);
    assert_int_equal(p->in_stride, a.cols);
    assert_int_equal(p->scale_row_stride, row->row_stride);
    assert_int_equal(p->scale_group_stride, row->group_stride);
}

/* talon_rmsnorm_quant_fp8: its own rules (the rest are talon_rmsnorm's, tests/norm/) and the
   kernel each call picks. */
static void norm_valid(talon_rmsnorm_quant_fp8_args *a) {
    memset(a, 0, sizeof *a);
    a->out = P_OUT; a->scale = P_SCALE; a->in = P_IN; a->weight = 0x40000000ull;
    a->rows = 4096; a->cols = 4096; a->eps = 1e-6f; a->mode = TALON_QUANT_TOKEN;
}

static void test_norm_rules(void **state) {
    static const char op[] = "talon_rmsnorm_quant_fp8";
    talon_rmsnorm_quant_fp8_args a;
    (void)state;
    norm_valid(&a); a.mode = TALON_QUANT_GROUP;
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->mode", "2");
    norm_valid(&a); a.scale = 0;
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->scale", "NULL");
    norm_valid(&a); a.scale = P_SCALE + 2;
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->scale", "0x30000002");
    norm_valid(&a); a.out = 0;
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->out", "NULL");
    norm_valid(&a); a.residual = P_IN + 4096 * 4096 * 2 + 1;
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->residual", "0x22000001");
    norm_valid(&a); a.residual = 0x50000000ull; a.residual_stride = 4000;
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->residual_stride", "4000");
    norm_valid(&a); a.dtype = TALON_DTYPE_F32;
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->dtype", "2");
    norm_valid(&a); a.out = P_IN + 4096 * 2 * 100; /* inside in */
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->out", "0x200c8000");
    norm_valid(&a); a.residual = 0x50000000ull; a.out = 0x50000000ull + 4096 * 2 * 4095;
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->out", "0x51ffe000");
    norm_valid(&a); a.scale = P_OUT + 4096 * 4095; /* token scales inside out */
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->scale", "0x10fff000");
    norm_valid(&a); a.mode = TALON_QUANT_TENSOR; a.scale = P_OUT + 64; /* read: may not be out */
    assert_rejected(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), op, "args->scale", "0x10000040");
    norm_valid(&a); a.mode = TALON_QUANT_TENSOR; a.scale = P_IN + 64; /* read, inside in: fine */
    assert_int_equal(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
}

static void test_norm_launch(void **state) {
    talon_rmsnorm_quant_fp8_args a;
    const talon__norm_params *p;
    (void)state;
    norm_valid(&a);
    assert_int_equal(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.last.fn, fake_handle_for("talon_rmsnorm_quant_fp8_bf16_token_v8_b128"));
    assert_int_equal(fake.last.grid[0], 4096);
    /* rmsnorm to fp8 stages the row and the weights: 2 x 4 vectors of 16 bytes a thread */
    assert_int_equal(fake.last.smem, 2 * 4 * 128 * 16);
    p = (const talon__norm_params *)fake.last.params;
    assert_int_equal(p->out, P_OUT);
    assert_int_equal(p->scale, P_SCALE);
    assert_int_equal(p->residual, 0);
    norm_valid(&a); /* a residual, f16, a given scale, 5120 columns, in off 16-byte alignment */
    a.residual = 0x50000000ull; a.dtype = TALON_DTYPE_F16; a.mode = TALON_QUANT_TENSOR;
    a.cols = 5120; a.in = P_IN + 8;
    assert_int_equal(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.last.fn, fake_handle_for("talon_fused_add_rmsnorm_quant_fp8_f16_tensor"));
    assert_int_equal(fake.last.smem, 0); /* the element-wise path's stage is static */
    p = (const talon__norm_params *)fake.last.params;
    assert_int_equal(p->residual, 0x50000000ull);
    assert_int_equal(p->residual_stride, 5120);
    assert_int_equal(p->out_stride, 5120);
    norm_valid(&a);
    a.cols = 8192; a.residual = 0x50000000ull;
    assert_int_equal(talon_rmsnorm_quant_fp8(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.last.fn, fake_handle_for("talon_fused_add_rmsnorm_quant_fp8_bf16_token_v8"));
    assert_int_equal(fake.last.smem, 0); /* its weights stay in registers */
}

int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    test_add("quant: accepts the edges", test_accepts, NULL);
    test_add("quant: block size", test_block, NULL);
    test_add("quant: group launches past 2^31 groups", test_group_launches, NULL);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        test_add(launch_rows[i].name, test_launch, &launch_rows[i]);
    test_add("rmsnorm_quant_fp8: rules", test_norm_rules, NULL);
    test_add("rmsnorm_quant_fp8: launches", test_norm_launch, NULL);
    return test_run("test_quant");
}
