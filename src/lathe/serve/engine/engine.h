// The serving engine: EngineCore on its own loop thread, fed through the RequestQueue (the only locks).
// Frontend threads submit tokenised requests and read their tokens from an OutputStream (or a callback
// on the engine thread), abort them (a client went away), probe the loop's health and read a metrics
// snapshot; load and unload LoRA adapters served beside the base (the loop installs them between steps);
// stop() drains or aborts what is in flight and joins the loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/serve/engine/engine_core.h"
#include "lathe/serve/engine/request_queue.h"

namespace lathe {

// The engine cannot take requests: it is stopping, stopped, or its loop failed (HTTP 503).
class EngineUnavailable : public Error {
 public:
  using Error::Error;
};

struct Submission {
  uint64_t request_id = 0;
  std::shared_ptr<OutputStream> stream;  // this request's outputs, in order per choice
};

class Engine {
 public:
  // Builds the core (KV pool, scheduler, runner) and starts the loop thread. The model must outlive
  // the engine, which writes nothing in it but its Linears' served-adapter slots (load_lora).
  // InvalidArgument as EngineCore's constructor.
  Engine(Model& model, const EngineConfig& config);
  ~Engine();  // stop(false)
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Any thread. Checks the request (InvalidArgument naming the field, before anything is queued) and
  // queues it; its outputs arrive in order per choice, the last of each choice with a finish reason.
  // A request the scheduler refuses later (its max_tokens reservation exceeds the pool) gets one
  // output per choice with `error` set. EngineUnavailable when stopping or dead.
  Submission submit(EngineRequest r);
  uint64_t submit(EngineRequest r, OutputCallback on_output);
  // Any thread: frees the request's blocks at the loop's next turn; each unfinished choice ends with
  // finish kAbort. Unknown or finished ids are ignored.
  void abort(uint64_t request_id);
  // Any thread: ends choice `index` of the request at the loop's next turn (the frontend matched a stop
  // string in it, so its sequence stops taking compute and frees its blocks while its siblings go on).
  // The choice's last output carries `reason` and no token. Unknown or finished choices are ignored.
  void finish_choice(uint64_t request_id, int index, FinishReason reason = FinishReason::kStop);

  // Any thread: serves the PEFT adapter folder at `path` as `name` (multi-LoRA serving): read and checked
  // against the model on the calling thread, installed by the loop before its next step. Once it returns,
  // requests may set cache_keys.adapter_id to the result's id (find_lora). InvalidArgument (the folder
  // does not fit the model, names the tensor or module; the name is taken), NotImplemented (an adapter
  // feature lathe does not apply), EngineUnavailable.
  ServedLora load_lora(const std::string& name, const std::string& path);
  // Any thread: stops serving adapter `name` at once (find_lora no longer sees it; a request admitted
  // after this fails with an error). Requests already running with it finish with it, and its memory is
  // freed after the last one: the number of request choices still using it (0: freed now).
  // InvalidArgument for an unknown name; EngineUnavailable.
  int64_t unload_lora(const std::string& name);
  // Any thread: the served adapters, by name; the one named `name`.
  std::vector<ServedLora> loras() const { return queue_.loras(); }
  std::optional<ServedLora> find_lora(const std::string& name) const;

  // Any thread: true when the loop answered a probe within `timeout` (alive and not stuck in a step).
  bool healthy(std::chrono::milliseconds timeout = std::chrono::milliseconds(1000));
  // Any thread, non-blocking (a /health handler that must not wait): true when the loop is not dead and
  // reached its queue within `max_age` (an idle loop looks every 100 ms; a step longer than max_age fails it).
  bool alive(std::chrono::milliseconds max_age = std::chrono::milliseconds(5000)) const;
  EngineMetrics metrics() const { return queue_.snapshot(); }  // as of the loop's last turn
  std::string capacity_summary() const { return capacity_; }   // the start-up line (KV blocks and tokens)
  const ModelConfig& model_config() const { return model_config_; }
  int64_t max_model_len() const { return max_model_len_; }

  // Closes the engine to new requests; with drain the loop first finishes every request in flight,
  // else it aborts them. Joins the loop; idempotent.
  void stop(bool drain = true);

 private:
  struct Sink {
    OutputCallback on_output;
    std::vector<bool> open;  // per choice: not finished yet
    int n_open = 0;
  };
  void loop();
  void admit(PendingRequest& p);
  void deliver(const std::vector<EngineOutput>& outs);
  void fail_all(const std::string& error);
  // Runs `call` on the loop between steps and waits for it; its exception is rethrown here.
  void call_on_loop(std::function<void()> call);

  Model& model_;
  const ModelConfig& model_config_;
  int64_t max_model_len_ = 0;
  std::unique_ptr<EngineCore> core_;  // engine thread only, after the constructor
  std::string capacity_;
  Context* context_ = nullptr;
  RequestQueue queue_;
  // Engine thread only.
  std::unordered_map<uint64_t, Sink> sinks_;
  EngineMetricsRecorder recorder_;
  std::thread thread_;
};

}  // namespace lathe
