/* GPU tests (H100/H200) for talon_gather_rows. Every byte of every output row is compared
   exactly with the table row its index names (a zero row for an index outside [0, in_rows)),
   over random tables of random bytes (NaN and any other pattern included: the copy is bit for
   bit), for each element size (bf16, f16, f32, fp8), int32 and int64 indices, odd and
   16-byte-multiple row lengths, padded strides, misaligned pointers (the element-wise paths)
   and adversarial indices (-1, in_rows, INT32_MAX, INT32_MIN, INT64_MIN, INT64_MAX). Outputs are
   poisoned with 0xA5 before every launch, padding between out's rows and a guard after its
   last row must keep the poison, and the table must be unchanged. A captured graph is
   replayed on new indices written into the same buffer. TALON_TEST_QUICK=1 (compute-sanitizer)
   runs fewer shapes. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu.h"
#include "ref.h"
#include "talon.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define GUARD 256 /* poisoned bytes after out's last row */
#define POISON 0xA5

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static long long g_cases, g_elements;

typedef struct gather_case {
    talon_dtype dtype;
    talon_index_dtype index_dtype;
    int64_t rows, cols, in_rows, out_stride, in_stride; /* strides: 0 = cols */
    int64_t offset;   /* elements added to both data pointers (odd: the element-wise path) */
    int bad_every;    /* every bad_every-th index is an out-of-range one (0: none) */
    uint64_t seed;
} gather_case;

static int esize_of(talon_dtype t) {
    return t == TALON_DTYPE_F32 ? 4 : t == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
}

static int64_t draw_index(const gather_case *c, uint64_t *s, int64_t r) {
    static const int64_t bad[] = {-1, 0 /* in_rows */, INT32_MAX, INT32_MIN, INT64_MIN,
                                  INT64_MAX, 1 /* in_rows + 1 */};
    const uint64_t x = ref_next64(s);
    if (c->bad_every && r % c->bad_every == c->bad_every - 1) {
        int64_t b = bad[(x >> 7) % COUNT(bad)];
        if (b == 0) b = c->in_rows;
        if (b == 1) b = c->in_rows + 1;
        if (c->index_dtype == TALON_INDEX_I32 && (b > INT32_MAX || b < INT32_MIN)) b = -7;
        return b;
    }
    return (int64_t)(x % (uint64_t)c->in_rows);
}

/* One launch (or graph replays) of a case; returns the failures. */
static int run_case(const gather_case *c, int graph_replays) {
    const int es = esize_of(c->dtype);
    const int ib = c->index_dtype == TALON_INDEX_I64 ? 8 : 4;
    const int64_t os = c->out_stride ? c->out_stride : c->cols;
    const int64_t is = c->in_stride ? c->in_stride : c->cols;
    const size_t in_bytes = (size_t)((c->in_rows - 1) * is + c->cols + c->offset) * (size_t)es;
    const size_t out_bytes = (size_t)((c->rows - 1) * os + c->cols + c->offset) * (size_t)es + GUARD;
    uint8_t *h_in = (uint8_t *)malloc(in_bytes), *h_out = (uint8_t *)malloc(out_bytes),
            *h_back = (uint8_t *)malloc(in_bytes);
    void *h_idx = malloc((size_t)c->rows * (size_t)ib);
    int64_t *idx = (int64_t *)malloc((size_t)c->rows * sizeof(int64_t));
    CUdeviceptr d_in = gpu_alloc(in_bytes), d_out = gpu_alloc(out_bytes),
                d_idx = gpu_alloc((size_t)c->rows * (size_t)ib);
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    uint64_t s = c->seed;
    int failures = 0, rep, reps = graph_replays ? graph_replays : 1;
    size_t i;
    talon_gather_rows_args a;
    assert_non_null(h_in); assert_non_null(h_out); assert_non_null(h_idx); assert_non_null(idx);
    assert_non_null(h_back);
    for (i = 0; i < in_bytes; i++) h_in[i] = (uint8_t)(ref_next64(&s) >> 32);
    GPU_CK(cu.cuMemcpyHtoD(d_in, h_in, in_bytes));
    memset(&a, 0, sizeof a);
    a.out = d_out + (CUdeviceptr)(c->offset * es);
    a.in = d_in + (CUdeviceptr)(c->offset * es);
    a.indices = d_idx;
    a.rows = c->rows; a.cols = c->cols; a.in_rows = c->in_rows;
    a.out_stride = c->out_stride; a.in_stride = c->in_stride;
    a.dtype = c->dtype; a.index_dtype = c->index_dtype;
    if (graph_replays) {
        assert_int_equal(cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
        if (talon_gather_rows(g_ctx, g_stream, &a) != TALON_SUCCESS)
            fail_msg("talon_gather_rows: %s", talon_last_error());
        assert_int_equal(cu.cuStreamEndCapture(g_stream, &graph), 0);
        assert_int_equal(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), 0);
    }
    for (rep = 0; rep < reps; rep++) {
        int64_t r;
        for (r = 0; r < c->rows; r++) {
            idx[r] = draw_index(c, &s, r);
            if (ib == 8) ((int64_t *)h_idx)[r] = idx[r];
            else ((int32_t *)h_idx)[r] = (int32_t)idx[r];
        }
        GPU_CK(cu.cuMemcpyHtoD(d_idx, h_idx, (size_t)c->rows * (size_t)ib));
        GPU_CK(cu.cuMemsetD8(d_out, POISON, out_bytes));
        if (graph_replays) {
            GPU_CK(cu.cuGraphLaunch(exec, g_stream));
        } else if (talon_gather_rows(g_ctx, g_stream, &a) != TALON_SUCCESS) {
            fail_msg("talon_gather_rows: %s", talon_last_error());
        }
        GPU_CK(cu.cuStreamSynchronize(g_stream));
        GPU_CK(cu.cuMemcpyDtoH(h_out, d_out, out_bytes));
        GPU_CK(cu.cuMemcpyDtoH(h_back, d_in, in_bytes));
        if (memcmp(h_back, h_in, in_bytes)) {
            print_error("the table changed\n");
            failures++;
        }
        /* every byte of out's allocation: a row's bytes, else the poison */
        for (i = 0; i < out_bytes; i++) {
            const int64_t e = (int64_t)i / es - c->offset;
            const int64_t r = e >= 0 ? e / os : -1, col = e >= 0 ? e % os : -1;
            uint8_t want = POISON;
            if (r >= 0 && r < c->rows && col < c->cols) {
                const int64_t src = idx[r];
                want = src >= 0 && src < c->in_rows
                           ? h_in[(size_t)((c->offset + src * is + col) * es + (int64_t)i % es)]
                           : 0;
            }
            if (h_out[i] != want) {
                if (failures < 8)
                    print_error("byte %zu (row %lld col %lld, index %lld): 0x%02x, want 0x%02x\n",
                                i, (long long)r, (long long)col,
                                (long long)(r >= 0 && r < c->rows ? idx[r] : 0), h_out[i], want);
                failures++;
            }
        }
        g_elements += c->rows * c->cols;
    }
    if (exec) cu.cuGraphExecDestroy(exec);
    if (graph) cu.cuGraphDestroy(graph);
    cu.cuMemFree(d_in); cu.cuMemFree(d_out); cu.cuMemFree(d_idx);
    free(h_in); free(h_out); free(h_back); free(h_idx); free(idx);
    g_cases++;
    return failures;
}

static void test_shapes(void **state) {
    static const talon_dtype dtypes[] = {TALON_DTYPE_BF16, TALON_DTYPE_F16, TALON_DTYPE_F32,
                                         TALON_DTYPE_FP8_E4M3};
    /* rows, cols, in_rows, out_stride, in_stride, offset */
    static const int64_t shapes[][6] = {
        {1, 1, 1, 0, 0, 0},         {7, 3, 5, 0, 0, 0},          {33, 4096, 1000, 0, 0, 0},
        {5, 4104, 77, 0, 12312, 0}, {129, 4095, 300, 4097, 0, 0}, {64, 2048, 64, 0, 0, 1},
        {17, 40, 9, 48, 64, 0},     {3, 2056, 10, 0, 0, 3},      {1000, 128, 50000, 0, 0, 0},
        {4, 9000, 11, 9016, 9024, 0},
    };
    int failures = 0, d, sh, ix;
    (void)state;
    for (d = 0; d < COUNT(dtypes); d++)
        for (sh = 0; sh < COUNT(shapes); sh++)
            for (ix = 0; ix < 2; ix++) {
                gather_case c;
                if (g_quick && (sh % 3 != 0 || (ix && d)) && sh != 5) continue;
                memset(&c, 0, sizeof c);
                c.dtype = dtypes[d];
                c.index_dtype = ix ? TALON_INDEX_I64 : TALON_INDEX_I32;
                c.rows = shapes[sh][0]; c.cols = shapes[sh][1]; c.in_rows = shapes[sh][2];
                c.out_stride = shapes[sh][3]; c.in_stride = shapes[sh][4];
                c.offset = shapes[sh][5];
                c.bad_every = sh % 2 ? 5 : 0;
                c.seed = 1000u * (unsigned)d + 10u * (unsigned)sh + (unsigned)ix;
                if (run_case(&c, 0)) {
                    print_error("failed: dtype %d index %s rows %lld cols %lld in_rows %lld "
                                "strides %lld/%lld offset %lld\n", (int)c.dtype,
                                ix ? "i64" : "i32", (long long)c.rows, (long long)c.cols,
                                (long long)c.in_rows, (long long)c.out_stride,
                                (long long)c.in_stride, (long long)c.offset);
                    failures++;
                }
            }
    print_message("gather shapes: %lld cases so far, %d failed\n", g_cases, failures);
    if (failures) fail();
}

/* The embedding lookup of a decode step, captured once and replayed on new token ids. */
static void test_graph(void **state) {
    gather_case c;
    (void)state;
    memset(&c, 0, sizeof c);
    c.dtype = TALON_DTYPE_BF16; c.rows = 64; c.cols = 4096; c.in_rows = g_quick ? 4096 : 32768;
    c.bad_every = 9; c.seed = 77;
    if (run_case(&c, 3)) fail();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_graph),
    };
    gpu_test t;
    int failed;
    if (gpu_test_begin(&t, "test_gpu_gather", CU_STREAM_NON_BLOCKING)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon_gather_rows GPU", tests, NULL, NULL);
    return gpu_test_end(&t, "", g_cases, g_elements, failed);
}
