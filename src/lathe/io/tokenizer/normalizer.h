// Normalizers of tokenizer.json: NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, Prepend and
// Sequence, applied to a NormalizedString so offsets still point into the caller's text.
#pragma once

#include <string>
#include <vector>

#include "lathe/io/tokenizer/json_reader.h"
#include "lathe/io/tokenizer/normalized_string.h"
#include "lathe/io/tokenizer/pattern.h"

namespace lathe::tokenizer {

enum class UnicodeForm : uint8_t { kNfc, kNfd, kNfkc, kNfkd, kCount };

// Unicode normalization of ns in place. Alignment: an unchanged character keeps its own; a changed
// cluster (starter + marks) maps its output characters onto its input characters in order, extra
// output characters sharing the previous one's (as the Rust library's unicode-normalization-alignments
// reports for compositions and expansions).
void unicode_normalize(NormalizedString& ns, UnicodeForm form);

class Normalizer {
 public:
  // From tokenizer.json's "normalizer" (null -> identity). Throws FormatError for an unknown type.
  static Normalizer from_json(JsonRef j);
  bool empty() const { return steps_.empty(); }
  void normalize(NormalizedString& ns) const;

 private:
  enum class Kind : uint8_t { kUnicode, kLowercase, kStrip, kReplace, kPrepend, kCount };
  struct Step {
    Kind kind;
    UnicodeForm form = UnicodeForm::kNfc;
    bool left = false, right = false;  // Strip
    Pattern pattern;                   // Replace
    std::string content;               // Replace content / Prepend text
  };
  static void append_steps(JsonRef j, std::vector<Step>& steps);

  std::vector<Step> steps_;  // a Sequence flattened
};

}  // namespace lathe::tokenizer
