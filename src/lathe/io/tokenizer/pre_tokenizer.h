// Pre-tokenizers of tokenizer.json: Split (String / PCRE2 regex patterns, all split behaviors,
// invert), ByteLevel (GPT-2 bytes, optional prefix space and GPT-2 regex), Metaspace, Digits and
// Sequence. They cut the normalized text into the words the model tokenizes independently.
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/io/tokenizer/json_reader.h"
#include "lathe/io/tokenizer/normalized_string.h"
#include "lathe/io/tokenizer/pattern.h"

namespace lathe::tokenizer {

enum class PrependScheme : uint8_t { kAlways, kFirst, kNever, kCount };

// A pre-tokenized word: bytes [start, end) of a NormalizedString. Words are views, so splitting a
// paragraph into thousands of words copies nothing; only steps that rewrite text (Metaspace, a
// ByteLevel prefix space) make new NormalizedStrings, kept in the caller's storage.
struct Word {
  const NormalizedString* ns;
  uint32_t start, end;
  bool byte_level;
  std::string_view text() const { return std::string_view(ns->text()).substr(start, end - start); }
};

class PreTokenizer {
 public:
  // From tokenizer.json's "pre_tokenizer" (null -> no splitting). Throws NotImplemented for an
  // unknown type, or for a step placed after ByteLevel (byte-level text is kept as raw bytes).
  static PreTokenizer from_json(JsonRef j);

  // Splits `piece` into words, in order, appended to `out`; rewritten text lives in `storage`
  // (which must outlive the words). `spans` and `tmp` are scratch buffers.
  void pre_tokenize(const NormalizedString& piece, std::vector<Word>& out, std::deque<NormalizedString>& storage,
                    std::vector<Word>& tmp, std::vector<MatchSpan>& spans) const;
  // True when the words come out as GPT-2 byte-level (the model must use its byte alphabet).
  bool byte_level() const;

 private:
  enum class Kind : uint8_t { kSplit, kByteLevel, kMetaspace, kDigits, kCount };
  struct Step {
    Kind kind;
    Pattern pattern;                               // Split, or ByteLevel's GPT-2 regex
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;                           // Split
    bool add_prefix_space = false;                 // ByteLevel
    bool use_regex = false;                        // ByteLevel
    std::string replacement;                       // Metaspace (UTF-8 of the replacement char)
    PrependScheme prepend_scheme = PrependScheme::kAlways;
    bool split = true;                             // Metaspace
    bool individual_digits = false;                // Digits
  };
  static void append_steps(JsonRef j, std::vector<Step>& steps);
  void apply(const Step& s, const Word& w, std::vector<Word>& out, std::deque<NormalizedString>& storage,
             std::vector<MatchSpan>& spans) const;

  std::vector<Step> steps_;  // a Sequence flattened
};

}  // namespace lathe::tokenizer
