// Tests of the quantised formats' scalar reference (ref/quant.h) and of the quantised GEMM kernels against
// it on every instruction tier this CPU can run: every format, M = 1..17 (decode GEMV up to 16, the
// dequantised-panel GEMM from 17), odd N, K across group boundaries, 1 and 2 threads, with and without a
// seeded y (bias).
#include "lathe/backend/cpu/quant_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "lathe/ref/quant.h"

namespace lathe::cpu {
namespace {

const QuantSpec kSpecs[] = {{QuantFormat::kInt8, 32},
                            {QuantFormat::kInt4, 32},
                            {QuantFormat::kInt4Asym, 32},
                            {QuantFormat::kInt4Asym, 64},
                            {QuantFormat::kInt4Asym, 128},
                            {QuantFormat::kInt6, 32}};

// A W [n, k] quantised by the reference, with its storage.
struct Packed {
  QuantSpec spec;
  int64_t n, k;
  std::vector<float> w;  // the f32 weights it was made from
  std::vector<uint8_t> codes;
  std::vector<f16> scales, mins;
  QuantMatrix view() const {
    return {spec, n, k, codes.data(), scales.data(), quant_has_mins(spec.format) ? mins.data() : nullptr};
  }
};

Packed pack(const QuantSpec& s, int64_t n, int64_t k, std::mt19937& rng) {
  Packed p{s, n, k, {}, {}, {}, {}};
  // Rows of different magnitudes and an offset (so int4-asym's minimum is not just -max).
  std::normal_distribution<float> dist(0.f, 1.f);
  p.w.resize(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) {
    const float scale = 0.02f * static_cast<float>(1 + j % 7), shift = 0.01f * static_cast<float>(j % 3);
    for (int64_t c = 0; c < k; ++c) p.w[j * k + c] = scale * dist(rng) + shift;
  }
  const int64_t rb = quant_row_bytes(s.format, k), groups = k / s.group;
  p.codes.assign(static_cast<size_t>(n * rb), 0);
  p.scales.resize(static_cast<size_t>(n * groups));
  p.mins.resize(static_cast<size_t>(n * groups));
  for (int64_t j = 0; j < n; ++j)
    ref::quantize_row(s, p.w.data() + j * k, k, p.codes.data() + j * rb, p.scales.data() + j * groups,
                      p.mins.data() + j * groups);
  return p;
}

std::vector<float> random_x(int64_t m, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = dist(rng);
  return x;
}

// Every weight's error against the value it was made from, bounded by the format's rounding: half a
// step (a whole step where int4's clamp at 15, int6's at 63, cuts the top half-step), plus the f16 rounding
// of the scale (relative 2^-11, times a code of up to 127, 63 or 15) and of the minimum.
TEST(QuantRef, DequantisedWeightsWithinTheFormatsError) {
  std::mt19937 rng(7);
  for (const QuantSpec& s : kSpecs) {
    const Packed p = pack(s, 9, 256, rng);
    const QuantMatrix v = p.view();
    const int64_t rb = quant_row_bytes(s.format, p.k), groups = p.k / s.group;
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t c = 0; c < p.k; ++c) {
        const float d = std::fabs(f16_to_f32(p.scales[j * groups + c / s.group]));
        const float got = ref::dequantize_at(s, v.codes + j * rb, v.scales + j * groups, p.mins.data() + j * groups, p.k, c);
        const float x = p.w[j * p.k + c];
        const bool symmetric_offset = s.format == QuantFormat::kInt4 || s.format == QuantFormat::kInt6;
        const float steps = symmetric_offset ? 1.f : 0.5f;
        const float qmax = s.format == QuantFormat::kInt8 ? 127.f : s.format == QuantFormat::kInt6 ? 63.f : 15.f;
        const float m =
            s.format == QuantFormat::kInt4Asym ? std::fabs(f16_to_f32(p.mins[j * groups + c / s.group])) : 0.f;
        const float tol = steps * d * (1.f + 1e-3f) + std::ldexp(qmax * d + m, -11) + 1e-7f;
        ASSERT_LE(std::fabs(got - x), tol) << quant_spec_name(s) << " row " << j << " col " << c;
      }
  }
}

// The codes follow their definition: int8 within [-127, 127] and the group's largest |x| at ±127; int4's
// (and int6's) largest |x| at code 0 (d = that value / -8, / -32); int4-asym's minimum at code 0 and maximum
// at 15.
TEST(QuantRef, ExtremesTakeTheEndCodes) {
  std::mt19937 rng(11);
  for (const QuantSpec& s : kSpecs) {
    const Packed p = pack(s, 3, 128, rng);
    const int64_t rb = quant_row_bytes(s.format, p.k);
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t g = 0; g < p.k / s.group; ++g) {
        int64_t arg_abs = g * s.group, arg_min = arg_abs, arg_max = arg_abs;
        for (int64_t c = g * s.group; c < (g + 1) * s.group; ++c) {
          const float x = p.w[j * p.k + c];
          if (std::fabs(x) > std::fabs(p.w[j * p.k + arg_abs])) arg_abs = c;
          if (x < p.w[j * p.k + arg_min]) arg_min = c;
          if (x > p.w[j * p.k + arg_max]) arg_max = c;
        }
        const uint8_t* row = p.codes.data() + j * rb;
        if (s.format == QuantFormat::kInt8) {
          EXPECT_EQ(std::abs(ref::quant_code(s.format, row, p.k, arg_abs)), 127);
        } else if (s.format == QuantFormat::kInt4 || s.format == QuantFormat::kInt6) {
          EXPECT_EQ(ref::quant_code(s.format, row, p.k, arg_abs), 0);
        } else {
          EXPECT_EQ(ref::quant_code(s.format, row, p.k, arg_min), 0);
          EXPECT_EQ(ref::quant_code(s.format, row, p.k, arg_max), 15);
        }
      }
  }
}

// int4 packs input j of a unit in the low nibble of byte j and input j + 16 in the high one.
TEST(QuantRef, Int4NibbleOrder) {
  const auto code = [](int64_t p) { return static_cast<int>((p + p / 16) % 16); };  // distinct per half-unit
  std::vector<uint8_t> codes(32, 0);
  for (int64_t p = 0; p < 64; ++p) ref::set_quant_code(QuantFormat::kInt4, codes.data(), 64, p, code(p));
  for (int64_t p = 0; p < 64; ++p) EXPECT_EQ(ref::quant_code(QuantFormat::kInt4, codes.data(), 64, p), code(p));
  for (int64_t u = 0; u < 2; ++u)
    for (int64_t j = 0; j < 16; ++j)
      EXPECT_EQ(codes[u * 16 + j], code(u * 32 + j) | (code(u * 32 + j + 16) << 4)) << "byte " << u * 16 + j;
}

// int6 keeps int4's nibble plane for the low 4 bits, then a plane of high bit pairs: byte b of unit u holds
// inputs 32u + b + 8t in bits 2t, 2t + 1 (t = 0..3).
TEST(QuantRef, Int6PlaneOrder) {
  const int64_t k = 64;
  const auto code = [](int64_t p) { return static_cast<int>((p * 37 + p / 16) % 64); };
  std::vector<uint8_t> codes(static_cast<size_t>(quant_row_bytes(QuantFormat::kInt6, k)), 0);
  ASSERT_EQ(codes.size(), 48u);
  for (int64_t p = 0; p < k; ++p) ref::set_quant_code(QuantFormat::kInt6, codes.data(), k, p, code(p));
  for (int64_t p = 0; p < k; ++p) EXPECT_EQ(ref::quant_code(QuantFormat::kInt6, codes.data(), k, p), code(p));
  for (int64_t u = 0; u < 2; ++u) {
    for (int64_t j = 0; j < 16; ++j)
      EXPECT_EQ(codes[u * 16 + j], (code(u * 32 + j) & 15) | ((code(u * 32 + j + 16) & 15) << 4)) << "nibble byte " << j;
    for (int64_t b = 0; b < 8; ++b) {
      int want = 0;
      for (int t = 0; t < 4; ++t) want |= (code(u * 32 + b + 8 * t) >> 4) << (2 * t);
      EXPECT_EQ(codes[32 + u * 8 + b], want) << "high byte " << u * 8 + b;
    }
  }
}

class QuantGemmTierTest : public ::testing::TestWithParam<CpuTier> {
 protected:
  void SetUp() override {
    if (GetParam() > cpu_max_tier()) GTEST_SKIP() << "CPU lacks this instruction tier";
  }
};

struct KernelShape {
  int64_t n, k;
};

// Each output against the double-precision reference: f32 products summed in any order are within
// K·2^-23·Σ|x·w| of the exact sum (twice the γ_K bound of n·u), the dequantised weights being identical.
TEST_P(QuantGemmTierTest, MatchesReference) {
  const KernelShape shapes[] = {{1, 32}, {3, 64}, {37, 96}, {130, 128}, {257, 256}, {300, 256}, {5, 4096}};
  constexpr int64_t kMaxM = kQuantGemvMaxM + 1;  // 17: one past the GEMV, onto the panels
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2)};
  std::mt19937 rng(3);
  for (const QuantSpec& s : kSpecs)
    for (const KernelShape& sh : shapes) {
      if (sh.k % s.group) continue;
      const Packed p = pack(s, sh.n, sh.k, rng);
      const std::vector<float> x = random_x(kMaxM, sh.k, rng);
      std::vector<float> bias = random_x(kMaxM, sh.n, rng);  // a seeded y (accumulate)
      std::vector<float> expect(static_cast<size_t>(kMaxM * sh.n)), expect_acc = bias;
      ref::quant_matmul(s, kMaxM, sh.n, sh.k, x.data(), sh.k, p.codes.data(), p.scales.data(),
                        quant_has_mins(s.format) ? p.mins.data() : nullptr, expect.data(), sh.n, false);
      ref::quant_matmul(s, kMaxM, sh.n, sh.k, x.data(), sh.k, p.codes.data(), p.scales.data(),
                        quant_has_mins(s.format) ? p.mins.data() : nullptr, expect_acc.data(), sh.n, true);
      // Σ|x·w| per output, for the tolerance.
      std::vector<double> mag(static_cast<size_t>(kMaxM * sh.n), 0.0);
      std::vector<float> wrow(static_cast<size_t>(sh.k));
      for (int64_t j = 0; j < sh.n; ++j) {
        quant_dequantize_rows(p.view(), j, j + 1, wrow.data());
        for (int64_t i = 0; i < kMaxM; ++i)
          for (int64_t c = 0; c < sh.k; ++c) mag[i * sh.n + j] += std::fabs(double(x[i * sh.k + c]) * wrow[c]);
      }
      for (int64_t m = 1; m <= kMaxM; ++m)
        for (const ThreadPool& pool : pools)
          for (bool acc : {false, true}) {
            std::vector<float> y = acc ? bias : std::vector<float>(static_cast<size_t>(kMaxM * sh.n), NAN);
            quant_gemm_with(GetParam(), m, x.data(), sh.k, p.view(), y.data(), sh.n, acc, pool);
            for (int64_t i = 0; i < kMaxM; ++i)
              for (int64_t j = 0; j < sh.n; ++j) {
                const size_t at = static_cast<size_t>(i * sh.n + j);
                if (i >= m) {  // rows past m untouched
                  if (acc)
                    ASSERT_EQ(y[at], bias[at]);
                  else
                    ASSERT_TRUE(std::isnan(y[at]));
                  continue;
                }
                const double want = acc ? expect_acc[at] : expect[at];
                const double tol =
                    2.0 * sh.k * std::ldexp(1.0, -24) * (mag[at] + (acc ? std::fabs(bias[at]) : 0.0)) + 1e-30;
                ASSERT_NEAR(y[at], want, tol)
                    << quant_spec_name(s) << " n " << sh.n << " k " << sh.k << " m " << m << " threads "
                    << pool.n_threads() << " acc " << acc << " at (" << i << ", " << j << ")";
              }
          }
    }
}

// Batched decode gives each sequence what it gets alone, bit for bit: row i of an m-row GEMV call equals
// the one-row call on that row.
TEST_P(QuantGemmTierTest, RowsIndependentOfBatch) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  for (const QuantSpec& s : kSpecs) {
    const Packed p = pack(s, 67, 384, rng);
    const std::vector<float> x = random_x(kQuantGemvMaxM, p.k, rng);
    std::vector<float> all(static_cast<size_t>(kQuantGemvMaxM * p.n)), one(static_cast<size_t>(p.n));
    quant_gemm_with(GetParam(), kQuantGemvMaxM, x.data(), p.k, p.view(), all.data(), p.n, false, pool);
    for (int64_t i = 0; i < kQuantGemvMaxM; ++i) {
      quant_gemm_with(GetParam(), 1, x.data() + i * p.k, p.k, p.view(), one.data(), p.n, false, pool);
      for (int64_t j = 0; j < p.n; ++j) ASSERT_EQ(all[i * p.n + j], one[j]) << quant_spec_name(s) << " row " << i;
    }
  }
}

// The integer-dot kernel (AVX-512 VNNI) against the reference that quantises x the same way
// (ref::quant_matmul_q8_activations): its integer sums are exact, and the f32 steps (per lane dx·dw·sum,
// the offset correction off·dw·T_g, 16-lane sums) are within a few roundings of a magnitude that counts
// the offset codes too: Σ_p (|w_p| + off·|d| + |m|)·dx·|xq_p|, times k/16 + 8 roundings of 2^-24 each.
// Against the f32 reference, the activations' own rounding adds at most Σ_p |w_p|·dx/2.
// The prefill panels' AVX2 dequantisation equals the scalar definition bit for bit.
TEST(QuantGemm, Avx2DequantisationIsTheScalarOne) {
  if (cpu_max_tier() < CpuTier::kAvx2) GTEST_SKIP() << "CPU lacks AVX2";
  std::mt19937 rng(23);
  for (const QuantSpec& s : kSpecs) {
    const Packed p = pack(s, 9, 384, rng);
    std::vector<float> want(static_cast<size_t>(7 * p.k)), got(want.size(), NAN);
    quant_dequantize_rows(p.view(), 2, 9, want.data());
    quant_dequantize_rows_avx2(p.view(), 2, 9, got.data());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << quant_spec_name(s) << " at " << i;
  }
}

using IntDotKernel = void (*)(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                              bool accumulate, const ThreadPool& pool);

void check_int_dot_kernel(IntDotKernel kernel, const std::vector<int64_t>& ms) {
  const KernelShape shapes[] = {{1, 32}, {3, 64}, {37, 96}, {130, 128}, {257, 256}, {300, 256}, {5, 4096}};
  const int64_t kMaxM = *std::max_element(ms.begin(), ms.end());
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2)};
  std::mt19937 rng(13);
  for (const QuantSpec& s : kSpecs)
    for (const KernelShape& sh : shapes) {
      if (sh.k % s.group) continue;
      const Packed p = pack(s, sh.n, sh.k, rng);
      const f16* mins = quant_has_mins(s.format) ? p.mins.data() : nullptr;
      const std::vector<float> x = random_x(kMaxM, sh.k, rng);
      std::vector<float> bias = random_x(kMaxM, sh.n, rng);
      std::vector<float> expect(static_cast<size_t>(kMaxM * sh.n)), exact(expect.size()), expect_acc = bias;
      ref::quant_matmul_q8_activations(s, kMaxM, sh.n, sh.k, x.data(), sh.k, p.codes.data(), p.scales.data(), mins,
                                       expect.data(), sh.n, false);
      ref::quant_matmul_q8_activations(s, kMaxM, sh.n, sh.k, x.data(), sh.k, p.codes.data(), p.scales.data(), mins,
                                       expect_acc.data(), sh.n, true);
      ref::quant_matmul(s, kMaxM, sh.n, sh.k, x.data(), sh.k, p.codes.data(), p.scales.data(), mins, exact.data(), sh.n,
                        false);
      // Per output: the rounding magnitude and the activation-rounding bound.
      std::vector<double> mag(expect.size(), 0.0), act(expect.size(), 0.0);
      std::vector<int8_t> xq(static_cast<size_t>(sh.k));
      std::vector<float> dx(static_cast<size_t>(sh.k / 32)), wrow(static_cast<size_t>(sh.k));
      const double off = s.format == QuantFormat::kInt8   ? 128
                         : s.format == QuantFormat::kInt4 ? 8
                         : s.format == QuantFormat::kInt6 ? 32
                                                          : 0;
      for (int64_t i = 0; i < kMaxM; ++i) {
        for (int64_t u = 0; u < sh.k / 32; ++u)
          dx[u] = ref::quantize_activation_unit(x.data() + i * sh.k + u * 32, xq.data() + u * 32);
        for (int64_t j = 0; j < sh.n; ++j) {
          quant_dequantize_rows(p.view(), j, j + 1, wrow.data());
          for (int64_t c = 0; c < sh.k; ++c) {
            const int64_t g = j * (sh.k / s.group) + c / s.group;
            const double d = std::fabs(f16_to_f32(p.scales[g])), m = mins ? std::fabs(f16_to_f32(mins[g])) : 0.0;
            mag[i * sh.n + j] += (std::fabs(wrow[c]) + off * d + m) * dx[c / 32] * std::abs(xq[c]);
            act[i * sh.n + j] += std::fabs(wrow[c]) * dx[c / 32] * 0.5;
          }
        }
      }
      for (int64_t m : ms)
        for (const ThreadPool& pool : pools)
          for (bool acc : {false, true}) {
            std::vector<float> y = acc ? bias : std::vector<float>(expect.size(), NAN);
            kernel(m, x.data(), sh.k, p.view(), y.data(), sh.n, acc, pool);
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
                const double tol =
                    (sh.k / 16.0 + 8) * std::ldexp(1.0, -24) * (mag[at] + (acc ? std::fabs(bias[at]) : 0.0)) + 1e-30;
                ASSERT_NEAR(y[at], acc ? expect_acc[at] : expect[at], tol)
                    << quant_spec_name(s) << " n " << sh.n << " k " << sh.k << " m " << m << " acc " << acc << " at ("
                    << i << ", " << j << ")";
                if (!acc) {
                  ASSERT_NEAR(y[at], exact[at], act[at] + tol) << quant_spec_name(s) << " vs f32 activations";
                }
              }
          }
    }
}

TEST(QuantGemmVnni, MatchesReferenceOnQuantisedActivations) {
  if (!quant_cpu_has_vnni()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI";
  std::vector<int64_t> ms;
  for (int64_t m = 1; m <= kQuantGemvMaxM; ++m) ms.push_back(m);
  check_int_dot_kernel(quant_gemm_vnni, ms);
}

// The AVX2 integer-dot decode GEMV (vpmaddubsw), the path of CPUs without AVX-512 VNNI.
TEST(QuantGemmAvx2Int, MatchesReferenceOnQuantisedActivations) {
  if (cpu_max_tier() < CpuTier::kAvx2) GTEST_SKIP() << "CPU lacks AVX2";
  std::vector<int64_t> ms;
  for (int64_t m = 1; m <= kQuantGemvMaxM; ++m) ms.push_back(m);
  check_int_dot_kernel(quant_gemm_avx2_int, ms);
}

// The prefill GEMM (repacked 32-column panels, 4-row tiles): row tails 1-3, column tails, any m.
TEST(QuantGemmVnni, PrefillMatchesReferenceOnQuantisedActivations) {
  if (!quant_cpu_has_vnni()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI";
  check_int_dot_kernel(quant_gemm_vnni_prefill, {1, 2, 3, 4, 5, 17, 19, 30});
}

// The AVX2 prefill GEMM (repacked 8-column panels, 4 per task, 4-row tiles): row tails 1-3, column tails
// within a panel and a task, any m.
TEST(QuantGemmAvx2Int, PrefillMatchesReferenceOnQuantisedActivations) {
  if (cpu_max_tier() < CpuTier::kAvx2) GTEST_SKIP() << "CPU lacks AVX2";
  check_int_dot_kernel(
      [](int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy, bool acc,
         const ThreadPool& pool) { quant_gemm_avx2_prefill_with(false, m, x, ldx, w, y, ldy, acc, pool); },
      {1, 2, 3, 4, 5, 17, 19, 30});
}

// Its AVX-VNNI form (vpdpbusd on ymm, int8 codes flipped to unsigned), where the CPU has AVX-VNNI.
TEST(QuantGemmAvx2Int, AvxVnniPrefillMatchesReferenceOnQuantisedActivations) {
  if (!cpu_has_avx_vnni()) GTEST_SKIP() << "CPU lacks AVX-VNNI";
  check_int_dot_kernel(
      [](int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy, bool acc,
         const ThreadPool& pool) { quant_gemm_avx2_prefill_with(true, m, x, ldx, w, y, ldy, acc, pool); },
      {1, 2, 3, 4, 5, 17, 19, 30});
}

TEST(QuantGemmVnni, RowsIndependentOfBatch) {
  if (!quant_cpu_has_vnni()) GTEST_SKIP() << "CPU lacks AVX-512 VNNI";
  std::mt19937 rng(17);
  ThreadPool pool(2);
  for (const QuantSpec& s : kSpecs) {
    const Packed p = pack(s, 67, 384, rng);
    const std::vector<float> x = random_x(kQuantGemvMaxM, p.k, rng);
    std::vector<float> all(static_cast<size_t>(kQuantGemvMaxM * p.n)), one(static_cast<size_t>(p.n));
    quant_gemm_vnni(kQuantGemvMaxM, x.data(), p.k, p.view(), all.data(), p.n, false, pool);
    for (int64_t i = 0; i < kQuantGemvMaxM; ++i) {
      quant_gemm_vnni(1, x.data() + i * p.k, p.k, p.view(), one.data(), p.n, false, pool);
      for (int64_t j = 0; j < p.n; ++j) ASSERT_EQ(all[i * p.n + j], one[j]) << quant_spec_name(s) << " row " << i;
    }
  }
}

// x rows at an odd stride from a misaligned start, y rows with padding: the same results bit for bit as the
// contiguous call (the kernels' summation order does not depend on where rows start), pad columns untouched.
// Every tier the CPU has, and the VNNI kernel.
TEST(QuantGemm, StridedMisalignedRowsGiveTheContiguousResult) {
  std::mt19937 rng(19);
  ThreadPool pool(2);
  for (const QuantSpec& s : kSpecs) {
    const Packed p = pack(s, 70, 256, rng);
    for (int64_t m : {1, 5, 16, 17}) {
      const std::vector<float> x = random_x(m, p.k, rng);
      const int64_t ldx = p.k + 3, ldy = p.n + 2;
      std::vector<float> xs(static_cast<size_t>(m * ldx + 1), NAN);  // +1: rows start at float 1 (misaligned)
      for (int64_t i = 0; i < m; ++i) std::copy_n(x.data() + i * p.k, p.k, xs.data() + 1 + i * ldx);
      const auto run = [&](const auto& call) {
        std::vector<float> y(static_cast<size_t>(m * p.n)), ys(static_cast<size_t>(m * ldy), -7.f);
        call(x.data(), p.k, y.data(), p.n);
        call(xs.data() + 1, ldx, ys.data(), ldy);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < p.n; ++j)
            ASSERT_EQ(ys[i * ldy + j], y[i * p.n + j]) << quant_spec_name(s) << " m " << m;
          for (int64_t j = p.n; j < ldy; ++j) ASSERT_EQ(ys[i * ldy + j], -7.f) << "pad column written";
        }
      };
      for (CpuTier tier : {CpuTier::kScalar, CpuTier::kAvx2, CpuTier::kAvx512}) {
        if (tier > cpu_max_tier()) continue;
        run([&](const float* xp, int64_t lx, float* yp, int64_t ly) {
          quant_gemm_with(tier, m, xp, lx, p.view(), yp, ly, false, pool);
        });
      }
      if (quant_cpu_has_vnni() && m <= kQuantGemvMaxM)
        run([&](const float* xp, int64_t lx, float* yp, int64_t ly) {
          quant_gemm_vnni(m, xp, lx, p.view(), yp, ly, false, pool);
        });
      if (quant_cpu_has_vnni())
        run([&](const float* xp, int64_t lx, float* yp, int64_t ly) {
          quant_gemm_vnni_prefill(m, xp, lx, p.view(), yp, ly, false, pool);
        });
      if (cpu_max_tier() >= CpuTier::kAvx2)
        run([&](const float* xp, int64_t lx, float* yp, int64_t ly) {
          quant_gemm_avx2_int(m, xp, lx, p.view(), yp, ly, false, pool);
        });
      if (cpu_max_tier() >= CpuTier::kAvx2)
        run([&](const float* xp, int64_t lx, float* yp, int64_t ly) {
          quant_gemm_avx2_prefill_with(false, m, xp, lx, p.view(), yp, ly, false, pool);
        });
      if (cpu_has_avx_vnni())
        run([&](const float* xp, int64_t lx, float* yp, int64_t ly) {
          quant_gemm_avx2_prefill_with(true, m, xp, lx, p.view(), yp, ly, false, pool);
        });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, QuantGemmTierTest, ::testing::Values(CpuTier::kScalar, CpuTier::kAvx2, CpuTier::kAvx512),
                         [](const auto& info) { return std::string(cpu_tier_name(info.param)); });

}  // namespace
}  // namespace lathe::cpu
