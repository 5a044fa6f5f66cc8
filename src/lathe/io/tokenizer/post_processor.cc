// Post-processor steps (tokenizers/src/processors/{template,sequence}.rs and ByteLevel's
// process_offsets in pre_tokenizers/byte_level.rs).
#include "lathe/io/tokenizer/post_processor.h"

#include "lathe/base/error.h"
#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {

void PostProcessor::append_steps(JsonRef j, std::vector<Step>& steps) {
  if (j.is_null()) return;
  std::string_view type = j["type"].str("post_processor type");
  if (type == "Sequence") {
    j["processors"].for_each_element([&](JsonRef p) { append_steps(p, steps); });
    return;
  }
  Step s{};
  if (type == "TemplateProcessing") {
    s.kind = Kind::kTemplate;
    JsonRef specials = j["special_tokens"];
    j["single"].for_each_element([&](JsonRef item) {
      Piece p{};
      if (JsonRef seq = item["Sequence"]; seq.valid()) {
        p.is_sequence = true;
      } else if (JsonRef sp = item["SpecialToken"]; sp.valid()) {
        std::string_view name = sp["id"].str("SpecialToken id");
        JsonRef def = specials[name];
        if (!def.valid()) throw FormatError(str_cat("TemplateProcessing: special token '", name, "' is not defined"));
        def["ids"].for_each_element([&](JsonRef id) { p.ids.push_back(uint32_t(id.integer("special token id"))); });
        def["tokens"].for_each_element([&](JsonRef t) { p.tokens.emplace_back(t.str("special token")); });
        if (p.ids.size() != p.tokens.size()) {
          throw FormatError(str_cat("TemplateProcessing: special token '", name, "' has mismatched ids / tokens"));
        }
      } else {
        throw FormatError("TemplateProcessing: template items must be Sequence or SpecialToken");
      }
      s.single.push_back(std::move(p));
    });
  } else if (type == "ByteLevel") {
    s.kind = Kind::kByteLevel;
    s.trim_offsets = j["trim_offsets"].is_bool() && j["trim_offsets"].boolean();
    s.add_prefix_space = j["add_prefix_space"].is_bool() && j["add_prefix_space"].boolean();
  } else {
    throw NotImplemented(str_cat("unsupported post_processor type '", type,
                                 "' (supported: TemplateProcessing, ByteLevel, Sequence)"));
  }
  steps.push_back(std::move(s));
}

PostProcessor PostProcessor::from_json(JsonRef j) {
  PostProcessor p;
  append_steps(j, p.steps_);
  return p;
}

size_t PostProcessor::added_tokens_single() const {
  size_t n = 0;
  for (const Step& s : steps_) {
    for (const Piece& p : s.single) n += p.ids.size();
  }
  return n;
}

namespace {

// ByteLevel's process_offsets: shrinks offsets past leading / trailing spaces ('Ġ' or whitespace).
void trim_offsets(Encoding& enc, bool add_prefix_space) {
  const char32_t space_char = ByteLevelTable::get().byte_to_char[' '];
  auto is_space = [&](char32_t c) { return c == space_char || is_whitespace(c); };
  std::vector<char32_t> chars;
  for (size_t i = 0; i < enc.tokens.size(); ++i) {
    const std::string& tok = enc.tokens[i];
    chars.clear();
    for (size_t k = 0; k < tok.size();) chars.push_back(utf8_next(tok, k));
    size_t leading = 0, trailing = 0;
    while (leading < chars.size() && is_space(chars[leading])) ++leading;
    while (trailing < chars.size() && is_space(chars[chars.size() - 1 - trailing])) ++trailing;
    auto& off = enc.offsets[i];
    if (leading > 0) {
      bool is_first = i == 0 || off.first == 0;
      if (is_first && add_prefix_space && leading == 1) leading = 0;
      off.first = std::min(off.first + uint32_t(leading), off.second);
    }
    if (trailing > 0 && off.second >= trailing) off.second = std::max(off.second - uint32_t(trailing), off.first);
  }
}

}  // namespace

void PostProcessor::process(Encoding& enc, bool add_special_tokens) const {
  for (const Step& s : steps_) {
    if (s.kind == Kind::kByteLevel) {
      if (s.trim_offsets) trim_offsets(enc, s.add_prefix_space);
      continue;
    }
    if (!add_special_tokens) continue;
    Encoding out;
    size_t extra = 0;
    for (const Piece& p : s.single) extra += p.ids.size();
    out.ids.reserve(enc.ids.size() + extra);
    out.tokens.reserve(enc.ids.size() + extra);
    out.offsets.reserve(enc.ids.size() + extra);
    for (const Piece& p : s.single) {
      if (p.is_sequence) {
        out.ids.insert(out.ids.end(), enc.ids.begin(), enc.ids.end());
        for (auto& t : enc.tokens) out.tokens.push_back(std::move(t));
        out.offsets.insert(out.offsets.end(), enc.offsets.begin(), enc.offsets.end());
      } else {
        for (size_t k = 0; k < p.ids.size(); ++k) {
          out.ids.push_back(p.ids[k]);
          out.tokens.push_back(p.tokens[k]);
          out.offsets.push_back({0, 0});
        }
      }
    }
    enc = std::move(out);
  }
}

}  // namespace lathe::tokenizer
