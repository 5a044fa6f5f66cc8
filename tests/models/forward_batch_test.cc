// ForwardBatch edges the ragged tests do not reach: packed documents in rows (the [B, T] path training
// takes) against the same documents as free sequences, the per-token log-prob head against the logits,
// a forward over a store from a model whose parameters require grad, and the batches and stores a forward
// must refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "lathe/models/paged_kv_store.h"
#include "fixture_model.h"

namespace lathe {
namespace {

std::vector<std::string> fixture_models() { return testing::fixture_model_names(); }

std::unique_ptr<Model> load(const std::string& name) { return testing::load_fixture_model_f32(name); }

// Two rows of 12 tokens holding documents of 5, 7 | 3, 9 tokens (positions restart per document).
struct Packed {
  std::vector<int32_t> tokens, positions;
};
Packed two_rows(int64_t vocab) {
  Packed p;
  const std::vector<int> docs = {5, 7, 3, 9};
  int salt = 0;
  for (const int n : docs)
    for (int i = 0; i < n; ++i) {
      p.tokens.push_back(static_cast<int32_t>((salt++ * 29 + 3) % vocab));
      p.positions.push_back(i);
    }
  return p;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  float d = 0.f;
  for (int64_t i = 0; i < x.numel(); ++i) d = std::max(d, std::abs(x.data<float>()[i] - y.data<float>()[i]));
  return d;
}

class ForwardBatchModel : public ::testing::TestWithParam<std::string> {};

// The [B, T] path with per-row key starts (row_length) and the [1, N] path see the same documents.
TEST_P(ForwardBatchModel, PackedRowsMatchFreeSequences) {
  auto m = load(GetParam());
  NoGradGuard ng;
  const Packed p = two_rows(m->config().vocab_size);
  const Tensor in_rows = m->forward(ForwardBatch::packed(p.tokens, p.positions, 12));
  const Tensor free_seqs = m->forward(ForwardBatch::packed(p.tokens, p.positions));
  ASSERT_EQ(in_rows.shape(), free_seqs.shape());
  EXPECT_LE(max_abs_diff(in_rows, free_seqs), 1e-5f) << GetParam();
}

// log p(target) and the entropy from the fused head equal those of the full logits' log-softmax.
TEST_P(ForwardBatchModel, TokenLogprobsMatchTheLogits) {
  auto m = load(GetParam());
  NoGradGuard ng;
  const int64_t V = m->config().vocab_size;
  const Packed p = two_rows(V);
  const ForwardBatch batch = ForwardBatch::packed(p.tokens, p.positions, 12);
  std::vector<int32_t> targets;
  for (size_t i = 0; i < p.tokens.size(); ++i) targets.push_back(i == 3 ? -100 : static_cast<int32_t>((i * 13 + 1) % V));
  const Tensor t = Tensor::from_data_i32({static_cast<int64_t>(targets.size())}, targets);
  const TokenLogprobs lp = m->token_logprobs(batch, t, {}, /*want_entropy=*/true);
  const Tensor logits = m->forward(batch);  // [N, V]
  for (int64_t i = 0; i < logits.size(0); ++i) {
    const float* z = logits.data<float>() + i * V;
    double mx = z[0], sum = 0, ent = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max<double>(mx, z[j]);
    for (int64_t j = 0; j < V; ++j) sum += std::exp(z[j] - mx);
    const double lse = mx + std::log(sum);
    for (int64_t j = 0; j < V; ++j) ent -= std::exp(z[j] - lse) * (z[j] - lse);
    const double want_lp = targets[i] == -100 ? 0.0 : z[targets[i]] - lse;
    const double want_ent = targets[i] == -100 ? 0.0 : ent;
    EXPECT_NEAR(lp.logprobs.data<float>()[i], want_lp, 1e-4) << GetParam() << " row " << i;
    EXPECT_NEAR(lp.entropy.data<float>()[i], want_ent, 1e-4) << GetParam() << " row " << i;
  }
}

// A rollout inside a training process: the parameters require grad, grad mode is on, and a forward over
// the store still runs (recording nothing).
TEST_P(ForwardBatchModel, StoreForwardRunsWhileParametersRequireGrad) {
  auto m = load(GetParam());
  m->set_requires_grad(true);
  PagedKvStore store(paged_kv_store_config(m->config(), 4));
  const KvSequence seq = store.allocate(8);
  const std::vector<int32_t> prompt = {1, 2, 3};
  const SequenceChunk chunk{.tokens = prompt, .start = 0, .block_table = store.block_table(seq)};
  const Tensor logits = m->forward(cached_batch(store, std::span<const SequenceChunk>(&chunk, 1)));
  EXPECT_EQ(logits.shape(), (Shape{1, m->config().vocab_size}));
  EXPECT_FALSE(logits.requires_grad());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ForwardBatchModel, ::testing::ValuesIn(fixture_models()),
                         [](const auto& info) { return info.param; });

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(ForwardBatchRefuses, AStoreOfAnotherShapeAndAContextBeyondTheRows) {
  const auto names = fixture_models();
  ASSERT_FALSE(names.empty());
  auto m = load(names.front());
  NoGradGuard ng;
  PagedKvStoreConfig other = paged_kv_store_config(m->config(), 4);
  other.head_dim *= 2;  // would read past q and write past the output rows
  PagedKvStore wrong(other);
  const KvSequence seq = wrong.allocate(8);
  const std::vector<int32_t> prompt = {1, 2};
  SequenceChunk chunk{.tokens = prompt, .start = 0, .block_table = wrong.block_table(seq)};
  const std::string e1 = error_of([&] { m->forward(cached_batch(wrong, std::span<const SequenceChunk>(&chunk, 1))); });
  EXPECT_NE(e1.find("KV store holds"), std::string::npos) << e1;

  PagedKvStore store(paged_kv_store_config(m->config(), 4));
  const KvSequence s2 = store.allocate(8);
  chunk.block_table = store.block_table(s2);
  ForwardBatch b = cached_batch(store, std::span<const SequenceChunk>(&chunk, 1));
  b.context_lens[0] = 5;  // keys 2..4 were never written
  const std::string e2 = error_of([&] { m->forward(b); });
  EXPECT_NE(e2.find("context length 5"), std::string::npos) << e2;

  const Packed p = two_rows(m->config().vocab_size);
  ForwardBatch b3 = ForwardBatch::packed(p.tokens, p.positions);  // documents of 5, 7, 3, 9 tokens
  b3.row_length = 8;                                              // the second one crosses row 1
  const std::string e3 = error_of([&] { m->forward(b3); });
  EXPECT_NE(e3.find("crosses row"), std::string::npos) << e3;
}

}  // namespace
}  // namespace lathe
