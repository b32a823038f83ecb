/* fp64 CPU references for talon_rope (kv_append's fp8 constants: tests/kv_cache/ref_kv_cache.h). */
#ifndef TALON_TESTS_REF_ROPE_H
#define TALON_TESTS_REF_ROPE_H
#include <stdint.h>

/* cs[i] = cos(pos * theta^(-2i/rot_dim)), cs[rot_dim/2 + i] = sin(...), i < rot_dim/2: the
   cache row talon_rope computes in theta mode, in fp64. */
void ref_rope_theta_row(double *cs, double pos, double theta, int64_t rot_dim);

/* Rotates the first rot_dim elements of one head in place by the row cs (cos then sin of the
   rot_dim/2 pairs): NeoX pairs (i, i + rot_dim/2), GPT-J (2i, 2i + 1). */
void ref_rope_head(double *x, int64_t rot_dim, int gptj, const double *cs);
#endif
