// End to end: greedy decoding of requests through KvCacheManager's block tables over one PagedKvStore
// gives infer/generate's tokens, for every fixture family, with and without prefix hits (a request
// repeating a prompt, two requests sharing a prefix in one batch, a prompt extending an earlier answer),
// and never writes into the shared blocks it reuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/infer/generate.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "lathe/models/paged_kv_store.h"
#include "lathe/serve/kv_cache_manager.h"

namespace lathe {
namespace {

constexpr int kBlockSize = 4;  // small blocks: the fixtures' 12-token prompts span several
constexpr int kNewTokens = 10;

struct ManagedRun {
  std::vector<std::vector<int32_t>> tokens;  // per request: prompt + kNewTokens greedy tokens
  std::vector<int64_t> hit_tokens;           // per request: tokens its prefix hit saved
  std::vector<std::vector<int32_t>> first_tables;  // per request: its block table at admission
};

// The requests decoded together, one step per token, as the engine's loop drives the manager:
// admission with a prefix lookup, room for each step's tokens, the forward over the block tables,
// commits of the blocks the step filled; freed at the end.
ManagedRun generate_with_manager(const Model& model, PagedKvStore& store, KvCacheManager& kv,
                          const std::vector<std::vector<int32_t>>& prompts, uint64_t first_id) {
  NoGradGuard no_grad;
  const int64_t S = static_cast<int64_t>(prompts.size()), V = model.config().vocab_size;
  ManagedRun run;
  run.tokens = prompts;
  std::vector<int64_t> computed(S);
  for (int64_t s = 0; s < S; ++s) {
    const KvPrefixHit hit = kv.find_cached_prefix(prompts[s], {});
    EXPECT_TRUE(kv.allocate_slots({.id = first_id + s, .tokens = prompts[s]},
                                  static_cast<int64_t>(prompts[s].size()) - hit.n_tokens, &hit));
    computed[s] = hit.n_tokens;
    run.hit_tokens.push_back(hit.n_tokens);
    const std::span<const int32_t> t = kv.block_table(first_id + s);
    run.first_tables.emplace_back(t.begin(), t.end());
  }
  for (int step = 0; step < kNewTokens; ++step) {
    // Room first for every request, then the chunks: a table's span is valid until its next allocation.
    for (int64_t s = 0; s < S; ++s) {
      const KvRequest r{.id = first_id + s, .tokens = run.tokens[s], .n_computed = computed[s]};
      EXPECT_TRUE(kv.allocate_slots(r, static_cast<int64_t>(run.tokens[s].size()) - computed[s]));
    }
    std::vector<SequenceChunk> chunks;
    for (int64_t s = 0; s < S; ++s)
      chunks.push_back({.tokens = std::span<const int32_t>(run.tokens[s]).subspan(computed[s]),
                        .start = computed[s], .block_table = kv.block_table(first_id + s)});
    const Tensor logits = model.forward(cached_batch(store, chunks));  // [S, V]
    for (int64_t s = 0; s < S; ++s) {
      computed[s] = static_cast<int64_t>(run.tokens[s].size());
      kv.commit_full_blocks({.id = first_id + s, .tokens = run.tokens[s], .n_computed = computed[s]});
      const float* row = logits.data<float>() + s * V;
      run.tokens[s].push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));  // greedy, lowest id on ties
    }
  }
  for (int64_t s = 0; s < S; ++s) kv.free(first_id + s);
  return run;
}

std::vector<int32_t> reference(Model& model, const std::vector<int32_t>& prompt) {
  return generate(model, prompt, {.max_new_tokens = kNewTokens, .min_new_tokens = kNewTokens}).tokens;
}

// The K and V of `blocks` in every layer, bit for bit.
std::vector<float> block_contents(const PagedKvStore& store, std::span<const int32_t> blocks) {
  const PagedKvStoreConfig& c = store.config();
  const int64_t per_block = static_cast<int64_t>(c.n_kv_heads) * c.block_size * c.head_dim;
  std::vector<float> out;
  for (int l = 0; l < c.n_layers; ++l)
    for (const Tensor* t : {&store.keys(l), &store.values(l)})
      for (const int32_t b : blocks) {
        const float* p = t->data<float>() + b * per_block;
        out.insert(out.end(), p, p + per_block);
      }
  return out;
}

class KvCacheGenerate : public ::testing::TestWithParam<std::string> {};

TEST_P(KvCacheGenerate, GreedyTokensEqualGenerateWithAndWithoutPrefixHits) {
  const std::string dir = testing::fixtures_root() + "/models/" + GetParam();
  auto model = Model::load(dir);
  // Prompts from the fixture's input ids [2, T]: row 0, and row 0's first 8 tokens followed by row 1.
  const Tensor ids = SafetensorsFile::open(dir + "/reference.safetensors").tensor("input_ids").to(DType::kI32);
  const int64_t T = ids.size(1);
  ASSERT_GE(T, 3 * kBlockSize);
  const int32_t* id = ids.data<int32_t>();
  const std::vector<int32_t> p1(id, id + T);
  std::vector<int32_t> p2(id, id + 2 * kBlockSize);
  p2.insert(p2.end(), id + T, id + 2 * T);
  const std::vector<int32_t> want1 = reference(*model, p1), want2 = reference(*model, p2);

  PagedKvStore store(paged_kv_store_config(model->config(), 64, kBlockSize));
  KvCacheManager kv({.n_blocks = store.n_blocks(), .block_size = store.block_size(), .hash_seed = 7});

  const ManagedRun cold = generate_with_manager(*model, store, kv, {p1}, 1);
  EXPECT_EQ(cold.tokens[0], want1);
  EXPECT_EQ(cold.hit_tokens[0], 0);

  // The same prompt again: its full blocks before the last token come from the cache.
  const int64_t max_hit = (T - 1) / kBlockSize * kBlockSize;
  const ManagedRun warm = generate_with_manager(*model, store, kv, {p1}, 2);
  EXPECT_EQ(warm.tokens[0], want1);
  EXPECT_EQ(warm.hit_tokens[0], max_hit);
  for (int64_t b = 0; b < max_hit / kBlockSize; ++b) EXPECT_EQ(warm.first_tables[0][b], cold.first_tables[0][b]);

  // Two requests sharing two blocks in one batch; the shared blocks are read, never written.
  const std::span<const int32_t> shared = std::span<const int32_t>(cold.first_tables[0]).first(2);
  const std::vector<float> shared_before = block_contents(store, shared);
  const ManagedRun both = generate_with_manager(*model, store, kv, {p1, p2}, 3);
  EXPECT_EQ(both.tokens[0], want1);
  EXPECT_EQ(both.tokens[1], want2);
  EXPECT_EQ(both.hit_tokens[0], max_hit);
  EXPECT_EQ(both.hit_tokens[1], 2 * kBlockSize);
  EXPECT_EQ(both.first_tables[1][0], both.first_tables[0][0]);
  EXPECT_EQ(both.first_tables[1][1], both.first_tables[0][1]);
  EXPECT_TRUE(block_contents(store, shared) == shared_before) << "a shared block was written";

  // A follow-up turn: the first answer as the prompt reuses the blocks its decoding filled.
  const std::vector<int32_t> p3 = want1;
  const ManagedRun follow = generate_with_manager(*model, store, kv, {p3}, 5);
  EXPECT_EQ(follow.tokens[0], reference(*model, p3));
  EXPECT_EQ(follow.hit_tokens[0], (static_cast<int64_t>(p3.size()) - 1) / kBlockSize * kBlockSize);

  EXPECT_EQ(kv.n_free_blocks(), kv.n_usable_blocks());
  EXPECT_GT(kv.stats().prefix_cache_hits, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvCacheGenerate,
                         ::testing::ValuesIn(testing::fixture_model_names("reference.safetensors")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace lathe
