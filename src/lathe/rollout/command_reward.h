// An external reward program (grpo.rewards entry `{type: command, command: [argv...]}`): one long-lived
// process, started once when the run starts, that scores completions over JSON Lines on its stdin / stdout.
// Protocol (docs/recipes.md "External reward command"): lathe writes one line per prompt group, a JSON array
// of G request objects {"prompt": text, "completion": text, "completion_tokens": n, "columns": {the row's
// other dataset columns}}; the process answers one line, a JSON array of G entries, each a number or null
// ("not applicable", specs §5.1). The process's stderr goes to lathe's. A process that exits or crashes,
// does not answer within the timeout (it is then killed), or answers anything else (not JSON, not an array
// of G numbers / nulls) is an error naming the command: never a hung run.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe::rollout {

class CommandReward {
 public:
  // argv: the program (looked up on PATH) and its arguments, non-empty; timeout_s > 0: the longest wait for
  // one answer. Starts the process (InvalidArgument naming the command when it cannot be started).
  CommandReward(std::vector<std::string> argv, double timeout_s);
  ~CommandReward();  // closes its stdin, then kills it if it has not exited within a second
  CommandReward(const CommandReward&) = delete;
  CommandReward& operator=(const CommandReward&) = delete;

  // requests: a JSON array of request objects -> one reward each (NaN for null). Throws Error naming the
  // command on any failure above; after one, every later call fails too.
  std::vector<double> score(const nlohmann::json& requests);

  const std::string& command() const { return shown_; }  // argv joined by spaces, for messages

 private:
  // exiting: the process closed its end, so it is likely exiting: wait up to a second for its status.
  [[noreturn]] void fail(const std::string& why, bool exiting = false);
  std::string read_line();  // the next answer line (without '\n'), within the timeout

  std::vector<std::string> argv_;
  std::string shown_;
  double timeout_s_;
  pid_t pid_ = -1;
  int fd_ = -1;          // our end of the socket pair: the process's stdin and stdout
  std::string pending_;  // bytes read past the last answer line
  std::string failed_;   // the first failure, repeated by later calls
};

}  // namespace lathe::rollout
