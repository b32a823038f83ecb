/* CPU reference for talon_topk; see ref_topk.h. */
#include "ref_topk.h"
#include <math.h>
#include <stdlib.h>

int ref_topk_before(const float *x, int64_t i, int64_t j) {
    const int ni = isnan(x[i]) != 0, nj = isnan(x[j]) != 0;
    if (ni != nj) return ni;
    if (!ni && x[i] != x[j]) return x[i] > x[j];
    return i < j;
}

/* qsort has no context argument: the row being sorted is passed through a thread-local. */
static _Thread_local const float *ref_topk_x;

static int ref_topk_cmp(const void *a, const void *b) {
    const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (i == j) return 0;
    return ref_topk_before(ref_topk_x, i, j) ? -1 : 1;
}

void ref_topk_row(const float *x, int64_t n, int64_t k, int32_t *idx) {
    int32_t *all = (int32_t *)malloc((size_t)n * sizeof *all);
    int64_t i;
    if (!all) abort();
    for (i = 0; i < n; i++) all[i] = (int32_t)i;
    ref_topk_x = x;
    qsort(all, (size_t)n, sizeof *all, ref_topk_cmp);
    for (i = 0; i < k; i++) idx[i] = all[i];
    free(all);
}
