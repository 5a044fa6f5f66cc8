// A long-lived child process spoken to in JSON Lines: one request object written to its stdin as a line, one
// reply object read back from its stdout as a line (an external RL environment, rollout/environment.h). Every
// call has a deadline: a child that exits, crashes, stays silent past it or answers with a line that is not a
// JSON object is an EnvironmentError naming the command, never a hang. Its stdin and stdout are socket pairs,
// so writing to a child that died is an error (MSG_NOSIGNAL), not a SIGPIPE; its stderr is the caller's.
// Not thread-safe: one caller at a time (rollout/environment_calls.h gives each worker its own process).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lathe/base/error.h"

namespace lathe::rollout {

// An environment (or other helper process) failed: the message names it and says how; `how` alone
// ("exited with status 3", "did not answer within 0.5 s (it was killed)", the start error) lets a caller
// word its own message around it.
class EnvironmentError : public Error {
 public:
  enum class Kind { kStart, kExited, kTimeout, kMalformed };
  EnvironmentError(const std::string& what, Kind kind = Kind::kMalformed, std::string how = "")
      : Error(what), kind_(kind), how_(std::move(how)) {}
  Kind kind() const { return kind_; }
  const std::string& how() const { return how_; }

 private:
  Kind kind_;
  std::string how_;
};

class JsonLinesProcess {
 public:
  // Starts argv (argv[0] looked up on PATH). `name` is how errors name it, e.g. "grpo.environment command
  // `python3 env.py`". EnvironmentError when it cannot be started (argv[0] not found, not executable).
  JsonLinesProcess(std::vector<std::string> argv, std::string name);
  JsonLinesProcess(const JsonLinesProcess&) = delete;
  JsonLinesProcess& operator=(const JsonLinesProcess&) = delete;
  // Closes its stdin (end of input: the child should exit), waits up to 1 s, then kills it.
  ~JsonLinesProcess();

  // Writes `request` as one line and returns the next line of its stdout parsed as a JSON object, read
  // within `timeout`. EnvironmentError naming the command when it has exited (with its status or signal),
  // does not answer in time (it is killed: a later call fails at once), or answers with a line that is not
  // a JSON object.
  nlohmann::json call(const nlohmann::json& request, std::chrono::milliseconds timeout);
  // The same exchange on raw text: writes `line` (no newline) and returns the next line of its stdout, for
  // callers with their own protocol (rollout/command_reward.h); EnvironmentError as above but for the JSON.
  std::string exchange(const std::string& line, std::chrono::milliseconds timeout);

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }

 private:
  // "exited with status 3" / "was killed by signal 9"; reaps the child (waits up to `wait`).
  std::string exit_description(std::chrono::milliseconds wait);
  void kill_child();

  std::string name_;
  pid_t pid_ = -1;
  int in_fd_ = -1;   // our end of its stdin
  int out_fd_ = -1;  // our end of its stdout
  std::string buffered_;  // bytes read past the last line
  std::string dead_;      // non-empty: why the child can no longer answer
};

}  // namespace lathe::rollout
