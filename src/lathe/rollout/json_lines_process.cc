#include "lathe/rollout/json_lines_process.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace lathe::rollout {

namespace {

using Clock = std::chrono::steady_clock;

std::string shorten(const std::string& s, size_t n = 200) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

std::string seconds(std::chrono::milliseconds ms) { return str_cat(static_cast<double>(ms.count()) / 1000.0, " s"); }

}  // namespace

JsonLinesProcess::JsonLinesProcess(std::vector<std::string> argv, std::string name) : name_(std::move(name)) {
  if (argv.empty()) throw EnvironmentError(str_cat(name_, ": no command given"), EnvironmentError::Kind::kStart,
                                           "no command given");
  int in_pair[2], out_pair[2];
  // Our ends close on exec (no other child inherits them); dup2 clears the flag on the child's 0 and 1.
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pair) != 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out_pair) != 0)
    throw EnvironmentError(str_cat(name_, ": cannot create its pipes: ", std::strerror(errno)),
                           EnvironmentError::Kind::kStart, std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pair[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out_pair[1], STDOUT_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group: a timeout kills the command and whatever it started (a shell's sleep, say).
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int rc = posix_spawnp(&pid_, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(in_pair[1]);
  close(out_pair[1]);
  in_fd_ = in_pair[0];
  out_fd_ = out_pair[0];
  if (rc != 0) {
    close(in_fd_);
    close(out_fd_);
    in_fd_ = out_fd_ = -1;
    pid_ = -1;
    throw EnvironmentError(str_cat(name_, " could not be started: ", std::strerror(rc)), EnvironmentError::Kind::kStart,
                           std::strerror(rc));
  }
}

JsonLinesProcess::~JsonLinesProcess() {
  if (in_fd_ >= 0) close(in_fd_);
  if (out_fd_ >= 0) close(out_fd_);
  if (pid_ > 0) {
    // End of input asks it to leave; one that does not within a second is killed.
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() >= deadline) {
        kill_child();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

void JsonLinesProcess::kill_child() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string JsonLinesProcess::exit_description(std::chrono::milliseconds wait) {
  if (pid_ <= 0) return "has exited";
  const auto deadline = Clock::now() + wait;
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (r == 0) {  // closed its stdout but still runs: it will not answer
    kill_child();
    return "closed its stdout (it was killed)";
  }
  kill(-pid_, SIGKILL);  // anything it left behind in its group
  pid_ = -1;
  if (WIFEXITED(status)) return str_cat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return str_cat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return "has exited";
}

std::string JsonLinesProcess::exchange(const std::string& request, std::chrono::milliseconds timeout) {
  using Kind = EnvironmentError::Kind;
  if (!dead_.empty()) throw EnvironmentError(str_cat(name_, " cannot answer: it ", dead_), Kind::kExited, dead_);
  const std::string line = request + "\n";
  for (size_t sent = 0; sent < line.size();) {
    const ssize_t w = send(in_fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      dead_ = exit_description(std::chrono::milliseconds(1000));
      throw EnvironmentError(str_cat(name_, " ", dead_, " before reading the request ", shorten(request)),
                             Kind::kExited, dead_);
    }
    sent += static_cast<size_t>(w);
  }
  const auto deadline = Clock::now() + timeout;
  size_t nl;
  while ((nl = buffered_.find('\n')) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{.fd = out_fd_, .events = POLLIN, .revents = 0};
    const int n = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      kill_child();
      dead_ = str_cat("did not answer within ", seconds(timeout), " (it was killed)");
      throw EnvironmentError(str_cat(name_, " ", dead_, "; the request was ", shorten(request)), Kind::kTimeout,
                             dead_);
    }
    char buf[4096];
    const ssize_t r = n > 0 ? recv(out_fd_, buf, sizeof buf, 0) : -1;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      dead_ = exit_description(std::chrono::milliseconds(1000));
      throw EnvironmentError(str_cat(name_, " ", dead_, " before answering the request ", shorten(request)),
                             Kind::kExited, dead_);
    }
    buffered_.append(buf, static_cast<size_t>(r));
  }
  std::string reply = buffered_.substr(0, nl);
  buffered_.erase(0, nl + 1);
  if (!reply.empty() && reply.back() == '\r') reply.pop_back();
  return reply;
}

nlohmann::json JsonLinesProcess::call(const nlohmann::json& request, std::chrono::milliseconds timeout) {
  const std::string reply = exchange(request.dump(), timeout);
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw EnvironmentError(str_cat(name_, " answered with a line that is not a JSON object: ", shorten(reply),
                                   " (the request was ", shorten(request.dump()), ")"));
  return j;
}

}  // namespace lathe::rollout
