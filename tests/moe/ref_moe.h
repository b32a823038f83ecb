/* CPU references for the mixture-of-experts ops (talon_moe_align_block_size, talon_moe_sum). */
#ifndef TALON_TESTS_REF_MOE_H
#define TALON_TESTS_REF_MOE_H
#include <stdint.h>

/* The full contract of talon_moe_align_block_size (see talon.h), written the plain way: a
   stable counting sort of the valid flat indices by expert. Writes every element of
   sorted[sorted_capacity] and expert_ids[expert_ids_capacity] and *num_post; the capacities
   must cover the worst case. Returns 0, or -1 when a capacity is too small. */
int ref_moe_align(const int32_t *topk_ids, int64_t tokens, int64_t k, int64_t experts,
                  int64_t block_size, int32_t *sorted, int64_t sorted_capacity,
                  int32_t *expert_ids, int64_t expert_ids_capacity, int32_t *num_post);

/* out[t, h] = sum_j w[t, j] * x[t, j, h] in fp64 (w NULL: weight 1); mag (may be NULL)
   receives sum_j |w[t, j] * x[t, j, h]|, the scale of the fp32 accumulation error. */
void ref_moe_sum(const double *x, const double *w, double *out, double *mag, int64_t tokens,
                 int64_t k, int64_t hidden);
#endif
