// The engine's life around the tokens: the prefix cache and preemption keep tokens identical, aborts
// and finishes give every KV block back, n = 2 choices, logprobs, admission errors, health, metrics,
// drain and stop.
#include "lathe/serve/engine/engine.h"

#include <gtest/gtest.h>

#include <thread>

#include "lathe/serve/engine/engine_test_util.h"
#include "lathe/serve/kv_capacity.h"

namespace lathe {
namespace {

using testing::Completion;
using testing::read_all;

const testing::EngineFixture& llama() {
  static const testing::EngineFixture f = testing::load_engine_fixture("llama");
  return f;
}

KvLayout layout_of(const Model& m) {
  const PagedKvStoreConfig s = paged_kv_store_config(m.config(), 1);
  return {s.n_layers, s.n_heads, s.n_kv_heads, s.head_dim};
}

// After a probe the loop has published the metrics of its turn before it (Engine::healthy reaches take()).
EngineMetrics settled_metrics(Engine& e) {
  EXPECT_TRUE(e.healthy());
  return e.metrics();
}

// Over the f32 cache (auto on this model) and an int8 one, whose cached blocks carry their scales.
TEST(Engine, RepeatedPromptHitsThePrefixCacheWithIdenticalTokens) {
  Model& m = *llama().model;
  const std::vector<int32_t> prompt = testing::varied_prompts(6, 40, m.config().vocab_size, 3).back();  // 36 tokens
  ASSERT_GE(prompt.size(), 33u);
  for (const KvCacheDtype kv : {KvCacheDtype::kAuto, KvCacheDtype::kInt8}) {
    SCOPED_TRACE(kv_cache_dtype_name(kv));
    Engine engine(m, {.kv_cache_dtype = kv});
    const Completion first = read_all(*engine.submit(testing::greedy_request(prompt, 10)).stream);
    const EngineMetrics before = settled_metrics(engine);
    EXPECT_EQ(before.core.prefix_cache_hits, 0);
    const Completion second = read_all(*engine.submit(testing::greedy_request(prompt, 10)).stream);
    const EngineMetrics after = settled_metrics(engine);
    EXPECT_EQ(second.tokens.at(0), first.tokens.at(0));
    // Every full block of the prompt before its last token was cached: (36 - 1) / 16 = 2 blocks.
    const int64_t P = kDefaultKvBlockSize, want_hit = (static_cast<int64_t>(prompt.size()) - 1) / P * P;
    EXPECT_EQ(after.core.prefix_cache_hits - before.core.prefix_cache_hits, want_hit);
    EXPECT_GT(after.core.prefix_cache_queries, before.core.prefix_cache_queries);
    // With caching off, nothing hits and the tokens are the same.
    const Completion uncached = testing::run_alone(m, {.kv_cache_dtype = kv, .enable_prefix_caching = false},
                                                   testing::greedy_request(prompt, 10));
    EXPECT_EQ(uncached.tokens.at(0), first.tokens.at(0));
  }
}

TEST(Engine, PreemptionByRecomputeKeepsTokensIdentical) {
  Model& m = *llama().model;
  // 12 usable blocks of 16 tokens, a 64-token context (4 blocks) and loose admission: 6 requests of up to
  // 60 tokens each outgrow the pool and the newest are preempted, then recomputed.
  const int64_t block_bytes = kv_block_bytes(layout_of(m), kDefaultKvBlockSize, DType::kF32);
  const EngineConfig small{.kv_cache_memory = 13 * block_bytes,
                           .scheduler = {.max_model_len = 64, .admission = AdmissionMode::kLoose, .watermark = 0}};
  const auto prompts = testing::varied_prompts(6, 30, m.config().vocab_size, 11);
  std::vector<EngineRequest> rs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r = testing::greedy_request(prompts[i], 24);
    if (i % 2 == 1) r.sampling = {.temperature = 1.f, .max_tokens = 24, .ignore_eos = true, .seed = 99 + i};
    rs.push_back(std::move(r));
  }
  std::vector<Completion> together;
  EngineMetrics metrics;
  {
    Engine engine(m, small);
    std::vector<Submission> subs;
    for (const EngineRequest& r : rs) subs.push_back(engine.submit(r));
    for (Submission& s : subs) together.push_back(read_all(*s.stream));
    metrics = settled_metrics(engine);
  }
  EXPECT_GT(metrics.core.num_preemptions, 0);
  EXPECT_EQ(metrics.core.kv_blocks_used, 0);
  for (size_t i = 0; i < rs.size(); ++i)
    EXPECT_EQ(together[i].tokens.at(0), testing::run_alone(m, {}, rs[i]).tokens.at(0)) << "request " << i;
}

TEST(Engine, PreemptionsAreLogged) {
  Model& m = *llama().model;
  std::vector<std::string> lines;
  const int64_t block_bytes = kv_block_bytes(layout_of(m), kDefaultKvBlockSize, DType::kF32);
  EngineConfig c{.kv_cache_memory = 9 * block_bytes,
                 .scheduler = {.max_model_len = 64, .admission = AdmissionMode::kLoose, .watermark = 0}};
  c.log = [&lines](const std::string& l) { lines.push_back(l); };  // engine thread; read after stop
  int64_t n_preemptions = 0;
  {
    Engine engine(m, c);
    std::vector<Submission> subs;
    for (const auto& p : testing::varied_prompts(4, 30, m.config().vocab_size, 5))
      subs.push_back(engine.submit(testing::greedy_request(p, 30)));
    for (Submission& s : subs) read_all(*s.stream);
    n_preemptions = settled_metrics(engine).core.num_preemptions;
  }
  ASSERT_GT(n_preemptions, 0);
  EXPECT_EQ(static_cast<int64_t>(lines.size()), n_preemptions);
  EXPECT_NE(lines.front().find("event=preemption"), std::string::npos) << lines.front();
}

TEST(Engine, AbortEndsTheRequestAndFreesItsBlocks) {
  Model& m = *llama().model;
  Engine engine(m, {});
  // The loop is held on the first token while the abort is queued: the tiny model would otherwise
  // finish all 100 tokens before a late-scheduled test thread aborts (a race on a loaded machine).
  testing::LoopHold held(engine, testing::greedy_request(llama().greedy_prompt, 100));
  const Submission other = engine.submit(testing::greedy_request({5, 6, 7}, 5));
  engine.abort(held.request_id());
  engine.abort(12345);  // unknown: ignored
  held.release();
  const Completion c = read_all(held.stream());
  ASSERT_EQ(c.outputs.size(), 2u) << "the first token, then the abort at the loop's next turn";
  EXPECT_TRUE(c.outputs[0].token.has_value());
  EXPECT_FALSE(c.outputs[1].token.has_value());
  EXPECT_EQ(c.finish.at(0), FinishReason::kAbort);
  EXPECT_EQ(read_all(*other.stream).finish.at(0), FinishReason::kLength);
  const EngineMetrics after = settled_metrics(engine);
  EXPECT_EQ(after.core.kv_blocks_used, 0);
  EXPECT_EQ(after.core.kv_cache_usage, 0.0);
  EXPECT_EQ(after.core.n_running + after.core.n_waiting, 0);
  EXPECT_EQ(after.request_success[static_cast<size_t>(FinishReason::kAbort)], 1);
  EXPECT_EQ(after.request_success[static_cast<size_t>(FinishReason::kLength)], 1);
}

TEST(Engine, TwoChoicesShareThePromptAndMatchLoneRequests) {
  Model& m = *llama().model;
  const std::vector<int32_t> prompt = testing::varied_prompts(6, 40, m.config().vocab_size, 3).back();
  EngineRequest greedy2 = testing::greedy_request(prompt, 8);
  greedy2.sampling.n = 2;
  Engine engine(m, {});
  const Completion g = read_all(*engine.submit(greedy2).stream);
  const Completion lone = testing::run_alone(m, {}, testing::greedy_request(prompt, 8));
  EXPECT_EQ(g.tokens.at(0), lone.tokens.at(0));
  EXPECT_EQ(g.tokens.at(1), lone.tokens.at(0));
  // Seeded: choice 0 samples with the request's seed (as a lone n = 1 request), choice 1 with another.
  const SamplingParams sp{.n = 2, .temperature = 1.f, .max_tokens = 16, .ignore_eos = true, .seed = 7};
  const Completion s = read_all(*engine.submit({.prompt = prompt, .sampling = sp}).stream);
  SamplingParams one = sp;
  one.n = 1;
  EXPECT_EQ(s.tokens.at(0), testing::run_alone(m, {}, {.prompt = prompt, .sampling = one}).tokens.at(0));
  EXPECT_NE(s.tokens.at(0), s.tokens.at(1));
  EXPECT_EQ(s.tokens.at(1).size(), 16u);
  EXPECT_GT(settled_metrics(engine).core.prefix_cache_hits, 0);  // choice 1 reused choice 0's prompt blocks
}

TEST(Engine, LogprobsComeWithTheirTokens) {
  Model& m = *llama().model;
  EngineRequest r = testing::greedy_request(llama().greedy_prompt, 6);
  r.sampling.logprobs = 3;
  const Completion c = testing::run_alone(m, {}, r);
  ASSERT_EQ(c.outputs.size(), 6u);
  for (const EngineOutput& o : c.outputs) {
    ASSERT_TRUE(o.logprobs.has_value());
    EXPECT_EQ(o.logprobs->rank, 1);  // greedy: the most likely token
    ASSERT_GE(o.logprobs->top.size(), 3u);
    EXPECT_EQ(o.logprobs->top[0].token, *o.token);
    EXPECT_LE(o.logprobs->logprob, 0.f);
    EXPECT_EQ(o.logprobs->top[0].logprob, o.logprobs->logprob);
  }
  EXPECT_FALSE(testing::run_alone(m, {}, testing::greedy_request({1, 2}, 2)).outputs[0].logprobs.has_value());
}

TEST(Engine, BadRequestsAreRefusedAndTheEngineServesOn) {
  Model& m = *llama().model;
  const int64_t block_bytes = kv_block_bytes(layout_of(m), kDefaultKvBlockSize, DType::kF32);
  Engine engine(m, {.kv_cache_memory = 9 * block_bytes, .scheduler = {.max_model_len = 128, .watermark = 0}});
  const int64_t V = m.config().vocab_size;
  EXPECT_THROW(engine.submit(testing::greedy_request({}, 4)), InvalidArgument);
  EXPECT_THROW(engine.submit(testing::greedy_request({1, static_cast<int32_t>(V)}, 4)), InvalidArgument);
  EXPECT_THROW(engine.submit(testing::greedy_request(std::vector<int32_t>(128, 1), 4)), InvalidArgument);
  EngineRequest bad_top_p = testing::greedy_request({1, 2}, 4);
  bad_top_p.sampling.top_p = 0.f;
  EXPECT_THROW(engine.submit(bad_top_p), InvalidArgument);
  // 8 usable blocks cannot reserve a 120-token prompt (8 blocks) plus 8 outputs (1 more): an error output.
  const Completion refused = read_all(*engine.submit(testing::greedy_request(std::vector<int32_t>(120, 3), 8)).stream);
  ASSERT_EQ(refused.outputs.size(), 1u);
  EXPECT_EQ(refused.finish.at(0), FinishReason::kAbort);
  EXPECT_NE(refused.outputs[0].error.find("max_tokens"), std::string::npos) << refused.outputs[0].error;
  EXPECT_EQ(read_all(*engine.submit(testing::greedy_request({1, 2}, 3)).stream).tokens.at(0).size(), 3u);
  EXPECT_TRUE(engine.healthy());
}

TEST(Engine, MetricsCountTokensAndTimeEveryChoice) {
  Model& m = *llama().model;
  Engine engine(m, {});
  EXPECT_NE(engine.capacity_summary().find("blocks of 16 tokens"), std::string::npos) << engine.capacity_summary();
  std::vector<Submission> subs;
  int64_t n_prompt = 0, n_out = 0;
  for (const auto& p : testing::varied_prompts(5, 20, m.config().vocab_size, 9)) {
    subs.push_back(engine.submit(testing::greedy_request(p, 4)));
    n_prompt += static_cast<int64_t>(p.size());
    n_out += 4;
  }
  for (Submission& s : subs) read_all(*s.stream);
  const EngineMetrics mt = settled_metrics(engine);
  EXPECT_EQ(mt.prompt_tokens, n_prompt);
  EXPECT_EQ(mt.generation_tokens, n_out);
  EXPECT_EQ(mt.ttft.count, 5);
  EXPECT_EQ(mt.inter_token.count, n_out - 5);
  EXPECT_EQ(mt.e2e.count, 5);
  int64_t in_buckets = 0;
  for (const int64_t c : mt.ttft.counts) in_buckets += c;
  EXPECT_EQ(in_buckets, 5);
  EXPECT_GT(mt.e2e.sum, 0.0);
  EXPECT_GE(mt.e2e.sum, mt.ttft.sum);
  EXPECT_GT(mt.core.n_steps, 0);
  EXPECT_GT(mt.core.kv_blocks_total, 0);
}

// --kv-cache-dtype: bf16 halves a block's bytes, so the same budget holds twice the blocks; the start-up
// line names the dtype; auto on this f32 model is f32.
TEST(Engine, Bf16KvCacheHoldsTwiceTheBlocksOfTheSameMemory) {
  Model& m = *llama().model;
  const int64_t f32_block = kv_block_bytes(layout_of(m), kDefaultKvBlockSize, DType::kF32);
  const EngineConfig base{.kv_cache_memory = 9 * f32_block, .scheduler = {.max_model_len = 128, .watermark = 0}};
  EngineConfig bf16 = base;
  bf16.kv_cache_dtype = KvCacheDtype::kBF16;
  Engine as_f32(m, base), as_bf16(m, bf16);
  EXPECT_EQ(settled_metrics(as_f32).core.kv_blocks_total, 9 - 1);
  EXPECT_EQ(settled_metrics(as_bf16).core.kv_blocks_total, 2 * 9 - 1);
  EXPECT_NE(as_f32.capacity_summary().find("KV cache (f32): 8 blocks"), std::string::npos) << as_f32.capacity_summary();
  EXPECT_NE(as_bf16.capacity_summary().find("KV cache (bf16): 17 blocks"), std::string::npos)
      << as_bf16.capacity_summary();
  // A 120-token prompt with 8 outputs needs 8 blocks: too many for the f32 pool, served by the bf16 one.
  const EngineRequest long_prompt = testing::greedy_request(std::vector<int32_t>(120, 3), 8);
  EXPECT_EQ(read_all(*as_f32.submit(long_prompt).stream).finish.at(0), FinishReason::kAbort);
  const Completion served = read_all(*as_bf16.submit(long_prompt).stream);
  EXPECT_EQ(served.finish.at(0), FinishReason::kLength);
  EXPECT_EQ(served.tokens.at(0).size(), 8u);
}

// --kv-cache-dtype int8: a slot takes D + 4 bytes (codes and an f32 scale) for f32's 4·D, so the same
// budget holds 4·D / (D + 4) times the blocks (3.2x at this model's D = 16; 3.76x at D = 64), 1.6x bf16's;
// the start-up line says int8, and the 120-token prompt the f32 pool cannot hold is served.
TEST(Engine, Int8KvCacheHoldsTheBlocksItsBytesAllow) {
  Model& m = *llama().model;
  const KvLayout layout = layout_of(m);
  const int64_t f32_block = kv_block_bytes(layout, kDefaultKvBlockSize, DType::kF32),
                int8_block = kv_block_bytes(layout, kDefaultKvBlockSize, DType::kI8);
  const int64_t D = layout.head_dim;
  EXPECT_EQ(int8_block * 4 * D, f32_block * (D + 4));
  const EngineConfig base{.kv_cache_memory = 9 * f32_block, .scheduler = {.max_model_len = 128, .watermark = 0}};
  EngineConfig int8 = base, bf16 = base;
  int8.kv_cache_dtype = KvCacheDtype::kInt8;
  bf16.kv_cache_dtype = KvCacheDtype::kBF16;
  Engine as_int8(m, int8), as_bf16(m, bf16);
  const int64_t blocks = 9 * f32_block / int8_block;
  EXPECT_GT(blocks, 3 * 9);
  EXPECT_EQ(settled_metrics(as_int8).core.kv_blocks_total, blocks - 1);
  EXPECT_GT(settled_metrics(as_int8).core.kv_blocks_total, settled_metrics(as_bf16).core.kv_blocks_total * 3 / 2);
  EXPECT_EQ(as_int8.capacity_summary().find("KV cache (int8): " + std::to_string(blocks - 1) + " blocks"), 0u)
      << as_int8.capacity_summary();
  const EngineRequest long_prompt = testing::greedy_request(std::vector<int32_t>(120, 3), 8);
  const Completion served = read_all(*as_int8.submit(long_prompt).stream);
  EXPECT_EQ(served.finish.at(0), FinishReason::kLength);
  EXPECT_EQ(served.tokens.at(0).size(), 8u);
}

TEST(Engine, StopDrainsInFlightRequestsThenRefusesNewOnes) {
  Model& m = *llama().model;
  Engine engine(m, {});
  std::vector<Submission> subs;
  for (const auto& p : testing::varied_prompts(4, 20, m.config().vocab_size, 13))
    subs.push_back(engine.submit(testing::greedy_request(p, 12)));
  engine.stop(/*drain=*/true);
  for (Submission& s : subs) {
    const Completion c = read_all(*s.stream);
    EXPECT_EQ(c.finish.at(0), FinishReason::kLength);
    EXPECT_EQ(c.tokens.at(0).size(), 12u);
  }
  EXPECT_THROW(engine.submit(testing::greedy_request({1}, 2)), EngineUnavailable);
  EXPECT_FALSE(engine.healthy(std::chrono::milliseconds(200)));
  EXPECT_FALSE(engine.alive());
}

TEST(Engine, StopWithoutDrainAbortsInFlightRequests) {
  Model& m = *llama().model;
  Engine engine(m, {});
  // As above, the loop is held on the first token until stop(false) has closed the engine, so the stop
  // reaches the loop's next turn while the request still runs. stop() closes, then joins the loop: the
  // close is seen as a refused submit; the requests accepted before it come in that same turn.
  testing::LoopHold held(engine, testing::greedy_request(llama().greedy_prompt, 120));
  std::thread stopper([&engine] { engine.stop(/*drain=*/false); });
  std::vector<Submission> late;
  for (;;) {
    try {
      late.push_back(engine.submit(testing::greedy_request({1, 2}, 4)));
    } catch (const EngineUnavailable&) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // paces the polling only
  }
  held.release();
  stopper.join();
  const Completion c = read_all(held.stream());
  ASSERT_EQ(c.outputs.size(), 2u) << "the first token, then the abort at the loop's next turn";
  EXPECT_TRUE(c.outputs[0].token.has_value());
  EXPECT_EQ(c.finish.at(0), FinishReason::kAbort);
  for (Submission& s : late) {
    const Completion l = read_all(*s.stream);
    EXPECT_EQ(l.finish.at(0), FinishReason::kAbort);
    EXPECT_EQ(l.tokens.count(0), 0u) << "admitted and aborted in the stop's turn, before any step";
  }
  EXPECT_FALSE(engine.alive());
}

TEST(Engine, HealthProbeAnswersWhileIdleAndWhileServing) {
  Model& m = *llama().model;
  Engine engine(m, {});
  EXPECT_TRUE(engine.healthy());
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // idle across several loop turns
  EXPECT_TRUE(engine.healthy());
  EXPECT_TRUE(engine.alive(std::chrono::milliseconds(1000)));
  const Submission s = engine.submit(testing::greedy_request(llama().greedy_prompt, 60));
  EXPECT_TRUE(engine.healthy());
  read_all(*s.stream);
}

}  // namespace
}  // namespace lathe
