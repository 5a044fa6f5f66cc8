// Multi-LoRA serving in the engine, on the PEFT fixture adapter (tests/fixtures/posttrain/lora_adapter)
// and its base (models/llama): greedy tokens with an adapter equal `lathe generate --adapter`'s path
// (generate() on base + LoraAdapters::load) and the merged model's; a batch mixing the base and two
// adapters gives each request its own tokens; the prefix cache never serves one adapter's blocks to
// another (nor to a later load under the same name); unloading defers while requests run; loading
// refuses folders that do not fit, and taken names.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "lathe/base/error.h"
#include "lathe/infer/generate.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/models/lora_merge.h"
#include "lathe/serve/engine/engine.h"
#include "lathe/serve/engine/engine_test_util.h"
#include "lathe/serve/engine/lora_registry.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using testing::Completion;
using testing::read_all;

std::string base_dir() { return testing::fixtures_root() + "/models/llama"; }
std::string adapter_dir() { return testing::fixtures_root() + "/posttrain/lora_adapter"; }

std::unique_ptr<Model> load_base() { return Model::load(base_dir(), {.force_f32 = true}); }

// A second adapter: the fixture's with B scaled by `factor` (a different model, same shapes).
std::string scaled_adapter(const std::string& name, float factor) {
  const std::string dir = testing::scratch_dir("engine_lora_" + name);
  auto m = load_base();
  LoraAdapters ad = LoraAdapters::load(*m, adapter_dir());
  ad.for_each_param([&](const std::string& name, Tensor& t, int) {
    if (name.find("lora_B") == std::string::npos) return;
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] *= factor;
  });
  ad.save(dir);
  return dir;
}

// Greedy tokens of `prompt` by generate() (the KV-cached path of `lathe generate`) on base + the adapter
// in `adapter` (empty: the base).
std::vector<int32_t> generate_greedy(const std::string& adapter, const std::vector<int32_t>& prompt, int n) {
  auto m = load_base();
  if (!adapter.empty()) LoraAdapters::load(*m, adapter);
  const GenerateResult g = generate(*m, prompt, {.max_new_tokens = n, .min_new_tokens = n});
  return {g.tokens.begin() + g.n_prompt, g.tokens.end()};
}

EngineRequest lora_request(std::vector<int32_t> prompt, int n, int64_t adapter_id) {
  EngineRequest r = testing::greedy_request(std::move(prompt), n);
  r.cache_keys.adapter_id = adapter_id;
  return r;
}

// After a probe the loop has published the metrics of its turn before it.
EngineMetrics settled_metrics(Engine& e) {
  EXPECT_TRUE(e.healthy());
  return e.metrics();
}

TEST(EngineLora, GreedyTokensWithAnAdapterEqualGenerateWithItAndTheMergedModel) {
  const std::vector<int32_t> prompt = {175, 211, 166, 245, 76};
  const int n = 16;
  const std::vector<int32_t> want = generate_greedy(adapter_dir(), prompt, n);
  ASSERT_NE(want, generate_greedy("", prompt, n)) << "the adapter must change the greedy tokens";
  const std::string merged = testing::scratch_dir("engine_lora_merged") + "/m";
  merge_lora(base_dir(), adapter_dir(), merged);
  auto merged_model = Model::load(merged, {.force_f32 = true});
  const GenerateResult g = generate(*merged_model, prompt, {.max_new_tokens = n, .min_new_tokens = n});
  EXPECT_EQ(std::vector<int32_t>(g.tokens.begin() + g.n_prompt, g.tokens.end()), want);

  auto served = load_base();
  Engine engine(*served, {});
  const ServedLora lora = engine.load_lora("fixture", adapter_dir());
  EXPECT_GT(lora.id, 0);
  ASSERT_TRUE(engine.find_lora("fixture"));
  EXPECT_EQ(engine.find_lora("fixture")->id, lora.id);
  EXPECT_EQ(read_all(*engine.submit(lora_request(prompt, n, lora.id)).stream).tokens.at(0), want);
  EXPECT_EQ(read_all(*engine.submit(lora_request(prompt, n, 0)).stream).tokens.at(0), generate_greedy("", prompt, n))
      << "the base beside a loaded adapter";
}

TEST(EngineLora, AMixedBatchGivesEachRequestItsOwnTokens) {
  const std::string second = scaled_adapter("mixed", -2.f);
  auto served = load_base();
  Engine engine(*served, {.scheduler = {.max_num_batched_tokens = 24, .max_num_partial_prefills = 2,
                                        .long_prefill_token_threshold = 8}});
  const int64_t a = engine.load_lora("a", adapter_dir()).id, b = engine.load_lora("b", second).id;
  ASSERT_NE(a, b);
  const std::vector<std::vector<int32_t>> prompts = testing::varied_prompts(8, 30, served->config().vocab_size, 7);
  const std::vector<int64_t> ids = {0, a, b, a, 0, b, a, b};  // interleaved: the runner groups them
  const std::vector<std::string> dirs = {"", adapter_dir(), second};
  const int n = 10;
  std::vector<Submission> subs;
  for (size_t i = 0; i < prompts.size(); ++i) subs.push_back(engine.submit(lora_request(prompts[i], n, ids[i])));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string& dir = dirs[ids[i] == 0 ? 0 : ids[i] == a ? 1 : 2];
    EXPECT_EQ(read_all(*subs[i].stream).tokens.at(0), generate_greedy(dir, prompts[i], n)) << "request " << i;
  }
}

TEST(EngineLora, ThePrefixCacheIsNotSharedAcrossAdapters) {
  auto served = load_base();
  Engine engine(*served, {});
  const int64_t a = engine.load_lora("a", adapter_dir()).id;
  const std::vector<int32_t> prompt = testing::varied_prompts(6, 40, served->config().vocab_size, 3).back();
  ASSERT_GE(prompt.size(), 33u);  // two full blocks of 16
  const int n = 6;
  read_all(*engine.submit(lora_request(prompt, n, 0)).stream);  // caches the base's blocks
  const Completion with_a = read_all(*engine.submit(lora_request(prompt, n, a)).stream);
  EXPECT_EQ(settled_metrics(engine).core.prefix_cache_hits, 0) << "the adapter request must not reuse base blocks";
  EXPECT_EQ(with_a.outputs.front().n_cached_prompt, 0);
  EXPECT_EQ(with_a.tokens.at(0), generate_greedy(adapter_dir(), prompt, n));
  const Completion again = read_all(*engine.submit(lora_request(prompt, n, a)).stream);
  EXPECT_EQ(again.outputs.front().n_cached_prompt, 32) << "the same adapter reuses its own blocks";
  EXPECT_EQ(again.tokens.at(0), with_a.tokens.at(0));

  // Unloaded and loaded again under the same name (another folder): a new id, no hit on the old blocks.
  EXPECT_EQ(engine.unload_lora("a"), 0);
  const int64_t a2 = engine.load_lora("a", scaled_adapter("reload", 3.f)).id;
  EXPECT_NE(a2, a);
  const Completion reloaded = read_all(*engine.submit(lora_request(prompt, n, a2)).stream);
  EXPECT_EQ(reloaded.outputs.front().n_cached_prompt, 0);
}

TEST(EngineLora, UnloadStopsNewRequestsAndLoadRefusesBadFoldersAndTakenNames) {
  auto served = load_base();
  Engine engine(*served, {});
  const int64_t a = engine.load_lora("a", adapter_dir()).id;
  EXPECT_THROW(engine.load_lora("a", adapter_dir()), InvalidArgument) << "the name is taken";
  EXPECT_THROW(engine.load_lora("x", adapter_dir() + "/missing"), InvalidArgument);
  EXPECT_THROW(engine.load_lora("y", base_dir()), InvalidArgument) << "a model folder is not an adapter";
  EXPECT_THROW(engine.unload_lora("nope"), InvalidArgument);
  ASSERT_EQ(engine.loras().size(), 1u);

  EXPECT_EQ(engine.unload_lora("a"), 0);
  EXPECT_FALSE(engine.find_lora("a"));
  EXPECT_TRUE(engine.loras().empty());
  // A request still naming the unloaded id (it resolved the name before the unload) fails, with a reason.
  const Completion late = read_all(*engine.submit(lora_request({1, 2, 3}, 4, a)).stream);
  ASSERT_FALSE(late.outputs.empty());
  EXPECT_NE(late.outputs.front().error.find("not loaded"), std::string::npos) << late.outputs.front().error;
  for (const auto& layer : served->weights().layers) EXPECT_TRUE(layer.mlp.down_proj.lora_slots.empty());
  // The engine still serves the base.
  EXPECT_EQ(read_all(*engine.submit(lora_request({1, 2, 3}, 4, 0)).stream).tokens.at(0).size(), 4u);
}

// An unload while a request runs with the adapter: the request finishes with it (its tokens are the
// adapter's), the unload reports it in use, and the slot is freed after it.
TEST(EngineLora, UnloadWhileARequestRunsLetsItFinishWithTheAdapter) {
  auto served = load_base();
  Engine engine(*served, {});
  const int64_t a = engine.load_lora("a", adapter_dir()).id;
  const std::vector<int32_t> prompt = {175, 211, 166, 245, 76};
  const int n = 100;
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, release = false, unloaded = false, done = false;
  std::vector<int32_t> tokens;
  engine.submit(lora_request(prompt, n, a), [&](const EngineOutput& o) {
    std::unique_lock lock(mu);
    if (o.token) tokens.push_back(*o.token);
    if (!started) {  // hold the loop after the first token, until the unloader thread runs
      started = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    } else if (!unloaded) {
      // Pace the request until the unload has run: Engine::unload_lora gives no sign that its call is
      // queued, and the tiny model would finish all its tokens before a late-scheduled unloader thread.
      // Each token waits at most 50 ms (the call runs between steps, so the wait ends only by timeout
      // until then); the unload must come within 100 * 50 ms, not within one sleep.
      cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return unloaded; });
    }
    if (o.finish) {
      done = true;
      cv.notify_all();
    }
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return started; });
  }
  int64_t in_use = -1;
  std::thread unloader([&] {
    {
      std::lock_guard lock(mu);
      release = true;
      cv.notify_all();
    }
    const int64_t u = engine.unload_lora("a");
    std::lock_guard lock(mu);
    in_use = u;
    unloaded = true;
    cv.notify_all();
  });
  unloader.join();
  EXPECT_EQ(in_use, 1) << "the running request still uses it";
  EXPECT_FALSE(engine.find_lora("a"));
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return done; }));
  }
  EXPECT_EQ(tokens, generate_greedy(adapter_dir(), prompt, n));
  EXPECT_TRUE(engine.healthy());  // a loop turn after the finish: the slot was freed in that step
  for (const auto& layer : served->weights().layers) EXPECT_TRUE(layer.self_attn.q_proj.lora_slots.empty());
}

// The registry alone (single-threaded): an unload while choices run frees the slot after the last one;
// freed slots are reused, ids never.
TEST(LoraRegistry, UnloadDefersWhileChoicesRunAndSlotsAreReused) {
  auto m = load_base();
  LoraRegistry reg;
  const int64_t a = reg.add("a", adapter_dir(), read_lora_folder(*m, adapter_dir()));
  const int32_t slot_a = reg.slot_of(a);
  EXPECT_EQ(slot_a, 1);
  reg.acquire(a, 2);  // a request with n = 2
  EXPECT_EQ(reg.remove("a"), 2) << "two choices still run with it";
  EXPECT_TRUE(reg.served().empty()) << "the name is gone at once";
  EXPECT_THROW(reg.check_loaded(a), InvalidArgument);
  EXPECT_EQ(reg.slot_of(a), slot_a) << "running choices keep their slot";
  const Linear& q = m->weights().layers[0].self_attn.q_proj;
  ASSERT_GT(q.lora_slots.size(), 1u);
  EXPECT_TRUE(q.lora_slots[1].defined());
  // A new adapter may take the old name meanwhile; it gets another slot and id.
  const int64_t b = reg.add("a", adapter_dir(), read_lora_folder(*m, adapter_dir()));
  EXPECT_NE(b, a);
  EXPECT_EQ(reg.slot_of(b), 2);
  reg.release(a);
  EXPECT_TRUE(q.lora_slots[1].defined());
  reg.release(a);
  EXPECT_FALSE(q.lora_slots[1].defined()) << "freed after the last choice";
  EXPECT_EQ(reg.n_slots_used(), 1);
  const int64_t c = reg.add("c", adapter_dir(), read_lora_folder(*m, adapter_dir()));
  EXPECT_EQ(reg.slot_of(c), 1) << "the freed slot is reused";
  EXPECT_GT(c, b);
}

}  // namespace
}  // namespace lathe
