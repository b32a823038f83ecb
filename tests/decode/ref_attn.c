/* fp64 attention references; see ref_attn.h. */
#include "ref_attn.h"
#include <math.h>

double ref_attn_decode(const double *q, const float *const *k, const float *const *v, int64_t n,
                       int64_t d, double sm_scale, double cap, double k_scale, double v_scale,
                       double *o, double *mag, double *smax) {
    return ref_attn_dv(q, k, v, n, d, d, sm_scale, cap, k_scale, v_scale, o, mag, smax);
}

double ref_attn_dv(const double *q, const float *const *k, const float *const *v, int64_t n,
                   int64_t d, int64_t dv, double sm_scale, double cap, double k_scale,
                   double v_scale, double *o, double *mag, double *smax) {
    double mx = -INFINITY, sum = 0, sm = 0;
    int64_t t, i;
    for (i = 0; i < dv; i++) {
        o[i] = 0;
        if (mag) mag[i] = 0;
    }
    if (smax) *smax = 0;
    if (n == 0) return -INFINITY;
    /* two passes over the keys: max score, then weights (scores recomputed, not stored) */
    for (t = 0; t < n; t++) {
        double s = 0;
        for (i = 0; i < d; i++) s += q[i] * (double)k[t][i];
        s *= sm_scale * k_scale;
        if (cap > 0) s = cap * tanh(s / cap);
        if (s > mx) mx = s;
        if (fabs(s) > sm) sm = fabs(s);
    }
    for (t = 0; t < n; t++) {
        double s = 0, w;
        for (i = 0; i < d; i++) s += q[i] * (double)k[t][i];
        s *= sm_scale * k_scale;
        if (cap > 0) s = cap * tanh(s / cap);
        w = exp(s - mx);
        sum += w;
        for (i = 0; i < dv; i++) {
            o[i] += w * v_scale * (double)v[t][i];
            if (mag) mag[i] += w * fabs(v_scale * (double)v[t][i]);
        }
    }
    for (i = 0; i < dv; i++) {
        o[i] /= sum;
        if (mag) mag[i] /= sum;
    }
    if (smax) *smax = sm;
    return mx + log(sum);
}

double ref_attn_merge(const double *oa, double lse_a, const double *ob, double lse_b, int64_t d,
                      double *o) {
    const double m = lse_a > lse_b ? lse_a : lse_b;
    double wa, wb, lse;
    int64_t i;
    if (m == -INFINITY) {
        for (i = 0; i < d; i++) o[i] = 0;
        return -INFINITY;
    }
    wa = exp(lse_a - m);
    wb = exp(lse_b - m);
    lse = m + log(wa + wb);
    for (i = 0; i < d; i++) o[i] = (wa * oa[i] + wb * ob[i]) / (wa + wb);
    return lse;
}
