// Google Benchmark of the per-token log-prob head at GPT-2 124M shapes (N = 512 tokens, C = 768,
// V = 50257): the fused, vocabulary-chunked linear_token_logprobs against the composition
// token_logprobs(linear(h, W)), forward alone and forward + backward (gradients for h and W).
//
//   BM_TokenLogprobs_Fused_Fwd / _Unfused_Fwd           no autograd
//   BM_TokenLogprobs_Fused_FwdBwd/keep:0|1 / _Unfused_FwdBwd   keep 1: the forward's logits kept (the
//                                                         default when N·V f32 fit in 256 MiB), 0: recomputed
// Counters: GFLOP/s of the head GEMMs (2·N·V·C forward; x3 with backward, x4 when recomputing), and
// peak_extra_MiB, the growth of the process's peak resident set during one call over its resident set
// before it (Linux VmHWM, reset through /proc/self/clear_refs; the context's block cache is emptied
// first): the fused forward's is one [N, chunk] f32 block, the composition's the [N, V] logits.
// Run: build/release/logprob_bench --benchmark_repetitions=1 [--threads=N]
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_defaults.h"
#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/logprob.h"

namespace {

using lathe::Tensor;

constexpr int64_t kN = 512, kC = 768, kV = 50257;

// A "VmRSS:" / "VmHWM:" line of /proc/self/status, in KiB (0 where unreadable).
int64_t status_kib(const std::string& key) {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(key.size()));
  return 0;
}

// Starts a peak-memory window: returns the resident KiB now, with the peak reset to it.
int64_t start_peak_window(lathe::Context& ctx) {
  ctx.alloc.release_cache();
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
  return status_kib("VmRSS:");
}

Tensor random_tensor(const lathe::Shape& shape, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(lathe::shape_numel(shape));
  for (float& x : v) x = dist(rng);
  return Tensor::from_data(shape, v);
}

struct Inputs {
  Tensor h, w, targets, g;  // [N, C], [V, C], i32 [N], upstream gradient [N]
};

Inputs make_inputs() {
  std::mt19937 rng(3);
  std::vector<int32_t> t(kN);
  for (int32_t& id : t) id = std::uniform_int_distribution<int32_t>(0, kV - 1)(rng);
  return {random_tensor({kN, kC}, 1, 1.f), random_tensor({kV, kC}, 2, 0.02f), Tensor::from_data_i32({kN}, t),
          random_tensor({kN}, 4, 1.f)};
}

// One call of fn() per iteration (fn reads the shared inputs); peak_extra_MiB from a first, untimed call.
template <class Fn>
void run(benchmark::State& st, int threads, double gemm_flops, Fn fn) {
  lathe::Context ctx(threads);
  lathe::ContextScope scope(ctx);
  const int64_t before = start_peak_window(ctx);
  fn();
  const int64_t peak = status_kib("VmHWM:");
  for (auto _ : st) fn();
  st.counters["GFLOP/s"] = benchmark::Counter(gemm_flops * 1e-9 * st.iterations(), benchmark::Counter::kIsRate);
  st.counters["peak_extra_MiB"] = static_cast<double>(peak - before) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;  // 0: all hardware threads (or LATHE_NUM_THREADS)
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--threads=", 0) == 0) threads = std::stoi(a.substr(10));
    else rest.push_back(argv[i]);
  }
  const Inputs in = make_inputs();
  const double fwd = 2.0 * kN * kV * kC;
  const std::string shape = "/" + std::to_string(kN) + "x" + std::to_string(kC) + "x" + std::to_string(kV);
  auto reg = [&](const std::string& name, double flops, auto fn) {
    benchmark::RegisterBenchmark((name + shape).c_str(), [=](benchmark::State& st) { run(st, threads, flops, fn); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  };
  reg("BM_TokenLogprobs_Fused_Fwd", fwd, [&in] {
    benchmark::DoNotOptimize(lathe::linear_token_logprobs(in.h, in.w, in.targets).logprobs.data<float>());
  });
  reg("BM_TokenLogprobs_Unfused_Fwd", fwd, [&in] {
    benchmark::DoNotOptimize(lathe::token_logprobs(lathe::linear(in.h, in.w), in.targets).data<float>());
  });
  for (const int keep : {0, 1})
    reg("BM_TokenLogprobs_Fused_FwdBwd/keep:" + std::to_string(keep), (keep ? 3 : 4) * fwd, [&in, keep] {
      Tensor h = in.h.detach().set_requires_grad(), w = in.w.detach().set_requires_grad();
      lathe::backward(lathe::linear_token_logprobs(h, w, in.targets, {.keep_logits_bytes = keep ? int64_t{1} << 30 : 0})
                          .logprobs,
                      in.g);
      benchmark::DoNotOptimize(w.grad().data<float>());
    });
  reg("BM_TokenLogprobs_Unfused_FwdBwd", 3 * fwd, [&in] {
    Tensor h = in.h.detach().set_requires_grad(), w = in.w.detach().set_requires_grad();
    lathe::backward(lathe::token_logprobs(lathe::linear(h, w), in.targets), in.g);
    benchmark::DoNotOptimize(w.grad().data<float>());
  });
  std::vector<std::string> storage;
  int n = static_cast<int>(rest.size());
  std::vector<char*> args = lathe::bench::args_with_median_defaults(n, rest.data(), storage);
  int args_n = static_cast<int>(args.size());
  benchmark::Initialize(&args_n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
