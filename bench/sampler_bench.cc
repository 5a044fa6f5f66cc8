// Google Benchmark of the batched sampler: one step of B = 16 rows at V = 32000 (Llama 2) and 151936
// (Qwen), random N(0, 3²) logits per row.
//
//   BM_Sampler_Greedy/V:<V>/batch:16          argmax only
//   BM_Sampler_TopP/V:<V>/batch:16            temperature 0.8, top_p 0.9 over the whole vocabulary
//   BM_Sampler_AllFeatures/V:<V>/batch:16     min_tokens, 3 logit_bias entries, repetition / frequency /
//                                             presence penalties (512-token prompt, 256+ outputs),
//                                             temperature 0.8, min_p 0.05, top_k 50, top_p 0.9, 5 processed
//                                             top logprobs
// Counter us_per_row: the step's time over B. Threads: the Context's (--threads=N, default 1).
// Run: flock /work/bench.lock build/release/sampler_bench [--threads=N]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench_defaults.h"
#include "lathe/base/context.h"
#include "lathe/base/rng.h"
#include "lathe/infer/sampler.h"

namespace {

using lathe::SamplingParams;
using lathe::SamplingState;

constexpr int kBatch = 16;
constexpr int kOutputsAtStart = 256, kMaxOutputs = 1024;

std::vector<int32_t> random_ids(int64_t n, int64_t V, uint64_t seed) {
  lathe::CounterRng g{.key = seed};
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& t : ids) t = static_cast<int32_t>(g.next_below(static_cast<uint64_t>(V)));
  return ids;
}

// B states with `p`, each with a 512-token prompt and kOutputsAtStart outputs already generated.
std::vector<SamplingState> make_states(const SamplingParams& p, int64_t V) {
  std::vector<SamplingState> s;
  for (int b = 0; b < kBatch; ++b) {
    const std::vector<int32_t> prompt = random_ids(512, V, 100 + b);
    s.emplace_back(p, lathe::SamplingStateOptions{.prompt = prompt, .eos_token_ids = std::vector<int32_t>{2},
                                                  .seed = static_cast<uint64_t>(b), .vocab = V});
    for (int32_t t : random_ids(kOutputsAtStart, V, 200 + b)) s.back().append(t);
  }
  return s;
}

void register_one(const std::string& name, const SamplingParams& p, int64_t V, int threads) {
  benchmark::RegisterBenchmark(
      ("BM_Sampler_" + name + "/V:" + std::to_string(V) + "/batch:" + std::to_string(kBatch)).c_str(),
      [p, V, threads](benchmark::State& st) {
        lathe::Context ctx(threads);
        lathe::ContextScope scope(ctx);
        lathe::CounterRng g{.key = 7};
        std::vector<float> logits(static_cast<size_t>(kBatch * V));
        for (float& x : logits) x = 3.f * g.next_normal();
        std::vector<SamplingState> states = make_states(p, V);
        std::vector<SamplingState*> rows;
        for (SamplingState& s : states) rows.push_back(&s);
        std::vector<lathe::SampledToken> out(kBatch);
        lathe::Sampler sampler(V);
        sampler.sample(logits.data(), rows, out);  // warms the scratch
        for (auto _ : st) {
          if (states[0].output().size() >= kMaxOutputs) {  // keep within max_tokens, untimed
            st.PauseTiming();
            states = make_states(p, V);
            rows.clear();
            for (SamplingState& s : states) rows.push_back(&s);
            st.ResumeTiming();
          }
          sampler.sample(logits.data(), rows, out);
          benchmark::DoNotOptimize(out[0].token);
        }
        // (rows · 1e-6) as an inverted rate: elapsed seconds / (rows · 1e-6) = microseconds per row.
        st.counters["us_per_row"] = benchmark::Counter(static_cast<double>(st.iterations()) * kBatch * 1e-6,
                                                        benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
        st.SetItemsProcessed(st.iterations() * kBatch);
      })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--threads=", 0) == 0) {
      threads = std::stoi(a.substr(10));
    } else {
      rest.push_back(argv[i]);
    }
  }
  const SamplingParams greedy{.temperature = 0.f, .max_tokens = kMaxOutputs + 1};
  const SamplingParams top_p{.temperature = 0.8f, .top_p = 0.9f, .max_tokens = kMaxOutputs + 1};
  const SamplingParams all{.temperature = 0.8f, .top_k = 50, .top_p = 0.9f, .min_p = 0.05f, .presence_penalty = 0.5f,
                           .frequency_penalty = 0.3f, .repetition_penalty = 1.1f,
                           .logit_bias = {{11, 5.f}, {12, -5.f}, {13, 1.f}}, .max_tokens = kMaxOutputs + 1,
                           .min_tokens = kMaxOutputs, .logprobs = 5, .logprobs_mode = lathe::LogprobsMode::kProcessed};
  for (const int64_t V : {int64_t{32000}, int64_t{151936}}) {
    register_one("Greedy", greedy, V, threads);
    register_one("TopP", top_p, V, threads);
    register_one("AllFeatures", all, V, threads);
  }
  std::vector<std::string> storage;
  int n = static_cast<int>(rest.size());
  std::vector<char*> args = lathe::bench::args_with_median_defaults(n, rest.data(), storage);
  n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
