// The OpenAI-compatible HTTP server (serving spec §9) on Boost.Beast: POST /v1/completions and
// /v1/chat/completions (JSON or SSE streaming), GET /v1/models, /health, /metrics, and with
// enable_lora_updates POST /v1/load_lora_adapter and /v1/unload_lora_adapter, in front of a
// ServingBackend. Async on a few I/O threads (one handles 200 streams: docs/serving.md). Binds 127.0.0.1
// unless told otherwise. Stopping is an API (begin_drain, wait_idle, stop) for the CLI's SIGTERM handler.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "lathe/serve/http/parse_request.h"
#include "lathe/serve/http/serving_backend.h"

namespace lathe::serve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0: the system picks a free port (read it with port())
  std::string api_key;                   // empty: no key; else /v1/* need "Authorization: Bearer <key>"
  std::vector<std::string> served_model_names;  // the first is the default; must not be empty
  int io_threads = 1;
  size_t max_body_bytes = 8u << 20;      // a larger body is answered 413
  int max_n = 16;
  int max_logprobs = 20;
  bool reject_unknown_fields = false;    // false: unknown fields are logged and ignored (vLLM)
  size_t max_pending_stream_bytes = 16u << 20;  // a client reading slower than this is dropped (aborted)
  std::chrono::seconds idle_timeout{60}; // a connection that sends no complete request for this long is closed
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's, behind VLLM_ALLOW_RUNTIME_LORA_UPDATING
  // there; `lathe serve --enable-lora-updates` here): off, both answer 404 like any unknown route. They run
  // on the I/O thread that received them (a load reads the folder and waits for the engine's next turn).
  bool enable_lora_updates = false;
};

class HttpServer {
 public:
  // Binds and listens (throws lathe::IoError when it cannot); serves once start() is called.
  HttpServer(ServingBackend& backend, HttpServerOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;                      // the bound port
  void start();                          // runs the I/O threads in the background
  // Stop accepting connections; requests that arrive on open connections get 503. In-flight requests go on.
  void begin_drain();
  // Waits until no request is in flight; false on timeout.
  bool wait_idle(std::chrono::milliseconds timeout);
  // Closes every connection (in-flight requests are aborted) and joins the I/O threads.
  void stop();
  size_t in_flight() const;

  struct Core;  // I/O context, acceptor and counters, shared with the connections (http_server.cc)

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace lathe::serve
