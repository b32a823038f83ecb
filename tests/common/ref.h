/* fp64 CPU references for talon's ops, and host bf16/f16/e4m3 conversion (round to nearest even).
   Arrays are contiguous row-major doubles; callers handle strides and element types. */
#ifndef TALON_TESTS_REF_H
#define TALON_TESTS_REF_H
#include <stdint.h>
#include "talon.h"

/* splitmix64: the one generator for tests and benchmarks. ref_mix64 hashes a value,
   ref_next64 steps *state, ref_unit01 draws uniformly from [0, 1) with 24 bits. */
uint64_t ref_mix64(uint64_t z);
uint64_t ref_next64(uint64_t *state);
float ref_unit01(uint64_t *state);

uint16_t ref_from_f32(talon_dtype t, float x); /* bf16 or f16 bits of x, rounded */
float ref_to_f32(talon_dtype t, uint16_t bits);  /* exact */
/* ref_to_f32 of every 16-bit pattern, for checks that convert millions of elements: call
   ref_f32_table_init() (thread-safe, idempotent) once, then REF_TO_F32(t, bits). */
extern float ref_f32_table[2][65536];
void ref_f32_table_init(void);
#define REF_TO_F32(t, bits) (ref_f32_table[(t) == TALON_DTYPE_F16][(bits)])
/* The GPU tests' tolerance for a bf16/f16 output element, |dev - ref| <= atol + rtol |ref|:
   rtol one unit in the last place, atol for tiny results (tests/common/opcheck.h says why). */
double ref_rtol(talon_dtype t);
double ref_atol(talon_dtype t);

/* fp8 e4m3 bits of x, bit-exact with the device's cvt.rn.satfinite (__nv_cvt_float_to_fp8(x,
   __NV_SATFINITE, __NV_E4M3)): round to nearest even, |x| > 464 (and +-inf) saturate to +-448,
   NaN -> 0x7f, magnitudes <= 2^-10 -> signed zero. */
uint8_t ref_e4m3_from_f32(float x);
double ref_e4m3_to_f64(uint8_t bits); /* exact; NaN for 0x7f / 0xff */

void ref_rmsnorm(const double *in, const double *w, double *out, int64_t rows, int64_t cols,
                 double eps);
void ref_layernorm(const double *in, const double *w, const double *bias /* may be NULL */,
                   double *out, int64_t rows, int64_t cols, double eps);

enum ref_act { REF_SILU, REF_GELU_ERF, REF_GELU_TANH };
double ref_act(enum ref_act act, double x);
/* in [rows, 2*cols] -> out [rows, cols] */
void ref_gated(enum ref_act act, const double *in, double *out, int64_t rows, int64_t cols);
/* talon_gemm_act (the GEMM families' activations) of x */
double ref_gemm_act(talon_gemm_act act, double x);
/* gated: act(g) u, or TALON_GEMM_ACT_CLAMPED_SWIGLU's rule with alpha and limit */
double ref_gemm_glu(talon_gemm_act act, double g, double u, double alpha, double limit);
#endif
