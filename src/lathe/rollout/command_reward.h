// An external reward program (grpo.rewards entry `{type: command, command: [argv...]}`): one long-lived
// process, started once when the run starts, that scores completions over JSON Lines on its stdin / stdout.
// Protocol (docs/recipes.md "External reward command"): lathe writes one line per prompt group, a JSON array
// of G request objects {"prompt": text, "completion": text, "completion_tokens": n, "columns": {the row's
// other dataset columns}}; the process answers one line, a JSON array of G entries, each a number or null
// ("not applicable", specs §5.1). The process's stderr goes to lathe's. A process that exits or crashes,
// does not answer within the timeout (it is then killed), or answers anything else (not JSON, not an array
// of G numbers / nulls) is an error naming the command: never a hung run. The process itself is a
// JsonLinesProcess (json_lines_process.h), as an external environment's is.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lathe/rollout/json_lines_process.h"

namespace lathe::rollout {

class CommandReward {
 public:
  // argv: the program (looked up on PATH) and its arguments, non-empty; timeout_s > 0: the longest wait for
  // one answer. Starts the process (InvalidArgument naming the command when it cannot be started).
  CommandReward(std::vector<std::string> argv, double timeout_s);
  ~CommandReward();  // closes its stdin, then kills it if it has not exited within a second (JsonLinesProcess)
  CommandReward(const CommandReward&) = delete;
  CommandReward& operator=(const CommandReward&) = delete;

  // requests: a JSON array of request objects -> one reward each (NaN for null). Throws Error naming the
  // command on any failure above; after one, every later call fails too.
  std::vector<double> score(const nlohmann::json& requests);

  const std::string& command() const { return shown_; }  // argv joined by spaces, for messages

 private:
  [[noreturn]] void fail(const std::string& why);  // records the failure (later calls repeat it) and throws

  std::string shown_;
  double timeout_s_;
  std::unique_ptr<JsonLinesProcess> process_;
  std::string failed_;  // the first failure, repeated by later calls
};

}  // namespace lathe::rollout
