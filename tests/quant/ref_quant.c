/* CPU reference of talon_quant_fp8; see ref_quant.h. */
#include "ref_quant.h"
#include <math.h>
#include "ref.h"

float ref_quant_amax(const float *x, int64_t n) {
    float m = 0.f;
    int64_t i;
    for (i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

float ref_quant_scale(float amax) {
    const float s = amax / 448.f;
    return fmaxf(s, 0x1p-126f);
}

void ref_quant_e4m3(const float *x, int64_t n, float s, uint8_t *q) {
    int64_t i;
    for (i = 0; i < n; i++) q[i] = ref_e4m3_from_f32(x[i] / s);
}
