#include "text_model.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/gguf.h"
#include "lathe/io/tokenizer/gguf_tokenizer.h"
#include "lathe/models/gguf_import.h"

namespace lathe::cli {
namespace fs = std::filesystem;

namespace {

void add_id(std::vector<int>& ids, int id) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

// generation_config.json's eos_token_id: a number or a list (transformers' generate stops at any).
void add_generation_eos(const nlohmann::json& gen, std::vector<int>& ids) {
  if (!gen.is_object() || !gen.contains("eos_token_id")) return;
  const nlohmann::json& e = gen["eos_token_id"];
  if (e.is_number_integer()) add_id(ids, e.get<int>());
  if (e.is_array())
    for (const nlohmann::json& v : e)
      if (v.is_number_integer()) add_id(ids, v.get<int>());
}

}  // namespace

TextModel load_text_model(const std::string& dir, const LoadOptions& opts) {
  TextModel m;
  if (is_gguf_path(dir)) {
    // A GGUF file carries its tokenizer in its metadata (tokenizer.ggml.*).
    const GgufFile g = GgufFile::open(dir);
    LATHE_CHECK_ARG(tokenizer::gguf_has_tokenizer(g), dir,
                    ": no tokenizer in the GGUF metadata (give token ids with --prompt-ids instead)");
    tokenizer::TokenizerFiles files = tokenizer::gguf_tokenizer_files(g);
    m.tokenizer_config = nlohmann::ordered_json::parse(files.config_json);
    m.tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_files(std::move(files)));
    m.model = Model::load(dir, opts);
  } else {
    const fs::path tok_path = fs::path(dir) / "tokenizer.json";
    LATHE_CHECK_ARG(fs::exists(tok_path), dir, ": no tokenizer.json (give token ids with --prompt-ids instead)");
    m.model = Model::load(dir, opts);
    m.tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::load(dir));
    const fs::path config_path = fs::path(dir) / "tokenizer_config.json";
    if (fs::exists(config_path)) {
      m.tokenizer_config = read_ordered_json_object_file(config_path.string());
      m.tokenizer_config.erase("added_tokens_decoder");  // large and never read by templates
    }
  }
  const int64_t vocab = m.model->config().vocab_size;
  LATHE_CHECK_ARG(m.tok->vocab_size() <= vocab, dir, ": the tokenizer has ", m.tok->vocab_size(),
                  " ids but the model's vocab_size is ", vocab);
  for (int id : m.model->config().eos_token_ids) add_id(m.stop_ids, id);
  add_generation_eos(m.model->generation_config(), m.stop_ids);
  if (const auto eos = m.tok->special_tokens().eos_id) add_id(m.stop_ids, static_cast<int>(*eos));
  return m;
}

std::vector<int32_t> encode_prompt(const TextModel& m, const std::string& text, bool add_special_tokens) {
  const std::vector<uint32_t> ids = m.tok->encode_ids(text, add_special_tokens);
  LATHE_CHECK_ARG(!ids.empty(), "the prompt encodes to no tokens");
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::vector<OptionSpec> with_sampling_options(std::vector<OptionSpec> before, const std::vector<OptionSpec>& after) {
  static const OptionSpec kSampling[] = {
      {"--temperature", "T", "< 1e-5 (0) = greedy, else sample from softmax(logits / T); >= 0 (default: 0)"},
      {"--top-k", "K", "keep the K most likely tokens; 0 = off (default: 0)"},
      {"--top-p", "P", "keep the smallest set reaching probability P, in (0, 1]; 1 = off (default: 1)"},
      {"--min-p", "P", "drop tokens below P times the top probability, in [0, 1]; 0 = off (default: 0)"},
      {"--repetition-penalty", "R", "prompt and output tokens: logit / R if > 0, else logit * R; > 0 (default: 1)"},
      {"--presence-penalty", "A", "logit -= A for each token already generated, in [-2, 2] (default: 0)"},
      {"--frequency-penalty", "A", "logit -= A times its count in the output, in [-2, 2] (default: 0)"},
      {"--seed", "S", "sampling seed, >= 0 (default: 0)"},
  };
  before.insert(before.end(), std::begin(kSampling), std::end(kSampling));
  before.insert(before.end(), after.begin(), after.end());
  return before;
}

OptionSpec kv_cache_dtype_option() {
  return {"--kv-cache-dtype", "DTYPE",
          "KV cache element type: auto, f32, bf16, int8 (per-token-per-head scales); auto = bf16 when the weights "
          "are bf16, else f32 (default: auto)"};
}

KvCacheDtype read_kv_cache_dtype_flag(const Args& a) {
  const std::string s = a.str("--kv-cache-dtype", "auto");
  try {
    return parse_kv_cache_dtype(s);
  } catch (const InvalidArgument&) {
    throw InvalidArgument(str_cat("option --kv-cache-dtype: expected auto, f32, bf16 or int8, got '", s, "'"));
  }
}

SamplingOptions read_sampling_flags(const Args& a) {
  SamplingOptions s;
  s.temperature = static_cast<float>(a.number("--temperature", 0.0, {.min = 0, .max = kFloatMax}));
  s.top_k = static_cast<int>(a.integer("--top-k", 0, 0, kIntMax));
  s.top_p = static_cast<float>(a.number("--top-p", 1.0, {.min = 0, .max = 1, .min_open = true}));
  s.min_p = static_cast<float>(a.number("--min-p", 0.0, {.min = 0, .max = 1}));
  s.repetition_penalty =
      static_cast<float>(a.number("--repetition-penalty", 1.0, {.min = 0, .max = kFloatMax, .min_open = true}));
  s.presence_penalty = static_cast<float>(a.number("--presence-penalty", 0.0, {.min = -2, .max = 2}));
  s.frequency_penalty = static_cast<float>(a.number("--frequency-penalty", 0.0, {.min = -2, .max = 2}));
  s.seed = static_cast<uint64_t>(a.integer("--seed", 0, 0));
  return s;
}

}  // namespace lathe::cli
