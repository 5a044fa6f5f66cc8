// Every mutex and condition variable of the serving engine (STYLE §15): the RequestQueue between the
// frontend threads and the engine loop (requests, aborts, choices the frontend ended, calls run on the
// loop, stop, health probes, the metrics snapshot and the served LoRA adapters' names), the OutputStream a
// submitter reads its tokens from, and the RequestIdMap from a frontend's request ids to the engine's.
// The scheduler, KV manager and runner behind the loop are single-threaded.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/serve/engine/engine_metrics.h"
#include "lathe/serve/engine/engine_request.h"

namespace lathe {

// Called on the engine thread for each output of the request; it must return quickly (hand the output
// to another thread) and must not call back into the engine.
using OutputCallback = std::function<void(const EngineOutput&)>;

struct PendingRequest {
  uint64_t id = 0;
  EngineRequest request;
  OutputCallback on_output;
  EngineClock::time_point submitted;
};

// One choice of a request that the frontend ended (a stop string it matched), to end in the engine too.
struct ChoiceFinish {
  uint64_t request_id = 0;
  int index = 0;                              // the choice, in [0, n)
  FinishReason reason = FinishReason::kStop;  // what the engine reports for it (metrics count it)
};

// What the engine loop takes from the queue in one go.
struct QueueWork {
  std::vector<PendingRequest> added;  // in submit order
  std::vector<uint64_t> aborted;      // after the additions (an abort of a request just added applies)
  std::vector<ChoiceFinish> finished_choices;  // after the additions too
  std::vector<std::packaged_task<void()>> calls;  // after the aborts, in push order
  bool stop = false;                  // stop() was called
  bool drain = false;                 // ... asking to finish in-flight requests first
};

class RequestQueue {
 public:
  // Any thread. Assigns the request id (1, 2, ...); false when the queue is closed (stopping).
  std::optional<uint64_t> push(EngineRequest r, OutputCallback on_output, EngineClock::time_point submitted);
  void abort(uint64_t id);      // any thread; unknown and finished ids are ignored by the loop
  void finish_choice(const ChoiceFinish& c);  // any thread; unknown and finished choices are ignored
  void stop(bool drain);        // any thread: closes the queue to new requests and wakes the loop
  // Any thread: `call` runs on the engine loop between two steps (adapter loads and unloads change what
  // the model's Linears hold); wait on its future. Empty when the queue is closed. A call the loop never
  // runs (it died or exited) breaks its promise: the future throws std::future_error.
  std::optional<std::future<void>> push_call(std::function<void()> call);

  // Engine thread: everything pending, waiting up to `wait` for something when `idle` (the loop has no
  // unfinished work); answers health probes.
  QueueWork take(bool idle, std::chrono::milliseconds wait);

  // Any thread: true when the engine loop reached take() within `timeout` of this call (it is alive and
  // not stuck in a step longer than that).
  bool probe(std::chrono::milliseconds timeout);
  // Any thread, non-blocking: when the loop last reached take() (an idle loop does so every wait).
  EngineClock::time_point last_turn() const;
  // Engine thread: marks the loop dead (probes fail from now on) with the reason.
  void set_dead(const std::string& reason);
  std::optional<std::string> dead_reason() const;
  // Engine thread, as the loop returns (stopped or dead): probes fail at once from now on.
  void set_loop_exited();
  bool loop_exited() const;

  void publish(const EngineMetrics& m);  // engine thread, after each loop turn
  EngineMetrics snapshot() const;        // any thread
  // The served LoRA adapters, by name: set by the engine thread after each load and unload (before the
  // call that made the change returns), read by frontend threads to resolve a request's "model".
  void publish_loras(std::vector<ServedLora> loras);
  std::vector<ServedLora> loras() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // the loop waits here for requests, aborts, stop or probes
  std::condition_variable probe_cv_;  // probers wait here for the loop's answer
  std::deque<PendingRequest> pending_;
  std::vector<uint64_t> aborts_;
  std::vector<ChoiceFinish> choice_finishes_;
  std::deque<std::packaged_task<void()>> calls_;
  uint64_t next_id_ = 1;
  bool closed_ = false, drain_ = false;
  uint64_t probes_asked_ = 0, probes_answered_ = 0;
  EngineClock::time_point last_turn_ = EngineClock::now();
  std::optional<std::string> dead_;
  bool loop_exited_ = false;
  EngineMetrics metrics_;
  std::vector<ServedLora> loras_;
};

// A small channel for one request's outputs: the engine pushes (through the OutputCallback submit
// installs), one consumer pops. It ends after the last choice's finishing output.
class OutputStream {
 public:
  explicit OutputStream(int n_choices) : n_open_(n_choices) {}
  void push(const EngineOutput& o);  // engine thread
  // Blocks until an output is ready; nullopt once every choice has finished and all were read.
  std::optional<EngineOutput> next();
  // As next(), waiting at most `timeout`; nullopt also on a timeout (then finished() is false).
  std::optional<EngineOutput> next_for(std::chrono::milliseconds timeout);
  bool finished() const;  // every choice finished and every output read

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EngineOutput> ready_;
  int n_open_;
};

// A frontend's request ids (the HTTP response id: a string) -> the engine ids of the engine requests it
// submitted for each (one per prompt of a completion), so a client's abort reaches the engine. Entries
// are opened before the first submit and taken when the request finishes or is aborted, from any thread.
class RequestIdMap {
 public:
  void open(const std::string& key);  // a new, empty entry (keys are unique: a reused one is reset)
  // Records an engine id under `key`; false when the entry is gone (aborted or finished meanwhile): the
  // caller then aborts `engine_id` itself.
  bool add(const std::string& key, uint64_t engine_id);
  // Removes the entry: its engine ids (none for an unknown key).
  std::vector<uint64_t> take(const std::string& key);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::vector<uint64_t>> ids_;
};

}  // namespace lathe
