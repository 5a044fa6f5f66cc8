// A model folder read as a text model: its weights, its tokenizer (tokenizer.json beside config.json)
// and tokenizer_config.json (special tokens and the chat template), for `lathe generate --prompt` and
// `lathe chat`.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "args.h"
#include "lathe/infer/generate.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/models/model.h"

namespace lathe::cli {

struct TextModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  nlohmann::ordered_json tokenizer_config = nlohmann::ordered_json::object();  // {} without the file
  std::vector<int> stop_ids;  // the config's eos ids and the tokenizer's eos token
};

// Throws InvalidArgument when the folder has no tokenizer.json (naming the --prompt-ids alternative) or
// when the tokenizer's ids do not fit the model's vocabulary.
TextModel load_text_model(const std::string& dir, const LoadOptions& opts);

// Encodes `text` (special tokens as the tokenizer's post-processor adds them) as model input ids.
std::vector<int32_t> encode_prompt(const TextModel& m, const std::string& text, bool add_special_tokens);

// The sampling flags generate and chat share (--temperature, --top-k, --top-p, --min-p, the three
// penalties, --seed): `before`, then these, then `after`, as a command's option table.
std::vector<OptionSpec> with_sampling_options(std::vector<OptionSpec> before, const std::vector<OptionSpec>& after);
// Reads them (each at its default when absent).
SamplingOptions read_sampling_flags(const Args& a);

// --kv-cache-dtype auto|f32|bf16, the KV cache's element type (serve, generate, chat; vLLM's flag): its
// option row, and its value (auto when absent; InvalidArgument naming the option and the choices).
OptionSpec kv_cache_dtype_option();
KvCacheDtype read_kv_cache_dtype_flag(const Args& a);

}  // namespace lathe::cli
