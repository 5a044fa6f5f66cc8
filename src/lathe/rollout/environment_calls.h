// Environment calls off the engine's thread: a fixed set of worker threads answers tool calls while the
// rollout keeps stepping the other episodes, so a slow tool never idles the engine (rollout/episode_rollout.h).
// The rollout submits calls and takes the answers that have arrived; all locking of the episode rollout lives
// here. Worker w passes its number to Environment::call (a command environment keeps one process per worker).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "lathe/rollout/environment.h"

namespace lathe::rollout {

struct EnvironmentAnswer {
  uint64_t key = 0;            // the submitter's
  ToolResult result;           // when error is null
  std::exception_ptr error;    // the environment failed (an EnvironmentError naming it)
};

class EnvironmentCalls {
 public:
  // `env` must outlive this; workers >= 1.
  EnvironmentCalls(Environment& env, int workers);
  EnvironmentCalls(const EnvironmentCalls&) = delete;
  EnvironmentCalls& operator=(const EnvironmentCalls&) = delete;
  ~EnvironmentCalls();  // drops queued calls, waits for the running ones, joins

  void submit(uint64_t key, ToolRequest call);
  // The answers that have arrived; when none has, waits up to `wait` for the first (0: does not wait).
  std::vector<EnvironmentAnswer> take(std::chrono::milliseconds wait);
  // Calls submitted whose answers have not been taken yet (queued, running or arrived).
  int64_t outstanding();
  // Drops the queued calls and the answers not taken, and waits for the running calls to end (after an error:
  // the next generation batch starts clean).
  void reset();

 private:
  void work(int worker);

  Environment& env_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // a call was queued, or stopping
  std::condition_variable done_cv_;  // an answer arrived, or a running call ended
  std::deque<std::pair<uint64_t, ToolRequest>> queued_;
  std::vector<EnvironmentAnswer> answers_;
  int running_ = 0;
  uint64_t generation_ = 0;  // bumped by reset(): answers of calls from before it are dropped
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace lathe::rollout
