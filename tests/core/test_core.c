/* Dispatcher tests on a fake CUDA driver (no GPU) for the norms and gated activations, and
   what every op shares: context creation, module loading, argument validation, kernel
   selection and the exact launch each op makes. */
#include "fake_driver.h"
#include "table_rows.h"
/* ---------------------------------------------------------------- ops, generically */
typedef enum { OP_RMSNORM, OP_FUSED_ADD_RMSNORM, OP_LAYERNORM, OP_SILU, OP_GELU } op_id;
static const char *const op_names[] = {"talon_rmsnorm", "talon_fused_add_rmsnorm",
                                       "talon_layernorm", "talon_silu_and_mul",
                                       "talon_gelu_and_mul"};

typedef union op_args {
    talon_rmsnorm_args rms;
    talon_fused_add_rmsnorm_args fadd;
    talon_layernorm_args ln;
    talon_silu_and_mul_args silu;
    talon_gelu_and_mul_args gelu;
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
    case OP_RMSNORM: return talon_rmsnorm(ctx, s, a ? &a->rms : NULL);
    case OP_FUSED_ADD_RMSNORM: return talon_fused_add_rmsnorm(ctx, s, a ? &a->fadd : NULL);
    case OP_LAYERNORM: return talon_layernorm(ctx, s, a ? &a->ln : NULL);
    case OP_SILU: return talon_silu_and_mul(ctx, s, a ? &a->silu : NULL);
    case OP_GELU: return talon_gelu_and_mul(ctx, s, a ? &a->gelu : NULL);
    }
    return TALON__STATUS_COUNT;
}

/* One field edit of a table row, by offset into the op's args struct. */
#define RMS(f, k, v) SET(talon_rmsnorm_args, f, k, v)
#define FADD(f, k, v) SET(talon_fused_add_rmsnorm_args, f, k, v)
#define LN(f, k, v) SET(talon_layernorm_args, f, k, v)
#define SILU(f, k, v) SET(talon_silu_and_mul_args, f, k, v)
#define GELU(f, k, v) SET(talon_gelu_and_mul_args, f, k, v)

_Static_assert(sizeof(talon_dtype) == sizeof(int) && sizeof(talon_gelu_approx) == sizeof(int),
               "SET_ENUM writes an int");

/* ================================================================ 1-3: context creation */
static void test_no_driver(void **state) {
    static const talon__driver none = {0};
    talon_ctx *ctx = (talon_ctx *)(uintptr_t)0x1; /* must be overwritten */
    talon__driver d;
    (void)state;
    talon__driver_fake = &none;
    assert_int_equal(talon_ctx_create(&ctx, NULL), TALON_ERROR_NO_DRIVER);
    assert_null(ctx);
    assert_contains(talon_last_error(), "libcuda");

    memset(&d, 0xff, sizeof d); /* open must clear, not just fail to set */
    talon__driver_open("libdoes-not-exist.so.9", &d);
    assert_int_equal(d.loaded, 0);
    assert_null(d.cuInit);
}

typedef struct cc_row { const char *name; int major, minor; const char *sm; } cc_row;
static const cc_row cc_rows[] = {
    {"ctx_create rejects sm_80 (A100)", 8, 0, "sm_80"},
    {"ctx_create rejects sm_91", 9, 1, "sm_91"},
    {"ctx_create rejects sm_100 (B200)", 10, 0, "sm_100"},
};

static void test_unsupported_device(void **state) {
    const cc_row *row = (const cc_row *)*state;
    talon_ctx *ctx = g_ctx; /* non-NULL: must be overwritten */
    fake.major = row->major;
    fake.minor = row->minor;
    fake.name = "NVIDIA Fake-GPU 80GB";
    assert_int_equal(talon_ctx_create(&ctx, NULL), TALON_ERROR_UNSUPPORTED_DEVICE);
    assert_null(ctx);
    assert_contains(talon_last_error(), "NVIDIA Fake-GPU 80GB");
    assert_token(talon_last_error(), row->sm);
}

static void test_create_invalid_arguments(void **state) {
    talon_ctx_options bad_flags = {NULL, 2};
    talon_ctx *ctx = g_ctx;
    (void)state;
    assert_int_equal(talon_ctx_create(NULL, NULL), TALON_ERROR_INVALID_ARGUMENT);
    assert_token(talon_last_error(), "out");

    assert_int_equal(talon_ctx_create(&ctx, &bad_flags), TALON_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_contains(talon_last_error(), "flags");

    fake.current = NULL;
    ctx = g_ctx;
    assert_int_equal(talon_ctx_create(&ctx, NULL), TALON_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_contains(talon_last_error(), "context");
}

/* An explicit options->context needs none current and is the one modules load into. */
static void test_create_explicit_context(void **state) {
    CUcontext other = (CUcontext)(uintptr_t)0xD0D0;
    talon_ctx_options o = {other, 0};
    talon_ctx *ctx = NULL;
    op_args a;
    (void)state;
    fake.current = NULL;
    assert_int_equal(talon_ctx_create(&ctx, &o), TALON_SUCCESS);
    assert_non_null(ctx);
    valid_args(OP_RMSNORM, &a);
    assert_int_equal(call_op(OP_RMSNORM, ctx, STREAM, &a), TALON_SUCCESS);
    assert_ptr_equal(fake.last_pushed, other);
    talon_ctx_destroy(ctx);
}

/* ================================================================ 4: module load failure */
static const CUresult load_errors[] = {CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_INVALID_IMAGE};
static const char *const load_error_names[] = {"CUDA_ERROR_NO_BINARY_FOR_GPU",
                                               "CUDA_ERROR_INVALID_IMAGE"};

static void test_module_load_failure_lazy(void **state) {
    int e = (int)(intptr_t)*state;
    op_args a;
    fake.load_result = load_errors[e];
    valid_args(OP_RMSNORM, &a);
    assert_int_equal(call_op(OP_RMSNORM, g_ctx, STREAM, &a), TALON_ERROR_MODULE_LOAD);
    assert_token(talon_last_error(), load_error_names[e]);
    assert_contains(talon_last_error(), "driver");
    assert_contains(talon_last_error(), "CUDA " TALON__BUNDLE_CUDA); /* what the cubins need */
    assert_contains(talon_last_error(), "CUDA 12.4");                /* what the driver has */
    assert_int_equal(fake.load_calls[TALON__IMG_norm], 1);
    assert_int_equal(fake.launches, 0);
}

static void test_module_load_failure_preload(void **state) {
    int e = (int)(intptr_t)*state;
    talon_ctx_options o = {NULL, TALON_CTX_PRELOAD};
    talon_ctx *ctx = g_ctx;
    fake.load_result = load_errors[e];
    assert_int_equal(talon_ctx_create(&ctx, &o), TALON_ERROR_MODULE_LOAD);
    assert_null(ctx);
    assert_token(talon_last_error(), load_error_names[e]);
    assert_int_equal(fake.launches, 0);
}

/* The second image failing must not leak the first one (teardown checks all are unloaded). */
static void test_preload_second_image_fails(void **state) {
    talon_ctx_options o = {NULL, TALON_CTX_PRELOAD};
    talon_ctx *ctx = g_ctx;
    (void)state;
    fake.load_result = CUDA_ERROR_INVALID_IMAGE;
    fake.load_fail_image = TALON__IMG_act;
    assert_int_equal(talon_ctx_create(&ctx, &o), TALON_ERROR_MODULE_LOAD);
    assert_null(ctx);
    assert_int_equal(fake.load_calls[TALON__IMG_norm], 1);
    assert_int_equal(fake.load_calls[TALON__IMG_act], 1);
    assert_int_equal(fake_loaded_modules(), 0);
}

/* A symbol missing from an image fails the load; kernels resolved before it in the same image
   belong to the module talon unloads, so none of them may be launched afterwards. */
static void test_partial_resolve_publishes_nothing(void **state) {
    op_args a;
    (void)state;
    fake.getfn_fail_symbol = "talon_layernorm_f16_v8_b128"; /* last of the norm image */
    valid_args(OP_RMSNORM, &a);
    assert_int_equal(call_op(OP_RMSNORM, g_ctx, STREAM, &a), TALON_ERROR_MODULE_LOAD);
    assert_contains(talon_last_error(), "talon_layernorm_f16_v8_b128");
    assert_int_equal(fake_loaded_modules(), 0);
    assert_int_equal(call_op(OP_RMSNORM, g_ctx, STREAM, &a), TALON_ERROR_MODULE_LOAD);
    assert_int_equal(fake.stale_launches, 0);
    assert_int_equal(fake.launches, 0);
}

/* ================================================================ 5: validation */

#define BAD(NAME, OP, SETS, FIELD, VALUE)                                                       \
    {.name = NAME, .op = OP, .kind = BAD_FIELDS, .set = SETS, .field = FIELD, .value = VALUE}
/* Rules every op shares; COLS_BIG is one past its largest cols. */
#define COMMON_BAD(OP, T, N, COLS_BIG)                                                         \
    {.name = N " rejects ctx NULL", .op = OP, .kind = BAD_CTX, .field = "ctx", .value = "NULL"}, \
    {.name = N " rejects args NULL", .op = OP, .kind = BAD_ARGS, .field = "args", .value = "NULL"}, \
    BAD(N " rejects rows = 0", OP, ONE(SET(T, rows, I64, 0)), "args->rows", "0"),              \
    BAD(N " rejects rows = -1", OP, ONE(SET(T, rows, I64, -1)), "args->rows", "-1"),           \
    BAD(N " rejects rows = 2^31", OP, ONE(SET(T, rows, I64, 2147483648)), "args->rows",        \
        "2147483648"),                                                                         \
    BAD(N " rejects cols = 0", OP, ONE(SET(T, cols, I64, 0)), "args->cols", "0"),              \
    BAD(N " rejects cols = -1", OP, ONE(SET(T, cols, I64, -1)), "args->cols", "-1"),           \
    BAD(N " rejects cols = " #COLS_BIG, OP, ONE(SET(T, cols, I64, COLS_BIG)), "args->cols",    \
        #COLS_BIG),                                                                            \
    BAD(N " rejects dtype F32", OP, ONE(SET(T, dtype, ENUM, TALON_DTYPE_F32)), "args->dtype",  \
        "2"),                                                                                  \
    BAD(N " rejects dtype = 7", OP, ONE(SET(T, dtype, ENUM, 7)), "args->dtype", "7")
#define ODD_PTR_BAD(OP, T, N, F)                                                               \
    BAD(N " rejects odd " #F, OP, ONE(SET(T, F, PTR, 0x7001)), "args->" #F, "0x7001")
#define PTR_BAD(OP, T, N, F)                                                                   \
    BAD(N " rejects " #F " NULL", OP, ONE(SET(T, F, PTR, 0)), "args->" #F, "NULL"),            \
    ODD_PTR_BAD(OP, T, N, F)
#define STRIDE_BAD(OP, T, N, F, V)                                                             \
    BAD(N " rejects " #F " = " #V " (shorter than a row)", OP, ONE(SET(T, F, I64, V)),         \
        "args->" #F, #V)
/* Gated ops: chunks per row is ceil(cols / 2048) on the 16-byte path, ceil(cols / 256) off it. */
#define GATED_BAD(OP, T, N)                                                                    \
    COMMON_BAD(OP, T, N, 2305843009213693952), PTR_BAD(OP, T, N, out), PTR_BAD(OP, T, N, in),  \
    STRIDE_BAD(OP, T, N, out_stride, 4095), STRIDE_BAD(OP, T, N, in_stride, 8191),             \
    STRIDE_BAD(OP, T, N, in_stride, 4096),                                                     \
    BAD(N " rejects a grid over 2^31-1 blocks (16-byte path)", OP,                             \
        ONE(SET(T, rows, I64, 2147483647), SET(T, cols, I64, 4096)), "args->rows",             \
        "2147483647"),                                                                         \
    BAD(N " rejects a grid over 2^31-1 blocks (element-wise)", OP,                             \
        ONE(SET(T, rows, I64, 16777216), SET(T, cols, I64, 32769)), "args->rows", "16777216")

_Static_assert(COLS == 4096, "the stride rows below spell out COLS - 1 and 2 * COLS - 1");

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

    GATED_BAD(OP_SILU, talon_silu_and_mul_args, "talon_silu_and_mul"),
    GATED_BAD(OP_GELU, talon_gelu_and_mul_args, "talon_gelu_and_mul"),
    BAD("talon_gelu_and_mul rejects approx = 2", OP_GELU, ONE(GELU(approx, ENUM, 2)),
        "args->approx", "2"),
    BAD("talon_gelu_and_mul rejects approx = -1", OP_GELU, ONE(GELU(approx, ENUM, -1)),
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

/* ================================================================ 6: launch configuration */

#define LAUNCH(NAME, OP, SETS, SYM) {.name = NAME, .op = OP, .set = SETS, .symbol = SYM}
static const launch_row launch_rows[] = {
    LAUNCH("talon_rmsnorm bf16 contiguous, 4096 cols -> _v8_b128", OP_RMSNORM, NONE,
           "talon_rmsnorm_bf16_v8_b128"),
    LAUNCH("talon_rmsnorm bf16 4104 cols -> _v8 (256 threads)", OP_RMSNORM,
           ONE(RMS(cols, I64, 4104)), "talon_rmsnorm_bf16_v8"),
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
    LAUNCH("talon_layernorm f16 without bias -> _v8", OP_LAYERNORM,
           ONE(LN(dtype, ENUM, TALON_DTYPE_F16), LN(bias, PTR, 0)), "talon_layernorm_f16_v8_b128"),
    LAUNCH("talon_layernorm bias misaligned by 2 -> element-wise", OP_LAYERNORM,
           ONE(LN(bias, PTR, P_BIAS + 2)), "talon_layernorm_bf16"),
    LAUNCH("talon_layernorm out_stride 4097 -> element-wise", OP_LAYERNORM,
           ONE(LN(out_stride, I64, 4097)), "talon_layernorm_bf16"),

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
   strides 0 mean a row, fused_add_rmsnorm writes in place, gated ops split rows into chunks
   of block * vec elements. Returns the grid size. */
static int64_t expected_launch(op_id op, const op_args *a, const char *symbol, void *params) {
    talon__norm_params *n = (talon__norm_params *)params;
    talon__act_params *g = (talon__act_params *)params;
    const talon_silu_and_mul_args *s = &a->silu;
    talon_silu_and_mul_args gelu_as_silu;
    int64_t per_chunk = 256 * (strstr(symbol, "_v8") ? 8 : 1);
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
    case OP_GELU:
        gelu_as_silu.out = a->gelu.out; gelu_as_silu.in = a->gelu.in;
        gelu_as_silu.rows = a->gelu.rows; gelu_as_silu.cols = a->gelu.cols;
        gelu_as_silu.out_stride = a->gelu.out_stride; gelu_as_silu.in_stride = a->gelu.in_stride;
        s = &gelu_as_silu;
        /* fall through */
    case OP_SILU:
        g->out = s->out; g->in = s->in; g->cols = s->cols;
        g->out_stride = s->out_stride ? s->out_stride : s->cols;
        g->in_stride = s->in_stride ? s->in_stride : 2 * s->cols;
        g->chunks = (s->cols + per_chunk - 1) / per_chunk;
        return s->rows * g->chunks;
    }
    return -1;
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    int k = kernel_index(row->symbol);
    unsigned char want[128];
    int64_t grid;
    op_args a;
    assert_true(k >= 0);
    valid_args(row->op, &a);
    apply_sets(&a, row->set, MAX_SETS);
    assert_int_equal(call_op(row->op, g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 1);
    if (fake.last.fn != fake_handle_for(row->symbol))
        fail_msg("launched %s, expected %s",
                 talon__kernels[fake.fns[FN_INDEX(fake.last.fn)].kernel].symbol, row->symbol);
    grid = expected_launch(row->op, &a, row->symbol, want);
    assert_int_equal(fake.last.grid[0], grid);
    assert_int_equal(fake.last.grid[1], 1);
    assert_int_equal(fake.last.grid[2], 1);
    assert_int_equal(fake.last.block[0], talon__kernels[k].block);
    assert_int_equal(talon__kernels[k].block, strstr(row->symbol, "_b128") ? 128 : 256);
    assert_int_equal(fake.last.block[1], 1);
    assert_int_equal(fake.last.block[2], 1);
    assert_int_equal(fake.last.smem, talon__kernels[k].smem);
    assert_ptr_equal(fake.last.stream, STREAM);
    assert_null(fake.last.extra);
    assert_int_equal(fake.last.param_size,
                     row->op <= OP_LAYERNORM ? sizeof(talon__norm_params)
                                             : sizeof(talon__act_params));
    assert_memory_equal(fake.last.params, want, fake.last.param_size);
}

/* ================================================================ 7: concurrent first use */
#define NTHREADS 8
static pthread_barrier_t race_barrier;

static void *race_rmsnorm(void *arg) {
    op_args a;
    valid_args(OP_RMSNORM, &a);
    pthread_barrier_wait(&race_barrier);
    *(talon_status *)arg = call_op(OP_RMSNORM, g_ctx, STREAM, &a);
    return NULL;
}

static void test_concurrent_first_use(void **state) {
    pthread_t t[NTHREADS];
    talon_status s[NTHREADS];
    op_args a;
    int i;
    (void)state;
    pthread_barrier_init(&race_barrier, NULL, NTHREADS);
    for (i = 0; i < NTHREADS; i++) {
        s[i] = TALON__STATUS_COUNT;
        assert_int_equal(pthread_create(&t[i], NULL, race_rmsnorm, &s[i]), 0);
    }
    for (i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&race_barrier);
    for (i = 0; i < NTHREADS; i++) assert_int_equal(s[i], TALON_SUCCESS);
    assert_int_equal(fake.load_calls[TALON__IMG_norm], 1);
    assert_int_equal(fake.load_calls[TALON__IMG_act], 0);
    assert_int_equal(fake.launches, NTHREADS);

    valid_args(OP_SILU, &a);
    assert_int_equal(call_op(OP_SILU, g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.load_calls[TALON__IMG_act], 1);
    assert_int_equal(fake.load_calls[TALON__IMG_norm], 1);
    assert_int_equal(fake.launches, NTHREADS + 1);
}

/* ================================================================ 8: stream capture */
static void test_capture_needs_preload(void **state) {
    op_args a;
    int i;
    (void)state;
    valid_args(OP_LAYERNORM, &a);
    fake.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(call_op(OP_LAYERNORM, g_ctx, STREAM, &a), TALON_ERROR_NOT_LOADED);
    assert_contains(talon_last_error(), "talon_ctx_preload");
    assert_int_equal(fake.load_calls[TALON__IMG_norm] + fake.load_calls[TALON__IMG_act], 0);
    assert_int_equal(fake.launches, 0);

    assert_int_equal(talon_ctx_preload(g_ctx), TALON_SUCCESS);
    assert_int_equal(talon_ctx_preload(g_ctx), TALON_SUCCESS); /* idempotent */
    for (i = 0; i < TALON__NUM_IMAGES; i++) assert_int_equal(fake.load_calls[i], 1);

    fake.capturing_calls = 0;
    assert_int_equal(call_op(OP_LAYERNORM, g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 1);
    assert_int_equal(fake.capturing_calls, 0); /* the loaded path makes no extra driver call */
}

static void test_preload_null_ctx(void **state) {
    (void)state;
    assert_int_equal(talon_ctx_preload(NULL), TALON_ERROR_INVALID_ARGUMENT);
    assert_token(talon_last_error(), "ctx");
}

/* ================================================================ 9: launch failure */
static void test_launch_failure(void **state) {
    op_args a;
    (void)state;
    fake.launch_result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    valid_args(OP_SILU, &a);
    assert_int_equal(call_op(OP_SILU, g_ctx, STREAM, &a), TALON_ERROR_DRIVER);
    assert_token(talon_last_error(), "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
    assert_token(talon_last_error(), "talon_silu_and_mul_bf16_v8");
    assert_int_equal(fake.launches, 0);
}

/* ================================================================ 10: static information */
static void test_status_strings(void **state) {
    static const struct { talon_status s; const char *text; } expect[] = {
#define STATUS_ROW(name, value, text) {name, text},
        TALON_STATUS_LIST(STATUS_ROW)
#undef STATUS_ROW
    };
    size_t i, j;
    (void)state;
    for (i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        assert_string_equal(talon_status_string(expect[i].s), expect[i].text);
        assert_string_not_equal(expect[i].text, "unknown status");
        for (j = 0; j < i; j++) assert_string_not_equal(expect[i].text, expect[j].text);
    }
    assert_int_equal(sizeof expect / sizeof expect[0], TALON__STATUS_COUNT);
    assert_string_equal(talon_status_string(TALON__STATUS_COUNT), "unknown status");
    assert_string_equal(talon_status_string((talon_status)-1), "unknown status");
    assert_string_equal(talon_status_string((talon_status)1000), "unknown status");
}

static void test_version_and_bundle(void **state) {
    const talon_bundle_info *b = talon_bundle_info_get();
    int k, j;
    (void)state;
    assert_int_equal(talon_version(), TALON_VERSION_MAJOR * 10000 + TALON_VERSION_MINOR * 100 +
                                          TALON_VERSION_PATCH);
    assert_non_null(b);
    assert_ptr_equal(b, talon_bundle_info_get());
    assert_non_null(b->version);
    assert_non_null(b->git_commit);
    assert_non_null(b->nvcc_version);
    assert_non_null(b->arch);
    assert_non_null(b->kernel_names);
    assert_string_equal(b->version, TALON_VERSION_STRING);
    assert_string_equal(b->arch, "sm_90a");
    assert_true(b->git_commit[0] && b->nvcc_version[0]);
    assert_int_equal(b->num_images, TALON__NUM_IMAGES);
    assert_int_equal(b->num_kernels, TALON__NUM_KERNELS);
    for (k = 0; k < b->num_kernels; k++) {
        assert_string_equal(b->kernel_names[k], talon__kernels[k].symbol);
        for (j = 0; j < k; j++) assert_string_not_equal(b->kernel_names[k], b->kernel_names[j]);
    }
}

/* ================================================================ 11: thread-local errors */
static char other_initial[512], other_after[512];

static void *fail_in_other_thread(void *arg) {
    op_args a;
    (void)arg;
    snprintf(other_initial, sizeof other_initial, "%s", talon_last_error());
    valid_args(OP_SILU, &a);
    a.silu.cols = 0;
    talon_silu_and_mul(g_ctx, STREAM, &a.silu);
    snprintf(other_after, sizeof other_after, "%s", talon_last_error());
    return NULL;
}

static void test_last_error_thread_local(void **state) {
    char mine[512];
    pthread_t t;
    (void)state;
    assert_int_equal(talon_rmsnorm(NULL, STREAM, NULL), TALON_ERROR_INVALID_ARGUMENT);
    snprintf(mine, sizeof mine, "%s", talon_last_error());
    assert_int_equal(pthread_create(&t, NULL, fail_in_other_thread, NULL), 0);
    pthread_join(t, NULL);
    assert_string_equal(other_initial, ""); /* a new thread starts with no error */
    assert_contains(other_after, "talon_silu_and_mul");
    assert_string_equal(talon_last_error(), mine);
}

/* ================================================================ main */
static char names[TEST_MAX][128];

#define ADD(fn) test_add(#fn, fn, NULL)
#define ADD_ROWS(table, fn)                                                                    \
    for (i = 0; i < sizeof table / sizeof table[0]; i++) test_add(table[i].name, fn, &table[i])

int main(void) {
    size_t i;
    ADD(test_no_driver);
    ADD_ROWS(cc_rows, test_unsupported_device);
    ADD(test_create_invalid_arguments);
    ADD(test_create_explicit_context);
    for (i = 0; i < sizeof load_errors / sizeof load_errors[0]; i++) {
        snprintf(names[test_count], sizeof names[0], "lazy load fails with %s", load_error_names[i]);
        test_add(names[test_count], test_module_load_failure_lazy, (const void *)(uintptr_t)i);
        snprintf(names[test_count], sizeof names[0], "TALON_CTX_PRELOAD fails with %s",
                 load_error_names[i]);
        test_add(names[test_count], test_module_load_failure_preload, (const void *)(uintptr_t)i);
    }
    ADD(test_preload_second_image_fails);
    ADD(test_partial_resolve_publishes_nothing);
    ADD_ROWS(bad_rows, test_invalid_argument);
    ADD_ROWS(launch_rows, test_launch);
    ADD(test_concurrent_first_use);
    ADD(test_capture_needs_preload);
    ADD(test_preload_null_ctx);
    ADD(test_launch_failure);
    ADD(test_status_strings);
    ADD(test_version_and_bundle);
    ADD(test_last_error_thread_local);
    return test_run("test_dispatch");
}
