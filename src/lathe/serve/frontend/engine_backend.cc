#include "lathe/serve/frontend/engine_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>

#include "lathe/base/error.h"
#include "lathe/io/jinja/chat_template.h"
#include "lathe/serve/engine/prometheus_text.h"
#include "lathe/serve/frontend/engine_requests.h"
#include "lathe/serve/frontend/generation_tracker.h"

namespace lathe::serve {

// Built on the submitting thread before the first engine submit; from then on only the engine thread
// touches the tracker (every engine request delivers there, one output at a time).
struct EngineBackend::Run {
  std::string key;  // the server's request id
  OutputCallback on_output;
  GenerationTracker tracker;
  Engine& engine;
  std::shared_ptr<RequestIdMap> ids;
  std::atomic<bool> refused{false};  // submit threw after queueing part of it: drop every output

  Run(std::string k, OutputCallback cb, const tokenizer::Tokenizer& tok, const PreparedGeneration& g, Engine& e,
      std::shared_ptr<RequestIdMap> id_map)
      : key(std::move(k)), on_output(std::move(cb)), tracker(tok, g), engine(e), ids(std::move(id_map)) {}
};

namespace {

std::optional<ChatPromptRenderer> chat_renderer(const nlohmann::ordered_json& tokenizer_config) {
  if (!jinja::select_chat_template(tokenizer_config)) return std::nullopt;
  return ChatPromptRenderer(tokenizer_config);
}

}  // namespace

EngineBackend::EngineBackend(Engine& engine, const tokenizer::Tokenizer& tok,
                             const nlohmann::ordered_json& tokenizer_config, EngineBackendOptions options)
    : engine_(engine), tok_(tok), chat_(chat_renderer(tokenizer_config)), options_(std::move(options)) {
  const std::string chat_template = jinja::select_chat_template(tokenizer_config).value_or("");
  const std::string& model_type = engine_.model_config().model_type;
  tool_call_format_ = options_.tool_call_parser.value_or(detect_tool_call_format(model_type, chat_template));
  reasoning_format_ = options_.reasoning_parser.value_or(detect_reasoning_format(model_type, chat_template));
}

BackendLimits EngineBackend::limits() const {
  return {.max_model_len = static_cast<int>(engine_.max_model_len()),
          .vocab_size = static_cast<int>(engine_.model_config().vocab_size)};
}

bool EngineBackend::is_base_name(const std::string& name) const {
  const std::vector<std::string>& names = options_.served_model_names;
  return names.empty() ? name == options_.model_name : std::find(names.begin(), names.end(), name) != names.end();
}

int64_t EngineBackend::adapter_for(const std::string& model) const {
  if (model.empty() || is_base_name(model)) return 0;
  if (const std::optional<ServedLora> l = engine_.find_lora(model)) return l->id;
  throw ApiException(model_not_found(model));  // e.g. an adapter unloaded since the server checked the name
}

std::vector<ServedAdapter> EngineBackend::lora_adapters() const {
  std::vector<ServedAdapter> out;
  for (const ServedLora& l : engine_.loras()) out.push_back({.name = l.name, .path = l.path});
  return out;
}

std::string EngineBackend::load_lora_adapter(const std::string& name, const std::string& path) {
  if (is_base_name(name) || engine_.find_lora(name))
    throw ApiException(invalid_request(str_cat("The lora adapter '", name, "' has already been loaded.")));
  if (!std::filesystem::exists(path)) {
    ApiError e = invalid_request(str_cat("No adapter found for ", path));
    e.status = 404;
    throw ApiException(std::move(e));
  }
  try {
    engine_.load_lora(name, path);
  } catch (const EngineUnavailable& e) {
    throw ApiException(service_unavailable(e.what()));
  } catch (const Error& e) {  // the folder does not fit the model, or uses what lathe does not apply
    throw ApiException(invalid_request(e.what()));
  }
  std::fprintf(stderr, "lathe serve: loaded LoRA adapter '%s' from %s\n", name.c_str(), path.c_str());
  return str_cat("Success: LoRA adapter '", name, "' added successfully.");
}

std::string EngineBackend::unload_lora_adapter(const std::string& name) {
  const auto not_found = [&] {
    ApiError e = invalid_request(str_cat("The lora adapter '", name, "' cannot be found."), "lora_name");
    e.status = 404;
    e.code = "model_not_found";
    return ApiException(std::move(e));
  };
  if (!engine_.find_lora(name)) throw not_found();
  int64_t in_use = 0;
  try {
    in_use = engine_.unload_lora(name);
  } catch (const EngineUnavailable& e) {
    throw ApiException(service_unavailable(e.what()));
  } catch (const InvalidArgument&) {  // unloaded by another request meanwhile
    throw not_found();
  }
  std::fprintf(stderr, "lathe serve: unloaded LoRA adapter '%s'%s\n", name.c_str(),
               in_use ? str_cat(" (freed after its ", in_use, " running sequences)").c_str() : "");
  return str_cat("Success: LoRA adapter '", name, "' removed successfully.");
}

void EngineBackend::submit(GenerationRequest request, OutputCallback on_output) {
  const std::string& model = std::visit([](const auto& body) -> const std::string& { return body.common.model; },
                                        request.body);
  const PrepareContext context{.tok = tok_, .chat = chat_ ? &*chat_ : nullptr, .model = engine_.model_config(),
                               .max_model_len = engine_.max_model_len(), .tool_call_format = tool_call_format_,
                               .reasoning_format = reasoning_format_, .adapter_id = adapter_for(model)};
  PreparedGeneration g = std::visit(
      [&](const auto& body) {
        if constexpr (std::is_same_v<std::decay_t<decltype(body)>, CompletionRequest>) {
          return prepare_completion(body, context);
        } else {
          return prepare_chat(body, context);
        }
      },
      request.body);
  auto run = std::make_shared<Run>(request.request_id, std::move(on_output), tok_, g, engine_, ids_);
  ids_->open(run->key);
  for (size_t p = 0; p < g.requests.size(); ++p) {
    uint64_t id = 0;
    try {
      id = engine_.submit(std::move(g.requests[p]),
                          [run, p](const EngineOutput& o) { on_engine_output(*run, p, o); });
    } catch (const Error& e) {
      // prepare_* ran the engine's checks, so this is the engine stopping (or dead) between two prompts
      // of one request: withdraw what was queued.
      run->refused = true;
      for (const uint64_t queued : ids_->take(run->key)) engine_.abort(queued);
      if (dynamic_cast<const EngineUnavailable*>(&e)) throw ApiException(service_unavailable(e.what()));
      throw ApiException(invalid_request(e.what()));
    }
    // The request finished or was aborted while its later prompts were still being queued.
    if (!ids_->add(run->key, id)) engine_.abort(id);
  }
}

void EngineBackend::abort(const std::string& request_id) {
  for (const uint64_t id : ids_->take(request_id)) engine_.abort(id);
}

bool EngineBackend::healthy() const { return engine_.alive(); }

std::string EngineBackend::metrics_text() const { return prometheus_text(engine_.metrics(), options_.model_name); }

void EngineBackend::on_engine_output(Run& run, size_t prompt, const EngineOutput& o) {
  // The engine thread: an exception escaping here would end the engine loop for every request.
  try {
    if (run.refused) return;
    GenerationTracker::Step step;
    try {
      step = run.tracker.on_engine_output(prompt, o);
    } catch (const std::exception& e) {
      if (run.tracker.finished()) return;
      step.event = run.tracker.fail(server_error(str_cat("Detokenising the output failed: ", e.what())));
    }
    // Engine::finish_choice and Engine::abort from the engine's own callback are safe: they only queue
    // the id under the request queue's lock, which the loop does not hold while it delivers outputs.
    if (step.finish_engine_choice) run.engine.finish_choice(o.request_id, *step.finish_engine_choice);
    if (!step.event) return;
    if (step.event->finished) {
      const std::vector<uint64_t> ids = run.ids->take(run.key);
      if (run.tracker.engine_running())  // a failure ended it before the engine did
        for (const uint64_t id : ids) run.engine.abort(id);
    }
    run.on_output(std::move(*step.event));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lathe serve: request %s: dropping an output: %s\n", run.key.c_str(), e.what());
  }
}

}  // namespace lathe::serve
