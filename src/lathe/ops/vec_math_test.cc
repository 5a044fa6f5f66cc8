// vec::exp / tanh / erfc inside `#pragma omp simd` loops (the way the kernels call them, vectorised on
// every ISA since the selects are bit blends) against libm in double, specials included.
#include "lathe/ops/vec_math.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

namespace lathe {
namespace {

// A dense grid over [lo, hi] plus the special values.
std::vector<float> inputs(float lo, float hi) {
  std::vector<float> x;
  for (int i = 0; i <= 20000; ++i) x.push_back(lo + (hi - lo) * static_cast<float>(i) / 20000.f);
  for (float s : {0.f, -0.f, 1e-30f, -1e-30f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN}) x.push_back(s);
  return x;
}

// |got − want| within `rel` of |want| (or `abs_tol` near 0); NaN where want is NaN; infinities exact.
void expect_close(float x, float got, double want, double rel, double abs_tol) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << "x = " << x;
  } else if (std::isinf(want) || want == 0.0) {
    EXPECT_EQ(static_cast<double>(got), want) << "x = " << x;
  } else {
    EXPECT_NEAR(got, want, std::max(rel * std::fabs(want), abs_tol)) << "x = " << x;
  }
}

TEST(VecMath, ExpInSimdLoop) {
  const std::vector<float> x = inputs(-110.f, 95.f);
  std::vector<float> y(x.size());
#pragma omp simd
  for (size_t i = 0; i < x.size(); ++i) y[i] = vec::exp(x[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    double want = std::exp(static_cast<double>(x[i]));
    if (x[i] < -104.f) want = 0.0;  // documented: exp rounds to 0 below −104
    if (want > FLT_MAX) want = INFINITY;
    // Denormal results carry fewer bits: an absolute bound of a few denormal ulps there.
    expect_close(x[i], y[i], want, 3e-7, 4e-45);
    const float scalar = vec::exp(x[i]);
    if (std::isnan(scalar)) EXPECT_TRUE(std::isnan(y[i])) << "x = " << x[i];
    else EXPECT_EQ(y[i], scalar) << "simd and scalar differ at x = " << x[i];
  }
}

TEST(VecMath, TanhInSimdLoop) {
  const std::vector<float> x = inputs(-12.f, 12.f);
  std::vector<float> y(x.size());
#pragma omp simd
  for (size_t i = 0; i < x.size(); ++i) y[i] = vec::tanh(x[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::fabs(x[i]) >= 9.f ? std::copysign(1.0, x[i]) : std::tanh(static_cast<double>(x[i]));
    expect_close(x[i], y[i], want, 6e-7, 1e-37);
  }
}

TEST(VecMath, ErfcInSimdLoop) {
  const std::vector<float> x = inputs(-9.f, 9.f);
  std::vector<float> y(x.size());
#pragma omp simd
  for (size_t i = 0; i < x.size(); ++i) y[i] = vec::erfc(x[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isinf(x[i]) || std::fabs(x[i]) == FLT_MAX) continue;  // outside the fit's documented range
    const double want = std::erfc(static_cast<double>(x[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    EXPECT_NEAR(y[i], want, 5e-6 * want + 1e-38) << "x = " << x[i];
  }
}

}  // namespace
}  // namespace lathe
