#include "lathe/train/byte_tokenizer.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lathe/io/mapped_file.h"
#include "lathe/io/tokenizer/unicode.h"

namespace lathe::train {

namespace fs = std::filesystem;
using nlohmann::json;

void write_byte_level_tokenizer(const std::string& dir_path) {
  const fs::path dir = dir_path;
  fs::create_directories(dir);
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[tokenizer::ByteLevelTable::get().byte_to_utf8[b]] = b;
  json added = json::array();
  const char* specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < 3; ++i)
    added.push_back({{"id", 256 + i}, {"content", specials[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  const json tok = {{"version", "1.0"},
                    {"added_tokens", added},
                    {"normalizer", nullptr},
                    {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
                    {"post_processor", nullptr},
                    {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
                    {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
  write_file_atomic((dir / "tokenizer.json").string(), tok.dump(1) + "\n");
  const json cfg = {
      {"bos_token", "<|endoftext|>"},
      {"eos_token", "<|im_end|>"},
      {"pad_token", "<|endoftext|>"},
      {"model_max_length", 1024},
      {"chat_template",
       "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
       "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"}};
  write_file_atomic((dir / "tokenizer_config.json").string(), cfg.dump(2) + "\n");
}

}  // namespace lathe::train
