// Option checks at the library boundary: generate() and SamplingState reject sampling options outside their
// ranges (NaN included) with InvalidArgument naming the field, before any work, for every caller.
#include "lathe/infer/generate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "lathe/base/error.h"
#include "lathe/infer/sampling_state.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {

void expect_rejected(const SamplingOptions& o, const std::string& field) {
  try {
    check_sampling_options(o);
    ADD_FAILURE() << field << " accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
  if (o.top_k >= -1) {  // SamplingParams reads top_k = -1 as off; generate's options do not
    EXPECT_THROW(SamplingState(to_sampling_params(o, 1), {.vocab = 8}), InvalidArgument) << field;
  }
}

TEST(SamplingOptions, OutOfRangeValuesAreRejectedNamingTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  expect_rejected({.temperature = nan}, "temperature");
  expect_rejected({.temperature = -1.f}, "temperature");
  expect_rejected({.temperature = inf}, "temperature");
  expect_rejected({.top_k = -5}, "top_k");
  expect_rejected({.top_p = 2.f}, "top_p");
  expect_rejected({.top_p = 0.f}, "top_p");
  expect_rejected({.top_p = nan}, "top_p");
  EXPECT_NO_THROW(check_sampling_options({}));
  EXPECT_NO_THROW(check_sampling_options({.temperature = 0.7f, .top_k = 5, .top_p = 0.9f, .seed = 3}));
  EXPECT_NO_THROW(check_sampling_options({.temperature = 1.f, .top_p = 1.f}));
}

TEST(Generate, RejectsBadOptionsBeforeRunning) {
  auto model = Model::load(testing::fixtures_root() + "/models/llama");
  const std::vector<int32_t> prompt = {1, 2};
  int tokens_seen = 0;
  auto count = [&](int32_t) { ++tokens_seen; };
  EXPECT_THROW(generate(*model, prompt, {.max_new_tokens = 4, .sampling = {.temperature = NAN}, .on_token = count}),
               InvalidArgument);
  EXPECT_THROW(generate(*model, prompt, {.max_new_tokens = 4, .sampling = {.top_k = -1}, .on_token = count}),
               InvalidArgument);
  EXPECT_THROW(generate(*model, prompt, {.max_new_tokens = -1, .on_token = count}), InvalidArgument);
  EXPECT_THROW(generate(*model, prompt, {.max_new_tokens = 4, .min_new_tokens = -2, .on_token = count}),
               InvalidArgument);
  EXPECT_EQ(tokens_seen, 0);
  // prompt + max_new_tokens beyond the context is named (the fixture's context is max_positions).
  const int64_t n_ctx = model->config().max_positions;
  ASSERT_GT(n_ctx, 2);
  // The last sampled token is never fed back, so prompt + max_new_tokens may be n_ctx + 1 and no more.
  const int fits = static_cast<int>(n_ctx - static_cast<int64_t>(prompt.size()) + 1);
  try {
    generate(*model, prompt, {.max_new_tokens = fits + 1, .on_token = count});
    ADD_FAILURE() << "a prompt + max_new_tokens beyond the context was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings"), std::string::npos) << e.what();
  }
  const GenerateResult r = generate(*model, prompt, {.max_new_tokens = fits, .stop_token_ids = {}});
  EXPECT_EQ(static_cast<int64_t>(r.tokens.size()), n_ctx + 1);
}

TEST(Generate, CancelEndsGenerationBeforeTheNextToken) {
  auto model = Model::load(testing::fixtures_root() + "/models/llama");
  std::atomic<bool> cancel{false};
  int seen = 0;
  GenerateOptions o{.max_new_tokens = 10};
  o.cancel = &cancel;
  o.on_token = [&](int32_t) {
    if (++seen == 3) cancel = true;  // as a Ctrl-C handler would, while the third token streams
  };
  const GenerateResult r = generate(*model, {1, 2}, o);
  EXPECT_EQ(seen, 3);
  EXPECT_EQ(r.tokens.size(), 2u + 3u);
  // The tokens before the cancel are those of an uncancelled run.
  const GenerateResult full = generate(*model, {1, 2}, {.max_new_tokens = 10});
  EXPECT_EQ(std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 5), r.tokens);
}

}  // namespace
}  // namespace lathe
