// The server on loopback against a fake backend that echoes tokens at a fixed pace: a non-streaming and
// a streaming request, errors with their HTTP status, the API key, /health and /metrics, and a client
// that disconnects mid-stream aborting its backend request.
#include "lathe/serve/http/http_server.h"

#include <utility>  // before Boost: 1.74's asio/awaitable.hpp uses std::exchange without including it (C++20)

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "lathe/serve/http/api_error.h"

namespace lathe::serve {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// Each request gets a thread that emits "t0 ", "t1 ", ... one token per 2 ms up to max_tokens (choice 0
// of each request), then a finished event with usage; abort() stops it and is recorded.
class EchoBackend : public ServingBackend {
 public:
  ~EchoBackend() override {
    for (std::thread& t : threads_) t.join();
  }
  BackendLimits limits() const override { return {.max_model_len = 256, .vocab_size = 100}; }

  void submit(GenerationRequest request, OutputCallback on_output) override {
    int max_tokens = 0;
    int prompt_tokens = 0;
    if (auto* c = std::get_if<CompletionRequest>(&request.body)) {
      max_tokens = *c->sampling.max_tokens;
      prompt_tokens = 3;
      if (std::get_if<std::string>(&c->prompts[0]) && std::get<std::string>(c->prompts[0]) == "too long") {
        throw ApiException(context_length_exceeded("prompt over the context", "prompt"));
      }
    } else {
      max_tokens = std::get<ChatCompletionRequest>(request.body).sampling.max_tokens.value_or(4);
      prompt_tokens = 5;
    }
    std::lock_guard lock(mu_);
    submitted_.insert(request.request_id);
    by_client_id_[request.client_request_id] = request.request_id;
    threads_.emplace_back([this, id = request.request_id, max_tokens, prompt_tokens, on_output = std::move(on_output)] {
      for (int i = 0; i < max_tokens; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        if (is_aborted(id)) return;  // the callback is dropped with the thread's lambda
        GenerationOutput out;
        out.choices.push_back({.index = 0, .text = "t" + std::to_string(i) + " ",
                               .finish_reason = i + 1 == max_tokens ? std::optional<std::string>("length") : std::nullopt});
        out.finished = i + 1 == max_tokens;
        out.usage = {.prompt_tokens = prompt_tokens, .completion_tokens = i + 1};
        on_output(std::move(out));
      }
    });
  }

  void abort(const std::string& request_id) override {
    std::lock_guard lock(mu_);
    aborted_.insert(request_id);
    cv_.notify_all();
  }
  bool healthy() const override { return healthy_; }
  std::string metrics_text() const override { return "vllm:num_requests_running 0\n"; }

  // LoRA adapters: a name list ("missing" paths do not exist).
  std::vector<ServedAdapter> lora_adapters() const override {
    std::lock_guard lock(mu_);
    return adapters_;
  }
  std::string load_lora_adapter(const std::string& name, const std::string& path) override {
    if (path == "missing") throw ApiException({.status = 404, .type = "invalid_request_error", .message = "No adapter found"});
    std::lock_guard lock(mu_);
    adapters_.push_back({.name = name, .path = path});
    return "Success: LoRA adapter '" + name + "' added successfully.";
  }
  std::string unload_lora_adapter(const std::string& name) override {
    std::lock_guard lock(mu_);
    const auto it = std::find_if(adapters_.begin(), adapters_.end(), [&](const ServedAdapter& a) { return a.name == name; });
    if (it == adapters_.end()) throw ApiException({.status = 404, .type = "invalid_request_error", .message = "unknown"});
    adapters_.erase(it);
    return "Success: LoRA adapter '" + name + "' removed successfully.";
  }

  bool is_aborted(const std::string& id) {
    std::lock_guard lock(mu_);
    return aborted_.count(id) > 0;
  }
  // Waits for the abort of the request the client sent with this X-Request-Id.
  bool wait_aborted(const std::string& client_id, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      auto it = by_client_id_.find(client_id);
      return it != by_client_id_.end() && aborted_.count(it->second) > 0;
    });
  }
  size_t n_submitted() {
    std::lock_guard lock(mu_);
    return submitted_.size();
  }
  std::atomic<bool> healthy_{true};

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> submitted_, aborted_;
  std::map<std::string, std::string> by_client_id_;  // X-Request-Id -> request id
  std::vector<std::thread> threads_;
  std::vector<ServedAdapter> adapters_;
};

struct Reply {
  int status = 0;
  std::string content_type;
  std::string body;  // de-chunked
};

Reply request(int port, http::verb method, const std::string& target, const std::string& body,
              const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  http::request<http::string_body> req(method, target, 11);
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  http::read(stream, buf, parser);
  const auto& res = parser.get();
  return {static_cast<int>(res.result_int()), std::string(res[http::field::content_type]), res.body()};
}

nlohmann::json error_of(const Reply& r) { return nlohmann::json::parse(r.body)["error"]; }

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpServerOptions o = {}) {
    o.port = 0;  // a free port, read back below
    if (o.served_model_names.empty()) o.served_model_names = {"tiny"};
    server_ = std::make_unique<HttpServer>(backend_, o);
    server_->start();
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }
  EchoBackend backend_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(HttpServerTest, NonStreamingCompletion) {
  start();
  Reply r = request(port_, http::verb::post, "/v1/completions", R"({"model": "tiny", "prompt": "hi", "max_tokens": 3})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  nlohmann::json j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["text"], "t0 t1 t2 ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 6);
  EXPECT_EQ(server_->in_flight(), 0u);
}

TEST_F(HttpServerTest, StreamingChatWithUsage) {
  start();
  Reply r = request(port_, http::verb::post, "/v1/chat/completions",
                    R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": true,
                        "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  std::vector<nlohmann::json> chunks;
  size_t pos = 0;
  bool done = false;
  while (pos < r.body.size()) {
    size_t end = r.body.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos);
    std::string data = r.body.substr(pos + 6, end - pos - 6);
    if (data == "[DONE]") done = true;
    else chunks.push_back(nlohmann::json::parse(data));
    pos = end + 2;
  }
  EXPECT_TRUE(done);
  ASSERT_EQ(chunks.size(), 5u);  // role, 3 tokens, usage
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 1; i < 4; ++i) text += chunks[i]["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(text, "t0 t1 t2 ");
  EXPECT_EQ(chunks[3]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks[4]["choices"], nlohmann::json::array());
  EXPECT_EQ(chunks[4]["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(chunks[4]["usage"]["completion_tokens"], 3);
}

TEST_F(HttpServerTest, ErrorsGetStatusAndServerKeepsServing) {
  start({.max_body_bytes = 4096});
  Reply bad_json = request(port_, http::verb::post, "/v1/completions", "{\"prompt\":");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_EQ(error_of(bad_json)["type"], "invalid_request_error");
  Reply utf8 = request(port_, http::verb::post, "/v1/completions", "{\"prompt\": \"\xFF\"}");
  EXPECT_EQ(utf8.status, 400);
  Reply model = request(port_, http::verb::post, "/v1/completions", R"({"model": "gpt-4", "prompt": "x"})");
  EXPECT_EQ(model.status, 404);
  EXPECT_EQ(error_of(model)["code"], "model_not_found");
  Reply huge = request(port_, http::verb::post, "/v1/completions", R"({"prompt": "x", "max_tokens": 100000})");
  EXPECT_EQ(huge.status, 400);
  EXPECT_EQ(error_of(huge)["code"], "context_length_exceeded");
  Reply too_long = request(port_, http::verb::post, "/v1/completions", R"({"prompt": "too long"})");  // the backend refuses
  EXPECT_EQ(too_long.status, 400);
  EXPECT_EQ(error_of(too_long)["code"], "context_length_exceeded");
  Reply n = request(port_, http::verb::post, "/v1/completions", R"({"prompt": "x", "n": 17})");
  EXPECT_EQ(n.status, 400);
  EXPECT_EQ(error_of(n)["param"], "n");
  Reply big = request(port_, http::verb::post, "/v1/completions", R"({"prompt": ")" + std::string(5000, 'a') + "\"}");
  EXPECT_EQ(big.status, 413);
  Reply route = request(port_, http::verb::get, "/v1/nothing", "");
  EXPECT_EQ(route.status, 404);
  // Still serving.
  Reply ok = request(port_, http::verb::post, "/v1/completions", R"({"prompt": "x", "max_tokens": 1})");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(backend_.n_submitted(), 1u);  // only the valid request reached the backend ("too long" threw)
}

TEST_F(HttpServerTest, ApiKeyModelsHealthMetrics) {
  start({.api_key = "sekrit", .served_model_names = {"tiny", "tiny-2"}});
  EXPECT_EQ(request(port_, http::verb::get, "/v1/models", "").status, 401);
  Reply wrong = request(port_, http::verb::get, "/v1/models", "", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(error_of(wrong)["code"], "invalid_api_key");
  Reply models = request(port_, http::verb::get, "/v1/models", "", {{"Authorization", "Bearer sekrit"}});
  ASSERT_EQ(models.status, 200);
  nlohmann::json m = nlohmann::json::parse(models.body);
  EXPECT_EQ(m["data"][1]["id"], "tiny-2");
  EXPECT_EQ(m["data"][0]["max_model_len"], 256);
  EXPECT_EQ(request(port_, http::verb::post, "/v1/completions", R"({"prompt": "x"})").status, 401);
  // /health and /metrics are not behind the key (vLLM).
  EXPECT_EQ(request(port_, http::verb::get, "/health", "").status, 200);
  Reply metrics = request(port_, http::verb::get, "/metrics", "");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body, "vllm:num_requests_running 0\n");
  backend_.healthy_ = false;  // the engine loop stopped answering
  EXPECT_EQ(request(port_, http::verb::get, "/health", "").status, 503);
}

TEST_F(HttpServerTest, DisconnectMidStreamAbortsTheRequest) {
  start();
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)));
  http::request<http::string_body> req(http::verb::post, "/v1/completions", 11);
  req.set(http::field::host, "127.0.0.1");
  req.set("X-Request-Id", "req-disconnect");
  req.body() = R"({"prompt": "x", "max_tokens": 200, "stream": true})";  // 200 tokens x 2 ms: ~0.4 s
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  http::read_header(stream, buf, parser);
  ASSERT_EQ(parser.get().result_int(), 200u);
  // Read until two events arrived, then hang up.
  while (parser.get().body().find("t1 ") == std::string::npos) http::read_some(stream, buf, parser);
  stream.socket().close();
  EXPECT_TRUE(backend_.wait_aborted("req-disconnect", std::chrono::seconds(5)));
  EXPECT_TRUE(server_->wait_idle(std::chrono::seconds(5)));
  // The server goes on serving.
  EXPECT_EQ(request(port_, http::verb::post, "/v1/completions", R"({"prompt": "x", "max_tokens": 2})").status, 200);
}

// vLLM's runtime LoRA endpoints: 404 unless enabled; load, list (parent: the base), use by name, unload;
// the bodies' required fields; the backend's 404s pass through.
TEST_F(HttpServerTest, LoraAdapterEndpointsLoadListServeAndUnload) {
  start({.served_model_names = {"tiny"}, .enable_lora_updates = true});
  Reply r = request(port_, http::verb::post, "/v1/completions", R"({"model": "sql", "prompt": "x", "max_tokens": 1})");
  EXPECT_EQ(r.status, 404) << "not loaded yet";
  EXPECT_EQ(error_of(r)["code"], "model_not_found");
  r = request(port_, http::verb::post, "/v1/load_lora_adapter", R"({"lora_name": "sql", "lora_path": "/a/sql"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Success: LoRA adapter 'sql' added successfully.");
  EXPECT_NE(r.content_type.find("text/plain"), std::string::npos);
  const nlohmann::json models = nlohmann::json::parse(request(port_, http::verb::get, "/v1/models", "").body);
  ASSERT_EQ(models["data"].size(), 2u);
  EXPECT_EQ(models["data"][1]["id"], "sql");
  EXPECT_EQ(models["data"][1]["parent"], "tiny");
  EXPECT_EQ(models["data"][1]["root"], "/a/sql");
  r = request(port_, http::verb::post, "/v1/completions", R"({"model": "sql", "prompt": "x", "max_tokens": 1})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["model"], "sql");

  EXPECT_EQ(request(port_, http::verb::post, "/v1/load_lora_adapter", R"({"lora_name": "x"})").status, 400);
  EXPECT_EQ(request(port_, http::verb::post, "/v1/unload_lora_adapter", R"({})").status, 400);
  EXPECT_EQ(request(port_, http::verb::post, "/v1/load_lora_adapter", R"({"lora_name": "x", "lora_path": "missing"})").status,
            404);
  r = request(port_, http::verb::post, "/v1/unload_lora_adapter", R"({"lora_name": "sql"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Success: LoRA adapter 'sql' removed successfully.");
  EXPECT_EQ(request(port_, http::verb::post, "/v1/unload_lora_adapter", R"({"lora_name": "sql"})").status, 404);
  EXPECT_EQ(request(port_, http::verb::post, "/v1/completions", R"({"model": "sql", "prompt": "x"})").status, 404);
}

TEST_F(HttpServerTest, LoraAdapterEndpointsAre404UnlessEnabled) {
  start();
  const Reply r = request(port_, http::verb::post, "/v1/load_lora_adapter", R"({"lora_name": "sql", "lora_path": "/a"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(backend_.lora_adapters().empty());
}

TEST_F(HttpServerTest, DrainRefusesNewWorkAndFinishesInFlight) {
  start();
  std::thread client([&] {
    Reply r = request(port_, http::verb::post, "/v1/completions", R"({"prompt": "x", "max_tokens": 50})");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(nlohmann::json::parse(r.body)["usage"]["completion_tokens"], 50);
  });
  while (backend_.n_submitted() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_->begin_drain();
  // The acceptor closes on the I/O thread, some time after begin_drain: until then a connection is still
  // accepted (and answered 503), so try until one is refused rather than after a fixed sleep.
  bool refused = false;
  for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       !refused && std::chrono::steady_clock::now() < deadline;) {
    try {
      request(port_, http::verb::get, "/health", "");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } catch (const boost::system::system_error&) {
      refused = true;
    }
  }
  EXPECT_TRUE(refused) << "the draining server still accepts connections";
  EXPECT_TRUE(server_->wait_idle(std::chrono::seconds(10)));
  client.join();
  server_->stop();
}

}  // namespace
}  // namespace lathe::serve
