/* sample.c - see sample.h. */
#include "sample.h"
#include <math.h>

/* splitmix64: a 64-bit state, one step per draw */
static uint64_t next64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int32_t sample_top_k(const float *values, const int32_t *ids, int k, float temperature,
                     uint64_t *rng) {
    double total = 0, u, top = -HUGE_VAL;
    int i;
    for (i = 0; i < k; i++) /* the largest finite value: the others' weights are relative to it */
        if (isfinite(values[i]) && values[i] > top) top = values[i];
    u = (double)(next64(rng) >> 11) * 0x1p-53; /* [0, 1) */
    if (top == -HUGE_VAL) return ids[0];
    for (i = 0; i < k; i++)
        if (isfinite(values[i])) total += exp(((double)values[i] - top) / temperature);
    u *= total;
    for (i = 0; i < k; i++) {
        double w;
        if (!isfinite(values[i])) continue;
        w = exp(((double)values[i] - top) / temperature);
        if (u < w) return ids[i];
        u -= w;
    }
    for (i = k - 1; i > 0 && !isfinite(values[i]); i--) {} /* rounding left u at the end */
    return ids[i];
}
