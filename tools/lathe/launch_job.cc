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

#include "lathe/base/error.h"

extern "C" char** environ;

namespace lathe::cli {

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
    if (!partial_[i].empty()) dist::scan_job_line(partial_[i], report_);
    ::close(fds_[i]);
    fds_[i] = -1;
    return;
  }
  std::FILE* to = i == 0 ? stdout : stderr;
  std::fwrite(buf, 1, static_cast<size_t>(n), to);
  std::fflush(to);
  partial_[i].append(buf, static_cast<size_t>(n));
  for (size_t nl; (nl = partial_[i].find_first_of("\n\r")) != std::string::npos;) {
    if (nl > 0) dist::scan_job_line(partial_[i].substr(0, nl), report_);
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
