/* talon_topk on the fake driver (no GPU): one test per validation rule, the exact launch
   sequence (kernels, grids, params), talon_topk_workspace_size, and the CPU reference on
   hand-computed cases. */
#include "fake_driver.h"
#include <math.h>
#include "ref_topk.h"

enum { P_VAL = 0x100000, P_IDX = 0x200000, P_IN = 0x300000, P_WS = 0x400000 };
#define STREAM ((CUstream)(uintptr_t)0x5157)
#define WS_BIG ((int64_t)1 << 40)

static void valid_args(talon_topk_args *a) {
    memset(a, 0, sizeof *a);
    a->out_values = P_VAL; a->out_indices = P_IDX; a->in = P_IN;
    a->workspace = P_WS; a->workspace_bytes = WS_BIG;
    a->rows = 4; a->cols = 128256; a->k = 50; a->dtype = TALON_DTYPE_F32;
}

/* ---------------------------------------------------------------- validation */
typedef enum { F_PTR, F_I64, F_INT } fkind;
typedef struct bad_row {
    const char *name;
    fkind kind;
    size_t off;
    int64_t v;
    int null_ctx, null_args;
    const char *field, *value;      /* words the message must contain */
    int64_t rows, cols;             /* when nonzero, set before the edit */
} bad_row;

#define ARG(f) F_I64, offsetof(talon_topk_args, f)
#define PARG(f) F_PTR, offsetof(talon_topk_args, f)
#define IARG(f) F_INT, offsetof(talon_topk_args, f)
static const bad_row bad_rows[] = {
    {"topk rejects ctx NULL", F_I64, 0, 0, 1, 0, "ctx", "NULL", 0, 0},
    {"topk rejects args NULL", F_I64, 0, 0, 0, 1, "args", "NULL", 0, 0},
    {"topk rejects rows = 0", ARG(rows), 0, 0, 0, "args->rows", "0", 0, 0},
    {"topk rejects rows = 1025", ARG(rows), 1025, 0, 0, "args->rows", "1025", 0, 0},
    {"topk rejects cols = 0", ARG(cols), 0, 0, 0, "args->cols", "0", 0, 0},
    {"topk rejects cols = 262145", ARG(cols), 262145, 0, 0, "args->cols", "262145", 0, 0},
    {"topk rejects k = 0", ARG(k), 0, 0, 0, "args->k", "0", 0, 0},
    {"topk rejects k = 1025", ARG(k), 1025, 0, 0, "args->k", "1025", 0, 0},
    {"topk rejects k = 8 > cols = 7", ARG(k), 8, 0, 0, "args->k", "8", 0, 7},
    {"topk rejects in_stride = 128255 < cols", ARG(in_stride), 128255, 0, 0, "args->in_stride",
     "128255", 0, 0},
    {"topk rejects sorted = 2", IARG(sorted), 2, 0, 0, "args->sorted", "2", 0, 0},
    {"topk rejects dtype I32", IARG(dtype), TALON_DTYPE_I32, 0, 0, "args->dtype", "3", 0, 0},
    {"topk rejects dtype = 7", IARG(dtype), 7, 0, 0, "args->dtype", "7", 0, 0},
    {"topk rejects out_values NULL", PARG(out_values), 0, 0, 0, "args->out_values", "NULL", 0, 0},
    {"topk rejects out_indices NULL", PARG(out_indices), 0, 0, 0, "args->out_indices", "NULL", 0, 0},
    {"topk rejects in NULL", PARG(in), 0, 0, 0, "args->in", "NULL", 0, 0},
    {"topk rejects fp32 in misaligned by 2", PARG(in), P_IN + 2, 0, 0, "args->in", "0x300002", 0, 0},
    {"topk rejects out_indices misaligned by 2", PARG(out_indices), P_IDX + 2, 0, 0,
     "args->out_indices", "0x200002", 0, 0},
    {"topk rejects workspace NULL", PARG(workspace), 0, 0, 0, "args->workspace", "NULL", 0, 0},
    {"topk rejects workspace misaligned by 8", PARG(workspace), P_WS + 8, 0, 0, "args->workspace",
     "0x400008", 0, 0},
    /* 4 rows of 128256 (two kernels, 32 chunk histograms): 4 * 40976 words of 4 bytes. */
    {"topk rejects workspace_bytes one short", ARG(workspace_bytes), 655615, 0, 0,
     "args->workspace_bytes", "655615", 0, 0},
    /* 65 rows (sampled path): 65 * 8208 words of 4 bytes. */
    {"topk rejects workspace_bytes one short (65 rows)", ARG(workspace_bytes), 2134079, 0, 0,
     "args->workspace_bytes", "2134079", 65, 0},
};

static void test_invalid_argument(void **state) {
    const bad_row *row = (const bad_row *)*state;
    talon_topk_args a;
    valid_args(&a);
    if (row->rows) a.rows = row->rows;
    if (row->cols) a.cols = row->cols;
    if (!row->null_ctx && !row->null_args) {
        char *p = (char *)&a + row->off;
        CUdeviceptr ptr = (CUdeviceptr)row->v;
        int e = (int)row->v;
        if (row->kind == F_PTR) memcpy(p, &ptr, sizeof ptr);
        else if (row->kind == F_I64) memcpy(p, &row->v, sizeof row->v);
        else memcpy(p, &e, sizeof e);
    }
    assert_rejected(talon_topk(row->null_ctx ? NULL : g_ctx, STREAM, row->null_args ? NULL : &a),
                    "talon_topk", row->field, row->value);
}

/* Minimum workspace accepted exactly; a bf16 input needs only 2-byte alignment. */
static void test_accepts_edges(void **state) {
    talon_topk_args a;
    (void)state;
    valid_args(&a);
    a.workspace_bytes = 655616;
    assert_int_equal(talon_topk(g_ctx, STREAM, &a), TALON_SUCCESS);
    a.rows = 65; a.workspace_bytes = 2134080; /* sampled path */
    assert_int_equal(talon_topk(g_ctx, STREAM, &a), TALON_SUCCESS);
    valid_args(&a);
    a.dtype = TALON_DTYPE_BF16; a.in = P_IN + 2; a.out_values = P_VAL + 2;
    a.rows = 1024; a.cols = 262144; a.k = 1024; a.in_stride = 262145; a.sorted = 1;
    assert_int_equal(talon_topk(g_ctx, STREAM, &a), TALON_SUCCESS);
    valid_args(&a);
    a.rows = 1; a.cols = 1; a.k = 1;
    assert_int_equal(talon_topk(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 2 + 2 + 2 + 2); /* 4, 65, 1024 and 1 rows */
}

/* talon_topk_workspace_size for rows x cols, or -1 when it fails */
static int64_t ws(int64_t rows, int64_t cols) {
    talon_topk_args a;
    int64_t bytes = -2;
    valid_args(&a);
    a.rows = rows; a.cols = cols;
    return talon_topk_workspace_size(g_ctx, &a, &bytes) == TALON_SUCCESS ? bytes : -1;
}

static void test_workspace_size(void **state) {
    (void)state;
    /* words per row: histograms + 16 counters + 2 * min(cols, 4096), to a multiple of 4; the
       histograms are 1024 words per chunk of 4096 on the chunk path (rows x chunks <= 2048),
       none on the sampled path */
    assert_int_equal(ws(1, 7), 4 * 1056);
    assert_int_equal(ws(1, 1), 4 * 1044);
    assert_int_equal(ws(1024, 7), 1024 * 4 * 1056);
    assert_int_equal(ws(1024, 8193), 1024 * 4 * 8208);
    assert_int_equal(ws(1, 262144), 4 * (64 * 1024 + 16 + 8192));
    assert_int_equal(ws(2, 262144), 2 * 4 * (64 * 1024 + 16 + 8192));
    assert_int_equal(ws(32, 262144), 32 * 4 * (64 * 1024 + 16 + 8192));
    assert_int_equal(ws(33, 262144), 33 * 4 * 8208);
    assert_int_equal(ws(64, 128256), 64 * 4 * (32 * 1024 + 16 + 8192));
    assert_int_equal(ws(65, 128256), 65 * 4 * 8208);
    assert_int_equal(ws(1024, 262144), 1024 * 4 * 8208);
    assert_int_equal(ws(0, 7), -1);
    assert_int_equal(ws(1025, 7), -1);
    assert_int_equal(ws(1, 0), -1);
    assert_int_equal(ws(1, 262145), -1);
}

static void test_workspace_size_errors(void **state) {
    static const char op[] = "talon_topk_workspace_size";
    talon_topk_args a;
    int64_t bytes = 0;
    (void)state;
    valid_args(&a);
    assert_rejected(talon_topk_workspace_size(NULL, &a, &bytes), op, "ctx", "NULL");
    assert_rejected(talon_topk_workspace_size(g_ctx, NULL, &bytes), op, "args", "NULL");
    assert_rejected(talon_topk_workspace_size(g_ctx, &a, NULL), op, "bytes", "NULL");
    a.rows = 1025;
    assert_rejected(talon_topk_workspace_size(g_ctx, &a, &bytes), op, "args->rows", "1025");
    a.rows = 4; a.cols = 0;
    assert_rejected(talon_topk_workspace_size(g_ctx, &a, &bytes), op, "args->cols", "0");
}

/* ---------------------------------------------------------------- launches */
typedef struct launch_row {
    const char *name;
    int64_t rows, cols, k, in_stride;
    talon_dtype dtype;
    int sorted, chunks, chunk_len; /* the split the op must choose */
    const char *dt;
} launch_row;

/* The chunk path when rows x ceil(cols / 4096) <= 2048, with chunks of 16384, 8192 or 4096
   elements, the longest that gives at least 512 blocks; else the sampled path: ceil(cols /
   32768) chunks a row when that gives at least 1024 blocks, else the count the wave cost of
   talon.h picks (worked out outside the header for each row below), chunks rounded up to 64
   elements. */
static const launch_row launch_rows[] = {
    {"topk launch B=1 V=128256 k=50 f32", 1, 128256, 50, 0, TALON_DTYPE_F32, 0, 32, 4096, "f32"},
    {"topk launch B=4 V=128256 k=50 f32", 4, 128256, 50, 0, TALON_DTYPE_F32, 1, 32, 4096, "f32"},
    {"topk launch B=65 V=128256 k=50 f32 (2080 chunks of 4096: sampled)", 65, 128256, 50, 0,
     TALON_DTYPE_F32, 0, 6, 21376, "f32"},
    {"topk launch B=1024 V=8192 k=1024 bf16 (2048 chunks of 4096: chunk path)", 1024, 8192,
     1024, 0, TALON_DTYPE_BF16, 0, 1, 16384, "bf16"},
    {"topk launch B=1024 V=8193 k=1024 bf16 (3072 chunks of 4096: sampled)", 1024, 8193,
     1024, 0, TALON_DTYPE_BF16, 0, 1, 8256, "bf16"},
    {"topk launch B=1 V=262144 k=1024 f16", 1, 262144, 1024, 0, TALON_DTYPE_F16, 1, 64, 4096, "f16"},
    {"topk launch B=64 V=128256 k=50 f32 sorted (2048 chunks of 4096: chunk path)", 64, 128256,
     50, 0, TALON_DTYPE_F32, 1, 8, 16384, "f32"},
    {"topk launch B=16 V=262144 k=50 f32", 16, 262144, 50, 0, TALON_DTYPE_F32, 0, 32, 8192, "f32"},
    {"topk launch B=256 V=128256 k=50 f32", 256, 128256, 50, 0, TALON_DTYPE_F32, 0, 4, 32064, "f32"},
    {"topk launch B=256 V=262144 k=1024 f32", 256, 262144, 1024, 0, TALON_DTYPE_F32, 0, 8, 32768, "f32"},
    {"topk launch B=100 V=262144 k=50 f32 (8 chunks make 800 blocks: wave cost, 7)", 100, 262144, 50, 0,
     TALON_DTYPE_F32, 0, 7, 37504, "f32"},
    {"topk launch B=33 V=262144 k=1024 f32 (one wave: 12 chunks)", 33, 262144, 1024, 0,
     TALON_DTYPE_F32, 0, 12, 21888, "f32"},
    {"topk launch B=396 V=40000 k=64 f32 (one wave of whole rows: 1 chunk)", 396, 40000, 64, 0,
     TALON_DTYPE_F32, 0, 1, 40000, "f32"},
    {"topk launch B=1024 V=7 k=7 bf16 strided", 1024, 7, 7, 9, TALON_DTYPE_BF16, 1, 1, 16384, "bf16"},
    {"topk launch B=3 V=100003 k=1 f16", 3, 100003, 1, 0, TALON_DTYPE_F16, 0, 25, 4096, "f16"},
};

static void expect_launch(int n, const char *symbol, unsigned gx, unsigned gy, int dependent,
                          const talon__topk_params *want) {
    const fake_launch *l = &fake.log[n];
    int k = kernel_index(symbol);
    assert_true(k >= 0);
    if (l->fn != fake_handle_for(symbol))
        fail_msg("launch %d: %s, expected %s", n,
                 talon__kernels[fake.fns[FN_INDEX(l->fn)].kernel].symbol, symbol);
    assert_int_equal(l->grid[0], gx);
    assert_int_equal(l->grid[1], gy);
    assert_int_equal(l->grid[2], 1);
    assert_int_equal(l->block[0], 512);
    assert_int_equal(l->block[1], 1);
    assert_int_equal(l->smem, talon__kernels[k].smem);
    assert_ptr_equal(l->stream, STREAM);
    assert_int_equal(l->dependent, dependent);
    assert_int_equal(l->param_size, sizeof *want);
    assert_memory_equal(l->params, want, sizeof *want);
}

static void test_launch(void **state) {
    const launch_row *row = (const launch_row *)*state;
    talon__topk_params want;
    talon_topk_args a;
    char sym[64];
    int64_t cap = row->cols < 4096 ? row->cols : 4096;
    int64_t chunks4096 = (row->cols + 4095) / 4096;
    int two = row->rows * chunks4096 <= 2048, n = 0;
    valid_args(&a);
    a.rows = row->rows; a.cols = row->cols; a.k = row->k; a.in_stride = row->in_stride;
    a.dtype = row->dtype; a.sorted = row->sorted;
    assert_int_equal(talon_topk(g_ctx, STREAM, &a), TALON_SUCCESS);
    assert_int_equal(fake.launches, 2);
    memset(&want, 0, sizeof want);
    want.out_values = P_VAL; want.out_indices = P_IDX; want.in = P_IN; want.workspace = P_WS;
    want.in_stride = row->in_stride ? row->in_stride : row->cols;
    want.row_ints = ((two ? chunks4096 * 1024 : 0) + 16 + 2 * cap + 3) / 4 * 4;
    want.cols = (int)row->cols; want.k = (int)row->k; want.chunk_len = row->chunk_len;
    want.chunks = row->chunks; want.cap = (int)cap; want.sorted = row->sorted;
    assert_true((int64_t)row->chunks * row->chunk_len >= row->cols);
    assert_true((int64_t)(row->chunks - 1) * row->chunk_len < row->cols);
    if (two) {
        snprintf(sym, sizeof sym, "talon_topk_chunk_hist_%s", row->dt);
        expect_launch(n++, sym, (unsigned)row->chunks, (unsigned)row->rows, 0, &want);
    } else {
        snprintf(sym, sizeof sym, "talon_topk_sample_%s", row->dt);
        expect_launch(n++, sym, (unsigned)row->rows, 1, 0, &want);
    }
    snprintf(sym, sizeof sym, "talon_topk_%sselect_%s", two ? "chunk_" : "", row->dt);
    /* the sampled path's select is a programmatic dependent of sample (its prefetch overlaps) */
    expect_launch(n, sym, (unsigned)row->chunks, (unsigned)row->rows, !two, &want);
}

/* ---------------------------------------------------------------- reference */
static void expect_ref(const float *x, int64_t n, int64_t k, const int32_t *want) {
    int32_t got[16];
    int64_t i;
    ref_topk_row(x, n, k, got);
    for (i = 0; i < k; i++)
        if (got[i] != want[i]) fail_msg("ref_topk_row n=%d k=%d: [%d] = %d, expected %d", (int)n,
                                        (int)k, (int)i, got[i], want[i]);
}

static void test_ref_topk(void **state) {
    const float nan = NAN, inf = INFINITY;
    (void)state;
    {   /* plain values, ties to the lower index */
        const float x[] = {1, 5, 3, 5, -2, 3};
        const int32_t w[] = {1, 3, 2, 5, 0, 4};
        expect_ref(x, 6, 6, w);
        expect_ref(x, 6, 3, w);
    }
    {   /* NaN (any sign) above +inf, ties among NaNs by index; -inf last */
        const float x[] = {-inf, inf, -nan, 0, nan, 7};
        const int32_t w[] = {2, 4, 1, 5, 3, 0};
        expect_ref(x, 6, 6, w);
    }
    {   /* -0.0 equals +0.0: index decides */
        const float x[] = {-1, 0.0f, -0.0f, -0.0f, 0.0f};
        const int32_t w[] = {1, 2, 3, 4, 0};
        expect_ref(x, 5, 5, w);
        expect_ref(x, 5, 2, w);
    }
    {   /* all equal, V = 1 */
        const float x[] = {2, 2, 2, 2};
        const int32_t w[] = {0, 1, 2, 3};
        expect_ref(x, 4, 2, w);
        expect_ref(x, 1, 1, w);
    }
    assert_true(ref_topk_before((const float[]){nan, inf}, 0, 1));
    assert_false(ref_topk_before((const float[]){inf, nan}, 0, 1));
}

/* The sampled path's chunk count is a wave cost over the device's resident slots (SM count x
   3, read at context creation): the same shapes plan differently on 132, 114 and 66 SMs. */
static void test_chunks_follow_sms(void **state) {
    static const struct { int64_t rows, cols; int sms; int64_t chunk_len; } rows[] = {
        {100, 262144, 132, 37504}, {100, 262144, 114, 87424}, {100, 262144, 66, 52480},
        {65, 128256, 132, 21376},  {65, 128256, 114, 25664},  {65, 128256, 66, 42752},
        {33, 262144, 132, 21888},  {33, 262144, 114, 26240},  {33, 262144, 66, 43712},
        {256, 262144, 66, 32768},  /* 2048 blocks: chunks of 32768 whatever the count */
        {4, 128256, 66, 4096},     /* the chunk path's rule does not depend on it */
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(talon__topk_chunk_len(rows[i].rows, rows[i].cols,
                                               talon__topk_small(rows[i].rows, rows[i].cols),
                                               rows[i].sms),
                         rows[i].chunk_len);
}

/* ---------------------------------------------------------------- main */
int main(void) {
    size_t i;
    for (i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++)
        test_add(bad_rows[i].name, test_invalid_argument, &bad_rows[i]);
    test_add("topk accepts the edges", test_accepts_edges, NULL);
    test_add("topk workspace size", test_workspace_size, NULL);
    test_add("topk workspace size errors", test_workspace_size_errors, NULL);
    test_add("topk chunks follow the SM count", test_chunks_follow_sms, NULL);
    for (i = 0; i < sizeof launch_rows / sizeof launch_rows[0]; i++)
        test_add(launch_rows[i].name, test_launch, &launch_rows[i]);
    test_add("ref_topk_row hand cases", test_ref_topk, NULL);
    return test_run("test_topk");
}
