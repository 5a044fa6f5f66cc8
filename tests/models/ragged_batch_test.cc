// Ragged batches over a KV store: five sequences of different lengths in one ForwardBatch (prefill chunks
// from scratch, a chunk and decode rows over context cached by an earlier call) give every row the
// logits of the same sequence run alone; and greedy generation gives a sequence the same tokens alone or
// batched. For every fixture family (sliding-window and soft-capped ones included).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lathe/autograd/node.h"
#include "lathe/infer/generate.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "lathe/models/paged_kv_store.h"
#include "fixture_model.h"

namespace lathe {
namespace {

std::vector<std::string> fixture_models() { return testing::fixture_model_names(); }

std::unique_ptr<Model> load(const std::string& name) { return testing::load_fixture_model_f32(name); }

PagedKvStore make_store(const ModelConfig& c, int64_t n_blocks, int block_size) {
  return PagedKvStore(paged_kv_store_config(c, n_blocks, block_size));
}

std::vector<int32_t> tokens(int64_t n, int64_t salt, int64_t vocab) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + salt * 101 + 7) % vocab));
  return t;
}

// A sequence of the ragged batch: `cached` tokens written by an earlier call, then `fresh` in this one.
struct Case {
  int64_t cached, fresh;
};

class RaggedBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(RaggedBatch, EveryRowMatchesItsSequenceRunAlone) {
  auto m = load(GetParam());
  NoGradGuard ng;
  const ModelConfig& c = m->config();
  const int64_t V = c.vocab_size;
  // Lengths 40, 1, 26, 24, 6: two prefills from scratch, a chunk over 17 cached positions, two decode rows.
  const std::vector<Case> cases = {{0, 40}, {0, 1}, {17, 9}, {23, 1}, {5, 1}};
  const int block_size = 4;  // small blocks: sequences cross many, and windows of 4 skip whole ones
  PagedKvStore store = make_store(c, 64, block_size);
  std::vector<std::vector<int32_t>> seq_tokens;
  std::vector<KvSequence> seqs;
  std::vector<SequenceChunk> earlier, now;
  for (size_t s = 0; s < cases.size(); ++s) {
    seq_tokens.push_back(tokens(cases[s].cached + cases[s].fresh, static_cast<int64_t>(s), V));
    seqs.push_back(store.allocate(cases[s].cached + cases[s].fresh));
  }
  for (size_t s = 0; s < cases.size(); ++s) {
    const std::span<const int32_t> t = seq_tokens[s];
    if (cases[s].cached > 0)
      earlier.push_back({.tokens = t.first(cases[s].cached), .start = 0, .block_table = store.block_table(seqs[s])});
    now.push_back({.tokens = t.subspan(cases[s].cached), .start = cases[s].cached,
                   .block_table = store.block_table(seqs[s]), .want_all = true});
  }
  m->forward(cached_batch(store, earlier));  // writes the earlier context
  const Tensor logits = m->forward(cached_batch(store, now));  // [sum fresh, V]

  int64_t row = 0;
  for (size_t s = 0; s < cases.size(); ++s) {
    SCOPED_TRACE("sequence " + std::to_string(s));
    // Alone: the whole sequence in a forward of its own, without a store.
    const int64_t n = cases[s].cached + cases[s].fresh;
    const Tensor alone = m->forward(ForwardBatch::rows(Tensor::from_data_i32({1, n}, seq_tokens[s])));  // [n, V]
    double worst = 0;
    for (int64_t i = 0; i < cases[s].fresh; ++i) {
      const float* got = logits.data<float>() + (row + i) * V;
      const float* want = alone.data<float>() + (cases[s].cached + i) * V;
      for (int64_t j = 0; j < V; ++j) worst = std::max(worst, std::fabs(static_cast<double>(got[j]) - want[j]));
    }
    EXPECT_LE(worst, 1e-5);
    row += cases[s].fresh;
  }
  ASSERT_EQ(row, logits.size(0));
}

TEST_P(RaggedBatch, GreedyTokensAreTheSameAloneOrBatched) {
  auto m = load(GetParam());
  const int64_t V = m->config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t n : {1, 7, 13, 40, 3}) prompts.push_back(tokens(n, n, V));
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.min_new_tokens = 12;
  const std::vector<GenerateResult> batched = generate_batch(*m, prompts, o);
  ASSERT_EQ(batched.size(), prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    const GenerateResult alone = generate(*m, prompts[s], o);
    EXPECT_EQ(batched[s].tokens, alone.tokens) << "prompt " << s;
    EXPECT_EQ(static_cast<int64_t>(alone.tokens.size()), static_cast<int64_t>(prompts[s].size()) + 12);
  }
  // A sequence that stops early leaves the batch; the others keep their tokens.
  GenerateOptions stop = o;
  stop.min_new_tokens = 0;
  stop.stop_token_ids = {batched[1].tokens[prompts[1].size() + 2]};  // prompt 1's third new token
  const std::vector<GenerateResult> stopped = generate_batch(*m, prompts, stop);
  for (size_t s = 0; s < prompts.size(); ++s) {
    const GenerateResult alone = generate(*m, prompts[s], stop);
    EXPECT_EQ(stopped[s].tokens, alone.tokens) << "prompt " << s;
  }
  EXPECT_LE(stopped[1].tokens.size(), prompts[1].size() + 3);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RaggedBatch, ::testing::ValuesIn(fixture_models()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace lathe
