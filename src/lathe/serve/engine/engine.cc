#include "lathe/serve/engine/engine.h"

#include <exception>
#include <future>
#include <utility>

#include "lathe/models/lora_adapters.h"

namespace lathe {
namespace {

// How long an idle loop sleeps before it looks at the queue again (a push or probe wakes it at once).
constexpr std::chrono::milliseconds kIdleWait{100};

}  // namespace

Engine::Engine(Model& model, const EngineConfig& config)
    : model_(model), model_config_(model.config()), context_(config.context) {
  {
    // The store sizes its attention scratch for the workers of the context the loop runs on.
    ContextScope scope(context_);
    core_ = std::make_unique<EngineCore>(model, config);
  }
  max_model_len_ = core_->scheduler_config().max_model_len;
  capacity_ = core_->capacity_summary();
  EngineMetrics m;
  m.core = core_->stats();
  queue_.publish(m);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { stop(false); }

Submission Engine::submit(EngineRequest r) {
  auto stream = std::make_shared<OutputStream>(r.sampling.n);
  const uint64_t id = submit(std::move(r), [stream](const EngineOutput& o) { stream->push(o); });
  return {.request_id = id, .stream = std::move(stream)};
}

uint64_t Engine::submit(EngineRequest r, OutputCallback on_output) {
  const EngineClock::time_point submitted = EngineClock::now();
  check_engine_request(r, model_config_, max_model_len_);
  const std::optional<uint64_t> id = queue_.push(std::move(r), std::move(on_output), submitted);
  if (!id) {
    const std::optional<std::string> dead = queue_.dead_reason();
    throw EngineUnavailable(dead ? "[engine] the engine loop failed: " + *dead : "[engine] the engine is stopping");
  }
  return *id;
}

void Engine::abort(uint64_t request_id) { queue_.abort(request_id); }

void Engine::call_on_loop(std::function<void()> call) {
  std::optional<std::future<void>> done = queue_.push_call(std::move(call));
  const auto unavailable = [this] {
    const std::optional<std::string> dead = queue_.dead_reason();
    return EngineUnavailable(dead ? "[engine] the engine loop failed: " + *dead : "[engine] the engine is stopping");
  };
  if (!done) throw unavailable();
  try {
    done->get();
  } catch (const std::future_error&) {  // the loop exited before it ran the call
    throw unavailable();
  }
}

ServedLora Engine::load_lora(const std::string& name, const std::string& path) {
  LATHE_CHECK_ARG(!name.empty(), "[engine] a LoRA adapter needs a name");
  // Reading and checking the folder only reads the model; the loop alone writes its Linears' slots.
  auto folder = std::make_shared<LoraFolder>(read_lora_folder(model_, path));
  ServedLora served;
  call_on_loop([&, folder] {
    served = core_->add_lora(name, path, std::move(*folder));
    queue_.publish_loras(core_->loras());
  });
  return served;
}

int64_t Engine::unload_lora(const std::string& name) {
  int64_t in_use = 0;
  call_on_loop([&] {
    in_use = core_->remove_lora(name);
    queue_.publish_loras(core_->loras());
  });
  return in_use;
}

std::optional<ServedLora> Engine::find_lora(const std::string& name) const {
  for (ServedLora& l : queue_.loras())
    if (l.name == name) return std::move(l);
  return std::nullopt;
}

void Engine::finish_choice(uint64_t request_id, int index, FinishReason reason) {
  queue_.finish_choice({.request_id = request_id, .index = index, .reason = reason});
}

bool Engine::healthy(std::chrono::milliseconds timeout) { return queue_.probe(timeout); }

bool Engine::alive(std::chrono::milliseconds max_age) const {
  return !queue_.loop_exited() && EngineClock::now() - queue_.last_turn() <= max_age;
}

void Engine::stop(bool drain) {
  queue_.stop(drain);
  if (thread_.joinable()) thread_.join();
}

void Engine::admit(PendingRequest& p) {
  const int n = p.request.sampling.n;
  const int64_t n_prompt = static_cast<int64_t>(p.request.prompt.size());
  try {
    core_->add_request(p.id, std::move(p.request));
  } catch (const InvalidArgument& e) {
    // Checked at submit, so only what the scheduler alone can judge lands here (the reservation).
    for (int i = 0; i < n; ++i)
      p.on_output({.request_id = p.id, .index = i, .finish = FinishReason::kAbort, .error = e.what()});
    return;
  }
  sinks_[p.id] = {.on_output = std::move(p.on_output), .open = std::vector<bool>(static_cast<size_t>(n), true), .n_open = n};
  recorder_.on_arrival(p.id, n, n_prompt, p.submitted);
}

void Engine::deliver(const std::vector<EngineOutput>& outs) {
  const EngineClock::time_point now = EngineClock::now();
  for (const EngineOutput& o : outs) {
    recorder_.on_output(o, now);
    const auto it = sinks_.find(o.request_id);
    if (it == sinks_.end()) continue;
    Sink& sink = it->second;
    sink.on_output(o);
    if (o.finish) {
      sink.open[static_cast<size_t>(o.index)] = false;
      if (--sink.n_open == 0) sinks_.erase(it);
    }
  }
}

void Engine::fail_all(const std::string& error) {
  for (auto& [id, sink] : sinks_) {
    for (size_t i = 0; i < sink.open.size(); ++i)
      if (sink.open[i])
        sink.on_output({.request_id = id, .index = static_cast<int>(i), .finish = FinishReason::kAbort, .error = error});
  }
  sinks_.clear();
}

void Engine::loop() {
  ContextScope scope(context_);
  try {
    for (;;) {
      QueueWork w = queue_.take(!core_->has_unfinished(), kIdleWait);
      for (PendingRequest& p : w.added) admit(p);
      for (const uint64_t id : w.aborted) deliver(core_->abort_request(id));
      for (std::packaged_task<void()>& call : w.calls) call();  // its exception goes to its caller
      for (const ChoiceFinish& c : w.finished_choices) deliver(core_->finish_choice(c.request_id, c.index, c.reason));
      if (w.stop && !w.drain) {
        for (auto it = sinks_.begin(); it != sinks_.end();) {
          const uint64_t id = (it++)->first;  // deliver erases the finished sink
          deliver(core_->abort_request(id));
        }
      }
      if (core_->has_unfinished()) deliver(core_->step());
      recorder_.set_core(core_->stats());
      queue_.publish(recorder_.metrics());
      if (w.stop && !core_->has_unfinished()) break;
    }
  } catch (const std::exception& e) {
    // A failure inside a step leaves the core's state unknown: the engine reports dead (health probes
    // fail, submits throw EngineUnavailable) and every waiting client gets the error.
    queue_.set_dead(e.what());
    fail_all(e.what());
  }
  queue_.set_loop_exited();
}

}  // namespace lathe
