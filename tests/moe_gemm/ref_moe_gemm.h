/* fp64 references of talon_moe_gemm: one sorted slot's output row, and the whole expert
   computation of an MoE layer (gate/up with the gated activation, down, the routing weights,
   the sum over a token's experts). Inputs are exact doubles (the rounded values). */
#ifndef TALON_REF_MOE_GEMM_H
#define TALON_REF_MOE_GEMM_H
#include <stdint.h>
#include "talon.h"

/* The epilogue: act (CLAMPED_SWIGLU with alpha and limit) and the expert's bias row
   ([gated ? 2n : n]; NULL: none). */
typedef struct ref_moe_epi {
    talon_gemm_act act;
    double alpha, limit;
    const double *bias;
} ref_moe_epi;

/* out[j], j < n: act(z_j) (gated: ref_gemm_glu(z_j, z_(n+j))) times weight, z_j = x . w[j] +
   bias[j]; mag[j]: the sum of |terms| it is made of (the scale of its fp32 rounding). x [k];
   w: the expert's rows, [gated ? 2n : n, k] contiguous. */
void ref_moe_gemm_row_epi(const double *x, const double *w, int64_t n, int64_t k, int gated,
                          const ref_moe_epi *epi, double weight, double *out, double *mag);
/* The same without a bias or activation parameters. */
void ref_moe_gemm_row(const double *x, const double *w, int64_t n, int64_t k, int gated,
                      talon_gemm_act act, double weight, double *out, double *mag);

/* The MoE MLP of token t: out[h] = sum_j weights[t, j] * (down[e_j] . glu(gate[e_j] . x +
   b13[e_j, gate], up[e_j] . x + b13[e_j, up]) + b2[e_j, h]) over its slots j with ids[t, j]
   in [0, experts), h < hidden (glu: ref_gemm_glu with act, alpha, limit; b13, b2 NULL: no
   biases); mag[h] the sum of |weight x down x intermediate| terms (the scale of the error
   that rounding the intermediate to 16 bits brings). x: [hidden]; w13: [experts, 2 inter,
   hidden]; w2: [experts, hidden, inter]; b13 [experts, 2 inter]; b2 [experts, hidden];
   ids/weights [tokens, topk]. */
void ref_moe_block_token(const double *x, const double *w13, const double *w2,
                         const double *b13, const double *b2, const int *ids,
                         const float *weights, int64_t t, int64_t topk, int64_t experts,
                         int64_t hidden, int64_t inter, talon_gemm_act act, double alpha,
                         double limit, double *out, double *mag);
#endif
