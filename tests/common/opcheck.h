/* Run one talon op on the GPU and compare every output element with the fp64 CPU reference
   (tests/common/ref.h), for the GPU tests and talon-info. Needs gpu_open() to have succeeded (it uses
   the driver table `cu` from tests/common/gpu.h) and the context current on the calling thread.

   What one check covers:
   - inputs drawn at random (reproducibly from the seed), quantised to bf16/f16 on the host;
     the reference is computed from exactly those quantised values;
   - every tensor lives in its own allocation laid out with its row stride and pointer offset;
     everything outside the rows (row padding, the elements before the pointer and a guard
     after the last row) holds a sentinel that must be unchanged afterwards, and inputs must
     be unchanged bit for bit;
   - outputs are poisoned with 0xFFFF (NaN in both types) before every launch, so an element
     the kernel never writes fails;
   - each output element passes when |dev - ref| <= atol + rtol |ref| + noise, NaN never:
       rtol = 2^-7 (bf16) or 2^-10 (f16): one unit in the last place of the output type,
       twice the half unit that a correctly rounded result can be off by;
       atol = 1e-5 (bf16) or 1e-6 (f16): subnormal outputs (f16) and tiny results;
       noise = 2^-18 * m, where m bounds what fp32 evaluation can lose to cancellation:
         layernorm: m = (|x| + |mean|) * rstd * |w| + |b| (the row mean is an fp32 sum);
         gated ops: m = |gate * up| (1 + erf(x) cancels for negative x); rmsnorm: m = |ref|.
       2^-18 is 64 fp32 units, about 4e-6 relative to m: far below one bf16/f16 unit,
       so it cannot hide a wrong rounding, a missing term or a wrong element.
   - fused_add_rmsnorm: the residual output must equal round(float(in) + float(residual))
     bit for bit (the add is done in fp32 and rounded once, as the kernel does), and the
     normalised output is checked against ref_rmsnorm of that rounded residual. */
#ifndef TALON_TESTS_OPCHECK_H
#define TALON_TESTS_OPCHECK_H
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>
#include "talon.h"

typedef enum opcheck_op {
    OPCHECK_RMSNORM,
    OPCHECK_FUSED_ADD_RMSNORM,
    OPCHECK_LAYERNORM,      /* without bias */
    OPCHECK_LAYERNORM_BIAS, /* with bias */
    OPCHECK_SILU,           /* talon_silu_and_mul */
    OPCHECK_GELU_ERF,       /* talon_gelu_and_mul, TALON_GELU_ERF */
    OPCHECK_GELU_TANH,      /* talon_gelu_and_mul, TALON_GELU_TANH */
    OPCHECK_NUM_OPS
} opcheck_op;

/* Tensors of a case, for offset_mask. OUT does not exist for fused_add_rmsnorm (in place) or
   with in_place; RESIDUAL only for fused_add_rmsnorm; WEIGHT only for norms; BIAS only for
   OPCHECK_LAYERNORM_BIAS. */
enum {
    OPCHECK_T_IN = 1,
    OPCHECK_T_OUT = 2,
    OPCHECK_T_RESIDUAL = 4,
    OPCHECK_T_WEIGHT = 8,
    OPCHECK_T_BIAS = 16,
    OPCHECK_T_ALL = 31
};

typedef struct opcheck_case {
    opcheck_op op;
    talon_dtype dtype;        /* TALON_DTYPE_BF16 or TALON_DTYPE_F16 */
    int64_t rows;
    int64_t cols;             /* row length of a norm; output cols of a gated op (in has 2x) */
    int64_t in_stride;        /* passed to talon as given: 0 = contiguous */
    int64_t out_stride;       /* ignored with in_place and for fused_add_rmsnorm */
    int64_t residual_stride;  /* fused_add_rmsnorm only */
    int64_t offset;           /* elements added to the pointers picked by offset_mask; an odd
                                 offset misaligns them and forces the element-wise path */
    unsigned offset_mask;     /* OPCHECK_T_* bits; 0 means every tensor */
    int in_place;             /* rmsnorm and layernorm: out = in (same stride) */
    float eps;                /* 0 picks 1e-6 (rmsnorms) or 1e-5 (layernorms) */
    uint64_t seed;            /* the inputs depend only on seed, op, dtype, row and column */
    int timed;                /* opcheck_run: after the check, time a second launch */
} opcheck_case;

typedef struct opcheck_result {
    int pass;                 /* 1: launched, no mismatch, nothing outside the outputs touched */
    int64_t elements;         /* output elements compared (summed over replays) */
    int64_t mismatches;       /* output elements out of tolerance (NaN included) */
    int64_t corrupted;        /* sentinel, padding or input elements that changed */
    double max_abs;           /* max |dev - ref| */
    double max_rel;           /* max |dev - ref| / |ref| over |ref| >= atol */
    double max_ulp;           /* max |dev - ref| in units in the last place of the output
                                 type at ref (at atol for smaller |ref|) */
    double max_tol_ratio;     /* max |dev - ref| / tolerance: < 1 passes */
    struct {                  /* the first problem found, in tensor row order */
        int found;
        char what[48];        /* "out", "in (normalised)", "residual", "padding of out", ... */
        int64_t row, col;     /* col: element index from the row start (may be in padding) */
        uint16_t dev_bits, ref_bits; /* ref_bits: expected bits where exact, else rounded ref */
        double dev, ref, tol;
    } first;
    double time_us;           /* timed: CUDA events around the second launch */
    char error[512];          /* a talon or driver call that failed; "" otherwise */
} opcheck_result;

const char *opcheck_op_name(opcheck_op op);   /* "rmsnorm", "gelu_tanh_and_mul", ... */
const char *opcheck_dtype_name(talon_dtype t); /* "bf16", "f16" */
int opcheck_op_is_norm(opcheck_op op);

/* One line describing a case or a result (snprintf semantics). */
int opcheck_describe(const opcheck_case *c, char *buf, size_t len);
int opcheck_format(const opcheck_result *r, char *buf, size_t len);

/* Checks one launch on stream: prepare, launch, synchronise, check, free. Returns 0 on pass.
   With c->timed, r->time_us is the duration of a second launch (after the check). */
int opcheck_run(talon_ctx *ctx, CUstream stream, const opcheck_case *c, opcheck_result *r);

/* Captures the op on stream (which must not be the legacy stream 0) into a CUDA graph
   (CU_STREAM_CAPTURE_MODE_GLOBAL), instantiates it and replays it `replays` times, each time
   on fresh inputs and freshly poisoned outputs, checking after each replay. Returns 0 on pass. */
int opcheck_run_graph(talon_ctx *ctx, CUstream stream, const opcheck_case *c, int replays,
                      opcheck_result *r);

/* The same in steps, to have several cases in flight on several streams at once:
     j = opcheck_prepare(c, r)      host data, device buffers, upload (synchronous); NULL on
                                    failure (r->error says why)
     opcheck_launch(j, ctx, s)      one asynchronous launch; 0 or -1
     ...synchronise s...
     opcheck_check(j)               download and compare, accumulating into r; 0 on pass
     opcheck_free(j)
   opcheck_upload(j) restores the inputs and the poison (for another launch). r must outlive j. */
typedef struct opcheck_job opcheck_job;
opcheck_job *opcheck_prepare(const opcheck_case *c, opcheck_result *r);
int opcheck_upload(opcheck_job *j);
int opcheck_launch(opcheck_job *j, talon_ctx *ctx, CUstream stream);
int opcheck_check(opcheck_job *j);
void opcheck_free(opcheck_job *j);

/* Frees cached host buffers (optional, at exit). */
void opcheck_cleanup(void);
#endif
