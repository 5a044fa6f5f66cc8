// Branch-free f32 exp / tanh / erfc / sigmoid that GCC inlines and vectorises inside `#pragma omp simd`
// loops (libm's expf does not vectorise without -ffast-math). Accuracy is of the order of PyTorch's own
// vectorised CPU math (Sleef u10): exp < 1 ulp, tanh < 5 ulp, erfc below (measured over dense grids).
// Internal to the op kernels; candidates for backend/cpu/ once per-target code moves there.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace lathe::vec {

// c ? a : b as a bit blend. GCC keeps a ?: whose arm computes something as a branch (with trapping math
// it may not run the arm's arithmetic on lanes that did not ask for it) and then vectorises the loop only
// with AVX-512 masks: under AVX2 the whole loop stayed scalar. A blend of two computed values always
// vectorises (vpblendvb), and gives the same bits.
inline float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// exp(x) = 2^n · exp(r), n = round(x·log2 e), r = x − n·ln 2 split in two (Cody-Waite) so r is exact;
// exp(r) by Cephes expf's degree-6 polynomial. 2^n is applied in two halves so results down to the
// denormal range (x ≈ −104) and up to FLT_MAX come out right without a branch.
inline float exp(float x) {
  constexpr float kHi = 88.72283935546875f;  // largest x with a finite exp in f32
  constexpr float kLo = -104.f;              // exp rounds to 0 below this
  const float x_lo = select(x < kLo, kLo, x);
  const float xc = select(x_lo > kHi, kHi, x_lo);
  // Round to nearest via the 1.5·2^23 trick (no libm call, vectorises).
  const float nf = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;
  float r = std::fma(nf, -0.693359375f, xc);
  r = std::fma(nf, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p * r, r, r) + 1.f;
  const int32_t n = static_cast<int32_t>(nf);
  const int32_t n1 = n >> 1, n2 = n - n1;  // each in [-75, 64]: a normal power of two
  const float s1 = std::bit_cast<float>((n1 + 127) << 23), s2 = std::bit_cast<float>((n2 + 127) << 23);
  const float y = p * s1 * s2;
  return select(x > kHi, INFINITY, select(x != x, x, y));
}

// tanh(x): odd rational minimax p(x)/q(x) of degrees 13/6 (Eigen / XLA / MLAS), clamped at ±9 as MLAS
// does: there it evaluates to exactly ±1, as the correctly rounded tanh does from 9.01 on (Eigen's ±7.905
// clamp would leave 1 − 2.7e-7, and derivatives 1 − tanh² that never reach 0). Odd, so small |x| keeps full relative accuracy (no 1 − 2/(e^2x + 1) cancel).
inline float tanh(float x) {
  const float x_lo = select(x < -9.f, -9.f, x);
  const float xc = select(x_lo > 9.f, 9.f, x_lo);
  const float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = std::fma(p, x2, 2.00018790482477e-13f);
  p = std::fma(p, x2, -8.60467152213735e-11f);
  p = std::fma(p, x2, 5.12229709037114e-08f);
  p = std::fma(p, x2, 1.48572235717979e-05f);
  p = std::fma(p, x2, 6.37261928875436e-04f);
  p = std::fma(p, x2, 4.89352455891786e-03f);
  float q = 1.19825839466702e-06f;
  q = std::fma(q, x2, 1.18534705686654e-04f);
  q = std::fma(q, x2, 2.26843463243900e-03f);
  q = std::fma(q, x2, 4.89352518554385e-03f);
  const float y = xc * p / q;
  return select(x != x, x, y);
}

// sigmoid(x) = 1 / (1 + exp(−x)), the form torch uses; exp(−x) = inf gives 0 exactly.
inline float sigmoid(float x) { return 1.f / (1.f + vec::exp(-x)); }

// erfc(x) by Numerical Recipes' Chebyshev fit "erfcc" (fit error < 1.2e-7 relative on the whole line):
// relative, not absolute, accuracy in the tail is what keeps GELU of large negative inputs correct. The
// exponent −z² + p is carried in f32, adding ≈ z²·2⁻²³ relative (1e-6 at |x| = 4, 4e-6 at |x| = 9).
inline float erfc(float x) {
  const float z = std::fabs(x);
  const float t = 1.f / std::fma(0.5f, z, 1.f);
  float p = 0.17087277f;
  p = std::fma(p, t, -0.82215223f);
  p = std::fma(p, t, 1.48851587f);
  p = std::fma(p, t, -1.13520398f);
  p = std::fma(p, t, 0.27886807f);
  p = std::fma(p, t, -0.18628806f);
  p = std::fma(p, t, 0.09678418f);
  p = std::fma(p, t, 0.37409196f);
  p = std::fma(p, t, 1.00002368f);
  p = std::fma(p, t, -1.26551223f);
  const float r = t * vec::exp(std::fma(-z, z, p));
  return select(x >= 0.f, r, 2.f - r);
}

}  // namespace lathe::vec
