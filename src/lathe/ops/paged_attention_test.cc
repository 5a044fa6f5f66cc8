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
  // The last sequence's first shared_blocks blocks are the first sequence's (a prefix-cache hit): both
  // must have at least that many blocks of cached positions, so no row writes into a shared block.
  int shared_blocks = 0;
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
  // kI8: the kernel runs on the codes k_pool8, v_pool8 [n_blocks, Hkv, P, D] and scales [n_blocks, Hkv, P]
  std::vector<int8_t> k_pool8, v_pool8;
  std::vector<float> k_scales, v_scales;

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
    if (c.shared_blocks > 0) {
      const auto& first = c.seqs.front();
      const auto& last = c.seqs.back();
      EXPECT_TRUE(first.cached >= c.shared_blocks * c.P && last.cached >= c.shared_blocks * c.P);
      std::copy_n(tables.front().begin(), c.shared_blocks, tables.back().begin());
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

  // The kernel reads and writes int8 pools holding k_pool and v_pool quantised per slot (ref::quantize_kv_int8).
  void use_int8_pool() {
    kv_dtype = DType::kI8;
    quantize_pool(k_pool, k_pool8, k_scales);
    quantize_pool(v_pool, v_pool8, v_scales);
  }
  void quantize_pool(const std::vector<float>& pool, std::vector<int8_t>& codes, std::vector<float>& scales) const {
    codes.assign(pool.size(), 0);
    scales.assign(pool.size() / c.D, 0.f);
    for (size_t slot = 0; slot < scales.size(); ++slot)
      scales[slot] = ref::quantize_kv_int8(pool.data() + slot * c.D, c.D, codes.data() + slot * c.D);
  }

  // Element offset of sequence s's position p, KV head hk, in a pool.
  int64_t at(int64_t s, int64_t p, int64_t hk) const {
    return ((static_cast<int64_t>(tables[s][p / c.P]) * c.Hkv + hk) * c.P + p % c.P) * c.D;
  }

  PagedAttentionArgs args(float* out, std::vector<int64_t>& task_starts, std::vector<float>& scratch,
                          int n_workers) const {
    task_starts.assign(c.seqs.size() + 1, -1);
    scratch.assign(n_workers * paged_attention_scratch_floats(c.H, c.Hkv, c.D, c.P, kv_dtype) + 1, NAN);
    const PagedKvDest pools = dest();
    const bool i8 = kv_dtype == DType::kI8;
    return {.q = q.data(), .out = out, .k_pool = pools.k_pool, .v_pool = pools.v_pool, .kv_dtype = kv_dtype,
            .k_scales = i8 ? k_scales.data() : nullptr, .v_scales = i8 ? v_scales.data() : nullptr,
            .positions = positions.data(),
            .seq_starts = seq_starts.data(), .block_tables = spans.data(), .context_lens = context_lens.data(),
            .n_seqs = static_cast<int64_t>(c.seqs.size()), .n_heads = c.H, .n_kv_heads = c.Hkv, .head_dim = c.D,
            .block_size = c.P, .task_starts = task_starts.data(),
            .scratch = scratch.data() + 1,  // misaligned on purpose
            .n_scratch_workers = n_workers};
  }

  // The pools of kv_dtype, as paged_kv_write takes them.
  PagedKvDest dest() const {
    auto* self = const_cast<Batch*>(this);  // the kernel writes the test's own vectors
    if (kv_dtype == DType::kBF16) return {.k_pool = self->k_pool16.data(), .v_pool = self->v_pool16.data()};
    if (kv_dtype == DType::kI8)
      return {.k_pool = self->k_pool8.data(), .v_pool = self->v_pool8.data(), .k_scales = self->k_scales.data(),
              .v_scales = self->v_scales.data()};
    return {.k_pool = self->k_pool.data(), .v_pool = self->v_pool.data()};
  }

  void use_pool(DType dtype) {
    if (dtype == DType::kBF16) use_bf16_pool();
    if (dtype == DType::kI8) use_int8_pool();
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
  paged_kv_write(a, b.k.data(), b.v.data(), b.dest());
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

// ---- int8 pools: against the reference on the dequantised pool, and the f32 one within the quantisation. ----

std::vector<float> dequantized(const std::vector<int8_t>& codes, const std::vector<float>& scales, int64_t D) {
  std::vector<float> x(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) x[i] = static_cast<float>(codes[i]) * scales[i / D];
  return x;
}

std::vector<float> reference(const Batch& b, const std::vector<float>& kp, const std::vector<float>& vp) {
  std::vector<float> ref(b.N * b.c.H * b.c.D);
  ref::paged_attention(b.q.data(), kp.data(), vp.data(), ref.data(), b.positions.data(), b.seq_starts.data(),
                       b.spans.data(), b.context_lens.data(), static_cast<int64_t>(b.c.seqs.size()), b.c.H, b.c.Hkv,
                       b.c.D, b.c.P, b.scale(), b.c.opt.window, b.c.opt.softcap);
  return ref;
}

// The int8 run must (1) leave in each written slot the codes and scale of ref::quantize_kv_int8, bit for
// bit; (2) match the f64 reference on the dequantised pool (codes · scale) to 2e-5, as the f32 kernel
// does its pool: the kernel's s·(q·c) and p·s·c reorder the same products; (3) stay within the
// quantisation error of the reference on the exact f32 values. For (3): each element moves by at most
// half its slot's step s/2, so a score by δ <= scale·|q|₁·max s_k/2 (softcap is 1-Lipschitz); shifting
// every score by at most δ moves the softmax weights by a total of at most e^{2δ} − 1, so an output moves
// by at most max s_v/2 + max|v|·(e^{2δ} − 1). It must be used at all (some output moves by more than the
// f32 kernel's 2e-5), else nothing was quantised.
void expect_int8_matches_references(const Case& c, uint32_t seed, int n_threads = 3) {
  Batch b(c, seed);
  std::vector<float> exact_k = b.k_pool, exact_v = b.v_pool;
  write_expected(b, exact_k, exact_v);
  b.use_int8_pool();
  std::vector<int8_t> kc = b.k_pool8, vc = b.v_pool8;
  std::vector<float> ks = b.k_scales, vs = b.v_scales;
  for (size_t s = 0; s < c.seqs.size(); ++s)
    for (int64_t i = b.seq_starts[s]; i < b.seq_starts[s + 1]; ++i)
      for (int64_t hk = 0; hk < c.Hkv; ++hk) {
        const int64_t at = b.at(s, b.positions[i], hk), row = (i * c.Hkv + hk) * c.D;
        ks[at / c.D] = ref::quantize_kv_int8(b.k.data() + row, c.D, kc.data() + at);
        vs[at / c.D] = ref::quantize_kv_int8(b.v.data() + row, c.D, vc.data() + at);
      }
  const std::vector<float> out = run_kernel(b, n_threads);
  ASSERT_EQ(b.k_pool8, kc) << "paged_kv_write: key codes";
  ASSERT_EQ(b.v_pool8, vc) << "paged_kv_write: value codes";
  ASSERT_EQ(b.k_scales, ks) << "paged_kv_write: key scales";
  ASSERT_EQ(b.v_scales, vs) << "paged_kv_write: value scales";
  const std::vector<float> deq = reference(b, dequantized(kc, ks, c.D), dequantized(vc, vs, c.D)),
                           exact = reference(b, exact_k, exact_v);
  double q_l1 = 0, v_max = 0;
  for (int64_t i = 0; i < b.N * c.H; ++i) {
    double l1 = 0;
    for (int64_t e = 0; e < c.D; ++e) l1 += std::fabs(b.q[i * c.D + e]);
    q_l1 = std::max(q_l1, l1);
  }
  for (const float x : exact_v) v_max = std::max<double>(v_max, std::fabs(x));
  const double delta = b.scale() * q_l1 * *std::max_element(ks.begin(), ks.end()) / 2,
               bound = *std::max_element(vs.begin(), vs.end()) / 2 + v_max * std::expm1(2 * delta) + 2e-5;
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], deq[i], 2e-5) << "element " << i;
    ASSERT_NEAR(out[i], exact[i], bound) << "element " << i;
    worst = std::max(worst, std::fabs(double(out[i]) - exact[i]));
  }
  // (D = 1 is exact: a lone element is its own absmax, code ±127.)
  if (c.D > 1) {
    EXPECT_GT(worst, 2e-5) << "the int8 pool changed no output: nothing was quantised";
  }
}

TEST(PagedAttentionInt8, RaggedMhaGqaAndMqaMatchReferences) {
  expect_int8_matches_references({4, 4, 64, 16, kRagged, {}}, 301);
  expect_int8_matches_references({2, 2, 128, 16, kRagged, {}}, 302);
  expect_int8_matches_references({8, 2, 64, 16, kRagged, {}}, 303);   // group 4
  expect_int8_matches_references({6, 1, 32, 16, kRagged, {}}, 304);   // MQA
  expect_int8_matches_references({40, 2, 16, 8, kRagged, {}}, 305);   // group 20: more than one tile per group
}

TEST(PagedAttentionInt8, BlockBoundariesAndOddHeadDimsMatchReferences) {
  for (int P : {1, 7, 64}) expect_int8_matches_references({4, 2, 64, P, kRagged, {}}, 310 + P);
  for (int D : {8, 24, 1, 80, 40, 33}) expect_int8_matches_references({4, 2, D, 16, kRagged, {}}, 400 + D);
}

TEST(PagedAttentionInt8, WindowsSoftcapAndScaleMatchReferences) {
  expect_int8_matches_references({4, 2, 64, 16, kRagged, {.window = 5}}, 320);
  expect_int8_matches_references({4, 2, 64, 4, kRagged, {.window = 17}}, 321);
  expect_int8_matches_references({4, 4, 24, 3, kRagged, {.window = 1}}, 322);
  expect_int8_matches_references({4, 2, 64, 16, kRagged, {.scale = 0.7f, .softcap = 3.f}}, 323);
  expect_int8_matches_references({4, 2, 16, 5, kRagged, {.window = 6, .softcap = 1.5f}}, 324);
}

TEST(PagedAttentionInt8, ThreadsAndLongDecodeBatchMatchReferences) {
  expect_int8_matches_references({8, 2, 64, 16, kRagged, {}}, 325, 1);
  expect_int8_matches_references({8, 2, 64, 16, kRagged, {}}, 326, 7);
  std::vector<Seq> seqs;
  for (int i = 0; i < 8; ++i) seqs.push_back({37 * i + 11, 1});
  expect_int8_matches_references({12, 12, 64, 16, seqs, {}}, 327);
  expect_int8_matches_references({32, 8, 128, 16, seqs, {.window = 100}}, 328);
}

// Two sequences read the same first blocks (codes and scales), as after a prefix-cache hit, and write
// their new rows past them.
TEST(PagedAttentionInt8, PrefixSharedBlocksMatchReferences) {
  expect_int8_matches_references({8, 2, 64, 16, kRagged, {}, 2}, 330);   // seqs 0 and 5 share 32 positions
  expect_int8_matches_references({8, 2, 24, 7, kRagged, {}, 4}, 331);    // 28 positions, odd D and P
  expect_int8_matches_references({16, 4, 64, 4, kRagged, {}, 8}, 332);   // the wide tile (group 4, 6 rows)
}

TEST(PagedAttention, PrefixSharedBlocksMatchReference) {
  expect_matches_reference({8, 2, 64, 16, kRagged, {}, 2}, 333);
  expect_matches_reference({8, 2, 24, 7, kRagged, {}, 4}, 334);
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
// of a sequence must not change with what it is batched with), over f32, bf16 and int8 pools.
TEST(PagedAttention, RowsAreBitIdenticalAloneOrBatched) {
  for (const DType kv_dtype : {DType::kF32, DType::kBF16, DType::kI8}) {
    for (int D : {64, 24}) {
      const Case c{8, 2, D, 16, kRagged, {.softcap = 4.f}};
      Batch all(c, 40);
      all.use_pool(kv_dtype);
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
        one.use_pool(kv_dtype);
        const std::vector<float> alone = run_kernel(one, 2);
        ASSERT_EQ(0, std::memcmp(alone.data(), batched.data() + r0 * c.H * D, alone.size() * sizeof(float)))
            << "sequence " << s << " D " << D << " " << dtype_name(kv_dtype);
      }
    }
  }
}

}  // namespace
}  // namespace lathe
