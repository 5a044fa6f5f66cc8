// The ServingBackend of `lathe serve`: OpenAI requests from the HTTP server run on the serving Engine.
// submit() (an HTTP I/O thread) tokenises and renders the chat template, checks the request and queues
// one engine request per prompt; each engine output arrives on the engine thread, runs through its
// choice's text pipeline (generation_tracker.h) and goes to the server as an event. abort() maps the
// server's string request id to the engine ids. Spec serving.md §1 (frontend), §6, §9.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/serve/engine/engine.h"
#include "lathe/serve/engine/request_queue.h"
#include "lathe/serve/frontend/chat_prompt.h"
#include "lathe/serve/frontend/reasoning_parser.h"
#include "lathe/serve/frontend/tool_call_parser.h"
#include "lathe/serve/http/serving_backend.h"

namespace lathe::serve {

struct EngineBackendOptions {
  std::string model_name;  // the model_name label of /metrics (the first served name)
  // Every served name of the base model (empty: model_name alone). A request's "model" selects the base
  // by one of these, or a served LoRA adapter by its name; an adapter may not take one of these names.
  std::vector<std::string> served_model_names;
  // Chat output parsers; nullopt: detected from the chat template and model_type (detect_tool_call_format,
  // detect_reasoning_format), kNone: off.
  std::optional<ToolCallFormat> tool_call_parser;
  std::optional<ReasoningFormat> reasoning_parser;
};

class EngineBackend final : public ServingBackend {
 public:
  // The engine and the tokenizer must outlive the backend and every request it queued (stop the engine
  // before destroying the tokenizer). tokenizer_config: the model folder's tokenizer_config.json ({}
  // when it has none: chat requests are then answered 400). Throws jinja::ChatTemplateError when the
  // folder's chat template does not parse.
  EngineBackend(Engine& engine, const tokenizer::Tokenizer& tok, const nlohmann::ordered_json& tokenizer_config,
                EngineBackendOptions options);
  EngineBackend(const EngineBackend&) = delete;
  EngineBackend& operator=(const EngineBackend&) = delete;

  BackendLimits limits() const override;
  // ApiException: the 400s of prepare_completion / prepare_chat (engine_requests.h), 503 when the
  // engine is stopping or its loop failed.
  void submit(GenerationRequest request, OutputCallback on_output) override;
  void abort(const std::string& request_id) override;
  bool healthy() const override;             // the engine loop's heartbeat (Engine::alive)
  std::string metrics_text() const override;  // prometheus_text of the engine's metrics
  // Multi-LoRA serving: the engine's adapters; loads and unloads with vLLM's messages and statuses (400 a
  // bad folder or a taken name, 404 an unknown name or a path that does not exist).
  std::vector<ServedAdapter> lora_adapters() const override;
  std::string load_lora_adapter(const std::string& name, const std::string& path) override;
  std::string unload_lora_adapter(const std::string& name) override;

  size_t n_in_flight() const { return ids_->size(); }  // requests submitted and not yet finished or aborted
  ToolCallFormat tool_call_format() const { return tool_call_format_; }
  ReasoningFormat reasoning_format() const { return reasoning_format_; }

 private:
  struct Run;  // one request's tracker and callback, shared by its engine requests' callbacks
  static void on_engine_output(Run& run, size_t prompt, const EngineOutput& o);
  bool is_base_name(const std::string& name) const;
  // The adapter id a request's "model" selects (0: the base); 404 model_not_found for another name.
  int64_t adapter_for(const std::string& model) const;

  Engine& engine_;
  const tokenizer::Tokenizer& tok_;
  std::optional<ChatPromptRenderer> chat_;  // none without a chat template
  EngineBackendOptions options_;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kNone;
  ReasoningFormat reasoning_format_ = ReasoningFormat::kNone;
  // Request id -> its engine requests' ids. Shared with the requests in flight, whose outputs (engine
  // thread) may outlive the backend.
  std::shared_ptr<RequestIdMap> ids_ = std::make_shared<RequestIdMap>();
};

}  // namespace lathe::serve
