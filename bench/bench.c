/* talon-bench: times talon's ops on an H100/H200 against the device-to-device copy ceiling.

   Method (see /work/shared/PERF.md, "How to measure"):
   - copy ceiling: cuMemcpyDtoDAsync of 1 GiB, bytes read + written (2 GiB per copy);
   - every op: random inputs (never zeros), rotating over independent buffer sets whose total
     exceeds 4x the 50 MiB L2 (at least 2 sets), the next set for every run; warm-up, then
     each timed run bracketed by its own pair of CUDA events; the median is reported;
   - bytes are the minimum traffic of the op (see op_bytes) and GB/s is 1e9 bytes/s.

   Usage: talon-bench [--json FILE] [--filter SUBSTRING]
   Exit status: 0 on success, 1 on any CUDA/talon failure or a failed output sanity check. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "talon.h"
#include "gpu.h"
#include "ref.h"

#define MIB ((size_t)1 << 20)
#define L2_BYTES (50 * MIB)          /* H100 SXM L2 */
#define ROTATE_BYTES (4 * L2_BYTES)  /* buffer sets together exceed this */
#define COPY_BYTES ((size_t)1 << 30) /* copy-ceiling transfer */
#define COPY_WARMUP 5
#define COPY_RUNS 50
#define WARMUP 10
#define RUNS_SMALL 100 /* input below SMALL_BYTES */
#define RUNS_LARGE 50
#define SMALL_BYTES (128 * MIB)
#define MAX_RUNS 100
#define ALIGN 256
#define POOL_ELEMS ((size_t)16 << 20) /* random host pool: 32 MiB per dtype */
#define WPOOL_ELEMS ((size_t)1 << 16)

/* ---------------------------------------------------------------- error checks */
#define CK(call)                                                                               \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS) {                                                              \
            fprintf(stderr, "talon-bench: %s:%d: %s failed: %d (%s)\n", __FILE__, __LINE__,    \
                    #call, (int)r_, gpu_error(r_));                                            \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define TK(call)                                                                               \
    do {                                                                                       \
        talon_status s_ = (call);                                                              \
        if (s_ != TALON_SUCCESS) {                                                             \
            fprintf(stderr, "talon-bench: %s:%d: %s failed: %s: %s\n", __FILE__, __LINE__,     \
                    #call, talon_status_string(s_), talon_last_error());                       \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static void die(const char *msg) {
    fprintf(stderr, "talon-bench: %s\n", msg);
    exit(1);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) die("host allocation failed");
    return p;
}

/* ---------------------------------------------------------------- random host data */
static uint64_t rng_state = 1;

/* Host pools of random 16-bit values per dtype (index = talon_dtype): inputs uniform in
   [-2, 2] (never exactly 0), weights uniform in [0.5, 1.5], biases uniform in [-0.5, 0.5].
   Device buffers are filled from them at varying offsets. */
enum { POOL_X, POOL_W, POOL_B, NUM_POOLS };
static uint16_t *pools[2][NUM_POOLS];
static size_t pool_elems[NUM_POOLS] = {POOL_ELEMS, WPOOL_ELEMS, WPOOL_ELEMS};

static void make_pools(void) {
    static const float lo[NUM_POOLS] = {-2.0f, 0.5f, -0.5f}, hi[NUM_POOLS] = {2.0f, 1.5f, 0.5f};
    for (int t = 0; t < 2; t++)
        for (int p = 0; p < NUM_POOLS; p++) {
            uint16_t *d = xmalloc(pool_elems[p] * sizeof *d);
            for (size_t i = 0; i < pool_elems[p]; i++) {
                float x = lo[p] + (hi[p] - lo[p]) * ref_unit01(&rng_state);
                uint16_t b = ref_from_f32((talon_dtype)t, x);
                if ((b & 0x7fff) == 0) b = ref_from_f32((talon_dtype)t, 0.25f); /* no zeros */
                d[i] = b;
            }
            pools[t][p] = d;
        }
}

/* Fills bytes (even) at dst from pool p of dtype t, starting at a random offset. */
static void upload(CUdeviceptr dst, size_t bytes, talon_dtype t, int p) {
    const uint16_t *pool = pools[t][p];
    size_t n = bytes / 2, done = 0, off = (size_t)(ref_next64(&rng_state) % pool_elems[p]);
    while (done < n) {
        size_t k = pool_elems[p] - off;
        if (k > n - done) k = n - done;
        CK(cu.cuMemcpyHtoD(dst + done * 2, pool + off, k * 2));
        done += k;
        off = 0;
    }
}

/* ---------------------------------------------------------------- cases */
typedef enum { OP_RMSNORM, OP_FUSED_ADD_RMSNORM, OP_LAYERNORM, OP_SILU, OP_GELU_ERF, OP_GELU_TANH } op_kind;

static const char *const op_name[] = {"rmsnorm", "fused_add_rmsnorm", "layernorm",
                                      "silu_and_mul", "gelu_erf_and_mul", "gelu_tanh_and_mul"};
static const char *const op_api[] = {"talon_rmsnorm", "talon_fused_add_rmsnorm", "talon_layernorm",
                                     "talon_silu_and_mul", "talon_gelu_and_mul", "talon_gelu_and_mul"};

static int is_gated(op_kind k) { return k == OP_SILU || k == OP_GELU_ERF || k == OP_GELU_TANH; }

typedef struct bench_case {
    op_kind op;
    talon_dtype dtype;
    int64_t rows, cols; /* cols as passed to talon: row length, or output cols for gated ops */
} bench_case;

#define BF TALON_DTYPE_BF16
#define F16 TALON_DTYPE_F16
static const bench_case cases[] = {
    {OP_RMSNORM, BF, 1, 8}, /* next to no work: the fixed per-call floor of this method */
    {OP_RMSNORM, BF, 1, 4096},
    {OP_RMSNORM, BF, 64, 8192},
    {OP_RMSNORM, BF, 4096, 4096},
    {OP_RMSNORM, BF, 16384, 8192},
    {OP_RMSNORM, F16, 16384, 8192},
    {OP_FUSED_ADD_RMSNORM, BF, 1, 4096},
    {OP_FUSED_ADD_RMSNORM, BF, 64, 8192},
    {OP_FUSED_ADD_RMSNORM, BF, 4096, 4096},
    {OP_FUSED_ADD_RMSNORM, BF, 16384, 8192},
    {OP_LAYERNORM, BF, 1, 4096},
    {OP_LAYERNORM, BF, 64, 8192},
    {OP_LAYERNORM, BF, 4096, 4096},
    {OP_LAYERNORM, BF, 16384, 8192},
    {OP_SILU, BF, 64, 14336},
    {OP_SILU, BF, 16384, 14336},
    {OP_SILU, F16, 16384, 14336},
    {OP_GELU_ERF, BF, 64, 14336},
    {OP_GELU_ERF, BF, 16384, 14336},
    {OP_GELU_TANH, BF, 64, 14336},
    {OP_GELU_TANH, BF, 16384, 14336},
};
#define NUM_CASES ((int)(sizeof cases / sizeof cases[0]))

/* Minimum traffic in bytes. */
static double op_bytes(const bench_case *c) {
    double e = 2.0, rc = (double)c->rows * (double)c->cols;
    switch (c->op) {
    case OP_RMSNORM: return e * (2.0 * rc + (double)c->cols);            /* in, out, weight */
    case OP_LAYERNORM: return e * (2.0 * rc + 2.0 * (double)c->cols);    /* + bias */
    case OP_FUSED_ADD_RMSNORM: return e * (4.0 * rc + (double)c->cols);  /* in, res r+w, out */
    default: return e * 3.0 * rc;                                         /* 2*cols in, cols out */
    }
}

/* ---------------------------------------------------------------- buffers */
/* Each tensor role lives in one allocation holding nsets copies, stride-aligned to ALIGN. */
enum { T_IN, T_OUT, T_RES, T_W, T_B, NUM_T };

typedef struct layout {
    CUdeviceptr base[NUM_T];
    size_t stride[NUM_T]; /* bytes per set; 0: role unused */
    int fill[NUM_T];      /* pool, or -1: not filled (written by the op) */
    size_t set_bytes;
    int nsets;
} layout;

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static void layout_create(layout *L, const bench_case *c) {
    size_t rc = (size_t)c->rows * (size_t)c->cols * 2, w = (size_t)c->cols * 2;
    memset(L, 0, sizeof *L);
    for (int t = 0; t < NUM_T; t++) L->fill[t] = -1;
    switch (c->op) {
    case OP_RMSNORM:
        L->stride[T_IN] = rc; L->stride[T_OUT] = rc; L->stride[T_W] = w;
        break;
    case OP_LAYERNORM:
        L->stride[T_IN] = rc; L->stride[T_OUT] = rc; L->stride[T_W] = w; L->stride[T_B] = w;
        break;
    case OP_FUSED_ADD_RMSNORM:
        L->stride[T_IN] = rc; L->stride[T_RES] = rc; L->stride[T_W] = w;
        L->fill[T_RES] = POOL_X;
        break;
    default:
        L->stride[T_IN] = 2 * rc; L->stride[T_OUT] = rc;
        break;
    }
    L->fill[T_IN] = POOL_X;
    L->fill[T_W] = POOL_W;
    L->fill[T_B] = POOL_B;
    for (int t = 0; t < NUM_T; t++) {
        L->stride[t] = round_up(L->stride[t], ALIGN);
        L->set_bytes += L->stride[t];
    }
    L->nsets = (int)(ROTATE_BYTES / L->set_bytes) + 1; /* total > ROTATE_BYTES */
    if (L->nsets < 2) L->nsets = 2;
    for (int t = 0; t < NUM_T; t++) {
        size_t bytes = L->stride[t] * (size_t)L->nsets;
        if (!bytes) continue;
        CK(cu.cuMemAlloc(&L->base[t], bytes));
        if (L->fill[t] >= 0) upload(L->base[t], bytes, c->dtype, L->fill[t]);
    }
    CK(cu.cuCtxSynchronize());
}

static void layout_destroy(layout *L) {
    for (int t = 0; t < NUM_T; t++)
        if (L->base[t]) CK(cu.cuMemFree(L->base[t]));
    memset(L, 0, sizeof *L);
}

static CUdeviceptr ptr(const layout *L, int t, int set) {
    return L->base[t] ? L->base[t] + (CUdeviceptr)(L->stride[t] * (size_t)set) : 0;
}

/* ---------------------------------------------------------------- launches */
static talon_ctx *tctx;
static CUstream stream;

static void launch(const bench_case *c, const layout *L, int set) {
    switch (c->op) {
    case OP_RMSNORM: {
        talon_rmsnorm_args a;
        memset(&a, 0, sizeof a);
        a.out = ptr(L, T_OUT, set); a.in = ptr(L, T_IN, set); a.weight = ptr(L, T_W, set);
        a.rows = c->rows; a.cols = c->cols; a.eps = 1e-6f; a.dtype = c->dtype;
        TK(talon_rmsnorm(tctx, stream, &a));
        break;
    }
    case OP_FUSED_ADD_RMSNORM: {
        talon_fused_add_rmsnorm_args a;
        memset(&a, 0, sizeof a);
        a.in = ptr(L, T_IN, set); a.residual = ptr(L, T_RES, set); a.weight = ptr(L, T_W, set);
        a.rows = c->rows; a.cols = c->cols; a.eps = 1e-6f; a.dtype = c->dtype;
        TK(talon_fused_add_rmsnorm(tctx, stream, &a));
        break;
    }
    case OP_LAYERNORM: {
        talon_layernorm_args a;
        memset(&a, 0, sizeof a);
        a.out = ptr(L, T_OUT, set); a.in = ptr(L, T_IN, set);
        a.weight = ptr(L, T_W, set); a.bias = ptr(L, T_B, set);
        a.rows = c->rows; a.cols = c->cols; a.eps = 1e-5f; a.dtype = c->dtype;
        TK(talon_layernorm(tctx, stream, &a));
        break;
    }
    case OP_SILU: {
        talon_silu_and_mul_args a;
        memset(&a, 0, sizeof a);
        a.out = ptr(L, T_OUT, set); a.in = ptr(L, T_IN, set);
        a.rows = c->rows; a.cols = c->cols; a.dtype = c->dtype;
        TK(talon_silu_and_mul(tctx, stream, &a));
        break;
    }
    case OP_GELU_ERF:
    case OP_GELU_TANH: {
        talon_gelu_and_mul_args a;
        memset(&a, 0, sizeof a);
        a.out = ptr(L, T_OUT, set); a.in = ptr(L, T_IN, set);
        a.rows = c->rows; a.cols = c->cols; a.dtype = c->dtype;
        a.approx = c->op == OP_GELU_TANH ? TALON_GELU_TANH : TALON_GELU_ERF;
        TK(talon_gelu_and_mul(tctx, stream, &a));
        break;
    }
    }
}

/* ---------------------------------------------------------------- timing */
static CUevent ev_start[MAX_RUNS], ev_end[MAX_RUNS];

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct timing {
    double median_us, min_us;
} timing;

/* Reads the runs event pairs after the stream finished; samples sorted in place. */
static timing collect(int runs) {
    float us[MAX_RUNS];
    timing t;
    CK(cu.cuStreamSynchronize(stream));
    for (int i = 0; i < runs; i++) {
        float ms = 0;
        CK(cu.cuEventElapsedTime(&ms, ev_start[i], ev_end[i]));
        us[i] = ms * 1000.0f;
    }
    qsort(us, (size_t)runs, sizeof us[0], cmp_float);
    t.median_us = runs % 2 ? us[runs / 2] : 0.5 * ((double)us[runs / 2 - 1] + us[runs / 2]);
    t.min_us = us[0];
    return t;
}

static timing time_copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    for (int i = 0; i < COPY_WARMUP; i++) CK(cu.cuMemcpyDtoDAsync(dst, src, bytes, stream));
    CK(cu.cuStreamSynchronize(stream));
    for (int i = 0; i < COPY_RUNS; i++) {
        CK(cu.cuEventRecord(ev_start[i], stream));
        CK(cu.cuMemcpyDtoDAsync(dst, src, bytes, stream));
        CK(cu.cuEventRecord(ev_end[i], stream));
    }
    return collect(COPY_RUNS);
}

/* Keeps the GPU busy with copies (~20 us of GPU time per run to come) so the timed launches
   queue up behind them: the events then measure the kernels, not the host's launch gaps,
   as in graph replay or a busy engine. peers.py does the same with torch.cuda._sleep. */
#define HOLD_BYTES (256 * MIB)
static CUdeviceptr hold_src, hold_dst;
static void hold_queue(int runs) {
    for (int i = 0; i < runs / 8 + 1; i++)
        CK(cu.cuMemcpyDtoDAsync(hold_dst, hold_src, HOLD_BYTES, stream));
}

/* Runs warmup + runs launches on consecutive sets; returns the timing of the runs and the
   last set used in *last. */
static timing time_case(const bench_case *c, const layout *L, int runs, int *last) {
    int k = 0;
    for (int i = 0; i < WARMUP; i++) launch(c, L, k++ % L->nsets);
    CK(cu.cuStreamSynchronize(stream));
    hold_queue(runs);
    for (int i = 0; i < runs; i++) {
        CK(cu.cuEventRecord(ev_start[i], stream));
        launch(c, L, k++ % L->nsets);
        CK(cu.cuEventRecord(ev_end[i], stream));
    }
    *last = (k - 1) % L->nsets;
    return collect(runs);
}

/* Output sanity: the first row of tensor t in set must be finite and not all zero. */
static void check_row(const bench_case *c, const layout *L, int t, int set, const char *what) {
    size_t n = (size_t)c->cols;
    uint16_t *h = xmalloc(n * 2);
    int nonzero = 0;
    CK(cu.cuMemcpyDtoH(h, ptr(L, t, set), n * 2));
    for (size_t i = 0; i < n; i++) {
        float x = ref_to_f32(c->dtype, h[i]);
        if (!isfinite(x)) {
            fprintf(stderr, "talon-bench: %s %lldx%lld: %s[0][%zu] is not finite (%g)\n",
                    op_name[c->op], (long long)c->rows, (long long)c->cols, what, i, (double)x);
            exit(1);
        }
        nonzero |= x != 0.0f;
    }
    if (!nonzero) {
        fprintf(stderr, "talon-bench: %s %lldx%lld: %s[0] is all zeros\n", op_name[c->op],
                (long long)c->rows, (long long)c->cols, what);
        exit(1);
    }
    free(h);
}

/* ---------------------------------------------------------------- output */
typedef struct result {
    const bench_case *c;
    double bytes, us, min_us, gbs, pct;
    int nsets, runs;
    size_t set_bytes;
} result;

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static int write_json(const char *path, const char *gpu_name, const char *date, double copy_gbs,
                      double copy_us, const result *res, int n) {
    const talon_bundle_info *bi = talon_bundle_info_get();
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\n  \"gpu\": ");
    json_string(f, gpu_name);
    fprintf(f, ",\n  \"date\": \"%s\",\n", date);
    fprintf(f, "  \"talon_version\": \"%s\",\n  \"git_commit\": ", TALON_VERSION_STRING);
    json_string(f, bi->git_commit ? bi->git_commit : "");
    fprintf(f, ",\n  \"nvcc_version\": ");
    json_string(f, bi->nvcc_version ? bi->nvcc_version : "");
    fprintf(f, ",\n  \"copy_gbs\": %.1f,\n  \"copy_us\": %.2f,\n  \"copy_traffic_bytes\": %zu,\n",
            copy_gbs, copy_us, 2 * COPY_BYTES);
    fprintf(f, "  \"l2_bytes\": %zu,\n  \"rotate_bytes\": %zu,\n  \"warmup\": %d,\n",
            L2_BYTES, ROTATE_BYTES, WARMUP);
    fprintf(f, "  \"results\": [\n");
    for (int i = 0; i < n; i++) {
        const result *r = &res[i];
        const bench_case *c = r->c;
        fprintf(f, "    {\"op\": \"%s\", \"api\": \"%s\", \"dtype\": \"%s\", \"rows\": %lld, "
                   "\"cols\": %lld",
                op_name[c->op], op_api[c->op], c->dtype == TALON_DTYPE_F16 ? "f16" : "bf16",
                (long long)c->rows, (long long)c->cols);
        if (is_gated(c->op)) fprintf(f, ", \"in_cols\": %lld", (long long)(2 * c->cols));
        if (c->op == OP_GELU_ERF || c->op == OP_GELU_TANH)
            fprintf(f, ", \"approx\": \"%s\"", c->op == OP_GELU_TANH ? "tanh" : "erf");
        fprintf(f, ", \"bytes\": %.0f, \"sets\": %d, \"set_bytes\": %zu, \"warmup\": %d, "
                   "\"runs\": %d, \"us\": %.3f, \"min_us\": %.3f, \"gbs\": %.1f, "
                   "\"pct_copy\": %.1f}%s\n",
                r->bytes, r->nsets, r->set_bytes, WARMUP, r->runs, r->us, r->min_us, r->gbs,
                r->pct, i + 1 < n ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: talon-bench [--json FILE] [--filter SUBSTRING]\n"
               "  times talon's ops (median of CUDA-event-timed runs) against the device copy\n"
               "  ceiling; --filter runs only ops whose name contains SUBSTRING\n");
}

int main(int argc, char **argv) {
    const char *json = NULL, *filter = NULL;
    char err[256], date[16];
    gpu g;
    talon_ctx_options opts;
    result res[NUM_CASES];
    int nres = 0;
    double copy_gbs;
    timing ct;
    time_t now = time(NULL);
    struct tm tmv;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if (!localtime_r(&now, &tmv) || !strftime(date, sizeof date, "%Y-%m-%d", &tmv))
        die("cannot read the date");

    if (gpu_open(&g, err, sizeof err) != 0) die(err);
    memset(&opts, 0, sizeof opts);
    opts.flags = TALON_CTX_PRELOAD;
    TK(talon_ctx_create(&tctx, &opts));
    CK(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < MAX_RUNS; i++) {
        CK(cu.cuEventCreate(&ev_start[i], CU_EVENT_DEFAULT));
        CK(cu.cuEventCreate(&ev_end[i], CU_EVENT_DEFAULT));
    }
    make_pools();

    /* copy ceiling */
    {
        CUdeviceptr src, dst;
        CK(cu.cuMemAlloc(&src, COPY_BYTES));
        CK(cu.cuMemAlloc(&dst, COPY_BYTES));
        upload(src, COPY_BYTES, TALON_DTYPE_BF16, POOL_X);
        CK(cu.cuMemsetD8(dst, 0x3c, COPY_BYTES));
        CK(cu.cuCtxSynchronize());
        ct = time_copy(dst, src, COPY_BYTES);
        CK(cu.cuMemFree(src));
        CK(cu.cuMemFree(dst));
        CK(cu.cuMemAlloc(&hold_src, HOLD_BYTES));
        CK(cu.cuMemAlloc(&hold_dst, HOLD_BYTES));
        copy_gbs = 2.0 * (double)COPY_BYTES / (ct.median_us * 1e-6) / 1e9;
    }
    printf("talon-bench %s on %s, %s\n", TALON_VERSION_STRING, g.name, date);
    printf("copy ceiling: cuMemcpyDtoDAsync 1 GiB, %.1f us median of %d -> %.1f GB/s (read + "
           "write)\n",
           ct.median_us, COPY_RUNS, copy_gbs);
    printf("method: warm-up %d, median of %d (small) / %d (large) runs, each between its own "
           "CUDA events;\n        inputs rotate over sets totalling > %zu MiB (4x L2)\n\n",
           WARMUP, RUNS_SMALL, RUNS_LARGE, ROTATE_BYTES / MIB);
    printf("%-18s %-5s %6s %14s %6s %5s %10s %10s %9s %7s\n", "op", "dtype", "rows", "cols",
           "sets", "runs", "us", "min us", "GB/s", "% copy");
    fflush(stdout);

    for (int i = 0; i < NUM_CASES; i++) {
        const bench_case *c = &cases[i];
        layout L;
        result *r;
        timing t;
        int last;
        char colstr[32];
        if (filter && !strstr(op_name[c->op], filter)) continue;
        layout_create(&L, c);
        r = &res[nres++];
        r->c = c;
        r->runs = (size_t)c->rows * (size_t)c->cols * 2 * (is_gated(c->op) ? 2 : 1) < SMALL_BYTES
                      ? RUNS_SMALL
                      : RUNS_LARGE;
        t = time_case(c, &L, r->runs, &last);
        check_row(c, &L, c->op == OP_FUSED_ADD_RMSNORM ? T_IN : T_OUT, last, "out");
        if (c->op == OP_FUSED_ADD_RMSNORM) check_row(c, &L, T_RES, last, "residual");
        r->bytes = op_bytes(c);
        r->us = t.median_us;
        r->min_us = t.min_us;
        r->gbs = r->bytes / (t.median_us * 1e-6) / 1e9;
        r->pct = 100.0 * r->gbs / copy_gbs;
        r->nsets = L.nsets;
        r->set_bytes = L.set_bytes;
        layout_destroy(&L);
        if (is_gated(c->op))
            snprintf(colstr, sizeof colstr, "(2x%lld)", (long long)c->cols);
        else
            snprintf(colstr, sizeof colstr, "%lld", (long long)c->cols);
        printf("%-18s %-5s %6lld %14s %6d %5d %10.2f %10.2f %9.1f %6.1f%%\n", op_name[c->op],
               c->dtype == TALON_DTYPE_F16 ? "f16" : "bf16", (long long)c->rows, colstr, r->nsets,
               r->runs, r->us, r->min_us, r->gbs, r->pct);
        fflush(stdout);
    }

    if (json) {
        if (write_json(json, g.name, date, copy_gbs, ct.median_us, res, nres) != 0) {
            fprintf(stderr, "talon-bench: cannot write %s\n", json);
            return 1;
        }
        printf("\nwrote %s\n", json);
    }

    CK(cu.cuMemFree(hold_src));
    CK(cu.cuMemFree(hold_dst));
    for (int i = 0; i < MAX_RUNS; i++) {
        CK(cu.cuEventDestroy(ev_start[i]));
        CK(cu.cuEventDestroy(ev_end[i]));
    }
    CK(cu.cuStreamDestroy(stream));
    talon_ctx_destroy(tctx);
    for (int t = 0; t < 2; t++)
        for (int p = 0; p < NUM_POOLS; p++) free(pools[t][p]);
    return 0;
}
