/* Dispatcher tests on a fake CUDA driver (no GPU) for the gated activations
   (talon_silu_and_mul, talon_gelu_and_mul): one validation error per rule and the exact launch
   each call makes. What every op shares (context creation, module loading, capture, errors) is
   in tests/core/test_core.c. */
#include "fake_driver.h"
#include "table_rows.h"
typedef enum { OP_SILU, OP_GELU } op_id;
static const char *const op_names[] = {"talon_silu_and_mul", "talon_gelu_and_mul"};

typedef union op_args {
    talon_silu_and_mul_args silu;
    talon_gelu_and_mul_args gelu;
} op_args;

/* 256-aligned fake device addresses, distinct so a swapped field shows in the params. */
enum { P_OUT = 0x100000, P_IN = 0x200000 };
#define ROWS 4
#define COLS 4096
#define STREAM ((CUstream)(uintptr_t)0x5157)

/* A valid call on the 16-byte path; rows edit it from here. */
static void valid_args(op_id op, op_args *a) {
    memset(a, 0, sizeof *a);
    switch (op) {
    case OP_SILU:
        a->silu.out = P_OUT; a->silu.in = P_IN; a->silu.rows = ROWS; a->silu.cols = COLS;
        break;
    case OP_GELU:
        a->gelu.out = P_OUT; a->gelu.in = P_IN; a->gelu.rows = ROWS; a->gelu.cols = COLS;
        break;
    }
}

static talon_status call_op(op_id op, talon_ctx *ctx, CUstream s, const op_args *a) {
    switch (op) {
    case OP_SILU: return talon_silu_and_mul(ctx, s, a ? &a->silu : NULL);
    case OP_GELU: return talon_gelu_and_mul(ctx, s, a ? &a->gelu : NULL);
    }
    return TALON__STATUS_COUNT;
}

/* One field edit of a table row, by offset into the op's args struct. */
#define SILU(f, k, v) SET(talon_silu_and_mul_args, f, k, v)
#define GELU(f, k, v) SET(talon_gelu_and_mul_args, f, k, v)

_Static_assert(sizeof(talon_dtype) == sizeof(int) && sizeof(talon_gelu_approx) == sizeof(int),
               "SET_ENUM writes an int");

/* ================================================================ validation */

/* Gated ops: chunks per row is ceil(cols / 2048) on the 16-byte path, ceil(cols / 256) off it. */
#define GATED_BAD(OP, T, N)                                                                    \
    COMMON_BAD(OP, T, N, 2305843009213693952), PTR_BAD(OP, T, N, out), PTR_BAD(OP, T, N, in),  \
    STRIDE_BAD(OP, T, N, out_stride, 4095), STRIDE_BAD(OP, T, N, in_stride, 8191),             \
    STRIDE_BAD(OP, T, N, in_stride, 4096),                                                     \
    TABLE_BAD(N " rejects a grid over 2^31-1 blocks (16-byte path)", OP,                             \
        ONE(SET(T, rows, I64, 2147483647), SET(T, cols, I64, 4096)), "args->rows",             \
        "2147483647"),                                                                         \
    TABLE_BAD(N " rejects a grid over 2^31-1 blocks (element-wise)", OP,                             \
        ONE(SET(T, rows, I64, 16777216), SET(T, cols, I64, 32769)), "args->rows", "16777216")

_Static_assert(COLS == 4096, "the stride rows below spell out COLS - 1 and 2 * COLS - 1");

static const bad_row bad_rows[] = {
    GATED_BAD(OP_SILU, talon_silu_and_mul_args, "talon_silu_and_mul"),
    GATED_BAD(OP_GELU, talon_gelu_and_mul_args, "talon_gelu_and_mul"),
    TABLE_BAD("talon_gelu_and_mul rejects approx = 2", OP_GELU, ONE(GELU(approx, ENUM, 2)),
        "args->approx", "2"),
    TABLE_BAD("talon_gelu_and_mul rejects approx = -1", OP_GELU, ONE(GELU(approx, ENUM, -1)),
        "args->approx", "-1"),
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
    LAUNCH("talon_silu_and_mul bf16 contiguous -> _v8", OP_SILU, NONE,
           "talon_silu_and_mul_bf16_v8"),
    LAUNCH("talon_silu_and_mul f16 cols 2056 -> _v8, 2 chunks", OP_SILU,
           ONE(SILU(dtype, ENUM, TALON_DTYPE_F16), SILU(cols, I64, 2056)),
           "talon_silu_and_mul_f16_v8"),
    LAUNCH("talon_silu_and_mul cols 7 -> element-wise", OP_SILU, ONE(SILU(cols, I64, 7)),
           "talon_silu_and_mul_bf16"),
    LAUNCH("talon_silu_and_mul in misaligned by 2 -> element-wise, 16 chunks", OP_SILU,
           ONE(SILU(in, PTR, P_IN + 2)), "talon_silu_and_mul_bf16"),
    LAUNCH("talon_silu_and_mul padded strides -> _v8", OP_SILU,
           ONE(SILU(in_stride, I64, 8200), SILU(out_stride, I64, 4096)),
           "talon_silu_and_mul_bf16_v8"),
    LAUNCH("talon_silu_and_mul out_stride 4100 -> element-wise", OP_SILU,
           ONE(SILU(out_stride, I64, 4100)), "talon_silu_and_mul_bf16"),
    LAUNCH("talon_silu_and_mul grid of exactly 2^31-1 blocks accepted", OP_SILU,
           ONE(SILU(rows, I64, 2147483647), SILU(cols, I64, 2048)), "talon_silu_and_mul_bf16_v8"),

    LAUNCH("talon_gelu_and_mul erf bf16 -> _v8", OP_GELU, NONE, "talon_gelu_and_mul_bf16_v8"),
    LAUNCH("talon_gelu_and_mul erf f16 -> _v8", OP_GELU, ONE(GELU(dtype, ENUM, TALON_DTYPE_F16)),
           "talon_gelu_and_mul_f16_v8"),
    LAUNCH("talon_gelu_and_mul tanh bf16 -> tanh _v8", OP_GELU,
           ONE(GELU(approx, ENUM, TALON_GELU_TANH)), "talon_gelu_tanh_and_mul_bf16_v8"),
    LAUNCH("talon_gelu_and_mul tanh f16 cols 7 -> tanh element-wise f16", OP_GELU,
           ONE(GELU(approx, ENUM, TALON_GELU_TANH), GELU(dtype, ENUM, TALON_DTYPE_F16),
               GELU(cols, I64, 7)), "talon_gelu_tanh_and_mul_f16"),
    LAUNCH("talon_gelu_and_mul tanh out misaligned by 2 -> tanh element-wise", OP_GELU,
           ONE(GELU(approx, ENUM, TALON_GELU_TANH), GELU(out, PTR, P_OUT + 2)),
           "talon_gelu_tanh_and_mul_bf16"),
};

/* The params the op must pass, derived from the public contract rather than the dispatcher:
   strides 0 mean a row, gated ops split rows into chunks of block * vec elements. Returns the
   grid size. */
static int64_t expected_launch(op_id op, const op_args *a, const char *symbol, void *params) {
    talon__act_params *g = (talon__act_params *)params;
    const talon_silu_and_mul_args *s = &a->silu;
    talon_silu_and_mul_args gelu_as_silu;
    int64_t per_chunk = 256 * (strstr(symbol, "_v8") ? 8 : 1);
    memset(params, 0, 128);
    if (op == OP_GELU) {
        gelu_as_silu.out = a->gelu.out; gelu_as_silu.in = a->gelu.in;
        gelu_as_silu.rows = a->gelu.rows; gelu_as_silu.cols = a->gelu.cols;
        gelu_as_silu.out_stride = a->gelu.out_stride; gelu_as_silu.in_stride = a->gelu.in_stride;
        s = &gelu_as_silu;
    }
    g->out = s->out; g->in = s->in; g->cols = s->cols;
    g->out_stride = s->out_stride ? s->out_stride : s->cols;
    g->in_stride = s->in_stride ? s->in_stride : 2 * s->cols;
    g->chunks = (s->cols + per_chunk - 1) / per_chunk;
    return s->rows * g->chunks;
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    unsigned char want[128];
    int64_t grid;
    op_args a;
    valid_args(row->op, &a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_int_equal(call_op(row->op, g_ctx, STREAM, &a), TALON_SUCCESS);
    grid = expected_launch(row->op, &a, row->symbol, want);
    assert_single_launch(row->symbol, grid, STREAM, want, sizeof(talon__act_params));
    assert_int_equal(fake.last.block[0], strstr(row->symbol, "_b128") ? 128 : 256);
}

/* ================================================================ main */
int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        test_add(launch_rows[i].name, test_launch, &launch_rows[i]);
    return test_run("test_act");
}
