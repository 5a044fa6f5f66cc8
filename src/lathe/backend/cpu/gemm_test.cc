// Tests of the CPU gemm against the scalar reference (ref/gemm.h) on every instruction tier this CPU can
// run: all transpose combinations, odd sizes, padded leading dimensions, alpha/beta, skinny M (GEMV)
// and the four dtype pairs (f32 x f32, f32 x bf16, f32 x f16, bf16 x bf16), each with 1 and 2 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "lathe/backend/cpu/gemm.h"
#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/ref/gemm.h"

namespace lathe::cpu {
namespace {

struct Shape {
  int64_t m, n, k;
};

// Odd sizes around the tiles (MR 14/6/4, NR 32/16) and K blocks (384); M <= kGemvMaxM (16) is GEMV, whose
// SIMD kernels take x 4 rows at a time and K in chunks of 256 from M = 5. With 2 threads the shapes with
// M > N split the rows ({20, 17, 3}, {200, 70, 800}, {1030, 97, 40}), the others the columns.
const Shape kShapes[] = {
    {1, 1, 1},     {1, 7, 33},     {2, 33, 7},     {3, 129, 65},   {4, 31, 130},   {1, 1000, 517},
    {5, 17, 3},    {7, 33, 129},   {8, 37, 517},   {13, 64, 385},  {14, 32, 384},  {15, 33, 769},
    {16, 1000, 300}, {17, 33, 129}, {20, 17, 3},   {29, 64, 385},  {33, 7, 1},     {33, 129, 33},
    {129, 1, 129}, {129, 129, 7},  {200, 70, 800}, {1030, 97, 40},
};

inline float to_float(float v) { return v; }
inline float to_float(bf16 v) { return bf16_to_f32(v); }
inline float to_float(f16 v) { return f16_to_f32(v); }

template <class T>
T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, bf16>) return f32_to_bf16(v);
  else return f32_to_f16(v);
}

// rows x cols matrix stored with a padded leading dimension (ld = cols + pad), values in [-1, 1].
template <class T>
std::vector<T> random_matrix(int64_t rows, int64_t ld, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<T> v(static_cast<size_t>(std::max<int64_t>(rows * ld, 1)));
  for (auto& x : v) x = from_float<T>(dist(rng));
  return v;
}

template <class T>
float max_abs(const std::vector<T>& v) {
  float r = 0;
  for (const T& x : v) r = std::max(r, std::fabs(to_float(x)));
  return r;
}

struct Case {
  bool trans_a = false, trans_b = false;
  int64_t pad = 0;  // extra elements per stored row of A, B and C
  float alpha = 1.f, beta = 0.f;
};

template <class TA, class TB>
void check(const GemmKernels& kern, const Shape& s, const Case& cs, int n_threads, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t a_rows = cs.trans_a ? s.k : s.m, a_cols = cs.trans_a ? s.m : s.k;
  const int64_t b_rows = cs.trans_b ? s.n : s.k, b_cols = cs.trans_b ? s.k : s.n;
  const int64_t lda = a_cols + cs.pad, ldb = b_cols + cs.pad, ldc = s.n + cs.pad;
  const auto a = random_matrix<TA>(a_rows, lda, rng);
  const auto b = random_matrix<TB>(b_rows, ldb, rng);
  std::vector<float> c = random_matrix<float>(s.m, ldc, rng);
  // beta == 0 makes C write-only: NaN there must not leak into the result.
  if (cs.beta == 0.f) std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> expect = c;
  ref::gemm(cs.trans_a, cs.trans_b, s.m, s.n, s.k, cs.alpha, a.data(), lda, b.data(), ldb, cs.beta, expect.data(),
            ldc, [](auto v) { return to_float(v); });

  GemmArgs<TA, TB> g{.trans_a = cs.trans_a, .trans_b = cs.trans_b, .m = s.m, .n = s.n, .k = s.k,
                     .a = a.data(), .lda = lda, .b = b.data(), .ldb = ldb, .c = c.data(), .ldc = ldc,
                     .alpha = cs.alpha, .beta = cs.beta};
  ThreadPool pool(n_threads);
  gemm_with(kern, g, pool);

  // Every path multiplies exactly-representable inputs in f32 (bf16 x bf16 products are exact in f32)
  // and sums K products in f32, so the error is f32 summation error: |err| <= 4 * K * eps_f32 * max|a| *
  // max|b| * |alpha| (4: slack over the K-term worst case bound), plus one rounding of beta * C. A bf16
  // epsilon (2^-8) would be loose enough to hide a dropped k pair, so it is not used here.
  const double eps = std::numeric_limits<float>::epsilon();
  const double tol_prod = 4.0 * static_cast<double>(std::max<int64_t>(s.k, 1)) * eps * max_abs(a) * max_abs(b) *
                          std::fabs(cs.alpha);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      const double want = expect[i * ldc + j], got = c[i * ldc + j];
      const double tol = tol_prod + 2 * eps * std::fabs(want) + 1e-30;
      ASSERT_LE(std::fabs(got - want), tol) << "at (" << i << ", " << j << ") of " << s.m << "x" << s.n << "x" << s.k
                                            << " trans_a=" << cs.trans_a << " trans_b=" << cs.trans_b
                                            << " alpha=" << cs.alpha << " beta=" << cs.beta << " threads=" << n_threads;
    }
  // Padding columns of C are never written.
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = s.n; j < ldc; ++j) {
      const float before = expect[i * ldc + j], after = c[i * ldc + j];
      ASSERT_TRUE(std::isnan(before) ? std::isnan(after) : before == after) << "pad column " << j << " written";
    }
}

class GemmTierTest : public ::testing::TestWithParam<GemmIsa> {
 protected:
  void SetUp() override {
    if (GetParam() > gemm_max_supported_isa()) GTEST_SKIP() << "CPU lacks this instruction tier";
  }
  const GemmKernels& kernels() const { return gemm_kernels_for(GetParam()); }

  template <class TA, class TB>
  void run_all(bool small_only) {
    uint32_t seed = 1;
    for (const Shape& s : kShapes) {
      if (small_only && s.m * s.n * s.k > 2'000'000) continue;
      for (int t = 0; t < 4; ++t)
        for (const Case& base : {Case{.pad = 0, .alpha = 1.f, .beta = 0.f}, Case{.pad = 3, .alpha = -0.5f, .beta = 1.5f},
                                 Case{.pad = 17, .alpha = 2.f, .beta = 1.f}}) {
          Case cs = base;
          cs.trans_a = t & 1;
          cs.trans_b = t & 2;
          for (int n_threads : {1, 2}) {
            check<TA, TB>(kernels(), s, cs, n_threads, seed++);
            if (HasFatalFailure()) return;
          }
        }
    }
  }
};

TEST_P(GemmTierTest, F32xF32) { run_all<float, float>(false); }
TEST_P(GemmTierTest, F32xBf16) { run_all<float, bf16>(true); }
TEST_P(GemmTierTest, F32xF16) { run_all<float, f16>(true); }
TEST_P(GemmTierTest, Bf16xBf16) { run_all<bf16, bf16>(true); }

// The skinny-M kernels called directly: M = 1..kGemvMaxM, K around the 16/32-wide vector blocks (odd K leaves a
// masked tail), N not a multiple of the 4-row groups, a padded ldw, W [N, K] (the layout the dispatcher sends
// them), and a column range [j0, j1) inside [0, N): outside it y must stay untouched.
template <class TW>
void check_gemv(const GemmKernels& kern, int m, int64_t n, int64_t k, int64_t pad, int64_t j0, int64_t j1,
                float alpha, float beta, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t ldw = k + pad, ldy = n + 3;
  const auto x = random_matrix<float>(m, k, rng);
  const auto w = random_matrix<TW>(n, ldw, rng);
  std::vector<float> y = random_matrix<float>(m, ldy, rng);
  std::vector<float> expect = y;
  ref::gemm(false, true, m, n, k, alpha, x.data(), k, w.data(), ldw, beta, expect.data(), ldy,
            [](auto v) { return to_float(v); });
  const GemvFn<TW> fn = gemv_for<TW>(kern);
  const std::vector<float> before = y;
  fn(m, k, x.data(), w.data(), ldw, j0, j1, y.data(), ldy, alpha, beta);
  // f32 products of exact inputs summed in f32 in any order: same bound as check() above.
  const double eps = std::numeric_limits<float>::epsilon();
  const double tol_prod = 4.0 * static_cast<double>(k) * eps * max_abs(x) * max_abs(w) * std::fabs(alpha);
  for (int i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldy; ++j) {
      const float got = y[i * ldy + j];
      if (j < j0 || j >= j1) {
        ASSERT_EQ(got, before[i * ldy + j]) << "column " << j << " outside [" << j0 << ", " << j1 << ") written";
        continue;
      }
      const double want = expect[i * ldy + j];
      ASSERT_LE(std::fabs(got - want), tol_prod + 2 * eps * std::fabs(want) + 1e-30)
          << "at (" << i << ", " << j << ") m=" << m << " n=" << n << " k=" << k << " pad=" << pad
          << " j=[" << j0 << ", " << j1 << ") beta=" << beta;
    }
}

TEST_P(GemmTierTest, GemvKernels) {
  uint32_t seed = 100;
  for (int m = 1; m <= kGemvMaxM; ++m)
    for (int64_t k : {1, 15, 31, 32, 33, 64, 95, 517, 2049})
      for (int64_t n : {1, 5, 11, 37})
        for (int64_t pad : {0, 7}) {
          const int64_t j0 = n > 2 ? 1 : 0, j1 = n > 2 ? n - 1 : n;  // an inner range, not group aligned
          const float beta = (seed & 1) ? 0.f : 0.5f;
          check_gemv<float>(kernels(), m, n, k, pad, j0, j1, 1.5f, beta, seed++);
          check_gemv<bf16>(kernels(), m, n, k, pad, j0, j1, 1.5f, beta, seed++);
          check_gemv<f16>(kernels(), m, n, k, pad, j0, j1, 1.5f, beta, seed++);
          if (HasFatalFailure()) return;
        }
  // The multi-pass path of f32 and f16 W: m past kGemvMaxM up to kGemvPassMaxM where k <= kGemvPassMaxK, N = 300
  // at K = 1024 crossing its 64-row blocks of W, passes of 8 rows plus a partial one.
  if (!kernels().gemv_passes) return;
  for (int m : {9, 16, 17, 23, 32, 41, kGemvPassMaxM})
    for (int64_t k : {int64_t{1}, int64_t{33}, int64_t{517}, kGemvPassMaxK})
      for (int64_t n : {5, 37, 300}) {
        const int64_t j0 = 1, j1 = n - 1;
        const float beta = (seed & 1) ? 0.f : 0.5f;
        check_gemv<float>(kernels(), m, n, k, 3, j0, j1, 1.5f, beta, seed++);
        check_gemv<f16>(kernels(), m, n, k, 3, j0, j1, 1.5f, beta, seed++);
        if (HasFatalFailure()) return;
      }
}

// bf16 x bf16 decode (x·Wᵀ) on the tiers with the vdpbf16ps kernel: m = 1..kGemvDotMaxM through the dispatcher
// with 1 and 2 workers (N = 100 splits at K >= 768), odd K (a masked tail ending in a lone pair member),
// K = 768 and 2048 (whole steps; at 2048, m > 8 runs W in blocks of 64 rows), N edges of the 2-, 3- and 4-row
// tiles, beta 0 and 1, alpha != 1. The padding past k of every x and W row is NaN, so a tail
// lane that read it would poison the sum. Each result must also equal the kernel called directly, bit for
// bit: a dispatcher that took the widening path instead would differ in the last bits.
TEST_P(GemmTierTest, Bf16xBf16DecodeDotKernel) {
  const GemmKernels& kern = kernels();
  if (!kern.gemv_nt_dot_bf16) GTEST_SKIP() << "no bf16 dot GEMV on this tier";
  constexpr int64_t kPad = 5;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint32_t seed = 500;
  for (int64_t k : {1, 31, 33, 767, 768, 2048})
    for (int64_t n : {1, 17, 100})
      for (int m = 1; m <= kGemvDotMaxM; ++m)
        for (float beta : {0.f, 1.f})
          for (int n_threads : {1, 2}) {
            std::mt19937 rng(seed++);
            const int64_t ld = k + kPad, ldy = n + 3;
            auto x = random_matrix<bf16>(m, ld, rng);
            auto w = random_matrix<bf16>(n, ld, rng);
            for (auto* v : {&x, &w})
              for (size_t e = 0; e < v->size(); ++e)
                if (static_cast<int64_t>(e) % ld >= k) (*v)[e] = f32_to_bf16(nan);
            const std::vector<float> y0 = random_matrix<float>(m, ldy, rng);
            std::vector<float> expect = y0, got = y0, direct = y0;
            const float alpha = -1.25f;
            ref::gemm(false, true, m, n, k, alpha, x.data(), ld, w.data(), ld, beta, expect.data(), ldy,
                      [](bf16 v) { return bf16_to_f32(v); });
            ThreadPool pool(n_threads);
            gemm_with(kern,
                      GemmArgs<bf16, bf16>{.trans_b = true, .m = m, .n = n, .k = k, .a = x.data(), .lda = ld,
                                           .b = w.data(), .ldb = ld, .c = got.data(), .ldc = ldy, .alpha = alpha,
                                           .beta = beta},
                      pool);
            kern.gemv_nt_dot_bf16(m, k, x.data(), ld, w.data(), ld, 0, n, direct.data(), ldy, alpha, beta);
            // Exact products summed in f32 in another order: check()'s bound, inputs in [-1, 1].
            const double eps = std::numeric_limits<float>::epsilon();
            const double tol_prod = 4.0 * static_cast<double>(k) * eps * std::fabs(alpha);
            for (int i = 0; i < m; ++i)
              for (int64_t j = 0; j < ldy; ++j) {
                const int64_t e = i * ldy + j;
                if (j >= n) {
                  ASSERT_EQ(got[e], y0[e]) << "pad column " << j << " written";
                  continue;
                }
                ASSERT_LE(std::fabs(got[e] - expect[e]), tol_prod + 2 * eps * std::fabs(expect[e]) + 1e-30)
                    << "at (" << i << ", " << j << ") m=" << m << " n=" << n << " k=" << k << " beta=" << beta
                    << " threads=" << n_threads;
                ASSERT_EQ(got[e], direct[e]) << "gemm did not take the dot kernel at (" << i << ", " << j
                                             << ") m=" << m << " n=" << n << " k=" << k;
              }
          }
}

// A row's result does not depend on the other rows of the call (M = 1..kGemvMaxM, the decode path, and up to
// kGemvPassMaxM for f32 / f16 W where the tier's passes take them) nor on
// the thread count: batched decode must give each sequence the logits, hence the tokens, it gets alone.
// Bit for bit, on every dtype pair; K and N cross the 16/32-wide steps, the 256-wide K chunks and the 4- and
// 8-row blocks of W, unevenly. Decode's layout only (W [N, K]): since the skinny path serves a row-major B only
// at M = 1 (gemm.cc), M >= 2 rows against it take the blocked path, whose K blocks sum in another order.
template <class TA, class TB>
void check_rows_independent(const GemmKernels& kern, bool trans_b, uint32_t seed) {
  constexpr int64_t kN = 70, kK = 777;
  // f32 and f16 W at this K take the skinny kernel up to kGemvPassMaxM rows where the tier has the passes.
  const int64_t max_m =
      !std::is_same_v<TB, bf16> && kern.gemv_passes && kK <= kGemvPassMaxK ? kGemvPassMaxM : kGemvMaxM;
  std::mt19937 rng(seed);
  const auto a = random_matrix<TA>(max_m, kK, rng);
  const auto b = random_matrix<TB>(trans_b ? kN : kK, trans_b ? kK : kN, rng);
  const auto run = [&](int64_t m, int64_t row, int n_threads) {
    std::vector<float> c(static_cast<size_t>(m * kN));
    ThreadPool pool(n_threads);
    gemm_with(kern,
              GemmArgs<TA, TB>{.trans_b = trans_b, .m = m, .n = kN, .k = kK, .a = a.data() + row * kK, .lda = kK,
                               .b = b.data(), .ldb = trans_b ? kK : kN, .c = c.data(), .ldc = kN},
              pool);
    return c;
  };
  std::vector<std::vector<float>> alone;
  for (int64_t i = 0; i < max_m; ++i) alone.push_back(run(1, i, 1));
  for (int64_t m = 1; m <= max_m; ++m)
    for (int n_threads : {1, 2}) {
      const std::vector<float> c = run(m, 0, n_threads);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < kN; ++j)
          ASSERT_EQ(c[i * kN + j], alone[i][j]) << "row " << i << " col " << j << " of M = " << m
                                                << " threads=" << n_threads << " trans_b=" << trans_b;
    }
}

TEST_P(GemmTierTest, SkinnyRowsIndependentOfBatch) {
  uint32_t seed = 300;
  check_rows_independent<float, float>(kernels(), /*trans_b=*/true, seed++);
  check_rows_independent<float, bf16>(kernels(), /*trans_b=*/true, seed++);
  check_rows_independent<float, f16>(kernels(), /*trans_b=*/true, seed++);
  check_rows_independent<bf16, bf16>(kernels(), /*trans_b=*/true, seed++);
}

// Paths that only large shapes take, on the fastest tier only (the reference takes ~1 s per product). Two
// workers split the rows when M > N, else the columns, in whole panels; each packs what it needs:
// - rows, many K blocks (260 x 100 x 17000), and A past the 4M-element block limit, so several M blocks
//   per worker (22000 x 40 x 384, A transposed; 11000 x 100 x 384 with 1 worker);
// - columns with an odd panel count (47) and two column chunks per worker over three K blocks
//   (61 x 1500 x 800, both B layouts), and M = N (300 x 300 x 300: columns);
// - 1 and 2 workers on one chunk each (60 x 600 x 5000).
TEST_P(GemmTierTest, LargeShapes) {
  // Every SIMD tier: each has its own packers and blocking (MR/NR); the scalar one would take minutes.
  if (GetParam() == GemmIsa::kScalar) GTEST_SKIP() << "checked on the SIMD tiers";
  struct Run {
    Shape s;
    bool trans_a, trans_b;
    int n_threads;
  };
  uint32_t seed = 100;
  for (const Run& r : {Run{{260, 100, 17000}, false, false, 2}, Run{{22000, 40, 384}, true, false, 2},
                       Run{{11000, 100, 384}, true, true, 1}, Run{{61, 1500, 800}, false, false, 2},
                       Run{{61, 1500, 800}, true, true, 2}, Run{{300, 300, 300}, false, true, 2},
                       Run{{60, 600, 5000}, false, false, 1}, Run{{60, 600, 5000}, false, true, 2}}) {
    check<float, float>(kernels(), r.s,
                        Case{.trans_a = r.trans_a, .trans_b = r.trans_b, .pad = 1, .alpha = 1.f, .beta = 0.5f},
                        r.n_threads, seed++);
    if (HasFatalFailure()) return;
  }
}

// Every finite f16 value (subnormals, signed zeros and 65504 included: 63488 bit patterns) widens exactly,
// on each path that reads f16 weights: the skinny-M kernels of both layouts (M = 16) and the blocked
// path's packers (M = 32, both layouts of B). A = identity picks one weight per output, C[i, j] =
// op(B)[i, j]: the sum of one exact product and zeros, so every output must equal the f16 value exactly.
// (Random values in [-1, 1] never reach the subnormal or the large exponents.)
TEST_P(GemmTierTest, F16WidensEveryFiniteValueExactly) {
  std::vector<f16> values;
  for (uint32_t bits = 0; bits < 0x10000; ++bits)
    if (((bits >> 10) & 0x1f) != 0x1f) values.push_back(f16{static_cast<uint16_t>(bits)});
  ASSERT_EQ(values.size(), 63488u);
  ThreadPool pool(2);
  for (int64_t k : {int64_t{16}, int64_t{32}}) {  // 16: skinny M; 32: blocked
    const int64_t n = static_cast<int64_t>(values.size()) / k;
    std::vector<float> eye(static_cast<size_t>(k * k), 0.f);
    for (int64_t i = 0; i < k; ++i) eye[i * k + i] = 1.f;
    for (bool trans_b : {true, false}) {
      // op(B) [k, n]: element (p, j) is values[p * n + j]; stored [n, k] with trans_b.
      std::vector<f16> b(values.size());
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) b[trans_b ? j * k + p : p * n + j] = values[p * n + j];
      std::vector<float> c(static_cast<size_t>(k * n));
      gemm_with(kernels(),
                GemmArgs<float, f16>{.trans_b = trans_b, .m = k, .n = n, .k = k, .a = eye.data(), .lda = k,
                                     .b = b.data(), .ldb = trans_b ? k : n, .c = c.data(), .ldc = n},
                pool);
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) {
          const f16 v = values[p * n + j];
          ASSERT_EQ(c[p * n + j], f16_to_f32(v)) << "f16 bits 0x" << std::hex << v.bits << std::dec << " m=" << k
                                                 << " trans_b=" << trans_b;
        }
    }
  }
}

// k == 0 or alpha == 0: C = beta * C, with beta == 0 clearing NaN.
TEST_P(GemmTierTest, EmptyProductScalesC) {
  std::vector<float> c = {1.f, 2.f, std::numeric_limits<float>::quiet_NaN(), 4.f};
  const float a = 1.f, b = 1.f;
  ThreadPool pool(1);
  gemm_with(kernels(), GemmArgs<float, float>{.m = 2, .n = 2, .k = 0, .a = &a, .lda = 1, .b = &b, .ldb = 2,
                                              .c = c.data(), .ldc = 2, .beta = 0.f},
            pool);
  for (float v : c) EXPECT_EQ(v, 0.f);
  c = {1.f, 2.f, 3.f, 4.f};
  gemm_with(kernels(), GemmArgs<float, float>{.m = 2, .n = 2, .k = 0, .a = &a, .lda = 1, .b = &b, .ldb = 2,
                                              .c = c.data(), .ldc = 2, .beta = 2.f},
            pool);
  EXPECT_EQ(c, (std::vector<float>{2.f, 4.f, 6.f, 8.f}));
}

std::string tier_name(const ::testing::TestParamInfo<GemmIsa>& info) {
  static const char* kNames[] = {"Scalar", "Avx2", "Avx512", "Avx512Bf16"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Cpu, GemmTierTest,
                         ::testing::Values(GemmIsa::kScalar, GemmIsa::kAvx2, GemmIsa::kAvx512, GemmIsa::kAvx512Bf16),
                         tier_name);

// The public entry point uses the selected tier and names it.
TEST(Gemm, PublicEntryPointMatchesReference) {
  const std::string isa = gemm_isa();
  EXPECT_TRUE(isa == "scalar" || isa == "avx2" || isa == "avx512" || isa == "avx512bf16") << isa;
  std::mt19937 rng(7);
  const int64_t m = 37, n = 45, k = 53;
  const auto a = random_matrix<float>(m, k, rng), b = random_matrix<float>(n, k, rng);
  std::vector<float> c(m * n), expect(m * n);
  ref::gemm(false, true, m, n, k, 1.f, a.data(), k, b.data(), k, 0.f, expect.data(), n, [](float v) { return v; });
  ThreadPool pool(2);
  gemm(GemmArgs<float, float>{.trans_b = true, .m = m, .n = n, .k = k, .a = a.data(), .lda = k, .b = b.data(),
                              .ldb = k, .c = c.data(), .ldc = n},
       pool);
  for (int64_t i = 0; i < m * n; ++i) EXPECT_NEAR(c[i], expect[i], 4 * k * 1.2e-7) << i;
}

}  // namespace
}  // namespace lathe::cpu
