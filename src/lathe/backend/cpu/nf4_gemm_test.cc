// Tests of NF4 (specs/posttrain.md §3.3): the scalar reference (ref/nf4.h) against the definition restated
// independently here (nearest code by argmin, ties to the lower code; the reciprocal for full blocks and a division for
// the short last one; offset, 8-bit dynamic codes and nested absmax of the statistics), on odd sizes and edge blocks;
// then the NF4 kernels of every instruction tier this CPU runs against the reference matmul, and the input gradient
// through a frozen NF4 weight.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/ref/nf4.h"

namespace lathe::cpu {
namespace {

// The definition: the index of the nearest code value (first on a tie), scanning every entry.
int nearest(const float *code, int n, float s) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (std::fabs(s - code[i]) < std::fabs(s - code[best])) best = i;
  return best;
}

struct Expected {
  std::vector<int> q;
  std::vector<float> absmax;
};

Expected define_blockwise(const std::vector<float> &x, int64_t bs, const float *code, int ncode) {
  Expected e;
  const int64_t n = static_cast<int64_t>(x.size());
  for (int64_t b0 = 0; b0 < n; b0 += bs) {
    const int64_t len = std::min(bs, n - b0);
    float amax = 0.f;
    for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[b0 + i]));
    const float c = std::max(amax, 1e-38f);
    e.absmax.push_back(len == bs ? amax : c);
    for (int64_t i = 0; i < len; ++i) {
      float s = len == bs ? x[b0 + i] * (1.f / c) : x[b0 + i] / c;
      s = std::min(1.f, std::max(-1.f, s));
      e.q.push_back(nearest(code, ncode, s));
    }
  }
  return e;
}

// Weights with the edge blocks in them: a block of zeros, a block of equal values, a block whose largest magnitude is
// negative, and (n not a multiple of the blocksize) a short last block.
std::vector<float> edge_weights(int64_t n, int64_t bs, std::mt19937 &rng) {
  std::normal_distribution<float> dist(0.f, 0.05f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float &v : x) v = dist(rng);
  for (int64_t i = 0; i < std::min(n, bs); ++i) x[i] = 0.f;
  for (int64_t i = bs; i < std::min(n, 2 * bs); ++i) x[i] = 0.0375f;
  if (n > 3 * bs) x[2 * bs + 5] = -0.5f;
  return x;
}

TEST(Nf4Ref, CodesAndStatisticsFollowTheDefinition) {
  std::mt19937 rng(17);
  for (int64_t bs : {32, 64, 128})
    for (int64_t n : {1, 7, 63, 64, 65, 1000, 3 * 64 * 256 + 17, 64 * 513}) {
      const std::vector<float> x = edge_weights(n, bs, rng);
      const ref::Nf4Quantized r = ref::nf4_quantize(x.data(), n, bs);
      const Expected e = define_blockwise(x, bs, ref::kNf4Code, 16);
      ASSERT_EQ(r.absmax.size(), e.absmax.size());
      for (size_t b = 0; b < e.absmax.size(); ++b) ASSERT_EQ(r.absmax[b], e.absmax[b]) << "block " << b;
      ASSERT_EQ(r.packed.size(), static_cast<size_t>((n + 1) / 2));
      for (int64_t p = 0; p < n; ++p) ASSERT_EQ(ref::nf4_code(r.packed.data(), p), e.q[p]) << "n " << n << " at " << p;
      if (n % 2) {
        EXPECT_EQ(r.packed.back() & 15, 7) << "an odd count pads with 0.0 (code 7)";
      }
      // Double quantisation: offset = mean(absmax); (absmax − offset) blockwise in 256s on the dynamic map.
      double sum = 0.0;
      for (float a : e.absmax) sum += a;
      const float offset = static_cast<float>(sum / static_cast<double>(e.absmax.size()));
      ASSERT_EQ(r.offset, offset);
      std::vector<float> centred;
      for (float a : e.absmax) centred.push_back(a - offset);
      const Expected e2 = define_blockwise(centred, 256, ref::kDynamicMap8, 256);
      ASSERT_EQ(r.nested_absmax, e2.absmax);
      for (size_t b = 0; b < e2.q.size(); ++b) {
        ASSERT_EQ(r.absmax_codes[b], e2.q[b]) << "absmax code " << b;
        const float used = ref::kDynamicMap8[e2.q[b]] * e2.absmax[b / 256];
        ASSERT_EQ(r.absmax_used[b], used + offset);
      }
    }
}

TEST(Nf4Ref, EdgeBlocks) {
  std::mt19937 rng(3);
  const int64_t bs = 64, n = 64 * 4 + 9;
  const std::vector<float> x = edge_weights(n, bs, rng);
  const ref::Nf4Quantized r = ref::nf4_quantize(x.data(), n, bs);
  for (int64_t p = 0; p < bs; ++p) EXPECT_EQ(ref::nf4_code(r.packed.data(), p), 7) << "zeros take code 7 (0.0)";
  EXPECT_EQ(r.absmax[0], 0.f);
  for (int64_t p = bs; p < 2 * bs; ++p) EXPECT_EQ(ref::nf4_code(r.packed.data(), p), 15) << "equal values: 1.0";
  EXPECT_EQ(r.absmax[1], 0.0375f);
  EXPECT_EQ(ref::nf4_code(r.packed.data(), 2 * bs + 5), 0) << "a negative maximum takes -1.0";
  EXPECT_EQ(r.absmax[2], 0.5f);
  float amax = 0.f;
  for (int64_t p = 4 * bs; p < n; ++p) amax = std::max(amax, std::fabs(x[p]));
  EXPECT_EQ(r.absmax[4], amax) << "the short last block has its own absmax";
  // High nibble first: byte i = (q[2i] << 4) | q[2i + 1].
  for (int64_t i = 0; i < n / 2; ++i)
    EXPECT_EQ(r.packed[i], (ref::nf4_code(r.packed.data(), 2 * i) << 4) | ref::nf4_code(r.packed.data(), 2 * i + 1));
  EXPECT_EQ(r.packed[bs / 2], 0xff);
}

// Dequantised weights are within half the widest gap of the code (0.32·absmax / 2) of the originals, plus the double
// quantisation's error on the absmax (a step of the dynamic map near 1: 1/64 of nested_absmax), which NF4 accepts.
TEST(Nf4Ref, DequantisedWithinTheCodesError) {
  std::mt19937 rng(5);
  const int64_t n = 64 * 300 + 31;
  const std::vector<float> x = edge_weights(n, 64, rng);
  const ref::Nf4Quantized r = ref::nf4_quantize(x.data(), n, 64);
  for (int64_t p = 0; p < n; ++p) {
    const int64_t b = p / 64;
    const float got = ref::nf4_dequantize_at(r.packed.data(), r.absmax_used.data(), 64, p);
    const float tol = 0.17f * r.absmax[b] + r.nested_absmax[b / 256] / 64.f + 1e-6f;
    ASSERT_LE(std::fabs(got - x[p]), tol) << "at " << p;
  }
}

class Nf4GemmTierTest : public ::testing::TestWithParam<CpuTier> {
 protected:
  void SetUp() override {
    if (GetParam() > cpu_max_tier()) GTEST_SKIP() << "CPU lacks this instruction tier";
  }
};

struct Nf4Packed {
  int64_t n, k, bs;
  ref::Nf4Quantized q;
  QuantMatrix view() const {
    return {{QuantFormat::kNf4, bs}, n, k, q.packed.data(), nullptr, nullptr, q.absmax_used.data()};
  }
};

Nf4Packed pack(int64_t n, int64_t k, int64_t bs, std::mt19937 &rng) {
  std::normal_distribution<float> dist(0.f, 0.05f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (float &v : w) v = dist(rng);
  return {n, k, bs, ref::nf4_quantize(w.data(), n * k, bs)};
}

std::vector<float> random_x(int64_t m, int64_t k, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float &v : x) v = dist(rng);
  return x;
}

// Each output against the double-precision reference: the dequantised weights are the same f32 values, so f32 sums in
// any order are within K·2^-23·Σ|x·w| of it.
TEST_P(Nf4GemmTierTest, MatchesReference) {
  struct Shape {
    int64_t n, k, bs;
  };
  // k a multiple of the blocksize (the SIMD kernels) and not (rows straddling blocks and bytes: scalar).
  const Shape shapes[] = {{1, 64, 64},   {3, 128, 64}, {37, 192, 64}, {130, 256, 128},
                          {5, 4096, 64}, {9, 96, 64},  {7, 33, 32},   {6, 256, 32}};
  constexpr int64_t kMaxM = kQuantGemvMaxM + 1;
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2)};
  std::mt19937 rng(9);
  for (const Shape &sh : shapes) {
    const Nf4Packed p = pack(sh.n, sh.k, sh.bs, rng);
    const std::vector<float> x = random_x(kMaxM, sh.k, rng);
    const std::vector<float> bias = random_x(kMaxM, sh.n, rng);
    std::vector<float> expect(static_cast<size_t>(kMaxM * sh.n)), expect_acc = bias;
    ref::nf4_matmul(kMaxM, sh.n, sh.k, x.data(), sh.k, p.q.packed.data(), p.q.absmax_used.data(), sh.bs, expect.data(),
                    sh.n, false);
    ref::nf4_matmul(kMaxM, sh.n, sh.k, x.data(), sh.k, p.q.packed.data(), p.q.absmax_used.data(), sh.bs,
                    expect_acc.data(), sh.n, true);
    std::vector<double> mag(static_cast<size_t>(kMaxM * sh.n), 0.0);
    for (int64_t j = 0; j < sh.n; ++j)
      for (int64_t i = 0; i < kMaxM; ++i)
        for (int64_t c = 0; c < sh.k; ++c)
          mag[i * sh.n + j] +=
              std::fabs(double(x[i * sh.k + c]) *
                        ref::nf4_dequantize_at(p.q.packed.data(), p.q.absmax_used.data(), sh.bs, j * sh.k + c));
    for (int64_t m = 1; m <= kMaxM; ++m)
      for (const ThreadPool &pool : pools)
        for (bool acc : {false, true}) {
          std::vector<float> y = acc ? bias : std::vector<float>(static_cast<size_t>(kMaxM * sh.n), NAN);
          quant_gemm_with(GetParam(), m, x.data(), sh.k, p.view(), y.data(), sh.n, acc, pool);
          for (int64_t i = 0; i < kMaxM; ++i)
            for (int64_t j = 0; j < sh.n; ++j) {
              const size_t at = static_cast<size_t>(i * sh.n + j);
              if (i >= m) {
                if (acc)
                  ASSERT_EQ(y[at], bias[at]);
                else
                  ASSERT_TRUE(std::isnan(y[at]));
                continue;
              }
              const double want = acc ? expect_acc[at] : expect[at];
              const double tol = 2.0 * sh.k * std::ldexp(1.0, -24) * (mag[at] + (acc ? std::fabs(bias[at]) : 0.0));
              ASSERT_NEAR(y[at], want, tol + 1e-30) << "n " << sh.n << " k " << sh.k << " bs " << sh.bs << " m " << m
                                                    << " acc " << acc << " at (" << i << ", " << j << ")";
            }
        }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, Nf4GemmTierTest, ::testing::Values(CpuTier::kScalar, CpuTier::kAvx2, CpuTier::kAvx512),
                         [](const auto &info) { return std::string(cpu_tier_name(info.param)); });

// dx = dy · deq(W) through the panels, against the double-precision sum.
TEST(Nf4Gemm, InputGradient) {
  std::mt19937 rng(21);
  ThreadPool pool(2);
  for (int64_t n : {5, 300})
    for (int64_t k : {64, 96}) {
      const Nf4Packed p = pack(n, k, 64, rng);
      const int64_t m = 7;
      const std::vector<float> dy = random_x(m, n, rng);
      std::vector<float> dx(static_cast<size_t>(m * k));
      quant_gemm_dx(m, dy.data(), n, p.view(), dx.data(), k, false, pool);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t c = 0; c < k; ++c) {
          double want = 0.0, mag = 0.0;
          for (int64_t j = 0; j < n; ++j) {
            const double t = double(dy[i * n + j]) *
                             ref::nf4_dequantize_at(p.q.packed.data(), p.q.absmax_used.data(), 64, j * k + c);
            want += t;
            mag += std::fabs(t);
          }
          ASSERT_NEAR(dx[i * k + c], want, 2.0 * n * std::ldexp(1.0, -24) * mag + 1e-30) << i << ", " << c;
        }
    }
}

}  // namespace
}  // namespace lathe::cpu
