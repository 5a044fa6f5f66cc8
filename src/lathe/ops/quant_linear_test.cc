// The quantised linear op and nn::Linear's quantised slot: quantise / dequantise fronts, the op against
// the f32 linear on the dequantised weight (decode and prefill row counts, leading dimensions, bias), and
// the errors it gives.
#include "lathe/ops/quant_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "lathe/autograd/node.h"
#include "lathe/nn/linear.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"

namespace lathe {
namespace {

using testing::random_tensor;

const char* const kFormats[] = {"int8", "int4", "int4-g32", "int4-g64", "int4-g128"};

TEST(QuantLinear, InputSizeNotAMultipleOfTheGroupIsAClearError) {
  const Tensor w = random_tensor({4, 100}, 1);
  try {
    quantize_weight(w, parse_quant_spec("int4"));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of the group size 32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quantize_weight(random_tensor({4, 96}, 1), parse_quant_spec("int4-g64")), InvalidArgument);
  EXPECT_THROW(parse_quant_spec("int3"), InvalidArgument);
}

TEST(QuantLinear, FormatNamesRoundTrip) {
  for (const char* name : kFormats) EXPECT_EQ(quant_spec_name(parse_quant_spec(name)), name);
}

// linear(x, q, b) against the f32 linear on deq(q): the same weights, so only the summation order differs
// (tolerance: K·2^-23 times Σ|x·w|, bounded here by K·max|x|·max|w|), and x's int8 rounding where it is used.
TEST(QuantLinear, MatchesF32LinearOnTheDequantisedWeight) {
  for (const char* name : kFormats) {
    const QuantSpec spec = parse_quant_spec(name);
    const QuantWeight q = quantize_weight(random_tensor({37, 256}, 2), spec);
    const Tensor wd = dequantize_weight(q), b = random_tensor({37}, 3);
    float wmax = 0.f;
    for (float v : wd.to_vector()) wmax = std::max(wmax, std::fabs(v));
    for (const Shape& xs : {Shape{1, 256}, Shape{5, 256}, Shape{2, 3, 256}, Shape{20, 256}}) {
      const Tensor x = random_tensor(xs, 4);
      float xmax = 0.f;
      for (float v : x.to_vector()) xmax = std::max(xmax, std::fabs(v));
      const Tensor got = linear(x, q, b), want = linear(x, wd, b);
      ASSERT_EQ(got.shape(), want.shape());
      const auto g = got.to_vector(), e = want.to_vector();
      // Where decode takes the integer dot (AVX-512 VNNI: up to 16 rows), x's rounding to int8 adds at most
      // Σ|w|·dx/2 with dx = max|x| / 127 per 32 inputs: 256·max|w|·max|x| / 254.
      const double tol = 256 * std::ldexp(1.0, -23) * 256 * xmax * wmax + 256.0 * wmax * xmax / 254 + 1e-6;
      for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], e[i], tol) << name << " " << shape_str(xs) << " at " << i;
    }
  }
}

// The quantised weight is close to the f32 one it was made from: each output within the sum of the
// per-weight bounds (half a step, a whole one for int4's clamp; steps from the stored scales) times |x|.
TEST(QuantLinear, CloseToTheOriginalWeight) {
  const Tensor w = random_tensor({16, 128}, 5), x = random_tensor({3, 128}, 6);
  for (const char* name : kFormats) {
    const QuantSpec spec = parse_quant_spec(name);
    const QuantWeight q = quantize_weight(w, spec);
    const auto y = linear(x, q).to_vector(), y32 = linear(x, w).to_vector();
    const auto sc = q.scales.to(DType::kF32).to_vector(), xv = x.to_vector();
    const int64_t groups = 128 / spec.group;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 16; ++j) {
        double bound = 1e-5;
        for (int64_t c = 0; c < 128; ++c)
          bound += std::fabs(xv[i * 128 + c]) * std::fabs(sc[j * groups + c / spec.group]) * 1.01;
        EXPECT_NEAR(y[i * 16 + j], y32[i * 16 + j], bound) << name;
      }
  }
}

// A quantised weight is frozen: the gradient reaches x (and a bias), as through its dequantised f32 weight,
// and never the codes. Every format, with and without a low-rank term (QLoRA's adapter). 20 rows of x: the
// prefill path (f32 products; the VNNI decode would round x to int8).
TEST(QuantLinear, GradientReachesXThroughTheDequantisedWeight) {
  for (const char* name : {"int8", "int4", "int4-g64", "nf4"}) {
    const QuantWeight q = quantize_weight(random_tensor({24, 128}, 1), parse_quant_spec(name));
    const Tensor w = dequantize_weight(q);
    for (bool with_term : {false, true}) {
      const Tensor xq = random_tensor({20, 128}, 2).set_requires_grad(), xf = xq.detach().clone().set_requires_grad();
      const Tensor bq = random_tensor({24}, 3).set_requires_grad(), bf = bq.detach().clone().set_requires_grad();
      const Tensor aq = random_tensor({4, 128}, 4).set_requires_grad(), af = aq.detach().clone().set_requires_grad();
      const Tensor cq = random_tensor({24, 4}, 5).set_requires_grad(), cf = cq.detach().clone().set_requires_grad();
      const Tensor yq = with_term ? linear(xq, q, bq, LowRankTerm{xq, aq, cq, 0.5f}) : linear(xq, q, bq);
      const Tensor yf = with_term ? linear(xf, w, bf, LowRankTerm{xf, af, cf, 0.5f}) : linear(xf, w, bf);
      const Tensor g = random_tensor({20, 24}, 6);
      backward(yq, g);
      backward(yf, g);
      // Same weights; f32 sums of up to 128 products (|x·w| ~ 1) in another order: within 128·2^-23·Σ|x·w|.
      const auto near = [&](const Tensor& a, const Tensor& b, const char* what) {
        const auto av = a.to_vector(), bv = b.to_vector();
        ASSERT_EQ(av.size(), bv.size());
        for (size_t i = 0; i < av.size(); ++i) EXPECT_NEAR(av[i], bv[i], 2e-3) << name << " " << what << " " << i;
      };
      near(yq, yf, "y");
      near(xq.grad(), xf.grad(), "dx");
      near(bq.grad(), bf.grad(), "db");
      if (with_term) {
        near(aq.grad(), af.grad(), "da");
        near(cq.grad(), cf.grad(), "dB");
      }
    }
  }
}

// nn::Linear with its quant slot runs the quantised op (and linear_pair the same per Linear); linear_weight
// gives the dequantised weight.
TEST(QuantLinear, NnLinearAppliesItsQuantSlot) {
  Linear a, b;
  a.quant = quantize_weight(random_tensor({12, 96}, 1), parse_quant_spec("int4"));
  a.bias = random_tensor({12}, 2);
  b.quant = quantize_weight(random_tensor({12, 96}, 3), parse_quant_spec("int8"));
  const Tensor x = random_tensor({4, 96}, 4);
  const auto ya = linear(x, a).to_vector(), want_a = linear(x, a.quant, a.bias).to_vector();
  EXPECT_EQ(ya, want_a);
  auto [pa, pb] = linear_pair(x, a, b);
  EXPECT_EQ(pa.to_vector(), want_a);
  EXPECT_EQ(pb.to_vector(), linear(x, b.quant).to_vector());
  EXPECT_EQ(linear_weight(a).to_vector(), dequantize_weight(a.quant).to_vector());
}

}  // namespace
}  // namespace lathe
