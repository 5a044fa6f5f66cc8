// YAML <-> JSON for recipes (recipe.h). The JSON is built from yaml-cpp's parser events, not from a
// YAML::Node tree: an alias is refused where it appears (expanding nested aliases is the "billion laughs"
// blow-up: 1 KB of YAML, gigabytes of tree), a repeated key is an error naming the key and its line, and
// the result is never larger than the text. yaml-cpp bounds the nesting depth itself (DeepRecursion).
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/io/tokenizer/unicode.h"
#include "lathe/train/recipe.h"

namespace lathe::train {

using nlohmann::json;

namespace {

// A plain scalar typed as YAML 1.2 core (int, float, bool, null, else string); quoted: always a string.
json scalar_to_json(const std::string& s, const std::string& tag, const std::string& where, const YAML::Mark& m) {
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return s;
  static const std::regex int_re(R"([-+]?[0-9]+)");
  static const std::regex float_re(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "null" || s == "Null" || s == "NULL" || s == "~" || s.empty()) return nullptr;
  if (std::regex_match(s, int_re)) {
    errno = 0;
    const long long v = std::strtoll(s.c_str(), nullptr, 10);
    LATHE_CHECK_FORMAT(errno != ERANGE, where, ": line ", m.line + 1, ": integer ", s,
                       " is out of range (at most 2^63 - 1 in magnitude)");
    return v;
  }
  if (std::regex_match(s, float_re)) {
    const double v = std::strtod(s.c_str(), nullptr);
    LATHE_CHECK_FORMAT(std::isfinite(v), where, ": line ", m.line + 1, ": number ", s, " is out of range");
    return v;
  }
  return s;
}

// Builds one JSON value from the events of one YAML document.
class JsonBuilder : public YAML::EventHandler {
 public:
  explicit JsonBuilder(std::string where) : where_(std::move(where)) {}
  json take() { return std::move(root_); }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override {
    if (expecting_key()) fail(m, "a mapping key is empty (null)");
    add(nullptr);
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    fail(m, "YAML aliases (*name) are not supported in recipes; write the value out, or share settings with "
            "base_recipe");
  }
  void OnScalar(const YAML::Mark& m, const std::string& tag, YAML::anchor_t, const std::string& value) override {
    // The text is checked up front; an escape such as "\ud800" (a lone surrogate) can still yield bytes
    // that are not UTF-8, which no JSON consumer of the recipe accepts.
    if (tokenizer::utf8_valid_prefix(value) != value.size()) fail(m, "the value is not valid UTF-8");
    if (expecting_key()) {
      if (const std::string why = recipe_key_problem(value); !why.empty()) fail(m, why);
      Frame& f = stack_.back();
      if (f.value.contains(value))
        fail(m, str_cat("duplicate key '", value, "' (first at line ", f.key_lines.at(value), ")"));
      f.key = value;
      f.key_lines[value] = m.line + 1;
      f.have_key = true;
      return;
    }
    add(scalar_to_json(value, tag, where_, m));
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(json::array(), m);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(json::object(), m);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    json value;                               // the array or object being filled
    std::string key;                          // objects: the key waiting for its value
    bool have_key = false;
    std::map<std::string, int> key_lines;     // objects: line of each key (duplicate-key messages)
  };

  [[noreturn]] void fail(const YAML::Mark& m, const std::string& msg) const {
    throw FormatError(str_cat(where_, ": line ", m.line + 1, ", column ", m.column + 1, ": ", msg));
  }
  bool expecting_key() const {
    return !stack_.empty() && stack_.back().value.is_object() && !stack_.back().have_key;
  }
  void open(json container, const YAML::Mark& m) {
    if (expecting_key()) fail(m, "a mapping key must be a plain string, not a list or mapping");
    stack_.push_back({std::move(container), {}, false, {}});
  }
  void close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    add(std::move(f.value));
  }
  void add(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return;
    }
    Frame& f = stack_.back();
    if (f.value.is_array()) {
      f.value.push_back(std::move(v));
    } else {
      f.value[f.key] = std::move(v);
      f.have_key = false;
    }
  }

  std::string where_;
  std::vector<Frame> stack_;
  json root_;
};

class IgnoreEvents : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

void emit(YAML::Emitter& e, const json& j) {
  if (j.is_object()) {
    e << YAML::BeginMap;
    for (auto it = j.begin(); it != j.end(); ++it) {
      e << YAML::Key << it.key() << YAML::Value;
      emit(e, it.value());
    }
    e << YAML::EndMap;
  } else if (j.is_array()) {
    e << YAML::Flow << YAML::BeginSeq;
    for (const auto& v : j) emit(e, v);
    e << YAML::EndSeq;
  } else if (j.is_string()) {
    e << YAML::DoubleQuoted << j.get<std::string>();
  } else if (j.is_null()) {
    e << YAML::Null;
  } else {
    e << j.dump();  // numbers and booleans exactly as JSON writes them (round-trips doubles)
  }
}

}  // namespace

std::string recipe_key_problem(const std::string& key) {
  if (key.size() > kMaxRecipeKeyBytes)
    return str_cat("a key is ", key.size(), " bytes long (at most ", kMaxRecipeKeyBytes, ")");
  for (unsigned char c : key)
    if (c < 0x20 || c == 0x7f) return str_cat("the key '", key.substr(0, 40), "' holds a control character");
  return "";
}

json yaml_to_json(const std::string& yaml_text, const std::string& where) {
  const size_t valid = tokenizer::utf8_valid_prefix(yaml_text);
  if (valid != yaml_text.size()) {
    const size_t line = 1 + static_cast<size_t>(std::count(yaml_text.begin(), yaml_text.begin() + valid, '\n'));
    throw FormatError(str_cat(where, ": line ", line, ": not valid UTF-8 (at byte offset ", valid, ")"));
  }
  std::istringstream in(yaml_text);
  try {
    YAML::Parser parser(in);
    JsonBuilder builder(where);
    if (!parser.HandleNextDocument(builder)) return nullptr;
    IgnoreEvents rest;
    LATHE_CHECK_FORMAT(!parser.HandleNextDocument(rest), where,
                       ": holds more than one YAML document (a recipe is one mapping)");
    return builder.take();
  } catch (const YAML::Exception& e) {
    throw FormatError(str_cat(where, ": invalid YAML at line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ",
                              e.msg));
  }
}

std::string json_to_yaml(const json& j) {
  YAML::Emitter e;
  emit(e, j);
  return std::string(e.c_str()) + "\n";
}

}  // namespace lathe::train
