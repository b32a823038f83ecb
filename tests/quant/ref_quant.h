/* CPU reference of talon_quant_fp8 (tests/quant/): bit-exact with the kernels. */
#ifndef TALON_TESTS_REF_QUANT_H
#define TALON_TESTS_REF_QUANT_H
#include <stdint.h>

/* max |x[i]| over n values, a NaN never winning (fmaxf) */
float ref_quant_amax(const float *x, int64_t n);
/* the dynamic scale of values whose largest magnitude is amax: max(amax / 448, 2^-126) */
float ref_quant_scale(float amax);
/* q[i] = e4m3(x[i] / s): the fp32 quotient, rounded to e4m3 with saturation */
void ref_quant_e4m3(const float *x, int64_t n, float s, uint8_t *q);
#endif
