// End-to-end test helpers: the lathe binary under test ($LATHE_BIN, set by CTest) and running commands
// with their exit code and combined output.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <utility>

#include "lathe/train/byte_tokenizer.h"
#include "lathe/train/test_metrics.h"

extern "C" char** environ;

namespace lathe::testing {

// dir, after writing a byte-level tokenizer into dir/tokenizer (the fine-tuning recipes' data.tokenizer).
inline std::string tokenizer_in(const std::string& dir) {
  train::write_byte_level_tokenizer(dir + "/tokenizer");
  return dir;
}

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

// Polls every millisecond until `path` exists or `timeout` has passed; true when it exists.
inline bool wait_for_file(const std::string& path, std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Starts `lathe ARGS` in the background with stdout and stderr to `log`; returns its pid (-1 on failure).
// The shell execs lathe, so the pid is lathe's own: a signal sent to it reaches lathe.
inline pid_t spawn_lathe_logged(const std::string& args, const std::string& log) {
  const std::string cmd = "exec " + lathe_bin() + " " + args + " > " + log + " 2>&1";
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = 0;
  return posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) == 0 ? pid : -1;
}

// Waits up to `timeout` for pid to exit: its exit code, or -1 when a signal ended it or it was still
// running at the timeout (then it is SIGKILLed and reaped).
inline int wait_exit(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Waits until the log of a server started by spawn_lathe_logged names its address ("listening on
// http://HOST:PORT", as `lathe serve --port 0` prints it): the port, or 0 when the server exited or
// `timeout` passed first.
inline int wait_for_listening_port(pid_t pid, const std::string& log, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::regex listening(R"(listening on http://[^ :]+:([0-9]+))");
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(text, m, listening)) return std::stoi(m[1].str());
    if (waitpid(pid, nullptr, WNOHANG) != 0) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

// SIGKILLs pid and reaps it; true when the signal is what ended it (it had not finished on its own).
inline bool kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status);
}

// A tmpfs of `size` (e.g. "4m") mounted at `path` (created) while the object lives: a real full disk for
// tests. mounted() is false where mounting is not allowed (not root, no CAP_SYS_ADMIN): skip the test.
class ScopedTmpfs {
 public:
  ScopedTmpfs(const std::string& path, const std::string& size) : path_(path) {
    std::filesystem::create_directories(path);
    mounted_ = std::system(("mount -t tmpfs -o size=" + size + " tmpfs " + path + " 2>/dev/null").c_str()) == 0;
  }
  ~ScopedTmpfs() {
    if (mounted_) (void)std::system(("umount " + path_).c_str());
  }
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;
  bool mounted() const { return mounted_; }

 private:
  std::string path_;
  bool mounted_ = false;
};

// The pid of the `lathe pretrain` process that is MPI rank `rank` of a job training in `run_dir` (its
// command line says run.dir=RUN_DIR, its environment OMPI_COMM_WORLD_RANK=RANK); -1 when there is none.
inline pid_t find_rank_pid(const std::string& run_dir, int rank, const std::string& command = "pretrain") {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream env(e.path() / "environ"), cmdline(e.path() / "cmdline");
    const std::string envs((std::istreambuf_iterator<char>(env)), {});
    const std::string args((std::istreambuf_iterator<char>(cmdline)), {});
    if (args.find("run.dir=" + run_dir + '\0') != std::string::npos &&
        args.find('\0' + command + '\0') != std::string::npos &&
        envs.find("OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0') != std::string::npos)
      return std::stoi(name);
  }
  return -1;
}

// `lathe ARGS`.
inline std::pair<int, std::string> run_lathe(const std::string& args) { return run_shell(lathe_bin() + " " + args); }

// `lathe ARGS` under coreutils `timeout`: a hang exits 124 (killed after `timeout_s`), a crash 128 + the
// signal number, so a test can tell a clean error from both.
inline std::pair<int, std::string> run_lathe_bounded(const std::string& args, int timeout_s = 60) {
  return run_shell("timeout -k 5 " + std::to_string(timeout_s) + " " + lathe_bin() + " " + args);
}

// The prefix of a 2-rank command: OpenMPI refuses root unless told; --oversubscribe lets 2 ranks share fewer
// cores (CI machines). (LeakSanitizer off for the ASan build: libmpi keeps allocations until exit by design.)
inline constexpr const char* kMpirun =
    "ASAN_OPTIONS=detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe ";

// `lathe ARGS` as 2 ranks under mpirun: exit status and output.
inline std::pair<int, std::string> run_lathe_two_ranks(const std::string& args) {
  return run_shell(kMpirun + lathe_bin() + " " + args);
}

// Two runs' losses agree step for step, `steps` of them: only the order of the sums differs between one
// process and two ranks (as tests/e2e/mpi_test.cc), so 1e-5 relative. `out`: the second run's output.
inline void expect_same_losses(const std::string& run_a, const std::string& run_b, size_t steps,
                               const std::string& out) {
  const auto a = loss_values(run_a), b = loss_values(run_b);
  ASSERT_EQ(a.size(), steps);
  ASSERT_EQ(b.size(), steps) << out;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * std::abs(a[i])) << "step " << i + 1;
}

inline constexpr int kExitTimedOut = 124;  // coreutils timeout: the command was killed after its limit

// True when `r` is a clean failure: a non-zero exit that is neither a timeout nor a signal, and an
// output that names `what` (the file, key or option at fault).
inline bool is_clean_error(const std::pair<int, std::string>& r, const std::string& what) {
  return r.first > 0 && r.first != kExitTimedOut && r.first < 128 && r.second.find(what) != std::string::npos;
}

// The corpus the pre-training tests train on: `lathe data synth` (`documents` documents of the "world"
// corpus and its tokenizer, into DIR/world), then `lathe data prepare` (shards named "world" with 5% held
// out, into DIR/data). Returns the first failing command's result, else data prepare's.
inline std::pair<int, std::string> prepare_world_data(const std::string& dir, int documents) {
  auto synth = run_lathe("data synth --out " + dir + "/world --documents " + std::to_string(documents));
  if (synth.first != 0) return synth;
  return run_lathe("data prepare " + dir + "/world/world.jsonl --tokenizer " + dir + "/world/tokenizer --out " + dir +
                   "/data --name world --val-fraction 0.05");
}

}  // namespace lathe::testing
