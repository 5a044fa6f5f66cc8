#include "launch_job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <regex>

#include "lathe/base/error.h"

extern "C" char** environ;

namespace lathe::cli {

namespace {

std::vector<int> rank_list(const std::string& s) {  // "1,3" -> {1, 3}
  std::vector<int> out;
  for (size_t i = 0; i < s.size();) {
    size_t used = 0;
    out.push_back(std::stoi(s.substr(i), &used));
    i += used + 1;
  }
  return out;
}

}  // namespace

void scan_job_line(const std::string& line, JobReport& r) {
  static const std::regex resumed(R"(resumed from (\S+) at step (\d+))");
  // Ours (dist/communicator.cc): names the ranks that did not answer the roll call.
  static const std::regex timeout(R"((collective timeout: .*?(?:ranks? ([0-9,]+) did not answer.*|every rank answered.*)))");
  // mpirun (OpenMPI 4): "mpirun noticed that process rank 1 with PID 123 on node n1 exited on signal 9 (Killed)."
  static const std::regex signalled(R"(process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+) ?(\([^)]*\))?)");
  static const std::regex errored(R"(^(?:\[[^\]]*\]\s*)?lathe [a-z-]+: error: (.*))");
  std::smatch m;
  if (std::regex_search(line, m, resumed)) {
    r.resumed_from = m[1].str();
    r.resumed_step = std::stoll(m[2].str());
  }
  // The most telling cause wins: a timeout names who stopped answering; a rank killed by a signal explains
  // the other ranks' errors (their peer vanished); else the first rank's error.
  if (r.cause_weight < 3 && std::regex_search(line, m, timeout)) {
    r.failure = m[1].str();
    r.failed_ranks = m[2].matched ? rank_list(m[2].str()) : std::vector<int>{};
    r.cause_weight = 3;
  } else if (r.cause_weight < 2 && std::regex_search(line, m, signalled)) {
    const std::string pid = m[2].str() == "0" ? "" : "pid " + m[2].str() + " ";  // mpirun may not know it
    r.failure = "rank " + m[1].str() + " (" + pid + "on " + m[3].str() + ") exited on signal " + m[4].str() +
                (m[5].matched ? " " + m[5].str() : "");
    r.failed_ranks = {std::stoi(m[1].str())};
    r.cause_weight = 2;
  } else if (r.cause_weight < 1 && std::regex_search(line, m, errored)) {
    r.failure = m[1].str();
    r.cause_weight = 1;
  }
}

LaunchedJob::LaunchedJob(const std::vector<std::string>& argv) {
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) throw IoError(str_cat("launch: pipe: ", std::strerror(errno)));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
  for (int fd : {out[0], out[1], err[0], err[1]}) posix_spawn_file_actions_addclose(&fa, fd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: kill_group() reaches every local process of the job
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawnp(&pid_, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  fds_[0] = out[0];
  fds_[1] = err[0];
  if (rc != 0) {
    ::close(fds_[0]);
    ::close(fds_[1]);
    throw IoError(str_cat("launch: cannot start ", argv[0], ": ", std::strerror(rc)));
  }
}

LaunchedJob::~LaunchedJob() {
  if (!reaped_ && pid_ > 0) {
    kill_group();
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

void LaunchedJob::drain(int i) {
  char buf[4096];
  const ssize_t n = ::read(fds_[i], buf, sizeof(buf));
  if (n <= 0) {  // end of file (or an error): the job closed this stream
    if (!partial_[i].empty()) scan_job_line(partial_[i], report_);
    ::close(fds_[i]);
    fds_[i] = -1;
    return;
  }
  std::FILE* to = i == 0 ? stdout : stderr;
  std::fwrite(buf, 1, static_cast<size_t>(n), to);
  std::fflush(to);
  partial_[i].append(buf, static_cast<size_t>(n));
  for (size_t nl; (nl = partial_[i].find_first_of("\n\r")) != std::string::npos;) {
    if (nl > 0) scan_job_line(partial_[i].substr(0, nl), report_);
    partial_[i].erase(0, nl + 1);
  }
}

bool LaunchedJob::poll(int wait_ms) {
  if (exited_) return true;
  pollfd p[2];
  int n = 0, which[2];
  for (int i = 0; i < 2; ++i)
    if (fds_[i] >= 0) {
      p[n] = {.fd = fds_[i], .events = POLLIN, .revents = 0};
      which[n++] = i;
    }
  if (n > 0) {
    if (::poll(p, static_cast<nfds_t>(n), wait_ms) > 0)
      for (int k = 0; k < n; ++k)
        if (p[k].revents & (POLLIN | POLLHUP | POLLERR)) drain(which[k]);
  } else {
    ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
  }
  int status = 0;
  if (!reaped_ && ::waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    reaped_at_ = std::chrono::steady_clock::now();
  }
  if (reaped_ && fds_[0] < 0 && fds_[1] < 0) {
    exited_ = true;  // exited and its output drained
  } else if (reaped_ && std::chrono::steady_clock::now() - reaped_at_ > std::chrono::seconds(2)) {
    kill_group();  // a process mpirun left behind holds the pipes open
  }
  return exited_;
}

void LaunchedJob::request_stop() {
  if (!reaped_) ::kill(pid_, SIGUSR1);
}

void LaunchedJob::kill_group() {
  if (pid_ > 0) ::kill(-pid_, SIGKILL);  // the group's id is mpirun's pid (setpgroup 0)
}

}  // namespace lathe::cli
