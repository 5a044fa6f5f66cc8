#include "lathe/ops/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "lathe/ref/attention.h"
#include "lathe/ref/paged_attention.h"

namespace lathe {
namespace {

struct Seq {
  int64_t cached;  // positions [0, cached) already in the pool
  int64_t n_new;   // rows of this call, at positions [cached, cached + n_new)
};

struct Case {
  int H, Hkv, D, P;
  std::vector<Seq> seqs;
  AttentionOptions opt;
};

std::vector<float> uniform(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(n);
  for (float& e : x) e = u(rng);
  return x;
}

// x rounded to bf16 (nearest even), stored as bf16 or widened back to f32.
std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = f32_to_bf16(x[i]);
  return y;
}
std::vector<float> widened(const std::vector<bf16>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = bf16_to_f32(x[i]);
  return y;
}
std::vector<float> rounded_to_bf16(const std::vector<float>& x) { return widened(to_bf16(x)); }

// A batch laid out over a pool with its blocks shuffled (no sequence's blocks are contiguous or in order),
// plus spare blocks; the pool is random, so cached keys are random and unwritten slots are noise.
struct Batch {
  Case c;
  int64_t N = 0, n_blocks = 0;
  std::vector<int64_t> seq_starts, context_lens;
  std::vector<int32_t> positions;
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::span<const int32_t>> spans;
  std::vector<float> q, k, v, k_pool, v_pool;  // q [N, H, D]; k, v [N, Hkv, D]; pools [n_blocks, Hkv, P, D]
  DType kv_dtype = DType::kF32;                // kBF16: the kernel runs on k_pool16 and v_pool16 instead
  std::vector<bf16> k_pool16, v_pool16;        // [n_blocks, Hkv, P, D]

  Batch(const Case& cs, uint32_t seed) : c(cs) {
    std::mt19937 rng(seed);
    seq_starts.push_back(0);
    int64_t blocks = 0;
    for (const Seq& s : c.seqs) {
      context_lens.push_back(s.cached + s.n_new);
      for (int64_t p = s.cached; p < s.cached + s.n_new; ++p) positions.push_back(static_cast<int32_t>(p));
      seq_starts.push_back(seq_starts.back() + s.n_new);
      blocks += (context_lens.back() + c.P - 1) / c.P;
    }
    N = seq_starts.back();
    n_blocks = blocks + 3;
    std::vector<int32_t> ids(n_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    int64_t next = 0;
    for (int64_t ctx : context_lens) {
      tables.emplace_back(ids.begin() + next, ids.begin() + next + (ctx + c.P - 1) / c.P);
      next += (ctx + c.P - 1) / c.P;
    }
    for (const auto& t : tables) spans.emplace_back(t);
    q = uniform(N * c.H * c.D, rng);
    k = uniform(N * c.Hkv * c.D, rng);
    v = uniform(N * c.Hkv * c.D, rng);
    k_pool = uniform(n_blocks * c.P * c.Hkv * c.D, rng);
    v_pool = uniform(n_blocks * c.P * c.Hkv * c.D, rng);
  }

  // The kernel reads and writes bf16 pools holding k_pool and v_pool rounded to bf16.
  void use_bf16_pool() {
    kv_dtype = DType::kBF16;
    k_pool16 = to_bf16(k_pool);
    v_pool16 = to_bf16(v_pool);
  }

  // Element offset of sequence s's position p, KV head hk, in a pool.
  int64_t at(int64_t s, int64_t p, int64_t hk) const {
    return ((static_cast<int64_t>(tables[s][p / c.P]) * c.Hkv + hk) * c.P + p % c.P) * c.D;
  }

  PagedAttentionArgs args(float* out, std::vector<int64_t>& task_starts, std::vector<float>& scratch,
                          int n_workers) const {
    task_starts.assign(c.seqs.size() + 1, -1);
    scratch.assign(n_workers * paged_attention_scratch_floats(c.H, c.Hkv, c.D, c.P, kv_dtype) + 1, NAN);
    const bool b16 = kv_dtype == DType::kBF16;
    return {.q = q.data(), .out = out, .k_pool = b16 ? static_cast<const void*>(k_pool16.data()) : k_pool.data(),
            .v_pool = b16 ? static_cast<const void*>(v_pool16.data()) : v_pool.data(), .kv_dtype = kv_dtype,
            .positions = positions.data(),
            .seq_starts = seq_starts.data(), .block_tables = spans.data(), .context_lens = context_lens.data(),
            .n_seqs = static_cast<int64_t>(c.seqs.size()), .n_heads = c.H, .n_kv_heads = c.Hkv, .head_dim = c.D,
            .block_size = c.P, .task_starts = task_starts.data(),
            .scratch = scratch.data() + 1,  // misaligned on purpose
            .n_scratch_workers = n_workers};
  }

  double scale() const { return c.opt.scale != 0.f ? c.opt.scale : 1.0 / std::sqrt(double(c.D)); }
};

// The pool after the rows' k/v are written, by direct indexing (independent of paged_kv_write).
void write_expected(const Batch& b, std::vector<float>& kp, std::vector<float>& vp) {
  const int64_t D = b.c.D;
  for (size_t s = 0; s < b.c.seqs.size(); ++s)
    for (int64_t i = b.seq_starts[s]; i < b.seq_starts[s + 1]; ++i)
      for (int64_t hk = 0; hk < b.c.Hkv; ++hk)
        for (int64_t e = 0; e < D; ++e) {
          kp[b.at(s, b.positions[i], hk) + e] = b.k[(i * b.c.Hkv + hk) * D + e];
          vp[b.at(s, b.positions[i], hk) + e] = b.v[(i * b.c.Hkv + hk) * D + e];
        }
}

// Runs paged_kv_write + paged_attention on a pool of n_threads workers; returns out [N, H, D].
std::vector<float> run_kernel(Batch& b, int n_threads) {
  std::vector<float> out(b.N * b.c.H * b.c.D, NAN);
  std::vector<int64_t> task_starts;
  std::vector<float> scratch;
  const PagedAttentionArgs a = b.args(out.data(), task_starts, scratch, n_threads);
  if (b.kv_dtype == DType::kBF16)
    paged_kv_write(a, b.k.data(), b.v.data(), b.k_pool16.data(), b.v_pool16.data());
  else
    paged_kv_write(a, b.k.data(), b.v.data(), b.k_pool.data(), b.v_pool.data());
  const ThreadPool pool(n_threads);
  paged_attention(a, b.c.opt, pool);
  return out;
}

// Outputs are convex combinations of v (|v| <= 1): f32 scores over D terms, a ~1-ulp exp and the online
// rescaling leave errors near 1e-6; 2e-5 leaves room for context-length sums in the P·V product.
void expect_matches_reference(const Case& c, uint32_t seed, int n_threads = 3) {
  Batch b(c, seed);
  std::vector<float> kp = b.k_pool, vp = b.v_pool;
  write_expected(b, kp, vp);
  const std::vector<float> out = run_kernel(b, n_threads);
  ASSERT_EQ(b.k_pool, kp) << "paged_kv_write";
  ASSERT_EQ(b.v_pool, vp) << "paged_kv_write";
  std::vector<float> ref(out.size());
  ref::paged_attention(b.q.data(), kp.data(), vp.data(), ref.data(), b.positions.data(), b.seq_starts.data(),
                       b.spans.data(), b.context_lens.data(), static_cast<int64_t>(c.seqs.size()), c.H, c.Hkv, c.D,
                       c.P, b.scale(), c.opt.window, c.opt.softcap);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 2e-5) << "element " << i;
}

// Decode rows (one new token each) over long contexts, prefill chunks from 0, chunks after cached context.
const std::vector<Seq> kRagged = {{40, 1}, {0, 23}, {17, 1}, {5, 9}, {0, 1}, {33, 6}};

TEST(PagedAttention, RaggedMhaMatchesReference) {
  expect_matches_reference({4, 4, 64, 16, kRagged, {}}, 1);
  expect_matches_reference({2, 2, 128, 16, kRagged, {}}, 2);
}

TEST(PagedAttention, RaggedGqaAndMqaMatchReference) {
  expect_matches_reference({8, 2, 64, 16, kRagged, {}}, 3);   // group 4
  expect_matches_reference({6, 1, 32, 16, kRagged, {}}, 4);   // MQA
  expect_matches_reference({40, 2, 16, 8, kRagged, {}}, 5);   // group 20: more than one tile per group
}

TEST(PagedAttention, BlockSizesOneOddAndLarge) {
  expect_matches_reference({4, 2, 64, 1, kRagged, {}}, 6);
  expect_matches_reference({4, 2, 64, 7, kRagged, {}}, 7);
  expect_matches_reference({4, 2, 64, 64, kRagged, {}}, 8);
}

TEST(PagedAttention, HeadDimsOffTheVectorWidth) {
  for (int D : {8, 24, 1, 80, 40}) expect_matches_reference({4, 2, D, 16, kRagged, {}}, 9 + D);
}

TEST(PagedAttention, SlidingWindowMatchesReference) {
  expect_matches_reference({4, 2, 64, 16, kRagged, {.window = 5}}, 20);
  expect_matches_reference({4, 2, 64, 4, kRagged, {.window = 17}}, 21);
  expect_matches_reference({4, 4, 24, 3, kRagged, {.window = 1}}, 22);  // each row sees only itself
}

TEST(PagedAttention, SoftcapAndScaleMatchReference) {
  expect_matches_reference({4, 2, 64, 16, kRagged, {.scale = 0.7f, .softcap = 3.f}}, 23);
  expect_matches_reference({4, 2, 16, 5, kRagged, {.window = 6, .softcap = 1.5f}}, 24);
}

TEST(PagedAttention, SingleThreadAndManyThreads) {
  expect_matches_reference({8, 2, 64, 16, kRagged, {}}, 25, 1);
  expect_matches_reference({8, 2, 64, 16, kRagged, {}}, 26, 7);
}

TEST(PagedAttention, LongDecodeBatch) {  // 8 decode rows over contexts up to ~300 (many blocks each)
  std::vector<Seq> seqs;
  for (int i = 0; i < 8; ++i) seqs.push_back({37 * i + 11, 1});
  expect_matches_reference({12, 12, 64, 16, seqs, {}}, 27);
  expect_matches_reference({32, 8, 128, 16, seqs, {.window = 100}}, 28);
}

// ---- bf16 pools: against the same computation on an f32 pool holding the same (rounded) values. ----

// The bf16 run writes the rows' f32 k and v (rounded to nearest even as they are stored) into a bf16 copy
// of the pool; the f32 run gets the pool and the rows rounded to bf16 first. The writes must leave equal
// values, and the outputs differ by f32 reordering at most (the widening is exact): 1e-6 on outputs of
// magnitude <= 1. Both are also held to the reference on the rounded pool, as expect_matches_reference.
void expect_bf16_matches_rounded_f32(const Case& c, uint32_t seed, int n_threads = 3) {
  Batch f32(c, seed), b16(c, seed);
  for (std::vector<float>* x : {&f32.k, &f32.v, &f32.k_pool, &f32.v_pool}) *x = rounded_to_bf16(*x);
  b16.use_bf16_pool();
  const std::vector<float> want = run_kernel(f32, n_threads), got = run_kernel(b16, n_threads);
  ASSERT_EQ(widened(b16.k_pool16), f32.k_pool) << "paged_kv_write";
  ASSERT_EQ(widened(b16.v_pool16), f32.v_pool) << "paged_kv_write";
  std::vector<float> ref(got.size());
  ref::paged_attention(f32.q.data(), f32.k_pool.data(), f32.v_pool.data(), ref.data(), f32.positions.data(),
                       f32.seq_starts.data(), f32.spans.data(), f32.context_lens.data(),
                       static_cast<int64_t>(c.seqs.size()), c.H, c.Hkv, c.D, c.P, f32.scale(), c.opt.window,
                       c.opt.softcap);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6) << "element " << i;
    ASSERT_NEAR(got[i], ref[i], 2e-5) << "element " << i;
  }
}

TEST(PagedAttentionBf16, RaggedMhaGqaAndMqaMatchRoundedF32) {
  expect_bf16_matches_rounded_f32({4, 4, 64, 16, kRagged, {}}, 101);
  expect_bf16_matches_rounded_f32({2, 2, 128, 16, kRagged, {}}, 102);
  expect_bf16_matches_rounded_f32({8, 2, 64, 16, kRagged, {}}, 103);   // group 4
  expect_bf16_matches_rounded_f32({6, 1, 32, 16, kRagged, {}}, 104);   // MQA
  expect_bf16_matches_rounded_f32({40, 2, 16, 8, kRagged, {}}, 105);   // group 20: more than one tile per group
}

TEST(PagedAttentionBf16, BlockBoundariesAndHeadDimsMatchRoundedF32) {
  for (int P : {1, 7, 64}) expect_bf16_matches_rounded_f32({4, 2, 64, P, kRagged, {}}, 110 + P);
  for (int D : {8, 24, 1, 80, 40}) expect_bf16_matches_rounded_f32({4, 2, D, 16, kRagged, {}}, 200 + D);
}

TEST(PagedAttentionBf16, WindowsSoftcapAndScaleMatchRoundedF32) {
  expect_bf16_matches_rounded_f32({4, 2, 64, 16, kRagged, {.window = 5}}, 120);
  expect_bf16_matches_rounded_f32({4, 2, 64, 4, kRagged, {.window = 17}}, 121);
  expect_bf16_matches_rounded_f32({4, 4, 24, 3, kRagged, {.window = 1}}, 122);
  expect_bf16_matches_rounded_f32({4, 2, 64, 16, kRagged, {.scale = 0.7f, .softcap = 3.f}}, 123);
  expect_bf16_matches_rounded_f32({4, 2, 16, 5, kRagged, {.window = 6, .softcap = 1.5f}}, 124);
}

TEST(PagedAttentionBf16, ThreadsAndLongDecodeBatchMatchRoundedF32) {
  expect_bf16_matches_rounded_f32({8, 2, 64, 16, kRagged, {}}, 125, 1);
  expect_bf16_matches_rounded_f32({8, 2, 64, 16, kRagged, {}}, 126, 7);
  std::vector<Seq> seqs;
  for (int i = 0; i < 8; ++i) seqs.push_back({37 * i + 11, 1});
  expect_bf16_matches_rounded_f32({12, 12, 64, 16, seqs, {}}, 127);
  expect_bf16_matches_rounded_f32({32, 8, 128, 16, seqs, {.window = 100}}, 128);
}

// The reference itself against the contiguous attention reference: one sequence, its keys gathered.
TEST(PagedAttention, ReferenceAgreesWithContiguousAttention) {
  const Case c{4, 2, 8, 3, {{10, 4}}, {.window = 6}};
  Batch b(c, 30);
  std::vector<float> kp = b.k_pool, vp = b.v_pool;
  write_expected(b, kp, vp);
  const int64_t S = b.context_lens[0], row = c.Hkv * c.D;
  std::vector<float> kc(S * row), vc(S * row), paged(b.N * c.H * c.D), contiguous(paged.size());
  for (int64_t p = 0; p < S; ++p)
    for (int64_t hk = 0; hk < c.Hkv; ++hk)
      for (int64_t e = 0; e < c.D; ++e) {
        kc[(p * c.Hkv + hk) * c.D + e] = kp[b.at(0, p, hk) + e];
        vc[(p * c.Hkv + hk) * c.D + e] = vp[b.at(0, p, hk) + e];
      }
  ref::paged_attention(b.q.data(), kp.data(), vp.data(), paged.data(), b.positions.data(), b.seq_starts.data(),
                       b.spans.data(), b.context_lens.data(), 1, c.H, c.Hkv, c.D, c.P, b.scale(), c.opt.window, 0.0);
  ref::scaled_dot_product_attention(b.q.data(), kc.data(), vc.data(), contiguous.data(), 1, b.N, S, c.H, c.Hkv, c.D,
                                    b.scale(), true, c.opt.window, 0.0, S - b.N);
  for (size_t i = 0; i < paged.size(); ++i) ASSERT_NEAR(paged[i], contiguous[i], 1e-6) << i;
}

// A row's output depends only on its own sequence: bit for bit the same alone or batched (greedy decoding
// of a sequence must not change with what it is batched with), over f32 and bf16 pools.
TEST(PagedAttention, RowsAreBitIdenticalAloneOrBatched) {
  for (const DType kv_dtype : {DType::kF32, DType::kBF16}) {
    for (int D : {64, 24}) {
      const Case c{8, 2, D, 16, kRagged, {.softcap = 4.f}};
      Batch all(c, 40);
      if (kv_dtype == DType::kBF16) all.use_bf16_pool();
      const std::vector<float> batched = run_kernel(all, 3);
      for (size_t s = 0; s < c.seqs.size(); ++s) {
        Batch one(c, 40);  // the same pool and rows; keep only sequence s
        const int64_t r0 = one.seq_starts[s], r1 = one.seq_starts[s + 1];
        one.c.seqs = {c.seqs[s]};
        one.seq_starts = {0, r1 - r0};
        one.context_lens = {one.context_lens[s]};
        one.positions.assign(one.positions.begin() + r0, one.positions.begin() + r1);
        one.spans = {one.spans[s]};
        one.q.assign(one.q.begin() + r0 * c.H * D, one.q.begin() + r1 * c.H * D);
        one.k.assign(one.k.begin() + r0 * c.Hkv * D, one.k.begin() + r1 * c.Hkv * D);
        one.v.assign(one.v.begin() + r0 * c.Hkv * D, one.v.begin() + r1 * c.Hkv * D);
        one.N = r1 - r0;
        if (kv_dtype == DType::kBF16) one.use_bf16_pool();
        const std::vector<float> alone = run_kernel(one, 2);
        ASSERT_EQ(0, std::memcmp(alone.data(), batched.data() + r0 * c.H * D, alone.size() * sizeof(float)))
            << "sequence " << s << " D " << D << " " << dtype_name(kv_dtype);
      }
    }
  }
}

}  // namespace
}  // namespace lathe
