#include "lathe/serve/engine/request_queue.h"

#include <utility>

namespace lathe {

std::optional<uint64_t> RequestQueue::push(EngineRequest r, OutputCallback on_output,
                                           EngineClock::time_point submitted) {
  std::lock_guard lock(mu_);
  if (closed_) return std::nullopt;
  const uint64_t id = next_id_++;
  pending_.push_back({.id = id, .request = std::move(r), .on_output = std::move(on_output), .submitted = submitted});
  work_cv_.notify_one();
  return id;
}

void RequestQueue::abort(uint64_t id) {
  std::lock_guard lock(mu_);
  aborts_.push_back(id);
  work_cv_.notify_one();
}

std::optional<std::future<void>> RequestQueue::push_call(std::function<void()> call) {
  std::packaged_task<void()> task(std::move(call));
  std::future<void> done = task.get_future();
  std::lock_guard lock(mu_);
  if (closed_) return std::nullopt;
  calls_.push_back(std::move(task));
  work_cv_.notify_one();
  return done;
}

void RequestQueue::finish_choice(const ChoiceFinish& c) {
  std::lock_guard lock(mu_);
  choice_finishes_.push_back(c);
  work_cv_.notify_one();
}

void RequestQueue::stop(bool drain) {
  std::lock_guard lock(mu_);
  // A later stop without drain overrides an earlier drain (a second SIGTERM), never the other way.
  drain_ = closed_ ? drain_ && drain : drain;
  closed_ = true;
  work_cv_.notify_one();
}

QueueWork RequestQueue::take(bool idle, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  last_turn_ = EngineClock::now();
  probes_answered_ = probes_asked_;
  probe_cv_.notify_all();
  const auto has_work = [this] {
    return !pending_.empty() || !aborts_.empty() || !choice_finishes_.empty() || !calls_.empty() || closed_ ||
           probes_asked_ != probes_answered_;
  };
  if (idle) work_cv_.wait_for(lock, wait, has_work);
  last_turn_ = EngineClock::now();
  probes_answered_ = probes_asked_;
  probe_cv_.notify_all();
  QueueWork w{.added = {std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end())},
              .aborted = std::move(aborts_), .finished_choices = std::move(choice_finishes_),
              .calls = {std::make_move_iterator(calls_.begin()), std::make_move_iterator(calls_.end())},
              .stop = closed_, .drain = drain_};
  pending_.clear();
  aborts_.clear();
  choice_finishes_.clear();
  calls_.clear();
  return w;
}

bool RequestQueue::probe(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (dead_ || loop_exited_) return false;
  const uint64_t ticket = ++probes_asked_;
  work_cv_.notify_one();
  return probe_cv_.wait_for(lock, timeout, [&] { return probes_answered_ >= ticket || dead_ || loop_exited_; }) &&
         !dead_ && !loop_exited_;
}

EngineClock::time_point RequestQueue::last_turn() const {
  std::lock_guard lock(mu_);
  return last_turn_;
}

void RequestQueue::set_dead(const std::string& reason) {
  std::lock_guard lock(mu_);
  dead_ = reason;
  closed_ = true;
  probe_cv_.notify_all();
}

std::optional<std::string> RequestQueue::dead_reason() const {
  std::lock_guard lock(mu_);
  return dead_;
}

void RequestQueue::set_loop_exited() {
  std::lock_guard lock(mu_);
  loop_exited_ = true;
  closed_ = true;
  calls_.clear();  // never to run: their callers' futures throw (broken promise)
  probe_cv_.notify_all();
}

bool RequestQueue::loop_exited() const {
  std::lock_guard lock(mu_);
  return loop_exited_;
}

void RequestQueue::publish(const EngineMetrics& m) {
  std::lock_guard lock(mu_);
  metrics_ = m;
}

EngineMetrics RequestQueue::snapshot() const {
  std::lock_guard lock(mu_);
  return metrics_;
}

void RequestQueue::publish_loras(std::vector<ServedLora> loras) {
  std::lock_guard lock(mu_);
  loras_ = std::move(loras);
}

std::vector<ServedLora> RequestQueue::loras() const {
  std::lock_guard lock(mu_);
  return loras_;
}

void OutputStream::push(const EngineOutput& o) {
  std::lock_guard lock(mu_);
  ready_.push_back(o);
  if (o.finish) --n_open_;
  cv_.notify_one();
}

std::optional<EngineOutput> OutputStream::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !ready_.empty() || n_open_ <= 0; });
  if (ready_.empty()) return std::nullopt;
  EngineOutput o = std::move(ready_.front());
  ready_.pop_front();
  return o;
}

std::optional<EngineOutput> OutputStream::next_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !ready_.empty() || n_open_ <= 0; }) || ready_.empty())
    return std::nullopt;
  EngineOutput o = std::move(ready_.front());
  ready_.pop_front();
  return o;
}

bool OutputStream::finished() const {
  std::lock_guard lock(mu_);
  return ready_.empty() && n_open_ <= 0;
}

void RequestIdMap::open(const std::string& key) {
  std::lock_guard lock(mu_);
  ids_[key].clear();
}

bool RequestIdMap::add(const std::string& key, uint64_t engine_id) {
  std::lock_guard lock(mu_);
  const auto it = ids_.find(key);
  if (it == ids_.end()) return false;
  it->second.push_back(engine_id);
  return true;
}

std::vector<uint64_t> RequestIdMap::take(const std::string& key) {
  std::lock_guard lock(mu_);
  const auto it = ids_.find(key);
  if (it == ids_.end()) return {};
  std::vector<uint64_t> ids = std::move(it->second);
  ids_.erase(it);
  return ids;
}

size_t RequestIdMap::size() const {
  std::lock_guard lock(mu_);
  return ids_.size();
}

}  // namespace lathe
