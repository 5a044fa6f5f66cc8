#include "lathe/models/paged_kv_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "lathe/base/context.h"
#include "lathe/ref/attention.h"
#include "lathe/ref/paged_attention.h"

namespace lathe {
namespace {

PagedKvStoreConfig small_config(int64_t n_blocks, int P = 4, DType kv_dtype = DType::kF32) {
  return {.n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .n_blocks = n_blocks, .block_size = P,
          .kv_dtype = kv_dtype};
}

TEST(PagedKvStore, AllocateHandsOutDisjointBlocksAndFreeReturnsThem) {
  PagedKvStore store(small_config(10));
  EXPECT_EQ(store.capacity_tokens(), 40);
  const KvSequence a = store.allocate(9), b = store.allocate(4), c = store.allocate(1);
  EXPECT_EQ(store.block_table(a).size(), 3u);  // ceil(9 / 4)
  EXPECT_EQ(store.block_table(b).size(), 1u);
  EXPECT_EQ(store.block_table(c).size(), 1u);
  EXPECT_EQ(store.free_tokens(), 20);
  std::set<int32_t> seen;
  for (KvSequence s : {a, b, c})
    for (int32_t blk : store.block_table(s)) {
      EXPECT_TRUE(blk >= 0 && blk < 10);
      EXPECT_TRUE(seen.insert(blk).second) << "block " << blk << " given twice";
    }
  store.free(b);
  EXPECT_EQ(store.free_tokens(), 24);
  EXPECT_THROW(store.block_table(b), InvalidArgument);
  EXPECT_THROW(store.free(b), InvalidArgument);
  const KvSequence d = store.allocate(24);  // exactly what is free
  EXPECT_EQ(store.free_tokens(), 0);
  for (int32_t blk : store.block_table(d)) EXPECT_NE(blk, store.block_table(c)[0]) << "c's block given to d";
  EXPECT_THROW(store.allocate(1), KvStoreFull);
  store.free(a);
  EXPECT_EQ(store.free_tokens(), 12);
  EXPECT_THROW(store.allocate(13), KvStoreFull);  // refused whole: nothing is taken
  EXPECT_EQ(store.free_tokens(), 12);
  EXPECT_EQ(store.block_table(store.allocate(12)).size(), 3u);
  EXPECT_THROW(store.allocate(0), InvalidArgument);
}

TEST(PagedKvStore, RejectsBadConfigs) {
  PagedKvStoreConfig c = small_config(4);
  c.n_heads = 3;  // not a multiple of Hkv = 2
  EXPECT_THROW(PagedKvStore{c}, InvalidArgument);
  c = small_config(0);
  EXPECT_THROW(PagedKvStore{c}, InvalidArgument);
  c = small_config(4, 4, DType::kF16);  // K and V are f32, bf16 or int8
  EXPECT_THROW(PagedKvStore{c}, InvalidArgument);
}

// A bf16 store: the same blocks and tokens, each layer's K and V [n_blocks, Hkv, P, D] in half the bytes.
TEST(PagedKvStore, Bf16PoolHasTheSameCapacityInHalfTheBytes) {
  PagedKvStore f32(small_config(10)), bf16(small_config(10, 4, DType::kBF16));
  EXPECT_EQ(bf16.capacity_tokens(), f32.capacity_tokens());
  EXPECT_EQ(bf16.config().kv_dtype, DType::kBF16);
  for (int l = 0; l < 2; ++l)
    for (const Tensor* t : {&bf16.keys(l), &bf16.values(l)}) {
      EXPECT_EQ(t->dtype(), DType::kBF16);
      EXPECT_EQ(t->shape(), f32.keys(l).shape());
      EXPECT_EQ(t->nbytes() * 2, f32.keys(l).nbytes());
    }
  const ModelConfig m{.n_layers = 3, .n_heads = 8, .n_kv_heads = 2, .head_dim = 32};
  EXPECT_EQ(paged_kv_store_config(m, 5, 8, DType::kBF16).kv_dtype, DType::kBF16);
  EXPECT_EQ(paged_kv_store_config(m, 5).kv_dtype, DType::kF32);  // f32 unless asked
}

// An int8 store: the same blocks and tokens, K and V codes [n_blocks, Hkv, P, D] int8 with an f32 scale
// [n_blocks, Hkv, P] each; kv_slot_bytes counts both.
TEST(PagedKvStore, Int8PoolHoldsCodesAndScalesPerSlot) {
  PagedKvStore f32(small_config(10)), int8(small_config(10, 4, DType::kI8));
  EXPECT_EQ(int8.capacity_tokens(), f32.capacity_tokens());
  for (int l = 0; l < 2; ++l) {
    for (const Tensor* t : {&int8.keys(l), &int8.values(l)}) {
      EXPECT_EQ(t->dtype(), DType::kI8);
      EXPECT_EQ(t->shape(), f32.keys(l).shape());
    }
    for (const Tensor* t : {&int8.key_scales(l), &int8.value_scales(l)}) {
      EXPECT_EQ(t->dtype(), DType::kF32);
      EXPECT_EQ(t->shape(), (Shape{10, 2, 4}));
    }
    EXPECT_FALSE(f32.key_scales(l).defined());
  }
  EXPECT_EQ(kv_slot_bytes(16, DType::kI8), 16 + 4);
  EXPECT_EQ(kv_slot_bytes(16, DType::kBF16), 32);
  EXPECT_EQ(kv_slot_bytes(16, DType::kF32), 64);
}

std::vector<float> uniform(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(n);
  for (float& e : x) e = u(rng);
  return x;
}

// Three sequences through two calls: prefill chunks, then a mixed call (a decode row, a second chunk, a
// new sequence). Each row must equal contiguous attention over its whole sequence (the cached keys come
// from the first call's writes; a bf16 store's keys and values rounded to bf16, an int8 store's quantised
// and dequantised per (token, KV head), as it stores them), with the layer's pool untouched by the other layer.
void expect_two_calls_match_contiguous_attention(DType kv_dtype) {
  const int H = 4, Hkv = 2, D = 16;
  const AttentionOptions opt{.window = 7, .softcap = 5.f};
  PagedKvStore store(small_config(40, 4, kv_dtype));
  std::mt19937 rng(7);
  const std::vector<int64_t> total = {13, 11, 5};  // final lengths
  // Whole sequences: q [T, H, D], k and v [T, Hkv, D].
  std::vector<std::vector<float>> q, k, v;
  std::vector<KvSequence> seq;
  for (int64_t t : total) {
    q.push_back(uniform(t * H * D, rng));
    k.push_back(uniform(t * Hkv * D, rng));
    v.push_back(uniform(t * Hkv * D, rng));
    seq.push_back(store.allocate(t));
  }
  // Call 1: seq 0 positions [0, 12), seq 1 [0, 6). Call 2: seq 0 [12, 13), seq 1 [6, 11), seq 2 [0, 5).
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> calls = {{{0, 12}, {0, 6}, {0, 0}},
                                                                       {{12, 13}, {6, 11}, {0, 5}}};
  std::vector<std::vector<float>> out(3);
  for (size_t s = 0; s < 3; ++s) out[s].assign(total[s] * H * D, NAN);
  for (const auto& call : calls) {
    ForwardBatch batch;
    batch.kv = &store;
    batch.seq_starts = {0};
    std::vector<int32_t> pos;
    std::vector<float> bq, bk, bv;
    for (size_t s = 0; s < 3; ++s) {
      const auto [p0, p1] = call[s];
      if (p1 == p0) continue;
      for (int64_t p = p0; p < p1; ++p) pos.push_back(static_cast<int32_t>(p));
      bq.insert(bq.end(), q[s].begin() + p0 * H * D, q[s].begin() + p1 * H * D);
      bk.insert(bk.end(), k[s].begin() + p0 * Hkv * D, k[s].begin() + p1 * Hkv * D);
      bv.insert(bv.end(), v[s].begin() + p0 * Hkv * D, v[s].begin() + p1 * Hkv * D);
      batch.seq_starts.push_back(batch.seq_starts.back() + p1 - p0);
      batch.block_tables.push_back(store.block_table(seq[s]));
      batch.context_lens.push_back(p1);
    }
    batch.positions = Tensor::from_data_i32({static_cast<int64_t>(pos.size())}, pos);
    std::vector<float> bout(bq.size());
    store.attention(1, batch, bq.data(), bk.data(), bv.data(), bout.data(), opt);
    int64_t row = 0;
    for (size_t s = 0; s < 3; ++s)
      for (int64_t p = call[s].first; p < call[s].second; ++p, ++row)
        std::copy(bout.begin() + row * H * D, bout.begin() + (row + 1) * H * D, out[s].begin() + p * H * D);
  }
  for (size_t s = 0; s < 3; ++s) {
    if (kv_dtype == DType::kBF16)
      for (std::vector<float>* x : {&k[s], &v[s]})
        for (float& e : *x) e = bf16_to_f32(f32_to_bf16(e));
    if (kv_dtype == DType::kI8)
      for (std::vector<float>* x : {&k[s], &v[s]})
        for (size_t row = 0; row < x->size(); row += D) {
          int8_t codes[D];
          const float scale = ref::quantize_kv_int8(x->data() + row, D, codes);
          for (int e = 0; e < D; ++e) (*x)[row + e] = codes[e] * scale;
        }
    std::vector<float> ref(out[s].size());
    ref::scaled_dot_product_attention(q[s].data(), k[s].data(), v[s].data(), ref.data(), 1, total[s], total[s], H, Hkv,
                                      D, 1.0 / std::sqrt(double(D)), true, opt.window, opt.softcap, 0);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(out[s][i], ref[i], 2e-5) << "sequence " << s << " element " << i;
  }
  EXPECT_EQ(store.keys(1).dtype(), kv_dtype);
  const std::vector<float> other = store.keys(0).to_vector();
  for (float e : other) ASSERT_EQ(e, 0.f) << "layer 0 was written";
  if (kv_dtype == DType::kI8) {
    for (float e : store.key_scales(0).to_vector()) ASSERT_EQ(e, 0.f) << "layer 0's scales were written";
  }
}

TEST(PagedKvStore, TwoCallsMatchContiguousAttention) { expect_two_calls_match_contiguous_attention(DType::kF32); }

TEST(PagedKvStore, TwoCallsOverBf16MatchContiguousAttentionOnRoundedKv) {
  expect_two_calls_match_contiguous_attention(DType::kBF16);
}

TEST(PagedKvStore, TwoCallsOverInt8MatchContiguousAttentionOnDequantisedKv) {
  expect_two_calls_match_contiguous_attention(DType::kI8);
}

TEST(PagedKvStore, AttentionRejectsBadBatches) {
  PagedKvStore store(small_config(8, 4));
  const KvSequence s = store.allocate(8);
  std::vector<float> q(4 * 16, 0.f), k(2 * 16, 0.f), out(q.size());
  auto batch_at = [&](int32_t position, int64_t ctx) {
    ForwardBatch b;
    b.seq_starts = {0, 1};
    b.positions = Tensor::from_data_i32({1}, {position});
    b.block_tables = {store.block_table(s)};
    b.context_lens = {ctx};
    return b;
  };
  EXPECT_NO_THROW(store.attention(0, batch_at(3, 4), q.data(), k.data(), k.data(), out.data(), {}));
  EXPECT_THROW(store.attention(0, batch_at(4, 4), q.data(), k.data(), k.data(), out.data(), {}), InvalidArgument);
  EXPECT_THROW(store.attention(0, batch_at(8, 9), q.data(), k.data(), k.data(), out.data(), {}), InvalidArgument);
  EXPECT_THROW(store.attention(2, batch_at(3, 4), q.data(), k.data(), k.data(), out.data(), {}), InvalidArgument);
  EXPECT_THROW(store.attention(0, batch_at(3, 4), q.data(), k.data(), k.data(), out.data(), {.q_offset = 1}),
               InvalidArgument);
  const std::vector<int32_t> bad_table = {0, 99};
  ForwardBatch b = batch_at(5, 6);
  b.block_tables = {bad_table};
  EXPECT_THROW(store.attention(0, b, q.data(), k.data(), k.data(), out.data(), {}), InvalidArgument);
  b = batch_at(3, 4);
  b.context_lens = {};
  EXPECT_THROW(store.attention(0, b, q.data(), k.data(), k.data(), out.data(), {}), InvalidArgument);
}

}  // namespace
}  // namespace lathe
