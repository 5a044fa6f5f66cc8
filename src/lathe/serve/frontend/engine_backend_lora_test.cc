// EngineBackend with LoRA adapters (multi-LoRA serving) on the random Qwen3 text model and an adapter
// made for it here: "model" picks the adapter by name (text equal to generate() on base + adapter, and
// different from the base's), the base by its served name, an unknown name is 404 model_not_found;
// loads and unloads give vLLM's messages and statuses.
#include <gtest/gtest.h>

#include "lathe/infer/generate.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/serve/frontend/engine_backend.h"
#include "lathe/serve/frontend/frontend_test_util.h"
#include "lathe/serve/http/api_error.h"

namespace lathe::serve {
namespace {

using testing::BackendFixture;
using testing::BackendResult;
using testing::EventCollector;

// The text of a greedy completion of `ids` asking for `model`, parsed with the adapters as served names.
BackendResult complete(BackendFixture& f, const std::string& model, const std::vector<int32_t>& ids, int n) {
  RequestLimits limits = f.limits();
  for (const ServedAdapter& a : f.backend->lora_adapters()) limits.served_models.push_back(a.name);
  const nlohmann::json body = {{"model", model}, {"prompt", ids}, {"max_tokens", n}, {"temperature", 0},
                               {"ignore_eos", true}};
  GenerationRequest g{.request_id = "req-" + model, .body = parse_completion_request(body.dump(), limits),
                      .arrival = std::chrono::steady_clock::now()};
  EventCollector c;
  f.backend->submit(std::move(g), c.callback());
  return c.wait();
}

TEST(EngineBackendLora, ModelPicksTheAdapterAndLoadsAndUnloadsAnswerAsVllm) {
  if (testing::qwen3_text_model_dir().empty()) GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root();
  const std::string model_dir = testing::qwen3_text_model_dir();
  const std::string adapter = testing::qwen3_text_lora_dir();
  BackendFixture f(model_dir);
  EXPECT_EQ(f.backend->load_lora_adapter("sql", adapter), "Success: LoRA adapter 'sql' added successfully.");
  ASSERT_EQ(f.backend->lora_adapters().size(), 1u);
  EXPECT_EQ(f.backend->lora_adapters()[0].path, adapter);

  const std::vector<int32_t> ids = f.encode("The quick brown fox");
  const int n = 8;
  auto adapted = Model::load(model_dir);
  LoraAdapters::load(*adapted, adapter);
  const GenerateResult want = generate(*adapted, ids, {.max_new_tokens = n, .min_new_tokens = n});
  const std::string want_text =
      f.tok->decode(std::vector<uint32_t>(want.tokens.begin() + want.n_prompt, want.tokens.end()), true);
  const BackendResult with_sql = complete(f, "sql", ids, n), with_base = complete(f, "m", ids, n);
  ASSERT_FALSE(with_sql.error);
  EXPECT_EQ(with_sql.text.at(0), want_text);
  EXPECT_NE(with_sql.text.at(0), with_base.text.at(0)) << "the adapter must change the greedy text";

  const auto status_of = [](const auto& fn) {
    try {
      fn();
    } catch (const ApiException& e) {
      return e.error().status;
    }
    return 200;
  };
  EXPECT_EQ(status_of([&] { f.backend->load_lora_adapter("sql", adapter); }), 400) << "taken";
  EXPECT_EQ(status_of([&] { f.backend->load_lora_adapter("m", adapter); }), 400) << "the base's name";
  EXPECT_EQ(status_of([&] { f.backend->load_lora_adapter("x", adapter + "/missing"); }), 404);
  EXPECT_EQ(status_of([&] { f.backend->load_lora_adapter("x", model_dir); }), 400) << "not an adapter folder";

  EXPECT_EQ(f.backend->unload_lora_adapter("sql"), "Success: LoRA adapter 'sql' removed successfully.");
  EXPECT_TRUE(f.backend->lora_adapters().empty());
  EXPECT_EQ(status_of([&] { f.backend->unload_lora_adapter("sql"); }), 404);
  // A request parsed while "sql" was served but submitted after its unload: 404 model_not_found.
  RequestLimits limits = f.limits();
  limits.served_models.push_back("sql");
  GenerationRequest late{.request_id = "late",
                         .body = parse_completion_request(nlohmann::json{{"model", "sql"}, {"prompt", ids}}.dump(), limits)};
  try {
    EventCollector c;
    f.backend->submit(std::move(late), c.callback());
    ADD_FAILURE() << "expected model_not_found";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().status, 404);
    EXPECT_EQ(e.error().code, "model_not_found");
  }
}

}  // namespace
}  // namespace lathe::serve
