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
   oc_canon rewrites an output whose order the contract leaves open into a canonical form.

   What is per op (its oc_case params, random shape, build, args, check, description) is its
   family's: <name>_oc in tests/<family>/cases_<family>.h (the scheme: op_calls.h); this file
   holds the machinery, what several families share, and the dispatch by op (oc_ops). */
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

/* the functions a test program calls (each uses a subset of them) */
#if defined(__GNUC__)
#define OC_API static __attribute__((unused))
#else
#define OC_API static
#endif

#define OC_GUARD 64  /* bytes after every buffer that must keep their initial bytes */
#define OC_MAXBUF 10 /* buffers of one op (prefill_attention_paged has 9) */
#define OC_MAXB 8    /* requests of an attention case */

/* op_calls.h: the union, op numbers and names, op_call; each family's oc_case params */
#include "op_calls.h"

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
    union { /* each family's (<FAMILY>_OC_PARAMS, tests/<family>/cases_<family>.h) */
        NORM_OC_PARAMS ROUTER_OC_PARAMS TOPK_OC_PARAMS MOE_OC_PARAMS ROPE_OC_PARAMS
        KV_CACHE_OC_PARAMS GATHER_OC_PARAMS DECODE_OC_PARAMS PREFILL_OC_PARAMS GEMM_OC_PARAMS
        QUANT_OC_PARAMS MOE_GEMM_OC_PARAMS
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

/* ================================================================ what several families share */
static int64_t oc_pad(uint64_t *s) { return oc_chance(s, 50) ? 8 * oc_ri(s, 1, 4) : oc_ri(s, 1, 13); }

static const int64_t oc_heads[][2] = {{4, 4}, {16, 4}, {16, 2}, {8, 1}, {32, 8}, {3, 1},
                                      {10, 2}, {6, 6}, {40, 8}, {4, 2}, {7, 1}, {2, 1}};
#define OC_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* fills n 16-bit elements from element `at` of buffer bi's image: amp * uniform [-1, 1) */
static void oc_fill16(oc_job *j, int bi, int64_t at, int64_t n, float amp, uint64_t *s) {
    uint8_t *p = oc_img(j, bi);
    int64_t i;
    for (i = 0; i < n; i++) oc_set16(p, at + i, oc_bits(j->c.dt, amp * oc_u(s)));
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

/* ================================================================ the ops */
/* An op's part (<name>_oc, in its family's tests/<family>/cases_<family>.h). */
typedef struct oc_op {
    void (*random)(oc_case *c, uint64_t *s, int big); /* the shape (c's op, seed, dt are set) */
    int (*build)(oc_job *j, talon_ctx *ctx);          /* buffers and host images: 0 or -1 */
    void (*args)(const oc_job *j, const oc_dev *d, op_args *a);
    void (*check)(const oc_job *j, uint8_t *const *img, oc_stats *st, double budget);
    int (*describe)(const oc_case *c, char *buf, size_t n, const char *name, const char *dt,
                    unsigned long long seed);
    void (*canon)(const oc_job *j, uint8_t *const *img); /* NULL: outputs fully determined */
} oc_op;

/* P(i): buffer i as talon gets it (the args functions) */
#define P(i) (d->p[i] + (CUdeviceptr)j->b[i].off)
#define OC_FAMILY_CASES
#include "family_cases.h"
#undef OC_FAMILY_CASES
#undef P

static const oc_op *const oc_ops[NUM_OPS] = {
#define OC_OP(name, member) &name##_oc,
    TEST_OPS(OC_OP)
#undef OC_OP
};

/* One random case of op. big 0: modest shapes (every element checked quickly); 1: the soak's
   range, up to a few million elements (large problems are checked on a sample of rows). */
OC_API void oc_random(oc_case *c, int op, uint64_t *s, int big) {
    const talon_dtype bf_or_f16 = oc_chance(s, 50) ? TALON_DTYPE_BF16 : TALON_DTYPE_F16;
    memset(c, 0, sizeof *c);
    c->op = op;
    c->seed = ref_next64(s);
    c->dt = bf_or_f16;
    if (op >= 0 && op < NUM_OPS) oc_ops[op]->random(c, s, big);
}

OC_API int oc_describe(const oc_case *c, char *buf, size_t n) {
    const char *name = oc_op_name(c->op);
    if (c->op < 0 || c->op >= NUM_OPS) return snprintf(buf, n, "%s", name);
    return oc_ops[c->op]->describe(c, buf, n, name, oc_dtype_name(c->dt),
                                   (unsigned long long)c->seed);
}

/* Builds the job of case c: buffers and host images. ctx: for the workspace sizes (topk,
   decode; the same on every context of a device). Returns 0, or -1 (nothing to free). */
OC_API int oc_build(oc_job *j, const oc_case *c, talon_ctx *ctx) {
    int rc = -1;
    memset(j, 0, sizeof *j);
    j->c = *c;
    ref_f32_table_init();
    if (c->op >= 0 && c->op < NUM_OPS) rc = oc_ops[c->op]->build(j, ctx);
    if (rc) oc_free(j);
    return rc;
}

/* ================================================================ arguments */
OC_API void oc_args(const oc_job *j, const oc_dev *d, op_args *a) {
    memset(a, 0, sizeof *a);
    if (j->c.op >= 0 && j->c.op < NUM_OPS) oc_ops[j->c.op]->args(j, d, a);
}

/* ================================================================ checks */
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
    if (c->op >= 0 && c->op < NUM_OPS) oc_ops[c->op]->check(j, img, st, budget);
    else oc_fail(st, "no check for op %d", c->op);
}

/* Outputs whose order the contract leaves open, rewritten in a canonical order so that two
   correct runs compare bit for bit (the op's canon; see topk's). Every other op's outputs are
   fully determined: moe_align's groups are in ascending order by contract, the GEMMs and
   attention add in a fixed order (no atomics), kv_append's slots are distinct here (equal
   slots would race). */
OC_API void oc_canon(const oc_job *j, uint8_t *const *img) {
    if (j->c.op >= 0 && j->c.op < NUM_OPS && oc_ops[j->c.op]->canon) oc_ops[j->c.op]->canon(j, img);
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
