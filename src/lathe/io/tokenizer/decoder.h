// Decoders of tokenizer.json: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace and Sequence,
// chained over the token strings as the Rust library's decode_chain does, then concatenated.
#pragma once

#include <string>
#include <vector>

#include "lathe/io/tokenizer/json_reader.h"
#include "lathe/io/tokenizer/pattern.h"
#include "lathe/io/tokenizer/pre_tokenizer.h"

namespace lathe::tokenizer {

class Decoder {
 public:
  // From tokenizer.json's "decoder" (null -> tokens joined with spaces). NotImplemented for others.
  static Decoder from_json(JsonRef j);
  bool empty() const { return steps_.empty(); }
  // Decodes token strings into text (always valid UTF-8; bad byte sequences become U+FFFD).
  std::string decode(std::vector<std::string> tokens) const;

 private:
  enum class Kind : uint8_t { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kCount };
  struct Step {
    Kind kind;
    Pattern pattern;       // Replace
    std::string content;   // Replace content; Strip / Metaspace char (UTF-8)
    char32_t content_char = 0;
    size_t start = 0, stop = 0;  // Strip
    PrependScheme prepend_scheme = PrependScheme::kAlways;
  };
  static void append_steps(JsonRef j, std::vector<Step>& steps);
  static void apply(const Step& s, std::vector<std::string>& tokens);

  std::vector<Step> steps_;
};

}  // namespace lathe::tokenizer
