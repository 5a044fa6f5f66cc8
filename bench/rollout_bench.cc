// GRPO rollout throughput: the G completions of one prompt as one engine request with n = G (what
// rollout/engine_rollout.cc does: the children share the prompt's KV blocks and decode as one batch) against
// the same G completions generated one request after another (n = 1 each, each run to its end first).
//
//   BM_Rollout_Group/G:8/threads:N        one request of n = G
//   BM_Rollout_Sequential/G:8/threads:N   G requests of n = 1, one after another
//
// Both sample with temperature 1 and ignore_eos, so every completion has exactly --new tokens and the two
// produce the same number of tokens (new_tok/s counts them); the prompt is --prompt tokens of a fixed
// pseudo-random sequence. The speed-up of batching is Group's new_tok/s over Sequential's.
// Model folder: --model=DIR, else LATHE_BENCH_LLAMA1B_F32, else the fixture Llama (tests/fixtures/models/llama:
// tiny, checks the binary runs; its figures mean nothing). Flags: --group=8 --prompt=64 --new=64 --threads=1,2.
// Default 3 repetitions, medians.
#include <benchmark/benchmark.h>

#include "bench_defaults.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lathe/base/context.h"
#include "lathe/models/model.h"
#include "lathe/serve/engine/engine_core.h"

namespace {

using lathe::Context;
using lathe::ContextScope;
using lathe::EngineConfig;
using lathe::EngineCore;
using lathe::EngineRequest;
using lathe::Model;

struct Flags {
  std::string model;
  int group = 8, prompt = 64, new_tokens = 64;
  std::vector<int> threads = {1, 2};
};

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  for (size_t at = 0; at <= s.size();) {
    const size_t comma = s.find(',', at);
    out.push_back(std::atoi(s.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// Runs `requests` on a fresh engine (all added at once when together, else each to its end before the next);
// returns the tokens generated.
int64_t run(const Model& m, const Flags& f, const std::vector<int32_t>& prompt, bool together) {
  EngineConfig ec{.kv_cache_memory = int64_t{256} << 20, .seed = 1};
  ec.scheduler.max_model_len = f.prompt + f.new_tokens;
  EngineCore core(m, ec);
  const int requests = together ? 1 : f.group;
  int64_t tokens = 0;
  for (int r = 0; r < requests; ++r) {
    EngineRequest q;
    q.prompt = prompt;
    q.sampling.n = together ? f.group : 1;
    q.sampling.max_tokens = f.new_tokens;
    q.sampling.ignore_eos = true;
    q.sampling.seed = static_cast<uint64_t>(r);
    core.add_request(static_cast<uint64_t>(r + 1), std::move(q));
    while (core.has_unfinished())
      for (const lathe::EngineOutput& o : core.step()) tokens += o.token ? 1 : 0;
  }
  return tokens;
}

void register_all(const Flags& f, std::shared_ptr<Model> model) {
  std::mt19937 rng(5);
  std::vector<int32_t> prompt(static_cast<size_t>(f.prompt));
  const auto v = static_cast<int32_t>(model->config().vocab_size);
  for (int32_t& t : prompt) t = std::uniform_int_distribution<int32_t>(0, v - 1)(rng);
  for (int threads : f.threads)
    for (bool together : {true, false}) {
      const std::string name = std::string(together ? "BM_Rollout_Group" : "BM_Rollout_Sequential") +
                               "/G:" + std::to_string(f.group) + "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
        Context ctx(threads);
        ContextScope scope(ctx);
        int64_t tokens = 0;
        for (auto _ : st) tokens += run(*model, f, prompt, together);
        st.counters["new_tok/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
      })->UseRealTime()->Unit(benchmark::kMillisecond);
    }
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* key) { return a.substr(std::strlen(key)); };
    if (a.rfind("--model=", 0) == 0) f.model = value("--model=");
    else if (a.rfind("--group=", 0) == 0) f.group = std::atoi(value("--group=").c_str());
    else if (a.rfind("--prompt=", 0) == 0) f.prompt = std::atoi(value("--prompt=").c_str());
    else if (a.rfind("--new=", 0) == 0) f.new_tokens = std::atoi(value("--new=").c_str());
    else if (a.rfind("--threads=", 0) == 0) f.threads = int_list(value("--threads="));
    else rest.push_back(argv[i]);
  }
  if (f.model.empty()) {
    const char* env = std::getenv("LATHE_BENCH_LLAMA1B_F32");
    f.model = env != nullptr ? env : std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/models/llama";
  }
  std::shared_ptr<Model> model = Model::load(f.model);
  register_all(f, model);
  std::vector<std::string> storage;
  int n = static_cast<int>(rest.size());
  std::vector<char*> args = lathe::bench::args_with_median_defaults(n, rest.data(), storage);
  n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
