// Logit distillation: parity with the reference (posttrain/reference.json "distill": the fixture teacher and
// student, forward KL, reverse KL and JSD 0.5 at its temperature, the student's forward-KL gradients), TRL's
// JSD end points, finite-difference gradients of every divergence, the row-chunked head equal to one chunk,
// the hard-label term equal to SFT's NLL, and the vocabulary check.
#include "lathe/posttrain/distill_objective.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "lathe/autograd/node.h"
#include "lathe/base/rng.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/posttrain/test_grads.h"

namespace lathe::posttrain {
namespace {

using testing::Grads;
using testing::grad_rel_diff;
using testing::take_grads;

nlohmann::json reference() {
  std::ifstream in(testing::fixtures_root() + "/posttrain/reference.json");
  EXPECT_TRUE(in);
  return nlohmann::json::parse(in)["distill"];
}

std::unique_ptr<Model> student() {
  auto m = Model::load(testing::fixtures_root() + "/" + reference()["student"].get<std::string>(), {.force_f32 = true});
  m->set_requires_grad(true);
  return m;
}

std::unique_ptr<Model> teacher() {
  const std::string dir = testing::fixtures_root() + "/" + reference()["teacher_dir"].get<std::string>();
  return Model::load(dir, {.force_f32 = true});
}

// The reference's input rows (models/llama's input_ids [B, T]) as a batch in which every position counts
// (the reference averages over all B·T positions); targets are the next token (0 after the last).
SftBatch reference_batch() {
  SafetensorsFile f = SafetensorsFile::open(testing::fixtures_root() + "/models/llama/reference.safetensors");
  const Tensor ids = f.tensor("input_ids").contiguous();  // [B, T] i32
  const int64_t B = ids.size(0), T = ids.size(1);
  SftBatch b;
  for (int64_t r = 0; r < B; ++r) {
    SftRow row;
    for (int64_t t = 0; t < T; ++t) {
      row.tokens.push_back(ids.data<int32_t>()[r * T + t]);
      row.positions.push_back(static_cast<int32_t>(t));
      row.targets.push_back(t + 1 < T ? ids.data<int32_t>()[r * T + t + 1] : 0);
    }
    row.n_targets = T;
    b.append(row);
  }
  return b;
}

DistillLossOptions reference_options(Divergence d, double beta = 0.5) {
  return {.divergence = d, .beta = beta, .temperature = reference()["temperature"].get<double>(),
          .temperature_squared = true, .alpha = 1.0};
}

// Tolerances as tests/models/parity_test.cc: loss 1e-5 relative, gradients 1e-3 relative (norm).
TEST(DistillLoss, MatchesTheReferenceLossesAndGradients) {
  const nlohmann::json ref = reference();
  auto s = student();
  auto t = teacher();
  const SftBatch b = reference_batch();
  const std::pair<Divergence, const char*> cases[] = {
      {Divergence::kForwardKl, "loss_forward_kl"},
      {Divergence::kReverseKl, "loss_reverse_kl"},
      {Divergence::kJsd, "loss_jsd_0.5"}};
  for (const auto& [d, key] : cases) {
    const Tensor l = distill_loss(*s, *t, b, reference_options(d), 1.0);
    const double want = ref[key].get<double>();
    EXPECT_NEAR(l.item(), want, 1e-5 * std::fabs(want)) << key;
    if (d == Divergence::kForwardKl) {
      backward(l);
      SafetensorsFile tensors = SafetensorsFile::open(testing::fixtures_root() + "/posttrain/reference.safetensors");
      int checked = 0;
      for (auto& [name, g] : s->gradients_by_name()) {
        const Tensor w = tensors.tensor("kd.grad." + name);
        ASSERT_EQ(g.shape(), w.shape()) << name;
        EXPECT_LE(grad_rel_diff({{name, g.to_vector()}}, {{name, w.to_vector()}}), 1e-3) << name;
        ++checked;
      }
      EXPECT_GT(checked, 0);
      s->zero_grad();
    }
  }
}

std::vector<float> random_row(int64_t v, uint64_t seed, float spread) {
  CounterRng rng{.key = seed};
  std::vector<float> z(static_cast<size_t>(v));
  for (float& x : z) x = spread * (static_cast<float>(rng.next_below(1u << 20)) / (1u << 20) - 0.5f);
  return z;
}

TEST(DistillLoss, JsdEndPointsAreTrlsKlSpecialCases) {
  const int64_t V = 11;
  const std::vector<float> zs = random_row(V, 1, 6.f), zt = random_row(V, 2, 6.f);
  DistillLossOptions o{.temperature = 1.5};
  auto value = [&](Divergence d, double beta, const std::vector<float>& a, const std::vector<float>& b) {
    o.divergence = d;
    o.beta = beta;
    return distill_row(a.data(), b.data(), V, o, nullptr, nullptr);
  };
  const double fkl = value(Divergence::kForwardKl, 0, zs, zt), rkl = value(Divergence::kReverseKl, 0, zs, zt);
  EXPECT_GT(fkl, 0);
  EXPECT_GT(rkl, 0);
  EXPECT_NE(fkl, rkl);
  EXPECT_EQ(value(Divergence::kJsd, 0.0, zs, zt), fkl);  // TRL: beta 0 is forward KL(teacher ‖ student)
  EXPECT_EQ(value(Divergence::kJsd, 1.0, zs, zt), rkl);  // beta 1 is reverse KL(student ‖ teacher)
  // The mixture's own limits are 0 (m tends to one side), not the KLs: why TRL special-cases the ends.
  EXPECT_LT(value(Divergence::kJsd, 1e-6, zs, zt), 1e-4 * fkl);
  EXPECT_LT(value(Divergence::kJsd, 1 - 1e-6, zs, zt), 1e-4 * rkl);
  // JSD_β(p, q) = JSD_{1−β}(q, p) (the roles swap), bounded by log 2 at β = 0.5, 0 for equal inputs.
  EXPECT_NEAR(value(Divergence::kJsd, 0.3, zs, zt), value(Divergence::kJsd, 0.7, zt, zs), 1e-12);
  EXPECT_LE(value(Divergence::kJsd, 0.5, zs, zt), std::log(2.0));
  EXPECT_NEAR(value(Divergence::kJsd, 0.5, zs, zs), 0.0, 1e-12);
  // Forward KL equals the KL metric every divergence reports.
  double kl = 0;
  o.divergence = Divergence::kJsd;
  distill_row(zs.data(), zt.data(), V, o, nullptr, &kl);
  EXPECT_DOUBLE_EQ(kl, fkl);
}

TEST(DistillLoss, RowGradientsMatchFiniteDifferences) {
  const int64_t V = 9;
  const std::vector<float> zs = random_row(V, 3, 4.f), zt = random_row(V, 4, 4.f);
  for (Divergence d : {Divergence::kForwardKl, Divergence::kReverseKl, Divergence::kJsd}) {
    for (double beta : {0.1, 0.5, 0.9}) {
      for (float cap : {0.f, 3.f}) {
        const DistillLossOptions o{.divergence = d, .beta = beta, .temperature = 2.0, .final_softcap = cap};
        std::vector<float> g(static_cast<size_t>(V));
        distill_row(zs.data(), zt.data(), V, o, g.data(), nullptr);
        for (int64_t j = 0; j < V; ++j) {
          const float h = 1e-2f;
          std::vector<float> a = zs, b = zs;
          a[j] += h;
          b[j] -= h;
          const double fd = (distill_row(a.data(), zt.data(), V, o, nullptr, nullptr) -
                             distill_row(b.data(), zt.data(), V, o, nullptr, nullptr)) / (2.0 * h);
          EXPECT_NEAR(g[j], fd, 1e-4 + 1e-3 * std::fabs(fd)) << divergence_name(d) << " beta " << beta << " cap " << cap
                                                              << " j " << j;
        }
      }
    }
  }
}

TEST(DistillLoss, ChunkedRowsEqualOneChunk) {
  auto s = student();
  auto t = teacher();
  const SftBatch b = reference_batch();
  std::vector<double> values;
  std::vector<Grads> grads;
  for (int64_t rows : {int64_t{1000}, int64_t{1}, int64_t{5}}) {  // 24 rows: one chunk, 24, and 5 (a ragged end)
    DistillLossOptions o = reference_options(Divergence::kJsd);
    o.chunk_rows = rows;
    o.alpha = 0.7;  // the hard-label term too
    const Tensor l = distill_loss(*s, *t, b, o, 1.0);
    values.push_back(l.item());
    backward(l);
    grads.push_back(take_grads(*s));
  }
  for (size_t i = 1; i < values.size(); ++i) {
    EXPECT_NEAR(values[i], values[0], 1e-6 * std::fabs(values[0]));
    EXPECT_LE(grad_rel_diff(grads[i], grads[0]), 1e-5);
  }
}

TEST(DistillLoss, AlphaZeroIsTheSftNll) {
  auto s = student();
  auto t = teacher();
  SftBatch b = reference_batch();
  for (size_t i = 0; i < b.targets.size(); i += 5) b.targets[i] = -100;  // some positions untrained
  b.n_targets = 0;
  for (int32_t y : b.targets) b.n_targets += y != -100;
  DistillLossOptions o = reference_options(Divergence::kForwardKl);
  o.alpha = 0;
  const Tensor kd = distill_loss(*s, *t, b, o, 1.0);
  backward(kd);
  const Grads g_kd = take_grads(*s);
  const Tensor nll = sft_loss(*s, b, SftLoss::kNll, 1.0);
  backward(nll);
  EXPECT_NEAR(kd.item(), nll.item(), 1e-5 * std::fabs(nll.item()));
  EXPECT_LE(grad_rel_diff(g_kd, take_grads(*s)), 1e-4);
}

TEST(DistillLoss, TeacherWithAnotherVocabularyIsRefused) {
  auto s = student();
  std::ifstream in(testing::fixtures_root() + "/posttrain/teacher/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  const int64_t v = s->config().vocab_size;
  cfg["vocab_size"] = v + 64;
  const auto t = Model::create(cfg.dump(), 1);
  try {
    check_teacher_vocab(*s, *t, "other");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string want = "vocab_size is " + std::to_string(v + 64) + " but the student's is " + std::to_string(v);
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe::posttrain
