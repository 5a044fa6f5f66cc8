// One attempt of `lathe launch`: mpirun started in a process group of its own, its output passed through
// line by line and read for why it ended (a rank killed by a signal, a collective timeout naming a silent
// rank, a rank's error, the checkpoint it resumed from).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "lathe/dist/mpirun_output.h"

namespace lathe::cli {

class LaunchedJob {
 public:
  // Starts argv[0] with argv (searched in PATH), stdout and stderr through pipes.
  explicit LaunchedJob(const std::vector<std::string>& argv);
  ~LaunchedJob();  // SIGKILLs the group if still running
  LaunchedJob(const LaunchedJob&) = delete;
  LaunchedJob& operator=(const LaunchedJob&) = delete;

  // Passes output on for up to `wait_ms`; true once the job has exited and its output is drained.
  bool poll(int wait_ms);
  // SIGUSR1 to mpirun, which forwards it to every rank: they stop after the current step with a checkpoint.
  void request_stop();
  // SIGKILL to the whole process group (mpirun and any local rank it left behind).
  void kill_group();
  // mpirun's exit status, or 128 + the signal that ended it; valid once poll() returned true.
  int exit_code() const { return exit_code_; }
  const dist::JobReport& report() const { return report_; }

 private:
  void drain(int fd_index);
  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};  // stdout, stderr of the job
  std::string partial_[2];
  bool reaped_ = false;  // mpirun has exited (waitpid)
  std::chrono::steady_clock::time_point reaped_at_;
  bool exited_ = false;   // ... and its output is drained
  int exit_code_ = -1;
  dist::JobReport report_;
};

}  // namespace lathe::cli
