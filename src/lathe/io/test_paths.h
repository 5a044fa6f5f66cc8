// Test helper: where the fixtures are (LATHE_FIXTURES, default tests/fixtures under the source tree)
// and a scratch folder under the build tree.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace lathe::testing {

inline std::string fixtures_root() {
  if (const char* env = std::getenv("LATHE_FIXTURES")) return env;
#ifdef LATHE_SOURCE_DIR
  return std::string(LATHE_SOURCE_DIR) + "/tests/fixtures";
#else
  return "tests/fixtures";
#endif
}

inline std::string scratch_dir(const std::string& name) {
#ifdef LATHE_BINARY_DIR
  std::filesystem::path p = std::filesystem::path(LATHE_BINARY_DIR) / "test_scratch" / name;
#else
  std::filesystem::path p = std::filesystem::temp_directory_path() / "lathe_test_scratch" / name;
#endif
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace lathe::testing
