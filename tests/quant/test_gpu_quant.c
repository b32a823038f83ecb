/* GPU tests of talon_quant_fp8 (H100/H200): per-tensor, per-row and per-group (128) scales,
   bf16 and f16 inputs, odd shapes (rows 1, 7, 129, 1000; cols 16 to 16384: rows of a warp,
   8 a block, up to 1024, and rows longer than a block holds in registers; per group 1, 3, 6,
   .. 128 groups a row, the last block's groups partly past the end), strided views, both
   group scale layouts, against the CPU reference
   of ref_quant.h, bit-exact on every output byte and every scale. Rows span magnitudes 2^-12 to
   2^12; some rows hold zeros only, a NaN, an inf or (per tensor) values far past the scale's
   range (saturation). Outputs are poisoned first: the padding between rows of out, a guard
   after it and the unused entries of the group scales must stay poisoned. Also CUDA graph
   capture and replay. talon_rmsnorm_quant_fp8 against talon_rmsnorm (talon_fused_add_rmsnorm)
   then talon_quant_fp8, bit for bit. TALON_TEST_QUICK=1 (for compute-sanitizer) runs fewer
   shapes. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gpu.h"
#include "ref.h"
#include "ref_quant.h"
#include "talon.h"

#define GUARD 256
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static long long g_cases, g_elements;

typedef struct qcase {
    talon_dtype dt;
    talon_quant_mode mode;
    int64_t rows, cols;
    int pad;       /* extra elements per row of in and out (multiple of 16) */
    int row_major; /* GROUP: row-major scales (else the default group-major layout) */
} qcase;

typedef struct job {
    qcase c;
    int64_t ld, groups, rs, gs, n_scales; /* ld: both row strides; scale layout */
    float *x;                             /* the exact inputs, rows x cols */
    uint16_t *hin;
    uint8_t *hout, *want;
    float *hscale, *want_scale;
    CUdeviceptr din, dout, dscale;
} job;

static void describe(const qcase *c, char *s, size_t n) {
    snprintf(s, n, "%s mode %d rows %lld cols %lld pad %d row_major %d",
             c->dt == TALON_DTYPE_BF16 ? "bf16" : "f16", (int)c->mode, (long long)c->rows,
             (long long)c->cols, c->pad, c->row_major);
}

static void job_free(job *j) {
    free(j->x); free(j->hin); free(j->hout); free(j->want); free(j->hscale); free(j->want_scale);
    if (j->din) cu.cuMemFree(j->din);
    if (j->dout) cu.cuMemFree(j->dout);
    if (j->dscale) cu.cuMemFree(j->dscale);
    memset(j, 0, sizeof *j);
}

static int job_prepare(job *j, const qcase *c) {
    const int64_t n = c->rows * c->cols;
    memset(j, 0, sizeof *j);
    j->c = *c;
    j->ld = c->cols + c->pad;
    j->groups = c->cols / 128;
    j->rs = c->row_major ? j->groups : 1;
    j->gs = c->row_major ? 1 : (c->rows + 3) / 4 * 4;
    j->n_scales = c->mode == TALON_QUANT_TOKEN ? c->rows
                  : c->mode == TALON_QUANT_GROUP ? (c->row_major ? c->rows * j->groups : j->gs * j->groups)
                                                 : 1;
    j->x = malloc((size_t)n * sizeof(float));
    j->hin = malloc((size_t)(c->rows * j->ld) * 2);
    j->hout = malloc((size_t)(c->rows * j->ld + GUARD));
    j->want = malloc((size_t)(c->rows * j->ld + GUARD));
    j->hscale = malloc((size_t)j->n_scales * 4);
    j->want_scale = malloc((size_t)j->n_scales * 4);
    if (!j->x || !j->hin || !j->hout || !j->want || !j->hscale || !j->want_scale) return -1;
    if (cu.cuMemAlloc(&j->din, (size_t)(c->rows * j->ld) * 2) ||
        cu.cuMemAlloc(&j->dout, (size_t)(c->rows * j->ld + GUARD)) ||
        cu.cuMemAlloc(&j->dscale, (size_t)j->n_scales * 4))
        return -1;
    return 0;
}

/* Fresh inputs: row r uniform in +-2^e_r (e_r in [-12, 12]); row 1 all zeros, row 2 one NaN,
   row 3 one inf, row 4 (per tensor) 2^14 times larger. The expected bytes and scales. */
static int job_upload(job *j, uint64_t seed) {
    const qcase *c = &j->c;
    const float poison_scale = -1.f;
    uint64_t s = ref_mix64(seed);
    float tensor_scale = 0.f;
    int64_t r, t, g;
    for (r = 0; r < c->rows; r++) {
        const float mag = ldexpf(1.f, (int)(ref_unit01(&s) * 25.f) - 12);
        for (t = 0; t < j->ld; t++) {
            uint16_t b = 0xFFFF; /* padding: NaN */
            if (t < c->cols) {
                float v = (2.f * ref_unit01(&s) - 1.f) * mag;
                if (r == 1 && c->rows > 4) v = 0.f;
                if (r == 2 && t == c->cols / 3) v = NAN;
                if (r == 3 && t == c->cols / 2) v = INFINITY;
                if (r == 4 && c->mode == TALON_QUANT_TENSOR) v *= 0x1p14f;
                b = ref_from_f32(c->dt, v);
                j->x[r * c->cols + t] = ref_to_f32(c->dt, b);
            }
            j->hin[r * j->ld + t] = b;
        }
    }
    memset(j->want, 0xFF, (size_t)(c->rows * j->ld + GUARD));
    for (r = 0; r < j->n_scales; r++) j->want_scale[r] = poison_scale;
    if (c->mode == TALON_QUANT_TENSOR) {
        tensor_scale = 0x1p-8f + ref_unit01(&s);
        j->want_scale[0] = tensor_scale;
    }
    for (r = 0; r < c->rows; r++) {
        const float *x = j->x + r * c->cols;
        uint8_t *q = j->want + r * j->ld;
        if (c->mode == TALON_QUANT_TENSOR) {
            ref_quant_e4m3(x, c->cols, tensor_scale, q);
        } else if (c->mode == TALON_QUANT_TOKEN) {
            j->want_scale[r] = ref_quant_scale(ref_quant_amax(x, c->cols));
            ref_quant_e4m3(x, c->cols, j->want_scale[r], q);
        } else {
            for (g = 0; g < j->groups; g++) {
                const float sc = ref_quant_scale(ref_quant_amax(x + g * 128, 128));
                j->want_scale[r * j->rs + g * j->gs] = sc;
                ref_quant_e4m3(x + g * 128, 128, sc, q + g * 128);
            }
        }
    }
    for (r = 0; r < j->n_scales; r++) j->hscale[r] = poison_scale;
    if (c->mode == TALON_QUANT_TENSOR) j->hscale[0] = tensor_scale;
    if (cu.cuMemcpyHtoD(j->din, j->hin, (size_t)(c->rows * j->ld) * 2) ||
        cu.cuMemcpyHtoD(j->dscale, j->hscale, (size_t)j->n_scales * 4) ||
        cu.cuMemsetD8(j->dout, 0xFF, (size_t)(c->rows * j->ld + GUARD)))
        return -1;
    return 0;
}

static talon_status job_launch(const job *j, CUstream stream) {
    talon_quant_fp8_args a;
    memset(&a, 0, sizeof a);
    a.out = j->dout; a.in = j->din; a.scale = j->dscale;
    a.rows = j->c.rows; a.cols = j->c.cols;
    if (j->c.pad) a.out_stride = a.in_stride = j->ld;
    if (j->c.row_major) { a.scale_row_stride = j->rs; a.scale_group_stride = j->gs; }
    a.mode = j->c.mode; a.dtype = j->c.dt;
    return talon_quant_fp8(g_ctx, stream, &a);
}

static int job_check(job *j, long long *elements) {
    const qcase *c = &j->c;
    const int64_t bytes = c->rows * j->ld + GUARD;
    int64_t bad = 0, i;
    char what[200] = "", desc[200];
    if (cu.cuMemcpyDtoH(j->hout, j->dout, (size_t)bytes) ||
        cu.cuMemcpyDtoH(j->hscale, j->dscale, (size_t)j->n_scales * 4))
        return -1;
    for (i = 0; i < bytes; i++)
        if (j->hout[i] != j->want[i] && !bad++)
            snprintf(what, sizeof what, "out byte %lld (row %lld col %lld) = 0x%02x, want 0x%02x",
                     (long long)i, (long long)(i / j->ld), (long long)(i % j->ld), j->hout[i],
                     j->want[i]);
    for (i = 0; i < j->n_scales; i++)
        if (memcmp(&j->hscale[i], &j->want_scale[i], 4) && !bad++)
            snprintf(what, sizeof what, "scale %lld = %a, want %a", (long long)i,
                     (double)j->hscale[i], (double)j->want_scale[i]);
    *elements += c->rows * c->cols;
    if (bad) {
        describe(c, desc, sizeof desc);
        print_error("FAILED %s: %lld mismatches, first: %s\n", desc, (long long)bad, what);
    }
    return bad ? -1 : 0;
}

static void run_case(gpu_tally *t, const qcase *c, uint64_t seed) {
    job j;
    char desc[200];
    int rc = job_prepare(&j, c);
    talon_status s = TALON_SUCCESS;
    CUresult e = CUDA_SUCCESS;
    t->cases++;
    if (!rc) rc = job_upload(&j, seed);
    if (!rc && (s = job_launch(&j, g_stream)) != TALON_SUCCESS) rc = -1;
    if (!rc && (e = cu.cuStreamSynchronize(g_stream)) != CUDA_SUCCESS) rc = -1;
    if (rc) {
        describe(c, desc, sizeof desc);
        print_error("FAILED %s: setup/launch: %s %s\n", desc, s ? talon_last_error() : "",
                    e ? gpu_error(e) : "");
    } else {
        rc = job_check(&j, &t->elements);
    }
    if (rc) t->failures++;
    job_free(&j);
    if (e != CUDA_SUCCESS) fail();
}

#define BF TALON_DTYPE_BF16
#define HF TALON_DTYPE_F16

static void test_modes(void **state) {
    static const int64_t rows_full[] = {1, 7, 129, 1000}, rows_quick[] = {7, 129};
    static const int64_t cols_full[] = {16, 128, 144, 384, 768, 1024, 1040, 4096, 4112, 7168, 16384},
                         cols_quick[] = {16, 1024, 4112, 16384};
    const int64_t *rows = g_quick ? rows_quick : rows_full, *cols = g_quick ? cols_quick : cols_full;
    const int nr = g_quick ? COUNT(rows_quick) : COUNT(rows_full);
    const int nc = g_quick ? COUNT(cols_quick) : COUNT(cols_full);
    gpu_tally t;
    int m, r, k, d;
    (void)state;
    gpu_tally_start(&t, "quant_fp8");
    for (m = 0; m < 3; m++)
        for (r = 0; r < nr; r++)
            for (k = 0; k < nc; k++)
                for (d = 0; d < 2; d++) {
                    qcase c = {d ? HF : BF, (talon_quant_mode)m, rows[r], cols[k], 0, 0};
                    if (m == TALON_QUANT_GROUP && cols[k] % 128) continue;
                    if ((r + k + d) % 3 == 1) c.pad = 16 * (1 + k % 3);
                    if (m == TALON_QUANT_GROUP) c.row_major = (r + d) % 2;
                    run_case(&t, &c, 0x9A00 + (uint64_t)(m * 1000 + r * 100 + k * 10 + d));
                }
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

static void test_graph(void **state) {
    static const qcase cases[] = {{BF, TALON_QUANT_TOKEN, 129, 4096, 16, 0},
                                  {HF, TALON_QUANT_GROUP, 7, 7168, 0, 0}};
    gpu_tally t;
    int i, rep;
    (void)state;
    gpu_tally_start(&t, "quant_fp8_graph");
    for (i = 0; i < COUNT(cases); i++) {
        job j;
        CUgraph graph = NULL;
        CUgraphExec exec = NULL;
        assert_int_equal(job_prepare(&j, &cases[i]), 0);
        assert_int_equal(cu.cuStreamBeginCapture(g_stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
        assert_int_equal(job_launch(&j, g_stream), TALON_SUCCESS);
        assert_int_equal(cu.cuStreamEndCapture(g_stream, &graph), CUDA_SUCCESS);
        assert_int_equal(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
        for (rep = 0; rep < 3; rep++) {
            t.cases++;
            assert_int_equal(job_upload(&j, 0x9B00 + (uint64_t)(i * 10 + rep)), 0);
            assert_int_equal(cu.cuGraphLaunch(exec, g_stream), CUDA_SUCCESS);
            assert_int_equal(cu.cuStreamSynchronize(g_stream), CUDA_SUCCESS);
            if (job_check(&j, &t.elements)) t.failures++;
        }
        cu.cuGraphExecDestroy(exec);
        cu.cuGraphDestroy(graph);
        job_free(&j);
    }
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* ---------------------------------------------------------------- rmsnorm -> fp8 */
/* talon_rmsnorm_quant_fp8 against talon_rmsnorm (with a residual: talon_fused_add_rmsnorm)
   then talon_quant_fp8 on copies of the same inputs, the norms on views of the same alignment
   (so the same path and summation order): out (padding and guard included), scales and the
   updated residual bit for bit, in untouched. Both paths: 16-byte (aligned) and element-wise
   (in 8 bytes off alignment). */
typedef struct ncase {
    talon_dtype dt;
    talon_quant_mode mode;
    int64_t rows, cols;
    int residual, pad, misalign;
} ncase;

static void run_norm_case(gpu_tally *t, const ncase *c, uint64_t seed) {
    const int64_t ld = c->cols + c->pad, off = c->misalign ? 4 : 0, n16 = c->rows * ld + off;
    const int64_t obytes = c->rows * ld + GUARD, nscale = c->mode == TALON_QUANT_TOKEN ? c->rows : 1;
    uint16_t *hx = malloc((size_t)n16 * 2), *hr = malloc((size_t)n16 * 2), *hw = malloc((size_t)c->cols * 2);
    uint16_t *gx = malloc((size_t)n16 * 2), *gr = malloc((size_t)n16 * 2), *gr2 = malloc((size_t)n16 * 2);
    uint8_t *o1 = malloc((size_t)obytes), *o2 = malloc((size_t)obytes);
    float *s1 = malloc((size_t)nscale * 4), *s2 = malloc((size_t)nscale * 4);
    CUdeviceptr dx = 0, dr = 0, dw = 0, dx2 = 0, dr2 = 0, dy = 0, do1 = 0, do2 = 0, ds1 = 0, ds2 = 0;
    uint64_t s = ref_mix64(seed);
    int64_t i, bad = 0;
    float given = 0.f;
    char what[200] = "";
    t->cases++;
    assert_true(hx && hr && hw && gx && gr && gr2 && o1 && o2 && s1 && s2);
    for (i = 0; i < n16; i++) {
        const float mag = ldexpf(1.f, (int)((i / ld) % 7) - 3);
        hx[i] = ref_from_f32(c->dt, (2.f * ref_unit01(&s) - 1.f) * mag);
        hr[i] = ref_from_f32(c->dt, (2.f * ref_unit01(&s) - 1.f) * mag);
    }
    for (i = 0; i < c->cols; i++) hw[i] = ref_from_f32(c->dt, 0.5f + ref_unit01(&s));
    given = 0.002f + 0.01f * ref_unit01(&s);
    assert_int_equal(cu.cuMemAlloc(&dx, (size_t)n16 * 2) | cu.cuMemAlloc(&dr, (size_t)n16 * 2) |
                     cu.cuMemAlloc(&dw, (size_t)c->cols * 2) | cu.cuMemAlloc(&dx2, (size_t)n16 * 2) |
                     cu.cuMemAlloc(&dr2, (size_t)n16 * 2) | cu.cuMemAlloc(&dy, (size_t)n16 * 2) |
                     cu.cuMemAlloc(&do1, (size_t)obytes) | cu.cuMemAlloc(&do2, (size_t)obytes) |
                     cu.cuMemAlloc(&ds1, (size_t)nscale * 4) | cu.cuMemAlloc(&ds2, (size_t)nscale * 4),
                     CUDA_SUCCESS);
    assert_int_equal(cu.cuMemcpyHtoD(dx, hx, (size_t)n16 * 2) | cu.cuMemcpyHtoD(dr, hr, (size_t)n16 * 2) |
                     cu.cuMemcpyHtoD(dx2, hx, (size_t)n16 * 2) | cu.cuMemcpyHtoD(dr2, hr, (size_t)n16 * 2) |
                     cu.cuMemcpyHtoD(dw, hw, (size_t)c->cols * 2) |
                     cu.cuMemsetD8(do1, 0xFF, (size_t)obytes) | cu.cuMemsetD8(do2, 0xFF, (size_t)obytes),
                     CUDA_SUCCESS);
    /* the given scale, or -1 where scales will be written */
    for (i = 0; i < nscale; i++) s1[i] = c->mode == TALON_QUANT_TENSOR ? given : -1.f;
    assert_int_equal(cu.cuMemcpyHtoD(ds1, s1, (size_t)nscale * 4) |
                     cu.cuMemcpyHtoD(ds2, s1, (size_t)nscale * 4), CUDA_SUCCESS);
    {   /* fused */
        talon_rmsnorm_quant_fp8_args a;
        memset(&a, 0, sizeof a);
        a.out = do1; a.scale = ds1; a.in = dx + (CUdeviceptr)(off * 2); a.weight = dw;
        a.residual = c->residual ? dr + (CUdeviceptr)(off * 2) : 0;
        a.rows = c->rows; a.cols = c->cols; a.eps = 1e-6f; a.mode = c->mode; a.dtype = c->dt;
        if (c->pad) a.out_stride = a.in_stride = a.residual_stride = ld;
        if (talon_rmsnorm_quant_fp8(g_ctx, g_stream, &a)) {
            print_error("rmsnorm_quant_fp8: %s\n", talon_last_error());
            fail();
        }
    }
    {   /* the two ops */
        talon_quant_fp8_args q;
        memset(&q, 0, sizeof q);
        if (c->residual) {
            talon_fused_add_rmsnorm_args f;
            memset(&f, 0, sizeof f);
            f.in = dx2 + (CUdeviceptr)(off * 2); f.residual = dr2 + (CUdeviceptr)(off * 2);
            f.weight = dw; f.rows = c->rows; f.cols = c->cols; f.eps = 1e-6f; f.dtype = c->dt;
            if (c->pad) f.in_stride = f.residual_stride = ld;
            assert_int_equal(talon_fused_add_rmsnorm(g_ctx, g_stream, &f), TALON_SUCCESS);
            /* the normalised rows, to a 16-byte aligned buffer for talon_quant_fp8 */
            assert_int_equal(cu.cuMemcpyDtoDAsync(dy, f.in, (size_t)(n16 - off) * 2, g_stream),
                             CUDA_SUCCESS);
            q.in = dy;
        } else {
            talon_rmsnorm_args r;
            memset(&r, 0, sizeof r);
            r.out = dy; r.in = dx2 + (CUdeviceptr)(off * 2); r.weight = dw; r.rows = c->rows;
            r.cols = c->cols;
            r.eps = 1e-6f; r.dtype = c->dt;
            if (c->pad) r.out_stride = r.in_stride = ld;
            assert_int_equal(talon_rmsnorm(g_ctx, g_stream, &r), TALON_SUCCESS);
            q.in = dy;
        }
        q.out = do2; q.scale = ds2; q.rows = c->rows; q.cols = c->cols; q.mode = c->mode;
        q.dtype = c->dt;
        if (c->pad) q.out_stride = q.in_stride = ld;
        assert_int_equal(talon_quant_fp8(g_ctx, g_stream, &q), TALON_SUCCESS);
    }
    assert_int_equal(cu.cuStreamSynchronize(g_stream), CUDA_SUCCESS);
    assert_int_equal(cu.cuMemcpyDtoH(o1, do1, (size_t)obytes) | cu.cuMemcpyDtoH(o2, do2, (size_t)obytes) |
                     cu.cuMemcpyDtoH(s1, ds1, (size_t)nscale * 4) | cu.cuMemcpyDtoH(s2, ds2, (size_t)nscale * 4) |
                     cu.cuMemcpyDtoH(gx, dx, (size_t)n16 * 2) | cu.cuMemcpyDtoH(gr, dr, (size_t)n16 * 2) |
                     cu.cuMemcpyDtoH(gr2, dr2, (size_t)n16 * 2), CUDA_SUCCESS);
    for (i = 0; i < obytes; i++)
        if (o1[i] != o2[i] && !bad++)
            snprintf(what, sizeof what, "out byte %lld = 0x%02x, the two ops' 0x%02x", (long long)i, o1[i], o2[i]);
    for (i = 0; i < nscale; i++)
        if (memcmp(&s1[i], &s2[i], 4) && !bad++)
            snprintf(what, sizeof what, "scale %lld = %a, the two ops' %a", (long long)i, (double)s1[i], (double)s2[i]);
    if (memcmp(gx, hx, (size_t)n16 * 2) && !bad++) snprintf(what, sizeof what, "in was written");
    if (c->residual && memcmp(gr, gr2, (size_t)n16 * 2) && !bad++)
        snprintf(what, sizeof what, "residual differs from fused_add_rmsnorm's");
    t->elements += c->rows * c->cols;
    if (bad) {
        print_error("FAILED rmsnorm_quant_fp8 %s mode %d rows %lld cols %lld residual %d pad %d "
                    "misalign %d: %lld mismatches, first: %s\n", c->dt == BF ? "bf16" : "f16",
                    (int)c->mode, (long long)c->rows, (long long)c->cols, c->residual, c->pad,
                    c->misalign, (long long)bad, what);
        t->failures++;
    }
    cu.cuMemFree(dx); cu.cuMemFree(dr); cu.cuMemFree(dw); cu.cuMemFree(dx2); cu.cuMemFree(dr2);
    cu.cuMemFree(dy); cu.cuMemFree(do1); cu.cuMemFree(do2); cu.cuMemFree(ds1); cu.cuMemFree(ds2);
    free(hx); free(hr); free(hw); free(gx); free(gr); free(gr2); free(o1); free(o2); free(s1); free(s2);
}

static void test_rmsnorm_fp8(void **state) {
    static const int64_t rows_full[] = {1, 7, 129}, cols_full[] = {16, 4096, 5120, 16384};
    static const int64_t rows_quick[] = {7}, cols_quick[] = {16, 5120, 16384};
    const int64_t *rows = g_quick ? rows_quick : rows_full, *cols = g_quick ? cols_quick : cols_full;
    const int nr = g_quick ? COUNT(rows_quick) : COUNT(rows_full);
    const int nc = g_quick ? COUNT(cols_quick) : COUNT(cols_full);
    gpu_tally t;
    int m, r, k, d, res;
    (void)state;
    gpu_tally_start(&t, "rmsnorm_quant_fp8");
    for (m = 0; m < 2; m++)
        for (r = 0; r < nr; r++)
            for (k = 0; k < nc; k++)
                for (d = 0; d < 2; d++)
                    for (res = 0; res < 2; res++) {
                        const int v = m + r + k + d + res;
                        ncase c = {d ? HF : BF, (talon_quant_mode)m, rows[r], cols[k], res,
                                   v % 3 == 1 ? 16 : 0, v % 4 == 2};
                        run_norm_case(&t, &c, 0x9C00 + (uint64_t)(m * 10000 + r * 1000 + k * 100 + d * 10 + res));
                    }
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_modes), cmocka_unit_test(test_graph),
                                       cmocka_unit_test(test_rmsnorm_fp8)};
    gpu_test t;
    int failed;
    if (gpu_test_begin(&t, "test_gpu_quant", CU_STREAM_DEFAULT)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon_quant_fp8 GPU", tests, NULL, NULL);
    return gpu_test_end(&t, " bit-exact", g_cases, g_elements, failed);
}
