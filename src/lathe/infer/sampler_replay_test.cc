// The trainer replays the sampler (specs/posttrain.md §5.6): the log-probs the sampler reports for the tokens it
// draws (logprobs_mode processed: temperature, top-k, top-p) equal linear_token_logprobs of the same head with
// the same LogprobProcessing, so the rollout/trainer mismatch diagnostics of GRPO measure kernels, not a
// different distribution (trl#6789); without the processing they differ by the temperature and the kept mass.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/infer/sampler.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/logprob.h"

namespace lathe {
namespace {

TEST(SamplerReplay, TrainerLogProbsOfSampledTokensEqualTheSamplers) {
  const int64_t b = 32, c = 16, v = 300;
  const Tensor h = testing::random_tensor({b, c}, 21, 1.f), w = testing::random_tensor({v, c}, 22, 0.8f);
  const std::vector<float> logits = linear(h, w).to_vector();  // [B, V]
  for (const LogprobProcessing pr :
       {LogprobProcessing{.temperature = 0.7f}, LogprobProcessing{.temperature = 1.f, .top_k = 20},
        LogprobProcessing{.temperature = 0.9f, .top_p = 0.8f},
        LogprobProcessing{.temperature = 1.4f, .top_k = 50, .top_p = 0.9f}}) {
    const std::string where =
        "T " + std::to_string(pr.temperature) + " k " + std::to_string(pr.top_k) + " p " + std::to_string(pr.top_p);
    Sampler sampler(v);
    std::vector<int32_t> tokens;
    std::vector<float> sampled_logps;
    for (int64_t i = 0; i < b; ++i) {
      SamplingParams p{.temperature = pr.temperature, .top_k = static_cast<int>(pr.top_k), .top_p = pr.top_p};
      p.logprobs = 0;
      p.logprobs_mode = LogprobsMode::kProcessed;
      SamplingState s(p, {.seed = static_cast<uint64_t>(100 + i), .vocab = v});
      SamplingState* rows[] = {&s};
      SampledToken out[1];
      sampler.sample(logits.data() + i * v, rows, out);
      tokens.push_back(out[0].token);
      sampled_logps.push_back(out[0].logprob);
    }
    const Tensor targets = Tensor::from_data_i32({b}, tokens);
    const std::vector<float> replay =
        linear_token_logprobs(h, w, targets, {.chunk_size = 64, .processing = pr}).logprobs.to_vector();
    const std::vector<float> plain = linear_token_logprobs(h, w, targets, {.chunk_size = 64}).logprobs.to_vector();
    double off = 0;
    for (int64_t i = 0; i < b; ++i) {
      // The same f32 logits up to the GEMM's blocking, and two f32 log-sum-exps: 1e-5 (1 + |logp|).
      EXPECT_NEAR(replay[i], sampled_logps[i], 1e-5 * (1 + std::fabs(sampled_logps[i]))) << where << " row " << i;
      off = std::max(off, static_cast<double>(std::fabs(plain[i] - sampled_logps[i])));
    }
    EXPECT_GT(off, 1e-3) << where << ": the model's own distribution is not the processed one";
  }
}

}  // namespace
}  // namespace lathe
