/* See ref_kv_cache.h. */
#include "ref_kv_cache.h"
#include <math.h>

void ref_fp8_quant(float s, float q[3]) {
    int e, k;
    (void)frexp(s, &e); /* s = f 2^e, f in [0.5, 1) */
    k = 1 - e < -126 ? -126 : 1 - e > 127 ? 127 : 1 - e;
    q[0] = (float)ldexp(1.0, k);
    q[1] = (float)ldexp(s, k);
    q[2] = (float)(1.0 / q[1]);
}
