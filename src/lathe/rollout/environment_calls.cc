#include "lathe/rollout/environment_calls.h"

#include "lathe/base/error.h"

namespace lathe::rollout {

EnvironmentCalls::EnvironmentCalls(Environment& env, int workers) : env_(env) {
  LATHE_CHECK_ARG(workers >= 1, "[EnvironmentCalls] need at least one worker, got ", workers);
  for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { work(w); });
}

EnvironmentCalls::~EnvironmentCalls() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queued_.clear();
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void EnvironmentCalls::submit(uint64_t key, ToolRequest call) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.emplace_back(key, std::move(call));
  }
  work_cv_.notify_one();
}

std::vector<EnvironmentAnswer> EnvironmentCalls::take(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (answers_.empty() && wait.count() > 0) done_cv_.wait_for(lock, wait, [this] { return !answers_.empty(); });
  std::vector<EnvironmentAnswer> out;
  out.swap(answers_);
  return out;
}

int64_t EnvironmentCalls::outstanding() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queued_.size() + answers_.size()) + running_;
}

void EnvironmentCalls::reset() {
  std::unique_lock<std::mutex> lock(mu_);
  queued_.clear();
  ++generation_;
  done_cv_.wait(lock, [this] { return running_ == 0; });
  answers_.clear();
}

void EnvironmentCalls::work(int worker) {
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    work_cv_.wait(lock, [this] { return stop_ || !queued_.empty(); });
    if (stop_) return;
    auto [key, call] = std::move(queued_.front());
    queued_.pop_front();
    const uint64_t generation = generation_;
    ++running_;
    lock.unlock();
    EnvironmentAnswer a{.key = key};
    try {
      a.result = env_.call(call, worker);
    } catch (...) {
      a.error = std::current_exception();
    }
    lock.lock();
    --running_;
    if (generation == generation_) answers_.push_back(std::move(a));
    lock.unlock();
    done_cv_.notify_all();
  }
}

}  // namespace lathe::rollout
