// `lathe serve` end to end over loopback on the random Qwen3 text model with the real Qwen3 tokenizer
// (skipped without it): start the binary on --port 0, read the bound port from its output, POST a
// completion and a streamed chat completion with usage, check /health, /v1/models and /metrics, then
// SIGTERM it: it drains, says so, and exits 0. Also the start-up refusal of a context the KV budget
// cannot hold.
#include <httplib.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "cli_run.h"
#include "lathe/models/test_text_model.h"

namespace lathe {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The `data: ` payloads of an SSE body, [DONE] included.
std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  return out;
}

// The value of a counter of model "tiny" in a /metrics body (-1: absent).
double counter_value(const std::string& body, const std::string& name) {
  const std::string key = name + "{model_name=\"tiny\"} ";
  const size_t at = body.find(key);
  return at == std::string::npos ? -1 : std::stod(body.substr(at + key.size()));
}

// GET /metrics until the counter `name` reaches `at_least` (up to 20 s): the engine loop publishes its
// metrics after each turn, so a response can reach the client before the metrics of its last step.
httplib::Result metrics_with(httplib::Client& cli, const std::string& name, double at_least) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    httplib::Result res = cli.Get("/metrics");
    if (!res || res->status != 200 || counter_value(res->body, name) >= at_least ||
        std::chrono::steady_clock::now() > deadline)
      return res;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

class ServeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::qwen3_text_model_dir();
    if (dir_.empty()) GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root();
    log_ = testing::scratch_dir("serve_cli") + "/serve.log";
  }
  void TearDown() override {
    if (pid_ > 0) testing::kill_and_reap(pid_);
  }
  // Starts `lathe serve` on a free port; the port (a failed test when it does not come up).
  int start(const std::string& extra_args) {
    pid_ = testing::spawn_lathe_logged("serve " + dir_ + " --port 0 --threads 1 --served-model-name tiny " + extra_args, log_);
    EXPECT_GT(pid_, 0);
    const int port = testing::wait_for_listening_port(pid_, log_, std::chrono::seconds(60));
    EXPECT_GT(port, 0) << read_file(log_);
    return port;
  }
  // SIGTERMs the server; its exit code (-1: killed by a signal or still running after the timeout).
  int stop() {
    ::kill(pid_, SIGTERM);
    const int code = testing::wait_exit(pid_, std::chrono::seconds(30));
    pid_ = -1;
    return code;
  }

  std::string dir_, log_;
  pid_t pid_ = -1;
};

TEST_F(ServeCli, ServesCompletionsChatHealthModelsMetricsAndDrainsOnSigterm) {
  const int port = start("--api-key sesame --max-model-len 256 --kv-cache-memory 16MiB");
  ASSERT_GT(port, 0);
  const std::string log_at_start = read_file(log_);
  EXPECT_NE(log_at_start.find("KV cache (f32): "), std::string::npos) << log_at_start;
  EXPECT_NE(log_at_start.find("max concurrency at max_model_len 256"), std::string::npos) << log_at_start;
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(30, 0);
  const httplib::Headers auth = {{"Authorization", "Bearer sesame"}};

  auto health = cli.Get("/health");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  auto models = cli.Get("/v1/models", auth);
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200) << models->body;
  const nlohmann::json m = nlohmann::json::parse(models->body);
  EXPECT_EQ(m["data"][0]["id"], "tiny");
  EXPECT_EQ(m["data"][0]["max_model_len"], 256);
  EXPECT_EQ(cli.Get("/v1/models")->status, 401);  // the key is required on /v1/*

  const nlohmann::json completion = {{"model", "tiny"}, {"prompt", "The quick brown fox"}, {"max_tokens", 5},
                                     {"temperature", 0}, {"ignore_eos", true}};
  auto res = cli.Post("/v1/completions", auth, completion.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const nlohmann::json c = nlohmann::json::parse(res->body);
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["completion_tokens"], 5);
  EXPECT_TRUE(c["choices"][0]["text"].is_string());

  const nlohmann::json chat = {{"messages", {{{"role", "user"}, {"content", "Name a colour."}}}}, {"max_tokens", 4},
                               {"ignore_eos", true}, {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  res = cli.Post("/v1/chat/completions", auth, chat.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const std::vector<std::string> events = sse_payloads(res->body);
  ASSERT_GE(events.size(), 3u) << res->body;
  EXPECT_EQ(events.back(), "[DONE]");
  const nlohmann::json first = nlohmann::json::parse(events.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["usage"].is_null());
  const nlohmann::json usage = nlohmann::json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
  EXPECT_GT(usage["usage"]["prompt_tokens"].get<int>(), 5);
  bool finished = false;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const nlohmann::json e = nlohmann::json::parse(events[i]);
    if (!e["choices"].empty() && e["choices"][0]["finish_reason"] == "length") finished = true;
  }
  EXPECT_TRUE(finished) << res->body;

  const std::string too_long(3000, 'a');  // far more tokens than 256
  res = cli.Post("/v1/completions", auth, nlohmann::json({{"prompt", too_long}}).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("context_length_exceeded"), std::string::npos) << res->body;

  auto metrics = metrics_with(cli, "vllm:generation_tokens_total", 9);
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("vllm:generation_tokens_total{model_name=\"tiny\"} 9"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("vllm:kv_cache_usage_perc"), std::string::npos);

  EXPECT_EQ(stop(), 0) << read_file(log_);
  const std::string log = read_file(log_);
  EXPECT_NE(log.find("draining"), std::string::npos) << log;
  EXPECT_NE(log.find("drained and stopped"), std::string::npos) << log;
}

// A request in flight when SIGTERM arrives still completes before the server exits.
TEST_F(ServeCli, SigtermLetsTheRequestInFlightFinish) {
  const int port = start("--max-model-len 512");
  ASSERT_GT(port, 0);
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(60, 0);
  int status = 0;  // 0: no answer
  std::string body;
  std::thread client([&] {
    const nlohmann::json request = {{"prompt", "Tell me"}, {"max_tokens", 300}, {"ignore_eos", true}};
    if (httplib::Result res = cli.Post("/v1/completions", request.dump(), "application/json")) {
      status = res->status;
      body = res->body;
    }
  });
  // Wait until the engine runs it (/metrics: one running request), then SIGTERM.
  httplib::Client probe("127.0.0.1", port);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto mt = probe.Get("/metrics");
    if (mt && mt->body.find("vllm:num_requests_running{model_name=\"tiny\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGTERM);
  client.join();
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(nlohmann::json::parse(body)["usage"]["completion_tokens"], 300);
  EXPECT_EQ(testing::wait_exit(pid_, std::chrono::seconds(30)), 0) << read_file(log_);
  pid_ = -1;
  EXPECT_NE(read_file(log_).find("1 requests in flight"), std::string::npos) << read_file(log_);
}

// The same 80-token prompt twice: its full blocks come from the prefix cache the second time, unless
// --no-enable-prefix-caching turned it off (the A/B switch of the cost at a 0% hit rate).
TEST_F(ServeCli, NoEnablePrefixCachingTurnsTheCacheOff) {
  const nlohmann::json request = {{"prompt", std::vector<int>(80, 42)}, {"max_tokens", 2}, {"temperature", 0},
                                  {"ignore_eos", true}};
  for (const bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "caching on" : "caching off");
    log_ = testing::scratch_dir("serve_cli") + (caching ? "/serve_cache_on.log" : "/serve_cache_off.log");  // one per server
    const int port = start(caching ? "--max-model-len 256" : "--max-model-len 256 --no-enable-prefix-caching");
    ASSERT_GT(port, 0);
    EXPECT_NE(read_file(log_).find(caching ? "prefix caching on" : "prefix caching off"), std::string::npos)
        << read_file(log_);
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(30, 0);
    for (int i = 0; i < 2; ++i) {
      auto res = cli.Post("/v1/completions", request.dump(), "application/json");
      ASSERT_TRUE(res);
      ASSERT_EQ(res->status, 200) << res->body;
    }
    // Both requests' tokens are counted: the second's prefix-cache hits are in the same snapshot.
    auto metrics = metrics_with(cli, "vllm:generation_tokens_total", 4);
    ASSERT_TRUE(metrics);
    const double hits = counter_value(metrics->body, "vllm:prefix_cache_hits_total");
    if (caching) EXPECT_GE(hits, 64) << metrics->body;  // 4 full blocks of 16 at least
    else EXPECT_EQ(hits, 0) << metrics->body;
    EXPECT_EQ(stop(), 0) << read_file(log_);
  }
}

// --mmap serves from the checkpoint's map in place: the same greedy tokens as the default copy.
TEST_F(ServeCli, MmapServesTheSameTokensAsTheCopiedWeights) {
  const nlohmann::json request = {{"prompt", std::vector<int>{5, 17, 42, 9}}, {"max_tokens", 6}, {"temperature", 0},
                                  {"ignore_eos", true}};
  std::vector<nlohmann::json> texts;
  for (const std::string flag : {"", "--mmap"}) {
    SCOPED_TRACE(flag.empty() ? "copied" : "mmap");
    log_ = testing::scratch_dir("serve_cli") + (flag.empty() ? "/serve_copy.log" : "/serve_mmap.log");
    const int port = start("--max-model-len 256 " + flag);
    ASSERT_GT(port, 0);
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(30, 0);
    auto res = cli.Post("/v1/completions", request.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    texts.push_back(nlohmann::json::parse(res->body)["choices"][0]["text"]);
    EXPECT_EQ(stop(), 0) << read_file(log_);
  }
  EXPECT_EQ(texts[0], texts[1]);
}

// A folder written by `lathe quantize` serves as it is: int8 weights through the engine's batched decode, the
// requested number of tokens, the same greedy text for the same request twice, and two requests at once
// (batched rows of the quantised GEMV) each get the text they get alone.
TEST_F(ServeCli, ServesAQuantisedFolder) {
  const std::string quantised = testing::scratch_dir("serve_cli_quant") + "/int8";
  const auto q = testing::run_lathe_bounded("quantize " + dir_ + " " + quantised + " --format int8");
  ASSERT_EQ(q.first, 0) << q.second;
  dir_ = quantised;
  const int port = start("--max-model-len 256");
  ASSERT_GT(port, 0);
  const auto request = [&](const std::vector<int>& prompt) {
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(30, 0);
    const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}};
    auto res = cli.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    return res && res->status == 200 ? nlohmann::json::parse(res->body) : nlohmann::json();
  };
  const std::vector<int> a = {5, 17, 42, 9}, b = {7, 3, 11, 2, 8, 13, 21};
  const nlohmann::json alone_a = request(a), alone_b = request(b);
  ASSERT_FALSE(alone_a.is_null());
  ASSERT_FALSE(alone_b.is_null());
  EXPECT_EQ(alone_a["usage"]["completion_tokens"], 6) << alone_a.dump();
  EXPECT_EQ(request(a)["choices"][0]["text"], alone_a["choices"][0]["text"]);
  nlohmann::json together_a, together_b;
  std::thread other([&] { together_b = request(b); });
  together_a = request(a);
  other.join();
  EXPECT_EQ(together_a["choices"][0]["text"], alone_a["choices"][0]["text"]);
  EXPECT_EQ(together_b["choices"][0]["text"], alone_b["choices"][0]["text"]);
  EXPECT_EQ(stop(), 0) << read_file(log_);
}

// --kv-cache-dtype int8 from the command line: the start-up line names it, and a completion runs over it.
TEST_F(ServeCli, ServesOverAnInt8KvCache) {
  const int port = start("--max-model-len 256 --kv-cache-memory 16MiB --kv-cache-dtype int8");
  ASSERT_GT(port, 0);
  const std::string log_at_start = read_file(log_);
  EXPECT_NE(log_at_start.find("KV cache (int8): "), std::string::npos) << log_at_start;
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(30, 0);
  const nlohmann::json completion = {{"prompt", "The quick brown fox"}, {"max_tokens", 5}, {"temperature", 0},
                                     {"ignore_eos", true}};
  auto res = cli.Post("/v1/completions", completion.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const nlohmann::json c = nlohmann::json::parse(res->body);
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"]["completion_tokens"], 5);
  EXPECT_EQ(stop(), 0) << read_file(log_);
}

TEST_F(ServeCli, AContextTheKvBudgetCannotHoldFailsNamingBothNumbers) {
  auto r = testing::run_lathe_bounded("serve " + dir_ + " --port 0 --threads 1 --max-model-len 512 --kv-cache-memory 64KiB");
  EXPECT_TRUE(testing::is_clean_error(r, "max_model_len 512")) << r.second;
  EXPECT_NE(r.second.find("usable blocks"), std::string::npos) << r.second;
  r = testing::run_lathe_bounded("serve " + dir_ + " --port 0 --max-model-len 4096");
  EXPECT_TRUE(testing::is_clean_error(r, "max_position_embeddings (512)")) << r.second;
  r = testing::run_lathe_bounded("serve " + dir_ + " --kv-cache-memory 2XB");
  EXPECT_TRUE(testing::is_clean_error(r, "--kv-cache-memory")) << r.second;
  r = testing::run_lathe_bounded("serve " + dir_ + " --kv-cache-dtype fp8");
  EXPECT_TRUE(testing::is_clean_error(r, "option --kv-cache-dtype: expected auto, f32, bf16 or int8, got 'fp8'"))
      << r.second;
}

// Multi-LoRA serving from the command line: --lora NAME=PATH serves the adapter beside the base (listed
// by /v1/models with the base as parent, picked by "model", its greedy text unlike the base's);
// --enable-lora-updates opens vLLM's unload endpoint; a malformed --lora or a folder that does not fit
// stops the server at start, naming the flag.
TEST_F(ServeCli, LoraFlagServesTheAdapterBesideTheBase) {
  const std::string adapter = testing::qwen3_text_lora_dir();
  const int port = start("--max-model-len 256 --kv-cache-memory 16MiB --enable-lora-updates --lora sql=" + adapter);
  ASSERT_GT(port, 0);
  EXPECT_NE(read_file(log_).find("loaded LoRA adapter 'sql'"), std::string::npos) << read_file(log_);
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(30, 0);
  const nlohmann::json m = nlohmann::json::parse(cli.Get("/v1/models")->body);
  ASSERT_EQ(m["data"].size(), 2u) << m.dump();
  EXPECT_EQ(m["data"][1]["id"], "sql");
  EXPECT_EQ(m["data"][1]["parent"], "tiny");
  const auto complete = [&](const std::string& model) {
    const nlohmann::json body = {{"model", model}, {"prompt", "The quick brown fox"}, {"max_tokens", 6},
                                 {"temperature", 0}, {"ignore_eos", true}};
    return cli.Post("/v1/completions", body.dump(), "application/json");
  };
  auto with_sql = complete("sql"), with_base = complete("tiny");
  ASSERT_TRUE(with_sql && with_base);
  ASSERT_EQ(with_sql->status, 200) << with_sql->body;
  ASSERT_EQ(with_base->status, 200) << with_base->body;
  const nlohmann::json a = nlohmann::json::parse(with_sql->body), b = nlohmann::json::parse(with_base->body);
  EXPECT_EQ(a["model"], "sql");
  EXPECT_NE(a["choices"][0]["text"], b["choices"][0]["text"]) << "the adapter must change the greedy text";
  auto unload = cli.Post("/v1/unload_lora_adapter", R"({"lora_name": "sql"})", "application/json");
  ASSERT_TRUE(unload);
  EXPECT_EQ(unload->status, 200) << unload->body;
  auto gone = complete("sql");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
  EXPECT_NE(gone->body.find("model_not_found"), std::string::npos) << gone->body;
  EXPECT_EQ(stop(), 0) << read_file(log_);

  auto r = testing::run_lathe_bounded("serve " + dir_ + " --port 0 --threads 1 --max-model-len 256 --lora sql");
  EXPECT_TRUE(testing::is_clean_error(r, "--lora")) << r.second;
  r = testing::run_lathe_bounded("serve " + dir_ + " --port 0 --threads 1 --max-model-len 256 --lora sql=" + dir_);
  EXPECT_TRUE(testing::is_clean_error(r, "adapter_config.json")) << r.second;
}

}  // namespace
}  // namespace lathe
