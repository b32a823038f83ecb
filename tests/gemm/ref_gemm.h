/* fp64 CPU reference of talon_gemm (tests/gemm/): one output row at a time, so the GPU test
   can check every row of small problems and sampled rows of large ones. */
#ifndef TALON_TESTS_REF_GEMM_H
#define TALON_TESTS_REF_GEMM_H
#include <stdint.h>
#include "talon.h"

/* The operands as exact doubles (the rounded inputs), contiguous: a [m, k], b [n or 2n, k],
   bias [n or 2n] or NULL, c [m, n] or NULL; fp8: a_scale [m] and b_scale [n or 2n] (a
   per-tensor scale repeated), NULL for 16-bit inputs; block scales (block = 1): a_scale
   [m, kb] and b_scale [ceil(rows of b / 128), kb], kb = ceil(k / 128). */
typedef struct ref_gemm_problem {
    int64_t m, n, k;
    const double *a, *b, *bias, *c;
    double alpha, beta;
    talon_gemm_act act;
    int gated;
    const double *a_scale, *b_scale;
    int block;
} ref_gemm_problem;

/* out[j] = row i of D (n values); mag[j] = the magnitude the result is made of (sums of
   |products| and |bias| through the epilogue, plus |beta c|), the scale of its rounding
   error in fp32. peak (NULL: not wanted): the same with each product sum's magnitude
   replaced by the largest |partial sum| at its k-steps of 32 (or its end), times the steps
   (block scales: per 128 of k, each block's own partial sums, scaled): the scale of the error
   of an accumulator that loses a bounded fraction of itself per step (the fp8 tensor-core
   instructions). */
void ref_gemm_row(const ref_gemm_problem *p, int64_t i, double *out, double *mag, double *peak);
#endif
