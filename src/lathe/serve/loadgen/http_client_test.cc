// The HTTP client of `lathe bench serve` against a small loopback server that streams like an OpenAI
// completions endpoint.
#include "lathe/serve/loadgen/http_client.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "lathe/base/error.h"

namespace lathe::loadgen {
namespace {

// Streams max_tokens chunks of one letter each, then a usage chunk and [DONE]; 401 without the key.
class FakeServer {
 public:
  FakeServer() {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})", "application/json");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer sesame") {
        res.status = 401;
        res.set_content(R"({"error":{"message":"bad key"}})", "application/json");
        return;
      }
      const nlohmann::json body = nlohmann::json::parse(req.body);
      last_model_ = body.value("model", "");
      const int64_t n = body["max_tokens"].get<int64_t>(), prompt = static_cast<int64_t>(body["prompt"].size());
      res.set_chunked_content_provider("text/event-stream", [n, prompt](size_t, httplib::DataSink& sink) {
        for (int64_t i = 0; i < n; ++i) {
          const std::string chunk = "data: {\"choices\":[{\"text\":\"x\"}]}\n\n";
          sink.write(chunk.data(), chunk.size());
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        const std::string usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":" + std::to_string(prompt) +
                                  ",\"completion_tokens\":" + std::to_string(n) + "}}\n\ndata: [DONE]\n\n";
        sink.write(usage.data(), usage.size());
        sink.done();
        return true;
      });
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });  // the bound socket queues connections
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::string last_model_;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(LoadgenHttp, BaseUrlIsParsedOrRejected) {
  const HttpTarget t = parse_base_url("http://localhost:8123/");
  EXPECT_EQ(t.host, "localhost");
  EXPECT_EQ(t.port, 8123);
  EXPECT_EQ(parse_base_url("http://10.0.0.1").port, 80);
  EXPECT_THROW(parse_base_url("https://x:1"), InvalidArgument);
  EXPECT_THROW(parse_base_url("http://x:99999"), InvalidArgument);
  EXPECT_THROW(parse_base_url("http://x:12ab"), InvalidArgument);
}

TEST(LoadgenHttp, StreamedCompletionIsTimedAndCounted) {
  FakeServer server;
  HttpTarget t = parse_base_url("http://127.0.0.1:" + std::to_string(server.port()));
  t.api_key = "sesame";
  t.model = first_model_id(t);
  EXPECT_EQ(t.model, "fake-model");
  HttpCompletionClient client(t);
  const RequestRecord r = client.send({.prompt = {1, 2, 3}, .max_tokens = 6});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(server.last_model_, "fake-model");
  EXPECT_EQ(r.prompt_tokens, 3);
  EXPECT_EQ(r.output_tokens, 6);
  EXPECT_EQ(r.itl_s.size(), 5u);
  EXPECT_GT(r.e2e_s, r.ttft_s);
  EXPECT_GE(r.e2e_s, 0.025);  // 5 ms between chunks at least
}

TEST(LoadgenHttp, RejectionsAndUnreachableServersAreFailures) {
  FakeServer server;
  HttpTarget t = parse_base_url("http://127.0.0.1:" + std::to_string(server.port()));
  t.api_key = "wrong";
  HttpCompletionClient bad_key(t);
  const RequestRecord r = bad_key.send({.prompt = {1}, .max_tokens = 2});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("HTTP 401"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("bad key"), std::string::npos) << r.error;
  HttpTarget nowhere = parse_base_url("http://127.0.0.1:1");
  nowhere.timeout_s = 2;
  const RequestRecord n = HttpCompletionClient(nowhere).send({.prompt = {1}, .max_tokens = 2});
  EXPECT_FALSE(n.ok);
  EXPECT_NE(n.error.find("transport"), std::string::npos) << n.error;
  EXPECT_THROW(first_model_id(nowhere), Error);
}

}  // namespace
}  // namespace lathe::loadgen
