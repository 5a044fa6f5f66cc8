// lathe chat MODEL_DIR: an interactive terminal chat with the model's own chat template. Each line read
// from stdin is a user message; the answer streams as it is generated. /reset starts a new
// conversation, /exit (or end of input) quits; Ctrl-C stops the answer being generated (at the prompt it
// quits).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>

#include "args.h"
#include "lathe/base/context.h"
#include "lathe/infer/generate.h"
#include "lathe/io/jinja/chat_template.h"
#include "text_model.h"

namespace lathe::cli {

const CommandSpec& chat_spec() {
  static const CommandSpec spec{
      .name = "chat",
      .usage = "MODEL_DIR|FILE.gguf [options]",
      .brief = "chat with a model in the terminal, with its chat template",
      .summary = "Reads user messages from stdin, one per line, renders the conversation with the chat template\n"
                 "of MODEL_DIR's tokenizer_config.json and streams each answer. /reset starts over, /exit or\n"
                 "end of input quits, Ctrl-C stops the current answer. A GGUF file's template is its\n"
                 "tokenizer.chat_template (docs/gguf.md).\n",
      .options = with_sampling_options(
          {{"--system", "TEXT", "a system message at the start of every conversation"},
           {"--max-tokens", "N", "new tokens per answer at most, >= 1 (default: 512)"}},
          {{"--threads", "N", "worker threads; 0 = LATHE_NUM_THREADS, else all cores (default: 0)"},
           {"--f32", "", "widen bf16 and f16 weights to f32 at load"},
           {"--mmap", "", "use the checkpoint's weights in place from its memory map (shared page cache, no copy: for models near the RAM size; 4 KiB pages, slower decode)"},
           kv_cache_dtype_option()})};
  return spec;
}

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

// SIGINT sets the flag while an answer is generated; at the prompt it has its default effect (quit).
void catch_sigint(bool catch_it) {
  struct sigaction sa {};
  sa.sa_handler = catch_it ? on_sigint : SIG_DFL;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

nlohmann::ordered_json message(const std::string& role, const std::string& content) {
  return nlohmann::ordered_json{{"role", role}, {"content", content}};
}

}  // namespace

int cmd_chat(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, chat_spec());
  if (a.help() || a.positional.size() != 1) {
    std::fputs(help_text(chat_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  GenerateOptions o;
  o.max_new_tokens = static_cast<int>(a.integer("--max-tokens", 512, 1, kIntMax));
  o.sampling = read_sampling_flags(a);
  o.kv_cache_dtype = read_kv_cache_dtype_flag(a);
  Context ctx(a.threads());
  ContextScope scope(ctx);
  TextModel m = load_text_model(a.positional[0], {.force_f32 = a.has("--f32"), .map_in_place = a.has("--mmap")});
  LATHE_CHECK_ARG(jinja::select_chat_template(m.tokenizer_config).has_value(), a.positional[0],
                  ": tokenizer_config.json has no chat_template (use lathe generate --prompt for plain text)");
  o.stop_token_ids = m.stop_ids;
  o.cancel = &g_interrupted;
  const bool interactive = isatty(STDIN_FILENO);
  const std::string system = a.str("--system", "");

  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  const auto reset = [&] {
    messages = nlohmann::ordered_json::array();
    if (!system.empty()) messages.push_back(message("system", system));
  };
  reset();
  if (interactive) std::fputs("lathe chat: /reset starts over, /exit quits, Ctrl-C stops an answer\n", stderr);
  std::string line;
  while (true) {
    if (interactive) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      reset();
      std::fputs("(new conversation)\n", stdout);
      std::fflush(stdout);
      continue;
    }
    if (line.empty()) continue;
    messages.push_back(message("user", line));
    jinja::ChatRequest req;
    req.messages = messages;
    req.add_generation_prompt = true;
    // The template writes the special tokens itself (as transformers' apply_chat_template, which
    // tokenizes the rendered text without adding them again).
    const std::vector<int32_t> prompt = encode_prompt(m, jinja::apply_chat_template(m.tokenizer_config, req), false);
    tokenizer::StreamDecoder decoder(*m.tok, /*skip_special_tokens=*/true);
    o.on_token = [&](int32_t id) {
      std::fputs(decoder.push(static_cast<uint32_t>(id)).c_str(), stdout);
      std::fflush(stdout);
    };
    g_interrupted = false;
    catch_sigint(true);
    generate(*m.model, prompt, o);
    catch_sigint(false);
    if (g_interrupted) std::fputs(" [stopped]", stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    messages.push_back(message("assistant", decoder.text()));
  }
  return 0;
}

}  // namespace lathe::cli
