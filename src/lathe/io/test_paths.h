// Test helper: where the fixtures are (LATHE_FIXTURES, default tests/fixtures under the source tree)
// and a scratch folder under the build tree.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace lathe::testing {

inline std::string fixtures_root() {
  if (const char* env = std::getenv("LATHE_FIXTURES")) return env;
#ifdef LATHE_SOURCE_DIR
  return std::string(LATHE_SOURCE_DIR) + "/tests/fixtures";
#else
  return "tests/fixtures";
#endif
}

// A fresh, empty folder. Named per process: CTest runs tests in parallel processes, and tests of one
// fixture share a name.
inline std::string scratch_dir(const std::string& name) {
  const std::string leaf = name + "." + std::to_string(::getpid());
#ifdef LATHE_BINARY_DIR
  std::filesystem::path p = std::filesystem::path(LATHE_BINARY_DIR) / "test_scratch" / leaf;
#else
  std::filesystem::path p = std::filesystem::temp_directory_path() / "lathe_test_scratch" / leaf;
#endif
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  // Removed again when the test process exits (a failing test's files are gone too: rerun it alone
  // with LATHE_KEEP_SCRATCH=1 to inspect them).
  struct Cleanup {
    std::vector<std::filesystem::path> dirs;
    ~Cleanup() {
      if (std::getenv("LATHE_KEEP_SCRATCH")) return;
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Cleanup cleanup;
  cleanup.dirs.push_back(p);
  return p.string();
}

}  // namespace lathe::testing
