/* Every op of talon.h as a self-contained GPU test case, shared by the reliability tests
   tests/core/test_gpu_threads.c and tests/core/test_gpu_soak.c (both include this file once;
   its functions are static).

   A case (oc_case) is an op, a shape drawn at random by oc_random (valid by construction:
   every limit of talon.h respected) and a seed for the data. oc_build turns it into a job:
   the op's buffers (oc_buf), each an input (IN: uploaded once, must stay unchanged), an
   in/out buffer (INOUT: the op updates it in place; restored from a pristine device copy
   before every run), an output (OUT: poisoned with 0xFF bytes before every run, so an
   element the op never writes fails) or a workspace (WS: poisoned, never checked), with the
   host images of the inputs. Every buffer is its own allocation (compute-sanitizer sees any
   access past one) followed by OC_GUARD bytes that must keep their initial bytes.
   oc_check compares what came back with the fp64 references of tests/<family>/ref_*.c (or
   exact expectations for the ops that copy or quantise bit for bit), with the tolerances the
   family GPU tests use, and checks every element outside the op's views (row padding,
   elements before an offset pointer, rows an op must not write) for its initial bytes.
   oc_canon rewrites an output whose order the contract leaves open into a canonical form. */
#ifndef TALON_TESTS_OP_CASES_H
#define TALON_TESTS_OP_CASES_H
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpu.h"
#include "ref.h"
#include "talon.h"
#include "../decode/ref_attn.h"
#include "../gemm/ref_gemm.h"
#include "../moe/ref_moe.h"
#include "../moe_gemm/ref_moe_gemm.h"
#include "../quant/ref_quant.h"
#include "../rope/ref_rope.h"
#include "../router/ref_router.h"
#include "../topk/ref_topk.h"
/* op_calls.h: the union, op numbers and names, op_call */
#include "op_calls.h"

/* the functions a test program calls (each uses a subset of them) */
#if defined(__GNUC__)
#define OC_API static __attribute__((unused))
#else
#define OC_API static
#endif

#define OC_GUARD 64  /* bytes after every buffer that must keep their initial bytes */
#define OC_MAXBUF 10 /* buffers of one op (prefill_attention_paged has 9) */
#define OC_MAXB 8    /* requests of an attention case */

enum { OC_IN, OC_INOUT, OC_OUT, OC_WS };

typedef struct oc_buf {
    const char *name;
    int role, esize;
    size_t used;    /* bytes the op may touch: from the allocation's start to its last element */
    size_t bytes;   /* used + OC_GUARD: the allocation */
    size_t off;     /* bytes from the allocation to the pointer talon gets */
    uint8_t *init;  /* IN, INOUT: the host image (bytes long); OUT, WS: NULL (poison) */
} oc_buf;

typedef struct oc_case {
    int op;
    uint64_t seed;  /* the data */
    talon_dtype dt; /* the op's data type (logits, topk: f32 too; gather: by element size) */
    union {
        /* rmsnorm, fused_add_rmsnorm, layernorm, silu_and_mul, gelu_and_mul: cols of the
           output (the gated ops read 2 cols); strides 0 = contiguous; off: elements added to
           every pointer (1: misaligned, the element-wise path) */
        struct { int64_t rows, cols, in_stride, out_stride, res_stride, off; int bias, approx; } norm;
        struct { int64_t tokens, experts, k, stride; int scoring, renorm, bias; } router;
        struct { int64_t rows, cols, k, stride; int sorted; } topk;
        struct { int64_t tokens, k, experts, block, extra; int dist; } align;
        struct { int64_t tokens, k, hidden, off; int weighted; } sum;
        /* layout 0: q and k separate, contiguous; 1: one fused qkv buffer (rows padded by 8);
           2: fused, misaligned by one element, rows padded by 3. max_pos 0: theta mode */
        struct { int64_t tokens, hq, hk, d, rot, max_pos, pos_lo, pos_hi; int gptj, pos64, layout; float theta; } rope;
        /* strided: k and v as views of one buffer of rows 2 Hk D + pad */
        struct { int64_t tokens, hk, d, ps, pad; int fp8, hnd, strided; float k_scale, v_scale; } kv;
        struct { int64_t rows, cols, in_rows, in_stride, out_stride, bad_every; int esize, idx64; } gather;
        struct { int64_t hq, hk, d, ps, max_kv_len, window, splits, pt_pad; int batch, fp8, hnd, no_lse;
                 float cap, sm_scale, qamp, k_scale, v_scale; int lens[OC_MAXB]; } dec;
        struct { int64_t rows, d; int with_lse; } merge;
        /* prefill_attention (ps 0) and prefill_attention_paged (ps > 0); d 192: v 128 */
        struct { int64_t hq, hk, d, pad, ps; int batch, causal, window, no_lse, hnd;
                 float cap, sm_scale, qamp; int qlens[OC_MAXB], klens[OC_MAXB]; } pre;
        /* resid 0: none, 1: c, 2: in place (c = d); scale: fp8's talon_gemm_scale */
        struct { int64_t m, n, k, pad; int bias, resid, gated, scale; talon_gemm_act act;
                 talon_dtype ot; float alpha, beta; } gemm;
        struct { int64_t rows, cols, pad; int mode, row_major; } quant;
        struct { int64_t rows, cols, pad, off; int mode, residual; } nq;
        struct { int64_t tokens, topk, experts, n, k, pad; int gated, weights, masked;
                 talon_gemm_act act; talon_moe_rows a_rows, d_rows; } mg;
        /* grouped_gemm: rows of a and d (CONTIGUOUS) or per group (MASKED) */
        struct { int64_t groups, rows, n, k, pad; int gated, masked, used; talon_gemm_act act; } gg;
    } p;
} oc_case;

typedef struct oc_job {
    oc_case c;
    int nbuf;
    oc_buf b[OC_MAXBUF];
} oc_job;

/* Device memory of one job: every buffer, and the pristine copy of every INOUT buffer. */
typedef struct oc_dev {
    CUdeviceptr p[OC_MAXBUF], pristine[OC_MAXBUF];
} oc_dev;

/* What a check found: elements compared, mismatches (the first described), and the largest
   error seen as a share of its tolerance (tolerance-checked elements only). */
typedef struct oc_stats {
    int64_t elements, bad;
    double worst;
    char first[400];
} oc_stats;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void oc_fail(oc_stats *st, const char *fmt, ...) {
    if (!st->bad++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(st->first, sizeof st->first, fmt, ap);
        va_end(ap);
    }
}

/* ---------------------------------------------------------------- small helpers */
OC_API const char *oc_op_name(int op) { return op >= 0 && op < NUM_OPS ? op_names[op] : "?"; }

OC_API const char *oc_dtype_name(talon_dtype t) {
    switch (t) {
    case TALON_DTYPE_BF16: return "bf16";
    case TALON_DTYPE_F16: return "f16";
    case TALON_DTYPE_F32: return "f32";
    case TALON_DTYPE_FP8_E4M3: return "e4m3";
    default: return "?";
    }
}


static uint16_t oc_get16(const uint8_t *p, int64_t i) {
    uint16_t v;
    memcpy(&v, p + 2 * (size_t)i, 2);
    return v;
}
static void oc_set16(uint8_t *p, int64_t i, uint16_t v) { memcpy(p + 2 * (size_t)i, &v, 2); }
static float oc_getf(const uint8_t *p, int64_t i) {
    float v;
    memcpy(&v, p + 4 * (size_t)i, 4);
    return v;
}
static void oc_setf(uint8_t *p, int64_t i, float v) { memcpy(p + 4 * (size_t)i, &v, 4); }
static uint32_t oc_get32(const uint8_t *p, int64_t i) {
    uint32_t v;
    memcpy(&v, p + 4 * (size_t)i, 4);
    return v;
}
static int32_t oc_geti(const uint8_t *p, int64_t i) { return (int32_t)oc_get32(p, i); }
static void oc_seti(uint8_t *p, int64_t i, int32_t v) { memcpy(p + 4 * (size_t)i, &v, 4); }
static int64_t oc_getl(const uint8_t *p, int64_t i) {
    int64_t v;
    memcpy(&v, p + 8 * (size_t)i, 8);
    return v;
}
static void oc_setl(uint8_t *p, int64_t i, int64_t v) { memcpy(p + 8 * (size_t)i, &v, 8); }

/* a 16-bit element of x rounded to t, returned as stored */
static uint16_t oc_bits(talon_dtype t, float x) { return ref_from_f32(t, x); }

/* random draws from a splitmix64 state */
static int64_t oc_ri(uint64_t *s, int64_t lo, int64_t hi) { /* uniform in [lo, hi] */
    return lo + (int64_t)(ref_next64(s) % (uint64_t)(hi - lo + 1));
}
static int oc_chance(uint64_t *s, int percent) { return (int)(ref_next64(s) % 100) < percent; }
static float oc_u(uint64_t *s) { return 2.0f * ref_unit01(s) - 1.0f; } /* [-1, 1) */
/* log-uniform in [lo, hi]: small values often, the whole range sometimes */
static int64_t oc_len(uint64_t *s, int64_t lo, int64_t hi) {
    const double a = log((double)lo), b = log((double)hi + 1.0);
    int64_t v = (int64_t)exp(a + (b - a) * (double)ref_unit01(s));
    return v < lo ? lo : v > hi ? hi : v;
}
static int64_t oc_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* Adds a buffer of `elems` elements of esize bytes (counted from the pointer talon gets),
   `off` elements after the allocation's start; IN/INOUT images start as 0xFF bytes (NaN in
   every float type) so padding the builder does not fill reads as NaN. Returns its index. */
static int oc_add(oc_job *j, const char *name, int role, int esize, int64_t elems, int64_t off) {
    oc_buf *b = &j->b[j->nbuf];
    if (j->nbuf >= OC_MAXBUF || elems < 0 || off < 0) return -1;
    memset(b, 0, sizeof *b);
    b->name = name;
    b->role = role;
    b->esize = esize;
    b->off = (size_t)off * (size_t)esize;
    b->used = (size_t)(elems + off) * (size_t)esize;
    b->bytes = b->used + OC_GUARD;
    if (role == OC_IN || role == OC_INOUT) {
        if (!(b->init = (uint8_t *)malloc(b->bytes))) return -1;
        memset(b->init, 0xFF, b->bytes);
    }
    return j->nbuf++;
}

/* the host image of buffer i at the pointer talon gets */
static uint8_t *oc_img(const oc_job *j, int i) { return j->b[i].init + j->b[i].off; }

OC_API void oc_free(oc_job *j) {
    int i;
    for (i = 0; i < j->nbuf; i++) free(j->b[i].init);
    memset(j, 0, sizeof *j);
}

/* Every element of buffer bi's used region outside the view of `rows` rows of `width`
   elements with row stride ld (from the pointer) must hold its initial bytes (IN, INOUT) or
   the poison (OUT). */
static void oc_check_outside(oc_stats *st, const oc_job *j, int bi, const uint8_t *img,
                             int64_t rows, int64_t width, int64_t ld) {
    const oc_buf *b = &j->b[bi];
    const int64_t es = b->esize, off = (int64_t)b->off / es, n = (int64_t)b->used / es;
    int64_t i;
    for (i = 0; i < n; i++) {
        const int64_t e = i - off;
        const uint8_t *want = b->init ? b->init + i * es : NULL;
        int k, same = 1;
        if (e >= 0 && e / ld < rows && e % ld < width) continue;
        for (k = 0; k < es; k++) same &= img[i * es + k] == (want ? want[k] : 0xFF);
        if (!same) {
            oc_fail(st, "%s: element %lld (outside the op's rows: padding or before the "
                    "pointer) changed", b->name, (long long)(e));
            return;
        }
    }
}

/* ================================================================ per-op geometry */
static int oc_gated(int op) { return op == OP_silu_and_mul || op == OP_gelu_and_mul; }
static int64_t oc_pad(uint64_t *s) { return oc_chance(s, 50) ? 8 * oc_ri(s, 1, 4) : oc_ri(s, 1, 13); }

/* rope: where q, k (and v) live in the one qkv buffer (elements) */
typedef struct rope_geo {
    int64_t n, q, k, row_q, row_k, q_stride, k_stride; /* strides as passed (0: contiguous) */
} rope_geo;
static void rope_geometry(const oc_case *c, rope_geo *g) {
    const int64_t t = c->p.rope.tokens, hq = c->p.rope.hq, hk = c->p.rope.hk, d = c->p.rope.d;
    memset(g, 0, sizeof *g);
    if (c->p.rope.layout == 0) {
        g->k = oc_round_up(t * hq * d, 8);
        g->n = g->k + t * hk * d;
        g->row_q = hq * d;
        g->row_k = hk * d;
    } else {
        const int64_t row = (hq + 2 * hk) * d + (c->p.rope.layout == 1 ? 8 : 3);
        g->q = c->p.rope.layout == 2;
        g->k = g->q + hq * d;
        g->n = g->q + t * row;
        g->row_q = g->row_k = g->q_stride = g->k_stride = row;
    }
}

/* kv_append: the inputs' layout (elements of the one k/v buffer) and the caches' size */
typedef struct kv_geo {
    int64_t row, num_pages, slots, n, kpos, vpos, ld, stride; /* stride as passed (0: row) */
} kv_geo;
static void kv_geometry(const oc_case *c, kv_geo *g) {
    const int64_t t = c->p.kv.tokens, ps = c->p.kv.ps;
    memset(g, 0, sizeof *g);
    g->row = c->p.kv.hk * c->p.kv.d;
    g->num_pages = (t * 3 / 2 + ps - 1) / ps + 1;
    g->slots = g->num_pages * ps;
    if (c->p.kv.strided) {
        g->ld = g->stride = 2 * g->row + c->p.kv.pad;
        g->vpos = g->row;
        g->n = t * g->ld;
    } else {
        g->ld = g->row;
        g->vpos = oc_round_up(t * g->row, 8);
        g->n = g->vpos + t * g->row;
    }
}

/* decode: the page table's row stride and the caches' pages */
static void dec_geometry(const oc_case *c, int64_t *stride, int64_t *pages) {
    int b;
    *stride = (c->p.dec.max_kv_len + c->p.dec.ps - 1) / c->p.dec.ps + c->p.dec.pt_pad;
    *pages = 3; /* never referenced */
    for (b = 0; b < c->p.dec.batch; b++) *pages += (c->p.dec.lens[b] + c->p.dec.ps - 1) / c->p.dec.ps;
}

/* prefill: offsets of the requests, token strides, the paged cache's shape */
typedef struct pre_geo {
    int32_t cu_q[OC_MAXB + 1], cu_k[OC_MAXB + 1];
    int64_t total_q, total_kv, dv, qs, ks, vs, os, max_q, max_kv, pt_stride, num_pages;
} pre_geo;
static void pre_geometry(const oc_case *c, pre_geo *g) {
    int b;
    memset(g, 0, sizeof *g);
    for (b = 0; b < c->p.pre.batch; b++) {
        const int64_t pages = (c->p.pre.klens[b] + c->p.pre.ps - 1) / (c->p.pre.ps ? c->p.pre.ps : 1);
        g->cu_q[b + 1] = g->cu_q[b] + c->p.pre.qlens[b];
        g->cu_k[b + 1] = g->cu_k[b] + c->p.pre.klens[b];
        if (c->p.pre.qlens[b] > g->max_q) g->max_q = c->p.pre.qlens[b];
        if (c->p.pre.klens[b] > g->max_kv) g->max_kv = c->p.pre.klens[b];
        if (pages > g->pt_stride) g->pt_stride = pages;
        g->num_pages += pages;
    }
    g->total_q = g->cu_q[c->p.pre.batch] ? g->cu_q[c->p.pre.batch] : 1;
    g->total_kv = g->cu_k[c->p.pre.batch] ? g->cu_k[c->p.pre.batch] : 1;
    if (!g->max_q) g->max_q = 1;
    if (!g->max_kv) g->max_kv = 1;
    g->pt_stride += 1;  /* a longer row than needed */
    g->num_pages += 3;  /* spare pages, never referenced */
    g->dv = c->p.pre.d == 192 ? 128 : c->p.pre.d;
    g->qs = c->p.pre.hq * c->p.pre.d + c->p.pre.pad;
    g->ks = c->p.pre.hk * c->p.pre.d + c->p.pre.pad;
    g->vs = c->p.pre.hk * g->dv + c->p.pre.pad;
    g->os = c->p.pre.hq * g->dv + c->p.pre.pad;
}

/* gemm: strides, rows of b and the scales' counts */
typedef struct gemm_geo {
    int64_t isize, osize, lda, ldb, ldd, brows, kb, a_scales, b_scales;
    int fp8;
} gemm_geo;
static void gemm_geometry(const oc_case *c, gemm_geo *g) {
    const int64_t m = c->p.gemm.m, pad = c->p.gemm.pad;
    g->fp8 = c->dt == TALON_DTYPE_FP8_E4M3;
    g->isize = g->fp8 ? 1 : 2;
    g->osize = c->p.gemm.ot == TALON_DTYPE_F32 ? 4 : 2;
    g->lda = g->ldb = c->p.gemm.k + pad;
    g->ldd = c->p.gemm.n + pad;
    g->brows = c->p.gemm.gated ? 2 * c->p.gemm.n : c->p.gemm.n;
    g->kb = (c->p.gemm.k + 127) / 128;
    g->a_scales = !g->fp8 ? 1 : c->p.gemm.scale == TALON_GEMM_SCALE_ROW ? m
                  : c->p.gemm.scale == TALON_GEMM_SCALE_BLOCK ? g->kb * oc_round_up(m, 4) : 1;
    g->b_scales = !g->fp8 ? 1 : c->p.gemm.scale == TALON_GEMM_SCALE_ROW ? g->brows
                  : c->p.gemm.scale == TALON_GEMM_SCALE_BLOCK ? g->kb * ((g->brows + 127) / 128) : 1;
}

/* quant_fp8: the scales' layout */
static void quant_geometry(const oc_case *c, int64_t *rs, int64_t *gs, int64_t *n_scales) {
    const int64_t rows = c->p.quant.rows, groups = c->p.quant.cols / 128;
    *rs = c->p.quant.row_major ? groups : 1;
    *gs = c->p.quant.row_major ? 1 : oc_round_up(rows, 4);
    *n_scales = c->p.quant.mode == TALON_QUANT_TOKEN ? rows
                : c->p.quant.mode == TALON_QUANT_GROUP ? (c->p.quant.row_major ? rows * groups : *gs * groups)
                                                       : 1;
}

/* moe_gemm: moe_align's capacities (block 128) and the rows of a and d */
static int64_t mg_rows(talon_moe_rows rows, const oc_case *c, int64_t scap) {
    return rows == TALON_MOE_ROWS_SORTED ? scap
           : rows == TALON_MOE_ROWS_TOKEN ? c->p.mg.tokens : c->p.mg.tokens * c->p.mg.topk;
}

static void align_caps(const oc_case *c, int64_t *scap, int64_t *ecap) {
    *scap = *ecap = 0;
    talon_moe_align_block_size_capacity(c->p.align.tokens, c->p.align.k, c->p.align.experts,
                                        c->p.align.block, scap, ecap);
    *scap += c->p.align.extra;
    *ecap += c->p.align.extra;
}

/* ================================================================ random valid cases */
static const int64_t oc_heads[][2] = {{4, 4}, {16, 4}, {16, 2}, {8, 1}, {32, 8}, {3, 1},
                                      {10, 2}, {6, 6}, {40, 8}, {4, 2}, {7, 1}, {2, 1}};
#define OC_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* One random case of op. big 0: modest shapes (every element checked quickly); 1: the soak's
   range, up to a few million elements (large problems are checked on a sample of rows). */
OC_API void oc_random(oc_case *c, int op, uint64_t *s, int big) {
    const talon_dtype bf_or_f16 = oc_chance(s, 50) ? TALON_DTYPE_BF16 : TALON_DTYPE_F16;
    memset(c, 0, sizeof *c);
    c->op = op;
    c->seed = ref_next64(s);
    c->dt = bf_or_f16;
    switch (op) {
    case OP_rmsnorm: case OP_fused_add_rmsnorm: case OP_layernorm:
    case OP_silu_and_mul: case OP_gelu_and_mul: {
        const int64_t max_elems = big ? 6000000 : 150000;
        const int gated = oc_gated(op);
        int64_t w;
        c->p.norm.cols = oc_chance(s, 50) ? 8 * oc_len(s, 1, big ? 2048 : 512)
                                          : oc_len(s, 1, big ? 12000 : 3000);
        c->p.norm.rows = oc_len(s, 1, big ? 2048 : 96);
        while (c->p.norm.rows > 1 && c->p.norm.rows * c->p.norm.cols * (gated ? 3 : 2) > max_elems)
            c->p.norm.rows = (c->p.norm.rows + 1) / 2;
        w = gated ? 2 * c->p.norm.cols : c->p.norm.cols;
        c->p.norm.in_stride = oc_chance(s, 30) ? w + oc_pad(s) : 0;
        c->p.norm.out_stride = oc_chance(s, 30) ? c->p.norm.cols + oc_pad(s) : 0;
        c->p.norm.res_stride = oc_chance(s, 30) ? c->p.norm.cols + oc_pad(s) : 0;
        c->p.norm.off = oc_chance(s, 15);
        c->p.norm.bias = oc_chance(s, 50);
        c->p.norm.approx = oc_chance(s, 50);
        break;
    }
    case OP_moe_router_topk: {
        static const int64_t common[] = {8, 16, 60, 64, 128, 160, 256, 384, 512};
        const int r = (int)oc_ri(s, 0, 2);
        c->dt = r == 0 ? TALON_DTYPE_F32 : r == 1 ? TALON_DTYPE_BF16 : TALON_DTYPE_F16;
        c->p.router.tokens = oc_len(s, 1, big ? 4096 : 256);
        c->p.router.experts = oc_chance(s, 50) ? common[oc_ri(s, 0, OC_COUNT(common) - 1)] : oc_ri(s, 1, 512);
        c->p.router.k = oc_ri(s, 1, c->p.router.experts < 16 ? c->p.router.experts : 16);
        if (oc_chance(s, 25))
            c->p.router.stride = c->p.router.experts +
                                 (oc_chance(s, 50) ? (c->dt == TALON_DTYPE_F32 ? 4 : 8) : 3);
        c->p.router.scoring = oc_chance(s, 50);
        c->p.router.renorm = oc_chance(s, 50);
        c->p.router.bias = oc_chance(s, 50);
        break;
    }
    case OP_topk: {
        const int r = (int)oc_ri(s, 0, 2);
        const int64_t max_elems = big ? 1500000 : 150000;
        c->dt = r == 0 ? TALON_DTYPE_F32 : r == 1 ? TALON_DTYPE_BF16 : TALON_DTYPE_F16;
        c->p.topk.cols = oc_chance(s, 40) ? oc_len(s, 1, 4096)
                         : oc_chance(s, 70) || !big ? oc_ri(s, 4096, 40000) : oc_ri(s, 40000, 262144);
        c->p.topk.rows = oc_len(s, 1, big ? 256 : 16);
        while (c->p.topk.rows > 1 && c->p.topk.rows * c->p.topk.cols > max_elems)
            c->p.topk.rows = (c->p.topk.rows + 1) / 2;
        {
            const int64_t kmax = c->p.topk.cols < 1024 ? c->p.topk.cols : 1024;
            c->p.topk.k = oc_chance(s, 50) ? oc_len(s, 1, kmax) : oc_ri(s, 1, kmax < 64 ? kmax : 64);
        }
        if (oc_chance(s, 25)) c->p.topk.stride = c->p.topk.cols + oc_ri(s, 1, 5);
        c->p.topk.sorted = oc_chance(s, 50);
        break;
    }
    case OP_moe_align_block_size: {
        static const int64_t common[] = {8, 64, 128, 256, 512};
        const int64_t max_ids = big ? 300000 : 30000;
        c->p.align.tokens = oc_len(s, 1, big ? 16384 : 1024);
        c->p.align.k = oc_chance(s, 60) ? oc_ri(s, 1, 8) : oc_len(s, 1, 64);
        while (c->p.align.tokens > 1 && c->p.align.tokens * c->p.align.k > max_ids)
            c->p.align.tokens = (c->p.align.tokens + 1) / 2;
        c->p.align.experts = oc_chance(s, 50) ? oc_ri(s, 1, 512) : common[oc_ri(s, 0, OC_COUNT(common) - 1)];
        c->p.align.block = (int64_t)1 << oc_ri(s, 0, big ? 10 : 8);
        c->p.align.extra = oc_chance(s, 20) ? oc_ri(s, 1, 300) : 0;
        c->p.align.dist = oc_chance(s, 60) ? 0 : oc_chance(s, 60) ? 1 : 2;
        break;
    }
    case OP_moe_sum: {
        const int64_t max_elems = big ? 8000000 : 400000;
        c->p.sum.tokens = oc_len(s, 1, big ? 1024 : 128);
        c->p.sum.k = oc_chance(s, 70) ? oc_ri(s, 1, 9) : oc_len(s, 1, 64);
        c->p.sum.hidden = oc_chance(s, 50) ? 8 * oc_len(s, 1, 1024) : oc_len(s, 1, 6000);
        while (c->p.sum.tokens > 1 && c->p.sum.tokens * c->p.sum.k * c->p.sum.hidden > max_elems)
            c->p.sum.tokens = (c->p.sum.tokens + 1) / 2;
        c->p.sum.off = oc_chance(s, 20);
        c->p.sum.weighted = oc_chance(s, 60);
        break;
    }
    case OP_rope: {
        static const int64_t dims[] = {64, 128, 256, 80, 72, 66, 6, 32, 96, 2, 128, 1024};
        const int64_t max_elems = big ? 6000000 : 300000;
        int64_t per_token;
        c->p.rope.d = dims[oc_ri(s, 0, OC_COUNT(dims) - (big ? 1 : 2))];
        c->p.rope.rot = oc_chance(s, 60) ? 0 : 2 * oc_ri(s, 1, c->p.rope.d / 2);
        c->p.rope.hq = oc_len(s, 1, 32);
        c->p.rope.hk = oc_chance(s, 10) ? 0 : oc_len(s, 1, c->p.rope.hq < 8 ? c->p.rope.hq : 8);
        per_token = (c->p.rope.hq + 2 * c->p.rope.hk) * c->p.rope.d;
        c->p.rope.tokens = oc_len(s, 1, big ? 2048 : 256);
        while (c->p.rope.tokens > 1 && c->p.rope.tokens * per_token > max_elems)
            c->p.rope.tokens = (c->p.rope.tokens + 1) / 2;
        c->p.rope.layout = (int)oc_ri(s, 0, 2);
        c->p.rope.gptj = oc_chance(s, 50);
        c->p.rope.pos64 = oc_chance(s, 50);
        if (oc_chance(s, 50)) { /* theta: the angle in fp64, any position */
            static const float thetas[] = {0.0f, 10000.0f, 500000.0f, 1e6f};
            c->p.rope.theta = thetas[oc_ri(s, 0, 3)];
            if (oc_chance(s, 70)) { c->p.rope.pos_lo = 0; c->p.rope.pos_hi = 65536; }
            else if (!c->p.rope.pos64 || oc_chance(s, 50)) {
                c->p.rope.pos_lo = -2147483647;
                c->p.rope.pos_hi = 2147483647;
            }
            else { c->p.rope.pos_lo = -3000000000LL; c->p.rope.pos_hi = 3000000000LL; }
        } else { /* a cos/sin cache; some positions outside it (tokens left unchanged) */
            c->p.rope.max_pos = oc_len(s, 16, 4096);
            c->p.rope.pos_lo = -1 - c->p.rope.max_pos / 8;
            c->p.rope.pos_hi = c->p.rope.max_pos + 1 + c->p.rope.max_pos / 8;
        }
        break;
    }
    case OP_kv_append: {
        static const int64_t dims[] = {64, 128, 256, 80, 100, 7, 16, 1, 1024};
        static const float scales[] = {0.0f, 0.5f, 2.0f, 3.0f, 0.1f, 0.75f, 1.0f / 3.0f};
        const int64_t max_elems = big ? 4000000 : 250000;
        c->p.kv.fp8 = oc_chance(s, 30);
        c->p.kv.k_scale = c->p.kv.fp8 ? scales[oc_ri(s, 0, OC_COUNT(scales) - 1)] : 0.0f;
        c->p.kv.v_scale = c->p.kv.fp8 ? scales[oc_ri(s, 0, OC_COUNT(scales) - 1)] : 0.0f;
        c->p.kv.hk = oc_len(s, 1, 8);
        c->p.kv.d = dims[oc_ri(s, 0, OC_COUNT(dims) - (big ? 1 : 2))];
        c->p.kv.tokens = oc_len(s, 1, big ? 4096 : 256);
        while (c->p.kv.tokens > 1 && c->p.kv.tokens * c->p.kv.hk * c->p.kv.d * 4 > max_elems)
            c->p.kv.tokens = (c->p.kv.tokens + 1) / 2;
        c->p.kv.ps = (int64_t)1 << oc_ri(s, 0, 8);
        c->p.kv.hnd = oc_chance(s, 50);
        c->p.kv.strided = oc_chance(s, 40);
        c->p.kv.pad = oc_chance(s, 50) ? 0 : oc_chance(s, 50) ? 8 : 3;
        break;
    }
    case OP_gather_rows: {
        const int r = (int)oc_ri(s, 0, 3);
        const int64_t max_bytes = big ? 64 << 20 : 4 << 20;
        c->p.gather.esize = r < 2 ? 2 : r == 2 ? 4 : 1;
        c->dt = r == 2 ? TALON_DTYPE_F32 : r == 3 ? TALON_DTYPE_FP8_E4M3 : bf_or_f16;
        c->p.gather.idx64 = oc_chance(s, 50);
        c->p.gather.rows = oc_len(s, 1, big ? 4096 : 500);
        c->p.gather.cols = oc_chance(s, 50) ? oc_len(s, 1, 5000) : 16 / c->p.gather.esize * oc_len(s, 1, 512);
        c->p.gather.in_rows = oc_len(s, 1, big ? 100000 : 5000);
        while (c->p.gather.in_rows > 1 && c->p.gather.in_rows * c->p.gather.cols * c->p.gather.esize > max_bytes)
            c->p.gather.in_rows = (c->p.gather.in_rows + 1) / 2;
        while (c->p.gather.rows > 1 && c->p.gather.rows * c->p.gather.cols * c->p.gather.esize > max_bytes)
            c->p.gather.rows = (c->p.gather.rows + 1) / 2;
        if (oc_chance(s, 25)) c->p.gather.in_stride = c->p.gather.cols + oc_pad(s);
        if (oc_chance(s, 25)) c->p.gather.out_stride = c->p.gather.cols + oc_pad(s);
        c->p.gather.bad_every = oc_chance(s, 30) ? oc_ri(s, 2, 9) : 0;
        break;
    }
    case OP_decode_attention: {
        static const int64_t splits[] = {1, 2, 3, 7, 64, 256};
        const int h = (int)oc_ri(s, 0, OC_COUNT(oc_heads) - 1);
        const double max_work = big ? 4e8 : 2.5e7; /* batch x hq x keys x d */
        int64_t longest, b;
        c->p.dec.fp8 = oc_chance(s, 25);
        c->p.dec.hnd = oc_chance(s, 50);
        c->p.dec.d = (int64_t)64 << oc_ri(s, 0, 2);
        c->p.dec.hq = oc_heads[h][0];
        c->p.dec.hk = oc_heads[h][1];
        c->p.dec.ps = (int64_t)1 << oc_ri(s, 0, 8);
        c->p.dec.batch = (int)oc_ri(s, 1, big ? OC_MAXB : 4);
        longest = oc_len(s, 1, big ? 4096 : 1024);
        while (longest > 1 && ((double)(c->p.dec.batch * c->p.dec.hq * c->p.dec.d) * (double)longest > max_work ||
                               c->p.dec.batch * longest * c->p.dec.hk * c->p.dec.d > (big ? 8000000 : 1000000)))
            longest = (longest + 1) / 2;
        c->p.dec.max_kv_len = 1;
        for (b = 0; b < c->p.dec.batch; b++) {
            const int64_t r = oc_ri(s, 0, 9);
            c->p.dec.lens[b] = (int)(r == 0 ? 0 : r == 1 ? longest : oc_ri(s, 1, longest));
            if (c->p.dec.lens[b] > c->p.dec.max_kv_len) c->p.dec.max_kv_len = c->p.dec.lens[b];
        }
        if (oc_chance(s, 20)) c->p.dec.max_kv_len += oc_ri(s, 1, 100); /* a looser bound */
        c->p.dec.window = oc_chance(s, 25) ? oc_len(s, 1, longest) : 0;
        c->p.dec.cap = oc_chance(s, 25) ? (oc_chance(s, 50) ? 5.0f : 30.0f) : 0.0f;
        c->p.dec.qamp = c->p.dec.cap > 0 ? 4.0f : 1.0f;
        c->p.dec.splits = oc_chance(s, 25) ? splits[oc_ri(s, 0, OC_COUNT(splits) - 1)] : 0;
        c->p.dec.pt_pad = oc_chance(s, 25) ? 3 : 0;
        c->p.dec.no_lse = oc_chance(s, 20);
        c->p.dec.sm_scale = oc_chance(s, 20) ? 0.3f : 0.0f;
        c->p.dec.k_scale = c->p.dec.fp8 ? 0.3f + 2.0f * ref_unit01(s) : 1.0f;
        c->p.dec.v_scale = c->p.dec.fp8 ? 0.3f + 2.0f * ref_unit01(s) : 1.0f;
        break;
    }
    case OP_merge_attention_states:
        c->p.merge.rows = oc_len(s, 1, big ? 4096 : 600);
        c->p.merge.d = 8 * (big ? oc_len(s, 1, 512) : oc_ri(s, 1, 64));
        c->p.merge.with_lse = oc_chance(s, 70);
        break;
    case OP_prefill_attention: case OP_prefill_attention_paged: {
        const int paged = op == OP_prefill_attention_paged;
        const int h = (int)oc_ri(s, 0, OC_COUNT(oc_heads) - 1);
        const double max_work = big ? 3e9 : 4e7; /* sum of q x k x hq x d */
        double work;
        int b;
        c->p.pre.d = !paged && oc_chance(s, 20) ? 192 : (int64_t)64 << oc_ri(s, 0, 2);
        c->p.pre.hq = oc_heads[h][0];
        c->p.pre.hk = oc_heads[h][1];
        c->p.pre.batch = (int)oc_ri(s, 1, big ? 6 : 4);
        for (b = 0; b < c->p.pre.batch; b++) {
            const int64_t q = oc_chance(s, 10) ? 0 : oc_len(s, 1, big ? 1024 : 200);
            const int64_t r = oc_ri(s, 0, 19);
            c->p.pre.qlens[b] = (int)q;
            c->p.pre.klens[b] = (int)(r < 10 ? q : r < 17 ? q + oc_len(s, 1, big ? 2000 : 300) : oc_ri(s, 0, q));
        }
        if (!c->p.pre.qlens[0]) { /* at least one query */
            c->p.pre.qlens[0] = 1;
            if (!c->p.pre.klens[0]) c->p.pre.klens[0] = 1;
        }
        for (;;) { /* halve the longest request until the reference's work and q, k, v fit */
            int longest = 0;
            int64_t keys = 0, queries = 0;
            work = 0;
            for (b = 0; b < c->p.pre.batch; b++) {
                work += (double)c->p.pre.qlens[b] * (double)c->p.pre.klens[b];
                keys += c->p.pre.klens[b];
                queries += c->p.pre.qlens[b];
                if (c->p.pre.klens[b] + c->p.pre.qlens[b] > c->p.pre.klens[longest] + c->p.pre.qlens[longest])
                    longest = b;
            }
            if (work * (double)(c->p.pre.hq * c->p.pre.d) <= max_work &&
                keys * c->p.pre.hk * c->p.pre.d <= (big ? 8000000 : 1000000) &&
                queries * c->p.pre.hq * c->p.pre.d <= (big ? 8000000 : 1000000))
                break;
            c->p.pre.qlens[longest] = (c->p.pre.qlens[longest] + 1) / 2;
            c->p.pre.klens[longest] = (c->p.pre.klens[longest] + 1) / 2;
        }
        c->p.pre.causal = oc_chance(s, 50);
        c->p.pre.window = oc_chance(s, 25) ? (int)oc_len(s, 1, 300) : 0;
        c->p.pre.cap = oc_chance(s, 20) ? (oc_chance(s, 50) ? 5.0f : 20.0f) : 0.0f;
        c->p.pre.qamp = c->p.pre.cap > 0 ? 4.0f : 1.0f;
        c->p.pre.pad = oc_chance(s, 25) ? 8 * oc_ri(s, 1, 3) : 0;
        c->p.pre.no_lse = oc_chance(s, 20);
        c->p.pre.sm_scale = oc_chance(s, 20) ? 0.3f : 0.0f;
        if (paged) {
            c->p.pre.ps = (int64_t)1 << oc_ri(s, 0, 8);
            c->p.pre.hnd = oc_chance(s, 50);
        }
        break;
    }
    case OP_gemm: {
        static const float scalars[] = {0.0f, 0.0f, 0.0f, 0.5f, 2.0f, -1.25f};
        const int fp8 = oc_chance(s, 20);
        c->dt = fp8 ? TALON_DTYPE_FP8_E4M3 : bf_or_f16;
        c->p.gemm.ot = fp8 ? TALON_DTYPE_BF16 : oc_chance(s, 60) ? c->dt : TALON_DTYPE_F32;
        c->p.gemm.scale = fp8 ? (int)oc_ri(s, TALON_GEMM_SCALE_TENSOR, TALON_GEMM_SCALE_BLOCK) : 0;
        c->p.gemm.gated = oc_chance(s, 30);
        c->p.gemm.m = oc_len(s, 1, big ? 2048 : 200);
        c->p.gemm.n = c->p.gemm.gated && c->p.gemm.scale == TALON_GEMM_SCALE_BLOCK
                          ? 64 * oc_len(s, 1, big ? 32 : 8) : 8 * oc_len(s, 1, big ? 256 : 96);
        c->p.gemm.k = fp8 ? 16 * oc_len(s, 1, big ? 128 : 48) : 8 * oc_len(s, 1, big ? 256 : 96);
        c->p.gemm.pad = oc_chance(s, 25) ? 16 : 0;
        c->p.gemm.bias = oc_chance(s, 50);
        c->p.gemm.resid = oc_chance(s, 50) ? 0 : oc_chance(s, 50) ? 1 : 2;
        c->p.gemm.act = (talon_gemm_act)oc_ri(s, 0, 4);
        c->p.gemm.alpha = scalars[oc_ri(s, 0, OC_COUNT(scalars) - 1)];
        c->p.gemm.beta = scalars[oc_ri(s, 0, OC_COUNT(scalars) - 1)];
        break;
    }
    case OP_quant_fp8: {
        const int64_t max_elems = big ? 8000000 : 300000;
        c->p.quant.mode = (int)oc_ri(s, 0, 2);
        c->p.quant.cols = c->p.quant.mode == TALON_QUANT_GROUP ? 128 * oc_len(s, 1, big ? 64 : 24)
                                                               : 16 * oc_len(s, 1, big ? 1024 : 200);
        c->p.quant.rows = oc_len(s, 1, big ? 2048 : 256);
        while (c->p.quant.rows > 1 && c->p.quant.rows * c->p.quant.cols > max_elems)
            c->p.quant.rows = (c->p.quant.rows + 1) / 2;
        c->p.quant.pad = oc_chance(s, 25) ? 16 * oc_ri(s, 1, 3) : 0;
        c->p.quant.row_major = c->p.quant.mode == TALON_QUANT_GROUP && oc_chance(s, 50);
        break;
    }
    case OP_rmsnorm_quant_fp8: {
        const int64_t max_elems = big ? 6000000 : 150000;
        c->p.nq.mode = oc_chance(s, 50) ? TALON_QUANT_TENSOR : TALON_QUANT_TOKEN;
        c->p.nq.cols = oc_chance(s, 50) ? 8 * oc_len(s, 1, 1024) : oc_len(s, 1, big ? 12000 : 3000);
        c->p.nq.rows = oc_len(s, 1, big ? 2048 : 128);
        while (c->p.nq.rows > 1 && c->p.nq.rows * c->p.nq.cols > max_elems)
            c->p.nq.rows = (c->p.nq.rows + 1) / 2;
        c->p.nq.pad = oc_chance(s, 25) ? oc_pad(s) : 0;
        c->p.nq.off = oc_chance(s, 15) ? 4 : 0; /* 8 bytes: in and residual off 16-byte alignment */
        c->p.nq.residual = oc_chance(s, 50);
        break;
    }
    case OP_moe_gemm: {
        static const talon_moe_rows a_rows[] = {TALON_MOE_ROWS_SORTED, TALON_MOE_ROWS_TOKEN,
                                                TALON_MOE_ROWS_PAIR};
        c->p.mg.experts = oc_len(s, 1, big ? 32 : 16);
        c->p.mg.topk = oc_ri(s, 1, c->p.mg.experts < 4 ? c->p.mg.experts : 4);
        c->p.mg.tokens = oc_len(s, 1, big ? 512 : 64);
        c->p.mg.n = 8 * oc_len(s, 1, big ? 64 : 48);
        c->p.mg.k = 8 * oc_len(s, 1, big ? 64 : 48);
        c->p.mg.pad = oc_chance(s, 25) ? 8 : 0;
        c->p.mg.gated = oc_chance(s, 50);
        c->p.mg.act = (talon_gemm_act)oc_ri(s, 0, 4);
        c->p.mg.a_rows = a_rows[oc_ri(s, 0, 2)];
        c->p.mg.d_rows = oc_chance(s, 50) ? TALON_MOE_ROWS_SORTED : TALON_MOE_ROWS_PAIR;
        c->p.mg.weights = oc_chance(s, 50);
        c->p.mg.masked = oc_chance(s, 20);
        break;
    }
    case OP_grouped_gemm: {
        /* fp8: block scales; k and the row padding in 16-byte units, gated n in 64s */
        const int fp8 = oc_chance(s, 30);
        if (fp8) c->dt = TALON_DTYPE_FP8_E4M3;
        c->p.gg.groups = oc_len(s, 1, big ? 32 : 12);
        c->p.gg.masked = oc_chance(s, 50);
        c->p.gg.rows = c->p.gg.masked ? oc_len(s, 1, big ? 600 : 200) : 128 * oc_len(s, 1, big ? 24 : 6);
        c->p.gg.gated = oc_chance(s, 50);
        c->p.gg.n = fp8 && c->p.gg.gated ? 64 * oc_len(s, 1, big ? 8 : 6) : 8 * oc_len(s, 1, big ? 64 : 48);
        c->p.gg.k = (fp8 ? 16 : 8) * oc_len(s, 1, big ? 64 : 48);
        c->p.gg.pad = oc_chance(s, 25) ? (fp8 ? 16 : 8) : 0;
        c->p.gg.act = (talon_gemm_act)oc_ri(s, 0, 4);
        c->p.gg.used = !c->p.gg.masked && oc_chance(s, 50);
        break;
    }
    }
}

OC_API int oc_describe(const oc_case *c, char *buf, size_t n) {
    const char *name = oc_op_name(c->op);
    const char *dt = oc_dtype_name(c->dt);
    const unsigned long long seed = (unsigned long long)c->seed;
    switch (c->op) {
    case OP_rmsnorm: case OP_fused_add_rmsnorm: case OP_layernorm:
    case OP_silu_and_mul: case OP_gelu_and_mul:
        return snprintf(buf, n, "%s %s rows %lld cols %lld in_stride %lld out_stride %lld "
                        "residual_stride %lld offset %lld bias %d approx %d seed %llx", name, dt,
                        (long long)c->p.norm.rows, (long long)c->p.norm.cols,
                        (long long)c->p.norm.in_stride, (long long)c->p.norm.out_stride,
                        (long long)c->p.norm.res_stride, (long long)c->p.norm.off,
                        c->p.norm.bias, c->p.norm.approx, seed);
    case OP_moe_router_topk:
        return snprintf(buf, n, "%s %s tokens %lld experts %lld k %lld stride %lld %s%s%s seed %llx",
                        name, dt, (long long)c->p.router.tokens, (long long)c->p.router.experts,
                        (long long)c->p.router.k, (long long)c->p.router.stride,
                        c->p.router.scoring ? "sigmoid" : "softmax", c->p.router.bias ? " bias" : "",
                        c->p.router.renorm ? " renormalised" : "", seed);
    case OP_topk:
        return snprintf(buf, n, "%s %s rows %lld cols %lld k %lld stride %lld %s seed %llx", name,
                        dt, (long long)c->p.topk.rows, (long long)c->p.topk.cols,
                        (long long)c->p.topk.k, (long long)c->p.topk.stride,
                        c->p.topk.sorted ? "sorted" : "unsorted", seed);
    case OP_moe_align_block_size:
        return snprintf(buf, n, "%s tokens %lld k %lld experts %lld block %lld extra %lld dist %d "
                        "seed %llx", name, (long long)c->p.align.tokens, (long long)c->p.align.k,
                        (long long)c->p.align.experts, (long long)c->p.align.block,
                        (long long)c->p.align.extra, c->p.align.dist, seed);
    case OP_moe_sum:
        return snprintf(buf, n, "%s %s tokens %lld k %lld hidden %lld offset %lld %s seed %llx",
                        name, dt, (long long)c->p.sum.tokens, (long long)c->p.sum.k,
                        (long long)c->p.sum.hidden, (long long)c->p.sum.off,
                        c->p.sum.weighted ? "weighted" : "plain", seed);
    case OP_rope:
        return snprintf(buf, n, "%s %s tokens %lld Hq %lld Hk %lld D %lld rot %lld %s layout %d "
                        "%s positions [%lld, %lld) %s (theta %g, max_pos %lld) seed %llx", name,
                        dt, (long long)c->p.rope.tokens, (long long)c->p.rope.hq,
                        (long long)c->p.rope.hk, (long long)c->p.rope.d, (long long)c->p.rope.rot,
                        c->p.rope.gptj ? "GPT-J" : "NeoX", c->p.rope.layout,
                        c->p.rope.pos64 ? "int64" : "int32", (long long)c->p.rope.pos_lo,
                        (long long)c->p.rope.pos_hi, c->p.rope.max_pos ? "cache" : "theta",
                        (double)c->p.rope.theta, (long long)c->p.rope.max_pos, seed);
    case OP_kv_append:
        return snprintf(buf, n, "%s %s -> %s %s tokens %lld Hk %lld D %lld page %lld %s pad %lld "
                        "scales %g %g seed %llx", name, dt, c->p.kv.fp8 ? "e4m3" : dt,
                        c->p.kv.hnd ? "HND" : "NHD", (long long)c->p.kv.tokens,
                        (long long)c->p.kv.hk, (long long)c->p.kv.d, (long long)c->p.kv.ps,
                        c->p.kv.strided ? "strided" : "contiguous", (long long)c->p.kv.pad,
                        (double)c->p.kv.k_scale, (double)c->p.kv.v_scale, seed);
    case OP_gather_rows:
        return snprintf(buf, n, "%s %s rows %lld cols %lld in_rows %lld strides %lld/%lld %s "
                        "bad_every %lld seed %llx", name, dt, (long long)c->p.gather.rows,
                        (long long)c->p.gather.cols, (long long)c->p.gather.in_rows,
                        (long long)c->p.gather.out_stride, (long long)c->p.gather.in_stride,
                        c->p.gather.idx64 ? "int64" : "int32", (long long)c->p.gather.bad_every,
                        seed);
    case OP_decode_attention: {
        int k = snprintf(buf, n, "%s %s%s D %lld Hq %lld Hk %lld page %lld %s max_kv_len %lld "
                         "window %lld cap %g splits %lld pt_pad %lld%s sm_scale %g lens {",
                         name, dt, c->p.dec.fp8 ? " kv e4m3" : "", (long long)c->p.dec.d,
                         (long long)c->p.dec.hq, (long long)c->p.dec.hk, (long long)c->p.dec.ps,
                         c->p.dec.hnd ? "HND" : "NHD", (long long)c->p.dec.max_kv_len,
                         (long long)c->p.dec.window, (double)c->p.dec.cap,
                         (long long)c->p.dec.splits, (long long)c->p.dec.pt_pad,
                         c->p.dec.no_lse ? " no-lse" : "", (double)c->p.dec.sm_scale);
        int b;
        for (b = 0; b < c->p.dec.batch && k > 0 && (size_t)k < n; b++)
            k += snprintf(buf + k, n - (size_t)k, "%s%d", b ? "," : "", c->p.dec.lens[b]);
        if (k > 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, "} seed %llx", seed);
        return k;
    }
    case OP_merge_attention_states:
        return snprintf(buf, n, "%s %s rows %lld head_dim %lld%s seed %llx", name, dt,
                        (long long)c->p.merge.rows, (long long)c->p.merge.d,
                        c->p.merge.with_lse ? "" : " no-lse", seed);
    case OP_prefill_attention: case OP_prefill_attention_paged: {
        int k = snprintf(buf, n, "%s %s D %lld Hq %lld Hk %lld %s window %d cap %g pad %lld%s "
                         "sm_scale %g page %lld %s lens {", name, dt, (long long)c->p.pre.d,
                         (long long)c->p.pre.hq, (long long)c->p.pre.hk,
                         c->p.pre.causal ? "causal" : "full", c->p.pre.window,
                         (double)c->p.pre.cap, (long long)c->p.pre.pad,
                         c->p.pre.no_lse ? " no-lse" : "", (double)c->p.pre.sm_scale,
                         (long long)c->p.pre.ps, c->p.pre.hnd ? "HND" : "NHD");
        int b;
        for (b = 0; b < c->p.pre.batch && k > 0 && (size_t)k < n; b++)
            k += snprintf(buf + k, n - (size_t)k, "%s%d/%d", b ? "," : "", c->p.pre.qlens[b],
                          c->p.pre.klens[b]);
        if (k > 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, "} seed %llx", seed);
        return k;
    }
    case OP_gemm:
        return snprintf(buf, n, "%s %s->%s m %lld n %lld k %lld pad %lld bias %d resid %d act %d "
                        "gated %d alpha %g beta %g scale %d seed %llx", name, dt,
                        oc_dtype_name(c->p.gemm.ot), (long long)c->p.gemm.m, (long long)c->p.gemm.n,
                        (long long)c->p.gemm.k, (long long)c->p.gemm.pad, c->p.gemm.bias,
                        c->p.gemm.resid, (int)c->p.gemm.act, c->p.gemm.gated,
                        (double)c->p.gemm.alpha, (double)c->p.gemm.beta, c->p.gemm.scale, seed);
    case OP_quant_fp8:
        return snprintf(buf, n, "%s %s mode %d rows %lld cols %lld pad %lld row_major %d seed %llx",
                        name, dt, c->p.quant.mode, (long long)c->p.quant.rows,
                        (long long)c->p.quant.cols, (long long)c->p.quant.pad,
                        c->p.quant.row_major, seed);
    case OP_rmsnorm_quant_fp8:
        return snprintf(buf, n, "%s %s mode %d rows %lld cols %lld pad %lld offset %lld "
                        "residual %d seed %llx", name, dt, c->p.nq.mode, (long long)c->p.nq.rows,
                        (long long)c->p.nq.cols, (long long)c->p.nq.pad, (long long)c->p.nq.off,
                        c->p.nq.residual, seed);
    case OP_moe_gemm:
        return snprintf(buf, n, "%s %s tokens %lld topk %lld experts %lld n %lld k %lld pad %lld "
                        "gated %d act %d rows %d->%d weights %d masked %d seed %llx", name, dt,
                        (long long)c->p.mg.tokens, (long long)c->p.mg.topk,
                        (long long)c->p.mg.experts, (long long)c->p.mg.n, (long long)c->p.mg.k,
                        (long long)c->p.mg.pad, c->p.mg.gated, (int)c->p.mg.act,
                        (int)c->p.mg.a_rows, (int)c->p.mg.d_rows, c->p.mg.weights,
                        c->p.mg.masked, seed);
    case OP_grouped_gemm:
        return snprintf(buf, n, "%s %s %s groups %lld rows %lld n %lld k %lld pad %lld gated %d "
                        "act %d rows_used %d seed %llx", name, dt,
                        c->p.gg.masked ? "masked" : "contiguous", (long long)c->p.gg.groups,
                        (long long)c->p.gg.rows, (long long)c->p.gg.n, (long long)c->p.gg.k,
                        (long long)c->p.gg.pad, c->p.gg.gated, (int)c->p.gg.act, c->p.gg.used, seed);
    }
    return snprintf(buf, n, "%s", name);
}

/* ================================================================ building the host images */
/* fills n 16-bit elements from element `at` of buffer bi's image: amp * uniform [-1, 1) */
static void oc_fill16(oc_job *j, int bi, int64_t at, int64_t n, float amp, uint64_t *s) {
    uint8_t *p = oc_img(j, bi);
    int64_t i;
    for (i = 0; i < n; i++) oc_set16(p, at + i, oc_bits(j->c.dt, amp * oc_u(s)));
}

static int norm_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int gated = oc_gated(c->op), fused = c->op == OP_fused_add_rmsnorm;
    const int ln = c->op == OP_layernorm;
    const int64_t rows = c->p.norm.rows, cols = c->p.norm.cols, off = c->p.norm.off;
    const int64_t w = gated ? 2 * cols : cols;
    const int64_t ldx = c->p.norm.in_stride ? c->p.norm.in_stride : w;
    const int64_t ldy = c->p.norm.out_stride ? c->p.norm.out_stride : cols;
    const int64_t ldr = c->p.norm.res_stride ? c->p.norm.res_stride : cols;
    uint64_t s = c->seed;
    int64_t r, k;
    int yi;
    if (oc_add(j, "in", fused ? OC_INOUT : OC_IN, 2, (rows - 1) * ldx + w, off) != 0) return -1;
    if (!gated && oc_add(j, "weight", OC_IN, 2, cols, off) != 1) return -1;
    yi = oc_add(j, fused ? "residual" : "out", fused ? OC_INOUT : OC_OUT, 2,
                (rows - 1) * (fused ? ldr : ldy) + cols, off);
    if (yi < 0 || (ln && oc_add(j, "bias", OC_IN, 2, cols, off) != 3)) return -1;
    for (r = 0; r < rows; r++) /* row padding stays NaN */
        for (k = 0; k < w; k++) {
            /* layernorm: mean 3, sd 1 (the mean matters); others uniform in [-2, 2) */
            const float v = ln ? 3.0f + (ref_unit01(&s) + ref_unit01(&s) + ref_unit01(&s) +
                                         ref_unit01(&s) - 2.0f) * 1.7320508f
                               : 2.0f * oc_u(&s);
            oc_set16(oc_img(j, 0), r * ldx + k, oc_bits(c->dt, v));
        }
    if (!gated)
        for (k = 0; k < cols; k++) oc_set16(oc_img(j, 1), k, oc_bits(c->dt, 0.5f + ref_unit01(&s)));
    if (fused)
        for (r = 0; r < rows; r++) oc_fill16(j, yi, r * ldr, cols, 2.0f, &s);
    if (ln) oc_fill16(j, 3, 0, cols, 1.0f, &s);
    return 0;
}

static int router_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int esize = c->dt == TALON_DTYPE_F32 ? 4 : 2;
    const int64_t t = c->p.router.tokens, e = c->p.router.experts, k = c->p.router.k;
    const int64_t ld = c->p.router.stride ? c->p.router.stride : e;
    uint64_t s = c->seed;
    int64_t r, x;
    if (oc_add(j, "logits", OC_IN, esize, (t - 1) * ld + e, 0) != 0 ||
        oc_add(j, "correction_bias", OC_IN, 4, e, 0) != 1 ||
        oc_add(j, "topk_weights", OC_OUT, 4, t * k, 0) != 2 ||
        oc_add(j, "topk_ids", OC_OUT, 4, t * k, 0) != 3)
        return -1;
    for (r = 0; r < t; r++) /* row padding stays NaN: it would rank first if read */
        for (x = 0; x < e; x++) {
            const float v = 4.0f * oc_u(&s);
            if (esize == 4) oc_setf(oc_img(j, 0), r * ld + x, v);
            else oc_set16(oc_img(j, 0), r * ld + x, oc_bits(c->dt, v));
        }
    for (x = 0; x < e; x++) oc_setf(oc_img(j, 1), x, 0.1f * oc_u(&s));
    return 0;
}

static int topk_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int esize = c->dt == TALON_DTYPE_F32 ? 4 : 2;
    const int64_t rows = c->p.topk.rows, cols = c->p.topk.cols, k = c->p.topk.k;
    const int64_t ld = c->p.topk.stride ? c->p.topk.stride : cols;
    talon_topk_args a;
    int64_t ws = 0, r, i;
    uint64_t s = c->seed;
    const int pattern = (int)(ref_next64(&s) % 3); /* spread, 8 values (ties), [0, 1) */
    memset(&a, 0, sizeof a);
    a.rows = rows;
    a.cols = cols;
    if (talon_topk_workspace_size(ctx, &a, &ws) != TALON_SUCCESS) return -1;
    if (oc_add(j, "in", OC_IN, esize, (rows - 1) * ld + cols, 0) != 0 ||
        oc_add(j, "out_values", OC_OUT, esize, rows * k, 0) != 1 ||
        oc_add(j, "out_indices", OC_OUT, 4, rows * k, 0) != 2 ||
        oc_add(j, "workspace", OC_WS, 1, ws, 0) != 3)
        return -1;
    for (r = 0; r < rows; r++) /* padding NaN */
        for (i = 0; i < cols; i++) {
            const float u = ref_unit01(&s);
            const float v = pattern == 0 ? 6.0f * (u + ref_unit01(&s) - 1.0f)
                            : pattern == 1 ? (float)(int)(u * 8.0f) - 3.0f : u;
            if (esize == 4) oc_setf(oc_img(j, 0), r * ld + i, v);
            else oc_set16(oc_img(j, 0), r * ld + i, oc_bits(c->dt, v));
        }
    return 0;
}

static int align_build(oc_job *j) {
    static const int32_t bad[] = {-1, -1, -2, 0, 1, INT32_MAX, INT32_MIN, -1000};
    const oc_case *c = &j->c;
    const int64_t n = c->p.align.tokens * c->p.align.k, e = c->p.align.experts;
    int64_t scap, ecap, i;
    uint64_t s = c->seed;
    align_caps(c, &scap, &ecap);
    if (oc_add(j, "topk_ids", OC_IN, 4, n, 0) != 0 ||
        oc_add(j, "sorted_token_ids", OC_OUT, 4, scap, 0) != 1 ||
        oc_add(j, "expert_ids", OC_OUT, 4, ecap, 0) != 2 ||
        oc_add(j, "num_tokens_post_padded", OC_OUT, 4, 1, 0) != 3)
        return -1;
    for (i = 0; i < n; i++) {
        const uint64_t r = ref_next64(&s);
        int32_t id = (int32_t)((r >> 8) % (uint64_t)e);
        if (c->p.align.dist == 0 && r % 10 == 0) { /* ~10% ids outside [0, experts): skipped */
            const int32_t b = bad[(r >> 40) % 8];
            id = b == 0 ? (int32_t)e : b == 1 ? (int32_t)e + 7 : b;
        } else if (c->p.align.dist == 2 && r % 10) {
            id = (int32_t)(3 % e); /* 90% on one expert */
        }
        oc_seti(oc_img(j, 0), i, id);
    }
    return 0;
}

static int sum_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.sum.tokens, k = c->p.sum.k, h = c->p.sum.hidden, off = c->p.sum.off;
    uint64_t s = c->seed;
    int64_t i;
    if (oc_add(j, "in", OC_IN, 2, t * k * h, off) != 0 ||
        oc_add(j, "weights", OC_IN, 4, t * k, 0) != 1 ||
        oc_add(j, "out", OC_OUT, 2, t * h, off) != 2)
        return -1;
    oc_fill16(j, 0, 0, t * k * h, 1.0f, &s);
    for (i = 0; i < t * k; i++) oc_setf(oc_img(j, 1), i, ref_unit01(&s));
    return 0;
}

static int rope_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.rope.tokens, rot = c->p.rope.rot ? c->p.rope.rot : c->p.rope.d;
    const int64_t max_pos = c->p.rope.max_pos;
    rope_geo g;
    uint64_t s = c->seed;
    int64_t i, p;
    rope_geometry(c, &g);
    if (oc_add(j, "qkv", OC_INOUT, 2, g.n, 0) != 0 ||
        oc_add(j, "positions", OC_IN, c->p.rope.pos64 ? 8 : 4, t, 0) != 1 ||
        oc_add(j, "cos_sin_cache", OC_IN, 4, max_pos ? max_pos * rot : 1, 0) != 2)
        return -1;
    oc_fill16(j, 0, 0, g.n, 4.0f, &s); /* every element: what is not rotated must stay */
    for (i = 0; i < t; i++) {
        int64_t pos = c->p.rope.pos_lo +
                      (int64_t)(ref_next64(&s) % (uint64_t)(c->p.rope.pos_hi - c->p.rope.pos_lo));
        if (i == 0) /* token 0 is rotated (position 0 is the identity) */
            pos = max_pos ? 1 + (pos & 0x7fffffff) % (max_pos - 1) : pos ? pos : 1;
        if (c->p.rope.pos64) oc_setl(oc_img(j, 1), i, pos);
        else oc_seti(oc_img(j, 1), i, (int32_t)pos);
    }
    if (max_pos) {
        double *row = (double *)malloc((size_t)rot * sizeof(double));
        if (!row) return -1;
        for (p = 0; p < max_pos; p++) {
            ref_rope_theta_row(row, (double)p, 10000.0, rot);
            for (i = 0; i < rot; i++) oc_setf(oc_img(j, 2), p * rot + i, (float)row[i]);
        }
        free(row);
    }
    return 0;
}

static int kv_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int es = c->p.kv.fp8 ? 1 : 2;
    const int64_t t = c->p.kv.tokens;
    kv_geo g;
    int64_t *perm, i;
    uint64_t s = c->seed;
    kv_geometry(c, &g);
    if (oc_add(j, "k and v", OC_IN, 2, g.n, 0) != 0 ||
        oc_add(j, "slot_mapping", OC_IN, 8, t, 0) != 1 ||
        oc_add(j, "k_cache", OC_INOUT, es, g.slots * g.row, 0) != 2 || /* starts poisoned */
        oc_add(j, "v_cache", OC_INOUT, es, g.slots * g.row, 0) != 3)
        return -1;
    /* fp8: values past 448 too (saturation) */
    oc_fill16(j, 0, 0, g.n, c->p.kv.fp8 ? 600.0f : 4.0f, &s);
    if (!(perm = (int64_t *)malloc((size_t)g.slots * sizeof(int64_t)))) return -1;
    for (i = 0; i < g.slots; i++) perm[i] = i;
    for (i = g.slots - 1; i > 0; i--) {
        const int64_t k = (int64_t)(ref_next64(&s) % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[k];
        perm[k] = x;
    }
    for (i = 0; i < t; i++) { /* distinct slots (equal ones race); 1 in 8 negative, 1 in 16
                                 past the end (token 0 always lands) */
        const uint64_t r = i ? ref_next64(&s) % 16 : 15;
        oc_setl(oc_img(j, 1), i, r < 2 ? -1 - (int64_t)r * 1000 : r == 2 ? g.slots + i : perm[i]);
    }
    free(perm);
    return 0;
}

static int gather_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int es = c->p.gather.esize, ib = c->p.gather.idx64 ? 8 : 4;
    const int64_t rows = c->p.gather.rows, cols = c->p.gather.cols, in_rows = c->p.gather.in_rows;
    const int64_t is = c->p.gather.in_stride ? c->p.gather.in_stride : cols;
    const int64_t os = c->p.gather.out_stride ? c->p.gather.out_stride : cols;
    uint64_t s = c->seed;
    int64_t i;
    if (oc_add(j, "in", OC_IN, es, (in_rows - 1) * is + cols, 0) != 0 ||
        oc_add(j, "indices", OC_IN, ib, rows, 0) != 1 ||
        oc_add(j, "out", OC_OUT, es, (rows - 1) * os + cols, 0) != 2)
        return -1;
    for (i = 0; i < (int64_t)j->b[0].used; i++) j->b[0].init[i] = (uint8_t)(ref_next64(&s) >> 32);
    for (i = 0; i < rows; i++) {
        static const int64_t bad[] = {-1, -2, INT32_MAX, INT32_MIN, INT64_MIN, INT64_MAX, -7};
        const uint64_t x = ref_next64(&s);
        int64_t v = (int64_t)(x % (uint64_t)in_rows);
        if (c->p.gather.bad_every && i % c->p.gather.bad_every == c->p.gather.bad_every - 1) {
            const int b = (int)((x >> 7) % 9);
            v = b < 7 ? bad[b] : b == 7 ? in_rows : in_rows + 1; /* read as zero rows */
            if (ib == 4 && (v > INT32_MAX || v < INT32_MIN)) v = -7;
        }
        if (ib == 8) oc_setl(oc_img(j, 1), i, v);
        else oc_seti(oc_img(j, 1), i, (int32_t)v);
    }
    return 0;
}

static void dec_args_shape(const oc_case *c, talon_decode_attention_args *a) {
    memset(a, 0, sizeof *a);
    a->batch = c->p.dec.batch;
    a->num_qo_heads = c->p.dec.hq;
    a->num_kv_heads = c->p.dec.hk;
    a->head_dim = c->p.dec.d;
    a->page_size = c->p.dec.ps;
    a->max_kv_len = c->p.dec.max_kv_len;
    a->page_table_stride = c->p.dec.pt_pad ? (c->p.dec.max_kv_len + c->p.dec.ps - 1) / c->p.dec.ps +
                                                 c->p.dec.pt_pad : 0;
    a->window = c->p.dec.window;
    a->num_splits = c->p.dec.splits;
    a->sm_scale = c->p.dec.sm_scale;
    a->logits_soft_cap = c->p.dec.cap;
    a->k_scale = c->p.dec.k_scale;
    a->v_scale = c->p.dec.v_scale;
    a->dtype = c->dt;
    a->kv_dtype = c->p.dec.fp8 ? TALON_DTYPE_FP8_E4M3 : c->dt;
    a->layout = c->p.dec.hnd ? TALON_KV_HND : TALON_KV_NHD;
}

static int dec_build(oc_job *j, talon_ctx *ctx) {
    const oc_case *c = &j->c;
    const int es = c->p.dec.fp8 ? 1 : 2;
    const int64_t rows = c->p.dec.batch * c->p.dec.hq, d = c->p.dec.d, ps = c->p.dec.ps;
    talon_decode_attention_args a;
    int64_t stride, pages, cache, ws = 0, i, *perm, n = 0;
    uint64_t s = c->seed;
    int b;
    dec_geometry(c, &stride, &pages);
    cache = pages * ps * c->p.dec.hk * d;
    dec_args_shape(c, &a);
    if (talon_decode_attention_workspace_size(ctx, &a, &ws) != TALON_SUCCESS) return -1;
    if (oc_add(j, "q", OC_IN, 2, rows * d, 0) != 0 || oc_add(j, "k_cache", OC_IN, es, cache, 0) != 1 ||
        oc_add(j, "v_cache", OC_IN, es, cache, 0) != 2 ||
        oc_add(j, "page_table", OC_IN, 4, c->p.dec.batch * stride, 0) != 3 ||
        oc_add(j, "kv_lens", OC_IN, 4, c->p.dec.batch, 0) != 4 ||
        oc_add(j, "o", OC_OUT, 2, rows * d, 0) != 5 || oc_add(j, "lse", OC_OUT, 4, rows, 0) != 6 ||
        oc_add(j, "workspace", OC_WS, 1, ws, 0) != 7)
        return -1;
    oc_fill16(j, 0, 0, rows * d, c->p.dec.qamp, &s);
    for (i = 0; i < cache; i++) {
        if (es == 1) { /* fp8: wider values, one in 64 past 448 (saturates) */
            float xk = 8.0f * oc_u(&s), xv = 8.0f * oc_u(&s);
            if ((ref_next64(&s) & 63) == 0) xk = xk > 0 ? 600.0f : -500.0f;
            oc_img(j, 1)[i] = ref_e4m3_from_f32(xk);
            oc_img(j, 2)[i] = ref_e4m3_from_f32(xv);
        } else {
            oc_set16(oc_img(j, 1), i, oc_bits(c->dt, oc_u(&s)));
            oc_set16(oc_img(j, 2), i, oc_bits(c->dt, oc_u(&s)));
        }
    }
    /* each request's pages: a random permutation of the cache's; entries past them point far
       outside the cache (never read) */
    if (!(perm = (int64_t *)malloc((size_t)pages * sizeof(int64_t)))) return -1;
    for (i = 0; i < pages; i++) perm[i] = i;
    for (i = pages - 1; i > 0; i--) {
        const int64_t k = (int64_t)(ref_next64(&s) % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[k];
        perm[k] = x;
    }
    for (i = 0; i < c->p.dec.batch * stride; i++) oc_seti(oc_img(j, 3), i, 0x3fffffff);
    for (b = 0; b < c->p.dec.batch; b++) {
        for (i = 0; i < (c->p.dec.lens[b] + ps - 1) / ps; i++)
            oc_seti(oc_img(j, 3), b * stride + i, (int32_t)perm[n++]);
        oc_seti(oc_img(j, 4), b, c->p.dec.lens[b]);
    }
    free(perm);
    return 0;
}

static int merge_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.merge.rows, d = c->p.merge.d;
    uint64_t s = c->seed;
    int64_t r;
    if (oc_add(j, "o_a", OC_IN, 2, rows * d, 0) != 0 || oc_add(j, "lse_a", OC_IN, 4, rows, 0) != 1 ||
        oc_add(j, "o_b", OC_IN, 2, rows * d, 0) != 2 || oc_add(j, "lse_b", OC_IN, 4, rows, 0) != 3 ||
        oc_add(j, "o", OC_OUT, 2, rows * d, 0) != 4 || oc_add(j, "lse", OC_OUT, 4, rows, 0) != 5)
        return -1;
    oc_fill16(j, 0, 0, rows * d, 1.0f, &s);
    oc_fill16(j, 2, 0, rows * d, 1.0f, &s);
    for (r = 0; r < rows; r++) {
        float la = 5.0f * oc_u(&s), lb = 5.0f * oc_u(&s);
        if (r % 5 == 1) la = -INFINITY;
        if (r % 5 == 2) lb = -INFINITY;
        if (r % 5 == 3) la = lb = -INFINITY;
        if (r % 7 == 4) { la = 90.0f; lb = 88.5f; } /* exp would overflow fp32 */
        oc_setf(oc_img(j, 1), r, la);
        oc_setf(oc_img(j, 3), r, lb);
    }
    return 0;
}

/* the element offset of (token slot `t` of a request, kv head h) in a paged cache: page
   page_table[t / ps] */
static int64_t pre_cache_at(const oc_case *c, int64_t page, int64_t off, int64_t h) {
    const int64_t ps = c->p.pre.ps, hk = c->p.pre.hk, d = c->p.pre.d;
    return c->p.pre.hnd ? ((page * hk + h) * ps + off) * d : ((page * ps + off) * hk + h) * d;
}

static int pre_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int paged = c->p.pre.ps > 0;
    const int64_t hq = c->p.pre.hq, hk = c->p.pre.hk, d = c->p.pre.d;
    pre_geo g;
    uint64_t s = c->seed;
    pre_geometry(c, &g);
    if (oc_add(j, "q", OC_IN, 2, g.total_q * g.qs, 0) != 0) return -1;
    if (!paged) {
        if (oc_add(j, "k", OC_IN, 2, g.total_kv * g.ks, 0) != 1 ||
            oc_add(j, "v", OC_IN, 2, g.total_kv * g.vs, 0) != 2)
            return -1;
    } else {
        const int64_t cache = g.num_pages * c->p.pre.ps * hk * d;
        if (oc_add(j, "k_cache", OC_IN, 2, cache, 0) != 1 || /* unused slots stay NaN */
            oc_add(j, "v_cache", OC_IN, 2, cache, 0) != 2)
            return -1;
    }
    if (oc_add(j, "cu_seqlens_q", OC_IN, 4, c->p.pre.batch + 1, 0) != 3 ||
        oc_add(j, paged ? "page_table" : "cu_seqlens_k", OC_IN, 4,
               paged ? c->p.pre.batch * g.pt_stride : c->p.pre.batch + 1, 0) != 4 ||
        oc_add(j, "o", OC_OUT, 2, g.total_q * g.os, 0) != 5 ||
        oc_add(j, "lse", OC_OUT, 4, g.total_q * hq, 0) != 6 ||
        oc_add(j, "workspace", OC_WS, 1, 16, 0) != 7 ||
        (paged && oc_add(j, "kv_lens", OC_IN, 4, c->p.pre.batch, 0) != 8))
        return -1;
    /* q's padding holds random values too: they must not reach a result */
    oc_fill16(j, 0, 0, g.total_q * g.qs, c->p.pre.qamp, &s);
    if (!paged) {
        oc_fill16(j, 1, 0, g.total_kv * g.ks, 1.0f, &s);
        oc_fill16(j, 2, 0, g.total_kv * g.vs, 1.0f, &s);
        for (int b = 0; b <= c->p.pre.batch; b++) {
            oc_seti(oc_img(j, 3), b, g.cu_q[b]);
            oc_seti(oc_img(j, 4), b, g.cu_k[b]);
        }
    } else {
        int64_t *perm = (int64_t *)malloc((size_t)g.num_pages * sizeof(int64_t)), i, used = 0;
        if (!perm) return -1;
        for (i = 0; i < g.num_pages; i++) perm[i] = i;
        for (i = g.num_pages - 1; i > 0; i--) {
            const int64_t k = (int64_t)(ref_next64(&s) % (uint64_t)(i + 1)), x = perm[i];
            perm[i] = perm[k];
            perm[k] = x;
        }
        for (i = 0; i < c->p.pre.batch * g.pt_stride; i++) oc_seti(oc_img(j, 4), i, -1);
        for (int b = 0; b < c->p.pre.batch; b++) {
            oc_seti(oc_img(j, 3), b, g.cu_q[b]);
            oc_seti(oc_img(j, 8), b, c->p.pre.klens[b]);
            for (int64_t t = 0; t < c->p.pre.klens[b]; t++) {
                int64_t page;
                if (t % c->p.pre.ps == 0) /* a new page */
                    oc_seti(oc_img(j, 4), b * g.pt_stride + t / c->p.pre.ps, (int32_t)perm[used++]);
                page = oc_geti(oc_img(j, 4), b * g.pt_stride + t / c->p.pre.ps);
                for (int64_t h = 0; h < hk; h++) {
                    oc_fill16(j, 1, pre_cache_at(c, page, t % c->p.pre.ps, h), d, 1.0f, &s);
                    oc_fill16(j, 2, pre_cache_at(c, page, t % c->p.pre.ps, h), d, 1.0f, &s);
                }
            }
        }
        oc_seti(oc_img(j, 3), c->p.pre.batch, g.cu_q[c->p.pre.batch]);
        free(perm);
    }
    return 0;
}

/* one gemm input element, stored at dst and returned exactly: 16-bit uniform in [-1, 1);
   fp8 from `set`: the tensor cores' fp8 accumulator holds its partial sums exactly */
static double gemm_input(const oc_case *c, uint64_t *s, const double *set, int n, uint8_t *dst) {
    if (c->dt != TALON_DTYPE_FP8_E4M3) {
        const uint16_t b = oc_bits(c->dt, oc_u(s));
        memcpy(dst, &b, 2);
        return REF_TO_F32(c->dt, b);
    }
    *dst = ref_e4m3_from_f32((float)set[(int)(ref_unit01(s) * (float)n) % n]);
    return ref_e4m3_to_f64(*dst);
}

static const double gemm_set_a[] = {0, 0.25, -0.25, 0.5, -0.5, 0.75, -0.75, 1, -1, 1.5, -1.5,
                                    2, -2, 3, -3};
static const double gemm_set_b[] = {0, 1, -1, 2, -2, 3, -3, 4, -4};

static int gemm_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int64_t m = c->p.gemm.m, n = c->p.gemm.n, k = c->p.gemm.k;
    const talon_dtype bias_type = c->dt == TALON_DTYPE_FP8_E4M3 ? TALON_DTYPE_BF16 : c->dt;
    gemm_geo g;
    uint64_t s = c->seed;
    int64_t r, t;
    gemm_geometry(c, &g);
    if (oc_add(j, "a", OC_IN, (int)g.isize, m * g.lda, 0) != 0 ||
        oc_add(j, "b", OC_IN, (int)g.isize, g.brows * g.ldb, 0) != 1 ||
        oc_add(j, "bias", OC_IN, 2, c->p.gemm.bias ? g.brows : 1, 0) != 2 ||
        oc_add(j, "c", OC_IN, (int)g.osize, c->p.gemm.resid == 1 ? m * g.ldd : 1, 0) != 3 ||
        oc_add(j, "d", c->p.gemm.resid == 2 ? OC_INOUT : OC_OUT, (int)g.osize, m * g.ldd, 0) != 4 ||
        oc_add(j, "a_scale", OC_IN, 4, g.a_scales, 0) != 5 ||
        oc_add(j, "b_scale", OC_IN, 4, g.b_scales, 0) != 6)
        return -1;
    /* row padding of a and b stays NaN (0xFF: NaN in 16 bits and in e4m3): it would reach d */
    for (r = 0; r < m; r++)
        for (t = 0; t < k; t++)
            gemm_input(c, &s, gemm_set_a, OC_COUNT(gemm_set_a), oc_img(j, 0) + (r * g.lda + t) * g.isize);
    for (r = 0; r < g.brows; r++)
        for (t = 0; t < k; t++)
            gemm_input(c, &s, gemm_set_b, OC_COUNT(gemm_set_b), oc_img(j, 1) + (r * g.ldb + t) * g.isize);
    if (c->p.gemm.bias)
        for (r = 0; r < g.brows; r++) oc_set16(oc_img(j, 2), r, oc_bits(bias_type, oc_u(&s)));
    for (r = 0; r < g.a_scales; r++) oc_setf(oc_img(j, 5), r, 0.5f + ref_unit01(&s));
    for (r = 0; r < g.b_scales; r++) oc_setf(oc_img(j, 6), r, 0.5f + ref_unit01(&s));
    if (c->p.gemm.resid) { /* the residual: in c, or in d itself (its padding stays poison) */
        uint8_t *dst = oc_img(j, c->p.gemm.resid == 1 ? 3 : 4);
        for (r = 0; r < m; r++)
            for (t = 0; t < n; t++) {
                const float v = 2.0f * oc_u(&s);
                if (g.osize == 4) oc_setf(dst, r * g.ldd + t, v);
                else oc_set16(dst, r * g.ldd + t, oc_bits(c->p.gemm.ot, v));
            }
    }
    return 0;
}

static int quant_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.quant.rows, cols = c->p.quant.cols, ld = cols + c->p.quant.pad;
    const int mode = c->p.quant.mode;
    int64_t rs, gs, n_scales, r, t;
    uint64_t s = c->seed;
    quant_geometry(c, &rs, &gs, &n_scales);
    if (oc_add(j, "in", OC_IN, 2, rows * ld, 0) != 0 || oc_add(j, "out", OC_OUT, 1, rows * ld, 0) != 1 ||
        oc_add(j, "scale", mode == TALON_QUANT_TENSOR ? OC_IN : OC_OUT, 4, n_scales, 0) != 2)
        return -1;
    /* row r uniform in +-2^e (e in [-12, 12]); row 1 zeros, row 2 a NaN, row 3 an inf, row 4
       (per tensor) past the scale's range: saturation */
    for (r = 0; r < rows; r++) {
        const float mag = ldexpf(1.0f, (int)(ref_unit01(&s) * 25.0f) - 12);
        for (t = 0; t < cols; t++) {
            float v = oc_u(&s) * mag;
            if (r == 1 && rows > 4) v = 0.0f;
            if (r == 2 && t == cols / 3) v = NAN;
            if (r == 3 && t == cols / 2) v = INFINITY;
            if (r == 4 && mode == TALON_QUANT_TENSOR) v *= 0x1p14f;
            oc_set16(oc_img(j, 0), r * ld + t, oc_bits(c->dt, v));
        }
    }
    if (mode == TALON_QUANT_TENSOR) oc_setf(oc_img(j, 2), 0, 0x1p-8f + ref_unit01(&s));
    return 0;
}

/* rmsnorm_quant_fp8's y = rmsnorm(x) * weight of row r in fp64, from the (rounded) residual
   sum when there is one; returns max |y| */
static double nq_ref_row(const oc_job *j, int64_t r, double *x, double *w, double *y) {
    const oc_case *c = &j->c;
    const int64_t cols = c->p.nq.cols, ld = c->p.nq.pad ? cols + c->p.nq.pad : cols;
    double amax = 0;
    int64_t k;
    for (k = 0; k < cols; k++) {
        const float xv = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * ld + k));
        if (c->p.nq.residual) { /* fp32 add, one rounding (as the kernel) */
            const float sum = xv + REF_TO_F32(c->dt, oc_get16(oc_img(j, 2), r * ld + k));
            x[k] = REF_TO_F32(c->dt, oc_bits(c->dt, sum));
        } else {
            x[k] = xv;
        }
        w[k] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 1), k));
    }
    ref_rmsnorm(x, w, y, 1, cols, (double)1e-6f);
    for (k = 0; k < cols; k++) amax = fabs(y[k]) > amax ? fabs(y[k]) : amax;
    return amax;
}

static int nq_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.nq.rows, cols = c->p.nq.cols, off = c->p.nq.off;
    const int64_t ld = c->p.nq.pad ? cols + c->p.nq.pad : cols;
    const int tensor = c->p.nq.mode == TALON_QUANT_TENSOR;
    uint64_t s = c->seed;
    int64_t r, k;
    if (oc_add(j, "in", OC_IN, 2, (rows - 1) * ld + cols, off) != 0 ||
        oc_add(j, "weight", OC_IN, 2, cols, 0) != 1 ||
        oc_add(j, "residual", OC_INOUT, 2, c->p.nq.residual ? (rows - 1) * ld + cols : 1,
               c->p.nq.residual ? off : 0) != 2 ||
        oc_add(j, "out", OC_OUT, 1, (rows - 1) * ld + cols, 0) != 3 ||
        oc_add(j, "scale", tensor ? OC_IN : OC_OUT, 4, tensor ? 1 : rows, 0) != 4)
        return -1;
    for (r = 0; r < rows; r++) { /* rows of magnitudes 2^-3 .. 2^3 */
        const float mag = ldexpf(1.0f, (int)(r % 7) - 3);
        oc_fill16(j, 0, r * ld, cols, mag, &s);
        if (c->p.nq.residual) oc_fill16(j, 2, r * ld, cols, mag, &s);
    }
    for (k = 0; k < cols; k++) oc_set16(oc_img(j, 1), k, oc_bits(c->dt, 0.5f + ref_unit01(&s)));
    if (tensor) { /* a given scale putting the largest |y| near 200 (no saturation) */
        double *x = (double *)malloc((size_t)cols * sizeof(double) * 3), amax = 0;
        if (!x) return -1;
        for (r = 0; r < rows; r++) {
            const double m = nq_ref_row(j, r, x, x + cols, x + 2 * cols);
            amax = m > amax ? m : amax;
        }
        free(x);
        oc_setf(oc_img(j, 4), 0, (float)(amax > 1e-30 ? amax / 200.0 : 1.0));
    }
    return 0;
}

static int mg_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.mg.tokens, topk = c->p.mg.topk, e = c->p.mg.experts;
    const int64_t n = c->p.mg.n, k = c->p.mg.k, ld_ab = k + c->p.mg.pad, ldd = n + c->p.mg.pad;
    const int64_t brows = c->p.mg.gated ? 2 * n : n;
    int64_t scap = 0, ecap = 0, i, r, col;
    int32_t *ids, npost = 0;
    uint64_t s = c->seed;
    talon_moe_align_block_size_capacity(t, topk, e, 128, &scap, &ecap);
    if (oc_add(j, "a", OC_IN, 2, mg_rows(c->p.mg.a_rows, c, scap) * ld_ab, 0) != 0 ||
        oc_add(j, "b", OC_IN, 2, e * brows * ld_ab, 0) != 1 ||
        oc_add(j, "sorted_token_ids", OC_IN, 4, scap, 0) != 2 ||
        oc_add(j, "expert_ids", OC_IN, 4, ecap, 0) != 3 ||
        oc_add(j, "num_tokens_post_padded", OC_IN, 4, 1, 0) != 4 ||
        oc_add(j, "topk_weights", OC_IN, 4, t * topk, 0) != 5 ||
        oc_add(j, "d", OC_OUT, 2, mg_rows(c->p.mg.d_rows, c, scap) * ldd, 0) != 6)
        return -1;
    if (!(ids = (int32_t *)malloc((size_t)(t * topk) * sizeof(int32_t)))) return -1;
    for (r = 0; r < t; r++) /* distinct experts per token; masked: a quarter -1 */
        for (i = 0; i < topk; i++) {
            int32_t x;
            int dup;
            do {
                int64_t q;
                x = (int32_t)oc_ri(&s, 0, e - 1);
                for (dup = 0, q = 0; q < i; q++) dup |= ids[r * topk + q] == x;
            } while (dup);
            ids[r * topk + i] = x;
            oc_setf(oc_img(j, 5), r * topk + i, 0.25f + ref_unit01(&s));
        }
    if (c->p.mg.masked) /* (pair 0 keeps its expert) */
        for (i = 1; i < t * topk; i++)
            if (oc_chance(&s, 25)) ids[i] = -1;
    /* moe_align's layout, from its reference (the contract talon_moe_align_block_size meets) */
    r = ref_moe_align(ids, t, topk, e, 128, (int32_t *)oc_img(j, 2), scap, (int32_t *)oc_img(j, 3),
                      ecap, &npost);
    free(ids);
    if (r) return -1;
    oc_seti(oc_img(j, 4), 0, npost);
    /* a and b: random rows, NaN padding */
    for (r = 0; r < (int64_t)(j->b[0].used / 2) / ld_ab; r++)
        for (col = 0; col < k; col++) oc_set16(oc_img(j, 0), r * ld_ab + col, oc_bits(c->dt, oc_u(&s)));
    for (r = 0; r < e * brows; r++)
        for (col = 0; col < k; col++) oc_set16(oc_img(j, 1), r * ld_ab + col, oc_bits(c->dt, oc_u(&s)));
    return 0;
}

/* grouped_gemm: rows of a and d */
static int64_t gg_rows(const oc_case *c) {
    return c->p.gg.masked ? c->p.gg.groups * c->p.gg.rows : c->p.gg.rows;
}

/* grouped_gemm fp8: a_scale's row stride (rows rounded up to 4) and b_scale's floats */
static int64_t gg_rows4(const oc_case *c) { return oc_round_up(gg_rows(c), 4); }
static int64_t gg_b_scales(const oc_case *c) {
    const int64_t brows = c->p.gg.gated ? 2 * c->p.gg.n : c->p.gg.n;
    return c->p.gg.groups * ((brows + 127) / 128) * ((c->p.gg.k + 127) / 128);
}

/* Buffers: a, b, the group index (CONTIGUOUS: tile_groups, some tiles -1 or past the groups;
   MASKED: group_rows in [0, rows]), rows_used (a multiple of 128, or all rows), d, and fp8's
   a_scale and b_scale. Elements as the GEMM's cases (fp8: from sets whose k-block sums are
   exact). */
static int gg_build(oc_job *j) {
    const oc_case *c = &j->c;
    const int fp8 = c->dt == TALON_DTYPE_FP8_E4M3, isize = fp8 ? 1 : 2;
    const int64_t g = c->p.gg.groups, n = c->p.gg.n, k = c->p.gg.k, ld_ab = k + c->p.gg.pad;
    const int64_t ldd = n + c->p.gg.pad, brows = c->p.gg.gated ? 2 * n : n, rows = gg_rows(c);
    const int64_t index_len = c->p.gg.masked ? g : rows / 128;
    const int64_t a_scales = fp8 ? (k + 127) / 128 * gg_rows4(c) : 1, b_scales = fp8 ? gg_b_scales(c) : 1;
    int64_t i, r, col;
    uint64_t s = c->seed;
    if (oc_add(j, "a", OC_IN, isize, rows * ld_ab, 0) != 0 ||
        oc_add(j, "b", OC_IN, isize, g * brows * ld_ab, 0) != 1 ||
        oc_add(j, c->p.gg.masked ? "group_rows" : "tile_groups", OC_IN, 4, index_len, 0) != 2 ||
        oc_add(j, "rows_used", OC_IN, 4, 1, 0) != 3 ||
        oc_add(j, "d", OC_OUT, 2, rows * ldd, 0) != 4 ||
        oc_add(j, "a_scale", OC_IN, 4, a_scales, 0) != 5 ||
        oc_add(j, "b_scale", OC_IN, 4, b_scales, 0) != 6)
        return -1;
    for (i = 0; i < index_len; i++) {
        int64_t v;
        if (c->p.gg.masked) v = oc_ri(&s, 0, c->p.gg.rows);
        else if (oc_chance(&s, 15)) v = oc_chance(&s, 50) ? -1 : g; /* skipped tiles */
        else v = oc_ri(&s, 0, g - 1);
        oc_seti(oc_img(j, 2), i, (int32_t)v);
    }
    oc_seti(oc_img(j, 3), 0, (int32_t)(128 * oc_ri(&s, 0, rows / 128)));
    for (r = 0; r < rows; r++)
        for (col = 0; col < k; col++)
            gemm_input(c, &s, gemm_set_a, OC_COUNT(gemm_set_a), oc_img(j, 0) + (r * ld_ab + col) * isize);
    for (r = 0; r < g * brows; r++)
        for (col = 0; col < k; col++)
            gemm_input(c, &s, gemm_set_b, OC_COUNT(gemm_set_b), oc_img(j, 1) + (r * ld_ab + col) * isize);
    for (r = 0; r < a_scales; r++) oc_setf(oc_img(j, 5), r, 0.5f + ref_unit01(&s));
    for (r = 0; r < b_scales; r++) oc_setf(oc_img(j, 6), r, 0.5f + ref_unit01(&s));
    return 0;
}

/* grouped_gemm: element (r, col) of a or b as a double (fp8: times its block scale) */
static double gg_value(const oc_job *j, int bi, int64_t at, int64_t scale_at) {
    if (j->c.dt != TALON_DTYPE_FP8_E4M3) return REF_TO_F32(j->c.dt, oc_get16(oc_img(j, bi), at));
    return ref_e4m3_to_f64(oc_img(j, bi)[at]) * (double)oc_getf(oc_img(j, bi == 0 ? 5 : 6), scale_at);
}

/* Builds the job of case c: buffers and host images. ctx: for the workspace sizes (topk,
   decode; the same on every context of a device). Returns 0, or -1 (nothing to free). */
OC_API int oc_build(oc_job *j, const oc_case *c, talon_ctx *ctx) {
    int rc = -1;
    memset(j, 0, sizeof *j);
    j->c = *c;
    ref_f32_table_init();
    switch (c->op) {
    case OP_rmsnorm: case OP_fused_add_rmsnorm: case OP_layernorm:
    case OP_silu_and_mul: case OP_gelu_and_mul: rc = norm_build(j); break;
    case OP_moe_router_topk: rc = router_build(j); break;
    case OP_topk: rc = topk_build(j, ctx); break;
    case OP_moe_align_block_size: rc = align_build(j); break;
    case OP_moe_sum: rc = sum_build(j); break;
    case OP_rope: rc = rope_build(j); break;
    case OP_kv_append: rc = kv_build(j); break;
    case OP_gather_rows: rc = gather_build(j); break;
    case OP_decode_attention: rc = dec_build(j, ctx); break;
    case OP_merge_attention_states: rc = merge_build(j); break;
    case OP_prefill_attention: case OP_prefill_attention_paged: rc = pre_build(j); break;
    case OP_gemm: rc = gemm_build(j); break;
    case OP_quant_fp8: rc = quant_build(j); break;
    case OP_rmsnorm_quant_fp8: rc = nq_build(j); break;
    case OP_moe_gemm: rc = mg_build(j); break;
    case OP_grouped_gemm: rc = gg_build(j); break;
    }
    if (rc) oc_free(j);
    return rc;
}

/* ================================================================ arguments */
OC_API void oc_args(const oc_job *j, const oc_dev *d, op_args *a) {
#define P(i) (d->p[i] + (CUdeviceptr)j->b[i].off)
    const oc_case *c = &j->c;
    memset(a, 0, sizeof *a);
    switch (c->op) {
    case OP_rmsnorm:
        a->rmsnorm.out = P(2); a->rmsnorm.in = P(0); a->rmsnorm.weight = P(1);
        a->rmsnorm.rows = c->p.norm.rows; a->rmsnorm.cols = c->p.norm.cols;
        a->rmsnorm.out_stride = c->p.norm.out_stride; a->rmsnorm.in_stride = c->p.norm.in_stride;
        a->rmsnorm.eps = 1e-6f; a->rmsnorm.dtype = c->dt;
        break;
    case OP_fused_add_rmsnorm:
        a->fused_add_rmsnorm.in = P(0); a->fused_add_rmsnorm.residual = P(2);
        a->fused_add_rmsnorm.weight = P(1);
        a->fused_add_rmsnorm.rows = c->p.norm.rows; a->fused_add_rmsnorm.cols = c->p.norm.cols;
        a->fused_add_rmsnorm.in_stride = c->p.norm.in_stride;
        a->fused_add_rmsnorm.residual_stride = c->p.norm.res_stride;
        a->fused_add_rmsnorm.eps = 1e-6f; a->fused_add_rmsnorm.dtype = c->dt;
        break;
    case OP_layernorm:
        a->layernorm.out = P(2); a->layernorm.in = P(0); a->layernorm.weight = P(1);
        a->layernorm.bias = c->p.norm.bias ? P(3) : 0;
        a->layernorm.rows = c->p.norm.rows; a->layernorm.cols = c->p.norm.cols;
        a->layernorm.out_stride = c->p.norm.out_stride; a->layernorm.in_stride = c->p.norm.in_stride;
        a->layernorm.eps = 1e-5f; a->layernorm.dtype = c->dt;
        break;
    case OP_silu_and_mul:
        a->silu.out = P(1); a->silu.in = P(0); a->silu.rows = c->p.norm.rows;
        a->silu.cols = c->p.norm.cols; a->silu.out_stride = c->p.norm.out_stride;
        a->silu.in_stride = c->p.norm.in_stride; a->silu.dtype = c->dt;
        break;
    case OP_gelu_and_mul:
        a->gelu.out = P(1); a->gelu.in = P(0); a->gelu.rows = c->p.norm.rows;
        a->gelu.cols = c->p.norm.cols; a->gelu.out_stride = c->p.norm.out_stride;
        a->gelu.in_stride = c->p.norm.in_stride; a->gelu.dtype = c->dt;
        a->gelu.approx = c->p.norm.approx ? TALON_GELU_TANH : TALON_GELU_ERF;
        break;
    case OP_moe_router_topk:
        a->router.topk_weights = P(2); a->router.topk_ids = P(3); a->router.logits = P(0);
        a->router.correction_bias = c->p.router.bias ? P(1) : 0;
        a->router.tokens = c->p.router.tokens; a->router.experts = c->p.router.experts;
        a->router.k = c->p.router.k; a->router.logits_stride = c->p.router.stride;
        a->router.logits_dtype = c->dt;
        a->router.scoring = c->p.router.scoring ? TALON_ROUTER_SIGMOID : TALON_ROUTER_SOFTMAX;
        a->router.renormalize = c->p.router.renorm;
        break;
    case OP_topk:
        a->topk.out_values = P(1); a->topk.out_indices = P(2); a->topk.in = P(0);
        a->topk.workspace = P(3); a->topk.workspace_bytes = (int64_t)j->b[3].used;
        a->topk.rows = c->p.topk.rows; a->topk.cols = c->p.topk.cols; a->topk.k = c->p.topk.k;
        a->topk.in_stride = c->p.topk.stride; a->topk.sorted = c->p.topk.sorted;
        a->topk.dtype = c->dt;
        break;
    case OP_moe_align_block_size: {
        int64_t scap, ecap;
        align_caps(c, &scap, &ecap);
        a->align.sorted_token_ids = P(1); a->align.expert_ids = P(2);
        a->align.num_tokens_post_padded = P(3); a->align.topk_ids = P(0);
        a->align.tokens = c->p.align.tokens; a->align.k = c->p.align.k;
        a->align.experts = c->p.align.experts; a->align.block_size = c->p.align.block;
        a->align.sorted_capacity = scap; a->align.expert_ids_capacity = ecap;
        break;
    }
    case OP_moe_sum:
        a->moe_sum.out = P(2); a->moe_sum.in = P(0); a->moe_sum.weights = c->p.sum.weighted ? P(1) : 0;
        a->moe_sum.tokens = c->p.sum.tokens; a->moe_sum.k = c->p.sum.k;
        a->moe_sum.hidden = c->p.sum.hidden; a->moe_sum.dtype = c->dt;
        break;
    case OP_rope: {
        rope_geo g;
        rope_geometry(c, &g);
        a->rope.q = P(0) + (CUdeviceptr)(2 * g.q);
        a->rope.k = c->p.rope.hk ? P(0) + (CUdeviceptr)(2 * g.k) : 0;
        a->rope.positions = P(1);
        a->rope.cos_sin_cache = c->p.rope.max_pos ? P(2) : 0;
        a->rope.tokens = c->p.rope.tokens; a->rope.num_q_heads = c->p.rope.hq;
        a->rope.num_kv_heads = c->p.rope.hk; a->rope.head_dim = c->p.rope.d;
        a->rope.rot_dim = c->p.rope.rot; a->rope.q_stride = g.q_stride;
        a->rope.k_stride = c->p.rope.hk ? g.k_stride : 0;
        a->rope.max_pos = c->p.rope.max_pos; a->rope.theta = c->p.rope.theta;
        a->rope.dtype = c->dt;
        a->rope.positions_dtype = c->p.rope.pos64 ? TALON_INDEX_I64 : TALON_INDEX_I32;
        a->rope.style = c->p.rope.gptj ? TALON_ROPE_GPTJ : TALON_ROPE_NEOX;
        break;
    }
    case OP_kv_append: {
        kv_geo g;
        kv_geometry(c, &g);
        a->kv_append.k_cache = P(2); a->kv_append.v_cache = P(3);
        a->kv_append.k = P(0) + (CUdeviceptr)(2 * g.kpos);
        a->kv_append.v = P(0) + (CUdeviceptr)(2 * g.vpos);
        a->kv_append.slot_mapping = P(1);
        a->kv_append.tokens = c->p.kv.tokens; a->kv_append.num_kv_heads = c->p.kv.hk;
        a->kv_append.head_dim = c->p.kv.d; a->kv_append.num_pages = g.num_pages;
        a->kv_append.page_size = c->p.kv.ps;
        a->kv_append.k_stride = g.stride; a->kv_append.v_stride = g.stride;
        a->kv_append.k_scale = c->p.kv.k_scale; a->kv_append.v_scale = c->p.kv.v_scale;
        a->kv_append.dtype = c->dt;
        a->kv_append.cache_dtype = c->p.kv.fp8 ? TALON_DTYPE_FP8_E4M3 : c->dt;
        a->kv_append.layout = c->p.kv.hnd ? TALON_KV_HND : TALON_KV_NHD;
        break;
    }
    case OP_gather_rows:
        a->gather.out = P(2); a->gather.in = P(0); a->gather.indices = P(1);
        a->gather.rows = c->p.gather.rows; a->gather.cols = c->p.gather.cols;
        a->gather.in_rows = c->p.gather.in_rows; a->gather.out_stride = c->p.gather.out_stride;
        a->gather.in_stride = c->p.gather.in_stride; a->gather.dtype = c->dt;
        a->gather.index_dtype = c->p.gather.idx64 ? TALON_INDEX_I64 : TALON_INDEX_I32;
        break;
    case OP_decode_attention:
        dec_args_shape(c, &a->decode);
        a->decode.o = P(5); a->decode.lse = c->p.dec.no_lse ? 0 : P(6); a->decode.q = P(0);
        a->decode.k_cache = P(1); a->decode.v_cache = P(2); a->decode.page_table = P(3);
        a->decode.kv_lens = P(4); a->decode.workspace = P(7);
        a->decode.workspace_bytes = (int64_t)j->b[7].used;
        break;
    case OP_merge_attention_states:
        a->merge.o = P(4); a->merge.lse = c->p.merge.with_lse ? P(5) : 0;
        a->merge.o_a = P(0); a->merge.lse_a = P(1); a->merge.o_b = P(2); a->merge.lse_b = P(3);
        a->merge.rows = c->p.merge.rows; a->merge.head_dim = c->p.merge.d; a->merge.dtype = c->dt;
        break;
    case OP_prefill_attention: {
        pre_geo g;
        pre_geometry(c, &g);
        a->prefill.o = P(5); a->prefill.lse = c->p.pre.no_lse ? 0 : P(6); a->prefill.q = P(0);
        a->prefill.k = P(1); a->prefill.v = P(2); a->prefill.cu_seqlens_q = P(3);
        a->prefill.cu_seqlens_k = P(4); a->prefill.workspace = P(7); a->prefill.workspace_bytes = 16;
        a->prefill.batch = c->p.pre.batch; a->prefill.total_q = g.total_q;
        a->prefill.total_kv = g.total_kv; a->prefill.max_seqlen_q = g.max_q;
        a->prefill.num_qo_heads = c->p.pre.hq; a->prefill.num_kv_heads = c->p.pre.hk;
        a->prefill.head_dim = c->p.pre.d; a->prefill.v_head_dim = c->p.pre.d == 192 ? 128 : 0;
        if (c->p.pre.pad) {
            a->prefill.q_stride = g.qs; a->prefill.k_stride = g.ks;
            a->prefill.v_stride = g.vs; a->prefill.o_stride = g.os;
        }
        a->prefill.window = c->p.pre.window; a->prefill.causal = c->p.pre.causal;
        a->prefill.sm_scale = c->p.pre.sm_scale; a->prefill.logits_soft_cap = c->p.pre.cap;
        a->prefill.dtype = c->dt;
        break;
    }
    case OP_prefill_attention_paged: {
        pre_geo g;
        pre_geometry(c, &g);
        a->prefill_paged.o = P(5); a->prefill_paged.lse = c->p.pre.no_lse ? 0 : P(6);
        a->prefill_paged.q = P(0); a->prefill_paged.k_cache = P(1); a->prefill_paged.v_cache = P(2);
        a->prefill_paged.page_table = P(4); a->prefill_paged.kv_lens = P(8);
        a->prefill_paged.cu_seqlens_q = P(3); a->prefill_paged.workspace = P(7);
        a->prefill_paged.workspace_bytes = 16;
        a->prefill_paged.batch = c->p.pre.batch; a->prefill_paged.total_q = g.total_q;
        a->prefill_paged.max_seqlen_q = g.max_q; a->prefill_paged.max_kv_len = g.max_kv;
        a->prefill_paged.num_pages = g.num_pages; a->prefill_paged.page_size = c->p.pre.ps;
        a->prefill_paged.page_table_stride = g.pt_stride;
        a->prefill_paged.num_qo_heads = c->p.pre.hq; a->prefill_paged.num_kv_heads = c->p.pre.hk;
        a->prefill_paged.head_dim = c->p.pre.d;
        if (c->p.pre.pad) { a->prefill_paged.q_stride = g.qs; a->prefill_paged.o_stride = g.os; }
        a->prefill_paged.window = c->p.pre.window; a->prefill_paged.causal = c->p.pre.causal;
        a->prefill_paged.sm_scale = c->p.pre.sm_scale;
        a->prefill_paged.logits_soft_cap = c->p.pre.cap; a->prefill_paged.dtype = c->dt;
        a->prefill_paged.layout = c->p.pre.hnd ? TALON_KV_HND : TALON_KV_NHD;
        break;
    }
    case OP_gemm: {
        gemm_geo g;
        gemm_geometry(c, &g);
        a->gemm.d = P(4); a->gemm.a = P(0); a->gemm.b = P(1);
        a->gemm.bias = c->p.gemm.bias ? P(2) : 0;
        a->gemm.c = c->p.gemm.resid == 1 ? P(3) : c->p.gemm.resid == 2 ? P(4) : 0;
        a->gemm.m = c->p.gemm.m; a->gemm.n = c->p.gemm.n; a->gemm.k = c->p.gemm.k;
        if (c->p.gemm.pad) {
            a->gemm.lda = g.lda; a->gemm.ldb = g.ldb; a->gemm.ldd = g.ldd;
            a->gemm.ldc = a->gemm.c ? g.ldd : 0;
        }
        a->gemm.alpha = c->p.gemm.alpha; a->gemm.beta = c->p.gemm.beta;
        a->gemm.act = c->p.gemm.act; a->gemm.gated = c->p.gemm.gated;
        a->gemm.dtype = c->dt; a->gemm.out_dtype = c->p.gemm.ot;
        if (g.fp8) {
            a->gemm.scale = (talon_gemm_scale)c->p.gemm.scale;
            a->gemm.a_scale = P(5);
            a->gemm.b_scale = P(6);
        }
        break;
    }
    case OP_quant_fp8:
        a->quant.out = P(1); a->quant.in = P(0); a->quant.scale = P(2);
        a->quant.rows = c->p.quant.rows; a->quant.cols = c->p.quant.cols;
        if (c->p.quant.pad) a->quant.out_stride = a->quant.in_stride = c->p.quant.cols + c->p.quant.pad;
        if (c->p.quant.row_major) {
            a->quant.scale_row_stride = c->p.quant.cols / 128;
            a->quant.scale_group_stride = 1;
        }
        a->quant.mode = (talon_quant_mode)c->p.quant.mode; a->quant.dtype = c->dt;
        break;
    case OP_rmsnorm_quant_fp8:
        a->rmsnorm_quant.out = P(3); a->rmsnorm_quant.scale = P(4); a->rmsnorm_quant.in = P(0);
        a->rmsnorm_quant.residual = c->p.nq.residual ? P(2) : 0;
        a->rmsnorm_quant.weight = P(1);
        a->rmsnorm_quant.rows = c->p.nq.rows; a->rmsnorm_quant.cols = c->p.nq.cols;
        if (c->p.nq.pad)
            a->rmsnorm_quant.out_stride = a->rmsnorm_quant.in_stride =
                a->rmsnorm_quant.residual_stride = c->p.nq.cols + c->p.nq.pad;
        a->rmsnorm_quant.eps = 1e-6f;
        a->rmsnorm_quant.mode = (talon_quant_mode)c->p.nq.mode; a->rmsnorm_quant.dtype = c->dt;
        break;
    case OP_moe_gemm: {
        int64_t scap = 0, ecap = 0;
        talon_moe_align_block_size_capacity(c->p.mg.tokens, c->p.mg.topk, c->p.mg.experts, 128,
                                            &scap, &ecap);
        a->moe_gemm.d = P(6); a->moe_gemm.a = P(0); a->moe_gemm.b = P(1);
        a->moe_gemm.sorted_token_ids = P(2); a->moe_gemm.expert_ids = P(3);
        a->moe_gemm.num_tokens_post_padded = P(4);
        a->moe_gemm.topk_weights = c->p.mg.weights ? P(5) : 0;
        a->moe_gemm.tokens = c->p.mg.tokens; a->moe_gemm.topk = c->p.mg.topk;
        a->moe_gemm.experts = c->p.mg.experts; a->moe_gemm.block_size = 128;
        a->moe_gemm.sorted_capacity = scap; a->moe_gemm.expert_ids_capacity = ecap;
        a->moe_gemm.n = c->p.mg.n; a->moe_gemm.k = c->p.mg.k;
        if (c->p.mg.pad) {
            a->moe_gemm.lda = a->moe_gemm.ldb = c->p.mg.k + c->p.mg.pad;
            a->moe_gemm.ldd = c->p.mg.n + c->p.mg.pad;
        }
        a->moe_gemm.a_rows = c->p.mg.a_rows; a->moe_gemm.d_rows = c->p.mg.d_rows;
        a->moe_gemm.act = c->p.mg.act; a->moe_gemm.gated = c->p.mg.gated;
        a->moe_gemm.dtype = c->dt;
        break;
    }
    case OP_grouped_gemm:
        a->grouped_gemm.d = P(4); a->grouped_gemm.a = P(0); a->grouped_gemm.b = P(1);
        if (c->p.gg.masked) a->grouped_gemm.group_rows = P(2);
        else a->grouped_gemm.tile_groups = P(2);
        a->grouped_gemm.rows_used = c->p.gg.used ? P(3) : 0;
        a->grouped_gemm.groups = c->p.gg.groups; a->grouped_gemm.rows = c->p.gg.rows;
        a->grouped_gemm.n = c->p.gg.n; a->grouped_gemm.k = c->p.gg.k;
        if (c->p.gg.pad) {
            a->grouped_gemm.lda = a->grouped_gemm.ldb = c->p.gg.k + c->p.gg.pad;
            a->grouped_gemm.ldd = c->p.gg.n + c->p.gg.pad;
        }
        a->grouped_gemm.layout = c->p.gg.masked ? TALON_GROUPED_MASKED : TALON_GROUPED_CONTIGUOUS;
        a->grouped_gemm.act = c->p.gg.act; a->grouped_gemm.gated = c->p.gg.gated;
        a->grouped_gemm.dtype = c->dt;
        if (c->dt == TALON_DTYPE_FP8_E4M3) {
            a->grouped_gemm.scale = TALON_GEMM_SCALE_BLOCK;
            a->grouped_gemm.a_scale = P(5); a->grouped_gemm.b_scale = P(6);
        }
        break;
    }
#undef P
}

/* ================================================================ checks */
/* |got - ref| <= tol (NaN never passes) */
static void oc_cmp(oc_stats *st, const char *what, int64_t row, int64_t col, double got,
                   double ref, double tol) {
    const double err = fabs(got - ref);
    st->elements++;
    if (!(err <= tol))
        oc_fail(st, "%s[%lld, %lld] = %.9g, reference %.9g (tolerance %.3g)", what,
                (long long)row, (long long)col, got, ref, tol);
    else if (tol > 0 && err / tol > st->worst)
        st->worst = err / tol;
}

/* buffer bi (downloaded) must still be all poison */
static void oc_check_poison(oc_stats *st, const oc_job *j, int bi, const uint8_t *img) {
    size_t i;
    for (i = 0; i < j->b[bi].used; i++)
        if (img[i] != 0xFF) {
            oc_fail(st, "%s byte %zu written (the op must not write it)", j->b[bi].name, i);
            return;
        }
}

/* how many rows to skip between checked ones so that `work` fits the budget (0: all) */
static int64_t oc_step(double work, double budget) {
    return budget > 0 && work > budget ? (int64_t)ceil(work / budget) : 1;
}

static void norm_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const talon_dtype dt = c->dt;
    const int gated = oc_gated(c->op), fused = c->op == OP_fused_add_rmsnorm;
    const int ln = c->op == OP_layernorm;
    const int64_t rows = c->p.norm.rows, cols = c->p.norm.cols, w = gated ? 2 * cols : cols;
    const int64_t ldx = c->p.norm.in_stride ? c->p.norm.in_stride : w;
    const int64_t ldy = c->p.norm.out_stride ? c->p.norm.out_stride : cols;
    const int64_t ldr = c->p.norm.res_stride ? c->p.norm.res_stride : cols;
    const int oi = fused ? 0 : gated ? 1 : 2; /* the buffer holding the result */
    const int64_t ldo = fused ? ldx : ldy;
    const double rtol = ref_rtol(dt), atol = ref_atol(dt);
    const uint8_t *xin = oc_img(j, 0), *out = img[oi] + j->b[oi].off;
    double *x = (double *)malloc((size_t)(2 * w + 5 * cols) * sizeof(double));
    double *ref = x + 2 * w, *mag = ref + cols, *wv = mag + cols, *bv = wv + cols;
    int64_t r, k;
    if (!x) { oc_fail(st, "out of host memory"); return; }
    for (k = 0; k < cols; k++) {
        wv[k] = gated ? 0.0 : REF_TO_F32(dt, oc_get16(oc_img(j, 1), k));
        bv[k] = ln && c->p.norm.bias ? REF_TO_F32(dt, oc_get16(oc_img(j, 3), k)) : 0.0;
    }
    for (r = 0; r < rows; r++) {
        if (c->op == OP_rmsnorm) {
            for (k = 0; k < cols; k++) x[k] = REF_TO_F32(dt, oc_get16(xin, r * ldx + k));
            ref_rmsnorm(x, wv, ref, 1, cols, (double)1e-6f);
            for (k = 0; k < cols; k++) mag[k] = fabs(ref[k]);
        } else if (fused) {
            const uint8_t *res0 = oc_img(j, 2), *res = img[2] + j->b[2].off;
            for (k = 0; k < cols; k++) { /* the new residual: fp32 add, one rounding, exact */
                const float sum = REF_TO_F32(dt, oc_get16(xin, r * ldx + k)) + REF_TO_F32(dt, oc_get16(res0, r * ldr + k));
                const uint16_t want = oc_bits(dt, sum), got = oc_get16(res, r * ldr + k);
                st->elements++;
                if (got != want)
                    oc_fail(st, "residual[%lld, %lld] = 0x%04x, expected 0x%04x (exact)",
                            (long long)r, (long long)k, got, want);
                x[k] = REF_TO_F32(dt, want);
            }
            ref_rmsnorm(x, wv, ref, 1, cols, (double)1e-6f);
            for (k = 0; k < cols; k++) mag[k] = fabs(ref[k]);
        } else if (ln) {
            double mean = 0, var = 0, rstd;
            for (k = 0; k < cols; k++) x[k] = REF_TO_F32(dt, oc_get16(xin, r * ldx + k));
            ref_layernorm(x, wv, c->p.norm.bias ? bv : NULL, ref, 1, cols, (double)1e-5f);
            for (k = 0; k < cols; k++) mean += x[k];
            mean /= (double)cols;
            for (k = 0; k < cols; k++) var += (x[k] - mean) * (x[k] - mean);
            rstd = 1.0 / sqrt(var / (double)cols + (double)1e-5f);
            /* the row mean is an fp32 sum: what it may lose, scaled through the epilogue */
            for (k = 0; k < cols; k++) mag[k] = (fabs(x[k]) + fabs(mean)) * rstd * fabs(wv[k]) + fabs(bv[k]);
        } else {
            const enum ref_act act = c->op == OP_silu_and_mul ? REF_SILU
                                     : c->p.norm.approx ? REF_GELU_TANH : REF_GELU_ERF;
            for (k = 0; k < w; k++) x[k] = REF_TO_F32(dt, oc_get16(xin, r * ldx + k));
            ref_gated(act, x, ref, 1, cols);
            for (k = 0; k < cols; k++) mag[k] = fabs(x[k] * x[cols + k]);
        }
        for (k = 0; k < cols; k++)
            oc_cmp(st, j->b[oi].name, r, k, REF_TO_F32(dt, oc_get16(out, r * ldo + k)), ref[k],
                   atol + rtol * fabs(ref[k]) + 0x1p-18 * mag[k]);
    }
    oc_check_outside(st, j, oi, img[oi], rows, cols, ldo);
    if (fused) oc_check_outside(st, j, 2, img[2], rows, cols, ldr);
    free(x);
}

static void router_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.router.tokens, e = c->p.router.experts, k = c->p.router.k;
    const int64_t ld = c->p.router.stride ? c->p.router.stride : e;
    float *x = (float *)malloc((size_t)(t * e + e) * sizeof(float)), *bias = x + t * e;
    double *rw = (double *)malloc((size_t)(t * k) * sizeof(double));
    int32_t *rid = (int32_t *)malloc((size_t)(t * k) * sizeof(int32_t));
    int64_t r, i;
    if (!x || !rw || !rid) { oc_fail(st, "out of host memory"); goto done; }
    for (r = 0; r < t; r++)
        for (i = 0; i < e; i++)
            x[r * e + i] = c->dt == TALON_DTYPE_F32 ? oc_getf(oc_img(j, 0), r * ld + i)
                                                    : REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * ld + i));
    for (i = 0; i < e; i++) bias[i] = oc_getf(oc_img(j, 1), i);
    ref_moe_router_topk(x, c->p.router.bias ? bias : NULL, t, (int)e, (int)k, c->p.router.scoring,
                        c->p.router.renorm, rw, rid);
    for (i = 0; i < t * k; i++) {
        const int32_t id = oc_geti(img[3], i);
        const double w = oc_getf(img[2], i);
        st->elements++;
        if (id != rid[i])
            oc_fail(st, "topk_ids[%lld, %lld] = %d, reference %d (exact)", (long long)(i / k),
                    (long long)(i % k), id, rid[i]);
        if (isnan(rw[i]) || isnan(w)) {
            st->elements++;
            if (!(isnan(rw[i]) && isnan(w)))
                oc_fail(st, "topk_weights[%lld, %lld] = %g, reference %g", (long long)(i / k),
                        (long long)(i % k), w, rw[i]);
        } else { /* 32 fp32 ulp: the hardware exp and fp32 sums */
            oc_cmp(st, "topk_weights", i / k, i % k, w, rw[i], 0x1p-19 * fabs(rw[i]) + 0x1p-30);
        }
    }
done:
    free(x); free(rw); free(rid);
}

static int oc_cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void topk_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const int es = c->dt == TALON_DTYPE_F32 ? 4 : 2;
    const int64_t rows = c->p.topk.rows, cols = c->p.topk.cols, k = c->p.topk.k;
    const int64_t ld = c->p.topk.stride ? c->p.topk.stride : cols;
    const uint8_t *in = oc_img(j, 0);
    float *x = (float *)malloc((size_t)cols * sizeof(float));
    int32_t *ref = (int32_t *)malloc((size_t)k * 3 * sizeof(int32_t)), *a = ref + k, *b = a + k;
    int64_t r, t;
    if (!x || !ref) { oc_fail(st, "out of host memory"); goto done; }
    for (r = 0; r < rows; r++) {
        for (t = 0; t < cols; t++)
            x[t] = es == 4 ? oc_getf(in, r * ld + t) : REF_TO_F32(c->dt, oc_get16(in, r * ld + t));
        ref_topk_row(x, cols, k, ref);
        for (t = 0; t < k; t++) { /* values: the input element at the index, bit for bit */
            const int32_t id = oc_geti(img[2], r * k + t);
            st->elements += 2;
            if (id < 0 || id >= cols) {
                oc_fail(st, "out_indices[%lld, %lld] = %d is outside the row", (long long)r, (long long)t, id);
                continue;
            }
            if (es == 4 ? oc_get32(img[1], r * k + t) != oc_get32(in, r * ld + id)
                        : oc_get16(img[1], r * k + t) != oc_get16(in, r * ld + id))
                oc_fail(st, "out_values[%lld, %lld] is not input[%d] bit for bit", (long long)r,
                        (long long)t, id);
            if (c->p.topk.sorted && id != ref[t])
                oc_fail(st, "out_indices[%lld, %lld] = %d (%g), reference %d (%g)", (long long)r,
                        (long long)t, id, (double)x[id], ref[t], (double)x[ref[t]]);
            a[t] = id;
            b[t] = ref[t];
        }
        if (!c->p.topk.sorted) { /* the same set, in any order */
            qsort(a, (size_t)k, sizeof *a, oc_cmp_i32);
            qsort(b, (size_t)k, sizeof *b, oc_cmp_i32);
            for (t = 0; t < k; t++)
                if (a[t] != b[t]) {
                    oc_fail(st, "row %lld: the index set differs from the reference's (its "
                            "%lld-th smallest %d, reference %d)", (long long)r, (long long)t, a[t], b[t]);
                    break;
                }
        }
    }
done:
    free(x); free(ref);
}

static void align_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    int64_t scap, ecap, i;
    int32_t *sorted, *eids, npost = -1;
    align_caps(c, &scap, &ecap);
    sorted = (int32_t *)malloc((size_t)(scap + ecap) * sizeof(int32_t));
    eids = sorted + scap;
    if (!sorted || ref_moe_align((const int32_t *)oc_img(j, 0), c->p.align.tokens, c->p.align.k,
                                 c->p.align.experts, c->p.align.block, sorted, scap, eids, ecap,
                                 &npost)) {
        oc_fail(st, "moe_align reference failed");
        free(sorted);
        return;
    }
    /* talon's order inside each expert's group is ascending (deterministic), so every
       element is compared exactly */
    st->elements += 1 + scap + ecap;
    if (oc_geti(img[3], 0) != npost)
        oc_fail(st, "num_tokens_post_padded = %d, reference %d", oc_geti(img[3], 0), npost);
    for (i = 0; i < scap; i++)
        if (oc_geti(img[1], i) != sorted[i]) {
            oc_fail(st, "sorted_token_ids[%lld] = %d, reference %d", (long long)i, oc_geti(img[1], i), sorted[i]);
            break;
        }
    for (i = 0; i < ecap; i++)
        if (oc_geti(img[2], i) != eids[i]) {
            oc_fail(st, "expert_ids[%lld] = %d, reference %d", (long long)i, oc_geti(img[2], i), eids[i]);
            break;
        }
    free(sorted);
}

static void sum_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const int64_t t = c->p.sum.tokens, k = c->p.sum.k, h = c->p.sum.hidden;
    const double rtol = ref_rtol(c->dt), atol = ref_atol(c->dt);
    double *x = (double *)malloc((size_t)(t * k * h + t * k + 2 * t * h) * sizeof(double));
    double *w = x + t * k * h, *ref = w + t * k, *mag = ref + t * h;
    int64_t i;
    if (!x) { oc_fail(st, "out of host memory"); return; }
    for (i = 0; i < t * k * h; i++) x[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), i));
    for (i = 0; i < t * k; i++) w[i] = oc_getf(oc_img(j, 1), i);
    ref_moe_sum(x, c->p.sum.weighted ? w : NULL, ref, mag, t, k, h);
    for (i = 0; i < t * h; i++)
        oc_cmp(st, "out", i / h, i % h, REF_TO_F32(c->dt, oc_get16(img[2] + j->b[2].off, i)), ref[i],
               atol + rtol * fabs(ref[i]) + 0x1p-18 * mag[i]);
    oc_check_outside(st, j, 2, img[2], t, h, h);
    free(x);
}

static void rope_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const talon_dtype dt = c->dt;
    const int64_t rot = c->p.rope.rot ? c->p.rope.rot : c->p.rope.d, half = rot / 2;
    const int64_t heads = c->p.rope.hq + c->p.rope.hk, d = c->p.rope.d;
    /* half a unit in the last place (one correct rounding) + fp32 arithmetic and cos/sin (and
       in theta mode the documented angle error, 1e-14 |position| rad) + f16 subnormals */
    const double rhalf = dt == TALON_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    const double atol = dt == TALON_DTYPE_BF16 ? 0 : 0x1p-25;
    const uint8_t *init = oc_img(j, 0), *dev = img[0];
    rope_geo g;
    unsigned char *mask;
    double *x = (double *)malloc((size_t)rot * 3 * sizeof(double)), *y = x + rot, *cs = y + rot;
    int64_t t, h, i;
    rope_geometry(c, &g);
    mask = (unsigned char *)calloc((size_t)g.n, 1);
    if (!x || !mask) { oc_fail(st, "out of host memory"); goto done; }
    for (t = 0; t < c->p.rope.tokens; t++) {
        const int64_t p = c->p.rope.pos64 ? oc_getl(oc_img(j, 1), t) : oc_geti(oc_img(j, 1), t);
        const double noise = 0x1p-18 + (c->p.rope.max_pos ? 0.0 : 1e-14 * fabs((double)p));
        if (!c->p.rope.max_pos) {
            ref_rope_theta_row(cs, (double)p, c->p.rope.theta ? c->p.rope.theta : 10000.0, rot);
        } else if (p < 0 || p >= c->p.rope.max_pos) {
            continue; /* out of the cache: the token must stay unchanged */
        } else {
            for (i = 0; i < rot; i++) cs[i] = oc_getf(oc_img(j, 2), p * rot + i);
        }
        for (h = 0; h < heads; h++) {
            const int64_t base = h < c->p.rope.hq ? g.q + t * g.row_q + h * d
                                                  : g.k + t * g.row_k + (h - c->p.rope.hq) * d;
            for (i = 0; i < rot; i++) x[i] = REF_TO_F32(dt, oc_get16(init, base + i));
            memcpy(y, x, (size_t)rot * sizeof(double));
            ref_rope_head(y, rot, c->p.rope.gptj, cs);
            for (i = 0; i < rot; i++) {
                const int64_t partner = c->p.rope.gptj ? (i ^ 1) : (i < half ? i + half : i - half);
                mask[base + i] = 1;
                oc_cmp(st, h < c->p.rope.hq ? "q" : "k", t, (h % c->p.rope.hq) * d + i,
                       REF_TO_F32(dt, oc_get16(dev, base + i)), y[i],
                       rhalf * fabs(y[i]) + noise * (fabs(x[i]) + fabs(x[partner])) + atol);
            }
        }
    }
    for (i = 0; i < g.n; i++) /* dims past rot_dim, v, padding, tokens out of the cache */
        if (!mask[i] && oc_get16(dev, i) != oc_get16(init, i)) {
            oc_fail(st, "qkv element %lld (not to be rotated) changed: 0x%04x -> 0x%04x",
                    (long long)i, oc_get16(init, i), oc_get16(dev, i));
            break;
        }
done:
    free(x); free(mask);
}

static void kv_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const int es = c->p.kv.fp8 ? 1 : 2;
    kv_geo g;
    uint8_t *want[2];
    int64_t t, e, i;
    int kv;
    kv_geometry(c, &g);
    want[0] = (uint8_t *)malloc(j->b[2].used * 2);
    if (!want[0]) { oc_fail(st, "out of host memory"); return; }
    want[1] = want[0] + j->b[2].used;
    memcpy(want[0], j->b[2].init, j->b[2].used);
    memcpy(want[1], j->b[3].init, j->b[3].used);
    for (t = 0; t < c->p.kv.tokens; t++) {
        const int64_t slot = oc_getl(oc_img(j, 1), t), pg = slot / c->p.kv.ps, off = slot % c->p.kv.ps;
        if (slot < 0 || slot >= g.slots) continue; /* skipped */
        for (kv = 0; kv < 2; kv++) {
            const float sc = kv ? c->p.kv.v_scale : c->p.kv.k_scale, scale = sc ? sc : 1.0f;
            for (e = 0; e < g.row; e++) {
                const uint16_t b = oc_get16(oc_img(j, 0), (kv ? g.vpos : g.kpos) + t * g.ld + e);
                const int64_t h = e / c->p.kv.d;
                const int64_t at = c->p.kv.hnd ? ((pg * c->p.kv.hk + h) * c->p.kv.ps + off) * c->p.kv.d + e % c->p.kv.d
                                               : slot * g.row + e;
                if (es == 1) want[kv][at] = ref_e4m3_from_f32(REF_TO_F32(c->dt, b) / scale);
                else oc_set16(want[kv], at, b);
            }
        }
    }
    for (kv = 0; kv < 2; kv++) {
        st->elements += (int64_t)j->b[2 + kv].used / es;
        for (i = 0; i < (int64_t)j->b[2 + kv].used; i++)
            if (img[2 + kv][i] != want[kv][i]) {
                oc_fail(st, "%s byte %lld = 0x%02x, expected 0x%02x (slot %lld of %lld-element rows)",
                        kv ? "v_cache" : "k_cache", (long long)i, img[2 + kv][i], want[kv][i],
                        (long long)(i / es / g.row), (long long)g.row);
                break;
            }
    }
    free(want[0]);
}

static void gather_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const int es = c->p.gather.esize;
    const int64_t rows = c->p.gather.rows, cols = c->p.gather.cols, in_rows = c->p.gather.in_rows;
    const int64_t is = c->p.gather.in_stride ? c->p.gather.in_stride : cols;
    const int64_t os = c->p.gather.out_stride ? c->p.gather.out_stride : cols;
    int64_t r;
    for (r = 0; r < rows; r++) {
        const int64_t src = c->p.gather.idx64 ? oc_getl(oc_img(j, 1), r) : oc_geti(oc_img(j, 1), r);
        const uint8_t *got = img[2] + r * os * es;
        st->elements += cols;
        if (src >= 0 && src < in_rows) {
            if (memcmp(got, oc_img(j, 0) + src * is * es, (size_t)(cols * es)))
                oc_fail(st, "out row %lld differs from in row %lld", (long long)r, (long long)src);
        } else {
            int64_t i;
            for (i = 0; i < cols * es; i++)
                if (got[i]) {
                    oc_fail(st, "out row %lld (index %lld, outside the table) is not zeros",
                            (long long)r, (long long)src);
                    break;
                }
        }
    }
    oc_check_outside(st, j, 2, img[2], rows, cols, os);
}

/* the element offset of (slot `off` of page `page`, kv head h) in a paged cache */
static int64_t oc_cache_at(int hnd, int64_t ps, int64_t hk, int64_t d, int64_t page, int64_t off,
                           int64_t h) {
    return hnd ? ((page * hk + h) * ps + off) * d : ((page * ps + off) * hk + h) * d;
}

/* a paged cache's element values as floats (fp8: the e4m3 value; the scale is the ref's) */
static float *oc_cache_values(const oc_job *j, int bi, int fp8) {
    const int64_t n = (int64_t)j->b[bi].used / j->b[bi].esize;
    float *v = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
    int64_t i;
    if (!v) return NULL;
    for (i = 0; i < n; i++)
        v[i] = fp8 ? (float)ref_e4m3_to_f64(oc_img(j, bi)[i]) : REF_TO_F32(j->c.dt, oc_get16(oc_img(j, bi), i));
    return v;
}

/* Attention outputs of rows not compared with the reference (sampled checks): written, and
   finite (o) or not NaN (lse: -inf for a row without keys). */
static void oc_check_written(oc_stats *st, const char *what, const uint8_t *o, int64_t at,
                             int64_t n, talon_dtype dt) {
    int64_t i;
    for (i = 0; i < n; i++)
        if (!isfinite(REF_TO_F32(dt, oc_get16(o, at + i)))) {
            oc_fail(st, "%s element %lld = %g (not written?)", what, (long long)(at + i),
                    (double)REF_TO_F32(dt, oc_get16(o, at + i)));
            return;
        }
    st->elements += n;
}

static void dec_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t hq = c->p.dec.hq, d = c->p.dec.d, rows = c->p.dec.batch * hq, group = hq / c->p.dec.hk;
    const double rtol = ref_rtol(c->dt), atol = ref_atol(c->dt);
    const double scale = c->p.dec.sm_scale != 0 ? c->p.dec.sm_scale : 1.0 / sqrt((double)d);
    const double ks = c->p.dec.fp8 ? c->p.dec.k_scale : 1.0, vs = c->p.dec.fp8 ? c->p.dec.v_scale : 1.0;
    int64_t stride, pages, row, i, t;
    float *kv = NULL, *vv = NULL;
    const float **kp = NULL, **vp = NULL;
    double *q = NULL, *o, *mag, work = 0;
    int b;
    dec_geometry(c, &stride, &pages);
    for (b = 0; b < c->p.dec.batch; b++) work += (double)c->p.dec.lens[b] * (double)(hq * d);
    kv = oc_cache_values(j, 1, c->p.dec.fp8);
    vv = oc_cache_values(j, 2, c->p.dec.fp8);
    kp = (const float **)malloc(sizeof(float *) * (size_t)(c->p.dec.max_kv_len + 1) * 2);
    q = (double *)malloc((size_t)d * 3 * sizeof(double));
    if (!kv || !vv || !kp || !q) { oc_fail(st, "out of host memory"); goto done; }
    vp = kp + c->p.dec.max_kv_len + 1;
    o = q + d;
    mag = o + d;
    {
        const int64_t step = oc_step(work, budget);
        for (row = 0; row < rows; row++) {
            const int64_t bb = row / hq, h = row % hq, kvh = h / group, len = c->p.dec.lens[bb];
            const int64_t lo = c->p.dec.window > 0 && len > c->p.dec.window ? len - c->p.dec.window : 0;
            const uint8_t *orow = img[5];
            double lse, smax;
            if (row % step && row != rows - 1) {
                oc_check_written(st, "o", orow, row * d, d, c->dt);
                if (!c->p.dec.no_lse && isnan(oc_getf(img[6], row)))
                    oc_fail(st, "lse[%lld] is NaN (not written?)", (long long)row);
                continue;
            }
            for (i = 0; i < d; i++) q[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), row * d + i));
            for (t = lo; t < len; t++) {
                const int64_t page = oc_geti(oc_img(j, 3), bb * stride + t / c->p.dec.ps);
                const int64_t at = oc_cache_at(c->p.dec.hnd, c->p.dec.ps, c->p.dec.hk, d, page,
                                               t % c->p.dec.ps, kvh);
                kp[t - lo] = kv + at;
                vp[t - lo] = vv + at;
            }
            lse = ref_attn_decode(q, kp, vp, len - lo, d, scale, c->p.dec.cap, ks, vs, o, mag, &smax);
            for (i = 0; i < d; i++) /* 2^-14 mag: what fp32 evaluation may cancel */
                oc_cmp(st, "o", row, i, REF_TO_F32(c->dt, oc_get16(orow, row * d + i)), o[i],
                       rtol * fabs(o[i]) + atol + 0x1p-14 * mag[i]);
            if (!c->p.dec.no_lse) {
                const double got = oc_getf(img[6], row);
                if (lse == -INFINITY) {
                    st->elements++;
                    if (got != -INFINITY) oc_fail(st, "lse[%lld] = %g, reference -inf", (long long)row, got);
                } else {
                    oc_cmp(st, "lse", row, 0, got, lse, 0x1p-16 * (1 + fabs(lse) + smax));
                }
            }
        }
    }
    if (c->p.dec.no_lse) oc_check_poison(st, j, 6, img[6]);
done:
    free(kv); free(vv); free(kp); free(q);
}

static void merge_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.merge.rows, d = c->p.merge.d;
    const double rtol = ref_rtol(c->dt), atol = ref_atol(c->dt);
    double *va = (double *)malloc((size_t)d * 3 * sizeof(double)), *vb = va + d, *ro = vb + d;
    int64_t r, i;
    if (!va) { oc_fail(st, "out of host memory"); return; }
    for (r = 0; r < rows; r++) {
        const double la = oc_getf(oc_img(j, 1), r), lb = oc_getf(oc_img(j, 3), r);
        const double m = la > lb ? la : lb;
        const double wa = m == -INFINITY ? 0 : exp(la - m), wb = m == -INFINITY ? 0 : exp(lb - m);
        double lse;
        for (i = 0; i < d; i++) {
            va[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * d + i));
            vb[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 2), r * d + i));
        }
        lse = ref_attn_merge(va, la, vb, lb, d, ro);
        for (i = 0; i < d; i++) {
            const double mag = wa + wb > 0 ? (wa * fabs(va[i]) + wb * fabs(vb[i])) / (wa + wb) : 0;
            oc_cmp(st, "o", r, i, REF_TO_F32(c->dt, oc_get16(img[4], r * d + i)), ro[i],
                   rtol * fabs(ro[i]) + atol + 0x1p-14 * mag);
        }
        if (c->p.merge.with_lse) {
            const double got = oc_getf(img[5], r);
            if (lse == -INFINITY) {
                st->elements++;
                if (got != -INFINITY) oc_fail(st, "lse[%lld] = %g, reference -inf", (long long)r, got);
            } else {
                oc_cmp(st, "lse", r, 0, got, lse, 0x1p-16 * (1 + fabs(lse)));
            }
        }
    }
    if (!c->p.merge.with_lse) oc_check_poison(st, j, 5, img[5]);
    free(va);
}

static void pre_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int paged = c->p.pre.ps > 0;
    const int64_t hq = c->p.pre.hq, d = c->p.pre.d, group = hq / c->p.pre.hk;
    const double rtol = ref_rtol(c->dt), atol = ref_atol(c->dt);
    /* the weights enter P v rounded to the input type: twice that half unit, of mag */
    const double ptol = c->dt == TALON_DTYPE_F16 ? 0x1p-10 : 0x1p-8;
    const double scale = c->p.pre.sm_scale != 0 ? c->p.pre.sm_scale : 1.0 / sqrt((double)d);
    pre_geo g;
    float *kf = NULL, *vf = NULL;
    const float **kp = NULL, **vp = NULL;
    double *q = NULL, *o, *mag, work = 0;
    int64_t t, step;
    int b = 0;
    pre_geometry(c, &g);
    for (b = 0; b < c->p.pre.batch; b++)
        work += (double)c->p.pre.qlens[b] * (double)c->p.pre.klens[b] * (double)(hq * d);
    step = oc_step(work, budget);
    kf = oc_cache_values(j, 1, 0);
    vf = oc_cache_values(j, 2, 0);
    kp = (const float **)malloc(sizeof(float *) * (size_t)(g.max_kv + 1) * 2);
    q = (double *)malloc((size_t)(d + 2 * g.dv) * sizeof(double));
    if (!kf || !vf || !kp || !q) { oc_fail(st, "out of host memory"); goto done; }
    vp = kp + g.max_kv + 1;
    o = q + d;
    mag = o + g.dv;
    b = 0;
    for (t = 0; t < g.cu_q[c->p.pre.batch]; t++) {
        int64_t h, i, ql, kl, qi, pos, lo, hi, n;
        int sampled;
        while (g.cu_q[b + 1] <= t) b++;
        ql = c->p.pre.qlens[b];
        kl = c->p.pre.klens[b];
        qi = t - g.cu_q[b];
        pos = qi + kl - ql; /* the new tokens are the last keys (bottom-right causal) */
        lo = c->p.pre.window > 0 ? pos - c->p.pre.window + 1 : 0;
        if (lo < 0) lo = 0;
        hi = c->p.pre.causal ? pos : kl - 1;
        if (hi > kl - 1) hi = kl - 1;
        n = hi >= lo ? hi - lo + 1 : 0;
        sampled = step == 1 || qi % step == 0 || qi == ql - 1;
        for (h = 0; h < hq; h++) {
            const int64_t kvh = h / group;
            double lse, smax;
            if (!sampled) {
                oc_check_written(st, "o", img[5], t * g.os + h * g.dv, g.dv, c->dt);
                if (!c->p.pre.no_lse && isnan(oc_getf(img[6], t * hq + h)))
                    oc_fail(st, "lse[%lld, %lld] is NaN (not written?)", (long long)t, (long long)h);
                continue;
            }
            for (i = 0; i < d; i++) q[i] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), t * g.qs + h * d + i));
            for (i = 0; i < n; i++) {
                if (paged) {
                    const int64_t key = lo + i;
                    const int64_t page = oc_geti(oc_img(j, 4), b * g.pt_stride + key / c->p.pre.ps);
                    const int64_t at = oc_cache_at(c->p.pre.hnd, c->p.pre.ps, c->p.pre.hk, d, page,
                                                   key % c->p.pre.ps, kvh);
                    kp[i] = kf + at;
                    vp[i] = vf + at;
                } else {
                    kp[i] = kf + (g.cu_k[b] + lo + i) * g.ks + kvh * d;
                    vp[i] = vf + (g.cu_k[b] + lo + i) * g.vs + kvh * g.dv;
                }
            }
            lse = ref_attn_dv(q, kp, vp, n, d, g.dv, scale, c->p.pre.cap, 1.0, 1.0, o, mag, &smax);
            for (i = 0; i < g.dv; i++)
                oc_cmp(st, "o", t, h * g.dv + i, REF_TO_F32(c->dt, oc_get16(img[5], t * g.os + h * g.dv + i)),
                       o[i], rtol * fabs(o[i]) + atol + ptol * mag[i]);
            if (!c->p.pre.no_lse) {
                const double got = oc_getf(img[6], t * hq + h);
                if (lse == -INFINITY) {
                    st->elements++;
                    if (got != -INFINITY)
                        oc_fail(st, "lse[%lld, %lld] = %g, reference -inf", (long long)t, (long long)h, got);
                } else {
                    oc_cmp(st, "lse", t, h, got, lse, 0x1p-16 * (1 + fabs(lse) + smax));
                }
            }
        }
    }
    /* o's row padding stays poisoned (a row past every request is not compared) */
    oc_check_outside(st, j, 5, img[5], g.total_q, hq * g.dv, g.os);
    if (c->p.pre.no_lse) oc_check_poison(st, j, 6, img[6]);
done:
    free(kf); free(vf); free(kp); free(q);
}

static void gemm_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t m = c->p.gemm.m, n = c->p.gemm.n, k = c->p.gemm.k;
    const int block = c->p.gemm.scale == TALON_GEMM_SCALE_BLOCK;
    const talon_dtype ot = c->p.gemm.ot;
    const talon_dtype bias_type = c->dt == TALON_DTYPE_FP8_E4M3 ? TALON_DTYPE_BF16 : c->dt;
    gemm_geo g;
    double *a, *b, *bias, *cres, *sa, *sb, *ref, *mag, rel, e_mag;
    int64_t r, t, step;
    ref_gemm_problem p;
    gemm_geometry(c, &g);
    rel = ot == TALON_DTYPE_BF16 ? 0x1p-8 : ot == TALON_DTYPE_F16 ? 0x1p-11 : 0.0;
    /* fp32 accumulation; fp8: operands whose partial sums the accumulator holds exactly, so
       only the fp32 epilogue (block scales: one fp32 rounding per k-block) */
    e_mag = !g.fp8 ? 0x1p-14 : block ? 0x1p-24 * (double)(g.kb + 16) : 0x1p-20;
    a = (double *)malloc((size_t)(m * k + g.brows * k + g.brows + m * n + m * g.kb + g.b_scales +
                                  g.brows * g.kb + 2 * n) * sizeof(double));
    if (!a) { oc_fail(st, "out of host memory"); return; }
    b = a + m * k;
    bias = b + g.brows * k;
    cres = bias + g.brows;
    sa = cres + m * n;
    sb = sa + m * g.kb;
    ref = sb + g.b_scales + g.brows * g.kb;
    mag = ref + n;
    for (r = 0; r < m; r++)
        for (t = 0; t < k; t++)
            a[r * k + t] = g.fp8 ? ref_e4m3_to_f64(oc_img(j, 0)[r * g.lda + t])
                                 : REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * g.lda + t));
    for (r = 0; r < g.brows; r++)
        for (t = 0; t < k; t++)
            b[r * k + t] = g.fp8 ? ref_e4m3_to_f64(oc_img(j, 1)[r * g.ldb + t])
                                 : REF_TO_F32(c->dt, oc_get16(oc_img(j, 1), r * g.ldb + t));
    for (r = 0; c->p.gemm.bias && r < g.brows; r++) bias[r] = REF_TO_F32(bias_type, oc_get16(oc_img(j, 2), r));
    if (c->p.gemm.resid) {
        const uint8_t *src = oc_img(j, c->p.gemm.resid == 1 ? 3 : 4);
        for (r = 0; r < m; r++)
            for (t = 0; t < n; t++)
                cres[r * n + t] = g.osize == 4 ? oc_getf(src, r * g.ldd + t) : REF_TO_F32(ot, oc_get16(src, r * g.ldd + t));
    }
    if (g.fp8 && block) { /* ref_gemm.h's layout: a [m, kb], b [rows / 128, kb] */
        const int64_t m4 = oc_round_up(m, 4);
        for (r = 0; r < m; r++)
            for (t = 0; t < g.kb; t++) sa[r * g.kb + t] = oc_getf(oc_img(j, 5), t * m4 + r);
        for (r = 0; r < g.b_scales; r++) sb[r] = oc_getf(oc_img(j, 6), r);
    } else if (g.fp8) { /* per row, or one repeated */
        for (r = 0; r < m; r++) sa[r] = oc_getf(oc_img(j, 5), g.a_scales > 1 ? r : 0);
        for (r = 0; r < g.brows; r++) sb[r] = oc_getf(oc_img(j, 6), g.b_scales > 1 ? r : 0);
    }
    p.m = m; p.n = n; p.k = k; p.a = a; p.b = b;
    p.bias = c->p.gemm.bias ? bias : NULL;
    p.c = c->p.gemm.resid ? cres : NULL;
    p.alpha = c->p.gemm.alpha != 0.0f ? c->p.gemm.alpha : 1.0;
    p.beta = c->p.gemm.beta != 0.0f ? c->p.gemm.beta : 1.0;
    p.act = c->p.gemm.act;
    p.gated = c->p.gemm.gated;
    p.a_scale = g.fp8 ? sa : NULL;
    p.b_scale = g.fp8 ? sb : NULL;
    p.block = block;
    step = oc_step((double)m * (double)n * (double)k * (c->p.gemm.gated ? 2.0 : 1.0), budget);
    for (r = 0; r < m; r++) {
        if (r % step && r != m - 1) { /* not compared: written (finite) at least */
            for (t = 0; t < n; t++) {
                const double got = g.osize == 4 ? oc_getf(img[4], r * g.ldd + t)
                                                : REF_TO_F32(ot, oc_get16(img[4], r * g.ldd + t));
                if (!isfinite(got)) {
                    oc_fail(st, "d[%lld, %lld] = %g (not written?)", (long long)r, (long long)t, got);
                    break;
                }
            }
            st->elements += n;
            continue;
        }
        ref_gemm_row(&p, r, ref, mag, NULL);
        for (t = 0; t < n; t++) {
            const double got = g.osize == 4 ? oc_getf(img[4], r * g.ldd + t)
                                            : REF_TO_F32(ot, oc_get16(img[4], r * g.ldd + t));
            oc_cmp(st, "d", r, t, got, ref[t], rel * fabs(ref[t]) + e_mag * mag[t] + 1e-30);
        }
    }
    oc_check_outside(st, j, 4, img[4], m, n, g.ldd);
    free(a);
}

static void quant_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const int64_t rows = c->p.quant.rows, cols = c->p.quant.cols, ld = cols + c->p.quant.pad;
    const int mode = c->p.quant.mode;
    int64_t rs, gs, n_scales, r, t, g;
    float *x = (float *)malloc((size_t)cols * sizeof(float));
    uint8_t *q = (uint8_t *)malloc((size_t)cols), *want_scale;
    quant_geometry(c, &rs, &gs, &n_scales);
    want_scale = (uint8_t *)malloc((size_t)n_scales * 4);
    if (!x || !q || !want_scale) { oc_fail(st, "out of host memory"); goto done; }
    memset(want_scale, 0xFF, (size_t)n_scales * 4); /* entries no row writes stay poisoned */
    if (mode == TALON_QUANT_TENSOR) memcpy(want_scale, oc_img(j, 2), 4);
    for (r = 0; r < rows; r++) {
        for (t = 0; t < cols; t++) x[t] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), r * ld + t));
        if (mode == TALON_QUANT_TENSOR) {
            ref_quant_e4m3(x, cols, oc_getf(oc_img(j, 2), 0), q);
        } else if (mode == TALON_QUANT_TOKEN) {
            const float sc = ref_quant_scale(ref_quant_amax(x, cols));
            oc_setf(want_scale, r, sc);
            ref_quant_e4m3(x, cols, sc, q);
        } else {
            for (g = 0; g < cols / 128; g++) {
                const float sc = ref_quant_scale(ref_quant_amax(x + g * 128, 128));
                oc_setf(want_scale, r * rs + g * gs, sc);
                ref_quant_e4m3(x + g * 128, 128, sc, q + g * 128);
            }
        }
        st->elements += cols;
        for (t = 0; t < cols; t++) /* bit-exact */
            if (img[1][r * ld + t] != q[t]) {
                oc_fail(st, "out[%lld, %lld] = 0x%02x, expected 0x%02x", (long long)r, (long long)t,
                        img[1][r * ld + t], q[t]);
                break;
            }
    }
    st->elements += n_scales;
    for (r = 0; mode != TALON_QUANT_TENSOR && r < n_scales; r++)
        if (memcmp(img[2] + 4 * r, want_scale + 4 * r, 4)) {
            oc_fail(st, "scale[%lld] = %a, expected %a", (long long)r, (double)oc_getf(img[2], r),
                    (double)oc_getf(want_scale, r));
            break;
        }
    oc_check_outside(st, j, 1, img[1], rows, cols, ld);
done:
    free(x); free(q); free(want_scale);
}

static void nq_check(const oc_job *j, uint8_t *const *img, oc_stats *st) {
    const oc_case *c = &j->c;
    const talon_dtype dt = c->dt;
    const int64_t rows = c->p.nq.rows, cols = c->p.nq.cols;
    const int64_t ld = c->p.nq.pad ? cols + c->p.nq.pad : cols;
    const int tensor = c->p.nq.mode == TALON_QUANT_TENSOR;
    const double rtol = ref_rtol(dt), atol = ref_atol(dt);
    double *x = (double *)malloc((size_t)cols * 3 * sizeof(double)), *w = x + cols, *y = w + cols;
    int64_t r, k;
    if (!x) { oc_fail(st, "out of host memory"); return; }
    for (r = 0; r < rows; r++) {
        const double amax = nq_ref_row(j, r, x, w, y);
        double s;
        if (c->p.nq.residual) /* the updated residual: the rounded fp32 sum, exact */
            for (k = 0; k < cols; k++) {
                const uint16_t got = oc_get16(img[2] + j->b[2].off, r * ld + k);
                st->elements++;
                if (got != oc_bits(dt, (float)x[k]))
                    oc_fail(st, "residual[%lld, %lld] = 0x%04x, expected 0x%04x (exact)",
                            (long long)r, (long long)k, got, oc_bits(dt, (float)x[k]));
            }
        if (tensor) {
            s = oc_getf(oc_img(j, 4), 0);
        } else { /* s_r = max(amax(y rounded) / 448, 2^-126): y's rounding moves amax */
            const double want = fmax(amax / 448.0, 0x1p-126);
            s = oc_getf(img[4], r);
            oc_cmp(st, "scale", r, 0, s, want, (rtol + 0x1p-16) * want + 0x1p-126);
        }
        for (k = 0; k < cols; k++) {
            /* y rounded to dtype (within tol_y of the fp64 y), divided by s and rounded to e4m3
               (half its unit: 2^-4 relative, 2^-10 absolute among subnormals) */
            const double tol_y = atol + rtol * fabs(y[k]) + 0x1p-18 * fabs(y[k]);
            const double got = ref_e4m3_to_f64(img[3][r * ld + k]) * s;
            oc_cmp(st, "out (dequantised)", r, k, got, y[k],
                   tol_y + 0x1p-4 * (fabs(y[k]) + tol_y) + 0x1p-10 * s);
        }
    }
    oc_check_outside(st, j, 3, img[3], rows, cols, ld);
    if (c->p.nq.residual) oc_check_outside(st, j, 2, img[2], rows, cols, ld);
    free(x);
}

static void mg_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t n = c->p.mg.n, k = c->p.mg.k, topk = c->p.mg.topk, ld_ab = k + c->p.mg.pad;
    const int64_t ldd = n + c->p.mg.pad, pairs = c->p.mg.tokens * topk;
    const int64_t brows = c->p.mg.gated ? 2 * n : n;
    const double rel = c->dt == TALON_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    const int32_t npost = oc_geti(oc_img(j, 4), 0);
    int64_t scap = 0, ecap = 0, d_rows, s, col, step, cached = -1;
    double *x, *w, *ref, *mag;
    char *written;
    talon_moe_align_block_size_capacity(c->p.mg.tokens, topk, c->p.mg.experts, 128, &scap, &ecap);
    d_rows = mg_rows(c->p.mg.d_rows, c, scap);
    x = (double *)malloc((size_t)(k + brows * k + 2 * n) * sizeof(double));
    written = (char *)calloc((size_t)d_rows, 1);
    if (!x || !written) { oc_fail(st, "out of host memory"); goto done; }
    w = x + k;
    ref = w + brows * k;
    mag = ref + n;
    step = oc_step((double)npost * (double)brows * (double)k, budget);
    for (s = 0; s < npost; s++) {
        const int32_t e = oc_geti(oc_img(j, 3), s / 128), f = oc_geti(oc_img(j, 2), s);
        const int pad_slot = f < 0 || f >= pairs;
        const int64_t row = c->p.mg.d_rows == TALON_MOE_ROWS_SORTED ? s : f;
        int64_t a_row, i;
        if (e < 0 || e >= c->p.mg.experts) continue; /* a skipped block */
        if (c->p.mg.d_rows == TALON_MOE_ROWS_PAIR && pad_slot) continue;
        written[row] = 1;
        if (s % step && s != npost - 1) {
            oc_check_written(st, "d", img[6], row * ldd, n, c->dt);
            continue;
        }
        if (cached != e) { /* expert e's rows of b */
            for (i = 0; i < brows; i++)
                for (col = 0; col < k; col++)
                    w[i * k + col] = REF_TO_F32(c->dt, oc_get16(oc_img(j, 1), ((int64_t)e * brows + i) * ld_ab + col));
            cached = e;
        }
        /* a's row: padding slots read zeros, except from a SORTED a (its row s as is) */
        a_row = c->p.mg.a_rows == TALON_MOE_ROWS_SORTED ? s
                : pad_slot ? -1 : c->p.mg.a_rows == TALON_MOE_ROWS_TOKEN ? f / topk : f;
        for (col = 0; col < k; col++)
            x[col] = a_row < 0 ? 0.0 : REF_TO_F32(c->dt, oc_get16(oc_img(j, 0), a_row * ld_ab + col));
        ref_moe_gemm_row(x, w, n, k, c->p.mg.gated, c->p.mg.act,
                         c->p.mg.weights ? (pad_slot ? 0.0 : (double)oc_getf(oc_img(j, 5), f)) : 1.0,
                         ref, mag);
        for (col = 0; col < n; col++)
            oc_cmp(st, "d", row, col, REF_TO_F32(c->dt, oc_get16(img[6], row * ldd + col)), ref[col],
                   rel * fabs(ref[col]) + 0x1p-14 * mag[col] + 1e-30);
    }
    /* rows the op must not write (skipped blocks, pairs without an expert, a PAIR d's padding
       slots) and every row's padding stay poisoned */
    for (s = 0; s < d_rows; s++) {
        const int64_t from = written[s] ? n * 2 : 0;
        for (col = from; col < ldd * 2; col++)
            if (img[6][s * ldd * 2 + col] != 0xFF) {
                oc_fail(st, "d row %lld byte %lld written (%s)", (long long)s, (long long)col,
                        written[s] ? "row padding" : "a row the op must not write");
                break;
            }
    }
done:
    free(x); free(written);
}

/* Every row of d: its group's product (a sample of rows when large), or still poisoned (rows
   of skipped tiles, past rows_used or past a group's count) with the row padding. */
static void gg_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    const int64_t n = c->p.gg.n, k = c->p.gg.k, ld_ab = k + c->p.gg.pad, ldd = n + c->p.gg.pad;
    const int64_t brows = c->p.gg.gated ? 2 * n : n, rows = gg_rows(c);
    const int64_t used = c->p.gg.used ? oc_geti(oc_img(j, 3), 0) : rows;
    const int64_t kb = (k + 127) / 128, rows4 = gg_rows4(c), blocks = (brows + 127) / 128;
    const int fp8 = c->dt == TALON_DTYPE_FP8_E4M3;
    const talon_dtype ot = fp8 ? TALON_DTYPE_BF16 : c->dt;
    /* d's rounding; the fp32 sums (fp8: one rounding per k-block) */
    const double rel = ot == TALON_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    const double e_mag = fp8 ? 0x1p-24 * (double)(kb + 16) : 0x1p-14;
    const int64_t step = oc_step((double)rows * (double)brows * (double)k, budget);
    int64_t r, col, i, cached = -1;
    double *x = (double *)malloc((size_t)(k + brows * k + 2 * n) * sizeof(double)), *w, *ref, *mag;
    if (!x) { oc_fail(st, "out of host memory"); return; }
    w = x + k;
    ref = w + brows * k;
    mag = ref + n;
    for (r = 0; r < rows; r++) {
        int64_t g;
        if (c->p.gg.masked) {
            g = r / c->p.gg.rows;
            if (r % c->p.gg.rows >= oc_geti(oc_img(j, 2), g)) g = -1;
        } else {
            g = oc_geti(oc_img(j, 2), r / 128);
            if (r >= used || g >= c->p.gg.groups) g = -1;
        }
        for (col = g >= 0 ? n * 2 : 0; col < ldd * 2; col++)
            if (img[4][r * ldd * 2 + col] != 0xFF) {
                oc_fail(st, "d row %lld byte %lld written (%s)", (long long)r, (long long)col,
                        g >= 0 ? "row padding" : "a row the op must not write");
                break;
            }
        if (g < 0) continue;
        if (r % step && r != rows - 1) {
            oc_check_written(st, "d", img[4], r * ldd, n, ot);
            continue;
        }
        if (cached != g) {
            for (i = 0; i < brows; i++)
                for (col = 0; col < k; col++)
                    w[i * k + col] = gg_value(j, 1, (g * brows + i) * ld_ab + col,
                                              (g * blocks + i / 128) * kb + col / 128);
            cached = g;
        }
        for (col = 0; col < k; col++) x[col] = gg_value(j, 0, r * ld_ab + col, (col / 128) * rows4 + r);
        ref_moe_gemm_row(x, w, n, k, c->p.gg.gated, c->p.gg.act, 1.0, ref, mag);
        for (col = 0; col < n; col++)
            oc_cmp(st, "d", r, col, REF_TO_F32(ot, oc_get16(img[4], r * ldd + col)), ref[col],
                   rel * fabs(ref[col]) + e_mag * mag[col] + 1e-30);
    }
    free(x);
}

/* Checks the downloaded buffers img[i] (every buffer but workspaces; an input's img may be
   NULL: not downloaded) against the references. budget: host multiply-adds allowed for the
   attention and GEMM references (larger problems are checked on evenly spread rows, the
   others only for being written); 0 checks every row. */
OC_API void oc_check(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget) {
    const oc_case *c = &j->c;
    int i;
    ref_f32_table_init();
    for (i = 0; i < j->nbuf; i++) {
        const oc_buf *b = &j->b[i];
        size_t k;
        if (b->role == OC_WS || !img[i]) continue;
        if (b->role == OC_IN) {
            if (memcmp(img[i], b->init, b->bytes))
                oc_fail(st, "input %s changed", b->name);
            continue;
        }
        for (k = b->used; k < b->bytes; k++) /* the guard after the buffer */
            if (img[i][k] != (b->init ? b->init[k] : 0xFF)) {
                oc_fail(st, "guard byte %zu after %s written", k - b->used, b->name);
                break;
            }
    }
    switch (c->op) {
    case OP_rmsnorm: case OP_fused_add_rmsnorm: case OP_layernorm:
    case OP_silu_and_mul: case OP_gelu_and_mul: norm_check(j, img, st); break;
    case OP_moe_router_topk: router_check(j, img, st); break;
    case OP_topk: topk_check(j, img, st); break;
    case OP_moe_align_block_size: align_check(j, img, st); break;
    case OP_moe_sum: sum_check(j, img, st); break;
    case OP_rope: rope_check(j, img, st); break;
    case OP_kv_append: kv_check(j, img, st); break;
    case OP_gather_rows: gather_check(j, img, st); break;
    case OP_decode_attention: dec_check(j, img, st, budget); break;
    case OP_merge_attention_states: merge_check(j, img, st); break;
    case OP_prefill_attention: case OP_prefill_attention_paged: pre_check(j, img, st, budget); break;
    case OP_gemm: gemm_check(j, img, st, budget); break;
    case OP_quant_fp8: quant_check(j, img, st); break;
    case OP_rmsnorm_quant_fp8: nq_check(j, img, st); break;
    case OP_moe_gemm: mg_check(j, img, st, budget); break;
    case OP_grouped_gemm: gg_check(j, img, st, budget); break;
    default: oc_fail(st, "no check for op %d", c->op);
    }
}

/* Outputs whose order the contract leaves open, rewritten in a canonical order so that two
   correct runs compare bit for bit. talon_topk with sorted = 0 returns each row's k entries
   "in an unspecified order (it may differ between calls)": its (index, value) pairs are
   sorted by index (the values are copies of the input at the index, so the pairs sort
   together). Every other op's outputs are fully determined: moe_align's groups are in
   ascending order by contract, the GEMMs and attention add in a fixed order (no atomics),
   kv_append's slots are distinct here (equal slots would race). */
OC_API void oc_canon(const oc_job *j, uint8_t *const *img) {
    const oc_case *c = &j->c;
    if (c->op == OP_topk && !c->p.topk.sorted) {
        const int es = c->dt == TALON_DTYPE_F32 ? 4 : 2;
        const int64_t k = c->p.topk.k;
        int64_t r, a, b;
        for (r = 0; r < c->p.topk.rows; r++) { /* insertion sort: k <= 1024 */
            uint8_t *vals = img[1] + r * k * es, *idx = img[2] + r * k * 4;
            for (a = 1; a < k; a++) {
                uint8_t iv[4], vv[4];
                memcpy(iv, idx + a * 4, 4);
                memcpy(vv, vals + a * es, (size_t)es);
                for (b = a; b > 0 && oc_geti(idx, b - 1) > oc_geti(iv, 0); b--) {
                    memcpy(idx + b * 4, idx + (b - 1) * 4, 4);
                    memcpy(vals + b * es, vals + (b - 1) * es, (size_t)es);
                }
                memcpy(idx + b * 4, iv, 4);
                memcpy(vals + b * es, vv, (size_t)es);
            }
        }
    }
}

/* ================================================================ device buffers */
OC_API void oc_dev_free(const oc_job *j, oc_dev *d) {
    int i;
    for (i = 0; i < j->nbuf; i++) {
        if (d->p[i]) cu.cuMemFree(d->p[i]);
        if (d->pristine[i]) cu.cuMemFree(d->pristine[i]);
    }
    memset(d, 0, sizeof *d);
}

/* Allocates every buffer on its own (and a pristine copy of every INOUT buffer), uploads the
   inputs and waits for the uploads (pageable copies may return before their DMA is done, and
   the tests' streams do not synchronise with the legacy stream). Not legal while the calling
   thread captures. */
OC_API CUresult oc_dev_alloc(const oc_job *j, oc_dev *d) {
    CUresult r = CUDA_SUCCESS;
    int i;
    memset(d, 0, sizeof *d);
    for (i = 0; i < j->nbuf && !r; i++) {
        const oc_buf *b = &j->b[i];
        if ((r = cu.cuMemAlloc(&d->p[i], b->bytes))) break;
        if (b->role == OC_IN) r = cu.cuMemcpyHtoD(d->p[i], b->init, b->bytes);
        if (b->role == OC_INOUT && !(r = cu.cuMemAlloc(&d->pristine[i], b->bytes)))
            r = cu.cuMemcpyHtoD(d->pristine[i], b->init, b->bytes);
    }
    if (!r) r = cu.cuCtxSynchronize();
    if (r) oc_dev_free(j, d);
    return r;
}

/* Before a run, on stream: INOUT buffers restored from their pristine copies, OUT buffers
   and workspaces poisoned (0xFF bytes, copied from `poison`, poison_bytes of them). */
OC_API CUresult oc_dev_reset(const oc_job *j, const oc_dev *d, CUstream stream, CUdeviceptr poison,
                             size_t poison_bytes) {
    CUresult r = CUDA_SUCCESS;
    int i;
    for (i = 0; i < j->nbuf && !r; i++) {
        const oc_buf *b = &j->b[i];
        size_t o;
        if (b->role == OC_INOUT) {
            r = cu.cuMemcpyDtoDAsync(d->p[i], d->pristine[i], b->bytes, stream);
        } else if (b->role == OC_OUT || b->role == OC_WS) {
            for (o = 0; o < b->bytes && !r; o += poison_bytes)
                r = cu.cuMemcpyDtoDAsync(d->p[i] + o, poison,
                                         b->bytes - o < poison_bytes ? b->bytes - o : poison_bytes, stream);
        }
    }
    return r;
}

/* host buffers for the downloads: every buffer but workspaces (inputs too when `inputs`) */
OC_API int oc_img_alloc(const oc_job *j, uint8_t **img, int inputs) {
    int i;
    for (i = 0; i < OC_MAXBUF; i++) img[i] = NULL;
    for (i = 0; i < j->nbuf; i++) {
        const int role = j->b[i].role;
        if (role == OC_WS || (role == OC_IN && !inputs)) continue;
        if (!(img[i] = (uint8_t *)malloc(j->b[i].bytes))) return -1;
    }
    return 0;
}

OC_API void oc_img_free(uint8_t **img) {
    int i;
    for (i = 0; i < OC_MAXBUF; i++) {
        free(img[i]);
        img[i] = NULL;
    }
}

/* Downloads every buffer that has a host image (after the stream was synchronised). */
OC_API CUresult oc_dev_download(const oc_job *j, const oc_dev *d, uint8_t *const *img) {
    CUresult r = CUDA_SUCCESS;
    int i;
    for (i = 0; i < j->nbuf && !r; i++)
        if (img[i]) r = cu.cuMemcpyDtoH(img[i], d->p[i], j->b[i].bytes);
    return r;
}

/* elements of the OUT and INOUT buffers (what a run's comparison covers) */
OC_API int64_t oc_out_elements(const oc_job *j) {
    int64_t n = 0;
    int i;
    for (i = 0; i < j->nbuf; i++)
        if (j->b[i].role == OC_OUT || j->b[i].role == OC_INOUT)
            n += (int64_t)j->b[i].used / j->b[i].esize;
    return n;
}

/* bytes of device memory the job takes */
OC_API size_t oc_dev_bytes(const oc_job *j) {
    size_t n = 0;
    int i;
    for (i = 0; i < j->nbuf; i++) n += j->b[i].bytes * (j->b[i].role == OC_INOUT ? 2 : 1);
    return n;
}

#endif
