/* CPU reference of talon_moe_router_topk; see ref_router.h. The fp32 emulation relies on
   float arithmetic in float (FLT_EVAL_METHOD 0, as on x86-64 and aarch64) and on no
   contraction of a * b + c (every product below stands alone; fused steps call fmaf). */
#include "ref_router.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float f32_of_bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* Cody-Waite reduction, degree-7 Taylor polynomial, two exact scalings: kernels/router/router.cu. */
float ref_router_exp(float d) {
    float n, r, p;
    int ni, h;
    if (isnan(d)) return d;
    d = fminf(fmaxf(d, -104.f), 89.f);
    n = rintf(d * 0x1.715476p+0f);
    r = fmaf(n, -0x1.62e400p-1f, d);
    r = fmaf(n, -0x1.7f7d1cp-20f, r);
    p = 0x1.a01a02p-13f;
    p = fmaf(p, r, 0x1.6c16c2p-10f);
    p = fmaf(p, r, 0x1.111112p-7f);
    p = fmaf(p, r, 0x1.555556p-5f);
    p = fmaf(p, r, 0x1.555556p-3f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.f);
    p = fmaf(p, r, 1.f);
    ni = (int)n;
    h = ni / 2;
    p = p * f32_of_bits((uint32_t)(h + 127) << 23);
    return p * f32_of_bits((uint32_t)(ni - h + 127) << 23);
}

/* Newton's iteration from a bit-trick estimate: kernels/router/router.cu. */
float ref_router_recip(float d) {
    uint32_t u;
    float r;
    if (isnan(d)) return d;
    if (d > 0x1p126f) return 0.f;
    memcpy(&u, &d, 4);
    r = f32_of_bits(0x7ef311c3u - u);
    for (int it = 0; it < 4; it++) r = fmaf(r, fmaf(-d, r, 1.f), r);
    return r;
}

float ref_router_sigmoid(float x) {
    float den = 1.f + ref_router_exp(-x);
    return ref_router_recip(den);
}

/* NaN is the largest value: the max of a row holding one is NaN. */
static float row_max(const float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (isnan(x[i])) return x[i];
        if (x[i] > m) m = x[i];
    }
    return m;
}

void ref_router_keys(const float *x, const float *bias, int experts, int scoring,
                     float *keys) {
    float m = 0.f, inv = 0.f;
    if (!bias) {
        memcpy(keys, x, sizeof(float) * (size_t)experts);
        return;
    }
    if (scoring == 0) {
        m = row_max(x, experts);
        if (isfinite(m)) {
            uint64_t s = 0;
            for (int e = 0; e < experts; e++) {
                float t = ref_router_exp(x[e] - m) * 0x1p53f;
                s += (uint64_t)t;
            }
            {
                float sum = (float)s * 0x1p-53f;
                inv = ref_router_recip(sum);
            }
        } else {
            inv = NAN;
        }
    }
    for (int e = 0; e < experts; e++) {
        float p = scoring == 0 ? ref_router_exp(x[e] - m) * inv : ref_router_sigmoid(x[e]);
        keys[e] = p + bias[e];
    }
}

/* a ranks before b: NaN above every number, -0 == +0, equal keys to the lower index. */
static int ranks_before(float a, int ia, float b, int ib) {
    if (isnan(a) || isnan(b)) return isnan(a) && (!isnan(b) || ia < ib);
    return a > b || (a == b && ia < ib);
}

void ref_moe_router_topk(const float *logits, const float *bias, int64_t tokens, int experts,
                         int k, int scoring, int renormalize, double *weights, int32_t *ids) {
    const size_t n = experts > 0 ? (size_t)experts : 1;
    float *keys = malloc(sizeof(float) * n);
    char *taken = malloc(n);
    for (int64_t t = 0; t < tokens; t++) {
        const float *x = logits + t * experts;
        const float m = row_max(x, experts);
        double sum = 0.0, ksum = 0.0;
        ref_router_keys(x, bias, experts, scoring, keys);
        memset(taken, 0, n);
        if (scoring == 0 && isfinite(m))
            for (int e = 0; e < experts; e++) sum += exp((double)x[e] - (double)m);
        for (int j = 0; j < k; j++) {
            int best = -1;
            double w;
            for (int e = 0; e < experts; e++)
                if (!taken[e] && (best < 0 || ranks_before(keys[e], e, keys[best], best)))
                    best = e;
            taken[best] = 1;
            ids[t * k + j] = best;
            if (scoring == 0)
                w = isfinite(m) ? exp((double)x[best] - (double)m) / sum : NAN;
            else
                w = 1.0 / (1.0 + exp(-(double)x[best]));
            weights[t * k + j] = w;
            ksum += w;
        }
        if (renormalize)
            for (int j = 0; j < k; j++) weights[t * k + j] /= ksum;
    }
    free(keys);
    free(taken);
}
