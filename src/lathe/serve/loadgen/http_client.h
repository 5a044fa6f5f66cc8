// The CompletionClient of `lathe bench serve` over HTTP (cpp-httplib): POST /v1/completions with a
// token-id prompt, stream on, usage requested, ignore_eos so the output length is exact. Speaks plain
// OpenAI HTTP, so it measures lathe serve, vLLM and llama.cpp's llama-server alike.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lathe/serve/loadgen/driver.h"

namespace lathe::loadgen {

struct HttpTarget {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint = "/v1/completions";
  std::string model;    // the request's "model" (empty: left out)
  std::string api_key;  // sent as a bearer token when set
  nlohmann::json extra_body = nlohmann::json::object();  // fields added to every request body (they win)
  double timeout_s = 600;
};

// "http://HOST:PORT" (optionally with a trailing '/'): host and port of `target`. Throws
// InvalidArgument for anything else (https is not supported).
HttpTarget parse_base_url(const std::string& url);

// The first model id of GET /v1/models, "" when the server lists none; throws Error when it cannot be
// reached.
std::string first_model_id(const HttpTarget& target);

class HttpCompletionClient final : public CompletionClient {
 public:
  explicit HttpCompletionClient(HttpTarget target) : target_(std::move(target)) {}
  RequestRecord send(const BenchRequest& request) override;

 private:
  HttpTarget target_;
};

}  // namespace lathe::loadgen
