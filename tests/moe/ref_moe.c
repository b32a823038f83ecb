/* See ref_moe.h. */
#include "ref_moe.h"
#include <math.h>
#include <stdlib.h>

int ref_moe_align(const int32_t *topk_ids, int64_t tokens, int64_t k, int64_t experts,
                  int64_t block_size, int32_t *sorted, int64_t sorted_capacity,
                  int32_t *expert_ids, int64_t expert_ids_capacity, int32_t *num_post) {
    const int64_t n = tokens * k;
    int64_t *start = (int64_t *)calloc((size_t)experts + 1, sizeof *start);
    int64_t *next = (int64_t *)calloc((size_t)experts, sizeof *next);
    int64_t e, i, total;
    int rc = -1;
    if (!start || !next) goto done;
    for (i = 0; i < n; i++)
        if (topk_ids[i] >= 0 && topk_ids[i] < experts) next[topk_ids[i]]++;
    for (e = 0; e < experts; e++)
        start[e + 1] = start[e] + (next[e] + block_size - 1) / block_size * block_size;
    total = start[experts];
    if (total > sorted_capacity || total / block_size > expert_ids_capacity) goto done;
    for (i = 0; i < sorted_capacity; i++) sorted[i] = (int32_t)n;
    for (e = 0; e < experts; e++) next[e] = start[e];
    for (i = 0; i < n; i++) /* ascending i: the order inside each group */
        if (topk_ids[i] >= 0 && topk_ids[i] < experts) sorted[next[topk_ids[i]]++] = (int32_t)i;
    for (i = 0; i < expert_ids_capacity; i++) expert_ids[i] = -1;
    for (e = 0; e < experts; e++)
        for (i = start[e]; i < start[e + 1]; i += block_size) expert_ids[i / block_size] = (int32_t)e;
    *num_post = (int32_t)total;
    rc = 0;
done:
    free(start);
    free(next);
    return rc;
}

void ref_moe_sum(const double *x, const double *w, double *out, double *mag, int64_t tokens,
                 int64_t k, int64_t hidden) {
    int64_t t, j, h;
    for (t = 0; t < tokens; t++)
        for (h = 0; h < hidden; h++) {
            double s = 0, m = 0;
            for (j = 0; j < k; j++) {
                const double v = (w ? w[t * k + j] : 1.0) * x[(t * k + j) * hidden + h];
                s += v;
                m += fabs(v);
            }
            out[t * hidden + h] = s;
            if (mag) mag[t * hidden + h] = m;
        }
}
