// Gemma 4's argument notation (specs/gemma4.md §6), as its chat template writes it with
// format_argument: strings between <|"|> quotes (raw text, no escapes), bare object keys, numbers and
// booleans bare, nested {} and []. Read into JSON by recursive descent.
#include "lathe/serve/frontend/marker_scan.h"
#include "lathe/serve/frontend/tool_call_scanner.h"

namespace lathe::serve::detail {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kQuote = "<|\"|>";

// JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool is_json_number(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    size_t b = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - b;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (i < s.size() && s[i] == '0') ++i;
  else if (digits() == 0) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  std::optional<Json> whole_object() {
    skip_space();
    if (!at("{")) return std::nullopt;
    std::optional<Json> v = object(1);
    skip_space();
    if (!v || i_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  bool at(std::string_view lit) const { return s_.substr(i_, lit.size()) == lit; }
  void skip_space() { i_ += leading_space(s_.substr(i_)); }

  std::optional<Json> value(int depth) {
    skip_space();
    if (depth > kMaxArgumentDepth) return std::nullopt;
    if (at(kQuote)) {
      std::optional<std::string> s = quoted();
      if (!s) return std::nullopt;
      return Json(std::move(*s));
    }
    if (at("{")) return object(depth + 1);
    if (at("[")) return array(depth + 1);
    return bare();
  }

  std::optional<std::string> quoted() {  // at kQuote
    size_t b = i_ + kQuote.size();
    size_t e = s_.find(kQuote, b);
    if (e == std::string_view::npos) return std::nullopt;
    i_ = e + kQuote.size();
    return std::string(s_.substr(b, e - b));
  }

  // Up to the next , } or ]: a number, true / false / null (and Python's True / False / None, which a
  // template printing a Python value writes), or else a word the model left unquoted, kept as a string.
  std::optional<Json> bare() {
    size_t b = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']') ++i_;
    std::string_view word = s_.substr(b, trailing_space_start(s_, i_) - b);
    if (word.empty() || word.find_first_of("{[") != std::string_view::npos ||
        word.find(kQuote) != std::string_view::npos)
      return std::nullopt;
    if (word == "true" || word == "True") return Json(true);
    if (word == "false" || word == "False") return Json(false);
    if (word == "null" || word == "None") return Json(nullptr);
    if (is_json_number(word)) {
      std::optional<Json> n = parse_json(word);
      if (n) return n;
    }
    return Json(std::string(word));
  }

  std::optional<std::string> key() {
    skip_space();
    if (at(kQuote)) return quoted();  // keys are quoted where the template escapes them
    size_t b = i_;
    while (i_ < s_.size() && s_[i_] != ':') {
      if (s_[i_] == ',' || s_[i_] == '{' || s_[i_] == '}' || s_[i_] == '[' || s_[i_] == ']') return std::nullopt;
      ++i_;
    }
    std::string_view k = s_.substr(b, trailing_space_start(s_, i_) - b);
    if (k.empty() || i_ == s_.size()) return std::nullopt;
    return std::string(k);
  }

  std::optional<Json> object(int depth) {  // at '{'
    ++i_;
    Json obj = Json::object();
    skip_space();
    if (at("}")) {
      ++i_;
      return obj;
    }
    for (;;) {
      std::optional<std::string> k = key();
      if (!k) return std::nullopt;
      skip_space();
      if (!at(":")) return std::nullopt;
      ++i_;
      std::optional<Json> v = value(depth);
      if (!v) return std::nullopt;
      obj[*k] = std::move(*v);
      skip_space();
      if (at("}")) {
        ++i_;
        return obj;
      }
      if (!at(",")) return std::nullopt;
      ++i_;
      skip_space();
      if (at("}")) {  // a trailing comma
        ++i_;
        return obj;
      }
    }
  }

  std::optional<Json> array(int depth) {  // at '['
    ++i_;
    Json arr = Json::array();
    skip_space();
    if (at("]")) {
      ++i_;
      return arr;
    }
    for (;;) {
      std::optional<Json> v = value(depth);
      if (!v) return std::nullopt;
      arr.push_back(std::move(*v));
      skip_space();
      if (at("]")) {
        ++i_;
        return arr;
      }
      if (!at(",")) return std::nullopt;
      ++i_;
      skip_space();
      if (at("]")) {
        ++i_;
        return arr;
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<nlohmann::ordered_json> parse_gemma4_object(std::string_view text) {
  return Reader(text).whole_object();
}

}  // namespace lathe::serve::detail
