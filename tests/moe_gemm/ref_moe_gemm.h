/* fp64 references of talon_moe_gemm: one sorted slot's output row, and the whole expert
   computation of an MoE layer (gate/up with the gated activation, down, the routing weights,
   the sum over a token's experts). Inputs are exact doubles (the rounded values). */
#ifndef TALON_REF_MOE_GEMM_H
#define TALON_REF_MOE_GEMM_H
#include <stdint.h>
#include "talon.h"

/* out[j], j < n: act(x . w[j]) (gated: act(x . w[j]) * (x . w[n + j])) times weight; mag[j]:
   the sum of |terms| it is made of (the scale of its fp32 rounding). x [k]; w: the expert's
   rows, [gated ? 2n : n, k] contiguous. */
void ref_moe_gemm_row(const double *x, const double *w, int64_t n, int64_t k, int gated,
                      talon_gemm_act act, double weight, double *out, double *mag);

/* The MoE MLP of token t: out[h] = sum_j weights[t, j] * down[e_j] . (act(gate[e_j] . x) *
   (up[e_j] . x)) over its slots j with ids[t, j] in [0, experts), h < hidden; mag[h] the sum
   of |weight x down x intermediate| terms (the scale of the error that rounding the
   intermediate to 16 bits brings). x: [hidden]; w13: [experts, 2 inter, hidden];
   w2: [experts, hidden, inter]; ids/weights [tokens, topk]. */
void ref_moe_block_token(const double *x, const double *w13, const double *w2, const int *ids,
                         const float *weights, int64_t t, int64_t topk, int64_t experts,
                         int64_t hidden, int64_t inter, talon_gemm_act act, double *out,
                         double *mag);
#endif
