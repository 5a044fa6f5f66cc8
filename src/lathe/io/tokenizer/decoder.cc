// Decoder steps (tokenizers/src/decoders/*.rs, ByteLevel and Metaspace from pre_tokenizers/).
#include "lathe/io/tokenizer/decoder.h"

#include "lathe/base/error.h"
#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {

namespace {

char32_t single_char(std::string_view s, const char* what) {
  size_t i = 0;
  if (s.empty()) throw FormatError(str_cat(what, " must be one character"));
  char32_t c = utf8_next(s, i);
  if (i != s.size()) throw FormatError(str_cat(what, " must be one character"));
  return c;
}

}  // namespace

void Decoder::append_steps(JsonRef j, std::vector<Step>& steps) {
  if (j.is_null()) return;
  std::string_view type = j["type"].str("decoder type");
  if (type == "Sequence") {
    j["decoders"].for_each_element([&](JsonRef d) { append_steps(d, steps); });
    return;
  }
  Step s{};
  if (type == "ByteLevel") {
    s.kind = Kind::kByteLevel;
  } else if (type == "Replace") {
    s.kind = Kind::kReplace;
    s.pattern = Pattern::from_json(j["pattern"]);
    s.content = std::string(j["content"].str("Replace content"));
  } else if (type == "ByteFallback") {
    s.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    s.kind = Kind::kFuse;
  } else if (type == "Strip") {
    s.kind = Kind::kStrip;
    s.content = std::string(j["content"].str("Strip content"));
    s.content_char = single_char(s.content, "Strip content");
    s.start = size_t(j["start"].integer("Strip start"));
    s.stop = size_t(j["stop"].integer("Strip stop"));
  } else if (type == "Metaspace") {
    s.kind = Kind::kMetaspace;
    s.content = std::string(j["replacement"].str("Metaspace replacement"));
    s.content_char = single_char(s.content, "Metaspace replacement");
    std::string_view scheme = j["prepend_scheme"].is_string() ? j["prepend_scheme"].str() : "always";
    s.prepend_scheme = scheme == "first" ? PrependScheme::kFirst
                       : scheme == "never" ? PrependScheme::kNever
                                           : PrependScheme::kAlways;
    if (j["add_prefix_space"].is_bool() && !j["add_prefix_space"].boolean()) s.prepend_scheme = PrependScheme::kNever;
  } else {
    throw NotImplemented(str_cat("unsupported decoder type '", type,
                                 "' (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence)"));
  }
  steps.push_back(std::move(s));
}

Decoder Decoder::from_json(JsonRef j) {
  Decoder d;
  append_steps(j, d.steps_);
  return d;
}

void Decoder::apply(const Step& s, std::vector<std::string>& tokens) {
  switch (s.kind) {
    case Kind::kByteLevel: {
      // Each token maps char -> byte when all its chars are in the GPT-2 table, else keeps its UTF-8.
      const auto& bl = ByteLevelTable::get();
      std::string bytes;
      for (const std::string& t : tokens) {
        size_t mark = bytes.size();
        bool ok = true;
        for (size_t i = 0; i < t.size() && ok;) {
          char32_t c = utf8_next(t, i);
          ok = c < bl.char_to_byte.size() && bl.char_to_byte[c] >= 0;
          if (ok) bytes.push_back(char(bl.char_to_byte[c]));
        }
        if (!ok) {
          bytes.resize(mark);
          bytes += t;
        }
      }
      tokens.assign(1, utf8_repair(bytes));
      return;
    }
    case Kind::kReplace: {
      std::vector<MatchSpan> spans;
      for (std::string& t : tokens) {
        s.pattern.find_matches(t, spans);
        bool any = false;
        for (const auto& m : spans) any |= m.is_match;
        if (!any) continue;
        std::string r;
        for (const auto& m : spans) {
          if (m.is_match) r += s.content;
          else r.append(t, m.start, m.end - m.start);
        }
        t = std::move(r);
      }
      return;
    }
    case Kind::kByteFallback: {
      std::vector<std::string> out;
      out.reserve(tokens.size());
      std::string pending;
      auto hexval = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      auto flush = [&]() {
        if (pending.empty()) return;
        if (utf8_valid_prefix(pending) == pending.size()) {
          out.push_back(pending);
        } else {
          for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
        }
        pending.clear();
      };
      for (std::string& t : tokens) {
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hexval(t[3]) >= 0 && hexval(t[4]) >= 0) {
          pending.push_back(char(hexval(t[3]) * 16 + hexval(t[4])));
          continue;
        }
        flush();
        out.push_back(std::move(t));
      }
      flush();
      tokens = std::move(out);
      return;
    }
    case Kind::kFuse: {
      std::string all;
      for (const auto& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      return;
    }
    case Kind::kStrip: {
      std::vector<char32_t> chars;
      for (std::string& t : tokens) {
        chars.clear();
        for (size_t i = 0; i < t.size();) chars.push_back(utf8_next(t, i));
        size_t start_cut = 0;
        for (size_t i = 0; i < s.start && i < chars.size(); ++i) {
          if (chars[i] != s.content_char) break;
          start_cut = i + 1;
        }
        size_t stop_cut = chars.size();
        for (size_t i = 0; i < s.stop && i < chars.size(); ++i) {
          size_t index = chars.size() - i - 1;
          if (chars[index] != s.content_char) break;
          stop_cut = index;
        }
        std::string r;
        for (size_t i = start_cut; i < stop_cut; ++i) utf8_append(r, chars[i]);
        t = std::move(r);
      }
      return;
    }
    case Kind::kMetaspace: {
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string& t = tokens[i];
        if (t.find(s.content) == std::string::npos) continue;
        std::string r;
        for (size_t k = 0; k < t.size();) {
          char32_t c = utf8_next(t, k);
          if (c == s.content_char) {
            if (i == 0 && s.prepend_scheme != PrependScheme::kNever) continue;
            r.push_back(' ');
          } else {
            utf8_append(r, c);
          }
        }
        t = std::move(r);
      }
      return;
    }
    case Kind::kCount: return;
  }
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (steps_.empty()) {
    std::string r;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) r.push_back(' ');
      r += tokens[i];
    }
    return r;
  }
  for (const Step& s : steps_) apply(s, tokens);
  std::string r;
  for (const auto& t : tokens) r += t;
  return r;
}

}  // namespace lathe::tokenizer
