/* kernels/vexpf.h — rp_vexpf, exp(x) in float written so that a loop
 * calling it vectorises (no libm call, no branch): the CPU GPT kernels'
 * hot loops (GELU, the causal softmax, cross-entropy) call it in place of
 * expf, which glibc only vectorises under -ffast-math.
 *
 * Cody-Waite range reduction x = n ln2 + r, |r| <= ln2 / 2, n rounded to
 * nearest by the 1.5 * 2^23 trick; exp(r) by Cephes' degree-6 polynomial
 * (relative error about 2e-7, within 2 ulp of expf); 2^n built in the
 * exponent bits of two factors. x > 88.72 gives +inf, x < -87.33 gives 0
 * (results that would be subnormal are flushed to 0), NaN gives NaN. Pure IEEE
 * float operations in a fixed order (the project compiles C11, no FMA
 * contraction): the vector and scalar forms give the same bits, so
 * results do not depend on where a loop's vector part ends. */
#ifndef RP_KERNELS_VEXPF_H
#define RP_KERNELS_VEXPF_H

#include <stdint.h>
#include <string.h>

/* RP_VEC_DISPATCH(name, body, params, args) defines void name params,
 * which runs the static inline void body(args). On x86-64 with GCC, body is
 * also compiled for AVX2 (8 floats a vector instead of SSE2's 4), taken
 * where the CPU has it. Both copies are flattened: body and every static
 * helper it calls are inlined into each, so no helper is left as one
 * shared SSE2 function that the AVX2 copy calls (a row helper kept out of
 * line ran LayerNorm at 2.6x the time). AVX2 alone brings no FMA and the
 * project compiles C11 (no contraction), so both copies perform the same
 * IEEE operations: the same bits on every x86-64 CPU. */
/* rp__vec_plain = 1 runs the plain copy on any CPU: the tests compare the
 * two copies' bits (defined in kernels/cpu_kernels.c; change it only
 * while no kernel runs). */
extern int rp__vec_plain;

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define RP_VEC_DISPATCH(name, body, params, args)                              \
  __attribute__((target("avx2"), flatten)) static void name##_avx2 params {    \
    body args;                                                                 \
  }                                                                            \
  __attribute__((flatten)) void name params {                                  \
    if (!rp__vec_plain && __builtin_cpu_supports("avx2"))                      \
      name##_avx2 args;                                                        \
    else                                                                       \
      body args;                                                               \
  }
#else
#define RP_VEC_DISPATCH(name, body, params, args)                              \
  void name params {                                                           \
    body args;                                                                 \
  }
#endif

/* ln(FLT_MAX) and ln(FLT_MIN), rounded to float */
#define RP_VEXPF_HI 88.72283935546875f
#define RP_VEXPF_LO -87.33654022216797f

/* quiet comparisons (isgreater, isless): no invalid-operation trap on NaN,
 * so the compiler may turn the selects into vector blends */
static inline float rp_vexpf(float x) {
  float xc = __builtin_isgreater(x, RP_VEXPF_HI) ? RP_VEXPF_HI : x;
  xc = __builtin_isless(xc, RP_VEXPF_LO) ? RP_VEXPF_LO : xc;
  /* NaN: computed as 0 (its result is x itself, below), so that n stays
   * a small whole number: the int conversion and the shifts are defined */
  xc = __builtin_isunordered(x, x) ? 0.0f : xc;
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * (r * r) + r + 1.0f;
  /* 2^n as 2^(n >> 1) 2^(n - (n >> 1)): n reaches 128 */
  int32_t ni = (int32_t)n, n1 = ni >> 1;
  int32_t e1 = (n1 + 127) << 23, e2 = (ni - n1 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &e1, sizeof s1);
  memcpy(&s2, &e2, sizeof s2);
  y = y * s1 * s2;
  y = __builtin_isgreater(x, RP_VEXPF_HI) ? __builtin_inff() : y;
  y = __builtin_isless(x, RP_VEXPF_LO) ? 0.0f : y;
  return x != x ? x : y;
}

#endif
