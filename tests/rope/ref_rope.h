/* fp64 CPU references for talon_rope and talon_kv_append's fp8 constants (the e4m3 conversion
   is in ref.h). */
#ifndef TALON_TESTS_REF_ROPE_H
#define TALON_TESTS_REF_ROPE_H
#include <stdint.h>

/* cs[i] = cos(pos * theta^(-2i/rot_dim)), cs[rot_dim/2 + i] = sin(...), i < rot_dim/2: the
   cache row talon_rope computes in theta mode, in fp64. */
void ref_rope_theta_row(double *cs, double pos, double theta, int64_t rot_dim);

/* Rotates the first rot_dim elements of one head in place by the row cs (cos then sin of the
   rot_dim/2 pairs): NeoX pairs (i, i + rot_dim/2), GPT-J (2i, 2i + 1). */
void ref_rope_head(double *x, int64_t rot_dim, int gptj, const double *cs);

/* talon_kv_append's fp8 division x / s = (x q[0]) / q[1]: q[0] = 2^k and q[1] = s 2^k, in
   [1, 2) unless k is clamped to [-126, 127] to keep q[0] a normal float; q[2] = 1 / q[1]
   rounded to nearest. Written from frexp, independently of the header's bit operations. */
void ref_fp8_quant(float s, float q[3]);
#endif
