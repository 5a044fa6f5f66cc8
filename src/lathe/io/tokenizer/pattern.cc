// PCRE2-backed Regex and the String / Regex Pattern of tokenizer.json.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "lathe/io/tokenizer/pattern.h"

#include <pcre2.h>

#include <cstring>

#include "lathe/base/error.h"

namespace lathe::tokenizer {

Regex::Regex(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // UCP: \s \w \d and POSIX classes use Unicode properties, as Oniguruma's Unicode mode does.
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw FormatError(str_cat("bad regex /", pattern, "/ at ", err_off, ": ", reinterpret_cast<char*>(msg)));
  }
  // JIT is an optimisation only: when unavailable pcre2_match interprets.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void* Regex::new_match_data() const {
  return pcre2_match_data_create_from_pattern(static_cast<pcre2_code*>(code_), nullptr);
}

void Regex::free_match_data(void* md) { pcre2_match_data_free(static_cast<pcre2_match_data*>(md)); }

bool Regex::find(std::string_view text, size_t start, void* match_data, size_t& ms, size_t& me) const {
  auto* md = static_cast<pcre2_match_data*>(match_data);
  // Input is repaired to valid UTF-8 before any pattern runs, so PCRE2's own check is skipped.
  int rc = pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                       start, PCRE2_NO_UTF_CHECK, md, nullptr);
  if (rc < 0) {
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    throw Error(str_cat("regex match failed: ", reinterpret_cast<char*>(msg)));
  }
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  ms = ov[0];
  me = ov[1];
  return true;
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

Pattern Pattern::regex(const std::string& re) {
  Pattern p;
  p.regex_ = std::make_shared<const Regex>(re);
  return p;
}

Pattern Pattern::from_json(JsonRef j) {
  if (j.is_string()) return literal(std::string(j.str()));  // bare string form (older files)
  if (JsonRef s = j["String"]; s.valid()) return literal(std::string(s.str("pattern String")));
  if (JsonRef r = j["Regex"]; r.valid()) return regex(std::string(r.str("pattern Regex")));
  throw FormatError("pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

void Pattern::find_matches(std::string_view text, std::vector<MatchSpan>& out, bool invert) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, invert});
    return;
  }
  size_t prev = 0;
  auto add = [&](size_t s, size_t e) {
    if (prev != s) out.push_back({uint32_t(prev), uint32_t(s), invert});
    out.push_back({uint32_t(s), uint32_t(e), !invert});
    prev = e;
  };
  if (regex_) {
    regex_->for_each_match(text, add);
  } else if (!literal_.empty()) {
    size_t pos = 0;
    if (literal_.size() == 1) {
      const char* base = text.data();
      while (pos < text.size()) {
        const void* hit = std::memchr(base + pos, literal_[0], text.size() - pos);
        if (!hit) break;
        size_t s = size_t(static_cast<const char*>(hit) - base);
        add(s, s + 1);
        pos = s + 1;
      }
    } else {
      while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
        add(pos, pos + literal_.size());
        pos += literal_.size();
      }
    }
  }
  if (prev != text.size()) out.push_back({uint32_t(prev), uint32_t(text.size()), invert});
}

}  // namespace lathe::tokenizer
