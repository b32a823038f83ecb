/* Dispatcher tests on a fake CUDA driver (no GPU) for talon_gemm: one validation error per
   rule (status, message naming the field and its value, nothing loaded or launched), the
   plan as a pure function of (m, n, gated, SM count), and the launch of each kernel variant
   (symbol, persistent grid, the params and the tensor maps the kernel gets). */
#include "fake_driver.h"
#include "table_rows.h"
#include <math.h>

typedef enum { OP_GEMM } op_id; /* the one op: table_rows.h's op column */
static const char *const op_names[] = {"talon_gemm"};

#define P_A 0x10000000ull
#define P_B 0x20000000ull
#define P_D 0x30000000ull
#define P_C 0x40000000ull
#define P_BIAS 0x50000000ull
#define P_SA 0x60000000ull
#define P_SB 0x70000000ull
#define STREAM ((CUstream)(uintptr_t)0x5157)

/* A Llama-3-8B q/o projection over 4096 tokens. */
static void valid_args(talon_gemm_args *a) {
    memset(a, 0, sizeof *a);
    a->d = P_D; a->a = P_A; a->b = P_B;
    a->m = 4096; a->n = 4096; a->k = 4096;
}

#define G(f, k, v) SET(talon_gemm_args, f, k, v)
/* fp8 inputs with per-tensor (per-row) scales, valid; a row adds at most 2 more edits */
#define FP8_WITH(SCALE, ...)                                                                   \
    ONE(G(dtype, ENUM, TALON_DTYPE_FP8_E4M3), G(scale, ENUM, SCALE), G(a_scale, PTR, P_SA),    \
        G(b_scale, PTR, P_SB), __VA_ARGS__)
#define FP8(...) FP8_WITH(TALON_GEMM_SCALE_TENSOR, __VA_ARGS__)
#define FP8_ROW(...) FP8_WITH(TALON_GEMM_SCALE_ROW, __VA_ARGS__)
#define FP8_BLOCK(...) FP8_WITH(TALON_GEMM_SCALE_BLOCK, __VA_ARGS__)
#define BAD(NAME, SETS, FIELD, VALUE)                                                          \
    {.name = "gemm: " NAME, .op = OP_GEMM, .kind = BAD_FIELDS, .set = SETS, .field = FIELD,      \
     .value = VALUE}

/* ================================================================ validation, one per rule */
static const bad_row bad_rows[] = {
    {.name = "gemm: ctx NULL", .op = OP_GEMM, .kind = BAD_CTX, .field = "ctx", .value = "NULL"},
    {.name = "gemm: args NULL", .op = OP_GEMM, .kind = BAD_ARGS, .field = "args", .value = "NULL"},
    BAD("dtype F32", ONE(G(dtype, ENUM, TALON_DTYPE_F32)), "args->dtype", "2"),
    BAD("bf16 with scale TENSOR", ONE(G(scale, ENUM, TALON_GEMM_SCALE_TENSOR)), "args->scale",
        "1"),
    BAD("bf16 with an a_scale", ONE(G(a_scale, PTR, P_SA)), "args->a_scale", "0x60000000"),
    BAD("bf16 with a b_scale", ONE(G(b_scale, PTR, P_SB)), "args->b_scale", "0x70000000"),
    BAD("fp8 with scale NONE", FP8(G(scale, ENUM, TALON_GEMM_SCALE_NONE)), "args->scale", "0"),
    BAD("fp8 with scale 4", FP8(G(scale, ENUM, 4)), "args->scale", "4"),
    BAD("fp8 block scales, gated, n 4128 (not a multiple of 64)", FP8_BLOCK(G(gated, INT, 1),
        G(n, I64, 4128)), "args->n", "4128"),
    BAD("fp8 block a_scale inside d", FP8_BLOCK(G(a_scale, PTR, P_D - 4 * 4096 * 32 + 4)),
        "args->a_scale", "0x2ff80004"),
    BAD("fp8 -> f32", FP8(G(out_dtype, ENUM, TALON_DTYPE_F32)), "args->out_dtype", "2"),
    BAD("fp8 -> f16", FP8(G(out_dtype, ENUM, TALON_DTYPE_F16)), "args->out_dtype", "1"),
    BAD("fp8 a_scale NULL", FP8(G(a_scale, PTR, 0)), "args->a_scale", "NULL"),
    BAD("fp8 b_scale NULL", FP8(G(b_scale, PTR, 0)), "args->b_scale", "NULL"),
    BAD("fp8 a_scale 2-byte aligned", FP8(G(a_scale, PTR, P_SA + 2)), "args->a_scale",
        "0x60000002"),
    BAD("fp8 row b_scale 4-byte aligned", FP8_ROW(G(b_scale, PTR, P_SB + 4)), "args->b_scale",
        "0x70000004"),
    BAD("fp8 k 4104 (not a multiple of 16)", FP8(G(k, I64, 4104)), "args->k", "4104"),
    BAD("fp8 lda 4104 (not a multiple of 16)", FP8(G(lda, I64, 4104)), "args->lda", "4104"),
    BAD("fp8 ldb 4120 (not a multiple of 16)", FP8(G(ldb, I64, 4120)), "args->ldb", "4120"),
    BAD("fp8 row a_scale inside d", FP8_ROW(G(a_scale, PTR, P_D + 64)), "args->a_scale",
        "0x30000040"),
    BAD("fp8 b_scale inside d", FP8(G(b_scale, PTR, P_D + 4096 * 2 * 4096 - 4)), "args->b_scale",
        "0x31fffffc"),
    BAD("dtype 7", ONE(G(dtype, ENUM, 7)), "args->dtype", "7"),
    BAD("out_dtype bf16 (zero) for f16 inputs", ONE(G(dtype, ENUM, TALON_DTYPE_F16)),
        "args->out_dtype", "0"),
    BAD("out_dtype f16 for bf16 inputs", ONE(G(out_dtype, ENUM, TALON_DTYPE_F16)),
        "args->out_dtype", "1"),
    BAD("out_dtype I32", ONE(G(out_dtype, ENUM, TALON_DTYPE_I32)), "args->out_dtype", "3"),
    BAD("m 0", ONE(G(m, I64, 0)), "args->m", "0"),
    BAD("m -1", ONE(G(m, I64, -1)), "args->m", "-1"),
    BAD("m 2^24 + 1", ONE(G(m, I64, 16777217)), "args->m", "16777217"),
    BAD("n 0", ONE(G(n, I64, 0)), "args->n", "0"),
    BAD("n 4 (below 8)", ONE(G(n, I64, 4)), "args->n", "4"),
    BAD("n 4100 (not a multiple of 8)", ONE(G(n, I64, 4100)), "args->n", "4100"),
    BAD("n 2^20 + 8", ONE(G(n, I64, 1048584)), "args->n", "1048584"),
    BAD("k 0", ONE(G(k, I64, 0)), "args->k", "0"),
    BAD("k 20 (not a multiple of 8)", ONE(G(k, I64, 20)), "args->k", "20"),
    BAD("k 2^20 + 8", ONE(G(k, I64, 1048584)), "args->k", "1048584"),
    BAD("gated 2", ONE(G(gated, INT, 2)), "args->gated", "2"),
    BAD("gated -1", ONE(G(gated, INT, -1)), "args->gated", "-1"),
    BAD("act 5", ONE(G(act, ENUM, 5)), "args->act", "5"),
    BAD("act -1", ONE(G(act, ENUM, -1)), "args->act", "-1"),
    BAD("lda 4088 (shorter than k)", ONE(G(lda, I64, 4088)), "args->lda", "4088"),
    BAD("lda 4100 (not a multiple of 8)", ONE(G(lda, I64, 4100)), "args->lda", "4100"),
    BAD("lda 2^36 + 8", ONE(G(lda, I64, 68719476744.0)), "args->lda", "68719476744"),
    BAD("ldb 8 (shorter than k)", ONE(G(ldb, I64, 8)), "args->ldb", "8"),
    BAD("ldb 4097", ONE(G(ldb, I64, 4097)), "args->ldb", "4097"),
    BAD("ldd 4092 (shorter than n)", ONE(G(ldd, I64, 4092)), "args->ldd", "4092"),
    BAD("ldd 4099", ONE(G(ldd, I64, 4099)), "args->ldd", "4099"),
    BAD("ldc 100 with c", ONE(G(c, PTR, P_C), G(ldc, I64, 100)), "args->ldc", "100"),
    BAD("ldc 4100 with c", ONE(G(c, PTR, P_C), G(ldc, I64, 4100)), "args->ldc", "4100"),
    BAD("d NULL", ONE(G(d, PTR, 0)), "args->d", "NULL"),
    BAD("d 8-byte aligned", ONE(G(d, PTR, P_D + 8)), "args->d", "0x30000008"),
    BAD("a NULL", ONE(G(a, PTR, 0)), "args->a", "NULL"),
    BAD("a 2-byte aligned", ONE(G(a, PTR, P_A + 2)), "args->a", "0x10000002"),
    BAD("b NULL", ONE(G(b, PTR, 0)), "args->b", "NULL"),
    BAD("b 8-byte aligned", ONE(G(b, PTR, P_B + 8)), "args->b", "0x20000008"),
    BAD("bias 8-byte aligned", ONE(G(bias, PTR, P_BIAS + 8)), "args->bias", "0x50000008"),
    BAD("c 4-byte aligned", ONE(G(c, PTR, P_C + 4)), "args->c", "0x40000004"),
    BAD("c is d with ldc != ldd", ONE(G(c, PTR, P_D), G(ldc, I64, 8192), G(ldd, I64, 4096)),
        "args->ldc", "8192"),
    BAD("a overlaps d", ONE(G(a, PTR, P_D + 4096 * 2 * 100)), "args->a", "0x300c8000"),
    BAD("b overlaps d's last row", ONE(G(b, PTR, P_D - 4096 * 2 * 4096 + 16)), "args->b",
        "0x2e000010"),
    BAD("bias inside d", ONE(G(bias, PTR, P_D + 1024)), "args->bias", "0x30000400"),
    BAD("c overlaps d but is not d", ONE(G(c, PTR, P_D + 16)), "args->c", "0x30000010"),
    BAD("gated b's up half overlaps d", ONE(G(gated, INT, 1), G(d, PTR, P_B + 4096 * 2 * 6000)),
        "args->b", "0x20000000"),
    BAD("alpha NaN", ONE(G(alpha, F32, NAN)), "args->alpha", "nan"),
    BAD("alpha -inf", ONE(G(alpha, F32, -INFINITY)), "args->alpha", "-inf"),
    BAD("beta inf", ONE(G(c, PTR, P_C), G(beta, F32, INFINITY)), "args->beta", "inf"),
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_gemm_args a;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_rejected(talon_gemm(row->kind == BAD_CTX ? NULL : g_ctx, STREAM,
                               row->kind == BAD_ARGS ? NULL : &a),
                    op_names[row->op], row->field, row->value);
    assert_int_equal(fake.encodes, 0);
}

/* The largest accepted shapes and strides launch. */
static void test_accepts_edges(void **state) {
    talon_gemm_args a;
    (void)state;
    valid_args(&a);
    a.m = 1; a.n = 8; a.k = 8;
    assert_int_equal(talon_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    valid_args(&a);
    a.m = 1 << 24; a.n = 8; a.k = 8; a.d = 0x1000000000ull;
    assert_int_equal(talon_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    valid_args(&a);
    a.m = 1; a.n = 1 << 20; a.k = 1 << 20; a.a = 0x1000000000ull; a.b = 0x2000000000ull;
    a.d = 0x30000000000ull;
    assert_int_equal(talon_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    valid_args(&a);
    a.c = P_D; a.ldc = a.ldd = 8192; a.bias = P_BIAS; a.alpha = -0.5f; a.beta = 1e-30f;
    a.gated = 1; a.act = TALON_GEMM_ACT_GELU_TANH;
    assert_int_equal(talon_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 4);
}

/* A tensor map the driver rejects: DRIVER, the message names the tensor, nothing launched. */
static void test_encode_failure(void **state) {
    talon_gemm_args a;
    (void)state;
    valid_args(&a);
    fake.encode_result = CUDA_ERROR_INVALID_VALUE;
    assert_int_equal(talon_gemm(g_ctx, STREAM, &a), TALON_ERROR_DRIVER);
    assert_contains(talon_last_error(), "cuTensorMapEncodeTiled(args->a)");
    assert_int_equal(fake.launches, 0);
}

/* ================================================================ plan */
typedef struct plan_row {
    int64_t m, n, k;
    int in_size, gated, out_f32, block, sms, bn, tiles_m, tiles_n, split, swap_mn, grid;
    int swap_rows; /* the transposed kernel's; 0 (omitted) for the others */
    int epilogue;  /* input: TALON__GEMM_EPI_* (1: a bias or activation, 2: a residual alone) */
    int pingpong;  /* expected: gemm_pingpong */
} plan_row;

static void test_plan(void **state) {
    static const plan_row rows[] = {
        /* the tile width with the fewest waves x tile time (gemm_plan.h) */
        {4096, 4096, 4096, 2, 0, 0, 0, 132, 256, 32, 16, 1, 0, 132, 0, 0, 0},
        {8192, 8192, 4096, 2, 0, 0, 0, 132, 256, 64, 32, 1, 0, 132, 0, 0, 0},
        {16384, 28672, 4096, 2, 0, 0, 0, 132, 256, 128, 112, 1, 0, 132, 0, 0, 0},
        /* 512 x 4096: 64 tiles of 256 < 132 SMs -> 128 tiles of 128 */
        {512, 4096, 4096, 2, 0, 0, 0, 132, 128, 4, 32, 1, 0, 128, 0, 0, 0},
        /* 512 x 6144: 96 tiles of 256 leave a third of a wave idle, 192 of 128 take two:
           128 tiles of 192 fill one */
        {512, 6144, 4096, 2, 0, 0, 0, 132, 192, 4, 32, 1, 0, 128, 0, 0, 0},
        {512, 28672, 4096, 2, 0, 0, 0, 132, 128, 4, 224, 1, 0, 132, 0, 0, 0},
        /* decode: one tile-row */
        {128, 14336, 4096, 2, 0, 0, 0, 132, 128, 1, 112, 1, 0, 112, 0, 0, 0},
        {64, 4096, 4096, 2, 0, 0, 0, 132, 128, 1, 64, 2, 64, 128, 64, 0, 0},
        /* gated: 128 (256 rows of b) or 64 output columns per tile, never 192; ping-pong
           tiles of 128 rows of b where they pay (below) */
        {4096, 14336, 4096, 2, 1, 0, 0, 132, 128, 32, 224, 1, 0, 132, 0, 0, 1},
        {128, 14336, 4096, 2, 1, 0, 0, 132, 256, 1, 112, 1, 0, 132, 0, 0, 0},
        {256, 14336, 4096, 2, 1, 0, 0, 132, 128, 2, 224, 1, 0, 132, 0, 0, 1},
        {64, 4096, 4096, 2, 1, 0, 0, 132, 128, 1, 64, 1, 0, 64, 0, 0, 0},
        /* ragged edges round up */
        {1000, 72, 4096, 2, 0, 0, 0, 132, 128, 8, 1, 2, 0, 16, 0, 0, 0},
        {129, 4104, 4096, 2, 0, 0, 0, 132, 128, 2, 33, 2, 0, 132, 0, 0, 0},
        /* the SM count decides */
        {512, 6144, 4096, 2, 0, 0, 0, 78, 192, 4, 32, 1, 0, 78, 0, 0, 0},
        {512, 6144, 4096, 2, 0, 0, 0, 114, 256, 4, 24, 1, 0, 96, 0, 0, 0},
        {1, 8, 4096, 2, 0, 0, 0, 132, 128, 1, 1, 2, 16, 2, 64, 0, 0},
        /* bn 256 launches whole clusters of 2: pairs of tile-rows (an odd count rounds up),
           at most floor(SMs / 2) of them */
        {384, 9728, 4096, 2, 0, 0, 0, 114, 256, 3, 38, 1, 0, 114, 0, 0, 0},
        {4096, 4096, 4096, 2, 0, 0, 0, 133, 256, 32, 16, 1, 0, 132, 0, 0, 0},
        {1152, 4096, 4096, 2, 0, 0, 0, 132, 192, 9, 22, 1, 0, 132, 0, 0, 0},
        {1408, 6144, 4096, 2, 0, 0, 0, 132, 256, 11, 24, 1, 0, 132, 0, 0, 0},
        /* split-K: 2 ways over bn 128 tiles that fill at most half the SMs, 8 k-blocks a way;
           never 4 (clusters of 4 do not all fit at once: gemm_plan.h) */
        {100, 4096, 2048, 2, 0, 0, 0, 132, 128, 1, 32, 2, 0, 64, 0, 0, 0},
        {65, 4096, 8128, 2, 0, 0, 0, 132, 128, 1, 32, 2, 0, 64, 0, 0, 0},
        {100, 4096, 14336, 1, 0, 0, 0, 132, 128, 1, 32, 2, 0, 64, 0, 0, 0},
        /* ... except m 65..128 of 16-bit with >= 128 k-blocks and at most SMs / 4 tiles: the
           transposed kernel, MN 128, 64-row tiles of b, 2 ways */
        {128, 4096, 14336, 2, 0, 0, 0, 132, 128, 1, 64, 2, 128, 128, 64, 0, 0},
        {100, 4096, 14336, 2, 0, 0, 0, 132, 128, 1, 64, 2, 128, 128, 64, 0, 0},
        {100, 2048, 14336, 2, 0, 0, 0, 132, 128, 1, 32, 2, 128, 64, 64, 0, 0},
        {65, 4096, 8192, 2, 0, 0, 0, 132, 128, 1, 64, 2, 128, 128, 64, 0, 0},
        {128, 4224, 14336, 2, 0, 0, 0, 132, 128, 1, 66, 2, 128, 132, 64, 0, 0},
        {128, 4224, 14336, 2, 0, 0, 0, 128, 128, 1, 33, 2, 0, 66, 0, 0, 0}, /* 33 > 128 / 4 */
        {128, 4352, 14336, 2, 0, 0, 0, 132, 128, 1, 34, 2, 0, 68, 0, 0, 0},
        {100, 4096, 1984, 2, 0, 0, 0, 132, 128, 1, 32, 2, 0, 64, 0, 0, 0},
        {100, 4096, 1024, 2, 0, 0, 0, 132, 128, 1, 32, 2, 0, 64, 0, 0, 0},
        {100, 4096, 960, 2, 0, 0, 0, 132, 128, 1, 32, 1, 0, 32, 0, 0, 0},
        {70, 1024, 4104, 2, 0, 0, 0, 132, 128, 1, 8, 2, 0, 16, 0, 0, 0},
        {200, 4096, 4096, 2, 0, 0, 0, 132, 128, 2, 32, 2, 0, 128, 0, 0, 0},
        {64, 4096, 14336, 2, 1, 0, 0, 132, 128, 1, 64, 1, 0, 64, 0, 0, 0},
        {128, 14336, 4096, 2, 0, 0, 0, 132, 128, 1, 112, 1, 0, 112, 0, 0, 0},
        /* m <= 64, 16-bit out, not gated: the transposed kernel, MN = 16 / 32 / 64 rows of a,
           tiles of 128 or 64 rows of b and split-K 1 or 2, whichever gives the CTAs the fewest
           bytes each (the first on a tie); f32 out or gated: the normal kernel */
        {1, 14336, 4096, 2, 0, 0, 0, 132, 128, 1, 112, 1, 16, 112, 128, 0, 0},
        {16, 14336, 4096, 2, 0, 0, 0, 132, 128, 1, 112, 1, 16, 112, 128, 0, 0},
        {17, 4096, 14336, 2, 0, 0, 0, 132, 128, 1, 64, 2, 32, 128, 64, 0, 0},
        {64, 4096, 14336, 2, 0, 0, 0, 132, 128, 1, 64, 2, 64, 128, 64, 0, 0},
        {64, 4096, 4096, 2, 0, 0, 0, 132, 128, 1, 64, 2, 64, 128, 64, 0, 0},
        /* 224 tiles of 128 rows take two rounds on 132 SMs, 896 units of 64 x 2 ways seven
           rounds of a quarter the bytes */
        {1, 28672, 4096, 2, 0, 0, 0, 132, 128, 1, 448, 2, 16, 132, 64, 0, 0},
        /* 8 of 16 k-blocks a way at most */
        {16, 4096, 1024, 2, 0, 0, 0, 132, 128, 1, 64, 2, 16, 128, 64, 0, 0},
        {16, 4096, 960, 2, 0, 0, 0, 132, 128, 1, 64, 1, 16, 64, 64, 0, 0},
        {1, 8, 8, 2, 0, 0, 0, 132, 128, 1, 1, 1, 16, 1, 64, 0, 0},
        {33, 1000, 520, 2, 0, 0, 0, 132, 128, 1, 16, 1, 64, 16, 64, 0, 0},
        /* the SM count decides: 114 SMs fit 112 tiles of 128 rows in one round */
        {1, 14336, 4096, 2, 0, 0, 0, 114, 128, 1, 112, 1, 16, 112, 128, 0, 0},
        {1, 14336, 4096, 2, 0, 0, 0, 78, 128, 1, 224, 1, 16, 78, 64, 0, 0},
        {64, 4096, 14336, 2, 0, 1, 0, 132, 128, 1, 32, 2, 0, 64, 0, 0, 0},
        {64, 14336, 4096, 2, 1, 0, 0, 132, 256, 1, 112, 1, 0, 132, 0, 0, 0},
        /* fp8: a k-block is 128 elements, so split-K needs twice the k */
    {100, 4096, 1024, 1, 0, 0, 0, 132, 128, 1, 32, 1, 0, 32, 0, 0, 0},
    {100, 4096, 2048, 1, 0, 0, 0, 132, 128, 1, 32, 2, 0, 64, 0, 0, 0},
    {100, 4096, 4096, 1, 0, 0, 0, 132, 128, 1, 32, 2, 0, 64, 0, 0, 0},
    {16, 4096, 14336, 1, 0, 0, 0, 132, 128, 1, 64, 2, 16, 128, 64, 0, 0},
    {8192, 8192, 8192, 1, 0, 0, 0, 132, 128, 64, 64, 1, 0, 132, 0, 0, 1},
    /* fp8 block scales: tiles of 256 or 128 rows of b (never 192: its second half-tile
       would straddle two scale blocks); gated 256 only where n is a multiple of 128; m <= 64
       (not gated) transposed as the other types */
    {4096, 4096, 4096, 1, 0, 0, 1, 132, 256, 32, 16, 1, 0, 132, 0, 0, 0},
    {4096, 7168, 16384, 1, 0, 0, 1, 132, 256, 32, 28, 1, 0, 132, 0, 0, 0},
    {2048, 7168, 2048, 1, 0, 0, 1, 132, 128, 16, 56, 1, 0, 132, 0, 0, 0},
    {512, 6144, 4096, 1, 0, 0, 1, 132, 256, 4, 24, 1, 0, 96, 0, 0, 0},
    {16, 4096, 7168, 1, 0, 0, 1, 132, 128, 1, 64, 2, 16, 128, 64, 0, 0},
    {64, 14336, 4096, 1, 0, 0, 1, 132, 128, 1, 112, 1, 64, 112, 128, 0, 0},
    {64, 14336, 4096, 1, 1, 0, 1, 132, 256, 1, 112, 1, 0, 132, 0, 0, 0},
    {64, 14400, 4096, 1, 1, 0, 1, 132, 128, 1, 225, 1, 0, 132, 0, 0, 0},
    /* ping-pong 128 x 128 tiles in pairs: fp8 or a bias or activation (gated above), <= 64 k-blocks,
       m x b's rows <= 2^27, >= 2 tile-rows and >= 2 tiles per SM; a bias or activation past
       32 k-blocks only against cooperative tiles narrower than 256 or >= 5 of them per SM */
    {4096, 4096, 4096, 2, 0, 0, 0, 132, 256, 32, 16, 1, 0, 132, 0, 1, 0}, /* 512 < 5 x 132 */
    {4096, 4096, 4096, 2, 0, 0, 0, 100, 128, 32, 32, 1, 0, 100, 0, 1, 1}, /* 512 >= 5 x 100 */
    {4096, 6144, 4096, 2, 0, 0, 0, 132, 128, 32, 48, 1, 0, 132, 0, 1, 1}, /* 768 >= 5 x 132 */
    {4096, 4096, 2048, 2, 0, 0, 0, 132, 128, 32, 32, 1, 0, 132, 0, 1, 1}, /* 32 k-blocks */
    /* a residual alone: ping-pong up to 32 k-blocks only */
    {4096, 4096, 4096, 2, 0, 0, 0, 132, 256, 32, 16, 1, 0, 132, 0, 2, 0},
    {4096, 4096, 2048, 2, 0, 0, 0, 132, 128, 32, 32, 1, 0, 132, 0, 2, 1},
    {4096, 4096, 2056, 2, 0, 0, 0, 132, 256, 32, 16, 1, 0, 132, 0, 2, 0},
    {4096, 4096, 4096, 2, 0, 1, 0, 132, 256, 32, 16, 1, 0, 132, 0, 1, 0},
    {4096, 6144, 4096, 2, 0, 1, 0, 132, 128, 32, 48, 1, 0, 132, 0, 1, 1},
    {4096, 4096, 4160, 2, 0, 0, 0, 132, 256, 32, 16, 1, 0, 132, 0, 1, 0},
    {4096, 4096, 14336, 2, 0, 0, 0, 132, 256, 32, 16, 1, 0, 132, 0, 1, 0},
    {4096, 4096, 8192, 1, 0, 0, 0, 132, 128, 32, 32, 1, 0, 132, 0, 0, 1},
    {4096, 4096, 8320, 1, 0, 0, 0, 132, 256, 32, 16, 1, 0, 132, 0, 0, 0},
    {4096, 32768, 4096, 2, 0, 0, 0, 132, 128, 32, 256, 1, 0, 132, 0, 1, 1},
    {4096, 32776, 4096, 2, 0, 0, 0, 132, 256, 32, 129, 1, 0, 132, 0, 1, 0},
    {16384, 28672, 4096, 2, 0, 0, 0, 132, 256, 128, 112, 1, 0, 132, 0, 1, 0},
    {512, 28672, 4096, 2, 0, 0, 0, 132, 128, 4, 224, 1, 0, 132, 0, 1, 1},
    {512, 6144, 4096, 2, 0, 0, 0, 132, 192, 4, 32, 1, 0, 128, 0, 1, 0},
    {128, 14336, 4096, 2, 0, 0, 0, 132, 128, 1, 112, 1, 0, 112, 0, 1, 0},
    {384, 28672, 4096, 2, 1, 0, 0, 132, 128, 3, 448, 1, 0, 132, 0, 1, 1},
};
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        talon__gemm_plan pl;
        talon__gemm_plan_make(rows[i].m, rows[i].n, rows[i].k, rows[i].in_size, rows[i].gated,
                              rows[i].out_f32, rows[i].block, rows[i].epilogue, rows[i].sms, &pl);
        if (pl.bn != rows[i].bn || pl.tiles_m != rows[i].tiles_m ||
            pl.pingpong != rows[i].pingpong ||
            pl.tiles_n != rows[i].tiles_n || pl.split != rows[i].split ||
            pl.swap_mn != rows[i].swap_mn || pl.grid != rows[i].grid || pl.group != 16 ||
            (pl.swap_mn && pl.swap_rows != rows[i].swap_rows))
            fail_msg("row %zu (m %lld n %lld k %lld in_size %d gated %d block %d epilogue %d "
                     "sms %d): bn %d tiles %d x %d split %d swap %d grid %d group %d swap_rows %d "
                     "pingpong %d", i, (long long)rows[i].m, (long long)rows[i].n,
                     (long long)rows[i].k, rows[i].in_size, rows[i].gated, rows[i].block,
                     rows[i].epilogue, rows[i].sms, pl.bn, pl.tiles_m, pl.tiles_n, pl.split,
                     pl.swap_mn, pl.grid, pl.group, pl.swap_rows, pl.pingpong);
    }
}

/* ================================================================ launches */
typedef struct gemm_launch_row {
    const char *name;
    field_set set[MAX_SETS];
    const char *symbol;
    int grid, tiles_m, tiles_n;
} gemm_launch_row;

#define LAUNCH(NAME, SETS, SYM, GRID, TM, TN) {"gemm: " NAME, SETS, SYM, GRID, TM, TN}
static const gemm_launch_row launch_rows[] = {
    LAUNCH("bf16 4096^3", NONE, "talon_gemm_bf16_256", 132, 32, 16),
    LAUNCH("bf16 -> f32", ONE(G(out_dtype, ENUM, TALON_DTYPE_F32)), "talon_gemm_bf16_f32_256",
           132, 32, 16),
    LAUNCH("f16", ONE(G(dtype, ENUM, TALON_DTYPE_F16), G(out_dtype, ENUM, TALON_DTYPE_F16)),
           "talon_gemm_f16_256", 132, 32, 16),
    LAUNCH("f16 -> f32, m 100 n 8192 -> 128, split-K 2", ONE(G(dtype, ENUM, TALON_DTYPE_F16),
           G(out_dtype, ENUM, TALON_DTYPE_F32), G(m, I64, 100), G(n, I64, 8192)),
           "talon_gemm_f16_f32_128_split2", 128, 1, 64),
    LAUNCH("bf16 m 100 n 4096 k 8128 -> split-K 2", ONE(G(m, I64, 100), G(k, I64, 8128)),
           "talon_gemm_bf16_128_split2", 64, 1, 32),
    LAUNCH("bf16 m 100 n 4096 k 14336 -> transposed, MN 128, 64-row tiles, split-K 2",
           ONE(G(m, I64, 100), G(k, I64, 14336)), "talon_gemm_swap_bf16_m128_rows64_split2", 128,
           1, 64),
    LAUNCH("f16 m 65 n 2056 k 8192 -> transposed, MN 128, 64-row tiles, split-K 2",
           ONE(G(m, I64, 65), G(n, I64, 2056), G(k, I64, 8192), G(dtype, ENUM, TALON_DTYPE_F16),
               G(out_dtype, ENUM, TALON_DTYPE_F16)), "talon_gemm_swap_f16_m128_rows64_split2", 66,
           1, 33),
    LAUNCH("bf16 decode m 16 n 4096 k 14336 -> transposed, MN 16, 64-row tiles, split-K 2",
           ONE(G(m, I64, 16), G(k, I64, 14336)), "talon_gemm_swap_bf16_m16_rows64_split2", 128,
           1, 64),
    LAUNCH("f16 decode m 40 n 14336 -> transposed, MN 64", ONE(G(m, I64, 40), G(n, I64, 14336),
           G(dtype, ENUM, TALON_DTYPE_F16), G(out_dtype, ENUM, TALON_DTYPE_F16)),
           "talon_gemm_swap_f16_m64", 112, 1, 112),
    LAUNCH("bf16 m 16 -> f32: not transposed", ONE(G(m, I64, 16),
           G(out_dtype, ENUM, TALON_DTYPE_F32)), "talon_gemm_bf16_f32_128_split2", 64, 1, 32),
    LAUNCH("bf16 m 512 -> 128-wide tiles", ONE(G(m, I64, 512)), "talon_gemm_bf16_128", 128, 4,
           32),
    LAUNCH("bf16 m 512 n 6144 -> 192-wide tiles", ONE(G(m, I64, 512), G(n, I64, 6144)),
           "talon_gemm_bf16_192", 128, 4, 32),
    LAUNCH("gated SwiGLU m 4096 n 14336 -> ping-pong", ONE(G(gated, INT, 1), G(n, I64, 14336),
           G(act, ENUM, TALON_GEMM_ACT_SILU)), "talon_gemm_bf16_gated_pingpong", 132, 32, 224),
    LAUNCH("gated SwiGLU m 16384 n 14336 -> 256 (too large for ping-pong)",
           ONE(G(gated, INT, 1), G(m, I64, 16384), G(n, I64, 14336),
           G(act, ENUM, TALON_GEMM_ACT_SILU)), "talon_gemm_bf16_gated_256", 132, 128, 112),
    LAUNCH("gated m 1 n 4096 -> 128", ONE(G(gated, INT, 1), G(m, I64, 1)),
           "talon_gemm_bf16_gated_128", 64, 1, 64),
    LAUNCH("bias, residual in place, alpha, beta, n 6144 -> ping-pong",
           ONE(G(bias, PTR, P_BIAS), G(n, I64, 6144), G(c, PTR, P_D), G(alpha, F32, 0.25),
           G(beta, F32, -2)), "talon_gemm_bf16_pingpong", 132, 32, 48),
    LAUNCH("bias + GELU 4096^3 -> 256 (cooperative: 3.9 tiles an SM)",
           ONE(G(bias, PTR, P_BIAS), G(act, ENUM, TALON_GEMM_ACT_GELU_ERF)), "talon_gemm_bf16_256",
           132, 32, 16),
    LAUNCH("residual alone in place, k 4096 -> 256 (cooperative)", ONE(G(c, PTR, P_D)),
           "talon_gemm_bf16_256", 132, 32, 16),
    LAUNCH("residual alone, k 2048 -> ping-pong", ONE(G(c, PTR, P_D), G(k, I64, 2048)),
           "talon_gemm_bf16_pingpong", 132, 32, 32),
    LAUNCH("fp8 4096^3, tensor scales -> ping-pong", FP8(G(bias, PTR, P_BIAS)),
           "talon_gemm_e4m3_pingpong", 132, 32, 32),
    LAUNCH("fp8 k 14336 -> 256 (too many k-blocks for ping-pong)", FP8(G(k, I64, 14336)),
           "talon_gemm_e4m3_256", 132, 32, 16),
    LAUNCH("fp8 row scales, gated -> ping-pong", FP8_ROW(G(gated, INT, 1)),
           "talon_gemm_e4m3_gated_pingpong", 132, 32, 64),
    LAUNCH("fp8 m 100 n 4096 k 2048 -> split-K 2 (8 k-blocks of 128 a way)",
           FP8(G(m, I64, 100), G(k, I64, 2048)), "talon_gemm_e4m3_128_split2", 64, 1, 32),
    LAUNCH("fp8 block scales 4096^3 -> 256-wide tiles in pairs", FP8_BLOCK(G(bias, PTR, P_BIAS)),
           "talon_gemm_e4m3_block_256", 132, 32, 16),
    LAUNCH("fp8 block scales m 2048 n 7168 -> 128-wide tiles (fewer waves)",
           FP8_BLOCK(G(m, I64, 2048), G(n, I64, 7168)),
           "talon_gemm_e4m3_block_128", 132, 16, 56),
    LAUNCH("fp8 block scales m 16 k 7168 -> transposed, MN 16, 64-row tiles, split-K 2",
           FP8_BLOCK(G(m, I64, 16), G(k, I64, 7168)),
           "talon_gemm_swap_e4m3_block_m16_rows64_split2", 128, 1, 64),
    LAUNCH("fp8 block scales m 100 k 7168 -> split-K 2",
           FP8_BLOCK(G(m, I64, 100), G(k, I64, 7168)), "talon_gemm_e4m3_block_128_split2", 64,
           1, 32),
    LAUNCH("fp8 block scales, gated", FP8_BLOCK(G(gated, INT, 1)), "talon_gemm_e4m3_block_gated_256",
           132, 32, 32),
    LAUNCH("fp8 block scales, gated, n 4160 (not a multiple of 128) -> 128 rows of b",
           FP8_BLOCK(G(gated, INT, 1), G(n, I64, 4160)), "talon_gemm_e4m3_block_gated_128", 132,
           32, 65),
    LAUNCH("fp8 decode m 16 k 14336, row scales -> transposed, MN 16, 64-row tiles, split-K 2",
           FP8_ROW(G(m, I64, 16), G(k, I64, 14336)),
           "talon_gemm_swap_e4m3_m16_rows64_split2", 128, 1, 64),
};

static void test_launch(void **state) {
    const gemm_launch_row *row = (const gemm_launch_row *)*state;
    const talon__gemm_params *p;
    talon_gemm_args a;
    CUdeviceptr map_base;
    int64_t ld_b;
    int in_size;
    CUtensorMapDataType in_type;
    valid_args(&a);
    apply_sets(&a, row->set, MAX_SETS);
    in_size = a.dtype == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
    in_type = a.dtype == TALON_DTYPE_FP8_E4M3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
              : a.dtype == TALON_DTYPE_F16    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                              : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    assert_int_equal(talon_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.load_calls[TALON__IMG_gemm], 1);
    assert_int_equal(fake.launches, 1);
    assert_int_equal(fake.last.fn, fake_handle_for(row->symbol));
    assert_int_equal(fake.last.grid[0], row->grid);
    assert_int_equal(fake.last.grid[1], 1);
    /* a producer warpgroup and one consumer warpgroup per 64 rows of b (the transposed kernel's
       64-row tiles: one) */
    assert_int_equal(fake.last.block[0], strstr(row->symbol, "_rows64") ? 256 : 384);
    assert_int_equal(fake.last.smem, talon__kernels[kernel_index(row->symbol)].smem);
    assert_int_equal(fake.last.param_size, sizeof(talon__gemm_params));
    p = (const talon__gemm_params *)fake.last.params;
    assert_int_equal(p->d, a.d);
    assert_int_equal(p->c, a.c);
    assert_int_equal(p->bias, a.bias);
    assert_int_equal(p->ldd, a.n);
    assert_int_equal(p->ldc, a.c ? a.n : 0);
    assert_int_equal(p->m, a.m);
    assert_int_equal(p->n, a.n);
    assert_int_equal(p->k, a.k);
    assert_int_equal(p->tiles_m, row->tiles_m);
    assert_int_equal(p->tiles_n, row->tiles_n);
    assert_int_equal(p->group, 16);
    assert_int_equal(p->act, (int)a.act);
    assert_true(p->alpha == (a.alpha != 0.0f ? a.alpha : 1.0f));
    assert_true(p->beta == (a.beta != 0.0f ? a.beta : 1.0f));
    assert_int_equal(p->a_scale, a.a_scale);
    assert_int_equal(p->b_scale, a.b_scale);
    assert_int_equal(p->a_scale_step, a.scale == TALON_GEMM_SCALE_ROW);
    assert_int_equal(p->b_scale_step, a.scale == TALON_GEMM_SCALE_ROW);
    assert_int_equal(p->a_scale_ld, a.scale == TALON_GEMM_SCALE_BLOCK ? (a.m + 3) / 4 * 4 : 0);
    assert_int_equal(p->b_scale_ld, a.scale == TALON_GEMM_SCALE_BLOCK ? (a.k + 127) / 128 : 0);
    /* the fake encoder writes each map's base address into its first 8 bytes */
    ld_b = a.ldb ? a.ldb : a.k;
    memcpy(&map_base, &p->a, sizeof map_base);
    assert_int_equal(map_base, a.a);
    memcpy(&map_base, &p->b_lo, sizeof map_base);
    assert_int_equal(map_base, a.b);
    memcpy(&map_base, &p->b_hi, sizeof map_base);
    assert_int_equal(map_base, a.gated ? a.b + (CUdeviceptr)(a.n * ld_b * in_size) : a.b);
    memcpy(&map_base, &p->d_map, sizeof map_base);
    assert_int_equal(map_base, a.d);
    assert_int_equal(fake.encodes, a.gated ? 4 : 3);
    {   /* a: [m, k], boxes 128 bytes x 128 rows; b (each half when gated): [n, k], 128 bytes x
           bn / 2 rows */
        const int swap_mn = !strstr(row->symbol, "swap")     ? 0
                            : strstr(row->symbol, "_m16") ? 16
                            : strstr(row->symbol, "_m32") ? 32
                            : strstr(row->symbol, "_m128") ? 128 : 64;
        const int bn = swap_mn ? (strstr(row->symbol, "_rows64") ? 128 : 256) /* boxes: rows */
                       : strstr(row->symbol, "_256") ? 256 : strstr(row->symbol, "_192") ? 192 : 128;
        const int nb = a.gated ? 2 : 1;
        const int64_t ld_a = a.lda ? a.lda : a.k;
        int i;
        assert_int_equal(fake.enc_log[0].dims[0], a.k);
        assert_int_equal(fake.enc_log[0].dims[1], a.m);
        assert_int_equal(fake.enc_log[0].strides[0], ld_a * in_size);
        assert_int_equal(fake.enc_log[0].box[0], 128 / in_size);
        assert_int_equal(fake.enc_log[0].type, in_type);
        assert_int_equal(fake.enc_log[0].box[1], swap_mn ? swap_mn : 128);
        for (i = 1; i <= nb; i++) {
            assert_ptr_equal(fake.enc_log[i].addr,
                             (void *)(uintptr_t)(a.b + (CUdeviceptr)((i - 1) * a.n * ld_b * in_size)));
            assert_int_equal(fake.enc_log[i].dims[0], a.k);
            assert_int_equal(fake.enc_log[i].dims[1], a.n);
            assert_int_equal(fake.enc_log[i].strides[0], ld_b * in_size);
            assert_int_equal(fake.enc_log[i].box[0], 128 / in_size);
            assert_int_equal(fake.enc_log[i].type, in_type);
            assert_int_equal(fake.enc_log[i].box[1], bn / 2);
            assert_int_equal(fake.enc_log[i].swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
        }
    }
    /* the last map encoded: d, [m, n] of the output type, 128-byte swizzled boxes of 128 bytes
       x 64 rows */
    assert_int_equal(fake.enc.rank, 2);
    assert_int_equal(fake.enc.dims[0], a.n);
    assert_int_equal(fake.enc.dims[1], a.m);
    assert_int_equal(fake.enc.strides[0], a.n * (a.out_dtype == TALON_DTYPE_F32 ? 4 : 2));
    assert_int_equal(fake.enc.box[0], a.out_dtype == TALON_DTYPE_F32 ? 32 : 64);
    assert_int_equal(fake.enc.box[1], strstr(row->symbol, "swap") ? (a.m <= 16 ? 16 : a.m <= 32 ? 32 : 64) : 64);
    assert_int_equal(fake.enc.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
    assert_int_equal(fake.enc.type, a.out_dtype == TALON_DTYPE_F32  ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                    : a.out_dtype == TALON_DTYPE_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
}

/* Strided views: the strides reach the maps and the params. */
static void test_strides(void **state) {
    talon_gemm_args a;
    const talon__gemm_params *p;
    (void)state;
    valid_args(&a);
    a.m = 7; a.n = 72; a.k = 24; a.lda = 40; a.ldb = 32; a.ldd = 80; a.c = P_C; a.ldc = 96;
    assert_int_equal(talon_gemm(g_ctx, STREAM, &a), TALON_SUCCESS);
    p = (const talon__gemm_params *)fake.last.params;
    assert_int_equal(p->ldd, 80);
    assert_int_equal(p->ldc, 96);
    assert_int_equal(fake.enc.strides[0], 80 * 2); /* d, encoded last */
    assert_int_equal(fake.enc.dims[0], 72);
    assert_int_equal(fake.enc.dims[1], 7);
}

/* ================================================================ main */
int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    test_add("gemm: accepts the edges", test_accepts_edges, NULL);
    test_add("gemm: a failed tensor map encode", test_encode_failure, NULL);
    test_add("gemm: plan", test_plan, NULL);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        test_add(launch_rows[i].name, test_launch, &launch_rows[i]);
    test_add("gemm: strided views", test_strides, NULL);
    return test_run("test_gemm");
}
