// Test helper: where the fixtures are (LATHE_FIXTURES, default tests/fixtures under the source tree), the
// real tokenizers (LATHE_TOKENIZERS)
// and a scratch folder under the build tree.
#pragma once

#include <algorithm>
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

// The real tokenizer files (tokenizer.json, tokenizer_config.json per model: qwen3, llama3, ...) that
// `make setup` fetches: $LATHE_TOKENIZERS, default ~/.cache/lathe/tokenizers.
inline std::string tokenizers_root() {
  if (const char* env = std::getenv("LATHE_TOKENIZERS")) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/lathe/tokenizers";
}

// The fixture model folders (tests/fixtures/models/<name>) holding `marker` (config.json: every model;
// reference.safetensors: those with Hugging Face reference outputs), sorted by name.
inline std::vector<std::string> fixture_model_names(const std::string& marker = "config.json") {
  std::vector<std::string> names;
  const std::filesystem::path root = std::filesystem::path(fixtures_root()) / "models";
  if (std::filesystem::exists(root))
    for (const auto& d : std::filesystem::directory_iterator(root))
      if (std::filesystem::exists(d.path() / marker)) names.push_back(d.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
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
