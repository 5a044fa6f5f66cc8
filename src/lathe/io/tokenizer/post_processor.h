// Post-processors of tokenizer.json: TemplateProcessing (special tokens around a single sequence),
// ByteLevel (offset trimming) and Sequence. Run on every encode; the template only adds tokens when
// add_special_tokens is set, as in the Rust library.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lathe/io/tokenizer/json_reader.h"

namespace lathe::tokenizer {

// Result of encoding one text.
struct Encoding {
  std::vector<uint32_t> ids;
  std::vector<std::string> tokens;
  // [start, end) in Unicode code points of the input (the Python binding's char offsets); special
  // tokens added by the post-processor get (0, 0).
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
};

class PostProcessor {
 public:
  // From tokenizer.json's "post_processor" (null -> none). NotImplemented for unsupported types.
  static PostProcessor from_json(JsonRef j);
  void process(Encoding& enc, bool add_special_tokens) const;
  // Number of tokens the template adds around a single sequence.
  size_t added_tokens_single() const;

 private:
  enum class Kind : uint8_t { kTemplate, kByteLevel, kCount };
  struct Piece {  // one item of the "single" template
    bool is_sequence;
    std::vector<uint32_t> ids;
    std::vector<std::string> tokens;
  };
  struct Step {
    Kind kind;
    std::vector<Piece> single;  // Template
    bool trim_offsets = false;  // ByteLevel
    bool add_prefix_space = false;
  };
  static void append_steps(JsonRef j, std::vector<Step>& steps);

  std::vector<Step> steps_;
};

}  // namespace lathe::tokenizer
