#include "lathe/serve/loadgen/http_client.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "lathe/base/error.h"
#include "lathe/serve/loadgen/stream_record.h"

namespace lathe::loadgen {
namespace {

httplib::Client connect(const HttpTarget& t) {
  httplib::Client cli(t.host, t.port);
  const auto seconds = static_cast<time_t>(t.timeout_s);
  cli.set_connection_timeout(10, 0);
  cli.set_read_timeout(seconds, 0);
  cli.set_write_timeout(seconds, 0);
  if (!t.api_key.empty()) cli.set_bearer_token_auth(t.api_key);
  return cli;
}

}  // namespace

HttpTarget parse_base_url(const std::string& url) {
  const std::string scheme = "http://";
  LATHE_CHECK_ARG(url.compare(0, scheme.size(), scheme) == 0, "--base-url must start with http:// (got '", url, "')");
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  HttpTarget t;
  const size_t colon = rest.rfind(':');
  t.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    LATHE_CHECK_ARG(!port.empty() && port.find_first_not_of("0123456789") == std::string::npos && port.size() <= 5 &&
                        std::stoi(port) >= 1 && std::stoi(port) <= 65535,
                    "--base-url: bad port '", port, "' in '", url, "'");
    t.port = std::stoi(port);
  } else {
    t.port = 80;
  }
  LATHE_CHECK_ARG(!t.host.empty() && t.host.find('/') == std::string::npos, "--base-url: expected http://HOST:PORT, got '",
                  url, "'");
  return t;
}

std::string first_model_id(const HttpTarget& target) {
  httplib::Client cli = connect(target);
  const httplib::Result res = cli.Get("/v1/models");
  if (!res) throw Error(str_cat("cannot reach http://", target.host, ":", target.port, "/v1/models: ",
                                httplib::to_string(res.error())));
  const nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status != 200 || j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id"))
    return "";
  return j["data"][0]["id"].get<std::string>();
}

RequestRecord HttpCompletionClient::send(const BenchRequest& request) {
  nlohmann::json body = {{"prompt", request.prompt},
                         {"max_tokens", request.max_tokens},
                         {"min_tokens", request.max_tokens},
                         {"ignore_eos", true},
                         {"temperature", 0.0},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (!target_.model.empty()) body["model"] = target_.model;
  body.update(target_.extra_body);
  using clock = std::chrono::steady_clock;
  httplib::Client cli = connect(target_);
  StreamRecorder recorder(static_cast<int64_t>(request.prompt.size()));
  SseParser sse;
  httplib::Request req;
  req.method = "POST";
  req.path = target_.endpoint;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  const clock::time_point t0 = clock::now();
  const auto since = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  std::string error_body;
  int status = 0;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const double t = since();
    if (status != 200) {
      error_body.append(data, std::min<size_t>(n, 500));
      return true;
    }
    sse.feed(std::string_view(data, n), [&](const std::string& d) { recorder.on_data(d, t); });
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  const double end = since();
  if (!sent) return recorder.finish(end, status, str_cat("transport: ", httplib::to_string(err)));
  RequestRecord r = recorder.finish(end, status != 0 ? status : res.status);
  if (!r.ok && !error_body.empty()) r.error += ": " + error_body;
  return r;
}

}  // namespace lathe::loadgen
