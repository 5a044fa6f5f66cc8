#include "lathe/rollout/command_reward.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "lathe/base/error.h"

extern char** environ;

namespace lathe::rollout {

CommandReward::CommandReward(std::vector<std::string> argv, double timeout_s)
    : argv_(std::move(argv)), timeout_s_(timeout_s) {
  LATHE_CHECK_ARG(!argv_.empty() && !argv_[0].empty(), "[reward command] the command is empty");
  LATHE_CHECK_ARG(timeout_s_ > 0 && std::isfinite(timeout_s_), "[reward command] timeout must be positive, got ",
                  timeout_s_);
  for (const std::string& a : argv_) shown_ += (shown_.empty() ? "" : " ") + a;
  // A socket pair rather than two pipes: send() with MSG_NOSIGNAL turns a write to a dead process into EPIPE
  // instead of a SIGPIPE that would kill lathe.
  int sv[2];
  LATHE_CHECK_ARG(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "[reward command] ", shown_,
                  ": socketpair failed: ", std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], STDIN_FILENO);  // dup2 clears CLOEXEC on 0 and 1
  posix_spawn_file_actions_adddup2(&fa, sv[1], STDOUT_FILENO);
  std::vector<char*> args;
  for (std::string& a : argv_) args.push_back(a.data());
  args.push_back(nullptr);
  const int rc = posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    throw InvalidArgument(str_cat("[reward command] ", shown_, ": cannot start it: ", std::strerror(rc)));
  }
  fd_ = sv[0];
}

CommandReward::~CommandReward() {
  if (fd_ >= 0) close(fd_);  // EOF on its stdin: a well-behaved process exits
  if (pid_ <= 0) return;
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

void CommandReward::fail(const std::string& why, bool exiting) {
  // Reap (or kill) the process so the message can say how it ended, and refuse every later call. One that
  // closed its end is given a second to finish exiting, so the message can carry its exit status.
  std::string end;
  if (pid_ > 0) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    for (int i = 0; r == 0 && exiting && i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      r = waitpid(pid_, &status, WNOHANG);
    }
    if (r == 0) {
      kill(pid_, SIGKILL);
      r = waitpid(pid_, &status, 0);
      end = " (killed)";
    } else if (r == pid_ && WIFEXITED(status)) {
      end = str_cat(" (it exited with status ", WEXITSTATUS(status), ")");
    } else if (r == pid_ && WIFSIGNALED(status)) {
      end = str_cat(" (it was killed by signal ", WTERMSIG(status), ")");
    }
    pid_ = -1;
  }
  failed_ = str_cat("[reward command] ", shown_, ": ", why, end);
  throw Error(failed_);
}

std::string CommandReward::read_line() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  for (;;) {
    if (const size_t nl = pending_.find('\n'); nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) fail(str_cat("no answer within ", timeout_s_, " s (the reward's timeout)"));
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, std::numeric_limits<int>::max())));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(str_cat("poll failed: ", std::strerror(errno)));
    if (r == 0) continue;  // the deadline check above ends it
    char buf[65536];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    // A reset is a peer that exited with our request unread.
    if (n == 0 || (n < 0 && errno == ECONNRESET)) fail("it closed its stdout before answering", /*exiting=*/true);
    if (n < 0) fail(str_cat("reading its answer failed: ", std::strerror(errno)));
    pending_.append(buf, static_cast<size_t>(n));
  }
}

std::vector<double> CommandReward::score(const nlohmann::json& requests) {
  if (!failed_.empty()) throw Error(failed_);
  LATHE_ASSERT(requests.is_array());
  const std::string line = requests.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  for (size_t sent = 0; sent < line.size();) {
    const ssize_t n = send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      fail(str_cat("writing a request failed: ", std::strerror(err)), /*exiting=*/err == EPIPE);
    }
    sent += static_cast<size_t>(n);
  }
  const std::string answer = read_line();
  const nlohmann::json a = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  const auto shown = [&] { return answer.size() > 200 ? answer.substr(0, 200) + "..." : answer; };
  if (a.is_discarded()) fail(str_cat("its answer is not JSON: ", shown()));
  if (!a.is_array() || a.size() != requests.size())
    fail(str_cat("expected a JSON array of ", requests.size(), " numbers or nulls (one per request), got: ", shown()));
  std::vector<double> out;
  for (const nlohmann::json& x : a) {
    if (x.is_null()) {
      out.push_back(std::numeric_limits<double>::quiet_NaN());
    } else if (x.is_number() && std::isfinite(x.get<double>())) {
      out.push_back(x.get<double>());
    } else {
      fail(str_cat("an entry of its answer is not a finite number or null: ", shown()));
    }
  }
  return out;
}

}  // namespace lathe::rollout
