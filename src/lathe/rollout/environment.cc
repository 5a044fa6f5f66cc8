#include "lathe/rollout/environment.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <thread>

#include "lathe/base/error.h"
#include "lathe/rollout/json_lines_process.h"

namespace lathe::rollout {

using nlohmann::json;

namespace {

// "<where>: grpo.environment.<key> = <v>: <rule>"
[[noreturn]] void bad(const std::string& where, const char* key, const json& v, const std::string& rule) {
  throw InvalidArgument(str_cat(where, ": grpo.environment.", key, " = ", v.dump(), ": ", rule));
}

// Recursive descent over expr := term (± term)*, term := factor (×÷ factor)*, factor := ±factor | number | (expr).
class Calculator {
 public:
  explicit Calculator(const std::string& s) : s_(s) {}
  double run() {
    const double v = expr();
    skip();
    if (i_ != s_.size()) fail(str_cat("unexpected '", s_[i_], "' at character ", i_ + 1));
    return v;
  }

 struct Failure {
    std::string what;
  };

 private:
  [[noreturn]] static void fail(std::string what) { throw Failure{std::move(what)}; }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  double expr() {
    double v = term();
    for (;;) {
      if (eat('+')) v += term();
      else if (eat('-')) v -= term();
      else return v;
    }
  }
  double term() {
    double v = factor();
    for (;;) {
      if (eat('*')) {
        v *= factor();
      } else if (eat('/')) {
        const double d = factor();
        if (d == 0) fail("division by zero");
        v /= d;
      } else {
        return v;
      }
    }
  }
  double factor() {
    if (++depth_ > 200) fail("too deeply nested");
    double v;
    if (eat('-')) v = -factor();
    else if (eat('+')) v = factor();
    else if (eat('(')) {
      v = expr();
      if (!eat(')')) fail("missing ')'");
    } else {
      skip();
      const size_t start = i_;
      while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.')) ++i_;
      if (start == i_) fail(i_ < s_.size() ? str_cat("unexpected '", s_[i_], "' at character ", i_ + 1) : "unexpected end");
      try {
        size_t used = 0;
        v = std::stod(s_.substr(start, i_ - start), &used);
        if (used != i_ - start) fail(str_cat("bad number ", s_.substr(start, i_ - start)));
      } catch (const std::logic_error&) {
        fail(str_cat("bad number ", s_.substr(start, i_ - start)));
      }
    }
    --depth_;
    return v;
  }
  const std::string& s_;
  size_t i_ = 0;
  int depth_ = 0;
};

class BuiltinEnvironment final : public Environment {
 public:
  explicit BuiltinEnvironment(const EnvironmentSpec& s)
      : name_("grpo.environment builtin " + s.builtin), builtin_(s.builtin), delay_(s.delay_ms) {}
  const std::string& name() const override { return name_; }
  ToolResult call(const ToolRequest& c, int) override {
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (builtin_ == "echo") return {.content = c.call.is_null() ? c.text : c.call.value("arguments", json()).dump()};
    // calculator
    const char* usage = R"x(error: call the calculator as {"name": "calculator", "arguments": {"expression": "2 * (3 + 4)"}})x";
    if (!c.call.is_object() || c.call.value("name", json()) != "calculator" || !c.call.contains("arguments") ||
        !c.call["arguments"].is_object() || !c.call["arguments"].value("expression", json()).is_string())
      return {.content = usage};
    return {.content = calculate(c.call["arguments"]["expression"].get<std::string>())};
  }

 private:
  std::string name_, builtin_;
  std::chrono::milliseconds delay_;
};

class CommandEnvironment final : public Environment {
 public:
  explicit CommandEnvironment(const EnvironmentSpec& s) : argv_(s.command), timeout_(s.timeout) {
    std::string shown;
    for (const std::string& a : argv_) shown += (shown.empty() ? "" : " ") + a;
    name_ = "grpo.environment command `" + shown + "`";
    processes_.resize(static_cast<size_t>(s.workers));
  }
  const std::string& name() const override { return name_; }
  ToolResult call(const ToolRequest& c, int worker) override {
    std::unique_ptr<JsonLinesProcess>& p = processes_.at(static_cast<size_t>(worker));
    if (!p) p = std::make_unique<JsonLinesProcess>(argv_, name_);  // started on first use, then kept
    const json request = {{"episode", c.episode}, {"prompt_index", c.prompt_index}, {"turn", c.turn},
                          {"text", c.text},       {"tool_call", c.call}};
    json reply;
    try {
      reply = p->call(request, timeout_);
    } catch (const EnvironmentError&) {
      p.reset();  // a failed process is not asked again; the next call starts a fresh one
      throw;
    }
    if (!reply.contains("content") || !reply["content"].is_string() ||
        (reply.contains("done") && !reply["done"].is_boolean()))
      throw EnvironmentError(str_cat(name_, " answered ", reply.dump().substr(0, 200),
                                     ": expected {\"content\": \"<text>\", \"done\": false}"));
    return {.content = reply["content"].get<std::string>(), .done = reply.value("done", false)};
  }

 private:
  std::vector<std::string> argv_;
  std::chrono::milliseconds timeout_;
  std::string name_;
  std::vector<std::unique_ptr<JsonLinesProcess>> processes_;  // [workers]: worker w's only
};

}  // namespace

std::string calculate(const std::string& expression) {
  try {
    const double v = Calculator(expression).run();
    if (!std::isfinite(v)) return "error: the result is not finite";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.12g", v);
    return buf;
  } catch (const Calculator::Failure& f) {
    return "error: " + f.what;
  }
}

EnvironmentSpec parse_environment_spec(const json& section, const std::string& where) {
  if (!section.is_object())
    throw InvalidArgument(str_cat(where, ": grpo.environment = ", section.dump(),
                                  ": expected a mapping {type: builtin | command, ...}"));
  static const std::set<std::string> known = {"type", "builtin", "delay_ms", "command", "timeout_s", "max_turns",
                                              "workers", "tool_call_start", "tool_call_end"};
  for (auto it = section.begin(); it != section.end(); ++it)
    if (!known.count(it.key()))
      throw InvalidArgument(str_cat(where, ": unknown key grpo.environment.", it.key(),
                                    " (docs/recipes.md lists every key)"));
  EnvironmentSpec s;
  const auto str = [&](const char* key, std::string& out) {
    if (!section.contains(key)) return;
    if (!section[key].is_string()) bad(where, key, section[key], "expected a string");
    out = section[key].get<std::string>();
  };
  const auto integer = [&](const char* key, int64_t& out, int64_t lo, const std::string& rule) {
    if (!section.contains(key)) return;
    if (!section[key].is_number_integer() || section[key].get<int64_t>() < lo) bad(where, key, section[key], rule);
    out = section[key].get<int64_t>();
  };
  std::string type;
  str("type", type);
  if (type == "builtin") s.kind = EnvironmentKind::kBuiltin;
  else if (type == "command") s.kind = EnvironmentKind::kCommand;
  else bad(where, "type", section.value("type", json()), "must be builtin or command");
  if (s.kind == EnvironmentKind::kBuiltin) {
    str("builtin", s.builtin);
    if (s.builtin != "calculator" && s.builtin != "echo")
      bad(where, "builtin", section.value("builtin", json()), "must be calculator or echo (with type: builtin)");
    integer("delay_ms", s.delay_ms, 0, "expected an integer >= 0");
    if (section.contains("command")) bad(where, "command", section["command"], "only with type: command");
  } else {
    const json c = section.value("command", json());
    if (!c.is_array() || c.empty()) bad(where, "command", c, "expected the program and its arguments, a list of strings");
    for (const json& a : c) {
      if (!a.is_string() || a.get<std::string>().empty()) bad(where, "command", c, "expected a list of non-empty strings");
      s.command.push_back(a.get<std::string>());
    }
    if (section.contains("builtin")) bad(where, "builtin", section["builtin"], "only with type: builtin");
    if (section.contains("delay_ms")) bad(where, "delay_ms", section["delay_ms"], "only with type: builtin");
  }
  if (section.contains("timeout_s")) {
    const json& t = section["timeout_s"];
    if (!t.is_number() || !(t.get<double>() > 0) || t.get<double>() > 86400)
      bad(where, "timeout_s", t, "expected seconds in (0, 86400]");
    s.timeout = std::chrono::milliseconds(std::max<int64_t>(1, std::llround(t.get<double>() * 1000)));
  }
  integer("max_turns", s.max_turns, 1, "expected an integer >= 1");
  integer("workers", s.workers, 1, "expected an integer >= 1");
  str("tool_call_start", s.tool_call_start);
  str("tool_call_end", s.tool_call_end);
  if (s.tool_call_end.empty()) bad(where, "tool_call_end", s.tool_call_end, "must not be empty (a turn ends there)");
  return s;
}

json environment_spec_json(const EnvironmentSpec& s) {
  json j;
  if (s.kind == EnvironmentKind::kBuiltin) {
    j["type"] = "builtin";
    j["builtin"] = s.builtin;
    j["delay_ms"] = s.delay_ms;
  } else {
    j["type"] = "command";
    j["command"] = s.command;
    j["timeout_s"] = static_cast<double>(s.timeout.count()) / 1000.0;
  }
  j["max_turns"] = s.max_turns;
  j["workers"] = s.workers;
  j["tool_call_start"] = s.tool_call_start;
  j["tool_call_end"] = s.tool_call_end;
  return j;
}

std::unique_ptr<Environment> make_environment(const EnvironmentSpec& s) {
  if (s.kind == EnvironmentKind::kCommand) return std::make_unique<CommandEnvironment>(s);
  return std::make_unique<BuiltinEnvironment>(s);
}

}  // namespace lathe::rollout
