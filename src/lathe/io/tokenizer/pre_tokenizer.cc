// Pre-tokenizer steps, following the Hugging Face tokenizers semantics (pre_tokenizers/*.rs).
#include "lathe/io/tokenizer/pre_tokenizer.h"

#include "lathe/base/error.h"
#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {

namespace {

// GPT-2's word pattern, used by ByteLevel when use_regex is set.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

SplitBehavior behavior_of(std::string_view b) {
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  throw FormatError(str_cat("unknown split behavior '", b, "'"));
}

bool flag(JsonRef j, const char* key, bool dflt) { return j[key].is_bool() ? j[key].boolean() : dflt; }

// Each numeric char is its own match (Rust's char-predicate Pattern).
void numeric_matches(std::string_view t, std::vector<MatchSpan>& out) {
  out.clear();
  if (t.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t prev = 0, i = 0;
  while (i < t.size()) {
    size_t cs = i;
    char32_t c = utf8_next(t, i);
    if (!is_numeric(c)) continue;
    if (prev != cs) out.push_back({uint32_t(prev), uint32_t(cs), false});
    out.push_back({uint32_t(cs), uint32_t(i), true});
    prev = i;
  }
  if (prev != t.size()) out.push_back({uint32_t(prev), uint32_t(t.size()), false});
}

}  // namespace

void PreTokenizer::append_steps(JsonRef j, std::vector<Step>& steps) {
  if (j.is_null()) return;
  std::string_view type = j["type"].str("pre_tokenizer type");
  if (!steps.empty() && steps.back().kind == Kind::kByteLevel) {
    throw NotImplemented(str_cat("pre-tokenizer '", type, "' after ByteLevel is not supported"));
  }
  Step s{};
  if (type == "Sequence") {
    j["pretokenizers"].for_each_element([&](JsonRef p) { append_steps(p, steps); });
    return;
  } else if (type == "Split") {
    s.kind = Kind::kSplit;
    s.pattern = Pattern::from_json(j["pattern"]);
    s.behavior = behavior_of(j["behavior"].str("Split behavior"));
    s.invert = flag(j, "invert", false);
  } else if (type == "ByteLevel") {
    s.kind = Kind::kByteLevel;
    s.add_prefix_space = flag(j, "add_prefix_space", true);
    s.use_regex = flag(j, "use_regex", true);
    if (s.use_regex) s.pattern = Pattern::regex(kGpt2Pattern);
  } else if (type == "Metaspace") {
    s.kind = Kind::kMetaspace;
    s.replacement = std::string(j["replacement"].str("Metaspace replacement"));
    std::string_view scheme = j["prepend_scheme"].is_string() ? j["prepend_scheme"].str() : "always";
    s.prepend_scheme = scheme == "first" ? PrependScheme::kFirst
                       : scheme == "never" ? PrependScheme::kNever
                                           : PrependScheme::kAlways;
    if (j["add_prefix_space"].is_bool() && !j["add_prefix_space"].boolean()) s.prepend_scheme = PrependScheme::kNever;
    s.split = flag(j, "split", true);
    s.pattern = Pattern::literal(s.replacement);
  } else if (type == "Digits") {
    s.kind = Kind::kDigits;
    s.individual_digits = flag(j, "individual_digits", false);
  } else {
    throw NotImplemented(str_cat("unsupported pre_tokenizer type '", type,
                                 "' (supported: Split, ByteLevel, Metaspace, Digits, Sequence)"));
  }
  steps.push_back(std::move(s));
}

PreTokenizer PreTokenizer::from_json(JsonRef j) {
  PreTokenizer p;
  append_steps(j, p.steps_);
  return p;
}

bool PreTokenizer::byte_level() const { return !steps_.empty() && steps_.back().kind == Kind::kByteLevel; }

void PreTokenizer::apply(const Step& s, const Word& w, std::vector<Word>& out, std::deque<NormalizedString>& storage,
                         std::vector<MatchSpan>& spans) const {
  std::vector<MatchSpan> pieces;
  auto emit_split = [&](const NormalizedString* ns, uint32_t base, SplitBehavior b, bool byte_level) {
    pieces.clear();
    split_spans(spans, b, base, pieces);
    for (const auto& p : pieces) out.push_back({ns, p.start, p.end, byte_level});
  };
  switch (s.kind) {
    case Kind::kSplit:
      s.pattern.find_matches(w.text(), spans, s.invert);
      emit_split(w.ns, w.start, s.behavior, w.byte_level);
      return;
    case Kind::kDigits:
      numeric_matches(w.text(), spans);
      emit_split(w.ns, w.start, s.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                 w.byte_level);
      return;
    case Kind::kMetaspace: {
      NormalizedString& piece = storage.emplace_back(w.ns->slice(w.start, w.end));
      Pattern::literal(" ").find_matches(piece.text(), spans);
      piece.replace(spans, s.replacement);
      bool starts = piece.text().compare(0, s.replacement.size(), s.replacement) == 0;
      if (!starts && (s.prepend_scheme == PrependScheme::kAlways ||
                      (s.prepend_scheme == PrependScheme::kFirst && piece.original_start() == 0))) {
        piece.prepend(s.replacement);
      }
      if (s.split) {
        s.pattern.find_matches(piece.text(), spans);
        emit_split(&piece, 0, SplitBehavior::kMergedWithNext, w.byte_level);
      } else if (!piece.empty()) {
        out.push_back({&piece, 0, uint32_t(piece.size()), w.byte_level});
      }
      return;
    }
    case Kind::kByteLevel: {
      // The bytes stay raw: the BPE model maps each through the GPT-2 table (same tokens, same
      // alignments as rewriting the text, without building it).
      Word v = w;
      if (s.add_prefix_space && v.end > v.start && v.text()[0] != ' ') {
        NormalizedString& piece = storage.emplace_back(w.ns->slice(w.start, w.end));
        piece.prepend(" ");
        v = {&piece, 0, uint32_t(piece.size()), true};
      }
      if (s.use_regex) {
        s.pattern.find_matches(v.text(), spans);
        emit_split(v.ns, v.start, SplitBehavior::kIsolated, true);
      } else if (v.end > v.start) {
        out.push_back({v.ns, v.start, v.end, true});
      }
      return;
    }
    case Kind::kCount: return;
  }
}

void PreTokenizer::pre_tokenize(const NormalizedString& piece, std::vector<Word>& out,
                                std::deque<NormalizedString>& storage, std::vector<Word>& tmp,
                                std::vector<MatchSpan>& spans) const {
  if (piece.empty()) return;
  size_t first = out.size();
  out.push_back({&piece, 0, uint32_t(piece.size()), false});
  for (const Step& s : steps_) {
    tmp.assign(out.begin() + long(first), out.end());
    out.resize(first);
    for (const Word& w : tmp) apply(s, w, out, storage, spans);
  }
}

}  // namespace lathe::tokenizer
