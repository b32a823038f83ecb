/* fp64 CPU reference for talon_kv_append's fp8 constants (the e4m3 conversion is in ref.h). */
#ifndef TALON_TESTS_REF_KV_CACHE_H
#define TALON_TESTS_REF_KV_CACHE_H

/* talon_kv_append's fp8 division x / s = (x q[0]) / q[1]: q[0] = 2^k and q[1] = s 2^k, in
   [1, 2) unless k is clamped to [-126, 127] to keep q[0] a normal float; q[2] = 1 / q[1]
   rounded to nearest. Written from frexp, independently of the header's bit operations. */
void ref_fp8_quant(float s, float q[3]);
#endif
