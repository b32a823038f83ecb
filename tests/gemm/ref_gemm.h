/* fp64 CPU reference of talon_gemm (tests/gemm/): one output row at a time, so the GPU test
   can check every row of small problems and sampled rows of large ones. */
#ifndef TALON_TESTS_REF_GEMM_H
#define TALON_TESTS_REF_GEMM_H
#include <stdint.h>
#include "talon.h"

/* The operands as exact doubles (the rounded inputs), contiguous: a [m, k], b [n or 2n, k],
   bias [n or 2n] or NULL, c [m, n] or NULL. */
typedef struct ref_gemm_problem {
    int64_t m, n, k;
    const double *a, *b, *bias, *c;
    double alpha, beta;
    talon_gemm_act act;
    int gated;
} ref_gemm_problem;

double ref_gemm_act(talon_gemm_act act, double x);

/* out[j] = row i of D (n values); mag[j] = the magnitude the result is made of (sums of
   |products| and |bias| through the epilogue, plus |beta c|), the scale of its rounding
   error in fp32. */
void ref_gemm_row(const ref_gemm_problem *p, int64_t i, double *out, double *mag);
#endif
