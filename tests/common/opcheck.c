/* See opcheck.h. */
#define _POSIX_C_SOURCE 200809L
#include "opcheck.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gpu.h"
#include "ref.h"

/* ---------------------------------------------------------------- constants */
#define SENTINEL 0xDEADu   /* padding and guards: must survive the launch */
#define POISON 0xFFFFu     /* outputs before a launch: NaN in bf16 and f16 */
#define GUARD 72           /* sentinel elements after the last row of every tensor */
#ifndef OPCHECK_NOISE
#define OPCHECK_NOISE 0x1p-18 /* see opcheck.h */
#endif
#define NOISE OPCHECK_NOISE

enum { T_IN, T_OUT, T_RES, T_W, T_B, NT };
static const char *const tensor_name[NT] = {"in", "out", "residual", "weight", "bias"};

/* What a tensor's rows must hold after the launch. */
enum { K_INPUT,    /* unchanged, bit for bit */
       K_OUTPUT,   /* the op's result, within tolerance */
       K_RESIDUAL  /* fused_add_rmsnorm's new residual, bit for bit */ };

/* One unit in the last place of bf16/f16 at x (normal, nonzero; callers pass |x| >= atol):
   2^floor(log2 |x|), clamped to the smallest normal exponent, times 2^-7 or 2^-10. */
static double ulp_of(talon_dtype t, double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    u &= 0x7FF0000000000000ull; /* 2^floor(log2 |x|) */
    memcpy(&x, &u, sizeof x);
    if (t == TALON_DTYPE_BF16) return (x < 0x1p-126 ? 0x1p-126 : x) * 0x1p-7;
    return (x < 0x1p-14 ? 0x1p-14 : x) * 0x1p-10;
}

/* ---------------------------------------------------------------- names */
const char *opcheck_op_name(opcheck_op op) {
    switch (op) {
    case OPCHECK_RMSNORM: return "rmsnorm";
    case OPCHECK_FUSED_ADD_RMSNORM: return "fused_add_rmsnorm";
    case OPCHECK_LAYERNORM: return "layernorm";
    case OPCHECK_LAYERNORM_BIAS: return "layernorm_bias";
    case OPCHECK_SILU: return "silu_and_mul";
    case OPCHECK_GELU_ERF: return "gelu_erf_and_mul";
    case OPCHECK_GELU_TANH: return "gelu_tanh_and_mul";
    default: return "unknown_op";
    }
}

const char *opcheck_dtype_name(talon_dtype t) {
    return t == TALON_DTYPE_BF16 ? "bf16" : t == TALON_DTYPE_F16 ? "f16" : "unsupported";
}

int opcheck_op_is_norm(opcheck_op op) {
    return op == OPCHECK_RMSNORM || op == OPCHECK_FUSED_ADD_RMSNORM || op == OPCHECK_LAYERNORM ||
           op == OPCHECK_LAYERNORM_BIAS;
}

static int is_layernorm(opcheck_op op) {
    return op == OPCHECK_LAYERNORM || op == OPCHECK_LAYERNORM_BIAS;
}

static float eps_of(const opcheck_case *c) {
    if (c->eps != 0.0f) return c->eps;
    return is_layernorm(c->op) ? 1e-5f : 1e-6f;
}

static void stride_text(char *buf, size_t len, int64_t stride) {
    if (stride) snprintf(buf, len, "%lld", (long long)stride);
    else snprintf(buf, len, "contig");
}

int opcheck_describe(const opcheck_case *c, char *buf, size_t len) {
    char in[32], out[32], res[32], off[64] = "", extra[48] = "";
    int norm = opcheck_op_is_norm(c->op);
    stride_text(in, sizeof in, c->in_stride);
    stride_text(out, sizeof out, c->out_stride);
    stride_text(res, sizeof res, c->residual_stride);
    if (c->offset) {
        unsigned m = c->offset_mask ? c->offset_mask : OPCHECK_T_ALL;
        size_t n = (size_t)snprintf(off, sizeof off, " offset=%lld(", (long long)c->offset);
        int t, first = 1;
        for (t = 0; t < NT && n < sizeof off; t++)
            if (m & (1u << t)) {
                n += (size_t)snprintf(off + n, sizeof off - n, "%s%s", first ? "" : ",",
                                      m == OPCHECK_T_ALL ? "all" : tensor_name[t]);
                first = 0;
                if (m == OPCHECK_T_ALL) break;
            }
        if (n < sizeof off) snprintf(off + n, sizeof off - n, ")");
    }
    if (!norm) snprintf(extra, sizeof extra, " (in %lld)", (long long)(2 * c->cols));
    return snprintf(buf, len,
                    "%s %s rows=%lld cols=%lld%s in_stride=%s%s%s%s%s%s%s eps=%g seed=%llu",
                    opcheck_op_name(c->op), opcheck_dtype_name(c->dtype), (long long)c->rows,
                    (long long)c->cols, extra, in,
                    c->op == OPCHECK_FUSED_ADD_RMSNORM ? " residual_stride=" : "",
                    c->op == OPCHECK_FUSED_ADD_RMSNORM ? res : "",
                    (c->op == OPCHECK_FUSED_ADD_RMSNORM || c->in_place) ? "" : " out_stride=",
                    (c->op == OPCHECK_FUSED_ADD_RMSNORM || c->in_place) ? "" : out,
                    c->in_place ? " in-place" : "", off, norm ? (double)eps_of(c) : 0.0,
                    (unsigned long long)c->seed);
}

int opcheck_format(const opcheck_result *r, char *buf, size_t len) {
    int n = snprintf(buf, len,
                     "%s: %lld elements, %lld mismatches, %lld corrupted; max abs err %.3g, "
                     "max rel err %.3g, max %.3g ulp, %.3g of tolerance",
                     r->pass ? "PASS" : "FAIL", (long long)r->elements, (long long)r->mismatches,
                     (long long)r->corrupted, r->max_abs, r->max_rel, r->max_ulp,
                     r->max_tol_ratio);
    if (n >= 0 && (size_t)n < len && r->first.found)
        n += snprintf(buf + n, len - (size_t)n,
                      "; first: %s row %lld col %lld: got 0x%04x (%.9g), expected %.9g "
                      "(0x%04x), tolerance %.3g",
                      r->first.what, (long long)r->first.row, (long long)r->first.col,
                      r->first.dev_bits, r->first.dev, r->first.ref, r->first.ref_bits,
                      r->first.tol);
    if (n >= 0 && (size_t)n < len && r->error[0])
        n += snprintf(buf + n, len - (size_t)n, "; error: %s", r->error);
    return n;
}

/* ---------------------------------------------------------------- host buffer cache */
/* Big host buffers are reused: faulting hundreds of MB in per case would cost more than
   the check itself. Small ones come from malloc. A cached buffer is reused for a request
   of at least an eighth of its size; when every slot is taken, the smallest free one goes. */
#define POOL_SLOTS 16
#define POOL_MIN ((size_t)4 << 20)
static struct { void *p; size_t cap; int busy; } pool[POOL_SLOTS];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static void *hbuf_get(size_t bytes) {
    int i, best = -1, slot = -1;
    void *p = NULL;
    if (bytes < POOL_MIN) return malloc(bytes ? bytes : 1);
    pthread_mutex_lock(&pool_lock);
    for (i = 0; i < POOL_SLOTS; i++)
        if (pool[i].p && !pool[i].busy && pool[i].cap >= bytes && pool[i].cap / 8 <= bytes &&
            (best < 0 || pool[i].cap < pool[best].cap))
            best = i;
    if (best >= 0) {
        pool[best].busy = 1;
        p = pool[best].p;
    } else {
        for (i = 0; i < POOL_SLOTS && slot < 0; i++)
            if (!pool[i].p) slot = i;
        if (slot < 0)
            for (i = 0; i < POOL_SLOTS; i++)
                if (!pool[i].busy && (slot < 0 || pool[i].cap < pool[slot].cap)) slot = i;
        if (slot >= 0) {
            free(pool[slot].p);
            pool[slot].p = NULL;
            pool[slot].cap = 0;
            if ((p = malloc(bytes))) {
                pool[slot].p = p;
                pool[slot].cap = bytes;
                pool[slot].busy = 1;
            }
        } else {
            p = malloc(bytes);
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return p;
}

static void hbuf_put(void *p) {
    int i;
    if (!p) return;
    pthread_mutex_lock(&pool_lock);
    for (i = 0; i < POOL_SLOTS; i++)
        if (pool[i].p == p) {
            pool[i].busy = 0;
            break;
        }
    pthread_mutex_unlock(&pool_lock);
    if (i == POOL_SLOTS) free(p);
}

void opcheck_cleanup(void) {
    int i;
    pthread_mutex_lock(&pool_lock);
    for (i = 0; i < POOL_SLOTS; i++)
        if (pool[i].p && !pool[i].busy) {
            free(pool[i].p);
            pool[i].p = NULL;
            pool[i].cap = 0;
        }
    pthread_mutex_unlock(&pool_lock);
}

/* ---------------------------------------------------------------- parallel rows */
typedef void (*rows_fn)(void *arg, int64_t r0, int64_t r1, int tid);

#define MAX_THREADS 64
static int nthreads;
static pthread_once_t nthreads_once = PTHREAD_ONCE_INIT;
static void nthreads_init(void) {
    const char *e = getenv("OPCHECK_THREADS");
    long v = e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    nthreads = v < 1 ? 1 : v > MAX_THREADS ? MAX_THREADS : (int)v;
}
static int num_threads(void) {
    pthread_once(&nthreads_once, nthreads_init);
    return nthreads;
}

typedef struct {
    rows_fn fn;
    void *arg;
    int64_t r0, r1;
    int tid;
} rows_task;

static void *rows_thread(void *p) {
    rows_task *t = (rows_task *)p;
    t->fn(t->arg, t->r0, t->r1, t->tid);
    return NULL;
}

/* Splits [0, rows) into contiguous ranges, at most one per thread and about 64K elements
   each at least; tid numbers the ranges in row order. Returns the number of ranges. */
static int parallel_rows(int64_t rows, int64_t elems_per_row, rows_fn fn, void *arg) {
    rows_task task[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS];
    int64_t work = rows * (elems_per_row < 1 ? 1 : elems_per_row);
    int64_t n = work / 65536 + 1;
    int i, nt;
    if (n > num_threads()) n = num_threads();
    if (n > rows) n = rows;
    nt = (int)n;
    for (i = 0; i < nt; i++) {
        task[i].fn = fn;
        task[i].arg = arg;
        task[i].r0 = rows * i / nt;
        task[i].r1 = rows * (i + 1) / nt;
        task[i].tid = i;
        started[i] = i > 0 && pthread_create(&th[i], NULL, rows_thread, &task[i]) == 0;
    }
    rows_thread(&task[0]);
    for (i = 1; i < nt; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else rows_thread(&task[i]);
    }
    return nt;
}

/* ---------------------------------------------------------------- jobs */
typedef struct tensor {
    int used, kind;
    int64_t rows, width, stride, off, n; /* n: allocation length in elements */
    uint16_t *init, *back;               /* what is uploaded; what came back */
    CUdeviceptr base;
} tensor;

struct opcheck_job {
    opcheck_case c;
    opcheck_result *r;
    tensor t[NT];
    int out;          /* tensor holding the normalised/activated output */
    double *w, *b;    /* weight and bias as doubles */
    float eps;
};

static int fail_cu(opcheck_result *r, const char *what, CUresult e) {
    if (!r->error[0]) snprintf(r->error, sizeof r->error, "%s failed: %s (%d)", what, gpu_error(e), (int)e);
    return -1;
}

static int fail_msg(opcheck_result *r, const char *msg) {
    if (!r->error[0]) snprintf(r->error, sizeof r->error, "%s", msg);
    return -1;
}

static int64_t row_start(const tensor *t, int64_t r) { return t->off + r * t->stride; }
static int64_t row_end(const tensor *t, int64_t r) { /* where the next row begins */
    return r + 1 < t->rows ? row_start(t, r + 1) : t->n;
}

/* The value of element (row, col) of tensor ti before the launch, as a float. */
static float draw(const opcheck_job *j, int ti, uint64_t *s) {
    switch (ti) {
    case T_IN:
        if (is_layernorm(j->c.op)) /* mean 3, sd 1: the mean matters */
            return 3.0f +
                   (ref_unit01(s) + ref_unit01(s) + ref_unit01(s) + ref_unit01(s) - 2.0f) * 1.7320508f;
        return -2.0f + 4.0f * ref_unit01(s);
    case T_RES: return -2.0f + 4.0f * ref_unit01(s);
    case T_W: return 0.5f + ref_unit01(s);
    case T_B: return -1.0f + 2.0f * ref_unit01(s);
    default: return 0.0f;
    }
}

typedef struct {
    opcheck_job *j;
    int ti;
} fill_arg;

static void fill_rows(void *p, int64_t r0, int64_t r1, int tid) {
    const fill_arg *a = (const fill_arg *)p;
    const opcheck_job *j = a->j;
    const tensor *t = &j->t[a->ti];
    int64_t r, i;
    (void)tid;
    for (r = r0; r < r1; r++) {
        int64_t lo = r == 0 ? 0 : row_start(t, r), s0 = row_start(t, r), e = row_end(t, r);
        uint16_t *d = t->init;
        for (i = lo; i < s0; i++) d[i] = SENTINEL;
        if (a->ti == T_OUT) {
            for (i = 0; i < t->width; i++) d[s0 + i] = POISON;
        } else {
            uint64_t s = ref_mix64(j->c.seed ^
                                   ref_mix64(0x5EED0000ull + (uint64_t)a->ti * 64 +
                                             (uint64_t)j->c.op * 4 + (uint64_t)j->c.dtype) ^
                                   ref_mix64((uint64_t)r * 0x9FB21C651E98DF25ull + 1));
            for (i = 0; i < t->width; i++) d[s0 + i] = ref_from_f32(j->c.dtype, draw(j, a->ti, &s));
        }
        for (i = s0 + t->width; i < e; i++) d[i] = SENTINEL;
    }
}

void opcheck_free(opcheck_job *j) {
    int i;
    if (!j) return;
    for (i = 0; i < NT; i++) {
        if (j->t[i].base) cu.cuMemFree(j->t[i].base);
        hbuf_put(j->t[i].init);
        hbuf_put(j->t[i].back);
    }
    free(j->w);
    free(j->b);
    free(j);
}

int opcheck_upload(opcheck_job *j) {
    CUresult e;
    int i;
    for (i = 0; i < NT; i++)
        if (j->t[i].used &&
            (e = cu.cuMemcpyHtoD(j->t[i].base, j->t[i].init, (size_t)j->t[i].n * 2)) != CUDA_SUCCESS)
            return fail_cu(j->r, "cuMemcpyHtoD", e);
    /* pageable copies may return before the DMA is done; streams that do not synchronise
       with the legacy stream would otherwise race with them */
    if ((e = cu.cuCtxSynchronize()) != CUDA_SUCCESS) return fail_cu(j->r, "cuCtxSynchronize", e);
    return 0;
}

opcheck_job *opcheck_prepare(const opcheck_case *c, opcheck_result *r) {
    opcheck_job *j;
    int norm = opcheck_op_is_norm(c->op), i;
    unsigned mask = c->offset_mask ? c->offset_mask : OPCHECK_T_ALL;
    int64_t in_width;
    CUresult e;

    ref_f32_table_init();
    memset(r, 0, sizeof *r);
    r->first.row = r->first.col = -1;
    if ((unsigned)c->op >= OPCHECK_NUM_OPS || (c->dtype != TALON_DTYPE_BF16 && c->dtype != TALON_DTYPE_F16) ||
        c->rows < 1 || c->cols < 1 || c->offset < 0 || c->in_stride < 0 || c->out_stride < 0 ||
        c->residual_stride < 0 || (c->in_place && (c->op != OPCHECK_RMSNORM && !is_layernorm(c->op)))) {
        fail_msg(r, "opcheck: invalid case");
        return NULL;
    }
    if (!(j = (opcheck_job *)calloc(1, sizeof *j))) {
        fail_msg(r, "opcheck: out of host memory");
        return NULL;
    }
    j->c = *c;
    j->r = r;
    j->eps = eps_of(c);
    in_width = norm ? c->cols : 2 * c->cols;

    j->t[T_IN].used = 1;
    j->t[T_IN].rows = c->rows;
    j->t[T_IN].width = in_width;
    j->t[T_IN].stride = c->in_stride ? c->in_stride : in_width;
    if (c->op == OPCHECK_FUSED_ADD_RMSNORM || c->in_place) {
        j->out = T_IN;
        j->t[T_IN].kind = K_OUTPUT;
    } else {
        j->out = T_OUT;
        j->t[T_IN].kind = K_INPUT;
        j->t[T_OUT].used = 1;
        j->t[T_OUT].kind = K_OUTPUT;
        j->t[T_OUT].rows = c->rows;
        j->t[T_OUT].width = c->cols;
        j->t[T_OUT].stride = c->out_stride ? c->out_stride : c->cols;
    }
    if (c->op == OPCHECK_FUSED_ADD_RMSNORM) {
        j->t[T_RES].used = 1;
        j->t[T_RES].kind = K_RESIDUAL;
        j->t[T_RES].rows = c->rows;
        j->t[T_RES].width = c->cols;
        j->t[T_RES].stride = c->residual_stride ? c->residual_stride : c->cols;
    }
    if (norm) {
        j->t[T_W].used = 1;
        j->t[T_W].rows = 1;
        j->t[T_W].width = j->t[T_W].stride = c->cols;
    }
    if (c->op == OPCHECK_LAYERNORM_BIAS) {
        j->t[T_B].used = 1;
        j->t[T_B].rows = 1;
        j->t[T_B].width = j->t[T_B].stride = c->cols;
    }

    for (i = 0; i < NT; i++) {
        tensor *t = &j->t[i];
        fill_arg fa;
        if (!t->used) continue;
        if (t->stride < t->width) {
            fail_msg(r, "opcheck: invalid case (a stride is shorter than its row)");
            goto fail;
        }
        t->off = (mask & (1u << i)) ? c->offset : 0;
        t->n = t->off + t->rows * t->stride + GUARD;
        if (!(t->init = (uint16_t *)hbuf_get((size_t)t->n * 2)) ||
            !(t->back = (uint16_t *)hbuf_get((size_t)t->n * 2))) {
            fail_msg(r, "opcheck: out of host memory");
            goto fail;
        }
        fa.j = j;
        fa.ti = i;
        parallel_rows(t->rows, t->stride, fill_rows, &fa);
        if ((e = cu.cuMemAlloc(&t->base, (size_t)t->n * 2)) != CUDA_SUCCESS) {
            t->base = 0;
            fail_cu(r, "cuMemAlloc", e);
            goto fail;
        }
    }
    if (norm) {
        int64_t k;
        j->w = (double *)malloc((size_t)c->cols * sizeof(double));
        j->b = (double *)malloc((size_t)c->cols * sizeof(double));
        if (!j->w || !j->b) {
            fail_msg(r, "opcheck: out of host memory");
            goto fail;
        }
        for (k = 0; k < c->cols; k++) {
            j->w[k] = ref_to_f32(c->dtype, j->t[T_W].init[j->t[T_W].off + k]);
            j->b[k] = j->t[T_B].used ? ref_to_f32(c->dtype, j->t[T_B].init[j->t[T_B].off + k]) : 0.0;
        }
    }
    if (opcheck_upload(j)) goto fail;
    return j;
fail:
    opcheck_free(j);
    return NULL;
}

static CUdeviceptr dptr(const opcheck_job *j, int ti) {
    return j->t[ti].base + (CUdeviceptr)(j->t[ti].off * 2);
}

int opcheck_launch(opcheck_job *j, talon_ctx *ctx, CUstream stream) {
    const opcheck_case *c = &j->c;
    talon_status s;
    const char *fn;
    switch (c->op) {
    case OPCHECK_RMSNORM: {
        talon_rmsnorm_args a;
        memset(&a, 0, sizeof a);
        a.in = dptr(j, T_IN);
        a.out = c->in_place ? a.in : dptr(j, T_OUT);
        a.weight = dptr(j, T_W);
        a.rows = c->rows;
        a.cols = c->cols;
        a.in_stride = c->in_stride;
        a.out_stride = c->in_place ? c->in_stride : c->out_stride;
        a.eps = j->eps;
        a.dtype = c->dtype;
        fn = "talon_rmsnorm";
        s = talon_rmsnorm(ctx, stream, &a);
        break;
    }
    case OPCHECK_FUSED_ADD_RMSNORM: {
        talon_fused_add_rmsnorm_args a;
        memset(&a, 0, sizeof a);
        a.in = dptr(j, T_IN);
        a.residual = dptr(j, T_RES);
        a.weight = dptr(j, T_W);
        a.rows = c->rows;
        a.cols = c->cols;
        a.in_stride = c->in_stride;
        a.residual_stride = c->residual_stride;
        a.eps = j->eps;
        a.dtype = c->dtype;
        fn = "talon_fused_add_rmsnorm";
        s = talon_fused_add_rmsnorm(ctx, stream, &a);
        break;
    }
    case OPCHECK_LAYERNORM:
    case OPCHECK_LAYERNORM_BIAS: {
        talon_layernorm_args a;
        memset(&a, 0, sizeof a);
        a.in = dptr(j, T_IN);
        a.out = c->in_place ? a.in : dptr(j, T_OUT);
        a.weight = dptr(j, T_W);
        a.bias = c->op == OPCHECK_LAYERNORM_BIAS ? dptr(j, T_B) : 0;
        a.rows = c->rows;
        a.cols = c->cols;
        a.in_stride = c->in_stride;
        a.out_stride = c->in_place ? c->in_stride : c->out_stride;
        a.eps = j->eps;
        a.dtype = c->dtype;
        fn = "talon_layernorm";
        s = talon_layernorm(ctx, stream, &a);
        break;
    }
    case OPCHECK_SILU: {
        talon_silu_and_mul_args a;
        memset(&a, 0, sizeof a);
        a.in = dptr(j, T_IN);
        a.out = dptr(j, T_OUT);
        a.rows = c->rows;
        a.cols = c->cols;
        a.in_stride = c->in_stride;
        a.out_stride = c->out_stride;
        a.dtype = c->dtype;
        fn = "talon_silu_and_mul";
        s = talon_silu_and_mul(ctx, stream, &a);
        break;
    }
    case OPCHECK_GELU_ERF:
    case OPCHECK_GELU_TANH: {
        talon_gelu_and_mul_args a;
        memset(&a, 0, sizeof a);
        a.in = dptr(j, T_IN);
        a.out = dptr(j, T_OUT);
        a.rows = c->rows;
        a.cols = c->cols;
        a.in_stride = c->in_stride;
        a.out_stride = c->out_stride;
        a.dtype = c->dtype;
        a.approx = c->op == OPCHECK_GELU_TANH ? TALON_GELU_TANH : TALON_GELU_ERF;
        fn = "talon_gelu_and_mul";
        s = talon_gelu_and_mul(ctx, stream, &a);
        break;
    }
    default: return fail_msg(j->r, "opcheck: invalid op");
    }
    if (s != TALON_SUCCESS) {
        if (!j->r->error[0])
            snprintf(j->r->error, sizeof j->r->error, "%s returned %s: %s", fn,
                     talon_status_string(s), talon_last_error());
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- checking */
typedef struct stats {
    int64_t elements, mismatches, corrupted;
    double max_abs, max_rel, max_ulp, max_ratio;
    int found;
    char what[48];
    int64_t row, col;
    uint16_t dev_bits, ref_bits;
    double dev, ref, tol;
} stats;

static void note(stats *st, const char *what, const char *tname, int64_t row, int64_t col,
                 uint16_t dev_bits, uint16_t ref_bits, double dev, double ref, double tol) {
    if (st->found) return;
    st->found = 1;
    snprintf(st->what, sizeof st->what, what, tname);
    st->row = row;
    st->col = col;
    st->dev_bits = dev_bits;
    st->ref_bits = ref_bits;
    st->dev = dev;
    st->ref = ref;
    st->tol = tol;
}

/* Elements [from, to) of tensor t must be as uploaded. */
static void check_same(stats *st, const opcheck_job *j, const tensor *t, int ti, int64_t row,
                       int64_t from, int64_t to, const char *what) {
    int64_t i;
    if (to <= from || !memcmp(t->init + from, t->back + from, (size_t)(to - from) * 2)) return;
    for (i = from; i < to; i++)
        if (t->init[i] != t->back[i]) {
            st->corrupted++;
            note(st, what, tensor_name[ti], row, i - row_start(t, row), t->back[i], t->init[i],
                 ref_to_f32(j->c.dtype, t->back[i]), ref_to_f32(j->c.dtype, t->init[i]), 0.0);
        }
}

/* Everything of row `row` of tensor ti except the data of an output: the sentinel before the
   first row, the padding after the row (the guard after the last), and the row itself for an
   input. */
static void check_row_layout(stats *st, const opcheck_job *j, int ti, int64_t row) {
    const tensor *t = &j->t[ti];
    int64_t s0 = row_start(t, row);
    if (row == 0) check_same(st, j, t, ti, row, 0, s0, "guard before %s");
    if (t->kind == K_INPUT) check_same(st, j, t, ti, row, s0, s0 + t->width, "%s (an input) changed");
    check_same(st, j, t, ti, row, s0 + t->width, row_end(t, row),
               row + 1 < t->rows ? "padding of %s" : "guard after %s");
}

static void compare(stats *st, const opcheck_job *j, int64_t row, const double *ref,
                    const double *mag) {
    const tensor *t = &j->t[j->out];
    const talon_dtype dt = j->c.dtype;
    const double rtol = ref_rtol(dt), atol = ref_atol(dt);
    const uint16_t *d = t->back + row_start(t, row);
    int64_t c;
    for (c = 0; c < j->c.cols; c++) {
        double dev = REF_TO_F32(dt, d[c]), err = fabs(dev - ref[c]);
        double tol = atol + rtol * fabs(ref[c]) + NOISE * mag[c], u;
        if (err != err) err = INFINITY; /* NaN */
        if (err > st->max_abs) st->max_abs = err;
        if (fabs(ref[c]) >= atol && err / fabs(ref[c]) > st->max_rel) st->max_rel = err / fabs(ref[c]);
        if ((u = err / ulp_of(dt, fabs(ref[c]) > atol ? ref[c] : atol)) > st->max_ulp) st->max_ulp = u;
        if (err / tol > st->max_ratio) st->max_ratio = err / tol;
        if (!(err <= tol)) {
            st->mismatches++;
            note(st, "%s", j->out == T_IN ? "in (output, in place)" : "out", row, c, d[c],
                 ref_from_f32(dt, (float)ref[c]), dev, ref[c], tol);
        }
    }
    st->elements += j->c.cols;
}

typedef struct {
    opcheck_job *j;
    stats st[MAX_THREADS];
} check_arg;

static void check_rows(void *p, int64_t r0, int64_t r1, int tid) {
    check_arg *a = (check_arg *)p;
    const opcheck_job *j = a->j;
    const opcheck_case *c = &j->c;
    const talon_dtype dt = c->dtype;
    const int64_t cols = c->cols;
    const tensor *tin = &j->t[T_IN], *tres = &j->t[T_RES];
    stats *st = &a->st[tid];
    double *x = (double *)malloc((size_t)cols * 2 * sizeof(double));
    double *ref = (double *)malloc((size_t)cols * sizeof(double));
    double *mag = (double *)malloc((size_t)cols * sizeof(double));
    uint16_t *rb = (uint16_t *)malloc((size_t)cols * sizeof(uint16_t));
    int64_t r, k;
    if (!x || !ref || !mag || !rb) {
        st->mismatches++;
        note(st, "%s", "opcheck: out of host memory", r0, 0, 0, 0, 0, 0, 0);
        goto done;
    }
    for (r = r0; r < r1; r++) {
        const uint16_t *in = tin->init + row_start(tin, r);
        int ti;
        for (ti = T_IN; ti <= T_RES; ti++)
            if (j->t[ti].used) check_row_layout(st, j, ti, r);

        switch (c->op) {
        case OPCHECK_RMSNORM:
            for (k = 0; k < cols; k++) x[k] = REF_TO_F32(dt, in[k]);
            ref_rmsnorm(x, j->w, ref, 1, cols, j->eps);
            for (k = 0; k < cols; k++) mag[k] = fabs(ref[k]);
            break;
        case OPCHECK_FUSED_ADD_RMSNORM: {
            const uint16_t *res = tres->init + row_start(tres, r);
            const uint16_t *got = tres->back + row_start(tres, r);
            for (k = 0; k < cols; k++) {
                /* fp32 add, one rounding: exactly what the kernel does */
                float sum = REF_TO_F32(dt, in[k]) + REF_TO_F32(dt, res[k]);
                rb[k] = ref_from_f32(dt, sum);
                x[k] = REF_TO_F32(dt, rb[k]);
                if (got[k] != rb[k]) {
                    st->mismatches++;
                    note(st, "%s", "residual (must be exact)", r, k, got[k], rb[k],
                         ref_to_f32(dt, got[k]), x[k], 0.0);
                }
            }
            st->elements += cols;
            ref_rmsnorm(x, j->w, ref, 1, cols, j->eps);
            for (k = 0; k < cols; k++) mag[k] = fabs(ref[k]);
            break;
        }
        case OPCHECK_LAYERNORM:
        case OPCHECK_LAYERNORM_BIAS: {
            double mean = 0, var = 0, rstd;
            for (k = 0; k < cols; k++) x[k] = REF_TO_F32(dt, in[k]);
            ref_layernorm(x, j->w, c->op == OPCHECK_LAYERNORM_BIAS ? j->b : NULL, ref, 1, cols,
                          j->eps);
            for (k = 0; k < cols; k++) mean += x[k];
            mean /= (double)cols;
            for (k = 0; k < cols; k++) var += (x[k] - mean) * (x[k] - mean);
            rstd = 1.0 / sqrt(var / (double)cols + j->eps);
            for (k = 0; k < cols; k++)
                mag[k] = (fabs(x[k]) + fabs(mean)) * rstd * fabs(j->w[k]) + fabs(j->b[k]);
            break;
        }
        default: { /* gated */
            enum ref_act act = c->op == OPCHECK_SILU       ? REF_SILU
                               : c->op == OPCHECK_GELU_ERF ? REF_GELU_ERF
                                                           : REF_GELU_TANH;
            for (k = 0; k < 2 * cols; k++) x[k] = REF_TO_F32(dt, in[k]);
            ref_gated(act, x, ref, 1, cols);
            for (k = 0; k < cols; k++) mag[k] = fabs(x[k] * x[cols + k]);
            break;
        }
        }
        compare(st, j, r, ref, mag);
    }
done:
    free(x);
    free(ref);
    free(mag);
    free(rb);
}

static void merge(opcheck_result *r, const stats *st) {
    r->elements += st->elements;
    r->mismatches += st->mismatches;
    r->corrupted += st->corrupted;
    if (st->max_abs > r->max_abs) r->max_abs = st->max_abs;
    if (st->max_rel > r->max_rel) r->max_rel = st->max_rel;
    if (st->max_ulp > r->max_ulp) r->max_ulp = st->max_ulp;
    if (st->max_ratio > r->max_tol_ratio) r->max_tol_ratio = st->max_ratio;
    if (st->found && !r->first.found) {
        r->first.found = 1;
        memcpy(r->first.what, st->what, sizeof r->first.what);
        r->first.row = st->row;
        r->first.col = st->col;
        r->first.dev_bits = st->dev_bits;
        r->first.ref_bits = st->ref_bits;
        r->first.dev = st->dev;
        r->first.ref = st->ref;
        r->first.tol = st->tol;
    }
}

static void finalize(opcheck_result *r) {
    r->pass = !r->error[0] && r->elements > 0 && r->mismatches == 0 && r->corrupted == 0;
}

int opcheck_check(opcheck_job *j) {
    opcheck_result *r = j->r;
    int64_t before_m = r->mismatches, before_c = r->corrupted;
    check_arg *a;
    stats wst;
    CUresult e;
    int i, n;
    for (i = 0; i < NT; i++)
        if (j->t[i].used &&
            (e = cu.cuMemcpyDtoH(j->t[i].back, j->t[i].base, (size_t)j->t[i].n * 2)) != CUDA_SUCCESS) {
            fail_cu(r, "cuMemcpyDtoH", e);
            finalize(r);
            return -1;
        }
    /* weight and bias: one row each, inputs */
    memset(&wst, 0, sizeof wst);
    for (i = T_W; i <= T_B; i++)
        if (j->t[i].used) check_row_layout(&wst, j, i, 0);
    merge(r, &wst);
    if (!(a = (check_arg *)calloc(1, sizeof *a))) {
        fail_msg(r, "opcheck: out of host memory");
        finalize(r);
        return -1;
    }
    a->j = j;
    n = parallel_rows(j->c.rows, j->t[T_IN].width * 4, check_rows, a);
    for (i = 0; i < n; i++) merge(r, &a->st[i]);
    free(a);
    finalize(r);
    return r->error[0] || r->mismatches != before_m || r->corrupted != before_c ? -1 : 0;
}

/* ---------------------------------------------------------------- whole runs */
static int time_launch(opcheck_job *j, talon_ctx *ctx, CUstream stream) {
    CUevent e0 = NULL, e1 = NULL;
    CUresult e;
    float ms = 0;
    int rc = -1;
    if ((e = cu.cuEventCreate(&e0, CU_EVENT_DEFAULT)) != CUDA_SUCCESS) {
        e0 = NULL;
        fail_cu(j->r, "cuEventCreate", e);
        goto out;
    }
    if ((e = cu.cuEventCreate(&e1, CU_EVENT_DEFAULT)) != CUDA_SUCCESS) {
        e1 = NULL;
        fail_cu(j->r, "cuEventCreate", e);
        goto out;
    }
    if ((e = cu.cuEventRecord(e0, stream)) != CUDA_SUCCESS) {
        fail_cu(j->r, "cuEventRecord", e);
        goto out;
    }
    if (opcheck_launch(j, ctx, stream)) goto out;
    if ((e = cu.cuEventRecord(e1, stream)) != CUDA_SUCCESS) {
        fail_cu(j->r, "cuEventRecord", e);
        goto out;
    }
    if ((e = cu.cuEventSynchronize(e1)) != CUDA_SUCCESS) {
        fail_cu(j->r, "cuEventSynchronize", e);
        goto out;
    }
    if ((e = cu.cuEventElapsedTime(&ms, e0, e1)) != CUDA_SUCCESS) {
        fail_cu(j->r, "cuEventElapsedTime", e);
        goto out;
    }
    j->r->time_us = ms * 1000.0;
    rc = 0;
out:
    if (e0) cu.cuEventDestroy(e0);
    if (e1) cu.cuEventDestroy(e1);
    return rc;
}

int opcheck_run(talon_ctx *ctx, CUstream stream, const opcheck_case *c, opcheck_result *r) {
    opcheck_job *j = opcheck_prepare(c, r);
    CUresult e;
    int rc = -1;
    if (!j) goto out;
    if (opcheck_launch(j, ctx, stream)) goto out;
    if ((e = cu.cuStreamSynchronize(stream)) != CUDA_SUCCESS) {
        fail_cu(r, "cuStreamSynchronize (the kernel)", e);
        goto out;
    }
    rc = opcheck_check(j);
    if (c->timed && time_launch(j, ctx, stream)) rc = -1;
out:
    opcheck_free(j);
    finalize(r);
    return rc || !r->pass ? -1 : 0;
}

int opcheck_run_graph(talon_ctx *ctx, CUstream stream, const opcheck_case *c, int replays,
                      opcheck_result *r) {
    opcheck_job *j = opcheck_prepare(c, r);
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUresult e;
    int rc = -1, launched, i;
    if (!j) goto out;
    if ((e = cu.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL)) != CUDA_SUCCESS) {
        fail_cu(r, "cuStreamBeginCapture", e);
        goto out;
    }
    launched = opcheck_launch(j, ctx, stream); /* recorded, not run */
    if ((e = cu.cuStreamEndCapture(stream, &graph)) != CUDA_SUCCESS) {
        graph = NULL;
        fail_cu(r, "cuStreamEndCapture", e);
        goto out;
    }
    if (launched) goto out;
    if ((e = cu.cuGraphInstantiateWithFlags(&exec, graph, 0)) != CUDA_SUCCESS) {
        exec = NULL;
        fail_cu(r, "cuGraphInstantiateWithFlags", e);
        goto out;
    }
    rc = 0;
    for (i = 0; i < replays; i++) {
        /* fresh inputs (fused_add_rmsnorm works in place) and fresh poison each time */
        if (i > 0 && opcheck_upload(j)) {
            rc = -1;
            break;
        }
        if ((e = cu.cuGraphLaunch(exec, stream)) != CUDA_SUCCESS) {
            fail_cu(r, "cuGraphLaunch", e);
            rc = -1;
            break;
        }
        if ((e = cu.cuStreamSynchronize(stream)) != CUDA_SUCCESS) {
            fail_cu(r, "cuStreamSynchronize (graph replay)", e);
            rc = -1;
            break;
        }
        if (opcheck_check(j)) rc = -1;
    }
out:
    if (exec) cu.cuGraphExecDestroy(exec);
    if (graph) cu.cuGraphDestroy(graph);
    opcheck_free(j);
    finalize(r);
    return rc || !r->pass ? -1 : 0;
}
