// prompt_logprobs through EngineBackend on a real Engine (the random Qwen3 text model, the real Qwen3
// tokenizer): every choice of a prompt reports its prompt's logprobs once (T - 1 positions, each with
// the prompt token at its rank and the top k at ranks 1..k, equal to a dense forward's log-softmax), for
// completions and chat; with stream a positive value is a 400 (vLLM) and 0 is accepted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/serve/frontend/engine_backend.h"
#include "lathe/serve/engine/engine_test_util.h"
#include "lathe/serve/frontend/frontend_test_util.h"
#include "lathe/serve/http/api_error.h"

namespace lathe::serve {
namespace {

using testing::BackendFixture;
using testing::BackendResult;

// f32 logits through paged vs dense attention differ by a few ulps of their sums: far below this.
constexpr double kTol = 1e-4;

// Checks one choice's prompt logprobs against the prompt and the dense reference, with k alternatives.
void expect_prompt_logprobs(const std::vector<PromptPositionLogprobs>& got, const std::vector<int32_t>& prompt,
                            const std::vector<double>& want, int k) {
  ASSERT_EQ(got.size(), prompt.size() - 1);
  for (size_t i = 0; i < got.size(); ++i) {
    const PromptPositionLogprobs& e = got[i];
    ASSERT_GE(e.size(), static_cast<size_t>(k));
    ASSERT_LE(e.size(), static_cast<size_t>(k) + 1);
    const auto own = std::find_if(e.begin(), e.end(), [&](const PromptLogprobEntry& x) { return x.token_id == prompt[i + 1]; });
    ASSERT_NE(own, e.end()) << "position " << i + 1 << " lacks its prompt token";
    EXPECT_NEAR(own->logprob, want[i], kTol) << "position " << i + 1;
    EXPECT_GE(own->rank, 1);
    for (int j = 0; j < k; ++j) {
      if (e[j].token_id != prompt[i + 1]) {
        EXPECT_EQ(e[j].rank, j + 1);
      }
      if (j > 0) {
        EXPECT_GE(e[j - 1].logprob, e[j].logprob);
      }
    }
  }
}

TEST(EngineBackendPromptLogprobs, EveryChoiceOfEveryPromptReportsItsPromptOnce) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const std::vector<std::string> prompts = {"The capital of France is", "One two three four five six"};
  const BackendResult r = f.run({{"prompt", prompts}, {"n", 2}, {"seed", 1}, {"max_tokens", 3}, {"ignore_eos", true},
                                 {"prompt_logprobs", 2}});
  ASSERT_FALSE(r.error) << r.error->message;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<int32_t> ids = f.encode(prompts[p]);
    const std::vector<double> want = testing::dense_prompt_logprobs(*f.model, ids);
    for (int c = 0; c < 2; ++c) {
      const int index = static_cast<int>(p) * 2 + c;
      ASSERT_TRUE(r.prompt_logprobs.count(index)) << "choice " << index;
      expect_prompt_logprobs(r.prompt_logprobs.at(index), ids, want, 2);
    }
    // The entries' text is the token's.
    const PromptLogprobEntry& first = r.prompt_logprobs.at(static_cast<int>(p) * 2).front().front();
    EXPECT_EQ(first.token, f.tok->decode(std::vector<uint32_t>{static_cast<uint32_t>(first.token_id)}, false));
  }
  EXPECT_EQ(r.usage.completion_tokens, 4 * 3);
  // Without the field: none.
  EXPECT_TRUE(f.run({{"prompt", prompts[0]}, {"max_tokens", 2}}).prompt_logprobs.empty());
}

TEST(EngineBackendPromptLogprobs, ChatReportsTheRenderedPrompts) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const BackendResult r = f.run({{"messages", {{{"role", "user"}, {"content", "Hi there"}}}}, {"max_tokens", 2},
                                 {"prompt_logprobs", 0}, {"temperature", 0}});
  ASSERT_FALSE(r.error) << r.error->message;
  ASSERT_TRUE(r.prompt_logprobs.count(0));
  EXPECT_GT(r.prompt_logprobs.at(0).size(), 5u);  // the chat template's tokens
  for (const PromptPositionLogprobs& e : r.prompt_logprobs.at(0)) {
    ASSERT_EQ(e.size(), 1u);  // k = 0: the prompt token alone
    EXPECT_TRUE(std::isfinite(e[0].logprob) && e[0].logprob <= 0.f);
  }
}

TEST(EngineBackendPromptLogprobs, StreamingTakesZeroAndRefusesMore) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  try {
    f.run({{"prompt", "x"}, {"prompt_logprobs", 1}, {"stream", true}});
    ADD_FAILURE() << "accepted";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().status, 400);
    EXPECT_EQ(e.error().param, "prompt_logprobs");
  }
  const BackendResult r = f.run({{"prompt", "x y"}, {"prompt_logprobs", 0}, {"stream", true}, {"max_tokens", 2}});
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_TRUE(r.prompt_logprobs.empty());  // a stream shows none (vLLM)
}

}  // namespace
}  // namespace lathe::serve
