// Helpers of the frontend tests: an EngineBackend over an Engine on the random Qwen3 text model with the
// real Qwen3 tokenizer (tests skip without it), and requests written as JSON bodies, parsed as the HTTP
// server parses them, run to their finished event.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lathe/io/file_read.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/models/test_text_model.h"
#include "lathe/serve/engine/engine.h"
#include "lathe/serve/frontend/engine_backend.h"
#include "lathe/serve/http/parse_request.h"

// Skips a test when the real Qwen3 tokenizer is absent (`make setup` fetches it); inside lathe::serve.
#define LATHE_NEED_TOKENIZER()                                                                        \
  if (testing::qwen3_text_model_dir().empty())                                                        \
  GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root()

namespace lathe::testing {

inline constexpr int64_t kTestMaxModelLen = 128;  // short, so chat's default max_tokens (the rest) stays cheap

// A request's events, merged per choice.
struct BackendResult {
  std::vector<serve::GenerationOutput> events;
  std::map<int, std::string> text;                 // choice index -> its text
  std::map<int, std::vector<std::string>> pieces;  // choice index -> each non-empty text delta
  std::map<int, std::string> finish;               // choice index -> finish_reason
  std::map<int, std::vector<serve::TokenLogprob>> logprobs;
  std::map<int, std::vector<serve::PromptPositionLogprobs>> prompt_logprobs;  // choice index -> its prompt's
  serve::Usage usage;                              // of the finished event
  std::optional<serve::ApiError> error;
};

// Collects the events of one request (they arrive on the engine thread).
class EventCollector {
 public:
  serve::OutputCallback callback() {
    return [this](serve::GenerationOutput out) {
      std::unique_lock lock(mu_);
      EXPECT_FALSE(result_.events.size() && result_.events.back().finished) << "an event after the finished one";
      for (const serve::ChoiceDelta& d : out.choices) {
        result_.text[d.index] += d.text;
        if (!d.text.empty()) result_.pieces[d.index].push_back(d.text);
        if (d.finish_reason) result_.finish[d.index] = *d.finish_reason;
        result_.logprobs[d.index].insert(result_.logprobs[d.index].end(), d.logprobs.begin(), d.logprobs.end());
        if (d.prompt_logprobs) {
          EXPECT_FALSE(result_.prompt_logprobs.count(d.index)) << "prompt logprobs twice for choice " << d.index;
          result_.prompt_logprobs[d.index] = *d.prompt_logprobs;
        }
      }
      if (out.finished) {
        result_.usage = out.usage;
        result_.error = out.error;
      }
      result_.events.push_back(std::move(out));
      cv_.notify_all();
      if (hold_ && result_.events.size() == 1) cv_.wait(lock, [&] { return !hold_; });
    };
  }
  // Holds the engine loop on the first event (in the callback, on the engine thread) until release():
  // an abort queued meanwhile reaches the loop's next turn, before the request's next step.
  void hold_first() { hold_ = true; }
  void release() {
    std::lock_guard lock(mu_);
    hold_ = false;
    cv_.notify_all();
  }
  ~EventCollector() { release(); }
  // Waits for the finished event (a failed test after `timeout`).
  BackendResult wait(std::chrono::seconds timeout = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, timeout, [&] { return !result_.events.empty() && result_.events.back().finished; }))
        << "no finished event";
    return result_;
  }
  // Waits until some event arrived.
  bool wait_first(std::chrono::seconds timeout = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return !result_.events.empty(); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  BackendResult result_;
  bool hold_ = false;
};

struct BackendFixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  nlohmann::ordered_json tokenizer_config;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<serve::EngineBackend> backend;
  int next_id = 0;

  explicit BackendFixture(const std::string& dir) {
    model = Model::load(dir);
    tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::load(dir));
    tokenizer_config = read_ordered_json_object_file(dir + "/tokenizer_config.json");
    EngineConfig config{.kv_cache_memory = 64 << 20};
    config.scheduler.max_model_len = kTestMaxModelLen;
    config.scheduler.eos_token_ids = {kQwen3ImEnd};
    engine = std::make_unique<Engine>(*model, config);
    backend = std::make_unique<serve::EngineBackend>(*engine, *tok, tokenizer_config,
                                                     serve::EngineBackendOptions{.model_name = "m"});
  }
  ~BackendFixture() { engine->stop(false); }

  serve::RequestLimits limits() const {
    return {.served_models = {"m"}, .max_model_len = static_cast<int>(kTestMaxModelLen),
            .vocab_size = static_cast<int>(model->config().vocab_size)};
  }
  // The request as the server hands it over; throws ApiException where the server would answer an error.
  serve::GenerationRequest request(const nlohmann::json& body) {
    serve::GenerationRequest g{.request_id = "req-" + std::to_string(next_id++),
                               .arrival = std::chrono::steady_clock::now()};
    if (body.contains("messages")) {
      g.body = serve::parse_chat_completion_request(body.dump(), limits());
    } else {
      g.body = serve::parse_completion_request(body.dump(), limits());
    }
    return g;
  }
  BackendResult run(const nlohmann::json& body) {
    EventCollector c;
    backend->submit(request(body), c.callback());
    return c.wait();
  }
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens = true) const {
    const std::vector<uint32_t> ids = tok->encode_ids(text, add_special_tokens);
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
};

}  // namespace lathe::testing
