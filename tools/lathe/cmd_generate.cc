// lathe generate MODEL_DIR --prompt "text" | --prompt-ids 1,2,3: generation with the KV cache, as streamed
// text through the folder's tokenizer or as token ids.
#include <algorithm>
#include <atomic>
#include <cstdio>

#include "args.h"
#include "lathe/base/context.h"
#include "lathe/infer/generate.h"
#include "lathe/infer/stop_strings.h"
#include "lathe/models/lora_adapters.h"
#include "text_model.h"

namespace lathe::cli {

const CommandSpec& generate_spec() {
  static const CommandSpec spec{
      .name = "generate",
      .usage = "MODEL_DIR|FILE.gguf (--prompt TEXT | --prompt-ids 1,2,3) [options]",
      .brief = "generate text (or token ids) with the KV cache (greedy by default)",
      .summary = "Generates with the KV cache (greedy unless --temperature > 0). With --prompt, the text is encoded\n"
                 "with MODEL_DIR's tokenizer.json and the completion is streamed as text after the prompt; with\n"
                 "--prompt-ids, the prompt and generated ids are printed on one line. Prefill and decode speed\n"
                 "go to stderr. A GGUF file (llama.cpp's format, docs/gguf.md) brings its tokenizer in its metadata.\n",
      .options = with_sampling_options(
          {{"--prompt", "TEXT", "prompt text, encoded with the folder's tokenizer (special tokens as it adds them)"},
           {"--prompt-ids", "IDS", "prompt token ids, e.g. 1,2,3"},
           {"--stop", "STR", "with --prompt: end the completion at this text (not printed)"},
           {"--max-tokens", "N", "new tokens at most, >= 0 (default: 32)"}},
          {{"--adapter", "DIR", "apply a PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors)"},
           {"--threads", "N", "worker threads; 0 = LATHE_NUM_THREADS, else all cores (default: 0)"},
           {"--f32", "", "widen bf16 and f16 weights to f32 at load"},
           {"--mmap", "", "use the checkpoint's weights in place from its memory map (shared page cache, no copy: for models near the RAM size; 4 KiB pages, slower decode)"},
           kv_cache_dtype_option(),
           {"--ignore-eos", "", "do not stop at the config's eos_token_id"}})};
  return spec;
}

namespace {

void print_speed(const GenerateResult& r) {
  const int64_t n_new = static_cast<int64_t>(r.tokens.size()) - r.n_prompt;
  std::fprintf(stderr, "prefill %lld tokens in %.3f s (%.1f tok/s), decode %lld tokens in %.3f s (%.1f tok/s)\n",
               static_cast<long long>(r.n_prompt), r.prefill_seconds, r.n_prompt / std::max(r.prefill_seconds, 1e-9),
               static_cast<long long>(n_new), r.decode_seconds,
               n_new > 1 ? (n_new - 1) / std::max(r.decode_seconds, 1e-9) : 0.0);
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, generate_spec());
  const bool text_mode = a.has("--prompt");
  if (a.help() || a.positional.size() != 1 || text_mode == a.has("--prompt-ids")) {
    if (!a.help() && a.positional.size() == 1) std::fputs("generate: give one of --prompt and --prompt-ids\n", stderr);
    std::fputs(help_text(generate_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  LATHE_CHECK_ARG(text_mode || !a.has("--stop"), "--stop needs --prompt (text generation)");
  GenerateOptions o;
  o.max_new_tokens = static_cast<int>(a.integer("--max-tokens", 32, 0, kIntMax));
  o.sampling = read_sampling_flags(a);
  o.kv_cache_dtype = read_kv_cache_dtype_flag(a);
  Context ctx(a.threads());
  ContextScope scope(ctx);
  const LoadOptions load{.force_f32 = a.has("--f32"), .map_in_place = a.has("--mmap")};
  if (!text_mode) {
    const std::vector<int32_t> prompt = parse_id_list(a.str("--prompt-ids", ""));
    auto model = Model::load(a.positional[0], load);
    if (a.has("--adapter")) LoraAdapters::load(*model, a.str("--adapter", ""));  // stays on the model
    if (!a.has("--ignore-eos")) o.stop_token_ids = model->config().eos_token_ids;
    GenerateResult r = generate(*model, prompt, o);
    for (size_t i = 0; i < r.tokens.size(); ++i) std::printf("%s%d", i ? "," : "", r.tokens[i]);
    std::printf("\n");
    std::fflush(stdout);
    print_speed(r);
    return 0;
  }
  TextModel m = load_text_model(a.positional[0], load);
  if (a.has("--adapter")) LoraAdapters::load(*m.model, a.str("--adapter", ""));
  if (!a.has("--ignore-eos")) o.stop_token_ids = m.stop_ids;
  const std::string prompt_text = a.str("--prompt", "");
  const std::vector<int32_t> prompt = encode_prompt(m, prompt_text, /*add_special_tokens=*/true);
  tokenizer::StreamDecoder decoder(*m.tok, /*skip_special_tokens=*/true);
  StopStringMatcher stops(a.has("--stop") ? std::vector<std::string>{a.str("--stop", "")} : std::vector<std::string>{});
  std::atomic<bool> stop_now{false};
  o.cancel = &stop_now;
  o.on_token = [&](int32_t id) {
    const StopStringMatcher::Output out = stops.push(decoder.push(static_cast<uint32_t>(id)));
    std::fputs(out.text.c_str(), stdout);
    std::fflush(stdout);
    if (out.stopped) stop_now = true;
  };
  std::fputs(prompt_text.c_str(), stdout);
  std::fflush(stdout);
  GenerateResult r = generate(*m.model, prompt, o);
  std::printf("%s\n", stops.flush().c_str());
  std::fflush(stdout);
  print_speed(r);
  return 0;
}

}  // namespace lathe::cli
