// KvCacheManager and KvBlockHasher: hash chains and their extra keys, prefix hits sharing blocks, the
// last token always recomputed, refusals that change nothing, eviction order, capacity sizing.
#include "lathe/serve/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/serve/kv_capacity.h"

namespace lathe {
namespace {

constexpr int kP = 4;  // a small block size keeps the token lists short

std::vector<int32_t> iota_tokens(int n, int32_t first = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

KvCacheManager make_manager(int64_t n_blocks, bool caching = true) {
  return KvCacheManager({.n_blocks = n_blocks, .block_size = kP, .enable_prefix_caching = caching, .hash_seed = 42});
}

// Admits a request of `tokens` with its cached prefix, computes all of it (as one step would) and
// commits its full blocks. Returns the tokens the hit saved.
int64_t run_prefill(KvCacheManager& m, uint64_t id, const std::vector<int32_t>& tokens, const KvCacheKeys& keys = {}) {
  const KvPrefixHit hit = m.find_cached_prefix(tokens, keys);
  const KvRequest admit{.id = id, .tokens = tokens, .n_computed = 0};
  EXPECT_TRUE(m.allocate_slots(admit, static_cast<int64_t>(tokens.size()) - hit.n_tokens, &hit));
  m.commit_full_blocks({.id = id, .tokens = tokens, .n_computed = static_cast<int64_t>(tokens.size())});
  return hit.n_tokens;
}

TEST(KvBlockHasher, ChainsParentTokensAndExtraKeys) {
  const KvBlockHasher h(1), other_seed(2);
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  const uint64_t base = h.extra_keys_hash({});
  const KvBlockHash ha = h.block_hash(KvBlockHasher::kNoParent, a, base);
  EXPECT_EQ(ha, h.block_hash(KvBlockHasher::kNoParent, a, base));  // deterministic
  EXPECT_NE(ha, h.block_hash(KvBlockHasher::kNoParent, b, base));
  EXPECT_NE(ha, h.block_hash(ha, a, base));  // same tokens after another parent
  EXPECT_NE(ha, h.block_hash(KvBlockHasher::kNoParent, a, h.extra_keys_hash({.cache_salt = "tenant-b"})));
  EXPECT_NE(ha, h.block_hash(KvBlockHasher::kNoParent, a, h.extra_keys_hash({.adapter_id = 3})));
  EXPECT_NE(h.extra_keys_hash({.adapter_id = 1, .cache_salt = "x"}), h.extra_keys_hash({.adapter_id = 1, .cache_salt = "y"}));
  EXPECT_NE(ha, other_seed.block_hash(KvBlockHasher::kNoParent, a, other_seed.extra_keys_hash({})));  // per-manager seeds
}

TEST(KvCacheManager, SamePrefixHitsAndSharesBlocks) {
  KvCacheManager m = make_manager(16);
  const std::vector<int32_t> a = iota_tokens(10);  // 2 full blocks + 2 tokens
  EXPECT_EQ(run_prefill(m, 1, a), 0);
  ASSERT_EQ(m.block_table(1).size(), 3u);
  EXPECT_EQ(m.pool().n_cached(), 2);  // the partial third block is not cached
  std::vector<int32_t> b(a.begin(), a.begin() + 8);
  for (int32_t t : {90, 91, 92}) b.push_back(t);
  EXPECT_EQ(run_prefill(m, 2, b), 8);
  const std::vector<int32_t> ta(m.block_table(1).begin(), m.block_table(1).end());  // copies: free(1) ends the span
  const std::span<const int32_t> tb = m.block_table(2);
  ASSERT_EQ(tb.size(), 3u);
  EXPECT_EQ(tb[0], ta[0]);
  EXPECT_EQ(tb[1], ta[1]);
  EXPECT_NE(tb[2], ta[2]);
  EXPECT_EQ(m.pool().block(ta[0]).ref_cnt, 2);
  EXPECT_EQ(m.pool().block(ta[2]).ref_cnt, 1);
  EXPECT_EQ(m.stats().prefix_cache_queries, 10 + 11);
  EXPECT_EQ(m.stats().prefix_cache_hits, 8);
  m.free(1);
  EXPECT_EQ(m.pool().block(ta[0]).ref_cnt, 1);  // b still holds the shared blocks
  m.free(2);
  EXPECT_EQ(m.n_free_blocks(), m.n_usable_blocks());
  EXPECT_DOUBLE_EQ(m.usage(), 0.0);
}

TEST(KvCacheManager, PartialBlocksAndOtherKeysDoNotHit) {
  KvCacheManager m = make_manager(16);
  const std::vector<int32_t> six = iota_tokens(6);
  run_prefill(m, 1, six, {.cache_salt = "s"});
  EXPECT_EQ(m.pool().n_cached(), 1);  // tokens 4, 5 fill half a block
  const std::vector<int32_t> longer = iota_tokens(12);
  EXPECT_EQ(m.find_cached_prefix(longer, {.cache_salt = "s"}).n_tokens, 4);
  EXPECT_EQ(m.find_cached_prefix(longer, {.cache_salt = "t"}).n_tokens, 0);
  EXPECT_EQ(m.find_cached_prefix(longer, {}).n_tokens, 0);
  EXPECT_EQ(m.find_cached_prefix(longer, {.adapter_id = 2, .cache_salt = "s"}).n_tokens, 0);
  // The chain stops at the first miss even where later blocks match.
  std::vector<int32_t> first_differs = longer;
  first_differs[0] = 77;
  EXPECT_EQ(m.find_cached_prefix(first_differs, {.cache_salt = "s"}).n_tokens, 0);
}

TEST(KvCacheManager, LastPromptTokenIsAlwaysRecomputed) {
  KvCacheManager m = make_manager(16);
  const std::vector<int32_t> eight = iota_tokens(8), nine = iota_tokens(9);
  run_prefill(m, 1, nine);  // caches blocks [0, 4) and [4, 8)
  // Exactly two full blocks: the second would hold the last token, so only the first hits.
  const KvPrefixHit h8 = m.find_cached_prefix(eight, {});
  EXPECT_EQ(h8.n_tokens, 4);
  EXPECT_EQ(h8.blocks.size(), 1u);
  EXPECT_EQ(m.find_cached_prefix(nine, {}).n_tokens, 8);  // one token left to compute
  const std::vector<int32_t> one = {0};
  EXPECT_EQ(m.find_cached_prefix(one, {}).n_tokens, 0);
}

TEST(KvCacheManager, RefusedAllocationChangesNothing) {
  KvCacheManager m = make_manager(5);  // 4 usable blocks
  const std::vector<int32_t> nine = iota_tokens(9);
  run_prefill(m, 1, nine);  // blocks 1, 2 (cached), 3
  m.free(1);
  ASSERT_EQ(m.pool().free_queue().ids(), (std::vector<int32_t>{4, 3, 2, 1}));  // freed last block first
  const std::vector<int32_t> b = iota_tokens(17);  // hits 2 blocks, needs 5 in all
  const KvPrefixHit hit = m.find_cached_prefix(b, {});
  ASSERT_EQ(hit.n_tokens, 8);
  const KvRequest rb{.id = 2, .tokens = b};
  // 3 new blocks, but the hit's 2 free blocks leave the queue when touched: only 2 remain.
  EXPECT_EQ(m.n_blocks_to_allocate(rb, 9, &hit), 3);
  const KvCacheStats before = m.stats();
  EXPECT_FALSE(m.allocate_slots(rb, 9, &hit));
  EXPECT_FALSE(m.has_request(2));
  EXPECT_EQ(m.pool().free_queue().ids(), (std::vector<int32_t>{4, 3, 2, 1}));
  EXPECT_EQ(m.pool().block(1).ref_cnt, 0);
  EXPECT_EQ(m.pool().n_cached(), 2);
  EXPECT_EQ(m.stats().prefix_cache_queries, before.prefix_cache_queries);
  EXPECT_EQ(m.stats().prefix_cache_hits, before.prefix_cache_hits);
  // 13 tokens fit: the hit's blocks, then the queue's head.
  const std::vector<int32_t> c = iota_tokens(13);
  const KvPrefixHit hc = m.find_cached_prefix(c, {});
  ASSERT_TRUE(m.allocate_slots({.id = 3, .tokens = c}, 5, &hc));
  EXPECT_EQ(std::vector<int32_t>(m.block_table(3).begin(), m.block_table(3).end()), (std::vector<int32_t>{1, 2, 4, 3}));
  // A running request's refusal leaves its table as it was.
  const KvRequest rc{.id = 3, .tokens = c, .n_computed = 13};
  EXPECT_FALSE(m.allocate_slots(rc, 4));
  EXPECT_EQ(m.block_table(3).size(), 4u);
  EXPECT_TRUE(m.allocate_slots(rc, 3));  // still inside its last block
}

TEST(KvCacheManager, FreedCachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  KvCacheManager m = make_manager(5);
  const std::vector<int32_t> a = iota_tokens(9);
  run_prefill(m, 1, a);  // blocks 1, 2 cached, 3 partial
  m.free(1);             // queue 4, 3, 2, 1
  EXPECT_EQ(m.find_cached_prefix(a, {}).n_tokens, 8);
  const std::vector<int32_t> other = iota_tokens(8, 100);
  const KvPrefixHit none = m.find_cached_prefix(other, {});
  ASSERT_TRUE(m.allocate_slots({.id = 2, .tokens = other}, 8, &none));  // takes 4 and 3
  EXPECT_EQ(m.find_cached_prefix(a, {}).n_tokens, 8);  // a's cached blocks survive
  ASSERT_TRUE(m.allocate_slots({.id = 2, .tokens = other, .n_computed = 8}, 1));  // takes 2: a's second block
  EXPECT_EQ(m.find_cached_prefix(a, {}).n_tokens, 4);
  ASSERT_TRUE(m.allocate_slots({.id = 2, .tokens = other, .n_computed = 9}, 4));  // takes 1
  EXPECT_EQ(m.find_cached_prefix(a, {}).n_tokens, 0);
  EXPECT_EQ(m.n_free_blocks(), 0);
  EXPECT_DOUBLE_EQ(m.usage(), 1.0);
}

TEST(KvCacheManager, DecodeStepsAllocateAtBlockBoundariesAndCommitTheirBlocks) {
  KvCacheManager m = make_manager(16);
  std::vector<int32_t> t = iota_tokens(3);
  run_prefill(m, 1, t);
  EXPECT_EQ(m.block_table(1).size(), 1u);
  for (int32_t next = 3; next < 9; ++next) {  // sample a token, then compute it
    t.push_back(next);
    const int64_t computed = static_cast<int64_t>(t.size()) - 1;
    ASSERT_TRUE(m.allocate_slots({.id = 1, .tokens = t, .n_computed = computed}, 1));
    EXPECT_EQ(static_cast<int64_t>(m.block_table(1).size()), (computed + kP) / kP);
    m.commit_full_blocks({.id = 1, .tokens = t, .n_computed = computed + 1});
  }
  EXPECT_EQ(m.pool().n_cached(), 2);  // positions [0, 8) of the 9
  const std::vector<int32_t> again = iota_tokens(9);
  EXPECT_EQ(m.find_cached_prefix(again, {}).n_tokens, 8);
}

TEST(KvCacheManager, CachingOffNeverHits) {
  KvCacheManager m = make_manager(16, false);
  const std::vector<int32_t> a = iota_tokens(9);
  run_prefill(m, 1, a);
  EXPECT_EQ(m.pool().n_cached(), 0);
  EXPECT_EQ(run_prefill(m, 2, a), 0);
  EXPECT_EQ(m.stats().prefix_cache_hits, 0);
}

TEST(KvCacheManager, RejectsMisuseNamingTheCall) {
  KvCacheManager m = make_manager(16);
  const std::vector<int32_t> a = iota_tokens(9);
  EXPECT_THROW(m.allocate_slots({.id = 1, .tokens = a}, 9), InvalidArgument);  // a new request needs its hit
  EXPECT_THROW(m.free(1), InvalidArgument);
  EXPECT_THROW(m.block_table(1), InvalidArgument);
  run_prefill(m, 1, a);
  const KvPrefixHit hit = m.find_cached_prefix(a, {});
  EXPECT_THROW(m.allocate_slots({.id = 1, .tokens = a, .n_computed = 9}, 1, &hit), InvalidArgument);
  EXPECT_THROW(m.allocate_slots({.id = 1, .tokens = a, .n_computed = 13}, 1), InvalidArgument);  // beyond its blocks
  EXPECT_THROW(m.allocate_slots({.id = 1, .tokens = a, .n_computed = 9}, -1), InvalidArgument);
  // A hit gone stale: its blocks were reallocated in between.
  m.free(1);
  const KvPrefixHit stale = m.find_cached_prefix(a, {});
  ASSERT_EQ(stale.n_tokens, 8);
  const std::vector<int32_t> big = iota_tokens(15 * kP, 1000);
  const KvPrefixHit none = m.find_cached_prefix(big, {});
  ASSERT_TRUE(m.allocate_slots({.id = 2, .tokens = big}, 15 * kP, &none));
  EXPECT_THROW(m.allocate_slots({.id = 3, .tokens = a}, 1, &stale), InvalidArgument);
  EXPECT_THROW(KvCacheManager({.n_blocks = 1}), InvalidArgument);
  EXPECT_THROW(KvCacheManager({.n_blocks = 8, .block_size = 0}), InvalidArgument);
}

TEST(KvCapacity, BytesToBlocksAndSummary) {
  const KvLayout layout{.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16};
  const int64_t per_block = 2 * 2 * 2 * 16 * 16 * static_cast<int64_t>(sizeof(float));  // K+V · L · Hkv · P · D
  EXPECT_EQ(kv_block_bytes(layout, 16, DType::kF32), per_block);
  EXPECT_EQ(kv_blocks_for_bytes(100 * per_block + per_block / 2, layout, 16, DType::kF32), 100);
  EXPECT_THROW(kv_blocks_for_bytes(2 * per_block - 1, layout, 16, DType::kF32), InvalidArgument);
  const std::string s = kv_capacity_summary(100, 16, layout, DType::kF32);
  EXPECT_NE(s.find("KV cache (f32): 99 blocks of 16 tokens = 1584 tokens (0.8 MiB)"), std::string::npos) << s;
}

// bf16 K and V take 2 bytes an element: the same budget holds twice the blocks, in the same MiB.
TEST(KvCapacity, Bf16HoldsTwiceTheBlocks) {
  const KvLayout layout{.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16};
  const int64_t per_block = 2 * 2 * 2 * 16 * 16 * static_cast<int64_t>(sizeof(uint16_t));
  EXPECT_EQ(kv_block_bytes(layout, 16, DType::kBF16), per_block);
  EXPECT_EQ(kv_blocks_for_bytes(100 * 2 * per_block + per_block / 2, layout, 16, DType::kBF16), 200);
  EXPECT_THROW(kv_blocks_for_bytes(2 * per_block - 1, layout, 16, DType::kBF16), InvalidArgument);
  EXPECT_EQ(kv_blocks_for_bytes(2 * per_block, layout, 16, DType::kBF16), 2);
  const std::string s = kv_capacity_summary(200, 16, layout, DType::kBF16);
  EXPECT_NE(s.find("KV cache (bf16): 199 blocks of 16 tokens = 3184 tokens (0.8 MiB)"), std::string::npos) << s;
}

// int8 K and V take a byte an element plus an f32 scale per (token, KV head): D + 4 bytes a slot, against
// 4·D (f32) and 2·D (bf16). At D = 64 the same budget holds 256/68 = 3.76x the f32 blocks, 1.88x the bf16.
TEST(KvCapacity, Int8HoldsNearlyFourTimesTheF32Blocks) {
  const KvLayout layout{.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 64};
  const int64_t slots = 2 * 2 * 2 * 16;  // K+V · L · Hkv · P
  const int64_t per_block = slots * (64 + static_cast<int64_t>(sizeof(float)));
  EXPECT_EQ(kv_block_bytes(layout, 16, DType::kI8), per_block);
  const int64_t budget = 100 * kv_block_bytes(layout, 16, DType::kF32);
  const int64_t f32 = kv_blocks_for_bytes(budget, layout, 16, DType::kF32),
                bf16 = kv_blocks_for_bytes(budget, layout, 16, DType::kBF16),
                int8 = kv_blocks_for_bytes(budget, layout, 16, DType::kI8);
  EXPECT_EQ(f32, 100);
  EXPECT_EQ(bf16, 200);
  EXPECT_EQ(int8, budget / per_block);
  EXPECT_GE(int8, 375);  // 3.76x f32, 1.88x bf16: the scales cost 4 of every 68 bytes
  EXPECT_THROW(kv_blocks_for_bytes(2 * per_block - 1, layout, 16, DType::kI8), InvalidArgument);
  const std::string s = kv_capacity_summary(int8, 16, layout, DType::kI8);
  EXPECT_EQ(s.find("KV cache (int8): " + std::to_string(int8 - 1) + " blocks of 16 tokens"), 0u) << s;
}

}  // namespace
}  // namespace lathe
