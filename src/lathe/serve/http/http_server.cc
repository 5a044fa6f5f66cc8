// Boost.Beast sessions: one per connection, each on its own strand. A generation request is answered
// and the connection closed (Connection: close); while it runs, one pending read watches the socket, so
// a client that goes away is noticed at once (not only at the next write) and its request aborted.
#include "lathe/serve/http/http_server.h"

#include <utility>  // before Boost: 1.74's asio/awaitable.hpp uses std::exchange without including it (C++20)

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <deque>
#include <random>
#include <thread>
#include <unordered_map>

#include "lathe/base/error.h"
#include "lathe/serve/http/api_error.h"
#include "lathe/serve/http/response.h"

namespace lathe::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

class Session;

struct HttpServer::Core {
  Core(ServingBackend& b, HttpServerOptions o)
      : backend(b), options(std::move(o)), ioc(std::max(1, options.io_threads)), acceptor(ioc), registry(net::make_strand(ioc)) {}

  ServingBackend& backend;
  const HttpServerOptions options;
  net::io_context ioc;
  tcp::acceptor acceptor;
  // Open sessions, touched only on this strand (stop() closes them).
  net::strand<net::io_context::executor_type> registry;
  std::unordered_map<const Session*, std::weak_ptr<Session>> live;
  std::vector<std::thread> threads;
  std::atomic<size_t> in_flight{0};
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> next_id{0};
  uint64_t id_salt = 0;                  // random per server: ids do not repeat across restarts
  int64_t created = 0;                   // start time, the models' "created"
  int port = 0;                          // the bound port (port 0 asks the system for a free one)

  std::string make_id(const char* prefix) {
    char hex[33];
    std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(id_salt),
                  static_cast<unsigned long long>(next_id.fetch_add(1)));
    return prefix + std::string(hex);
  }

  RequestLimits limits() const {
    BackendLimits b = backend.limits();
    RequestLimits l{.served_models = options.served_model_names, .max_model_len = b.max_model_len,
                    .vocab_size = b.vocab_size, .max_n = options.max_n, .max_logprobs = options.max_logprobs,
                    .reject_unknown_fields = options.reject_unknown_fields};
    for (const ServedAdapter& a : backend.lora_adapters()) l.served_models.push_back(a.name);  // LoRA: by name
    return l;
  }
};

namespace {

bool key_matches(std::string_view got, std::string_view want) {
  // Constant time in the key's length: the comparison does not leak how many characters matched.
  if (got.size() != want.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff |= static_cast<unsigned char>(got[i] ^ want[i]);
  return diff == 0;
}

}  // namespace

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<HttpServer::Core> core, tcp::socket socket) : core_(std::move(core)), stream_(std::move(socket)) {}

  void start() {
    net::post(core_->registry, [core = core_, self = weak_from_this(), key = this] { core->live[key] = self; });
    read_request();
  }

  // The client is gone (or the server stops): abort the backend request and close.
  void client_gone() {
    if (in_flight_) core_->backend.abort(request_id_);
    end_request();
    close();
  }

  auto executor() { return stream_.get_executor(); }

 private:
  using Request = http::request<http::string_body>;

  void read_request() {
    parser_.emplace();
    parser_->body_limit(core_->options.max_body_bytes);
    stream_.expires_after(core_->options.idle_timeout);
    http::async_read(stream_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_request(ec);
    });
  }

  void on_request(beast::error_code ec) {
    if (ec == http::error::body_limit) return send_error(body_too_large(core_->options.max_body_bytes), false);
    if (ec == http::error::end_of_stream || ec == net::error::operation_aborted || ec == beast::error::timeout ||
        ec == net::error::connection_reset || ec == net::error::eof) {
      return close();
    }
    if (ec) return send_error(invalid_request(str_cat("Malformed HTTP request: ", ec.message())), false);
    stream_.expires_never();
    Request req = parser_->release();
    keep_alive_ = req.keep_alive() && !core_->draining;
    route(req);
  }

  void route(const Request& req) {
    std::string_view target(req.target().data(), req.target().size());
    std::string_view path = target.substr(0, target.find('?'));
    const bool get = req.method() == http::verb::get, post = req.method() == http::verb::post;
    if (path == "/health" && get) {
      if (core_->draining) return send_error(service_unavailable("The server is draining"), keep_alive_);
      if (!core_->backend.healthy()) return send_error(service_unavailable("The engine loop does not answer"), keep_alive_);
      return send_text(http::status::ok, "", "text/plain", keep_alive_);
    }
    if (path == "/metrics" && get) {
      return send_text(http::status::ok, core_->backend.metrics_text(), "text/plain; version=0.0.4; charset=utf-8", keep_alive_);
    }
    const bool v1 = path.substr(0, 4) == "/v1/";
    if (v1 && !core_->options.api_key.empty()) {
      auto auth = req.find(http::field::authorization);
      std::string_view got = auth == req.end() ? std::string_view() : std::string_view(auth->value().data(), auth->value().size());
      const std::string_view bearer = "Bearer ";
      if (got.substr(0, bearer.size()) != bearer || !key_matches(got.substr(bearer.size()), core_->options.api_key)) {
        return send_error(invalid_api_key(), keep_alive_);
      }
    }
    if (path == "/v1/models" && get) {
      return send_json(http::status::ok, models_response(core_->options.served_model_names, core_->created,
                                                         core_->backend.limits().max_model_len,
                                                         core_->backend.lora_adapters()), keep_alive_);
    }
    if (core_->options.enable_lora_updates && post &&
        (path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter")) {
      return lora_update(req, path == "/v1/load_lora_adapter");
    }
    if (path == "/v1/completions" && post) return generate(req, Endpoint::kCompletions);
    if (path == "/v1/chat/completions" && post) return generate(req, Endpoint::kChatCompletions);
    return send_error(route_not_found(std::string(req.method_string()), std::string(path)), keep_alive_);
  }

  // vLLM's bodies {"lora_name", "lora_path"} / {"lora_name"}; the answer is plain text on success.
  void lora_update(const Request& req, bool load) {
    try {
      const nlohmann::json body = parse_json_body(req.body());
      const auto field = [&](const char* key) -> std::string {
        const auto it = body.find(key);
        if (it == body.end() || !it->is_string() || it->get<std::string>().empty()) return "";
        return it->get<std::string>();
      };
      const std::string name = field("lora_name"), path = field("lora_path");
      if (load && (name.empty() || path.empty()))
        throw ApiException(invalid_request("Both 'lora_name' and 'lora_path' must be provided."));
      if (!load && name.empty())
        throw ApiException(invalid_request("'lora_name' needs to be provided to unload a LoRA adapter."));
      std::string message = load ? core_->backend.load_lora_adapter(name, path) : core_->backend.unload_lora_adapter(name);
      return send_text(http::status::ok, std::move(message), "text/plain; charset=utf-8", keep_alive_);
    } catch (const ApiException& e) {
      return send_error(e.error(), keep_alive_);
    } catch (const std::exception& e) {
      return send_error(server_error(e.what()), keep_alive_);
    }
  }

  void generate(const Request& req, Endpoint endpoint) {
    if (core_->draining) return send_error(service_unavailable("The server is draining"), false);
    GenerationRequest g{.arrival = std::chrono::steady_clock::now()};
    ResponseMeta meta{.endpoint = endpoint, .created = std::time(nullptr)};
    const RequestCommon* common = nullptr;
    try {
      RequestLimits limits = core_->limits();
      if (endpoint == Endpoint::kCompletions) {
        CompletionRequest& r = g.body.emplace<CompletionRequest>(parse_completion_request(req.body(), limits));
        meta.n_choices = r.sampling.n * static_cast<int>(r.prompts.size());
        meta.logprobs = r.sampling.logprobs.has_value();
        meta.prompt_logprobs = r.sampling.prompt_logprobs.has_value();
        common = &r.common;
      } else {
        ChatCompletionRequest& r = g.body.emplace<ChatCompletionRequest>(parse_chat_completion_request(req.body(), limits));
        meta.n_choices = r.sampling.n;
        meta.logprobs = r.sampling.logprobs.has_value();
        meta.prompt_logprobs = r.sampling.prompt_logprobs.has_value();
        common = &r.common;
      }
    } catch (const ApiException& e) {
      return send_error(e.error(), false);
    }
    if (!common->ignored_fields.empty()) {
      std::string names;
      for (const std::string& f : common->ignored_fields) names += (names.empty() ? "" : ", ") + f;
      std::fprintf(stderr, "lathe serve: ignored unknown request fields: %s\n", names.c_str());
    }
    meta.id = core_->make_id(endpoint == Endpoint::kCompletions ? "cmpl-" : "chatcmpl-");
    meta.model = common->model;
    request_id_ = meta.id;
    g.request_id = request_id_;
    if (auto rid = req.find("X-Request-Id"); rid != req.end()) g.client_request_id = std::string(rid->value());
    streaming_ = common->stream;
    if (streaming_) {
      encoder_.emplace(meta, StreamEncoder::Options{.include_usage = common->include_usage,
                                                    .continuous_usage_stats = common->continuous_usage_stats});
    } else {
      builder_.emplace(meta);
    }
    begin_request();
    watch_for_disconnect();
    try {
      core_->backend.submit(std::move(g), [self = shared_from_this()](GenerationOutput out) {
        auto ex = self->executor();
        net::post(ex, [self = std::move(self), out = std::move(out)]() mutable { self->on_output(std::move(out)); });
      });
    } catch (const ApiException& e) {
      end_request();
      send_error(e.error(), false);
    } catch (const std::exception& e) {
      end_request();
      send_error(server_error(e.what()), false);
    }
  }

  void begin_request() {
    in_flight_ = true;
    core_->in_flight++;
  }

  void end_request() {
    if (!in_flight_) return;
    in_flight_ = false;
    core_->in_flight--;
  }

  // One pending read from the request's end until the connection closes: EOF or an error while a request
  // runs means the client is gone; after the response it ends the connection. Bytes the client sends
  // meanwhile are dropped (the connection closes after this response).
  void watch_for_disconnect() {
    watching_ = true;
    stream_.async_read_some(net::buffer(watch_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->closed_) return;
      if (ec) return self->in_flight_ ? self->client_gone() : self->close();
      self->watch_for_disconnect();
    });
  }

  void on_output(GenerationOutput out) {
    if (!in_flight_ || closed_) return;  // aborted, or the client went away: late events are dropped
    if (!streaming_) {
      builder_->add(out);
      if (!out.finished) return;
      end_request();
      if (out.error) return send_error(*out.error, false);
      return send_json(http::status::ok, builder_->build(), false);
    }
    // A stream that fails before its first byte still gets a proper HTTP error.
    if (out.error && !headers_started_) {
      end_request();
      return send_error(*out.error, false);
    }
    std::string sse = encoder_->encode(out);
    if (!sse.empty()) {
      pending_bytes_ += sse.size();
      pending_.push_back(std::move(sse));
    }
    if (out.finished) {
      end_request();
      stream_done_ = true;
    }
    if (pending_bytes_ > core_->options.max_pending_stream_bytes) return client_gone();  // not reading
    if (!writing_) write_next();
  }

  // Writes the SSE header once, then each queued event as one HTTP chunk, then the last chunk.
  void write_next() {
    if (closed_) return;
    auto self = shared_from_this();
    if (!headers_started_) {
      headers_started_ = true;
      head_.result(http::status::ok);
      head_.version(11);
      head_.set(http::field::content_type, "text/event-stream");
      head_.set(http::field::cache_control, "no-cache");
      head_.keep_alive(false);
      head_.chunked(true);
      head_sr_.emplace(head_);
      writing_ = true;
      http::async_write_header(stream_, *head_sr_, [self](beast::error_code ec, size_t) { self->on_written(ec); });
      return;
    }
    if (!pending_.empty()) {
      writing_ = true;
      net::async_write(stream_, http::make_chunk(net::buffer(pending_.front())), [self](beast::error_code ec, size_t) {
        self->pending_bytes_ -= self->pending_.front().size();
        self->pending_.pop_front();
        self->on_written(ec);
      });
      return;
    }
    if (stream_done_ && !last_chunk_sent_) {
      last_chunk_sent_ = true;
      writing_ = true;
      net::async_write(stream_, http::make_chunk_last(), [self](beast::error_code ec, size_t) {
        self->writing_ = false;
        self->shutdown_send();
      });
    }
  }

  void on_written(beast::error_code ec) {
    writing_ = false;
    if (ec) return client_gone();
    write_next();
  }

  // nlohmann::json (errors) or ordered_json (responses, whose keys keep the order they were written in).
  template <typename Json>
  void send_json(http::status status, const Json& body, bool keep_alive) {
    send_text(status, body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json", keep_alive);
  }

  void send_error(const ApiError& e, bool keep_alive) {
    send_json(static_cast<http::status>(e.status), e.to_json(), keep_alive);
  }

  void send_text(http::status status, std::string body, const char* content_type, bool keep_alive) {
    auto res = std::make_shared<http::response<http::string_body>>(status, 11);
    res->set(http::field::content_type, content_type);
    res->keep_alive(keep_alive);
    res->body() = std::move(body);
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
      if (ec) return self->client_gone();
      if (keep_alive) return self->read_request();
      self->shutdown_send();
    });
  }

  // Graceful end: send FIN and let the client close; the watch read then sees EOF (or times out) and closes.
  void shutdown_send() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(5));  // do not wait forever for the client's FIN
    if (!watching_) watch_for_disconnect();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    net::post(core_->registry, [core = core_, key = this] { core->live.erase(key); });
  }

  std::shared_ptr<HttpServer::Core> core_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = false;
  // The generation request in flight (one per connection).
  std::string request_id_;
  bool in_flight_ = false, streaming_ = false, closed_ = false;
  std::optional<StreamEncoder> encoder_;
  std::optional<ResponseBuilder> builder_;
  char watch_buf_[512];
  // Streaming writes: header, queued events, last chunk; one write at a time.
  http::response<http::empty_body> head_;
  std::optional<http::response_serializer<http::empty_body>> head_sr_;
  std::deque<std::string> pending_;
  size_t pending_bytes_ = 0;
  bool writing_ = false, headers_started_ = false, stream_done_ = false, last_chunk_sent_ = false;
  bool watching_ = false;
};

namespace {

void accept_next(const std::shared_ptr<HttpServer::Core>& core) {
  core->acceptor.async_accept(net::make_strand(core->ioc), [core](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !core->acceptor.is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);  // small SSE events go out at once (no Nagle delay)
      std::make_shared<Session>(core, std::move(socket))->start();
    }
    accept_next(core);
  });
}

}  // namespace

HttpServer::HttpServer(ServingBackend& backend, HttpServerOptions options)
    : core_(std::make_shared<Core>(backend, std::move(options))) {
  LATHE_CHECK_ARG(!core_->options.served_model_names.empty(), "[HttpServer] served_model_names must not be empty");
  LATHE_CHECK_ARG(core_->options.port >= 0 && core_->options.port <= 65535, "[HttpServer] port must be in [0, 65535], got ",
                  core_->options.port);
  beast::error_code ec;
  net::ip::address address = net::ip::make_address(core_->options.host, ec);
  LATHE_CHECK_ARG(!ec, "[HttpServer] host '", core_->options.host, "' is not an IP address");
  tcp::endpoint endpoint(address, static_cast<unsigned short>(core_->options.port));
  core_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) core_->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) core_->acceptor.bind(endpoint, ec);
  if (!ec) core_->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw IoError(str_cat("[HttpServer] cannot listen on ", core_->options.host, ":", core_->options.port, ": ", ec.message()));
  core_->id_salt = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(std::time(nullptr));
  core_->created = std::time(nullptr);
  core_->port = core_->acceptor.local_endpoint().port();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return core_->port; }

void HttpServer::start() {
  if (!core_->threads.empty()) return;
  accept_next(core_);
  for (int i = 0; i < std::max(1, core_->options.io_threads); ++i) core_->threads.emplace_back([core = core_] { core->ioc.run(); });
}

void HttpServer::begin_drain() {
  core_->draining = true;
  net::post(core_->acceptor.get_executor(), [core = core_] {
    beast::error_code ec;
    core->acceptor.close(ec);
  });
}

bool HttpServer::wait_idle(std::chrono::milliseconds timeout) {
  // Polling keeps this file free of locks (server locking lives in the engine's request queue).
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (core_->in_flight > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void HttpServer::stop() {
  if (core_->threads.empty()) return;
  begin_drain();
  // Close every connection (aborting its request); the I/O threads then run out of work and return.
  net::post(core_->registry, [core = core_] {
    for (auto& [key, weak] : core->live) {
      if (std::shared_ptr<Session> s = weak.lock()) net::post(s->executor(), [s] { s->client_gone(); });
    }
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!core_->ioc.stopped() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  core_->ioc.stop();
  for (std::thread& t : core_->threads) t.join();
  core_->threads.clear();
  // Handlers still queued hold the Core, which owns the io_context that holds them (a cycle ASan
  // reported as a leak per server): run them out; with the acceptor and every connection closed each
  // returns at once.
  core_->ioc.restart();
  while (core_->ioc.poll() > 0) {
  }
}

size_t HttpServer::in_flight() const { return core_->in_flight; }

}  // namespace lathe::serve
