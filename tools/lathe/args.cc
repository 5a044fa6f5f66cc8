#include "args.h"

#include <algorithm>
#include <cstdlib>

namespace lathe::cli {

Args Args::parse(int argc, char** argv, int first, const std::vector<std::string>& switches) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    const size_t eq = s.find('=');
    if (eq != std::string::npos) {
      a.flags[s.substr(0, eq)] = s.substr(eq + 1);
    } else if (std::find(switches.begin(), switches.end(), s) != switches.end()) {
      a.flags[s] = "";
    } else {
      LATHE_CHECK_ARG(i + 1 < argc, "option ", s, " needs a value");
      a.flags[s] = argv[++i];
    }
  }
  return a;
}

std::string Args::str(const std::string& f, const std::string& fallback) const {
  auto it = flags.find(f);
  return it == flags.end() ? fallback : it->second;
}

double Args::num(const std::string& f, double fallback) const {
  auto it = flags.find(f);
  if (it == flags.end()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  LATHE_CHECK_ARG(end && *end == '\0' && !it->second.empty(), "option ", f, " expects a number, got '", it->second, "'");
  return v;
}

long long Args::integer(const std::string& f, long long fallback) const {
  auto it = flags.find(f);
  if (it == flags.end()) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  LATHE_CHECK_ARG(end && *end == '\0' && !it->second.empty(), "option ", f, " expects an integer, got '", it->second, "'");
  return v;
}

void Args::check_known(const std::vector<std::string>& known, const char* command) const {
  for (auto& [f, _] : flags) {
    if (std::find(known.begin(), known.end(), f) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += " " + k;
    throw InvalidArgument(str_cat("lathe ", command, ": unknown option ", f, " (accepted:", list, ")"));
  }
}

std::vector<int32_t> parse_id_list(const std::string& s) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    const long v = std::strtol(tok.c_str(), &end, 10);
    LATHE_CHECK_ARG(!tok.empty() && end && *end == '\0' && v >= 0 && v <= 0x7fffffff, "token id list: '", tok,
                    "' is not a non-negative integer (expected e.g. 1,2,3)");
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

}  // namespace lathe::cli
