/* fp64 references for decode attention and the merge of attention states (the fp8 e4m3
   conversion is in ref.h). */
#ifndef TALON_TESTS_REF_ATTN_H
#define TALON_TESTS_REF_ATTN_H
#include <stdint.h>

/* One query row against n keys (the attended ones, in order): k[t], v[t] point at d floats
   (the cache element values; the real value is element * k_scale / v_scale).
     s_t = sm_scale * k_scale * (q . k[t]);  s_t = cap * tanh(s_t / cap) when cap > 0
     o = sum_t softmax(s)_t * v_scale * v[t];  returns lse = ln sum_t exp(s_t)
   n = 0 gives o = 0 and -inf. If mag is not NULL, mag[i] = sum_t softmax(s)_t |v_scale v[t][i]|
   (the scale of the cancellation an fp32 evaluation of o[i] can suffer); if smax is not NULL it
   gets max_t |s_t|. */
double ref_attn_decode(const double *q, const float *const *k, const float *const *v, int64_t n,
                       int64_t d, double sm_scale, double cap, double k_scale, double v_scale,
                       double *o, double *mag, double *smax);
/* The same with v[t] (and o, mag) of dv floats, q and k[t] of d (q/k 192 with v 128). */
double ref_attn_dv(const double *q, const float *const *k, const float *const *v, int64_t n,
                   int64_t d, int64_t dv, double sm_scale, double cap, double k_scale,
                   double v_scale, double *o, double *mag, double *smax);

/* lse = ln(exp(lse_a) + exp(lse_b)), o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b; both
   -inf gives o = 0, lse = -inf. Returns lse. */
double ref_attn_merge(const double *oa, double lse_a, const double *ob, double lse_b, int64_t d,
                      double *o);
#endif
