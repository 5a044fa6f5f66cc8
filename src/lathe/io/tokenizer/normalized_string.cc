// NormalizedString: alignment-preserving edits, following the Hugging Face tokenizers semantics
// (tokenizer/normalizer.rs) byte for byte, since encode offsets are compared exactly against it.
#include "lathe/io/tokenizer/normalized_string.h"

#include <algorithm>

#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {

namespace {

// Start of the character containing byte i.
inline size_t char_start(const std::string& s, size_t i) {
  while (i > 0 && is_utf8_continuation(uint8_t(s[i]))) --i;
  return i;
}

}  // namespace

OffsetPair NormalizedString::align_at(size_t i) const {
  if (!align_.empty()) return align_[i];
  size_t cs = char_start(text_, i);
  size_t ce = cs + size_t(utf8_len(uint8_t(text_[cs])));
  return {base_ + uint32_t(cs), base_ + uint32_t(ce)};
}

OffsetPair NormalizedString::original_range(size_t s, size_t e) const {
  if (s >= e) {
    uint32_t o = s < text_.size() ? align_at(s).first : (text_.empty() ? base_ : align_at(text_.size() - 1).second);
    return {o, o};
  }
  if (align_.empty()) {
    // Identity: byte-level tokens may start or end inside a character; widen to whole characters.
    size_t cs = char_start(text_, s);
    size_t last = char_start(text_, e - 1);
    size_t ce = last + size_t(utf8_len(uint8_t(text_[last])));
    if (ce < e) ce = e;
    return {base_ + uint32_t(cs), base_ + uint32_t(ce)};
  }
  return {align_[s].first, align_[e - 1].second};
}

uint32_t NormalizedString::original_start() const {
  if (align_.empty()) return base_;
  return text_.empty() ? base_ : align_[0].first;
}

void NormalizedString::materialize() {
  if (!align_.empty() || text_.empty()) return;
  align_.resize(text_.size());
  size_t i = 0;
  while (i < text_.size()) {
    size_t len = size_t(utf8_len(uint8_t(text_[i])));
    if (i + len > text_.size()) len = text_.size() - i;
    OffsetPair a{base_ + uint32_t(i), base_ + uint32_t(i + len)};
    for (size_t k = 0; k < len; ++k) align_[i + k] = a;
    i += len;
  }
}

NormalizedString NormalizedString::slice(size_t s, size_t e) const {
  NormalizedString out;
  out.text_.assign(text_, s, e - s);
  if (align_.empty()) {
    out.base_ = base_ + uint32_t(s);
  } else {
    out.align_.assign(align_.begin() + long(s), align_.begin() + long(e));
    out.base_ = s < e ? align_[s].first : base_;
  }
  return out;
}

void NormalizedString::replace(const std::vector<MatchSpan>& spans, std::string_view content) {
  bool any = false;
  for (const auto& m : spans) any |= m.is_match;
  if (!any) return;
  materialize();
  std::string new_text;
  std::vector<OffsetPair> new_align;
  new_text.reserve(text_.size() + content.size());
  new_align.reserve(text_.size() + content.size());
  size_t last_end = 0;
  for (const auto& m : spans) {
    if (!m.is_match) continue;
    new_text.append(text_, last_end, m.start - last_end);
    new_align.insert(new_align.end(), align_.begin() + long(last_end), align_.begin() + long(m.start));
    // Inserted chars share the alignment of the byte before the insertion point, i.e. the match's last.
    OffsetPair a = m.end >= 1 ? align_[m.end - 1] : OffsetPair{original_start(), original_start()};
    new_text.append(content);
    new_align.insert(new_align.end(), content.size(), a);
    last_end = m.end;
  }
  new_text.append(text_, last_end, std::string::npos);
  new_align.insert(new_align.end(), align_.begin() + long(last_end), align_.end());
  text_ = std::move(new_text);
  align_ = std::move(new_align);
}

void NormalizedString::prepend(std::string_view s) {
  if (text_.empty() || s.empty()) return;
  OffsetPair a = align_at(0);
  materialize();
  text_.insert(0, s);
  align_.insert(align_.begin(), s.size(), a);
}

void NormalizedString::transform_range(size_t s, size_t e, const std::vector<CharChange>& dest,
                                       size_t initial_offset) {
  materialize();
  OffsetPair origin{original_start(), original_start()};
  // Byte starts of the replaced chars, consumed in order.
  size_t cursor = s;
  auto next_char_len = [&]() -> size_t {
    if (cursor >= e) return 0;
    size_t len = size_t(utf8_len(uint8_t(text_[cursor])));
    cursor += len;
    return len;
  };
  size_t initial_removed = 0;
  for (size_t k = 0; k < initial_offset; ++k) initial_removed += next_char_len();
  size_t offset = s + initial_removed;
  std::string out;
  std::vector<OffsetPair> out_align;
  out.reserve(e - s);
  out_align.reserve(e - s);
  for (const auto& d : dest) {
    OffsetPair a;
    if (d.change > 0) {
      a = offset < 1 ? origin : align_[offset - 1];
    } else {
      a = offset < align_.size() ? align_[offset] : (align_.empty() ? origin : align_.back());
    }
    if (d.change <= 0) offset += next_char_len();
    for (int k = 0; k < -d.change; ++k) offset += next_char_len();
    size_t before = out.size();
    utf8_append(out, d.c);
    out_align.insert(out_align.end(), out.size() - before, a);
  }
  text_.replace(s, e - s, out);
  align_.erase(align_.begin() + long(s), align_.begin() + long(e));
  align_.insert(align_.begin() + long(s), out_align.begin(), out_align.end());
}

void NormalizedString::strip(bool left, bool right) {
  size_t s = 0, e = text_.size();
  if (left) {
    while (s < e) {
      size_t i = s;
      char32_t c = utf8_next(text_, i);
      if (!is_whitespace(c)) break;
      s = i;
    }
  }
  if (right) {
    while (e > s) {
      size_t cs = char_start(text_, e - 1);
      size_t i = cs;
      char32_t c = utf8_next(text_, i);
      if (!is_whitespace(c)) break;
      e = cs;
    }
  }
  if (s == 0 && e == text_.size()) return;
  *this = slice(s, e);
}

void split_spans(const std::vector<MatchSpan>& spans, SplitBehavior behavior, uint32_t base,
                 std::vector<MatchSpan>& out) {
  size_t first = out.size();
  bool previous_match = false;
  auto push = [&](const MatchSpan& m, bool remove) { out.push_back({m.start, m.end, remove}); };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& m : spans) push(m, false);
      break;
    case SplitBehavior::kRemoved:
      for (const auto& m : spans) push(m, m.is_match);
      break;
    case SplitBehavior::kContiguous:
      for (const auto& m : spans) {
        if (m.is_match == previous_match && out.size() > first) {
          out.back().end = m.end;
        } else {
          push(m, false);
        }
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& m : spans) {
        if (m.is_match && !previous_match && out.size() > first) {
          out.back().end = m.end;
        } else {
          push(m, false);
        }
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t k = spans.size(); k-- > 0;) {
        const auto& m = spans[k];
        if (m.is_match && !previous_match && out.size() > first) {
          out.back().start = m.start;
        } else {
          push(m, false);
        }
        previous_match = m.is_match;
      }
      std::reverse(out.begin() + long(first), out.end());
      break;
    case SplitBehavior::kCount:
      break;
  }
  // Drop removed and empty pieces; shift the rest (is_match is reused as the "removed" mark above).
  size_t w = first;
  for (size_t r = first; r < out.size(); ++r) {
    if (out[r].is_match || out[r].start >= out[r].end) continue;
    out[w++] = {out[r].start + base, out[r].end + base, false};
  }
  out.resize(w);
}

}  // namespace lathe::tokenizer
