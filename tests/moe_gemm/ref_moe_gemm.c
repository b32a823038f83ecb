/* fp64 references of talon_moe_gemm; see ref_moe_gemm.h. */
#include "ref_moe_gemm.h"
#include <math.h>
#include <stdlib.h>
#include "ref.h"

static double dot(const double *x, const double *w, int64_t k, double *mag) {
    double s = 0.0, m = 0.0;
    int64_t i;
    for (i = 0; i < k; i++) {
        s += x[i] * w[i];
        m += fabs(x[i] * w[i]);
    }
    *mag = m;
    return s;
}

void ref_moe_gemm_row_epi(const double *x, const double *w, int64_t n, int64_t k, int gated,
                          const ref_moe_epi *epi, double weight, double *out, double *mag) {
    int64_t j;
    for (j = 0; j < n; j++) {
        double mg, mu, g = dot(x, w + j * k, k, &mg) + (epi->bias ? epi->bias[j] : 0.0), y;
        if (gated) {
            const double u = dot(x, w + (n + j) * k, k, &mu) + (epi->bias ? epi->bias[n + j] : 0.0);
            /* the gate's error through act (slope <= 1.2) times |up| (CLAMPED_SWIGLU: |clamped
               up + 1|), and the up's times |act(gate)| */
            const double uf = epi->act == TALON_GEMM_ACT_CLAMPED_SWIGLU
                                  ? fabs((u < -epi->limit ? -epi->limit : u > epi->limit ? epi->limit : u) + 1.0)
                                  : fabs(u);
            const double ag = epi->act == TALON_GEMM_ACT_CLAMPED_SWIGLU
                                  ? ref_gemm_glu(epi->act, g, 0.0, epi->alpha, epi->limit)
                                  : ref_gemm_act(epi->act, g);
            y = ref_gemm_glu(epi->act, g, u, epi->alpha, epi->limit);
            mg = 1.2 * mg * uf + mu * fabs(ag) + mg * mu;
        } else {
            y = ref_gemm_act(epi->act, g);
        }
        out[j] = y * weight;
        mag[j] = mg * fabs(weight);
    }
}

void ref_moe_gemm_row(const double *x, const double *w, int64_t n, int64_t k, int gated,
                      talon_gemm_act act, double weight, double *out, double *mag) {
    const ref_moe_epi epi = {act, 0.0, 0.0, NULL};
    ref_moe_gemm_row_epi(x, w, n, k, gated, &epi, weight, out, mag);
}

void ref_moe_block_token(const double *x, const double *w13, const double *w2,
                         const double *b13, const double *b2, const int *ids,
                         const float *weights, int64_t t, int64_t topk, int64_t experts,
                         int64_t hidden, int64_t inter, talon_gemm_act act, double alpha,
                         double limit, double *out, double *mag) {
    double *h = malloc((size_t)inter * sizeof(double)), *hm = malloc((size_t)inter * sizeof(double));
    int64_t j, i, c;
    for (c = 0; c < hidden; c++) out[c] = mag[c] = 0.0;
    for (j = 0; h && hm && j < topk; j++) {
        const int e = ids[t * topk + j];
        const double w = weights[t * topk + j];
        ref_moe_epi epi = {act, alpha, limit, NULL};
        if (e < 0 || e >= experts) continue;
        if (b13) epi.bias = b13 + (int64_t)e * 2 * inter;
        ref_moe_gemm_row_epi(x, w13 + (int64_t)e * 2 * inter * hidden, inter, hidden, 1, &epi, 1.0,
                             h, hm);
        for (c = 0; c < hidden; c++) {
            const double *row = w2 + ((int64_t)e * hidden + c) * inter;
            double s = b2 ? b2[(int64_t)e * hidden + c] : 0.0, m = 0.0;
            for (i = 0; i < inter; i++) {
                s += row[i] * h[i];
                m += fabs(row[i]) * (fabs(h[i]) + hm[i]);
            }
            out[c] += w * s;
            mag[c] += fabs(w) * m;
        }
    }
    free(h);
    free(hm);
}
