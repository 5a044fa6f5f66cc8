#include "args.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <utility>

#include "lathe/base/context.h"
#include "lathe/base/thread_pool.h"

namespace lathe::cli {
namespace {

const OptionSpec* find_option(const CommandSpec& spec, const std::string& name) {
  for (const OptionSpec& o : spec.options)
    if (o.name == name) return &o;
  return nullptr;
}

std::string accepted_list(const CommandSpec& spec) {
  std::string list;
  for (const OptionSpec& o : spec.options) list += " " + o.name;
  return list + " --help";
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "true" / "false" for the accepted spellings of a boolean, "" for anything else.
std::string canonical_bool(const std::string& v) {
  const std::string s = lower(v);
  if (s == "true" || s == "yes" || s == "1") return "true";
  if (s == "false" || s == "no" || s == "0") return "false";
  return "";
}

std::string g(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

std::string describe(int64_t min, int64_t max) {
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  if (min == lo && max == hi) return "an integer";
  if (max == hi) return str_cat("an integer >= ", min);
  if (min == lo) return str_cat("an integer <= ", max);
  return str_cat("an integer in [", min, ", ", max, "]");
}

std::string describe(const Range& r) {
  const bool no_min = r.min == Range{}.min, no_max = r.max == Range{}.max;
  if (no_min && no_max) return "a finite number";
  if (no_max) return str_cat("a number ", r.min_open ? "> " : ">= ", g(r.min));
  if (r.max == kFloatMax && !no_min)  // a float option: no other upper bound
    return str_cat("a number ", r.min_open ? "> " : ">= ", g(r.min), " (at most ", g(r.max), ")");
  if (no_min) return str_cat("a number ", r.max_open ? "< " : "<= ", g(r.max));
  return str_cat("a number in ", r.min_open ? "(" : "[", g(r.min), ", ", g(r.max), r.max_open ? ")" : "]");
}

// strtoll / strtod accept leading white space; an option value must be the number and nothing else.
bool starts_like_number(const std::string& v) {
  return !v.empty() && !std::isspace(static_cast<unsigned char>(v[0]));
}

}  // namespace

std::string help_text(const CommandSpec& spec) {
  std::string s = "usage: lathe " + spec.name + " " + spec.usage + "\n" + spec.summary;
  if (!s.empty() && s.back() != '\n') s += '\n';
  size_t width = 6;  // "--help"
  for (const OptionSpec& o : spec.options)
    width = std::max(width, o.name.size() + (o.value.empty() ? 0 : 1 + o.value.size()));
  width = std::min<size_t>(width, 26);
  s += "options:\n";
  auto line = [&](const std::string& head, const std::string& help) {
    s += "  " + head;
    s += head.size() <= width ? std::string(width - head.size() + 2, ' ') : "\n" + std::string(width + 4, ' ');
    s += help + "\n";
  };
  for (const OptionSpec& o : spec.options) line(o.value.empty() ? o.name : o.name + " " + o.value, o.help);
  line("--help", "this help");
  return s;
}

std::string help_overview(const CommandSpec& spec) {
  std::string s = "  " + spec.name + " " + spec.usage + "\n";
  if (!spec.brief.empty()) s += "      " + spec.brief + "\n";
  for (const OptionSpec& o : spec.options) {
    const std::string head = o.value.empty() ? o.name : o.name + " " + o.value;
    s += "      " + head + std::string(head.size() < 24 ? 24 - head.size() : 1, ' ') + o.help + "\n";
  }
  return s;
}

Args Args::parse(int argc, char** argv, int first, const CommandSpec& spec) {
  Args a;
  a.spec_ = &spec;
  for (int i = first; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "-h" || s == "--help") {
      a.help_ = true;
      continue;
    }
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    const size_t eq = s.find('=');
    const std::string name = s.substr(0, eq);
    const OptionSpec* o = find_option(spec, name);
    if (!o)
      throw InvalidArgument(str_cat("unknown option ", name, " (accepted:", accepted_list(spec), ")"));
    // Given again, the last value wins (as argparse and llama.cpp do), so scripts can append overrides.
    if (o->value.empty()) {  // a switch
      std::string v = "true";
      if (eq != std::string::npos) {
        v = canonical_bool(s.substr(eq + 1));
        LATHE_CHECK_ARG(!v.empty(), "option ", name,
                        " is a switch: give it alone or as =true/false/yes/no/1/0, got '", s.substr(eq + 1), "'");
      }
      a.values_[name] = v;
    } else if (eq != std::string::npos) {
      a.values_[name] = s.substr(eq + 1);
      if (o->repeatable) a.lists_[name].push_back(a.values_[name]);
    } else {
      LATHE_CHECK_ARG(i + 1 < argc, "option ", name, " needs a value (", o->value, ")");
      const std::string v = argv[i + 1];
      LATHE_CHECK_ARG(v.rfind("--", 0) != 0, "option ", name, " needs a value (", o->value, "), got option ",
                      v, " (write ", name, "=VALUE for a value that starts with --)");
      a.values_[name] = v;
      if (o->repeatable) a.lists_[name].push_back(v);
      ++i;
    }
  }
  return a;
}

bool Args::is_switch(const std::string& opt) const {
  const OptionSpec* o = find_option(*spec_, opt);
  LATHE_ASSERT(o, "lathe ", spec_->name, " reads option ", opt, " that its spec does not declare");
  return o->value.empty();
}

bool Args::has(const std::string& opt) const {
  auto it = values_.find(opt);
  if (is_switch(opt)) return it != values_.end() && it->second == "true";
  return it != values_.end();
}

std::string Args::str(const std::string& opt, const std::string& fallback) const {
  is_switch(opt);  // declared
  auto it = values_.find(opt);
  return it == values_.end() ? fallback : it->second;
}

std::vector<std::string> Args::all(const std::string& opt) const {
  is_switch(opt);  // declared
  auto it = lists_.find(opt);
  return it == lists_.end() ? std::vector<std::string>() : it->second;
}

int64_t Args::integer(const std::string& opt, int64_t fallback, int64_t min, int64_t max) const {
  if (!has(opt)) return fallback;
  const std::string& v = values_.at(opt);
  char* end = nullptr;
  errno = 0;
  const long long x = starts_like_number(v) ? std::strtoll(v.c_str(), &end, 10) : 0;
  LATHE_CHECK_ARG(starts_like_number(v) && end && *end == '\0', "option ", opt, " expects ", describe(min, max),
                  ", got '", v, "'");
  LATHE_CHECK_ARG(errno != ERANGE && x >= min && x <= max, "option ", opt, ": ", v,
                  " is out of range (accepted: ", describe(min, max), ")");
  return x;
}

double Args::number(const std::string& opt, double fallback, const Range& range) const {
  if (!has(opt)) return fallback;
  const std::string& v = values_.at(opt);
  char* end = nullptr;
  errno = 0;
  const double x = starts_like_number(v) ? std::strtod(v.c_str(), &end) : 0;
  LATHE_CHECK_ARG(starts_like_number(v) && end && *end == '\0', "option ", opt, " expects ", describe(range),
                  ", got '", v, "'");
  // Overflow gives ERANGE and ±HUGE_VAL; an underflow (1e-400) also sets ERANGE but reads as 0 or a
  // denormal, which is the value meant.
  const bool overflow = errno == ERANGE && std::isinf(x);
  LATHE_CHECK_ARG(overflow || std::isfinite(x), "option ", opt, " expects a finite number, got '", v, "' (accepted: ",
                  describe(range), ")");
  const bool above_min = range.min_open ? x > range.min : x >= range.min;
  const bool below_max = range.max_open ? x < range.max : x <= range.max;
  LATHE_CHECK_ARG(!overflow && above_min && below_max, "option ", opt, ": ", v, " is out of range (accepted: ",
                  describe(range), ")");
  return x;
}

int64_t Args::bytes(const std::string& opt, int64_t fallback) const {
  if (!has(opt)) return fallback;
  const std::string& v = values_.at(opt);
  const std::string expects = "a byte count such as 2GiB, 512MiB, 1.5G, 500MB or 1048576";
  char* end = nullptr;
  errno = 0;
  const double x = starts_like_number(v) ? std::strtod(v.c_str(), &end) : -1;
  LATHE_CHECK_ARG(starts_like_number(v) && end && end != v.c_str() && std::isfinite(x) && errno != ERANGE && x >= 0,
                  "option ", opt, " expects ", expects, ", got '", v, "'");
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},        {"b", 1},         {"k", 0x1p10}, {"kib", 0x1p10}, {"m", 0x1p20}, {"mib", 0x1p20}, {"g", 0x1p30},
      {"gib", 0x1p30}, {"t", 0x1p40},    {"tib", 0x1p40}, {"kb", 1e3},     {"mb", 1e6},   {"gb", 1e9},     {"tb", 1e12}};
  const std::string unit = lower(end);
  const auto it = std::find_if(std::begin(kUnits), std::end(kUnits), [&](const auto& u) { return unit == u.first; });
  LATHE_CHECK_ARG(it != std::end(kUnits), "option ", opt, " expects ", expects, ", got '", v, "' (unknown unit '", end, "')");
  const double n = std::floor(x * it->second);
  LATHE_CHECK_ARG(n < 0x1p63, "option ", opt, ": ", v, " is out of range (at most 2^63 - 1 bytes)");
  return static_cast<int64_t>(n);
}

int Args::threads() const {
  const int64_t n = integer("--threads", 0, 0, kMaxThreadCount);
  return resolve_thread_count(static_cast<int>(n));
}

std::vector<int32_t> parse_id_list(const std::string& s) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    errno = 0;
    const long v = starts_like_number(tok) ? std::strtol(tok.c_str(), &end, 10) : -1;
    LATHE_CHECK_ARG(starts_like_number(tok) && end && *end == '\0' && errno != ERANGE && v >= 0 && v <= kIntMax,
                    "token id list: '", tok, "' is not a non-negative integer (expected e.g. 1,2,3)");
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

}  // namespace lathe::cli
