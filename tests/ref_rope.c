/* See ref_rope.h. */
#include "ref_rope.h"
#include <math.h>
#include <string.h>

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

uint8_t ref_fp8_e4m3_from_f32(float x) {
    uint32_t u, m, rest, r;
    uint8_t sign;
    float a = fabsf(x);
    memcpy(&u, &x, 4);
    sign = (uint8_t)((u >> 24) & 0x80);
    if (isnan(x)) return 0x7f;                      /* cvt.rn.satfinite: the canonical NaN */
    if (a > 464.0f) return (uint8_t)(sign | 0x7e);  /* 464 itself is a tie that keeps 448 */
    if (a < 0x1p-6f)                                /* subnormal: multiples of 2^-9, exact */
        return (uint8_t)(sign | (uint8_t)nearbyintf(a * 512.0f)); /* ties to even; 8 = 2^-6 */
    m = u & 0x7fffff;
    r = ((((u >> 23) & 0xff) - 127 + 7) << 3) | (m >> 20);
    rest = m & 0xfffff;
    if (rest > 0x80000 || (rest == 0x80000 && (r & 1))) r++; /* a carry bumps the exponent */
    return (uint8_t)(sign | r);
}

double ref_fp8_e4m3_to_f64(uint8_t b) {
    const int e = (b >> 3) & 15, m = b & 7;
    const double s = (b & 0x80) ? -1.0 : 1.0;
    if (e == 15 && m == 7) return NAN;
    if (e == 0) return s * m * 0x1p-9;
    return s * (1.0 + m / 8.0) * ldexp(1.0, e - 7);
}

void ref_fp8_quant(float s, float q[3]) {
    int e, k;
    (void)frexp(s, &e); /* s = f 2^e, f in [0.5, 1) */
    k = 1 - e < -126 ? -126 : 1 - e > 127 ? 127 : 1 - e;
    q[0] = (float)ldexp(1.0, k);
    q[1] = (float)ldexp(s, k);
    q[2] = (float)(1.0 / q[1]);
}
