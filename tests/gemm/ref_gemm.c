/* fp64 reference of talon_gemm; see ref_gemm.h. */
#include "ref_gemm.h"
#include <math.h>
#include <stddef.h>
#include "ref.h"

/* alpha * dot(a row i, b row r) (fp8: times the rows' scales, or each 128 of k times its
   blocks' scales) + bias[r], its magnitude and its peak (ref_gemm.h) */
static double pre(const ref_gemm_problem *p, int64_t i, int64_t r, double *mag, double *peak) {
    const double *a = p->a + i * p->k, *b = p->b + r * p->k;
    const int64_t kb = (p->k + 127) / 128;
    double s = 0.0, m = 0.0, top = 0.0, scale = p->alpha;
    int64_t g, t;
    if (p->a_scale && !p->block) scale *= p->a_scale[i] * p->b_scale[r];
    for (g = 0; g < kb; g++) { /* per 128 of k: its sum, magnitude and largest partial sum */
        const double bs = p->block ? p->a_scale[i * kb + g] * p->b_scale[(r / 128) * kb + g] : 1.0;
        double sg = 0.0, mg = 0.0, tg = 0.0;
        for (t = 128 * g; t < p->k && t < 128 * (g + 1); t++) {
            sg += a[t] * b[t];
            mg += fabs(a[t] * b[t]);
            if ((t + 1) % 32 == 0 || t + 1 == p->k) tg = fmax(tg, fabs(p->block ? sg : s + sg));
        }
        s += bs * sg;
        m += fabs(bs) * mg;
        top = p->block ? top + fabs(bs) * tg * 4.0 : fmax(top, tg);
    }
    s *= scale;
    m *= fabs(scale);
    top *= fabs(scale) * (p->block ? 1.0 : (double)((p->k + 31) / 32));
    if (p->bias) {
        s += p->bias[r];
        m += fabs(p->bias[r]);
        top += fabs(p->bias[r]);
    }
    *mag = m;
    *peak = top;
    return s;
}

void ref_gemm_row(const ref_gemm_problem *p, int64_t i, double *out, double *mag, double *peak) {
    int64_t j;
    for (j = 0; j < p->n; j++) {
        double mg, pk, y = ref_gemm_act(p->act, pre(p, i, j, &mg, &pk));
        if (p->gated) {
            double mu, pu, u = pre(p, i, p->n + j, &mu, &pu);
            /* the error of act(g) * u: |act'| <= 1.13 on both factors' errors */
            mg = mg * (fabs(u) + mu) + mu * fabs(y);
            pk = pk * (fabs(u) + pu) + pu * fabs(y);
            y *= u;
        }
        if (p->c) {
            y += p->beta * p->c[i * p->n + j];
            mg += fabs(p->beta * p->c[i * p->n + j]);
            pk += fabs(p->beta * p->c[i * p->n + j]);
        }
        out[j] = y;
        mag[j] = mg;
        if (peak) peak[j] = pk;
    }
}
