// Minimal command-line parsing for the lathe subcommands: positionals plus --flag value / --flag=value.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lathe/base/error.h"

namespace lathe::cli {

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;  // "--x" -> value ("" for switches)

  // `switches` are flags that take no value.
  static Args parse(int argc, char** argv, int first, const std::vector<std::string>& switches);
  bool has(const std::string& f) const { return flags.count(f) != 0; }
  std::string str(const std::string& f, const std::string& fallback) const;
  double num(const std::string& f, double fallback) const;
  long long integer(const std::string& f, long long fallback) const;
  // Rejects flags outside `known` with the list of accepted ones.
  void check_known(const std::vector<std::string>& known, const char* command) const;
};

std::vector<int32_t> parse_id_list(const std::string& s);  // "1,2,3"

}  // namespace lathe::cli
