// Public tokenizer API: loads a Hugging Face tokenizer.json (plus tokenizer_config.json and
// special_tokens_map.json when present) and encodes / decodes exactly as the Rust `tokenizers` library
// does for BPE models (byte-level and SentencePiece style). Offsets are Unicode code-point offsets
// into the input, as the Python binding reports them. Invalid UTF-8 input is repaired (each bad
// sequence -> U+FFFD) before encoding, and offsets then refer to the repaired text.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/io/tokenizer/post_processor.h"

namespace lathe::tokenizer {

class TokenizerImpl;

// Special tokens named by tokenizer_config.json / special_tokens_map.json (empty when not set).
struct SpecialTokens {
  std::string bos, eos, pad, unk;
  std::optional<uint32_t> bos_id, eos_id, pad_id, unk_id;
  bool add_bos_token = false;  // tokenizer_config.json's add_bos_token / add_eos_token (informational:
  bool add_eos_token = false;  // encode follows the post-processor, as the Rust library does)
};

// The texts of a tokenizer's files and the names errors give them (paths when read from disk).
struct TokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_json_name = "tokenizer.json";
  std::string config_json;  // "" when absent
  std::string config_json_name = "tokenizer_config.json";
  std::string special_map_json;  // "" when absent
  std::string special_map_json_name = "special_tokens_map.json";
};

// The files a tokenizer is read from: `path` (a tokenizer.json of any name, or a folder: its
// tokenizer.json) and the tokenizer_config.json / special_tokens_map.json beside it (either may be absent).
struct TokenizerPaths {
  std::string tokenizer_json, config_json, special_map_json;
};
TokenizerPaths tokenizer_paths(const std::string& path);
// Reads them, with their paths as names (the optional two as "" when absent). Throws IoError when there
// is no tokenizer.json, and, like every reader, for a FIFO, folder or device in place of any of them.
TokenizerFiles read_tokenizer_files(const std::string& path);

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory holding one. Throws IoError / FormatError /
  // NotImplemented (e.g. "unsupported model type 'Unigram'").
  static Tokenizer load(const std::string& path);
  // From tokenizer.json text (and optional tokenizer_config.json text, "" when absent).
  static Tokenizer from_json(std::string tokenizer_json, std::string tokenizer_config_json = "",
                             std::string special_tokens_map_json = "");
  // The same from named texts. tokenizer_config.json and special_tokens_map.json must be JSON objects:
  // anything else is a FormatError naming the file.
  static Tokenizer from_files(TokenizerFiles files);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Encodes text; add_special_tokens applies the post-processor's template (e.g. Gemma's <bos>).
  // Thread-safe (concurrent calls share the word cache when it is free, else run uncached).
  Encoding encode(std::string_view text, bool add_special_tokens = true) const;
  // Ids only: skips building token strings and offsets (faster).
  std::vector<uint32_t> encode_ids(std::string_view text, bool add_special_tokens = true) const;
  std::string decode(std::span<const uint32_t> ids, bool skip_special_tokens = false) const;

  std::optional<uint32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(uint32_t id) const;
  bool is_special(uint32_t id) const;
  // One past the largest id (model vocab and added tokens).
  uint32_t vocab_size() const;

  const SpecialTokens& special_tokens() const;
  // tokenizer_config.json's chat_template ("" when absent; the "default" entry of a named list).
  const std::string& chat_template() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
};

// Incremental detokenizer for streaming generation: push ids one at a time, get back the text they
// complete. A token that ends inside a multi-byte character yields "" until the character is whole,
// so the output never holds a partial UTF-8 sequence (Hugging Face's DecodeStream algorithm).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special_tokens = false);
  // Newly completed text (possibly empty). Throws lathe::Error if the decoder rewrote earlier text.
  std::string push(uint32_t id);
  // All text emitted so far.
  const std::string& text() const { return text_; }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::vector<uint32_t> ids_;
  std::string prefix_;
  size_t prefix_index_ = 0;
  std::string text_;
};

}  // namespace lathe::tokenizer
