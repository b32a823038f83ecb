/* Dispatcher tests on a fake CUDA driver (no GPU) for talon_gather_rows: one validation error
   per rule (status, message naming the field and its value, nothing launched) and the exact
   launch of each path (kernel, grid, params derived from the public contract). */
#include "fake_driver.h"
#include "table_rows.h"

typedef enum { OP_GATHER } op_id;
static const char *const op_names[] = {"talon_gather_rows"};

enum { P_OUT = 0x100000, P_IN = 0x10000000, P_IDX = 0x200000 };
#define P_FAR 0x100000000000ull /* above everything: room for 2^31 rows */
#define STREAM ((CUstream)(uintptr_t)0x5157)

/* An embedding lookup of 4 tokens in a Llama-3 table: [128256, 4096] bf16. */
static void valid_args(talon_gather_rows_args *a) {
    memset(a, 0, sizeof *a);
    a->out = P_OUT; a->in = P_IN; a->indices = P_IDX;
    a->rows = 4; a->cols = 4096; a->in_rows = 128256;
}

#define G(f, k, v) SET(talon_gather_rows_args, f, k, v)
#define T talon_gather_rows_args
#define N "talon_gather_rows"

/* ================================================================ validation, one per rule */
static const bad_row bad_rows[] = {
    {.name = N " rejects ctx NULL", .op = OP_GATHER, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = N " rejects args NULL", .op = OP_GATHER, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    TABLE_BAD(N " rejects rows 0", OP_GATHER, ONE(G(rows, I64, 0)), "args->rows", "0"),
    TABLE_BAD(N " rejects rows 2^31", OP_GATHER, ONE(G(rows, I64, 2147483648)), "args->rows",
        "2147483648"),
    TABLE_BAD(N " rejects cols 0", OP_GATHER, ONE(G(cols, I64, 0)), "args->cols", "0"),
    TABLE_BAD(N " rejects cols 2^59", OP_GATHER, ONE(G(cols, I64, 576460752303423488)),
        "args->cols", "576460752303423488"),
    TABLE_BAD(N " rejects dtype 7", OP_GATHER, ONE(G(dtype, ENUM, 7)), "args->dtype", "7"),
    PTR_BAD(OP_GATHER, T, N, out), PTR_BAD(OP_GATHER, T, N, in),
    TABLE_BAD(N " rejects indices NULL", OP_GATHER, ONE(G(indices, PTR, 0)), "args->indices", "NULL"),
    TABLE_BAD(N " rejects int32 indices at 0x200002", OP_GATHER, ONE(G(indices, PTR, P_IDX + 2)),
        "args->indices", "0x200002"),
    TABLE_BAD(N " rejects int64 indices at 0x200004", OP_GATHER,
        ONE(G(indices, PTR, P_IDX + 4), G(index_dtype, ENUM, TALON_INDEX_I64)), "args->indices",
        "0x200004"),
    TABLE_BAD(N " rejects f32 out at 0x100002", OP_GATHER,
        ONE(G(dtype, ENUM, TALON_DTYPE_F32), G(out, PTR, P_OUT + 2)), "args->out", "0x100002"),
    TABLE_BAD(N " rejects index_dtype 2", OP_GATHER, ONE(G(index_dtype, ENUM, 2)),
        "args->index_dtype", "2"),
    TABLE_BAD(N " rejects dtype I32", OP_GATHER, ONE(G(dtype, ENUM, TALON_DTYPE_I32)),
        "args->dtype", "3"),
    TABLE_BAD(N " rejects in_rows 0", OP_GATHER, ONE(G(in_rows, I64, 0)), "args->in_rows", "0"),
    TABLE_BAD(N " rejects in_rows -3", OP_GATHER, ONE(G(in_rows, I64, -3)), "args->in_rows", "-3"),
    STRIDE_BAD(OP_GATHER, T, N, out_stride, 4095), STRIDE_BAD(OP_GATHER, T, N, in_stride, 4000),
    TABLE_BAD(N " rejects a table spanning 2^59 elements", OP_GATHER,
        ONE(G(in_rows, I64, 1ll << 40), G(in_stride, I64, 1ll << 20)), "args->in_stride",
        "1048576"),
    TABLE_BAD(N " rejects out overlapping in", OP_GATHER, ONE(G(out, PTR, P_IN + 8192)),
        "args->out", "0x10002000"),
    TABLE_BAD(N " rejects out overlapping indices", OP_GATHER, ONE(G(out, PTR, P_IDX - 8192)),
        "args->out", "0x1fe000"),
    TABLE_BAD(N " rejects a grid over 2^31-1 blocks", OP_GATHER,
        ONE(G(rows, I64, 2147483647), G(cols, I64, 2049), G(out, PTR, P_FAR)), "args->rows",
        "2147483647"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_gather_rows_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(talon_gather_rows(row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                                      row->kind == BAD_ARGS ? NULL : &a),
                    op_names[row->op], row->field, row->value);
}

/* ================================================================ launches */
#define LAUNCH(NAME, SETS, SYM) {.name = NAME, .op = OP_GATHER, .set = SETS, .symbol = SYM}
static const launch_row launch_rows[] = {
    LAUNCH("bf16 embedding lookup -> 16-byte units", NONE, "talon_gather_rows_u16"),
    LAUNCH("int64 indices -> 16-byte units", ONE(G(index_dtype, ENUM, TALON_INDEX_I64)),
           "talon_gather_rows_u16"),
    LAUNCH("f32 rows of 4 elements -> 16-byte units",
           ONE(G(dtype, ENUM, TALON_DTYPE_F32), G(cols, I64, 4)), "talon_gather_rows_u16"),
    LAUNCH("fp8 rows of 16 -> 16-byte units",
           ONE(G(dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(cols, I64, 16)), "talon_gather_rows_u16"),
    LAUNCH("fp8 cols 17 -> bytes", ONE(G(dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(cols, I64, 17)),
           "talon_gather_rows_u1"),
    LAUNCH("bf16 cols 7 -> 2-byte units", ONE(G(cols, I64, 7)), "talon_gather_rows_u2"),
    LAUNCH("f16 in misaligned by 2 -> 2-byte units",
           ONE(G(dtype, ENUM, TALON_DTYPE_F16), G(in, PTR, P_IN + 2)), "talon_gather_rows_u2"),
    LAUNCH("f32 out misaligned by 4 -> 4-byte units",
           ONE(G(dtype, ENUM, TALON_DTYPE_F32), G(out, PTR, P_OUT + 4)), "talon_gather_rows_u4"),
    LAUNCH("in_stride 4100 -> 2-byte units", ONE(G(in_stride, I64, 4100)),
           "talon_gather_rows_u2"),
    LAUNCH("in_stride 12288 (a view of fused rows) -> 16-byte units",
           ONE(G(in_stride, I64, 12288), G(out_stride, I64, 4104)), "talon_gather_rows_u16"),
    LAUNCH("grid of exactly 2^31-1 blocks",
           ONE(G(rows, I64, 2147483647), G(cols, I64, 2048), G(out, PTR, P_FAR)),
           "talon_gather_rows_u16"),
};

static int dtype_bytes(talon_dtype t) {
    return t == TALON_DTYPE_F32 ? 4 : t == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
}

/* The params the op must pass, from the public contract; returns the grid size. */
static int64_t expected_launch(const talon_gather_rows_args *a, const char *symbol, void *params) {
    talon__gather_params *p = (talon__gather_params *)params;
    const int64_t esize = dtype_bytes(a->dtype);
    const int64_t unit = strstr(symbol, "_u16") ? 16 : esize;
    memset(params, 0, 128);
    p->out = a->out; p->in = a->in; p->indices = a->indices;
    p->in_rows = a->in_rows;
    p->row_units = a->cols * esize / unit;
    p->out_stride = (a->out_stride ? a->out_stride : a->cols) * esize / unit;
    p->in_stride = (a->in_stride ? a->in_stride : a->cols) * esize / unit;
    p->chunks = (p->row_units + 255) / 256;
    p->index64 = a->index_dtype == TALON_INDEX_I64;
    return a->rows * p->chunks;
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    unsigned char want[128];
    int64_t grid;
    talon_gather_rows_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_int_equal(talon_gather_rows(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.load_calls[TALON__IMG_gather], 1);
    grid = expected_launch(&a, row->symbol, want);
    assert_single_launch(row->symbol, grid, STREAM, want, sizeof(talon__gather_params));
    assert_int_equal(fake.last.block[0], 256);
    assert_int_equal(fake.last.smem, 0);
}

/* ================================================================ main */
int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        test_add(launch_rows[i].name, test_launch, &launch_rows[i]);
    return test_run("test_gather");
}
