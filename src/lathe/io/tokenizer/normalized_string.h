// A piece of the input as the normalizer / pre-tokenizers transform it, with the alignment of each of
// its bytes back to the original input (the Hugging Face NormalizedString model): every byte of the
// normalized text records the original byte range [first, second) of the character it came from, so
// token offsets can be reported in the caller's text. An untouched slice of the input keeps its
// alignment implicit (`align` empty, `base` = original offset), which is the fast common case.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lathe::tokenizer {

using OffsetPair = std::pair<uint32_t, uint32_t>;  // [start, end) byte offsets into the original

// How a split pattern's matches are kept (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior : uint8_t { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous, kCount };

// One found match or gap: [start, end) bytes, and whether it is a match of the pattern.
struct MatchSpan {
  uint32_t start;
  uint32_t end;
  bool is_match;
};

struct CharChange {
  char32_t c;
  int change;  // 0: replaces one input char; +1: inserted; -k: replaces 1 + k input chars
};

// The pieces kept when splitting by a pattern's spans with `behavior` (Hugging Face
// NormalizedString::split): appends non-empty [start, end) ranges, shifted by `base`, to out.
void split_spans(const std::vector<MatchSpan>& spans, SplitBehavior behavior, uint32_t base,
                 std::vector<MatchSpan>& out);

class NormalizedString {
 public:
  NormalizedString() = default;
  // An untouched slice of the original starting at original byte `base`.
  NormalizedString(std::string text, uint32_t base) : text_(std::move(text)), base_(base) {}

  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  size_t size() const { return text_.size(); }
  bool identity() const { return align_.empty(); }

  // Original range of normalized byte i.
  OffsetPair align_at(size_t i) const;
  // Original byte range covered by normalized bytes [s, e) (expand_alignments: first's start, last's end).
  OffsetPair original_range(size_t s, size_t e) const;
  // Original start of the whole piece (offsets_original().0).
  uint32_t original_start() const;

  // Sub-piece of normalized bytes [s, e).
  NormalizedString slice(size_t s, size_t e) const;

  // Replaces every matched span (is_match) by `content`; each new byte aligned to the last byte of the
  // match, as Hugging Face's replace() does.
  void replace(const std::vector<MatchSpan>& spans, std::string_view content);
  // Prepends s (aligned to the first character) when the text is non-empty.
  void prepend(std::string_view s);
  // Applies a char-level transformation to normalized bytes [s, e) (Hugging Face transform_range with
  // `initial_offset` = removed leading chars).
  void transform_range(size_t s, size_t e, const std::vector<CharChange>& dest, size_t initial_offset);
  // Removes leading / trailing whitespace.
  void strip(bool left, bool right);

 private:
  void materialize();  // makes the implicit identity alignment explicit

  std::string text_;
  std::vector<OffsetPair> align_;  // per byte of text_, or empty for identity
  uint32_t base_ = 0;
};

}  // namespace lathe::tokenizer
