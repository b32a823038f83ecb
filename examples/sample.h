/* sample.h - top-k sampling of the next token from talon_topk's sorted candidates, on the host
   (a few values per sequence cross the bus; talon has no sampling kernel yet). */
#ifndef TALON_EXAMPLES_SAMPLE_H
#define TALON_EXAMPLES_SAMPLE_H
#include <stdint.h>

/* Draws one of the k candidates (values in descending order, as talon_topk's sorted output,
   ids their token ids) with probability exp(values[i] / temperature), normalised over the k;
   temperature > 0. Non-finite values weigh nothing; if no value is finite, ids[0]. *rng is
   the generator's state (any seed), advanced by one draw. */
int32_t sample_top_k(const float *values, const int32_t *ids, int k, float temperature,
                     uint64_t *rng);

#endif
