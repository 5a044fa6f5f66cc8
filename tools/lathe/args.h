// Command-line parsing for the lathe subcommands. Each command declares its options up front (a
// CommandSpec), so the parser can tell an unknown option from a missing value wherever it appears, and
// `--help` (per command and `lathe --help`) is printed from the same table the parser reads.
// One rule for every command: switches take no value or =true/false/yes/no/1/0; numbers are read
// whole, finite and within the range the command states when it reads them.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "lathe/base/error.h"

namespace lathe::cli {

struct OptionSpec {
  std::string name;   // "--top-k"
  std::string value;  // what the value is, e.g. "K"; empty: a switch
  std::string help;   // one line, with the default
  bool repeatable = false;  // may be given several times; Args::all() returns every value, in order
};

struct CommandSpec {
  std::string name;     // "generate", "data prepare"
  std::string usage;    // what follows the name, e.g. "MODEL_DIR --prompt-ids 1,2,3 [options]"
  std::string brief;    // one line, for `lathe --help`
  std::string summary;  // a few lines
  std::vector<OptionSpec> options;  // --help is always accepted and need not be listed
};

// "usage: lathe NAME USAGE", the summary and one line per option.
std::string help_text(const CommandSpec& spec);
// The usage line and the options, indented, for `lathe --help`.
std::string help_overview(const CommandSpec& spec);

// A closed or open interval for number(); the default is every finite value.
struct Range {
  double min = -std::numeric_limits<double>::max();
  double max = std::numeric_limits<double>::max();
  bool min_open = false, max_open = false;  // (min, ...] / [..., max)
};

class Args {
 public:
  // Parses argv[first..]: positionals, `--opt VALUE` / `--opt=VALUE`, `--switch` / `--switch=BOOL`, and
  // `--help` / `-h`. Throws InvalidArgument naming the option for an unknown option (with the accepted
  // ones), a missing value, a bad switch value or an option given twice.
  static Args parse(int argc, char** argv, int first, const CommandSpec& spec);

  std::vector<std::string> positional;

  bool help() const { return help_; }
  // Whether `opt` was given; for a switch, whether it is on (`--x=no` is off).
  bool has(const std::string& opt) const;
  std::string str(const std::string& opt, const std::string& fallback) const;
  // Every value of a repeatable option, in the order given (empty when absent).
  std::vector<std::string> all(const std::string& opt) const;
  // An integer in [min, max]; "out of range" (naming the option and the range) beyond it or beyond int64.
  int64_t integer(const std::string& opt, int64_t fallback, int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max()) const;
  // A finite number in `range` (NaN and infinities are rejected).
  double number(const std::string& opt, double fallback, const Range& range = {}) const;
  // A byte count >= 0: a number with an optional unit, KiB MiB GiB TiB (or K M G T: powers of 1024) or
  // KB MB GB TB (powers of 1000), case-insensitive, e.g. 2GiB, 1.5G, 512MB, 1048576; rounded down.
  int64_t bytes(const std::string& opt, int64_t fallback) const;
  // --threads N: 0 or absent = LATHE_NUM_THREADS, else all hardware threads (a ThreadPool's 0).
  int threads() const;

 private:
  const CommandSpec* spec_ = nullptr;
  std::map<std::string, std::string> values_;  // "--x" -> value ("true"/"false" for switches)
  std::map<std::string, std::vector<std::string>> lists_;  // repeatable options: every value
  bool help_ = false;
  bool is_switch(const std::string& opt) const;
};

inline constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
inline constexpr double kFloatMax = std::numeric_limits<float>::max();

std::vector<int32_t> parse_id_list(const std::string& s);  // "1,2,3"

}  // namespace lathe::cli
