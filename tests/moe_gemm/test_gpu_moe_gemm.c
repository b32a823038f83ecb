/* GPU tests of talon_moe_gemm (H100/H200) over the layout talon_moe_align_block_size builds on
   the same GPU from random routings: uniform, skewed (Zipf), every token to one expert, a
   quarter of the ids -1 (expert-parallel masking), and experts beyond those the call holds
   (experts < moe_align's). Every row layout pair (TOKEN / PAIR / SORTED a, SORTED / PAIR d),
   gated and plain epilogues with each activation, router weights, strided rows, bf16 and
   f16, both tile widths, T = 1 and odd n and k, decode sizes (<= 128 tokens, where halves
   of padding slots skip their products; <= 64, the transposed kernel, also with a routing
   that names an expert several times per token). Each written row is checked element by
   element against the fp64 reference (ref_moe_gemm.h; large cases: every row of a sample of
   slots), tolerance r |ref| + 2^-14 mag (r the output's rounding, mag the sum of |terms|);
   d is poisoned (0xFF bytes) first, and every row the op must not write (slots of skipped
   blocks, pairs without a valid expert, padding slots of a PAIR d), the row padding and a
   guard after d must stay poisoned; a's and b's row padding holds NaN. Also a CUDA graph
   replayed on fresh inputs, and the whole expert computation of an MoE layer (gate/up with
   SwiGLU -> down with router weights -> talon_moe_sum) against the fp64 MoE MLP.
   talon_grouped_gemm on the same kernels: the contiguous layout (groups of random sizes, 0
   included, padded to 128-row tiles; tiles of group -1 and of groups past `groups`; rows_used
   ending the walk early) and the masked layout (counts 0, full, odd, and out of range to be
   clamped), every row checked against the fp64 reference or still poisoned, and a graph of
   the masked layout replayed on new counts; fp8 e4m3 with DeepSeek-V3 block scales (values
   and power-of-two scales that make every k-block's product exact, so the tolerance is the
   bf16 output's rounding and one fp32 rounding per k-block), and with scales per tensor and
   per row (the tensor cores' accumulation over the whole row, as talon_gemm's tests), for
   talon_moe_gemm (gathered and sorted a; with scales per tensor or row also the transposed
   kernel) and the grouped GEMM. gpt-oss's epilogue on both ops: a bias per expert (group),
   which talon_moe_gemm's padding slots do not take, and CLAMPED_SWIGLU with limits that clamp
   often, seldom or never; and gpt-oss's whole expert block.
   TALON_TEST_QUICK=1 (compute-sanitizer) keeps every kernel variant on smaller problems. */
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
#include "gpu.h"
#include "ref.h"
#include "ref_moe_gemm.h"
#include "talon.h"

#define GUARD 256
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define SAMPLED_MACS 3e8 /* larger problems are checked on a sample of slots */

static talon_ctx *g_ctx;
static CUstream g_stream;
static int g_quick;
static long long g_cases, g_elements;

/* ROUTE_REPEAT: pick j of every token is expert j % 2, so experts 0 and 1 get several rows per
   token (a router never does this; the op must still be right) */
enum { ROUTE_UNIFORM, ROUTE_ZIPF, ROUTE_ONE, ROUTE_MASKED, ROUTE_REPEAT };

typedef struct mcase {
    talon_dtype dt;
    int64_t tokens, topk, experts, n, k;
    int gated;
    talon_gemm_act act;
    talon_moe_rows a_rows, d_rows;
    int weights; /* router weights multiply the rows */
    int route;   /* ROUTE_* */
    int64_t local; /* experts passed to moe_gemm (fewer: expert parallelism); 0: experts */
    int pad;     /* extra elements per row of a, b and d (multiples of 8; fp8: k + pad of 16) */
    talon_gemm_scale scale; /* bf16/f16: NONE; fp8: TENSOR, ROW or BLOCK */
    int bias;    /* a random bias [local, b rows] of d's type */
    float limit; /* act CLAMPED_SWIGLU: its limit (alpha: ALPHA) */
} mcase;

/* The routing and moe_align's layout of it, on the device and read back. */
typedef struct routing {
    int64_t tokens, topk, experts, sorted_cap, blocks_cap;
    int *ids, *sorted, *expert_ids, num_post;
    float *weights;
    CUdeviceptr d_ids, d_weights, d_sorted, d_expert_ids, d_post;
} routing;

static void routing_free(routing *r) {
    free(r->ids); free(r->sorted); free(r->expert_ids); free(r->weights);
    if (r->d_ids) cu.cuMemFree(r->d_ids);
    if (r->d_weights) cu.cuMemFree(r->d_weights);
    if (r->d_sorted) cu.cuMemFree(r->d_sorted);
    if (r->d_expert_ids) cu.cuMemFree(r->d_expert_ids);
    if (r->d_post) cu.cuMemFree(r->d_post);
    memset(r, 0, sizeof *r);
}

/* Random ids (distinct per token) by `route`, weights in [0.25, 1.25), then moe_align. */
static int routing_make(routing *r, int64_t tokens, int64_t topk, int64_t experts, int route,
                        uint64_t seed) {
    talon_moe_align_block_size_args al;
    uint64_t s = ref_mix64(seed);
    int64_t t, j, i, n = tokens * topk;
    double *cdf;
    memset(r, 0, sizeof *r);
    r->tokens = tokens; r->topk = topk; r->experts = experts;
    if (talon_moe_align_block_size_capacity(tokens, topk, experts, 128, &r->sorted_cap,
                                            &r->blocks_cap) != TALON_SUCCESS)
        return -1;
    r->ids = malloc((size_t)n * sizeof(int));
    r->weights = malloc((size_t)n * sizeof(float));
    r->sorted = malloc((size_t)r->sorted_cap * sizeof(int));
    r->expert_ids = malloc((size_t)r->blocks_cap * sizeof(int));
    cdf = malloc((size_t)experts * sizeof(double));
    if (!r->ids || !r->weights || !r->sorted || !r->expert_ids || !cdf) {
        free(cdf);
        return -1;
    }
    /* Zipf: P(e) ~ 1 / (e + 1)^1.2, drawn by inverting its distribution function */
    for (i = 0; i < experts; i++) cdf[i] = (i ? cdf[i - 1] : 0.0) + pow((double)(i + 1), -1.2);
    for (t = 0; t < tokens; t++)
        for (j = 0; j < topk; j++) {
            int e, dup;
            do {
                if (route == ROUTE_ZIPF) {
                    const double u = ref_unit01(&s) * cdf[experts - 1];
                    for (e = 0; e < experts - 1 && u >= cdf[e]; e++) {}
                } else if (route == ROUTE_ONE && j == 0) {
                    e = (int)(experts > 1 ? 1 : 0);
                } else if (route == ROUTE_REPEAT) {
                    e = (int)(j % 2 % experts);
                    break;
                } else {
                    e = (int)(ref_unit01(&s) * (float)experts) % (int)experts;
                }
                for (dup = 0, i = 0; i < j; i++) dup |= r->ids[t * topk + i] == e;
            } while (dup);
            r->ids[t * topk + j] = e;
            r->weights[t * topk + j] = 0.25f + ref_unit01(&s);
        }
    free(cdf);
    if (route == ROUTE_MASKED)
        for (i = 0; i < n; i++)
            if (ref_unit01(&s) < 0.25f) r->ids[i] = -1;
    r->d_ids = gpu_alloc((size_t)n * 4);
    r->d_weights = gpu_alloc((size_t)n * 4);
    r->d_sorted = gpu_alloc((size_t)r->sorted_cap * 4);
    r->d_expert_ids = gpu_alloc((size_t)r->blocks_cap * 4);
    r->d_post = gpu_alloc(4);
    if (!r->d_ids || !r->d_weights || !r->d_sorted || !r->d_expert_ids || !r->d_post) return -1;
    GPU_CK(cu.cuMemcpyHtoD(r->d_ids, r->ids, (size_t)n * 4));
    GPU_CK(cu.cuMemcpyHtoD(r->d_weights, r->weights, (size_t)n * 4));
    memset(&al, 0, sizeof al);
    al.sorted_token_ids = r->d_sorted; al.expert_ids = r->d_expert_ids;
    al.num_tokens_post_padded = r->d_post; al.topk_ids = r->d_ids;
    al.tokens = tokens; al.k = topk; al.experts = experts; al.block_size = 128;
    al.sorted_capacity = r->sorted_cap; al.expert_ids_capacity = r->blocks_cap;
    if (talon_moe_align_block_size(g_ctx, g_stream, &al) != TALON_SUCCESS) {
        print_error("moe_align: %s\n", talon_last_error());
        return -1;
    }
    GPU_CK(cu.cuStreamSynchronize(g_stream));
    GPU_CK(cu.cuMemcpyDtoH(r->sorted, r->d_sorted, (size_t)r->sorted_cap * 4));
    GPU_CK(cu.cuMemcpyDtoH(r->expert_ids, r->d_expert_ids, (size_t)r->blocks_cap * 4));
    GPU_CK(cu.cuMemcpyDtoH(&r->num_post, r->d_post, 4));
    if (gpu_call_failed) {
        gpu_call_failed = 0;
        return -1;
    }
    return 0;
}

/* A 16-bit matrix [rows, cols] with row stride ld: random values in [-1, 1) (exact copies in
   x, contiguous), NaN padding. */
static void fill(talon_dtype dt, int64_t rows, int64_t cols, int64_t ld, uint64_t *s, double *x,
                 uint16_t *h) {
    int64_t r, c;
    for (r = 0; r < rows; r++)
        for (c = 0; c < ld; c++) {
            if (c < cols) {
                h[r * ld + c] = ref_from_f32(dt, 2.f * ref_unit01(s) - 1.f);
                x[r * cols + c] = ref_to_f32(dt, h[r * ld + c]);
            } else {
                h[r * ld + c] = 0xFFFF;
            }
        }
}

/* fp8: an e4m3 matrix [rows, cols] with row stride ld of values in {0, +-1/4 .. +-2} (every
   k-block's sum of products exact in fp32), x the values times their block's scale
   scale(r, 128-column block), NaN padding. */
static void fill8(int64_t rows, int64_t cols, int64_t ld, uint64_t *s, double *x, uint8_t *h,
                  const float *scale, int64_t scale_row, int64_t scale_col) {
    static const float set[] = {0.f, 0.25f, -0.25f, 0.5f, -0.5f, 0.75f, -0.75f, 1.f, -1.f,
                                1.5f, -1.5f, 2.f, -2.f};
    int64_t r, c;
    for (r = 0; r < rows; r++)
        for (c = 0; c < ld; c++) {
            if (c < cols) {
                h[r * ld + c] = ref_e4m3_from_f32(set[ref_next64(s) % 13]);
                x[r * cols + c] = ref_e4m3_to_f64(h[r * ld + c]) *
                                  (double)scale[r * scale_row + (c / 128) * scale_col];
            } else {
                h[r * ld + c] = 0x7F;
            }
        }
}

/* fp8 scales: powers of two in [2^-3, 2^3] (exact products). */
static void fill_scales(float *x, int64_t n, uint64_t *s) {
    int64_t i;
    for (i = 0; i < n; i++) x[i] = ldexpf(1.f, (int)(ref_next64(s) % 7) - 3);
}

/* The bias of a case ([groups, b rows] of d's type: random values in [-1, 1), exact copies in
   x), or none (count 0). */
typedef struct bias_buf {
    int64_t count;
    double *x;
    uint16_t *h;
    CUdeviceptr d;
} bias_buf;

static int bias_alloc(bias_buf *b, int64_t count) {
    memset(b, 0, sizeof *b);
    if (!count) return 0;
    b->count = count;
    b->x = malloc((size_t)count * sizeof(double));
    b->h = malloc((size_t)count * 2);
    b->d = gpu_alloc((size_t)count * 2);
    return b->x && b->h && b->d ? 0 : -1;
}

static void bias_upload(bias_buf *b, talon_dtype out, uint64_t *s) {
    if (!b->count) return;
    fill(out, 1, b->count, b->count, s, b->x, b->h);
    GPU_CK(cu.cuMemcpyHtoD(b->d, b->h, (size_t)b->count * 2));
}

static void bias_free(bias_buf *b) {
    free(b->x);
    free(b->h);
    if (b->d) cu.cuMemFree(b->d);
    memset(b, 0, sizeof *b);
}

/* CLAMPED_SWIGLU's alpha in every case (gpt-oss's); limits per case */
#define ALPHA 1.702f

typedef struct job {
    mcase c;
    routing r;
    int64_t local, a_rows, d_rows, b_rows, lda, ldb, ldd, d_bytes;
    int64_t isize, n_as, n_bs; /* bytes an element of a and b; fp8: a_scale's, b_scale's floats */
    int64_t kb, rows4, bblocks; /* fp8 BLOCK: k-blocks, a_rows rounded up to 4, b's row blocks */
    double *a, *b;   /* the values (fp8: times their scales) */
    float *sa, *sb;  /* fp8: ROW a_scale [a_rows], b_scale [local, b_rows]; TENSOR [1], [local];
                        BLOCK [kb, rows4], [local, bblocks, kb] */
    unsigned char *ha, *hb, *hd;
    CUdeviceptr da, db, dd, dsa, dsb;
    bias_buf bias;
} job;

static void job_free(job *j) {
    routing_free(&j->r);
    bias_free(&j->bias);
    free(j->a); free(j->b); free(j->ha); free(j->hb); free(j->hd); free(j->sa); free(j->sb);
    if (j->dsa) cu.cuMemFree(j->dsa);
    if (j->dsb) cu.cuMemFree(j->dsb);
    if (j->da) cu.cuMemFree(j->da);
    if (j->db) cu.cuMemFree(j->db);
    if (j->dd) cu.cuMemFree(j->dd);
    memset(j, 0, sizeof *j);
}

static int64_t rows_of(talon_moe_rows rows, const routing *r) {
    return rows == TALON_MOE_ROWS_SORTED ? r->sorted_cap
           : rows == TALON_MOE_ROWS_TOKEN ? r->tokens : r->tokens * r->topk;
}

static int job_prepare(job *j, const mcase *c, uint64_t seed) {
    memset(j, 0, sizeof *j);
    j->c = *c;
    if (routing_make(&j->r, c->tokens, c->topk, c->experts, c->route, seed)) return -1;
    j->local = c->local ? c->local : c->experts;
    j->a_rows = rows_of(c->a_rows, &j->r);
    j->d_rows = rows_of(c->d_rows, &j->r);
    j->b_rows = (c->gated ? 2 : 1) * c->n;
    j->lda = c->k + c->pad; j->ldb = c->k + c->pad; j->ldd = c->n + c->pad;
    j->d_bytes = j->d_rows * j->ldd * 2 + GUARD;
    j->isize = c->dt == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
    j->a = malloc((size_t)(j->a_rows * c->k) * sizeof(double));
    j->b = malloc((size_t)(j->local * j->b_rows * c->k) * sizeof(double));
    j->ha = malloc((size_t)(j->a_rows * j->lda * j->isize));
    j->hb = malloc((size_t)(j->local * j->b_rows * j->ldb * j->isize));
    j->hd = malloc((size_t)j->d_bytes);
    if (!j->a || !j->b || !j->ha || !j->hb || !j->hd) return -1;
    j->da = gpu_alloc((size_t)(j->a_rows * j->lda * j->isize));
    j->db = gpu_alloc((size_t)(j->local * j->b_rows * j->ldb * j->isize));
    j->dd = gpu_alloc((size_t)j->d_bytes);
    if (bias_alloc(&j->bias, c->bias ? j->local * j->b_rows : 0)) return -1;
    if (j->isize == 1) {
        const int row = c->scale == TALON_GEMM_SCALE_ROW, block = c->scale == TALON_GEMM_SCALE_BLOCK;
        j->kb = (c->k + 127) / 128;
        j->rows4 = (j->a_rows + 3) / 4 * 4;
        j->bblocks = (j->b_rows + 127) / 128;
        j->n_as = block ? j->kb * j->rows4 : row ? j->a_rows : 1;
        j->n_bs = j->local * (block ? j->bblocks * j->kb : row ? j->b_rows : 1);
        j->sa = malloc((size_t)j->n_as * sizeof(float));
        j->sb = malloc((size_t)j->n_bs * sizeof(float));
        j->dsa = gpu_alloc((size_t)j->n_as * 4);
        j->dsb = gpu_alloc((size_t)j->n_bs * 4);
        if (!j->sa || !j->sb || !j->dsa || !j->dsb) return -1;
    }
    return j->da && j->db && j->dd ? 0 : -1;
}

/* Fresh a and b (from seed), uploaded; d poisoned. */
static int job_upload(job *j, uint64_t seed) {
    uint64_t s = ref_mix64(seed ^ 0xA5A5);
    if (j->isize == 1) {
        /* a: a row's scale (ROW), one (TENSOR) or a row's per k-block (BLOCK); b: a row's, its
           expert's or its 128 x 128 block's */
        const int row = j->c.scale == TALON_GEMM_SCALE_ROW, block = j->c.scale == TALON_GEMM_SCALE_BLOCK;
        int64_t r;
        fill_scales(j->sa, j->n_as, &s);
        fill_scales(j->sb, j->n_bs, &s);
        fill8(j->a_rows, j->c.k, j->lda, &s, j->a, j->ha, j->sa, row || block, block ? j->rows4 : 0);
        for (r = 0; r < j->local * j->b_rows; r++) {
            const int64_t e = r / j->b_rows, br = r % j->b_rows;
            fill8(1, j->c.k, j->ldb, &s, j->b + r * j->c.k, j->hb + r * j->ldb,
                  j->sb + (block ? (e * j->bblocks + br / 128) * j->kb : row ? r : e), 0, block);
        }
        GPU_CK(cu.cuMemcpyHtoD(j->dsa, j->sa, (size_t)j->n_as * 4));
        GPU_CK(cu.cuMemcpyHtoD(j->dsb, j->sb, (size_t)j->n_bs * 4));
    } else {
        fill(j->c.dt, j->a_rows, j->c.k, j->lda, &s, j->a, (uint16_t *)(void *)j->ha);
        fill(j->c.dt, j->local * j->b_rows, j->c.k, j->ldb, &s, j->b, (uint16_t *)(void *)j->hb);
    }
    bias_upload(&j->bias, j->isize == 1 ? TALON_DTYPE_BF16 : j->c.dt, &s);
    GPU_CK(cu.cuMemcpyHtoD(j->da, j->ha, (size_t)(j->a_rows * j->lda * j->isize)));
    GPU_CK(cu.cuMemcpyHtoD(j->db, j->hb, (size_t)(j->local * j->b_rows * j->ldb * j->isize)));
    GPU_CK(cu.cuMemsetD8(j->dd, 0xFF, (size_t)j->d_bytes));
    if (gpu_call_failed) {
        gpu_call_failed = 0;
        return -1;
    }
    return 0;
}

static talon_status job_launch(const job *j, CUstream stream) {
    const mcase *c = &j->c;
    talon_moe_gemm_args a;
    memset(&a, 0, sizeof a);
    a.d = j->dd; a.a = j->da; a.b = j->db;
    a.sorted_token_ids = j->r.d_sorted; a.expert_ids = j->r.d_expert_ids;
    a.num_tokens_post_padded = j->r.d_post;
    a.topk_weights = c->weights ? j->r.d_weights : 0;
    a.tokens = c->tokens; a.topk = c->topk; a.experts = j->local; a.block_size = 128;
    a.sorted_capacity = j->r.sorted_cap; a.expert_ids_capacity = j->r.blocks_cap;
    a.n = c->n; a.k = c->k;
    if (c->pad) { a.lda = j->lda; a.ldb = j->ldb; a.ldd = j->ldd; }
    a.a_rows = c->a_rows; a.d_rows = c->d_rows;
    a.act = c->act; a.gated = c->gated; a.dtype = c->dt;
    a.bias = j->bias.d;
    if (c->act == TALON_GEMM_ACT_CLAMPED_SWIGLU) {
        a.act_alpha = ALPHA; a.act_limit = c->limit;
    }
    if (j->isize == 1) {
        a.scale = c->scale; a.a_scale = j->dsa; a.b_scale = j->dsb;
    }
    return talon_moe_gemm(g_ctx, stream, &a);
}

static void describe(const mcase *c, char *s, size_t n) {
    snprintf(s, n, "%s T %lld topk %lld E %lld (local %lld) n %lld k %lld gated %d act %d rows "
             "%d->%d weights %d route %d pad %d bias %d limit %g", c->dt == TALON_DTYPE_BF16 ? "bf16"
             : c->dt == TALON_DTYPE_F16 ? "f16" : c->scale == TALON_GEMM_SCALE_ROW ? "fp8 row"
             : c->scale == TALON_GEMM_SCALE_TENSOR ? "fp8 tensor" : "fp8 block",
             (long long)c->tokens, (long long)c->topk, (long long)c->experts, (long long)c->local,
             (long long)c->n, (long long)c->k, c->gated, (int)c->act, (int)c->a_rows,
             (int)c->d_rows, c->weights, c->route, c->pad, c->bias, (double)c->limit);
}

/* Every row of d: written as the reference says (sampled slots checked element by element),
   or still poisoned. */
static int job_check(job *j, long long *elements) {
    const mcase *c = &j->c;
    const routing *r = &j->r;
    /* d's rounding (fp8: bf16 d) and the fp32 sums (fp8: the tensor cores' accumulation over
       the whole row, as talon_gemm's tests) */
    const double rel = c->dt == TALON_DTYPE_F16 ? 0x1p-11 : 0x1p-8;
    const double e_mag = j->isize != 1 ? 0x1p-14
                         : c->scale == TALON_GEMM_SCALE_BLOCK ? 0x1p-24 * (double)(j->kb + 16)
                                                              : 0x1p-20;
    const int64_t pairs = c->tokens * c->topk;
    const double macs = (double)r->num_post * (double)j->b_rows * (double)c->k;
    const int64_t step = macs > SAMPLED_MACS ? (int64_t)ceil(macs / SAMPLED_MACS) : 1;
    double *ref = malloc((size_t)c->n * sizeof(double)), *mag = malloc((size_t)c->n * sizeof(double));
    double *zero = calloc((size_t)c->k, sizeof(double));
    char *written = calloc((size_t)j->d_rows, 1);
    ref_moe_epi epi = {c->act, ALPHA, c->limit, NULL};
    int64_t bad = 0, s, col, b;
    char what[200] = "", desc[300];
    if (!ref || !mag || !zero || !written || cu.cuMemcpyDtoH(j->hd, j->dd, (size_t)j->d_bytes)) {
        free(ref); free(mag); free(zero); free(written);
        return -1;
    }
    for (s = 0; s < r->num_post; s++) {
        const int e = r->expert_ids[s / 128];
        const int f = r->sorted[s];
        const int pad_slot = f < 0 || f >= pairs;
        const int64_t row = c->d_rows == TALON_MOE_ROWS_SORTED ? s : f;
        const double *x;
        if (e < 0 || e >= j->local) continue; /* a skipped block */
        if (c->d_rows == TALON_MOE_ROWS_PAIR && pad_slot) continue;
        written[row] = 1;
        if (s % step && s != r->num_post - 1) continue;
        x = c->a_rows == TALON_MOE_ROWS_SORTED ? j->a + s * c->k
            : pad_slot ? zero
            : j->a + (c->a_rows == TALON_MOE_ROWS_TOKEN ? f / c->topk : f) * c->k;
        /* a padding slot takes no bias */
        epi.bias = c->bias && !pad_slot ? j->bias.x + (int64_t)e * j->b_rows : NULL;
        ref_moe_gemm_row_epi(x, j->b + (int64_t)e * j->b_rows * c->k, c->n, c->k, c->gated, &epi,
                             c->weights ? (pad_slot ? 0.0 : (double)r->weights[f]) : 1.0, ref, mag);
        for (col = 0; col < c->n; col++) {
            uint16_t h;
            double got, tol = rel * fabs(ref[col]) + e_mag * mag[col] + 1e-30;
            memcpy(&h, j->hd + (row * j->ldd + col) * 2, 2);
            got = ref_to_f32(j->isize == 1 ? TALON_DTYPE_BF16 : c->dt, h);
            ++*elements;
            if (!(fabs(got - ref[col]) <= tol) && !bad++)
                snprintf(what, sizeof what, "slot %lld (expert %d, pair %d) d[%lld, %lld] = %.9g, "
                         "ref %.9g (tol %.3g)", (long long)s, e, f, (long long)row,
                         (long long)col, got, ref[col], tol);
        }
    }
    for (s = 0; s < j->d_rows; s++)
        for (b = written[s] ? c->n * 2 : 0; b < j->ldd * 2; b++)
            if (j->hd[s * j->ldd * 2 + b] != 0xFF && !bad++)
                snprintf(what, sizeof what, "row %lld byte %lld written (row %s)", (long long)s,
                         (long long)b, written[s] ? "padding" : "not to be written");
    for (b = j->d_rows * j->ldd * 2; b < j->d_bytes; b++)
        if (j->hd[b] != 0xFF && !bad++) snprintf(what, sizeof what, "guard byte %lld written", (long long)b);
    if (bad) {
        describe(c, desc, sizeof desc);
        print_error("FAILED %s: %lld mismatches, first: %s\n", desc, (long long)bad, what);
    }
    free(ref); free(mag); free(zero); free(written);
    return bad ? -1 : 0;
}

static void run_case(gpu_tally *t, const mcase *c, uint64_t seed) {
    job j;
    char desc[300];
    talon_status st = TALON_SUCCESS;
    CUresult e = CUDA_SUCCESS;
    int rc = job_prepare(&j, c, seed);
    t->cases++;
    if (!rc) rc = job_upload(&j, seed);
    if (!rc && (st = job_launch(&j, g_stream)) != TALON_SUCCESS) rc = -1;
    if (!rc && (e = cu.cuStreamSynchronize(g_stream)) != CUDA_SUCCESS) rc = -1;
    if (rc) {
        describe(c, desc, sizeof desc);
        print_error("FAILED %s: setup/launch: %s %s\n", desc, st ? talon_last_error() : "",
                    e ? gpu_error(e) : "");
    } else {
        rc = job_check(&j, &t->elements);
    }
    if (rc) t->failures++;
    job_free(&j);
    if (e != CUDA_SUCCESS) fail(); /* a sticky error ends the program's usefulness */
}

#define BF TALON_DTYPE_BF16
#define HF TALON_DTYPE_F16
#define F8 TALON_DTYPE_FP8_E4M3
#define ROW TALON_GEMM_SCALE_ROW
#define TEN TALON_GEMM_SCALE_TENSOR
#define BLK TALON_GEMM_SCALE_BLOCK
#define TOK TALON_MOE_ROWS_TOKEN
#define SRT TALON_MOE_ROWS_SORTED
#define PR TALON_MOE_ROWS_PAIR
#define A_NONE TALON_GEMM_ACT_NONE
#define A_RELU TALON_GEMM_ACT_RELU
#define A_SILU TALON_GEMM_ACT_SILU
#define A_GELU TALON_GEMM_ACT_GELU_ERF
#define A_TANH TALON_GEMM_ACT_GELU_TANH
#define A_CLMP TALON_GEMM_ACT_CLAMPED_SWIGLU

/* Row layouts, epilogues, routings, odd shapes. */
static void test_layouts(void **state) {
    static const mcase full[] = {
        {BF, 300, 4, 8, 200, 264, 1, A_SILU, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, 300, 4, 8, 200, 264, 1, A_TANH, TOK, SRT, 1, ROUTE_ZIPF, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 300, 4, 8, 264, 200, 0, A_NONE, SRT, PR, 1, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 257, 3, 16, 136, 72, 0, A_RELU, PR, PR, 1, ROUTE_MASKED, 0, 8, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 1000, 1, 4, 72, 136, 0, A_GELU, TOK, PR, 0, ROUTE_ONE, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 1, 8, 64, 64, 128, 1, A_SILU, TOK, SRT, 1, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 1, 8, 64, 2048, 8, 0, A_NONE, SRT, PR, 1, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 500, 4, 8, 128, 256, 1, A_SILU, TOK, PR, 1, ROUTE_UNIFORM, 5, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, 333, 2, 6, 1000, 520, 0, A_SILU, SRT, SRT, 1, ROUTE_ZIPF, 0, 16, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, 129, 6, 32, 96, 24, 1, A_GELU, PR, SRT, 0, ROUTE_MASKED, 20, 8, TALON_GEMM_SCALE_NONE, 0, 0},
        /* <= 128 tokens: halves of padding slots skip their products (zeros in sorted rows) */
        {HF, 100, 6, 32, 96, 24, 1, A_GELU, PR, SRT, 0, ROUTE_MASKED, 20, 8, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 96, 8, 16, 136, 200, 0, A_NONE, SRT, PR, 1, ROUTE_ZIPF, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        /* <= 64 tokens: the transposed kernel, chunks of 16, 32 or 64 slots (sorted rows of
           the chunks without work: zeros), n below a tile's second 64 columns, several
           chunks with work where the routing repeats an expert */
        {BF, 16, 8, 64, 200, 264, 1, A_SILU, TOK, SRT, 1, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, 33, 4, 16, 136, 72, 0, A_NONE, SRT, PR, 1, ROUTE_ZIPF, 0, 8, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 64, 2, 8, 1000, 520, 1, A_GELU, PR, PR, 1, ROUTE_MASKED, 5, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, 20, 6, 32, 24, 136, 1, A_TANH, TOK, PR, 0, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 16, 8, 4, 136, 200, 0, A_RELU, TOK, SRT, 1, ROUTE_REPEAT, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 5, 8, 16, 136, 200, 0, A_NONE, SRT, PR, 1, ROUTE_REPEAT, 0, 8, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, 64, 8, 128, 2048, 768, 0, A_NONE, SRT, PR, 1, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        /* large enough for bn 256, gated and not, several tiles per CTA (sampled slots) */
        {BF, 2048, 8, 32, 768, 1024, 1, A_SILU, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 1024, 8, 16, 1024, 512, 0, A_NONE, SRT, PR, 1, ROUTE_ZIPF, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        /* fp8 with scales per row (of a's rows: tokens, pairs or slots) or tensor: gathered
           and sorted a, both d layouts, padding halves skipped (<= 128 tokens), the transposed
           kernel at <= 64 tokens (chunks of 16, 32, 64; n below a tile's second half; a
           repeated expert), expert parallelism, strides, bn 256; k 200 and 136 (16-element
           pieces of a gathered row end 8 past k, in NaN padding) */
        {F8, 300, 4, 8, 200, 272, 1, A_SILU, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, ROW, 0, 0},
        {F8, 257, 3, 16, 136, 144, 0, A_RELU, PR, PR, 1, ROUTE_MASKED, 0, 16, TEN, 0, 0},
        {F8, 100, 6, 32, 96, 64, 1, A_GELU, PR, SRT, 0, ROUTE_MASKED, 20, 16, ROW, 0, 0},
        {F8, 300, 4, 8, 72, 200, 1, A_SILU, PR, SRT, 0, ROUTE_ZIPF, 0, 8, ROW, 0, 0},
        {F8, 16, 8, 64, 200, 272, 1, A_SILU, TOK, SRT, 1, ROUTE_UNIFORM, 0, 0, ROW, 0, 0},
        {F8, 5, 8, 16, 136, 208, 0, A_NONE, SRT, PR, 1, ROUTE_REPEAT, 0, 16, TEN, 0, 0},
        {F8, 33, 4, 16, 136, 200, 1, A_GELU, PR, PR, 1, ROUTE_MASKED, 5, 8, ROW, 0, 0},
        {F8, 20, 6, 32, 24, 136, 1, A_TANH, TOK, PR, 0, ROUTE_UNIFORM, 0, 8, TEN, 0, 0},
        {F8, 64, 8, 128, 2048, 768, 0, A_NONE, SRT, PR, 1, ROUTE_UNIFORM, 0, 0, ROW, 0, 0},
        /* fp8 block scales (a's per row of a and k-block, b's per 128 x 128 block): gathered
           and sorted a, both d layouts, gated n 192 (bn 128; transposed: up rows from the
           middle of a block) and 128, k-blocks past k (k 200 in NaN padding), padding halves
           skipped, <= 16 tokens (the transposed kernel: a repeated expert, a tile's second
           half past n), expert parallelism, bn 256 */
        {F8, 300, 4, 8, 192, 272, 1, A_SILU, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, BLK, 0, 0},
        {F8, 257, 3, 16, 136, 200, 0, A_NONE, SRT, PR, 1, ROUTE_MASKED, 0, 8, BLK, 0, 0},
        {F8, 100, 6, 32, 128, 144, 1, A_GELU, PR, SRT, 0, ROUTE_MASKED, 20, 16, BLK, 0, 0},
        {F8, 16, 8, 64, 64, 256, 1, A_SILU, TOK, PR, 1, ROUTE_UNIFORM, 0, 0, BLK, 0, 0},
        {F8, 2048, 8, 32, 768, 1024, 1, A_SILU, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, BLK, 0, 0},
        {F8, 1024, 8, 16, 1024, 512, 0, A_NONE, SRT, PR, 1, ROUTE_ZIPF, 0, 0, BLK, 0, 0},
        {F8, 33, 4, 16, 192, 200, 1, A_GELU, PR, SRT, 0, ROUTE_MASKED, 5, 8, BLK, 0, 0},
        {F8, 12, 4, 8, 192, 200, 1, A_SILU, TOK, SRT, 1, ROUTE_UNIFORM, 0, 8, BLK, 0, 0},
        {F8, 5, 8, 16, 136, 208, 0, A_NONE, SRT, PR, 1, ROUTE_REPEAT, 0, 16, BLK, 0, 0},
        {F8, 64, 8, 128, 2048, 768, 0, A_NONE, SRT, PR, 1, ROUTE_UNIFORM, 0, 0, BLK, 0, 0},
        /* the transposed kernel's k-blocks in groups of 4 (gated 32-slot chunks: 2) and the
           rest in 2, 1: 11 and 7; 17..32 tokens */
        {F8, 16, 8, 16, 256, 1408, 1, A_SILU, TOK, PR, 1, ROUTE_UNIFORM, 0, 0, BLK, 0, 0},
        {F8, 9, 4, 8, 136, 848, 0, A_NONE, SRT, PR, 1, ROUTE_ZIPF, 0, 0, BLK, 0, 0},
        {F8, 30, 8, 32, 256, 1408, 1, A_GELU, PR, SRT, 1, ROUTE_ZIPF, 0, 0, BLK, 0, 0},
        {F8, 25, 4, 16, 136, 848, 0, A_NONE, SRT, PR, 1, ROUTE_MASKED, 5, 16, BLK, 0, 0},
        {F8, 2048, 8, 32, 768, 1024, 1, A_TANH, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, ROW, 0, 0},
        {F8, 1024, 8, 16, 1024, 512, 0, A_NONE, SRT, PR, 1, ROUTE_ZIPF, 0, 0, ROW, 0, 0},
        /* gpt-oss's epilogue: a bias per expert (padding slots take none: a gathered a's
           padding rows of a SORTED d stay 0, also inside a chunk where the routing repeats an
           expert) and CLAMPED_SWIGLU with limits that clamp often (3), seldom (7) or never
           (inf); the 128-row kernel, padding halves skipped, the transposed kernel; bf16,
           f16, fp8 with each scale mode; gpt-oss-20b's shape (32 experts, top 4, 2880) */
        {BF, 300, 4, 8, 200, 264, 1, A_CLMP, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 1, 3.f},
        {BF, 300, 4, 8, 264, 200, 0, A_NONE, SRT, PR, 1, ROUTE_MASKED, 0, 8, TALON_GEMM_SCALE_NONE, 1, 0},
        {HF, 100, 6, 32, 96, 24, 1, A_CLMP, PR, SRT, 0, ROUTE_MASKED, 20, 8, TALON_GEMM_SCALE_NONE, 1, INFINITY},
        {BF, 16, 8, 64, 200, 264, 1, A_CLMP, TOK, SRT, 1, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 1, 3.f},
        {BF, 5, 8, 16, 136, 200, 1, A_CLMP, TOK, SRT, 1, ROUTE_REPEAT, 0, 8, TALON_GEMM_SCALE_NONE, 1, 2.f},
        {HF, 33, 4, 16, 136, 72, 0, A_SILU, SRT, PR, 1, ROUTE_ZIPF, 0, 8, TALON_GEMM_SCALE_NONE, 1, 0},
        {F8, 300, 4, 8, 200, 272, 1, A_CLMP, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, ROW, 1, 7.f},
        {F8, 16, 8, 64, 200, 272, 1, A_CLMP, TOK, SRT, 1, ROUTE_UNIFORM, 0, 0, TEN, 1, 3.f},
        {F8, 300, 4, 8, 192, 272, 1, A_CLMP, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, BLK, 1, 5.f},
        {F8, 12, 4, 8, 192, 200, 1, A_CLMP, TOK, SRT, 1, ROUTE_REPEAT, 0, 8, BLK, 1, 3.f},
        {F8, 16, 8, 16, 256, 1408, 0, A_NONE, SRT, PR, 1, ROUTE_UNIFORM, 0, 0, BLK, 1, 0},
        {BF, 2048, 4, 32, 2880, 2880, 1, A_CLMP, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 1, 7.f},
        {BF, 2048, 4, 32, 2880, 2880, 0, A_NONE, SRT, PR, 1, ROUTE_ZIPF, 0, 0, TALON_GEMM_SCALE_NONE, 1, 0},
        {BF, 16, 4, 32, 2880, 2880, 1, A_CLMP, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 1, 7.f},
        {F8, 64, 4, 32, 2880, 2880, 0, A_NONE, SRT, PR, 1, ROUTE_UNIFORM, 0, 0, ROW, 1, 0},
    };
    static const mcase quick[] = {
        {BF, 130, 4, 8, 200, 136, 1, A_SILU, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, 130, 4, 8, 264, 72, 0, A_NONE, SRT, PR, 1, ROUTE_MASKED, 5, 8, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 1, 8, 64, 64, 128, 1, A_GELU, PR, PR, 1, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 100, 4, 8, 200, 136, 1, A_SILU, TOK, SRT, 0, ROUTE_ZIPF, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 16, 8, 16, 136, 200, 1, A_SILU, TOK, SRT, 1, ROUTE_REPEAT, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, 40, 4, 8, 200, 72, 0, A_NONE, SRT, PR, 1, ROUTE_MASKED, 5, 8, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 300, 8, 8, 768, 256, 1, A_SILU, TOK, PR, 1, ROUTE_ZIPF, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, 300, 8, 8, 512, 128, 0, A_TANH, SRT, SRT, 0, ROUTE_ONE, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, 600, 8, 8, 1024, 64, 0, A_RELU, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {F8, 130, 4, 8, 200, 144, 1, A_SILU, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, ROW, 0, 0},
        {F8, 40, 4, 8, 200, 64, 0, A_NONE, PR, PR, 1, ROUTE_MASKED, 5, 16, TEN, 0, 0},
        {F8, 16, 4, 8, 136, 200, 1, A_SILU, TOK, SRT, 1, ROUTE_UNIFORM, 0, 8, ROW, 0, 0},
        {F8, 130, 4, 8, 128, 200, 1, A_SILU, TOK, SRT, 0, ROUTE_UNIFORM, 0, 8, BLK, 0, 0},
        {F8, 40, 4, 8, 136, 144, 0, A_NONE, PR, PR, 1, ROUTE_MASKED, 5, 16, BLK, 0, 0},
        {F8, 12, 4, 8, 192, 200, 1, A_SILU, TOK, SRT, 1, ROUTE_UNIFORM, 0, 8, BLK, 0, 0},
        {F8, 16, 8, 16, 256, 1408, 1, A_SILU, TOK, PR, 1, ROUTE_UNIFORM, 0, 0, BLK, 0, 0},
        {F8, 30, 8, 32, 256, 1408, 1, A_GELU, PR, SRT, 1, ROUTE_ZIPF, 0, 0, BLK, 0, 0},
        {BF, 130, 4, 8, 200, 136, 1, A_CLMP, TOK, SRT, 0, ROUTE_UNIFORM, 0, 0, TALON_GEMM_SCALE_NONE, 1, 3.f},
        {BF, 5, 8, 16, 136, 200, 1, A_CLMP, TOK, SRT, 1, ROUTE_REPEAT, 0, 8, TALON_GEMM_SCALE_NONE, 1, 2.f},
        {F8, 130, 4, 8, 200, 144, 0, A_NONE, SRT, PR, 1, ROUTE_UNIFORM, 0, 0, ROW, 1, 0},
        {F8, 12, 4, 8, 192, 200, 1, A_CLMP, TOK, SRT, 1, ROUTE_REPEAT, 0, 8, BLK, 1, 3.f},
    };
    const mcase *cases = g_quick ? quick : full;
    const int n = g_quick ? COUNT(quick) : COUNT(full);
    gpu_tally t;
    int i;
    (void)state;
    gpu_tally_start(&t, "moe_gemm_layouts");
    for (i = 0; i < n; i++) run_case(&t, &cases[i], 0x3E00 + (uint64_t)i);
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* Captured once, replayed on fresh a, b and bias: the graph keeps the tensor maps and reads
   the routing on the device. */
static void test_graph(void **state) {
    const mcase c = {BF, 200, 4, 8, 136, 200, 1, A_SILU, TOK, SRT, 1, ROUTE_ZIPF, 0, 0,
                     TALON_GEMM_SCALE_NONE, 1, 0};
    gpu_tally t;
    job j;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUstream cap;
    int rep;
    (void)state;
    gpu_tally_start(&t, "moe_gemm_graph_replay");
    assert_int_equal(cu.cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(job_prepare(&j, &c, 0x6A00), 0);
    assert_int_equal(cu.cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(job_launch(&j, cap), TALON_SUCCESS);
    assert_int_equal(cu.cuStreamEndCapture(cap, &graph), CUDA_SUCCESS);
    assert_int_equal(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    for (rep = 0; rep < 2; rep++) {
        t.cases++;
        assert_int_equal(job_upload(&j, 0x6A10 + (uint64_t)rep), 0);
        assert_int_equal(cu.cuGraphLaunch(exec, cap), CUDA_SUCCESS);
        assert_int_equal(cu.cuStreamSynchronize(cap), CUDA_SUCCESS);
        if (job_check(&j, &t.elements)) t.failures++;
    }
    cu.cuGraphExecDestroy(exec);
    cu.cuGraphDestroy(graph);
    cu.cuStreamDestroy(cap);
    job_free(&j);
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* The expert computation of an MoE layer with talon alone: moe_align -> gate/up (hidden by
   token, SwiGLU, sorted rows) -> down (sorted rows, router weights, pair rows) -> moe_sum,
   against the fp64 MoE MLP (ref_moe_block_token); oss: gpt-oss's experts (biases on both
   GEMMs, CLAMPED_SWIGLU with alpha ALPHA and limit 3). The intermediate is rounded to 16 bits
   between the GEMMs, so the tolerance is r |ref| + 2 r mag (mag: ref_moe_gemm.h). */
static void run_block(gpu_tally *t, talon_dtype dt, int64_t tokens, int64_t topk, int64_t experts,
                      int64_t hidden, int64_t inter, int route, int oss, uint64_t seed) {
    const talon_gemm_act act = oss ? A_CLMP : A_SILU;
    const float limit = oss ? 3.f : 0.f;
    const double rel = dt == TALON_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    const int64_t pairs = tokens * topk;
    routing r;
    uint64_t s = ref_mix64(seed);
    double *x = malloc((size_t)(tokens * hidden) * sizeof(double));
    double *w13 = malloc((size_t)(experts * 2 * inter * hidden) * sizeof(double));
    double *w2 = malloc((size_t)(experts * hidden * inter) * sizeof(double));
    double *ref = malloc((size_t)hidden * sizeof(double)), *mag = malloc((size_t)hidden * sizeof(double));
    uint16_t *hx = malloc((size_t)(tokens * hidden) * 2);
    uint16_t *h13 = malloc((size_t)(experts * 2 * inter * hidden) * 2);
    uint16_t *h2 = malloc((size_t)(experts * hidden * inter) * 2);
    uint16_t *hout = malloc((size_t)(tokens * hidden) * 2);
    CUdeviceptr dx, d13, d2, dh = 0, dy = 0, dout;
    bias_buf b13, b2;
    talon_moe_gemm_args g;
    talon_moe_sum_args sum;
    int64_t tk, c, bad = 0;
    char what[200] = "";
    t->cases++;
    assert_non_null(x); assert_non_null(w13); assert_non_null(w2); assert_non_null(ref);
    assert_non_null(mag); assert_non_null(hx); assert_non_null(h13); assert_non_null(h2);
    assert_non_null(hout);
    assert_int_equal(routing_make(&r, tokens, topk, experts, route, seed), 0);
    fill(dt, tokens, hidden, hidden, &s, x, hx);
    fill(dt, experts * 2 * inter, hidden, hidden, &s, w13, h13);
    fill(dt, experts * hidden, inter, inter, &s, w2, h2);
    assert_int_equal(bias_alloc(&b13, oss ? experts * 2 * inter : 0), 0);
    assert_int_equal(bias_alloc(&b2, oss ? experts * hidden : 0), 0);
    bias_upload(&b13, dt, &s);
    bias_upload(&b2, dt, &s);
    dx = gpu_alloc((size_t)(tokens * hidden) * 2);
    d13 = gpu_alloc((size_t)(experts * 2 * inter * hidden) * 2);
    d2 = gpu_alloc((size_t)(experts * hidden * inter) * 2);
    dh = gpu_alloc((size_t)(r.sorted_cap * inter) * 2);
    dy = gpu_alloc((size_t)(pairs * hidden) * 2);
    dout = gpu_alloc((size_t)(tokens * hidden) * 2);
    GPU_CK(cu.cuMemcpyHtoD(dx, hx, (size_t)(tokens * hidden) * 2));
    GPU_CK(cu.cuMemcpyHtoD(d13, h13, (size_t)(experts * 2 * inter * hidden) * 2));
    GPU_CK(cu.cuMemcpyHtoD(d2, h2, (size_t)(experts * hidden * inter) * 2));
    /* pairs without an expert are not written by the down GEMM: zero y for moe_sum */
    GPU_CK(cu.cuMemsetD8(dy, 0, (size_t)(pairs * hidden) * 2));
    GPU_CK(cu.cuMemsetD8(dout, 0xFF, (size_t)(tokens * hidden) * 2));
    memset(&g, 0, sizeof g);
    g.sorted_token_ids = r.d_sorted; g.expert_ids = r.d_expert_ids; g.num_tokens_post_padded = r.d_post;
    g.tokens = tokens; g.topk = topk; g.experts = experts; g.block_size = 128;
    g.sorted_capacity = r.sorted_cap; g.expert_ids_capacity = r.blocks_cap; g.dtype = dt;
    g.d = dh; g.a = dx; g.b = d13; g.n = inter; g.k = hidden; g.gated = 1; g.act = act;
    g.a_rows = TOK; g.d_rows = SRT; g.bias = b13.d;
    if (oss) {
        g.act_alpha = ALPHA; g.act_limit = limit;
    }
    assert_int_equal(talon_moe_gemm(g_ctx, g_stream, &g), TALON_SUCCESS);
    g.d = dy; g.a = dh; g.b = d2; g.n = hidden; g.k = inter; g.gated = 0; g.act = A_NONE;
    g.a_rows = SRT; g.d_rows = PR; g.topk_weights = r.d_weights; g.bias = b2.d;
    g.act_alpha = g.act_limit = 0.f;
    assert_int_equal(talon_moe_gemm(g_ctx, g_stream, &g), TALON_SUCCESS);
    memset(&sum, 0, sizeof sum);
    sum.out = dout; sum.in = dy; sum.tokens = tokens; sum.k = topk; sum.hidden = hidden; sum.dtype = dt;
    assert_int_equal(talon_moe_sum(g_ctx, g_stream, &sum), TALON_SUCCESS);
    assert_int_equal(cu.cuStreamSynchronize(g_stream), CUDA_SUCCESS);
    GPU_CK(cu.cuMemcpyDtoH(hout, dout, (size_t)(tokens * hidden) * 2));
    for (tk = 0; tk < tokens; tk++) {
        ref_moe_block_token(x + tk * hidden, w13, w2, b13.x, b2.x, r.ids, r.weights, tk, topk,
                            experts, hidden, inter, act, ALPHA, limit, ref, mag);
        for (c = 0; c < hidden; c++) {
            const double got = ref_to_f32(dt, hout[tk * hidden + c]);
            const double tol = rel * fabs(ref[c]) + 2.0 * rel * mag[c] + 1e-30;
            t->elements++;
            if (!(fabs(got - ref[c]) <= tol) && !bad++)
                snprintf(what, sizeof what, "out[%lld, %lld] = %.9g, ref %.9g (tol %.3g)",
                         (long long)tk, (long long)c, got, ref[c], tol);
        }
    }
    if (bad || gpu_call_failed) {
        print_error("FAILED moe block T %lld topk %lld E %lld H %lld I %lld route %d oss %d: "
                    "%lld mismatches, first: %s\n", (long long)tokens, (long long)topk,
                    (long long)experts, (long long)hidden, (long long)inter, route, oss,
                    (long long)bad, what);
        t->failures++;
        gpu_call_failed = 0;
    }
    cu.cuMemFree(dx); cu.cuMemFree(d13); cu.cuMemFree(d2); cu.cuMemFree(dh); cu.cuMemFree(dy);
    cu.cuMemFree(dout);
    routing_free(&r);
    bias_free(&b13);
    bias_free(&b2);
    free(x); free(w13); free(w2); free(ref); free(mag); free(hx); free(h13); free(h2); free(hout);
}

static void test_moe_block(void **state) {
    gpu_tally t;
    (void)state;
    gpu_tally_start(&t, "moe_gemm_whole_block");
    run_block(&t, BF, g_quick ? 40 : 100, 4, 8, 264, 136, ROUTE_UNIFORM, 0, 0xB100);
    run_block(&t, BF, 1, 8, 16, 136, 72, ROUTE_UNIFORM, 0, 0xB101);
    run_block(&t, HF, g_quick ? 30 : 90, 2, 4, 200, 64, ROUTE_MASKED, 0, 0xB102);
    if (!g_quick) run_block(&t, BF, 300, 8, 8, 256, 128, ROUTE_ONE, 0, 0xB103);
    /* gpt-oss's experts: the 128-row kernel and the transposed one */
    run_block(&t, BF, g_quick ? 80 : 200, 4, 8, 264, 136, ROUTE_UNIFORM, 1, 0xB104);
    run_block(&t, HF, 16, 4, 32, 200, 72, ROUTE_MASKED, 1, 0xB105);
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* ================================================================ talon_grouped_gemm */
typedef struct gcase {
    talon_dtype dt;
    talon_grouped_layout layout;
    int64_t groups, rows, n, k; /* rows: MASKED per group; CONTIGUOUS: the largest group */
    int gated;
    talon_gemm_act act;
    int pad;     /* extra elements per row of a, b and d */
    int extra;   /* CONTIGUOUS: skipped tiles (group -1 and groups past `groups`) and tiles
                    past rows_used; MASKED: counts outside [0, rows] (clamped) */
    talon_gemm_scale scale; /* bf16/f16: NONE; fp8: TENSOR, ROW or BLOCK */
    int bias;    /* a random bias [groups, b rows] of d's type */
    float limit; /* act CLAMPED_SWIGLU: its limit (alpha: ALPHA) */
} gcase;

typedef struct gjob {
    gcase c;
    int64_t rows, tiles, b_rows, lda, ldb, ldd, d_bytes, used; /* rows: of a and d */
    int64_t isize, kb, rows4, n_as, n_bs; /* fp8: 1, k-blocks, a_scale's row stride (BLOCK),
                                       a_scale's and b_scale's counts */
    talon_gemm_scale scale;          /* fp8: the scales' kind */
    int *tile_group; /* CONTIGUOUS: [tiles] */
    int *count;      /* MASKED: [groups], as uploaded (before clamping) */
    double *a, *b;   /* the values (fp8: times their block scales) */
    float *sa, *sb;  /* fp8 BLOCK: a_scale [kb, rows4], b_scale [groups, ceil(b_rows / 128), kb];
                        ROW: [rows], [groups, b_rows]; TENSOR: [1], [groups] */
    unsigned char *ha, *hb, *hd;
    CUdeviceptr da, db, dd, dgroups, dused, dcount, dsa, dsb;
    bias_buf bias;
} gjob;

static void gjob_free(gjob *j) {
    bias_free(&j->bias);
    free(j->tile_group); free(j->count);
    free(j->a); free(j->b); free(j->sa); free(j->sb); free(j->ha); free(j->hb); free(j->hd);
    if (j->dsa) cu.cuMemFree(j->dsa);
    if (j->dsb) cu.cuMemFree(j->dsb);
    if (j->da) cu.cuMemFree(j->da);
    if (j->db) cu.cuMemFree(j->db);
    if (j->dd) cu.cuMemFree(j->dd);
    if (j->dgroups) cu.cuMemFree(j->dgroups);
    if (j->dused) cu.cuMemFree(j->dused);
    if (j->dcount) cu.cuMemFree(j->dcount);
    memset(j, 0, sizeof *j);
}

/* MASKED: random counts in [0, rows] with 0 and rows among them; extra: one above rows and
   one negative (both clamped by the kernel). */
static void gjob_counts(gjob *j, uint64_t seed) {
    uint64_t s = ref_mix64(seed ^ 0xC0C0);
    int64_t g;
    for (g = 0; g < j->c.groups; g++)
        j->count[g] = (int)(ref_next64(&s) % (uint64_t)(j->c.rows + 1));
    j->count[0] = 0;
    if (j->c.groups > 1) j->count[1] = (int)j->c.rows;
    if (j->c.extra && j->c.groups > 3) {
        j->count[2] = (int)j->c.rows + 77;
        j->count[3] = -5;
    }
}

/* CONTIGUOUS: each group's random size (0 for some, `rows` for one) in whole tiles, in group
   order; extra: a tile of group -1 and one of group `groups` in between, and 2 tiles past
   rows_used at the end. */
static int gjob_tiles(gjob *j, uint64_t seed) {
    uint64_t s = ref_mix64(seed ^ 0x7173);
    const gcase *c = &j->c;
    int64_t g, t = 0, cap = c->groups * ((c->rows + 127) / 128) + 4;
    j->tile_group = malloc((size_t)cap * sizeof(int));
    if (!j->tile_group) return -1;
    for (g = 0; g < c->groups; g++) {
        const int64_t size = g == 1 ? c->rows : g == 0 ? 0 : (int64_t)(ref_next64(&s) % (uint64_t)(c->rows + 1));
        int64_t i;
        for (i = 0; i < (size + 127) / 128; i++) j->tile_group[t++] = (int)g;
        if (c->extra && g == c->groups / 2) {
            j->tile_group[t++] = -1;
            j->tile_group[t++] = (int)c->groups;
        }
    }
    if (t == 0) j->tile_group[t++] = 0;
    j->used = t * 128;
    if (c->extra) {
        j->tile_group[t++] = 0;
        j->tile_group[t++] = (int)(c->groups - 1);
    }
    j->tiles = t;
    j->rows = t * 128;
    return 0;
}

static int gjob_prepare(gjob *j, const gcase *c, uint64_t seed) {
    memset(j, 0, sizeof *j);
    j->c = *c;
    if (c->layout == TALON_GROUPED_MASKED) {
        j->rows = c->groups * c->rows;
        j->count = malloc((size_t)c->groups * sizeof(int));
        if (!j->count) return -1;
        gjob_counts(j, seed);
    } else if (gjob_tiles(j, seed)) {
        return -1;
    }
    j->b_rows = (c->gated ? 2 : 1) * c->n;
    j->isize = c->dt == TALON_DTYPE_FP8_E4M3 ? 1 : 2;
    j->kb = (c->k + 127) / 128;
    j->rows4 = (j->rows + 3) / 4 * 4;
    j->scale = c->scale;
    j->n_as = j->scale == TALON_GEMM_SCALE_BLOCK ? j->kb * j->rows4
              : j->scale == TALON_GEMM_SCALE_ROW ? j->rows : 1;
    j->n_bs = c->groups * (j->scale == TALON_GEMM_SCALE_BLOCK ? (j->b_rows + 127) / 128 * j->kb
                           : j->scale == TALON_GEMM_SCALE_ROW ? j->b_rows : 1);
    j->lda = c->k + c->pad; j->ldb = c->k + c->pad; j->ldd = c->n + c->pad;
    j->d_bytes = j->rows * j->ldd * 2 + GUARD;
    j->a = malloc((size_t)(j->rows * c->k) * sizeof(double));
    j->b = malloc((size_t)(c->groups * j->b_rows * c->k) * sizeof(double));
    j->ha = malloc((size_t)(j->rows * j->lda * j->isize));
    j->hb = malloc((size_t)(c->groups * j->b_rows * j->ldb * j->isize));
    j->hd = malloc((size_t)j->d_bytes);
    if (!j->a || !j->b || !j->ha || !j->hb || !j->hd) return -1;
    j->da = gpu_alloc((size_t)(j->rows * j->lda * j->isize));
    j->db = gpu_alloc((size_t)(c->groups * j->b_rows * j->ldb * j->isize));
    j->dd = gpu_alloc((size_t)j->d_bytes);
    if (!j->da || !j->db || !j->dd) return -1;
    if (bias_alloc(&j->bias, c->bias ? c->groups * j->b_rows : 0)) return -1;
    if (j->isize == 1) {
        j->sa = malloc((size_t)j->n_as * sizeof(float));
        j->sb = malloc((size_t)j->n_bs * sizeof(float));
        j->dsa = gpu_alloc((size_t)j->n_as * 4);
        j->dsb = gpu_alloc((size_t)j->n_bs * 4);
        if (!j->sa || !j->sb || !j->dsa || !j->dsb) return -1;
    }
    if (c->layout == TALON_GROUPED_MASKED) {
        j->dcount = gpu_alloc((size_t)c->groups * 4);
        if (!j->dcount) return -1;
    } else {
        j->dgroups = gpu_alloc((size_t)j->tiles * 4);
        j->dused = c->extra ? gpu_alloc(4) : 0;
        if (!j->dgroups || (c->extra && !j->dused)) return -1;
        GPU_CK(cu.cuMemcpyHtoD(j->dgroups, j->tile_group, (size_t)j->tiles * 4));
        if (j->dused) {
            const int used = (int)j->used;
            GPU_CK(cu.cuMemcpyHtoD(j->dused, &used, 4));
        }
    }
    return 0;
}


/* Fresh a, b (fp8: and scales; MASKED: and counts) from seed, uploaded; d poisoned. */
static int gjob_upload(gjob *j, uint64_t seed) {
    uint64_t s = ref_mix64(seed ^ 0x5A5A);
    if (j->isize == 1) {
        const int64_t brows = j->c.groups * j->b_rows, blocks = (j->b_rows + 127) / 128;
        const int block = j->scale == TALON_GEMM_SCALE_BLOCK;
        const int row = j->scale == TALON_GEMM_SCALE_ROW;
        int64_t r;
        fill_scales(j->sa, j->n_as, &s);
        fill_scales(j->sb, j->n_bs, &s);
        /* a: row r's scale at r (ROW), its k-block's at r + rows4 x (c / 128) (BLOCK), or one */
        fill8(j->rows, j->c.k, j->lda, &s, j->a, j->ha, j->sa, block || row, block ? j->rows4 : 0);
        for (r = 0; r < brows; r++) { /* row r of b: group r / b_rows, row r % b_rows of it */
            const int64_t g = r / j->b_rows;
            const float *sc = block ? j->sb + (g * blocks + (r % j->b_rows) / 128) * j->kb
                              : row ? j->sb + r : j->sb + g;
            fill8(1, j->c.k, j->ldb, &s, j->b + r * j->c.k, j->hb + r * j->ldb, sc, 0, block);
        }
        GPU_CK(cu.cuMemcpyHtoD(j->dsa, j->sa, (size_t)j->n_as * 4));
        GPU_CK(cu.cuMemcpyHtoD(j->dsb, j->sb, (size_t)j->n_bs * 4));
    } else {
        fill(j->c.dt, j->rows, j->c.k, j->lda, &s, j->a, (uint16_t *)(void *)j->ha);
        fill(j->c.dt, j->c.groups * j->b_rows, j->c.k, j->ldb, &s, j->b, (uint16_t *)(void *)j->hb);
    }
    bias_upload(&j->bias, j->isize == 1 ? TALON_DTYPE_BF16 : j->c.dt, &s);
    GPU_CK(cu.cuMemcpyHtoD(j->da, j->ha, (size_t)(j->rows * j->lda * j->isize)));
    GPU_CK(cu.cuMemcpyHtoD(j->db, j->hb, (size_t)(j->c.groups * j->b_rows * j->ldb * j->isize)));
    GPU_CK(cu.cuMemsetD8(j->dd, 0xFF, (size_t)j->d_bytes));
    if (j->c.layout == TALON_GROUPED_MASKED) {
        gjob_counts(j, seed);
        GPU_CK(cu.cuMemcpyHtoD(j->dcount, j->count, (size_t)j->c.groups * 4));
    }
    if (gpu_call_failed) {
        gpu_call_failed = 0;
        return -1;
    }
    return 0;
}

static talon_status gjob_launch(const gjob *j, CUstream stream) {
    const gcase *c = &j->c;
    talon_grouped_gemm_args a;
    memset(&a, 0, sizeof a);
    a.d = j->dd; a.a = j->da; a.b = j->db;
    a.tile_groups = j->dgroups; a.rows_used = j->dused; a.group_rows = j->dcount;
    a.groups = c->groups; a.rows = c->layout == TALON_GROUPED_MASKED ? c->rows : j->rows;
    a.n = c->n; a.k = c->k;
    if (c->pad) { a.lda = j->lda; a.ldb = j->ldb; a.ldd = j->ldd; }
    a.layout = c->layout; a.act = c->act; a.gated = c->gated; a.dtype = c->dt;
    a.bias = j->bias.d;
    if (c->act == TALON_GEMM_ACT_CLAMPED_SWIGLU) {
        a.act_alpha = ALPHA; a.act_limit = c->limit;
    }
    if (j->isize == 1) {
        a.scale = j->scale; a.a_scale = j->dsa; a.b_scale = j->dsb;
    }
    return talon_grouped_gemm(g_ctx, stream, &a);
}

static void gdescribe(const gcase *c, char *s, size_t n) {
    snprintf(s, n, "grouped %s %s G %lld rows %lld n %lld k %lld gated %d act %d pad %d extra %d "
             "bias %d limit %g",
             c->dt == TALON_DTYPE_BF16 ? "bf16" : c->dt == TALON_DTYPE_F16 ? "f16"
             : c->scale == TALON_GEMM_SCALE_ROW ? "fp8 row"
             : c->scale == TALON_GEMM_SCALE_TENSOR ? "fp8 tensor" : "fp8 block",
             c->layout == TALON_GROUPED_MASKED ? "masked" : "contiguous", (long long)c->groups,
             (long long)c->rows, (long long)c->n, (long long)c->k, c->gated, (int)c->act, c->pad,
             c->extra, c->bias, (double)c->limit);
}

/* The group of row r of d, or -1 when the op must not write it. */
static int grow_group(const gjob *j, int64_t r) {
    if (j->c.layout == TALON_GROUPED_MASKED) {
        const int g = (int)(r / j->c.rows), cnt = j->count[g];
        return r % j->c.rows < (cnt < 0 ? 0 : cnt) ? g : -1;
    } else {
        const int g = j->tile_group[r / 128];
        return r < j->used && g >= 0 && g < j->c.groups ? g : -1;
    }
}

static int gjob_check(gjob *j, long long *elements) {
    const gcase *c = &j->c;
    /* d's rounding; the fp32 sums (fp8: block scales one rounding per k-block, tensor and row
       scales the tensor cores' accumulation over the whole row, as talon_gemm's tests) */
    const double rel = c->dt == TALON_DTYPE_F16 ? 0x1p-11 : 0x1p-8;
    const double e_mag = j->isize != 1 ? 0x1p-14
                         : j->scale == TALON_GEMM_SCALE_BLOCK ? 0x1p-24 * (double)(j->kb + 16)
                                                              : 0x1p-20;
    const double macs = (double)j->rows * (double)j->b_rows * (double)c->k;
    const int64_t step = macs > SAMPLED_MACS ? (int64_t)ceil(macs / SAMPLED_MACS) : 1;
    double *ref = malloc((size_t)c->n * sizeof(double)), *mag = malloc((size_t)c->n * sizeof(double));
    ref_moe_epi epi = {c->act, ALPHA, c->limit, NULL};
    int64_t bad = 0, r, col, b, seen = 0;
    char what[200] = "", desc[300];
    if (!ref || !mag || cu.cuMemcpyDtoH(j->hd, j->dd, (size_t)j->d_bytes)) {
        free(ref); free(mag);
        return -1;
    }
    for (r = 0; r < j->rows; r++) {
        const int g = grow_group(j, r);
        for (b = g >= 0 ? c->n * 2 : 0; b < j->ldd * 2; b++)
            if (j->hd[r * j->ldd * 2 + b] != 0xFF && !bad++)
                snprintf(what, sizeof what, "row %lld byte %lld written (row %s)", (long long)r,
                         (long long)b, g >= 0 ? "padding" : "not to be written");
        if (g < 0 || seen++ % step) continue;
        epi.bias = c->bias ? j->bias.x + (int64_t)g * j->b_rows : NULL;
        ref_moe_gemm_row_epi(j->a + r * c->k, j->b + (int64_t)g * j->b_rows * c->k, c->n, c->k,
                             c->gated, &epi, 1.0, ref, mag);
        for (col = 0; col < c->n; col++) {
            uint16_t h;
            double got, tol = rel * fabs(ref[col]) + e_mag * mag[col] + 1e-30;
            memcpy(&h, j->hd + (r * j->ldd + col) * 2, 2);
            got = ref_to_f32(j->isize == 1 ? TALON_DTYPE_BF16 : c->dt, h);
            ++*elements;
            if (!(fabs(got - ref[col]) <= tol) && !bad++)
                snprintf(what, sizeof what, "row %lld (group %d) d[%lld, %lld] = %.9g, ref %.9g "
                         "(tol %.3g)", (long long)r, g, (long long)r, (long long)col, got,
                         ref[col], tol);
        }
    }
    for (b = j->rows * j->ldd * 2; b < j->d_bytes; b++)
        if (j->hd[b] != 0xFF && !bad++) snprintf(what, sizeof what, "guard byte %lld written", (long long)b);
    if (bad) {
        gdescribe(c, desc, sizeof desc);
        print_error("FAILED %s: %lld mismatches, first: %s\n", desc, (long long)bad, what);
    }
    free(ref); free(mag);
    return bad ? -1 : 0;
}

static void run_gcase(gpu_tally *t, const gcase *c, uint64_t seed) {
    gjob j;
    char desc[300];
    talon_status st = TALON_SUCCESS;
    CUresult e = CUDA_SUCCESS;
    int rc = gjob_prepare(&j, c, seed);
    t->cases++;
    if (!rc) rc = gjob_upload(&j, seed);
    if (!rc && (st = gjob_launch(&j, g_stream)) != TALON_SUCCESS) rc = -1;
    if (!rc && (e = cu.cuStreamSynchronize(g_stream)) != CUDA_SUCCESS) rc = -1;
    if (rc) {
        gdescribe(c, desc, sizeof desc);
        print_error("FAILED %s: setup/launch: %s %s\n", desc, st ? talon_last_error() : "",
                    e ? gpu_error(e) : "");
    } else {
        rc = gjob_check(&j, &t->elements);
    }
    if (rc) t->failures++;
    gjob_free(&j);
    if (e != CUDA_SUCCESS) fail();
}

#define CONT TALON_GROUPED_CONTIGUOUS
#define MASK TALON_GROUPED_MASKED

/* Both layouts, epilogues, odd shapes, strides. */
static void test_grouped(void **state) {
    static const gcase full[] = {
        {BF, CONT, 8, 300, 200, 264, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, CONT, 5, 129, 264, 200, 0, A_NONE, 8, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, CONT, 1, 128, 72, 8, 0, A_RELU, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, CONT, 16, 1000, 136, 72, 1, A_TANH, 0, 1, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, MASK, 8, 300, 200, 264, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, MASK, 6, 100, 1000, 136, 0, A_GELU, 16, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, MASK, 3, 1, 64, 128, 1, A_SILU, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, MASK, 12, 257, 520, 64, 0, A_NONE, 8, 1, TALON_GEMM_SCALE_NONE, 0, 0},
        /* bn 256, several tiles per CTA (sampled rows) */
        {BF, CONT, 32, 512, 768, 1024, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, MASK, 32, 256, 1024, 512, 0, A_NONE, 0, 1, TALON_GEMM_SCALE_NONE, 0, 0},
        /* fp8 block scales: k past a 128-block edge, gated 256 / 128, odd rows, strides */
        {F8, CONT, 8, 300, 256, 272, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, CONT, 5, 129, 264, 400, 0, A_NONE, 16, 0, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, CONT, 16, 700, 960, 1024, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, CONT, 32, 512, 1024, 2048, 0, A_NONE, 0, 0, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, MASK, 8, 300, 192, 144, 1, A_GELU, 0, 1, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, MASK, 6, 100, 1000, 384, 0, A_RELU, 16, 0, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, MASK, 32, 256, 2048, 512, 0, A_NONE, 0, 1, TALON_GEMM_SCALE_BLOCK, 0, 0},
        /* fp8 scales per row and per tensor, in the epilogue: gated n 200 (no block rule),
           both tile widths, strides, both layouts */
        {F8, CONT, 8, 300, 200, 272, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_ROW, 0, 0},
        {F8, CONT, 5, 129, 264, 400, 0, A_GELU, 16, 0, TALON_GEMM_SCALE_ROW, 0, 0},
        {F8, CONT, 16, 700, 960, 1024, 1, A_TANH, 0, 1, TALON_GEMM_SCALE_ROW, 0, 0},
        {F8, CONT, 32, 512, 1024, 2048, 0, A_NONE, 0, 0, TALON_GEMM_SCALE_TENSOR, 0, 0},
        {F8, MASK, 8, 300, 192, 144, 1, A_GELU, 0, 1, TALON_GEMM_SCALE_TENSOR, 0, 0},
        {F8, MASK, 6, 100, 1000, 384, 0, A_RELU, 16, 0, TALON_GEMM_SCALE_ROW, 0, 0},
        {F8, MASK, 32, 256, 2048, 512, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_ROW, 0, 0},
        /* a bias per group (every row takes it) and CLAMPED_SWIGLU */
        {BF, CONT, 8, 300, 200, 264, 1, A_CLMP, 0, 1, TALON_GEMM_SCALE_NONE, 1, 3.f},
        {HF, MASK, 6, 100, 1000, 136, 0, A_GELU, 16, 0, TALON_GEMM_SCALE_NONE, 1, 0},
        {F8, CONT, 8, 300, 256, 272, 1, A_CLMP, 0, 1, TALON_GEMM_SCALE_BLOCK, 1, 7.f},
        {F8, MASK, 8, 300, 192, 144, 1, A_CLMP, 0, 1, TALON_GEMM_SCALE_ROW, 1, INFINITY},
    };
    static const gcase quick[] = {
        {BF, CONT, 8, 300, 200, 136, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, CONT, 4, 129, 264, 72, 0, A_NONE, 8, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, MASK, 6, 200, 72, 136, 1, A_GELU, 0, 1, TALON_GEMM_SCALE_NONE, 0, 0},
        {HF, MASK, 5, 100, 512, 64, 0, A_RELU, 8, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, CONT, 8, 256, 768, 256, 1, A_SILU, 0, 0, TALON_GEMM_SCALE_NONE, 0, 0},
        {BF, MASK, 8, 256, 1024, 128, 0, A_NONE, 0, 1, TALON_GEMM_SCALE_NONE, 0, 0},
        {F8, CONT, 8, 300, 256, 272, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, CONT, 4, 200, 192, 144, 1, A_GELU, 16, 0, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, MASK, 6, 200, 1024, 256, 0, A_NONE, 0, 1, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, CONT, 8, 256, 520, 400, 0, A_RELU, 0, 0, TALON_GEMM_SCALE_BLOCK, 0, 0},
        {F8, CONT, 8, 300, 200, 272, 1, A_SILU, 0, 1, TALON_GEMM_SCALE_ROW, 0, 0},
        {F8, MASK, 6, 200, 1000, 256, 0, A_GELU, 16, 1, TALON_GEMM_SCALE_TENSOR, 0, 0},
        {F8, MASK, 6, 100, 1000, 384, 0, A_RELU, 16, 0, TALON_GEMM_SCALE_ROW, 0, 0},
        {BF, CONT, 8, 300, 200, 264, 1, A_CLMP, 0, 1, TALON_GEMM_SCALE_NONE, 1, 3.f},
        {F8, MASK, 8, 300, 192, 144, 1, A_CLMP, 0, 1, TALON_GEMM_SCALE_ROW, 1, INFINITY},
    };
    const gcase *cases = g_quick ? quick : full;
    const int n = g_quick ? COUNT(quick) : COUNT(full);
    gpu_tally t;
    int i;
    (void)state;
    gpu_tally_start(&t, "grouped_gemm_layouts");
    for (i = 0; i < n; i++) run_gcase(&t, &cases[i], 0x9700 + (uint64_t)i);
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

/* The masked layout captured once and replayed on new counts, a and b (expert-parallel
   decode: shapes fixed, counts per step on the device). */
static void test_grouped_graph(void **state) {
    const gcase c = {BF, MASK, 8, 160, 136, 200, 1, A_CLMP, 0, 1, TALON_GEMM_SCALE_NONE, 1, 3.f};
    gpu_tally t;
    gjob j;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUstream cap;
    int rep;
    (void)state;
    gpu_tally_start(&t, "grouped_gemm_graph_replay");
    assert_int_equal(cu.cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(gjob_prepare(&j, &c, 0x9A00), 0);
    assert_int_equal(cu.cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(gjob_launch(&j, cap), TALON_SUCCESS);
    assert_int_equal(cu.cuStreamEndCapture(cap, &graph), CUDA_SUCCESS);
    assert_int_equal(cu.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    for (rep = 0; rep < 2; rep++) {
        t.cases++;
        assert_int_equal(gjob_upload(&j, 0x9A10 + (uint64_t)rep), 0);
        assert_int_equal(cu.cuGraphLaunch(exec, cap), CUDA_SUCCESS);
        assert_int_equal(cu.cuStreamSynchronize(cap), CUDA_SUCCESS);
        if (gjob_check(&j, &t.elements)) t.failures++;
    }
    cu.cuGraphExecDestroy(exec);
    cu.cuGraphDestroy(graph);
    cu.cuStreamDestroy(cap);
    gjob_free(&j);
    if (gpu_tally_end(&t, &g_cases, &g_elements)) fail();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_graph),
        cmocka_unit_test(test_moe_block),
        cmocka_unit_test(test_grouped),
        cmocka_unit_test(test_grouped_graph),
    };
    gpu_test t;
    int failed;
    if (gpu_test_begin(&t, "test_gpu_moe_gemm", CU_STREAM_DEFAULT)) return 1;
    g_ctx = t.ctx;
    g_stream = t.stream;
    g_quick = t.quick;
    failed = cmocka_run_group_tests_name("talon_moe_gemm and talon_grouped_gemm GPU", tests, NULL, NULL);
    return gpu_test_end(&t, "", g_cases, g_elements, failed);
}
