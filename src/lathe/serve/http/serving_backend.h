// The contract between the HTTP server and whatever generates text (the serving engine, or a test's
// fake): the server parses and validates requests, the backend tokenises, renders the chat template,
// schedules, generates, detokenises and cuts stop strings, and the server streams what comes back.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "lathe/serve/http/api_error.h"
#include "lathe/serve/http/output.h"
#include "lathe/serve/http/request.h"

namespace lathe::serve {

// A validated request as submitted.
struct GenerationRequest {
  std::string request_id;              // unique: the response id ("cmpl-...", "chatcmpl-..."); abort() names it
  std::string client_request_id;       // the client's X-Request-Id header (for logs; clients may reuse one)
  std::variant<CompletionRequest, ChatCompletionRequest> body;
  std::chrono::steady_clock::time_point arrival;  // TTFT starts here (spec §10)
};

// Called with each event of a request, from any thread, never twice at once for one request, and
// never again after an event with finished set. Must not block: the server only queues the event.
using OutputCallback = std::function<void(GenerationOutput)>;

// Limits the backend knows and request validation needs.
struct BackendLimits {
  int max_model_len = 0;               // context length in tokens
  int vocab_size = 0;
};

class ServingBackend {
 public:
  virtual ~ServingBackend() = default;

  virtual BackendLimits limits() const = 0;

  // Starts generating. Throws ApiException for a request it refuses before any output (prompt over the
  // context: 400 context_length_exceeded; queue full: 429; draining: 503). Otherwise `on_output` receives
  // the request's events; the backend drops `on_output` after the finished event (or after abort).
  virtual void submit(GenerationRequest request, OutputCallback on_output) = 0;

  // The client went away: stop the request and free its blocks. Idempotent, non-blocking, any thread;
  // an unknown or finished id is ignored. Events after the abort may still arrive and are dropped.
  virtual void abort(const std::string& request_id) = 0;

  // Whether the engine loop answered a probe recently (not only whether this process is alive).
  // Non-blocking: it reads the loop's last heartbeat.
  virtual bool healthy() const = 0;

  // The engine's metrics in Prometheus text format (vLLM names, spec §10). Non-blocking.
  virtual std::string metrics_text() const = 0;

  // Multi-LoRA serving. The adapters served now (listed by /v1/models with the base as parent, and
  // accepted as a request's "model"); non-blocking, any thread. None by default.
  virtual std::vector<ServedAdapter> lora_adapters() const { return {}; }
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's runtime updates): the success message,
  // or ApiException (400 invalid folder or taken name, 404 unknown name or no folder there). May block
  // while the adapter is read and installed. The default refuses both (no adapters).
  virtual std::string load_lora_adapter(const std::string& name, const std::string& path) {
    (void)name, (void)path;
    throw ApiException(invalid_request("This server does not load LoRA adapters"));
  }
  virtual std::string unload_lora_adapter(const std::string& name) {
    (void)name;
    throw ApiException(invalid_request("This server does not serve LoRA adapters"));
  }
};

}  // namespace lathe::serve
