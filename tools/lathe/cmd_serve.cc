// lathe serve MODEL_DIR: the OpenAI-compatible HTTP server (docs/serving.md). The model folder's weights,
// tokenizer and chat template; the serving Engine (paged KV pool, scheduler, one loop thread) behind an
// EngineBackend behind the HttpServer. SIGTERM / SIGINT drain: stop accepting, let the requests in
// flight finish (bounded), then stop the server and the engine and exit 0.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "args.h"
#include "lathe/base/context.h"
#include "lathe/serve/engine/engine.h"
#include "lathe/serve/frontend/engine_backend.h"
#include "lathe/serve/http/http_server.h"
#include "lathe/serve/kv_capacity.h"
#include "text_model.h"

namespace lathe::cli {

const CommandSpec& serve_spec() {
  static const CommandSpec spec{
      .name = "serve",
      .usage = "MODEL_DIR|FILE.gguf [options]",
      .brief = "serve a model over the OpenAI HTTP API (completions, chat completions, /metrics)",
      .summary = "Serves MODEL_DIR (weights, tokenizer.json and its chat template) on POST /v1/completions and\n"
                 "/v1/chat/completions (streaming with stream: true), GET /v1/models, /health and /metrics.\n"
                 "Prints the KV cache's capacity and the address it listens on. SIGTERM or SIGINT drains: new\n"
                 "requests get 503, those in flight finish (a second signal stops at once), then it exits 0.\n"
                 "--lora NAME=PATH serves PEFT LoRA adapters beside the base in the same engine: a request picks\n"
                 "one with \"model\": NAME (the base by its served name); one batch mixes adapters.\n"
                 "A GGUF file (docs/gguf.md) brings its weights, tokenizer and chat template in one file.\n",
      .options = {
          {"--host", "ADDR", "IP address to listen on (default: 127.0.0.1; 0.0.0.0 for every interface)"},
          {"--port", "N", "TCP port; 0 = any free port, printed at start (default: 8000)"},
          {"--api-key", "KEY", "require 'Authorization: Bearer KEY' on /v1/* (default: none)"},
          {"--served-model-name", "NAME", "the model's name in the API (default: MODEL_DIR as given)"},
          {"--kv-cache-memory", "BYTES", "KV cache size, e.g. 2GiB, 512MiB (default: 2GiB, or less when enough)"},
          kv_cache_dtype_option(),
          {"--max-model-len", "N", "context length: prompt + output tokens (default: max_position_embeddings)"},
          {"--max-num-seqs", "N", "sequences running at once at most, >= 1 (default: 256)"},
          {"--max-num-batched-tokens", "N", "tokens per engine step at most, >= 1 (default: 2048)"},
          {"--no-enable-prefix-caching", "", "turn automatic prefix caching off (default: on; vLLM's flag)"},
          {"--drain-timeout", "S", "seconds a drain waits for requests in flight, >= 0 (default: 30)"},
          {"--threads", "N", "worker threads; 0 = LATHE_NUM_THREADS, else all cores (default: 0)"},
          {"--f32", "", "widen bf16 and f16 weights to f32 at load"},
          {"--mmap", "", "use the checkpoint's weights in place from its memory map (shared page cache, no copy: for models near the RAM size; 4 KiB pages, slower decode)"},
          {"--tool-call-parser", "NAME", "tool-call output format: auto, none, hermes, llama3_json, mistral, gemma4 (default: auto, from the chat template)"},
          {"--reasoning-parser", "NAME", "reasoning output format: auto, none, qwen3, gemma4 (default: auto, from the chat template)"},
          {"--lora", "NAME=PATH", "serve the PEFT adapter folder PATH as model NAME; repeatable (default: none)", true},
          {"--enable-lora-updates", "", "accept POST /v1/load_lora_adapter and /v1/unload_lora_adapter (default: off, 404; vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING)"},
      }};
  return spec;
}

namespace {

// SIGTERM and SIGINT blocked in this thread and in every thread started after it (threads inherit the
// mask), so only sigwait in the main thread receives them: no handler runs inside an engine step.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// A pending stop signal taken within `wait`, or 0.
int take_signal(const sigset_t& set, std::chrono::milliseconds wait) {
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(wait);
  timespec ts{.tv_sec = static_cast<time_t>(s.count()),
              .tv_nsec = static_cast<long>(std::chrono::nanoseconds(wait - s).count())};
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

// vLLM's "maximum concurrency": how many sequences of max_model_len tokens the pool holds at once.
std::string concurrency_line(const Engine& engine, int block_size) {
  const int64_t blocks = engine.metrics().core.kv_blocks_total;
  const int64_t per_seq = kv_blocks_for(engine.max_model_len(), block_size);
  char buf[160];
  std::snprintf(buf, sizeof buf, "max concurrency at max_model_len %lld: %.2f sequences",
                static_cast<long long>(engine.max_model_len()),
                static_cast<double>(blocks) / static_cast<double>(std::max<int64_t>(per_seq, 1)));
  return buf;
}

// Drains the server: no new requests, those in flight finish within `timeout` (or until a second
// signal), then every connection closes and the engine stops.
void drain_and_stop(serve::HttpServer& server, Engine& engine, const sigset_t& signals, int sig,
                    std::chrono::milliseconds timeout) {
  std::fprintf(stderr, "lathe serve: %s: draining, %zu requests in flight (up to %.0f s; a second signal stops now)\n",
               strsignal(sig), server.in_flight(), std::chrono::duration<double>(timeout).count());
  server.begin_drain();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool idle = false;
  while (!(idle = server.wait_idle(std::chrono::milliseconds(0)))) {
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (const int again = take_signal(signals, std::chrono::milliseconds(50))) {
      std::fprintf(stderr, "lathe serve: %s again: stopping now\n", strsignal(again));
      break;
    }
  }
  if (!idle) std::fprintf(stderr, "lathe serve: aborting %zu requests still in flight\n", server.in_flight());
  server.stop();
  engine.stop(/*drain=*/false);
  std::fprintf(stderr, "lathe serve: drained and stopped\n");
}

// --lora NAME=PATH -> {NAME, PATH}; InvalidArgument naming the flag when either part is empty.
std::pair<std::string, std::string> lora_flag(const std::string& v) {
  const size_t eq = v.find('=');
  LATHE_CHECK_ARG(eq != std::string::npos && eq > 0 && eq + 1 < v.size(), "option --lora: expected NAME=PATH, got '",
                  v, "'");
  return {v.substr(0, eq), v.substr(eq + 1)};
}

// --tool-call-parser / --reasoning-parser: nullopt for "auto" (absent), else the named format.
template <typename Format>
std::optional<Format> parser_flag(const Args& a, const char* flag, std::optional<Format> (*parse)(std::string_view)) {
  const std::string name = a.str(flag, "auto");
  if (name == "auto") return std::nullopt;
  const std::optional<Format> format = parse(name);
  LATHE_CHECK_ARG(format.has_value(), "option ", flag, ": unknown format '", name, "'");
  return format;
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, serve_spec());
  if (a.help() || a.positional.size() != 1) {
    std::fputs(help_text(serve_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  const std::string dir = a.positional[0];
  serve::HttpServerOptions http{.host = a.str("--host", "127.0.0.1"),
                                .port = static_cast<int>(a.integer("--port", 8000, 0, 65535)),
                                .api_key = a.str("--api-key", ""),
                                .served_model_names = {a.str("--served-model-name", dir)},
                                .enable_lora_updates = a.has("--enable-lora-updates")};
  LATHE_CHECK_ARG(!http.served_model_names[0].empty(), "option --served-model-name must not be empty");
  EngineConfig config{.kv_cache_memory = a.bytes("--kv-cache-memory", 0),
                      .kv_cache_dtype = read_kv_cache_dtype_flag(a)};
  config.scheduler.max_num_seqs = a.integer("--max-num-seqs", config.scheduler.max_num_seqs, 1, kIntMax);
  config.scheduler.max_num_batched_tokens =
      a.integer("--max-num-batched-tokens", config.scheduler.max_num_batched_tokens, 1, kIntMax);
  config.enable_prefix_caching = !a.has("--no-enable-prefix-caching");
  const auto drain_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(1000 * a.number("--drain-timeout", 30, {.min = 0, .max = 86400})));
  const sigset_t stop_signals = block_stop_signals();  // before the first thread starts

  Context ctx(a.threads());
  ContextScope scope(ctx);
  TextModel m = load_text_model(dir, {.force_f32 = a.has("--f32"), .map_in_place = a.has("--mmap")});
  const int64_t max_positions = m.model->config().max_positions;
  config.scheduler.max_model_len = a.integer("--max-model-len", max_positions, 2, kIntMax);
  LATHE_CHECK_ARG(config.scheduler.max_model_len <= max_positions, "option --max-model-len ",
                  config.scheduler.max_model_len, " exceeds the model's max_position_embeddings (", max_positions, ")");
  config.scheduler.eos_token_ids.assign(m.stop_ids.begin(), m.stop_ids.end());
  config.context = &ctx;
  config.log = [](const std::string& line) { std::fprintf(stderr, "lathe serve: %s\n", line.c_str()); };
  // InvalidArgument naming max_model_len and the pool's blocks when one sequence cannot fit.
  Engine engine(*m.model, config);
  std::fprintf(stderr, "lathe serve: %s; %s; prefix caching %s\n", engine.capacity_summary().c_str(),
               concurrency_line(engine, config.block_size).c_str(), config.enable_prefix_caching ? "on" : "off");
  serve::EngineBackend backend(engine, *m.tok, m.tokenizer_config,
                               {.model_name = http.served_model_names[0],
                                .served_model_names = http.served_model_names,
                                .tool_call_parser = parser_flag(a, "--tool-call-parser", serve::tool_call_format_from_string),
                                .reasoning_parser = parser_flag(a, "--reasoning-parser", serve::reasoning_format_from_string)});
  std::fprintf(stderr, "lathe serve: output parsers: tool calls %s, reasoning %s\n",
               std::string(serve::to_string(backend.tool_call_format())).c_str(),
               std::string(serve::to_string(backend.reasoning_format())).c_str());
  for (const std::string& flag : a.all("--lora")) {
    const auto [name, path] = lora_flag(flag);
    // The backend's checks and messages (a taken name, a folder that does not fit, with what is wrong).
    try {
      backend.load_lora_adapter(name, path);
    } catch (const serve::ApiException& e) {
      throw InvalidArgument(str_cat("option --lora ", flag, ": ", e.what()));
    }
  }
  serve::HttpServer server(backend, http);
  server.start();
  std::printf("lathe serve: %s listening on http://%s:%d\n", http.served_model_names[0].c_str(), http.host.c_str(),
              server.port());
  std::fflush(stdout);
  int sig = 0;
  while (sig <= 0) sig = take_signal(stop_signals, std::chrono::hours(1));
  drain_and_stop(server, engine, stop_signals, sig, drain_timeout);
  return 0;
}

}  // namespace lathe::cli
