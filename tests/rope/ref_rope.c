/* See ref_rope.h. */
#include "ref_rope.h"
#include <math.h>

void ref_rope_theta_row(double *cs, double pos, double theta, int64_t rot_dim) {
    const int64_t half = rot_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        const double a = pos * pow(theta, -2.0 * (double)i / (double)rot_dim);
        cs[i] = cos(a);
        cs[half + i] = sin(a);
    }
}

void ref_rope_head(double *x, int64_t rot_dim, int gptj, const double *cs) {
    const int64_t half = rot_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        double *px = gptj ? &x[2 * i] : &x[i], *py = gptj ? &x[2 * i + 1] : &x[half + i];
        const double c = cs[i], s = cs[half + i], x0 = *px, y0 = *py;
        *px = x0 * c - y0 * s;
        *py = y0 * c + x0 * s;
    }
}
