// Helpers of the engine tests: fixture models with their reference greedy run, and running requests
// through an Engine to completion.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/base/rng.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "lathe/serve/engine/engine.h"

namespace lathe::testing {

// log p(prompt[p + 1] | prompt[0..p]) for p = 0..T-2, from one dense forward over the whole prompt: the
// reference for prompt logprobs computed through the paged engine.
inline std::vector<double> dense_prompt_logprobs(const Model& m, const std::vector<int32_t>& prompt) {
  NoGradGuard no_grad;
  const auto T = static_cast<int64_t>(prompt.size());
  const Tensor logits = m.forward(Tensor::from_data_i32({1, T}, prompt));  // [1, T, V]
  const int64_t V = m.config().vocab_size;
  std::vector<double> out;
  for (int64_t p = 0; p + 1 < T; ++p) {
    const float* row = logits.data<float>() + p * V;
    const double mx = *std::max_element(row, row + V);
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(row[v] - mx);
    out.push_back(row[prompt[p + 1]] - mx - std::log(s));
  }
  return out;
}

struct EngineFixture {
  std::unique_ptr<Model> model;
  std::vector<int32_t> greedy_prompt;  // reference.json greedy_prompt
  std::vector<int32_t> greedy_output;  // reference.json greedy_output_ids after the prompt
};

inline EngineFixture load_engine_fixture(const std::string& name) {
  const std::string dir = (std::filesystem::path(fixtures_root()) / "models" / name).string();
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  EngineFixture f{.model = Model::load(dir, {.force_f32 = true})};
  for (const auto& v : j["greedy_prompt"]) f.greedy_prompt.push_back(v.get<int32_t>());
  const auto& out = j["greedy_output_ids"];
  for (size_t i = f.greedy_prompt.size(); i < out.size(); ++i) f.greedy_output.push_back(out[i].get<int32_t>());
  return f;
}

// The tokens of each choice of a finished request, and how each ended.
struct Completion {
  std::map<int, std::vector<int32_t>> tokens;
  std::map<int, FinishReason> finish;
  std::vector<EngineOutput> outputs;
};

inline Completion read_all(OutputStream& s) {
  Completion c;
  while (std::optional<EngineOutput> o = s.next()) {
    if (o->token) c.tokens[o->index].push_back(*o->token);
    if (o->finish) c.finish[o->index] = *o->finish;
    c.outputs.push_back(std::move(*o));
  }
  return c;
}

inline EngineRequest greedy_request(std::vector<int32_t> prompt, int max_tokens) {
  return {.prompt = std::move(prompt), .sampling = {.temperature = 0.f, .max_tokens = max_tokens, .ignore_eos = true}};
}

// Holds the engine loop on a request's first output, on the engine thread, until release(): what the test
// queues meanwhile (an abort, a stop) is taken at the loop's next turn, before the request's next step,
// however fast the model runs and however late the test thread is scheduled (a loaded CI machine).
class LoopHold {
 public:
  // Submits `r` (its outputs go to stream()) and returns once the loop is held on its first output.
  LoopHold(Engine& engine, EngineRequest r) : state_(std::make_shared<State>(r.sampling.n)) {
    request_id_ = engine.submit(std::move(r), [s = state_](const EngineOutput& o) {
      s->stream.push(o);
      std::unique_lock lock(s->mu);
      if (s->held) return;
      s->held = true;
      s->cv.notify_all();
      s->cv.wait(lock, [&] { return s->released; });
    });
    std::unique_lock lock(state_->mu);
    state_->cv.wait(lock, [&] { return state_->held; });
  }
  ~LoopHold() { release(); }  // before the Engine's destructor joins the loop (declare the hold after it)
  LoopHold(const LoopHold&) = delete;
  LoopHold& operator=(const LoopHold&) = delete;

  void release() {
    std::lock_guard lock(state_->mu);
    state_->released = true;
    state_->cv.notify_all();
  }
  uint64_t request_id() const { return request_id_; }
  OutputStream& stream() { return state_->stream; }  // the first output is already in it

 private:
  struct State {  // shared with the callback, which the engine may call after the hold is gone
    explicit State(int n) : stream(n) {}
    OutputStream stream;
    std::mutex mu;
    std::condition_variable cv;
    bool held = false, released = false;
  };
  std::shared_ptr<State> state_;
  uint64_t request_id_ = 0;
};

// `n` prompts of lengths cycling through 1..max_len, ids drawn from the vocabulary with a fixed key.
inline std::vector<std::vector<int32_t>> varied_prompts(int n, int max_len, int64_t vocab, uint64_t key) {
  CounterRng rng{.key = key};
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(1 + (i * 7) % max_len));
    for (int32_t& t : p) t = static_cast<int32_t>(rng.next_below(static_cast<uint64_t>(vocab)));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

// Runs one request on a fresh engine of `config`, alone.
inline Completion run_alone(Model& model, const EngineConfig& config, EngineRequest r) {
  Engine engine(model, config);
  Submission s = engine.submit(std::move(r));
  return read_all(*s.stream);
}

}  // namespace lathe::testing
