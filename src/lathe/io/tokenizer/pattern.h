// The split / replace patterns of tokenizer.json ({"String": s} or {"Regex": r}): finds all
// non-overlapping matches and returns the text as alternating gap / match spans (Hugging Face
// Pattern::find_matches). Regexes run on PCRE2 with JIT, in UTF + Unicode-property mode, standing in
// for the Oniguruma engine the Rust library uses (same syntax for the Qwen / Llama 3 / GPT-2 patterns).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/io/tokenizer/json_reader.h"
#include "lathe/io/tokenizer/normalized_string.h"

namespace lathe::tokenizer {

class Regex {
 public:
  explicit Regex(const std::string& pattern);  // throws FormatError with PCRE2's message
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(start, end) for each match in text (valid UTF-8), left to right; empty matches
  // advance by one character.
  template <class F>
  void for_each_match(std::string_view text, F&& on_match) const;

 private:
  // Returns false when no match at or after `start`; otherwise sets [ms, me).
  bool find(std::string_view text, size_t start, void* match_data, size_t& ms, size_t& me) const;
  void* new_match_data() const;
  static void free_match_data(void* md);

  void* code_ = nullptr;  // pcre2_code*
};

class Pattern {
 public:
  // From {"String": ...} or {"Regex": ...}.
  static Pattern from_json(JsonRef j);
  static Pattern literal(std::string s);
  static Pattern regex(const std::string& re);

  // Gap / match spans covering text (one non-match span for an empty text).
  void find_matches(std::string_view text, std::vector<MatchSpan>& out, bool invert = false) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

template <class F>
void Regex::for_each_match(std::string_view text, F&& on_match) const {
  void* md = new_match_data();
  size_t pos = 0;
  size_t ms, me;
  while (pos <= text.size() && find(text, pos, md, ms, me)) {
    on_match(ms, me);
    if (me > ms) {
      pos = me;
    } else {
      if (me >= text.size()) break;
      pos = me + 1;
      while (pos < text.size() && (uint8_t(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  free_match_data(md);
}

}  // namespace lathe::tokenizer
