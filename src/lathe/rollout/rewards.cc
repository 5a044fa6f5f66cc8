#include "lathe/rollout/rewards.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>

#include "lathe/base/error.h"
#include "lathe/rollout/tool_call_match.h"

namespace lathe::rollout {

namespace {

constexpr const char* kKinds[] = {"format", "answer_exact", "answer_numeric", "tool_call", "length", "command"};
static_assert(std::size(kKinds) == static_cast<size_t>(RewardKind::kCount));
constexpr double kNa = std::numeric_limits<double>::quiet_NaN();

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The captured text: the first group of the pattern's first match (the whole match without a group), or the
// whole text without a pattern; nullopt when the pattern does not match.
std::optional<std::string> extract(const RewardSpec& r, const std::string& text) {
  if (!r.re) return text;
  std::smatch m;
  if (!std::regex_search(text, m, *r.re)) return std::nullopt;
  return m.size() > 1 && m[1].matched ? m[1].str() : m[0].str();
}

// The last number in `s` (optional sign, digits, decimals; thousands separators dropped).
std::optional<double> last_number(const std::string& s) {
  static const std::regex kNumber(R"([-+]?(\d[\d,]*)?\.?\d+(?:[eE][-+]?\d+)?)");
  std::optional<double> out;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kNumber); it != std::sregex_iterator(); ++it) {
    std::string t = it->str();
    std::erase(t, ',');
    try {
      out = std::stod(t);
    } catch (const std::exception&) {
    }
  }
  return out;
}

std::optional<double> answer_number(const nlohmann::ordered_json& a) {
  if (a.is_number()) return a.get<double>();
  if (a.is_string()) return last_number(a.get<std::string>());
  return std::nullopt;
}

// The keys an entry of each kind may have besides type, name and weight.
const std::set<std::string>& kind_keys(RewardKind k) {
  static const std::set<std::string> kKeys[] = {{"pattern"},
                                                {"pattern", "column"},
                                                {"pattern", "column", "tolerance"},
                                                {"column", "parser", "partial"},
                                                {"target"},
                                                {"command", "timeout"}};
  static_assert(std::size(kKeys) == static_cast<size_t>(RewardKind::kCount));
  return kKeys[static_cast<size_t>(k)];
}

}  // namespace

std::vector<RewardSpec> parse_reward_specs(const nlohmann::json& list, const std::string& where,
                                           int64_t max_completion_length) {
  LATHE_CHECK_ARG(list.is_array() && !list.empty(), where, ": grpo.rewards = ", list.dump(),
                  ": expected a list of reward functions, e.g. [{type: format, pattern: '<answer>'}]");
  std::vector<RewardSpec> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& e = list[i];
    const std::string at = str_cat(where, ": grpo.rewards[", i, "]");
    LATHE_CHECK_ARG(e.is_object(), at, " = ", e.dump(), ": expected a mapping {type, name, weight, ...}");
    RewardSpec r;
    const std::string type = e.contains("type") && e["type"].is_string() ? e["type"].get<std::string>() : "";
    r.kind = RewardKind::kCount;
    for (size_t k = 0; k < std::size(kKinds); ++k)
      if (type == kKinds[k]) r.kind = static_cast<RewardKind>(k);
    LATHE_CHECK_ARG(r.kind != RewardKind::kCount, at, ".type = ", e.contains("type") ? e["type"].dump() : "(none)",
                    ": must be format, answer_exact, answer_numeric, tool_call, length or command");
    const std::set<std::string>& allowed = kind_keys(r.kind);
    std::string keys = "type, name, weight";
    for (const std::string& k : allowed) keys += ", " + k;
    for (auto it = e.begin(); it != e.end(); ++it)
      LATHE_CHECK_ARG(it.key() == "type" || it.key() == "name" || it.key() == "weight" || allowed.contains(it.key()),
                      at, ": unknown key ", it.key(), " for a ", type, " reward (", keys, ")");
    LATHE_CHECK_ARG(!e.contains("name") || e["name"].is_string(), at, ".name = ", e.value("name", nlohmann::json()).dump(),
                    ": expected a string");
    r.name = e.value("name", type);
    LATHE_CHECK_ARG(names.insert(r.name).second, at, ".name = \"", r.name, "\": two rewards of one name");
    if (e.contains("weight")) {
      LATHE_CHECK_ARG(e["weight"].is_number() && std::isfinite(e["weight"].get<double>()), at, ".weight = ",
                      e["weight"].dump(), ": expected a number");
      r.weight = e["weight"].get<double>();
    }
    LATHE_CHECK_ARG(!e.contains("pattern") || e["pattern"].is_string(), at, ".pattern: expected a string");
    r.pattern = e.value("pattern", "");
    LATHE_CHECK_ARG(r.kind != RewardKind::kFormat || !r.pattern.empty(), at,
                    ".pattern: a format reward needs the regex its completions must match");
    if (!r.pattern.empty()) {
      try {
        r.re.emplace(r.pattern, std::regex::ECMAScript);
      } catch (const std::regex_error& err) {
        throw InvalidArgument(str_cat(at, ".pattern = \"", r.pattern, "\": not a regex (", err.what(), ")"));
      }
    }
    if (r.kind == RewardKind::kToolCall) r.column = "tool_call";
    if (e.contains("column")) {
      LATHE_CHECK_ARG(e["column"].is_string() && !e["column"].get<std::string>().empty(), at, ".column = ",
                      e["column"].dump(), ": expected the name of a dataset column");
      r.column = e["column"].get<std::string>();
    }
    if (e.contains("tolerance")) {
      LATHE_CHECK_ARG(e["tolerance"].is_number() && e["tolerance"].get<double>() >= 0, at, ".tolerance = ",
                      e["tolerance"].dump(), ": a number >= 0");
      r.tolerance = e["tolerance"].get<double>();
    }
    if (e.contains("parser")) {
      LATHE_CHECK_ARG(e["parser"].is_string(), at, ".parser = ", e["parser"].dump(), ": expected a syntax name");
      r.tool_call_format = tool_call_format_to_match(e["parser"].get<std::string>(), at + ".parser");
    }
    if (e.contains("partial")) {
      LATHE_CHECK_ARG(e["partial"].is_boolean(), at, ".partial = ", e["partial"].dump(), ": expected true or false");
      r.partial = e["partial"].get<bool>();
    }
    if (e.contains("target")) {
      LATHE_CHECK_ARG(e["target"].is_number_integer() && e["target"].get<int64_t>() >= 0 &&
                          e["target"].get<int64_t>() < max_completion_length,
                      at, ".target = ", e["target"].dump(), ": tokens in [0, grpo.max_completion_length ",
                      max_completion_length, ")");
      r.target = e["target"].get<int64_t>();
    }
    if (r.kind == RewardKind::kCommand) {
      const nlohmann::json c = e.value("command", nlohmann::json());
      bool ok = c.is_array() && !c.empty();
      for (const nlohmann::json& a : c) ok = ok && a.is_string() && !a.get<std::string>().empty();
      LATHE_CHECK_ARG(ok, at, ".command = ", c.dump(),
                      ": expected the program and its arguments, e.g. [python3, score.py] (docs/recipes.md)");
      for (const nlohmann::json& a : c) r.command.push_back(a.get<std::string>());
    }
    if (e.contains("timeout")) {
      LATHE_CHECK_ARG(e["timeout"].is_number() && e["timeout"].get<double>() > 0, at, ".timeout = ",
                      e["timeout"].dump(), ": seconds, a number > 0");
      r.timeout = e["timeout"].get<double>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<double> reward_weights(const std::vector<RewardSpec>& specs) {
  bool any = false;
  std::vector<double> w;
  for (const RewardSpec& r : specs) {
    any |= r.weight.has_value();
    w.push_back(r.weight.value_or(1.0));
  }
  return any ? w : std::vector<double>{};
}

double reward_value(const RewardSpec& r, const RewardInput& in) {
  switch (r.kind) {
    case RewardKind::kFormat:
      return std::regex_search(in.completion, *r.re) ? 1.0 : 0.0;
    case RewardKind::kLength: {
      const auto over = static_cast<double>(std::max<int64_t>(0, in.completion_tokens - r.target));
      return -std::min(1.0, over / static_cast<double>(std::max<int64_t>(1, in.max_completion_tokens - r.target)));
    }
    case RewardKind::kAnswerExact:
    case RewardKind::kAnswerNumeric:
    case RewardKind::kToolCall:
      break;
    case RewardKind::kCommand:
    case RewardKind::kCount:
      LATHE_ASSERT(false, "reward_value: ", kKinds[std::min<size_t>(static_cast<size_t>(r.kind), std::size(kKinds) - 1)],
                   " rewards are scored by RewardSet");
  }
  const bool has = in.columns != nullptr && in.columns->contains(r.column) && !(*in.columns)[r.column].is_null();
  if (!has) return kNa;  // no answer for this row: not applicable
  const nlohmann::ordered_json& answer = (*in.columns)[r.column];
  if (r.kind == RewardKind::kToolCall) {
    const ToolCallMatch m = match_tool_calls(parse_tool_calls(in.completion_raw.empty() ? in.completion : in.completion_raw, r.tool_call_format),
                                             expected_tool_calls(answer, str_cat("reward ", r.name, ": column ", r.column)));
    return r.partial ? m.fraction() : (m.exact() ? 1.0 : 0.0);
  }
  const std::optional<std::string> got = extract(r, in.completion);
  if (r.kind == RewardKind::kAnswerExact) {
    const std::string want = answer.is_string() ? answer.get<std::string>() : answer.dump();
    return got && trim(*got) == trim(want) ? 1.0 : 0.0;
  }
  const std::optional<double> want = answer_number(answer);
  if (!want) return kNa;
  const std::optional<double> x = got ? last_number(*got) : std::nullopt;
  return x && std::fabs(*x - *want) <= r.tolerance * std::max(1.0, std::fabs(*want)) ? 1.0 : 0.0;
}

}  // namespace lathe::rollout
