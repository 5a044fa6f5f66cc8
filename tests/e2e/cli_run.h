// End-to-end test helpers: the lathe binary under test ($LATHE_BIN, set by CTest) and running commands
// with their exit code and combined output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace lathe::testing {

inline std::string lathe_bin() {
  const char* b = std::getenv("LATHE_BIN");
  return b ? b : LATHE_BINARY_DIR "/lathe";
}

// Runs a shell command; returns its exit code (-1 if it did not exit normally) and stdout + stderr.
inline std::pair<int, std::string> run_shell(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  if (!p) return {-1, out};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `lathe ARGS`.
inline std::pair<int, std::string> run_lathe(const std::string& args) { return run_shell(lathe_bin() + " " + args); }

}  // namespace lathe::testing
