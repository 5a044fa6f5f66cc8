// libFuzzer target: any byte string as a training recipe (YAML) goes through recipe loading and the
// validation of every key, and either yields a TrainConfig or a lathe::Error: never a crash, a hang, an
// exception of another type (a raw yaml-cpp / nlohmann / std::stoll error), or memory blown up by
// aliases. The bytes up to the first NUL are the YAML; the NUL-separated rest are key=value overrides.
// An accepted recipe must also survive the round trip through the YAML the run folder saves
// (json_to_yaml of TrainConfig::resolved parses back to the same tree).
// Build: cmake --preset fuzz && cmake --build --preset fuzz --target recipe_fuzz
// Run:   build/fuzz/recipe_fuzz -max_total_time=600 -rss_limit_mb=1024 CORPUS_DIR
//        (tests/fuzz/make_seeds.sh writes the shipped recipes as seeds into OUT/recipe).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/train/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const size_t nul = bytes.find('\0');
  const std::string yaml = bytes.substr(0, nul);
  std::vector<std::string> overrides;
  for (size_t start = nul; start != std::string::npos && start < bytes.size();) {
    const size_t next = bytes.find('\0', start + 1);
    overrides.push_back(bytes.substr(start + 1, next == std::string::npos ? std::string::npos : next - start - 1));
    start = next;
  }
  lathe::train::TrainConfig c;
  try {
    c = lathe::train::parse_recipe(yaml, overrides, "fuzz");
  } catch (const lathe::Error&) {
    return 0;  // rejected with a message: fine
  }
  try {
    const std::string saved = lathe::train::json_to_yaml(c.resolved);
    if (lathe::train::parse_recipe(saved, {}, "fuzz").resolved != c.resolved) std::abort();
  } catch (const lathe::Error&) {
    std::abort();  // the saved recipe of an accepted one must load
  }
  return 0;
}
