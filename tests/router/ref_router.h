/* CPU reference of talon_moe_router_topk (see talon.h). The ids are derived exactly as the
   kernel derives them: the selection keys repeat its fp32 operations (kernels/router/router.cu), so
   they are bit-identical, and the ranking rule is applied to them independently. The weights
   are computed in fp64 from the same fp32 logits. */
#ifndef TALON_TESTS_REF_ROUTER_H
#define TALON_TESTS_REF_ROUTER_H
#include <stdint.h>

/* The kernel's fp32 exp, reciprocal (of d >= 1) and sigmoid, bit for bit. */
float ref_router_exp(float d);
float ref_router_recip(float d);
float ref_router_sigmoid(float x);

/* The fp32 selection values of one row of `experts` logits: the logits themselves without a
   bias; score + bias[e] with one (softmax: exp(x - m) * (1 / S), S summed in 53-bit fixed
   point; a row with a non-finite max gives NaN scores). */
void ref_router_keys(const float *logits, const float *bias /* may be NULL */, int experts,
                     int scoring /* 0 softmax, 1 sigmoid */, float *keys);

/* logits: [tokens, experts] contiguous fp32 (values already quantised to the input type);
   bias: [experts] or NULL. Writes ids [tokens, k] and fp64 weights [tokens, k]. */
void ref_moe_router_topk(const float *logits, const float *bias, int64_t tokens, int experts,
                         int k, int scoring, int renormalize, double *weights, int32_t *ids);
#endif
