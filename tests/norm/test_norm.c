/* Dispatcher tests on a fake CUDA driver (no GPU) for the norms (talon_rmsnorm,
   talon_fused_add_rmsnorm, talon_layernorm): one validation error per rule and the exact launch
   each call makes. What every op shares (context creation, module loading, capture, errors) is
   in tests/core/test_core.c. */
#include "fake_driver.h"
#include "table_rows.h"
typedef enum { OP_RMSNORM, OP_FUSED_ADD_RMSNORM, OP_LAYERNORM } op_id;
static const char *const op_names[] = {"talon_rmsnorm", "talon_fused_add_rmsnorm",
                                       "talon_layernorm"};

typedef union op_args {
    talon_rmsnorm_args rms;
    talon_fused_add_rmsnorm_args fadd;
    talon_layernorm_args ln;
} op_args;

/* 256-aligned fake device addresses, distinct so a swapped field shows in the params. */
enum { P_OUT = 0x100000, P_IN = 0x200000, P_W = 0x300000, P_RES = 0x400000, P_BIAS = 0x500000 };
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
    case OP_FUSED_ADD_RMSNORM:
        a->fadd.in = P_IN; a->fadd.residual = P_RES; a->fadd.weight = P_W;
        a->fadd.rows = ROWS; a->fadd.cols = COLS; a->fadd.eps = EPS;
        break;
    case OP_LAYERNORM:
        a->ln.out = P_OUT; a->ln.in = P_IN; a->ln.weight = P_W; a->ln.bias = P_BIAS;
        a->ln.rows = ROWS; a->ln.cols = COLS; a->ln.eps = EPS;
        break;
    }
}

static talon_status call_op(op_id op, talon_ctx *ctx, CUstream s, const op_args *a) {
    switch (op) {
    case OP_RMSNORM: return talon_rmsnorm(ctx, s, a ? &a->rms : NULL);
    case OP_FUSED_ADD_RMSNORM: return talon_fused_add_rmsnorm(ctx, s, a ? &a->fadd : NULL);
    case OP_LAYERNORM: return talon_layernorm(ctx, s, a ? &a->ln : NULL);
    }
    return TALON__STATUS_COUNT;
}

/* One field edit of a table row, by offset into the op's args struct. */
#define RMS(f, k, v) SET(talon_rmsnorm_args, f, k, v)
#define FADD(f, k, v) SET(talon_fused_add_rmsnorm_args, f, k, v)
#define LN(f, k, v) SET(talon_layernorm_args, f, k, v)

_Static_assert(sizeof(talon_dtype) == sizeof(int), "SET_ENUM writes an int");

/* ================================================================ validation */


_Static_assert(COLS == 4096, "the stride rows below spell out COLS - 1");

#define NORM_N "talon_rmsnorm"
#define FADD_N "talon_fused_add_rmsnorm"
#define LN_N "talon_layernorm"
static const bad_row bad_rows[] = {
    COMMON_BAD(OP_RMSNORM, talon_rmsnorm_args, NORM_N, 4611686018427387904),
    PTR_BAD(OP_RMSNORM, talon_rmsnorm_args, NORM_N, out),
    PTR_BAD(OP_RMSNORM, talon_rmsnorm_args, NORM_N, in),
    PTR_BAD(OP_RMSNORM, talon_rmsnorm_args, NORM_N, weight),
    STRIDE_BAD(OP_RMSNORM, talon_rmsnorm_args, NORM_N, out_stride, 4095),
    STRIDE_BAD(OP_RMSNORM, talon_rmsnorm_args, NORM_N, in_stride, 4095),
    STRIDE_BAD(OP_RMSNORM, talon_rmsnorm_args, NORM_N, in_stride, -8),

    COMMON_BAD(OP_FUSED_ADD_RMSNORM, talon_fused_add_rmsnorm_args, FADD_N, 4611686018427387904),
    PTR_BAD(OP_FUSED_ADD_RMSNORM, talon_fused_add_rmsnorm_args, FADD_N, in),
    PTR_BAD(OP_FUSED_ADD_RMSNORM, talon_fused_add_rmsnorm_args, FADD_N, residual),
    PTR_BAD(OP_FUSED_ADD_RMSNORM, talon_fused_add_rmsnorm_args, FADD_N, weight),
    STRIDE_BAD(OP_FUSED_ADD_RMSNORM, talon_fused_add_rmsnorm_args, FADD_N, in_stride, 4095),
    STRIDE_BAD(OP_FUSED_ADD_RMSNORM, talon_fused_add_rmsnorm_args, FADD_N, residual_stride, 4095),

    COMMON_BAD(OP_LAYERNORM, talon_layernorm_args, LN_N, 4611686018427387904),
    PTR_BAD(OP_LAYERNORM, talon_layernorm_args, LN_N, out),
    PTR_BAD(OP_LAYERNORM, talon_layernorm_args, LN_N, in),
    PTR_BAD(OP_LAYERNORM, talon_layernorm_args, LN_N, weight),
    ODD_PTR_BAD(OP_LAYERNORM, talon_layernorm_args, LN_N, bias), /* optional: NULL is fine */
    STRIDE_BAD(OP_LAYERNORM, talon_layernorm_args, LN_N, out_stride, 4095),
    STRIDE_BAD(OP_LAYERNORM, talon_layernorm_args, LN_N, in_stride, 4095),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    const char *op = op_names[row->op];
    op_args a;
    valid_args(row->op, &a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(call_op(row->op, row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                            row->kind == BAD_ARGS ? NULL : &a),
                    op, row->field, row->value);
}

/* ================================================================ launch configuration */

#define LAUNCH(NAME, OP, SETS, SYM) {.name = NAME, .op = OP, .set = SETS, .symbol = SYM}
static const launch_row launch_rows[] = {
    LAUNCH("talon_rmsnorm bf16 contiguous, 4096 cols -> _v8_b128", OP_RMSNORM, NONE,
           "talon_rmsnorm_bf16_v8_b128"),
    LAUNCH("talon_rmsnorm bf16 4104 cols -> _v8_b160 (513 vectors: 129 threads, 5 warps)",
           OP_RMSNORM, ONE(RMS(cols, I64, 4104)), "talon_rmsnorm_bf16_v8_b160"),
    LAUNCH("talon_rmsnorm bf16 5120 cols -> _v8_b160", OP_RMSNORM, ONE(RMS(cols, I64, 5120)),
           "talon_rmsnorm_bf16_v8_b160"),
    LAUNCH("talon_rmsnorm f16 6144 cols -> _v8_b192", OP_RMSNORM,
           ONE(RMS(dtype, ENUM, TALON_DTYPE_F16), RMS(cols, I64, 6144)), "talon_rmsnorm_f16_v8_b192"),
    LAUNCH("talon_rmsnorm bf16 7168 cols -> _v8_b224", OP_RMSNORM, ONE(RMS(cols, I64, 7168)),
           "talon_rmsnorm_bf16_v8_b224"),
    LAUNCH("talon_rmsnorm bf16 8192 cols -> _v8 (256 threads)", OP_RMSNORM,
           ONE(RMS(cols, I64, 8192)), "talon_rmsnorm_bf16_v8"),
    LAUNCH("talon_rmsnorm f16 padded strides -> _v8", OP_RMSNORM,
           ONE(RMS(dtype, ENUM, TALON_DTYPE_F16), RMS(out_stride, I64, 4104),
               RMS(in_stride, I64, 8192)), "talon_rmsnorm_f16_v8_b128"),
    LAUNCH("talon_rmsnorm out misaligned by 2 -> element-wise", OP_RMSNORM,
           ONE(RMS(out, PTR, P_OUT + 2)), "talon_rmsnorm_bf16"),
    LAUNCH("talon_rmsnorm weight 8-byte aligned -> element-wise", OP_RMSNORM,
           ONE(RMS(weight, PTR, P_W + 8)), "talon_rmsnorm_bf16"),
    LAUNCH("talon_rmsnorm cols 7 -> element-wise", OP_RMSNORM, ONE(RMS(cols, I64, 7)),
           "talon_rmsnorm_bf16"),
    LAUNCH("talon_rmsnorm in_stride 4100 -> element-wise", OP_RMSNORM,
           ONE(RMS(in_stride, I64, 4100)), "talon_rmsnorm_bf16"),
    LAUNCH("talon_rmsnorm f16 cols 7 -> element-wise f16", OP_RMSNORM,
           ONE(RMS(dtype, ENUM, TALON_DTYPE_F16), RMS(cols, I64, 7)), "talon_rmsnorm_f16"),
    LAUNCH("talon_rmsnorm rows 2^31-1 accepted", OP_RMSNORM, ONE(RMS(rows, I64, 2147483647)),
           "talon_rmsnorm_bf16_v8_b128"),

    LAUNCH("talon_fused_add_rmsnorm bf16 contiguous -> _v8_b128", OP_FUSED_ADD_RMSNORM, NONE,
           "talon_fused_add_rmsnorm_bf16_v8_b128"),
    LAUNCH("talon_fused_add_rmsnorm bf16 8192 cols -> _v8", OP_FUSED_ADD_RMSNORM,
           ONE(FADD(cols, I64, 8192)), "talon_fused_add_rmsnorm_bf16_v8"),
    LAUNCH("talon_fused_add_rmsnorm f16 padded strides -> _v8", OP_FUSED_ADD_RMSNORM,
           ONE(FADD(dtype, ENUM, TALON_DTYPE_F16), FADD(in_stride, I64, 8192),
               FADD(residual_stride, I64, 4104)), "talon_fused_add_rmsnorm_f16_v8_b128"),
    LAUNCH("talon_fused_add_rmsnorm residual 8-byte aligned -> element-wise",
           OP_FUSED_ADD_RMSNORM, ONE(FADD(residual, PTR, P_RES + 8)),
           "talon_fused_add_rmsnorm_bf16"),
    LAUNCH("talon_fused_add_rmsnorm residual_stride 4100 -> element-wise", OP_FUSED_ADD_RMSNORM,
           ONE(FADD(residual_stride, I64, 4100)), "talon_fused_add_rmsnorm_bf16"),

    LAUNCH("talon_layernorm bf16 with bias -> _v8_b128", OP_LAYERNORM, NONE,
           "talon_layernorm_bf16_v8_b128"),
    LAUNCH("talon_layernorm bf16 16384 cols -> _v8", OP_LAYERNORM, ONE(LN(cols, I64, 16384)),
           "talon_layernorm_bf16_v8"),
    LAUNCH("talon_layernorm bf16 5120 cols -> _v8_b160", OP_LAYERNORM, ONE(LN(cols, I64, 5120)),
           "talon_layernorm_bf16_v8_b160"),
    LAUNCH("talon_layernorm f16 without bias -> _v8", OP_LAYERNORM,
           ONE(LN(dtype, ENUM, TALON_DTYPE_F16), LN(bias, PTR, 0)), "talon_layernorm_f16_v8_b128"),
    LAUNCH("talon_layernorm bias misaligned by 2 -> element-wise", OP_LAYERNORM,
           ONE(LN(bias, PTR, P_BIAS + 2)), "talon_layernorm_bf16"),
    LAUNCH("talon_layernorm out_stride 4097 -> element-wise", OP_LAYERNORM,
           ONE(LN(out_stride, I64, 4097)), "talon_layernorm_bf16"),
};

/* The params the op must pass, derived from the public contract rather than the dispatcher:
   strides 0 mean a row, fused_add_rmsnorm writes in place. Returns the grid size. */
static int64_t expected_launch(op_id op, const op_args *a, void *params) {
    talon__norm_params *n = (talon__norm_params *)params;
    memset(params, 0, 128);
    switch (op) {
    case OP_RMSNORM:
        n->out = a->rms.out; n->in = a->rms.in; n->weight = a->rms.weight;
        n->cols = a->rms.cols; n->eps = a->rms.eps;
        n->out_stride = a->rms.out_stride ? a->rms.out_stride : a->rms.cols;
        n->in_stride = a->rms.in_stride ? a->rms.in_stride : a->rms.cols;
        return a->rms.rows;
    case OP_FUSED_ADD_RMSNORM:
        n->out = n->in = a->fadd.in; n->residual = a->fadd.residual; n->weight = a->fadd.weight;
        n->cols = a->fadd.cols; n->eps = a->fadd.eps;
        n->out_stride = n->in_stride = a->fadd.in_stride ? a->fadd.in_stride : a->fadd.cols;
        n->residual_stride = a->fadd.residual_stride ? a->fadd.residual_stride : a->fadd.cols;
        return a->fadd.rows;
    case OP_LAYERNORM:
        n->out = a->ln.out; n->in = a->ln.in; n->weight = a->ln.weight; n->bias = a->ln.bias;
        n->cols = a->ln.cols; n->eps = a->ln.eps;
        n->out_stride = a->ln.out_stride ? a->ln.out_stride : a->ln.cols;
        n->in_stride = a->ln.in_stride ? a->ln.in_stride : a->ln.cols;
        return a->ln.rows;
    }
    return -1;
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    unsigned char want[128];
    int64_t grid;
    op_args a;
    valid_args(row->op, &a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_int_equal(call_op(row->op, g_ctx, STREAM, &a), TALON_SUCCESS);
    grid = expected_launch(row->op, &a, want);
    assert_single_launch(row->symbol, grid, STREAM, want, sizeof(talon__norm_params));
    assert_int_equal(fake.last.block[0],
                     strstr(row->symbol, "_v8_b") ? atoi(strstr(row->symbol, "_v8_b") + 5) : 256);
    /* fused_add_rmsnorm's 16-byte path stages the row and the weights in dynamic shared
       memory (2 x 4 vectors of 16 bytes a thread); the others stage the row statically */
    assert_int_equal(fake.last.smem, row->op == OP_FUSED_ADD_RMSNORM && strstr(row->symbol, "_v8")
                                         ? 2 * 4 * fake.last.block[0] * 16 : 0);
}

/* The 16-byte path's block: the fewest whole warps that keep the row on chip (4 vectors of 8
   a thread), from 128 to 256 threads; the element-wise path: 256. */
static void test_block_rule(void **state) {
    static const int64_t cols[] = {8, 1024, 4096, 4104, 5120, 5128, 6144, 7168, 8192, 8200, 65536};
    static const int want[] = {128, 128, 128, 160, 160, 192, 192, 224, 256, 256, 256};
    size_t i;
    (void)state;
    for (i = 0; i < sizeof cols / sizeof cols[0]; i++)
        if (talon__norm_block(8, cols[i]) != want[i])
            fail_msg("cols %lld: %d threads, want %d", (long long)cols[i],
                     talon__norm_block(8, cols[i]), want[i]);
    assert_int_equal(talon__norm_block(1, 4096), 256);
}

/* ================================================================ main */
int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        test_add(launch_rows[i].name, test_launch, &launch_rows[i]);
    test_add("16-byte path: the fewest whole warps that cache the row", test_block_rule, NULL);
    return test_run("test_norm");
}
